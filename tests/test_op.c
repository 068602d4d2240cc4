/* The public attention op (include/boltzattn_op.h):
 * - it is the model's attention: the same inputs through the layer
 *   (ba_attention_forward/backward on packed qkv) and through the op give
 *   the same outputs and gradients, bit for bit, in float and in double;
 * - float64 gradients against central finite differences for every engine
 *   family at small T (reference, fast, band, mf, tap, bp, hybrid),
 *   absolute and relative couplings, a band, the log-n bias, a scale;
 * - float32 against float64 within float rounding;
 * - contexts: a second backward, the forward kept across a failed call,
 *   two threads on two contexts;
 * - every bad argument: BA_ERR_ARG (or BA_ERR_LIMIT) naming it.
 * Built against the float library: ba_real is float here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "grad_fd.h" /* FD_EPS, REL_TOL, rel_err, TIGHT: the f64 gradient checks' */

/* One configuration of the op. */
typedef struct {
    const char *name;
    ba_attn attn;
    ba_engine engine;
    ba_couplings couplings;
    int D, band, window;
    ba_field_bias bias;
    int alibi;
} variant;

static const variant VARIANTS[] = {
    {"softmax", BA_ATTN_SOFTMAX, BA_ENGINE_AUTO, 0, 0, 0, 0, 0, 0},
    {"sigmoid log-n", BA_ATTN_SIGMOID, BA_ENGINE_AUTO, 0, 0, 0, 0, BA_FIELD_BIAS_LOG_N, 0},
    {"boltzmann reference", BA_ATTN_BOLTZMANN, BA_ENGINE_REFERENCE, 0, 0, 0, 0, 0, 0},
    {"boltzmann fast", BA_ATTN_BOLTZMANN, BA_ENGINE_FAST, 0, 0, 0, 0, 0, 0},
    {"boltzmann auto log-n", BA_ATTN_BOLTZMANN, BA_ENGINE_AUTO, 0, 0, 0, 0, BA_FIELD_BIAS_LOG_N, 0},
    {"boltzmann band W=2", BA_ATTN_BOLTZMANN, BA_ENGINE_BAND, 0, 0, 2, 0, 0, 0},
    {"boltzmann band full", BA_ATTN_BOLTZMANN, BA_ENGINE_BAND, 0, 0, 0, 0, 0, 0},
    {"boltzmann relative D=3", BA_ATTN_BOLTZMANN, BA_ENGINE_FAST, BA_COUPLINGS_RELATIVE, 3, 0, 0,
     0, 0},
    {"boltzmann relative band W=2 D=2", BA_ATTN_BOLTZMANN, BA_ENGINE_AUTO, BA_COUPLINGS_RELATIVE,
     2, 2, 0, BA_FIELD_BIAS_LOG_N, 0},
    {"boltzmann mf", BA_ATTN_BOLTZMANN, BA_ENGINE_MF, 0, 0, 0, 0, 0, 0},
    {"boltzmann mf relative", BA_ATTN_BOLTZMANN, BA_ENGINE_MF, BA_COUPLINGS_RELATIVE, 4, 0, 0, 0, 0},
    {"boltzmann tap", BA_ATTN_BOLTZMANN, BA_ENGINE_TAP, 0, 0, 0, 0, 0, 0},
    {"boltzmann bp", BA_ATTN_BOLTZMANN, BA_ENGINE_BP, 0, 0, 0, 0, 0, 0},
    {"boltzmann hybrid W=2", BA_ATTN_BOLTZMANN, BA_ENGINE_HYBRID, 0, 0, 0, 2, 0, 0},
    {"coupling log-n", BA_ATTN_COUPLING, BA_ENGINE_FAST, 0, 0, 0, 0, BA_FIELD_BIAS_LOG_N, 0},
    {"softmax alibi", BA_ATTN_SOFTMAX, BA_ENGINE_AUTO, 0, 0, 0, 0, 0, 1},
    {"sigmoid log-n alibi", BA_ATTN_SIGMOID, BA_ENGINE_AUTO, 0, 0, 0, 0, BA_FIELD_BIAS_LOG_N, 1},
    {"boltzmann fast alibi", BA_ATTN_BOLTZMANN, BA_ENGINE_FAST, 0, 0, 0, 0, 0, 1},
    {"boltzmann relative band W=2 D=2 alibi", BA_ATTN_BOLTZMANN, BA_ENGINE_AUTO,
     BA_COUPLINGS_RELATIVE, 2, 2, 0, 0, 1},
    {"boltzmann hybrid W=2 alibi", BA_ATTN_BOLTZMANN, BA_ENGINE_HYBRID, 0, 0, 0, 2, 0, 1},
    {"coupling alibi", BA_ATTN_COUPLING, BA_ENGINE_FAST, 0, 0, 0, 0, 0, 1},
};
#define NVARIANTS (int)(sizeof VARIANTS / sizeof VARIANTS[0])

static ba_attn_op_desc desc_of(const variant *v, int B, int H, int T, int d)
{
    ba_attn_op_desc o = ba_attn_op_default(B, H, T, d);
    o.attn = v->attn, o.engine = v->engine, o.couplings = v->couplings;
    o.D = v->D, o.band = v->band, o.window = v->window, o.field_bias = v->bias;
    o.alibi = v->alibi;
    if (ba_engine_is_approx(v->engine))
        o.approx = TIGHT;
    return o;
}

/* Random inputs of an op: q, k, v, dout [B,H,T,d] and J, in double. */
typedef struct {
    ba_attn_op_desc o;
    size_t n, nJ;
    double *q, *k, *v, *dout, *J, *out;
} problem;

static problem problem_new(const variant *v, int B, int H, int T, int d, uint64_t seed)
{
    problem p;
    p.o = desc_of(v, B, H, T, d);
    assert_int_equal(ba_attn_op_check(&p.o, NULL), BA_OK);
    p.n = (size_t)B * H * T * d, p.nJ = ba_attn_op_j_size(&p.o);
    double *all = calloc(5 * p.n + p.nJ + 1, sizeof(double));
    assert_non_null(all);
    p.q = all, p.k = p.q + p.n, p.v = p.k + p.n, p.dout = p.v + p.n, p.out = p.dout + p.n;
    p.J = p.out + p.n;
    ba_rng r;
    ba_rng_seed(&r, seed);
    for (size_t i = 0; i < 4 * p.n; i++)
        all[i] = ba_rng_normal(&r);
    /* weak couplings for the mean-field family, as in test_grad_f64.c */
    double js = ba_engine_is_approx(v->engine) ? 0.3 : 0.7;
    for (size_t i = 0; i < p.nJ; i++)
        p.J[i] = js * ba_rng_normal(&r);
    return p;
}

static void problem_free(problem *p) { free(p->q); }

/* ------------------------------------------- the op is the model's layer */

/* [B,H,T,d] -> packed (B,T,3C) slot `which` (0 q, 1 k, 2 v), or (B,T,C)
 * with stride3 0. */
static void pack(const ba_attn_op_desc *o, const double *x, double *qkv, int which, int stride3)
{
    int C = o->H * o->d, w = stride3 ? 3 * C : C;
    for (int b = 0; b < o->B; b++)
        for (int h = 0; h < o->H; h++)
            for (int t = 0; t < o->T; t++)
                for (int c = 0; c < o->d; c++)
                    qkv[((size_t)b * o->T + t) * w + (size_t)which * C + (size_t)h * o->d + c] =
                        x[(((size_t)b * o->H + h) * o->T + t) * o->d + c];
}

static void unpack(const ba_attn_op_desc *o, const double *qkv, double *x, int which, int stride3)
{
    int C = o->H * o->d, w = stride3 ? 3 * C : C;
    for (int b = 0; b < o->B; b++)
        for (int h = 0; h < o->H; h++)
            for (int t = 0; t < o->T; t++)
                for (int c = 0; c < o->d; c++)
                    x[(((size_t)b * o->H + h) * o->T + t) * o->d + c] =
                        qkv[((size_t)b * o->T + t) * w + (size_t)which * C + (size_t)h * o->d + c];
}

/* The model's description of the same attention (src/model/model.c, attn_shape). */
static ba_attn_shape model_shape(const ba_attn_op_desc *o)
{
    ba_attn_shape s;
    memset(&s, 0, sizeof s);
    ba_config c = ba_config_default(o->attn, o->T);
    c.engine = o->engine, c.band = o->band;
    s.attn = o->attn, s.engine = ba_config_engine(&c);
    s.B = o->B, s.T = o->T, s.C = o->H * o->d, s.H = o->H, s.Tmax = o->T;
    s.couplings = o->couplings, s.band = o->band, s.D = o->D, s.field_bias = o->field_bias;
    s.approx = o->approx, s.window = o->window, s.alibi = o->alibi;
    return s;
}

static void expect_same(const char *what, const variant *v, const double *a, const double *b,
                        size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(a[i] == b[i]) && !(isnan(a[i]) && isnan(b[i])))
            fail_msg("%s, %s: entry %zu differs: layer %.17g, op %.17g", v->name, what, i, a[i],
                     b[i]);
}

/* The model's layer in one precision, forward then backward: the tiled
 * kernels on packed qkv for softmax and sigmoid (lse in pre), the dense
 * core otherwise (src/model/model_attn.c chooses the same way). */
#define LAYER_PASS(P, R)                                                                       \
    static void layer_##P(const ba_attn_shape *s, R *out, R *att, R *pre, const R *qkv,       \
                          const R *J, R *dqkv, R *dJ, const R *dout)                          \
    {                                                                                          \
        char err[BA_ERR_LEN];                                                                  \
        if (!ba_attn_tiled_supports(s)) {                                                      \
            assert_int_equal(ba_attention_forward_##P(s, out, att, pre, qkv, J, err), BA_OK);  \
            assert_int_equal(ba_attention_backward_##P(s, dqkv, dJ, dout, qkv, J, att, pre,    \
                                                       err),                                   \
                             BA_OK);                                                           \
            return;                                                                            \
        }                                                                                      \
        ba_attn_io_##P io = ba_attn_packed_io_##P(s, qkv);                                     \
        io.out = out;                                                                          \
        if (ba_attn_tiled_forward_##P(s, &io, pre, err))                                       \
            fail_msg("tiled forward: %s", err);                                                \
        size_t C = (size_t)s->C;                                                               \
        io.dout = dout, io.dq = dqkv, io.dk = dqkv + C, io.dv = dqkv + 2 * C;                  \
        assert_int_equal(ba_attn_tiled_backward_##P(s, &io, pre, err), BA_OK);                 \
    }
LAYER_PASS(f64, double)
LAYER_PASS(f32, float)

/* Through the layer and through the op, in precision prec (32 or 64):
 * outputs and gradients compared bit for bit (as doubles). */
static void layer_vs_op(const variant *v, int prec)
{
    int B = 2, H = 2, T = 6, d = 3;
    problem p = problem_new(v, B, H, T, d, 100 + (uint64_t)(v - VARIANTS));
    const ba_attn_op_desc *o = &p.o;
    size_t n = p.n, nJ = p.nJ, C = (size_t)H * d, N = (size_t)B * T;
    size_t natt = (size_t)B * H * T * T;
    /* the layer's arrays (double; copied to float for prec 32) */
    double *qkv = calloc(N * 3 * C, sizeof(double)), *dqkv = calloc(N * 3 * C, sizeof(double));
    double *lout = calloc(N * C, sizeof(double)), *ldout = calloc(N * C, sizeof(double));
    double *ldJ = calloc(nJ + 1, sizeof(double)), *res = calloc(8 * n + 2 * nJ + 2, sizeof(double));
    double *att = calloc(natt, sizeof(double)), *pre = calloc(natt, sizeof(double));
    assert_true(qkv && dqkv && lout && ldout && ldJ && res && att && pre);
    if (prec == 32) /* inputs representable in float, so both paths see the same values */
        for (double *x = p.q; x < p.J + nJ; x++)
            *x = (float)*x;
    pack(o, p.q, qkv, 0, 1), pack(o, p.k, qkv, 1, 1), pack(o, p.v, qkv, 2, 1);
    pack(o, p.dout, ldout, 0, 0);
    /* res: layer out, dq, dk, dv, dJ | op out, dq, dk, dv, dJ, all [B,H,T,d] */
    double *L = res, *P = res + 4 * n + nJ + 1;
    char err[BA_ERR_LEN];
    ba_attn_shape s = model_shape(o);
    ba_attn_op_ctx *ctx;
    assert_int_equal(ba_attn_op_ctx_new(&ctx, err), BA_OK);
    if (prec == 64) {
        layer_f64(&s, lout, att, pre, qkv, p.J, dqkv, ldJ, ldout);
        int rc = ba_attn_op_forward_f64(ctx, o, p.q, p.k, p.v, p.J, P, err);
        if (rc)
            fail_msg("%s: %s", v->name, err);
        rc = ba_attn_op_backward_f64(ctx, p.q, p.k, p.v, p.J, p.dout, P + n, P + 2 * n, P + 3 * n,
                                     P + 4 * n, err);
        if (rc)
            fail_msg("%s: %s", v->name, err);
    } else {
        size_t tot = N * 3 * C * 2 + N * C * 2 + nJ * 2 + natt * 2 + 9 * n + 2 * nJ + 2;
        float *f = calloc(tot, sizeof(float));
        assert_non_null(f);
        float *fqkv = f, *fdqkv = fqkv + N * 3 * C, *fout = fdqkv + N * 3 * C;
        float *fdout = fout + N * C, *fJ = fdout + N * C, *fdJ = fJ + nJ, *fatt = fdJ + nJ;
        float *fpre = fatt + natt, *fx = fpre + natt; /* op: q k v dout out dq dk dv | dJ */
        for (size_t i = 0; i < N * 3 * C; i++)
            fqkv[i] = (float)qkv[i];
        for (size_t i = 0; i < N * C; i++)
            fdout[i] = (float)ldout[i];
        for (size_t i = 0; i < nJ; i++)
            fJ[i] = (float)p.J[i];
        for (size_t i = 0; i < 4 * n; i++)
            fx[i] = (float)p.q[i];
        layer_f32(&s, fout, fatt, fpre, fqkv, fJ, fdqkv, fdJ, fdout);
        float *fo = fx + 4 * n;
        int rc = ba_attn_op_forward_f32(ctx, o, fx, fx + n, fx + 2 * n, fJ, fo, err);
        if (rc)
            fail_msg("%s: %s", v->name, err);
        rc = ba_attn_op_backward_f32(ctx, fx, fx + n, fx + 2 * n, fJ, fx + 3 * n, fo + n,
                                     fo + 2 * n, fo + 3 * n, fo + 4 * n, err);
        if (rc)
            fail_msg("%s: %s", v->name, err);
        for (size_t i = 0; i < N * 3 * C; i++)
            dqkv[i] = fdqkv[i];
        for (size_t i = 0; i < N * C; i++)
            lout[i] = fout[i];
        for (size_t i = 0; i < nJ; i++)
            ldJ[i] = fdJ[i], P[4 * n + i] = fo[4 * n + i];
        for (size_t i = 0; i < 4 * n; i++)
            P[i] = fo[i];
        free(f);
    }
    unpack(o, lout, L, 0, 0);
    unpack(o, dqkv, L + n, 0, 1), unpack(o, dqkv, L + 2 * n, 1, 1), unpack(o, dqkv, L + 3 * n, 2, 1);
    expect_same("out", v, L, P, n);
    expect_same("dq", v, L + n, P + n, n);
    expect_same("dk", v, L + 2 * n, P + 2 * n, n);
    expect_same("dv", v, L + 3 * n, P + 3 * n, n);
    expect_same("dJ", v, ldJ, P + 4 * n, nJ);
    ba_attn_op_ctx_free(ctx);
    free(qkv), free(dqkv), free(lout), free(ldout), free(ldJ), free(res), free(att), free(pre);
    problem_free(&p);
}

static void test_layer_vs_op(void **state)
{
    (void)state;
    for (int i = 0; i < NVARIANTS; i++) {
        layer_vs_op(&VARIANTS[i], 64);
        layer_vs_op(&VARIANTS[i], 32);
    }
}

/* ------------------------------------------------ finite differences */

static double op_loss(problem *p, ba_attn_op_ctx *ctx)
{
    char err[BA_ERR_LEN];
    if (ba_attn_op_forward_f64(ctx, &p->o, p->q, p->k, p->v, p->J, p->out, err))
        fail_msg("forward: %s", err);
    double s = 0.0;
    for (size_t i = 0; i < p->n; i++)
        s += p->out[i] * p->dout[i];
    return s;
}

static void fd_check(const variant *v, int B, int H, int T, int d, double scale)
{
    problem p = problem_new(v, B, H, T, d, 7 + (uint64_t)(v - VARIANTS));
    if (scale != 0)
        p.o.scale = scale;
    size_t n = p.n, nJ = p.nJ;
    double *g = malloc(sizeof(double) * (3 * n + nJ + 1));
    double *num = malloc(sizeof(double) * (3 * n + nJ + 1));
    assert_true(g && num);
    char err[BA_ERR_LEN];
    ba_attn_op_ctx *ctx;
    assert_int_equal(ba_attn_op_ctx_new(&ctx, err), BA_OK);
    op_loss(&p, ctx);
    int rc = ba_attn_op_backward_f64(ctx, p.q, p.k, p.v, p.J, p.dout, g, g + n, g + 2 * n,
                                     g + 3 * n, err);
    if (rc)
        fail_msg("%s: %s", v->name, err);
    /* the inputs: q, k, v (contiguous) then J */
    double *xs[2] = {p.q, p.J};
    size_t lens[2] = {3 * n, nJ}, off[2] = {0, 3 * n};
    for (int a = 0; a < 2; a++)
        for (size_t i = 0; i < lens[a]; i++) {
            double keep = xs[a][i];
            xs[a][i] = keep + FD_EPS;
            double fp = op_loss(&p, ctx);
            xs[a][i] = keep - FD_EPS;
            double fm = op_loss(&p, ctx);
            xs[a][i] = keep;
            num[off[a] + i] = (fp - fm) / (2 * FD_EPS);
        }
    const char *names[4] = {"dq", "dk", "dv", "dJ"};
    for (int t = 0; t < 4; t++) {
        size_t len = t < 3 ? n : nJ;
        double e = rel_err(g + t * n, num + t * n, len);
        if (!(e < REL_TOL))
            fail_msg("%s (B=%d H=%d T=%d d=%d): %s relative error %.3e exceeds %.0e", v->name, B,
                     H, T, d, names[t], e, REL_TOL);
    }
    if (v->attn == BA_ATTN_BOLTZMANN) /* the couplings matter: a gradient that is not 0 */
        assert_true(rel_err(g + 3 * n, num + 3 * n, nJ) < REL_TOL && nJ > 0);
    ba_attn_op_ctx_free(ctx);
    free(g), free(num);
    problem_free(&p);
}

static void test_finite_differences(void **state)
{
    (void)state;
    for (int i = 0; i < NVARIANTS; i++)
        fd_check(&VARIANTS[i], 2, 2, 5, 3, 0);
    /* other shapes and an explicit scale */
    fd_check(&VARIANTS[3], 1, 3, 7, 2, 0.8);
    fd_check(&VARIANTS[5], 3, 1, 9, 4, 0);
    fd_check(&VARIANTS[4], 1, 1, 1, 1, 0);
}

/* ---------------------------------------------- float32 against float64 */

static void test_f32_vs_f64(void **state)
{
    (void)state;
    int B = 2, H = 3, T = 8, d = 5;
    for (int vi = 0; vi < NVARIANTS; vi++) {
        const variant *v = &VARIANTS[vi];
        problem p = problem_new(v, B, H, T, d, 55);
        size_t n = p.n, nJ = p.nJ, tot = 5 * n + nJ + 1;
        double *g = malloc(sizeof(double) * tot); /* out dq dk dv dJ in double */
        float *f = malloc(sizeof(float) * (2 * tot + 4 * n));
        assert_true(g && f);
        float *fin = f + tot; /* q k v dout J */
        for (size_t i = 0; i < 4 * n; i++)
            fin[i] = (float)p.q[i];
        for (size_t i = 0; i < nJ; i++)
            fin[4 * n + i] = (float)p.J[i];
        for (size_t i = 0; i < 4 * n; i++) /* the double run sees the float values */
            p.q[i] = fin[i];
        for (size_t i = 0; i < nJ; i++)
            p.J[i] = fin[4 * n + i];
        char err[BA_ERR_LEN];
        ba_attn_op_ctx *c64, *c32;
        assert_int_equal(ba_attn_op_ctx_new(&c64, err), BA_OK);
        assert_int_equal(ba_attn_op_ctx_new(&c32, err), BA_OK);
        assert_int_equal(ba_attn_op_forward_f64(c64, &p.o, p.q, p.k, p.v, p.J, g, err), BA_OK);
        assert_int_equal(ba_attn_op_backward_f64(c64, p.q, p.k, p.v, p.J, p.dout, g + n, g + 2 * n,
                                                 g + 3 * n, g + 4 * n, err),
                         BA_OK);
        assert_int_equal(ba_attn_op_forward_f32(c32, &p.o, fin, fin + n, fin + 2 * n,
                                                fin + 4 * n, f, err),
                         BA_OK);
        assert_int_equal(ba_attn_op_backward_f32(c32, fin, fin + n, fin + 2 * n, fin + 4 * n,
                                                 fin + 3 * n, f + n, f + 2 * n, f + 3 * n,
                                                 f + 4 * n, err),
                         BA_OK);
        /* per tensor: ||f32 - f64|| / ||f64|| within a few hundred float ulps */
        const char *names[5] = {"out", "dq", "dk", "dv", "dJ"};
        for (int t = 0; t < 5; t++) {
            size_t len = t < 4 ? n : nJ;
            double dd = 0, nn = 0;
            for (size_t i = 0; i < len; i++) {
                double a = f[t * n + i], b = g[t * n + i];
                dd += (a - b) * (a - b), nn += b * b;
            }
            if (len && !(sqrt(dd) <= 1e-5 * sqrt(nn) + 1e-9))
                fail_msg("%s: float32 %s differs from float64 by %.3e relative", v->name,
                         names[t], sqrt(dd) / sqrt(nn));
        }
        ba_attn_op_ctx_free(c64), ba_attn_op_ctx_free(c32);
        free(g), free(f);
        problem_free(&p);
    }
}

/* ---------------------------------------------------------- contexts */

typedef struct {
    problem *p;
    double *g; /* out dq dk dv dJ */
    int rc;
} run_job;

static void *run_op(void *arg)
{
    run_job *j = arg;
    problem *p = j->p;
    size_t n = p->n;
    char err[BA_ERR_LEN];
    ba_attn_op_ctx *ctx;
    j->rc = ba_attn_op_ctx_new(&ctx, err);
    for (int rep = 0; rep < 3 && !j->rc; rep++) {
        j->rc = ba_attn_op_forward_f64(ctx, &p->o, p->q, p->k, p->v, p->J, j->g, err);
        if (!j->rc)
            j->rc = ba_attn_op_backward_f64(ctx, p->q, p->k, p->v, p->J, p->dout, j->g + n,
                                            j->g + 2 * n, j->g + 3 * n, j->g + 4 * n, err);
    }
    ba_attn_op_ctx_free(ctx);
    return NULL;
}

static void test_contexts(void **state)
{
    (void)state;
    const variant *v = &VARIANTS[3]; /* fast: the engine context keeps kernels */
    problem p = problem_new(v, 2, 2, 10, 4, 9), p2 = problem_new(&VARIANTS[9], 3, 1, 12, 2, 10);
    size_t n = p.n, tot = 3 * n + p.nJ; /* dq dk dv dJ */
    double *a = malloc(sizeof(double) * (5 * n + p.nJ)), *b = malloc(sizeof(double) * (5 * n + p.nJ));
    assert_true(a && b);
    char err[BA_ERR_LEN];
    ba_attn_op_ctx *ctx;
    assert_int_equal(ba_attn_op_ctx_new(&ctx, err), BA_OK);
    assert_int_equal(ba_attn_op_forward_f64(ctx, &p.o, p.q, p.k, p.v, p.J, a, err), BA_OK);
    /* two backwards of one forward: the same gradients */
    assert_int_equal(ba_attn_op_backward_f64(ctx, p.q, p.k, p.v, p.J, p.dout, a + n, a + 2 * n,
                                             a + 3 * n, a + 4 * n, err),
                     BA_OK);
    assert_int_equal(ba_attn_op_backward_f64(ctx, p.q, p.k, p.v, p.J, p.dout, b + n, b + 2 * n,
                                             b + 3 * n, b + 4 * n, err),
                     BA_OK);
    assert_memory_equal(a + n, b + n, sizeof(double) * tot);
    /* the gradients are overwritten, not accumulated; dJ may be NULL */
    assert_int_equal(ba_attn_op_backward_f64(ctx, p.q, p.k, p.v, p.J, p.dout, b + n, b + 2 * n,
                                             b + 3 * n, NULL, err),
                     BA_OK);
    assert_memory_equal(a + n, b + n, sizeof(double) * 3 * n);
    /* a failed forward leaves no forward behind */
    ba_attn_op_desc bad = p.o;
    bad.scale = NAN;
    assert_int_equal(ba_attn_op_forward_f64(ctx, &bad, p.q, p.k, p.v, p.J, b, err), BA_ERR_ARG);
    assert_int_equal(ba_attn_op_backward_f64(ctx, p.q, p.k, p.v, p.J, p.dout, b + n, b + 2 * n,
                                             b + 3 * n, b + 4 * n, err),
                     BA_ERR_ARG);
    assert_non_null(strstr(err, "no forward"));
    /* the approximate engines' counts */
    ba_attn_op_desc mf = p.o;
    mf.engine = BA_ENGINE_MF;
    assert_int_equal(ba_attn_op_forward_f64(ctx, &mf, p.q, p.k, p.v, p.J, b, err), BA_OK);
    ba_approx_stats st = ba_attn_op_approx_stats_take(ctx);
    assert_true(st.queries > 0 && st.sweeps >= st.queries);
    st = ba_attn_op_approx_stats_take(ctx);
    assert_true(st.queries == 0);
    ba_attn_op_ctx_free(ctx);
    ba_attn_op_ctx_free(NULL);

    /* two threads, two contexts, two problems at once: what each gets alone */
    double *s1 = calloc(5 * n + p.nJ, sizeof(double));
    double *s2 = calloc(5 * p2.n + p2.nJ, sizeof(double));
    double *t1 = calloc(5 * n + p.nJ, sizeof(double));
    double *t2 = calloc(5 * p2.n + p2.nJ, sizeof(double));
    assert_true(s1 && s2 && t1 && t2);
    run_job j1 = {&p, s1, 0}, j2 = {&p2, s2, 0};
    run_op(&j1), run_op(&j2);
    assert_int_equal(j1.rc, BA_OK);
    assert_int_equal(j2.rc, BA_OK);
    run_job k1 = {&p, t1, 0}, k2 = {&p2, t2, 0};
    pthread_t th1, th2;
    assert_int_equal(pthread_create(&th1, NULL, run_op, &k1), 0);
    assert_int_equal(pthread_create(&th2, NULL, run_op, &k2), 0);
    pthread_join(th1, NULL), pthread_join(th2, NULL);
    assert_int_equal(k1.rc, BA_OK);
    assert_int_equal(k2.rc, BA_OK);
    assert_memory_equal(s1, t1, sizeof(double) * (5 * n + p.nJ));
    assert_memory_equal(s2, t2, sizeof(double) * (5 * p2.n + p2.nJ));
    free(s1), free(s2), free(t1), free(t2), free(a), free(b);
    problem_free(&p), problem_free(&p2);
}

/* ------------------------------------------------------ bad arguments */

/* rc and a message naming `name` (a substring of err). */
#define EXPECT_ERR(call, rc_want, name)                                                      \
    do {                                                                                     \
        char e_[BA_ERR_LEN] = "";                                                            \
        char *err = e_;                                                                      \
        int rc_ = (call);                                                                    \
        if (rc_ != (rc_want) || !strstr(e_, (name)))                                         \
            fail_msg("%s: rc %d (want %d), message \"%s\" should name \"%s\"", #call, rc_,    \
                     (int)(rc_want), e_, (name));                                            \
    } while (0)

static void test_bad_desc(void **state)
{
    (void)state;
    ba_attn_op_desc o0 = ba_attn_op_default(2, 2, 6, 4), o;
    EXPECT_ERR(ba_attn_op_check(NULL, err), BA_ERR_ARG, "desc");
    o = o0, o.B = 0;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "B = 0");
    o = o0, o.H = -1;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "H = -1");
    o = o0, o.T = 0;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "T = 0");
    o = o0, o.d = 0;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "d = 0");
    o = o0, o.T = BA_MAX_BLOCK + 1;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "T = 4097");
    o = o0, o.B = 1 << 30, o.H = 1 << 20, o.d = 1, o.T = 4096;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "overflow");
    o = o0, o.H = 1 << 16, o.d = 1 << 16;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "H = 65536 times d = 65536");
    o = o0, o.alibi = 2;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "alibi = 2");
    o = o0, o.causal = 0;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "causal = 0");
    o = o0, o.scale = NAN;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "scale");
    o = o0, o.scale = INFINITY;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "scale");
    o = o0, o.attn = (ba_attn)9;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "attn 9");
    o = o0, o.engine = (ba_engine)42;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "engine 42");
    o = o0, o.couplings = (ba_couplings)5;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "couplings 5");
    o = o0, o.field_bias = (ba_field_bias)3;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "field_bias 3");
    o = o0, o.D = 2;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "D = 2");
    o = o0, o.couplings = BA_COUPLINGS_RELATIVE;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "D = 0");
    o = o0, o.band = -1;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "band W = -1");
    o = o0, o.band = 6;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "band W = 6");
    o = ba_attn_op_default(1, 1, 40, 2), o.band = 17;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_LIMIT, "band W = 17");
    o = o0, o.attn = BA_ATTN_SOFTMAX, o.band = 2;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "band");
    o = o0, o.attn = BA_ATTN_SOFTMAX, o.field_bias = BA_FIELD_BIAS_LOG_N;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "field bias");
    o = o0, o.window = 2;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "window W = 2");
    o = o0, o.engine = BA_ENGINE_HYBRID;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "window W = 0");
    o = o0, o.engine = BA_ENGINE_MF, o.approx.damping = 0;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "damping");
    o = o0, o.engine = BA_ENGINE_BP, o.approx.max_iter = 0;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_ARG, "max_iter");
    /* T beyond the engine's limit: the command line's message (the model
     * config's check), word for word */
    ba_engine engines[3] = {BA_ENGINE_AUTO, BA_ENGINE_FAST, BA_ENGINE_REFERENCE};
    int Ts[3] = {27, 27, 21};
    for (int i = 0; i < 3; i++) {
        o = ba_attn_op_default(1, 1, Ts[i], 2), o.engine = engines[i];
        ba_config c = ba_config_default(BA_ATTN_BOLTZMANN, Ts[i]);
        c.engine = engines[i], c.vocab_size = c.out_size = 1;
        char want[BA_ERR_LEN], got[BA_ERR_LEN];
        assert_int_equal(ba_config_validate(&c, want), BA_ERR_LIMIT);
        assert_int_equal(ba_attn_op_check(&o, got), BA_ERR_LIMIT);
        assert_string_equal(got, want);
        assert_non_null(strstr(got, "T = "));
    }
    o = ba_attn_op_default(1, 1, 19, 2), o.engine = BA_ENGINE_BAND;
    EXPECT_ERR(ba_attn_op_check(&o, err), BA_ERR_LIMIT, "T = 19");
    /* what is fine */
    o = ba_attn_op_default(1, 1, 4096, 1), o.band = 8, o.couplings = BA_COUPLINGS_RELATIVE,
    o.D = 8;
    assert_int_equal(ba_attn_op_check(&o, NULL), BA_OK);
    o = o0, o.scale = -2;
    assert_int_equal(ba_attn_op_check(&o, NULL), BA_OK);
    assert_int_equal(ba_attn_op_j_size(&o0), (size_t)2 * 6 * 6);
    assert_int_equal(ba_attn_op_j_size(NULL), 0);
}

static void test_bad_pointers(void **state)
{
    (void)state;
    ba_attn_op_desc o = ba_attn_op_default(1, 2, 4, 2);
    float x[16], J[32], out[16], g[4][32];
    double xd[16], Jd[32], outd[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)(0.1 * i), xd[i] = 0.1 * i;
    for (int i = 0; i < 32; i++)
        J[i] = 0.1f, Jd[i] = 0.1;
    ba_attn_op_ctx *ctx;
    EXPECT_ERR(ba_attn_op_ctx_new(NULL, err), BA_ERR_ARG, "out");
    assert_int_equal(ba_attn_op_ctx_new(&ctx, NULL), BA_OK);
    EXPECT_ERR(ba_attn_op_forward_f32(NULL, &o, x, x, x, J, out, err), BA_ERR_ARG, "ctx");
    EXPECT_ERR(ba_attn_op_forward_f32(ctx, NULL, x, x, x, J, out, err), BA_ERR_ARG, "desc");
    EXPECT_ERR(ba_attn_op_forward_f32(ctx, &o, NULL, x, x, J, out, err), BA_ERR_ARG, "q is NULL");
    EXPECT_ERR(ba_attn_op_forward_f32(ctx, &o, x, NULL, x, J, out, err), BA_ERR_ARG, "k is NULL");
    EXPECT_ERR(ba_attn_op_forward_f32(ctx, &o, x, x, NULL, J, out, err), BA_ERR_ARG, "v is NULL");
    EXPECT_ERR(ba_attn_op_forward_f32(ctx, &o, x, x, x, NULL, out, err), BA_ERR_ARG, "J is NULL");
    EXPECT_ERR(ba_attn_op_forward_f32(ctx, &o, x, x, x, J, NULL, err), BA_ERR_ARG,
               "out is NULL");
    EXPECT_ERR(ba_attn_op_forward_f64(ctx, &o, xd, xd, NULL, Jd, outd, err), BA_ERR_ARG,
               "v is NULL");
    /* backward before any forward, and in the wrong precision */
    EXPECT_ERR(ba_attn_op_backward_f32(ctx, x, x, x, J, x, g[0], g[1], g[2], g[3], err),
               BA_ERR_ARG, "no forward");
    EXPECT_ERR(ba_attn_op_backward_f32(NULL, x, x, x, J, x, g[0], g[1], g[2], g[3], err),
               BA_ERR_ARG, "ctx");
    assert_int_equal(ba_attn_op_forward_f32(ctx, &o, x, x, x, J, out, NULL), BA_OK);
    EXPECT_ERR(ba_attn_op_backward_f64(ctx, xd, xd, xd, Jd, xd, outd, outd, outd, NULL, err),
               BA_ERR_ARG, "float32 forward");
    const char *names[7] = {"q is", "k is", "v is", "dout", "dq", "dk", "dv"};
    for (int i = 0; i < 7; i++) {
        const float *in[4] = {x, x, x, x};
        float *gr[3] = {g[0], g[1], g[2]};
        if (i < 4)
            in[i] = NULL;
        else
            gr[i - 4] = NULL;
        EXPECT_ERR(ba_attn_op_backward_f32(ctx, in[0], in[1], in[2], J, in[3], gr[0], gr[1],
                                           gr[2], g[3], err),
                   BA_ERR_ARG, names[i]);
    }
    EXPECT_ERR(ba_attn_op_backward_f32(ctx, x, x, x, NULL, x, g[0], g[1], g[2], g[3], err),
               BA_ERR_ARG, "J is NULL");
    /* softmax takes no J; non-finite inputs reach an Ising engine as
     * BA_ERR_NUMERIC */
    ba_attn_op_desc sm = o;
    sm.attn = BA_ATTN_SOFTMAX;
    assert_int_equal(ba_attn_op_forward_f32(ctx, &sm, x, x, x, NULL, out, NULL), BA_OK);
    assert_int_equal(ba_attn_op_backward_f32(ctx, x, x, x, NULL, x, g[0], g[1], g[2], NULL, NULL),
                     BA_OK);
    float xn[16];
    memcpy(xn, x, sizeof xn);
    xn[3] = NAN;
    EXPECT_ERR(ba_attn_op_forward_f32(ctx, &o, xn, x, x, J, out, err), BA_ERR_NUMERIC,
               "q[3] (b 0, h 0, t 1, c 1) = nan is not finite");
    EXPECT_ERR(ba_attn_op_forward_f32(ctx, &o, x, x, xn, J, out, err), BA_ERR_NUMERIC, "v[3]");
    xd[9] = INFINITY;
    EXPECT_ERR(ba_attn_op_forward_f64(ctx, &o, xd, xd, xd, Jd, outd, err), BA_ERR_NUMERIC,
               "q[9]");
    xd[9] = 0.9;
    /* only the couplings the op reads are checked: j < k */
    Jd[2 * 4 + 1] = NAN; /* J[0][2][1]: lower triangle, not read */
    assert_int_equal(ba_attn_op_forward_f64(ctx, &o, xd, xd, xd, Jd, outd, NULL), BA_OK);
    Jd[1 * 4 + 2] = -INFINITY;
    EXPECT_ERR(ba_attn_op_forward_f64(ctx, &o, xd, xd, xd, Jd, outd, err), BA_ERR_NUMERIC,
               "J[0][1][2] = -inf");
    /* a non-finite upstream gradient is named before the backward runs */
    Jd[1 * 4 + 2] = 0.1;
    assert_int_equal(ba_attn_op_forward_f32(ctx, &o, x, x, x, J, out, NULL), BA_OK);
    EXPECT_ERR(ba_attn_op_backward_f32(ctx, x, x, x, J, xn, g[0], g[1], g[2], g[3], err),
               BA_ERR_NUMERIC, "dout[3] (b 0, h 0, t 1, c 1) = nan is not finite");
    assert_int_equal(ba_attn_op_backward_f32(ctx, x, x, x, J, x, g[0], g[1], g[2], g[3], NULL),
                     BA_OK);
    ba_attn_op_ctx_free(ctx);
}

/* ------------------------------------------------------------ rope */

/* The public rotary kernel on [B,H,T,d]: the model's kernel on the same
 * rows (bit for bit), its inverse (sign -1) undoing it, the relative
 * property (q_m . k_n depends on m - n only: the same dot at offsets t0 and
 * t0 + 100), float against double, and its refusals naming the value. */
static void test_rope(void **state)
{
    (void)state;
    enum { B = 2, H = 3, T = 5, d = 6, N = B * H * T * d };
    double x[N], y[N], z[N], w[N];
    float xf[N];
    ba_rng r;
    ba_rng_seed(&r, 43);
    for (int i = 0; i < N; i++)
        x[i] = ba_rng_normal(&r), xf[i] = (float)x[i];
    char err[BA_ERR_LEN];
    memcpy(y, x, sizeof x);
    assert_int_equal(ba_attn_op_rope_f64(B, H, T, d, 3, 1, y, err), BA_OK);
    memcpy(z, x, sizeof x); /* the model's kernel: B*H sequences of one head */
    ba_rope_rotate_f64(B * H, T, 3, 1, d, d, 1, z);
    assert_memory_equal(y, z, sizeof y);
    assert_int_equal(ba_attn_op_rope_f32(B, H, T, d, 3, 1, xf, err), BA_OK);
    for (int i = 0; i < N; i++)
        assert_true(fabs(xf[i] - y[i]) <= 1e-6 * (1 + fabs(y[i])));
    assert_int_equal(ba_attn_op_rope_f64(B, H, T, d, 3, -1, y, err), BA_OK);
    for (int i = 0; i < N; i++)
        assert_true(fabs(y[i] - x[i]) < 1e-14);
    /* rows 0 and 4 of head 0 as q and k, turned at offsets 0 and 100 */
    memcpy(z, x, sizeof x), memcpy(w, x, sizeof x);
    ba_attn_op_rope_f64(1, 1, T, d, 0, 1, z, err);
    ba_attn_op_rope_f64(1, 1, T, d, 100, 1, w, err);
    double d0 = 0, d1 = 0, plain = 0;
    for (int c = 0; c < d; c++)
        d0 += z[4 * d + c] * z[c], d1 += w[4 * d + c] * w[c], plain += x[4 * d + c] * x[c];
    assert_true(fabs(d0 - d1) < 1e-12);
    assert_true(fabs(d0 - plain) > 1e-3); /* and the rotation did something */
    EXPECT_ERR(ba_attn_op_rope_f64(B, H, T, 5, 0, 1, y, err), BA_ERR_ARG, "d = 5");
    EXPECT_ERR(ba_attn_op_rope_f64(B, H, T, d, -1, 1, y, err), BA_ERR_ARG, "t0 = -1");
    EXPECT_ERR(ba_attn_op_rope_f64(B, H, T, d, 0, 2, y, err), BA_ERR_ARG, "sign = 2");
    EXPECT_ERR(ba_attn_op_rope_f64(0, H, T, d, 0, 1, y, err), BA_ERR_ARG, "B = 0");
    EXPECT_ERR(ba_attn_op_rope_f32(B, H, T, d, 0, 1, NULL, err), BA_ERR_ARG, "x is NULL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_vs_op),      cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_f32_vs_f64),       cmocka_unit_test(test_contexts),
        cmocka_unit_test(test_bad_desc),         cmocka_unit_test(test_bad_pointers),
        cmocka_unit_test(test_rope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
