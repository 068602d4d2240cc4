/* The exact engines' backward when every key of a query is unlikely.
 *
 * The attention layer hands the engines g = dL/dm with
 * g_j = (da_j - <da>) / (2 S), S = sum_j w_j the query's total weight, so
 * g grows as 1/S when every field is very negative: 1e13 at h ~ -20,
 * 1e47 (past FLT_MAX) at h ~ -55, while dL/dh stays of order da. A
 * backward that forms G(s) = sum_j g_j s_j and subtracts <G> cancels two
 * numbers of size sum_j g_j at the likely states; that cost 7e13 in dh
 * and 1e23 in dJ (double) and NaN (float products) on a charlm
 * checkpoint's batch (results/converged charlm-T12 boltzmann s1, step
 * 100,612).
 *
 * The oracle here shares no code or formula with the engines: with
 * E_j[.] the expectation given s_j = +1 (its own normalised enumeration),
 *   Cov(s_j, X) = 2 w_j (E_j[X] - E[X]),
 *   dh_k = sum_j g_j Cov(s_j, s_k),  dJ_kl = sum_j g_j Cov(s_j, s_k s_l),
 * where g_j w_j stays of order da and each difference E_j[X] - E[X] of
 * order 1, so its error is absolute, 1e-16 of the result's scale.
 *
 * Held to it, as 2-norm errors relative to the oracle's gradient over a
 * batch (every n = 1..T of B queries): the reference enumeration, the
 * fast engine with double products and the band engine at W = T - 1
 * (exact for full couplings; log and automatic paths) within 1e-10; the
 * fast engine with float products within 4 (256 + 4) 2^-24 = 6.2e-5, the
 * bound of tests/test_fast_f32.c. The worst of each is printed.
 *
 * The approximate engines (mf, tap, bp, hybrid) have no oracle of this
 * kind; each is held to the central difference of its own forward's
 * attention loss at the same depths (test_unlikely_keys_approx). */
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
#include "grad_norm.h"

#define F32_BOUND (4.0 * (256.0 + 4.0) * 0x1p-24)
#define F64_BOUND 1e-10

enum { E_REF, E_FAST64, E_FAST32, E_BAND_LOG, E_BAND_AUTO, NENG };
static const char *const eng_name[NENG] = {"reference", "fast double", "fast float",
                                           "band log", "band auto"};

/* Oracle gradient of one query of n spins: dh (n) +=, dJ (n,ldj) +=. */
static void oracle_query(int n, const double *h, const double *J, int ldj, const double *g,
                         double *dh, double *dJ)
{
    size_t N = (size_t)1 << n;
    double *p = malloc(sizeof(double) * N), mx = -INFINITY, z = 0.0;
    assert_non_null(p);
    for (size_t s = 0; s < N; s++) {
        double e = 0.0;
        for (int j = 0; j < n; j++) {
            double sj = (s >> j & 1) ? 1.0 : -1.0;
            e += h[j] * sj;
            for (int k = j + 1; k < n; k++)
                e += J[(size_t)j * ldj + k] * sj * ((s >> k & 1) ? 1.0 : -1.0);
        }
        p[s] = e;
        mx = fmax(mx, e);
    }
    for (size_t s = 0; s < N; s++)
        z += p[s] = exp(p[s] - mx);
    /* moments X = s_k (row k of the diagonal) and s_k s_l (k < l), overall
     * and given s_j = +1 */
    double *all = calloc((size_t)n * n, sizeof(double));
    double *cond = calloc((size_t)n * n, sizeof(double));
    assert_true(all && cond);
    for (size_t s = 0; s < N; s++)
        for (int k = 0; k < n; k++) {
            double sk = (s >> k & 1) ? 1.0 : -1.0;
            all[(size_t)k * n + k] += p[s] / z * sk;
            for (int l = k + 1; l < n; l++)
                all[(size_t)k * n + l] += p[s] / z * sk * ((s >> l & 1) ? 1.0 : -1.0);
        }
    for (int j = 0; j < n; j++) {
        double wj = 0.0;
        memset(cond, 0, sizeof(double) * n * n);
        for (size_t s = 0; s < N; s++) {
            if (!(s >> j & 1))
                continue;
            wj += p[s];
            for (int k = 0; k < n; k++) {
                double sk = (s >> k & 1) ? 1.0 : -1.0;
                cond[(size_t)k * n + k] += p[s] * sk;
                for (int l = k + 1; l < n; l++)
                    cond[(size_t)k * n + l] += p[s] * sk * ((s >> l & 1) ? 1.0 : -1.0);
            }
        }
        double f = 2.0 * g[j] * (wj / z); /* g_j 2 w_j */
        for (int k = 0; k < n; k++) {
            dh[k] += f * (cond[(size_t)k * n + k] / wj - all[(size_t)k * n + k]);
            for (int l = k + 1; l < n; l++)
                dJ[(size_t)k * ldj + l] +=
                    f * (cond[(size_t)k * n + l] / wj - all[(size_t)k * n + l]);
        }
    }
    free(all), free(cond), free(p);
}

/* Fields offset by -depth (+- 3 uniform, N(0,1)), couplings of a trained
 * charlm's pattern (J(1) = a/2, J(2..4) = a, J(>=6) = -a/2, a = 1) or
 * N(0, 0.5^2) by pattern; g formed as the attention layer forms it from
 * da ~ N(0,1) and the reference marginals. */
static void fill(ba_rng *r, double depth, int pattern, int B, int T, double *h, double *J,
                 double *g)
{
    size_t TT = (size_t)T * T;
    char err[BA_ERR_LEN];
    for (int j = 0; j < T; j++)
        for (int k = 0; k < T; k++) {
            int d = k - j;
            double v = NAN; /* unused entries: an engine reading them fails */
            if (d > 0)
                v = pattern ? (d == 1 ? 0.5 : d <= 4 ? 1.0 : d >= 6 ? -0.5 : 0.0)
                            : 0.5 * ba_rng_normal(r);
            J[(size_t)j * T + k] = v;
        }
    double off = -depth + 3.0 * (2.0 * ba_rng_uniform(r) - 1.0);
    for (size_t i = 0; i < (size_t)B * TT; i++)
        h[i] = off + ba_rng_normal(r);
    double *lw = malloc(sizeof(double) * B * TT);
    assert_non_null(lw);
    assert_int_equal(ba_ref_forward(B, T, h, J, T, lw, err), BA_OK);
    for (int q = 0; q < B * T; q++) {
        int n = q % T + 1;
        const double *l = lw + (size_t)q * T;
        double *gq = g + (size_t)q * T, da[64], mx = -INFINITY, z = 0.0, adot = 0.0;
        for (int j = 0; j < n; j++)
            mx = fmax(mx, l[j]);
        for (int j = 0; j < n; j++)
            z += exp(l[j] - mx);
        for (int j = 0; j < n; j++) {
            da[j] = ba_rng_normal(r);
            adot += exp(l[j] - mx) / z * da[j];
        }
        double inv2s = 0.5 * exp(-mx) / z; /* 1 / (2 S) */
        for (int j = 0; j < T; j++)
            gq[j] = j < n ? (da[j] - adot) * inv2s : 0.0;
    }
    free(lw);
}

/* One engine's backward into dh, dJ (zeroed here). */
static void run_engine(int e, int B, int T, const double *h, const double *J, const double *g,
                       double *dh, double *dJ)
{
    size_t TT = (size_t)T * T;
    char err[BA_ERR_LEN];
    memset(dh, 0, sizeof(double) * B * TT);
    memset(dJ, 0, sizeof(double) * TT);
    if (e == E_REF) {
        assert_int_equal(ba_ref_backward(B, T, h, J, T, g, dh, dJ, err), BA_OK);
    } else if (e == E_FAST64 || e == E_FAST32) {
        ba_engine_ctx *c = ba_engine_ctx_new();
        assert_non_null(c);
        ba_engine_ctx_set_f32(c, e == E_FAST32);
        assert_int_equal(ba_engine_forward_fast(c, B, T, h, J, T, NULL, err), BA_OK);
        assert_int_equal(ba_engine_backward_fast(c, B, T, h, J, T, g, dh, dJ, err), BA_OK);
        ba_engine_ctx_free(c);
    } else {
        /* band layout Jb[t W + d - 1] = J_{t-d,t}, W = T - 1: every pair */
        int W = T - 1 > 0 ? T - 1 : 1;
        double *Jb = calloc((size_t)T * W, sizeof(double));
        double *dJb = calloc((size_t)T * W, sizeof(double));
        assert_true(Jb && dJb);
        for (int t = 0; t < T; t++)
            for (int d = 1; d <= t && d <= W; d++)
                Jb[(size_t)t * W + d - 1] = J[(size_t)(t - d) * T + t];
        ba_band_path path = e == E_BAND_LOG ? BA_BAND_LOG : BA_BAND_AUTO;
        assert_int_equal(ba_band_backward_path(path, W, B, T, h, Jb, g, dh, dJb, NULL, err), BA_OK);
        for (int t = 0; t < T; t++)
            for (int d = 1; d <= t && d <= W; d++)
                dJ[(size_t)(t - d) * T + t] = dJb[(size_t)t * W + d - 1];
        free(Jb), free(dJb);
    }
}

static void test_unlikely_keys(void **state)
{
    (void)state;
    const int Ts[] = {4, 8, 12, 14};
    const double depths[] = {0.0, 20.0, 55.0};
    enum { B = 3 };
    double worst[NENG] = {0};
    double gmax = 0.0;
    for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++)
        for (int pattern = 0; pattern < 2; pattern++)
            for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
                int T = Ts[ti];
                size_t TT = (size_t)T * T, n = (size_t)B * TT;
                double *buf = calloc(5 * n + 3 * TT, sizeof(double));
                assert_non_null(buf);
                double *h = buf, *g = h + n, *dho = g + n, *dh = dho + n, *J = dh + n;
                double *dJo = J + TT, *dJ = dJo + TT;
                ba_rng r;
                ba_rng_seed(&r, 500u + 37u * (uint64_t)di + 11u * (uint64_t)pattern + (uint64_t)T);
                fill(&r, depths[di], pattern, B, T, h, J, g);
                for (size_t i = 0; i < n; i++)
                    gmax = fmax(gmax, fabs(g[i]));
                for (int q = 0; q < B * T; q++)
                    oracle_query(q % T + 1, h + (size_t)q * T, J, T, g + (size_t)q * T,
                                 dho + (size_t)q * T, dJo);
                double nh = diff_norm(dho, NULL, B, T, 0), nj = diff_norm(dJo, NULL, B, T, 1);
                assert_true(nh > 0.0 && isfinite(nh));
                for (int e = 0; e < NENG; e++) {
                    run_engine(e, B, T, h, J, g, dh, dJ);
                    double rh = diff_norm(dh, dho, B, T, 0) / nh;
                    double rj = T > 1 ? diff_norm(dJ, dJo, B, T, 1) / nj : 0.0;
                    double err = fmax(rh, rj);
                    if (!(err <= F32_BOUND)) /* a NaN fails too */
                        print_message("%s: depth %.0f pattern %d T %d: dh %.2e dJ %.2e\n",
                                      eng_name[e], depths[di], pattern, T, rh, rj);
                    worst[e] = isnan(err) ? INFINITY : fmax(worst[e], err);
                }
                free(buf);
            }
    print_message("largest |g| %.1e (FLT_MAX 3.4e38)\n", gmax);
    for (int e = 0; e < NENG; e++)
        print_message("%-11s worst relative error %.2e (bound %.1e)\n", eng_name[e], worst[e],
                      e == E_FAST32 ? F32_BOUND : F64_BOUND);
    assert_true(gmax > 3.5e38); /* the inputs reach past float range */
    for (int e = 0; e < NENG; e++)
        assert_true(worst[e] <= (e == E_FAST32 ? F32_BOUND : F64_BOUND));
    assert_true(worst[E_FAST32] > 0.0); /* the float products ran */
}

/* ------------------------------------------- the approximate engines */

/* L = sum over the B T queries of sum_j da_j a_j, a the query's weights
 * w = exp(logw) normalised: the attention's dependence on the weights,
 * of order da however small w is. With gq (may be NULL) = dL/dm, m = 2w-1:
 * g_j = (da_j - <da>) / (2 S), as the attention layer hands it on. */
static double attn_loss(int B, int T, const double *logw, const double *da, double *gq)
{
    double L = 0.0;
    for (int q = 0; q < B * T; q++) {
        int n = q % T + 1;
        const double *l = logw + (size_t)q * T, *d = da + (size_t)q * T;
        double mx = -INFINITY, z = 0.0, adot = 0.0;
        for (int j = 0; j < n; j++)
            mx = fmax(mx, l[j]);
        for (int j = 0; j < n; j++)
            z += exp(l[j] - mx);
        for (int j = 0; j < n; j++)
            adot += exp(l[j] - mx) / z * d[j];
        L += adot;
        for (int j = 0; gq && j < T; j++)
            gq[(size_t)q * T + j] = j < n ? (d[j] - adot) * 0.5 * exp(-mx) / z : 0.0;
    }
    return L;
}

static double approx_loss(ba_engine e, const ba_approx *a, int W, int B, int T, const double *h,
                          const double *J, const double *da, double *logw, double *g)
{
    char err[BA_ERR_LEN];
    ba_approx_stats st = {0};
    if (ba_approx_forward(e, a, W, B, T, h, J, T, logw, &st, err))
        fail_msg("%s", err);
    assert_int_equal(st.unconverged, 0);
    return attn_loss(B, T, logw, da, g);
}

/* mf, tap, bp and hybrid (W = 2) at the same depths: each engine's own
 * backward against the central difference of its own forward's L along
 * random directions of the fields and of the couplings (the adjoint of
 * every row, so the GEMM path of mf and tap at T = 64 too). Nothing in
 * these engines subtracts sum_j g_j s_j, but their D = 1 - m^2 must come
 * from the fields (sech^2), not from m, which rounds to -1: there D would
 * be 0 and the gradient, of order da, with it. Bound 1e-6 of the
 * directional derivative's scale (the check); the difference's
 * own error is about tol / eps + eps^2 = 1e-8. */
static void test_unlikely_keys_approx(void **state)
{
    (void)state;
    const ba_engine engs[] = {BA_ENGINE_MF, BA_ENGINE_TAP, BA_ENGINE_BP, BA_ENGINE_HYBRID};
    const char *const names[] = {"mf", "tap", "bp", "hybrid"};
    const int Ts[] = {6, 12, 64};
    const double depths[] = {0.0, 20.0, 55.0}, eps = 1e-5;
    const ba_approx a = {0.5, 1e-13, 5000};
    enum { B = 2 };
    double worst[4] = {0};
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
        for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++) {
            int T = Ts[ti];
            size_t TT = (size_t)T * T, n = (size_t)B * TT;
            double *buf = calloc(8 * n + 4 * TT, sizeof(double));
            assert_non_null(buf);
            double *h = buf, *da = h + n, *g = da + n, *lw = g + n, *dh = lw + n, *vh = dh + n;
            double *hp = vh + n, *J = hp + n, *dJ = J + TT, *vJ = dJ + TT, *Jp = vJ + TT;
            ba_rng r;
            ba_rng_seed(&r, 900u + 13u * (uint64_t)di + (uint64_t)T);
            for (size_t i = 0; i < n; i++) {
                h[i] = -depths[di] + ba_rng_normal(&r);
                da[i] = ba_rng_normal(&r);
                vh[i] = ba_rng_normal(&r);
            }
            for (size_t i = 0; i < TT; i++) {
                J[i] = 0.5 / sqrt((double)T) * ba_rng_normal(&r);
                vJ[i] = (i % T > i / T) ? ba_rng_normal(&r) : 0.0; /* pairs j < k */
            }
            for (int e = 0; e < 4; e++) {
                char err[BA_ERR_LEN];
                ba_approx_stats st = {0};
                approx_loss(engs[e], &a, 2, B, T, h, J, da, lw, g);
                memset(dh, 0, sizeof(double) * n);
                memset(dJ, 0, sizeof(double) * TT);
                if (ba_approx_backward(engs[e], &a, 2, B, T, h, J, T, g, dh, dJ, &st, err))
                    fail_msg("%s: %s", names[e], err);
                assert_int_equal(st.unconverged, 0);
                double an[2] = {0, 0}, scale[2] = {0, 0}, fd[2];
                for (size_t i = 0; i < n; i++)
                    if ((int)(i % T) <= (int)(i / T % T)) /* entries j <= i of a row */
                        an[0] += dh[i] * vh[i], scale[0] += fabs(dh[i] * vh[i]);
                for (size_t i = 0; i < TT; i++)
                    an[1] += dJ[i] * vJ[i], scale[1] += fabs(dJ[i] * vJ[i]);
                for (int part = 0; part < 2; part++) {
                    double L[2];
                    for (int sgn = 0; sgn < 2; sgn++) {
                        double t = sgn ? -eps : eps;
                        for (size_t i = 0; i < n; i++)
                            hp[i] = h[i] + (part == 0 ? t * vh[i] : 0.0);
                        for (size_t i = 0; i < TT; i++)
                            Jp[i] = J[i] + (part == 1 ? t * vJ[i] : 0.0);
                        L[sgn] = approx_loss(engs[e], &a, 2, B, T, hp, Jp, da, lw, NULL);
                    }
                    fd[part] = (L[0] - L[1]) / (2.0 * eps);
                    double rel = fabs(fd[part] - an[part]) / fmax(scale[part], 1e-300);
                    if (!(rel <= 1e-6))
                        print_message("%s T %d depth %.0f %s: analytic %.10e difference "
                                      "%.10e\n", names[e], T, depths[di], part ? "J" : "h",
                                      an[part], fd[part]);
                    worst[e] = isnan(rel) ? INFINITY : fmax(worst[e], rel);
                    assert_true(scale[part] > 1e-3); /* a gradient of order da, not 0 */
                }
            }
            free(buf);
        }
    for (int e = 0; e < 4; e++) {
        print_message("%-6s worst relative difference %.2e (bound 1e-6)\n", names[e], worst[e]);
        assert_true(worst[e] <= 1e-6);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unlikely_keys),
        cmocka_unit_test(test_unlikely_keys_approx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
