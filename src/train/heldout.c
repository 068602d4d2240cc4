/* The held-out set of the generated tasks (brackets, recall) as a hash
 * set of whole sequences: training draws equal to a held-out sequence are
 * rejected, so the evaluation scores sequences training never saw. */
#include "train/dataset.h"

#include <stdlib.h>
#include <string.h>

/* 64-bit hash of a token sequence: multiply-xor per token, then a final
 * avalanche so the low bits used for slots depend on every token. */
static uint64_t seq_hash(const uint8_t *s, int T)
{
    uint64_t h = 0x243f6a8885a308d3ULL;
    for (int i = 0; i < T; i++)
        h = (h ^ s[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

size_t ba_held_probe(const ba_dataset *d, const uint8_t *s)
{
    size_t mask = d->n_slots - 1;
    size_t i = (size_t)seq_hash(s, d->T) & mask;
    while (d->slots[i]) {
        const uint8_t *h = d->held + (size_t)(d->slots[i] - 1) * (size_t)d->T;
        if (memcmp(h, s, (size_t)d->T) == 0)
            return i;
        i = (i + 1) & mask;
    }
    return i;
}

int ba_held_contains(const ba_dataset *d, const uint8_t *s)
{
    return d->n_held > 0 && d->slots[ba_held_probe(d, s)] != 0;
}

int ba_held_check_count(int n_heldout, char *err)
{
    if (n_heldout < 1)
        return ba_fail(err, BA_ERR_ARG,
                       "n_heldout = %d: the held-out set must hold at least 1 sequence (it is "
                       "what evaluation scores)",
                       n_heldout);
    return BA_OK;
}

int ba_held_alloc(ba_dataset *d, int n, char *err)
{
    size_t bytes, slot_bytes;
    size_t n_slots = 1;
    while (n_slots < 2 * (size_t)n)
        n_slots *= 2;
    if (n < 1 || ba_mul_size((size_t)n, (size_t)d->T, &bytes) ||
        ba_mul_size(n_slots, sizeof *d->slots, &slot_bytes))
        return ba_fail(err, BA_ERR_NOMEM, "held-out set of %d sequences is too large", n);
    d->held = malloc(bytes);
    d->slots = calloc(n_slots, sizeof *d->slots);
    if (!d->held || !d->slots) {
        free(d->held);
        free(d->slots);
        d->held = NULL;
        d->slots = NULL;
        return ba_fail(err, BA_ERR_NOMEM,
                       "out of memory for a held-out set of %d sequences of length %d", n, d->T);
    }
    d->n_slots = n_slots;
    d->n_held = n;
    return BA_OK;
}
