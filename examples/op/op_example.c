/* The attention op on random tensors: a float32 forward and backward with
 * the defaults (boltzmann attention, exact engine), a checksum of every
 * output, and a float64 finite-difference check of two gradient entries.
 * docs/c-api.md walks through it; tests/install.sh builds it against an
 * installed copy with the two commands below and compares its output with
 * the in-tree build's.
 *
 * build: cc -O2 -o op_example op_example.c $(pkg-config --cflags --libs boltzattn)
 * cmake: cmake -S . -B build -DCMAKE_PREFIX_PATH=PREFIX && cmake --build build
 */
#include <boltzattn.h>

#include <math.h> /* NAN; the program needs no libm */
#include <stdio.h>
#include <stdlib.h>

/* Normal values in float and the same values in double. */
static void fill(ba_rng *rng, size_t n, double sd, float *f, double *x)
{
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(sd * ba_rng_normal(rng));
        x[i] = f[i];
    }
}

static double sum_f(const float *a, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i];
    return s;
}

/* L = sum(out * dout) in float64 at the current q, k, v, J. */
static double loss64(ba_attn_op_ctx *ctx, const ba_attn_op_desc *desc, const double *q,
                     const double *k, const double *v, const double *J, const double *dout,
                     double *out, size_t n, char *err)
{
    if (ba_attn_op_forward_f64(ctx, desc, q, k, v, J, out, err))
        return NAN;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += out[i] * dout[i];
    return s;
}

int main(void)
{
    char err[BA_ERR_LEN];
    const int B = 2, H = 2, T = 8, d = 4;
    ba_attn_op_desc desc = ba_attn_op_default(B, H, T, d); // boltzmann, causal, auto engine
    size_t n = (size_t)B * H * T * d;                      // [B,H,T,d]
    size_t nJ = ba_attn_op_j_size(&desc);                  // [H,T,T] absolute couplings
    float *f = malloc(sizeof(float) * (9 * n + 2 * nJ));
    double *x = malloc(sizeof(double) * (9 * n + 2 * nJ));
    if (!f || !x)
        return 1;
    float *q = f, *k = q + n, *v = k + n, *dout = v + n, *out = dout + n;
    float *dq = out + n, *dk = dq + n, *dv = dk + n, *J = dv + n, *dJ = J + nJ;
    double *q64 = x, *k64 = q64 + n, *v64 = k64 + n, *dout64 = v64 + n, *out64 = dout64 + n;
    double *dq64 = out64 + n, *dk64 = dq64 + n, *dv64 = dk64 + n, *J64 = dv64 + n;
    double *dJ64 = J64 + nJ;

    ba_rng rng;
    ba_rng_seed(&rng, 42);
    fill(&rng, n, 1.0, q, q64), fill(&rng, n, 1.0, k, k64), fill(&rng, n, 1.0, v, v64);
    fill(&rng, n, 1.0, dout, dout64);
    fill(&rng, nJ, 0.5, J, J64); // only the upper triangle (j < k) is read

    ba_attn_op_ctx *ctx;
    if (ba_attn_op_ctx_new(&ctx, err) ||
        ba_attn_op_forward_f32(ctx, &desc, q, k, v, J, out, err) ||
        ba_attn_op_backward_f32(ctx, q, k, v, J, dout, dq, dk, dv, dJ, err)) {
        fprintf(stderr, "op_example: %s\n", err);
        return 1;
    }
    printf("op: boltzmann attention, B=%d H=%d T=%d d=%d, engine %s\n", B, H, T, d,
           ba_engine_name(desc.engine));
    printf("checksum: out %.9g dq %.9g dk %.9g dv %.9g dJ %.9g\n", sum_f(out, n), sum_f(dq, n),
           sum_f(dk, n), sum_f(dv, n), sum_f(dJ, nJ));

    /* float64: the analytic gradient of L = sum(out * dout) against central
     * differences, for one entry of q and one coupling */
    if (ba_attn_op_forward_f64(ctx, &desc, q64, k64, v64, J64, out64, err) ||
        ba_attn_op_backward_f64(ctx, q64, k64, v64, J64, dout64, dq64, dk64, dv64, dJ64, err)) {
        fprintf(stderr, "op_example: %s\n", err);
        return 1;
    }
    struct {
        const char *name;
        double *x, grad;
    } probe[2] = {{"dq[5]", q64 + 5, dq64[5]}, {"dJ[0][2][5]", J64 + 2 * T + 5, dJ64[2 * T + 5]}};
    int bad = 0;
    for (int p = 0; p < 2; p++) {
        double x0 = *probe[p].x, eps = 1e-5;
        *probe[p].x = x0 + eps;
        double lp = loss64(ctx, &desc, q64, k64, v64, J64, dout64, out64, n, err);
        *probe[p].x = x0 - eps;
        double lm = loss64(ctx, &desc, q64, k64, v64, J64, dout64, out64, n, err);
        *probe[p].x = x0;
        double fd = (lp - lm) / (2 * eps);
        double diff = fd - probe[p].grad, size = fd < 0 ? -fd : fd;
        double rel = (diff < 0 ? -diff : diff) / (size > 1e-8 ? size : 1e-8);
        printf("finite difference %s: analytic %.6f numeric %.6f %s\n", probe[p].name,
               probe[p].grad, fd, rel < 1e-6 ? "ok" : "MISMATCH");
        bad |= !(rel < 1e-6);
    }
    ba_attn_op_ctx_free(ctx);
    free(f), free(x);
    return bad;
}
