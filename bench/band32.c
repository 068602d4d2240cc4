/* bench_band32: the band engine's window term in float against double
 * (issue 42, item 4), side by side in one run.
 *
 * For each W of --W at block size --T: B sequences of queries (query i of
 * n = i + 1 spins, as one attention head's), fields h ~ --h-std N(0,1),
 * band couplings ~ --j-std N(0,1), dL/dm ~ N(0,1). Timed: the engine's
 * forward + backward (ba_band_forward_path + ba_band_backward_path) on
 * the double linear path (BA_BAND_LINEAR) and on the float one
 * (BA_BAND_LINEAR32, every query whatever the guard says: the inputs'
 * range is reported beside it), alternating double and float run by run
 * so that a change of load on a shared machine hits both alike; figures
 * are the best of --reps runs each, in ns per (query, key): time /
 * (B T (T + 1) / 2). Then the guard: how many of these queries the float
 * path would take by itself (BA_BAND_AUTO32), and the float results'
 * worst difference from double (|expm1(dlogw)|, and dh, dJ scaled by
 * 1 + max |double|).
 *
 *
 * With --step-T: the training step of bench_long's model (2 layers, 4
 * heads, C = 128, FFN, relative couplings of band --step-W initialised
 * ~ --step-j N(0,1), no position embeddings, AdamW at lr 1e-3) on charlm
 * --data, two trainers in one process, band_f32 0 and 1, same seed and
 * batches, stepping alternately (one untimed step each, then --step-steps
 * timed): seconds per step of each and the losses.
 *
 * Threads: OMP_NUM_THREADS (the figures of docs/performance.md: 1).
 * Exit status: 0 ok, 1 library error, 2 bad arguments. */
#include "boltzattn.h"
#include "boltzattn_train.h"
#include "model/model.h" /* the band engine's paths, timed directly */
#include "opts.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WS 16

static opt band32_opts[] = {
    {"T", "N", "1024", "block size: queries of 1..T keys", 0, 0},
    {"W", "LIST", "8,12", "bands, 1..16", 0, 0},
    {"B", "N", "1", "sequences", 0, 0},
    {"reps", "N", "3", "timed runs of each path (alternating), best taken", 0, 0},
    {"h-std", "S", "0.4", "std of the fields", 0, 0},
    {"j-std", "S", "0.08", "std of the couplings", 0, 0},
    {"seed", "N", "1", "seed of the random inputs (and of the step's trainers)", 0, 0},
    {"no-engine", NULL, NULL, "skip the engine part", 0, 0},
    {"step-T", "N", "0", "training step: block size (0: no step)", 0, 0},
    {"step-W", "N", "8", "training step: band", 0, 0},
    {"step-B", "N", "4", "training step: batch", 0, 0},
    {"step-steps", "N", "3", "training step: timed steps of each trainer", 0, 0},
    {"step-j", "S", "0.3", "training step: std of the initial couplings", 0, 0},
    {"data", "PATH", "../shared/data/tinyshakespeare.txt", "training step: charlm text", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command band32_cmd = {
    NULL,
    "[--T N] [--W LIST] [--B N] [--reps N] [--h-std S] [--j-std S] [--seed N]\n\n"
    "Times the band engine's forward+backward on its double and float linear\n"
    "paths on the same inputs, alternating, and reports the float guard's\n"
    "share of the queries and the float results' distance from double.",
    band32_opts};

typedef struct {
    int T, Ws[MAX_WS], nW, B, reps, engine;
    long seed;
    double h_std, j_std;
    int sT, sW, sB, ssteps;
    double sj;
    const char *data;
} bench_args;

static int read_args(int argc, char **argv, bench_args *a)
{
    const command *c = &band32_cmd;
    int rc = parse_args(c, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc)
        return rc;
    if ((rc = get_int(c, "T", 1, BA_BAND_MAX_T, &a->T)) ||
        (rc = get_int_list(c, "W", 1, BA_BAND_MAX_W, a->Ws, MAX_WS, &a->nW)) ||
        (rc = get_int(c, "B", 1, 1 << 16, &a->B)) ||
        (rc = get_int(c, "reps", 1, INT_MAX, &a->reps)) ||
        (rc = get_double(c, "h-std", 0.0, 100.0, &a->h_std)) ||
        (rc = get_double(c, "j-std", 0.0, 100.0, &a->j_std)) ||
        (rc = get_long(c, "seed", 0, LONG_MAX, &a->seed)) ||
        (rc = get_int(c, "step-T", 0, BA_MAX_BLOCK, &a->sT)) ||
        (rc = get_int(c, "step-W", 1, BA_MAX_BAND, &a->sW)) ||
        (rc = get_int(c, "step-B", 1, 4096, &a->sB)) ||
        (rc = get_int(c, "step-steps", 1, 1000000, &a->ssteps)) ||
        (rc = get_double(c, "step-j", 0.0, 100.0, &a->sj)))
        return rc;
    a->engine = !is_set(c, "no-engine");
    a->data = get_str(c, "data");
    return 0;
}

/* One band's inputs and the outputs of one path. */
typedef struct {
    int B, T, W;
    double *h, *Jb, *g;              // (B,T,T), (T,W), (B,T,T)
    double *lw[2], *dh[2], *dJb[2];  // per path: 0 double, 1 float
} problem;

static void problem_free(problem *p)
{
    free(p->h), free(p->Jb), free(p->g);
    for (int k = 0; k < 2; k++)
        free(p->lw[k]), free(p->dh[k]), free(p->dJb[k]);
}

static int problem_init(problem *p, const bench_args *a, int W)
{
    memset(p, 0, sizeof *p);
    p->B = a->B, p->T = a->T, p->W = W;
    size_t n = (size_t)a->B * a->T * a->T, nj = (size_t)a->T * W;
    p->h = malloc(sizeof(double) * n), p->g = malloc(sizeof(double) * n);
    p->Jb = malloc(sizeof(double) * nj);
    int ok = p->h && p->g && p->Jb;
    for (int k = 0; k < 2; k++) {
        p->lw[k] = malloc(sizeof(double) * n), p->dh[k] = malloc(sizeof(double) * n);
        p->dJb[k] = malloc(sizeof(double) * nj);
        ok = ok && p->lw[k] && p->dh[k] && p->dJb[k];
    }
    if (!ok)
        return 1;
    ba_rng r;
    ba_rng_seed(&r, (uint64_t)a->seed * 1000003u + (uint64_t)W);
    for (size_t i = 0; i < n; i++)
        p->h[i] = a->h_std * ba_rng_normal(&r), p->g[i] = ba_rng_normal(&r);
    for (size_t i = 0; i < nj; i++)
        p->Jb[i] = a->j_std * ba_rng_normal(&r);
    return 0;
}

/* One forward + backward of path k (0 double linear, 1 float linear) into
 * k's outputs; *fwd, *bwd: the two halves' seconds. */
static int run_path(problem *p, int k, double *fwd, double *bwd, char *err)
{
    ba_band_path path = k ? BA_BAND_LINEAR32 : BA_BAND_LINEAR;
    size_t n = (size_t)p->B * p->T * p->T;
    memset(p->dh[k], 0, sizeof(double) * n);
    memset(p->dJb[k], 0, sizeof(double) * (size_t)p->T * p->W);
    double t0 = now_s();
    int rc = ba_band_forward_path(path, p->W, p->B, p->T, p->h, p->Jb, p->lw[k], NULL, err);
    double t1 = now_s();
    if (!rc)
        rc = ba_band_backward_path(path, p->W, p->B, p->T, p->h, p->Jb, p->g, p->dh[k],
                                   p->dJb[k], NULL, err);
    *fwd = t1 - t0, *bwd = now_s() - t1;
    return rc;
}

static double worst_logw(const problem *p)
{
    double w = 0.0;
    for (size_t q = 0; q < (size_t)p->B * p->T; q++)
        for (int j = 0; j <= (int)(q % p->T); j++) {
            double e = fabs(expm1(p->lw[1][q * p->T + j] - p->lw[0][q * p->T + j]));
            w = e > w || isnan(e) ? e : w;
        }
    return w;
}

static double worst_scaled(const double *x, const double *ref, size_t n)
{
    double m = 0.0, d = 0.0;
    for (size_t i = 0; i < n; i++) {
        m = fmax(m, fabs(ref[i]));
        d = fabs(x[i] - ref[i]) > d || isnan(x[i]) ? fabs(x[i] - ref[i]) : d;
    }
    return d / (1.0 + m);
}

static int bench_W(const bench_args *a, int W)
{
    problem p;
    char err[BA_ERR_LEN] = "";
    if (problem_init(&p, a, W)) {
        problem_free(&p);
        fprintf(stderr, "bench_band32: out of memory at W = %d\n", W);
        return 1;
    }
    double best[2][2] = {{INFINITY, INFINITY}, {INFINITY, INFINITY}};
    int rc = 0;
    /* a warm-up of each, then alternating timed runs */
    for (int rep = -1; rep < a->reps && !rc; rep++)
        for (int k = 0; k < 2 && !rc; k++) {
            double f, b;
            if ((rc = run_path(&p, k, &f, &b, err)))
                break;
            if (rep >= 0)
                best[k][0] = fmin(best[k][0], f), best[k][1] = fmin(best[k][1], b);
        }
    ba_band_stats st = {0, 0, 0};
    double *tmp = NULL;
    if (!rc && !(tmp = malloc(sizeof(double) * (size_t)a->B * a->T * a->T)))
        rc = BA_ERR_NOMEM, snprintf(err, sizeof err, "out of memory");
    if (!rc)
        rc = ba_band_forward_path(BA_BAND_AUTO32, W, a->B, a->T, p.h, p.Jb, tmp, &st, err);
    free(tmp);
    if (rc) {
        fprintf(stderr, "bench_band32: W = %d: %s\n", W, err);
        problem_free(&p);
        return 1;
    }
    double pairs = (double)a->B * a->T * (a->T + 1) / 2.0, ns = 1e9 / pairs;
    int we = W < a->T - 1 ? W : (a->T > 1 ? a->T - 1 : 1);
    double jb = ba_band_lin_jbound(we, a->T, p.Jb, W);
    size_t n = (size_t)a->B * a->T * a->T;
    printf("%3d %6d %10.2f %10.2f %7.2fx %10.2f %10.2f %7.2fx %7.2fx %7.1f %6.1f %5.1f%% "
           "%8.1e %8.1e %8.1e\n",
           W, a->T, ns * best[0][0], ns * best[1][0], best[0][0] / best[1][0], ns * best[0][1],
           ns * best[1][1], best[0][1] / best[1][1],
           (best[0][0] + best[0][1]) / (best[1][0] + best[1][1]), jb,
           ba_band_lin32_max_nats(we), 100.0 * (double)st.linear32 / ((double)a->B * a->T),
           worst_logw(&p), worst_scaled(p.dh[1], p.dh[0], n),
           worst_scaled(p.dJb[1], p.dJb[0], (size_t)a->T * W));
    fflush(stdout);
    problem_free(&p);
    return 0;
}

/* The two trainers (band_f32 = k) of the step part; 0 or an exit code. */
static int step_init(const bench_args *a, const ba_dataset *ds, ba_trainer *t[2], char *err)
{
    for (int k = 0; k < 2; k++) {
        ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, a->sT);
        ba_config_set_data(&cfg, ds);
        cfg.n_layer = 2, cfg.n_head = 4, cfg.n_embd = 128, cfg.ffn = 1;
        cfg.couplings = BA_COUPLINGS_RELATIVE, cfg.band = a->sW, cfg.pos_emb = 0;
        cfg.band_f32 = k;
        ba_train_settings s = ba_train_settings_default(LONG_MAX);
        s.batch = a->sB, s.lr = 1e-3, s.warmup = 0, s.min_lr_frac = 1.0;
        s.j_init_std = a->sj, s.seed = (uint64_t)a->seed, s.opt = ba_adamw_default();
        s.eval_every = 0, s.save_every = 0;
        int rc = ba_trainer_init(&t[k], &cfg, ds, NULL, &s, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int step_part(const bench_args *a)
{
    char err[BA_ERR_LEN] = "";
    ba_dataset *ds = NULL;
    ba_trainer *t[2] = {NULL, NULL};
    int rc = ba_dataset_charlm(&ds, a->data, NULL, 0, a->sT, err);
    if (!rc)
        rc = step_init(a, ds, t, err);
    double tot[2] = {0.0, 0.0}, loss[2] = {NAN, NAN};
    printf("\ntraining step: T = %d, band %d, B = %d, couplings ~ %g N(0,1); double and float "
           "trainers alternating\n", a->sT, a->sW, a->sB, a->sj);
    for (int i = -1; i < a->ssteps && !rc; i++)
        for (int k = 0; k < 2 && !rc; k++) {
            double t0 = now_s();
            rc = ba_trainer_step(t[k], &loss[k], NULL, NULL, err);
            double dt = now_s() - t0;
            tot[k] += i >= 0 ? dt : 0.0;
            printf("  step %2d %-6s %8.2f s  loss %.5f\n", i, k ? "float" : "double", dt, loss[k]);
            fflush(stdout);
        }
    if (!rc)
        printf("mean s/step: double %.2f, float %.2f: %.2fx\n", tot[0] / a->ssteps,
               tot[1] / a->ssteps, tot[0] / tot[1]);
    else
        fprintf(stderr, "bench_band32: training step: %s\n", err);
    ba_trainer_free(t[0]), ba_trainer_free(t[1]);
    ba_dataset_free(ds);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    bench_args a;
    int rc = read_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    printf("band engine, linear path, double vs float: T = %d, B = %d, h ~ %g N(0,1), "
           "J ~ %g N(0,1), %d threads, best of %d alternating runs\n",
           a.T, a.B, a.h_std, a.j_std, ba_nthreads(), a.reps);
    printf("ns per (query, key); x: double / float; jbound: the couplings' part of the "
           "guard's range (nats), float's limit beside it; auto32: queries the guard sends "
           "to float; errors of float vs double: |expm1(dlogw)|, dh and dJ / (1 + max|.|)\n");
    printf("%3s %6s %10s %10s %8s %10s %10s %8s %8s %7s %6s %6s %8s %8s %8s\n", "W", "T",
           "fwd f64", "fwd f32", "x", "bwd f64", "bwd f32", "x", "f+b x", "jbound", "limit",
           "auto32", "logw", "dh", "dJ");
    for (int i = 0; a.engine && i < a.nW; i++)
        if ((rc = bench_W(&a, a.Ws[i])))
            return rc;
    return a.sT ? step_part(&a) : 0;
}
