/* Tests of the fast exact engine (spec section 4, src/ising/fast.c) beyond
 * the accuracy of single queries and batched calls (test_fast_engine.c):
 * contexts (3), the fallback to the reference enumeration (4) and
 * determinism (5), each against the reference engine and the stateless
 * calls. Inputs, measures and the backward bounds are test_fast_engine.c's
 * (see its opening comment), shared through fast_engine_check.h; here:
 *   fallback  |logw_fast - logw_ref| < 1e-9 absolute on queries the fast
 *             path hands to the reference enumeration.
 *   context   bit-identical to the stateless calls; determinism: same call
 *             twice bit-identical, 1 vs 2 OpenMP threads within 1e-12.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "model/model.h"
#include "fast_engine_check.h"

/* ------------------------------------------------------ 2. batched calls */

static void outputs_equal(const outputs *a, const outputs *b, int B, int T, int ld,
                          const char *what)
{
    size_t BTT = (size_t)B * T * T;
    if (memcmp(a->logw, b->logw, sizeof(double) * BTT) ||
        memcmp(a->dh, b->dh, sizeof(double) * BTT) ||
        memcmp(a->dJ, b->dJ, sizeof(double) * (size_t)T * ld))
        fail_msg("%s B=%d T=%d: outputs are not bit-identical", what, B, T);
}

/* ------------------------------------------------------------ 3. context */

static void test_context(void **state)
{
    (void)state;
    /* Shapes in sequence on one context: growing T, growing B, shrinking
     * back, and shapes met before with other inputs. */
    const int shapes[][2] = {{5, 14}, {2, 16}, {5, 14}, {7, 9}, {3, 5}, {5, 14}, {1, 1}, {2, 16}};
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    ba_engine_ctx *c = ba_engine_ctx_new();
    assert_non_null(c);
    char err[BA_ERR_LEN];
    worst_t w = {0};
    for (int s = 0; s < ns; s++) {
        int B = shapes[s][0], T = shapes[s][1];
        int cat = s % 2 ? CAT_UNIFORM : CAT_RANDOM;
        batch b = make_batch(inst_seed(3, cat, T, s), B, T, T + s % 2, cat, s);
        outputs fc, fs;
        run_fast(c, B, T, b.h, b.J, b.ld, b.g, &fc);
        assert_int_equal(ba_engine_ctx_fallbacks(c), 0);
        run_fast(NULL, B, T, b.h, b.J, b.ld, b.g, &fs);
        char what[64];
        snprintf(what, sizeof what, "context step %d (%s)", s, cat_name[cat]);
        outputs_equal(&fc, &fs, B, T, b.ld, what);
        check_batched(what, B, T, b.h, b.J, b.ld, b.g, &fc, cat == CAT_RANDOM, &w);

        /* A backward whose forward was not the last one on the context
         * (another shape ran in between) rebuilds its state: the same. */
        outputs o2;
        outputs_init(&o2, B, T, b.ld);
        batch other = make_batch(inst_seed(3, 9, T, s), 3, T + 1, T + 1, CAT_RANDOM, 0);
        double *lw_other = xmalloc((size_t)3 * (T + 1) * (T + 1));
        assert_int_equal(ba_engine_forward_ctx(c, BA_ENGINE_FAST, 3, T + 1, other.h, other.J,
                                               other.ld, lw_other, err),
                         BA_OK);
        assert_int_equal(ba_engine_backward_ctx(c, BA_ENGINE_FAST, B, T, b.h, b.J, b.ld, b.g,
                                                o2.dh, o2.dJ, err),
                         BA_OK);
        assert_memory_equal(o2.dh, fs.dh, sizeof(double) * (size_t)B * T * T);
        assert_memory_equal(o2.dJ, fs.dJ, sizeof(double) * (size_t)T * b.ld);

        /* dh = NULL or dJ = NULL leave the other part the same. */
        outputs o3;
        outputs_init(&o3, B, T, b.ld);
        assert_int_equal(ba_engine_forward_ctx(c, BA_ENGINE_FAST, B, T, b.h, b.J, b.ld, o3.logw,
                                               err),
                         BA_OK);
        assert_int_equal(ba_engine_backward_ctx(c, BA_ENGINE_FAST, B, T, b.h, b.J, b.ld, b.g,
                                                NULL, o3.dJ, err),
                         BA_OK);
        assert_int_equal(ba_engine_backward_ctx(c, BA_ENGINE_FAST, B, T, b.h, b.J, b.ld, b.g,
                                                o3.dh, NULL, err),
                         BA_OK);
        outputs_equal(&o3, &fs, B, T, b.ld, "context, dh/dJ = NULL");

        /* The reference engine ignores the context. */
        outputs rc, rs;
        outputs_init(&rc, B, T, b.ld);
        outputs_init(&rs, B, T, b.ld);
        assert_int_equal(ba_engine_forward_ctx(c, BA_ENGINE_REFERENCE, B, T, b.h, b.J, b.ld,
                                               rc.logw, err),
                         BA_OK);
        assert_int_equal(ba_engine_backward_ctx(c, BA_ENGINE_REFERENCE, B, T, b.h, b.J, b.ld,
                                                b.g, rc.dh, rc.dJ, err),
                         BA_OK);
        assert_int_equal(ba_engine_forward(BA_ENGINE_REFERENCE, B, T, b.h, b.J, b.ld, rs.logw,
                                           err),
                         BA_OK);
        assert_int_equal(
            ba_engine_backward(BA_ENGINE_REFERENCE, B, T, b.h, b.J, b.ld, b.g, rs.dh, rs.dJ, err),
            BA_OK);
        outputs_equal(&rc, &rs, B, T, b.ld, "context, reference engine");

        outputs_free(&fc), outputs_free(&fs), outputs_free(&o2), outputs_free(&o3);
        outputs_free(&rc), outputs_free(&rs);
        free(lw_other);
        batch_free(&other);
        batch_free(&b);
    }

    /* Many calls on the same context, alternating two shapes: every result
     * identical to the first of its shape. */
    batch b1 = make_batch(inst_seed(3, 20, 14, 0), 5, 14, 15, CAT_UNIFORM, 0);
    batch b2 = make_batch(inst_seed(3, 21, 11, 0), 4, 11, 11, CAT_RANDOM, 0);
    outputs first1, first2;
    run_fast(c, b1.B, b1.T, b1.h, b1.J, b1.ld, b1.g, &first1);
    run_fast(c, b2.B, b2.T, b2.h, b2.J, b2.ld, b2.g, &first2);
    for (int it = 0; it < 20; it++) {
        const batch *b = it % 2 ? &b2 : &b1;
        outputs o;
        run_fast(c, b->B, b->T, b->h, b->J, b->ld, b->g, &o);
        outputs_equal(&o, it % 2 ? &first2 : &first1, b->B, b->T, b->ld, "context reuse");
        outputs_free(&o);
    }
    outputs_free(&first1), outputs_free(&first2);
    batch_free(&b1), batch_free(&b2);

    /* ba_engine_ctx_fallbacks counts the last forward's fallbacks: one
     * spin at h = -400 in every query of batch element 0 (test 4 (b)). */
    batch fbb = make_batch(inst_seed(3, 22, 8, 0), 2, 8, 8, CAT_RANDOM, 0);
    for (int i = 0; i < 8; i++)
        fbb.h[(size_t)i * 8 + i / 2] = -400.0;
    double *lw = xmalloc(2 * 64);
    long fb_stateless = -1;
    assert_int_equal(ba_engine_forward_ctx(c, BA_ENGINE_FAST, 2, 8, fbb.h, fbb.J, 8, lw, err),
                     BA_OK);
    assert_int_equal(ba_engine_ctx_fallbacks(c), 8);
    assert_int_equal(ba_fast_forward(2, 8, fbb.h, fbb.J, 8, lw, &fb_stateless, err), BA_OK);
    assert_int_equal(fb_stateless, 8);
    outputs o;
    run_fast(c, 2, 8, fbb.h, fbb.J, 8, fbb.g, &o);
    check_batched("context with fallbacks", 2, 8, fbb.h, fbb.J, 8, fbb.g, &o, 0, &w);
    outputs_free(&o);
    /* and is reset by the next forward */
    batch mod = make_batch(inst_seed(3, 23, 8, 0), 2, 8, 8, CAT_RANDOM, 0);
    assert_int_equal(ba_engine_forward_ctx(c, BA_ENGINE_FAST, 2, 8, mod.h, mod.J, 8, lw, err),
                     BA_OK);
    assert_int_equal(ba_engine_ctx_fallbacks(c), 0);
    free(lw);
    batch_free(&fbb), batch_free(&mod);

    ba_engine_ctx_free(c);
    ba_engine_ctx_free(NULL);
    assert_int_equal(ba_engine_ctx_fallbacks(NULL), 0);
    print_message("context: %ld checked calls bit-identical to stateless; vs reference forward "
                  "%.1e, dh %.1e, dJ %.1e relative, %.2f of bound\n",
                  w.count, w.fwd, w.dh, w.dJ, w.excess);
}

/* ------------------------------------------------------------ 4. fallback */

/* Stateless fast forward against the reference in log space (absolute),
 * then forward and backward through check_batched; returns the fallbacks. */
static long compare_fallback(const char *what, int B, int T, const double *h, const double *J,
                             int ld, const double *g, double *worst_abs, worst_t *w)
{
    size_t BTT = (size_t)B * T * T;
    double *lr = xmalloc(BTT), *lf = xmalloc(BTT);
    char err[BA_ERR_LEN];
    long fb = -1;
    assert_int_equal(ba_engine_forward(BA_ENGINE_REFERENCE, B, T, h, J, ld, lr, err), BA_OK);
    assert_int_equal(ba_fast_forward(B, T, h, J, ld, lf, &fb, err), BA_OK);
    for (int q = 0; q < B * T; q++)
        for (int j = 0; j <= q % T; j++) {
            double a = lf[(size_t)q * T + j], b = lr[(size_t)q * T + j], e = fabs(a - b);
            if (!(isfinite(a) && a <= 0.0 && e < FB_TOL))
                fail_msg("%s: query b=%d i=%d key %d: fast logw %.17g, reference %.17g "
                         "(abs %.3e)",
                         what, q / T, q % T, j, a, b, e);
            *worst_abs = fmax(*worst_abs, e);
        }
    free(lr);
    free(lf);
    compare_batched(what, B, T, h, J, ld, g, 0, w);
    return fb;
}

static void test_fallback(void **state)
{
    (void)state;
    double worst_abs = 0.0;
    worst_t w = {0};
    char what[128];

    /* (a) Partition sum underflow. J = +40 on every pair (ferromagnetic),
     * fields +H on half A (spins j < a = n/2) and -H on half B, opposing
     * the A-B coupling. The fast path's shifts maximise the two factors
     * separately: mu >= H a + max X (sA = sB = all +), mv >= H b (sB = all
     * -, whose column shift is 0), while no state's log-weight exceeds
     * max X (for H < 80 min(a, b)), so Z' <= 2^n exp(-H n), below 1e-280
     * once H n > ~650: H = 60 and n >= 11. Batch element 1 has random
     * fields and the same J and stays on the fast path. */
    for (int n = 12; n <= 16; n += 2) {
        const int B = 2, T = n, ld = n + 1;
        ba_rng r;
        ba_rng_seed(&r, inst_seed(4, 0, n, 0));
        size_t BTT = (size_t)B * T * T;
        double *h = xmalloc(BTT), *g = xmalloc(BTT), *J = xmalloc((size_t)T * ld);
        for (int j = 0; j < T; j++)
            for (int k = 0; k < ld; k++)
                J[(size_t)j * ld + k] = (j < k && k < T) ? 40.0 + 0.1 * ba_rng_normal(&r) : NAN;
        for (int q = 0; q < B * T; q++) {
            int i = q % T, a = (i + 1) / 2;
            for (int j = 0; j < T; j++) {
                double hv = q < T ? (j < a ? 60.0 : -60.0) : ba_rng_normal(&r);
                h[(size_t)q * T + j] = j <= i ? hv : NAN;
                g[(size_t)q * T + j] = j <= i ? ba_rng_normal(&r) : NAN;
            }
        }
        snprintf(what, sizeof what, "fallback J=+40 h=+-60 n=%d", n);
        long fb = compare_fallback(what, B, T, h, J, ld, g, &worst_abs, &w);
        print_message("%s: %ld of %d queries fell back\n", what, fb, B * T);
        if (!(fb > 0 && fb < B * T))
            fail_msg("%s: %ld fallbacks, expected some but not all", what, fb);

        /* The single-query entry points on the full query. */
        double lr[MAXN], lf[MAXN], hq[MAXN];
        for (int j = 0; j < n; j++)
            hq[j] = h[(size_t)(n - 1) * T + j];
        assert_int_equal(ba_ising_marginals(BA_ENGINE_REFERENCE, n, hq, J, ld, lr, NULL), BA_OK);
        assert_int_equal(ba_ising_marginals(BA_ENGINE_FAST, n, hq, J, ld, lf, NULL), BA_OK);
        for (int j = 0; j < n; j++) {
            if (!(fabs(lf[j] - lr[j]) < FB_TOL))
                fail_msg("%s single query key %d: fast %.17g reference %.17g", what, j, lf[j],
                         lr[j]);
            worst_abs = fmax(worst_abs, fabs(lf[j] - lr[j]));
        }
        free(h), free(g), free(J);
    }

    /* (b) A marginal below the smallest double: h = -400 on one spin gives
     * P(s_j = +1) ~ e^-800, whose numerator underflows in the shifted
     * kernel, so the query must fall back (every query of element 0). */
    {
        const int B = 3, T = 10;
        batch b = make_batch(inst_seed(4, 1, T, 0), B, T, T, CAT_UNIFORM, 0);
        for (int i = 0; i < T; i++)
            b.h[(size_t)i * T + i / 2] = -400.0;
        long fb = compare_fallback("fallback h=-400", B, T, b.h, b.J, T, b.g, &worst_abs, &w);
        print_message("fallback h=-400: %ld of %d queries fell back\n", fb, B * T);
        assert_int_equal(fb, T);
        batch_free(&b);
    }

    /* (c) Inputs within the spec's range (|h| <= 20, |J| <= 5), every
     * category, B = 5, T = 14: no fallback at all. */
    for (int cat = 0; cat < NCAT; cat++) {
        batch b = make_batch(inst_seed(4, 2 + cat, 14, 0), 5, 14, 14, cat, 1);
        double *lw = xmalloc((size_t)5 * 14 * 14);
        long fb = -1;
        assert_int_equal(ba_fast_forward(5, 14, b.h, b.J, 14, lw, &fb, NULL), BA_OK);
        if (fb != 0)
            fail_msg("%s B=5 T=14: %ld fallbacks, expected none", cat_name[cat], fb);
        free(lw);
        batch_free(&b);
    }
    print_message("fallback cases: worst |logw fast - ref| %.1e; backward relative dh %.1e, dJ "
                  "%.1e, %.2f of bound\n",
                  worst_abs, w.dh, w.dJ, w.excess);
}

/* ---------------------------------------------------------- 5. determinism */

static void set_threads(int n)
{
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

static int get_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* max |a - b| / (1 + |b|); non-finite entries must match bit for bit. */
static double max_close(const double *a, const double *b, size_t len)
{
    double e = 0.0;
    for (size_t i = 0; i < len; i++) {
        if (!isfinite(b[i])) {
            if (memcmp(&a[i], &b[i], sizeof(double)) != 0)
                return INFINITY;
            continue;
        }
        e = fmax(e, fabs(a[i] - b[i]) / (1.0 + fabs(b[i])));
    }
    return e;
}

static void test_determinism(void **state)
{
    (void)state;
    int saved = get_threads();
    /* B = 160, T = 16 takes the per-query loops over the threading
     * threshold (BA_PAR_MIN_WORK); B = 1, T = 20 the kernel build. */
    const int shapes[][2] = {{5, 14}, {160, 16}, {1, 20}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int B = shapes[s][0], T = shapes[s][1], ld = T + 1;
        batch b = make_batch(inst_seed(5, 0, T, B), B, T, ld, CAT_UNIFORM, 0);
        size_t BTT = (size_t)B * T * T, jl = (size_t)T * ld;
        outputs o2a, o2b, o1, oc;
        set_threads(2);
        run_fast(NULL, B, T, b.h, b.J, ld, b.g, &o2a);
        run_fast(NULL, B, T, b.h, b.J, ld, b.g, &o2b);
        outputs_equal(&o2a, &o2b, B, T, ld, "same call twice");
        set_threads(1);
        run_fast(NULL, B, T, b.h, b.J, ld, b.g, &o1);
        /* A context whose forward ran on 1 thread and backward on 2. */
        ba_engine_ctx *c = ba_engine_ctx_new();
        assert_non_null(c);
        outputs_init(&oc, B, T, ld);
        assert_int_equal(
            ba_engine_forward_ctx(c, BA_ENGINE_FAST, B, T, b.h, b.J, ld, oc.logw, NULL), BA_OK);
        set_threads(2);
        assert_int_equal(ba_engine_backward_ctx(c, BA_ENGINE_FAST, B, T, b.h, b.J, ld, b.g,
                                                oc.dh, oc.dJ, NULL),
                         BA_OK);
        ba_engine_ctx_free(c);
        set_threads(saved);

        int same = !memcmp(o1.logw, o2a.logw, sizeof(double) * BTT) &&
                   !memcmp(o1.dh, o2a.dh, sizeof(double) * BTT) &&
                   !memcmp(o1.dJ, o2a.dJ, sizeof(double) * jl);
        double el = max_close(o1.logw, o2a.logw, BTT), edh = max_close(o1.dh, o2a.dh, BTT);
        double edJ = max_close(o1.dJ, o2a.dJ, jl);
        double ec = fmax(max_close(oc.logw, o2a.logw, BTT),
                         fmax(max_close(oc.dh, o2a.dh, BTT), max_close(oc.dJ, o2a.dJ, jl)));
        print_message("determinism B=%d T=%d: same call twice bit-identical; 1 vs 2 threads %s "
                      "(logw %.1e, dh %.1e, dJ %.1e); context 1-then-2 threads %.1e\n",
                      B, T, same ? "bit-identical" : "not bit-identical", el, edh, edJ, ec);
        if (!(el < 1e-12 && edh < 1e-12 && edJ < 1e-12 && ec < 1e-12))
            fail_msg("B=%d T=%d: 1 vs 2 threads: logw %.3e, dh %.3e, dJ %.3e, context %.3e", B, T,
                     el, edh, edJ, ec);
        outputs_free(&o2a), outputs_free(&o2b), outputs_free(&o1), outputs_free(&oc);
        batch_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_context),
        cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_determinism),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
