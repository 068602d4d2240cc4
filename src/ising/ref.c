/* The reference Ising engine: marginals P(s_j = +1) of one query's spin
 * system and their exact backward (spec sections 3 and 4), by enumerating
 * all 2^n states in double with a log-sum-exp shift; one query at a time,
 * or every query of a head. It is the oracle every faster engine is tested
 * against, and the fast engine's fallback, so it stays plain (each state's
 * log-weight is computed from scratch) and calls nothing of the other
 * engines.
 *
 * State s is an n-bit integer; bit j set means s_j = +1. */
#include "ising/ising.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* This file's engine (defined at the end; the table in src/ising/engine.c
 * lists it). */
extern const ba_engine_ops ba_engine_reference_ops;

/* log-weight of state s: sum_j h_j s_j + sum_{j<k} J_jk s_j s_k. */
static double state_logweight(int n, unsigned long s, const double *h, const double *J, int ldj)
{
    double e = 0.0;
    for (int j = 0; j < n; j++) {
        double sj = (s >> j & 1) ? 1.0 : -1.0;
        if (h)
            e += h[j] * sj;
        for (int k = j + 1; k < n; k++) {
            double sk = (s >> k & 1) ? 1.0 : -1.0;
            e += J[(size_t)j * ldj + k] * sj * sk;
        }
    }
    return e;
}

/* Fills lw (2^n) with the log-weights and returns their maximum. */
static double fill_logweights(int n, const double *h, const double *J, int ldj, double *lw)
{
    unsigned long N = 1ul << n;
    double mx = -INFINITY;
    for (unsigned long s = 0; s < N; s++) {
        lw[s] = state_logweight(n, s, h, J, ldj);
        if (lw[s] > mx)
            mx = lw[s];
    }
    return mx;
}

/* Turns log-weights into probabilities in place; returns log Z. */
static double normalise(int n, double *lw, double mx)
{
    unsigned long N = 1ul << n;
    double z = 0.0;
    for (unsigned long s = 0; s < N; s++)
        z += exp(lw[s] - mx);
    double logz = mx + log(z);
    for (unsigned long s = 0; s < N; s++)
        lw[s] = exp(lw[s] - logz);
    return logz;
}

/* Reference forward with caller workspace lw (2^n doubles). */
void ba_ref_marginals_ws(int n, const double *h, const double *J, int ldj, double *logw,
                         double *lw)
{
    unsigned long N = 1ul << n;
    double mx = fill_logweights(n, h, J, ldj, lw);
    double z = 0.0;
    for (int j = 0; j < n; j++)
        logw[j] = 0.0; /* accumulates sum_{s_j=+1} exp(lw - mx) */
    for (unsigned long s = 0; s < N; s++) {
        double e = exp(lw[s] - mx);
        z += e;
        for (int j = 0; j < n; j++)
            if (s >> j & 1)
                logw[j] += e;
    }
    double logz = mx + log(z);
    for (int j = 0; j < n; j++) {
        double mj = -INFINITY;
        for (unsigned long s = 0; s < N; s++)
            if ((s >> j & 1) && lw[s] > mj)
                mj = lw[s];
        if (mj - mx > -600.0) {
            logw[j] = mx + log(logw[j]) - logz;
        } else {
            /* The s_j = +1 half lies far below the global maximum: shift it by
             * its own maximum so a tiny marginal keeps its relative precision
             * instead of underflowing to zero. */
            double acc = 0.0;
            for (unsigned long s = 0; s < N; s++)
                if (s >> j & 1)
                    acc += exp(lw[s] - mj);
            logw[j] = mj + log(acc) - logz;
        }
        if (logw[j] > 0.0) /* rounding can push a certain spin to +1e-16 */
            logw[j] = 0.0;
    }
}

/* Reference backward with caller workspace p (2^n doubles). Uses the centred
 * form Cov(G, X) = sum_s p(s) (G(s) - <G>) X(s), which avoids subtracting
 * two large nearly equal moments, with G counted from the all -1 state,
 * G(s) = 2 sum over s_j = +1 of g_j (a constant off sum_j g_j s_j, which no
 * covariance sees): g = dL/dm grows as 1/(2 sum_j w_j) when every key is
 * unlikely, and sum_j g_j s_j would then be a large number at the likely
 * states that <G> cancels (src/ising_fast.c, backward_n). */
void ba_ref_backward_ws(int n, const double *h, const double *J, int ldj, const double *g,
                        double *dh, double *dJ, int lddj, double *p)
{
    unsigned long N = 1ul << n;
    double mx = fill_logweights(n, h, J, ldj, p);
    normalise(n, p, mx);
    double gbar = 0.0;
    for (unsigned long s = 0; s < N; s++) {
        double G = 0.0;
        for (int j = 0; j < n; j++)
            G += (s >> j & 1) ? 2.0 * g[j] : 0.0;
        gbar += p[s] * G;
    }
    for (unsigned long s = 0; s < N; s++) {
        double G = 0.0;
        for (int j = 0; j < n; j++)
            G += (s >> j & 1) ? 2.0 * g[j] : 0.0;
        double c = p[s] * (G - gbar);
        for (int j = 0; j < n; j++) {
            double sj = (s >> j & 1) ? 1.0 : -1.0;
            if (dh)
                dh[j] += c * sj;
            if (dJ)
                for (int k = j + 1; k < n; k++) {
                    double sk = (s >> k & 1) ? 1.0 : -1.0;
                    dJ[(size_t)j * lddj + k] += c * sj * sk;
                }
        }
    }
}

/* ------------------------------------------------ batched (per head) */

/* ba_ref_forward polling stop (may be NULL) between queries. */
static int ref_forward(int B, int T, const double *h, const double *J, int ldj, double *logw,
                       const ba_stop *stop, char *err)
{
    int nt = ba_nthreads();
    size_t per = (size_t)1 << T;
    double work = (double)B * per * T * T; /* ~ operations of the enumeration */
    double *lwork = malloc(sizeof(double) * per * (size_t)nt);
    if (!lwork)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate engine workspace for T = %d", T);
    long skipped = 0;
    /* Row i of query block b has n = i+1 spins: the visible keys 0..i. */
#pragma omp parallel for schedule(dynamic) num_threads(nt) if (work > BA_PAR_MIN_WORK) \
    reduction(+ : skipped)
    for (long q = 0; q < (long)B * T; q++) {
        if (ba_stop_requested(stop)) {
            skipped++;
            continue;
        }
        int i = (int)(q % T);
        size_t row = (size_t)q * T;
        double *lw = lwork + per * (size_t)ba_thread_id();
        ba_ref_marginals_ws(i + 1, h ? h + row : NULL, J, ldj, logw + row, lw);
        for (int j = i + 1; j < T; j++)
            logw[row + j] = -INFINITY;
    }
    free(lwork);
    return ba_engine_stopped(&ba_engine_reference_ops, skipped, (long)B * T, err);
}

int ba_ref_forward(int B, int T, const double *h, const double *J, int ldj, double *logw,
                   char *err)
{
    return ref_forward(B, T, h, J, ldj, logw, NULL, err);
}

/* Queries of a backward go in at most this many fixed chunks, each with
 * its own dJ, summed in chunk order: the chunks depend on the number of
 * queries alone, so dJ is the same on any number of threads. */
#define REF_CHUNKS 64

/* ba_ref_backward polling stop (may be NULL) between queries. */
static int ref_backward(int B, int T, const double *h, const double *J, int ldj,
                        const double *g, double *dh, double *dJ, const ba_stop *stop, char *err)
{
    int nt = ba_nthreads();
    size_t per = (size_t)1 << T;
    size_t jsz = (size_t)T * T;
    long nq = (long)B * T;
    int nch = nq < REF_CHUNKS ? (int)nq : REF_CHUNKS;
    double work = (double)B * per * T * T; /* ~ operations of the enumeration */
    double *lwork = malloc(sizeof(double) * per * (size_t)nt);
    double *djc = calloc(jsz * (size_t)nch, sizeof(double));
    if (!lwork || !djc) {
        free(lwork);
        free(djc);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate engine workspace for T = %d", T);
    }
    long skipped = 0;
#pragma omp parallel for schedule(dynamic) num_threads(nt) if (work > BA_PAR_MIN_WORK) \
    reduction(+ : skipped)
    for (int ch = 0; ch < nch; ch++) {
        double *lw = lwork + per * (size_t)ba_thread_id();
        for (long q = nq * ch / nch; q < nq * (ch + 1) / nch; q++) {
            if (ba_stop_requested(stop)) {
                skipped++;
                continue;
            }
            int i = (int)(q % T);
            size_t row = (size_t)q * T;
            ba_ref_backward_ws(i + 1, h ? h + row : NULL, J, ldj, g + row,
                               dh ? dh + row : NULL, dJ ? djc + jsz * (size_t)ch : NULL, T, lw);
        }
    }
    if (dJ && !skipped)
        for (int ch = 0; ch < nch; ch++)
            for (int j = 0; j < T; j++)
                for (int k = j + 1; k < T; k++)
                    dJ[(size_t)j * ldj + k] += djc[jsz * (size_t)ch + (size_t)j * T + k];
    free(lwork);
    free(djc);
    return ba_engine_stopped(&ba_engine_reference_ops, skipped, nq, err);
}

int ba_ref_backward(int B, int T, const double *h, const double *J, int ldj, const double *g,
                    double *dh, double *dJ, char *err)
{
    return ref_backward(B, T, h, J, ldj, g, dh, dJ, NULL, err);
}

/* ------------------------------------------------ the engine interface */

static int ref_rows_forward(const ba_engine_rows *r, double *logw, char *err)
{
    int rc = ba_engine_check_spins(&ba_engine_reference_ops, r->T, r->J, r->ldj, err);
    return rc ? rc : ref_forward(r->B, r->T, r->h, r->J, r->ldj, logw, r->stop, err);
}

static int ref_rows_backward(const ba_engine_rows *r, const double *g, double *dh, double *dJ,
                             char *err)
{
    int rc = ba_engine_check_spins(&ba_engine_reference_ops, r->T, r->J, r->ldj, err);
    return rc ? rc : ref_backward(r->B, r->T, r->h, r->J, r->ldj, g, dh, dJ, r->stop, err);
}

static int ref_check(const ba_engine_limits *q, char *err)
{
    return ba_engine_check_enumerating(&ba_engine_reference_ops, q, err);
}

const ba_engine_ops ba_engine_reference_ops = {
    .id = BA_ENGINE_REFERENCE,
    .name = "reference",
    .summary = "enumerates all 2^n spin states of each query (the oracle)",
    .caps = BA_ENGINE_CAP_EXACT | BA_ENGINE_CAP_ENUMERATE,
    .max_spins = BA_REFERENCE_MAX_SPINS,
    .check = ref_check,
    .forward = ref_rows_forward,
    .backward = ref_rows_backward,
};
