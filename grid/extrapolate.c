/* ablate --extrapolate: length extrapolation of a grid's language models.
 * Each finished charlm run is evaluated at a longer block size T2 (the
 * library's ba_model_resize says whether its model can run there: no
 * position embeddings, relative couplings with a band) and at its own T,
 * on the validation split, into GRID/extrapolation.json:
 *
 *   {"format": "boltzattn-extrapolation", "version": 1, "entries": [
 *     {"run": NAME, "variant": LABEL, "attn", "couplings", "band",
 *      "field_bias", "pos_emb", "T", "C", "ffn", "seed", "steps",
 *      "T_eval": T2, "items": N (0: every window), "batch": B,
 *      "status": "done" | "refused",
 *      "reason": why the model cannot run at T2 (refused),
 *      "at_T": {"val_loss", "val_ppl", "val_acc", "items", "targets"},
 *      "at_T_eval": {the same at T2}} ...]}
 *
 * An entry is keyed by (run, T_eval, items) and never redone: a rerun
 * evaluates only what is missing, so an interrupted step resumes, and a
 * clone without checkpoints keeps the committed entries (runs whose
 * checkpoint is absent are skipped with a note). The file's handling (its
 * atomic rewrite after every entry, the grid directory's lock) is
 * grid_eval.c's, shared with --eval-engines. */
#include "grid.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What a run is evaluated with. */
typedef struct {
    int T2, items, B; /* B: the batch (resolved) */
    const char *data_path;
} xopts;

/* The run's keys and the evaluation's, as every entry opens. */
static cJSON *entry_head(const lab_run *r, const xopts *o)
{
    cJSON *e = lab_eval_head(r);
    if (e && (!cJSON_AddNumberToObject(e, "T_eval", o->T2) ||
              !cJSON_AddNumberToObject(e, "items", o->items) ||
              !cJSON_AddNumberToObject(e, "batch", o->B))) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

/* Why the run's model cannot run at T2 (into why), judged by the library
 * on a model of its config, so a clone without checkpoints knows it too:
 * 1 refused, 0 it can, or an exit code (negative) after printing. */
static int refusal(const command *c, const lab_run *r, int T2, char *why)
{
    char err[BA_ERR_LEN];
    ba_model *m, *big = NULL;
    int st = ba_model_init(&m, &r->info.config, err);
    if (st)
        return -fail_lib(c, err, input_status(st));
    st = ba_model_resize(m, T2, &big, why);
    ba_model_free(m);
    ba_model_free(big);
    if (st == BA_ERR_NOMEM)
        return -fail_lib(c, why, 1);
    return st != BA_OK;
}

/* Loads the run's checkpoint and evaluates it at its T and at T2 into e. */
static int evaluate_run(const command *c, const lab_run *r, const char *ckpt, const xopts *o,
                        cJSON *e)
{
    char err[BA_ERR_LEN];
    ba_model *m, *big = NULL;
    ba_data_spec spec;
    int st = ba_checkpoint_load(ckpt, &m, &spec, err);
    if (st)
        return fail_lib(c, err, input_status(st));
    const char *path = o->data_path       ? o->data_path
                       : r->info.data_path ? r->info.data_path
                                           : default_data_path();
    ba_eval_result own, longer;
    int code = 0;
    /* a long model's evaluation can take minutes: say what is under way */
    fprintf(stderr, "%s: evaluating at T = %d and T = %d ...\n", r->name, r->T, o->T2);
    if ((st = ba_model_resize(m, o->T2, &big, err)))
        code = fail_lib(c, err, st == BA_ERR_NOMEM ? 1 : 2);
    if (!code)
        code = lab_eval_data(c, m, &spec, r->T, path, o->items, o->B, &own);
    if (!code)
        code = lab_eval_data(c, big, &spec, o->T2, path, o->items, o->B, &longer);
    ba_model_free(m);
    ba_model_free(big);
    if (code)
        return code;
    if (!cJSON_AddStringToObject(e, "status", "done") ||
        !lab_eval_add_result(e, "at_T", &own) || !lab_eval_add_result(e, "at_T_eval", &longer))
        return fail_lib(c, "out of memory", 1);
    printf("%s: val_ppl %.4f at T = %d, %.4f at T = %d (%d and %d windows)\n", r->name, own.ppl,
           r->T, longer.ppl, o->T2, own.n_items, longer.n_items);
    return 0;
}

/* One finished run: kept, refused, skipped or evaluated. */
static int one_run(const command *c, const lab_grid *g, const lab_run *r, lab_eval_file *f,
                   void *user)
{
    xopts o = *(const xopts *)user;
    o.B = o.B > 0 ? o.B : g->train.batch;
    cJSON *e = entry_head(r, &o);
    if (!e)
        return fail_lib(c, "out of memory", 1);
    if (lab_eval_find(f, e)) {
        cJSON_Delete(e);
        f->kept++;
        return 0;
    }
    char why[BA_ERR_LEN], ckpt[PATH_LEN];
    int refused = refusal(c, r, o.T2, why), have = 1;
    if (refused >= 0 && !refused)
        have = lab_eval_ckpt(c, r, f, ckpt);
    if (refused < 0 || have <= 0) {
        cJSON_Delete(e);
        return refused < 0 ? -refused : -have;
    }
    int code = 0;
    if (refused) {
        if (!cJSON_AddStringToObject(e, "status", "refused") ||
            !cJSON_AddStringToObject(e, "reason", why))
            code = fail_lib(c, "out of memory", 1);
        else
            printf("%s: refused at T = %d: %s\n", r->name, o.T2, why);
    } else {
        code = evaluate_run(c, r, ckpt, &o, e);
    }
    if (code) {
        cJSON_Delete(e);
        return code;
    }
    return lab_eval_add(c, f, e, refused);
}

static const char *const xkeys[] = {"T_eval", "items", NULL};

int lab_extrapolate(const command *c, const char *dir, int T2, int items, int B,
                    const char *data_path, int wait)
{
    lab_grid g;
    int code = lab_grid_read(c, dir, &g);
    if (code)
        return code;
    if (g.task != BA_TASK_CHARLM)
        return usage_error(c, "--extrapolate: %s is a %s grid; extrapolation evaluates "
                              "language models (charlm)",
                           dir, ba_task_name(g.task));
    xopts o = {T2, items, B, data_path};
    lab_eval_mode m = {"extrapolation.json", "boltzattn-extrapolation", "extrapolation", xkeys,
                       one_run, &o, wait};
    lab_eval_file f;
    code = lab_eval_grid(c, dir, &g, &m, &f);
    if (!code && !f.busy)
        printf("extrapolation to T = %d: %d evaluated, %d refused, %d kept, %d skipped "
               "(no checkpoint)%s%s\n",
               T2, f.done, f.refused, f.kept, f.skipped, f.changed ? "; wrote " : "",
               f.changed ? f.path : "");
    return code;
}

int lab_extrapolate_opts(const command *c, lab_xplan *x)
{
    memset(x, 0, sizeof *x);
    int rc = get_int_list(c, "extrapolate", 2, BA_MAX_BLOCK, x->T2, LAB_MAX_LIST, &x->nT);
    if (!rc && is_set(c, "extrapolate-items"))
        rc = get_int(c, "extrapolate-items", 0, INT_MAX, &x->items);
    if (!rc && is_set(c, "extrapolate-batch"))
        rc = get_int(c, "extrapolate-batch", 1, 1 << 20, &x->B);
    return rc;
}

int lab_extrapolate_list(const command *c, const char *dir, const lab_xplan *x,
                         const char *data_path)
{
    /* one length after another, each resumable on its own (entries are
     * keyed by the length), in the order given */
    int rc = 0;
    for (int i = 0; i < x->nT && !rc; i++)
        rc = lab_extrapolate(c, dir, x->T2[i], x->items, x->B, data_path, x->wait);
    return rc;
}

/* ------------------------------------------------------- reading back */

static int xnum(const cJSON *o, const char *key, double lo, double hi, double *v)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(n) || !isfinite(n->valuedouble) || n->valuedouble < lo ||
        n->valuedouble > hi)
        return 1;
    *v = n->valuedouble;
    return 0;
}

/* Entry j into *x: 0, or 1 when a key is missing or out of range. */
static int xentry_read(const cJSON *j, lab_xentry *x)
{
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "status"));
    double T, Te, items = 0, steps = 0;
    memset(x, 0, sizeof *x);
    x->run = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "run"));
    x->variant = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "variant"));
    x->own = x->at = NAN;
    if (!st || !x->run || !x->variant || xnum(j, "T", 1, BA_MAX_BLOCK, &T) ||
        xnum(j, "T_eval", 1, BA_MAX_BLOCK, &Te))
        return 1;
    x->T = (int)T, x->T_eval = (int)Te;
    if (strcmp(st, "refused") == 0) {
        x->refused = 1;
        x->reason = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "reason"));
        return !x->reason;
    }
    if (strcmp(st, "done") != 0 || xnum(j, "items", 0, INT_MAX, &items) ||
        xnum(j, "steps", 0, (double)LONG_MAX / 2, &steps) ||
        xnum(cJSON_GetObjectItemCaseSensitive(j, "at_T"), "val_ppl", 1, HUGE_VAL, &x->own) ||
        xnum(cJSON_GetObjectItemCaseSensitive(j, "at_T_eval"), "val_ppl", 1, HUGE_VAL, &x->at))
        return 1;
    x->items = (long)items, x->steps = (long)steps;
    return 0;
}

/* 1 when entry a is to be read before b, of the same run and length. */
static int xentry_better(const lab_xentry *a, const lab_xentry *b)
{
    if (a->refused != b->refused)
        return !a->refused;
    return b->items != 0 && (a->items == 0 || a->items > b->items);
}

int lab_xentries_read(const char *dir, lab_xentries *x, char *err)
{
    memset(x, 0, sizeof *x);
    char path[PATH_LEN];
    int len = snprintf(path, sizeof path, "%s/extrapolation.json", dir);
    if (len < 0 || (size_t)len >= sizeof path) {
        snprintf(err, BA_ERR_LEN, "the grid's path is too long");
        return 2;
    }
    if (access(path, F_OK) != 0)
        return 0;
    char *txt = lab_slurp(path);
    if (!txt) { /* there but not readable: a directory, no permission (exit 2, as before) */
        snprintf(err, BA_ERR_LEN, "cannot read it");
        return 2;
    }
    x->doc = cJSON_Parse(txt);
    free(txt);
    const char *fmt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x->doc, "format"));
    const cJSON *es = cJSON_GetObjectItemCaseSensitive(x->doc, "entries");
    if (!fmt || strcmp(fmt, "boltzattn-extrapolation") != 0 || !cJSON_IsArray(es)) {
        snprintf(err, BA_ERR_LEN, "not an extrapolation file of this tool (format "
                                  "boltzattn-extrapolation, an array of entries)");
        lab_xentries_free(x);
        return 2;
    }
    if (!(x->e = calloc((size_t)cJSON_GetArraySize(es) + 1, sizeof *x->e))) {
        snprintf(err, BA_ERR_LEN, "out of memory");
        lab_xentries_free(x);
        return 1;
    }
    int at = 0;
    for (const cJSON *j = es->child; j; j = j->next) {
        lab_xentry e;
        at++;
        if (xentry_read(j, &e)) {
            snprintf(err, BA_ERR_LEN,
                     "its entry %d (from 1) is damaged: an entry has run, variant, T, T_eval "
                     "and a status; a finished one items, steps and a val_ppl >= 1 in at_T and "
                     "at_T_eval, a refused one a reason",
                     at);
            lab_xentries_free(x);
            return 2;
        }
        int k = 0;
        while (k < x->n && !(strcmp(x->e[k].run, e.run) == 0 && x->e[k].T_eval == e.T_eval))
            k++;
        if (k == x->n)
            x->e[x->n++] = e;
        else if (xentry_better(&e, &x->e[k]))
            x->e[k] = e;
    }
    return 0;
}

void lab_xentries_free(lab_xentries *x)
{
    cJSON_Delete(x->doc);
    free(x->e);
    memset(x, 0, sizeof *x);
}

const lab_xentry *lab_xentries_find(const lab_xentries *x, const char *run, int T_eval)
{
    for (int i = 0; i < x->n; i++)
        if (x->e[i].T_eval == T_eval && strcmp(x->e[i].run, run) == 0)
            return &x->e[i];
    return NULL;
}

int lab_xentries_lengths(const lab_xentries *x, int *v, int max)
{
    int n = 0;
    for (int i = 0; i < x->n; i++) {
        int k = 0;
        while (k < n && v[k] != x->e[i].T_eval)
            k++;
        if (k == n && n < max)
            v[n++] = x->e[i].T_eval;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            int t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return n;
}
