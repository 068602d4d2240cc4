/* The approx subcommand in two halves: approx.c parses the study, measures
 * the engines on an instance and runs the random cells; approx_ckpt.c
 * takes the instances of a checkpoint (--ckpt) and merges its records.
 * approx_doc.c writes the document (declared in lab.h). */
#ifndef BA_LAB_APPROX_H
#define BA_LAB_APPROX_H

#include "lab.h"

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

#endif
