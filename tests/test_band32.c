/* Tests of the band engine's float linear path (src/ising/band_lin32.c,
 * issue 42 item 4) and of its guard and selection (BA_BAND_AUTO32, the
 * engine rows' f32, the model config's band_f32).
 *
 * Expected values: the double linear path (its twin: the same template in
 * double), the log path (the double oracle of test_band.c) and, for short
 * queries, the reference engine (full enumeration).
 *
 * Tolerances. Float rounds each operation to eps = 2^-24 = 6e-8 relative.
 * A query of n spins runs n rescaled steps; each step's entries are sums
 * of products of the previous step's, so their relative error grows by a
 * few eps a step: after n steps alpha and beta, and the partition sums Z1,
 * Z formed from them, are within about c n eps relative (c a small
 * constant; as a random walk it is nearer sqrt(n) eps). Hence, with
 * n = T (the longest query of a call):
 *   logw  |expm1(logw32 - logw64)| < LOGW_C * T * eps: log(Z1 / Z) errs by
 *         the two sums' relative errors;
 *   dh    |dh32 - dh64| < GRAD_C * T * eps * (1 + max |dh64|) per array:
 *         Cov(G, s_t) is a difference of sums of alpha beta D, each within
 *         c n eps relative, and of the size of the largest |G| a window
 *         sees, which max |dh| stands for (the scaling of test_band.c);
 *   dJ    the same bound per array: each entry sums one pair term per
 *         query in double (djb stays double), each term within c n eps
 *         of its scale.
 * LOGW_C = GRAD_C = 4: the worst seen, printed, is below 1/10 of the bound
 * at every T here. Out of the float guard's range, and for the selection
 * with the setting off: bit for bit with the double path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

#define EPS32 ((double)FLT_EPSILON / 2.0) /* float's unit roundoff, 2^-24 */
#define LOGW_C 4.0
#define GRAD_C 4.0

static double *alloc_d(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    assert_non_null(p);
    return p;
}

/* Worst |expm1(a - b)| over the visible entries (j <= i) of B T queries. */
static double logw_err(int B, int T, const double *a, const double *b)
{
    double worst = 0.0;
    for (size_t q = 0; q < (size_t)B * T; q++)
        for (int j = 0; j <= (int)(q % T); j++) {
            double e = fabs(expm1(a[q * T + j] - b[q * T + j]));
            worst = e > worst || isnan(e) ? e : worst; /* a NaN sticks */
        }
    return worst;
}

/* Worst |a - b| / (1 + max |b|) over n entries. */
static double scaled_err(const double *a, const double *b, size_t n)
{
    double mb = 0.0, d = 0.0;
    for (size_t i = 0; i < n; i++) {
        mb = fmax(mb, fabs(b[i]));
        d = fabs(a[i] - b[i]) > d || isnan(a[i]) ? fabs(a[i] - b[i]) : d;
    }
    return d / (1.0 + mb);
}

/* One call's inputs and, per path, its outputs. */
typedef struct {
    int B, T, W;
    double *h, *Jb, *g;     // (B,T,T), (T,W), (B,T,T)
    double *lw, *dh, *dJb;  // (B,T,T), (B,T,T), (T,W)
} band_run;

static band_run run_new(ba_rng *r, int B, int T, int W, double hs, double js)
{
    band_run c = {B, T, W, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t n = (size_t)B * T * T;
    c.h = alloc_d(n), c.g = alloc_d(n), c.Jb = alloc_d((size_t)T * W);
    for (size_t i = 0; i < n; i++)
        c.h[i] = hs * ba_rng_normal(r), c.g[i] = ba_rng_normal(r);
    for (size_t i = 0; i < (size_t)T * W; i++)
        c.Jb[i] = js * ba_rng_normal(r);
    return c;
}

/* Runs path p on c's inputs into fresh outputs (stats may be NULL). */
static band_run run_path(const band_run *c, ba_band_path p, ba_band_stats *st)
{
    band_run o = *c;
    size_t n = (size_t)c->B * c->T * c->T;
    o.lw = alloc_d(n), o.dh = alloc_d(n), o.dJb = alloc_d((size_t)c->T * c->W);
    char err[256] = "";
    ba_band_stats s2;
    assert_int_equal(ba_band_forward_path(p, c->W, c->B, c->T, c->h, c->Jb, o.lw, st, err), BA_OK);
    assert_int_equal(
        ba_band_backward_path(p, c->W, c->B, c->T, c->h, c->Jb, c->g, o.dh, o.dJb, &s2, err),
        BA_OK);
    if (st)
        assert_int_equal(st->linear32, s2.linear32);
    return o;
}

static void out_free(band_run *o)
{
    free(o->lw), free(o->dh), free(o->dJb);
}

static void run_free(band_run *c)
{
    free(c->h), free(c->g), free(c->Jb);
}

static int same_bits(const band_run *a, const band_run *b)
{
    size_t n = (size_t)a->B * a->T * a->T;
    return !memcmp(a->lw, b->lw, n * sizeof(double)) && !memcmp(a->dh, b->dh, n * sizeof(double)) &&
           !memcmp(a->dJb, b->dJb, (size_t)a->T * a->W * sizeof(double));
}

/* Float against the double linear path and the log path on inputs inside
 * the float guard (every query routed to float by AUTO32: checked). */
static void f32_case(ba_rng *r, int B, int T, int W, double hs, double js, double worst[3])
{
    band_run c = run_new(r, B, T, W, hs, js);
    ba_band_stats st;
    band_run f = run_path(&c, BA_BAND_AUTO32, &st);
    assert_int_equal(st.linear32, (long)B * T); /* all inside float's bound */
    /* the log path (the slow oracle) at T <= 300; test_band.c holds the
     * double linear path to it at T = 1024 and 4096 to 1e-10 */
    band_run d = run_path(&c, BA_BAND_LINEAR, NULL);
    band_run l = T <= 300 ? run_path(&c, BA_BAND_LOG, NULL) : d;
    band_run forced = run_path(&c, BA_BAND_LINEAR32, NULL);
    assert_true(same_bits(&f, &forced));
    size_t n = (size_t)B * T * T, nj = (size_t)T * W;
    double tl = LOGW_C * T * EPS32, tg = GRAD_C * T * EPS32;
    const band_run *ref[2] = {&d, &l};
    for (int k = 0; k < (T <= 300 ? 2 : 1); k++) {
        double e[3] = {logw_err(B, T, f.lw, ref[k]->lw), scaled_err(f.dh, ref[k]->dh, n),
                       scaled_err(f.dJb, ref[k]->dJb, nj)};
        if (e[0] > tl || e[1] > tg || e[2] > tg)
            printf("  W=%d T=%d vs %s: logw %.2e (tol %.2e) dh %.2e dJ %.2e (tol %.2e)\n", W,
                   T, k ? "log" : "double", e[0], tl, e[1], e[2], tg);
        assert_true(e[0] <= tl);
        assert_true(e[1] <= tg);
        assert_true(e[2] <= tg);
        for (int i = 0; i < 3; i++)
            worst[i] = fmax(worst[i], e[i] / (i ? tg : tl));
    }
    if (T <= 300)
        out_free(&l);
    out_free(&f), out_free(&d), out_free(&forced);
    run_free(&c);
}

static void test_f32_against_double(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 4201);
    double worst[3] = {0, 0, 0};
    /* W, T, B; sizes chosen inside float's bound (about 59 nats at W = 8,
     * 53 at W = 12): wider bands get weaker couplings */
    const int cases[][3] = {{1, 5, 3}, {1, 1024, 1}, {2, 17, 2}, {2, 1024, 1}, {3, 64, 2},
                            {8, 9, 2},  {8, 100, 2}, {8, 1024, 1}, {12, 13, 1}, {12, 200, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int W = cases[i][0], T = cases[i][1], B = cases[i][2];
        double js = W <= 2 ? 0.5 : W <= 8 ? 0.12 : 0.06;
        f32_case(&r, B, T, W, 0.4, js, worst);
    }
    printf("  worst / tolerance: logw %.3f dh %.3f dJ %.3f\n", worst[0], worst[1], worst[2]);
}

/* Short queries against the reference engine (enumeration) through the
 * engine table, dense layout, rows.f32 set: the same tolerances. */
static void test_f32_against_reference(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 4202);
    const ba_engine_ops *band = ba_engine_ops_of(BA_ENGINE_BAND),
                        *ref = ba_engine_ops_of(BA_ENGINE_REFERENCE);
    assert_non_null(band);
    assert_non_null(ref);
    for (int W = 1; W <= 8; W += 7) {
        int B = 2, T = 12;
        size_t n = (size_t)B * T * T;
        double *h = alloc_d(n), *g = alloc_d(n), *J = alloc_d((size_t)T * T);
        double *lw[2] = {alloc_d(n), alloc_d(n)}, *dh[2] = {alloc_d(n), alloc_d(n)},
               *dJ[2] = {alloc_d((size_t)T * T), alloc_d((size_t)T * T)};
        for (size_t i = 0; i < n; i++)
            h[i] = 0.5 * ba_rng_normal(&r), g[i] = ba_rng_normal(&r);
        for (int j = 0; j < T; j++)
            for (int k = j + 1; k < T; k++)
                J[(size_t)j * T + k] = k - j <= W ? 0.2 * ba_rng_normal(&r) : 0.0;
        char err[256] = "";
        for (int e = 0; e < 2; e++) {
            ba_engine_rows rows = {B, T, h, J, T, 0, W, NULL, NULL, NULL, T - 1, NULL, NULL, !e};
            const ba_engine_ops *o = e ? ref : band;
            assert_int_equal(o->forward(&rows, lw[e], err), BA_OK);
            assert_int_equal(o->backward(&rows, g, dh[e], dJ[e], err), BA_OK);
        }
        double tl = LOGW_C * T * EPS32, tg = GRAD_C * T * EPS32;
        assert_true(logw_err(B, T, lw[0], lw[1]) <= tl);
        assert_true(scaled_err(dh[0], dh[1], n) <= tg);
        /* in-band entries only: the band engine writes no others */
        for (int j = 0; j < T; j++)
            for (int k = 0; k < T; k++)
                if (k <= j || k - j > W)
                    dJ[0][(size_t)j * T + k] = dJ[1][(size_t)j * T + k] = 0.0;
        assert_true(scaled_err(dJ[0], dJ[1], (size_t)T * T) <= tg);
        /* and it did run in float: not the double path's bits */
        double *lw64 = alloc_d(n);
        ba_engine_rows rows = {B, T, h, J, T, 0, W, NULL, NULL, NULL, T - 1, NULL, NULL, 0};
        assert_int_equal(band->forward(&rows, lw64, err), BA_OK);
        assert_true(memcmp(lw64, lw[0], n * sizeof(double)) != 0);
        free(lw64);
        for (int e = 0; e < 2; e++)
            free(lw[e]), free(dh[e]), free(dJ[e]);
        free(h), free(g), free(J);
    }
}

/* The guard: queries past float's bound go to the double paths, bit for
 * bit what AUTO gives; those inside go to float. Batch element 0 has
 * small fields (inside), element 1 large ones (past float's ~59 nats,
 * inside double's 600), element 2 a field of 200 at one key (past both:
 * the log path). Nothing is inf or NaN. */
static void test_guard_routes_to_double(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 4203);
    int B = 3, T = 300, W = 8;
    band_run c = run_new(&r, B, T, W, 0.3, 0.1);
    size_t TT = (size_t)T * T;
    for (size_t i = TT; i < 2 * TT; i++) /* |h| >= 10: 3 |h_0| alone is past 59 - jbound */
        c.h[i] = copysign(10.0 + fabs(ba_rng_normal(&r)), ba_rng_normal(&r));
    for (size_t q = 0; q < (size_t)T; q++)
        c.h[2 * TT + q * T] = 200.0; /* key 0 of every query of element 2 */
    ba_band_stats s32, s64;
    band_run f = run_path(&c, BA_BAND_AUTO32, &s32), d = run_path(&c, BA_BAND_AUTO, &s64);
    assert_int_equal(s32.linear32, (long)T); /* element 0, all of it */
    assert_int_equal(s32.log, s64.log);
    assert_true(s64.log >= (long)T); /* element 2 */
    assert_int_equal(s32.linear + s32.linear32, s64.linear);
    /* past float's bound: elements 1 and 2 */
    size_t from = TT;
    assert_memory_equal(f.lw + from, d.lw + from, ((size_t)B * TT - from) * sizeof(double));
    assert_memory_equal(f.dh + from, d.dh + from, ((size_t)B * TT - from) * sizeof(double));
    for (size_t q = 0; q < (size_t)B * T; q++)
        for (int j = 0; j <= (int)(q % T); j++) {
            assert_true(isfinite(f.lw[q * T + j]) && isfinite(f.dh[q * T + j]));
        }
    for (size_t i = 0; i < (size_t)T * W; i++)
        assert_true(isfinite(f.dJb[i]));
    /* the routed float queries against double within the tolerances */
    double tl = LOGW_C * T * EPS32;
    assert_true(logw_err(1, T, f.lw, d.lw) <= tl);
    out_free(&f), out_free(&d);
    /* with couplings past float's bound no query takes float: bit for bit */
    for (size_t i = 0; i < (size_t)T * W; i++)
        c.Jb[i] = 0.2 + 0.5 * fabs(c.Jb[i]);
    f = run_path(&c, BA_BAND_AUTO32, &s32), d = run_path(&c, BA_BAND_AUTO, NULL);
    assert_int_equal(s32.linear32, 0);
    assert_true(same_bits(&f, &d));
    out_free(&f), out_free(&d);
    run_free(&c);
}

/* The bound itself: float's exponent range less the margins, per We. */
static void test_guard_bound(void **state)
{
    (void)state;
    assert_true(fabs(ba_band_lin32_max_nats(8) - 58.92) < 0.01);
    assert_true(fabs(ba_band_lin32_max_nats(12) - 53.38) < 0.01);
    for (int we = 1; we <= BA_BAND_MAX_W; we++) {
        double m = ba_band_lin32_max_nats(we);
        /* the smallest product 2^24 above float's smallest normal */
        assert_true(-m - (2.0 * we + 1) * log(2.0) >= log(FLT_MIN) + 24 * log(2.0) - 1e-9);
        assert_true(m < BA_BAND_LIN_MAX_NATS);
    }
}

/* Same inputs, 1 or 2 threads: bit for bit (the chunks and lanes depend on
 * the sizes alone), and two runs alike. */
static void test_f32_threads(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 4204);
    band_run c = run_new(&r, 3, 160, 8, 0.4, 0.1);
    omp_set_num_threads(1);
    band_run a = run_path(&c, BA_BAND_AUTO32, NULL);
    omp_set_num_threads(2);
    band_run b = run_path(&c, BA_BAND_AUTO32, NULL), b2 = run_path(&c, BA_BAND_AUTO32, NULL);
    assert_true(same_bits(&a, &b));
    assert_true(same_bits(&b, &b2));
    out_free(&a), out_free(&b), out_free(&b2);
    run_free(&c);
}

/* The model setting: band_f32 through the config JSON both ways, a file
 * without the key reading as double, and the check's refusals. */
static void test_config_setting(void **state)
{
    (void)state;
    char err[512] = "";
    ba_config c = ba_config_default(BA_ATTN_BOLTZMANN, 64);
    c.vocab_size = c.out_size = 65;
    c.engine = BA_ENGINE_BAND;
    c.couplings = BA_COUPLINGS_RELATIVE;
    c.band = 8;
    c.band_f32 = 1;
    assert_int_equal(ba_config_validate(&c, err), BA_OK);
    char *js = ba_config_to_json(&c, NULL);
    assert_non_null(js);
    assert_non_null(strstr(js, "\"band_precision\""));
    ba_config back;
    assert_int_equal(ba_config_from_json(js, &back, NULL, err), BA_OK);
    assert_int_equal(back.band_f32, 1);
    free(js);
    /* default double: the key is not written, and its absence reads as 0 */
    c.band_f32 = 0;
    js = ba_config_to_json(&c, NULL);
    assert_non_null(js);
    assert_null(strstr(js, "band_precision"));
    back.band_f32 = 7;
    assert_int_equal(ba_config_from_json(js, &back, NULL, err), BA_OK);
    assert_int_equal(back.band_f32, 0);
    free(js);
    /* float where no band engine runs: refused, naming the setting */
    c.band_f32 = 1;
    c.engine = BA_ENGINE_FAST;
    c.band = 0;
    c.block_size = 12;
    assert_int_equal(ba_config_validate(&c, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "band_precision"));
    assert_non_null(strstr(err, "fast"));
    c.attn = BA_ATTN_SOFTMAX;
    c.engine = BA_ENGINE_AUTO;
    c.couplings = BA_COUPLINGS_ABSOLUTE;
    assert_int_equal(ba_config_validate(&c, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "band_precision"));
    /* a file asking for another precision is malformed, named */
    c.attn = BA_ATTN_BOLTZMANN;
    c.engine = BA_ENGINE_BAND;
    c.band = 8;
    c.couplings = BA_COUPLINGS_RELATIVE;
    c.block_size = 64;
    js = ba_config_to_json(&c, NULL);
    assert_non_null(js);
    char *at = strstr(js, "\"float\"");
    assert_non_null(at);
    memcpy(at, "\"half\" ", 7);
    assert_int_equal(ba_config_from_json(js, &back, NULL, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "band_precision"));
    free(js);
    /* a float model switched to another engine or a sampler drops the
     * setting (it belongs to the band engine) instead of being refused */
    c.block_size = 12;
    c.band_f32 = 1;
    ba_model *m = NULL;
    assert_int_equal(ba_model_init(&m, &c, err), BA_OK);
    assert_int_equal(ba_model_config(m)->band_f32, 1);
    assert_int_equal(ba_model_set_engine(m, BA_ENGINE_FAST, NULL, 0, err), BA_OK);
    assert_int_equal(ba_model_config(m)->band_f32, 0);
    ba_model_free(m);
    m = NULL;
    assert_int_equal(ba_model_init(&m, &c, err), BA_OK);
    ba_sampler gibbs = ba_sampler_default(BA_SAMPLER_GIBBS);
    assert_int_equal(ba_model_set_sampler(m, &gibbs, err), BA_OK);
    assert_int_equal(ba_model_config(m)->band_f32, 0);
    ba_model_free(m);
}

/* ba_model_set_band_precision: both ways on a band model (the loss of one
 * batch in float within float's rounding of double's, and double again
 * bit for bit), refused with the model unchanged where no band engine
 * runs or the value is not 0 or 1. */
static void test_set_band_precision(void **state)
{
    (void)state;
    char err[512] = "";
    ba_config c = ba_config_default(BA_ATTN_BOLTZMANN, 24);
    c.vocab_size = c.out_size = 11;
    c.n_layer = 1, c.n_head = 2, c.n_embd = 8;
    c.couplings = BA_COUPLINGS_RELATIVE;
    c.band = 4;
    ba_model *m = NULL;
    assert_int_equal(ba_model_init(&m, &c, err), BA_OK);
    ba_rng rng;
    ba_rng_seed(&rng, 5);
    ba_model_init_weights(m, &rng, 0.1);
    int in[2 * 24], tg[2 * 24];
    for (int i = 0; i < 2 * 24; i++)
        in[i] = (int)ba_rng_below(&rng, 11), tg[i] = (int)ba_rng_below(&rng, 11);
    double l64, l32, l64b;
    assert_int_equal(ba_model_forward(m, in, tg, 2, 24, &l64, err), BA_OK);
    assert_int_equal(ba_model_set_band_precision(m, 1, err), BA_OK);
    assert_int_equal(ba_model_config(m)->band_f32, 1);
    assert_int_equal(ba_model_forward(m, in, tg, 2, 24, &l32, err), BA_OK);
    /* float's rounding of the window term (4 T 2^-24 relative, the bound
     * test_f32_against_double holds the engine to), through one layer */
    assert_true(fabs(l32 - l64) <= 4.0 * 24 * 0x1p-24 * l64);
    assert_true(l32 != l64); /* the float term ran: these inputs are inside its guard */
    assert_int_equal(ba_model_set_band_precision(m, 0, err), BA_OK);
    assert_int_equal(ba_model_forward(m, in, tg, 2, 24, &l64b, err), BA_OK);
    assert_true(l64b == l64);
    assert_int_equal(ba_model_set_band_precision(m, 2, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "band_f32 = 2"));
    assert_int_equal(ba_model_config(m)->band_f32, 0);
    /* another engine: float refused, the model as it was */
    assert_int_equal(ba_model_set_engine(m, BA_ENGINE_MF, NULL, 0, err), BA_OK);
    err[0] = '\0';
    assert_int_equal(ba_model_set_band_precision(m, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "band_precision"));
    assert_int_equal(ba_model_config(m)->band_f32, 0);
    assert_int_equal(ba_model_config(m)->engine, BA_ENGINE_MF);
    ba_model_free(m);
    /* softmax: no band engine at all */
    c = ba_config_default(BA_ATTN_SOFTMAX, 24);
    c.vocab_size = c.out_size = 11;
    c.n_layer = 1, c.n_head = 2, c.n_embd = 8;
    assert_int_equal(ba_model_init(&m, &c, err), BA_OK);
    assert_int_equal(ba_model_set_band_precision(m, 1, err), BA_ERR_ARG);
    assert_int_equal(ba_model_config(m)->band_f32, 0);
    assert_int_equal(ba_model_set_band_precision(m, 0, err), BA_OK);
    assert_int_equal(ba_model_set_band_precision(NULL, 0, err), BA_ERR_ARG);
    ba_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_against_double),
        cmocka_unit_test(test_f32_against_reference),
        cmocka_unit_test(test_guard_routes_to_double),
        cmocka_unit_test(test_guard_bound),
        cmocka_unit_test(test_f32_threads),
        cmocka_unit_test(test_config_setting),
        cmocka_unit_test(test_set_band_precision),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
