/* What the approximate engines' batched paths share (src/ising/approx.c:
 * mf, tap, bp per row; src/ising/approx_gemm.c: mf and tap by GEMM;
 * src/ising/hybrid.c): their checks, their settings and the report of a
 * failed row. A leaf: it calls none of them back, so the dispatch among
 * them sits on top without a circle. */
#include "ising/ising.h"

ba_mf_settings ba_approx_mf_settings(const ba_approx *a)
{
    ba_mf_settings s = {a->damping, a->tol, a->max_iter, BA_MF_ADJ_LU, NULL, 0};
    return s;
}

int ba_approx_check_block(int B, int T, const double *h, const double *J, int ldj, char *err)
{
    if (B < 1)
        return ba_fail(err, BA_ERR_ARG, "batch B = %d must be at least 1", B);
    if (T < 1 || T > BA_MAX_BLOCK)
        return ba_fail(err, BA_ERR_ARG, "T = %d is outside [1, %d]", T, BA_MAX_BLOCK);
    if (ldj < T)
        return ba_fail(err, BA_ERR_ARG, "couplings' leading dimension %d is below T = %d", ldj,
                       T);
    if (!J && T > 1)
        return ba_fail(err, BA_ERR_ARG, "couplings J are NULL");
    for (int j = 0; j + 1 < T; j++)
        for (int k = j + 1; k < T; k++)
            if (!isfinite(J[(size_t)j * ldj + k]))
                return ba_fail(err, BA_ERR_NUMERIC, "coupling J[%d][%d] = %g is not finite", j,
                               k, J[(size_t)j * ldj + k]);
    if (h)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++) {
                    double v = h[((size_t)b * T + i) * T + j];
                    if (!isfinite(v))
                        return ba_fail(err, BA_ERR_NUMERIC, "field h[%d][%d][%d] = %g is not "
                                       "finite", b, i, j, v);
                }
    return BA_OK;
}

int ba_approx_check_rows(const ba_engine_rows *r, int window, char *err)
{
    int rc = ba_approx_validate(r->approx, err);
    if (rc)
        return rc;
    if (window && (r->W < 1 || r->W > BA_BAND_MAX_W))
        return ba_fail(err, BA_ERR_ARG, "hybrid window W = %d is outside [1, %d]", r->W,
                       BA_BAND_MAX_W);
    return ba_approx_check_block(r->B, r->T, r->h, r->J, r->ldj, err);
}

int ba_approx_check_grad(int B, int T, const double *g, char *err)
{
    if (!g)
        return ba_fail(err, BA_ERR_ARG, "upstream gradient g is NULL");
    for (long r = 0; r < (long)B * T; r++)
        for (int j = 0; j <= (int)(r % T); j++)
            if (!isfinite(g[(size_t)r * T + j]))
                return ba_fail(err, BA_ERR_NUMERIC, "upstream gradient g[%ld][%ld][%d] = %g is "
                               "not finite", r / T, r % T, j, g[(size_t)r * T + j]);
    return BA_OK;
}

void ba_approx_fail_note(ba_approx_fail *f, long row, int rc, const char *err)
{
#pragma omp critical(ba_approx_fail)
    if (f->row < 0 || row < f->row) {
        f->row = row, f->rc = rc;
        snprintf(f->err, BA_ERR_LEN, "%s", err); /* err: any string, not only a buffer */
    }
}

int ba_approx_fail_report(const ba_approx_fail *f, const char *name, int T, char *err)
{
    long b = f->row / T, i = f->row % T;
    return ba_fail(err, f->rc, "%s engine, batch element %ld, query %ld (%ld keys): %s", name, b,
                   i, i + 1, f->err);
}
