/* Gradient checks in double precision of the whole model: each attention
 * variant, the long-context forms, rotary and ALiBi positions, against
 * central finite differences of the loss; with the checks that those are
 * not vacuous (rope and ALiBi move the loss, ALiBi's fields), sigmoid as
 * boltzmann at J = 0, and the tiled variants' stop. The layers alone are in
 * test_grad_f64.c. Built against the double library (BA_DOUBLE), so ba_real
 * is double.
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
#include "grad_fd.h"

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
            /* exactly zero by symmetry, see check_attention (test_grad_f64.c) */
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
        cmocka_unit_test(test_model_all_variants),
        cmocka_unit_test(test_model_long_forms),
        cmocka_unit_test(test_model_rope),
        cmocka_unit_test(test_rope_acts),
        cmocka_unit_test(test_model_alibi),
        cmocka_unit_test(test_alibi_fields),
        cmocka_unit_test(test_sigmoid_is_boltzmann_at_zero_J),
        cmocka_unit_test(test_tiled_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
