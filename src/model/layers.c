/* The model's layers, each a forward/backward pair over plain arrays.
 * Backward passes accumulate into gradients (+=), so a caller zeroes them
 * once per step. Shapes: N = B*T rows; C channels. */
#include "model/model.h"
#include "core/vmath.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ linear */

/* C = op(A) op(B) + beta C, row-major, in blocks of rows of C, each block
 * one single-threaded call (ba_split_plan: the same result on any number
 * of threads). With bias (N columns), each block's rows of C are first set
 * to it and beta is 1: C = bias + op(A) op(B), the copy made right before
 * its product, in cache for it (one pass over the whole output beforehand
 * was 4 % of the recipe step). */
static void gemm_block(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int lo, int m, int N, int K,
                       const ba_real *A, int lda, const ba_real *B, int ldb, ba_real beta,
                       ba_real *C, int ldc, const ba_real *bias)
{
    const ba_real *a = ta == CblasNoTrans ? A + (size_t)lo * lda : A + lo;
    ba_real *c = C + (size_t)lo * ldc; // (m,ldc)
    if (bias) {
        for (int r = 0; r < m; r++)
            memcpy(c + (size_t)r * ldc, bias, sizeof(ba_real) * N);
        beta = 1;
    }
    int saved = ba_blas_serial();
    BA_GEMM(CblasRowMajor, ta, tb, m, N, K, 1, a, lda, B, ldb, beta, c, ldc);
    ba_blas_end(saved);
}

static void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const ba_real *A,
                 int lda, const ba_real *B, int ldb, ba_real beta, ba_real *C, int ldc,
                 const ba_real *bias)
{
    ba_split p = ba_split_plan(2.0 * M * N * K, M);
    if (p.nblk == 1) { /* whole, without entering a parallel region */
        gemm_block(ta, tb, 0, M, N, K, A, lda, B, ldb, beta, C, ldc, bias);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int k = 0; k < p.nblk; k++) {
        int lo = k * p.bs, m = M - lo < p.bs ? M - lo : p.bs;
        gemm_block(ta, tb, lo, m, N, K, A, lda, B, ldb, beta, C, ldc, bias);
    }
}

void ba_linear_forward(ba_real *out, const ba_real *inp, const ba_real *w, const ba_real *b,
                       int N, int IC, int OC)
{
    // out (N,OC), inp (N,IC), w (OC,IC), b (OC)
    gemm(CblasNoTrans, CblasTrans, N, OC, IC, inp, IC, w, IC, 0, out, OC, b);
}

void ba_linear_backward(ba_real *dinp, ba_real *dw, ba_real *db, const ba_real *dout,
                        const ba_real *inp, const ba_real *w, int N, int IC, int OC)
{
    // dinp (N,IC) += dout (N,OC) w (OC,IC)
    if (dinp)
        gemm(CblasNoTrans, CblasNoTrans, N, IC, OC, dout, OC, w, IC, 1, dinp, IC, NULL);
    // dw (OC,IC) += dout^T (OC,N) inp (N,IC)
    if (dw)
        gemm(CblasTrans, CblasNoTrans, OC, IC, N, dout, OC, inp, IC, 1, dw, IC, NULL);
    if (db)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++)
                db[o] += dout[(size_t)n * OC + o];
}

/* --------------------------------------------------------- layernorm */

/* One row of each, in functions of their own so they are built for AVX-512
 * and AVX2 too (BA_CLONES); sums in double. */
BA_CLONES static void layernorm_row(ba_real *o, ba_real *mean, ba_real *rstd, const ba_real *x,
                                    const ba_real *w, const ba_real *b, int C)
{
    const double eps = 1e-5;
    double m = 0.0, v = 0.0;
#pragma omp simd reduction(+ : m)
    for (int c = 0; c < C; c++)
        m += x[c];
    m /= C;
#pragma omp simd reduction(+ : v)
    for (int c = 0; c < C; c++)
        v += (x[c] - m) * (x[c] - m);
    v /= C;
    double s = 1.0 / sqrt(v + eps);
#pragma omp simd
    for (int c = 0; c < C; c++)
        o[c] = (ba_real)((x[c] - m) * s * w[c] + b[c]);
    *mean = (ba_real)m;
    *rstd = (ba_real)s;
}

/* dx = s (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy w */
BA_CLONES static void layernorm_row_backward(ba_real *dx, const ba_real *dy, const ba_real *x,
                                             const ba_real *w, double m, double s, int C)
{
    double g1 = 0.0, g2 = 0.0;
#pragma omp simd reduction(+ : g1, g2)
    for (int c = 0; c < C; c++) {
        double xh = (x[c] - m) * s;
        double dxh = (double)dy[c] * w[c];
        g1 += dxh;
        g2 += dxh * xh;
    }
    g1 /= C;
    g2 /= C;
#pragma omp simd
    for (int c = 0; c < C; c++) {
        double xh = (x[c] - m) * s;
        double dxh = (double)dy[c] * w[c];
        dx[c] += (ba_real)(s * (dxh - g1 - xh * g2));
    }
}

/* dw += dy xhat and db += dy over rows n0..n1 - 1, for columns c0..c1 - 1:
 * each column summed in row order, whoever computes it. */
BA_CLONES static void layernorm_cols_backward(ba_real *dw, ba_real *db, const ba_real *dout,
                                              const ba_real *inp, const ba_real *mean,
                                              const ba_real *rstd, int N, int C, int c0, int c1)
{
    for (int n = 0; n < N; n++) {
        const ba_real *dy = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        double m = mean[n], s = rstd[n];
#pragma omp simd
        for (int c = c0; c < c1; c++) {
            double xh = (x[c] - m) * s;
            dw[c] += (ba_real)(dy[c] * xh);
            db[c] += dy[c];
        }
    }
}

void ba_layernorm_forward(ba_real *out, ba_real *mean, ba_real *rstd, const ba_real *inp,
                          const ba_real *w, const ba_real *b, int N, int C)
{
#pragma omp parallel for schedule(static) if (5.0 * N * C > BA_PAR_MIN_WORK)
    for (int n = 0; n < N; n++)
        layernorm_row(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, w, b, C);
}

/* Columns of dw and db per unit of the parameter sums' parallel loop. */
#define LN_COLS 32

void ba_layernorm_backward(ba_real *dinp, ba_real *dw, ba_real *db, const ba_real *dout,
                           const ba_real *inp, const ba_real *w, const ba_real *mean,
                           const ba_real *rstd, int N, int C)
{
    /* The rows' dx are independent; the parameters' sums run over the rows
     * in row order, split by columns, so the bits are one thread's on any
     * number of threads. */
    int par = 8.0 * N * C > BA_PAR_MIN_WORK, cols = par ? LN_COLS : C; /* one pass alone */
    int ncb = (C + cols - 1) / cols;
#pragma omp parallel if (par)
    {
#pragma omp for schedule(static) nowait
        for (int n = 0; n < N; n++)
            layernorm_row_backward(dinp + (size_t)n * C, dout + (size_t)n * C,
                                   inp + (size_t)n * C, w, mean[n], rstd[n], C);
#pragma omp for schedule(static)
        for (int k = 0; k < ncb; k++) {
            int c0 = k * cols, c1 = c0 + cols < C ? c0 + cols : C;
            layernorm_cols_backward(dw, db, dout, inp, mean, rstd, N, C, c0, c1);
        }
    }
}

/* -------------------------------------------------------------- gelu */

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_A 0.044715

/* gelu(x) = 0.5 x (1 + tanh(u)), u = K (x + A x^3), computed as x s with
 * s = sigmoid(2u) = 0.5 (1 + tanh(u)): the same function, without the
 * cancellation of 1 + tanh(u) for negative x. The sigmoid takes one
 * exponential of -|2u| <= 0 (ba_exp_nonpos1, src/vmath.h), vectorised in
 * the model's precision: libm's scalar expm1f was 38 % of a charlm T = 12
 * step. e = exp(-|2u|) gives s = 1/(1+e) for u >= 0, e/(1+e) below, and
 * s (1 - s) = e/(1+e)^2 either way. */
#ifdef BA_DOUBLE
#define EXP_NONPOS ba_exp_nonpos1
#else
#define EXP_NONPOS ba_exp_nonpos1f
#endif

static inline ba_real gelu_u2(ba_real x) /* 2u, u = K (x + A x^3) */
{
    return (ba_real)(2 * GELU_K) * (x + (ba_real)GELU_A * x * x * x);
}

BA_CLONES static void gelu_forward_range(ba_real *out, const ba_real *inp, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        ba_real x = inp[i], z = gelu_u2(x);
        ba_real e = EXP_NONPOS(z < 0 ? z : -z), r = 1 / (1 + e);
        out[i] = x * (z < 0 ? e * r : r);
    }
}

/* acc 1: dinp += the gradient; acc 0: dinp = 0 + the gradient, the same
 * bits as zeroing dinp first (0 + x keeps x, and turns -0 into +0 as the
 * zeroed buffer did) without the pass that zeroes it. */
BA_CLONES static void gelu_backward_range(ba_real *dinp, const ba_real *inp,
                                          const ba_real *dout, size_t n, int acc)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        ba_real x = inp[i], z = gelu_u2(x);
        ba_real e = EXP_NONPOS(z < 0 ? z : -z), r = 1 / (1 + e);
        ba_real s = z < 0 ? e * r : r, ss = e * r * r; /* s, s (1 - s) */
        ba_real dz = (ba_real)(2 * GELU_K) * (1 + (ba_real)(3 * GELU_A) * x * x);
        dinp[i] = (acc ? dinp[i] : (ba_real)0) + (s + x * ss * dz) * dout[i];
    }
}

/* Fixed chunks, so a thread count never changes which element is computed
 * how (it could not anyway: each is independent). */
#define ELEM_CHUNK 4096

void ba_gelu_forward(ba_real *out, const ba_real *inp, size_t n)
{
    size_t nc = (n + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static) if (8.0 * n > BA_PAR_MIN_WORK)
    for (size_t c = 0; c < nc; c++) {
        size_t lo = c * ELEM_CHUNK, m = n - lo < ELEM_CHUNK ? n - lo : ELEM_CHUNK;
        gelu_forward_range(out + lo, inp + lo, m);
    }
}

static void gelu_backward(ba_real *dinp, const ba_real *inp, const ba_real *dout, size_t n,
                          int acc)
{
    size_t nc = (n + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static) if (10.0 * n > BA_PAR_MIN_WORK)
    for (size_t c = 0; c < nc; c++) {
        size_t lo = c * ELEM_CHUNK, m = n - lo < ELEM_CHUNK ? n - lo : ELEM_CHUNK;
        gelu_backward_range(dinp + lo, inp + lo, dout + lo, m, acc);
    }
}

void ba_gelu_backward(ba_real *dinp, const ba_real *inp, const ba_real *dout, size_t n)
{
    gelu_backward(dinp, inp, dout, n, 1);
}

void ba_gelu_backward_set(ba_real *dinp, const ba_real *inp, const ba_real *dout, size_t n)
{
    gelu_backward(dinp, inp, dout, n, 0);
}

BA_CLONES static void residual_range(ba_real *out, const ba_real *a, const ba_real *b, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void ba_residual_forward(ba_real *out, const ba_real *a, const ba_real *b, size_t n)
{
    size_t nc = (n + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static) if (n > BA_PAR_MIN_WORK)
    for (size_t c = 0; c < nc; c++) {
        size_t lo = c * ELEM_CHUNK, m = n - lo < ELEM_CHUNK ? n - lo : ELEM_CHUNK;
        residual_range(out + lo, a + lo, b + lo, m);
    }
}

/* The attention core is in src/attention_core.h, compiled in both
 * precisions (src/attention_f32.c, src/attention_f64.c). */

/* ------------------------------------------------------ cross-entropy */

/* p = softmax(x) over n entries whose maximum is mx; returns the sum of
 * exp(x - mx) (each <= 1, vectorised: src/vmath.h). */
BA_CLONES static double softmax_row(const ba_real *x, ba_real *p, int n, double mx)
{
    double z = 0.0;
#pragma omp simd reduction(+ : z)
    for (int c = 0; c < n; c++)
        z += ba_exp_nonpos1(x[c] - mx);
    double iz = 1.0 / z;
#pragma omp simd
    for (int c = 0; c < n; c++)
        p[c] = (ba_real)(ba_exp_nonpos1(x[c] - mx) * iz);
    return z;
}

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
        z = softmax_row(x, p, nv, mx);
        double lse = mx + log(z);
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
