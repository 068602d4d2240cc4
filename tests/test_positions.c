/* ALiBi's slopes against the paper's values, then rotary position
 * embedding (src/model/positions.c) against its slow twin: each
 * channel pair of a head as a complex number z = x_2i + i x_2i+1,
 * multiplied by exp(i t theta_i) with complex.h in double. Checked:
 * - both precisions against the twin: double within 1e-14 of the pair's
 *   size (a few roundings of cos, sin and two products), float within
 *   4e-7 (2 ulp of float: the float products, the cosines being rounded
 *   from double);
 * - the property RoPE exists for: q_m . k_n after rotation is the same for
 *   every shift of both positions (1e-12 in double, T up to 4096);
 * - the backward (sign -1) undoes the forward to 1e-15, and is the
 *   gradient: central finite differences of L = sum w . rope(x) in double
 *   match it to 1e-9;
 * - rows at offset t0 are those rows of a longer rotation, bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* The twin: x (B,T,ld), H heads of d channels, rotated by sign * t * theta
 * at rows t0 + t. */
static void rope_ref(int B, int T, int t0, int H, int d, size_t ld, int sign, double *x)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < d / 2; i++) {
                    double *p = x + ((size_t)b * T + t) * ld + (size_t)h * d + 2 * i;
                    double theta = pow(10000.0, -2.0 * i / d);
                    double complex z = (p[0] + I * p[1]) * cexp(I * sign * (t0 + t) * theta);
                    p[0] = creal(z), p[1] = cimag(z);
                }
}

static void fill(double *x, size_t n, uint64_t seed)
{
    ba_rng r;
    ba_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = ba_rng_normal(&r);
}

static void test_against_twin(void **state)
{
    (void)state;
    const int shapes[][5] = {/* B, T, t0, H, d */ {2, 7, 0, 3, 4},  {1, 64, 0, 4, 32},
                             {3, 5, 100, 2, 2}, {2, 16, 4080, 2, 64}, {1, 1, 0, 1, 8}};
    for (int s = 0; s < 5; s++) {
        int B = shapes[s][0], T = shapes[s][1], t0 = shapes[s][2], H = shapes[s][3];
        int d = shapes[s][4];
        size_t ld = (size_t)H * d + 5, n = (size_t)B * T * ld; /* 5 channels past the heads */
        double *ref = malloc(sizeof(double) * n), *x = malloc(sizeof(double) * n);
        float *xf = malloc(sizeof(float) * n);
        assert_true(ref && x && xf);
        fill(ref, n, 11 + (uint64_t)s);
        for (size_t i = 0; i < n; i++)
            ref[i] = (float)ref[i], x[i] = ref[i], xf[i] = (float)ref[i];
        rope_ref(B, T, t0, H, d, ld, 1, ref);
        ba_rope_rotate_f64(B, T, t0, H, d, ld, 1, x);
        ba_rope_rotate_f32(B, T, t0, H, d, ld, 1, xf);
        double e64 = 0.0, e32 = 0.0;
        for (size_t i = 0; i < n; i++) {
            size_t c = i % ld;
            if (c >= (size_t)H * d) { /* channels past the heads are untouched */
                assert_true(x[i] == ref[i] && (double)xf[i] == ref[i]);
                continue;
            }
            const double *pair = ref + (i - c % 2);
            double size = hypot(pair[0], pair[1]) + 1e-300;
            e64 = fmax(e64, fabs(x[i] - ref[i]) / size);
            e32 = fmax(e32, fabs((double)xf[i] - ref[i]) / size);
        }
        if (e64 > 1e-14 || e32 > 4e-7)
            fail_msg("shape %d: double %.3g, float %.3g of the pair's size", s, e64, e32);
        if (T * d > 8)
            assert_true(e32 > 0.0); /* not vacuous: float rounding shows */
        free(ref), free(x), free(xf);
    }
}

/* q_m . k_n after the rotation depends on m - n only. */
static void test_relative(void **state)
{
    (void)state;
    enum { D = 64 };
    double q[D], k[D];
    fill(q, D, 3), fill(k, D, 4);
    const int pairs[][2] = {{5, 2}, {100, 0}, {4095, 4000}, {7, 7}, {0, 9}};
    for (int p = 0; p < 5; p++) {
        double ref = 0.0;
        for (int shift = 0; shift <= 1000; shift += 250) {
            double a[D], b[D];
            memcpy(a, q, sizeof a), memcpy(b, k, sizeof b);
            ba_rope_rotate_f64(1, 1, pairs[p][0] + shift, 1, D, D, 1, a);
            ba_rope_rotate_f64(1, 1, pairs[p][1] + shift, 1, D, D, 1, b);
            double dot = 0.0;
            for (int c = 0; c < D; c++)
                dot += a[c] * b[c];
            if (shift == 0)
                ref = dot;
            else if (fabs(dot - ref) > 1e-12 * (1 + fabs(ref)))
                fail_msg("positions (%d, %d) shifted by %d: q.k = %.17g, unshifted %.17g",
                         pairs[p][0], pairs[p][1], shift, dot, ref);
        }
    }
}

/* The backward is the inverse and the gradient. */
static void test_backward(void **state)
{
    (void)state;
    enum { B = 2, T = 9, H = 2, d = 6, LD = H * d };
    size_t n = (size_t)B * T * LD;
    double x[B * T * LD], y[B * T * LD], w[B * T * LD], g[B * T * LD];
    fill(x, n, 21), fill(w, n, 22);
    memcpy(y, x, sizeof y);
    ba_rope_rotate_f64(B, T, 3, H, d, LD, 1, y);
    ba_rope_rotate_f64(B, T, 3, H, d, LD, -1, y);
    for (size_t i = 0; i < n; i++)
        assert_true(fabs(y[i] - x[i]) < 1e-15 * 8);
    /* dL/dx = rope^-1(w) for L = w . rope(x) */
    memcpy(g, w, sizeof g);
    ba_rope_rotate_f64(B, T, 3, H, d, LD, -1, g);
    /* L is linear in x: central differences have no truncation error, so
     * a large step keeps the rounding of L (~1e-16 x 30) small */
    const double eps = 1e-3;
    for (size_t i = 0; i < n; i++) {
        double keep = x[i], l[2];
        for (int s = 0; s < 2; s++) {
            memcpy(y, x, sizeof y);
            y[i] = keep + (s ? -eps : eps);
            ba_rope_rotate_f64(B, T, 3, H, d, LD, 1, y);
            l[s] = 0.0;
            for (size_t j = 0; j < n; j++)
                l[s] += w[j] * y[j];
        }
        double num = (l[0] - l[1]) / (2 * eps);
        if (fabs(num - g[i]) > 1e-9 * (1 + fabs(g[i])))
            fail_msg("entry %zu: backward %.12g, finite differences %.12g", i, g[i], num);
    }
}

/* Rows t0 .. t0+T-1 are those rows of the rotation from 0. */
static void test_offset(void **state)
{
    (void)state;
    enum { T = 12, t0 = 5, S = 4, H = 2, d = 8, LD = H * d };
    float all[T * LD], part[S * LD];
    for (int i = 0; i < T * LD; i++)
        all[i] = (float)sin(0.37 * i);
    memcpy(part, all + t0 * LD, sizeof part);
    ba_rope_rotate_f32(1, T, 0, H, d, LD, 1, all);
    ba_rope_rotate_f32(1, S, t0, H, d, LD, 1, part);
    assert_memory_equal(part, all + t0 * LD, sizeof part);
}

/* The ALiBi paper's slopes: 8 heads 1/2 .. 1/256; 12 heads: the 8 of 8,
 * then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 (every other slope of 16). */
static void test_alibi_slopes(void **state)
{
    (void)state;
    for (int h = 0; h < 8; h++)
        assert_true(ba_alibi_slope(h, 8) == ldexp(1.0, -(h + 1)));
    const double twelve[12] = {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625,
                               pow(2, -0.5), pow(2, -1.5), pow(2, -2.5), pow(2, -3.5)};
    for (int h = 0; h < 12; h++)
        assert_true(fabs(ba_alibi_slope(h, 12) - twelve[h]) < 1e-15);
    assert_true(ba_alibi_slope(0, 1) == ldexp(1.0, -8));
    assert_true(ba_alibi_slope(0, 2) == ldexp(1.0, -4) && ba_alibi_slope(1, 2) == ldexp(1.0, -8));
    assert_true(fabs(ba_alibi_slope(2, 3) - pow(2, -2)) < 1e-15); /* 3 heads: 2^-4, 2^-8, 2^-2 */
}

/* The config's pos_emb through its JSON: rope as "rope", learned and none
 * as the booleans every file before issue 43 has, an unknown name refused
 * naming the field. */
static void test_config_json(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    const int kinds[3] = {BA_POS_NONE, BA_POS_LEARNED, BA_POS_ROPE};
    const char *written[3] = {"\"pos_emb\":false", "\"pos_emb\":true", "\"pos_emb\":\"rope\""};
    for (int k = 0; k < 3; k++) {
        ba_config c = ba_config_default(BA_ATTN_BOLTZMANN, 8), back;
        c.n_embd = 8, c.n_head = 2, c.vocab_size = 4, c.out_size = 4, c.pos_emb = kinds[k];
        ba_data_spec spec = ba_data_spec_default(BA_TASK_CHARLM), sback;
        spec.vocab_size = 4;
        for (int i = 0; i < 4; i++)
            spec.vocab[i] = (uint8_t)('a' + i);
        char *js = ba_config_to_json(&c, &spec);
        assert_non_null(js);
        char *flat = malloc(strlen(js) + 1), *o = flat; /* without blanks */
        assert_non_null(flat);
        for (const char *p = js; *p; p++)
            if (*p != ' ' && *p != '\t' && *p != '\n')
                *o++ = *p;
        *o = '\0';
        if (!strstr(flat, written[k]))
            fail_msg("pos_emb %d: %s not in %s", kinds[k], written[k], flat);
        if (ba_config_from_json(js, &back, &sback, err))
            fail_msg("pos_emb %d: %s", kinds[k], err);
        assert_int_equal(back.pos_emb, kinds[k]);
        if (k == 2) { /* a name the library does not know */
            char *bad = strstr(js, "\"rope\"");
            memcpy(bad, "\"ropf\"", 6);
            assert_int_equal(ba_config_from_json(js, &back, &sback, err), BA_ERR_FORMAT);
            assert_non_null(strstr(err, "pos_emb"));
            assert_non_null(strstr(err, "ropf"));
        }
        free(flat);
        free(js);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alibi_slopes),
        cmocka_unit_test(test_against_twin),
        cmocka_unit_test(test_relative),
        cmocka_unit_test(test_backward),
        cmocka_unit_test(test_offset),
        cmocka_unit_test(test_config_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
