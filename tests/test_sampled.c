/* Tests of sampled attention (src/ising/sampled.c and its use by the layers and
 * the model), developed against the `direct` sampler, whose shots come from
 * the exact Boltzmann distribution, so every deviation from the exact
 * engine is shot noise or the documented estimator:
 *   w = (c + 1/2)/(S + 1),  dL/dh = beta Cov^(G, s),  dL/dJ = beta sum Cov^(G, ss)
 * (boltzmann.h, "sampled attention").
 *
 * - forward: logw is exactly the estimator of the stored shots, and the
 *   shots only set bits of visible keys;
 * - backward: held against an obvious twin written here (means over the
 *   shots: mean(G s) - mean(G) mean(s), times S/(S-1) and beta);
 * - (a) attention weights of a model converge to the exact ones as S grows:
 *   max |a - a_exact| * sqrt(S) stays within a band at S = 64, 1024, 16384;
 * - (b) the sampled gradient is unbiased for beta S/(S+1) times the exact
 *   one (fixed upstream g): its mean over 120 seeds at S = 2048 lies within
 *   5 standard errors of the exact engine's backward, entry by entry
 *   (measured worst: 3.2 over 57 entries);
 * - the whole model's sampled gradient at large S is close to the exact
 *   gradient (boltzmann and coupling), and far from it at small S;
 * - (c) determinism: bit-identical for the same seed, also with 1 vs 2
 *   threads (per-query streams, fixed-chunk reductions);
 * - config validation, ba_model_set_sampler and a reproducible ba_evaluate
 *   that leaves the sampler RNG untouched.
 * Bands were set from measured runs (numbers in each test); the file takes
 * about a second in Release with 2 threads. */
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

static void fill_normal(ba_rng *r, double *x, size_t n, double sd)
{
    for (size_t i = 0; i < n; i++)
        x[i] = sd * ba_rng_normal(r);
}

/* A random head: fields h (B,T,T), couplings J (T,T) upper triangle. */
typedef struct {
    int B, T;
    double *h, *J, *g;
} system_t;

static system_t make_system(int B, int T, uint64_t seed, double hsd, double jsd)
{
    system_t s = {B, T, NULL, NULL, NULL};
    size_t btt = (size_t)B * T * T;
    s.h = malloc(sizeof(double) * btt);
    s.J = calloc((size_t)T * T, sizeof(double));
    s.g = malloc(sizeof(double) * btt);
    assert_non_null(s.h), assert_non_null(s.J), assert_non_null(s.g);
    ba_rng r;
    ba_rng_seed(&r, seed);
    fill_normal(&r, s.h, btt, hsd);
    for (int j = 0; j < T; j++)
        for (int k = j + 1; k < T; k++)
            s.J[(size_t)j * T + k] = jsd * ba_rng_normal(&r);
    fill_normal(&r, s.g, btt, 1.0);
    return s;
}

static void free_system(system_t *s) { free(s->h), free(s->J), free(s->g); }

static ba_sampler direct(int S)
{
    ba_sampler sp = ba_sampler_default(BA_SAMPLER_DIRECT);
    sp.shots = S;
    return sp;
}

/* ------------------------------------------------------------ forward */

static void test_forward_estimator(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    int B = 2, T = 6, S = 100;
    system_t sys = make_system(B, T, 1, 1.0, 0.5);
    ba_sample_ctx *c = ba_sample_ctx_new();
    ba_sampler sp = direct(S);
    double *logw = malloc(sizeof(double) * B * T * T);
    assert_null(ba_sample_ctx_shots(c, NULL, NULL, NULL));
    assert_int_equal(ba_sampled_forward(c, &sp, 77, 0, B, T, sys.h, sys.J, T, logw, err), BA_OK);
    int b2, t2, s2;
    const uint64_t *shots = ba_sample_ctx_shots(c, &b2, &t2, &s2);
    assert_non_null(shots);
    assert_int_equal(b2, B), assert_int_equal(t2, T), assert_int_equal(s2, S);
    for (int q = 0; q < B * T; q++) {
        int n = q % T + 1;
        for (int j = 0; j < T; j++) {
            int cnt = 0;
            for (int k = 0; k < S; k++) {
                assert_true(shots[(size_t)q * S + k] >> n == 0); /* masked keys absent */
                cnt += (int)((shots[(size_t)q * S + k] >> j) & 1);
            }
            double l = logw[(size_t)q * T + j];
            if (j < n)
                assert_true(fabs(l - log((cnt + 0.5) / (S + 1.0))) < 1e-14);
            else
                assert_true(isinf(l) && l < 0);
        }
    }
    /* bad arguments: exact sampler, a backward of another shape */
    ba_sampler ex = ba_sampler_default(BA_SAMPLER_EXACT);
    assert_int_equal(ba_sampled_forward(c, &ex, 1, 0, B, T, sys.h, sys.J, T, logw, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "other than exact"));
    /* the failed call dropped the stored forward */
    assert_null(ba_sample_ctx_shots(c, NULL, NULL, NULL));
    assert_int_equal(ba_sampled_forward(c, &sp, 77, 0, B, T, sys.h, sys.J, T, logw, err), BA_OK);
    double *dh = calloc((size_t)B * T * T, sizeof(double));
    assert_int_equal(ba_sampled_backward(c, &sp, 1, T, sys.g, dh, NULL, T, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "does not follow a forward"));
    ba_sampler sp2 = direct(S + 1);
    assert_int_equal(ba_sampled_backward(c, &sp2, B, T, sys.g, dh, NULL, T, err), BA_ERR_ARG);
    free(dh);
    free(logw);
    ba_sample_ctx_free(c);
    free_system(&sys);
}

/* ----------------------------------------------------------- backward */

/* The obvious twin: per query, means over the shots. */
static void twin_backward(const uint64_t *shots, int B, int T, int S, double beta,
                          const double *g, double *dh, double *dJ)
{
    double gs = (double)S / (S + 1.0), corr = (double)S / (S - 1.0);
    for (int q = 0; q < B * T; q++) {
        int n = q % T + 1;
        const uint64_t *x = shots + (size_t)q * S;
        double mG = 0, mGs[64] = {0}, ms[64] = {0}, mGss[64][64], mss[64][64];
        memset(mGss, 0, sizeof mGss), memset(mss, 0, sizeof mss);
        for (int k = 0; k < S; k++) {
            double s[64], G = 0;
            for (int j = 0; j < n; j++) {
                s[j] = (x[k] >> j) & 1 ? 1.0 : -1.0;
                G += gs * g[(size_t)q * T + j] * s[j];
            }
            mG += G / S;
            for (int j = 0; j < n; j++) {
                mGs[j] += G * s[j] / S;
                ms[j] += s[j] / S;
                for (int l = j + 1; l < n; l++) {
                    mGss[j][l] += G * s[j] * s[l] / S;
                    mss[j][l] += s[j] * s[l] / S;
                }
            }
        }
        for (int j = 0; j < n; j++) {
            dh[(size_t)q * T + j] += beta * corr * (mGs[j] - mG * ms[j]);
            for (int l = j + 1; l < n; l++)
                dJ[(size_t)j * T + l] += beta * corr * (mGss[j][l] - mG * mss[j][l]);
        }
    }
}

static double max_abs_diff(const double *a, const double *b, size_t n, double *scale)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs(a[i] - b[i]));
        s = fmax(s, fabs(b[i]));
    }
    if (scale)
        *scale = s;
    return d;
}

static void test_backward_twin(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    int B = 3, T = 7, S = 50;
    system_t sys = make_system(B, T, 2, 0.8, 0.6);
    size_t btt = (size_t)B * T * T, tt = (size_t)T * T;
    ba_sample_ctx *c = ba_sample_ctx_new();
    ba_sampler sp = direct(S);
    sp.beta_assumed = 0.7;
    double *logw = malloc(sizeof(double) * btt);
    double *dh = calloc(btt, sizeof(double)), *dJ = calloc(tt, sizeof(double));
    double *th = calloc(btt, sizeof(double)), *tJ = calloc(tt, sizeof(double));
    assert_int_equal(ba_sampled_forward(c, &sp, 5, 0, B, T, sys.h, sys.J, T, logw, err), BA_OK);
    assert_int_equal(ba_sampled_backward(c, &sp, B, T, sys.g, dh, dJ, T, err), BA_OK);
    twin_backward(ba_sample_ctx_shots(c, NULL, NULL, NULL), B, T, S, 0.7, sys.g, th, tJ);
    double sh, sj;
    double eh = max_abs_diff(dh, th, btt, &sh), ej = max_abs_diff(dJ, tJ, tt, &sj);
    assert_true(sh > 0.01 && sj > 0.01); /* not a comparison of zeros */
    if (eh > 1e-12 * sh || ej > 1e-12 * sj)
        fail_msg("sampled backward differs from its twin: dh %g (scale %g), dJ %g (scale %g)", eh,
                 sh, ej, sj);
    /* accumulates (+=) and leaves entries j > i and the lower triangle alone */
    assert_int_equal(ba_sampled_backward(c, &sp, B, T, sys.g, dh, dJ, T, err), BA_OK);
    for (size_t i = 0; i < btt; i++) {
        int j = (int)(i % T), row = (int)((i / T) % T);
        assert_true(j <= row ? fabs(dh[i] - 2 * th[i]) <= 1e-12 * sh : dh[i] == 0.0);
    }
    for (int j = 0; j < T; j++)
        for (int k = 0; k <= j; k++)
            assert_true(dJ[(size_t)j * T + k] == 0.0);
    /* one shot: no covariance, nothing added */
    ba_sampler one = direct(1);
    memset(dh, 0, sizeof(double) * btt), memset(dJ, 0, sizeof(double) * tt);
    assert_int_equal(ba_sampled_forward(c, &one, 5, 0, B, T, sys.h, sys.J, T, logw, err), BA_OK);
    assert_int_equal(ba_sampled_backward(c, &one, B, T, sys.g, dh, dJ, T, err), BA_OK);
    for (size_t i = 0; i < btt; i++)
        assert_true(dh[i] == 0.0);
    free(logw), free(dh), free(dJ), free(th), free(tJ);
    ba_sample_ctx_free(c);
    free_system(&sys);
}

/* (b) E[sampled backward] = beta S/(S+1) exact backward, for a fixed g. */
static void test_gradient_unbiased(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    int B = 2, T = 6, S = 2048, R = 120;
    system_t sys = make_system(B, T, 3, 1.0, 0.5);
    size_t btt = (size_t)B * T * T, tt = (size_t)T * T, nv = btt + tt;
    double *exh = calloc(btt, sizeof(double)), *exJ = calloc(tt, sizeof(double));
    assert_int_equal(
        ba_engine_backward(BA_ENGINE_REFERENCE, B, T, sys.h, sys.J, T, sys.g, exh, exJ, err),
        BA_OK);
    double *sum = calloc(nv, sizeof(double)), *sq = calloc(nv, sizeof(double));
    double *v = malloc(sizeof(double) * nv), *logw = malloc(sizeof(double) * btt);
    ba_sample_ctx *c = ba_sample_ctx_new();
    ba_sampler sp = direct(S);
    for (int r = 0; r < R; r++) {
        memset(v, 0, sizeof(double) * nv);
        assert_int_equal(ba_sampled_forward(c, &sp, 1000 + r, 0, B, T, sys.h, sys.J, T, logw, err),
                         BA_OK);
        assert_int_equal(ba_sampled_backward(c, &sp, B, T, sys.g, v, v + btt, T, err), BA_OK);
        for (size_t i = 0; i < nv; i++)
            sum[i] += v[i], sq[i] += v[i] * v[i];
    }
    double f = (double)S / (S + 1.0), worst = 0, maxse = 0, scale = 0;
    int checked = 0;
    for (size_t i = 0; i < nv; i++) {
        int isJ = i >= btt;
        size_t k = isJ ? i - btt : i;
        int j = (int)(k % T), row = (int)((k / T) % T);
        if (isJ ? j <= row : j > row)
            continue; /* unused entries */
        double ex = f * (isJ ? exJ[k] : exh[k]);
        double mean = sum[i] / R, var = (sq[i] - R * mean * mean) / (R - 1);
        double se = sqrt(fmax(var, 0) / R);
        double z = fabs(mean - ex) / fmax(se, 1e-300);
        worst = fmax(worst, z);
        maxse = fmax(maxse, se);
        scale = fmax(scale, fabs(ex));
        checked++;
        if (z > 5.0)
            fail_msg("%s entry %zu: mean %.6g, exact %.6g, %.1f standard errors apart",
                     isJ ? "dJ" : "dh", k, mean, ex, z);
    }
    print_message("gradient expectation: %d entries, worst %.2f standard errors; largest "
                  "standard error %.2g of a gradient scale %.2g\n",
                  checked, worst, maxse, scale);
    assert_int_equal(checked, B * T * (T + 1) / 2 + T * (T - 1) / 2);
    /* The test has teeth: every standard error is below 0.6 % of the
     * gradient's scale (measured 0.37 %), so a bias of 3 % of it fails. */
    assert_true(maxse < 0.006 * scale);
    free(exh), free(exJ), free(sum), free(sq), free(v), free(logw);
    ba_sample_ctx_free(c);
    free_system(&sys);
}

/* ---------------------------------------------------------- the model */

/* A brackets-shaped model of attn whose qkv weights are scaled up by
 * `scale` from the N(0, 0.02) initialisation (5 gives fields of a few
 * units), J ~ N(0, 0.5). */
static ba_model *make_model(ba_attn attn, int T, uint64_t seed, double scale)
{
    char err[BA_ERR_LEN];
    ba_config cfg = ba_config_default(attn, T);
    cfg.vocab_size = 2, cfg.out_size = T, cfg.head = BA_HEAD_POINTER;
    cfg.n_embd = 16, cfg.n_head = 2;
    ba_model *m;
    if (ba_model_init(&m, &cfg, err))
        fail_msg("model: %s", err);
    ba_rng r;
    ba_rng_seed(&r, seed);
    ba_model_init_weights(m, &r, 0.5);
    ba_tensor_info ti;
    assert_int_equal(ba_model_tensor(m, ba_model_find_tensor(m, "blocks.0.attn.qkv.weight"), &ti),
                     BA_OK);
    ba_real *p = ba_model_params(m) + ti.offset;
    for (size_t i = 0; i < ti.size; i++)
        p[i] = (ba_real)(p[i] * scale);
    return m;
}

static void make_batch(int B, int T, uint64_t seed, int *in, int *tg)
{
    ba_rng r;
    ba_rng_seed(&r, seed);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            in[b * T + i] = (int)ba_rng_below(&r, 2);
            tg[b * T + i] = i > 0 ? (int)ba_rng_below(&r, (uint64_t)i) : -1;
        }
}

/* (a) attention weights converge as 1/sqrt(S). Measured max|a - exact| *
 * sqrt(S) (boltzmann, T = 8, B = 4, 2 heads, 288 weights, exact weights up
 * to 0.34 away from uniform) over 7 sampler seeds: 0.49 to 0.98 at each of
 * S = 64, 1024, 16384; band (0.25, 1.6), and the ratio of the errors at 64
 * and 16384 (16 expected) within (6, 40). */
static void test_weights_converge(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    enum { B = 4, T = 8, H = 2 };
    int in[B * T], tg[B * T];
    make_batch(B, T, 9, in, tg);
    ba_model *m = make_model(BA_ATTN_BOLTZMANN, T, 4, 10);
    size_t na = (size_t)B * H * T * T;
    double *ex = malloc(sizeof(double) * na);
    assert_int_equal(ba_model_forward(m, in, tg, B, T, NULL, err), BA_OK);
    const ba_real *a = ba_model_attention(m, 0);
    double spread = 0;
    for (size_t i = 0; i < na; i++) {
        ex[i] = a[i];
        /* the exact weights are far from uniform, so the test is not trivial */
        int row = (int)((i / T) % T);
        spread = fmax(spread, fabs(a[i] - (i % T <= (size_t)row ? 1.0 / (row + 1) : 0.0)));
    }
    assert_true(spread > 0.1);
    const int shots[] = {64, 1024, 16384};
    double e[3];
    for (int k = 0; k < 3; k++) {
        ba_sampler sp = direct(shots[k]);
        assert_int_equal(ba_model_set_sampler(m, &sp, err), BA_OK);
        ba_rng_seed(ba_model_sampler_rng(m), 100 + k);
        assert_int_equal(ba_model_forward(m, in, tg, B, T, NULL, err), BA_OK);
        a = ba_model_attention(m, 0);
        e[k] = 0;
        for (size_t i = 0; i < na; i++) {
            e[k] = fmax(e[k], fabs(a[i] - ex[i]));
            int row = (int)((i / T) % T);
            if (i % T > (size_t)row)
                assert_true(a[i] == 0);
        }
        print_message("S = %5d: max |a - exact| = %.4g, times sqrt(S) = %.3f\n", shots[k], e[k],
                      e[k] * sqrt(shots[k]));
        assert_true(e[k] * sqrt(shots[k]) > 0.25 && e[k] * sqrt(shots[k]) < 1.6);
    }
    assert_true(e[0] / e[2] > 6 && e[0] / e[2] < 40); /* 16 expected */
    free(ex);
    ba_model_free(m);
}

/* Flattened gradients of one forward/backward. */
static void model_grads(ba_model *m, const int *in, const int *tg, int B, int T, double *out)
{
    char err[BA_ERR_LEN];
    if (ba_model_forward(m, in, tg, B, T, NULL, err))
        fail_msg("forward: %s", err);
    ba_model_zero_grad(m);
    if (ba_model_backward(m, err))
        fail_msg("backward: %s", err);
    const ba_real *g = ba_model_grads(m);
    for (size_t i = 0; i < ba_model_num_params(m); i++)
        out[i] = g[i];
}

static double rel_err(const double *a, const double *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++)
        d += (a[i] - b[i]) * (a[i] - b[i]), s += b[i] * b[i];
    return sqrt(d / s);
}

/* The model's sampled gradient (all parameters) against the exact one:
 * the layers apply the estimator consistently (a wrong factor, e.g. the
 * 1/2 of dw/dm twice, would leave an error of tens of % at any S).
 * Measured relative L2 errors (boltzmann; coupling): S = 64: 0.019; 0.026,
 * S = 65536: 0.00077; 0.00064 (the 1/sqrt(S) ratio would be 32). Fields of
 * a few units: with much larger ones many marginals fall below 1/S, where
 * the count estimator cannot resolve them (docs/internals.md). */
static void test_model_gradient(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    enum { B = 4, T = 6 };
    int in[B * T], tg[B * T];
    make_batch(B, T, 11, in, tg);
    ba_attn attns[] = {BA_ATTN_BOLTZMANN, BA_ATTN_COUPLING};
    for (int a = 0; a < 2; a++) {
        ba_model *m = make_model(attns[a], T, 6 + a, 5);
        size_t P = ba_model_num_params(m);
        double *ex = malloc(sizeof(double) * P), *sg = malloc(sizeof(double) * P);
        model_grads(m, in, tg, B, T, ex);
        double e[2];
        const int shots[] = {64, 65536};
        for (int k = 0; k < 2; k++) {
            ba_sampler sp = direct(shots[k]);
            assert_int_equal(ba_model_set_sampler(m, &sp, err), BA_OK);
            model_grads(m, in, tg, B, T, sg);
            e[k] = rel_err(sg, ex, P);
            print_message("%s S = %5d: relative error of the gradient %.3g\n",
                          ba_attn_name(attns[a]), shots[k], e[k]);
        }
        assert_true(e[1] < 0.005);
        assert_true(e[0] > 5 * e[1]);
        /* back to exact: the exact gradient again, bit for bit */
        ba_sampler exs = ba_sampler_default(BA_SAMPLER_EXACT);
        assert_int_equal(ba_model_set_sampler(m, &exs, err), BA_OK);
        model_grads(m, in, tg, B, T, sg);
        assert_memory_equal(sg, ex, sizeof(double) * P);
        free(ex), free(sg);
        ba_model_free(m);
    }
}

/* -------------------------------------------------------- determinism */

static void set_threads(int n)
{
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

static void test_determinism(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    /* engine level: 1 and 2 threads, large enough to run threaded */
    int B = 16, T = 12, S = 512;
    system_t sys = make_system(B, T, 8, 1.0, 0.4);
    size_t btt = (size_t)B * T * T, tt = (size_t)T * T;
    ba_sampler sp = direct(S);
    double *lw[2], *dh[2], *dJ[2];
    for (int t = 0; t < 2; t++) {
        set_threads(t + 1);
        ba_sample_ctx *c = ba_sample_ctx_new();
        lw[t] = malloc(sizeof(double) * btt);
        dh[t] = calloc(btt, sizeof(double)), dJ[t] = calloc(tt, sizeof(double));
        assert_int_equal(ba_sampled_forward(c, &sp, 42, 0, B, T, sys.h, sys.J, T, lw[t], err), BA_OK);
        assert_int_equal(ba_sampled_backward(c, &sp, B, T, sys.g, dh[t], dJ[t], T, err), BA_OK);
        ba_sample_ctx_free(c);
    }
    set_threads(2);
    assert_memory_equal(lw[0], lw[1], sizeof(double) * btt);
    assert_memory_equal(dh[0], dh[1], sizeof(double) * btt);
    assert_memory_equal(dJ[0], dJ[1], sizeof(double) * tt);
    for (int t = 0; t < 2; t++)
        free(lw[t]), free(dh[t]), free(dJ[t]);
    free_system(&sys);

    /* model level: the same sampler seed gives the same gradients, another
     * seed other ones */
    enum { MB = 4, MT = 6 };
    int in[MB * MT], tg[MB * MT];
    make_batch(MB, MT, 12, in, tg);
    ba_model *m = make_model(BA_ATTN_BOLTZMANN, MT, 13, 5);
    ba_sampler s64 = direct(64);
    assert_int_equal(ba_model_set_sampler(m, &s64, err), BA_OK);
    size_t P = ba_model_num_params(m);
    double *g[3];
    for (int k = 0; k < 3; k++) {
        g[k] = malloc(sizeof(double) * P);
        ba_rng_seed(ba_model_sampler_rng(m), k == 2 ? 8 : 7);
        model_grads(m, in, tg, MB, MT, g[k]);
    }
    assert_memory_equal(g[0], g[1], sizeof(double) * P);
    assert_true(rel_err(g[0], g[2], P) > 1e-3);
    /* each forward advances the stream by one draw per head */
    ba_rng r, *mr = ba_model_sampler_rng(m);
    ba_rng_seed(&r, 7);
    ba_rng_seed(mr, 7);
    model_grads(m, in, tg, MB, MT, g[0]);
    ba_rng_u64(&r), ba_rng_u64(&r); /* 1 layer x 2 heads */
    assert_memory_equal(&r, mr, sizeof r);
    for (int k = 0; k < 3; k++)
        free(g[k]);
    ba_model_free(m);
}

/* ------------------------------------------------- config and eval */

static void test_config(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_config c = ba_config_default(BA_ATTN_BOLTZMANN, 8);
    c.vocab_size = 2, c.out_size = 8;
    assert_int_equal(c.sampler.kind, BA_SAMPLER_EXACT);
    assert_int_equal(ba_config_validate(&c, err), BA_OK);
    c.sampler = direct(64);
    assert_int_equal(ba_config_validate(&c, err), BA_OK);
    c.sampler.shots = 0;
    assert_int_equal(ba_config_validate(&c, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "shots = 0"));
    c.sampler = direct(64);
    c.attn = BA_ATTN_SOFTMAX;
    assert_int_equal(ba_config_validate(&c, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "boltzmann and coupling attention only"));
    /* limits: the sampler's, not the engine's */
    c.attn = BA_ATTN_COUPLING;
    c.block_size = c.out_size = 40;
    assert_int_equal(ba_config_validate(&c, err), BA_ERR_LIMIT);
    assert_non_null(strstr(err, "direct sampler, which accepts T <= 24"));
    c.sampler = ba_sampler_default(BA_SAMPLER_GIBBS);
    assert_int_equal(ba_config_validate(&c, err), BA_OK);
    c.block_size = c.out_size = 64;
    assert_int_equal(ba_config_validate(&c, err), BA_OK);
    c.block_size = c.out_size = 65;
    assert_int_equal(ba_config_validate(&c, err), BA_ERR_LIMIT);
    c.sampler = ba_sampler_default(BA_SAMPLER_EXACT);
    c.block_size = c.out_size = 27;
    assert_int_equal(ba_config_validate(&c, err), BA_ERR_LIMIT);
    assert_non_null(strstr(err, "go to T = 26")); /* auto: names the band */
    assert_non_null(strstr(err, "--band W"));
    c.engine = BA_ENGINE_FAST;
    assert_int_equal(ba_config_validate(&c, err), BA_ERR_LIMIT);
    assert_non_null(strstr(err, "accepts T <= 26"));
    c.engine = BA_ENGINE_AUTO;

    /* set_sampler: validated, the model unchanged on failure */
    c.sampler = ba_sampler_default(BA_SAMPLER_GIBBS);
    c.block_size = c.out_size = 40;
    ba_model *m;
    assert_int_equal(ba_model_init(&m, &c, err), BA_OK);
    ba_sampler ex = ba_sampler_default(BA_SAMPLER_EXACT);
    assert_int_equal(ba_model_set_sampler(m, &ex, err), BA_ERR_LIMIT);
    ba_sampler bad = direct(64);
    bad.beta_assumed = -1;
    assert_int_equal(ba_model_set_sampler(m, &bad, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "beta_assumed"));
    assert_int_equal(ba_model_config(m)->sampler.kind, BA_SAMPLER_GIBBS);
    assert_int_equal(ba_model_set_sampler(m, NULL, err), BA_ERR_ARG);
    ba_model_free(m);
}

static void test_set_sampler_invalidates_backward(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    enum { B = 2, T = 6 };
    int in[B * T], tg[B * T];
    make_batch(B, T, 14, in, tg);
    ba_model *m = make_model(BA_ATTN_BOLTZMANN, T, 15, 5);
    assert_int_equal(ba_model_forward(m, in, tg, B, T, NULL, err), BA_OK);
    ba_sampler sp = direct(16);
    assert_int_equal(ba_model_set_sampler(m, &sp, err), BA_OK);
    assert_int_equal(ba_model_backward(m, err), BA_ERR_ARG);
    assert_int_equal(ba_model_config(m)->sampler.shots, 16);
    ba_model_free(m);
}

static void test_evaluate_reproducible(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    assert_int_equal(ba_dataset_brackets(&d, 6, 1, 40, 3, err), BA_OK);
    ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, 6);
    ba_config_set_data(&cfg, d);
    cfg.n_embd = 16;
    cfg.sampler = direct(8); /* few shots: noisy, so a changed stream shows */
    ba_model *m;
    assert_int_equal(ba_model_init(&m, &cfg, err), BA_OK);
    ba_rng r;
    ba_rng_seed(&r, 1);
    ba_model_init_weights(m, &r, 1.0);
    ba_rng_seed(ba_model_sampler_rng(m), 99);
    ba_rng before = *ba_model_sampler_rng(m);
    ba_eval_result e1, e2, e3;
    assert_int_equal(ba_evaluate(m, d, 0, 7, &e1, err), BA_OK);
    assert_memory_equal(&before, ba_model_sampler_rng(m), sizeof before);
    ba_rng_seed(ba_model_sampler_rng(m), 12345);
    assert_int_equal(ba_evaluate(m, d, 0, 7, &e2, err), BA_OK);
    assert_true(e1.loss == e2.loss && e1.accuracy == e2.accuracy);
    /* and it is not the exact number */
    ba_sampler ex = ba_sampler_default(BA_SAMPLER_EXACT);
    assert_int_equal(ba_model_set_sampler(m, &ex, err), BA_OK);
    assert_int_equal(ba_evaluate(m, d, 0, 7, &e3, err), BA_OK);
    assert_true(e3.loss != e1.loss);
    assert_true(fabs(e3.loss - e1.loss) < 0.2 * e3.loss);
    ba_model_free(m);
    ba_dataset_free(d);
}

/* ba_sampler_measure against the pieces it is made of: for dqa the exact
 * |psi|^2 (so the figures equal a by-hand computation), for a shot sampler
 * the histogram of its draws (gibbs at 65536 shots is within shot noise of
 * the target). Bad arguments are refused. */
static void test_sampler_measure(void **state)
{
    (void)state;
    enum { n = 6 };
    ba_rng r;
    ba_rng_seed(&r, 2024);
    double h[n], J[n * n] = {0};
    for (int j = 0; j < n; j++) {
        h[j] = ba_rng_normal(&r);
        for (int k = j + 1; k < n; k++)
            J[j * n + k] = 0.3 * ba_rng_normal(&r);
    }
    char err[BA_ERR_LEN];
    ba_sampler dqa = ba_sampler_default(BA_SAMPLER_DQA);
    ba_sampler_quality q;
    assert_int_equal(ba_sampler_measure(&dqa, n, h, J, n, 0, &r, &q, err), BA_OK);
    double p[1 << n], d[1 << n], pe[1 << n], beta, r2;
    assert_int_equal(ba_boltzmann_distribution(n, h, J, n, 1.0, p, err), BA_OK);
    assert_int_equal(ba_dqa_distribution(&dqa, n, h, J, n, d, err), BA_OK);
    assert_int_equal(ba_fit_beta(n, h, J, n, d, &beta, &r2, err), BA_OK);
    assert_int_equal(ba_boltzmann_distribution(n, h, J, n, beta, pe, err), BA_OK);
    assert_true(q.tv == ba_tv_distance(d, p, 1 << n));
    assert_true(q.kl == ba_kl_divergence(d, p, 1 << n));
    assert_true(q.beta_eff == beta && q.r2 == r2);
    assert_true(q.tv_eff == ba_tv_distance(d, pe, 1 << n));
    assert_true(q.beta_eff > 0 && q.beta_eff < 1 && q.tv > q.tv_eff);
    ba_sampler gibbs = ba_sampler_default(BA_SAMPLER_GIBBS);
    assert_int_equal(ba_sampler_measure(&gibbs, n, h, J, n, 65536, &r, &q, err), BA_OK);
    /* shot noise of the TV over 64 states at 65536 shots is below
     * 0.5 sqrt(2 * 64 / (pi * 65536)) = 0.013 */
    assert_true(q.tv < 0.03);
    assert_true(fabs(q.beta_eff - 1.0) < 0.1);
    /* fields of +50 freeze every shot into the all-up state: one energy,
     * no temperature to fit, which is reported as NAN, not as an error */
    double hot[n];
    for (int j = 0; j < n; j++)
        hot[j] = 50.0;
    assert_int_equal(ba_sampler_measure(&gibbs, n, hot, J, n, 1024, &r, &q, err), BA_OK);
    assert_true(isnan(q.beta_eff) && isnan(q.r2) && isnan(q.tv_eff));
    assert_true(q.tv < 1e-9); /* the exact distribution is that state too */
    ba_sampler exact = ba_sampler_default(BA_SAMPLER_EXACT);
    assert_int_equal(ba_sampler_measure(&exact, n, h, J, n, 64, &r, &q, err), BA_ERR_ARG);
    assert_int_equal(ba_sampler_measure(&gibbs, 25, h, J, n, 64, &r, &q, err), BA_ERR_LIMIT);
    assert_int_equal(ba_sampler_measure(&gibbs, n, h, J, n, 0, &r, &q, err), BA_ERR_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_estimator),
        cmocka_unit_test(test_backward_twin),
        cmocka_unit_test(test_gradient_unbiased),
        cmocka_unit_test(test_weights_converge),
        cmocka_unit_test(test_model_gradient),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_set_sampler_invalidates_backward),
        cmocka_unit_test(test_evaluate_reproducible),
        cmocka_unit_test(test_sampler_measure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
