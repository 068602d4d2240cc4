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
 * checkpoint is absent are skipped with a note). The file is rewritten
 * atomically after every entry. One process at a time works on a grid's
 * file: it holds the grid directory's lock (GRID/.lock; run directories
 * have their own), and a second process skips the grid saying so. */
#include "lab.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FORMAT "boltzattn-extrapolation"

/* The file as read (or a new, empty one), and whether it changed. */
typedef struct {
    cJSON *doc;
    cJSON *entries; /* owned by doc */
    int changed;
    int done, refused, skipped, kept;
} xfile;

static double num(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* Reads path into f: a missing file is an empty one; a damaged one is
 * refused (exit 2), since rewriting it would lose its entries. */
static int xfile_read(const command *c, const char *path, xfile *f)
{
    memset(f, 0, sizeof *f);
    if (access(path, F_OK) != 0) {
        f->doc = cJSON_CreateObject();
        if (!f->doc || !cJSON_AddStringToObject(f->doc, "format", FORMAT) ||
            !cJSON_AddNumberToObject(f->doc, "version", 1) ||
            !(f->entries = cJSON_AddArrayToObject(f->doc, "entries")))
            return fail_lib(c, "out of memory", 1);
        return 0;
    }
    char *txt = lab_slurp(path);
    f->doc = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(f->doc, "format");
    f->entries = cJSON_GetObjectItemCaseSensitive(f->doc, "entries");
    int ok = cJSON_IsString(fmt) && strcmp(fmt->valuestring, FORMAT) == 0 &&
             cJSON_IsArray(f->entries);
    for (const cJSON *e = ok ? f->entries->child : NULL; e; e = e->next) {
        const cJSON *run = cJSON_GetObjectItemCaseSensitive(e, "run");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "status");
        ok = cJSON_IsString(run) && cJSON_IsString(st) && isfinite(num(e, "T_eval")) &&
             isfinite(num(e, "items"));
        if (!ok)
            break;
    }
    if (!ok) {
        fprintf(stderr, "%s %s: %s is not an extrapolation file of this tool (format %s, "
                        "entries with run, status, T_eval and items): move it away\n",
                prog, c->cmd, path, FORMAT);
        return 2;
    }
    return 0;
}

static const cJSON *xfile_find(const xfile *f, const char *run, int T2, int items)
{
    for (const cJSON *e = f->entries->child; e; e = e->next) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(e, "run");
        if (strcmp(r->valuestring, run) == 0 && num(e, "T_eval") == T2 && num(e, "items") == items)
            return e;
    }
    return NULL;
}

static int xfile_write(const command *c, const char *path, const xfile *f)
{
    char err[BA_ERR_LEN];
    char *txt = cJSON_Print(f->doc);
    if (!txt)
        return fail_lib(c, "out of memory", 1);
    size_t n = strlen(txt);
    char *line = malloc(n + 2);
    int rc = 1;
    if (line) {
        memcpy(line, txt, n);
        memcpy(line + n, "\n", 2);
        rc = ba_write_file(path, line, n + 1, err) ? fail_lib(c, err, 1) : 0;
    } else {
        fail_lib(c, "out of memory", 1);
    }
    free(line);
    cJSON_free(txt);
    return rc;
}

/* The run's keys, as every entry opens. */
static cJSON *entry_head(const lab_run *r, int T2, int items, int B)
{
    char label[96], seed[32];
    lab_form_label(r->attn, &r->form, label, sizeof label);
    snprintf(seed, sizeof seed, "%" PRIu64, r->seed);
    cJSON *e = cJSON_CreateObject();
    int ok = e && cJSON_AddStringToObject(e, "run", r->name) &&
             cJSON_AddStringToObject(e, "variant", label) &&
             cJSON_AddStringToObject(e, "attn", ba_attn_name(r->attn)) &&
             cJSON_AddStringToObject(e, "couplings", ba_couplings_name(r->form.couplings)) &&
             cJSON_AddNumberToObject(e, "band", r->form.band) &&
             cJSON_AddStringToObject(e, "field_bias", ba_field_bias_name(r->form.field_bias)) &&
             cJSON_AddBoolToObject(e, "pos_emb", r->form.pos_emb) &&
             cJSON_AddNumberToObject(e, "T", r->T) && cJSON_AddNumberToObject(e, "C", r->C) &&
             cJSON_AddNumberToObject(e, "ffn", r->ffn) &&
             cJSON_AddStringToObject(e, "seed", seed) &&
             cJSON_AddNumberToObject(e, "steps", (double)r->steps) &&
             cJSON_AddNumberToObject(e, "T_eval", T2) &&
             cJSON_AddNumberToObject(e, "items", items) && cJSON_AddNumberToObject(e, "batch", B);
    if (!ok) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

static int add_result(cJSON *e, const char *key, const ba_eval_result *res)
{
    cJSON *o = cJSON_AddObjectToObject(e, key);
    return o && cJSON_AddNumberToObject(o, "val_loss", res->loss) &&
           cJSON_AddNumberToObject(o, "val_ppl", res->ppl) &&
           cJSON_AddNumberToObject(o, "val_acc", res->accuracy) &&
           cJSON_AddNumberToObject(o, "items", res->n_items) &&
           cJSON_AddNumberToObject(o, "targets", (double)res->n_targets);
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

/* m evaluated on the validation windows of block size T. */
static int eval_at(const command *c, ba_model *m, const ba_data_spec *spec, int T,
                   const char *path, int items, int B, ba_eval_result *res)
{
    char err[BA_ERR_LEN];
    ba_dataset *d;
    int st = open_dataset(spec, T, path, 1, &d, err);
    if (st)
        return fail_lib(c, err, input_status(st));
    st = ba_evaluate_ex(m, d, items, B, NULL, NULL, res, err);
    ba_dataset_free(d);
    if (st)
        return fail_lib(c, err, input_status(st));
    if (res->n_targets == 0 || !isfinite(res->ppl))
        return fail_lib(c, "the evaluation scored no targets", 1);
    return 0;
}

/* Loads the run's checkpoint and evaluates it at its T and at T2 into e. */
static int evaluate_run(const command *c, const lab_run *r, const char *ckpt, int T2, int items,
                        int B, const char *data_path, cJSON *e)
{
    char err[BA_ERR_LEN];
    ba_model *m, *big = NULL;
    ba_data_spec spec;
    int st = ba_checkpoint_load(ckpt, &m, &spec, err);
    if (st)
        return fail_lib(c, err, input_status(st));
    const char *path = data_path ? data_path : r->info.data_path ? r->info.data_path
                                                                 : default_data_path();
    ba_eval_result own, longer;
    int code = 0;
    /* a long model's evaluation can take minutes: say what is under way */
    fprintf(stderr, "%s: evaluating at T = %d and T = %d ...\n", r->name, r->T, T2);
    if ((st = ba_model_resize(m, T2, &big, err)))
        code = fail_lib(c, err, st == BA_ERR_NOMEM ? 1 : 2);
    if (!code)
        code = eval_at(c, m, &spec, r->T, path, items, B, &own);
    if (!code)
        code = eval_at(c, big, &spec, T2, path, items, B, &longer);
    ba_model_free(m);
    ba_model_free(big);
    if (code)
        return code;
    if (!cJSON_AddStringToObject(e, "status", "done") || !add_result(e, "at_T", &own) ||
        !add_result(e, "at_T_eval", &longer))
        return fail_lib(c, "out of memory", 1);
    printf("%s: val_ppl %.4f at T = %d, %.4f at T = %d (%d and %d windows)\n", r->name, own.ppl,
           r->T, longer.ppl, T2, own.n_items, longer.n_items);
    return 0;
}

/* One finished run: kept, refused, skipped or evaluated. */
static int one_run(const command *c, const lab_run *r, int T2, int items, int B,
                   const char *data_path, xfile *f, const char *out)
{
    if (xfile_find(f, r->name, T2, items)) {
        f->kept++;
        return 0;
    }
    char why[BA_ERR_LEN], ckpt[PATH_LEN];
    int refused = refusal(c, r, T2, why);
    if (refused < 0)
        return -refused;
    if (!refused) {
        if (mkpath(c, ckpt, "%s/model.safetensors", r->dir))
            return 2;
        if (access(ckpt, R_OK) != 0) {
            fprintf(stderr, "%s: no checkpoint (%s): skipped\n", r->name, ckpt);
            f->skipped++;
            return 0;
        }
    }
    cJSON *e = entry_head(r, T2, items, B);
    if (!e)
        return fail_lib(c, "out of memory", 1);
    int code = 0;
    if (refused) {
        if (!cJSON_AddStringToObject(e, "status", "refused") ||
            !cJSON_AddStringToObject(e, "reason", why))
            code = fail_lib(c, "out of memory", 1);
        else
            printf("%s: refused at T = %d: %s\n", r->name, T2, why);
    } else {
        code = evaluate_run(c, r, ckpt, T2, items, B, data_path, e);
    }
    if (code || !cJSON_AddItemToArray(f->entries, e)) {
        cJSON_Delete(e);
        return code ? code : fail_lib(c, "out of memory", 1);
    }
    f->changed = 1;
    refused ? f->refused++ : f->done++;
    return xfile_write(c, out, f);
}

int lab_extrapolate(const command *c, const char *dir, int T2, int items, int B,
                    const char *data_path)
{
    lab_grid g;
    int code = lab_grid_read(c, dir, &g);
    if (code)
        return code;
    if (g.task != BA_TASK_CHARLM)
        return usage_error(c, "--extrapolate: %s is a %s grid; extrapolation evaluates "
                              "language models (charlm)",
                           dir, ba_task_name(g.task));
    char out[PATH_LEN], err[BA_ERR_LEN];
    if (mkpath(c, out, "%s/extrapolation.json", dir))
        return 2;
    dir_lock lock;
    int lk = take_lock(dir, &lock, err);
    if (lk == 2) {
        fprintf(stderr, "%s: extrapolation is being done by another process (%s): skipped\n",
                dir, err);
        return 0;
    }
    if (lk)
        return fail_lib(c, err, 1);
    lab_runs rs = {0};
    lab_cells cs = {0};
    xfile f;
    if (!(code = xfile_read(c, out, &f)) && !(code = lab_runs_scan(c, dir, &rs)))
        code = lab_cells_match(c, &g, &rs, &cs);
    for (int i = 0; i < cs.n && !code; i++)
        if (cs.cells[i].run)
            code = one_run(c, cs.cells[i].run, T2, items, B > 0 ? B : g.train.batch, data_path,
                           &f, out);
    if (!code)
        printf("extrapolation to T = %d: %d evaluated, %d refused, %d kept, %d skipped "
               "(no checkpoint)%s%s\n",
               T2, f.done, f.refused, f.kept, f.skipped, f.changed ? "; wrote " : "",
               f.changed ? out : "");
    cJSON_Delete(f.doc);
    lab_cells_free(&cs);
    lab_runs_free(&rs);
    release_lock(&lock);
    return code;
}
