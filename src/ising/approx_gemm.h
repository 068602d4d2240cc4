/* The fast full-range path of the mf and tap engines (src/ising_approx_gemm.c):
 * every row of one attention block iterated together, the effective fields
 * of all rows one GEMM a sweep, with Anderson acceleration. Same layouts,
 * checks, errors and policy on non-convergence as ba_approx_forward/
 * backward (src/approx.h, "approximate engines, batched"); the fixed-point
 * equations are the same, so the results agree with the per-query path to
 * the tolerance (not bit for bit). */
#ifndef BA_APPROX_GEMM_H
#define BA_APPROX_GEMM_H

#include "ising/ising.h"

/* The shortest block the dispatch sends to this path: below it the
 * per-query path keeps the committed small-T results bit for bit (and its
 * LU adjoints, exact for n <= BA_APPROX_LU_MAX_N, cost little there). */
#define BA_APPROX_GEMM_MIN_T 64
/* Rows iterated together (one group's GEMMs are (rows, n) x (n, n), n the
 * group's longest row), and Anderson's default history depth: 12, not 5.
 * Couplings learned over every distance (charlm at T = 256, mf, after 100
 * steps: a long antiferromagnetic tail) have more than one outlying
 * eigenvalue; evaluating that model on 16 windows, history 12 retried 999
 * rows of 32 768 where 5 retried 1 383, and took 25 s instead of 60. On
 * the bench's paper-like couplings it saves 10 - 25 % of the sweeps, but
 * each costs more (the Gram updates): at T = 64 about 20 % slower, at
 * T = 256 mf 15 % faster and tap 6 % slower, at T = 1024 both about 10 %
 * faster (bench_approx_gemm --memory 5,12). */
#define BA_APPROX_GEMM_GROUP 64
#define BA_APPROX_GEMM_MEMORY 12
/* The Anderson iteration's sweeps (at most max_iter) before a row goes to
 * the sequential sweeps: converging rows take 20 - 60 (learned T = 256
 * couplings), and a row Anderson has not solved by then seldom is; 1000
 * sweeps of the rows that never converged were three quarters of an
 * evaluation's time (measured, bench notes in docs/performance.md). */
#define BA_APPROX_GEMM_AA_SWEEPS 100
#define BA_APPROX_GEMM_MAX_MEMORY 16

/* 1 when ba_approx_forward/backward should call this path: engine mf or
 * tap and T >= BA_APPROX_GEMM_MIN_T. */
int ba_approx_gemm_applies(ba_engine e, int T);

/* h (B,T,T) or NULL, J (T,ldj) j < k read, logw (B,T,T) rows' entries
 * j <= i written; st (may be NULL) += counts. */
int ba_approx_gemm_forward(ba_engine e, const ba_approx *a, int B, int T, const double *h,
                           const double *J, int ldj, double *logw, ba_approx_stats *st,
                           char *err);
/* g (B,T,T) = dL/dm, dh (B,T,T) += (may be NULL), dJ (T,ldj) += entries j < k
 * (may be NULL); the forward's sweeps repeated bit for bit first. */
int ba_approx_gemm_backward(ba_engine e, const ba_approx *a, int B, int T, const double *h,
                            const double *J, int ldj, const double *g, double *dh, double *dJ,
                            ba_approx_stats *st, char *err);
/* The same with the forward's logw0 (B,T,T) (may be NULL): each row's
 * re-solve starts at its fields (m = 2 w - 1, phi = atanh m, clamped to
 * |phi| <= 20) instead of h, so it converges in a few sweeps; not bit for
 * bit the forward's point, but a fixed point to the same tolerance (see
 * ba_approx_backward_from, src/ising/ising.h). A row with a NaN start, or
 * one the warm iteration does not converge, goes cold as before. */
int ba_approx_gemm_backward_from(ba_engine e, const ba_approx *a, int B, int T,
                                 const double *h, const double *J, int ldj,
                                 const double *logw0, const double *g, double *dh, double *dJ,
                                 ba_approx_stats *st, char *err);

/* The implementations behind the entry points above (which take an
 * engine's number and are in src/ising/solve.c, above the engine table):
 * o is mf's or tap's interface (BA_ERR_ARG naming any other), memory as
 * below, lw0 as logw0 above (may be NULL). approx.c calls them with its own
 * engine, so this file needs no lookup by number. */
int ba_gemm_forward(const ba_engine_ops *o, const ba_approx *a, int memory, int B, int T,
                    const double *h, const double *J, int ldj, double *logw, ba_approx_stats *st,
                    char *err);
int ba_gemm_backward(const ba_engine_ops *o, const ba_approx *a, int memory, int B, int T,
                     const double *h, const double *J, int ldj, const double *lw0,
                     const double *g, double *dh, double *dJ, ba_approx_stats *st, char *err);

/* The iteration's knob, for the bench and the tests: memory = Anderson's
 * history depth, 0 for the plain damped (Jacobi) iteration of the per-query
 * path, at most BA_APPROX_GEMM_MAX_MEMORY. The entry points above use
 * BA_APPROX_GEMM_MEMORY. */
int ba_approx_gemm_forward_m(ba_engine e, const ba_approx *a, int memory, int B, int T,
                             const double *h, const double *J, int ldj, double *logw,
                             ba_approx_stats *st, char *err);
int ba_approx_gemm_backward_m(ba_engine e, const ba_approx *a, int memory, int B, int T,
                              const double *h, const double *J, int ldj, const double *g,
                              double *dh, double *dJ, ba_approx_stats *st, char *err);

/* ---------------- the batched Anderson iteration (src/approx_anderson.c),
 * shared by the forward and the adjoint of ising_approx_gemm.c. */
typedef struct {
    double beta;  /* mixing (the settings' damping) */
    int max_iter; /* sweeps */
    int mem;      /* history depth, 0: plain damped iteration */
} aa_cfg;

/* One thread's iteration workspace for a group of up to G rows of ld
 * doubles (ld = T). What the GEMMs read and write is compacted (row r is
 * group row idx[r]); each row's history stays at its group row gi, so a
 * compaction moves one row of X. */
typedef struct {
    int G, ld, mem;
    double *X, *Z, *F, *AUX, *E; // (G,ld) each, compacted: X the iterate
    double *XP, *FP;             // (G,ld) each, by group row: the previous x, f
    double *dX, *dF;             // (G,mem,ld), by group row
    double *gram;                // (G,mem,mem), by group row
    double *res;                 // (G) compacted: the stopping test's step
    int *idx, *nh, *head;        // (G): compacted -> group row; by group row
} aa_ws;

/* Fills, for the na compacted rows of w->X: F with the map, res with the
 * step the stopping test reads (NaN when not finite), AUX with what a
 * converged row keeps; Z and E are scratch; Lg: the group's longest row. */
typedef void (*aa_eval)(void *ctx, int na, int Lg, aa_ws *w);

int ba_aa_ws_init(aa_ws *w, int G, int ld, int mem);
void ba_aa_ws_free(aa_ws *w);
/* Iterates the na rows set up in w->idx and w->X (zero beyond each row's
 * len, up to Lg) until each row's step res < tol[row]; by group row: out
 * (G, ld) gets AUX of a converged row, sweeps[] its sweeps, conv[] 1 when
 * converged (0: max_iter reached or the map not finite). A converged row
 * leaves, the active rows of X are compacted. */
void ba_aa_solve(aa_ws *w, const aa_cfg *c, int na, int Lg, const int *len, const double *tol,
                 aa_eval ev, void *ctx, double *out, int *sweeps, int *conv);

#endif
