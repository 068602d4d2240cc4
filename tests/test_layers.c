/* The float model's vectorised elementwise kernels against their slow twins
 * in double with libm (float library):
 * - ba_exp_nonpos1f against exp on [-87.3, 0]: within 3 ulp of float
 *   (relative 3.6e-7), exactly 1 at 0 and exactly 0 below -87.3;
 * - GELU forward and backward against libm's exp in double: the float
 *   kernel's only error beyond
 *   a few roundings is that of u itself, relative 2^-23 |2u| in the
 *   exponential, so the bound is 2^-21 (1 + |2u|) of the value (and of the
 *   largest term of the derivative), with absolute floors of 1e-36 (value)
 *   and 1e-34 (derivative) where the exponential, below 1.2e-38, is
 *   flushed to 0; backward
 *   adds into its gradient;
 * - the cross-entropy's row softmax against a double libm softmax: 1e-6 of
 *   each probability and of the loss.
 * Inputs are an even grid plus random points, the extremes included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "core/vmath.h"

#define GK 0.7978845608028654
#define GA 0.044715

static void test_expf_matches_libm(void **state)
{
    (void)state;
    enum { N = 40009 };
    ba_rng r;
    ba_rng_seed(&r, 17);
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        float x = (i % 2) ? -87.3f * (float)i / N : (float)(-87.3 * ba_rng_uniform(&r));
        double e = exp((double)x), rel = fabs((double)ba_exp_nonpos1f(x) - e) / e;
        worst = rel > worst ? rel : worst;
    }
    assert_true(worst < 3.6e-7);
    assert_true(worst > 0.0); /* not vacuous: float rounding shows */
    assert_true(ba_exp_nonpos1f(0.0f) == 1.0f);
    assert_true(ba_exp_nonpos1f(-1e-30f) == 1.0f);
    const float low[] = {-87.31f, -100.0f, -1e30f, -INFINITY};
    for (int i = 0; i < 4; i++)
        assert_true(ba_exp_nonpos1f(low[i]) == 0.0f);
    assert_true(isnan(ba_exp_nonpos1f(NAN)));
}

/* The twins, in double with libm: gelu(x) = 0.5 x (1 + tanh(u)) written as
 * x sigmoid(2u), since in double too 1 + tanh(u) cancels to 0 below
 * u = -19 while the value is still ~1e-16 x. */
static double sig(double z) { return 1.0 / (1.0 + exp(-z)); }

static double gelu_ref(double x)
{
    return x * sig(2.0 * GK * (x + GA * x * x * x));
}

/* d/dx x s(2u) = s + 2 x s (1 - s) u'; *largest gets the larger term */
static double gelu_grad_ref(double x, double *largest)
{
    double s = sig(2.0 * GK * (x + GA * x * x * x));
    double a = s, b = 2.0 * x * s * (1.0 - s) * GK * (1.0 + 3.0 * GA * x * x);
    *largest = fmax(fabs(a), fabs(b));
    return a + b;
}

static void test_gelu_matches_double_twin(void **state)
{
    (void)state;
    enum { N = 20000 };
    static float x[N], y[N], dy[N], dx[N];
    ba_rng r;
    ba_rng_seed(&r, 18);
    for (int i = 0; i < N; i++) {
        x[i] = (i % 2) ? -12.0f + 24.0f * (float)i / N : (float)(8.0 * ba_rng_normal(&r));
        dy[i] = 1.0f;
        dx[i] = 0.0f;
    }
    x[0] = 0.0f, x[2] = -1e-20f, x[4] = 1e-20f, x[6] = -30.0f, x[8] = 30.0f;
    ba_gelu_forward(y, x, N);
    ba_gelu_backward(dx, x, dy, N);
    double wf = 0.0, wb = 0.0;
    int iwf = 0, iwb = 0;
    for (int i = 0; i < N; i++) {
        double xd = x[i], z2 = 2.0 * GK * (xd + GA * xd * xd * xd);
        double tol = ldexp(1.0, -21) * (1.0 + fabs(z2));
        double ref = gelu_ref(xd), big;
        double err = fabs(y[i] - ref);
        if (err > 1e-36 && err / (tol * fabs(ref)) > wf)
            wf = err / (tol * fabs(ref)), iwf = i;
        double gref = gelu_grad_ref(xd, &big);
        double gerr = fabs(dx[i] - gref);
        if (gerr / (tol * big + 1e-34) > wb)
            wb = gerr / (tol * big + 1e-34), iwb = i;
    }
    /* each a fraction of its bound; the worst case seen is printed on failure */
    if (!(wf <= 1.0 && wb <= 1.0))
        fail_msg("gelu error / bound: forward %.3g at x = %.9g, backward %.3g at x = %.9g", wf,
                 (double)x[iwf], wb, (double)x[iwb]);
    float once = dx[N / 2];
    ba_gelu_backward(dx, x, dy, N); /* accumulates: exactly twice */
    assert_true(dx[N / 2] == 2.0f * once && once != 0.0f);
    /* the setting form: the bits of zeroing, then accumulating (dy of both
     * signs, so -0 products appear and become +0 in both) */
    static float ds[N], dz[N];
    for (int i = 0; i < N; i++)
        dy[i] = (i % 3) ? (float)ba_rng_normal(&r) : -0.0f, ds[i] = 7.0f, dz[i] = 0.0f;
    ba_gelu_backward_set(ds, x, dy, N);
    ba_gelu_backward(dz, x, dy, N);
    assert_memory_equal(ds, dz, sizeof ds);
    assert_true(y[0] == 0.0f);
    assert_true(y[8] == 30.0f);               /* sigmoid(2u) rounds to 1 */
    assert_true(y[6] == 0.0f && signbit(y[6])); /* x * 0 for x < 0 */
    float nanx = NAN, nany;
    ba_gelu_forward(&nany, &nanx, 1);
    assert_true(isnan(nany)); /* a NaN is not hidden */
}

static void test_crossentropy_matches_double_twin(void **state)
{
    (void)state;
    enum { T = 4, N = 3 * T, O = 65 };
    static float logits[N * O], probs[N * O];
    int targets[N];
    ba_rng r;
    ba_rng_seed(&r, 19);
    for (int i = 0; i < N * O; i++)
        logits[i] = (float)(6.0 * ba_rng_normal(&r));
    for (int n = 0; n < N; n++)
        targets[n] = (int)ba_rng_below(&r, O);
    targets[1] = -1; /* an ignored row */
    static float keep[N * O];
    memcpy(keep, logits, sizeof logits);
    double loss = 0.0;
    long count = 0;
    char err[256];
    assert_int_equal(ba_crossentropy_forward(logits, probs, targets, N, O, T, 0, &loss, &count,
                                             err),
                     BA_OK);
    assert_int_equal(count, N - 1);
    double ref_loss = 0.0, worst = 0.0;
    for (int n = 0; n < N; n++) {
        const float *x = keep + (size_t)n * O;
        double mx = -INFINITY, z = 0.0;
        for (int c = 0; c < O; c++)
            mx = fmax(mx, x[c]);
        for (int c = 0; c < O; c++)
            z += exp(x[c] - mx);
        for (int c = 0; c < O; c++) {
            double p = exp(x[c] - mx) / z;
            worst = fmax(worst, fabs(probs[(size_t)n * O + c] - p) / fmax(p, 1e-30));
        }
        if (targets[n] >= 0)
            ref_loss += mx + log(z) - x[targets[n]];
    }
    assert_true(worst < 1e-6);
    assert_true(fabs(loss - ref_loss) < 1e-6 * fabs(ref_loss));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expf_matches_libm),
        cmocka_unit_test(test_gelu_matches_double_twin),
        cmocka_unit_test(test_crossentropy_matches_double_twin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
