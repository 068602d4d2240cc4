/* The library's trainer (float library): the worked example at the top of
 * boltzattn.h, records and settings through their JSON forms and back, and
 * ba_model_init_weights_std against ba_model_init_weights. (Exact resume
 * and the files of a run: test_resume.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boltzattn.h"

/* ------------------------------------------------------- JSON forms */

static void test_settings(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_train_settings s = ba_train_settings_default(1000), r;
    assert_int_equal(ba_train_settings_validate(&s, err), BA_OK);
    assert_int_equal(s.warmup, 50);
    assert_int_equal(s.eval_every, 100);
    assert_int_equal(s.save_every, 100);
    s.seed = UINT64_MAX, s.lr = 1.0 / 3.0, s.j_init_std = 0.25;
    char *j = ba_train_settings_to_json(&s, "some/text.txt");
    assert_non_null(strstr(j, "\"seed\":\"18446744073709551615\""));
    char *data = NULL;
    assert_int_equal(ba_train_settings_from_json(j, &r, &data, err), BA_OK);
    assert_string_equal(data, "some/text.txt");
    assert_true(r.seed == s.seed && r.lr == s.lr && r.steps == s.steps && r.batch == s.batch);
    assert_true(fabs(r.min_lr_frac - s.min_lr_frac) < 1e-15);
    /* GPT-2's init std is left out of the text (records made before the
     * setting existed read the same) and read back as 0.02 */
    assert_null(strstr(j, "\"init_std\""));
    assert_true(r.init_std == BA_INIT_STD && s.init_std == 0.02);
    free(data), free(j);
    s.init_std = 0.125;
    j = ba_train_settings_to_json(&s, NULL);
    assert_non_null(strstr(j, "\"init_std\":0.125"));
    assert_int_equal(ba_train_settings_from_json(j, &r, NULL, err), BA_OK);
    assert_true(r.init_std == 0.125);
    free(j);
    assert_int_equal(ba_train_settings_from_json(
                         "{\"steps\":5,\"batch\":2,\"lr\":0.1,\"min_lr\":0.01,\"warmup\":0,"
                         "\"weight_decay\":0,\"beta1\":0.9,\"beta2\":0.99,\"clip\":1,"
                         "\"j_init_std\":0,\"init_std\":\"big\",\"seed\":\"1\",\"eval_every\":0,"
                         "\"eval_items\":1,\"log_every\":1,\"save_every\":0}",
                         &r, NULL, err),
                     BA_ERR_FORMAT);
    assert_non_null(strstr(err, "'init_std' is not a number"));
    for (int i = 0; i < 3; i++) {
        ba_train_settings t = ba_train_settings_default(1000);
        t.init_std = (double[]){0.0, -0.1, 1.5}[i];
        assert_int_equal(ba_train_settings_validate(&t, err), BA_ERR_ARG);
        assert_non_null(strstr(err, "init_std = "));
    }
    static const struct {
        const char *field;
        double value;
        const char *msg;
    } bad[] = {{"steps", 0, "steps = 0"},     {"warmup", 2000, "warmup = 2000"},
               {"batch", 0, "batch = 0"},     {"lr", -1, "lr = -1"},
               {"eval_items", 0, "eval_items"}, {"log_every", 0, "log_every"},
               {"save_every", -1, "save_every"}, {"clip", -1, "clip = -1"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ba_train_settings t = ba_train_settings_default(1000);
        if (!strcmp(bad[i].field, "steps"))
            t.steps = (long)bad[i].value;
        else if (!strcmp(bad[i].field, "warmup"))
            t.warmup = (long)bad[i].value;
        else if (!strcmp(bad[i].field, "batch"))
            t.batch = (int)bad[i].value;
        else if (!strcmp(bad[i].field, "lr"))
            t.lr = bad[i].value;
        else if (!strcmp(bad[i].field, "eval_items"))
            t.eval_items = (int)bad[i].value;
        else if (!strcmp(bad[i].field, "log_every"))
            t.log_every = (int)bad[i].value;
        else if (!strcmp(bad[i].field, "save_every"))
            t.save_every = (int)bad[i].value;
        else
            t.opt.grad_clip = bad[i].value;
        assert_int_equal(ba_train_settings_validate(&t, err), BA_ERR_ARG);
        if (!strstr(err, bad[i].msg))
            fail_msg("%s: '%s' lacks '%s'", bad[i].field, err, bad[i].msg);
    }
    assert_int_equal(ba_train_settings_from_json("{\"steps\":5}", &r, NULL, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "lack a number 'batch'"));
    assert_int_equal(ba_train_settings_from_json("[]", &r, NULL, err), BA_ERR_FORMAT);
}

static void test_records(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_record r, b;
    memset(&r, 0, sizeof r);
    r.kind = BA_REC_TRAIN, r.step = 120, r.loss = 1.2345678, r.lr = 0.00123456789;
    r.grad_norm = 0.5, r.steps_per_s = 12.34567, r.elapsed_s = 9.8765;
    char *j = ba_record_to_json(&r);
    assert_string_equal(j, "{\"event\":\"train\",\"step\":120,\"loss\":1.234568,"
                           "\"lr\":0.00123457,\"grad_norm\":0.5,\"steps_per_s\":12.3457,"
                           "\"elapsed_s\":9.877}");
    assert_int_equal(ba_record_from_json(j, &b, err), BA_OK);
    assert_int_equal(b.kind, BA_REC_TRAIN);
    assert_int_equal(b.step, 120);
    assert_true(b.loss == 1.234568);
    free(j);
    memset(&r, 0, sizeof r);
    r.kind = BA_REC_QUALITY, r.step = 7, r.n = 8, r.instances = 4, r.tv = 0.25;
    r.kl = INFINITY, r.beta_eff = NAN, r.r2 = NAN, r.tv_eff = NAN, r.fitted = 0;
    r.shots = 0;
    j = ba_record_to_json(&r);
    assert_non_null(strstr(j, "\"kl\":null"));
    assert_non_null(strstr(j, "\"beta_eff\":null"));
    assert_null(strstr(j, "tv_shot_floor")); /* none without shots */
    assert_int_equal(ba_record_from_json(j, &b, err), BA_OK);
    assert_true(isinf(b.kl) && isnan(b.beta_eff));
    assert_int_equal(b.n, 8);
    free(j);
    memset(&r, 0, sizeof r);
    r.kind = BA_REC_FINAL, r.step = 40, r.has_exact = 1;
    r.eval.loss = 0.5, r.eval.ppl = exp(0.5), r.eval.accuracy = 0.75;
    r.eval.n_items = 14, r.eval.n_targets = 38;
    r.exact = r.eval;
    r.exact.accuracy = 1;
    r.train_s = 1.5, r.train_s_total = 3.25, r.steps_per_s = 26.6667;
    j = ba_record_to_json(&r);
    assert_int_equal(ba_record_from_json(j, &b, err), BA_OK);
    assert_int_equal(b.has_exact, 1);
    assert_true(b.exact.accuracy == 1 && b.eval.accuracy == 0.75);
    assert_int_equal(b.eval.n_targets, 38);
    assert_true(b.train_s_total == 3.25);
    free(j);
    assert_int_equal(ba_record_from_json("{\"event\":\"party\",\"step\":1}", &b, err),
                     BA_ERR_FORMAT);
    assert_int_equal(ba_record_from_json("{\"event\":\"eval\",\"step\":-4}", &b, err),
                     BA_ERR_FORMAT);
    assert_int_equal(ba_record_from_json("not json", &b, err), BA_ERR_FORMAT);
}

/* ba_model_init_weights_std draws what ba_model_init_weights draws, scaled:
 * at 0.02 the same bits, at 0.1 five times every weight (to float's
 * rounding), LayerNorm gains 1 and biases 0 either way. */
static void test_init_std(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    if (ba_dataset_brackets(&d, 8, 1, 64, 1234, err))
        fail_msg("dataset: %s", err);
    ba_config cfg = ba_config_default(BA_ATTN_SOFTMAX, 8);
    ba_config_set_data(&cfg, d);
    cfg.n_embd = 16, cfg.n_head = 2, cfg.n_layer = 2;
    ba_model *m[3];
    for (int i = 0; i < 3; i++) {
        if (ba_model_init(&m[i], &cfg, err))
            fail_msg("model: %s", err);
        ba_rng r;
        ba_rng_seed(&r, 3);
        if (i == 0)
            ba_model_init_weights(m[i], &r, 0.0);
        else
            ba_model_init_weights_std(m[i], &r, i == 1 ? 0.02 : 0.1, 0.0);
    }
    size_t P = ba_model_num_params(m[0]), scaled = 0;
    const ba_real *a = ba_model_params(m[0]), *b = ba_model_params(m[1]),
                  *c = ba_model_params(m[2]); // (P) each
    assert_memory_equal(a, b, P * sizeof(ba_real));
    for (size_t i = 0; i < P; i++) {
        if (a[i] == 0 || a[i] == 1) { /* biases, LayerNorm gains */
            assert_true(c[i] == a[i]);
            continue;
        }
        if (fabs((double)c[i] - 5.0 * (double)a[i]) > 1e-6 * fabs((double)c[i]))
            fail_msg("parameter %zu: %.9g at 0.1 against %.9g at 0.02", i, (double)c[i],
                     (double)a[i]);
        scaled++;
    }
    assert_true(scaled > P / 2);
    for (int i = 0; i < 3; i++)
        ba_model_free(m[i]);
    ba_dataset_free(d);
}

/* The worked example at the top of boltzattn.h, as written there (puts and
 * return 1 become failures): it compiles and learns. */
static int header_example(double *acc)
{
    char err[BA_ERR_LEN];
    ba_dataset *data;
    if (ba_dataset_brackets(&data, 8, 1, 512, 1234, err)) { puts(err); return 1; }
    ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, 8);
    ba_config_set_data(&cfg, data);        // vocabulary, head and output sizes
    ba_train_settings s = ba_train_settings_default(300);
    s.eval_every = s.save_every = 0;      // only the final evaluation
    ba_trainer *t;
    if (ba_trainer_init(&t, &cfg, data, NULL, &s, err)) { puts(err); return 1; }
    ba_train_outcome out;                 // a directory instead of NULL keeps
    if (ba_trainer_run(t, NULL, NULL, &out, err)) { puts(err); return 1; } // the files
    printf("held-out accuracy %.2f %%\n", 100 * out.final.accuracy);
    *acc = out.final.accuracy;
    ba_trainer_free(t);
    ba_dataset_free(data);
    return 0;
}

/* brackets T = 8 has a position baseline of 0.789: the example clears it. */
static void test_header_example(void **state)
{
    (void)state;
    double acc = 0;
    assert_int_equal(header_example(&acc), 0);
    assert_true(acc > 0.85);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_example),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_init_std),
        cmocka_unit_test(test_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
