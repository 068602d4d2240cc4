/* The fast exact engine's shared coupling kernel, per-query vectors and
 * dense products (src/ising_fast.h; the engine proper is src/ising_fast.c).
 *
 * Split the n spins into A (the first a = n/2) and B (the other b = n - a).
 * The kernel K'(sA, sB) = exp(X - rho(sA) - gamma(sB)) <= 1, X the coupling
 * energy of the state, carries row shifts rho and column shifts gamma that
 * move the exponent range into the per-query vectors eu, ev (spec section
 * 4). */
#include "ising/fast.h"
#include "core/vmath.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* out[s] = base + 2 sum over the set bits j of s of cf[j], each pattern
 * built from the one without its lowest set bit (flipping spin j from -1
 * to +1 adds 2 c[j]). */
static void sums_from(int m, const double *cf, double base, double *out)
{
    out[0] = base;
    size_t N = (size_t)1 << m;
    for (size_t s = 1; s < N; s++)
        out[s] = out[s & (s - 1)] + 2.0 * cf[__builtin_ctzll(s)];
}

void ba_fast_pattern_sums(int m, const double *cf, double *out)
{
    double base = 0.0;
    for (int j = 0; j < m; j++)
        base -= cf[j];
    sums_from(m, cf, base, out);
}

/* sum_j cf[j] s_j less its value at the all -1 pattern. */
void ba_fast_plus_sums(int m, const double *cf, double *out)
{
    sums_from(m, cf, 0.0, out);
}

/* Pairwise coupling energy sum_{j<k} J_jk s_j s_k of the spins
 * off..off+m-1, for every pattern of the half. */
static void half_couplings(int m, int off, const double *J, int ldj, double *out)
{
    size_t N = (size_t)1 << m;
    for (size_t s = 0; s < N; s++) {
        double e = 0.0;
        for (int j = 0; j < m; j++) {
            double sj = (s >> j & 1) ? 1.0 : -1.0;
            for (int k = j + 1; k < m; k++)
                e += J[(size_t)(off + j) * ldj + off + k] * sj * ((s >> k & 1) ? 1.0 : -1.0);
        }
        out[s] = e;
    }
}

/* Rows of block blk of the exponent X less each row's maximum, into out
 * (row sA at out + (sA - s0) NB), the row shifts rho, and (cm not NULL)
 * the running column maxima cm. Row sA of X (without its constant eA(sA))
 * is eB(sB) + sA^T JAB sB; spin j of A flipping from -1 to +1 adds the
 * vector cvec[j] = 2 sum_k J_{j,a+k} s_k(sB), so each row is its parent's
 * (sA without its lowest set bit, in the same block) plus one vector: a
 * vectorisable add per entry, where building a row from scratch walks a
 * serial chain. The same block always gives the same rows, bit for bit. */
static void block_rows(const ba_engine_ctx *c, const ba_fast_view *v, size_t blk, double *out,
                       double *cm)
{
    int b = v->b;
    size_t NA = v->NA, NB = v->NB;
    size_t s0 = blk * ROW_BLOCK, s1 = s0 + ROW_BLOCK < NA ? s0 + ROW_BLOCK : NA;
    for (size_t sA = s0; sA < s1; sA++) {
        double *row = out + (sA - s0) * NB, mx = -INFINITY;
        if (sA == s0) {
            ba_fast_pattern_sums(b, c->F + blk * b, row);
            for (size_t sB = 0; sB < NB; sB++) {
                row[sB] += c->eB[sB];
                mx = row[sB] > mx ? row[sB] : mx;
            }
        } else {
            /* the parent row holds X - its max; put the max back */
            size_t par = sA & (sA - 1);
            const double *prow = out + (par - s0) * NB;
            const double *cv = c->cvec + (size_t)__builtin_ctzll(sA) * NB;
            double pm = v->rho[par] - c->eA[par];
            for (size_t sB = 0; sB < NB; sB++) {
                row[sB] = prow[sB] + pm + cv[sB];
                mx = row[sB] > mx ? row[sB] : mx;
            }
        }
        v->rho[sA] = c->eA[sA] + mx;
        for (size_t sB = 0; sB < NB; sB++)
            row[sB] -= mx;
        if (cm)
            for (size_t sB = 0; sB < NB; sB++)
                cm[sB] = row[sB] > cm[sB] ? row[sB] : cm[sB];
    }
}

/* The pieces every row is built from: half energies eA, eB, each block's
 * first-row fields F, and the row increments cvec. */
static void kernel_parts(ba_engine_ctx *c, const ba_fast_view *v, const double *J, int ldj)
{
    int a = v->a, b = v->b;
    size_t NA = v->NA, NB = v->NB;
    half_couplings(a, 0, J, ldj, c->eA);
    half_couplings(b, a, J, ldj, c->eB);
    /* F[sA][k] = sum_{j in A} J_{j,a+k} s_j, for the first row of each block */
    for (size_t sA = 0; sA < NA; sA += ROW_BLOCK)
        for (int k = 0; k < b; k++) {
            double f = 0.0;
            for (int j = 0; j < a; j++)
                f += J[(size_t)j * ldj + a + k] * ((sA >> j & 1) ? 1.0 : -1.0);
            c->F[(sA / ROW_BLOCK) * b + k] = f;
        }
    for (int j = 0; j < a; j++) {
        double *cv = c->cvec + (size_t)j * NB, jr[MAXN];
        for (int k = 0; k < b; k++)
            jr[k] = 2.0 * J[(size_t)j * ldj + a + k];
        ba_fast_pattern_sums(b, jr, cv);
    }
}

/* Double: the exponent rows are built in K itself, then shifted by gamma
 * and exponentiated in place. f32: a thread builds a block's rows in its
 * own double scratch twice, first for rho and the column maxima, then
 * again (the same bits) to shift, exponentiate in double and store in
 * float, so K' in float is exp of a double exponent rounded once. */
void ba_fast_build_kernel(ba_engine_ctx *c, const ba_fast_view *v, const double *J, int ldj)
{
    size_t NA = v->NA, NB = v->NB;
    kernel_parts(c, v, J, ldj);
    /* the team is the current thread count, which may have dropped below
     * the one the scratch was sized for; every slot is merged below */
    int cap = c->cap_threads, nt = ba_nthreads() < cap ? ba_nthreads() : cap;
    for (size_t i = 0; i < NB * (size_t)cap; i++)
        c->colmx[i] = -INFINITY;
    size_t nblocks = (NA + ROW_BLOCK - 1) / ROW_BLOCK;
    double work = 4.0 * NA * NB;
#pragma omp parallel num_threads(nt) if (work > BA_PAR_MIN_WORK)
    {
        double *cm = c->colmx + NB * (size_t)ba_thread_id();
        double *scratch = c->f32 ? c->rows + (size_t)ba_thread_id() * ROW_BLOCK * NB : NULL;
#pragma omp for schedule(static)
        for (size_t blk = 0; blk < nblocks; blk++)
            block_rows(c, v, blk, c->f32 ? scratch : v->K + blk * ROW_BLOCK * NB, cm);
    }
    /* a maximum is exact, so merging the threads' maxima is order-free */
    for (size_t sB = 0; sB < NB; sB++) {
        double g = -INFINITY;
        for (int t = 0; t < cap; t++)
            g = fmax(g, c->colmx[(size_t)t * NB + sB]);
        v->gam[sB] = g;
    }
    if (!c->f32) {
#pragma omp parallel for schedule(static) num_threads(nt) if (work > BA_PAR_MIN_WORK)
        for (size_t sA = 0; sA < NA; sA++) {
            double *row = v->K + sA * NB;
            for (size_t sB = 0; sB < NB; sB++)
                row[sB] -= v->gam[sB];
            ba_exp_nonpos(row, NB);
        }
        return;
    }
#pragma omp parallel num_threads(nt) if (work > BA_PAR_MIN_WORK)
    {
        double *scratch = c->rows + (size_t)ba_thread_id() * ROW_BLOCK * NB;
#pragma omp for schedule(static)
        for (size_t blk = 0; blk < nblocks; blk++) {
            block_rows(c, v, blk, scratch, NULL);
            size_t s0 = blk * ROW_BLOCK, s1 = s0 + ROW_BLOCK < NA ? s0 + ROW_BLOCK : NA;
            for (size_t sA = s0; sA < s1; sA++) {
                double *row = scratch + (sA - s0) * NB;
                for (size_t sB = 0; sB < NB; sB++)
                    row[sB] -= v->gam[sB];
                ba_exp_nonpos(row, NB);
                ba_fast_to_float(v->Kf + sA * NB, row, NB);
            }
        }
    }
}

static const double zero_fields[MAXN]; /* the fields of the coupling variant */

void ba_fast_query_vectors(ba_engine_ctx *c, const ba_fast_view *v, const double *h, size_t hs)
{
    size_t NA = v->NA, NB = v->NB;
    double work = (double)v->Q * (NA + NB) * 30.0;
#pragma omp parallel for schedule(static) if (work > BA_PAR_MIN_WORK)
    for (int q = 0; q < v->Q; q++) {
        double *eu = c->EU + (size_t)q * NA, *ev = c->EV + (size_t)q * NB;
        const double *hq = h ? h + (size_t)q * hs : zero_fields;
        ba_fast_pattern_sums(v->a, hq, eu);
        ba_fast_pattern_sums(v->b, hq + v->a, ev);
        double mu = -INFINITY, mv = -INFINITY;
        for (size_t s = 0; s < NA; s++) {
            eu[s] += v->rho[s];
            mu = eu[s] > mu ? eu[s] : mu;
        }
        for (size_t s = 0; s < NB; s++) {
            ev[s] += v->gam[s];
            mv = ev[s] > mv ? ev[s] : mv;
        }
        for (size_t s = 0; s < NA; s++)
            eu[s] -= mu;
        for (size_t s = 0; s < NB; s++)
            ev[s] -= mv;
        ba_exp_nonpos(eu, NA);
        ba_exp_nonpos(ev, NB);
    }
}

BA_CLONES void ba_fast_to_float(float *dst, const double *src, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dst[i] = !(fabs(src[i]) < FLT_MIN) ? (float)src[i] : 0.0f; /* NaN stays NaN */
}

/* ------------------------------------------------------------ products */

enum { GEMM_D, GEMM_S, GEMM_M };

typedef struct {
    int kind;
    CBLAS_TRANSPOSE ta, tb;
    int M, N, K, lda, ldb, ldc;
    const void *A, *B;
    void *C;
    float *tmp; /* GEMM_M: M * ldc float block sums */
} gemm_call;

/* C[i][j] = (first ? 0 : C[i][j]) + t[i][j] over an m x n block. */
BA_CLONES static void add_block(double *C, const float *t, int m, int n, int ld, int first)
{
    for (int i = 0; i < m; i++) {
        double *c = C + (size_t)i * ld;
        const float *s = t + (size_t)i * ld;
        if (first) {
#pragma omp simd
            for (int j = 0; j < n; j++)
                c[j] = s[j];
        } else {
#pragma omp simd
            for (int j = 0; j < n; j++)
                c[j] += s[j];
        }
    }
}

/* One block of the result: rows [r0, r0+m) and columns [c0, c0+n) of C. */
static void gemm_block(const gemm_call *g, int r0, int m, int c0, int n)
{
    /* offsets of the block's first row of op(A) and first column of op(B) */
    size_t oa = g->ta == CblasNoTrans ? (size_t)r0 * g->lda : (size_t)r0;
    size_t ob = g->tb == CblasNoTrans ? (size_t)c0 : (size_t)c0 * g->ldb;
    size_t oc = (size_t)r0 * g->ldc + c0;
    if (g->kind == GEMM_D) {
        cblas_dgemm(CblasRowMajor, g->ta, g->tb, m, n, g->K, 1.0, (const double *)g->A + oa,
                    g->lda, (const double *)g->B + ob, g->ldb, 0.0, (double *)g->C + oc, g->ldc);
        return;
    }
    const float *A = (const float *)g->A + oa, *B = (const float *)g->B + ob;
    if (g->kind == GEMM_S) {
        cblas_sgemm(CblasRowMajor, g->ta, g->tb, m, n, g->K, 1.0f, A, g->lda, B, g->ldb, 0.0f,
                    (float *)g->C + oc, g->ldc);
        return;
    }
    for (int k0 = 0; k0 < g->K; k0 += F32_KBLOCK) {
        int kb = g->K - k0 < F32_KBLOCK ? g->K - k0 : F32_KBLOCK;
        /* columns k0.. of op(A), rows k0.. of op(B) */
        const float *ak = g->ta == CblasNoTrans ? A + k0 : A + (size_t)k0 * g->lda;
        const float *bk = g->tb == CblasNoTrans ? B + (size_t)k0 * g->ldb : B + k0;
        cblas_sgemm(CblasRowMajor, g->ta, g->tb, m, n, kb, 1.0f, ak, g->lda, bk, g->ldb, 0.0f,
                    g->tmp + oc, g->ldc);
        add_block((double *)g->C + oc, g->tmp + oc, m, n, g->ldc, k0 == 0);
    }
}

static void split_gemm(const gemm_call *g, int by_rows)
{
    int span = by_rows ? g->M : g->N;
    ba_split p = ba_split_plan(2.0 * g->M * g->N * g->K, span);
    if (p.nblk == 1) { /* whole, without entering a parallel region */
        int saved = ba_blas_serial();
        gemm_block(g, 0, g->M, 0, g->N);
        ba_blas_end(saved);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int k = 0; k < p.nblk; k++) {
        int lo = k * p.bs, w = span - lo < p.bs ? span - lo : p.bs;
        int saved = ba_blas_serial();
        if (by_rows)
            gemm_block(g, lo, w, 0, g->N);
        else
            gemm_block(g, 0, g->M, lo, w);
        ba_blas_end(saved);
    }
}

void ba_fast_dgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const double *A,
                   int lda, const double *B, int ldb, double *C, int ldc, int by_rows)
{
    gemm_call g = {GEMM_D, ta, tb, M, N, K, lda, ldb, ldc, A, B, C, NULL};
    split_gemm(&g, by_rows);
}

void ba_fast_sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A,
                   int lda, const float *B, int ldb, float *C, int ldc, int by_rows)
{
    gemm_call g = {GEMM_S, ta, tb, M, N, K, lda, ldb, ldc, A, B, C, NULL};
    split_gemm(&g, by_rows);
}

void ba_fast_mgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A,
                   int lda, const float *B, int ldb, double *C, int ldc, int by_rows, float *tmp)
{
    gemm_call g = {GEMM_M, ta, tb, M, N, K, lda, ldb, ldc, A, B, C, tmp};
    split_gemm(&g, by_rows);
}
