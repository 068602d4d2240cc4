/* The core layer's private declarations (src/core/: threads, the BLAS
 * split, files, JSON, safetensors, statistics, the vectorised exponential).
 * Not installed; it may include only the public headers. The layers above
 * include it through their own headers. */
#ifndef BA_CORE_H
#define BA_CORE_H

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

/* A caller's stop request (a signal, a user's Ctrl-C), polled by the
 * loops that can run long (an engine's queries, the attention core's
 * heads): requested(user) != 0 asks the call to end early with
 * BA_ERR_INTERRUPTED, its outputs then unspecified. requested is called
 * from OpenMP threads, so it must only read (a volatile sig_atomic_t, an
 * atomic). A NULL ba_stop, or one with a NULL requested, never stops. */
typedef struct {
    int (*requested)(void *user);
    void *user;
} ba_stop;

static inline int ba_stop_requested(const ba_stop *s)
{
    return s && s->requested && s->requested(s->user);
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
/* Safetensors helpers for messages: "F32", and "[2, 3]". */
const char *ba_dtype_name(ba_dtype d);
void ba_format_shape(char *buf, size_t cap, int ndim, const int64_t *shape);

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
