/* libFuzzer target: checkpoint files.
 *
 * The input is written to a temporary file and read back with
 * ba_checkpoint_load, then with ba_st_read (every tensor's bytes are
 * touched so ASan sees a data pointer outside the file) and
 * ba_config_from_json on its "config" metadata. The raw input is also
 * given to ba_config_from_json directly, which reaches the config parser
 * without the safetensors framing. A checkpoint that loads with a small
 * block size runs one forward pass. The input is also read as a trainer
 * state (ba_trainer_peek, then ba_trainer_restore on the brackets data it
 * describes, kept small).
 *
 * Build and run: bash tests/fuzz/run.sh [SECONDS] */
#include "boltzattn.h"
#include "fuzz_common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Tensor bytes are summed into this so the reads are not optimised away. */
static volatile unsigned sink;

/* One forward (and backward) of a loaded model on a fixed batch. */
static void run_model(ba_model *m)
{
    const ba_config *c = ba_model_config(m);
    if (c->block_size > 8)
        return; /* keeps the exact engines and the activations small */
    enum { B = 2 };
    int T = c->block_size;
    int in[B * 8], tg[B * 8];
    for (int i = 0; i < B * T; i++) {
        int t = i % T;
        in[i] = (i * 7 + 1) % c->vocab_size;
        if (c->head == BA_HEAD_POINTER)
            tg[i] = t > 0 ? (i / T) % t : -1;
        else
            tg[i] = (i * 3) % c->out_size;
    }
    char err[BA_ERR_LEN];
    double loss;
    if (ba_model_forward(m, in, tg, B, T, &loss, err) == BA_OK) {
        ba_model_zero_grad(m);
        (void)ba_model_backward(m, err);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[32], err[BA_ERR_LEN];
    write_temp(data, size, path);

    ba_model *m = NULL;
    ba_data_spec spec;
    if (ba_checkpoint_load(path, &m, &spec, err) == BA_OK) {
        run_model(m);
        ba_model_free(m);
    }

    ba_config scfg;
    ba_data_spec sspec;
    ba_train_settings ss;
    char *spath = NULL;
    if (ba_trainer_peek(path, &scfg, &sspec, &ss, &spath, err) == BA_OK &&
        sspec.task == BA_TASK_BRACKETS && scfg.block_size <= 8 && sspec.n_heldout <= 64) {
        ba_dataset *d = NULL;
        ba_trainer *t = NULL;
        if (ba_dataset_brackets_capped(&d, scfg.block_size, sspec.kinds, sspec.max_depth,
                                       sspec.n_heldout, sspec.data_seed, err) == BA_OK &&
            ba_trainer_restore(&t, path, d, NULL, err) == BA_OK)
            ba_trainer_free(t);
        ba_dataset_free(d);
    }
    free(spath);

    ba_st *st = NULL;
    if (ba_st_read(&st, path, err) == BA_OK) {
        for (int i = 0; i < ba_st_count(st); i++) {
            const ba_st_tensor *t = ba_st_get(st, i);
            const unsigned char *p = t->data;
            for (size_t k = 0; k < t->nbytes; k++)
                sink += p[k];
            if (ba_st_find(st, t->name) == NULL)
                __builtin_trap(); /* a listed tensor must be found by name */
        }
        const char *cj = ba_st_metadata(st, "config");
        if (cj) {
            ba_config cfg;
            (void)ba_config_from_json(cj, &cfg, NULL, err);
        }
        ba_st_free(st);
    }
    unlink(path);

    /* The input itself as config JSON (NUL-terminated copy). */
    char *json = malloc(size + 1);
    if (!json)
        return 0;
    memcpy(json, data, size);
    json[size] = '\0';
    ba_config cfg;
    ba_data_spec spec_json;
    if (ba_config_from_json(json, &cfg, &spec_json, err) == BA_OK) {
        /* A valid config must print back to JSON that parses to itself. */
        char *again = ba_config_to_json(&cfg, &spec_json);
        ba_config cfg2;
        ba_data_spec spec2;
        if (!again || ba_config_from_json(again, &cfg2, &spec2, err) != BA_OK)
            __builtin_trap();
        free(again);
    }
    free(json);
    return 0;
}
