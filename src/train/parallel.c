/* Data-parallel training: the parts of a replica's step and evaluations
 * that meet the other ranks through the caller's ba_reducer
 * (boltzattn_train.h). The library knows nothing of how the ranks talk
 * (MPI in the command-line tool, threads in the tests): it hands the
 * reducer one buffer of doubles a time, laid out below, and reads the sums
 * back identically on every rank, so every rank takes the same decisions.
 *
 * Per-rank values travel in "slots": rank r writes its value at slot r and
 * zero elsewhere, so the sum is every rank's value in place (x + 0 + 0 is
 * x exactly). That carries statuses, stop requests, the engines' counts
 * (whose maximum is not a sum) and the evaluation's per-batch sums, which
 * are then added in a fixed order here rather than in the reducer. */
#include "train/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { STAT_SLOTS = 5 }; /* queries, sweeps, max_sweeps, retried, unconverged */

/* The gradient step's buffer: P weighted gradients, the weighted loss,
 * the targets, then a status slot and STAT_SLOTS count slots per rank. The
 * evaluation's rounds (5 slots a rank) and the agreements fit in it. */
size_t ba_par_buf_len(size_t nparams, int size)
{
    return nparams + 2 + (size_t)(1 + STAT_SLOTS) * (size_t)size;
}

/* The replicas' check value: a hash of the parameters' bytes. */
static uint64_t params_hash(const ba_model *m)
{
    return ba_fnv1a64(BA_FNV_INIT, ba_model_params((ba_model *)m),
                      sizeof(ba_real) * ba_model_num_params(m));
}

static void stats_to_slots(const ba_approx_stats *st, double *slot)
{
    slot[0] = (double)st->queries;
    slot[1] = (double)st->sweeps;
    slot[2] = (double)st->max_sweeps;
    slot[3] = (double)st->retried;
    slot[4] = (double)st->unconverged;
}

/* Every rank's counts from their slots, folded in rank order. */
static ba_approx_stats stats_from_slots(const double *slots, int size)
{
    ba_approx_stats all;
    memset(&all, 0, sizeof all);
    for (int k = 0; k < size; k++) {
        const double *s = slots + (size_t)STAT_SLOTS * k;
        ba_approx_stats one = {(long)s[0], (long)s[1], (int)s[2], (long)s[3], (long)s[4]};
        ba_engine_stats_add(&all, &one);
    }
    return all;
}

static int call_sum(const ba_reducer *r, double *buf, size_t n, uint64_t check, char *err)
{
    char why[BA_ERR_LEN] = "";
    int rc = r->sum(r->user, buf, n, check, why);
    return rc ? ba_fail(err, rc, "rank %d: reduction: %s", r->rank, why[0] ? why : "failed")
              : BA_OK;
}

/* The lowest rank whose status slot is non-zero: its status (with its
 * message on itself), else BA_OK. Rank k's slot is slots[k * stride]. */
static int first_failure(const ba_reducer *r, const double *slots, size_t stride,
                         const char *why, char *err)
{
    for (int k = 0; k < r->size; k++) {
        int rc = (int)slots[(size_t)k * stride];
        if (rc == BA_OK)
            continue;
        if (k == r->rank)
            return ba_fail(err, rc, "%s", why);
        return ba_fail(err, rc, "rank %d failed (its message is on its standard error)", k);
    }
    return BA_OK;
}

int ba_par_grads(const ba_reducer *r, ba_model *m, double *buf, int rc, const char *why,
                 double *loss, ba_approx_stats *st, char *err)
{
    size_t P = ba_model_num_params(m), len = ba_par_buf_len(P, r->size);
    ba_real *g = ba_model_grads(m); // (P)
    memset(buf, 0, sizeof(double) * len);
    double *status = buf + P + 2, *stats = status + r->size;
    if (rc == BA_OK) {
        /* weighted by the share's targets: the sum over ranks divided by
         * all the targets is the mean over the whole batch's, whatever the
         * shares hold (brackets masks some positions). The products are
         * exact in double (a float times an integer below 2^29). */
        double nt = (double)ba_model_num_targets(m);
        for (size_t i = 0; i < P; i++)
            buf[i] = (double)g[i] * nt;
        buf[P] = *loss * nt;
        buf[P + 1] = nt;
    }
    status[r->rank] = rc;
    stats_to_slots(st, stats + (size_t)STAT_SLOTS * r->rank);
    int crc = call_sum(r, buf, len, params_hash(m), err);
    if (crc)
        return crc;
    *st = stats_from_slots(stats, r->size);
    if ((crc = first_failure(r, status, 1, why, err)))
        return crc;
    double all = buf[P + 1];
    /* no targets anywhere: no gradient, as one process would find */
    for (size_t i = 0; i < P; i++)
        g[i] = all > 0 ? (ba_real)(buf[i] / all) : 0;
    *loss = all > 0 ? buf[P] / all : NAN;
    return BA_OK;
}

int ba_par_any(const ba_reducer *r, double *buf, int flag, int *any, char *err)
{
    buf[0] = flag != 0;
    int rc = call_sum(r, buf, 1, 0, err);
    *any = rc == BA_OK && buf[0] > 0;
    return rc;
}

int ba_par_stats(const ba_reducer *r, double *buf, ba_approx_stats *st, char *err)
{
    size_t len = (size_t)STAT_SLOTS * r->size;
    memset(buf, 0, sizeof(double) * len);
    stats_to_slots(st, buf + (size_t)STAT_SLOTS * r->rank);
    int rc = call_sum(r, buf, len, 0, err);
    if (rc == BA_OK)
        *st = stats_from_slots(buf, r->size);
    return rc;
}

/* One round's slots a rank: loss sum, targets, correct, status, stop. */
enum { EVAL_SLOTS = 5 };

int ba_par_evaluate(const ba_reducer *r, double *buf, ba_model *m, const ba_dataset *d,
                    int max_items, int B, int (*tick)(int done, int total, void *user),
                    void *user, ba_eval_result *res, int *stopped, char *err)
{
    *stopped = 0;
    int rc = ba_eval_check(m, d, B, err);
    if (rc)
        return rc;
    int T = ba_dataset_block_size(d), total = ba_dataset_num_eval(d);
    int n = (max_items <= 0 || max_items >= total) ? total : max_items;
    size_t len = (size_t)EVAL_SLOTS * r->size;
    int *in = malloc(sizeof(int) * (size_t)B * T), *tg = malloc(sizeof(int) * (size_t)B * T);
    /* a rank short of memory still takes part in the rounds, failing them */
    int local = in && tg ? BA_OK : BA_ERR_NOMEM;
    char why[BA_ERR_LEN] = "";
    if (local)
        ba_fail(why, local, "cannot allocate an evaluation batch");
    double *slots = buf; /* (size, EVAL_SLOTS) */
    double loss_sum = 0.0;
    long targets = 0, correct = 0;
    int done = 0, want_stop = 0;
    for (int round = 0; done < n; round++) {
        memset(slots, 0, sizeof(double) * len);
        double *mine = slots + (size_t)EVAL_SLOTS * r->rank;
        long start = ((long)round * r->size + r->rank) * B;
        if (local == BA_OK && start < n) {
            int bs = n - start < B ? (int)(n - start) : B;
            ba_eval_part p;
            if ((local = ba_eval_batch(m, d, (int)start, bs, n, in, tg, &p, why)) == BA_OK)
                mine[0] = p.loss_sum, mine[1] = (double)p.targets, mine[2] = (double)p.correct;
        }
        mine[3] = local, mine[4] = want_stop;
        if ((rc = call_sum(r, slots, len, 0, err)))
            break;
        rc = first_failure(r, slots + 3, EVAL_SLOTS, why, err);
        int any_stop = 0;
        for (int k = 0; k < r->size; k++)
            any_stop |= slots[(size_t)EVAL_SLOTS * k + 4] > 0;
        if (rc || any_stop) {
            *stopped = any_stop;
            break;
        }
        /* batch order: rank k's batch of this round is batch round*size+k */
        for (int k = 0; k < r->size; k++) {
            const double *s = slots + (size_t)EVAL_SLOTS * k;
            long kstart = ((long)round * r->size + k) * B;
            if (kstart >= n)
                break;
            loss_sum += s[0];
            targets += (long)s[1];
            correct += (long)s[2];
            done = kstart + B < n ? (int)(kstart + B) : n;
        }
        if (tick && tick(done, n, user))
            want_stop = 1;
    }
    /* a stop asked after the last round: agreed like the others */
    if (rc == BA_OK && !*stopped) {
        int any = 0;
        if ((rc = ba_par_any(r, slots, want_stop, &any, err)) == BA_OK)
            *stopped = any;
    }
    free(in), free(tg);
    if (rc == BA_OK)
        ba_eval_result_set(res, done, loss_sum, targets, correct);
    return rc;
}
