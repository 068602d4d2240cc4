/* The approx document's sections on training with the engines (approx
 * --doc, lab/approx_doc.c), from grids of `boltzattn ablate` alone:
 *
 * "Training with each engine": per T, the boltzmann runs of each grid of
 * DIR trained with an approximate engine, their final validation
 * perplexity (mean and sd over finished seeds), beside the runs trained
 * exactly, paired by seed: relative change per seed, its mean and 95 %
 * Student-t interval over the pairs. The exact runs are those of DIR's
 * exact grid at that T where it has one, else of the grids in
 * --exact-from. A run pairs with an exact one of the same seed whose
 * model (config and data, the engine aside) and training (steps, warmup,
 * batch, learning rates, initial couplings, optimiser) are the same.
 *
 * "Exact-trained models evaluated with each engine": DIR's exact grid at
 * each T, its engines.json (ablate --eval-engines) as approx_eval_doc.c's
 * table; then each grid of another task (brackets) with one T, exact
 * boltzmann runs and an engines.json, a table of its own.
 *
 * What a grid is comes from its records (grid.json, run.json), never its
 * directory's name; every number is read from JSON. A damaged grid record
 * or engines.json is bad input (exit 2), never a crash. */
#include "approx.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TD_MAX_GRIDS 64
#define TD_MAX_ROWS 64
#define TD_MAX_T (TD_MAX_ROWS + 2) /* the rows' and the preset's */
#define TD_MAX_OTHER 8

/* The preset's block sizes: a section each. */
static const int planned_T[] = {12, 20};

/* A grid read: record, runs, cells. */
typedef struct {
    char name[512]; /* as the document names it */
    lab_grid g;
    lab_runs rs;
    lab_cells cs;
} td_grid;

/* A row of the training table: a boltzmann arm of a grid at (T, C, FFN). */
typedef struct {
    const td_grid *x;
    int arm, T, C, ffn;
    ba_config cfg;       /* the cell's config (engine resolved) */
    int planned, n;      /* seeds of the grid (of the rows: pool_row), finished runs */
    const lab_run **run; /* n (malloc'd) */
    int np;              /* pairs with exact runs */
    double *ex, *diff;   /* np: the exact run's ppl, the relative change in % */
    const td_grid *src;  /* the grid of the first paired exact run */
} td_row;

typedef struct {
    int T;
    const td_row *exact; /* DIR's exact row at T, or NULL */
    td_row pool;         /* the exact runs shown when they come from --exact-from */
    char file[PATH_LEN]; /* the exact grid's engines.json */
    ax_evals *ev;         /* its entries at T, or NULL: no file */
} td_sec;

struct ax_train {
    const char *from, *exact_from;
    td_grid *grids[TD_MAX_GRIDS], *xgrids[TD_MAX_GRIDS];
    int ng, nx, x_loaded, full;
    td_row rows[TD_MAX_ROWS];
    int nrows;
    td_sec sec[TD_MAX_T];
    int nsec;
    /* grids of other tasks (brackets) with exact boltzmann runs and an
     * engines.json: a table each, in name order */
    int nother;
    char other_name[TD_MAX_OTHER][256];
    int other_T[TD_MAX_OTHER];
    ba_task other_task[TD_MAX_OTHER];
    ax_evals *other_ev[TD_MAX_OTHER];
};

/* ------------------------------------------------------------- grids */

static int has_grid(const char *dir, const char *name)
{
    char p[PATH_LEN];
    return snprintf(p, sizeof p, "%s/%s/grid.json", dir, name) < (int)sizeof p &&
           access(p, F_OK) == 0;
}

static int ising_arm(const lab_arm *a)
{
    return a->attn == BA_ATTN_BOLTZMANN && !lab_arm_sampled(a);
}

static void grid_free(td_grid *x)
{
    if (!x)
        return;
    lab_cells_free(&x->cs);
    lab_runs_free(&x->rs);
    free(x);
}

/* The charlm grids of dir with a boltzmann arm (exact inference), in
 * name order, into v (at most TD_MAX_GRIDS). prefix: dir shown in names. */
static int read_grids(const command *c, const char *dir, int prefix, td_grid **v, int *n)
{
    char **names;
    int nn, code = 0;
    *n = 0;
    if (lab_list_dir(dir, has_grid, NULL, &names, &nn))
        return fail_lib(c, "out of memory", 1);
    for (int i = 0; i < nn && !code; i++) {
        if (*n == TD_MAX_GRIDS) {
            fprintf(stderr, "%s %s: warning: %s: only the first %d grids are read\n", prog,
                    c->cmd, dir, TD_MAX_GRIDS);
            break;
        }
        char path[PATH_LEN];
        td_grid *x = calloc(1, sizeof *x);
        if (!x) {
            code = fail_lib(c, "out of memory", 1);
            break;
        }
        if ((code = mkpath(c, path, "%s/%s", dir, names[i]) ? 2 : lab_grid_read(c, path, &x->g))) {
            free(x);
            break;
        }
        int any = 0;
        for (int a = 0; a < x->g.narms; a++)
            any |= ising_arm(&x->g.arms[a]);
        if (x->g.task != BA_TASK_CHARLM || !any) {
            free(x);
            continue;
        }
        snprintf(x->name, sizeof x->name, "%s%s%s", prefix ? dir : "", prefix ? "/" : "",
                 names[i]);
        if (!(code = lab_runs_scan(c, path, &x->rs)))
            code = lab_cells_match(c, &x->g, &x->rs, &x->cs);
        if (code)
            grid_free(x);
        else
            v[(*n)++] = x;
    }
    lab_names_free(names, nn);
    return code;
}

/* ---------------------------------------------------------- pairing */

/* The data file's hash a run recorded ("" when none: older runs). */
static void data_hash(const lab_run *r, char *buf, size_t n)
{
    cJSON *o = cJSON_Parse(r->info.train_json);
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "data_hash");
    snprintf(buf, n, "%s", cJSON_IsString(h) ? h->valuestring : "");
    cJSON_Delete(o);
}

/* Whether b is a's model trained the same way but for the engine and the
 * seed: the config with the data's vocabulary, the training settings and,
 * where both recorded it, the data's hash. */
static int same_training(const lab_run *a, const lab_run *b)
{
    ba_config ca = a->info.config, cb = b->info.config;
    ca.engine = cb.engine = BA_ENGINE_FAST;
    ca.approx = cb.approx = ba_approx_default();
    ca.window = cb.window = 0;
    char *ja = ba_config_to_json(&ca, &a->info.spec), *jb = ba_config_to_json(&cb, &b->info.spec);
    int same = ja && jb && strcmp(ja, jb) == 0;
    free(ja), free(jb);
    const ba_train_settings *s = &a->info.settings, *t = &b->info.settings;
    same = same && s->steps == t->steps && s->warmup == t->warmup && s->batch == t->batch &&
           s->lr == t->lr && s->min_lr_frac == t->min_lr_frac &&
           s->j_init_std == t->j_init_std && s->init_std == t->init_std &&
           s->opt.beta1 == t->opt.beta1 &&
           s->opt.beta2 == t->opt.beta2 && s->opt.eps == t->opt.eps &&
           s->opt.weight_decay == t->opt.weight_decay && s->opt.grad_clip == t->opt.grad_clip;
    char ha[128], hb[128];
    data_hash(a, ha, sizeof ha), data_hash(b, hb, sizeof hb);
    return same && (!*ha || !*hb || strcmp(ha, hb) == 0);
}

/* The exact run of the grids v that pairs with run r at seed (r's own
 * or another of its grid): the first in grid and cell order; *src its
 * grid. */
static const lab_run *exact_match(td_grid *const *v, int n, const lab_run *r, uint64_t seed,
                                  const td_grid **src)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < v[i]->cs.n; j++) {
            const lab_run *e = v[i]->cs.cells[j].run;
            if (e && e->seed == seed && e->attn == BA_ATTN_BOLTZMANN &&
                e->sampler == BA_SAMPLER_EXACT &&
                !ba_engine_is_approx(ba_config_engine(&e->info.config)) && e->T == r->T &&
                e->C == r->C && e->ffn == r->ffn && same_training(r, e)) {
                *src = v[i];
                return e;
            }
        }
    return NULL;
}

/* The rows of grid x: each boltzmann arm at each (T, C, FFN). */
static int add_rows(const command *c, ax_train *t, const td_grid *x)
{
    const lab_grid *g = &x->g;
    for (int a = 0; a < g->narms; a++)
        for (int ti = 0; ising_arm(&g->arms[a]) && ti < g->nT; ti++)
            for (int ci = 0; ci < g->nC; ci++)
                for (int fi = 0; fi < g->nffn; fi++) {
                    if (t->nrows == TD_MAX_ROWS) {
                        if (!t->full++)
                            fprintf(stderr, "%s %s: warning: only the first %d rows are shown\n",
                                    prog, c->cmd, TD_MAX_ROWS);
                        return 0;
                    }
                    td_row *w = &t->rows[t->nrows++];
                    w->x = x, w->arm = a, w->T = g->T[ti], w->C = g->C[ci], w->ffn = g->ffn[fi];
                    w->planned = g->nseeds;
                    w->cfg = lab_cell_config(g, a, w->T, w->C, w->ffn);
                    w->cfg.engine = ba_config_engine(&w->cfg);
                    w->run = calloc((size_t)g->nseeds + 1, sizeof *w->run);
                    w->ex = calloc((size_t)g->nseeds + 1, sizeof *w->ex);
                    w->diff = calloc((size_t)g->nseeds + 1, sizeof *w->diff);
                    if (!w->run || !w->ex || !w->diff)
                        return fail_lib(c, "out of memory", 1);
                    for (int si = 0; si < g->nseeds; si++) {
                        const lab_cell *k = lab_cells_find(&x->cs, a, w->T, w->C, w->ffn,
                                                           g->seed0 + (uint64_t)si);
                        if (k && k->run)
                            w->run[w->n++] = k->run;
                    }
                }
    return 0;
}

static int row_exact(const td_row *w)
{
    return !ba_engine_is_approx(w->cfg.engine);
}

/* The exact runs of --exact-from (n grids) for the seeds of T's
 * approximate rows, as the section's exact row. 0, or 1 after printing. */
static int pool_row(const command *c, const ax_train *t, td_sec *s, int n)
{
    int cap = 0;
    const td_row *ref = NULL;
    for (int i = 0; i < t->nrows; i++) {
        const td_row *w = &t->rows[i];
        if (w->T == s->T && !row_exact(w) && w->n > 0)
            cap += w->x->g.nseeds, ref = ref ? ref : w;
    }
    td_row *p = &s->pool;
    *p = *ref;
    p->n = p->np = p->planned = 0, p->src = NULL, p->ex = p->diff = NULL;
    p->run = calloc((size_t)cap + 1, sizeof *p->run);
    uint64_t *seen = calloc((size_t)cap + 1, sizeof *seen);
    if (!p->run || !seen) {
        free(seen);
        return fail_lib(c, "out of memory", 1);
    }
    for (int i = 0; i < t->nrows; i++) {
        const td_row *w = &t->rows[i];
        for (int si = 0; w->T == s->T && !row_exact(w) && w->n && si < w->x->g.nseeds; si++) {
            uint64_t seed = w->x->g.seed0 + (uint64_t)si;
            int dup = 0;
            for (int k = 0; k < p->planned; k++)
                dup |= seen[k] == seed;
            if (dup)
                continue;
            seen[p->planned++] = seed;
            const td_grid *src = NULL;
            const lab_run *e = exact_match(t->xgrids, n, w->run[0], seed, &src);
            if (e)
                p->run[p->n++] = e, p->src = p->src ? p->src : src;
        }
    }
    free(seen);
    if (p->n) { /* labelled by its own engine */
        p->cfg = p->run[0]->info.config;
        p->cfg.engine = ba_config_engine(&p->cfg);
    }
    return 0;
}

/* The section of T: DIR's exact row, or the exact runs of --exact-from
 * for the seeds of T's approximate rows; then every approximate row's
 * pairs. */
static int pair_section(const command *c, ax_train *t, td_sec *s)
{
    const td_row *ref = NULL;
    for (int i = 0; i < t->nrows; i++) {
        const td_row *w = &t->rows[i];
        if (w->T == s->T && row_exact(w) && !s->exact)
            s->exact = w;
        if (w->T == s->T && !row_exact(w) && !ref && w->n > 0)
            ref = w;
    }
    td_grid *const *pool = s->exact ? (td_grid *const *)&t->grids[0] : t->xgrids;
    int npool = s->exact ? t->ng : t->nx;
    if (!s->exact && ref && !t->x_loaded) {
        int code = access(t->exact_from, F_OK) == 0
                       ? read_grids(c, t->exact_from, 1, t->xgrids, &t->nx)
                       : 0;
        t->x_loaded = 1;
        if (code)
            return code;
        npool = t->nx;
    }
    if (!s->exact && ref && pool_row(c, t, s, npool))
        return 1;
    for (int i = 0; i < t->nrows; i++) {
        td_row *w = &t->rows[i];
        for (int k = 0; w->T == s->T && !row_exact(w) && k < w->n; k++) {
            const td_grid *src = NULL;
            const lab_run *e = exact_match(pool, npool, w->run[k], w->run[k]->seed, &src);
            if (!e)
                continue;
            w->ex[w->np] = e->value;
            w->diff[w->np++] = lab_effect(BA_TASK_CHARLM, w->run[k]->value, e->value);
            w->src = w->src ? w->src : src;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ reading */

static int cmp_int(const void *a, const void *b)
{
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* The sections: the preset's T and every T of a row, in order. */
static void sections(ax_train *t)
{
    int T[TD_MAX_T], n = 0;
    for (int i = 0; i < (int)(sizeof planned_T / sizeof planned_T[0]) + t->nrows; i++) {
        int v = i < 2 ? planned_T[i] : t->rows[i - 2].T, seen = 0;
        for (int j = 0; j < n; j++)
            seen |= T[j] == v;
        if (!seen)
            T[n++] = v;
    }
    qsort(T, (size_t)n, sizeof(int), cmp_int);
    for (int i = 0; i < n; i++)
        t->sec[i].T = T[i];
    t->nsec = n;
}

/* The grids of from whose task is not charlm, with one T, a boltzmann arm
 * of exact inference and an engines.json: their evaluation tables. */
static int read_other(const command *c, ax_train *t)
{
    char **names;
    int nn, code = 0;
    if (lab_list_dir(t->from, has_grid, NULL, &names, &nn))
        return fail_lib(c, "out of memory", 1);
    for (int i = 0; i < nn && !code && t->nother < TD_MAX_OTHER; i++) {
        char path[PATH_LEN], file[PATH_LEN];
        lab_grid g;
        if (mkpath(c, path, "%s/%s", t->from, names[i]) ||
            mkpath(c, file, "%s/engines.json", path)) {
            code = 2;
            break;
        }
        if (access(file, F_OK) != 0 || strlen(names[i]) >= sizeof t->other_name[0])
            continue;
        if ((code = lab_grid_read(c, path, &g)))
            break;
        int any = 0;
        for (int a = 0; a < g.narms; a++)
            any |= ising_arm(&g.arms[a]);
        if (g.task == BA_TASK_CHARLM || !any || g.nT != 1)
            continue;
        int k = t->nother;
        if ((code = ax_evals_read(c, file, g.T[0], &t->other_ev[k])))
            break;
        snprintf(t->other_name[k], sizeof t->other_name[k], "%s", names[i]);
        t->other_T[k] = g.T[0], t->other_task[k] = g.task;
        t->nother++;
    }
    lab_names_free(names, nn);
    return code;
}

int ax_train_read(const command *c, const char *from, const char *exact_from, ax_train **out)
{
    *out = NULL;
    ax_train *t = calloc(1, sizeof *t);
    if (!t)
        return fail_lib(c, "out of memory", 1);
    t->from = from, t->exact_from = exact_from;
    int code = read_grids(c, from, 0, t->grids, &t->ng);
    for (int i = 0; i < t->ng && !code; i++)
        code = add_rows(c, t, t->grids[i]);
    if (!code)
        sections(t);
    for (int i = 0; i < t->nsec && !code; i++) {
        td_sec *s = &t->sec[i];
        if ((code = pair_section(c, t, s)) || !s->exact)
            continue;
        if (mkpath(c, s->file, "%s/%s/engines.json", from, s->exact->x->name))
            code = 2;
        else
            code = ax_evals_read(c, s->file, s->T, &s->ev);
    }
    if (!code)
        code = read_other(c, t);
    if (code || (!t->nrows && !t->nother)) {
        ax_train_free(t);
        return code;
    }
    *out = t;
    return 0;
}

void ax_train_free(ax_train *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nrows; i++)
        free(t->rows[i].run), free(t->rows[i].ex), free(t->rows[i].diff);
    for (int i = 0; i < t->nsec; i++) {
        free(t->sec[i].pool.run);
        ax_evals_free(t->sec[i].ev);
    }
    for (int i = 0; i < t->ng; i++)
        grid_free(t->grids[i]);
    for (int i = 0; i < t->nx; i++)
        grid_free(t->xgrids[i]);
    for (int i = 0; i < t->nother; i++)
        ax_evals_free(t->other_ev[i]);
    free(t);
}

/* ------------------------------------------------------------ writing */

/* mean ± sd of n perplexities ("no finished run", "x (one run)"). */
static void ppl_cell(FILE *f, const double *v, int n)
{
    ba_summary s = ba_summarize(v, n);
    if (n == 0)
        fprintf(f, " no finished run |");
    else if (n == 1)
        fprintf(f, " %.3f (one run) |", s.mean);
    else
        fprintf(f, " %.3f ± %.3f |", s.mean, s.sd);
}

/* An engine's label: its name, hybrid's window, settings other than the
 * defaults, and where the rows of its section differ in them (mixed) the
 * form, width and FFN. */
static void engine_label(const td_row *w, int mixed, char *buf, size_t n)
{
    ba_approx d = ba_approx_default();
    const ba_approx *a = &w->cfg.approx;
    int k = snprintf(buf, n, "%s", row_exact(w) ? "exact (" : "");
    k += snprintf(buf + k, n - (size_t)k, "%s", ba_engine_name(w->cfg.engine));
    if (w->cfg.engine == BA_ENGINE_HYBRID)
        k += snprintf(buf + k, n - (size_t)k, ", W = %d", w->cfg.window);
    if (ba_engine_is_approx(w->cfg.engine) &&
        (a->damping != d.damping || a->tol != d.tol || a->max_iter != d.max_iter))
        k += snprintf(buf + k, n - (size_t)k, ", damping %g, tol %g, max-iter %d", a->damping,
                      a->tol, a->max_iter);
    k += snprintf(buf + k, n - (size_t)k, "%s", row_exact(w) ? ")" : "");
    char v[96];
    lab_arm_variant(&w->x->g.arms[w->arm], v, sizeof v);
    if (mixed)
        snprintf(buf + k, n - (size_t)k, " (%s, C = %d%s)", v, w->C, w->ffn ? "" : ", no FFN");
}

/* One row of the training table. */
static void train_row(FILE *f, const td_row *w, int exact, int mixed, const char *src)
{
    char label[256];
    double *v = malloc(sizeof(double) * (size_t)(w->n + 1));
    engine_label(w, mixed, label, sizeof label);
    fprintf(f, "| %s | `%s` | %d of %d |", label, src ? src : w->x->name, w->n, w->planned);
    for (int k = 0; v && k < w->n; k++)
        v[k] = w->run[k]->value;
    ppl_cell(f, v, v ? w->n : 0);
    free(v);
    if (exact) {
        fprintf(f, " – | (the reference) |");
    } else if (!w->n) {
        fprintf(f, " no data | no data |");
    } else {
        if (w->np)
            fprintf(f, " %.3f (%d pair%s) |", ba_summarize(w->ex, w->np).mean, w->np,
                    w->np == 1 ? "" : "s");
        else
            fprintf(f, " no exact run of these seeds |");
        ax_change_cell(f, w->diff, w->np, "n/a");
    }
    fprintf(f, " %ld × %d |\n", w->x->g.train.steps, w->x->g.train.batch);
}

/* The training table of section s. */
static void train_table(FILE *f, const ax_train *t, const td_sec *s)
{
    int any = 0;
    for (int i = 0; i < t->nrows; i++)
        any |= t->rows[i].T == s->T;
    fprintf(f, "### T = %d\n\n", s->T);
    if (!any) {
        fprintf(f, "No grid at T = %d in `%s` yet: no data.\n\n", s->T, t->from);
        return;
    }
    int mixed = 0;
    const td_row *first = NULL;
    for (int i = 0; i < t->nrows; i++) {
        const td_row *w = &t->rows[i];
        if (w->T != s->T)
            continue;
        if (!first)
            first = w;
        mixed |= w->C != first->C || w->ffn != first->ffn ||
                 !lab_form_same(&w->x->g.arms[w->arm].form, &first->x->g.arms[first->arm].form);
    }
    fprintf(f, "| trained with | grid | runs | val ppl (mean ± sd) | exact-trained, same seeds "
               "| change vs exact [95 %% CI] | steps × batch |\n"
               "|---|---|---|---|---|---|---|\n");
    if (s->exact)
        train_row(f, s->exact, 1, mixed, NULL);
    else if (s->pool.n)
        train_row(f, &s->pool, 1, mixed, s->pool.src->name);
    else
        fprintf(f, "| exact | none: no exact grid at T = %d in `%s`, and no run in `%s` of the "
                   "same model, data, settings and seeds | – | no data | – | – | – |\n",
                s->T, t->from, t->exact_from);
    /* the preset's engines in order (said where missing), then the rest */
    for (int p = 0; p <= AX_NPLAN; p++) {
        int found = 0;
        for (int i = 0; i < t->nrows; i++) {
            const td_row *w = &t->rows[i];
            if (w->T == s->T && ax_plan_index(ba_engine_name(w->cfg.engine)) == p &&
                w != s->exact)
                found = 1, train_row(f, w, row_exact(w), mixed, NULL);
        }
        if (!found && p < AX_NPLAN)
            fprintf(f, "| %s | no grid | – | no data | – | no data | – |\n",
                    ba_engine_name(ax_planned[p]));
    }
    /* where the exact runs came from, when not from this directory */
    const td_grid *src[8];
    int ns = 0;
    for (int i = -1; !s->exact && i < t->nrows; i++) {
        const td_grid *g = i < 0 ? s->pool.src : t->rows[i].T == s->T ? t->rows[i].src : NULL;
        int seen = !g;
        for (int k = 0; k < ns; k++)
            seen |= src[k] == g;
        if (!seen && ns < 8)
            src[ns++] = g;
    }
    for (int k = 0; k < ns; k++)
        fprintf(f, "%s`%s`%s", k ? ", " : "\nThe exact-trained runs are those of ", src[k]->name,
                k + 1 < ns ? "" : " (the grids of --exact-from in name order, each seed's "
                                  "first run that pairs).\n");
    fprintf(f, "\n");
}

/* The evaluation table of section s. */
static void eval_table(FILE *f, const ax_train *t, const td_sec *s)
{
    fprintf(f, "### T = %d\n\n", s->T);
    if (!s->exact)
        fprintf(f, "No exact-trained grid at T = %d in `%s`: no data.\n\n", s->T, t->from);
    else if (!s->ev)
        fprintf(f, "`%s` has no engines.json yet: no data (`boltzattn-lab eval-engines --out %s/%s "
                   "--engines mf,tap,bp,hybrid`).\n\n",
                s->exact->x->name, t->from, s->exact->x->name);
    else
        fprintf(f, "From `%s/engines.json`.\n\n", s->exact->x->name), ax_evals_table(f, s->ev);
}

void ax_train_write(FILE *f, const ax_train *t)
{
    fprintf(f,
            "## Training with each engine\n\n"
            "Boltzmann attention trained with each approximate engine, forward and backward "
            "(the gradients of the engine's fixed point), beside the same model trained with "
            "exact inference (the fast engine). val ppl: each run's final evaluation on every "
            "validation window, with the engine it was trained with (an mf-trained model is "
            "scored by mf; the next section scores exact-trained models with each engine). "
            "Runs are paired by seed with exact-trained runs of the same model, data and "
            "training settings: those of the exact grid at that T in `%s` where there is "
            "one, else those of the grids in `%s`. The change is 100 (ppl / ppl_exact - 1) "
            "per seed, its mean over the pairs with a 95 %% Student-t interval (two pairs or "
            "more; n/a otherwise). steps × batch as the grids record them.\n\n",
            t->from, t->exact_from);
    for (int i = 0; i < t->nsec; i++)
        train_table(f, t, &t->sec[i]);
    fprintf(f,
            "## Exact-trained models evaluated with each engine\n\n"
            "The exact-trained models of the grid at each T (their checkpoints) evaluated on "
            "the validation split with their own exact engine and with each approximate "
            "engine (`boltzattn-lab eval-engines --out GRID --engines LIST`, GRID/engines.json): "
            "the couplings as trained, only the inference changed. Per engine and setting, "
            "the mean over runs of the validation perplexity with the engine and with the "
            "model's own engine, the change paired per run (as above), the rows (attention "
            "queries) still unconverged after the library's retry over all rows evaluated, "
            "and the mean sweeps per row. items: evenly spaced validation windows per "
            "evaluation (all: every window).\n\n");
    for (int i = 0; i < t->nsec; i++)
        eval_table(f, t, &t->sec[i]);
    for (int i = 0; i < t->nother; i++) {
        fprintf(f, "### %s, T = %d\n\nFrom `%s/engines.json`.\n\n",
                ba_task_name(t->other_task[i]), t->other_T[i], t->other_name[i]);
        if (t->other_ev[i])
            ax_evals_table(f, t->other_ev[i]);
        else
            fprintf(f, "No entry at T = %d: no data.\n\n", t->other_T[i]);
    }
}
