/* Tests of the brackets task: bracket counts against enumeration, exact
 * uniformity of the sampler, the held-out set, the position baseline and
 * the task's arguments and config. */
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

/* ------------------------------------------------------------- helpers */

/* Independent checker: 1 when in (T) is a valid prefix over `kinds` kinds
 * (every close matches the kind on top of the stack) and tg (T) holds the
 * matching open's position for each close and -1 elsewhere. */
static int check_prefix(const int *in, const int *tg, int T, int kinds)
{
    int pos[128], kind[128], depth = 0;
    for (int t = 0; t < T; t++) {
        int tok = in[t];
        if (tok < 0 || tok >= 2 * kinds)
            return 0;
        if (tok % 2 == 0) {
            pos[depth] = t;
            kind[depth++] = tok / 2;
            if (tg && tg[t] != -1)
                return 0;
        } else {
            if (depth == 0 || kind[depth - 1] != tok / 2)
                return 0;
            depth--;
            if (tg && tg[t] != pos[depth])
                return 0;
        }
    }
    return 1;
}

/* Sequence as a base-V number (V = 2*kinds); unique for small T. */
static long seq_code(const int *s, int T, int V)
{
    long c = 0;
    for (int t = T - 1; t >= 0; t--)
        c = c * V + s[t];
    return c;
}

static long ipow(long b, int e)
{
    long r = 1;
    while (e-- > 0)
        r *= b;
    return r;
}

/* Brute force: marks index[code] = rank among valid prefixes (or -1) and
 * returns their number. index has V^T entries. */
static long enumerate_valid(int T, int kinds, long *index)
{
    int V = 2 * kinds;
    long n = ipow(V, T), count = 0;
    int s[16];
    for (long c = 0; c < n; c++) {
        long x = c;
        for (int t = 0; t < T; t++) {
            s[t] = (int)(x % V);
            x /= V;
        }
        index[c] = check_prefix(s, NULL, T, kinds) ? count++ : -1;
    }
    return count;
}

/* 99.9 % quantile of chi-square with k degrees of freedom by the
 * Wilson-Hilferty cube approximation (z_0.999 = 3.0902); within 0.5 % of
 * the exact value for k >= 10 (k = 15: 37.84 vs 37.70). */
static double chi2_crit999(int k)
{
    double a = 2.0 / (9.0 * k);
    double c = 1.0 - a + 3.0902 * sqrt(a);
    return k * c * c * c;
}

/* ---------------------------------------------------------- brackets */

static void test_count_hand(void **state)
{
    (void)state;
    assert_int_equal(ba_brackets_count(0, 1), 1);
    assert_int_equal(ba_brackets_count(1, 1), 1);
    assert_int_equal(ba_brackets_count(2, 1), 2);
    assert_int_equal(ba_brackets_count(3, 1), 3);
    assert_int_equal(ba_brackets_count(4, 1), 6);
    assert_int_equal(ba_brackets_count(8, 1), 70);
    assert_int_equal(ba_brackets_count(16, 1), 12870);
    /* kinds = 1 counts are C(T, floor(T/2)); C(40,20) = 137846528820 */
    assert_true(ba_brackets_count(40, 1) == 137846528820ULL);
    /* saturation, and nonsense arguments */
    assert_true(ba_brackets_count(200, 1) == UINT64_MAX);
    assert_true(ba_brackets_count(64, 4) == UINT64_MAX);
    assert_int_equal(ba_brackets_count(-1, 1), 0);
    assert_int_equal(ba_brackets_count(4, 0), 0);
}

static void test_count_bruteforce(void **state)
{
    (void)state;
    long *index = malloc(sizeof(long) * 4096);
    assert_non_null(index);
    for (int T = 1; T <= 6; T++) {
        long n = enumerate_valid(T, 2, index);
        assert_int_equal(ba_brackets_count(T, 2), n);
    }
    for (int T = 1; T <= 4; T++) {
        long n = enumerate_valid(T, 3, index);
        assert_int_equal(ba_brackets_count(T, 3), n);
    }
    /* hand: kinds = 2, T = 2: "((" 4 ways + "()" 2 ways */
    assert_int_equal(ba_brackets_count(2, 2), 6);
    free(index);
}

static void test_brackets_args(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d = (ba_dataset *)&d; /* must be reset to NULL on failure */
    assert_int_equal(ba_dataset_brackets(&d, 0, 1, 10, 1, err), BA_ERR_ARG);
    assert_null(d);
    assert_non_null(strstr(err, "= 0"));
    /* T is limited by the model's longest block only, for every kind */
    assert_int_equal(ba_dataset_brackets(&d, 4097, 1, 10, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "T = 4097 is out of range [1, 4096]"));
    assert_int_equal(ba_dataset_brackets(&d, 8, 0, 10, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "kinds = 0"));
    assert_int_equal(ba_dataset_brackets(&d, 8, 5, 10, 1, err), BA_ERR_ARG);
    assert_int_equal(ba_dataset_brackets(&d, 8, 1, -3, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "-3"));
    /* the exact sampler's limits, where the counts stop fitting 64 bits
     * (one kind: 67; 64 was the old fixed stack), and the task's */
    static const int exact_T[5] = {0, 67, 41, 32, 27};
    for (int k = 1; k <= 4; k++) {
        assert_int_equal(ba_brackets_max_T(k), 4096);
        assert_true(ba_brackets_count(exact_T[k], k) < UINT64_MAX);
        assert_int_equal(ba_brackets_count(exact_T[k] + 1, k), UINT64_MAX);
    }
    assert_int_equal(ba_brackets_max_T(0), 0);
    assert_int_equal(ba_brackets_max_T(5), 0);
    /* past them the data is drawn in double precision */
    assert_int_equal(ba_dataset_brackets(&d, 42, 2, 10, 1, err), BA_OK);
    ba_dataset_free(d);
    /* no held-out set: evaluation would score nothing ("0 of 0") */
    assert_int_equal(ba_dataset_brackets(&d, 8, 1, 0, 1, err), BA_ERR_ARG);
    assert_null(d);
    assert_non_null(strstr(err, "n_heldout = 0: the held-out set must hold at least 1"));
    /* T = 1 with one kind has a single prefix */
    assert_int_equal(ba_dataset_brackets(&d, 1, 1, 10, 1, err), BA_ERR_ARG);
    assert_null(d);
    /* err may be NULL */
    assert_int_equal(ba_dataset_brackets(&d, 0, 1, 10, 1, NULL), BA_ERR_ARG);
    /* the largest accepted sizes work: one kind at T = 64 */
    assert_int_equal(ba_dataset_brackets(&d, 64, 1, 10, 1, err), BA_OK);
    assert_int_equal(ba_dataset_num_eval(d), 10);
    ba_dataset_free(d);
    ba_dataset_free(NULL);
}

/* Draws `draws` training sequences and checks validity, true targets, no
 * held-out sequence, and a chi-square against uniform over the rest. */
static void check_uniform(int T, int kinds, int n_heldout, uint64_t seed, long draws)
{
    char err[BA_ERR_LEN];
    int V = 2 * kinds;
    long space = ipow(V, T);
    long *index = malloc(sizeof(long) * (size_t)space);
    assert_non_null(index);
    long n_valid = enumerate_valid(T, kinds, index);
    assert_int_equal((long)ba_brackets_count(T, kinds), n_valid);

    ba_dataset *d;
    assert_int_equal(ba_dataset_brackets(&d, T, kinds, n_heldout, 99, err), BA_OK);
    int n_held = ba_dataset_num_eval(d);
    char *held = calloc((size_t)n_valid, 1);
    long *count = calloc((size_t)n_valid, sizeof(long));
    assert_non_null(held);
    assert_non_null(count);
    int in[64 * 16], tg[64 * 16]; /* (B,T) */
    for (int i = 0; i < n_held; i++) {
        ba_dataset_eval_item(d, i, in, tg);
        held[index[seq_code(in, T, V)]] = 1;
    }

    ba_rng rng;
    ba_rng_seed(&rng, seed);
    const int B = 64;
    long bad = 0, in_held = 0;
    for (long n = 0; n < draws; n += B) {
        ba_dataset_train_batch(d, &rng, B, in, tg);
        for (int b = 0; b < B; b++) {
            if (!check_prefix(in + b * T, tg + b * T, T, kinds)) {
                bad++;
                continue;
            }
            long r = index[seq_code(in + b * T, T, V)];
            in_held += held[r];
            count[r]++;
        }
    }
    assert_int_equal(bad, 0);
    assert_int_equal(in_held, 0);

    long total = 0;
    for (long r = 0; r < n_valid; r++)
        total += count[r];
    int M = (int)(n_valid - n_held);
    double expect = (double)total / M, chi2 = 0;
    for (long r = 0; r < n_valid; r++)
        if (!held[r])
            chi2 += (count[r] - expect) * (count[r] - expect) / expect;
    assert_true(chi2 < chi2_crit999(M - 1));
    free(held);
    free(count);
    free(index);
    ba_dataset_free(d);
}

static void test_uniform_T6(void **state)
{
    (void)state;
    /* 20 prefixes, 4 held out (20 %), 16 left: df 15 */
    check_uniform(6, 1, 1000, 5, 100000);
    /* one held out: uniform over the other 19 */
    check_uniform(6, 1, 1, 6, 100000);
}

static void test_uniform_two_kinds(void **state)
{
    (void)state;
    /* 44 prefixes (kinds 2, T 4), 8 held out */
    check_uniform(4, 2, 1000, 7, 100000);
}

static void test_no_heldout_in_training(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    long index[256];
    long n_valid = enumerate_valid(8, 1, index);
    assert_int_equal(n_valid, 70);
    ba_dataset *d;
    assert_int_equal(ba_dataset_brackets(&d, 8, 1, 1000, 4242, err), BA_OK);
    assert_int_equal(ba_dataset_num_eval(d), 14);
    char held[70] = {0};
    int in[32 * 8], tg[32 * 8]; /* (B,T) */
    for (int i = 0; i < 14; i++) {
        ba_dataset_eval_item(d, i, in, tg);
        assert_true(check_prefix(in, tg, 8, 1));
        held[index[seq_code(in, 8, 2)]] = 1;
    }
    long seen[70] = {0};
    ba_rng rng;
    ba_rng_seed(&rng, 1);
    for (int it = 0; it < 5000; it++) {
        ba_dataset_train_batch(d, &rng, 32, in, tg);
        for (int b = 0; b < 32; b++)
            seen[index[seq_code(in + b * 8, 8, 2)]]++;
    }
    int n_seen = 0;
    for (int r = 0; r < 70; r++) {
        if (held[r])
            assert_int_equal(seen[r], 0);
        else
            n_seen += seen[r] > 0;
    }
    /* rejection removes only the held-out ones: all 56 others appear */
    assert_int_equal(n_seen, 56);
    ba_dataset_free(d);
}

static void test_heldout_set(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    uint64_t tr, ev;
    /* T = 8: 70 prefixes, cap 14 */
    int req[] = {1, 5, 14, 15, 1000};
    int want[] = {1, 5, 14, 14, 14};
    for (int k = 0; k < 5; k++) {
        assert_int_equal(ba_dataset_brackets(&d, 8, 1, req[k], 3, err), BA_OK);
        assert_int_equal(ba_dataset_num_eval(d), want[k]);
        ba_dataset_sizes(d, &tr, &ev);
        assert_int_equal(ev, want[k]);
        assert_int_equal(tr, 70 - want[k]);
        ba_dataset_free(d);
    }
    /* tiny spaces: the 20 % cap floors to 0 and is raised to 1. At T = 2
     * that one sequence is "()" for data seed 6, and "((" for seed 3: a
     * held-out set without a close has nothing to score and is refused */
    int one_in[2], one_tg[2];
    assert_int_equal(ba_dataset_brackets(&d, 2, 1, 100, 6, err), BA_OK);
    assert_int_equal(ba_dataset_num_eval(d), 1);
    ba_dataset_eval_item(d, 0, one_in, one_tg);
    assert_int_equal(one_in[1], 1);
    assert_int_equal(one_tg[1], 0);
    ba_dataset_free(d);
    d = (ba_dataset *)&d;
    assert_int_equal(ba_dataset_brackets(&d, 2, 1, 100, 3, err), BA_ERR_ARG);
    assert_null(d);
    assert_non_null(strstr(err, "(1 sequence of T = 2, data seed 3) holds no closing bracket"));
    /* two kinds at T = 1: both prefixes are a single open */
    assert_int_equal(ba_dataset_brackets(&d, 1, 2, 100, 6, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "holds no closing bracket"));
    assert_int_equal(ba_dataset_brackets(&d, 4, 1, 100, 3, err), BA_OK);
    assert_int_equal(ba_dataset_num_eval(d), 1); /* 6 / 5 = 1 */
    ba_dataset_free(d);

    /* T = 16: 12870 prefixes, cap 2574; 2000 requested */
    const int T = 16, N = 2000;
    ba_dataset *a, *b, *c;
    assert_int_equal(ba_dataset_brackets(&a, T, 1, N, 1234, err), BA_OK);
    assert_int_equal(ba_dataset_brackets(&b, T, 1, N, 1234, err), BA_OK);
    assert_int_equal(ba_dataset_brackets(&c, T, 1, N, 1235, err), BA_OK);
    assert_int_equal(ba_dataset_num_eval(a), N);
    ba_dataset_sizes(a, &tr, &ev);
    assert_int_equal(tr, 12870 - N);
    assert_int_equal(ev, N);
    char *mark = calloc(1 << 16, 1);
    assert_non_null(mark);
    int in[16], tg[16], in2[16], tg2[16];
    int same_b = 1, same_c = 1;
    for (int i = 0; i < N; i++) {
        ba_dataset_eval_item(a, i, in, tg);
        assert_true(check_prefix(in, tg, T, 1));
        long code = seq_code(in, T, 2);
        assert_int_equal(mark[code], 0); /* distinct */
        mark[code] = 1;
        ba_dataset_eval_item(b, i, in2, tg2);
        same_b &= memcmp(in, in2, sizeof in) == 0 && memcmp(tg, tg2, sizeof tg) == 0;
        ba_dataset_eval_item(c, i, in2, tg2);
        same_c &= memcmp(in, in2, sizeof in) == 0;
    }
    assert_true(same_b);  /* same seed, same set in the same order */
    assert_false(same_c); /* another seed, another set */
    free(mark);
    ba_dataset_free(a);
    ba_dataset_free(b);
    ba_dataset_free(c);
}

/* Position baseline recomputed from the held-out items. */
static double baseline_of(const ba_dataset *d)
{
    int T = ba_dataset_block_size(d);
    static long cnt[64][64];
    memset(cnt, 0, sizeof cnt);
    long closes = 0, best = 0;
    int in[64], tg[64];
    for (int n = 0; n < ba_dataset_num_eval(d); n++) {
        ba_dataset_eval_item(d, n, in, tg);
        for (int i = 0; i < T; i++)
            if (tg[i] >= 0) {
                cnt[i][tg[i]]++;
                closes++;
            }
    }
    for (int i = 0; i < T; i++) {
        long m = 0;
        for (int j = 0; j < T; j++)
            m = cnt[i][j] > m ? cnt[i][j] : m;
        best += m;
    }
    return closes ? (double)best / closes : 0.0;
}

static void test_position_baseline(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    /* Hand case: T = 6, one kind, data_seed 1234 holds out these four
     * (pinned here, so a change of sampler or RNG shows up):
     *   ((((()   close 5 -> 4
     *   (((()(   close 4 -> 3
     *   ()(())   closes 1 -> 0, 4 -> 3, 5 -> 2
     *   ((())(   closes 3 -> 2, 4 -> 1
     * 7 closes. Best per position: i=1 always 0 (1), i=3 always 2 (1),
     * i=4 -> 3 twice, -> 1 once (2), i=5 -> 4 once, -> 2 once (1).
     * Baseline 5/7. */
    assert_int_equal(ba_dataset_brackets(&d, 6, 1, 4, 1234, err), BA_OK);
    assert_int_equal(ba_dataset_num_eval(d), 4);
    const char *expect[4] = {"((((()", "(((()(", "()(())", "((())("};
    int in[64], tg[64];
    for (int n = 0; n < 4; n++) {
        ba_dataset_eval_item(d, n, in, tg);
        char s[7];
        for (int t = 0; t < 6; t++)
            s[t] = in[t] ? ')' : '(';
        s[6] = 0;
        assert_string_equal(s, expect[n]);
    }
    assert_true(fabs(ba_dataset_position_baseline(d) - 5.0 / 7.0) < 1e-12);
    ba_dataset_free(d);

    /* T = 16: a proper fraction in (0, 1], equal to the recomputation */
    assert_int_equal(ba_dataset_brackets(&d, 16, 1, 2000, 1234, err), BA_OK);
    double p = ba_dataset_position_baseline(d);
    assert_true(p > 0.0 && p < 1.0);
    assert_true(fabs(p - baseline_of(d)) < 1e-12);
    ba_dataset_free(d);
    assert_int_equal(ba_dataset_brackets(&d, 8, 2, 500, 9, err), BA_OK);
    p = ba_dataset_position_baseline(d);
    assert_true(p > 0.0 && p <= 1.0);
    assert_true(fabs(p - baseline_of(d)) < 1e-12);
    ba_dataset_free(d);
}

static void test_brackets_config(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    assert_int_equal(ba_dataset_brackets(&d, 10, 2, 123, 77, err), BA_OK);
    assert_int_equal(ba_dataset_task(d), BA_TASK_BRACKETS);
    assert_int_equal(ba_dataset_block_size(d), 10);
    assert_int_equal(ba_dataset_vocab_size(d), 4);
    assert_null(ba_dataset_vocab(d));
    ba_config cfg = ba_config_default(BA_ATTN_SOFTMAX, 3);
    cfg.n_embd = 48;
    ba_config_set_data(&cfg, d);
    assert_int_equal(cfg.head, BA_HEAD_POINTER);
    assert_int_equal(cfg.block_size, 10);
    assert_int_equal(cfg.vocab_size, 4);
    assert_int_equal(cfg.out_size, 10);
    assert_int_equal(cfg.n_embd, 48); /* untouched */
    assert_int_equal(cfg.attn, BA_ATTN_SOFTMAX);
    assert_int_equal(ba_config_validate(&cfg, err), BA_OK);
    /* the data description: what rebuilds this held-out set */
    ba_data_spec spec;
    memset(&spec, 0x5a, sizeof spec);
    ba_dataset_spec(d, &spec);
    assert_int_equal(spec.task, BA_TASK_BRACKETS);
    assert_int_equal(spec.kinds, 2);
    assert_int_equal(spec.n_heldout, 123);
    assert_true(spec.data_seed == 77);
    assert_int_equal(spec.vocab_size, 0);
    assert_int_equal(ba_data_spec_check(&spec, &cfg, err), BA_OK);
    /* a token head or a different vocabulary cannot take brackets */
    cfg.head = BA_HEAD_TOKEN;
    assert_int_equal(ba_data_spec_check(&spec, &cfg, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "brackets needs a pointer head"));
    cfg.head = BA_HEAD_POINTER, cfg.vocab_size = 6;
    assert_int_equal(ba_data_spec_check(&spec, &cfg, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "vocab_size = 6 must be 2*kinds = 4"));
    ba_dataset_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_hand),
        cmocka_unit_test(test_count_bruteforce),
        cmocka_unit_test(test_brackets_args),
        cmocka_unit_test(test_uniform_T6),
        cmocka_unit_test(test_uniform_two_kinds),
        cmocka_unit_test(test_no_heldout_in_training),
        cmocka_unit_test(test_heldout_set),
        cmocka_unit_test(test_position_baseline),
        cmocka_unit_test(test_brackets_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
