/* The approximate engines' internal declarations (mf, tap, bp per query
 * and banded, the batched entry points, hybrid): part of
 * src/ising/ising.h, which includes it where the engines' types are
 * defined; include ising.h, not this file. */
#ifndef BA_APPROX_H
#define BA_APPROX_H

/* ---------------- approximate engines (mean field family), per query
 * Spec section 8, "Mean-field family" and "Implicit gradients"
 * (src/ising_mf.c: mf, tap and the shared checks; src/ising_bp.c: bp). One
 * query of n spins: h (n) fields or NULL for h = 0, J couplings (rows of
 * ldj >= n, J[j*ldj + k] read for j < k only), A = J + J^T with zero
 * diagonal. Every method writes m_j = tanh(phi_j) for an effective field
 * phi:
 *   mf:  phi = h + A m
 *   tap: phi_j = h_j + (A m)_j - m_j sum_k A_jk^2 (1 - m_k^2)
 *   bp:  phi_j = h_j + sum_k u_{k->j}, with the cavity messages
 *        u_{k->j} = atanh(tanh A_jk tanh(phi_k - u_{j->k}))
 * and logw_j = log P(s_j = +1) = log sigmoid(2 phi_j), so a tiny weight
 * keeps its relative precision.
 *
 * Forward: the damped iteration x <- (1 - damping) x + damping F(x) (x = m
 * for mf/tap, from m = tanh(h); x = the messages for bp, from 0) until the
 * undamped step max |F(x) - x| < tol, at most max_iter sweeps of O(n^2).
 * Not converging is not an error: the last F(x) is returned with
 * info.converged = 0, finite (BA_ERR_NUMERIC where sums of couplings
 * near DBL_MAX overflow). It writes logw (n)
 * and state (ba_mf_state_doubles): m (n) at state[0], phi (n) at state[n],
 * and for bp the messages at state[2n], u_{k->j} at [2n + k*n + j].
 *
 * Backward: the exact gradient of the method's fixed point (as converged)
 * by implicit differentiation, (I - dF/dx)^T v = dL/dx, from the state of
 * a forward with the same J. g (n) = dL/dm; dh (n) += (may be NULL); dJ
 * (rows of lddj >= n, entries j < k) += (may be NULL). mf/tap solve the n x
 * n adjoint system by LAPACK's LU (BA_MF_ADJ_LU, ipiv: n ints) or by the
 * transposed damped iteration (BA_MF_ADJ_ITER, ipiv may be NULL); bp always
 * iterates, in message space (n(n-1) unknowns), with the settings' damping
 * and max_iter and tolerance tol * max_j |g_j (1 - m_j^2)|; info (may be
 * NULL) gets its sweeps and convergence (LU: 1 and 1).
 *
 * ws: ba_mf_ws_doubles(n) doubles of workspace, either direction.
 * Errors: BA_ERR_ARG for bad settings (damping outside (0, 1], tol not > 0
 * and finite, max_iter < 1, unknown method or adjoint), n < 1, ldj or lddj
 * < n, a NULL array that is needed; BA_ERR_NUMERIC naming a non-finite h_j,
 * J_jk or g_j, a forward iteration that overflowed (couplings near
 * DBL_MAX), a singular LU adjoint system or an adjoint that came out
 * non-finite (an iterative solve that diverged): nothing is written then. */
typedef enum { BA_MF_NAIVE = 0, BA_MF_TAP = 1, BA_MF_BP = 2 } ba_mf_method;
typedef enum { BA_MF_ADJ_LU = 0, BA_MF_ADJ_ITER = 1 } ba_mf_adjoint;
typedef struct {
    double damping; /* lambda in (0, 1]: the share of the new iterate */
    double tol;     /* > 0: on max |F(x) - x| */
    int max_iter;   /* >= 1 sweeps, forward and iterative adjoint alike */
    ba_mf_adjoint adjoint; /* mf/tap only; zero-initialised = LU */
    const double *start;   /* mf/tap: (n) the first iterate m, each in [-1, 1]; NULL
                              (zero-initialised): tanh(h), the J = 0 solution. The
                              backward's re-solve starts at the forward's answer */
    int sequential;        /* mf/tap, dense kernel only: 1 = Gauss-Seidel sweeps
                              (src/ising_mf.c says why), 0 (zero-initialised) =
                              Jacobi; the banded kernels and bp refuse 1 */
} ba_mf_settings;
typedef struct {
    int iters;     /* sweeps done */
    int converged; /* 1 when the step fell below the tolerance */
} ba_mf_info;
size_t ba_mf_state_doubles(ba_mf_method meth, int n);
size_t ba_mf_ws_doubles(int n);
int ba_mf_check_settings(const ba_mf_settings *s, char *err);
/* One mf/tap sweep's second half, shared by the dense and banded kernels
 * (so their iterates stay bit for bit the same): m (n) = tanh(phi), and
 * the undamped step max |m - x| returned; then x (n) += lambda (m - x).
 * tanh(p) = sign(p) (1 - e) / (1 + e), e = exp(-2 |p|) by the vectorised
 * exponential: within a few ulp of 1 in absolute terms, which is all a
 * fixed point iterated to a tolerance of 1e-8 or more can use (the
 * weights come from phi, not m); libm's tanh was half of a banded mf
 * row's time. ba_mf_tanh: m (n) = tanh(phi) so (the GEMM path's tanh
 * too). */
static inline void ba_mf_tanh(int n, const double *phi, double *m)
{
    for (int j = 0; j < n; j++)
        m[j] = -2.0 * fabs(phi[j]);
    ba_exp_nonpos(m, (size_t)n);
    for (int j = 0; j < n; j++) {
        double v = (1.0 - m[j]) / (1.0 + m[j]);
        m[j] = phi[j] < 0.0 ? -v : v;
    }
}

static inline double ba_mf_tanh_step(int n, const double *phi, const double *x, double *m)
{
    ba_mf_tanh(n, phi, m);
    double res = 0.0;
    for (int j = 0; j < n; j++) {
        double d = fabs(m[j] - x[j]);
        res = d > res ? d : res;
    }
    return res;
}

/* The first iterate of the mf/tap kernels: s->start, else tanh(h) (h may
 * be NULL: zeros) by ba_mf_tanh, so that a row without couplings is
 * converged at the first sweep. */
static inline void ba_mf_first(int n, const double *start, const double *h, double *x)
{
    if (start)
        memcpy(x, start, sizeof(double) * (size_t)n);
    else if (h)
        ba_mf_tanh(n, h, x);
    else
        memset(x, 0, sizeof(double) * (size_t)n); /* tanh 0, exactly as ba_mf_tanh gives it */
}

/* m = <s> = 2 P(s = +1) - 1 from log P(s = +1), without cancellation near
 * +-1 (the hybrid engine's magnetisations, the approximate backward's
 * starts). */
static inline double ba_m_of_logw(double lw)
{
    return lw > -0.6931471805599453 ? 1.0 + 2.0 * expm1(lw) : 2.0 * exp(lw) - 1.0;
}

/* The retry of the policy on non-convergence (below, "approximate engines,
 * batched"): used gets a quarter of s's damping and four times its sweeps
 * (at most BA_APPROX_MAX_ITER). */
static inline void ba_mf_retry(const ba_mf_settings *s, ba_mf_settings *used)
{
    used->damping = s->damping / 4.0;
    used->max_iter = s->max_iter > BA_APPROX_MAX_ITER / 4 ? BA_APPROX_MAX_ITER : 4 * s->max_iter;
}

static inline void ba_mf_damp(int n, double lambda, const double *m, double *x)
{
    for (int j = 0; j < n; j++)
        x[j] += lambda * (m[j] - x[j]);
}

/* The forwards' shared checks: every h[j] finite (h may be NULL), and
 * every field state[n + j] of the result finite (else the couplings
 * overflowed). BA_OK or BA_ERR_NUMERIC naming the spin. */
int ba_mf_check_fields(int n, const double *h, char *err);
int ba_mf_check_state(ba_mf_method meth, int n, const double *state, char *err);
int ba_mf_forward(ba_mf_method meth, const ba_mf_settings *s, int n, const double *h,
                  const double *J, int ldj, double *logw, double *state, double *ws,
                  ba_mf_info *info, char *err);
int ba_mf_backward(ba_mf_method meth, const ba_mf_settings *s, int n, const double *J,
                   int ldj, const double *state, const double *g, double *dh, double *dJ,
                   int lddj, double *ws, int *ipiv, ba_mf_info *info, char *err);

/* bp's kernels (src/ising_bp.c), called by ba_mf_forward/backward after
 * their checks, with the layouts above. */
void ba_bp_forward(const ba_mf_settings *s, int n, const double *h, const double *J, int ldj,
                   double *logw, double *state, ba_mf_info *info);
int ba_bp_backward(const ba_mf_settings *s, int n, const double *J, int ldj,
                   const double *state, const double *g, double *dh, double *dJ, int lddj,
                   double *ws, ba_mf_info *info, char *err);

/* ---------------- approximate engines, banded per query
 * (src/ising_mf_band.c, bp's kernels in src/ising_bp.c). The same methods
 * for couplings of range at most W >= 0 (A_jk = 0 for |j - k| > W) at
 * O(n W) a sweep. The couplings come as a band Ab (n' >= n rows of 2W + 1):
 * Ab[j (2W+1) + W + d] = A_{j,j+d} for |d| <= W (0 where j + d is outside
 * the query, 0 at d = 0), built by ba_mf_band_build from J (T,ldj); the
 * band of a block of T keys serves every query n <= T (row j reads only
 * k < n). ba_mf_reach gives the smallest such W of J's leading n x n
 * corner (0 when every coupling is 0; O(n^2) at worst).
 *
 * Forward: ba_mf_forward's fixed point, logw and info bit for bit (the
 * same sums in the same order, less exact zeros); state
 * (ba_mf_band_state_doubles): m (n) at state[0], phi (n) at state[n], for
 * bp the band's messages at state[2n], u_{k->j} at [2n + k (2W+1) + W +
 * j - k]. Backward: ba_mf_backward's gradient; mf/tap solve the adjoint by
 * banded LU (dgbsv, O(n W^2), any n, s->adjoint not read, ipiv: n ints;
 * info 1 and 1), bp iterates over the band (its sweeps and multipliers
 * are the dense iteration's). dJ (rows of lddj >= n) += only the entries
 * 0 < k - j <= R (R >= 0; the entries beyond the band have a gradient, see
 * src/ising_mf_band.c), the others are not touched. zo (n, may be NULL)
 * gets the vector of the far gradient: for every k - j > W,
 *   dL/dJ_jk = zo_j m_k + zo_k m_j
 * (mf/tap: zo = dL/dh; bp: the multipliers of the zero messages), so a
 * caller can form the far entries of many queries as one matrix product.
 * ws: ba_mf_band_ws_doubles(n, W) doubles, either direction. Errors as
 * ba_mf_forward/backward, plus BA_ERR_ARG for W < 0, R < 0 or a NULL Ab,
 * BA_ERR_NUMERIC for a non-finite coupling in the band. */
int ba_mf_reach(int n, const double *J, int ldj);
void ba_mf_band_build(int n, int W, const double *J, int ldj, double *Ab);
size_t ba_mf_band_state_doubles(ba_mf_method meth, int n, int W);
size_t ba_mf_band_ws_doubles(int n, int W);
int ba_mf_band_forward(ba_mf_method meth, const ba_mf_settings *s, int n, int W,
                       const double *h, const double *Ab, double *logw, double *state,
                       double *ws, ba_mf_info *info, char *err);
int ba_mf_band_backward(ba_mf_method meth, const ba_mf_settings *s, int n, int W,
                        const double *Ab, const double *state, const double *g, double *dh,
                        double *dJ, int lddj, int R, double *zo, double *ws, int *ipiv,
                        ba_mf_info *info, char *err);
void ba_bp_band_forward(const ba_mf_settings *s, int n, int W, const double *h,
                        const double *Ab, double *logw, double *state, ba_mf_info *info);
int ba_bp_band_backward(const ba_mf_settings *s, int n, int W, const double *Ab,
                        const double *state, const double *g, double *dh, double *dJ, int lddj,
                        int R, double *zo, double *ws, ba_mf_info *info, char *err);

/* ---------------- approximate engines, batched (the attention layer's
 * entry points; src/ising_approx.c for mf/tap/bp, src/ising_hybrid.c for
 * hybrid). Layouts of the band engine's dense entry points: h (B,T,T) or
 * NULL (h = 0), logw (B,T,T) with row i of element b the query of the
 * n = i + 1 keys 0..i (entries j > i not written), J (T,ldj) read for
 * j < k only (full range: every pair), g = dL/dm (B,T,T), dh (B,T,T) +=
 * (may be NULL), dJ (T,ldj) += entries j < k (may be NULL).
 *
 * The policy on non-convergence (both directions, every method): a query
 * whose iteration has not converged within s->max_iter sweeps at
 * s->damping is solved again from the start with damping / 4 and 4 x
 * max_iter (counted in retried); one that still has not converged keeps
 * its last iterate (finite) and is counted in unconverged. The full-range
 * GEMM path of mf and tap (T >= 64, src/approx_gemm.h) gives its Anderson
 * iteration at most BA_APPROX_GEMM_AA_SWEEPS sweeps, then solves a row it
 * has not by the sequential sweeps (undamped, max_iter) before that retry. The backward
 * repeats the forward of each query (the same sweeps, bit for bit) rather
 * than storing its state. mf/tap adjoints: LU for n <= BA_APPROX_LU_MAX_N,
 * else the transposed iteration (its spectrum is the converged forward's,
 * so it converges where the forward did); bp's adjoint always iterates.
 * The backward's stats count the adjoint solves: sweeps (LU: 1), and in
 * unconverged the rows whose forward or adjoint did not converge. A row
 * whose forward did not converge, or whose adjoint diverged (not finite),
 * adds no gradient: the implicit gradient is that of a fixed point, which
 * such a row does not have; an adjoint iteration that stopped unconverged
 * but finite adds its last iterate's. Queries run in parallel
 * (OpenMP); stats and the
 * gradient of the couplings are reduced in a fixed order, so results do not
 * depend on the thread count.
 * Errors: BA_ERR_ARG (settings, e not approximate, W outside [1,
 * BA_BAND_MAX_W] for hybrid, B < 1, T outside [1, BA_MAX_BLOCK], ldj < T,
 * NULL arrays); BA_ERR_NUMERIC naming the first non-finite h or coupling
 * (before any output is written) or a query whose fixed point overflowed;
 * BA_ERR_NOMEM. */
#define BA_APPROX_LU_MAX_N 48
/* What the batched paths share (src/ising/approx_common.c, which calls
 * none of them back).
 * check_block: B, T, ldj, J not NULL, every coupling j < k < T and every
 * field a row reads (j <= i) finite; the first bad one named. BA_OK or
 * BA_ERR_ARG/NUMERIC.
 * check_rows: r's settings (ba_approx_validate), with window the hybrid
 * window r->W in [1, BA_BAND_MAX_W], then check_block.
 * check_grad: g (B,T,T) not NULL and finite where a row reads it.
 * fail: a row's failure kept for the lowest row index (so the message
 * does not depend on the thread schedule; row -1: none), reported as
 * "NAME engine, batch element b, query i (i+1 keys): ...". */
int ba_approx_check_block(int B, int T, const double *h, const double *J, int ldj, char *err);
int ba_approx_check_rows(const ba_engine_rows *r, int window, char *err);
int ba_approx_check_grad(int B, int T, const double *g, char *err);
ba_mf_settings ba_approx_mf_settings(const ba_approx *a);
typedef struct {
    long row;
    int rc;
    char err[BA_ERR_LEN];
} ba_approx_fail;
void ba_approx_fail_note(ba_approx_fail *f, long row, int rc, const char *err);
int ba_approx_fail_report(const ba_approx_fail *f, const char *name, int T, char *err);
/* The by-number entry points (src/ising/solve.c: the engine's interface
 * from the table; BA_ERR_ARG for an engine that is not approximate). */
/* W is the hybrid engine's exact window (ignored by mf, tap, bp). st (may
 * be NULL) += this call's counts. */
int ba_approx_forward(ba_engine e, const ba_approx *a, int W, int B, int T, const double *h,
                      const double *J, int ldj, double *logw, ba_approx_stats *st, char *err);
int ba_approx_backward(ba_engine e, const ba_approx *a, int W, int B, int T, const double *h,
                       const double *J, int ldj, const double *g, double *dh, double *dJ,
                       ba_approx_stats *st, char *err);
/* Banded heads: when the reach Wr of J (the largest k - j with J_jk != 0)
 * has 2 Wr + 1 <= T / 2, mf, tap and bp run the banded per-query kernels
 * (ba_mf_band_*: the same logw bit for bit, the same stats; the mf/tap
 * adjoint by banded LU at any n, sweeps 1). The couplings' gradient is
 * not banded (zero couplings have one): ba_approx_backward adds every
 * entry j < k; ba_approx_backward_reach (R >= 0, else BA_ERR_ARG) adds
 * only the entries 0 < k - j <= R and leaves the others of dJ as they are
 * (banded mf, tap, bp; hybrid and the full-range GEMM path of mf and tap
 * at T >= 64, src/approx_gemm.h, add them all), for a caller that reads no more,
 * such as a layer whose couplings end at its band: then the far entries'
 * O(T^3) products are not formed. */
int ba_approx_backward_reach(ba_engine e, const ba_approx *a, int W, int B, int T,
                             const double *h, const double *J, int ldj, const double *g,
                             double *dh, double *dJ, int R, ba_approx_stats *st, char *err);
/* ba_approx_backward_reach with the forward's result logw0 (B,T,T) (may be
 * NULL): mf and tap on the per-query paths (dense rows below the GEMM
 * path's T, and banded rows) start each row's re-solve at m = 2 w - 1 of
 * it instead of at the J = 0 solution, and the full-range GEMM path at its
 * fields, so the re-solve takes a sweep or a few (a float logw is a start
 * within 1e-7) instead of the forward's dozens; it stops by the same test,
 * so the point differentiated is a fixed point to the same tolerance,
 * within about tol of the forward's (not bit for bit: the attention
 * layer's f32 and f64 backward use it). A NaN entry leaves its row's start
 * cold; a warm row that does not converge is solved cold. bp and hybrid
 * ignore it. */
int ba_approx_backward_from(ba_engine e, const ba_approx *a, int W, int B, int T,
                            const double *h, const double *J, int ldj, const double *logw0,
                            const double *g, double *dh, double *dJ, int R, ba_approx_stats *st,
                            char *err);

/* The hybrid engine (src/ising/hybrid.c), called by its interface
 * (ba_engine_hybrid_ops) after the checks, same layouts and policy: exact
 * chain inference inside the window W (the band engine) with fields
 * h_j + sum_{|k-j| > W} A_jk m_k, iterated to self-consistency; gradients
 * by implicit differentiation, the adjoint iterated through the band
 * engine's backward (derivation in the file). stop (may be NULL) is polled
 * every sweep and by the band calls (BA_ERR_INTERRUPTED). */
int ba_hybrid_forward(const ba_approx *a, int W, int B, int T, const double *h, const double *J,
                      int ldj, double *logw, ba_approx_stats *st, const ba_stop *stop,
                      char *err);
int ba_hybrid_backward(const ba_approx *a, int W, int B, int T, const double *h,
                       const double *J, int ldj, const double *g, double *dh, double *dJ,
                       ba_approx_stats *st, const ba_stop *stop, char *err);

#endif
