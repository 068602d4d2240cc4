/* boltzattn-lab cost: what one training step of each arm costs, measured
 * side by side in one process, for the study's equal-compute view.
 *
 * The training time a run records (run.json's train_s) is wall-clock
 * under whatever load the machine had while that run trained: runs of one
 * comparison trained on different machines, beside different neighbours,
 * at different times, and their times differ by as much as the cheap arms
 * differ from each other. Here every arm of the grids is built as its
 * cells are (lab_cell_config, the first seed) and stepped with the
 * library's training step (ba_trainer_step: batch, forward, backward,
 * AdamW) in rounds, cell (T, C, FFN) by cell: each round times a visit of
 * every arm of the cell, starting one arm later than the round before, so
 * a change of load during the measurement falls on every arm alike. A visit is `steps` steps, or more
 * where those would take under `visit_s` seconds by an untimed second
 * step: a visit of a few milliseconds is mostly the scheduler's noise on
 * a busy machine. An arm's cost is the median of its rounds. Evaluations are not timed: equal compute is training
 * compute.
 *
 * Every grid named must train the same model setup (task, T, C, FFN,
 * layers, heads, batch, the task's data sizes): their arms join one table, the first grid's
 * arms first, an arm named by several grids measured once (by label).
 * The table goes to GRID/cost.json (the first grid's), rewritten
 * atomically:
 *
 *   {"format": "boltzattn-cost", "version": 1, "machine": "...",
 *    "threads": N, "steps": S, "visit_s": V, "rounds": R, "grids": [NAME, ...],
 *    "load_1min": [at start, at end],
 *    "entries": [{"arm": LABEL, "T", "C", "ffn", "ms_per_step": median,
 *                 "visit_steps": steps a visit, "rounds_ms": [one per round]},
 *                ...]}
 *
 * and as a table with each arm's ratio to the reference arm on stdout.
 * The report (report_study.c) prices a ladder's runs with the file of a
 * grid of its setup (any budget or learning rate: neither changes what a
 * step costs) that names every arm of the ladder (lab_cost_read,
 * lab_cost_find). */
#include "report.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COST_MAX 256   /* entries: arms x T x C x FFN settings */
#define COST_GRIDS 16  /* grids a measurement joins */
#define COST_ROUNDS 100
#define COST_VISIT_MAX 100000 /* steps a visit at most */

static opt cost_opts[] = {
    {"steps", "N", "3", "timed training steps of each arm in a round, at least (1..1000)", 0,
     0},
    {"visit-s", "S", "1", "seconds a visit should take at least: more steps for fast arms "
     "(0..60)", 0, 0},
    {"rounds", "N", "3", "rounds; each times every arm once (1..100)", 0, 0},
    {"data", "PATH", "$BA_DATA, else data/tinyshakespeare.txt", "charlm: the text", 0, 0},
    {"threads", "N", "idle cores", "OpenMP threads (at most the CPUs); the study's runs use 1",
     0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command cost_cmd = {
    "cost",
    "GRID [MORE_GRID...] [options]\n\n"
    "Times one training step of every arm of GRID (and of each MORE_GRID, which must\n"
    "train the same task, T, C, FFN settings, layers, heads and batch), side by side:\n"
    "two untimed steps each, then --rounds rounds of --steps steps of every arm (more\n"
    "where they would take under --visit-s seconds), each round starting one arm\n"
    "later. Writes the median of each arm's rounds, in ms a\n"
    "step, to GRID/cost.json (rewritten) and prints it with each arm's ratio to the\n"
    "reference arm. The study report's equal-compute tables price runs with it.\n"
    "Trains nothing: no run directory is written.",
    cost_opts};

/* One arm's measurement: which grid and arm it is built from. */
typedef struct {
    const lab_grid *g;
    int arm, T, C, ffn, ti; /* ti: index of T in the grid's data list */
    int visit;              /* steps a visit */
    char label[160];
    ba_trainer *t;
    double ms[COST_ROUNDS];
} cost_entry;

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(const double *v, int n)
{
    double s[COST_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, by_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* The setup a step's cost depends on, other than the arm: NULL when x
 * matches g, else the first field that differs. */
static const char *other_setup(const lab_grid *g, const lab_grid *x)
{
    if (x->task != g->task)
        return "task";
    if (x->nT != g->nT || memcmp(x->T, g->T, (size_t)g->nT * sizeof g->T[0]))
        return "T";
    if (x->nC != g->nC || memcmp(x->C, g->C, (size_t)g->nC * sizeof g->C[0]))
        return "C";
    if (x->nffn != g->nffn || memcmp(x->ffn, g->ffn, (size_t)g->nffn * sizeof g->ffn[0]))
        return "FFN settings";
    if (x->layers != g->layers || x->heads != g->heads)
        return "layers or heads";
    if (x->train.batch != g->train.batch)
        return "batch";
    /* the data of the first grid is every arm's: the task's own sizes */
    if (x->data.kinds != g->data.kinds || x->data.recall_vocab != g->data.recall_vocab ||
        x->data.pairs != g->data.pairs || x->data.max_depth != g->data.max_depth)
        return "data";
    return NULL;
}

/* The entries of every grid: each (ffn, T, C, arm) once by label. 0 or an
 * exit code after printing. */
static int list_entries(const command *c, const lab_grid *gs, int ng, cost_entry *e, int *n)
{
    *n = 0;
    for (int k = 0; k < ng; k++) {
        const lab_grid *g = &gs[k];
        for (int f = 0; f < g->nffn; f++)
            for (int ti = 0; ti < g->nT; ti++)
                for (int ci = 0; ci < g->nC; ci++)
                    for (int a = 0; a < g->narms; a++) {
                        cost_entry x = {g, a, g->T[ti], g->C[ci], g->ffn[f], ti, 0, "", NULL, {0}};
                        lab_arm_label(&g->arms[a], x.label, sizeof x.label);
                        int seen = 0;
                        for (int i = 0; i < *n && !seen; i++)
                            seen = !strcmp(e[i].label, x.label) && e[i].T == x.T &&
                                   e[i].C == x.C && e[i].ffn == x.ffn;
                        if (seen)
                            continue;
                        if (*n == COST_MAX)
                            return usage_error(c, "more than %d arms and settings to time",
                                               COST_MAX);
                        e[(*n)++] = x;
                    }
    }
    return 0;
}

/* Builds entry x's trainer on data: the cell's config, the grid's
 * settings at its first seed, enough steps for the measurement. */
static int build(const command *c, cost_entry *x, const ba_dataset *data, const char *data_path,
                 long need)
{
    char err[BA_ERR_LEN];
    ba_config cfg = lab_cell_config(x->g, x->arm, x->T, x->C, x->ffn);
    ba_config_set_data(&cfg, data);
    ba_train_settings ts = x->g->train;
    ts.seed = x->g->seed0;
    if (ts.steps < need) /* the schedule's length, not the step's cost */
        ts.steps = need;
    int st = ba_trainer_init(&x->t, &cfg, data, data_path, &ts, err);
    return st ? fail_lib(c, err, input_status(st)) : 0;
}

static int step_n(const command *c, cost_entry *x, int n)
{
    char err[BA_ERR_LEN];
    for (int s = 0; s < n; s++)
        if (ba_trainer_step(x->t, NULL, NULL, NULL, err))
            return fail_lib(c, err, 1);
    return 0;
}

static cJSON *entries_json(const cost_entry *e, int n, int rounds)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        cJSON *o = cJSON_CreateObject(), *r = cJSON_CreateDoubleArray(e[i].ms, rounds);
        if (!o || !r || !cJSON_AddStringToObject(o, "arm", e[i].label) ||
            !cJSON_AddNumberToObject(o, "T", e[i].T) || !cJSON_AddNumberToObject(o, "C", e[i].C) ||
            !cJSON_AddNumberToObject(o, "ffn", e[i].ffn) ||
            !cJSON_AddNumberToObject(o, "ms_per_step", median_of(e[i].ms, rounds)) ||
            !cJSON_AddNumberToObject(o, "visit_steps", e[i].visit) ||
            !cJSON_AddItemToObject(o, "rounds_ms", r) || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            cJSON_Delete(r);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* GRID/cost.json from the measured entries. 0 or 1 after printing. */
static int write_cost(const command *c, const char *path, const char *const *names, int ng,
                      const cost_entry *e, int n, int steps, double visit_s, int rounds,
                      const double *load)
{
    char machine[256];
    machine_desc(machine, sizeof machine);
    cJSON *o = cJSON_CreateObject(), *gl = cJSON_CreateArray(),
          *ld = cJSON_CreateDoubleArray(load, 2), *en = entries_json(e, n, rounds);
    int ok = o && gl && ld && en;
    for (int k = 0; ok && k < ng; k++)
        ok = cJSON_AddItemToArray(gl, cJSON_CreateString(names[k]));
    ok = ok && cJSON_AddStringToObject(o, "format", "boltzattn-cost") &&
         cJSON_AddNumberToObject(o, "version", 1) &&
         cJSON_AddStringToObject(o, "machine", machine) &&
         cJSON_AddNumberToObject(o, "threads", threads_in_use()) &&
         cJSON_AddNumberToObject(o, "steps", steps) &&
         cJSON_AddNumberToObject(o, "visit_s", visit_s) &&
         cJSON_AddNumberToObject(o, "rounds", rounds);
    if (ok) {
        cJSON_AddItemToObject(o, "grids", gl);
        cJSON_AddItemToObject(o, "load_1min", ld);
        cJSON_AddItemToObject(o, "entries", en);
        gl = ld = en = NULL;
    }
    char *text = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    cJSON_Delete(gl);
    cJSON_Delete(ld);
    cJSON_Delete(en);
    if (!text)
        return fail_lib(c, "out of memory", 1);
    out_file f;
    int rc = out_open(c, &f);
    if (!rc) {
        fprintf(f.f, "%s\n", text);
        rc = out_close(c, &f, path);
    }
    free(text);
    return rc;
}

static void print_table(const cost_entry *e, int n, int rounds, const char *path)
{
    int ref = lab_softmax_arm(e[0].g);
    char rl[160] = "";
    if (ref >= 0)
        lab_arm_label(&e[0].g->arms[ref], rl, sizeof rl);
    printf("%-40s %6s %5s %4s %12s %10s\n", "arm", "T", "C", "ffn", "ms a step", "ratio");
    for (int i = 0; i < n; i++) {
        double ms = median_of(e[i].ms, rounds), r = NAN;
        for (int j = 0; j < n && *rl; j++)
            if (!strcmp(e[j].label, rl) && e[j].T == e[i].T && e[j].C == e[i].C &&
                e[j].ffn == e[i].ffn)
                r = ms / median_of(e[j].ms, rounds);
        printf("%-40s %6d %5d %4d %12.3f %10.2f\n", e[i].label, e[i].T, e[i].C, e[i].ffn, ms, r);
    }
    printf("(ratio: against %s; written to %s)\n", *rl ? rl : "no reference arm", path);
}

/* Builds the trainer of x on data, takes its two untimed steps (the
 * first for first-touch allocations, the second to size the visits by)
 * and sets its visit. 0 or an exit code after printing. */
static int prepare(const command *c, cost_entry *x, const ba_dataset *data, const char *data_path,
                   int steps, double visit_s, int rounds)
{
    int rc = build(c, x, data, data_path, 1 + (long)COST_VISIT_MAX * rounds);
    if (rc || (rc = step_n(c, x, 1)))
        return rc;
    double t0 = now_s();
    if ((rc = step_n(c, x, 1)))
        return rc;
    double one = now_s() - t0, v = one > 0 ? ceil(visit_s / one) : COST_VISIT_MAX;
    x->visit = v > COST_VISIT_MAX ? COST_VISIT_MAX : v < steps ? steps : (int)v;
    return 0;
}

/* Times the arms of one cell (T, C, FFN) side by side: their trainers
 * live only while their cell is timed, so a grid of many block sizes
 * holds one size's models at a time. The entries of the cell are
 * e[idx[0..m-1]]. 0 or an exit code after printing. */
static int measure_cell(const command *c, cost_entry *e, const int *idx, int m,
                        const ba_dataset *data, const char *data_path, int steps, double visit_s,
                        int rounds)
{
    int rc = 0;
    for (int k = 0; k < m && !rc; k++)
        rc = prepare(c, &e[idx[k]], data, data_path, steps, visit_s, rounds);
    for (int r = 0; r < rounds && !rc; r++)
        for (int k = 0; k < m && !rc; k++) {
            cost_entry *x = &e[idx[(r + k) % m]];
            double t0 = now_s();
            if (!(rc = step_n(c, x, x->visit)))
                x->ms[r] = 1000.0 * (now_s() - t0) / x->visit;
        }
    for (int k = 0; k < m; k++) {
        ba_trainer_free(e[idx[k]].t);
        e[idx[k]].t = NULL;
    }
    return rc;
}

/* Opens each T's dataset and times the entries cell by cell, in the
 * order their cells first appear. 0 or an exit code after printing. */
static int measure(const command *c, const lab_grid *g0, cost_entry *e, int n, int steps,
                   double visit_s, int rounds, const char *data_path)
{
    char err[BA_ERR_LEN];
    ba_dataset *data[LAB_MAX_LIST] = {0};
    int rc = 0, idx[COST_MAX];
    unsigned char done[COST_MAX] = {0};
    for (int ti = 0; ti < g0->nT && !rc; ti++) {
        int st = open_dataset(&g0->data, g0->T[ti], data_path, 0, &data[ti], err);
        if (st)
            rc = fail_lib(c, err, input_status(st));
    }
    for (int i = 0; i < n && !rc; i++) {
        if (done[i])
            continue;
        int m = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && e[j].T == e[i].T && e[j].C == e[i].C && e[j].ffn == e[i].ffn)
                done[j] = 1, idx[m++] = j;
        rc = measure_cell(c, e, idx, m, data[e[i].ti], data_path, steps, visit_s, rounds);
    }
    for (int ti = 0; ti < g0->nT; ti++)
        ba_dataset_free(data[ti]);
    return rc;
}

int cmd_cost(int argc, char **argv)
{
    const command *c = &cost_cmd;
    const char *dirs[COST_GRIDS + 1];
    int nd = 0, steps = 3, rounds = 3;
    double visit_s = 1;
    int rc = parse_args(c, argc, argv, dirs, COST_GRIDS + 1, &nd);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (nd == 0)
        return usage_error(c, "the grid directory GRID is required");
    if (nd > COST_GRIDS)
        return usage_error(c, "at most %d grids", COST_GRIDS);
    if ((is_set(c, "steps") && (rc = get_int(c, "steps", 1, 1000, &steps))) ||
        (is_set(c, "rounds") && (rc = get_int(c, "rounds", 1, COST_ROUNDS, &rounds))) ||
        (is_set(c, "visit-s") && (rc = get_double(c, "visit-s", 0, 60, &visit_s))))
        return rc;
    static lab_grid gs[COST_GRIDS]; /* a lab_grid is large: not on the stack */
    const char *names[COST_GRIDS];
    for (int k = 0; k < nd; k++) {
        if ((rc = lab_grid_read(c, dirs[k], &gs[k])))
            return rc;
        const char *slash = strrchr(dirs[k], '/');
        names[k] = slash && slash[1] ? slash + 1 : dirs[k];
        const char *why = other_setup(&gs[0], &gs[k]);
        if (why)
            return usage_error(c, "%s trains another setup than %s (its %s differs): their "
                                  "steps do not compare", dirs[k], dirs[0], why);
    }
    char path[PATH_LEN];
    if (mkpath(c, path, "%s/cost.json", dirs[0]))
        return 2;
    if ((rc = check_out_file(c, "GRID/cost.json", path, NULL, 0)) || (rc = apply_threads(c)))
        return rc;
    cost_entry *e = calloc(COST_MAX, sizeof *e);
    if (!e)
        return fail_lib(c, "out of memory", 1);
    int n = 0;
    double load[2] = {NAN, NAN};
    if (!(rc = list_entries(c, gs, nd, e, &n))) {
        getloadavg(&load[0], 1);
        rc = measure(c, &gs[0], e, n, steps, visit_s, rounds,
                     is_set(c, "data") ? get_str(c, "data") : NULL);
        getloadavg(&load[1], 1);
    }
    if (!rc && !(rc = write_cost(c, path, names, nd, e, n, steps, visit_s, rounds, load)))
        print_table(e, n, rounds, path);
    free(e);
    return rc;
}

/* ----------------------------------------------------------- reading */

/* What is wrong with an entry of a cost file into why (n bytes): 1, or 0
 * when nothing. */
static int entry_fault(const cJSON *o, char *why, size_t n)
{
    static const char *const ints[] = {"T", "C", "ffn"};
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "arm");
    if (!cJSON_IsString(v) || !*v->valuestring)
        return snprintf(why, n, "arm must be an arm's label"), 1;
    for (int k = 0; k < 3; k++) {
        v = cJSON_GetObjectItemCaseSensitive(o, ints[k]);
        if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble ||
            v->valuedouble < 0)
            return snprintf(why, n, "%s must be a whole number", ints[k]), 1;
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "ms_per_step");
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0)
        return snprintf(why, n, "ms_per_step must be a positive number"), 1;
    return 0;
}

int lab_cost_read(const command *c, const char *grid_dir, cJSON **doc)
{
    char path[PATH_LEN];
    *doc = NULL;
    if (mkpath(c, path, "%s/cost.json", grid_dir))
        return 2;
    char *text = lab_slurp(path);
    if (!text)
        return 0;
    cJSON *d = cJSON_Parse(text);
    free(text);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(d, "format"),
                *ver = cJSON_GetObjectItemCaseSensitive(d, "version"),
                *en = cJSON_GetObjectItemCaseSensitive(d, "entries"),
                *mc = cJSON_GetObjectItemCaseSensitive(d, "machine");
    char m[PATH_LEN + 160];
    if (!d || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "boltzattn-cost") ||
        !cJSON_IsNumber(ver) || ver->valuedouble != 1 || !cJSON_IsArray(en) ||
        !cJSON_IsString(mc)) {
        snprintf(m, sizeof m, "%s: not a cost file of version 1 (format \"boltzattn-cost\", "
                 "a machine and an entries array)", path);
        cJSON_Delete(d);
        return fail_lib(c, m, 2);
    }
    int i = 0;
    for (const cJSON *o = en->child; o; o = o->next, i++) {
        char why[64];
        if (entry_fault(o, why, sizeof why)) {
            snprintf(m, sizeof m, "%s: entries[%d].%s", path, i, why);
            cJSON_Delete(d);
            return fail_lib(c, m, 2);
        }
    }
    *doc = d;
    return 0;
}

int lab_cost_find(const cJSON *doc, const char *label, int T, int C, int ffn, double *ms)
{
    const cJSON *o;
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(doc, "entries"))
    if (!strcmp(cJSON_GetObjectItemCaseSensitive(o, "arm")->valuestring, label) &&
        (int)cJSON_GetObjectItemCaseSensitive(o, "T")->valuedouble == T &&
        (int)cJSON_GetObjectItemCaseSensitive(o, "C")->valuedouble == C &&
        (int)cJSON_GetObjectItemCaseSensitive(o, "ffn")->valuedouble == ffn) {
        *ms = cJSON_GetObjectItemCaseSensitive(o, "ms_per_step")->valuedouble;
        return 1;
    }
    return 0;
}
