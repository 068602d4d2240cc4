/*
 * boltzattn: the training layer. Included by boltzattn.h, so programs
 * include that one; this file only keeps the public header readable by
 * responsibility (the model, engines, samplers and files there; the
 * training loop, its settings, records and run records here).
 */
#ifndef BOLTZATTN_TRAIN_H
#define BOLTZATTN_TRAIN_H

#include "boltzattn.h"

#include <stdint.h>

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------- training
 * One training loop for every caller (the command-line tool, the
 * benchmarks, the tests, your program): a ba_trainer owns a run's whole
 * state (model, AdamW moments, step, the batch and sampler RNG streams,
 * the settings), steps it, evaluates it, saves and restores it exactly,
 * and hands typed records to a callback. With a run directory it also
 * keeps the run's files (docs/internals.md, "Run directories"):
 *   model.safetensors   the checkpoint of the last save point;
 *   state.safetensors   the resumable state of the same step (checksummed);
 *   metrics.jsonl       one JSON record a line (ba_record);
 *   run.json            the run record: settings, status and result.
 * Everything is written atomically (ba_write_file), the log a line at a
 * time. The same seed, build and thread count give bit-identical runs,
 * resumed or not. */

typedef struct {
    long steps;         /* optimisation steps of the whole run */
    long warmup;        /* linear warmup steps, then cosine decay */
    int batch;          /* sequences per step */
    double lr;          /* peak learning rate */
    double min_lr_frac; /* final learning rate as a fraction of lr */
    double j_init_std;  /* std of the initial couplings J (0: J = 0) */
    double init_std;    /* std of the initial embeddings and weight matrices
                           (GPT-2's 0.02; residual projections that over
                           sqrt(2 layers)) */
    uint64_t seed;      /* the weights, the batch stream and the sampler
                           stream are all derived from it */
    ba_adamw opt;
    int eval_every;     /* periodic evaluation every N steps; 0: only the final one */
    int eval_items;     /* evenly spaced items of a periodic evaluation (the
                           final evaluation uses all) */
    int log_every;      /* a train record every N steps */
    int save_every;     /* a save point every N steps; 0: only at the end */
} ba_train_settings;

/* The command line's defaults for a run of `steps` steps: batch 32, lr
 * 3e-3 down to 10 %, warmup 5 % of the steps, weights N(0, 0.02) and J = 0
 * at start, seed 1,
 * ba_adamw_default, an evaluation of 512 items and a save point every 10 %
 * of the steps, a train record every 10 steps. */
ba_train_settings ba_train_settings_default(long steps);
/* BA_OK when every setting is in range (steps >= 1, warmup <= steps, ...),
 * else BA_ERR_ARG naming the field and its value. */
int ba_train_settings_validate(const ba_train_settings *s, char *err);
/* The settings as a JSON object string (malloc'd), with the charlm data
 * path (may be NULL) and the thread count the run uses, and back: data
 * (may be NULL) gets a malloc'd copy of the recorded path or NULL. The
 * reader validates (BA_ERR_FORMAT naming the field). */
char *ba_train_settings_to_json(const ba_train_settings *s, const char *data_path);
int ba_train_settings_from_json(const char *json, ba_train_settings *s, char **data_path,
                                char *err);

/* One record of a run, as the loop hands it to ba_train_hooks.record and
 * writes it to metrics.jsonl ({"event": "train", "step": ..., ...}). Only
 * the fields of its kind are meaningful. */
typedef enum {
    BA_REC_CONFIG,  /* the run starts: config, settings, parameter count */
    BA_REC_RESUME,  /* a restored run continues at step */
    BA_REC_TRAIN,   /* every log_every steps and at the last step */
    BA_REC_EVAL,    /* a periodic evaluation */
    BA_REC_QUALITY, /* a sampled model's sampler measured (see below) */
    BA_REC_FINAL    /* the end: evaluation on the whole set */
} ba_record_kind;

typedef struct {
    ba_record_kind kind;
    long step;              /* steps taken when the record was made */
    size_t params;          /* config: the model's parameter count */
    /* train */
    double loss, lr, grad_norm;
    double steps_per_s;     /* train: this call's rate; final: its mean */
    double elapsed_s;       /* train: seconds since this call began */
    /* eval, final: with the model's sampler */
    ba_eval_result eval;
    /* final */
    int has_exact;          /* a sampled model also evaluated exactly: */
    ba_eval_result exact;
    double train_s;         /* the training time of this call */
    double train_s_total;   /* the same over every call that trained the run */
    /* quality: the sampler against the exact distribution on the systems
     * the model meets (the last query of n = min(T, 8) keys of the first
     * `instances` evaluation items, layer 0, head 0), means over them.
     * kl is INFINITY where the exact distribution underflows on a state
     * the sampler reached; beta_eff, r2, tv_eff are the means over the
     * `fitted` instances with a temperature fit (NAN when none).
     * tv_shot_floor: the direct sampler's tv with the same `shots`, the
     * shot noise alone (shots 0: none, DQA's output is exact). */
    int n, instances, fitted, shots;
    double tv, kl, beta_eff, r2, tv_eff, tv_shot_floor;
    /* train and eval of a model with an approximate engine (has_approx):
     * the engines' counts over the steps since the previous train record
     * (forwards and backwards), or over the evaluation's forwards; in the
     * log as "approx": {"rows", "sweeps_mean", "sweeps_max", "retried",
     * "unconverged"} */
    int has_approx;
    ba_approx_stats approx;
} ba_record;

/* A record as one line of JSON without the newline (malloc'd; NULL when
 * out of memory), and back (BA_ERR_FORMAT naming the field). A config
 * record parses with only its kind set. */
char *ba_record_to_json(const ba_record *r);
int ba_record_from_json(const char *line, ba_record *r, char *err);

typedef struct ba_trainer ba_trainer;

/* A fresh run of a model of cfg on data with settings s. cfg must match
 * the data (ba_config_set_data, ba_data_spec_check); the weights are
 * initialised from s->seed (ba_model_init_weights with j_init_std), the
 * batch and sampler streams seeded from it too. data must outlive the
 * trainer. data_path (may be NULL) is the charlm file, recorded with the
 * run. *out is the caller's: ba_trainer_free. BA_ERR_ARG/LIMIT naming the
 * bad setting or field, BA_ERR_NOMEM. */
int ba_trainer_init(ba_trainer **out, const ba_config *cfg, const ba_dataset *data,
                    const char *data_path, const ba_train_settings *s, char *err);
/* The description of a saved state (DIR/state.safetensors) without
 * building a trainer: config, data description, settings and the recorded
 * data path (malloc'd or NULL), so the caller can open the data first. Any
 * output may be NULL. */
int ba_trainer_peek(const char *state_path, ba_config *cfg, ba_data_spec *spec,
                    ba_train_settings *s, char **data_path, char *err);
/* Restores a saved run exactly: parameters, AdamW moments, step, both RNG
 * streams, settings and training time. data must match the saved data
 * description (BA_ERR_ARG naming the difference); data_path replaces the
 * recorded one when not NULL. Every value is validated as on the command
 * line; a corrupt file is BA_ERR_FORMAT naming the field. */
int ba_trainer_restore(ba_trainer **out, const char *state_path, const ba_dataset *data,
                       const char *data_path, char *err);
void ba_trainer_free(ba_trainer *t);

ba_model *ba_trainer_model(ba_trainer *t);
const ba_train_settings *ba_trainer_settings(const ba_trainer *t);
/* Steps taken (the model's AdamW step count). */
long ba_trainer_step_count(const ba_trainer *t);
/* The recorded charlm data path, or NULL. Owned by the trainer. */
const char *ba_trainer_data_path(const ba_trainer *t);
/* The trainer's data and its description. */
const ba_dataset *ba_trainer_dataset(const ba_trainer *t);
void ba_trainer_data_spec(const ba_trainer *t, ba_data_spec *spec);

/* One optimisation step: the next batch of the batch stream, forward,
 * backward and AdamW at the scheduled rate. loss, lr and grad_norm (any
 * may be NULL) receive the step's values. BA_ERR_NUMERIC (model and
 * moments unchanged) naming the first non-finite tensor. */
int ba_trainer_step(ba_trainer *t, double *loss, double *lr, double *grad_norm, char *err);
/* ba_evaluate of the trainer's model on its data, in batches of the
 * training batch size. A replica of a data-parallel run (see
 * ba_trainer_set_reducer) shares it with the others: every rank calls it. */
int ba_trainer_evaluate(ba_trainer *t, int max_items, ba_eval_result *r, char *err);
/* The quality record of a sampled model (see ba_record); BA_ERR_ARG for an
 * exact one. The training streams are not touched. */
int ba_trainer_quality(ba_trainer *t, ba_record *r, char *err);
/* The resumable state at path (atomically), and the checkpoint of the
 * model with its data description, step and settings. */
int ba_trainer_save_state(const ba_trainer *t, const char *path, char *err);
int ba_trainer_save_checkpoint(const ba_trainer *t, const char *path, char *err);

/* What the caller hears of ba_trainer_run, all optional (NULL). */
typedef struct {
    /* each record, in order, once it is in the log: non-zero fails the
     * run (err says why) */
    int (*record)(const ba_record *r, void *user, char *err);
    /* after every step, with a train record of it (logged or not) */
    void (*progress)(const ba_record *r, void *user);
    /* polled after every step and every batch of the final evaluation,
     * and inside a step by the attention layers (between heads) and the
     * engines (between queries), from OpenMP threads too: so it must only
     * read (a volatile sig_atomic_t a signal handler sets, say). Non-zero
     * asks the run to stop at a save point now: a step it interrupts is
     * abandoned, changing nothing (weights, moments, RNGs), and the run
     * saves the step before it, so a long step (T = 4096) stops within
     * about one query's time per thread and the resume redoes it
     * bit for bit */
    int (*stop)(void *user);
    void *user;
    /* during the final evaluation, after every batch: items done of total
     * (the final evaluation takes the whole set: seconds to minutes) */
    void (*eval_progress)(int done, int total, void *user);
} ba_train_hooks;

typedef struct {
    int stopped;          /* the stop hook ended the run early */
    long step;            /* steps taken in all */
    long steps_run;       /* steps taken by this call */
    long saved_step;      /* step of the run directory's last save point, -1 none */
    long failed_step;     /* a step that failed (its number), else 0 */
    ba_eval_result final; /* finished runs: the final evaluation */
    int has_exact;
    ba_eval_result exact;
    double train_s;       /* this call's training time (seconds) */
    double train_s_total; /* over every call that trained the run */
} ba_train_outcome;

/* Runs the trainer to its last step: the steps, a train record every
 * log_every steps, an evaluation (and for a sampled model a quality
 * record) every eval_every steps, a save point every save_every steps, and
 * at the end the last save point (the trained weights are on the disk
 * before anything else can fail), then the evaluation on the whole set (a
 * sampled model also with exact inference, when T is within the engine's
 * limit) and the final record. With dir (may be NULL: nothing is written)
 * every record goes to dir/metrics.jsonl first, and save points write the
 * checkpoint and the state; a restored trainer checks that the log is its
 * run's (the config and settings of its config record; BA_ERR_ARG naming
 * the first difference), trims the log back to its step and appends. A
 * run restored at its last step (stopped or killed in the final
 * evaluation, or finished) is evaluated again, its log's end records
 * replaced; whether a finished run should be is the caller's call (the CLI
 * refuses by run.json). On failure err names the phase ("step 12: ...",
 * "final evaluation: ...") and *out says how far the run got; the files
 * of the last save point stay as they were. BA_OK with out->stopped when
 * the stop hook ended it (after a save point, also during the final
 * evaluation). out may be NULL. */
int ba_trainer_run(ba_trainer *t, const char *dir, const ba_train_hooks *hooks,
                   ba_train_outcome *out, char *err);

/* ------------------------------------------------ data-parallel training
 * size trainers, one per rank (a process of an MPI job, say), built alike
 * (the same config, data and settings, or restored from the same state),
 * each told its rank with ba_trainer_set_reducer, train one model: every
 * step each draws the whole batch of the batch stream and takes its share,
 * sequences [rank B/size, (rank+1) B/size); the reducer sums the shares'
 * gradients (weighted by their targets), losses and engine counts in rank
 * order, and every rank applies the same AdamW update to the same sum, so
 * the replicas stay bit-identical (checked at every step through the
 * reducer's check value: a hash of each rank's parameters). The
 * evaluations of an exact model are split by batch over the ranks and
 * added back in batch order (the same numbers as one process); a sampled
 * model is evaluated whole on every rank. Stops (the stop hook) and
 * failures are agreed at every step: a rank that fails a step fails every
 * rank's step, naming it. Only rank 0 writes the run directory:
 * ba_trainer_run ignores dir on the others. Nothing of the rank is saved,
 * so a state resumes with any number of ranks. The library has no MPI in
 * it; the command-line tool's reducer (cli/mpi.c) is one over MPI, and
 * tests/test_parallel.c has one over threads. */
typedef struct {
    int rank, size; /* 0 <= rank < size */
    /* Sums x (n doubles) over the ranks into every rank's x, adding the
     * ranks' values in rank order (0, 1, ...), so the result does not
     * depend on timing; and checks that every rank passed the same
     * `check`. BA_OK, or non-zero with err saying what failed (the checks
     * differ: name the rank; communication). Called by every rank, the
     * same number of times with the same n. */
    int (*sum)(void *user, double *x, size_t n, uint64_t check, char *err);
    void *user;
} ba_reducer;

/* Makes t one replica of a data-parallel run (r is copied; r->user must
 * outlive t). The training batch must divide by r->size (BA_ERR_ARG
 * naming both). NULL or size 1: a single process again. */
int ba_trainer_set_reducer(ba_trainer *t, const ba_reducer *r, char *err);

/* Names the machine this process trains on (a line of printable text under
 * 256 bytes, copied), for the run record: run.json lists every machine a
 * run trained on, the earlier calls' (a resumed run's record) first, so
 * that its training time can be read against them. Unset: this call's
 * machine is not recorded. BA_ERR_ARG naming a bad machine. */
int ba_trainer_set_machine(ba_trainer *t, const char *machine, char *err);

/* A run directory's record, run.json: its settings and, when finished, its
 * result. */
typedef enum {
    BA_RUN_RUNNING = 0, /* started (or killed: nothing ended it) */
    BA_RUN_STOPPED,     /* stopped early at a save point; can resume */
    BA_RUN_FAILED,      /* a runtime failure; error says which */
    BA_RUN_FINISHED     /* every step taken and evaluated */
} ba_run_status;

typedef struct {
    ba_run_status status;
    ba_config config;
    ba_data_spec spec;
    ba_train_settings settings;
    char *data_path;   /* the charlm text, or NULL (malloc'd) */
    char *config_json; /* the config object as stored (malloc'd) */
    char *train_json;  /* the settings object as stored (malloc'd) */
    char *error;       /* failed: the message (malloc'd), else NULL */
    int threads;       /* OpenMP threads the run used (0: not recorded) */
    char **machines;   /* where it trained, first call first, each named once
                        * (malloc'd strings, e.g. "Intel(R) Xeon(R) Processor,
                        * 2 cores"); NULL with n_machines 0: not recorded */
    int n_machines;
    size_t params;
    long step;         /* steps taken (at the last save point) */
    double train_s;    /* training time over every call */
    /* finished: */
    ba_eval_result result;
    int has_exact;
    ba_eval_result exact;
} ba_run_info;

/* Reads dir/run.json. BA_ERR_IO when there is none, BA_ERR_FORMAT naming
 * the field of a malformed one. r is the caller's: ba_run_info_clear. */
int ba_run_read(const char *dir, ba_run_info *r, char *err);
/* Writes dir/run.json (atomically) from r: its status, step, training time,
 * parameter count, error, the stored config and train objects
 * (config_json, train_json: required) and, when finished, the result. The
 * training loop writes it; this is for tools that convert older records. */
int ba_run_write(const char *dir, const ba_run_info *r, char *err);
void ba_run_info_clear(ba_run_info *r);
const char *ba_run_status_name(ba_run_status s);

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
