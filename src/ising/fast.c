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
 * The products run in double, or (the float model's setting,
 * ba_engine_ctx_set_f32) in float over blocks added in double; the rest is
 * double either way (src/ising_fast.h). A query whose partition sum or any
 * marginal numerator falls below trust_min is recomputed by the reference
 * enumeration, which shifts each half separately: values lost to underflow
 * in the products are bounded by about 2^n times the smallest normal of the
 * products' type, a negligible fraction of anything above trust_min.
 *
 * A context keeps the kernels K' of every n (and R, L, Z) from the forward
 * for the backward of the same batch, and keeps its buffers across steps so
 * large kernels are not faulted in afresh at every call. */
#include "ising/fast.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* This file's engine (defined at the end; the table in src/ising/engine.c
 * lists it). */
extern const ba_engine_ops ba_engine_fast_ops;
/* the message of a failed allocation of the reference fallback: the fast
 * engine's, which is what the user asked for */
#define FALLBACK_NOMEM "fast engine: cannot allocate its reference fallback for n = %d"

/* A query is trusted when its partition sum and every marginal numerator
 * are at least this (double products): values lost to underflow are then
 * below 1e-19 of them. f32 products flush terms below FLT_MIN, at most 2^n
 * of them, so there the bound is 2^(n+24) FLT_MIN: the loss stays below
 * 2^-24 of what is kept (trust_min). */
#define TRUST_MIN 1e-280

static double trust_min(const ba_engine_ctx *c, int n)
{
    return c->f32 ? ldexp(FLT_MIN, n + 24) : TRUST_MIN;
}

static void free_store(ba_engine_ctx *c)
{
    free(c->K), free(c->Kf), free(c->rho), free(c->gam), free(c->R), free(c->L), free(c->Z);
    free(c->valid);
    c->K = c->rho = c->gam = c->R = c->L = c->Z = NULL;
    c->Kf = NULL;
    c->valid = NULL;
    c->cap_T = c->cap_Q = 0;
    c->fwd_B = c->fwd_T = 0;
}

static void free_scratch(ba_engine_ctx *c)
{
    double **b[] = {&c->eA, &c->eB, &c->F,  &c->cvec, &c->colmx, &c->EU, &c->EV, &c->tmp,
                    &c->rows, &c->M, &c->R2, &c->L2, &c->UU, &c->GA, &c->GB, &c->WA, &c->WB,
                    &c->SB, &c->PS};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        free(*b[i]);
        *b[i] = NULL;
    }
    float **f[] = {&c->EUf, &c->EVf, &c->ftmp, &c->Mf, &c->UUf, &c->SBf};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        free(*f[i]);
        *f[i] = NULL;
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
    ba_engine_ctx_free(c->dbl);
    free(c);
}

long ba_engine_ctx_fallbacks(const ba_engine_ctx *c) { return c ? c->fallbacks : 0; }

void ba_engine_ctx_set_f32(ba_engine_ctx *c, int on)
{
    if (!c || c->f32 == !!on)
        return;
    /* the buffers differ by precision, and so would the stored forward */
    free_store(c);
    free_scratch(c);
    ba_engine_ctx_free(c->dbl);
    c->dbl = NULL, c->fwd_dbl = 0;
    c->f32 = !!on;
}

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
        if (c->f32)
            c->Kf = malloc(sizeof(float) * k);
        else
            c->K = malloc(sizeof(double) * k);
        c->rho = malloc(sizeof(double) * sa);
        c->gam = malloc(sizeof(double) * sb);
        c->R = malloc(sizeof(double) * q * sa);
        c->L = malloc(sizeof(double) * q * sb);
        c->Z = malloc(sizeof(double) * q * T);
        c->valid = malloc(q * T);
        if (!(c->K || c->Kf) || !c->rho || !c->gam || !c->R || !c->L || !c->Z || !c->valid) {
            free_store(c);
            return mib_fail(err, T, (c->f32 ? sizeof(float) : sizeof(double)) * (double)k);
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
        int f32_ok = 1;
        if (c->f32) {
            size_t ft = q * (NAm > NBm ? NAm : NBm);
            ft = ft > NAm * bmax ? ft : NAm * bmax;
            c->EUf = malloc(sizeof(float) * 2 * q * NAm);
            c->EVf = malloc(sizeof(float) * 2 * q * NBm);
            c->ftmp = malloc(sizeof(float) * ft);
            c->rows = malloc(sizeof(double) * ROW_BLOCK * NBm * nt);
            f32_ok = c->EUf && c->EVf && c->ftmp && c->rows;
        }
        if (!c->eA || !c->eB || !c->F || !c->cvec || !c->colmx || !c->EU || !c->EV || !c->tmp ||
            !f32_ok) {
            free_scratch(c);
            return mib_fail(err, T, sizeof(double) * 2.0 * q * (NAm + NBm));
        }
        c->cap_threads = nt;
    }
    if (bwd && !c->has_bwd) {
        T = c->cap_T, q = (size_t)c->cap_Q;
        amax = T / 2, bmax = T - amax;
        NAm = (size_t)1 << amax, NBm = (size_t)1 << bmax;
        if (c->f32) {
            c->Mf = malloc(sizeof(float) * NAm * NBm);
            c->UUf = malloc(sizeof(float) * 2 * q * NAm);
            c->SBf = malloc(sizeof(float) * NBm * bmax);
        } else {
            c->M = malloc(sizeof(double) * NAm * NBm);
            c->SB = malloc(sizeof(double) * NBm * bmax);
        }
        c->R2 = malloc(sizeof(double) * q * NAm);
        c->L2 = malloc(sizeof(double) * q * NBm);
        c->UU = malloc(sizeof(double) * 2 * q * NAm);
        c->GA = malloc(sizeof(double) * q * NAm);
        c->GB = malloc(sizeof(double) * q * NBm);
        c->WA = malloc(sizeof(double) * q * NAm);
        c->WB = malloc(sizeof(double) * q * NBm);
        c->PS = malloc(sizeof(double) * NAm * bmax);
        int mats = c->f32 ? c->Mf && c->UUf && c->SBf : c->M && c->SB;
        if (!mats || !c->R2 || !c->L2 || !c->UU || !c->GA || !c->GB || !c->WA || !c->WB ||
            !c->PS) {
            free_scratch(c);
            return mib_fail(err, T, (c->f32 ? sizeof(float) : sizeof(double)) *
                                        (double)(NAm * NBm));
        }
        c->has_bwd = 1;
    }
    return BA_OK;
}

static ba_fast_view view(ba_engine_ctx *c, int n, int Q)
{
    ba_fast_view v;
    v.n = n, v.a = n / 2, v.b = n - n / 2, v.Q = Q;
    v.NA = (size_t)1 << v.a, v.NB = (size_t)1 << v.b;
    v.K = c->K ? c->K + c->offK[n] : NULL;
    v.Kf = c->Kf ? c->Kf + c->offK[n] : NULL;
    v.rho = c->rho + c->offA[n];
    v.gam = c->gam + c->offB[n];
    v.R = c->R + (size_t)Q * c->offA[n];
    v.L = c->L + (size_t)Q * c->offB[n];
    v.Z = c->Z + (size_t)(n - 1) * Q;
    v.valid = c->valid + (size_t)(n - 1) * Q;
    return v;
}

static const double zero_fields[MAXN]; /* the fields of the coupling variant */

/* Numerators of P(s_j = +1) for the spins of one half from the half-state
 * weights t (2^m values), into num[0..m): for each j the patterns with bit
 * j set, which come in contiguous runs of 2^j. */
static void half_numerators(int m, const double *t, double *num)
{
    size_t N = (size_t)1 << m;
    for (int j = 0; j < m; j++) {
        size_t w = (size_t)1 << j;
        double acc = 0.0;
        for (size_t base = w; base < N; base += 2 * w)
            for (size_t s = base; s < base + w; s++)
                acc += t[s];
        num[j] = acc;
    }
}

/* Marginals of query q; returns 1 if the fast path holds for it (partition
 * sum and every numerator at least trust_min), writing lw[0..n) when lw is
 * not NULL. tmp holds NA + NB doubles. */
static int query_marginals(const ba_engine_ctx *c, const ba_fast_view *v, int q, double *tmp,
                           double *lw)
{
    size_t NA = v->NA, NB = v->NB;
    double trust = trust_min(c, v->n);
    if (!(v->Z[q] >= trust))
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
        if (!(num[j] >= trust))
            return 0;
        if (lw) /* rounding can put a certain spin at +1e-16 */
            lw[j] = fmin(log(num[j]) - lz, 0.0);
    }
    return 1;
}

/* R = EV K'^T (Q, NA) and L = EU K' (Q, NB) from the rows row0.. of EU and
 * EV (0: the forward's vectors; Q: the backward's G-weighted ones), in the
 * context's precision (f32: the rows are converted to float first). */
static void products(ba_engine_ctx *c, const ba_fast_view *v, int row0, double *R, double *L)
{
    int Q = v->Q, NA = (int)v->NA, NB = (int)v->NB;
    const double *EU = c->EU + (size_t)row0 * NA, *EV = c->EV + (size_t)row0 * NB;
    if (!c->f32) {
        ba_fast_dgemm(CblasNoTrans, CblasTrans, Q, NA, NB, EV, NB, v->K, NB, R, NA, 0);
        ba_fast_dgemm(CblasNoTrans, CblasNoTrans, Q, NB, NA, EU, NA, v->K, NB, L, NB, 0);
        return;
    }
    float *EUf = c->EUf + (size_t)row0 * NA, *EVf = c->EVf + (size_t)row0 * NB;
    ba_fast_to_float(EUf, EU, (size_t)Q * NA);
    ba_fast_to_float(EVf, EV, (size_t)Q * NB);
    ba_fast_mgemm(CblasNoTrans, CblasTrans, Q, NA, NB, EVf, NB, v->Kf, NB, R, NA, 0, c->ftmp);
    ba_fast_mgemm(CblasNoTrans, CblasNoTrans, Q, NB, NA, EUf, NA, v->Kf, NB, L, NB, 0, c->ftmp);
}

/* Kernel, products, partition sums, trust flags and (if logw) the marginals
 * of the Q queries with n spins; untrusted queries go to the reference
 * enumeration. Returns the number of those, or -1 when its workspace cannot
 * be allocated. */
static long forward_n(ba_engine_ctx *c, int n, int Q, const double *h, size_t hs,
                      const double *J, int ldj, double *logw, size_t ls)
{
    ba_fast_view v = view(c, n, Q);
    ba_fast_build_kernel(c, &v, J, ldj);
    ba_fast_query_vectors(c, &v, h, hs);
    /* R = EV K'^T, L = EU K' */
    products(c, &v, 0, v.R, v.L);
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
    if (fb && logw && !c->defer_ref) {
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

/* d[j] += sum_s s_j w(s) over the 2^m patterns s of a half. */
static void add_spin_sums(int m, const double *w, double *d)
{
    size_t N = (size_t)1 << m;
    double num[MAXN], all = 0.0;
    half_numerators(m, w, num);
    for (size_t s = 0; s < N; s++)
        all += w[s];
    for (int j = 0; j < m; j++)
        d[j] += 2.0 * num[j] - all;
}

/* PS = (K' o M) S_B (NA, b), M = UU^T EV summed over the 2Q rows of UU
 * (U1 then U2) and EV (ev then ev o G_B), S_B the +-1 spins of the B half.
 * f32: M and its product with K' in float (each entry a float sum of 2Q
 * terms), the product with S_B in float blocks added in double. */
static void cross_moments(ba_engine_ctx *c, const ba_fast_view *v)
{
    int Q = v->Q, NA = (int)v->NA, NB = (int)v->NB, b = v->b;
    size_t N = v->NA * v->NB;
    if (!c->f32) {
        ba_fast_dgemm(CblasTrans, CblasNoTrans, NA, NB, 2 * Q, c->UU, NA, c->EV, NB, c->M, NB, 1);
#pragma omp parallel for schedule(static) if (2.0 * N > BA_PAR_MIN_WORK)
        for (size_t i = 0; i < N; i++)
            c->M[i] *= v->K[i];
        for (int s = 0; s < NB; s++)
            for (int k = 0; k < b; k++)
                c->SB[(size_t)s * b + k] = (s >> k & 1) ? 1.0 : -1.0;
        ba_fast_dgemm(CblasNoTrans, CblasNoTrans, NA, b, NB, c->M, NB, c->SB, b, c->PS, b, 1);
        return;
    }
    /* EVf rows Q..2Q hold ev o G_B (products above); rows 0..Q now ev */
    ba_fast_to_float(c->EVf, c->EV, (size_t)Q * NB);
    ba_fast_to_float(c->UUf, c->UU, (size_t)2 * Q * NA);
    ba_fast_sgemm(CblasTrans, CblasNoTrans, NA, NB, 2 * Q, c->UUf, NA, c->EVf, NB, c->Mf, NB, 1);
#pragma omp parallel for schedule(static) if (2.0 * N > BA_PAR_MIN_WORK)
    for (size_t i = 0; i < N; i++)
        c->Mf[i] *= v->Kf[i];
    for (int s = 0; s < NB; s++)
        for (int k = 0; k < b; k++)
            c->SBf[(size_t)s * b + k] = (s >> k & 1) ? 1.0f : -1.0f;
    ba_fast_mgemm(CblasNoTrans, CblasNoTrans, NA, b, NB, c->Mf, NB, c->SBf, b, c->PS, b, 1,
                  c->ftmp);
}

/* Backward of the Q queries with n spins, using the kernel, products and
 * trust flags the forward stored: dh_q += Cov(G, s) (dh may be NULL),
 * dJ += sum over queries Cov(G, s_j s_k). Returns -1 when the reference
 * fallback's workspace cannot be allocated. */
static int backward_n(ba_engine_ctx *c, int n, int Q, const double *h, size_t hs,
                      const double *J, int ldj, const double *g, size_t gs, double *dh,
                      size_t dhs, double *dJ, int lddj)
{
    ba_fast_view v = view(c, n, Q);
    int a = v.a, b = v.b;
    size_t NA = v.NA, NB = v.NB;
    ba_fast_query_vectors(c, &v, h, hs); /* cheap: Q (NA + NB) exponentials */
    double work = (double)Q * (NA + NB) * 4.0;
#pragma omp parallel for schedule(static) if (work > BA_PAR_MIN_WORK)
    for (int q = 0; q < Q; q++) {
        const double *gq = g + (size_t)q * gs;
        double *GA = c->GA + (size_t)q * NA, *GB = c->GB + (size_t)q * NB;
        /* G less its value at s = all -1 (the covariances do not see a
         * constant): the attention's g = dL/dm reaches 1/(2 sum_j w_j),
         * 1e13 and beyond when every key of a query is unlikely, and
         * G(s) - Gbar formed from sum_j g_j s_j would then cancel two
         * numbers of that size at the likely states, all spins near -1,
         * leaving an error of 1e-16 of them in gradients of order 1e-3.
         * Measured at h ~ -20: dh off by 7e13, dJ by 1e23 in double, and
         * float products overflowing to NaN once g passed FLT_MAX.
         * Counted from -1, G is 0 there and only unlikely states carry
         * the large g; the symmetric case, spins likely +1, keeps g of
         * order da since then sum_j w_j >= 1/2. */
        ba_fast_plus_sums(a, gq, GA);
        ba_fast_plus_sums(b, gq + a, GB);
        double *eug = c->EU + ((size_t)Q + q) * NA, *evg = c->EV + ((size_t)Q + q) * NB;
        const double *eu = c->EU + (size_t)q * NA, *ev = c->EV + (size_t)q * NB;
        for (size_t s = 0; s < NA; s++)
            eug[s] = eu[s] * GA[s];
        for (size_t s = 0; s < NB; s++)
            evg[s] = ev[s] * GB[s];
    }
    /* R2 = (EV o G_B) K'^T, L2 = (EU o G_A) K' */
    products(c, &v, Q, c->R2, c->L2);
    work = (double)Q * (NA + NB) * 12.0;
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
        if (dh) { /* sum_s s_j w(s) = 2 (sum over s_j = +1) - (sum over all) */
            add_spin_sums(a, wA, dh + (size_t)q * dhs);
            add_spin_sums(b, wB, dh + (size_t)q * dhs + a);
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
        cross_moments(c, &v);
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
static int forward_batch(ba_engine_ctx *c, int B, int T, const double *h, const double *J,
                         int ldj, double *logw, char *err);

int ba_engine_forward_fast(ba_engine_ctx *c, int B, int T, const double *h, const double *J,
                           int ldj, double *logw, char *err)
{
    if (!h) {
        /* Zero fields: P(s) = P(-s), so every marginal is exactly 1/2
         * whatever J is (the coupling variant), and no kernel is needed.
         * The reference still enumerates: the tests hold this against it. */
        c->fwd_B = c->fwd_T = 0, c->fwd_dbl = 0;
        c->fallbacks = 0;
        for (long q = 0; logw && q < (long)B * T; q++) {
            int i = (int)(q % T);
            for (int j = 0; j < T; j++)
                logw[(size_t)q * T + j] = j <= i ? -M_LN2 : -INFINITY;
        }
        return BA_OK;
    }
    return forward_batch(c, B, T, h, J, ldj, logw, err);
}

/* The forward of a batch. f32: a batch holding queries the float products
 * cannot trust runs again on the twin context with double products, whose
 * trust threshold (1e-280) leaves only the truly extreme queries to the
 * reference enumeration, 2^n patterns each: a trained brackets model at
 * T = 16 whose attention had sharpened (marginals below ~1e-26) sent so
 * many queries there that a step slowed from 200/s to about 1/s. The
 * twin keeps its forward for the backward of the same batch. Without room
 * for the twin's buffers the float pass's untrusted queries go to the
 * reference, as before. */
static int forward_batch(ba_engine_ctx *c, int B, int T, const double *h, const double *J,
                         int ldj, double *logw, char *err)
{
    c->fwd_dbl = 0;
    c->defer_ref = c->f32;
    int rc = forward_kernels(c, B, T, h, J, ldj, logw, err);
    c->defer_ref = 0;
    if (rc || !c->f32 || c->fallbacks == 0)
        return rc;
    if (!c->dbl)
        c->dbl = ba_engine_ctx_new();
    rc = BA_ERR_NOMEM;
    if (c->dbl) {
        c->dbl->stop = c->stop;
        rc = forward_kernels(c->dbl, B, T, h, J, ldj, logw, err);
        c->dbl->stop = NULL;
    }
    if (rc == BA_OK) {
        c->fwd_dbl = 1, c->fallbacks = c->dbl->fallbacks;
        return BA_OK;
    }
    if (rc != BA_ERR_NOMEM)
        return rc;
    ba_engine_ctx_free(c->dbl);
    c->dbl = NULL;
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
        if (ba_stop_requested(c->stop)) /* the state is incomplete: no forward kept */
            return ba_fail(err, BA_ERR_INTERRUPTED, "fast engine: stopped on request at n = %d",
                           n);
        int i = n - 1; /* the query row with n visible keys */
        long f = forward_n(c, n, B, h ? h + (size_t)i * T : NULL, TT, J, ldj,
                           logw ? logw + (size_t)i * T : NULL, TT);
        if (f < 0)
            return ba_fail(err, BA_ERR_NOMEM, FALLBACK_NOMEM,
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
        if ((rc = forward_batch(c, B, T, h, J, ldj, NULL, err)))
            return rc;
    }
    if (c->fwd_dbl) { /* the batch's forward ran on the double twin */
        c->dbl->stop = c->stop;
        rc = ba_engine_backward_fast(c->dbl, B, T, h, J, ldj, g, dh, dJ, err);
        c->dbl->stop = NULL;
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
        if (ba_stop_requested(c->stop)) {
            rc = ba_fail(err, BA_ERR_INTERRUPTED, "fast engine: stopped on request at n = %d", n);
            break;
        }
        if (backward_n(c, n, B, h ? h + (size_t)i * T : NULL, TT, J, ldj, g + (size_t)i * T, TT,
                       dh ? dh + (size_t)i * T : NULL, TT, dJn, ldj) < 0)
            rc = ba_fail(err, BA_ERR_NOMEM, FALLBACK_NOMEM,
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
        rc = ba_fail(err, BA_ERR_NOMEM, FALLBACK_NOMEM, n);
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
        rc = ba_fail(err, BA_ERR_NOMEM, FALLBACK_NOMEM, n);
    free(dJn);
    ba_engine_ctx_free(c);
    return rc;
}

/* ------------------------------------------------ the engine interface */

static int fast_rows_forward(const ba_engine_rows *r, double *logw, char *err)
{
    int rc = ba_engine_check_spins(&ba_engine_fast_ops, r->T, r->J, r->ldj, err);
    if (rc)
        return rc;
    if (!r->ctx)
        return ba_fast_forward(r->B, r->T, r->h, r->J, r->ldj, logw, NULL, err);
    r->ctx->stop = r->stop;
    rc = ba_engine_forward_fast(r->ctx, r->B, r->T, r->h, r->J, r->ldj, logw, err);
    r->ctx->stop = NULL;
    return rc;
}

static int fast_rows_backward(const ba_engine_rows *r, const double *g, double *dh, double *dJ,
                              char *err)
{
    int rc = ba_engine_check_spins(&ba_engine_fast_ops, r->T, r->J, r->ldj, err);
    if (rc)
        return rc;
    if (!r->ctx)
        return ba_fast_backward(r->B, r->T, r->h, r->J, r->ldj, g, dh, dJ, err);
    r->ctx->stop = r->stop;
    rc = ba_engine_backward_fast(r->ctx, r->B, r->T, r->h, r->J, r->ldj, g, dh, dJ, err);
    r->ctx->stop = NULL;
    return rc;
}

/* Past the limit: chosen by auto, the way out is a band; chosen by name,
 * the cost is its two 2^T kernels. */
static int fast_check(const ba_engine_limits *q, char *err)
{
    int lim = BA_FAST_MAX_SPINS;
    if (q->T <= lim)
        return BA_OK;
    if (q->is_auto)
        return ba_fail(err, BA_ERR_LIMIT,
                       "T = %d is too large for exact %s attention with full-range couplings: the "
                       "exact engines enumerate 2^T spin states and go to T = %d; couplings of "
                       "range W (config 'band', --band W) are exact at any T with the band "
                       "engine",
                       q->T, q->attn, lim);
    return ba_fail(err, BA_ERR_LIMIT,
                   "T = %d is too large for exact %s attention: the fast engine would "
                   "need %.0f MiB for its two 2^T kernels and accepts T <= %d",
                   q->T, q->attn, 2.0 * ldexp(1.0, q->T) * sizeof(double) / 1048576.0, lim);
}

const ba_engine_ops ba_engine_fast_ops = {
    .id = BA_ENGINE_FAST,
    .name = "fast",
    .summary = "exact: splits the 2^n states in two halves with a coupling kernel shared by "
               "all queries",
    .caps = BA_ENGINE_CAP_EXACT | BA_ENGINE_CAP_ENUMERATE | BA_ENGINE_CAP_CONTEXT |
            BA_ENGINE_CAP_F32,
    .max_spins = BA_FAST_MAX_SPINS,
    .check = fast_check,
    .forward = fast_rows_forward,
    .backward = fast_rows_backward,
};
