/* Tests of the library's files built on safetensors: batch files and a
 * batch's check against a config, checkpoints (bit-exact round trip,
 * corrupted files) and gradient files. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boltzattn.h"
#include "io_files.h"

/* ---------------------------------------------------------- batches */

static void test_batch(void **state)
{
    (void)state;
    enum { B = 3, T = 5 };
    int in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) {
        in[i] = i * 7 - 20;
        tg[i] = i % 3 ? i : -1;
    }
    in[0] = INT32_MAX;
    in[1] = INT32_MIN;
    char err[BA_ERR_LEN] = "";
    const char *p = path_of("batch.safetensors");
    assert_int_equal(ba_batch_save(p, in, tg, B, T, err), BA_OK);
    int *ri = NULL, *rt = NULL, rb = 0, rT = 0;
    assert_int_equal(ba_batch_load(p, &ri, &rt, &rb, &rT, err), BA_OK);
    assert_int_equal(rb, B);
    assert_int_equal(rT, T);
    assert_memory_equal(ri, in, sizeof in);
    assert_memory_equal(rt, tg, sizeof tg);
    free(ri);
    free(rt);
    assert_int_equal(ba_batch_save(p, in, tg, 0, T, err), BA_ERR_ARG);
    assert_int_equal(ba_batch_save(p, in, NULL, B, T, err), BA_ERR_ARG);

    /* Bad files. */
    float f[B * T] = {0};
    ba_st_entry e[2] = {
        {.name = "inputs", .dtype = BA_DT_I32, .ndim = 2, .shape = {B, T}, .data = in},
        {.name = "targets", .dtype = BA_DT_I32, .ndim = 2, .shape = {B, T}, .data = tg},
    };
    const char *q = path_of("badbatch.safetensors");
#define EXPECT_BATCH(n_entries, substr)                                                        \
    do {                                                                                       \
        assert_int_equal(ba_st_write(q, e, n_entries, NULL, NULL, 0, err), BA_OK);             \
        ri = rt = (int *)&ri;                                                                  \
        int rc_ = ba_batch_load(q, &ri, &rt, &rb, &rT, err);                                   \
        if (rc_ != BA_ERR_FORMAT || !strstr(err, substr))                                      \
            fail_msg("expected '%s', got %d: %s", substr, rc_, err);                           \
        assert_null(ri);                                                                       \
        assert_null(rt);                                                                       \
    } while (0)
    EXPECT_BATCH(1, "no 'targets' tensor");
    e[1].dtype = BA_DT_F32;
    e[1].data = f;
    EXPECT_BATCH(2, "'targets' has dtype F32, expected I32");
    e[1].dtype = BA_DT_I32;
    e[1].data = tg;
    e[1].shape[0] = T;
    e[1].shape[1] = B;
    EXPECT_BATCH(2, "batch shapes differ: inputs [3, 5], targets [5, 3]");
    e[1].ndim = 1;
    e[1].shape[0] = B * T;
    EXPECT_BATCH(2, "'targets' has shape [15], expected [B, T]");
    e[1].ndim = 2;
    e[1].shape[0] = 0;
    EXPECT_BATCH(2, "'targets' has shape [0, 3]");
    e[0].name = "input";
    EXPECT_BATCH(2, "no 'inputs' tensor");
#undef EXPECT_BATCH
    assert_int_equal(ba_batch_load(path_of("absent"), &ri, &rt, &rb, &rT, err), BA_ERR_IO);
    assert_non_null(strstr(err, "absent"));
}

/* A batch against a model's config: tokens, targets (by batch row and
 * position, not the flat index), at least one target. */
static void test_batch_check(void **state)
{
    (void)state;
    char err[BA_ERR_LEN] = "";
    ba_config lm = ba_config_default(BA_ATTN_SOFTMAX, 4), br = lm;
    lm.vocab_size = lm.out_size = 5;
    br.head = BA_HEAD_POINTER, br.vocab_size = 2, br.out_size = 4;
    int in[8] = {0, 1, 1, 0, 1, 0, 0, 1};
    int tg[8] = {-1, -1, 1, 0, -1, 0, -1, 2};
    assert_int_equal(ba_batch_check(&br, in, tg, 2, 4, err), BA_OK);
    assert_int_equal(ba_batch_check(&lm, in, tg, 2, 4, err), BA_OK);
    tg[6] = 7; /* batch row 1, position 2: the flat row 6 */
    assert_int_equal(ba_batch_check(&lm, in, tg, 2, 4, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "target 7 at batch 1 position 2 is outside [0, 5)"));
    assert_int_equal(ba_batch_check(&br, in, tg, 2, 4, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "target 7 at batch 1 position 2 must point at an earlier "
                                "position in [0, 2)"));
    tg[6] = 2; /* pointing at itself */
    assert_int_equal(ba_batch_check(&br, in, tg, 2, 4, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "target 2 at batch 1 position 2"));
    assert_int_equal(ba_batch_check(&lm, in, tg, 2, 4, err), BA_OK);
    tg[6] = -2;
    assert_int_equal(ba_batch_check(&lm, in, tg, 2, 4, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "target -2 at batch 1 position 2"));
    /* every target -1: no loss to compute (it would print as 0) */
    for (int i = 0; i < 8; i++)
        tg[i] = -1;
    assert_int_equal(ba_batch_check(&lm, in, tg, 2, 4, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "the batch has no targets (all 8 are -1)"));
    tg[7] = 0;
    assert_int_equal(ba_batch_check(&lm, in, tg, 2, 4, err), BA_OK);
    in[5] = 2; /* outside the pointer model's 2 tokens */
    assert_int_equal(ba_batch_check(&br, in, tg, 2, 4, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "token 2 at batch 1 position 1 is outside [0, 2)"));
    assert_int_equal(ba_batch_check(&br, in, tg, 2, 3, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "pointer-head sequences must have the model's length 4"));
    assert_int_equal(ba_batch_check(&lm, in, tg, 1, 5, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "sequence length T = 5 is outside [1, 4]"));
    assert_int_equal(ba_batch_check(NULL, in, tg, 2, 4, err), BA_ERR_ARG);
}

/* ------------------------------------------------------ checkpoints */

/* A small randomly initialised model; J nonzero where the variant has it. */
static ba_model *make_model(ba_task task, ba_attn attn, int ffn, uint64_t seed,
                            ba_data_spec *spec)
{
    ba_config c = ba_config_default(attn, 6);
    *spec = ba_data_spec_default(task);
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = 8;
    c.ffn = ffn;
    if (task == BA_TASK_CHARLM) {
        const uint8_t v[] = {'a', 'b', 'c', ' ', '\n'};
        c.vocab_size = c.out_size = spec->vocab_size = 5;
        memcpy(spec->vocab, v, sizeof v);
    } else {
        spec->kinds = 2;
        c.vocab_size = 4;
        c.out_size = 6;
        c.head = BA_HEAD_POINTER;
    }
    char err[BA_ERR_LEN] = "";
    ba_model *m = NULL;
    if (ba_model_init(&m, &c, err) != BA_OK)
        fail_msg("ba_model_init: %s", err);
    ba_rng rng;
    ba_rng_seed(&rng, seed);
    ba_model_init_weights(m, &rng, 0.3);
    /* Make every parameter distinct from its initial pattern (LayerNorm
     * gains of exactly 1, zero biases) so a missed copy shows. */
    ba_real *p = ba_model_params(m);
    for (size_t i = 0; i < ba_model_num_params(m); i++)
        p[i] += (ba_real)(0.01 * ba_rng_normal(&rng));
    return m;
}

static void test_checkpoint_roundtrip(void **state)
{
    (void)state;
    char err[BA_ERR_LEN] = "";
    const char *p = path_of("ckpt.safetensors");
    int n_cfg = 0;
    for (int attn = BA_ATTN_SOFTMAX; attn <= BA_ATTN_COUPLING; attn++)
        for (int ffn = 0; ffn <= 1; ffn++) {
            ba_task task = (attn + ffn) % 2 ? BA_TASK_CHARLM : BA_TASK_BRACKETS;
            ba_data_spec spec, back;
            ba_model *m = make_model(task, (ba_attn)attn, ffn, 100u + (unsigned)n_cfg++, &spec);
            const char *k[] = {"step", "note"}, *v[] = {"250", "hello"};
            assert_int_equal(ba_checkpoint_save(p, m, &spec, k, v, 2, err), BA_OK);
            ba_model *r = (ba_model *)&r;
            memset(&back, 0x5a, sizeof back);
            if (ba_checkpoint_load(p, &r, &back, err) != BA_OK)
                fail_msg("load %s ffn=%d: %s", ba_attn_name((ba_attn)attn), ffn, err);
            assert_config_equal(ba_model_config(m), ba_model_config(r));
            assert_spec_equal(&spec, &back);
            size_t P = ba_model_num_params(m);
            assert_int_equal(ba_model_num_params(r), P);
            int nt = ba_model_num_tensors(m);
            assert_int_equal(ba_model_num_tensors(r), nt);
            const ba_real *a = ba_model_params(m), *b = ba_model_params(r);
#ifdef BA_DOUBLE
            for (size_t i = 0; i < P; i++)
                assert_true((ba_real)(float)a[i] == b[i]);
#else
            assert_memory_equal(a, b, P * sizeof *a); /* bit-exact */
#endif
            /* The file itself: one F32 tensor per parameter tensor, the
             * model's names and shapes, config and extra metadata. */
            ba_st *st;
            assert_int_equal(ba_st_read(&st, p, err), BA_OK);
            assert_int_equal(ba_st_count(st), nt);
            int has_j = 0;
            for (int i = 0; i < nt; i++) {
                ba_tensor_info ti;
                assert_int_equal(ba_model_tensor(m, i, &ti), BA_OK);
                const ba_st_tensor *t = ba_st_get(st, i);
                assert_string_equal(t->name, ti.name);
                assert_int_equal(t->dtype, BA_DT_F32);
                assert_int_equal(t->ndim, ti.ndim);
                for (int d = 0; d < ti.ndim; d++)
                    assert_int_equal(t->shape[d], ti.shape[d]);
                has_j |= strstr(t->name, "attn.J") != NULL;
            }
            assert_int_equal(has_j, attn == BA_ATTN_BOLTZMANN || attn == BA_ATTN_COUPLING);
            assert_non_null(ba_st_find(st, "tok_emb"));
            assert_non_null(ba_st_find(st, "head.bias"));
            assert_int_equal(ba_st_find(st, "blocks.1.ffn.fc.weight") != NULL, ffn);
            assert_string_equal(ba_st_metadata(st, "step"), "250");
            assert_string_equal(ba_st_metadata(st, "note"), "hello");
            assert_non_null(strstr(ba_st_metadata(st, "config"), ba_attn_name((ba_attn)attn)));
            ba_st_free(st);
            ba_model_free(r);
            ba_model_free(m);
        }
}

/* Rewrites the checkpoint src into dst through ba_st_write, with tensor
 * `name` changed by mode: 's' reshaped to [1, n], 'n' a NaN at index 1,
 * 'd' removed, 'x' plus an extra tensor, 't' stored as F64, 'm' without
 * the config metadata, 'c' with the config replaced by cfg_json. */
static void rewrite(const char *src, const char *dst, const char *name, char mode,
                    const char *cfg_json)
{
    char err[BA_ERR_LEN];
    ba_st *st;
    assert_int_equal(ba_st_read(&st, src, err), BA_OK);
    int n = ba_st_count(st);
    ba_st_entry *e = calloc((size_t)n + 1, sizeof *e);
    float *copy = NULL;
    double *wide = NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        const ba_st_tensor *t = ba_st_get(st, i);
        if (mode == 'd' && name && strcmp(t->name, name) == 0)
            continue;
        e[k].name = t->name;
        e[k].dtype = t->dtype;
        e[k].ndim = t->ndim;
        memcpy(e[k].shape, t->shape, sizeof t->shape);
        e[k].data = t->data;
        if (name && strcmp(t->name, name) == 0) {
            size_t cnt = t->nbytes / 4;
            if (mode == 's') {
                e[k].ndim = 2;
                e[k].shape[0] = 1;
                e[k].shape[1] = (int64_t)cnt;
            } else if (mode == 'n') {
                copy = malloc(t->nbytes);
                memcpy(copy, t->data, t->nbytes);
                copy[1] = NAN;
                e[k].data = copy;
            } else if (mode == 't') {
                wide = malloc(cnt * sizeof *wide);
                for (size_t j = 0; j < cnt; j++) {
                    float f;
                    memcpy(&f, (const char *)t->data + 4 * j, 4);
                    wide[j] = f;
                }
                e[k].dtype = BA_DT_F64;
                e[k].data = wide;
            }
        }
        k++;
    }
    static const float extra[2] = {1, 2};
    if (mode == 'x')
        e[k++] = (ba_st_entry){.name = "blocks.9.extra", .dtype = BA_DT_F32, .ndim = 1,
                               .shape = {2}, .data = extra};
    const char *mk[] = {"config"};
    const char *mv[] = {mode == 'c' ? cfg_json : ba_st_metadata(st, "config")};
    assert_int_equal(ba_st_write(dst, e, k, mk, mv, mode == 'm' ? 0 : 1, err), BA_OK);
    free(copy);
    free(wide);
    free(e);
    ba_st_free(st);
}

static void expect_load_fail(const char *path, int status, const char *sub)
{
    char err[BA_ERR_LEN] = "";
    ba_model *m = (ba_model *)&m;
    ba_data_spec spec;
    int rc = ba_checkpoint_load(path, &m, &spec, err);
    if (rc != status || !strstr(err, sub))
        fail_msg("expected status %d with '%s', got %d: %s", status, sub, rc, err);
    assert_null(m);
}

static void test_checkpoint_corrupt(void **state)
{
    (void)state;
    char err[BA_ERR_LEN] = "";
    const char *p = path_of("good.ckpt"), *q = path_of("bad.ckpt");
    ba_data_spec spec;
    ba_model *m = make_model(BA_TASK_BRACKETS, BA_ATTN_BOLTZMANN, 1, 7, &spec);
    assert_int_equal(ba_checkpoint_save(p, m, &spec, NULL, NULL, 0, err), BA_OK);

    /* The unchanged rewrite loads: the helper itself is sound. */
    rewrite(p, q, NULL, 0, NULL);
    ba_model *r;
    assert_int_equal(ba_checkpoint_load(q, &r, NULL, err), BA_OK);
    ba_model_free(r);

    size_t n;
    unsigned char *full = slurp(p, &n);
    write_bytes(q, full, n / 2);
    expect_load_fail(q, BA_ERR_FORMAT, "data_offsets");
    write_bytes(q, full, 5);
    expect_load_fail(q, BA_ERR_FORMAT, "too short");
    free(full);
    expect_load_fail(path_of("missing.ckpt"), BA_ERR_IO, "missing.ckpt");

    rewrite(p, q, "head.bias", 's', NULL);
    expect_load_fail(q, BA_ERR_FORMAT, "tensor 'head.bias' has shape [1, 6] in the file but [6]");
    rewrite(p, q, "blocks.1.attn.J", 'n', NULL);
    expect_load_fail(q, BA_ERR_FORMAT, "tensor 'blocks.1.attn.J' value [1] = nan is not finite");
    rewrite(p, q, "blocks.0.ln2.bias", 'd', NULL);
    expect_load_fail(q, BA_ERR_FORMAT, "tensor 'blocks.0.ln2.bias' is missing");
    rewrite(p, q, NULL, 'x', NULL);
    expect_load_fail(q, BA_ERR_FORMAT, "'blocks.9.extra' in the file is not a parameter");
    rewrite(p, q, "pos_emb", 't', NULL);
    expect_load_fail(q, BA_ERR_FORMAT, "tensor 'pos_emb' has dtype F64, expected F32");
    rewrite(p, q, NULL, 'm', NULL);
    expect_load_fail(q, BA_ERR_FORMAT, "no \"config\"");

    /* Config problems, including a config that no longer matches the
     * tensors and one beyond the engine's limit. */
    ba_config c = *ba_model_config(m);
    c.attn = BA_ATTN_SOFTMAX;
    char *j = ba_config_to_json(&c, &spec);
    rewrite(p, q, NULL, 'c', j);
    expect_load_fail(q, BA_ERR_FORMAT, "'blocks.0.attn.J' in the file is not a parameter");
    free(j);
    c = *ba_model_config(m);
    c.n_embd = 16;
    j = ba_config_to_json(&c, &spec);
    rewrite(p, q, NULL, 'c', j);
    expect_load_fail(q, BA_ERR_FORMAT, "tensor 'tok_emb' has shape [4, 8] in the file but [4, 16]");
    free(j);
    c = *ba_model_config(m);
    c.block_size = c.out_size = 30;
    j = ba_config_to_json(&c, &spec);
    rewrite(p, q, NULL, 'c', j);
    expect_load_fail(q, BA_ERR_LIMIT, "T = 30");
    free(j);
    /* A sampler in the config travels with the checkpoint; one without
     * the key (written before samplers existed) loads as exact; a bad one
     * is named. */
    c = *ba_model_config(m);
    c.sampler = ba_sampler_default(BA_SAMPLER_SA);
    c.sampler.shots = 99, c.sampler.beta0 = 0.25;
    j = ba_config_to_json(&c, &spec);
    rewrite(p, q, NULL, 'c', j);
    free(j);
    assert_int_equal(ba_checkpoint_load(q, &r, NULL, err), BA_OK);
    assert_config_equal(ba_model_config(r), &c);
    ba_model_free(r);
    c = *ba_model_config(m);
    j = ba_config_to_json(&c, &spec);
    char *cut = strstr(j, ",\"sampler\":");
    assert_non_null(cut);
    strcpy(cut, "}");
    rewrite(p, q, NULL, 'c', j);
    free(j);
    assert_int_equal(ba_checkpoint_load(q, &r, NULL, err), BA_OK);
    assert_int_equal(ba_model_config(r)->sampler.kind, BA_SAMPLER_EXACT);
    ba_model_free(r);
    j = ba_config_to_json(&c, &spec);
    cut = strstr(j, ",\"sampler\":");
    char bad[4096];
    snprintf(bad, sizeof bad, "%.*s,\"sampler\":{\"kind\":\"sa\",\"sweeps\":-3}}",
             (int)(cut - j), j);
    free(j);
    rewrite(p, q, NULL, 'c', bad);
    expect_load_fail(q, BA_ERR_FORMAT, "config field 'sampler': sa sweeps = -3");
    rewrite(p, q, NULL, 'c', "{\"task\":\"brackets\"}");
    expect_load_fail(q, BA_ERR_FORMAT, "checkpoint config: config field 'attn' is missing");
    rewrite(p, q, NULL, 'c', "not json");
    expect_load_fail(q, BA_ERR_FORMAT, "not valid JSON");

    /* Saving refuses what loading would refuse. */
    const char *k[] = {"config"}, *v[] = {"{}"};
    assert_int_equal(ba_checkpoint_save(q, m, &spec, k, v, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "'config' is reserved"));
    ba_real *params = ba_model_params(m);
    ba_tensor_info ti;
    assert_int_equal(ba_model_tensor(m, ba_model_find_tensor(m, "head.weight"), &ti), BA_OK);
    params[ti.offset + 3] = (ba_real)INFINITY;
    remove(q);
    assert_int_equal(ba_checkpoint_save(q, m, &spec, NULL, NULL, 0, err), BA_ERR_NUMERIC);
    assert_non_null(strstr(err, "'head.weight'[3] = inf"));
    assert_int_equal(access(q, F_OK), -1);
    assert_int_equal(ba_checkpoint_save(NULL, m, &spec, NULL, NULL, 0, err), BA_ERR_ARG);
    assert_int_equal(ba_checkpoint_load(p, NULL, NULL, err), BA_ERR_ARG);
    /* a data description the model cannot take is refused before writing */
    spec.task = BA_TASK_CHARLM;
    assert_int_equal(ba_checkpoint_save(q, m, &spec, NULL, NULL, 0, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "charlm needs a token head"));
    ba_model_free(m);
}

static void test_grads_save(void **state)
{
    (void)state;
    char err[BA_ERR_LEN] = "";
    ba_data_spec spec;
    ba_model *m = make_model(BA_TASK_CHARLM, BA_ATTN_COUPLING, 1, 3, &spec);
    size_t P = ba_model_num_params(m);
    ba_real *g = ba_model_grads(m);
    for (size_t i = 0; i < P; i++)
        g[i] = (ba_real)((double)i * 0.25 - 3.0);
    g[2] = (ba_real)NAN; /* written as is */
    const char *p = path_of("grads.safetensors");
    assert_int_equal(ba_grads_save(p, m, 1.25, err), BA_OK);
    ba_st *st;
    assert_int_equal(ba_st_read(&st, p, err), BA_OK);
    int nt = ba_model_num_tensors(m);
    assert_int_equal(ba_st_count(st), nt + 1);
    const ba_st_tensor *l = ba_st_get(st, 0);
    assert_string_equal(l->name, "loss");
    assert_int_equal(l->dtype, BA_DT_F32);
    assert_int_equal(l->ndim, 1);
    assert_int_equal(l->shape[0], 1);
    float lv;
    memcpy(&lv, l->data, 4);
    assert_true(lv == 1.25f);
    for (int i = 0; i < nt; i++) {
        ba_tensor_info ti;
        assert_int_equal(ba_model_tensor(m, i, &ti), BA_OK);
        const ba_st_tensor *t = ba_st_find(st, ti.name);
        assert_non_null(t);
        assert_ptr_equal(t, ba_st_get(st, i + 1));
        assert_int_equal(t->dtype, BA_DT_F32);
        assert_int_equal(t->ndim, ti.ndim);
        for (int d = 0; d < ti.ndim; d++)
            assert_int_equal(t->shape[d], ti.shape[d]);
        assert_int_equal(t->nbytes, ti.size * 4);
        for (size_t j = 0; j < ti.size; j++) {
            float v;
            memcpy(&v, (const char *)t->data + 4 * j, 4);
            size_t at = ti.offset + j;
            if (at == 2)
                assert_true(isnan(v));
            else
                assert_true(v == (float)g[at]);
        }
    }
    ba_st_free(st);
    ba_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_batch_check),
        cmocka_unit_test(test_checkpoint_roundtrip),
        cmocka_unit_test(test_checkpoint_corrupt),
        cmocka_unit_test(test_grads_save),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
