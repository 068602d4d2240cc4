/* What every engine's entry points share (the engine interface,
 * src/ising/engine.h): the checks of a query's size and of finite inputs,
 * and the statistics they add into. A leaf of the Ising layer: it calls
 * nothing back, so the engines' files can use it while the table
 * (src/ising/engine.c) names their structs. */
#include "ising/ising.h"

int ba_engine_check_spins(const ba_engine_ops *o, int n, const double *J, int ldj, char *err)
{
    if (n < 1)
        return ba_fail(err, BA_ERR_ARG, "number of spins n = %d must be at least 1", n);
    if (n > o->max_spins)
        return ba_fail(err, BA_ERR_LIMIT,
                       "n = %d spins exceeds the %s engine's limit of %d (it enumerates 2^n "
                       "states)",
                       n, o->name, o->max_spins);
    if (!J && n > 1)
        return ba_fail(err, BA_ERR_ARG, "couplings J are NULL");
    if (ldj < n)
        return ba_fail(err, BA_ERR_ARG, "leading dimension ldj = %d is smaller than n = %d", ldj,
                       n);
    return BA_OK;
}

int ba_engine_check_finite(const char *what, const double *x, int n, char *err)
{
    for (int i = 0; x && i < n; i++)
        if (!isfinite(x[i]))
            return ba_fail(err, BA_ERR_NUMERIC, "%s[%d] = %g is not finite", what, i, x[i]);
    return BA_OK;
}

int ba_engine_stopped(const ba_engine_ops *o, long skipped, long total, char *err)
{
    return skipped ? ba_fail(err, BA_ERR_INTERRUPTED,
                             "%s engine: stopped on request with %ld of %ld queries left",
                             o->name, skipped, total)
                   : BA_OK;
}

int ba_engine_check_enumerating(const ba_engine_ops *o, const ba_engine_limits *q, char *err)
{
    if (q->T <= o->max_spins)
        return BA_OK;
    return ba_fail(err, BA_ERR_LIMIT,
                   "T = %d is too large for exact %s attention: the %s engine enumerates "
                   "2^T spin states and accepts T <= %d",
                   q->T, q->attn, o->name, o->max_spins);
}

void ba_engine_stats_add(ba_approx_stats *to, const ba_approx_stats *from)
{
    to->queries += from->queries;
    to->sweeps += from->sweeps;
    to->retried += from->retried;
    to->unconverged += from->unconverged;
    if (from->max_sweeps > to->max_sweeps)
        to->max_sweeps = from->max_sweeps;
}
