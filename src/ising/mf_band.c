/* Approximate engines per query over a band (spec section 8, "Mean-field
 * family", cost "O(n W) for banded couplings"): the fixed points and
 * implicit gradients of src/ising_mf.c (mf, tap) and src/ising_bp.c (bp)
 * for couplings of range at most W, A_jk = 0 for |j - k| > W, at O(n W) a
 * sweep instead of O(n^2). Layouts and errors: src/approx.h,
 * "approximate engines, banded per query". The dense kernels stay the
 * reference twins (tests/test_approx_band.c).
 *
 * Forward, bit for bit the dense one. A sweep sums, for spin j, the terms
 * of k in [max(0, j - W), min(n - 1, j + W)] in ascending k, the dense
 * sum's order; every term it leaves out is 0 * m_k, an exact zero, and
 * adding a zero changes no non-zero sum. (It can only turn a partial sum
 * of -0 into +0; a zero field gives the same tanh up to its sign and the
 * same logw, and a signed zero never changes a non-zero result later, so
 * the iterates, the residuals, the sweep count and logw are the dense
 * path's exactly.) The convergence test is the same max over all spins.
 *
 * Backward. The adjoint system (I - K D) u = g of src/ising_mf.c has K
 * banded with the couplings (mf: K = A; tap: A + 2 diag(m) (A o A) diag(m)
 * - diag(c), the same band), so it is solved by LAPACK's banded LU
 * (dgbsv_, partial pivoting, kl = ku = min(W, n - 1)) at O(n W^2), for
 * any n: exact where the dense path iterates (n > BA_APPROX_LU_MAX_N), and
 * regular where the dense LU is. s->adjoint is therefore not read.
 *
 * The couplings' gradient beyond the band is not zero: a zero coupling
 * still moves the fixed point. With v = D u (= dL/dh), for k - j > W the
 * tap term -2 A_jk (...) vanishes and dL/dJ_jk = v_j m_k + v_k m_j (mf and
 * tap alike; bp's is the same form with its own vector, src/ising_bp.c).
 * The kernels write it up to the reach R the caller asks for, and hand the
 * vector out (zo) so that a batch can add the far entries of many rows at
 * once as a matrix product (src/ising_approx.c). */
#include "ising/ising.h"

#include <string.h>

/* LAPACK (column-major), banded: solves A X = B in place; AB (ldab, n)
 * holds A's band in rows kl .. 2 kl + ku, the first kl rows are LU's
 * fill-in. LP64 integers, no string arguments (see src/ising_mf.c). */
extern void dgbsv_(const int *n, const int *kl, const int *ku, const int *nrhs, double *ab,
                   const int *ldab, int *ipiv, double *b, const int *ldb, int *info);

int ba_mf_reach(int n, const double *J, int ldj)
{
    int w = 0;
    /* row j only needs its entries beyond j + w: the scan stops early
     * once the widest row is found */
    for (int j = 0; j + w + 1 < n; j++)
        for (int k = n - 1; k > j + w; k--)
            if (J[(size_t)j * ldj + k] != 0.0) {
                w = k - j;
                break;
            }
    return w;
}

void ba_mf_band_build(int n, int W, const double *J, int ldj, double *Ab)
{
    int w2 = 2 * W + 1;
    for (int j = 0; j < n; j++) {
        double *a = Ab + (size_t)j * w2 + W; /* a[d] = A_{j, j+d} */
        for (int d = -W; d <= W; d++) {
            int k = j + d;
            a[d] = k < 0 || k >= n || d == 0 ? 0.0
                   : d > 0                   ? J[(size_t)j * ldj + k]
                                             : J[(size_t)k * ldj + j];
        }
    }
}

size_t ba_mf_band_state_doubles(ba_mf_method meth, int n, int W)
{
    size_t sn = n > 0 ? (size_t)n : 0, w2 = 2 * (size_t)(W > 0 ? W : 0) + 1;
    return 2 * sn + (meth == BA_MF_BP ? sn * w2 : 0);
}

/* mf/tap: the iterate (n) forward; the LU band (n (3W + 1)) and D, u, zo
 * scratch (n each) backward. bp: P and the multipliers (n (2W + 1) each),
 * r, S, z (n each). The larger of the two. */
size_t ba_mf_band_ws_doubles(int n, int W)
{
    size_t sn = n > 0 ? (size_t)n : 0, w = (size_t)(W > 0 ? W : 0);
    return sn * (4 * w + 2) + 4 * sn;
}

/* The checks both directions share, before anything is written. */
static int band_check(ba_mf_method meth, const ba_mf_settings *s, int n, int W,
                      const double *Ab, char *err)
{
    int rc = ba_mf_check_settings(s, err);
    if (rc)
        return rc;
    if (meth != BA_MF_NAIVE && meth != BA_MF_TAP && meth != BA_MF_BP)
        return ba_fail(err, BA_ERR_ARG, "mean-field method %d is unknown", (int)meth);
    if (s->sequential)
        return ba_fail(err, BA_ERR_ARG, "the banded kernels have no sequential sweeps "
                       "(sequential = 1)");
    if (n < 1)
        return ba_fail(err, BA_ERR_ARG, "mean-field query of %d spins", n);
    if (W < 0)
        return ba_fail(err, BA_ERR_ARG, "coupling band W = %d is negative", W);
    if (!Ab)
        return ba_fail(err, BA_ERR_ARG, "banded couplings are NULL");
    int w2 = 2 * W + 1;
    for (int j = 0; j < n; j++)
        for (int d = 1; d <= W && j + d < n; d++)
            if (!isfinite(Ab[(size_t)j * w2 + W + d]))
                return ba_fail(err, BA_ERR_NUMERIC, "coupling J[%d][%d] = %g is not finite", j,
                               j + d, Ab[(size_t)j * w2 + W + d]);
    return BA_OK;
}

/* phi_j for one spin: the dense mft_field's sum over the band only, in
 * the same order. */
static double band_field1(int tap, int n, int W, int j, const double *h, const double *Ab,
                          const double *m)
{
    const double *a = Ab + (size_t)j * (2 * W + 1) + W - j; /* a[k] = A_jk, k in [lo, hi] */
    int lo = j > W ? j - W : 0, hi = n - 1 - j > W ? j + W : n - 1;
    double s = h ? h[j] : 0.0;
    if (tap) {
        double c = 0.0;
        for (int k = lo; k <= hi; k++) {
            s += a[k] * m[k];
            c += a[k] * a[k] * ((1.0 - m[k]) * (1.0 + m[k]));
        }
        return s - m[j] * c;
    }
    for (int k = lo; k <= hi; k++)
        s += a[k] * m[k];
    return s;
}

/* phi_j .. phi_{j+3} of four spins whose bands lie inside the query: the
 * same four sums, each in its own order, interleaved. A sum's additions
 * depend on each other (a chain as long as the band, at the adder's
 * latency each); four independent chains keep the adder busy, and each
 * result is band_field1's bit for bit. */
static void band_field4(int tap, int W, int j, const double *h, const double *Ab,
                        const double *m, double *phi)
{
    int w2 = 2 * W + 1;
    const double *a0 = Ab + (size_t)j * w2, *a1 = a0 + w2, *a2 = a1 + w2, *a3 = a2 + w2;
    const double *mm = m + j - W; /* spin j + i reads mm[i .. i + 2W] */
    double s0 = h ? h[j] : 0.0, s1 = h ? h[j + 1] : 0.0;
    double s2 = h ? h[j + 2] : 0.0, s3 = h ? h[j + 3] : 0.0;
    if (tap) {
        double c0 = 0.0, c1 = 0.0, c2 = 0.0, c3 = 0.0;
        for (int t = 0; t < w2; t++) {
            s0 += a0[t] * mm[t];
            s1 += a1[t] * mm[t + 1];
            s2 += a2[t] * mm[t + 2];
            s3 += a3[t] * mm[t + 3];
            c0 += a0[t] * a0[t] * ((1.0 - mm[t]) * (1.0 + mm[t]));
            c1 += a1[t] * a1[t] * ((1.0 - mm[t + 1]) * (1.0 + mm[t + 1]));
            c2 += a2[t] * a2[t] * ((1.0 - mm[t + 2]) * (1.0 + mm[t + 2]));
            c3 += a3[t] * a3[t] * ((1.0 - mm[t + 3]) * (1.0 + mm[t + 3]));
        }
        s0 -= m[j] * c0, s1 -= m[j + 1] * c1, s2 -= m[j + 2] * c2, s3 -= m[j + 3] * c3;
    } else {
        for (int t = 0; t < w2; t++) {
            s0 += a0[t] * mm[t];
            s1 += a1[t] * mm[t + 1];
            s2 += a2[t] * mm[t + 2];
            s3 += a3[t] * mm[t + 3];
        }
    }
    phi[j] = s0, phi[j + 1] = s1, phi[j + 2] = s2, phi[j + 3] = s3;
}

/* phi (n) = the effective fields of the iterate m (n). */
static void band_field(int tap, int n, int W, const double *h, const double *Ab,
                       const double *m, double *phi)
{
    int j = 0;
    for (; j < n && j < W; j++)
        phi[j] = band_field1(tap, n, W, j, h, Ab, m);
    for (; j + 3 + W <= n - 1; j += 4)
        band_field4(tap, W, j, h, Ab, m, phi);
    for (; j < n; j++)
        phi[j] = band_field1(tap, n, W, j, h, Ab, m);
}

/* mf/tap forward after the checks: src/ising_mf.c's mft_forward with the
 * band's sweep. ws: the iterate x (n). */
static void band_mft_forward(int tap, const ba_mf_settings *s, int n, int W, const double *h,
                             const double *Ab, double *logw, double *state, double *ws,
                             ba_mf_info *info)
{
    double *x = ws, *m = state, *phi = state + n;
    ba_mf_first(n, s->start, h, x);
    ba_mf_info inf = {0, 0};
    for (int it = 1; it <= s->max_iter; it++) {
        band_field(tap, n, W, h, Ab, x, phi);
        double res = ba_mf_tanh_step(n, phi, x, m);
        inf.iters = it;
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

int ba_mf_band_forward(ba_mf_method meth, const ba_mf_settings *s, int n, int W,
                       const double *h, const double *Ab, double *logw, double *state,
                       double *ws, ba_mf_info *info, char *err)
{
    int rc = band_check(meth, s, n, W, Ab, err);
    if (rc)
        return rc;
    if (!logw || !state || (!ws && meth != BA_MF_BP))
        return ba_fail(err, BA_ERR_ARG, "banded mean-field forward: NULL output or workspace");
    rc = ba_mf_check_fields(n, h, err);
    if (rc)
        return rc;
    if (meth == BA_MF_BP)
        ba_bp_band_forward(s, n, W, h, Ab, logw, state, info);
    else
        band_mft_forward(meth == BA_MF_TAP, s, n, W, h, Ab, logw, state, ws, info);
    return ba_mf_check_state(meth, n, state, err);
}

/* AB (ldab = 3q + 1, n), column-major LAPACK band storage, = I - K D with
 * K = d phi / d m (src/ising_mf.c's mft_kernel) over the band q. */
static void band_system(int tap, int n, int W, int q, const double *Ab, const double *m,
                        const double *D, double *AB)
{
    int w2 = 2 * W + 1, ldab = 3 * q + 1;
    memset(AB, 0, sizeof(double) * (size_t)ldab * n);
    for (int j = 0; j < n; j++) {
        const double *a = Ab + (size_t)j * w2 + W - j;
        int lo = j > q ? j - q : 0, hi = n - 1 - j > q ? j + q : n - 1;
        double c = 0.0;
        for (int k = lo; k <= hi; k++) {
            double K = a[k];
            if (tap) {
                c += a[k] * a[k] * D[k];
                K += 2.0 * m[j] * m[k] * a[k] * a[k];
            }
            /* element (j, k) at row 2q + j - k of column k */
            AB[(size_t)k * ldab + 2 * q + j - k] = -K * D[k];
        }
        AB[(size_t)j * ldab + 2 * q] += 1.0 + (tap ? c * D[j] : 0.0); /* - (-c_j) D_j */
    }
}

/* dJ (rows of lddj) += the couplings' gradient of one query for
 * 0 < k - j <= R from v (n), m (n), D (n): the exact form within the band
 * q, v_j m_k + v_k m_j beyond it. */
static void band_mft_dj(int tap, int n, int W, int q, int R, const double *Ab, const double *v,
                        const double *m, const double *D, double *dJ, int lddj)
{
    int w2 = 2 * W + 1;
    for (int j = 0; j + 1 < n; j++) {
        double *dr = dJ + (size_t)j * lddj;
        int kin = n - 1 - j > q ? j + q : n - 1, kout = n - 1 - j > R ? j + R : n - 1;
        for (int k = j + 1; k <= kin; k++) {
            double a = Ab[(size_t)j * w2 + W + k - j], d = v[j] * m[k] + v[k] * m[j];
            if (tap)
                d -= 2.0 * a * (v[j] * m[j] * D[k] + v[k] * m[k] * D[j]);
            dr[k] += d;
        }
        for (int k = kin + 1; k <= kout; k++)
            dr[k] += v[j] * m[k] + v[k] * m[j];
    }
}

/* mf/tap backward after the checks. ws: the LU band (n (3q + 1)), D, u
 * (n each). */
static int band_mft_backward(int tap, int n, int W, int R, const double *Ab,
                             const double *state, const double *g, double *dh, double *dJ,
                             int lddj, double *zo, double *ws, int *ipiv, char *err)
{
    int q = W < n - 1 ? W : n - 1, ldab = 3 * q + 1;
    double *AB = ws, *D = ws + (size_t)ldab * n, *u = D + n;
    const double *m = state, *phi = state + n;
    for (int j = 0; j < n; j++)
        D[j] = ba_sech2(phi[j]);
    band_system(tap, n, W, q, Ab, m, D, AB);
    memcpy(u, g, (size_t)n * sizeof *u);
    int one = 1, info = 0;
    int saved = ba_blas_serial();
    dgbsv_(&n, &q, &q, &one, AB, &ldab, ipiv, u, &n, &info);
    ba_blas_end(saved);
    if (info != 0)
        return ba_fail(err, BA_ERR_NUMERIC, "%s adjoint system is singular (LAPACK dgbsv "
                       "info %d)", tap ? "tap" : "mf", info);
    for (int j = 0; j < n; j++)
        if (!isfinite(u[j]))
            return ba_fail(err, BA_ERR_NUMERIC, "%s adjoint of spin %d is not finite",
                           tap ? "tap" : "mf", j);
    for (int j = 0; j < n; j++)
        u[j] *= D[j]; /* v = D u */
    if (dh)
        for (int j = 0; j < n; j++)
            dh[j] += u[j];
    if (zo)
        memcpy(zo, u, (size_t)n * sizeof *zo);
    if (dJ)
        band_mft_dj(tap, n, W, q, R, Ab, u, m, D, dJ, lddj);
    return BA_OK;
}

int ba_mf_band_backward(ba_mf_method meth, const ba_mf_settings *s, int n, int W,
                        const double *Ab, const double *state, const double *g, double *dh,
                        double *dJ, int lddj, int R, double *zo, double *ws, int *ipiv,
                        ba_mf_info *info, char *err)
{
    int rc = band_check(meth, s, n, W, Ab, err);
    if (rc)
        return rc;
    if (!state || !g || !ws)
        return ba_fail(err, BA_ERR_ARG, "banded mean-field backward: NULL state, gradient or "
                       "workspace");
    if (dJ && lddj < n)
        return ba_fail(err, BA_ERR_ARG, "coupling gradient's leading dimension %d is below "
                       "n = %d", lddj, n);
    if (R < 0)
        return ba_fail(err, BA_ERR_ARG, "coupling gradient reach R = %d is negative", R);
    if (meth != BA_MF_BP && !ipiv)
        return ba_fail(err, BA_ERR_ARG, "banded mean-field LU adjoint needs ipiv (n ints)");
    for (int j = 0; j < n; j++)
        if (!isfinite(g[j]))
            return ba_fail(err, BA_ERR_NUMERIC, "gradient g[%d] = %g is not finite", j, g[j]);
    if (meth == BA_MF_BP)
        return ba_bp_band_backward(s, n, W, Ab, state, g, dh, dJ, lddj, R, zo, ws, info, err);
    rc = band_mft_backward(meth == BA_MF_TAP, n, W, R, Ab, state, g, dh, dJ, lddj, zo, ws,
                           ipiv, err);
    if (rc == BA_OK && info)
        *info = (ba_mf_info){1, 1};
    return rc;
}
