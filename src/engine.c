/* The exact engines behind one interface: argument checks, then the
 * reference enumeration (src/ising_ref.c) or the fast factorised engine
 * (src/ising_fast.c), for one query or for every query of a head. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

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
