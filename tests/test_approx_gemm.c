/* Tests of the mf and tap engines' batched GEMM path (src/ising/approx_gemm.c,
 * src/ising/approx_gemm.h): ba_approx_gemm_forward / backward over a (B,T,T)
 * block at T = 64 and 100.
 *
 * Expected values:
 *   twin      the per-query path, written here from ba_mf_forward (with the
 *             retry policy of src/ising/ising.h) and ba_mf_backward (LU: the
 *             exact adjoint), both at tol 1e-10 (the twin does not go
 *             through ba_approx_forward, which may dispatch here): logw
 *             within 1e-7 absolute, dh and dJ within 1e-6 of their largest
 *             entry, on random couplings and on the paper-like pattern;
 *   fd        central differences (step 1e-5, tol 1e-13) of L = sum g m,
 *             m = 2 exp(logw) - 1, through the GEMM forward, against the
 *             GEMM backward's dh and dJ: within 1e-6 (1 + |value|);
 *   plain     memory 0 (plain damped Jacobi on the GEMM path) takes the
 *             per-query path's sweeps, row for row;
 *   stats     queries B T, none retried or unconverged, sweeps in [1,
 *             max_iter], fewer sweeps with Anderson than without;
 *   policy    max_iter 1 with an unreachable tolerance: every row of more
 *             than one key goes to the per-query sequential sweeps
 *             (retried, unconverged, 1 + 1 + 4 sweeps), its logw the
 *             sequential twin's bit for bit, and adds no gradient;
 *   rescue    mf on couplings J = -0.5 for every pair (A's lowest
 *             eigenvalue -0.5 (n - 1)), where damped Jacobi diverges even
 *             at damping / 4 (checked on the longest row), run without
 *             Anderson (memory 0): rows are retried, none is left
 *             unconverged, logw within 1e-7 of the sequential twin at tol
 *             1e-12 (the free energy is convex here: one fixed point),
 *             max |tanh(h + A m) - m| < 1e-7 at the result, and dh, dJ
 *             within 1e-6 of the twin's LU gradients;
 *   threads   1 and 2 OpenMP threads bit-identical, stats equal;
 *   errors    each bad argument BA_ERR_ARG or BA_ERR_NUMERIC with a message
 *             naming it, the outputs untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ising/approx_gemm.h"

#define TMAX 100
#define BB 2
#define NBLK (BB * TMAX * TMAX)

static const ba_engine ENGINES[2] = {BA_ENGINE_MF, BA_ENGINE_TAP};
static const ba_mf_method METHODS[2] = {BA_MF_NAIVE, BA_MF_TAP};

/* h (BB,T,T) ~ N(0,1), g likewise, J (T,T): paper == 1 the paper-like
 * pattern of strength a by distance (a/2, a for d = 2..4, 0, -a/2) plus
 * uniform noise of a/4, else N(0, a^2) for every pair. */
static void fill(ba_rng *r, int T, int paper, double a, double *h, double *g, double *J)
{
    for (int e = 0; e < BB * T * T; e++)
        h[e] = ba_rng_normal(r), g[e] = ba_rng_normal(r);
    for (int j = 0; j < T; j++)
        for (int k = 0; k < T; k++) {
            int d = k - j;
            double base = d == 1 ? a / 2 : d <= 4 ? a : d == 5 ? 0.0 : -a / 2;
            double v = paper ? base + a / 4 * (2 * ba_rng_uniform(r) - 1) : a * ba_rng_normal(r);
            J[j * T + k] = d > 0 ? v : NAN;
        }
}

/* The per-query twin of one block: logw, and dh, dJ (+=, may be NULL);
 * seq: sequential sweeps (the GEMM path's fallback) instead of Jacobi. */
static void twin(ba_mf_method meth, const ba_approx *a, int seq, int T, const double *h,
                 const double *J, const double *g, double *lw, double *dh, double *dJ)
{
    double *ws = malloc(sizeof(double) * ba_mf_ws_doubles(T));
    double *st = malloc(sizeof(double) * ba_mf_state_doubles(meth, T));
    int *ipiv = malloc(sizeof(int) * T);
    char err[BA_ERR_LEN];
    for (int q = 0; q < BB * T; q++) {
        int n = q % T + 1;
        ba_mf_settings s = ba_approx_mf_settings(a);
        s.sequential = seq;
        ba_mf_info inf;
        assert_int_equal(ba_mf_forward(meth, &s, n, h + q * T, J, T, lw + q * T, st, ws, &inf,
                                       err), BA_OK);
        if (!inf.converged) {
            s.damping /= 4, s.max_iter *= 4;
            assert_int_equal(ba_mf_forward(meth, &s, n, h + q * T, J, T, lw + q * T, st, ws,
                                           &inf, err), BA_OK);
        }
        if (g && inf.converged)
            assert_int_equal(ba_mf_backward(meth, &s, n, J, T, st, g + q * T, dh + q * T, dJ,
                                            T, ws, ipiv, &inf, err), BA_OK);
    }
    free(ws), free(st), free(ipiv);
}

static double max_abs_rows(int T, const double *x, const double *y)
{
    double m = 0.0;
    for (int e = 0; e < BB * T * T; e++)
        if (e % T <= (e / T) % T)
            m = fmax(m, fabs(x[e] - (y ? y[e] : 0.0)));
    return m;
}

static double max_abs_upper(int T, const double *x, const double *y)
{
    double m = 0.0;
    for (int e = 0; e < T * T; e++)
        if (e % T > e / T)
            m = fmax(m, fabs(x[e] - (y ? y[e] : 0.0)));
    return m;
}

static void test_matches_twin(void **state)
{
    (void)state;
    static double h[NBLK], g[NBLK], J[TMAX * TMAX], lw[NBLK], lw0[NBLK];
    static double dh[NBLK], dh0[NBLK], dJ[TMAX * TMAX], dJ0[TMAX * TMAX];
    ba_approx a = {0.5, 1e-10, 1000};
    char err[BA_ERR_LEN];
    const int Ts[2] = {64, 100};
    ba_rng r;
    ba_rng_seed(&r, 21);
    for (int t = 0; t < 2; t++)
        for (int paper = 0; paper < 2; paper++)
            for (int m = 0; m < 2; m++) {
                int T = Ts[t];
                fill(&r, T, paper, paper ? 0.1 : 0.05, h, g, J);
                memset(dh, 0, sizeof dh), memset(dJ, 0, sizeof dJ);
                memset(dh0, 0, sizeof dh0), memset(dJ0, 0, sizeof dJ0);
                ba_approx_stats f = {0, 0, 0, 0, 0}, b = {0, 0, 0, 0, 0};
                assert_int_equal(ba_approx_gemm_forward(ENGINES[m], &a, BB, T, h, J, T, lw, &f,
                                                        err), BA_OK);
                assert_int_equal(ba_approx_gemm_backward(ENGINES[m], &a, BB, T, h, J, T, g, dh,
                                                         dJ, &b, err), BA_OK);
                twin(METHODS[m], &a, 0, T, h, J, g, lw0, dh0, dJ0);
                double el = max_abs_rows(T, lw, lw0), eh = max_abs_rows(T, dh, dh0);
                double eJ = max_abs_upper(T, dJ, dJ0), mh = max_abs_rows(T, dh0, NULL);
                double mJ = max_abs_upper(T, dJ0, NULL);
                printf("%s T = %d %s: |dlogw| %.1e, |ddh| %.1e of %.2f, |ddJ| %.1e of %.2f, "
                       "sweeps %.1f fwd, %.1f adjoint\n", m ? "tap" : "mf", T,
                       paper ? "paper-like" : "random", el, eh, mh, eJ, mJ,
                       (double)f.sweeps / f.queries, (double)b.sweeps / b.queries);
                assert_true(mh > 0.1 && mJ > 0.1); /* not vacuous */
                assert_true(el <= 1e-7);
                assert_true(eh <= 1e-6 * mh);
                assert_true(eJ <= 1e-6 * mJ);
                assert_int_equal(f.queries, BB * T);
                assert_int_equal(b.queries, BB * T);
                assert_int_equal(f.retried + f.unconverged + b.unconverged, 0);
                assert_true(f.sweeps >= BB * T && f.max_sweeps <= a.max_iter);
                /* the backward started at the forward's answer, in double
                 * and rounded to float as the f32 layer keeps it: the same
                 * gradients to the same tolerance */
                for (int fl = 0; fl < 2; fl++) {
                    static double lwf[NBLK];
                    for (int e = 0; e < BB * T * T; e++)
                        lwf[e] = fl ? (double)(float)lw[e] : lw[e];
                    memset(dh, 0, sizeof dh), memset(dJ, 0, sizeof dJ);
                    ba_approx_stats w = {0, 0, 0, 0, 0};
                    assert_int_equal(ba_approx_gemm_backward_from(ENGINES[m], &a, BB, T, h, J, T,
                                                                  lwf, g, dh, dJ, &w, err),
                                     BA_OK);
                    assert_int_equal(w.queries, BB * T);
                    assert_int_equal(w.unconverged, 0);
                    assert_true(max_abs_rows(T, dh, dh0) <= 1e-6 * mh);
                    assert_true(max_abs_upper(T, dJ, dJ0) <= 1e-6 * mJ);
                }
            }
}

/* L = sum over the rows' keys of g m, m = 2 exp(logw) - 1. */
static double loss(ba_engine e, const ba_approx *a, int T, const double *h, const double *J,
                   const double *g, double *lw)
{
    char err[BA_ERR_LEN];
    assert_int_equal(ba_approx_gemm_forward(e, a, BB, T, h, J, T, lw, NULL, err), BA_OK);
    double L = 0.0;
    for (int e2 = 0; e2 < BB * T * T; e2++)
        if (e2 % T <= (e2 / T) % T)
            L += g[e2] * (2.0 * exp(lw[e2]) - 1.0);
    return L;
}

static void test_finite_differences(void **state)
{
    (void)state;
    static double h[NBLK], g[NBLK], J[TMAX * TMAX], lw[NBLK], dh[NBLK], dJ[TMAX * TMAX];
    const int T = 64;
    const double eps = 1e-5;
    ba_approx a = {0.5, 1e-13, 2000};
    char err[BA_ERR_LEN];
    ba_rng r;
    ba_rng_seed(&r, 33);
    for (int m = 0; m < 2; m++) {
        fill(&r, T, 1, 0.1, h, g, J);
        memset(dh, 0, sizeof dh), memset(dJ, 0, sizeof dJ);
        assert_int_equal(ba_approx_gemm_backward(ENGINES[m], &a, BB, T, h, J, T, g, dh, dJ,
                                                 NULL, err), BA_OK);
        double worst = 0.0;
        for (int s = 0; s < 24; s++) {
            double *p, an;
            if (s % 2 == 0) { /* a field of a random row's key */
                int b = s / 2 % BB, i = (int)(ba_rng_uniform(&r) * T);
                int j = (int)(ba_rng_uniform(&r) * (i + 1));
                p = h + (b * T + i) * T + j, an = dh[(b * T + i) * T + j];
            } else { /* a random coupling, near or far */
                int j = (int)(ba_rng_uniform(&r) * (T - 1));
                int k = j + 1 + (int)(ba_rng_uniform(&r) * (T - 1 - j));
                p = J + j * T + k, an = dJ[j * T + k];
            }
            double keep = *p;
            *p = keep + eps;
            double Lp = loss(ENGINES[m], &a, T, h, J, g, lw);
            *p = keep - eps;
            double Lm = loss(ENGINES[m], &a, T, h, J, g, lw);
            *p = keep;
            double fd = (Lp - Lm) / (2 * eps), e = fabs(fd - an) / (1 + fabs(an));
            worst = fmax(worst, e);
            if (e > 1e-6)
                fail_msg("%s probe %d: analytic %.10g, finite difference %.10g",
                         m ? "tap" : "mf", s, an, fd);
        }
        printf("%s: worst finite-difference error %.1e\n", m ? "tap" : "mf", worst);
    }
}

/* Memory 0 is the per-query iteration: the same sweeps row by row, so the
 * same totals; Anderson takes fewer. */
static void test_plain_and_anderson_sweeps(void **state)
{
    (void)state;
    static double h[NBLK], g[NBLK], J[TMAX * TMAX], lw[NBLK];
    const int T = 100;
    ba_approx a = ba_approx_default();
    char err[BA_ERR_LEN];
    ba_rng r;
    ba_rng_seed(&r, 41);
    fill(&r, T, 1, 0.1, h, g, J);
    double *ws = malloc(sizeof(double) * ba_mf_ws_doubles(T));
    double *st = malloc(sizeof(double) * ba_mf_state_doubles(BA_MF_NAIVE, T)), row[TMAX];
    for (int m = 0; m < 2; m++) {
        ba_approx_stats f0 = {0, 0, 0, 0, 0}, f5 = {0, 0, 0, 0, 0};
        assert_int_equal(ba_approx_gemm_forward_m(ENGINES[m], &a, 0, BB, T, h, J, T, lw, &f0,
                                                  err), BA_OK);
        long sweeps = 0;
        int mx = 0;
        ba_mf_settings s = ba_approx_mf_settings(&a);
        for (int q = 0; q < BB * T; q++) {
            ba_mf_info inf;
            assert_int_equal(ba_mf_forward(METHODS[m], &s, q % T + 1, h + q * T, J, T, row, st,
                                           ws, &inf, err), BA_OK);
            assert_true(inf.converged);
            sweeps += inf.iters, mx = inf.iters > mx ? inf.iters : mx;
        }
        assert_int_equal(f0.sweeps, sweeps);
        assert_int_equal(f0.max_sweeps, mx);
        assert_int_equal(ba_approx_gemm_forward(ENGINES[m], &a, BB, T, h, J, T, lw, &f5, err),
                         BA_OK);
        printf("%s T = %d: %.1f sweeps a row plain, %.1f with Anderson\n", m ? "tap" : "mf", T,
               (double)f0.sweeps / f0.queries, (double)f5.sweeps / f5.queries);
        assert_true(f5.sweeps * 2 < f0.sweeps);
        assert_int_equal(f5.unconverged + f5.retried, 0);
    }
    free(ws), free(st);
}

/* The policy on non-convergence. */
static void test_fallback(void **state)
{
    (void)state;
    static double h[NBLK], g[NBLK], J[TMAX * TMAX], lw[NBLK], lw0[NBLK], dh[NBLK];
    static double dJ[TMAX * TMAX];
    const int T = 64;
    ba_approx a = {0.5, 1e-300, 1};
    char err[BA_ERR_LEN];
    ba_rng r;
    ba_rng_seed(&r, 51);
    fill(&r, T, 1, 0.25, h, g, J);
    for (int m = 0; m < 2; m++) {
        ba_approx_stats f = {0, 0, 0, 0, 0}, b = {0, 0, 0, 0, 0};
        memset(dh, 0, sizeof dh), memset(dJ, 0, sizeof dJ);
        assert_int_equal(ba_approx_gemm_forward(ENGINES[m], &a, BB, T, h, J, T, lw, &f, err),
                         BA_OK);
        assert_int_equal(ba_approx_gemm_backward(ENGINES[m], &a, BB, T, h, J, T, g, dh, dJ, &b,
                                                 err), BA_OK);
        assert_int_equal(f.queries, BB * T);
        assert_int_equal(f.retried, BB * (T - 1));
        assert_int_equal(f.unconverged, BB * (T - 1));
        assert_int_equal(f.max_sweeps, 6); /* 1 here, then 1 + 4 per query */
        assert_int_equal(b.queries, BB * T);
        assert_int_equal(b.unconverged, BB * (T - 1));
        twin(METHODS[m], &a, 1, T, h, J, NULL, lw0, NULL, NULL);
        for (int q = 0; q < BB * T; q++) {
            int n = q % T + 1;
            if (n > 1)
                assert_memory_equal(lw + q * T, lw0 + q * T, sizeof(double) * n);
            for (int j = 0; j < n; j++) {
                assert_true(isfinite(lw[q * T + j]) && lw[q * T + j] <= 0.0);
                if (n > 1)
                    assert_true(dh[q * T + j] == 0.0);
                else
                    assert_true(fabs(dh[q * T] - g[q * T] / pow(cosh(h[q * T]), 2)) < 1e-14);
            }
        }
        assert_true(max_abs_upper(T, dJ, NULL) == 0.0);
    }
}

static void test_sequential_rescue(void **state)
{
    (void)state;
    static double h[NBLK], g[NBLK], J[TMAX * TMAX], lw[NBLK], lw0[NBLK];
    static double dh[NBLK], dh0[NBLK], dJ[TMAX * TMAX], dJ0[TMAX * TMAX];
    const int T = 64;
    ba_approx a = {0.5, 1e-8, 1000}, tight = {0.5, 1e-12, 1000};
    char err[BA_ERR_LEN];
    ba_rng r;
    ba_rng_seed(&r, 71);
    fill(&r, T, 0, 0.0, h, g, J);
    for (int j = 0; j < T; j++)
        for (int k = j + 1; k < T; k++)
            J[j * T + k] = -0.5;
    /* the need: Jacobi on the longest row fails at both dampings */
    double *ws = malloc(sizeof(double) * ba_mf_ws_doubles(T));
    double st[2 * TMAX];
    ba_mf_info inf;
    for (int k = 0; k < 2; k++) {
        ba_mf_settings s = {k ? 0.125 : 0.5, 1e-8, k ? 4000 : 1000, BA_MF_ADJ_LU, NULL, 0};
        assert_int_equal(ba_mf_forward(BA_MF_NAIVE, &s, T, h + (T - 1) * T, J, T, lw, st, ws,
                                       &inf, err), BA_OK);
        assert_false(inf.converged);
    }
    ba_approx_stats f = {0, 0, 0, 0, 0}, b = {0, 0, 0, 0, 0};
    memset(dh, 0, sizeof dh), memset(dJ, 0, sizeof dJ);
    memset(dh0, 0, sizeof dh0), memset(dJ0, 0, sizeof dJ0);
    assert_int_equal(ba_approx_gemm_forward_m(BA_ENGINE_MF, &a, 0, BB, T, h, J, T, lw, &f, err),
                     BA_OK);
    assert_int_equal(ba_approx_gemm_backward_m(BA_ENGINE_MF, &a, 0, BB, T, h, J, T, g, dh, dJ,
                                               &b, err), BA_OK);
    twin(BA_MF_NAIVE, &tight, 1, T, h, J, g, lw0, dh0, dJ0);
    printf("rescue: %ld of %ld rows retried, %ld unconverged (backward %ld), %.1f sweeps a "
           "row\n", f.retried, f.queries, f.unconverged, b.unconverged,
           (double)f.sweeps / f.queries);
    assert_true(f.retried >= BB * T / 2);
    assert_int_equal(f.unconverged, 0);
    assert_int_equal(b.unconverged, 0);
    assert_true(max_abs_rows(T, lw, lw0) <= 1e-7);
    double res = 0.0;
    for (int q = 0; q < BB * T; q++) {
        int n = q % T + 1;
        for (int j = 0; j < n; j++) {
            double f2 = h[q * T + j];
            for (int k = 0; k < n; k++)
                if (k != j)
                    f2 += J[(j < k ? j : k) * T + (j < k ? k : j)] *
                          (2.0 * exp(lw[q * T + k]) - 1.0);
            res = fmax(res, fabs(tanh(f2) - (2.0 * exp(lw[q * T + j]) - 1.0)));
        }
    }
    assert_true(res < 1e-7);
    double mh = max_abs_rows(T, dh0, NULL), mJ = max_abs_upper(T, dJ0, NULL);
    assert_true(mh > 0.1 && mJ > 0.1); /* not vacuous */
    assert_true(max_abs_rows(T, dh, dh0) <= 1e-6 * mh);
    assert_true(max_abs_upper(T, dJ, dJ0) <= 1e-6 * mJ);
    free(ws);
}

static void test_threads(void **state)
{
    (void)state;
#ifdef _OPENMP
    static double h[NBLK], g[NBLK], J[TMAX * TMAX];
    static double lw[2][NBLK], dh[2][NBLK], dJ[2][TMAX * TMAX];
    const int T = 100;
    ba_approx a = ba_approx_default();
    char err[BA_ERR_LEN];
    ba_rng r;
    ba_rng_seed(&r, 61);
    fill(&r, T, 1, 0.1, h, g, J);
    int saved = omp_get_max_threads();
    for (int m = 0; m < 2; m++) {
        ba_approx_stats st[2];
        for (int t = 0; t < 2; t++) {
            omp_set_num_threads(t + 1);
            memset(&st[t], 0, sizeof st[t]);
            memset(dh[t], 0, sizeof dh[t]), memset(dJ[t], 0, sizeof dJ[t]);
            assert_int_equal(ba_approx_gemm_forward(ENGINES[m], &a, BB, T, h, J, T, lw[t],
                                                    &st[t], err), BA_OK);
            assert_int_equal(ba_approx_gemm_backward(ENGINES[m], &a, BB, T, h, J, T, g, dh[t],
                                                     dJ[t], &st[t], err), BA_OK);
        }
        for (int e = 0; e < BB * T * T; e++)
            if (e % T <= (e / T) % T)
                assert_true(lw[0][e] == lw[1][e] && dh[0][e] == dh[1][e]);
        assert_memory_equal(dJ[0], dJ[1], sizeof dJ[0]);
        assert_memory_equal(&st[0], &st[1], sizeof st[0]);
    }
    omp_set_num_threads(saved);
#else
    skip();
#endif
}

/* One bad call: the status, a phrase of its message, logw and dh untouched. */
static void expect_bad(ba_engine e, const ba_approx *a, int mem, int B, int T, const double *h,
                       const double *J, int ldj, const double *g, int want, const char *phrase)
{
    static double lw[NBLK], dh[NBLK];
    char err[BA_ERR_LEN] = "";
    for (int k = 0; k < NBLK; k++)
        lw[k] = dh[k] = 42.0;
    int rc = g ? ba_approx_gemm_backward_m(e, a, mem, B, T, h, J, ldj, g, dh, NULL, NULL, err)
               : ba_approx_gemm_forward_m(e, a, mem, B, T, h, J, ldj, lw, NULL, err);
    if (rc != want || !strstr(err, phrase))
        fail_msg("expected status %d and '%s', got %d: '%s'", want, phrase, rc, err);
    for (int k = 0; k < NBLK; k++)
        assert_true(lw[k] == 42.0 && dh[k] == 42.0);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    static double h[NBLK], g[NBLK], J[TMAX * TMAX];
    const int T = 64;
    ba_rng r;
    ba_rng_seed(&r, 71);
    fill(&r, T, 1, 0.1, h, g, J);
    ba_approx ok = ba_approx_default(), x = ok;
    const ba_engine MF = BA_ENGINE_MF;
    assert_true(ba_approx_gemm_applies(MF, 64) && ba_approx_gemm_applies(BA_ENGINE_TAP, 4096));
    assert_false(ba_approx_gemm_applies(MF, 63) || ba_approx_gemm_applies(BA_ENGINE_BP, 256));
    assert_false(ba_approx_gemm_applies(BA_ENGINE_HYBRID, 256));
    expect_bad(BA_ENGINE_BP, &ok, 5, BB, T, h, J, T, NULL, BA_ERR_ARG,
               "engine 'bp' has no batched GEMM path");
    x.damping = 0;
    expect_bad(MF, &x, 5, BB, T, h, J, T, NULL, BA_ERR_ARG, "damping 0 is outside (0, 1]");
    x = ok, x.tol = -1;
    expect_bad(MF, &x, 5, BB, T, h, J, T, g, BA_ERR_ARG, "tolerance -1");
    x = ok, x.max_iter = 0;
    expect_bad(MF, &x, 5, BB, T, h, J, T, NULL, BA_ERR_ARG, "max_iter 0 is outside");
    expect_bad(MF, &ok, 17, BB, T, h, J, T, NULL, BA_ERR_ARG, "Anderson memory 17 is outside");
    expect_bad(MF, &ok, -1, BB, T, h, J, T, g, BA_ERR_ARG, "Anderson memory -1");
    expect_bad(MF, &ok, 5, 0, T, h, J, T, NULL, BA_ERR_ARG, "batch B = 0");
    expect_bad(MF, &ok, 5, BB, 0, h, J, T, NULL, BA_ERR_ARG, "T = 0 is outside");
    expect_bad(MF, &ok, 5, BB, 4097, h, J, 4097, NULL, BA_ERR_ARG, "T = 4097 is outside");
    expect_bad(MF, &ok, 5, BB, T, h, J, T - 1, NULL, BA_ERR_ARG, "leading dimension 63");
    expect_bad(MF, &ok, 5, BB, T, h, NULL, T, NULL, BA_ERR_ARG, "couplings J are NULL");
    double saved = J[2 * T + 40];
    J[2 * T + 40] = NAN;
    expect_bad(BA_ENGINE_TAP, &ok, 5, BB, T, h, J, T, g, BA_ERR_NUMERIC,
               "coupling J[2][40] = nan is not finite");
    J[2 * T + 40] = saved;
    h[(1 * T + 50) * T + 3] = INFINITY;
    expect_bad(BA_ENGINE_TAP, &ok, 5, BB, T, h, J, T, NULL, BA_ERR_NUMERIC,
               "field h[1][50][3] = inf is not finite");
    h[(1 * T + 50) * T + 3] = 0.0;
    h[(1 * T + 5) * T + 8] = NAN; /* beyond the row's keys: never read */
    static double lw[NBLK];
    char err[BA_ERR_LEN];
    assert_int_equal(ba_approx_gemm_forward(MF, &ok, BB, T, h, J, T, lw, NULL, err), BA_OK);
    assert_int_equal(ba_approx_gemm_forward(MF, &ok, BB, T, h, J, T, NULL, NULL, err),
                     BA_ERR_ARG);
    assert_non_null(strstr(err, "log-weights output is NULL"));
    assert_int_equal(ba_approx_gemm_backward(MF, &ok, BB, T, h, J, T, NULL, NULL, NULL, NULL,
                                             err), BA_ERR_ARG);
    assert_non_null(strstr(err, "upstream gradient g is NULL"));
    g[(1 * T + 4) * T + 1] = NAN;
    expect_bad(MF, &ok, 5, BB, T, h, J, T, g, BA_ERR_NUMERIC,
               "upstream gradient g[1][4][1] = nan is not finite");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_twin),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_plain_and_anderson_sweeps),
        cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_sequential_rescue),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
