/* The approx subcommand (boltzattn-lab approx): approx.c parses the study
 * and runs the random cells; approx_measure.c measures the engines on an
 * instance (approx.c and approx_ckpt.c call it); approx_ckpt.c takes the
 * instances of a checkpoint (--ckpt) and merges its records. approx_doc.c
 * writes the document (declared in lab.h) with approx_train_doc.c and
 * approx_eval_doc.c; approx_read.c holds what those three share. */
#ifndef BA_LAB_APPROX_H
#define BA_LAB_APPROX_H

#include "grid.h"

#include <cjson/cJSON.h>

#define AX_MAX_LIST 32
#define AX_MAX_N 20 /* the exact oracle enumerates 2^n states per instance */

/* The random instances' field shifts (--bias). */
enum { BIAS_NONE, BIAS_LOGN, BIAS_2LOGN, NBIAS };

/* The study's settings (--ckpt: n, engines, window, instances, ap). */
typedef struct {
    int n[AX_MAX_LIST], nn;
    double a[AX_MAX_LIST];
    int na, bias[NBIAS], nb;
    ba_engine eng[8];
    int ne, window, K;
    uint64_t seed;
    ba_approx ap;
} ax_study;

/* One engine on one instance. */
typedef struct {
    double dw, kl, da; /* worst |dw_j|, KL(exact || approx) of the rows, worst |da_j| */
    double sweeps;     /* the last row's (NAN for band, which does not iterate) */
    int conv, first;   /* converged in the end, on the first try */
    int row;           /* 1: the counts are the last row's alone */
} ax_inst;

/* A cell's summary over its instances. */
typedef struct {
    int K, rows;
    double dw_mean, dw_p95, kl_mean, kl_p95, da_mean, da_p95;
    double converged, first_try, sweeps_mean, sweeps_max;
    long unconverged, retried;
} ax_cell_sum;

/* Scratch of ax_measure for instances of up to n keys. */
typedef struct {
    double *hb, *lw, *hb2, *lw2, *le; /* (n,n) blocks at T = n and T = n-1, (n) exact */
} ax_work;

/* 1, or 0 out of memory (ax_work_free frees either way). */
int ax_work_init(ax_work *w, int n);
void ax_work_free(ax_work *w);
/* Engine e on one instance (fields h (n), couplings J (n,n)) against the
 * exact log-weights w->le. 0, or a library status with err. */
int ax_measure(const ax_study *s, ba_engine e, int n, const double *h, const double *J,
               ax_work *w, ax_inst *r, char *err);
/* v (K instances, stride apart) summarised; tmp holds K doubles. */
void ax_summarize(const ax_inst *v, int K, size_t stride, double *tmp, ax_cell_sum *c);
/* The summary's numbers into o (JSON keys lab/approx_doc.c reads). */
int ax_add_metrics(cJSON *o, const ax_cell_sum *c);
/* The table's head, and a line per cell, on stdout. */
void ax_print_cell_head(void);
void ax_print_cell(ba_engine e, int n, const char *a, const char *bias, const ax_cell_sum *c);

/* approx_ckpt.c: a checkpoint's instances. */
typedef struct ax_ckpt ax_ckpt;

/* Opens --ckpt path: its model (exact inference where it can), couplings
 * and evaluation data; settles s's n, window and instances from it. 0 and
 * *k, or an exit code after printing (*k NULL). */
int ax_ckpt_open(const command *c, const char *path, ax_study *s, ax_ckpt **k);
void ax_ckpt_free(ax_ckpt *k);
/* The run's line on stdout, then every item, layer, head and n: the
 * records of each (engine, n) into recs. *check gets the largest
 * difference between the exact weights of the instances and the model's
 * own attention (NAN: not checked). 0 or an exit code. */
int ax_ckpt_run(const command *c, const ax_study *s, ax_ckpt *k, const char *path,
                const char *label, cJSON *recs, double *check);
/* The label of a checkpoint: its directory's name for DIR/model.safetensors,
 * else its file name without the extension. */
void ax_ckpt_label(const char *path, char *buf, size_t len);
/* The checkpoint's records (*fresh, each given label, path and a copy of
 * set) into rec's "checkpoints", replacing those of the same label, engine
 * and n. Takes *fresh's items. 0 or an exit code. */
int ax_ckpt_merge(const command *c, cJSON *rec, cJSON **fresh, const cJSON *set,
                  const char *path, const char *label);

/* approx_read.c's checked reading of a JSON field (for approx_doc.c and
 * the document's other parts): a message naming the
 * file and the field ("field cells[3].n is missing or malformed") and
 * exit 2 for one that is missing, of another type or out of [lo, hi]
 * (null reads as NAN where nullable); 0 otherwise. */
typedef struct {
    const command *c;
    const char *path;
    char where[96]; /* "cells[3]." or "" */
} ax_reader;
int ax_bad(const ax_reader *r, const char *key);
int ax_rd_num(const ax_reader *r, const cJSON *o, const char *key, double lo, double hi,
              int nullable, double *out);
int ax_rd_int(const ax_reader *r, const cJSON *o, const char *key, int lo, int hi, int *out);
int ax_rd_str(const ax_reader *r, const cJSON *o, const char *key, char *buf, size_t len);

/* The preset's approximate engines (mf, tap, bp, hybrid): the tables give
 * each a row, said to be missing where there is no data. ax_plan_index:
 * an engine name's index among them, or AX_NPLAN. */
#define AX_NPLAN 4
extern const ba_engine ax_planned[AX_NPLAN];
int ax_plan_index(const char *engine);
/* A paired change in % (mean and 95 % interval from two pairs) as a
 * table cell; none where n is 0. */
void ax_change_cell(FILE *f, const double *d, int n, const char *none);

/* approx_eval_doc.c: a grid's engines.json as a table. ax_evals_read
 * reads path's entries at block size T (*e NULL when there is no file): 0
 * or an exit code after printing (a damaged file: 2). */
typedef struct ax_evals ax_evals;
int ax_evals_read(const command *c, const char *path, int T, ax_evals **e);
void ax_evals_table(FILE *f, const ax_evals *e);
void ax_evals_free(ax_evals *e);

/* approx_train_doc.c: the document's sections on training with the
 * engines, from the grids (ablate) in a directory. */
typedef struct ax_train ax_train;
/* Reads the charlm grids of from (by their records: boltzmann arms with
 * exact inference, trained with an engine), the exact-trained runs they
 * pair with by seed (from's own exact grids at a T, else those of the
 * grids in exact_from), and the engines.json of from's exact grids. *t
 * NULL when from holds no such grid. 0 or an exit code after printing
 * (a damaged grid record or engines.json: 2). */
int ax_train_read(const command *c, const char *from, const char *exact_from, ax_train **t);
/* The sections "Training with each engine" and "Exact-trained models
 * evaluated with each engine". */
void ax_train_write(FILE *f, const ax_train *t);
void ax_train_free(ax_train *t);

#endif
