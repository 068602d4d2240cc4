/* bench_long, part 2 (see bench/long.c for the whole benchmark): the
 * library's training step (ba_trainer_step) of a 2-layer, 4-head charlm
 * model with FFN, softmax against boltzmann relative band W, each
 * configuration's rate and peak memory, and the cost model
 * t = B T (l + T (c0 + c1 2^W)) fitted to the band rows. This file owns the
 * charlm text (a file, else a synthetic one), the trained configurations
 * and the fit; bench/long.c owns the options, part 1 (the attention core)
 * and main. */
#include "long.h"
#include "opts.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TRAIN_LAYERS 2
#define TRAIN_HEADS 4
#define TRAIN_C 128
#define TRAIN_WARMUP 1    /* untimed steps per configuration */
#define TRAIN_MIN_STEPS 2 /* timed steps at least */
#define LR 1e-3
#define SYNTH_BYTES (1 << 20)

/* ------------------------------------------------------ measurement aids */

/* Least squares in relative error: coef (k <= 3) minimising
 * sum_i ((X_i . coef - y_i) / y_i)^2, through the normal equations and
 * Gaussian elimination with partial pivoting. The columns are scaled to a
 * largest |entry| of 1 first: B T and B T^2 2^W differ by 10 orders of
 * magnitude, which would otherwise defeat the singularity test. 0, or 1
 * when singular. */
static int ls_relative(int n, int k, double X[][3], const double *y, double *coef)
{
    double A[3][4] = {{0}}, sc[3] = {0, 0, 0};
    for (int i = 0; i < n; i++)
        for (int r = 0; r < k; r++)
            sc[r] = fmax(sc[r], fabs(X[i][r] / y[i]));
    for (int r = 0; r < k; r++)
        if (!(sc[r] > 0))
            return 1;
    for (int i = 0; i < n; i++)
        for (int r = 0; r < k; r++) {
            for (int c = 0; c < k; c++)
                A[r][c] += X[i][r] / (y[i] * sc[r]) * X[i][c] / (y[i] * sc[c]);
            A[r][k] += X[i][r] / (y[i] * sc[r]);
        }
    for (int p = 0; p < k; p++) {
        int piv = p;
        for (int r = p + 1; r < k; r++)
            piv = fabs(A[r][p]) > fabs(A[piv][p]) ? r : piv;
        for (int c = 0; c <= k; c++) {
            double t = A[p][c];
            A[p][c] = A[piv][c], A[piv][c] = t;
        }
        if (!(fabs(A[p][p]) > 1e-12))
            return 1;
        for (int r = p + 1; r < k; r++) {
            double f = A[r][p] / A[p][p];
            for (int c = p; c <= k; c++)
                A[r][c] -= f * A[p][c];
        }
    }
    for (int p = k - 1; p >= 0; p--) {
        double s = A[p][k];
        for (int c = p + 1; c < k; c++)
            s -= A[p][c] * coef[c];
        coef[p] = s / A[p][p];
    }
    for (int p = 0; p < k; p++)
        coef[p] /= sc[p];
    return 0;
}

/* ------------------------------------------------------------ the runs */

/* Where the charlm text comes from: a path, or a synthetic file made once. */
typedef struct {
    const char *path;
    char synth[64]; /* the synthetic file's path, "" when not made */
} data_source;

/* A text of words over a few letters (valid UTF-8, no NUL), written to a
 * temporary file whose path goes to ds->synth. 0, or 1 after printing. */
static int make_synthetic(data_source *ds, uint64_t seed)
{
    static const char letters[] = "etaoinshrdlucmfwypvbgk";
    char *text = malloc(SYNTH_BYTES);
    if (!text) {
        fprintf(stderr, "%s: out of memory for the synthetic text\n", prog);
        return 1;
    }
    ba_rng r;
    ba_rng_seed(&r, seed);
    for (size_t i = 0; i < SYNTH_BYTES;) {
        size_t len = 1 + ba_rng_below(&r, 8);
        for (size_t k = 0; k < len && i < SYNTH_BYTES; k++)
            text[i++] = letters[ba_rng_below(&r, sizeof letters - 1)];
        if (i < SYNTH_BYTES)
            text[i++] = ba_rng_below(&r, 12) ? ' ' : '\n';
    }
    snprintf(ds->synth, sizeof ds->synth, "/tmp/bench_long_XXXXXX");
    int fd = mkstemp(ds->synth);
    int bad = fd < 0 || write(fd, text, SYNTH_BYTES) != SYNTH_BYTES;
    bad |= fd >= 0 && close(fd) != 0;
    free(text);
    if (bad) {
        fprintf(stderr, "%s: cannot write the synthetic text to %s\n", prog, ds->synth);
        if (fd >= 0)
            unlink(ds->synth);
        ds->synth[0] = 0;
    }
    ds->path = ds->synth;
    return bad;
}

/* The text --data names, else the first default that exists, else a
 * synthetic one; *note says which. 0, or 1 after printing. */
static int choose_data(const bench_args *a, data_source *ds, char *note, size_t len)
{
    memset(ds, 0, sizeof *ds);
    const char *cands[] = {getenv("BA_DATA"), "../shared/data/tinyshakespeare.txt",
                           "data/tinyshakespeare.txt"};
    if (a->data) {
        ds->path = a->data;
        snprintf(note, len, "%s (--data)", a->data);
        return 0;
    }
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
        if (cands[i] && *cands[i] && access(cands[i], R_OK) == 0) {
            ds->path = cands[i];
            snprintf(note, len, "%s", cands[i]);
            return 0;
        }
    if (make_synthetic(ds, (uint64_t)a->seed))
        return 1;
    snprintf(note, len, "SYNTHETIC text (%d bytes of random words; no charlm file found)",
             SYNTH_BYTES);
    return 0;
}

typedef struct {
    long steps;
    double seconds, best, loss, peak_mib; /* best: the fastest step */
} train_result;

/* One configuration: softmax (W = 0) or boltzmann relative band W without
 * position embeddings, engine auto (the band engine), its window term in
 * float when f32; AdamW defaults at a constant lr, nothing evaluated or
 * saved. The couplings start at --j-std, the size the core part uses. */
static int train_one(const ba_dataset *ds, int T, int W, int f32, const bench_args *a,
                     train_result *res, char *err)
{
    ba_config cfg = ba_config_default(W ? BA_ATTN_BOLTZMANN : BA_ATTN_SOFTMAX, T);
    ba_config_set_data(&cfg, ds);
    cfg.n_layer = TRAIN_LAYERS, cfg.n_head = TRAIN_HEADS, cfg.n_embd = TRAIN_C, cfg.ffn = 1;
    if (W)
        cfg.couplings = BA_COUPLINGS_RELATIVE, cfg.band = W, cfg.pos_emb = 0;
    cfg.band_f32 = f32;
    ba_train_settings s = ba_train_settings_default(LONG_MAX);
    s.batch = a->tB, s.lr = LR, s.warmup = 0, s.min_lr_frac = 1.0;
    s.j_init_std = W ? a->j_std : 0.0;
    s.seed = (uint64_t)a->seed, s.opt = ba_adamw_default();
    s.eval_every = 0, s.save_every = 0;
    ba_trainer *t = NULL;
    int rc = ba_trainer_init(&t, &cfg, ds, NULL, &s, err);
    double loss = NAN, total = 0.0, best = INFINITY;
    long n = 0;
    for (int i = 0; i < TRAIN_WARMUP && !rc; i++)
        rc = ba_trainer_step(t, &loss, NULL, NULL, err);
    while (!rc && (a->train_steps ? n < a->train_steps
                                  : n < TRAIN_MIN_STEPS || total < a->train_time)) {
        double t0 = now_s();
        rc = ba_trainer_step(t, &loss, NULL, NULL, err);
        double dt = now_s() - t0;
        total += dt, n++, best = fmin(best, dt);
    }
    res->steps = n, res->seconds = total, res->best = best, res->loss = loss;
    res->peak_mib = peak_rss_mib();
    ba_trainer_free(t);
    return rc;
}

/* The measured band rows, for the cost model. */
typedef struct {
    int n;
    double T[MAX_TS * MAX_WS], W[MAX_TS * MAX_WS], sec[MAX_TS * MAX_WS];
    int nsoft;
    double Ts[MAX_TS], soft[MAX_TS];
} train_points;

/* Every configuration at one T; 0, or an exit code after printing. */
static int train_T(int T, const bench_args *a, const data_source *src, train_points *pts,
                   FILE *csv)
{
    char err[BA_ERR_LEN];
    ba_dataset *ds = NULL;
    int rc = ba_dataset_charlm(&ds, src->path, NULL, 0, T, err);
    if (rc) {
        fprintf(stderr, "%s: charlm data at T = %d: %s (%s)\n", prog, T, err, ba_status_str(rc));
        return rc == BA_ERR_NOMEM ? 1 : EXIT_USAGE;
    }
    double soft = NAN;
    /* with --train-f32 each band twice: double (row 2 wi), then float */
    for (int ci = -1; ci < a->ntW * (a->train_f32 ? 2 : 1); ci++) {
        int wi = ci < 0 ? -1 : a->train_f32 ? ci / 2 : ci, f32 = a->train_f32 && ci >= 0 && ci % 2;
        int W = wi < 0 ? 0 : a->tWs[wi];
        char name[16] = "softmax";
        if (W)
            snprintf(name, sizeof name, "band W=%d%s", W, f32 ? " f32" : "");
        train_result r;
        reset_peak_rss();
        if ((rc = train_one(ds, T, W, f32, a, &r, err))) {
            fprintf(stderr, "%s: training step, T = %d, %s: %s (%s)\n", prog, T, name, err,
                    ba_status_str(rc));
            ba_dataset_free(ds);
            return rc == BA_ERR_ARG || rc == BA_ERR_LIMIT ? EXIT_USAGE : 1;
        }
        double sec = r.seconds / r.steps;
        soft = W ? soft : sec;
        printf("%5d  %-10s  %5ld  %9.4f  %9.3f  %9.2f  %8.4f  %9.1f\n", T, name, r.steps, 1 / sec,
               sec, sec / soft, r.loss, r.peak_mib);
        fflush(stdout);
        if (csv) {
            fprintf(csv, "train,%d,%s,%d,%d,%d,%d,%ld,%.6g,%.6g,%.6g,%.6g,%.6g,%.1f,,\n", T,
                    W ? (f32 ? "band-f32" : "band") : "softmax", W, a->tB, TRAIN_C,
                    threads_in_use(), r.steps, r.best,
                    sec, sec / soft, 1 / sec, r.loss, r.peak_mib);
            fflush(csv);
        }
        if (W && !f32) /* the cost model is double's */
            pts->T[pts->n] = T, pts->W[pts->n] = W, pts->sec[pts->n++] = sec;
        else
            pts->Ts[pts->nsoft] = T, pts->soft[pts->nsoft++] = sec;
    }
    ba_dataset_free(ds);
    return 0;
}

/* Whether x[0..n-1] holds two different values. */
static int varies(const double *x, int n)
{
    for (int i = 1; i < n; i++)
        if (x[i] != x[0])
            return 1;
    return 0;
}

/* t = B T (l + T (c0 + c1 2^W)) fitted to the band rows: B T l is the
 * per-token work (projections, FFN, optimiser), B T^2 c0 the per-pair
 * work every variant has (fields, a v, the engine's per-step overhead),
 * B T^2 2^W c1 the band engine's window states. t = B T (l + c T) for
 * softmax. */
static void cost_model(const bench_args *a, const train_points *p)
{
    double X[MAX_TS * MAX_WS][3], c[3];
    printf("\ncost model of a training step (seconds; B = %d, %d layers, %d heads, C = %d), "
           "fitted in relative error:\n", a->tB, TRAIN_LAYERS, TRAIN_HEADS, TRAIN_C);
    for (int i = 0; i < p->n; i++) {
        double bt = a->tB * p->T[i];
        X[i][0] = bt, X[i][1] = bt * p->T[i], X[i][2] = bt * p->T[i] * ldexp(1.0, (int)p->W[i]);
    }
    if (!varies(p->T, p->n) || !varies(p->W, p->n) || ls_relative(p->n, 3, X, p->sec, c))
        printf("  band: needs two T and two W, no fit\n");
    else {
        printf("  band:    t(T,W) = B T (%.4g + T (%.4g + %.4g 2^W)) ns\n", 1e9 * c[0],
               1e9 * c[1], 1e9 * c[2]);
        for (int i = 0; i < p->n; i++) {
            double m = X[i][0] * c[0] + X[i][1] * c[1] + X[i][2] * c[2];
            printf("           T = %4.0f W = %2.0f: measured %.3f s, model %.3f s (%+.1f %%)\n",
                   p->T[i], p->W[i], p->sec[i], m, 100 * (m / p->sec[i] - 1));
        }
    }
    for (int i = 0; i < p->nsoft; i++)
        X[i][0] = a->tB * p->Ts[i], X[i][1] = a->tB * p->Ts[i] * p->Ts[i];
    if (varies(p->Ts, p->nsoft) && !ls_relative(p->nsoft, 2, X, p->soft, c))
        printf("  softmax: t(T) = B T (%.4g + %.4g T) ns\n", 1e9 * c[0], 1e9 * c[1]);
}

int train_part(const bench_args *a, FILE *csv)
{
    data_source src;
    char note[512];
    if (choose_data(a, &src, note, sizeof note))
        return 1;
    printf("\n== training step: charlm, %d layers, %d heads, C = %d, FFN, B = %d, AdamW "
           "defaults, lr %g constant\n"
           "   softmax (learned position embeddings) | boltzmann relative band W, no position "
           "embeddings, engine auto (band),\n   couplings initialised ~ %g N(0,1)\n"
           "   data: %s\n"
           "   %d warm-up step(s), then ba_trainer_step ",
           TRAIN_LAYERS, TRAIN_HEADS, TRAIN_C, a->tB, LR, a->j_std, note, TRAIN_WARMUP);
    if (a->train_steps)
        printf("%ld time(s)\n", a->train_steps);
    else
        printf("until %.3g s, at least %d steps\n", a->train_time, TRAIN_MIN_STEPS);
    printf("   steps/s, s/step: means over the timed steps (CSV best_s: the fastest); peak MiB: "
           "VmHWM of the\n   configuration (reset before it)\n\n");
    printf("%5s  %-10s  %5s  %9s  %9s  %9s  %8s  %9s\n", "T", "variant", "steps", "steps/s",
           "s/step", "x softmax", "loss", "peak MiB");
    fflush(stdout);
    train_points pts;
    memset(&pts, 0, sizeof pts);
    int rc = 0;
    for (int ti = 0; ti < a->ntT && !rc; ti++)
        rc = train_T(a->tTs[ti], a, &src, &pts, csv);
    if (src.synth[0])
        unlink(src.synth);
    if (!rc)
        cost_model(a, &pts);
    return rc;
}
