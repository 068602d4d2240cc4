/* Approximate engines, per query (spec section 8, "Mean-field family" and
 * "Implicit gradients"): naive mean field (mf) and TAP here, with the
 * checks and the dispatch shared with belief propagation (src/ising_bp.c).
 * Layouts and errors: src/approx.h, "approximate engines".
 *
 * Forward. x <- (1 - lambda) x + lambda F(x) from the J = 0 solution. The
 * stopping test is on the undamped step F(x) - x, the distance to the fixed
 * point, so a small damping does not loosen it. The returned m is F(x) of
 * the last sweep, i.e. tanh(phi) with phi the effective field just
 * computed, and logw = log sigmoid(2 phi) comes from the same phi.
 * s->sequential: Gauss-Seidel sweeps instead (spin j from the latest
 * others), the same test at the end. For mf, m_j = tanh phi_j is the
 * minimum of the mean-field free energy -h.m - m^T J m - sum S(m_j) along
 * m_j (convex there, A_jj = 0), so undamped sequential sweeps descend it
 * and do not cycle where the Jacobi map does (A with large negative
 * eigenvalues); the GEMM path's fallback (src/ising_approx_gemm.c).
 *
 * Backward: implicit differentiation of m = F(m; h, J), F_j = tanh(phi_j).
 * With D = diag(1 - m^2) and K = d phi / d m, dF/dm = D K, and the adjoint
 * system (I - D K)^T u = g is (I - K D) u = g as K is symmetric:
 *   mf:  K = A.
 *   tap: phi_j = h_j + sum_k A_jk m_k - m_j c_j, c_j = sum_k A_jk^2 (1 - m_k^2):
 *        d phi_j / d m_i = A_ji - delta_ij c_j + 2 m_j m_i A_ji^2, so
 *        K = A + 2 diag(m) (A o A) diag(m) - diag(c), symmetric.
 * With v = D u: dL/dh = v, and dL/dJ_jk (j < k; J_jk enters both A_jk and
 * A_kj) = v_j d phi_j / d A_jk + v_k d phi_k / d A_kj:
 *   mf:  v_j m_k + v_k m_j
 *   tap: v_j (m_k - 2 m_j A_jk (1 - m_k^2)) + v_k (m_j - 2 m_k A_jk (1 - m_j^2)).
 * 1 - m^2 is taken as sech^2(phi) (exact where m rounds to +-1); at the
 * fixed point it is the same quantity as the explicit 1 - m_k^2 of TAP.
 *
 * The solve. LAPACK is there: the OpenBLAS the library links exports the
 * Fortran LAPACK (dgesv_, dgetrf_), though this machine has no LAPACKE
 * header, so dgesv_ is declared below (LP64: Debian's OpenBLAS uses 32-bit
 * integers; dgesv has no string arguments, hence no hidden lengths). LU
 * (BA_MF_ADJ_LU, the default) costs O(n^3) and needs only I - K D to be
 * regular, so it is right even where the undamped transposed iteration
 * would diverge. BA_MF_ADJ_ITER, u <- (1 - lambda) u + lambda (g + K D u),
 * costs O(n^2) a sweep: its iteration matrix has the spectrum of the
 * forward's linearisation at the fixed point, so it converges whenever the
 * damped forward converged linearly, and it is the cheaper choice at large
 * n (a context of T keys costs sum_n n^3 ~ T^4 / 4 by LU). bp always
 * iterates (src/ising_bp.c says why).
 *
 * Banded couplings: src/ising_mf_band.c runs the same sweeps over the band
 * only (bit for bit these) and a banded LU adjoint; these dense kernels
 * are its reference twins (tests/test_approx_band.c). */
#include "ising/ising.h"

#include <cblas.h>
#include <string.h>

/* LAPACK (column-major): solves A X = B in place, B (n, nrhs). */
extern void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv,
                   double *b, const int *ldb, int *info);

size_t ba_mf_state_doubles(ba_mf_method meth, int n)
{
    size_t sn = n > 0 ? (size_t)n : 0;
    return 2 * sn + (meth == BA_MF_BP ? sn * sn : 0);
}

/* Forward: A (n^2), the iterate (n), and spare; backward: A or P (n^2), the
 * adjoint matrix or multipliers (n^2), four vectors. */
size_t ba_mf_ws_doubles(int n)
{
    size_t sn = n > 0 ? (size_t)n : 0;
    return 2 * sn * sn + 4 * sn;
}

int ba_mf_check_settings(const ba_mf_settings *s, char *err)
{
    if (!s)
        return ba_fail(err, BA_ERR_ARG, "mean-field settings are NULL");
    if (!(s->damping > 0.0 && s->damping <= 1.0))
        return ba_fail(err, BA_ERR_ARG, "mean-field damping %g is outside (0, 1]", s->damping);
    if (!(s->tol > 0.0 && isfinite(s->tol)))
        return ba_fail(err, BA_ERR_ARG, "mean-field tolerance %g is not a positive number",
                       s->tol);
    if (s->max_iter < 1)
        return ba_fail(err, BA_ERR_ARG, "mean-field max_iter %d is below 1", s->max_iter);
    if (s->sequential != 0 && s->sequential != 1)
        return ba_fail(err, BA_ERR_ARG, "mean-field sweep order %d is neither 0 (Jacobi) nor 1 "
                       "(sequential)", s->sequential);
    if (s->adjoint != BA_MF_ADJ_LU && s->adjoint != BA_MF_ADJ_ITER)
        return ba_fail(err, BA_ERR_ARG, "mean-field adjoint solver %d is unknown",
                       (int)s->adjoint);
    return BA_OK;
}

/* The checks both directions share: settings, method, sizes, and every
 * coupling j < k finite (before anything is written). */
static int check_common(ba_mf_method meth, const ba_mf_settings *s, int n, const double *J,
                        int ldj, char *err)
{
    int rc = ba_mf_check_settings(s, err);
    if (rc)
        return rc;
    if (meth != BA_MF_NAIVE && meth != BA_MF_TAP && meth != BA_MF_BP)
        return ba_fail(err, BA_ERR_ARG, "mean-field method %d is unknown", (int)meth);
    if (n < 1)
        return ba_fail(err, BA_ERR_ARG, "mean-field query of %d spins", n);
    if (ldj < n)
        return ba_fail(err, BA_ERR_ARG, "couplings' leading dimension %d is below n = %d", ldj,
                       n);
    if (!J && n > 1)
        return ba_fail(err, BA_ERR_ARG, "couplings are NULL");
    for (int j = 0; j + 1 < n; j++)
        for (int k = j + 1; k < n; k++)
            if (!isfinite(J[(size_t)j * ldj + k]))
                return ba_fail(err, BA_ERR_NUMERIC, "coupling J[%d][%d] = %g is not finite", j,
                               k, J[(size_t)j * ldj + k]);
    return BA_OK;
}

/* A (n,n) = J + J^T with zero diagonal, so the sweeps read rows. */
static void build_sym(int n, const double *J, int ldj, double *A)
{
    for (int j = 0; j < n; j++) {
        A[(size_t)j * n + j] = 0.0;
        for (int k = j + 1; k < n; k++)
            A[(size_t)j * n + k] = A[(size_t)k * n + j] = J[(size_t)j * ldj + k];
    }
}

/* phi (n) = the effective fields of the iterate m (n). */
static void mft_field(int tap, int n, const double *h, const double *A, const double *m,
                      double *phi)
{
    for (int j = 0; j < n; j++) {
        const double *a = A + (size_t)j * n;
        double s = h ? h[j] : 0.0;
        if (tap) {
            double c = 0.0;
            for (int k = 0; k < n; k++) {
                s += a[k] * m[k];
                c += a[k] * a[k] * ((1.0 - m[k]) * (1.0 + m[k]));
            }
            s -= m[j] * c;
        } else {
            for (int k = 0; k < n; k++)
                s += a[k] * m[k];
        }
        phi[j] = s;
    }
}

/* Sequential sweeps from x (n): spin j = 0 .. n-1 in turn, x_j += lambda
 * (tanh phi_j(x) - x_j) with phi_j from the latest x (two BLAS dots a spin
 * for tap: A2 (n,n) = A o A against q = 1 - x^2, kept up to date). When a
 * whole sweep's undamped steps are below tol, the Jacobi test decides: phi
 * = phi(x), m = tanh phi, converged when max |m - x| < tol (so the result
 * meets the Jacobi path's contract to the same tolerance). Without
 * convergence, m and phi are those of the last x. Sweeps counted, the
 * tests not. */
static ba_mf_info mft_sequential(int tap, const ba_mf_settings *s, int n, const double *h,
                                 const double *A, double *A2, double *q, double *x, double *m,
                                 double *phi)
{
    if (tap)
        for (int j = 0; j < n; j++) {
            for (int k = 0; k < n; k++)
                A2[(size_t)j * n + k] = A[(size_t)j * n + k] * A[(size_t)j * n + k];
            q[j] = (1.0 - x[j]) * (1.0 + x[j]);
        }
    ba_mf_info inf = {0, 0};
    int saved = ba_blas_serial();
    for (int it = 1; it <= s->max_iter; it++) {
        double big = 0.0;
        for (int j = 0; j < n; j++) {
            double f = (h ? h[j] : 0.0) + cblas_ddot(n, A + (size_t)j * n, 1, x, 1);
            if (tap)
                f -= x[j] * cblas_ddot(n, A2 + (size_t)j * n, 1, q, 1);
            double d = tanh(f) - x[j];
            x[j] += s->damping * d;
            if (tap)
                q[j] = (1.0 - x[j]) * (1.0 + x[j]);
            big = (fabs(d) > big || isnan(d)) ? fabs(d) : big;
        }
        inf.iters = it;
        if (isnan(big))
            break; /* overflowed: ba_mf_check_state reports it */
        if (big < s->tol) {
            mft_field(tap, n, h, A, x, phi);
            if (ba_mf_tanh_step(n, phi, x, m) < s->tol) {
                inf.converged = 1;
                ba_blas_end(saved);
                return inf;
            }
        }
    }
    ba_blas_end(saved);
    mft_field(tap, n, h, A, x, phi);
    ba_mf_tanh(n, phi, m);
    return inf;
}

/* mf/tap forward after the checks. ws: A (n^2), the iterate x (n). */
static void mft_forward(int tap, const ba_mf_settings *s, int n, const double *h,
                        const double *J, int ldj, double *logw, double *state, double *ws,
                        ba_mf_info *info)
{
    double *A = ws, *x = ws + (size_t)n * n;
    double *m = state, *phi = state + n;
    build_sym(n, J, ldj, A);
    ba_mf_first(n, s->start, h, x);
    ba_mf_info inf = {0, 0};
    if (s->sequential) {
        double *A2 = x + n, *q = A2 + (size_t)n * n; /* within ba_mf_ws_doubles */
        inf = mft_sequential(tap, s, n, h, A, A2, q, x, m, phi);
        for (int j = 0; j < n; j++)
            logw[j] = ba_log_sigmoid2(phi[j]);
        if (info)
            *info = inf;
        return;
    }
    for (int it = 1; it <= s->max_iter; it++) {
        mft_field(tap, n, h, A, x, phi);
        double res = ba_mf_tanh_step(n, phi, x, m);
        inf.iters = it;
        /* NaN never passes: a sweep that overflowed ends in ba_mf_forward */
        if (res < s->tol) {
            inf.converged = 1;
            break;
        }
        ba_mf_damp(n, s->damping, m, x);
    }
    for (int j = 0; j < n; j++)
        logw[j] = ba_log_sigmoid2(phi[j]);
    if (info)
        *info = inf;
}

int ba_mf_check_fields(int n, const double *h, char *err)
{
    if (h)
        for (int j = 0; j < n; j++)
            if (!isfinite(h[j]))
                return ba_fail(err, BA_ERR_NUMERIC, "field h[%d] = %g is not finite", j, h[j]);
    return BA_OK;
}

/* Finite inputs keep every field finite unless sums of couplings near
 * DBL_MAX overflow. */
int ba_mf_check_state(ba_mf_method meth, int n, const double *state, char *err)
{
    for (int j = 0; j < n; j++)
        if (!isfinite(state[n + j]))
            return ba_fail(err, BA_ERR_NUMERIC, "%s field of spin %d overflowed (couplings too "
                           "large)", meth == BA_MF_BP ? "bp" : meth == BA_MF_TAP ? "tap" : "mf",
                           j);
    return BA_OK;
}

int ba_mf_forward(ba_mf_method meth, const ba_mf_settings *s, int n, const double *h,
                  const double *J, int ldj, double *logw, double *state, double *ws,
                  ba_mf_info *info, char *err)
{
    int rc = check_common(meth, s, n, J, ldj, err);
    if (rc)
        return rc;
    if (!logw || !state || (!ws && meth != BA_MF_BP))
        return ba_fail(err, BA_ERR_ARG, "mean-field forward: NULL output or workspace");
    rc = ba_mf_check_fields(n, h, err);
    if (rc)
        return rc;
    if (meth == BA_MF_BP && s->sequential)
        return ba_fail(err, BA_ERR_ARG, "bp has no sequential sweeps (sequential = 1)");
    if (meth == BA_MF_BP)
        ba_bp_forward(s, n, h, J, ldj, logw, state, info);
    else
        mft_forward(meth == BA_MF_TAP, s, n, h, J, ldj, logw, state, ws, info);
    return ba_mf_check_state(meth, n, state, err);
}

/* K (n,n) = d phi / d m at the state (symmetric), from A, m and D = 1 - m^2. */
static void mft_kernel(int tap, int n, const double *A, const double *m, const double *D,
                       double *K)
{
    memcpy(K, A, (size_t)n * n * sizeof *K);
    if (!tap)
        return;
    for (int j = 0; j < n; j++) {
        double *kr = K + (size_t)j * n;
        const double *a = A + (size_t)j * n;
        double c = 0.0;
        for (int k = 0; k < n; k++) {
            c += a[k] * a[k] * D[k];
            kr[k] += 2.0 * m[j] * m[k] * a[k] * a[k];
        }
        kr[j] -= c; /* the 2 m_j^2 A_jj^2 added on the diagonal is 0 */
    }
}

/* u (n) solving (I - K D) u = g by LU; M (n^2) scratch. */
static int solve_lu(int n, const double *K, const double *D, const double *g, double *u,
                    double *M, int *ipiv, char *err)
{
    /* column-major: element (j, k) at M[k*n + j] */
    for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++)
            M[(size_t)k * n + j] = (j == k) - K[(size_t)j * n + k] * D[k];
    memcpy(u, g, (size_t)n * sizeof *u);
    int one = 1, info = 0;
    int saved = ba_blas_serial();
    dgesv_(&n, &one, M, &n, ipiv, u, &n, &info);
    ba_blas_end(saved);
    if (info != 0)
        return ba_fail(err, BA_ERR_NUMERIC, "mean-field adjoint system is singular (LAPACK "
                       "dgesv info %d)", info);
    return BA_OK;
}

/* u (n) solving (I - K D) u = g by u <- (1 - lambda) u + lambda (g + K D u)
 * to a step below tol * max |g|; t1, t2 (n) scratch. */
static ba_mf_info solve_iter(const ba_mf_settings *s, int n, const double *K, const double *D,
                             const double *g, double *u, double *t1, double *t2)
{
    double gmax = 0.0;
    for (int j = 0; j < n; j++) {
        u[j] = g[j];
        gmax = fabs(g[j]) > gmax ? fabs(g[j]) : gmax;
    }
    ba_mf_info inf = {0, 1};
    if (gmax == 0.0)
        return inf; /* u = 0 exactly */
    inf.converged = 0;
    for (int it = 1; it <= s->max_iter; it++) {
        for (int k = 0; k < n; k++)
            t1[k] = D[k] * u[k];
        double res = 0.0;
        for (int j = 0; j < n; j++) {
            const double *kr = K + (size_t)j * n;
            double acc = g[j];
            for (int k = 0; k < n; k++)
                acc += kr[k] * t1[k];
            t2[j] = acc - u[j];
            res = fabs(t2[j]) > res ? fabs(t2[j]) : res;
        }
        for (int j = 0; j < n; j++)
            u[j] += s->damping * t2[j];
        inf.iters = it;
        if (res < s->tol * gmax) {
            inf.converged = 1;
            break;
        }
    }
    return inf;
}

/* mf/tap backward after the checks. ws: A then the LU matrix (n^2), K
 * (n^2), D, u, t1, t2 (n each). */
static int mft_backward(int tap, const ba_mf_settings *s, int n, const double *J, int ldj,
                        const double *state, const double *g, double *dh, double *dJ,
                        int lddj, double *ws, int *ipiv, ba_mf_info *info, char *err)
{
    size_t nn = (size_t)n * n;
    double *A = ws, *K = ws + nn, *D = ws + 2 * nn, *u = D + n, *t1 = u + n, *t2 = t1 + n;
    const double *m = state, *phi = state + n;
    build_sym(n, J, ldj, A);
    for (int j = 0; j < n; j++)
        D[j] = ba_sech2(phi[j]);
    mft_kernel(tap, n, A, m, D, K);
    ba_mf_info inf = {1, 1};
    if (s->adjoint == BA_MF_ADJ_LU) {
        /* A is not read again (dJ reads J), so the LU matrix takes its place */
        int rc = solve_lu(n, K, D, g, u, A, ipiv, err);
        if (rc)
            return rc;
    } else {
        inf = solve_iter(s, n, K, D, g, u, t1, t2);
    }
    /* a diverging iteration, or overflowed couplings, end here, before
     * anything is written */
    for (int j = 0; j < n; j++)
        if (!isfinite(u[j]))
            return ba_fail(err, BA_ERR_NUMERIC, "%s adjoint of spin %d is not finite (after %d "
                           "sweeps)", tap ? "tap" : "mf", j, inf.iters);
    for (int j = 0; j < n; j++)
        u[j] *= D[j]; /* v = D u */
    if (dh)
        for (int j = 0; j < n; j++)
            dh[j] += u[j];
    if (dJ)
        for (int j = 0; j + 1 < n; j++)
            for (int k = j + 1; k < n; k++) {
                double a = J[(size_t)j * ldj + k], d = u[j] * m[k] + u[k] * m[j];
                if (tap)
                    d -= 2.0 * a * (u[j] * m[j] * D[k] + u[k] * m[k] * D[j]);
                dJ[(size_t)j * lddj + k] += d;
            }
    if (info)
        *info = inf;
    return BA_OK;
}

int ba_mf_backward(ba_mf_method meth, const ba_mf_settings *s, int n, const double *J,
                   int ldj, const double *state, const double *g, double *dh, double *dJ,
                   int lddj, double *ws, int *ipiv, ba_mf_info *info, char *err)
{
    int rc = check_common(meth, s, n, J, ldj, err);
    if (rc)
        return rc;
    if (!state || !g || !ws)
        return ba_fail(err, BA_ERR_ARG, "mean-field backward: NULL state, gradient or "
                       "workspace");
    if (dJ && lddj < n)
        return ba_fail(err, BA_ERR_ARG, "coupling gradient's leading dimension %d is below "
                       "n = %d", lddj, n);
    if (meth != BA_MF_BP && s->adjoint == BA_MF_ADJ_LU && !ipiv)
        return ba_fail(err, BA_ERR_ARG, "mean-field LU adjoint needs ipiv (n ints)");
    for (int j = 0; j < n; j++)
        if (!isfinite(g[j]))
            return ba_fail(err, BA_ERR_NUMERIC, "gradient g[%d] = %g is not finite", j, g[j]);
    if (meth == BA_MF_BP)
        return ba_bp_backward(s, n, J, ldj, state, g, dh, dJ, lddj, ws, info, err);
    return mft_backward(meth == BA_MF_TAP, s, n, J, ldj, state, g, dh, dJ, lddj, ws, ipiv,
                        info, err);
}
