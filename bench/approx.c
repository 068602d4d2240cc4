/* bench_approx: the cost of the approximate engines (mf, tap, bp, hybrid)
 * against softmax and the exact band engine, in one run so that the ratios
 * are taken side by side on the same machine state.
 *
 * One attention head's forward + backward (ba_attention_forward +
 * ba_attention_backward), B = --B, d = C = --d, at each T of --T, for:
 *   softmax (the reference of the ratios);
 *   band8: boltzmann, relative couplings r(1..8), band 8, band engine;
 *   mf, tap, bp with full-range relative couplings (D = T - 1, no band);
 *   mf-band8, tap-band8, bp-band8: relative couplings banded at W = 8 (the
 *   engines still build a dense row, so a sweep costs O(n^2) all the same);
 *   hybrid-w4, hybrid-w8: windows 4 and 8, full-range relative couplings.
 * --only picks some of them (softmax always runs).
 * Couplings: relative, by distance from the paper-like pattern of strength
 * --a: J(1) = a/2, J(2..4) = a, J(5) = 0, J(>=6) = -a/2 (no noise). Inputs
 * q, k, v ~ --qkv-std N(0,1) (fields of std qkv-std^2), dout ~ N(0,1);
 * approximate settings ba_approx_default().
 *
 * Timing: a configuration runs up to --reps times, stopping once its runs
 * add up to --max-s seconds (so a first run over --max-s is the only one);
 * the figure is the median. A configuration is not run at a T, but
 * "skipped (est. N s)", when at a smaller T it took more than --max-s, or
 * when its estimate, the time at the largest smaller T scaled by the
 * measured cost law (T^3 for the approximate engines: O(n^2) a sweep per
 * row, T rows; T^2 for softmax and the band engine), exceeds --max-est.
 * The estimate leaves out any growth of the sweeps per row with T, so it
 * is a lower bound: a goal may be found missed on one, never met.
 * Approximate engines: the forward's counts (ba_approx_stats through the
 * shape's astats): sweeps per row (mean, max), rows retried and rows left
 * unconverged, and the backward's unconverged rows.
 *
 * Threads: --threads, else 1 (the published figures are single-thread).
 * Exit status: 0 ok, 1 a library error (the rest still runs), 2 bad
 * arguments. */
#include "boltzattn.h"
#include "model/model.h" /* the engines and the attention core, timed directly */
#include "opts.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#define MAX_TS 16
#define MAX_REPS 64
#define BAND_W 8 /* the band of the band engine's and the banded rows */
/* The goals. */
#define GOAL1_T 1024
#define GOAL1_RATIO 5.0 /* mf, banded or relative couplings, vs softmax */
#define GOAL2_T 256
#define GOAL2_RATIO 20.0 /* full-range mf and tap, vs softmax */

static opt approx_opts[] = {
    {"T", "LIST", "64,256,1024", "block sizes, 2..4096 (run in increasing order)", 0, 0},
    {"B", "N", "8", "batch size", 0, 0},
    {"d", "N", "64", "head dimension (one head, C = d)", 0, 0},
    {"a", "X", "0.1", "coupling strength of the paper-like pattern", 0, 0},
    {"qkv-std", "S", "1", "std of q, k, v (the fields then have std S^2)", 0, 0},
    {"reps", "N", "5", "most timed runs per configuration and T (the figure is their median)",
     0, 0},
    {"max-s", "S", "20", "stop repeating once the runs add up to S seconds; skip the larger T "
     "of a configuration that took more than S", 0, 0},
    {"max-est", "S", "150", "also skip a configuration whose estimate from its time at the "
     "largest smaller T exceeds S seconds (0: no such skip)", 0, 0},
    {"only", "LIST", "all", "configurations to run (softmax always runs): softmax, band8, mf, "
     "tap, bp, mf-band8, tap-band8, bp-band8, hybrid-w4, hybrid-w8", 0, 0},
    {"threads", "N", "1", "OpenMP and BLAS threads", 0, 0},
    {"seed", "N", "1", "seed of the random inputs", 0, 0},
    {"csv", "PATH", NULL, "also write the results as CSV", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command approx_cmd = {
    NULL,
    "[--T LIST] [--B N] [--d N] [--a X] [--qkv-std S] [--reps N]\n"
    "                    [--max-s S] [--max-est S] [--only LIST] [--threads N] [--seed N]\n"
    "                    [--csv PATH]\n\n"
    "Approximate engines: forward+backward of one attention head for softmax, the\n"
    "band engine (W = 8), mf, tap and bp with full-range and banded (W = 8) relative\n"
    "couplings, and hybrid (windows 4, 8), with the engines' sweep counts, ratios to\n"
    "softmax and the issue's goals, in one run.",
    approx_opts};

typedef struct {
    int Ts[MAX_TS], nT, B, d, reps;
    double a, qkv_std, max_s, max_est;
    long seed;
    const char *csv_path;
    int on[16]; /* per configuration (NCONF of them): whether it runs */
} bench_args;

/* The configurations, in table order (names as --only takes them; mf, tap,
 * bp and hybrid-w* are full-range). full: relative couplings over every
 * distance (D = T - 1, no band); else band and D are BAND_W. */
typedef struct {
    const char *name;
    ba_attn attn;
    ba_engine engine;
    int full, window;
    double power; /* the cost law in T used by the estimates */
} config;

static const config configs[] = {
    {"softmax", BA_ATTN_SOFTMAX, BA_ENGINE_FAST, 0, 0, 2.0},
    {"band8", BA_ATTN_BOLTZMANN, BA_ENGINE_BAND, 0, 0, 2.0},
    {"mf", BA_ATTN_BOLTZMANN, BA_ENGINE_MF, 1, 0, 3.0},
    {"tap", BA_ATTN_BOLTZMANN, BA_ENGINE_TAP, 1, 0, 3.0},
    {"bp", BA_ATTN_BOLTZMANN, BA_ENGINE_BP, 1, 0, 3.0},
    {"mf-band8", BA_ATTN_BOLTZMANN, BA_ENGINE_MF, 0, 0, 3.0},
    {"tap-band8", BA_ATTN_BOLTZMANN, BA_ENGINE_TAP, 0, 0, 3.0},
    {"bp-band8", BA_ATTN_BOLTZMANN, BA_ENGINE_BP, 0, 0, 3.0},
    {"hybrid-w4", BA_ATTN_BOLTZMANN, BA_ENGINE_HYBRID, 1, 4, 3.0},
    {"hybrid-w8", BA_ATTN_BOLTZMANN, BA_ENGINE_HYBRID, 1, 8, 3.0},
};
#define NCONF ((int)(sizeof configs / sizeof configs[0]))
_Static_assert(sizeof configs / sizeof configs[0] <= 16, "bench_args.on holds 16");
enum { C_SOFTMAX = 0, C_MF_FULL = 2, C_TAP_FULL = 3, C_MF_BAND = 5 };

enum { ST_NONE = 0, ST_RUN, ST_SKIP, ST_FAIL };

/* --only: the configurations named in a comma-separated list (all when
 * not given). 0, or an exit code after printing. */
static int read_only(const command *c, int *on)
{
    const char *v = get_str(c, "only");
    for (int k = 0; k < NCONF; k++)
        on[k] = !is_set(c, "only") || k == 0;
    while (is_set(c, "only") && *v) {
        size_t len = strcspn(v, ",");
        int k = 0;
        while (k < NCONF && !(strlen(configs[k].name) == len && !strncmp(configs[k].name, v, len)))
            k++;
        if (k == NCONF)
            return usage_error(c, "--only: unknown configuration '%.*s'", (int)len, v);
        on[k] = 1;
        v += len + (v[len] == ',');
    }
    return 0;
}

/* One configuration at one T. */
typedef struct {
    int status, runs;
    double median, min, est; /* est: the estimate when skipped */
    ba_approx_stats fwd, bwd; /* of the last run */
} result;

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int read_args(int argc, char **argv, bench_args *a)
{
    const command *c = &approx_cmd;
    int rc = parse_args(c, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc)
        return rc;
    memset(a, 0, sizeof *a);
    if ((rc = get_int_list(c, "T", 2, BA_MAX_BLOCK, a->Ts, MAX_TS, &a->nT)) ||
        (rc = get_int(c, "B", 1, 4096, &a->B)) || (rc = get_int(c, "d", 1, 4096, &a->d)) ||
        (rc = get_double(c, "a", -100.0, 100.0, &a->a)) ||
        (rc = get_double(c, "qkv-std", 0.0, 100.0, &a->qkv_std)) ||
        (rc = get_int(c, "reps", 1, MAX_REPS, &a->reps)) ||
        (rc = get_double(c, "max-s", 0.0, 1e6, &a->max_s)) ||
        (rc = get_double(c, "max-est", 0.0, 1e9, &a->max_est)) ||
        (rc = get_long(c, "seed", 0, LONG_MAX, &a->seed)))
        return rc;
    qsort(a->Ts, (size_t)a->nT, sizeof a->Ts[0], cmp_int);
    /* one thread unless asked: per-core figures, which the other jobs of a
     * shared machine disturb the least */
    if (is_set(c, "threads")) {
        if ((rc = apply_threads(c)))
            return rc;
    } else
        set_threads(1);
    a->csv_path = get_str(c, "csv");
    return read_only(c, a->on);
}

/* The paper-like coupling of distance d >= 1 at strength a. */
static double pattern(int d, double a)
{
    return d == 1 ? a / 2 : d <= 4 ? a : d == 5 ? 0.0 : -a / 2;
}

/* The inputs and outputs at one T, shared by every configuration. */
typedef struct {
    int T;
    size_t n_qkv, n_out, n_att;
    ba_real *qkv, *dout, *out, *att, *pre, *dqkv, *J, *dJ; /* J, dJ: T - 1 distances */
} problem;

static void problem_free(problem *p)
{
    free(p->qkv), free(p->dout), free(p->out), free(p->att), free(p->pre), free(p->dqkv);
    free(p->J), free(p->dJ);
    memset(p, 0, sizeof *p);
}

/* 0, or 1 when out of memory. */
static int problem_init(problem *p, int T, const bench_args *a)
{
    memset(p, 0, sizeof *p);
    p->T = T;
    p->n_qkv = (size_t)a->B * T * 3 * a->d, p->n_out = (size_t)a->B * T * a->d;
    p->n_att = (size_t)a->B * T * T;
    p->qkv = malloc(sizeof(ba_real) * p->n_qkv), p->dqkv = malloc(sizeof(ba_real) * p->n_qkv);
    p->dout = malloc(sizeof(ba_real) * p->n_out), p->out = malloc(sizeof(ba_real) * p->n_out);
    p->att = malloc(sizeof(ba_real) * p->n_att), p->pre = malloc(sizeof(ba_real) * p->n_att);
    p->J = malloc(sizeof(ba_real) * (size_t)T), p->dJ = malloc(sizeof(ba_real) * (size_t)T);
    if (!p->qkv || !p->dqkv || !p->dout || !p->out || !p->att || !p->pre || !p->J || !p->dJ)
        return 1;
    ba_rng r;
    ba_rng_seed(&r, (uint64_t)a->seed * 1000003u + (uint64_t)T);
    for (size_t i = 0; i < p->n_qkv; i++)
        p->qkv[i] = (ba_real)(a->qkv_std * ba_rng_normal(&r));
    for (size_t i = 0; i < p->n_out; i++)
        p->dout[i] = (ba_real)ba_rng_normal(&r);
    for (int d = 1; d < T; d++)
        p->J[d - 1] = (ba_real)pattern(d, a->a);
    return 0;
}

/* The attention shape of configuration k at p's T. */
static ba_attn_shape shape_of(int k, const problem *p, const bench_args *a)
{
    const config *cf = &configs[k];
    ba_attn_shape s = {.attn = cf->attn, .engine = cf->engine, .B = a->B, .T = p->T,
                       .C = a->d, .H = 1, .Tmax = p->T};
    if (cf->attn == BA_ATTN_SOFTMAX)
        return s;
    s.couplings = BA_COUPLINGS_RELATIVE;
    if (cf->full)
        s.band = 0, s.D = p->T - 1;
    else
        s.band = BAND_W < p->T - 1 ? BAND_W : p->T - 1, s.D = s.band;
    s.approx = ba_approx_default();
    s.window = cf->window;
    return s;
}

/* One forward + backward of configuration k; fwd and bwd get the
 * approximate engines' counts of this run; *dt its seconds. */
static int run_once(int k, problem *p, const bench_args *a, ba_approx_stats *fwd,
                    ba_approx_stats *bwd, double *dt, char *err)
{
    ba_attn_shape sf = shape_of(k, p, a), sb = sf;
    memset(fwd, 0, sizeof *fwd), memset(bwd, 0, sizeof *bwd);
    sf.astats = fwd, sb.astats = bwd;
    const ba_real *J = configs[k].attn == BA_ATTN_SOFTMAX ? NULL : p->J;
    ba_real *dJ = J ? p->dJ : NULL;
    memset(p->dqkv, 0, sizeof(ba_real) * p->n_qkv);
    memset(p->dJ, 0, sizeof(ba_real) * (size_t)p->T);
    double t0 = now_s();
    int rc = ba_attention_forward(&sf, p->out, p->att, p->pre, p->qkv, J, err);
    if (!rc)
        rc = ba_attention_backward(&sb, p->dqkv, dJ, p->dout, p->qkv, J, p->att, p->pre, err);
    *dt = now_s() - t0;
    return rc;
}

/* Whether configuration k is skipped at T index ti (and its estimate):
 * from its result at the largest smaller T, measured or itself estimated. */
static int should_skip(int k, int ti, const bench_args *a, result res[][MAX_TS], double *est)
{
    for (int tj = ti - 1; tj >= 0; tj--) {
        const result *r = &res[k][tj];
        if (r->status != ST_RUN && r->status != ST_SKIP)
            continue;
        double base = r->status == ST_RUN ? r->median : r->est;
        *est = base * pow((double)a->Ts[ti] / a->Ts[tj], configs[k].power);
        return r->status == ST_SKIP || (r->status == ST_RUN && r->min > a->max_s) ||
               (a->max_est > 0 && *est > a->max_est);
    }
    return 0;
}

/* Measures configuration k at p's T into *r; 0, or 1 after printing a
 * library error. */
static int measure(int k, problem *p, const bench_args *a, result *r)
{
    double t[MAX_REPS], total = 0.0;
    char err[BA_ERR_LEN];
    memset(r, 0, sizeof *r);
    while (r->runs < a->reps && (r->runs == 0 || total < a->max_s)) {
        int rc = run_once(k, p, a, &r->fwd, &r->bwd, &t[r->runs], err);
        if (rc) {
            fprintf(stderr, "%s: T = %d, %s: %s (%s)\n", prog, p->T, configs[k].name, err,
                    ba_status_str(rc));
            r->status = ST_FAIL;
            return 1;
        }
        total += t[r->runs++];
    }
    qsort(t, (size_t)r->runs, sizeof t[0], cmp_double);
    r->min = t[0];
    r->median = r->runs % 2 ? t[r->runs / 2] : 0.5 * (t[r->runs / 2 - 1] + t[r->runs / 2]);
    r->status = ST_RUN;
    return 0;
}

static void print_row(int k, int T, const result *r, double soft, const bench_args *a,
                      FILE *csv)
{
    const config *cf = &configs[k];
    int approx = ba_engine_is_approx(cf->engine) && cf->attn != BA_ATTN_SOFTMAX;
    char sec[40] = "-", ratio[16] = "-", sw[32] = "-", cnt[40] = "-";
    if (r->status == ST_RUN) {
        snprintf(sec, sizeof sec, "%.4g", r->median);
        snprintf(ratio, sizeof ratio, "%.2f", r->median / soft);
    } else if (r->status == ST_SKIP)
        snprintf(sec, sizeof sec, "skipped (est. %.0f s)", r->est);
    else if (r->status == ST_FAIL)
        snprintf(sec, sizeof sec, "FAILED");
    if (r->status == ST_RUN && approx && r->fwd.queries > 0) {
        snprintf(sw, sizeof sw, "%.1f / %d", (double)r->fwd.sweeps / r->fwd.queries,
                 r->fwd.max_sweeps);
        snprintf(cnt, sizeof cnt, "%ld / %ld / %ld", r->fwd.retried, r->fwd.unconverged,
                 r->bwd.unconverged);
    }
    printf("%5d  %-10s  %4d  %22s  %9s  %14s  %16s\n", T, cf->name, r->runs, sec, ratio, sw,
           cnt);
    fflush(stdout);
    if (!csv)
        return;
    static const char *st[] = {"none", "run", "skipped", "failed"};
    int D = cf->attn == BA_ATTN_SOFTMAX ? 0 : cf->full || T - 1 < BAND_W ? T - 1 : BAND_W;
    fprintf(csv, "core,%d,%s,%s,%s,%d,%d,%d,%d,%d,%g,%d,%s,%d,", T, cf->name,
            cf->attn == BA_ATTN_SOFTMAX ? "softmax" : ba_engine_name(cf->engine),
            cf->attn == BA_ATTN_SOFTMAX ? "" : "relative", cf->full ? 0 : D, D, cf->window,
            a->B, a->d, a->a, threads_in_use(), st[r->status], r->runs);
    if (r->status == ST_RUN)
        fprintf(csv, "%.6g,%.6g,%.6g,", r->median, r->min, r->median / soft);
    else
        fprintf(csv, ",,,");
    if (r->status == ST_SKIP)
        fprintf(csv, "%.6g", r->est);
    fprintf(csv, ",");
    if (r->status == ST_RUN && approx && r->fwd.queries > 0)
        fprintf(csv, "%ld,%.4g,%d,%ld,%ld,%.4g,%ld", r->fwd.queries,
                (double)r->fwd.sweeps / r->fwd.queries, r->fwd.max_sweeps, r->fwd.retried,
                r->fwd.unconverged, (double)r->bwd.sweeps / fmax(1.0, (double)r->bwd.queries),
                r->bwd.unconverged);
    else
        fprintf(csv, ",,,,,,");
    fprintf(csv, "\n");
    fflush(csv);
}

/* Every configuration at T index ti. 0, or 1 when something failed. */
static int bench_T(int ti, const bench_args *a, result res[][MAX_TS], FILE *csv)
{
    int T = a->Ts[ti], bad = 0;
    problem p;
    if (problem_init(&p, T, a)) {
        problem_free(&p);
        fprintf(stderr, "%s: out of memory at T = %d\n", prog, T);
        for (int k = 0; k < NCONF; k++)
            res[k][ti].status = ST_FAIL;
        return 1;
    }
    for (int k = 0; k < NCONF; k++) {
        result *r = &res[k][ti];
        double est = NAN;
        if (!a->on[k])
            continue;
        if (k != C_SOFTMAX && should_skip(k, ti, a, res, &est)) {
            memset(r, 0, sizeof *r);
            r->status = ST_SKIP, r->est = est;
        } else
            bad |= measure(k, &p, a, r);
        if (k == C_SOFTMAX && r->status != ST_RUN) {
            /* no reference: nothing else at this T has a ratio */
            for (int j = 1; j < NCONF; j++)
                res[j][ti].status = ST_FAIL;
            break;
        }
        print_row(k, T, r, res[C_SOFTMAX][ti].median, a, csv);
    }
    problem_free(&p);
    return bad;
}

/* The index of T in --T, or -1. */
static int t_index(const bench_args *a, int T)
{
    for (int i = 0; i < a->nT; i++)
        if (a->Ts[i] == T)
            return i;
    return -1;
}

/* One configuration's line of a goal: its ratio (or the estimated one)
 * against lim. 1 when met, 0 when not, -1 when there is nothing to say. */
static int goal_line(int k, int T, double lim, const bench_args *a, result res[][MAX_TS],
                     FILE *csv)
{
    int ti = t_index(a, T);
    if (ti < 0) {
        printf("    %-10s  T = %d not in --T: not measured\n", configs[k].name, T);
        return -1;
    }
    const result *r = &res[k][ti], *s = &res[C_SOFTMAX][ti];
    if (r->status == ST_NONE || s->status != ST_RUN || r->status == ST_FAIL) {
        printf("    %-10s  T = %d: %s, no verdict\n", configs[k].name, T,
               r->status == ST_NONE ? "not run (--only)" : "failed");
        return -1;
    }
    /* an estimate is a lower bound (the sweeps per row grow with T): it
     * can show a goal missed, never met */
    int est = r->status == ST_SKIP;
    double ratio = (est ? r->est : r->median) / s->median;
    int met = est ? (ratio <= lim ? -1 : 0) : ratio <= lim;
    printf("    %-10s  T = %d: %s%.2fx softmax (goal <= %.0fx): %s\n", configs[k].name, T,
           est ? "skipped, estimated >= " : "", ratio, lim,
           met == 1 ? "met" : met == 0 ? "NOT met" : "no verdict (an estimate)");
    if (csv)
        fprintf(csv, "goal,%d,%s,,,,,,,,,,%s,,,,%.6g,,,,,,,,\n", T, configs[k].name,
                met == 1 ? "met" : met == 0 ? (est ? "not met (est)" : "not met") : "no verdict",
                ratio);
    return met;
}

/* The verdict of a goal from its two lines (1 met, 0 not, -1 none). */
static const char *verdict(int x, int y)
{
    return x == 1 && y == 1   ? "met (both)"
           : x == 1 || y == 1 ? "met (by one of the two)"
           : x == 0 && y == 0 ? "NOT met"
           : x == 0 || y == 0 ? "NOT met where measured (one without a verdict)"
                              : "no verdict (not measured)";
}

static void goals(const bench_args *a, result res[][MAX_TS], FILE *csv)
{
    printf("\ngoals:\n  1. mf with banded or relative couplings within %.0fx softmax at T = %d\n",
           GOAL1_RATIO, GOAL1_T);
    int g1b = goal_line(C_MF_BAND, GOAL1_T, GOAL1_RATIO, a, res, csv);
    int g1f = goal_line(C_MF_FULL, GOAL1_T, GOAL1_RATIO, a, res, csv);
    printf("     => %s\n", verdict(g1b, g1f));
    printf("  2. full-range mf/tap at T = %d within %.0fx softmax\n", GOAL2_T, GOAL2_RATIO);
    int g2m = goal_line(C_MF_FULL, GOAL2_T, GOAL2_RATIO, a, res, csv);
    int g2t = goal_line(C_TAP_FULL, GOAL2_T, GOAL2_RATIO, a, res, csv);
    printf("     => %s\n", verdict(g2m, g2t));
}

static void print_header(const bench_args *a)
{
    char cpu[256], date[64];
    cpu_model(cpu, sizeof cpu);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    double load[3] = {NAN, NAN, NAN};
    getloadavg(load, 3);
    ba_approx ap = ba_approx_default();
    printf("bench_approx: approximate engines vs softmax and the band engine, %s\n", date);
    printf("cpu: %s, %ld cores online | threads: %d | load average at start: %.2f %.2f %.2f%s\n",
           cpu, sysconf(_SC_NPROCESSORS_ONLN), threads_in_use(), load[0], load[1], load[2],
           load[0] > 0.5 ? " (a busy machine: timings are disturbed)" : "");
    printf("one head, forward + backward, B = %d, d = C = %d; q, k, v ~ %g N(0,1) (fields of "
           "std %.3g), dout ~ N(0,1), seed %ld\n",
           a->B, a->d, a->qkv_std, a->qkv_std * a->qkv_std, a->seed);
    printf("couplings relative, paper-like at a = %g: J(1) = %g, J(2..4) = %g, J(5) = 0, "
           "J(>=6) = %g;\n  mf, tap, bp, hybrid-w4/w8: D = T - 1, no band; band8, *-band8: "
           "band = D = %d\n",
           a->a, a->a / 2, a->a, -a->a / 2, BAND_W);
    printf("approximate settings: damping %g, tol %g, max_iter %d (ba_approx_default)\n",
           ap.damping, ap.tol, ap.max_iter);
    printf("timing: median of up to %d runs, stopping once they add up to %g s; skipped at a "
           "larger T when over %g s at a smaller one\nor when estimated (T^3 approximate, T^2 "
           "softmax/band) over %g s\n\n",
           a->reps, a->max_s, a->max_s, a->max_est);
    printf("%5s  %-10s  %4s  %22s  %9s  %14s  %16s\n", "T", "config", "runs", "median s",
           "x softmax", "sweeps mean/max", "retr/unc fwd/bwd");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    prog = "bench_approx"; /* messages name this program (cli/opts.c) */
    bench_args a;
    int rc = read_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    FILE *csv = NULL;
    if (a.csv_path &&
        !(csv = open_csv(a.csv_path, "part,T,config,engine,couplings,band,D,window,B,C,a,threads,"
                                     "status,runs,median_s,min_s,time_vs_softmax,est_s,fwd_rows,"
                                     "fwd_sweeps_mean,fwd_sweeps_max,fwd_retried,"
                                     "fwd_unconverged,bwd_sweeps_mean,bwd_unconverged\n")))
        return EXIT_USAGE;
    print_header(&a);
    static result res[NCONF][MAX_TS];
    double t0 = now_s();
    int bad = 0;
    for (int ti = 0; ti < a.nT; ti++)
        bad |= bench_T(ti, &a, res, csv);
    printf("\nmedian s: seconds per forward + backward; x softmax: against softmax's median at "
           "the same T; sweeps: the forward's\nper row (retries included); retr/unc: forward "
           "rows retried / left unconverged, backward rows unconverged; est.: the time at the "
           "largest smaller T\nscaled by the cost law alone, a lower bound where the sweeps per "
           "row grow with T\n");
    goals(&a, res, csv);
    double load[3] = {NAN, NAN, NAN};
    getloadavg(load, 3);
    char dur[32];
    fmt_duration(now_s() - t0, dur, sizeof dur);
    printf("\ndone in %s; load average at the end: %.2f %.2f %.2f\n", dur, load[0], load[1],
           load[2]);
    if (csv && fclose(csv) && !bad) {
        fprintf(stderr, "%s: error writing '%s'\n", prog, a.csv_path);
        return 1;
    }
    return bad;
}
