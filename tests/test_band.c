/* Tests of the band engine (src/ising/band.c, src/ising/band_lin.c; spec
 * section 8, "Exact chain inference for range W"): the two paths behind
 * ba_band_forward and ba_band_backward (ba_band_forward_path /
 * ba_band_backward_path: the log-space path, the linear-space path, and the
 * guard that chooses between them), the band-layout twins
 * ba_band_forward_jb and ba_band_backward_jb against the dense layout,
 * non-finite inputs and bad arguments. The dense entry points against the
 * reference, finite differences, a long chain and J = 0 are tested in
 * test_band_dense.c.
 *
 * Expected values come from the reference engine (full enumeration, the
 * oracle) run on the same couplings with every entry beyond the band set to
 * zero, and from the other path.
 *
 * Tolerances (stated next to each check):
 *   twins      logw: |expm1(logw_band - logw_ref)| < 1e-12 per entry;
 *              dh, dJ: |band - ref| < 1e-12 * (1 + max |ref|) per array
 *              (the reference's centred sums carry an absolute rounding of
 *              about 1e-16 times the spread of G, so a purely elementwise
 *              relative bound would measure the oracle, not the engine);
 *              the same for each path (log, linear, auto) separately;
 *   paths      linear vs log at n = 1024 and 4096: logw as the twins,
 *              dh, dJ scaled as the twins, all < 1e-10;
 *   guard, threads, layouts: bit for bit.
 * The worst values seen are printed. */
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
#include "band_check.h"

/* ------------------------------------------------------------- paths */

static void expect_fail(int rc, int want, const char *err, const char *needle)
{
    assert_int_equal(rc, want);
    if (!strstr(err, needle))
        fail_msg("message \"%s\" does not name \"%s\"", err, needle);
}


/* Jb (T,W) from the dense J (T,T): in-band entries, NaN where d > t (the
 * engine must not read them). */
static void to_band(int T, int W, const double *J, double *Jb)
{
    for (int t = 0; t < T; t++)
        for (int d = 1; d <= W; d++)
            Jb[(size_t)t * W + d - 1] = d <= t ? J[(size_t)(t - d) * T + t] : NAN;
}

/* dJb (T,W) against the dense dJ (T,T) of the reference at the in-band
 * entries: worst scaled error; entries with d > t must hold their initial
 * value (init) bit for bit. */
static double band_err(int T, int W, const double *dJb, const double *dJr, double init)
{
    double mb = 0.0, d = 0.0;
    for (int t = 0; t < T; t++)
        for (int k = 1; k <= W; k++) {
            double v = dJb[(size_t)t * W + k - 1];
            if (k > t) {
                if (memcmp(&v, &init, sizeof v))
                    fail_msg("T=%d W=%d: dJb[%d][%d] (d > t) was written", T, W, t, k - 1);
                continue;
            }
            double ref = dJr[(size_t)(t - k) * T + t];
            mb = fmax(mb, fabs(ref));
            d = fmax(d, fabs(v - ref));
        }
    return d / (1.0 + mb);
}

/* logw of two runs (B,T,T): worst |expm1(a - b)| below the diagonal. */
static double logw_err(int B, int T, const double *a, const double *b)
{
    double worst = 0.0;
    for (size_t q = 0; q < (size_t)B * T; q++)
        for (int j = 0; j <= (int)(q % T); j++) {
            double e = fabs(expm1(a[q * T + j] - b[q * T + j]));
            worst = e > worst || isnan(e) ? e : worst; /* a NaN sticks */
        }
    return worst;
}

/* Each path of the band layout against the reference (to tol) and the
 * linear path and auto against the log path (to TWIN_TOL): B queries
 * blocks of T, band W, ordinary fields N(0, hs^2) and couplings
 * N(0, js^2). worst[0] gathers the errors against the reference, worst[1]
 * those against the log path. */
static void path_case(ba_rng *r, int B, int T, int W, double hs, double js, double tol,
                      twin_err worst[2])
{
    size_t nh = (size_t)B * T * T, nj = (size_t)T * T, nb = (size_t)T * W;
    double *h = alloc_d(nh), *g = alloc_d(nh), *Jg = alloc_d(nj), *Jz = alloc_d(nj);
    double *Jb = alloc_d(nb), *lw = alloc_d(nh), *lr = alloc_d(nh), *dh = alloc_d(nh);
    double *dhr = alloc_d(nh), *dJr = alloc_d(nj), *dJb = alloc_d(nb);
    double *lp = alloc_d(nh), *dhp = alloc_d(nh), *dJp = alloc_d(nb);
    for (size_t i = 0; i < nh; i++) {
        h[i] = hs * ba_rng_normal(r);
        g[i] = ba_rng_normal(r);
    }
    fill_band(r, T, W, js, 1, Jg, Jz);
    to_band(T, W, Jz, Jb);
    char err[BA_ERR_LEN];
    memset(dhr, 0, sizeof(double) * nh);
    memset(dJr, 0, sizeof(double) * nj);
    assert_int_equal(ba_ref_forward(B, T, h, Jz, T, lr, err), BA_OK);
    assert_int_equal(ba_ref_backward(B, T, h, Jz, T, g, dhr, dJr, err), BA_OK);
    const ba_band_path paths[] = {BA_BAND_LOG, BA_BAND_LINEAR, BA_BAND_AUTO};
    for (int p = 0; p < 3; p++) {
        ba_band_stats st = {-1, -1, -1};
        assert_int_equal(ba_band_forward_path(paths[p], W, B, T, h, Jb, lw, &st, err), BA_OK);
        /* ordinary inputs: every query takes the linear path on auto */
        long want_lin = paths[p] == BA_BAND_LOG ? 0 : (long)B * T;
        assert_int_equal(st.linear, want_lin);
        assert_int_equal(st.log, (long)B * T - want_lin);
        double el = logw_err(B, T, lw, lr);
        memset(dh, 0, sizeof(double) * nh);
        for (size_t i = 0; i < nb; i++)
            dJb[i] = 0.25; /* += and d > t untouched */
        assert_int_equal(ba_band_backward_path(paths[p], W, B, T, h, Jb, g, dh, dJb, NULL, err),
                         BA_OK);
        for (size_t i = 0; i < nb; i++)
            if ((int)(i % W) + 1 <= (int)(i / W))
                dJb[i] -= 0.25;
        double edh = scaled_err(dh, dhr, nh, NULL), edj = band_err(T, W, dJb, dJr, 0.25);
        worst[0].logw = fmax(worst[0].logw, el);
        worst[0].dh = fmax(worst[0].dh, edh);
        worst[0].dJ = fmax(worst[0].dJ, edj);
        if (!(el < tol && edh < tol && edj < tol))
            fail_msg("path %d T=%d W=%d: logw %.3e, dh %.3e, dJ %.3e", p, T, W, el, edh, edj);
        if (p == 0) { /* the log path's results, for the others to match */
            memcpy(lp, lw, sizeof(double) * nh);
            memcpy(dhp, dh, sizeof(double) * nh);
            memcpy(dJp, dJb, sizeof(double) * nb);
            continue;
        }
        el = logw_err(B, T, lw, lp);
        edh = scaled_err(dh, dhp, nh, NULL);
        edj = scaled_err(dJb, dJp, nb, NULL);
        worst[1].logw = fmax(worst[1].logw, el);
        worst[1].dh = fmax(worst[1].dh, edh);
        worst[1].dJ = fmax(worst[1].dJ, edj);
        if (!(el < TWIN_TOL && edh < TWIN_TOL && edj < TWIN_TOL))
            fail_msg("path %d vs log, T=%d W=%d: logw %.3e, dh %.3e, dJ %.3e", p, T, W, el, edh,
                     edj);
    }
    free(h), free(g), free(Jg), free(Jz), free(Jb), free(lw), free(lr), free(dh), free(dhr);
    free(dJr), free(dJb), free(lp), free(dhp), free(dJp);
}

/* T <= 18 to TWIN_TOL against the reference; at T = 20 the reference's
 * own rounding (it updates energies along 2^20 states) reaches ~1e-12, so
 * there the paths meet it to 1e-11 and each other to TWIN_TOL. */
static void test_paths_reference(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 606);
    twin_err worst[2] = {{0, 0, 0}, {0, 0, 0}};
    const int Ws[] = {1, 2, 4, 8};
    for (size_t w = 0; w < sizeof Ws / sizeof Ws[0]; w++) {
        /* h ~ N(0, 1.5^2), J ~ N(0, 0.3^2); |h| ~ 3, |J| ~ 0.5 */
        path_case(&r, 2, 12, Ws[w], 1.5, 0.3, TWIN_TOL, worst);
        path_case(&r, 1, 16, Ws[w], 3.0, 0.5, TWIN_TOL, worst);
    }
    path_case(&r, 1, 20, 4, 1.5, 0.3, 1e-11, worst);
    path_case(&r, 1, 14, 13, 1.5, 0.3, TWIN_TOL, worst); /* W = T-1: the full model */
    path_case(&r, 1, 18, 16, 3.0, 0.5, TWIN_TOL, worst); /* W > T-1 */
    path_case(&r, 1, 20, 16, 1.5, 0.3, 1e-11, worst);
    path_case(&r, 3, 1, 3, 1.5, 0.3, TWIN_TOL, worst);   /* T = 1 */
    print_message("paths vs reference: logw rel %.2e, dh %.2e, dJ %.2e\n", worst[0].logw,
                  worst[0].dh, worst[0].dJ);
    print_message("linear and auto vs log: logw rel %.2e, dh %.2e, dJ %.2e\n", worst[1].logw,
                  worst[1].dh, worst[1].dJ);
}

/* The linear path against the log path on one long head: B = 1, T
 * queries, band W, ordinary inputs; the backward only when bwd is set. */
static void paths_long(ba_rng *r, int T, int W, int bwd, twin_err *worst)
{
    size_t nh = (size_t)T * T, nb = (size_t)T * W;
    double *h = alloc_d(nh), *g = alloc_d(nh), *Jb = alloc_d(nb), *lw[2], *dh[2], *dJb[2];
    for (size_t i = 0; i < nh; i++) {
        h[i] = 1.5 * ba_rng_normal(r);
        g[i] = ba_rng_normal(r);
    }
    for (size_t i = 0; i < nb; i++)
        Jb[i] = (int)(i % W) < (int)(i / W) ? 0.3 * ba_rng_normal(r) : NAN;
    const ba_band_path paths[2] = {BA_BAND_LOG, BA_BAND_LINEAR};
    for (int p = 0; p < 2; p++) {
        lw[p] = alloc_d(nh);
        assert_int_equal(ba_band_forward_path(paths[p], W, 1, T, h, Jb, lw[p], NULL, NULL), BA_OK);
        dh[p] = dJb[p] = NULL;
        if (!bwd)
            continue;
        dh[p] = calloc(nh, sizeof(double)), dJb[p] = calloc(nb, sizeof(double));
        assert_non_null(dh[p]);
        assert_non_null(dJb[p]);
        assert_int_equal(ba_band_backward_path(paths[p], W, 1, T, h, Jb, g, dh[p], dJb[p], NULL,
                                               NULL),
                         BA_OK);
    }
    double el = logw_err(1, T, lw[1], lw[0]), edh = 0.0, edj = 0.0;
    if (bwd) {
        edh = scaled_err(dh[1], dh[0], nh, NULL);
        edj = scaled_err(dJb[1], dJb[0], nb, NULL);
    }
    worst->logw = fmax(worst->logw, el);
    worst->dh = fmax(worst->dh, edh);
    worst->dJ = fmax(worst->dJ, edj);
    if (!(el < LONG_TOL && edh < LONG_TOL && edj < LONG_TOL))
        fail_msg("linear vs log T=%d W=%d: logw %.3e, dh %.3e, dJ %.3e", T, W, el, edh, edj);
    for (int p = 0; p < 2; p++)
        free(lw[p]), free(dh[p]), free(dJb[p]);
    free(h), free(g), free(Jb);
}

/* n = 1024 (every query of a T = 1024 head, forward and backward) and
 * n = 4096 (the forward of a T = 4096 head: the log path's backward there
 * would take seconds). */
static void test_paths_long(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 707);
    twin_err worst = {0, 0, 0};
    paths_long(&r, 1024, 4, 1, &worst);
    paths_long(&r, 4096, 2, 0, &worst);
    print_message("linear vs log, n = 1024 and 4096: logw rel %.2e, dh %.2e, dJ %.2e\n",
                  worst.logw, worst.dh, worst.dJ);
}

/* The guard: auto sends each query to the path its bound allows, and its
 * output there is that path's, bit for bit. Batch element 0 holds
 * ordinary fields (every query linear); element 1 fields up to +-80 (past the
 * bound once a window holds a few of them: log) but for its first few
 * queries. */
static void test_guard_routes(void **state)
{
    (void)state;
    enum { B = 2, T = 40, W = 8 };
    ba_rng r;
    ba_rng_seed(&r, 808);
    size_t nh = (size_t)B * T * T, nb = (size_t)T * W;
    double *h = alloc_d(nh), *g = alloc_d(nh), *Jb = alloc_d(nb), *lw[3], *dh[3];
    for (size_t i = 0; i < nh; i++) {
        h[i] = i < nh / 2 ? 1.5 * ba_rng_normal(&r) : uniform(&r, 80.0);
        g[i] = ba_rng_normal(&r);
    }
    for (size_t i = 0; i < nb; i++)
        Jb[i] = (int)(i % W) < (int)(i / W) ? 0.3 * ba_rng_normal(&r) : NAN;
    double jb = ba_band_lin_jbound(W, T, Jb, W);
    long want_log = 0;
    unsigned char lin[B * T];
    for (int q = 0; q < B * T; q++) {
        lin[q] = ba_band_lin_hbound(W, q % T + 1, h + (size_t)q * T) + jb <= BA_BAND_LIN_MAX_NATS;
        want_log += !lin[q];
        if (q < T)
            assert_true(lin[q]);
    }
    assert_true(want_log >= T - 8); /* element 1: all but its shortest queries */
    const ba_band_path paths[3] = {BA_BAND_LOG, BA_BAND_LINEAR, BA_BAND_AUTO};
    for (int p = 0; p < 3; p++) {
        ba_band_stats st = {-1, -1, -1};
        lw[p] = alloc_d(nh), dh[p] = calloc(nh, sizeof(double));
        assert_non_null(dh[p]);
        assert_int_equal(ba_band_forward_path(paths[p], W, B, T, h, Jb, lw[p], &st, NULL), BA_OK);
        if (p == 2) {
            assert_int_equal(st.log, want_log);
            assert_int_equal(st.linear, B * T - want_log);
        }
        assert_int_equal(ba_band_backward_path(paths[p], W, B, T, h, Jb, g, dh[p], NULL, &st,
                                               NULL),
                         BA_OK);
    }
    for (int q = 0; q < B * T; q++) {
        size_t row = (size_t)q * T;
        int src = lin[q] ? 1 : 0;
        if (memcmp(lw[2] + row, lw[src] + row, sizeof(double) * T) ||
            memcmp(dh[2] + row, dh[src] + row, sizeof(double) * T))
            fail_msg("query %d: auto differs from the %s path it was sent to", q,
                     lin[q] ? "linear" : "log");
    }
    /* and where auto took the linear path it agrees with the log path */
    assert_true(logw_err(B, T, lw[2], lw[0]) < TWIN_TOL);
    print_message("guard: %ld of %d queries to the log path\n", want_log, B * T);
    for (int p = 0; p < 3; p++)
        free(lw[p]), free(dh[p]);
    free(h), free(g), free(Jb);
}

/* The band layout equals the dense one bit for bit (one implementation
 * serves both), on a mix of linear and log queries, with 1 and 2 threads. */
static void test_layouts_threads(void **state)
{
    (void)state;
    enum { B = 2, T = 50, W = 5 };
    ba_rng r;
    ba_rng_seed(&r, 909);
    size_t nh = (size_t)B * T * T, nj = (size_t)T * T, nb = (size_t)T * W;
    double *h = alloc_d(nh), *g = alloc_d(nh), *J = alloc_d(nj), *Jz = alloc_d(nj);
    double *Jb = alloc_d(nb);
    for (size_t i = 0; i < nh; i++) {
        /* batch element 1: fields past the guard on its longer queries */
        h[i] = i < nh / 2 ? 1.5 * ba_rng_normal(&r) : uniform(&r, 60.0);
        g[i] = ba_rng_normal(&r);
    }
    fill_band(&r, T, W, 0.5, 1, J, Jz);
    to_band(T, W, Jz, Jb);
    int saved = omp_get_max_threads();
    double *lw[3], *dh[3], *dJ[3];
    for (int k = 0; k < 3; k++) {
        /* k = 0, 1: band layout on 1 and 2 threads; k = 2: dense, 2 threads */
        omp_set_num_threads(k == 0 ? 1 : 2);
        lw[k] = alloc_d(nh), dh[k] = calloc(nh, sizeof(double));
        dJ[k] = calloc(k == 2 ? nj : nb, sizeof(double));
        assert_non_null(dh[k]);
        assert_non_null(dJ[k]);
        ba_band_stats st = {0, 0, 0};
        if (k < 2) {
            assert_int_equal(ba_band_forward_path(BA_BAND_AUTO, W, B, T, h, Jb, lw[k], &st, NULL),
                             BA_OK);
            assert_true(st.log > 0 && st.linear > 0);
            assert_int_equal(ba_band_backward_jb(W, B, T, h, Jb, g, dh[k], dJ[k], NULL), BA_OK);
        } else {
            assert_int_equal(ba_band_forward(W, B, T, h, J, T, lw[k], NULL), BA_OK);
            assert_int_equal(ba_band_backward(W, B, T, h, J, T, g, dh[k], dJ[k], NULL), BA_OK);
        }
    }
    omp_set_num_threads(saved);
    for (int k = 1; k < 3; k++) {
        assert_memory_equal(lw[0], lw[k], sizeof(double) * nh);
        assert_memory_equal(dh[0], dh[k], sizeof(double) * nh);
    }
    assert_memory_equal(dJ[0], dJ[1], sizeof(double) * nb);
    for (int t = 0; t < T; t++)
        for (int d = 1; d <= W; d++) {
            double band = dJ[0][(size_t)t * W + d - 1];
            double dense = d <= t ? dJ[2][(size_t)(t - d) * T + t] : 0.0;
            if (memcmp(&band, &dense, sizeof band))
                fail_msg("dJ of pair (%d,%d): band %.17g, dense %.17g", t - d, t, band, dense);
        }
    double *lj = alloc_d(nh);
    assert_int_equal(ba_band_forward_jb(W, B, T, h, Jb, lj, NULL), BA_OK);
    assert_memory_equal(lj, lw[0], sizeof(double) * nh);
    for (int k = 0; k < 3; k++)
        free(lw[k]), free(dh[k]), free(dJ[k]);
    free(h), free(g), free(J), free(Jz), free(Jb), free(lj);
}

/* Non-finite inputs: BA_ERR_NUMERIC naming the value, nothing written;
 * non-finite values where the engine does not read (above the diagonal of
 * h, beyond the band, d > t of Jb) are no error. */
static void test_nonfinite(void **state)
{
    (void)state;
    enum { B = 2, T = 6, W = 2 };
    size_t nh = (size_t)B * T * T, nb = (size_t)T * W;
    double h[B * T * T], g[B * T * T], Jb[T * W], J[T * T], lw[B * T * T], dh[B * T * T];
    double dJb[T * W];
    for (size_t i = 0; i < nh; i++)
        h[i] = (i % T) <= (i / T) % T ? 0.1 * (double)(i % 7) : NAN, g[i] = 1.0;
    for (size_t i = 0; i < nb; i++)
        Jb[i] = (int)(i % W) < (int)(i / W) ? 0.2 : INFINITY;
    for (size_t i = 0; i < (size_t)T * T; i++)
        J[i] = (i % T > i / T && i % T - i / T <= W) ? 0.2 : NAN;
    char err[BA_ERR_LEN];
    assert_int_equal(ba_band_forward_jb(W, B, T, h, Jb, lw, err), BA_OK);
    assert_int_equal(ba_band_forward(W, B, T, h, J, T, lw, err), BA_OK);
    for (size_t i = 0; i < nh; i++)
        lw[i] = dh[i] = 7.0;
    for (size_t i = 0; i < nb; i++)
        dJb[i] = 7.0;
    h[1 * T * T + 4 * T + 2] = NAN; /* b = 1, query i = 4, key j = 2 */
    h[1 * T * T + 5 * T + 0] = INFINITY; /* a later one: the first is named */
    expect_fail(ba_band_forward_jb(W, B, T, h, Jb, lw, err), BA_ERR_NUMERIC, err, "h[1][4][2]");
    expect_fail(ba_band_forward_jb(W, B, T, h, Jb, lw, err), BA_ERR_NUMERIC, err, "nan");
    expect_fail(ba_band_backward_jb(W, B, T, h, Jb, g, dh, dJb, err), BA_ERR_NUMERIC, err,
                "h[1][4][2]");
    expect_fail(ba_band_forward_path(BA_BAND_LOG, W, B, T, h, Jb, lw, NULL, err),
                BA_ERR_NUMERIC, err, "h[1][4][2]");
    expect_fail(ba_band_forward(W, B, T, h, J, T, lw, err), BA_ERR_NUMERIC, err, "h[1][4][2]");
    h[1 * T * T + 4 * T + 2] = 0.5;
    expect_fail(ba_band_forward_jb(W, B, T, h, Jb, lw, err), BA_ERR_NUMERIC, err, "h[1][5][0]");
    expect_fail(ba_band_forward_jb(W, B, T, h, Jb, lw, err), BA_ERR_NUMERIC, err, "inf");
    h[1 * T * T + 5 * T + 0] = 0.5;
    Jb[3 * W + 1] = -INFINITY; /* J_{1,3} */
    expect_fail(ba_band_forward_jb(W, B, T, NULL, Jb, lw, err), BA_ERR_NUMERIC, err,
                "J_{1,3} = -inf");
    expect_fail(ba_band_backward_jb(W, B, T, h, Jb, g, dh, dJb, err), BA_ERR_NUMERIC, err,
                "J_{1,3}");
    J[1 * T + 3] = NAN;
    expect_fail(ba_band_backward(W, B, T, h, J, T, g, dh, NULL, err), BA_ERR_NUMERIC, err,
                "J_{1,3} = nan");
    for (size_t i = 0; i < nh; i++)
        if (lw[i] != 7.0 || dh[i] != 7.0)
            fail_msg("entry %zu written by a failing call", i);
    for (size_t i = 0; i < nb; i++)
        assert_true(dJb[i] == 7.0);
}

/* ------------------------------------------------------------- arguments */

static void test_bad_arguments(void **state)
{
    (void)state;
    enum { T = 4 };
    double h[T * T] = {0}, J[T * T] = {0}, lw[T * T], g[T * T] = {0}, dh[T * T], dJ[T * T];
    char err[BA_ERR_LEN];
    expect_fail(ba_band_forward(0, 1, T, h, J, T, lw, err), BA_ERR_ARG, err, "W = 0");
    expect_fail(ba_band_forward(17, 1, T, h, J, T, lw, err), BA_ERR_ARG, err, "W = 17");
    expect_fail(ba_band_backward(-1, 1, T, h, J, T, g, dh, dJ, err), BA_ERR_ARG, err, "W = -1");
    expect_fail(ba_band_forward(2, 0, T, h, J, T, lw, err), BA_ERR_ARG, err, "B = 0");
    expect_fail(ba_band_forward(2, 1, 0, h, J, T, lw, err), BA_ERR_ARG, err, "T = 0");
    expect_fail(ba_band_forward(2, 1, 8193, h, J, 9000, lw, err), BA_ERR_ARG, err, "T = 8193");
    expect_fail(ba_band_forward(2, 1, T, h, J, 3, lw, err), BA_ERR_ARG, err, "ldj = 3");
    expect_fail(ba_band_forward(2, 1, T, h, NULL, T, lw, err), BA_ERR_ARG, err, "J");
    expect_fail(ba_band_forward(2, 1, T, h, J, T, NULL, err), BA_ERR_ARG, err, "logw");
    expect_fail(ba_band_backward(2, 1, T, h, J, T, NULL, dh, dJ, err), BA_ERR_ARG, err, "g");
    /* 2048 * 2^16 window cells: over the per-thread limit */
    expect_fail(ba_band_forward(16, 1, 2048, h, J, 2048, lw, err), BA_ERR_LIMIT, err,
                "T = 2048");
    /* the band layout's own names, and the path */
    expect_fail(ba_band_forward_jb(2, 1, T, h, NULL, lw, err), BA_ERR_ARG, err, "Jb");
    expect_fail(ba_band_backward_jb(2, 1, T, h, J, NULL, dh, dJ, err), BA_ERR_ARG, err, "g");
    expect_fail(ba_band_forward_path((ba_band_path)7, 2, 1, T, h, J, lw, NULL, err), BA_ERR_ARG,
                err, "path 7");
    expect_fail(ba_band_backward_jb(17, 1, T, h, J, g, dh, dJ, err), BA_ERR_ARG, err, "W = 17");
    /* err may be NULL */
    assert_int_equal(ba_band_forward(0, 1, T, h, J, T, lw, NULL), BA_ERR_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths_reference),  cmocka_unit_test(test_paths_long),
        cmocka_unit_test(test_guard_routes),     cmocka_unit_test(test_layouts_threads),
        cmocka_unit_test(test_nonfinite),        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
