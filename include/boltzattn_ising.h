/*
 * boltzattn: the Ising engines by number. Included by boltzattn.h, after
 * the model section, so programs include that one; this file keeps the
 * engines' part of the API in one place: the engine table (ba_engine_count,
 * ba_engine_info and the BA_ENGINE_CAP_* bits), one Ising system's
 * marginals and their backward with a chosen engine (ba_ising_marginals,
 * ba_ising_backward, ba_ising_solve), the samplers (boltzattn_samplers.h,
 * included here) and sampled attention: a model's sampler and engine
 * switches (ba_model_sampler_rng, ba_model_set_sampler,
 * ba_model_set_engine). The engine enum, ba_approx and ba_approx_stats
 * are in boltzattn.h's settings section, the model config holds them.
 */
/* first, so that including this file alone brings in everything it needs,
 * with this file read at its place inside boltzattn.h */
#include "boltzattn.h"

#ifndef BOLTZATTN_ISING_H
#define BOLTZATTN_ISING_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------ engine table */

/* The engine table: every engine the library has, in the order of their
 * numbers (auto, the rule that picks band or fast, is not one of them;
 * ba_engine_parse still takes it). Capabilities of an engine: */
#define BA_ENGINE_CAP_EXACT 1u      /* the marginals exactly (to rounding) */
#define BA_ENGINE_CAP_ENUMERATE 2u  /* sums over 2^n states: max_spins bounds n */
#define BA_ENGINE_CAP_APPROX 4u     /* iterates (ba_approx settings), counts ba_approx_stats */
#define BA_ENGINE_CAP_BAND 8u       /* reads couplings of range <= W only (a band) */
#define BA_ENGINE_CAP_WINDOW 16u    /* takes an exact window W (config 'window') */
#define BA_ENGINE_CAP_CONTEXT 32u   /* keeps state per attention head across calls */
#define BA_ENGINE_CAP_F32 64u       /* float32 products under the float model */
/* The number of engines in the table (at least 1). */
int ba_engine_count(void);
/* Engine i, 0 <= i < ba_engine_count(): its number, name (as --engine and
 * the configs take it), a one-line summary, its largest number of spins
 * without a band (ba_engine_max_spins) and its BA_ENGINE_CAP_* bits, each
 * written where the pointer is not NULL (the strings are static). BA_OK, or
 * BA_ERR_ARG with nothing written when i is out of range. */
int ba_engine_info(int i, ba_engine *id, const char **name, const char **summary,
                   int *max_spins, unsigned *caps);

/* ------------------------------------------------------ Ising engine */

/* Exact marginals of one Ising system with n spins:
 *   P(s) = exp(sum_j h_j s_j + sum_{j<k} J_jk s_j s_k) / Z
 * h: (n) fields, or NULL for h = 0. J: coupling rows with leading dimension
 * ldj (J[j*ldj + k] used for j < k only). Writes logw[j] = log P(s_j = +1)
 * for j < n. BA_ERR_LIMIT if n exceeds the engine's limit. */
int ba_ising_marginals(ba_engine e, int n, const double *h, const double *J,
                       int ldj, double *logw, char *err);

/* Exact backward of the above for an upstream gradient g_j = dL/dm_j with
 * m_j = <s_j>: dh_j += Cov(G, s_j), dJ_jk += Cov(G, s_j s_k) (j < k),
 * G = sum_j g_j s_j. dh and dJ may be NULL to skip them. */
int ba_ising_backward(ba_engine e, int n, const double *h, const double *J,
                      int ldj, const double *g, double *dh, double *dJ,
                      char *err);

/* Marginals of one Ising system with any engine, for exploration and
 * bindings (ba_ising_marginals is the exact engines' one-system call):
 * writes logw[j] = log P(s_j = +1) (or the approximate engine's estimate)
 * for j < n, with h (n; NULL for 0) and J (rows j < k, leading dimension
 * ldj) as there. e: reference or fast (exact, n <= 20 / 26), band (exact
 * for couplings of range at most W: farther pairs are ignored), auto (band
 * when W > 0, else fast), mf, tap, bp or hybrid (W its exact window).
 * approx: the approximate engines' settings (NULL: ba_approx_default); st
 * (may be NULL) receives their counts (rows solved, sweeps, unconverged).
 * Band and the approximate engines solve the system as the last row of a
 * causal block of n rows, the way attention runs them, so they cost about
 * n times one solve and take 16 n^2 bytes (n <= BA_MAX_BLOCK); the exact
 * engines solve it once. Errors: BA_ERR_ARG naming n, W, ldj, a NULL J or
 * logw, an unknown engine or a bad approx field; BA_ERR_NUMERIC naming a
 * non-finite h or coupling; BA_ERR_LIMIT past the engine's limit;
 * BA_ERR_NOMEM. */
int ba_ising_solve(ba_engine e, int W, const ba_approx *approx, int n, const double *h,
                   const double *J, int ldj, double *logw, ba_approx_stats *st, char *err);

/* The samplers: draw shots of one Ising system (boltzattn_samplers.h). */
#include "boltzattn_samplers.h"

/* ------------------------------------------------- sampled attention
 * boltzmann and coupling attention may estimate their Ising marginals from
 * the shots of a sampler instead of computing them exactly (spec sections 3
 * and 7; docs/internals.md, "Sampled attention"). For each query with n = i+1
 * visible keys the model draws S = sampler.shots states with ba_sample and
 * uses
 *     w_ij = (c_ij + 1/2) / (S + 1),  c_ij = #shots with s_j = +1,
 * (never 0, so a row's normalisation stays positive; E[w] = p + (1/2 - p) /
 * (S + 1) shrinks the marginal p towards 1/2 by at most 1/(2(S+1))). The
 * backward uses the same shots: with m^_j = 2c_j/S - 1 the sampled
 * magnetisation, w = (S m^ + S + 1) / (2(S + 1)), g^_j = dL/dm^_j and
 * G(s) = sum_j g^_j s_j,
 *     dL/dh_k  = beta_assumed * Cov^(G, s_k)
 *     dL/dJ_kl = beta_assumed * sum over queries Cov^(G, s_k s_l)
 * where Cov^ is the unbiased sample covariance over the S shots (1/(S-1);
 * 0 for S = 1). That is the exact gradient of the loss as a function of w,
 * with the Jacobian dm/d(h, J) = beta Cov(s, .) of a Boltzmann distribution
 * at inverse temperature beta_assumed estimated from the shots. For
 * coupling attention (h = 0) every batch element shares one system per row
 * i, so one set of shots per row serves the whole batch. */

/* The model's sampler RNG: the stream sampled attention draws its shots
 * from (one 64-bit draw per attention head and forward; each query seeds
 * its own generator from that draw and its index, so results do not depend
 * on the thread count). Owned by the model, seeded at ba_model_init with a
 * fixed seed (BA_SAMPLER_RNG_DEFAULT_SEED); seed it, read it or restore it
 * through the pointer (a ba_rng is a plain value). Never NULL. */
#define BA_SAMPLER_RNG_DEFAULT_SEED 0x5a3b1e5a3b1e5a3bULL
ba_rng *ba_model_sampler_rng(ba_model *m);

/* Switches the sampler the model's forward and backward use from now on
 * (e.g. to evaluate a sample-trained model exactly, or with another
 * sampler); it becomes part of ba_model_config and of later checkpoints.
 * BA_ERR_ARG naming the bad parameter (ba_sampler_validate), a sampler for
 * softmax/sigmoid, or BA_ERR_LIMIT when the block size exceeds the new
 * sampler's (or, for exact, the engine's) limit; the model is unchanged on
 * failure. The activations of the last forward are invalidated: the next
 * ba_model_backward needs a new forward. A sampler other than exact clears
 * band_f32 (shots run no band engine). */
int ba_model_set_sampler(ba_model *m, const ba_sampler *s, char *err);

/* Switches the engine the model's Ising attention runs on from now on
 * (e.g. to evaluate an exact-trained model with an approximate engine);
 * approx (NULL: ba_approx_default) and window (hybrid only; ignored and
 * stored as 0 for the others) as in ba_config. The couplings are
 * unchanged. It becomes part of ba_model_config and later checkpoints.
 * Errors as ba_config_validate's (the engine's limit on T, settings out of
 * range, hybrid with a banded model); the model is unchanged on failure.
 * The last forward's activations are invalidated. An engine other than
 * band clears band_f32 (the band engine's precision). */
int ba_model_set_engine(ba_model *m, ba_engine e, const ba_approx *approx, int window,
                        char *err);

/* Sets the precision of the band engine's window term from now on (f32:
 * 1 float, 0 double; ba_config.band_f32), e.g. to evaluate a model
 * trained in double with the float term, or the reverse. The parameters
 * are unchanged; it becomes part of ba_model_config and later
 * checkpoints. BA_ERR_ARG where f32 is not 0 or 1, or f32 is 1 and the
 * model runs no exact band engine (ba_config_validate's reason); the
 * model is unchanged on failure. The last forward's activations are
 * invalidated. */
int ba_model_set_band_precision(ba_model *m, int f32, char *err);

/* The seed ba_evaluate gives a copy of the sampler RNG, so that evaluating
 * a sampled model returns the same number every time (for the same items
 * and batch size) and leaves the training stream untouched. */
#define BA_EVAL_SAMPLER_SEED 0xe7a15eedULL

#ifdef __cplusplus
}
#endif

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
