/* Everything about the model config and the data description in one
 * place: defaults, validation, size, how a dataset fills them, and their
 * JSON form (one object, as stored in checkpoints, resumable states and
 * run records).
 *
 * The model config (ba_config) says what the network is: shapes, attention
 * variant and engine, couplings' sampler, output head. The data
 * description (ba_data_spec) says what it was trained on: the task and its
 * parameters, enough to rebuild the data for evaluation. The model never
 * looks at the task. */
#include "model/model.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------- defaults, checks */

ba_config ba_config_default(ba_attn attn, int block_size)
{
    ba_config c;
    memset(&c, 0, sizeof c);
    c.attn = attn;
    c.engine = BA_ENGINE_AUTO;
    c.n_layer = 1;
    c.n_head = 1;
    c.n_embd = 64;
    c.block_size = block_size;
    c.head = BA_HEAD_TOKEN;
    c.ffn = 1;
    c.pos_emb = 1;
    c.couplings = BA_COUPLINGS_ABSOLUTE;
    c.band = 0;
    c.field_bias = BA_FIELD_BIAS_NONE;
    c.approx = ba_approx_default();
    c.window = 0;
    c.sampler = ba_sampler_default(BA_SAMPLER_EXACT);
    return c;
}

ba_engine ba_config_engine(const ba_config *c)
{
    if (c->engine != BA_ENGINE_AUTO)
        return c->engine;
    return c->band > 0 ? BA_ENGINE_BAND : BA_ENGINE_FAST;
}

int ba_config_distances(const ba_config *c)
{
    if (c->couplings != BA_COUPLINGS_RELATIVE)
        return 0;
    return c->band > 0 ? c->band : c->block_size - 1;
}

/* The engine's or the sampler's limit on T for Ising attention. */
static int check_ising_limit(const ba_config *c, char *err)
{
    if (c->sampler.kind != BA_SAMPLER_EXACT) {
        /* Sampled attention never enumerates in the engine: the sampler's
         * own limit (a state is one 64-bit word; direct and dqa enumerate
         * 2^T amplitudes) is the only one. */
        int lim = ba_sampler_max_spins(c->sampler.kind);
        if (c->block_size > lim)
            return ba_fail(err, BA_ERR_LIMIT,
                           "T = %d is too large for %s attention with the %s sampler, which "
                           "accepts T <= %d",
                           c->block_size, ba_attn_name(c->attn),
                           ba_sampler_name(c->sampler.kind), lim);
        return BA_OK;
    }
    /* every other limit is the engine's own (src/ising/engine.h) */
    ba_engine e = ba_config_engine(c);
    const ba_engine_ops *o = ba_engine_ops_of(e);
    if (!o)
        return ba_fail(err, BA_ERR_ARG, "engine %d is not a known engine", (int)e);
    ba_engine_limits q = {c->block_size, c->band, c->window, c->engine == BA_ENGINE_AUTO,
                          &c->approx, ba_attn_name(c->attn)};
    return o->check(&q, err);
}

/* The couplings' form, the band and the field bias. */
static int check_couplings(const ba_config *c, int ising, char *err)
{
    if ((unsigned)c->couplings > BA_COUPLINGS_RELATIVE)
        return ba_fail(err, BA_ERR_ARG, "couplings %d is not a known form", (int)c->couplings);
    if ((unsigned)c->field_bias > BA_FIELD_BIAS_LOG_N)
        return ba_fail(err, BA_ERR_ARG, "field_bias %d is not a known bias", (int)c->field_bias);
    if (c->pos_emb < BA_POS_NONE || c->pos_emb > BA_POS_ALIBI)
        return ba_fail(err, BA_ERR_ARG,
                       "pos_emb = %d must be 0 (none), 1 (learned), 2 (rope) or 3 (alibi)",
                       c->pos_emb);
    if (c->band < 0)
        return ba_fail(err, BA_ERR_ARG, "band W = %d must not be negative (0: no band)", c->band);
    if (!ising && c->band > 0)
        return ba_fail(err, BA_ERR_ARG,
                       "a band (W = %d) limits the couplings of boltzmann and coupling "
                       "attention; %s attention has none",
                       c->band, ba_attn_name(c->attn));
    if (!ising && c->couplings == BA_COUPLINGS_RELATIVE)
        return ba_fail(err, BA_ERR_ARG,
                       "relative couplings belong to boltzmann and coupling attention; %s "
                       "attention has none",
                       ba_attn_name(c->attn));
    if (c->attn == BA_ATTN_SOFTMAX && c->field_bias != BA_FIELD_BIAS_NONE)
        return ba_fail(err, BA_ERR_ARG,
                       "the %s field bias does nothing to softmax attention (a constant per "
                       "query cancels in the softmax)",
                       ba_field_bias_name(c->field_bias));
    if (c->band > BA_MAX_BAND)
        return ba_fail(err, BA_ERR_LIMIT, "band W = %d is above the band engine's limit of %d",
                       c->band, BA_MAX_BAND);
    if (c->band > 0 && c->band > c->block_size - 1)
        return ba_fail(err, BA_ERR_ARG,
                       "band W = %d exceeds T - 1 = %d, the longest distance between two of "
                       "the T = %d keys",
                       c->band, c->block_size - 1, c->block_size);
    return BA_OK;
}

/* band_f32 is 0 or 1, and 1 only where the band engine computes the
 * attention: a user who asks for float elsewhere would get double
 * silently, so it is refused, naming what does run. */
static int check_band_f32(const ba_config *c, int ising, char *err)
{
    if (c->band_f32 != 0 && c->band_f32 != 1)
        return ba_fail(err, BA_ERR_ARG, "band_f32 = %d must be 0 (double) or 1 (float)",
                       c->band_f32);
    if (!c->band_f32)
        return BA_OK;
    if (!ising)
        return ba_fail(err, BA_ERR_ARG,
                       "band_precision float applies to the band engine of boltzmann and "
                       "coupling attention, not to %s attention",
                       ba_attn_name(c->attn));
    if (ba_config_engine(c) != BA_ENGINE_BAND)
        return ba_fail(err, BA_ERR_ARG,
                       "band_precision float applies to the band engine; this model runs the "
                       "%s engine (set --engine band or a band with --band W)",
                       ba_engine_name(ba_config_engine(c)));
    if (c->sampler.kind != BA_SAMPLER_EXACT)
        return ba_fail(err, BA_ERR_ARG,
                       "band_precision float applies to the exact band engine, not to the %s "
                       "sampler",
                       ba_sampler_name(c->sampler.kind));
    return BA_OK;
}

int ba_config_validate(const ba_config *c, char *err)
{
    if (!c)
        return ba_fail(err, BA_ERR_ARG, "config is NULL");
    if ((unsigned)c->attn > BA_ATTN_COUPLING)
        return ba_fail(err, BA_ERR_ARG, "attn %d is not a known attention variant", (int)c->attn);
    if (c->engine != BA_ENGINE_AUTO && !ba_engine_ops_of(c->engine))
        return ba_fail(err, BA_ERR_ARG, "engine %d is not a known engine", (int)c->engine);
    if (c->window != 0 && !(ba_engine_caps(ba_config_engine(c)) & BA_ENGINE_CAP_WINDOW))
        return ba_fail(err, BA_ERR_ARG,
                       "window W = %d belongs to the hybrid engine; the %s engine has none "
                       "(0)",
                       c->window, ba_engine_name(ba_config_engine(c)));
    if ((unsigned)c->head > BA_HEAD_POINTER)
        return ba_fail(err, BA_ERR_ARG, "head %d is not a known output head", (int)c->head);
    if (c->n_layer < 1 || c->n_layer > 64)
        return ba_fail(err, BA_ERR_ARG, "n_layer = %d is out of range [1, 64]", c->n_layer);
    if (c->n_head < 1 || c->n_head > 64)
        return ba_fail(err, BA_ERR_ARG, "n_head = %d is out of range [1, 64]", c->n_head);
    if (c->n_embd < 1 || c->n_embd > 8192)
        return ba_fail(err, BA_ERR_ARG, "n_embd = %d is out of range [1, 8192]", c->n_embd);
    if (c->n_embd % c->n_head != 0)
        return ba_fail(err, BA_ERR_ARG, "n_embd = %d is not divisible by n_head = %d", c->n_embd,
                       c->n_head);
    if (c->pos_emb == BA_POS_ROPE && (c->n_embd / c->n_head) % 2 != 0)
        return ba_fail(err, BA_ERR_ARG,
                       "rope turns pairs of channels: the head size n_embd / n_head = %d / %d = "
                       "%d must be even",
                       c->n_embd, c->n_head, c->n_embd / c->n_head);
    if (c->block_size < 1 || c->block_size > BA_MAX_BLOCK)
        return ba_fail(err, BA_ERR_ARG, "block_size (T) = %d is out of range [1, %d]",
                       c->block_size, BA_MAX_BLOCK);
    if (c->vocab_size < 1 || c->vocab_size > BA_MAX_VOCAB)
        return ba_fail(err, BA_ERR_ARG, "vocab_size = %d is out of range [1, %d]", c->vocab_size,
                       BA_MAX_VOCAB);
    if (c->ffn != 0 && c->ffn != 1)
        return ba_fail(err, BA_ERR_ARG, "ffn = %d must be 0 or 1", c->ffn);
    if (c->head == BA_HEAD_POINTER && c->out_size != c->block_size)
        return ba_fail(err, BA_ERR_ARG,
                       "out_size = %d must equal block_size = %d for a pointer head", c->out_size,
                       c->block_size);
    if (c->out_size < 1 || c->out_size > BA_MAX_VOCAB)
        return ba_fail(err, BA_ERR_ARG, "out_size = %d is out of range [1, %d]", c->out_size,
                       BA_MAX_VOCAB);
    int ising = c->attn == BA_ATTN_BOLTZMANN || c->attn == BA_ATTN_COUPLING;
    int rc = check_couplings(c, ising, err);
    if (rc)
        return rc;
    char why[BA_ERR_LEN];
    if (ba_sampler_validate(&c->sampler, why))
        return ba_fail(err, BA_ERR_ARG, "sampler: %s", why);
    if (c->sampler.kind != BA_SAMPLER_EXACT && !ising)
        return ba_fail(err, BA_ERR_ARG,
                       "the %s sampler applies to boltzmann and coupling attention only, not %s",
                       ba_sampler_name(c->sampler.kind), ba_attn_name(c->attn));
    if ((rc = check_band_f32(c, ising, err)))
        return rc;
    return ising ? check_ising_limit(c, err) : BA_OK;
}

ba_data_spec ba_data_spec_default(ba_task task)
{
    ba_data_spec d;
    memset(&d, 0, sizeof d);
    d.task = task;
    d.kinds = 1;
    d.n_heldout = 2000;
    d.data_seed = 1234;
    d.recall_vocab = 64;
    d.pairs = 8;
    return d;
}

/* recall: a token head over the whole vocabulary, keys and values. The
 * block size is checked against the pairs too: a model with fewer than
 * 4*pairs positions could not hold a recall sequence. */
static int recall_spec_check(const ba_data_spec *d, const ba_config *c, char *err)
{
    if (c->head != BA_HEAD_TOKEN)
        return ba_fail(err, BA_ERR_ARG, "recall needs a token head, the config has a %s head",
                       ba_head_name(c->head));
    if (d->recall_vocab < 4 || d->recall_vocab > 256 || d->recall_vocab % 2)
        return ba_fail(err, BA_ERR_ARG, "recall_vocab = %d must be even and in [4, 256]",
                       d->recall_vocab);
    if (d->pairs < 1 || d->pairs > d->recall_vocab / 2)
        return ba_fail(err, BA_ERR_ARG, "pairs = %d is out of range [1, recall_vocab/2 = %d]",
                       d->pairs, d->recall_vocab / 2);
    if (c->block_size < 4 * d->pairs)
        return ba_fail(err, BA_ERR_ARG,
                       "block_size = %d is below 4*pairs = %d: the queries would not fit",
                       c->block_size, 4 * d->pairs);
    if (c->vocab_size != d->recall_vocab || c->out_size != d->recall_vocab)
        return ba_fail(err, BA_ERR_ARG,
                       "vocab_size = %d and out_size = %d must both equal recall_vocab = %d for "
                       "recall",
                       c->vocab_size, c->out_size, d->recall_vocab);
    if (d->n_heldout < 0)
        return ba_fail(err, BA_ERR_ARG, "n_heldout = %d must not be negative", d->n_heldout);
    return BA_OK;
}

int ba_data_spec_check(const ba_data_spec *d, const ba_config *c, char *err)
{
    if (!d || !c)
        return ba_fail(err, BA_ERR_ARG, "data description or config is NULL");
    switch (d->task) {
    case BA_TASK_CHARLM:
        if (c->head != BA_HEAD_TOKEN)
            return ba_fail(err, BA_ERR_ARG, "charlm needs a token head, the config has a %s head",
                           ba_head_name(c->head));
        if (c->out_size != c->vocab_size)
            return ba_fail(err, BA_ERR_ARG, "out_size = %d must equal vocab_size = %d for charlm",
                           c->out_size, c->vocab_size);
        if (d->vocab_size != c->vocab_size)
            return ba_fail(err, BA_ERR_ARG,
                           "the charlm vocabulary has %d bytes but vocab_size is %d",
                           d->vocab_size, c->vocab_size);
        return BA_OK;
    case BA_TASK_BRACKETS:
        if (c->head != BA_HEAD_POINTER)
            return ba_fail(err, BA_ERR_ARG,
                           "brackets needs a pointer head, the config has a %s head",
                           ba_head_name(c->head));
        if (d->kinds < 1 || d->kinds > 4)
            return ba_fail(err, BA_ERR_ARG, "kinds = %d is out of range [1, 4]", d->kinds);
        if (c->vocab_size != 2 * d->kinds)
            return ba_fail(err, BA_ERR_ARG, "vocab_size = %d must be 2*kinds = %d for brackets",
                           c->vocab_size, 2 * d->kinds);
        if (d->n_heldout < 0)
            return ba_fail(err, BA_ERR_ARG, "n_heldout = %d must not be negative", d->n_heldout);
        if (d->max_depth < 0)
            return ba_fail(err, BA_ERR_ARG, "max_depth = %d must be at least 1 (0: no cap)",
                           d->max_depth);
        return BA_OK;
    case BA_TASK_RECALL:
        return recall_spec_check(d, c, err);
    }
    return ba_fail(err, BA_ERR_ARG, "task %d is not a known task", (int)d->task);
}

/* The parameter layout: the one definition of how many values each kind
 * of tensor has for a config (stacked over layers; a kind the config does
 * not use has size 0). The model lays its block out by it. */
void ba_param_sizes(const ba_config *c, size_t *sz)
{
    size_t L = c->n_layer, C = c->n_embd, T = c->block_size, H = c->n_head;
    size_t F = c->ffn ? 4 * C : 0; /* FFN tensors vanish without the FFN */
    size_t ln2 = c->ffn ? C : 0;
    sz[BA_P_TOK] = (size_t)c->vocab_size * C;
    sz[BA_P_POS] = c->pos_emb == BA_POS_LEARNED ? T * C : 0;
    sz[BA_P_LN1W] = L * C;
    sz[BA_P_LN1B] = L * C;
    sz[BA_P_QKVW] = L * 3 * C * C;
    sz[BA_P_QKVB] = L * 3 * C;
    sz[BA_P_PROJW] = L * C * C;
    sz[BA_P_PROJB] = L * C;
    int ising = c->attn == BA_ATTN_BOLTZMANN || c->attn == BA_ATTN_COUPLING;
    size_t per_head = c->couplings == BA_COUPLINGS_RELATIVE ? (size_t)ba_config_distances(c) : T * T;
    sz[BA_P_J] = ising ? L * H * per_head : 0;
    sz[BA_P_LN2W] = L * ln2;
    sz[BA_P_LN2B] = L * ln2;
    sz[BA_P_FCW] = L * F * C;
    sz[BA_P_FCB] = L * F;
    sz[BA_P_FCPW] = L * C * F;
    sz[BA_P_FCPB] = L * (c->ffn ? C : 0);
    sz[BA_P_LNFW] = C;
    sz[BA_P_LNFB] = C;
    sz[BA_P_HEADW] = (size_t)c->out_size * C;
    sz[BA_P_HEADB] = c->out_size;
}

int ba_config_check_exact(const ba_config *cfg, char *err)
{
    if (!cfg)
        return ba_fail(err, BA_ERR_ARG, "config is NULL");
    ba_config exact = *cfg;
    exact.sampler = ba_sampler_default(BA_SAMPLER_EXACT);
    return ba_config_validate(&exact, err);
}

size_t ba_config_num_params(const ba_config *cfg)
{
    if (ba_config_validate(cfg, NULL) != BA_OK)
        return 0;
    size_t sz[BA_NUM_P], n = 0;
    ba_param_sizes(cfg, sz);
    for (int i = 0; i < BA_NUM_P; i++)
        n += sz[i];
    return n;
}

/* ------------------------------------------------------ config JSON */

/* "sampler": {"kind": ...} for exact, with every parameter otherwise
 * (ba_sampler_params). cJSON prints doubles with enough digits to read them
 * back exactly. */
static int add_sampler(cJSON *o, const ba_sampler *sp)
{
    cJSON *so = cJSON_AddObjectToObject(o, "sampler");
    int ok = so && cJSON_AddStringToObject(so, "kind", ba_sampler_name(sp->kind));
    int np;
    const ba_sampler_param *p = ba_sampler_params(&np);
    for (int i = 0; ok && sp->kind != BA_SAMPLER_EXACT && i < np; i++)
        ok = cJSON_AddNumberToObject(so, p[i].name, ba_sampler_param_get(sp, &p[i])) != NULL;
    return ok;
}

/* A sampler object: "kind" required, a missing parameter the kind's
 * default, every value checked before it is stored. */
static int sampler_from_object(const cJSON *so, ba_sampler *out, char *err)
{
    if (!cJSON_IsObject(so))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler' is %s, expected an object",
                       ba_json_type(so));
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(so, "kind");
    if (!k)
        return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler.kind' is missing");
    if (!cJSON_IsString(k))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler.kind' is %s, expected a string",
                       ba_json_type(k));
    char why[BA_ERR_LEN];
    ba_sampler_kind kind;
    if (ba_sampler_parse(k->valuestring, &kind, why))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler.kind': %s", why);
    ba_sampler sp = ba_sampler_default(kind);
    int np;
    const ba_sampler_param *p = ba_sampler_params(&np);
    for (int i = 0; i < np; i++) {
        const char *name = p[i].name;
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(so, name);
        if (!it)
            continue;
        if (!cJSON_IsNumber(it))
            return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler.%s' is %s, expected a number",
                           name, ba_json_type(it));
        double d = it->valuedouble;
        if (p[i].is_int && (!(d >= INT_MIN && d <= INT_MAX) || d != floor(d)))
            return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler.%s' = %.17g is not an int",
                           name, d);
        if (!p[i].is_int && !isfinite(d))
            return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler.%s' is not finite", name);
        ba_sampler_param_set(&sp, &p[i], d);
    }
    if (ba_sampler_validate(&sp, why))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler': %s", why);
    *out = sp;
    return BA_OK;
}

/* Reads "sampler" (absent: exact, as written before samplers existed). */
static int cfg_sampler(const cJSON *o, ba_sampler *out, char *err)
{
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "sampler");
    if (!so) {
        *out = ba_sampler_default(BA_SAMPLER_EXACT);
        return BA_OK;
    }
    return sampler_from_object(so, out, err);
}

int ba_sampler_from_json(const char *json, ba_sampler *out, char *err)
{
    if (!json || !out)
        return ba_fail(err, BA_ERR_ARG, "ba_sampler_from_json: json and out must not be NULL");
    int rc = ba_json_check_text(json, strlen(json), "sampler", err);
    if (rc)
        return rc;
    cJSON *so = cJSON_Parse(json);
    if (!(rc = ba_json_check_keys(so, "sampler", err)))
        rc = sampler_from_object(so, out, err);
    cJSON_Delete(so);
    return rc;
}

/* The config's fields, then the data description's when there is one. */
static int add_config(cJSON *o, const ba_config *cfg, const ba_data_spec *spec)
{
    int ok = (!spec || cJSON_AddStringToObject(o, "task", ba_task_name(spec->task))) &&
             cJSON_AddStringToObject(o, "attn", ba_attn_name(cfg->attn)) &&
             cJSON_AddStringToObject(o, "engine", ba_engine_name(cfg->engine)) &&
             cJSON_AddNumberToObject(o, "n_layer", cfg->n_layer) &&
             cJSON_AddNumberToObject(o, "n_head", cfg->n_head) &&
             cJSON_AddNumberToObject(o, "n_embd", cfg->n_embd) &&
             cJSON_AddNumberToObject(o, "block_size", cfg->block_size) &&
             cJSON_AddNumberToObject(o, "vocab_size", cfg->vocab_size) &&
             cJSON_AddStringToObject(o, "head", ba_head_name(cfg->head)) &&
             cJSON_AddNumberToObject(o, "out_size", cfg->out_size) &&
             cJSON_AddBoolToObject(o, "ffn", cfg->ffn != 0) &&
             (cfg->pos_emb > BA_POS_LEARNED /* true/false as before for these two */
                  ? cJSON_AddStringToObject(o, "pos_emb", ba_pos_emb_name(cfg->pos_emb)) != NULL
                  : cJSON_AddBoolToObject(o, "pos_emb", cfg->pos_emb != 0) != NULL) &&
             cJSON_AddStringToObject(o, "couplings", ba_couplings_name(cfg->couplings)) &&
             cJSON_AddNumberToObject(o, "band", cfg->band) &&
             cJSON_AddStringToObject(o, "field_bias", ba_field_bias_name(cfg->field_bias));
    /* written only when float: a double model's file is as before */
    if (ok && cfg->band_f32)
        ok = cJSON_AddStringToObject(o, "band_precision", "float") != NULL;
    /* only Ising configs on an approximate engine carry its settings, so
     * the others' files are as before */
    if (ok && ba_engine_is_approx(cfg->engine) &&
        (cfg->attn == BA_ATTN_BOLTZMANN || cfg->attn == BA_ATTN_COUPLING)) {
        cJSON *a = cJSON_AddObjectToObject(o, "approx");
        ok = a && cJSON_AddNumberToObject(a, "damping", cfg->approx.damping) &&
             cJSON_AddNumberToObject(a, "tol", cfg->approx.tol) &&
             cJSON_AddNumberToObject(a, "max_iter", cfg->approx.max_iter) &&
             cJSON_AddNumberToObject(o, "window", cfg->window);
    }
    if (ok && spec) {
        char seed[24];
        snprintf(seed, sizeof seed, "%" PRIu64, spec->data_seed);
        ok = cJSON_AddNumberToObject(o, "kinds", spec->kinds) &&
             cJSON_AddNumberToObject(o, "n_heldout", spec->n_heldout) &&
             /* A string: JSON numbers are doubles and would round 64 bits. */
             cJSON_AddStringToObject(o, "data_seed", seed);
    }
    /* only for recall, so the other tasks' files stay as they were */
    if (ok && spec && spec->task == BA_TASK_RECALL)
        ok = cJSON_AddNumberToObject(o, "recall_vocab", spec->recall_vocab) &&
             cJSON_AddNumberToObject(o, "pairs", spec->pairs);
    /* only when capped, so uncapped brackets files stay as they were */
    if (ok && spec && spec->task == BA_TASK_BRACKETS && spec->max_depth > 0)
        ok = cJSON_AddNumberToObject(o, "max_depth", spec->max_depth) != NULL;
    if (ok && spec && spec->task == BA_TASK_CHARLM && spec->vocab_size >= 1 &&
        spec->vocab_size <= 256) {
        cJSON *v = cJSON_AddArrayToObject(o, "vocab");
        ok = v != NULL;
        for (int i = 0; ok && i < spec->vocab_size; i++) {
            cJSON *b = cJSON_CreateNumber(spec->vocab[i]);
            ok = b && cJSON_AddItemToArray(v, b);
            if (!ok)
                cJSON_Delete(b);
        }
    }
    return ok && add_sampler(o, &cfg->sampler);
}

char *ba_config_to_json(const ba_config *cfg, const ba_data_spec *spec)
{
    if (!cfg)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    char *s = o && add_config(o, cfg, spec) ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return ba_json_own(s);
}

cJSON *ba_config_json_object(const ba_config *cfg, const ba_data_spec *spec)
{
    cJSON *o = cJSON_CreateObject();
    if (o && !add_config(o, cfg, spec)) {
        cJSON_Delete(o);
        o = NULL;
    }
    return o;
}

/* An int field: required ones must be present. */
static int cfg_int(const cJSON *o, const char *key, int required, int *out, char *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it) {
        if (required)
            return ba_fail(err, BA_ERR_FORMAT, "config field '%s' is missing", key);
        return BA_OK;
    }
    if (!cJSON_IsNumber(it))
        return ba_fail(err, BA_ERR_FORMAT, "config field '%s' is %s, expected an integer", key,
                       ba_json_type(it));
    double d = it->valuedouble;
    if (!(d >= INT_MIN && d <= INT_MAX) || d != floor(d))
        return ba_fail(err, BA_ERR_FORMAT, "config field '%s' = %.17g is not an int", key, d);
    *out = (int)d;
    return BA_OK;
}

/* A name field parsed with one of the ba_*_parse functions. */
static const char *cfg_name(const cJSON *o, const char *key, int required, char *err, int *rc)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    *rc = BA_OK;
    if (!it) {
        if (required)
            *rc = ba_fail(err, BA_ERR_FORMAT, "config field '%s' is missing", key);
        return NULL;
    }
    if (!cJSON_IsString(it)) {
        *rc = ba_fail(err, BA_ERR_FORMAT, "config field '%s' is %s, expected a string", key,
                      ba_json_type(it));
        return NULL;
    }
    return it->valuestring;
}

/* A name the parse function rejected is a malformed file, not a bad
 * argument: restate its message under BA_ERR_FORMAT. */
static int cfg_bad_name(const char *key, const char *why, char *err)
{
    return ba_fail(err, BA_ERR_FORMAT, "config field '%s': %s", key, why);
}

static int cfg_seed(const cJSON *o, uint64_t *out, char *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, "data_seed");
    if (!it)
        return BA_OK;
    if (cJSON_IsNumber(it)) {
        uint64_t v;
        if (!ba_json_u53(it, &v))
            return ba_fail(err, BA_ERR_FORMAT,
                           "config field 'data_seed' = %.17g is not an integer in [0, 2^53) "
                           "(write larger seeds as a decimal string)",
                           it->valuedouble);
        *out = v;
        return BA_OK;
    }
    if (!cJSON_IsString(it))
        return ba_fail(err, BA_ERR_FORMAT,
                       "config field 'data_seed' is %s, expected a decimal string or a number",
                       ba_json_type(it));
    const char *s = it->valuestring;
    uint64_t v = 0;
    int ok = s[0] != '\0';
    for (const char *p = s; ok && *p; p++) {
        unsigned digit = (unsigned)(*p - '0');
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - digit) / 10)
            ok = 0;
        else
            v = v * 10 + digit;
    }
    if (!ok)
        return ba_fail(err, BA_ERR_FORMAT,
                       "config field 'data_seed' = '%.40s' is not a decimal integer below 2^64", s);
    *out = v;
    return BA_OK;
}

static int cfg_vocab(const cJSON *o, ba_data_spec *d, char *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "vocab");
    if (!v)
        return ba_fail(err, BA_ERR_FORMAT, "config field 'vocab' is missing (required for charlm)");
    if (!cJSON_IsArray(v))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'vocab' is %s, expected an array",
                       ba_json_type(v));
    int n = cJSON_GetArraySize(v);
    if (n != d->vocab_size)
        return ba_fail(err, BA_ERR_FORMAT, "config field 'vocab' has %d entries, vocab_size is %d",
                       n, d->vocab_size);
    unsigned char seen[256] = {0};
    int i = 0;
    for (const cJSON *it = v->child; it; it = it->next, i++) {
        uint64_t b;
        if (!ba_json_u53(it, &b) || b > 255) {
            char desc[48];
            ba_json_describe(it, desc, sizeof desc);
            return ba_fail(err, BA_ERR_FORMAT, "config field 'vocab[%d]' = %s is not a byte 0..255",
                           i, desc);
        }
        if (seen[b])
            return ba_fail(err, BA_ERR_FORMAT, "config field 'vocab[%d]' = %u appears twice", i,
                           (unsigned)b);
        seen[b] = 1;
        d->vocab[i] = (uint8_t)b;
    }
    return BA_OK;
}

/* The name fields: task (optional: a config without data), attn, engine
 * and head (absent: what the task implies, as before heads were named). */
static int cfg_names(const cJSON *o, ba_config *c, ba_data_spec *d, int *has_task, char *err)
{
    int rc;
    char why[BA_ERR_LEN];
    const char *s = cfg_name(o, "task", 0, err, &rc);
    if (rc)
        return rc;
    *has_task = s != NULL;
    if (s && ba_task_parse(s, &d->task, why))
        return cfg_bad_name("task", why, err);
    if (!(s = cfg_name(o, "attn", 1, err, &rc)) && rc)
        return rc;
    if (ba_attn_parse(s, &c->attn, why))
        return cfg_bad_name("attn", why, err);
    if ((s = cfg_name(o, "engine", 0, err, &rc)) && ba_engine_parse(s, &c->engine, why))
        return cfg_bad_name("engine", why, err);
    if (rc)
        return rc;
    c->head = *has_task && d->task == BA_TASK_BRACKETS ? BA_HEAD_POINTER : BA_HEAD_TOKEN;
    if ((s = cfg_name(o, "head", 0, err, &rc)) && ba_head_parse(s, &c->head, why))
        return cfg_bad_name("head", why, err);
    if (rc)
        return rc;
    /* absent in files written before long contexts: absolute, no bias */
    if ((s = cfg_name(o, "couplings", 0, err, &rc)) && ba_couplings_parse(s, &c->couplings, why))
        return cfg_bad_name("couplings", why, err);
    if (rc)
        return rc;
    if ((s = cfg_name(o, "field_bias", 0, err, &rc)) &&
        ba_field_bias_parse(s, &c->field_bias, why))
        return cfg_bad_name("field_bias", why, err);
    if (rc)
        return rc;
    /* absent in files before issue 42 (and in every double model's): double */
    if ((s = cfg_name(o, "band_precision", 0, err, &rc)) &&
        ba_band_precision_parse(s, &c->band_f32, why))
        return cfg_bad_name("band_precision", why, err);
    return rc;
}

/* "approx" (absent: the defaults) and "window" (absent: 0). Range checks
 * are ba_config_validate's. */
static int cfg_approx(const cJSON *o, ba_config *c, char *err)
{
    int rc = cfg_int(o, "window", 0, &c->window, err);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "approx");
    if (rc || !a)
        return rc;
    if (!cJSON_IsObject(a))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'approx' is %s, expected an object",
                       ba_json_type(a));
    if ((rc = ba_json_check_keys(a, "approx", err)))
        return rc;
    static const char *const keys[2] = {"damping", "tol"};
    double *vals[2] = {&c->approx.damping, &c->approx.tol};
    for (int i = 0; i < 2; i++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(a, keys[i]);
        if (!it)
            continue;
        if (!cJSON_IsNumber(it))
            return ba_fail(err, BA_ERR_FORMAT, "config field 'approx.%s' is %s, expected a "
                           "number", keys[i], ba_json_type(it));
        *vals[i] = it->valuedouble;
    }
    return cfg_int(a, "max_iter", 0, &c->approx.max_iter, err);
}

static int config_from_object(const cJSON *o, ba_config *c, ba_data_spec *d, int *has_task,
                              char *err)
{
    int rc;
    if ((rc = cfg_names(o, c, d, has_task, err)) ||
        (rc = cfg_int(o, "n_layer", 1, &c->n_layer, err)) ||
        (rc = cfg_int(o, "n_head", 1, &c->n_head, err)) ||
        (rc = cfg_int(o, "n_embd", 1, &c->n_embd, err)) ||
        (rc = cfg_int(o, "block_size", 1, &c->block_size, err)) ||
        (rc = cfg_int(o, "vocab_size", 1, &c->vocab_size, err)) ||
        (rc = cfg_int(o, "out_size", 1, &c->out_size, err)) ||
        (rc = cfg_int(o, "band", 0, &c->band, err)) ||
        (rc = cfg_int(o, "kinds", 0, &d->kinds, err)) ||
        (rc = cfg_int(o, "n_heldout", 0, &d->n_heldout, err)) ||
        (rc = cfg_seed(o, &d->data_seed, err)))
        return rc;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "ffn");
    if (!f)
        return ba_fail(err, BA_ERR_FORMAT, "config field 'ffn' is missing");
    if (!cJSON_IsBool(f))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'ffn' is %s, expected true or false",
                       ba_json_type(f));
    c->ffn = cJSON_IsTrue(f) ? 1 : 0;
    /* true (learned; also when absent, as before issue 18), false (none),
     * or a kind's name ("rope", "alibi", issue 43) */
    const cJSON *pe = cJSON_GetObjectItemCaseSensitive(o, "pos_emb");
    char why[BA_ERR_LEN];
    if (pe && cJSON_IsString(pe)) {
        if (ba_pos_emb_parse(pe->valuestring, &c->pos_emb, why))
            return ba_fail(err, BA_ERR_FORMAT, "config field 'pos_emb': %s", why);
    } else if (pe && !cJSON_IsBool(pe))
        return ba_fail(err, BA_ERR_FORMAT,
                       "config field 'pos_emb' is %s, expected true, false or a name (rope, alibi)",
                       ba_json_type(pe));
    else
        c->pos_emb = !pe || cJSON_IsTrue(pe) ? BA_POS_LEARNED : BA_POS_NONE;
    if ((rc = cfg_sampler(o, &c->sampler, err)) || (rc = cfg_approx(o, c, err)))
        return rc;
    /* An out-of-range vocab_size is left to ba_config_validate to report;
     * reading a vocab for it could overrun d->vocab. */
    if (*has_task && d->task == BA_TASK_CHARLM && c->vocab_size >= 1 && c->vocab_size <= 256) {
        d->vocab_size = c->vocab_size;
        if ((rc = cfg_vocab(o, d, err)))
            return rc;
    } else if (*has_task && d->task == BA_TASK_BRACKETS) {
        d->vocab_size = 0;
        /* absent: no cap (0 is never written) */
        if ((rc = cfg_int(o, "max_depth", 0, &d->max_depth, err)))
            return rc;
        if (cJSON_GetObjectItemCaseSensitive(o, "max_depth") && d->max_depth < 1)
            return ba_fail(err, BA_ERR_FORMAT,
                           "config field 'max_depth' = %d must be at least 1 (absent: no cap)",
                           d->max_depth);
    } else if (*has_task && d->task == BA_TASK_RECALL &&
               ((rc = cfg_int(o, "recall_vocab", 1, &d->recall_vocab, err)) ||
                (rc = cfg_int(o, "pairs", 1, &d->pairs, err)))) {
        return rc;
    }
    if ((rc = ba_config_validate(c, err)))
        return rc;
    return *has_task ? ba_data_spec_check(d, c, err) : BA_OK;
}

int ba_config_from_object(const cJSON *o, ba_config *cfg, ba_data_spec *spec, char *err)
{
    if (!cJSON_IsObject(o))
        return ba_fail(err, BA_ERR_FORMAT, "config is %s, not a JSON object", ba_json_type(o));
    /* cJSON reads the first of a repeated key, other readers the last: a
     * config must mean one thing. */
    int rc = ba_json_check_keys(o, "config", err);
    if (rc)
        return rc;
    /* Defaults for the optional fields; the outputs are written only on
     * success. */
    ba_config c = ba_config_default(BA_ATTN_SOFTMAX, 0);
    ba_data_spec d = ba_data_spec_default(BA_TASK_CHARLM);
    int has_task = 0;
    rc = config_from_object(o, &c, &d, &has_task, err);
    if (rc == BA_OK && spec && !has_task)
        rc = ba_fail(err, BA_ERR_FORMAT, "config field 'task' is missing");
    if (rc == BA_OK) {
        *cfg = c;
        if (spec)
            *spec = d;
    }
    return rc;
}

int ba_config_from_json(const char *json, ba_config *cfg, ba_data_spec *spec, char *err)
{
    if (!json || !cfg)
        return ba_fail(err, BA_ERR_ARG, "ba_config_from_json: json and cfg must not be NULL");
    int rc = ba_json_check_text(json, strlen(json), "config", err);
    if (rc)
        return rc;
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithOpts(json, &end, 1);
    if (!o) {
        size_t at = end && end >= json ? (size_t)(end - json) : 0;
        return ba_fail(err, BA_ERR_FORMAT, "config is not valid JSON (error near byte %zu)", at);
    }
    rc = ba_config_from_object(o, cfg, spec, err);
    cJSON_Delete(o);
    return rc;
}
