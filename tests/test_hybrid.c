/* Tests of the hybrid engine (src/ising/hybrid.c; spec section 8,
 * "Mean-field family": hybrid, "Implicit gradients"): ba_hybrid_forward
 * and ba_hybrid_backward, exact chain inside the window W, mean field
 * beyond it.
 *
 * Expected values come from the band engine (no far couplings: the hybrid
 * is the band engine), the reference enumeration (a window covering every
 * pair: the full model), a slow twin written here (brute-force enumeration
 * of the chain with couplings A_in and effective fields h + A_far x,
 * iterated to 1e-13), and central finite differences of the converged
 * forward.
 *
 * Tolerances (stated next to each check):
 *   in-window   |logw - logw_band| < 1e-13 (0 seen: the hybrid runs the
 *               band engine's kernels), one sweep per query;
 *   full window |logw - logw_ref| < 1e-12;
 *   twin        |logw - logw_twin| < 1e-10 (both iterated to 1e-13, with
 *               the retry at a quarter of the damping where 0.5 fails);
 *   log path    queries whose fields send them to the band engine's log
 *               path (the hybrid's packed band call): the twin as above,
 *               and the band engine bit for bit without far couplings;
 *   fd          max |an - fd| / max |an| < 1e-6 per array (dh, dJ; eps
 *               1e-6, forward tolerance 1e-13); the in-band and far
 *               entries of dJ are also reported apart;
 *   no convergence, threads, batch independence, accumulation: counts
 *               exact, results bit for bit.
 * The worst values seen are printed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

#define INWIN_TOL 1e-13
#define FULL_TOL 1e-12
#define TWIN_TOL 1e-10
#define FD_EPS 1e-6
#define FD_TOL 1e-6

static double uniform(ba_rng *r, double a) { return a * (2.0 * ba_rng_uniform(r) - 1.0); }

static double *alloc_d(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    assert_non_null(p);
    return p;
}

/* The paper's probe couplings (spec section 8, "Measured by a probe"):
 * J(d) = a/2 (d = 1), a (d = 2..4), 0 (d = 5), -a/2 (d >= 6), each plus
 * uniform noise +-a/4, for j < k < T in rows of ldj; entries with k - j >
 * far_max (if >= 0) are 0; the lower triangle and diagonal NaN (never
 * read). */
static void paper_j(ba_rng *r, int T, int ldj, double a, int far_max, double *J)
{
    for (int j = 0; j < T; j++)
        for (int k = 0; k < ldj; k++) {
            int d = k - j;
            double v = NAN;
            if (d > 0) {
                v = d == 1 ? a / 2 : d <= 4 ? a : d == 5 ? 0.0 : -a / 2;
                v += uniform(r, a / 4);
                if (far_max >= 0 && d > far_max)
                    v = 0.0;
            }
            J[(size_t)j * ldj + k] = v;
        }
}

static void normal_fill(ba_rng *r, double *v, size_t n, double s)
{
    for (size_t i = 0; i < n; i++)
        v[i] = s * ba_rng_normal(r);
}

static void fwd(const ba_approx *a, int W, int B, int T, const double *h, const double *J,
                int ldj, double *logw, ba_approx_stats *st)
{
    char err[BA_ERR_LEN];
    if (ba_hybrid_forward(a, W, B, T, h, J, ldj, logw, st, NULL, err))
        fail_msg("%s", err);
}

static void bwd(const ba_approx *a, int W, int B, int T, const double *h, const double *J,
                int ldj, const double *g, double *dh, double *dJ, ba_approx_stats *st)
{
    char err[BA_ERR_LEN];
    if (ba_hybrid_backward(a, W, B, T, h, J, ldj, g, dh, dJ, st, NULL, err))
        fail_msg("%s", err);
}

/* ---------------------------------------------------------------- tests */

/* No coupling beyond the window: the hybrid is the band engine, reached in
 * one sweep (the far field is 0, so the first step is exactly 0). */
static void test_in_window(void **state)
{
    (void)state;
    const int B = 2, T = 14, ldj = T + 2;
    const int Ws[3] = {1, 3, 5};
    ba_rng r;
    ba_rng_seed(&r, 7);
    size_t nb = (size_t)B * T * T;
    double *h = alloc_d(nb), *lw = alloc_d(nb), *lb = alloc_d(nb), *J = alloc_d(T * ldj);
    double worst = 0.0;
    char err[BA_ERR_LEN];
    ba_approx a = {0.5, 1e-10, 100};
    for (int w = 0; w < 3; w++) {
        int W = Ws[w];
        normal_fill(&r, h, nb, 1.0);
        paper_j(&r, T, ldj, 0.5, W, J);
        ba_approx_stats st = {0, 0, 0, 0, 0};
        fwd(&a, W, B, T, h, J, ldj, lw, &st);
        assert_int_equal(ba_band_forward(W, B, T, h, J, ldj, lb, err), BA_OK);
        for (long q = 0; q < (long)B * T; q++) {
            for (int j = 0; j <= q % T; j++) {
                double e = fabs(lw[q * T + j] - lb[q * T + j]);
                worst = e > worst ? e : worst;
                assert_true(e < INWIN_TOL);
            }
            /* and bit for bit: the hybrid claims the band engine's paths */
            assert_memory_equal(lw + q * T, lb + q * T, (size_t)(q % T + 1) * sizeof(double));
        }
        assert_int_equal(st.queries, B * T);
        assert_int_equal(st.sweeps, B * T);
        assert_int_equal(st.max_sweeps, 1);
        assert_int_equal(st.retried, 0);
        assert_int_equal(st.unconverged, 0);
    }
    printf("in window: worst |logw - band| = %.3g (one sweep per query)\n", worst);
    free(h), free(lw), free(lb), free(J);
}

/* A window covering every pair (W >= n - 1): the full model, as the
 * reference enumeration computes it; with a narrower window the queries of
 * at most W + 1 keys still are. */
static void test_full_window(void **state)
{
    (void)state;
    const int B = 2, T = 10, ldj = T + 1;
    const int Ws[3] = {9, 16, 4};
    ba_rng r;
    ba_rng_seed(&r, 8);
    size_t nb = (size_t)B * T * T;
    double *h = alloc_d(nb), *lw = alloc_d(nb), *J = alloc_d(T * ldj), ref[16];
    double worst = 0.0;
    char err[BA_ERR_LEN];
    ba_approx a = {0.5, 1e-12, 1000};
    for (int w = 0; w < 3; w++) {
        int W = Ws[w];
        normal_fill(&r, h, nb, 1.0);
        paper_j(&r, T, ldj, 0.5, -1, J);
        fwd(&a, W, B, T, h, J, ldj, lw, NULL);
        for (long q = 0; q < (long)B * T; q++) {
            int n = (int)(q % T) + 1;
            if (n - 1 > W)
                continue;
            assert_int_equal(
                ba_ising_marginals(BA_ENGINE_REFERENCE, n, h + q * T, J, ldj, ref, err), BA_OK);
            for (int j = 0; j < n; j++) {
                double e = fabs(lw[q * T + j] - ref[j]);
                worst = e > worst ? e : worst;
                assert_true(e < FULL_TOL);
            }
        }
    }
    printf("full window: worst |logw - reference| = %.3g\n", worst);
    free(h), free(lw), free(J);
}

/* The chain of n spins with fields f and the couplings of J at distances
 * 1..W, by enumeration: m (n) and logw (n). */
static void twin_chain(int n, int W, const double *f, const double *J, int ldj, double *m,
                       double *logw)
{
    size_t ns = (size_t)1 << n;
    double *E = malloc(ns * sizeof(double)), emax = -INFINITY;
    assert_non_null(E);
    for (size_t s = 0; s < ns; s++) {
        double e = 0.0;
        for (int j = 0; j < n; j++) {
            double sj = (s >> j & 1) ? 1.0 : -1.0;
            e += f[j] * sj;
            for (int k = j + 1; k < n && k - j <= W; k++)
                e += J[(size_t)j * ldj + k] * sj * ((s >> k & 1) ? 1.0 : -1.0);
        }
        E[s] = e;
        emax = e > emax ? e : emax;
    }
    double z = 0.0, zp[16] = {0};
    for (size_t s = 0; s < ns; s++) {
        double p = exp(E[s] - emax);
        z += p;
        for (int j = 0; j < n; j++)
            if (s >> j & 1)
                zp[j] += p;
    }
    for (int j = 0; j < n; j++) {
        logw[j] = log(zp[j] / z);
        m[j] = (2.0 * zp[j] - z) / z;
    }
    free(E);
}

/* The hybrid's fixed point of one query, the slow way: x = M(h), then
 * x <- x + lambda (M(h + A_far x) - x) until the undamped step < tol.
 * Returns the sweeps (0: no convergence). */
static int twin_hybrid(int n, int W, const double *h, const double *J, int ldj, double lambda,
                       int iters, double tol, double *logw)
{
    double x[16], y[16], f[16] = {0};
    twin_chain(n, W, h, J, ldj, x, logw);
    for (int it = 1; it <= iters; it++) {
        for (int j = 0; j < n; j++) {
            f[j] = h[j];
            for (int k = 0; k < n; k++)
                if (abs(k - j) > W)
                    f[j] += (j < k ? J[(size_t)j * ldj + k] : J[(size_t)k * ldj + j]) * x[k];
        }
        twin_chain(n, W, f, J, ldj, y, logw);
        double res = 0.0;
        for (int j = 0; j < n; j++) {
            res = fmax(res, fabs(y[j] - x[j]));
            x[j] += lambda * (y[j] - x[j]);
        }
        if (res < tol)
            return it;
    }
    return 0;
}

static void test_twin(void **state)
{
    (void)state;
    const int Ws[3] = {1, 2, 4}, ns[3] = {5, 8, 12};
    const double as[2] = {0.25, 0.5};
    ba_rng r;
    ba_rng_seed(&r, 9);
    double worst = 0.0;
    int most = 0;
    long retried = 0;
    ba_approx a = {0.5, 1e-13, 2000};
    for (int w = 0; w < 3; w++)
        for (int c = 0; c < 3; c++)
            for (int ia = 0; ia < 2; ia++)
                for (int rep = 0; rep < 2; rep++) {
                    int W = Ws[w], n = ns[c], T = n;
                    size_t nb = (size_t)T * T;
                    double *h = alloc_d(nb), *lw = alloc_d(nb), *J = alloc_d((size_t)T * T);
                    double tw[16];
                    normal_fill(&r, h, nb, 1.0);
                    paper_j(&r, T, T, as[ia], -1, J);
                    ba_approx_stats st = {0, 0, 0, 0, 0};
                    fwd(&a, W, 1, T, h, J, T, lw, &st);
                    assert_int_equal(st.unconverged, 0);
                    most = st.max_sweeps > most ? st.max_sweeps : most;
                    const double *hq = h + (size_t)(n - 1) * T, *lq = lw + (size_t)(n - 1) * T;
                    /* the policy: a quarter of the damping where 0.5 oscillates */
                    int it = twin_hybrid(n, W, hq, J, T, 0.5, 2000, 1e-13, tw);
                    if (!it)
                        it = twin_hybrid(n, W, hq, J, T, 0.125, 8000, 1e-13, tw);
                    assert_true(it > 0);
                    retried += st.retried;
                    for (int j = 0; j < n; j++) {
                        double e = fabs(lq[j] - tw[j]);
                        worst = e > worst ? e : worst;
                        if (e >= TWIN_TOL)
                            fail_msg("W %d n %d a %g: logw[%d] %.17g twin %.17g", W, n, as[ia],
                                     j, lq[j], tw[j]);
                    }
                    free(h), free(lw), free(J);
                }
    printf("twin: worst |logw - twin| = %.3g (most sweeps %d, %ld queries retried)\n", worst,
           most, retried);
}

/* Fields of +-200 on keys 0 and 1 of the last batch element's queries:
 * their bound on the dynamic range (2 * 400 + 200 nats from the fields
 * alone) sends them to the band engine's log path. */
static void big_fields(int B, int T, double *h)
{
    for (int i = 1; i < T; i++) {
        double *row = h + ((size_t)(B - 1) * T + i) * T;
        row[0] = 200.0, row[1] = -200.0;
    }
}

/* Queries on the log path (the packed band call), beside linear ones in
 * the same batch: the twin, and the band engine bit for bit without far
 * couplings. */
static void test_log_path(void **state)
{
    (void)state;
    const int B = 2, T = 10, W = 2;
    ba_rng r;
    ba_rng_seed(&r, 13);
    size_t nb = (size_t)B * T * T;
    double *h = alloc_d(nb), *lw = alloc_d(nb), *lb = alloc_d(nb), *J = alloc_d((size_t)T * T);
    double tw[16], worst = 0.0;
    char err[BA_ERR_LEN];
    normal_fill(&r, h, nb, 1.0);
    big_fields(B, T, h);
    assert_true(ba_band_lin_hbound(W, T, h + nb - T) > BA_BAND_LIN_MAX_NATS);
    assert_true(ba_band_lin_hbound(W, T, h + (size_t)(T - 1) * T) < 100.0);
    ba_approx a = {0.5, 1e-13, 2000};
    paper_j(&r, T, T, 0.5, -1, J);
    fwd(&a, W, B, T, h, J, T, lw, NULL);
    for (long q = 0; q < (long)B * T; q++) {
        int n = (int)(q % T) + 1;
        int it = twin_hybrid(n, W, h + q * T, J, T, 0.5, 2000, 1e-13, tw);
        if (!it)
            it = twin_hybrid(n, W, h + q * T, J, T, 0.125, 8000, 1e-13, tw);
        assert_true(it > 0);
        for (int j = 0; j < n; j++) {
            double e = fabs(lw[q * T + j] - tw[j]);
            worst = fmax(worst, e);
            assert_true(e < TWIN_TOL);
        }
    }
    paper_j(&r, T, T, 0.5, W, J);
    fwd(&a, W, B, T, h, J, T, lw, NULL);
    assert_int_equal(ba_band_forward(W, B, T, h, J, T, lb, err), BA_OK);
    for (long q = 0; q < (long)B * T; q++)
        assert_memory_equal(lw + q * T, lb + q * T, (size_t)(q % T + 1) * sizeof(double));
    printf("log path: worst |logw - twin| = %.3g; band engine bit for bit\n", worst);
    free(h), free(lw), free(lb), free(J);
}

/* L = sum over the queries of g . m, m = 2 exp(logw) - 1. */
static double loss(const ba_approx *a, int W, int B, int T, const double *h, const double *J,
                   const double *g, double *lw)
{
    fwd(a, W, B, T, h, J, T, lw, NULL);
    double L = 0.0;
    for (long q = 0; q < (long)B * T; q++)
        for (int j = 0; j <= q % T; j++)
            L += g[q * T + j] * (2.0 * exp(lw[q * T + j]) - 1.0);
    return L;
}

static void test_finite_differences(void **state)
{
    (void)state;
    const struct {
        int W, T, B, big;
    } cases[5] = {{1, 6, 1, 0}, {2, 10, 2, 0}, {3, 9, 1, 0}, {4, 10, 2, 0}, {2, 10, 2, 1}};
    ba_rng r;
    ba_rng_seed(&r, 10);
    ba_approx a = {0.5, 1e-13, 5000};
    double worst_h = 0.0, worst_j = 0.0, worst_in = 0.0, worst_far = 0.0;
    for (int c = 0; c < 5; c++) {
        int W = cases[c].W, T = cases[c].T, B = cases[c].B;
        size_t nb = (size_t)B * T * T;
        double *h = alloc_d(nb), *g = alloc_d(nb), *lw = alloc_d(nb), *dh = alloc_d(nb);
        double *J = alloc_d((size_t)T * T), *dJ = alloc_d((size_t)T * T);
        normal_fill(&r, h, nb, 1.0);
        normal_fill(&r, g, nb, 1.0);
        paper_j(&r, T, T, 0.5, -1, J);
        if (cases[c].big)
            big_fields(B, T, h);
        bwd(&a, W, B, T, h, J, T, g, dh, dJ, NULL);
        double mh = 0.0, eh = 0.0, mj = 0.0, ein = 0.0, efar = 0.0;
        for (size_t e = 0; e < nb; e++) {
            if ((long)(e % T) > (long)(e / T) % T)
                continue; /* j > i: not an input */
            double v = h[e];
            h[e] = v + FD_EPS;
            double lp = loss(&a, W, B, T, h, J, g, lw);
            h[e] = v - FD_EPS;
            double lm = loss(&a, W, B, T, h, J, g, lw);
            h[e] = v;
            double fd = (lp - lm) / (2 * FD_EPS);
            mh = fmax(mh, fabs(dh[e]));
            eh = fmax(eh, fabs(dh[e] - fd));
        }
        for (int j = 0; j < T; j++)
            for (int k = j + 1; k < T; k++) {
                size_t e = (size_t)j * T + k;
                double v = J[e];
                J[e] = v + FD_EPS;
                double lp = loss(&a, W, B, T, h, J, g, lw);
                J[e] = v - FD_EPS;
                double lm = loss(&a, W, B, T, h, J, g, lw);
                J[e] = v;
                double fd = (lp - lm) / (2 * FD_EPS), d = fabs(dJ[e] - fd);
                mj = fmax(mj, fabs(dJ[e]));
                if (k - j > W)
                    efar = fmax(efar, d);
                else
                    ein = fmax(ein, d);
            }
        assert_true(mh > 0.0 && mj > 0.0);
        double rh = eh / mh, rj = fmax(ein, efar) / mj;
        printf("fd W %d T %d B %d%s: dh %.3g, dJ %.3g (in-band %.3g, far %.3g) of max |an|\n",
               W, T, B, cases[c].big ? " (log path)" : "", rh, rj, ein / mj, efar / mj);
        assert_true(rh < FD_TOL);
        assert_true(rj < FD_TOL);
        worst_h = fmax(worst_h, rh), worst_j = fmax(worst_j, rj);
        worst_in = fmax(worst_in, ein / mj), worst_far = fmax(worst_far, efar / mj);
        free(h), free(g), free(lw), free(dh), free(J), free(dJ);
    }
    printf("fd: worst dh %.3g, dJ %.3g (in-band %.3g, far %.3g)\n", worst_h, worst_j, worst_in,
           worst_far);
}

/* One sweep and a tolerance nothing meets: every query with far couplings
 * is retried (1 + 4 sweeps) and kept unconverged, with finite results;
 * the others (at most W + 1 keys) converge in one sweep exactly. */
static void test_no_convergence(void **state)
{
    (void)state;
    const int B = 2, T = 10, W = 2;
    ba_rng r;
    ba_rng_seed(&r, 11);
    size_t nb = (size_t)B * T * T;
    double *h = alloc_d(nb), *g = alloc_d(nb), *lw = alloc_d(nb), *dh = alloc_d(nb);
    double *J = alloc_d((size_t)T * T), *dJ = alloc_d((size_t)T * T);
    normal_fill(&r, h, nb, 1.0);
    normal_fill(&r, g, nb, 1.0);
    paper_j(&r, T, T, 0.5, -1, J);
    ba_approx a = {1.0, 1e-300, 1};
    long far_queries = (long)B * (T - W - 1);
    ba_approx_stats st = {0, 0, 0, 0, 0};
    fwd(&a, W, B, T, h, J, T, lw, &st);
    printf("no convergence, forward: queries %ld sweeps %ld max %d retried %ld unconverged "
           "%ld\n", st.queries, st.sweeps, st.max_sweeps, st.retried, st.unconverged);
    assert_int_equal(st.queries, B * T);
    assert_int_equal(st.retried, far_queries);
    assert_int_equal(st.unconverged, far_queries);
    assert_int_equal(st.max_sweeps, 5);
    assert_int_equal(st.sweeps, 5 * far_queries + (B * T - far_queries));
    for (long q = 0; q < (long)B * T; q++)
        for (int j = 0; j <= q % T; j++)
            assert_true(isfinite(lw[q * T + j]) && lw[q * T + j] <= 0.0);
    ba_approx_stats sb = {0, 0, 0, 0, 0};
    bwd(&a, W, B, T, h, J, T, g, dh, dJ, &sb);
    printf("no convergence, backward: queries %ld sweeps %ld max %d retried %ld unconverged "
           "%ld\n", sb.queries, sb.sweeps, sb.max_sweeps, sb.retried, sb.unconverged);
    assert_int_equal(sb.queries, B * T);
    assert_true(sb.retried > 0);
    assert_int_equal(sb.unconverged, far_queries);
    for (size_t e = 0; e < nb; e++)
        assert_true(isfinite(dh[e]));
    for (size_t e = 0; e < (size_t)T * T; e++)
        assert_true(isfinite(dJ[e]));
    free(h), free(g), free(lw), free(dh), free(J), free(dJ);
}

/* Bit for bit: 1 and 2 threads; a batch element alone and inside the
 * batch; dh or dJ NULL; accumulation onto existing values. */
static void test_threads(void **state)
{
    (void)state;
    const int B = 4, T = 128, W = 4;
    ba_rng r;
    ba_rng_seed(&r, 12);
    size_t nb = (size_t)B * T * T, row = (size_t)T * T, nj = (size_t)T * T;
    double *h = alloc_d(nb), *g = alloc_d(nb), *J = alloc_d(nj);
    normal_fill(&r, h, nb, 1.0);
    normal_fill(&r, g, nb, 1.0);
    paper_j(&r, T, T, 0.5, -1, J);
    for (int j = 0; j < T; j++)
        for (int k = j + W + 1; k < T; k++)
            J[(size_t)j * T + k] = uniform(&r, 0.02);
    ba_approx a = {0.5, 1e-10, 1000};
    double *lw[2], *dh[2], *dJ[2];
    ba_approx_stats st[2] = {{0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}};
    int saved = omp_get_max_threads();
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        lw[t] = alloc_d(nb), dh[t] = alloc_d(nb), dJ[t] = alloc_d(nj);
        fwd(&a, W, B, T, h, J, T, lw[t], &st[t]);
        bwd(&a, W, B, T, h, J, T, g, dh[t], dJ[t], &st[t]);
    }
    omp_set_num_threads(saved);
    printf("threads: %ld queries, %ld sweeps, max %d, retried %ld, unconverged %ld\n",
           st[0].queries, st[0].sweeps, st[0].max_sweeps, st[0].retried, st[0].unconverged);
    assert_memory_equal(lw[0], lw[1], nb * sizeof(double));
    assert_memory_equal(dh[0], dh[1], nb * sizeof(double));
    assert_memory_equal(dJ[0], dJ[1], nj * sizeof(double));
    assert_memory_equal(&st[0], &st[1], sizeof st[0]);
    /* element 2 alone: its rows as in the batch */
    double *l1 = alloc_d(row), *d1 = alloc_d(row);
    fwd(&a, W, 1, T, h + 2 * row, J, T, l1, NULL);
    bwd(&a, W, 1, T, h + 2 * row, J, T, g + 2 * row, d1, NULL, NULL);
    assert_memory_equal(l1, lw[0] + 2 * row, row * sizeof(double));
    assert_memory_equal(d1, dh[0] + 2 * row, row * sizeof(double));
    /* dh only, dJ only, and += onto 1 */
    double *dh2 = alloc_d(nb), *dJ2 = alloc_d(nj);
    bwd(&a, W, B, T, h, J, T, g, dh2, NULL, NULL);
    bwd(&a, W, B, T, h, J, T, g, NULL, dJ2, NULL);
    assert_memory_equal(dh2, dh[0], nb * sizeof(double));
    assert_memory_equal(dJ2, dJ[0], nj * sizeof(double));
    for (size_t e = 0; e < nb; e++)
        dh2[e] = 1.0;
    for (size_t e = 0; e < nj; e++)
        dJ2[e] = 1.0;
    bwd(&a, W, B, T, h, J, T, g, dh2, dJ2, NULL);
    for (size_t e = 0; e < nb; e++)
        assert_true(dh2[e] == 1.0 + dh[0][e]);
    for (int j = 0; j < T; j++)
        for (int k = 0; k < T; k++)
            assert_true(dJ2[j * T + k] == (k > j ? 1.0 + dJ[0][j * T + k] : 1.0));
    for (int t = 0; t < 2; t++)
        free(lw[t]), free(dh[t]), free(dJ[t]);
    free(h), free(g), free(J), free(l1), free(d1), free(dh2), free(dJ2);
}

/* Overflowing effective fields (forward) are BA_ERR_NUMERIC naming the
 * query, with nothing written; a diverging adjoint is counted, and its
 * query adds no gradient. */
static void test_numeric_errors(void **state)
{
    (void)state;
    const int T = 5, W = 1;
    double h[25], g[25], lw[25], dh[25], J[25];
    char err[BA_ERR_LEN];
    ba_approx a = {0.5, 1e-10, 1000};
    for (int e = 0; e < 25; e++) {
        h[e] = 1.0, g[e] = 1.0, lw[e] = 42.0, dh[e] = 42.0;
        J[e] = (e % T) - (e / T) > W ? 1e308 : 0.0;
    }
    assert_int_equal(ba_hybrid_forward(&a, W, 1, T, h, J, T, lw, NULL, NULL, err), BA_ERR_NUMERIC);
    printf("overflow: %s\n", err);
    assert_non_null(strstr(err, "query 4"));
    assert_non_null(strstr(err, "effective field"));
    for (int e = 0; e < 25; e++)
        assert_true(lw[e] == 42.0);
    /* h = 0 and strong ferromagnetic far couplings: m = 0 is the forward's
     * fixed point (one sweep), and chi A_far has eigenvalues far above 1 */
    for (int e = 0; e < 25; e++) {
        h[e] = 0.0;
        J[e] = (e % T) - (e / T) > W ? 20.0 : 0.0;
    }
    /* the policy: such a query contributes no gradient and is counted
     * (queries 0 and 1 have no far pair and keep theirs) */
    ba_approx_stats st = {0, 0, 0, 0, 0};
    assert_int_equal(ba_hybrid_backward(&a, W, 1, T, h, J, T, g, dh, NULL, &st, NULL, err), BA_OK);
    printf("divergent adjoint: %ld of %ld queries unconverged\n", st.unconverged, st.queries);
    assert_int_equal(st.queries, T);
    assert_int_equal(st.unconverged, T - W - 1);
    for (int i = W + 1; i < T; i++)
        for (int j = 0; j <= i; j++)
            assert_true(dh[i * T + j] == 42.0);
    for (int j = 0; j <= 1; j++)
        assert_true(isfinite(dh[T + j]) && dh[T + j] != 42.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_window),         cmocka_unit_test(test_full_window),
        cmocka_unit_test(test_twin),              cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_no_convergence),    cmocka_unit_test(test_threads),
        cmocka_unit_test(test_numeric_errors),    cmocka_unit_test(test_log_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
