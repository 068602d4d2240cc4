/* bench_attention: the tiled attention core (src/model/attention_tiled.c,
 * issue 42) against the dense one (attention_core.h), float, in the op's
 * [B,H,T,d] layout: for each T, the forward + backward of each path
 * (median of --reps runs, interleaved dense, tiled, dense, ...), its
 * GFLOP/s, and its buffers: the dense core's att, pre (B,H,T,T) and its
 * workspace (B,T,T doubles: 3 at the backward's peak), the tiled path's
 * lse (B,H,T) and per-thread tiles; with the peak resident memory each
 * run added (VmHWM, reset between runs). Beside them, plain cblas_sgemm
 * at (T x T x d), the shape of the attention's products, as many calls
 * as a step's FLOPs split over the threads (each call single-threaded, as
 * the tiles), timed in the same rounds (the machine may be busy), and at
 * 1024^3 on OpenBLAS's own threads once at the start: the rates the goal
 * names (tiled >= 50 % of sgemm).
 *
 * FLOPs of a step are counted as FlashAttention's, the same for both
 * paths: forward 2 causal products of T^2 d / 2 multiply-adds (2 B H T^2
 * d), backward 2.5 times that (5 products, the recomputed scores among
 * them).
 *
 * Options: --T LIST (256,1024,4096), --B, --H, --d, --attn softmax|sigmoid,
 * --reps N, --dense-max T (the dense path only up to it: at T = 4096, B =
 * 4, H = 4 its buffers are 2.5 GiB), --threads N (else 2). Exit status 0
 * ok, 1 a library error, 2 bad arguments. */
#include "boltzattn.h"
#include "core/core.h"
#include "model/model.h"
#include "opts.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TS 8
#define MAX_REPS 50

static opt att_opts[] = {
    {"T", "LIST", "256,1024,4096", "context lengths", 0, 0},
    {"B", "N", "4", "batch size", 0, 0},
    {"H", "N", "4", "heads", 0, 0},
    {"d", "N", "64", "channels per head", 0, 0},
    {"attn", "NAME", "softmax", "softmax or sigmoid", 0, 0},
    {"reps", "N", "5", "runs of each path (the median is shown)", 0, 0},
    {"dense-max", "T", "1024", "run the dense path only up to this T", 0, 0},
    {"threads", "N", "2", "OpenMP threads", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command att_cmd = {
    NULL,
    "[--T LIST] [--B N] [--H N] [--d N] [--attn softmax|sigmoid] [--reps N]\n"
    "                      [--dense-max T] [--threads N]\n\n"
    "Dense against tiled attention, forward + backward: seconds, GFLOP/s, buffers.",
    att_opts};

/* A /proc/self/status line's figure in MiB (key "VmHWM:": the peak
 * resident memory; "VmRSS:": the resident memory now), NAN if absent. */
static double status_mib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = NAN;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n))
            kb = atof(line + n);
    if (f)
        fclose(f);
    return kb / 1024;
}

/* The peak's reset (0 when it worked). */
static int reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return -1;
    int rc = fputs("5", f) < 0;
    return fclose(f) || rc ? -1 : 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_d);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

typedef struct {
    ba_attn_shape s;
    ba_attn_io_f32 io;
    float *x, *dx, *out, *dout;
} problem;

/* Random q, k, v, dout [B,H,T,d] (q, k ~ N(0,1): fields of order 1). */
static int problem_new(problem *p, ba_attn a, int B, int H, int T, int d, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    size_t n = (size_t)B * H * T * d;
    p->x = malloc(sizeof(float) * 3 * n), p->dx = calloc(3 * n, sizeof(float));
    p->out = malloc(sizeof(float) * n), p->dout = malloc(sizeof(float) * n);
    if (!p->x || !p->dx || !p->out || !p->dout)
        return -1;
    ba_rng r;
    ba_rng_seed(&r, seed);
    for (size_t q = 0; q < 3 * n; q++)
        p->x[q] = (float)ba_rng_normal(&r);
    for (size_t q = 0; q < n; q++)
        p->dout[q] = (float)ba_rng_normal(&r);
    p->s.attn = a, p->s.engine = BA_ENGINE_REFERENCE;
    p->s.B = B, p->s.T = T, p->s.C = H * d, p->s.H = H, p->s.Tmax = T;
    ba_attn_io_f32 *io = &p->io;
    io->q = p->x, io->k = p->x + n, io->v = p->x + 2 * n;
    io->dq = p->dx, io->dk = p->dx + n, io->dv = p->dx + 2 * n;
    io->st = io->ot = (size_t)d, io->sh = io->oh = (size_t)T * d;
    io->sb = io->ob = (size_t)H * T * d;
    io->out = p->out, io->dout = p->dout;
    return 0;
}

static void problem_free(problem *p) { free(p->x), free(p->dx), free(p->out), free(p->dout); }

/* One forward + backward of a path; *peak: the MiB the run added to the
 * resident memory at its peak. */
static int step(problem *p, int tiled, double *sec, double *peak, char *err)
{
    const ba_attn_shape *s = &p->s;
    size_t btt = (size_t)s->B * s->H * s->T * s->T, bht = (size_t)s->B * s->H * s->T;
    double base = status_mib("VmRSS:");
    reset_peak();
    double t0 = now_s();
    int rc;
    if (tiled) {
        float *lse = malloc(sizeof(float) * bht);
        if (!lse)
            return BA_ERR_NOMEM;
        rc = ba_attn_tiled_forward_f32(s, &p->io, lse, err);
        if (!rc)
            rc = ba_attn_tiled_backward_f32(s, &p->io, lse, err);
        free(lse);
    } else {
        float *att = malloc(sizeof(float) * btt), *pre = malloc(sizeof(float) * btt);
        rc = att && pre ? BA_OK : BA_ERR_NOMEM;
        if (!rc)
            rc = ba_attn_core_forward_f32(s, &p->io, att, pre, NULL, err);
        if (!rc)
            rc = ba_attn_core_backward_f32(s, &p->io, NULL, NULL, att, pre, err);
        free(att), free(pre);
    }
    *sec = now_s() - t0;
    *peak = status_mib("VmHWM:") - base;
    return rc;
}

/* Plain cblas_sgemm of M x N x K, n times: seconds (NAN without memory).
 * par: the n calls split over the OpenMP threads, each call single-
 * threaded (as the tiles are); else one call at a time on OpenBLAS's own
 * threads. */
static double sgemm_time(int M, int N, int K, int n, int par)
{
    int nt = par ? omp_get_max_threads() : 1;
    float *a = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)K * N);
    float *c = malloc(sizeof(float) * (size_t)M * N * nt);
    double t = NAN;
    if (a && b && c) {
        for (size_t q = 0; q < (size_t)M * K; q++)
            a[q] = (float)(q % 7) * 0.1f;
        for (size_t q = 0; q < (size_t)K * N; q++)
            b[q] = (float)(q % 5) * 0.1f;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, a, K, b, K, 0, c, N);
        double t0 = now_s();
#pragma omp parallel for schedule(dynamic, 1) if (par)
        for (int r = 0; r < n; r++) {
            int saved = par ? ba_blas_serial() : 0;
            float *cc = c + (size_t)M * N * (par ? omp_get_thread_num() : 0);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, a, K, b, K, 0, cc,
                        N);
            ba_blas_end(saved);
        }
        t = now_s() - t0;
    }
    free(a), free(b), free(c);
    return t;
}

/* GFLOP/s of plain sgemm at 1024^3, median of reps. */
static double sgemm_rate(int reps)
{
    double t[MAX_REPS];
    for (int r = 0; r < reps; r++)
        t[r] = sgemm_time(1024, 1024, 1024, 1, 0);
    return 2.0 * 1024 * 1024 * 1024 / median(t, reps) / 1e9;
}

static int bench_T(ba_attn a, int B, int H, int T, int d, int reps, int dense, int nth)
{
    problem p;
    char err[BA_ERR_LEN];
    if (problem_new(&p, a, B, H, T, d, 42)) {
        problem_free(&p);
        fprintf(stderr, "%s: out of memory at T = %d\n", prog, T);
        return 1;
    }
    double flop = 7.0 * B * H * (double)T * T * d, td[MAX_REPS], tt[MAX_REPS], tg[MAX_REPS];
    double pd = 0.0, pt = 0.0, x;
    for (int r = 0; r < reps; r++) {
        int rc = dense ? step(&p, 0, &td[r], &x, err) : BA_OK;
        pd = dense && x > pd ? x : pd;
        if (!rc)
            rc = step(&p, 1, &tt[r], &x, err);
        pt = x > pt ? x : pt;
        /* the same work as the products of one step, in (T x T x d) sgemm calls */
        tg[r] = sgemm_time(T, T, d, (int)ceil(3.5 * B * H), 1);
        if (rc) {
            fprintf(stderr, "%s: T = %d: %s\n", prog, T, err);
            problem_free(&p);
            return 1;
        }
    }
    double md = dense ? median(td, reps) : NAN, mt = median(tt, reps);
    double bd = 4.0 * 2 * B * H * (double)T * T + 8.0 * 3 * B * (double)T * T;
    double bt = 4.0 * B * H * T + nth * 4.0 * (3 * 64 * 64 + 3 * 64 * d + 64 + T) + nth * 8 * 64;
    double g1 = flop / median(tg, reps) / 1e9;
    printf("%5d %9.4f %9.4f %7.2f %8.2f %8.2f %8.2f %6.2f %10.1f %10.3f %9.1f %9.1f\n", T, md, mt,
           md / mt, flop / md / 1e9, flop / mt / 1e9, g1, flop / mt / 1e9 / g1, bd / 1048576.0,
           bt / 1048576.0, dense ? pd : NAN, pt);
    fflush(stdout);
    problem_free(&p);
    return 0;
}

int main(int argc, char **argv)
{
    prog = "bench_attention";
    const command *c = &att_cmd;
    int rc = parse_args(c, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    int Ts[MAX_TS], nT, B, H, d, reps, dmax, nth;
    if ((rc = get_int_list(c, "T", 1, 65536, Ts, MAX_TS, &nT)) || (rc = get_int(c, "B", 1, 256, &B)) ||
        (rc = get_int(c, "H", 1, 256, &H)) || (rc = get_int(c, "d", 1, 1024, &d)) ||
        (rc = get_int(c, "reps", 1, MAX_REPS, &reps)) ||
        (rc = get_int(c, "dense-max", 0, 65536, &dmax)) ||
        (rc = get_int(c, "threads", 1, 1024, &nth)))
        return rc;
    const char *an = get_str(c, "attn");
    ba_attn a = !strcmp(an, "sigmoid") ? BA_ATTN_SIGMOID : BA_ATTN_SOFTMAX;
    if (strcmp(an, "sigmoid") && strcmp(an, "softmax"))
        return usage_error(c, "--attn: softmax or sigmoid, not '%s'", an);
    set_threads(nth);
    printf("%s, float, B = %d, H = %d, d = %d, threads %d, median of %d; plain sgemm 1024^3: "
           "%.1f GFLOP/s\n",
           an, B, H, d, threads_in_use(), reps, sgemm_rate(reps));
    printf("%5s %9s %9s %7s %8s %8s %8s %6s %10s %10s %9s %9s\n", "T", "dense s", "tiled s",
           "speedup", "dense GF", "tiled GF", "sgemm GF", "t/sg", "dense MiB", "tiled MiB",
           "dense pk", "tiled pk");
    int status = 0;
    for (int t = 0; t < nT; t++)
        status |= bench_T(a, B, H, Ts[t], d, reps, Ts[t] <= dmax, nth);
    return status;
}
