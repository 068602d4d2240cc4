/* Tests of the exact Ising engine (spec sections 2-4): ba_ising_marginals,
 * ba_ising_backward and the batched ba_engine_forward/ba_engine_backward.
 *
 * Every expected value comes from code written here, independently of
 * src/ising/ref.c: closed forms (J = 0, two spins), a plain brute force over all
 * 2^n states in long double with its own log-sum-exp, brute-force
 * covariances, and central finite differences of the engine's own forward.
 * The engine works in double whatever ba_real is, so this file is built
 * against the float library.
 *
 * Tolerances (stated next to each check):
 *   forward        relative error in P(s_j = +1) < 1e-12, measured as
 *                  |expm1(logw - log P)| so tiny marginals do not underflow;
 *   backward       ||analytic - brute||_2 / ||brute||_2 < 1e-10 (measured
 *                  <= 5e-12 over 300 seeds; saturated spins have small
 *                  covariances that double rounding limits),
 *                  ||analytic - finite difference||_2 / ||fd||_2 < 1e-7
 *                  (eps 1e-5, central);
 *   extreme fields |logw - log P| < 1e-9 absolute. */
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

#define MAXN 10
#define FWD_TOL 1e-12
#define BF_TOL 1e-10
#define FD_EPS 1e-5
#define FD_TOL 1e-7

/* ------------------------------------------------------------- helpers */

static void fill_normal(ba_rng *r, double *x, size_t n, double std)
{
    for (size_t i = 0; i < n; i++)
        x[i] = std * ba_rng_normal(r);
}

/* A coupling matrix with leading dimension ld whose used entries (j < k < n)
 * are drawn N(0, std) and whose unused entries (diagonal, lower triangle)
 * are NaN, so an engine that reads them produces NaN and fails the test. */
static void fill_couplings(ba_rng *r, double *J, int n, int ld, double std)
{
    for (int j = 0; j < ld; j++)
        for (int k = 0; k < ld; k++)
            J[j * ld + k] = (j < k && k < n) ? std * ba_rng_normal(r) : NAN;
}

/* Relative error of P = exp(logw) against exp(logp), in log space. */
static double rel_p(double logw, long double logp)
{
    return fabs(expm1(logw - (double)logp));
}

static double rel_norm(const double *a, const double *ref, size_t len)
{
    double d = 0.0, nr = 0.0, na = 0.0;
    for (size_t i = 0; i < len; i++) {
        d += (a[i] - ref[i]) * (a[i] - ref[i]);
        nr += ref[i] * ref[i];
        na += a[i] * a[i];
    }
    if (sqrt(nr) < 1e-13 && sqrt(na) < 1e-13)
        return 0.0;
    return sqrt(d) / fmax(sqrt(nr), 1e-300);
}

/* Stable sigmoid(x). */
static double sigmoid(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

/* --- brute force, written plainly: enumerate states in long double ---- */

static int spin(unsigned s, int j) { return (s >> j & 1) ? 1 : -1; }

static long double bf_energy(int n, unsigned s, const double *h, const double *J, int ld)
{
    long double e = 0.0L;
    for (int j = 0; j < n; j++) {
        if (h)
            e += (long double)h[j] * spin(s, j);
        for (int k = j + 1; k < n; k++)
            e += (long double)J[j * ld + k] * spin(s, j) * spin(s, k);
    }
    return e;
}

/* logP[j] = log P(s_j = +1), by log-sum-exp over the s_j = +1 states and
 * over all states, each shifted by its own maximum. Also the state
 * probabilities p (2^n) if p != NULL. */
static void bf_marginals(int n, const double *h, const double *J, int ld, long double *logp,
                         long double *p)
{
    unsigned N = 1u << n;
    long double *e = malloc(sizeof(long double) * N);
    assert_non_null(e);
    long double mx = -INFINITY;
    for (unsigned s = 0; s < N; s++) {
        e[s] = bf_energy(n, s, h, J, ld);
        if (e[s] > mx)
            mx = e[s];
    }
    long double z = 0.0L;
    for (unsigned s = 0; s < N; s++)
        z += expl(e[s] - mx);
    long double logz = mx + logl(z);
    for (int j = 0; j < n; j++) {
        long double mj = -INFINITY, acc = 0.0L;
        for (unsigned s = 0; s < N; s++)
            if (spin(s, j) > 0 && e[s] > mj)
                mj = e[s];
        for (unsigned s = 0; s < N; s++)
            if (spin(s, j) > 0)
                acc += expl(e[s] - mj);
        logp[j] = mj + logl(acc) - logz;
    }
    if (p)
        for (unsigned s = 0; s < N; s++)
            p[s] = expl(e[s] - logz);
    free(e);
}

/* Brute-force covariances, as moments: dh_k = <G s_k> - <G><s_k>,
 * dJ_kl = <G s_k s_l> - <G><s_k s_l>, G = sum_j g_j s_j. dJ has leading
 * dimension ld, only k < l written. */
static void bf_backward(int n, const double *h, const double *J, int ld, const double *g,
                        double *dh, double *dJ)
{
    unsigned N = 1u << n;
    long double logp[MAXN], *p = malloc(sizeof(long double) * N);
    assert_non_null(p);
    bf_marginals(n, h, J, ld, logp, p);
    long double EG = 0.0L, Es[MAXN] = {0}, EGs[MAXN] = {0};
    long double Ess[MAXN][MAXN] = {{0}}, EGss[MAXN][MAXN] = {{0}};
    for (unsigned s = 0; s < N; s++) {
        long double G = 0.0L;
        for (int j = 0; j < n; j++)
            G += (long double)g[j] * spin(s, j);
        EG += p[s] * G;
        for (int k = 0; k < n; k++) {
            Es[k] += p[s] * spin(s, k);
            EGs[k] += p[s] * G * spin(s, k);
            for (int l = k + 1; l < n; l++) {
                Ess[k][l] += p[s] * spin(s, k) * spin(s, l);
                EGss[k][l] += p[s] * G * spin(s, k) * spin(s, l);
            }
        }
    }
    for (int k = 0; k < n; k++) {
        dh[k] = (double)(EGs[k] - EG * Es[k]);
        for (int l = k + 1; l < n; l++)
            dJ[k * ld + l] = (double)(EGss[k][l] - EG * Ess[k][l]);
    }
    free(p);
}

/* L = sum_j g_j m_j with m_j = 2 P(s_j = +1) - 1, through the engine. */
static double loss_m(int n, const double *h, const double *J, int ld, const double *g)
{
    double logw[MAXN];
    int rc = ba_ising_marginals(BA_ENGINE_REFERENCE, n, h, J, ld, logw, NULL);
    assert_int_equal(rc, BA_OK);
    double L = 0.0;
    for (int j = 0; j < n; j++)
        L += g[j] * (2.0 * exp(logw[j]) - 1.0);
    return L;
}

/* ----------------------------------------------------------------- J = 0 */

/* J = 0: the spins are independent and P(s_j = +1) = sigmoid(2 h_j). */
static void test_zero_coupling_is_sigmoid(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 11);
    double J[MAXN * MAXN] = {0}, h[MAXN], logw[MAXN];
    char err[BA_ERR_LEN];
    double worst = 0.0;
    for (int n = 1; n <= MAXN; n++)
        for (int rep = 0; rep < 5; rep++) {
            fill_normal(&r, h, (size_t)n, rep < 3 ? 2.0 : 15.0);
            assert_int_equal(ba_ising_marginals(BA_ENGINE_REFERENCE, n, h, J, n, logw, err),
                             BA_OK);
            for (int j = 0; j < n; j++) {
                double s = sigmoid(2.0 * h[j]);
                double e = fabs(exp(logw[j]) / s - 1.0);
                if (e > worst)
                    worst = e;
                if (!(e < FWD_TOL))
                    fail_msg("n=%d h[%d]=%.17g: P=%.17g, sigmoid(2h)=%.17g, rel %.3e", n, j,
                             h[j], exp(logw[j]), s, e);
            }
        }
    print_message("J = 0: worst relative error against sigmoid(2h) %.2e\n", worst);
}

/* ------------------------------------------------------------- two spins */

/* The four states' weights written out:
 *   (+,+): h0+h1+J  (+,-): h0-h1-J  (-,+): -h0+h1-J  (-,-): -h0-h1+J
 * P(s0=+1) = (e^{h0+h1+J} + e^{h0-h1-J}) / Z,
 * P(s1=+1) = (e^{h0+h1+J} + e^{-h0+h1-J}) / Z. */
static void test_two_spins_closed_form(void **state)
{
    (void)state;
    const double cases[][3] = {
        {0, 0, 0},     {0.3, -0.7, 0.5}, {1, 1, -2},     {-2, 0.5, 3},   {5, -5, 5},
        {20, 0, -20},  {-30, 30, 10},    {40, 35, -45},  {0, 0, 60},     {0, 0, -60},
        {-60, 1, 0.1}, {100, -100, 50},  {-150, 0, 150}, {1e-9, 0, 1e-9}};
    double worst = 0.0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double h[2] = {cases[c][0], cases[c][1]};
        double J[4] = {NAN, cases[c][2], NAN, NAN}; /* only J[0][1] is used */
        long double a = (long double)h[0] + h[1] + J[1], b = (long double)h[0] - h[1] - J[1];
        long double cc = -(long double)h[0] + h[1] - J[1], d = -(long double)h[0] - h[1] + J[1];
        long double mx = fmaxl(fmaxl(a, b), fmaxl(cc, d));
        long double Z = expl(a - mx) + expl(b - mx) + expl(cc - mx) + expl(d - mx);
        long double lp0 = logl(expl(a - mx) + expl(b - mx)) - logl(Z);
        long double lp1 = logl(expl(a - mx) + expl(cc - mx)) - logl(Z);
        double logw[2];
        assert_int_equal(ba_ising_marginals(BA_ENGINE_REFERENCE, 2, h, J, 2, logw, NULL), BA_OK);
        double e0 = rel_p(logw[0], lp0), e1 = rel_p(logw[1], lp1);
        worst = fmax(worst, fmax(e0, e1));
        if (!(e0 < FWD_TOL && e1 < FWD_TOL))
            fail_msg("h=(%g,%g) J=%g: logw=(%.17g,%.17g) closed form (%.17Lg,%.17Lg)", h[0], h[1],
                     J[1], logw[0], logw[1], lp0, lp1);
        assert_true(logw[0] <= 0.0 && logw[1] <= 0.0);
    }
    print_message("two spins: worst relative error in P %.2e\n", worst);
}

/* --------------------------------------------- random systems, brute force */

static void test_random_forward_brute_force(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 21);
    enum { LD = MAXN + 3 };
    double h[MAXN], J[LD * LD], logw[MAXN];
    long double lp[MAXN];
    double worst = 0.0;
    for (int n = 1; n <= 8; n++)
        for (int rep = 0; rep < 6; rep++) {
            int ld = n + rep % 3; /* ldj = n, n+1, n+2 */
            fill_normal(&r, h, (size_t)n, 2.0);
            fill_couplings(&r, J, n, ld, 1.0);
            assert_int_equal(ba_ising_marginals(BA_ENGINE_REFERENCE, n, h, J, ld, logw, NULL),
                             BA_OK);
            bf_marginals(n, h, J, ld, lp, NULL);
            for (int j = 0; j < n; j++) {
                double e = rel_p(logw[j], lp[j]);
                worst = fmax(worst, e);
                if (!(e < FWD_TOL))
                    fail_msg("n=%d ld=%d j=%d: logw %.17g brute %.17Lg (rel %.3e)", n, ld, j,
                             logw[j], lp[j], e);
            }
        }
    print_message("random systems: worst relative error in P %.2e\n", worst);
}

static void test_random_backward(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 31);
    enum { LD = MAXN + 3 };
    double worst_bf = 0.0, worst_fd = 0.0;
    for (int n = 1; n <= 8; n++)
        for (int rep = 0; rep < 3; rep++) {
            int ld = n + rep; /* ldj = n, n+1, n+2 */
            double h[MAXN], J[LD * LD], g[MAXN];
            fill_normal(&r, h, (size_t)n, 2.0);
            fill_couplings(&r, J, n, ld, 1.0);
            fill_normal(&r, g, (size_t)n, 1.0);
            /* Backward accumulates: start from random values and subtract. */
            double dh0[MAXN], dJ0[LD * LD], dh[MAXN], dJ[LD * LD];
            fill_normal(&r, dh0, (size_t)n, 1.0);
            fill_normal(&r, dJ0, (size_t)ld * ld, 1.0);
            memcpy(dh, dh0, sizeof dh0);
            memcpy(dJ, dJ0, sizeof dJ0);
            char err[BA_ERR_LEN];
            assert_int_equal(
                ba_ising_backward(BA_ENGINE_REFERENCE, n, h, J, ld, g, dh, dJ, err), BA_OK);
            /* Unused entries of dJ (j >= k, and columns >= n) stay untouched. */
            for (int j = 0; j < ld; j++)
                for (int k = 0; k < ld; k++)
                    if (!(j < k && k < n) && memcmp(&dJ[j * ld + k], &dJ0[j * ld + k], 8))
                        fail_msg("n=%d ld=%d: unused dJ[%d][%d] was written", n, ld, j, k);
            /* The increments, packed: dh (n) then dJ upper triangle. */
            int np = n + n * (n - 1) / 2, q = n;
            double an[MAXN + MAXN * MAXN], bf[MAXN + MAXN * MAXN], fd[MAXN + MAXN * MAXN];
            double bdh[MAXN], bdJ[LD * LD];
            bf_backward(n, h, J, ld, g, bdh, bdJ);
            for (int j = 0; j < n; j++) {
                an[j] = dh[j] - dh0[j];
                bf[j] = bdh[j];
                double keep = h[j];
                h[j] = keep + FD_EPS;
                double lp = loss_m(n, h, J, ld, g);
                h[j] = keep - FD_EPS;
                double lm = loss_m(n, h, J, ld, g);
                h[j] = keep;
                fd[j] = (lp - lm) / (2 * FD_EPS);
            }
            for (int j = 0; j < n; j++)
                for (int k = j + 1; k < n; k++, q++) {
                    an[q] = dJ[j * ld + k] - dJ0[j * ld + k];
                    bf[q] = bdJ[j * ld + k];
                    double keep = J[j * ld + k];
                    J[j * ld + k] = keep + FD_EPS;
                    double lp = loss_m(n, h, J, ld, g);
                    J[j * ld + k] = keep - FD_EPS;
                    double lm = loss_m(n, h, J, ld, g);
                    J[j * ld + k] = keep;
                    fd[q] = (lp - lm) / (2 * FD_EPS);
                }
            assert_int_equal(q, np);
            double ebf = rel_norm(an, bf, (size_t)np), efd = rel_norm(an, fd, (size_t)np);
            worst_bf = fmax(worst_bf, ebf);
            worst_fd = fmax(worst_fd, efd);
            if (!(ebf < BF_TOL))
                fail_msg("n=%d ld=%d: backward vs brute-force covariances rel %.3e", n, ld, ebf);
            if (!(efd < FD_TOL))
                fail_msg("n=%d ld=%d: backward vs finite differences rel %.3e", n, ld, efd);

            /* dh = NULL and dJ = NULL skip each part and leave the other the same. */
            double dh2[MAXN] = {0}, dJ2[LD * LD] = {0};
            assert_int_equal(
                ba_ising_backward(BA_ENGINE_REFERENCE, n, h, J, ld, g, dh2, NULL, NULL), BA_OK);
            assert_int_equal(
                ba_ising_backward(BA_ENGINE_REFERENCE, n, h, J, ld, g, NULL, dJ2, NULL), BA_OK);
            for (int j = 0; j < n; j++) {
                assert_true(fabs(dh2[j] - an[j]) <= 1e-12 * (1 + fabs(an[j])));
                for (int k = j + 1; k < n; k++)
                    assert_true(fabs(dJ2[j * ld + k] - (dJ[j * ld + k] - dJ0[j * ld + k])) <=
                                1e-12 * (1 + fabs(dJ2[j * ld + k])));
            }
        }
    print_message("backward: worst rel error vs brute force %.2e, vs finite differences %.2e\n",
                  worst_bf, worst_fd);
}

/* ---------------------------------------------------------- extreme fields */

static void check_extreme(int n, const double *h, const double *J, int ld, double *worst)
{
    double logw[MAXN];
    long double lp[MAXN];
    char err[BA_ERR_LEN];
    assert_int_equal(ba_ising_marginals(BA_ENGINE_REFERENCE, n, h, J, ld, logw, err), BA_OK);
    bf_marginals(n, h, J, ld, lp, NULL);
    for (int j = 0; j < n; j++) {
        if (!(isfinite(logw[j]) && logw[j] <= 0.0))
            fail_msg("h[%d]=%g: logw %.17g is not finite and <= 0", j, h[j], logw[j]);
        double e = fabs(logw[j] - (double)lp[j]);
        *worst = fmax(*worst, e);
        if (!(e < 1e-9))
            fail_msg("h[%d]=%g: logw %.17g, brute force %.17Lg (abs %.3e)", j, h[j], logw[j],
                     lp[j], e);
    }
    /* The attention normalisation a_j = w_j / sum_l w_l = softmax_j(logw_j). */
    double mx = -INFINITY, s = 0.0, a[MAXN], sa = 0.0;
    for (int j = 0; j < n; j++)
        mx = fmax(mx, logw[j]);
    for (int j = 0; j < n; j++)
        s += exp(logw[j] - mx);
    for (int j = 0; j < n; j++) {
        a[j] = exp(logw[j] - mx) / s;
        assert_true(isfinite(a[j]) && a[j] >= 0.0);
        sa += a[j];
    }
    assert_true(fabs(sa - 1.0) < 1e-14);
}

static void test_extreme_fields(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 41);
    enum { N = 8 };
    double h[N], J[N * N], worst = 0.0;
    /* |h| = 50 with mixed signs, J up to 5. */
    for (int rep = 0; rep < 20; rep++) {
        for (int j = 0; j < N; j++)
            h[j] = (ba_rng_below(&r, 2) ? 50.0 : -50.0);
        double jmax = rep < 10 ? 5.0 : 0.5;
        for (int j = 0; j < N; j++)
            for (int k = 0; k < N; k++)
                J[j * N + k] = j < k ? jmax * (2 * ba_rng_uniform(&r) - 1) : NAN;
        check_extreme(N, h, J, N, &worst);
    }
    /* h = -400 on one spin: P(s_j=+1) ~ e^-800, below the smallest double,
     * so its half of the states needs its own shift. */
    for (int t = 0; t < N; t++) {
        fill_normal(&r, h, N, 1.0);
        h[t] = -400.0;
        for (int j = 0; j < N; j++)
            for (int k = 0; k < N; k++)
                J[j * N + k] = j < k ? ba_rng_normal(&r) : NAN;
        double logw[N];
        assert_int_equal(ba_ising_marginals(BA_ENGINE_REFERENCE, N, h, J, N, logw, NULL), BA_OK);
        if (!(isfinite(logw[t]) && logw[t] < -780.0 && logw[t] > -820.0))
            fail_msg("h[%d] = -400: logw %.17g, expected finite and about -800", t, logw[t]);
        check_extreme(N, h, J, N, &worst);
    }
    /* Every spin at -400, +400 on one, and a strongly coupled system. */
    for (int j = 0; j < N; j++)
        h[j] = -400.0;
    for (int j = 0; j < N; j++)
        for (int k = 0; k < N; k++)
            J[j * N + k] = j < k ? 0.0 : NAN;
    check_extreme(N, h, J, N, &worst);
    h[3] = 400.0;
    check_extreme(N, h, J, N, &worst);
    for (int j = 0; j < N; j++)
        for (int k = 0; k < N; k++)
            J[j * N + k] = j < k ? (ba_rng_below(&r, 2) ? 40.0 : -40.0) : NAN;
    fill_normal(&r, h, N, 30.0);
    check_extreme(N, h, J, N, &worst);
    print_message("extreme fields: worst |logw - brute force| %.2e\n", worst);
}

/* ------------------------------------------------------------------ errors */

static void test_errors(void **state)
{
    (void)state;
    enum { N = 21 };
    static double J[N * N];
    double h[N] = {0}, logw[N], g[N] = {0}, dh[N], dJ[N * N];
    char err[BA_ERR_LEN];
    ba_engine e = BA_ENGINE_REFERENCE;
    assert_int_equal(ba_engine_max_spins(e), BA_REFERENCE_MAX_SPINS);

    err[0] = 0;
    assert_int_equal(ba_ising_marginals(e, 21, h, J, N, logw, err), BA_ERR_LIMIT);
    assert_non_null(strstr(err, "20"));
    err[0] = 0;
    assert_int_equal(ba_ising_backward(e, 21, h, J, N, g, dh, dJ, err), BA_ERR_LIMIT);
    assert_non_null(strstr(err, "20"));
    err[0] = 0;
    assert_int_equal(ba_engine_forward(e, 1, 21, NULL, J, N, logw, err), BA_ERR_LIMIT);
    assert_non_null(strstr(err, "20"));

    err[0] = 0;
    assert_int_equal(ba_ising_marginals(e, 0, h, J, N, logw, err), BA_ERR_ARG);
    assert_true(strlen(err) > 0);
    assert_int_equal(ba_ising_marginals(e, -3, h, J, N, logw, err), BA_ERR_ARG);
    assert_int_equal(ba_ising_backward(e, 0, h, J, N, g, dh, dJ, err), BA_ERR_ARG);

    h[2] = NAN;
    err[0] = 0;
    assert_int_equal(ba_ising_marginals(e, 4, h, J, N, logw, err), BA_ERR_NUMERIC);
    assert_true(strlen(err) > 0);
    assert_int_equal(ba_ising_backward(e, 4, h, J, N, g, dh, dJ, err), BA_ERR_NUMERIC);
    h[2] = INFINITY;
    assert_int_equal(ba_ising_marginals(e, 4, h, J, N, logw, err), BA_ERR_NUMERIC);
    h[2] = 0.0;
    g[1] = NAN;
    assert_int_equal(ba_ising_backward(e, 4, h, J, N, g, dh, dJ, err), BA_ERR_NUMERIC);
    g[1] = 0.0;

    err[0] = 0;
    assert_int_equal(ba_ising_marginals(e, 5, h, J, 4, logw, err), BA_ERR_ARG);
    assert_true(strlen(err) > 0);
    assert_int_equal(ba_ising_backward(e, 5, h, J, 4, g, dh, dJ, err), BA_ERR_ARG);

    /* err may be NULL; valid calls at the limit's edges still work. */
    assert_int_equal(ba_ising_marginals(e, 21, h, J, N, logw, NULL), BA_ERR_LIMIT);
    assert_int_equal(ba_ising_marginals(e, 1, h, J, 1, logw, NULL), BA_OK);
    assert_true(fabs(logw[0] + log(2.0)) < 1e-15);
    assert_int_equal(ba_ising_marginals(e, 1, h, NULL, 1, logw, NULL), BA_OK);
    assert_true(fabs(logw[0] + log(2.0)) < 1e-15);
}

/* ----------------------------------------------------------------- batched */

static void test_batched_matches_per_query(void **state)
{
    (void)state;
    enum { B = 3, T = 6, LD = 8 };
    ba_rng r;
    ba_rng_seed(&r, 51);
    double h[B * T * T], g[B * T * T], J[T * LD];
    fill_normal(&r, h, B * T * T, 2.0);
    fill_normal(&r, g, B * T * T, 1.0);
    for (int j = 0; j < T; j++)
        for (int k = 0; k < LD; k++)
            J[j * LD + k] = (j < k && k < T) ? ba_rng_normal(&r) : NAN;
    /* Entries above the diagonal are not part of any query: NaN there. */
    for (int q = 0; q < B * T; q++)
        for (int j = q % T + 1; j < T; j++)
            h[q * T + j] = g[q * T + j] = NAN;

    double logw[B * T * T], dh[B * T * T], dJ[T * LD];
    for (int i = 0; i < B * T * T; i++)
        logw[i] = 12345.0, dh[i] = 0.0;
    for (int i = 0; i < T * LD; i++)
        dJ[i] = 0.0;
    char err[BA_ERR_LEN];
    assert_int_equal(ba_engine_forward(BA_ENGINE_REFERENCE, B, T, h, J, LD, logw, err), BA_OK);
    assert_int_equal(ba_engine_backward(BA_ENGINE_REFERENCE, B, T, h, J, LD, g, dh, dJ, err),
                     BA_OK);

    double sum_dJ[T * LD] = {0};
    for (int q = 0; q < B * T; q++) {
        int i = q % T, n = i + 1;
        double lw1[T], dh1[T] = {0}, dJ1[T * LD] = {0};
        assert_int_equal(ba_ising_marginals(BA_ENGINE_REFERENCE, n, h + q * T, J, LD, lw1, err),
                         BA_OK);
        assert_int_equal(
            ba_ising_backward(BA_ENGINE_REFERENCE, n, h + q * T, J, LD, g + q * T, dh1, dJ1, err),
            BA_OK);
        for (int j = 0; j < T; j++) {
            if (j <= i) {
                if (!(fabs(logw[q * T + j] - lw1[j]) <= 1e-14 * (1 + fabs(lw1[j]))))
                    fail_msg("query %d key %d: batched logw %.17g, single %.17g", q, j,
                             logw[q * T + j], lw1[j]);
                if (!(fabs(dh[q * T + j] - dh1[j]) <= 1e-14 * (1 + fabs(dh1[j]))))
                    fail_msg("query %d key %d: batched dh %.17g, single %.17g", q, j,
                             dh[q * T + j], dh1[j]);
            } else {
                if (!(isinf(logw[q * T + j]) && logw[q * T + j] < 0))
                    fail_msg("query %d key %d above the diagonal: logw %g, expected -inf", q, j,
                             logw[q * T + j]);
                assert_true(dh[q * T + j] == 0.0); /* not written */
            }
        }
        for (int j = 0; j < T; j++)
            for (int k = j + 1; k < T; k++)
                sum_dJ[j * LD + k] += dJ1[j * LD + k];
    }
    for (int j = 0; j < T; j++)
        for (int k = 0; k < LD; k++) {
            if (j < k && k < T) {
                double a = dJ[j * LD + k], b = sum_dJ[j * LD + k];
                if (!(fabs(a - b) <= 1e-12 * (1 + fabs(b))))
                    fail_msg("dJ[%d][%d]: batched %.17g, sum of queries %.17g", j, k, a, b);
            } else {
                assert_true(dJ[j * LD + k] == 0.0); /* unused entries untouched */
            }
        }

    /* Determinism: the same call again gives the same bits. */
    double logw2[B * T * T], dh2[B * T * T] = {0}, dJ2[T * LD] = {0};
    assert_int_equal(ba_engine_forward(BA_ENGINE_REFERENCE, B, T, h, J, LD, logw2, err), BA_OK);
    assert_int_equal(ba_engine_backward(BA_ENGINE_REFERENCE, B, T, h, J, LD, g, dh2, dJ2, err),
                     BA_OK);
    assert_memory_equal(logw, logw2, sizeof logw);
    assert_memory_equal(dh, dh2, sizeof dh);
    assert_memory_equal(dJ, dJ2, sizeof dJ);

    /* Accumulation: a second backward into the same buffers doubles them. */
    assert_int_equal(ba_engine_backward(BA_ENGINE_REFERENCE, B, T, h, J, LD, g, dh2, dJ2, err),
                     BA_OK);
    for (int i = 0; i < B * T * T; i++)
        assert_true(fabs(dh2[i] - 2 * dh[i]) <= 1e-14 * (1 + fabs(dh[i])));
    for (int i = 0; i < T * LD; i++)
        assert_true(fabs(dJ2[i] - 2 * dJ[i]) <= 1e-13 * (1 + fabs(dJ[i])));

    /* h = NULL (coupling variant) equals an explicit all-zero h. */
    double hz[B * T * T] = {0}, lwa[B * T * T], lwb[B * T * T];
    assert_int_equal(ba_engine_forward(BA_ENGINE_REFERENCE, B, T, NULL, J, LD, lwa, err), BA_OK);
    assert_int_equal(ba_engine_forward(BA_ENGINE_REFERENCE, B, T, hz, J, LD, lwb, err), BA_OK);
    assert_memory_equal(lwa, lwb, sizeof lwa);
}

/* --------------------------------------------------------- coupling only */

/* h = 0: P(s) = P(-s), so every marginal is exactly 1/2 whatever J is. The
 * J-only variant's weights are therefore uniform before normalisation;
 * only the backward (dh through G) carries information. */
static void test_coupling_only_half(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 61);
    enum { LD = 12 };
    double J[LD * LD], logw[LD];
    for (int n = 1; n <= 12; n++)
        for (int rep = 0; rep < 3; rep++) {
            fill_couplings(&r, J, n, LD, rep == 2 ? 10.0 : 1.0);
            assert_int_equal(ba_ising_marginals(BA_ENGINE_REFERENCE, n, NULL, J, LD, logw, NULL),
                             BA_OK);
            for (int j = 0; j < n; j++)
                if (!(fabs(logw[j] + log(2.0)) < 1e-14))
                    fail_msg("n=%d j=%d: h = NULL gives logw %.17g, expected -log 2", n, j,
                             logw[j]);
        }
    /* Batched as well. */
    enum { B = 2, T = 7 };
    double lwb[B * T * T];
    fill_couplings(&r, J, T, LD, 2.0);
    assert_int_equal(ba_engine_forward(BA_ENGINE_REFERENCE, B, T, NULL, J, LD, lwb, NULL), BA_OK);
    for (int q = 0; q < B * T; q++)
        for (int j = 0; j <= q % T; j++)
            assert_true(fabs(lwb[q * T + j] + log(2.0)) < 1e-14);
}

/* max |y_i - f(x_i)| / |f(x_i)| over i >= from. */
static double worst_rel(int n, int from, const double *x, const double *y, double (*f)(double))
{
    double worst = 0.0;
    for (int i = from; i < n; i++) {
        double e = f(x[i]), rel = fabs(y[i] - e) / fabs(e);
        worst = rel > worst ? rel : worst;
    }
    return worst;
}

/* The fast engine's vectorised exponential against libm's exp, its slow
 * twin: within 4 ulp (relative 1e-15) on [-708, 0], exactly 0 below the
 * smallest normal double, and exact at 0. */
static void test_exp_nonpos_matches_libm(void **state)
{
    (void)state;
    enum { N = 20011 };
    static double x[N], y[N];
    ba_rng r;
    ba_rng_seed(&r, 99);
    for (int i = 0; i < N; i++) /* an even grid plus random points */
        x[i] = (i % 2) ? -708.0 * i / N : -708.0 * ba_rng_uniform(&r);
    x[0] = 0.0;
    x[2] = -1e-300;
    x[4] = -708.3;
    memcpy(y, x, sizeof x);
    ba_exp_nonpos(y, N);
    assert_true(worst_rel(N, 0, x, y, exp) < 1e-15);
    assert_true(y[0] == 1.0);
    double low[] = {-708.5, -750.0, -1e6, -INFINITY};
    ba_exp_nonpos(low, 4);
    for (int i = 0; i < 4; i++)
        assert_true(low[i] == 0.0);
}

/* bp's vectorised log1p against libm's, its slow twin: within 4 ulp
 * (relative 1e-15) on [0, 1], the tiny arguments included (log1p(y) = y
 * to the last bit below 1e-17), and exact at 0. */
static void test_log1p_unit_matches_libm(void **state)
{
    (void)state;
    enum { N = 20011 };
    static double x[N], y[N];
    ba_rng r;
    ba_rng_seed(&r, 98);
    for (int i = 0; i < N; i++) /* an even grid, random points, and tiny ones */
        x[i] = (i % 3 == 0) ? (double)i / (N - 1) : (i % 3 == 1) ? ba_rng_uniform(&r)
                                                                 : pow(10.0, -20.0 * ba_rng_uniform(&r));
    x[0] = 0.0;
    x[3] = 1.0;
    x[6] = 1e-300;
    memcpy(y, x, sizeof x);
    ba_log1p_unit(y, N);
    double worst = worst_rel(N, 1, x, y, log1p);
    printf("log1p_unit: worst relative error %.2e\n", worst);
    assert_true(worst < 1e-15);
    assert_true(y[0] == 0.0 && y[6] == 1e-300);
}

/* ba_ising_solve: every engine on one system. The exact ones and the
 * band engine (full band; and a band of 2 against the reference on the
 * couplings cut to it) equal the reference to 1e-12; at J = 0 every
 * approximate engine gives log sigmoid(2h); with weak couplings they are
 * near exact; bad arguments are refused by name. */
static void test_solve_any_engine(void **state)
{
    (void)state;
    enum { N = 9 };
    double h[N], J[N * N] = {0}, Jc[N * N] = {0}, ref[N], got[N], zero[N * N] = {0};
    ba_rng r;
    ba_rng_seed(&r, 41);
    for (int j = 0; j < N; j++) {
        h[j] = ba_rng_normal(&r);
        for (int k = j + 1; k < N; k++) {
            J[j * N + k] = 0.4 * ba_rng_normal(&r);
            Jc[j * N + k] = k - j <= 2 ? J[j * N + k] : 0.0;
        }
    }
    char err[BA_ERR_LEN];
    ba_approx_stats st;
    assert_int_equal(ba_ising_marginals(BA_ENGINE_REFERENCE, N, h, J, N, ref, err), BA_OK);
    const struct {
        ba_engine e;
        int W;
    } exact[] = {{BA_ENGINE_FAST, 0}, {BA_ENGINE_AUTO, 0}, {BA_ENGINE_BAND, N - 1}};
    for (int c = 0; c < 3; c++) {
        assert_int_equal(ba_ising_solve(exact[c].e, exact[c].W, NULL, N, h, J, N, got, &st, err),
                         BA_OK);
        for (int j = 0; j < N; j++)
            assert_true(fabs(got[j] - ref[j]) <= 1e-12 * fabs(ref[j]) + 1e-15);
    }
    double refc[N];
    assert_int_equal(ba_ising_marginals(BA_ENGINE_REFERENCE, N, h, Jc, N, refc, err), BA_OK);
    assert_int_equal(ba_ising_solve(BA_ENGINE_AUTO, 2, NULL, N, h, J, N, got, NULL, err), BA_OK);
    for (int j = 0; j < N; j++)
        assert_true(fabs(got[j] - refc[j]) <= 1e-12 * fabs(refc[j]) + 1e-15);
    const ba_engine approx[] = {BA_ENGINE_MF, BA_ENGINE_TAP, BA_ENGINE_BP, BA_ENGINE_HYBRID};
    double Jw[N * N];
    for (int i = 0; i < N * N; i++)
        Jw[i] = 0.05 * J[i];
    double refw[N];
    assert_int_equal(ba_ising_marginals(BA_ENGINE_REFERENCE, N, h, Jw, N, refw, err), BA_OK);
    for (int c = 0; c < 4; c++) {
        int W = approx[c] == BA_ENGINE_HYBRID ? 2 : 0;
        assert_int_equal(ba_ising_solve(approx[c], W, NULL, N, h, zero, N, got, &st, err), BA_OK);
        for (int j = 0; j < N; j++)
            assert_true(fabs(got[j] - (-log1p(exp(-2.0 * h[j])))) < 1e-9);
        assert_int_equal(st.queries, N); /* the causal block's N rows */
        assert_int_equal(st.unconverged, 0);
        assert_int_equal(ba_ising_solve(approx[c], W, NULL, N, h, Jw, N, got, &st, err), BA_OK);
        for (int j = 0; j < N; j++)
            assert_true(fabs(exp(got[j]) - exp(refw[j])) < 2e-3);
    }
    /* refusals */
    assert_int_equal(ba_ising_solve(BA_ENGINE_FAST, 2, NULL, N, h, J, N, got, NULL, err),
                     BA_ERR_ARG);
    assert_non_null(strstr(err, "W = 2"));
    assert_int_equal(ba_ising_solve(BA_ENGINE_BAND, 0, NULL, N, h, J, N, got, NULL, err),
                     BA_ERR_ARG);
    assert_int_equal(ba_ising_solve(BA_ENGINE_MF, 0, NULL, N, h, J, N - 1, got, NULL, err),
                     BA_ERR_ARG);
    assert_non_null(strstr(err, "ldj"));
    assert_int_equal(ba_ising_solve((ba_engine)42, 0, NULL, N, h, J, N, got, NULL, err),
                     BA_ERR_ARG);
    assert_int_equal(ba_ising_solve(BA_ENGINE_TAP, 0, NULL, 0, h, J, N, got, NULL, err),
                     BA_ERR_ARG);
    ba_approx bad = ba_approx_default();
    bad.damping = 0.0;
    assert_int_equal(ba_ising_solve(BA_ENGINE_MF, 0, &bad, N, h, J, N, got, NULL, err),
                     BA_ERR_ARG);
    assert_non_null(strstr(err, "damping"));
    double hn[N];
    memcpy(hn, h, sizeof hn);
    hn[3] = NAN;
    assert_int_equal(ba_ising_solve(BA_ENGINE_BP, 0, NULL, N, hn, J, N, got, NULL, err),
                     BA_ERR_NUMERIC);
    assert_non_null(strstr(err, "h[3]"));
    assert_int_equal(ba_ising_solve(BA_ENGINE_FAST, 0, NULL, 30, NULL, J, 30, got, NULL, err),
                     BA_ERR_LIMIT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_coupling_is_sigmoid),
        cmocka_unit_test(test_two_spins_closed_form),
        cmocka_unit_test(test_random_forward_brute_force),
        cmocka_unit_test(test_random_backward),
        cmocka_unit_test(test_extreme_fields),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_batched_matches_per_query),
        cmocka_unit_test(test_coupling_only_half),
        cmocka_unit_test(test_exp_nonpos_matches_libm),
        cmocka_unit_test(test_log1p_unit_matches_libm),
        cmocka_unit_test(test_solve_any_engine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
