/* Tiled attention (src/model/attention_tiled.c, issue 42) against its slow
 * twin, the dense core (ba_attn_core_forward/backward, attention_core.h):
 * - out, and dq, dk, dv accumulated onto random starting values, for
 *   softmax and sigmoid (with and without the log-n bias, with a scale),
 *   in the op's [B,H,T,d] layout and the model's packed qkv, for T = 1,
 *   T not a multiple of the tile, T a multiple, and T = 4096 at small d:
 *   within 1e-5 relative in float, 1e-12 in double (the error of a tensor
 *   is max |tiled - dense| / max |dense|, over the tensor);
 * - the weights recomputed from lse against the dense core's att;
 * - the same bits on 1 and 2 threads;
 * - boltzmann refused (BA_ERR_ARG), a field that overflows BA_ERR_NUMERIC.
 * The file is its own template for float and double (as the source). */
#ifndef TT_PASS
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

#define TOL_F32 1e-5
#define TOL_F64 1e-12

typedef struct {
    int B, H, T, d;
} tshape;

/* One comparison: which variant, bias, scale, layout, ALiBi. */
typedef struct {
    ba_attn attn;
    ba_field_bias bias;
    int scale_set, packed, alibi;
} tcase;

/* The worst relative errors of one run: out, dq, dk, dv, and the weights. */
typedef struct {
    double e[5];
} terr;

static const char *NAMES[5] = {"out", "dq", "dk", "dv", "att"};

static ba_attn_shape shape_of(const tshape *t, const tcase *c)
{
    ba_attn_shape s;
    memset(&s, 0, sizeof s);
    s.attn = c->attn, s.engine = BA_ENGINE_REFERENCE;
    s.B = t->B, s.T = t->T, s.C = t->H * t->d, s.H = t->H, s.Tmax = t->T;
    s.field_bias = c->bias;
    s.alibi = c->alibi;
    return s;
}

#define TT_PASS 1
#define R float
#define SFX f32
#include "test_attention_tiled.c"
#undef R
#undef SFX
#define R double
#define SFX f64
#include "test_attention_tiled.c"
#undef R
#undef SFX

static const tshape SHAPES[] = {
    {1, 1, 1, 8},  {2, 3, 5, 4},   {2, 2, 64, 16}, {1, 2, 65, 8},
    {2, 1, 130, 32}, {1, 1, 200, 64}, {3, 2, 127, 8},
};
#define NSHAPES (int)(sizeof SHAPES / sizeof SHAPES[0])

/* test_long takes every other case: softmax, sigmoid, softmax with ALiBi
 * (distances to 4095: a bias of up to 256 on the first head) */
static const tcase CASES[] = {
    {BA_ATTN_SOFTMAX, BA_FIELD_BIAS_NONE, 0, 0, 0},
    {BA_ATTN_SOFTMAX, BA_FIELD_BIAS_LOG_N, 1, 1, 0},
    {BA_ATTN_SIGMOID, BA_FIELD_BIAS_NONE, 0, 1, 0},
    {BA_ATTN_SIGMOID, BA_FIELD_BIAS_LOG_N, 1, 0, 0},
    {BA_ATTN_SOFTMAX, BA_FIELD_BIAS_NONE, 0, 1, 1},
    {BA_ATTN_SIGMOID, BA_FIELD_BIAS_LOG_N, 1, 0, 1},
};
#define NCASES (int)(sizeof CASES / sizeof CASES[0])

static void report(const char *prec, const tshape *t, const tcase *c, const terr *e, double tol)
{
    printf("%s %s bias=%d scale=%d packed=%d alibi=%d B=%d H=%d T=%d d=%d:", prec,
           ba_attn_name(c->attn), (int)c->bias, c->scale_set, c->packed, c->alibi, t->B, t->H,
           t->T, t->d);
    for (int q = 0; q < 5; q++)
        printf(" %s %.2e", NAMES[q], e->e[q]);
    printf("\n");
    for (int q = 0; q < 5; q++)
        assert_true(e->e[q] <= tol);
}

static void test_against_dense(void **state)
{
    (void)state;
    for (int i = 0; i < NSHAPES; i++)
        for (int c = 0; c < NCASES; c++) {
            terr e32 = run_f32(&SHAPES[i], &CASES[c], 1, 100 + i);
            report("f32", &SHAPES[i], &CASES[c], &e32, TOL_F32);
            terr e64 = run_f64(&SHAPES[i], &CASES[c], 1, 100 + i);
            report("f64", &SHAPES[i], &CASES[c], &e64, TOL_F64);
        }
}

/* T = 4096 at small d: many key tiles per row, long sums. */
static void test_long(void **state)
{
    (void)state;
    tshape t = {1, 1, 4096, 4};
    for (int c = 0; c < NCASES; c += 2) {
        terr e32 = run_f32(&t, &CASES[c], 0, 7);
        report("f32", &t, &CASES[c], &e32, TOL_F32);
        terr e64 = run_f64(&t, &CASES[c], 0, 7);
        report("f64", &t, &CASES[c], &e64, TOL_F64);
    }
}

static void test_threads(void **state)
{
    (void)state;
    tshape t = {2, 3, 300, 32};
    for (int c = 0; c < NCASES; c++) {
        assert_true(same_bits_f32(&t, &CASES[c]));
        assert_true(same_bits_f64(&t, &CASES[c]));
    }
}

static void test_refusals(void **state)
{
    (void)state;
    char err[256];
    tshape t = {1, 1, 4, 2};
    tcase c = {BA_ATTN_BOLTZMANN, BA_FIELD_BIAS_NONE, 0, 0, 0};
    ba_attn_shape s = shape_of(&t, &c);
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8], lse[4];
    ba_attn_io_f32 io;
    memset(&io, 0, sizeof io);
    io.q = io.k = io.v = x, io.out = y, io.st = io.ot = 2, io.sb = io.sh = io.ob = io.oh = 8;
    assert_int_equal(ba_attn_tiled_forward_f32(&s, &io, lse, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "boltzmann"));
    s.attn = BA_ATTN_SOFTMAX;
    assert_int_equal(ba_attn_tiled_backward_f32(&s, &io, lse, err), BA_ERR_ARG);
    x[0] = 3e38f, x[1] = 3e38f; /* q0 . k0 overflows float */
    assert_int_equal(ba_attn_tiled_forward_f32(&s, &io, lse, err), BA_ERR_NUMERIC);
    assert_non_null(strstr(err, "query 0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_dense),
        cmocka_unit_test(test_long),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* TT_PASS: the runs in one precision */

#define TT_CAT2(a, b) a##_##b
#define TT_CAT(a, b) TT_CAT2(a, b)
#define TT(name) TT_CAT(name, SFX)
#define TT_IO TT_CAT(ba_attn_io, SFX)

/* Inputs and outputs of one run: x holds q, k, v; dx dq, dk, dv (random
 * starting values); out, dout; io addresses them in the op's layout or
 * the model's packed one. */
typedef struct {
    size_t nx, no;
    R *x, *dx, *out, *dout;
    TT_IO io;
} TT(tbuf);

static TT(tbuf) TT(tbuf_new)(const tshape *t, const tcase *c, uint64_t seed)
{
    TT(tbuf) u;
    size_t C = (size_t)t->H * t->d, T = (size_t)t->T, B = (size_t)t->B;
    u.nx = 3 * B * T * C, u.no = B * T * C;
    u.x = malloc(sizeof(R) * u.nx), u.dx = malloc(sizeof(R) * u.nx);
    u.out = malloc(sizeof(R) * u.no), u.dout = malloc(sizeof(R) * u.no);
    assert_non_null(u.x), assert_non_null(u.dx), assert_non_null(u.out);
    assert_non_null(u.dout);
    ba_rng r;
    ba_rng_seed(&r, seed);
    for (size_t q = 0; q < u.nx; q++)
        u.x[q] = (R)(1.5 * ba_rng_normal(&r)), u.dx[q] = (R)(0.01 * ba_rng_normal(&r));
    for (size_t q = 0; q < u.no; q++)
        u.dout[q] = (R)ba_rng_normal(&r), u.out[q] = 0;
    TT_IO io;
    memset(&io, 0, sizeof io);
    size_t off = c->packed ? C : B * T * C;
    io.q = u.x, io.k = u.x + off, io.v = u.x + 2 * off;
    io.dq = u.dx, io.dk = u.dx + off, io.dv = u.dx + 2 * off;
    if (c->packed)
        io.st = 3 * C, io.sh = t->d, io.sb = 3 * T * C, io.ot = C, io.oh = t->d, io.ob = T * C;
    else
        io.st = t->d, io.sh = T * t->d, io.sb = C * T, io.ot = t->d, io.oh = T * t->d,
        io.ob = C * T;
    io.out = u.out, io.dout = u.dout;
    io.scale_set = c->scale_set, io.scale = 0.3;
    u.io = io;
    return u;
}

static void TT(tbuf_free)(TT(tbuf) *u) { free(u->x), free(u->dx), free(u->out), free(u->dout); }

/* max |a - b| / max |b - z| over a tensor (z: its starting values, so
 * that a gradient is held to the size of what the backward added),
 * element c of (b, h, i) at b sb + h sh + i st + c. */
static double TT(rel_err)(const tshape *t, const R *a, const R *b, const R *z, size_t sb,
                          size_t sh, size_t st)
{
    double num = 0.0, den = 0.0;
    for (int bb = 0; bb < t->B; bb++)
        for (int h = 0; h < t->H; h++)
            for (int i = 0; i < t->T; i++)
                for (int c = 0; c < t->d; c++) {
                    size_t o = bb * sb + h * sh + i * st + c;
                    double x = fabs((double)a[o] - (double)b[o]), y = fabs((double)b[o] - (double)z[o]);
                    num = x > num ? x : num, den = y > den ? y : den;
                }
    return den > 0 ? num / den : num;
}

/* The tiled and the dense path on the same inputs; with weights, the
 * tiled weights against the dense core's att too. */
static terr TT(run)(const tshape *t, const tcase *c, int weights, uint64_t seed)
{
    char err[512];
    ba_attn_shape s = shape_of(t, c);
    TT(tbuf) d = TT(tbuf_new)(t, c, seed), u = TT(tbuf_new)(t, c, seed);
    TT(tbuf) z = TT(tbuf_new)(t, c, seed); /* the starting values */
    size_t btt = (size_t)t->B * t->H * t->T * t->T, bht = (size_t)t->B * t->H * t->T;
    R *att = malloc(sizeof(R) * btt), *pre = malloc(sizeof(R) * btt);
    R *lse = malloc(sizeof(R) * bht);
    assert_non_null(att), assert_non_null(pre), assert_non_null(lse);
    int rc = TT(ba_attn_core_forward)(&s, &d.io, att, pre, NULL, err);
    if (rc == BA_OK)
        rc = TT(ba_attn_core_backward)(&s, &d.io, NULL, NULL, att, pre, err);
    if (rc == BA_OK)
        rc = TT(ba_attn_tiled_forward)(&s, &u.io, lse, err);
    if (rc == BA_OK)
        rc = TT(ba_attn_tiled_backward)(&s, &u.io, lse, err);
    if (rc)
        fail_msg("%s", err);
    const TT_IO *a = &u.io, *b = &d.io, *o = &z.io;
    terr e;
    e.e[0] = TT(rel_err)(t, a->out, b->out, o->out, a->ob, a->oh, a->ot);
    e.e[1] = TT(rel_err)(t, a->dq, b->dq, o->dq, a->sb, a->sh, a->st);
    e.e[2] = TT(rel_err)(t, a->dk, b->dk, o->dk, a->sb, a->sh, a->st);
    e.e[3] = TT(rel_err)(t, a->dv, b->dv, o->dv, a->sb, a->sh, a->st);
    e.e[4] = 0.0;
    if (weights) {
        assert_int_equal(TT(ba_attn_tiled_weights)(&s, &u.io, lse, pre, err), BA_OK);
        double num = 0.0;
        for (size_t q = 0; q < btt; q++) {
            double x = fabs((double)pre[q] - (double)att[q]);
            num = x > num ? x : num;
        }
        e.e[4] = num; /* the weights' largest is at most 1 */
    }
    free(att), free(pre), free(lse);
    TT(tbuf_free)(&d), TT(tbuf_free)(&u), TT(tbuf_free)(&z);
    return e;
}

/* The tiled forward and backward on 1 and on 2 threads: the same bits. */
static int TT(same_bits)(const tshape *t, const tcase *c)
{
    char err[512];
    ba_attn_shape s = shape_of(t, c);
    TT(tbuf) u[2];
    size_t bht = (size_t)t->B * t->H * t->T;
    R *lse[2];
    int saved = omp_get_max_threads();
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(k + 1);
        u[k] = TT(tbuf_new)(t, c, 99);
        lse[k] = malloc(sizeof(R) * bht);
        assert_non_null(lse[k]);
        assert_int_equal(TT(ba_attn_tiled_forward)(&s, &u[k].io, lse[k], err), BA_OK);
        assert_int_equal(TT(ba_attn_tiled_backward)(&s, &u[k].io, lse[k], err), BA_OK);
    }
    omp_set_num_threads(saved);
    int same = !memcmp(u[0].out, u[1].out, sizeof(R) * u[0].no) &&
               !memcmp(u[0].dx, u[1].dx, sizeof(R) * u[0].nx) &&
               !memcmp(lse[0], lse[1], sizeof(R) * bht);
    for (int k = 0; k < 2; k++)
        TT(tbuf_free)(&u[k]), free(lse[k]);
    return same;
}

#undef TT_CAT2
#undef TT_CAT
#undef TT
#undef TT_IO
#endif /* TT_PASS */
