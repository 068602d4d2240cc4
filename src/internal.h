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
/* The forward's check of a batch's shape and tokens against the model of c
 * (ba_model_forward and ba_batch_check share it). */
int ba_inputs_check(const ba_config *c, const int *inputs, int B, int T, char *err);
/* The quality record of a sampled model at step (src/evaluate.c; see
 * ba_trainer_quality). */
int ba_quality_record(ba_model *m, const ba_dataset *d, long step, ba_record *r, char *err);
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
 * path because their sums fell below 1e-280. */
long ba_engine_ctx_fallbacks(const ba_engine_ctx *c);
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
 * own ba_rng seeded from (seed, q) (so the result does not depend on the
 * thread count), keeps them in c and writes logw (B,T,T) = log w with
 * w = (count + 1/2)/(S + 1) for j <= i and -INFINITY above. Errors of
 * ba_sample (the lowest failing query's) pass through; c then holds no
 * forward. */
int ba_sampled_forward(ba_sample_ctx *c, const ba_sampler *s, uint64_t seed, int B, int T,
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

/* ---------------- approximate engines (mean field family), per query
 * Spec section 8, "Mean-field family" and "Implicit gradients"
 * (src/ising_mf.c: mf, tap and the shared checks; src/ising_bp.c: bp). One
 * query of n spins: h (n) fields or NULL for h = 0, J couplings (rows of
 * ldj >= n, J[j*ldj + k] read for j < k only), A = J + J^T with zero
 * diagonal. Every method writes m_j = tanh(phi_j) for an effective field
 * phi:
 *   mf:  phi = h + A m
 *   tap: phi_j = h_j + (A m)_j - m_j sum_k A_jk^2 (1 - m_k^2)
 *   bp:  phi_j = h_j + sum_k u_{k->j}, with the cavity messages
 *        u_{k->j} = atanh(tanh A_jk tanh(phi_k - u_{j->k}))
 * and logw_j = log P(s_j = +1) = log sigmoid(2 phi_j), so a tiny weight
 * keeps its relative precision.
 *
 * Forward: the damped iteration x <- (1 - damping) x + damping F(x) (x = m
 * for mf/tap, from m = tanh(h); x = the messages for bp, from 0) until the
 * undamped step max |F(x) - x| < tol, at most max_iter sweeps of O(n^2).
 * Not converging is not an error: the last F(x) is returned with
 * info.converged = 0, finite (BA_ERR_NUMERIC where sums of couplings
 * near DBL_MAX overflow). It writes logw (n)
 * and state (ba_mf_state_doubles): m (n) at state[0], phi (n) at state[n],
 * and for bp the messages at state[2n], u_{k->j} at [2n + k*n + j].
 *
 * Backward: the exact gradient of the method's fixed point (as converged)
 * by implicit differentiation, (I - dF/dx)^T v = dL/dx, from the state of
 * a forward with the same J. g (n) = dL/dm; dh (n) += (may be NULL); dJ
 * (rows of lddj >= n, entries j < k) += (may be NULL). mf/tap solve the n x
 * n adjoint system by LAPACK's LU (BA_MF_ADJ_LU, ipiv: n ints) or by the
 * transposed damped iteration (BA_MF_ADJ_ITER, ipiv may be NULL); bp always
 * iterates, in message space (n(n-1) unknowns), with the settings' damping
 * and max_iter and tolerance tol * max_j |g_j (1 - m_j^2)|; info (may be
 * NULL) gets its sweeps and convergence (LU: 1 and 1).
 *
 * ws: ba_mf_ws_doubles(n) doubles of workspace, either direction.
 * Errors: BA_ERR_ARG for bad settings (damping outside (0, 1], tol not > 0
 * and finite, max_iter < 1, unknown method or adjoint), n < 1, ldj or lddj
 * < n, a NULL array that is needed; BA_ERR_NUMERIC naming a non-finite h_j,
 * J_jk or g_j, a forward iteration that overflowed (couplings near
 * DBL_MAX), a singular LU adjoint system or an adjoint that came out
 * non-finite (an iterative solve that diverged): nothing is written then. */
typedef enum { BA_MF_NAIVE = 0, BA_MF_TAP = 1, BA_MF_BP = 2 } ba_mf_method;
typedef enum { BA_MF_ADJ_LU = 0, BA_MF_ADJ_ITER = 1 } ba_mf_adjoint;
typedef struct {
    double damping; /* lambda in (0, 1]: the share of the new iterate */
    double tol;     /* > 0: on max |F(x) - x| */
    int max_iter;   /* >= 1 sweeps, forward and iterative adjoint alike */
    ba_mf_adjoint adjoint; /* mf/tap only; zero-initialised = LU */
    const double *start;   /* mf/tap: (n) the first iterate m, each in [-1, 1]; NULL
                              (zero-initialised): tanh(h), the J = 0 solution. The
                              backward's re-solve starts at the forward's answer */
    int sequential;        /* mf/tap, dense kernel only: 1 = Gauss-Seidel sweeps
                              (src/ising_mf.c says why), 0 (zero-initialised) =
                              Jacobi; the banded kernels and bp refuse 1 */
} ba_mf_settings;
typedef struct {
    int iters;     /* sweeps done */
    int converged; /* 1 when the step fell below the tolerance */
} ba_mf_info;
size_t ba_mf_state_doubles(ba_mf_method meth, int n);
size_t ba_mf_ws_doubles(int n);
int ba_mf_check_settings(const ba_mf_settings *s, char *err);
/* One mf/tap sweep's second half, shared by the dense and banded kernels
 * (so their iterates stay bit for bit the same): m (n) = tanh(phi), and
 * the undamped step max |m - x| returned; then x (n) += lambda (m - x).
 * tanh(p) = sign(p) (1 - e) / (1 + e), e = exp(-2 |p|) by the vectorised
 * exponential: within a few ulp of 1 in absolute terms, which is all a
 * fixed point iterated to a tolerance of 1e-8 or more can use (the
 * weights come from phi, not m); libm's tanh was half of a banded mf
 * row's time. ba_mf_tanh: m (n) = tanh(phi) so (the GEMM path's tanh
 * too). */
static inline void ba_mf_tanh(int n, const double *phi, double *m)
{
    for (int j = 0; j < n; j++)
        m[j] = -2.0 * fabs(phi[j]);
    ba_exp_nonpos(m, (size_t)n);
    for (int j = 0; j < n; j++) {
        double v = (1.0 - m[j]) / (1.0 + m[j]);
        m[j] = phi[j] < 0.0 ? -v : v;
    }
}

static inline double ba_mf_tanh_step(int n, const double *phi, const double *x, double *m)
{
    ba_mf_tanh(n, phi, m);
    double res = 0.0;
    for (int j = 0; j < n; j++) {
        double d = fabs(m[j] - x[j]);
        res = d > res ? d : res;
    }
    return res;
}

/* The first iterate of the mf/tap kernels: s->start, else tanh(h) (h may
 * be NULL: zeros) by ba_mf_tanh, so that a row without couplings is
 * converged at the first sweep. */
static inline void ba_mf_first(int n, const double *start, const double *h, double *x)
{
    if (start)
        memcpy(x, start, sizeof(double) * (size_t)n);
    else if (h)
        ba_mf_tanh(n, h, x);
    else
        memset(x, 0, sizeof(double) * (size_t)n); /* tanh 0, exactly as ba_mf_tanh gives it */
}

/* m = <s> = 2 P(s = +1) - 1 from log P(s = +1), without cancellation near
 * +-1 (the hybrid engine's magnetisations, the approximate backward's
 * starts). */
static inline double ba_m_of_logw(double lw)
{
    return lw > -0.6931471805599453 ? 1.0 + 2.0 * expm1(lw) : 2.0 * exp(lw) - 1.0;
}

/* The retry of the policy on non-convergence (below, "approximate engines,
 * batched"): used gets a quarter of s's damping and four times its sweeps
 * (at most BA_APPROX_MAX_ITER). */
static inline void ba_mf_retry(const ba_mf_settings *s, ba_mf_settings *used)
{
    used->damping = s->damping / 4.0;
    used->max_iter = s->max_iter > BA_APPROX_MAX_ITER / 4 ? BA_APPROX_MAX_ITER : 4 * s->max_iter;
}

static inline void ba_mf_damp(int n, double lambda, const double *m, double *x)
{
    for (int j = 0; j < n; j++)
        x[j] += lambda * (m[j] - x[j]);
}

/* The forwards' shared checks: every h[j] finite (h may be NULL), and
 * every field state[n + j] of the result finite (else the couplings
 * overflowed). BA_OK or BA_ERR_NUMERIC naming the spin. */
int ba_mf_check_fields(int n, const double *h, char *err);
int ba_mf_check_state(ba_mf_method meth, int n, const double *state, char *err);
int ba_mf_forward(ba_mf_method meth, const ba_mf_settings *s, int n, const double *h,
                  const double *J, int ldj, double *logw, double *state, double *ws,
                  ba_mf_info *info, char *err);
int ba_mf_backward(ba_mf_method meth, const ba_mf_settings *s, int n, const double *J,
                   int ldj, const double *state, const double *g, double *dh, double *dJ,
                   int lddj, double *ws, int *ipiv, ba_mf_info *info, char *err);

/* bp's kernels (src/ising_bp.c), called by ba_mf_forward/backward after
 * their checks, with the layouts above. */
void ba_bp_forward(const ba_mf_settings *s, int n, const double *h, const double *J, int ldj,
                   double *logw, double *state, ba_mf_info *info);
int ba_bp_backward(const ba_mf_settings *s, int n, const double *J, int ldj,
                   const double *state, const double *g, double *dh, double *dJ, int lddj,
                   double *ws, ba_mf_info *info, char *err);

/* ---------------- approximate engines, banded per query
 * (src/ising_mf_band.c, bp's kernels in src/ising_bp.c). The same methods
 * for couplings of range at most W >= 0 (A_jk = 0 for |j - k| > W) at
 * O(n W) a sweep. The couplings come as a band Ab (n' >= n rows of 2W + 1):
 * Ab[j (2W+1) + W + d] = A_{j,j+d} for |d| <= W (0 where j + d is outside
 * the query, 0 at d = 0), built by ba_mf_band_build from J (T,ldj); the
 * band of a block of T keys serves every query n <= T (row j reads only
 * k < n). ba_mf_reach gives the smallest such W of J's leading n x n
 * corner (0 when every coupling is 0; O(n^2) at worst).
 *
 * Forward: ba_mf_forward's fixed point, logw and info bit for bit (the
 * same sums in the same order, less exact zeros); state
 * (ba_mf_band_state_doubles): m (n) at state[0], phi (n) at state[n], for
 * bp the band's messages at state[2n], u_{k->j} at [2n + k (2W+1) + W +
 * j - k]. Backward: ba_mf_backward's gradient; mf/tap solve the adjoint by
 * banded LU (dgbsv, O(n W^2), any n, s->adjoint not read, ipiv: n ints;
 * info 1 and 1), bp iterates over the band (its sweeps and multipliers
 * are the dense iteration's). dJ (rows of lddj >= n) += only the entries
 * 0 < k - j <= R (R >= 0; the entries beyond the band have a gradient, see
 * src/ising_mf_band.c), the others are not touched. zo (n, may be NULL)
 * gets the vector of the far gradient: for every k - j > W,
 *   dL/dJ_jk = zo_j m_k + zo_k m_j
 * (mf/tap: zo = dL/dh; bp: the multipliers of the zero messages), so a
 * caller can form the far entries of many queries as one matrix product.
 * ws: ba_mf_band_ws_doubles(n, W) doubles, either direction. Errors as
 * ba_mf_forward/backward, plus BA_ERR_ARG for W < 0, R < 0 or a NULL Ab,
 * BA_ERR_NUMERIC for a non-finite coupling in the band. */
int ba_mf_reach(int n, const double *J, int ldj);
void ba_mf_band_build(int n, int W, const double *J, int ldj, double *Ab);
size_t ba_mf_band_state_doubles(ba_mf_method meth, int n, int W);
size_t ba_mf_band_ws_doubles(int n, int W);
int ba_mf_band_forward(ba_mf_method meth, const ba_mf_settings *s, int n, int W,
                       const double *h, const double *Ab, double *logw, double *state,
                       double *ws, ba_mf_info *info, char *err);
int ba_mf_band_backward(ba_mf_method meth, const ba_mf_settings *s, int n, int W,
                        const double *Ab, const double *state, const double *g, double *dh,
                        double *dJ, int lddj, int R, double *zo, double *ws, int *ipiv,
                        ba_mf_info *info, char *err);
void ba_bp_band_forward(const ba_mf_settings *s, int n, int W, const double *h,
                        const double *Ab, double *logw, double *state, ba_mf_info *info);
int ba_bp_band_backward(const ba_mf_settings *s, int n, int W, const double *Ab,
                        const double *state, const double *g, double *dh, double *dJ, int lddj,
                        int R, double *zo, double *ws, ba_mf_info *info, char *err);

/* ---------------- approximate engines, batched (the attention layer's
 * entry points; src/ising_approx.c for mf/tap/bp, src/ising_hybrid.c for
 * hybrid). Layouts of the band engine's dense entry points: h (B,T,T) or
 * NULL (h = 0), logw (B,T,T) with row i of element b the query of the
 * n = i + 1 keys 0..i (entries j > i not written), J (T,ldj) read for
 * j < k only (full range: every pair), g = dL/dm (B,T,T), dh (B,T,T) +=
 * (may be NULL), dJ (T,ldj) += entries j < k (may be NULL).
 *
 * The policy on non-convergence (both directions, every method): a query
 * whose iteration has not converged within s->max_iter sweeps at
 * s->damping is solved again from the start with damping / 4 and 4 x
 * max_iter (counted in retried); one that still has not converged keeps
 * its last iterate (finite) and is counted in unconverged. The full-range
 * GEMM path of mf and tap (T >= 64, src/approx_gemm.h) gives its Anderson
 * iteration at most BA_APPROX_GEMM_AA_SWEEPS sweeps, then solves a row it
 * has not by the sequential sweeps (undamped, max_iter) before that retry. The backward
 * repeats the forward of each query (the same sweeps, bit for bit) rather
 * than storing its state. mf/tap adjoints: LU for n <= BA_APPROX_LU_MAX_N,
 * else the transposed iteration (its spectrum is the converged forward's,
 * so it converges where the forward did); bp's adjoint always iterates.
 * The backward's stats count the adjoint solves: sweeps (LU: 1), and in
 * unconverged the rows whose forward or adjoint did not converge. A row
 * whose forward did not converge, or whose adjoint diverged (not finite),
 * adds no gradient: the implicit gradient is that of a fixed point, which
 * such a row does not have; an adjoint iteration that stopped unconverged
 * but finite adds its last iterate's. Queries run in parallel
 * (OpenMP); stats and the
 * gradient of the couplings are reduced in a fixed order, so results do not
 * depend on the thread count.
 * Errors: BA_ERR_ARG (settings, e not approximate, W outside [1,
 * BA_BAND_MAX_W] for hybrid, B < 1, T outside [1, BA_MAX_BLOCK], ldj < T,
 * NULL arrays); BA_ERR_NUMERIC naming the first non-finite h or coupling
 * (before any output is written) or a query whose fixed point overflowed;
 * BA_ERR_NOMEM. */
#define BA_APPROX_LU_MAX_N 48
/* The block checks every batched approximate path shares: B, T, ldj,
 * J not NULL, every coupling j < k < T and every field a row reads
 * (j <= i) finite; the first bad one named. BA_OK or BA_ERR_ARG/NUMERIC. */
int ba_approx_check_block(int B, int T, const double *h, const double *J, int ldj, char *err);
/* to += from (fields summed, max_sweeps the larger). */
void ba_approx_stats_add(ba_approx_stats *to, const ba_approx_stats *from);
ba_mf_settings ba_approx_mf_settings(const ba_approx *a);
/* W is the hybrid engine's exact window (ignored by mf, tap, bp). st (may
 * be NULL) += this call's counts. */
int ba_approx_forward(ba_engine e, const ba_approx *a, int W, int B, int T, const double *h,
                      const double *J, int ldj, double *logw, ba_approx_stats *st, char *err);
int ba_approx_backward(ba_engine e, const ba_approx *a, int W, int B, int T, const double *h,
                       const double *J, int ldj, const double *g, double *dh, double *dJ,
                       ba_approx_stats *st, char *err);
/* Banded heads: when the reach Wr of J (the largest k - j with J_jk != 0)
 * has 2 Wr + 1 <= T / 2, mf, tap and bp run the banded per-query kernels
 * (ba_mf_band_*: the same logw bit for bit, the same stats; the mf/tap
 * adjoint by banded LU at any n, sweeps 1). The couplings' gradient is
 * not banded (zero couplings have one): ba_approx_backward adds every
 * entry j < k; ba_approx_backward_reach (R >= 0, else BA_ERR_ARG) adds
 * only the entries 0 < k - j <= R and leaves the others of dJ as they are
 * (banded mf, tap, bp; hybrid and the full-range GEMM path of mf and tap
 * at T >= 64, src/approx_gemm.h, add them all), for a caller that reads no more,
 * such as a layer whose couplings end at its band: then the far entries'
 * O(T^3) products are not formed. */
int ba_approx_backward_reach(ba_engine e, const ba_approx *a, int W, int B, int T,
                             const double *h, const double *J, int ldj, const double *g,
                             double *dh, double *dJ, int R, ba_approx_stats *st, char *err);
/* ba_approx_backward_reach with the forward's result logw0 (B,T,T) (may be
 * NULL): mf and tap on the per-query paths (dense rows below the GEMM
 * path's T, and banded rows) start each row's re-solve at m = 2 w - 1 of
 * it instead of at the J = 0 solution, and the full-range GEMM path at its
 * fields, so the re-solve takes a sweep or a few (a float logw is a start
 * within 1e-7) instead of the forward's dozens; it stops by the same test,
 * so the point differentiated is a fixed point to the same tolerance,
 * within about tol of the forward's (not bit for bit: the attention
 * layer's f32 and f64 backward use it). A NaN entry leaves its row's start
 * cold; a warm row that does not converge is solved cold. bp and hybrid
 * ignore it. */
int ba_approx_backward_from(ba_engine e, const ba_approx *a, int W, int B, int T,
                            const double *h, const double *J, int ldj, const double *logw0,
                            const double *g, double *dh, double *dJ, int R, ba_approx_stats *st,
                            char *err);

/* The hybrid engine (src/ising_hybrid.c), called by ba_approx_forward/
 * backward after their checks, same layouts and policy: exact chain
 * inference inside the window W (the band engine) with fields
 * h_j + sum_{|k-j| > W} A_jk m_k, iterated to self-consistency; gradients
 * by implicit differentiation, the adjoint iterated through the band
 * engine's backward (derivation in the file). */
int ba_hybrid_forward(const ba_approx *a, int W, int B, int T, const double *h, const double *J,
                      int ldj, double *logw, ba_approx_stats *st, char *err);
int ba_hybrid_backward(const ba_approx *a, int W, int B, int T, const double *h,
                       const double *J, int ldj, const double *g, double *dh, double *dJ,
                       ba_approx_stats *st, char *err);

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
