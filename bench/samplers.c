/* bench_samplers: DQA state-vector kernels and per-shot sampler costs: the
 * DQA simulator's kernels against the memory bandwidth of the same machine,
 * and the per-shot cost of every sampler.
 *
 * Kernels, for each n (state of 2^n complex doubles, split re/im arrays):
 *   driver  ba_dqa_step without phase: prod_j (cos a + i sin a X_j), one
 *           2x2 rotation per qubit and amplitude pair, cache-blocked;
 *           reported in ns per amplitude per qubit;
 *   wht     the same operator through a Walsh-Hadamard transform, a phase
 *           of the popcount and a second transform (H^n D H^n), blocked the
 *           same way: the alternative the library does not use, timed here
 *           to justify that (and checked to give the same state);
 *   phase   ba_dqa_phase: psi <- exp(-i c E) psi (vectorised sin/cos of
 *           c E(x)); ns per amplitude;
 *   step    a fused Trotter step (phase + driver) per amplitude;
 *   stream  the bandwidth baseline: one in-place pass re, im <- (a re - b im,
 *           a im + b re) over the same 2^n amplitudes (16 bytes read and 16
 *           written per amplitude), in ns per amplitude and GB/s.
 * A kernel "at the memory limit" would take stream's time per pass; the
 * driver's ns per amplitude per qubit divided by stream's ns per amplitude
 * is the number of memory passes per qubit it costs (below 1 when blocking
 * keeps several qubits' work in cache).
 *
 * Samplers: per-shot wall time of ba_sample with default parameters
 * (256 shots) for gibbs and sa, and for dqa (the whole simulation divided
 * by its shots), on random instances h ~ N(0,1), J ~ N(0,0.3).
 *
 * This program measures cost only. How close the samplers' shots come to
 * the exact distribution (total variation, KL, effective temperature; this
 * program's former --quality-shots table, when it was bench_dqa) is the
 * library's measurement, ba_sampler_measure (which a sampled training run's
 * quality records use), and DQA's calibration is `boltzattn dqa`; a second
 * copy of that measurement here could drift from them.
 *
 * Exit status: 0 ok, 1 library error, 2 bad arguments. */
#include "boltzattn.h"
#include "ising/ising.h" /* the samplers' kernels, timed directly */
#include "opts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* the library's vector versions of the hot loops (src/ising/samplers.c) */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define WHT_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef WHT_CLONES
#define WHT_CLONES
#endif

#define MAX_NS 32

static opt samplers_opts[] = {
    {"n", "LIST", "12,16,20,24", "state sizes for the kernels, at most 24", 0, 0},
    {"sampler-n", "LIST", "8,12,16", "system sizes for the per-shot costs, at most 24", 0, 0},
    {"threads", "N", "OMP_NUM_THREADS or all cores", "OpenMP threads", 0, 0},
    {"min-time", "S", "0.5", "seconds of repetitions per measurement", 0, 0},
    {"quick", NULL, NULL,
     "smoke test: n = 10,13, sampler n = 6, 0.02 s (unless given explicitly)", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command samplers_cmd = {
    NULL,
    "[--n LIST] [--sampler-n LIST] [--threads N] [--min-time S] [--quick]\n\n"
    "DQA state-vector kernels and per-shot sampler costs. Times the DQA simulator's\n"
    "kernels (driver, phase, fused step, and a Walsh-Hadamard driver for comparison)\n"
    "next to an in-place memory pass over the same data, then the per-shot cost of the\n"
    "gibbs, sa and dqa samplers.\n\n"
    "Cost only: the samplers' quality (total variation of their shots against the\n"
    "exact distribution) is no longer measured here; the former --quality-shots\n"
    "table is ba_sampler_measure in the library, and DQA's calibration is\n"
    "`boltzattn dqa`.",
    samplers_opts};

/* ------------------------------------------------------------ timing */

/* Mean seconds per call of fn over repetitions lasting min_time (after one
 * warm-up call). */
typedef void (*kernel_fn)(void *ctx);
static double time_it(kernel_fn fn, void *ctx, double min_time, int *reps)
{
    fn(ctx);
    double t0 = now_s(), t;
    int n = 0;
    do {
        fn(ctx);
        n++;
        t = now_s() - t0;
    } while (t < min_time);
    *reps = n;
    return t / n;
}

typedef struct {
    int n;
    double *re, *im, *E;
    double a, coef;
} kctx;

static void k_driver(void *c)
{
    kctx *k = c;
    ba_dqa_step(k->n, k->re, k->im, NULL, 0.0, k->a);
}

static void k_phase(void *c)
{
    kctx *k = c;
    ba_dqa_phase(k->n, k->re, k->im, k->E, k->coef);
}

static void k_step(void *c)
{
    kctx *k = c;
    ba_dqa_step(k->n, k->re, k->im, k->E, k->coef, k->a);
}

/* The bandwidth baseline: one in-place rotation of every amplitude. */
WHT_CLONES
static void k_stream(void *c)
{
    kctx *k = c;
    size_t N = (size_t)1 << k->n;
    double a = cos(k->a), b = sin(k->a), *restrict re = k->re, *restrict im = k->im;
#pragma omp parallel for schedule(static) if (N > 65536)
    for (size_t i = 0; i < N; i++) {
        double x = re[i], y = im[i];
        re[i] = a * x - b * y;
        im[i] = a * y + b * x;
    }
}

/* ------------------------------------------- Walsh-Hadamard comparison */

/* the library's block sizes (src/ising/samplers.c) */
#define WHT_LO 11
#define WHT_CB 5

/* Unnormalised butterflies (u, v) -> (u + v, u - v) for qubits [q0, q1) of
 * a contiguous block. */
WHT_CLONES
static void wht_block(double *re, double *im, size_t len, int q0, int q1)
{
    for (int j = q0; j < q1; j++) {
        size_t st = (size_t)1 << j;
        for (size_t b = 0; b < len; b += 2 * st) {
            double *restrict r0 = re + b, *restrict i0 = im + b, *restrict r1 = re + b + st,
                             *restrict i1 = im + b + st;
            for (size_t i = 0; i < st; i++) {
                double a = r0[i], x = r1[i], c = i0[i], y = i1[i];
                r0[i] = a + x, r1[i] = a - x, i0[i] = c + y, i1[i] = c - y;
            }
        }
    }
}

/* The whole transform, blocked like the library's driver: low qubits per
 * block, high qubits in tiles gathered into a buffer. */
static void wht(int n, double *re, double *im)
{
    size_t N = (size_t)1 << n;
    int lo = n < WHT_LO ? n : WHT_LO;
    size_t B = (size_t)1 << lo;
#pragma omp parallel for schedule(static) if (N * (size_t)n > 2000000)
    for (size_t k = 0; k < N / B; k++)
        wht_block(re + k * B, im + k * B, B, 0, lo);
    int nh = n - lo, gmax = WHT_LO - WHT_CB;
    if (nh <= 0)
        return;
    int ng = (nh + gmax - 1) / gmax;
    for (int gi = 0, q0 = lo; gi < ng; gi++) {
        int g = nh / ng + (gi < nh % ng), lowbits = q0 - WHT_CB;
        size_t L = (size_t)1 << WHT_CB, nch = (size_t)1 << g, nt = N >> (g + WHT_CB);
#pragma omp parallel for schedule(static) if (N * (size_t)g > 2000000)
        for (size_t t = 0; t < nt; t++) {
            double br[1 << WHT_LO], bi[1 << WHT_LO];
            size_t base = ((t & (((size_t)1 << lowbits) - 1)) << WHT_CB) |
                          ((t >> lowbits) << (q0 + g));
            for (size_t c = 0; c < nch; c++) {
                memcpy(br + c * L, re + base + (c << q0), sizeof(double) * L);
                memcpy(bi + c * L, im + base + (c << q0), sizeof(double) * L);
            }
            wht_block(br, bi, L * nch, WHT_CB, WHT_CB + g);
            for (size_t c = 0; c < nch; c++) {
                memcpy(re + base + (c << q0), br + c * L, sizeof(double) * L);
                memcpy(im + base + (c << q0), bi + c * L, sizeof(double) * L);
            }
        }
        q0 += g;
    }
}

/* exp(i a sum X_j) = H^n diag(exp(i a (n - 2 popcount y))) H^n, with the
 * two unnormalised transforms' factor 2^n folded into the diagonal. */
typedef struct {
    kctx *k;
    double tr[BA_DQA_MAX_SPINS + 1], ti[BA_DQA_MAX_SPINS + 1];
} wctx;

static void k_wht(void *c)
{
    wctx *w = c;
    int n = w->k->n;
    size_t N = (size_t)1 << n;
    double *re = w->k->re, *im = w->k->im;
    wht(n, re, im);
#pragma omp parallel for schedule(static) if (N > 65536)
    for (size_t y = 0; y < N; y++) {
        int pc = __builtin_popcountll((unsigned long long)y);
        double a = re[y], b = im[y], cr = w->tr[pc], ci = w->ti[pc];
        re[y] = a * cr - b * ci;
        im[y] = a * ci + b * cr;
    }
    wht(n, re, im);
}

static void wctx_init(wctx *w, kctx *k)
{
    w->k = k;
    double scale = ldexp(1.0, -k->n);
    for (int pc = 0; pc <= k->n; pc++) {
        double ang = k->a * (k->n - 2 * pc);
        w->tr[pc] = scale * cos(ang), w->ti[pc] = scale * sin(ang);
    }
}

/* ------------------------------------------------------------- main */

static void random_instance(ba_rng *r, int n, double *h, double *J)
{
    for (int j = 0; j < n; j++) {
        h[j] = ba_rng_normal(r);
        for (int k = 0; k < n; k++)
            J[j * n + k] = k > j ? 0.3 * ba_rng_normal(r) : 0.0;
    }
}

typedef struct {
    int ns[MAX_NS], nn;   /* kernel state sizes */
    int sns[MAX_NS], nsn; /* sampler system sizes */
    double min_time;
} bench_args;

/* The options into a (and --threads applied); 0, -1 after --help, or an
 * exit code after printing the problem. */
static int read_args(int argc, char **argv, bench_args *a)
{
    const command *c = &samplers_cmd;
    int rc = parse_args(c, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc)
        return rc;
    if ((rc = get_int_list(c, "n", 1, BA_DQA_MAX_SPINS, a->ns, MAX_NS, &a->nn)) ||
        (rc = get_int_list(c, "sampler-n", 1, BA_DQA_MAX_SPINS, a->sns, MAX_NS, &a->nsn)) ||
        (rc = get_double(c, "min-time", 0.0, 3600.0, &a->min_time)) || (rc = apply_threads(c)))
        return rc;
    if (is_set(c, "quick")) {
        if (!is_set(c, "n"))
            a->ns[0] = 10, a->ns[1] = 13, a->nn = 2;
        if (!is_set(c, "sampler-n"))
            a->sns[0] = 6, a->nsn = 1;
        if (!is_set(c, "min-time"))
            a->min_time = 0.02;
    }
    return 0;
}

/* Max |difference| between the library's driver and the Walsh-Hadamard one
 * applied to the same state (a phased uniform superposition, left in k):
 * the check that the comparison times two forms of one operator. 0, or 1
 * when out of memory. */
static int drivers_agree(kctx *k, double *diff)
{
    int n = k->n;
    size_t N = (size_t)1 << n;
    double *r2 = malloc(sizeof(double) * N), *i2 = malloc(sizeof(double) * N);
    if (!r2 || !i2) {
        free(r2), free(i2);
        return 1;
    }
    double amp = 1.0 / sqrt((double)N);
    for (size_t x = 0; x < N; x++)
        k->re[x] = amp, k->im[x] = 0.0;
    ba_dqa_phase(n, k->re, k->im, k->E, 0.3);
    memcpy(r2, k->re, sizeof(double) * N);
    memcpy(i2, k->im, sizeof(double) * N);
    k_driver(k);
    kctx k2 = *k;
    k2.re = r2, k2.im = i2;
    wctx w2;
    wctx_init(&w2, &k2);
    k_wht(&w2);
    *diff = 0.0;
    for (size_t x = 0; x < N; x++)
        *diff = fmax(*diff, fmax(fabs(k->re[x] - r2[x]), fabs(k->im[x] - i2[x])));
    free(r2), free(i2);
    return 0;
}

/* One row of the kernel table: every kernel on a random n-spin instance. 0,
 * or 1 after printing the problem. */
static int kernel_row(int n, double min_time, ba_rng *rng)
{
    size_t N = (size_t)1 << n, alloc = sizeof(double) * (N < 8 ? 8 : N);
    kctx k = {n, NULL, NULL, NULL, 0.37, 0.011};
    k.re = aligned_alloc(64, alloc);
    k.im = aligned_alloc(64, alloc);
    k.E = aligned_alloc(64, alloc);
    double h[BA_DQA_MAX_SPINS], J[BA_DQA_MAX_SPINS * BA_DQA_MAX_SPINS], diff;
    int bad = !k.re || !k.im || !k.E;
    if (!bad) {
        random_instance(rng, n, h, J);
        ba_dqa_energies(n, h, J, n, k.E, k.re);
        bad = drivers_agree(&k, &diff);
    }
    if (bad) {
        fprintf(stderr, "%s: out of memory at n = %d\n", prog, n);
        free(k.re), free(k.im), free(k.E);
        return 1;
    }
    wctx w;
    wctx_init(&w, &k);
    int reps;
    double ts = time_it(k_stream, &k, min_time, &reps) / N;
    double td = time_it(k_driver, &k, min_time, &reps) / N / n;
    double tw = time_it(k_wht, &w, min_time, &reps) / N / n;
    double tp = time_it(k_phase, &k, min_time, &reps) / N;
    double tf = time_it(k_step, &k, min_time, &reps) / N;
    printf("%3d %9.3f %8.2f | %9.3f %7.2f | %9.3f %7.2f | %9.3f %7.2f | %9.3f %7.2f | "
           "%9.1e\n",
           n, ts * 1e9, 32.0 / ts * 1e-9, td * 1e9, td / ts, tw * 1e9, tw / ts, tp * 1e9,
           tp / ts, tf * 1e9, tf / ts, diff);
    fflush(stdout);
    free(k.re), free(k.im), free(k.E);
    return 0;
}

/* Microseconds per shot of sampler s on one system, over calls repeated for
 * min_time. 0, or 1 after printing the problem. */
static int per_shot_us(const ba_sampler *s, int n, const double *h, const double *J,
                       double min_time, ba_rng *rng, double *us)
{
    uint64_t *shots = malloc(sizeof(uint64_t) * s->shots);
    if (!shots) {
        fprintf(stderr, "%s: out of memory for %d shots\n", prog, s->shots);
        return 1;
    }
    char err[BA_ERR_LEN];
    double t0 = now_s(), el;
    int reps = 0;
    do {
        int rc = ba_sample(s, n, h, J, n, rng, shots, err);
        if (rc) {
            fprintf(stderr, "%s: %s: %s\n", prog, ba_sampler_name(s->kind), err);
            free(shots);
            return 1;
        }
        reps++;
        el = now_s() - t0;
    } while (el < min_time);
    *us = el / reps / s->shots * 1e6;
    free(shots);
    return 0;
}

/* One row of the per-shot table: gibbs, sa and dqa on a random n-spin
 * instance. 0, or 1 after printing the problem. */
static int sampler_row(int n, double min_time, ba_rng *rng)
{
    double h[BA_DQA_MAX_SPINS], J[BA_DQA_MAX_SPINS * BA_DQA_MAX_SPINS], us[3];
    random_instance(rng, n, h, J);
    static const ba_sampler_kind kinds[3] = {BA_SAMPLER_GIBBS, BA_SAMPLER_SA, BA_SAMPLER_DQA};
    for (int ki = 0; ki < 3; ki++) {
        ba_sampler s = ba_sampler_default(kinds[ki]);
        if (per_shot_us(&s, n, h, J, min_time, rng, &us[ki]))
            return 1;
    }
    ba_sampler d = ba_sampler_default(BA_SAMPLER_DQA);
    printf("%3d %12.3f %12.3f %12.3f %12.3f   %g, %d, %d\n", n, us[0], us[1], us[2],
           us[2] * d.shots * 1e-3, d.tau, d.trotter_steps, d.order);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    prog = "bench_samplers"; /* messages name this program (cli/opts.c) */
    bench_args a = {{12, 16, 20, 24}, 4, {8, 12, 16}, 3, 0.5};
    int rc = read_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    printf("%s: DQA state-vector kernels and per-shot sampler costs\n", prog);
    printf("cpu: %s | OpenMP threads: %d | min time %.2g s per measurement\n", cpu,
           threads_in_use(), a.min_time);
    printf("stream: in-place rotation pass, 32 bytes of traffic per amplitude; driver and wht "
           "in ns per\namplitude per qubit, phase and step in ns per amplitude; "
           "x stream = time / stream's time per amplitude\n\n");
    printf("%3s %9s %8s | %9s %7s | %9s %7s | %9s %7s | %9s %7s | %9s\n", "n", "stream", "GB/s",
           "driver", "x strm", "wht", "x strm", "phase", "x strm", "step", "x strm",
           "wht-drv");
    fflush(stdout);

    /* one stream for every instance, kernels first, as the tables read */
    ba_rng rng;
    ba_rng_seed(&rng, 1);
    for (int t = 0; t < a.nn; t++)
        if (kernel_row(a.ns[t], a.min_time, &rng))
            return 1;
    printf("(wht-drv: max |difference| of the two drivers' states, a check of the comparison)\n");

    printf("\nper-shot cost, default parameters (256 shots per call), h ~ N(0,1), J ~ "
           "N(0,0.3):\n");
    printf("%3s %12s %12s %12s %12s   %s\n", "n", "gibbs us", "sa us", "dqa us", "dqa call ms",
           "dqa: tau, M, order");
    for (int t = 0; t < a.nsn; t++)
        if (sampler_row(a.sns[t], a.min_time, &rng))
            return 1;
    return 0;
}
