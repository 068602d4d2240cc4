/* The brute-force references shared by the sampler tests (test_samplers.c,
 * test_samplers_dqa.c), written independently of the library: random
 * instances, energies over the spins of each state and the Boltzmann
 * distribution by enumeration; the dqa sampler's settings, and SHOW.
 * Needs <cmocka.h> (after its own prerequisites), <math.h>, <stdint.h>,
 * <stdio.h>, <stdlib.h> and "model/model.h". */
#ifndef BA_TEST_SAMPLER_REF_H
#define BA_TEST_SAMPLER_REF_H

/* BA_TEST_VERBOSE=1 prints the measured values next to their bounds. */
#define SHOW(...)                                                                             \
    do {                                                                                      \
        if (getenv("BA_TEST_VERBOSE"))                                                        \
            fprintf(stderr, __VA_ARGS__);                                                     \
    } while (0)

/* ------------------------------------------------------------- helpers */

/* An instance: h (n) ~ N(0, hs); J (n, ld) with used entries (j < k < n)
 * ~ N(0, js) and every other entry NaN, so reading one shows. */
static inline void instance(ba_rng *r, int n, int ld, double hs, double js, double *h, double *J)
{
    for (int j = 0; j < n; j++)
        h[j] = hs * ba_rng_normal(r);
    for (int j = 0; j < ld; j++)
        for (int k = 0; k < ld; k++)
            J[j * ld + k] = (j < k && k < n) ? js * ba_rng_normal(r) : NAN;
}

static inline double spin(uint64_t x, int j) { return (x >> j) & 1 ? 1.0 : -1.0; }

/* E(x) = -sum h_j s_j - sum_{j<k} J_jk s_j s_k, spin by spin. */
static inline double brute_energy(int n, const double *h, const double *J, int ld, uint64_t x)
{
    double e = 0.0;
    for (int j = 0; j < n; j++) {
        e -= (h ? h[j] : 0.0) * spin(x, j);
        for (int k = j + 1; k < n; k++)
            e -= J[j * ld + k] * spin(x, j) * spin(x, k);
    }
    return e;
}

static inline void brute_energies(int n, const double *h, const double *J, int ld, double *E)
{
    for (uint64_t x = 0; x < ((uint64_t)1 << n); x++)
        E[x] = brute_energy(n, h, J, ld, x);
}

/* Boltzmann distribution at beta by brute force. */
static inline void brute_boltzmann(int n, const double *E, double beta, double *p)
{
    size_t N = (size_t)1 << n;
    double mn = INFINITY, z = 0.0;
    for (size_t x = 0; x < N; x++)
        mn = fmin(mn, E[x]);
    for (size_t x = 0; x < N; x++)
        z += (p[x] = exp(-beta * (E[x] - mn)));
    for (size_t x = 0; x < N; x++)
        p[x] /= z;
}

static inline ba_sampler dqa(double tau, double gamma, double lambda, int M, int order)
{
    ba_sampler s = ba_sampler_default(BA_SAMPLER_DQA);
    s.tau = tau, s.gamma = gamma, s.lambda = lambda, s.trotter_steps = M, s.order = order;
    return s;
}

#endif
