/* Tests of the tasks: bracket counts against enumeration, exact uniformity
 * of the sampler, the held-out set, the position baseline and the charlm
 * loader's splits, windows and errors. */
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
#include "utf8_ref.h"

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

static void write_temp(char path[64], const void *data, size_t n)
{
    strcpy(path, "/tmp/ba_test_tasks_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    if (n > 0)
        assert_int_equal((long)write(fd, data, n), (long)n);
    close(fd);
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

/* ------------------------------------------------------------ charlm */

/* "hello, world!\n" x 7 + "hello": 103 bytes, train 92, validation the
 * last 11 = "orld!\nhello". */
static void make_hello(char *buf)
{
    buf[0] = 0;
    for (int i = 0; i < 7; i++)
        strcat(buf, "hello, world!\n");
    strcat(buf, "hello");
}

static void test_charlm_basic(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[64], text[128];
    make_hello(text);
    assert_int_equal(strlen(text), 103);
    write_temp(path, text, 103);
    ba_dataset *d;
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 3, err), BA_OK);
    assert_int_equal(ba_dataset_task(d), BA_TASK_CHARLM);
    assert_int_equal(ba_dataset_block_size(d), 3);
    const char *vocab = "\n !,dehlorw";
    assert_int_equal(ba_dataset_vocab_size(d), 11);
    assert_memory_equal(ba_dataset_vocab(d), vocab, 11);
    uint64_t tr, ev;
    ba_dataset_sizes(d, &tr, &ev);
    assert_int_equal(tr, 92);
    assert_int_equal(ev, 11);
    assert_true(ba_dataset_position_baseline(d) == -1.0);
    /* windows at 0, 3, 6 of "orld!\nhello" (9 + 4 > 11 stops) */
    assert_int_equal(ba_dataset_num_eval(d), 3);
    const char *win_in[3] = {"orl", "d!\n", "hel"};
    const char *win_tg[3] = {"rld", "!\nh", "ell"};
    const uint8_t *V = ba_dataset_vocab(d);
    for (int n = 0; n < 3; n++) {
        int in[3], tg[3];
        ba_dataset_eval_item(d, n, in, tg);
        for (int t = 0; t < 3; t++) {
            assert_int_equal(V[in[t]], (uint8_t)win_in[n][t]);
            assert_int_equal(V[tg[t]], (uint8_t)win_tg[n][t]);
        }
    }
    ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, 99);
    cfg.n_layer = 2;
    ba_config_set_data(&cfg, d);
    assert_int_equal(cfg.head, BA_HEAD_TOKEN);
    assert_int_equal(cfg.block_size, 3);
    assert_int_equal(cfg.vocab_size, 11);
    assert_int_equal(cfg.out_size, 11);
    assert_int_equal(cfg.n_layer, 2);
    assert_int_equal(ba_config_validate(&cfg, err), BA_OK);
    ba_data_spec spec;
    ba_dataset_spec(d, &spec);
    assert_int_equal(spec.task, BA_TASK_CHARLM);
    assert_int_equal(spec.vocab_size, 11);
    assert_memory_equal(spec.vocab, vocab, 11);
    assert_int_equal(ba_data_spec_check(&spec, &cfg, err), BA_OK);
    cfg.out_size = 12; /* a charlm head predicts the vocabulary */
    assert_int_equal(ba_data_spec_check(&spec, &cfg, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "out_size = 12 must equal vocab_size = 11 for charlm"));

    /* round trip through ba_encode_text */
    int ids[5];
    assert_int_equal(ba_encode_text(V, 11, "world", 5, ids, err), BA_OK);
    for (int t = 0; t < 5; t++)
        assert_int_equal(V[ids[t]], (uint8_t)"world"[t]);
    assert_int_equal(ids[0], 10); /* 'w' is the largest byte */
    assert_int_equal(ba_encode_text(V, 11, "held", 4, ids, err), BA_OK);
    assert_int_equal(ba_encode_text(V, 11, "hexo", 4, ids, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "120"));
    assert_non_null(strstr(err, "'x'"));
    assert_non_null(strstr(err, "position 2"));
    assert_int_equal(ba_encode_text(V, 11, "h\x01", 2, ids, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "byte 1 "));
    assert_int_equal(ba_encode_text(NULL, 11, "h", 1, ids, err), BA_ERR_ARG);
    assert_int_equal(ba_encode_text(V, 0, "h", 1, ids, NULL), BA_ERR_ARG);
    const uint8_t dup[3] = {'a', 'b', 'a'};
    assert_int_equal(ba_encode_text(dup, 3, "a", 1, ids, err), BA_ERR_ARG);
    assert_int_equal(ba_encode_text(V, 11, NULL, 0, NULL, err), BA_OK);
    ba_dataset_free(d);
    unlink(path);
}

/* Bytes 1..120 each once (text: control characters and ASCII, no NUL):
 * token id = byte - 1 = offset, so a window's position in the file is its
 * first token and the split boundaries are exact. */
static void test_charlm_windows(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[64];
    uint8_t bytes[120];
    for (int i = 0; i < 120; i++)
        bytes[i] = (uint8_t)(i + 1);
    write_temp(path, bytes, 120);
    ba_dataset *d;
    const int T = 3;
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, T, err), BA_OK);
    assert_int_equal(ba_dataset_vocab_size(d), 120);
    assert_int_equal(ba_dataset_vocab(d)[0], 1);
    assert_int_equal(ba_dataset_vocab(d)[119], 120);
    uint64_t tr, ev;
    ba_dataset_sizes(d, &tr, &ev);
    assert_int_equal(tr, 108);
    assert_int_equal(ev, 12);
    /* validation 108..119: windows at 0, 3, 6 (9 + 4 > 12) */
    assert_int_equal(ba_dataset_num_eval(d), 3);
    for (int n = 0; n < 3; n++) {
        int in[3], tg[3];
        ba_dataset_eval_item(d, n, in, tg);
        for (int t = 0; t < T; t++) {
            assert_int_equal(in[t], 108 + 3 * n + t);
            assert_int_equal(tg[t], 108 + 3 * n + t + 1);
        }
    }
    /* training windows: T+1 consecutive train bytes, start in [0, 104] */
    ba_rng rng;
    ba_rng_seed(&rng, 11);
    int in[64 * 3], tg[64 * 3]; /* (B,T) */
    int hit[105] = {0};
    for (int it = 0; it < 200; it++) {
        ba_dataset_train_batch(d, &rng, 64, in, tg);
        for (int b = 0; b < 64; b++) {
            int s = in[b * T];
            assert_true(s >= 0 && s <= 104);
            for (int t = 0; t < T; t++) {
                assert_int_equal(in[b * T + t], s + t);
                assert_int_equal(tg[b * T + t], s + t + 1);
            }
            hit[s] = 1;
        }
    }
    /* both ends of the range are reachable */
    assert_true(hit[0] && hit[104]);
    ba_dataset_free(d);

    /* the same rng state gives the same batch */
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, T, err), BA_OK);
    ba_rng r1, r2;
    ba_rng_seed(&r1, 3);
    r2 = r1;
    int in2[64 * 3], tg2[64 * 3];
    ba_dataset_train_batch(d, &r1, 64, in, tg);
    ba_dataset_train_batch(d, &r2, 64, in2, tg2);
    assert_memory_equal(in, in2, sizeof in);
    assert_memory_equal(tg, tg2, sizeof tg);
    ba_dataset_free(d);
    unlink(path);
}

/* Valid multi-byte UTF-8 loads, byte by byte: "é" (2 bytes), "€" (3), "😀"
 * (4), the largest code point U+10FFFF and U+FFFD are each several tokens. */
static void test_charlm_utf8_accepted(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[64];
    /* "aé€😀\xf4\x8f\xbf\xbf\xef\xbf\xbd\n" repeated: 1+2+3+4+4+3+1 = 18 bytes */
    static const char unit[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"
                               "\xef\xbf\xbd\n";
    assert_int_equal(sizeof unit - 1, 18);
    char text[18 * 10];
    for (int i = 0; i < 10; i++)
        memcpy(text + 18 * i, unit, 18);
    write_temp(path, text, sizeof text);
    ba_dataset *d;
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 5, err), BA_OK);
    /* distinct bytes: a \n c3 a9 e2 82 ac f0 9f 98 80 f4 8f bf ef bd */
    assert_int_equal(ba_dataset_vocab_size(d), 16);
    const uint8_t *V = ba_dataset_vocab(d);
    assert_int_equal(V[0], '\n');
    assert_int_equal(V[1], 'a');
    assert_int_equal(V[15], 0xf4);
    uint64_t tr, ev;
    ba_dataset_sizes(d, &tr, &ev);
    assert_int_equal(tr + ev, 180);
    /* the validation split starts at byte 162 = 9 * 18: "aé€..." as bytes */
    int in[5], tg[5];
    ba_dataset_eval_item(d, 0, in, tg);
    for (int t = 0; t < 5; t++) {
        assert_int_equal(V[in[t]], (uint8_t)unit[t]);
        assert_int_equal(V[tg[t]], (uint8_t)unit[t + 1]);
    }
    ba_dataset_free(d);
    unlink(path);
    /* a byte-order mark is text too */
    char bom[3 + 18 * 10];
    memcpy(bom, "\xef\xbb\xbf", 3);
    memcpy(bom + 3, text, sizeof text);
    write_temp(path, bom, sizeof bom);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 5, err), BA_OK);
    ba_dataset_free(d);
    unlink(path);
}

/* Each kind of bad text, placed at offset 40 of otherwise valid text: the
 * error is BA_ERR_FORMAT, names offset 40 and the problem, leaves *out NULL,
 * and is the same with a given vocabulary that holds every byte. */
static void test_charlm_rejects_bad_text(void **state)
{
    (void)state;
    static const struct {
        const char *bytes;
        size_t n;
        const char *why; /* a substring of the message */
    } cases[] = {
        {"\x00", 1, "NUL byte at offset 40"},
        {"\x80", 1, "unexpected continuation byte (0x80-0xBF) where a character should start"},
        {"\xbf", 1, "unexpected continuation byte (0x80-0xBF) where a character should start"},
        {"\xc0\xaf", 2, "overlong 2-byte encoding (a shorter one exists)"},
        {"\xc1\xbf", 2, "overlong 2-byte encoding (a shorter one exists)"},
        {"\xe0\x80\xaf", 3, "overlong 3-byte encoding (a shorter one exists)"},
        {"\xe0\x9f\xbf", 3, "overlong 3-byte encoding (a shorter one exists)"},
        {"\xf0\x8f\xbf\xbf", 4, "overlong 4-byte encoding (a shorter one exists)"},
        {"\xed\xa0\x80", 3, "a UTF-16 surrogate (U+D800-U+DFFF)"},
        {"\xed\xbf\xbf", 3, "a UTF-16 surrogate (U+D800-U+DFFF)"},
        {"\xf4\x90\x80\x80", 4, "a code point above U+10FFFF"},
        {"\xf5\x80\x80\x80", 4, "a code point above U+10FFFF"},
        {"\xf8", 1, "a byte 0xF8-0xFF, which never occurs in UTF-8"},
        {"\xfe", 1, "a byte 0xF8-0xFF, which never occurs in UTF-8"},
        {"\xff", 1, "a byte 0xF8-0xFF, which never occurs in UTF-8"},
        {"\xc3" "a", 2, "truncated 2-byte sequence (byte 2 is not a continuation byte)"},
        {"\xc3" "b", 2, "truncated 2-byte sequence (byte 2 is not a continuation byte)"},
        {"\xe2\x82" "a", 3, "truncated 3-byte sequence (byte 3 is not a continuation byte)"},
        {"\xf0\x9f\x98\xc3\xa9", 5,
         "truncated 4-byte sequence (byte 4 is not a continuation byte)"},
    };
    /* The message names the offset and the kind of problem, never the
     * bytes (eval reads the file a checkpoint records, which the user may
     * not be allowed to read): two different bytes of one kind give the
     * same message, the path aside. */
    char prev_tail[BA_ERR_LEN] = "";
    char err[BA_ERR_LEN], path[64], text[100];
    uint8_t all[256];
    for (int b = 0; b < 256; b++)
        all[b] = (uint8_t)b;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        memset(text, 'x', sizeof text);
        memcpy(text + 40, cases[c].bytes, cases[c].n);
        write_temp(path, text, sizeof text);
        for (int given = 0; given < 2; given++) {
            ba_dataset *d = (ba_dataset *)&d;
            memset(err, 0, sizeof err);
            int rc = ba_dataset_charlm(&d, path, given ? all : NULL, given ? 256 : 0, 3, err);
            if (rc != BA_ERR_FORMAT || !strstr(err, cases[c].why) || !strstr(err, "offset 40") ||
                !strstr(err, path))
                fail_msg("case %zu (%s vocabulary): status %d, message '%s', expected '%s'", c,
                         given ? "given" : "own", rc, err, cases[c].why);
            assert_null(d);
            const char *tail = strstr(err, path) + strlen(path);
            if (given == 0 && c > 0 && strcmp(cases[c].why, cases[c - 1].why) == 0 &&
                strcmp(tail, prev_tail) != 0)
                fail_msg("case %zu: '%s' differs from the same kind's '%s'", c, tail, prev_tail);
            if (given == 0)
                snprintf(prev_tail, sizeof prev_tail, "%s", tail);
        }
        unlink(path);
    }
    /* a sequence cut off by the end of the file */
    memset(text, 'x', sizeof text);
    memcpy(text + 97, "\xe2\x82\xac", 3);
    write_temp(path, text, 99);
    ba_dataset *d;
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 3, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "offset 97"));
    assert_non_null(strstr(err, "3-byte sequence truncated by the end of the file"));
    unlink(path);
    /* the first problem is the one reported */
    memset(text, 'x', sizeof text);
    text[10] = (char)0xff;
    text[5] = 0;
    write_temp(path, text, sizeof text);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 3, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "NUL byte at offset 5"));
    unlink(path);
}

/* The library's check against its reference twin (tests/utf8_ref.h, the
 * RFC 3629 grammar) on 3000 random texts: valid characters of every length
 * (edges of each range included) mixed, one in 12, with single bytes from
 * the places where the grammar's ranges end. Both outcomes must occur often, so the
 * comparison is not vacuous. */
static size_t put_utf8(uint8_t *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | cp >> 6), o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | cp >> 12), o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | cp >> 18), o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)), o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

static void test_charlm_utf8_vs_reference(void **state)
{
    (void)state;
    static const uint32_t lo[] = {0x01, 0x80, 0x800, 0xE000, 0x10000};
    static const uint32_t hi[] = {0x7F, 0x7FF, 0xD7FF, 0xFFFF, 0x10FFFF};
    static const uint8_t edge[] = {0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0,
                                   0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF,
                                   0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF};
    char err[BA_ERR_LEN], path[64];
    uint8_t text[24 + 16 * 4];
    ba_rng rng;
    ba_rng_seed(&rng, 2024);
    int n_ok = 0, n_bad = 0;
    for (int it = 0; it < 3000; it++) {
        size_t n = 0;
        memset(text, 'x', 24); /* long enough for T = 1 whatever follows */
        n = 24;
        int units = 1 + (int)ba_rng_below(&rng, 16);
        for (int u = 0; u < units; u++) {
            if (ba_rng_below(&rng, 12) == 0) {
                text[n++] = edge[ba_rng_below(&rng, sizeof edge)];
            } else {
                int k = (int)ba_rng_below(&rng, 5);
                uint64_t span = hi[k] - lo[k] + 1;
                /* a quarter at the ends of the range */
                uint64_t pick = ba_rng_below(&rng, 4);
                uint32_t cp = pick == 0   ? lo[k]
                              : pick == 1 ? hi[k]
                                          : lo[k] + (uint32_t)ba_rng_below(&rng, span);
                n += put_utf8(text + n, cp);
            }
        }
        write_temp(path, text, n);
        ba_dataset *d;
        int rc = ba_dataset_charlm(&d, path, NULL, 0, 1, err);
        int want = utf8_ref_valid(text, n);
        if ((rc == BA_OK) != want)
            fail_msg("text %d of %zu bytes: library %s (%s), reference %s", it, n,
                     rc ? "rejects" : "accepts", rc ? err : "", want ? "valid" : "invalid");
        if (rc == BA_OK) {
            n_ok++;
            assert_int_equal(ba_dataset_num_eval(d) > 0, 1);
            ba_dataset_free(d);
        } else {
            n_bad++;
            assert_int_equal(rc, BA_ERR_FORMAT);
        }
        unlink(path);
    }
    print_message("utf8 vs reference: %d valid, %d invalid texts agree\n", n_ok, n_bad);
    assert_true(n_ok > 600 && n_bad > 600);
}

static void test_charlm_given_vocab(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[64], text[128];
    make_hello(text);
    write_temp(path, text, 103);
    ba_dataset *d;
    /* a reversed vocabulary: ids follow the given table, not sorted order */
    const uint8_t rev[11] = {'w', 'r', 'o', 'l', 'h', 'e', 'd', ',', '!', ' ', '\n'};
    assert_int_equal(ba_dataset_charlm(&d, path, rev, 11, 3, err), BA_OK);
    assert_memory_equal(ba_dataset_vocab(d), rev, 11);
    int in[3], tg[3];
    ba_dataset_eval_item(d, 0, in, tg); /* "orl" -> "rld" */
    assert_int_equal(in[0], 2);
    assert_int_equal(in[1], 1);
    assert_int_equal(in[2], 3);
    assert_int_equal(tg[2], 6);
    ba_dataset_free(d);
    /* a larger vocabulary is fine */
    uint8_t big[12];
    memcpy(big, rev, 11);
    big[11] = 'z';
    assert_int_equal(ba_dataset_charlm(&d, path, big, 12, 3, err), BA_OK);
    assert_int_equal(ba_dataset_vocab_size(d), 12);
    ba_dataset_free(d);
    /* 'w' missing: first seen at offset 7, named by its offset only (the
     * byte itself is the file's content, not the message's) */
    d = (ba_dataset *)&d;
    assert_int_equal(ba_dataset_charlm(&d, path, rev + 1, 10, 3, err), BA_ERR_FORMAT);
    assert_null(d);
    assert_non_null(strstr(err, "the byte at offset 7 of"));
    assert_non_null(strstr(err, "is not in the model's vocabulary of 10 symbols"));
    assert_null(strstr(err, "119"));
    assert_null(strstr(err, "'w'"));
    /* a vocabulary that repeats a byte is refused */
    uint8_t twice[11];
    memcpy(twice, rev, 11);
    twice[10] = 'w';
    assert_int_equal(ba_dataset_charlm(&d, path, twice, 11, 3, err), BA_ERR_ARG);
    assert_int_equal(ba_dataset_charlm(&d, path, rev, 0, 3, err), BA_ERR_ARG);
    unlink(path);
}

static void test_charlm_errors(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[64], text[128];
    ba_dataset *d = (ba_dataset *)&d;
    assert_int_equal(ba_dataset_charlm(&d, "/nonexistent/ba_no_such_file.txt", NULL, 0, 4, err),
                     BA_ERR_IO);
    assert_null(d);
    assert_non_null(strstr(err, "/nonexistent/ba_no_such_file.txt"));
    assert_non_null(strstr(err, "No such file"));
    assert_int_equal(ba_dataset_charlm(&d, "/nonexistent/x", NULL, 0, 4, NULL), BA_ERR_IO);

    make_hello(text);
    write_temp(path, text, 103);
    /* validation holds 11 bytes: T = 10 fits, T = 11 does not */
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 10, err), BA_OK);
    assert_int_equal(ba_dataset_num_eval(d), 1);
    ba_dataset_free(d);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 11, err), BA_ERR_FORMAT);
    assert_null(d);
    assert_non_null(strstr(err, "103 bytes"));
    assert_non_null(strstr(err, "(11)"));
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 0, err), BA_ERR_ARG);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, BA_MAX_BLOCK + 1, err), BA_ERR_ARG);
    char num[32];
    snprintf(num, sizeof num, "= %d", BA_MAX_BLOCK + 1);
    assert_non_null(strstr(err, num));
    unlink(path);

    write_temp(path, "", 0);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 1, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "empty"));
    unlink(path);
}

/* Data that is not a regular file, or too large, is refused before a byte
 * is read: /dev/zero would be read until memory runs out and a FIFO would
 * wait for a writer forever (this test would hang). */
static void test_charlm_not_a_file(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], dir[64], path[128];
    strcpy(dir, "/tmp/ba_test_tasks_dir_XXXXXX");
    assert_non_null(mkdtemp(dir));
    ba_dataset *d = (ba_dataset *)&d;
    assert_int_equal(ba_dataset_charlm(&d, "/dev/zero", NULL, 0, 4, err), BA_ERR_IO);
    assert_null(d);
    assert_non_null(strstr(err, "'/dev/zero' is a character device: charlm data must be a "
                                "regular file"));
    assert_int_equal(ba_dataset_charlm(&d, dir, NULL, 0, 4, err), BA_ERR_IO);
    assert_non_null(strstr(err, "is a directory"));
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 4, err), BA_ERR_IO);
    assert_non_null(strstr(err, "is a FIFO"));
    unlink(path);
    /* one byte over the limit (a sparse file: nothing is written) */
    snprintf(path, sizeof path, "%s/big.txt", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), (off_t)BA_MAX_DATA_BYTES + 1), 0);
    fclose(f);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 4, err), BA_ERR_LIMIT);
    assert_null(d);
    assert_non_null(strstr(err, "has 1073741825 bytes, above the limit of 1073741824 bytes"));
    unlink(path);
    rmdir(dir);
}

static void test_tinyshakespeare(void **state)
{
    (void)state;
    const char *dir = getenv("BA_SHARED_DATA");
    char path[4096];
    if (!dir) {
        printf("SKIPPED: tinyshakespeare check: BA_SHARED_DATA is not set\n");
        skip();
    }
    snprintf(path, sizeof path, "%s/tinyshakespeare.txt", dir);
    if (access(path, R_OK) != 0) {
        printf("SKIPPED: tinyshakespeare check: %s is not readable\n", path);
        skip();
    }
    char err[BA_ERR_LEN];
    ba_dataset *d;
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 12, err), BA_OK);
    uint64_t tr, ev;
    ba_dataset_sizes(d, &tr, &ev);
    assert_int_equal(tr + ev, 1115394);
    assert_int_equal(tr, 1003854);
    assert_int_equal(ba_dataset_vocab_size(d), 65);
    assert_int_equal(ba_dataset_num_eval(d), (111540 - 13) / 12 + 1);
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
        cmocka_unit_test(test_charlm_basic),
        cmocka_unit_test(test_charlm_windows),
        cmocka_unit_test(test_charlm_utf8_accepted),
        cmocka_unit_test(test_charlm_rejects_bad_text),
        cmocka_unit_test(test_charlm_utf8_vs_reference),
        cmocka_unit_test(test_charlm_given_vocab),
        cmocka_unit_test(test_charlm_errors),
        cmocka_unit_test(test_charlm_not_a_file),
        cmocka_unit_test(test_tinyshakespeare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
