/* Tests of the band engine (src/ising/band.c, src/ising/band_lin.c; spec
 * section 8, "Exact chain inference for range W"): ba_band_forward and
 * ba_band_backward (dense couplings) against the reference engine, central
 * finite differences, a long chain and independent spins, and on 1 and 2
 * threads. The paths behind them, the band layout, non-finite inputs and
 * bad arguments are tested in test_band.c.
 *
 * Expected values come from the reference engine (full enumeration, the
 * oracle) run on the same couplings with every entry beyond the band set to
 * zero, from central finite differences of the band forward, from a W = 1
 * transfer-matrix chain written here in long double, and from the J = 0
 * closed form log sigmoid(2h).
 *
 * Tolerances (stated next to each check):
 *   twins      logw: |expm1(logw_band - logw_ref)| < 1e-12 per entry;
 *              dh, dJ: |band - ref| < 1e-12 * (1 + max |ref|) per array
 *              (the reference's centred sums carry an absolute rounding of
 *              about 1e-16 times the spread of G, so a purely elementwise
 *              relative bound would measure the oracle, not the engine);
 *   finite differences  ||an - fd||_2 / ||fd||_2 < 1e-7 (eps 1e-5);
 *   long chain |expm1(logw - expected)| < 1e-10 (n = 4096);
 *   J = 0      |expm1(logw - log sigmoid(2h))| < 1e-12;
 *   threads    bit for bit.
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
#include "band_check.h"

#define FD_EPS 1e-5
#define FD_TOL 1e-7

/* One twin comparison: B queries blocks of T, band W (engine) against the
 * reference on the zeroed out-of-band couplings. hs: field size (0 means
 * h = NULL), normal or uniform; js: coupling size. */
static void twin_case(ba_rng *r, int B, int T, int W, double hs, double js, int normal,
                      twin_err *worst)
{
    size_t nh = (size_t)B * T * T, nj = (size_t)T * T;
    double *h = alloc_d(nh), *g = alloc_d(nh), *Jg = alloc_d(nj), *Jz = alloc_d(nj);
    double *lw = alloc_d(nh), *lr = alloc_d(nh), *dh = alloc_d(nh), *dhr = alloc_d(nh);
    double *dJ = alloc_d(nj), *dJr = alloc_d(nj), *dJ0 = alloc_d(nj);
    unsigned char *upper = malloc(nj);
    assert_non_null(upper);
    for (size_t i = 0; i < nh; i++) {
        h[i] = normal ? hs * ba_rng_normal(r) : uniform(r, hs);
        g[i] = ba_rng_normal(r);
        dh[i] = dhr[i] = ba_rng_normal(r); /* backward accumulates */
    }
    fill_band(r, T, W, js, normal, Jg, Jz);
    for (size_t i = 0; i < nj; i++) {
        dJ0[i] = dJ[i] = dJr[i] = ba_rng_normal(r);
        upper[i] = (unsigned char)(i / T < i % T);
    }
    const double *hp = hs > 0 ? h : NULL;
    char err[BA_ERR_LEN];
    assert_int_equal(ba_band_forward(W, B, T, hp, Jg, T, lw, err), BA_OK);
    assert_int_equal(ba_ref_forward(B, T, hp, Jz, T, lr, err), BA_OK);
    for (size_t q = 0; q < (size_t)B * T; q++)
        for (int j = 0; j < T; j++) {
            size_t e = q * T + j;
            if (j > (int)(q % T)) {
                assert_true(isinf(lw[e]) && lw[e] < 0);
                continue;
            }
            double d = fabs(expm1(lw[e] - lr[e]));
            worst->logw = fmax(worst->logw, d);
            if (!(d < TWIN_TOL && lw[e] <= 0.0))
                fail_msg("T=%d W=%d query %zu j=%d: logw %.17g, reference %.17g (rel %.3e)", T,
                         W, q, j, lw[e], lr[e], d);
        }
    assert_int_equal(ba_band_backward(W, B, T, hp, Jg, T, g, dh, dJ, err), BA_OK);
    assert_int_equal(ba_ref_backward(B, T, hp, Jz, T, g, dhr, dJr, err), BA_OK);
    for (size_t i = 0; i < nj; i++) {
        int j = (int)(i / T), k = (int)(i % T);
        if (j < k && k - j > W) {
            /* beyond the band: untouched, bit for bit */
            if (memcmp(&dJ[i], &dJ0[i], sizeof(double)))
                fail_msg("T=%d W=%d: dJ[%d][%d] beyond the band was written", T, W, j, k);
            dJr[i] = dJ[i]; /* the reference's value there is not the band's */
        }
    }
    double edh = scaled_err(dh, dhr, nh, NULL), edj = scaled_err(dJ, dJr, nj, upper);
    worst->dh = fmax(worst->dh, edh);
    worst->dJ = fmax(worst->dJ, edj);
    if (!(edh < TWIN_TOL && edj < TWIN_TOL))
        fail_msg("T=%d W=%d h %g J %g: dh err %.3e, dJ err %.3e", T, W, hs, js, edh, edj);
    free(h), free(g), free(Jg), free(Jz), free(lw), free(lr), free(dh), free(dhr);
    free(dJ), free(dJr), free(dJ0), free(upper);
}

/* ------------------------------------------------------------------ twins */

static void test_twins_reference(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 101);
    twin_err ord = {0, 0, 0}, adv = {0, 0, 0};
    const int Ws[] = {1, 2, 4, 8, 11, 15}; /* 11 = T-1 at T = 12: the full model */
    for (size_t w = 0; w < sizeof Ws / sizeof Ws[0]; w++)
        for (int rep = 0; rep < 2; rep++) {
            twin_case(&r, 2, 12, Ws[w], 1.0, 1.0, 1, &ord);   /* N(0,1) */
            twin_case(&r, 2, 12, Ws[w], 20.0, 5.0, 0, &adv);  /* |h| <= 20, |J| <= 5 */
        }
    twin_case(&r, 2, 12, 3, 0.0, 1.0, 1, &ord); /* h = NULL (coupling only) */
    twin_case(&r, 1, 16, 4, 1.0, 1.0, 1, &ord);
    twin_case(&r, 1, 16, 4, 20.0, 5.0, 0, &adv);
    twin_case(&r, 1, 16, 15, 20.0, 5.0, 0, &adv);
    twin_case(&r, 3, 1, 1, 2.0, 1.0, 1, &ord); /* T = 1 */
    print_message("twins, ordinary: logw rel %.2e, dh %.2e, dJ %.2e\n", ord.logw, ord.dh, ord.dJ);
    print_message("twins, adversarial: logw rel %.2e, dh %.2e, dJ %.2e\n", adv.logw, adv.dh,
                  adv.dJ);
}

/* ------------------------------------------------------ finite differences */

/* L = sum over all queries of g . m, m = 2 exp(logw) - 1, through the band
 * forward. */
static double loss_m(int W, int B, int T, const double *h, const double *J, const double *g,
                     double *lw)
{
    assert_int_equal(ba_band_forward(W, B, T, h, J, T, lw, NULL), BA_OK);
    double L = 0.0;
    for (int q = 0; q < B * T; q++)
        for (int j = 0; j <= q % T; j++)
            L += g[q * T + j] * (2.0 * exp(lw[q * T + j]) - 1.0);
    return L;
}

static void test_finite_differences(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 202);
    enum { B = 2, T = 9 };
    double worst = 0.0;
    const int Ws[] = {1, 3, 8};
    for (size_t w = 0; w < 3; w++) {
        int W = Ws[w];
        double h[B * T * T], g[B * T * T], J[T * T], Jz[T * T], lw[B * T * T];
        double dh[B * T * T] = {0}, dJ[T * T] = {0};
        for (int i = 0; i < B * T * T; i++) {
            h[i] = 1.5 * ba_rng_normal(&r);
            g[i] = ba_rng_normal(&r);
        }
        fill_band(&r, T, W, 1.0, 1, J, Jz);
        assert_int_equal(ba_band_backward(W, B, T, h, J, T, g, dh, dJ, NULL), BA_OK);
        double an[B * T * T + T * T], fd[B * T * T + T * T];
        int np = 0;
        for (int i = 0; i < B * T * T; i++) {
            if (i % T > (i / T) % T)
                continue; /* above the diagonal: not a field of any spin */
            double keep = h[i];
            h[i] = keep + FD_EPS;
            double lp = loss_m(W, B, T, h, J, g, lw);
            h[i] = keep - FD_EPS;
            double lm = loss_m(W, B, T, h, J, g, lw);
            h[i] = keep;
            an[np] = dh[i];
            fd[np++] = (lp - lm) / (2 * FD_EPS);
        }
        for (int j = 0; j < T; j++)
            for (int k = j + 1; k < T && k - j <= W; k++) {
                double keep = J[j * T + k];
                J[j * T + k] = keep + FD_EPS;
                double lp = loss_m(W, B, T, h, J, g, lw);
                J[j * T + k] = keep - FD_EPS;
                double lm = loss_m(W, B, T, h, J, g, lw);
                J[j * T + k] = keep;
                an[np] = dJ[j * T + k];
                fd[np++] = (lp - lm) / (2 * FD_EPS);
            }
        double d = 0.0, nf = 0.0;
        for (int i = 0; i < np; i++) {
            d += (an[i] - fd[i]) * (an[i] - fd[i]);
            nf += fd[i] * fd[i];
        }
        double e = sqrt(d / nf);
        worst = fmax(worst, e);
        if (!(e < FD_TOL))
            fail_msg("W=%d: backward vs finite differences rel %.3e", W, e);
    }
    print_message("finite differences: worst rel %.2e\n", worst);
}

/* ------------------------------------------------------------- long chain */

/* log P(s_j = +1) of an n-spin nearest-neighbour chain (fields h, couplings
 * c[j] = J_{j,j+1}) by 2x2 transfer matrices in long double, each message
 * normalised to sum 1: written here independently of the engine. */
static void chain_w1(int n, const double *h, const double *c, long double *lp)
{
    long double(*a)[2] = malloc(sizeof(long double[2]) * (size_t)n);
    long double(*b)[2] = malloc(sizeof(long double[2]) * (size_t)n);
    assert_non_null(a);
    assert_non_null(b);
    a[0][0] = expl(-(long double)h[0]), a[0][1] = expl((long double)h[0]);
    for (int t = 1; t < n; t++) {
        long double s = 0;
        for (int x = 0; x < 2; x++) {
            int sx = x ? 1 : -1;
            a[t][x] = 0;
            for (int y = 0; y < 2; y++)
                a[t][x] += a[t - 1][y] * expl((long double)c[t - 1] * (y ? 1 : -1) * sx);
            a[t][x] *= expl((long double)h[t] * sx);
            s += a[t][x];
        }
        a[t][0] /= s, a[t][1] /= s;
    }
    b[n - 1][0] = b[n - 1][1] = 1;
    for (int t = n - 2; t >= 0; t--) {
        long double s = 0;
        for (int y = 0; y < 2; y++) {
            b[t][y] = 0;
            for (int x = 0; x < 2; x++)
                b[t][y] += b[t + 1][x] * expl((long double)h[t + 1] * (x ? 1 : -1) +
                                              (long double)c[t] * (y ? 1 : -1) * (x ? 1 : -1));
            s += b[t][y];
        }
        b[t][0] /= s, b[t][1] /= s;
    }
    for (int t = 0; t < n; t++)
        lp[t] = logl(a[t][1] * b[t][1]) - logl(a[t][0] * b[t][0] + a[t][1] * b[t][1]);
    free(a);
    free(b);
}

/* n = 4096 (the last query of T = 4096), W = 4: finite logw everywhere on
 * and below the diagonal with |h|, |J| up to 5; with only the distance-1
 * couplings set, the W = 4 engine equals the W = 1 transfer-matrix chain.
 * (J = 0 is checked at T = 512 below: at this n it would cost 2 s more.) */
static void test_long_chain(void **state)
{
    (void)state;
    enum { T = 4096, W = 4 };
    ba_rng r;
    ba_rng_seed(&r, 303);
    size_t nj = (size_t)T * T;
    double *J = calloc(nj, sizeof(double)), *h = alloc_d(nj), *lw = alloc_d(nj);
    double *c = alloc_d(T);
    long double *lp = malloc(sizeof(long double) * T);
    assert_non_null(J);
    assert_non_null(lp);
    for (size_t i = 0; i < nj; i++)
        h[i] = uniform(&r, 5.0);
    /* (a) nearest-neighbour couplings only, as a W = 4 band */
    for (int t = 0; t + 1 < T; t++)
        c[t] = J[(size_t)t * T + t + 1] = uniform(&r, 5.0);
    char err[BA_ERR_LEN];
    assert_int_equal(ba_band_forward(W, 1, T, h, J, T, lw, err), BA_OK);
    double worst_w1 = 0.0;
    for (int q = 0; q < T; q += q < 8 ? 1 : 511) { /* some queries, and the last */
        int qq = q < T ? q : T - 1;
        chain_w1(qq + 1, h + (size_t)qq * T, c, lp);
        for (int j = 0; j <= qq; j++) {
            double e = fabs(expm1(lw[(size_t)qq * T + j] - (double)lp[j]));
            worst_w1 = fmax(worst_w1, e);
            if (!(e < LONG_TOL))
                fail_msg("W=1 chain n=%d j=%d: logw %.17g, transfer matrix %.17Lg", qq + 1, j,
                         lw[(size_t)qq * T + j], lp[j]);
        }
    }
    chain_w1(T, h + (size_t)(T - 1) * T, c, lp);
    for (int j = 0; j < T; j++)
        worst_w1 = fmax(worst_w1, fabs(expm1(lw[nj - T + j] - (double)lp[j])));
    assert_true(worst_w1 < LONG_TOL);
    /* (b) the whole band: finite, <= 0, -inf above the diagonal */
    for (int j = 0; j < T; j++)
        for (int d = 1; d <= W && j + d < T; d++)
            J[(size_t)j * T + j + d] = uniform(&r, 5.0);
    assert_int_equal(ba_band_forward(W, 1, T, h, J, T, lw, err), BA_OK);
    for (size_t e = 0; e < nj; e++) {
        int i = (int)(e / T), j = (int)(e % T);
        if (j > i ? !(isinf(lw[e]) && lw[e] < 0) : !(isfinite(lw[e]) && lw[e] <= 0.0))
            fail_msg("band W=4 query %d j=%d: logw %.17g", i, j, lw[e]);
    }
    print_message("long chain n=4096 W=4: rel vs W=1 chain %.2e\n", worst_w1);
    free(J), free(h), free(lw), free(c), free(lp);
}

/* J = 0 (every W): independent spins, logw = log sigmoid(2h) exactly, with
 * |h| up to 20 (P down to e^-80) over a T = 512 head. */
static void test_zero_coupling_sigmoid(void **state)
{
    (void)state;
    enum { T = 512 };
    ba_rng r;
    ba_rng_seed(&r, 505);
    size_t nh = (size_t)T * T;
    double *J = calloc(nh, sizeof(double)), *h = alloc_d(nh), *lw = alloc_d(nh), worst = 0.0;
    assert_non_null(J);
    for (size_t i = 0; i < nh; i++)
        h[i] = uniform(&r, 20.0);
    const int Ws[] = {1, 4, 8};
    for (int w = 0; w < 3; w++) {
        assert_int_equal(ba_band_forward(Ws[w], 1, T, h, J, T, lw, NULL), BA_OK);
        for (size_t e = 0; e < nh; e++) {
            if (e % T > e / T)
                continue;
            double x = 2.0 * h[e];
            double ls = x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x)); /* log sigmoid */
            double d = fabs(expm1(lw[e] - ls));
            worst = fmax(worst, d);
            if (!(d < TWIN_TOL))
                fail_msg("J=0 W=%d entry %zu: logw %.17g, log sigmoid(2h) %.17g", Ws[w], e,
                         lw[e], ls);
        }
    }
    print_message("J = 0: worst rel vs sigmoid(2h) %.2e\n", worst);
    free(J), free(h), free(lw);
}

/* ------------------------------------------------------- thread count */

static void run_engine(int nt, int W, int B, int T, const double *h, const double *J,
                       const double *g, double *lw, double *dh, double *dJ)
{
    omp_set_num_threads(nt);
    assert_int_equal(ba_band_forward(W, B, T, h, J, T, lw, NULL), BA_OK);
    assert_int_equal(ba_band_backward(W, B, T, h, J, T, g, dh, dJ, NULL), BA_OK);
}

static void test_thread_count(void **state)
{
    (void)state;
    enum { B = 3, T = 80, W = 6 };
    ba_rng r;
    ba_rng_seed(&r, 404);
    size_t nh = (size_t)B * T * T, nj = (size_t)T * T;
    double *h = alloc_d(nh), *g = alloc_d(nh), *J = alloc_d(nj), *Jz = alloc_d(nj);
    double *lw[2], *dh[2], *dJ[2];
    for (size_t i = 0; i < nh; i++) {
        h[i] = ba_rng_normal(&r);
        g[i] = ba_rng_normal(&r);
    }
    fill_band(&r, T, W, 1.0, 1, J, Jz);
    int saved = omp_get_max_threads();
    for (int k = 0; k < 2; k++) {
        lw[k] = alloc_d(nh), dh[k] = calloc(nh, sizeof(double)), dJ[k] = calloc(nj, 8);
        assert_non_null(dh[k]);
        assert_non_null(dJ[k]);
        run_engine(k + 1, W, B, T, h, J, g, lw[k], dh[k], dJ[k]);
    }
    omp_set_num_threads(saved);
    assert_memory_equal(lw[0], lw[1], sizeof(double) * nh);
    /* dh = NULL or dJ = NULL: the other part is the same, bit for bit */
    double *dh2 = calloc(nh, sizeof(double)), *dJ2 = calloc(nj, sizeof(double));
    assert_non_null(dh2);
    assert_non_null(dJ2);
    assert_int_equal(ba_band_backward(W, B, T, h, J, T, g, NULL, dJ2, NULL), BA_OK);
    assert_int_equal(ba_band_backward(W, B, T, h, J, T, g, dh2, NULL, NULL), BA_OK);
    assert_memory_equal(dh2, dh[0], sizeof(double) * nh);
    assert_memory_equal(dJ2, dJ[0], sizeof(double) * nj);
    free(dh2), free(dJ2);
    assert_memory_equal(dh[0], dh[1], sizeof(double) * nh);
    assert_memory_equal(dJ[0], dJ[1], sizeof(double) * nj);
    for (int k = 0; k < 2; k++)
        free(lw[k]), free(dh[k]), free(dJ[k]);
    free(h), free(g), free(J), free(Jz);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_twins_reference),  cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_long_chain),       cmocka_unit_test(test_zero_coupling_sigmoid),
        cmocka_unit_test(test_thread_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
