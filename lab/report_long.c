/* The long-context section of the report (report --preset long; with
 * --section-only the section alone, which make results-doc appends to
 * docs/results.md): per T the arms against softmax with intervals and
 * verdicts, the learning curves, J by distance of the Ising arms, and the
 * length extrapolation of GRID/extrapolation.json. Every number comes from
 * the run records (through the cells, as summary.md), the couplings
 * analyses (couplings.json) and the extrapolation files, all JSON; what
 * is missing is said, never filled in. */
#include "report.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The grids `lab/reproduce.sh long` makes (its --out names), in the order
 * it runs them. Each grid under OUT gets its part from its records; these
 * names only let the section say which of the preset's grids were never
 * started. */

/* "m [lo, hi]" of the values x (their mean and its 95 % interval), "m (one
 * run)" or "missing". */
static void mean_ci(const double *x, int n, const char *fmt, char *buf, size_t cap)
{
    ba_summary s = ba_summarize(x, n);
    char m[24], lo[24], hi[24]; /* perplexities: a few digits */
    snprintf(m, sizeof m, fmt, s.mean);
    if (n == 0) {
        snprintf(buf, cap, "missing");
    } else if (n == 1) {
        snprintf(buf, cap, "%.23s (one run)", m);
    } else {
        snprintf(lo, sizeof lo, fmt, s.mean - s.ci95);
        snprintf(hi, sizeof hi, fmt, s.mean + s.ci95);
        snprintf(buf, cap, "%.23s [%.23s, %.23s]", m, lo, hi);
    }
}

/* A paired change in % (digits decimals) with its interval and the
 * verdict it supports: better (negative, the interval below 0), worse,
 * unresolved. */
static void change_verdict(const double *e, int n, int digits, const char *better,
                           const char *worse, char *eff, size_t ecap, const char **verdict)
{
    ba_summary s = ba_summarize(e, n);
    if (n == 0) {
        snprintf(eff, ecap, "missing");
        *verdict = "not measured";
    } else if (n == 1) {
        snprintf(eff, ecap, "%+.*f %% (one pair)", digits, s.mean);
        *verdict = "too few seeds";
    } else {
        snprintf(eff, ecap, "%+.*f %% [%+.*f, %+.*f]", digits, s.mean, digits, s.mean - s.ci95,
                 digits, s.mean + s.ci95);
        *verdict = s.mean + s.ci95 < 0   ? better
                   : s.mean - s.ci95 > 0 ? worse
                                         : "no resolved difference";
    }
}

/* ------------------------------------------------------ one T of a grid */

/* One arm's row at (T, C, FFN): perplexity over seeds, the paired effect
 * against softmax and its verdict, the seeds without a run. */
static void arm_row(const rep_grid *x, int a, int T, int C, int ffn, double *v, double *e,
                    FILE *f)
{
    const lab_grid *g = &x->g;
    int sm = lab_softmax_arm(g), n = 0, np = 0;
    char missing[256] = "", label[160], ppl[96], eff[96], runs[320];
    for (int si = 0; si < g->nseeds; si++) {
        uint64_t seed = g->seed0 + (uint64_t)si;
        const lab_cell *cx = lab_cells_find(&x->cs, a, T, C, ffn, seed);
        const lab_cell *cs = sm >= 0 ? lab_cells_find(&x->cs, sm, T, C, ffn, seed) : NULL;
        if (cx && cx->run) {
            v[n++] = cx->run->value;
            if (cs && cs->run && a != sm)
                e[np++] = lab_effect(g->task, cx->run->value, cs->run->value);
        } else {
            size_t l = strlen(missing);
            snprintf(missing + l, sizeof missing - l, "%s%" PRIu64, l ? ", " : "", seed);
        }
    }
    const char *verdict = "";
    mean_ci(v, n, "%.3f", ppl, sizeof ppl);
    if (a == sm)
        snprintf(eff, sizeof eff, "(reference)");
    else
        change_verdict(e, np, 2, "better than softmax", "worse than softmax", eff, sizeof eff,
                       &verdict);
    if (missing[0])
        snprintf(runs, sizeof runs, "%d of %d (missing seeds %s)", n, g->nseeds, missing);
    else
        snprintf(runs, sizeof runs, "%d", n);
    lab_arm_label(&g->arms[a], label, sizeof label);
    fprintf(f, "| %s | %s | %s | %s | %s |\n", label, runs, ppl, eff, verdict);
}

/* The table of every arm at (T, C, FFN). */
static int arms_table(const rep_grid *x, int T, int C, int ffn, FILE *f)
{
    const lab_grid *g = &x->g;
    double *v = malloc(sizeof(double) * (size_t)g->nseeds * 2 + 1);
    if (!v)
        return 1;
    if (g->nC > 1 || g->nffn > 1)
        fprintf(f, "C = %d, %s FFN:\n\n", C, ffn ? "with" : "without");
    fprintf(f, "| variant | runs | perplexity [95 %% CI] | effect vs softmax [95 %% CI] | "
               "verdict |\n|---|---|---|---|---|\n");
    for (int a = 0; a < g->narms; a++)
        arm_row(x, a, T, C, ffn, v, v + g->nseeds, f);
    fprintf(f, "\n");
    free(v);
    return 0;
}

/* ------------------------------------------------------- extrapolation */

/* The same arm (variant and form, exact) trained at T2 in another grid:
 * its perplexity over seeds, or "not run". */
static void trained_at(const rep_grids *gs, const lab_arm *arm, int T2, char *buf, size_t n)
{
    snprintf(buf, n, "not run");
    for (int i = 0; i < gs->n; i++) {
        const rep_grid *y = &gs->v[i];
        for (int a = 0; a < y->g.narms; a++) {
            const lab_arm *b = &y->g.arms[a];
            if (b->attn != arm->attn || !lab_form_same(&b->form, &arm->form) ||
                lab_arm_sampled(b))
                continue;
            double v[1000];
            int k = 0, has_T = 0;
            for (int j = 0; j < y->cs.n && k < 1000; j++) {
                const lab_cell *x = &y->cs.cells[j];
                has_T |= x->T == T2;
                if (x->arm == a && x->T == T2 && x->run)
                    v[k++] = x->run->value;
            }
            if (has_T) {
                mean_ci(v, k, "%.3f", buf, n);
                return;
            }
        }
    }
}

/* The row of arm a trained at T in the extrapolation table at T2 (1 when
 * written), or its refusal added to refused. Counts the finished runs not
 * evaluated yet. w: room for 3 values per cell of the grid. */
static int extrap_row(const rep_grids *gs, const rep_grid *x, const lab_xentries *xe, int a, int T,
                      int T2, double *w, char *refused, size_t rcap, int *pending, FILE *f)
{
    const lab_grid *g = &x->g;
    double *own = w, *lng = w + x->cs.n, *e = w + 2 * x->cs.n;
    int n = 0, nref = 0;
    const char *reason = "";
    for (int i = 0; i < x->cs.n; i++) {
        const lab_cell *cx = &x->cs.cells[i];
        if (cx->arm != a || cx->T != T || !cx->run)
            continue;
        const lab_xentry *en = lab_xentries_find(xe, cx->run->name, T2);
        if (!en) {
            (*pending)++;
        } else if (en->refused) {
            nref++, reason = en->reason;
        } else {
            own[n] = en->own, lng[n] = en->at;
            e[n] = 100.0 * (lng[n] / own[n] - 1.0);
            n++;
        }
    }
    char label[160], a1[96], a2[96], ch[96], tr[96];
    lab_arm_label(&g->arms[a], label, sizeof label);
    if (n == 0 && nref > 0) {
        size_t l = strlen(refused);
        snprintf(refused + l, rcap - l, "- `%s` (%d run%s): %s\n", label, nref,
                 nref == 1 ? "" : "s", reason);
        return 0;
    }
    if (n == 0)
        return 0;
    const char *verdict;
    char better[64], worse[64];
    snprintf(better, sizeof better, "better at T = %d", T2);
    snprintf(worse, sizeof worse, "worse at T = %d", T2);
    mean_ci(own, n, "%.3f", a1, sizeof a1);
    mean_ci(lng, n, "%.3f", a2, sizeof a2);
    /* a model run longer may change very little: three decimals */
    change_verdict(e, n, 3, better, worse, ch, sizeof ch, &verdict);
    trained_at(gs, &g->arms[a], T2, tr, sizeof tr);
    fprintf(f, "| %s | %d | %d | %s | %s | %s | %s | %s |\n", label, T, n, a1, a2, ch, verdict,
            tr);
    return 1;
}

/* The extrapolation tables of grid x (one per T_eval in its file). */
static int extrapolation(const command *c, const rep_grids *gs, const rep_grid *x, FILE *f)
{
    lab_xentries xe;
    rep_extrapolation_read(c, x, &xe);
    if (xe.n == 0)
        return 0;
    int tv[16], nt = lab_xentries_lengths(&xe, tv, 16);
    double *w = malloc(sizeof(double) * ((size_t)x->cs.n * 3 + 1));
    char *refused = calloc(4096, 1);
    int code = !w || !refused;
    for (int k = 0; k < nt && !code; k++) {
        int pending = 0;
        const lab_xentry *e0 = NULL;
        for (int i = 0; i < xe.n && !e0; i++)
            if (xe.e[i].T_eval == tv[k] && !xe.e[i].refused)
                e0 = &xe.e[i];
        fprintf(f, "#### Length extrapolation: `%s` evaluated at T = %d\n\n", x->name, tv[k]);
        fprintf(f, "Each finished run of `%s` whose model can run at T = %d (no position "
                   "embeddings, relative couplings with a band: the library's ba_model_resize "
                   "decides) evaluated on the validation split at its own T and at T = %d, on %s. "
                   "Change: the paired relative perplexity change from its own T to T = %d "
                   "(negative: the longer context helps), with its 95 %% interval over seeds. The "
                   "last column is the same arm trained at T = %d, where the preset ran it.\n\n",
                x->name, tv[k], tv[k],
                !e0 ? "the validation windows"
                : e0->items == 0 ? "every validation window"
                             : "evenly spaced validation windows (`--extrapolate-items`)",
                tv[k], tv[k]);
        fprintf(f, "| variant | trained T | runs | perplexity at trained T [95 %% CI] | "
                   "perplexity at T = %d | change | verdict | trained at T = %d |\n"
                   "|---|---|---|---|---|---|---|---|\n",
                tv[k], tv[k]);
        refused[0] = '\0';
        int rows = 0;
        for (int t = 0; t < x->g.nT; t++)
            for (int a = 0; a < x->g.narms; a++)
                rows += extrap_row(gs, x, &xe, a, x->g.T[t], tv[k], w, refused, 4096,
                                   &pending, f);
        if (!rows)
            fprintf(f, "| (no finished run of the grid evaluated at T = %d) |  |  |  |  |  |  |  "
                       "|\n",
                    tv[k]);
        if (refused[0])
            fprintf(f, "\nNot run at T = %d (the library refuses these models):\n\n%s",
                    tv[k], refused);
        if (pending)
            fprintf(f, "\n%d finished run%s of the grid %s no entry at T = %d yet (an "
                       "interrupted preset: rerunning it evaluates them).\n",
                    pending, pending == 1 ? "" : "s", pending == 1 ? "has" : "have", tv[k]);
        fprintf(f, "\n");
    }
    free(w);
    free(refused);
    lab_xentries_free(&xe);
    return code ? fail_lib(c, "out of memory", 1) : 0;
}

/* ------------------------------------------------------------ sections */

/* A grid's part: its budget and state, per (T, C, FFN) the arms' table,
 * its figures and convergence, J by distance and its extrapolation. */
static int grid_part(const command *c, const rep_grids *gs, const rep_grid *x,
                     const char *prefix, FILE *f)
{
    const lab_grid *g = &x->g;
    int done = lab_cells_finished(&x->cs), code = 0;
    if (g->task != BA_TASK_CHARLM) {
        fprintf(f, "### `%s`\n\nA %s grid: not part of the long-context comparison (its own "
                   "section follows in the report).\n\n",
                x->name, ba_task_name(g->task));
        return 0;
    }
    fprintf(f, "### T =");
    for (int t = 0; t < g->nT; t++)
        fprintf(f, "%s %d", t ? "," : "", g->T[t]);
    fprintf(f, " (`%s`)\n\n", x->name);
    fprintf(f, "%ld steps, batch %d, learning rate %g, %d layer%s x %d head%s, %d seed%s; ",
            g->train.steps, g->train.batch, g->train.lr, g->layers, g->layers == 1 ? "" : "s",
            g->heads, g->heads == 1 ? "" : "s", g->nseeds, g->nseeds == 1 ? "" : "s");
    if (done == x->cs.n)
        fprintf(f, "all %d runs finished", done);
    else
        fprintf(f, "**incomplete: %d of %d runs finished** (an interrupted preset; the rows "
                   "say which seeds are missing)",
                done, x->cs.n);
    fprintf(f, ". Task charlm, width C = %d; metric: validation perplexity (lower is better).\n\n",
            g->C[0]);
    for (int t = 0; t < g->nT && !code; t++)
        for (int ci = 0; ci < g->nC && !code; ci++)
            for (int fi = 0; fi < g->nffn && !code; fi++)
                code = arms_table(x, g->T[t], g->C[ci], g->ffn[fi], f);
    if (code)
        return fail_lib(c, "out of memory", 1);
    fprintf(f, "Change of the validation perplexity late in training (%% of perplexity, between "
               "the periodic evaluations at the steps shown; near zero: flat curves):\n\n");
    if ((code = rep_convergence(c, x, f)))
        return code;
    fprintf(f, "\n");
    if (rep_png_links(x, "", prefix, f))
        return fail_lib(c, "out of memory", 1);
    fprintf(f, "\n");
    if ((code = rep_couplings_table(c, x, prefix, NULL, 1, NULL, f)))
        return code;
    fprintf(f, "\n");
    return extrapolation(c, gs, x, f);
}

/* The smallest T of a grid: the order of the parts. */
static int grid_order(const void *pa, const void *pb)
{
    const rep_grid *a = *(const rep_grid *const *)pa, *b = *(const rep_grid *const *)pb;
    int ta = a->g.T[0], tb = b->g.T[0];
    for (int i = 1; i < a->g.nT; i++)
        ta = a->g.T[i] < ta ? a->g.T[i] : ta;
    for (int i = 1; i < b->g.nT; i++)
        tb = b->g.T[i] < tb ? b->g.T[i] : tb;
    return ta != tb ? (ta > tb) - (ta < tb) : strcmp(a->name, b->name);
}

static void intro(const char *out, const rep_grids *gs, const rep_grid *const *order,
                  const lab_names *want, int standalone, FILE *f)
{
    fprintf(f, "## Long context\n\n");
    if (standalone) {
        rep_generated_by(out, "long", gs, f);
    }
    fprintf(f, "Character-level language models at long contexts: every arm of a grid is "
               "trained with the same settings, seeds and data order. Perplexity is the mean "
               "over seeds with its 95 %% interval (Student t); the effect is the paired "
               "relative perplexity change against softmax on the same seeds (negative is "
               "better) with its 95 %% interval, and the verdict is read off that interval: "
               "'better' or 'worse' only when it excludes zero, a null result is reported as "
               "one. Missing runs are named, never filled in. Labels: `-rel` relative couplings "
               "(one per distance, no position embeddings, so the model runs at any T), `-W<W>` "
               "couplings of range W (exact, band engine), `-logn` the log-n field bias; softmax "
               "and sigmoid learn position embeddings.\n\n");
    fprintf(f, "| grid | runs finished |\n|---|---|\n");
    for (int i = 0; i < gs->n; i++)
        fprintf(f, "| %s | %d of %d |\n", order[i]->name, lab_cells_finished(&order[i]->cs),
                order[i]->cs.n);
    for (size_t i = 0; i < want->n; i++)
        if (!rep_grid_named(gs, want->v[i]))
            fprintf(f, "| %s | not run yet |\n", want->v[i]);
    fprintf(f, "\n");
}

int rep_long_section(const command *c, const char *out, const char *prefix, const rep_grids *gs,
                     const lab_names *want, int standalone, FILE *f)
{
    const rep_grid **order = malloc(sizeof *order * (size_t)(gs->n + 1));
    if (!order)
        return fail_lib(c, "out of memory", 1);
    for (int i = 0; i < gs->n; i++)
        order[i] = &gs->v[i];
    qsort(order, (size_t)gs->n, sizeof *order, grid_order);
    intro(out, gs, order, want, standalone, f);
    int code = 0;
    for (int i = 0; i < gs->n && !code; i++)
        code = grid_part(c, gs, order[i], prefix, f);
    free(order);
    return code;
}
