/* Tests of the config's JSON form (ba_config_to_json, ba_config_from_json):
 * round trips with the data description, the errors, and the sampler's
 * fields for every kind. */
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

/* ------------------------------------------------------ config JSON */

/* A model config with the data description it is stored with. */
typedef struct {
    ba_config c;
    ba_data_spec d;
} full_config;

static char *to_json(const full_config *f) { return ba_config_to_json(&f->c, &f->d); }
static int from_json(const char *j, full_config *f, char *err)
{
    return ba_config_from_json(j, &f->c, &f->d, err);
}
static void assert_full_equal(const full_config *a, const full_config *b)
{
    assert_config_equal(&a->c, &b->c);
    assert_spec_equal(&a->d, &b->d);
}

static full_config charlm_config(void)
{
    full_config f;
    f.c = ba_config_default(BA_ATTN_BOLTZMANN, 12);
    f.d = ba_data_spec_default(BA_TASK_CHARLM);
    const uint8_t vocab[] = {'\n', ' ', 'z', 'a', 0, 255, 128};
    f.c.vocab_size = f.c.out_size = f.d.vocab_size = (int)sizeof vocab;
    memcpy(f.d.vocab, vocab, sizeof vocab);
    f.c.n_layer = 3;
    f.c.n_head = 4;
    f.c.n_embd = 32;
    f.c.ffn = 0;
    f.d.kinds = 3;
    f.d.n_heldout = 77;
    f.d.data_seed = (UINT64_C(1) << 63) + 5;
    return f;
}

static void test_config_roundtrip(void **state)
{
    (void)state;
    char err[BA_ERR_LEN] = "";
    full_config c = charlm_config(), r;
    char *j = to_json(&c);
    assert_non_null(j);
    assert_non_null(strstr(j, "\"data_seed\":\"9223372036854775813\""));
    assert_non_null(strstr(j, "\"ffn\":false"));
    assert_non_null(strstr(j, "\"attn\":\"boltzmann\""));
    assert_non_null(strstr(j, "\"head\":\"token\""));
    assert_non_null(strstr(j, "\"couplings\":\"absolute\""));
    assert_non_null(strstr(j, "\"band\":0"));
    assert_non_null(strstr(j, "\"field_bias\":\"none\""));
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(from_json(j, &r, err), BA_OK);
    assert_full_equal(&c, &r);
    free(j);
    /* the long-context fields */
    c.c.couplings = BA_COUPLINGS_RELATIVE, c.c.band = 4, c.c.pos_emb = 0;
    c.c.field_bias = BA_FIELD_BIAS_LOG_N, c.c.engine = BA_ENGINE_BAND;
    j = to_json(&c);
    assert_non_null(j);
    assert_non_null(strstr(j, "\"couplings\":\"relative\""));
    assert_non_null(strstr(j, "\"band\":4"));
    assert_non_null(strstr(j, "\"field_bias\":\"log-n\""));
    assert_non_null(strstr(j, "\"pos_emb\":false"));
    assert_non_null(strstr(j, "\"engine\":\"band\""));
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(from_json(j, &r, err), BA_OK);
    assert_full_equal(&c, &r);
    free(j);
    /* ALiBi (issue 43): by its name, and back */
    c.c.pos_emb = BA_POS_ALIBI;
    j = to_json(&c);
    assert_non_null(j);
    assert_non_null(strstr(j, "\"pos_emb\":\"alibi\""));
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(from_json(j, &r, err), BA_OK);
    assert_full_equal(&c, &r);
    free(j);
    c = charlm_config();

    full_config b;
    b.c = ba_config_default(BA_ATTN_SIGMOID, 40);
    b.d = ba_data_spec_default(BA_TASK_BRACKETS);
    b.d.kinds = 2;
    b.c.vocab_size = 4;
    b.c.out_size = 40;
    b.c.head = BA_HEAD_POINTER;
    b.d.data_seed = UINT64_MAX;
    j = to_json(&b);
    assert_non_null(j);
    assert_null(strstr(j, "vocab\":[")); /* no byte table for brackets */
    assert_int_equal(from_json(j, &r, err), BA_OK);
    assert_full_equal(&b, &r);
    free(j);
    assert_null(ba_config_to_json(NULL, NULL));

    /* The model alone: no task, no data fields; it reads back without a
     * data description, and is refused where one is asked for. */
    j = ba_config_to_json(&b.c, NULL);
    assert_null(strstr(j, "task"));
    assert_null(strstr(j, "data_seed"));
    ba_config m;
    assert_int_equal(ba_config_from_json(j, &m, NULL, err), BA_OK);
    assert_config_equal(&b.c, &m);
    assert_int_equal(ba_config_from_json(j, &m, &r.d, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "config field 'task' is missing"));
    free(j);

    /* Optional fields default; extra fields are ignored; data_seed may be
     * a number. */
    const char *minimal =
        "{\"task\":\"brackets\",\"attn\":\"coupling\",\"n_layer\":2,\"n_head\":2,"
        "\"n_embd\":16,\"block_size\":8,\"vocab_size\":2,\"out_size\":8,\"ffn\":true,"
        "\"comment\":[1,2,{}]}";
    assert_int_equal(from_json(minimal, &r, err), BA_OK);
    assert_int_equal(r.c.engine, BA_ENGINE_AUTO);
    /* written before long contexts: absolute couplings, no band, no bias,
     * learned positions */
    assert_int_equal(r.c.couplings, BA_COUPLINGS_ABSOLUTE);
    assert_int_equal(r.c.band, 0);
    assert_int_equal(r.c.field_bias, BA_FIELD_BIAS_NONE);
    assert_int_equal(r.c.pos_emb, 1);
    assert_int_equal(r.d.kinds, 1);
    assert_int_equal(r.d.n_heldout, 2000);
    assert_true(r.d.data_seed == 1234);
    assert_int_equal(r.c.ffn, 1);
    assert_int_equal(r.c.attn, BA_ATTN_COUPLING);
    /* written before heads were named: brackets means a pointer head */
    assert_int_equal(r.c.head, BA_HEAD_POINTER);
    const char *numseed =
        "{\"task\":\"brackets\",\"attn\":\"softmax\",\"n_layer\":1,\"n_head\":1,"
        "\"n_embd\":8,\"block_size\":8,\"vocab_size\":2,\"out_size\":8,\"ffn\":true,"
        "\"data_seed\":4503599627370497}";
    assert_int_equal(from_json(numseed, &r, err), BA_OK);
    assert_true(r.d.data_seed == UINT64_C(4503599627370497));
}

/* from_json of base with `field` replaced by `repl` (NULL: removed). */
static int config_with(const char *field, const char *repl, char *err, full_config *out)
{
    full_config c = charlm_config();
    c.c.attn = BA_ATTN_SOFTMAX;
    char *j = to_json(&c);
    assert_non_null(j);
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", field);
    char *at = strstr(j, key);
    assert_non_null(at);
    /* The value ends at the next ',' or '}' outside brackets. */
    char *end = at + strlen(key);
    int depth = 0, in_str = 0;
    for (; *end; end++) {
        if (in_str) {
            if (*end == '\\')
                end++;
            else if (*end == '"')
                in_str = 0;
        } else if (*end == '"')
            in_str = 1;
        else if (*end == '[' || *end == '{')
            depth++;
        else if ((*end == ']' || *end == '}') && depth > 0)
            depth--;
        else if ((*end == ',' || *end == '}') && depth == 0)
            break;
    }
    char buf[4096];
    if (repl)
        snprintf(buf, sizeof buf, "%.*s%s%s%s", (int)(at - j), j, key, repl, end);
    else if (*end == ',')
        snprintf(buf, sizeof buf, "%.*s%s", (int)(at - j), j, end + 1);
    else
        snprintf(buf, sizeof buf, "%.*s%s", (int)(at - j - 1), j, end);
    free(j);
    full_config tmp;
    return from_json(buf, out ? out : &tmp, err);
}

static void expect_config(const char *field, const char *repl, int status, const char *sub)
{
    char err[BA_ERR_LEN] = "";
    int rc = config_with(field, repl, err, NULL);
    if (rc != status || !strstr(err, sub))
        fail_msg("%s -> %s: expected %d with '%s', got %d: %s", field, repl ? repl : "(removed)",
                 status, sub, rc, err);
}

static void test_config_errors(void **state)
{
    (void)state;
    const char *required[] = {"task", "attn", "n_layer", "n_head", "n_embd", "block_size",
                              "vocab_size", "out_size", "ffn", "vocab"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char sub[64];
        snprintf(sub, sizeof sub, "'%s' is missing", required[i]);
        expect_config(required[i], NULL, BA_ERR_FORMAT, sub);
    }
    /* The optional ones may go. */
    char err[BA_ERR_LEN] = "";
    full_config r;
    assert_int_equal(config_with("engine", NULL, err, &r), BA_OK);
    assert_int_equal(config_with("head", NULL, err, &r), BA_OK);
    assert_int_equal(r.c.head, BA_HEAD_TOKEN);
    assert_int_equal(config_with("kinds", NULL, err, &r), BA_OK);
    assert_int_equal(r.d.kinds, 1);
    assert_int_equal(config_with("n_heldout", NULL, err, &r), BA_OK);
    assert_int_equal(config_with("data_seed", NULL, err, &r), BA_OK);
    assert_true(r.d.data_seed == 1234);

    expect_config("attn", "\"flash\"", BA_ERR_FORMAT, "unknown attention variant 'flash'");
    expect_config("attn", "2", BA_ERR_FORMAT, "'attn' is a number, expected a string");
    expect_config("task", "\"chess\"", BA_ERR_FORMAT, "unknown task 'chess'");
    expect_config("engine", "\"gpu\"", BA_ERR_FORMAT, "unknown engine 'gpu'");
    expect_config("head", "\"tree\"", BA_ERR_FORMAT, "unknown head 'tree'");
    expect_config("head", "\"pointer\"", BA_ERR_ARG, "for a pointer head");
    expect_config("n_head", "\"4\"", BA_ERR_FORMAT, "'n_head' is a string, expected an integer");
    expect_config("n_head", "2.5", BA_ERR_FORMAT, "'n_head' = 2.5 is not an int");
    expect_config("n_layer", "1e10", BA_ERR_FORMAT, "'n_layer' = 10000000000 is not an int");
    expect_config("ffn", "1", BA_ERR_FORMAT, "'ffn' is a number, expected true or false");
    expect_config("data_seed", "\"-1\"", BA_ERR_FORMAT, "'data_seed' = '-1'");
    expect_config("data_seed", "\"18446744073709551616\"", BA_ERR_FORMAT, "below 2^64");
    expect_config("data_seed", "\"\"", BA_ERR_FORMAT, "'data_seed' = ''");
    expect_config("data_seed", "1e17", BA_ERR_FORMAT, "decimal string");
    expect_config("data_seed", "null", BA_ERR_FORMAT, "'data_seed' is null");
    expect_config("vocab", "[1,2,3]", BA_ERR_FORMAT, "'vocab' has 3 entries, vocab_size is 7");
    expect_config("vocab", "[1,2,3,4,5,6,1]", BA_ERR_FORMAT, "'vocab[6]' = 1 appears twice");
    expect_config("vocab", "[1,2,3,4,5,6,256]", BA_ERR_FORMAT, "'vocab[6]' = 256 is not a byte");
    expect_config("vocab", "[1,2,3,4,5,6,\"a\"]", BA_ERR_FORMAT, "'vocab[6]' = a string");
    expect_config("vocab", "\"abc\"", BA_ERR_FORMAT, "'vocab' is a string");
    /* ba_config_validate's verdict passes through. */
    expect_config("n_embd", "30", BA_ERR_ARG, "n_embd = 30 is not divisible by n_head = 4");
    expect_config("vocab_size", "300", BA_ERR_ARG, "out_size = 7 must equal vocab_size = 300");
    expect_config("vocab_size", "70000", BA_ERR_ARG, "vocab_size = 70000");
    expect_config("attn", "\"boltzmann\"", BA_OK, "");
    /* the long-context fields: optional, typed, and checked against attn */
    assert_int_equal(config_with("couplings", NULL, err, &r), BA_OK);
    assert_int_equal(config_with("band", NULL, err, &r), BA_OK);
    assert_int_equal(config_with("field_bias", NULL, err, &r), BA_OK);
    assert_int_equal(config_with("pos_emb", NULL, err, &r), BA_OK);
    assert_int_equal(r.c.pos_emb, 1);
    expect_config("couplings", "\"toeplitz\"", BA_ERR_FORMAT, "unknown couplings 'toeplitz'");
    expect_config("field_bias", "\"log\"", BA_ERR_FORMAT, "unknown field bias 'log'");
    expect_config("band", "\"8\"", BA_ERR_FORMAT, "'band' is a string, expected an integer");
    expect_config("pos_emb", "0", BA_ERR_FORMAT,
                  "'pos_emb' is a number, expected true, false or a name (rope, alibi)");
    expect_config("pos_emb", "\"xpos\"", BA_ERR_FORMAT,
                  "'pos_emb': unknown position encoding 'xpos'");
    assert_int_equal(config_with("pos_emb", "\"alibi\"", err, &r), BA_OK);
    assert_int_equal(r.c.pos_emb, BA_POS_ALIBI);
    expect_config("band", "-1", BA_ERR_ARG, "band W = -1 must not be negative");
    /* the base config is softmax: no couplings to band or make relative */
    expect_config("band", "4", BA_ERR_ARG, "softmax attention has none");
    expect_config("couplings", "\"relative\"", BA_ERR_ARG, "softmax attention has none");
    expect_config("field_bias", "\"log-n\"", BA_ERR_ARG, "does nothing to softmax");
    expect_config("engine", "\"band\"", BA_OK, "");
    full_config c = charlm_config(); /* boltzmann, T = 12 */
    c.c.block_size = 64;
    char *j = to_json(&c);
    r.c.n_layer = -99;
    assert_int_equal(from_json(j, &r, err), BA_ERR_LIMIT);
    assert_non_null(strstr(err, "T = 64"));
    assert_int_equal(r.c.n_layer, -99); /* untouched on failure */
    free(j);

    /* Text two JSON readers read differently is refused: a repeated key at
     * any depth (cJSON would take the first, Python's json the last), a
     * \u0000 escape (cut there), a byte order mark (skipped). */
    j = to_json(&c);
    char twice[2048];
    snprintf(twice, sizeof twice, "{\"attn\":\"softmax\",%s", j + 1);
    assert_int_equal(from_json(twice, &r, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "config key 'attn' appears twice"));
    const char *so = strstr(j, "\"sampler\":{");
    assert_non_null(so);
    so += strlen("\"sampler\":{");
    snprintf(twice, sizeof twice, "%.*s\"kind\":\"gibbs\",%s", (int)(so - j), j, so);
    assert_int_equal(from_json(twice, &r, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "config key 'kind' appears twice in 'sampler'"));
    snprintf(twice, sizeof twice, "\xef\xbb\xbf%s", j);
    assert_int_equal(from_json(twice, &r, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "config starts with a UTF-8 byte order mark"));
    snprintf(twice, sizeof twice, "{\"x\":\"a\\u0000\",%s", j + 1);
    assert_int_equal(from_json(twice, &r, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "config byte 7: the escape \\u0000"));
    free(j);
    ba_sampler smp;
    assert_int_equal(ba_sampler_from_json("{\"kind\":\"sa\",\"kind\":\"exact\"}", &smp, err),
                     BA_ERR_FORMAT);
    assert_non_null(strstr(err, "sampler key 'kind' appears twice"));

    assert_int_equal(from_json("{\"task\":", &r, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "not valid JSON"));
    assert_int_equal(from_json("[]", &r, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "config is an array, not a JSON object"));
    assert_int_equal(from_json("{} {}", &r, err), BA_ERR_FORMAT);
    assert_int_equal(from_json(NULL, &r, err), BA_ERR_ARG);
    assert_int_equal(ba_config_from_json("{}", NULL, NULL, err), BA_ERR_ARG);
    assert_int_equal(from_json("{}", &r, NULL), BA_ERR_FORMAT);
}

/* The sampler in the config: every field of every kind round-trips
 * exactly (doubles too), a config without "sampler" (written before
 * samplers existed) reads as exact, and bad values are BA_ERR_FORMAT
 * naming the field. */
static void test_config_sampler(void **state)
{
    (void)state;
    char err[BA_ERR_LEN] = "";
    full_config f, q;
    f.c = ba_config_default(BA_ATTN_BOLTZMANN, 8);
    f.d = ba_data_spec_default(BA_TASK_BRACKETS);
    f.c.vocab_size = 2, f.c.out_size = 8, f.c.head = BA_HEAD_POINTER;
    ba_config *c = &f.c, *r = &q.c;
    char *j = to_json(&f);
    assert_non_null(strstr(j, "\"sampler\":{\"kind\":\"exact\"}"));
    free(j);
    for (int k = BA_SAMPLER_DIRECT; k <= BA_SAMPLER_SA; k++) {
        c->sampler = ba_sampler_default((ba_sampler_kind)k);
        /* values away from the defaults, doubles that need 17 digits */
        c->sampler.shots = 777 + k;
        c->sampler.beta_assumed = 0.1 + k / 3.0;
        c->sampler.tau = 2.0 / 3.0, c->sampler.gamma = 1.0 / 7.0, c->sampler.lambda = M_PI;
        c->sampler.trotter_steps = 123, c->sampler.order = 1;
        c->sampler.chains = 7, c->sampler.burnin = 0, c->sampler.thin = 3;
        c->sampler.sweeps = 55, c->sampler.beta0 = 0.3;
        j = to_json(&f);
        assert_non_null(j);
        memset(&q, 0x5a, sizeof q);
        if (from_json(j, &q, err) != BA_OK)
            fail_msg("%s: %s", j, err);
        assert_full_equal(&f, &q);
        free(j);
    }
    /* no "sampler": exact */
    c->sampler = ba_sampler_default(BA_SAMPLER_EXACT);
    j = to_json(&f);
    char *at = strstr(j, ",\"sampler\":{\"kind\":\"exact\"}");
    assert_non_null(at);
    memmove(at, at + strlen(",\"sampler\":{\"kind\":\"exact\"}"),
            strlen(at + strlen(",\"sampler\":{\"kind\":\"exact\"}")) + 1);
    assert_null(strstr(j, "sampler"));
    r->sampler.kind = BA_SAMPLER_GIBBS;
    assert_int_equal(from_json(j, &q, err), BA_OK);
    assert_int_equal(r->sampler.kind, BA_SAMPLER_EXACT);
    free(j);

    /* parameters left out take the kind's defaults */
    const char *base = "{\"task\":\"brackets\",\"attn\":\"coupling\",\"n_layer\":1,"
                       "\"n_head\":1,\"n_embd\":8,\"block_size\":40,\"vocab_size\":2,"
                       "\"out_size\":40,\"ffn\":true,\"sampler\":";
    char buf[1024];
    snprintf(buf, sizeof buf, "%s{\"kind\":\"gibbs\",\"shots\":64}}", base);
    assert_int_equal(from_json(buf, &q, err), BA_OK);
    ba_sampler d = ba_sampler_default(BA_SAMPLER_GIBBS);
    d.shots = 64;
    assert_sampler_equal(&r->sampler, &d);
    assert_int_equal(r->block_size, 40); /* gibbs goes beyond the engine's 26 */

    static const struct {
        const char *sampler, *msg;
    } bad[] = {
        {"[]", "'sampler' is an array, expected an object"},
        {"{}", "'sampler.kind' is missing"},
        {"{\"kind\":3}", "'sampler.kind' is a number, expected a string"},
        {"{\"kind\":\"quantum\"}", "'sampler.kind': unknown sampler 'quantum'"},
        {"{\"kind\":\"gibbs\",\"shots\":\"64\"}", "'sampler.shots' is a string"},
        {"{\"kind\":\"gibbs\",\"shots\":6.5}", "'sampler.shots' = 6.5 is not an int"},
        {"{\"kind\":\"gibbs\",\"shots\":0}", "'sampler': shots = 0"},
        {"{\"kind\":\"gibbs\",\"chains\":9,\"shots\":4}", "'sampler': gibbs chains = 9"},
        {"{\"kind\":\"sa\",\"beta0\":null}", "'sampler.beta0' is null"},
        {"{\"kind\":\"sa\",\"beta0\":2}", "'sampler': sa beta0 = 2"},
        {"{\"kind\":\"dqa\",\"order\":3}", "'sampler': dqa order = 3"},
        {"{\"kind\":\"direct\",\"beta_assumed\":-1}", "'sampler': beta_assumed = -1"},
        {"{\"kind\":\"direct\"}", "T = 40 is too large for coupling attention with the direct"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s}", base, bad[i].sampler);
        int rc = from_json(buf, &q, err);
        int want = i + 1 < sizeof bad / sizeof bad[0] ? BA_ERR_FORMAT : BA_ERR_LIMIT;
        if (rc != want || !strstr(err, bad[i].msg))
            fail_msg("sampler %s: expected %d with '%s', got %d: %s", bad[i].sampler, want,
                     bad[i].msg, rc, err);
    }
    /* a sampler for softmax: ba_config_validate's verdict */
    snprintf(buf, sizeof buf,
             "{\"task\":\"brackets\",\"attn\":\"softmax\",\"n_layer\":1,\"n_head\":1,"
             "\"n_embd\":8,\"block_size\":8,\"vocab_size\":2,\"out_size\":8,\"ffn\":true,"
             "\"sampler\":{\"kind\":\"direct\"}}");
    assert_int_equal(from_json(buf, &q, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "boltzmann and coupling attention only"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_roundtrip),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_sampler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
