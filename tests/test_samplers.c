/* Tests of the samplers (spec section 7, src/ising/samplers.c): the shots
 * (ba_draw_shots, and the direct and dqa samplers' against their
 * distributions), the fits (ba_fit_beta, TV distance, KL divergence), Gibbs
 * and SA against exact moments, and the API's behaviour: determinism,
 * errors, names and defaults. The dqa sampler's simulator is tested in
 * test_samplers_dqa.c.
 *
 * References written here, independently of the library:
 *   - energies by brute force over the spins of each state (sampler_ref.h);
 *   - exact Boltzmann moments by enumeration.
 * Statistical checks use fixed seeds and bands of several standard errors;
 * each names its tolerance where it is made. */
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
#include "sampler_ref.h"

/* ------------------------------------------------------- shots and fits */

/* Pearson chi-square of S shots against p over 2^n states. */
static double chi_square(int n, const uint64_t *shots, int S, const double *p)
{
    size_t N = (size_t)1 << n;
    double *cnt = calloc(N, sizeof(double)), chi = 0.0;
    assert_non_null(cnt);
    for (int i = 0; i < S; i++) {
        assert_true(shots[i] < N);
        cnt[shots[i]] += 1;
    }
    for (size_t x = 0; x < N; x++) {
        double e = S * p[x];
        chi += (cnt[x] - e) * (cnt[x] - e) / e;
    }
    free(cnt);
    return chi;
}

/* chi-square with 7 degrees of freedom: 24.32 is its 0.999 quantile; an
 * unnormalised p must give the same shots as the normalised one. A
 * deliberately wrong p (the first two entries swapped) is rejected. */
static void test_draw_shots_chi2(void **state)
{
    (void)state;
    double p[8] = {0.3, 0.05, 0.1, 0.15, 0.02, 0.08, 0.2, 0.1}, p2[8], wrong[8];
    for (int x = 0; x < 8; x++)
        p2[x] = 7.0 * p[x], wrong[x] = p[x];
    wrong[0] = p[1], wrong[1] = p[0];
    int S = 20000;
    uint64_t *a = malloc(sizeof(uint64_t) * S), *b = malloc(sizeof(uint64_t) * S);
    assert_true(a && b);
    ba_rng r1, r2;
    ba_rng_seed(&r1, 19), ba_rng_seed(&r2, 19);
    char err[BA_ERR_LEN];
    assert_int_equal(ba_draw_shots(p, 3, S, &r1, a, err), BA_OK);
    assert_int_equal(ba_draw_shots(p2, 3, S, &r2, b, err), BA_OK);
    assert_memory_equal(a, b, sizeof(uint64_t) * S);
    SHOW("draw_shots chi2 %.2f, wrong p %.1f\n", chi_square(3, a, S, p),
         chi_square(3, a, S, wrong));
    assert_true(chi_square(3, a, S, p) < 24.32);
    assert_true(chi_square(3, a, S, wrong) > 24.32);
    /* zero-probability states are never drawn, even at the ends */
    double z[8] = {0, 0.5, 0, 0, 0, 0, 0.5, 0};
    assert_int_equal(ba_draw_shots(z, 3, S, &r1, a, err), BA_OK);
    for (int i = 0; i < S; i++)
        assert_true(a[i] == 1 || a[i] == 6);
    free(a), free(b);
}

/* The direct sampler and the dqa sampler's shots against their
 * distributions: chi-square with 15 degrees of freedom below 37.70 (0.999). */
static void test_direct_and_dqa_shots_chi2(void **state)
{
    (void)state;
    int n = 4, S = 30000;
    double h[4], J[16], E[16], p[16];
    ba_rng r;
    ba_rng_seed(&r, 20);
    instance(&r, n, 4, 0.7, 0.4, h, J);
    brute_energies(n, h, J, 4, E);
    brute_boltzmann(n, E, 1.0, p);
    uint64_t *shots = malloc(sizeof(uint64_t) * S);
    assert_non_null(shots);
    char err[BA_ERR_LEN];
    ba_sampler d = ba_sampler_default(BA_SAMPLER_DIRECT);
    d.shots = S;
    assert_int_equal(ba_sample(&d, n, h, J, 4, &r, shots, err), BA_OK);
    assert_true(chi_square(n, shots, S, p) < 37.70);
    ba_sampler q = dqa(1.5, 1.0, 1.0, 40, 2);
    q.shots = S;
    assert_int_equal(ba_dqa_distribution(&q, n, h, J, 4, p, err), BA_OK);
    assert_int_equal(ba_sample(&q, n, h, J, 4, &r, shots, err), BA_OK);
    assert_true(chi_square(n, shots, S, p) < 37.70);
    free(shots);
}

static void test_fit_beta(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 21);
    int n = 6;
    double h[6], J[36], E[64], p[64], beta, r2;
    instance(&r, n, 6, 1.0, 0.5, h, J);
    brute_energies(n, h, J, 6, E);
    char err[BA_ERR_LEN];
    double betas[] = {0.3, 1.0, 2.0};
    for (int i = 0; i < 3; i++) {
        brute_boltzmann(n, E, betas[i], p);
        assert_int_equal(ba_fit_beta(n, h, J, 6, p, &beta, &r2, err), BA_OK);
        assert_float_equal(beta, betas[i], 1e-9);
        assert_float_equal(r2, 1.0, 1e-9);
    }
    /* uniform: beta 0, a perfect (flat) fit */
    for (int x = 0; x < 64; x++)
        p[x] = 1.0 / 64;
    assert_int_equal(ba_fit_beta(n, h, J, 6, p, &beta, &r2, err), BA_OK);
    assert_float_equal(beta, 0.0, 1e-12);
    assert_float_equal(r2, 1.0, 0);
    /* a non-Boltzmann distribution fits worse: r2 < 1 */
    brute_boltzmann(n, E, 1.0, p);
    p[5] *= 4.0, p[17] *= 0.1;
    assert_int_equal(ba_fit_beta(n, h, J, 6, p, &beta, NULL, err), BA_OK);
    assert_int_equal(ba_fit_beta(n, h, J, 6, p, &beta, &r2, err), BA_OK);
    assert_true(r2 < 0.999 && r2 > 0);
    /* a single state: no slope */
    memset(p, 0, sizeof p);
    p[9] = 1.0;
    assert_int_equal(ba_fit_beta(n, h, J, 6, p, &beta, &r2, err), BA_ERR_NUMERIC);
    assert_non_null(strstr(err, "same energy"));
    p[9] = -1.0;
    assert_int_equal(ba_fit_beta(n, h, J, 6, p, &beta, &r2, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "p[9]"));
}

static void test_tv_kl(void **state)
{
    (void)state;
    double p[4] = {0.5, 0.5, 0, 0}, q[4] = {0.25, 0.25, 0.25, 0.25},
           u[4] = {0.1, 0.2, 0.3, 0.4}, v[4] = {0.4, 0.3, 0.2, 0.1};
    assert_float_equal(ba_tv_distance(p, q, 4), 0.5, 1e-15);
    assert_float_equal(ba_tv_distance(q, p, 4), 0.5, 1e-15);
    assert_float_equal(ba_tv_distance(u, v, 4), 0.4, 1e-15);
    assert_float_equal(ba_tv_distance(u, u, 4), 0.0, 0);
    assert_float_equal(ba_kl_divergence(p, q, 4), log(2.0), 1e-15);
    assert_true(isinf(ba_kl_divergence(q, p, 4)));
    /* 0.1 log(1/4) + 0.2 log(2/3) + 0.3 log(3/2) + 0.4 log 4 = 0.3 log 4 + 0.1 log 1.5 */
    assert_float_equal(ba_kl_divergence(u, v, 4), 0.3 * log(4.0) + 0.1 * log(1.5), 1e-15);
    assert_float_equal(ba_kl_divergence(u, u, 4), 0.0, 0);
}

/* ----------------------------------------------------- Gibbs and SA */

/* Exact <s_j> and <s_j s_k> at inverse temperature beta. */
static void exact_moments(int n, const double *E, double beta, double *m, double *c)
{
    size_t N = (size_t)1 << n;
    double *p = malloc(sizeof(double) * N);
    assert_non_null(p);
    brute_boltzmann(n, E, beta, p);
    memset(m, 0, sizeof(double) * n);
    memset(c, 0, sizeof(double) * n * n);
    for (size_t x = 0; x < N; x++)
        for (int j = 0; j < n; j++) {
            m[j] += p[x] * spin(x, j);
            for (int k = j + 1; k < n; k++)
                c[j * n + k] += p[x] * spin(x, j) * spin(x, k);
        }
    free(p);
}

/* Largest |sample mean - exact| / standard error over the magnetisations
 * and correlations, the standard error from the spread of `groups`
 * consecutive groups of the shots (chains for Gibbs: it includes their
 * autocorrelation). */
static double max_z(int n, const uint64_t *shots, int S, int groups, const double *m,
                    const double *c)
{
    int per = S / groups;
    double worst = 0.0;
    for (int j = 0; j < n; j++)
        for (int k = j; k < n; k++) {
            double target = k == j ? m[j] : c[j * n + k], sum = 0.0, sq = 0.0;
            for (int g = 0; g < groups; g++) {
                double a = 0.0;
                for (int i = g * per; i < (g + 1) * per; i++)
                    a += k == j ? spin(shots[i], j) : spin(shots[i], j) * spin(shots[i], k);
                a /= per;
                sum += a, sq += a * a;
            }
            double mean = sum / groups, var = (sq - groups * mean * mean) / (groups - 1);
            double se = sqrt(var / groups);
            worst = fmax(worst, fabs(mean - target) / se);
        }
    return worst;
}

/* Gibbs and SA at high temperature (h ~ N(0, 0.4), J ~ N(0, 0.2), n = 6):
 * every <s_j> and <s_j s_k> within 5 standard errors of the exact value;
 * against the moments at beta = 1.6 the same statistic exceeds 5 (the
 * test can fail). */
static void test_gibbs_sa_hot(void **state)
{
    (void)state;
    int n = 6, S = 24000;
    double h[6], J[36], E[64], m[6], c[36], mw[6], cw[36];
    ba_rng r;
    ba_rng_seed(&r, 22);
    instance(&r, n, 6, 0.4, 0.2, h, J);
    brute_energies(n, h, J, 6, E);
    exact_moments(n, E, 1.0, m, c);
    exact_moments(n, E, 1.6, mw, cw);
    uint64_t *shots = malloc(sizeof(uint64_t) * S);
    assert_non_null(shots);
    char err[BA_ERR_LEN];
    ba_sampler g = ba_sampler_default(BA_SAMPLER_GIBBS);
    g.shots = S, g.chains = 40, g.burnin = 10, g.thin = 1;
    assert_int_equal(ba_sample(&g, n, h, J, 6, &r, shots, err), BA_OK);
    double zg = max_z(n, shots, S, 40, m, c), zgw = max_z(n, shots, S, 40, mw, cw);
    SHOW("gibbs: max z %.2f (beta 1), %.2f (beta 1.6)\n", zg, zgw);
    assert_true(zg < 5.0);
    assert_true(zgw > 5.0);
    ba_sampler a = ba_sampler_default(BA_SAMPLER_SA);
    a.shots = S, a.sweeps = 50;
    assert_int_equal(ba_sample(&a, n, h, J, 6, &r, shots, err), BA_OK);
    double za = max_z(n, shots, S, 40, m, c), zaw = max_z(n, shots, S, 40, mw, cw);
    SHOW("sa: max z %.2f (beta 1), %.2f (beta 1.6)\n", za, zaw);
    assert_true(za < 5.0);
    assert_true(zaw > 5.0);
    free(shots);
}

/* Gibbs at n = 40 (beyond enumeration) with J = 0: spins are independent,
 * <s_j> = tanh(h_j); 5 standard errors. h = NULL gives <s_j> = 0. */
static void test_gibbs_independent_spins(void **state)
{
    (void)state;
    int n = 40, S = 8000;
    double h[40], J[40 * 40], m[40], c[40 * 40];
    for (int j = 0; j < n; j++) {
        h[j] = 0.05 * (j - 20);
        m[j] = tanh(h[j]);
        for (int k = 0; k < n; k++)
            J[j * n + k] = j < k ? 0.0 : NAN;
    }
    for (int j = 0; j < n; j++)
        for (int k = j + 1; k < n; k++)
            c[j * n + k] = m[j] * m[k];
    uint64_t *shots = malloc(sizeof(uint64_t) * S);
    assert_non_null(shots);
    ba_rng r;
    ba_rng_seed(&r, 23);
    char err[BA_ERR_LEN];
    ba_sampler g = ba_sampler_default(BA_SAMPLER_GIBBS);
    g.shots = S, g.chains = 20;
    assert_int_equal(ba_sample(&g, n, h, J, n, &r, shots, err), BA_OK);
    assert_true(max_z(n, shots, S, 20, m, c) < 5.0);
    memset(m, 0, sizeof m);
    memset(c, 0, sizeof c);
    assert_int_equal(ba_sample(&g, n, NULL, J, n, &r, shots, err), BA_OK);
    assert_true(max_z(n, shots, S, 20, m, c) < 5.0);
    free(shots);
}

/* n = 64 uses every bit of a state word; a strong field pins each spin. */
static void test_sixty_four_spins(void **state)
{
    (void)state;
    int n = 64, S = 16;
    double *h = malloc(sizeof(double) * n), *J = calloc((size_t)n * n, sizeof(double));
    assert_true(h && J);
    for (int j = 0; j < n; j++)
        h[j] = (j % 3 == 0) ? 30.0 : -30.0;
    uint64_t want = 0;
    for (int j = 0; j < n; j += 3)
        want |= (uint64_t)1 << j;
    uint64_t shots[16];
    ba_rng r;
    ba_rng_seed(&r, 24);
    char err[BA_ERR_LEN];
    for (int kind = BA_SAMPLER_GIBBS; kind <= BA_SAMPLER_SA; kind++) {
        ba_sampler s = ba_sampler_default((ba_sampler_kind)kind);
        s.shots = S;
        assert_int_equal(ba_sample(&s, n, h, J, n, &r, shots, err), BA_OK);
        for (int i = 0; i < S; i++)
            assert_true(shots[i] == want);
    }
    free(h), free(J);
}

/* Gibbs splits S shots over C chains as S/C, plus one for the first S mod C
 * chains, chain 0's shots first: chain 0 of (S = 10, C = 3) holds 4 shots,
 * the same as the single chain of (S = 4, C = 1); chain 1 (shots 4..6) is
 * chain 1 of (S = 6, C = 2) (shots 3..5). Same seeds throughout. */
static void test_gibbs_remainder_rule(void **state)
{
    (void)state;
    int n = 5;
    double h[5], J[25];
    ba_rng r;
    ba_rng_seed(&r, 25);
    instance(&r, n, 5, 0.5, 0.5, h, J);
    uint64_t a[10], b[10], c[10];
    char err[BA_ERR_LEN];
    ba_sampler g = ba_sampler_default(BA_SAMPLER_GIBBS);
    g.burnin = 3, g.thin = 2;
    g.shots = 10, g.chains = 3;
    ba_rng_seed(&r, 99);
    assert_int_equal(ba_sample(&g, n, h, J, 5, &r, a, err), BA_OK);
    g.shots = 4, g.chains = 1;
    ba_rng_seed(&r, 99);
    assert_int_equal(ba_sample(&g, n, h, J, 5, &r, b, err), BA_OK);
    g.shots = 6, g.chains = 2;
    ba_rng_seed(&r, 99);
    assert_int_equal(ba_sample(&g, n, h, J, 5, &r, c, err), BA_OK);
    assert_memory_equal(a, b, 4 * sizeof(uint64_t));
    assert_memory_equal(a + 4, c + 3, 3 * sizeof(uint64_t));
}

/* ----------------------------------------------------- API behaviour */

static void test_determinism(void **state)
{
    (void)state;
    int n = 6, S = 500;
    double h[6], J[36];
    ba_rng r;
    ba_rng_seed(&r, 26);
    instance(&r, n, 6, 1.0, 0.3, h, J);
    uint64_t a[500], b[500];
    char err[BA_ERR_LEN];
    for (int kind = BA_SAMPLER_DIRECT; kind <= BA_SAMPLER_SA; kind++) {
        ba_sampler s = ba_sampler_default((ba_sampler_kind)kind);
        s.shots = S;
        ba_rng r1, r2;
        ba_rng_seed(&r1, 7), ba_rng_seed(&r2, 7);
        assert_int_equal(ba_sample(&s, n, h, J, 6, &r1, a, err), BA_OK);
        assert_int_equal(ba_sample(&s, n, h, J, 6, &r2, b, err), BA_OK);
        assert_memory_equal(a, b, sizeof a);
        assert_memory_equal(&r1, &r2, sizeof r1); /* the rng advanced alike */
        ba_rng_seed(&r2, 8);
        assert_int_equal(ba_sample(&s, n, h, J, 6, &r2, b, err), BA_OK);
        assert_memory_not_equal(a, b, sizeof a);
    }
}

static void expect_err(const ba_sampler *s, int n, int code, const char *needle)
{
    double h[70] = {0}, J[70 * 70] = {0};
    uint64_t shots[300];
    char err[BA_ERR_LEN] = "";
    ba_rng r;
    ba_rng_seed(&r, 1);
    int rc = ba_sample(s, n, h, J, n > 0 ? n : 1, &r, shots, err);
    if (rc != code || !strstr(err, needle))
        fail_msg("kind %s, n %d: got %d '%s', want %d with '%s'", ba_sampler_name(s->kind), n,
                 rc, err, code, needle);
}

static void test_errors(void **state)
{
    (void)state;
    ba_sampler s;
    s = dqa(0.0, 1, 1, 10, 2);
    expect_err(&s, 4, BA_ERR_ARG, "tau");
    s = dqa(1, -1, 1, 10, 2);
    expect_err(&s, 4, BA_ERR_ARG, "gamma");
    s = dqa(1, 1, NAN, 10, 2);
    expect_err(&s, 4, BA_ERR_ARG, "lambda");
    s = dqa(1, 1, 1, 0, 2);
    expect_err(&s, 4, BA_ERR_ARG, "trotter_steps");
    s = dqa(1, 1, 1, 10, 3);
    expect_err(&s, 4, BA_ERR_ARG, "order");
    s = dqa(1, 1, 1, 10, 2);
    expect_err(&s, BA_DQA_MAX_SPINS + 1, BA_ERR_LIMIT, "dqa");
    expect_err(&s, 0, BA_ERR_ARG, "n = 0");
    s.shots = 0;
    expect_err(&s, 4, BA_ERR_ARG, "shots");
    s = ba_sampler_default(BA_SAMPLER_DIRECT);
    expect_err(&s, BA_DQA_MAX_SPINS + 1, BA_ERR_LIMIT, "direct");
    s = ba_sampler_default(BA_SAMPLER_GIBBS);
    expect_err(&s, 65, BA_ERR_LIMIT, "gibbs");
    s.chains = 0;
    expect_err(&s, 4, BA_ERR_ARG, "chains");
    s = ba_sampler_default(BA_SAMPLER_GIBBS);
    s.chains = s.shots + 1;
    expect_err(&s, 4, BA_ERR_ARG, "chains");
    s = ba_sampler_default(BA_SAMPLER_GIBBS);
    s.burnin = -1;
    expect_err(&s, 4, BA_ERR_ARG, "burnin");
    s = ba_sampler_default(BA_SAMPLER_GIBBS);
    s.thin = 0;
    expect_err(&s, 4, BA_ERR_ARG, "thin");
    s = ba_sampler_default(BA_SAMPLER_SA);
    expect_err(&s, 65, BA_ERR_LIMIT, "sa");
    s.sweeps = 0;
    expect_err(&s, 4, BA_ERR_ARG, "sweeps");
    s = ba_sampler_default(BA_SAMPLER_SA);
    s.beta0 = 0.0;
    expect_err(&s, 4, BA_ERR_ARG, "beta0");
    s = ba_sampler_default(BA_SAMPLER_EXACT);
    expect_err(&s, 4, BA_ERR_ARG, "exact");
    s = ba_sampler_default(BA_SAMPLER_GIBBS);
    s.kind = (ba_sampler_kind)9;
    expect_err(&s, 4, BA_ERR_ARG, "kind 9");

    /* NULL pointers and non-finite inputs */
    char err[BA_ERR_LEN];
    double h[4] = {0, NAN, 0, 0}, J[16] = {0}, p[16];
    uint64_t shots[256];
    ba_rng r;
    ba_rng_seed(&r, 1);
    s = ba_sampler_default(BA_SAMPLER_GIBBS);
    assert_int_equal(ba_sample(&s, 4, h, J, 4, NULL, shots, err), BA_ERR_ARG);
    assert_int_equal(ba_sample(&s, 4, h, J, 4, &r, NULL, err), BA_ERR_ARG);
    assert_int_equal(ba_sample(&s, 4, h, NULL, 4, &r, shots, err), BA_ERR_ARG);
    assert_int_equal(ba_sample(&s, 4, h, J, 3, &r, shots, err), BA_ERR_ARG);
    assert_int_equal(ba_sample(&s, 4, h, J, 4, &r, shots, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "h[1]"));
    h[1] = 0, J[1 * 4 + 2] = INFINITY;
    assert_int_equal(ba_sample(&s, 4, h, J, 4, &r, shots, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "J[1][2]"));
    s = dqa(1, 1, 1, 10, 2);
    assert_int_equal(ba_dqa_distribution(&s, 4, h, J, 4, p, err), BA_ERR_NUMERIC);
    assert_int_equal(ba_dqa_distribution(NULL, 4, h, J, 4, p, err), BA_ERR_ARG);
    assert_int_equal(ba_dqa_distribution(&s, 4, h, J, 4, NULL, err), BA_ERR_ARG);
    assert_int_equal(ba_dqa_distribution(&s, 25, h, J, 4, p, err), BA_ERR_LIMIT);
    assert_int_equal(ba_fit_beta(25, h, J, 4, p, &p[0], NULL, err), BA_ERR_LIMIT);
    assert_int_equal(ba_fit_beta(4, h, J, 4, p, NULL, NULL, err), BA_ERR_ARG);
    /* a single spin needs no couplings */
    double h1 = 0.3, p1[2];
    assert_int_equal(ba_dqa_distribution(&s, 1, &h1, NULL, 1, p1, err), BA_OK);
    s = ba_sampler_default(BA_SAMPLER_SA);
    assert_int_equal(ba_sample(&s, 1, &h1, NULL, 1, &r, shots, err), BA_OK);
    /* err may be NULL */
    assert_int_equal(ba_sample(&s, 0, &h1, NULL, 1, &r, shots, NULL), BA_ERR_ARG);
}

/* Names round-trip; defaults validate. */
static void test_names_defaults(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    for (int k = 0; k <= BA_SAMPLER_SA; k++) {
        ba_sampler_kind out;
        assert_int_equal(ba_sampler_parse(ba_sampler_name((ba_sampler_kind)k), &out, err), BA_OK);
        assert_int_equal(out, k);
        ba_sampler s = ba_sampler_default((ba_sampler_kind)k);
        assert_int_equal(ba_sampler_validate(&s, err), BA_OK);
    }
    ba_sampler_kind out;
    assert_int_equal(ba_sampler_parse("metropolis", &out, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "metropolis"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_draw_shots_chi2),
        cmocka_unit_test(test_direct_and_dqa_shots_chi2),
        cmocka_unit_test(test_fit_beta),
        cmocka_unit_test(test_tv_kl),
        cmocka_unit_test(test_gibbs_sa_hot),
        cmocka_unit_test(test_gibbs_independent_spins),
        cmocka_unit_test(test_sixty_four_spins),
        cmocka_unit_test(test_gibbs_remainder_rule),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_names_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
