/* The inputs, measures, exact covariances and batched-call harness shared
 * by the fast engine's tests: test_fast_engine.c (single queries, batched
 * calls, zero fields) and test_fast_context.c (context, fallback,
 * determinism). test_fast_engine.c's opening comment gives the input
 * categories and the tolerances implemented here; build with
 * -DFAST_ENGINE_STRICT=1 to drop the rounding floor. Needs <cmocka.h>
 * (after its own prerequisites), <float.h>, <math.h>, <stdint.h>,
 * <stdio.h>, <stdlib.h>, <string.h> and "model/model.h". */
#ifndef BA_TEST_FAST_ENGINE_CHECK_H
#define BA_TEST_FAST_ENGINE_CHECK_H

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

static inline double unif(ba_rng *r, double a) { return a * (2.0 * ba_rng_uniform(r) - 1.0); }

static inline double draw_h(ba_rng *r, int cat, int rep)
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

static inline double draw_j(ba_rng *r, int cat, int rep)
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
static inline void fill_J(ba_rng *r, double *J, int rows, int n, int ld, int cat, int rep)
{
    for (int j = 0; j < rows; j++)
        for (int k = 0; k < ld; k++)
            J[(size_t)j * ld + k] = (j < k && k < n) ? draw_j(r, cat, rep) : NAN;
}

/* A (B,T,T) array of fields (category cat) or of upstream gradients
 * (N(0,1)), NaN above the diagonal: those entries belong to no query. */
static inline void fill_batch(ba_rng *r, double *x, int B, int T, int cat, int rep, int is_g)
{
    for (int q = 0; q < B * T; q++)
        for (int j = 0; j < T; j++)
            x[(size_t)q * T + j] =
                j <= q % T ? (is_g ? ba_rng_normal(r) : draw_h(r, cat, rep)) : NAN;
}

static inline uint64_t inst_seed(int test, int cat, int n, int rep)
{
    return ((uint64_t)test << 48) | ((uint64_t)cat << 32) | ((uint64_t)n << 16) | (uint64_t)rep;
}

static inline double *xmalloc(size_t count)
{
    double *p = malloc(sizeof(double) * (count ? count : 1));
    assert_non_null(p);
    return p;
}

/* ------------------------------------------------------------- measures */

/* max_j |expm1(a_j - b_j)|; INFINITY if anything is not finite. */
static inline double fwd_err(const double *a, const double *b, int n)
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
static inline double bwd_excess(const double *a, const double *ref, size_t len, double floor,
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
static inline double bwd_floor(int n, const double *h, const double *J, int ld, const double *g,
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
static inline size_t pack_upper(const double *M, int n, int ld, double *out)
{
    size_t q = 0;
    for (int j = 0; j < n; j++)
        for (int k = j + 1; k < n; k++)
            out[q++] = M[(size_t)j * ld + k];
    return q;
}

/* dJ (rows x ld): 0 where used (j < k < n), SENTINEL elsewhere. */
static inline void init_dJ(double *dJ, int rows, int n, int ld)
{
    for (int j = 0; j < rows; j++)
        for (int k = 0; k < ld; k++)
            dJ[(size_t)j * ld + k] = (j < k && k < n) ? 0.0 : SENTINEL;
}

static inline void check_dJ_untouched(const double *dJ, int rows, int n, int ld, const char *what)
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

static inline void note(worst_t *w, double f, double dh, double dJ, double xs)
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
static inline void truth_backward(int n, const double *h, const double *J, int ld, const double *g,
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

/* ------------------------------------------------------ 2. batched calls */

typedef struct {
    double *logw, *dh, *dJ;
} outputs;

/* Buffers for one batched forward + backward, initialised as the checks
 * expect: logw SENTINEL, dh 0 on and below the diagonal and SENTINEL above,
 * dJ 0 on used entries and SENTINEL elsewhere. */
static inline void outputs_init(outputs *o, int B, int T, int ld)
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

static inline void outputs_free(outputs *o) { free(o->logw), free(o->dh), free(o->dJ); }

/* Stateless fast engine (ctx = NULL) or a context. */
static inline void run_fast(ba_engine_ctx *c, int B, int T, const double *h, const double *J,
                            int ld, const double *g, outputs *o)
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
static inline void check_batched(const char *what, int B, int T, const double *h, const double *J,
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
static inline long compare_batched(const char *what, int B, int T, const double *h, const double *J,
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

static inline batch make_batch(uint64_t seed, int B, int T, int ld, int cat, int rep)
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

static inline void batch_free(batch *b) { free(b->h), free(b->g), free(b->J); }

#endif
