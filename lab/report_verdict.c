/* The rows of the verdict table that opens docs/results.md and of the
 * README's findings block (report_findings.c writes both): one row per
 * claim of the paper (and per question beyond it), each read at the
 * largest budget its grids hold.
 * Which grid answers which claim, and the paper's side of it, are the
 * "verdicts" of lab/presets.json; every number comes from run records
 * (run.json through the grid layer) and couplings analyses
 * (couplings/couplings.json), never from generated Markdown. Three rules
 * are stated under the table and applied here: the verdict word read off
 * the 95 % interval, "settled" (the last doubling of the budget moved the
 * effect by less than the interval's half-width) and "stuck" runs (final
 * metric beyond the cell median by STUCK_K robust spreads on the worse
 * side), which are flagged and shown with and without. */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define VD_MAX_SEEDS 256
#define VD_MAX_ROOTS 16
#define VD_MAX_EXTRAP 64

/* The output directories under ROOT loaded so far (full, converged, ...). */
typedef struct {
    char name[256];
    int ok;
    rep_grids gs;
} vd_root;

typedef struct {
    const command *c;
    const char *root;
    const lab_refs *refs;
    vd_root v[VD_MAX_ROOTS];
    int n;
    /* the extrapolation files read so far, by grid (read once, however
     * many claims and rungs ask) */
    const rep_grid *ex_grid[VD_MAX_EXTRAP];
    lab_xentries ex[VD_MAX_EXTRAP];
    int nex;
    /* rep_verdict_rows_at: every claim read at grid_at (settled against
     * ladder_at, NULL: none), on the seeds below seed_end (0: all) */
    const char *grid_at;
    const cJSON *ladder_at;
    uint64_t seed_end;
} vd_cache;

/* What a claim's paper side is. */
enum { P_VALUE, P_SIDE, P_COMPARABLE };

/* ------------------------------------------------------------ grids */

static const rep_grid *vd_grid(vd_cache *k, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path || (size_t)(slash - path) >= sizeof k->v[0].name)
        return NULL;
    char dir[256];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int i = 0;
    while (i < k->n && strcmp(k->v[i].name, dir) != 0)
        i++;
    if (i == k->n) {
        if (k->n == VD_MAX_ROOTS)
            return NULL;
        vd_root *r = &k->v[k->n++];
        snprintf(r->name, sizeof r->name, "%s", dir);
        char full[PATH_LEN];
        struct stat sb;
        r->ok = snprintf(full, sizeof full, "%s/%s", k->root, dir) < (int)sizeof full &&
                stat(full, &sb) == 0 && S_ISDIR(sb.st_mode) &&
                rep_grids_load(k->c, full, k->refs, &r->gs) == 0;
    }
    return k->v[i].ok ? rep_grid_named(&k->v[i].gs, slash + 1) : NULL;
}

static void vd_cache_free(vd_cache *k)
{
    for (int i = 0; i < k->n; i++)
        if (k->v[i].ok)
            rep_grids_free(&k->v[i].gs);
    for (int i = 0; i < k->nex; i++)
        lab_xentries_free(&k->ex[i]);
}

/* The entries of grid x's extrapolation file (none: empty), kept in the
 * cache; past VD_MAX_EXTRAP grids they are read for the call into *spare,
 * which the caller frees. */
static const lab_xentries *vd_extrap_entries(vd_cache *k, const rep_grid *x,
                                             lab_xentries *spare)
{
    for (int i = 0; i < k->nex; i++)
        if (k->ex_grid[i] == x)
            return &k->ex[i];
    lab_xentries *into = k->nex < VD_MAX_EXTRAP ? &k->ex[k->nex] : spare;
    rep_extrapolation_read(k->c, x, into);
    if (into != spare)
        k->ex_grid[k->nex++] = x;
    return into;
}

/* The arm of g that spec (an ablate --arm spec) with sampler kind and
 * shots names, or -1. */
static int vd_arm(const lab_grid *g, const char *spec, ba_sampler_kind kind, int shots)
{
    lab_arm want;
    char err[256];
    if (lab_arm_parse(spec, &want, err) != BA_OK)
        return -1;
    for (int a = 0; a < g->narms; a++) {
        const lab_arm *x = &g->arms[a];
        if (x->attn == want.attn && lab_form_same(&x->form, &want.form) &&
            x->sampler.kind == kind && (kind == BA_SAMPLER_EXACT || x->sampler.shots == shots))
            return a;
    }
    return -1;
}

/* --------------------------------------------------------- statistics */

static int dbl_cmp(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, dbl_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Whether the run of seed in the cell (arm, T, C, ffn) is stuck by the
 * rule above. */
static int vd_stuck(const rep_grid *x, int arm, int T, int C, int ffn, uint64_t seed)
{
    double v[VD_MAX_SEEDS], d[VD_MAX_SEEDS], mine = NAN;
    int n = 0, lm = x->g.task == BA_TASK_CHARLM;
    for (int i = 0; i < x->cs.n && n < VD_MAX_SEEDS; i++) {
        const lab_cell *c = &x->cs.cells[i];
        if (!c->run || c->arm != arm || c->T != T || c->C != C || c->ffn != ffn)
            continue;
        v[n] = lab_shown(x->g.task, c->run->value);
        if (c->seed == seed)
            mine = v[n];
        n++;
    }
    if (n < STUCK_MIN_RUNS || isnan(mine))
        return 0;
    double m = median(v, n);
    for (int i = 0; i < n; i++)
        d[i] = fabs(v[i] - m);
    double s = 1.4826 * median(d, n), floor = lm ? STUCK_FLOOR * m / 100 : STUCK_FLOOR;
    if (s < floor)
        s = floor;
    double worse = lm ? mine - m : m - mine; /* lower perplexity, higher accuracy is better */
    return worse > STUCK_K * s;
}

/* The paired runs of arms a and b in one cell: seed, values, stuck flags. */
typedef struct {
    int n;
    uint64_t seed[VD_MAX_SEEDS];
    double a[VD_MAX_SEEDS], b[VD_MAX_SEEDS];
    unsigned char stuck_a[VD_MAX_SEEDS], stuck_b[VD_MAX_SEEDS];
} vd_pairs;

/* Run name's perplexity evaluated at T2 in an extrapolation file's
 * entries into *v: 0, or -1 when it has no finished entry there. */
static int vd_extrap_value(const lab_xentries *xe, const char *name, int T2, double *v)
{
    const lab_xentry *e = lab_xentries_find(xe, name, T2);
    if (!e || e->refused)
        return -1;
    *v = e->at;
    return 0;
}

/* The pairs of arms a and b in the cell (T, C, ffn) of x. T2 > 0: their
 * values are the perplexities of the same models evaluated at T2 (the
 * grid's extrapolation file), a pair without both is left out; the stuck
 * flags stay those of the training metric (a run that failed to train). */
static void vd_gather(vd_cache *k, const rep_grid *x, int a, int b, int T, int C, int ffn,
                      int T2, vd_pairs *p)
{
    lab_xentries spare = {0};
    const lab_xentries *es = T2 > 0 ? vd_extrap_entries(k, x, &spare) : NULL;
    p->n = 0;
    for (int i = 0; i < x->cs.n && p->n < VD_MAX_SEEDS; i++) {
        const lab_cell *ca = &x->cs.cells[i];
        if (!ca->run || ca->arm != a || ca->T != T || ca->C != C || ca->ffn != ffn ||
            (k->seed_end && ca->seed >= k->seed_end))
            continue;
        const lab_cell *cb = lab_cells_find(&x->cs, b, T, C, ffn, ca->seed);
        if (!cb || !cb->run)
            continue;
        double va = ca->run->value, vb = cb->run->value;
        if (T2 > 0 && (vd_extrap_value(es, ca->run->name, T2, &va) ||
                       vd_extrap_value(es, cb->run->name, T2, &vb)))
            continue;
        int k = p->n++;
        p->seed[k] = ca->seed, p->a[k] = va, p->b[k] = vb;
        p->stuck_a[k] = (unsigned char)vd_stuck(x, a, T, C, ffn, ca->seed);
        p->stuck_b[k] = (unsigned char)vd_stuck(x, b, T, C, ffn, ca->seed);
    }
    lab_xentries_free(&spare);
}

/* The mean paired effect and its 95 % interval over the pairs of p that
 * keep accepts (NULL: all; NAN bounds under two pairs); the count. */
typedef int (*vd_keep)(const vd_pairs *p, int i, const void *arg);
static int vd_effect(ba_task task, const vd_pairs *p, vd_keep keep, const void *arg, double *e,
                     double *lo, double *hi)
{
    ba_running s = {0};
    for (int i = 0; i < p->n; i++)
        if (!keep || keep(p, i, arg))
            ba_running_add(&s, lab_effect(task, p->a[i], p->b[i]));
    return rep_interval(&s, e, lo, hi);
}

static int keep_unstuck(const vd_pairs *p, int i, const void *arg)
{
    (void)arg;
    return !p->stuck_a[i] && !p->stuck_b[i];
}

/* Seeds that the pairs *arg also hold. */
static int keep_shared(const vd_pairs *p, int i, const void *arg)
{
    const vd_pairs *o = arg;
    for (int j = 0; j < o->n; j++)
        if (o->seed[j] == p->seed[i])
            return 1;
    return 0;
}

/* ------------------------------------------------------------ verdicts */

/* The verdict word of an interval [lo, hi] against the paper's side:
 * kind P_VALUE: its number p (in the effect's unit, its sign the side);
 * P_SIDE: only the side s (+1 or -1); P_COMPARABLE: no worse than margin
 * p, worse being the side s. */
static const char *vd_word(int kind, double p, int s, double lo, double hi)
{
    if (isnan(lo) || isnan(hi))
        return "not resolved";
    if (kind == P_COMPARABLE) {
        double worst = s > 0 ? hi : -lo, best = s > 0 ? lo : -hi;
        return worst <= p ? "agrees" : best > p ? "opposite" : "not resolved";
    }
    int side = lo > 0 ? 1 : hi < 0 ? -1 : 0;
    if (side == 0)
        return kind == P_VALUE && (p < lo || p > hi) ? "not reproduced" : "not resolved";
    if (side != s)
        return "opposite";
    if (kind == P_SIDE || (lo <= p && p <= hi))
        return "agrees";
    return fabs(lo) < fabs(p) && fabs(hi) < fabs(p) ? "smaller" : "larger";
}

/* +1 when a better first arm raises the effect (accuracy points), -1 when
 * it lowers it (% of perplexity). */
static int better_sign(ba_task t) { return t == BA_TASK_CHARLM ? -1 : 1; }

/* The paper's side of a claim: kind, number and side (see vd_word). 0,
 * or -1 when the object is not one of the three forms. */
static int vd_paper(const cJSON *paper, ba_task task, int *kind, double *p, int *s,
                    const char **text)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(paper, "value");
    const cJSON *sd = cJSON_GetObjectItemCaseSensitive(paper, "side");
    const cJSON *cm = cJSON_GetObjectItemCaseSensitive(paper, "comparable");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(paper, "text");
    if (!cJSON_IsString(t) || (cJSON_IsNumber(v) + cJSON_IsString(sd) + cJSON_IsNumber(cm)) != 1)
        return -1;
    *text = t->valuestring;
    int b = better_sign(task);
    if (cJSON_IsNumber(v))
        *kind = P_VALUE, *p = v->valuedouble, *s = v->valuedouble > 0 ? 1 : -1;
    else if (cJSON_IsNumber(cm))
        *kind = P_COMPARABLE, *p = cm->valuedouble, *s = -b;
    else if (strcmp(sd->valuestring, "better") == 0 || strcmp(sd->valuestring, "worse") == 0)
        *kind = P_SIDE, *p = NAN, *s = strcmp(sd->valuestring, "better") == 0 ? b : -b;
    else
        return -1;
    return 0;
}

/* How much a run's metric moved over the last doubling of its own steps:
 * from the periodic evaluation nearest half its last one to the last
 * (lab_effect's unit). 0 when it has fewer than two. */
static int vd_last_doubling(const command *c, const lab_run *r, double *d, long *from, long *to)
{
    ba_record *recs;
    int n, last = -1, half = -1;
    if (lab_metrics_read(c, r->dir, &recs, &n))
        return 0;
    for (int i = 0; i < n; i++)
        if (recs[i].kind == BA_REC_EVAL)
            last = i;
    for (int i = 0; last >= 0 && i < last; i++)
        if (recs[i].kind == BA_REC_EVAL &&
            (half < 0 || labs(2 * recs[i].step - recs[last].step) <
                             labs(2 * recs[half].step - recs[last].step)))
            half = i;
    int lm = r->task == BA_TASK_CHARLM, ok = half >= 0;
    if (ok) {
        const ba_eval_result *a = &recs[half].eval, *b = &recs[last].eval;
        *d = lab_effect(r->task, lm ? b->ppl : b->accuracy, lm ? a->ppl : a->accuracy);
        *from = recs[half].step, *to = recs[last].step;
    }
    free(recs);
    return ok;
}

/* The settled column of a row with one budget: how far its runs' metric
 * still moved within them, over the last doubling of their steps. */
static void vd_within(const command *c, const rep_grid *x, const int ab[2], int T, int C, int ffn,
                      rep_vrow *r)
{
    ba_running s = {0};
    long from = 0, to = 0;
    for (int i = 0; i < x->cs.n; i++) {
        const lab_cell *cl = &x->cs.cells[i];
        double d;
        if (cl->run && (cl->arm == ab[0] || cl->arm == ab[1]) && cl->T == T && cl->C == C &&
            cl->ffn == ffn && vd_last_doubling(c, cl->run, &d, &from, &to))
            ba_running_add(&s, d);
    }
    if (s.n && to > from)
        snprintf(r->settled, sizeof r->settled, "not settled: one budget; within its runs the "
                 "metric still moved %+.2f%s per doubling of the steps (step %ld to %ld, mean of "
                 "%d runs of both arms)", s.mean / log2((double)to / (double)from),
                 x->g.task == BA_TASK_CHARLM ? " %" : " points", from, to, (int)s.n);
}

/* The settled column of an effect claim: the largest smaller budget of
 * the ladder whose cell pairs seeds with the top; the effect on the
 * shared seeds at both, its change per doubling against the top
 * interval's half-width. */
static void vd_settle(vd_cache *k, const cJSON *ladder, const rep_grid *top, const vd_pairs *tp,
                      const char *const spec[2], const int sk[2], const int cell[4],
                      double half, rep_vrow *r)
{
    const rep_grid *best = NULL;
    vd_pairs *bp = malloc(sizeof *bp), *cur = malloc(sizeof *cur);
    const cJSON *e;
    snprintf(r->settled, sizeof r->settled, "not settled: one budget");
    if (!bp || !cur || isnan(half)) {
        free(bp), free(cur);
        return;
    }
    cJSON_ArrayForEach(e, ladder)
    {
        const rep_grid *x = cJSON_IsString(e) ? vd_grid(k, e->valuestring) : NULL;
        if (!x || x->g.task != top->g.task || x->g.train.steps >= top->g.train.steps ||
            (best && x->g.train.steps <= best->g.train.steps))
            continue;
        int a = vd_arm(&x->g, spec[0], (ba_sampler_kind)sk[0], sk[1]);
        int b = vd_arm(&x->g, spec[1], BA_SAMPLER_EXACT, 0);
        if (a < 0 || b < 0)
            continue;
        vd_gather(k, x, a, b, cell[0], cell[1], cell[2], cell[3], cur);
        double e1, l1, h1;
        if (vd_effect(x->g.task, cur, keep_shared, tp, &e1, &l1, &h1) < 2)
            continue;
        best = x, *bp = *cur;
    }
    if (best) {
        double et, eb, l, h;
        int n = vd_effect(top->g.task, tp, keep_shared, bp, &et, &l, &h);
        vd_effect(top->g.task, bp, keep_shared, tp, &eb, &l, &h);
        double dbl = (et - eb) / log2((double)top->g.train.steps / (double)best->g.train.steps);
        snprintf(r->settled, sizeof r->settled, "%s: %+.2f per doubling, %ld -> %ld steps, %d seeds "
                 "(half-width %.2f)", fabs(dbl) < half ? "settled" : "not settled", dbl,
                 best->g.train.steps, top->g.train.steps, n, half);
    }
    free(bp), free(cur);
}

/* The range of a run's periodic evaluations in shown units into buf
 * ("" when its log has none). */
static void vd_evals(const command *c, const lab_run *run, char *buf, size_t n)
{
    ba_record *recs;
    int nr, code;
    double lo = INFINITY, hi = -INFINITY;
    *buf = 0;
    if ((code = lab_metrics_read(c, run->dir, &recs, &nr)))
        return;
    int lm = run->task == BA_TASK_CHARLM, ne = 0;
    for (int i = 0; i < nr; i++) {
        if (recs[i].kind != BA_REC_EVAL)
            continue;
        double v = lm ? recs[i].eval.ppl : 100 * recs[i].eval.accuracy;
        lo = v < lo ? v : lo, hi = v > hi ? v : hi, ne++;
    }
    free(recs);
    if (ne)
        snprintf(buf, n, " (its %d periodic evaluations: %.1f to %.1f)", ne, lo, hi);
}

/* The run of the top cell's arm w (0: the first, 1: the reference) at
 * pair i. */
static const lab_run *vd_run(const rep_grid *x, int arm, int T, int C, int ffn, uint64_t seed)
{
    const lab_cell *cl = lab_cells_find(&x->cs, arm, T, C, ffn, seed);
    return cl ? cl->run : NULL;
}

/* The stuck column: the flagged runs of the top cell (arms ab, cell
 * T, C, ffn) and the verdict without them. */
static void vd_stuck_text(const command *c, const rep_grid *x, const vd_pairs *p,
                          const char *const spec[2], const int ab[2], const int cell[4], int kind,
                          double pv, int s, rep_vrow *r)
{
    int k = 0;
    size_t at = 0;
    for (int i = 0; i < p->n; i++)
        for (int w = 0; w < 2; w++) {
            if (!(w ? p->stuck_b[i] : p->stuck_a[i]))
                continue;
            /* the training metric that flagged it (an extrapolation row's
             * values are at another T) */
            const lab_run *run = vd_run(x, ab[w], cell[0], cell[1], cell[2], p->seed[i]);
            double v = lab_shown(x->g.task, run ? run->value : w ? p->b[i] : p->a[i]);
            char ev[96] = "";
            if (run)
                vd_evals(c, run, ev, sizeof ev);
            at += (size_t)snprintf(r->stuck + at, at < sizeof r->stuck ? sizeof r->stuck - at : 0,
                                   "%s%s seed %llu at %.2f%s%s", k++ ? ", " : "**stuck**: ",
                                   spec[w], (unsigned long long)p->seed[i], v,
                                   x->g.task == BA_TASK_CHARLM ? "" : " %", ev);
        }
    if (!k) {
        snprintf(r->stuck, sizeof r->stuck, "none");
        return;
    }
    double e, lo, hi;
    char eff[96];
    int n = vd_effect(x->g.task, p, keep_unstuck, NULL, &e, &lo, &hi);
    rep_fmt_effect(x->g.task, e, lo, hi, eff, sizeof eff);
    if (at < sizeof r->stuck)
        snprintf(r->stuck + at, sizeof r->stuck - at, "; without: %s, %d seeds, %s", eff, n,
                 vd_word(kind, pv, s, lo, hi));
}

static const char *vd_str(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

static int vd_int(const cJSON *o, const char *key, int *v)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsBool(x))
        return *v = cJSON_IsTrue(x), 0;
    return cJSON_IsNumber(x) ? (*v = x->valueint, 0) : -1;
}

static const char *vd_metric(ba_task t)
{
    return t == BA_TASK_CHARLM ? "perplexity, % change (lower is better)"
                               : "accuracy, points (higher is better)";
}

/* The grid a claim is read at: of its grid and its ladder's rungs, the
 * one with the most steps whose cell (T, C, ffn, T_eval: cell) pairs the
 * two arms on every seed of the grid (the largest budget run so far); of
 * none, the one with the most steps that pairs them on a seed at least;
 * else its own grid when it exists. Its pairs into p, its arms into ab (-1: not in
 * it), the claim's path of it into *path. NULL: no grid at all. */
static const rep_grid *vd_pick(vd_cache *k, const char *grid, const cJSON *ladder,
                               const char *const spec[2], ba_sampler_kind kind, int shots,
                               const int cell[4], vd_pairs *p, int ab[2], const char **path)
{
    const rep_grid *best = NULL, *top = vd_grid(k, grid);
    vd_pairs *cur = malloc(sizeof *cur);
    const cJSON *e = ladder ? ladder->child : NULL;
    int best_full = 0;
    *path = grid, p->n = 0;
    for (const char *at = grid; at;) {
        const rep_grid *x = vd_grid(k, at);
        int a = x ? vd_arm(&x->g, spec[0], kind, shots) : -1;
        int b = x ? vd_arm(&x->g, spec[1], BA_SAMPLER_EXACT, 0) : -1;
        if (cur && a >= 0 && b >= 0) {
            vd_gather(k, x, a, b, cell[0], cell[1], cell[2], cell[3], cur);
            /* a cell still training (fewer pairs than the grid's seeds)
             * yields to a finished one at a smaller budget */
            int full = cur->n >= x->g.nseeds;
            if (cur->n > 0 && (!best || full > best_full ||
                               (full == best_full && x->g.train.steps > best->g.train.steps)))
                best = x, best_full = full, *p = *cur, ab[0] = a, ab[1] = b, *path = at;
        }
        for (at = NULL; e && !at; e = e->next)
            if (cJSON_IsString(e))
                at = e->valuestring;
    }
    free(cur);
    if (!best && top) {
        ab[0] = vd_arm(&top->g, spec[0], kind, shots);
        ab[1] = vd_arm(&top->g, spec[1], BA_SAMPLER_EXACT, 0);
    }
    return best ? best : top;
}

/* One claim on an effect between two arms (with "extrapolate": T2, of a
 * charlm grid's models evaluated at T2, from its extrapolation file). 0,
 * or -1 when the claim is malformed. */
static int vd_effect_row(vd_cache *k, const cJSON *cl, rep_vrow *r)
{
    int T, C, ffn, shots = 0, T2 = 0;
    const char *spec[2] = {vd_str(cl, "arm"), vd_str(cl, "vs")};
    const char *grid = k->grid_at ? k->grid_at : vd_str(cl, "grid");
    const char *smp = vd_str(cl, "sampler");
    ba_sampler_kind kind = BA_SAMPLER_EXACT;
    char err[256];
    if (!grid || !spec[0] || !spec[1] || vd_int(cl, "T", &T) || vd_int(cl, "C", &C) ||
        vd_int(cl, "ffn", &ffn) || !(r->same_info = vd_str(cl, "same_info")) ||
        (smp && (ba_sampler_parse(smp, &kind, err) != BA_OK || vd_int(cl, "shots", &shots))) ||
        (cJSON_HasObjectItem(cl, "extrapolate") && (vd_int(cl, "extrapolate", &T2) || T2 <= T)))
        return -1;
    if (smp)
        snprintf(r->arms, sizeof r->arms, "%s trained and evaluated with %s (%d shots) vs exact %s",
                 spec[0], smp, shots, spec[1]);
    else
        snprintf(r->arms, sizeof r->arms, "%s vs %s", spec[0], spec[1]);
    const cJSON *ladder =
        k->grid_at ? k->ladder_at : cJSON_GetObjectItemCaseSensitive(cl, "ladder");
    const int cell[4] = {T, C, ffn, T2};
    vd_pairs pairs, *p = &pairs;
    int ab[2] = {-1, -1};
    /* at grid_at alone, its ladder only to settle */
    const rep_grid *x = vd_pick(k, grid, k->grid_at ? NULL : ladder, spec, kind, shots, cell, p, ab,
                                &r->cell_grid);
    int pk, s;
    double pv;
    /* without records the claim's own "task" (optional) names the cell */
    const char *ctask = vd_str(cl, "task");
    ba_task task = BA_TASK_CHARLM;
    if (x)
        task = x->g.task;
    else if (!ctask || ba_task_parse(ctask, &task, NULL) != BA_OK)
        ctask = NULL;
    /* extrapolation files hold perplexities */
    if (vd_paper(cJSON_GetObjectItemCaseSensitive(cl, "paper"), task, &pk, &pv, &s,
                 &r->paper_text) ||
        (T2 > 0 && task != BA_TASK_CHARLM))
        return -1;
    char at[48] = "";
    if (T2 > 0)
        snprintf(at, sizeof at, " evaluated at T = %d", T2);
    snprintf(r->cell, sizeof r->cell, "%s, T = %d%s, C = %d, %s FFN",
             x || ctask ? ba_task_name(task) : "?", T, at, C, ffn ? "with" : "without");
    r->word = "not yet measured";
    snprintf(r->ours, sizeof r->ours, "no records");
    snprintf(r->settled, sizeof r->settled, "no records");
    snprintf(r->stuck, sizeof r->stuck, "no records");
    r->metric = x ? vd_metric(task) : "";
    r->n = ab[0] < 0 || ab[1] < 0 ? 0 : vd_effect(task, p, NULL, NULL, &r->eff, &r->lo, &r->hi);
    if (r->n > 0) {
        const int sk[2] = {(int)kind, shots};
        r->measured = 1, r->steps = x->g.train.steps;
        rep_fmt_effect(task, r->eff, r->lo, r->hi, r->ours, sizeof r->ours);
        r->word = vd_word(pk, pv, s, r->lo, r->hi);
        vd_settle(k, ladder, x, p, spec, sk, cell, (r->hi - r->lo) / 2, r);
        /* the movement within the runs is of the training metric, at T */
        if (strncmp(r->settled, "not settled: one budget", 23) == 0 && T2 == 0)
            vd_within(k->c, x, ab, T, C, ffn, r);
        vd_stuck_text(k->c, x, p, spec, ab, cell, pk, pv, s, r);
    }
    return 0;
}

/* A grid's couplings analysis (NULL when it has none or it is damaged). */
static cJSON *vd_couplings(const rep_grid *x)
{
    char path[PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/couplings/couplings.json", x->dir);
    char *t = lab_slurp(path);
    cJSON *o = t ? cJSON_Parse(t) : NULL;
    free(t);
    return o;
}

/* The over_runs entry at distance d of an analysis, or NULL. */
static const cJSON *vd_at(const cJSON *o, int d)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(o, "over_runs"))
    if ((int)rep_num(e, "distance") == d)
        return e;
    return NULL;
}


static rep_vrow *vd_push(rep_vrows *rs)
{
    if (rs->n == rs->cap) {
        int cap = rs->cap ? 2 * rs->cap : 32;
        rep_vrow *v = realloc(rs->v, sizeof *v * (size_t)cap);
        if (!v)
            return NULL;
        rs->v = v, rs->cap = cap;
    }
    rep_vrow *r = &rs->v[rs->n++];
    memset(r, 0, sizeof *r);
    return r;
}

/* A couplings claim: a row per key distance the paper gives a sign for,
 * the interval over the runs of the grid's analysis. 0, or 1 out of
 * memory. */
static int vd_coupling_rows(vd_cache *k, const cJSON *cl, const char *grid, rep_vrows *rs)
{
    const rep_grid *x = vd_grid(k, grid), *lx = NULL;
    cJSON *o = x ? vd_couplings(x) : NULL, *lo_ = NULL;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cl, "ladder"))
    {
        const rep_grid *y = cJSON_IsString(e) ? vd_grid(k, e->valuestring) : NULL;
        if (!o || !y || y->g.train.steps >= x->g.train.steps ||
            (lx && y->g.train.steps <= lx->g.train.steps))
            continue;
        cJSON *yo = vd_couplings(y);
        if (!yo)
            continue;
        cJSON_Delete(lo_);
        lo_ = yo, lx = y;
    }
    int code = 0;
    for (int d = 1; d < (x ? x->g.T[x->g.nT - 1] : 0) && !code; d++) {
        const char *want = rep_paper_sign(k->refs, d);
        if (!*want)
            continue;
        rep_vrow *r = vd_push(rs);
        if (!r) {
            code = 1;
            break;
        }
        const cJSON *a = o ? vd_at(o, d) : NULL, *b = lo_ ? vd_at(lo_, d) : NULL;
        r->claim = vd_str(cl, "claim"), r->cell_grid = grid, r->same_info = "one arm";
        r->paper_text = want, r->metric = "mean J over pairs (sign)", r->dist = d;
        snprintf(r->cell, sizeof r->cell, "%s, T = %d, C = %d", ba_task_name(x->g.task),
                 x->g.T[0], x->g.C[0]);
        snprintf(r->arms, sizeof r->arms, "boltzmann's J");
        snprintf(r->stuck, sizeof r->stuck, "not applied (no metric)");
        r->word = "not yet measured";
        snprintf(r->ours, sizeof r->ours, "no records");
        snprintf(r->settled, sizeof r->settled, "not settled: one budget");
        if (!a)
            continue;
        r->measured = 1, r->steps = x->g.train.steps, r->n = (int)rep_num(a, "runs");
        r->eff = rep_num(a, "mean"), r->lo = rep_num(a, "ci95_lo"), r->hi = rep_num(a, "ci95_hi");
        snprintf(r->ours, sizeof r->ours, "%+.3f [%+.3f, %+.3f]", r->eff, r->lo, r->hi);
        r->word = vd_word(P_SIDE, NAN, want[0] == '>' ? 1 : -1, r->lo, r->hi);
        if (b) {
            double half = (r->hi - r->lo) / 2, dm = rep_num(b, "mean");
            double dbl = (r->eff - dm) / log2((double)x->g.train.steps / (double)lx->g.train.steps);
            snprintf(r->settled, sizeof r->settled, "%s: %+.3f per doubling, %ld -> %ld steps "
                     "(half-width %.3f)", fabs(dbl) < half ? "settled" : "not settled", dbl,
                     lx->g.train.steps, x->g.train.steps, half);
        }
    }
    cJSON_Delete(o);
    cJSON_Delete(lo_);
    return code;
}

/* Whether claim cl's grid or ladder names path. */
static int vd_names(const cJSON *cl, const char *path)
{
    const char *g = vd_str(cl, "grid");
    const cJSON *e;
    if (g && strcmp(g, path) == 0)
        return 1;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cl, "ladder"))
    if (cJSON_IsString(e) && strcmp(e->valuestring, path) == 0) return 1;
    return 0;
}

/* cl's ladder with its grids under at->preset/ moved to at->out/ (NULL:
 * out of memory). */
static cJSON *vd_ladder_at(const cJSON *cl, const rep_at *at)
{
    cJSON *l = cJSON_CreateArray();
    size_t n = strlen(at->preset);
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cl, "ladder"))
    {
        if (!l || !cJSON_IsString(e))
            continue;
        char path[PATH_LEN];
        const char *v = e->valuestring;
        int own = strncmp(v, at->preset, n) == 0 && v[n] == '/';
        snprintf(path, sizeof path, "%s%s", own ? at->out : "", own ? v + n : v);
        cJSON *x = cJSON_CreateString(path);
        if (!x || !cJSON_AddItemToArray(l, x)) {
            cJSON_Delete(x), cJSON_Delete(l);
            l = NULL;
        }
    }
    return l;
}

/* Every row of the presets file's claims, or with at only those it
 * reads (rep_verdict_rows_at). 0, or an exit code after printing (2: a
 * malformed claim). */
static int vd_build(vd_cache *k, const lab_presets *ps, const rep_at *at, rep_vrows *rs)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ps->doc, "verdicts");
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(v, "claims"), *cl;
    if (!cJSON_IsArray(cls) || !cls->child)
        return usage_error(k->c, "%s: verdicts.claims is missing or empty", ps->path);
    char claim_grid[PATH_LEN] = "";
    if (at)
        snprintf(claim_grid, sizeof claim_grid, "%s/%s", at->preset, at->grid);
    int i = -1;
    cJSON_ArrayForEach(cl, cls)
    {
        const char *claim = vd_str(cl, "claim"), *cg = vd_str(cl, "couplings");
        int bad = !claim;
        i++;
        if (!bad && at && (cg || !vd_names(cl, claim_grid) ||
                           (at->no_extrapolate && cJSON_HasObjectItem(cl, "extrapolate"))))
            continue;
        if (!bad && cg) {
            if (vd_coupling_rows(k, cl, cg, rs))
                return fail_lib(k->c, "out of memory", 1);
        } else if (!bad) {
            cJSON *ladder = at && at->ladder ? vd_ladder_at(cl, at) : NULL;
            rep_vrow *r = !(at && at->ladder) || ladder ? vd_push(rs) : NULL;
            if (!r) {
                cJSON_Delete(ladder);
                return fail_lib(k->c, "out of memory", 1);
            }
            r->claim = claim, k->ladder_at = ladder;
            bad = vd_effect_row(k, cl, r) != 0;
            k->ladder_at = NULL;
            cJSON_Delete(ladder);
        }
        if (bad)
            return usage_error(k->c, "%s: verdicts.claims[%d] is malformed (claim, grid or "
                                     "couplings, T, C, ffn, arm, vs, paper, same_info; extrapolate: a "
                                     "longer T of a charlm grid)",
                               ps->path, i);
    }
    return 0;
}

static int vd_rows(const command *c, const char *root, const lab_presets *ps, const rep_at *at,
                   rep_vrows *rs)
{
    vd_cache *k = calloc(1, sizeof *k);
    memset(rs, 0, sizeof *rs);
    if (!k)
        return fail_lib(c, "out of memory", 1);
    char grid_at[PATH_LEN];
    k->c = c, k->root = root, k->refs = &ps->refs;
    if (at) {
        snprintf(grid_at, sizeof grid_at, "%s/%s", at->out, at->grid);
        k->grid_at = grid_at, k->seed_end = at->seed_end;
    }
    int code = vd_build(k, ps, at, rs);
    vd_cache_free(k);
    free(k);
    return code;
}

int rep_verdict_rows(const command *c, const char *root, const lab_presets *ps, rep_vrows *rs)
{
    return vd_rows(c, root, ps, NULL, rs);
}

int rep_verdict_rows_at(const command *c, const char *root, const lab_presets *ps,
                        const rep_at *at, rep_vrows *rs)
{
    return vd_rows(c, root, ps, at, rs);
}
