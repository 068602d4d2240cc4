/* The batched Anderson iteration of the mf and tap engines' GEMM path
 * (src/ising_approx_gemm.c says why and how it is used; declarations and
 * the workspace: src/approx_gemm.h). Type II Anderson acceleration, one
 * history per row: x <- x + beta f - sum_q y_q (dX_q + beta dF_q), y the
 * least-squares fit of f by the last mem differences dF (normal equations
 * of a Gram matrix kept up to date a column a step, regularised by 1e-13 of
 * its largest diagonal, the oldest step dropped while a pivot is below
 * 1e-12 of it); memory 0 is the plain damped step x <- x + beta f. */
#include "ising/approx_gemm.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

int ba_aa_ws_init(aa_ws *w, int G, int ld, int mem)
{
    size_t gl = (size_t)G * ld, gm = (size_t)(mem > 0 ? mem : 1);
    memset(w, 0, sizeof *w);
    w->G = G, w->ld = ld, w->mem = mem;
    w->X = malloc(sizeof(double) * 7 * gl);
    w->dX = malloc(sizeof(double) * 2 * gl * gm);
    w->gram = malloc(sizeof(double) * (size_t)G * (gm * gm + 1));
    w->idx = malloc(sizeof(int) * 3 * (size_t)G);
    if (!w->X || !w->dX || !w->gram || !w->idx)
        return 0;
    w->Z = w->X + gl, w->F = w->Z + gl, w->AUX = w->F + gl, w->E = w->AUX + gl;
    w->XP = w->E + gl, w->FP = w->XP + gl;
    w->dF = w->dX + gl * gm;
    w->res = w->gram + (size_t)G * gm * gm;
    w->nh = w->idx + G, w->head = w->nh + G;
    return 1;
}

void ba_aa_ws_free(aa_ws *w)
{
    free(w->X), free(w->dX), free(w->gram), free(w->idx);
}

/* Solves the k x k system M y = r (row-major, destroyed) by elimination
 * with partial pivoting; 0 when a pivot is below eps (ill-conditioned). */
static int small_solve(int k, double *M, double *r, double eps)
{
    for (int c = 0; c < k; c++) {
        int p = c;
        for (int i = c + 1; i < k; i++)
            if (fabs(M[i * k + c]) > fabs(M[p * k + c]))
                p = i;
        if (!(fabs(M[p * k + c]) > eps))
            return 0;
        if (p != c) {
            for (int j = 0; j < k; j++) {
                double t = M[c * k + j];
                M[c * k + j] = M[p * k + j], M[p * k + j] = t;
            }
            double t = r[c];
            r[c] = r[p], r[p] = t;
        }
        for (int i = c + 1; i < k; i++) {
            double f = M[i * k + c] / M[c * k + c];
            for (int j = c; j < k; j++)
                M[i * k + j] -= f * M[c * k + j];
            r[i] -= f * r[c];
        }
    }
    for (int c = k - 1; c >= 0; c--) {
        double s = r[c];
        for (int j = c + 1; j < k; j++)
            s -= M[c * k + j] * r[j];
        r[c] = s / M[c * k + c];
        if (!isfinite(r[c]))
            return 0;
    }
    return 1;
}

/* One Anderson step of compacted row r, group row gi (n entries): X row
 * <- the next iterate, from x and f = F(x) - x (in F's row); prev: whether
 * XP, FP hold the previous x, f. Level-1 BLAS for the vector work. */
static void aa_step(aa_ws *w, const aa_cfg *c, int r, int gi, int n, int prev)
{
    size_t ld = (size_t)w->ld;
    double *x = w->X + r * ld, *f = w->F + r * ld;
    int m = c->mem;
    if (m == 0) {
        cblas_daxpy(n, c->beta, f, 1, x, 1);
        return;
    }
    double *xp = w->XP + gi * ld, *fp = w->FP + gi * ld;
    double *dXr = w->dX + (size_t)gi * m * ld, *dFr = w->dF + (size_t)gi * m * ld;
    double *gr = w->gram + (size_t)gi * m * m;
    if (prev) {
        int s = w->head[gi];
        double *dx = dXr + s * ld, *df = dFr + s * ld;
        for (int j = 0; j < n; j++)
            dx[j] = x[j] - xp[j], df[j] = f[j] - fp[j];
        w->head[gi] = (s + 1) % m;
        if (w->nh[gi] < m)
            w->nh[gi]++;
        for (int q = 0; q < w->nh[gi]; q++) {
            int t = (s - q + m) % m;
            gr[s * m + t] = gr[t * m + s] = cblas_ddot(n, df, 1, dFr + t * ld, 1);
        }
    }
    memcpy(xp, x, sizeof(double) * n);
    memcpy(fp, f, sizeof(double) * n);
    /* the slots newest first; drop the oldest while ill-conditioned */
    int sl[BA_APPROX_GEMM_MAX_MEMORY], k = w->nh[gi];
    double rhs[BA_APPROX_GEMM_MAX_MEMORY], y[BA_APPROX_GEMM_MAX_MEMORY];
    double M[BA_APPROX_GEMM_MAX_MEMORY * BA_APPROX_GEMM_MAX_MEMORY];
    for (int q = 0; q < k; q++) {
        sl[q] = (w->head[gi] - 1 - q + 2 * m) % m;
        rhs[q] = cblas_ddot(n, dFr + sl[q] * ld, 1, f, 1);
    }
    for (; k > 0; k--) {
        double dmax = 0.0;
        for (int q = 0; q < k; q++) {
            y[q] = rhs[q];
            for (int p = 0; p < k; p++)
                M[q * k + p] = gr[sl[q] * m + sl[p]];
            dmax = fmax(dmax, M[q * k + q]);
        }
        for (int q = 0; q < k; q++)
            M[q * k + q] += 1e-13 * dmax;
        if (dmax > 0.0 && small_solve(k, M, y, 1e-12 * dmax))
            break;
    }
    w->nh[gi] = k;
    /* x + beta f - sum_q y_q (dX_q + beta dF_q) */
    cblas_daxpy(n, c->beta, f, 1, x, 1);
    for (int q = 0; q < k; q++) {
        cblas_daxpy(n, -y[q], dXr + sl[q] * ld, 1, x, 1);
        cblas_daxpy(n, -y[q] * c->beta, dFr + sl[q] * ld, 1, x, 1);
    }
}

void ba_aa_solve(aa_ws *w, const aa_cfg *c, int na, int Lg, const int *len, const double *tol,
                 aa_eval ev, void *ctx, double *out, int *sweeps, int *conv)
{
    size_t ld = (size_t)w->ld;
    for (int r = 0; r < na; r++)
        w->nh[w->idx[r]] = 0, w->head[w->idx[r]] = 0;
    for (int it = 1; it <= c->max_iter && na > 0; it++) {
        ev(ctx, na, Lg, w);
        int kept = 0;
        for (int r = 0; r < na; r++) {
            int gi = w->idx[r], n = len[gi], bad = isnan(w->res[r]);
            double *x = w->X + r * ld, *f = w->F + r * ld;
            for (int j = 0; j < n; j++) {
                f[j] -= x[j];
                bad |= !isfinite(f[j]);
            }
            if (bad || w->res[r] < tol[gi]) {
                sweeps[gi] = it, conv[gi] = !bad;
                if (!bad)
                    memcpy(out + gi * ld, w->AUX + r * ld, sizeof(double) * n);
                continue;
            }
            aa_step(w, c, r, gi, n, it > 1);
            if (kept != r) {
                w->idx[kept] = gi;
                memcpy(w->X + kept * ld, x, sizeof(double) * Lg);
            }
            kept++;
        }
        na = kept;
    }
    for (int r = 0; r < na; r++)
        sweeps[w->idx[r]] = c->max_iter, conv[w->idx[r]] = 0;
}

