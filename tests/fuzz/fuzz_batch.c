/* libFuzzer target: batch files.
 *
 * The input is written to a temporary file and read with ba_batch_load.
 * A batch that loads is run through two tiny fixed models built once: a
 * brackets model (boltzmann attention, T = 4, C = 4) when its T is 4 and a
 * charlm model (softmax, V = 5, T = 4, C = 4) when its T is at most 4. Its
 * token and target values are whatever the file holds, so this checks that
 * ba_model_forward rejects out-of-range ids instead of indexing with them.
 *
 * Build and run: bash tests/fuzz/run.sh [SECONDS] */
#include "boltzattn.h"
#include "fuzz_common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_T 4

static ba_model *brackets_model, *charlm_model;

static ba_model *make_model(ba_config *cfg)
{
    char err[BA_ERR_LEN];
    ba_model *m;
    if (ba_model_init(&m, cfg, err) != BA_OK) {
        fprintf(stderr, "fuzz_batch: model init failed: %s\n", err);
        abort();
    }
    ba_rng rng;
    ba_rng_seed(&rng, 7);
    ba_model_init_weights(m, &rng, 0.1);
    return m;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    ba_config b = ba_config_default(BA_ATTN_BOLTZMANN, FUZZ_T);
    b.n_embd = 4;
    b.vocab_size = 2;
    b.out_size = FUZZ_T;
    b.head = BA_HEAD_POINTER;
    brackets_model = make_model(&b);

    ba_config c = ba_config_default(BA_ATTN_SOFTMAX, FUZZ_T);
    c.n_embd = 4;
    c.vocab_size = 5;
    c.out_size = 5;
    charlm_model = make_model(&c);
    return 0;
}

static void run(ba_model *m, const int *in, const int *tg, int B, int T)
{
    char err[BA_ERR_LEN];
    double loss;
    if (ba_model_forward(m, in, tg, B, T, &loss, err) == BA_OK) {
        ba_model_zero_grad(m);
        (void)ba_model_backward(m, err);
    }
    (void)ba_model_forward(m, in, NULL, B, T, NULL, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[32], err[BA_ERR_LEN];
    write_temp(data, size, path);
    int *in = NULL, *tg = NULL, B = 0, T = 0;
    int rc = ba_batch_load(path, &in, &tg, &B, &T, err);
    unlink(path);
    if (rc != BA_OK) {
        if (in || tg)
            __builtin_trap(); /* a failed load must leave nothing to free */
        return 0;
    }
    if (B < 1 || T < 1)
        __builtin_trap();
    /* Bound the work per input; the file size bounds B*T anyway. */
    if ((size_t)B * (size_t)T <= 4096) {
        if (T == FUZZ_T)
            run(brackets_model, in, tg, B, T);
        if (T <= FUZZ_T)
            run(charlm_model, in, tg, B, T);
    }
    free(in);
    free(tg);
    return 0;
}
