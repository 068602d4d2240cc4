/* Grids: their record (grid.json), their cells' names and configs, and
 * the matching of cells with the runs that fill them. */
#include "grid.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ cells */

/* Exact cells of plain arms keep the names they always had (grids resume
 * by name); other forms are named by their label, sampled arms add
 * -KIND-S<shots>. */
void lab_cell_name(const lab_grid *g, int arm, int T, int C, int ffn, uint64_t seed, char *buf,
                   size_t n)
{
    const lab_arm *a = &g->arms[arm];
    char suffix[48] = "";
    if (lab_arm_sampled(a))
        snprintf(suffix, sizeof suffix, "-%s-S%d", ba_sampler_name(a->sampler.kind),
                 a->sampler.shots);
    char label[96];
    lab_arm_variant(a, label, sizeof label);
    snprintf(buf, n, "%s-T%d-C%d-ffn%d-%s-s%" PRIu64 "%s", ba_task_name(g->task), T, C, ffn,
             label, seed, suffix);
}

static int is_ising_arm(const lab_arm *a)
{
    return a->attn == BA_ATTN_BOLTZMANN || a->attn == BA_ATTN_COUPLING;
}

ba_config lab_cell_config(const lab_grid *g, int arm, int T, int C, int ffn)
{
    ba_config cfg = ba_config_default(g->arms[arm].attn, T);
    const lab_arm *a = &g->arms[arm];
    cfg.sampler = a->sampler;
    cfg.couplings = a->form.couplings, cfg.band = a->form.band;
    cfg.field_bias = a->form.field_bias, cfg.pos_emb = a->form.pos_emb;
    cfg.engine = g->engine, cfg.n_layer = g->layers, cfg.n_head = g->heads;
    if (a->form.engine >= 0 && is_ising_arm(a)) /* the arm's own */
        cfg.engine = (ba_engine)a->form.engine;
    if (ba_engine_is_approx(cfg.engine) && is_ising_arm(a))
        cfg.approx = g->approx; /* the grid's settings (the defaults unless approximate) */
    if (cfg.engine == BA_ENGINE_HYBRID && is_ising_arm(a))
        cfg.window = g->window > 0 ? g->window : T - 1 < 8 ? (T > 1 ? T - 1 : 1) : 8;
    cfg.n_embd = C, cfg.ffn = ffn;
    cfg.head = g->task == BA_TASK_BRACKETS ? BA_HEAD_POINTER : BA_HEAD_TOKEN;
    cfg.vocab_size = g->task == BA_TASK_BRACKETS ? 2 * g->data.kinds
                     : g->task == BA_TASK_RECALL ? g->data.recall_vocab
                                                 : 1;
    cfg.out_size = g->task == BA_TASK_BRACKETS  ? T
                   : g->task == BA_TASK_RECALL ? g->data.recall_vocab
                                               : 1;
    return cfg;
}

/* ------------------------------------------------------- grid.json */

/* An approximate engine's settings and window (only such grids have them). */
static int add_approx(cJSON *o, const lab_grid *g)
{
    cJSON *a = cJSON_AddObjectToObject(o, "approx");
    return a && cJSON_AddNumberToObject(a, "damping", g->approx.damping) &&
           cJSON_AddNumberToObject(a, "tol", g->approx.tol) &&
           cJSON_AddNumberToObject(a, "max_iter", g->approx.max_iter) &&
           cJSON_AddNumberToObject(o, "window", g->window);
}

static int read_approx(const cJSON *o, lab_grid *g)
{
    g->approx = ba_approx_default();
    g->window = 0;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "approx");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "window");
    if (!a && !w)
        return 0;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(a, "damping");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(a, "tol");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(a, "max_iter");
    if (!cJSON_IsNumber(d) || !cJSON_IsNumber(t) || !cJSON_IsNumber(m) || !cJSON_IsNumber(w) ||
        m->valuedouble != floor(m->valuedouble) || fabs(m->valuedouble) > 1e9 ||
        w->valuedouble != floor(w->valuedouble) || w->valuedouble < 0 ||
        w->valuedouble > BA_MAX_BAND)
        return -1;
    g->approx.damping = d->valuedouble, g->approx.tol = t->valuedouble;
    g->approx.max_iter = (int)m->valuedouble;
    g->window = (int)w->valuedouble;
    return ba_approx_validate(&g->approx, NULL) ? -1 : 0;
}

static cJSON *sampler_object(const ba_sampler *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "kind", ba_sampler_name(s->kind))) {
        cJSON_Delete(o);
        return NULL;
    }
    int np;
    const ba_sampler_param *p = ba_sampler_params(&np);
    for (int i = 0; s->kind != BA_SAMPLER_EXACT && i < np; i++)
        if (ba_sampler_param_used(&p[i], s->kind) &&
            !cJSON_AddNumberToObject(o, p[i].name, ba_sampler_param_get(s, &p[i]))) {
            cJSON_Delete(o);
            return NULL;
        }
    return o;
}

static int int_array(cJSON *o, const char *key, const int *v, int n)
{
    cJSON *a = cJSON_AddArrayToObject(o, key);
    for (int i = 0; a && i < n; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i])))
            return 0;
    return a != NULL;
}

/* An arm's form, written only when it is not the plain one: a grid of
 * plain arms is written as it always was. */
static int form_fields(cJSON *arm, const lab_form *f)
{
    return lab_form_is_plain(f) ||
           (cJSON_AddStringToObject(arm, "couplings", ba_couplings_name(f->couplings)) &&
            cJSON_AddNumberToObject(arm, "band", f->band) &&
            cJSON_AddStringToObject(arm, "field_bias", ba_field_bias_name(f->field_bias)) &&
            lab_add_pos_emb(arm, f->pos_emb) &&
            (f->engine < 0 ||
             cJSON_AddStringToObject(arm, "engine", ba_engine_name((ba_engine)f->engine))));
}

/* Whether any cell runs an approximate engine (the grid's, or an arm's
 * own): then grid.json keeps the engines' settings. */
static int grid_uses_approx(const lab_grid *g)
{
    int any = ba_engine_is_approx(g->engine);
    for (int a = 0; a < g->narms; a++)
        any |= g->arms[a].form.engine >= 0;
    return any;
}

static cJSON *grid_object(const lab_grid *g)
{
    cJSON *o = cJSON_CreateObject();
    char seed0[32], dseed[32];
    snprintf(seed0, sizeof seed0, "%" PRIu64, g->seed0);
    snprintf(dseed, sizeof dseed, "%" PRIu64, g->data.data_seed);
    int ok = o && cJSON_AddStringToObject(o, "format", "boltzattn-grid") &&
             cJSON_AddNumberToObject(o, "version", 1) &&
             cJSON_AddStringToObject(o, "task", ba_task_name(g->task));
    cJSON *arms = ok ? cJSON_AddArrayToObject(o, "arms") : NULL;
    for (int a = 0; arms && a < g->narms; a++) {
        cJSON *arm = cJSON_CreateObject(), *s = sampler_object(&g->arms[a].sampler);
        if (!arm || !s || !cJSON_AddStringToObject(arm, "attn", ba_attn_name(g->arms[a].attn)) ||
            !cJSON_AddItemToObject(arm, "sampler", s) || !form_fields(arm, &g->arms[a].form) ||
            !cJSON_AddItemToArray(arms, arm)) {
            if (!s || !cJSON_GetObjectItemCaseSensitive(arm, "sampler"))
                cJSON_Delete(s);
            cJSON_Delete(arm);
            arms = NULL;
        }
    }
    ok = arms && int_array(o, "T", g->T, g->nT) && int_array(o, "C", g->C, g->nC) &&
         int_array(o, "ffn", g->ffn, g->nffn) && cJSON_AddNumberToObject(o, "seeds", g->nseeds) &&
         cJSON_AddStringToObject(o, "seed0", seed0) &&
         cJSON_AddNumberToObject(o, "layers", g->layers) &&
         cJSON_AddNumberToObject(o, "heads", g->heads) &&
         cJSON_AddStringToObject(o, "engine", ba_engine_name(g->engine)) &&
         (!grid_uses_approx(g) || add_approx(o, g)) &&
         cJSON_AddNumberToObject(o, "kinds", g->data.kinds) &&
         cJSON_AddNumberToObject(o, "n_heldout", g->data.n_heldout) &&
         cJSON_AddStringToObject(o, "data_seed", dseed);
    /* only in recall grids and capped brackets grids, so the others'
     * grid.json stay as they were */
    if (ok && g->task == BA_TASK_BRACKETS && g->data.max_depth > 0)
        ok = cJSON_AddNumberToObject(o, "max_depth", g->data.max_depth) != NULL;
    if (ok && g->task == BA_TASK_RECALL)
        ok = cJSON_AddNumberToObject(o, "recall_vocab", g->data.recall_vocab) &&
             cJSON_AddNumberToObject(o, "pairs", g->data.pairs);
    char *tr = ok ? ba_train_settings_to_json(&g->train, NULL) : NULL;
    cJSON *t = tr ? cJSON_Parse(tr) : NULL;
    free(tr);
    if (!t || !cJSON_AddItemToObject(o, "train", t)) {
        cJSON_Delete(t);
        ok = 0;
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

char *lab_grid_json(const lab_grid *g)
{
    cJSON *o = grid_object(g);
    char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return txt;
}

int lab_grid_write(const command *c, const char *dir, const lab_grid *g)
{
    char path[PATH_LEN], err[BA_ERR_LEN];
    if (mkpath(c, path, "%s/grid.json", dir))
        return 1;
    cJSON *o = grid_object(g);
    char *txt = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!txt) {
        fprintf(stderr, "%s %s: out of memory\n", prog, c->cmd);
        return 1;
    }
    size_t n = strlen(txt);
    char *line = malloc(n + 2);
    int rc = line ? 0 : 1;
    if (line) {
        memcpy(line, txt, n);
        memcpy(line + n, "\n", 2);
        rc = ba_write_file(path, line, n + 1, err) ? fail_lib(c, err, 1) : 0;
    }
    free(line);
    cJSON_free(txt);
    return rc;
}

/* An array of at most max integers in [lo, hi]; -1 if it is not one. */
static int read_ints(const cJSON *o, const char *key, int lo, int hi, int *v, int max)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    int n = 0;
    if (!cJSON_IsArray(a))
        return -1;
    for (const cJSON *x = a->child; x; x = x->next) {
        if (n == max || !cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) ||
            x->valuedouble < lo || x->valuedouble > hi)
            return -1;
        v[n++] = (int)x->valuedouble;
    }
    return n > 0 ? n : -1;
}

/* An arm's sampler, read by the library's reader (the rules of a
 * config's "sampler" field). */
static int read_sampler(const cJSON *o, ba_sampler *s)
{
    char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
    int rc = txt ? ba_sampler_from_json(txt, s, NULL) : -1;
    cJSON_free(txt);
    return rc ? -1 : 0;
}

/* An arm's form: each field optional (grids written before forms have
 * none: the plain form); pos_emb follows train's rule when absent. */
static int read_form(const cJSON *arm, lab_form *f)
{
    *f = lab_form_plain();
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(arm, "couplings");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(arm, "band");
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(arm, "field_bias");
    const cJSON *pe = cJSON_GetObjectItemCaseSensitive(arm, "pos_emb");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(arm, "engine");
    if (c && (!cJSON_IsString(c) || ba_couplings_parse(c->valuestring, &f->couplings, NULL)))
        return -1;
    ba_engine e;
    if (en && (!cJSON_IsString(en) || ba_engine_parse(en->valuestring, &e, NULL) ||
               !ba_engine_is_approx(e)))
        return -1;
    f->engine = en ? (int)e : -1;
    if (b && (!cJSON_IsNumber(b) || b->valuedouble != floor(b->valuedouble) ||
              b->valuedouble < 0 || b->valuedouble > BA_MAX_BAND))
        return -1;
    if (fb && (!cJSON_IsString(fb) || ba_field_bias_parse(fb->valuestring, &f->field_bias, NULL)))
        return -1;
    if (pe && !cJSON_IsBool(pe) &&
        !(cJSON_IsString(pe) && ba_pos_emb_parse(pe->valuestring, &f->pos_emb, NULL) == BA_OK))
        return -1;
    f->band = b ? (int)b->valuedouble : 0;
    if (!pe || cJSON_IsBool(pe))
        f->pos_emb = pe ? cJSON_IsTrue(pe) : lab_form_default_pos(f->couplings);
    return 0;
}

/* A string of decimal digits below 2^64. */
static int read_u64(const cJSON *o, const char *key, uint64_t *v)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(x) || !*x->valuestring || strspn(x->valuestring, "0123456789") !=
                                                         strlen(x->valuestring))
        return -1;
    *v = strtoull(x->valuestring, NULL, 10);
    return 0;
}

static int grid_from(const cJSON *o, lab_grid *g, const char **bad)
{
    memset(g, 0, sizeof *g);
    const cJSON *x, *arms = cJSON_GetObjectItemCaseSensitive(o, "arms");
    x = cJSON_GetObjectItemCaseSensitive(o, "format");
    if (!cJSON_IsString(x) || strcmp(x->valuestring, "boltzattn-grid") != 0)
        return *bad = "format", -1;
    x = cJSON_GetObjectItemCaseSensitive(o, "task");
    if (!cJSON_IsString(x) || ba_task_parse(x->valuestring, &g->task, NULL))
        return *bad = "task", -1;
    if (!cJSON_IsArray(arms))
        return *bad = "arms", -1;
    for (const cJSON *a = arms->child; a; a = a->next) {
        const cJSON *at = cJSON_GetObjectItemCaseSensitive(a, "attn");
        if (g->narms == LAB_MAX_ARMS || !cJSON_IsString(at) ||
            ba_attn_parse(at->valuestring, &g->arms[g->narms].attn, NULL) ||
            read_sampler(cJSON_GetObjectItemCaseSensitive(a, "sampler"),
                         &g->arms[g->narms].sampler) ||
            read_form(a, &g->arms[g->narms].form))
            return *bad = "arms", -1;
        g->narms++;
    }
    if ((g->nT = read_ints(o, "T", 1, BA_MAX_BLOCK, g->T, LAB_MAX_LIST)) < 0)
        return *bad = "T", -1;
    if ((g->nC = read_ints(o, "C", 1, 8192, g->C, LAB_MAX_LIST)) < 0)
        return *bad = "C", -1;
    if ((g->nffn = read_ints(o, "ffn", 0, 1, g->ffn, 2)) < 0)
        return *bad = "ffn", -1;
    x = cJSON_GetObjectItemCaseSensitive(o, "seeds");
    if (!cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble > 1000)
        return *bad = "seeds", -1;
    g->nseeds = (int)x->valuedouble;
    if (read_u64(o, "seed0", &g->seed0))
        return *bad = "seed0", -1;
    g->data = ba_data_spec_default(g->task);
    if (read_u64(o, "data_seed", &g->data.data_seed))
        return *bad = "data_seed", -1;
    static const struct {
        const char *key;
        int lo, hi;
        size_t off;
    } ints[] = {{"layers", 1, 64, offsetof(lab_grid, layers)},
                {"heads", 1, 64, offsetof(lab_grid, heads)},
                {"kinds", 1, 4, offsetof(lab_grid, data) + offsetof(ba_data_spec, kinds)},
                {"n_heldout", 0, 1 << 24, offsetof(lab_grid, data) + offsetof(ba_data_spec, n_heldout)},
                /* the last two in recall grids only */
                {"recall_vocab", 4, 256,
                 offsetof(lab_grid, data) + offsetof(ba_data_spec, recall_vocab)},
                {"pairs", 1, 128, offsetof(lab_grid, data) + offsetof(ba_data_spec, pairs)}};
    size_t nints = sizeof ints / sizeof ints[0] - (g->task == BA_TASK_RECALL ? 0 : 2);
    for (size_t i = 0; i < nints; i++) {
        x = cJSON_GetObjectItemCaseSensitive(o, ints[i].key);
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) ||
            x->valuedouble < ints[i].lo || x->valuedouble > ints[i].hi)
            return *bad = ints[i].key, -1;
        int val = (int)x->valuedouble;
        memcpy((char *)g + ints[i].off, &val, sizeof val);
    }
    /* a depth cap: brackets grids, absent when there is none */
    x = cJSON_GetObjectItemCaseSensitive(o, "max_depth");
    if (x && (g->task != BA_TASK_BRACKETS || !cJSON_IsNumber(x) ||
              x->valuedouble != floor(x->valuedouble) || x->valuedouble < 1 ||
              x->valuedouble > BA_MAX_BLOCK))
        return *bad = "max_depth", -1;
    g->data.max_depth = x ? (int)x->valuedouble : 0;
    x = cJSON_GetObjectItemCaseSensitive(o, "engine");
    if (!cJSON_IsString(x) || ba_engine_parse(x->valuestring, &g->engine, NULL))
        return *bad = "engine", -1;
    if (read_approx(o, g))
        return *bad = "approx", -1;
    char *tr = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(o, "train"));
    int rc = tr ? ba_train_settings_from_json(tr, &g->train, NULL, NULL) : -1;
    cJSON_free(tr);
    return rc ? (*bad = "train", -1) : 0;
}

int lab_grid_read(const command *c, const char *dir, lab_grid *g)
{
    char path[PATH_LEN];
    if (mkpath(c, path, "%s/grid.json", dir))
        return 2;
    unsigned char *buf;
    size_t len;
    char err[BA_ERR_LEN];
    /* a FIFO, a directory, a device or a symlink loop is refused by the
     * reader (never waited on), and named */
    if (ba_read_file(path, &buf, &len, err) != BA_OK) {
        fprintf(stderr, "%s %s: %s: not a grid of 'boltzattn ablate'?\n", prog, c->cmd, err);
        return 2;
    }
    char *txt = (char *)buf;
    cJSON *o = cJSON_Parse(txt);
    free(txt);
    const char *bad = "JSON";
    int rc = o ? grid_from(o, g, &bad) : -1;
    cJSON_Delete(o);
    if (rc) {
        fprintf(stderr, "%s %s: %s: bad or missing field '%s'\n", prog, c->cmd, path, bad);
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------ cells */

/* The arm a run belongs to, or -1. */
static int run_arm(const lab_grid *g, const lab_run *r)
{
    for (int a = 0; a < g->narms; a++) {
        const lab_arm *arm = &g->arms[a];
        if (arm->attn == r->attn && lab_form_same(&arm->form, &r->form) &&
            arm->sampler.kind == r->sampler &&
            (!lab_arm_sampled(arm) || arm->sampler.shots == r->shots))
            return a;
    }
    return -1;
}

/* Whether a run's Ising inference is the cell's: the exact engines all
 * compute the same weights (and older grids recorded fast), so any exact
 * engine matches any other; an approximate one matches only itself with
 * the same settings and window. */
static int same_inference(const lab_grid *g, int arm, int T, const ba_config *run)
{
    ba_config cell = lab_cell_config(g, arm, T, run->n_embd, run->ffn);
    ba_engine er = ba_config_engine(run), ec = ba_config_engine(&cell);
    if (!is_ising_arm(&g->arms[arm]) || (!ba_engine_is_approx(er) && !ba_engine_is_approx(ec)))
        return 1;
    return er == ec && run->window == cell.window &&
           run->approx.damping == cell.approx.damping && run->approx.tol == cell.approx.tol &&
           run->approx.max_iter == cell.approx.max_iter;
}

int lab_cells_match(const command *c, const lab_grid *g, const lab_runs *rs, lab_cells *out)
{
    out->g = g;
    out->refs = NULL;
    out->n = g->nT * g->nC * g->nffn * g->nseeds * g->narms;
    out->cells = calloc((size_t)out->n + 1, sizeof *out->cells);
    if (!out->cells)
        return fail_lib(c, "out of memory", 1);
    int k = 0;
    for (int ti = 0; ti < g->nT; ti++)
        for (int ci = 0; ci < g->nC; ci++)
            for (int fi = 0; fi < g->nffn; fi++)
                for (int si = 0; si < g->nseeds; si++)
                    for (int a = 0; a < g->narms; a++) {
                        lab_cell *x = &out->cells[k++];
                        x->arm = a, x->T = g->T[ti], x->C = g->C[ci], x->ffn = g->ffn[fi];
                        x->seed = g->seed0 + (uint64_t)si;
                    }
    /* A finished run fills the cell of its keys; the run under the cell's
     * own name wins over a copy elsewhere. */
    for (int i = 0; i < rs->n; i++) {
        const lab_run *r = &rs->v[i];
        int a = run_arm(g, r);
        if (!r->finished || a < 0 || r->task != g->task || r->steps != g->train.steps ||
            !same_inference(g, a, r->T, &r->info.config))
            continue;
        for (int j = 0; j < out->n; j++) {
            lab_cell *x = &out->cells[j];
            if (x->arm != a || x->T != r->T || x->C != r->C || x->ffn != r->ffn ||
                x->seed != r->seed)
                continue;
            char name[256];
            lab_cell_name(g, a, x->T, x->C, x->ffn, x->seed, name, sizeof name);
            if (!x->run || strcmp(r->name, name) == 0)
                x->run = r;
        }
    }
    return 0;
}

void lab_cells_free(lab_cells *cs)
{
    free(cs->cells);
    cs->cells = NULL, cs->n = 0;
}

int lab_cells_finished(const lab_cells *cs)
{
    int n = 0;
    for (int i = 0; i < cs->n; i++)
        n += cs->cells[i].run != NULL;
    return n;
}

const lab_cell *lab_cells_find(const lab_cells *cs, int arm, int T, int C, int ffn, uint64_t seed)
{
    for (int i = 0; i < cs->n; i++) {
        const lab_cell *x = &cs->cells[i];
        if (x->arm == arm && x->T == T && x->C == C && x->ffn == ffn && x->seed == seed)
            return x;
    }
    return NULL;
}
