/* End-to-end training through the library's training loop (float
 * library, ba_trainer_run without a run directory):
 * - brackets T=8: a boltzmann model beats the position baseline on the
 *   held-out set by a clear margin;
 * - training is deterministic: the same seed gives bit-identical loss,
 *   parameters and optimiser state;
 * - charlm on a small generated corpus: softmax and boltzmann models bring
 *   the validation loss well below its initial value, log V and the corpus's
 *   unigram entropy;
 * - every attention variant trains on brackets T=6 without error and its
 *   loss goes down;
 * - the weights of the tiled variants (softmax, sigmoid), recomputed by
 *   ba_model_attention, match the fields of ba_model_fields.
 * Thresholds were chosen from measured runs over many seeds (see each test);
 * the whole file takes a few seconds with OMP_NUM_THREADS=2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boltzattn.h"

#define MAXB 64
#define MAXT 8

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    int C, H, ffn;
    int steps, B, warmup;
    double lr;
    uint64_t seed;
} train_opts;

typedef struct {
    double first10, last10; /* mean training loss of the first / last 10 steps */
    double final_loss;      /* loss of the last step */
    double seconds;
} train_log;

/* The losses of a run, step by step (the loop's progress hook). */
typedef struct {
    train_log *log;
    long steps;
} loss_sink;

static void on_progress(const ba_record *r, void *user)
{
    loss_sink *k = user;
    assert_true(isfinite(r->loss) && r->loss >= 0.0);
    if (r->step <= 10)
        k->log->first10 += r->loss / 10;
    if (r->step > k->steps - 10)
        k->log->last10 += r->loss / 10;
    k->log->final_loss = r->loss;
}

/* A trainer of a model for d with attention attn, initialised from
 * opts.seed, with AdamW defaults and the warmup + cosine schedule (to
 * lr/10), no periodic evaluation. */
static ba_trainer *trainer(const ba_dataset *d, ba_attn attn, const train_opts *o)
{
    char err[BA_ERR_LEN];
    int T = ba_dataset_block_size(d);
    ba_config cfg = ba_config_default(attn, T);
    ba_config_set_data(&cfg, d);
    cfg.n_embd = o->C;
    cfg.n_head = o->H;
    cfg.ffn = o->ffn;
    ba_train_settings s = ba_train_settings_default(o->steps);
    s.batch = o->B, s.warmup = o->warmup, s.lr = o->lr, s.min_lr_frac = 0.1, s.seed = o->seed;
    s.eval_every = 0, s.save_every = 0;
    assert_true(o->B <= MAXB && T <= MAXT);
    ba_trainer *t = NULL;
    if (ba_trainer_init(&t, &cfg, d, NULL, &s, err))
        fail_msg("ba_trainer_init: %s", err);
    return t;
}

/* Trains through the library's loop (no run directory) and returns the
 * trainer; the caller frees it. */
static ba_trainer *train(const ba_dataset *d, ba_attn attn, const train_opts *o, train_log *log)
{
    char err[BA_ERR_LEN];
    ba_trainer *t = trainer(d, attn, o);
    memset(log, 0, sizeof *log);
    loss_sink sink = {log, o->steps};
    ba_train_hooks hooks = {NULL, on_progress, NULL, &sink, NULL};
    ba_train_outcome out;
    double t0 = now();
    if (ba_trainer_run(t, NULL, &hooks, &out, err))
        fail_msg("%s: %s", ba_attn_name(attn), err);
    log->seconds = now() - t0;
    assert_int_equal(ba_trainer_step_count(t), o->steps);
    assert_int_equal(out.steps_run, o->steps);
    assert_int_equal(out.saved_step, -1); /* nothing written without a directory */
    return t;
}

static void evaluate(ba_model *m, const ba_dataset *d, ba_eval_result *r)
{
    char err[BA_ERR_LEN];
    if (ba_evaluate(m, d, 0, 64, r, err))
        fail_msg("ba_evaluate: %s", err);
    assert_true(isfinite(r->loss));
}

/* Held-out loss of a freshly initialised model (same seed, no training). */
static double initial_eval_loss(const ba_dataset *d, ba_attn attn, const train_opts *o)
{
    ba_trainer *t = trainer(d, attn, o);
    ba_eval_result r;
    evaluate(ba_trainer_model(t), d, &r);
    ba_trainer_free(t);
    return r.loss;
}

/* ------------------------------------------------------------ brackets */

/* brackets T=8, one kind: 70 valid prefixes, 14 held out (20 %), 56 to
 * train on. Measured with this configuration (2 heads, C=32, FFN, B=32,
 * 300 steps, lr 3e-3, warmup 20, cosine to 3e-4; the same run as `boltzattn
 * train --task brackets --T 8 --heads 2 --embd 32 --steps 300 --warmup 20
 * --seed S`) over seeds 1..20: held-out accuracy 1.000 for 15 seeds, 0.974
 * for 1, 0.947 for 2, 0.895 for 2, against a position baseline of 0.789
 * (30 of 38 closes); held-out loss 0.003-0.175 after training (1.36 at
 * initialisation for seed 1). The bounds below hold for all 20 seeds; seed
 * 1 reaches 1.000. */
static void test_brackets_boltzmann_beats_baseline(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    if (ba_dataset_brackets(&d, 8, 1, 2000, 1234, err))
        fail_msg("ba_dataset_brackets: %s", err);
    uint64_t ntrain, neval;
    ba_dataset_sizes(d, &ntrain, &neval);
    assert_int_equal(ntrain, 56);
    assert_int_equal(neval, 14);
    assert_int_equal(ba_dataset_num_eval(d), 14);
    double base = ba_dataset_position_baseline(d);
    assert_true(base > 0.0 && base < 1.0);

    train_opts o = {.C = 32, .H = 2, .ffn = 1, .steps = 300, .B = 32, .warmup = 20,
                    .lr = 3e-3, .seed = 1};
    double l0 = initial_eval_loss(d, BA_ATTN_BOLTZMANN, &o);
    train_log lg;
    ba_trainer *t = train(d, BA_ATTN_BOLTZMANN, &o, &lg);
    ba_eval_result r;
    evaluate(ba_trainer_model(t), d, &r);
    print_message("brackets T=8 boltzmann: held-out accuracy %.3f (%ld targets, %d items), "
                  "position baseline %.3f; held-out loss %.3f -> %.3f; train loss %.3f -> %.3f; "
                  "%.2f s\n",
                  r.accuracy, r.n_targets, r.n_items, base, l0, r.loss, lg.first10, lg.last10,
                  lg.seconds);
    assert_int_equal(r.n_items, 14);
    assert_true(r.n_targets > 0);
    assert_true(r.accuracy >= base + 0.1);
    assert_true(r.loss < 0.3 * l0);
    assert_true(lg.last10 < 0.2 * lg.first10);
    ba_trainer_free(t);
    ba_dataset_free(d);
}

/* The same seed twice: bit-identical final loss, parameters, AdamW moments.
 * A different seed must differ (so the comparison can fail). */
static void test_training_deterministic(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    if (ba_dataset_brackets(&d, 8, 1, 2000, 1234, err))
        fail_msg("ba_dataset_brackets: %s", err);
    train_opts o = {.C = 32, .H = 2, .ffn = 1, .steps = 60, .B = 32, .warmup = 20,
                    .lr = 3e-3, .seed = 7};
    train_log a, b, c;
    ba_trainer *ta = train(d, BA_ATTN_BOLTZMANN, &o, &a);
    ba_trainer *tb = train(d, BA_ATTN_BOLTZMANN, &o, &b);
    o.seed = 8;
    ba_trainer *tc = train(d, BA_ATTN_BOLTZMANN, &o, &c);
    ba_model *ma = ba_trainer_model(ta), *mb = ba_trainer_model(tb), *mc = ba_trainer_model(tc);
    size_t P = ba_model_num_params(ma);
    assert_int_equal(P, ba_model_num_params(mb));
    assert_memory_equal(&a.final_loss, &b.final_loss, sizeof(double));
    assert_memory_equal(ba_model_params(ma), ba_model_params(mb), P * sizeof(ba_real));
    assert_memory_equal(ba_model_adam_m(ma), ba_model_adam_m(mb), P * sizeof(ba_real));
    assert_memory_equal(ba_model_adam_v(ma), ba_model_adam_v(mb), P * sizeof(ba_real));
    assert_memory_not_equal(ba_model_params(ma), ba_model_params(mc), P * sizeof(ba_real));
    /* J is trained (it starts at zero). */
    ba_tensor_info ti;
    int idx = ba_model_find_tensor(ma, "blocks.0.attn.J");
    assert_true(idx >= 0);
    assert_int_equal(ba_model_tensor(ma, idx, &ti), BA_OK);
    double jmax = 0.0;
    for (size_t i = 0; i < ti.size; i++)
        jmax = fmax(jmax, fabs((double)ba_model_params(ma)[ti.offset + i]));
    print_message("determinism: final loss %.9g twice, J (%s) max |J| %.3g after 60 steps\n",
                  a.final_loss, ti.name, jmax);
    assert_true(jmax > 1e-3);
    ba_trainer_free(ta);
    ba_trainer_free(tb);
    ba_trainer_free(tc);
    ba_dataset_free(d);
}

/* -------------------------------------------------------------- charlm */

/* A corpus of words drawn from a small list with a fixed ba_rng: within a
 * word each next character is determined, so a model with context does far
 * better than the unigram entropy. Returns the unigram entropy (nats). */
static double write_corpus(int fd, size_t len)
{
    static const char *words[] = {"apple", "banana", "cherry", "date", "fig",
                                  "grape", "kiwi",   "lemon",  "mango"};
    const int nw = (int)(sizeof words / sizeof words[0]);
    ba_rng r;
    ba_rng_seed(&r, 2024);
    char *buf = malloc(len + 16);
    assert_non_null(buf);
    size_t n = 0;
    while (n < len) {
        const char *w = words[ba_rng_below(&r, (uint64_t)nw)];
        size_t k = strlen(w);
        memcpy(buf + n, w, k);
        n += k;
        buf[n++] = ba_rng_below(&r, 8) == 0 ? '\n' : ' ';
    }
    assert_int_equal(write(fd, buf, n), (ssize_t)n);
    long cnt[256] = {0};
    for (size_t i = 0; i < n; i++)
        cnt[(unsigned char)buf[i]]++;
    double H = 0.0;
    for (int c = 0; c < 256; c++)
        if (cnt[c]) {
            double p = (double)cnt[c] / (double)n;
            H -= p * log(p);
        }
    free(buf);
    return H;
}

/* Measured (C=32, 2 heads, FFN, B=32, 200 steps, lr 3e-3 -> 3e-4, 16
 * seeds, when the batches still shared the initialisation's stream): V =
 * 21, validation loss 3.03-3.06 at initialisation (log V = 3.045), 0.60-0.61
 * after for both variants, unigram entropy 2.78; with the trainer's own
 * batch stream, seed 5: 3.054 -> 0.601 (softmax) and 0.604 (boltzmann). The
 * bounds below (0.7 x initial, log V, 0.5 x unigram entropy) leave a wide
 * margin. */
static void test_charlm_learns(void **state)
{
    (void)state;
    char path[] = "/tmp/ba_test_charlm_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    double Huni = write_corpus(fd, 24000);
    close(fd);
    char err[BA_ERR_LEN];
    ba_dataset *d;
    int rc = ba_dataset_charlm(&d, path, NULL, 0, 8, err);
    unlink(path);
    if (rc)
        fail_msg("ba_dataset_charlm: %s", err);
    int V = ba_dataset_vocab_size(d);
    assert_true(V >= 10 && V <= 30);
    assert_true(ba_dataset_num_eval(d) > 100);

    const ba_attn kinds[] = {BA_ATTN_SOFTMAX, BA_ATTN_BOLTZMANN};
    for (int k = 0; k < 2; k++) {
        train_opts o = {.C = 32, .H = 2, .ffn = 1, .steps = 200, .B = 32, .warmup = 20,
                        .lr = 3e-3, .seed = 5};
        double l0 = initial_eval_loss(d, kinds[k], &o);
        train_log lg;
        ba_trainer *t = train(d, kinds[k], &o, &lg);
        ba_eval_result r;
        evaluate(ba_trainer_model(t), d, &r);
        print_message("charlm %s: V=%d, val loss %.3f -> %.3f (log V %.3f, unigram entropy "
                      "%.3f), val accuracy %.3f, train loss %.3f -> %.3f, %.2f s\n",
                      ba_attn_name(kinds[k]), V, l0, r.loss, log((double)V), Huni, r.accuracy,
                      lg.first10, lg.last10, lg.seconds);
        assert_true(fabs(l0 - log((double)V)) < 0.5); /* near uniform at init */
        assert_true(r.loss < 0.7 * l0);
        assert_true(r.loss < log((double)V));
        assert_true(r.loss < 0.5 * Huni);
        ba_trainer_free(t);
    }
    ba_dataset_free(d);
}

/* ------------------------------------------------------- all variants */

/* brackets T=6 (20 prefixes, 4 held out): every variant trains 100 steps
 * without error and its mean training loss over the last 10 steps is below
 * half the first 10 steps' mean (measured over 16 seeds when the batches
 * still shared the initialisation's stream: at most 0.23 of it; with the
 * trainer's own batch stream, seed 3: at most 0.13
 * for every variant). */
static void test_all_variants_train(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d;
    if (ba_dataset_brackets(&d, 6, 1, 2000, 99, err))
        fail_msg("ba_dataset_brackets: %s", err);
    for (int a = 0; a < 4; a++) {
        train_opts o = {.C = 32, .H = 2, .ffn = 1, .steps = 100, .B = 32, .warmup = 10,
                        .lr = 3e-3, .seed = 3};
        train_log lg;
        ba_trainer *t = train(d, (ba_attn)a, &o, &lg);
        ba_eval_result r;
        evaluate(ba_trainer_model(t), d, &r);
        print_message("brackets T=6 %-9s: train loss %.3f -> %.3f, held-out accuracy %.3f "
                      "(baseline %.3f), %.2f s\n",
                      ba_attn_name((ba_attn)a), lg.first10, lg.last10, r.accuracy,
                      ba_dataset_position_baseline(d), lg.seconds);
        assert_true(lg.last10 < 0.5 * lg.first10);
        ba_trainer_free(t);
    }
    ba_dataset_free(d);
}

/* ba_model_fields with the layer's couplings rebuilds the attention the
 * forward used: exact marginals of (h, J), normalised, equal the stored
 * weights (float model, so to float precision). */
static void test_model_fields(void **state)
{
    (void)state;
    enum { T = 8, B = 3 };
    char err[BA_ERR_LEN];
    ba_dataset *d;
    assert_int_equal(ba_dataset_brackets(&d, T, 1, 14, 1234, err), BA_OK);
    ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, T);
    ba_config_set_data(&cfg, d);
    cfg.n_head = 2, cfg.n_embd = 16;
    ba_model *m;
    assert_int_equal(ba_model_init(&m, &cfg, err), BA_OK);
    ba_rng r;
    ba_rng_seed(&r, 5);
    ba_model_init_weights(m, &r, 0.5); /* nonzero J */
    int in[B * T], tg[B * T];
    ba_dataset_train_batch(d, &r, B, in, tg);
    double loss;
    assert_int_equal(ba_model_forward(m, in, tg, B, T, &loss, err), BA_OK);
    int jt = ba_model_find_tensor(m, "blocks.0.attn.J");
    assert_true(jt >= 0);
    ba_tensor_info ti;
    assert_int_equal(ba_model_tensor(m, jt, &ti), BA_OK);
    const ba_real *Jp = ba_model_params(m) + ti.offset; // (H,T,T)
    const ba_real *att = ba_model_attention(m, 0);      // (B,H,T,T)
    double worst = 0.0;
    for (int hh = 0; hh < 2; hh++)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < T; i++) {
                double h[T], J[T * T], lw[T], z = 0.0;
                assert_int_equal(ba_model_fields(m, 0, hh, b, i, h, err), BA_OK);
                for (int k = 0; k < T * T; k++)
                    J[k] = Jp[(size_t)hh * T * T + k];
                assert_int_equal(
                    ba_ising_marginals(BA_ENGINE_REFERENCE, i + 1, h, J, T, lw, err), BA_OK);
                for (int j = 0; j <= i; j++)
                    z += exp(lw[j]);
                for (int j = 0; j <= i; j++) {
                    double a = att[(((size_t)b * 2 + hh) * T + i) * T + j];
                    worst = fmax(worst, fabs(exp(lw[j]) / z - a));
                }
            }
    assert_true(worst < 1e-5);
    double h[T];
    assert_int_equal(ba_model_fields(m, 1, 0, 0, 0, h, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "layer 1"));
    assert_int_equal(ba_model_fields(m, 0, 0, B, 0, h, err), BA_ERR_ARG);
    assert_int_equal(ba_model_fields(m, 0, 0, 0, T, h, err), BA_ERR_ARG);
    ba_model_free(m);
    ba_dataset_free(d);
}

/* Softmax and sigmoid run the tiled kernels, which keep no weights:
 * ba_model_attention recomputes them from the saved log-sum-exp. They
 * equal the normalised weights of ba_model_fields' fields (log sigmoid(2h)
 * for sigmoid), to float precision, in every layer, and follow the next
 * forward. */
static void test_tiled_weights(void **state)
{
    (void)state;
    enum { T = 8, B = 3, H = 2, L = 2 };
    char err[BA_ERR_LEN];
    ba_dataset *d;
    assert_int_equal(ba_dataset_brackets(&d, T, 1, 14, 1234, err), BA_OK);
    for (int v = 0; v < 2; v++) {
        ba_attn attn = v ? BA_ATTN_SIGMOID : BA_ATTN_SOFTMAX;
        ba_config cfg = ba_config_default(attn, T);
        ba_config_set_data(&cfg, d);
        cfg.n_head = H, cfg.n_embd = 16, cfg.n_layer = L;
        ba_model *m;
        assert_int_equal(ba_model_init(&m, &cfg, err), BA_OK);
        ba_rng r;
        ba_rng_seed(&r, 5 + v);
        ba_model_init_weights(m, &r, 0);
        ba_real *p = ba_model_params(m); /* larger weights: rows far from uniform */
        for (size_t k = 0; k < ba_model_num_params(m); k++)
            p[k] *= 6;
        int in[B * T], tg[B * T];
        for (int pass = 0; pass < 2; pass++) {
            ba_dataset_train_batch(d, &r, B, in, tg);
            assert_int_equal(ba_model_forward(m, in, tg, B, T, NULL, err), BA_OK);
            double worst = 0.0, spread = 0.0;
            for (int l = 0; l < L; l++) {
                const ba_real *att = ba_model_attention(m, l); // (B,H,T,T)
                assert_non_null(att);
                for (int hh = 0; hh < H; hh++)
                    for (int b = 0; b < B; b++)
                        for (int i = 0; i < T; i++) {
                            double h[T], z = 0.0;
                            assert_int_equal(ba_model_fields(m, l, hh, b, i, h, err), BA_OK);
                            for (int j = 0; j <= i; j++) {
                                double lw = v ? -log1p(exp(-2 * h[j])) : h[j];
                                z += (h[j] = exp(lw));
                            }
                            const ba_real *a = att + (((size_t)b * H + hh) * T + i) * T;
                            for (int j = 0; j < T; j++) {
                                double want = j <= i ? h[j] / z : 0.0;
                                worst = fmax(worst, fabs(a[j] - want));
                                spread = fmax(spread, j <= i ? fabs(want - 1.0 / (i + 1)) : 0.0);
                            }
                        }
            }
            print_message("%s pass %d: max |a - a(fields)| = %.3g (spread %.3g)\n",
                          ba_attn_name(attn), pass, worst, spread);
            assert_true(spread > 0.05);
            assert_true(worst < 1e-5);
        }
        assert_null(ba_model_attention(m, L));
        ba_model_free(m);
    }
    ba_dataset_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_brackets_boltzmann_beats_baseline),
        cmocka_unit_test(test_training_deterministic),
        cmocka_unit_test(test_charlm_learns),
        cmocka_unit_test(test_all_variants_train),
        cmocka_unit_test(test_model_fields),
        cmocka_unit_test(test_tiled_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
