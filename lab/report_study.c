/* The study preset's section (issue 43): its grids read two ways. Grids
 * of one task, T and C at different budgets (a ladder: charlm-T256,
 * charlm-T256-1200, ...) form a family; for each, the arms at equal steps
 * (every rung, with the training time each run took) and at equal
 * wall-clock compute (each arm against the reference arm's largest rung
 * that took no longer). Every number comes from the run records
 * (run.json through the grid layer): the metric and wall_s, the training
 * time summed over every call of a resumed run, periodic evaluations
 * included; then each rung's length extrapolation (report_extrap.c). */
#include "report.h"

#include <inttypes.h>
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

/* Whether grids x and y train one cell: task, T and C. */
static int same_cell(const rep_grid *x, const rep_grid *y)
{
    return x->g.task == y->g.task && x->g.T[0] == y->g.T[0] && x->g.C[0] == y->g.C[0];
}

/* Whether grids x and y train the same model on the same data in the
 * same way but for the budget, its evaluations and the learning rate: the
 * task's parameters (a recall grid of 16 pairs is another task than one of
 * 4), the model's depth and heads, and every optimisation setting that is
 * not tied to the number of steps (the warmup is, by default a share of
 * them). The engines' settings may differ (the study's hybrid grid belongs
 * to its first rung). */
static int same_setup(const rep_grid *x, const rep_grid *y)
{
    const ba_data_spec *a = &x->g.data, *b = &y->g.data;
    const ba_train_settings *s = &x->g.train, *t = &y->g.train;
    return same_cell(x, y) && a->kinds == b->kinds && a->recall_vocab == b->recall_vocab &&
           a->pairs == b->pairs && a->max_depth == b->max_depth &&
           a->n_heldout == b->n_heldout && a->data_seed == b->data_seed &&
           x->g.layers == y->g.layers && x->g.heads == y->g.heads && s->batch == t->batch &&
           fabs(s->min_lr_frac - t->min_lr_frac) <= 1e-9 && /* min_lr / lr as recorded */
           s->j_init_std == t->j_init_std && s->init_std == t->init_std &&
           s->opt.beta1 == t->opt.beta1 && s->opt.beta2 == t->opt.beta2 &&
           s->opt.eps == t->opt.eps && s->opt.weight_decay == t->opt.weight_decay &&
           s->opt.grad_clip == t->opt.grad_clip;
}

/* Whether grid x belongs in the family whose first grid is y: the same
 * setup at the same learning rate (another rate is another ladder, which
 * the learning-rate table sets beside it). */
static int same_family(const rep_grid *x, const rep_grid *y)
{
    return same_setup(x, y) && x->g.train.lr == y->g.train.lr;
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
        if (rep_cell_run(x, c, a, ffn)) {
            ba_running_add(&m, lab_shown(x->g.task, c->run->value));
            ba_running_add(&w, c->run->wall_s);
        }
    }
    st_cell s = {(int)m.n, m.mean, m.n > 1 ? ba_running_sd(&m) : NAN, w.mean};
    return s;
}

/* Every finished run's value of arm a of x at ffn, in seed order, as
 * "v1, v2, ...": a cell whose seeds split (a lookup learned by some and
 * not others) shows it here, which its mean ± sd hides. */
static void per_seed(const rep_grid *x, int a, int ffn, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    int dec = x->g.task == BA_TASK_CHARLM ? 3 : 2;
    for (int i = 0; i < x->cs.n && at < cap; i++) {
        const lab_cell *c = &x->cs.cells[i];
        if (rep_cell_run(x, c, a, ffn))
            at += (size_t)snprintf(buf + at, cap - at, "%s%.*f", at ? ", " : "", dec,
                                   lab_shown(x->g.task, c->run->value));
    }
}

/* How many finished runs of arm a of x at ffn solved recall: at least
 * ST_SOLVED % of the queried values [choice]. Recall seeds tend to
 * split: those that learn the lookup reach 99-100 % in the study, most
 * others stay near the floor without it (about 29 % at 4 pairs), so a
 * t-interval over them is wide whichever way they split; the count says
 * how they split. */
#define ST_SOLVED 99.0
static int solved(const rep_grid *x, int a, int ffn)
{
    int k = 0;
    for (int i = 0; i < x->cs.n; i++) {
        const lab_cell *c = &x->cs.cells[i];
        k += rep_cell_run(x, c, a, ffn) && lab_shown(x->g.task, c->run->value) >= ST_SOLVED;
    }
    return k;
}

/* The paired effect of arm a of x against arm b of y on their shared
 * seeds (lab_effect's unit): mean and 95 % interval (NAN under two). */
static int paired(const rep_grid *x, int a, const rep_grid *y, int b, int ffn, double *e,
                  double *lo, double *hi)
{
    ba_running s = {0};
    for (int i = 0; i < x->cs.n; i++) {
        const lab_cell *c = &x->cs.cells[i];
        if (!rep_cell_run(x, c, a, ffn))
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
    int rc = t == BA_TASK_RECALL;
    fprintf(f, "Equal steps (each rung against its own reference arm on the same seeds; every "
               "run's value in seed order beside the mean");
    if (rc)
        fprintf(f, "; solved: the runs that answered at least %g %% of the queried values, "
                   "since recall seeds tend to split between learning the lookup and not, "
                   "which a t-interval over the seeds does not show", ST_SOLVED);
    fprintf(f, "):\n\n| arm | steps | runs | %s | per seed | %svs the reference [95 %% CI] | "
               "minutes per run | ms per step |\n|---|---|---|---|---|---|---|---|%s\n",
            t == BA_TASK_CHARLM ? "val perplexity" : "accuracy %", rc ? "solved | " : "",
            rc ? "---|" : "");
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
            char seeds[160];
            per_seed(x, ax, ffn, seeds, sizeof seeds);
            char sv[32] = "";
            if (rc)
                snprintf(sv, sizeof sv, "%d of %d | ", solved(x, ax, ffn), s.n);
            fprintf(f, "| %s | %ld | %d | %.*f%s | %s | %s%s | %.1f | %.1f |\n", label,
                    x->g.train.steps, s.n, t == BA_TASK_CHARLM ? 3 : 2, s.mean, sd, seeds, sv,
                    eff, s.wall / 60.0, 1000.0 * s.wall / (double)x->g.train.steps);
        }
    }
    fputc('\n', f);
}

/* The family's step costs at ffn from one calibration: the cost.json of
 * the first grid of gs with the family's setup (a step costs the same
 * whatever the budget or the learning rate) that names every arm of the
 * family, into ms[a] (fm->arm's order), that grid into *src and the
 * machine measured on into machine. Costs of one file only: arms timed
 * side by side, not at different times. 1 priced, 0 none names every
 * arm, or minus an exit code after printing (a damaged file). */
static int family_costs(const command *c, const rep_grids *gs, const st_family *fm, int ffn,
                        double *ms, const rep_grid **src, char *machine, size_t mlen)
{
    for (int k = 0; k < gs->n; k++) {
        const rep_grid *x = &gs->v[k];
        if (x->g.nT != 1 || x->g.nC != 1 || !same_setup(x, fm->g[0]))
            continue;
        cJSON *doc;
        int rc = lab_cost_read(c, x->dir, &doc), all = doc != NULL;
        if (rc)
            return -rc;
        for (int a = 0; a < fm->narm && all; a++) {
            char label[160];
            lab_arm_label(fm->arm[a], label, sizeof label);
            all = lab_cost_find(doc, label, x->g.T[0], x->g.C[0], ffn, &ms[a]);
        }
        if (all) {
            snprintf(machine, mlen, "%s",
                     cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "machine")));
            *src = x;
        }
        cJSON_Delete(doc);
        if (all)
            return 1;
    }
    return 0;
}

/* Seconds a run of the family's arm fa at rung x costs: its steps at the
 * measured cost a step where priced (ms), else its cell's mean training
 * time s. */
static double run_cost(const double *ms, int fa, const rep_grid *x, const st_cell *s)
{
    return ms ? 1e-3 * ms[fa] * (double)x->g.train.steps : s->wall;
}

/* A reference rung "costs no more" than the arm's up to this factor
 * [choice]: repeated timings of one arm's step spread by 10-25 % on the
 * busy 2-core machine (cost.json's rounds), so a 6 % cheaper arm is an
 * equal one, not one to set against half the reference's budget. */
#define ST_COST_TOL 1.10

/* The equal-compute header: how runs are priced. */
static void compute_header(const st_family *fm, const double *ms, const rep_grid *src,
                           const char *machine, const char *rlabel, FILE *f)
{
    if (!ms) {
        fprintf(f, "Equal wall-clock compute (no cost file of a grid of this setup names every "
                   "arm: `boltzattn-lab cost`): each arm's budget against `%s` at its largest "
                   "budget that took no more than %.0f %% longer per run, else at the arm's own "
                   "(marked); the effect paired on the seeds both hold:\n\n",
                rlabel, 100 * (ST_COST_TOL - 1));
        return;
    }
    fprintf(f, "Equal compute: each run priced at its training steps times its arm's cost a "
               "step, every arm's step timed side by side in one process (`boltzattn-lab cost`, "
               "`%s/cost.json`, on %s; evaluations not counted): ",
            src->name, machine);
    for (int a = 0; a < fm->narm; a++) {
        char label[160];
        lab_arm_label(fm->arm[a], label, sizeof label);
        fprintf(f, "%s`%s` %.4g ms", a ? ", " : "", label, ms[a]);
    }
    fprintf(f, ". Each arm's budget against `%s` at its largest budget that costs no more than "
               "%.0f %% above the arm's per run (repeated timings of one step spread about that "
               "much), else at the arm's own (marked); minutes per run are those prices; the "
               "effect paired on the seeds both hold:\n\n",
            rlabel, 100 * (ST_COST_TOL - 1));
}

/* The equal-compute table of one family at ffn: each arm's rung against
 * the reference's largest rung that costs at most ST_COST_TOL times the
 * arm's per run (else the arm's own, marked). 0 or an exit code after
 * printing. */
static int equal_compute(const command *c, const rep_grids *gs, const st_family *fm, int ffn,
                         FILE *f)
{
    const rep_grid *top = fm->g[fm->n - 1];
    ba_task t = top->g.task;
    int ref = lab_softmax_arm(&top->g), rfa = -1;
    if (ref < 0)
        return 0;
    for (int a = 0; a < fm->narm && rfa < 0; a++)
        if (same_arm(fm->arm[a], &top->g.arms[ref]))
            rfa = a;
    double cost[ST_MAX_ARMS];
    const rep_grid *src = NULL;
    char machine[256] = "";
    int priced = family_costs(c, gs, fm, ffn, cost, &src, machine, sizeof machine);
    if (priced < 0)
        return -priced;
    const double *ms = priced ? cost : NULL;
    char rlabel[160];
    lab_arm_label(&top->g.arms[ref], rlabel, sizeof rlabel);
    compute_header(fm, ms, src, machine, rlabel, f);
    fprintf(f, "| arm | steps, minutes per run | reference steps, minutes per run | effect "
               "[95 %% CI] | seeds | reading |\n|---|---|---|---|---|---|\n");
    for (int a = 0; a < fm->narm; a++) {
        if (a == rfa)
            continue;
        char label[160];
        lab_arm_label(fm->arm[a], label, sizeof label);
        for (int k = 0; k < fm->n; k++) {
            const rep_grid *x = fm->g[k];
            int ax = shown_before(fm, k, fm->arm[a]) ? -1 : arm_in(x, fm->arm[a]);
            st_cell s = ax >= 0 ? cell_of(x, ax, ffn) : (st_cell){0, 0, 0, 0};
            if (s.n == 0)
                continue;
            double sc = run_cost(ms, a, x, &s), rc = 0;
            /* the reference rung: the largest budget at no more cost per
             * run, else the arm's own (equal steps, the reference given
             * more). Rungs of one budget (a grid trained again beside the
             * ladder, e.g. with arms of its own) cost the same where
             * priced and differ in time by load alone: of those, the one
             * that pairs the most seeds with the arm, then the arm's own
             * grid. */
            const rep_grid *y = NULL;
            int ry = -1, more = 0, np = 0;
            for (int j = 0; j < fm->n; j++) {
                const rep_grid *z = fm->g[j];
                int r = arm_in(z, &top->g.arms[ref]);
                st_cell cz = r >= 0 ? cell_of(z, r, ffn) : (st_cell){0, 0, 0, 0};
                double zc = run_cost(ms, rfa, z, &cz);
                if (cz.n == 0 || zc > sc * ST_COST_TOL)
                    continue;
                double e0, lo0, hi0;
                int n = paired(x, ax, z, r, ffn, &e0, &lo0, &hi0);
                long zs = z->g.train.steps, ys = y ? y->g.train.steps : -1;
                if (!y || zs > ys || (zs == ys && (n > np || (n == np && z == x))))
                    y = z, ry = r, rc = zc, np = n;
            }
            if (!y && (ry = arm_in(x, &top->g.arms[ref])) >= 0) {
                st_cell cx = cell_of(x, ry, ffn);
                if (cx.n > 0)
                    y = x, more = 1, rc = run_cost(ms, rfa, x, &cx);
            }
            if (!y)
                continue;
            double e, lo, hi;
            int n = paired(x, ax, y, ry, ffn, &e, &lo, &hi);
            char eff[96];
            fmt_effect(t, n, e, lo, hi, eff, sizeof eff);
            /* compute that is not equal reads one way only: an arm better
             * than a reference given more, or worse than one given less
             * (no rung of the reference as long as the arm's), is so at
             * equal compute too; the other way it is not resolved */
            int less = !more && rc * ST_COST_TOL < sc;
            const char *rd = n ? reading(t, lo, hi) : "not yet measured";
            if (more && !strcmp(rd, "worse"))
                rd = "not resolved (the reference had more compute)";
            else if (less && !strcmp(rd, "better"))
                rd = "not resolved (the reference had less compute)";
            fprintf(f, "| %s | %ld, %.1f | %ld, %.1f%s | %s | %d | %s |\n", label,
                    x->g.train.steps, sc / 60.0, y->g.train.steps, rc / 60.0,
                    more   ? " (more than the arm's: no rung as short)"
                    : less ? " (less than the arm's: no rung as long)"
                           : "",
                    eff, n, rd);
        }
    }
    fputc('\n', f);
    return 0;
}

/* ------------------------------------------------------ learning rates */

#define ST_MAX_LRS 8

/* One arm's finished runs at one learning rate: the first grid of that
 * rate that holds the arm (grids in the report's order), its arm index. */
typedef struct {
    const rep_grid *g;
    int a;
} st_at;

/* The mean metric (shown units) of arm x.a at ffn over the seeds every
 * rate of the row has finished, and how many; seeds of at. */
static double common_mean(const st_at *at, int nat, int i, int ffn, int *n)
{
    const rep_grid *x = at[i].g;
    ba_running m = {0};
    for (int k = 0; k < x->cs.n; k++) {
        const lab_cell *c = &x->cs.cells[k];
        if (!rep_cell_run(x, c, at[i].a, ffn))
            continue;
        int all = 1;
        for (int j = 0; j < nat && all; j++) {
            if (!at[j].g || j == i)
                continue;
            const lab_cell *o = lab_cells_find(&at[j].g->cs, at[j].a, at[j].g->g.T[0],
                                               at[j].g->g.C[0], ffn, c->seed);
            all = o && o->run;
        }
        if (all)
            ba_running_add(&m, lab_shown(x->g.task, c->run->value));
    }
    *n = (int)m.n;
    return m.mean;
}

static int by_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* One table of a cell and budget trained at several learning rates: each
 * arm's mean at every rate on the seeds all its rates have finished, and
 * its best rate. A check of the settings the verdicts rest on (one rate
 * for every arm), not a verdict itself. */
static void lr_table(const rep_grids *gs, const unsigned char *in, const double *lr, int nlr,
                     int ffn, FILE *f)
{
    const rep_grid *x0 = NULL;
    for (int i = 0; i < gs->n && !x0; i++)
        x0 = in[i] ? &gs->v[i] : NULL;
    ba_task t = x0->g.task;
    fprintf(f, "Learning rate, %s, T = %d, C = %d, %s FFN, %ld steps (each arm on the seeds "
               "every rate of its row has finished; a check of the one rate the verdicts use "
               "for every arm, not a verdict):\n\n| arm | seeds |",
            ba_task_name(t), x0->g.T[0], x0->g.C[0], ffn ? "with" : "without",
            x0->g.train.steps);
    for (int r = 0; r < nlr; r++)
        fprintf(f, " lr %g |", lr[r]);
    fprintf(f, " best lr |\n|---|---|");
    for (int r = 0; r <= nlr; r++)
        fprintf(f, "---|");
    fputc('\n', f);
    /* the arms in the order of the grids, each once */
    for (int i = 0; i < gs->n; i++) {
        if (!in[i])
            continue;
        for (int a = 0; a < gs->v[i].g.narms; a++) {
            const lab_arm *w = &gs->v[i].g.arms[a];
            int seen = 0;
            for (int j = 0; j < i && !seen; j++)
                seen = in[j] && arm_in(&gs->v[j], w) >= 0;
            for (int b = 0; b < a && !seen; b++)
                seen = same_arm(&gs->v[i].g.arms[b], w);
            if (seen)
                continue;
            st_at at[ST_MAX_LRS] = {{0}};
            int have = 0;
            for (int r = 0; r < nlr; r++)
                for (int j = 0; j < gs->n && !at[r].g; j++)
                    if (in[j] && gs->v[j].g.train.lr == lr[r] && arm_in(&gs->v[j], w) >= 0)
                        at[r].g = &gs->v[j], at[r].a = arm_in(&gs->v[j], w), have++;
            if (have < 2)
                continue;
            char label[160], cells[ST_MAX_LRS][32];
            lab_arm_label(w, label, sizeof label);
            int n = 0, best = -1;
            double mean[ST_MAX_LRS] = {0};
            for (int r = 0; r < nlr; r++) {
                snprintf(cells[r], sizeof cells[r], "-");
                if (!at[r].g)
                    continue;
                mean[r] = common_mean(at, nlr, r, ffn, &n);
                if (n == 0)
                    continue;
                snprintf(cells[r], sizeof cells[r], "%.*f", t == BA_TASK_CHARLM ? 3 : 2, mean[r]);
                if (best < 0 || (t == BA_TASK_CHARLM ? mean[r] < mean[best] : mean[r] > mean[best]))
                    best = r;
            }
            fprintf(f, "| %s | %d |", label, n);
            for (int r = 0; r < nlr; r++)
                fprintf(f, " %s |", cells[r]);
            if (best >= 0)
                fprintf(f, " %g |\n", lr[best]);
            else
                fprintf(f, " - |\n");
        }
    }
    fputc('\n', f);
}

/* The learning-rate tables: one per cell, FFN and budget whose grids hold
 * two or more rates. */
static int lr_tables(const command *c, const rep_grids *gs, const lab_names *want, FILE *f)
{
    unsigned char *done = calloc((size_t)gs->n + 1, 2);
    if (!done)
        return fail_lib(c, "out of memory", 1);
    unsigned char *in = done + gs->n + 1;
    for (int i = 0; i < gs->n; i++) {
        const rep_grid *x0 = &gs->v[i];
        if (done[i] || !wanted(x0, want) || x0->g.nT != 1 || x0->g.nC != 1)
            continue;
        double lr[ST_MAX_LRS];
        int nlr = 0;
        memset(in, 0, (size_t)gs->n);
        for (int j = i; j < gs->n; j++) {
            const rep_grid *y = &gs->v[j];
            if (done[j] || !wanted(y, want) || y->g.nT != 1 || y->g.nC != 1 ||
                !same_setup(y, x0) || y->g.train.steps != x0->g.train.steps)
                continue;
            int k = 0;
            while (k < nlr && lr[k] != y->g.train.lr)
                k++;
            if (k == nlr && nlr == ST_MAX_LRS)
                continue; /* past the table's columns: left for no table */
            if (k == nlr)
                lr[nlr++] = y->g.train.lr;
            done[j] = in[j] = 1;
        }
        if (nlr < 2)
            continue;
        qsort(lr, (size_t)nlr, sizeof lr[0], by_double);
        for (int fi = 0; fi < x0->g.nffn; fi++)
            lr_table(gs, in, lr, nlr, x0->g.ffn[fi], f);
    }
    free(done);
    return 0;
}

/* Each rung's learning curves (boltzattn plot), where drawn: stuck or
 * late-learning runs show there before any table. */
static void learning_curves(const st_family *fm, const char *prefix, FILE *f)
{
    for (int k = 0; k < fm->n; k++) {
        char alt[160];
        snprintf(alt, sizeof alt, "learning curves of %.100s", fm->g[k]->name);
        rep_png_link(fm->g[k], "learning_curves.png", alt, prefix, f);
    }
}

static int by_steps(const void *pa, const void *pb)
{
    const rep_grid *a = *(const rep_grid *const *)pa, *b = *(const rep_grid *const *)pb;
    int d = (a->g.train.steps > b->g.train.steps) - (a->g.train.steps < b->g.train.steps);
    return d ? d : strcmp(a->name, b->name); /* one budget: by name, so the order is fixed */
}

/* The seeds of arm a's cells in x without a finished run, as "`label`
 * seeds 3, 4" appended to buf (cap). */
static void missing_of(const rep_grid *x, int a, char *buf, size_t cap)
{
    int n = 0;
    for (int i = 0; i < x->cs.n; i++)
        n += x->cs.cells[i].arm == a && !x->cs.cells[i].run;
    size_t at = strlen(buf);
    if (n == 0 || at >= cap)
        return;
    char label[160];
    lab_arm_label(&x->g.arms[a], label, sizeof label);
    at += (size_t)snprintf(buf + at, cap - at, "%s`%s` seed%s ", at ? "; " : "", label,
                           n > 1 ? "s" : "");
    for (int i = 0, k = 0; i < x->cs.n && at < cap; i++) {
        const lab_cell *c = &x->cs.cells[i];
        if (c->arm == a && !c->run)
            at += (size_t)snprintf(buf + at, cap - at, "%s%" PRIu64, k++ ? ", " : "", c->seed);
    }
}

/* A planned grid's number for key, m the grid as the plan runs it
 * (lab_preset_grid_merged): a parameter ("$NAME" or "$NAME/K") read as the
 * preset's default for it (what the preset runs unless the environment
 * says otherwise), with plan.c's quotient rule; -1 when there is none. */
static long planned_number(const cJSON *preset, const cJSON *m, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
    const char *s = cJSON_GetStringValue(v);
    long div = 1;
    if (s && s[0] == '$') {
        char name[64];
        if (lab_param_ref(s, name, sizeof name, &div))
            return -1;
        v = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(preset, "params"),
                                             name),
            "default");
    }
    return cJSON_IsNumber(v) ? lab_param_divide((long)v->valuedouble, div) : -1;
}

/* The preset's plan against the records: a row per grid of its "order"
 * (the runs finished, the arms and seeds still to train, or why a rung
 * not run yet may never be), then the grids under out it does not plan. */
static void progress(const rep_grids *gs, const cJSON *preset, FILE *f)
{
    const cJSON *order = cJSON_GetObjectItemCaseSensitive(preset, "order"), *e;
    if (!cJSON_IsArray(order) || !order->child)
        return;
    fprintf(f, "Where the study stands: each grid of the preset in the order it is trained "
               "(two chains side by side: docs/reproduce.md), its runs finished and the arms "
               "and seeds still to train. A rung that depends on the one below is trained only "
               "while a claim read there has not settled, so it may never run.\n\n"
               "| grid | steps | runs finished | still to train |\n|---|---|---|---|\n");
    cJSON_ArrayForEach(e, order)
    {
        const char *name = cJSON_GetStringValue(e);
        const rep_grid *x = name ? rep_grid_named(gs, name) : NULL;
        cJSON *m = name ? lab_preset_grid_merged(preset, name) : NULL;
        long more = planned_number(preset, m, "seeds_if_unresolved");
        char more_t[96] = "";
        if (more > 0 && (!x || more > x->g.nseeds))
            snprintf(more_t, sizeof more_t, "; seeds up to %ld while a claim it answers is open",
                     more);
        if (x) {
            char miss[1024] = "";
            for (int a = 0; a < x->g.narms; a++)
                missing_of(x, a, miss, sizeof miss);
            fprintf(f, "| `%s` | %ld | %d of %d | %s%s |\n", name, x->g.train.steps,
                    lab_cells_finished(&x->cs), x->cs.n, miss[0] ? miss : "none", more_t);
        } else if (name) {
            long steps = planned_number(preset, m, "steps");
            const char *cond =
                cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "if_unsettled"));
            char st[32] = "";
            if (steps > 0)
                snprintf(st, sizeof st, "%ld", steps);
            fprintf(f, "| `%s` | %s | not run yet | all", name, st);
            if (cond)
                fprintf(f, "; only if a claim read at `%s` has not settled", cond);
            fprintf(f, "%s |\n", more_t);
        }
        cJSON_Delete(m);
    }
    for (int i = 0; i < gs->n; i++) {
        int planned = 0;
        cJSON_ArrayForEach(e, order)
        planned |= cJSON_IsString(e) && strcmp(e->valuestring, gs->v[i].name) == 0;
        if (!planned)
            fprintf(f, "| `%s` | %ld | %d of %d | not in the preset's plan: trained apart from it |\n",
                    gs->v[i].name, gs->v[i].g.train.steps, lab_cells_finished(&gs->v[i].cs),
                    gs->v[i].cs.n);
    }
    fputc('\n', f);
}

int rep_study_section(const command *c, const char *out, const char *prefix,
                      const rep_grids *gs, const lab_names *want, const cJSON *preset,
                      int standalone, FILE *f)
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
               "under the same load, not machines. Equal compute prices the runs instead by "
               "each arm's cost a step measured side by side (`boltzattn-lab cost`) where a "
               "grid of the ladder's setup holds such a file for every arm of the ladder.\n\n");
    progress(gs, preset, f);
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
            char pairs[32] = "";
            if (x0->g.task == BA_TASK_RECALL)
                snprintf(pairs, sizeof pairs, ", %d pairs", x0->g.data.pairs);
            fprintf(f, "### %s, T = %d, C = %d%s, %s FFN, lr %g (", ba_task_name(x0->g.task),
                    x0->g.T[0], x0->g.C[0], pairs, ffn ? "with" : "without", x0->g.train.lr);
            for (int k = 0; k < fm.n; k++)
                fprintf(f, "%s`%s`", k ? ", " : "", fm.g[k]->name);
            fprintf(f, ")\n\n");
            if (fm.left_rungs || fm.left_arms)
                fprintf(f, "Not shown: %d more grid(s) of this family and %d more arm(s), past "
                           "this section's limits of %d grids and %d arms a family.\n\n",
                        fm.left_rungs, fm.left_arms, ST_MAX_RUNGS, ST_MAX_ARMS);
            equal_steps(&fm, ffn, f);
            int rc = equal_compute(c, gs, &fm, ffn, f);
            if (rc) {
                free(done);
                return rc;
            }
            if (fi == 0) /* one figure holds every FFN setting's panel */
                learning_curves(&fm, prefix, f);
            for (int k = 0; k < fm.n; k++)
                rep_study_extrapolation(c, fm.g[k], ffn, prefix, f);
            for (int k = 0; k < fm.n && fi == 0; k++) {
                /* what the couplings learned, rung by rung, where analysed */
                char lead[256];
                snprintf(lead, sizeof lead, "What the couplings learned at %ld steps (`%.100s`). ",
                         fm.g[k]->g.train.steps, fm.g[k]->name);
                int shown = 0, rc = rep_couplings_table(c, fm.g[k], prefix, lead, 0, &shown, f);
                if (rc) {
                    free(done);
                    return rc;
                }
                if (shown)
                    fprintf(f, "\n");
            }
        }
    }
    free(done);
    return lr_tables(c, gs, want, f);
}
