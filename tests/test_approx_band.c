/* Tests of the approximate engines' banded path (src/ising/mf_band.c, the
 * banded bp of src/ising/bp.c, and its use by src/ising/approx.c) against
 * the dense kernels, its reference twins.
 *
 * Instances: couplings of range W = 1, 2, 4, 8 (every entry within the
 * band non-zero, 0 beyond, NaN below the diagonal: never read) on
 * n = 9, 20, 40, 64 keys; ordinary (h ~ N(0,1), |J| <= 0.3) and
 * adversarial (|h| <= 20, |J| <= 5).
 *
 * Expected values:
 *   reach     ba_mf_reach finds W exactly (0 for no coupling);
 *   forward   ba_mf_band_forward's logw equals ba_mf_forward's byte for
 *             byte (memcmp), its m, phi and info equal, for mf, tap, bp,
 *             converged or not;
 *   backward  where the forward converged: dh and every dJ_jk (j < k, in
 *             the band and beyond it) within 1e-10 max |ref| of
 *             ba_mf_backward's (mf/tap: dense LU; bp: the dense
 *             iteration); the far entries equal zo_j m_k + zo_k m_j
 *             exactly; with a reach R, the entries beyond R untouched;
 *   fd        central differences (eps 1e-6, tol 1e-13) of the banded
 *             forward's L = sum g_j m_j: max |an - fd| <= 1e-6 max |an|
 *             for dh, the band's dJ and far dJ (a far coupling moved by
 *             eps widens the band: its forward runs at W' = k - j);
 *   batched   ba_approx_forward on a banded head: every row's logw equals
 *             the dense per-row forward's byte for byte; ba_approx_backward
 *             (every far entry, by matrix products or row by row) and
 *             ba_approx_backward_reach: dh and dJ within 1e-10 of the sum
 *             of the dense rows' gradients, dJ beyond R untouched; reach 0
 *             (all couplings 0) still gets its full dJ; 1 and 2 threads
 *             bit-identical. */
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

#define NMAX 64
#define LDJ (NMAX + 3) /* a leading dimension other than n */

static const ba_mf_method METHODS[3] = {BA_MF_NAIVE, BA_MF_TAP, BA_MF_BP};
static const ba_engine ENGINES[3] = {BA_ENGINE_MF, BA_ENGINE_TAP, BA_ENGINE_BP};
static const char *const NAMES[3] = {"mf", "tap", "bp"};
static const int WS[4] = {1, 2, 4, 8};
static const int NS[4] = {9, 20, 40, 64};

static double uniform(ba_rng *r, double a) { return a * (2.0 * ba_rng_uniform(r) - 1.0); }

/* J (n, ld): k - j <= W uniform in [-a, a] (never 0), 0 beyond, NaN on and
 * below the diagonal. */
static void fill_j(ba_rng *r, int n, int ld, int W, double a, double *J)
{
    for (int j = 0; j < n; j++)
        for (int k = 0; k < ld; k++) {
            double v = uniform(r, a);
            J[(size_t)j * ld + k] = k <= j ? NAN : k - j > W ? 0.0 : v != 0.0 ? v : a / 2;
        }
}

static void fill_h(ba_rng *r, int n, int adv, double *h)
{
    for (int j = 0; j < n; j++)
        h[j] = adv ? uniform(r, 20.0) : ba_rng_normal(r);
}

static double maxabs(const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* The per-query buffers, sized for NMAX keys and the widest band. */
typedef struct {
    double *Ab, *st_d, *st_b, *ws_d, *ws_b;
    int ipiv[NMAX];
} bufs;

static bufs bufs_new(int Wmax)
{
    bufs b;
    b.Ab = malloc(sizeof(double) * NMAX * (2 * NMAX + 1));
    b.st_d = malloc(sizeof(double) * ba_mf_state_doubles(BA_MF_BP, NMAX));
    b.st_b = malloc(sizeof(double) * ba_mf_band_state_doubles(BA_MF_BP, NMAX, Wmax));
    b.ws_d = malloc(sizeof(double) * ba_mf_ws_doubles(NMAX));
    b.ws_b = malloc(sizeof(double) * ba_mf_band_ws_doubles(NMAX, Wmax));
    assert_non_null(b.Ab), assert_non_null(b.st_d), assert_non_null(b.st_b);
    assert_non_null(b.ws_d), assert_non_null(b.ws_b);
    return b;
}

static void bufs_free(bufs *b)
{
    free(b->Ab), free(b->st_d), free(b->st_b), free(b->ws_d), free(b->ws_b);
}

static void test_reach(void **state)
{
    (void)state;
    static double J[NMAX * LDJ];
    ba_rng r;
    ba_rng_seed(&r, 3);
    for (int w = 0; w < 4; w++) {
        fill_j(&r, NMAX, LDJ, WS[w], 1.0, J);
        assert_int_equal(ba_mf_reach(NMAX, J, LDJ), WS[w]);
        assert_int_equal(ba_mf_reach(WS[w], J, LDJ), WS[w] - 1); /* a corner sees less */
    }
    fill_j(&r, NMAX, LDJ, 0, 1.0, J);
    assert_int_equal(ba_mf_reach(NMAX, J, LDJ), 0);
    J[30 * LDJ + 47] = -1e-300; /* one far coupling, however small */
    assert_int_equal(ba_mf_reach(NMAX, J, LDJ), 17);
    J[30 * LDJ + 47] = -0.0; /* a negative zero is no coupling */
    assert_int_equal(ba_mf_reach(NMAX, J, LDJ), 0);
    assert_int_equal(ba_mf_reach(1, J, LDJ), 0);
}

/* Dense and banded forward of one query; asserts they agree bit for bit
 * and returns whether it converged. */
static int twin_forward(ba_mf_method meth, const ba_mf_settings *s, int n, int W,
                        const double *h, const double *J, bufs *b, double *logw)
{
    char err[BA_ERR_LEN];
    double lw_b[NMAX];
    ba_mf_info id = {-1, -1}, ib = {-2, -2};
    assert_int_equal(ba_mf_forward(meth, s, n, h, J, LDJ, logw, b->st_d, b->ws_d, &id, err),
                     BA_OK);
    ba_mf_band_build(n, W, J, LDJ, b->Ab);
    assert_int_equal(ba_mf_band_forward(meth, s, n, W, h, b->Ab, lw_b, b->st_b, b->ws_b, &ib,
                                        err),
                     BA_OK);
    assert_memory_equal(logw, lw_b, sizeof(double) * n);
    assert_int_equal(id.iters, ib.iters);
    assert_int_equal(id.converged, ib.converged);
    for (int j = 0; j < 2 * n; j++) /* m and phi: == (a zero's sign may differ) */
        assert_true(b->st_d[j] == b->st_b[j]);
    return ib.converged;
}

/* The backward twins of one converged query: returns the worst relative
 * difference of dh and dJ. */
static double twin_backward(ba_mf_method meth, const ba_mf_settings *s, int n, int W,
                            const double *J, const double *g, bufs *b)
{
    char err[BA_ERR_LEN];
    static double dJd[NMAX * LDJ], dJb[NMAX * LDJ], dJr[NMAX * LDJ];
    double dhd[NMAX] = {0}, dhb[NMAX] = {0}, zo[NMAX];
    memset(dJd, 0, sizeof dJd), memset(dJb, 0, sizeof dJb);
    int rc = ba_mf_backward(meth, s, n, J, LDJ, b->st_d, g, dhd, dJd, LDJ, b->ws_d, b->ipiv,
                            NULL, err);
    if (rc == BA_ERR_NUMERIC)
        return -1.0; /* the dense adjoint is singular or diverged here: no twin */
    assert_int_equal(rc, BA_OK);
    assert_int_equal(ba_mf_band_backward(meth, s, n, W, b->Ab, b->st_b, g, dhb, dJb, LDJ, n - 1,
                                         zo, b->ws_b, b->ipiv, NULL, err),
                     BA_OK);
    double sh = maxabs(dhd, n), sj = maxabs(dJd, (size_t)NMAX * LDJ);
    assert_true(sh > 0.0 && sj > 0.0);
    double worst = 0.0;
    for (int j = 0; j < n; j++)
        worst = fmax(worst, fabs(dhd[j] - dhb[j]) / sh);
    const double *m = b->st_b;
    for (int j = 0; j < n; j++)
        for (int k = j + 1; k < n; k++) {
            worst = fmax(worst, fabs(dJd[j * LDJ + k] - dJb[j * LDJ + k]) / sj);
            if (k - j > W) /* the far gradient is the vector's, exactly */
                assert_true(dJb[j * LDJ + k] == 0.0 + (zo[j] * m[k] + zo[k] * m[j]));
        }
    /* a reach R just past the band: the entries beyond it untouched */
    int R = W + 1;
    for (size_t e = 0; e < (size_t)NMAX * LDJ; e++)
        dJr[e] = 7.0;
    assert_int_equal(ba_mf_band_backward(meth, s, n, W, b->Ab, b->st_b, g, NULL, dJr, LDJ, R,
                                         NULL, b->ws_b, b->ipiv, NULL, err),
                     BA_OK);
    for (int j = 0; j < n; j++)
        for (int k = 0; k < LDJ; k++)
            if (k > j && k - j <= R && k < n)
                assert_true(dJr[j * LDJ + k] - 7.0 == dJb[j * LDJ + k] ||
                            fabs(dJr[j * LDJ + k] - 7.0 - dJb[j * LDJ + k]) <= 1e-14 * (7 + sj));
            else
                assert_true(dJr[j * LDJ + k] == 7.0);
    return worst;
}

static void twins_sweep(int adv)
{
    ba_rng r;
    ba_rng_seed(&r, adv ? 77 : 11);
    static double J[NMAX * LDJ];
    double h[NMAX], g[NMAX], logw[NMAX];
    bufs b = bufs_new(8);
    ba_mf_settings s = {0.5, 1e-10, adv ? 300 : 2000, BA_MF_ADJ_LU, NULL, 0};
    double worst[3] = {0, 0, 0};
    int conv[3] = {0, 0, 0}, checked[3] = {0, 0, 0}, runs = 0;
    for (int wi = 0; wi < 4; wi++)
        for (int ni = 0; ni < 4; ni++) {
            int W = WS[wi], n = NS[ni];
            fill_j(&r, n, LDJ, W, adv ? 5.0 : 0.3, J);
            fill_h(&r, n, adv, h);
            for (int j = 0; j < n; j++)
                g[j] = ba_rng_normal(&r);
            for (int mi = 0; mi < 3; mi++) {
                runs++;
                int c = twin_forward(METHODS[mi], &s, n, W, h, J, &b, logw);
                conv[mi] += c;
                /* tap does not converge at |J| ~ 5 (its reaction term
                 * overshoots); its backward twins are then compared at the
                 * last iterate, a state like any other for them */
                if (!c && METHODS[mi] != BA_MF_TAP)
                    continue;
                double d = twin_backward(METHODS[mi], &s, n, W, J, g, &b);
                if (d >= 0)
                    checked[mi]++, worst[mi] = fmax(worst[mi], d);
            }
        }
    for (int mi = 0; mi < 3; mi++) {
        printf("  %s twins (%s): %d of 16 converged, %d backward twins, worst gradient "
               "difference %.2e\n", NAMES[mi], adv ? "adversarial" : "ordinary", conv[mi],
               checked[mi], worst[mi]);
        /* ordinary couplings converge everywhere; adversarial mf and bp
         * most places */
        if (!adv || METHODS[mi] != BA_MF_TAP)
            assert_true(adv ? conv[mi] >= 8 : conv[mi] == 16);
        assert_true(checked[mi] >= 8);
        assert_true(worst[mi] <= 1e-10);
    }
    assert_int_equal(runs, 48);
    bufs_free(&b);
}

static void test_twins_ordinary(void **state)
{
    (void)state;
    twins_sweep(0);
}

static void test_twins_adversarial(void **state)
{
    (void)state;
    twins_sweep(1);
}

/* L = sum g_j m_j of the banded forward at band Wf (J widened to it). */
static double loss(ba_mf_method meth, const ba_mf_settings *s, int n, int Wf, const double *h,
                   const double *J, const double *g, bufs *b)
{
    char err[BA_ERR_LEN];
    double lw[NMAX];
    ba_mf_info info;
    ba_mf_band_build(n, Wf, J, LDJ, b->Ab);
    assert_int_equal(ba_mf_band_forward(meth, s, n, Wf, h, b->Ab, lw, b->st_b, b->ws_b, &info,
                                        err),
                     BA_OK);
    assert_true(info.converged);
    double L = 0.0;
    for (int j = 0; j < n; j++)
        L += g[j] * b->st_b[j];
    return L;
}

static void test_finite_differences(void **state)
{
    (void)state;
    const int n = 20, NW = 2;
    const int wset[2] = {2, 4};
    const double eps = 1e-6;
    ba_rng r;
    ba_rng_seed(&r, 29);
    static double J[NMAX * LDJ], dJ[NMAX * LDJ];
    double h[NMAX], g[NMAX], dh[NMAX];
    bufs b = bufs_new(n);
    ba_mf_settings s = {0.5, 1e-13, 20000, BA_MF_ADJ_LU, NULL, 0};
    char err[BA_ERR_LEN];
    for (int wi = 0; wi < NW; wi++)
        for (int mi = 0; mi < 3; mi++) {
            int W = wset[wi];
            fill_j(&r, n, LDJ, W, 0.25, J);
            fill_h(&r, n, 0, h);
            for (int j = 0; j < n; j++)
                g[j] = ba_rng_normal(&r);
            loss(METHODS[mi], &s, n, W, h, J, g, &b); /* the state at the point */
            memset(dh, 0, sizeof dh), memset(dJ, 0, sizeof dJ);
            assert_int_equal(ba_mf_band_backward(METHODS[mi], &s, n, W, b.Ab, b.st_b, g, dh, dJ,
                                                 LDJ, n - 1, NULL, b.ws_b, b.ipiv, NULL, err),
                             BA_OK);
            double eh = 0, ej = 0, ef = 0, sh = maxabs(dh, n), sj = 0, sf = 0;
            for (int j = 0; j < n; j++) {
                double keep = h[j];
                h[j] = keep + eps;
                double lp = loss(METHODS[mi], &s, n, W, h, J, g, &b);
                h[j] = keep - eps;
                double lm = loss(METHODS[mi], &s, n, W, h, J, g, &b);
                h[j] = keep;
                eh = fmax(eh, fabs((lp - lm) / (2 * eps) - dh[j]));
            }
            for (int j = 0; j < n; j++)
                for (int k = j + 1; k < n; k++) {
                    int far = k - j > W;
                    if (far && (j + k) % 3) /* a third of the far pairs */
                        continue;
                    int Wf = far ? k - j : W;
                    double keep = J[j * LDJ + k];
                    J[j * LDJ + k] = keep + eps;
                    double lp = loss(METHODS[mi], &s, n, Wf, h, J, g, &b);
                    J[j * LDJ + k] = keep - eps;
                    double lm = loss(METHODS[mi], &s, n, Wf, h, J, g, &b);
                    J[j * LDJ + k] = keep;
                    double d = fabs((lp - lm) / (2 * eps) - dJ[j * LDJ + k]);
                    if (far)
                        ef = fmax(ef, d), sf = fmax(sf, fabs(dJ[j * LDJ + k]));
                    else
                        ej = fmax(ej, d), sj = fmax(sj, fabs(dJ[j * LDJ + k]));
                }
            printf("  fd %s W=%d: dh %.2e, band dJ %.2e, far dJ %.2e (relative)\n", NAMES[mi],
                   W, eh / sh, ej / sj, ef / sf);
            assert_true(sh > 0 && sj > 0 && sf > 0);
            assert_true(eh <= 1e-6 * sh);
            assert_true(ej <= 1e-6 * sj);
            assert_true(ef <= 1e-6 * sf);
        }
    bufs_free(&b);
}

/* The batched entry points on a banded head (B, T) against the dense rows. */
#define BB 2
static void batched_case(int T, int W, int threads, ba_rng *r, double *out_lw, double *out_dJ)
{
    static double h[BB * NMAX * NMAX], g[BB * NMAX * NMAX], J[NMAX * NMAX];
    static double lw[BB * NMAX * NMAX], dh[BB * NMAX * NMAX], dJ[NMAX * NMAX];
    static double rdh[BB * NMAX * NMAX], rdJ[NMAX * LDJ], dJr[NMAX * NMAX];
    for (int e = 0; e < BB * T * T; e++)
        h[e] = ba_rng_normal(r), g[e] = ba_rng_normal(r);
    fill_j(r, T, T, W, 0.3, J);
    ba_approx a = ba_approx_default();
    a.tol = 1e-10;
    ba_mf_settings s = ba_approx_mf_settings(&a);
    bufs b = bufs_new(W);
    char err[BA_ERR_LEN];
#ifdef _OPENMP
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    for (int mi = 0; mi < 3; mi++) {
        ba_approx_stats cnt = {0, 0, 0, 0, 0};
        memset(dh, 0, sizeof dh), memset(dJ, 0, sizeof dJ);
        assert_int_equal(ba_approx_forward(ENGINES[mi], &a, 0, BB, T, h, J, T, lw, &cnt, err),
                         BA_OK);
        assert_int_equal(cnt.unconverged, 0);
        assert_int_equal(ba_approx_backward(ENGINES[mi], &a, 0, BB, T, h, J, T, g, dh, dJ, NULL,
                                            err),
                         BA_OK);
        memcpy(out_lw + (size_t)mi * BB * T * T, lw, sizeof(double) * BB * T * T);
        memcpy(out_dJ + (size_t)mi * T * T, dJ, sizeof(double) * T * T);
        /* the reference: the dense rows one by one, J copied to LDJ rows */
        memset(rdh, 0, sizeof rdh), memset(rdJ, 0, sizeof rdJ);
        static double Jl[NMAX * LDJ];
        for (int j = 0; j < T; j++)
            for (int k = 0; k < T; k++)
                Jl[j * LDJ + k] = J[j * T + k];
        for (int q = 0; q < BB * T; q++) {
            int n = q % T + 1;
            double row[NMAX];
            ba_mf_settings sl = s;
            sl.adjoint = BA_MF_ADJ_LU;
            assert_int_equal(ba_mf_forward(METHODS[mi], &sl, n, h + (size_t)q * T, Jl, LDJ, row,
                                           b.st_d, b.ws_d, NULL, err),
                             BA_OK);
            assert_memory_equal(row, lw + (size_t)q * T, sizeof(double) * n);
            assert_int_equal(ba_mf_backward(METHODS[mi], &sl, n, Jl, LDJ, b.st_d,
                                            g + (size_t)q * T, rdh + (size_t)q * T, rdJ, LDJ,
                                            b.ws_d, b.ipiv, NULL, err),
                             BA_OK);
        }
        double sh = maxabs(rdh, (size_t)BB * T * T), sj = maxabs(rdJ, (size_t)NMAX * LDJ);
        assert_true(sh > 0 && sj > 0);
        double eh = 0, ej = 0;
        for (int q = 0; q < BB * T; q++)
            for (int j = 0; j <= q % T; j++)
                eh = fmax(eh, fabs(dh[(size_t)q * T + j] - rdh[(size_t)q * T + j]));
        for (int j = 0; j < T; j++)
            for (int k = j + 1; k < T; k++)
                ej = fmax(ej, fabs(dJ[j * T + k] - rdJ[j * LDJ + k]));
        assert_true(eh <= 1e-10 * sh);
        assert_true(ej <= 1e-10 * sj);
        /* reaches: just past the band (row by row) and far (products) */
        const int reaches[2] = {W + 2, T - 5};
        for (int ri = 0; ri < 2; ri++) {
            int R = reaches[ri];
            for (int e = 0; e < T * T; e++)
                dJr[e] = -3.0;
            assert_int_equal(ba_approx_backward_reach(ENGINES[mi], &a, 0, BB, T, h, J, T, g,
                                                      NULL, dJr, R, NULL, err),
                             BA_OK);
            for (int j = 0; j < T; j++)
                for (int k = 0; k < T; k++)
                    if (k > j && k - j <= R)
                        assert_true(fabs(dJr[j * T + k] + 3.0 - rdJ[j * LDJ + k]) <=
                                    1e-10 * sj + 1e-15);
                    else
                        assert_true(dJr[j * T + k] == -3.0);
        }
        if (threads == 1)
            printf("  batched %s T=%d W=%d: dh %.2e, dJ %.2e (relative)\n", NAMES[mi], T, W,
                   eh / sh, ej / sj);
    }
#ifdef _OPENMP
    omp_set_num_threads(saved);
#endif
    bufs_free(&b);
}

static void test_batched(void **state)
{
    (void)state;
    static double lw1[3 * BB * NMAX * NMAX], lw2[3 * BB * NMAX * NMAX];
    static double dJ1[3 * NMAX * NMAX], dJ2[3 * NMAX * NMAX];
    /* W = 0: no coupling, reach 0, still a full dJ; T = 40, W = 8: the far
     * entries row by row; T = 64: by products */
    const int cases[5][2] = {{64, 0}, {64, 2}, {64, 8}, {40, 8}, {20, 4}};
    for (int c = 0; c < 5; c++) {
        int T = cases[c][0], W = cases[c][1];
        ba_rng r1, r2;
        ba_rng_seed(&r1, 100 + c), ba_rng_seed(&r2, 100 + c);
        batched_case(T, W, 1, &r1, lw1, dJ1);
        batched_case(T, W, 2, &r2, lw2, dJ2);
        assert_memory_equal(lw1, lw2, sizeof(double) * 3 * BB * T * T);
        assert_memory_equal(dJ1, dJ2, sizeof(double) * 3 * T * T);
    }
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ba_mf_settings s = {0.5, 1e-8, 100, BA_MF_ADJ_LU, NULL, 0};
    double Ab[5 * 5] = {0}, h[5] = {0}, lw[5], st[64], ws[256], g[5] = {0}, dJ[25];
    int ipiv[5];
    char err[BA_ERR_LEN];
    assert_int_equal(ba_mf_band_forward(BA_MF_NAIVE, &s, 5, -1, h, Ab, lw, st, ws, NULL, err),
                     BA_ERR_ARG);
    assert_non_null(strstr(err, "band"));
    s.sequential = 1; /* the banded kernels have only Jacobi sweeps */
    assert_int_equal(ba_mf_band_forward(BA_MF_NAIVE, &s, 5, 2, h, Ab, lw, st, ws, NULL, err),
                     BA_ERR_ARG);
    assert_non_null(strstr(err, "sequential"));
    s.sequential = 0;
    assert_int_equal(ba_mf_band_forward(BA_MF_NAIVE, &s, 5, 2, h, NULL, lw, st, ws, NULL, err),
                     BA_ERR_ARG);
    Ab[1 * 5 + 2 + 1] = NAN; /* J[1][2] */
    assert_int_equal(ba_mf_band_forward(BA_MF_TAP, &s, 5, 2, h, Ab, lw, st, ws, NULL, err),
                     BA_ERR_NUMERIC);
    assert_non_null(strstr(err, "J[1][2]"));
    Ab[1 * 5 + 2 + 1] = 0.1;
    h[3] = INFINITY;
    assert_int_equal(ba_mf_band_forward(BA_MF_BP, &s, 5, 2, h, Ab, lw, st, ws, NULL, err),
                     BA_ERR_NUMERIC);
    assert_non_null(strstr(err, "h[3]"));
    h[3] = 0.0;
    assert_int_equal(ba_mf_band_forward(BA_MF_NAIVE, &s, 5, 2, h, Ab, lw, st, ws, NULL, err),
                     BA_OK);
    assert_int_equal(ba_mf_band_backward(BA_MF_NAIVE, &s, 5, 2, Ab, st, g, NULL, dJ, 5, -1, NULL,
                                         ws, ipiv, NULL, err),
                     BA_ERR_ARG);
    assert_non_null(strstr(err, "reach"));
    assert_int_equal(ba_mf_band_backward(BA_MF_NAIVE, &s, 5, 2, Ab, st, g, NULL, dJ, 5, 4, NULL,
                                         ws, NULL, NULL, err),
                     BA_ERR_ARG);
    ba_approx a = ba_approx_default();
    double Jb[4] = {0}, hb[4] = {0}, gb[4] = {0}, dJb[4] = {0};
    assert_int_equal(ba_approx_backward_reach(BA_ENGINE_MF, &a, 0, 1, 2, hb, Jb, 2, gb, NULL,
                                              dJb, -1, NULL, err),
                     BA_ERR_ARG);
    assert_non_null(strstr(err, "reach"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reach),
        cmocka_unit_test(test_twins_ordinary),
        cmocka_unit_test(test_twins_adversarial),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_batched),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
