/* What makes a run a grid's cell beyond its keys: every setting that
 * changes its result. ablate compares the record of each run that fills a
 * cell with what the grid asks, and a summary compares the options it was
 * given with the grid's record; a difference is named key by key. */
#include "grid.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Whether key is one of skip (NULL-ended; NULL: none). */
static int skipped(const char *key, const char *const *skip)
{
    for (int i = 0; skip && skip[i]; i++)
        if (strcmp(key, skip[i]) == 0)
            return 1;
    return 0;
}

/* A value as compact JSON into buf ("(none)" when absent). */
static void shown(const cJSON *x, char *buf, size_t n)
{
    char *t = x ? cJSON_PrintUnformatted(x) : NULL;
    snprintf(buf, n, "%s", t ? t : "(none)");
    cJSON_free(t);
}

/* The first key of a or b (objects, descended into, keys joined with '.')
 * whose values differ, into d; 1 when there is one. */
static int first_diff(const cJSON *a, const cJSON *b, const char *prefix,
                      const char *const *skip, lab_diff *d)
{
    for (int side = 0; side < 2; side++)
        for (const cJSON *x = (side ? b : a)->child; x; x = x->next) {
            if (!x->string || skipped(x->string, skip))
                continue;
            const cJSON *ya = cJSON_GetObjectItemCaseSensitive(a, x->string);
            const cJSON *yb = cJSON_GetObjectItemCaseSensitive(b, x->string);
            char key[sizeof d->key];
            snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", x->string);
            if (cJSON_IsObject(ya) && cJSON_IsObject(yb)) {
                if (first_diff(ya, yb, key, skip, d))
                    return 1;
                continue;
            }
            if (ya && yb && cJSON_Compare(ya, yb, 1))
                continue;
            snprintf(d->key, sizeof d->key, "%s", key);
            shown(ya, d->a, sizeof d->a);
            shown(yb, d->b, sizeof d->b);
            return 1;
        }
    return 0;
}

int lab_json_diff(const char *ja, const char *jb, const char *const *skip, lab_diff *d)
{
    cJSON *a = ja ? cJSON_Parse(ja) : NULL, *b = jb ? cJSON_Parse(jb) : NULL;
    int rc = -1;
    if (cJSON_IsObject(a) && cJSON_IsObject(b))
        rc = first_diff(a, b, "", skip, d);
    cJSON_Delete(a);
    cJSON_Delete(b);
    return rc;
}

/* The settings that leave a run's result as it is: the thread count (the
 * runs are bit-identical at any), the data's path (the same text may
 * move; a charlm run's vocabulary is compared with its config), and how
 * often it logs and saves. */
static const char *const result_free[] = {"threads", "data", "log_every", "save_every", NULL};

int lab_run_differs(const lab_grid *g, const lab_cell *x, const lab_run *r, lab_diff *d)
{
    ba_config want = lab_cell_config(g, x->arm, x->T, x->C, x->ffn), got = r->info.config;
    ba_data_spec spec = g->data;
    if (g->task == BA_TASK_CHARLM) { /* the vocabulary is the data's */
        want.vocab_size = got.vocab_size, want.out_size = got.out_size;
        spec = r->info.spec;
    }
    /* the inference was matched with the cell already (lab_cells_match:
     * any exact engine is any other) */
    got.engine = want.engine, got.approx = want.approx, got.window = want.window;
    char *ja = ba_config_to_json(&got, &r->info.spec), *jb = ba_config_to_json(&want, &spec);
    int rc = ja && jb ? lab_json_diff(ja, jb, NULL, d) : -1;
    free(ja), free(jb);
    if (rc)
        return rc;
    ba_train_settings ts = g->train;
    ts.seed = x->seed;
    ja = ba_train_settings_to_json(&r->info.settings, NULL);
    jb = ba_train_settings_to_json(&ts, NULL);
    rc = ja && jb ? lab_json_diff(ja, jb, result_free, d) : -1;
    free(ja), free(jb);
    return rc;
}
