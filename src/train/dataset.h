/* The dataset struct and the pieces the task files share (src/train/:
 * tasks.c dispatches on the task; brackets and recall generate their
 * sequences in their own files). Private to the training layer. */
#ifndef BA_DATASET_H
#define BA_DATASET_H

#include "train/train.h"

#include <stddef.h>
#include <stdint.h>

/* Brackets go to the model's longest block; every table is on the heap,
 * sized by T and the depth cap (src/train/brackets.c). */
#define BR_MAX_T 4096
#define BR_MAX_KINDS 4

struct ba_dataset {
    ba_task task;
    int T;
    int vocab_size;     /* charlm: distinct bytes; brackets: 2*kinds; recall: V */
    uint8_t vocab[256]; /* charlm: token id -> byte */

    /* charlm: the whole file as token ids, train split first. */
    uint8_t *tokens; /* (n_train + n_val) */
    size_t n_train, n_val;
    int n_windows; /* validation windows */

    /* brackets */
    int kinds;
    int max_depth; /* nesting depth cap as requested, 0 = none */
    int cap;       /* the cap in effect: max_depth, or T without one */
    /* exact sampler (the count fits 64 bits), else NULL: f[t*(cap+1)+d] =
     * ways to finish positions t..T-1 from depth d, (T+1, cap+1). Only
     * entries with d <= t reachable from (0,0) are exact; the rest may
     * saturate. */
    uint64_t *f;
    /* double sampler, else NULL: p_open[p_row[t] + d/2] = probability of
     * an open at position t from depth d (d of t's parity, d <= min(t,
     * cap)); p_row (T) */
    double *p_open;
    size_t *p_row;
    double depth_mean; /* held-out set: mean of each sequence's deepest */
    int depth_max;     /* nesting, and the deepest of all */
    /* recall: number of key-value pairs of the context */
    int pairs;

    /* brackets and recall: the held-out set */
    int n_heldout_req; /* as requested, for the config */
    uint64_t data_seed;
    uint64_t total;  /* brackets: the number of valid prefixes (saturated);
                        recall: the number of sequences, saturated */
    int n_held;      /* held-out sequences actually stored */
    uint8_t *held;   /* (n_held, T) in generation order */
    uint32_t *slots; /* (n_slots) held index + 1, 0 = empty */
    size_t n_slots;  /* power of two, at least 2 * n_held */
    double baseline; /* brackets: position baseline over the held-out set;
                        recall: chance 2/V; charlm: -1 */
};

/* The held-out set as a hash set of whole sequences (src/train/heldout.c),
 * so training draws can be rejected when they equal a held-out one. */
/* Slot of d->slots holding s (T tokens), or the empty slot where it would
 * go. Needs d->n_slots > d->n_held (always: at least twice). */
size_t ba_held_probe(const ba_dataset *d, const uint8_t *s);
/* 1 when s (T tokens) is one of the held-out sequences. */
int ba_held_contains(const ba_dataset *d, const uint8_t *s);
/* BA_ERR_ARG naming n_heldout when it is under 1 (evaluation scores the
 * held-out set: it must hold a sequence), else BA_OK. */
int ba_held_check_count(int n_heldout, char *err);
/* Allocates d->held (n, d->T) and an empty slot table of at least 2n
 * entries; sets d->n_held = n. BA_ERR_NOMEM (nothing allocated) on
 * failure. */
int ba_held_alloc(ba_dataset *d, int n, char *err);

/* recall (src/train/recall.c), called by tasks.c's dispatchers for a
 * dataset whose task is BA_TASK_RECALL. */
void ba_recall_train_item(const ba_dataset *d, ba_rng *rng, int *inputs, int *targets);
void ba_recall_eval_item(const ba_dataset *d, int idx, int *inputs, int *targets);

/* brackets (src/train/brackets.c), for tasks.c's dispatchers: a training
 * item (a fresh uniform prefix that is not held out) and held-out item
 * idx, as (T) inputs and targets. */
void ba_brackets_train_item(const ba_dataset *d, ba_rng *rng, int *inputs, int *targets);
void ba_brackets_eval_item(const ba_dataset *d, int idx, int *inputs, int *targets);
/* ba_dataset_brackets_capped with force_double != 0 taking the double
 * sampler even where the count fits 64 bits (tests compare the two). */
int ba_brackets_build(ba_dataset **out, int T, int kinds, int max_depth, int n_heldout,
                      uint64_t data_seed, int force_double, char *err);
/* 1 when d draws with the exact sampler, 0 with the double one. */
int ba_brackets_exact(const ba_dataset *d);
/* The probability that the sampler opens at position t from depth depth
 * (exact path: k f(t+1,depth+1) / f(t,depth) in long double); -1 for a
 * state no valid prefix of d reaches. */
double ba_brackets_open_prob(const ba_dataset *d, int t, int depth);

#endif
