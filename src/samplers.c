/* Samplers of one Ising system (spec section 7): the direct sampler (shots
 * from the enumerated distribution), simulated diabatic quantum annealing,
 * Gibbs sampling and simulated annealing, plus the measures that compare a
 * sampled distribution with the exact one. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const sampler_names[] = {"exact", "direct", "dqa", "gibbs", "sa"};
#define NSAMPLERS ((int)(sizeof sampler_names / sizeof *sampler_names))

const char *ba_sampler_name(ba_sampler_kind k)
{
    return (unsigned)k < (unsigned)NSAMPLERS ? sampler_names[k] : "?";
}

int ba_sampler_parse(const char *s, ba_sampler_kind *out, char *err)
{
    for (int i = 0; s && i < NSAMPLERS; i++)
        if (strcmp(s, sampler_names[i]) == 0) {
            *out = (ba_sampler_kind)i;
            return BA_OK;
        }
    return ba_fail(err, BA_ERR_ARG, "unknown sampler '%s' (exact|direct|dqa|gibbs|sa)",
                   s ? s : "(null)");
}

ba_sampler ba_sampler_default(ba_sampler_kind kind)
{
    ba_sampler s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.shots = 256;
    s.beta_assumed = 1.0;
    s.tau = 1.0, s.gamma = 1.0, s.lambda = 1.0;
    s.trotter_steps = 50, s.order = 2;
    s.chains = 8, s.burnin = 20, s.thin = 1;
    s.sweeps = 20, s.beta0 = 0.1;
    return s;
}

int ba_sampler_max_spins(ba_sampler_kind kind)
{
    switch (kind) {
    case BA_SAMPLER_EXACT:
        return BA_FAST_MAX_SPINS;
    case BA_SAMPLER_DIRECT:
    case BA_SAMPLER_DQA:
        return BA_DQA_MAX_SPINS;
    default:
        return BA_SAMPLER_MAX_SPINS;
    }
}

int ba_sampler_validate(const ba_sampler *s, char *err)
{
    if (!s)
        return ba_fail(err, BA_ERR_ARG, "sampler is NULL");
    if ((unsigned)s->kind >= (unsigned)NSAMPLERS)
        return ba_fail(err, BA_ERR_ARG, "sampler kind %d is not a known sampler", (int)s->kind);
    if (s->kind == BA_SAMPLER_EXACT)
        return BA_OK;
    if (s->shots < 1 || s->shots > (1 << 24))
        return ba_fail(err, BA_ERR_ARG, "shots = %d is out of range [1, %d]", s->shots, 1 << 24);
    if (!(s->beta_assumed > 0 && s->beta_assumed <= 1e3))
        return ba_fail(err, BA_ERR_ARG, "beta_assumed = %g is out of range (0, 1000]",
                       s->beta_assumed);
    switch (s->kind) {
    case BA_SAMPLER_DQA:
        if (!(s->tau > 0 && s->tau <= 1e4))
            return ba_fail(err, BA_ERR_ARG, "dqa tau = %g is out of range (0, 1e4]", s->tau);
        if (!(s->gamma > 0 && s->gamma <= 1e4))
            return ba_fail(err, BA_ERR_ARG, "dqa gamma = %g is out of range (0, 1e4]", s->gamma);
        if (!(s->lambda > 0 && s->lambda <= 1e4))
            return ba_fail(err, BA_ERR_ARG, "dqa lambda = %g is out of range (0, 1e4]", s->lambda);
        if (s->trotter_steps < 1 || s->trotter_steps > 1000000)
            return ba_fail(err, BA_ERR_ARG, "dqa trotter_steps = %d is out of range [1, 1e6]",
                           s->trotter_steps);
        if (s->order != 1 && s->order != 2)
            return ba_fail(err, BA_ERR_ARG, "dqa order = %d must be 1 or 2", s->order);
        break;
    case BA_SAMPLER_GIBBS:
        if (s->chains < 1 || s->chains > s->shots)
            return ba_fail(err, BA_ERR_ARG, "gibbs chains = %d is out of range [1, shots = %d]",
                           s->chains, s->shots);
        if (s->burnin < 0 || s->burnin > 1000000)
            return ba_fail(err, BA_ERR_ARG, "gibbs burnin = %d is out of range [0, 1e6]",
                           s->burnin);
        if (s->thin < 1 || s->thin > 1000000)
            return ba_fail(err, BA_ERR_ARG, "gibbs thin = %d is out of range [1, 1e6]", s->thin);
        break;
    case BA_SAMPLER_SA:
        if (s->sweeps < 1 || s->sweeps > 1000000)
            return ba_fail(err, BA_ERR_ARG, "sa sweeps = %d is out of range [1, 1e6]", s->sweeps);
        if (!(s->beta0 > 0 && s->beta0 <= 1))
            return ba_fail(err, BA_ERR_ARG, "sa beta0 = %g is out of range (0, 1]", s->beta0);
        break;
    default:
        break;
    }
    return BA_OK;
}

/* -E(x) = sum_j h_j s_j + sum_{j<k} J_jk s_j s_k of the state word x. */
static double neg_energy(int n, const double *h, const double *J, int ldj, uint64_t x)
{
    double e = 0.0;
    for (int j = 0; j < n; j++) {
        double sj = (x >> j) & 1 ? 1.0 : -1.0;
        if (h)
            e += h[j] * sj;
        double r = 0.0;
        for (int k = j + 1; k < n; k++)
            r += J[(size_t)j * ldj + k] * ((x >> k) & 1 ? 1.0 : -1.0);
        e += sj * r;
    }
    return e;
}

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
    double mx = -INFINITY;
    for (size_t x = 0; x < N; x++) {
        p[x] = beta * neg_energy(n, h, J, ldj, x);
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

int ba_dqa_distribution(const ba_sampler *s, int n, const double *h, const double *J, int ldj,
                        double *p, char *err)
{
    (void)s, (void)n, (void)h, (void)J, (void)ldj, (void)p;
    return ba_fail(err, BA_ERR_ARG, "the dqa simulator is not built yet");
}

int ba_fit_beta(int n, const double *h, const double *J, int ldj, const double *p, double *beta,
                double *r2, char *err)
{
    (void)n, (void)h, (void)J, (void)ldj, (void)p, (void)beta, (void)r2;
    return ba_fail(err, BA_ERR_ARG, "ba_fit_beta is not built yet");
}

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
    case BA_SAMPLER_DIRECT: {
        double *p = malloc(sizeof(double) << n);
        if (!p)
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate 2^%d probabilities", n);
        rc = ba_boltzmann_distribution(n, h, J, ldj, 1.0, p, err);
        if (!rc)
            rc = ba_draw_shots(p, n, s->shots, rng, shots, err);
        free(p);
        return rc;
    }
    default:
        return ba_fail(err, BA_ERR_ARG, "the %s sampler is not built yet",
                       ba_sampler_name(s->kind));
    }
}
