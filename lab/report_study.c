/* The study preset's section (issue 43): its grids read two ways. Grids
 * of one task, T and C at different budgets (a ladder: charlm-T256,
 * charlm-T256-1200, ...) form a family; for each, the arms at equal steps
 * (every rung, with the training time each run took) and at equal
 * wall-clock compute (each arm against the reference arm's largest rung
 * that took no longer). Every number comes from the run records
 * (run.json through the grid layer): the metric and wall_s, the training
 * time summed over every call of a resumed run, periodic evaluations
 * included. */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ST_MAX_RUNGS 16

#define ST_MAX_ARMS 64

/* One family: its grids by steps, ascending, and the union of their arms
 * (a grid may hold an arm the others do not: the study's hybrid arm has a
 * grid of its own at the first rung), the largest rung's first. */
typedef struct {
    const rep_grid *g[ST_MAX_RUNGS];
    int n;
    const lab_arm *arm[ST_MAX_ARMS];
    int narm;
    int left_rungs, left_arms; /* past the limits above: named under the heading */
} st_family;

static int same_arm(const lab_arm *a, const lab_arm *b)
{
    return a->attn == b->attn && lab_form_same(&a->form, &b->form) &&
           a->sampler.kind == b->sampler.kind && a->sampler.shots == b->sampler.shots;
}

/* The arm of x equal to want, or -1. */
static int arm_in(const rep_grid *x, const lab_arm *want)
{
    for (int a = 0; a < x->g.narms; a++)
        if (same_arm(&x->g.arms[a], want))
            return a;
    return -1;
}

/* The family's arms: every arm of its rungs once, from the largest rung
 * down. */
static void family_arms(st_family *fm)
{
    fm->narm = 0;
    for (int k = fm->n - 1; k >= 0; k--)
        for (int a = 0; a < fm->g[k]->g.narms; a++) {
            const lab_arm *x = &fm->g[k]->g.arms[a];
            int seen = 0;
            for (int i = 0; i < fm->narm && !seen; i++)
                seen = same_arm(fm->arm[i], x);
            if (seen)
                continue;
            if (fm->narm < ST_MAX_ARMS)
                fm->arm[fm->narm++] = x;
            else
                fm->left_arms++;
        }
}

/* Whether rung k repeats arm w at a budget an earlier rung of the family
 * already shows it at (two grids of one budget: the hybrid's grid holds a
 * copy of its reference's runs). */
static int shown_before(const st_family *fm, int k, const lab_arm *w)
{
    for (int j = 0; j < k; j++)
        if (fm->g[j]->g.train.steps == fm->g[k]->g.train.steps && arm_in(fm->g[j], w) >= 0)
            return 1;
    return 0;
}

/* Whether grid x belongs in the family whose first grid is y. */
static int same_family(const rep_grid *x, const rep_grid *y)
{
    return x->g.task == y->g.task && x->g.T[0] == y->g.T[0] && x->g.C[0] == y->g.C[0];
}

static int wanted(const rep_grid *x, const lab_names *want)
{
    if (!want || !want->n)
        return 1;
    for (size_t i = 0; i < want->n; i++)
        if (strcmp(want->v[i], x->name) == 0)
            return 1;
    return 0;
}

/* The finished runs of arm a in the cell (T, C, ffn) of x: count, mean
 * metric (shown units) and its standard deviation, mean wall-clock per
 * run in seconds. */
typedef struct {
    int n;
    double mean, sd, wall;
} st_cell;

static st_cell cell_of(const rep_grid *x, int a, int ffn)
{
    ba_running m = {0}, w = {0};
    for (int i = 0; i < x->cs.n; i++) {
        const lab_cell *c = &x->cs.cells[i];
        if (c->run && c->arm == a && c->T == x->g.T[0] && c->C == x->g.C[0] && c->ffn == ffn) {
            ba_running_add(&m, lab_shown(x->g.task, c->run->value));
            ba_running_add(&w, c->run->wall_s);
        }
    }
    st_cell s = {(int)m.n, m.mean, m.n > 1 ? ba_running_sd(&m) : NAN, w.mean};
    return s;
}

/* The paired effect of arm a of x against arm b of y on their shared
 * seeds (lab_effect's unit): mean and 95 % interval (NAN under two). */
static int paired(const rep_grid *x, int a, const rep_grid *y, int b, int ffn, double *e,
                  double *lo, double *hi)
{
    ba_running s = {0};
    for (int i = 0; i < x->cs.n; i++) {
        const lab_cell *c = &x->cs.cells[i];
        if (!c->run || c->arm != a || c->T != x->g.T[0] || c->C != x->g.C[0] || c->ffn != ffn)
            continue;
        const lab_cell *r = lab_cells_find(&y->cs, b, y->g.T[0], y->g.C[0], ffn, c->seed);
        if (r && r->run)
            ba_running_add(&s, lab_effect(x->g.task, c->run->value, r->run->value));
    }
    return rep_interval(&s, e, lo, hi);
}

static void fmt_effect(ba_task t, int n, double e, double lo, double hi, char *buf, size_t cap)
{
    if (n == 0)
        snprintf(buf, cap, "-");
    else
        rep_fmt_effect(t, e, lo, hi, buf, cap);
}

/* The reading of an interval: lower perplexity, higher accuracy is
 * better. */
static const char *reading(ba_task t, double lo, double hi)
{
    if (isnan(lo))
        return "not resolved";
    int better = t == BA_TASK_CHARLM ? hi < 0 : lo > 0;
    int worse = t == BA_TASK_CHARLM ? lo > 0 : hi < 0;
    return better ? "better" : worse ? "worse" : "not resolved";
}

/* The equal-steps table of one family at ffn: every arm of the family,
 * each rung that holds it (once per budget). */
static void equal_steps(const st_family *fm, int ffn, FILE *f)
{
    const rep_grid *top = fm->g[fm->n - 1];
    ba_task t = top->g.task;
    fprintf(f, "Equal steps (each rung against its own reference arm on the same seeds):\n\n"
               "| arm | steps | runs | %s | vs the reference [95 %% CI] | minutes per run | "
               "ms per step |\n|---|---|---|---|---|---|---|\n",
            t == BA_TASK_CHARLM ? "val perplexity" : "accuracy %");
    for (int a = 0; a < fm->narm; a++) {
        char label[160];
        lab_arm_label(fm->arm[a], label, sizeof label);
        for (int k = 0; k < fm->n; k++) {
            const rep_grid *x = fm->g[k];
            int ax = shown_before(fm, k, fm->arm[a]) ? -1 : arm_in(x, fm->arm[a]),
                rx = lab_softmax_arm(&x->g);
            st_cell s = ax >= 0 ? cell_of(x, ax, ffn) : (st_cell){0, 0, 0, 0};
            if (s.n == 0)
                continue;
            char eff[96] = "(reference)", sd[32] = "";
            if (ax != rx) {
                double e, lo, hi;
                int n = rx >= 0 ? paired(x, ax, x, rx, ffn, &e, &lo, &hi) : 0;
                fmt_effect(t, n, e, lo, hi, eff, sizeof eff);
            }
            if (!isnan(s.sd))
                snprintf(sd, sizeof sd, " ± %.*f", t == BA_TASK_CHARLM ? 3 : 2, s.sd);
            fprintf(f, "| %s | %ld | %d | %.*f%s | %s | %.1f | %.1f |\n", label, x->g.train.steps,
                    s.n, t == BA_TASK_CHARLM ? 3 : 2, s.mean, sd, eff, s.wall / 60.0,
                    1000.0 * s.wall / (double)x->g.train.steps);
        }
    }
    fputc('\n', f);
}

/* The equal-compute table of one family at ffn: each arm's rung against
 * the reference's largest rung that took no longer per run (else its
 * smallest, marked). */
static void equal_compute(const st_family *fm, int ffn, FILE *f)
{
    const rep_grid *top = fm->g[fm->n - 1];
    ba_task t = top->g.task;
    int ref = lab_softmax_arm(&top->g);
    if (ref < 0)
        return;
    char rlabel[160];
    lab_arm_label(&top->g.arms[ref], rlabel, sizeof rlabel);
    fprintf(f, "Equal wall-clock compute: each arm's budget against `%s` at its largest budget "
               "that took no longer per run, else at the arm's own (marked); the effect paired on "
               "the seeds both hold:\n\n"
               "| arm | steps, minutes per run | reference steps, minutes per run | effect "
               "[95 %% CI] | seeds | reading |\n|---|---|---|---|---|---|\n",
            rlabel);
    for (int a = 0; a < fm->narm; a++) {
        if (same_arm(fm->arm[a], &top->g.arms[ref]))
            continue;
        char label[160];
        lab_arm_label(fm->arm[a], label, sizeof label);
        for (int k = 0; k < fm->n; k++) {
            const rep_grid *x = fm->g[k];
            int ax = shown_before(fm, k, fm->arm[a]) ? -1 : arm_in(x, fm->arm[a]);
            st_cell s = ax >= 0 ? cell_of(x, ax, ffn) : (st_cell){0, 0, 0, 0};
            if (s.n == 0)
                continue;
            /* the reference rung: the longest at no more time per run,
             * else the arm's own (equal steps, the reference given more) */
            const rep_grid *y = NULL;
            int ry = -1, more = 0;
            st_cell rs = {0, 0, 0, 0};
            for (int j = 0; j < fm->n; j++) {
                int r = arm_in(fm->g[j], &top->g.arms[ref]);
                st_cell c = r >= 0 ? cell_of(fm->g[j], r, ffn) : (st_cell){0, 0, 0, 0};
                if (c.n > 0 && c.wall <= s.wall && (!y || c.wall > rs.wall))
                    y = fm->g[j], ry = r, rs = c;
            }
            if (!y && (ry = arm_in(x, &top->g.arms[ref])) >= 0 &&
                (rs = cell_of(x, ry, ffn)).n > 0)
                y = x, more = 1;
            if (!y)
                continue;
            double e, lo, hi;
            int n = paired(x, ax, y, ry, ffn, &e, &lo, &hi);
            char eff[96];
            fmt_effect(t, n, e, lo, hi, eff, sizeof eff);
            fprintf(f, "| %s | %ld, %.1f | %ld, %.1f%s | %s | %d | %s |\n", label,
                    x->g.train.steps, s.wall / 60.0, y->g.train.steps, rs.wall / 60.0,
                    more ? " (more than the arm's: no rung as short)" : "", eff, n,
                    n ? reading(t, lo, hi) : "not yet measured");
        }
    }
    fputc('\n', f);
}

static int by_steps(const void *pa, const void *pb)
{
    const rep_grid *a = *(const rep_grid *const *)pa, *b = *(const rep_grid *const *)pb;
    int d = (a->g.train.steps > b->g.train.steps) - (a->g.train.steps < b->g.train.steps);
    return d ? d : strcmp(a->name, b->name); /* one budget: by name, so the order is fixed */
}

int rep_study_section(const command *c, const char *out, const rep_grids *gs,
                      const lab_names *want, int standalone, FILE *f)
{
    fprintf(f, "## The study: equal steps and equal compute\n\n");
    if (standalone) {
        rep_generated_by(out, "study", gs, f);
    }
    fprintf(f, "Grids of one task, T and C at different budgets form a ladder. Every arm of a "
               "grid trains with the same settings, seeds and data order, and no arm has learned "
               "position embeddings. Minutes per run: the training time of run.json (every "
               "call of a resumed run, periodic evaluations included), on the machines named "
               "above, two runs side by side (one thread each): the times compare arms run "
               "under the same load, not machines.\n\n");
    unsigned char *done = calloc((size_t)gs->n + 1, 1);
    if (!done)
        return fail_lib(c, "out of memory", 1);
    for (int i = 0; i < gs->n; i++) {
        const rep_grid *x0 = &gs->v[i];
        if (done[i] || !wanted(x0, want) || x0->g.nT != 1 || x0->g.nC != 1)
            continue;
        st_family fm = {{0}, 0, {0}, 0, 0, 0};
        for (int j = i; j < gs->n; j++) {
            const rep_grid *y = &gs->v[j];
            if (done[j] || !wanted(y, want) || y->g.nT != 1 || y->g.nC != 1 ||
                !same_family(y, x0))
                continue;
            done[j] = 1;
            if (fm.n < ST_MAX_RUNGS)
                fm.g[fm.n++] = y;
            else
                fm.left_rungs++;
        }
        qsort(fm.g, (size_t)fm.n, sizeof fm.g[0], by_steps);
        family_arms(&fm);
        for (int fi = 0; fi < x0->g.nffn; fi++) {
            int ffn = x0->g.ffn[fi];
            fprintf(f, "### %s, T = %d, C = %d, %s FFN (", ba_task_name(x0->g.task), x0->g.T[0],
                    x0->g.C[0], ffn ? "with" : "without");
            for (int k = 0; k < fm.n; k++)
                fprintf(f, "%s`%s`", k ? ", " : "", fm.g[k]->name);
            fprintf(f, ")\n\n");
            if (fm.left_rungs || fm.left_arms)
                fprintf(f, "Not shown: %d more grid(s) of this family and %d more arm(s), past "
                           "this section's limits of %d grids and %d arms a family.\n\n",
                        fm.left_rungs, fm.left_arms, ST_MAX_RUNGS, ST_MAX_ARMS);
            equal_steps(&fm, ffn, f);
            equal_compute(&fm, ffn, f);
        }
    }
    free(done);
    return 0;
}
