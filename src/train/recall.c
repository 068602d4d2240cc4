/* recall: multi-query associative recall (MQAR; Arora et al. 2023,
 * "Zoology"). A context of key-value pairs, then queries of its keys; the
 * model must emit each queried key's value, which only attention back to
 * the key's pair can find. Held-out sequences, chosen by the data seed,
 * are never drawn for training. */
#include "train/dataset.h"

#include <stdlib.h>
#include <string.h>

/* a*b, or UINT64_MAX when it does not fit: the count only sizes the
 * held-out cap, and any count above 5 * n_heldout gives the same cap. */
static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    if (a != 0 && b > UINT64_MAX / a)
        return UINT64_MAX;
    return a * b;
}

/* Query keys after the 2N context tokens: ceil((T - 2N) / 2), the last one
 * without its value when T - 2N is odd. */
static int n_queries(int T, int N) { return (T - 2 * N + 1) / 2; }

/* Number of distinct sequences (saturating): N distinct keys in order
 * (K!/(K-N)!), their values (K^N), then per full round of N queries a
 * permutation (N!) and for the last partial round of r queries N!/(N-r)!
 * orders. The query values are determined by the context. */
static uint64_t recall_count(int T, int K, int N)
{
    uint64_t c = 1, fact = 1;
    for (int i = 0; i < N; i++) {
        c = mul_sat(mul_sat(c, (uint64_t)(K - i)), (uint64_t)K);
        fact = mul_sat(fact, (uint64_t)(i + 1));
    }
    int Q = n_queries(T, N);
    for (int r = 0; r < Q / N && c != UINT64_MAX; r++)
        c = mul_sat(c, fact);
    for (int i = 0; i < Q % N; i++)
        c = mul_sat(c, (uint64_t)(N - i));
    return c;
}

/* One uniform sequence into s (T): the context, then the query rounds,
 * each a fresh Fisher-Yates permutation of the N pairs, cut at T. */
static void recall_sample(const ba_dataset *d, ba_rng *rng, uint8_t *s)
{
    int K = d->vocab_size / 2, N = d->pairs, T = d->T;
    uint8_t keys[128], vals[128], order[128]; /* (K) keys, (N) values and query order */
    for (int k = 0; k < K; k++)
        keys[k] = (uint8_t)k;
    for (int i = 0; i < N; i++) { /* partial Fisher-Yates: N keys without replacement */
        int j = i + (int)ba_rng_below(rng, (uint64_t)(K - i));
        uint8_t t = keys[i];
        keys[i] = keys[j];
        keys[j] = t;
        vals[i] = (uint8_t)(K + (int)ba_rng_below(rng, (uint64_t)K));
        s[2 * i] = keys[i];
        s[2 * i + 1] = vals[i];
    }
    int t = 2 * N;
    while (t < T) {
        for (int i = 0; i < N; i++)
            order[i] = (uint8_t)i;
        for (int i = N - 1; i > 0; i--) {
            int j = (int)ba_rng_below(rng, (uint64_t)(i + 1));
            uint8_t x = order[i];
            order[i] = order[j];
            order[j] = x;
        }
        for (int i = 0; i < N && t < T; i++) {
            s[t++] = keys[order[i]];
            if (t < T)
                s[t++] = vals[order[i]];
        }
    }
}

/* Inputs and targets of s (T): a query key's target is the value its pair
 * in the context holds; everything else has none. */
static void recall_fill(const ba_dataset *d, const uint8_t *s, int *inputs, int *targets)
{
    int value[128]; /* (K) the context's value of each key, -1 if absent */
    int K = d->vocab_size / 2, N = d->pairs;
    for (int k = 0; k < K; k++)
        value[k] = -1;
    for (int i = 0; i < N; i++)
        value[s[2 * i]] = s[2 * i + 1];
    for (int t = 0; t < d->T; t++) {
        inputs[t] = s[t];
        targets[t] = t >= 2 * N && (t - 2 * N) % 2 == 0 ? value[s[t]] : -1;
    }
}

void ba_recall_train_item(const ba_dataset *d, ba_rng *rng, int *inputs, int *targets)
{
    uint8_t s[BA_MAX_BLOCK];
    do
        recall_sample(d, rng, s);
    while (ba_held_contains(d, s));
    recall_fill(d, s, inputs, targets);
}

void ba_recall_eval_item(const ba_dataset *d, int idx, int *inputs, int *targets)
{
    recall_fill(d, d->held + (size_t)idx * (size_t)d->T, inputs, targets);
}

static int recall_check(int T, int vocab, int pairs, int n_heldout, char *err)
{
    if (vocab < 4 || vocab > 256 || vocab % 2)
        return ba_fail(err, BA_ERR_ARG,
                       "recall vocabulary = %d must be even and in [4, 256] (half keys, half "
                       "values)",
                       vocab);
    if (pairs < 1 || pairs > vocab / 2)
        return ba_fail(err, BA_ERR_ARG,
                       "recall pairs = %d is out of range [1, %d] (the keys are distinct: at "
                       "most vocabulary/2 = %d/2)",
                       pairs, vocab / 2, vocab);
    if (T < 4 * pairs || T > BA_MAX_BLOCK)
        return ba_fail(err, BA_ERR_ARG,
                       "recall T = %d is out of range [%d, %d]: %d pairs take 2*%d = %d "
                       "positions and at least as many query pairs must follow (T >= 4*pairs)",
                       T, 4 * pairs, BA_MAX_BLOCK, pairs, pairs, 2 * pairs);
    /* Without a held-out set an evaluation would score nothing. */
    return ba_held_check_count(n_heldout, err);
}

int ba_dataset_recall(ba_dataset **out, int T, int vocab, int pairs, int n_heldout,
                      uint64_t data_seed, char *err)
{
    if (!out)
        return ba_fail(err, BA_ERR_ARG, "out is NULL");
    *out = NULL;
    int rc = recall_check(T, vocab, pairs, n_heldout, err);
    if (rc)
        return rc;
    ba_dataset *d = calloc(1, sizeof *d);
    if (!d)
        return ba_fail(err, BA_ERR_NOMEM, "out of memory allocating the dataset");
    d->task = BA_TASK_RECALL;
    d->T = T;
    d->vocab_size = vocab;
    d->pairs = pairs;
    d->n_heldout_req = n_heldout;
    d->data_seed = data_seed;
    d->total = recall_count(T, vocab / 2, pairs);
    d->baseline = 2.0 / vocab; /* a uniform guess among the vocab/2 values */

    /* As brackets: min(n_heldout, 20 % of the space, at least 1), so the
     * draws below and the training draws' rejections end quickly (the
     * smallest space, V = 4 with one pair, has 4 sequences: 1 held out). */
    uint64_t cap = d->total / 5;
    if (cap == 0)
        cap = 1;
    int n = (uint64_t)n_heldout < cap ? n_heldout : (int)cap;
    if ((rc = ba_held_alloc(d, n, err))) {
        free(d);
        return rc;
    }
    ba_rng rng;
    ba_rng_seed(&rng, data_seed);
    for (int have = 0; have < n;) {
        uint8_t *s = d->held + (size_t)have * (size_t)T;
        recall_sample(d, &rng, s);
        size_t slot = ba_held_probe(d, s);
        if (d->slots[slot] == 0)
            d->slots[slot] = (uint32_t)++have;
    }
    *out = d;
    return BA_OK;
}
