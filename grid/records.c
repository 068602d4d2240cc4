/* The one reader of run directories and grids for the lab (see lab.h):
 * run records, metrics logs, grid.json, and the grid's cells matched with
 * the runs that fill them. */
#include "grid.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- runs */

char *lab_slurp(const char *path)
{
    unsigned char *buf;
    size_t n;
    return ba_read_file(path, &buf, &n, NULL) == BA_OK ? (char *)buf : NULL;
}

/* The first line of a file (malloc'd, without its newline), or NULL when
 * it has no whole first line. */
static char *first_line(const char *path)
{
    char *txt = lab_slurp(path);
    char *nl = txt ? strchr(txt, '\n') : NULL;
    if (!nl) {
        free(txt);
        return NULL;
    }
    *nl = '\0';
    return txt;
}

/* A number of a legacy result.json, or fail. */
static int legacy_num(const cJSON *o, const char *key, double *out)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(x))
        return -1;
    *out = x->valuedouble;
    return 0;
}

/* A run written before run records: result.json (the result ablate kept)
 * and the config record heading metrics.jsonl (config and settings). */
static int read_legacy(const char *dir, ba_run_info *r, char *err)
{
    char path[PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/result.json", dir);
    char *txt = lab_slurp(path);
    if (!txt)
        return ba_fail(err, BA_ERR_IO, "%.200s has no run record", dir);
    cJSON *res = cJSON_Parse(txt);
    free(txt);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *line = first_line(path);
    cJSON *head = line ? cJSON_Parse(line) : NULL;
    free(line);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(head, "config");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(head, "train");
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(head, "event");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(head, "params");
    int rc = BA_OK;
    static const char *const keys[] = {"steps", "val_loss", "val_ppl", "val_acc",
                                       "items", "targets", "wall_s"};
    double v[7];
    for (int i = 0; i < 7 && rc == BA_OK; i++)
        if (legacy_num(res, keys[i], &v[i]))
            rc = ba_fail(err, BA_ERR_FORMAT, "%.200s/result.json lacks '%s'", dir, keys[i]);
    if (rc == BA_OK && (!cJSON_IsString(ev) || strcmp(ev->valuestring, "config") != 0 ||
                        !cJSON_IsObject(cfg) || !cJSON_IsObject(tr)))
        rc = ba_fail(err, BA_ERR_FORMAT, "%.200s/metrics.jsonl does not open with a "
                            "config record", dir);
    char why[BA_ERR_LEN];
    if (rc == BA_OK) {
        r->config_json = cJSON_PrintUnformatted(cfg);
        r->train_json = cJSON_PrintUnformatted(tr);
        if (!r->config_json || !r->train_json)
            rc = ba_fail(err, BA_ERR_NOMEM, "out of memory");
    }
    if (rc == BA_OK && (rc = ba_config_from_json(r->config_json, &r->config, &r->spec, why)))
        ba_fail(err, rc, "%.200s: the config record: %s", dir, why);
    if (rc == BA_OK &&
        (rc = ba_train_settings_from_json(r->train_json, &r->settings, &r->data_path, why)))
        ba_fail(err, rc, "%.200s: the config record: %s", dir, why);
    if (rc == BA_OK) { /* the config as this version writes it ("head" included); the
                          * settings stay as logged (they name the run's thread count) */
        free(r->config_json);
        if (!(r->config_json = ba_config_to_json(&r->config, &r->spec)))
            rc = ba_fail(err, BA_ERR_NOMEM, "out of memory");
    }
    if (rc == BA_OK) {
        const cJSON *th = cJSON_GetObjectItemCaseSensitive(tr, "threads");
        r->threads = cJSON_IsNumber(th) ? (int)th->valuedouble : 0;
        r->params = cJSON_IsNumber(params) ? (size_t)params->valuedouble : 0;
        r->status = BA_RUN_FINISHED;
        r->step = (long)v[0];
        r->result.loss = v[1], r->result.ppl = v[2], r->result.accuracy = v[3];
        r->result.n_items = (int)v[4], r->result.n_targets = (long)v[5];
        r->train_s = v[6];
        double x[3];
        r->has_exact = !legacy_num(res, "exact_val_loss", &x[0]) &&
                       !legacy_num(res, "exact_val_ppl", &x[1]) &&
                       !legacy_num(res, "exact_val_acc", &x[2]);
        if (r->has_exact)
            r->exact.loss = x[0], r->exact.ppl = x[1], r->exact.accuracy = x[2];
    }
    cJSON_Delete(res);
    cJSON_Delete(head);
    return rc;
}

/* The key of a finished run's result that is not a finite number, or
 * NULL: the metrics summaries and tables show (the grid's and the loss)
 * and the training time. */
static const char *finite_result(const lab_run *r)
{
    const ba_run_info *i = &r->info;
    int lm = r->task == BA_TASK_CHARLM;
    if (!r->finished)
        return NULL;
    if (!isfinite(i->result.loss))
        return "val_loss";
    if (!isfinite(r->value))
        return lm ? "val_ppl" : "val_acc";
    if (r->has_exact && !isfinite(i->exact.loss))
        return "exact_val_loss";
    if (r->has_exact && !isfinite(r->exact_value))
        return lm ? "exact_val_ppl" : "exact_val_acc";
    return isfinite(r->wall_s) ? NULL : "wall_s";
}

int lab_run_read(const char *dir, lab_run *r, char *err)
{
    memset(r, 0, sizeof *r);
    int rc = ba_run_read(dir, &r->info, err);
    if (rc == BA_ERR_IO && access(dir, F_OK) == 0) {
        char path[PATH_LEN + 16];
        snprintf(path, sizeof path, "%s/run.json", dir);
        struct stat sb;
        if (lstat(path, &sb) != 0) { /* no run.json: perhaps an older run */
            memset(&r->info, 0, sizeof r->info);
            rc = read_legacy(dir, &r->info, err);
            r->legacy = rc == BA_OK;
        }
    }
    if (rc) {
        ba_run_info_clear(&r->info);
        return rc;
    }
    if (!(r->dir = strdup(dir))) {
        ba_run_info_clear(&r->info);
        return ba_fail(err, BA_ERR_NOMEM, "out of memory");
    }
    const char *slash = strrchr(r->dir, '/');
    r->name = slash ? slash + 1 : r->dir;
    const ba_run_info *i = &r->info;
    r->task = i->spec.task;
    r->attn = i->config.attn;
    r->form = lab_form_of(&i->config);
    r->sampler = i->config.sampler.kind;
    r->shots = r->sampler == BA_SAMPLER_EXACT ? 0 : i->config.sampler.shots;
    r->T = i->config.block_size, r->C = i->config.n_embd, r->ffn = i->config.ffn;
    r->seed = i->settings.seed;
    r->steps = i->settings.steps;
    r->finished = i->status == BA_RUN_FINISHED;
    int lm = r->task == BA_TASK_CHARLM;
    r->value = lm ? i->result.ppl : i->result.accuracy;
    r->has_exact = i->has_exact;
    r->exact_value = lm ? i->exact.ppl : i->exact.accuracy;
    r->wall_s = i->train_s;
    const char *bad = finite_result(r);
    if (bad) { /* a hand-edited record (1e999): no table shows it */
        int rc = ba_fail(err, BA_ERR_FORMAT, "%.200s/%s: '%s' is not a finite number", dir,
                         r->legacy ? "result.json" : "run.json", bad);
        lab_run_free(r);
        return rc;
    }
    return BA_OK;
}

void lab_run_free(lab_run *r)
{
    if (!r)
        return;
    ba_run_info_clear(&r->info);
    free(r->dir);
    memset(r, 0, sizeof *r);
}

void lab_run_variant(const lab_run *r, char *buf, size_t n)
{
    char v[96];
    lab_form_label(r->attn, &r->form, v, sizeof v);
    if (r->sampler == BA_SAMPLER_EXACT)
        snprintf(buf, n, "%s", v);
    else
        snprintf(buf, n, "%s-%s-S%d", v, ba_sampler_name(r->sampler), r->shots);
}

char *lab_run_sampler_json(const lab_run *r)
{
    cJSON *o = cJSON_Parse(r->info.config_json);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "sampler");
    char *txt = s ? cJSON_PrintUnformatted(s) : NULL;
    cJSON_Delete(o);
    return txt;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int lab_list_dir(const char *dir, int (*keep)(const char *, const char *),
                 int (*cmp)(const void *, const void *), char ***names, int *n)
{
    *names = NULL, *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int cap = 0, bad = 0;
    for (struct dirent *e; !bad && (e = readdir(d));) {
        if (e->d_name[0] == '.' || (keep && !keep(dir, e->d_name)))
            continue;
        if (*n == cap) {
            char **p = realloc(*names, sizeof **names * (size_t)(cap = cap ? 2 * cap : 64));
            bad = !p;
            if (p)
                *names = p;
        }
        if (!bad && !((*names)[*n] = strdup(e->d_name)))
            bad = 1;
        *n += !bad;
    }
    closedir(d);
    if (*n)
        qsort(*names, (size_t)*n, sizeof **names, cmp ? cmp : name_cmp);
    return bad ? -1 : 0;
}

void lab_names_free(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Whether dir has an entry run.json of any kind (a dangling link, a FIFO,
 * a directory...): a record that is there but cannot be read is an error,
 * never a run skipped as unfinished. */
static int record_there(const char *dir)
{
    char path[PATH_LEN + 16];
    struct stat sb;
    snprintf(path, sizeof path, "%s/run.json", dir);
    return lstat(path, &sb) == 0;
}

int lab_runs_scan(const command *c, const char *grid, lab_runs *out)
{
    out->v = NULL, out->n = 0;
    char path[PATH_LEN];
    struct stat sb;
    if (mkpath(c, path, "%s/runs", grid))
        return 1;
    if (lstat(path, &sb) == 0 && (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        return usage_error(c, "%s is not a directory of runs", path);
    char **names;
    int nn, code = 0;
    if (lab_list_dir(path, NULL, NULL, &names, &nn)) {
        fprintf(stderr, "%s %s: out of memory\n", prog, c->cmd);
        code = 1;
    }
    if (!code && nn && !(out->v = calloc((size_t)nn, sizeof *out->v))) {
        fprintf(stderr, "%s %s: out of memory\n", prog, c->cmd);
        code = 1;
    }
    for (int i = 0; i < nn && !code; i++) {
        char dir[PATH_LEN], err[BA_ERR_LEN];
        if (mkpath(c, dir, "%s/runs/%s", grid, names[i])) {
            code = 1;
            break;
        }
        int st = lab_run_read(dir, &out->v[out->n], err);
        /* Not there when read, there now: another process's run finished
         * or saved in between (records are renamed into place whole), so
         * read it again; only a record that is there and still cannot be
         * read is an error. */
        if (st == BA_ERR_IO && record_there(dir))
            st = lab_run_read(dir, &out->v[out->n], err);
        if (st == BA_OK)
            out->n++;
        else if (st == BA_ERR_NOMEM)
            code = fail_lib(c, err, 1);
        else if (st != BA_ERR_IO)
            fprintf(stderr, "%s %s: warning: %s; run left out\n", prog, c->cmd, err);
        else if (record_there(dir))
            code = fail_lib(c, err, 2); /* a FIFO, a directory, a loop */
    }
    lab_names_free(names, nn);
    if (code)
        lab_runs_free(out);
    return code;
}

void lab_runs_free(lab_runs *rs)
{
    for (int i = 0; i < rs->n; i++)
        lab_run_free(&rs->v[i]);
    free(rs->v);
    rs->v = NULL, rs->n = 0;
}

int lab_metrics_read(const command *c, const char *dir, ba_record **recs, int *n)
{
    *recs = NULL, *n = 0;
    char path[PATH_LEN], err[BA_ERR_LEN];
    if (mkpath(c, path, "%s/metrics.jsonl", dir))
        return 1;
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return 0; /* a run without a log has no records */
    unsigned char *buf;
    size_t size;
    if (ba_read_file(path, &buf, &size, err) != BA_OK) /* a FIFO, a directory, a loop */
        return fail_lib(c, err, 2);
    char *txt = (char *)buf, *end = txt + size;
    long lineno = 0;
    int cap = 0, code = 0;
    for (char *line = txt; line < end && !code;) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t len = nl ? (size_t)(nl - line) : (size_t)(end - line);
        line[len] = '\0'; /* the newline, or the NUL ba_read_file appends */
        char *this = line;
        line += len + 1;
        lineno++;
        if (strspn(this, " \t\r") == len)
            continue;
        ba_record r;
        if (ba_record_from_json(this, &r, NULL) != BA_OK) {
            cJSON *o = cJSON_Parse(this);
            if (!o && !nl)
                break; /* a torn last record */
            if (!o)
                fprintf(stderr, "%s %s: warning: %s:%ld: not JSON, line skipped\n", prog, c->cmd,
                        path, lineno);
            cJSON_Delete(o); /* JSON, but no record this reader knows */
            continue;
        }
        if (r.kind == BA_REC_CONFIG)
            continue;
        if (*n == cap) {
            ba_record *p = realloc(*recs, sizeof **recs * (size_t)(cap = cap ? 2 * cap : 256));
            if (!p) {
                code = fail_lib(c, "out of memory", 1);
                break;
            }
            *recs = p;
        }
        (*recs)[(*n)++] = r;
    }
    free(buf);
    return code;
}

/* ------------------------------------------------ copies of runs */

/* Copies the regular files of run directory src into dst (created), the
 * lock file excepted. 0, or -1 with err filled. (declared in grid.h) */
int lab_copy_run(const char *src, const char *dst, char *err)
{
    if (mkdir(dst, 0755) != 0 && errno != EEXIST)
        return ba_fail(err, -1, "cannot create %.200s: %s", dst, strerror(errno));
    DIR *d = opendir(src);
    if (!d)
        return ba_fail(err, -1, "cannot read %.200s: %s", src, strerror(errno));
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char from[PATH_LEN + 256], to[PATH_LEN + 256];
        snprintf(from, sizeof from, "%s/%s", src, e->d_name);
        snprintf(to, sizeof to, "%s/%s", dst, e->d_name);
        struct stat st;
        if (stat(from, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        unsigned char *buf;
        size_t len;
        rc = ba_read_file(from, &buf, &len, err);
        if (rc == BA_OK) {
            rc = ba_write_file(to, buf, len, err);
            free(buf);
        }
    }
    closedir(d);
    return rc ? -1 : 0;
}

/* Removes a run directory's regular files and the directory itself. */
void lab_remove_run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char f[PATH_LEN * 2];
        snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(f, &st) == 0 && S_ISREG(st.st_mode))
            unlink(f);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}
