/* The exact engines behind one interface: argument checks, then the
 * reference enumeration (src/ising_ref.c) or the fast factorised engine
 * (src/ising_fast.c), for one query or for every query of a head. */
#include "ising/ising.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int check_n(ba_engine e, int n, const double *J, int ldj, char *err)
{
    int lim = ba_engine_max_spins(e);
    if (lim == 0)
        return ba_fail(err, BA_ERR_ARG, "engine %d is not a known engine", (int)e);
    if (n < 1)
        return ba_fail(err, BA_ERR_ARG, "number of spins n = %d must be at least 1", n);
    if (n > lim)
        return ba_fail(err, BA_ERR_LIMIT,
                       "n = %d spins exceeds the %s engine's limit of %d (it enumerates 2^n "
                       "states)",
                       n, ba_engine_name(e), lim);
    if (!J && n > 1)
        return ba_fail(err, BA_ERR_ARG, "couplings J are NULL");
    if (ldj < n)
        return ba_fail(err, BA_ERR_ARG, "leading dimension ldj = %d is smaller than n = %d", ldj,
                       n);
    return BA_OK;
}

static int check_finite(const char *what, const double *x, int n, char *err)
{
    for (int i = 0; x && i < n; i++)
        if (!isfinite(x[i]))
            return ba_fail(err, BA_ERR_NUMERIC, "%s[%d] = %g is not finite", what, i, x[i]);
    return BA_OK;
}

int ba_ising_marginals(ba_engine e, int n, const double *h, const double *J, int ldj,
                       double *logw, char *err)
{
    int rc = check_n(e, n, J, ldj, err);
    if (rc)
        return rc;
    if (!logw)
        return ba_fail(err, BA_ERR_ARG, "output logw is NULL");
    if ((rc = check_finite("h", h, n, err)))
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
    if ((rc = check_finite("h", h, n, err)) || (rc = check_finite("g", g, n, err)))
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
    int rc = check_n(e, T, J, ldj, err);
    if (rc)
        return rc;
    if (e == BA_ENGINE_FAST)
        return c ? ba_engine_forward_fast(c, B, T, h, J, ldj, logw, err)
                 : ba_fast_forward(B, T, h, J, ldj, logw, NULL, err);
    return ba_ref_forward(B, T, h, J, ldj, logw, err);
}

int ba_engine_backward_ctx(ba_engine_ctx *c, ba_engine e, int B, int T, const double *h,
                           const double *J, int ldj, const double *g, double *dh, double *dJ,
                           char *err)
{
    int rc = check_n(e, T, J, ldj, err);
    if (rc)
        return rc;
    if (e == BA_ENGINE_FAST)
        return c ? ba_engine_backward_fast(c, B, T, h, J, ldj, g, dh, dJ, err)
                 : ba_fast_backward(B, T, h, J, ldj, g, dh, dJ, err);
    return ba_ref_backward(B, T, h, J, ldj, g, dh, dJ, err);
}

/* ------------------------------------------- one system, any engine */

int ba_ising_solve(ba_engine e, int W, const ba_approx *approx, int n, const double *h,
                   const double *J, int ldj, double *logw, ba_approx_stats *st, char *err)
{
    if (e == BA_ENGINE_AUTO)
        e = W > 0 ? BA_ENGINE_BAND : BA_ENGINE_FAST;
    if (e == BA_ENGINE_REFERENCE || e == BA_ENGINE_FAST) {
        if (W != 0)
            return ba_fail(err, BA_ERR_ARG, "W = %d is only for the band and hybrid engines "
                           "(the %s engine takes every coupling)", W, ba_engine_name(e));
        if (st)
            memset(st, 0, sizeof *st);
        return ba_ising_marginals(e, n, h, J, ldj, logw, err);
    }
    if (e != BA_ENGINE_BAND && !ba_engine_is_approx(e))
        return ba_fail(err, BA_ERR_ARG, "engine %d is not a known engine", (int)e);
    if (n < 1 || n > BA_MAX_BLOCK)
        return ba_fail(err, BA_ERR_ARG, "number of spins n = %d is outside [1, %d]", n,
                       BA_MAX_BLOCK);
    if ((e == BA_ENGINE_BAND || e == BA_ENGINE_HYBRID) && (W < 1 || W > BA_MAX_BAND))
        return ba_fail(err, BA_ERR_ARG, "W = %d is outside [1, %d] for the %s engine", W,
                       BA_MAX_BAND, ba_engine_name(e));
    if (e != BA_ENGINE_BAND && e != BA_ENGINE_HYBRID && W != 0)
        return ba_fail(err, BA_ERR_ARG, "W = %d is only for the band and hybrid engines", W);
    if (!J || !logw)
        return ba_fail(err, BA_ERR_ARG, "%s is NULL", J ? "output logw" : "couplings J");
    if (ldj < n)
        return ba_fail(err, BA_ERR_ARG, "leading dimension ldj = %d is smaller than n = %d", ldj,
                       n);
    int rc = check_finite("h", h, n, err);
    if (rc)
        return rc;
    ba_approx a = approx ? *approx : ba_approx_default();
    if (e != BA_ENGINE_BAND && (rc = ba_approx_validate(&a, err)))
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
    if (e == BA_ENGINE_BAND)
        rc = ba_band_forward(W, 1, n, hb, J, ldj, lw, err);
    else
        rc = ba_approx_forward(e, &a, W, 1, n, hb, J, ldj, lw, &tot, err);
    if (!rc)
        memcpy(logw, lw + (size_t)(n - 1) * n, sizeof *logw * (size_t)n);
    if (st)
        *st = tot;
    free(hb), free(lw);
    return rc;
}
