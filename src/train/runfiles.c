/* The records of a run: the lines of metrics.jsonl (ba_record) and its
 * trimming on resume, the check that a resumed run's log is its own, and the
 * run record (run.json). The loop that writes them is src/trainer.c. */
#include "train/train.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- records */

static const char *const record_names[] = {"config", "resume", "train", "eval", "quality",
                                           "final"};

/* Numbers as the log has always printed them: fixed decimals or
 * significant digits, so the log stays short and diffs stay readable. */
static int add_f(cJSON *o, const char *key, double x, int decimals)
{
    char buf[64];
    if (!isfinite(x))
        return cJSON_AddNullToObject(o, key) != NULL;
    if (decimals < 0) /* every digit */
        return cJSON_AddNumberToObject(o, key, x) != NULL;
    snprintf(buf, sizeof buf, "%.*f", decimals, x);
    return cJSON_AddNumberToObject(o, key, strtod(buf, NULL)) != NULL;
}

static int add_g(cJSON *o, const char *key, double x, int digits)
{
    char buf[64];
    if (!isfinite(x))
        return cJSON_AddNullToObject(o, key) != NULL;
    snprintf(buf, sizeof buf, "%.*g", digits, x);
    return cJSON_AddNumberToObject(o, key, strtod(buf, NULL)) != NULL;
}

/* The metrics of an evaluation: with 6 decimals in the log, with every
 * digit (decimals < 0) in the run record, whose numbers are summarised. */
static int add_eval(cJSON *o, const char *prefix, const ba_eval_result *e, int decimals)
{
    char k[3][32];
    snprintf(k[0], sizeof k[0], "%sval_loss", prefix);
    snprintf(k[1], sizeof k[1], "%sval_ppl", prefix);
    snprintf(k[2], sizeof k[2], "%sval_acc", prefix);
    return add_f(o, k[0], e->loss, decimals) && add_f(o, k[1], e->ppl, decimals) &&
           add_f(o, k[2], e->accuracy, decimals);
}

/* "approx": the approximate engines' counts of a train or eval record. */
static int add_approx(cJSON *o, const ba_record *r)
{
    if (!r->has_approx || (r->kind != BA_REC_TRAIN && r->kind != BA_REC_EVAL))
        return 1;
    const ba_approx_stats *a = &r->approx;
    cJSON *x = cJSON_AddObjectToObject(o, "approx");
    return x && cJSON_AddNumberToObject(x, "rows", (double)a->queries) &&
           add_f(x, "sweeps_mean", a->queries ? (double)a->sweeps / a->queries : 0.0, 2) &&
           cJSON_AddNumberToObject(x, "sweeps_max", a->max_sweeps) &&
           cJSON_AddNumberToObject(x, "retried", (double)a->retried) &&
           cJSON_AddNumberToObject(x, "unconverged", (double)a->unconverged);
}

static int add_record_fields(cJSON *o, const ba_record *r)
{
    if (!add_approx(o, r))
        return 0;
    switch (r->kind) {
    case BA_REC_CONFIG:
        return cJSON_AddNumberToObject(o, "params", (double)r->params) != NULL;
    case BA_REC_RESUME:
        return 1;
    case BA_REC_TRAIN:
        return add_f(o, "loss", r->loss, 6) && add_g(o, "lr", r->lr, 6) &&
               add_g(o, "grad_norm", r->grad_norm, 6) && add_f(o, "steps_per_s", r->steps_per_s, 4) &&
               add_f(o, "elapsed_s", r->elapsed_s, 3);
    case BA_REC_EVAL:
        return add_eval(o, "", &r->eval, 6) && cJSON_AddNumberToObject(o, "items", r->eval.n_items);
    case BA_REC_QUALITY:
        return cJSON_AddNumberToObject(o, "n", r->n) &&
               cJSON_AddNumberToObject(o, "instances", r->instances) && add_f(o, "tv", r->tv, 6) &&
               add_f(o, "kl", r->kl, 6) && add_f(o, "beta_eff", r->beta_eff, 6) &&
               add_f(o, "r2", r->r2, 6) && add_f(o, "tv_eff", r->tv_eff, 6) &&
               cJSON_AddNumberToObject(o, "fitted", r->fitted) &&
               (r->shots == 0 || (add_f(o, "tv_shot_floor", r->tv_shot_floor, 6) &&
                                  cJSON_AddNumberToObject(o, "shots", r->shots)));
    case BA_REC_FINAL:
        return add_eval(o, "", &r->eval, 6) && cJSON_AddNumberToObject(o, "items", r->eval.n_items) &&
               cJSON_AddNumberToObject(o, "targets", (double)r->eval.n_targets) &&
               add_f(o, "train_s", r->train_s, 3) && add_f(o, "steps_per_s", r->steps_per_s, 4) &&
               add_f(o, "train_s_total", r->train_s_total, 3) &&
               (!r->has_exact || add_eval(o, "exact_", &r->exact, 6));
    }
    return 0;
}

/* The record's object; config records carry the config and settings. */
cJSON *ba_record_object(const ba_record *r, cJSON *config, cJSON *train)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || (unsigned)r->kind > BA_REC_FINAL)
        goto fail;
    if (!cJSON_AddStringToObject(o, "event", record_names[r->kind]))
        goto fail;
    if (r->kind != BA_REC_CONFIG && !cJSON_AddNumberToObject(o, "step", (double)r->step))
        goto fail;
    if (config) {
        cJSON_AddItemToObject(o, "config", config);
        config = NULL;
    }
    if (train) {
        cJSON_AddItemToObject(o, "train", train);
        train = NULL;
    }
    if (add_record_fields(o, r))
        return o;
fail:
    cJSON_Delete(config);
    cJSON_Delete(train);
    cJSON_Delete(o);
    return NULL;
}

char *ba_record_to_json(const ba_record *r)
{
    if (!r)
        return NULL;
    cJSON *o = ba_record_object(r, NULL, NULL);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return ba_json_own(s);
}

/* A number field; null (JSON's stand-in for infinity or a missing fit) is
 * nan_value. */
static int get_num(const cJSON *o, const char *key, double nan_value, double *out, char *err)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsNull(x)) {
        *out = nan_value;
        return BA_OK;
    }
    if (!cJSON_IsNumber(x))
        return ba_fail(err, BA_ERR_FORMAT, "record field '%s' is %s, expected a number", key,
                       ba_json_type(x));
    *out = x->valuedouble;
    return BA_OK;
}

static int get_eval(const cJSON *o, const char *prefix, ba_eval_result *e, char *err)
{
    char k[3][32];
    snprintf(k[0], sizeof k[0], "%sval_loss", prefix);
    snprintf(k[1], sizeof k[1], "%sval_ppl", prefix);
    snprintf(k[2], sizeof k[2], "%sval_acc", prefix);
    int rc;
    if ((rc = get_num(o, k[0], NAN, &e->loss, err)) || (rc = get_num(o, k[1], NAN, &e->ppl, err)) ||
        (rc = get_num(o, k[2], NAN, &e->accuracy, err)))
        return rc;
    return BA_OK;
}

/* The optional "approx" object of a train or eval record. */
static int get_approx(const cJSON *o, ba_record *r, char *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "approx");
    if (!a)
        return BA_OK;
    if (!cJSON_IsObject(a))
        return ba_fail(err, BA_ERR_FORMAT, "record field 'approx' is %s, expected an object",
                       ba_json_type(a));
    double x[5];
    static const char *const keys[5] = {"rows", "sweeps_mean", "sweeps_max", "retried",
                                        "unconverged"};
    for (int i = 0; i < 5; i++) {
        int rc = get_num(a, keys[i], NAN, &x[i], err);
        if (rc)
            return rc;
        if (!(x[i] >= 0 && x[i] < 1e15))
            return ba_fail(err, BA_ERR_FORMAT, "record field 'approx.%s' = %g is not a count",
                           keys[i], x[i]);
    }
    r->has_approx = 1;
    r->approx.queries = (long)x[0];
    r->approx.sweeps = (long)llround(x[1] * x[0]);
    r->approx.max_sweeps = (int)fmin(x[2], 2e9);
    r->approx.retried = (long)x[3];
    r->approx.unconverged = (long)x[4];
    return BA_OK;
}

static int record_fields_from(const cJSON *o, ba_record *r, char *err)
{
    if ((r->kind == BA_REC_TRAIN || r->kind == BA_REC_EVAL) && get_approx(o, r, err))
        return BA_ERR_FORMAT;
    double x[8] = {0};
    int rc = BA_OK;
    switch (r->kind) {
    case BA_REC_CONFIG:
    case BA_REC_RESUME:
        return BA_OK;
    case BA_REC_TRAIN:
        if ((rc = get_num(o, "loss", NAN, &r->loss, err)) || (rc = get_num(o, "lr", NAN, &r->lr, err)) ||
            (rc = get_num(o, "grad_norm", NAN, &r->grad_norm, err)) ||
            (rc = get_num(o, "steps_per_s", NAN, &r->steps_per_s, err)) ||
            (rc = get_num(o, "elapsed_s", NAN, &r->elapsed_s, err)))
            return rc;
        return BA_OK;
    case BA_REC_EVAL:
        if ((rc = get_eval(o, "", &r->eval, err)) || (rc = get_num(o, "items", 0, &x[0], err)))
            return rc;
        r->eval.n_items = (int)x[0];
        return BA_OK;
    case BA_REC_QUALITY:
        if ((rc = get_num(o, "n", 0, &x[0], err)) || (rc = get_num(o, "instances", 0, &x[1], err)) ||
            (rc = get_num(o, "tv", NAN, &r->tv, err)) || (rc = get_num(o, "kl", INFINITY, &r->kl, err)) ||
            (rc = get_num(o, "beta_eff", NAN, &r->beta_eff, err)) ||
            (rc = get_num(o, "r2", NAN, &r->r2, err)) || (rc = get_num(o, "tv_eff", NAN, &r->tv_eff, err)))
            return rc;
        r->n = (int)x[0], r->instances = (int)x[1];
        /* older logs lack "fitted"; the floor is there for shot samplers */
        r->fitted = get_num(o, "fitted", 0, &x[2], NULL) == BA_OK ? (int)x[2] : r->instances;
        r->tv_shot_floor = NAN;
        if (cJSON_GetObjectItemCaseSensitive(o, "tv_shot_floor")) {
            if ((rc = get_num(o, "tv_shot_floor", NAN, &r->tv_shot_floor, err)) ||
                (rc = get_num(o, "shots", 0, &x[3], err)))
                return rc;
            r->shots = (int)x[3];
        }
        return BA_OK;
    case BA_REC_FINAL:
        if ((rc = get_eval(o, "", &r->eval, err)) || (rc = get_num(o, "items", 0, &x[0], err)) ||
            (rc = get_num(o, "targets", 0, &x[1], err)) || (rc = get_num(o, "train_s", NAN, &r->train_s, err)) ||
            (rc = get_num(o, "steps_per_s", NAN, &r->steps_per_s, err)))
            return rc;
        r->eval.n_items = (int)x[0], r->eval.n_targets = (long)x[1];
        if (get_num(o, "train_s_total", NAN, &r->train_s_total, NULL) != BA_OK)
            r->train_s_total = r->train_s;
        r->has_exact = cJSON_GetObjectItemCaseSensitive(o, "exact_val_loss") != NULL;
        return r->has_exact ? get_eval(o, "exact_", &r->exact, err) : BA_OK;
    }
    return rc;
}

int ba_record_from_json(const char *line, ba_record *r, char *err)
{
    if (!line || !r)
        return ba_fail(err, BA_ERR_ARG, "ba_record_from_json: line and r must not be NULL");
    memset(r, 0, sizeof *r);
    char why[BA_ERR_LEN];
    cJSON *o = ba_json_parse_strict(line, strlen(line), "the record", why);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return ba_fail(err, BA_ERR_FORMAT, "%s", o ? "not a JSON object" : why);
    }
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    int rc = ba_fail(err, BA_ERR_FORMAT, "record without a known \"event\"");
    for (int k = 0; cJSON_IsString(ev) && k <= BA_REC_FINAL; k++)
        if (strcmp(ev->valuestring, record_names[k]) == 0) {
            r->kind = (ba_record_kind)k;
            rc = BA_OK;
        }
    double step = 0;
    if (rc == BA_OK && r->kind != BA_REC_CONFIG && (rc = get_num(o, "step", 0, &step, err)) == BA_OK &&
        !(step >= 0 && step < 1e15))
        rc = ba_fail(err, BA_ERR_FORMAT, "record step %g is out of range", step);
    r->step = (long)step;
    if (rc == BA_OK)
        rc = record_fields_from(o, r, err);
    cJSON_Delete(o);
    return rc;
}

/* ------------------------------------------------------- metrics log */

int ba_log_trim(const char *path, long step, int drop_end, ba_log_check check, void *user,
                double *logged_s, char *err)
{
    *logged_s = 0;
    if (access(path, F_OK) != 0)
        return BA_OK; /* no log yet: nothing to keep */
    unsigned char *buf;
    size_t size;
    int rc = ba_read_file(path, &buf, &size, err);
    if (rc)
        return rc;
    /* The kept lines are moved down in place: w never passes line. */
    char *txt = (char *)buf, *w = txt, *end = txt + size;
    double seg = 0; /* elapsed_s of the current call's latest kept record */
    char *config = NULL; /* the first config record, for check */
    for (char *line = txt; line < end;) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        if (!nl)
            break; /* a record torn by a kill */
        size_t len = (size_t)(nl - line) + 1;
        *nl = '\0';
        ba_record r;
        int ours = ba_record_from_json(line, &r, NULL) == BA_OK;
        if (ours && r.kind == BA_REC_CONFIG && !config && !(config = strdup(line)))
            rc = ba_fail(err, BA_ERR_NOMEM, "out of memory");
        *nl = '\n';
        /* a line that is no record is not ours to judge: kept as it is;
         * with drop_end, the end's records (final, and the quality record
         * the end makes) of the step go, to be made again */
        int end_rec = ours && r.step >= step && (r.kind == BA_REC_FINAL || r.kind == BA_REC_QUALITY);
        if (!ours || r.kind == BA_REC_CONFIG || (r.step <= step && !(drop_end && end_rec))) {
            memmove(w, line, len);
            w += len;
            if (ours && r.kind == BA_REC_RESUME) { /* a new call began */
                *logged_s += seg;
                seg = 0;
            }
            if (ours && r.kind == BA_REC_TRAIN && r.elapsed_s >= 0 && isfinite(r.elapsed_s))
                seg = r.elapsed_s;
        }
        line += len;
    }
    *logged_s += seg;
    /* The caller's check comes before anything is written: a log that is
     * not the caller's stays as it was. */
    if (rc == BA_OK && check)
        rc = check(config, user, err);
    /* Replaced atomically like the other files: a kill during the rewrite
     * leaves the old log, which the next resume trims again. */
    if (rc == BA_OK)
        rc = ba_write_file(path, txt, (size_t)(w - txt), err);
    free(config);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------- run record */

int ba_machines_add(char ***v, int *n, const char *m)
{
    for (int i = 0; i < *n; i++)
        if (strcmp((*v)[i], m) == 0)
            return BA_OK;
    char **w = realloc(*v, sizeof *w * (size_t)(*n + 1));
    if (!w)
        return BA_ERR_NOMEM;
    *v = w;
    if (!(w[*n] = strdup(m)))
        return BA_ERR_NOMEM;
    (*n)++;
    return BA_OK;
}

void ba_machines_free(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static const char *const status_names[] = {"running", "stopped", "failed", "finished"};

const char *ba_run_status_name(ba_run_status s)
{
    return (unsigned)s <= BA_RUN_FINISHED ? status_names[s] : "?";
}

int ba_run_write(const char *dir, const ba_run_info *r, char *err)
{
    if (!dir || !r || !r->config_json || !r->train_json)
        return ba_fail(err, BA_ERR_ARG, "ba_run_write: dir, r and its config and train JSON "
                       "must not be NULL");
    char path[4200];
    if (snprintf(path, sizeof path, "%s/run.json", dir) >= (int)sizeof path)
        return ba_fail(err, BA_ERR_ARG, "run directory path too long");
    cJSON *o = cJSON_CreateObject();
    cJSON *cfg = r->config_json ? cJSON_Parse(r->config_json) : NULL;
    cJSON *tr = r->train_json ? cJSON_Parse(r->train_json) : NULL;
    int ok = o && cfg && tr && cJSON_AddStringToObject(o, "format", "boltzattn-run") &&
             cJSON_AddNumberToObject(o, "version", 1) &&
             cJSON_AddStringToObject(o, "status", ba_run_status_name(r->status)) &&
             cJSON_AddNumberToObject(o, "step", (double)r->step) &&
             add_f(o, "train_s", r->train_s, -1) &&
             cJSON_AddNumberToObject(o, "params", (double)r->params);
    if (ok && r->error)
        ok = cJSON_AddStringToObject(o, "error", r->error) != NULL;
    if (ok && r->n_machines > 0) {
        cJSON *ms = cJSON_AddArrayToObject(o, "machines");
        ok = ms != NULL;
        for (int i = 0; ok && i < r->n_machines; i++) {
            cJSON *m = cJSON_CreateString(r->machines[i]);
            ok = m && cJSON_AddItemToArray(ms, m);
        }
    }
    if (ok) {
        cJSON_AddItemToObject(o, "config", cfg);
        cJSON_AddItemToObject(o, "train", tr);
        cfg = tr = NULL;
    }
    if (ok && r->status == BA_RUN_FINISHED) {
        cJSON *res = cJSON_AddObjectToObject(o, "result");
        ok = res && add_eval(res, "", &r->result, -1) &&
             cJSON_AddNumberToObject(res, "items", r->result.n_items) &&
             cJSON_AddNumberToObject(res, "targets", (double)r->result.n_targets) &&
             (!r->has_exact || add_eval(res, "exact_", &r->exact, -1));
    }
    char *txt = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    cJSON_Delete(cfg);
    cJSON_Delete(tr);
    if (!txt)
        return ba_fail(err, BA_ERR_NOMEM, "cannot build %.200s", path);
    ba_file_part parts[2] = {{txt, strlen(txt)}, {"\n", 1}};
    int rc = ba_write_file_parts(path, parts, 2, err);
    cJSON_free(txt);
    return rc;
}

void ba_run_info_clear(ba_run_info *r)
{
    if (!r)
        return;
    free(r->data_path);
    free(r->config_json);
    free(r->train_json);
    free(r->error);
    ba_machines_free(r->machines, r->n_machines);
    memset(r, 0, sizeof *r);
}

static int run_from_object(const cJSON *o, ba_run_info *r, char *err)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "boltzattn-run") != 0)
        return ba_fail(err, BA_ERR_FORMAT, "not a boltzattn run record (no \"format\": "
                       "\"boltzattn-run\")");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
    int found = 0;
    for (int k = 0; cJSON_IsString(st) && k <= BA_RUN_FINISHED; k++)
        if (strcmp(st->valuestring, status_names[k]) == 0)
            r->status = (ba_run_status)k, found = 1;
    if (!found)
        return ba_fail(err, BA_ERR_FORMAT, "run record field 'status' is not one of "
                       "running|stopped|failed|finished");
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(o, "config");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(o, "train");
    char why[BA_ERR_LEN];
    int rc = ba_config_from_object(cfg, &r->config, &r->spec, why);
    if (rc)
        return ba_fail(err, BA_ERR_FORMAT, "run record field 'config': %s", why);
    if ((rc = ba_settings_from_object(tr, &r->settings, &r->data_path, &r->threads, why)))
        return ba_fail(err, BA_ERR_FORMAT, "run record field 'train': %s", why);
    r->config_json = ba_json_own(cJSON_PrintUnformatted(cfg));
    r->train_json = ba_json_own(cJSON_PrintUnformatted(tr));
    if (!r->config_json || !r->train_json)
        return ba_fail(err, BA_ERR_NOMEM, "out of memory");
    double x = 0;
    if ((rc = get_num(o, "step", 0, &x, err)))
        return rc;
    r->step = (long)x;
    if ((rc = get_num(o, "train_s", 0, &r->train_s, err)) || (rc = get_num(o, "params", 0, &x, err)))
        return rc;
    r->params = (size_t)x;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (cJSON_IsString(e) && !(r->error = strdup(e->valuestring)))
        return ba_fail(err, BA_ERR_NOMEM, "out of memory");
    /* absent from records written before machines were recorded */
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "machines"), *m;
    if (ms && !cJSON_IsArray(ms))
        return ba_fail(err, BA_ERR_FORMAT, "run record field 'machines' is not an array");
    cJSON_ArrayForEach(m, ms) {
        if (!cJSON_IsString(m))
            return ba_fail(err, BA_ERR_FORMAT, "run record field 'machines' holds a non-string");
        if (ba_machines_add(&r->machines, &r->n_machines, m->valuestring))
            return ba_fail(err, BA_ERR_NOMEM, "out of memory");
    }
    if (r->status != BA_RUN_FINISHED)
        return BA_OK;
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(o, "result");
    if (!cJSON_IsObject(res))
        return ba_fail(err, BA_ERR_FORMAT, "a finished run record lacks its 'result'");
    double items, targets;
    if ((rc = get_eval(res, "", &r->result, err)) || (rc = get_num(res, "items", 0, &items, err)) ||
        (rc = get_num(res, "targets", 0, &targets, err)))
        return rc;
    r->result.n_items = (int)items, r->result.n_targets = (long)targets;
    r->has_exact = cJSON_GetObjectItemCaseSensitive(res, "exact_val_loss") != NULL;
    return r->has_exact ? get_eval(res, "exact_", &r->exact, err) : BA_OK;
}

int ba_run_read(const char *dir, ba_run_info *r, char *err)
{
    if (!dir || !r)
        return ba_fail(err, BA_ERR_ARG, "ba_run_read: dir and r must not be NULL");
    memset(r, 0, sizeof *r);
    char path[4200];
    if (snprintf(path, sizeof path, "%s/run.json", dir) >= (int)sizeof path)
        return ba_fail(err, BA_ERR_ARG, "run directory path too long");
    unsigned char *buf;
    size_t len;
    int rc = ba_read_file(path, &buf, &len, err);
    if (rc)
        return rc;
    char why[BA_ERR_LEN];
    cJSON *o = ba_json_parse_strict((const char *)buf, len, path, why);
    free(buf);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return o ? ba_fail(err, BA_ERR_FORMAT, "%.200s is not a JSON object", path)
                 : ba_fail(err, BA_ERR_FORMAT, "%s", why);
    }
    rc = run_from_object(o, r, why);
    cJSON_Delete(o);
    if (rc) {
        ba_run_info_clear(r);
        return ba_fail(err, rc, "%.200s: %s", path, why);
    }
    return BA_OK;
}

/* 1 after writing the message when the state's object (st) and the log's
 * (lg) differ in a key other than "threads" and "data" (a resumed run may
 * change both); 0 when they agree. */
static int differs(const char *what, const cJSON *st, const cJSON *lg, const char *logpath,
                   char *err)
{
    for (int pass = 0; pass < 2; pass++)
        for (const cJSON *x = (pass ? lg : st)->child; x; x = x->next) {
            if (!strcmp(x->string, "threads") || !strcmp(x->string, "data"))
                continue;
            const cJSON *y = cJSON_GetObjectItemCaseSensitive(pass ? st : lg, x->string);
            if (y && cJSON_Compare(x, y, 1))
                continue;
            const cJSON *vs = pass ? y : x, *vl = pass ? x : y;
            char *ps = vs ? cJSON_PrintUnformatted(vs) : NULL;
            char *pl = vl ? cJSON_PrintUnformatted(vl) : NULL;
            ba_fail(err, BA_ERR_ARG,
                    "%.200s is the log of another run: its %s has %s = %.60s, the state's "
                    "%.60s; resume a state with its own log, or start a new run",
                    logpath, what, x->string, pl ? pl : "(nothing)", ps ? ps : "(nothing)");
            cJSON_free(ps);
            cJSON_free(pl);
            return 1;
        }
    return 0;
}

/* The log of a restored run must be its own (ba_log_same_run in
 * train/train.h): the config record's model, data and settings, compared as
 * the state's after both are read by the
 * same readers (so a log of an older version compares by meaning, not by
 * spelling). */
int ba_log_same_run(const char *logpath, const char *config_line, const ba_config *mine,
                    const ba_data_spec *mine_spec, const char *mine_train, char *err)
{
    cJSON *rec = cJSON_Parse(config_line);
    const cJSON *lc = cJSON_GetObjectItemCaseSensitive(rec, "config");
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(rec, "train");
    char *ctext = lc ? cJSON_PrintUnformatted(lc) : NULL;
    ba_config cfg;
    ba_data_spec spec;
    ba_train_settings s;
    char why[BA_ERR_LEN];
    int rc = BA_OK;
    if (!ctext || ba_config_from_json(ctext, &cfg, &spec, why) ||
        ba_settings_from_object(lt, &s, NULL, NULL, why))
        rc = ba_fail(err, BA_ERR_FORMAT, "%.200s: its config record is unreadable: %s",
                     logpath, ctext ? why : "no config");
    cJSON_free(ctext);
    cJSON *mine_c = NULL, *log_c = NULL, *mine_t = NULL, *log_t = NULL;
    if (rc == BA_OK) {
        mine_c = ba_config_json_object(mine, mine_spec);
        log_c = ba_config_json_object(&cfg, &spec);
        mine_t = cJSON_Parse(mine_train);
        log_t = ba_settings_json_object(&s, NULL);
        /* the data's fingerprint, where the log has it */
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(lt, "data_hash");
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(lt, "data_bytes");
        if (log_t && h && b) {
            cJSON_AddItemToObject(log_t, "data_bytes", cJSON_Duplicate(b, 1));
            cJSON_AddItemToObject(log_t, "data_hash", cJSON_Duplicate(h, 1));
        } else if (mine_t) {
            cJSON_DeleteItemFromObjectCaseSensitive(mine_t, "data_bytes");
            cJSON_DeleteItemFromObjectCaseSensitive(mine_t, "data_hash");
        }
        if (!mine_c || !log_c || !mine_t || !log_t)
            rc = ba_fail(err, BA_ERR_NOMEM, "out of memory");
        else if (differs("config", mine_c, log_c, logpath, err) ||
                 differs("settings", mine_t, log_t, logpath, err))
            rc = BA_ERR_ARG;
    }
    cJSON_Delete(mine_c), cJSON_Delete(log_c), cJSON_Delete(mine_t), cJSON_Delete(log_t);
    cJSON_Delete(rec);
    return rc;
}

/* The log opened for appending (ba_log_open in train/train.h), never through a symbolic link (a planted
 * link would send the records, or a fresh run's truncation, to its target)
 * and only when it is a regular file; truncated for a fresh run. */
FILE *ba_log_open(const char *path, int fresh)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
                            (fresh ? O_TRUNC : 0), 0666);
    struct stat sb;
    if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    FILE *f = fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0 ? fdopen(fd, "a") : NULL;
    if (!f && fd >= 0)
        close(fd);
    return f;
}
