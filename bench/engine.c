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
#include "model/model.h" /* the engines and the attention core, timed directly */
#include "opts.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int openblas_get_num_threads(void);
char *openblas_get_corename(void);


#define MAX_TS 64

static opt engine_opts[] = {
    {"T", "LIST", "8,12,16,20,24", "comma-separated block sizes, 1..26", 0, 0},
    {"B", "N", "64", "batch size = queries per system size", 0, 0},
    {"d", "N", "64", "head dimension; C = d, one head", 0, 0},
    {"reps", "N", "1000", "most timed repetitions per engine and T (see above)", 0, 0},
    {"ref-max", "N", "20", "run the reference engine only for T <= N (at most 20); 0 skips it",
     0, 0},
    {"min-time", "S", "1", "seconds of repetitions per measurement", 0, 0},
    {"gemm", "N", "2048", "size of the square dgemm baseline", 0, 0},
    {"seed", "N", "1", "seed of the random inputs", 0, 0},
    {"j-std", "S", "0.3", "standard deviation of the couplings J", 0, 0},
    {"no-ctx", NULL, NULL,
     "stateless engine calls (no context kept: the backward rebuilds the forward's state)", 0,
     0},
    {"csv", "PATH", NULL, "also write the results as CSV", 0, 0},
    {"quick", NULL, NULL, "smoke test: T = 8,12, 1 rep, 1024 dgemm (unless given explicitly)", 0,
     0},
    {0, 0, 0, 0, 0, 0},
};
static const command engine_cmd = {
    NULL,
    "[--T LIST] [--B N] [--d N] [--reps N] [--ref-max N]\n"
    "                    [--min-time S] [--gemm N] [--seed N] [--j-std S] [--csv PATH]\n"
    "                    [--no-ctx] [--quick]\n\n"
    "Times forward+backward of the boltzmann attention core (one head, C = d)\n"
    "for the reference and the fast engine on the same random inputs. After a\n"
    "warm-up run, each engine and T repeats until --min-time has passed or --reps\n"
    "runs are done; a first run that alone takes --min-time and 5 s (the reference\n"
    "at large T) is the only one. Threads: OMP_NUM_THREADS.",
    engine_opts};

typedef struct {
    int Ts[MAX_TS], nT;
    int B, d, reps, ref_max, gemm_n, use_ctx;
    long seed;
    double min_time, j_std;
    const char *csv_path;
} bench_args;

/* The options into a; 0, -1 after --help, or an exit code after printing
 * the problem. */
static int read_args(int argc, char **argv, bench_args *a)
{
    const command *c = &engine_cmd;
    int rc = parse_args(c, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc)
        return rc;
    if ((rc = get_int_list(c, "T", 1, BA_FAST_MAX_SPINS, a->Ts, MAX_TS, &a->nT)) ||
        (rc = get_int(c, "B", 1, 1 << 20, &a->B)) || (rc = get_int(c, "d", 1, 1 << 16, &a->d)) ||
        (rc = get_int(c, "reps", 1, INT_MAX, &a->reps)) ||
        (rc = get_int(c, "ref-max", 0, BA_REFERENCE_MAX_SPINS, &a->ref_max)) ||
        (rc = get_double(c, "min-time", 0.0, 3600.0, &a->min_time)) ||
        (rc = get_int(c, "gemm", 1, 16384, &a->gemm_n)) ||
        (rc = get_long(c, "seed", 0, LONG_MAX, &a->seed)) ||
        (rc = get_double(c, "j-std", 0.0, 100.0, &a->j_std)))
        return rc;
    a->use_ctx = !is_set(c, "no-ctx");
    a->csv_path = get_str(c, "csv");
    if (is_set(c, "quick")) {
        if (!is_set(c, "T"))
            a->Ts[0] = 8, a->Ts[1] = 12, a->nT = 2;
        if (!is_set(c, "reps"))
            a->reps = 1;
        if (!is_set(c, "gemm"))
            a->gemm_n = 1024;
    }
    return 0;
}

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

static void print_header(const bench_args *a)
{
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    const char *env_thr = getenv("OMP_NUM_THREADS");
    printf("bench_engine: boltzmann attention core, forward+backward (ba_attention_forward + "
           "ba_attention_backward)\n");
    printf("cpu: %s | OpenMP threads: %d (OMP_NUM_THREADS=%s) | OpenBLAS: %d threads, %s\n", cpu,
           threads_in_use(), env_thr ? env_thr : "unset", openblas_get_num_threads(),
           openblas_get_corename());
    printf("B = %d queries per system size, d = C = %d, H = 1, seed %ld; "
           "qkv ~ 0.5 N(0,1), J ~ %g N(0,1) on j<k, dout ~ N(0,1)\n",
           a->B, a->d, a->seed, a->j_std);
    printf("timing: warm-up run, then repeats until %.2g s or %d reps (mean reported); a first "
           "run\n        over max(%.2g, %.0f) s is the only one; reference only for T <= %d;\n"
           "        %s\n",
           a->min_time, a->reps, a->min_time, SINGLE_RUN_S, a->ref_max,
           a->use_ctx ? "one engine context per engine, kept across the reps of a T (as in the "
                        "model)"
                      : "stateless engine calls (--no-ctx)");
    printf("GFLOP = fast engine's dense products per fwd+bwd, summed over n = 1..T with "
           "Q = B, b = n - n/2:\n"
           "        forward 4*Q*2^n (R, L), backward 8*Q*2^n + 2*b*2^n (R2, L2, M, (M o K') "
           "S_B);\n"
           "        non-GEMM work%s is not counted\n",
           a->use_ctx ? "" : " and the stateless backward's rebuilt R, L");
    fflush(stdout);
}

/* The measurements of one T; the ref and err fields are NAN (ref_reps 0)
 * when the reference engine did not run. */
typedef struct {
    int T, have_ref, ref_reps, fast_reps;
    double ref_mean, ref_best, fast_mean, fast_best;
    double err_fwd, err_bwd, err_eng;
} row;

/* Times both engines at p's T and, with the reference, compares them. */
static int measure(problem *p, const bench_args *a, row *r, char *err)
{
    r->ref_mean = r->ref_best = r->err_fwd = r->err_bwd = r->err_eng = NAN;
    r->ref_reps = 0;
    int rc = BA_OK;
    if (r->have_ref) {
        rc = time_engine(p, BA_ENGINE_REFERENCE, a->reps, a->min_time, &r->ref_mean,
                         &r->ref_best, &r->ref_reps, err);
        if (rc)
            return rc;
        memcpy(p->r_out, p->out, sizeof(ba_real) * p->n_out);
        memcpy(p->r_dqkv, p->dqkv, sizeof(ba_real) * p->n_qkv);
        memcpy(p->r_dJ, p->dJ, sizeof(ba_real) * p->n_J);
    }
    rc = time_engine(p, BA_ENGINE_FAST, a->reps, a->min_time, &r->fast_mean, &r->fast_best,
                     &r->fast_reps, err);
    if (rc || !r->have_ref)
        return rc;
    if ((rc = engine_agreement(p, (uint64_t)a->seed, &r->err_eng, err)))
        return rc;
    r->err_fwd = rel_diff(p->out, p->r_out, p->n_out);
    double e1 = rel_diff(p->dqkv, p->r_dqkv, p->n_qkv), e2 = rel_diff(p->dJ, p->r_dJ, p->n_J);
    r->err_bwd = e1 > e2 ? e1 : e2;
    return BA_OK;
}

/* The row on stdout and, when csv is not NULL, in the CSV file. */
static void print_row(const row *r, const bench_args *a, double gemm_gf, FILE *csv)
{
    double gflop = fast_flops(a->B, r->T) * 1e-9, gfs = gflop / r->fast_mean;
    char rms[32] = "-", rrep[16] = "-", ratio[32] = "-", sef[32] = "-", seb[32] = "-",
         see[32] = "-";
    if (r->have_ref) {
        snprintf(rms, sizeof rms, "%.3f", r->ref_mean * 1e3);
        snprintf(rrep, sizeof rrep, "%d", r->ref_reps);
        snprintf(ratio, sizeof ratio, "%.1f", r->ref_mean / r->fast_mean);
        snprintf(sef, sizeof sef, "%.2e", r->err_fwd);
        snprintf(seb, sizeof seb, "%.2e", r->err_bwd);
        snprintf(see, sizeof see, "%.2e", r->err_eng);
    }
    printf("%3d  %12s %5s  %12.3f %5d  %9s  %8.4f  %8.2f  %7.3f  %9s  %9s  %9s\n", r->T, rms,
           rrep, r->fast_mean * 1e3, r->fast_reps, ratio, gflop, gfs, gfs / gemm_gf, sef, seb,
           see);
    fflush(stdout);
    if (!csv)
        return;
    fprintf(csv, "%d,%d,%d,%d,", r->T, a->B, a->d, threads_in_use());
    if (r->have_ref)
        fprintf(csv, "%.6g,%.6g,%d,", r->ref_mean, r->ref_best, r->ref_reps);
    else
        fprintf(csv, ",,,");
    fprintf(csv, "%.6g,%.6g,%d,", r->fast_mean, r->fast_best, r->fast_reps);
    if (r->have_ref)
        fprintf(csv, "%.6g,", r->ref_mean / r->fast_mean);
    else
        fprintf(csv, ",");
    fprintf(csv, "%.6g,%.6g,%.6g,%.6g,", gflop, gfs, gemm_gf, gfs / gemm_gf);
    if (r->have_ref)
        fprintf(csv, "%.3g,%.3g,%.3g\n", r->err_fwd, r->err_bwd, r->err_eng);
    else
        fprintf(csv, ",,\n");
    fflush(csv);
}

/* One T measured and printed. 0, or 1 after printing the problem. */
static int bench_T(int T, const bench_args *a, double gemm_gf, FILE *csv)
{
    problem p;
    if (problem_init(&p, a->B, T, a->d, (uint64_t)a->seed, a->j_std, a->use_ctx)) {
        fprintf(stderr, "%s: out of memory for T = %d\n", prog, T);
        return 1;
    }
    char err[BA_ERR_LEN];
    row r = {.T = T, .have_ref = T <= a->ref_max};
    int rc = measure(&p, a, &r, err);
    problem_free(&p);
    if (rc) {
        fprintf(stderr, "%s: T = %d: %s (%s)\n", prog, T, err, ba_status_str(rc));
        return 1;
    }
    print_row(&r, a, gemm_gf, csv);
    return 0;
}

int main(int argc, char **argv)
{
    prog = "bench_engine"; /* messages name this program (cli/opts.c) */
    bench_args a;
    int rc = read_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    FILE *csv = NULL;
    if (a.csv_path) {
        csv = open_csv(a.csv_path,
                       "T,B,d,threads,ref_s,ref_best_s,ref_reps,fast_s,fast_best_s,fast_reps,"
                       "ref_over_fast,fast_gflop,fast_gflops,dgemm_gflops,efficiency,"
                       "err_fwd,err_bwd,err_engine\n");
        if (!csv)
            return EXIT_USAGE;
    }
    print_header(&a);
    double gemm_gf;
    if (gemm_gflops(a.gemm_n, &gemm_gf)) {
        fprintf(stderr, "%s: cannot allocate the %d x %d dgemm\n", prog, a.gemm_n, a.gemm_n);
        if (csv)
            fclose(csv);
        return 1;
    }
    printf("dgemm %d x %d x %d (best of 3): %.1f GFLOP/s\n\n", a.gemm_n, a.gemm_n, a.gemm_n,
           gemm_gf);
    printf("%3s  %12s %5s  %12s %5s  %9s  %8s  %8s  %7s  %9s  %9s  %9s\n", "T", "ref ms",
           "reps", "fast ms", "reps", "ref/fast", "GFLOP", "GFLOP/s", "/dgemm", "err fwd",
           "err bwd", "err eng");
    fflush(stdout);
    for (int ti = 0; ti < a.nT && !rc; ti++)
        rc = bench_T(a.Ts[ti], &a, gemm_gf, csv);
    if (!rc)
        printf("\nerr fwd: max|out_fast - out_ref| / max|out_ref| of the float attention output; "
               "err bwd: the same for dqkv and dJ\n"
               "(the larger); err eng: the engines alone in double on 3 queries (n = T, T-1, "
               "T-2): max |log w| difference\nand max relative difference of dh, dJ for a "
               "random upstream gradient (the largest of the three)\n");
    if (csv && fclose(csv) && !rc) {
        fprintf(stderr, "%s: error writing '%s'\n", prog, a.csv_path);
        return 1;
    }
    return rc;
}
