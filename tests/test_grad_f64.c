/* Gradient checks in double precision: every layer alone (linear,
 * layernorm, gelu, attention in each variant, cross-entropy) against
 * central finite differences; the whole model in each attention variant is
 * in test_grad_model_f64.c. Built against the double library (BA_DOUBLE),
 * so ba_real is double.
 *
 * Measure: per tensor, ||analytic - numeric||_2 / ||numeric||_2 < 1e-6
 * (both norms below 1e-11 counts as agreement on a zero gradient). */
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
#include "grad_fd.h"

static void fill_normal(ba_rng *r, double *x, size_t n, double std)
{
    for (size_t i = 0; i < n; i++)
        x[i] = std * ba_rng_normal(r);
}

/* A scalar loss over a layer's output: L = sum_i wts_i out_i. Its gradient
 * with respect to out is wts, which backward receives as dout. */
static double dotp(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* ------------------------------------------------------------- linear */

typedef struct {
    double *inp, *w, *b, *out, *wts;
    int N, IC, OC;
} lin_ctx;

static double lin_loss(void *p)
{
    lin_ctx *c = p;
    ba_linear_forward(c->out, c->inp, c->w, c->b, c->N, c->IC, c->OC);
    return dotp(c->out, c->wts, (size_t)c->N * c->OC);
}

static void test_linear(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 1);
    int N = 5, IC = 4, OC = 3;
    double inp[20], w[12], b[3], out[15], wts[15], din[20] = {0}, dw[12] = {0}, db[3] = {0};
    double nin[20], nw[12], nb[3];
    fill_normal(&r, inp, 20, 1), fill_normal(&r, w, 12, 1), fill_normal(&r, b, 3, 1);
    fill_normal(&r, wts, 15, 1);
    lin_ctx c = {inp, w, b, out, wts, N, IC, OC};
    lin_loss(&c);
    ba_linear_backward(din, dw, db, wts, inp, w, N, IC, OC);
    numeric_grad(lin_loss, &c, inp, 20, nin);
    numeric_grad(lin_loss, &c, w, 12, nw);
    numeric_grad(lin_loss, &c, b, 3, nb);
    expect_close("linear dinp", din, nin, 20);
    expect_close("linear dw", dw, nw, 12);
    expect_close("linear db", db, nb, 3);
}

/* ---------------------------------------------------------- layernorm */

typedef struct {
    double *inp, *w, *b, *out, *mean, *rstd, *wts;
    int N, C;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    ba_layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C);
    return dotp(c->out, c->wts, (size_t)c->N * c->C);
}

static void test_layernorm(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 2);
    enum { N = 4, C = 6 };
    double inp[N * C], w[C], b[C], out[N * C], mean[N], rstd[N], wts[N * C];
    double din[N * C] = {0}, dw[C] = {0}, db[C] = {0}, nin[N * C], nw[C], nb[C];
    fill_normal(&r, inp, N * C, 2), fill_normal(&r, w, C, 1), fill_normal(&r, b, C, 1);
    fill_normal(&r, wts, N * C, 1);
    ln_ctx c = {inp, w, b, out, mean, rstd, wts, N, C};
    ln_loss(&c);
    ba_layernorm_backward(din, dw, db, wts, inp, w, mean, rstd, N, C);
    numeric_grad(ln_loss, &c, inp, N * C, nin);
    numeric_grad(ln_loss, &c, w, C, nw);
    numeric_grad(ln_loss, &c, b, C, nb);
    expect_close("layernorm dinp", din, nin, N * C);
    expect_close("layernorm dw", dw, nw, C);
    expect_close("layernorm db", db, nb, C);
}

/* --------------------------------------------------------------- gelu */

typedef struct {
    double *inp, *out, *wts;
    size_t n;
} gelu_ctx;

static double gelu_loss(void *p)
{
    gelu_ctx *c = p;
    ba_gelu_forward(c->out, c->inp, c->n);
    return dotp(c->out, c->wts, c->n);
}

static void test_gelu(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 3);
    double inp[16], out[16], wts[16], din[16] = {0}, nin[16];
    fill_normal(&r, inp, 16, 2), fill_normal(&r, wts, 16, 1);
    gelu_ctx c = {inp, out, wts, 16};
    gelu_loss(&c);
    ba_gelu_backward(din, inp, wts, 16);
    numeric_grad(gelu_loss, &c, inp, 16, nin);
    expect_close("gelu dinp", din, nin, 16);
    /* a value check, not only a derivative check: gelu(1) (tanh form) */
    double one = 1.0, g1;
    ba_gelu_forward(&g1, &one, 1);
    assert_float_equal(g1, 0.8411919906082768, 1e-12);
}

/* ---------------------------------------------------------- attention */

typedef struct {
    ba_attn_shape s;
    double *qkv, *J, *out, *att, *pre, *wts;
} att_ctx;

static double att_loss(void *p)
{
    att_ctx *c = p;
    char err[BA_ERR_LEN];
    int rc = ba_attention_forward(&c->s, c->out, c->att, c->pre, c->qkv, c->J, err);
    if (rc)
        fail_msg("attention forward: %s", err);
    return dotp(c->out, c->wts, (size_t)c->s.B * c->s.T * c->s.C);
}

/* One attention variant: the engine and the couplings' form. */
typedef struct {
    ba_attn attn;
    ba_engine engine;
    ba_couplings couplings;
    int band, D;
    ba_field_bias bias;
    int window; /* the hybrid engine's */
    int alibi;  /* ALiBi's distance bias on the fields (issue 43) */
} att_variant;

static void check_attention_v(const att_variant *v, int T, int Tmax)
{
    ba_rng r;
    ba_rng_seed(&r, 10 + v->attn + 7 * v->band + 3 * v->couplings);
    int B = 2, C = 6, H = 2, rel = v->couplings == BA_COUPLINGS_RELATIVE;
    size_t nqkv = (size_t)B * T * 3 * C, natt = (size_t)B * H * T * T;
    size_t nJ = rel ? (size_t)H * v->D : (size_t)H * Tmax * Tmax;
    size_t nout = (size_t)B * T * C;
    double *qkv = malloc(sizeof(double) * nqkv), *J = calloc(nJ, sizeof(double));
    double *out = malloc(sizeof(double) * nout), *wts = malloc(sizeof(double) * nout);
    double *att = malloc(sizeof(double) * natt), *pre = malloc(sizeof(double) * natt);
    double *dqkv = calloc(nqkv, sizeof(double)), *dJ = calloc(nJ, sizeof(double));
    double *nq = malloc(sizeof(double) * nqkv), *nJg = calloc(nJ, sizeof(double));
    fill_normal(&r, qkv, nqkv, 1.0);
    /* mean field and its kin are made for weak couplings: at 0.7 tap's
     * correction would be as large as the fields */
    double js = ba_engine_is_approx(v->engine) ? 0.3 : 0.7;
    if (rel)
        fill_normal(&r, J, nJ, js);
    else /* every upper entry, in the band or not: beyond it must be ignored */
        for (int h = 0; h < H; h++)
            for (int j = 0; j < Tmax; j++)
                for (int k = j + 1; k < Tmax; k++)
                    J[((size_t)h * Tmax + j) * Tmax + k] = js * ba_rng_normal(&r);
    fill_normal(&r, wts, nout, 1.0);
    att_ctx c = {{v->attn, v->engine, B, T, C, H, Tmax, NULL, NULL, NULL, NULL, 0, v->couplings,
                  v->band, v->D, v->bias, {0, 0, 0}, 0, NULL, NULL, 0, 0, v->alibi},
                 qkv, J, out, att, pre, wts};
    ba_approx_stats st = {0, 0, 0, 0, 0};
    if (ba_engine_is_approx(v->engine))
        c.s.approx = TIGHT, c.s.window = v->window, c.s.astats = &st;
    att_loss(&c);
    /* rows of a sum to 1 and nothing leaks above the diagonal */
    for (size_t row = 0; row < (size_t)B * H * T; row++) {
        double s = 0.0;
        int i = (int)(row % T);
        for (int j = 0; j < T; j++) {
            if (j > i)
                assert_true(att[row * T + j] == 0.0);
            s += att[row * T + j];
        }
        assert_float_equal(s, 1.0, 1e-12);
    }
    char err[BA_ERR_LEN];
    assert_int_equal(ba_attention_backward(&c.s, dqkv, dJ, wts, qkv, J, att, pre, err), BA_OK);
    numeric_grad(att_loss, &c, qkv, nqkv, nq);
    char what[96];
    snprintf(what, sizeof what, "%s attention dqkv (T=%d, %s, band %d, %s%s)",
             ba_attn_name(v->attn), T, ba_couplings_name(v->couplings), v->band,
             ba_field_bias_name(v->bias), v->alibi ? ", alibi" : "");
    expect_close(what, dqkv, nq, nqkv);
    if (v->attn == BA_ATTN_COUPLING && v->bias == BA_FIELD_BIAS_NONE && !v->alibi) {
        /* At h = 0 the Ising distribution is symmetric under flipping every
         * spin, so every marginal is exactly 1/2 whatever J is: the weights
         * are uniform over the visible keys and J gets no gradient (a finite
         * difference would only see rounding noise). */
        for (size_t row = 0; row < (size_t)B * H * T; row++) {
            int i = (int)(row % T);
            for (int j = 0; j <= i; j++)
                assert_float_equal(att[row * T + j], 1.0 / (i + 1), 1e-12);
        }
        for (size_t i = 0; i < nJ; i++)
            assert_true(fabs(dJ[i]) < 1e-12);
    } else if (v->attn != BA_ATTN_SOFTMAX && v->attn != BA_ATTN_SIGMOID) {
        numeric_grad(att_loss, &c, J, nJ, nJg);
        /* entries that are not parameters (j >= k, k >= T, beyond the band)
         * must have zero gradient, which the finite differences show too */
        snprintf(what, sizeof what, "%s attention dJ (T=%d, %s, band %d, %s)",
                 ba_attn_name(v->attn), T, ba_couplings_name(v->couplings), v->band,
                 ba_field_bias_name(v->bias));
        expect_close(what, dJ, nJg, nJ);
        double used = 0.0;
        for (size_t i = 0; i < nJ; i++)
            used += fabs(dJ[i]);
        assert_true(used > 1e-6); /* the check above is not vacuous */
        if (!rel && v->band > 0)
            for (int h = 0; h < H; h++)
                for (int j = 0; j < Tmax; j++)
                    for (int k = j + v->band + 1; k < Tmax; k++)
                        assert_true(dJ[((size_t)h * Tmax + j) * Tmax + k] == 0.0);
    }
    if (ba_engine_is_approx(v->engine)) {
        /* every row converged: the finite differences saw a smooth map */
        assert_true(st.queries > 0);
        assert_int_equal(st.unconverged, 0);
        assert_int_equal(st.retried, 0);
    }
    free(qkv), free(J), free(out), free(wts), free(att), free(pre), free(dqkv), free(dJ);
    free(nq), free(nJg);
}

static void check_attention(ba_attn attn, int T, int Tmax)
{
    att_variant v = {attn, BA_ENGINE_REFERENCE, BA_COUPLINGS_ABSOLUTE, 0, 0, BA_FIELD_BIAS_NONE,
                     0, 0};
    check_attention_v(&v, T, Tmax);
}

static void test_attention_softmax(void **s) { (void)s; check_attention(BA_ATTN_SOFTMAX, 6, 6); }
static void test_attention_sigmoid(void **s) { (void)s; check_attention(BA_ATTN_SIGMOID, 6, 6); }
static void test_attention_boltzmann(void **s)
{
    (void)s;
    check_attention(BA_ATTN_BOLTZMANN, 6, 6);
    check_attention(BA_ATTN_BOLTZMANN, 5, 8); /* shorter than the block */
}
static void test_attention_coupling(void **s) { (void)s; check_attention(BA_ATTN_COUPLING, 6, 7); }

/* Short names for the variant tables below. */
#define R BA_ENGINE_REFERENCE
#define F BA_ENGINE_FAST
#define BD BA_ENGINE_BAND
#define A BA_COUPLINGS_ABSOLUTE
#define RL BA_COUPLINGS_RELATIVE
#define N0 BA_FIELD_BIAS_NONE
#define LN BA_FIELD_BIAS_LOG_N
#define BZ BA_ATTN_BOLTZMANN
#define CP BA_ATTN_COUPLING

/* Each variant of vs at T = 7 (absolute couplings: a block of 8, so that
 * the layer runs shorter than its block). */
static void check_attention_list(const att_variant *vs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        check_attention_v(&vs[i], 7, vs[i].couplings == RL ? 7 : 8);
}

/* The long-context forms (spec section 8): a band on absolute couplings,
 * relative couplings (with and without a band), the log-n field bias, on
 * the reference, fast and band engines. Finite differences of the whole
 * layer check the scatter of the engine's dJ into the parameters (a
 * relative distance sums its pairs; nothing beyond the band moves). */
static void test_attention_long_forms(void **s)
{
    (void)s;
    const att_variant vs[] = {
        {BA_ATTN_BOLTZMANN, R, A, 2, 0, N0, 0, 0},  {BA_ATTN_BOLTZMANN, BD, A, 2, 0, N0, 0, 0},
        {BA_ATTN_BOLTZMANN, F, A, 3, 0, N0, 0, 0},  {BA_ATTN_BOLTZMANN, R, RL, 0, 6, N0, 0, 0},
        {BA_ATTN_BOLTZMANN, BD, RL, 3, 3, N0, 0, 0}, {BA_ATTN_BOLTZMANN, BD, A, 0, 0, N0, 0, 0},
        {BA_ATTN_BOLTZMANN, BD, RL, 2, 2, LN, 0, 0}, {BA_ATTN_SIGMOID, R, A, 0, 0, LN, 0, 0},
        {BA_ATTN_COUPLING, BD, RL, 2, 2, LN, 0, 0},  {BA_ATTN_COUPLING, R, A, 3, 0, LN, 0, 0},
    };
    check_attention_list(vs, sizeof vs / sizeof vs[0]);
}

/* The approximate engines (spec section 8, "Mean-field family") through
 * the layer: mf, tap and bp on full-range, relative and banded couplings,
 * hybrid with windows 1 and 2 on full-range ones, the log-n bias and
 * coupling attention. The layer's gradient is the engines' implicit one
 * (exact for the approximate model), so finite differences of the layer's
 * forward hold it to the same 1e-6. */
static void test_attention_approx(void **s)
{
    (void)s;
    const att_variant vs[] = {
        {BZ, BA_ENGINE_MF, A, 0, 0, N0, 0, 0},     {BZ, BA_ENGINE_TAP, A, 0, 0, N0, 0, 0},
        {BZ, BA_ENGINE_BP, A, 0, 0, N0, 0, 0},     {BZ, BA_ENGINE_MF, RL, 0, 6, LN, 0, 0},
        {BZ, BA_ENGINE_TAP, RL, 2, 2, N0, 0, 0},   {BZ, BA_ENGINE_BP, A, 3, 0, LN, 0, 0},
        {BZ, BA_ENGINE_HYBRID, A, 0, 0, N0, 2, 0}, {BZ, BA_ENGINE_HYBRID, RL, 0, 6, LN, 1, 0},
        {CP, BA_ENGINE_MF, RL, 0, 6, LN, 0, 0},    {CP, BA_ENGINE_HYBRID, A, 0, 0, LN, 2, 0},
    };
    check_attention_list(vs, sizeof vs / sizeof vs[0]);
}

/* ALiBi (issue 43) through the layer: every variant, the Ising ones on
 * every engine of the table (reference, fast, band, mf, tap, bp, hybrid),
 * absolute and relative couplings, with and without the log-n bias. The
 * bias is a constant of the fields, so the gradients' form is unchanged;
 * what this checks is that the forward and every backward (the engines'
 * and the tiled kernels' recomputed fields) see the same biased fields.
 * Coupling attention gets fields from ALiBi alone, so its J now moves. */
static void test_attention_alibi(void **s)
{
    (void)s;
    const att_variant vs[] = {
        {BA_ATTN_SOFTMAX, R, A, 0, 0, N0, 0, 1}, {BA_ATTN_SIGMOID, R, A, 0, 0, N0, 0, 1},
        {BA_ATTN_SIGMOID, R, A, 0, 0, LN, 0, 1}, {BZ, R, A, 0, 0, N0, 0, 1},
        {BZ, F, A, 3, 0, LN, 0, 1},              {BZ, BD, RL, 2, 2, N0, 0, 1},
        {BZ, BD, A, 0, 0, LN, 0, 1},             {CP, R, A, 0, 0, N0, 0, 1},
        {CP, BD, RL, 2, 2, LN, 0, 1},            {BZ, BA_ENGINE_MF, RL, 0, 6, N0, 0, 1},
        {BZ, BA_ENGINE_TAP, A, 0, 0, LN, 0, 1},  {BZ, BA_ENGINE_BP, A, 3, 0, N0, 0, 1},
        {BZ, BA_ENGINE_HYBRID, A, 0, 0, N0, 2, 1}, {CP, BA_ENGINE_HYBRID, RL, 0, 6, N0, 1, 1},
    };
    check_attention_list(vs, sizeof vs / sizeof vs[0]);
}

#undef R
#undef F
#undef BD
#undef A
#undef RL
#undef N0
#undef LN
#undef BZ
#undef CP

/* ------------------------------------------------------ cross-entropy */

typedef struct {
    double *logits, *work, *probs;
    const int *targets;
    int N, O, T, mask;
} ce_ctx;

static double ce_loss(void *p)
{
    ce_ctx *c = p;
    double ls;
    long cnt;
    memcpy(c->work, c->logits, sizeof(double) * c->N * c->O);
    if (ba_crossentropy_forward(c->work, c->probs, c->targets, c->N, c->O, c->T, c->mask, &ls,
                                &cnt, NULL))
        fail_msg("crossentropy forward failed");
    return ls / cnt;
}

static void test_crossentropy(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 5);
    enum { N = 8, O = 4, T = 4 };
    double logits[N * O], work[N * O], probs[N * O], dl[N * O] = {0}, nl[N * O];
    /* pointer targets: row position t may point at [0, t); -1 = none */
    int targets[N] = {-1, 0, 1, 2, -1, -1, 0, 1};
    fill_normal(&r, logits, N * O, 1.5);
    ce_ctx c = {logits, work, probs, targets, N, O, T, 1};
    ce_loss(&c);
    ba_crossentropy_backward(dl, probs, targets, N, O, 1.0 / 5); /* 5 targets */
    numeric_grad(ce_loss, &c, logits, N * O, nl);
    expect_close("crossentropy dlogits (pointer)", dl, nl, N * O);
    /* a target that points forward is refused with a message */
    int bad[N] = {-1, 0, 2, -1, -1, -1, -1, -1};
    char err[BA_ERR_LEN];
    double ls;
    long cnt;
    memcpy(work, logits, sizeof work);
    assert_int_equal(ba_crossentropy_forward(work, probs, bad, N, O, T, 1, &ls, &cnt, err),
                     BA_ERR_ARG);
    assert_non_null(strstr(err, "target 2"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_attention_softmax),
        cmocka_unit_test(test_attention_sigmoid),
        cmocka_unit_test(test_attention_boltzmann),
        cmocka_unit_test(test_attention_coupling),
        cmocka_unit_test(test_attention_long_forms),
        cmocka_unit_test(test_attention_approx),
        cmocka_unit_test(test_crossentropy),
        cmocka_unit_test(test_attention_alibi),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
