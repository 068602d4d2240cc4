/* The band engine's linear-path kernels, generic over their number type:
 * a template included once per precision (src/ising/band_lin.c: double,
 * the path the engine takes by default and the float path's twin;
 * src/ising/band_lin32.c: float, issue 42, opt-in), so that both run one
 * piece of code. The recursions, scaling and reductions are described in
 * band_lin.c; here only what differs between the two.
 *
 * The includer defines
 *   LIN_REAL      float or double: alpha, beta, their duals, the tables,
 *                 every per-step product and per-step sum
 *   LIN_F32       1 for float, else 0
 *   LIN_CTX       its call context type (ba_band_lin, ba_band_lin32)
 *   LIN_WS_NAME, LIN_FWD_NAME, LIN_BWD_NAME  its public entry points
 * and includes "ising/ising.h" and <float.h>, <math.h>, <stdint.h>,
 * <string.h> first. Double whatever LIN_REAL: the inputs h, g, the
 * outputs logw, dh, djb and what sums into them across steps or queries
 * (the unscale of g, the pair terms' scale, the final log of each
 * marginal's ratio): see grad_step and fwd_query for why.
 * Not a header of its own: no include guard, nothing here is public. */
#if !defined(LIN_REAL) || !defined(LIN_F32) || !defined(LIN_CTX) || !defined(LIN_WS_NAME) || \
    !defined(LIN_FWD_NAME) || !defined(LIN_BWD_NAME)
#error "define LIN_REAL, LIN_F32, LIN_CTX and the entry names before band_lin_core.h"
#endif

typedef LIN_REAL lin_real;

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

/* One thread's workspace (LIN_WS_NAME doubles). A, D: every step's
 * forward values (step t at t*S; D holds every step's beta in the
 * forward-only kernel); ep, em, g: per step of the query; the rest hold
 * one step; zd: per step in double, the exps of the fields and the
 * marginals' sums (in double: g's place, free when it is needed, and the
 * float path's own (T) doubles ahead of its floats). */
typedef struct {
    lin_real *A, *D;             /* (T,S) */
    lin_real *ep, *em, *g;       /* (T) exp(h_t), exp(-h_t), scaled g_t */
    lin_real *B, *DB, *Bn, *DBn; /* (S) beta and its dual at t and t-1 */
    lin_real *qd, *r, *P;        /* (S) pair weights, scratch */
    double *zd;                  /* (T) */
} lin_ws;

size_t LIN_WS_NAME(int we, int T)
{
    size_t S = (size_t)1 << we, reals = 2 * S * (size_t)T + 3 * (size_t)T + 7 * S;
#if LIN_F32
    return (size_t)T + (reals + 1) / 2;
#else
    return reals;
#endif
}

static lin_ws lin_carve(double *ws, int we, int T)
{
    size_t S = (size_t)1 << we;
    lin_ws w;
#if LIN_F32
    w.zd = ws;
    lin_real *p = (lin_real *)(ws + T);
#else
    lin_real *p = ws;
#endif
    w.A = p, p += S * (size_t)T;
    w.ep = p, w.em = p + T, w.g = p + 2 * (size_t)T, p += 3 * (size_t)T;
    lin_real **v[] = {&w.B, &w.DB, &w.Bn, &w.DBn, &w.qd, &w.r, &w.P};
    for (int j = 0; j < 7; j++, p += S)
        *v[j] = p;
    w.D = p;
#if !LIN_F32
    w.zd = w.g;
#endif
    return w;
}

/* Reductions in up to 16 fixed lanes (lane j takes x = j mod 16), the
 * lanes started from the first block (a sum that starts from 0 cannot
 * drop the 0 + x in IEEE arithmetic) and folded in halves, l[j] += l[j+m]
 * for m = 8, 4, 2 (L lanes, a power of two up to 16): a fixed order, which
 * the compiler keeps in vector registers. Even lanes end in l[0], odd
 * ones in l[1]. */
LIN_INLINE void fold_lanes(lin_real *l, size_t L)
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
LIN_INLINE lin_real sum_lanes(const lin_real *restrict x, size_t n)
{
    if (n < 16) {
        lin_real l[16] = {0}; /* all read lanes are written; quiets -Wmaybe-uninitialized */
        for (size_t j = 0; j < n; j++)
            l[j] = x[j];
        fold_lanes(l, n);
        return n > 1 ? l[0] + l[1] : l[0];
    }
    lin_real l[16];
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
LIN_INLINE lin_real pow2_inv(lin_real x)
{
#if LIN_F32 /* float: 254 - (e + 127) */
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    b = (254U << 23) - (b & 0x7f800000U);
#else
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    b = (2046ULL << 52) - (b & 0x7ff0000000000000ULL);
#endif
    lin_real r;
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
 * ba_exp_nonpos (within 2 ulps), its reciprocal for the other; both in
 * double (the float path's in zd), rounded once to lin_real. */
static void field_factors(const lin_ws *w, int n, const double *h)
{
    lin_real *restrict ep = w->ep, *restrict em = w->em;
    if (!h) {
        for (int t = 0; t < n; t++)
            ep[t] = em[t] = 1;
        return;
    }
#if LIN_F32
    double *x = w->zd;
#else
    double *x = em;
#endif
    for (int t = 0; t < n; t++)
        x[t] = -fabs(h[t]);
    ba_exp_nonpos(x, (size_t)n);
    for (int t = 0; t < n; t++) {
        double small = x[t], big = 1.0 / small;
        ep[t] = (lin_real)(h[t] >= 0.0 ? big : small);
        em[t] = (lin_real)(h[t] >= 0.0 ? small : big);
    }
}

/* The coupling factors' split (the includer's table rows, ba_band_lin_table_row). */
#ifndef LIN_LO_MAX
#define LIN_LO_MAX 5
#endif
#define LIN_LO_BITS(we) ((we) - 1 < LIN_LO_MAX ? (we) - 1 : LIN_LO_MAX)
/* ------------------------------------------------------------ steps */

/* One step's factors: the halves of the coupling factors (row t of the
 * table), the field factors f0, f1 (s_t = -1, +1; the previous scale
 * folded in) and the dual shifts g0, g1 (the step's G term, 0 or 2 g_t,
 * less c). */
typedef struct {
    const lin_real *lm, *lp, *hm, *hp;
    lin_real f0, f1, g0, g1;
} step_f;

LIN_INLINE step_f step_factors(const LIN_CTX *c, int t, lin_real f0, lin_real f1, lin_real g0,
                               lin_real g1, const int we)
{
    const int L = LIN_LO_BITS(we), H = we - L;
    const lin_real *row = c->tab + (size_t)t * (((size_t)2 << L) + ((size_t)2 << H));
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
LIN_INLINE void fwd_step(const step_f *sf, int kp, int k, const lin_real *restrict p,
                         const lin_real *restrict dp, lin_real *restrict a, lin_real *restrict d,
                         const int dual, const int we)
{
    const int L = LIN_LO_BITS(we);
    const size_t nl = (size_t)1 << L;
    const lin_real *restrict lm = sf->lm, *restrict lp = sf->lp;
    const lin_real f0 = sf->f0, f1 = sf->f1, g0 = sf->g0, g1 = sf->g1;
    if (k > kp) {
        for (size_t y = 0; y < (size_t)1 << kp; y++) {
            lin_real em = lm[y & (nl - 1)] * sf->hm[y >> L], ep = lp[y & (nl - 1)] * sf->hp[y >> L];
            lin_real a0 = f0 * (p[y] * em), a1 = f1 * (p[y] * ep);
            a[2 * y] = a0, a[2 * y + 1] = a1;
            if (dual)
                d[2 * y] = f0 * (dp[y] * em) + g0 * a0, d[2 * y + 1] = f1 * (dp[y] * ep) + g1 * a1;
        }
        return;
    }
    const size_t half = (size_t)1 << (we - 1), hh = half >> L;
    const lin_real *ph = p + half, *dph = dual ? dp + half : NULL;
    for (size_t yh = 0; yh < hh; yh++) {
        lin_real F0a = f0 * sf->hm[yh], F0b = f0 * sf->hm[yh + hh];
        lin_real F1a = f1 * sf->hp[yh], F1b = f1 * sf->hp[yh + hh];
        LIN_IVDEP
        for (size_t yl = 0; yl < nl; yl++) {
            size_t y = yh * nl + yl;
            lin_real a0 = lm[yl] * (p[y] * F0a + ph[y] * F0b);
            lin_real a1 = lp[yl] * (p[y] * F1a + ph[y] * F1b);
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
LIN_INLINE void bwd_out(size_t x, lin_real F0, lin_real F1, lin_real lb0, lin_real lb1,
                        lin_real lc0, lin_real lc1, lin_real *restrict Bn,
                        lin_real *restrict DBn, lin_real *restrict qd, lin_real *restrict r,
                        const int dual)
{
    lin_real w0 = F0 * lb0, w1 = F1 * lb1;
    Bn[x] = w0 + w1;
    if (dual) {
        lin_real v0 = F0 * lc0, v1 = F1 * lc1;
        DBn[x] = v0 + v1;
        qd[x] = w1 - w0;
        r[x] = v1 - v0;
    }
}

LIN_INLINE void bwd_step(const step_f *sf, int kp, int k, const lin_real *restrict B,
                         const lin_real *restrict DB, lin_real *restrict Bn, lin_real *restrict DBn,
                         lin_real *restrict qd, lin_real *restrict r, const int dual, const int we)
{
    const int L = LIN_LO_BITS(we);
    const size_t nl = (size_t)1 << L;
    const lin_real *restrict lm = sf->lm, *restrict lp = sf->lp;
    const lin_real f0 = sf->f0, f1 = sf->f1, g0 = sf->g0, g1 = sf->g1;
    if (k > kp) {
        for (size_t y = 0; y < (size_t)1 << kp; y++) {
            lin_real F0 = f0 * sf->hm[y >> L], F1 = f1 * sf->hp[y >> L];
            lin_real lb0 = lm[y & (nl - 1)] * B[2 * y], lb1 = lp[y & (nl - 1)] * B[2 * y + 1];
            lin_real lc0 = 0, lc1 = 0;
            if (dual)
                lc0 = lm[y & (nl - 1)] * (DB[2 * y] + g0 * B[2 * y]),
                lc1 = lp[y & (nl - 1)] * (DB[2 * y + 1] + g1 * B[2 * y + 1]);
            bwd_out(y, F0, F1, lb0, lb1, lc0, lc1, Bn, DBn, qd, r, dual);
        }
        return;
    }
    const size_t half = (size_t)1 << (we - 1), hh = half >> L;
    for (size_t yh = 0; yh < hh; yh++) {
        lin_real F0a = f0 * sf->hm[yh], F0b = f0 * sf->hm[yh + hh];
        lin_real F1a = f1 * sf->hp[yh], F1b = f1 * sf->hp[yh + hh];
        LIN_IVDEP
        for (size_t yl = 0; yl < nl; yl++) {
            size_t y = yh * nl + yl;
            lin_real lb0 = lm[yl] * B[2 * y], lb1 = lp[yl] * B[2 * y + 1], lc0 = 0, lc1 = 0;
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
LIN_INLINE void dot_parity(const lin_real *restrict a, const lin_real *restrict b,
                           const lin_real *restrict c, const lin_real *restrict d, size_t n,
                           lin_real out[2])
{
    lin_real l[16] = {0}; /* all read lanes are written; quiets -Wmaybe-uninitialized */
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
    lin_real iz, gbar, dh; /* 1/Z: one division a step, then products */
} lin_stats;

/* Z, Gbar and Cov(G, s_t) of a window from A, DA, B, DB (nx): with
 * P Z = A B and N = P Z D = DA B + A DB summed per sign of s_t,
 * Cov = sum_x P (D - Gbar) s_t, and as sum_x P (D - Gbar) = 0 it is 2
 * sum over the rarer sign with that sign, an error relative to the rarer
 * sign's mass (as the log path). Summing N and P per sign before taking
 * Gbar times P off rounds as centring each term would: N already carries
 * the rounding of D's size, which the shifts keep near the spread of G. */
LIN_INLINE lin_stats window_cov(size_t nx, const lin_real *restrict A, const lin_real *restrict DA,
                                const lin_real *restrict B, const lin_real *restrict DB)
{
    lin_real z[2], nn[2];
    dot_parity(A, B, NULL, NULL, nx, z);
    dot_parity(DA, B, A, DB, nx, nn);
    lin_stats st = {(lin_real)1 / (z[0] + z[1]), 0, 0};
    st.gbar = (nn[0] + nn[1]) * st.iz;
    st.dh = (z[1] < z[0] ? (lin_real)2 * (nn[1] - st.gbar * z[1])
                         : (lin_real)-2 * (nn[0] - st.gbar * z[0])) *
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
LIN_INLINE void lin_pairs(int kp, const lin_real *restrict A, const lin_real *restrict DA,
                          lin_stats st, const lin_real *restrict qd, lin_real *restrict r,
                          lin_real *restrict P, double scale, double *dj)
{
    size_t half = (size_t)1 << (kp - 1);
    lin_real gb = st.gbar;
    scale *= st.iz;
    LIN_IVDEP
    for (size_t y = 0; y < half; y++) {
        size_t x = y + half;
        lin_real lo = (DA[y] - gb * A[y]) * qd[y] + A[y] * r[y];
        lin_real hi = (DA[x] - gb * A[x]) * qd[x] + A[x] * r[x];
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
LIN_INLINE void fwd_first(const lin_ws *w, const lin_real *gs, lin_real *sa, lin_real *sd,
                          const int dual)
{
    lin_real *A = w->A, *D = w->D;
    A[0] = w->em[0], A[1] = w->ep[0];
    *sa = A[0] + A[1], *sd = 0;
    if (dual) {
        D[0] = 0, D[1] = (lin_real)2 * gs[0] * A[1];
        *sd = D[0] + D[1];
    }
}

/* Forward step t: alpha_t (and D_t with dual, gs = scaled g) into w->A,
 * w->D from step t-1's; sa, sd: the sums of step t-1, replaced by t's. */
LIN_INLINE void fwd_rec(const LIN_CTX *c, const lin_ws *w, int t, const lin_real *gs,
                        lin_real *sa, lin_real *sd, const int we, const int dual)
{
    const size_t S = (size_t)1 << we;
    lin_real sc = pow2_inv(*sa), sh = *sd * sc;
    lin_real g0 = dual ? -sh : 0, g1 = dual ? (lin_real)2 * gs[t] - sh : 0;
    step_f sf = step_factors(c, t, w->em[t] * sc, w->ep[t] * sc, g0, g1, we);
    lin_real *a = w->A + (size_t)t * S, *d = dual ? w->D + (size_t)t * S : NULL;
    const lin_real *dp = dual ? d - S : NULL;
    /* past the growing steps kp = k = we: constants in each copy (the
     * sizes must stay in each branch for the compiler to see them) */
    if (t >= we) {
        fwd_step(&sf, we, we, a - S, dp, a, d, dual, we);
        *sa = sum_lanes(a, S);
        *sd = dual ? sum_lanes(d, S) : 0;
    } else {
        fwd_step(&sf, t, t + 1, a - S, dp, a, d, dual, we);
        *sa = sum_lanes(a, (size_t)2 << t);
        *sd = dual ? sum_lanes(d, (size_t)2 << t) : 0;
    }
}

/* Backward step t: beta_{t-1} (and its dual) into Bn, DBn from B, DB of
 * step t, with the pair weights into qd, r (dual only); sb: the sums of
 * B, DB, replaced by those of Bn, DBn. */
LIN_INLINE void bwd_rec(const LIN_CTX *c, const lin_ws *w, int t, const lin_real *B,
                        const lin_real *DB, lin_real *Bn, lin_real *DBn, lin_real *qd, lin_real *r,
                        lin_real sb[2], const int we, const int dual)
{
    lin_real sc = pow2_inv(sb[0]), sh = sb[1] * sc;
    lin_real g0 = dual ? -sh : 0, g1 = dual ? (lin_real)2 * w->g[t] - sh : 0;
    step_f sf = step_factors(c, t, w->em[t] * sc, w->ep[t] * sc, g0, g1, we);
    if (t >= we) {
        bwd_step(&sf, we, we, B, DB, Bn, DBn, qd, r, dual, we);
        sb[0] = sum_lanes(Bn, (size_t)1 << we);
        sb[1] = dual ? sum_lanes(DBn, (size_t)1 << we) : 0;
    } else {
        bwd_step(&sf, t, t + 1, B, DB, Bn, DBn, qd, r, dual, we);
        sb[0] = sum_lanes(Bn, (size_t)1 << t);
        sb[1] = dual ? sum_lanes(DBn, (size_t)1 << t) : 0;
    }
}

/* The marginals of one query. The forward recursion (alpha into w->A) and
 * the backward one (beta of every step into w->D, free without duals) run
 * in one loop: each step of either waits on the one before (its scale
 * comes from the last sum), so two independent chains overlap where one
 * would leave the core idle on small windows. The windows then come from
 * both in a pass with no chain at all. */
LIN_INLINE void fwd_query(const LIN_CTX *c, lin_ws *w, int n, const double *h, double *logw,
                          const int we)
{
    const size_t S = (size_t)1 << we;
    lin_real *Bt = w->D; /* free without duals */
    double *z = w->zd;
    lin_real sa, sd, sb[2] = {0, 0};
    field_factors(w, n, h);
    fwd_first(w, NULL, &sa, &sd, 0);
    int k = n < we ? n : we;
    for (size_t x = 0; x < (size_t)1 << k; x++)
        Bt[(size_t)(n - 1) * S + x] = 1;
    sb[0] = (lin_real)((size_t)1 << k);
    for (int i = 1; i < n; i++) {
        fwd_rec(c, w, i, NULL, &sa, &sd, we, 0);
        lin_real *b = Bt + (size_t)(n - i) * S;
        bwd_rec(c, w, n - i, b, NULL, b - S, NULL, NULL, NULL, sb, we, 0);
    }
    /* P(s_t = +1) as the ratio Z1/Z, which keeps a tiny one to full
     * relative precision (near 1 its log errs by an ulp absolute, as the
     * log path's); the divisions and logs come after, vectorised, in
     * double (float's own log would give only its 6e-8 relative) */
    for (int t = 0; t < n; t++) {
        lin_real zz[2];
        if (t + 1 >= we)
            dot_parity(w->A + (size_t)t * S, Bt + (size_t)t * S, NULL, NULL, S, zz);
        else
            dot_parity(w->A + (size_t)t * S, Bt + (size_t)t * S, NULL, NULL, (size_t)2 << t, zz);
        logw[t] = (double)zz[1];
        z[t] = (double)zz[0] + (double)zz[1];
    }
    log_ratio(logw, z, (size_t)n);
}

/* g scaled by a power of two to max |g| in [1/2, 1): the dual parts are
 * alpha times sums of g, so a g far below 1 could underflow against an
 * alpha near the guard's floor. Exact; *unscale undoes it on the results. */
static void scale_g(int n, const double *g, lin_real *gs, double *unscale)
{
    double m = 0.0;
    for (int t = 0; t < n; t++)
        m = fabs(g[t]) > m ? fabs(g[t]) : m;
    int e = 0;
    if (m > 0.0 && isfinite(m))
        frexp(m, &e);
    double s = ldexp(1.0, -e);
    for (int t = 0; t < n; t++)
        gs[t] = (lin_real)(g[t] * s);
    *unscale = ldexp(1.0, e);
}

/* The gradients at step t >= 1 (kp = min(t, We), a constant past the
 * growing steps): the window of t-1 (from alpha, D of t-1 and beta, DB =
 * Bp, DBp of t-1) into dh[t-1], and the pairs (t-d, t) (from that window
 * and the weights qd, r of backward step t; r is overwritten) into row t
 * of djb. us undoes g's scaling. dh and djb stay double in either
 * precision: each entry sums one term per query over the B T queries of
 * a call (and djb's over T positions), where float's rounding would grow
 * with the count; the per-step terms themselves are lin_real. */
LIN_INLINE void grad_step(const LIN_CTX *c, const lin_ws *w, int t, int kp,
                          const lin_real *Bp, const lin_real *DBp, const lin_real *qd, lin_real *r,
                          double us, double *dh, double *djb, const int we)
{
    const size_t S = (size_t)1 << we;
    const lin_real *A = w->A + (size_t)(t - 1) * S, *DA = w->D + (size_t)(t - 1) * S;
    lin_stats st = window_cov((size_t)1 << kp, A, DA, Bp, DBp);
    if (dh)
        dh[t - 1] += us * st.dh;
    if (djb)
        lin_pairs(kp, A, DA, st, qd, r, w->P, us, djb + (size_t)t * c->we);
}

/* The backward of one query: the forward recursion into w->A, w->D, then
 * the backward one, each step's gradients as it goes (beta one step at a
 * time: O(2^We) memory beyond alpha's). */
LIN_INLINE void bwd_query(const LIN_CTX *c, lin_ws *w, int n, const double *h,
                          const double *g, double *dh, double *djb, const int we)
{
    const size_t S = (size_t)1 << we;
    double us;
    lin_real sa, sd, sb[2];
    scale_g(n, g, w->g, &us);
    field_factors(w, n, h);
    fwd_first(w, w->g, &sa, &sd, 1);
    for (int t = 1; t < n; t++)
        fwd_rec(c, w, t, w->g, &sa, &sd, we, 1);
    int k = n < we ? n : we;
    for (size_t x = 0; x < (size_t)1 << k; x++)
        w->B[x] = 1, w->DB[x] = 0;
    sb[0] = (lin_real)((size_t)1 << k), sb[1] = 0;
    const lin_real *A = w->A + (size_t)(n - 1) * S, *DA = w->D + (size_t)(n - 1) * S;
    if (dh)
        dh[n - 1] += us * window_cov((size_t)1 << k, A, DA, w->B, w->DB).dh;
    for (int t = n - 1; t >= 1; t--) {
        bwd_rec(c, w, t, w->B, w->DB, w->Bn, w->DBn, w->qd, w->r, sb, we, 1);
        if (t >= we)
            grad_step(c, w, t, we, w->Bn, w->DBn, w->qd, w->r, us, dh, djb, we);
        else
            grad_step(c, w, t, t, w->Bn, w->DBn, w->qd, w->r, us, dh, djb, we);
        lin_real *tmp = w->B;
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
void LIN_FWD_NAME(const LIN_CTX *c, double *ws, int n, const double *h, double *logw)
{
    lin_ws w = lin_carve(ws, c->we, c->T);
#define FWD(we) fwd_query(c, &w, n, h, logw, we)
    LIN_CASES(FWD)
#undef FWD
}

LIN_CLONES
void LIN_BWD_NAME(const LIN_CTX *c, double *ws, int n, const double *h, const double *g,
                  double *dh, double *djb)
{
    lin_ws w = lin_carve(ws, c->we, c->T);
#define BWD(we) bwd_query(c, &w, n, h, g, dh, djb, we)
    LIN_CASES(BWD)
#undef BWD
}
