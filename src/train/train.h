/* The training layer's private declarations (src/train/: tasks, the
 * trainer, evaluation, run states and records, data parallelism). Not
 * installed; it includes only the model layer's header (and through it
 * the layers below). */
#ifndef BA_TRAIN_H
#define BA_TRAIN_H

#include "model/model.h"

/* Appends a copy of m to the list (*v, *n) unless it is there already:
 * the machines of a run record. BA_OK or BA_ERR_NOMEM (list unchanged). */
int ba_machines_add(char ***v, int *n, const char *m);
void ba_machines_free(char **v, int n);

/* The files of a run (src/state.c, src/runfiles.c): the settings' JSON
 * object and its
 * reader (which also returns the recorded thread count, may be NULL), the
 * resumable state, a record's object (config records take ownership of
 * the config and settings objects), the log trimmed to a step (logged_s:
 * the training time its records show, each call's last elapsed_s summed). */
struct cJSON *ba_settings_json_object(const ba_train_settings *s, const char *data_path);
int ba_settings_from_object(const struct cJSON *o, ba_train_settings *s, char **data_path,
                            int *threads, char *err);
int ba_state_write(const char *path, ba_model *m, const ba_data_spec *spec, const char *train_json,
                   long step, const ba_rng *data_rng, double train_s, char *err);
/* A state file opened once (ba_st_free), checked to carry a state's
 * metadata; its description (outputs may be NULL; *data_path malloc'd or
 * NULL); its tensors, step, RNG streams and training time into m (train_s
 * -1 for a state written before the time was kept). */
int ba_state_open(const char *path, ba_st **st, char *err);
/* The quality record of a sampled model at step (src/evaluate.c; see
 * ba_trainer_quality). */
int ba_quality_record(ba_model *m, const ba_dataset *d, long step, ba_record *r, char *err);

/* One evaluation batch (src/evaluate.c): items start .. start+bs-1 of the
 * n evaluated (evenly spaced over the set when n < its size), through the
 * scratch in, tg (bs,T); the batch's loss times its targets, its targets
 * and its correct predictions. ba_evaluate_ex adds them up batch by
 * batch; a data-parallel evaluation (src/parallel.c) adds the ranks'
 * batches up in the same order, so both give the same numbers. */
typedef struct {
    double loss_sum;
    long targets, correct;
} ba_eval_part;
int ba_eval_check(const ba_model *m, const ba_dataset *d, int B, char *err);
int ba_eval_batch(ba_model *m, const ba_dataset *d, int start, int bs, int n, int *in, int *tg,
                  ba_eval_part *p, char *err);
void ba_eval_result_set(ba_eval_result *res, int items, double loss_sum, long targets,
                        long correct);

/* ------------------------------------------- data parallel (src/parallel.c)
 * The pieces of a replica's step and evaluations that meet the other
 * ranks (ba_reducer, boltzattn_train.h). Each is called by every rank in
 * the same order; buf is the trainer's scratch of ba_par_buf_len(P, size)
 * doubles. */
size_t ba_par_buf_len(size_t nparams, int size);
/* After the local forward and backward of the rank's share (rc, why: their
 * status and message): every rank's gradients weighted by its targets,
 * summed and divided by all targets into the model's gradients, *loss the
 * loss over all targets, *st (the local counts in) every rank's engine
 * counts in rank order. A rank that failed fails every rank: the lowest
 * such rank's status, with its message on that rank and "rank r failed"
 * on the others. */
int ba_par_grads(const ba_reducer *r, ba_model *m, double *buf, int rc, const char *why,
                 double *loss, ba_approx_stats *st, char *err);
/* *any = whether some rank passed flag != 0. */
int ba_par_any(const ba_reducer *r, double *buf, int flag, int *any, char *err);
/* Every rank's counts in rank order into *st. */
int ba_par_stats(const ba_reducer *r, double *buf, ba_approx_stats *st, char *err);
/* ba_evaluate_ex over the ranks: batch k of B items on rank k mod size,
 * added up in batch order; a stop asked by the tick of any rank ends it
 * after the round (*stopped). Exact models only: a sampled one's shots
 * follow the batch order of one process (ba_evaluate_ex on every rank). */
int ba_par_evaluate(const ba_reducer *r, double *buf, ba_model *m, const ba_dataset *d,
                    int max_items, int B, int (*tick)(int done, int total, void *user),
                    void *user, ba_eval_result *res, int *stopped, char *err);

int ba_state_describe(const ba_st *st, ba_config *cfg, ba_data_spec *spec,
                      ba_train_settings *s, char **data_path, char *err);
int ba_state_read_into(const ba_st *st, ba_model *m, long *step, ba_rng *data_rng,
                       double *train_s, char *err);
/* The data a restored run is given against the one it was saved with
 * (src/train/state.c): the task and its description (same_data; BA_ERR_ARG
 * naming the difference), and for charlm the text itself by the size and
 * hash its settings recorded (same_text; path names the data in the
 * message). ba_text_fingerprint: a text's size, and its "fnv1a64:<hex>"
 * hash into hash, as the settings record them. */
int ba_state_same_data(const ba_data_spec *saved, const ba_data_spec *now, char *err);
int ba_state_same_text(const ba_st *st, const ba_dataset *data, const char *path, char *err);
uint64_t ba_text_fingerprint(const ba_dataset *d, char hash[32]);
struct cJSON *ba_record_object(const ba_record *r, struct cJSON *config, struct cJSON *train);
/* Trims metrics.jsonl (a missing log is an empty one) to the records up to
 * step (dropping what a killed call logged after its last save, and a
 * torn last line), atomically; with drop_end also the final and quality
 * records of step (a run resumed at its last step makes them again). The
 * file is read once; check (may be NULL) sees its first config record's
 * line (NULL if none) before anything is written, and a non-zero return
 * (err set) leaves the log untouched. *logged_s: the training time the kept
 * records account for. */
typedef int (*ba_log_check)(const char *config_line, void *user, char *err);
int ba_log_trim(const char *path, long step, int drop_end, ba_log_check check, void *user,
                double *logged_s, char *err);
/* BA_OK when the config record line of logpath's log describes the run of
 * mine, mine_spec and the settings JSON mine_train (threads and the data
 * path may differ: a resumed run may change both); else BA_ERR_ARG with a
 * message naming the first key that differs, or BA_ERR_FORMAT for a record
 * that cannot be read. */
int ba_log_same_run(const char *logpath, const char *config_line, const ba_config *mine,
                    const ba_data_spec *mine_spec, const char *mine_train, char *err);
/* The log opened for appending (truncated when fresh), never through a
 * symbolic link and only when it is a regular file; NULL with errno set
 * (ELOOP or EINVAL for a link or another kind of file). */
FILE *ba_log_open(const char *path, int fresh);


#endif
