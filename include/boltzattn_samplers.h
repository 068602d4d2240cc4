/*
 * boltzattn: the samplers (spec section 7). Included by boltzattn.h, at the
 * point where the model's config needs ba_sampler, so programs include
 * that one; this file keeps the samplers' part of the API in one place:
 * their settings and checks, drawing shots, the exact and DQA
 * distributions, and the quality measures.
 */
/* first, so that including this file alone brings in everything it needs,
 * with this file read at its place inside boltzattn.h */
#include "boltzattn.h"

#ifndef BOLTZATTN_SAMPLERS_H
#define BOLTZATTN_SAMPLERS_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------- samplers
 * Samplers draw spin states of one Ising system instead of enumerating it
 * (spec section 7). The system is the engine's: n spins, fields h (n, or
 * NULL for h = 0), couplings J with leading dimension ldj (J[j*ldj + k],
 * j < k), P(s) = exp(sum_j h_j s_j + sum_{j<k} J_jk s_j s_k) / Z, inverse
 * temperature 1. A state is a 64-bit word: bit j set <=> s_j = +1, so the
 * integer value of a state is also its index in a 2^n distribution array.
 *
 *     ba_sampler sp = ba_sampler_default(BA_SAMPLER_GIBBS);
 *     sp.shots = 1024;
 *     uint64_t *shots = malloc(sp.shots * sizeof *shots);   // (S)
 *     if (ba_sample(&sp, n, h, J, n, &rng, shots, err)) { ... }
 */

typedef enum {
    BA_SAMPLER_EXACT = 0,  /* no sampling: exact marginals from the engine */
    BA_SAMPLER_DIRECT = 1, /* shots drawn from the exact distribution (by
                              enumeration): shot noise without sampler bias */
    BA_SAMPLER_DQA = 2,    /* simulated diabatic quantum annealing */
    BA_SAMPLER_GIBBS = 3,  /* Gibbs sampling, sequential sweeps, several chains */
    BA_SAMPLER_SA = 4      /* simulated annealing, one anneal per shot */
} ba_sampler_kind;

/* Largest number of spins (bits of a state word) any sampler handles. */
#define BA_SAMPLER_MAX_SPINS 64
/* Largest n of the state-vector DQA simulator and of the direct sampler
 * (2^24 complex doubles = 256 MiB). */
#define BA_DQA_MAX_SPINS 24

/* A sampler and its parameters; a plain value stored in checkpoints. */
typedef struct {
    ba_sampler_kind kind;
    int shots;          /* S: states drawn per Ising system */
    double beta_assumed; /* inverse temperature the sampled-gradient
                            estimator assumes the shots come from: sampled
                            covariances are multiplied by it (1 = the
                            target temperature) */
    /* dqa: H(t) = (1 - t/tau) H_X + (t/tau) lambda E, H_X = -gamma sum X_j,
     * start |+>^n, M Trotter steps of first or second order */
    double tau, gamma, lambda;
    int trotter_steps; /* M */
    int order;         /* 1 or 2 */
    /* gibbs: shots are split over `chains` chains; each discards `burnin`
     * sweeps, then keeps one state every `thin` sweeps */
    int chains, burnin, thin;
    /* sa: each shot is one anneal of `sweeps` sweeps with beta rising
     * geometrically from beta0 to 1 */
    int sweeps;
    double beta0;
} ba_sampler;

const char *ba_sampler_name(ba_sampler_kind k);
/* BA_ERR_ARG on an unknown name, listing the accepted ones in err. */
int ba_sampler_parse(const char *s, ba_sampler_kind *out, char *err);
/* Documented defaults for kind (see docs/samplers.md). */
ba_sampler ba_sampler_default(ba_sampler_kind kind);
/* Largest n the sampler accepts (exact: the fast engine's limit). */
int ba_sampler_max_spins(ba_sampler_kind kind);
/* BA_OK when every parameter the kind uses is in range, else BA_ERR_ARG
 * naming it. */
int ba_sampler_validate(const ba_sampler *s, char *err);
/* A sampler from its JSON object, as in a config's "sampler" field
 * (ba_config_from_json documents the rules): "kind" required, a missing
 * parameter the kind's default; BA_ERR_FORMAT naming a malformed or
 * out-of-range field ("sampler.FIELD"). */
int ba_sampler_from_json(const char *json, ba_sampler *out, char *err);

/* One numeric parameter of ba_sampler: its field in the config's "sampler"
 * object, its command-line option, the kind that uses it, where it lives
 * and the range ba_sampler_validate accepts ([lo, hi], or (lo, hi] when
 * lo_open; chains also at most shots). */
typedef struct {
    const char *name;      /* config field, e.g. "tau" */
    const char *option;    /* command-line option without dashes, e.g. "dqa-tau" */
    ba_sampler_kind kind;  /* the kind that uses it; BA_SAMPLER_EXACT: every
                              kind that samples */
    int is_int;            /* an int field, else a double */
    size_t offset;         /* of the field in ba_sampler */
    double lo, hi;
    int lo_open;
    const char *help;      /* one line for --help */
} ba_sampler_param;
/* The table of every parameter (static, *n entries), in config order. */
const ba_sampler_param *ba_sampler_params(int *n);
/* A parameter's value in s, as a double, and setting it (an int field takes
 * (int)v). */
double ba_sampler_param_get(const ba_sampler *s, const ba_sampler_param *p);
void ba_sampler_param_set(ba_sampler *s, const ba_sampler_param *p, double v);
/* 1 if a sampler of kind uses the parameter. */
int ba_sampler_param_used(const ba_sampler_param *p, ba_sampler_kind kind);

/* Draws s->shots states of the n-spin system into shots (S words, caller
 * owned), using only rng for randomness. BA_ERR_ARG for the exact kind or a
 * bad parameter, BA_ERR_LIMIT when n exceeds the sampler's limit,
 * BA_ERR_NOMEM. */
int ba_sample(const ba_sampler *s, int n, const double *h, const double *J, int ldj,
              ba_rng *rng, uint64_t *shots, char *err);

/* The exact distribution at inverse temperature beta: p (2^n, caller
 * owned), p[x] = P(state x). n <= BA_DQA_MAX_SPINS. */
int ba_boltzmann_distribution(int n, const double *h, const double *J, int ldj, double beta,
                              double *p, char *err);
/* The DQA output distribution |psi(x)|^2 of a full state-vector simulation
 * with s's dqa parameters: p (2^n, caller owned). n <= BA_DQA_MAX_SPINS. */
int ba_dqa_distribution(const ba_sampler *s, int n, const double *h, const double *J, int ldj,
                        double *p, char *err);
/* S shots from a distribution p over 2^n states (sorted uniforms and one
 * pass over the cumulative sums). p need not be normalised; BA_ERR_ARG if
 * it has a negative or non-finite entry or sums to 0. */
int ba_draw_shots(const double *p, int n, int S, ba_rng *rng, uint64_t *shots, char *err);
/* Total variation distance 1/2 sum |p - q| and KL(p || q) (nats; INFINITY
 * if q = 0 where p > 0) of two distributions over N states. */
double ba_tv_distance(const double *p, const double *q, size_t N);
double ba_kl_divergence(const double *p, const double *q, size_t N);
/* Effective inverse temperature of a distribution p over 2^n states: the
 * least-squares slope of log p(x) against -E(x) over the states with
 * p(x) > 0, weighted by p(x) (docs/samplers.md). *r2 (may be NULL) gets the
 * weighted coefficient of determination of the fit. */
int ba_fit_beta(int n, const double *h, const double *J, int ldj, const double *p,
                double *beta, double *r2, char *err);

/* How well a sampler reproduces one system's Boltzmann distribution P
 * (inverse temperature 1), all over the 2^n states:
 *   tv       total variation distance to P;
 *   kl       KL(Q || P) of the sampler's distribution Q (nats);
 *   beta_eff ba_fit_beta of Q, r2 that fit's coefficient of determination;
 *   tv_eff   total variation between Q and the Boltzmann distribution at
 *            beta_eff (small: Q is Boltzmann-like, only at another
 *            temperature).
 * Q is the exact |psi|^2 for dqa; for the other samplers it is the
 * histogram of `shots` draws, so its distances include shot noise (of order
 * sqrt(2^n / shots)). rng serves those draws only. When Q sits on states
 * of a single energy no temperature can be fitted: beta_eff, r2 and tv_eff
 * are then NAN (not an error). n <= BA_DQA_MAX_SPINS; BA_ERR_ARG for the
 * exact kind or bad arguments. */
typedef struct {
    double tv, kl, beta_eff, r2, tv_eff;
} ba_sampler_quality;
int ba_sampler_measure(const ba_sampler *s, int n, const double *h, const double *J, int ldj,
                       int shots, ba_rng *rng, ba_sampler_quality *q, char *err);

#ifdef __cplusplus
}
#endif

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
