/* Tests of the recall task (multi-query associative recall): the layout
 * of a sequence checked by an independent reader, determinism by data
 * seed, the held-out set kept out of training (in spaces small enough to
 * enumerate), the sizes, the refusals and the data description's round
 * trip through the config JSON. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boltzattn.h"

/* ------------------------------------------------------------- helpers */

/* Independent checker of one item: in, tg (T) over vocabulary V with N
 * pairs. 1 when the first 2N tokens are N pairs "key value" with distinct
 * keys (0..V/2-1) and values (V/2..V-1), every later even offset holds a
 * context key whose target is that key's value and is followed by that
 * value, each run of N queries from the start of the queries is a
 * permutation of the context's keys, and every other target is -1. */
static int check_item(const int *in, const int *tg, int T, int V, int N)
{
    int K = V / 2, value[128], seen[128];
    for (int k = 0; k < K; k++)
        value[k] = -1;
    for (int i = 0; i < N; i++) {
        int k = in[2 * i], v = in[2 * i + 1];
        if (k < 0 || k >= K || value[k] >= 0 || v < K || v >= V)
            return 0;
        value[k] = v;
        if (tg[2 * i] != -1 || tg[2 * i + 1] != -1)
            return 0;
    }
    for (int q = 0; 2 * N + 2 * q < T; q++) {
        int t = 2 * N + 2 * q, k = in[t];
        if (q % N == 0)
            memset(seen, 0, sizeof seen);
        if (k < 0 || k >= K || value[k] < 0 || seen[k]++)
            return 0;
        if (tg[t] != value[k])
            return 0;
        if (t + 1 < T && (in[t + 1] != value[k] || tg[t + 1] != -1))
            return 0;
    }
    return 1;
}

static int n_targets(const int *tg, int T)
{
    int n = 0;
    for (int t = 0; t < T; t++)
        n += tg[t] >= 0;
    return n;
}

/* A sequence's number in base V (small spaces only). */
static long seq_code(const int *in, int T, int V)
{
    long c = 0;
    for (int t = 0; t < T; t++)
        c = c * V + in[t];
    return c;
}

/* -------------------------------------------------------------- tests */

static void test_layout(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    /* T - 2N odd (27 - 8 = 19: the last query is its key alone), even, and
     * exactly 4N; several rounds of queries at T = 64 */
    static const int cases[][3] = {{27, 16, 4}, {32, 16, 4}, {16, 16, 4}, {64, 64, 8},
                                   {4, 4, 1}, {9, 256, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int T = cases[c][0], V = cases[c][1], N = cases[c][2];
        ba_dataset *d;
        assert_int_equal(ba_dataset_recall(&d, T, V, N, 50, 99 + c, err), BA_OK);
        assert_int_equal(ba_dataset_task(d), BA_TASK_RECALL);
        assert_int_equal(ba_dataset_block_size(d), T);
        assert_int_equal(ba_dataset_vocab_size(d), V);
        assert_null(ba_dataset_vocab(d));
        assert_true(fabs(ba_dataset_position_baseline(d) - 2.0 / V) < 1e-15);
        int *in = malloc(sizeof(int) * 8 * (size_t)T), *tg = malloc(sizeof(int) * 8 * (size_t)T);
        assert_non_null(in);
        assert_non_null(tg);
        int nq = (T - 2 * N + 1) / 2;
        for (int i = 0; i < ba_dataset_num_eval(d); i++) {
            ba_dataset_eval_item(d, i, in, tg);
            assert_true(check_item(in, tg, T, V, N));
            assert_int_equal(n_targets(tg, T), nq);
        }
        ba_rng rng;
        ba_rng_seed(&rng, 5);
        for (int it = 0; it < 20; it++) {
            ba_dataset_train_batch(d, &rng, 8, in, tg);
            for (int b = 0; b < 8; b++) {
                assert_true(check_item(in + b * T, tg + b * T, T, V, N));
                assert_int_equal(n_targets(tg + b * T, T), nq);
            }
        }
        /* the checker can fail: a wrong target, a repeated query key */
        ba_dataset_eval_item(d, 0, in, tg);
        tg[2 * N] = tg[2 * N] == V - 1 ? V - 2 : tg[2 * N] + 1;
        assert_false(check_item(in, tg, T, V, N));
        ba_dataset_free(d);
        free(in);
        free(tg);
    }
}

/* Values are drawn with replacement, query orders afresh each round: over
 * many draws both show up (a generator that kept values distinct or the
 * queries in context order would pass the layout check). */
static void test_draws_vary(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    int T = 48, V = 16, N = 4, in[48], tg[48];
    assert_int_equal(ba_dataset_recall(&d, T, V, N, 10, 1, err), BA_OK);
    ba_rng rng;
    ba_rng_seed(&rng, 2);
    int repeated_value = 0, in_context_order = 0, rounds_differ = 0, draws = 400;
    for (int it = 0; it < draws; it++) {
        ba_dataset_train_batch(d, &rng, 1, in, tg);
        for (int i = 0; i < N; i++)
            for (int j = i + 1; j < N; j++)
                repeated_value |= in[2 * i + 1] == in[2 * j + 1];
        int same = 1;
        for (int i = 0; i < N; i++)
            same &= in[2 * N + 2 * i] == in[2 * i];
        in_context_order += same;
        for (int i = 0; i < N; i++) /* round 1 against round 2 */
            if (in[2 * N + 2 * i] != in[4 * N + 2 * i]) {
                rounds_differ++;
                break;
            }
    }
    assert_true(repeated_value);
    /* 1 in 4! = 24 by chance: about 17 of 400 */
    assert_true(in_context_order > 3 && in_context_order < 40);
    assert_true(rounds_differ > draws / 2);
    ba_dataset_free(d);
}

static void test_deterministic(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *a, *b, *c;
    int T = 30, V = 20, N = 5;
    assert_int_equal(ba_dataset_recall(&a, T, V, N, 40, 777, err), BA_OK);
    assert_int_equal(ba_dataset_recall(&b, T, V, N, 40, 777, err), BA_OK);
    assert_int_equal(ba_dataset_recall(&c, T, V, N, 40, 778, err), BA_OK);
    assert_int_equal(ba_dataset_num_eval(a), 40);
    int ia[30], ta[30], ib[30], tb[30], differ = 0;
    for (int i = 0; i < 40; i++) {
        ba_dataset_eval_item(a, i, ia, ta);
        ba_dataset_eval_item(b, i, ib, tb);
        assert_memory_equal(ia, ib, sizeof ia);
        assert_memory_equal(ta, tb, sizeof ta);
        ba_dataset_eval_item(c, i, ib, tb);
        differ += memcmp(ia, ib, sizeof ia) != 0;
    }
    assert_true(differ > 30); /* another data seed, another held-out set */
    /* training draws follow the run's RNG only */
    ba_rng r1, r2;
    ba_rng_seed(&r1, 3);
    ba_rng_seed(&r2, 3);
    int ba_[4 * 30], bt_[4 * 30], bb_[4 * 30], btb_[4 * 30];
    ba_dataset_train_batch(a, &r1, 4, ba_, bt_);
    ba_dataset_train_batch(b, &r2, 4, bb_, btb_);
    assert_memory_equal(ba_, bb_, sizeof ba_);
    assert_memory_equal(bt_, btb_, sizeof bt_);
    ba_dataset_free(a);
    ba_dataset_free(b);
    ba_dataset_free(c);
}

/* Spaces small enough to enumerate: V = 4 with one pair (4 sequences at
 * any T: the key, its value; one held out) and V = 6 with two pairs at
 * T = 8 (3*2 key orders x 3^2 values x 2 query orders = 108; 21 held
 * out). Training never draws a held-out sequence and draws all others. */
static void check_disjoint(int T, int V, int N, long space, int want_held)
{
    char err[BA_ERR_LEN];
    ba_dataset *d;
    assert_int_equal(ba_dataset_recall(&d, T, V, N, 1000, 4242, err), BA_OK);
    assert_int_equal(ba_dataset_num_eval(d), want_held);
    uint64_t ntrain, neval;
    ba_dataset_sizes(d, &ntrain, &neval);
    assert_true(ntrain == (uint64_t)(space - want_held));
    assert_true(neval == (uint64_t)want_held);
    long ncodes = 1;
    for (int t = 0; t < T; t++)
        ncodes *= V;
    char *held = calloc((size_t)ncodes, 1);
    long *seen = calloc((size_t)ncodes, sizeof *seen);
    assert_non_null(held);
    assert_non_null(seen);
    int in[32 * 8], tg[32 * 8]; /* (B,T), T <= 8 */
    for (int i = 0; i < want_held; i++) {
        ba_dataset_eval_item(d, i, in, tg);
        assert_int_equal(held[seq_code(in, T, V)], 0); /* distinct */
        held[seq_code(in, T, V)] = 1;
    }
    ba_rng rng;
    ba_rng_seed(&rng, 1);
    for (int it = 0; it < 400; it++) {
        ba_dataset_train_batch(d, &rng, 32, in, tg);
        for (int b = 0; b < 32; b++) {
            assert_true(check_item(in + b * T, tg + b * T, T, V, N));
            seen[seq_code(in + b * T, T, V)]++;
        }
    }
    long n_seen = 0;
    for (long r = 0; r < ncodes; r++) {
        if (held[r])
            assert_int_equal(seen[r], 0);
        else
            n_seen += seen[r] > 0;
    }
    assert_int_equal(n_seen, space - want_held);
    free(held);
    free(seen);
    ba_dataset_free(d);
}

static void test_heldout_disjoint(void **state)
{
    (void)state;
    check_disjoint(4, 4, 1, 4, 1);
    check_disjoint(7, 4, 1, 4, 1); /* odd: the last query is a key alone */
    check_disjoint(8, 6, 2, 108, 21);
}

static void test_args(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d = (ba_dataset *)&d; /* must be cleared on failure */
    assert_int_equal(ba_dataset_recall(&d, 32, 7, 4, 10, 1, err), BA_ERR_ARG);
    assert_null(d);
    assert_non_null(strstr(err, "recall vocabulary = 7"));
    assert_int_equal(ba_dataset_recall(&d, 32, 2, 1, 10, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "recall vocabulary = 2"));
    assert_int_equal(ba_dataset_recall(&d, 32, 258, 4, 10, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "recall vocabulary = 258"));
    assert_int_equal(ba_dataset_recall(&d, 32, 16, 0, 10, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "recall pairs = 0 is out of range [1, 8]"));
    assert_int_equal(ba_dataset_recall(&d, 64, 16, 9, 10, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "recall pairs = 9 is out of range [1, 8]"));
    assert_int_equal(ba_dataset_recall(&d, 15, 16, 4, 10, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "recall T = 15 is out of range [16, 4096]"));
    assert_non_null(strstr(err, "4 pairs"));
    assert_int_equal(ba_dataset_recall(&d, BA_MAX_BLOCK + 1, 16, 4, 10, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "recall T = 4097"));
    assert_int_equal(ba_dataset_recall(&d, 32, 16, 4, 0, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "n_heldout = 0"));
    assert_int_equal(ba_dataset_recall(NULL, 32, 16, 4, 10, 1, err), BA_ERR_ARG);
    /* the smallest and the largest accepted */
    assert_int_equal(ba_dataset_recall(&d, 4, 4, 1, 1, 1, err), BA_OK);
    ba_dataset_free(d);
    assert_int_equal(ba_dataset_recall(&d, 512, 256, 128, 3, 1, err), BA_OK);
    assert_int_equal(ba_dataset_num_eval(d), 3);
    ba_dataset_free(d);
}

static void test_names(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_task t = BA_TASK_CHARLM;
    assert_int_equal(ba_task_parse("recall", &t, err), BA_OK);
    assert_int_equal(t, BA_TASK_RECALL);
    assert_string_equal(ba_task_name(BA_TASK_RECALL), "recall");
    assert_int_equal(ba_task_parse("recal", &t, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "charlm|brackets|recall"));
}

/* The data description: what rebuilds the held-out set, checked against a
 * config, through the config JSON and back; corrupt fields refused. */
static void test_config(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    assert_int_equal(ba_dataset_recall(&d, 24, 12, 3, 77, 123456789012345ULL, err), BA_OK);
    ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, 3);
    cfg.couplings = BA_COUPLINGS_RELATIVE;
    cfg.band = 4;
    cfg.pos_emb = BA_POS_NONE;
    ba_config_set_data(&cfg, d);
    assert_int_equal(cfg.head, BA_HEAD_TOKEN);
    assert_int_equal(cfg.block_size, 24);
    assert_int_equal(cfg.vocab_size, 12);
    assert_int_equal(cfg.out_size, 12);
    assert_int_equal(ba_config_validate(&cfg, err), BA_OK);
    ba_data_spec spec;
    memset(&spec, 0x5a, sizeof spec);
    ba_dataset_spec(d, &spec);
    assert_int_equal(spec.task, BA_TASK_RECALL);
    assert_int_equal(spec.recall_vocab, 12);
    assert_int_equal(spec.pairs, 3);
    assert_int_equal(spec.n_heldout, 77);
    assert_true(spec.data_seed == 123456789012345ULL);
    assert_int_equal(spec.vocab_size, 0);
    assert_int_equal(ba_data_spec_check(&spec, &cfg, err), BA_OK);

    char *j = ba_config_to_json(&cfg, &spec);
    assert_non_null(j);
    assert_non_null(strstr(j, "\"task\":\"recall\""));
    assert_non_null(strstr(j, "\"recall_vocab\":12"));
    assert_non_null(strstr(j, "\"pairs\":3"));
    ba_config c2;
    ba_data_spec s2;
    memset(&s2, 0, sizeof s2);
    assert_int_equal(ba_config_from_json(j, &c2, &s2, err), BA_OK);
    assert_int_equal(s2.task, BA_TASK_RECALL);
    assert_int_equal(s2.recall_vocab, 12);
    assert_int_equal(s2.pairs, 3);
    assert_int_equal(s2.n_heldout, 77);
    assert_true(s2.data_seed == 123456789012345ULL);
    assert_int_equal(c2.head, BA_HEAD_TOKEN);
    assert_int_equal(c2.vocab_size, 12);
    assert_int_equal(c2.out_size, 12);
    assert_int_equal(c2.band, 4);
    /* the spec rebuilds the same held-out set */
    ba_dataset *e;
    assert_int_equal(ba_dataset_recall(&e, c2.block_size, s2.recall_vocab, s2.pairs,
                                       s2.n_heldout, s2.data_seed, err),
                     BA_OK);
    int i1[24], t1[24], i2[24], t2[24];
    for (int i = 0; i < ba_dataset_num_eval(d); i++) {
        ba_dataset_eval_item(d, i, i1, t1);
        ba_dataset_eval_item(e, i, i2, t2);
        assert_memory_equal(i1, i2, sizeof i1);
        assert_memory_equal(t1, t2, sizeof t1);
    }
    ba_dataset_free(e);

    /* corrupt values, each refused naming its field */
    static const struct {
        const char *from, *to, *msg;
    } bad[] = {
        {"\"pairs\":3", "\"pairs\":0", "pairs = 0 is out of range"},
        {"\"pairs\":3", "\"pairs\":7", "pairs = 7 is out of range [1, recall_vocab/2 = 6]"},
        {"\"pairs\":3", "\"pairs\":3.5", "config field 'pairs' = 3.5 is not an int"},
        {"\"pairs\":3", "\"pairs\":\"3\"", "config field 'pairs' is a string"},
        {"\"pairs\":3", "\"pairz\":3", "config field 'pairs' is missing"},
        {"\"recall_vocab\":12", "\"recall_vocab\":13", "recall_vocab = 13 must be even"},
        {"\"recall_vocab\":12", "\"recall_vocab\":2", "recall_vocab = 2 must be even"},
        {"\"recall_vocab\":12", "\"recall_vocab\":14",
         "vocab_size = 12 and out_size = 12 must both equal recall_vocab = 14"},
        {"\"recall_vocab\":12", "\"recall_vocab\":-12", "recall_vocab = -12"},
        {"\"recall_vocab\":12", "\"recall_vocabulary\":12",
         "config field 'recall_vocab' is missing"},
        /* (the config's own check refuses it first) */
        {"\"head\":\"token\"", "\"head\":\"pointer\"", "for a pointer head"},
        {"\"block_size\":24", "\"block_size\":11", "block_size = 11 is below 4*pairs = 12"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *at = strstr(j, bad[k].from);
        assert_non_null(at);
        size_t pre = (size_t)(at - j), lf = strlen(bad[k].from), lt = strlen(bad[k].to);
        char *m = malloc(strlen(j) + lt + 1);
        assert_non_null(m);
        memcpy(m, j, pre);
        memcpy(m + pre, bad[k].to, lt);
        strcpy(m + pre + lt, at + lf);
        err[0] = 0;
        int rc = ba_config_from_json(m, &c2, &s2, err);
        if (rc == BA_OK || !strstr(err, bad[k].msg))
            fail_msg("case %zu (%s): rc %d, err '%s'", k, bad[k].to, rc, err);
        free(m);
    }
    free(j);

    /* other tasks' JSON has no recall fields */
    ba_data_spec b = ba_data_spec_default(BA_TASK_BRACKETS);
    ba_config cb = ba_config_default(BA_ATTN_SOFTMAX, 8);
    cb.head = BA_HEAD_POINTER, cb.vocab_size = 2, cb.out_size = 8;
    j = ba_config_to_json(&cb, &b);
    assert_non_null(j);
    assert_null(strstr(j, "recall_vocab"));
    assert_null(strstr(j, "pairs"));
    free(j);

    /* a data description that cannot feed the config */
    cfg.head = BA_HEAD_POINTER;
    assert_int_equal(ba_data_spec_check(&spec, &cfg, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "recall needs a token head"));
    ba_dataset_free(d);
}

/* ba_evaluate scores the queried values only: one target per query key,
 * and an untrained model sits near chance. */
static void test_evaluate(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    int T = 21, V = 8, N = 3; /* 15 after the context: 8 queries, the last a key alone */
    assert_int_equal(ba_dataset_recall(&d, T, V, N, 64, 5, err), BA_OK);
    ba_config cfg = ba_config_default(BA_ATTN_SOFTMAX, T);
    cfg.n_embd = 16;
    ba_config_set_data(&cfg, d);
    ba_model *m;
    assert_int_equal(ba_model_init(&m, &cfg, err), BA_OK);
    ba_rng rng;
    ba_rng_seed(&rng, 1);
    ba_model_init_weights(m, &rng, 0.0);
    ba_eval_result r;
    assert_int_equal(ba_evaluate(m, d, 0, 16, &r, err), BA_OK);
    assert_int_equal(r.n_items, 64);
    assert_int_equal(r.n_targets, 64 * 8);
    assert_true(r.accuracy >= 0.0 && r.accuracy < 0.6);
    assert_true(isfinite(r.loss) && r.loss > 0.0);
    ba_model_free(m);
    ba_dataset_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),        cmocka_unit_test(test_draws_vary),
        cmocka_unit_test(test_deterministic), cmocka_unit_test(test_heldout_disjoint),
        cmocka_unit_test(test_args),          cmocka_unit_test(test_names),
        cmocka_unit_test(test_config),        cmocka_unit_test(test_evaluate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
