/* Evaluation of a model on a dataset's evaluation items, and the
 * measurement of a sampled model's sampler against the exact distribution
 * on the Ising systems it meets (the quality record the training loop
 * logs). */
#include "train/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- evaluation */

int ba_eval_batch(ba_model *m, const ba_dataset *d, int start, int bs, int n, int *in, int *tg,
                  ba_eval_part *p, char *err)
{
    // in, tg (bs,T) scratch
    const ba_config *c = ba_model_config(m);
    int T = ba_dataset_block_size(d), total = ba_dataset_num_eval(d);
    for (int k = 0; k < bs; k++) {
        /* an evenly spaced, deterministic subset when n < total */
        int idx = (int)((long long)(start + k) * total / n);
        ba_dataset_eval_item(d, idx, in + (size_t)k * T, tg + (size_t)k * T);
    }
    double loss;
    int rc = ba_model_forward(m, in, tg, bs, T, &loss, err);
    if (rc)
        return rc;
    p->loss_sum = loss * ba_model_num_targets(m);
    p->targets = ba_model_num_targets(m);
    p->correct = 0;
    const ba_real *lg = ba_model_logits(m);
    int O = c->out_size;
    for (size_t r = 0; r < (size_t)bs * T; r++) {
        if (tg[r] < 0)
            continue;
        const ba_real *x = lg + r * O;
        int best = 0;
        for (int o = 1; o < O; o++)
            if (x[o] > x[best])
                best = o;
        p->correct += best == tg[r];
    }
    return BA_OK;
}

int ba_eval_check(const ba_model *m, const ba_dataset *d, int B, char *err)
{
    if (!m || !d)
        return ba_fail(err, BA_ERR_ARG, "ba_evaluate: m and d must not be NULL");
    const ba_config *c = ba_model_config(m);
    int T = ba_dataset_block_size(d);
    ba_head want = ba_dataset_task(d) == BA_TASK_BRACKETS ? BA_HEAD_POINTER : BA_HEAD_TOKEN;
    if (want != c->head)
        return ba_fail(err, BA_ERR_ARG, "%s data needs a %s head, the model has a %s head",
                       ba_task_name(ba_dataset_task(d)), ba_head_name(want),
                       ba_head_name(c->head));
    if (T != c->block_size)
        return ba_fail(err, BA_ERR_ARG, "dataset block size %d does not match the model's %d", T,
                       c->block_size);
    if (ba_dataset_vocab_size(d) != c->vocab_size)
        return ba_fail(err, BA_ERR_ARG, "dataset vocabulary size %d does not match the model's %d",
                       ba_dataset_vocab_size(d), c->vocab_size);
    if (B < 1)
        return ba_fail(err, BA_ERR_ARG, "evaluation batch size %d must be at least 1", B);
    return BA_OK;
}

int ba_evaluate_ex(ba_model *m, const ba_dataset *d, int max_items, int B,
                   int (*tick)(int done, int total, void *user), void *user, ba_eval_result *res,
                   char *err)
{
    int rc = ba_eval_check(m, d, B, err);
    if (rc)
        return rc;
    if (!res)
        return ba_fail(err, BA_ERR_ARG, "ba_evaluate: res must not be NULL");
    int T = ba_dataset_block_size(d);
    int total = ba_dataset_num_eval(d);
    int n = (max_items <= 0 || max_items >= total) ? total : max_items;
    int *in = malloc(sizeof(int) * (size_t)B * T), *tg = malloc(sizeof(int) * (size_t)B * T);
    if (!in || !tg) {
        free(in), free(tg);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate an evaluation batch");
    }
    double loss_sum = 0.0;
    long targets = 0, correct = 0;
    /* A fixed stream for the shots of a sampled model, restored after. */
    ba_rng saved = *ba_model_sampler_rng(m);
    ba_rng_seed(ba_model_sampler_rng(m), BA_EVAL_SAMPLER_SEED);
    int done = 0;
    for (int start = 0; start < n && rc == BA_OK; start += B) {
        int bs = n - start < B ? n - start : B;
        ba_eval_part p;
        rc = ba_eval_batch(m, d, start, bs, n, in, tg, &p, err);
        if (rc)
            break;
        loss_sum += p.loss_sum;
        targets += p.targets;
        correct += p.correct;
        done = start + bs;
        if (tick && tick(done, n, user))
            break;
    }
    free(in), free(tg);
    *ba_model_sampler_rng(m) = saved;
    if (rc)
        return rc;
    ba_eval_result_set(res, done, loss_sum, targets, correct);
    return BA_OK;
}

void ba_eval_result_set(ba_eval_result *res, int items, double loss_sum, long targets,
                        long correct)
{
    res->n_items = items;
    res->n_targets = targets;
    /* No targets (no items, or none marked): no loss and no accuracy, not
     * a perfect or a failed score. */
    res->loss = targets ? loss_sum / targets : NAN;
    res->ppl = exp(res->loss);
    res->accuracy = targets ? (double)correct / targets : NAN;
}

int ba_evaluate(ba_model *m, const ba_dataset *d, int max_items, int B, ba_eval_result *res,
                char *err)
{
    return ba_evaluate_ex(m, d, max_items, B, NULL, NULL, res, err);
}

/* ------------------------------------------------------ sampler quality
 * The sampler measured against the exact distribution on the Ising systems
 * the model meets: the last query of n = min(T, 8) keys of the first 4
 * evaluation items, layer 0, head 0. n stays at 8 so the histogram of the
 * shot samplers resolves 2^n states (shot noise of the total variation at
 * most about 0.5 sqrt(2^n 2 / (pi S)), 0.035 here); the direct sampler's
 * figure on the same systems is the floor. The model's sampler is set to
 * exact for the forward that yields the fields, then restored, and the
 * measurement draws from its own fixed stream: the training streams are
 * untouched. */
enum { QUALITY_SHOTS = 16384, QUALITY_ITEMS = 4, QUALITY_MAX_N = 8 };

/* The fields and couplings of the measured systems: h (K,n), J (n,n). */
static int quality_systems(ba_model *m, const ba_dataset *d, int K, int n, double *h, double *J,
                           char *err)
{
    const ba_config *cfg = ba_model_config(m);
    int T = cfg->block_size;
    int *in = malloc(sizeof(int) * (size_t)K * T), *tg = malloc(sizeof(int) * (size_t)K * T);
    int rc = BA_OK;
    if (!in || !tg)
        rc = ba_fail(err, BA_ERR_NOMEM, "out of memory for the sampler quality check");
    for (int k = 0; rc == BA_OK && k < K; k++)
        ba_dataset_eval_item(d, k, in + (size_t)k * T, tg + (size_t)k * T);
    ba_sampler own = cfg->sampler, exact = ba_sampler_default(BA_SAMPLER_EXACT);
    double loss;
    if (rc == BA_OK && (rc = ba_model_set_sampler(m, &exact, err)) == BA_OK) {
        rc = ba_model_forward(m, in, tg, K, T, &loss, err);
        char why[BA_ERR_LEN];
        int rc2 = ba_model_set_sampler(m, &own, why);
        if (rc == BA_OK && rc2)
            rc = ba_fail(err, rc2, "%s", why);
    }
    /* head 0's couplings of layer 0, (Tmax,Tmax) rows */
    int jt = ba_model_find_tensor(m, "blocks.0.attn.J");
    ba_tensor_info ti;
    if (rc == BA_OK && jt >= 0 && ba_model_tensor(m, jt, &ti) == BA_OK)
        for (int j = 0; j < n; j++)
            for (int k = j + 1; k < n; k++)
                J[j * n + k] = ba_model_params(m)[ti.offset + (size_t)j * T + k];
    for (int k = 0; rc == BA_OK && k < K; k++) {
        if (cfg->attn == BA_ATTN_BOLTZMANN)
            rc = ba_model_fields(m, 0, 0, k, n - 1, h + (size_t)k * n, err);
        else /* coupling attention: h = 0 */
            memset(h + (size_t)k * n, 0, sizeof(double) * n);
    }
    free(in), free(tg);
    return rc;
}

int ba_quality_record(ba_model *m, const ba_dataset *d, long step, ba_record *r, char *err)
{
    const ba_config *cfg = ba_model_config(m);
    ba_sampler own = cfg->sampler;
    if (own.kind == BA_SAMPLER_EXACT)
        return ba_fail(err, BA_ERR_ARG, "an exact model has no sampler to measure");
    int T = cfg->block_size, n = T < QUALITY_MAX_N ? T : QUALITY_MAX_N;
    int K = ba_dataset_num_eval(d);
    K = K < QUALITY_ITEMS ? K : QUALITY_ITEMS;
    memset(r, 0, sizeof *r);
    r->kind = BA_REC_QUALITY;
    r->step = step;
    r->n = n, r->instances = K;
    r->beta_eff = r->r2 = r->tv_eff = r->tv_shot_floor = NAN;
    if (K < 1 || T > ba_engine_max_spins(cfg->engine))
        return BA_OK; /* nothing to measure against */
    double h[QUALITY_ITEMS * QUALITY_MAX_N], J[QUALITY_MAX_N * QUALITY_MAX_N] = {0};
    int rc = quality_systems(m, d, K, n, h, J, err);
    ba_rng rng;
    ba_rng_seed(&rng, 0x9a1171e5ULL ^ (uint64_t)r->step);
    ba_sampler direct = ba_sampler_default(BA_SAMPLER_DIRECT);
    double tv = 0, kl = 0, beta = 0, r2 = 0, tve = 0, floor_tv = 0;
    for (int k = 0; rc == BA_OK && k < K; k++) {
        const double *hk = cfg->attn == BA_ATTN_BOLTZMANN ? h + (size_t)k * n : NULL;
        ba_sampler_quality q;
        if ((rc = ba_sampler_measure(&own, n, hk, J, n, QUALITY_SHOTS, &rng, &q, err)))
            break;
        tv += q.tv / K, kl += q.kl / K;
        if (isfinite(q.beta_eff)) { /* NAN: frozen on one energy, no fit */
            beta += q.beta_eff, r2 += q.r2, tve += q.tv_eff;
            r->fitted++;
        }
        if (own.kind != BA_SAMPLER_DQA) {
            if ((rc = ba_sampler_measure(&direct, n, hk, J, n, QUALITY_SHOTS, &rng, &q, err)))
                break;
            floor_tv += q.tv / K;
        }
    }
    if (rc)
        return rc;
    r->tv = tv, r->kl = kl;
    if (r->fitted)
        r->beta_eff = beta / r->fitted, r->r2 = r2 / r->fitted, r->tv_eff = tve / r->fitted;
    if (own.kind != BA_SAMPLER_DQA)
        r->tv_shot_floor = floor_tv, r->shots = QUALITY_SHOTS;
    return BA_OK;
}

