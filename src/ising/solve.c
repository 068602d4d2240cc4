/* The entry points that take an engine's number: one query of the
 * enumerating engines (ba_ising_marginals/backward), a head's queries of
 * any engine (ba_engine_forward/backward), one system of any engine
 * (ba_ising_solve), and the approximate engines' and their GEMM path's
 * by-number entry points. Each looks the engine up in the table
 * (src/ising/engine.c) and calls its interface, so they sit above every
 * engine's file (src/ising/engine.h says why). */
#include "ising/ising.h"
#include "ising/approx_gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One query's checks, by number: auto is the fast engine here (no band). */
static int check_n(ba_engine e, int n, const double *J, int ldj, char *err)
{
    const ba_engine_ops *o = ba_engine_ops_of(e == BA_ENGINE_AUTO ? BA_ENGINE_FAST : e);
    if (!o)
        return ba_fail(err, BA_ERR_ARG, "engine %d is not a known engine", (int)e);
    return ba_engine_check_spins(o, n, J, ldj, err);
}

int ba_ising_marginals(ba_engine e, int n, const double *h, const double *J, int ldj,
                       double *logw, char *err)
{
    int rc = check_n(e, n, J, ldj, err);
    if (rc)
        return rc;
    if (!logw)
        return ba_fail(err, BA_ERR_ARG, "output logw is NULL");
    if ((rc = ba_engine_check_finite("h", h, n, err)))
        return rc;
    if (e == BA_ENGINE_FAST)
        return ba_fast_marginals1(n, h, J, ldj, logw, err);
    double *lw = malloc(sizeof(double) << n);
    if (!lw)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate 2^%d states", n);
    ba_ref_marginals_ws(n, h, J, ldj, logw, lw);
    free(lw);
    return BA_OK;
}

int ba_ising_backward(ba_engine e, int n, const double *h, const double *J, int ldj,
                      const double *g, double *dh, double *dJ, char *err)
{
    int rc = check_n(e, n, J, ldj, err);
    if (rc)
        return rc;
    if (!g)
        return ba_fail(err, BA_ERR_ARG, "upstream gradient g is NULL");
    if ((rc = ba_engine_check_finite("h", h, n, err)) ||
        (rc = ba_engine_check_finite("g", g, n, err)))
        return rc;
    if (e == BA_ENGINE_FAST)
        return ba_fast_backward1(n, h, J, ldj, g, dh, dJ, err);
    double *p = malloc(sizeof(double) << n);
    if (!p)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate 2^%d states", n);
    ba_ref_backward_ws(n, h, J, ldj, g, dh, dJ, ldj, p);
    free(p);
    return BA_OK;
}

/* ------------------------------------------------ batched (per head) */

/* A head's rows for engine o with no options: dense couplings, the
 * default approximate settings, no window, every gradient entry. */
static ba_engine_rows plain_rows(ba_engine_ctx *c, int B, int T, const double *h,
                                 const double *J, int ldj, const ba_approx *a)
{
    ba_engine_rows r = {B, T, h, J, ldj, 0, 0, a, c, NULL, 0, NULL, NULL, 0};
    return r;
}

int ba_engine_forward(ba_engine e, int B, int T, const double *h, const double *J, int ldj,
                      double *logw, char *err)
{
    return ba_engine_forward_ctx(NULL, e, B, T, h, J, ldj, logw, err);
}

int ba_engine_backward(ba_engine e, int B, int T, const double *h, const double *J, int ldj,
                       const double *g, double *dh, double *dJ, char *err)
{
    return ba_engine_backward_ctx(NULL, e, B, T, h, J, ldj, g, dh, dJ, err);
}

int ba_engine_forward_ctx(ba_engine_ctx *c, ba_engine e, int B, int T, const double *h,
                          const double *J, int ldj, double *logw, char *err)
{
    const ba_engine_ops *o = ba_engine_ops_of(e);
    if (!o)
        return ba_fail(err, BA_ERR_ARG, "engine %d is not a known engine", (int)e);
    ba_approx a = ba_approx_default();
    ba_engine_rows r = plain_rows(c, B, T, h, J, ldj, &a);
    return o->forward(&r, logw, err);
}

int ba_engine_backward_ctx(ba_engine_ctx *c, ba_engine e, int B, int T, const double *h,
                           const double *J, int ldj, const double *g, double *dh, double *dJ,
                           char *err)
{
    const ba_engine_ops *o = ba_engine_ops_of(e);
    if (!o)
        return ba_fail(err, BA_ERR_ARG, "engine %d is not a known engine", (int)e);
    ba_approx a = ba_approx_default();
    ba_engine_rows r = plain_rows(c, B, T, h, J, ldj, &a);
    return o->backward(&r, g, dh, dJ, err);
}

/* ------------------------------------------- one system, any engine */

int ba_ising_solve(ba_engine e, int W, const ba_approx *approx, int n, const double *h,
                   const double *J, int ldj, double *logw, ba_approx_stats *st, char *err)
{
    if (e == BA_ENGINE_AUTO)
        e = W > 0 ? BA_ENGINE_BAND : BA_ENGINE_FAST;
    const ba_engine_ops *o = ba_engine_ops_of(e);
    if (!o)
        return ba_fail(err, BA_ERR_ARG, "engine %d is not a known engine", (int)e);
    int banded = (o->caps & (BA_ENGINE_CAP_BAND | BA_ENGINE_CAP_WINDOW)) != 0;
    if (o->caps & BA_ENGINE_CAP_ENUMERATE) {
        /* the whole system in one enumeration */
        if (W != 0)
            return ba_fail(err, BA_ERR_ARG, "W = %d is only for the band and hybrid engines "
                           "(the %s engine takes every coupling)", W, o->name);
        if (st)
            memset(st, 0, sizeof *st);
        return ba_ising_marginals(e, n, h, J, ldj, logw, err);
    }
    if (n < 1 || n > BA_MAX_BLOCK)
        return ba_fail(err, BA_ERR_ARG, "number of spins n = %d is outside [1, %d]", n,
                       BA_MAX_BLOCK);
    if (banded && (W < 1 || W > BA_MAX_BAND))
        return ba_fail(err, BA_ERR_ARG, "W = %d is outside [1, %d] for the %s engine", W,
                       BA_MAX_BAND, o->name);
    if (!banded && W != 0)
        return ba_fail(err, BA_ERR_ARG, "W = %d is only for the band and hybrid engines", W);
    if (!J || !logw)
        return ba_fail(err, BA_ERR_ARG, "%s is NULL", J ? "output logw" : "couplings J");
    if (ldj < n)
        return ba_fail(err, BA_ERR_ARG, "leading dimension ldj = %d is smaller than n = %d", ldj,
                       n);
    int rc = ba_engine_check_finite("h", h, n, err);
    if (rc)
        return rc;
    ba_approx a = approx ? *approx : ba_approx_default();
    if ((o->caps & BA_ENGINE_CAP_APPROX) && (rc = ba_approx_validate(&a, err)))
        return rc;
    size_t nn = (size_t)n * n;
    double *hb = calloc(nn, sizeof *hb), *lw = malloc(nn * sizeof *lw); // (n,n) each
    if (!hb || !lw) {
        free(hb), free(lw);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate two %d x %d blocks", n, n);
    }
    /* row i is the prefix of i + 1 keys; the last row is the system */
    for (int i = 0; i < n; i++)
        for (int j = 0; h && j <= i; j++)
            hb[(size_t)i * n + j] = h[j];
    ba_approx_stats tot = {0, 0, 0, 0, 0};
    ba_engine_rows r = {1, n, hb, J, ldj, 0, W, &a, NULL, NULL, 0, &tot, NULL, 0};
    rc = o->forward(&r, lw, err);
    if (!rc)
        memcpy(logw, lw + (size_t)(n - 1) * n, sizeof *logw * (size_t)n);
    if (st)
        *st = tot;
    free(hb), free(lw);
    return rc;
}

/* ------------------------------- the approximate engines by number */

/* Engine e's interface when it is approximate; else NULL with err naming
 * it and the approximate engines of the table. */
static const ba_engine_ops *approx_of(ba_engine e, char *err)
{
    const ba_engine_ops *o = ba_engine_ops_of(e);
    if (o && (o->caps & BA_ENGINE_CAP_APPROX))
        return o;
    char list[128] = "";
    for (int i = 0; ba_engine_at(i); i++)
        if (ba_engine_at(i)->caps & BA_ENGINE_CAP_APPROX) {
            if (*list)
                strncat(list, ", ", sizeof list - strlen(list) - 1);
            strncat(list, ba_engine_at(i)->name, sizeof list - strlen(list) - 1);
        }
    ba_fail(err, BA_ERR_ARG, "engine '%s' is not an approximate engine (%s)", ba_engine_name(e),
            list);
    return NULL;
}

int ba_approx_forward(ba_engine e, const ba_approx *a, int W, int B, int T, const double *h,
                      const double *J, int ldj, double *logw, ba_approx_stats *st, char *err)
{
    const ba_engine_ops *o = approx_of(e, err);
    if (!o)
        return BA_ERR_ARG;
    ba_engine_rows r = {B, T, h, J, ldj, 0, W, a, NULL, NULL, T - 1, st, NULL, 0};
    return o->forward(&r, logw, err);
}

int ba_approx_backward(ba_engine e, const ba_approx *a, int W, int B, int T, const double *h,
                       const double *J, int ldj, const double *g, double *dh, double *dJ,
                       ba_approx_stats *st, char *err)
{
    return ba_approx_backward_from(e, a, W, B, T, h, J, ldj, NULL, g, dh, dJ, T - 1, st, err);
}

int ba_approx_backward_reach(ba_engine e, const ba_approx *a, int W, int B, int T,
                             const double *h, const double *J, int ldj, const double *g,
                             double *dh, double *dJ, int R, ba_approx_stats *st, char *err)
{
    return ba_approx_backward_from(e, a, W, B, T, h, J, ldj, NULL, g, dh, dJ, R, st, err);
}

int ba_approx_backward_from(ba_engine e, const ba_approx *a, int W, int B, int T,
                            const double *h, const double *J, int ldj, const double *logw0,
                            const double *g, double *dh, double *dJ, int R, ba_approx_stats *st,
                            char *err)
{
    const ba_engine_ops *o = approx_of(e, err);
    if (!o)
        return BA_ERR_ARG;
    ba_engine_rows r = {B, T, h, J, ldj, 0, W, a, NULL, logw0, R, st, NULL, 0};
    return o->backward(&r, g, dh, dJ, err);
}

/* -------------------------- the GEMM path of mf and tap by number */

static const ba_engine_ops *gemm_of(ba_engine e, char *err)
{
    const ba_engine_ops *o = ba_engine_ops_of(e);
    if (!o)
        ba_fail(err, BA_ERR_ARG, "engine '%s' has no batched GEMM path (mf, tap)",
                ba_engine_name(e));
    return o;
}

int ba_approx_gemm_forward_m(ba_engine e, const ba_approx *a, int memory, int B, int T,
                             const double *h, const double *J, int ldj, double *logw,
                             ba_approx_stats *st, char *err)
{
    const ba_engine_ops *o = gemm_of(e, err);
    return o ? ba_gemm_forward(o, a, memory, B, T, h, J, ldj, logw, st, err) : BA_ERR_ARG;
}

int ba_approx_gemm_backward_m(ba_engine e, const ba_approx *a, int memory, int B, int T,
                              const double *h, const double *J, int ldj, const double *g,
                              double *dh, double *dJ, ba_approx_stats *st, char *err)
{
    const ba_engine_ops *o = gemm_of(e, err);
    return o ? ba_gemm_backward(o, a, memory, B, T, h, J, ldj, NULL, g, dh, dJ, st, err)
             : BA_ERR_ARG;
}

int ba_approx_gemm_backward_from(ba_engine e, const ba_approx *a, int B, int T,
                                 const double *h, const double *J, int ldj,
                                 const double *logw0, const double *g, double *dh, double *dJ,
                                 ba_approx_stats *st, char *err)
{
    const ba_engine_ops *o = gemm_of(e, err);
    return o ? ba_gemm_backward(o, a, BA_APPROX_GEMM_MEMORY, B, T, h, J, ldj, logw0, g, dh, dJ,
                                st, err)
             : BA_ERR_ARG;
}

int ba_approx_gemm_forward(ba_engine e, const ba_approx *a, int B, int T, const double *h,
                           const double *J, int ldj, double *logw, ba_approx_stats *st,
                           char *err)
{
    return ba_approx_gemm_forward_m(e, a, BA_APPROX_GEMM_MEMORY, B, T, h, J, ldj, logw, st,
                                    err);
}

int ba_approx_gemm_backward(ba_engine e, const ba_approx *a, int B, int T, const double *h,
                            const double *J, int ldj, const double *g, double *dh, double *dJ,
                            ba_approx_stats *st, char *err)
{
    return ba_approx_gemm_backward_m(e, a, BA_APPROX_GEMM_MEMORY, B, T, h, J, ldj, g, dh, dJ,
                                     st, err);
}
