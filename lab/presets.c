/* lab/presets.json read and checked at the boundary: the whole file is
 * validated when it is loaded, so plan and report work on a document
 * whose every key they use is known to be there and of the right kind. A
 * problem is reported with the file and the key's path
 * ("presets.full.grids[2].embd: ...") and refused with exit code 2. */
#include "presets.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#ifndef BA_PRESETS_FILE
#define BA_PRESETS_FILE "lab/presets.json"
#endif

/* The keys a grid may hold beside the `ablate` options: its name, its
 * base (a set of options of the preset's "bases"), a comment, and what
 * follows its training (plan.c; "seeds_if_unresolved": the seeds it takes
 * where a claim it answers is unresolved on its own; "if_unsettled": the
 * grid of the rung below, where a claim must not have settled; "cost":
 * the grids whose arms' step costs are timed side by side once this one
 * is trained, the first receiving cost.json). */
static const char *const grid_meta[] = {"name",           "base",        "about",
                                        "if_listed",      "couplings_arms", "extrapolate",
                                        "eval_engines",   "seeds_if_unresolved", "if_unsettled",
                                        "cost",           NULL};
/* The `ablate` options a plan may set (underscores for dashes). */
static const char *const ablate_keys[] = {
    "task",   "attn",     "arm",      "T",        "embd",      "seeds",      "seed0",
    "no_ffn_too", "no_ffn", "steps",  "batch",    "lr",        "eval_every", "eval_items",
    "log_every", "data",  "threads",  "engine",   "layers",    "heads",      "share_from",
    "sampler", "shots",   "sa_sweeps", "warmup",  "weight_decay", "clip",   "window",
    "damping", "tol",     "max_iter", "kinds",    "heldout",   "data_seed",  "recall_vocab",
    "pairs",  "init_std", NULL};
static const char *const extrap_keys[] = {"extrapolate", "extrapolate_items", "batch", "data",
                                          "threads", NULL};

typedef struct {
    const command *c;
    const char *path;
    const cJSON *params; /* the global parameters */
    const cJSON *local;  /* the preset's (may be NULL) */
} checker;

__attribute__((format(printf, 3, 4))) static int bad(const checker *k, const char *at,
                                                     const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s %s: %s: %s: %s\n", prog, k->c->cmd, k->path, at, msg);
    return EXIT_USAGE;
}

static int in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return 1;
    return 0;
}

int lab_preset_meta_key(const char *key)
{
    return in_list(grid_meta, key);
}

int lab_param_ref(const char *s, char *name, size_t n, long *div)
{
    size_t l = strcspn(s + 1, "/");
    if (l == 0 || l >= n)
        return -1;
    memcpy(name, s + 1, l), name[l] = '\0';
    *div = 1;
    if (s[1 + l] == '/') {
        char *end;
        *div = strtol(s + 2 + l, &end, 10);
        if (*end || *div < 1)
            return -2;
    }
    return 0;
}

long lab_param_divide(long v, long div)
{
    long q = v / div;
    return q > 0 ? q : 1;
}

/* A parameter reference "$NAME" or "$NAME/K": the parameter must exist. */
static int check_ref(const checker *k, const char *at, const char *s)
{
    char name[64];
    long div;
    int rc = lab_param_ref(s, name, sizeof name, &div);
    if (rc == -1)
        return bad(k, at, "'%s' is not a parameter reference ($NAME or $NAME/K)", s);
    if (!cJSON_GetObjectItemCaseSensitive(k->params, name) &&
        !(k->local && cJSON_GetObjectItemCaseSensitive(k->local, name)))
        return bad(k, at, "'%s' names no parameter (\"params\" of the file or the preset)", s);
    if (rc == -2)
        return bad(k, at, "'%s': the divisor must be a positive integer", s);
    return 0;
}

/* A value of an option: a number, a string (a reference when it starts
 * with '$'), true (a flag), or a non-empty list of numbers and strings. */
static int check_value(const checker *k, const char *at, const cJSON *v)
{
    if (cJSON_IsTrue(v))
        return 0;
    if (cJSON_IsNumber(v))
        return v->valuedouble == (double)(long)v->valuedouble
                   ? 0
                   : bad(k, at, "a number must be an integer (write a decimal as a string)");
    if (cJSON_IsString(v))
        return v->valuestring[0] == '$' ? check_ref(k, at, v->valuestring) : 0;
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0) {
        const cJSON *e;
        cJSON_ArrayForEach(e, v)
        {
            if (cJSON_IsArray(e) || cJSON_IsObject(e) || cJSON_IsBool(e))
                return bad(k, at, "a list holds numbers and strings only");
            int rc = check_value(k, at, e);
            if (rc)
                return rc;
        }
        return 0;
    }
    return bad(k, at, "must be a number, a string, true or a non-empty list");
}

/* The options object o: every key one of keys (or of meta), each value
 * valid. */
static int check_opts(const checker *k, const char *at, const cJSON *o, const char *const *keys,
                      const char *const *meta)
{
    if (!cJSON_IsObject(o))
        return bad(k, at, "must be an object");
    const cJSON *v;
    cJSON_ArrayForEach(v, o)
    {
        char where[256];
        snprintf(where, sizeof where, "%.150s.%.90s", at, v->string);
        if (meta && in_list(meta, v->string)) {
            if (strcmp(v->string, "extrapolate") == 0) {
                int rc = check_opts(k, where, v, extrap_keys, NULL);
                if (rc)
                    return rc;
            } else if (strcmp(v->string, "about") == 0 || strcmp(v->string, "name") == 0 ||
                       strcmp(v->string, "base") == 0 || strcmp(v->string, "if_listed") == 0 ||
                       strcmp(v->string, "if_unsettled") == 0) {
                if (!cJSON_IsString(v) || !*v->valuestring)
                    return bad(k, where, "must be a non-empty string");
            } else {
                int rc = check_value(k, where, v);
                if (rc)
                    return rc;
            }
            continue;
        }
        if (!in_list(keys, v->string))
            return bad(k, where, "unknown key '%s' (not an option a plan may set)", v->string);
        int rc = check_value(k, where, v);
        if (rc)
            return rc;
    }
    return 0;
}

/* "params": NAME -> {"default": number or string, "min": integer,
 * "summary_default", "empty_ok", "about"}. */
static int check_params(const checker *k, const char *at, const cJSON *ps)
{
    if (!cJSON_IsObject(ps))
        return bad(k, at, "must be an object");
    const cJSON *p;
    cJSON_ArrayForEach(p, ps)
    {
        char where[256];
        snprintf(where, sizeof where, "%.150s.%.90s", at, p->string);
        if (!cJSON_IsObject(p))
            return bad(k, where, "must be an object with a \"default\"");
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(p, "default"), *e;
        if (!d || !(cJSON_IsNumber(d) || cJSON_IsString(d)))
            return bad(k, where, "\"default\" is missing or not a number or string");
        cJSON_ArrayForEach(e, p)
        {
            static const char *const keys[] = {"default", "min", "summary_default",
                                               "empty_ok", "about", NULL};
            if (!in_list(keys, e->string))
                return bad(k, where, "unknown key '%s'", e->string);
        }
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(p, "min");
        if (m && (!cJSON_IsNumber(m) || !cJSON_IsNumber(d) || d->valuedouble < m->valuedouble))
            return bad(k, where, "\"min\" needs a numeric default at least as large");
    }
    return 0;
}

static const cJSON *names_item(const checker *k, const char *at, const cJSON *list,
                               const cJSON *grids, int *rc)
{
    const cJSON *e;
    *rc = 0;
    if (!cJSON_IsArray(list)) {
        *rc = bad(k, at, "must be a list of grid names");
        return NULL;
    }
    cJSON_ArrayForEach(e, list)
    {
        const cJSON *g;
        int found = 0;
        if (!cJSON_IsString(e)) {
            *rc = bad(k, at, "must be a list of grid names");
            return NULL;
        }
        cJSON_ArrayForEach(g, grids)
        {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(g, "name");
            found |= cJSON_IsString(n) && strcmp(n->valuestring, e->valuestring) == 0;
        }
        if (!found && grids) {
            *rc = bad(k, at, "'%s' is not a grid of the preset", e->valuestring);
            return NULL;
        }
    }
    return list;
}

static int check_grids(const checker *k, const char *at, const cJSON *pr)
{
    const cJSON *grids = cJSON_GetObjectItemCaseSensitive(pr, "grids"), *g;
    const cJSON *bases = cJSON_GetObjectItemCaseSensitive(pr, "bases"), *b;
    char where[256];
    if (bases) {
        snprintf(where, sizeof where, "%.150s.bases", at);
        if (!cJSON_IsObject(bases))
            return bad(k, where, "must be an object");
        cJSON_ArrayForEach(b, bases)
        {
            char w2[300];
            snprintf(w2, sizeof w2, "%.150s.%.90s", where, b->string);
            int rc = check_opts(k, w2, b, ablate_keys, NULL);
            if (rc)
                return rc;
        }
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(pr, "defaults");
    snprintf(where, sizeof where, "%.150s.defaults", at);
    int rc = d ? check_opts(k, where, d, ablate_keys, NULL) : 0;
    if (rc)
        return rc;
    snprintf(where, sizeof where, "%.150s.grids", at);
    if (!cJSON_IsArray(grids) || cJSON_GetArraySize(grids) == 0)
        return bad(k, where, "is missing or not a non-empty list");
    int i = 0;
    cJSON_ArrayForEach(g, grids)
    {
        snprintf(where, sizeof where, "%.150s.grids[%d]", at, i++);
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(g, "name");
        const cJSON *base = cJSON_GetObjectItemCaseSensitive(g, "base");
        if (!cJSON_IsString(n) || !*n->valuestring || strchr(n->valuestring, '/') ||
            strchr(n->valuestring, ' '))
            return bad(k, where, "\"name\" is missing or not a directory name");
        if ((rc = check_opts(k, where, g, ablate_keys, grid_meta)))
            return rc;
        if (base && !cJSON_GetObjectItemCaseSensitive(bases, base->valuestring))
            return bad(k, where, "\"base\" '%s' is not one of the preset's \"bases\"",
                       base->valuestring);
    }
    static const char *const lists[] = {"order", NULL};
    for (int j = 0; lists[j]; j++) {
        snprintf(where, sizeof where, "%.150s.%.50s", at, lists[j]);
        names_item(k, where, cJSON_GetObjectItemCaseSensitive(pr, lists[j]), grids, &rc);
        if (rc)
            return rc;
    }
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(pr, "chains"), *e;
    snprintf(where, sizeof where, "%.150s.chains", at);
    if (ch && (!cJSON_IsArray(ch) || cJSON_GetArraySize(ch) != 2))
        return bad(k, where, "must be a list of two chains (JOBS=2)");
    cJSON_ArrayForEach(e, ch)
    {
        names_item(k, where, e, grids, &rc);
        if (rc)
            return rc;
    }
    const cJSON *af = cJSON_GetObjectItemCaseSensitive(pr, "after");
    snprintf(where, sizeof where, "%.150s.after", at);
    if (af && !cJSON_IsArray(af))
        return bad(k, where, "must be a list of steps");
    cJSON_ArrayForEach(e, af)
    {
        const cJSON *x = e->child;
        int ok = cJSON_IsObject(e) && x && cJSON_IsString(x) &&
                 (strcmp(x->string, "grid") == 0 || strcmp(x->string, "extrapolate") == 0 ||
                  strcmp(x->string, "measure") == 0);
        if (!ok)
            return bad(k, where, "a step is {\"grid\"|\"extrapolate\"|\"measure\": GRID, ...}");
        cJSON *one = cJSON_CreateStringReference(x->valuestring), *l = cJSON_CreateArray();
        if (!one || !l || !cJSON_AddItemToArray(l, one)) {
            cJSON_Delete(one);
            cJSON_Delete(l);
            return fail_lib(k->c, "out of memory", 1);
        }
        names_item(k, where, l, grids, &rc);
        cJSON_Delete(l);
        if (rc)
            return rc;
    }
    return 0;
}

static int check_report(const checker *k, const char *at, const cJSON *pr)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(pr, "report"), *e;
    const cJSON *grids = cJSON_GetObjectItemCaseSensitive(pr, "grids");
    char where[256];
    snprintf(where, sizeof where, "%.150s.report", at);
    if (!r)
        return bad(k, where, "is missing (null: the preset has no report)");
    if (cJSON_IsNull(r))
        return 0;
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "sections");
    static const char *const kinds[] = {"plain", "full", "long", "converged", "study", NULL};
    static const char *const lists[] = {"paper_grids", "budget_grids", "ladder_grids",
                                        "width_grids", "grids", NULL};
    if (!cJSON_IsString(s) || !in_list(kinds, s->valuestring))
        return bad(k, where, "\"sections\" must be plain, full, long, converged or study");
    cJSON_ArrayForEach(e, r)
    {
        char w2[300];
        int rc = 0;
        snprintf(w2, sizeof w2, "%.150s.%.90s", where, e->string);
        if (strcmp(e->string, "sections") == 0)
            continue;
        if (strcmp(e->string, "couplings_grid") == 0 || strcmp(e->string, "saturation_grid") == 0) {
            cJSON *l = cJSON_CreateArray(), *one = cJSON_CreateStringReference(
                                                    cJSON_IsString(e) ? e->valuestring : "");
            if (!l || !one || !cJSON_AddItemToArray(l, one)) {
                cJSON_Delete(one);
                cJSON_Delete(l);
                return fail_lib(k->c, "out of memory", 1);
            }
            names_item(k, w2, l, grids, &rc);
            cJSON_Delete(l);
        } else if (strcmp(e->string, "headline_rows") == 0) {
            const cJSON *x;
            if (!cJSON_IsArray(e))
                return bad(k, w2, "must be a list of {grid, T, ffn}");
            cJSON_ArrayForEach(x, e)
            {
                const cJSON *gr = cJSON_GetObjectItemCaseSensitive(x, "grid");
                const cJSON *T = cJSON_GetObjectItemCaseSensitive(x, "T");
                const cJSON *f = cJSON_GetObjectItemCaseSensitive(x, "ffn");
                if (!cJSON_IsString(gr) || !cJSON_IsNumber(T) || !cJSON_IsBool(f))
                    return bad(k, w2, "a row is {\"grid\": NAME, \"T\": N, \"ffn\": true|false}");
            }
        } else if (in_list(lists, e->string)) {
            names_item(k, w2, e, grids, &rc);
        } else {
            return bad(k, w2, "unknown key '%s'", e->string);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static int check_preset(checker *k, const cJSON *pr)
{
    char at[128];
    snprintf(at, sizeof at, "presets.%.100s", pr->string);
    if (!cJSON_IsObject(pr))
        return bad(k, at, "must be an object");
    const cJSON *e;
    cJSON_ArrayForEach(e, pr)
    {
        static const char *const keys[] = {"about", "params", "defaults", "bases", "grids",
                                           "order", "chains", "after", "couplings_arms",
                                           "report", NULL};
        if (!in_list(keys, e->string))
            return bad(k, at, "unknown key '%s'", e->string);
    }
    k->local = cJSON_GetObjectItemCaseSensitive(pr, "params");
    char where[160];
    snprintf(where, sizeof where, "%.150s.params", at);
    int rc = k->local ? check_params(k, where, k->local) : 0;
    if (!rc && !cJSON_GetObjectItemCaseSensitive(pr, "order"))
        rc = bad(k, at, "\"order\" is missing");
    if (!rc)
        rc = check_grids(k, at, pr);
    const cJSON *ca = cJSON_GetObjectItemCaseSensitive(pr, "couplings_arms");
    snprintf(where, sizeof where, "%.150s.couplings_arms", at);
    if (!rc && ca)
        rc = check_value(k, where, ca);
    if (!rc)
        rc = check_report(k, at, pr);
    k->local = NULL;
    return rc;
}

static int load_refs(checker *k, const cJSON *paper, lab_refs *r)
{
    const cJSON *ef = cJSON_GetObjectItemCaseSensitive(paper, "effects"), *e;
    const cJSON *sg = cJSON_GetObjectItemCaseSensitive(paper, "coupling_sign");
    if (!cJSON_IsArray(ef))
        return bad(k, "paper.effects", "is missing or not a list");
    r->v = calloc((size_t)cJSON_GetArraySize(ef) + 1, sizeof *r->v);
    if (!r->v)
        return fail_lib(k->c, "out of memory", 1);
    cJSON_ArrayForEach(e, ef)
    {
        char at[64], err[BA_ERR_LEN];
        snprintf(at, sizeof at, "paper.effects[%d]", r->n);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "task");
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "attn");
        const cJSON *T = cJSON_GetObjectItemCaseSensitive(e, "T");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "ffn");
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(e, "text");
        lab_ref *ref = &r->v[r->n];
        if (!cJSON_IsString(t) || ba_task_parse(t->valuestring, &ref->task, err))
            return bad(k, at, "\"task\" is missing or not a task");
        if (!cJSON_IsString(a) || ba_attn_parse(a->valuestring, &ref->attn, err))
            return bad(k, at, "\"attn\" is missing or not an attention variant");
        if (!cJSON_IsNumber(T) || T->valueint < 1)
            return bad(k, at, "\"T\" is missing or not a positive integer");
        if (f && !cJSON_IsBool(f))
            return bad(k, at, "\"ffn\" must be true or false (absent: either)");
        if (!cJSON_IsString(x) || !*x->valuestring)
            return bad(k, at, "\"text\" is missing or empty");
        ref->T = T->valueint, ref->ffn = f ? cJSON_IsTrue(f) : -1, ref->text = x->valuestring;
        r->n++;
    }
    const cJSON *pos = cJSON_GetObjectItemCaseSensitive(sg, "positive");
    const cJSON *neg = cJSON_GetObjectItemCaseSensitive(sg, "negative_from");
    if (!cJSON_IsArray(pos) || cJSON_GetArraySize(pos) != 2 ||
        !cJSON_IsNumber(cJSON_GetArrayItem(pos, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(pos, 1)))
        return bad(k, "paper.coupling_sign.positive", "must be [first, last] key distances");
    if (!cJSON_IsNumber(neg))
        return bad(k, "paper.coupling_sign.negative_from", "must be a key distance");
    r->pos_lo = cJSON_GetArrayItem(pos, 0)->valueint;
    r->pos_hi = cJSON_GetArrayItem(pos, 1)->valueint;
    r->neg_from = neg->valueint;
    return 0;
}

static int check_doc(checker *k, const cJSON *doc, lab_refs *refs)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, "format");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, "version");
    if (!cJSON_IsString(f) || strcmp(f->valuestring, "boltzattn-presets") != 0)
        return bad(k, "format", "must be \"boltzattn-presets\"");
    if (!cJSON_IsNumber(v) || v->valueint != 1)
        return bad(k, "version", "must be 1");
    k->params = cJSON_GetObjectItemCaseSensitive(doc, "params");
    int rc = check_params(k, "params", k->params);
    if (rc)
        return rc;
    const cJSON *fig = cJSON_GetObjectItemCaseSensitive(doc, "figures"), *e, *x;
    if (!cJSON_IsObject(fig))
        return bad(k, "figures", "is missing or not an object");
    cJSON_ArrayForEach(e, fig)
    {
        char at[64];
        snprintf(at, sizeof at, "figures.%.50s", e->string);
        if (strcmp(e->string, "about") == 0)
            continue;
        if (strcmp(e->string, "prefer_C") != 0 && strcmp(e->string, "curves_C") != 0)
            return bad(k, at, "unknown key '%s'", e->string);
        if (!cJSON_IsObject(e))
            return bad(k, at, "must be an object NAME -> width");
        cJSON_ArrayForEach(x, e)
        {
            char w2[128];
            snprintf(w2, sizeof w2, "%.60s.%.60s", at, x->string);
            if ((rc = check_value(k, w2, x)))
                return rc;
        }
    }
    if ((rc = load_refs(k, cJSON_GetObjectItemCaseSensitive(doc, "paper"), refs)))
        return rc;
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(doc, "presets");
    if (!cJSON_IsObject(ps) || !ps->child)
        return bad(k, "presets", "is missing or empty");
    cJSON_ArrayForEach(e, ps) if ((rc = check_preset(k, e))) return rc;
    return 0;
}

int lab_presets_load(const command *c, const char *path, lab_presets *p)
{
    memset(p, 0, sizeof *p);
    if (!path || !*path)
        path = getenv("BA_PRESETS");
    if (!path || !*path)
        path = BA_PRESETS_FILE;
    snprintf(p->path, sizeof p->path, "%s", path);
    char *text = lab_slurp(path);
    if (!text) {
        fprintf(stderr, "%s %s: cannot read the presets file %s (--presets FILE or "
                        "$BA_PRESETS names another)\n", prog, c->cmd, path);
        return EXIT_USAGE;
    }
    p->doc = cJSON_Parse(text);
    free(text);
    if (!p->doc) {
        fprintf(stderr, "%s %s: %s is not valid JSON\n", prog, c->cmd, path);
        return EXIT_USAGE;
    }
    checker k = {c, p->path, NULL, NULL};
    int rc = check_doc(&k, p->doc, &p->refs);
    if (rc)
        lab_presets_free(p);
    return rc;
}

void lab_presets_free(lab_presets *p)
{
    cJSON_Delete(p->doc);
    free(p->refs.v);
    memset(&p->refs, 0, sizeof p->refs);
    p->doc = NULL;
}

const cJSON *lab_preset(const lab_presets *p, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p->doc, "presets"),
                                            name);
}

const cJSON *lab_preset_grid(const cJSON *preset, const char *name)
{
    const cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(preset, "grids"))
    {
        const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "name"));
        if (n && strcmp(n, name) == 0)
            return g;
    }
    return NULL;
}

cJSON *lab_preset_grid_merged(const cJSON *preset, const char *name)
{
    const cJSON *grid = lab_preset_grid(preset, name);
    const cJSON *layers[3] = {cJSON_GetObjectItemCaseSensitive(preset, "defaults"), NULL, grid};
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(grid, "base");
    if (base)
        layers[1] = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(preset, "bases"), base->valuestring);
    cJSON *m = cJSON_CreateObject();
    for (int i = 0; i < 3 && m; i++) {
        const cJSON *v;
        cJSON_ArrayForEach(v, layers[i])
        {
            cJSON *d = cJSON_Duplicate(v, 1);
            if (!d) {
                cJSON_Delete(m);
                return NULL;
            }
            if (cJSON_GetObjectItemCaseSensitive(m, v->string))
                cJSON_ReplaceItemInObjectCaseSensitive(m, v->string, d);
            else
                cJSON_AddItemToObject(m, v->string, d);
        }
    }
    return m;
}

void lab_preset_names(const lab_presets *p, int with_report, char *buf, size_t n)
{
    const cJSON *e;
    size_t at = 0;
    buf[0] = '\0';
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(p->doc, "presets"))
    {
        if (with_report && cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(e, "report")))
            continue;
        int w = snprintf(buf + at, n - at, "%s%s", at ? "|" : "", e->string);
        if (w < 0 || (size_t)w >= n - at)
            break;
        at += (size_t)w;
    }
}

static int names_of(const cJSON *list, lab_names *out)
{
    int n = cJSON_GetArraySize(list);
    const cJSON *e;
    out->n = 0;
    out->v = calloc((size_t)n + 1, sizeof *out->v);
    if (!out->v)
        return -1;
    cJSON_ArrayForEach(e, list) out->v[out->n++] = e->valuestring;
    return 0;
}

int lab_report_plan_get(const cJSON *preset, lab_report_plan *r)
{
    memset(r, 0, sizeof *r);
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(preset, "report"), *e;
    if (!cJSON_IsObject(rep))
        return 0;
    r->sections = cJSON_GetObjectItemCaseSensitive(rep, "sections")->valuestring;
    const cJSON *cg = cJSON_GetObjectItemCaseSensitive(rep, "couplings_grid");
    const cJSON *sg = cJSON_GetObjectItemCaseSensitive(rep, "saturation_grid");
    r->couplings_grid = cg ? cg->valuestring : NULL;
    r->saturation_grid = sg ? sg->valuestring : NULL;
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(rep, "headline_rows");
    r->rows = calloc((size_t)cJSON_GetArraySize(rows) + 1, sizeof *r->rows);
    if (!r->rows)
        return -1;
    cJSON_ArrayForEach(e, rows)
    {
        lab_headline *h = &r->rows[r->nrows++];
        h->grid = cJSON_GetObjectItemCaseSensitive(e, "grid")->valuestring;
        h->T = cJSON_GetObjectItemCaseSensitive(e, "T")->valueint;
        h->ffn = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "ffn"));
    }
    if (names_of(cJSON_GetObjectItemCaseSensitive(rep, "paper_grids"), &r->paper_grids) ||
        names_of(cJSON_GetObjectItemCaseSensitive(rep, "budget_grids"), &r->budget_grids) ||
        names_of(cJSON_GetObjectItemCaseSensitive(rep, "ladder_grids"), &r->ladder_grids) ||
        names_of(cJSON_GetObjectItemCaseSensitive(rep, "width_grids"), &r->width_grids) ||
        names_of(cJSON_GetObjectItemCaseSensitive(rep, "grids"), &r->grids)) {
        lab_report_plan_free(r);
        return -1;
    }
    return 1;
}

void lab_report_plan_free(lab_report_plan *r)
{
    free(r->rows);
    free(r->paper_grids.v);
    free(r->budget_grids.v);
    free(r->ladder_grids.v);
    free(r->width_grids.v);
    free(r->grids.v);
    memset(r, 0, sizeof *r);
}
