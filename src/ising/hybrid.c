/* The hybrid engine (spec section 8, "Mean-field family": hybrid; contract,
 * layouts and the policy on non-convergence in src/approx.h,
 * "approximate engines, batched"): exact chain inference inside a window of
 * W keys, mean field beyond it.
 *
 * A query of n keys (fields h, A = J + J^T with zero diagonal) splits its
 * couplings into A_in (0 < |k-j| <= W), which the band engine treats
 * exactly, and A_far (|k-j| > W), which enters as a mean field. With M(f)
 * the exact magnetisations of the chain with fields f and couplings A_in,
 * the hybrid's fixed point is
 *   m = M(phi),  phi = h + A_far m.
 * Forward: x = M(h) (the A_far = 0 solution), then the damped iteration
 * x <- (1 - lambda) x + lambda M(h + A_far x) until the undamped step
 * max_j |M(h + A_far x) - x| < tol; the query returns the last evaluation,
 * m = M(phi) with phi = h + A_far x of that sweep, and logw = log P(s_j =
 * +1) from the same band pass (so logw and the m the step tested agree).
 *
 * Backward (implicit differentiation). Let chi = dM/df at phi, the chain's
 * covariance matrix Cov(s_j, s_k) (symmetric), and M_J = dM/dJ_in. The
 * fixed point's differential is
 *   dm = chi (dh + dA_far m + A_far dm) + M_J dJ_in,
 * so dm = (I - chi A_far)^-1 [chi dh + chi dA_far m + M_J dJ_in] and, for an
 * upstream g = dL/dm, dL = u^T [...] with u = (I - A_far chi)^-1 g (chi and
 * A_far symmetric), i.e. u = g + A_far chi u. Writing a = chi u (= dL/dphi):
 *   a = chi (g + A_far a),   u = g + A_far a,
 * and
 *   dL/dh       = chi u = a,
 *   dL/dJ_jk    = a_j m_k + a_k m_j             (far pairs, k - j > W: J_jk
 *                 is both A_jk and A_kj in a^T dA_far m),
 *   dL/dJ_in    = u^T M_J, the band engine's backward dJ for the upstream
 *                 u = g + A_far a at the fields phi (Cov(U, s_j s_k) with
 *                 U = sum_j u_j s_j); J_in enters only through M, so this
 *                 is the whole in-band gradient.
 * a is found by a <- (1 - lambda) a + lambda chi (g + A_far a) from
 * a = chi g, each chi-product one pass of the band engine's backward (its
 * dh is chi times its upstream), until the undamped step is below
 * tol * max |chi g| (a = 0 exactly when chi g = 0: then it is the fixed
 * point). Its iteration matrix chi A_far is the forward's Jacobian, so it
 * converges where the forward converged linearly. The query keeps the last
 * evaluation a = chi u and that u; one more band backward pass over all
 * queries with the kept u's gives dJ_in. The backward solves the forward
 * again (the same sweeps, bit for bit) instead of receiving its state.
 *
 * Evaluation. Only the queries still running are evaluated (converged
 * ones are frozen). The band engine's batched call computes every row of
 * a (B, T, T) block; here each query takes the path that call would give
 * it (src/ising/ising.h, "band engine, batched": the linear path where the
 * bound on its dynamic range allows, else the log path) with the same
 * window, band and coupling table: linear-path queries run one by one
 * through the engine's kernel (ba_band_lin_forward/backward), the others
 * go to one batched band call, packed into (B', T, T) with query (b, i) at
 * row i of slot s, its rank among those of length i + 1. Results are those
 * of the batched engine bit for bit (tests/test_hybrid.c checks), and a
 * query's result does not depend on which others run with it. At B = 4,
 * T = 64, W = 4 this cut the forward from 0.85 s to 0.35 s: a sweep of the
 * whole block computed 4 times the rows that were still running.
 *
 * Cost per sweep: O(n 2^W) per running query for the chain (backward a few
 * times the forward), and O(n^2) for its far field: at most O(B T^2 2^W)
 * + O(B T^3 / 3). dJ's far part costs O(B T^3 / 3) once. Memory: 6
 * (forward) or 8 (backward) arrays of B T^2 doubles, A_far (T^2; the
 * backward one more T ldj for dJ) and the band engine's workspace per
 * thread.
 *
 * Stats: the forward counts each query's sweeps (both solves of a retried
 * one); the backward counts its adjoint's sweeps and retries, and as
 * unconverged a query whose adjoint or recomputed forward did not converge
 * (as src/ising_approx.c does for mf, tap and bp). A query whose forward
 * did not converge or whose adjoint diverged adds no gradient.
 *
 * Determinism: every per-query quantity is computed by one thread in a
 * fixed order, the band engine's results do not depend on the thread
 * count, and the far part of dJ is summed per pair over the queries in
 * index order (a row of dJ per thread), so results are bit-identical on
 * any number of threads. */
#include "ising/ising.h"

#include <stdlib.h>
#include <string.h>

enum { Q_DONE = 0, Q_RUN = 1, Q_DEAD = 2 }; /* per-query state of a solve */

typedef struct {
    int W, B, T, ldj;
    long nq; /* B * T queries */
    const double *J;
    double *Af;         /* (T,T) A_far: A_jk for |k - j| > W, 0 elsewhere */
    double *x;          /* (B,T,T) the iterate of each query */
    double *ph, *pu, *po; /* (B,T,T) packed fields, upstream, band output */
    double *scale;      /* (nq) a query's tolerance is tol * scale */
    int *row, *cnt;     /* (nq) packed query index, (T) packing counts */
    int *sweeps;        /* (nq) */
    unsigned char *st;  /* (nq) Q_* */
    unsigned char *lin; /* (nq) this evaluation: the query takes the linear path */
    /* the band engine's linear path, called per query ("Evaluation") */
    int we, nt;
    double jb;        /* its bound on the couplings' dynamic range */
    double *Jb, *tab; /* (T,W) the band of J, (T, table row) its factors */
    ba_band_lin lc;
    size_t wsz;  /* doubles per thread: the kernel's workspace, then T */
    double *wsm; /* (nt, wsz) */
    const ba_stop *stop; /* polled every evaluation and by the band calls */
} hyb;

/* One fixed-point problem: the forward (m = M(h + A_far m)) or the adjoint
 * (a = chi(g + A_far a) at the fields phi). in and out (B,T,T) hold each
 * query's last evaluation: its input (phi or u) and result (m or a). */
typedef struct {
    int adj;
    const double *base; /* h (may be NULL: 0) or g */
    const double *phi;  /* adjoint: the fields chi is taken at */
    double *in, *out;
    double *lw; /* forward: the logw of the last evaluation (may be NULL) */
} hyb_dir;

static void hyb_free(hyb *c)
{
    free(c->Af), free(c->x), free(c->ph), free(c->pu), free(c->po);
    free(c->scale), free(c->row), free(c->cnt), free(c->sweeps), free(c->st);
    free(c->lin), free(c->Jb), free(c->tab), free(c->wsm);
}

/* The linear path's setup, as the band engine's batched call makes it:
 * window we = min(W, T-1) (at least 1), the band Jb (T,W) of J, its
 * factor table and bound, a workspace per thread. */
static int hyb_lin_init(hyb *c, char *err)
{
    int W = c->W, T = c->T;
    c->we = W < T - 1 ? W : T - 1 > 0 ? T - 1 : 1;
    if (((size_t)T << c->we) > BA_BAND_MAX_CELLS)
        return ba_fail(err, BA_ERR_LIMIT, "hybrid engine: T = %d with W = %d needs T*2^W = "
                       "%zu window cells per thread, over the band engine's limit %zu", T, W,
                       (size_t)T << c->we, (size_t)BA_BAND_MAX_CELLS);
    size_t trow = ba_band_lin_table_doubles(c->we);
    c->nt = ba_nthreads();
    c->wsz = ba_band_lin_ws_doubles(c->we, T) + (size_t)T;
    c->Jb = calloc((size_t)T * W, sizeof(double));
    c->tab = malloc(trow * T * sizeof(double));
    c->wsm = malloc(c->wsz * c->nt * sizeof(double));
    if (!c->Jb || !c->tab || !c->wsm)
        return ba_fail(err, BA_ERR_NOMEM, "hybrid engine: cannot allocate the band workspace "
                       "of T = %d, W = %d", T, W);
    for (int t = 1; t < T; t++)
        for (int d = 1; d <= W && d <= t; d++)
            c->Jb[(size_t)t * W + d - 1] = c->J[(size_t)(t - d) * c->ldj + t];
    for (int t = 0; t < T; t++)
        ba_band_lin_table_row(c->we, t, c->Jb, W, c->tab + trow * t);
    c->jb = ba_band_lin_jbound(c->we, T, c->Jb, W);
    c->lc = (ba_band_lin){c->we, T, W, c->Jb, c->tab};
    return BA_OK;
}

static int hyb_init(hyb *c, int W, int B, int T, const double *J, int ldj, int adj, char *err)
{
    memset(c, 0, sizeof *c);
    c->W = W, c->B = B, c->T = T, c->ldj = ldj, c->J = J;
    c->nq = (long)B * T;
    size_t nb = (size_t)c->nq * T, tt = (size_t)T * T;
    c->Af = calloc(tt, sizeof(double));
    c->x = calloc(nb, sizeof(double));
    c->ph = malloc(nb * sizeof(double));
    c->po = malloc(nb * sizeof(double));
    c->pu = adj ? malloc(nb * sizeof(double)) : NULL;
    c->scale = malloc((size_t)c->nq * sizeof(double));
    c->row = malloc((size_t)c->nq * sizeof(int));
    c->cnt = malloc((size_t)T * sizeof(int));
    c->sweeps = malloc((size_t)c->nq * sizeof(int));
    c->st = malloc((size_t)c->nq);
    c->lin = malloc((size_t)c->nq);
    int rc = BA_OK;
    if (!c->Af || !c->x || !c->ph || !c->po || (adj && !c->pu) || !c->scale || !c->row ||
        !c->cnt || !c->sweeps || !c->st || !c->lin)
        rc = ba_fail(err, BA_ERR_NOMEM, "hybrid engine: cannot allocate the workspace of "
                     "B = %d, T = %d", B, T);
    if (rc || (rc = hyb_lin_init(c, err))) {
        hyb_free(c);
        return rc;
    }
    for (int j = 0; j + W + 1 < T; j++)
        for (int k = j + W + 1; k < T; k++)
            c->Af[(size_t)j * T + k] = c->Af[(size_t)k * T + j] = J[(size_t)j * ldj + k];
    return BA_OK;
}

/* y (n) = base + A_far x over the n keys of a query (x NULL: y = base),
 * summed over k in increasing order for every j; only far entries added. */
static void hyb_field(const hyb *c, int n, const double *base, const double *x, double *y)
{
    for (int j = 0; j < n; j++)
        y[j] = base ? base[j] : 0.0;
    if (!x)
        return;
    for (int k = 0; k < n; k++) {
        const double *ak = c->Af + (size_t)k * c->T;
        double xk = x[k];
        for (int j = 0; j < k - c->W; j++)
            y[j] += ak[j] * xk;
        for (int j = k + c->W + 1; j < n; j++)
            y[j] += ak[j] * xk;
    }
}

static int all_finite(const double *v, int n)
{
    for (int j = 0; j < n; j++)
        if (!isfinite(v[j]))
            return 0;
    return 1;
}

/* Packs the running queries of the log path (see "Batching"): row[q] =
 * slot * T + i. Returns B', the number of slots (0: none). */
static int hyb_pack(hyb *c)
{
    int bp = 0, T = c->T;
    memset(c->cnt, 0, (size_t)T * sizeof(int));
    for (long q = 0; q < c->nq; q++) {
        if (c->st[q] != Q_RUN || c->lin[q])
            continue;
        int i = (int)(q % T);
        c->row[q] = c->cnt[i] * T + i;
        if (++c->cnt[i] > bp)
            bp = c->cnt[i];
    }
    return bp;
}

/* The inputs of an evaluation for every running query: in = base +
 * A_far x (far) or base (the start); Q_DEAD where not finite; lin[q] the
 * band engine's choice of path for the fields (src/ising/ising.h, "band
 * engine, batched": bound on the dynamic range at most
 * BA_BAND_LIN_MAX_NATS). */
static void hyb_inputs(hyb *c, const hyb_dir *d, int far)
{
    int T = c->T;
    long nrun = 0;
    for (long q = 0; q < c->nq; q++)
        nrun += c->st[q] == Q_RUN;
    double work = (double)nrun * T * (far ? T : 1);
#pragma omp parallel for schedule(dynamic, 8) if (work > BA_PAR_MIN_WORK)
    for (long q = 0; q < c->nq; q++) {
        if (c->st[q] != Q_RUN)
            continue;
        size_t r = (size_t)q * T;
        int n = (int)(q % T) + 1;
        hyb_field(c, n, d->base ? d->base + r : NULL, far ? c->x + r : NULL, d->in + r);
        if (!all_finite(d->in + r, n)) {
            c->st[q] = Q_DEAD;
            continue;
        }
        double hb = ba_band_lin_hbound(c->we, n, (d->adj ? d->phi : d->in) + r);
        c->lin[q] = isfinite(hb) && hb + c->jb <= BA_BAND_LIN_MAX_NATS;
    }
}

/* Stores a forward evaluation's logw (n) of query row r: m, and logw when
 * kept; Q_DEAD if not finite. */
static void hyb_store_fwd(hyb *c, const hyb_dir *d, long q, const double *lw)
{
    size_t r = (size_t)q * c->T;
    int n = (int)(q % c->T) + 1;
    for (int j = 0; j < n; j++)
        d->out[r + j] = ba_m_of_logw(lw[j]);
    if (!all_finite(lw, n))
        c->st[q] = Q_DEAD;
    if (d->lw)
        memcpy(d->lw + r, lw, (size_t)n * sizeof(double));
}

/* The linear-path queries one by one, with the kernel, window, band and
 * table the band engine's batched call would use: the same results, bit
 * for bit, without the rows of the block that do not run. */
static void hyb_direct(hyb *c, const hyb_dir *d)
{
    int T = c->T;
    double work = 0.0;
    for (long q = 0; q < c->nq; q++)
        if (c->st[q] == Q_RUN && c->lin[q])
            work += (double)(q % T + 1) * (double)((size_t)8 << c->we);
#pragma omp parallel for schedule(dynamic, 4) num_threads(c->nt) if (work > BA_PAR_MIN_WORK)
    for (long q = 0; q < c->nq; q++) {
        if (c->st[q] != Q_RUN || !c->lin[q])
            continue;
        double *w = c->wsm + c->wsz * ba_thread_id(), *tmp = w + c->wsz - T;
        size_t r = (size_t)q * T;
        int n = (int)(q % T) + 1;
        if (!d->adj) {
            ba_band_lin_forward(&c->lc, w, n, d->in + r, tmp);
            hyb_store_fwd(c, d, q, tmp);
            continue;
        }
        memset(d->out + r, 0, (size_t)n * sizeof(double));
        ba_band_lin_backward(&c->lc, w, n, d->phi + r, d->in + r, d->out + r, NULL);
        if (!all_finite(d->out + r, n))
            c->st[q] = Q_DEAD;
    }
}

/* The log-path queries: one batched band call over them, packed. */
/* rc, with a message of the band engine's that hybrid called renamed to
 * the engine the user asked for: "band engine: X" becomes "hybrid engine
 * (its band part): X". */
static int as_hybrid(int rc, char *err)
{
    static const char pre[] = "band engine: ", now[] = "hybrid engine (its band part): ";
    size_t np = sizeof pre - 1, nn = sizeof now - 1;
    if (rc && err && strncmp(err, pre, np) == 0) {
        size_t tail = strlen(err + np); /* the message less its prefix */
        if (nn + tail > BA_ERR_LEN - 1)
            tail = BA_ERR_LEN - 1 - nn;
        memmove(err + nn, err + np, tail);
        memcpy(err, now, nn);
        err[nn + tail] = '\0';
    }
    return rc;
}

static int hyb_packed(hyb *c, const hyb_dir *d, char *err)
{
    int T = c->T, bp = hyb_pack(c);
    if (!bp)
        return BA_OK;
    size_t np = (size_t)bp * T * T, rb = (size_t)T * sizeof(double);
    memset(c->ph, 0, np * sizeof(double));
    if (d->adj) {
        memset(c->pu, 0, np * sizeof(double));
        memset(c->po, 0, np * sizeof(double));
    }
    for (long q = 0; q < c->nq; q++) {
        if (c->st[q] != Q_RUN || c->lin[q])
            continue;
        size_t r = (size_t)q * T, p = (size_t)c->row[q] * T;
        memcpy(c->ph + p, (d->adj ? d->phi : d->in) + r, rb);
        if (d->adj)
            memcpy(c->pu + p, d->in + r, rb);
    }
    int rc = d->adj ? ba_band_backward_stop(c->W, bp, T, c->ph, c->J, c->ldj, c->pu, c->po,
                                            NULL, c->stop, err)
                    : ba_band_forward_stop(c->W, bp, T, c->ph, c->J, c->ldj, c->po, c->stop,
                                           err);
    if (rc)
        return as_hybrid(rc, err);
    for (long q = 0; q < c->nq; q++) {
        if (c->st[q] != Q_RUN || c->lin[q])
            continue;
        size_t r = (size_t)q * T, p = (size_t)c->row[q] * T;
        int n = (int)(q % T) + 1;
        if (!d->adj) {
            hyb_store_fwd(c, d, q, c->po + p);
            continue;
        }
        memcpy(d->out + r, c->po + p, (size_t)n * sizeof(double));
        if (!all_finite(d->out + r, n))
            c->st[q] = Q_DEAD;
    }
    return BA_OK;
}

/* One evaluation of every running query: its inputs, then out = M(in), lw
 * its logw (forward), or out = chi in at phi (adjoint). A query whose in
 * or out is not finite becomes Q_DEAD. */
static int hyb_eval(hyb *c, const hyb_dir *d, int far, char *err)
{
    if (ba_stop_requested(c->stop))
        return ba_fail(err, BA_ERR_INTERRUPTED, "hybrid engine: stopped on request");
    hyb_inputs(c, d, far);
    hyb_direct(c, d);
    return hyb_packed(c, d, err);
}

/* The forward's fields only overflow with couplings near DBL_MAX (x stays
 * in [-1, 1]): an error naming the first such query. */
static int hyb_forward_dead(const hyb *c, const hyb_dir *d, char *err)
{
    if (d->adj)
        return BA_OK;
    for (long q = 0; q < c->nq; q++) {
        if (c->st[q] != Q_DEAD)
            continue;
        int T = c->T, n = (int)(q % T) + 1, j = 0;
        while (j < n && isfinite(d->in[(size_t)q * T + j]))
            j++;
        if (j < n)
            return ba_fail(err, BA_ERR_NUMERIC, "hybrid engine, batch element %ld, query %ld "
                           "(%d keys): the effective field of spin %d is not finite "
                           "(couplings too large)", q / T, q % T, n, j);
        return ba_fail(err, BA_ERR_NUMERIC, "hybrid engine, batch element %ld, query %ld (%d "
                       "keys): a marginal is not finite (effective fields too large)", q / T,
                       q % T, n);
    }
    return BA_OK;
}

/* The test and damped update of every running query after an evaluation:
 * done when max |out - x| < tol * scale (or exactly 0), else x moves a
 * share lambda towards out. Returns the queries still running. */
static long hyb_step(hyb *c, const hyb_dir *d, double lambda, double tol)
{
    long left = 0;
    int T = c->T;
    for (long q = 0; q < c->nq; q++) {
        if (c->st[q] != Q_RUN)
            continue;
        size_t r = (size_t)q * T;
        int n = (int)(q % T) + 1;
        double *x = c->x + r;
        const double *y = d->out + r;
        double res = 0.0;
        for (int j = 0; j < n; j++) {
            double e = fabs(y[j] - x[j]);
            res = e > res ? e : res;
        }
        c->sweeps[q]++;
        if (res < tol * c->scale[q] || res == 0.0) {
            c->st[q] = Q_DONE;
            continue;
        }
        for (int j = 0; j < n; j++)
            x[j] += lambda * (y[j] - x[j]);
        left++;
    }
    return left;
}

/* One solve of the running queries from the start (A_far = 0), at most
 * iters sweeps with damping lambda. */
static int hyb_phase(hyb *c, const hyb_dir *d, double lambda, int iters, double tol, char *err)
{
    int rc = hyb_eval(c, d, 0, err);
    if (rc || (rc = hyb_forward_dead(c, d, err)))
        return rc;
    int T = c->T;
    long left = 0;
    for (long q = 0; q < c->nq; q++) {
        if (c->st[q] != Q_RUN)
            continue;
        size_t r = (size_t)q * T;
        int n = (int)(q % T) + 1;
        double s = 1.0;
        if (d->adj) {
            s = 0.0;
            for (int j = 0; j < n; j++)
                s = fabs(d->out[r + j]) > s ? fabs(d->out[r + j]) : s;
        }
        c->scale[q] = s;
        memcpy(c->x + r, d->out + r, (size_t)n * sizeof(double));
        if (s == 0.0)
            c->st[q] = Q_DONE; /* chi g = 0: a = 0 is the fixed point */
        else
            left++;
    }
    for (int it = 1; it <= iters && left > 0; it++) {
        if ((rc = hyb_eval(c, d, 1, err)) || (rc = hyb_forward_dead(c, d, err)))
            return rc;
        left = hyb_step(c, d, lambda, tol);
    }
    return BA_OK;
}

/* Every query solved with the retry policy (src/ising/ising.h). On return
 * st[q] is Q_DONE (converged), Q_RUN (not converged, last evaluation kept)
 * or Q_DEAD (adjoint only: not finite). cnt (zeroed here) gets the counts;
 * unconverged counts Q_RUN and Q_DEAD. */
static int hyb_solve(hyb *c, const hyb_dir *d, const ba_approx *a, ba_approx_stats *cnt,
                     char *err)
{
    memset(c->st, Q_RUN, (size_t)c->nq);
    memset(c->sweeps, 0, (size_t)c->nq * sizeof(int));
    memset(cnt, 0, sizeof *cnt);
    int rc = hyb_phase(c, d, a->damping, a->max_iter, a->tol, err);
    if (rc)
        return rc;
    for (long q = 0; q < c->nq; q++)
        if (c->st[q] != Q_DONE) {
            c->st[q] = Q_RUN;
            cnt->retried++;
        }
    if (cnt->retried) {
        /* a quarter of the step, four times the sweeps (the cap of
         * src/ising_approx.c) */
        int iters = a->max_iter > BA_APPROX_MAX_ITER / 4 ? BA_APPROX_MAX_ITER : 4 * a->max_iter;
        if ((rc = hyb_phase(c, d, a->damping / 4.0, iters, a->tol, err)))
            return rc;
    }
    cnt->queries = c->nq;
    for (long q = 0; q < c->nq; q++) {
        cnt->sweeps += c->sweeps[q];
        cnt->max_sweeps = c->sweeps[q] > cnt->max_sweeps ? c->sweeps[q] : cnt->max_sweeps;
        cnt->unconverged += c->st[q] != Q_DONE;
    }
    return BA_OK;
}

int ba_hybrid_forward(const ba_approx *a, int W, int B, int T, const double *h, const double *J,
                      int ldj, double *logw, ba_approx_stats *st, const ba_stop *stop,
                      char *err)
{
    hyb c;
    int rc = hyb_init(&c, W, B, T, J, ldj, 0, err);
    if (rc)
        return rc;
    c.stop = stop;
    size_t nb = (size_t)B * T * T;
    double *phi = calloc(nb, sizeof(double)), *m = calloc(nb, sizeof(double));
    double *lw = calloc(nb, sizeof(double));
    if (!phi || !m || !lw) {
        rc = ba_fail(err, BA_ERR_NOMEM, "hybrid engine: cannot allocate the workspace of "
                     "B = %d, T = %d", B, T);
    } else {
        hyb_dir d = {0, h, NULL, phi, m, lw};
        ba_approx_stats cnt;
        rc = hyb_solve(&c, &d, a, &cnt, err);
        if (rc == BA_OK) {
            for (long q = 0; q < c.nq; q++)
                memcpy(logw + (size_t)q * T, lw + (size_t)q * T,
                       (size_t)(q % T + 1) * sizeof(double));
            if (st)
                ba_engine_stats_add(st, &cnt);
        }
    }
    free(phi), free(m), free(lw);
    hyb_free(&c);
    return rc;
}

/* dJs (T,ldj) += the far part of dJ: sum over the queries (b, i), k <= i,
 * of a_j m_k + a_k m_j, for k - j > W. A thread owns a row j and sums every
 * pair of it over the queries in index order. */
static void hyb_far_dj(const hyb *c, const double *a, const double *m, double *dJs)
{
    int T = c->T, W = c->W, B = c->B;
    double work = (double)B * T * T * T / 3.0;
#pragma omp parallel for schedule(dynamic, 1) if (work > BA_PAR_MIN_WORK)
    for (int j = 0; j < T - W - 1; j++) {
        double *row = dJs + (size_t)j * c->ldj;
        int k0 = j + W + 1;
        for (int b = 0; b < B; b++)
            for (int i = k0; i < T; i++) {
                size_t r = ((size_t)b * T + i) * T;
                const double *aq = a + r, *mq = m + r;
                double aj = aq[j], mj = mq[j];
                for (int k = k0; k <= i; k++)
                    row[k] += aj * mq[k] + mj * aq[k];
            }
    }
}

/* The backward after both solves: the dead adjoints' error, then dh and
 * dJ. fwd_st: the forward's final states (Q_DONE: converged). */
static int hyb_gradients(hyb *c, const hyb_dir *f, const hyb_dir *d, const unsigned char *fwd_st,
                         double *dh, double *dJ, ba_approx_stats *cnt, char *err)
{
    int T = c->T;
    /* The policy (src/ising/ising.h): a query whose forward did not converge,
     * or whose adjoint diverged, contributes no gradient (it is counted):
     * the implicit gradient of a point that is not a fixed point means
     * nothing, and a diverged adjoint is not a number. Zeroing its a and u
     * removes it from dh, the in-band dJ (upstream u) and the far dJ. */
    for (long q = 0; q < c->nq; q++)
        if (c->st[q] == Q_DEAD || fwd_st[q] != Q_DONE) {
            size_t r = (size_t)q * T, n = (size_t)(q % T) + 1;
            memset(d->out + r, 0, n * sizeof(double));
            memset(d->in + r, 0, n * sizeof(double));
        }
    double *dJs = NULL;
    if (dJ) {
        if (!(dJs = calloc((size_t)T * c->ldj, sizeof(double))))
            return ba_fail(err, BA_ERR_NOMEM, "hybrid engine: cannot allocate the couplings' "
                           "gradient of T = %d", T);
        /* in-band: the band backward for the kept upstreams u at phi */
        int rc = ba_band_backward_stop(c->W, c->B, T, f->in, c->J, c->ldj, d->in, NULL, dJs,
                                       c->stop, err);
        if (rc) {
            free(dJs);
            return as_hybrid(rc, err);
        }
        hyb_far_dj(c, d->out, f->out, dJs);
    }
    /* nothing is written before this point */
    if (dh)
        for (long q = 0; q < c->nq; q++)
            for (int j = 0; j <= q % T; j++)
                dh[(size_t)q * T + j] += d->out[(size_t)q * T + j];
    if (dJs)
        for (int j = 0; j + 1 < T; j++)
            for (int k = j + 1; k < T; k++)
                dJ[(size_t)j * c->ldj + k] += dJs[(size_t)j * c->ldj + k];
    free(dJs);
    cnt->unconverged = 0;
    for (long q = 0; q < c->nq; q++)
        cnt->unconverged += c->st[q] != Q_DONE || fwd_st[q] != Q_DONE;
    return BA_OK;
}

int ba_hybrid_backward(const ba_approx *a, int W, int B, int T, const double *h,
                       const double *J, int ldj, const double *g, double *dh, double *dJ,
                       ba_approx_stats *st, const ba_stop *stop, char *err)
{
    if (!dh && !dJ)
        return BA_OK;
    hyb c;
    int rc = hyb_init(&c, W, B, T, J, ldj, 1, err);
    if (rc)
        return rc;
    c.stop = stop;
    size_t nb = (size_t)B * T * T;
    double *phi = calloc(nb, sizeof(double)), *m = calloc(nb, sizeof(double));
    double *u = calloc(nb, sizeof(double)), *av = calloc(nb, sizeof(double));
    unsigned char *fst = malloc((size_t)c.nq);
    if (!phi || !m || !u || !av || !fst) {
        rc = ba_fail(err, BA_ERR_NOMEM, "hybrid engine: cannot allocate the workspace of "
                     "B = %d, T = %d", B, T);
    } else {
        hyb_dir f = {0, h, NULL, phi, m, NULL}, d = {1, g, phi, u, av, NULL};
        ba_approx_stats fc, cnt;
        rc = hyb_solve(&c, &f, a, &fc, err);
        if (rc == BA_OK) {
            memcpy(fst, c.st, (size_t)c.nq);
            rc = hyb_solve(&c, &d, a, &cnt, err);
        }
        if (rc == BA_OK)
            rc = hyb_gradients(&c, &f, &d, fst, dh, dJ, &cnt, err);
        if (rc == BA_OK && st)
            ba_engine_stats_add(st, &cnt);
    }
    free(phi), free(m), free(u), free(av), free(fst);
    hyb_free(&c);
    return rc;
}

/* ------------------------------------------------ the engine interface
 * The checks of every approximate engine (settings, the window, the
 * block, then the outputs and the upstream gradient), then the engine. */

static int hybrid_rows_forward(const ba_engine_rows *r, double *logw, char *err)
{
    int rc = ba_approx_check_rows(r, 1, err);
    if (rc)
        return rc;
    if (!logw)
        return ba_fail(err, BA_ERR_ARG, "log-weights output is NULL");
    return ba_hybrid_forward(r->approx, r->W, r->B, r->T, r->h, r->J, r->ldj, logw, r->stats,
                             r->stop, err);
}

/* r->R is checked but not used: hybrid adds every entry of dJ. */
static int hybrid_rows_backward(const ba_engine_rows *r, const double *g, double *dh, double *dJ,
                                char *err)
{
    int rc = ba_approx_check_rows(r, 1, err);
    if (rc || (rc = ba_approx_check_grad(r->B, r->T, g, err)))
        return rc;
    if (r->R < 0)
        return ba_fail(err, BA_ERR_ARG, "coupling gradient reach R = %d is negative", r->R);
    return ba_hybrid_backward(r->approx, r->W, r->B, r->T, r->h, r->J, r->ldj, g, dh, dJ,
                              r->stats, r->stop, err);
}

/* Its iteration settings, and its window: full-range couplings only (a
 * band leaves nothing beyond the window) and the band engine's limits
 * with W = the window. */
static int hybrid_check(const ba_engine_limits *q, char *err)
{
    char why[BA_ERR_LEN];
    if (q->approx && ba_approx_validate(q->approx, why))
        return ba_fail(err, BA_ERR_ARG, "hybrid engine: %s", why);
    int T = q->T, W = q->window;
    if (q->band > 0)
        return ba_fail(err, BA_ERR_ARG,
                       "the hybrid engine takes full-range couplings and treats those within "
                       "its window exactly; a band (W = %d) leaves it nothing beyond the window "
                       "(use the band engine, or give the hybrid its window with window, "
                       "--band under --engine hybrid)",
                       q->band);
    if (W < 1 || W > BA_MAX_BAND)
        return ba_fail(err, BA_ERR_ARG, "hybrid window W = %d is outside [1, %d]", W,
                       BA_MAX_BAND);
    int we = W < T - 1 ? W : T - 1;
    if (we > 0 && ((size_t)T << we) > BA_BAND_MAX_CELLS)
        return ba_fail(err, BA_ERR_LIMIT,
                       "T = %d with hybrid window W = %d is too large: the band engine keeps "
                       "T * 2^W = %zu window values per thread, at most %zu",
                       T, W, (size_t)T << we, (size_t)BA_BAND_MAX_CELLS);
    return BA_OK;
}

const ba_engine_ops ba_engine_hybrid_ops = {
    .id = BA_ENGINE_HYBRID,
    .name = "hybrid",
    .summary = "exact inside a window W (the band engine), mean field beyond it, iterated; "
               "any T",
    .caps = BA_ENGINE_CAP_APPROX | BA_ENGINE_CAP_WINDOW,
    .max_spins = BA_MAX_BLOCK,
    .check = hybrid_check,
    .forward = hybrid_rows_forward,
    .backward = hybrid_rows_backward,
};
