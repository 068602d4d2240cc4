/* bench_engine: time the Boltzmann attention core, forward + backward
 * (ba_attention_forward + ba_attention_backward with attn = boltzmann), for
 * the reference and the fast engine on the same random inputs, and compare
 * the fast engine's dense-product throughput with a plain large dgemm
 * measured in the same run.
 *
 * FLOP count of the fast engine (its dense products only), summed over the
 * systems n = 1..T, with a = n/2, b = n - a and Q = B queries of each n:
 *   forward:  R = EV K'^T and L = EU K'                  2 x 2*Q*2^n
 *   backward: R2 and L2                                  2 x 2*Q*2^n
 *             the moment matrix M = UU^T EV (2Q rows)    1 x 2*(2Q)*2^n
 *             (M o K') S_B                               1 x 2*b*2^n
 *   i.e. forward 4*Q*2^n, backward 8*Q*2^n + 2*b*2^n flops per n (for n = 1,
 *   a = 0, the engine skips the last two, so they are not counted there).
 * The kernel build, the exponentials and the rest of the attention core
 * (fields, normalisation, a v) count as overhead: GFLOP/s = these flops /
 * wall time of the whole core.
 *
 * Like the model, each engine gets an engine context (one head), kept across
 * the repetitions of one T, so the backward reuses the forward's kernels and
 * buffers are not reallocated. --no-ctx makes stateless calls instead: then
 * every call allocates its workspace and the backward rebuilds the kernels
 * and R, L (work the FLOP count above leaves out).
 *
 * Exit status: 0 ok, 1 library error, 2 bad arguments. */
#include "boltzattn.h"
#include "internal.h"

#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

int openblas_get_num_threads(void);
char *openblas_get_corename(void);

#define MAX_TS 64
#define BENCH_NAME "bench_engine"
#include "bench_common.h"

static const char *usage_text =
    "usage: bench_engine [--T LIST] [--B N] [--d N] [--reps N] [--ref-max N]\n"
    "                    [--min-time S] [--gemm N] [--seed N] [--j-std S] [--csv PATH]\n"
    "                    [--no-ctx] [--quick]\n"
    "\n"
    "Times forward+backward of the boltzmann attention core (one head, C = d)\n"
    "for the reference and the fast engine on the same random inputs.\n"
    "\n"
    "  --T LIST      comma-separated block sizes (default 8,12,16,20,24)\n"
    "  --B N         batch size = queries per system size (default 64)\n"
    "  --d N         head dimension; C = d, one head (default 64)\n"
    "  --reps N      most timed repetitions per engine and T (default 1000):\n"
    "                after a warm-up run, repeats until --min-time has passed\n"
    "                or N is reached; a first run that alone takes --min-time\n"
    "                and 5 s (the reference at large T) is the only one\n"
    "  --ref-max N   run the reference engine only for T <= N (default 20,\n"
    "                at most 20); 0 skips it\n"
    "  --min-time S  seconds of repetitions per measurement (default 1)\n"
    "  --gemm N      size of the square dgemm baseline (default 2048)\n"
    "  --seed N      seed of the random inputs (default 1)\n"
    "  --j-std S     standard deviation of the couplings J (default 0.3)\n"
    "  --no-ctx      stateless engine calls (no engine context kept between\n"
    "                calls, so the backward rebuilds the forward's state)\n"
    "  --csv PATH    also write the results as CSV\n"
    "  --quick       smoke test: T = 8,12, 1 rep, 1024 dgemm\n"
    "Threads: OMP_NUM_THREADS.\n";

/* Best-of-3 GFLOP/s of an n x n x n dgemm. */
static int gemm_gflops(int n, double *gflops)
{
    size_t nn = (size_t)n * n;
    double *A = malloc(sizeof(double) * nn), *Bm = malloc(sizeof(double) * nn),
           *Cm = malloc(sizeof(double) * nn);
    if (!A || !Bm || !Cm) {
        free(A), free(Bm), free(Cm);
        return 1;
    }
    ba_rng r;
    ba_rng_seed(&r, 7);
    for (size_t i = 0; i < nn; i++) {
        A[i] = ba_rng_uniform(&r) - 0.5;
        Bm[i] = ba_rng_uniform(&r) - 0.5;
        Cm[i] = 0.0;
    }
    double best = INFINITY;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_s();
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, A, n, Bm, n, 0.0, Cm,
                    n);
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    *gflops = 2.0 * n * (double)n * n / best * 1e-9;
    free(A), free(Bm), free(Cm);
    return 0;
}

/* Dense-product flops of one fast forward+backward (see the top comment). */
static double fast_flops(int B, int T)
{
    double f = 0.0;
    for (int n = 1; n <= T; n++) {
        int a = n / 2, b = n - a;
        double p = ldexp(1.0, n);
        f += 4.0 * B * p;     /* forward: R, L */
        f += 4.0 * B * p;     /* backward: R2, L2 */
        if (a > 0 && b > 0) { /* backward: M (2Q rows), (M o K') S_B */
            f += 4.0 * B * p;
            f += 2.0 * b * p;
        }
    }
    return f;
}

typedef struct {
    ba_attn_shape s;
    size_t n_qkv, n_out, n_att, n_J;
    ba_real *qkv, *J, *dout;         /* inputs */
    ba_real *out, *att, *pre;        /* forward outputs */
    ba_real *dqkv, *dJ;              /* backward outputs (zeroed each run) */
    ba_real *r_out, *r_dqkv, *r_dJ;  /* reference results for comparison */
    ba_engine_ctx *ctx[2];           /* one per engine (indexed by ba_engine), or NULL */
} problem;

static void problem_free(problem *p)
{
    ba_real *bufs[] = {p->qkv, p->J,    p->dout, p->out,    p->att,
                       p->pre, p->dqkv, p->dJ,   p->r_out,  p->r_dqkv, p->r_dJ};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    ba_engine_ctx_free(p->ctx[0]);
    ba_engine_ctx_free(p->ctx[1]);
    memset(p, 0, sizeof *p);
}

static int problem_init(problem *p, int B, int T, int d, uint64_t seed, double j_std,
                        int use_ctx)
{
    memset(p, 0, sizeof *p);
    p->s.attn = BA_ATTN_BOLTZMANN;
    p->s.engine = BA_ENGINE_FAST;
    p->s.B = B, p->s.T = T, p->s.C = d, p->s.H = 1, p->s.Tmax = T;
    p->n_qkv = (size_t)B * T * 3 * d;
    p->n_out = (size_t)B * T * d;
    p->n_att = (size_t)B * T * T;
    p->n_J = (size_t)T * T;
    p->qkv = malloc(sizeof(ba_real) * p->n_qkv);
    p->J = malloc(sizeof(ba_real) * p->n_J);
    p->dout = malloc(sizeof(ba_real) * p->n_out);
    p->out = malloc(sizeof(ba_real) * p->n_out);
    p->att = malloc(sizeof(ba_real) * p->n_att);
    p->pre = malloc(sizeof(ba_real) * p->n_att);
    p->dqkv = malloc(sizeof(ba_real) * p->n_qkv);
    p->dJ = malloc(sizeof(ba_real) * p->n_J);
    p->r_out = malloc(sizeof(ba_real) * p->n_out);
    p->r_dqkv = malloc(sizeof(ba_real) * p->n_qkv);
    p->r_dJ = malloc(sizeof(ba_real) * p->n_J);
    if (!p->qkv || !p->J || !p->dout || !p->out || !p->att || !p->pre || !p->dqkv || !p->dJ ||
        !p->r_out || !p->r_dqkv || !p->r_dJ) {
        problem_free(p);
        return 1;
    }
    if (use_ctx && (!(p->ctx[0] = ba_engine_ctx_new()) || !(p->ctx[1] = ba_engine_ctx_new()))) {
        problem_free(p);
        return 1;
    }
    ba_rng r;
    ba_rng_seed(&r, seed * 1000003u + (uint64_t)T);
    for (size_t i = 0; i < p->n_qkv; i++)
        p->qkv[i] = (ba_real)(0.5 * ba_rng_normal(&r));
    for (int j = 0; j < T; j++)
        for (int k = 0; k < T; k++)
            p->J[(size_t)j * T + k] = k > j ? (ba_real)(j_std * ba_rng_normal(&r)) : 0;
    for (size_t i = 0; i < p->n_out; i++)
        p->dout[i] = (ba_real)ba_rng_normal(&r);
    return 0;
}

/* One forward + backward with engine e. */
static int run_once(problem *p, ba_engine e, char *err)
{
    p->s.engine = e;
    p->s.ctx = p->ctx[e] ? &p->ctx[e] : NULL;
    memset(p->dqkv, 0, sizeof(ba_real) * p->n_qkv);
    memset(p->dJ, 0, sizeof(ba_real) * p->n_J);
    int rc = ba_attention_forward(&p->s, p->out, p->att, p->pre, p->qkv, p->J, err);
    if (rc)
        return rc;
    return ba_attention_backward(&p->s, p->dqkv, p->dJ, p->dout, p->qkv, p->J, p->att, p->pre,
                                 err);
}

/* A first run at least this long (and at least min_time) is the only run:
 * the reference engine at T >= 18 or so takes that long, and its workspace is
 * small, so the first run is not slowed by first-touch page faults. Shorter
 * first runs are warm-ups (the fast engine's context allocates and faults in
 * hundreds of MiB at T = 24 in its first call). */
#define SINGLE_RUN_S 5.0

/* Times forward+backward with engine e: a first run; if it alone took
 * max(min_time, SINGLE_RUN_S) it is the measurement, otherwise it was the
 * warm-up and runs are repeated until min_time has passed or max_reps are
 * done. */
static int time_engine(problem *p, ba_engine e, int max_reps, double min_time, double *mean,
                       double *best, int *reps, char *err)
{
    double t0 = now_s();
    int rc = run_once(p, e, err);
    double t1 = now_s() - t0;
    if (rc)
        return rc;
    if (t1 >= min_time && t1 >= SINGLE_RUN_S) {
        *mean = *best = t1, *reps = 1;
        return BA_OK;
    }
    double total = 0.0, bst = INFINITY;
    int n = 0;
    while (n < max_reps && (n == 0 || total < min_time)) {
        t0 = now_s();
        rc = run_once(p, e, err);
        double t = now_s() - t0;
        if (rc)
            return rc;
        total += t, n++;
        bst = t < bst ? t : bst;
    }
    *mean = total / n, *best = bst, *reps = n;
    return BA_OK;
}

/* max |x - y| / max |y| */
static double rel_diff(const ba_real *x, const ba_real *y, size_t n)
{
    double md = 0.0, my = 0.0;
    for (size_t i = 0; i < n; i++) {
        double dd = fabs((double)x[i] - (double)y[i]), ay = fabs((double)y[i]);
        md = dd > md ? dd : md;
        my = ay > my ? ay : my;
    }
    return my > 0 ? md / my : md;
}

/* Engine-level agreement in double: for up to 3 queries (batch element q
 * with n = T - q spins) the reference and fast engines' marginals
 * (max |log w difference|) and backward (dh and dJ for a random upstream
 * gradient, max difference / max |reference|), through the public
 * single-system API. Returns the largest; NAN and a status on error. */
static int engine_agreement(const problem *p, uint64_t seed, double *out, char *err)
{
    int T = p->s.T, C = p->s.C;
    double scale = 1.0 / sqrt((double)C);
    size_t TT = (size_t)T * T;
    double *Jd = calloc(TT, sizeof(double)), *dJr = calloc(TT, sizeof(double)),
           *dJf = calloc(TT, sizeof(double));
    double h[64], g[64], lr[64], lf[64], dhr[64], dhf[64];
    *out = NAN;
    if (!Jd || !dJr || !dJf) {
        free(Jd), free(dJr), free(dJf);
        snprintf(err, BA_ERR_LEN, "out of memory for the agreement check at T = %d", T);
        return BA_ERR_NOMEM;
    }
    for (size_t i = 0; i < TT; i++)
        Jd[i] = p->J[i];
    ba_rng r;
    ba_rng_seed(&r, seed ^ 0x5eedULL);
    double worst = 0.0;
    int rc = BA_OK;
    for (int q = 0; q < 3 && q < p->s.B && T - q >= 1 && !rc; q++) {
        int n = T - q, i = n - 1;
        const ba_real *qi = p->qkv + ((size_t)q * T + i) * 3 * C;
        for (int j = 0; j < n; j++) {
            const ba_real *kj = p->qkv + ((size_t)q * T + j) * 3 * C + C;
            double acc = 0.0;
            for (int c = 0; c < C; c++)
                acc += (double)qi[c] * kj[c];
            h[j] = acc * scale;
            g[j] = ba_rng_normal(&r);
            dhr[j] = dhf[j] = 0.0;
        }
        memset(dJr, 0, sizeof(double) * TT);
        memset(dJf, 0, sizeof(double) * TT);
        rc = ba_ising_marginals(BA_ENGINE_REFERENCE, n, h, Jd, T, lr, err);
        if (!rc)
            rc = ba_ising_marginals(BA_ENGINE_FAST, n, h, Jd, T, lf, err);
        if (!rc)
            rc = ba_ising_backward(BA_ENGINE_REFERENCE, n, h, Jd, T, g, dhr, dJr, err);
        if (!rc)
            rc = ba_ising_backward(BA_ENGINE_FAST, n, h, Jd, T, g, dhf, dJf, err);
        if (rc)
            break;
        double mdh = 0.0, adh = 0.0, mdj = 0.0, adj = 0.0;
        for (int j = 0; j < n; j++) {
            double e = fabs(lf[j] - lr[j]);
            worst = e > worst || e != e ? e : worst;
            mdh = fmax(mdh, fabs(dhf[j] - dhr[j]));
            adh = fmax(adh, fabs(dhr[j]));
        }
        for (size_t k = 0; k < TT; k++) {
            mdj = fmax(mdj, fabs(dJf[k] - dJr[k]));
            adj = fmax(adj, fabs(dJr[k]));
        }
        double e1 = adh > 0 ? mdh / adh : mdh, e2 = adj > 0 ? mdj / adj : mdj;
        worst = fmax(worst, fmax(e1, e2));
    }
    free(Jd), free(dJr), free(dJf);
    if (!rc)
        *out = worst;
    return rc;
}

int main(int argc, char **argv)
{
    int Ts[MAX_TS] = {8, 12, 16, 20, 24}, nT = 5;
    long B = 64, d = 64, reps = 1000, ref_max = 20, gemm_n = 2048, seed = 1;
    double min_time = 1.0, j_std = 0.3;
    const char *csv_path = NULL;
    int quick = 0, T_set = 0, reps_set = 0, gemm_set = 0, use_ctx = 1;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (!strcmp(a, "--quick")) {
            quick = 1;
            continue;
        }
        if (!strcmp(a, "--no-ctx")) {
            use_ctx = 0;
            continue;
        }
        static const char *with_value[] = {"--T",    "--B",    "--d",    "--reps", "--ref-max",
                                           "--min-time", "--gemm", "--seed", "--j-std", "--csv"};
        int known = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            known |= !strcmp(a, with_value[k]);
        if (!known)
            return usage_error("unknown option '%s'", a);
        if (i + 1 >= argc)
            return usage_error("option %s needs a value", a);
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(a, "--T")) {
            bad = parse_list(v, 1, BA_FAST_MAX_SPINS, Ts, &nT);
            T_set = 1;
        } else if (!strcmp(a, "--B")) {
            bad = parse_int(v, 1, 1 << 20, &B);
        } else if (!strcmp(a, "--d")) {
            bad = parse_int(v, 1, 1 << 16, &d);
        } else if (!strcmp(a, "--reps")) {
            bad = parse_int(v, 1, INT_MAX, &reps);
            reps_set = 1;
        } else if (!strcmp(a, "--ref-max")) {
            bad = parse_int(v, 0, BA_REFERENCE_MAX_SPINS, &ref_max);
        } else if (!strcmp(a, "--min-time")) {
            char *end;
            errno = 0;
            min_time = strtod(v, &end);
            bad = errno || end == v || *end || !(min_time >= 0.0 && min_time <= 3600.0);
        } else if (!strcmp(a, "--j-std")) {
            char *end;
            errno = 0;
            j_std = strtod(v, &end);
            bad = errno || end == v || *end || !(j_std >= 0.0 && j_std <= 100.0);
        } else if (!strcmp(a, "--gemm")) {
            bad = parse_int(v, 1, 16384, &gemm_n);
            gemm_set = 1;
        } else if (!strcmp(a, "--seed")) {
            bad = parse_int(v, 0, LONG_MAX, &seed);
        } else if (!strcmp(a, "--csv")) {
            csv_path = v;
        }
        if (bad)
            return usage_error("bad value '%s' for %s", v, a);
    }
    if (quick) {
        if (!T_set)
            Ts[0] = 8, Ts[1] = 12, nT = 2;
        if (!reps_set)
            reps = 1;
        if (!gemm_set)
            gemm_n = 1024;
    }

    FILE *csv = NULL;
    if (csv_path) {
        csv = fopen(csv_path, "w");
        if (!csv) {
            fprintf(stderr, "bench_engine: cannot open '%s' for writing: %s\n", csv_path,
                    strerror(errno));
            return EXIT_USAGE;
        }
        fprintf(csv, "T,B,d,threads,ref_s,ref_best_s,ref_reps,fast_s,fast_best_s,fast_reps,"
                     "ref_over_fast,fast_gflop,fast_gflops,dgemm_gflops,efficiency,"
                     "err_fwd,err_bwd,err_engine\n");
    }

    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    const char *env_thr = getenv("OMP_NUM_THREADS");
    printf("bench_engine: boltzmann attention core, forward+backward (ba_attention_forward + "
           "ba_attention_backward)\n");
    printf("cpu: %s | OpenMP threads: %d (OMP_NUM_THREADS=%s) | OpenBLAS: %d threads, %s\n", cpu,
           omp_threads(), env_thr ? env_thr : "unset", openblas_get_num_threads(),
           openblas_get_corename());
    printf("B = %ld queries per system size, d = C = %ld, H = 1, seed %ld; "
           "qkv ~ 0.5 N(0,1), J ~ %g N(0,1) on j<k, dout ~ N(0,1)\n",
           B, d, seed, j_std);
    printf("timing: warm-up run, then repeats until %.2g s or %ld reps (mean reported); a first "
           "run\n        over max(%.2g, %.0f) s is the only one; reference only for T <= %ld;\n"
           "        %s\n",
           min_time, reps, min_time, SINGLE_RUN_S, ref_max,
           use_ctx ? "one engine context per engine, kept across the reps of a T (as in the model)"
                   : "stateless engine calls (--no-ctx)");
    printf("GFLOP = fast engine's dense products per fwd+bwd, summed over n = 1..T with "
           "Q = B, b = n - n/2:\n"
           "        forward 4*Q*2^n (R, L), backward 8*Q*2^n + 2*b*2^n (R2, L2, M, (M o K') "
           "S_B);\n"
           "        non-GEMM work%s is not counted\n",
           use_ctx ? "" : " and the stateless backward's rebuilt R, L");
    fflush(stdout);

    double gemm_gf;
    if (gemm_gflops((int)gemm_n, &gemm_gf)) {
        fprintf(stderr, "bench_engine: cannot allocate the %ld x %ld dgemm\n", gemm_n, gemm_n);
        if (csv)
            fclose(csv);
        return 1;
    }
    printf("dgemm %ld x %ld x %ld (best of 3): %.1f GFLOP/s\n\n", gemm_n, gemm_n, gemm_n,
           gemm_gf);
    printf("%3s  %12s %5s  %12s %5s  %9s  %8s  %8s  %7s  %9s  %9s  %9s\n", "T", "ref ms",
           "reps", "fast ms", "reps", "ref/fast", "GFLOP", "GFLOP/s", "/dgemm", "err fwd",
           "err bwd", "err eng");
    fflush(stdout);

    char err[BA_ERR_LEN];
    for (int ti = 0; ti < nT; ti++) {
        int T = Ts[ti];
        problem p;
        if (problem_init(&p, (int)B, T, (int)d, (uint64_t)seed, j_std, use_ctx)) {
            fprintf(stderr, "bench_engine: out of memory for T = %d\n", T);
            if (csv)
                fclose(csv);
            return 1;
        }
        int have_ref = T <= ref_max;
        double rmean = NAN, rbest = NAN, fmean, fbest;
        int rreps = 0, freps, rc = BA_OK;
        if (have_ref) {
            rc = time_engine(&p, BA_ENGINE_REFERENCE, (int)reps, min_time, &rmean, &rbest,
                             &rreps, err);
            if (!rc) {
                memcpy(p.r_out, p.out, sizeof(ba_real) * p.n_out);
                memcpy(p.r_dqkv, p.dqkv, sizeof(ba_real) * p.n_qkv);
                memcpy(p.r_dJ, p.dJ, sizeof(ba_real) * p.n_J);
            }
        }
        if (!rc)
            rc = time_engine(&p, BA_ENGINE_FAST, (int)reps, min_time, &fmean, &fbest, &freps,
                             err);
        if (rc) {
            fprintf(stderr, "bench_engine: T = %d: %s (%s)\n", T, err, ba_status_str(rc));
            problem_free(&p);
            if (csv)
                fclose(csv);
            return 1;
        }
        double ef = NAN, eb = NAN, ee = NAN;
        if (have_ref) {
            rc = engine_agreement(&p, (uint64_t)seed, &ee, err);
            if (rc) {
                fprintf(stderr, "bench_engine: T = %d: %s (%s)\n", T, err, ba_status_str(rc));
                problem_free(&p);
                if (csv)
                    fclose(csv);
                return 1;
            }
            ef = rel_diff(p.out, p.r_out, p.n_out);
            double e1 = rel_diff(p.dqkv, p.r_dqkv, p.n_qkv), e2 = rel_diff(p.dJ, p.r_dJ, p.n_J);
            eb = e1 > e2 ? e1 : e2;
        }
        double gflop = fast_flops((int)B, T) * 1e-9, gfs = gflop / fmean;
        char rms[32] = "-", rrep[16] = "-", ratio[32] = "-", sef[32] = "-", seb[32] = "-",
             see[32] = "-";
        if (have_ref) {
            snprintf(rms, sizeof rms, "%.3f", rmean * 1e3);
            snprintf(rrep, sizeof rrep, "%d", rreps);
            snprintf(ratio, sizeof ratio, "%.1f", rmean / fmean);
            snprintf(sef, sizeof sef, "%.2e", ef);
            snprintf(seb, sizeof seb, "%.2e", eb);
            snprintf(see, sizeof see, "%.2e", ee);
        }
        printf("%3d  %12s %5s  %12.3f %5d  %9s  %8.4f  %8.2f  %7.3f  %9s  %9s  %9s\n", T, rms,
               rrep, fmean * 1e3, freps, ratio, gflop, gfs, gfs / gemm_gf, sef, seb, see);
        fflush(stdout);
        if (csv) {
            fprintf(csv, "%d,%ld,%ld,%d,", T, B, d, omp_threads());
            if (have_ref)
                fprintf(csv, "%.6g,%.6g,%d,", rmean, rbest, rreps);
            else
                fprintf(csv, ",,,");
            fprintf(csv, "%.6g,%.6g,%d,", fmean, fbest, freps);
            if (have_ref)
                fprintf(csv, "%.6g,", rmean / fmean);
            else
                fprintf(csv, ",");
            fprintf(csv, "%.6g,%.6g,%.6g,%.6g,", gflop, gfs, gemm_gf, gfs / gemm_gf);
            if (have_ref)
                fprintf(csv, "%.3g,%.3g,%.3g\n", ef, eb, ee);
            else
                fprintf(csv, ",,\n");
            fflush(csv);
        }
        problem_free(&p);
    }
    printf("\nerr fwd: max|out_fast - out_ref| / max|out_ref| of the float attention output; "
           "err bwd: the same for dqkv and dJ\n"
           "(the larger); err eng: the engines alone in double on 3 queries (n = T, T-1, T-2): "
           "max |log w| difference\nand max relative difference of dh, dJ for a random upstream "
           "gradient (the largest of the three)\n");
    if (csv && fclose(csv)) {
        fprintf(stderr, "bench_engine: error writing '%s'\n", csv_path);
        return 1;
    }
    return 0;
}
