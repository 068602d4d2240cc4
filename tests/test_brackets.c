/* Tests of long Dyck (src/train/brackets.c): the exact sampler's draws
 * pinned from before the double sampler existed, validity and depth caps
 * of long sequences, the double sampler's distribution against exact
 * counts, its DP against the uint64 one, known limits at large T, the
 * refusals and max_depth's round trip through the config JSON. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "boltzattn.h"
#include "train/dataset.h"

/* ------------------------------------------------------------- helpers */

static uint64_t fnv(uint64_t h, int v)
{
    h ^= (uint64_t)(unsigned)v;
    return h * 0x100000001b3ULL;
}

/* 1 when in (T) is a valid prefix over kinds kinds nested at most
 * max_depth deep (0: any) and tg (T) points each close at its open; the
 * deepest nesting into *deepest. Its own stack, independent of the
 * library's threaded one. */
static int check_seq(const int *in, const int *tg, int T, int kinds, int max_depth,
                     int *deepest)
{
    int *pos = malloc(sizeof(int) * (size_t)T), *kind = malloc(sizeof(int) * (size_t)T);
    int depth = 0, ok = pos && kind;
    *deepest = 0;
    for (int t = 0; ok && t < T; t++) {
        int tok = in[t];
        if (tok < 0 || tok >= 2 * kinds) {
            ok = 0;
        } else if (tok % 2 == 0) {
            pos[depth] = t;
            kind[depth++] = tok / 2;
            ok = tg[t] == -1 && (max_depth == 0 || depth <= max_depth);
            *deepest = depth > *deepest ? depth : *deepest;
        } else {
            ok = depth > 0 && kind[depth - 1] == tok / 2 && tg[t] == pos[depth - 1];
            depth--;
        }
    }
    free(pos);
    free(kind);
    return ok;
}

/* --------------------------------------------- the exact path, pinned */

/* FNV-1a of every held-out item's inputs and of 4 training batches of 8
 * drawn with seed 7, and the position baseline, as computed by the code
 * before long Dyck (git HEAD's src/train/tasks.c, T capped at 64): the
 * exact sampler must keep drawing the same sequences, so old records,
 * checkpoints and held-out sets stay valid. */
static void test_pinned_exact(void **state)
{
    (void)state;
    static const struct {
        int T, kinds, n_heldout, n_held;
        uint64_t held, batches;
        double baseline;
    } pins[] = {
        {8, 1, 512, 14, 0xf40d9aa7371b4d43ULL, 0x531a720a39e48b66ULL, 0.78947368421052633},
        {16, 2, 300, 300, 0xfa256eab914fbd70ULL, 0x74d562dde683f43fULL, 0.76367614879649892},
        {20, 3, 100, 100, 0x6b66166ae0d93b41ULL, 0xe6d90b78ad06d8a3ULL, 0.76548672566371678},
        {27, 4, 2000, 2000, 0x9451f1d38e1013efULL, 0x3811dd9f84fb1154ULL, 0.82759984183471724},
        {64, 1, 2000, 2000, 0xa47444c61715dd38ULL, 0xd51cd27afd655985ULL, 0.58255253343036473},
        {41, 2, 50, 50, 0xeca8c280a4b7002bULL, 0x114df697d5ec31d1ULL, 0.72222222222222221},
        {12, 1, 2000, 184, 0x05366f95d2a1e73eULL, 0xbf6c58e3d8ce4433ULL, 0.70996216897856246},
    };
    char err[BA_ERR_LEN];
    for (size_t c = 0; c < sizeof pins / sizeof pins[0]; c++) {
        int T = pins[c].T;
        ba_dataset *d;
        assert_int_equal(
            ba_dataset_brackets(&d, T, pins[c].kinds, pins[c].n_heldout, 1234, err), BA_OK);
        assert_true(ba_brackets_exact(d));
        int *in = malloc(sizeof(int) * 8 * (size_t)T), *tg = malloc(sizeof(int) * 8 * (size_t)T);
        uint64_t h = 0xcbf29ce484222325ULL, hb = h;
        assert_int_equal(ba_dataset_num_eval(d), pins[c].n_held);
        for (int i = 0; i < ba_dataset_num_eval(d); i++) {
            ba_dataset_eval_item(d, i, in, tg);
            for (int t = 0; t < T; t++)
                h = fnv(h, in[t]);
        }
        ba_rng r;
        ba_rng_seed(&r, 7);
        for (int k = 0; k < 4; k++) {
            ba_dataset_train_batch(d, &r, 8, in, tg);
            for (int t = 0; t < 8 * T; t++)
                hb = fnv(hb, in[t]);
        }
        assert_true(h == pins[c].held);
        assert_true(hb == pins[c].batches);
        assert_true(ba_dataset_position_baseline(d) == pins[c].baseline);
        /* a cap at or above T changes nothing */
        ba_dataset *e;
        assert_int_equal(ba_dataset_brackets_capped(&e, T, pins[c].kinds, T, pins[c].n_heldout,
                                                    1234, err),
                         BA_OK);
        h = 0xcbf29ce484222325ULL;
        for (int i = 0; i < ba_dataset_num_eval(e); i++) {
            ba_dataset_eval_item(e, i, in, tg);
            for (int t = 0; t < T; t++)
                h = fnv(h, in[t]);
        }
        assert_true(h == pins[c].held);
        assert_true(ba_dataset_position_baseline(e) == pins[c].baseline);
        ba_dataset_free(e);
        ba_dataset_free(d);
        free(in);
        free(tg);
    }
}

/* ------------------------------------------------ long valid sequences */

/* Held-out items and training batches at long T, uncapped and capped:
 * valid prefixes with true targets, never deeper than the cap, and the
 * cap reached (a cap that never binds would test nothing). */
static void check_long(int T, int kinds, int max_depth)
{
    char err[BA_ERR_LEN];
    ba_dataset *d;
    assert_int_equal(ba_dataset_brackets_capped(&d, T, kinds, max_depth, 40, 5, err), BA_OK);
    assert_false(ba_brackets_exact(d));
    assert_int_equal(ba_dataset_num_eval(d), 40);
    int B = 8;
    int *in = malloc(sizeof(int) * (size_t)B * (size_t)T),
        *tg = malloc(sizeof(int) * (size_t)B * (size_t)T);
    int deepest, top = 0;
    double sum = 0;
    for (int i = 0; i < ba_dataset_num_eval(d); i++) {
        ba_dataset_eval_item(d, i, in, tg);
        assert_true(check_seq(in, tg, T, kinds, max_depth, &deepest));
        top = deepest > top ? deepest : top;
        sum += deepest;
    }
    double mean_max;
    int max;
    ba_dataset_depth_stats(d, &mean_max, &max);
    assert_int_equal(max, top);
    assert_true(fabs(mean_max - sum / 40) < 1e-9);
    if (max_depth > 0)
        assert_int_equal(top, max_depth);
    ba_rng r;
    ba_rng_seed(&r, 3);
    ba_dataset_train_batch(d, &r, B, in, tg);
    for (int b = 0; b < B; b++)
        assert_true(check_seq(in + (size_t)b * T, tg + (size_t)b * T, T, kinds, max_depth,
                              &deepest));
    ba_data_spec spec;
    ba_dataset_spec(d, &spec);
    assert_int_equal(spec.max_depth, max_depth);
    uint64_t tr, ev;
    ba_dataset_sizes(d, &tr, &ev);
    assert_true(tr == UINT64_MAX); /* 2^64 or more */
    assert_int_equal((int)ev, 40);
    free(in);
    free(tg);
    ba_dataset_free(d);
}

static void test_long_valid(void **state)
{
    (void)state;
    check_long(4096, 2, 0);
    check_long(4096, 3, 8);
    check_long(1000, 1, 0);
    check_long(1000, 1, 3);
    check_long(300, 2, 1); /* "()" pairs only: 2^150 ways to pick kinds */
    check_long(68, 1, 0); /* just past the exact sampler's one-kind limit, 67 */
}

/* One kind uncapped nests about sqrt(T) deep; more kinds drift upward
 * (an open has k ways, a close one): about (k-1)/(k+1) T. */
static void test_depth_scale(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    assert_int_equal(ba_dataset_brackets(&d, 1024, 1, 500, 1, err), BA_OK);
    double m;
    ba_dataset_depth_stats(d, &m, NULL);
    assert_true(m > 0.5 * 32 && m < 3 * 32);
    ba_dataset_free(d);
    assert_int_equal(ba_dataset_brackets(&d, 1024, 3, 500, 1, err), BA_OK);
    ba_dataset_depth_stats(d, &m, NULL);
    assert_true(m > 0.45 * 1024 && m < 0.6 * 1024);
    ba_dataset_free(d);
}

/* -------------------------------------- the double path against exact */

/* Sequence as a base-2k number (unique at small T). */
static long code_of(const int *in, int T, int V)
{
    long c = 0;
    for (int t = T - 1; t >= 0; t--)
        c = c * V + in[t];
    return c;
}

/* draws training sequences of a dataset forced onto the double sampler
 * at small T and compares their frequencies with uniform over the valid
 * prefixes (depth <= cap) that are not held out: a chi-square within 6
 * standard deviations of its degrees of freedom, no held-out sequence and
 * every valid prefix drawn. (Wrong probabilities, a parity slip in the
 * table or a mishandled cap shift whole groups of cells by far more.) */
static void check_double_uniform(int T, int kinds, int max_depth, long draws)
{
    char err[BA_ERR_LEN];
    int V = 2 * kinds;
    long space = 1;
    for (int t = 0; t < T; t++)
        space *= V;
    ba_dataset *ex, *d;
    assert_int_equal(ba_brackets_build(&ex, T, kinds, max_depth, 1, 9, 0, err), BA_OK);
    assert_int_equal(ba_brackets_build(&d, T, kinds, max_depth, 1, 9, 1, err), BA_OK);
    assert_true(ba_brackets_exact(ex));
    assert_false(ba_brackets_exact(d));
    uint64_t n_train, n_eval;
    ba_dataset_sizes(d, &n_train, &n_eval);
    long *hits = calloc((size_t)space, sizeof *hits);
    int *in = malloc(sizeof(int) * 64 * (size_t)T), *tg = malloc(sizeof(int) * 64 * (size_t)T);
    assert_non_null(hits);
    ba_rng r;
    ba_rng_seed(&r, 11);
    for (long n = 0; n < draws; n += 64) {
        ba_dataset_train_batch(d, &r, 64, in, tg);
        for (int b = 0; b < 64; b++) {
            int deepest;
            assert_true(check_seq(in + (size_t)b * T, tg + (size_t)b * T, T, kinds, max_depth,
                                  &deepest));
            hits[code_of(in + (size_t)b * T, T, V)]++;
        }
    }
    long total = (draws + 63) / 64 * 64;
    /* the held-out sequence is never drawn */
    ba_dataset_eval_item(d, 0, in, tg);
    assert_int_equal(hits[code_of(in, T, V)], 0);
    /* cells: every valid prefix but the held-out one */
    long cells = 0;
    double chi2 = 0, expect = (double)total / (double)n_train;
    for (long c = 0; c < space; c++)
        if (hits[c] > 0) {
            cells++;
            chi2 += (hits[c] - expect) * (hits[c] - expect) / expect;
        }
    assert_int_equal(cells, (long)n_train);
    double df = (double)cells - 1;
    print_message("T=%d kinds=%d max_depth=%d: %ld cells, chi2 %.1f (df %.0f)\n", T, kinds,
                  max_depth, cells, chi2, df);
    assert_true(fabs(chi2 - df) < 6 * sqrt(2 * df));
    free(hits);
    free(in);
    free(tg);
    ba_dataset_free(ex);
    ba_dataset_free(d);
}

static void test_double_distribution(void **state)
{
    (void)state;
    check_double_uniform(10, 1, 0, 200000); /* 252 prefixes */
    check_double_uniform(8, 2, 0, 200000);  /* 2 kinds: the kind draw too */
    check_double_uniform(10, 2, 2, 200000); /* capped */
}

/* The double DP's open probabilities against the uint64 DP's, at every
 * reachable state where both exist: relative 1e-12. */
static void test_double_matches_exact(void **state)
{
    (void)state;
    static const int cases[][3] = {{20, 1, 0}, {64, 1, 0}, {67, 1, 0}, {41, 2, 0}, {32, 3, 0},
                                   {27, 4, 0}, {40, 2, 3}, {120, 1, 2}, {24, 4, 5}};
    char err[BA_ERR_LEN];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int T = cases[c][0], k = cases[c][1], D = cases[c][2];
        ba_dataset *ex, *db;
        assert_int_equal(ba_brackets_build(&ex, T, k, D, 1, 1, 0, err), BA_OK);
        assert_int_equal(ba_brackets_build(&db, T, k, D, 1, 1, 1, err), BA_OK);
        assert_true(ba_brackets_exact(ex));
        double worst = 0;
        long states = 0;
        for (int t = 0; t < T; t++)
            for (int dd = t % 2; dd <= t; dd += 2) {
                double pe = ba_brackets_open_prob(ex, t, dd), pd = ba_brackets_open_prob(db, t, dd);
                if (D > 0 && dd > D) {
                    assert_true(pe == -1.0 && pd == -1.0);
                    continue;
                }
                assert_true(pe >= 0 && pe <= 1);
                states++;
                if (pe == 0)
                    assert_true(pd == 0);
                else
                    worst = fmax(worst, fabs(pd - pe) / pe);
            }
        print_message("T=%d kinds=%d max_depth=%d: %ld states, worst relative error %.2g\n", T,
                      k, D, states, worst);
        assert_true(states > 0);
        assert_true(worst <= 1e-12);
        /* unreachable states are refused */
        assert_true(ba_brackets_open_prob(db, 1, 0) == -1.0);
        assert_true(ba_brackets_open_prob(db, T, 0) == -1.0);
        ba_dataset_free(ex);
        ba_dataset_free(db);
    }
}

/* Known values at large T: the walk opens for sure at depth 0 and, at the
 * last step from depth 1, with k / (k+1); at (t=1, depth 1) with one kind
 * exactly (3T/4 - 1) / (T - 1) (T a multiple of 4), with k >= 2 kinds
 * tending to k(1 - k^-3) / (k(1 - k^-3) + 1 - 1/k), the limit where
 * g(n, d) ~ (k+1)^n (1 - k^-(d+1)), reached within rounding by T = 1024. */
static void test_large_T_limits(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    for (int k = 1; k <= 4; k++)
        for (int T = 1024; T <= 4096; T *= 4) {
            ba_dataset *d;
            assert_int_equal(ba_dataset_brackets(&d, T, k, 1, 1, err), BA_OK);
            assert_true(ba_brackets_open_prob(d, 0, 0) == 1.0);
            assert_true(fabs(ba_brackets_open_prob(d, T - 1, 1) - k / (k + 1.0)) < 1e-15);
            double want = k == 1 ? (0.75 * T - 1) / (T - 1)
                                 : k * (1 - pow(k, -3)) / (k * (1 - pow(k, -3)) + 1 - 1.0 / k);
            double got = ba_brackets_open_prob(d, 1, 1);
            assert_true(fabs(got - want) <= 1e-12 * want);
            ba_dataset_free(d);
        }
}

/* --------------------------------------------------------- performance */

/* Generous bounds (a loaded machine): a batch of 32 at T = 4096 in
 * milliseconds, and a held-out set of 2000 at T = 1024 well under a
 * second. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_speed(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    double t0 = now_s();
    assert_int_equal(ba_dataset_brackets(&d, 1024, 1, 2000, 1234, err), BA_OK);
    double build = now_s() - t0;
    ba_dataset_free(d);
    assert_int_equal(ba_dataset_brackets(&d, 4096, 2, 10, 1234, err), BA_OK);
    int *in = malloc(sizeof(int) * 32 * 4096), *tg = malloc(sizeof(int) * 32 * 4096);
    ba_rng r;
    ba_rng_seed(&r, 1);
    t0 = now_s();
    ba_dataset_train_batch(d, &r, 32, in, tg);
    double batch = now_s() - t0;
    print_message("held-out set of 2000 at T=1024: %.3f s; batch of 32 at T=4096: %.2f ms\n",
                  build, 1e3 * batch);
    assert_true(build < 0.9);
    assert_true(batch < 0.2);
    free(in);
    free(tg);
    ba_dataset_free(d);
}

/* ------------------------------------------------------------ refusals */

static void test_refusals(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d = (ba_dataset *)&d;
    assert_int_equal(ba_dataset_brackets_capped(&d, 16, 1, -1, 10, 1, err), BA_ERR_ARG);
    assert_null(d);
    assert_non_null(strstr(err, "max_depth = -1"));
    /* one kind nested at most 1 deep: "()()..." alone */
    assert_int_equal(ba_dataset_brackets_capped(&d, 4096, 1, 1, 10, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "max_depth 1 has only 1 valid prefix"));
    assert_int_equal(ba_dataset_brackets_capped(&d, 0, 1, 2, 10, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "T = 0"));
    assert_int_equal(ba_dataset_brackets_capped(&d, 4097, 2, 2, 10, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "T = 4097 is out of range [1, 4096]"));
    assert_int_equal(ba_dataset_brackets_capped(&d, 64, 0, 2, 10, 1, err), BA_ERR_ARG);
    assert_int_equal(ba_dataset_brackets_capped(&d, 64, 2, 2, 0, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "n_heldout = 0"));
    /* a cap of 1 with 2 kinds at T = 3: 4 prefixes, room for 1 held out */
    assert_int_equal(ba_dataset_brackets_capped(&d, 3, 2, 1, 10, 1, err), BA_OK);
    assert_int_equal(ba_dataset_num_eval(d), 1);
    ba_dataset_free(d);
    /* the spec check */
    ba_data_spec spec = ba_data_spec_default(BA_TASK_BRACKETS);
    ba_config cfg = ba_config_default(BA_ATTN_SOFTMAX, 16);
    cfg.head = BA_HEAD_POINTER;
    cfg.vocab_size = 2;
    cfg.out_size = 16;
    assert_int_equal(ba_data_spec_check(&spec, &cfg, err), BA_OK);
    spec.max_depth = -4;
    assert_int_equal(ba_data_spec_check(&spec, &cfg, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "max_depth = -4"));
}

/* --------------------------------------------------------- config JSON */

static void test_config_round_trip(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    assert_int_equal(ba_dataset_brackets_capped(&d, 16, 2, 3, 20, 7, err), BA_OK);
    ba_config cfg = ba_config_default(BA_ATTN_SOFTMAX, 16);
    ba_config_set_data(&cfg, d);
    ba_data_spec spec, back;
    ba_dataset_spec(d, &spec);
    ba_dataset_free(d);
    /* uncapped: no key at all, as before long Dyck */
    spec.max_depth = 0;
    char *js = ba_config_to_json(&cfg, &spec);
    assert_non_null(js);
    assert_null(strstr(js, "max_depth"));
    ba_config c2;
    assert_int_equal(ba_config_from_json(js, &c2, &back, err), BA_OK);
    assert_int_equal(back.max_depth, 0);
    free(js);
    /* capped: written and read back */
    spec.max_depth = 3;
    js = ba_config_to_json(&cfg, &spec);
    assert_non_null(strstr(js, "\"max_depth\""));
    assert_int_equal(ba_config_from_json(js, &c2, &back, err), BA_OK);
    assert_int_equal(back.max_depth, 3);
    assert_int_equal(back.kinds, 2);
    /* bad values are refused naming the field */
    static const char *const bad[] = {"0", "-2", "2.5", "\"3\"", "true"};
    char *at = strstr(js, "\"max_depth\"");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t head = (size_t)(at - js) + strlen("\"max_depth\":");
        const char *tail = at + strlen("\"max_depth\":");
        while (*tail == ' ' || (*tail >= '0' && *tail <= '9'))
            tail++;
        char *mod = malloc(strlen(js) + 16);
        snprintf(mod, strlen(js) + 16, "%.*s%s%s", (int)head, js, bad[i], tail);
        err[0] = 0;
        assert_int_not_equal(ba_config_from_json(mod, &c2, &back, err), BA_OK);
        assert_non_null(strstr(err, "max_depth"));
        free(mod);
    }
    free(js);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pinned_exact),
        cmocka_unit_test(test_long_valid),
        cmocka_unit_test(test_depth_scale),
        cmocka_unit_test(test_double_distribution),
        cmocka_unit_test(test_double_matches_exact),
        cmocka_unit_test(test_large_T_limits),
        cmocka_unit_test(test_speed),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_config_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
