/* Tests of the fast exact engine (spec section 4, src/ising/fast.c) against
 * the reference enumeration (src/ising/ref.c), which is the oracle, and against
 * an exact quad-precision covariance written here (truth_backward).
 *
 * Every instance draws its inputs from its own seed, printed on failure, so
 * a failing case can be rerun alone. Categories of inputs:
 *   random        h ~ N(0, 1), J ~ N(0, 0.5^2) (standard deviation 0.5)
 *   adversarial   h uniform in +-20, J uniform in +-5, and the corners: h all
 *                 +20 or all -20, J all +5 (ferromagnetic) or all -5
 *                 (antiferromagnetic), and fields mixing |h| = 20 with
 *                 |h| ~ 1e-3.
 * Unused entries of J (diagonal, lower triangle, columns >= n when ldj > n)
 * are NaN, so an engine that reads them produces NaN and fails.
 *
 * Tolerances (the engine works in double whatever ba_real is, so this file
 * is built against the float library):
 *   forward   max_j |expm1(logw_fast - logw_ref)| < 1e-9: the relative
 *             error of P(s_j = +1), in log space so tiny marginals do not
 *             underflow. Everywhere, adversarial inputs included.
 *   backward  ||fast - ref||_2 / ||ref||_2 < 1e-9, separately for dh and
 *             for dJ (entries j < k only), strictly for the random inputs.
 *             For the adversarial ones the bound is
 *               ||fast - ref||_2 <= 1e-9 ||ref||_2 + floor,
 *               floor = FLOOR_C (n + E) DBL_EPSILON ||g||_1 sqrt(len),
 *             E = sum |h| + sum |J| (a bound on |log-weight|). That is the
 *             rounding floor of a covariance in double: both engines form
 *             G(s) - <G>, a difference of numbers of size ||g||_1, and the
 *             reference's <G> also carries the rounding of log Z ~ E (it
 *             does not renormalise its probabilities). A saturated system's
 *             covariances (a spin at |h| = 20 has Var(s) ~ 2e-17) lie below
 *             that floor, so a pure relative 1e-9 cannot hold there for
 *             either engine: one spin at h = 8.1 already gives 1.3e-9
 *             between the engines. The reported "above 1e-9" counts show
 *             where the floor was needed (h = NULL's dJ, exactly 0 by
 *             symmetry, needs it even for random inputs). Build with
 *             -DFAST_ENGINE_STRICT=1 to drop the floor and see those cases
 *             fail.
 *   exact     for every single query with n <= TRUTH_ALL_MAXN, and those
 *             that needed the floor up to TRUTH_MAXN, the fast backward is
 *             also checked against truth_backward with the bound
 *             1e-9 ||truth|| + FLOOR_C n eps ||g||_1 sqrt(len) (no E term:
 *             the fast engine normalises by its own Z), and the report says
 *             which engine is closer.
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

#ifndef FAST_ENGINE_STRICT
#define FAST_ENGINE_STRICT 0
#endif

#define FWD_TOL 1e-9
#define BWD_TOL 1e-9
#define FB_TOL 1e-9
#define FLOOR_C 2.0
#define MAXN 20
#define TRUTH_MAXN 12
#define TRUTH_ALL_MAXN 10 /* every instance up to here; floored ones up to TRUTH_MAXN */
#define SENTINEL 12345.0

/* --------------------------------------------------------------- inputs */

enum {
    CAT_RANDOM,  /* h ~ N(0,1), J ~ N(0,0.5) */
    CAT_UNIFORM, /* h ~ U(+-20), J ~ U(+-5) */
    CAT_HPOS,    /* h all +20, J ~ U(+-5) */
    CAT_HNEG,    /* h all -20, J ~ U(+-5) */
    CAT_JFERRO,  /* h ~ U(+-20), J all +5 */
    CAT_JANTI,   /* h ~ U(+-20), J all -5 */
    CAT_CORNERS, /* h all +-20, J all +-5, sign pair by rep */
    CAT_MIXED,   /* h either +-20 or ~N(0,1e-3), J ~ U(+-5) or N(0,0.5) */
    NCAT
};

static const char *const cat_name[NCAT] = {
    "random", "uniform |h|<=20 |J|<=5", "h=+20", "h=-20", "J=+5 ferro",
    "J=-5 antiferro", "corners h=+-20 J=+-5", "mixed huge/small"};

static double unif(ba_rng *r, double a) { return a * (2.0 * ba_rng_uniform(r) - 1.0); }

static double draw_h(ba_rng *r, int cat, int rep)
{
    switch (cat) {
    case CAT_RANDOM: return ba_rng_normal(r);
    case CAT_HPOS: return 20.0;
    case CAT_HNEG: return -20.0;
    case CAT_CORNERS: return (rep & 1) ? 20.0 : -20.0;
    case CAT_MIXED:
        return ba_rng_below(r, 2) ? (ba_rng_below(r, 2) ? 20.0 : -20.0) : 1e-3 * ba_rng_normal(r);
    default: return unif(r, 20.0);
    }
}

static double draw_j(ba_rng *r, int cat, int rep)
{
    switch (cat) {
    case CAT_RANDOM: return 0.5 * ba_rng_normal(r);
    case CAT_JFERRO: return 5.0;
    case CAT_JANTI: return -5.0;
    case CAT_CORNERS: return (rep & 2) ? 5.0 : -5.0;
    case CAT_MIXED: return (rep & 1) ? unif(r, 5.0) : 0.5 * ba_rng_normal(r);
    default: return unif(r, 5.0);
    }
}

/* J (rows x ld): used entries j < k < n from the category, NaN elsewhere. */
static void fill_J(ba_rng *r, double *J, int rows, int n, int ld, int cat, int rep)
{
    for (int j = 0; j < rows; j++)
        for (int k = 0; k < ld; k++)
            J[(size_t)j * ld + k] = (j < k && k < n) ? draw_j(r, cat, rep) : NAN;
}

/* A (B,T,T) array of fields (category cat) or of upstream gradients
 * (N(0,1)), NaN above the diagonal: those entries belong to no query. */
static void fill_batch(ba_rng *r, double *x, int B, int T, int cat, int rep, int is_g)
{
    for (int q = 0; q < B * T; q++)
        for (int j = 0; j < T; j++)
            x[(size_t)q * T + j] =
                j <= q % T ? (is_g ? ba_rng_normal(r) : draw_h(r, cat, rep)) : NAN;
}

static uint64_t inst_seed(int test, int cat, int n, int rep)
{
    return ((uint64_t)test << 48) | ((uint64_t)cat << 32) | ((uint64_t)n << 16) | (uint64_t)rep;
}

static double *xmalloc(size_t count)
{
    double *p = malloc(sizeof(double) * (count ? count : 1));
    assert_non_null(p);
    return p;
}

/* ------------------------------------------------------------- measures */

/* max_j |expm1(a_j - b_j)|; INFINITY if anything is not finite. */
static double fwd_err(const double *a, const double *b, int n)
{
    double e = 0.0;
    for (int j = 0; j < n; j++) {
        if (!isfinite(a[j]) || !isfinite(b[j]))
            return INFINITY;
        e = fmax(e, fabs(expm1(a[j] - b[j])));
    }
    return e;
}

/* ||a - ref||_2 / (BWD_TOL ||ref||_2 + floor): must stay below 1. *pure
 * gets ||a - ref|| / ||ref|| (0 if both are equal, INFINITY if ref = 0 and
 * a is not). Non-finite entries give INFINITY for both. */
static double bwd_excess(const double *a, const double *ref, size_t len, double floor,
                         double *pure)
{
    double d = 0.0, nr = 0.0;
    for (size_t i = 0; i < len; i++) {
        if (!isfinite(a[i]) || !isfinite(ref[i])) {
            *pure = INFINITY;
            return INFINITY;
        }
        d += (a[i] - ref[i]) * (a[i] - ref[i]);
        nr += ref[i] * ref[i];
    }
    if (d == 0.0) {
        *pure = 0.0;
        return 0.0;
    }
    *pure = nr > 0.0 ? sqrt(d / nr) : INFINITY;
    double bound = BWD_TOL * sqrt(nr) + floor;
    return bound > 0.0 ? sqrt(d) / bound : INFINITY;
}

/* Rounding floor of len covariances of one query of n spins (header):
 * FLOOR_C eps ||g||_1 sqrt(len) times n, plus E = sum |h_j| +
 * sum_{j<k} |J_jk| when energy is set. 0 in strict builds. */
static double bwd_floor(int n, const double *h, const double *J, int ld, const double *g,
                        size_t len, int energy)
{
    if (FAST_ENGINE_STRICT)
        return 0.0;
    double gs = 0.0, E = 0.0;
    for (int j = 0; j < n; j++) {
        gs += fabs(g[j]);
        if (energy && h)
            E += fabs(h[j]);
        for (int k = j + 1; energy && k < n; k++)
            E += fabs(J[(size_t)j * ld + k]);
    }
    return FLOOR_C * (n + E) * DBL_EPSILON * gs * sqrt((double)len);
}

/* Packs the used entries (j < k < n) of a matrix with leading dimension ld. */
static size_t pack_upper(const double *M, int n, int ld, double *out)
{
    size_t q = 0;
    for (int j = 0; j < n; j++)
        for (int k = j + 1; k < n; k++)
            out[q++] = M[(size_t)j * ld + k];
    return q;
}

/* dJ (rows x ld): 0 where used (j < k < n), SENTINEL elsewhere. */
static void init_dJ(double *dJ, int rows, int n, int ld)
{
    for (int j = 0; j < rows; j++)
        for (int k = 0; k < ld; k++)
            dJ[(size_t)j * ld + k] = (j < k && k < n) ? 0.0 : SENTINEL;
}

static void check_dJ_untouched(const double *dJ, int rows, int n, int ld, const char *what)
{
    for (int j = 0; j < rows; j++)
        for (int k = 0; k < ld; k++)
            if (!(j < k && k < n) && dJ[(size_t)j * ld + k] != SENTINEL)
                fail_msg("%s: unused dJ[%d][%d] was written (%.17g)", what, j, k,
                         dJ[(size_t)j * ld + k]);
}

typedef struct {
    double fwd, dh, dJ; /* worst forward error; worst pure relative dh, dJ */
    double excess;      /* worst ||fast - ref|| / bound (< 1) */
    long count, floored; /* instances; those with a pure relative error >= 1e-9 */
    long truthed, fast_closer;
    double t_fast, t_ref, t_excess; /* vs quad truth: worst pure relative, fast's bound use */
    char where[160];                /* the instance with the worst t_fast */
} worst_t;

static void note(worst_t *w, double f, double dh, double dJ, double xs)
{
    w->fwd = fmax(w->fwd, f);
    w->dh = fmax(w->dh, dh);
    w->dJ = fmax(w->dJ, dJ);
    w->excess = fmax(w->excess, xs);
    w->floored += (dh >= BWD_TOL || dJ >= BWD_TOL);
    w->count++;
}

/* ------------------------------------------- exact covariances in quad */

#if defined(__SIZEOF_FLOAT128__)
typedef __float128 wide;
#else
typedef long double wide;
#endif

/* Exact backward of one query by enumeration in quad precision, in the
 * centred form c(s) = p(s) (G(s) - <G>) with p normalised by its own quad
 * sum, so <G> - G(s) = sum_t p(t) (G(t) - G(s)) holds to ~1e-33 |G| and a
 * saturated system's tiny covariances keep their relative accuracy. The
 * weights exp(e - max) come from long double (relative 1e-19 plus the
 * rounding of e, ~1e-16 at |e| ~ 1000, which the centred form passes on
 * without amplification). dh (n), dJp packed (j < k). */
static void truth_backward(int n, const double *h, const double *J, int ld, const double *g,
                           double *dh, double *dJp)
{
    unsigned N = 1u << n;
    wide *e = malloc(sizeof(wide) * N), *G = malloc(sizeof(wide) * N);
    assert_true(e && G);
    wide mx = -1e300;
    for (unsigned s = 0; s < N; s++) {
        wide es = 0, gs = 0;
        for (int j = 0; j < n; j++) {
            int sj = (s >> j & 1) ? 1 : -1;
            if (h)
                es += (wide)h[j] * sj;
            gs += (wide)g[j] * sj;
            for (int k = j + 1; k < n; k++)
                es += (wide)J[(size_t)j * ld + k] * (sj * ((s >> k & 1) ? 1 : -1));
        }
        e[s] = es, G[s] = gs;
        if (es > mx)
            mx = es;
    }
    wide W = 0, EG = 0;
    for (unsigned s = 0; s < N; s++) {
        e[s] = (wide)expl((long double)(e[s] - mx)); /* now the weight */
        W += e[s];
    }
    for (unsigned s = 0; s < N; s++)
        EG += e[s] / W * G[s];
    wide adh[MAXN] = {0}, adJ[MAXN * (MAXN - 1) / 2] = {0};
    for (unsigned s = 0; s < N; s++) {
        wide c = e[s] / W * (G[s] - EG);
        for (int j = 0, q = 0; j < n; j++) {
            int sj = (s >> j & 1) ? 1 : -1;
            adh[j] += sj > 0 ? c : -c;
            for (int k = j + 1; k < n; k++, q++)
                adJ[q] += (sj * ((s >> k & 1) ? 1 : -1)) > 0 ? c : -c;
        }
    }
    for (int j = 0, q = 0; j < n; j++) {
        dh[j] = (double)adh[j];
        for (int k = j + 1; k < n; k++, q++)
            dJp[q] = (double)adJ[q];
    }
    free(e);
    free(G);
}

/* Fallbacks the fast engine takes on the prefixes of one query: B = 1,
 * T = n, row i holding the first i+1 fields (the last row is the query). */
static long prefix_fallbacks(int n, const double *h, const double *J, int ld)
{
    double *hb = xmalloc((size_t)n * n), *lw = xmalloc((size_t)n * n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            hb[i * n + j] = j <= i ? h[j] : NAN;
    long fb = -1;
    char err[BA_ERR_LEN];
    assert_int_equal(ba_fast_forward(1, n, hb, J, ld, lw, &fb, err), BA_OK);
    assert_true(fb >= 0);
    free(hb);
    free(lw);
    return fb;
}

/* ------------------------------------------- 1. single query, both ways */

/* One query of n spins, fast against reference, forward and backward. */
static void compare_single(int cat, int n, int rep, uint64_t seed, int ld, const double *h,
                           const double *J, const double *g, worst_t *w)
{
    double lr[MAXN], lf[MAXN];
    char err[BA_ERR_LEN];
    assert_int_equal(ba_ising_marginals(BA_ENGINE_REFERENCE, n, h, J, ld, lr, err), BA_OK);
    assert_int_equal(ba_ising_marginals(BA_ENGINE_FAST, n, h, J, ld, lf, err), BA_OK);
    double ef = fwd_err(lf, lr, n);
    for (int j = 0; j < n; j++)
        if (!(lf[j] <= 0.0))
            fail_msg("%s n=%d rep=%d seed=%#llx: fast logw[%d] = %.17g is not <= 0",
                     cat_name[cat], n, rep, (unsigned long long)seed, j, lf[j]);

    size_t jl = (size_t)n * ld;
    double dhr[MAXN] = {0}, dhf[MAXN] = {0}, pr[MAXN * MAXN], pf[MAXN * MAXN];
    double *dJr = xmalloc(jl), *dJf = xmalloc(jl);
    init_dJ(dJr, n, n, ld);
    init_dJ(dJf, n, n, ld);
    assert_int_equal(ba_ising_backward(BA_ENGINE_REFERENCE, n, h, J, ld, g, dhr, dJr, err),
                     BA_OK);
    assert_int_equal(ba_ising_backward(BA_ENGINE_FAST, n, h, J, ld, g, dhf, dJf, err), BA_OK);
    check_dJ_untouched(dJf, n, n, ld, "single query, fast");
    size_t np = pack_upper(dJr, n, ld, pr);
    pack_upper(dJf, n, ld, pf);
    free(dJr);
    free(dJf);
    int energy = cat != CAT_RANDOM; /* random inputs: strict relative 1e-9 */
    double pdh, pdJ = 0.0;
    double xdh = bwd_excess(dhf, dhr, (size_t)n,
                            energy ? bwd_floor(n, h, J, ld, g, (size_t)n, 1) : 0.0, &pdh);
    double xdJ = n > 1 ? bwd_excess(pf, pr, np, energy ? bwd_floor(n, h, J, ld, g, np, 1) : 0.0,
                                    &pdJ)
                       : 0.0;
    note(w, ef, pdh, pdJ, fmax(xdh, xdJ));
    if (!(ef < FWD_TOL && xdh < 1.0 && xdJ < 1.0))
        fail_msg("%s n=%d rep=%d ldj=%d seed=%#llx: fast vs reference: forward %.3e, dh %.3e "
                 "(%.2f of bound), dJ %.3e (%.2f of bound)",
                 cat_name[cat], n, rep, ld, (unsigned long long)seed, ef, pdh, xdh, pdJ, xdJ);

    /* Against the exact values: the fast engine must meet its own bound,
     * and the report says which engine is closer. */
    int floored = pdh >= BWD_TOL || pdJ >= BWD_TOL;
    if (n <= TRUTH_ALL_MAXN || (floored && n <= TRUTH_MAXN)) {
        double th[MAXN], tJ[MAXN * MAXN], p1, p2 = 0.0, p3, p4 = 0.0;
        truth_backward(n, h, J, ld, g, th, tJ);
        double xf = bwd_excess(dhf, th, (size_t)n, bwd_floor(n, h, J, ld, g, (size_t)n, 0), &p1);
        bwd_excess(dhr, th, (size_t)n, 1.0, &p3);
        if (n > 1) {
            xf = fmax(xf, bwd_excess(pf, tJ, np, bwd_floor(n, h, J, ld, g, np, 0), &p2));
            bwd_excess(pr, tJ, np, 1.0, &p4);
        }
        double ef_t = fmax(p1, p2), er_t = fmax(p3, p4);
        if (ef_t > w->t_fast)
            snprintf(w->where, sizeof w->where,
                     "n=%d rep=%d seed=%#llx: fast dh %.1e dJ %.1e, reference dh %.1e dJ %.1e", n,
                     rep, (unsigned long long)seed, p1, p2, p3, p4);
        w->t_fast = fmax(w->t_fast, ef_t);
        w->t_ref = fmax(w->t_ref, er_t);
        w->t_excess = fmax(w->t_excess, xf);
        w->truthed++;
        w->fast_closer += ef_t <= er_t;
        if (!(xf < 1.0))
            fail_msg("%s n=%d rep=%d seed=%#llx: fast backward vs exact (quad): dh %.3e, dJ %.3e "
                     "relative, %.2f of bound",
                     cat_name[cat], n, rep, (unsigned long long)seed, p1, p2, xf);
    }
}

static void run_single(int cat, int n, int rep, worst_t *w, long *fallbacks)
{
    uint64_t seed = inst_seed(1, cat, n, rep);
    ba_rng r;
    ba_rng_seed(&r, seed);
    int ld = n + (rep % 3 == 1 ? 1 : rep % 3 == 2 ? 3 : 0); /* ldj = n, n+1, n+3 */
    double h[MAXN], g[MAXN];
    double *J = xmalloc((size_t)n * ld);
    for (int j = 0; j < n; j++)
        h[j] = draw_h(&r, cat, rep);
    fill_J(&r, J, n, n, ld, cat, rep);
    for (int j = 0; j < n; j++)
        g[j] = ba_rng_normal(&r);
    compare_single(cat, n, rep, seed, ld, h, J, g, w);
    if (fallbacks)
        *fallbacks += prefix_fallbacks(n, h, J, ld);
    free(J);
}

static void print_worst(const char *kind, int cat, const worst_t *w, long fb)
{
    print_message("%s %-22s %3ld: forward %.1e; backward relative dh %.1e, dJ %.1e, "
                  "%.2f of bound (%ld above 1e-9 relative); fallbacks %ld\n",
                  kind, cat_name[cat], w->count, w->fwd, w->dh, w->dJ, w->excess, w->floored, fb);
    if (w->truthed)
        print_message("    vs quad (%ld instances): fast %.1e, reference %.1e relative; fast "
                      "closer in %ld; fast at %.2f of its bound; worst %s\n",
                      w->truthed, w->t_fast, w->t_ref, w->fast_closer, w->t_excess, w->where);
}

static void test_single_query(void **state)
{
    (void)state;
    worst_t w[NCAT] = {{0}};
    long fb[NCAT] = {0};
    for (int cat = 0; cat < NCAT; cat++)
        for (int n = 1; n <= 14; n++) {
            int reps = n <= 8 ? 6 : n <= 12 ? 3 : 2;
            if (cat == CAT_RANDOM || cat == CAT_UNIFORM)
                reps *= 2;
            for (int rep = 0; rep < reps; rep++)
                run_single(cat, n, rep, &w[cat], &fb[cat]);
        }
    /* A few large systems: the reference costs O(2^n n^2). */
    const int big[] = {16, 18, 20};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        run_single(CAT_RANDOM, big[i], 1, &w[CAT_RANDOM], NULL);
        run_single(CAT_UNIFORM, big[i], 2, &w[CAT_UNIFORM], NULL);
    }
    run_single(CAT_MIXED, 16, 0, &w[CAT_MIXED], NULL);
    run_single(CAT_CORNERS, 16, 3, &w[CAT_CORNERS], NULL);
    for (int cat = 0; cat < NCAT; cat++)
        print_worst("single", cat, &w[cat], fb[cat]);
    /* The inputs of this test never leave the fast path (checked on every
     * prefix of every query up to n = 14), so the comparisons above test
     * the fast path and not its reference fallback. */
    for (int cat = 0; cat < NCAT; cat++)
        if (fb[cat] != 0)
            fail_msg("%s: %ld fallbacks on the prefixes, expected none", cat_name[cat], fb[cat]);
}

/* ------------------------------------------------------ 2. batched calls */

typedef struct {
    double *logw, *dh, *dJ;
} outputs;

/* Buffers for one batched forward + backward, initialised as the checks
 * expect: logw SENTINEL, dh 0 on and below the diagonal and SENTINEL above,
 * dJ 0 on used entries and SENTINEL elsewhere. */
static void outputs_init(outputs *o, int B, int T, int ld)
{
    size_t BTT = (size_t)B * T * T;
    o->logw = xmalloc(BTT);
    o->dh = xmalloc(BTT);
    o->dJ = xmalloc((size_t)T * ld);
    for (size_t q = 0; q < (size_t)B * T; q++)
        for (int j = 0; j < T; j++) {
            o->logw[q * T + j] = SENTINEL;
            o->dh[q * T + j] = j <= (int)(q % T) ? 0.0 : SENTINEL;
        }
    init_dJ(o->dJ, T, T, ld);
}

static void outputs_free(outputs *o) { free(o->logw), free(o->dh), free(o->dJ); }

static void outputs_equal(const outputs *a, const outputs *b, int B, int T, int ld,
                          const char *what)
{
    size_t BTT = (size_t)B * T * T;
    if (memcmp(a->logw, b->logw, sizeof(double) * BTT) ||
        memcmp(a->dh, b->dh, sizeof(double) * BTT) ||
        memcmp(a->dJ, b->dJ, sizeof(double) * (size_t)T * ld))
        fail_msg("%s B=%d T=%d: outputs are not bit-identical", what, B, T);
}

/* Stateless fast engine (ctx = NULL) or a context. */
static void run_fast(ba_engine_ctx *c, int B, int T, const double *h, const double *J, int ld,
                     const double *g, outputs *o)
{
    char err[BA_ERR_LEN];
    outputs_init(o, B, T, ld);
    assert_int_equal(ba_engine_forward_ctx(c, BA_ENGINE_FAST, B, T, h, J, ld, o->logw, err),
                     BA_OK);
    assert_int_equal(
        ba_engine_backward_ctx(c, BA_ENGINE_FAST, B, T, h, J, ld, g, o->dh, o->dJ, err), BA_OK);
}

/* Checks fast outputs f of (B,T,T) inputs against the reference engine row
 * by row: forward, dh per query, dJ over all, the -INFINITY and untouched
 * entries above the diagonal, and logw = -log 2 when h = NULL. strict drops
 * the floor. */
static void check_batched(const char *what, int B, int T, const double *h, const double *J,
                          int ld, const double *g, const outputs *f, int strict, worst_t *w)
{
    outputs r;
    char err[BA_ERR_LEN];
    outputs_init(&r, B, T, ld);
    assert_int_equal(ba_engine_forward(BA_ENGINE_REFERENCE, B, T, h, J, ld, r.logw, err), BA_OK);
    assert_int_equal(
        ba_engine_backward(BA_ENGINE_REFERENCE, B, T, h, J, ld, g, r.dh, r.dJ, err), BA_OK);
    double *pr = xmalloc((size_t)T * T), *pf = xmalloc((size_t)T * T);
    size_t np = pack_upper(r.dJ, T, ld, pr);
    pack_upper(f->dJ, T, ld, pf);
    double wf = 0.0, pdh_w = 0.0, xdh_w = 0.0, fl_dJ = 0.0;
    for (int q = 0; q < B * T; q++) {
        int i = q % T, n = i + 1;
        size_t row = (size_t)q * T;
        const double *a = f->logw + row, *hq = h ? h + row : NULL, *gq = g + row;
        double ef = fwd_err(a, r.logw + row, n), pdh;
        double xdh = bwd_excess(f->dh + row, r.dh + row, (size_t)n,
                                strict ? 0.0 : bwd_floor(n, hq, J, ld, gq, (size_t)n, 1), &pdh);
        fl_dJ += strict ? 0.0 : bwd_floor(n, hq, J, ld, gq, np, 1);
        wf = fmax(wf, ef);
        pdh_w = fmax(pdh_w, pdh);
        xdh_w = fmax(xdh_w, xdh);
        if (!(ef < FWD_TOL && xdh < 1.0)) {
            double th[MAXN], tJ[MAXN * MAXN], pf_t = -1.0, pr_t = -1.0;
            if (n <= 16) {
                truth_backward(n, hq, J, ld, gq, th, tJ);
                bwd_excess(f->dh + row, th, (size_t)n, 1.0, &pf_t);
                bwd_excess(r.dh + row, th, (size_t)n, 1.0, &pr_t);
            }
            fail_msg("%s B=%d T=%d: query b=%d i=%d: forward %.3e, dh %.3e (%.2f of bound); "
                     "dh vs quad: fast %.3e, reference %.3e",
                     what, B, T, q / T, i, ef, pdh, xdh, pf_t, pr_t);
        }
        for (int j = n; j < T; j++) {
            if (!(isinf(a[j]) && a[j] < 0))
                fail_msg("%s B=%d T=%d: query %d key %d above the diagonal: logw %.17g, "
                         "expected -inf",
                         what, B, T, q, j, a[j]);
            if (f->dh[row + j] != SENTINEL)
                fail_msg("%s B=%d T=%d: query %d key %d above the diagonal: dh written (%.17g)",
                         what, B, T, q, j, f->dh[row + j]);
        }
        if (!h)
            for (int j = 0; j < n; j++)
                if (!(fabs(a[j] + log(2.0)) < 1e-13))
                    fail_msg("%s B=%d T=%d: h = NULL, query %d key %d: logw %.17g, expected "
                             "-log 2",
                             what, B, T, q, j, a[j]);
    }
    check_dJ_untouched(f->dJ, T, T, ld, what);
    double pdJ = 0.0, xdJ = T > 1 ? bwd_excess(pf, pr, np, fl_dJ, &pdJ) : 0.0;
    if (!(xdJ < 1.0))
        fail_msg("%s B=%d T=%d: dJ fast vs reference %.3e (%.2f of bound)", what, B, T, pdJ, xdJ);
    note(w, wf, pdh_w, pdJ, fmax(xdh_w, xdJ));
    outputs_free(&r);
    free(pr);
    free(pf);
}

/* Stateless fast run of (B,T,T) inputs checked against the reference;
 * returns the fast forward's fallback count. */
static long compare_batched(const char *what, int B, int T, const double *h, const double *J,
                            int ld, const double *g, int strict, worst_t *w)
{
    outputs f;
    run_fast(NULL, B, T, h, J, ld, g, &f);
    check_batched(what, B, T, h, J, ld, g, &f, strict, w);
    /* ba_fast_forward is the same engine: the same bits, and a count. */
    long fb = -1;
    double *lw = xmalloc((size_t)B * T * T);
    assert_int_equal(ba_fast_forward(B, T, h, J, ld, lw, &fb, NULL), BA_OK);
    assert_memory_equal(lw, f.logw, sizeof(double) * (size_t)B * T * T);
    assert_true(fb >= 0);
    free(lw);
    outputs_free(&f);
    return fb;
}

/* Inputs of a batched instance. */
typedef struct {
    int B, T, ld;
    double *h, *g, *J;
} batch;

static batch make_batch(uint64_t seed, int B, int T, int ld, int cat, int rep)
{
    batch b = {B, T, ld, xmalloc((size_t)B * T * T), xmalloc((size_t)B * T * T),
               xmalloc((size_t)T * ld)};
    ba_rng r;
    ba_rng_seed(&r, seed);
    fill_batch(&r, b.h, B, T, cat, rep, 0);
    fill_batch(&r, b.g, B, T, cat, rep, 1);
    fill_J(&r, b.J, T, T, ld, cat, rep);
    return b;
}

static void batch_free(batch *b) { free(b->h), free(b->g), free(b->J); }

static void test_batched(void **state)
{
    (void)state;
    worst_t w[NCAT] = {{0}}, wnull = {0};
    long fb[NCAT] = {0};
    const int Ts[] = {1, 2, 3, 5, 8, 11, 14, 16};
    const size_t nT = sizeof Ts / sizeof Ts[0];
    for (int cat = 0; cat < NCAT; cat++)
        for (size_t t = 0; t < nT; t++) {
            int T = Ts[t], B = T == 16 ? 2 : 5, rep = (int)t;
            if (T == 16 && cat != CAT_RANDOM && cat != CAT_UNIFORM && cat != CAT_MIXED)
                continue;
            uint64_t seed = inst_seed(2, cat, T, rep);
            batch b = make_batch(seed, B, T, T + (int)(t % 3), cat, rep); /* ldj T..T+2 */
            char what[96];
            snprintf(what, sizeof what, "batched %s seed=%#llx", cat_name[cat],
                     (unsigned long long)seed);
            fb[cat] += compare_batched(what, B, T, b.h, b.J, b.ld, b.g, cat == CAT_RANDOM, &w[cat]);
            if (cat == CAT_RANDOM || cat == CAT_UNIFORM) {
                /* h = NULL (coupling variant): logw = -log 2; the reference
                 * dJ is rounding noise around an exact 0 (G is odd in s,
                 * s_j s_k even), hence the floor even for random inputs. */
                snprintf(what, sizeof what, "batched h=NULL %s seed=%#llx", cat_name[cat],
                         (unsigned long long)seed);
                compare_batched(what, B, T, NULL, b.J, b.ld, b.g, 0, &wnull);
            }
            batch_free(&b);
        }
    for (int cat = 0; cat < NCAT; cat++)
        print_worst("batched", cat, &w[cat], fb[cat]);
    print_message("batched h = NULL %ld calls: forward %.1e; dh relative %.1e; dJ %.2f of bound "
                  "(exactly 0 in exact arithmetic)\n",
                  wnull.count, wnull.fwd, wnull.dh, wnull.excess);
    for (int cat = 0; cat < NCAT; cat++)
        if (fb[cat] != 0)
            fail_msg("batched %s: %ld fallbacks, expected none", cat_name[cat], fb[cat]);
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

/* ------------------------------------------------------- zero fields */

/* h = NULL (the coupling variant) takes the symmetry path in the fast
 * engine: logw exactly -log 2, and a backward without dh adds exactly
 * nothing to dJ. The reference enumerates and must agree to rounding. */
static void test_zero_fields(void **state)
{
    (void)state;
    enum { B = 3, T = 12 };
    ba_rng r;
    ba_rng_seed(&r, 77);
    double *J = xmalloc(T * T), *g = xmalloc(B * T * T);
    double *lf = xmalloc(B * T * T), *lr = xmalloc(B * T * T);
    double *dJf = xmalloc(T * T), *dJr = xmalloc(T * T);
    for (int i = 0; i < T * T; i++)
        J[i] = 10.0 * ba_rng_uniform(&r) - 5.0, dJf[i] = 0.25, dJr[i] = 0.25;
    for (int i = 0; i < B * T * T; i++)
        g[i] = ba_rng_normal(&r);
    char err[BA_ERR_LEN];
    assert_int_equal(ba_engine_forward(BA_ENGINE_FAST, B, T, NULL, J, T, lf, err), BA_OK);
    assert_int_equal(ba_engine_forward(BA_ENGINE_REFERENCE, B, T, NULL, J, T, lr, err), BA_OK);
    double worst = 0.0;
    for (int q = 0; q < B * T; q++)
        for (int j = 0; j < T; j++) {
            double a = lf[q * T + j], b = lr[q * T + j];
            if (j <= q % T) {
                assert_true(a == -M_LN2);
                worst = fmax(worst, fabs(a - b));
            } else {
                assert_true(isinf(a) && a < 0);
            }
        }
    assert_true(worst < 1e-12);
    assert_int_equal(ba_engine_backward(BA_ENGINE_FAST, B, T, NULL, J, T, g, NULL, dJf, err),
                     BA_OK);
    assert_int_equal(ba_engine_backward(BA_ENGINE_REFERENCE, B, T, NULL, J, T, g, NULL, dJr, err),
                     BA_OK);
    double wdj = 0.0;
    for (int i = 0; i < T * T; i++) {
        assert_true(dJf[i] == 0.25); /* exactly nothing added */
        wdj = fmax(wdj, fabs(dJr[i] - 0.25));
    }
    /* the reference's dJ is rounding noise around the exact 0 */
    assert_true(wdj < 1e-9);
    print_message("zero fields: fast logw exactly -log 2, reference within %.1e; fast dJ exactly "
                  "0, reference %.1e\n",
                  worst, wdj);
    free(J), free(g), free(lf), free(lr), free(dJf), free(dJr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_query),
        cmocka_unit_test(test_batched),
        cmocka_unit_test(test_context),
        cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_zero_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
