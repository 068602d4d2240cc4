/* Convergence in the results report: how much each grid's runs still
 * moved late in training (the tables every report shows), and the
 * converged preset's section: the paper's headline cells (charlm T = 12,
 * brackets T = 16 with and without FFN, brackets T = 20) trained on long
 * budgets until the report's convergence criterion calls them flat. `report OUT --preset converged` writes it
 * inside a whole report; with --section-only alone, for docs/results.md,
 * where the full report's "Against the paper" rows of the same cells are
 * replaced by these (`report results/full --preset full --converged
 * results/converged`). */
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
        *d = r->task == BA_TASK_CHARLM ? 100.0 * (b->ppl / a->ppl - 1.0)
                                       : 100.0 * (b->accuracy - a->accuracy);
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

/* The grids lab/reproduce.sh's converged preset makes, by their names. */
static const char *const conv_grids[] = {"charlm-T12", "brackets-T16", "brackets-T20"};

static int finished(const lab_cells *cs)
{
    int n = 0;
    for (int i = 0; i < cs->n; i++)
        n += cs->cells[i].run != NULL;
    return n;
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
static void intro(const char *out, const rep_grids *gs, int standalone, FILE *f)
{
    fprintf(f, "## Converged headline rows\n\n");
    if (standalone) {
        char date[32];
        rep_date(date, sizeof date);
        fprintf(f, "Generated by `boltzattn report` from the files under `%s` on %s; nothing "
                   "below is typed by hand. The grids were run by `make reproduce "
                   "PRESET=converged` (`lab/reproduce.sh converged`), which resumes an "
                   "interrupted preset.\n",
                out, date);
        if (rep_machines(gs, f) == 0)
            fputc('\n', f);
    }
    fprintf(f, "The paper's headline cells with the full preset's settings (same seeds, data "
               "order, batch, learning rate and cosine schedule) but budgets long enough for the "
               "validation curves to stop moving: a grid is 'flat' when every cell's metric moved "
               "by less than 0.5 (%% of perplexity or accuracy points) from the periodic "
               "evaluation nearest 70 %% of the steps to the last one. The full report's 'Against "
               "the paper' rows of these cells come from here, whether flat or not: the next "
               "table says which.\n\n");
    fprintf(f, "| grid | runs finished | steps |\n|---|---|---|\n");
    for (size_t k = 0; k < sizeof conv_grids / sizeof conv_grids[0]; k++) {
        const rep_grid *x = rep_grid_named(gs, conv_grids[k]);
        if (x)
            fprintf(f, "| %s | %d of %d | %ld |\n", x->name, finished(&x->cs), x->cs.n,
                    x->g.train.steps);
        else
            fprintf(f, "| %s | not run yet | |\n", conv_grids[k]);
    }
    fprintf(f, "\n");
}

int rep_converged_section(const command *c, const char *out, const rep_grids *gs, int standalone,
                          FILE *f)
{
    intro(out, gs, standalone, f);
    fprintf(f, "### Are they flat?\n\n");
    int code = rep_convergence_overview(c, gs, f);
    fprintf(f, "\n### Against the paper (converged runs)\n\n" REP_VERDICT_HEAD);
    code = code ? code : rep_converged_verdicts(gs, f);
    fprintf(f, "\n");
    for (size_t k = 0; k < sizeof conv_grids / sizeof conv_grids[0] && !code; k++) {
        const rep_grid *x = rep_grid_named(gs, conv_grids[k]);
        if (!x)
            continue;
        fprintf(f, "### %s: the final movement of each cell\n\n", x->name);
        code = rep_convergence(c, x, f);
        fprintf(f, "\n");
        for (int t = 0; t < x->g.nT && !code; t++)
            for (int ci = 0; ci < x->g.nC && !code; ci++)
                for (int fi = 0; fi < x->g.nffn && !code; fi++) {
                    fprintf(f, "#### %s: T = %d, C = %d, %s FFN\n", x->name, x->g.T[t],
                            x->g.C[ci], x->g.ffn[fi] ? "with" : "without");
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

int rep_converged_changes(const rep_grids *gs, const char *const *names, size_t n,
                          const rep_grids *conv, FILE *f)
{
    const rep_grid **fx = calloc(n ? n : 1, sizeof *fx);
    lab_effect_row **frows = calloc(n ? n : 1, sizeof *frows);
    int *fn = calloc(n ? n : 1, sizeof *fn), code = !fx || !frows || !fn, head = 0;
    for (size_t k = 0; k < n && !code; k++)
        if ((fx[k] = rep_grid_named(gs, names[k])) &&
            lab_effect_rows(&fx[k]->cs, &frows[k], &fn[k]))
            code = 1;
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
                           "Each converged row beside the fixed-budget row of the same cell and "
                           "variant (its grid's steps, pairs/seeds, effect and verdict; the same "
                           "seeds where both have them). 'changed' compares the verdicts alone: an "
                           "effect that moved inside an interval that still holds zero is 'no'.\n\n"
                           "| task | T | C | FFN | variant | fixed budget: steps, pairs/seeds | "
                           "effect [95 %% CI] | verdict | converged: steps, pairs/seeds | effect "
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
    for (size_t k = 0; k < n && frows; k++)
        free(frows[k]);
    free(fx), free(frows), free(fn);
    return code;
}
