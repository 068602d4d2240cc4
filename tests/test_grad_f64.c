/* Gradient checks in double precision: every layer alone and the whole
 * model in each attention variant, against central finite differences.
 * Built against the double library (BA_DOUBLE), so ba_real is double.
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
#include "stop_after.h"

#define FD_EPS 1e-5
#define REL_TOL 1e-6

static double rel_err(const double *a, const double *n, size_t len)
{
    double d = 0.0, nn = 0.0, na = 0.0;
    for (size_t i = 0; i < len; i++) {
        d += (a[i] - n[i]) * (a[i] - n[i]);
        nn += n[i] * n[i];
        na += a[i] * a[i];
    }
    if (sqrt(nn) < 1e-11 && sqrt(na) < 1e-11)
        return 0.0;
    return sqrt(d) / fmax(sqrt(nn), 1e-300);
}

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

/* Numeric gradient of f with respect to x (n entries), into g. */
typedef double (*scalar_fn)(void *ctx);
static void numeric_grad(scalar_fn f, void *ctx, double *x, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + FD_EPS;
        double fp = f(ctx);
        x[i] = keep - FD_EPS;
        double fm = f(ctx);
        x[i] = keep;
        g[i] = (fp - fm) / (2 * FD_EPS);
    }
}

static void expect_close(const char *what, const double *a, const double *n, size_t len)
{
    double e = rel_err(a, n, len);
    if (!(e < REL_TOL))
        fail_msg("%s: relative error %.3e exceeds %.0e", what, e, REL_TOL);
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

/* The approximate engines converged far below the finite differences'
 * resolution, so that the implicit gradient is the derivative of what the
 * forward returns. */
static const ba_approx TIGHT = {0.5, 1e-14, 20000};

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

/* ------------------------------------------------------- whole model */

typedef struct {
    ba_model *m;
    const int *in, *tg;
    int B, T;
} model_ctx;

static double model_loss(void *p)
{
    model_ctx *c = p;
    double loss;
    char err[BA_ERR_LEN];
    if (ba_model_forward(c->m, c->in, c->tg, c->B, c->T, &loss, err))
        fail_msg("forward: %s", err);
    return loss;
}

/* Random weights large enough that every nonlinearity is exercised. */
static void randomise(ba_model *m, ba_rng *r)
{
    int nt = ba_model_num_tensors(m);
    double *p = ba_model_params(m);
    for (int t = 0; t < nt; t++) {
        ba_tensor_info ti;
        ba_model_tensor(m, t, &ti);
        int is_gain = strstr(ti.name, "ln") && strstr(ti.name, ".weight");
        int is_J = strstr(ti.name, "attn.J") != NULL;
        for (size_t i = 0; i < ti.size; i++) {
            double v = ba_rng_normal(r);
            p[ti.offset + i] = is_gain ? 1.0 + 0.2 * v : is_J ? 0.6 * v : 0.4 * v;
        }
        if (is_J) { /* only j < k is part of the model */
            int H = ti.shape[0], T = ti.shape[1];
            for (int h = 0; h < H; h++)
                for (int j = 0; j < T; j++)
                    for (int k = 0; k <= j; k++)
                        p[ti.offset + ((size_t)h * T + j) * T + k] = 0.0;
        }
    }
}

static void check_model_cfg(ba_task task, ba_attn attn, int ffn, const ba_config *form)
{
    int T = 6, B = 2;
    ba_config cfg = ba_config_default(attn, T);
    if (form) /* the long-context fields */
        cfg.couplings = form->couplings, cfg.band = form->band, cfg.engine = form->engine,
        cfg.field_bias = form->field_bias, cfg.pos_emb = form->pos_emb,
        cfg.approx = form->approx, cfg.window = form->window;
    cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 8, cfg.ffn = ffn;
    if (task == BA_TASK_CHARLM)
        cfg.vocab_size = 5, cfg.out_size = 5;
    else
        cfg.vocab_size = 2, cfg.out_size = T, cfg.head = BA_HEAD_POINTER;
    ba_model *m;
    char err[BA_ERR_LEN];
    assert_int_equal(ba_model_init(&m, &cfg, err), BA_OK);
    ba_rng r;
    ba_rng_seed(&r, 100 + 10 * attn + ffn + 7 * task);
    randomise(m, &r);
    int in[12], tg[12];
    for (int i = 0; i < B * T; i++) {
        int t = i % T;
        in[i] = (int)ba_rng_below(&r, cfg.vocab_size);
        if (task == BA_TASK_CHARLM)
            tg[i] = (int)ba_rng_below(&r, cfg.vocab_size);
        else
            tg[i] = t == 0 ? -1 : (int)ba_rng_below(&r, t);
    }
    model_ctx c = {m, in, tg, B, T};
    model_loss(&c);
    ba_model_zero_grad(m);
    assert_int_equal(ba_model_backward(m, err), BA_OK);
    size_t P = ba_model_num_params(m);
    double *analytic = malloc(sizeof(double) * P), *numeric = malloc(sizeof(double) * P);
    memcpy(analytic, ba_model_grads(m), sizeof(double) * P);
    numeric_grad(model_loss, &c, ba_model_params(m), P, numeric);
    int nt = ba_model_num_tensors(m);
    for (int t = 0; t < nt; t++) {
        ba_tensor_info ti;
        ba_model_tensor(m, t, &ti);
        char what[160];
        snprintf(what, sizeof what, "%s %s ffn=%d: %s", ba_task_name(task), ba_attn_name(attn),
                 ffn, ti.name);
        if (attn == BA_ATTN_COUPLING && strstr(ti.name, "attn.J") &&
            cfg.field_bias == BA_FIELD_BIAS_NONE && cfg.pos_emb != BA_POS_ALIBI) {
            /* exactly zero by symmetry, see check_attention */
            for (size_t i = 0; i < ti.size; i++)
                assert_true(fabs(analytic[ti.offset + i]) < 1e-12);
            continue;
        }
        expect_close(what, analytic + ti.offset, numeric + ti.offset, ti.size);
    }
    free(analytic), free(numeric);
    ba_model_free(m);
}

static void check_model(ba_task task, ba_attn attn, int ffn)
{
    check_model_cfg(task, attn, ffn, NULL);
}

/* Relative and banded couplings, the band engine, the log-n bias and no
 * position embeddings, through the whole model. */
static void test_model_long_forms(void **state)
{
    (void)state;
    ba_config f = ba_config_default(BA_ATTN_BOLTZMANN, 6);
    f.couplings = BA_COUPLINGS_RELATIVE, f.band = 2, f.pos_emb = 0;
    f.field_bias = BA_FIELD_BIAS_LOG_N; /* auto: the band engine */
    check_model_cfg(BA_TASK_CHARLM, BA_ATTN_BOLTZMANN, 1, &f);
    f.couplings = BA_COUPLINGS_ABSOLUTE, f.band = 3, f.pos_emb = 1;
    f.field_bias = BA_FIELD_BIAS_NONE;
    check_model_cfg(BA_TASK_BRACKETS, BA_ATTN_BOLTZMANN, 0, &f);
    f.couplings = BA_COUPLINGS_RELATIVE, f.band = 0, f.engine = BA_ENGINE_FAST;
    check_model_cfg(BA_TASK_CHARLM, BA_ATTN_BOLTZMANN, 0, &f);
    f.engine = BA_ENGINE_AUTO, f.band = 0, f.couplings = BA_COUPLINGS_ABSOLUTE;
    f.field_bias = BA_FIELD_BIAS_LOG_N;
    check_model_cfg(BA_TASK_CHARLM, BA_ATTN_SIGMOID, 1, &f);
    /* the approximate engines, converged tightly (see TIGHT) */
    f.approx = TIGHT, f.field_bias = BA_FIELD_BIAS_NONE;
    f.engine = BA_ENGINE_MF, f.couplings = BA_COUPLINGS_RELATIVE, f.pos_emb = 0;
    check_model_cfg(BA_TASK_CHARLM, BA_ATTN_BOLTZMANN, 1, &f);
    f.engine = BA_ENGINE_BP, f.couplings = BA_COUPLINGS_ABSOLUTE, f.pos_emb = 1;
    check_model_cfg(BA_TASK_BRACKETS, BA_ATTN_BOLTZMANN, 0, &f);
    f.engine = BA_ENGINE_HYBRID, f.window = 2, f.field_bias = BA_FIELD_BIAS_LOG_N;
    check_model_cfg(BA_TASK_CHARLM, BA_ATTN_BOLTZMANN, 1, &f);
}

/* Rotary position embeddings (issue 43) through the whole model: every
 * variant, and the Ising variants on every engine of the table (fast,
 * reference, band, mf, tap, bp, hybrid), against central differences. */
static void test_model_rope(void **state)
{
    (void)state;
    ba_config f = ba_config_default(BA_ATTN_BOLTZMANN, 6);
    f.pos_emb = BA_POS_ROPE; /* head size 8 / 2 = 4: two pairs */
    for (int a = 0; a < 4; a++)
        check_model_cfg(BA_TASK_CHARLM, (ba_attn)a, a % 2, &f); /* auto: fast */
    f.engine = BA_ENGINE_REFERENCE;
    check_model_cfg(BA_TASK_BRACKETS, BA_ATTN_BOLTZMANN, 1, &f);
    f.engine = BA_ENGINE_AUTO, f.couplings = BA_COUPLINGS_RELATIVE, f.band = 2; /* band */
    check_model_cfg(BA_TASK_CHARLM, BA_ATTN_BOLTZMANN, 1, &f);
    check_model_cfg(BA_TASK_CHARLM, BA_ATTN_COUPLING, 0, &f);
    f.approx = TIGHT, f.band = 0;
    const ba_engine approx[3] = {BA_ENGINE_MF, BA_ENGINE_TAP, BA_ENGINE_BP};
    for (int e = 0; e < 3; e++) {
        f.engine = approx[e];
        check_model_cfg(BA_TASK_CHARLM, BA_ATTN_BOLTZMANN, 0, &f); /* no FFN: fewer weights */
    }
    f.engine = BA_ENGINE_HYBRID, f.window = 2;
    check_model_cfg(BA_TASK_CHARLM, BA_ATTN_BOLTZMANN, 0, &f);
}

/* ALiBi (issue 43) through the whole model, as rope above: every variant
 * (coupling's J now has a gradient: ALiBi gives it fields), the Ising
 * variants on every engine of the table. */
static void test_model_alibi(void **state)
{
    (void)state;
    ba_config f = ba_config_default(BA_ATTN_BOLTZMANN, 6);
    f.pos_emb = BA_POS_ALIBI;
    for (int a = 0; a < 4; a++)
        check_model_cfg(BA_TASK_CHARLM, (ba_attn)a, a % 2, &f); /* auto: fast */
    f.engine = BA_ENGINE_REFERENCE, f.field_bias = BA_FIELD_BIAS_LOG_N;
    check_model_cfg(BA_TASK_BRACKETS, BA_ATTN_BOLTZMANN, 1, &f);
    check_model_cfg(BA_TASK_CHARLM, BA_ATTN_SIGMOID, 0, &f);
    f.engine = BA_ENGINE_AUTO, f.couplings = BA_COUPLINGS_RELATIVE, f.band = 2; /* band */
    check_model_cfg(BA_TASK_CHARLM, BA_ATTN_BOLTZMANN, 1, &f);
    f.field_bias = BA_FIELD_BIAS_NONE;
    check_model_cfg(BA_TASK_CHARLM, BA_ATTN_COUPLING, 0, &f);
    f.approx = TIGHT, f.band = 0;
    const ba_engine approx[3] = {BA_ENGINE_MF, BA_ENGINE_TAP, BA_ENGINE_BP};
    for (int e = 0; e < 3; e++) {
        f.engine = approx[e];
        check_model_cfg(BA_TASK_CHARLM, BA_ATTN_BOLTZMANN, 0, &f);
    }
    f.engine = BA_ENGINE_HYBRID, f.window = 2;
    check_model_cfg(BA_TASK_CHARLM, BA_ATTN_BOLTZMANN, 0, &f);
}

/* ALiBi's fields are the plain ones less m_h (i - j), to the last bit of
 * the double sum: ba_model_fields of the same weights with and without
 * it, for each head (slopes 2^-4 and 2^-8 of two heads). And the loss
 * moves, so the checks above are not vacuous. */
static void test_alibi_fields(void **state)
{
    (void)state;
    int in[12], tg[12];
    for (int i = 0; i < 12; i++)
        in[i] = (i * 7 + 3) % 5, tg[i] = (i * 3 + 1) % 5;
    double h[2][2][6], loss[2];
    for (int k = 0; k < 2; k++) {
        ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, 6);
        cfg.n_layer = 1, cfg.n_head = 2, cfg.n_embd = 8, cfg.vocab_size = 5, cfg.out_size = 5;
        cfg.pos_emb = k ? BA_POS_ALIBI : BA_POS_NONE;
        ba_model *m;
        char err[BA_ERR_LEN];
        assert_int_equal(ba_model_init(&m, &cfg, err), BA_OK);
        ba_rng r;
        ba_rng_seed(&r, 78);
        randomise(m, &r);
        model_ctx c = {m, in, tg, 2, 6};
        loss[k] = model_loss(&c);
        for (int hd = 0; hd < 2; hd++)
            assert_int_equal(ba_model_fields(m, 0, hd, 1, 5, h[k][hd], err), BA_OK);
        ba_model_free(m);
    }
    const double slope[2] = {0.0625, 0.00390625};
    for (int hd = 0; hd < 2; hd++)
        for (int j = 0; j <= 5; j++)
            assert_true(h[1][hd][j] == h[0][hd][j] - slope[hd] * (5 - j));
    if (!(fabs(loss[0] - loss[1]) > 1e-6))
        fail_msg("alibi did not change the loss: %.17g and %.17g", loss[0], loss[1]);
}

/* Not vacuous: the same weights give another loss with rope than without
 * positions (the rotation reaches the fields), and rope's model has no
 * position tensor. */
static void test_rope_acts(void **state)
{
    (void)state;
    double loss[2];
    size_t P[2];
    int in[12], tg[12];
    for (int i = 0; i < 12; i++)
        in[i] = (i * 7 + 3) % 5, tg[i] = (i * 3 + 1) % 5;
    for (int k = 0; k < 2; k++) {
        ba_config cfg = ba_config_default(BA_ATTN_SOFTMAX, 6);
        cfg.n_layer = 1, cfg.n_head = 2, cfg.n_embd = 8, cfg.vocab_size = 5, cfg.out_size = 5;
        cfg.pos_emb = k ? BA_POS_ROPE : BA_POS_NONE;
        ba_model *m;
        char err[BA_ERR_LEN];
        assert_int_equal(ba_model_init(&m, &cfg, err), BA_OK);
        ba_rng r;
        ba_rng_seed(&r, 77);
        randomise(m, &r);
        P[k] = ba_model_num_params(m);
        model_ctx c = {m, in, tg, 2, 6};
        loss[k] = model_loss(&c);
        ba_model_free(m);
    }
    assert_true(P[0] == P[1]);
    if (!(fabs(loss[0] - loss[1]) > 1e-6))
        fail_msg("rope did not change the loss: %.17g and %.17g", loss[0], loss[1]);
}

static void test_model_all_variants(void **state)
{
    (void)state;
    for (int task = 0; task < 2; task++)
        for (int a = 0; a < 4; a++)
            for (int ffn = 0; ffn < 2; ffn++)
                check_model((ba_task)task, (ba_attn)a, ffn);
}

/* sigmoid is exactly boltzmann at J = 0: same logits, same gradients of
 * every shared tensor. */
static void test_sigmoid_is_boltzmann_at_zero_J(void **state)
{
    (void)state;
    int T = 7, B = 3;
    ba_model *ms, *mb;
    ba_config cs = ba_config_default(BA_ATTN_SIGMOID, T);
    cs.n_layer = 2, cs.n_head = 2, cs.n_embd = 8, cs.vocab_size = cs.out_size = 6;
    ba_config cb = cs;
    cb.attn = BA_ATTN_BOLTZMANN;
    char err[BA_ERR_LEN];
    assert_int_equal(ba_model_init(&ms, &cs, err), BA_OK);
    assert_int_equal(ba_model_init(&mb, &cb, err), BA_OK);
    ba_rng r;
    ba_rng_seed(&r, 77);
    randomise(ms, &r);
    int nt = ba_model_num_tensors(ms);
    for (int t = 0; t < nt; t++) {
        ba_tensor_info a, b;
        ba_model_tensor(ms, t, &a);
        int j = ba_model_find_tensor(mb, a.name);
        assert_true(j >= 0);
        ba_model_tensor(mb, j, &b);
        memcpy(ba_model_params(mb) + b.offset, ba_model_params(ms) + a.offset,
               sizeof(double) * a.size);
    }
    int in[21], tg[21];
    for (int i = 0; i < B * T; i++)
        in[i] = (int)ba_rng_below(&r, 6), tg[i] = (int)ba_rng_below(&r, 6);
    double ls, lb;
    assert_int_equal(ba_model_forward(ms, in, tg, B, T, &ls, err), BA_OK);
    assert_int_equal(ba_model_forward(mb, in, tg, B, T, &lb, err), BA_OK);
    assert_float_equal(ls, lb, 1e-12);
    const double *xs = ba_model_logits(ms), *xb = ba_model_logits(mb);
    for (int i = 0; i < B * T * 6; i++)
        assert_float_equal(xs[i], xb[i], 1e-12);
    ba_model_zero_grad(ms), ba_model_zero_grad(mb);
    assert_int_equal(ba_model_backward(ms, err), BA_OK);
    assert_int_equal(ba_model_backward(mb, err), BA_OK);
    for (int t = 0; t < nt; t++) {
        ba_tensor_info a, b;
        ba_model_tensor(ms, t, &a);
        ba_model_tensor(mb, ba_model_find_tensor(mb, a.name), &b);
        for (size_t i = 0; i < a.size; i++)
            assert_float_equal(ba_model_grads(ms)[a.offset + i], ba_model_grads(mb)[b.offset + i],
                               1e-11);
    }
    ba_model_free(ms), ba_model_free(mb);
}


/* The tiled variants (softmax, sigmoid) poll the model's stop before each
 * layer: the forward and backward end with BA_ERR_INTERRUPTED naming the
 * layer; with a stop that never answers yes, the loss is the one without. */
static void test_tiled_stop(void **state)
{
    (void)state;
    int T = 7, B = 2;
    for (int a = 0; a < 2; a++) {
        ba_config c = ba_config_default(a ? BA_ATTN_SIGMOID : BA_ATTN_SOFTMAX, T);
        c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.vocab_size = c.out_size = 6;
        ba_model *m;
        char err[BA_ERR_LEN];
        assert_int_equal(ba_model_init(&m, &c, err), BA_OK);
        ba_rng r;
        ba_rng_seed(&r, 78);
        randomise(m, &r);
        int in[14], tg[14];
        for (int i = 0; i < B * T; i++)
            in[i] = (int)ba_rng_below(&r, 6), tg[i] = (int)ba_rng_below(&r, 6);
        double plain, loss;
        assert_int_equal(ba_model_forward(m, in, tg, B, T, &plain, err), BA_OK);
        stop_after sa = {0, 0};
        ba_stop st = {stop_after_requested, &sa};
        ba_model_set_stop(m, &st);
        assert_int_equal(ba_model_forward(m, in, tg, B, T, &loss, err), BA_ERR_INTERRUPTED);
        assert_non_null(strstr(err, "forward: stopped on request before layer 0"));
        sa.polls = 0, sa.after = 2; /* the layer's poll and the kernel's */
        assert_int_equal(ba_model_forward(m, in, tg, B, T, &loss, err), BA_ERR_INTERRUPTED);
        assert_non_null(strstr(err, "before layer 1"));
        sa.polls = 0, sa.after = 1L << 40;
        assert_int_equal(ba_model_forward(m, in, tg, B, T, &loss, err), BA_OK);
        assert_memory_equal(&loss, &plain, sizeof loss);
        sa.polls = 0, sa.after = 0;
        assert_int_equal(ba_model_backward(m, err), BA_ERR_INTERRUPTED);
        assert_non_null(strstr(err, "backward: stopped on request before layer 1"));
        ba_model_free(m);
    }
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
        cmocka_unit_test(test_model_all_variants),
        cmocka_unit_test(test_model_long_forms),
        cmocka_unit_test(test_model_rope),
        cmocka_unit_test(test_rope_acts),
        cmocka_unit_test(test_attention_alibi),
        cmocka_unit_test(test_model_alibi),
        cmocka_unit_test(test_alibi_fields),
        cmocka_unit_test(test_sigmoid_is_boltzmann_at_zero_J),
        cmocka_unit_test(test_tiled_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
