/* Samplers of one Ising system (spec section 7): the direct sampler (shots
 * from the enumerated distribution), simulated diabatic quantum annealing
 * (its simulator is src/dqa.c), Gibbs sampling and simulated annealing,
 * plus the measures that compare a sampled distribution with the exact
 * one. Their settings are src/sampler_settings.c's. */
#include "ising/ising.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int ba_boltzmann_distribution(int n, const double *h, const double *J, int ldj, double beta,
                              double *p, char *err)
{
    if (n < 1 || n > BA_DQA_MAX_SPINS)
        return ba_fail(err, n < 1 ? BA_ERR_ARG : BA_ERR_LIMIT,
                       "n = %d is out of range [1, %d] for an enumerated distribution", n,
                       BA_DQA_MAX_SPINS);
    if (!p || (!J && n > 1) || ldj < n)
        return ba_fail(err, BA_ERR_ARG, "bad arguments (p, J or ldj = %d)", ldj);
    if (!isfinite(beta))
        return ba_fail(err, BA_ERR_ARG, "beta = %g is not finite", beta);
    size_t N = (size_t)1 << n;
    double *scratch = malloc(sizeof(double) * (N / 2 + 1));
    if (!scratch)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate 2^%d doubles", n - 1);
    ba_dqa_energies(n, h, J, ldj, p, scratch); /* p holds E(x), O(2^n) */
    free(scratch);
    double mx = -INFINITY;
    for (size_t x = 0; x < N; x++) {
        p[x] = -beta * p[x];
        if (!isfinite(p[x]))
            return ba_fail(err, BA_ERR_NUMERIC, "energy of state %zu is not finite", x);
        mx = p[x] > mx ? p[x] : mx;
    }
    double z = 0.0;
    for (size_t x = 0; x < N; x++)
        z += (p[x] = exp(p[x] - mx));
    for (size_t x = 0; x < N; x++)
        p[x] /= z;
    return BA_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int ba_draw_shots(const double *p, int n, int S, ba_rng *rng, uint64_t *shots, char *err)
{
    if (n < 1 || n > BA_DQA_MAX_SPINS || S < 1 || !p || !rng || !shots)
        return ba_fail(err, BA_ERR_ARG, "bad arguments (n = %d, S = %d)", n, S);
    size_t N = (size_t)1 << n;
    double total = 0.0;
    for (size_t x = 0; x < N; x++) {
        if (!(p[x] >= 0) || !isfinite(p[x]))
            return ba_fail(err, BA_ERR_ARG, "p[%zu] = %g is not a probability", x, p[x]);
        total += p[x];
    }
    if (!(total > 0))
        return ba_fail(err, BA_ERR_ARG, "the distribution sums to 0");
    double *u = malloc(sizeof(double) * (size_t)S);
    if (!u)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate %d uniforms", S);
    for (int i = 0; i < S; i++)
        u[i] = ba_rng_uniform(rng) * total;
    /* Sorted uniforms meet the cumulative sums in one pass; the shots come
     * out in state order, which is fine for every statistic we take. */
    qsort(u, (size_t)S, sizeof *u, cmp_double);
    double c = 0.0;
    size_t x = 0, last = 0;
    for (size_t y = 0; y < N; y++)
        if (p[y] > 0)
            last = y;
    for (int i = 0; i < S; i++) {
        while (x < last && c + p[x] <= u[i])
            c += p[x++];
        shots[i] = x;
    }
    free(u);
    return BA_OK;
}

double ba_tv_distance(const double *p, const double *q, size_t N)
{
    double d = 0.0;
    for (size_t x = 0; x < N; x++)
        d += fabs(p[x] - q[x]);
    return 0.5 * d;
}

double ba_kl_divergence(const double *p, const double *q, size_t N)
{
    double d = 0.0;
    for (size_t x = 0; x < N; x++) {
        if (p[x] <= 0)
            continue;
        if (q[x] <= 0)
            return INFINITY;
        d += p[x] * log(p[x] / q[x]);
    }
    return d;
}

/* ---------------------------------------------------------- fit of beta */

/* Weighted least squares of y(x) = log p(x) on z(x) = -E(x) with an
 * intercept, weights w(x) = p(x) / sum p, over the states with p(x) > 0:
 *   beta = Cov_w(z, y) / Var_w(z),  r2 = Cov_w(z, y)^2 / (Var_w(z) Var_w(y)),
 * the weighted coefficient of determination (1 when log p is exactly
 * affine in -E; taken as 1 when Var_w(y) is 0 to rounding, a constant
 * log p, which beta = 0 fits exactly). For an
 * exact Boltzmann distribution at beta0 it returns beta0 with r2 = 1.
 * Weighting by p lets the probable states decide, so states whose tiny
 * probabilities are rounding noise do not. Two passes (means, then centred
 * sums) keep the cancellation small. */
int ba_fit_beta(int n, const double *h, const double *J, int ldj, const double *p,
                double *beta, double *r2, char *err)
{
    if (n < 1 || n > BA_DQA_MAX_SPINS)
        return ba_fail(err, n < 1 ? BA_ERR_ARG : BA_ERR_LIMIT,
                       "n = %d is out of range [1, %d] for an enumerated distribution", n,
                       BA_DQA_MAX_SPINS);
    if (!p || !beta || (!J && n > 1) || ldj < n)
        return ba_fail(err, BA_ERR_ARG, "bad arguments (p, beta, J or ldj = %d)", ldj);
    size_t N = (size_t)1 << n;
    double *E = malloc(sizeof(double) * N), *scratch = malloc(sizeof(double) * (N / 2 + 1));
    if (!E || !scratch) {
        free(E), free(scratch);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate 2^%d energies", n);
    }
    ba_dqa_energies(n, h, J, ldj, E, scratch);
    free(scratch);
    double W = 0.0, mz = 0.0, my = 0.0;
    int rc = BA_OK;
    for (size_t x = 0; x < N && !rc; x++) {
        if (!(p[x] >= 0) || !isfinite(p[x]))
            rc = ba_fail(err, BA_ERR_ARG, "p[%zu] = %g is not a probability", x, p[x]);
        else if (!isfinite(E[x]))
            rc = ba_fail(err, BA_ERR_NUMERIC, "energy of state %zu is not finite", x);
        else if (p[x] > 0)
            W += p[x], mz += p[x] * -E[x], my += p[x] * log(p[x]);
    }
    if (!rc && !(W > 0))
        rc = ba_fail(err, BA_ERR_ARG, "the distribution sums to 0");
    if (rc) {
        free(E);
        return rc;
    }
    mz /= W, my /= W;
    double szz = 0.0, szy = 0.0, syy = 0.0;
    for (size_t x = 0; x < N; x++)
        if (p[x] > 0) {
            double dz = -E[x] - mz, dy = log(p[x]) - my;
            szz += p[x] * dz * dz, szy += p[x] * dz * dy, syy += p[x] * dy * dy;
        }
    free(E);
    /* Var_w(z) relative to the energy scale: 0 when every state with
     * p > 0 has the same energy (a single state, say), where no slope
     * exists. */
    if (!(szz > 1e-24 * W * (mz * mz + 1.0)))
        return ba_fail(err, BA_ERR_NUMERIC,
                       "the states with p > 0 all have the same energy: beta is not "
                       "identifiable");
    *beta = szy / szz;
    if (r2)
        *r2 = syy > 1e-24 * W * (my * my + 1.0) ? (szy * szy) / (szz * syy) : 1.0;
    return BA_OK;
}

/* ----------------------------------------------------- Gibbs and SA
 *
 * Both work on spins s_j = +-1 stored as doubles, with the local fields
 * f_j = h_j + sum_k Js_jk s_k kept up to date (Js is the symmetric copy of
 * J's upper triangle, zero diagonal): an update of s_j costs one O(n)
 * update of f (adding 0 when s_j stays). A heat-bath update draws s_j = +1
 * with probability 1 / (1 + exp(-2 beta f_j)), the conditional of P at
 * inverse temperature beta given the other spins, so P at beta is
 * stationary (heat bath rather than Metropolis: the same stationary law, one
 * uniform per update, no separate accept step). A sweep updates
 * j = 0..n-1 in order.
 *
 * Randomness: one draw of the caller's rng gives a base seed; chain c (or
 * shot i of SA) runs on its own ba_rng seeded with base + (c + 1) times an
 * odd constant, so chains are independent of each other and of the thread
 * that runs them, and the caller's rng advances by exactly one draw. */

#define STREAM_MUL 0xD1B54A32D192ED03ULL

typedef struct {
    int n;
    const double *Js; /* (n,n) symmetric couplings, zero diagonal */
    const double *h;  /* (n) fields (zeros when the caller passed NULL) */
} ising_sys;

/* Random start: every spin +-1 with probability 1/2, and its fields. */
static void random_state(const ising_sys *sy, ba_rng *r, double *sp, double *f)
{
    int n = sy->n;
    uint64_t bits = ba_rng_u64(r);
    for (int j = 0; j < n; j++)
        sp[j] = (bits >> j) & 1 ? 1.0 : -1.0;
    for (int j = 0; j < n; j++) {
        double a = sy->h[j];
        const double *row = sy->Js + (size_t)j * n;
        for (int k = 0; k < n; k++)
            a += row[k] * sp[k];
        f[j] = a;
    }
}

/* One heat-bath sweep at inverse temperature beta. */
static void sweep(const ising_sys *sy, double beta, ba_rng *r, double *sp, double *f)
{
    int n = sy->n;
    for (int j = 0; j < n; j++) {
        double pup = 1.0 / (1.0 + exp(-2.0 * beta * f[j]));
        double v = ba_rng_uniform(r) < pup ? 1.0 : -1.0;
        /* branch-free: the fields move by d = 0 when the spin stays (a
         * random branch costs more than n multiply-adds at these n) */
        double d = v - sp[j];
        sp[j] = v;
        const double *row = sy->Js + (size_t)j * n;
        for (int k = 0; k < n; k++)
            f[k] += d * row[k];
    }
}

static uint64_t state_word(int n, const double *sp)
{
    uint64_t x = 0;
    /* n <= 64 was checked by ba_sample; the bound is restated so the
     * compiler sees the word (and sp) cannot overflow */
    if (n > BA_SAMPLER_MAX_SPINS)
        n = BA_SAMPLER_MAX_SPINS;
    for (int j = 0; j < n; j++)
        x |= (uint64_t)(sp[j] > 0) << j;
    return x;
}

/* Gibbs: chain c of C gets S/C shots, plus one for c < S mod C; its shots
 * are consecutive in the output (chain 0 first). Each chain starts from a
 * random state, discards `burnin` sweeps, then keeps the state after every
 * `thin` further sweeps. */
static void gibbs_chains(const ba_sampler *s, const ising_sys *sy, uint64_t base,
                         uint64_t *shots)
{
    int C = s->chains, S = s->shots, n = sy->n;
    double work = (double)n * n * ((double)C * s->burnin + (double)S * s->thin);
#pragma omp parallel for schedule(dynamic) if (work > BA_PAR_MIN_WORK)
    for (int c = 0; c < C; c++) {
        double sp[BA_SAMPLER_MAX_SPINS], f[BA_SAMPLER_MAX_SPINS];
        ba_rng r;
        ba_rng_seed(&r, base + (uint64_t)(c + 1) * STREAM_MUL);
        int first = c * (S / C) + (c < S % C ? c : S % C);
        int count = S / C + (c < S % C);
        random_state(sy, &r, sp, f);
        for (int t = 0; t < s->burnin; t++)
            sweep(sy, 1.0, &r, sp, f);
        for (int i = 0; i < count; i++) {
            for (int t = 0; t < s->thin; t++)
                sweep(sy, 1.0, &r, sp, f);
            shots[first + i] = state_word(n, sp);
        }
    }
}

/* SA: shot i is one anneal of `sweeps` heat-bath sweeps from a random state
 * with beta_t = beta0^(1 - t/(sweeps - 1)) (geometric from beta0 to 1; a
 * single sweep runs at beta = 1); its final state is the shot. */
static int sa_shots(const ba_sampler *s, const ising_sys *sy, uint64_t base, uint64_t *shots,
                    char *err)
{
    int S = s->shots, T = s->sweeps, n = sy->n;
    double *beta = malloc(sizeof(double) * (size_t)T); /* (T) the schedule, shared by shots */
    if (!beta)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate %d sweep temperatures", T);
    for (int t = 0; t < T; t++)
        beta[t] = T > 1 ? pow(s->beta0, 1.0 - (double)t / (T - 1)) : 1.0;
    double work = (double)n * n * S * T;
#pragma omp parallel for schedule(static) if (work > BA_PAR_MIN_WORK)
    for (int i = 0; i < S; i++) {
        double sp[BA_SAMPLER_MAX_SPINS], f[BA_SAMPLER_MAX_SPINS];
        ba_rng r;
        ba_rng_seed(&r, base + (uint64_t)(i + 1) * STREAM_MUL);
        random_state(sy, &r, sp, f);
        for (int t = 0; t < T; t++)
            sweep(sy, beta[t], &r, sp, f);
        shots[i] = state_word(n, sp);
    }
    free(beta);
    return BA_OK;
}

static int classical_sample(const ba_sampler *s, int n, const double *h, const double *J,
                            int ldj, ba_rng *rng, uint64_t *shots, char *err)
{
    double *Js = calloc((size_t)n * n + n, sizeof(double));
    if (!Js)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate %d x %d couplings", n, n);
    double *hh = Js + (size_t)n * n;
    for (int j = 0; j < n; j++) {
        hh[j] = h ? h[j] : 0.0;
        if (!isfinite(hh[j])) {
            free(Js);
            return ba_fail(err, BA_ERR_ARG, "field h[%d] = %g is not finite", j, h[j]);
        }
        for (int k = j + 1; k < n; k++) {
            double v = J[(size_t)j * ldj + k];
            if (!isfinite(v)) {
                free(Js);
                return ba_fail(err, BA_ERR_ARG, "coupling J[%d][%d] = %g is not finite", j, k,
                               v);
            }
            Js[(size_t)j * n + k] = Js[(size_t)k * n + j] = v;
        }
    }
    ising_sys sy = {n, Js, hh};
    uint64_t base = ba_rng_u64(rng);
    int rc = BA_OK;
    if (s->kind == BA_SAMPLER_GIBBS)
        gibbs_chains(s, &sy, base, shots);
    else
        rc = sa_shots(s, &sy, base, shots, err);
    free(Js);
    return rc;
}

/* ------------------------------------------------------------- dispatch */

int ba_sample(const ba_sampler *s, int n, const double *h, const double *J, int ldj,
              ba_rng *rng, uint64_t *shots, char *err)
{
    int rc = ba_sampler_validate(s, err);
    if (rc)
        return rc;
    if (s->kind == BA_SAMPLER_EXACT)
        return ba_fail(err, BA_ERR_ARG, "the exact sampler draws no shots");
    if (n < 1 || n > ba_sampler_max_spins(s->kind))
        return ba_fail(err, n < 1 ? BA_ERR_ARG : BA_ERR_LIMIT,
                       "n = %d spins is out of range [1, %d] for the %s sampler", n,
                       ba_sampler_max_spins(s->kind), ba_sampler_name(s->kind));
    if (!rng || !shots || (!J && n > 1) || ldj < n)
        return ba_fail(err, BA_ERR_ARG, "bad arguments (rng, shots, J or ldj = %d)", ldj);
    switch (s->kind) {
    case BA_SAMPLER_DIRECT:
    case BA_SAMPLER_DQA: {
        double *p = malloc(sizeof(double) << n);
        if (!p)
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate 2^%d probabilities", n);
        rc = s->kind == BA_SAMPLER_DIRECT ? ba_boltzmann_distribution(n, h, J, ldj, 1.0, p, err)
                                          : ba_dqa_distribution(s, n, h, J, ldj, p, err);
        if (!rc)
            rc = ba_draw_shots(p, n, s->shots, rng, shots, err);
        free(p);
        return rc;
    }
    case BA_SAMPLER_GIBBS:
    case BA_SAMPLER_SA:
        return classical_sample(s, n, h, J, ldj, rng, shots, err);
    default:
        return ba_fail(err, BA_ERR_ARG, "the %s sampler draws no shots",
                       ba_sampler_name(s->kind));
    }
}
