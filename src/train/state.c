/* The training settings and their JSON form, and the resumable state
 * (state.safetensors) a trainer saves and restores exactly. */
#include "train/train.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ settings */

ba_train_settings ba_train_settings_default(long steps)
{
    ba_train_settings s;
    memset(&s, 0, sizeof s);
    s.steps = steps;
    s.warmup = steps / 20;
    s.batch = 32;
    s.lr = 3e-3;
    s.min_lr_frac = 0.1;
    s.init_std = BA_INIT_STD;
    s.seed = 1;
    s.opt = ba_adamw_default();
    long tenth = steps / 10 > 0 ? steps / 10 : steps;
    s.eval_every = (int)(tenth < INT32_MAX ? tenth : INT32_MAX);
    s.eval_items = 512;
    s.log_every = 10;
    s.save_every = s.eval_every;
    return s;
}

int ba_train_settings_validate(const ba_train_settings *s, char *err)
{
    if (!s)
        return ba_fail(err, BA_ERR_ARG, "training settings are NULL");
    if (s->steps < 1)
        return ba_fail(err, BA_ERR_ARG, "steps = %ld must be at least 1", s->steps);
    if (s->warmup < 0 || s->warmup > s->steps)
        return ba_fail(err, BA_ERR_ARG, "warmup = %ld is out of range [0, steps = %ld]",
                       s->warmup, s->steps);
    if (s->batch < 1 || s->batch > (1 << 20))
        return ba_fail(err, BA_ERR_ARG, "batch = %d is out of range [1, %d]", s->batch, 1 << 20);
    if (!(s->lr >= 0 && s->lr <= 10))
        return ba_fail(err, BA_ERR_ARG, "lr = %g is out of range [0, 10]", s->lr);
    if (!(s->min_lr_frac >= 0 && s->min_lr_frac <= 1))
        return ba_fail(err, BA_ERR_ARG, "min_lr fraction = %g is out of range [0, 1]",
                       s->min_lr_frac);
    if (!(s->init_std > 0 && s->init_std <= 1))
        return ba_fail(err, BA_ERR_ARG, "init_std = %g is out of range (0, 1]", s->init_std);
    if (!(s->j_init_std >= 0 && s->j_init_std <= 100))
        return ba_fail(err, BA_ERR_ARG, "j_init_std = %g is out of range [0, 100]",
                       s->j_init_std);
    if (!(s->opt.beta1 >= 0 && s->opt.beta1 < 1) || !(s->opt.beta2 >= 0 && s->opt.beta2 < 1))
        return ba_fail(err, BA_ERR_ARG, "AdamW betas (%g, %g) must lie in [0, 1)", s->opt.beta1,
                       s->opt.beta2);
    if (!(s->opt.eps > 0 && s->opt.eps < 1))
        return ba_fail(err, BA_ERR_ARG, "AdamW eps = %g is out of range (0, 1)", s->opt.eps);
    if (!(s->opt.weight_decay >= 0 && s->opt.weight_decay <= 10))
        return ba_fail(err, BA_ERR_ARG, "weight_decay = %g is out of range [0, 10]",
                       s->opt.weight_decay);
    if (!(s->opt.grad_clip >= 0 && s->opt.grad_clip <= 1e9))
        return ba_fail(err, BA_ERR_ARG, "clip = %g is out of range [0, 1e9]", s->opt.grad_clip);
    if (s->eval_every < 0)
        return ba_fail(err, BA_ERR_ARG, "eval_every = %d must not be negative", s->eval_every);
    if (s->eval_items < 1)
        return ba_fail(err, BA_ERR_ARG, "eval_items = %d must be at least 1", s->eval_items);
    if (s->log_every < 1)
        return ba_fail(err, BA_ERR_ARG, "log_every = %d must be at least 1", s->log_every);
    if (s->save_every < 0)
        return ba_fail(err, BA_ERR_ARG, "save_every = %d must not be negative", s->save_every);
    return BA_OK;
}

cJSON *ba_settings_json_object(const ba_train_settings *s, const char *data_path)
{
    cJSON *o = cJSON_CreateObject();
    char seed[32];
    snprintf(seed, sizeof seed, "%" PRIu64, s->seed);
    int ok = o && cJSON_AddNumberToObject(o, "steps", (double)s->steps) &&
             cJSON_AddNumberToObject(o, "batch", s->batch) &&
             cJSON_AddNumberToObject(o, "lr", s->lr) &&
             cJSON_AddNumberToObject(o, "min_lr", s->lr * s->min_lr_frac) &&
             cJSON_AddNumberToObject(o, "warmup", (double)s->warmup) &&
             cJSON_AddNumberToObject(o, "weight_decay", s->opt.weight_decay) &&
             cJSON_AddNumberToObject(o, "beta1", s->opt.beta1) &&
             cJSON_AddNumberToObject(o, "beta2", s->opt.beta2) &&
             cJSON_AddNumberToObject(o, "clip", s->opt.grad_clip) &&
             cJSON_AddNumberToObject(o, "j_init_std", s->j_init_std) &&
             /* only where it is not GPT-2's, so that the records of runs
              * made before the setting existed read as they were */
             (s->init_std == BA_INIT_STD ||
              cJSON_AddNumberToObject(o, "init_std", s->init_std)) &&
             /* a string: JSON numbers are doubles and would round 64 bits */
             cJSON_AddStringToObject(o, "seed", seed) &&
             cJSON_AddNumberToObject(o, "eval_every", s->eval_every) &&
             cJSON_AddNumberToObject(o, "eval_items", s->eval_items) &&
             cJSON_AddNumberToObject(o, "log_every", s->log_every) &&
             cJSON_AddNumberToObject(o, "save_every", s->save_every) &&
             cJSON_AddNumberToObject(o, "threads", ba_nthreads()) &&
             (!data_path || cJSON_AddStringToObject(o, "data", data_path));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

char *ba_train_settings_to_json(const ba_train_settings *s, const char *data_path)
{
    if (!s)
        return NULL;
    cJSON *o = ba_settings_json_object(s, data_path);
    char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return ba_json_own(txt);
}

/* Keys of the numeric settings in the order the reader takes them. */
enum { K_STEPS, K_BATCH, K_LR, K_MINLR, K_WARMUP, K_WD, K_B1, K_B2, K_CLIP, K_JSTD, K_EVAL,
       K_ITEMS, K_LOG, K_SAVE, NKEYS };
static const char *const setting_keys[NKEYS] = {
    "steps", "batch",      "lr",         "min_lr",     "warmup",    "weight_decay", "beta1",
    "beta2", "clip",       "j_init_std", "eval_every", "eval_items", "log_every",  "save_every"};

int ba_settings_from_object(const cJSON *o, ba_train_settings *s, char **data_path, int *threads,
                            char *err)
{
    if (!cJSON_IsObject(o))
        return ba_fail(err, BA_ERR_FORMAT, "the training settings are not a JSON object");
    double v[NKEYS];
    for (int i = 0; i < NKEYS; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, setting_keys[i]);
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
            return ba_fail(err, BA_ERR_FORMAT, "the training settings lack a number '%s'",
                           setting_keys[i]);
        v[i] = x->valuedouble;
    }
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(o, "seed");
    const char *sd = cJSON_IsString(seed) ? seed->valuestring : "";
    char *end = NULL;
    errno = 0;
    unsigned long long sv = strtoull(sd, &end, 10);
    if (!*sd || *end || errno || sd[0] == '-' || sd[0] == '+' || sd[0] == ' ')
        return ba_fail(err, BA_ERR_FORMAT,
                       "the training settings' 'seed' is not a decimal string below 2^64");
    /* Integers must be exact before they are converted. */
    static const int ints[] = {K_STEPS, K_BATCH, K_WARMUP, K_EVAL, K_ITEMS, K_LOG, K_SAVE};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        double x = v[ints[i]];
        if (x != floor(x) || fabs(x) > 1e15 || (ints[i] != K_STEPS && ints[i] != K_WARMUP &&
                                                fabs(x) > 2147483647.0))
            return ba_fail(err, BA_ERR_FORMAT, "the training settings' '%s' = %.17g is not an "
                           "integer in range", setting_keys[ints[i]], x);
    }
    ba_train_settings t;
    memset(&t, 0, sizeof t);
    t.steps = (long)v[K_STEPS], t.batch = (int)v[K_BATCH], t.lr = v[K_LR];
    t.min_lr_frac = v[K_LR] > 0 ? v[K_MINLR] / v[K_LR] : 0.0;
    t.warmup = (long)v[K_WARMUP];
    t.opt = ba_adamw_default();
    t.opt.weight_decay = v[K_WD], t.opt.beta1 = v[K_B1], t.opt.beta2 = v[K_B2];
    t.opt.grad_clip = v[K_CLIP];
    t.j_init_std = v[K_JSTD], t.eval_every = (int)v[K_EVAL], t.eval_items = (int)v[K_ITEMS];
    t.log_every = (int)v[K_LOG], t.save_every = (int)v[K_SAVE], t.seed = sv;
    const cJSON *is = cJSON_GetObjectItemCaseSensitive(o, "init_std"); /* absent: 0.02 */
    if (is && (!cJSON_IsNumber(is) || !isfinite(is->valuedouble)))
        return ba_fail(err, BA_ERR_FORMAT, "the training settings' 'init_std' is not a number");
    t.init_std = is ? is->valuedouble : BA_INIT_STD;
    char why[BA_ERR_LEN];
    if (ba_train_settings_validate(&t, why))
        return ba_fail(err, BA_ERR_FORMAT, "the training settings are out of range: %s", why);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "data");
    if (d && !cJSON_IsString(d))
        return ba_fail(err, BA_ERR_FORMAT, "the training settings' 'data' is %s, expected a "
                       "string", ba_json_type(d));
    if (data_path) {
        *data_path = d ? strdup(d->valuestring) : NULL;
        if (d && !*data_path)
            return ba_fail(err, BA_ERR_NOMEM, "out of memory");
    }
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(o, "threads");
    if (threads)
        *threads = cJSON_IsNumber(th) ? (int)th->valuedouble : 0;
    *s = t;
    return BA_OK;
}

int ba_train_settings_from_json(const char *json, ba_train_settings *s, char **data_path,
                                char *err)
{
    if (data_path)
        *data_path = NULL;
    if (!json || !s)
        return ba_fail(err, BA_ERR_ARG, "ba_train_settings_from_json: json and s must not be NULL");
    cJSON *o = ba_json_parse_strict(json, strlen(json), "the training settings", err);
    if (!o)
        return BA_ERR_FORMAT;
    int rc = ba_settings_from_object(o, s, data_path, NULL, err);
    cJSON_Delete(o);
    return rc;
}

/* --------------------------------------------------- resumable state
 * state.safetensors holds everything a run needs to continue exactly:
 * parameters and both AdamW moments (flat F32, in parameter order, with an
 * FNV-1a checksum of the three), and in the metadata the config with the
 * data description, the settings, the step, the batch and sampler
 * streams' RNG states and the training time so far. One file, replaced
 * atomically, so parameters and optimiser state never come from different
 * steps. */

/* An RNG state as 64 hex digits, and back (0, or -1 if malformed). */
static void rng_hex(const ba_rng *r, char *buf, size_t n)
{
    snprintf(buf, n, "%016llx%016llx%016llx%016llx", (unsigned long long)r->s[0],
             (unsigned long long)r->s[1], (unsigned long long)r->s[2],
             (unsigned long long)r->s[3]);
}

static int rng_from_hex(const char *hex, ba_rng *r)
{
    if (!hex || strlen(hex) != 64)
        return -1;
    ba_rng t;
    for (int i = 0; i < 4; i++) {
        char part[17], *end;
        memcpy(part, hex + 16 * i, 16);
        part[16] = '\0';
        for (int k = 0; k < 16; k++)
            if (!((part[k] >= '0' && part[k] <= '9') || (part[k] >= 'a' && part[k] <= 'f') ||
                  (part[k] >= 'A' && part[k] <= 'F')))
                return -1;
        t.s[i] = strtoull(part, &end, 16);
    }
    if (!(t.s[0] | t.s[1] | t.s[2] | t.s[3]))
        return -1; /* xoshiro never leaves the all-zero state */
    *r = t;
    return 0;
}

static const char *const state_tensors[3] = {"params", "adam_m", "adam_v"};

int ba_state_write(const char *path, ba_model *m, const ba_data_spec *spec, const char *train_json,
                   long step, const ba_rng *data_rng, double train_s, char *err)
{
    size_t P = ba_model_num_params(m);
    const ba_real *src[3] = {ba_model_params(m), ba_model_adam_m(m), ba_model_adam_v(m)};
    float *f32 = malloc(3 * P * sizeof *f32 + 1);
    if (!f32)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the F32 copy of the training state");
    /* ba_model_step keeps all three finite; checked again so a non-finite
     * value can never replace the last good state. */
    for (int k = 0; k < 3; k++)
        for (size_t j = 0; j < P; j++) {
            double x = (double)src[k][j];
            if (!isfinite(x) || fabs(x) > 3.4028234663852886e38) {
                free(f32);
                return ba_fail(err, BA_ERR_NUMERIC,
                               "training state value %s[%zu] is not finite; not saving",
                               state_tensors[k], j);
            }
            f32[k * P + j] = (float)x;
        }
    char stepbuf[32], rngbuf[80], srngbuf[80], timebuf[40], sum[32];
    snprintf(stepbuf, sizeof stepbuf, "%ld", step);
    snprintf(timebuf, sizeof timebuf, "%.3f", train_s);
    rng_hex(data_rng, rngbuf, sizeof rngbuf);
    rng_hex(ba_model_sampler_rng(m), srngbuf, sizeof srngbuf);
    uint64_t h = ba_fnv1a64(BA_FNV_INIT, f32, 3 * P * sizeof *f32);
    snprintf(sum, sizeof sum, "fnv1a64:%016llx", (unsigned long long)h);
    char *cfg = ba_config_to_json(ba_model_config(m), spec);
    int rc;
    if (!cfg) {
        rc = ba_fail(err, BA_ERR_NOMEM, "out of memory");
    } else {
        ba_st_entry e[3];
        memset(e, 0, sizeof e);
        for (int k = 0; k < 3; k++) {
            e[k].name = state_tensors[k];
            e[k].dtype = BA_DT_F32;
            e[k].ndim = 1;
            e[k].shape[0] = (int64_t)P;
            e[k].data = f32 + k * P;
        }
        const char *keys[] = {"config", "train", "step", "data_rng", "sampler_rng", "train_s",
                              "checksum"};
        const char *vals[] = {cfg, train_json, stepbuf, rngbuf, srngbuf, timebuf, sum};
        rc = ba_st_write(path, e, 3, keys, vals, 7, err);
    }
    free(cfg);
    free(f32);
    return rc;
}

/* Opens a state file and checks that it has a state's metadata. */
int ba_state_open(const char *path, ba_st **st, char *err)
{
    int rc = ba_st_read(st, path, err);
    if (rc)
        return rc;
    if (!ba_st_metadata(*st, "config") || !ba_st_metadata(*st, "train") ||
        !ba_st_metadata(*st, "step") || !ba_st_metadata(*st, "data_rng")) {
        ba_st_free(*st);
        *st = NULL;
        return ba_fail(err, BA_ERR_FORMAT, "%.200s lacks the metadata of a resumable state", path);
    }
    return BA_OK;
}

int ba_state_describe(const ba_st *st, ba_config *cfg, ba_data_spec *spec,
                      ba_train_settings *s, char **data_path, char *err)
{
    if (data_path)
        *data_path = NULL;
    ba_config c;
    ba_data_spec d;
    ba_train_settings t;
    char why[BA_ERR_LEN];
    int rc = ba_config_from_json(ba_st_metadata(st, "config"), &c, &d, why);
    if (rc)
        return ba_fail(err, rc, "the saved config: %s", why);
    if ((rc = ba_train_settings_from_json(ba_st_metadata(st, "train"), &t, data_path, err)))
        return rc;
    if (cfg)
        *cfg = c;
    if (spec)
        *spec = d;
    if (s)
        *s = t;
    return BA_OK;
}

int ba_trainer_peek(const char *path, ba_config *cfg, ba_data_spec *spec, ba_train_settings *s,
                    char **data_path, char *err)
{
    if (data_path)
        *data_path = NULL;
    if (!path)
        return ba_fail(err, BA_ERR_ARG, "ba_trainer_peek: path is NULL");
    ba_st *st;
    int rc = ba_state_open(path, &st, err);
    if (rc == BA_OK)
        rc = ba_state_describe(st, cfg, spec, s, data_path, err);
    ba_st_free(st);
    return rc;
}

/* The tensors and the checksum of a state into the model's arrays. */
static int state_tensors_into(const ba_st *st, ba_model *m, char *err)
{
    size_t P = ba_model_num_params(m);
    ba_real *dst[] = {ba_model_params(m), ba_model_adam_m(m), ba_model_adam_v(m)};
    uint64_t h = BA_FNV_INIT;
    for (int i = 0; i < 3; i++) {
        const ba_st_tensor *t = ba_st_find(st, state_tensors[i]);
        if (!t || t->dtype != BA_DT_F32 || t->ndim != 1 || (size_t)t->shape[0] != P)
            return ba_fail(err, BA_ERR_FORMAT, "state tensor '%s' is missing or not F32 [%zu]",
                           state_tensors[i], P);
        h = ba_fnv1a64(h, t->data, t->nbytes);
        const unsigned char *src = t->data;
        for (size_t j = 0; j < P; j++) {
            float v;
            memcpy(&v, src + j * sizeof v, sizeof v);
            /* a second moment is a mean of squares: never negative */
            if (!isfinite(v) || (i == 2 && v < 0))
                return ba_fail(err, BA_ERR_FORMAT, "state tensor '%s' value [%zu] = %g is %s",
                               state_tensors[i], j, (double)v,
                               isfinite(v) ? "negative" : "not finite");
            dst[i][j] = (ba_real)v;
        }
    }
    const char *sum = ba_st_metadata(st, "checksum");
    char want[32];
    snprintf(want, sizeof want, "fnv1a64:%016llx", (unsigned long long)h);
    if (sum && strcmp(sum, want) != 0)
        return ba_fail(err, BA_ERR_FORMAT,
                       "checksum mismatch: the state says %.40s but its tensor data gives %s "
                       "(the data is corrupt)",
                       sum, want);
    return BA_OK;
}

int ba_state_read_into(const ba_st *st, ba_model *m, long *step, ba_rng *data_rng,
                       double *train_s, char *err)
{
    int rc = state_tensors_into(st, m, err);
    if (rc == BA_OK)
        rc = ba_model_check_band(m, "state", err);
    char *end;
    const char *sv = ba_st_metadata(st, "step"), *rv = ba_st_metadata(st, "data_rng");
    const char *srv = ba_st_metadata(st, "sampler_rng");
    errno = 0;
    long stp = rc == BA_OK ? strtol(sv, &end, 10) : 0;
    if (rc == BA_OK && (*end || errno || !*sv || stp < 0))
        rc = ba_fail(err, BA_ERR_FORMAT, "the saved step '%.40s' is malformed", sv);
    if (rc == BA_OK && rng_from_hex(rv, data_rng))
        rc = ba_fail(err, BA_ERR_FORMAT, "the saved batch-stream RNG state is malformed");
    /* The sampler stream: states written before sampled attention lack it,
     * which matters only to a sampled run (none could be saved then). */
    if (rc == BA_OK && srv && rng_from_hex(srv, ba_model_sampler_rng(m)))
        rc = ba_fail(err, BA_ERR_FORMAT, "the saved sampler RNG state is malformed");
    if (rc == BA_OK && !srv && ba_model_config(m)->sampler.kind != BA_SAMPLER_EXACT)
        rc = ba_fail(err, BA_ERR_FORMAT, "the saved state of a sampled run lacks the sampler RNG");
    const char *tv = ba_st_metadata(st, "train_s");
    double secs = -1;
    if (rc == BA_OK && tv && (secs = strtod(tv, &end), *end || !(secs >= 0) || !isfinite(secs)))
        rc = ba_fail(err, BA_ERR_FORMAT, "the saved training time '%.40s' is malformed", tv);
    if (rc == BA_OK) {
        *step = stp;
        *train_s = secs;
        ba_model_set_step_count(m, stp);
    }
    return rc;
}

/* ------------------------------------------ the data of a restored run */

/* A charlm text's size and "fnv1a64:<hex>" hash as the settings record
 * them (ba_dataset_fingerprint). */
uint64_t ba_text_fingerprint(const ba_dataset *d, char hash[32])
{
    uint64_t bytes, h;
    ba_dataset_fingerprint(d, &bytes, &h);
    snprintf(hash, 32, "fnv1a64:%016llx", (unsigned long long)h);
    return bytes;
}

/* A restored charlm run's data must be the text it was trained on, not
 * only one with the same vocabulary: its recorded size and hash (states
 * written before they were recorded are taken on trust). */
int ba_state_same_text(const ba_st *st, const ba_dataset *data, const char *path, char *err)
{
    cJSON *o = cJSON_Parse(ba_st_metadata(st, "train"));
    const cJSON *nb = cJSON_GetObjectItemCaseSensitive(o, "data_bytes");
    const cJSON *hh = cJSON_GetObjectItemCaseSensitive(o, "data_hash");
    const cJSON *dp = cJSON_GetObjectItemCaseSensitive(o, "data");
    int rc = BA_OK;
    if (ba_dataset_task(data) == BA_TASK_CHARLM && cJSON_IsNumber(nb) && cJSON_IsString(hh)) {
        char hex[32];
        uint64_t bytes = ba_text_fingerprint(data, hex);
        if ((double)bytes != nb->valuedouble || strcmp(hex, hh->valuestring) != 0)
            rc = ba_fail(err, BA_ERR_ARG,
                         "the data differs from the run's: %.200s has %llu bytes (%s), the run "
                         "was trained on %.0f bytes (%.40s) from %.200s",
                         path ? path : "the data", (unsigned long long)bytes, hex,
                         nb->valuedouble, hh->valuestring,
                         cJSON_IsString(dp) ? dp->valuestring : "(unrecorded)");
    }
    cJSON_Delete(o);
    return rc;
}

/* The data given to a restored run must be the data it was saved with. */
int ba_state_same_data(const ba_data_spec *saved, const ba_data_spec *now, char *err)
{
    if (saved->task != now->task)
        return ba_fail(err, BA_ERR_ARG, "the run was trained on %s data, not %s",
                       ba_task_name(saved->task), ba_task_name(now->task));
    if (saved->task == BA_TASK_CHARLM &&
        (saved->vocab_size != now->vocab_size ||
         memcmp(saved->vocab, now->vocab, (size_t)saved->vocab_size) != 0))
        return ba_fail(err, BA_ERR_ARG, "the data's vocabulary differs from the run's");
    if (saved->task == BA_TASK_BRACKETS &&
        (saved->kinds != now->kinds || saved->n_heldout != now->n_heldout ||
         saved->data_seed != now->data_seed))
        return ba_fail(err, BA_ERR_ARG,
                       "the brackets data (kinds %d, held out %d, seed %llu) differs from the "
                       "run's (kinds %d, held out %d, seed %llu)",
                       now->kinds, now->n_heldout, (unsigned long long)now->data_seed,
                       saved->kinds, saved->n_heldout, (unsigned long long)saved->data_seed);
    if (saved->task == BA_TASK_BRACKETS && saved->max_depth != now->max_depth)
        return ba_fail(err, BA_ERR_ARG,
                       "the brackets data's max_depth %d differs from the run's %d (0: no cap)",
                       now->max_depth, saved->max_depth);
    if (saved->task == BA_TASK_RECALL &&
        (saved->recall_vocab != now->recall_vocab || saved->pairs != now->pairs ||
         saved->n_heldout != now->n_heldout || saved->data_seed != now->data_seed))
        return ba_fail(err, BA_ERR_ARG,
                       "the recall data (vocabulary %d, pairs %d, held out %d, seed %llu) differs "
                       "from the run's (vocabulary %d, pairs %d, held out %d, seed %llu)",
                       now->recall_vocab, now->pairs, now->n_heldout,
                       (unsigned long long)now->data_seed, saved->recall_vocab, saved->pairs,
                       saved->n_heldout, (unsigned long long)saved->data_seed);
    return BA_OK;
}
