/* Convergence in the results report: how much each grid's runs still
 * moved late in training (the tables every report shows), and the
 * converged preset's section: the paper's headline cells (charlm T = 12,
 * brackets T = 16 with and without FFN, brackets T = 20) trained on long
 * budgets to see whether the report's convergence criterion calls them
 * flat. `report OUT --preset converged` writes it inside a whole report;
 * with --section-only alone, for docs/results.md, where the full report's
 * "Against the paper" rows of the same cells are replaced by these
 * (`report results/full --preset full --converged results/converged`),
 * and followed by two tables that need both presets: the verdicts the
 * longer budget changed, and the budget ladder of each cell. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------- convergence evidence */

/* How much a run's validation metric still moved late in training: from
 * the periodic evaluation nearest 70 % of its steps (the one before the
 * last when that is the last) to the last one, the same items both times:
 * charlm in % of perplexity, brackets in accuracy points. 0 when the run
 * has fewer than two periodic evaluations. */
static int late_change(const command *c, const lab_run *r, double *d, long *from, long *to,
                       int *code)
{
    ba_record *recs;
    int n, ne = 0, best = -1, prev = -1, last = -1;
    if ((*code = lab_metrics_read(c, r->dir, &recs, &n)))
        return 0;
    double target = 0.7 * (double)r->steps;
    for (int i = 0; i < n; i++) {
        if (recs[i].kind != BA_REC_EVAL)
            continue;
        ne++;
        if (best < 0 || fabs(recs[i].step - target) < fabs(recs[best].step - target))
            best = i;
        prev = last, last = i;
    }
    if (ne >= 2) {
        best = best == last ? prev : best; /* else the last against itself */
        const ba_eval_result *a = &recs[best].eval, *b = &recs[last].eval;
        int lm = r->task == BA_TASK_CHARLM;
        *d = lab_effect(r->task, lm ? b->ppl : b->accuracy, lm ? a->ppl : a->accuracy);
        *from = recs[best].step, *to = recs[last].step;
    }
    free(recs);
    return ne >= 2;
}

/* One (T, C, FFN) of a grid: the late changes of its runs. */
typedef struct {
    int T, C, ffn;
    ba_running s;             /* the changes: their count and mean */
    double largest, top;      /* top: |largest| */
    long from, to;
} conv_cell;

static int conv_cmp(const void *pa, const void *pb)
{
    const conv_cell *a = pa, *b = pb;
    return a->T != b->T ? (a->T > b->T) - (a->T < b->T)
           : a->C != b->C ? (a->C > b->C) - (a->C < b->C)
                          : a->ffn - b->ffn;
}

/* The grid's cells with finished runs that have learning curves, sorted
 * by T, C and FFN (without FFN first). *out malloc'd. */
static int conv_cells(const command *c, const rep_grid *x, conv_cell **out, int *n)
{
    const lab_cells *cs = &x->cs;
    *n = 0;
    if (!(*out = calloc((size_t)cs->n + 1, sizeof **out)))
        return fail_lib(c, "out of memory", 1);
    int code = 0;
    for (int i = 0; i < cs->n && !code; i++) {
        const lab_cell *cell = &cs->cells[i];
        double d = 0;
        long from = 0, to = 0;
        if (!cell->run || !late_change(c, cell->run, &d, &from, &to, &code))
            continue;
        int k = 0;
        while (k < *n && !((*out)[k].T == cell->T && (*out)[k].C == cell->C &&
                           (*out)[k].ffn == cell->ffn))
            k++;
        conv_cell *v = &(*out)[k];
        if (k == *n) {
            (*n)++;
            v->T = cell->T, v->C = cell->C, v->ffn = cell->ffn;
        }
        ba_running_add(&v->s, d);
        if (fabs(d) > v->top)
            v->top = fabs(d), v->largest = d;
        v->from = from, v->to = to;
    }
    if (*n)
        qsort(*out, (size_t)*n, sizeof **out, conv_cmp);
    return code;
}

static const char *conv_unit(ba_task t)
{
    return t == BA_TASK_CHARLM ? "% of perplexity" : "accuracy points";
}

/* The convergence table of a grid: per cell, the mean and the largest
 * change over its runs. */
static void conv_table(const rep_grid *x, const conv_cell *v, int n, FILE *f)
{
    if (n == 0) {
        fprintf(f, "(no finished runs with learning curves)\n");
        return;
    }
    fprintf(f, "| T | C | FFN | runs | mean change (%s) | largest change | steps compared |\n",
            conv_unit(x->g.task));
    fprintf(f, "|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "| %d | %d | %s | %d | %+.2f | %+.2f | %ld -> %ld |\n", v[i].T, v[i].C,
                v[i].ffn ? "yes" : "no", (int)v[i].s.n, v[i].s.mean, v[i].largest,
                v[i].from, v[i].to);
}

/* The overview's row of a grid: the cell whose mean change is largest in
 * size, and the verdict. */
static void conv_row(const rep_grid *x, const conv_cell *v, int n, FILE *f)
{
    int runs = 0, m = 0;
    for (int i = 0; i < n; i++) {
        runs += (int)v[i].s.n;
        if (fabs(v[i].s.mean) > fabs(v[m].s.mean))
            m = i;
    }
    double mean = v[m].s.mean;
    int lm = x->g.task == BA_TASK_CHARLM;
    const char *verdict = fabs(mean) <= CONV_LIMIT                 ? "flat"
                          : (lm && mean < 0) || (!lm && mean > 0) ? "still improving"
                                                                  : "still getting worse";
    fprintf(f, "| %s | %d | %s | T = %d, C = %d, %s FFN | %+.2f | %ld -> %ld | %s |\n", x->name,
            runs, conv_unit(x->g.task), v[m].T, v[m].C, v[m].ffn ? "with" : "without", mean,
            v[m].from, v[m].to, verdict);
}

int rep_convergence_overview(const command *c, const rep_grids *gs, FILE *f)
{
    int rows = 0, code = 0;
    for (int i = 0; i < gs->n && !code; i++) {
        conv_cell *v;
        int n;
        code = conv_cells(c, &gs->v[i], &v, &n);
        if (!code && n && !rows++)
            fprintf(f, "| grid | runs | unit | cell that moved most | its mean change | steps "
                       "compared | verdict |\n|---|---|---|---|---|---|---|\n");
        if (!code && n)
            conv_row(&gs->v[i], v, n, f);
        free(v);
    }
    if (!rows)
        fprintf(f, "(no finished runs with periodic evaluations: `--eval-every` was not set)\n");
    return code;
}

int rep_convergence(const command *c, const rep_grid *x, FILE *f)
{
    conv_cell *v;
    int n, code = conv_cells(c, x, &v, &n);
    if (!code)
        conv_table(x, v, n, f);
    free(v);
    return code;
}


int rep_converged_verdicts(const rep_grids *conv, FILE *f)
{
    int code = 0;
    for (int i = 0; i < conv->n && !code; i++) {
        char note[64];
        snprintf(note, sizeof note, "; PRESET=converged, %ld steps", conv->v[i].g.train.steps);
        code = rep_verdicts(&conv->v[i], "", note, NULL, f);
    }
    return code;
}

/* The section's opening: what the preset is, its grids and how far they
 * have come. */
/* want: the preset's grids (lab/presets.json), by their names. */
static void intro(const char *out, const rep_grids *gs, const lab_names *want, int standalone,
                  FILE *f)
{
    fprintf(f, "## Long-budget headline rows (preset `converged`)\n\n");
    if (standalone) {
        rep_generated_by(out, "converged", gs, f);
    }
    fprintf(f, "The paper's headline cells with the full preset's settings (same seeds, data "
               "order, batch, learning rate and cosine schedule) but the longer budgets below. "
               "The preset is named `converged` for the runs it resumes; its budgets are long, "
               "not shown converged: whether an effect has settled is the verdict table's test "
               "(the change per doubling of the budget against the interval). The next table "
               "measures the late movement of the curves, from the periodic evaluation nearest "
               "70 %% of the steps to the last ('flat': every cell moved by less than 0.5, %% of "
               "perplexity or accuracy points); under the cosine schedule that stretch is the "
               "learning rate's anneal, so 'flat' there is no test of convergence. The full "
               "report's 'Against the paper' rows of these cells come from here, and its budget "
               "ladder shows how far the final metric still moves per doubling of the "
               "budget.\n\n");
    fprintf(f, "| grid | runs finished | steps |\n|---|---|---|\n");
    for (size_t k = 0; k < want->n; k++) {
        const rep_grid *x = rep_grid_named(gs, want->v[k]);
        if (x)
            fprintf(f, "| %s | %d of %d | %ld |\n", x->name, lab_cells_finished(&x->cs), x->cs.n,
                    x->g.train.steps);
        else
            fprintf(f, "| %s | not run yet | |\n", want->v[k]);
    }
    fprintf(f, "\n");
}

int rep_converged_section(const command *c, const char *out, const rep_grids *gs,
                          const lab_names *want, int standalone, FILE *f)
{
    intro(out, gs, want, standalone, f);
    fprintf(f, "### Late movement of the curves (the learning-rate anneal)\n\n");
    int code = rep_convergence_overview(c, gs, f);
    fprintf(f, "\n### Against the paper (long-budget runs)\n\n" REP_VERDICT_HEAD);
    code = code ? code : rep_converged_verdicts(gs, f);
    fprintf(f, "\n");
    for (size_t k = 0; k < want->n && !code; k++) {
        const rep_grid *x = rep_grid_named(gs, want->v[k]);
        if (!x)
            continue;
        fprintf(f, "### %s: the final movement of each cell\n\n", x->name);
        code = rep_convergence(c, x, f);
        fprintf(f, "\n");
        for (int t = 0; t < x->g.nT && !code; t++)
            for (int ci = 0; ci < x->g.nC && !code; ci++)
                for (int fi = 0; fi < x->g.nffn && !code; fi++) {
                    fprintf(f, "#### %s: T = %d, C = %d, %s FFN; %s, %ld steps, %d seeds, %s\n",
                            x->name, x->g.T[t], x->g.C[ci], x->g.ffn[fi] ? "with" : "without",
                            ba_task_name(x->g.task), x->g.train.steps, x->g.nseeds,
                            x->g.task == BA_TASK_CHARLM ? "validation perplexity (lower is better)"
                                                        : "held-out accuracy % (higher is better)");
                    code = lab_summary_section(&x->cs, x->g.T[t], x->g.C[ci], x->g.ffn[fi], f) < 0;
                }
    }
    return code;
}

/* ------------------------------------------- against the fixed budget */

/* The row of the variant labelled label in (T, C, FFN) among the n rows of
 * grid x, or NULL. */
static const lab_effect_row *row_of(const rep_grid *x, const lab_effect_row *rows, int n,
                                    const char *label, int T, int C, int ffn)
{
    for (int i = 0; i < n; i++) {
        char l[96];
        lab_arm_label(&x->g.arms[rows[i].arm], l, sizeof l);
        if (rows[i].T == T && rows[i].C == C && rows[i].ffn == ffn && !strcmp(l, label))
            return &rows[i];
    }
    return NULL;
}

/* One budget's columns: steps and pairs/seeds, effect, verdict; returns
 * the verdict (static). */
static const char *budget_cols(const rep_grid *x, const lab_effect_row *r, FILE *f)
{
    char eff[128];
    const char *verdict, *paper;
    rep_effect_text(x->g.task, r, eff, sizeof eff, &verdict, &paper);
    fprintf(f, " %ld, %d/%d | %s | %s |", x->g.train.steps, r->pairs, r->seeds, eff, verdict);
    return verdict;
}

/* The effect rows of the fixed-budget grids of gs named in names (x[k]
 * NULL where gs has no such grid). */
typedef struct {
    size_t n;
    const rep_grid **x;
    lab_effect_row **rows; /* rows[k]: nr[k] rows of x[k] */
    int *nr;
} fixed_rows;

static void fixed_free(fixed_rows *s)
{
    for (size_t k = 0; k < s->n && s->rows; k++)
        free(s->rows[k]);
    free(s->x), free(s->rows), free(s->nr);
}

/* 0, or 1 out of memory (s freed). */
static int fixed_load(const rep_grids *gs, const char *const *names, size_t n, fixed_rows *s)
{
    s->n = n;
    s->x = calloc(n ? n : 1, sizeof *s->x);
    s->rows = calloc(n ? n : 1, sizeof *s->rows);
    s->nr = calloc(n ? n : 1, sizeof *s->nr);
    int code = !s->x || !s->rows || !s->nr;
    for (size_t k = 0; k < n && !code; k++)
        if ((s->x[k] = rep_grid_named(gs, names[k])) &&
            lab_effect_rows(&s->x[k]->cs, &s->rows[k], &s->nr[k]))
            code = 1;
    if (code)
        fixed_free(s);
    return code;
}

int rep_converged_changes(const rep_grids *gs, const char *const *names, size_t n,
                          const rep_grids *conv, FILE *f)
{
    fixed_rows fs;
    if (fixed_load(gs, names, n, &fs))
        return 1;
    const rep_grid **fx = fs.x;
    lab_effect_row **frows = fs.rows;
    const int *fn = fs.nr;
    int code = 0, head = 0;
    for (int i = 0; i < conv->n && !code; i++) {
        const rep_grid *cx = &conv->v[i];
        lab_effect_row *rows;
        int nr;
        if (lab_effect_rows(&cx->cs, &rows, &nr)) {
            code = 1;
            break;
        }
        for (int j = 0; j < nr; j++) {
            const lab_effect_row *cr = &rows[j];
            if (cr->arm == lab_softmax_arm(&cx->g))
                continue;
            char label[96];
            lab_arm_label(&cx->g.arms[cr->arm], label, sizeof label);
            const lab_effect_row *fr = NULL;
            size_t k = 0;
            for (; k < n && !fr; k++)
                if (fx[k] && fx[k]->g.task == cx->g.task)
                    fr = row_of(fx[k], frows[k], fn[k], label, cr->T, cr->C, cr->ffn);
            if (!fr)
                continue;
            if (!head++)
                fprintf(f, "### What the longer budget changed\n\n"
                           "Each long-budget row beside the fixed-budget row of the same cell and "
                           "variant (its grid's steps, pairs/seeds, effect and verdict; the same "
                           "seeds where both have them). 'changed' compares the verdicts alone: an "
                           "effect that moved inside an interval that still holds zero is 'no'.\n\n"
                           "| task | T | C | FFN | variant | fixed budget: steps, pairs/seeds | "
                           "effect [95 %% CI] | verdict | long budget: steps, pairs/seeds | effect "
                           "[95 %% CI] | verdict | changed |\n"
                           "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
            fprintf(f, "| %s | %d | %d | %s | %s |", ba_task_name(cx->g.task), cr->T, cr->C,
                    cr->ffn ? "yes" : "no", label);
            const char *fv = budget_cols(fx[k - 1], fr, f), *cv = budget_cols(cx, cr, f);
            /* "not yet" while the converged row has no interval */
            fprintf(f, " %s |\n", isnan(cr->lo)       ? "not yet (no interval)"
                                   : strcmp(fv, cv) ? "**yes**"
                                                    : "no");
        }
        free(rows);
    }
    if (head)
        fprintf(f, "\n");
    fixed_free(&fs);
    return code;
}

/* ------------------------------------------------ the budget ladder */

/* The mean late change (late_change) over the finished runs of one arm
 * in (T, C, FFN) of grid x; NAN when none has two periodic evaluations. */
static int arm_late_change(const command *c, const rep_grid *x, int arm, int T, int C, int ffn,
                           double *mean)
{
    ba_running s = {0};
    int code = 0;
    for (int i = 0; i < x->cs.n && !code; i++) {
        const lab_cell *cell = &x->cs.cells[i];
        double d;
        long from, to;
        if (cell->run && cell->arm == arm && cell->T == T && cell->C == C && cell->ffn == ffn &&
            late_change(c, cell->run, &d, &from, &to, &code))
            ba_running_add(&s, d);
    }
    *mean = s.n ? s.mean : NAN;
    return code;
}

/* One rung: a grid's row of the cell and variant. */
typedef struct {
    const rep_grid *x;
    const lab_effect_row *r;
} rung;

static int rung_cmp(const void *pa, const void *pb)
{
    long a = ((const rung *)pa)->x->g.train.steps, b = ((const rung *)pb)->x->g.train.steps;
    return (a > b) - (a < b);
}

/* The change of the final metric from rung a to the longer rung b per
 * doubling of the steps, paired by seed: the mean over the seeds both
 * rungs finished of % of perplexity (charlm) or accuracy points
 * (brackets), divided by log2(b's steps / a's). *pairs: the seeds; NAN
 * when none is shared. */
static double per_doubling(ba_task task, const rung *a, const rung *b, int T, int C, int ffn,
                           int *pairs)
{
    ba_running s = {0};
    for (int i = 0; i < b->x->cs.n; i++) {
        const lab_cell *y = &b->x->cs.cells[i];
        if (!y->run || y->arm != b->r->arm || y->T != T || y->C != C || y->ffn != ffn)
            continue;
        const lab_cell *x = lab_cells_find(&a->x->cs, a->r->arm, T, C, ffn, y->seed);
        if (!x || !x->run)
            continue;
        double va = x->run->value, vb = y->run->value;
        if (!isfinite(va) || !isfinite(vb) || (task == BA_TASK_CHARLM && !(va > 0)))
            continue; /* a record no run writes: no pair, not an inf */
        ba_running_add(&s, lab_effect(task, vb, va));
    }
    *pairs = (int)s.n;
    return s.n ? s.mean / log2((double)b->x->g.train.steps / (double)a->x->g.train.steps) : NAN;
}

/* The rows of one converged row cr (grid cx) down its ladder: the same
 * cell and variant in the fixed-budget grids of fs (one per budget),
 * then the converged one, by steps; nothing when it has no other rung. */
static int ladder_rows(const command *c, const rep_grid *cx, const lab_effect_row *cr,
                       const fixed_rows *fs, int *head, FILE *f)
{
    const rep_grid *const *fx = fs->x;
    lab_effect_row *const *frows = fs->rows;
    const int *fn = fs->nr;
    size_t n = fs->n;
    char label[96];
    lab_arm_label(&cx->g.arms[cr->arm], label, sizeof label);
    rung v[8];
    int nv = 0, code = 0;
    for (size_t k = 0; k < n && nv < 7; k++) {
        const lab_effect_row *r = fx[k] && fx[k]->g.task == cx->g.task
                                      ? row_of(fx[k], frows[k], fn[k], label, cr->T, cr->C, cr->ffn)
                                      : NULL;
        /* one rung per budget: a fixed grid of the converged budget is
         * that budget already */
        int dup = r && fx[k]->g.train.steps == cx->g.train.steps;
        for (int i = 0; r && i < nv; i++)
            dup |= v[i].x->g.train.steps == fx[k]->g.train.steps;
        if (r && r->runs && !dup)
            v[nv++] = (rung){fx[k], r};
    }
    if (!nv)
        return 0;
    v[nv++] = (rung){cx, cr};
    qsort(v, (size_t)nv, sizeof v[0], rung_cmp);
    if (!(*head)++)
        fprintf(f, "### Does the late movement shrink as the budget grows?\n\n"
                   "The long-budget cells down the budget ladder: per variant, each budget's "
                   "runs, mean final metric (perplexity; accuracy %%) and mean late change "
                   "(from the periodic evaluation nearest 70 %% of "
                   "the steps to the last; %% of perplexity or accuracy points). Under the cosine "
                   "schedule the late stretch is where the learning rate anneals, so a change "
                   "that does not shrink as the budget grows measures the schedule, not a curve "
                   "still far from its limit. 'per doubling' is what the budget itself still buys: "
                   "the final metric's change from the rung above, divided by log2 of the ratio of "
                   "their steps (%% of perplexity or accuracy points; the mean over the seeds both "
                   "rungs finished, their count in brackets).\n\n"
                   "| task | T | C | FFN | variant | steps | runs | final metric | late change | "
                   "per doubling |\n"
                   "|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nv && !code; i++) {
        double late;
        code = arm_late_change(c, v[i].x, v[i].r->arm, cr->T, cr->C, cr->ffn, &late);
        fprintf(f, "| %s | %d | %d | %s | %s | %ld | %d | ", ba_task_name(cx->g.task), cr->T,
                cr->C, cr->ffn ? "yes" : "no", label, v[i].x->g.train.steps, v[i].r->runs);
        if (!v[i].r->runs) {
            fprintf(f, "missing | missing | |\n");
            continue;
        }
        fprintf(f, isnan(late) ? "%.3f | (no curves) | " : "%.3f | %+.2f | ", v[i].r->mean, late);
        const rung *up = NULL; /* the nearest shorter budget with runs */
        for (int k = i - 1; k >= 0 && !up; k--)
            up = v[k].r->runs ? &v[k] : NULL;
        int pairs = 0;
        double pd = up ? per_doubling(cx->g.task, up, &v[i], cr->T, cr->C, cr->ffn, &pairs) : NAN;
        if (pairs)
            fprintf(f, "%+.2f (%d) |\n", pd, pairs);
        else
            fprintf(f, up ? "(no shared seeds) |\n" : "|\n");
    }
    return code;
}

int rep_budget_ladder(const command *c, const rep_grids *gs, const char *const *names, size_t n,
                      const rep_grids *conv, FILE *f)
{
    fixed_rows fs;
    if (fixed_load(gs, names, n, &fs))
        return fail_lib(c, "out of memory", 1);
    int code = 0, head = 0;
    for (int i = 0; i < conv->n && !code; i++) {
        lab_effect_row *rows;
        int nr;
        if (lab_effect_rows(&conv->v[i].cs, &rows, &nr)) {
            code = fail_lib(c, "out of memory", 1);
            break;
        }
        for (int j = 0; j < nr && !code; j++)
            code = ladder_rows(c, &conv->v[i], &rows[j], &fs, &head, f);
        free(rows);
    }
    if (head)
        fprintf(f, "\n");
    fixed_free(&fs);
    return code;
}
