/* Every engine of the engine table (src/ising/engine.c), through its
 * interface (ba_engine_ops): the tests iterate the table, so a new engine
 * is tested by adding its line there.
 *
 * For each engine, on B = 2 batch elements of T = 6 keys (within every
 * engine's max_spins), random fields and couplings:
 *   forward   against a brute force over the 2^n states of each row,
 *             written here in long double. Exact engines: |expm1(logw -
 *             log P)| < 1e-10. Approximate engines, at weak couplings (std
 *             0.05, fields std 0.5) where mean field is close:
 *             |w - P| < 0.02 in probability, and every value finite;
 *   backward  against central finite differences (eps 1e-5) of the same
 *             engine's forward, of L = sum g m with m = 2w - 1:
 *             ||analytic - fd|| / ||fd|| < 1e-6 for exact engines, < 1e-4
 *             for the approximate ones (iterated to tol 1e-13: the
 *             difference quotient of an iterate carries tol / eps);
 *   lookups   number <-> name round trips, the public ba_engine_info
 *             against the table, auto a rule and not a row;
 *   refusals  an unknown number (the interface, ba_ising_solve, the
 *             config), T above an enumerating engine's max_spins
 *             (BA_ERR_LIMIT naming the engine), and above any engine's
 *             limit without a band in a model config. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ising/ising.h"
#include "stop_after.h"

#define B 2
#define T 6
#define FD_EPS 1e-5

typedef struct {
    double h[B * T * T], J[T * T], g[B * T * T];
} inputs;

static void make_inputs(uint64_t seed, double hstd, double jstd, inputs *in)
{
    ba_rng r;
    ba_rng_seed(&r, seed);
    memset(in, 0, sizeof *in);
    for (int q = 0; q < B * T; q++)
        for (int j = 0; j <= q % T; j++) {
            in->h[q * T + j] = hstd * ba_rng_normal(&r);
            in->g[q * T + j] = ba_rng_normal(&r);
        }
    for (int j = 0; j < T; j++)
        for (int k = j + 1; k < T; k++)
            in->J[j * T + k] = jstd * ba_rng_normal(&r);
}

/* P(s_j = +1) of row q's system (n = q % T + 1 spins), by enumeration. */
static void brute_row(const inputs *in, int q, long double *p)
{
    int n = q % T + 1;
    const double *h = in->h + q * T;
    long double z = 0, up[T] = {0};
    for (unsigned s = 0; s < 1u << n; s++) {
        long double e = 0;
        for (int j = 0; j < n; j++) {
            int sj = (s >> j & 1) ? 1 : -1;
            e += h[j] * sj;
            for (int k = j + 1; k < n; k++)
                e += in->J[j * T + k] * sj * ((s >> k & 1) ? 1 : -1);
        }
        long double w = expl(e);
        z += w;
        for (int j = 0; j < n; j++)
            if (s >> j & 1)
                up[j] += w;
    }
    for (int j = 0; j < n; j++)
        p[j] = up[j] / z;
}

/* The rows an engine of o runs on in: dense couplings, the whole window
 * for a band engine (exact on full-range couplings at T = 6), a window of
 * 2 for a windowed one, settings iterated far below the tests' tolerance. */
static ba_engine_rows rows_for(const ba_engine_ops *o, const inputs *in, const ba_approx *a,
                               ba_engine_ctx *ctx)
{
    int W = (o->caps & BA_ENGINE_CAP_BAND) ? T - 1 : (o->caps & BA_ENGINE_CAP_WINDOW) ? 2 : 0;
    ba_engine_rows r = {B, T, in->h, in->J, T, 0, W, a, ctx, NULL, T - 1, NULL, NULL, 0};
    return r;
}

static ba_approx tight(void)
{
    ba_approx a = ba_approx_default();
    a.tol = 1e-13;
    a.max_iter = 100000;
    return a;
}

/* L = sum over rows' entries j <= i of g (2 w - 1), by o's forward. */
static double loss(const ba_engine_ops *o, const inputs *in)
{
    ba_approx a = tight();
    ba_engine_rows r = rows_for(o, in, &a, NULL);
    double logw[B * T * T];
    char err[BA_ERR_LEN];
    int rc = o->forward(&r, logw, err);
    if (rc)
        fail_msg("%s forward: %s", o->name, err);
    double L = 0;
    for (int q = 0; q < B * T; q++)
        for (int j = 0; j <= q % T; j++)
            L += in->g[q * T + j] * (2.0 * exp(logw[q * T + j]) - 1.0);
    return L;
}

/* ----------------------------------------------------------- the table */

static void test_lookups(void **state)
{
    (void)state;
    int n = ba_engine_count();
    assert_true(n >= 1);
    for (int i = 0; i < n; i++) {
        ba_engine id;
        const char *name, *summary;
        int lim;
        unsigned caps;
        assert_int_equal(ba_engine_info(i, &id, &name, &summary, &lim, &caps), BA_OK);
        const ba_engine_ops *o = ba_engine_at(i);
        assert_non_null(o);
        assert_ptr_equal(ba_engine_ops_of(id), o);
        assert_ptr_equal(ba_engine_ops_named(name), o);
        assert_string_equal(ba_engine_name(id), name);
        assert_true(strlen(summary) > 0);
        assert_int_equal(lim, o->max_spins);
        assert_int_equal(ba_engine_max_spins(id), lim);
        assert_int_equal(caps, ba_engine_caps(id));
        assert_int_equal(ba_engine_is_approx(id), (caps & BA_ENGINE_CAP_APPROX) != 0);
        assert_true(id != BA_ENGINE_AUTO);
        assert_non_null(o->forward);
        assert_non_null(o->backward);
        ba_engine back;
        assert_int_equal(ba_engine_parse(name, &back, NULL), BA_OK);
        assert_int_equal(back, id);
        for (int k = 0; k < i; k++) /* numbers and names unique, in order */
            assert_true(ba_engine_at(k)->id < id && strcmp(ba_engine_at(k)->name, name) != 0);
    }
    assert_int_equal(ba_engine_info(-1, NULL, NULL, NULL, NULL, NULL), BA_ERR_ARG);
    assert_int_equal(ba_engine_info(n, NULL, NULL, NULL, NULL, NULL), BA_ERR_ARG);
    assert_null(ba_engine_at(n));
    /* auto: a rule (band with a band, else fast), parsed but not a row */
    ba_engine e;
    assert_int_equal(ba_engine_parse("auto", &e, NULL), BA_OK);
    assert_int_equal(e, BA_ENGINE_AUTO);
    assert_null(ba_engine_ops_of(BA_ENGINE_AUTO));
    assert_int_equal(ba_engine_max_spins(BA_ENGINE_AUTO), ba_engine_max_spins(BA_ENGINE_FAST));
    char err[BA_ERR_LEN] = "";
    assert_int_equal(ba_engine_parse("quantum", &e, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "unknown engine 'quantum'"));
    for (int i = 0; i < n; i++)
        assert_non_null(strstr(err, ba_engine_at(i)->name));
}

/* ------------------------------------------------------ every engine */

static void test_forward_every_engine(void **state)
{
    (void)state;
    for (int i = 0; ba_engine_at(i); i++) {
        const ba_engine_ops *o = ba_engine_at(i);
        assert_true(o->max_spins >= T);
        int exact = (o->caps & BA_ENGINE_CAP_EXACT) != 0;
        for (uint64_t seed = 1; seed <= 5; seed++) {
            inputs in;
            make_inputs(seed, exact ? 1.0 : 0.5, exact ? 0.7 : 0.05, &in);
            ba_approx a = tight();
            ba_approx_stats st = {0, 0, 0, 0, 0};
            ba_engine_rows r = rows_for(o, &in, &a, NULL);
            r.stats = &st;
            double logw[B * T * T];
            char err[BA_ERR_LEN] = "";
            int rc = o->forward(&r, logw, err);
            if (rc)
                fail_msg("%s forward: %s", o->name, err);
            double worst = 0;
            for (int q = 0; q < B * T; q++) {
                long double p[T];
                brute_row(&in, q, p);
                for (int j = 0; j <= q % T; j++) {
                    double lw = logw[q * T + j];
                    assert_true(isfinite(lw) && lw <= 0);
                    double d = exact ? fabs(expm1(lw - (double)logl(p[j])))
                                     : fabs(exp(lw) - (double)p[j]);
                    worst = d > worst ? d : worst;
                }
            }
            if (worst > (exact ? 1e-10 : 0.02))
                fail_msg("%s seed %d: forward off by %g", o->name, (int)seed, worst);
            /* the approximate engines count every row, converged */
            if (o->caps & BA_ENGINE_CAP_APPROX) {
                assert_int_equal(st.queries, B * T);
                assert_int_equal(st.unconverged, 0);
            } else {
                assert_int_equal(st.queries, 0);
            }
        }
    }
}

static double rel_err(const double *a, const double *b, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++)
        num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
    return sqrt(num / (den > 0 ? den : 1));
}

static void test_backward_every_engine(void **state)
{
    (void)state;
    for (int i = 0; ba_engine_at(i); i++) {
        const ba_engine_ops *o = ba_engine_at(i);
        int exact = (o->caps & BA_ENGINE_CAP_EXACT) != 0;
        inputs in;
        make_inputs(11 + i, exact ? 1.0 : 0.5, exact ? 0.5 : 0.05, &in);
        /* analytic: forward then backward, on a context where it keeps one */
        ba_engine_ctx *ctx = (o->caps & BA_ENGINE_CAP_CONTEXT) ? ba_engine_ctx_new() : NULL;
        ba_approx a = tight();
        ba_engine_rows r = rows_for(o, &in, &a, ctx);
        double logw[B * T * T], dh[B * T * T] = {0}, dJ[T * T] = {0};
        char err[BA_ERR_LEN] = "";
        int rc = o->forward(&r, logw, err);
        if (rc == BA_OK)
            rc = o->backward(&r, in.g, dh, dJ, err);
        ba_engine_ctx_free(ctx);
        if (rc)
            fail_msg("%s backward: %s", o->name, err);
        /* the same entries by central differences of the forward */
        enum { NH = B * T * T, NJ = T * T };
        double an[NH + NJ], fd[NH + NJ];
        int m = 0;
        for (int q = 0; q < B * T; q++)
            for (int j = 0; j <= q % T; j++, m++) {
                double *x = &in.h[q * T + j], x0 = *x;
                *x = x0 + FD_EPS;
                double lp = loss(o, &in);
                *x = x0 - FD_EPS;
                double lm = loss(o, &in);
                *x = x0;
                fd[m] = (lp - lm) / (2 * FD_EPS), an[m] = dh[q * T + j];
            }
        for (int j = 0; j < T; j++)
            for (int k = j + 1; k < T; k++, m++) {
                double *x = &in.J[j * T + k], x0 = *x;
                *x = x0 + FD_EPS;
                double lp = loss(o, &in);
                *x = x0 - FD_EPS;
                double lm = loss(o, &in);
                *x = x0;
                fd[m] = (lp - lm) / (2 * FD_EPS), an[m] = dJ[j * T + k];
            }
        double e = rel_err(an, fd, m), tol = exact ? 1e-6 : 1e-4;
        if (!(e < tol))
            fail_msg("%s: backward against finite differences %g (tolerance %g)", o->name, e,
                     tol);
    }
}

/* ---------------------------------------------------------- refusals */

static void test_refusals(void **state)
{
    (void)state;
    static double J[32 * 32], logw[32 * 32];
    char err[BA_ERR_LEN] = "";
    /* an unknown number: the by-number entry points and the model config */
    ba_engine bad = (ba_engine)99;
    assert_int_equal(ba_engine_forward(bad, 1, 4, NULL, J, 32, logw, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "99"));
    err[0] = 0;
    assert_int_equal(ba_ising_solve(bad, 0, NULL, 4, NULL, J, 32, logw, NULL, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "99"));
    ba_config c = ba_config_default(BA_ATTN_BOLTZMANN, 8);
    c.engine = bad;
    err[0] = 0;
    assert_int_equal(ba_config_validate(&c, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "99"));
    assert_string_equal(ba_engine_name(bad), "?");
    assert_int_equal(ba_engine_max_spins(bad), 0);
    assert_int_equal(ba_engine_caps(bad), 0);
    for (int i = 0; ba_engine_at(i); i++) {
        const ba_engine_ops *o = ba_engine_at(i);
        /* an enumerating engine refuses a row past its max_spins */
        if ((o->caps & BA_ENGINE_CAP_ENUMERATE) && o->max_spins < 32) {
            ba_approx a = ba_approx_default();
            ba_engine_rows r = {1, o->max_spins + 1, NULL, J, 32, 0, 0, &a, NULL, NULL, 0, NULL,
                                NULL, 0};
            err[0] = 0;
            assert_int_equal(o->forward(&r, logw, err), BA_ERR_LIMIT);
            assert_non_null(strstr(err, o->name));
        }
        /* a model without a band past the engine's limit, named */
        if (o->max_spins < BA_MAX_BLOCK) {
            c = ba_config_default(BA_ATTN_BOLTZMANN, o->max_spins + 1);
            c.engine = o->id;
            c.vocab_size = c.out_size = 4;
            err[0] = 0;
            assert_int_equal(ba_config_validate(&c, err), BA_ERR_LIMIT);
            if (!strstr(err, o->name))
                fail_msg("%s: the limit's message does not name it: %s", o->name, err);
            c.block_size = o->max_spins;
            assert_int_equal(ba_config_validate(&c, err), BA_OK);
        }
    }
}

/* ------------------------------------------------------- stop requests */


/* Every engine polls the caller's stop: asked at once, its forward and
 * backward end with BA_ERR_INTERRUPTED and a message naming it; asked
 * after the first poll, the same (a stop inside the call); never asked,
 * the result is the one without a stop, bit for bit. */
static void test_stop_every_engine(void **state)
{
    (void)state;
    for (int i = 0; ba_engine_at(i); i++) {
        const ba_engine_ops *o = ba_engine_at(i);
        inputs in;
        make_inputs(7, 0.5, 0.05, &in);
        ba_approx a = tight();
        ba_engine_ctx *ctx = (o->caps & BA_ENGINE_CAP_CONTEXT) ? ba_engine_ctx_new() : NULL;
        ba_engine_rows r = rows_for(o, &in, &a, ctx);
        double plain[B * T * T], lw[B * T * T], dh[B * T * T], dJ[T * T];
        char err[BA_ERR_LEN] = "";
        if (o->forward(&r, plain, err))
            fail_msg("%s forward: %s", o->name, err);
        for (long after = 0; after <= 1; after++) {
            stop_after sa = {0, after};
            ba_stop st = {stop_after_requested, &sa};
            r.stop = &st;
            err[0] = 0;
            int rc = o->forward(&r, lw, err);
            if (rc != BA_ERR_INTERRUPTED || !strstr(err, "stopped on request"))
                fail_msg("%s forward, stop after %ld polls: status %d, '%s'", o->name, after,
                         rc, err);
            if (!strstr(err, o->name))
                fail_msg("%s: the stop's message does not name it: %s", o->name, err);
            sa.polls = 0;
            memset(dh, 0, sizeof dh);
            memset(dJ, 0, sizeof dJ);
            rc = o->backward(&r, in.g, dh, dJ, err);
            if (rc != BA_ERR_INTERRUPTED)
                fail_msg("%s backward, stop after %ld polls: status %d, '%s'", o->name, after,
                         rc, err);
        }
        stop_after never = {0, 1L << 40};
        ba_stop st = {stop_after_requested, &never};
        r.stop = &st;
        assert_int_equal(o->forward(&r, lw, err), BA_OK);
        assert_true(never.polls > 1); /* it was asked, between queries */
        for (int q = 0; q < B * T; q++)
            for (int j = 0; j <= q % T; j++)
                assert_memory_equal(&lw[q * T + j], &plain[q * T + j], sizeof(double));
        ba_engine_ctx_free(ctx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookups),
        cmocka_unit_test(test_forward_every_engine),
        cmocka_unit_test(test_backward_every_engine),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_stop_every_engine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
