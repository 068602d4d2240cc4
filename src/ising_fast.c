/* The fast exact engine (spec section 4): factorised enumeration with a
 * coupling kernel shared by every query that sees the same n keys.
 *
 * Split the n spins into A (the first a) and B (the other b = n - a). A
 * state is a pair (sA, sB) of bit patterns, bit j set meaning s_j = +1, and
 *   log weight(sA, sB) = uA(sA) + vB(sB) + X(sA, sB),
 *   uA = hA.sA,  vB = hB.sB  (per query),
 *   X = JAA-term(sA) + JBB-term(sB) + sA^T JAB sB  (shared).
 * With the shared kernel K'(sA, sB) = exp(X - rho_A - gamma_B) <= 1, where
 * rho (row) and gamma (column) shifts take the exponent range out of K' and
 * into the per-query vectors eu = exp(uA + rho - max), ev = exp(vB + gamma -
 * max), every query's marginals come from two matrix products over all
 * queries at once: R = EV K'^T, L = EU K' (spec section 4 has the backward).
 *
 * All of it is double. A query whose sums fall so low that values lost to
 * underflow could matter (below 1e-280, where the loss is bounded by about
 * 2^(n+3) * DBL_MIN, i.e. under 1e-19 relative) is recomputed by the
 * reference enumeration, which shifts every half separately. */
#include "internal.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define TRUST_MIN 1e-280

/* Buffers for one n, sized for the largest n and Q of a call. */
typedef struct {
    int Q, nmax;
    double *K;     // (NA,NB) shifted kernel; also X while it is built
    double *M;     // (NA,NB) backward: weighted moment matrix
    double *rho;   // (NA) row shifts
    double *gam;   // (NB) column shifts
    double *eA;    // (NA) JAA term
    double *eB;    // (NB) JBB term
    double *F;     // (NA,b) f_k(sA) = sum_{j in A} J_jk s_j
    double *colmx; // (threads,NB) per-thread column maxima
    double *EU;    // (2Q,NA): rows 0..Q-1 eu; backward: rows Q.. eu*G_A
    double *EV;    // (2Q,NB): rows 0..Q-1 ev; backward: rows Q.. ev*G_B
    double *R;     // (2Q,NA): R = EV K'^T; backward rows Q..: R2
    double *L;     // (2Q,NB): L = EU K'; backward rows Q..: L2
    double *UU;    // (2Q,NA) backward: U1 rows then U2 rows
    double *GA;    // (Q,NA) backward: G_A per query
    double *GB;    // (Q,NB) backward: G_B per query
    double *Z;     // (Q) shifted partition sums
    double *SB;    // (NB,b) +-1 spin matrix of the B half
    double *PS;    // (NA,b) (M o K') S_B
    double *WA;    // (Q,NA) backward: wA per query
    double *WB;    // (Q,NB) backward: wB per query
    double *ref;   // (threads, 2^nmax) reference fallback workspace
    char *valid;   // (Q) query trusted by the fast path
    int nthreads;
} fast_ws;

static int nthreads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static void ws_free(fast_ws *w)
{
    double **bufs[] = {&w->K,  &w->M,  &w->rho, &w->gam, &w->eA, &w->eB, &w->F,
                       &w->colmx, &w->EU, &w->EV, &w->R, &w->L, &w->UU, &w->GA,
                       &w->GB, &w->Z,  &w->SB, &w->PS, &w->WA, &w->WB, &w->ref};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
    free(w->valid);
    w->valid = NULL;
}

static int ws_init(fast_ws *w, int nmax, int Q, int backward, char *err)
{
    memset(w, 0, sizeof *w);
    w->Q = Q, w->nmax = nmax, w->nthreads = nthreads();
    int amax = nmax / 2, bmax = nmax - amax;
    size_t NA = (size_t)1 << amax, NB = (size_t)1 << bmax, N = (size_t)1 << nmax;
    size_t q2 = 2 * (size_t)Q;
    w->K = malloc(sizeof(double) * N);
    w->rho = malloc(sizeof(double) * NA);
    w->gam = malloc(sizeof(double) * NB);
    w->eA = malloc(sizeof(double) * NA);
    w->eB = malloc(sizeof(double) * NB);
    w->F = malloc(sizeof(double) * NA * (bmax ? bmax : 1));
    w->colmx = malloc(sizeof(double) * NB * (size_t)w->nthreads);
    w->EU = malloc(sizeof(double) * q2 * NA);
    w->EV = malloc(sizeof(double) * q2 * NB);
    w->R = malloc(sizeof(double) * q2 * NA);
    w->L = malloc(sizeof(double) * q2 * NB);
    w->Z = malloc(sizeof(double) * Q);
    w->valid = malloc((size_t)Q);
    w->ref = malloc(sizeof(double) * N * (size_t)w->nthreads);
    int ok = w->K && w->rho && w->gam && w->eA && w->eB && w->F && w->colmx && w->EU && w->EV &&
             w->R && w->L && w->Z && w->valid && w->ref;
    if (backward) {
        w->M = malloc(sizeof(double) * N);
        w->UU = malloc(sizeof(double) * q2 * NA);
        w->GA = malloc(sizeof(double) * (size_t)Q * NA);
        w->GB = malloc(sizeof(double) * (size_t)Q * NB);
        w->SB = malloc(sizeof(double) * NB * (bmax ? bmax : 1));
        w->PS = malloc(sizeof(double) * NA * (bmax ? bmax : 1));
        w->WA = malloc(sizeof(double) * (size_t)Q * NA);
        w->WB = malloc(sizeof(double) * (size_t)Q * NB);
        ok = ok && w->M && w->UU && w->GA && w->GB && w->SB && w->PS && w->WA && w->WB;
    }
    if (!ok) {
        ws_free(w);
        return ba_fail(err, BA_ERR_NOMEM,
                       "cannot allocate the fast engine's workspace for n = %d spins (%.0f MiB)",
                       nmax, (backward ? 2.0 : 1.0) * (double)N * sizeof(double) / 1048576.0);
    }
    return BA_OK;
}

/* Pattern sums over the bits of a half: out[s] = sum_j c[j] s_j for every
 * s in [0, 2^m), built from the pattern without its lowest set bit (flipping
 * spin j from -1 to +1 adds 2 c[j]). */
static void pattern_sums(int m, const double *c, double *out)
{
    double base = 0.0;
    for (int j = 0; j < m; j++)
        base -= c[j];
    out[0] = base;
    size_t N = (size_t)1 << m;
    for (size_t s = 1; s < N; s++)
        out[s] = out[s & (s - 1)] + 2.0 * c[__builtin_ctzll(s)];
}

/* Pairwise coupling energy of one half: sum_{j<k} J_jk s_j s_k over the
 * spins off..off+m-1, for every pattern. */
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

/* Builds K' = exp(X - rho - gamma) for n spins; rho, gamma into w. */
static void build_kernel(fast_ws *w, int n, const double *J, int ldj)
{
    int a = n / 2, b = n - a;
    size_t NA = (size_t)1 << a, NB = (size_t)1 << b;
    half_couplings(a, 0, J, ldj, w->eA);
    half_couplings(b, a, J, ldj, w->eB);
    /* F[sA][k] = sum_{j in A} J_{j,a+k} s_j */
    for (size_t sA = 0; sA < NA; sA++)
        for (int k = 0; k < b; k++) {
            double f = 0.0;
            for (int j = 0; j < a; j++)
                f += J[(size_t)j * ldj + a + k] * ((sA >> j & 1) ? 1.0 : -1.0);
            w->F[sA * b + k] = f;
        }
    int nt = w->nthreads;
    for (size_t i = 0; i < NB * (size_t)nt; i++)
        w->colmx[i] = -INFINITY;
    double work = 4.0 * NA * NB;
#pragma omp parallel num_threads(nt) if (work > BA_PAR_MIN_WORK)
    {
        double *cm = w->colmx + NB * (size_t)thread_id();
#pragma omp for schedule(static)
        for (size_t sA = 0; sA < NA; sA++) {
            double *row = w->K + sA * NB;
            /* X minus the row constant eA: eB(sB) + sA^T JAB sB */
            pattern_sums(b, w->F + sA * b, row);
            double mx = -INFINITY;
            for (size_t sB = 0; sB < NB; sB++) {
                row[sB] += w->eB[sB];
                mx = row[sB] > mx ? row[sB] : mx;
            }
            w->rho[sA] = w->eA[sA] + mx;
            for (size_t sB = 0; sB < NB; sB++) {
                row[sB] -= mx;
                cm[sB] = row[sB] > cm[sB] ? row[sB] : cm[sB];
            }
        }
    }
    /* max is exact, so merging per-thread maxima is order-independent */
    for (size_t sB = 0; sB < NB; sB++) {
        double g = -INFINITY;
        for (int t = 0; t < nt; t++)
            g = w->colmx[(size_t)t * NB + sB] > g ? w->colmx[(size_t)t * NB + sB] : g;
        w->gam[sB] = g;
    }
#pragma omp parallel for schedule(static) num_threads(nt) if (work > BA_PAR_MIN_WORK)
    for (size_t sA = 0; sA < NA; sA++) {
        double *row = w->K + sA * NB;
        for (size_t sB = 0; sB < NB; sB++)
            row[sB] = exp(row[sB] - w->gam[sB]);
    }
}

static const double zero_fields[64]; /* h of the coupling variant */

/* eu/ev rows of every query (fields h_q = h + q*hs, NULL for h = 0), then
 * R = EV K'^T, L = EU K', the partition sums and the trust flags. */
static void query_products(fast_ws *w, int n, int Q, const double *h, size_t hs)
{
    int a = n / 2, b = n - a;
    size_t NA = (size_t)1 << a, NB = (size_t)1 << b;
    double work = (double)Q * (NA + NB) * 30.0;
#pragma omp parallel for schedule(static) if (work > BA_PAR_MIN_WORK)
    for (int q = 0; q < Q; q++) {
        double *eu = w->EU + (size_t)q * NA, *ev = w->EV + (size_t)q * NB;
        const double *hq = h ? h + (size_t)q * hs : zero_fields;
        pattern_sums(a, hq, eu);
        pattern_sums(b, hq + a, ev);
        double mu = -INFINITY, mv = -INFINITY;
        for (size_t s = 0; s < NA; s++) {
            eu[s] += w->rho[s];
            mu = eu[s] > mu ? eu[s] : mu;
        }
        for (size_t s = 0; s < NB; s++) {
            ev[s] += w->gam[s];
            mv = ev[s] > mv ? ev[s] : mv;
        }
        for (size_t s = 0; s < NA; s++)
            eu[s] = exp(eu[s] - mu);
        for (size_t s = 0; s < NB; s++)
            ev[s] = exp(ev[s] - mv);
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Q, (int)NA, (int)NB, 1.0, w->EV, (int)NB,
                w->K, (int)NB, 0.0, w->R, (int)NA);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Q, (int)NB, (int)NA, 1.0, w->EU,
                (int)NA, w->K, (int)NB, 0.0, w->L, (int)NB);
    for (int q = 0; q < Q; q++) {
        const double *eu = w->EU + (size_t)q * NA, *r = w->R + (size_t)q * NA;
        double z = 0.0;
        for (size_t s = 0; s < NA; s++)
            z += eu[s] * r[s];
        w->Z[q] = z;
    }
}

/* Numerators of P(s_j = +1) for the spins of one half from the half-state
 * weights t (2^m), into num[0..m). */
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

/* Marginals of query q from the products; returns 1 if the fast path can
 * be trusted for it (partition sum and every numerator above TRUST_MIN),
 * writing logw[0..n) when lw is not NULL. tmp holds NA + NB doubles. */
static int fast_query_marginals(const fast_ws *w, int n, int q, double *tmp, double *lw)
{
    int a = n / 2, b = n - a;
    size_t NA = (size_t)1 << a, NB = (size_t)1 << b;
    if (!(w->Z[q] >= TRUST_MIN))
        return 0;
    const double *eu = w->EU + (size_t)q * NA, *ev = w->EV + (size_t)q * NB;
    const double *r = w->R + (size_t)q * NA, *l = w->L + (size_t)q * NB;
    double *tA = tmp, *tB = tmp + NA, num[64];
    for (size_t s = 0; s < NA; s++)
        tA[s] = eu[s] * r[s];
    for (size_t s = 0; s < NB; s++)
        tB[s] = ev[s] * l[s];
    half_numerators(a, tA, num);
    half_numerators(b, tB, num + a);
    double lz = log(w->Z[q]);
    for (int j = 0; j < n; j++) {
        if (!(num[j] >= TRUST_MIN))
            return 0;
        if (lw) /* rounding can put a certain spin at +1e-16 */
            lw[j] = fmin(log(num[j]) - lz, 0.0);
    }
    return 1;
}

/* Decides, for every query, whether the fast path holds (see above). */
static void trust_queries(fast_ws *w, int n, int Q, double *logw, size_t ls)
{
    int a = n / 2, b = n - a;
    double work = (double)Q * (((size_t)1 << a) * a + ((size_t)1 << b) * b) * 2.0;
#pragma omp parallel for schedule(static) if (work > BA_PAR_MIN_WORK)
    for (int q = 0; q < Q; q++) {
        double *tmp = w->ref + ((size_t)1 << w->nmax) * (size_t)thread_id();
        w->valid[q] = (char)fast_query_marginals(w, n, q, tmp, logw ? logw + (size_t)q * ls : NULL);
    }
}

/* Forward for Q queries with n spins each. logw_q = logw + q*ls. */
static void fast_forward_n(fast_ws *w, int n, int Q, const double *h, size_t hs,
                           const double *J, int ldj, double *logw, size_t ls)
{
    build_kernel(w, n, J, ldj);
    query_products(w, n, Q, h, hs);
    trust_queries(w, n, Q, logw, ls);
    for (int q = 0; q < Q; q++)
        if (!w->valid[q])
            ba_ref_marginals_ws(n, h ? h + (size_t)q * hs : zero_fields, J, ldj,
                                logw + (size_t)q * ls, w->ref);
}

int ba_fast_forward(int B, int T, const double *h, const double *J, int ldj, double *logw,
                    long *fallbacks, char *err)
{
    fast_ws w;
    int rc = ws_init(&w, T, B, 0, err);
    if (rc)
        return rc;
    long fb = 0;
    size_t TT = (size_t)T * T;
    for (int n = 1; n <= T; n++) {
        int i = n - 1; /* query row with n visible keys */
        fast_forward_n(&w, n, B, h ? h + (size_t)i * T : NULL, TT, J, ldj, logw + (size_t)i * T,
                       TT);
        for (int q = 0; q < B; q++) {
            fb += !w.valid[q];
            for (int j = n; j < T; j++)
                logw[(size_t)q * TT + (size_t)i * T + j] = -INFINITY;
        }
    }
    ws_free(&w);
    if (fallbacks)
        *fallbacks = fb;
    return BA_OK;
}

/* Backward for Q queries with n spins: dh_q += Cov(G, s), dJ += sum over
 * queries Cov(G, s_j s_k). dh may be NULL. */
static void fast_backward_n(fast_ws *w, int n, int Q, const double *h, size_t hs,
                            const double *J, int ldj, const double *g, size_t gs, double *dh,
                            size_t dhs, double *dJ, int lddj)
{
    int a = n / 2, b = n - a;
    size_t NA = (size_t)1 << a, NB = (size_t)1 << b;
    build_kernel(w, n, J, ldj);
    query_products(w, n, Q, h, hs);
    trust_queries(w, n, Q, NULL, 0);
    /* G_A, G_B and the second halves of EU/EV: eu*G_A, ev*G_B */
    for (int q = 0; q < Q; q++) {
        const double *gq = g + (size_t)q * gs;
        double *GA = w->GA + (size_t)q * NA, *GB = w->GB + (size_t)q * NB;
        pattern_sums(a, gq, GA);
        pattern_sums(b, gq + a, GB);
        double *eug = w->EU + ((size_t)Q + q) * NA, *evg = w->EV + ((size_t)Q + q) * NB;
        const double *eu = w->EU + (size_t)q * NA, *ev = w->EV + (size_t)q * NB;
        for (size_t s = 0; s < NA; s++)
            eug[s] = eu[s] * GA[s];
        for (size_t s = 0; s < NB; s++)
            evg[s] = ev[s] * GB[s];
    }
    /* R2 = (EV o G_B) K'^T, L2 = (EU o G_A) K' into the second halves */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Q, (int)NA, (int)NB, 1.0,
                w->EV + (size_t)Q * NB, (int)NB, w->K, (int)NB, 0.0, w->R + (size_t)Q * NA,
                (int)NA);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Q, (int)NB, (int)NA, 1.0,
                w->EU + (size_t)Q * NA, (int)NA, w->K, (int)NB, 0.0, w->L + (size_t)Q * NB,
                (int)NB);
    double work = (double)Q * (NA * a + NB * b) * 3.0;
#pragma omp parallel for schedule(static) if (work > BA_PAR_MIN_WORK)
    for (int q = 0; q < Q; q++) {
        double *wA = w->WA + (size_t)q * NA, *wB = w->WB + (size_t)q * NB;
        double *U1 = w->UU + (size_t)q * NA, *U2 = w->UU + ((size_t)Q + q) * NA;
        if (!w->valid[q]) {
            /* handled by the reference path below; contributes nothing here */
            memset(wA, 0, sizeof(double) * NA), memset(wB, 0, sizeof(double) * NB);
            memset(U1, 0, sizeof(double) * NA), memset(U2, 0, sizeof(double) * NA);
            continue;
        }
        const double *eu = w->EU + (size_t)q * NA, *ev = w->EV + (size_t)q * NB;
        const double *r = w->R + (size_t)q * NA, *l = w->L + (size_t)q * NB;
        const double *r2 = w->R + ((size_t)Q + q) * NA, *l2 = w->L + ((size_t)Q + q) * NB;
        const double *GA = w->GA + (size_t)q * NA, *GB = w->GB + (size_t)q * NB;
        double iz = 1.0 / w->Z[q], gbar = 0.0;
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
    /* dJ_AA and dJ_BB from the query-summed half weights (summed in query
     * order, so the result does not depend on the thread count). */
    for (int q = 1; q < Q; q++) {
        for (size_t s = 0; s < NA; s++)
            w->WA[s] += w->WA[(size_t)q * NA + s];
        for (size_t s = 0; s < NB; s++)
            w->WB[s] += w->WB[(size_t)q * NB + s];
    }
    for (size_t s = 0; s < NA; s++)
        for (int j = 0; j < a; j++)
            for (int k = j + 1; k < a; k++)
                dJ[(size_t)j * lddj + k] += ((s >> j ^ s >> k) & 1) ? -w->WA[s] : w->WA[s];
    for (size_t s = 0; s < NB; s++)
        for (int j = 0; j < b; j++)
            for (int k = j + 1; k < b; k++)
                dJ[(size_t)(a + j) * lddj + a + k] +=
                    ((s >> j ^ s >> k) & 1) ? -w->WB[s] : w->WB[s];
    /* dJ_AB = S_A^T [K' o (U1^T EV + U2^T (EV o G_B))] S_B */
    if (a > 0 && b > 0) {
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)NA, (int)NB, 2 * Q, 1.0, w->UU,
                    (int)NA, w->EV, (int)NB, 0.0, w->M, (int)NB);
        size_t N = NA * NB;
#pragma omp parallel for schedule(static) if (2.0 * N > BA_PAR_MIN_WORK)
        for (size_t i = 0; i < N; i++)
            w->M[i] *= w->K[i];
        for (size_t s = 0; s < NB; s++)
            for (int k = 0; k < b; k++)
                w->SB[s * b + k] = (s >> k & 1) ? 1.0 : -1.0;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)NA, b, (int)NB, 1.0, w->M,
                    (int)NB, w->SB, b, 0.0, w->PS, b);
        for (size_t s = 0; s < NA; s++)
            for (int j = 0; j < a; j++) {
                double sj = (s >> j & 1) ? 1.0 : -1.0;
                for (int k = 0; k < b; k++)
                    dJ[(size_t)j * lddj + a + k] += sj * w->PS[s * b + k];
            }
    }
    /* queries the fast path did not trust: exact reference enumeration */
    for (int q = 0; q < Q; q++)
        if (!w->valid[q])
            ba_ref_backward_ws(n, h ? h + (size_t)q * hs : zero_fields, J, ldj, g + (size_t)q * gs,
                               dh ? dh + (size_t)q * dhs : NULL, dJ, lddj, w->ref);
}

int ba_fast_backward(int B, int T, const double *h, const double *J, int ldj, const double *g,
                     double *dh, double *dJ, char *err)
{
    fast_ws w;
    int rc = ws_init(&w, T, B, 1, err);
    if (rc)
        return rc;
    size_t TT = (size_t)T * T;
    double *dJn = dJ ? dJ : calloc((size_t)T * ldj, sizeof(double));
    if (!dJn) {
        ws_free(&w);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate dJ scratch for T = %d", T);
    }
    for (int n = 1; n <= T; n++) {
        int i = n - 1;
        fast_backward_n(&w, n, B, h ? h + (size_t)i * T : NULL, TT, J, ldj, g + (size_t)i * T,
                        TT, dh ? dh + (size_t)i * T : NULL, TT, dJn, ldj);
    }
    if (!dJ)
        free(dJn);
    ws_free(&w);
    return BA_OK;
}

int ba_fast_marginals1(int n, const double *h, const double *J, int ldj, double *logw, char *err)
{
    fast_ws w;
    int rc = ws_init(&w, n, 1, 0, err);
    if (rc)
        return rc;
    fast_forward_n(&w, n, 1, h, (size_t)n, J, ldj, logw, (size_t)n);
    ws_free(&w);
    return BA_OK;
}

int ba_fast_backward1(int n, const double *h, const double *J, int ldj, const double *g,
                      double *dh, double *dJ, char *err)
{
    fast_ws w;
    int rc = ws_init(&w, n, 1, 1, err);
    if (rc)
        return rc;
    double *dJn = dJ ? dJ : calloc((size_t)n * ldj, sizeof(double));
    if (!dJn) {
        ws_free(&w);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate dJ scratch for n = %d", n);
    }
    fast_backward_n(&w, n, 1, h, (size_t)n, J, ldj, g, (size_t)n, dh, (size_t)n, dJn, ldj);
    if (!dJ)
        free(dJn);
    ws_free(&w);
    return BA_OK;
}
