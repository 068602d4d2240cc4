/* The Ising layer's private declarations (src/ising/: the engines behind
 * the engine table, the samplers, sampled attention). Not installed; it
 * includes only the core layer's header and its own. */
#ifndef BA_ISING_H
#define BA_ISING_H

#include "core/core.h"
#include "ising/engine.h" /* the engine interface and table */

/* ---------------------------------------------------- engine, batched
 * All queries of one attention head, by engine number through the engine
 * table (src/ising/solve.c; any engine of the table, dense couplings, the
 * default approximate settings, no band or window: for a band or a window
 * call the engine's interface, ba_engine_ops_of(e)->forward, with them).
 * Row q = b*T + i of the (B,T,T) arrays is query i of batch element b; it
 * has n = i+1 spins (keys 0..i), so only entries j <= i are read or
 * written (logw gets -INFINITY above).
 * h (B,T,T) fields or NULL for h = 0; J (T,ldj) couplings, j < k used.
 * forward: logw (B,T,T) = log P_i(s_j = +1).
 * backward: g (B,T,T) = dL/dm; dh (B,T,T) += Cov(G, s_j) (may be NULL);
 * dJ (T,ldj) += sum over queries Cov(G, s_j s_k) (may be NULL). */
int ba_engine_forward(ba_engine e, int B, int T, const double *h, const double *J, int ldj,
                      double *logw, char *err);
int ba_engine_backward(ba_engine e, int B, int T, const double *h, const double *J, int ldj,
                       const double *g, double *dh, double *dJ, char *err);

/* The reference engine over every query of a head, with the layouts above
 * (src/ising_ref.c). */
int ba_ref_forward(int B, int T, const double *h, const double *J, int ldj, double *logw,
                   char *err);
int ba_ref_backward(int B, int T, const double *h, const double *J, int ldj, const double *g,
                    double *dh, double *dJ, char *err);

/* Reference enumeration of one query with caller workspace (2^n doubles):
 * marginals into logw (n), and the backward accumulating dh (n) and dJ
 * (rows of lddj). The oracle, and the fast engine's fallback. */
void ba_ref_marginals_ws(int n, const double *h, const double *J, int ldj, double *logw,
                         double *work);
void ba_ref_backward_ws(int n, const double *h, const double *J, int ldj, const double *g,
                        double *dh, double *dJ, int lddj, double *work);

/* An engine context keeps what a backward reuses from its forward (the fast
 * engine's kernels K' of every n, its products and trust flags) and keeps
 * buffers across calls. One per attention head of a model; NULL contexts
 * mean a stateless call. A backward on a context must follow the forward of
 * the same inputs on that context: only the shape (B,T) is checked (a
 * different shape recomputes the forward; different values of the same
 * shape would silently reuse the old kernels). The model guarantees it. */
ba_engine_ctx *ba_engine_ctx_new(void);
void ba_engine_ctx_free(ba_engine_ctx *c);
/* Queries of the last forward that the fast engine handed to the reference
 * path because their sums fell below its trust threshold (1e-280 with
 * double products, 2^(n+24) FLT_MIN ~ 1e-31 at n = 20 with float ones).
 * With float products a batch holding such queries runs again with double
 * products first; this counts those the double products could not trust
 * either. */
long ba_engine_ctx_fallbacks(const ba_engine_ctx *c);
/* Products of the fast engine in float32 (on) or double (off, the
 * default): the float model's attention core sets it on, the double one
 * off (src/ising_fast.h). A change drops the stored forward. */
void ba_engine_ctx_set_f32(ba_engine_ctx *c, int on);
int ba_engine_forward_ctx(ba_engine_ctx *c, ba_engine e, int B, int T, const double *h,
                          const double *J, int ldj, double *logw, char *err);
int ba_engine_backward_ctx(ba_engine_ctx *c, ba_engine e, int B, int T, const double *h,
                           const double *J, int ldj, const double *g, double *dh, double *dJ,
                           char *err);

/* The fast engine itself (src/ising_fast.c), with the layouts above. The
 * _fast entries need a context; ba_fast_forward/backward make a temporary
 * one (*fallbacks, may be NULL, as ba_engine_ctx_fallbacks). */
int ba_engine_forward_fast(ba_engine_ctx *c, int B, int T, const double *h, const double *J,
                           int ldj, double *logw, char *err);
int ba_engine_backward_fast(ba_engine_ctx *c, int B, int T, const double *h, const double *J,
                            int ldj, const double *g, double *dh, double *dJ, char *err);
int ba_fast_forward(int B, int T, const double *h, const double *J, int ldj, double *logw,
                    long *fallbacks, char *err);
int ba_fast_backward(int B, int T, const double *h, const double *J, int ldj, const double *g,
                     double *dh, double *dJ, char *err);
/* One query of n spins (h: n fields or NULL), as ba_ising_marginals. */
int ba_fast_marginals1(int n, const double *h, const double *J, int ldj, double *logw,
                       char *err);
int ba_fast_backward1(int n, const double *h, const double *J, int ldj, const double *g,
                      double *dh, double *dJ, char *err);

/* ---------------------------------------------- band engine, batched
 * Exact chain inference for couplings of range at most W (spec section 8;
 * src/ising_band.c, src/ising_band_lin.c), with the layouts of
 * ba_engine_forward/backward: h (B,T,T) or NULL, logw (B,T,T), g (B,T,T),
 * dh (B,T,T) += (may be NULL). Two layouts of the couplings:
 * - dense: J (T,ldj), dJ (T,ldj) += (may be NULL). Only J_jk with
 *   0 < k - j <= W is read (entries beyond the band count as 0) and only
 *   those dJ entries are written.
 * - band (_jb): Jb (T,W) row-major, Jb[t*W + d-1] = J_{t-d,t} for
 *   1 <= d <= min(W, t); dJb (T,W) += in that layout (may be NULL).
 *   Entries with d > t are neither read nor written.
 * W may exceed T-1 (the window is then T-1 spins: the full model). The
 * dense entry points copy the band (T W doubles) and share the band ones'
 * implementation, so both give the same results bit for bit.
 * O(n 2^(W+1)) per query of n spins; memory per thread 2 T 2^min(W,T-1)
 * doubles, which BA_BAND_MAX_CELLS bounds (BA_ERR_LIMIT above it), plus
 * a table of the couplings' factors shared by the threads (80 doubles a
 * row at W = 8). Results do not depend on the thread count (nor on the
 * instruction set the kernels were chosen for).
 *
 * Two paths compute the same values: the linear path (alpha, beta as
 * doubles rescaled per step, products instead of log-sum-exp: 8-50x
 * faster for W = 2..8, figures in src/ising_band.c) takes every query
 * whose bound on the dynamic range it meets (ba_band_lin_hbound +
 * ba_band_lin_jbound, derived in src/ising_band_lin.c) is at most
 * BA_BAND_LIN_MAX_NATS, so that nothing it forms underflows; the log path
 * (log-sum-exp per transition, any finite input) takes the others.
 * Errors: BA_ERR_ARG for W outside [1, BA_BAND_MAX_W], B < 1, T outside
 * [1, BA_BAND_MAX_T], ldj < T, NULL J/Jb, logw or g; BA_ERR_NUMERIC naming
 * the first non-finite h (j <= i) or in-band coupling, before any output
 * is written (g is not checked); BA_ERR_NOMEM. */
#define BA_BAND_MAX_W 16
#define BA_BAND_MAX_T 8192
#define BA_BAND_MAX_CELLS ((size_t)1 << 24) /* T*2^W: 256 MiB workspace per thread */
#define BA_BAND_LIN_MAX_NATS 600.0
int ba_band_forward(int W, int B, int T, const double *h, const double *J, int ldj,
                    double *logw, char *err);
int ba_band_backward(int W, int B, int T, const double *h, const double *J, int ldj,
                     const double *g, double *dh, double *dJ, char *err);
/* ba_band_forward and ba_band_backward polling stop (may be NULL) between
 * queries: BA_ERR_INTERRUPTED once it answers, outputs then unspecified
 * (the engine table's band and hybrid engines call these). */
int ba_band_forward_stop(int W, int B, int T, const double *h, const double *J, int ldj,
                         double *logw, const ba_stop *stop, char *err);
int ba_band_backward_stop(int W, int B, int T, const double *h, const double *J, int ldj,
                          const double *g, double *dh, double *dJ, const ba_stop *stop,
                          char *err);
int ba_band_forward_jb(int W, int B, int T, const double *h, const double *Jb, double *logw,
                       char *err);
int ba_band_backward_jb(int W, int B, int T, const double *h, const double *Jb,
                        const double *g, double *dh, double *dJb, char *err);

/* The band entry points (band layout) with the path chosen, for tests and
 * benchmarks: AUTO as above (what ba_band_forward_jb/backward_jb do); LOG
 * every query on the log path; LINEAR every query on the linear path
 * whatever its bound (past the bound it may under- or overflow: only for
 * inputs known to be safe). stats (may be NULL) receives the number of
 * queries each path took. */
typedef enum {
    BA_BAND_AUTO,
    BA_BAND_LOG,
    BA_BAND_LINEAR,
    /* the float linear path (src/ising/band_lin32.c, issue 42): AUTO32
     * sends each query to it when ba_band_lin32_max_nats allows, else as
     * AUTO does (double linear, or log); LINEAR32 sends every query to it
     * whatever its bound (tests and benchmarks on inputs known safe) */
    BA_BAND_AUTO32,
    BA_BAND_LINEAR32
} ba_band_path;
typedef struct {
    long linear, log, linear32; /* linear: the double linear path's */
} ba_band_stats;
int ba_band_forward_path(ba_band_path path, int W, int B, int T, const double *h,
                         const double *Jb, double *logw, ba_band_stats *stats, char *err);
int ba_band_backward_path(ba_band_path path, int W, int B, int T, const double *h,
                          const double *Jb, const double *g, double *dh, double *dJb,
                          ba_band_stats *stats, char *err);

/* The linear path's kernels (src/ising_band_lin.c), for src/ising_band.c.
 * A call context: window we = min(W, T-1), couplings Jb (T,ldb) as above,
 * tab (T, ba_band_lin_table_doubles(we)) the coupling factors, row t from
 * ba_band_lin_table_row. ws: ba_band_lin_ws_doubles(we, T) doubles per
 * thread.
 * forward: logw (n) of one query of n spins (h: n fields or NULL).
 * backward: dh (n, may be NULL) += Cov(G, s_t), djb (T,we) row t, entry
 * d-1 += Cov(G, s_{t-d} s_t) (may be NULL).
 * hbound (per query, non-finite when h holds a non-finite value) plus
 * jbound (per call) bound the dynamic range the path meets, in nats. */
typedef struct {
    int we, T, ldb;
    const double *Jb, *tab;
} ba_band_lin;
size_t ba_band_lin_ws_doubles(int we, int T);
size_t ba_band_lin_table_doubles(int we);
void ba_band_lin_table_row(int we, int t, const double *Jb, int ldb, double *row);
void ba_band_lin_forward(const ba_band_lin *c, double *ws, int n, const double *h,
                         double *logw);
void ba_band_lin_backward(const ba_band_lin *c, double *ws, int n, const double *h,
                          const double *g, double *dh, double *djb);
double ba_band_lin_hbound(int we, int n, const double *h);
double ba_band_lin_jbound(int we, int T, const double *Jb, int ldb);

/* The linear path in float (src/ising/band_lin32.c): the same kernels
 * with tab32 (T, ba_band_lin_table_doubles(we)) the table's entries
 * rounded to float (ba_band_lin32_table from the double one) and ws of
 * ba_band_lin32_ws_doubles(we, T) doubles per thread; inputs and outputs
 * in double as above. A query may take it when hbound + jbound is at most
 * ba_band_lin32_max_nats(we) (float's smaller exponent range). */
typedef struct {
    int we, T, ldb;
    const double *Jb;
    const float *tab;
} ba_band_lin32;
size_t ba_band_lin32_ws_doubles(int we, int T);
void ba_band_lin32_table(int we, int T, const double *tab, float *tab32);
void ba_band_lin32_forward(const ba_band_lin32 *c, double *ws, int n, const double *h,
                           double *logw);
void ba_band_lin32_backward(const ba_band_lin32 *c, double *ws, int n, const double *h,
                            const double *g, double *dh, double *djb);
double ba_band_lin32_max_nats(int we);

/* ------------------------------------------- sampled engine, batched
 * The sampled counterpart of ba_engine_forward/backward (src/sampled.c), with
 * the same layouts: query q = b*T + i has n = i+1 spins, h (B,T,T) fields or
 * NULL for h = 0, J (T,ldj) couplings (j < k used). The estimator is the one
 * documented in boltzattn.h ("sampled attention").
 *
 * A sample context keeps the shots of one head's last forward for its
 * backward: one per attention head of a model. */
typedef struct ba_sample_ctx ba_sample_ctx;
ba_sample_ctx *ba_sample_ctx_new(void);
void ba_sample_ctx_free(ba_sample_ctx *c);
/* The shots of the last successful forward, (B*T, S) words (query q's at
 * q*S), and its shape; NULL when there is none. For tests. */
const uint64_t *ba_sample_ctx_shots(const ba_sample_ctx *c, int *B, int *T, int *S);
/* Draws s->shots states for every query with ba_sample, query q from its
 * own ba_rng seeded from (seed, q0 + q) (so the result does not depend on
 * the thread count, nor on how a batch is shared among ranks: q0 is the
 * share's first query in the whole batch, 0 for a whole one), keeps them in c and writes logw (B,T,T) = log w with
 * w = (count + 1/2)/(S + 1) for j <= i and -INFINITY above. Errors of
 * ba_sample (the lowest failing query's) pass through; c then holds no
 * forward. */
int ba_sampled_forward(ba_sample_ctx *c, const ba_sampler *s, uint64_t seed, long q0, int B, int T,
                       const double *h, const double *J, int ldj, double *logw, char *err);
/* Backward of the last forward on c (same B, T and shots; BA_ERR_ARG
 * otherwise). g (B,T,T) is dL/dm as the layer computes it for w = (1+m)/2,
 * i.e. (1/2) dL/dw; the estimator's dw/dm^ = S/(2(S+1)) turns it into
 * g^ = g S/(S+1). dh (B,T,T) += beta Cov^(G, s_k) (may be NULL); dJ
 * (T,ldj) += beta sum_q Cov^(G, s_k s_l) (may be NULL), summed over fixed
 * chunks of queries in a fixed order (thread-count independent). */
int ba_sampled_backward(const ba_sample_ctx *c, const ba_sampler *s, int B, int T,
                        const double *g, double *dh, double *dJ, int ldj, char *err);

/* ---------------------------------------------------------- samplers
 * The DQA simulator's pieces (src/dqa.c), for the tests and the bench.
 * States are split arrays re, im (2^n each, any alignment); E (2^n) holds
 * the energies E(x) = -sum h_j s_j - sum_{j<k} J_jk s_j s_k. */

/* E(x) for every state x in O(2^n); scratch holds 2^(n-1) doubles (at
 * least 1). h may be NULL (h = 0); J rows of ldj, j < k read only. */
void ba_dqa_energies(int n, const double *h, const double *J, int ldj, double *E,
                     double *scratch);
/* One fused Trotter step: psi <- exp(-i coef E) psi when E is not NULL,
 * then psi <- prod_j (cos a + i sin a X_j) psi (= exp(-i a H_X / gamma)). */
void ba_dqa_step(int n, double *re, double *im, const double *E, double coef, double a);
/* psi <- exp(-i coef E) psi. */
void ba_dqa_phase(int n, double *re, double *im, const double *E, double coef);
/* The whole schedule of s (its dqa fields, already validated) from |+>^n
 * into re, im, with E from ba_dqa_energies. final_phase 0 skips the last
 * diagonal phase, which no measurement in Z sees. Returns BA_OK. */
int ba_dqa_evolve(const ba_sampler *s, int n, const double *E, double *re, double *im,
                  int final_phase);


#include "ising/approx_engines.h" /* approximate engines */

#endif
