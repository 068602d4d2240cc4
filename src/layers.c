/* The model's layers, each a forward/backward pair over plain arrays.
 * Backward passes accumulate into gradients (+=), so a caller zeroes them
 * once per step. Shapes: N = B*T rows; C channels. */
#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ linear */

/* C = op(A) op(B) + beta C, row-major, in blocks of rows of C, each block
 * one single-threaded call (ba_split_plan: the same result on any number
 * of threads). */
static void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const ba_real *A,
                 int lda, const ba_real *B, int ldb, ba_real beta, ba_real *C, int ldc)
{
    ba_split p = ba_split_plan(2.0 * M * N * K, M);
    if (p.nblk == 1) { /* whole, without entering a parallel region */
        int saved = ba_blas_serial();
        BA_GEMM(CblasRowMajor, ta, tb, M, N, K, 1, A, lda, B, ldb, beta, C, ldc);
        ba_blas_end(saved);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int k = 0; k < p.nblk; k++) {
        int lo = k * p.bs, m = M - lo < p.bs ? M - lo : p.bs;
        const ba_real *a = ta == CblasNoTrans ? A + (size_t)lo * lda : A + lo;
        int saved = ba_blas_serial();
        BA_GEMM(CblasRowMajor, ta, tb, m, N, K, 1, a, lda, B, ldb, beta, C + (size_t)lo * ldc,
                ldc);
        ba_blas_end(saved);
    }
}

void ba_linear_forward(ba_real *out, const ba_real *inp, const ba_real *w, const ba_real *b,
                       int N, int IC, int OC)
{
    // out (N,OC), inp (N,IC), w (OC,IC), b (OC)
    ba_real beta = 0;
    if (b) {
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * OC, b, sizeof(ba_real) * OC);
        beta = 1;
    }
    gemm(CblasNoTrans, CblasTrans, N, OC, IC, inp, IC, w, IC, beta, out, OC);
}

void ba_linear_backward(ba_real *dinp, ba_real *dw, ba_real *db, const ba_real *dout,
                        const ba_real *inp, const ba_real *w, int N, int IC, int OC)
{
    // dinp (N,IC) += dout (N,OC) w (OC,IC)
    if (dinp)
        gemm(CblasNoTrans, CblasNoTrans, N, IC, OC, dout, OC, w, IC, 1, dinp, IC);
    // dw (OC,IC) += dout^T (OC,N) inp (N,IC)
    if (dw)
        gemm(CblasTrans, CblasNoTrans, OC, IC, N, dout, OC, inp, IC, 1, dw, IC);
    if (db)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++)
                db[o] += dout[(size_t)n * OC + o];
}

/* --------------------------------------------------------- layernorm */

void ba_layernorm_forward(ba_real *out, ba_real *mean, ba_real *rstd, const ba_real *inp,
                          const ba_real *w, const ba_real *b, int N, int C)
{
    const double eps = 1e-5;
#pragma omp parallel for schedule(static) if (5.0 * N * C > BA_PAR_MIN_WORK)
    for (int n = 0; n < N; n++) {
        const ba_real *x = inp + (size_t)n * C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < C; c++)
            m += x[c];
        m /= C;
        for (int c = 0; c < C; c++)
            v += (x[c] - m) * (x[c] - m);
        v /= C;
        double s = 1.0 / sqrt(v + eps);
        ba_real *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++)
            o[c] = (ba_real)((x[c] - m) * s * w[c] + b[c]);
        mean[n] = (ba_real)m;
        rstd[n] = (ba_real)s;
    }
}

void ba_layernorm_backward(ba_real *dinp, ba_real *dw, ba_real *db, const ba_real *dout,
                           const ba_real *inp, const ba_real *w, const ba_real *mean,
                           const ba_real *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const ba_real *x = inp + (size_t)n * C;
        const ba_real *dy = dout + (size_t)n * C;
        ba_real *dx = dinp + (size_t)n * C;
        double m = mean[n], s = rstd[n];
        /* dx = s (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy w */
        double g1 = 0.0, g2 = 0.0;
        for (int c = 0; c < C; c++) {
            double xh = (x[c] - m) * s;
            double dxh = (double)dy[c] * w[c];
            g1 += dxh;
            g2 += dxh * xh;
        }
        g1 /= C;
        g2 /= C;
        for (int c = 0; c < C; c++) {
            double xh = (x[c] - m) * s;
            double dxh = (double)dy[c] * w[c];
            dw[c] += (ba_real)(dy[c] * xh);
            db[c] += dy[c];
            dx[c] += (ba_real)(s * (dxh - g1 - xh * g2));
        }
    }
}

/* -------------------------------------------------------------- gelu */

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */

#ifdef BA_DOUBLE
#define EXPM1 expm1
#else
#define EXPM1 expm1f
#endif

/* tanh through one expm1 in the model's precision: libm's double tanh was a
 * third of a small model's step. expm1 keeps tanh(u) ~ u accurate near 0. */
static inline ba_real tanh_r(ba_real u)
{
    if (u > 20)
        return 1;
    ba_real e = EXPM1(2 * u);
    return e / (e + 2);
}

void ba_gelu_forward(ba_real *out, const ba_real *inp, size_t n)
{
#pragma omp parallel for schedule(static) if (30.0 * n > BA_PAR_MIN_WORK)
    for (size_t i = 0; i < n; i++) {
        ba_real x = inp[i];
        out[i] = (ba_real)0.5 * x * (1 + tanh_r((ba_real)GELU_K * (x + (ba_real)0.044715 * x * x * x)));
    }
}

void ba_gelu_backward(ba_real *dinp, const ba_real *inp, const ba_real *dout, size_t n)
{
#pragma omp parallel for schedule(static) if (40.0 * n > BA_PAR_MIN_WORK)
    for (size_t i = 0; i < n; i++) {
        ba_real x = inp[i];
        ba_real t = tanh_r((ba_real)GELU_K * (x + (ba_real)0.044715 * x * x * x));
        ba_real du = (ba_real)GELU_K * (1 + 3 * (ba_real)0.044715 * x * x);
        ba_real d = (ba_real)0.5 * (1 + t) + (ba_real)0.5 * x * (1 - t * t) * du;
        dinp[i] += d * dout[i];
    }
}

void ba_residual_forward(ba_real *out, const ba_real *a, const ba_real *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

/* --------------------------------------------------------- attention
 *
 * Every variant forms unnormalised log-weights l_ij for the visible keys
 * j <= i of query i and normalises them with a softmax over j:
 *   softmax   l = h
 *   sigmoid   l = log sigmoid(2h)           (= log P(s_j=+1) at J = 0)
 *   boltzmann l = log P_i(s_j = +1)         (exact Ising marginal)
 *   coupling  l = log P_i(s_j = +1) at h = 0
 * Working with l rather than w keeps the normalisation finite and exact even
 * when every w_ij underflows (|h| of hundreds): a = softmax(l) never divides
 * by a sum that rounded to zero. pre (B,H,T,T) saves l for backward. */

static inline double log_sigmoid(double x)
{
    /* log(1/(1+e^-x)) without overflow for either sign. */
    return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x));
}

static inline double sigmoid(double x)
{
    return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}

typedef struct {
    int B, T, C, H, d;
    double scale;
} dims;

static dims get_dims(const ba_attn_shape *s)
{
    dims g = {s->B, s->T, s->C, s->H, s->C / s->H, 1.0 / sqrt((double)(s->C / s->H))};
    return g;
}

/* Fields h_ij = q_i . k_j / sqrt(d) of head hh for every batch element, in
 * double, less (1/2) log(i+1) with the log-n bias. hd (B,T,T), entries
 * j > i left untouched. */
static void compute_fields(const ba_attn_shape *s, const dims *g, int hh, const ba_real *qkv,
                           double *hd)
{
    int T = g->T, C = g->C, d = g->d;
#pragma omp parallel for schedule(static) if (0.5 * g->B * T * T * d > BA_PAR_MIN_WORK)
    for (int b = 0; b < g->B; b++)
        for (int i = 0; i < T; i++) {
            const ba_real *q = qkv + ((size_t)b * T + i) * 3 * C + (size_t)hh * d;
            double bias = ba_field_bias_value(s->field_bias, i + 1);
            for (int j = 0; j <= i; j++) {
                const ba_real *k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)hh * d;
                double acc = 0.0;
                for (int c = 0; c < d; c++)
                    acc += (double)q[c] * k[c];
                hd[((size_t)b * T + i) * T + j] = acc * g->scale - bias;
            }
        }
}

/* The fields of coupling attention's one shared system per row (h = 0
 * but for the field bias): hd (T,T) row i holds -bias(i+1) at j <= i.
 * Returns hd, or NULL (h = 0) without a bias. */
static const double *coupling_fields(const ba_attn_shape *s, double *hd)
{
    if (s->field_bias == BA_FIELD_BIAS_NONE)
        return NULL;
    int T = s->T;
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++)
            hd[(size_t)i * T + j] = -ba_field_bias_value(s->field_bias, i + 1);
    return hd;
}

/* The band engine's window: the band, or without one every earlier key. */
static int band_width(const ba_attn_shape *s)
{
    return s->band > 0 ? s->band : s->T > 1 ? s->T - 1 : 1;
}

/* Whether this call runs the band engine (which reads the (T,W) layout). */
static int uses_band_layout(const ba_attn_shape *s);

/* Coupling of head hh between keys j < k as the model defines it: the
 * absolute entry or the relative one of distance k - j, 0 beyond the band
 * or the relative distances. */
static inline double coupling(const ba_attn_shape *s, const ba_real *Jh, int j, int k)
{
    int d = k - j;
    if (s->band > 0 && d > s->band)
        return 0.0;
    if (s->couplings == BA_COUPLINGS_RELATIVE)
        return d <= s->D ? (double)Jh[d - 1] : 0.0;
    return (double)Jh[(size_t)j * s->Tmax + k];
}

/* This layer's couplings of head hh (J of the layer: (H,Tmax,Tmax)
 * absolute or (H,D) relative) in the layout the engine reads: Jd (T,T)
 * dense for the enumerating engines and the samplers (j < k used), or
 * (T,W) for the band engine, Jd[t*W + d-1] = J_{t-d,t} (d <= t). */
static void copy_couplings(const ba_attn_shape *s, int hh, const ba_real *J, double *Jd)
{
    int T = s->T;
    const ba_real *Jh = J + (size_t)hh * (s->couplings == BA_COUPLINGS_RELATIVE
                                               ? (size_t)s->D
                                               : (size_t)s->Tmax * s->Tmax);
    if (uses_band_layout(s)) {
        int W = band_width(s);
        for (int t = 0; t < T; t++)
            for (int d = 1; d <= W; d++)
                Jd[(size_t)t * W + d - 1] = d <= t ? coupling(s, Jh, t - d, t) : 0.0;
        return;
    }
    for (int j = 0; j < T; j++)
        for (int k = 0; k < T; k++)
            Jd[(size_t)j * T + k] = k > j ? coupling(s, Jh, j, k) : 0.0;
}

/* Adds the engine's coupling gradient dJd (the layout of copy_couplings)
 * into head hh's parameters dJ: an absolute entry gets its pair's
 * gradient, a relative distance the sum over its pairs (in key order, so
 * the sum is the same on any thread count); pairs beyond the band or the
 * relative distances are not parameters. */
static void scatter_coupling_grads(const ba_attn_shape *s, int hh, const double *dJd, ba_real *dJ)
{
    int T = s->T, rel = s->couplings == BA_COUPLINGS_RELATIVE;
    int reach = s->band > 0 ? s->band : T - 1;
    if (rel && s->D < reach)
        reach = s->D;
    ba_real *dJh = dJ + (size_t)hh * (rel ? (size_t)s->D : (size_t)s->Tmax * s->Tmax);
    int W = uses_band_layout(s) ? band_width(s) : 0;
    for (int d = 1; d <= reach && d < T; d++) {
        double acc = 0.0;
        for (int t = d; t < T; t++) {
            double v = W ? dJd[(size_t)t * W + d - 1] : dJd[(size_t)(t - d) * T + t];
            if (rel)
                acc += v;
            else
                dJh[(size_t)(t - d) * s->Tmax + t] += (ba_real)v;
        }
        if (rel)
            dJh[d - 1] += (ba_real)acc;
    }
}

static int is_ising(ba_attn a) { return a == BA_ATTN_BOLTZMANN || a == BA_ATTN_COUPLING; }

/* Whether this call estimates the Ising marginals from shots. */
static int is_sampled(const ba_attn_shape *s)
{
    return is_ising(s->attn) && s->sampler && s->sampler->kind != BA_SAMPLER_EXACT;
}

static int uses_band_layout(const ba_attn_shape *s)
{
    return s->engine == BA_ENGINE_BAND && !is_sampled(s);
}

/* The engine of s over B queries' rows: the band engine with its width,
 * the approximate engines with their settings, else the enumerating
 * engines through their contexts. */
static int exact_forward(const ba_attn_shape *s, int hh, int B, const double *h,
                         const double *Jd, double *logw, char *err)
{
    if (s->engine == BA_ENGINE_BAND)
        return ba_band_forward_jb(band_width(s), B, s->T, h, Jd, logw, err);
    if (ba_engine_is_approx(s->engine))
        return ba_approx_forward(s->engine, &s->approx, s->window, B, s->T, h, Jd, s->T, logw,
                                 s->astats, err);
    return ba_engine_forward_ctx(s->ctx ? s->ctx[hh] : NULL, s->engine, B, s->T, h, Jd, s->T,
                                 logw, err);
}

static int exact_backward(const ba_attn_shape *s, int hh, int B, const double *h,
                          const double *Jd, const double *g, double *dh, double *dJd, char *err)
{
    if (s->engine == BA_ENGINE_BAND)
        return ba_band_backward_jb(band_width(s), B, s->T, h, Jd, g, dh, dJd, err);
    if (ba_engine_is_approx(s->engine))
        return ba_approx_backward(s->engine, &s->approx, s->window, B, s->T, h, Jd, s->T, g, dh,
                                  dJd, s->astats, err);
    return ba_engine_backward_ctx(s->ctx ? s->ctx[hh] : NULL, s->engine, B, s->T, h, Jd, s->T,
                                  g, dh, dJd, err);
}

int ba_attention_forward(const ba_attn_shape *s, ba_real *out, ba_real *att, ba_real *pre,
                         const ba_real *qkv, const ba_real *J, char *err)
{
    // out (B,T,C), att (B,H,T,T), pre (B,H,T,T), qkv (B,T,3C), J (H,Tmax,Tmax)
    dims g = get_dims(s);
    int B = g.B, T = g.T, C = g.C, H = g.H, d = g.d;
    size_t btt = (size_t)B * T * T;
    if (is_ising(s->attn) && !J)
        return ba_fail(err, BA_ERR_ARG, "%s attention needs couplings J", ba_attn_name(s->attn));
    int sampled = is_sampled(s);
    if (sampled && (!s->sctx || !s->srng))
        return ba_fail(err, BA_ERR_ARG, "sampled attention needs sample contexts and an RNG");
    /* (T,T) dense or (T,W) band couplings of one head */
    size_t jsz = (size_t)T * (uses_band_layout(s) ? (size_t)band_width(s) : (size_t)T);
    double *hd = calloc(btt, sizeof(double)); // (B,T,T) fields
    double *ld = malloc(sizeof(double) * btt); // (B,T,T) log-weights
    double *Jd = is_ising(s->attn) ? malloc(sizeof(double) * (jsz ? jsz : 1)) : NULL;
    if (!hd || !ld || (is_ising(s->attn) && !Jd)) {
        free(hd), free(ld), free(Jd);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate attention workspace (B=%d, T=%d)", B,
                       T);
    }
    int rc = BA_OK;
    for (int hh = 0; hh < H && rc == BA_OK; hh++) {
        if (s->attn != BA_ATTN_COUPLING)
            compute_fields(s, &g, hh, qkv, hd);
        switch (s->attn) {
        case BA_ATTN_SOFTMAX:
            memcpy(ld, hd, sizeof(double) * btt);
            break;
        case BA_ATTN_SIGMOID:
            for (size_t q = 0; q < btt; q++)
                ld[q] = log_sigmoid(2.0 * hd[q]);
            break;
        case BA_ATTN_BOLTZMANN:
            copy_couplings(s, hh, J, Jd);
            if (sampled)
                rc = ba_sampled_forward(s->sctx[hh], s->sampler, ba_rng_u64(s->srng), B, T, hd,
                                        Jd, T, ld, err);
            else
                rc = exact_forward(s, hh, B, hd, Jd, ld, err);
            break;
        case BA_ATTN_COUPLING:
            /* With h = 0 the weights depend only on the number of visible keys,
             * not on the query's content: one system per row, shared by all b.
             * Sampled, that is one set of shots per row for the whole batch.
             * The log-n bias is a field of its own: -(1/2) log n, the same
             * for every b too. */
            copy_couplings(s, hh, J, Jd);
            {
                const double *h0 = coupling_fields(s, hd);
                if (sampled)
                    rc = ba_sampled_forward(s->sctx[hh], s->sampler, ba_rng_u64(s->srng), 1, T,
                                            h0, Jd, T, ld, err);
                else
                    rc = exact_forward(s, hh, 1, h0, Jd, ld, err);
            }
            for (int b = 1; b < B && rc == BA_OK; b++)
                memcpy(ld + (size_t)b * T * T, ld, sizeof(double) * T * T);
            break;
        }
        if (rc)
            break;
        /* normalise each row: a = softmax over the visible keys of l */
#pragma omp parallel for schedule(static) if (20.0 * B * T * T > BA_PAR_MIN_WORK)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < T; i++) {
                const double *l = ld + ((size_t)b * T + i) * T;
                size_t o = (((size_t)b * H + hh) * T + i) * T;
                double mx = -INFINITY, z = 0.0;
                for (int j = 0; j <= i; j++)
                    mx = l[j] > mx ? l[j] : mx;
                for (int j = 0; j <= i; j++)
                    z += exp(l[j] - mx);
                for (int j = 0; j < T; j++) {
                    att[o + j] = j <= i ? (ba_real)(exp(l[j] - mx) / z) : 0;
                    pre[o + j] = j <= i ? (ba_real)l[j] : 0;
                }
            }
    }
    free(hd), free(ld), free(Jd);
    if (rc)
        return rc;
    // y_i = sum_j a_ij v_j for every head
#pragma omp parallel for collapse(2) schedule(static) if (0.5 * B * H * T * T * d > BA_PAR_MIN_WORK)
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++)
            for (int i = 0; i < T; i++) {
                ba_real *y = out + ((size_t)b * T + i) * C + (size_t)hh * d;
                const ba_real *a = att + (((size_t)b * H + hh) * T + i) * T;
                for (int c = 0; c < d; c++)
                    y[c] = 0;
                for (int j = 0; j <= i; j++) {
                    const ba_real *v = qkv + ((size_t)b * T + j) * 3 * C + 2 * C + (size_t)hh * d;
                    for (int c = 0; c < d; c++)
                        y[c] += a[j] * v[c];
                }
            }
    return BA_OK;
}

int ba_attention_backward(const ba_attn_shape *s, ba_real *dqkv, ba_real *dJ,
                          const ba_real *dout, const ba_real *qkv, const ba_real *J,
                          const ba_real *att, const ba_real *pre, char *err)
{
    dims g = get_dims(s);
    int B = g.B, T = g.T, C = g.C, H = g.H, d = g.d;
    size_t btt = (size_t)B * T * T;
    /* (T,T) dense or (T,W) band couplings of one head, and their gradient */
    size_t jsz = (size_t)T * (uses_band_layout(s) ? (size_t)band_width(s) : (size_t)T);
    jsz = jsz ? jsz : 1;
    double *hd = calloc(btt, sizeof(double)); // (B,T,T) fields
    double *gd = calloc(btt, sizeof(double)); // (B,T,T) dL/dl or dL/dm
    double *dh = malloc(sizeof(double) * btt); // (B,T,T) dL/dh
    double *Jd = malloc(sizeof(double) * jsz);
    double *dJd = malloc(sizeof(double) * jsz);
    if (!hd || !gd || !dh || !Jd || !dJd) {
        free(hd), free(gd), free(dh), free(Jd), free(dJd);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate attention workspace (B=%d, T=%d)", B,
                       T);
    }
    int rc = BA_OK, sampled = is_sampled(s);
    if (sampled && !s->sctx)
        rc = ba_fail(err, BA_ERR_ARG, "sampled attention needs the sample contexts of its forward");
    for (int hh = 0; hh < H && rc == BA_OK; hh++) {
        /* the fields enter the sigmoid derivative and the exact engine; the
         * sampled backward needs only the shots */
        if (s->attn == BA_ATTN_SIGMOID || (s->attn == BA_ATTN_BOLTZMANN && !sampled))
            compute_fields(s, &g, hh, qkv, hd);
        /* Through y = a v and the row softmax: da_ij = dy_i . v_j,
         * dv_j += a_ij dy_i, dl_ij = a_ij (da_ij - sum_l a_il da_il). */
#pragma omp parallel for schedule(static) if (1.0 * B * T * T * d > BA_PAR_MIN_WORK)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < T; i++) {
                const ba_real *a = att + (((size_t)b * H + hh) * T + i) * T;
                const ba_real *l = pre + (((size_t)b * H + hh) * T + i) * T;
                const ba_real *dy = dout + ((size_t)b * T + i) * C + (size_t)hh * d;
                double *gr = gd + ((size_t)b * T + i) * T;
                double adot = 0.0;
                for (int j = 0; j <= i; j++) {
                    size_t vo = ((size_t)b * T + j) * 3 * C + 2 * C + (size_t)hh * d;
                    double da = 0.0;
                    for (int c = 0; c < d; c++) {
                        da += (double)dy[c] * qkv[vo + c];
                        dqkv[vo + c] += a[j] * dy[c];
                    }
                    gr[j] = da;
                    adot += a[j] * da;
                }
                if (is_ising(s->attn)) {
                    /* l = log w with w = (1+m)/2, a = w/S: dL/dm_j =
                     * (da_j - adot) / (2 S), S = exp(logsumexp_j l_j).
                     * Sampled, ba_sampled_backward rescales this to its
                     * estimator's dw/dm^. */
                    double mx = -INFINITY, z = 0.0;
                    for (int j = 0; j <= i; j++)
                        mx = l[j] > mx ? l[j] : mx;
                    for (int j = 0; j <= i; j++)
                        z += exp(l[j] - mx);
                    double inv2s = 0.5 * exp(-mx) / z;
                    for (int j = 0; j <= i; j++)
                        gr[j] = (gr[j] - adot) * inv2s;
                } else {
                    double *dr = dh + ((size_t)b * T + i) * T;
                    const double *hr = hd + ((size_t)b * T + i) * T;
                    for (int j = 0; j <= i; j++) {
                        double dl = a[j] * (gr[j] - adot);
                        /* sigmoid: dl/dh = 2 sigmoid(-2h) */
                        dr[j] = s->attn == BA_ATTN_SOFTMAX ? dl : dl * 2.0 * sigmoid(-2.0 * hr[j]);
                    }
                }
            }
        if (is_ising(s->attn)) {
            copy_couplings(s, hh, J, Jd);
            memset(dJd, 0, sizeof(double) * jsz);
            if (s->attn == BA_ATTN_BOLTZMANN) {
                memset(dh, 0, sizeof(double) * btt);
                if (sampled)
                    rc = ba_sampled_backward(s->sctx[hh], s->sampler, B, T, gd, dh, dJd, T, err);
                else
                    rc = exact_backward(s, hh, B, hd, Jd, gd, dh, dJd, err);
            } else {
                /* Covariances are linear in g and every batch element shares
                 * the same system, so sum g over b and solve once (with the
                 * forward's fields: the log-n bias, or none). */
                for (int b = 1; b < B; b++)
                    for (size_t q = 0; q < (size_t)T * T; q++)
                        gd[q] += gd[(size_t)b * T * T + q];
                const double *h0 = coupling_fields(s, hd);
                if (sampled)
                    rc = ba_sampled_backward(s->sctx[hh], s->sampler, 1, T, gd, NULL, dJd, T, err);
                else
                    rc = exact_backward(s, hh, 1, h0, Jd, gd, NULL, dJd, err);
            }
            if (rc)
                break;
            if (dJ)
                scatter_coupling_grads(s, hh, dJd, dJ);
        }
        if (s->attn == BA_ATTN_COUPLING)
            continue; /* no fields, so no gradient into q and k */
        /* h_ij = q_i . k_j * scale: dq_i += scale sum_j dh_ij k_j,
         * dk_j += scale dh_ij q_i */
#pragma omp parallel for schedule(static) if (1.0 * B * T * T * d > BA_PAR_MIN_WORK)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < T; i++) {
                size_t qo = ((size_t)b * T + i) * 3 * C + (size_t)hh * d;
                const double *dr = dh + ((size_t)b * T + i) * T;
                for (int j = 0; j <= i; j++) {
                    size_t ko = ((size_t)b * T + j) * 3 * C + C + (size_t)hh * d;
                    double f = dr[j] * g.scale;
                    for (int c = 0; c < d; c++) {
                        dqkv[qo + c] += (ba_real)(f * qkv[ko + c]);
                        dqkv[ko + c] += (ba_real)(f * qkv[qo + c]);
                    }
                }
            }
    }
    free(hd), free(gd), free(dh), free(Jd), free(dJd);
    return rc;
}

/* ------------------------------------------------------ cross-entropy */

int ba_crossentropy_forward(ba_real *logits, ba_real *probs, const int *targets, int N, int O,
                            int T, int mask_pointer, double *loss_sum, long *count, char *err)
{
    double ls = 0.0;
    long cnt = 0;
    for (int r = 0; r < N; r++) {
        ba_real *x = logits + (size_t)r * O;
        ba_real *p = probs + (size_t)r * O;
        int t = r % T;
        int nv = mask_pointer ? (t < O ? t : O) : O; /* columns a row may use */
        for (int c = nv; c < O; c++) {
            x[c] = (ba_real)-INFINITY;
            p[c] = 0;
        }
        int tg = targets ? targets[r] : -1;
        if (tg != -1 && (tg < 0 || tg >= nv)) {
            /* said as the batch's coordinates, not the flat row */
            if (mask_pointer)
                return ba_fail(err, BA_ERR_ARG,
                               "target %d at batch %d position %d must point at an earlier "
                               "position in [0, %d)",
                               tg, r / T, t, t);
            return ba_fail(err, BA_ERR_ARG, "target %d at batch %d position %d is outside "
                           "[0, %d)", tg, r / T, t, O);
        }
        if (nv == 0)
            continue;
        double mx = -INFINITY, z = 0.0;
        for (int c = 0; c < nv; c++)
            mx = x[c] > mx ? x[c] : mx;
        for (int c = 0; c < nv; c++)
            z += exp(x[c] - mx);
        double lse = mx + log(z);
        for (int c = 0; c < nv; c++)
            p[c] = (ba_real)exp(x[c] - lse);
        if (tg >= 0) {
            ls += lse - x[tg];
            cnt++;
        }
    }
    *loss_sum = ls;
    *count = cnt;
    return BA_OK;
}

void ba_crossentropy_backward(ba_real *dlogits, const ba_real *probs, const int *targets, int N,
                              int O, double scale)
{
    for (int r = 0; r < N; r++) {
        int tg = targets[r];
        if (tg < 0)
            continue;
        ba_real *dx = dlogits + (size_t)r * O;
        const ba_real *p = probs + (size_t)r * O;
        for (int c = 0; c < O; c++)
            dx[c] += (ba_real)(scale * (p[c] - (c == tg ? 1.0 : 0.0)));
    }
}
