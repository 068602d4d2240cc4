/* The approx study's measurements (approx.c and approx_ckpt.c call them;
 * they call neither): one engine on one instance against the exact
 * marginals, a cell's summary over instances, its JSON and its line. */
#include "approx.h"
/* ba_approx_forward and ba_band_forward: the library's internal entry
 * points, which this study measures */
#include "model/model.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------- measuring */

int ax_work_init(ax_work *w, int n)
{
    size_t nn = (size_t)n * n;
    w->hb = calloc(nn, sizeof(double)), w->lw = calloc(nn, sizeof(double));
    w->hb2 = calloc(nn, sizeof(double)), w->lw2 = calloc(nn, sizeof(double));
    w->le = calloc((size_t)n, sizeof(double));
    return w->hb && w->lw && w->hb2 && w->lw2 && w->le;
}

void ax_work_free(ax_work *w)
{
    free(w->hb), free(w->lw), free(w->hb2), free(w->lw2), free(w->le);
}

/* The exact and approximate log-weights le, la (n) compared. */
static void compare(int n, const double *le, const double *la, ax_inst *r)
{
    double me = -INFINITY, ma = -INFINITY, ze = 0.0, za = 0.0;
    for (int j = 0; j < n; j++)
        me = fmax(me, le[j]), ma = fmax(ma, la[j]);
    for (int j = 0; j < n; j++)
        ze += exp(le[j] - me), za += exp(la[j] - ma);
    double lze = me + log(ze), lza = ma + log(za);
    r->dw = r->kl = r->da = 0.0;
    for (int j = 0; j < n; j++) {
        double pe = le[j] - lze, pa = la[j] - lza, ae = exp(pe), aa = exp(pa);
        r->dw = fmax(r->dw, fabs(exp(la[j]) - exp(le[j])));
        r->kl += ae * (pe - pa);
        r->da = fmax(r->da, fabs(aa - ae));
    }
    r->kl = fmax(r->kl, 0.0); /* rounding below 0 */
}

/* Engine e on one instance (fields h (n), couplings J (n,n)) against the
 * exact log-weights w->le. 0, or a library status with err. */
int ax_measure(const ax_study *s, ba_engine e, int n, const double *h, const double *J,
               ax_work *w, ax_inst *r, char *err)
{
    /* row i: the query of keys 0..i, the instance's fields truncated */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            w->hb[(size_t)i * n + j] = j <= i ? h[j] : 0.0;
            if (i < n - 1 && j < n - 1)
                w->hb2[(size_t)i * (n - 1) + j] = j <= i ? h[j] : 0.0;
        }
    int st;
    if (e == BA_ENGINE_BAND) {
        st = ba_band_forward(s->window, 1, n, w->hb, J, n, w->lw, err);
        r->conv = r->first = r->row = 1, r->sweeps = NAN;
    } else {
        ba_approx_stats full, prev;
        memset(&full, 0, sizeof full), memset(&prev, 0, sizeof prev);
        st = ba_approx_forward(e, &s->ap, s->window, 1, n, w->hb, J, n, w->lw, &full, err);
        if (!st && n > 1)
            st = ba_approx_forward(e, &s->ap, s->window, 1, n - 1, w->hb2, J, n, w->lw2, &prev,
                                   err);
        if (st)
            return st;
        long q = full.queries - prev.queries, sw = full.sweeps - prev.sweeps;
        long rt = full.retried - prev.retried, un = full.unconverged - prev.unconverged;
        r->row = q == 1 && sw >= 0 && rt >= 0 && rt <= 1 && un >= 0 && un <= 1;
        if (!r->row)
            sw = full.sweeps, rt = full.retried, un = full.unconverged;
        r->conv = un == 0, r->first = rt == 0, r->sweeps = (double)sw;
    }
    if (st)
        return st;
    compare(n, w->le, w->lw + (size_t)(n - 1) * n, r);
    return BA_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return isnan(x) ? !isnan(y) : isnan(y) ? -1 : (x > y) - (x < y);
}

/* The 95th percentile: linear interpolation between the order statistics
 * at 0.95 (K - 1) (0-based; x is sorted in place). */
static double p95(double *x, int K)
{
    qsort(x, (size_t)K, sizeof *x, cmp_double);
    double pos = 0.95 * (K - 1);
    int lo = (int)floor(pos), hi = lo + 1 < K ? lo + 1 : lo;
    return x[lo] + (pos - lo) * (x[hi] - x[lo]);
}

/* v (K instances, stride apart) summarised; tmp holds K doubles. */
void ax_summarize(const ax_inst *v, int K, size_t stride, double *tmp, ax_cell_sum *c)
{
    memset(c, 0, sizeof *c);
    c->K = K;
    double sdw = 0, skl = 0, sda = 0, ssw = 0, mx = 0;
    for (int k = 0; k < K; k++) {
        const ax_inst *r = &v[(size_t)k * stride];
        sdw += r->dw, skl += r->kl, sda += r->da, ssw += r->sweeps;
        mx = k == 0 || r->sweeps > mx ? r->sweeps : mx;
        c->rows += r->row, c->converged += r->conv, c->first_try += r->first;
        c->unconverged += !r->conv, c->retried += !r->first;
    }
    c->dw_mean = sdw / K, c->kl_mean = skl / K, c->da_mean = sda / K;
    c->converged /= K, c->first_try /= K, c->sweeps_mean = ssw / K, c->sweeps_max = mx;
    for (int k = 0; k < K; k++)
        tmp[k] = v[(size_t)k * stride].dw;
    c->dw_p95 = p95(tmp, K);
    for (int k = 0; k < K; k++)
        tmp[k] = v[(size_t)k * stride].kl;
    c->kl_p95 = p95(tmp, K);
    for (int k = 0; k < K; k++)
        tmp[k] = v[(size_t)k * stride].da;
    c->da_p95 = p95(tmp, K);
}

/* The summary's numbers into o (JSON keys lab/approx_doc.c reads); a
 * non-finite number is written as null. */
int ax_add_metrics(cJSON *o, const ax_cell_sum *c)
{
    return cJSON_AddNumberToObject(o, "instances", c->K) &&
           cJSON_AddNumberToObject(o, "stats_rows", c->rows) &&
           cJSON_AddNumberToObject(o, "worst_dw_mean", c->dw_mean) &&
           cJSON_AddNumberToObject(o, "worst_dw_p95", c->dw_p95) &&
           cJSON_AddNumberToObject(o, "kl_mean", c->kl_mean) &&
           cJSON_AddNumberToObject(o, "kl_p95", c->kl_p95) &&
           cJSON_AddNumberToObject(o, "worst_da_mean", c->da_mean) &&
           cJSON_AddNumberToObject(o, "worst_da_p95", c->da_p95) &&
           cJSON_AddNumberToObject(o, "converged", c->converged) &&
           cJSON_AddNumberToObject(o, "first_try", c->first_try) &&
           cJSON_AddNumberToObject(o, "unconverged", (double)c->unconverged) &&
           cJSON_AddNumberToObject(o, "retried", (double)c->retried) &&
           cJSON_AddNumberToObject(o, "sweeps_mean", c->sweeps_mean) &&
           cJSON_AddNumberToObject(o, "sweeps_max", c->sweeps_max);
}

void ax_print_cell_head(void)
{
    printf("%-7s %3s %-6s %-11s %10s %10s %10s %10s %10s %7s %7s %8s\n", "engine", "n", "a",
           "bias", "|dw| mean", "|dw| p95", "KL mean", "KL p95", "|da| mean", "1st try", "conv",
           "sweeps");
}

void ax_print_cell(ba_engine e, int n, const char *a, const char *bias, const ax_cell_sum *c)
{
    printf("%-7s %3d %-6s %-11s %10.3g %10.3g %10.3g %10.3g %10.3g %6.1f%% %6.1f%% %8.1f\n",
           ba_engine_name(e), n, a, bias, c->dw_mean, c->dw_p95, c->kl_mean, c->kl_p95,
           c->da_mean, 100.0 * c->first_try, 100.0 * c->converged, c->sweeps_mean);
}

/* ------------------------------------------------------ random cells */

