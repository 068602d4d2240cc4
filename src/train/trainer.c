/* The trainer: a run's whole state (model, AdamW moments, step, the batch
 * and sampler streams, the settings), its one training step
 * (ba_trainer_step: the data flow of a step in one place) and the one
 * training loop every caller drives (ba_trainer_run). The evaluations and
 * the sampler-quality measurement it records are src/train/evaluate.c's;
 * its files src/train/runfiles.c's and state.c's; the ranks' reductions
 * src/train/parallel.c's. */
#include "train/train.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The streams of a seed: initialisation (the seed itself), batches and
 * shots. Batches come from their own stream, so the data order for a seed
 * is the same for every variant and model size; the sampled attention's
 * shots from a third, so a sampled run has the initialisation and data
 * order of the exact one. */
#define DATA_STREAM 0x5eedda7a5eedda7aULL
#define SAMPLER_STREAM 0x5a3b1e5a3b1e0001ULL

struct ba_trainer {
    ba_model *m;
    const ba_dataset *data;
    ba_data_spec spec;   /* of data, for checkpoints */
    ba_train_settings s;
    ba_rng data_rng;     /* the batch stream */
    char *data_path;     /* recorded charlm file, or NULL */
    char *train_json;    /* the settings as recorded (with data path and threads) */
    double prior_s;      /* training time of earlier calls; -1: a state that did not keep it */
    int restored;        /* continues a saved run: its log is trimmed and appended */
    int *in, *tg;        /* (B,T) the batch buffers */
    ba_approx_stats approx; /* approximate engines' counts since the last train record */
    ba_reducer red;      /* a replica of a data-parallel run when red.size > 1 */
    double *rbuf;        /* (ba_par_buf_len) the reducer's buffer */
    char *machine;       /* this process's machine (ba_trainer_set_machine), or NULL */
    char **machines;     /* the run record's list: earlier calls' first */
    int n_machines, machines_read;
};

static int parallel(const ba_trainer *t) { return t->red.size > 1; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The loop's evaluations go in batches of the training batch: a run that
 * could take its steps has the memory for them. */
/* A replica evaluates an exact model's batches in turn with the others
 * (*stopped: whether a tick of any rank asked to stop); a sampled model's
 * shots follow one process's batch order, so it is evaluated whole on
 * every rank (*stopped -1: only the ticks know, the caller agrees). */
static int trainer_eval(ba_trainer *t, int max_items, int (*tick)(int, int, void *), void *user,
                        ba_eval_result *r, int *stopped, char *err)
{
    *stopped = -1;
    if (parallel(t) && ba_model_config(t->m)->sampler.kind == BA_SAMPLER_EXACT)
        return ba_par_evaluate(&t->red, t->rbuf, t->m, t->data, max_items, t->s.batch, tick,
                               user, r, stopped, err);
    return ba_evaluate_ex(t->m, t->data, max_items, t->s.batch, tick, user, r, err);
}

int ba_trainer_evaluate(ba_trainer *t, int max_items, ba_eval_result *r, char *err)
{
    int stopped;
    return trainer_eval(t, max_items, NULL, NULL, r, &stopped, err);
}

int ba_trainer_set_reducer(ba_trainer *t, const ba_reducer *r, char *err)
{
    if (!t)
        return ba_fail(err, BA_ERR_ARG, "ba_trainer_set_reducer: the trainer is NULL");
    if (!r || r->size == 1) {
        free(t->rbuf);
        t->rbuf = NULL;
        memset(&t->red, 0, sizeof t->red);
        return BA_OK;
    }
    if (r->size < 1 || r->rank < 0 || r->rank >= r->size)
        return ba_fail(err, BA_ERR_ARG, "reducer: rank %d of size %d (need 0 <= rank < size)",
                       r->rank, r->size);
    if (!r->sum)
        return ba_fail(err, BA_ERR_ARG, "reducer: the sum function is NULL");
    if (t->s.batch % r->size != 0)
        return ba_fail(err, BA_ERR_ARG, "the batch of %d sequences does not divide among %d "
                       "ranks (choose a batch that is a multiple of the rank count)",
                       t->s.batch, r->size);
    double *buf = malloc(sizeof(double) * ba_par_buf_len(ba_model_num_params(t->m), r->size));
    if (!buf)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the reduction buffer");
    free(t->rbuf);
    t->rbuf = buf;
    t->red = *r;
    return BA_OK;
}

static int final_tick(int done, int total, void *user);

/* A sampled model, evaluated again with exact inference (c: the final
 * evaluation's run, for its tick). */
static int final_eval(void *c, ba_eval_result *r, char *err);
static int evaluate_exact(ba_trainer *t, ba_eval_result *r, void *c, char *err)
{
    ba_sampler exact = ba_sampler_default(BA_SAMPLER_EXACT), own = ba_model_config(t->m)->sampler;
    int rc = ba_model_set_sampler(t->m, &exact, err);
    if (rc == BA_OK) {
        rc = final_eval(c, r, err);
        char why[BA_ERR_LEN];
        int rc2 = ba_model_set_sampler(t->m, &own, why);
        if (rc == BA_OK && rc2)
            rc = ba_fail(err, rc2, "%s", why);
    }
    return rc;
}

int ba_trainer_quality(ba_trainer *t, ba_record *r, char *err)
{
    return ba_quality_record(t->m, t->data, ba_model_step_count(t->m), r, err);
}

/* -------------------------------------------------------- the trainer */

static int trainer_alloc(ba_trainer **out, const ba_config *cfg, const ba_dataset *data,
                         const ba_train_settings *s, char *err)
{
    *out = NULL;
    int rc = ba_train_settings_validate(s, err);
    if (rc)
        return rc;
    if (ba_dataset_block_size(data) != cfg->block_size)
        return ba_fail(err, BA_ERR_ARG, "the data has T = %d but the model T = %d",
                       ba_dataset_block_size(data), cfg->block_size);
    ba_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate a trainer");
    t->data = data;
    t->s = *s;
    ba_dataset_spec(data, &t->spec);
    size_t bt = (size_t)s->batch * cfg->block_size;
    t->in = malloc(sizeof(int) * bt);
    t->tg = malloc(sizeof(int) * bt);
    if (!t->in || !t->tg)
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate a batch of %d sequences", s->batch);
    if (rc == BA_OK)
        rc = ba_data_spec_check(&t->spec, cfg, err);
    if (rc == BA_OK)
        rc = ba_model_init(&t->m, cfg, err);
    if (rc) {
        ba_trainer_free(t);
        return rc;
    }
    *out = t;
    return BA_OK;
}

/* The settings as recorded in checkpoints and states: with the data path
 * (charlm only) and the thread count of this process. */
static int set_data_path(ba_trainer *t, const char *path, char *err)
{
    char *p = path && t->spec.task == BA_TASK_CHARLM ? strdup(path) : NULL;
    if (path && t->spec.task == BA_TASK_CHARLM && !p)
        return ba_fail(err, BA_ERR_NOMEM, "out of memory");
    free(t->data_path);
    t->data_path = p;
    free(t->train_json);
    t->train_json = NULL;
    cJSON *o = ba_settings_json_object(&t->s, p);
    char hex[32];
    uint64_t bytes = ba_text_fingerprint(t->data, hex);
    int ok = o && (t->spec.task != BA_TASK_CHARLM ||
                   (cJSON_AddNumberToObject(o, "data_bytes", (double)bytes) &&
                    cJSON_AddStringToObject(o, "data_hash", hex)));
    t->train_json = ok ? ba_json_own(cJSON_PrintUnformatted(o)) : NULL;
    cJSON_Delete(o);
    if (!t->train_json)
        return ba_fail(err, BA_ERR_NOMEM, "out of memory");
    return BA_OK;
}

int ba_trainer_init(ba_trainer **out, const ba_config *cfg, const ba_dataset *data,
                    const char *data_path, const ba_train_settings *s, char *err)
{
    if (!out || !cfg || !data || !s)
        return ba_fail(err, BA_ERR_ARG, "ba_trainer_init: out, cfg, data and s must not be NULL");
    ba_trainer *t;
    int rc = trainer_alloc(&t, cfg, data, s, err);
    if (rc)
        return rc;
    ba_rng rng;
    ba_rng_seed(&rng, s->seed);
    ba_model_init_weights_std(t->m, &rng, s->init_std, s->j_init_std);
    ba_rng_seed(&t->data_rng, s->seed ^ DATA_STREAM);
    ba_rng_seed(ba_model_sampler_rng(t->m), s->seed ^ SAMPLER_STREAM);
    if ((rc = set_data_path(t, data_path, err))) {
        ba_trainer_free(t);
        return rc;
    }
    *out = t;
    return BA_OK;
}

int ba_trainer_restore(ba_trainer **out, const char *path, const ba_dataset *data,
                       const char *data_path, char *err)
{
    if (!out || !path || !data)
        return ba_fail(err, BA_ERR_ARG, "ba_trainer_restore: out, path and data must not be NULL");
    *out = NULL;
    ba_config cfg;
    ba_data_spec spec, now;
    ba_train_settings s;
    char *saved_path = NULL;
    ba_st *st = NULL; /* read once: description, then tensors */
    int rc = ba_state_open(path, &st, err);
    if (rc == BA_OK)
        rc = ba_state_describe(st, &cfg, &spec, &s, &saved_path, err);
    ba_dataset_spec(data, &now);
    if (rc == BA_OK)
        rc = ba_state_same_data(&spec, &now, err);
    if (rc == BA_OK)
        rc = ba_state_same_text(st, data, data_path ? data_path : saved_path, err);
    ba_trainer *t = NULL;
    if (rc == BA_OK)
        rc = trainer_alloc(&t, &cfg, data, &s, err);
    long step = 0;
    if (rc == BA_OK)
        rc = ba_state_read_into(st, t->m, &step, &t->data_rng, &t->prior_s, err);
    ba_st_free(st);
    if (rc == BA_OK && step > s.steps)
        rc = ba_fail(err, BA_ERR_FORMAT, "the saved step %ld is beyond the run's %ld steps", step,
                     s.steps);
    if (rc == BA_OK)
        rc = set_data_path(t, data_path ? data_path : saved_path, err);
    free(saved_path);
    if (rc) {
        ba_trainer_free(t);
        return rc;
    }
    t->restored = 1;
    *out = t;
    return BA_OK;
}

void ba_trainer_free(ba_trainer *t)
{
    if (!t)
        return;
    ba_model_free(t->m);
    free(t->data_path);
    free(t->train_json);
    free(t->in);
    free(t->tg);
    free(t->rbuf);
    free(t->machine);
    ba_machines_free(t->machines, t->n_machines);
    free(t);
}

int ba_trainer_set_machine(ba_trainer *t, const char *machine, char *err)
{
    if (!t || !machine)
        return ba_fail(err, BA_ERR_ARG, "ba_trainer_set_machine: t and machine must not be NULL");
    size_t len = strlen(machine);
    if (len == 0 || len >= 256)
        return ba_fail(err, BA_ERR_ARG, "machine: %zu bytes; give 1 to 255", len);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)machine[i] < 32 || machine[i] == 127)
            return ba_fail(err, BA_ERR_ARG, "machine: control character at byte %zu", i);
    char *m = strdup(machine);
    if (!m)
        return ba_fail(err, BA_ERR_NOMEM, "out of memory");
    free(t->machine);
    t->machine = m;
    return BA_OK;
}

/* The run record's machines: a restored run's recorded ones (read once;
 * a record that cannot be read, say one of an older layout, adds none)
 * and this call's. */
static int note_machine(ba_trainer *t, const char *dir, char *err)
{
    if (!t->machines_read && t->restored) {
        ba_run_info prev;
        if (ba_run_read(dir, &prev, NULL) == BA_OK) {
            t->machines = prev.machines, t->n_machines = prev.n_machines;
            prev.machines = NULL, prev.n_machines = 0;
        }
        ba_run_info_clear(&prev);
    }
    t->machines_read = 1;
    if (t->machine && ba_machines_add(&t->machines, &t->n_machines, t->machine))
        return ba_fail(err, BA_ERR_NOMEM, "out of memory");
    return BA_OK;
}

ba_model *ba_trainer_model(ba_trainer *t) { return t->m; }
const ba_train_settings *ba_trainer_settings(const ba_trainer *t) { return &t->s; }
long ba_trainer_step_count(const ba_trainer *t) { return ba_model_step_count(t->m); }
const char *ba_trainer_data_path(const ba_trainer *t) { return t->data_path; }
const ba_dataset *ba_trainer_dataset(const ba_trainer *t) { return t->data; }
void ba_trainer_data_spec(const ba_trainer *t, ba_data_spec *spec) { *spec = t->spec; }

/* One step, top to bottom as llm.c's train_gpt2.c reads: the rate, the
 * batch, forward (with the loss), zeroed gradients, backward, the ranks'
 * reduction, the gradient check and clip, the AdamW update, and the step's
 * statistics; one_step below makes its log record. An error does not stop
 * the sequence before the reduction, which every rank of a data-parallel
 * run must reach to fail together. */
int ba_trainer_step(ba_trainer *t, double *loss, double *lr, double *grad_norm, char *err)
{
    const ba_train_settings *s = &t->s;
    ba_model *m = t->m;
    int T = ba_model_config(m)->block_size;
    double l = NAN, gn = NAN;
    char why[BA_ERR_LEN] = "";
    /* the learning rate: linear warmup, then cosine decay to min_lr_frac */
    double rate = ba_lr_schedule(ba_model_step_count(m), s->steps, s->warmup, s->lr,
                                 s->lr * s->min_lr_frac);
    /* the RNGs as they were, for a step a stop request ends: it then
     * changes nothing, and the run saved after it resumes to the same
     * step (the same batch, the same shots) */
    ba_rng data0 = t->data_rng, shots0 = *ba_model_sampler_rng(m);
    /* the batch: every replica draws the whole batch (the stream stays one)
     * and takes its share, sequences b0 .. b0 + bs - 1 */
    ba_dataset_train_batch(t->data, &t->data_rng, s->batch, t->in, t->tg);
    int bs = s->batch / (parallel(t) ? t->red.size : 1);
    long b0 = (long)(parallel(t) ? t->red.rank : 0) * bs;
    const int *in = t->in + (size_t)b0 * T, *tg = t->tg + (size_t)b0 * T; // (bs,T)
    /* forward: the activations and the mean loss over the share's targets */
    int rc = ba_model_forward_share(m, in, tg, bs, T, b0, &l, why);
    /* zero the gradients the backward accumulates into: after the forward,
     * as llm.c does, where it measures a few per cent faster than before it
     * (the gradients are fresh in cache for the backward) */
    ba_model_zero_grad(m);
    /* backward: d(loss)/d(params) into the gradients */
    if (rc == BA_OK)
        rc = ba_model_backward(m, why);
    /* the approximate engines' counts of this forward and backward */
    ba_approx_stats st = ba_model_approx_stats_take(m);
    /* data parallel: every rank's gradients, loss and counts summed into
     * the whole batch's (a failed rank fails them all) */
    if (parallel(t))
        rc = ba_par_grads(&t->red, m, t->rbuf, rc, why, &l, &st, err);
    else if (rc)
        ba_fail(err, rc, "%s", why);
    /* stopped on request mid-step (every rank: the status is shared) */
    if (rc == BA_ERR_INTERRUPTED) {
        t->data_rng = data0;
        *ba_model_sampler_rng(m) = shots0;
        return rc;
    }
    /* gradient check: the global norm, refused when not finite */
    if (rc == BA_OK)
        rc = ba_model_grad_norm(m, &gn, err);
    /* the AdamW update of the gradients clipped to norm grad_clip; refused
     * (nothing changed) when a value would leave ba_real's range */
    if (rc == BA_OK)
        rc = ba_model_adamw_update(m, &s->opt, rate, ba_clip_scale(&s->opt, gn), err);
    /* the step's statistics: the engines' counts, until the next train
     * record takes them */
    ba_engine_stats_add(&t->approx, &st);
    if (loss)
        *loss = l;
    if (lr)
        *lr = rate;
    if (grad_norm)
        *grad_norm = gn;
    return rc;
}

/* The state of the trainer's current step, with the training time secs. */
static int write_state(const ba_trainer *t, const char *path, double secs, char *err)
{
    return ba_state_write(path, t->m, &t->spec, t->train_json, ba_model_step_count(t->m),
                          &t->data_rng, secs, err);
}

int ba_trainer_save_state(const ba_trainer *t, const char *path, char *err)
{
    return write_state(t, path, t->prior_s > 0 ? t->prior_s : 0, err);
}

int ba_trainer_save_checkpoint(const ba_trainer *t, const char *path, char *err)
{
    char stepbuf[32];
    snprintf(stepbuf, sizeof stepbuf, "%ld", ba_model_step_count(t->m));
    const char *keys[] = {"step", "train"};
    const char *vals[] = {stepbuf, t->train_json};
    return ba_checkpoint_save(path, t->m, &t->spec, keys, vals, 2, err);
}

/* ------------------------------------------------------------ the loop */

/* One call of ba_trainer_run: where it writes and how far it got. */
typedef struct {
    ba_trainer *t;
    const char *dir;
    const ba_train_hooks *h;
    FILE *log;          /* dir/metrics.jsonl, or NULL without a dir */
    char logpath[4200];
    double t0;          /* when this call's steps began */
    long start;         /* the step it began at */
    ba_train_outcome *out;
    int stopped;        /* the stop hook answered during the final evaluation */
} run_ctx;

/* The run's training time so far, earlier calls included. */
static double total_s(const run_ctx *c) { return c->t->prior_s + (now_s() - c->t0); }

/* A record into the log (when there is one), then to the caller. */
static int emit(run_ctx *c, const ba_record *r, char *err)
{
    if (c->log) {
        /* flushed record by record, so that a long run's log shows its
         * progress between evaluations (a resume trims the log back to its
         * save point anyway) */
        char *line = ba_record_to_json(r);
        int bad = !line || fputs(line, c->log) == EOF || fputc('\n', c->log) == EOF ||
                  fflush(c->log) != 0;
        free(line);
        if (bad)
            return ba_fail(err, BA_ERR_IO, "cannot write %.200s: %s", c->logpath,
                           strerror(errno));
    }
    if (c->h && c->h->record && c->h->record(r, c->h->user, err))
        return BA_ERR_ARG;
    return BA_OK;
}

/* run.json with the given status (the step and time of the last save). */
static int write_run(run_ctx *c, ba_run_status status, const ba_record *final, const char *error,
                     char *err)
{
    if (!c->dir)
        return BA_OK;
    ba_run_info r;
    memset(&r, 0, sizeof r);
    r.status = status;
    r.config_json = ba_config_to_json(ba_model_config(c->t->m), &c->t->spec);
    r.train_json = c->t->train_json;
    r.error = (char *)error;
    r.params = ba_model_num_params(c->t->m);
    r.step = c->out->saved_step > 0 ? c->out->saved_step : 0;
    r.train_s = c->out->train_s_total;
    r.machines = c->t->machines, r.n_machines = c->t->n_machines;
    if (final) {
        r.result = final->eval;
        r.has_exact = final->has_exact;
        r.exact = final->exact;
    }
    int rc = r.config_json ? ba_run_write(c->dir, &r, err) : ba_fail(err, BA_ERR_NOMEM, "out of memory");
    free(r.config_json);
    return rc;
}

/* A save point: the log on the disk first (a resumed run finds every
 * record up to the step it continues from), then the state, the
 * checkpoint and the run record of this step. */
static int save_point(run_ctx *c, char *err)
{
    if (!c->dir)
        return BA_OK;
    if (fflush(c->log) != 0 || fsync(fileno(c->log)) != 0)
        return ba_fail(err, BA_ERR_IO, "cannot write %.200s: %s", c->logpath, strerror(errno));
    ba_trainer *t = c->t;
    char path[4200];
    double secs = total_s(c);
    snprintf(path, sizeof path, "%s/state.safetensors", c->dir);
    int rc = write_state(t, path, secs, err);
    snprintf(path, sizeof path, "%s/model.safetensors", c->dir);
    if (rc == BA_OK)
        rc = ba_trainer_save_checkpoint(t, path, err);
    if (rc)
        return rc;
    c->out->saved_step = ba_model_step_count(t->m);
    c->out->train_s_total = secs;
    return write_run(c, BA_RUN_RUNNING, NULL, NULL, err);
}

/* ba_log_trim's check of a restored run's log (a log without a config
 * record is taken as it is). */
static int check_log(const char *config_line, void *user, char *err)
{
    const run_ctx *c = user;
    const ba_trainer *t = c->t;
    return config_line ? ba_log_same_run(c->logpath, config_line, ba_model_config(t->m), &t->spec,
                                         t->train_json, err)
                       : BA_OK;
}

/* Opens the log: a fresh run starts it with its config record; a restored
 * one checks that the log is its own, trims it back to the saved step (at
 * the last step also without the end's records, which the evaluation makes
 * again: the same numbers, and never two final records) and continues it
 * with a resume record. */
static int open_log(run_ctx *c, char *err)
{
    ba_trainer *t = c->t;
    if (snprintf(c->logpath, sizeof c->logpath, "%s/metrics.jsonl", c->dir) >=
        (int)sizeof c->logpath)
        return ba_fail(err, BA_ERR_ARG, "run directory path too long");
    double logged_s = 0;
    int rc;
    if (t->restored && (rc = ba_log_trim(c->logpath, c->start, c->start >= t->s.steps,
                                         check_log, c, &logged_s, err)))
        return rc;
    if (t->prior_s < 0)
        t->prior_s = logged_s; /* a state from before the count: the log's figure */
    c->out->train_s_total = t->prior_s;
    if (!(c->log = ba_log_open(c->logpath, !t->restored)))
        return ba_fail(err, BA_ERR_IO, "cannot write %.200s: %s", c->logpath,
                       errno == ELOOP || errno == EINVAL ? "not a regular file" : strerror(errno));
    ba_record r;
    memset(&r, 0, sizeof r);
    r.step = c->start;
    if (t->restored) {
        r.kind = BA_REC_RESUME;
        return emit(c, &r, err);
    }
    r.kind = BA_REC_CONFIG;
    r.params = ba_model_num_params(t->m);
    cJSON *o = ba_record_object(&r, ba_config_json_object(ba_model_config(t->m), &t->spec),
                                cJSON_Parse(t->train_json));
    char *line = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    int bad = !line || fputs(line, c->log) == EOF || fputc('\n', c->log) == EOF ||
              fflush(c->log) != 0;
    cJSON_free(line);
    if (bad)
        return ba_fail(err, BA_ERR_IO, "cannot write %.200s", c->logpath);
    if (c->h && c->h->record && c->h->record(&r, c->h->user, err))
        return BA_ERR_ARG;
    return write_run(c, BA_RUN_RUNNING, NULL, NULL, err);
}

/* The periodic evaluation after step `done`, and a sampled model's quality. */
static int periodic_eval(run_ctx *c, long done, char *err)
{
    ba_record r;
    memset(&r, 0, sizeof r);
    r.kind = BA_REC_EVAL;
    r.step = done;
    char why[BA_ERR_LEN];
    /* the evaluation's own counts, apart from the training steps' */
    ba_approx_stats st = ba_model_approx_stats_take(c->t->m);
    ba_engine_stats_add(&c->t->approx, &st);
    int rc = ba_trainer_evaluate(c->t, c->t->s.eval_items, &r.eval, why);
    if (rc == BA_ERR_INTERRUPTED) /* the step stands; the stop follows it */
        return BA_OK;
    if (rc)
        return ba_fail(err, rc, "evaluation at step %ld: %s", done, why);
    r.approx = ba_model_approx_stats_take(c->t->m);
    if (parallel(c->t) && (rc = ba_par_stats(&c->t->red, c->t->rbuf, &r.approx, why)))
        return ba_fail(err, rc, "evaluation at step %ld: %s", done, why);
    r.has_approx = ba_engine_is_approx(ba_config_engine(ba_model_config(c->t->m)));
    if ((rc = emit(c, &r, err)))
        return rc;
    if (ba_model_config(c->t->m)->sampler.kind != BA_SAMPLER_EXACT) {
        if ((rc = ba_trainer_quality(c->t, &r, why)))
            return ba_fail(err, rc, "sampler quality at step %ld: %s", done, why);
        if ((rc = emit(c, &r, err)))
            return rc;
    }
    return c->log && fflush(c->log) != 0 ? ba_fail(err, BA_ERR_IO, "cannot write %.200s",
                                                   c->logpath)
                                         : BA_OK;
}

/* One step and what follows it: its record, the progress hook, the
 * periodic evaluation and save point. *stop: the caller asked to stop. */
static int one_step(run_ctx *c, int *stop, char *err)
{
    ba_trainer *t = c->t;
    const ba_train_settings *s = &t->s;
    ba_record r;
    memset(&r, 0, sizeof r);
    r.kind = BA_REC_TRAIN;
    char why[BA_ERR_LEN];
    long done = ba_model_step_count(t->m) + 1;
    int rc = ba_trainer_step(t, &r.loss, &r.lr, &r.grad_norm, why);
    if (rc == BA_ERR_INTERRUPTED) { /* nothing changed: stop at the last step */
        *stop = 1;
        return BA_OK;
    }
    if (rc) {
        c->out->failed_step = done;
        return ba_fail(err, rc, "step %ld: %s", done, why);
    }
    double el = now_s() - c->t0;
    r.step = done;
    r.steps_per_s = (double)(done - c->start) / fmax(el, 1e-9);
    r.elapsed_s = el;
    if (done % s->log_every == 0 || done == s->steps) {
        r.has_approx = ba_engine_is_approx(ba_config_engine(ba_model_config(t->m)));
        r.approx = t->approx;
        memset(&t->approx, 0, sizeof t->approx);
        if ((rc = emit(c, &r, err)))
            return rc;
    }
    if (c->h && c->h->progress)
        c->h->progress(&r, c->h->user);
    if (s->eval_every > 0 && done % s->eval_every == 0 && done < s->steps &&
        (rc = periodic_eval(c, done, err)))
        return rc;
    if (s->save_every > 0 && done % s->save_every == 0 && done < s->steps &&
        (rc = save_point(c, err)))
        return rc;
    *stop = c->h && c->h->stop && c->h->stop(c->h->user);
    /* replicas stop together, at the same save point */
    if (parallel(t) && (rc = ba_par_any(&t->red, t->rbuf, *stop, stop, why)))
        return ba_fail(err, rc, "step %ld: %s", done, why);
    return BA_OK;
}

/* The final evaluation's tick: the caller's progress line and its stop. */
static int final_tick(int done, int total, void *user)
{
    run_ctx *c = user;
    if (c->h && c->h->eval_progress)
        c->h->eval_progress(done, total, c->h->user);
    c->stopped = c->h && c->h->stop && c->h->stop(c->h->user);
    return c->stopped;
}

/* The whole set, with the final tick; replicas agree on a stop. */
static int final_eval(void *user, ba_eval_result *r, char *err)
{
    run_ctx *c = user;
    int stopped;
    int rc = trainer_eval(c->t, 0, final_tick, c, r, &stopped, err);
    if (rc == BA_ERR_INTERRUPTED) { /* a stop inside a batch's forward */
        c->stopped = 1;
        return BA_OK;
    }
    if (rc == BA_OK && parallel(c->t)) {
        if (stopped < 0)
            rc = ba_par_any(&c->t->red, c->t->rbuf, c->stopped, &stopped, err);
        c->stopped = stopped;
    }
    return rc;
}

/* The end: the last save point first, so the trained weights are on the
 * disk whatever the evaluation meets (memory, a signal); then the
 * evaluation on the whole set (a sampled model also exactly, where the
 * engine reaches), its quality, the final record and the finished run
 * record. A stop during the evaluation leaves a run that resumes to it. */
static int finish(run_ctx *c, double train_s, char *err)
{
    ba_trainer *t = c->t;
    const ba_config *cfg = ba_model_config(t->m);
    int rc = save_point(c, err);
    if (rc)
        return rc;
    ba_record r;
    memset(&r, 0, sizeof r);
    r.kind = BA_REC_FINAL;
    r.step = ba_model_step_count(t->m);
    char why[BA_ERR_LEN];
    rc = final_eval(c, &r.eval, why);
    if (rc)
        return ba_fail(err, rc, "final evaluation: %s", why);
    int sampled = cfg->sampler.kind != BA_SAMPLER_EXACT;
    if (!c->stopped && sampled && ba_config_check_exact(cfg, NULL) == BA_OK) {
        if ((rc = evaluate_exact(t, &r.exact, c, why)))
            return ba_fail(err, rc, "final evaluation with exact inference: %s", why);
        r.has_exact = 1;
    }
    if (c->stopped)
        return BA_OK;
    if (sampled) {
        ba_record q;
        if ((rc = ba_trainer_quality(t, &q, why)))
            return ba_fail(err, rc, "sampler quality: %s", why);
        if ((rc = emit(c, &q, err)))
            return rc;
    }
    r.train_s = train_s;
    r.steps_per_s = (double)(r.step - c->start) / fmax(train_s, 1e-9);
    r.train_s_total = t->prior_s + train_s;
    if ((rc = emit(c, &r, err)))
        return rc;
    if (c->log && (fflush(c->log) != 0 || fsync(fileno(c->log)) != 0))
        return ba_fail(err, BA_ERR_IO, "cannot write %.200s: %s", c->logpath, strerror(errno));
    ba_train_outcome *o = c->out;
    o->final = r.eval;
    o->has_exact = r.has_exact;
    o->exact = r.exact;
    o->train_s = train_s;
    o->train_s_total = r.train_s_total;
    return write_run(c, BA_RUN_FINISHED, &r, NULL, err);
}

int ba_trainer_run(ba_trainer *t, const char *dir, const ba_train_hooks *hooks,
                   ba_train_outcome *out, char *err)
{
    ba_train_outcome local;
    if (!out)
        out = &local;
    memset(out, 0, sizeof *out);
    if (!t)
        return ba_fail(err, BA_ERR_ARG, "ba_trainer_run: the trainer is NULL");
    /* only rank 0 of a data-parallel run writes */
    if (parallel(t) && t->red.rank != 0)
        dir = NULL;
    run_ctx c = {t, dir, hooks, NULL, "", 0, ba_model_step_count(t->m), out, 0};
    /* the stop hook reaches inside the steps, for this call only */
    ba_stop halt = {hooks ? hooks->stop : NULL, hooks ? hooks->user : NULL};
    ba_model_set_stop(t->m, &halt);
    out->saved_step = dir && t->restored ? c.start : -1;
    out->step = c.start;
    int rc = dir ? note_machine(t, dir, err) : BA_OK;
    if (rc == BA_OK && dir)
        rc = open_log(&c, err);
    if (!dir && t->prior_s < 0)
        t->prior_s = 0;
    c.t0 = now_s();
    int stop = 0;
    while (rc == BA_OK && !stop && ba_model_step_count(t->m) < t->s.steps)
        rc = one_step(&c, &stop, err);
    out->step = ba_model_step_count(t->m);
    out->steps_run = out->step - c.start;
    /* the end saves before it evaluates; a stop there leaves the
     * evaluation to a resume */
    int ended = rc == BA_OK && !stop;
    if (ended)
        rc = finish(&c, now_s() - c.t0, err);
    if (rc == BA_OK && (stop || c.stopped)) {
        out->stopped = 1;
        out->train_s = now_s() - c.t0;
        if (!ended)
            rc = save_point(&c, err);
        if (rc == BA_OK)
            rc = write_run(&c, BA_RUN_STOPPED, NULL, NULL, err);
    }
    if (rc != BA_OK && c.log)
        write_run(&c, BA_RUN_FAILED, NULL, err, NULL);
    /* the time this call trained counts when the trainer runs again */
    t->prior_s += now_s() - c.t0;
    t->restored = 1;
    if (c.log && fclose(c.log) != 0 && rc == BA_OK)
        rc = ba_fail(err, BA_ERR_IO, "cannot write %.200s", c.logpath);
    ba_model_set_stop(t->m, NULL);
    return rc;
}
