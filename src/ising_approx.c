/* The approximate engines over a batch of attention rows (mf, tap, bp and
 * the dispatch to hybrid): the entry points the attention layer calls,
 * with the layouts of the band engine's dense ones. Contract, layouts and
 * the policy on non-convergence: src/internal.h, "approximate engines,
 * batched". The per-query fixed points and their implicit gradients are
 * src/ising_mf.c and src/ising_bp.c; hybrid is src/ising_hybrid.c.
 *
 * Every row of a causal attention block is its own Ising system: query i
 * sees keys 0..i, so its system is the top-left (i+1) x (i+1) corner of the
 * head's couplings with that row's fields. The rows are independent, so
 * they run in parallel, each thread with its own workspace sized for the
 * longest row (2 T^2 + O(T) doubles; bp keeps T^2 more for its messages).
 *
 * Why the backward solves each row's forward again instead of keeping it:
 * bp's state is a message per ordered pair, T^2 doubles per row, T^3 per
 * block (8 GiB at T = 1024); mf and tap would keep 2 T per row. Repeating
 * the forward (same settings, same sweeps, so the same fixed point bit for
 * bit) costs about what the adjoint solve costs and keeps memory flat.
 *
 * The gradient of the couplings is a sum over every row of the batch. So
 * that it does not depend on the thread count, the rows are cut into a
 * fixed number of contiguous chunks (it depends only on T), each summed in
 * row order into its own (T,T) buffer, and the chunks are added in order. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

static ba_mf_method method_of(ba_engine e)
{
    return e == BA_ENGINE_TAP ? BA_MF_TAP : e == BA_ENGINE_BP ? BA_MF_BP : BA_MF_NAIVE;
}

ba_mf_settings ba_approx_mf_settings(const ba_approx *a)
{
    ba_mf_settings s = {a->damping, a->tol, a->max_iter, BA_MF_ADJ_LU};
    return s;
}

void ba_approx_stats_add(ba_approx_stats *to, const ba_approx_stats *from)
{
    to->queries += from->queries;
    to->sweeps += from->sweeps;
    to->retried += from->retried;
    to->unconverged += from->unconverged;
    if (from->max_sweeps > to->max_sweeps)
        to->max_sweeps = from->max_sweeps;
}

/* The checks both directions share, before anything is written: the
 * engine and settings, the shapes, every coupling j < k < T and every
 * field a row reads (j <= i) finite. */
static int check_args(ba_engine e, const ba_approx *a, int W, int B, int T, const double *h,
                      const double *J, int ldj, char *err)
{
    if (!ba_engine_is_approx(e))
        return ba_fail(err, BA_ERR_ARG, "engine '%s' is not an approximate engine (mf, tap, "
                       "bp, hybrid)", ba_engine_name(e));
    int rc = ba_approx_validate(a, err);
    if (rc)
        return rc;
    if (e == BA_ENGINE_HYBRID && (W < 1 || W > BA_BAND_MAX_W))
        return ba_fail(err, BA_ERR_ARG, "hybrid window W = %d is outside [1, %d]", W,
                       BA_BAND_MAX_W);
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

/* One thread's workspace for rows of up to T keys. */
typedef struct {
    double *state, *ws, *hz; /* hz: T zeros, the fields when h is NULL */
    int *ipiv;
} row_ws;

static int row_ws_init(row_ws *w, ba_mf_method meth, int T)
{
    w->state = malloc(sizeof(double) * ba_mf_state_doubles(meth, T));
    w->ws = malloc(sizeof(double) * ba_mf_ws_doubles(T));
    w->hz = calloc((size_t)T, sizeof(double));
    w->ipiv = malloc(sizeof(int) * (size_t)T);
    return w->state && w->ws && w->hz && w->ipiv;
}

static void row_ws_free(row_ws *w)
{
    free(w->state), free(w->ws), free(w->hz), free(w->ipiv);
}

/* The forward of one row with the retry policy: *used gets the settings of
 * the solve that was kept (the backward differentiates that fixed point),
 * st counts it. */
static int row_forward(ba_mf_method meth, const ba_mf_settings *s, int n, const double *h,
                       const double *J, int ldj, double *logw, row_ws *w, ba_mf_settings *used,
                       ba_approx_stats *st, char *err)
{
    ba_mf_info info = {0, 0};
    *used = *s;
    int rc = ba_mf_forward(meth, used, n, h, J, ldj, logw, w->state, w->ws, &info, err);
    if (rc == BA_OK && !info.converged) {
        /* a quarter of the step and four times the sweeps: damping tames
         * the oscillating (period-2) failures of undamped mean field */
        used->damping = s->damping / 4.0;
        used->max_iter = s->max_iter > BA_APPROX_MAX_ITER / 4 ? BA_APPROX_MAX_ITER
                                                              : 4 * s->max_iter;
        int first = info.iters;
        rc = ba_mf_forward(meth, used, n, h, J, ldj, logw, w->state, w->ws, &info, err);
        info.iters += first;
        st->retried++;
    }
    if (rc)
        return rc;
    st->queries++;
    st->sweeps += info.iters;
    if (info.iters > st->max_sweeps)
        st->max_sweeps = info.iters;
    st->unconverged += !info.converged;
    return BA_OK;
}

/* A row's failure, kept for the lowest row index so that the message does
 * not depend on the thread schedule. */
typedef struct {
    long row; /* -1: none */
    int rc;
    char err[BA_ERR_LEN];
} first_fail;

static void note_fail(first_fail *f, long row, int rc, const char *err)
{
#pragma omp critical(ba_approx_fail)
    if (f->row < 0 || row < f->row) {
        f->row = row;
        f->rc = rc;
        memcpy(f->err, err, BA_ERR_LEN);
    }
}

static int report_fail(const first_fail *f, ba_engine e, int T, char *err)
{
    long b = f->row / T, i = f->row % T;
    return ba_fail(err, f->rc, "%s engine, batch element %ld, query %ld (%ld keys): %s",
                   ba_engine_name(e), b, i, i + 1, f->err);
}

int ba_approx_forward(ba_engine e, const ba_approx *a, int W, int B, int T, const double *h,
                      const double *J, int ldj, double *logw, ba_approx_stats *st, char *err)
{
    int rc = check_args(e, a, W, B, T, h, J, ldj, err);
    if (rc)
        return rc;
    if (!logw)
        return ba_fail(err, BA_ERR_ARG, "log-weights output is NULL");
    if (e == BA_ENGINE_HYBRID)
        return ba_hybrid_forward(a, W, B, T, h, J, ldj, logw, st, err);
    ba_mf_method meth = method_of(e);
    ba_mf_settings s = ba_approx_mf_settings(a);
    long rows = (long)B * T;
    first_fail ff = {-1, BA_OK, ""};
    ba_approx_stats tot = {0, 0, 0, 0, 0};
    int nomem = 0;
#pragma omp parallel
    {
        row_ws w;
        ba_approx_stats my = {0, 0, 0, 0, 0};
        char msg[BA_ERR_LEN];
        int ok = row_ws_init(&w, meth, T);
        if (!ok) {
#pragma omp atomic write
            nomem = 1;
        }
        /* rows of the same query length cost alike; dynamic spreads the
         * long ones */
#pragma omp for schedule(dynamic, 4)
        for (long r = 0; r < rows; r++) {
            if (!ok)
                continue;
            int i = (int)(r % T), n = i + 1;
            const double *hr = h ? h + (size_t)r * T : w.hz;
            ba_mf_settings used;
            int rr = row_forward(meth, &s, n, hr, J, ldj, logw + (size_t)r * T, &w, &used, &my,
                                 msg);
            if (rr)
                note_fail(&ff, r, rr, msg);
        }
#pragma omp critical(ba_approx_stats)
        ba_approx_stats_add(&tot, &my);
        row_ws_free(&w);
    }
    if (nomem)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the %s engine's workspace (T = %d)",
                       ba_engine_name(e), T);
    if (ff.row >= 0)
        return report_fail(&ff, e, T, err);
    if (st)
        ba_approx_stats_add(st, &tot);
    return BA_OK;
}

/* The number of fixed chunks the rows' coupling gradients are summed in:
 * at most 16, and no more than 2^25 doubles (256 MiB) of (T,T) buffers. */
static int dj_chunks(int T, long rows)
{
    long c = (1L << 25) / ((long)T * T);
    c = c < 1 ? 1 : c > 16 ? 16 : c;
    return (int)(c < rows ? c : rows);
}

/* One row's backward: its forward again (the fixed point the forward
 * kept), then the adjoint. The adjoint of mf/tap is LU for short rows, the
 * transposed iteration (same spectrum as the converged forward) for long
 * ones; bp's is always iterative. A row whose forward did not converge, or
 * whose adjoint came out non-finite, adds no gradient; an adjoint iteration
 * that stopped unconverged adds its last iterate's. All are counted. */
static int row_backward(ba_mf_method meth, const ba_mf_settings *s, int n, const double *h,
                        const double *J, int ldj, const double *g, double *dh, double *dJ,
                        int lddj, row_ws *w, double *logw, ba_approx_stats *st, char *err)
{
    ba_mf_settings used;
    ba_approx_stats fw = {0, 0, 0, 0, 0};
    int rc = row_forward(meth, s, n, h, J, ldj, logw, w, &used, &fw, err);
    if (rc)
        return rc;
    st->queries++;
    if (fw.unconverged) {
        /* the implicit gradient of a point that is not a fixed point means
         * nothing: the row adds none, and is counted */
        st->unconverged++;
        return BA_OK;
    }
    used.adjoint = (meth == BA_MF_BP || n <= BA_APPROX_LU_MAX_N) ? BA_MF_ADJ_LU : BA_MF_ADJ_ITER;
    ba_mf_info info = {0, 0};
    rc = ba_mf_backward(meth, &used, n, J, ldj, w->state, g, dh, dJ, lddj, w->ws, w->ipiv,
                        &info, err);
    if (rc == BA_ERR_NUMERIC) {
        /* a diverged (non-finite) adjoint or a singular system, with its
         * inputs checked finite: nothing was written; counted */
        st->unconverged++;
        return BA_OK;
    }
    if (rc)
        return rc;
    st->sweeps += info.iters;
    if (info.iters > st->max_sweeps)
        st->max_sweeps = info.iters;
    st->unconverged += !info.converged;
    return BA_OK;
}

int ba_approx_backward(ba_engine e, const ba_approx *a, int W, int B, int T, const double *h,
                       const double *J, int ldj, const double *g, double *dh, double *dJ,
                       ba_approx_stats *st, char *err)
{
    int rc = check_args(e, a, W, B, T, h, J, ldj, err);
    if (rc)
        return rc;
    if (!g)
        return ba_fail(err, BA_ERR_ARG, "upstream gradient g is NULL");
    for (long r = 0; r < (long)B * T; r++)
        for (int j = 0; j <= (int)(r % T); j++)
            if (!isfinite(g[(size_t)r * T + j]))
                return ba_fail(err, BA_ERR_NUMERIC, "upstream gradient g[%ld][%ld][%d] = %g is "
                               "not finite", r / T, r % T, j, g[(size_t)r * T + j]);
    if (e == BA_ENGINE_HYBRID)
        return ba_hybrid_backward(a, W, B, T, h, J, ldj, g, dh, dJ, st, err);
    ba_mf_method meth = method_of(e);
    ba_mf_settings s = ba_approx_mf_settings(a);
    long rows = (long)B * T;
    int nc = dj_chunks(T, rows);
    size_t tt = (size_t)T * T;
    double *acc = dJ ? calloc((size_t)nc * tt, sizeof(double)) : NULL; // (nc,T,T)
    double *dhs = dh ? calloc((size_t)rows * T, sizeof(double)) : NULL; // (B,T,T)
    if ((dJ && !acc) || (dh && !dhs)) {
        free(acc), free(dhs);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the %s engine's gradient buffers "
                       "(T = %d)", ba_engine_name(e), T);
    }
    first_fail ff = {-1, BA_OK, ""};
    ba_approx_stats tot = {0, 0, 0, 0, 0};
    int nomem = 0;
#pragma omp parallel
    {
        row_ws w;
        ba_approx_stats my = {0, 0, 0, 0, 0};
        char msg[BA_ERR_LEN];
        int ok = row_ws_init(&w, meth, T);
        double *lw = malloc(sizeof(double) * (size_t)T);
        if (!ok || !lw) {
            ok = 0;
#pragma omp atomic write
            nomem = 1;
        }
        /* chunk c holds rows [c rows / nc, (c+1) rows / nc), in row order */
#pragma omp for schedule(dynamic, 1)
        for (int c = 0; c < nc; c++) {
            long r0 = c * rows / nc, r1 = (c + 1) * rows / nc;
            for (long r = r0; r < r1 && ok; r++) {
                int i = (int)(r % T), n = i + 1;
                const double *hr = h ? h + (size_t)r * T : w.hz;
                int rr = row_backward(meth, &s, n, hr, J, ldj, g + (size_t)r * T,
                                      dhs ? dhs + (size_t)r * T : NULL,
                                      acc ? acc + (size_t)c * tt : NULL, T, &w, lw, &my, msg);
                if (rr)
                    note_fail(&ff, r, rr, msg);
            }
        }
#pragma omp critical(ba_approx_stats)
        ba_approx_stats_add(&tot, &my);
        row_ws_free(&w);
        free(lw);
    }
    if (nomem || ff.row >= 0) {
        free(acc), free(dhs);
        return nomem ? ba_fail(err, BA_ERR_NOMEM, "cannot allocate the %s engine's workspace "
                               "(T = %d)", ba_engine_name(e), T)
                     : report_fail(&ff, e, T, err);
    }
    if (dh)
        for (long r = 0; r < rows; r++)
            for (int j = 0; j <= (int)(r % T); j++)
                dh[(size_t)r * T + j] += dhs[(size_t)r * T + j];
    if (dJ)
        for (int c = 0; c < nc; c++)
            for (int j = 0; j + 1 < T; j++)
                for (int k = j + 1; k < T; k++)
                    dJ[(size_t)j * ldj + k] += acc[(size_t)c * tt + (size_t)j * T + k];
    free(acc), free(dhs);
    if (st)
        ba_approx_stats_add(st, &tot);
    return BA_OK;
}
