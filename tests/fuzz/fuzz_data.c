/* libFuzzer target: charlm text files.
 *
 * The input is written to a temporary file and read with ba_dataset_charlm
 * at T = 4, with the file's own vocabulary (vocab NULL), with a fixed small
 * ASCII one and with all 256 bytes. A dataset that loads gives one training
 * batch drawn with a fixed rng and every evaluation item; every id must lie
 * inside the dataset's vocabulary. The text check is held against its
 * reference twin (tests/utf8_ref.h): a file that loads must be UTF-8
 * without NUL, and one refused for its encoding must not be.
 *
 * Build and run: bash tests/fuzz/run.sh [SECONDS] */
#include "boltzattn.h"
#include "fuzz_common.h"
#include "../utf8_ref.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_T 4
#define FUZZ_B 3

static void check_ids(const int *x, int n, int V)
{
    for (int i = 0; i < n; i++)
        if (x[i] < 0 || x[i] >= V)
            __builtin_trap();
}

static void exercise(const char *path, const uint8_t *vocab, int vocab_size, int valid)
{
    char err[BA_ERR_LEN];
    ba_dataset *d = NULL;
    if (ba_dataset_charlm(&d, path, vocab, vocab_size, FUZZ_T, err) != BA_OK) {
        if (d)
            __builtin_trap(); /* a failed load must leave *out NULL */
        if (valid && (strstr(err, "UTF-8") || strstr(err, "NUL byte")))
            __builtin_trap(); /* valid text refused for its encoding */
        return;
    }
    if (!valid)
        __builtin_trap(); /* invalid text accepted */
    int V = ba_dataset_vocab_size(d);
    if (ba_dataset_task(d) != BA_TASK_CHARLM || ba_dataset_block_size(d) != FUZZ_T || V < 1 ||
        V > 256 || (vocab && V != vocab_size))
        __builtin_trap();
    int in[FUZZ_B * FUZZ_T], tg[FUZZ_B * FUZZ_T];
    ba_rng rng;
    ba_rng_seed(&rng, 12345);
    ba_dataset_train_batch(d, &rng, FUZZ_B, in, tg);
    check_ids(in, FUZZ_B * FUZZ_T, V);
    check_ids(tg, FUZZ_B * FUZZ_T, V);
    int n = ba_dataset_num_eval(d);
    if (n < 1)
        __builtin_trap();
    for (int i = 0; i < n; i++) {
        ba_dataset_eval_item(d, i, in, tg);
        check_ids(in, FUZZ_T, V);
        check_ids(tg, FUZZ_T, V);
    }
    uint64_t ntrain, neval;
    ba_dataset_sizes(d, &ntrain, &neval);
    ba_dataset_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t vocab[] = "\n !',.:;?abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    uint8_t all[256];
    for (int b = 0; b < 256; b++)
        all[b] = (uint8_t)b;
    char path[32];
    write_temp(data, size, path);
    int valid = utf8_ref_valid(data, size);
    exercise(path, NULL, 0, valid);
    exercise(path, vocab, (int)(sizeof vocab - 1), valid);
    exercise(path, all, 256, valid);
    unlink(path);
    return 0;
}
