/* bench_long: the cost of long contexts (issue 15), in one run so that the
 * ratios are taken side by side on the same machine state.
 *
 * Part 1, one attention head's forward + backward (ba_attention_forward +
 * ba_attention_backward) at each T of --T for softmax; boltzmann with
 * relative couplings r(1..W) and band W on the band engine (a row per W);
 * and, at T <= --fast-max, boltzmann with absolute couplings and no band
 * on the exact fast engine (with its context, as in the model). There each
 * band row is also checked against the fast engine given the same
 * couplings as absolute ones (out, dqkv, dJ summed per distance). Every
 * variant gets a warm-up run (where its peak memory is taken), which is
 * the measurement when it alone lasts max(--min-time, 5 s); the rest then
 * run in interleaved rounds, so a change of load hits all alike, and the
 * figure is the best run (the least disturbed on a shared machine). Slopes:
 * least squares of log(best) on log T over the T >= --slope-from.
 * Inputs: q, k, v ~ --qkv-std N(0,1), so h = q.k/sqrt(d) has std qkv-std^2;
 * r and the fast rows' J ~ --j-std N(0,1); dout ~ N(0,1).
 *
 * Part 2, the library's training step (ba_trainer_step) of a 2-layer,
 * 4-head charlm model with FFN: softmax and boltzmann relative band W
 * (pos_emb none, as the command line's default for relative couplings),
 * with each configuration's peak memory (VmHWM reset through clear_refs
 * before it, so floored at the resident size it started with); rates are
 * means over the timed steps. Last, the cost model
 * t = B T (l + T (c0 + c1 2^W)) fitted to the band rows.
 *
 * This file owns the options, part 1 and main; part 2 is
 * bench/long/train_step.c (CMake links the files of bench/NAME/ into
 * bench_NAME).
 *
 * Threads: --threads, else OMP_NUM_THREADS, else 1 (per-core figures).
 * Exit status: 0 ok, 1 library error, 2 bad arguments or unreadable data. */
#include "boltzattn.h"
#include "long/long.h"
#include "model/model.h" /* the attention core and the band engine, timed directly */
#include "opts.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#define MAX_VARIANTS (MAX_WS + 2) /* softmax, the bands, fast */
#define SINGLE_RUN_S 5.0
/* The goals: the band's slope that of softmax (2.0 +- 0.1), and at
 * T = 1024 W = 4 within 4x and W = 8 within 40x of softmax. */
#define GOAL_SLOPE 2.0
#define GOAL_SLOPE_TOL 0.1
#define GOAL_T 1024

static opt long_opts[] = {
    {"T", "LIST", "16,24,64,256,1024,4096", "attention core: block sizes, 2..4096", 0, 0},
    {"W", "LIST", "2,4,8", "attention core: bands of the boltzmann rows, 1..16", 0, 0},
    {"B", "N", "8", "attention core: batch size", 0, 0},
    {"d", "N", "64", "attention core: head dimension (one head, C = d)", 0, 0},
    {"fast-max", "N", "24",
     "attention core: the fast engine only for T <= N (at most 26; 0: never)", 0, 0},
    {"reps", "N", "5", "attention core: most timed runs per variant and T", 0, 0},
    {"min-time", "S", "2", "attention core: seconds of timed runs per variant and T", 0, 0},
    {"slope-from", "N", "256", "attention core: slopes over the measured T >= N", 0, 0},
    {"qkv-std", "S", "1", "std of q, k, v (the fields then have std S^2)", 0, 0},
    {"j-std", "S", "0.3", "std of the couplings (core) and the models' initial couplings", 0, 0},
    {"train-T", "LIST", "256,1024", "training step: block sizes, 2..4096", 0, 0},
    {"train-W", "LIST", "4,8", "training step: bands of the boltzmann models", 0, 0},
    {"train-B", "N", "16", "training step: batch size", 0, 0},
    {"train-f32", NULL, NULL, "training step: each band W also with band_f32 (--band-precision "
     "float: the band engine's window term in float32 where its guard allows), right after its "
     "double row", 0, 0},
    {"train-time", "S", "20", "training step: seconds of timed steps per configuration (at least "
     "2 steps)", 0, 0},
    {"data", "PATH", "$BA_DATA, ../shared/data/tinyshakespeare.txt, data/tinyshakespeare.txt",
     "charlm text (the first that exists; none: a synthetic text, said in the output)", 0, 0},
    {"no-core", NULL, NULL, "skip the attention core", 0, 0},
    {"no-train", NULL, NULL, "skip the training step", 0, 0},
    {"threads", "N", "OMP_NUM_THREADS, else 1", "OpenMP and BLAS threads", 0, 0},
    {"seed", "N", "1", "seed of the random inputs, weights and batches", 0, 0},
    {"csv", "PATH", NULL, "also write the results as CSV", 0, 0},
    {"quick", NULL, NULL, "smoke test of seconds: T = 16,64, W = 2,4, 1 rep; training T = 64, "
     "W = 4, B = 2, 1 step (unless given explicitly)", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command long_cmd = {
    NULL,
    "[--T LIST] [--W LIST] [--B N] [--d N] [--fast-max N] [--reps N]\n"
    "                  [--min-time S] [--slope-from N] [--qkv-std S] [--j-std S]\n"
    "                  [--train-T LIST] [--train-W LIST] [--train-B N]\n"
    "                  [--train-time S] [--data PATH] [--no-core] [--no-train]\n"
    "                  [--threads N] [--seed N] [--csv PATH] [--quick]\n\n"
    "Long contexts: forward+backward of one attention head for softmax, boltzmann\n"
    "with relative couplings and a band W (band engine) and, at small T, the exact\n"
    "fast engine; then the training step of a 2-layer, 4-head charlm model for\n"
    "softmax and the bands. Ratios to softmax, log-log slopes, the issue's goals,\n"
    "peak memory and a fitted cost model, in one run.",
    long_opts};

static int read_args(int argc, char **argv, bench_args *a)
{
    const command *c = &long_cmd;
    int rc = parse_args(c, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc)
        return rc;
    memset(a, 0, sizeof *a);
    if ((rc = get_int_list(c, "T", 2, BA_MAX_BLOCK, a->Ts, MAX_TS, &a->nT)) ||
        (rc = get_int_list(c, "W", 1, BA_MAX_BAND, a->Ws, MAX_WS, &a->nW)) ||
        (rc = get_int(c, "B", 1, 4096, &a->B)) || (rc = get_int(c, "d", 1, 4096, &a->d)) ||
        (rc = get_int(c, "fast-max", 0, BA_FAST_MAX_SPINS, &a->fast_max)) ||
        (rc = get_int(c, "reps", 1, 1000000, &a->reps)) ||
        (rc = get_double(c, "min-time", 0.0, 3600.0, &a->min_time)) ||
        (rc = get_int(c, "slope-from", 2, BA_MAX_BLOCK, &a->slope_from)) ||
        (rc = get_double(c, "qkv-std", 0.0, 100.0, &a->qkv_std)) ||
        (rc = get_double(c, "j-std", 0.0, 100.0, &a->j_std)) ||
        (rc = get_int_list(c, "train-T", 2, BA_MAX_BLOCK, a->tTs, MAX_TS, &a->ntT)) ||
        (rc = get_int_list(c, "train-W", 1, BA_MAX_BAND, a->tWs, MAX_WS, &a->ntW)) ||
        (rc = get_int(c, "train-B", 1, 4096, &a->tB)) ||
        (rc = get_double(c, "train-time", 0.0, 36000.0, &a->train_time)) ||
        (rc = get_long(c, "seed", 0, LONG_MAX, &a->seed)))
        return rc;
    /* One thread unless asked otherwise: figures per core, which the other
     * jobs of a shared machine disturb the least (apply_threads alone would
     * pick the cores idle at the start, a count that varies run to run). */
    if (is_set(c, "threads")) {
        if ((rc = apply_threads(c)))
            return rc;
    } else if (!getenv("OMP_NUM_THREADS"))
        set_threads(1);
    a->core = !is_set(c, "no-core");
    a->train = !is_set(c, "no-train");
    a->train_f32 = is_set(c, "train-f32");
    a->data = is_set(c, "data") ? get_str(c, "data") : NULL;
    a->csv_path = get_str(c, "csv");
    if (is_set(c, "quick")) {
        static const int qT[] = {16, 64}, qW[] = {2, 4};
        if (!is_set(c, "T"))
            memcpy(a->Ts, qT, sizeof qT), a->nT = 2;
        if (!is_set(c, "W"))
            memcpy(a->Ws, qW, sizeof qW), a->nW = 2;
        if (!is_set(c, "reps"))
            a->reps = 1;
        if (!is_set(c, "min-time"))
            a->min_time = 0.0;
        if (!is_set(c, "slope-from"))
            a->slope_from = 16;
        if (!is_set(c, "train-T"))
            a->tTs[0] = 64, a->ntT = 1;
        if (!is_set(c, "train-W"))
            a->tWs[0] = 4, a->ntW = 1;
        if (!is_set(c, "train-B"))
            a->tB = 2;
        if (!is_set(c, "train-time"))
            a->train_steps = 1;
    }
    return 0;
}

/* ------------------------------------------------------ measurement aids */

/* Least-squares slope of y against x over n points (NAN when n < 2). */
static double ls_slope(const double *x, const double *y, int n)
{
    double mx = 0.0, my = 0.0, sxx = 0.0, sxy = 0.0;
    for (int i = 0; i < n; i++)
        mx += x[i] / n, my += y[i] / n;
    for (int i = 0; i < n; i++)
        sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
    return n >= 2 && sxx > 0 ? sxy / sxx : NAN;
}

/* max |x - y| / max |y| over n values */
static double rel_diff(const ba_real *x, const ba_real *y, size_t n)
{
    double md = 0.0, my = 0.0;
    for (size_t i = 0; i < n; i++) {
        md = fmax(md, fabs((double)x[i] - (double)y[i]));
        my = fmax(my, fabs((double)y[i]));
    }
    return my > 0 ? md / my : md;
}

/* ---------------------------------------------------- part 1: the core */

typedef struct {
    char name[16];
    int W;    /* band rows; 0 for softmax and fast */
    int kind; /* column in core_results: 0 softmax, 1 + index in --W, 1 + nW fast */
    ba_attn_shape s;
    ba_real *J, *dJ; /* couplings and their gradient (NULL for softmax) */
    size_t nJ;
    int runs, done;
    double total, best, peak_mib, err_fast; /* err_fast NAN when not checked */
} variant;

/* One T: the shared buffers (every variant reads the same inputs and
 * writes the same outputs) and the variants. */
typedef struct {
    int T;
    size_t n_qkv, n_out, n_att;
    ba_real *qkv, *dout, *out, *att, *pre, *dqkv;
    ba_engine_ctx *ctx; /* the fast engine's, one head */
    variant v[MAX_VARIANTS];
    int nv;
} core;

static void core_free(core *c)
{
    free(c->qkv), free(c->dout), free(c->out), free(c->att), free(c->pre), free(c->dqkv);
    for (int i = 0; i < c->nv; i++)
        free(c->v[i].J), free(c->v[i].dJ);
    ba_engine_ctx_free(c->ctx);
    memset(c, 0, sizeof *c);
}

/* A variant of c with nJ couplings (0: none); its shape starts from base. */
static variant *add_variant(core *c, const ba_attn_shape *base, const char *name, size_t nJ)
{
    variant *v = &c->v[c->nv];
    memset(v, 0, sizeof *v);
    v->kind = c->nv++;
    snprintf(v->name, sizeof v->name, "%s", name);
    v->s = *base;
    v->nJ = nJ;
    v->err_fast = NAN;
    if (nJ && (!(v->J = calloc(nJ, sizeof(ba_real))) || !(v->dJ = calloc(nJ, sizeof(ba_real)))))
        return NULL;
    return v;
}

/* The problem at T with its variants: softmax, a band row per W, fast when
 * T <= fast_max. 0, or 1 when out of memory. */
static int core_init(core *c, int T, const bench_args *a)
{
    memset(c, 0, sizeof *c);
    c->T = T;
    int B = a->B, d = a->d;
    c->n_qkv = (size_t)B * T * 3 * d, c->n_out = (size_t)B * T * d, c->n_att = (size_t)B * T * T;
    c->qkv = malloc(sizeof(ba_real) * c->n_qkv), c->dqkv = malloc(sizeof(ba_real) * c->n_qkv);
    c->dout = malloc(sizeof(ba_real) * c->n_out), c->out = malloc(sizeof(ba_real) * c->n_out);
    c->att = malloc(sizeof(ba_real) * c->n_att), c->pre = malloc(sizeof(ba_real) * c->n_att);
    if (!c->qkv || !c->dqkv || !c->dout || !c->out || !c->att || !c->pre)
        return 1;
    ba_rng r;
    ba_rng_seed(&r, (uint64_t)a->seed * 1000003u + (uint64_t)T);
    for (size_t i = 0; i < c->n_qkv; i++)
        c->qkv[i] = (ba_real)(a->qkv_std * ba_rng_normal(&r));
    for (size_t i = 0; i < c->n_out; i++)
        c->dout[i] = (ba_real)ba_rng_normal(&r);
    /* one r(1..16) for every band, so a narrower band is a truncation of a
     * wider one */
    double rel[BA_MAX_BAND];
    for (int k = 0; k < BA_MAX_BAND; k++)
        rel[k] = a->j_std * ba_rng_normal(&r);

    ba_attn_shape base = {.attn = BA_ATTN_SOFTMAX, .engine = BA_ENGINE_FAST, .B = B, .T = T,
                          .C = d, .H = 1, .Tmax = T};
    if (!add_variant(c, &base, "softmax", 0))
        return 1;
    for (int wi = 0; wi < a->nW; wi++) {
        int W = a->Ws[wi];
        char name[16];
        snprintf(name, sizeof name, "band W=%d", W);
        ba_attn_shape s = base;
        s.attn = BA_ATTN_BOLTZMANN, s.engine = BA_ENGINE_BAND;
        s.couplings = BA_COUPLINGS_RELATIVE, s.band = W, s.D = W;
        variant *v = add_variant(c, &s, name, (size_t)W);
        if (!v)
            return 1;
        v->W = W;
        for (int k = 0; k < W; k++)
            v->J[k] = (ba_real)rel[k];
    }
    if (T <= a->fast_max) {
        if (!(c->ctx = ba_engine_ctx_new()))
            return 1;
        ba_attn_shape s = base;
        s.attn = BA_ATTN_BOLTZMANN, s.engine = BA_ENGINE_FAST, s.ctx = &c->ctx;
        variant *v = add_variant(c, &s, "fast", (size_t)T * T);
        if (!v)
            return 1;
        for (int j = 0; j < T; j++)
            for (int k = j + 1; k < T; k++)
                v->J[(size_t)j * T + k] = (ba_real)(a->j_std * ba_rng_normal(&r));
    }
    return 0;
}

/* One forward + backward of v on c's inputs. */
static int run_once(core *c, variant *v, char *err)
{
    memset(c->dqkv, 0, sizeof(ba_real) * c->n_qkv);
    if (v->dJ)
        memset(v->dJ, 0, sizeof(ba_real) * v->nJ);
    int rc = ba_attention_forward(&v->s, c->out, c->att, c->pre, c->qkv, v->J, err);
    if (!rc)
        rc = ba_attention_backward(&v->s, c->dqkv, v->dJ, c->dout, c->qkv, v->J, c->att, c->pre,
                                   err);
    return rc;
}

static int timed_run(core *c, variant *v, double *dt, char *err)
{
    double t0 = now_s();
    int rc = run_once(c, v, err);
    *dt = now_s() - t0;
    return rc;
}

/* Times every variant of c (see the top comment): warm-ups, then rounds. */
static int time_core(core *c, const bench_args *a, int *failed, char *err)
{
    for (int i = 0; i < c->nv; i++) {
        variant *v = &c->v[i];
        double dt;
        reset_peak_rss();
        int rc = timed_run(c, v, &dt, err);
        v->peak_mib = peak_rss_mib();
        if (rc)
            return *failed = i, rc;
        v->best = INFINITY;
        if (dt >= fmax(a->min_time, SINGLE_RUN_S))
            v->runs = 1, v->total = v->best = dt, v->done = 1;
    }
    for (int pending = 1; pending;) {
        pending = 0;
        for (int i = 0; i < c->nv; i++) {
            variant *v = &c->v[i];
            if (v->done)
                continue;
            double dt;
            int rc = timed_run(c, v, &dt, err);
            if (rc)
                return *failed = i, rc;
            v->runs++, v->total += dt, v->best = fmin(v->best, dt);
            v->done = v->runs >= a->reps || v->total >= a->min_time;
            pending |= !v->done;
        }
    }
    return BA_OK;
}

/* Each band row against the fast engine on the same couplings written as
 * absolute ones: output, dqkv and dJ (the fast engine's summed along each
 * distance), max relative difference, into err_fast. */
static int check_against_fast(core *c, char *err)
{
    variant *fast = &c->v[c->nv - 1];
    int T = c->T, rc = BA_OK;
    ba_real *out = malloc(sizeof(ba_real) * c->n_out), *dq = malloc(sizeof(ba_real) * c->n_qkv);
    ba_real *Jsave = malloc(sizeof(ba_real) * fast->nJ);
    if (!out || !dq || !Jsave) {
        free(out), free(dq), free(Jsave);
        return ba_fail(err, BA_ERR_NOMEM, "out of memory for the check at T = %d", T);
    }
    memcpy(Jsave, fast->J, sizeof(ba_real) * fast->nJ);
    for (int i = 0; i < c->nv && !rc; i++) {
        variant *v = &c->v[i];
        if (!v->W)
            continue;
        if ((rc = run_once(c, v, err)))
            break;
        memcpy(out, c->out, sizeof(ba_real) * c->n_out);
        memcpy(dq, c->dqkv, sizeof(ba_real) * c->n_qkv);
        for (int j = 0; j < T; j++)
            for (int k = 0; k < T; k++)
                fast->J[(size_t)j * T + k] = k > j && k - j <= v->W ? v->J[k - j - 1] : 0;
        if ((rc = run_once(c, fast, err)))
            break;
        double e = fmax(rel_diff(c->out, out, c->n_out), rel_diff(c->dqkv, dq, c->n_qkv));
        double md = 0.0, mg = 0.0;
        for (int dist = 1; dist <= v->W && dist < T; dist++) {
            double s = 0.0;
            for (int k = dist; k < T; k++)
                s += fast->dJ[(size_t)(k - dist) * T + k];
            md = fmax(md, fabs(s - v->dJ[dist - 1]));
            mg = fmax(mg, fabs((double)v->dJ[dist - 1]));
        }
        v->err_fast = fmax(e, mg > 0 ? md / mg : md);
    }
    memcpy(fast->J, Jsave, sizeof(ba_real) * fast->nJ);
    free(out), free(dq), free(Jsave);
    return rc;
}

/* Best times of every T (rows) and variant kind (columns: softmax, the
 * bands in --W order, fast); NAN where not run. */
typedef struct {
    double best[MAX_TS][MAX_VARIANTS];
    const char *names[MAX_VARIANTS];
    char band_names[MAX_WS][16];
    int nk;
} core_results;

static void core_row(const core *c, const variant *v, const bench_args *a, FILE *csv)
{
    double soft = c->v[0].best, ratio = v->best / soft;
    char chk[32] = "-";
    if (!isnan(v->err_fast))
        snprintf(chk, sizeof chk, "%.1e", v->err_fast);
    printf("%5d  %-10s  %4d  %12.3f  %12.3f  %9.2f  %9.1f  %9s\n", c->T, v->name, v->runs,
           1e3 * v->best, 1e3 * v->total / v->runs, ratio, v->peak_mib, chk);
    fflush(stdout);
    if (csv) {
        fprintf(csv, "core,%d,%s,%d,%d,%d,%d,%d,%.6g,%.6g,%.6g,,,%.1f,", c->T,
                v->s.attn == BA_ATTN_SOFTMAX ? "softmax" : v->W ? "band" : "fast", v->W, a->B,
                a->d, threads_in_use(), v->runs, v->best, v->total / v->runs, ratio, v->peak_mib);
        if (!isnan(v->err_fast))
            fprintf(csv, "%.3g", v->err_fast);
        fprintf(csv, ",\n");
        fflush(csv);
    }
}

/* Measures one T into res; 0 or 1 after printing the problem. */
static int core_T(int ti, const bench_args *a, core_results *res, FILE *csv)
{
    int T = a->Ts[ti], failed = -1;
    char err[BA_ERR_LEN];
    core c;
    if (core_init(&c, T, a)) {
        core_free(&c);
        fprintf(stderr, "%s: out of memory for the attention core at T = %d\n", prog, T);
        return 1;
    }
    int rc = time_core(&c, a, &failed, err);
    if (!rc && T <= a->fast_max)
        rc = check_against_fast(&c, err);
    if (rc) {
        fprintf(stderr, "%s: attention core, T = %d%s%s: %s (%s)\n", prog, T,
                failed >= 0 ? ", " : "", failed >= 0 ? c.v[failed].name : "", err,
                ba_status_str(rc));
        core_free(&c);
        return 1;
    }
    for (int i = 0; i < c.nv; i++) {
        core_row(&c, &c.v[i], a, csv);
        res->best[ti][c.v[i].kind] = c.v[i].best;
    }
    core_free(&c);
    return 0;
}

/* Slopes and the goals from res. */
static void core_summary(const bench_args *a, const core_results *res, FILE *csv)
{
    int lo = INT_MAX, hi = 0;
    for (int ti = 0; ti < a->nT; ti++)
        if (a->Ts[ti] >= a->slope_from)
            lo = a->Ts[ti] < lo ? a->Ts[ti] : lo, hi = a->Ts[ti] > hi ? a->Ts[ti] : hi;
    printf("\nlog-log slope of the best time against T, least squares over the measured "
           "T = %d..%d:\n", lo == INT_MAX ? 0 : lo, hi);
    double slope[MAX_VARIANTS];
    for (int k = 0; k < res->nk; k++) {
        double x[MAX_TS], y[MAX_TS];
        int n = 0;
        for (int ti = 0; ti < a->nT; ti++)
            if (a->Ts[ti] >= a->slope_from && !isnan(res->best[ti][k]))
                x[n] = log((double)a->Ts[ti]), y[n] = log(res->best[ti][k]), n++;
        slope[k] = ls_slope(x, y, n);
        if (n < 2)
            continue;
        printf("  %-10s  %.3f  (%d points)\n", res->names[k], slope[k], n);
        if (csv)
            fprintf(csv, "slope,,%s,,%d,%d,%d,%d,,,,,,,,%.4f\n", res->names[k], a->B, a->d,
                    threads_in_use(), n, slope[k]);
    }
    printf("\ngoals (issue 15): band slope %.1f +- %.1f; at T = %d W = 4 within 4x of softmax, "
           "W = 8 within 40x\n", GOAL_SLOPE, GOAL_SLOPE_TOL, GOAL_T);
    for (int wi = 0; wi < a->nW; wi++) {
        double s = slope[1 + wi];
        if (!isnan(s))
            printf("  %-10s  slope %.3f: %s\n", res->names[1 + wi], s,
                   fabs(s - GOAL_SLOPE) <= GOAL_SLOPE_TOL ? "met" : "NOT met");
    }
    for (int ti = 0; ti < a->nT; ti++)
        for (int wi = 0; wi < a->nW && a->Ts[ti] == GOAL_T; wi++) {
            int W = a->Ws[wi];
            double lim = W == 4 ? 4.0 : W == 8 ? 40.0 : 0.0;
            double r = res->best[ti][1 + wi] / res->best[ti][0];
            if (lim > 0)
                printf("  %-10s  T = %d: %.2fx softmax (goal %.0fx): %s\n", res->names[1 + wi],
                       GOAL_T, r, lim, r <= lim ? "met" : "NOT met");
        }
    fflush(stdout);
}

static int core_part(const bench_args *a, FILE *csv)
{
    core_results res;
    for (int ti = 0; ti < MAX_TS; ti++)
        for (int k = 0; k < MAX_VARIANTS; k++)
            res.best[ti][k] = NAN;
    res.names[0] = "softmax";
    for (int wi = 0; wi < a->nW; wi++) {
        snprintf(res.band_names[wi], sizeof res.band_names[wi], "band W=%d", a->Ws[wi]);
        res.names[1 + wi] = res.band_names[wi];
    }
    res.names[1 + a->nW] = "fast";
    res.nk = a->nW + 2;
    printf("== attention core: one head, forward + backward, B = %d, d = C = %d\n"
           "   softmax | boltzmann relative couplings, band W, band engine | boltzmann "
           "absolute, no band, fast engine (T <= %d)\n"
           "   q, k, v ~ %g N(0,1) (fields of std %.3g), r and the fast rows' J ~ %g N(0,1), "
           "dout ~ N(0,1), seed %ld\n"
           "   warm-up run (peak MiB taken there), then interleaved rounds until %.3g s or %d "
           "runs per variant;\n   a first run over %.3g s is the only one\n\n",
           a->B, a->d, a->fast_max, a->qkv_std, a->qkv_std * a->qkv_std, a->j_std, a->seed,
           a->min_time, a->reps, fmax(a->min_time, SINGLE_RUN_S));
    printf("%5s  %-10s  %4s  %12s  %12s  %9s  %9s  %9s\n", "T", "variant", "runs", "best ms",
           "mean ms", "x softmax", "peak MiB", "vs fast");
    fflush(stdout);
    for (int ti = 0; ti < a->nT; ti++)
        if (core_T(ti, a, &res, csv))
            return 1;
    printf("\nx softmax: best time / softmax's best at the same T; vs fast: the band row "
           "against the fast engine on the\nsame couplings as absolute ones (max relative "
           "difference of out, dqkv and dJ summed per distance)\n");
    core_summary(a, &res, csv);
    return 0;
}


/* ---------------------------------------------------------------- main */

static void print_header(int per_config)
{
    char cpu[256], date[64];
    cpu_model(cpu, sizeof cpu);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    double load[3] = {NAN, NAN, NAN};
    getloadavg(load, 3);
    const char *env = getenv("OMP_NUM_THREADS");
    printf("bench_long: long contexts (issue 15), %s\n", date);
    printf("cpu: %s, %ld cores online | threads: %d (OMP_NUM_THREADS=%s) | load average at "
           "start: %.2f %.2f %.2f\n",
           cpu, sysconf(_SC_NPROCESSORS_ONLN), threads_in_use(), env ? env : "unset", load[0],
           load[1], load[2]);
    printf("library: ba_real = %s, Ising engines in double; peak memory %s\n\n",
           sizeof(ba_real) == sizeof(float) ? "float" : "double",
           per_config ? "per configuration (VmHWM reset before it)"
                      : "is the process's running maximum (VmHWM reset refused)");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    prog = "bench_long"; /* messages name this program (cli/opts.c) */
    bench_args a;
    int rc = read_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    FILE *csv = NULL;
    if (a.csv_path &&
        !(csv = open_csv(a.csv_path, "part,T,variant,W,B,C,threads,runs,best_s,mean_s,"
                                     "time_vs_softmax,steps_per_s,loss,peak_rss_mib,err_vs_fast,"
                                     "slope\n")))
        return EXIT_USAGE;
    print_header(reset_peak_rss() == 0);
    double t0 = now_s();
    if (a.core)
        rc = core_part(&a, csv);
    if (!rc && a.train)
        rc = train_part(&a, csv);
    double load[3] = {NAN, NAN, NAN};
    getloadavg(load, 3);
    char dur[32];
    fmt_duration(now_s() - t0, dur, sizeof dur);
    printf("\ndone in %s; load average at the end: %.2f %.2f %.2f\n", dur, load[0], load[1],
           load[2]);
    if (csv && fclose(csv) && !rc) {
        fprintf(stderr, "%s: error writing '%s'\n", prog, a.csv_path);
        return 1;
    }
    return rc;
}
