/* The approx document's table of exact-trained models evaluated with
 * each engine (lab/approx_train_doc.c writes the section around it), from
 * a grid's engines.json (boltzattn-lab eval-engines, lab/engine_eval.c): per
 * engine and setting (window, damping, tol, max-iter, items, variant) the
 * mean over runs of the validation perplexity with the engine and with
 * the model's own engine, the change paired per run with its 95 %
 * Student-t interval, the unconverged rows over all rows evaluated and the
 * mean sweeps per row; refused entries counted with the first reason.
 * Every field read is checked (approx_doc.c's readers): a damaged file is
 * bad input (exit 2) naming the field. */
#include "approx.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A row of the evaluation table: an engine with its settings. */
typedef struct {
    char engine[16], variant[96], reason[1024];
    int window, items, max_iter, has_approx;
    double damping, tol;
    int done, refused;
    double *with, *own; /* done values (malloc'd, sized by the file's entries) */
    double rows, unconverged, sweeps; /* sums (sweeps weighted by rows) */
} td_erow;

struct ax_evals {
    td_erow *e; /* as many as the file has entries */
    int ne;
};

/* The row of entry x in s (made when new; s->e holds cap rows). */
static td_erow *erow_of(ax_evals *s, const td_erow *x, int cap)
{
    for (int i = 0; i < s->ne; i++) {
        td_erow *e = &s->e[i];
        if (!strcmp(e->engine, x->engine) && !strcmp(e->variant, x->variant) &&
            e->window == x->window && e->items == x->items && e->has_approx == x->has_approx &&
            (!x->has_approx || (e->damping == x->damping && e->tol == x->tol &&
                                e->max_iter == x->max_iter)))
            return e;
    }
    td_erow *e = &s->e[s->ne++];
    *e = *x;
    e->with = calloc((size_t)cap + 1, sizeof(double));
    e->own = calloc((size_t)cap + 1, sizeof(double));
    return e->with && e->own ? e : NULL;
}

/* The keys of an entry into x; 0 or an exit code. */
static int rd_keys(ax_reader *r, const cJSON *o, td_erow *x, int *T, int *done)
{
    char status[16];
    ba_engine e;
    int rc;
    if (!cJSON_IsObject(o))
        return ax_bad(r, "");
    if ((rc = ax_rd_str(r, o, "engine", x->engine, sizeof x->engine)) ||
        (ba_engine_parse(x->engine, &e, NULL) && (rc = ax_bad(r, "engine"))) ||
        (rc = ax_rd_str(r, o, "variant", x->variant, sizeof x->variant)) ||
        (rc = ax_rd_str(r, o, "status", status, sizeof status)) ||
        (strcmp(status, "done") && strcmp(status, "refused") && (rc = ax_bad(r, "status"))) ||
        (rc = ax_rd_int(r, o, "T", 1, BA_MAX_BLOCK, T)) ||
        (rc = ax_rd_int(r, o, "window", 0, BA_MAX_BAND, &x->window)) ||
        (rc = ax_rd_int(r, o, "items", 0, 1 << 30, &x->items)))
        return rc;
    *done = !strcmp(status, "done");
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(o, "approx");
    if (cJSON_IsNull(ap))
        return 0;
    if (!cJSON_IsObject(ap))
        return ax_bad(r, "approx");
    ax_reader ra = *r;
    snprintf(ra.where, sizeof ra.where, "%.80sapprox.", r->where);
    x->has_approx = 1;
    return ax_rd_num(&ra, ap, "damping", 1e-300, 1, 0, &x->damping) ||
                   ax_rd_num(&ra, ap, "tol", 1e-300, 1, 0, &x->tol) ||
                   ax_rd_int(&ra, ap, "max_iter", 1, BA_APPROX_MAX_ITER, &x->max_iter)
               ? 2
               : 0;
}

/* A done entry's numbers into row e. */
static int rd_done(const ax_reader *r, const cJSON *o, td_erow *e)
{
    static const char *const parts[] = {"own", "with", "stats"};
    double v[5];
    for (int p = 0; p < 3; p++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, parts[p]);
        ax_reader rp = *r;
        snprintf(rp.where, sizeof rp.where, "%.80s%s.", r->where, parts[p]);
        if (!cJSON_IsObject(x))
            return ax_bad(r, parts[p]);
        int rc = p < 2 ? ax_rd_num(&rp, x, "val_ppl", 1, INFINITY, 0, &v[p])
                       : ax_rd_num(&rp, x, "rows", 0, INFINITY, 0, &v[2]) ||
                                 ax_rd_num(&rp, x, "unconverged", 0, INFINITY, 0, &v[3]) ||
                                 ax_rd_num(&rp, x, "sweeps_mean", 0, INFINITY, 0, &v[4])
                             ? 2
                             : 0;
        if (rc)
            return rc;
    }
    e->own[e->done] = v[0], e->with[e->done++] = v[1];
    e->rows += v[2], e->unconverged += v[3], e->sweeps += v[4] * v[2];
    return 0;
}

int ax_evals_read(const command *c, const char *path, int T, ax_evals **out)
{
    *out = NULL;
    char *txt = lab_slurp(path);
    if (!txt)
        return 0; /* none yet */
    cJSON *root = cJSON_Parse(txt);
    free(txt);
    ax_reader r = {c, path, ""};
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *es = cJSON_GetObjectItemCaseSensitive(root, "entries");
    int rc = 0, i = 0, cap = cJSON_GetArraySize(es);
    ax_evals *s = calloc(1, sizeof *s);
    if (!s || !(s->e = calloc((size_t)cap + 1, sizeof *s->e)))
        rc = fail_lib(c, "out of memory", 1);
    else if (!root)
        rc = usage_error(c, "%s is not valid JSON", path);
    else if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "boltzattn-engine-eval") != 0)
        rc = ax_bad(&r, "format");
    else if (!cJSON_IsArray(es))
        rc = ax_bad(&r, "entries");
    for (const cJSON *o = rc ? NULL : es->child; o && !rc; o = o->next, i++) {
        td_erow x;
        int Te = 0, done = 0;
        memset(&x, 0, sizeof x);
        snprintf(r.where, sizeof r.where, "entries[%d].", i);
        if ((rc = rd_keys(&r, o, &x, &Te, &done)) || Te != T)
            continue;
        td_erow *e = erow_of(s, &x, cap);
        if (!e)
            rc = fail_lib(c, "out of memory", 1);
        else if (done)
            rc = rd_done(&r, o, e);
        else if (!(rc = ax_rd_str(&r, o, "reason", x.reason, sizeof x.reason)) && !e->refused++)
            memcpy(e->reason, x.reason, sizeof e->reason);
    }
    cJSON_Delete(root);
    if (rc)
        ax_evals_free(s);
    else
        *out = s;
    return rc;
}

void ax_evals_free(ax_evals *s)
{
    for (int k = 0; s && s->e && k < s->ne; k++)
        free(s->e[k].with), free(s->e[k].own);
    if (s)
        free(s->e);
    free(s);
}

static void eval_row(FILE *f, const td_erow *e)
{
    char set[128] = "";
    if (e->has_approx)
        snprintf(set, sizeof set, "damping %g, tol %g, max-iter %d", e->damping, e->tol,
                 e->max_iter);
    fprintf(f, "| %s", e->engine);
    if (!strcmp(e->engine, "hybrid"))
        fprintf(f, " (W = %d)", e->window);
    if (strcmp(e->variant, "boltzmann") != 0)
        fprintf(f, " (%s)", e->variant);
    fprintf(f, " | %s | ", *set ? set : "exact");
    if (e->items)
        fprintf(f, "%d", e->items);
    else
        fprintf(f, "all");
    fprintf(f, " | %d", e->done);
    if (e->refused)
        fprintf(f, " (%d refused: %s)", e->refused, e->reason);
    if (!e->done) {
        fprintf(f, " | no data | no data | n/a | – | – |\n");
        return;
    }
    double *d = malloc(sizeof(double) * (size_t)e->done);
    for (int k = 0; d && k < e->done; k++)
        d[k] = lab_effect(BA_TASK_CHARLM, e->with[k], e->own[k]);
    fprintf(f, " | %.3f | %.3f |", ba_summarize(e->with, e->done).mean,
            ba_summarize(e->own, e->done).mean);
    ax_change_cell(f, d, d ? e->done : 0, "n/a");
    free(d);
    if (e->has_approx)
        fprintf(f, " %.0f of %.0f | %.1f |\n", e->unconverged, e->rows,
                e->rows > 0 ? e->sweeps / e->rows : 0.0);
    else
        fprintf(f, " – (exact) | – |\n");
}

void ax_evals_table(FILE *f, const ax_evals *s)
{
    fprintf(f, "| engine | settings | items | runs | val ppl with the engine | with its own "
               "exact engine | change [95 %% CI] | unconverged rows | sweeps (mean) |\n"
               "|---|---|---|---|---|---|---|---|---|\n");
    for (int p = 0; p <= AX_NPLAN; p++) {
        int found = 0;
        for (int i = 0; i < s->ne; i++)
            if (ax_plan_index(s->e[i].engine) == p)
                found = 1, eval_row(f, &s->e[i]);
        if (!found && p < AX_NPLAN)
            fprintf(f, "| %s | no entry | – | 0 | no data | no data | n/a | – | – |\n",
                    ba_engine_name(ax_planned[p]));
    }
    fprintf(f, "\n");
}
