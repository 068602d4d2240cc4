/* The engine interface (issue 39): one struct of function pointers per
 * compute path, registered in one table (src/ising/engine.c). Everything
 * that chooses an engine (ba_ising_solve, the attention core, the model's
 * checks, the tool, the op, Python) asks the table, so adding an engine is
 * one new file defining its ba_engine_ops plus one line in that table.
 * Included by src/ising/ising.h; include that, not this file.
 *
 * Why the lookups live at the top of the Ising layer: the table names every
 * engine's struct, so an engine's own file must never call a lookup by id
 * (that would be a circle of calls between files); it gets its name and
 * limits from its own struct, and the by-id entry points (src/ising/solve.c)
 * sit above the table. */
#ifndef BA_ENGINE_H
#define BA_ENGINE_H

#include "core/core.h"

typedef struct ba_engine_ctx ba_engine_ctx;

/* All queries of one attention head for one engine call. Row q = b*T + i
 * of the (B,T,T) arrays is query i of batch element b, with n = i+1 spins
 * (keys 0..i); only entries j <= i are read or written. */
typedef struct {
    int B, T;
    const double *h; // (B,T,T) fields, or NULL for h = 0
    /* couplings: dense (T,ldj), j < k read; or, when jb is 1 (only for an
     * engine with BA_ENGINE_CAP_BAND), the band layout (T,W) with
     * J[t*W + d-1] = J_{t-d,t}: what the attention core hands the band
     * engine, which then copies nothing */
    const double *J;
    int ldj, jb;
    /* the band engine's band, or the exact window of an engine with
     * BA_ENGINE_CAP_WINDOW; 0 otherwise */
    int W;
    const ba_approx *approx; /* engines with BA_ENGINE_CAP_APPROX: their settings */
    ba_engine_ctx *ctx;      /* engines with BA_ENGINE_CAP_CONTEXT: the head's, or NULL */
    const double *logw0;     // (B,T,T) backward: the forward's logw, or NULL (warm starts)
    /* backward: the couplings' gradient is wanted for 0 < k - j <= R only
     * (T - 1: every entry); an engine may add more. R < 0 is BA_ERR_ARG
     * for the approximate engines */
    int R;
    ba_approx_stats *stats; /* += the call's counts (may be NULL) */
    /* the caller's stop request (may be NULL): an engine whose call can run
     * long polls it between queries and returns BA_ERR_INTERRUPTED */
    const ba_stop *stop;
    /* the band engine's window term in float (issue 42, config band_f32):
     * each query whose dynamic range float holds runs the float linear
     * path (src/ising/band_lin32.c), the others the double paths. Read by
     * the band engine alone; the hybrid engine's band part ignores it
     * (it calls the band engine's dense entry points, in double). 0: double */
    int f32;
} ba_engine_rows;

/* What a model asks of an engine before it runs it (ba_config_validate):
 * T keys, its band (0: none), the hybrid window (0: none), the approximate
 * engines' settings, whether the engine was chosen by auto (the messages
 * then point at the band), and the attention variant's name for them. */
typedef struct {
    int T, band, window, is_auto;
    const ba_approx *approx;
    const char *attn;
} ba_engine_limits;

/* One engine. check: BA_OK when it can run a model of q, else
 * BA_ERR_LIMIT (past its limits) or BA_ERR_ARG (a setting it refuses) with
 * a message naming the engine and the value. forward: logw (B,T,T) = log P_i(s_j = +1). backward: g
 * (B,T,T) = dL/dm; dh (B,T,T) += Cov(G, s_j) (may be NULL); dJ (in J's
 * layout) += the couplings' gradient summed over queries (may be NULL).
 * Both check their inputs first and return a status with err naming the
 * bad value; an n above max_spins (without a band) is BA_ERR_LIMIT naming
 * the engine. */
typedef struct ba_engine_ops {
    ba_engine id;        /* the public number, fixed (checkpoints store names) */
    const char *name;    /* what --engine and the configs take */
    const char *summary; /* one line for `boltzattn engines` */
    unsigned caps;       /* BA_ENGINE_CAP_* (include/boltzattn.h) */
    int max_spins;       /* the most spins per query without a band */
    int (*check)(const ba_engine_limits *q, char *err);
    int (*forward)(const ba_engine_rows *r, double *logw, char *err);
    int (*backward)(const ba_engine_rows *r, const double *g, double *dh, double *dJ,
                    char *err);
} ba_engine_ops;

/* The table (src/ising/engine.c): engine i for 0 <= i < ba_engine_count()
 * (NULL outside), in id order; by id (NULL for an unknown id and for
 * auto, which is a rule, not an engine); by name (NULL when none). */
const ba_engine_ops *ba_engine_at(int i);
const ba_engine_ops *ba_engine_ops_of(ba_engine e);
const ba_engine_ops *ba_engine_ops_named(const char *name);
/* The capabilities of engine e, 0 for an unknown one. */
unsigned ba_engine_caps(ba_engine e);

/* Helpers every engine may call (src/ising/engine_common.c; they call
 * nothing back). check_spins: n in [1, o->max_spins] (BA_ERR_LIMIT above,
 * naming the engine), J not NULL when n > 1, ldj >= n. check_finite: every
 * x[i] (n, x may be NULL) finite, else BA_ERR_NUMERIC naming what[i]. */
int ba_engine_check_spins(const ba_engine_ops *o, int n, const double *J, int ldj, char *err);
int ba_engine_check_finite(const char *what, const double *x, int n, char *err);
/* The end of a call whose queries poll the caller's stop (the skipped
 * ones counted): BA_OK when none was skipped, else BA_ERR_INTERRUPTED
 * naming the engine and the queries left of total. */
int ba_engine_stopped(const ba_engine_ops *o, long skipped, long total, char *err);
/* The check of an engine that enumerates 2^T states (no band, no window,
 * no settings): T <= o->max_spins. */
int ba_engine_check_enumerating(const ba_engine_ops *o, const ba_engine_limits *q, char *err);
/* The statistics every engine call adds into: to += from (fields summed,
 * max_sweeps the larger). The trainer and the data-parallel reduction
 * collect through it. */
void ba_engine_stats_add(ba_approx_stats *to, const ba_approx_stats *from);

#endif
