/* The reference twins of the mean-field family (tests/test_mf.c): plain
 * undamped loops, BP with explicit O(n^3) cavity sums, and the adjoints by
 * Gaussian elimination on the whole Jacobian. Included by test_mf.c after
 * its helpers (NMAX, coup), which it uses. */
#ifndef BA_TEST_MF_REF_H
#define BA_TEST_MF_REF_H

/* ------------------------------------------------------ reference twins */

/* Solves M x = b (N x N row-major, destroyed) by Gaussian elimination with
 * partial pivoting; x overwrites b. */
static void gauss_solve(int N, double *M, double *b)
{
    for (int c = 0; c < N; c++) {
        int p = c;
        for (int i = c + 1; i < N; i++)
            if (fabs(M[i * N + c]) > fabs(M[p * N + c]))
                p = i;
        assert_true(M[p * N + c] != 0.0);
        if (p != c) {
            for (int k = 0; k < N; k++) {
                double t = M[c * N + k];
                M[c * N + k] = M[p * N + k];
                M[p * N + k] = t;
            }
            double t = b[c];
            b[c] = b[p];
            b[p] = t;
        }
        for (int i = c + 1; i < N; i++) {
            double f = M[i * N + c] / M[c * N + c];
            for (int k = c; k < N; k++)
                M[i * N + k] -= f * M[c * N + k];
            b[i] -= f * b[c];
        }
    }
    for (int c = N - 1; c >= 0; c--) {
        double s = b[c];
        for (int k = c + 1; k < N; k++)
            s -= M[c * N + k] * b[k];
        b[c] = s / M[c * N + c];
    }
}

/* The effective field of spin j under m, written from the formula. */
static double ref_phi(int tap, int n, const double *h, const double *J, const double *m, int j)
{
    double s = h ? h[j] : 0.0;
    for (int k = 0; k < n; k++)
        if (k != j) {
            double a = coup(J, j, k);
            s += a * m[k];
            if (tap)
                s -= m[j] * a * a * (1.0 - m[k] * m[k]);
        }
    return s;
}

/* Undamped Jacobi sweeps m = tanh(phi(m)) until the step is below 1e-15. */
static void ref_mft_forward(int tap, int n, const double *h, const double *J, double *m)
{
    double nm[NMAX];
    for (int j = 0; j < n; j++)
        m[j] = tanh(h ? h[j] : 0.0);
    for (int it = 0; it < 100000; it++) {
        double res = 0.0;
        for (int j = 0; j < n; j++) {
            nm[j] = tanh(ref_phi(tap, n, h, J, m, j));
            res = fmax(res, fabs(nm[j] - m[j]));
        }
        memcpy(m, nm, (size_t)n * sizeof *m);
        if (res < 1e-15)
            return;
    }
}

/* dL/dm g -> dh (n), dJ (n, LDJ) (overwritten) by the full Jacobian
 * dF_j/dm_i and Gaussian elimination of (I - dF/dm)^T u = g. */
static void ref_mft_backward(int tap, int n, const double *J, const double *m,
                             const double *g, double *dh, double *dJ)
{
    double M[NMAX * NMAX], u[NMAX];
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            double a = coup(J, j, i), d = a; /* d phi_j / d m_i */
            if (tap && i != j)
                d += 2.0 * m[j] * m[i] * a * a;
            if (tap && i == j)
                for (int k = 0; k < n; k++)
                    d -= coup(J, j, k) * coup(J, j, k) * (1.0 - m[k] * m[k]);
            /* row i of (I - dF/dm)^T is column i of dF/dm */
            M[i * n + j] = (i == j) - (1.0 - m[j] * m[j]) * d;
        }
    memcpy(u, g, (size_t)n * sizeof *u);
    gauss_solve(n, M, u);
    for (int j = 0; j < n; j++) {
        u[j] *= 1.0 - m[j] * m[j]; /* dL/dphi_j */
        dh[j] = u[j];
    }
    for (int j = 0; j < n; j++)
        for (int k = j + 1; k < n; k++) {
            double a = coup(J, j, k);
            double dj = m[k] - (tap ? 2.0 * m[j] * a * (1.0 - m[k] * m[k]) : 0.0);
            double dk = m[j] - (tap ? 2.0 * m[k] * a * (1.0 - m[j] * m[j]) : 0.0);
            dJ[j * LDJ + k] = u[j] * dj + u[k] * dk;
        }
}

/* Undamped bp: u[k][j] = atanh(tanh A_jk tanh(h_k + sum_{l != k, j} u[l][k])),
 * old and new arrays apart; m (n) and the messages out. */
static void ref_bp_forward(int n, const double *h, const double *J, double u[NMAX][NMAX],
                           double *m)
{
    static const double zero[NMAX];
    double nu[NMAX][NMAX];
    const double *hh = h ? h : zero;
    memset(u, 0, sizeof(double) * NMAX * NMAX);
    for (int it = 0; it < 100000; it++) {
        double res = 0.0;
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++) {
                if (j == k) {
                    nu[k][j] = 0.0;
                    continue;
                }
                double x = hh[k];
                for (int l = 0; l < n; l++)
                    if (l != k && l != j)
                        x += u[l][k];
                nu[k][j] = atanh(tanh(coup(J, j, k)) * tanh(x));
                res = fmax(res, fabs(nu[k][j] - u[k][j]));
            }
        memcpy(u, nu, sizeof nu);
        if (res < 1e-15)
            break;
    }
    for (int j = 0; j < n; j++) {
        double H = hh[j];
        for (int k = 0; k < n; k++)
            H += k == j ? 0.0 : u[k][j];
        m[j] = tanh(H);
    }
}

/* Message index of k -> j (k != j) among the n(n-1). */
static int midx(int n, int k, int j) { return k * (n - 1) + (j < k ? j : j - 1); }

/* bp's gradient with every message an unknown: (I - dF/du)^T w = dL/du by
 * Gaussian elimination, derivatives of atanh(tanh a tanh x) as written. */
static void ref_bp_backward(int n, const double *h, const double *J, double u[NMAX][NMAX],
                            const double *g, double *dh, double *dJ)
{
    int N = n * (n - 1);
    double *M = calloc((size_t)N * N + 1, sizeof *M), *w = malloc(((size_t)N + 1) * sizeof *w);
    double p[NMAX][NMAX] = {{0}}, q[NMAX][NMAX] = {{0}}, r[NMAX];
    assert_non_null(M);
    assert_non_null(w);
    for (int k = 0; k < n; k++) {
        double H = h ? h[k] : 0.0;
        for (int l = 0; l < n; l++)
            H += l == k ? 0.0 : u[l][k];
        r[k] = g[k] * (1.0 - tanh(H) * tanh(H));
        for (int j = 0; j < n; j++)
            if (j != k) {
                double t = tanh(coup(J, j, k)), T = tanh(H - u[j][k]);
                p[k][j] = t * (1.0 - T * T) / (1.0 - t * t * T * T);
                q[k][j] = (1.0 - t * t) * T / (1.0 - t * t * T * T);
            }
    }
    /* F_{k->j} depends on u_{l->k}, l != j, with slope p[k][j]; the
     * transpose puts that slope in row (l->k), column (k->j) */
    for (int a = 0; a < N; a++)
        M[a * N + a] = 1.0;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++)
            for (int l = 0; l < n; l++)
                if (j != k && l != k && l != j)
                    M[midx(n, l, k) * N + midx(n, k, j)] -= p[k][j];
    for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++)
            if (j != k)
                w[midx(n, k, j)] = r[j];
    gauss_solve(N, M, w);
    for (int k = 0; k < n; k++) {
        dh[k] = r[k];
        for (int j = 0; j < n; j++)
            if (j != k)
                dh[k] += p[k][j] * w[midx(n, k, j)];
    }
    for (int j = 0; j < n; j++)
        for (int k = j + 1; k < n; k++)
            dJ[j * LDJ + k] = q[k][j] * w[midx(n, k, j)] + q[j][k] * w[midx(n, j, k)];
    free(M);
    free(w);
}


#endif
