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

/* The attention core is in src/attention_core.h, compiled in both
 * precisions (src/attention_f32.c, src/attention_f64.c). */

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
