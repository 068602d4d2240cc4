/* What the approximate engines' document's parts share (approx_doc.c,
 * approx_train_doc.c and approx_eval_doc.c call it; it calls none of
 * them): the checked reading of a JSON field, the preset's engines and a
 * paired change as a table cell. */
#include "approx.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

int ax_bad(const ax_reader *r, const char *key)
{
    return usage_error(r->c, "%s: field %s%s is missing or malformed", r->path, r->where, key);
}

int ax_rd_num(const ax_reader *r, const cJSON *o, const char *key, double lo, double hi,
              int nullable, double *out)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (nullable && cJSON_IsNull(x))
        return *out = NAN, 0;
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < lo ||
        x->valuedouble > hi)
        return ax_bad(r, key);
    *out = x->valuedouble;
    return 0;
}

int ax_rd_int(const ax_reader *r, const cJSON *o, const char *key, int lo, int hi, int *out)
{
    double v = 0.0;
    int rc = ax_rd_num(r, o, key, lo, hi, 0, &v);
    if (!rc && v != floor(v))
        return ax_bad(r, key);
    if (!rc)
        *out = (int)v;
    return rc;
}

int ax_rd_str(const ax_reader *r, const cJSON *o, const char *key, char *buf, size_t len)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(x) || strlen(x->valuestring) >= len)
        return ax_bad(r, key);
    strcpy(buf, x->valuestring);
    return 0;
}

const ba_engine ax_planned[AX_NPLAN] = {BA_ENGINE_MF, BA_ENGINE_TAP, BA_ENGINE_BP,
                                        BA_ENGINE_HYBRID};

int ax_plan_index(const char *engine)
{
    int p = 0;
    while (p < AX_NPLAN && strcmp(engine, ba_engine_name(ax_planned[p])) != 0)
        p++;
    return p;
}

/* x, with what rounds to zero at two decimals as 0 (no "-0.00"). */
static double nz(double x)
{
    return fabs(x) < 0.005 ? 0.0 : x;
}

void ax_change_cell(FILE *f, const double *d, int n, const char *none)
{
    ba_summary s = ba_summarize(d, n);
    double lo = s.mean - s.ci95, hi = s.mean + s.ci95;
    if (n == 0)
        fprintf(f, " %s |", none);
    else if (n == 1)
        fprintf(f, " %+.2f %% (one pair; interval n/a) |", nz(s.mean));
    else
        fprintf(f, " %+.2f %% [%+.2f, %+.2f] |", nz(s.mean), nz(lo), nz(hi));
}

