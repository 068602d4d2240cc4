/* Loopy belief propagation on one query (spec section 8, "Mean-field
 * family", bp): the kernels behind ba_mf_forward/backward for BA_MF_BP,
 * which check the arguments first. Layouts: src/approx.h, "approximate
 * engines".
 *
 * Messages u_{k->j} = phi(A_jk, x_kj), phi(a, x) = atanh(tanh a tanh x),
 * with the cavity field x_kj = h_k + sum_{l != k, j} u_{l->k} = H_k - u_{j->k}
 * (H_k = h_k + sum_{l != k} u_{l->k}: the total minus the own message, so a
 * sweep costs O(n^2), not O(n^3)). m_j = tanh(H_j). The sweep is parallel
 * (Jacobi): every new message comes from the old H and the old messages;
 * the two messages of a pair read only each other and H, so they are
 * updated in place pair by pair. The stopping test is on the messages'
 * undamped step max |F(u) - u| < tol, the fixed point the backward
 * differentiates (each |delta H_j| is at most n - 1 times it). A zero
 * coupling's messages stay exactly 0 and are skipped.
 *
 * phi is evaluated as (1/2) log(cosh(a+x) / cosh(a-x)) =
 * sgn(a x) min(|a|, |x|) + (1/2)(log1p(e^{-2|a+x|}) - log1p(e^{-2|a-x|})),
 * which stays exact where tanh a tanh x rounds to +-1 and for |a| >> |x|;
 * where both are small the two log1p nearly cancel, leaving an absolute
 * error of a few 1e-17 (the message is then O(a x)), far below any
 * tolerance. Its exponentials and logarithms run vectorised over a batch
 * of pairs (below). Its partial
 * derivatives, with sa = sech^2 a, sx = sech^2 x, t = tanh a, T = tanh x and
 * 1 - t^2 T^2 = sa + t^2 sx (no cancellation):
 *   d phi / d x = t sx / (sa + t^2 sx) = t / (r + t^2),  r = sa / sx,
 *   d phi / d a = T sa / (sa + t^2 sx) = T / (1 + t^2 / r),
 * r from log sech^2, so nothing is 0/0 when both sech^2 underflow.
 *
 * Backward, in message space. The fixed point is u = F(u; h, J), and the
 * loss sees u through m_j = tanh(H_j): dL/du_{k->j} = g_j (1 - m_j^2) =: r_j
 * for every k. With p_kj = d phi / d x at (A_jk, x_kj) and q_kj = d phi / d a,
 * d F_{k->j} / d u_{l->k} = p_kj (l != j), so the adjoint system
 * (I - dF/du)^T w = r reads, for the multiplier w_lk of message l -> k,
 *   w_lk = r_k + sum_{j != k, l} p_kj w_kj = r_k + S_k - p_kl w_kl,
 *   S_k = sum_{j != k} p_kj w_kj,
 * the same total-minus-own form. Then
 *   dL/dh_k = r_k (through m_k) + sum_j p_kj w_kj = r_k + S_k,
 *   dL/dJ_jk = q_kj w_kj + q_jk w_jk (J_jk is the coupling of both messages
 *   of the pair; a zero coupling's pair still has q != 0 and gets its
 *   gradient).
 * The system has n(n-1) unknowns: dense LU would cost O(n^6) time and
 * O(n^4) memory (4 GB at n = 150), so it is solved by the transposed damped
 * iteration w <- (1 - lambda) w + lambda (r + P^T w), O(n^2) a sweep. Its
 * iteration matrix is the transpose of the damped forward's linearisation
 * at the fixed point, same spectrum, so it converges at the forward's rate
 * whenever the forward converged (linearly). It stops when its undamped
 * step is below tol * max |r|, from w = r. */
#include "ising/ising.h"

#include <string.h>

/* log sech^2(z), without underflow. */
static inline double lsech2(double z)
{
    double a = fabs(z);
    return log(4.0) - 2.0 * a - 2.0 * log1p(exp(-2.0 * a));
}

/* A sweep's pairs go through in batches, so that the messages'
 * exponentials and logarithms run vectorised (ba_exp_nonpos,
 * ba_log1p_unit): bp_batch_add gathers a pair (its coupling, both cavity
 * fields from the old messages, where its messages live), bp_batch_flush
 * computes both new messages of every pair gathered and moves each
 * message a share lam towards its new value. A pair's messages belong to
 * it alone and H is the old one throughout a sweep, so gathering first
 * changes nothing; the dense and the banded sweeps gather the same pairs
 * in the same order and the arithmetic is elementwise, so their iterates
 * stay bit for bit the same. */
#define BP_BATCH 64
typedef struct {
    int L;
    double a[2 * BP_BATCH], x[2 * BP_BATCH]; /* entry 2i: message k -> j, 2i + 1: j -> k */
    double e[4 * BP_BATCH], out[2 * BP_BATCH];
    double *u[2 * BP_BATCH];
    double res; /* the largest undamped step so far */
} bp_batch;

static void bp_batch_flush(bp_batch *b, double lam)
{
    int L2 = 2 * b->L;
    for (int i = 0; i < L2; i++) {
        b->e[i] = -2.0 * fabs(b->a[i] + b->x[i]);
        b->e[L2 + i] = -2.0 * fabs(b->a[i] - b->x[i]);
    }
    ba_exp_nonpos(b->e, (size_t)2 * L2);
    ba_log1p_unit(b->e, (size_t)2 * L2);
    for (int i = 0; i < L2; i++) {
        /* (1/2)(|a+x| - |a-x|) = sgn(a x) min(|a|, |x|) taken exactly */
        double a = b->a[i], x = b->x[i], fa = fabs(a), fx = fabs(x);
        double mn = fa < fx ? fa : fx; /* fmin without its NaN rule: all finite */
        double lead = (a > 0) == (x > 0) ? mn : -mn;
        b->out[i] = lead + 0.5 * (b->e[i] - b->e[L2 + i]);
    }
    for (int i = 0; i < L2; i++) {
        double d = b->out[i] - *b->u[i];
        *b->u[i] += lam * d;
        b->res = fabs(d) > b->res ? fabs(d) : b->res;
    }
    b->L = 0;
}

/* The pair {k, j} with coupling a, fields Hk, Hj, messages *ukj, *ujk. */
static inline void bp_batch_add(bp_batch *b, double a, double Hk, double Hj, double *ukj,
                                double *ujk, double lam)
{
    int i = 2 * b->L;
    b->a[i] = b->a[i + 1] = a;
    b->x[i] = Hk - *ujk, b->u[i] = ukj;
    b->x[i + 1] = Hj - *ukj, b->u[i + 1] = ujk;
    if (++b->L == BP_BATCH)
        bp_batch_flush(b, lam);
}

/* The result of a sweep's fields H (n): m (n) = tanh H, logw (n) = log
 * sigmoid(2H). */
static void bp_marginals(int n, const double *H, double *m, double *logw)
{
    for (int j = 0; j < n; j++) {
        m[j] = tanh(H[j]);
        logw[j] = ba_log_sigmoid2(H[j]);
    }
}

/* Its partial derivatives in x (*px) and a (*pa). */
static void bp_dmsg(double a, double x, double *px, double *pa)
{
    double t = tanh(a), T = tanh(x);
    double r = exp(lsech2(a) - lsech2(x)); /* sa / sx; inf or 0 at the extremes */
    *px = t / (r + t * t);
    *pa = T / (1.0 + t * t / r);
}

/* H (n) = h + the column sums of the messages; m = tanh(H). */
static void bp_fields(int n, const double *h, const double *u, double *H, double *m)
{
    for (int j = 0; j < n; j++)
        H[j] = h ? h[j] : 0.0;
    for (int k = 0; k < n; k++) {
        const double *uk = u + (size_t)k * n;
        for (int j = 0; j < n; j++)
            H[j] += uk[j]; /* u_{k->k} = 0 */
    }
    if (m)
        for (int j = 0; j < n; j++)
            m[j] = tanh(H[j]);
}

void ba_bp_forward(const ba_mf_settings *s, int n, const double *h, const double *J, int ldj,
                   double *logw, double *state, ba_mf_info *info)
{
    double *m = state, *H = state + n, *u = state + 2 * (size_t)n;
    memset(u, 0, (size_t)n * n * sizeof *u);
    bp_fields(n, h, u, H, NULL);
    ba_mf_info inf = {0, 0};
    double lam = s->damping;
    bp_batch bb;
    for (int it = 1; it <= s->max_iter; it++) {
        bb.L = 0, bb.res = 0.0;
        for (int k = 0; k + 1 < n; k++)
            for (int j = k + 1; j < n; j++) {
                double a = J[(size_t)k * ldj + j];
                if (a != 0.0)
                    bp_batch_add(&bb, a, H[k], H[j], u + (size_t)k * n + j,
                                 u + (size_t)j * n + k, lam);
            }
        bp_batch_flush(&bb, lam);
        bp_fields(n, h, u, H, NULL);
        inf.iters = it;
        if (bb.res < s->tol) {
            inf.converged = 1;
            break;
        }
    }
    /* |u_{k->j}| <= |A_jk|, so |H_j| <= |h_j| + sum_k |A_jk| */
    bp_marginals(n, H, m, logw);
    if (info)
        *info = inf;
}

/* The coupling of the pair {j, k}, j != k. */
static inline double coup(const double *J, int ldj, int j, int k)
{
    return j < k ? J[(size_t)j * ldj + k] : J[(size_t)k * ldj + j];
}

/* S (n): S_k = sum_{j != k} p_kj w_kj. */
static void bp_sums(int n, const double *P, const double *W, double *S)
{
    for (int k = 0; k < n; k++) {
        const double *pk = P + (size_t)k * n, *wk = W + (size_t)k * n;
        double acc = 0.0;
        for (int j = 0; j < n; j++)
            acc += pk[j] * wk[j]; /* p_kk = 0 */
        S[k] = acc;
    }
}

/* w (n^2) solving w_lk = r_k + S_k - p_kl w_kl by the damped transposed
 * iteration from w = r. */
static ba_mf_info bp_adjoint(const ba_mf_settings *s, int n, const double *P, const double *r,
                             double *W, double *S)
{
    double rmax = 0.0;
    for (int j = 0; j < n; j++)
        rmax = fabs(r[j]) > rmax ? fabs(r[j]) : rmax;
    for (int l = 0; l < n; l++)
        for (int k = 0; k < n; k++)
            W[(size_t)l * n + k] = l == k ? 0.0 : r[k];
    ba_mf_info inf = {0, 1};
    if (rmax == 0.0)
        return inf; /* w = 0 exactly */
    inf.converged = 0;
    double lam = s->damping;
    for (int it = 1; it <= s->max_iter; it++) {
        bp_sums(n, P, W, S);
        double res = 0.0;
        for (int l = 0; l + 1 < n; l++)
            for (int k = l + 1; k < n; k++) {
                double *wlk = W + (size_t)l * n + k, *wkl = W + (size_t)k * n + l;
                double dlk = r[k] + S[k] - P[(size_t)k * n + l] * *wkl - *wlk;
                double dkl = r[l] + S[l] - P[(size_t)l * n + k] * *wlk - *wkl;
                *wlk += lam * dlk;
                *wkl += lam * dkl;
                dlk = fabs(dlk) > fabs(dkl) ? fabs(dlk) : fabs(dkl);
                res = dlk > res ? dlk : res;
            }
        inf.iters = it;
        if (res < s->tol * rmax) {
            inf.converged = 1;
            break;
        }
    }
    return inf;
}

/* ws: P (n^2), W (n^2), r, S (n each). */
int ba_bp_backward(const ba_mf_settings *s, int n, const double *J, int ldj,
                   const double *state, const double *g, double *dh, double *dJ, int lddj,
                   double *ws, ba_mf_info *info, char *err)
{
    size_t nn = (size_t)n * n;
    const double *H = state + n, *u = state + 2 * (size_t)n;
    double *P = ws, *W = ws + nn, *r = ws + 2 * nn, *S = r + n;
    for (int j = 0; j < n; j++)
        r[j] = g[j] * ba_sech2(H[j]);
    for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++) {
            double px = 0.0, pa;
            if (j != k)
                bp_dmsg(coup(J, ldj, j, k), H[k] - u[(size_t)j * n + k], &px, &pa);
            P[(size_t)k * n + j] = px;
        }
    ba_mf_info inf = bp_adjoint(s, n, P, r, W, S);
    bp_sums(n, P, W, S);
    /* a diverging iteration ends here, before anything is written */
    for (size_t e = 0; e < nn; e++)
        if (!isfinite(W[e]))
            return ba_fail(err, BA_ERR_NUMERIC, "bp adjoint of message %d -> %d is not finite "
                           "(after %d sweeps)", (int)(e / n), (int)(e % n), inf.iters);
    if (dh)
        for (int k = 0; k < n; k++)
            dh[k] += r[k] + S[k];
    if (dJ)
        for (int j = 0; j + 1 < n; j++)
            for (int k = j + 1; k < n; k++) {
                double a = J[(size_t)j * ldj + k], px, qkj, qjk;
                bp_dmsg(a, H[k] - u[(size_t)j * n + k], &px, &qkj); /* k -> j */
                bp_dmsg(a, H[j] - u[(size_t)k * n + j], &px, &qjk); /* j -> k */
                dJ[(size_t)j * lddj + k] += qkj * W[(size_t)k * n + j] + qjk * W[(size_t)j * n + k];
            }
    if (info)
        *info = inf;
    return BA_OK;
}

/* ---------------- banded (src/ising_mf_band.c's ba_mf_band_forward and
 * ba_mf_band_backward for BA_MF_BP, after their checks)
 *
 * Only the pairs |k - j| <= W carry messages: a zero coupling's messages
 * stay exactly 0 (the dense sweep skips them), so the dense sweep's pairs
 * with a != 0 are visited in the same order and updated by the same
 * arithmetic, and H sums each spin's incoming messages in ascending k as
 * bp_fields does: the forward is the dense one bit for bit (up to the sign
 * of a zero, see src/ising_mf_band.c). The messages live in a band, ub
 * (n, 2W + 1) with u_{k->j} at ub[k (2W+1) + W + j - k], not n^2: setting
 * n^2 of them to 0 per query would cost O(n^2) again.
 *
 * The adjoint. A pair with zero coupling has p = 0 both ways, so its
 * multipliers obey w_lk <- (1 - lambda) w_lk + lambda (r_k + S_k), from
 * r_k: the same trajectory for every such message into k. One z_k per
 * spin stands for all of them beyond the band, and its step counts in the
 * stopping test as the dense iteration's n^2 messages do, so the sweep
 * count and every multiplier are the dense path's. Their gradient is then
 * dL/dJ_jk = q_kj w_kj + q_jk w_jk with q = d phi / d a at a = 0 =
 * tanh(cavity field) = m (the messages into a zero pair are 0):
 * m_k z_j + m_j z_k, bit for bit the dense value, and the vector z goes
 * out as zo (src/ising/ising.h). */

/* H (n) = h + each spin's incoming messages in ascending sender order. */
static void bp_band_fields(int n, int W, const double *h, const double *ub, double *H)
{
    int w2 = 2 * W + 1;
    for (int j = 0; j < n; j++)
        H[j] = h ? h[j] : 0.0;
    for (int k = 0; k < n; k++) {
        const double *uk = ub + (size_t)k * w2 + W - k; /* uk[j] = u_{k->j} */
        int lo = k > W ? k - W : 0, hi = n - 1 - k > W ? k + W : n - 1;
        for (int j = lo; j <= hi; j++)
            if (j != k)
                H[j] += uk[j];
    }
}

void ba_bp_band_forward(const ba_mf_settings *s, int n, int W, const double *h,
                        const double *Ab, double *logw, double *state, ba_mf_info *info)
{
    int w2 = 2 * W + 1;
    double *m = state, *H = state + n, *ub = state + 2 * (size_t)n;
    memset(ub, 0, (size_t)n * w2 * sizeof *ub);
    bp_band_fields(n, W, h, ub, H);
    ba_mf_info inf = {0, 0};
    double lam = s->damping;
    bp_batch bb;
    for (int it = 1; it <= s->max_iter; it++) {
        bb.L = 0, bb.res = 0.0;
        for (int k = 0; k + 1 < n; k++) {
            int hi = n - 1 - k > W ? k + W : n - 1;
            for (int j = k + 1; j <= hi; j++) {
                double a = Ab[(size_t)k * w2 + W + j - k];
                if (a != 0.0)
                    bp_batch_add(&bb, a, H[k], H[j], ub + (size_t)k * w2 + W + j - k,
                                 ub + (size_t)j * w2 + W + k - j, lam);
            }
        }
        bp_batch_flush(&bb, lam);
        bp_band_fields(n, W, h, ub, H);
        inf.iters = it;
        if (bb.res < s->tol) {
            inf.converged = 1;
            break;
        }
    }
    bp_marginals(n, H, m, logw);
    if (info)
        *info = inf;
}

/* S (n): S_k = sum_{j in k's band} p_kj w_kj, ascending j. */
static void bp_band_sums(int n, int W, const double *P, const double *Wm, double *S)
{
    int w2 = 2 * W + 1;
    for (int k = 0; k < n; k++) {
        const double *pk = P + (size_t)k * w2 + W - k, *wk = Wm + (size_t)k * w2 + W - k;
        int lo = k > W ? k - W : 0, hi = n - 1 - k > W ? k + W : n - 1;
        double acc = 0.0;
        for (int j = lo; j <= hi; j++)
            acc += pk[j] * wk[j]; /* p_kk = 0 */
        S[k] = acc;
    }
}

/* bp_adjoint over the band: Wm (n, 2W+1) the multipliers of the band's
 * messages (w_lk at Wm[l (2W+1) + W + k - l]), z (n) those of the zero
 * messages from beyond it. */
static ba_mf_info bp_band_adjoint(const ba_mf_settings *s, int n, int W, const double *P,
                                  const double *r, double *Wm, double *S, double *z)
{
    int w2 = 2 * W + 1;
    double rmax = 0.0;
    for (int j = 0; j < n; j++)
        rmax = fabs(r[j]) > rmax ? fabs(r[j]) : rmax;
    for (int l = 0; l < n; l++) {
        z[l] = r[l];
        for (int d = -W; d <= W; d++)
            Wm[(size_t)l * w2 + W + d] = d == 0 || l + d < 0 || l + d >= n ? 0.0 : r[l + d];
    }
    ba_mf_info inf = {0, 1};
    if (rmax == 0.0)
        return inf;
    inf.converged = 0;
    double lam = s->damping;
    for (int it = 1; it <= s->max_iter; it++) {
        bp_band_sums(n, W, P, Wm, S);
        double res = 0.0;
        for (int l = 0; l + 1 < n; l++) {
            int hi = n - 1 - l > W ? l + W : n - 1;
            for (int k = l + 1; k <= hi; k++) {
                double *wlk = Wm + (size_t)l * w2 + W + k - l, *wkl = Wm + (size_t)k * w2 + W + l - k;
                double dlk = r[k] + S[k] - P[(size_t)k * w2 + W + l - k] * *wkl - *wlk;
                double dkl = r[l] + S[l] - P[(size_t)l * w2 + W + k - l] * *wlk - *wkl;
                *wlk += lam * dlk;
                *wkl += lam * dkl;
                dlk = fabs(dlk) > fabs(dkl) ? fabs(dlk) : fabs(dkl);
                res = dlk > res ? dlk : res;
            }
        }
        for (int k = 0; k < n; k++)
            if (k > W || n - 1 - k > W) { /* k has a partner beyond the band */
                double d = r[k] + S[k] - z[k];
                z[k] += lam * d;
                res = fabs(d) > res ? fabs(d) : res;
            }
        inf.iters = it;
        if (res < s->tol * rmax) {
            inf.converged = 1;
            break;
        }
    }
    return inf;
}

/* ws: P, Wm (n (2W+1) each), r, S, z (n each). */
int ba_bp_band_backward(const ba_mf_settings *s, int n, int W, const double *Ab,
                        const double *state, const double *g, double *dh, double *dJ, int lddj,
                        int R, double *zo, double *ws, ba_mf_info *info, char *err)
{
    int w2 = 2 * W + 1;
    size_t nb = (size_t)n * w2;
    const double *m = state, *H = state + n, *ub = state + 2 * (size_t)n;
    double *P = ws, *Wm = ws + nb, *r = ws + 2 * nb, *S = r + n, *z = S + n;
    for (int j = 0; j < n; j++)
        r[j] = g[j] * ba_sech2(H[j]);
    /* P[k][j] = p_kj at (A_jk, H_k - u_{j->k}) */
    for (int k = 0; k < n; k++)
        for (int d = -W; d <= W; d++) {
            int j = k + d;
            double px = 0.0, pa;
            if (d != 0 && j >= 0 && j < n)
                bp_dmsg(Ab[(size_t)k * w2 + W + d], H[k] - ub[(size_t)j * w2 + W - d], &px, &pa);
            P[(size_t)k * w2 + W + d] = px;
        }
    ba_mf_info inf = bp_band_adjoint(s, n, W, P, r, Wm, S, z);
    bp_band_sums(n, W, P, Wm, S);
    for (size_t e = 0; e < nb; e++)
        if (!isfinite(Wm[e]))
            return ba_fail(err, BA_ERR_NUMERIC, "bp adjoint of message %d -> %d is not finite "
                           "(after %d sweeps)", (int)(e / w2), (int)(e / w2) + (int)(e % w2) - W,
                           inf.iters);
    for (int k = 0; k < n; k++)
        if (!isfinite(z[k]))
            return ba_fail(err, BA_ERR_NUMERIC, "bp adjoint of the messages into %d is not "
                           "finite (after %d sweeps)", k, inf.iters);
    if (dh)
        for (int k = 0; k < n; k++)
            dh[k] += r[k] + S[k];
    if (zo)
        memcpy(zo, z, (size_t)n * sizeof *zo);
    if (dJ)
        for (int j = 0; j + 1 < n; j++) {
            int kin = n - 1 - j > W ? j + W : n - 1, kout = n - 1 - j > R ? j + R : n - 1;
            double *dr = dJ + (size_t)j * lddj;
            for (int k = j + 1; k <= kin; k++) {
                double a = Ab[(size_t)j * w2 + W + k - j], px, qkj, qjk;
                bp_dmsg(a, H[k] - ub[(size_t)j * w2 + W + k - j], &px, &qkj); /* k -> j */
                bp_dmsg(a, H[j] - ub[(size_t)k * w2 + W + j - k], &px, &qjk); /* j -> k */
                dr[k] += qkj * Wm[(size_t)k * w2 + W + j - k] + qjk * Wm[(size_t)j * w2 + W + k - j];
            }
            for (int k = kin + 1; k <= kout; k++)
                dr[k] += m[k] * z[j] + m[j] * z[k];
        }
    if (info)
        *info = inf;
    return BA_OK;
}
