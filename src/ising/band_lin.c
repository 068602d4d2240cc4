/* The band engine's linear path (spec section 8: "rescale per step"): the
 * recursions of src/ising_band.c with alpha and beta as plain doubles
 * rescaled at every step, and products where the log path takes a
 * log-sum-exp (an exp and a log1p per transition). Same window states
 * (bit d of x holds s_{t-d}), same steps, same quantities; only the number
 * representation differs.
 *
 * Step t's factor psi_t(x', s) = exp(s h_t) exp(s u_t(x')) with
 * u_t(x') = sum_d J_{t-d,t} s_{t-d}: the second factor depends on the
 * couplings alone, so one table of exp(-+u_t(x')) (in two halves, see
 * "tables") serves every query of a call, and a query step costs two
 * field factors exp(+-h_t) (vectorised over the query) instead of
 * 2^(W+1) exps and log1ps.
 *
 * Scaling. Each step multiplies by 2^-e, 2^e the exponent of the previous
 * step's sum (pow2_inv: the sum lands in [1/2, 1)): the per-step
 * marginals are ratios, so the scale cancels, and folding it into the
 * step's two field factors costs no extra pass. The dual parts
 * (D = d alpha / d eps, with alpha's scale) are shifted by c alpha,
 * c = sum D 2^-e, between 1/2 and 1 times the mean of D/alpha, folded
 * into the step the same way
 * (D_t = T D_{t-1} + (g_t s - c) alpha_t), so D/alpha = E[G | window] + const
 * stays of the size of a window's g instead of growing with t; the
 * constant cancels against Gbar. beta and its dual likewise.
 *
 * Underflow is the one risk (nothing is shifted by its maximum here): see
 * the guard at the end of the file for the bound that decides which
 * queries may take this path.
 *
 * Reductions run in fixed lanes: one running sum of doubles waits on the
 * adder's latency at every term, and without -ffast-math the compiler may
 * not split it itself. The lanes depend on the length alone, so results do
 * not depend on threads or on the instruction set. */
#include "ising/ising.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The kernels below are inlined into one copy per window size We <= 8
 * (ba_band_lin_forward/backward switch on it): with 2^We a constant, the
 * step loops of the small windows unroll into straight vector code, where
 * a loop of a few iterations spends more on its own control than on the
 * arithmetic. */
#if defined(__GNUC__)
#define LIN_INLINE static inline __attribute__((always_inline))
#else
#define LIN_INLINE static inline
#endif
/* The query kernels are compiled three times where the toolchain picks one
 * at load time (GCC/clang on x86-64 glibc, as src/util.c and src/dqa.c):
 * AVX-512, AVX2 and the SSE2 baseline. ISO C mode keeps floating-point
 * contraction off and every reduction runs in explicit lanes, so all do
 * the same IEEE operations in the same order: bit-identical results. */
#ifndef LIN_CLONES /* -DLIN_CLONES= builds one version, for experiments */
/* GCC only: clang 14 (the fuzz build's) emits no resolver for these
 * clones, and the symbols go missing at link time */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute) && !defined(__clang__)
#if __has_attribute(target_clones)
#define LIN_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
#endif
#endif
#ifndef LIN_CLONES
#define LIN_CLONES
#endif
/* The step loops read and write distinct arrays, but once inlined the
 * compiler no longer sees their restrict qualifiers, and a loop touching
 * eight arrays needs more run-time alias checks than it will emit: it
 * would stay scalar. */
#if defined(__clang__)
#define LIN_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define LIN_IVDEP _Pragma("GCC ivdep")
#else
#define LIN_IVDEP
#endif

/* One thread's workspace (ba_band_lin_ws_doubles). A, D: every step's
 * forward values (step t at t*S; D holds every step's beta in the
 * forward-only kernel); ep, em, g: per step of the query; the rest hold
 * one step. */
typedef struct {
    double *A, *D;             /* (T,S) */
    double *ep, *em, *g;       /* (T) exp(h_t), exp(-h_t), scaled g_t */
    double *B, *DB, *Bn, *DBn; /* (S) beta and its dual at t and t-1 */
    double *qd, *r, *P;        /* (S) pair weights, scratch */
} lin_ws;

size_t ba_band_lin_ws_doubles(int we, int T)
{
    size_t S = (size_t)1 << we;
    return 2 * S * (size_t)T + 3 * (size_t)T + 7 * S;
}

static lin_ws lin_carve(double *p, int we, int T)
{
    size_t S = (size_t)1 << we;
    lin_ws w;
    w.A = p, p += S * (size_t)T;
    w.ep = p, w.em = p + T, w.g = p + 2 * (size_t)T, p += 3 * (size_t)T;
    double **v[] = {&w.B, &w.DB, &w.Bn, &w.DBn, &w.qd, &w.r, &w.P};
    for (int j = 0; j < 7; j++, p += S)
        *v[j] = p;
    w.D = p;
    return w;
}

/* Reductions in up to 16 fixed lanes (lane j takes x = j mod 16), the
 * lanes started from the first block (a sum that starts from 0 cannot
 * drop the 0 + x in IEEE arithmetic) and folded in halves, l[j] += l[j+m]
 * for m = 8, 4, 2 (L lanes, a power of two up to 16): a fixed order, which
 * the compiler keeps in vector registers. Even lanes end in l[0], odd
 * ones in l[1]. */
LIN_INLINE void fold_lanes(double *l, size_t L)
{
    /* written out: a loop over m would keep l in memory */
    if (L >= 16)
        for (int j = 0; j < 8; j++)
            l[j] += l[j + 8];
    if (L >= 8)
        for (int j = 0; j < 4; j++)
            l[j] += l[j + 4];
    if (L >= 4)
        for (int j = 0; j < 2; j++)
            l[j] += l[j + 2];
}

/* sum of x (n, a power of two) */
LIN_INLINE double sum_lanes(const double *restrict x, size_t n)
{
    if (n < 16) {
        double l[16] = {0}; /* all read lanes are written; quiets -Wmaybe-uninitialized */
        for (size_t j = 0; j < n; j++)
            l[j] = x[j];
        fold_lanes(l, n);
        return n > 1 ? l[0] + l[1] : l[0];
    }
    double l[16];
    for (int j = 0; j < 16; j++)
        l[j] = x[j];
    for (size_t i = 16; i < n; i += 16)
        for (int j = 0; j < 16; j++)
            l[j] += x[i + j];
    fold_lanes(l, 16);
    return l[0] + l[1];
}

/* 2^-e for x = m 2^e, m in [1, 2), x normal: a scale that keeps a step's
 * sum in [1/2, 1) as 1/x would, without the division's latency on the
 * recursion's critical path, and exact (no rounding of the scaled
 * values). From the exponent bits: 2046 - (e + 1023) is -e's field. */
LIN_INLINE double pow2_inv(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    b = (2046ULL << 52) - (b & 0x7ff0000000000000ULL);
    double r;
    memcpy(&r, &b, sizeof r);
    return r;
}

/* log x for normal x > 0 in a form the compiler vectorises: x = 2^e m,
 * m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with s = (m-1)/(m+1),
 * |s| < 0.172, by its odd series to s^23 (truncation below 1e-18 relative),
 * plus e log 2 in two parts (the high one exact for |e| < 2^11). Within 3
 * ulps of the correctly rounded value; e comes out of the bits already as
 * a double (0x43300... is 2^52), as x86 before AVX-512 cannot convert
 * 64-bit integers in vectors. */
LIN_INLINE double log_normal(double x)
{
    const uint64_t off = 0x3fe6a09e667f3bcdULL, bias = 1ULL << 62; /* sqrt(1/2) */
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    uint64_t tmp = b - off + bias, ebits = (tmp >> 52) | 0x4330000000000000ULL;
    uint64_t mb = b - ((tmp - bias) & 0xfff0000000000000ULL);
    double m, e;
    memcpy(&m, &mb, sizeof m);
    memcpy(&e, &ebits, sizeof e);
    e -= 0x1p52 + 1024.0;
    double s = (m - 1.0) / (m + 1.0), z = s * s, p = 2.0 / 23;
    for (int k = 10; k >= 1; k--)
        p = p * z + 2.0 / (2 * k + 1);
    return e * 0x1.62e42fefa3800p-1 + (e * 0x1.ef35793c76730p-45 + (2.0 * s + s * z * p));
}

/* x (n) <- log(x / z) for ratios in (0, 1]: log_normal, or libm where
 * some ratio is not a normal positive number (a forced linear run past
 * the guard). Vectorised with the divisions, away from the recursion. */
static void log_ratio(double *restrict x, const double *restrict z, size_t n)
{
    int odd = 0;
    LIN_IVDEP
    for (size_t i = 0; i < n; i++) {
        x[i] /= z[i];
        odd |= !(x[i] >= DBL_MIN && x[i] <= DBL_MAX);
    }
    if (odd) {
        for (size_t i = 0; i < n; i++)
            x[i] = log(x[i]);
        return;
    }
    LIN_IVDEP
    for (size_t i = 0; i < n; i++)
        x[i] = log_normal(x[i]);
}

/* ep, em (n) = exp(+-h): exp(-|h|) by the library's vectorised
 * ba_exp_nonpos (within 2 ulps), its reciprocal for the other. */
static void field_factors(const lin_ws *w, int n, const double *h)
{
    double *restrict ep = w->ep, *restrict em = w->em;
    if (!h) {
        for (int t = 0; t < n; t++)
            ep[t] = em[t] = 1.0;
        return;
    }
    for (int t = 0; t < n; t++)
        em[t] = -fabs(h[t]);
    ba_exp_nonpos(em, (size_t)n);
    for (int t = 0; t < n; t++) {
        double small = em[t], big = 1.0 / small;
        ep[t] = h[t] >= 0.0 ? big : small;
        em[t] = h[t] >= 0.0 ? small : big;
    }
}

/* ------------------------------------------------------------ tables */

/* The coupling factors of step t, exp(-+u_t(x')), split over the window's
 * low L = min(We-1, 5) bits and high H = We - L bits: u_t = u_lo(x' mod
 * 2^L) + u_hi(x' >> L), so row t of the call's table holds exp(-+u_lo)
 * (2^L each) and exp(-+u_hi) (2^H each): 80 doubles instead of the full
 * table's 512 at We = 8. With a full table (2^(We+1) doubles a row,
 * 4 MiB at T = 1024, We = 8) every step streamed 4 KiB from L2/L3 twice
 * per query, and a step took 1.8x as long at T = 2048 as at T = 128; the
 * halves stay in cache at any T and W, and the steps multiply them back
 * at no extra cost (fwd_step). H >= 1 keeps the leaving spin (the top bit) in the
 * high half; the low half's 2^5 entries are the step loops' contiguous
 * run. An entry's product is within ~2 ulps of the exp of the sum.
 * Couplings past d = t (the first steps) count as 0. */
#ifndef LIN_LO_MAX
#define LIN_LO_MAX 5
#endif
#define LIN_LO_BITS(we) ((we) - 1 < LIN_LO_MAX ? (we) - 1 : LIN_LO_MAX)
size_t ba_band_lin_table_doubles(int we)
{
    int L = LIN_LO_BITS(we), H = we - L;
    return ((size_t)2 << L) + ((size_t)2 << H);
}

/* em, ep (2^b) = exp(-+u) for u(x) = sum_i j[i] s_i(x) over b bits, j[i]
 * for i < nj and 0 above; u by doubling (one addition an entry). */
static void half_table(const double *j, int b, int nj, double *em, double *ep)
{
    double base = 0.0, *u = em; /* u in em's place until its exps */
    for (int i = 0; i < b && i < nj; i++)
        base -= j[i];
    u[0] = base;
    for (int i = 0; i < b; i++) {
        double two = i < nj ? 2.0 * j[i] : 0.0;
        size_t half = (size_t)1 << i;
        for (size_t x = 0; x < half; x++)
            u[x | half] = u[x] + two;
    }
    for (size_t x = 0; x < (size_t)1 << b; x++) {
        double v = u[x];
        em[x] = exp(-v);
        ep[x] = exp(v);
    }
}

void ba_band_lin_table_row(int we, int t, const double *Jb, int ldb, double *row)
{
    int L = LIN_LO_BITS(we), H = we - L, kp = t < we ? t : we;
    const double *j = Jb + (size_t)t * ldb; /* j[i] = J_{t-1-i,t}: bit i of x' */
    half_table(j, L, kp, row, row + ((size_t)1 << L));
    half_table(j + L, H, kp - L, row + ((size_t)2 << L), row + ((size_t)2 << L) + ((size_t)1 << H));
}

/* ------------------------------------------------------------ steps */

/* One step's factors: the halves of the coupling factors (row t of the
 * table), the field factors f0, f1 (s_t = -1, +1; the previous scale
 * folded in) and the dual shifts g0, g1 (the step's G term, 0 or 2 g_t,
 * less c). */
typedef struct {
    const double *lm, *lp, *hm, *hp;
    double f0, f1, g0, g1;
} step_f;

LIN_INLINE step_f step_factors(const ba_band_lin *c, int t, double f0, double f1, double g0,
                               double g1, const int we)
{
    const int L = LIN_LO_BITS(we), H = we - L;
    const double *row = c->tab + (size_t)t * (((size_t)2 << L) + ((size_t)2 << H));
    step_f sf = {row, row + ((size_t)1 << L), row + ((size_t)2 << L),
                 row + ((size_t)2 << L) + ((size_t)1 << H), f0, f1, g0, g1};
    return sf;
}

/* Forward step: a (2^k) of step t from p (2^kp) of step t-1; with dual,
 * d = T dp + g_b a. Once the window is full (k = kp = We), x' = y and
 * y + half (differing in the leaving spin s_{t-We}, the top bit) both
 * lead to x = 2y + b, and y's bits split as (yh, yl) over the factor
 * halves: both x' share exp(u_lo(yl)), and exp(u_hi) of yh and of
 * yh + hh (the top bit) go in with the field factor as four scalars per
 * yh, so the factors cost what the full table's loads would. While the
 * window grows (k = kp + 1), x' = y alone. */
LIN_INLINE void fwd_step(const step_f *sf, int kp, int k, const double *restrict p,
                         const double *restrict dp, double *restrict a, double *restrict d,
                         const int dual, const int we)
{
    const int L = LIN_LO_BITS(we);
    const size_t nl = (size_t)1 << L;
    const double *restrict lm = sf->lm, *restrict lp = sf->lp;
    const double f0 = sf->f0, f1 = sf->f1, g0 = sf->g0, g1 = sf->g1;
    if (k > kp) {
        for (size_t y = 0; y < (size_t)1 << kp; y++) {
            double em = lm[y & (nl - 1)] * sf->hm[y >> L], ep = lp[y & (nl - 1)] * sf->hp[y >> L];
            double a0 = f0 * (p[y] * em), a1 = f1 * (p[y] * ep);
            a[2 * y] = a0, a[2 * y + 1] = a1;
            if (dual)
                d[2 * y] = f0 * (dp[y] * em) + g0 * a0, d[2 * y + 1] = f1 * (dp[y] * ep) + g1 * a1;
        }
        return;
    }
    const size_t half = (size_t)1 << (we - 1), hh = half >> L;
    const double *ph = p + half, *dph = dual ? dp + half : NULL;
    for (size_t yh = 0; yh < hh; yh++) {
        double F0a = f0 * sf->hm[yh], F0b = f0 * sf->hm[yh + hh];
        double F1a = f1 * sf->hp[yh], F1b = f1 * sf->hp[yh + hh];
        LIN_IVDEP
        for (size_t yl = 0; yl < nl; yl++) {
            size_t y = yh * nl + yl;
            double a0 = lm[yl] * (p[y] * F0a + ph[y] * F0b);
            double a1 = lp[yl] * (p[y] * F1a + ph[y] * F1b);
            a[2 * y] = a0, a[2 * y + 1] = a1;
            if (dual) {
                d[2 * y] = lm[yl] * (dp[y] * F0a + dph[y] * F0b) + g0 * a0;
                d[2 * y + 1] = lp[yl] * (dp[y] * F1a + dph[y] * F1b) + g1 * a1;
            }
        }
    }
}

/* Backward step: Bn (2^kp) of step t-1 from B (2^k) of step t,
 * Bn[x'] = sum_b f_b E_b(x') B[x_b]; with dual, DBn likewise from
 * DB + g_b B, and the pair weights qd = w1 - w0, r = v1 - v0 of the two
 * terms w_b, v_b of Bn and DBn. The factor halves as in fwd_step. */
LIN_INLINE void bwd_out(size_t x, double F0, double F1, double lb0, double lb1, double lc0,
                        double lc1, double *restrict Bn, double *restrict DBn,
                        double *restrict qd, double *restrict r, const int dual)
{
    double w0 = F0 * lb0, w1 = F1 * lb1;
    Bn[x] = w0 + w1;
    if (dual) {
        double v0 = F0 * lc0, v1 = F1 * lc1;
        DBn[x] = v0 + v1;
        qd[x] = w1 - w0;
        r[x] = v1 - v0;
    }
}

LIN_INLINE void bwd_step(const step_f *sf, int kp, int k, const double *restrict B,
                         const double *restrict DB, double *restrict Bn, double *restrict DBn,
                         double *restrict qd, double *restrict r, const int dual, const int we)
{
    const int L = LIN_LO_BITS(we);
    const size_t nl = (size_t)1 << L;
    const double *restrict lm = sf->lm, *restrict lp = sf->lp;
    const double f0 = sf->f0, f1 = sf->f1, g0 = sf->g0, g1 = sf->g1;
    if (k > kp) {
        for (size_t y = 0; y < (size_t)1 << kp; y++) {
            double F0 = f0 * sf->hm[y >> L], F1 = f1 * sf->hp[y >> L];
            double lb0 = lm[y & (nl - 1)] * B[2 * y], lb1 = lp[y & (nl - 1)] * B[2 * y + 1];
            double lc0 = 0.0, lc1 = 0.0;
            if (dual)
                lc0 = lm[y & (nl - 1)] * (DB[2 * y] + g0 * B[2 * y]),
                lc1 = lp[y & (nl - 1)] * (DB[2 * y + 1] + g1 * B[2 * y + 1]);
            bwd_out(y, F0, F1, lb0, lb1, lc0, lc1, Bn, DBn, qd, r, dual);
        }
        return;
    }
    const size_t half = (size_t)1 << (we - 1), hh = half >> L;
    for (size_t yh = 0; yh < hh; yh++) {
        double F0a = f0 * sf->hm[yh], F0b = f0 * sf->hm[yh + hh];
        double F1a = f1 * sf->hp[yh], F1b = f1 * sf->hp[yh + hh];
        LIN_IVDEP
        for (size_t yl = 0; yl < nl; yl++) {
            size_t y = yh * nl + yl;
            double lb0 = lm[yl] * B[2 * y], lb1 = lp[yl] * B[2 * y + 1], lc0 = 0.0, lc1 = 0.0;
            if (dual)
                lc0 = lm[yl] * (DB[2 * y] + g0 * B[2 * y]),
                lc1 = lp[yl] * (DB[2 * y + 1] + g1 * B[2 * y + 1]);
            /* x' = y and x' = y + half */
            bwd_out(y, F0a, F1a, lb0, lb1, lc0, lc1, Bn, DBn, qd, r, dual);
            bwd_out(y + half, F0b, F1b, lb0, lb1, lc0, lc1, Bn, DBn, qd, r, dual);
        }
    }
}

/* ------------------------------------------------------ window, pairs */

/* sum over x < n (a power of two >= 2) of a[x] b[x] (+ c[x] d[x] when c
 * is not NULL) per sign of s_t (x even: -1 into out[0], odd: +1 into
 * out[1]). Separate simple loops like this one vectorise lane for lane;
 * one fused loop over four such sums did not (the compiler transposed its
 * lanes instead). */
LIN_INLINE void dot_parity(const double *restrict a, const double *restrict b,
                           const double *restrict c, const double *restrict d, size_t n,
                           double out[2])
{
    double l[16] = {0}; /* all read lanes are written; quiets -Wmaybe-uninitialized */
    if (n < 16) {
        for (size_t j = 0; j < n; j++)
            l[j] = c ? a[j] * b[j] + c[j] * d[j] : a[j] * b[j];
        fold_lanes(l, n);
    } else {
        for (int j = 0; j < 16; j++)
            l[j] = c ? a[j] * b[j] + c[j] * d[j] : a[j] * b[j];
        for (size_t x = 16; x < n; x += 16)
            for (int j = 0; j < 16; j++)
                l[j] += c ? a[x + j] * b[x + j] + c[x + j] * d[x + j] : a[x + j] * b[x + j];
        fold_lanes(l, 16);
    }
    out[0] = l[0], out[1] = l[1];
}

typedef struct {
    double iz, gbar, dh; /* 1/Z: one division a step, then products */
} lin_stats;

/* Z, Gbar and Cov(G, s_t) of a window from A, DA, B, DB (nx): with
 * P Z = A B and N = P Z D = DA B + A DB summed per sign of s_t,
 * Cov = sum_x P (D - Gbar) s_t, and as sum_x P (D - Gbar) = 0 it is 2
 * sum over the rarer sign with that sign, an error relative to the rarer
 * sign's mass (as the log path). Summing N and P per sign before taking
 * Gbar times P off rounds as centring each term would: N already carries
 * the rounding of D's size, which the shifts keep near the spread of G. */
LIN_INLINE lin_stats window_cov(size_t nx, const double *restrict A, const double *restrict DA,
                                const double *restrict B, const double *restrict DB)
{
    double z[2], nn[2];
    dot_parity(A, B, NULL, NULL, nx, z);
    dot_parity(DA, B, A, DB, nx, nn);
    lin_stats st = {1.0 / (z[0] + z[1]), 0.0, 0.0};
    st.gbar = (nn[0] + nn[1]) * st.iz;
    st.dh = (z[1] < z[0] ? 2.0 * (nn[1] - st.gbar * z[1]) : -2.0 * (nn[0] - st.gbar * z[0])) *
            st.iz;
    return st;
}

/* Pair terms at step t: dj[d-1] += scale Cov(G, s_{t-d} s_t), d = 1..kp,
 * from A, DA (2^kp) of step t-1, its window's Gbar and 1/Z and the weights
 * qd, r of the backward step. c(x') Z = sum_s s P(x', s) Z (D - Gbar) =
 * (DA - Gbar A) qd + A r; then sum_x' s_{t-d}(x') c(x') for every bit by
 * halving: the signed sum over the top bit, then fold that bit away (2^kp
 * additions in all, where a signed sum per bit costs kp 2^kp). r and P
 * are overwritten. */
LIN_INLINE void lin_pairs(int kp, const double *restrict A, const double *restrict DA,
                          lin_stats st, const double *restrict qd, double *restrict r,
                          double *restrict P, double scale, double *dj)
{
    size_t half = (size_t)1 << (kp - 1);
    double gb = st.gbar;
    scale *= st.iz;
    LIN_IVDEP
    for (size_t y = 0; y < half; y++) {
        size_t x = y + half;
        double lo = (DA[y] - gb * A[y]) * qd[y] + A[y] * r[y];
        double hi = (DA[x] - gb * A[x]) * qd[x] + A[x] * r[x];
        P[y] = hi - lo;
        r[y] = lo + hi;
    }
    dj[kp - 1] += scale * sum_lanes(P, half);
    for (int i = kp - 2; i >= 0; i--) {
        half = (size_t)1 << i;
        LIN_IVDEP
        for (size_t y = 0; y < half; y++) {
            P[y] = r[y + half] - r[y];
            r[y] += r[y + half];
        }
        dj[i] += scale * sum_lanes(P, half);
    }
}

/* ---------------------------------------------------------- queries */

/* The first step of the forward recursion (alpha_0 and, with dual,
 * D_0 = G_0 alpha_0, G counted from s = -1 as on the log path: 2 g_0 at
 * s_0 = +1, else 0) and its sums. */
LIN_INLINE void fwd_first(const lin_ws *w, const double *gs, double *sa, double *sd,
                          const int dual)
{
    double *A = w->A, *D = w->D;
    A[0] = w->em[0], A[1] = w->ep[0];
    *sa = A[0] + A[1], *sd = 0.0;
    if (dual) {
        D[0] = 0.0, D[1] = 2.0 * gs[0] * A[1];
        *sd = D[0] + D[1];
    }
}

/* Forward step t: alpha_t (and D_t with dual, gs = scaled g) into w->A,
 * w->D from step t-1's; sa, sd: the sums of step t-1, replaced by t's. */
LIN_INLINE void fwd_rec(const ba_band_lin *c, const lin_ws *w, int t, const double *gs,
                        double *sa, double *sd, const int we, const int dual)
{
    const size_t S = (size_t)1 << we;
    double sc = pow2_inv(*sa), sh = *sd * sc;
    double g0 = dual ? -sh : 0.0, g1 = dual ? 2.0 * gs[t] - sh : 0.0;
    step_f sf = step_factors(c, t, w->em[t] * sc, w->ep[t] * sc, g0, g1, we);
    double *a = w->A + (size_t)t * S, *d = dual ? w->D + (size_t)t * S : NULL;
    const double *dp = dual ? d - S : NULL;
    /* past the growing steps kp = k = we: constants in each copy (the
     * sizes must stay in each branch for the compiler to see them) */
    if (t >= we) {
        fwd_step(&sf, we, we, a - S, dp, a, d, dual, we);
        *sa = sum_lanes(a, S);
        *sd = dual ? sum_lanes(d, S) : 0.0;
    } else {
        fwd_step(&sf, t, t + 1, a - S, dp, a, d, dual, we);
        *sa = sum_lanes(a, (size_t)2 << t);
        *sd = dual ? sum_lanes(d, (size_t)2 << t) : 0.0;
    }
}

/* Backward step t: beta_{t-1} (and its dual) into Bn, DBn from B, DB of
 * step t, with the pair weights into qd, r (dual only); sb: the sums of
 * B, DB, replaced by those of Bn, DBn. */
LIN_INLINE void bwd_rec(const ba_band_lin *c, const lin_ws *w, int t, const double *B,
                        const double *DB, double *Bn, double *DBn, double *qd, double *r,
                        double sb[2], const int we, const int dual)
{
    double sc = pow2_inv(sb[0]), sh = sb[1] * sc;
    double g0 = dual ? -sh : 0.0, g1 = dual ? 2.0 * w->g[t] - sh : 0.0;
    step_f sf = step_factors(c, t, w->em[t] * sc, w->ep[t] * sc, g0, g1, we);
    if (t >= we) {
        bwd_step(&sf, we, we, B, DB, Bn, DBn, qd, r, dual, we);
        sb[0] = sum_lanes(Bn, (size_t)1 << we);
        sb[1] = dual ? sum_lanes(DBn, (size_t)1 << we) : 0.0;
    } else {
        bwd_step(&sf, t, t + 1, B, DB, Bn, DBn, qd, r, dual, we);
        sb[0] = sum_lanes(Bn, (size_t)1 << t);
        sb[1] = dual ? sum_lanes(DBn, (size_t)1 << t) : 0.0;
    }
}

/* The marginals of one query. The forward recursion (alpha into w->A) and
 * the backward one (beta of every step into w->D, free without duals) run
 * in one loop: each step of either waits on the one before (its scale
 * comes from the last sum), so two independent chains overlap where one
 * would leave the core idle on small windows. The windows then come from
 * both in a pass with no chain at all. */
LIN_INLINE void fwd_query(const ba_band_lin *c, lin_ws *w, int n, const double *h, double *logw,
                          const int we)
{
    const size_t S = (size_t)1 << we;
    double *Bt = w->D, *z = w->g; /* free without duals */
    double sa, sd, sb[2] = {0.0, 0.0};
    field_factors(w, n, h);
    fwd_first(w, NULL, &sa, &sd, 0);
    int k = n < we ? n : we;
    for (size_t x = 0; x < (size_t)1 << k; x++)
        Bt[(size_t)(n - 1) * S + x] = 1.0;
    sb[0] = (double)((size_t)1 << k);
    for (int i = 1; i < n; i++) {
        fwd_rec(c, w, i, NULL, &sa, &sd, we, 0);
        double *b = Bt + (size_t)(n - i) * S;
        bwd_rec(c, w, n - i, b, NULL, b - S, NULL, NULL, NULL, sb, we, 0);
    }
    /* P(s_t = +1) as the ratio Z1/Z, which keeps a tiny one to full
     * relative precision (near 1 its log errs by an ulp absolute, as the
     * log path's); the divisions and logs come after, vectorised */
    for (int t = 0; t < n; t++) {
        double zz[2];
        if (t + 1 >= we)
            dot_parity(w->A + (size_t)t * S, Bt + (size_t)t * S, NULL, NULL, S, zz);
        else
            dot_parity(w->A + (size_t)t * S, Bt + (size_t)t * S, NULL, NULL, (size_t)2 << t, zz);
        logw[t] = zz[1];
        z[t] = zz[0] + zz[1];
    }
    log_ratio(logw, z, (size_t)n);
}

/* g scaled by a power of two to max |g| in [1/2, 1): the dual parts are
 * alpha times sums of g, so a g far below 1 could underflow against an
 * alpha near the guard's floor. Exact; *unscale undoes it on the results. */
static void scale_g(int n, const double *g, double *gs, double *unscale)
{
    double m = 0.0;
    for (int t = 0; t < n; t++)
        m = fabs(g[t]) > m ? fabs(g[t]) : m;
    int e = 0;
    if (m > 0.0 && isfinite(m))
        frexp(m, &e);
    double s = ldexp(1.0, -e);
    for (int t = 0; t < n; t++)
        gs[t] = g[t] * s;
    *unscale = ldexp(1.0, e);
}

/* The gradients at step t >= 1 (kp = min(t, We), a constant past the
 * growing steps): the window of t-1 (from alpha, D of t-1 and beta, DB =
 * Bp, DBp of t-1) into dh[t-1], and the pairs (t-d, t) (from that window
 * and the weights qd, r of backward step t; r is overwritten) into row t
 * of djb. us undoes g's scaling. */
LIN_INLINE void grad_step(const ba_band_lin *c, const lin_ws *w, int t, int kp,
                          const double *Bp, const double *DBp, const double *qd, double *r,
                          double us, double *dh, double *djb, const int we)
{
    const size_t S = (size_t)1 << we;
    const double *A = w->A + (size_t)(t - 1) * S, *DA = w->D + (size_t)(t - 1) * S;
    lin_stats st = window_cov((size_t)1 << kp, A, DA, Bp, DBp);
    if (dh)
        dh[t - 1] += us * st.dh;
    if (djb)
        lin_pairs(kp, A, DA, st, qd, r, w->P, us, djb + (size_t)t * c->we);
}

/* The backward of one query: the forward recursion into w->A, w->D, then
 * the backward one, each step's gradients as it goes (beta one step at a
 * time: O(2^We) memory beyond alpha's). */
LIN_INLINE void bwd_query(const ba_band_lin *c, lin_ws *w, int n, const double *h,
                          const double *g, double *dh, double *djb, const int we)
{
    const size_t S = (size_t)1 << we;
    double us, sa, sd, sb[2];
    scale_g(n, g, w->g, &us);
    field_factors(w, n, h);
    fwd_first(w, w->g, &sa, &sd, 1);
    for (int t = 1; t < n; t++)
        fwd_rec(c, w, t, w->g, &sa, &sd, we, 1);
    int k = n < we ? n : we;
    for (size_t x = 0; x < (size_t)1 << k; x++)
        w->B[x] = 1.0, w->DB[x] = 0.0;
    sb[0] = (double)((size_t)1 << k), sb[1] = 0.0;
    const double *A = w->A + (size_t)(n - 1) * S, *DA = w->D + (size_t)(n - 1) * S;
    if (dh)
        dh[n - 1] += us * window_cov((size_t)1 << k, A, DA, w->B, w->DB).dh;
    for (int t = n - 1; t >= 1; t--) {
        bwd_rec(c, w, t, w->B, w->DB, w->Bn, w->DBn, w->qd, w->r, sb, we, 1);
        if (t >= we)
            grad_step(c, w, t, we, w->Bn, w->DBn, w->qd, w->r, us, dh, djb, we);
        else
            grad_step(c, w, t, t, w->Bn, w->DBn, w->qd, w->r, us, dh, djb, we);
        double *tmp = w->B;
        w->B = w->Bn, w->Bn = tmp;
        tmp = w->DB;
        w->DB = w->DBn, w->DBn = tmp;
    }
}

/* One copy of each query kernel per window size up to 8, the rest shared. */
#define LIN_CASES(call)                                                                        \
    switch (c->we) {                                                                           \
    case 1: call(1); break;                                                                    \
    case 2: call(2); break;                                                                    \
    case 3: call(3); break;                                                                    \
    case 4: call(4); break;                                                                    \
    case 5: call(5); break;                                                                    \
    case 6: call(6); break;                                                                    \
    case 7: call(7); break;                                                                    \
    case 8: call(8); break;                                                                    \
    default: call(c->we); break;                                                               \
    }

LIN_CLONES
void ba_band_lin_forward(const ba_band_lin *c, double *ws, int n, const double *h, double *logw)
{
    lin_ws w = lin_carve(ws, c->we, c->T);
#define FWD(we) fwd_query(c, &w, n, h, logw, we)
    LIN_CASES(FWD)
#undef FWD
}

LIN_CLONES
void ba_band_lin_backward(const ba_band_lin *c, double *ws, int n, const double *h,
                          const double *g, double *dh, double *djb)
{
    lin_ws w = lin_carve(ws, c->we, c->T);
#define BWD(we) bwd_query(c, &w, n, h, g, dh, djb, we)
    LIN_CASES(BWD)
#undef BWD
}

/* ------------------------------------------------------------ guard */

/* Why the bound. With S = 2^We, Jin_k = sum_d |J_{k-d,k}| and each step
 * scaled so that the previous one sums to [1/2, 1):
 * - the largest alpha_t entry is at least 1/S: sum_x alpha_t(x) =
 *   sum_x' alpha_{t-1}(x') 2 cosh f_t(x') >= 2 * 1/2;
 * - the largest beta_t entry is at least 1/(2S), and every term
 *   f_b E_b(x') beta_t(x_b) of beta_{t-1} at least exp(-|h_t| - Jin_t)
 *   times beta_t's smallest entry;
 * - within a step, alpha_t's entries lie within exp(Ra) of each other,
 *   Ra = 2 sum_{j in window} |h_j| + 2 sum_{k in window} Jin_k (changing
 *   the window's spins changes the energy of every history by at most
 *   twice their fields and twice the couplings ending on them), and
 *   beta_t's within exp(Rb), Rb = 2 sum_{k=t+1..t+We} Jin_k (couplings
 *   from the window forward end on those rows).
 * So every product alpha * psi * beta that the path forms (windows, pair
 * terms) is at least S^-2 exp(-R) / 2 with
 *   R = 2 max_t sum_{j=t-We..t} |h_j| + 2 max_t sum_{k=t-We..t+We} Jin_k
 *       + max |h| + max Jin,
 * and R <= BA_BAND_LIN_MAX_NATS (600) keeps them above e^-623 for
 * We <= 16, 85 nats clear of the smallest normal double (e^-708): room
 * for the dual parts (alpha times sums of g, g scaled to [1/2, 1)) and
 * sums. The fields' part is the query's (hbound, O(n)), the couplings'
 * the call's (jbound, O(T We)): R = hbound + jbound. Both are sliding sums
 * of |.|; a running sum's rounding is far inside the margin. At T = 1024,
 * h ~ N(0, 3^2) and J ~ N(0, 0.5^2) give R ~ 110, 230, 390, 600 for
 * We = 4, 8, 12, 16 (h ~ N(0, 1.5^2), J ~ N(0, 0.3^2): 60, 130, 230,
 * 350); |h| = 20 alone over a window of 9 gives 380. */
double ba_band_lin_jbound(int we, int T, const double *Jb, int ldb)
{
    double sum = 0.0, best = 0.0, jmax = 0.0;
    int L = 2 * we + 1;
    /* jin of rows t-L+1..t in a ring of L entries */
    double ring[2 * BA_BAND_MAX_W + 1];
    for (int t = 0; t < T + L; t++) {
        double jin = 0.0;
        if (t < T)
            for (int d = 1; d <= we && d <= t; d++)
                jin += fabs(Jb[(size_t)t * ldb + d - 1]);
        jmax = jin > jmax ? jin : jmax;
        if (t >= L)
            sum -= ring[t % L];
        ring[t % L] = jin;
        sum += jin;
        best = sum > best ? sum : best;
    }
    return 2.0 * best + jmax;
}

double ba_band_lin_hbound(int we, int n, const double *h)
{
    if (!h)
        return 0.0;
    double sum = 0.0, best = 0.0, hmax = 0.0;
    for (int t = 0; t < n; t++) {
        double a = fabs(h[t]);
        hmax = a > hmax ? a : hmax;
        sum += a;
        if (t > we)
            sum -= fabs(h[t - we - 1]);
        best = sum > best ? sum : best;
    }
    /* sum carries a NaN or inf of h through (the comparisons would not) */
    return 2.0 * best + hmax + (sum - sum);
}
