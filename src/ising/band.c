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
 * the same centred form as the reference. G is counted from the all -1
 * state, G = 2 sum over s_t = +1 of g_t (each step adds 2 g_t or 0): the
 * reference's reason (src/ising_ref.c) holds here too, where sum g_t s_t
 * left the pair terms off by O(1) relative at fields near -20. The dual
 * parts are shifted per step by a constant too (any constant cancels
 * against Gbar).
 *
 * This log path is right for any finite input but pays an exp and a log1p
 * per transition. src/ising_band_lin.c holds its linear-space twin, safe
 * while nothing a step forms underflows: the batched entry points below
 * bound each query's dynamic range (src/ising_band_lin.c, "guard") and
 * send it to the linear path when the bound allows, here otherwise. Both
 * stay callable on any query (ba_band_forward_path), as each other's twin.
 * A third, src/ising/band_lin32.c, runs the linear path's kernels in float
 * when the caller asks for it (BA_BAND_AUTO32: the engine rows' f32, a
 * model's band_f32): a query goes there when float's narrower bound
 * (ba_band_lin32_max_nats) holds, else to the double paths as above.
 * Per query of n = 1024 on one core of the 2-core EPYC VM (h ~ N(0, 1.5^2),
 * J ~ N(0, 0.3^2)), forward / backward:
 *   W = 2: log 190 / 245 us, linear 17 / 33 us
 *   W = 4: log 520 / 690 us, linear 25 / 57 us
 *   W = 8: log 6400 / 9200 us, linear 135 / 350 us. */
#include "ising/ising.h"

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
 * x' = s_{t-1-i}) from jrow[d-1] = J_{t-d,t}; built by doubling, one
 * addition per entry. */
static void field_table(int kp, double ht, const double *jrow, double *f)
{
    double base = ht;
    for (int d = 1; d <= kp; d++)
        base -= jrow[d - 1];
    f[0] = base;
    for (int i = 0; i < kp; i++) {
        double two = 2.0 * jrow[i];
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
                dla[xp << 1] = dlp[xp];
                dla[xp << 1 | 1] = dlp[xp] + 2.0 * gt;
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
            dla[x] = (sb > 0.0 ? 2.0 * gt : 0.0) + q0 * dlp[y0] + q1 * dlp[y1];
        }
    }
}

/* Backward step: lbp (2^kp) of step t-1 from lb (2^k) of step t. With dlb
 * (else NULL): dlbp, and per x' the weights of s_t = +-1 given x' as
 * qd = q1 - q0 and r = q1 e1 - q0 e0 with e_b = 2 b g_t + dlb_t(x_b),
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
            double e0 = dlb[x0], e1 = dlb[x1] + 2.0 * gt;
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
static void forward_pass(const band_ws *w, int n, const double *h, const double *Jb, int ldb,
                         const double *g)
{
    size_t S = w->S;
    double h0 = h ? h[0] : 0.0;
    w->la[0] = -h0;
    w->la[1] = h0;
    if (g) {
        w->dla[0] = 0.0;
        w->dla[1] = 2.0 * g[0];
    }
    shift_step(2, w->la, g ? w->dla : NULL);
    for (int t = 1; t < n; t++) {
        int kp = t < w->we ? t : w->we, k = t + 1 < w->we ? t + 1 : w->we;
        field_table(kp, h ? h[t] : 0.0, Jb + (size_t)t * ldb, w->f);
        double *la = w->la + (size_t)t * S, *dla = g ? w->dla + (size_t)t * S : NULL;
        fwd_step(kp, k, w->f, la - S, g ? dla - S : NULL, g ? g[t] : 0.0, la, dla);
        shift_step((size_t)1 << k, la, dla);
    }
}

/* Marginals of one query: logw (n). */
static void band_query_forward(const band_ws *w, int n, const double *h, const double *Jb,
                               int ldb, double *logw)
{
    forward_pass(w, n, h, Jb, ldb, NULL);
    double *lb = w->lb, *lbn = w->lbn;
    int k = n < w->we ? n : w->we;
    memset(lb, 0, sizeof(double) * ((size_t)1 << k));
    for (int t = n - 1;; t--) {
        k = t + 1 < w->we ? t + 1 : w->we;
        logw[t] = window_stats(k, w->la + (size_t)t * w->S, lb, NULL, NULL, w->P).logw;
        if (t == 0)
            break;
        int kp = t < w->we ? t : w->we;
        field_table(kp, h ? h[t] : 0.0, Jb + (size_t)t * ldb, w->f);
        bwd_step(kp, k, w->f, lb, NULL, 0.0, lbn, NULL, NULL, NULL);
        shift_step((size_t)1 << kp, lbn, NULL);
        double *tmp = lb;
        lb = lbn;
        lbn = tmp;
    }
}

/* Backward of one query: dh (n, may be NULL) += Cov(G, s_t), and
 * djb (T,We) row t, entry d-1 += Cov(G, s_{t-d} s_t). */
static void band_query_backward(const band_ws *w, int n, const double *h, const double *Jb,
                                int ldb, const double *g, double *dh, double *djb)
{
    forward_pass(w, n, h, Jb, ldb, g);
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
        field_table(kp, h ? h[t] : 0.0, Jb + (size_t)t * ldb, w->f);
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

/* The checks shared by both layouts (J: the couplings' pointer). */
static int band_check(int W, int B, int T, const void *J, const char *j_name, const void *out,
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
    if (!J)
        return ba_fail(err, BA_ERR_ARG, "band engine: couplings %s are NULL", j_name);
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

static int path_check(ba_band_path path, char *err)
{
    if ((unsigned)path > (unsigned)BA_BAND_LINEAR32)
        return ba_fail(err, BA_ERR_ARG, "band engine: unknown path %d", (int)path);
    return BA_OK;
}

/* Where dJ goes: entry (t-d, t) at t*a + (t-d)*b + (d-1)*c, so the dense
 * (a = 1, b = ldj, c = 0) and band (a = ldb, b = 0, c = 1) layouts take
 * the same chunk sums in the same order. */
typedef struct {
    double *p;
    size_t a, b, c;
} band_out;

/* This file's engine (defined at the end; the table in src/ising/engine.c
 * lists it). */
extern const ba_engine_ops ba_engine_band_ops;

/* One call: its inputs, each query's path and the per-thread workspaces
 * (one buffer per thread, viewed by either path: a thread runs one query
 * at a time). */
typedef struct {
    int B, T, we, ldb, nt;
    const double *h, *Jb;
    unsigned char *lin; /* (B*T) the query's path: a BAND_Q_* */
    ba_band_lin lc;
    ba_band_lin32 lc32; /* the float path's, when a query takes it */
    float *tab32;
    band_ws *lws;       /* (nt) the log path's views */
    double **bufs;      /* (nt) each thread's buffer */
    double *mem, *tab;
    const ba_stop *stop; /* polled between queries (may be NULL) */
} band_call;

static void band_free(band_call *c)
{
    free(c->lin);
    free(c->lws);
    free(c->bufs);
    free(c->mem);
    free(c->tab);
    free(c->tab32);
}

/* A query's path: log, linear in double, linear in float; BAD marks
 * non-finite fields until band_route reports them. */
enum { BAND_Q_LOG, BAND_Q_LIN, BAND_Q_LIN32, BAND_Q_BAD };

/* The couplings' check, then each query's field check and path, in
 * parallel: the lowest non-finite h (query, then key) is reported. */
static int band_route(band_call *c, ba_band_path path, ba_band_stats *stats, char *err)
{
    for (int t = 1; t < c->T; t++)
        for (int d = 1; d <= c->we && d <= t; d++) {
            double v = c->Jb[(size_t)t * c->ldb + d - 1];
            if (!isfinite(v))
                return ba_fail(err, BA_ERR_NUMERIC,
                               "band engine: coupling J_{%d,%d} = %g is not finite", t - d, t,
                               v);
        }
    double jb = ba_band_lin_jbound(c->we, c->T, c->Jb, c->ldb);
    long nq = (long)c->B * c->T;
    unsigned char *lin = c->lin;
    const double *h = c->h;
    int T = c->T, we = c->we;
    /* float only where asked for and where its own, narrower bound holds */
    double max32 = path == BA_BAND_AUTO32 ? ba_band_lin32_max_nats(we) : -1.0;
#pragma omp parallel for schedule(static) num_threads(c->nt) if (nq * T > 2000000L)
    for (long q = 0; q < nq; q++) {
        double hb = ba_band_lin_hbound(we, (int)(q % T) + 1, h ? h + (size_t)q * T : NULL);
        lin[q] = !isfinite(hb)                     ? BAND_Q_BAD
                 : hb + jb <= max32                ? BAND_Q_LIN32
                 : hb + jb <= BA_BAND_LIN_MAX_NATS ? BAND_Q_LIN
                                                   : BAND_Q_LOG;
    }
    long nlin = 0, nlin32 = 0;
    for (long q = 0; q < nq; q++) {
        if (lin[q] == BAND_Q_BAD) {
            const double *row = h + (size_t)q * T;
            for (int j = 0; j <= q % T; j++)
                if (!isfinite(row[j]))
                    return ba_fail(err, BA_ERR_NUMERIC,
                                   "band engine: field h[%ld][%ld][%d] = %g is not finite",
                                   q / T, q % T, j, row[j]);
            lin[q] = BAND_Q_LOG; /* finite fields whose sum overflowed: far past the bound */
        }
        if (path == BA_BAND_LOG)
            lin[q] = BAND_Q_LOG;
        else if (path == BA_BAND_LINEAR)
            lin[q] = BAND_Q_LIN;
        else if (path == BA_BAND_LINEAR32)
            lin[q] = BAND_Q_LIN32;
        nlin += lin[q] == BAND_Q_LIN;
        nlin32 += lin[q] == BAND_Q_LIN32;
    }
    if (stats)
        stats->linear = nlin, stats->linear32 = nlin32, stats->log = nq - nlin - nlin32;
    return BA_OK;
}

/* Sets up c (after the argument checks): paths, workspaces, and the
 * linear path's coupling tables when some query takes it. */
static int band_setup(band_call *c, ba_band_path path, int W, int B, int T, const double *h,
                      const double *Jb, int ldb, int dual, ba_band_stats *stats, char *err)
{
    memset(c, 0, sizeof *c);
    c->B = B, c->T = T, c->we = band_window(W, T), c->ldb = ldb, c->h = h, c->Jb = Jb;
    c->nt = ba_nthreads();
    size_t S = (size_t)1 << c->we, logsz = S * ((size_t)T * (dual ? 2 : 1) + 8);
    size_t linsz = ba_band_lin_ws_doubles(c->we, T), lin32sz = ba_band_lin32_ws_doubles(c->we, T);
    size_t per = logsz > linsz ? logsz : linsz;
    per = per > lin32sz ? per : lin32sz;
    c->lin = malloc((size_t)B * T);
    c->lws = malloc(sizeof(band_ws) * (size_t)c->nt);
    c->bufs = malloc(sizeof(double *) * (size_t)c->nt);
    c->mem = malloc(sizeof(double) * per * (size_t)c->nt);
    if (!c->lin || !c->lws || !c->bufs || !c->mem)
        goto nomem;
    int rc = band_route(c, path, stats, err);
    if (rc)
        return rc;
    for (int i = 0; i < c->nt; i++) {
        double *p = c->bufs[i] = c->mem + per * (size_t)i;
        band_ws w = {c->we, S, p, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
        p += S * (size_t)T;
        if (dual)
            w.dla = p, p += S * (size_t)T;
        double **v[] = {&w.lb, &w.lbn, &w.dlb, &w.dlbn, &w.f, &w.P, &w.qd, &w.r};
        for (int j = 0; j < 8; j++, p += S)
            *v[j] = p;
        c->lws[i] = w;
    }
    c->lc = (ba_band_lin){c->we, T, ldb, Jb, NULL};
    c->lc32 = (ba_band_lin32){c->we, T, ldb, Jb, NULL};
    int any = 0, any32 = 0;
    for (long q = 0; q < (long)B * T; q++)
        any |= c->lin[q] != BAND_Q_LOG, any32 |= c->lin[q] == BAND_Q_LIN32;
    if (!any)
        return BA_OK;
    size_t row = ba_band_lin_table_doubles(c->we);
    if (!(c->tab = malloc(sizeof(double) * row * (size_t)T)))
        goto nomem;
    /* two exps an entry of a row: worth threads past a few hundred rows */
    double *tab = c->tab;
    int we = c->we;
#pragma omp parallel for schedule(static) num_threads(c->nt) if (row * (size_t)T > 65536)
    for (int t = 0; t < T; t++)
        ba_band_lin_table_row(we, t, Jb, ldb, tab + row * (size_t)t);
    c->lc.tab = c->tab;
    if (any32) {
        if (!(c->tab32 = malloc(sizeof(float) * row * (size_t)T)))
            goto nomem;
        ba_band_lin32_table(we, T, c->tab, c->tab32);
        c->lc32.tab = c->tab32;
    }
    return BA_OK;
nomem:
    return ba_fail(err, BA_ERR_NOMEM, "band engine: cannot allocate workspace for T = %d, W = %d",
                   T, W);
}

static int band_forward_stop(ba_band_path path, int W, int B, int T, const double *h,
                             const double *Jb, double *logw, ba_band_stats *stats,
                             const ba_stop *stop, char *err)
{
    int rc = band_check(W, B, T, Jb, "Jb", logw, "logw", err);
    if (rc || (rc = path_check(path, err)))
        return rc;
    band_call c;
    if ((rc = band_setup(&c, path, W, B, T, h, Jb, W, 0, stats, err))) {
        band_free(&c);
        return rc;
    }
    /* ~ operations: T^2/2 steps per batch element, 2^(We+1) pairs each */
    double work = (double)B * T * T * (double)((size_t)1 << c.we) * 4.0;
    long skipped = 0;
    /* a stop request skips the queries not yet begun: a long call (T =
     * 4096, W = 12: ~10 ms a query) ends within one query per thread */
#pragma omp parallel for schedule(dynamic) num_threads(c.nt) if (work > BA_PAR_MIN_WORK) \
    reduction(+ : skipped)
    for (long q = 0; q < (long)B * T; q++) {
        if (ba_stop_requested(stop)) {
            skipped++;
            continue;
        }
        int i = (int)(q % T), id = ba_thread_id();
        size_t row = (size_t)q * T;
        const double *hq = h ? h + row : NULL;
        if (c.lin[q] == BAND_Q_LIN32)
            ba_band_lin32_forward(&c.lc32, c.bufs[id], i + 1, hq, logw + row);
        else if (c.lin[q] == BAND_Q_LIN)
            ba_band_lin_forward(&c.lc, c.bufs[id], i + 1, hq, logw + row);
        else
            band_query_forward(&c.lws[id], i + 1, hq, Jb, W, logw + row);
        for (int j = i + 1; j < T; j++)
            logw[row + j] = -INFINITY;
    }
    band_free(&c);
    return ba_engine_stopped(&ba_engine_band_ops, skipped, (long)B * T, err);
}

int ba_band_forward_path(ba_band_path path, int W, int B, int T, const double *h,
                         const double *Jb, double *logw, ba_band_stats *stats, char *err)
{
    return band_forward_stop(path, W, B, T, h, Jb, logw, stats, NULL, err);
}

/* Queries of a backward go in at most this many fixed chunks, each with
 * its own band of dJ, summed in chunk order: the chunks depend on the
 * number of queries alone, so dJ is the same on any number of threads. */
#define BAND_CHUNKS 64

static int band_backward_core(ba_band_path path, int W, int B, int T, const double *h,
                              const double *Jb, int ldb, const double *g, double *dh,
                              band_out dJ, ba_band_stats *stats, const ba_stop *stop,
                              char *err)
{
    band_call c;
    int rc = band_setup(&c, path, W, B, T, h, Jb, ldb, 1, stats, err);
    long nq = (long)B * T;
    int nch = nq < BAND_CHUNKS ? (int)nq : BAND_CHUNKS, we = c.we;
    size_t jsz = (size_t)T * we; /* one chunk's band: pair (t-d, t) at t*we + d-1 */
    double *djc = NULL;
    if (!rc && dJ.p && !(djc = calloc(jsz * (size_t)nch, sizeof(double))))
        rc = ba_fail(err, BA_ERR_NOMEM, "band engine: cannot allocate workspace for T = %d, "
                     "W = %d", T, W);
    if (rc) {
        band_free(&c);
        return rc;
    }
    double work = (double)B * T * T * (double)((size_t)1 << we) * (8.0 + we);
    long skipped = 0;
#pragma omp parallel for schedule(dynamic) num_threads(c.nt) if (work > BA_PAR_MIN_WORK) \
    reduction(+ : skipped)
    for (int ch = 0; ch < nch; ch++) {
        int id = ba_thread_id();
        double *dj = djc ? djc + jsz * (size_t)ch : NULL;
        for (long q = nq * ch / nch; q < nq * (ch + 1) / nch; q++) {
            if (ba_stop_requested(stop)) {
                skipped++;
                continue;
            }
            int i = (int)(q % T);
            size_t row = (size_t)q * T;
            const double *hq = h ? h + row : NULL;
            double *dhq = dh ? dh + row : NULL;
            if (c.lin[q] == BAND_Q_LIN32)
                ba_band_lin32_backward(&c.lc32, c.bufs[id], i + 1, hq, g + row, dhq, dj);
            else if (c.lin[q] == BAND_Q_LIN)
                ba_band_lin_backward(&c.lc, c.bufs[id], i + 1, hq, g + row, dhq, dj);
            else
                band_query_backward(&c.lws[id], i + 1, hq, Jb, ldb, g + row, dhq, dj);
        }
    }
    if (djc && !skipped)
        for (int ch = 0; ch < nch; ch++)
            for (int t = 1; t < T; t++)
                for (int d = 1; d <= we && d <= t; d++)
                    dJ.p[(size_t)t * dJ.a + (size_t)(t - d) * dJ.b + (size_t)(d - 1) * dJ.c] +=
                        djc[jsz * (size_t)ch + (size_t)t * we + d - 1];
    free(djc);
    band_free(&c);
    return ba_engine_stopped(&ba_engine_band_ops, skipped, nq, err);
}

static int band_backward_stop(ba_band_path path, int W, int B, int T, const double *h,
                              const double *Jb, const double *g, double *dh, double *dJb,
                              ba_band_stats *stats, const ba_stop *stop, char *err)
{
    int rc = band_check(W, B, T, Jb, "Jb", g, "g", err);
    if (rc || (rc = path_check(path, err)) || (!dh && !dJb))
        return rc;
    band_out o = {dJb, (size_t)W, 0, 1};
    return band_backward_core(path, W, B, T, h, Jb, W, g, dh, o, stats, stop, err);
}

int ba_band_backward_path(ba_band_path path, int W, int B, int T, const double *h,
                          const double *Jb, const double *g, double *dh, double *dJb,
                          ba_band_stats *stats, char *err)
{
    return band_backward_stop(path, W, B, T, h, Jb, g, dh, dJb, stats, NULL, err);
}

int ba_band_forward_jb(int W, int B, int T, const double *h, const double *Jb, double *logw,
                       char *err)
{
    return ba_band_forward_path(BA_BAND_AUTO, W, B, T, h, Jb, logw, NULL, err);
}

int ba_band_backward_jb(int W, int B, int T, const double *h, const double *Jb,
                        const double *g, double *dh, double *dJb, char *err)
{
    return ba_band_backward_path(BA_BAND_AUTO, W, B, T, h, Jb, g, dh, dJb, NULL, err);
}

/* The dense layout's checks, then its band as a (T,W) copy (T W doubles,
 * against the engine's T 2^W per thread). NULL after an error. */
static double *dense_band(int W, int B, int T, const double *J, int ldj, const void *out,
                          const char *out_name, char *err, int *rc)
{
    if ((*rc = band_check(W, B, T, J, "J", out, out_name, err)))
        return NULL;
    if (ldj < T) {
        *rc = ba_fail(err, BA_ERR_ARG, "band engine: leading dimension ldj = %d below T = %d",
                      ldj, T);
        return NULL;
    }
    double *Jb = calloc((size_t)T * W, sizeof(double));
    if (!Jb) {
        *rc = ba_fail(err, BA_ERR_NOMEM, "band engine: cannot allocate the band of T = %d", T);
        return NULL;
    }
    for (int t = 1; t < T; t++)
        for (int d = 1; d <= W && d <= t; d++)
            Jb[(size_t)t * W + d - 1] = J[(size_t)(t - d) * ldj + t];
    return Jb;
}

static int dense_forward(ba_band_path path, int W, int B, int T, const double *h,
                         const double *J, int ldj, double *logw, const ba_stop *stop, char *err)
{
    int rc;
    double *Jb = dense_band(W, B, T, J, ldj, logw, "logw", err, &rc);
    if (Jb)
        rc = band_forward_stop(path, W, B, T, h, Jb, logw, NULL, stop, err);
    free(Jb);
    return rc;
}

int ba_band_forward_stop(int W, int B, int T, const double *h, const double *J, int ldj,
                              double *logw, const ba_stop *stop, char *err)
{
    return dense_forward(BA_BAND_AUTO, W, B, T, h, J, ldj, logw, stop, err);
}

int ba_band_forward(int W, int B, int T, const double *h, const double *J, int ldj,
                    double *logw, char *err)
{
    return ba_band_forward_stop(W, B, T, h, J, ldj, logw, NULL, err);
}

static int dense_backward(ba_band_path path, int W, int B, int T, const double *h,
                          const double *J, int ldj, const double *g, double *dh, double *dJ,
                          const ba_stop *stop, char *err)
{
    int rc;
    double *Jb = dense_band(W, B, T, J, ldj, g, "g", err, &rc);
    if (Jb && (dh || dJ)) {
        band_out o = {dJ, 1, (size_t)ldj, 0};
        rc = band_backward_core(path, W, B, T, h, Jb, W, g, dh, o, NULL, stop, err);
    }
    free(Jb);
    return rc;
}

int ba_band_backward_stop(int W, int B, int T, const double *h, const double *J, int ldj,
                               const double *g, double *dh, double *dJ, const ba_stop *stop,
                               char *err)
{
    return dense_backward(BA_BAND_AUTO, W, B, T, h, J, ldj, g, dh, dJ, stop, err);
}

int ba_band_backward(int W, int B, int T, const double *h, const double *J, int ldj,
                     const double *g, double *dh, double *dJ, char *err)
{
    return ba_band_backward_stop(W, B, T, h, J, ldj, g, dh, dJ, NULL, err);
}

/* ------------------------------------------------ the engine interface */

/* rows.f32: the float linear path where its bound allows (AUTO32) */
static int band_rows_forward(const ba_engine_rows *r, double *logw, char *err)
{
    ba_band_path p = r->f32 ? BA_BAND_AUTO32 : BA_BAND_AUTO;
    return r->jb ? band_forward_stop(p, r->W, r->B, r->T, r->h, r->J, logw, NULL, r->stop, err)
                 : dense_forward(p, r->W, r->B, r->T, r->h, r->J, r->ldj, logw, r->stop, err);
}

static int band_rows_backward(const ba_engine_rows *r, const double *g, double *dh, double *dJ,
                              char *err)
{
    ba_band_path p = r->f32 ? BA_BAND_AUTO32 : BA_BAND_AUTO;
    return r->jb ? band_backward_stop(p, r->W, r->B, r->T, r->h, r->J, g, dh, dJ, NULL, r->stop,
                                      err)
                 : dense_backward(p, r->W, r->B, r->T, r->h, r->J, r->ldj, g, dh, dJ, r->stop,
                                  err);
}

/* Without a band its window is all n - 1 earlier keys, at most
 * BA_MAX_BAND: hence max_spins. */
/* A window of W (or, without a band, T - 1) spins, and T * 2^W window
 * cells per thread. */
static int band_limits_check(const ba_engine_limits *q, char *err)
{
    int T = q->T, W = q->band > 0 ? q->band : T - 1;
    if (q->band == 0 && T - 1 > BA_MAX_BAND)
        return ba_fail(err, BA_ERR_LIMIT,
                       "T = %d is too large for the band engine without a band: it would carry "
                       "all T - 1 = %d earlier keys (2^%d window states) and accepts at most %d; "
                       "set a band W (config 'band', --band W)",
                       T, T - 1, T - 1, BA_MAX_BAND);
    int we = W < T - 1 ? W : T - 1;
    if (we > 0 && ((size_t)T << we) > BA_BAND_MAX_CELLS)
        return ba_fail(err, BA_ERR_LIMIT,
                       "T = %d with band W = %d is too large for the band engine: it keeps "
                       "T * 2^W = %zu window values per thread, at most %zu (a narrower band or "
                       "a shorter T)",
                       T, W, (size_t)T << we, (size_t)BA_BAND_MAX_CELLS);
    return BA_OK;
}

const ba_engine_ops ba_engine_band_ops = {
    .id = BA_ENGINE_BAND,
    .name = "band",
    .summary = "exact for couplings of range <= W: a forward-backward pass along the keys, any T",
    .caps = BA_ENGINE_CAP_EXACT | BA_ENGINE_CAP_BAND,
    .max_spins = BA_MAX_BAND + 1,
    .check = band_limits_check,
    .forward = band_rows_forward,
    .backward = band_rows_backward,
};
