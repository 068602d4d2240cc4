/* The fast exact engine's private parts, shared by its two files:
 * src/ising_fast.c (contexts, forward and backward per number of spins) and
 * src/ising_fast_kernel.c (the shared coupling kernel, the per-query
 * vectors and the dense products). Not installed.
 *
 * Two precisions of the products, one context setting
 * (ba_engine_ctx_set_f32):
 *   double  every product in double (the double build, the op's f64 entry
 *           points, and every direct caller by default);
 *   f32     the float model's: the kernel K' and the vectors it is
 *           multiplied with are stored in float, each product a float BLAS
 *           call over at most F32_KBLOCK terms added into a double result.
 *           Everything else (exponents, shifts, partition sums, marginals,
 *           covariances) stays double. docs/internals.md gives the error
 *           analysis; tests/test_fast_engine.c holds it to the reference. */
#ifndef BA_ISING_FAST_H
#define BA_ISING_FAST_H

#include "ising/ising.h"

#include <cblas.h>

#define MAXN BA_FAST_MAX_SPINS
/* Rows of the kernel are built in fixed blocks of this many patterns sA,
 * each block from its first row: the block a row falls in never depends on
 * the thread count, so neither does the rounding. */
#define ROW_BLOCK 64
/* f32 products: a float sum covers at most this many terms before it is
 * added to the double result (rounding below 256 * 2^-24 = 1.5e-5 of the
 * sum of the terms' magnitudes, whatever n). */
#define F32_KBLOCK 256

struct ba_engine_ctx {
    int f32; /* products in float (see above) */
    /* capacity of the stored forward state */
    int cap_T, cap_Q;
    size_t offK[MAXN + 2], offA[MAXN + 2], offB[MAXN + 2]; /* per-n offsets */
    double *K;     // (sum_n 2^n) K'_n at offK[n], (NA_n, NB_n) row-major; double only
    float *Kf;     // (sum_n 2^n) the same in float; f32 only
    double *rho;   // (sum_n NA_n) row shifts
    double *gam;   // (sum_n NB_n) column shifts
    double *R;     // (Q * sum_n NA_n) R_n = EV K'^T at Q*offA[n], (Q, NA_n)
    double *L;     // (Q * sum_n NB_n) L_n = EU K', (Q, NB_n)
    double *Z;     // (Q * T) shifted partition sums, (n-1)*Q + q
    char *valid;   // (Q * T) query trusted by the fast path
    /* the forward the state belongs to */
    int fwd_B, fwd_T;
    /* the caller's stop request of the call in progress (the engine
     * interface sets it for a call): polled before each n's kernels */
    const ba_stop *stop;
    long fallbacks;
    /* f32 only: the twin with double products that a batch holding queries
     * the float products cannot trust runs on instead (made on first
     * need), whether the stored forward is the twin's, and whether the
     * float pass leaves those queries to the twin (no reference) */
    struct ba_engine_ctx *dbl;
    int fwd_dbl, defer_ref;
    /* scratch, sized for cap_T, cap_Q and the thread count */
    int cap_threads, has_bwd;
    double *eA, *eB; // (NAmax), (NBmax) half coupling energies
    double *F;       // (NAmax/ROW_BLOCK+1, bmax) f_k(sA) of each block's first row
    double *cvec;    // (amax, NBmax) row increments of the kernel's exponent
    double *colmx;   // (threads, NBmax) per-thread column maxima
    double *EU;      // (2Q, NAmax) eu rows; backward rows Q..: eu * G_A
    double *EV;      // (2Q, NBmax) ev rows; backward rows Q..: ev * G_B
    double *tmp;     // (threads, NAmax + NBmax)
    float *EUf, *EVf; // (2Q, NAmax), (2Q, NBmax) EU, EV in float; f32 only
    float *ftmp;      // (max(Q NAmax, Q NBmax, NAmax bmax)) float block sums; f32 only
    double *rows;     // (threads, ROW_BLOCK, NBmax) one block's exponent rows; f32 only
    /* backward only */
    double *M;       // (2^T) moment matrix, then M o K'; double only
    float *Mf;       // (2^T) the same in float; f32 only
    double *R2, *L2; // (Q, NAmax), (Q, NBmax)
    double *UU;      // (2Q, NAmax) U1 rows then U2 rows
    float *UUf;      // (2Q, NAmax) UU in float; f32 only
    double *GA, *GB; // (Q, NAmax), (Q, NBmax) pattern sums of g
    double *WA, *WB; // (Q, NAmax), (Q, NBmax) half weights wA, wB
    double *SB;      // (NBmax, bmax) +-1 spin matrix of the B half; double only
    float *SBf;      // (NBmax, bmax) the same in float; f32 only
    double *PS;      // (NAmax, bmax) (M o K') S_B
};

/* The slices of one n. */
typedef struct {
    int n, a, b, Q;
    size_t NA, NB;
    double *K, *rho, *gam, *R, *L, *Z;
    float *Kf;
    char *valid;
} ba_fast_view;

/* out[s] = sum_j cf[j] s_j for every pattern s of m spins. */
void ba_fast_pattern_sums(int m, const double *cf, double *out);
/* out[s] = 2 sum_{j set in s} cf[j] = the same less its value at s = 0:
 * the backward's G, which only the covariances of G enter. */
void ba_fast_plus_sums(int m, const double *cf, double *out);
/* The kernel K' of v (into K or Kf by the context's precision), with its
 * shifts rho and gam. */
void ba_fast_build_kernel(ba_engine_ctx *c, const ba_fast_view *v, const double *J, int ldj);
/* eu and ev rows 0..Q (fields h_q = h + q*hs, NULL for h = 0), in double. */
void ba_fast_query_vectors(ba_engine_ctx *c, const ba_fast_view *v, const double *h, size_t hs);
/* dst = src in float, entries of magnitude below FLT_MIN (and the
 * denormals they would make) flushed to 0. */
void ba_fast_to_float(float *dst, const double *src, size_t n);

/* C = op(A) op(B), row-major, in blocks of rows of C (by_rows) or of its
 * columns, each block one single-threaded BLAS call (ba_split_plan: the
 * same result on any number of threads).
 *   _dgemm  double A, B, C;
 *   _sgemm  float A, B, C (every sum in float);
 *   _mgemm  float A, B, double C: the inner dimension in blocks of
 *           F32_KBLOCK, each block's float product added to C in double;
 *           tmp holds M * ldc floats. */
void ba_fast_dgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const double *A,
                   int lda, const double *B, int ldb, double *C, int ldc, int by_rows);
void ba_fast_sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A,
                   int lda, const float *B, int ldb, float *C, int ldc, int by_rows);
void ba_fast_mgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A,
                   int lda, const float *B, int ldb, double *C, int ldc, int by_rows,
                   float *tmp);

#endif
