/* The fast exact engine (spec section 4): factorised enumeration with a
 * coupling kernel shared by every query that sees the same n keys.
 *
 * Split the n spins into A (the first a = n/2) and B (the other b = n - a).
 * A state is a pair (sA, sB) of bit patterns, bit j set meaning s_j = +1:
 *   log weight(sA, sB) = uA(sA) + vB(sB) + X(sA, sB),
 *   uA = hA.sA,  vB = hB.sB  (per query),
 *   X = JAA-term(sA) + JBB-term(sB) + sA^T JAB sB  (shared by all queries).
 * The shared kernel K'(sA, sB) = exp(X - rho(sA) - gamma(sB)) <= 1 carries
 * row shifts rho and column shifts gamma that move the exponent range into
 * the per-query vectors eu = exp(uA + rho - max), ev = exp(vB + gamma - max).
 * Then all queries' marginals come from two products, R = EV K'^T and
 * L = EU K', and the backward from three more (spec section 4).
 *
 * All of it is double. A query whose partition sum or any marginal numerator
 * falls below TRUST_MIN is recomputed by the reference enumeration, which
 * shifts each half separately: values lost to underflow in the products are
 * bounded by about 2^(n+3) * DBL_MIN, under 1e-19 of anything above
 * TRUST_MIN, so every query the fast path keeps is exact to rounding.
 *
 * A context keeps the kernels K' of every n (and R, L, Z) from the forward
 * for the backward of the same batch, and keeps its buffers across steps so
 * large kernels are not faulted in afresh at every call. */
#include "internal.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TRUST_MIN 1e-280
#define MAXN BA_FAST_MAX_SPINS
/* Rows of the kernel are built in fixed blocks of this many patterns sA,
 * each block from its first row: the block a row falls in never depends on
 * the thread count, so neither does the rounding. */
#define ROW_BLOCK 64

struct ba_engine_ctx {
    /* capacity of the stored forward state */
    int cap_T, cap_Q;
    size_t offK[MAXN + 2], offA[MAXN + 2], offB[MAXN + 2]; /* per-n offsets */
    double *K;     // (sum_n 2^n) K'_n at offK[n], (NA_n, NB_n) row-major
    double *rho;   // (sum_n NA_n) row shifts
    double *gam;   // (sum_n NB_n) column shifts
    double *R;     // (Q * sum_n NA_n) R_n = EV K'^T at Q*offA[n], (Q, NA_n)
    double *L;     // (Q * sum_n NB_n) L_n = EU K', (Q, NB_n)
    double *Z;     // (Q * T) shifted partition sums, (n-1)*Q + q
    char *valid;   // (Q * T) query trusted by the fast path
    /* the forward the state belongs to */
    int fwd_B, fwd_T;
    long fallbacks;
    /* scratch, sized for cap_T, cap_Q and the thread count */
    int cap_threads, has_bwd;
    double *eA, *eB; // (NAmax), (NBmax) half coupling energies
    double *F;       // (NAmax/ROW_BLOCK+1, bmax) f_k(sA) of each block's first row
    double *cvec;    // (amax, NBmax) row increments of the kernel's exponent
    double *colmx;   // (threads, NBmax) per-thread column maxima
    double *EU;      // (2Q, NAmax) eu rows; backward rows Q..: eu * G_A
    double *EV;      // (2Q, NBmax) ev rows; backward rows Q..: ev * G_B
    double *tmp;     // (threads, NAmax + NBmax)
    /* backward only */
    double *M;       // (2^T) moment matrix, then M o K'
    double *R2, *L2; // (Q, NAmax), (Q, NBmax)
    double *UU;      // (2Q, NAmax) U1 rows then U2 rows
    double *GA, *GB; // (Q, NAmax), (Q, NBmax) pattern sums of g
    double *WA, *WB; // (Q, NAmax), (Q, NBmax) half weights wA, wB
    double *SB;      // (NBmax, bmax) +-1 spin matrix of the B half
    double *PS;      // (NAmax, bmax) (M o K') S_B
};

static void free_store(ba_engine_ctx *c)
{
    free(c->K), free(c->rho), free(c->gam), free(c->R), free(c->L), free(c->Z), free(c->valid);
    c->K = c->rho = c->gam = c->R = c->L = c->Z = NULL;
    c->valid = NULL;
    c->cap_T = c->cap_Q = 0;
    c->fwd_B = c->fwd_T = 0;
}

static void free_scratch(ba_engine_ctx *c)
{
    double **b[] = {&c->eA, &c->eB, &c->F,  &c->cvec, &c->colmx, &c->EU, &c->EV, &c->tmp, &c->M,
                    &c->R2, &c->L2, &c->UU, &c->GA,    &c->GB, &c->WA, &c->WB,  &c->SB,
                    &c->PS};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        free(*b[i]);
        *b[i] = NULL;
    }
    c->cap_threads = c->has_bwd = 0;
}

ba_engine_ctx *ba_engine_ctx_new(void) { return calloc(1, sizeof(ba_engine_ctx)); }

void ba_engine_ctx_free(ba_engine_ctx *c)
{
    if (!c)
        return;
    free_store(c);
    free_scratch(c);
    free(c);
}

long ba_engine_ctx_fallbacks(const ba_engine_ctx *c) { return c ? c->fallbacks : 0; }

static int mib_fail(char *err, int T, double bytes)
{
    return ba_fail(err, BA_ERR_NOMEM,
                   "cannot allocate the fast engine's buffers for T = %d (%.0f MiB)", T,
                   bytes / 1048576.0);
}

/* Makes room for a forward (and, if bwd, a backward) of Q queries and up to
 * T spins. Growing the store drops the stored forward. */
static int ensure(ba_engine_ctx *c, int T, int Q, int bwd, char *err)
{
    int amax = T / 2, bmax = T - amax;
    size_t NAm = (size_t)1 << amax, NBm = (size_t)1 << bmax, q = (size_t)Q;
    int nt = ba_nthreads();
    if (T > c->cap_T || Q > c->cap_Q) {
        T = T > c->cap_T ? T : c->cap_T;
        Q = Q > c->cap_Q ? Q : c->cap_Q;
        q = (size_t)Q;
        free_store(c);
        free_scratch(c);
        size_t k = 0, sa = 0, sb = 0;
        for (int n = 1; n <= T; n++) {
            c->offK[n] = k, c->offA[n] = sa, c->offB[n] = sb;
            k += (size_t)1 << n;
            sa += (size_t)1 << (n / 2);
            sb += (size_t)1 << (n - n / 2);
        }
        c->K = malloc(sizeof(double) * k);
        c->rho = malloc(sizeof(double) * sa);
        c->gam = malloc(sizeof(double) * sb);
        c->R = malloc(sizeof(double) * q * sa);
        c->L = malloc(sizeof(double) * q * sb);
        c->Z = malloc(sizeof(double) * q * T);
        c->valid = malloc(q * T);
        if (!c->K || !c->rho || !c->gam || !c->R || !c->L || !c->Z || !c->valid) {
            free_store(c);
            return mib_fail(err, T, sizeof(double) * (double)k);
        }
        c->cap_T = T, c->cap_Q = Q;
    }
    if (nt > c->cap_threads) {
        free_scratch(c);
        T = c->cap_T, Q = c->cap_Q, q = (size_t)Q;
        amax = T / 2, bmax = T - amax;
        NAm = (size_t)1 << amax, NBm = (size_t)1 << bmax;
        c->eA = malloc(sizeof(double) * NAm);
        c->eB = malloc(sizeof(double) * NBm);
        c->F = malloc(sizeof(double) * (NAm / ROW_BLOCK + 1) * bmax);
        c->cvec = malloc(sizeof(double) * NBm * (amax ? amax : 1));
        c->colmx = malloc(sizeof(double) * NBm * nt);
        c->EU = malloc(sizeof(double) * 2 * q * NAm);
        c->EV = malloc(sizeof(double) * 2 * q * NBm);
        c->tmp = malloc(sizeof(double) * (NAm + NBm) * nt);
        if (!c->eA || !c->eB || !c->F || !c->cvec || !c->colmx || !c->EU || !c->EV || !c->tmp) {
            free_scratch(c);
            return mib_fail(err, T, sizeof(double) * 2.0 * q * (NAm + NBm));
        }
        c->cap_threads = nt;
    }
    if (bwd && !c->has_bwd) {
        T = c->cap_T, q = (size_t)c->cap_Q;
        amax = T / 2, bmax = T - amax;
        NAm = (size_t)1 << amax, NBm = (size_t)1 << bmax;
        c->M = malloc(sizeof(double) * NAm * NBm);
        c->R2 = malloc(sizeof(double) * q * NAm);
        c->L2 = malloc(sizeof(double) * q * NBm);
        c->UU = malloc(sizeof(double) * 2 * q * NAm);
        c->GA = malloc(sizeof(double) * q * NAm);
        c->GB = malloc(sizeof(double) * q * NBm);
        c->WA = malloc(sizeof(double) * q * NAm);
        c->WB = malloc(sizeof(double) * q * NBm);
        c->SB = malloc(sizeof(double) * NBm * bmax);
        c->PS = malloc(sizeof(double) * NAm * bmax);
        if (!c->M || !c->R2 || !c->L2 || !c->UU || !c->GA || !c->GB || !c->WA || !c->WB ||
            !c->SB || !c->PS) {
            free_scratch(c);
            return mib_fail(err, T, sizeof(double) * (double)(NAm * NBm));
        }
        c->has_bwd = 1;
    }
    return BA_OK;
}

/* The slices of one n. */
typedef struct {
    int n, a, b, Q;
    size_t NA, NB;
    double *K, *rho, *gam, *R, *L, *Z;
    char *valid;
} nview;

static nview view(ba_engine_ctx *c, int n, int Q)
{
    nview v;
    v.n = n, v.a = n / 2, v.b = n - n / 2, v.Q = Q;
    v.NA = (size_t)1 << v.a, v.NB = (size_t)1 << v.b;
    v.K = c->K + c->offK[n];
    v.rho = c->rho + c->offA[n];
    v.gam = c->gam + c->offB[n];
    v.R = c->R + (size_t)Q * c->offA[n];
    v.L = c->L + (size_t)Q * c->offB[n];
    v.Z = c->Z + (size_t)(n - 1) * Q;
    v.valid = c->valid + (size_t)(n - 1) * Q;
    return v;
}

/* Pattern sums over the bits of a half: out[s] = sum_j c[j] s_j for every
 * s in [0, 2^m), each built from the pattern without its lowest set bit
 * (flipping spin j from -1 to +1 adds 2 c[j]). */
static void pattern_sums(int m, const double *cf, double *out)
{
    double base = 0.0;
    for (int j = 0; j < m; j++)
        base -= cf[j];
    out[0] = base;
    size_t N = (size_t)1 << m;
    for (size_t s = 1; s < N; s++)
        out[s] = out[s & (s - 1)] + 2.0 * cf[__builtin_ctzll(s)];
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

/* K' = exp(X - rho - gamma) for the n spins of v.
 * Row sA of X (without its constant eA(sA)) is eB(sB) + sA^T JAB sB. Spin j
 * of A flipping from -1 to +1 adds the vector 2 sum_k J_{j,a+k} s_k(sB)
 * (cvec[j]) to a row, so each row is its parent's (sA without its lowest
 * set bit) plus one vector: a vectorisable add per entry, where building a
 * row from scratch walks a serial chain. */
static void build_kernel(ba_engine_ctx *c, const nview *v, const double *J, int ldj)
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
        pattern_sums(b, jr, cv);
    }
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
#pragma omp for schedule(static)
        for (size_t blk = 0; blk < nblocks; blk++) {
            size_t s0 = blk * ROW_BLOCK, s1 = s0 + ROW_BLOCK < NA ? s0 + ROW_BLOCK : NA;
            for (size_t sA = s0; sA < s1; sA++) {
                double *row = v->K + sA * NB, mx = -INFINITY;
                if (sA == s0) {
                    pattern_sums(b, c->F + blk * b, row);
                    for (size_t sB = 0; sB < NB; sB++) {
                        row[sB] += c->eB[sB];
                        mx = row[sB] > mx ? row[sB] : mx;
                    }
                } else {
                    /* the parent row holds X - its max; put the max back */
                    size_t par = sA & (sA - 1);
                    const double *prow = v->K + par * NB;
                    const double *cv = c->cvec + (size_t)__builtin_ctzll(sA) * NB;
                    double pm = v->rho[par] - c->eA[par];
                    for (size_t sB = 0; sB < NB; sB++) {
                        row[sB] = prow[sB] + pm + cv[sB];
                        mx = row[sB] > mx ? row[sB] : mx;
                    }
                }
                v->rho[sA] = c->eA[sA] + mx;
                for (size_t sB = 0; sB < NB; sB++) {
                    row[sB] -= mx;
                    cm[sB] = row[sB] > cm[sB] ? row[sB] : cm[sB];
                }
            }
        }
    }
    /* a maximum is exact, so merging the threads' maxima is order-free */
    for (size_t sB = 0; sB < NB; sB++) {
        double g = -INFINITY;
        for (int t = 0; t < cap; t++)
            g = fmax(g, c->colmx[(size_t)t * NB + sB]);
        v->gam[sB] = g;
    }
#pragma omp parallel for schedule(static) num_threads(nt) if (work > BA_PAR_MIN_WORK)
    for (size_t sA = 0; sA < NA; sA++) {
        double *row = v->K + sA * NB;
        for (size_t sB = 0; sB < NB; sB++)
            row[sB] -= v->gam[sB];
        ba_exp_nonpos(row, NB);
    }
}

/* C = op(A) op(B), row-major doubles, in blocks of rows of C (by_rows) or
 * of its columns, each block one single-threaded call (ba_split_plan: the
 * same result on any number of threads). The products with the kernel K'
 * split its side (the columns of R and L), so each block reads only its
 * part of K'. */
static void dgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const double *A,
                  int lda, const double *B, int ldb, double *C, int ldc, int by_rows)
{
    int span = by_rows ? M : N;
    ba_split p = ba_split_plan(2.0 * M * N * K, span);
    if (p.nblk == 1) { /* whole, without entering a parallel region */
        int saved = ba_blas_serial();
        cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, A, lda, B, ldb, 0.0, C, ldc);
        ba_blas_end(saved);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int k = 0; k < p.nblk; k++) {
        int lo = k * p.bs, w = span - lo < p.bs ? span - lo : p.bs, m = M, n = N;
        const double *a = A, *b = B;
        double *c = C;
        if (by_rows) {
            a = ta == CblasNoTrans ? A + (size_t)lo * lda : A + lo;
            c = C + (size_t)lo * ldc, m = w;
        } else {
            b = tb == CblasNoTrans ? B + lo : B + (size_t)lo * ldb;
            c = C + lo, n = w;
        }
        int saved = ba_blas_serial();
        cblas_dgemm(CblasRowMajor, ta, tb, m, n, K, 1.0, a, lda, b, ldb, 0.0, c, ldc);
        ba_blas_end(saved);
    }
}

static const double zero_fields[MAXN]; /* the fields of the coupling variant */

/* eu and ev rows (Q of them, fields h_q = h + q*hs, NULL for h = 0). */
static void query_vectors(ba_engine_ctx *c, const nview *v, const double *h, size_t hs)
{
    size_t NA = v->NA, NB = v->NB;
    double work = (double)v->Q * (NA + NB) * 30.0;
#pragma omp parallel for schedule(static) if (work > BA_PAR_MIN_WORK)
    for (int q = 0; q < v->Q; q++) {
        double *eu = c->EU + (size_t)q * NA, *ev = c->EV + (size_t)q * NB;
        const double *hq = h ? h + (size_t)q * hs : zero_fields;
        pattern_sums(v->a, hq, eu);
        pattern_sums(v->b, hq + v->a, ev);
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

/* Numerators of P(s_j = +1) for the spins of one half from the half-state
 * weights t (2^m values), into num[0..m). */
static void half_numerators(int m, const double *t, double *num)
{
    size_t N = (size_t)1 << m;
    for (int j = 0; j < m; j++)
        num[j] = 0.0;
    for (size_t s = 0; s < N; s++)
        for (int j = 0; j < m; j++)
            if (s >> j & 1)
                num[j] += t[s];
}

/* Marginals of query q; returns 1 if the fast path holds for it (partition
 * sum and every numerator at least TRUST_MIN), writing lw[0..n) when lw is
 * not NULL. tmp holds NA + NB doubles. */
static int query_marginals(const ba_engine_ctx *c, const nview *v, int q, double *tmp,
                           double *lw)
{
    size_t NA = v->NA, NB = v->NB;
    if (!(v->Z[q] >= TRUST_MIN))
        return 0;
    const double *eu = c->EU + (size_t)q * NA, *ev = c->EV + (size_t)q * NB;
    const double *r = v->R + (size_t)q * NA, *l = v->L + (size_t)q * NB;
    double *tA = tmp, *tB = tmp + NA, num[MAXN];
    for (size_t s = 0; s < NA; s++)
        tA[s] = eu[s] * r[s];
    for (size_t s = 0; s < NB; s++)
        tB[s] = ev[s] * l[s];
    half_numerators(v->a, tA, num);
    half_numerators(v->b, tB, num + v->a);
    double lz = log(v->Z[q]);
    for (int j = 0; j < v->n; j++) {
        if (!(num[j] >= TRUST_MIN))
            return 0;
        if (lw) /* rounding can put a certain spin at +1e-16 */
            lw[j] = fmin(log(num[j]) - lz, 0.0);
    }
    return 1;
}

/* Kernel, products, partition sums, trust flags and (if logw) the marginals
 * of the Q queries with n spins; untrusted queries go to the reference
 * enumeration. Returns the number of those, or -1 when its workspace cannot
 * be allocated. */
static long forward_n(ba_engine_ctx *c, int n, int Q, const double *h, size_t hs,
                      const double *J, int ldj, double *logw, size_t ls)
{
    nview v = view(c, n, Q);
    build_kernel(c, &v, J, ldj);
    query_vectors(c, &v, h, hs);
    dgemm(CblasNoTrans, CblasTrans, Q, (int)v.NA, (int)v.NB, c->EV, (int)v.NB, v.K, (int)v.NB,
          v.R, (int)v.NA, 0);
    dgemm(CblasNoTrans, CblasNoTrans, Q, (int)v.NB, (int)v.NA, c->EU, (int)v.NA, v.K, (int)v.NB,
          v.L, (int)v.NB, 0);
    double work = (double)Q * (v.NA * v.a + v.NB * v.b) * 3.0;
#pragma omp parallel for schedule(static) if (work > BA_PAR_MIN_WORK)
    for (int q = 0; q < Q; q++) {
        const double *eu = c->EU + (size_t)q * v.NA, *r = v.R + (size_t)q * v.NA;
        double z = 0.0;
        for (size_t s = 0; s < v.NA; s++)
            z += eu[s] * r[s];
        v.Z[q] = z;
        double *tmp = c->tmp + (v.NA + v.NB) * (size_t)ba_thread_id();
        v.valid[q] = (char)query_marginals(c, &v, q, tmp, logw ? logw + (size_t)q * ls : NULL);
    }
    long fb = 0;
    for (int q = 0; q < Q; q++)
        fb += !v.valid[q];
    if (fb && logw) {
        double *work_ref = malloc(sizeof(double) << n);
        if (!work_ref)
            return -1;
        for (int q = 0; q < Q; q++)
            if (!v.valid[q])
                ba_ref_marginals_ws(n, h ? h + (size_t)q * hs : zero_fields, J, ldj,
                                    logw + (size_t)q * ls, work_ref);
        free(work_ref);
    }
    return fb;
}

/* Backward of the Q queries with n spins, using the kernel, products and
 * trust flags the forward stored: dh_q += Cov(G, s) (dh may be NULL),
 * dJ += sum over queries Cov(G, s_j s_k). Returns -1 when the reference
 * fallback's workspace cannot be allocated. */
static int backward_n(ba_engine_ctx *c, int n, int Q, const double *h, size_t hs,
                      const double *J, int ldj, const double *g, size_t gs, double *dh,
                      size_t dhs, double *dJ, int lddj)
{
    nview v = view(c, n, Q);
    int a = v.a, b = v.b;
    size_t NA = v.NA, NB = v.NB;
    query_vectors(c, &v, h, hs); /* cheap: Q (NA + NB) exponentials */
    double work = (double)Q * (NA + NB) * 4.0;
#pragma omp parallel for schedule(static) if (work > BA_PAR_MIN_WORK)
    for (int q = 0; q < Q; q++) {
        const double *gq = g + (size_t)q * gs;
        double *GA = c->GA + (size_t)q * NA, *GB = c->GB + (size_t)q * NB;
        pattern_sums(a, gq, GA);
        pattern_sums(b, gq + a, GB);
        double *eug = c->EU + ((size_t)Q + q) * NA, *evg = c->EV + ((size_t)Q + q) * NB;
        const double *eu = c->EU + (size_t)q * NA, *ev = c->EV + (size_t)q * NB;
        for (size_t s = 0; s < NA; s++)
            eug[s] = eu[s] * GA[s];
        for (size_t s = 0; s < NB; s++)
            evg[s] = ev[s] * GB[s];
    }
    /* R2 = (EV o G_B) K'^T, L2 = (EU o G_A) K' */
    dgemm(CblasNoTrans, CblasTrans, Q, (int)NA, (int)NB, c->EV + (size_t)Q * NB, (int)NB, v.K,
          (int)NB, c->R2, (int)NA, 0);
    dgemm(CblasNoTrans, CblasNoTrans, Q, (int)NB, (int)NA, c->EU + (size_t)Q * NA, (int)NA, v.K,
          (int)NB, c->L2, (int)NB, 0);
    work = (double)Q * (NA * a + NB * b) * 3.0;
#pragma omp parallel for schedule(static) if (work > BA_PAR_MIN_WORK)
    for (int q = 0; q < Q; q++) {
        double *wA = c->WA + (size_t)q * NA, *wB = c->WB + (size_t)q * NB;
        double *U1 = c->UU + (size_t)q * NA, *U2 = c->UU + ((size_t)Q + q) * NA;
        if (!v.valid[q]) { /* the reference path below handles this query */
            memset(wA, 0, sizeof(double) * NA), memset(wB, 0, sizeof(double) * NB);
            memset(U1, 0, sizeof(double) * NA), memset(U2, 0, sizeof(double) * NA);
            continue;
        }
        const double *eu = c->EU + (size_t)q * NA, *ev = c->EV + (size_t)q * NB;
        const double *r = v.R + (size_t)q * NA, *l = v.L + (size_t)q * NB;
        const double *r2 = c->R2 + (size_t)q * NA, *l2 = c->L2 + (size_t)q * NB;
        const double *GA = c->GA + (size_t)q * NA, *GB = c->GB + (size_t)q * NB;
        double iz = 1.0 / v.Z[q], gbar = 0.0;
        for (size_t s = 0; s < NA; s++)
            gbar += eu[s] * (GA[s] * r[s] + r2[s]);
        gbar *= iz;
        for (size_t s = 0; s < NA; s++) {
            wA[s] = eu[s] * ((GA[s] - gbar) * r[s] + r2[s]) * iz;
            U1[s] = eu[s] * (GA[s] - gbar) * iz;
            U2[s] = eu[s] * iz;
        }
        for (size_t s = 0; s < NB; s++)
            wB[s] = ev[s] * ((GB[s] - gbar) * l[s] + l2[s]) * iz;
        if (dh) {
            double *d = dh + (size_t)q * dhs;
            for (size_t s = 0; s < NA; s++)
                for (int j = 0; j < a; j++)
                    d[j] += (s >> j & 1) ? wA[s] : -wA[s];
            for (size_t s = 0; s < NB; s++)
                for (int k = 0; k < b; k++)
                    d[a + k] += (s >> k & 1) ? wB[s] : -wB[s];
        }
    }
    /* dJ_AA, dJ_BB from the half weights summed over queries in query order
     * (so the sum does not depend on the thread count) */
    for (int q = 1; q < Q; q++) {
        for (size_t s = 0; s < NA; s++)
            c->WA[s] += c->WA[(size_t)q * NA + s];
        for (size_t s = 0; s < NB; s++)
            c->WB[s] += c->WB[(size_t)q * NB + s];
    }
    for (size_t s = 0; s < NA; s++)
        for (int j = 0; j < a; j++)
            for (int k = j + 1; k < a; k++)
                dJ[(size_t)j * lddj + k] += ((s >> j ^ s >> k) & 1) ? -c->WA[s] : c->WA[s];
    for (size_t s = 0; s < NB; s++)
        for (int j = 0; j < b; j++)
            for (int k = j + 1; k < b; k++)
                dJ[(size_t)(a + j) * lddj + a + k] +=
                    ((s >> j ^ s >> k) & 1) ? -c->WB[s] : c->WB[s];
    /* dJ_AB = S_A^T [K' o (U1^T EV + U2^T (EV o G_B))] S_B */
    if (a > 0) {
        dgemm(CblasTrans, CblasNoTrans, (int)NA, (int)NB, 2 * Q, c->UU, (int)NA, c->EV, (int)NB,
              c->M, (int)NB, 1);
        size_t N = NA * NB;
#pragma omp parallel for schedule(static) if (2.0 * N > BA_PAR_MIN_WORK)
        for (size_t i = 0; i < N; i++)
            c->M[i] *= v.K[i];
        for (size_t s = 0; s < NB; s++)
            for (int k = 0; k < b; k++)
                c->SB[s * b + k] = (s >> k & 1) ? 1.0 : -1.0;
        dgemm(CblasNoTrans, CblasNoTrans, (int)NA, b, (int)NB, c->M, (int)NB, c->SB, b, c->PS, b,
              1);
        for (size_t s = 0; s < NA; s++)
            for (int j = 0; j < a; j++) {
                double sj = (s >> j & 1) ? 1.0 : -1.0;
                for (int k = 0; k < b; k++)
                    dJ[(size_t)j * lddj + a + k] += sj * c->PS[s * b + k];
            }
    }
    /* queries the fast path did not trust: exact reference enumeration */
    double *work_ref = NULL;
    for (int q = 0; q < Q; q++) {
        if (v.valid[q])
            continue;
        if (!work_ref && !(work_ref = malloc(sizeof(double) << n)))
            return -1;
        ba_ref_backward_ws(n, h ? h + (size_t)q * hs : zero_fields, J, ldj, g + (size_t)q * gs,
                           dh ? dh + (size_t)q * dhs : NULL, dJ, lddj, work_ref);
    }
    free(work_ref);
    return 0;
}

/* ----------------------------------------------------- batched entry */

/* The forward proper: kernels of every n kept in c for the backward. */
static int forward_kernels(ba_engine_ctx *c, int B, int T, const double *h, const double *J,
                           int ldj, double *logw, char *err);

int ba_engine_forward_fast(ba_engine_ctx *c, int B, int T, const double *h, const double *J,
                           int ldj, double *logw, char *err)
{
    if (!h) {
        /* Zero fields: P(s) = P(-s), so every marginal is exactly 1/2
         * whatever J is (the coupling variant), and no kernel is needed.
         * The reference still enumerates: the tests hold this against it. */
        c->fwd_B = c->fwd_T = 0;
        c->fallbacks = 0;
        for (long q = 0; logw && q < (long)B * T; q++) {
            int i = (int)(q % T);
            for (int j = 0; j < T; j++)
                logw[(size_t)q * T + j] = j <= i ? -M_LN2 : -INFINITY;
        }
        return BA_OK;
    }
    return forward_kernels(c, B, T, h, J, ldj, logw, err);
}

static int forward_kernels(ba_engine_ctx *c, int B, int T, const double *h, const double *J,
                           int ldj, double *logw, char *err)
{
    int rc = ensure(c, T, B, 0, err);
    if (rc)
        return rc;
    size_t TT = (size_t)T * T;
    long fb = 0;
    c->fwd_B = c->fwd_T = 0;
    for (int n = 1; n <= T; n++) {
        int i = n - 1; /* the query row with n visible keys */
        long f = forward_n(c, n, B, h ? h + (size_t)i * T : NULL, TT, J, ldj,
                           logw ? logw + (size_t)i * T : NULL, TT);
        if (f < 0)
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the reference fallback for n = %d",
                           n);
        fb += f;
        for (int q = 0; logw && q < B; q++)
            for (int j = n; j < T; j++)
                logw[(size_t)q * TT + (size_t)i * T + j] = -INFINITY;
    }
    c->fwd_B = B, c->fwd_T = T;
    c->fallbacks = fb;
    return BA_OK;
}

int ba_engine_backward_fast(ba_engine_ctx *c, int B, int T, const double *h, const double *J,
                            int ldj, const double *g, double *dh, double *dJ, char *err)
{
    int rc;
    /* Zero fields and no dh wanted: G is odd in s and s_j s_k even, so
     * every Cov(G, s_j s_k) is exactly 0 and dJ gets nothing. */
    if (!h && !dh)
        return BA_OK;
    /* Without the forward of this very batch, build the state first. */
    if (c->fwd_B != B || c->fwd_T != T) {
        if ((rc = forward_kernels(c, B, T, h, J, ldj, NULL, err)))
            return rc;
    }
    if ((rc = ensure(c, T, B, 1, err)))
        return rc;
    size_t TT = (size_t)T * T;
    double *dJn = dJ ? dJ : calloc((size_t)T * ldj, sizeof(double));
    if (!dJn)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate dJ scratch for T = %d", T);
    for (int n = 1; n <= T && rc == BA_OK; n++) {
        int i = n - 1;
        if (backward_n(c, n, B, h ? h + (size_t)i * T : NULL, TT, J, ldj, g + (size_t)i * T, TT,
                       dh ? dh + (size_t)i * T : NULL, TT, dJn, ldj) < 0)
            rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate the reference fallback for n = %d",
                         n);
    }
    if (!dJ)
        free(dJn);
    return rc;
}

int ba_fast_forward(int B, int T, const double *h, const double *J, int ldj, double *logw,
                    long *fallbacks, char *err)
{
    ba_engine_ctx *c = ba_engine_ctx_new();
    if (!c)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate an engine context");
    int rc = ba_engine_forward_fast(c, B, T, h, J, ldj, logw, err);
    if (fallbacks)
        *fallbacks = c->fallbacks;
    ba_engine_ctx_free(c);
    return rc;
}

int ba_fast_backward(int B, int T, const double *h, const double *J, int ldj, const double *g,
                     double *dh, double *dJ, char *err)
{
    ba_engine_ctx *c = ba_engine_ctx_new();
    if (!c)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate an engine context");
    int rc = ba_engine_backward_fast(c, B, T, h, J, ldj, g, dh, dJ, err);
    ba_engine_ctx_free(c);
    return rc;
}

/* ------------------------------------------------------ single query */

int ba_fast_marginals1(int n, const double *h, const double *J, int ldj, double *logw, char *err)
{
    ba_engine_ctx *c = ba_engine_ctx_new();
    int rc = c ? ensure(c, n, 1, 0, err)
               : ba_fail(err, BA_ERR_NOMEM, "cannot allocate an engine context");
    if (rc == BA_OK && forward_n(c, n, 1, h, (size_t)n, J, ldj, logw, (size_t)n) < 0)
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate the reference fallback for n = %d", n);
    ba_engine_ctx_free(c);
    return rc;
}

int ba_fast_backward1(int n, const double *h, const double *J, int ldj, const double *g,
                      double *dh, double *dJ, char *err)
{
    ba_engine_ctx *c = ba_engine_ctx_new();
    int rc = c ? ensure(c, n, 1, 1, err)
               : ba_fail(err, BA_ERR_NOMEM, "cannot allocate an engine context");
    double *dJn = NULL;
    if (rc == BA_OK && !dJ && !(dJn = calloc((size_t)n * ldj, sizeof(double))))
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate dJ scratch for n = %d", n);
    if (rc == BA_OK && (forward_n(c, n, 1, h, (size_t)n, J, ldj, NULL, 0) < 0 ||
                        backward_n(c, n, 1, h, (size_t)n, J, ldj, g, (size_t)n, dh, (size_t)n,
                                   dJ ? dJ : dJn, ldj) < 0))
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate the reference fallback for n = %d", n);
    free(dJn);
    ba_engine_ctx_free(c);
    return rc;
}
