/* Tiled attention with linear memory for softmax and sigmoid (issue 42):
 * the FlashAttention idea on the CPU. The dense core (attention_core.h)
 * keeps att and pre (B,H,T,T); here the scores of a block of BA_TILE
 * queries by BA_TILE keys are formed in a small buffer by one BLAS call,
 * normalised online (a running maximum and sum per query row) and
 * multiplied into the output at once, so nothing of size T x T is ever
 * held. The forward saves one number per query row: lse_i, the
 * log-sum-exp of the row's log-weights l_ij over its visible keys; the
 * backward recomputes each tile's weights a_ij = exp(l_ij - lse_i) from it
 * (FlashAttention-2: D_i = dy_i . y_i, dl_ij = a_ij (da_ij - D_i)).
 *
 * The variants are the dense core's exactly: a = softmax_j(l) over j <= i,
 *   softmax  l = h,
 *   sigmoid  l = log sigmoid(2h), dl/dh = 2 sigmoid(-2h),
 * with h_ij = scale q_i . k_j - bias(i+1) - m_h (i - j) (ba_field_bias_value;
 * softmax drops the bias, a per-row constant that no softmax sees; m_h is
 * ALiBi's slope of head h, 0 without it). Key tiles
 * beyond a query tile's last row are skipped (causal), and in the tile on
 * the diagonal each row stops at its own key.
 *
 * Threads: the forward splits over (batch, head, query tile), the backward
 * over (batch, head), whose dq, dk, dv no other unit touches; each unit
 * runs in a fixed order with single-threaded BLAS calls, so the results
 * are the same bits on any number of threads. Products are in the core's
 * precision (sgemm for float), where the dense core forms fields in double:
 * the two agree to float rounding, not bit for bit.
 *
 * The file is its own template: compiled once, it includes itself for
 * float (f32) and for double (f64). */
#ifndef TL_PASS

#include "model/model.h"
#include "core/vmath.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rows of a query tile and columns of a key tile (queries and keys share
 * it, so a tile on the diagonal is square). */
#ifndef BA_TILE
#define BA_TILE 64
#endif

int ba_attn_tiled_supports(const ba_attn_shape *s)
{
    return s && (s->attn == BA_ATTN_SOFTMAX || s->attn == BA_ATTN_SIGMOID);
}

#define TL_PASS 1
#define AT_REAL float
#define AT_SFX f32
#define TL_GEMM cblas_sgemm
#define TL_EXP ba_exp_nonpos1f
#define TL_LOG1P_TERMS 8
#include "model/attention_tiled.c"
#undef AT_REAL
#undef AT_SFX
#undef TL_GEMM
#undef TL_EXP
#undef TL_LOG1P_TERMS
#define AT_REAL double
#define AT_SFX f64
#define TL_GEMM cblas_dgemm
#define TL_EXP ba_exp_nonpos1
#define TL_LOG1P_TERMS 16
#include "model/attention_tiled.c"

#else /* TL_PASS: the template, once per precision */

#define TL_CAT2(a, b) a##_##b
#define TL_CAT(a, b) TL_CAT2(a, b)
#define TL(name) TL_CAT(name, AT_SFX)
#define TL_IO TL_CAT(ba_attn_io, AT_SFX)
#define TL_AT(io, b, h, i) \
    ((size_t)(b) * (io)->sb + (size_t)(h) * (io)->sh + (size_t)(i) * (io)->st)
#define TL_OUT(io, b, h, i) \
    ((size_t)(b) * (io)->ob + (size_t)(h) * (io)->oh + (size_t)(i) * (io)->ot)

/* One thread's buffers: s, p, dp (BA_TILE x BA_TILE) scores, weights and
 * their gradient; o, dk, dv (BA_TILE x d) accumulators; mx, z (BA_TILE)
 * the running maximum and sum, alpha, sum (BA_TILE) a tile's rescaling
 * factors and row sums; dd (T) the backward's D_i of one head. */
typedef struct {
    AT_REAL *s, *p, *dp, *o, *dk, *dv, *mx, *dd;
    double *z, *alpha, *sum;
} TL(tl_ws);

static void TL(ws_free)(TL(tl_ws) *w)
{
    free(w->s), free(w->p), free(w->dp), free(w->o), free(w->dk), free(w->dv), free(w->mx);
    free(w->dd), free(w->z), free(w->alpha), free(w->sum);
}

static int TL(ws_alloc)(TL(tl_ws) *w, int d, int T)
{
    size_t tt = (size_t)BA_TILE * BA_TILE, td = (size_t)BA_TILE * d;
    memset(w, 0, sizeof *w);
    w->s = malloc(sizeof(AT_REAL) * tt), w->p = malloc(sizeof(AT_REAL) * tt);
    w->dp = malloc(sizeof(AT_REAL) * tt), w->o = malloc(sizeof(AT_REAL) * td);
    w->dk = malloc(sizeof(AT_REAL) * td), w->dv = malloc(sizeof(AT_REAL) * td);
    w->mx = malloc(sizeof(AT_REAL) * BA_TILE), w->dd = malloc(sizeof(AT_REAL) * (size_t)T);
    w->z = malloc(sizeof(double) * BA_TILE), w->alpha = malloc(sizeof(double) * BA_TILE);
    w->sum = malloc(sizeof(double) * BA_TILE);
    if (w->s && w->p && w->dp && w->o && w->dk && w->dv && w->mx && w->dd && w->z && w->alpha &&
        w->sum)
        return 0;
    TL(ws_free)(w);
    return -1;
}

/* log1p(x) for x in [0, 1], vectorisable (as ba_log1p_unit): 2 atanh(s)
 * with s = x / (2 + x) <= 1/3, the series to s^(2N-1) / (2N-1), N =
 * TL_LOG1P_TERMS: truncation below (1/9)^N / (2N+1) relative, 1.4e-9 for
 * float (N = 8), 1.6e-17 for double (N = 16). */
static inline AT_REAL TL(log1p_unit)(AT_REAL x)
{
    AT_REAL s = x / (2 + x), s2 = s * s, p = (AT_REAL)(1.0 / (2 * TL_LOG1P_TERMS - 1));
    for (int k = TL_LOG1P_TERMS - 2; k >= 0; k--)
        p = p * s2 + (AT_REAL)(1.0 / (2 * k + 1));
    return 2 * s * p;
}

/* Sigmoid's log-weights of one row in place: x = log sigmoid(2 (x - bias))
 * for its c visible keys; with f (or NULL) also f = 2 sigmoid(-2 (x - bias)),
 * the backward's dl/dh. */
BA_CLONES static void TL(sig_row)(AT_REAL *x, AT_REAL *f, int c, double bias)
{
    AT_REAL bi = (AT_REAL)bias;
#pragma omp simd
    for (int j = 0; j < c; j++) {
        AT_REAL t = 2 * (x[j] - bi);
        AT_REAL e = TL_EXP(t >= 0 ? -t : t), lp = TL(log1p_unit)(e);
        x[j] = t >= 0 ? -lp : t - lp;
        if (f)
            f[j] = t >= 0 ? 2 * e / (1 + e) : 2 / (1 + e);
    }
}

/* ALiBi's distance bias on the c visible keys of one row of a tile: x_j -=
 * m (dist0 - j), dist0 the distance of the tile's first key from the row's
 * query. The bias is formed in double and rounded once. */
BA_CLONES static void TL(alibi_row)(AT_REAL *x, int c, double slope, int dist0)
{
#pragma omp simd
    for (int j = 0; j < c; j++)
        x[j] -= (AT_REAL)(slope * (dist0 - j));
}

/* The online softmax of one row of a tile: p holds the row's log-weights
 * (c visible of m columns); it becomes exp(l - mx') with mx' the new
 * running maximum, the sum z and the output row o (d) are rescaled to mx'
 * and z gains the row's sum. Invisible columns become 0. */
BA_CLONES static void TL(row_exp)(AT_REAL *p, int c, int m, AT_REAL *mx, double *alpha)
{
    /* the maximum is exact in any order, so it is vectorised (a NaN field
     * then may or may not become t; either way the row's sum and lse are
     * NaN and the forward refuses it) */
    AT_REAL t = *mx;
#pragma omp simd reduction(max : t)
    for (int j = 0; j < c; j++)
        t = p[j] > t ? p[j] : t;
    *alpha = *mx == -INFINITY ? 0.0 : (double)TL_EXP(*mx - t);
#pragma omp simd
    for (int j = 0; j < c; j++)
        p[j] = TL_EXP(p[j] - t);
    for (int j = c > 0 ? c : 0; j < m; j++)
        p[j] = 0;
    *mx = t;
}

/* The sums of n rows of p (row stride ld; row r has c0 + r visible
 * columns, at most m): each row's in index order, in double, as it always
 * was (its order fixes the last bits of lse and so of every weight); four
 * rows at a time, so that four chains of dependent additions overlap. */
static void TL(row_sums)(const AT_REAL *p, size_t ld, int n, int c0, int m, double *sum)
{
    int r = 0;
    for (; r + 4 <= n; r += 4) {
        const AT_REAL *p0 = p + (size_t)r * ld, *p1 = p0 + ld, *p2 = p1 + ld, *p3 = p2 + ld;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        int c = c0 + r + 3 < m ? c0 + r + 3 : m; /* row r + 3's count: the others' are below */
        for (int j = 0; j < c; j++)
            s0 += p0[j], s1 += p1[j], s2 += p2[j], s3 += p3[j];
        /* the invisible columns are 0: adding them changes no sum but a
         * -0, which no sum of exponentials is */
        sum[r] = s0, sum[r + 1] = s1, sum[r + 2] = s2, sum[r + 3] = s3;
    }
    for (; r < n; r++) {
        const AT_REAL *q = p + (size_t)r * ld;
        int c = c0 + r < m ? c0 + r : m;
        double s0 = 0.0;
        for (int j = 0; j < c; j++)
            s0 += q[j];
        sum[r] = s0;
    }
}

/* The online softmax's bookkeeping of one row after row_exp and row_sums:
 * the sum z and the output row o (d) are rescaled to the new maximum
 * (alpha) and z gains the row's sum. */
static void TL(row_rescale)(double alpha, double sum, double *z, AT_REAL *o, int d)
{
    *z = *z * alpha + sum;
    /* alpha 0 is the row's first visible tile, whose output is still 0 */
    if (alpha != 1.0 && alpha != 0.0)
        for (int k = 0; k < d; k++)
            o[k] = (AT_REAL)(o[k] * alpha);
}

typedef struct {
    int B, T, H, d;
    double scale;
} TL(tl_dims);

static TL(tl_dims) TL(dims_of)(const ba_attn_shape *s, const TL_IO *io)
{
    int d = s->C / s->H;
    TL(tl_dims) g = {s->B, s->T, s->H, d, io->scale_set ? io->scale : 1.0 / sqrt((double)d)};
    return g;
}

/* Query tile it of head h of batch element b: its rows of out and lse. */
static void TL(fwd_tile)(const ba_attn_shape *s, const TL(tl_dims) *g, const TL_IO *io, int b,
                         int h, int it, AT_REAL *lse, TL(tl_ws) *w)
{
    int T = g->T, d = g->d, i0 = it * BA_TILE;
    int n = T - i0 < BA_TILE ? T - i0 : BA_TILE;
    size_t st = io->st;
    const AT_REAL *Q = io->q + TL_AT(io, b, h, i0);
    const AT_REAL *K = io->k + TL_AT(io, b, h, 0), *V = io->v + TL_AT(io, b, h, 0);
    int sig = s->attn == BA_ATTN_SIGMOID;
    double slope = ba_attn_alibi_slope(s, h);
    memset(w->o, 0, sizeof(AT_REAL) * (size_t)n * d);
    for (int r = 0; r < n; r++)
        w->mx[r] = -INFINITY, w->z[r] = 0.0;
    for (int j0 = 0; j0 < i0 + n; j0 += BA_TILE) {
        int m = i0 + n - j0 < BA_TILE ? i0 + n - j0 : BA_TILE;
        TL_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, d, (AT_REAL)g->scale, Q, st,
                K + (size_t)j0 * st, st, 0, w->s, BA_TILE);
        for (int r = 0; r < n; r++) {
            int c = i0 + r - j0 + 1;
            c = c < m ? c : m;
            AT_REAL *row = w->s + (size_t)r * BA_TILE;
            if (slope != 0.0)
                TL(alibi_row)(row, c, slope, i0 + r - j0);
            if (sig && c > 0)
                TL(sig_row)(row, NULL, c, ba_field_bias_value(s->field_bias, i0 + r + 1));
            TL(row_exp)(row, c, m, w->mx + r, w->alpha + r);
        }
        TL(row_sums)(w->s, BA_TILE, n, i0 - j0 + 1, m, w->sum);
        for (int r = 0; r < n; r++)
            TL(row_rescale)(w->alpha[r], w->sum[r], w->z + r, w->o + (size_t)r * d, d);
        TL_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, d, m, 1, w->s, BA_TILE,
                V + (size_t)j0 * st, st, 1, w->o, d);
    }
    for (int r = 0; r < n; r++) {
        AT_REAL *y = io->out + TL_OUT(io, b, h, i0 + r);
        double iz = 1.0 / w->z[r];
        for (int k = 0; k < d; k++)
            y[k] = (AT_REAL)(w->o[(size_t)r * d + k] * iz);
        lse[((size_t)b * g->H + h) * T + i0 + r] = (AT_REAL)(w->mx[r] + log(w->z[r]));
    }
}

/* BA_ERR_NUMERIC naming the first row whose lse is not finite: a field
 * that overflowed (q or k too large) or a NaN among the inputs. */
static int TL(check_lse)(const ba_attn_shape *s, const TL(tl_dims) *g, const AT_REAL *lse,
                         char *err)
{
    size_t n = (size_t)g->B * g->H * g->T;
    for (size_t q = 0; q < n; q++)
        if (!isfinite((double)lse[q])) {
            int i = (int)(q % g->T), h = (int)(q / g->T % g->H), b = (int)(q / g->T / g->H);
            return ba_fail(err, BA_ERR_NUMERIC,
                           "%s attention (tiled): head %d, batch %d, query %d: the log-sum-exp "
                           "of the weights is %g (q or k too large, or not finite)",
                           ba_attn_name(s->attn), h, b, i, (double)lse[q]);
        }
    return BA_OK;
}

static int TL(check_args)(const ba_attn_shape *s, const TL_IO *io, const AT_REAL *lse, int bwd,
                          char *err)
{
    if (!ba_attn_tiled_supports(s))
        return ba_fail(err, BA_ERR_ARG, "tiled attention runs softmax and sigmoid only, not %s",
                       s ? ba_attn_name(s->attn) : "(null)");
    if (!io || !lse || !io->q || !io->k || !io->v || !io->out ||
        (bwd && (!io->dout || !io->dq || !io->dk || !io->dv)))
        return ba_fail(err, BA_ERR_ARG, "tiled attention %s: a tensor is NULL (the backward "
                       "needs the forward's out and lse)", bwd ? "backward" : "forward");
    if (s->B < 1 || s->T < 1 || s->H < 1 || s->C < s->H || s->C % s->H)
        return ba_fail(err, BA_ERR_ARG, "tiled attention: bad shape B=%d T=%d C=%d H=%d", s->B,
                       s->T, s->C, s->H);
    if (ba_stop_requested(s->stop))
        return ba_fail(err, BA_ERR_INTERRUPTED, "%s attention (tiled) %s: stopped on request",
                       ba_attn_name(s->attn), bwd ? "backward" : "forward");
    return BA_OK;
}

int TL(ba_attn_tiled_forward)(const ba_attn_shape *s, const TL_IO *io, AT_REAL *lse, char *err)
{
    // io: q, k, v in, out written; lse (B,H,T) written
    int rc = TL(check_args)(s, io, lse, 0, err);
    if (rc)
        return rc;
    TL(tl_dims) g = TL(dims_of)(s, io);
    int nt = (g.T + BA_TILE - 1) / BA_TILE, units = g.B * g.H * nt, bad = 0;
    double work = 2.0 * g.B * g.H * (double)g.T * g.T * g.d;
#pragma omp parallel if (work > BA_PAR_MIN_WORK) reduction(| : bad)
    {
        TL(tl_ws) w;
        int saved = ba_blas_serial();
        if (TL(ws_alloc)(&w, g.d, 1))
            bad = 1;
        /* largest tiles first: the causal cost of tile it grows with it */
#pragma omp for schedule(dynamic, 1)
        for (int u = 0; u < units; u++) {
            int it = nt - 1 - u % nt, h = u / nt % g.H, b = u / nt / g.H;
            if (!bad)
                TL(fwd_tile)(s, &g, io, b, h, it, lse, &w);
        }
        ba_blas_end(saved);
        if (!bad)
            TL(ws_free)(&w);
    }
    if (bad)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate tiled attention workspace (d=%d)",
                       g.d);
    return TL(check_lse)(s, &g, lse, err);
}

/* One row of a backward tile: p = exp(l - lse) for the c visible of m
 * columns (0 beyond) from the fields in x; for sigmoid x becomes
 * dl/dh = 2 sigmoid(-2h). */
BA_CLONES static void TL(bwd_row)(AT_REAL *x, AT_REAL *p, int c, int m, AT_REAL lse, int sig,
                                  double bias)
{
    /* softmax reads the fields straight from x: a copy first cost as much
     * as the exponentials at T = 64 (one short memcpy call per row) */
    const AT_REAL *l = x;
    if (sig && c > 0) {
        for (int j = 0; j < c; j++)
            p[j] = x[j];
        TL(sig_row)(p, x, c, bias);
        l = p;
    }
#pragma omp simd
    for (int j = 0; j < c; j++)
        p[j] = TL_EXP(l[j] - lse);
    for (int j = c > 0 ? c : 0; j < m; j++)
        p[j] = 0;
}

/* dl = p (dp - D), times dl/dh (f) for sigmoid, into dp. */
BA_CLONES static void TL(ds_row)(AT_REAL *dp, const AT_REAL *p, const AT_REAL *f, int m,
                                 AT_REAL D)
{
    if (f) {
#pragma omp simd
        for (int j = 0; j < m; j++)
            dp[j] = p[j] * (dp[j] - D) * f[j];
    } else {
#pragma omp simd
        for (int j = 0; j < m; j++)
            dp[j] = p[j] * (dp[j] - D);
    }
}

/* Head h of batch element b: dq, dk, dv += its gradients, key tile by key
 * tile (outer), each against the query tiles from the diagonal on. */
static void TL(bwd_head)(const ba_attn_shape *s, const TL(tl_dims) *g, const TL_IO *io, int b,
                         int h, const AT_REAL *lse, TL(tl_ws) *w)
{
    int T = g->T, d = g->d, sig = s->attn == BA_ATTN_SIGMOID;
    size_t st = io->st, ot = io->ot, tt = (size_t)BA_TILE;
    AT_REAL sc = (AT_REAL)g->scale;
    double slope = ba_attn_alibi_slope(s, h);
    const AT_REAL *ls = lse + ((size_t)b * g->H + h) * T;
    /* D_i = dy_i . y_i = sum_j a_ij da_ij, each in index order in double;
     * two rows at a time, so that their chains of additions overlap */
    for (int i = 0; i < T; i += 2) {
        int i1 = i + 1 < T ? i + 1 : i;
        const AT_REAL *y = io->out + TL_OUT(io, b, h, i), *dy = io->dout + TL_OUT(io, b, h, i);
        const AT_REAL *y1 = io->out + TL_OUT(io, b, h, i1);
        const AT_REAL *dy1 = io->dout + TL_OUT(io, b, h, i1);
        double acc = 0.0, acc1 = 0.0;
        for (int k = 0; k < d; k++)
            acc += (double)y[k] * dy[k], acc1 += (double)y1[k] * dy1[k];
        w->dd[i] = (AT_REAL)acc, w->dd[i1] = (AT_REAL)acc1;
    }
    for (int j0 = 0; j0 < T; j0 += BA_TILE) {
        int m = T - j0 < BA_TILE ? T - j0 : BA_TILE;
        const AT_REAL *K = io->k + TL_AT(io, b, h, j0), *V = io->v + TL_AT(io, b, h, j0);
        memset(w->dk, 0, sizeof(AT_REAL) * (size_t)m * d);
        memset(w->dv, 0, sizeof(AT_REAL) * (size_t)m * d);
        for (int i0 = j0; i0 < T; i0 += BA_TILE) {
            int n = T - i0 < BA_TILE ? T - i0 : BA_TILE;
            const AT_REAL *Q = io->q + TL_AT(io, b, h, i0);
            const AT_REAL *dO = io->dout + TL_OUT(io, b, h, i0);
            TL_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, d, sc, Q, st, K, st, 0, w->s,
                    tt);
            for (int r = 0; r < n; r++) {
                int c = i0 + r - j0 + 1;
                if (slope != 0.0)
                    TL(alibi_row)(w->s + r * tt, c < m ? c : m, slope, i0 + r - j0);
                TL(bwd_row)(w->s + r * tt, w->p + r * tt, c < m ? c : m, m, ls[i0 + r], sig,
                            ba_field_bias_value(s->field_bias, i0 + r + 1));
            }
            TL_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, m, d, n, 1, w->p, tt, dO, ot, 1,
                    w->dv, d);
            TL_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, d, 1, dO, ot, V, st, 0, w->dp,
                    tt);
            for (int r = 0; r < n; r++)
                TL(ds_row)(w->dp + r * tt, w->p + r * tt, sig ? w->s + r * tt : NULL, m,
                           w->dd[i0 + r]);
            TL_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, d, m, sc, w->dp, tt, K, st, 1,
                    io->dq + TL_AT(io, b, h, i0), st);
            TL_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, m, d, n, sc, w->dp, tt, Q, st, 1,
                    w->dk, d);
        }
        for (int r = 0; r < m; r++) {
            AT_REAL *dk = io->dk + TL_AT(io, b, h, j0 + r), *dv = io->dv + TL_AT(io, b, h, j0 + r);
            for (int k = 0; k < d; k++)
                dk[k] += w->dk[(size_t)r * d + k], dv[k] += w->dv[(size_t)r * d + k];
        }
    }
}

int TL(ba_attn_tiled_backward)(const ba_attn_shape *s, const TL_IO *io, const AT_REAL *lse,
                               char *err)
{
    // io: q, k, v, out (the forward's), dout in; dq, dk, dv +=; lse (B,H,T) of the forward
    int rc = TL(check_args)(s, io, lse, 1, err);
    if (rc)
        return rc;
    TL(tl_dims) g = TL(dims_of)(s, io);
    int units = g.B * g.H, bad = 0;
    double work = 5.0 * g.B * g.H * (double)g.T * g.T * g.d;
#pragma omp parallel if (work > BA_PAR_MIN_WORK && units > 1) reduction(| : bad)
    {
        TL(tl_ws) w;
        int saved = ba_blas_serial();
        if (TL(ws_alloc)(&w, g.d, g.T))
            bad = 1;
#pragma omp for schedule(dynamic, 1)
        for (int u = 0; u < units; u++)
            if (!bad)
                TL(bwd_head)(s, &g, io, u / g.H, u % g.H, lse, &w);
        ba_blas_end(saved);
        if (!bad)
            TL(ws_free)(&w);
    }
    if (bad)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate tiled attention workspace (T=%d)",
                       g.T);
    return BA_OK;
}

/* The weights a (B,H,T,T) of a tiled forward, recomputed from its lse
 * (0 above the diagonal): what the dense core keeps in att, for analysis. */
int TL(ba_attn_tiled_weights)(const ba_attn_shape *s, const TL_IO *io, const AT_REAL *lse,
                              AT_REAL *att, char *err)
{
    int rc = TL(check_args)(s, io, lse, 0, err);
    if (rc)
        return rc;
    if (!att)
        return ba_fail(err, BA_ERR_ARG, "tiled attention weights: att is NULL");
    TL(tl_dims) g = TL(dims_of)(s, io);
    int T = g.T, sig = s->attn == BA_ATTN_SIGMOID;
    for (int b = 0; b < g.B; b++)
        for (int h = 0; h < g.H; h++)
            for (int i = 0; i < T; i++) {
                AT_REAL *a = att + (((size_t)b * g.H + h) * T + i) * T;
                const AT_REAL *q = io->q + TL_AT(io, b, h, i);
                AT_REAL l = lse[((size_t)b * g.H + h) * T + i];
                double slope = ba_attn_alibi_slope(s, h);
                for (int j = 0; j <= i; j++) {
                    const AT_REAL *k = io->k + TL_AT(io, b, h, j);
                    double x = 0;
                    for (int c = 0; c < g.d; c++)
                        x += (double)q[c] * k[c];
                    a[j] = (AT_REAL)(x * g.scale);
                }
                if (slope != 0.0)
                    TL(alibi_row)(a, i + 1, slope, i);
                if (sig)
                    TL(sig_row)(a, NULL, i + 1, ba_field_bias_value(s->field_bias, i + 1));
                for (int j = 0; j < T; j++)
                    a[j] = j <= i ? TL_EXP(a[j] - l) : 0;
            }
    return BA_OK;
}

#undef TL_CAT2
#undef TL_CAT
#undef TL
#undef TL_IO
#undef TL_AT
#undef TL_OUT
#endif /* TL_PASS */
