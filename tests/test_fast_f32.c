/* The fast engine with float32 products (the float model's setting,
 * ba_engine_ctx_set_f32; src/ising/fast.h) against the reference
 * enumeration in double, its slow twin, for batches of T = 4..20 queries'
 * rows (every n = 1..T):
 *   random       h ~ N(0, s^2) with s = 1 and 4, J ~ N(0, 0.5^2);
 *   adversarial  h uniform in +-20, J uniform in +-5 (a saturated system);
 *   trained-like h ~ N(0, 3^2), J of a charlm checkpoint's pattern (J(1) =
 *                a/2, J(2..4) = a, J(>=6) = -a/2, a = 1).
 * Bounds, from the error analysis in docs/internals.md ("Float32 products"):
 * every product entry is a double sum of float sums over at most
 * F32_KBLOCK = 256 terms, so with u = 2^-24 and g = (256 + 4) u = 1.55e-5
 *   forward   a marginal is a ratio of two sums of positive terms:
 *             |expm1(logw - logw_ref)| <= 2 g = 3.1e-5;
 *   backward  dh and dJ (each over the batch, as 2-norms): relative error
 *             at most 4 g = 6.2e-5. They are covariances formed from
 *             signed sums, so a saturated system could in principle need
 *             an absolute floor as the double engine's test does; none of
 *             these inputs comes near (the worst is printed).
 * The worst ratio to each bound is printed, and the test fails if any
 * exceeds 1 or if every error is 0 (the float path must have run). The
 * double products of the same context stay within 1e-9 of the reference,
 * the double engine's own bound (tests/test_fast_engine.c), checked here
 * too so that a setting leaking between the two would show. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "grad_norm.h"
#ifdef _OPENMP
#include <omp.h>
#endif

#define GAMMA ((256.0 + 4.0) * 0x1p-24)

typedef struct {
    double fwd;         /* worst forward error / bound */
    double fwd_abs;     /* worst forward error itself */
    double rdh, rdj;    /* worst relative 2-norm errors of dh and dJ */
    double d64;         /* worst forward error of the double products */
    long fallbacks;
} worst_t;

enum { CAT_RANDOM1, CAT_RANDOM4, CAT_ADVERSARIAL, CAT_TRAINED, NCAT };
static const char *const cat_name[NCAT] = {"random s=1", "random s=4", "adversarial",
                                           "trained-like"};

static double unif(ba_rng *r, double a) { return a * (2.0 * ba_rng_uniform(r) - 1.0); }

static void fill(ba_rng *r, int cat, int B, int T, double *h, double *J, double *g)
{
    size_t TT = (size_t)T * T;
    for (size_t i = 0; i < (size_t)B * TT; i++) {
        switch (cat) {
        case CAT_RANDOM1: h[i] = ba_rng_normal(r); break;
        case CAT_RANDOM4: h[i] = 4.0 * ba_rng_normal(r); break;
        case CAT_ADVERSARIAL: h[i] = unif(r, 20.0); break;
        default: h[i] = 3.0 * ba_rng_normal(r); break;
        }
        g[i] = ba_rng_normal(r);
    }
    for (int j = 0; j < T; j++)
        for (int k = 0; k < T; k++) {
            int d = k - j;
            double v = NAN; /* unused entries: an engine reading them fails */
            if (d > 0) {
                if (cat == CAT_ADVERSARIAL)
                    v = unif(r, 5.0);
                else if (cat == CAT_TRAINED)
                    v = d == 1 ? 0.5 : d <= 4 ? 1.0 : d >= 6 ? -0.5 : 0.0;
                else
                    v = 0.5 * ba_rng_normal(r);
            }
            J[(size_t)j * T + k] = v;
        }
}

static void one_batch(int cat, int B, int T, uint64_t seed, worst_t *w)
{
    size_t TT = (size_t)T * T, n = (size_t)B * TT;
    double *buf = calloc(11 * n + 4 * TT, sizeof(double));
    assert_non_null(buf);
    double *h = buf, *g = h + n, *lf = g + n, *lr = lf + n, *l64 = lr + n;
    double *dhf = l64 + n, *dhr = dhf + n, *dh64 = dhr + n, *J = dh64 + n;
    double *dJf = J + TT, *dJr = dJf + TT, *dJ64 = dJr + TT;
    ba_rng r;
    ba_rng_seed(&r, seed);
    fill(&r, cat, B, T, h, J, g);
    char err[BA_ERR_LEN];
    ba_engine_ctx *c = ba_engine_ctx_new();
    assert_non_null(c);
    assert_int_equal(ba_ref_forward(B, T, h, J, T, lr, err), BA_OK);
    assert_int_equal(ba_ref_backward(B, T, h, J, T, g, dhr, dJr, err), BA_OK);
    ba_engine_ctx_set_f32(c, 1);
    assert_int_equal(ba_engine_forward_fast(c, B, T, h, J, T, lf, err), BA_OK);
    w->fallbacks += ba_engine_ctx_fallbacks(c);
    assert_int_equal(ba_engine_backward_fast(c, B, T, h, J, T, g, dhf, dJf, err), BA_OK);
    ba_engine_ctx_set_f32(c, 0);
    assert_int_equal(ba_engine_forward_fast(c, B, T, h, J, T, l64, err), BA_OK);
    assert_int_equal(ba_engine_backward_fast(c, B, T, h, J, T, g, dh64, dJ64, err), BA_OK);
    ba_engine_ctx_free(c);
    for (int q = 0; q < B * T; q++)
        for (int j = 0; j <= q % T; j++) {
            size_t i = (size_t)q * T + j;
            double e = fabs(expm1(lf[i] - lr[i])), e64 = fabs(expm1(l64[i] - lr[i]));
            w->fwd_abs = fmax(w->fwd_abs, e);
            w->fwd = fmax(w->fwd, e / (2.0 * GAMMA));
            w->d64 = fmax(w->d64, e64);
        }
    w->rdh = fmax(w->rdh, diff_norm(dhf, dhr, B, T, 0) / diff_norm(dhr, NULL, B, T, 0));
    if (T > 1)
        w->rdj = fmax(w->rdj, diff_norm(dJf, dJr, B, T, 1) / diff_norm(dJr, NULL, B, T, 1));
    free(buf);
}

static void test_f32_against_reference(void **state)
{
    (void)state;
    const int Ts[] = {4, 8, 12, 16, 20};
    worst_t w[NCAT];
    memset(w, 0, sizeof w);
    for (int cat = 0; cat < NCAT; cat++)
        for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++) {
            int T = Ts[t], B = T >= 16 ? 2 : 4;
            if (T == 20 && (cat == CAT_RANDOM4 || cat == CAT_ADVERSARIAL))
                continue; /* the reference's 2^20 states per row: time */
            one_batch(cat, B, T, 1000u * (uint64_t)(cat + 1) + (uint64_t)T, &w[cat]);
        }
    int bad = 0;
    double any = 0.0;
    for (int cat = 0; cat < NCAT; cat++) {
        print_message("f32 %-13s forward worst %.2e (%.3f of bound), backward dh %.1e, dJ %.1e "
                      "(%.3f of bound), fallbacks %ld; double products %.1e\n",
                      cat_name[cat], w[cat].fwd_abs, w[cat].fwd, w[cat].rdh, w[cat].rdj,
                      fmax(w[cat].rdh, w[cat].rdj) / (4.0 * GAMMA), w[cat].fallbacks,
                      w[cat].d64);
        bad |= !(w[cat].fwd <= 1.0 && w[cat].rdh <= 4.0 * GAMMA && w[cat].rdj <= 4.0 * GAMMA &&
                 w[cat].d64 < 1e-9);
        any = fmax(any, w[cat].fwd_abs);
    }
    assert_false(bad);
    assert_true(any > 1e-12); /* the float products ran */
}

/* The float products give the same bits on 1 and 2 threads (the kernel's
 * row blocks and the products' splits depend on sizes, not on threads). */
static void test_f32_thread_count(void **state)
{
    (void)state;
#ifdef _OPENMP
    enum { B = 8, T = 20 };
    size_t TT = (size_t)T * T, n = (size_t)B * TT;
    double *buf = calloc(8 * n + 3 * TT, sizeof(double));
    assert_non_null(buf);
    double *h = buf, *g = h + n, *l[2] = {g + n, g + 2 * n}, *dh[2] = {g + 3 * n, g + 4 * n};
    double *J = g + 5 * n, *dJ[2] = {J + TT, J + 2 * TT};
    ba_rng r;
    ba_rng_seed(&r, 77);
    fill(&r, CAT_RANDOM1, B, T, h, J, g);
    char err[BA_ERR_LEN];
    int saved = omp_get_max_threads();
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(k + 1);
        ba_engine_ctx *c = ba_engine_ctx_new();
        assert_non_null(c);
        ba_engine_ctx_set_f32(c, 1);
        assert_int_equal(ba_engine_forward_fast(c, B, T, h, J, T, l[k], err), BA_OK);
        assert_int_equal(ba_engine_backward_fast(c, B, T, h, J, T, g, dh[k], dJ[k], err), BA_OK);
        ba_engine_ctx_free(c);
    }
    omp_set_num_threads(saved);
    assert_memory_equal(l[0], l[1], sizeof(double) * n);
    assert_memory_equal(dh[0], dh[1], sizeof(double) * n);
    assert_memory_equal(dJ[0], dJ[1], sizeof(double) * TT);
    free(buf);
#else
    skip();
#endif
}

/* A batch the float products cannot trust (a spin with h = -40: its
 * marginal numerator, e^-80 ~ 1.8e-35 of the partition sum, is below the
 * float threshold 2^(16+24) FLT_MIN ~ 1.3e-26 at n = 16, far above the
 * double one) runs on the context's double-product twin: forward and
 * backward give the very bits of a context with double products, and no
 * query reaches the reference (which would give other last bits, and
 * cost 2^16 patterns a query). A batch the float products trust stays on
 * them (its bits differ from the double context's). */
static void test_f32_untrusted_batch_runs_double(void **state)
{
    (void)state;
    enum { B = 3, T = 16 };
    size_t TT = (size_t)T * T, n = (size_t)B * TT;
    double *buf = calloc(7 * n + 3 * TT, sizeof(double));
    assert_non_null(buf);
    double *h = buf, *g = h + n, *l[2] = {g + n, g + 2 * n}, *dh[2] = {g + 3 * n, g + 4 * n};
    double *J = g + 5 * n, *dJ[2] = {J + TT, J + 2 * TT};
    ba_rng r;
    ba_rng_seed(&r, 91);
    fill(&r, CAT_RANDOM1, B, T, h, J, g);
    char err[BA_ERR_LEN];
    for (int extreme = 1; extreme >= 0; extreme--) {
        if (extreme) /* key 5 of the last query of item 1 */
            h[TT + (size_t)(T - 1) * T + 5] = -40.0;
        else
            h[TT + (size_t)(T - 1) * T + 5] = 0.5;
        for (int k = 0; k < 2; k++) { /* 0: float products, 1: double */
            memset(dh[k], 0, sizeof(double) * n), memset(dJ[k], 0, sizeof(double) * TT);
            ba_engine_ctx *c = ba_engine_ctx_new();
            assert_non_null(c);
            ba_engine_ctx_set_f32(c, k == 0);
            assert_int_equal(ba_engine_forward_fast(c, B, T, h, J, T, l[k], err), BA_OK);
            assert_int_equal(ba_engine_ctx_fallbacks(c), 0);
            assert_int_equal(ba_engine_backward_fast(c, B, T, h, J, T, g, dh[k], dJ[k], err),
                             BA_OK);
            ba_engine_ctx_free(c);
        }
        int same = memcmp(l[0], l[1], sizeof(double) * n) == 0 &&
                   memcmp(dh[0], dh[1], sizeof(double) * n) == 0 &&
                   memcmp(dJ[0], dJ[1], sizeof(double) * TT) == 0;
        assert_int_equal(same, extreme);
    }
    /* the extreme marginal itself, against the reference enumeration */
    h[TT + (size_t)(T - 1) * T + 5] = -40.0;
    double *lr = calloc(n, sizeof(double));
    assert_non_null(lr);
    ba_engine_ctx *c = ba_engine_ctx_new();
    assert_non_null(c);
    ba_engine_ctx_set_f32(c, 1);
    assert_int_equal(ba_engine_forward_fast(c, B, T, h, J, T, l[0], err), BA_OK);
    ba_engine_ctx_free(c);
    assert_int_equal(ba_ref_forward(B, T, h, J, T, lr, err), BA_OK);
    size_t at = TT + (size_t)(T - 1) * T + 5;
    assert_true(lr[at] < -75.0);
    assert_true(fabs(l[0][at] - lr[at]) <= 1e-9 * fabs(lr[at]));
    free(lr);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_against_reference),
        cmocka_unit_test(test_f32_thread_count),
        cmocka_unit_test(test_f32_untrusted_batch_runs_double),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
