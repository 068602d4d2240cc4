/* Private declarations shared by the library's source files and its tests.
 * Not installed; the public API is include/boltzattn.h. */
#ifndef BA_INTERNAL_H
#define BA_INTERNAL_H

#include "boltzattn.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* OpenMP's team size and thread number, 1 and 0 without OpenMP. */
static inline int ba_nthreads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static inline int ba_thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Dense products are split by the library, not by OpenBLAS: the rows or
 * columns of the result go in blocks to OpenMP's threads (dynamic
 * schedule), each block one single-threaded BLAS call. The blocks depend
 * on the product's sizes and the machine's online CPUs, never on the
 * thread count, so on a given machine a product, and everything computed
 * from it, is the same on any number of threads: OpenBLAS's own split
 * follows the thread count, and its split and single-thread paths round
 * differently, which made runs differ between thread counts. The dynamic
 * schedule lets an idle thread take the blocks of one whose core is busy.
 *
 * A block is at least BA_BLAS_BLOCK_FLOP (a single-threaded call of 1
 * MFLOP takes 10-15 us here, well above the cost of handing it out) and
 * BA_BLAS_BLOCK_SPAN rows or columns (narrower ones run OpenBLAS's kernels
 * on ragged edges); products under two blocks run whole. There are at most
 * two blocks per online CPU: each block packs the whole other operand
 * again, and on the 2-core VM 16 blocks made the T = 20 engine 1-2 %
 * slower than OpenBLAS's split where 4 made it 3-6 % faster
 * (docs/performance.md, "Threads"). */
#ifndef BA_BLAS_BLOCK_FLOP /* overridable with -D for experiments */
#define BA_BLAS_BLOCK_FLOP 1e6
#endif
#ifndef BA_BLAS_BLOCK_SPAN
#define BA_BLAS_BLOCK_SPAN 16
#endif
#ifndef BA_BLAS_BLOCKS_PER_CPU
#define BA_BLAS_BLOCKS_PER_CPU 2
#endif

/* The blocks of a product of flops over span rows (or columns): nblk
 * blocks of bs, the last one shorter. */
typedef struct {
    int nblk, bs;
} ba_split;

static inline ba_split ba_split_plan(double flops, int span)
{
    ba_split p = {1, span};
    double n = flops / BA_BLAS_BLOCK_FLOP;
    int most = span / BA_BLAS_BLOCK_SPAN;
    if (n < 2 || most < 2)
        return p;
    /* the online CPUs, not the affinity mask or the thread count: the same
     * for every run on this machine (a file read, on products of 2 MFLOP
     * and more only) */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cpus = cpus > 0 ? cpus : 1;
    if (most > BA_BLAS_BLOCKS_PER_CPU * cpus)
        most = (int)(BA_BLAS_BLOCKS_PER_CPU * cpus);
    int nb = n < most ? (int)n : most;
    if (nb < 2)
        return p;
    /* whole multiples of the span step, so no block but the last is ragged */
    int bs = (span + nb - 1) / nb;
    bs = (bs + BA_BLAS_BLOCK_SPAN - 1) / BA_BLAS_BLOCK_SPAN * BA_BLAS_BLOCK_SPAN;
    p.bs = bs;
    p.nblk = (span + bs - 1) / bs;
    return p;
}

/* Brackets each BLAS call: ba_blas_serial() before, ba_blas_end(its value)
 * after. The OpenMP build of OpenBLAS (the one CMakeLists.txt links) takes
 * its thread count from omp_get_max_threads() at every call, so the
 * calling thread's OpenMP count goes to 1 for the call and back: a setting
 * of the calling task alone, left as it was found. */
static inline int ba_blas_serial(void)
{
#ifdef _OPENMP
    int nt = omp_get_max_threads();
    if (nt > 1) {
        omp_set_num_threads(1);
        return nt;
    }
#endif
    return 0;
}

static inline void ba_blas_end(int saved)
{
#ifdef _OPENMP
    if (saved > 0)
        omp_set_num_threads(saved);
#else
    (void)saved;
#endif
}

/* 64-bit FNV-1a of n bytes, continuing from h (start with BA_FNV_INIT):
 * the checkpoints' checksum. */
#define BA_FNV_INIT 0xcbf29ce484222325ULL
static inline uint64_t ba_fnv1a64(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

/* Overflow-checked size arithmetic: 0 on success, 1 on overflow. */
static inline int ba_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > (size_t)-1 / a)
        return 1;
    *out = a * b;
    return 0;
}

/* Index of the first non-finite value among x[0..n), or n. */
static inline size_t ba_first_nonfinite(const ba_real *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return i;
    return n;
}

/* ------------------------------------------------------- files, JSON */

/* ba_write_file for a file made of n consecutive parts. */
typedef struct {
    const void *data;
    size_t len;
} ba_file_part;
int ba_write_file_parts(const char *path, const ba_file_part *parts, int n, char *err);

struct cJSON;
/* JSON numbers go through double; integers below 2^53 are exact. */
#define BA_JSON_MAX_INT 9007199254740992.0
/* "a string", "a number", ... for messages; "nothing" for NULL. */
const char *ba_json_type(const struct cJSON *it);
/* 1 if it is a number holding an exact integer in [0, 2^53). */
int ba_json_u53(const struct cJSON *it, uint64_t *out);
/* The value for a message: the number, else its type. */
void ba_json_describe(const struct cJSON *it, char *buf, size_t cap);
/* Strict JSON, for files other programs read too (safetensors headers,
 * configs): ba_json_check_text refuses, before parsing, a leading UTF-8
 * BOM and a \u0000 escape (which cJSON would cut a string at), naming
 * the byte; ba_json_check_keys refuses a key repeated in any object at any
 * depth of a parsed value (cJSON would take the first, other readers the
 * last). BA_ERR_FORMAT with a message that starts with what. */
int ba_json_check_text(const char *txt, size_t len, const char *what, char *err);
int ba_json_check_keys(const struct cJSON *it, const char *what, char *err);
/* Parses len bytes of JSON text with both checks: the tree (cJSON_Delete),
 * or NULL with err set (BA_ERR_FORMAT naming what). */
struct cJSON *ba_json_parse_strict(const char *txt, size_t len, const char *what, char *err);
/* A string printed by cJSON moved into plain malloc memory (so the
 * caller's free() matches whatever allocator cJSON was given); NULL in,
 * NULL out. */
char *ba_json_own(char *s);
/* The config (and data description, may be NULL) as a new cJSON object,
 * and the reverse (as ba_config_from_json). */
struct cJSON *ba_config_json_object(const ba_config *cfg, const ba_data_spec *spec);
int ba_config_from_object(const struct cJSON *o, ba_config *cfg, ba_data_spec *spec, char *err);

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
/* The field bias subtracted from every field of a query that sees n keys:
 * (1/2) log n for log-n, else 0. The attention layer and ba_model_fields
 * share it, so the fields they report are the ones the engines see. */
static inline double ba_field_bias_value(ba_field_bias b, int n)
{
    return b == BA_FIELD_BIAS_LOG_N ? 0.5 * log((double)n) : 0.0;
}
/* A banded model with absolute couplings stores 0 beyond the band: a
 * loaded file holding anything else there is BA_ERR_FORMAT (what names the
 * file for the message). */
int ba_model_check_band(const ba_model *m, const char *what, char *err);
/* The first sequence of the model's next forwards in a whole batch they
 * are a share of (data-parallel training; 0 otherwise): a sampled model
 * draws a share's shots as one process would (ba_attn_shape.item0). */
void ba_model_set_item0(ba_model *m, long item0);
/* The forward's check of a batch's shape and tokens against the model of c
 * (ba_model_forward and ba_batch_check share it). */
int ba_inputs_check(const ba_config *c, const int *inputs, int B, int T, char *err);
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

/* Safetensors helpers for messages: "F32", and "[2, 3]". */
const char *ba_dtype_name(ba_dtype d);
void ba_format_shape(char *buf, size_t cap, int ndim, const int64_t *shape);

/* The kinds of parameter tensor, stacked across layers (all L ln1 weights
 * form one (L,C) array) in this order inside the model's block, and their
 * sizes for a valid config (src/config.c: the one definition of the
 * layout). */
enum {
    BA_P_TOK, BA_P_POS, BA_P_LN1W, BA_P_LN1B, BA_P_QKVW, BA_P_QKVB, BA_P_PROJW,
    BA_P_PROJB, BA_P_J, BA_P_LN2W, BA_P_LN2B, BA_P_FCW, BA_P_FCB, BA_P_FCPW,
    BA_P_FCPB, BA_P_LNFW, BA_P_LNFB, BA_P_HEADW, BA_P_HEADB, BA_NUM_P
};
void ba_param_sizes(const ba_config *c, size_t *sz);

/* A parallel region costs tens to hundreds of microseconds to start (more
 * on virtual machines), so loops run threaded only above this many
 * elementary operations. */
#define BA_PAR_MIN_WORK 2000000.0

/* x[i] = exp(x[i]) for x[i] <= 0, vectorised (a polynomial after range
 * reduction, within 2 ulp of libm's exp); results below DBL_MIN (x <
 * -708.39) are 0. The fast engine's exponentials; libm's exp is its twin in
 * the tests. */
void ba_exp_nonpos(double *x, size_t n);
/* x[i] = log1p(x[i]) for x[i] in [0, 1], vectorised (a series after
 * s = x / (2 + x)), within a few ulp of libm's log1p, its twin in the
 * tests. bp's messages. */
void ba_log1p_unit(double *x, size_t n);

/* Dense products in the model's precision. Row-major throughout. */
#ifdef BA_DOUBLE
#define BA_GEMM cblas_dgemm
#else
#define BA_GEMM cblas_sgemm
#endif

/* ---------------------------------------------------- engine, batched
 * All queries of one attention head. Row q = b*T + i of the (B,T,T) arrays
 * is query i of batch element b; it has n = i+1 spins (keys 0..i), so only
 * entries j <= i are read or written (logw gets -INFINITY above).
 * h (B,T,T) fields or NULL for h = 0; J (T,ldj) couplings, j < k used.
 * forward: logw (B,T,T) = log P_i(s_j = +1).
 * backward: g (B,T,T) = dL/dm; dh (B,T,T) += Cov(G, s_j) (may be NULL);
 * dJ (T,ldj) += sum over queries Cov(G, s_j s_k) (may be NULL). */
int ba_engine_forward(ba_engine e, int B, int T, const double *h, const double *J, int ldj,
                      double *logw, char *err);
int ba_engine_backward(ba_engine e, int B, int T, const double *h, const double *J, int ldj,
                       const double *g, double *dh, double *dJ, char *err);

/* The reference engine over every query of a head, with the layouts above
 * (src/ising_ref.c). */
int ba_ref_forward(int B, int T, const double *h, const double *J, int ldj, double *logw,
                   char *err);
int ba_ref_backward(int B, int T, const double *h, const double *J, int ldj, const double *g,
                    double *dh, double *dJ, char *err);

/* Reference enumeration of one query with caller workspace (2^n doubles):
 * marginals into logw (n), and the backward accumulating dh (n) and dJ
 * (rows of lddj). The oracle, and the fast engine's fallback. */
void ba_ref_marginals_ws(int n, const double *h, const double *J, int ldj, double *logw,
                         double *work);
void ba_ref_backward_ws(int n, const double *h, const double *J, int ldj, const double *g,
                        double *dh, double *dJ, int lddj, double *work);

/* An engine context keeps what a backward reuses from its forward (the fast
 * engine's kernels K' of every n, its products and trust flags) and keeps
 * buffers across calls. One per attention head of a model; NULL contexts
 * mean a stateless call. A backward on a context must follow the forward of
 * the same inputs on that context: only the shape (B,T) is checked (a
 * different shape recomputes the forward; different values of the same
 * shape would silently reuse the old kernels). The model guarantees it. */
typedef struct ba_engine_ctx ba_engine_ctx;
ba_engine_ctx *ba_engine_ctx_new(void);
void ba_engine_ctx_free(ba_engine_ctx *c);
/* Queries of the last forward that the fast engine handed to the reference
 * path because their sums fell below its trust threshold (1e-280 with
 * double products, 2^(n+24) FLT_MIN ~ 1e-31 at n = 20 with float ones). */
long ba_engine_ctx_fallbacks(const ba_engine_ctx *c);
/* Products of the fast engine in float32 (on) or double (off, the
 * default): the float model's attention core sets it on, the double one
 * off (src/ising_fast.h). A change drops the stored forward. */
void ba_engine_ctx_set_f32(ba_engine_ctx *c, int on);
int ba_engine_forward_ctx(ba_engine_ctx *c, ba_engine e, int B, int T, const double *h,
                          const double *J, int ldj, double *logw, char *err);
int ba_engine_backward_ctx(ba_engine_ctx *c, ba_engine e, int B, int T, const double *h,
                           const double *J, int ldj, const double *g, double *dh, double *dJ,
                           char *err);

/* The fast engine itself (src/ising_fast.c), with the layouts above. The
 * _fast entries need a context; ba_fast_forward/backward make a temporary
 * one (*fallbacks, may be NULL, as ba_engine_ctx_fallbacks). */
int ba_engine_forward_fast(ba_engine_ctx *c, int B, int T, const double *h, const double *J,
                           int ldj, double *logw, char *err);
int ba_engine_backward_fast(ba_engine_ctx *c, int B, int T, const double *h, const double *J,
                            int ldj, const double *g, double *dh, double *dJ, char *err);
int ba_fast_forward(int B, int T, const double *h, const double *J, int ldj, double *logw,
                    long *fallbacks, char *err);
int ba_fast_backward(int B, int T, const double *h, const double *J, int ldj, const double *g,
                     double *dh, double *dJ, char *err);
/* One query of n spins (h: n fields or NULL), as ba_ising_marginals. */
int ba_fast_marginals1(int n, const double *h, const double *J, int ldj, double *logw,
                       char *err);
int ba_fast_backward1(int n, const double *h, const double *J, int ldj, const double *g,
                      double *dh, double *dJ, char *err);

/* ---------------------------------------------- band engine, batched
 * Exact chain inference for couplings of range at most W (spec section 8;
 * src/ising_band.c, src/ising_band_lin.c), with the layouts of
 * ba_engine_forward/backward: h (B,T,T) or NULL, logw (B,T,T), g (B,T,T),
 * dh (B,T,T) += (may be NULL). Two layouts of the couplings:
 * - dense: J (T,ldj), dJ (T,ldj) += (may be NULL). Only J_jk with
 *   0 < k - j <= W is read (entries beyond the band count as 0) and only
 *   those dJ entries are written.
 * - band (_jb): Jb (T,W) row-major, Jb[t*W + d-1] = J_{t-d,t} for
 *   1 <= d <= min(W, t); dJb (T,W) += in that layout (may be NULL).
 *   Entries with d > t are neither read nor written.
 * W may exceed T-1 (the window is then T-1 spins: the full model). The
 * dense entry points copy the band (T W doubles) and share the band ones'
 * implementation, so both give the same results bit for bit.
 * O(n 2^(W+1)) per query of n spins; memory per thread 2 T 2^min(W,T-1)
 * doubles, which BA_BAND_MAX_CELLS bounds (BA_ERR_LIMIT above it), plus
 * a table of the couplings' factors shared by the threads (80 doubles a
 * row at W = 8). Results do not depend on the thread count (nor on the
 * instruction set the kernels were chosen for).
 *
 * Two paths compute the same values: the linear path (alpha, beta as
 * doubles rescaled per step, products instead of log-sum-exp: 8-50x
 * faster for W = 2..8, figures in src/ising_band.c) takes every query
 * whose bound on the dynamic range it meets (ba_band_lin_hbound +
 * ba_band_lin_jbound, derived in src/ising_band_lin.c) is at most
 * BA_BAND_LIN_MAX_NATS, so that nothing it forms underflows; the log path
 * (log-sum-exp per transition, any finite input) takes the others.
 * Errors: BA_ERR_ARG for W outside [1, BA_BAND_MAX_W], B < 1, T outside
 * [1, BA_BAND_MAX_T], ldj < T, NULL J/Jb, logw or g; BA_ERR_NUMERIC naming
 * the first non-finite h (j <= i) or in-band coupling, before any output
 * is written (g is not checked); BA_ERR_NOMEM. */
#define BA_BAND_MAX_W 16
#define BA_BAND_MAX_T 8192
#define BA_BAND_MAX_CELLS ((size_t)1 << 24) /* T*2^W: 256 MiB workspace per thread */
#define BA_BAND_LIN_MAX_NATS 600.0
int ba_band_forward(int W, int B, int T, const double *h, const double *J, int ldj,
                    double *logw, char *err);
int ba_band_backward(int W, int B, int T, const double *h, const double *J, int ldj,
                     const double *g, double *dh, double *dJ, char *err);
int ba_band_forward_jb(int W, int B, int T, const double *h, const double *Jb, double *logw,
                       char *err);
int ba_band_backward_jb(int W, int B, int T, const double *h, const double *Jb,
                        const double *g, double *dh, double *dJb, char *err);

/* The band entry points (band layout) with the path chosen, for tests and
 * benchmarks: AUTO as above (what ba_band_forward_jb/backward_jb do); LOG
 * every query on the log path; LINEAR every query on the linear path
 * whatever its bound (past the bound it may under- or overflow: only for
 * inputs known to be safe). stats (may be NULL) receives the number of
 * queries each path took. */
typedef enum { BA_BAND_AUTO, BA_BAND_LOG, BA_BAND_LINEAR } ba_band_path;
typedef struct {
    long linear, log;
} ba_band_stats;
int ba_band_forward_path(ba_band_path path, int W, int B, int T, const double *h,
                         const double *Jb, double *logw, ba_band_stats *stats, char *err);
int ba_band_backward_path(ba_band_path path, int W, int B, int T, const double *h,
                          const double *Jb, const double *g, double *dh, double *dJb,
                          ba_band_stats *stats, char *err);

/* The linear path's kernels (src/ising_band_lin.c), for src/ising_band.c.
 * A call context: window we = min(W, T-1), couplings Jb (T,ldb) as above,
 * tab (T, ba_band_lin_table_doubles(we)) the coupling factors, row t from
 * ba_band_lin_table_row. ws: ba_band_lin_ws_doubles(we, T) doubles per
 * thread.
 * forward: logw (n) of one query of n spins (h: n fields or NULL).
 * backward: dh (n, may be NULL) += Cov(G, s_t), djb (T,we) row t, entry
 * d-1 += Cov(G, s_{t-d} s_t) (may be NULL).
 * hbound (per query, non-finite when h holds a non-finite value) plus
 * jbound (per call) bound the dynamic range the path meets, in nats. */
typedef struct {
    int we, T, ldb;
    const double *Jb, *tab;
} ba_band_lin;
size_t ba_band_lin_ws_doubles(int we, int T);
size_t ba_band_lin_table_doubles(int we);
void ba_band_lin_table_row(int we, int t, const double *Jb, int ldb, double *row);
void ba_band_lin_forward(const ba_band_lin *c, double *ws, int n, const double *h,
                         double *logw);
void ba_band_lin_backward(const ba_band_lin *c, double *ws, int n, const double *h,
                          const double *g, double *dh, double *djb);
double ba_band_lin_hbound(int we, int n, const double *h);
double ba_band_lin_jbound(int we, int T, const double *Jb, int ldb);

/* ------------------------------------------- sampled engine, batched
 * The sampled counterpart of ba_engine_forward/backward (src/sampled.c), with
 * the same layouts: query q = b*T + i has n = i+1 spins, h (B,T,T) fields or
 * NULL for h = 0, J (T,ldj) couplings (j < k used). The estimator is the one
 * documented in boltzattn.h ("sampled attention").
 *
 * A sample context keeps the shots of one head's last forward for its
 * backward: one per attention head of a model. */
typedef struct ba_sample_ctx ba_sample_ctx;
ba_sample_ctx *ba_sample_ctx_new(void);
void ba_sample_ctx_free(ba_sample_ctx *c);
/* The shots of the last successful forward, (B*T, S) words (query q's at
 * q*S), and its shape; NULL when there is none. For tests. */
const uint64_t *ba_sample_ctx_shots(const ba_sample_ctx *c, int *B, int *T, int *S);
/* Draws s->shots states for every query with ba_sample, query q from its
 * own ba_rng seeded from (seed, q0 + q) (so the result does not depend on
 * the thread count, nor on how a batch is shared among ranks: q0 is the
 * share's first query in the whole batch, 0 for a whole one), keeps them in c and writes logw (B,T,T) = log w with
 * w = (count + 1/2)/(S + 1) for j <= i and -INFINITY above. Errors of
 * ba_sample (the lowest failing query's) pass through; c then holds no
 * forward. */
int ba_sampled_forward(ba_sample_ctx *c, const ba_sampler *s, uint64_t seed, long q0, int B, int T,
                       const double *h, const double *J, int ldj, double *logw, char *err);
/* Backward of the last forward on c (same B, T and shots; BA_ERR_ARG
 * otherwise). g (B,T,T) is dL/dm as the layer computes it for w = (1+m)/2,
 * i.e. (1/2) dL/dw; the estimator's dw/dm^ = S/(2(S+1)) turns it into
 * g^ = g S/(S+1). dh (B,T,T) += beta Cov^(G, s_k) (may be NULL); dJ
 * (T,ldj) += beta sum_q Cov^(G, s_k s_l) (may be NULL), summed over fixed
 * chunks of queries in a fixed order (thread-count independent). */
int ba_sampled_backward(const ba_sample_ctx *c, const ba_sampler *s, int B, int T,
                        const double *g, double *dh, double *dJ, int ldj, char *err);

/* ---------------------------------------------------------- layers
 * Each layer is a forward/backward pair over plain arrays; backward
 * accumulates (+=) into the gradients of its inputs and parameters.
 * N = number of rows (B*T). */

/* out = inp W^T + b. inp (N,IC), W (OC,IC), b (OC) or NULL, out (N,OC). */
void ba_linear_forward(ba_real *out, const ba_real *inp, const ba_real *w,
                       const ba_real *b, int N, int IC, int OC);
/* dinp += dout W, dw += dout^T inp, db += sum dout. dinp/dw/db may be NULL. */
void ba_linear_backward(ba_real *dinp, ba_real *dw, ba_real *db,
                        const ba_real *dout, const ba_real *inp,
                        const ba_real *w, int N, int IC, int OC);

/* LayerNorm over C with eps 1e-5. mean/rstd (N) saved for backward. */
void ba_layernorm_forward(ba_real *out, ba_real *mean, ba_real *rstd,
                          const ba_real *inp, const ba_real *w,
                          const ba_real *b, int N, int C);
void ba_layernorm_backward(ba_real *dinp, ba_real *dw, ba_real *db,
                           const ba_real *dout, const ba_real *inp,
                           const ba_real *w, const ba_real *mean,
                           const ba_real *rstd, int N, int C);

/* GELU, tanh form. */
void ba_gelu_forward(ba_real *out, const ba_real *inp, size_t n);
void ba_gelu_backward(ba_real *dinp, const ba_real *inp, const ba_real *dout,
                      size_t n);

/* out = a + b elementwise (residual). */
void ba_residual_forward(ba_real *out, const ba_real *a, const ba_real *b,
                         size_t n);

/* Causal multi-head attention core, one of the four variants.
 * qkv (B,T,3C): q, k, v stacked, heads contiguous inside each.
 * J couplings of this layer (used by boltzmann/coupling; may be NULL
 *   otherwise): absolute (H,Tmax,Tmax) indexed by key position, or
 *   relative (H,D) indexed by distance - 1.
 * att (B,H,T,T): the normalised weights a_ij (row i, j <= i).
 * pre (B,H,T,T): per-variant saved values for backward (fields h_ij for
 *   softmax/sigmoid/boltzmann; unused by coupling but kept zero).
 * out (B,T,C). */
typedef struct {
    ba_attn attn;
    ba_engine engine; /* resolved (never auto) */
    int B, T, C, H, Tmax;
    ba_engine_ctx **ctx; /* (H) one per head, or NULL for stateless calls */
    /* Sampled attention, used when sampler is not NULL and not exact
     * (boltzmann/coupling): sctx (H) keeps each head's shots for the
     * backward; the forward draws one seed per head, in head order, from
     * srng. Zero-initialised fields mean exact. */
    const ba_sampler *sampler;
    ba_sample_ctx **sctx;
    ba_rng *srng;
    /* the batch's first sequence in the whole batch it is a share of (data-
     * parallel training): query q of this forward draws its shots as query
     * item0 T + q would, so the shares sample what one process would */
    long item0;
    /* The couplings' form (Ising attention): absolute J (H,Tmax,Tmax), or
     * relative r (H,D) with J_jk = r[k-j-1] for k - j <= D; band W > 0 sets
     * J_jk = 0 for k - j > W (0: no band); the band engine runs with W, or
     * without a band with T - 1. field_bias subtracts (1/2) log(i+1) from
     * query i's fields. Zero-initialised fields mean absolute, no band, no
     * bias. */
    ba_couplings couplings;
    int band, D;
    ba_field_bias field_bias;
    /* The approximate engines (engine mf, tap, bp, hybrid): their settings,
     * hybrid's window, and counts (ba_approx_stats) added to *astats (may
     * be NULL) by every forward and backward. */
    ba_approx approx;
    int window;
    ba_approx_stats *astats;
} ba_attn_shape;

/* Where the core reads q, k, v and writes its output, in one precision:
 * element c of head h at position i of batch element b is at
 * q[b*sb + h*sh + i*st + c] (the same for k, v and the backward's dq, dk,
 * dv, which accumulate) and at out[b*ob + h*oh + i*ot + c] (the same for
 * dout). The model's packed qkv (B,T,3C) and the op's [B,H,T,d] tensors
 * are two sets of strides. Outputs must not overlap inputs. The fields are
 * h_ij = scale q_i . k_j with scale_set, else 1/sqrt(d) (the model's). */
typedef struct {
    const float *q, *k, *v;
    float *dq, *dk, *dv;
    size_t sb, sh, st;
    float *out;
    const float *dout;
    size_t ob, oh, ot;
    int scale_set;
    double scale;
} ba_attn_io_f32;
typedef struct {
    const double *q, *k, *v;
    double *dq, *dk, *dv;
    size_t sb, sh, st;
    double *out;
    const double *dout;
    size_t ob, oh, ot;
    int scale_set;
    double scale;
} ba_attn_io_f64;

/* The core (src/attention_core.h), in float and in double whatever
 * ba_real is: forward writes io->out, att and pre; backward accumulates
 * into io->dq, dk, dv and dJ (the layout of J; may be NULL). */
int ba_attn_core_forward_f32(const ba_attn_shape *s, const ba_attn_io_f32 *io, float *att,
                             float *pre, const float *J, char *err);
int ba_attn_core_backward_f32(const ba_attn_shape *s, const ba_attn_io_f32 *io, float *dJ,
                              const float *J, const float *att, const float *pre, char *err);
int ba_attn_core_forward_f64(const ba_attn_shape *s, const ba_attn_io_f64 *io, double *att,
                             double *pre, const double *J, char *err);
int ba_attn_core_backward_f64(const ba_attn_shape *s, const ba_attn_io_f64 *io, double *dJ,
                              const double *J, const double *att, const double *pre, char *err);

/* The model's layer: the core on packed qkv (B,T,3C), out and dout
 * (B,T,C), in each precision; ba_attention_forward/backward are those of
 * ba_real. dqkv (B,T,3C) and dJ (the layout of J) accumulate (dJ may be
 * NULL). */
int ba_attention_forward_f32(const ba_attn_shape *s, float *out, float *att, float *pre,
                             const float *qkv, const float *J, char *err);
int ba_attention_backward_f32(const ba_attn_shape *s, float *dqkv, float *dJ, const float *dout,
                              const float *qkv, const float *J, const float *att,
                              const float *pre, char *err);
int ba_attention_forward_f64(const ba_attn_shape *s, double *out, double *att, double *pre,
                             const double *qkv, const double *J, char *err);
int ba_attention_backward_f64(const ba_attn_shape *s, double *dqkv, double *dJ,
                              const double *dout, const double *qkv, const double *J,
                              const double *att, const double *pre, char *err);
#ifdef BA_DOUBLE
#define BA_ATTN_SFX(name) name##_f64
#else
#define BA_ATTN_SFX(name) name##_f32
#endif
static inline int ba_attention_forward(const ba_attn_shape *s, ba_real *out, ba_real *att,
                                       ba_real *pre, const ba_real *qkv, const ba_real *J,
                                       char *err)
{
    return BA_ATTN_SFX(ba_attention_forward)(s, out, att, pre, qkv, J, err);
}
static inline int ba_attention_backward(const ba_attn_shape *s, ba_real *dqkv, ba_real *dJ,
                                        const ba_real *dout, const ba_real *qkv,
                                        const ba_real *J, const ba_real *att,
                                        const ba_real *pre, char *err)
{
    return BA_ATTN_SFX(ba_attention_backward)(s, dqkv, dJ, dout, qkv, J, att, pre, err);
}
#undef BA_ATTN_SFX

/* Cross-entropy over logits (N,O) against targets (N) with -1 = none.
 * If mask_pointer, row i (position t = i % T) may only point at columns
 * [0, t): the rest are set to -INFINITY in logits before the softmax.
 * probs (N,O). Returns the number of targets; *loss_sum gets the sum of
 * -log p(target). A target outside the allowed range is BA_ERR_ARG. */
int ba_crossentropy_forward(ba_real *logits, ba_real *probs,
                            const int *targets, int N, int O, int T,
                            int mask_pointer, double *loss_sum, long *count,
                            char *err);
/* dlogits += (probs - onehot) * scale on rows with a target. */
void ba_crossentropy_backward(ba_real *dlogits, const ba_real *probs,
                              const int *targets, int N, int O, double scale);

/* ---------------------------------------------------------- samplers
 * The DQA simulator's pieces (src/dqa.c), for the tests and the bench.
 * States are split arrays re, im (2^n each, any alignment); E (2^n) holds
 * the energies E(x) = -sum h_j s_j - sum_{j<k} J_jk s_j s_k. */

/* E(x) for every state x in O(2^n); scratch holds 2^(n-1) doubles (at
 * least 1). h may be NULL (h = 0); J rows of ldj, j < k read only. */
void ba_dqa_energies(int n, const double *h, const double *J, int ldj, double *E,
                     double *scratch);
/* One fused Trotter step: psi <- exp(-i coef E) psi when E is not NULL,
 * then psi <- prod_j (cos a + i sin a X_j) psi (= exp(-i a H_X / gamma)). */
void ba_dqa_step(int n, double *re, double *im, const double *E, double coef, double a);
/* psi <- exp(-i coef E) psi. */
void ba_dqa_phase(int n, double *re, double *im, const double *E, double coef);
/* The whole schedule of s (its dqa fields, already validated) from |+>^n
 * into re, im, with E from ba_dqa_energies. final_phase 0 skips the last
 * diagonal phase, which no measurement in Z sees. Returns BA_OK. */
int ba_dqa_evolve(const ba_sampler *s, int n, const double *E, double *re, double *im,
                  int final_phase);

#include "approx.h" /* approximate engines */

/* log sigmoid(2x) without cancellation, and 1 - tanh(x)^2 = sech(x)^2 with
 * full relative precision where tanh(x) rounds to +-1. */
static inline double ba_log_sigmoid2(double x)
{
    return x >= 0 ? -log1p(exp(-2.0 * x)) : 2.0 * x - log1p(exp(2.0 * x));
}

static inline double ba_sech2(double x)
{
    double e = exp(-2.0 * fabs(x));
    return 4.0 * e / ((1.0 + e) * (1.0 + e));
}

#endif
