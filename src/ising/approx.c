/* The approximate engines mf, tap and bp over a batch of attention rows:
 * their engine interfaces (ba_engine_mf_ops, _tap_, _bp_, at the end),
 * with the layouts of the band engine's dense entry points. Contract,
 * layouts and the policy on non-convergence: src/ising/approx_engines.h,
 * "approximate engines, batched". The per-query fixed points and their
 * implicit gradients are src/ising/mf.c and src/ising/bp.c; long
 * full-range mf/tap blocks go to src/ising/approx_gemm.c; hybrid is its
 * own engine (src/ising/hybrid.c).
 *
 * Every row of a causal attention block is its own Ising system: query i
 * sees keys 0..i, so its system is the top-left (i+1) x (i+1) corner of the
 * head's couplings with that row's fields. The rows are independent, so
 * they run in parallel, each thread with its own workspace sized for the
 * longest row (2 T^2 + O(T) doubles; bp keeps T^2 more for its messages;
 * on a band of reach W, O(T W) for every method).
 *
 * Why the backward solves each row's forward again instead of keeping it:
 * bp's state is a message per ordered pair, T^2 doubles per row, T^3 per
 * block (8 GiB at T = 1024); mf and tap would keep 2 T per row. Repeating
 * the forward from J = 0 (same settings, same sweeps, so the same fixed
 * point bit for bit) costs about what the forward cost; given the
 * forward's log-weights (ba_approx_backward_from, as the attention layer
 * calls it), mf and tap start at the forward's answer instead and take a
 * few sweeps, keeping memory flat either way.
 *
 * The gradient of the couplings is a sum over every row of the batch. So
 * that it does not depend on the thread count, the rows are cut into a
 * fixed number of contiguous chunks (it depends only on T), each summed in
 * row order into its own (T,T) buffer, and the chunks are added in order.
 *
 * Banded couplings (a --band model, relative or absolute: J_jk = 0 beyond
 * some distance). Each call finds the reach W of the head's J, the largest
 * k - j with J_jk != 0 (an O(T^2) scan, like the finiteness check). When
 * the band is at most half the block, 2W + 1 <= T / 2, every row runs the
 * banded kernels (src/ising_mf_band.c): O(n W) a sweep instead of O(n^2),
 * the forward bit for bit the dense one; for a wider band the dense rows
 * cost about as much and keep their contiguous sums. The band Ab (T, 2W +
 * 1) is built once per call and read by every thread.
 *
 * The couplings' gradient of a banded head is not banded: beyond the
 * reach, dL/dJ_jk = zo_j m_k + zo_k m_j per row (src/ising/ising.h), and the
 * attention layer reads the entries up to its model's band (or every
 * entry without one; scatter_coupling_grads, src/attention_core.h), which
 * may be wider than the reach found in the values (couplings initialised
 * at 0 have reach 0). So the backward produces every entry the caller asks
 * for: up to R (ba_approx_backward_reach; T - 1 for ba_approx_backward).
 * Near the band (R - W <= BAND_DIRECT) each row adds them itself, O(n (R -
 * W)); further, summed row by row they would cost O(n^2) a row in
 * scattered memory traffic, so the rows' vectors zo and m are gathered in
 * groups of up to GROUP_ROWS consecutive rows of one batch element, and a
 * group's far entries are added as matrix products (far_flush). The groups
 * depend only on the row indices, so the sums do not depend on the thread
 * count. */
#include "ising/ising.h"
#include "ising/approx_gemm.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>

/* This file's engines (defined at the end; the table in src/ising/engine.c
 * lists them). */
extern const ba_engine_ops ba_engine_mf_ops;
extern const ba_engine_ops ba_engine_tap_ops;
extern const ba_engine_ops ba_engine_bp_ops;
#endif

static ba_mf_method method_of(ba_engine e)
{
    return e == BA_ENGINE_TAP ? BA_MF_TAP : e == BA_ENGINE_BP ? BA_MF_BP : BA_MF_NAIVE;
}

/* The far gradient is added row by row up to this distance past the band,
 * by matrix products beyond it; the groups of those products hold at most
 * GROUP_ROWS rows, their row blocks FAR_BLOCK keys. */
#define BAND_DIRECT 32
#define GROUP_ROWS 64
#define FAR_BLOCK 64

/* A call's band: on (the banded kernels run), the reach W, Ab (T, 2W + 1)
 * (src/ising/ising.h's band layout), shared read-only by the threads. */
typedef struct {
    int on, W;
    double *Ab;
} band_of;

/* Finds J's reach and builds the band when it is narrow enough; 0 when
 * out of memory. */
static int band_setup(int T, const double *J, int ldj, band_of *b)
{
    b->on = 0, b->W = 0, b->Ab = NULL;
    if (T < 2)
        return 1;
    int w = ba_mf_reach(T, J, ldj);
    if (4 * w + 2 > T)
        return 1; /* 2W + 1 > T / 2: the dense rows */
    b->Ab = malloc(sizeof(double) * (size_t)T * (2 * (size_t)w + 1));
    if (!b->Ab)
        return 0;
    ba_mf_band_build(T, w, J, ldj, b->Ab);
    b->on = 1, b->W = w;
    return 1;
}

/* One thread's workspace for rows of up to T keys. */
typedef struct {
    double *state, *ws, *hz; /* hz: T zeros, the fields when h is NULL */
    int *ipiv;
} row_ws;

static int row_ws_init(row_ws *w, ba_mf_method meth, int T, const band_of *b)
{
    w->state = malloc(sizeof(double) * (b->on ? ba_mf_band_state_doubles(meth, T, b->W)
                                              : ba_mf_state_doubles(meth, T)));
    w->ws = malloc(sizeof(double) * (b->on ? ba_mf_band_ws_doubles(T, b->W)
                                           : ba_mf_ws_doubles(T)));
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
static int solve_row(ba_mf_method meth, const ba_mf_settings *s, int n, const double *h,
                     const double *J, int ldj, const band_of *b, double *logw, row_ws *w,
                     ba_mf_info *info, char *err)
{
    return b->on ? ba_mf_band_forward(meth, s, n, b->W, h, b->Ab, logw, w->state, w->ws, info,
                                      err)
                 : ba_mf_forward(meth, s, n, h, J, ldj, logw, w->state, w->ws, info, err);
}

static int row_forward(ba_mf_method meth, const ba_mf_settings *s, int n, const double *h,
                       const double *J, int ldj, const band_of *b, double *logw, row_ws *w,
                       ba_mf_settings *used, ba_approx_stats *st, char *err)
{
    ba_mf_info info = {0, 0};
    *used = *s;
    int rc = solve_row(meth, used, n, h, J, ldj, b, logw, w, &info, err);
    if (rc == BA_OK && !info.converged && used->start) {
        /* a start that does not converge (a float logw is 1e-7 from the
         * point, more than a tolerance of 1e-12 can reach in few sweeps):
         * the forward's own path from the J = 0 solution, which converged */
        used->start = NULL;
        int first = info.iters;
        rc = solve_row(meth, used, n, h, J, ldj, b, logw, w, &info, err);
        info.iters += first;
    }
    if (rc == BA_OK && !info.converged) {
        /* a quarter of the step and four times the sweeps: damping tames
         * the oscillating (period-2) failures of undamped mean field */
        ba_mf_retry(s, used);
        int first = info.iters;
        rc = solve_row(meth, used, n, h, J, ldj, b, logw, w, &info, err);
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

/* mf, tap and bp (o) over r's rows; W is not read. */
static int approx_forward(const ba_engine_ops *o, const ba_engine_rows *in, double *logw,
                          char *err)
{
    int rc = ba_approx_check_rows(in, 0, err);
    if (rc)
        return rc;
    if (!logw)
        return ba_fail(err, BA_ERR_ARG, "log-weights output is NULL");
    ba_engine e = o->id;
    const ba_approx *a = in->approx;
    int B = in->B, T = in->T, ldj = in->ldj;
    const double *h = in->h, *J = in->J;
    ba_approx_stats *st = in->stats;
    ba_mf_method meth = method_of(e);
    ba_mf_settings s = ba_approx_mf_settings(a);
    long rows = (long)B * T;
    ba_approx_fail ff = {-1, BA_OK, ""};
    ba_approx_stats tot = {0, 0, 0, 0, 0};
    band_of band;
    if (!band_setup(T, J, ldj, &band))
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the %s engine's coupling band (T = "
                       "%d)", o->name, T);
    /* long full-range mf/tap blocks: all rows at once (src/ising_approx_gemm.c) */
    if (!band.on && ba_approx_gemm_applies(e, T)) {
        free(band.Ab);
        return ba_gemm_forward(o, a, BA_APPROX_GEMM_MEMORY, B, T, h, J, ldj, logw, st, err);
    }
    int nomem = 0;
#pragma omp parallel
    {
        row_ws w;
        ba_approx_stats my = {0, 0, 0, 0, 0};
        char msg[BA_ERR_LEN];
        int ok = row_ws_init(&w, meth, T, &band);
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
            if (ba_stop_requested(in->stop)) { /* the rows left are skipped */
                ba_approx_fail_note(&ff, r, BA_ERR_INTERRUPTED, "stopped on request");
                continue;
            }
            int i = (int)(r % T), n = i + 1;
            const double *hr = h ? h + (size_t)r * T : w.hz;
            ba_mf_settings used;
            int rr = row_forward(meth, &s, n, hr, J, ldj, &band, logw + (size_t)r * T, &w, &used,
                                 &my, msg);
            if (rr)
                ba_approx_fail_note(&ff, r, rr, msg);
        }
#pragma omp critical(ba_approx_stats)
        ba_engine_stats_add(&tot, &my);
        row_ws_free(&w);
    }
    free(band.Ab);
    if (nomem)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the %s engine's workspace (T = %d)",
                       o->name, T);
    if (ff.row >= 0)
        return ba_approx_fail_report(&ff, o->name, T, err);
    if (st)
        ba_engine_stats_add(st, &tot);
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
 * ones, banded LU on a band; bp's is always iterative. A row whose forward
 * did not converge, or whose adjoint came out non-finite, adds no gradient
 * (zo untouched); an adjoint iteration that stopped unconverged adds its
 * last iterate's. All are counted. On a band, dJ gets the entries up to R
 * and zo (may be NULL) the far gradient's vector. */
static int row_backward(ba_mf_method meth, const ba_mf_settings *s, int n, const double *h,
                        const double *J, int ldj, const band_of *b, int R, const double *g,
                        double *dh, double *dJ, int lddj, double *zo, row_ws *w, double *logw,
                        ba_approx_stats *st, char *err)
{
    ba_mf_settings used;
    ba_approx_stats fw = {0, 0, 0, 0, 0};
    int rc = row_forward(meth, s, n, h, J, ldj, b, logw, w, &used, &fw, err);
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
    if (b->on)
        rc = ba_mf_band_backward(meth, &used, n, b->W, b->Ab, w->state, g, dh, dJ, lddj, R, zo,
                                 w->ws, w->ipiv, &info, err);
    else
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

/* acc (T,T) += the far gradient (k - j > W, k < n1) of a group of gn rows
 * of one batch element: row p of Z and M (gn rows of T) holds its zo and
 * m, zero beyond its keys. Row block [j0, j1) of FAR_BLOCK keys: its
 * columns k >= j1 + W are far for every j of the block, two products
 * Z^T M + M^T Z; the columns between the band and those, row by row. */
static void far_flush(int T, int W, int gn, int n1, const double *Z, const double *M,
                      double *acc)
{
    int saved = ba_blas_serial();
    for (int j0 = 0; j0 < n1; j0 += FAR_BLOCK) {
        int j1 = j0 + FAR_BLOCK < n1 ? j0 + FAR_BLOCK : n1, k0 = j1 + W;
        int kend = k0 < n1 ? k0 : n1;
        for (int p = 0; p < gn; p++) {
            const double *z = Z + (size_t)p * T, *m = M + (size_t)p * T;
            for (int j = j0; j < j1; j++) {
                double *ar = acc + (size_t)j * T, zj = z[j], mj = m[j];
                for (int k = j + W + 1; k < kend; k++)
                    ar[k] += zj * m[k] + z[k] * mj;
            }
        }
        if (k0 < n1) {
            int mb = j1 - j0, nb = n1 - k0;
            double *c = acc + (size_t)j0 * T + k0;
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, mb, nb, gn, 1.0, Z + j0, T,
                        M + k0, T, 1.0, c, T);
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, mb, nb, gn, 1.0, M + j0, T,
                        Z + k0, T, 1.0, c, T);
        }
    }
    ba_blas_end(saved);
}

/* What every chunk of a backward shares. */
typedef struct {
    ba_mf_method meth;
    ba_mf_settings s;
    int T, ldj, R, nc;
    long rows;
    const double *h, *J, *g;
    const double *lw0; /* (B,T,T) the forward's logw, or NULL: the rows' starts */
    band_of band;
    int grouped; /* banded, dJ wanted, the far entries by far_flush */
    double *acc; /* (nc,T,T) or NULL */
    double *dhs; /* (B,T,T) or NULL */
    const ba_stop *stop; /* polled between rows */
} bw_job;

/* A thread's buffers: the row workspace, lw and x0 (T each), and the
 * group's Z, M (GROUP_ROWS, T) when grouped. */
typedef struct {
    row_ws w;
    double *lw, *x0, *Z, *M;
} bw_ws;

static int bw_ws_init(bw_ws *t, const bw_job *jb)
{
    int ok = row_ws_init(&t->w, jb->meth, jb->T, &jb->band);
    size_t gsz = jb->grouped ? (size_t)GROUP_ROWS * jb->T : 1;
    t->lw = malloc(sizeof(double) * (size_t)jb->T);
    t->x0 = malloc(sizeof(double) * (size_t)jb->T);
    t->Z = malloc(sizeof(double) * gsz);
    t->M = malloc(sizeof(double) * gsz);
    return ok && t->lw && t->x0 && t->Z && t->M;
}

static void bw_ws_free(bw_ws *t)
{
    row_ws_free(&t->w);
    free(t->lw), free(t->x0), free(t->Z), free(t->M);
}

/* x0 (n) = m = 2 w - 1 of the forward's row lw (n), clamped to [-1, 1]
 * (a float w may round just past 1); 0 when an entry is NaN or +inf. */
static int start_of(int n, const double *lw, double *x0)
{
    for (int j = 0; j < n; j++) {
        double m = ba_m_of_logw(lw[j]);
        if (!isfinite(m))
            return 0;
        x0[j] = m > 1.0 ? 1.0 : m < -1.0 ? -1.0 : m;
    }
    return 1;
}

/* Chunk c: rows [c rows / nc, (c+1) rows / nc) in row order into its
 * buffer; the groups of far_flush never cross a batch element. */
static void chunk_backward(const bw_job *jb, int c, bw_ws *t, ba_approx_stats *my,
                           ba_approx_fail *ff)
{
    int T = jb->T, gn = 0, n1 = 0;
    long r0 = c * jb->rows / jb->nc, r1 = (c + 1) * jb->rows / jb->nc;
    double *acc = jb->acc ? jb->acc + (size_t)c * T * T : NULL;
    char msg[BA_ERR_LEN];
    for (long r = r0; r < r1; r++) {
        if (ba_stop_requested(jb->stop)) {
            ba_approx_fail_note(ff, r, BA_ERR_INTERRUPTED, "stopped on request");
            return;
        }
        int i = (int)(r % T), n = i + 1;
        if (jb->grouped && gn > 0 && (i == 0 || gn == GROUP_ROWS)) {
            far_flush(T, jb->band.W, gn, n1, t->Z, t->M, acc);
            gn = 0;
        }
        double *zo = NULL, *mrow = NULL;
        if (jb->grouped) {
            zo = t->Z + (size_t)gn * T, mrow = t->M + (size_t)gn * T;
            memset(zo, 0, sizeof(double) * T);
            memset(mrow, 0, sizeof(double) * T);
        }
        const double *hr = jb->h ? jb->h + (size_t)r * T : t->w.hz;
        int R = jb->grouped ? jb->band.W : jb->R;
        ba_mf_settings s = jb->s;
        if (jb->lw0 && jb->meth != BA_MF_BP && start_of(n, jb->lw0 + (size_t)r * T, t->x0))
            s.start = t->x0;
        int rr = row_backward(jb->meth, &s, n, hr, jb->J, jb->ldj, &jb->band, R,
                              jb->g + (size_t)r * T, jb->dhs ? jb->dhs + (size_t)r * T : NULL,
                              acc, T, zo, &t->w, t->lw, my, msg);
        if (rr) {
            ba_approx_fail_note(ff, r, rr, msg);
            return;
        }
        if (jb->grouped) {
            memcpy(mrow, t->w.state, sizeof(double) * n); /* m; inert where zo is 0 */
            gn++, n1 = n;
        }
    }
    if (jb->grouped && gn > 0)
        far_flush(T, jb->band.W, gn, n1, t->Z, t->M, acc);
}

/* mf, tap and bp (o): r's rows' backward, the couplings' gradient up to
 * r->R (src/ising/approx_engines.h, ba_approx_backward_from). */
static int approx_backward(const ba_engine_ops *o, const ba_engine_rows *in, const double *g,
                           double *dh, double *dJ, char *err)
{
    int rc = ba_approx_check_rows(in, 0, err);
    if (rc || (rc = ba_approx_check_grad(in->B, in->T, g, err)))
        return rc;
    if (in->R < 0)
        return ba_fail(err, BA_ERR_ARG, "coupling gradient reach R = %d is negative", in->R);
    ba_engine e = o->id;
    const ba_approx *a = in->approx;
    int B = in->B, T = in->T, ldj = in->ldj, R = in->R;
    const double *h = in->h, *J = in->J, *logw0 = in->logw0;
    ba_approx_stats *st = in->stats;
    bw_job jb = {method_of(e), ba_approx_mf_settings(a), T, ldj, R, 0, (long)B * T, h, J, g,
                 logw0, {0, 0, NULL}, 0, NULL, NULL, in->stop};
    jb.nc = dj_chunks(T, jb.rows);
    size_t tt = (size_t)T * T;
    int okb = band_setup(T, J, ldj, &jb.band);
    /* the forward's path, so the backward differentiates the fixed point
     * the forward returned; it adds every entry j < k, whatever R */
    if (okb && !jb.band.on && ba_approx_gemm_applies(e, T)) {
        free(jb.band.Ab);
        return ba_gemm_backward(o, a, BA_APPROX_GEMM_MEMORY, B, T, h, J, ldj, logw0, g, dh, dJ,
                                st, err);
    }
    jb.grouped = dJ && jb.band.on && R - jb.band.W > BAND_DIRECT;
    jb.acc = dJ ? calloc((size_t)jb.nc * tt, sizeof(double)) : NULL;        // (nc,T,T)
    jb.dhs = dh ? calloc((size_t)jb.rows * T, sizeof(double)) : NULL;      // (B,T,T)
    if (!okb || (dJ && !jb.acc) || (dh && !jb.dhs)) {
        free(jb.acc), free(jb.dhs), free(jb.band.Ab);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the %s engine's gradient buffers "
                       "(T = %d)", o->name, T);
    }
    ba_approx_fail ff = {-1, BA_OK, ""};
    ba_approx_stats tot = {0, 0, 0, 0, 0};
    int nomem = 0;
#pragma omp parallel
    {
        bw_ws t;
        ba_approx_stats my = {0, 0, 0, 0, 0};
        int ok = bw_ws_init(&t, &jb);
        if (!ok) {
#pragma omp atomic write
            nomem = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int c = 0; c < jb.nc; c++)
            if (ok)
                chunk_backward(&jb, c, &t, &my, &ff);
#pragma omp critical(ba_approx_stats)
        ba_engine_stats_add(&tot, &my);
        bw_ws_free(&t);
    }
    free(jb.band.Ab);
    if (nomem || ff.row >= 0) {
        free(jb.acc), free(jb.dhs);
        return nomem ? ba_fail(err, BA_ERR_NOMEM, "cannot allocate the %s engine's workspace "
                               "(T = %d)", o->name, T)
                     : ba_approx_fail_report(&ff, o->name, T, err);
    }
    if (dh)
        for (long r = 0; r < jb.rows; r++)
            for (int j = 0; j <= (int)(r % T); j++)
                dh[(size_t)r * T + j] += jb.dhs[(size_t)r * T + j];
    if (dJ)
        for (int c = 0; c < jb.nc; c++)
            for (int j = 0; j + 1 < T; j++)
                for (int k = j + 1; k < T && k - j <= R; k++)
                    dJ[(size_t)j * ldj + k] += jb.acc[(size_t)c * tt + (size_t)j * T + k];
    free(jb.acc), free(jb.dhs);
    if (st)
        ba_engine_stats_add(st, &tot);
    return BA_OK;
}

/* ------------------------------------------------ the engine interface */

static int mf_fwd(const ba_engine_rows *r, double *logw, char *err)
{
    return approx_forward(&ba_engine_mf_ops, r, logw, err);
}
static int mf_bwd(const ba_engine_rows *r, const double *g, double *dh, double *dJ, char *err)
{
    return approx_backward(&ba_engine_mf_ops, r, g, dh, dJ, err);
}
static int tap_fwd(const ba_engine_rows *r, double *logw, char *err)
{
    return approx_forward(&ba_engine_tap_ops, r, logw, err);
}
static int tap_bwd(const ba_engine_rows *r, const double *g, double *dh, double *dJ, char *err)
{
    return approx_backward(&ba_engine_tap_ops, r, g, dh, dJ, err);
}
static int bp_fwd(const ba_engine_rows *r, double *logw, char *err)
{
    return approx_forward(&ba_engine_bp_ops, r, logw, err);
}
static int bp_bwd(const ba_engine_rows *r, const double *g, double *dh, double *dJ, char *err)
{
    return approx_backward(&ba_engine_bp_ops, r, g, dh, dJ, err);
}

/* mf, tap and bp run at any T up to BA_MAX_BLOCK; only their iteration
 * settings can be refused. */
static int approx_check(const ba_engine_ops *o, const ba_engine_limits *q, char *err)
{
    char why[BA_ERR_LEN];
    if (q->approx && ba_approx_validate(q->approx, why))
        return ba_fail(err, BA_ERR_ARG, "%s engine: %s", o->name, why);
    return BA_OK;
}
static int mf_check(const ba_engine_limits *q, char *err)
{
    return approx_check(&ba_engine_mf_ops, q, err);
}
static int tap_check(const ba_engine_limits *q, char *err)
{
    return approx_check(&ba_engine_tap_ops, q, err);
}
static int bp_check(const ba_engine_limits *q, char *err)
{
    return approx_check(&ba_engine_bp_ops, q, err);
}

const ba_engine_ops ba_engine_mf_ops = {
    .id = BA_ENGINE_MF,
    .name = "mf",
    .summary = "naive mean field: m = tanh(h + A m), iterated; any T",
    .caps = BA_ENGINE_CAP_APPROX,
    .max_spins = BA_MAX_BLOCK,
    .check = mf_check,
    .forward = mf_fwd,
    .backward = mf_bwd,
};
const ba_engine_ops ba_engine_tap_ops = {
    .id = BA_ENGINE_TAP,
    .name = "tap",
    .summary = "mean field with the TAP (Onsager) correction, iterated; any T",
    .caps = BA_ENGINE_CAP_APPROX,
    .max_spins = BA_MAX_BLOCK,
    .check = tap_check,
    .forward = tap_fwd,
    .backward = tap_bwd,
};
const ba_engine_ops ba_engine_bp_ops = {
    .id = BA_ENGINE_BP,
    .name = "bp",
    .summary = "loopy belief propagation, iterated; any T",
    .caps = BA_ENGINE_CAP_APPROX,
    .max_spins = BA_MAX_BLOCK,
    .check = bp_check,
    .forward = bp_fwd,
    .backward = bp_bwd,
};
