/* bench_approx_gemm: the mf and tap engines' batched GEMM path
 * (src/ising/approx_gemm.c) against their per-query path
 * (ba_approx_forward/backward), on the Ising solve alone: one (B,T,T) block
 * of attention rows, fields h ~ N(0, --h-std^2), dL/dm ~ N(0,1), couplings
 * of the paper-like pattern by distance at strength --a: J(1) = a/2,
 * J(2..4) = a, J(5) = 0, J(>=6) = -a/2, full range; settings
 * ba_approx_default() (tol 1e-8) with --damping and --max-iter (defaults
 * 0.5 and 1000, the default's).
 *
 * For each engine and T: the per-query path once (unless --no-perquery),
 * then the GEMM path with each Anderson history depth of --memory (0: plain
 * damped Jacobi on the GEMM path), each forward then backward, timed once
 * (wall seconds, and the CPU seconds of both: on a loaded machine the CPU
 * time is the steadier figure); sweeps per row (mean, max), rows retried/unconverged, and
 * the largest |logw| difference from the per-query path (or from the first
 * GEMM run).
 *
 * Threads: --threads, else 1. Exit status: 0 ok, 1 a library error, 2 bad
 * arguments. */
#include "ising/approx_gemm.h"
#include "boltzattn.h"
#include "ising/ising.h" /* the engines behind the table, timed directly */
#include "opts.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define MAX_TS 8
#define MAX_MEMS 8

static opt gemm_opts[] = {
    {"T", "LIST", "256", "block sizes, 1..4096", 0, 0},
    {"B", "N", "8", "batch size", 0, 0},
    {"a", "X", "0.1", "coupling strength of the paper-like pattern", 0, 0},
    {"h-std", "S", "1", "std of the fields", 0, 0},
    {"damping", "X", "0.5", "the settings' damping", 0, 0},
    {"max-iter", "N", "1000", "the settings' max_iter", 0, 0},
    {"forward-only", NULL, NULL, "time the forward alone", 0, 0},
    {"engines", "LIST", "mf,tap", "engines: mf, tap, or both", 0, 0},
    {"memory", "LIST", "5", "Anderson history depths to run (0: plain damped Jacobi)", 0, 0},
    {"no-perquery", NULL, NULL, "skip the per-query path (slow at large T)", 0, 0},
    {"threads", "N", "1", "OpenMP and BLAS threads", 0, 0},
    {"seed", "N", "1", "seed of the random inputs", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command gemm_cmd = {
    NULL,
    "[--T LIST] [--B N] [--a X] [--h-std S] [--engines LIST] [--memory LIST]\n"
    "                         [--no-perquery] [--threads N] [--seed N]\n\n"
    "The mf and tap engines' batched GEMM path against their per-query path:\n"
    "forward and backward of one (B,T,T) block, sweeps and seconds.",
    gemm_opts};

typedef struct {
    double tf, tb, cpu; /* wall seconds forward, backward; CPU seconds of both */
    ba_approx_stats f, b;
} run_res;

/* CPU seconds of the process (all its threads). */
static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void print_row(const char *eng, int T, const char *path, int mem, const run_res *r,
                      double diff)
{
    char m[16];
    snprintf(m, sizeof m, mem < 0 ? "-" : "%d", mem);
    printf("%-4s %5d %-9s %3s %9.3f %9.3f %9.3f %9.3f %8.1f %6d %7ld %6ld %6ld %8.1f %10.2e\n", eng,
           T, path, m, r->tf, r->tb, r->tf + r->tb, r->cpu,
           r->f.queries ? (double)r->f.sweeps / (double)r->f.queries : 0.0, r->f.max_sweeps,
           r->f.retried, r->f.unconverged, r->b.unconverged,
           r->b.queries ? (double)r->b.sweeps / (double)r->b.queries : 0.0, diff);
}

/* One forward + backward; mem < 0: the per-query path. */
static double damping = 0.5;
static int max_iter = 1000, forward_only = 0;

static int run(ba_engine e, int mem, int B, int T, const double *h, const double *J,
               const double *g, double *lw, double *dh, double *dJ, run_res *r, char *err)
{
    ba_approx a = ba_approx_default();
    a.damping = damping, a.max_iter = max_iter;
    memset(r, 0, sizeof *r);
    memset(dh, 0, sizeof(double) * (size_t)B * T * T), memset(dJ, 0, sizeof(double) * T * T);
    double t0 = now_s(), c0 = cpu_s();
    int rc = mem < 0 ? ba_approx_forward(e, &a, 0, B, T, h, J, T, lw, &r->f, err)
                     : ba_approx_gemm_forward_m(e, &a, mem, B, T, h, J, T, lw, &r->f, err);
    double t1 = now_s();
    if (!rc && !forward_only)
        rc = mem < 0 ? ba_approx_backward(e, &a, 0, B, T, h, J, T, g, dh, dJ, &r->b, err)
                     : ba_approx_gemm_backward_m(e, &a, mem, B, T, h, J, T, g, dh, dJ, &r->b,
                                                 err);
    r->tf = t1 - t0, r->tb = now_s() - t1, r->cpu = cpu_s() - c0;
    return rc;
}

static int bench_T(int T, int B, double a, double hstd, const int *eng, const int *mems,
                   int nm, int perq, ba_rng *rng)
{
    size_t n = (size_t)B * T * T;
    double *h = malloc(sizeof(double) * n), *g = malloc(sizeof(double) * n);
    double *lw = malloc(sizeof(double) * n), *lw0 = malloc(sizeof(double) * n);
    double *dh = malloc(sizeof(double) * n), *J = malloc(sizeof(double) * T * T);
    double *dJ = malloc(sizeof(double) * T * T);
    int status = 0;
    if (!h || !g || !lw || !lw0 || !dh || !J || !dJ) {
        fprintf(stderr, "%s: out of memory at T = %d\n", prog, T);
        status = 1;
    }
    for (size_t e = 0; !status && e < n; e++)
        h[e] = hstd * ba_rng_normal(rng), g[e] = ba_rng_normal(rng);
    for (int j = 0; !status && j < T; j++)
        for (int k = 0; k < T; k++) {
            int d = k - j;
            J[(size_t)j * T + k] = d <= 0 ? 0.0 : d == 1 ? a / 2 : d <= 4 ? a : d == 5 ? 0 : -a / 2;
        }
    for (int k = 0; !status && k < 2; k++) {
        if (!eng[k])
            continue;
        ba_engine e = k ? BA_ENGINE_TAP : BA_ENGINE_MF;
        int have_ref = 0;
        for (int q = perq ? -1 : 0; q < nm; q++) {
            int mem = q < 0 ? -1 : mems[q];
            run_res r;
            char err[BA_ERR_LEN];
            if (run(e, mem, B, T, h, J, g, have_ref ? lw : lw0, dh, dJ, &r, err)) {
                fprintf(stderr, "%s: %s\n", prog, err);
                status = 1;
                continue;
            }
            double diff = 0.0;
            for (size_t x = 0; have_ref && x < n; x++)
                if ((int)(x % T) <= (int)((x / T) % T))
                    diff = fmax(diff, fabs(lw[x] - lw0[x]));
            print_row(k ? "tap" : "mf", T, mem < 0 ? "per-query" : "gemm", mem, &r,
                      have_ref ? diff : NAN);
            have_ref = 1;
        }
    }
    free(h), free(g), free(lw), free(lw0), free(dh), free(J), free(dJ);
    return status;
}

int main(int argc, char **argv)
{
    prog = "bench_approx_gemm"; /* messages name this program (cli/opts.c) */
    const command *c = &gemm_cmd;
    int rc = parse_args(c, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    int Ts[MAX_TS], nT, mems[MAX_MEMS], nm, B, eng[2] = {0, 0};
    double a, hstd;
    long seed;
    if ((rc = get_int_list(c, "T", 1, BA_MAX_BLOCK, Ts, MAX_TS, &nT)) ||
        (rc = get_int(c, "B", 1, 4096, &B)) || (rc = get_double(c, "a", -100.0, 100.0, &a)) ||
        (rc = get_double(c, "h-std", 0.0, 100.0, &hstd)) ||
        (rc = get_double(c, "damping", 1e-6, 1.0, &damping)) ||
        (rc = get_int(c, "max-iter", 1, BA_APPROX_MAX_ITER, &max_iter)) ||
        (rc = get_int_list(c, "memory", 0, BA_APPROX_GEMM_MAX_MEMORY, mems, MAX_MEMS, &nm)) ||
        (rc = get_long(c, "seed", 0, LONG_MAX, &seed)))
        return rc;
    for (const char *v = get_str(c, "engines"); *v;) {
        size_t len = strcspn(v, ",");
        if (len == 2 && !strncmp(v, "mf", 2))
            eng[0] = 1;
        else if (len == 3 && !strncmp(v, "tap", 3))
            eng[1] = 1;
        else
            return usage_error(c, "--engines: unknown engine '%.*s' (mf, tap)", (int)len, v);
        v += len + (v[len] == ',');
    }
    forward_only = is_set(c, "forward-only");
    if (is_set(c, "threads")) {
        if ((rc = apply_threads(c)))
            return rc;
    } else
        set_threads(1);
    printf("B = %d, a = %g, h std %g, threads %d, damping %g, tol 1e-8, max_iter %d\n", B, a,
           hstd, threads_in_use(), damping, max_iter);
    printf("%-4s %5s %-9s %3s %9s %9s %9s %9s %8s %6s %7s %6s %6s %8s %10s\n", "eng", "T", "path",
           "mem", "fwd s", "bwd s", "total s", "cpu s", "sweeps", "max", "retried", "unconv", "bw-unc",
           "adj-sw", "max|dlogw|");
    ba_rng rng;
    ba_rng_seed(&rng, (uint64_t)seed);
    int status = 0;
    for (int t = 0; t < nT; t++)
        status |= bench_T(Ts[t], B, a, hstd, eng, mems, nm, !is_set(c, "no-perquery"), &rng);
    return status;
}
