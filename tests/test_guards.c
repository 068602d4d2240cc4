/* Numerical guards of the training step (float library):
 * - ba_model_step refuses a non-finite gradient, and an update that would
 *   make a parameter or an AdamW moment non-finite, naming the tensor, and
 *   then changes nothing (parameters, moments, gradients, step count);
 * - ba_model_forward names the first non-finite tensor behind a non-finite
 *   loss: a parameter, else the first activation in forward order;
 * - a refused step leaves a model that ba_checkpoint_save writes (it never
 *   holds a non-finite value);
 * - the update's two ways of proving itself safe (a bound from the block's
 *   maxima, else the guard pass) update alike, and a negative second
 *   moment (a corrupt state) fails the bound and is refused by the guard. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boltzattn.h"

#define B 4
#define T 6

/* A brackets model (T = 6) with initialised weights and one batch. */
static ba_model *make(ba_attn attn, int ffn, int *in, int *tg)
{
    char err[BA_ERR_LEN];
    ba_dataset *d;
    if (ba_dataset_brackets(&d, T, 1, 8, 1234, err))
        fail_msg("dataset: %s", err);
    ba_config cfg = ba_config_default(attn, T);
    ba_config_set_data(&cfg, d);
    cfg.n_embd = 8;
    cfg.n_head = 2;
    cfg.ffn = ffn;
    ba_model *m;
    if (ba_model_init(&m, &cfg, err))
        fail_msg("model: %s", err);
    ba_rng rng;
    ba_rng_seed(&rng, 7);
    ba_model_init_weights(m, &rng, 0.1);
    ba_dataset_train_batch(d, &rng, B, in, tg);
    ba_dataset_free(d);
    return m;
}

static ba_real *tensor(ba_model *m, const char *name, size_t *size)
{
    ba_tensor_info ti;
    int idx = ba_model_find_tensor(m, name);
    assert_true(idx >= 0);
    assert_int_equal(ba_model_tensor(m, idx, &ti), BA_OK);
    if (size)
        *size = ti.size;
    return ba_model_params(m) + ti.offset;
}

/* Forward, backward; the caller then steps. */
static void grads(ba_model *m, const int *in, const int *tg)
{
    char err[BA_ERR_LEN];
    double loss;
    if (ba_model_forward(m, in, tg, B, T, &loss, err) || (ba_model_zero_grad(m), 0) ||
        ba_model_backward(m, err))
        fail_msg("forward/backward: %s", err);
}

/* params | grads | adam m | adam v, and the step count */
typedef struct {
    ba_real *mem;
    size_t P;
    long step;
} snapshot;

static snapshot take(ba_model *m)
{
    snapshot s;
    s.P = ba_model_num_params(m);
    s.mem = malloc(4 * s.P * sizeof(ba_real));
    assert_non_null(s.mem);
    memcpy(s.mem, ba_model_params(m), s.P * sizeof(ba_real));
    memcpy(s.mem + s.P, ba_model_grads(m), s.P * sizeof(ba_real));
    memcpy(s.mem + 2 * s.P, ba_model_adam_m(m), s.P * sizeof(ba_real));
    memcpy(s.mem + 3 * s.P, ba_model_adam_v(m), s.P * sizeof(ba_real));
    s.step = ba_model_step_count(m);
    return s;
}

/* The model is bit-identical to the snapshot; frees it. */
static void unchanged(ba_model *m, snapshot s)
{
    assert_memory_equal(s.mem, ba_model_params(m), s.P * sizeof(ba_real));
    assert_memory_equal(s.mem + s.P, ba_model_grads(m), s.P * sizeof(ba_real));
    assert_memory_equal(s.mem + 2 * s.P, ba_model_adam_m(m), s.P * sizeof(ba_real));
    assert_memory_equal(s.mem + 3 * s.P, ba_model_adam_v(m), s.P * sizeof(ba_real));
    assert_int_equal(ba_model_step_count(m), s.step);
    free(s.mem);
}

static void expect(const char *err, const char *want)
{
    if (!strstr(err, want))
        fail_msg("message '%s' lacks '%s'", err, want);
}

static void test_step_refuses_nonfinite_gradient(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    int in[B * T], tg[B * T];
    ba_model *m = make(BA_ATTN_BOLTZMANN, 1, in, tg);
    ba_adamw opt = ba_adamw_default();
    grads(m, in, tg);
    assert_int_equal(ba_model_step(m, &opt, 1e-3, NULL, err), BA_OK); /* a good step first */
    grads(m, in, tg);
    /* NaN in the first layer's qkv weight and +inf in the head: the head is
     * named, being nearer the output (where backward starts). */
    size_t nq, nh;
    ba_real *q = tensor(m, "blocks.0.attn.qkv.weight", &nq);
    ba_real *h = tensor(m, "head.weight", &nh);
    ba_real *g = ba_model_grads(m);
    ba_real *gq = g + (q - ba_model_params(m)), *gh = g + (h - ba_model_params(m));
    gq[5] = (ba_real)NAN;
    gh[2] = (ba_real)INFINITY;
    snapshot s = take(m);
    double norm = -1;
    assert_int_equal(ba_model_step(m, &opt, 1e-3, &norm, err), BA_ERR_NUMERIC);
    expect(err, "gradient of head.weight is not finite ([2] = inf");
    expect(err, "no update made");
    unchanged(m, s);
    gh[2] = 0;
    s = take(m);
    assert_int_equal(ba_model_step(m, &opt, 1e-3, NULL, err), BA_ERR_NUMERIC);
    expect(err, "gradient of blocks.0.attn.qkv.weight is not finite ([5] = nan");
    unchanged(m, s);
    /* huge but finite gradients are no error: clipping tames them */
    gq[5] = 0;
    for (size_t i = 0; i < nq && i < 40; i++)
        gq[i] = (ba_real)3e38;
    s = take(m);
    assert_int_equal(ba_model_step(m, &opt, 1e-3, &norm, err), BA_OK);
    assert_true(isfinite(norm) && norm > 1e39);
    assert_int_equal(ba_model_step_count(m), s.step + 1);
    free(s.mem);
    ba_model_free(m);
}

static void test_step_refuses_overflowing_update(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    int in[B * T], tg[B * T];
    ba_model *m = make(BA_ATTN_SOFTMAX, 1, in, tg);
    ba_adamw opt = ba_adamw_default();
    grads(m, in, tg);
    /* A decayed weight near float's limit: decay 10 at rate 10 multiplies
     * it by -99. */
    ba_real *w = tensor(m, "blocks.0.ffn.fc.weight", NULL);
    w[3] = (ba_real)1e37;
    opt.weight_decay = 10;
    snapshot s = take(m);
    assert_int_equal(ba_model_step(m, &opt, 10, NULL, err), BA_ERR_NUMERIC);
    expect(err, "the update would make parameter blocks.0.ffn.fc.weight[3] non-finite");
    expect(err, "no update made");
    unchanged(m, s);
    /* the same with a rate that keeps it in range goes through */
    assert_int_equal(ba_model_step(m, &opt, 0.01, NULL, err), BA_OK);
    assert_true(isfinite(w[3]) && fabs(w[3]) < 1e37);
    assert_int_equal(ba_model_step_count(m), s.step + 1);

    ba_model_free(m);

    /* Without clipping, a finite gradient of 1e21 has a square beyond
     * float: the second moment would overflow. */
    m = make(BA_ATTN_SOFTMAX, 1, in, tg);
    grads(m, in, tg);
    opt = ba_adamw_default();
    opt.grad_clip = 0;
    ba_real *g = ba_model_grads(m) + (tensor(m, "ln_f.bias", NULL) - ba_model_params(m));
    g[1] = (ba_real)1e21; /* (1 - beta2) * 1e42 > FLT_MAX */
    s = take(m);
    assert_int_equal(ba_model_step(m, &opt, 1e-3, NULL, err), BA_ERR_NUMERIC);
    expect(err, "second moment ln_f.bias[1] non-finite");
    unchanged(m, s);
    /* with the default clip it is fine */
    opt.grad_clip = 1.0;
    assert_int_equal(ba_model_step(m, &opt, 1e-3, NULL, err), BA_OK);

    /* whatever was refused, the model saves: nothing in it is non-finite */
    char path[] = "/tmp/ba_test_guards_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(ba_checkpoint_save(path, m, NULL, NULL, NULL, 0, err), BA_OK);
    ba_model *back;
    assert_int_equal(ba_checkpoint_load(path, &back, NULL, err), BA_OK);
    ba_model_free(back);
    unlink(path);
    ba_model_free(m);
}

/* One model stepped with every value small (the bound proves the update
 * safe) and its copy with one parameter at 1e31, beyond the bound's limit
 * but inside float (the guard pass runs): every other value updates to the
 * same bits, and the large one as AdamW's formula says. */
static void test_step_bound_and_guard_agree(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    int in[B * T], tg[B * T];
    ba_model *a = make(BA_ATTN_SOFTMAX, 1, in, tg), *b = make(BA_ATTN_SOFTMAX, 1, in, tg);
    ba_adamw opt = ba_adamw_default();
    grads(a, in, tg);
    grads(b, in, tg);
    size_t P = ba_model_num_params(a), nb;
    ba_real *big = tensor(b, "ln_f.bias", &nb); /* not decayed */
    size_t at = (size_t)(big - ba_model_params(b));
    big[0] = (ba_real)1e31;
    double g = ba_model_grads(b)[at], norm;
    assert_int_equal(ba_model_step(a, &opt, 1e-3, &norm, err), BA_OK);
    assert_int_equal(ba_model_step(b, &opt, 1e-3, NULL, err), BA_OK);
    ba_real *pa = ba_model_params(a), *pb = ba_model_params(b);
    for (size_t i = 0; i < P; i++)
        if (i != at && memcmp(&pa[i], &pb[i], sizeof(ba_real)))
            fail_msg("parameter %zu: %.9g (bound) against %.9g (guard)", i, (double)pa[i],
                     (double)pb[i]);
    assert_memory_equal(ba_model_adam_m(a), ba_model_adam_m(b), P * sizeof(ba_real));
    assert_memory_equal(ba_model_adam_v(a), ba_model_adam_v(b), P * sizeof(ba_real));
    /* step 1 from zero moments: m = (1 - b1) gc, v = (1 - b2) gc^2 */
    double clip = norm > opt.grad_clip ? opt.grad_clip / norm : 1.0;
    double gc = g * clip, m1 = (1 - opt.beta1) * gc;
    double v1 = (1 - opt.beta2) * gc * gc, bc1 = 1 - opt.beta1, bc2 = 1 - opt.beta2;
    double want = 1e31f - 1e-3 * ((m1 / bc1) / (sqrt(v1 / bc2) + opt.eps));
    assert_true(pb[at] == (ba_real)want);
    ba_model_free(b);

    /* a negative second moment: sqrt of it is NaN, so the step is refused */
    grads(a, in, tg);
    ba_model_adam_v(a)[7] = -1;
    snapshot s = take(a);
    assert_int_equal(ba_model_step(a, &opt, 1e-3, NULL, err), BA_ERR_NUMERIC);
    expect(err, "no update made");
    unchanged(a, s);
    ba_model_free(a);
}

/* The loss check names the first non-finite tensor behind it. */
static void test_forward_names_first_nonfinite(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    int in[B * T], tg[B * T];
    double loss;
    static const ba_attn kinds[] = {BA_ATTN_SOFTMAX, BA_ATTN_BOLTZMANN};
    for (int k = 0; k < 2; k++) {
        for (int ffn = 0; ffn < 2; ffn++) {
            ba_model *m = make(kinds[k], ffn, in, tg);
            assert_int_equal(ba_model_forward(m, in, tg, B, T, &loss, err), BA_OK);
            /* a NaN parameter: named with its index */
            size_t n;
            ba_real *pos = tensor(m, "pos_emb", &n);
            ba_real keep = pos[9];
            pos[9] = (ba_real)NAN;
            assert_int_equal(ba_model_forward(m, in, tg, B, T, &loss, err), BA_ERR_NUMERIC);
            expect(err, "first non-finite tensor: parameter pos_emb[9] = nan");
            pos[9] = keep;
            /* finite weights too large for float: qkv overflows first */
            ba_real *q = tensor(m, "blocks.0.attn.qkv.weight", &n);
            for (size_t i = 0; i < n; i++)
                q[i] = (ba_real)((i % 2 ? 1 : -1) * 3e38);
            int rc = ba_model_forward(m, in, tg, B, T, &loss, err);
            if (rc != BA_ERR_NUMERIC)
                fail_msg("%s ffn=%d: status %d (%s)", ba_attn_name(kinds[k]), ffn, rc, err);
            expect(err, "first non-finite tensor: activation blocks.0.qkv at batch 0 position 0");
            ba_model_free(m);
        }
    }
    /* a late overflow: the head's weights make the logits infinite */
    ba_model *m = make(BA_ATTN_SOFTMAX, 1, in, tg);
    size_t n;
    ba_real *h = tensor(m, "head.weight", &n);
    for (size_t i = 0; i < n; i++)
        h[i] = (ba_real)((i % 2 ? 1 : -1) * 3e38);
    assert_int_equal(ba_model_forward(m, in, tg, B, T, &loss, err), BA_ERR_NUMERIC);
    expect(err, "loss is not finite");
    expect(err, "first non-finite tensor: activation logits at batch 0 position 1");
    ba_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_refuses_nonfinite_gradient),
        cmocka_unit_test(test_step_refuses_overflowing_update),
        cmocka_unit_test(test_step_bound_and_guard_agree),
        cmocka_unit_test(test_forward_names_first_nonfinite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
