/* The brackets task: point from each close to its matching open, over
 * valid prefixes of length T drawn uniformly (optionally among those of
 * nesting depth <= max_depth), with a held-out set training never sees.
 *
 * Two samplers (docs/design.md "Brackets"). When the number of valid
 * prefixes fits 64 bits (T <= 67, 41, 32, 27 for 1-4 kinds uncapped, and
 * every T the task accepted before long Dyck) the exact one: a uint64
 * table of completion counts and integer draws, so records, checkpoints
 * and held-out sets made before are drawn bit for bit the same. Beyond
 * that the double one: the same walk with each step's open probability
 * from a double-precision DP of count ratios, uniform up to double
 * rounding. */
#include "train/dataset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Past T = 130 every uncapped or cap >= 2 count exceeds 2^64 (depth
 * 0 -> 1 -> {0, 2} alone gives 2^floor((T-1)/2) prefixes), so the exact
 * table is never bigger than (131, 132) or (T+1, 2). */
#define BR_EXACT_MAX_T 130

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    if (a != 0 && b > UINT64_MAX / a)
        return UINT64_MAX;
    return a * b;
}

/* The effective depth cap: max_depth, or T when there is none (a prefix
 * of length T never gets deeper, and at depth T no step is left, so this
 * cap changes no count that a walk from (0, 0) can use). */
static int eff_cap(int T, int max_depth) { return max_depth > 0 && max_depth < T ? max_depth : T; }

/* Number of valid prefixes of length T with depth <= cap, saturated at
 * UINT64_MAX: the DP of the exact sampler, one row at a time. */
static uint64_t count_capped(int T, int kinds, int cap)
{
    if (T > BR_EXACT_MAX_T && cap >= 2)
        return UINT64_MAX;
    /* Here cap <= T <= BR_EXACT_MAX_T, or cap = 1. */
    uint64_t g[BR_EXACT_MAX_T + 2]; /* g[d] = f(t, d) for the current t */
    for (int d = 0; d <= cap; d++)
        g[d] = 1;
    for (int t = T - 1; t >= 0; t--) {
        /* In-place update from low d upward would clobber g[d-1]; keep it. */
        uint64_t prev = 0; /* old g[d-1] */
        int top = t < cap ? t : cap;
        for (int d = 0; d <= top; d++) {
            uint64_t cur = g[d];
            uint64_t v = d < cap ? sat_mul((uint64_t)kinds, g[d + 1]) : 0;
            if (d > 0)
                v = sat_add(v, prev);
            prev = cur;
            g[d] = v;
        }
    }
    return g[0];
}

uint64_t ba_brackets_count(int T, int kinds)
{
    if (T < 0 || kinds < 1)
        return 0;
    /* The count grows with T (every prefix extends by an open), and
     * C(128,64) > 2^64 already for one kind: no need to run the DP. */
    if (T > 128)
        return UINT64_MAX;
    return count_capped(T, kinds, T);
}

int ba_brackets_max_T(int kinds)
{
    if (kinds < 1 || kinds > BR_MAX_KINDS)
        return 0;
    return BR_MAX_T;
}

/* ---------------------------------------------------------------- tables */

/* The exact sampler's table f[t][d] = completions of positions t..T-1 from
 * depth d, as (T+1, cap+1), entries d <= min(t, cap); the same saturating
 * recurrence as ever, so where f[0][0] fits every reachable entry is exact
 * (each extends to at least that many distinct prefixes). */
static int build_exact(ba_dataset *d, char *err)
{
    int T = d->T, W = d->cap + 1;
    d->f = calloc(((size_t)T + 1) * (size_t)W, sizeof *d->f);
    if (!d->f)
        return ba_fail(err, BA_ERR_NOMEM, "out of memory for the brackets table at T = %d", T);
    uint64_t *f = d->f;
    for (int dd = 0; dd < W; dd++)
        f[(size_t)T * W + dd] = 1;
    for (int t = T - 1; t >= 0; t--) {
        int top = t < d->cap ? t : d->cap;
        for (int dd = 0; dd <= top; dd++) {
            uint64_t v = dd < d->cap ? sat_mul((uint64_t)d->kinds, f[(size_t)(t + 1) * W + dd + 1])
                                     : 0;
            if (dd > 0)
                v = sat_add(v, f[(size_t)(t + 1) * W + dd - 1]);
            f[(size_t)t * W + dd] = v;
        }
    }
    return BA_OK;
}

/* Offset of (t, depth) in the double sampler's table: row t holds the
 * depths of t's parity up to min(t, cap), depth / 2 within the row. */
static size_t p_index(const ba_dataset *d, int t, int depth) { return d->p_row[t] + (size_t)(depth / 2); }

/* The double sampler's table p(t, d): the probability that a uniform valid
 * prefix at depth d after t tokens opens next, k g(n-1,d+1) / g(n,d) with
 * g(n, d) the completions of n steps from depth d. The counts reach
 * 5^4096, so the DP runs on ratios that stay near 1 instead:
 * rho(m, d) = g(m, d-1) / g(m, d+1), for 1 <= d <= cap-1, from
 *   g(m, d-1) / g(m-1, d) = k + rho(m-1, d-1)   (rho(., 0) := 0)
 *   g(m, d+1) / g(m-1, d) = 1 + k / rho(m-1, d+1) (rho(., cap) := inf)
 * with rho(0, d) = 1, and p = k / (k + rho(n-1, d)) (1 at depth 0, 0 at
 * the cap). Each step's relative sensitivities to its two inputs sum to
 * about 1, so rounding errors grow at most linearly in T. */
static int build_double(ba_dataset *d, char *err)
{
    int T = d->T, cap = d->cap;
    double k = (double)d->kinds;
    d->p_row = malloc((size_t)T * sizeof *d->p_row);
    double *rho = malloc(2 * ((size_t)cap + 1) * sizeof *rho);
    size_t n = 0;
    for (int t = 0; t < T && d->p_row; t++) {
        d->p_row[t] = n;
        n += (size_t)((t < cap ? t : cap) / 2) + 1;
    }
    d->p_open = d->p_row ? malloc(n * sizeof *d->p_open) : NULL;
    if (!d->p_row || !rho || !d->p_open) {
        free(rho);
        return ba_fail(err, BA_ERR_NOMEM,
                       "out of memory for the brackets probability table at T = %d", T);
    }
    double *cur = rho, *nxt = rho + cap + 1;
    for (int dd = 0; dd <= cap; dd++)
        cur[dd] = nxt[dd] = 1.0;
    cur[0] = nxt[0] = 0.0;
    cur[cap] = nxt[cap] = INFINITY;
    for (int m = 0; m < T; m++) {
        /* cur = rho(m, .): row t = T-1-m, n = m+1 steps left */
        int t = T - 1 - m, top = t < cap ? t : cap;
        for (int dd = t % 2; dd <= top; dd += 2)
            d->p_open[p_index(d, t, dd)] = dd == 0 ? 1.0 : dd == cap ? 0.0 : k / (k + cur[dd]);
        /* rho(m+1, d) for d <= t only: row t-1 reads d <= t-1, and the
         * next update d <= t-1 reads up to d+1 <= t */
        int hi = t < cap - 1 ? t : cap - 1;
        for (int dd = 1; dd <= hi; dd++)
            nxt[dd] = (k + cur[dd - 1]) / (1.0 + k / cur[dd + 1]);
        double *sw = cur;
        cur = nxt;
        nxt = sw;
    }
    free(rho);
    return BA_OK;
}

double ba_brackets_open_prob(const ba_dataset *d, int t, int depth)
{
    if (!d || d->task != BA_TASK_BRACKETS || t < 0 || t >= d->T || depth < 0 ||
        depth > t || depth > d->cap || (t - depth) % 2)
        return -1.0;
    if (d->f) {
        size_t W = (size_t)d->cap + 1;
        uint64_t up = depth < d->cap ? d->f[(size_t)(t + 1) * W + depth + 1] : 0;
        return (double)((long double)d->kinds * up / d->f[(size_t)t * W + depth]);
    }
    return d->p_open[p_index(d, t, depth)];
}

/* ----------------------------------------------------------- sequences */

/* One valid prefix into in (T token ids), link (T) as scratch: link[j]
 * holds, for an unmatched open j, the previous unmatched open (a stack
 * threaded through the positions, so no buffer of depth size is needed).
 * Exact path: at (t, depth) the draw r is uniform over the f(t,depth)
 * completions; the first kinds*f(t+1,depth+1) of them open (kind =
 * r / f(t+1,depth+1)), the rest close the top of the stack (the draws of
 * every earlier version). Double path: open with probability p(t, depth)
 * from a uniform double, the kind from a second draw. */
static void sample_prefix(const ba_dataset *d, ba_rng *rng, int *in, int *link)
{
    size_t W = (size_t)d->cap + 1;
    int depth = 0, top = -1;
    for (int t = 0; t < d->T; t++) {
        int k = -1; /* kind opened, or -1 for a close */
        if (d->f) {
            uint64_t r = ba_rng_below(rng, d->f[(size_t)t * W + depth]);
            uint64_t up = depth < d->cap ? d->f[(size_t)(t + 1) * W + depth + 1] : 0;
            if (r < (uint64_t)d->kinds * up)
                k = (int)(r / up);
        } else if (ba_rng_uniform(rng) < d->p_open[p_index(d, t, depth)]) {
            k = d->kinds > 1 ? (int)ba_rng_below(rng, (uint64_t)d->kinds) : 0;
        }
        if (k >= 0) {
            in[t] = 2 * k;
            link[t] = top;
            top = t;
            depth++;
        } else {
            in[t] = in[top] + 1;
            top = link[top];
            depth--;
        }
    }
}

/* Targets of the tokens in (T): a close at i points at its matching open
 * j, -1 elsewhere (and at a close without an open). The stack of unmatched
 * opens is threaded through targets itself: an open's entry holds the
 * previous unmatched open until a second pass sets it to -1. */
static void fill_targets(int T, const int *in, int *targets)
{
    int top = -1;
    for (int t = 0; t < T; t++) {
        if (in[t] % 2 == 0) {
            targets[t] = top;
            top = t;
        } else {
            targets[t] = top;
            if (top >= 0)
                top = targets[top];
        }
    }
    for (int t = 0; t < T; t++)
        if (in[t] % 2 == 0)
            targets[t] = -1;
}

void ba_brackets_train_item(const ba_dataset *d, ba_rng *rng, int *inputs, int *targets)
{
    /* The bytes for the held-out check go in targets' storage (4T bytes,
     * written through a character type) once sampling no longer needs its
     * links; fill_targets overwrites them after. */
    uint8_t *s = (uint8_t *)targets;
    do {
        sample_prefix(d, rng, inputs, targets);
        for (int t = 0; t < d->T; t++)
            s[t] = (uint8_t)inputs[t];
    } while (ba_held_contains(d, s));
    fill_targets(d->T, inputs, targets);
}

void ba_brackets_eval_item(const ba_dataset *d, int idx, int *inputs, int *targets)
{
    const uint8_t *s = d->held + (size_t)idx * (size_t)d->T;
    for (int t = 0; t < d->T; t++)
        inputs[t] = s[t];
    fill_targets(d->T, inputs, targets);
}

/* ------------------------------------------------------- the held-out set */

/* Best accuracy from the position of each close alone: per position the
 * most frequent target wins; 0 when the held-out set has no closes. The
 * (position, target) counts are taken for a block of positions at a time,
 * at most 4M of them (16 MB), re-reading the set per block at large T. */
static int position_baseline(ba_dataset *d, char *err)
{
    int T = d->T;
    int B = T <= (1 << 22) / T ? T : (1 << 22) / T;
    int *count = malloc((size_t)B * (size_t)T * sizeof *count); /* (i - i0, j) */
    int *in = malloc(2 * (size_t)T * sizeof *in), *tg = in ? in + T : NULL;
    if (!count || !in) {
        free(count);
        free(in);
        return ba_fail(err, BA_ERR_NOMEM, "out of memory for the position baseline at T = %d",
                       T);
    }
    long closes = 0, best = 0;
    for (int i0 = 0; i0 < T; i0 += B) {
        int i1 = T - i0 < B ? T : i0 + B;
        memset(count, 0, (size_t)(i1 - i0) * (size_t)T * sizeof *count);
        for (int n = 0; n < d->n_held; n++) {
            ba_brackets_eval_item(d, n, in, tg);
            for (int i = i0; i < i1; i++)
                if (tg[i] >= 0) {
                    count[(size_t)(i - i0) * (size_t)T + (size_t)tg[i]]++;
                    closes++;
                }
        }
        for (int i = i0; i < i1; i++) {
            int m = 0;
            for (int j = 0; j < i; j++)
                if (count[(size_t)(i - i0) * (size_t)T + (size_t)j] > m)
                    m = count[(size_t)(i - i0) * (size_t)T + (size_t)j];
            best += m;
        }
    }
    free(count);
    free(in);
    d->baseline = closes > 0 ? (double)best / (double)closes : 0.0;
    return BA_OK;
}

/* The held-out set: n_held distinct draws in generation order (at most
 * 20 % of the space is taken, 50 % for a total <= 4, so rejection ends
 * quickly), then its closes and nesting depths. */
static int draw_heldout(ba_dataset *d, char *err)
{
    int T = d->T;
    int *in = malloc(2 * (size_t)T * sizeof *in), *link = in ? in + T : NULL;
    if (!in)
        return ba_fail(err, BA_ERR_NOMEM, "out of memory drawing the held-out set at T = %d", T);
    ba_rng rng;
    ba_rng_seed(&rng, d->data_seed);
    int have = 0;
    while (have < d->n_held) {
        uint8_t *s = d->held + (size_t)have * (size_t)T;
        sample_prefix(d, &rng, in, link);
        for (int t = 0; t < T; t++)
            s[t] = (uint8_t)in[t];
        size_t slot = ba_held_probe(d, s);
        if (d->slots[slot] == 0) {
            d->slots[slot] = (uint32_t)have + 1;
            have++;
        }
    }
    free(in);
    long closes = 0, depth_sum = 0;
    d->depth_max = 0;
    for (int n = 0; n < d->n_held; n++) {
        const uint8_t *s = d->held + (size_t)n * (size_t)T;
        int depth = 0, deepest = 0;
        for (int t = 0; t < T; t++) {
            closes += s[t] % 2;
            depth += s[t] % 2 ? -1 : 1;
            deepest = depth > deepest ? depth : deepest;
        }
        depth_sum += deepest;
        d->depth_max = deepest > d->depth_max ? deepest : d->depth_max;
    }
    d->depth_mean = (double)depth_sum / d->n_held;
    /* A tiny space can leave only sequences of opens (T = 2 draws "(("
     * or "()"): no close, no target, an accuracy of 0 of 0. */
    if (closes == 0)
        return ba_fail(err, BA_ERR_ARG,
                       "the held-out set (%d sequence%s of T = %d, data seed %llu) holds no "
                       "closing bracket: there is nothing to score; use a larger T or another "
                       "data seed",
                       d->n_held, d->n_held == 1 ? "" : "s", T,
                       (unsigned long long)d->data_seed);
    return position_baseline(d, err);
}

/* The arguments' checks, before anything is allocated. */
static int check_args(int T, int kinds, int max_depth, int n_heldout, char *err)
{
    if (kinds < 1 || kinds > BR_MAX_KINDS)
        return ba_fail(err, BA_ERR_ARG, "kinds = %d is out of range [1, %d]", kinds,
                       BR_MAX_KINDS);
    if (T < 1 || T > BR_MAX_T)
        return ba_fail(err, BA_ERR_ARG,
                       "brackets T = %d is out of range [1, %d] (any number of bracket kinds)",
                       T, BR_MAX_T);
    if (max_depth < 0)
        return ba_fail(err, BA_ERR_ARG,
                       "max_depth = %d must be at least 1 (or 0 for no depth cap)", max_depth);
    /* Without a held-out set an evaluation would score nothing and report
     * "0 of 0" as if it were a result. */
    return ba_held_check_count(n_heldout, err);
}

int ba_brackets_build(ba_dataset **out, int T, int kinds, int max_depth, int n_heldout,
                      uint64_t data_seed, int force_double, char *err)
{
    if (!out)
        return ba_fail(err, BA_ERR_ARG, "out is NULL");
    *out = NULL;
    int rc = check_args(T, kinds, max_depth, n_heldout, err);
    if (rc)
        return rc;
    int cap = eff_cap(T, max_depth);
    uint64_t total = count_capped(T, kinds, cap);
    if (total < 2) {
        char depth[48] = "";
        if (max_depth > 0)
            snprintf(depth, sizeof depth, " and max_depth %d", max_depth);
        return ba_fail(err, BA_ERR_ARG,
                       "T = %d with %d kind%s%s has only %llu valid prefix: no room for a "
                       "disjoint held-out set",
                       T, kinds, kinds == 1 ? "" : "s", depth, (unsigned long long)total);
    }
    ba_dataset *d = calloc(1, sizeof *d);
    if (!d)
        return ba_fail(err, BA_ERR_NOMEM, "out of memory allocating the dataset");
    d->task = BA_TASK_BRACKETS;
    d->T = T;
    d->kinds = kinds;
    d->vocab_size = 2 * kinds;
    d->max_depth = max_depth;
    d->cap = cap;
    d->n_heldout_req = n_heldout;
    d->data_seed = data_seed;
    d->total = total; /* UINT64_MAX: 2^64 or more */
    rc = total != UINT64_MAX && !force_double ? build_exact(d, err) : build_double(d, err);

    /* Held-out size: min(n_heldout, floor(total / 5)), raised to 1 when
     * the 20 % cap floors to 0 (total in [2, 4]). */
    uint64_t room = total / 5 > 0 ? total / 5 : 1;
    int n_held = (uint64_t)n_heldout < room ? n_heldout : (int)room;
    if (!rc)
        rc = ba_held_alloc(d, n_held, err);
    if (!rc)
        rc = draw_heldout(d, err);
    if (rc) {
        /* by hand: ba_dataset_free is tasks.c's, which calls this file,
         * and files must not call each other in a circle (layout.py) */
        free(d->f);
        free(d->p_open);
        free(d->p_row);
        free(d->held);
        free(d->slots);
        free(d);
        return rc;
    }
    *out = d;
    return BA_OK;
}

int ba_dataset_brackets_capped(ba_dataset **out, int T, int kinds, int max_depth,
                               int n_heldout, uint64_t data_seed, char *err)
{
    return ba_brackets_build(out, T, kinds, max_depth, n_heldout, data_seed, 0, err);
}

int ba_dataset_brackets(ba_dataset **out, int T, int kinds, int n_heldout,
                        uint64_t data_seed, char *err)
{
    return ba_brackets_build(out, T, kinds, 0, n_heldout, data_seed, 0, err);
}

int ba_brackets_exact(const ba_dataset *d) { return d && d->f != NULL; }

void ba_dataset_depth_stats(const ba_dataset *d, double *mean_max, int *max)
{
    int ok = d && d->task == BA_TASK_BRACKETS;
    if (mean_max)
        *mean_max = ok ? d->depth_mean : -1.0;
    if (max)
        *max = ok ? d->depth_max : -1;
}
