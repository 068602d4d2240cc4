/* What ablate's evaluation modes share (--extrapolate, extrapolate.c;
 * --eval-engines, engine_eval.c): a grid's finished runs evaluated into
 * one JSON file of the grid,
 *
 *   {"format": F, "version": 1, "entries": [{"run": NAME, "status": S,
 *     the mode's keys, ...}, ...]}
 *
 * An entry is found by its run and the mode's keys and never redone: a
 * rerun evaluates only what is missing, so an interrupted mode resumes,
 * and a clone without checkpoints keeps the committed entries (a run
 * whose checkpoint is absent is skipped with a note). The file is
 * rewritten atomically after every entry. One process at a time works on
 * a grid's file: it holds the grid directory's lock (GRID/.lock; run
 * directories have their own), and a second process skips the grid
 * saying so. */
#include "grid.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A new, empty file. */
static int file_new(const command *c, const lab_eval_mode *m, lab_eval_file *f)
{
    f->doc = cJSON_CreateObject();
    if (!f->doc || !cJSON_AddStringToObject(f->doc, "format", m->format) ||
        !cJSON_AddNumberToObject(f->doc, "version", 1) ||
        !(f->entries = cJSON_AddArrayToObject(f->doc, "entries")))
        return fail_lib(c, "out of memory", 1);
    return 0;
}

/* Reads f->path: a missing file is an empty one; a damaged one, or one
 * whose entries lack the mode's keys, is refused (exit 2), since
 * rewriting it would lose its entries. */
static int file_read(const command *c, const lab_eval_mode *m, lab_eval_file *f)
{
    if (access(f->path, F_OK) != 0)
        return file_new(c, m, f);
    char *txt = lab_slurp(f->path);
    f->doc = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(f->doc, "format");
    f->entries = cJSON_GetObjectItemCaseSensitive(f->doc, "entries");
    int ok = cJSON_IsString(fmt) && strcmp(fmt->valuestring, m->format) == 0 &&
             cJSON_IsArray(f->entries);
    for (const cJSON *e = ok ? f->entries->child : NULL; ok && e; e = e->next) {
        ok = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "run")) &&
             cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "status"));
        for (const char *const *k = m->keys; ok && *k; k++)
            ok = cJSON_GetObjectItemCaseSensitive(e, *k) != NULL;
    }
    if (ok)
        return 0;
    char keys[256] = "run, status";
    for (const char *const *k = m->keys; *k; k++) {
        size_t l = strlen(keys);
        snprintf(keys + l, sizeof keys - l, "%s%s", k[1] ? ", " : " and ", *k);
    }
    fprintf(stderr, "%s %s: %s is not %s %s file of this tool (format %s, entries with %s): "
                    "move it away\n",
            prog, c->cmd, f->path, strchr("aeiou", m->what[0]) ? "an" : "a", m->what, m->format,
            keys);
    return 2;
}

static int file_write(const command *c, const lab_eval_file *f)
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
        rc = ba_write_file(f->path, line, n + 1, err) ? fail_lib(c, err, 1) : 0;
    } else {
        fail_lib(c, "out of memory", 1);
    }
    free(line);
    cJSON_free(txt);
    return rc;
}

const struct cJSON *lab_eval_find(const lab_eval_file *f, const struct cJSON *head)
{
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(head, "run");
    for (const cJSON *e = f->entries->child; e; e = e->next) {
        int same = cJSON_Compare(cJSON_GetObjectItemCaseSensitive(e, "run"), run, 1);
        for (const char *const *k = f->mode->keys; same && *k; k++)
            same = cJSON_Compare(cJSON_GetObjectItemCaseSensitive(e, *k),
                                 cJSON_GetObjectItemCaseSensitive(head, *k), 1);
        if (same)
            return e;
    }
    return NULL;
}

int lab_eval_add(const command *c, lab_eval_file *f, struct cJSON *e, int refused)
{
    if (!cJSON_AddItemToArray(f->entries, e)) {
        cJSON_Delete(e);
        return fail_lib(c, "out of memory", 1);
    }
    f->changed = 1;
    refused ? f->refused++ : f->done++;
    return file_write(c, f);
}

struct cJSON *lab_eval_head(const lab_run *r)
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
             lab_add_pos_emb(e, r->form.pos_emb) &&
             cJSON_AddNumberToObject(e, "T", r->T) && cJSON_AddNumberToObject(e, "C", r->C) &&
             cJSON_AddNumberToObject(e, "ffn", r->ffn) &&
             cJSON_AddStringToObject(e, "seed", seed) &&
             cJSON_AddNumberToObject(e, "steps", (double)r->steps);
    if (!ok) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

int lab_eval_add_result(struct cJSON *e, const char *key, const ba_eval_result *res)
{
    cJSON *o = cJSON_AddObjectToObject(e, key);
    return o && cJSON_AddNumberToObject(o, "val_loss", res->loss) &&
           cJSON_AddNumberToObject(o, "val_ppl", res->ppl) &&
           cJSON_AddNumberToObject(o, "val_acc", res->accuracy) &&
           cJSON_AddNumberToObject(o, "items", res->n_items) &&
           cJSON_AddNumberToObject(o, "targets", (double)res->n_targets);
}

int lab_eval_ckpt(const command *c, const lab_run *r, lab_eval_file *f, char *ckpt)
{
    if (mkpath(c, ckpt, "%s/model.safetensors", r->dir))
        return -2;
    if (access(ckpt, R_OK) == 0)
        return 1;
    fprintf(stderr, "%s: no checkpoint (%s): skipped\n", r->name, ckpt);
    f->skipped++;
    return 0;
}

int lab_eval_data(const command *c, ba_model *m, const ba_data_spec *spec, int T,
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

int lab_eval_grid(const command *c, const char *dir, const lab_grid *g, const lab_eval_mode *m,
                  lab_eval_file *f)
{
    char err[BA_ERR_LEN];
    memset(f, 0, sizeof *f);
    f->mode = m;
    if (mkpath(c, f->path, "%s/%s", dir, m->file))
        return 2;
    dir_lock lock;
    int lk = take_lock(dir, &lock, err);
    for (int noted = 0; lk == 2 && m->wait; lk = take_lock(dir, &lock, err)) {
        if (!noted++)
            fprintf(stderr, "%s: %s is being done by another process (%s): waiting for it\n", dir,
                    m->what, err);
        sleep(LAB_EVAL_POLL_S);
    }
    if (lk == 2) {
        fprintf(stderr, "%s: %s is being done by another process (%s): skipped\n", dir, m->what,
                err);
        f->busy = 1;
        return 0;
    }
    if (lk)
        return fail_lib(c, err, 1);
    lab_runs rs = {0};
    lab_cells cs = {0};
    int code = file_read(c, m, f);
    if (!code && !(code = lab_runs_scan(c, dir, &rs)))
        code = lab_cells_match(c, g, &rs, &cs);
    for (int i = 0; i < cs.n && !code; i++)
        if (cs.cells[i].run)
            code = m->run(c, g, cs.cells[i].run, f, m->user);
    cJSON_Delete(f->doc);
    f->doc = NULL, f->entries = NULL;
    lab_cells_free(&cs);
    lab_runs_free(&rs);
    release_lock(&lock);
    return code;
}
