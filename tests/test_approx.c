/* Tests of the approximate engines' batched entry points (src/ising/approx.c):
 * ba_approx_forward / ba_approx_backward for mf, tap and bp over a
 * (B,T,T) block of attention rows, and their argument checks (hybrid's
 * kernels have tests/test_hybrid.c; the per-row fixed points
 * tests/test_mf.c).
 *
 * Expected values:
 *   rows      every row equals ba_mf_forward on its own n = i + 1 keys, bit
 *             for bit (the same settings, the same sweeps);
 *   gradients dh rows equal ba_mf_backward's per row, bit for bit; dJ the
 *             sum of the rows' dJ within 1e-12 (1 + max |dJ|) (the batch
 *             sums in fixed chunks, the reference in row order);
 *   threads   1 and 2 OpenMP threads bit-identical, stats equal;
 *   policy    max_iter 1 with an unreachable tolerance: every row with a
 *             coupling is retried and unconverged, finite, and adds no
 *             gradient (dh and dJ stay exactly 0); rows of one key
 *             converge in one sweep;
 *   warm      ba_approx_backward_from with the forward's logw: the re-solve
 *             starts at the forward's point, so two sweeps suffice where
 *             the cold re-solve leaves rows unconverged (and no gradient);
 *             the gradients equal the cold ones of converged settings
 *             within 1e-7 (1 + max |g|) (both fixed points to 1e-10); a
 *             row whose start is NaN, and bp (which ignores it), are the
 *             cold backward's bit for bit;
 *   errors    each bad argument BA_ERR_ARG or BA_ERR_NUMERIC with a message
 *             naming it, and the outputs untouched. */
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

#include "model/model.h"

#define TT 12
#define BB 3

static const ba_engine ENGINES[3] = {BA_ENGINE_MF, BA_ENGINE_TAP, BA_ENGINE_BP};
static const ba_mf_method METHODS[3] = {BA_MF_NAIVE, BA_MF_TAP, BA_MF_BP};

/* h (BB,TT,TT) normal, g likewise, J (TT,TT) paper-like couplings of
 * strength a by distance (spec section 8's probe): a/2, a (d = 2..4), 0,
 * -a/2, each plus uniform noise of a/4. */
static void fill(ba_rng *r, double a, double *h, double *g, double *J)
{
    for (int e = 0; e < BB * TT * TT; e++)
        h[e] = ba_rng_normal(r), g[e] = ba_rng_normal(r);
    for (int j = 0; j < TT; j++)
        for (int k = 0; k < TT; k++) {
            int d = k - j;
            double base = d == 1 ? a / 2 : d <= 4 ? a : d == 5 ? 0.0 : -a / 2;
            J[j * TT + k] = d > 0 ? base + a / 4 * (2 * ba_rng_uniform(r) - 1) : NAN;
        }
}

static void test_rows_match_per_query(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 5);
    static double h[BB * TT * TT], g[BB * TT * TT], J[TT * TT];
    static double lw[BB * TT * TT], dh[BB * TT * TT], dJ[TT * TT];
    fill(&r, 0.25, h, g, J);
    ba_approx a = ba_approx_default();
    ba_mf_settings s = ba_approx_mf_settings(&a);
    char err[BA_ERR_LEN];
    size_t nws = ba_mf_ws_doubles(TT), nst = ba_mf_state_doubles(BA_MF_BP, TT);
    double *ws = malloc(sizeof(double) * nws), *st = malloc(sizeof(double) * nst);
    double row[TT], rdh[TT], *rdJ = calloc(TT * TT, sizeof(double));
    int ipiv[TT];
    double worst = 0.0;
    for (int m = 0; m < 3; m++) {
        ba_approx_stats cnt = {0, 0, 0, 0, 0};
        memset(dh, 0, sizeof dh), memset(dJ, 0, sizeof dJ), memset(rdJ, 0, sizeof(double) * TT * TT);
        assert_int_equal(ba_approx_forward(ENGINES[m], &a, 0, BB, TT, h, J, TT, lw, &cnt, err),
                         BA_OK);
        assert_int_equal(cnt.queries, BB * TT);
        assert_int_equal(cnt.unconverged, 0);
        assert_int_equal(ba_approx_backward(ENGINES[m], &a, 0, BB, TT, h, J, TT, g, dh, dJ, NULL,
                                            err), BA_OK);
        for (int q = 0; q < BB * TT; q++) {
            int n = q % TT + 1;
            ba_mf_info inf;
            s.adjoint = n <= BA_APPROX_LU_MAX_N ? BA_MF_ADJ_LU : BA_MF_ADJ_ITER;
            assert_int_equal(ba_mf_forward(METHODS[m], &s, n, h + q * TT, J, TT, row, st, ws,
                                           &inf, err), BA_OK);
            assert_true(inf.converged);
            assert_memory_equal(row, lw + q * TT, sizeof(double) * n);
            memset(rdh, 0, sizeof rdh);
            assert_int_equal(ba_mf_backward(METHODS[m], &s, n, J, TT, st, g + q * TT, rdh, rdJ,
                                            TT, ws, ipiv, &inf, err), BA_OK);
            assert_memory_equal(rdh, dh + q * TT, sizeof(double) * n);
        }
        double mx = 0.0;
        for (int e = 0; e < TT * TT; e++)
            if (e % TT > e / TT) {
                mx = fmax(mx, fabs(rdJ[e]));
                worst = fmax(worst, fabs(rdJ[e] - dJ[e]));
            }
        assert_true(mx > 1e-3); /* not vacuous */
        assert_true(worst <= 1e-12 * (1 + mx));
    }
    printf("batched vs per row: worst |dJ - sum of rows| = %.2e\n", worst);
    free(ws), free(st), free(rdJ);
}

static void test_threads(void **state)
{
    (void)state;
#ifdef _OPENMP
    ba_rng r;
    ba_rng_seed(&r, 9);
    static double h[BB * TT * TT], g[BB * TT * TT], J[TT * TT];
    static double lw[2][BB * TT * TT], dh[2][BB * TT * TT], dJ[2][TT * TT];
    fill(&r, 0.5, h, g, J);
    ba_approx a = ba_approx_default();
    char err[BA_ERR_LEN];
    int saved = omp_get_max_threads();
    for (int m = 0; m < 3; m++) {
        ba_approx_stats st[2];
        for (int t = 0; t < 2; t++) {
            omp_set_num_threads(t + 1);
            memset(&st[t], 0, sizeof st[t]);
            memset(dh[t], 0, sizeof dh[t]), memset(dJ[t], 0, sizeof dJ[t]);
            assert_int_equal(ba_approx_forward(ENGINES[m], &a, 0, BB, TT, h, J, TT, lw[t],
                                               &st[t], err), BA_OK);
            assert_int_equal(ba_approx_backward(ENGINES[m], &a, 0, BB, TT, h, J, TT, g, dh[t],
                                                dJ[t], &st[t], err), BA_OK);
        }
        for (int e = 0; e < BB * TT * TT; e++)
            if (e % TT <= (e / TT) % TT)
                assert_true(lw[0][e] == lw[1][e] && dh[0][e] == dh[1][e]);
        assert_memory_equal(dJ[0], dJ[1], sizeof dJ[0]);
        assert_memory_equal(&st[0], &st[1], sizeof st[0]);
    }
    omp_set_num_threads(saved);
#else
    skip();
#endif
}

/* The backward's re-solve started at the forward's answer. */
static void test_warm_start(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 29);
    static double h[BB * TT * TT], g[BB * TT * TT], J[TT * TT], lw[BB * TT * TT];
    static double dh[2][BB * TT * TT], dJ[2][TT * TT];
    fill(&r, 0.5, h, g, J);
    ba_approx conv = {0.5, 1e-10, 1000}, few = {0.5, 1e-10, 2};
    char err[BA_ERR_LEN];
    for (int m = 0; m < 3; m++) {
        assert_int_equal(ba_approx_forward(ENGINES[m], &conv, 0, BB, TT, h, J, TT, lw, NULL, err),
                         BA_OK);
        ba_approx_stats cold = {0, 0, 0, 0, 0}, warm = {0, 0, 0, 0, 0};
        memset(dh, 0, sizeof dh), memset(dJ, 0, sizeof dJ);
        /* the reference: cold, converged settings */
        assert_int_equal(ba_approx_backward(ENGINES[m], &conv, 0, BB, TT, h, J, TT, g, dh[0],
                                            dJ[0], NULL, err), BA_OK);
        if (m == 2) { /* bp: the start is ignored */
            assert_int_equal(ba_approx_backward_from(ENGINES[m], &conv, 0, BB, TT, h, J, TT, lw,
                                                     g, dh[1], dJ[1], TT - 1, NULL, err), BA_OK);
            assert_memory_equal(dh[0], dh[1], sizeof dh[0]);
            assert_memory_equal(dJ[0], dJ[1], sizeof dJ[0]);
            continue;
        }
        /* two sweeps: cold leaves rows unconverged, warm none */
        static double dhc[BB * TT * TT], dJc[TT * TT];
        memset(dhc, 0, sizeof dhc), memset(dJc, 0, sizeof dJc);
        assert_int_equal(ba_approx_backward(ENGINES[m], &few, 0, BB, TT, h, J, TT, g, dhc, dJc,
                                            &cold, err), BA_OK);
        assert_true(cold.unconverged > BB);
        assert_int_equal(ba_approx_backward_from(ENGINES[m], &few, 0, BB, TT, h, J, TT, lw, g,
                                                 dh[1], dJ[1], TT - 1, &warm, err), BA_OK);
        assert_int_equal(warm.unconverged, 0);
        double gmax = 0.0, worst = 0.0;
        for (int e = 0; e < BB * TT * TT; e++)
            if (e % TT <= (e / TT) % TT) {
                gmax = fmax(gmax, fabs(dh[0][e]));
                worst = fmax(worst, fabs(dh[1][e] - dh[0][e]));
            }
        for (int e = 0; e < TT * TT; e++)
            if (e % TT > e / TT) {
                gmax = fmax(gmax, fabs(dJ[0][e]));
                worst = fmax(worst, fabs(dJ[1][e] - dJ[0][e]));
            }
        printf("%s warm start: worst |gradient - cold| = %.2e (max %.2e)\n",
               ba_engine_name(ENGINES[m]), worst, gmax);
        assert_true(worst <= 1e-7 * (1.0 + gmax));
        /* a NaN start: that row re-solves cold (converged settings: the
         * same dh row bit for bit) */
        long row = BB * TT - 2;
        lw[row * TT + 3] = NAN;
        memset(dh[1], 0, sizeof dh[1]);
        assert_int_equal(ba_approx_backward_from(ENGINES[m], &conv, 0, BB, TT, h, J, TT, lw, g,
                                                 dh[1], NULL, TT - 1, NULL, err), BA_OK);
        assert_memory_equal(dh[0] + row * TT, dh[1] + row * TT, sizeof(double) * TT);
    }
}

/* The policy on non-convergence (src/ising/ising.h). */
static void test_unconverged_rows(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 13);
    static double h[BB * TT * TT], g[BB * TT * TT], J[TT * TT];
    static double lw[BB * TT * TT], dh[BB * TT * TT], dJ[TT * TT];
    fill(&r, 0.5, h, g, J);
    ba_approx a = {0.5, 1e-300, 1};
    char err[BA_ERR_LEN];
    for (int m = 0; m < 3; m++) {
        ba_approx_stats f = {0, 0, 0, 0, 0}, b = {0, 0, 0, 0, 0};
        memset(dh, 0, sizeof dh), memset(dJ, 0, sizeof dJ);
        assert_int_equal(ba_approx_forward(ENGINES[m], &a, 0, BB, TT, h, J, TT, lw, &f, err),
                         BA_OK);
        assert_int_equal(ba_approx_backward(ENGINES[m], &a, 0, BB, TT, h, J, TT, g, dh, dJ, &b,
                                            err), BA_OK);
        /* rows of one key are exact at once (no coupling): B of them */
        assert_int_equal(f.queries, BB * TT);
        assert_int_equal(f.retried, BB * (TT - 1));
        assert_int_equal(f.unconverged, BB * (TT - 1));
        assert_int_equal(f.max_sweeps, 5); /* 1, then 4 at a quarter of the damping */
        assert_int_equal(b.unconverged, BB * (TT - 1));
        for (int q = 0; q < BB * TT; q++)
            for (int j = 0; j <= q % TT; j++) {
                assert_true(isfinite(lw[q * TT + j]) && lw[q * TT + j] <= 0.0);
                if (q % TT > 0)
                    assert_true(dh[q * TT + j] == 0.0);
            }
        for (int e = 0; e < TT * TT; e++)
            assert_true(dJ[e] == 0.0);
    }
}

/* One bad call: the status, a phrase of its message, logw and dh untouched. */
static void expect_bad(ba_engine e, const ba_approx *a, int W, int B, int T, const double *h,
                       const double *J, int ldj, const double *g, int want, const char *phrase)
{
    static double lw[BB * TT * TT], dh[BB * TT * TT];
    char err[BA_ERR_LEN] = "";
    for (int k = 0; k < BB * TT * TT; k++)
        lw[k] = dh[k] = 42.0;
    int rc = g ? ba_approx_backward(e, a, W, B, T, h, J, ldj, g, dh, NULL, NULL, err)
               : ba_approx_forward(e, a, W, B, T, h, J, ldj, lw, NULL, err);
    if (rc != want || !strstr(err, phrase))
        fail_msg("expected status %d and '%s', got %d: '%s'", want, phrase, rc, err);
    for (int k = 0; k < BB * TT * TT; k++)
        assert_true(lw[k] == 42.0 && dh[k] == 42.0);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 17);
    static double h[BB * TT * TT], g[BB * TT * TT], J[TT * TT];
    fill(&r, 0.25, h, g, J);
    ba_approx ok = ba_approx_default(), x = ok;
    const ba_engine MF = BA_ENGINE_MF;
    x.damping = 0;
    expect_bad(MF, &x, 0, BB, TT, h, J, TT, NULL, BA_ERR_ARG, "damping 0 is outside (0, 1]");
    x.damping = 1.5;
    expect_bad(MF, &x, 0, BB, TT, h, J, TT, NULL, BA_ERR_ARG, "damping 1.5 is outside");
    x.damping = NAN;
    expect_bad(MF, &x, 0, BB, TT, h, J, TT, g, BA_ERR_ARG, "damping nan is outside");
    x = ok, x.tol = 0;
    expect_bad(MF, &x, 0, BB, TT, h, J, TT, NULL, BA_ERR_ARG, "tolerance 0 is not a positive");
    x.tol = -1;
    expect_bad(MF, &x, 0, BB, TT, h, J, TT, NULL, BA_ERR_ARG, "tolerance -1");
    x.tol = INFINITY;
    expect_bad(MF, &x, 0, BB, TT, h, J, TT, NULL, BA_ERR_ARG, "tolerance inf");
    x = ok, x.max_iter = 0;
    expect_bad(MF, &x, 0, BB, TT, h, J, TT, NULL, BA_ERR_ARG, "max_iter 0 is outside");
    expect_bad(BA_ENGINE_FAST, &ok, 0, BB, TT, h, J, TT, NULL, BA_ERR_ARG,
               "engine 'fast' is not an approximate engine");
    expect_bad(BA_ENGINE_HYBRID, &ok, 0, BB, TT, h, J, TT, NULL, BA_ERR_ARG,
               "hybrid window W = 0 is outside [1, 16]");
    expect_bad(BA_ENGINE_HYBRID, &ok, 17, BB, TT, h, J, TT, NULL, BA_ERR_ARG,
               "hybrid window W = 17");
    expect_bad(MF, &ok, 0, 0, TT, h, J, TT, NULL, BA_ERR_ARG, "batch B = 0");
    expect_bad(MF, &ok, 0, BB, 0, h, J, TT, NULL, BA_ERR_ARG, "T = 0 is outside");
    expect_bad(MF, &ok, 0, BB, TT, h, J, TT - 1, NULL, BA_ERR_ARG, "leading dimension 11");
    expect_bad(MF, &ok, 0, BB, TT, h, NULL, TT, NULL, BA_ERR_ARG, "couplings J are NULL");
    double saved = J[2 * TT + 7];
    J[2 * TT + 7] = NAN;
    expect_bad(BA_ENGINE_BP, &ok, 0, BB, TT, h, J, TT, NULL, BA_ERR_NUMERIC,
               "coupling J[2][7] = nan is not finite");
    expect_bad(BA_ENGINE_HYBRID, &ok, 2, BB, TT, h, J, TT, g, BA_ERR_NUMERIC,
               "coupling J[2][7] = nan");
    J[2 * TT + 7] = saved;
    h[(1 * TT + 5) * TT + 3] = INFINITY;
    expect_bad(BA_ENGINE_TAP, &ok, 0, BB, TT, h, J, TT, NULL, BA_ERR_NUMERIC,
               "field h[1][5][3] = inf is not finite");
    h[(1 * TT + 5) * TT + 3] = 0.0;
    h[(1 * TT + 5) * TT + 8] = NAN; /* beyond the row's keys: never read */
    static double lw[BB * TT * TT];
    char err[BA_ERR_LEN];
    assert_int_equal(ba_approx_forward(MF, &ok, 0, BB, TT, h, J, TT, lw, NULL, err), BA_OK);
    g[(2 * TT + 4) * TT + 1] = NAN;
    expect_bad(MF, &ok, 0, BB, TT, h, J, TT, g, BA_ERR_NUMERIC,
               "upstream gradient g[2][4][1] = nan is not finite");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_match_per_query),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_unconverged_rows),
        cmocka_unit_test(test_warm_start),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
