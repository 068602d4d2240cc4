/* The band engine (spec section 8, "Exact chain inference for range W"):
 * exact marginals P(s_j = +1) and their exact backward for couplings of
 * range at most W (J_jk = 0 for k - j > W), in O(n 2^(W+1)) per query
 * instead of the enumeration's O(2^n n^2).
 *
 * The window state at step t is x = the last K_t = min(We, t+1) spins,
 * bit d of x holding s_{t-d} (set = +1), with We = min(W, T-1) (a window
 * of T-1 spins already covers every pair of a T-spin query). Step t's
 * factor depends only on the previous window x' and s_t:
 *   log psi_t(x', s_t) = s_t f_t(x'),  f_t(x') = h_t + sum_d J_{t-d,t} s_{t-d}.
 * Forward la_t = log alpha_t and backward lb_t = log beta_t are carried in
 * log space with a log-sum-exp over the spin that leaves the window, and
 * each is shifted by its maximum at every step: the marginals are
 * normalised per step, so the shift cancels, and it keeps la, lb of the
 * size of one window's energy, so no precision is lost to a large offset
 * and nothing under- or overflows at any n.
 *
 * Gradients by forward-mode dual numbers: under fields h + eps g, the
 * eps-parts dla_t(x) = d la_t / d eps = E[G_{<=t} | window x] and
 * dlb_t(x) = E[G_{>t} | window x] follow the same recursions with the
 * log-sum-exp's softmax weights. With D = dla + dlb and Gbar = sum P D,
 * Cov(G, s_t) = sum_x P_t(x) (D(x) - Gbar) s_t and
 * Cov(G, s_{t-d} s_t) = sum_{x',s_t} P(x', s_t) (D - Gbar) s_{t-d} s_t,
 * the same centred form as the reference. The dual parts are shifted per
 * step by a constant too (any constant cancels against Gbar). */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One thread's workspace. la, dla (n, 2^We): every step's forward values
 * (step t at t*S); the rest (2^We each) hold one step at a time. */
typedef struct {
    int we;
    size_t S;
    double *la, *dla;   /* (T,S); dla NULL for the forward-only engine */
    double *lb, *lbn;   /* (S) beta of step t and of step t-1 */
    double *dlb, *dlbn; /* (S) their eps-parts (backward only) */
    double *f;          /* (S) f_t(x') */
    double *P;          /* (S) window probabilities of one step */
    double *qd, *r;     /* (S) per x': q1 - q0 and q1 e1 - q0 e0 */
} band_ws;

/* log(e^a + e^b) for finite a, b. */
static inline double lae(double a, double b)
{
    double m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}

/* f (2^kp): f_t(x') for every window x' of the kp spins before t (bit i of
 * x' = s_{t-1-i}); built by doubling, one addition per entry. */
static void field_table(int t, int kp, double ht, const double *J, int ldj, double *f)
{
    double base = ht;
    for (int d = 1; d <= kp; d++)
        base -= J[(size_t)(t - d) * ldj + t];
    f[0] = base;
    for (int i = 0; i < kp; i++) {
        double two = 2.0 * J[(size_t)(t - 1 - i) * ldj + t];
        size_t half = (size_t)1 << i;
        for (size_t x = 0; x < half; x++)
            f[x | half] = f[x] + two;
    }
}

/* Subtracts max la from la (nx), and from dla (may be NULL) its value at
 * the argmax: constants that cancel in every per-step normalisation. */
static void shift_step(size_t nx, double *la, double *dla)
{
    size_t am = 0;
    for (size_t x = 1; x < nx; x++)
        if (la[x] > la[am])
            am = x;
    double m = la[am], dm = dla ? dla[am] : 0.0;
    for (size_t x = 0; x < nx; x++) {
        la[x] -= m;
        if (dla)
            dla[x] -= dm;
    }
}

/* Forward step: la (2^k) of step t from lp (2^kp) of step t-1; with dlp
 * and dla (else NULL) also the eps-parts, gt = g_t. k = kp + 1 while the
 * window grows (no spin leaves), k = kp = We after. */
static void fwd_step(int kp, int k, const double *f, const double *lp, const double *dlp,
                     double gt, double *la, double *dla)
{
    if (k > kp) {
        for (size_t xp = 0; xp < (size_t)1 << kp; xp++) {
            la[xp << 1] = lp[xp] - f[xp];
            la[xp << 1 | 1] = lp[xp] + f[xp];
            if (dla) {
                dla[xp << 1] = dlp[xp] - gt;
                dla[xp << 1 | 1] = dlp[xp] + gt;
            }
        }
        return;
    }
    size_t top = (size_t)1 << (k - 1);
    for (size_t x = 0; x < (size_t)1 << k; x++) {
        double sb = (x & 1) ? 1.0 : -1.0;
        size_t y0 = x >> 1, y1 = y0 | top; /* the two x' differing in s_{t-We} */
        double a0 = lp[y0] + sb * f[y0], a1 = lp[y1] + sb * f[y1];
        double e = exp(-fabs(a0 - a1));
        la[x] = (a0 > a1 ? a0 : a1) + log1p(e);
        if (dla) {
            /* softmax weights, each from its own side so neither is 1 - tiny */
            double qbig = 1.0 / (1.0 + e), qsmall = e / (1.0 + e);
            double q0 = a0 > a1 ? qbig : qsmall, q1 = a0 > a1 ? qsmall : qbig;
            dla[x] = sb * gt + q0 * dlp[y0] + q1 * dlp[y1];
        }
    }
}

/* Backward step: lbp (2^kp) of step t-1 from lb (2^k) of step t. With dlb
 * (else NULL): dlbp, and per x' the weights of s_t = +-1 given x' as
 * qd = q1 - q0 and r = q1 e1 - q0 e0 with e_b = s_b g_t + dlb_t(x_b),
 * which the pair terms need. */
static void bwd_step(int kp, int k, const double *f, const double *lb, const double *dlb,
                     double gt, double *lbp, double *dlbp, double *qd, double *r)
{
    size_t mask = ((size_t)1 << k) - 1;
    for (size_t xp = 0; xp < (size_t)1 << kp; xp++) {
        size_t x0 = (xp << 1) & mask, x1 = x0 | 1;
        double a0 = lb[x0] - f[xp], a1 = lb[x1] + f[xp];
        double e = exp(-fabs(a0 - a1));
        lbp[xp] = (a0 > a1 ? a0 : a1) + log1p(e);
        if (dlb) {
            double qbig = 1.0 / (1.0 + e), qsmall = e / (1.0 + e);
            double q0 = a0 > a1 ? qbig : qsmall, q1 = a0 > a1 ? qsmall : qbig;
            double e0 = dlb[x0] - gt, e1 = dlb[x1] + gt;
            dlbp[xp] = q0 * e0 + q1 * e1;
            qd[xp] = q1 - q0;
            r[xp] = q1 * e1 - q0 * e0;
        }
    }
}

typedef struct {
    double logw; /* log P(s_t = +1) */
    double gbar; /* <G> (up to the step's constant shifts) */
    double dh;   /* Cov(G, s_t) */
} win_stats;

/* Step t's window marginals from la, lb (2^k); with dla, dlb (else NULL)
 * also P (2^k) = the window probabilities, Gbar and Cov(G, s_t). P is
 * scratch in any case. */
static win_stats window_stats(int k, const double *la, const double *lb, const double *dla,
                              const double *dlb, double *P)
{
    size_t nx = (size_t)1 << k;
    double mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0, 0.0};
    for (size_t x = 0; x < nx; x++) {
        P[x] = la[x] + lb[x];
        if (P[x] > mx[x & 1])
            mx[x & 1] = P[x];
    }
    /* each sign of s_t summed under its own maximum, so a tiny P(s_t = +1)
     * keeps its relative precision */
    for (size_t x = 0; x < nx; x++)
        sum[x & 1] += exp(P[x] - mx[x & 1]);
    double lm = mx[0] + log(sum[0]), lp = mx[1] + log(sum[1]);
    double lz = lae(lm, lp);
    win_stats st = {fmin(lp - lz, 0.0), 0.0, 0.0};
    if (!dla)
        return st;
    for (size_t x = 0; x < nx; x++) {
        P[x] = exp(P[x] - lz);
        st.gbar += P[x] * (dla[x] + dlb[x]);
    }
    /* sum_x P (D - Gbar) = 0, so Cov = 2 sum over the rarer sign of s_t
     * with that sign: an error relative to the rarer sign's mass, where the
     * plain sum's error is relative to the whole */
    int rare = lp < lm ? 1 : 0;
    double c = 0.0;
    for (size_t x = (size_t)rare; x < nx; x += 2)
        c += P[x] * (dla[x] + dlb[x] - st.gbar);
    st.dh = rare ? 2.0 * c : -2.0 * c;
    return st;
}

/* Pair terms at step t: dj[d-1] += Cov(G, s_{t-d} s_t), d = 1..kp, from
 * P, dla (2^kp) of step t-1, its Gbar and qd, r of bwd_step. r is
 * overwritten. */
static void pair_terms(int kp, const double *P, const double *dla, double gbar, const double *qd,
                       double *r, double *dj)
{
    size_t nx = (size_t)1 << kp;
    /* c(x') = sum over s_t of P(x', s_t) (D - Gbar) s_t */
    for (size_t xp = 0; xp < nx; xp++)
        r[xp] = P[xp] * ((dla[xp] - gbar) * qd[xp] + r[xp]);
    for (int d = 1; d <= kp; d++) {
        size_t bit = (size_t)1 << (d - 1);
        double acc = 0.0;
        for (size_t xp = 0; xp < nx; xp++)
            acc += (xp & bit) ? r[xp] : -r[xp];
        dj[d - 1] += acc;
    }
}

/* The forward recursion of one query of n spins into w->la (and w->dla
 * when g is not NULL). */
static void forward_pass(const band_ws *w, int n, const double *h, const double *J, int ldj,
                         const double *g)
{
    size_t S = w->S;
    double h0 = h ? h[0] : 0.0;
    w->la[0] = -h0;
    w->la[1] = h0;
    if (g) {
        w->dla[0] = -g[0];
        w->dla[1] = g[0];
    }
    shift_step(2, w->la, g ? w->dla : NULL);
    for (int t = 1; t < n; t++) {
        int kp = t < w->we ? t : w->we, k = t + 1 < w->we ? t + 1 : w->we;
        field_table(t, kp, h ? h[t] : 0.0, J, ldj, w->f);
        double *la = w->la + (size_t)t * S, *dla = g ? w->dla + (size_t)t * S : NULL;
        fwd_step(kp, k, w->f, la - S, g ? dla - S : NULL, g ? g[t] : 0.0, la, dla);
        shift_step((size_t)1 << k, la, dla);
    }
}

/* Marginals of one query: logw (n). */
static void band_query_forward(const band_ws *w, int n, const double *h, const double *J,
                               int ldj, double *logw)
{
    forward_pass(w, n, h, J, ldj, NULL);
    double *lb = w->lb, *lbn = w->lbn;
    int k = n < w->we ? n : w->we;
    memset(lb, 0, sizeof(double) * ((size_t)1 << k));
    for (int t = n - 1;; t--) {
        k = t + 1 < w->we ? t + 1 : w->we;
        logw[t] = window_stats(k, w->la + (size_t)t * w->S, lb, NULL, NULL, w->P).logw;
        if (t == 0)
            break;
        int kp = t < w->we ? t : w->we;
        field_table(t, kp, h ? h[t] : 0.0, J, ldj, w->f);
        bwd_step(kp, k, w->f, lb, NULL, 0.0, lbn, NULL, NULL, NULL);
        shift_step((size_t)1 << kp, lbn, NULL);
        double *tmp = lb;
        lb = lbn;
        lbn = tmp;
    }
}

/* Backward of one query: dh (n, may be NULL) += Cov(G, s_t), and
 * djb (T,We) row t, entry d-1 += Cov(G, s_{t-d} s_t). */
static void band_query_backward(const band_ws *w, int n, const double *h, const double *J,
                                int ldj, const double *g, double *dh, double *djb)
{
    forward_pass(w, n, h, J, ldj, g);
    size_t S = w->S;
    double *lb = w->lb, *lbn = w->lbn, *dlb = w->dlb, *dlbn = w->dlbn;
    int k = n < w->we ? n : w->we;
    memset(lb, 0, sizeof(double) * ((size_t)1 << k));
    memset(dlb, 0, sizeof(double) * ((size_t)1 << k));
    win_stats st = window_stats(k, w->la + (size_t)(n - 1) * S, lb,
                                w->dla + (size_t)(n - 1) * S, dlb, w->P);
    if (dh)
        dh[n - 1] += st.dh;
    for (int t = n - 1; t >= 1; t--) {
        k = t + 1 < w->we ? t + 1 : w->we;
        int kp = t < w->we ? t : w->we;
        size_t nxp = (size_t)1 << kp;
        field_table(t, kp, h ? h[t] : 0.0, J, ldj, w->f);
        bwd_step(kp, k, w->f, lb, dlb, g[t], lbn, dlbn, w->qd, w->r);
        /* shift dlbn by c like lbn; r holds e_b relative to the unshifted
         * dlbn, so it takes the same shift (e_b - c) to stay consistent */
        size_t am = 0;
        for (size_t x = 1; x < nxp; x++)
            if (lbn[x] > lbn[am])
                am = x;
        double c = dlbn[am];
        shift_step(nxp, lbn, dlbn);
        for (size_t x = 0; x < nxp; x++)
            w->r[x] -= c * w->qd[x];
        const double *la = w->la + (size_t)(t - 1) * S, *dla = w->dla + (size_t)(t - 1) * S;
        st = window_stats(kp, la, lbn, dla, dlbn, w->P);
        if (dh)
            dh[t - 1] += st.dh;
        if (djb)
            pair_terms(kp, w->P, dla, st.gbar, w->qd, w->r, djb + (size_t)t * w->we);
        double *tmp = lb;
        lb = lbn;
        lbn = tmp;
        tmp = dlb;
        dlb = dlbn;
        dlbn = tmp;
    }
}

/* ------------------------------------------------ batched (per head) */

/* The effective window: couplings reach at most T-1 back. */
static int band_window(int W, int T)
{
    int we = W < T - 1 ? W : T - 1;
    return we < 1 ? 1 : we;
}

static int band_check(int W, int B, int T, const double *J, int ldj, const void *out,
                      const char *out_name, char *err)
{
    if (W < 1 || W > BA_BAND_MAX_W)
        return ba_fail(err, BA_ERR_ARG, "band engine: band width W = %d outside [1, %d]", W,
                       BA_BAND_MAX_W);
    if (B < 1)
        return ba_fail(err, BA_ERR_ARG, "band engine: batch size B = %d below 1", B);
    if (T < 1 || T > BA_BAND_MAX_T)
        return ba_fail(err, BA_ERR_ARG, "band engine: sequence length T = %d outside [1, %d]",
                       T, BA_BAND_MAX_T);
    if (ldj < T)
        return ba_fail(err, BA_ERR_ARG, "band engine: leading dimension ldj = %d below T = %d",
                       ldj, T);
    if (!J)
        return ba_fail(err, BA_ERR_ARG, "band engine: couplings J are NULL");
    if (!out)
        return ba_fail(err, BA_ERR_ARG, "band engine: %s is NULL", out_name);
    int we = band_window(W, T);
    if (((size_t)T << we) > BA_BAND_MAX_CELLS)
        return ba_fail(err, BA_ERR_LIMIT,
                       "band engine: T = %d with W = %d needs T*2^W = %zu window cells per "
                       "thread, over the limit %zu",
                       T, W, (size_t)T << we, (size_t)BA_BAND_MAX_CELLS);
    return BA_OK;
}

/* Allocates nt workspaces; NULL on failure. Free with free(). */
static double *band_alloc(int we, int T, int nt, int dual, band_ws *ws)
{
    size_t S = (size_t)1 << we, per = S * ((size_t)T * (dual ? 2 : 1) + 8);
    double *buf = malloc(sizeof(double) * per * (size_t)nt);
    if (!buf)
        return NULL;
    for (int i = 0; i < nt; i++) {
        double *p = buf + per * (size_t)i;
        band_ws w = {we, S, p, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
        p += S * (size_t)T;
        if (dual) {
            w.dla = p;
            p += S * (size_t)T;
        }
        double **v[] = {&w.lb, &w.lbn, &w.dlb, &w.dlbn, &w.f, &w.P, &w.qd, &w.r};
        for (int j = 0; j < 8; j++, p += S)
            *v[j] = p;
        ws[i] = w;
    }
    return buf;
}

int ba_band_forward(int W, int B, int T, const double *h, const double *J, int ldj,
                    double *logw, char *err)
{
    int rc = band_check(W, B, T, J, ldj, logw, "logw", err);
    if (rc)
        return rc;
    int we = band_window(W, T), nt = ba_nthreads();
    band_ws *ws = malloc(sizeof(band_ws) * (size_t)nt);
    double *buf = ws ? band_alloc(we, T, nt, 0, ws) : NULL;
    if (!buf) {
        free(ws);
        return ba_fail(err, BA_ERR_NOMEM, "band engine: cannot allocate workspace for T = %d, "
                       "W = %d", T, W);
    }
    /* ~ operations: T^2/2 steps per batch element, 2^(We+1) pairs each */
    double work = (double)B * T * T * (double)((size_t)1 << we) * 4.0;
#pragma omp parallel for schedule(dynamic) num_threads(nt) if (work > BA_PAR_MIN_WORK)
    for (long q = 0; q < (long)B * T; q++) {
        int i = (int)(q % T);
        size_t row = (size_t)q * T;
        band_query_forward(&ws[ba_thread_id()], i + 1, h ? h + row : NULL, J, ldj, logw + row);
        for (int j = i + 1; j < T; j++)
            logw[row + j] = -INFINITY;
    }
    free(buf);
    free(ws);
    return BA_OK;
}

/* Queries of a backward go in at most this many fixed chunks, each with
 * its own band of dJ, summed in chunk order: the chunks depend on the
 * number of queries alone, so dJ is the same on any number of threads. */
#define BAND_CHUNKS 64

int ba_band_backward(int W, int B, int T, const double *h, const double *J, int ldj,
                     const double *g, double *dh, double *dJ, char *err)
{
    int rc = band_check(W, B, T, J, ldj, g, "g", err);
    if (rc)
        return rc;
    if (!dh && !dJ)
        return BA_OK;
    int we = band_window(W, T), nt = ba_nthreads();
    long nq = (long)B * T;
    int nch = nq < BAND_CHUNKS ? (int)nq : BAND_CHUNKS;
    size_t jsz = (size_t)T * we; /* one chunk's band: pair (t-d, t) at t*we + d-1 */
    band_ws *ws = malloc(sizeof(band_ws) * (size_t)nt);
    double *buf = ws ? band_alloc(we, T, nt, 1, ws) : NULL;
    double *djc = dJ ? calloc(jsz * (size_t)nch, sizeof(double)) : NULL;
    if (!buf || (dJ && !djc)) {
        free(buf);
        free(ws);
        free(djc);
        return ba_fail(err, BA_ERR_NOMEM, "band engine: cannot allocate workspace for T = %d, "
                       "W = %d", T, W);
    }
    double work = (double)B * T * T * (double)((size_t)1 << we) * (8.0 + we);
#pragma omp parallel for schedule(dynamic) num_threads(nt) if (work > BA_PAR_MIN_WORK)
    for (int ch = 0; ch < nch; ch++) {
        const band_ws *w = &ws[ba_thread_id()];
        for (long q = nq * ch / nch; q < nq * (ch + 1) / nch; q++) {
            int i = (int)(q % T);
            size_t row = (size_t)q * T;
            band_query_backward(w, i + 1, h ? h + row : NULL, J, ldj, g + row,
                                dh ? dh + row : NULL, djc ? djc + jsz * (size_t)ch : NULL);
        }
    }
    if (dJ)
        for (int ch = 0; ch < nch; ch++)
            for (int t = 1; t < T; t++)
                for (int d = 1; d <= we && d <= t; d++)
                    dJ[(size_t)(t - d) * ldj + t] += djc[jsz * (size_t)ch + (size_t)t * we + d - 1];
    free(buf);
    free(ws);
    free(djc);
    return BA_OK;
}
