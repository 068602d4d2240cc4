/* boltzattn-lab eval-engines: a grid's Ising models evaluated with other
 * engines. Each finished run whose attention is boltzmann or coupling
 * (exact inference: a sampled run's attention is its sampler's, not an
 * engine's, and it is left out with a note) is evaluated on the
 * validation split with its own engine and with each engine of the list
 * (ba_model_set_engine: the couplings as trained, the inference another),
 * into GRID/engines.json:
 *
 *   {"format": "boltzattn-engine-eval", "version": 1, "entries": [
 *     {"run": NAME, "variant": LABEL, "attn", "couplings", "band",
 *      "field_bias", "pos_emb", "T", "C", "ffn", "seed", "steps",
 *      "engine": NAME, "window": W (hybrid; 0 for the others),
 *      "approx": {"damping", "tol", "max_iter"} (null for an exact engine),
 *      "items": N (0: every item), "batch": B,
 *      "status": "done" | "refused",
 *      "reason": why the model cannot run on the engine (refused),
 *      "own_engine": the engine the model was trained with,
 *      "own": {"val_loss", "val_ppl", "val_acc", "items", "targets"},
 *      "with": {the same with the engine},
 *      "stats": {"rows", "sweeps_mean", "sweeps_max", "retried",
 *                "unconverged"} of the approximate engine's iterations
 *               over that evaluation (ba_model_approx_stats_take; zeros
 *               for an exact engine),
 *      "own_stats": {the same} when the own engine is approximate} ...]}
 *
 * An entry is keyed by (run, engine, window, approx, items) and never
 * redone; the file's handling (resuming, the atomic rewrite after every
 * entry, the grid directory's lock, runs without a checkpoint skipped
 * with a note) is grid_eval.c's, shared with ablate --extrapolate. Whether the
 * model can run on an engine is judged by the library on the run's
 * config, so a clone without checkpoints records the same refusals. */
#include "grid.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* What the runs are evaluated with. */
typedef struct {
    const ba_engine *eng;
    int ne;
    ba_approx ap;
    int window; /* hybrid's; 0: the default for the run's T */
    int items, B;
    const char *data_path;
} eopts;

/* One run's evaluation: its model (loaded when first needed) and its own
 * engine's result (evaluated when first needed). */
typedef struct {
    ba_model *m;
    ba_data_spec spec;
    ba_engine own_engine; /* the checkpoint's (the model's is switched) */
    int loaded, no_ckpt, has_own;
    ba_eval_result own;
    ba_approx_stats own_stats;
} run_state;

static int is_ising(ba_attn a)
{
    return a == BA_ATTN_BOLTZMANN || a == BA_ATTN_COUPLING;
}

/* Hybrid's window for a run of block size T: the one given, else 8, or
 * T - 1 where T <= 8 (train's default). */
static int window_for(const eopts *o, ba_engine e, int T)
{
    if (e != BA_ENGINE_HYBRID)
        return 0;
    if (o->window > 0)
        return o->window;
    return T - 1 < 8 ? (T > 1 ? T - 1 : 1) : 8;
}

/* The entry's head: the run's keys and the evaluation's. */
static cJSON *entry_head(const lab_run *r, const eopts *o, ba_engine e, int B)
{
    cJSON *h = lab_eval_head(r), *ap = NULL;
    int ok = h && cJSON_AddStringToObject(h, "engine", ba_engine_name(e)) &&
             cJSON_AddNumberToObject(h, "window", window_for(o, e, r->T));
    if (ok && ba_engine_is_approx(e))
        ok = (ap = cJSON_AddObjectToObject(h, "approx")) &&
             cJSON_AddNumberToObject(ap, "damping", o->ap.damping) &&
             cJSON_AddNumberToObject(ap, "tol", o->ap.tol) &&
             cJSON_AddNumberToObject(ap, "max_iter", o->ap.max_iter);
    else if (ok)
        ok = cJSON_AddNullToObject(h, "approx") != NULL;
    ok = ok && cJSON_AddNumberToObject(h, "items", o->items) &&
         cJSON_AddNumberToObject(h, "batch", B);
    if (!ok) {
        cJSON_Delete(h);
        return NULL;
    }
    return h;
}

static int add_stats(cJSON *e, const char *key, const ba_approx_stats *a)
{
    cJSON *s = cJSON_AddObjectToObject(e, key);
    return s && cJSON_AddNumberToObject(s, "rows", (double)a->queries) &&
           cJSON_AddNumberToObject(s, "sweeps_mean",
                                   a->queries ? (double)a->sweeps / (double)a->queries : 0.0) &&
           cJSON_AddNumberToObject(s, "sweeps_max", a->max_sweeps) &&
           cJSON_AddNumberToObject(s, "retried", (double)a->retried) &&
           cJSON_AddNumberToObject(s, "unconverged", (double)a->unconverged);
}

/* Why the run's model cannot run on engine e (into why), judged by the
 * library on its config with the engine switched, as ba_model_set_engine
 * judges it: 1 refused, 0 it can. */
static int refusal(const lab_run *r, const eopts *o, ba_engine e, char *why)
{
    ba_config cfg = r->info.config;
    cfg.engine = e;
    cfg.approx = ba_engine_is_approx(e) ? o->ap : ba_approx_default();
    cfg.window = window_for(o, e, r->T);
    cfg.band_f32 = ba_config_engine(&cfg) == BA_ENGINE_BAND ? cfg.band_f32 : 0;
    return ba_config_validate(&cfg, why) != BA_OK;
}

/* The text a run is evaluated on: the one given, else its own. */
static const char *data_of(const lab_run *r, const eopts *o)
{
    return o->data_path ? o->data_path : r->info.data_path ? r->info.data_path
                                                           : default_data_path();
}

/* The run's model and its own engine's result, once. 1 ready;
 * 0 no checkpoint (noted once, each entry skipped); -code on failure. */
static int ready(const command *c, const lab_run *r, const eopts *o, int B, lab_eval_file *f,
                 run_state *s)
{
    char err[BA_ERR_LEN], ckpt[PATH_LEN];
    if (s->no_ckpt) {
        f->skipped++;
        return 0;
    }
    if (!s->loaded) {
        int have = lab_eval_ckpt(c, r, f, ckpt);
        if (have <= 0) {
            s->no_ckpt = have == 0;
            return have;
        }
        int st = ba_checkpoint_load(ckpt, &s->m, &s->spec, err);
        if (st)
            return -fail_lib(c, err, input_status(st));
        s->loaded = 1;
        s->own_engine = ba_config_engine(ba_model_config(s->m));
    }
    if (!s->has_own) {
        /* a long model's evaluation can take minutes: say what is under way */
        fprintf(stderr, "%s: evaluating with its own engine (%s) ...\n", r->name,
                ba_engine_name(s->own_engine));
        ba_model_approx_stats_take(s->m);
        int code = lab_eval_data(c, s->m, &s->spec, r->T, data_of(r, o), o->items, B, &s->own);
        if (code)
            return -code;
        s->own_stats = ba_model_approx_stats_take(s->m);
        s->has_own = 1;
    }
    return 1;
}

/* The model on engine e evaluated into entry e. */
static int evaluate(const command *c, const lab_run *r, const eopts *o, int B, ba_engine eng,
                    run_state *s, cJSON *e)
{
    char err[BA_ERR_LEN];
    ba_engine own_e = s->own_engine;
    int st = ba_model_set_engine(s->m, eng, ba_engine_is_approx(eng) ? &o->ap : NULL,
                                 window_for(o, eng, r->T), err);
    if (st)
        return fail_lib(c, err, input_status(st));
    fprintf(stderr, "%s: evaluating with %s ...\n", r->name, ba_engine_name(eng));
    ba_eval_result res;
    ba_model_approx_stats_take(s->m);
    int code = lab_eval_data(c, s->m, &s->spec, r->T, data_of(r, o), o->items, B, &res);
    if (code)
        return code;
    ba_approx_stats a = ba_model_approx_stats_take(s->m);
    if (!cJSON_AddStringToObject(e, "status", "done") ||
        !cJSON_AddStringToObject(e, "own_engine", ba_engine_name(own_e)) ||
        !lab_eval_add_result(e, "own", &s->own) || !lab_eval_add_result(e, "with", &res) ||
        !add_stats(e, "stats", &a) ||
        (ba_engine_is_approx(own_e) && !add_stats(e, "own_stats", &s->own_stats)))
        return fail_lib(c, "out of memory", 1);
    printf("%s: val_ppl %.4f with %s, %.4f with its own %s (%d items)", r->name, res.ppl,
           ba_engine_name(eng), s->own.ppl, ba_engine_name(own_e), res.n_items);
    if (ba_engine_is_approx(eng))
        printf("; %ld rows, %.1f sweeps on average (at most %d), %ld retried, %ld unconverged",
               a.queries, a.queries ? (double)a.sweeps / a.queries : 0.0, a.max_sweeps,
               a.retried, a.unconverged);
    printf("\n");
    return 0;
}

/* One engine on one run: kept, refused, skipped or evaluated. */
static int one_engine(const command *c, const lab_run *r, const eopts *o, int B, ba_engine eng,
                      lab_eval_file *f, run_state *s)
{
    cJSON *e = entry_head(r, o, eng, B);
    if (!e)
        return fail_lib(c, "out of memory", 1);
    if (lab_eval_find(f, e)) {
        cJSON_Delete(e);
        f->kept++;
        return 0;
    }
    char why[BA_ERR_LEN];
    int refused = refusal(r, o, eng, why), code = 0;
    if (refused) {
        if (!cJSON_AddStringToObject(e, "status", "refused") ||
            !cJSON_AddStringToObject(e, "reason", why))
            code = fail_lib(c, "out of memory", 1);
        else
            printf("%s: refused with %s: %s\n", r->name, ba_engine_name(eng), why);
    } else {
        int rd = ready(c, r, o, B, f, s);
        if (rd <= 0) {
            cJSON_Delete(e);
            return -rd;
        }
        code = evaluate(c, r, o, B, eng, s, e);
    }
    if (code) {
        cJSON_Delete(e);
        return code;
    }
    return lab_eval_add(c, f, e, refused);
}

static int one_run(const command *c, const lab_grid *g, const lab_run *r, lab_eval_file *f,
                   void *user)
{
    const eopts *o = user;
    if (!is_ising(r->attn))
        return 0;
    if (r->sampler != BA_SAMPLER_EXACT) {
        fprintf(stderr, "%s: sampled attention (the %s sampler's, not an engine's): left out\n",
                r->name, ba_sampler_name(r->sampler));
        return 0;
    }
    int B = o->B > 0 ? o->B : g->train.batch, code = 0;
    run_state s;
    memset(&s, 0, sizeof s);
    for (int k = 0; k < o->ne && !code; k++)
        code = one_engine(c, r, o, B, o->eng[k], f, &s);
    ba_model_free(s.m);
    return code;
}

static const char *const ekeys[] = {"engine", "window", "approx", "items", NULL};

/* The grid in dir evaluated as o says. */
static int eval_grid(const command *c, const char *dir, const eopts *o)
{
    lab_grid g;
    int code = lab_grid_read(c, dir, &g), any = 0;
    if (code)
        return code;
    for (int a = 0; a < g.narms; a++)
        any |= is_ising(g.arms[a].attn) && !lab_arm_sampled(&g.arms[a]);
    if (!any) {
        printf("%s: no boltzmann or coupling arm with exact inference: nothing to evaluate "
               "with other engines\n",
               dir);
        return 0;
    }
    lab_eval_mode m = {"engines.json", "boltzattn-engine-eval", "engine evaluation", ekeys,
                       one_run, (void *)o, 0};
    lab_eval_file f;
    code = lab_eval_grid(c, dir, &g, &m, &f);
    if (!code && !f.busy) {
        char list[128] = "";
        for (int k = 0; k < o->ne; k++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%s", k ? ", " : "",
                     ba_engine_name(o->eng[k]));
        }
        printf("engine evaluation (%s): %d evaluated, %d refused, %d kept, %d skipped "
               "(no checkpoint)%s%s\n",
               list, f.done, f.refused, f.kept, f.skipped, f.changed ? "; wrote " : "",
               f.changed ? f.path : "");
    }
    return code;
}

/* --engines LIST: engine names (ba_engine_parse), none empty or twice. */
static int engine_list(const command *c, ba_engine *eng, int max, int *n)
{
    char list[256], err[BA_ERR_LEN];
    const char *v = get_str(c, "engines");
    *n = 0;
    if (snprintf(list, sizeof list, "%s", v) >= (int)sizeof list)
        return usage_error(c, "--engines: list too long");
    for (char *p = list, *comma = list; comma; p = comma + 1) {
        if ((comma = strchr(p, ',')))
            *comma = '\0';
        if (!*p)
            return usage_error(c, "--engines: '%s' has an empty item", v);
        if (*n == max)
            return usage_error(c, "--engines: at most %d engines", max);
        if (ba_engine_parse(p, &eng[*n], err))
            return usage_error(c, "--engines: %s", err);
        for (int i = 0; i < *n; i++)
            if (eng[i] == eng[*n])
                return usage_error(c, "--engines: '%s' is listed twice", p);
        (*n)++;
    }
    return 0;
}

static opt eval_engines_opts[] = {
    {"out", "DIR", NULL, "the grid directory (its grid.json and runs; required)", 0, 0},
    {"engines", "LIST", NULL,
     "the engines to evaluate each boltzmann/coupling run with, e.g. mf,tap,bp,hybrid "
     "(required)", 0, 0},
    {"items", "N", "0 (all)", "evenly spaced validation items per evaluation", 0, 0},
    {"batch", "N", "the grid's", "sequences per batch of the evaluations", 0, 0},
    {"data", "PATH", "each run's", "charlm: the text", 0, 0},
    {"window", "W", "8, or T - 1 where T <= 8", "hybrid engine: its exact window", 0, 0},
    {"damping", "X", "0.5", "approximate engines: share of the new iterate, in (0, 1]", 0, 0},
    {"tol", "X", "1e-8", "approximate engines: stop when max |step| < X (0 < X < 1)", 0, 0},
    {"max-iter", "N", "1000", "approximate engines: sweeps per query before the retry", 0, 0},
    {"threads", "N", "idle cores", "OpenMP threads (at most the CPUs)", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command eval_engines_cmd = {
    "eval-engines",
    "--out GRID --engines LIST [options]\n\n"
    "Evaluates the finished boltzmann/coupling runs of the grid in GRID with their own\n"
    "engine and with each engine of LIST into GRID/engines.json (entries already there\n"
    "are kept; an engine a model cannot run on is recorded with the reason; a run\n"
    "without its checkpoint is skipped with a note).",
    eval_engines_opts};

int cmd_eval_engines(int argc, char **argv)
{
    const command *c = &eval_engines_cmd;
    int rc = parse_args(c, argc, argv, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!get_str(c, "engines"))
        return usage_error(c, "option '--engines' is required");
    return lab_eval_engines(c);
}

int lab_eval_engines(const command *c)
{
    const char *dir = get_str(c, "out");
    ba_engine eng[8], approx_e = BA_ENGINE_AUTO;
    eopts o = {eng, 0, ba_approx_default(), 0, 0, 0, NULL};
    int rc, hybrid = 0;
    if (!dir || !*dir)
        return usage_error(c, "option '--out' is required");
    if ((rc = engine_list(c, eng, 8, &o.ne)))
        return rc;
    for (int k = 0; k < o.ne; k++) {
        hybrid |= eng[k] == BA_ENGINE_HYBRID;
        if (ba_engine_is_approx(eng[k]))
            approx_e = eng[k];
    }
    /* the engines' options set the engines of the list: each is refused
     * where the list has none it applies to, so nothing is ignored */
    if (is_set(c, "window") && !hybrid)
        return usage_error(c, "--window is the hybrid engine's window, and --engines "
                              "does not list hybrid");
    static const char *const iter[] = {"damping", "tol", "max-iter"};
    for (int i = 0; i < 3; i++)
        if (is_set(c, iter[i]) && approx_e == BA_ENGINE_AUTO)
            return usage_error(c, "--%s applies to the approximate engines (mf, tap, bp, "
                                  "hybrid), and --engines lists none",
                               iter[i]);
    if ((approx_e != BA_ENGINE_AUTO &&
         (rc = parse_approx_opts(c, hybrid ? BA_ENGINE_HYBRID : approx_e, &o.ap, 0, &o.ap,
                                 &o.window))) ||
        (is_set(c, "items") && (rc = get_int(c, "items", 0, INT_MAX, &o.items))) ||
        (is_set(c, "batch") && (rc = get_int(c, "batch", 1, 1 << 20, &o.B))) ||
        (rc = apply_threads(c)))
        return rc;
    o.data_path = is_set(c, "data") ? get_str(c, "data") : NULL;
    return eval_grid(c, dir, &o);
}
