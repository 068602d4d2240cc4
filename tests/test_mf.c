/* Tests of the approximate engines per query (src/ising/mf.c,
 * src/ising/bp.c; spec section 8, "Mean-field family", "Implicit
 * gradients"): ba_mf_forward / ba_mf_backward for mf, tap and bp.
 *
 * Expected values come from the closed form at J = 0, the exact engine
 * (ba_ising_marginals, reference enumeration), central finite differences
 * of the converged forward, and slow twins written here: plain undamped
 * Jacobi sweeps (bp with the cavity sums taken over l != j explicitly,
 * O(n^3)), the full Jacobian of the fixed-point map written out entry by
 * entry and its adjoint system solved by Gaussian elimination (bp: all
 * n(n-1) messages as unknowns).
 *
 * Tolerances (stated next to each check):
 *   J = 0       |logw - log sigmoid(2h)| <= 1e-14 (1 + |log sigmoid(2h)|);
 *   small J     n = 8, |J| <= a = 0.05: mf within (n-1) a^2, tap and bp
 *               within (n-1)^2 a^3 of the exact m (the leading neglected
 *               terms, see test_small_couplings); halving a divides the
 *               error by about 4 (mf) and 8 (tap, bp);
 *   chain       bp on W = 1 couplings: |logw - exact| <= 1e-10, and
 *               relative 1e-12 against a rigid chain's closed form;
 *   fd          max |an - fd| / max |an| < 1e-6 per array (eps 1e-6);
 *   twins       |m - m_ref| <= 1e-12; gradients max |an - ref| <=
 *               1e-10 (1 + max |ref|), both adjoint solvers of mf/tap;
 *   sequential  the Gauss-Seidel sweeps' result a fixed point to 1e-10,
 *               mf's within 1e-9 of damped Jacobi's, gradients 1e-8.
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

#define NMAX 16
#define LDJ (NMAX + 3) /* a leading dimension other than n */

static const ba_mf_method METHODS[3] = {BA_MF_NAIVE, BA_MF_TAP, BA_MF_BP};
static const char *const NAMES[3] = {"mf", "tap", "bp"};

static double uniform(ba_rng *r, double a) { return a * (2.0 * ba_rng_uniform(r) - 1.0); }

/* J (n, LDJ): upper entries uniform in [-a, a] (only k - j <= band when band
 * > 0, the rest 0), lower triangle and diagonal NaN (never read). */
static void fill_j(ba_rng *r, int n, double a, int band, double *J)
{
    for (int j = 0; j < n; j++)
        for (int k = 0; k < LDJ; k++)
            J[j * LDJ + k] = k <= j ? NAN : (band > 0 && k - j > band) ? 0.0 : uniform(r, a);
}

static double coup(const double *J, int j, int k)
{
    return j == k ? 0.0 : j < k ? J[j * LDJ + k] : J[k * LDJ + j];
}

/* One forward into logw and m (n each); asserts success. */
static ba_mf_info forward(ba_mf_method meth, const ba_mf_settings *s, int n, const double *h,
                          const double *J, double *logw, double *m)
{
    double *state = malloc(ba_mf_state_doubles(meth, n) * sizeof(double));
    double *ws = malloc(ba_mf_ws_doubles(n) * sizeof(double));
    char err[BA_ERR_LEN];
    ba_mf_info info;
    assert_non_null(state);
    assert_non_null(ws);
    int rc = ba_mf_forward(meth, s, n, h, J, LDJ, logw, state, ws, &info, err);
    if (rc)
        fail_msg("%s", err);
    if (m)
        memcpy(m, state, (size_t)n * sizeof *m);
    free(state);
    free(ws);
    return info;
}

/* Forward then backward with g; dh (n) and dJ (n, LDJ) are zeroed first. */
static ba_mf_info gradient(ba_mf_method meth, const ba_mf_settings *s, int n, const double *h,
                           const double *J, const double *g, double *dh, double *dJ)
{
    double *state = malloc(ba_mf_state_doubles(meth, n) * sizeof(double));
    double *ws = malloc(ba_mf_ws_doubles(n) * sizeof(double));
    double logw[NMAX];
    int ipiv[NMAX];
    char err[BA_ERR_LEN];
    ba_mf_info info;
    assert_non_null(state);
    assert_non_null(ws);
    if (ba_mf_forward(meth, s, n, h, J, LDJ, logw, state, ws, NULL, err))
        fail_msg("%s", err);
    memset(dh, 0, (size_t)n * sizeof *dh);
    memset(dJ, 0, (size_t)n * LDJ * sizeof *dJ);
    if (ba_mf_backward(meth, s, n, J, LDJ, state, g, dh, dJ, LDJ, ws, ipiv, &info, err))
        fail_msg("%s", err);
    free(state);
    free(ws);
    return info;
}

static void expect_error(int rc, int want, const char *err, const char *part)
{
    assert_int_equal(rc, want);
    if (!strstr(err, part))
        fail_msg("message \"%s\" does not name \"%s\"", err, part);
}

#include "mf_ref.h"

/* ---------------------------------------------------------------- tests */

static void test_zero_couplings(void **st)
{
    (void)st;
    const int n = 9;
    double h[9] = {-40.0, -30.0, -5.0, -0.1, 0.0, 1e-3, 2.0, 15.0, 40.0};
    double J[NMAX * LDJ], logw[NMAX], worst = 0.0;
    for (int j = 0; j < n; j++)
        for (int k = 0; k < LDJ; k++)
            J[j * LDJ + k] = k <= j ? NAN : 0.0;
    ba_mf_settings s = {0.5, 1e-12, 100, BA_MF_ADJ_LU, NULL, 0};
    for (int t = 0; t < 3; t++) {
        ba_mf_info info = forward(METHODS[t], &s, n, h, J, logw, NULL);
        assert_int_equal(info.converged, 1);
        assert_int_equal(info.iters, 1); /* m = tanh(h) is the fixed point */
        for (int j = 0; j < n; j++) {
            /* log sigmoid(2h) = -log1p(exp(-2h)) written independently */
            double e = h[j] >= 0 ? -log1p(exp(-2.0 * h[j])) : 2.0 * h[j] - log1p(exp(2.0 * h[j]));
            double d = fabs(logw[j] - e) / (1.0 + fabs(e));
            worst = fmax(worst, d);
            assert_true(d <= 1e-14);
        }
        forward(METHODS[t], &s, n, NULL, J, logw, NULL);
        for (int j = 0; j < n; j++)
            assert_true(fabs(logw[j] + log(2.0)) <= 1e-15);
    }
    printf("J = 0: worst relative error %.2e\n", worst);
}

/* Worst |m - m_exact| of each method on one instance (h, J). */
static void small_errors(int n, const double *h, const double *J, double err3[3])
{
    double lw[NMAX], mex[NMAX], m[NMAX];
    char err[BA_ERR_LEN];
    if (ba_ising_marginals(BA_ENGINE_REFERENCE, n, h, J, LDJ, lw, err))
        fail_msg("%s", err);
    for (int j = 0; j < n; j++)
        mex[j] = 2.0 * exp(lw[j]) - 1.0;
    ba_mf_settings s = {1.0, 1e-14, 10000, BA_MF_ADJ_LU, NULL, 0};
    for (int t = 0; t < 3; t++) {
        assert_int_equal(forward(METHODS[t], &s, n, h, J, lw, m).converged, 1);
        err3[t] = 0.0;
        for (int j = 0; j < n; j++)
            err3[t] = fmax(err3[t], fabs(m[j] - mex[j]));
    }
}

/* The exact m_j = tanh(h_j + sum_k A_jk m_k - m_j sum_k A_jk^2 (1 - m_k^2)
 * + O(A^3)) (the Plefka expansion): mf drops the second-order term, at
 * most |m_j (1 - m_j^2)| sum_k A_jk^2 <= 0.385 (n-1) a^2 < (n-1) a^2; tap
 * keeps it, and bp contains it (its messages expand to A_jk m_k^(k\j)
 * whose cavity shift gives the Onsager term), so both err at third order,
 * terms like sum_{k,l} A_jk A_kl A_lj, bounded by (n-1)^2 a^3. The bounds
 * are loose; the scaling check below tests the orders themselves. */
static void test_small_couplings(void **st)
{
    (void)st;
    const int n = 8;
    const double a = 0.05;
    ba_rng r;
    ba_rng_seed(&r, 16);
    double h[NMAX], J[NMAX * LDJ], Jh[NMAX * LDJ], e1[3], e2[3], worst[3] = {0}, ratio[3];
    double sum1[3] = {0}, sum2[3] = {0};
    for (int inst = 0; inst < 20; inst++) {
        for (int j = 0; j < n; j++)
            h[j] = ba_rng_normal(&r);
        fill_j(&r, n, a, 0, J);
        for (int e = 0; e < n * LDJ; e++)
            Jh[e] = 0.5 * J[e];
        small_errors(n, h, J, e1);
        small_errors(n, h, Jh, e2);
        for (int t = 0; t < 3; t++) {
            worst[t] = fmax(worst[t], e1[t]);
            sum1[t] += e1[t];
            sum2[t] += e2[t];
        }
        assert_true(e1[0] < (n - 1) * a * a);
        assert_true(e1[1] < (n - 1) * (n - 1) * a * a * a);
        assert_true(e1[2] < (n - 1) * (n - 1) * a * a * a);
    }
    for (int t = 0; t < 3; t++) {
        ratio[t] = sum1[t] / sum2[t];
        printf("small J (a = %.2f, n = %d): %s worst |dm| %.2e, error(a)/error(a/2) %.2f\n",
               a, n, NAMES[t], worst[t], ratio[t]);
    }
    /* second order: 4 (within 3..5); third order: 8 (above 6) */
    assert_true(ratio[0] > 3.0 && ratio[0] < 5.0);
    assert_true(ratio[1] > 6.0);
    assert_true(ratio[2] > 6.0);
    assert_true(sum1[1] < 0.25 * sum1[0] && sum1[2] < 0.25 * sum1[0]);
}

/* bp is exact on a tree: W = 1 chains against the exact engine, at
 * |J| <= 1.5 and 40 (messages saturate: the log-cosh branch), and at
 * |J| = 1e6 against the rigid chain's closed form (the enumeration's
 * energies of 1e6 keep only about 1e-10 absolute there): s_j = sigma_j s_0
 * with sigma_j the product of the coupling signs up to j, so
 * logw_j = log sigmoid(2 sigma_j sum_k sigma_k h_k), corrections e^(-2e6). */
static void test_bp_chain(void **st)
{
    (void)st;
    ba_rng r;
    ba_rng_seed(&r, 7);
    double h[NMAX], J[NMAX * LDJ], lw[NMAX], ex[NMAX], sg[NMAX], worst = 0.0;
    char err[BA_ERR_LEN];
    ba_mf_settings s = {1.0, 1e-14, 1000, BA_MF_ADJ_LU, NULL, 0};
    for (int v = 0; v < 42; v++) {
        int n = v % 14 + 1;
        double a = v < 14 ? 1.5 : v < 28 ? 40.0 : 1e6;
        for (int j = 0; j < n; j++)
            h[j] = 1.5 * ba_rng_normal(&r);
        fill_j(&r, n, 1.0, 1, J);
        if (a < 1e6) {
            for (int j = 0; j + 1 < n; j++)
                J[j * LDJ + j + 1] *= a;
            if (ba_ising_marginals(BA_ENGINE_REFERENCE, n, h, J, LDJ, ex, err))
                fail_msg("%s", err);
        } else {
            double H = 0.0;
            sg[0] = 1.0;
            for (int j = 0; j + 1 < n; j++) {
                J[j * LDJ + j + 1] = J[j * LDJ + j + 1] > 0 ? a : -a;
                sg[j + 1] = J[j * LDJ + j + 1] > 0 ? sg[j] : -sg[j];
            }
            for (int j = 0; j < n; j++)
                H += sg[j] * h[j];
            for (int j = 0; j < n; j++) {
                double x = 2.0 * sg[j] * H;
                ex[j] = x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x));
            }
        }
        ba_mf_info info = forward(BA_MF_BP, &s, n, h, J, lw, NULL);
        assert_int_equal(info.converged, 1);
        assert_true(info.iters <= n + 1); /* exact after the chain's length */
        for (int j = 0; j < n; j++) {
            double d = fabs(lw[j] - ex[j]) / (a < 1e6 ? 1.0 : fabs(ex[j]));
            worst = fmax(worst, d);
            assert_true(d <= (a < 1e6 ? 1e-10 : 1e-12));
        }
    }
    printf("bp on chains n = 1..14, |J| up to 1.5, 40, = 1e6: worst error %.2e\n", worst);
}

/* L = sum_j c_j m_j at the converged forward. */
static double loss(ba_mf_method meth, const ba_mf_settings *s, int n, const double *h,
                   const double *J, const double *c)
{
    double lw[NMAX], m[NMAX], L = 0.0;
    forward(meth, s, n, h, J, lw, m);
    for (int j = 0; j < n; j++)
        L += c[j] * m[j];
    return L;
}

static void test_finite_differences(void **st)
{
    (void)st;
    const double eps = 1e-6;
    ba_rng r;
    ba_rng_seed(&r, 99);
    ba_mf_settings s = {0.7, 1e-13, 100000, BA_MF_ADJ_LU, NULL, 0};
    double h[NMAX], J[NMAX * LDJ], c[NMAX], dh[NMAX], dJ[NMAX * LDJ], worst = 0.0;
    for (int ni = 0; ni < 2; ni++) {
        int n = ni ? 12 : 6;
        for (int j = 0; j < n; j++) {
            h[j] = ba_rng_normal(&r);
            c[j] = ba_rng_normal(&r);
        }
        fill_j(&r, n, 0.2, 0, J);
        for (int t = 0; t < 3; t++) {
            assert_int_equal(gradient(METHODS[t], &s, n, h, J, c, dh, dJ).converged, 1);
            double eh = 0.0, mh = 0.0, eJ = 0.0, mJ = 0.0;
            for (int j = 0; j < n; j++) {
                double keep = h[j];
                h[j] = keep + eps;
                double lp = loss(METHODS[t], &s, n, h, J, c);
                h[j] = keep - eps;
                double lm = loss(METHODS[t], &s, n, h, J, c);
                h[j] = keep;
                eh = fmax(eh, fabs((lp - lm) / (2 * eps) - dh[j]));
                mh = fmax(mh, fabs(dh[j]));
                for (int k = j + 1; k < n; k++) {
                    double *e = &J[j * LDJ + k], kj = *e;
                    *e = kj + eps;
                    lp = loss(METHODS[t], &s, n, h, J, c);
                    *e = kj - eps;
                    lm = loss(METHODS[t], &s, n, h, J, c);
                    *e = kj;
                    eJ = fmax(eJ, fabs((lp - lm) / (2 * eps) - dJ[j * LDJ + k]));
                    mJ = fmax(mJ, fabs(dJ[j * LDJ + k]));
                }
            }
            printf("fd %s n = %d: dh %.2e, dJ %.2e (relative)\n", NAMES[t], n, eh / mh, eJ / mJ);
            worst = fmax(worst, fmax(eh / mh, eJ / mJ));
            assert_true(eh < 1e-6 * mh);
            assert_true(eJ < 1e-6 * mJ);
        }
    }
    printf("fd: worst %.2e\n", worst);
}

/* Worst |x - y| over the pairs j < k of two (n, LDJ) arrays. */
static double jdiff(int n, const double *x, const double *y, double *ymax)
{
    double d = 0.0;
    for (int j = 0; j < n; j++)
        for (int k = j + 1; k < n; k++) {
            d = fmax(d, fabs(x[j * LDJ + k] - y[j * LDJ + k]));
            *ymax = fmax(*ymax, fabs(y[j * LDJ + k]));
        }
    return d;
}

static void test_twins(void **st)
{
    (void)st;
    ba_rng r;
    ba_rng_seed(&r, 3);
    double h[NMAX], J[NMAX * LDJ], g[NMAX], lw[NMAX], m[NMAX], mr[NMAX];
    double dh[NMAX], dJ[NMAX * LDJ], rh[NMAX], rJ[NMAX * LDJ], u[NMAX][NMAX];
    double wm = 0.0, wg = 0.0;
    for (int n = 1; n <= 12; n++) {
        for (int j = 0; j < n; j++) {
            h[j] = ba_rng_normal(&r);
            g[j] = ba_rng_normal(&r);
        }
        fill_j(&r, n, 0.25, 0, J);
        for (int t = 0; t < 3; t++) {
            if (t < 2)
                ref_mft_forward(t, n, h, J, mr);
            else
                ref_bp_forward(n, h, J, u, mr);
            ba_mf_settings s = {0.6, 1e-14, 100000, BA_MF_ADJ_LU, NULL, 0};
            forward(METHODS[t], &s, n, h, J, lw, m);
            for (int j = 0; j < n; j++) {
                wm = fmax(wm, fabs(m[j] - mr[j]));
                assert_true(fabs(m[j] - mr[j]) <= 1e-12);
                /* logw is the same marginal, without the cancellation */
                assert_true(fabs(2.0 * exp(lw[j]) - 1.0 - m[j]) <= 1e-15);
            }
            memset(rJ, 0, sizeof rJ);
            if (t < 2)
                ref_mft_backward(t, n, J, mr, g, rh, rJ);
            else
                ref_bp_backward(n, h, J, u, g, rh, rJ);
            for (int adj = 0; adj < (t < 2 ? 2 : 1); adj++) {
                s.adjoint = adj ? BA_MF_ADJ_ITER : BA_MF_ADJ_LU;
                ba_mf_info info = gradient(METHODS[t], &s, n, h, J, g, dh, dJ);
                assert_int_equal(info.converged, 1);
                double mx = 0.0, d = jdiff(n, dJ, rJ, &mx);
                for (int j = 0; j < n; j++) {
                    d = fmax(d, fabs(dh[j] - rh[j]));
                    mx = fmax(mx, fabs(rh[j]));
                }
                wg = fmax(wg, d / (1.0 + mx));
                assert_true(d <= 1e-10 * (1.0 + mx));
            }
        }
    }
    printf("twins n = 1..12: worst |m - ref| %.2e, gradients %.2e (relative to 1 + max)\n", wm,
           wg);
}

/* h = 0 and ferromagnetic couplings: m = 0 (bp: messages 0) is a fixed
 * point at once, but an unstable one (A D has eigenvalue n - 1): the
 * iterative adjoint diverges and says so, writing nothing; LU still solves
 * (I - A) u = g for mf and tap. */
static void test_divergent_adjoint(void **st)
{
    (void)st;
    const int n = 8;
    double J[NMAX * LDJ], g[NMAX], lw[NMAX], dh[NMAX], dJ[NMAX * LDJ], rh[NMAX], rJ[NMAX * LDJ];
    double state[2 * NMAX + NMAX * NMAX], ws[2 * NMAX * NMAX + 4 * NMAX], m0[NMAX] = {0};
    int ipiv[NMAX];
    char err[BA_ERR_LEN];
    for (int j = 0; j < n; j++) {
        g[j] = 1.0 + 0.1 * j;
        for (int k = 0; k < LDJ; k++)
            J[j * LDJ + k] = k <= j ? NAN : 1.0;
    }
    ba_mf_settings s = {1.0, 1e-12, 100000, BA_MF_ADJ_ITER, NULL, 0};
    ba_mf_info info;
    for (int t = 0; t < 3; t++) {
        assert_int_equal(ba_mf_forward(METHODS[t], &s, n, NULL, J, LDJ, lw, state, ws, &info,
                                       err), BA_OK);
        assert_int_equal(info.converged, 1);
        dh[0] = 42.0;
        expect_error(ba_mf_backward(METHODS[t], &s, n, J, LDJ, state, g, dh, NULL, 0, ws, NULL,
                                    &info, err),
                     BA_ERR_NUMERIC, err, "not finite");
        assert_true(dh[0] == 42.0);
        if (t == 2)
            break;
        s.adjoint = BA_MF_ADJ_LU;
        memset(dh, 0, sizeof dh);
        memset(dJ, 0, sizeof dJ);
        assert_int_equal(ba_mf_backward(METHODS[t], &s, n, J, LDJ, state, g, dh, dJ, LDJ, ws,
                                        ipiv, &info, err), BA_OK);
        ref_mft_backward(t, n, J, m0, g, rh, rJ);
        for (int j = 0; j < n; j++) {
            assert_true(fabs(dh[j] - rh[j]) <= 1e-12 * (1.0 + fabs(rh[j])));
            for (int k = j + 1; k < n; k++)
                assert_true(fabs(dJ[j * LDJ + k] - rJ[j * LDJ + k]) <= 1e-12);
        }
        s.adjoint = BA_MF_ADJ_ITER;
    }
}

/* dh and dJ accumulate, and either may be NULL. */
static void test_accumulate(void **st)
{
    (void)st;
    const int n = 7;
    ba_rng r;
    ba_rng_seed(&r, 21);
    double h[NMAX], J[NMAX * LDJ], g[NMAX], dh[NMAX], dJ[NMAX * LDJ], lw[NMAX];
    double state[2 * NMAX + NMAX * NMAX], ws[2 * NMAX * NMAX + 4 * NMAX];
    double ah[NMAX], aJ[NMAX * LDJ];
    int ipiv[NMAX];
    char err[BA_ERR_LEN];
    for (int j = 0; j < n; j++) {
        h[j] = ba_rng_normal(&r);
        g[j] = ba_rng_normal(&r);
    }
    fill_j(&r, n, 0.3, 0, J);
    ba_mf_settings s = {0.8, 1e-13, 10000, BA_MF_ADJ_LU, NULL, 0};
    for (int t = 0; t < 3; t++) {
        gradient(METHODS[t], &s, n, h, J, g, dh, dJ);
        assert_int_equal(ba_mf_forward(METHODS[t], &s, n, h, J, LDJ, lw, state, ws, NULL, err),
                         BA_OK);
        for (int j = 0; j < n * LDJ; j++)
            aJ[j] = 1.0 + j;
        for (int j = 0; j < n; j++)
            ah[j] = -1.0 - j;
        assert_int_equal(ba_mf_backward(METHODS[t], &s, n, J, LDJ, state, g, ah, aJ, LDJ, ws,
                                        ipiv, NULL, err),
                         BA_OK);
        for (int j = 0; j < n; j++) {
            assert_true(fabs(ah[j] - (-1.0 - j + dh[j])) <= 1e-14);
            for (int k = 0; k < n; k++)
                if (k > j)
                    assert_true(fabs(aJ[j * LDJ + k] - (1.0 + j * LDJ + k + dJ[j * LDJ + k])) <=
                                1e-13);
                else /* not a coupling: untouched */
                    assert_true(aJ[j * LDJ + k] == 1.0 + j * LDJ + k);
        }
        /* NULL outputs: the other one unchanged */
        memset(ah, 0, sizeof ah);
        assert_int_equal(ba_mf_backward(METHODS[t], &s, n, J, LDJ, state, g, ah, NULL, 0, ws,
                                        ipiv, NULL, err),
                         BA_OK);
        for (int j = 0; j < n; j++)
            assert_true(ah[j] == dh[j]);
        memset(aJ, 0, sizeof aJ);
        assert_int_equal(ba_mf_backward(METHODS[t], &s, n, J, LDJ, state, g, NULL, aJ, LDJ, ws,
                                        ipiv, NULL, err),
                         BA_OK);
        for (int j = 0; j < n; j++)
            for (int k = j + 1; k < n; k++)
                assert_true(aJ[j * LDJ + k] == dJ[j * LDJ + k]);
    }
}

/* Saturated fields and strong couplings: everything finite; tiny weights
 * keep their relative precision (mf, tap: logw = log sigmoid(2 phi(m)) with
 * phi recomputed here from the returned m). */
static void test_saturated(void **st)
{
    (void)st;
    const int n = 10;
    ba_rng r;
    ba_rng_seed(&r, 31);
    const double hv[10] = {-300, -40, -30, -3, -0.5, 0.5, 3, 20, 35, 300};
    double J[NMAX * LDJ], g[NMAX], lw[NMAX], m[NMAX], dh[NMAX], dJ[NMAX * LDJ], worst = 0.0;
    for (int j = 0; j < n; j++)
        g[j] = ba_rng_normal(&r);
    for (int scale = 0; scale < 3; scale++) {
        double a = scale == 0 ? 0.05 : scale == 1 ? 5.0 : 400.0;
        fill_j(&r, n, a, 0, J);
        ba_mf_settings s = {0.5, 1e-12, 300, BA_MF_ADJ_LU, NULL, 0};
        for (int t = 0; t < 3; t++) {
            forward(METHODS[t], &s, n, hv, J, lw, m);
            for (int j = 0; j < n; j++)
                assert_true(isfinite(lw[j]) && lw[j] <= 0.0);
            if (scale == 0 && t < 2)
                for (int j = 0; j < n; j++) {
                    double phi = ref_phi(t, n, hv, J, m, j);
                    double e = phi >= 0 ? -log1p(exp(-2 * phi)) : 2 * phi - log1p(exp(2 * phi));
                    /* m is F of the last iterate, phi(m) one step later:
                     * they differ by the tolerance times the slope */
                    worst = fmax(worst, fabs(lw[j] - e) / fabs(e));
                    assert_true(fabs(lw[j] - e) <= 1e-10 * fabs(e));
                }
            for (int adj = 0; adj < 2; adj++) {
                s.adjoint = adj ? BA_MF_ADJ_ITER : BA_MF_ADJ_LU;
                char err[BA_ERR_LEN];
                double state[2 * NMAX + NMAX * NMAX], ws[2 * NMAX * NMAX + 4 * NMAX];
                int ipiv[NMAX];
                assert_int_equal(ba_mf_forward(METHODS[t], &s, n, hv, J, LDJ, lw, state, ws,
                                               NULL, err), BA_OK);
                memset(dh, 0, sizeof dh);
                memset(dJ, 0, sizeof dJ);
                int rc = ba_mf_backward(METHODS[t], &s, n, J, LDJ, state, g, dh, dJ, LDJ, ws,
                                        ipiv, NULL, err);
                if (rc)
                    fail_msg("%s a = %g: %s", NAMES[t], a, err);
                for (int j = 0; j < n; j++) {
                    assert_true(isfinite(dh[j]));
                    for (int k = j + 1; k < n; k++)
                        assert_true(isfinite(dJ[j * LDJ + k]));
                }
            }
        }
    }
    printf("saturated: worst relative |logw - log sigmoid(2 phi(m))| %.2e\n", worst);
}

static void test_errors(void **st)
{
    (void)st;
    const int n = 5;
    double h[NMAX] = {0.1, -0.2, 0.3, 0.4, -0.5}, J[NMAX * LDJ], lw[NMAX], g[NMAX] = {1, 2, 3};
    double state[2 * NMAX + NMAX * NMAX], ws[2 * NMAX * NMAX + 4 * NMAX], dh[NMAX];
    int ipiv[NMAX];
    char err[BA_ERR_LEN];
    ba_rng r;
    ba_rng_seed(&r, 5);
    fill_j(&r, n, 0.3, 0, J);
    assert_true(ba_mf_ws_doubles(NMAX) <= sizeof ws / sizeof ws[0]);
    struct {
        ba_mf_settings s;
        const char *part;
    } bad[] = {
        {{0.0, 1e-10, 10, BA_MF_ADJ_LU, NULL, 0}, "damping 0"},
        {{1.5, 1e-10, 10, BA_MF_ADJ_LU, NULL, 0}, "damping 1.5"},
        {{NAN, 1e-10, 10, BA_MF_ADJ_LU, NULL, 0}, "damping nan"},
        {{0.5, 0.0, 10, BA_MF_ADJ_LU, NULL, 0}, "tolerance 0"},
        {{0.5, -1.0, 10, BA_MF_ADJ_LU, NULL, 0}, "tolerance -1"},
        {{0.5, INFINITY, 10, BA_MF_ADJ_LU, NULL, 0}, "tolerance inf"},
        {{0.5, 1e-10, 0, BA_MF_ADJ_LU, NULL, 0}, "max_iter 0"},
        {{0.5, 1e-10, 10, (ba_mf_adjoint)7, NULL, 0}, "solver 7"},
        {{0.5, 1e-10, 10, BA_MF_ADJ_LU, NULL, 2}, "order 2"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
        for (int t = 0; t < 3; t++) {
            lw[0] = 42.0;
            expect_error(ba_mf_forward(METHODS[t], &bad[b].s, n, h, J, LDJ, lw, state, ws, NULL,
                                       err),
                         BA_ERR_ARG, err, bad[b].part);
            assert_true(lw[0] == 42.0);
            expect_error(ba_mf_backward(METHODS[t], &bad[b].s, n, J, LDJ, state, g, dh, NULL, 0,
                                        ws, ipiv, NULL, err),
                         BA_ERR_ARG, err, bad[b].part);
        }
    ba_mf_settings s = {0.5, 1e-10, 100, BA_MF_ADJ_LU, NULL, 0};
    expect_error(ba_mf_check_settings(NULL, err), BA_ERR_ARG, err, "NULL");
    expect_error(ba_mf_forward((ba_mf_method)9, &s, n, h, J, LDJ, lw, state, ws, NULL, err),
                 BA_ERR_ARG, err, "method 9");
    expect_error(ba_mf_forward(BA_MF_NAIVE, &s, 0, h, J, LDJ, lw, state, ws, NULL, err),
                 BA_ERR_ARG, err, "0 spins");
    expect_error(ba_mf_forward(BA_MF_NAIVE, &s, n, h, J, n - 1, lw, state, ws, NULL, err),
                 BA_ERR_ARG, err, "dimension 4");
    for (int t = 0; t < 3; t++) {
        h[2] = NAN;
        lw[0] = 42.0;
        expect_error(ba_mf_forward(METHODS[t], &s, n, h, J, LDJ, lw, state, ws, NULL, err),
                     BA_ERR_NUMERIC, err, "h[2]");
        assert_true(lw[0] == 42.0);
        h[2] = 0.3;
        J[1 * LDJ + 3] = INFINITY;
        expect_error(ba_mf_forward(METHODS[t], &s, n, h, J, LDJ, lw, state, ws, NULL, err),
                     BA_ERR_NUMERIC, err, "J[1][3]");
        J[1 * LDJ + 3] = 0.1;
        assert_int_equal(ba_mf_forward(METHODS[t], &s, n, h, J, LDJ, lw, state, ws, NULL, err),
                         BA_OK);
        g[4] = NAN;
        dh[0] = 42.0;
        expect_error(ba_mf_backward(METHODS[t], &s, n, J, LDJ, state, g, dh, NULL, 0, ws, ipiv,
                                    NULL, err),
                     BA_ERR_NUMERIC, err, "g[4]");
        assert_true(dh[0] == 42.0);
        g[4] = 0.0;
        expect_error(ba_mf_backward(METHODS[t], &s, n, J, LDJ, state, g, dh, dh, 2, ws, ipiv,
                                    NULL, err),
                     BA_ERR_ARG, err, "dimension 2");
    }
    expect_error(ba_mf_backward(BA_MF_TAP, &s, n, J, LDJ, state, g, dh, NULL, 0, ws, NULL, NULL,
                                err),
                 BA_ERR_ARG, err, "ipiv");
    /* couplings whose sums overflow (bp's messages are at most the cavity
     * fields, which double a sweep here: not within 100 sweeps) */
    double big[3 * LDJ];
    for (int j = 0; j < 3 * LDJ; j++)
        big[j] = 1e308;
    for (int t = 0; t < 2; t++)
        expect_error(ba_mf_forward(METHODS[t], &s, 3, h, big, LDJ, lw, state, ws, NULL, err),
                     BA_ERR_NUMERIC, err, "overflowed");
}

/* Strong frustrated couplings, undamped, 5 sweeps: no convergence, reported
 * as such, and finite marginals. */
static void test_no_convergence(void **st)
{
    (void)st;
    const int n = 8;
    ba_rng r;
    ba_rng_seed(&r, 11);
    double h[NMAX], J[NMAX * LDJ], lw[NMAX], m[NMAX], g[NMAX], dh[NMAX], dJ[NMAX * LDJ];
    for (int j = 0; j < n; j++) {
        h[j] = 0.3 * ba_rng_normal(&r);
        g[j] = ba_rng_normal(&r);
    }
    fill_j(&r, n, 0.5, 0, J);
    for (int j = 0; j < n; j++)
        for (int k = j + 1; k < n; k++)
            J[j * LDJ + k] -= 2.0; /* antiferromagnetic on a complete graph */
    ba_mf_settings s = {1.0, 1e-10, 5, BA_MF_ADJ_ITER, NULL, 0};
    for (int t = 0; t < 3; t++) {
        ba_mf_info info = forward(METHODS[t], &s, n, h, J, lw, m);
        printf("no convergence %s: converged %d after %d sweeps\n", NAMES[t], info.converged,
               info.iters);
        assert_int_equal(info.converged, 0);
        assert_int_equal(info.iters, 5);
        for (int j = 0; j < n; j++) {
            assert_true(isfinite(lw[j]) && lw[j] <= 0.0);
            assert_true(fabs(m[j]) <= 1.0);
        }
        /* the backward of such a state is finite too (its own count) */
        info = gradient(METHODS[t], &s, n, h, J, g, dh, dJ);
        assert_true(info.iters >= 1 && info.iters <= 5);
        for (int j = 0; j < n; j++)
            assert_true(isfinite(dh[j]));
    }
}

/* Sequential sweeps (the GEMM path's fallback): J_jk = -0.5 + U[-0.1,
 * 0.1] on a complete graph of 12 spins, A's lowest eigenvalue near -5.5
 * and its highest below 1 (mf's free energy convex: one fixed point).
 * Undamped Jacobi does not converge in 2000 sweeps; undamped sequential
 * sweeps do, to a fixed point the test recomputes (|tanh(h + A m) - m| <
 * 1e-10, the tolerance), for mf equal to damped Jacobi's (damping 0.2)
 * within 1e-9 and with the same gradients (1e-8 relative). tap (no free
 * energy descent) cycles undamped here and converges at damping 1/4 (the
 * GEMM path's retry). bp has no sequential sweeps: BA_ERR_ARG. */
static void test_sequential(void **st)
{
    (void)st;
    const int n = 12;
    ba_rng r;
    ba_rng_seed(&r, 13);
    double h[NMAX], J[NMAX * LDJ], lw[NMAX], m[NMAX], m2[NMAX], g[NMAX];
    double dh[NMAX], dJ[NMAX * LDJ], dh2[NMAX], dJ2[NMAX * LDJ];
    for (int j = 0; j < n; j++) {
        h[j] = ba_rng_normal(&r);
        g[j] = ba_rng_normal(&r);
    }
    fill_j(&r, n, 0.1, 0, J);
    for (int j = 0; j < n; j++)
        for (int k = j + 1; k < n; k++)
            J[j * LDJ + k] -= 0.5;
    ba_mf_settings jac = {1.0, 1e-10, 2000, BA_MF_ADJ_LU, NULL, 0};
    ba_mf_settings seq = {1.0, 1e-10, 2000, BA_MF_ADJ_LU, NULL, 1};
    ba_mf_settings slow = {0.2, 1e-12, 20000, BA_MF_ADJ_LU, NULL, 0};
    for (int t = 0; t < 2; t++) {
        ba_mf_info ij = forward(METHODS[t], &jac, n, h, J, lw, m);
        ba_mf_info is = forward(METHODS[t], &seq, n, h, J, lw, m);
        if (t == 1) { /* tap: no descent; undamped sequential sweeps cycle here */
            assert_false(is.converged);
            ba_mf_settings damped = seq;
            damped.damping = 0.25;
            is = forward(METHODS[t], &damped, n, h, J, lw, m);
        }
        printf("sequential %s: Jacobi converged %d, sequential %d in %d sweeps\n", NAMES[t],
               ij.converged, is.converged, is.iters);
        assert_false(ij.converged);
        assert_true(is.converged);
        double res = 0.0;
        for (int j = 0; j < n; j++) {
            double f = h[j], c = 0.0;
            for (int k = 0; k < n; k++) {
                f += coup(J, j, k) * m[k];
                c += coup(J, j, k) * coup(J, j, k) * (1.0 - m[k] * m[k]);
            }
            if (t == 1)
                f -= m[j] * c;
            res = fmax(res, fabs(tanh(f) - m[j]));
            assert_true(fabs(lw[j] - log((1.0 + m[j]) / 2.0)) < 1e-12);
        }
        assert_true(res < 1e-10);
        if (t == 1)
            continue;
        assert_true(forward(METHODS[t], &slow, n, h, J, lw, m2).converged);
        for (int j = 0; j < n; j++)
            assert_true(fabs(m[j] - m2[j]) < 1e-9);
        gradient(METHODS[t], &seq, n, h, J, g, dh, dJ);
        gradient(METHODS[t], &slow, n, h, J, g, dh2, dJ2);
        double mx = 0.0, e = 0.0;
        for (int j = 0; j < n; j++) {
            mx = fmax(mx, fabs(dh2[j]));
            e = fmax(e, fabs(dh[j] - dh2[j]));
            for (int k = j + 1; k < n; k++) {
                mx = fmax(mx, fabs(dJ2[j * LDJ + k]));
                e = fmax(e, fabs(dJ[j * LDJ + k] - dJ2[j * LDJ + k]));
            }
        }
        assert_true(mx > 0.01 && e <= 1e-8 * mx);
    }
    double state[2 * NMAX + NMAX * NMAX], ws[2 * NMAX * NMAX + 4 * NMAX];
    char err[BA_ERR_LEN];
    expect_error(ba_mf_forward(BA_MF_BP, &seq, n, h, J, LDJ, lw, state, ws, NULL, err),
                 BA_ERR_ARG, err, "sequential");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_couplings),  cmocka_unit_test(test_small_couplings),
        cmocka_unit_test(test_bp_chain),        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_twins),           cmocka_unit_test(test_errors),
        cmocka_unit_test(test_no_convergence), cmocka_unit_test(test_accumulate),
        cmocka_unit_test(test_saturated),      cmocka_unit_test(test_divergent_adjoint),
        cmocka_unit_test(test_sequential),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
