/* The fast full-range path of the mf and tap engines: all the rows of one
 * attention block iterated together, each sweep's fields one GEMM, with
 * Anderson acceleration. Contract: src/approx_gemm.h; layouts, checks and
 * the policy on non-convergence: src/approx.h, "approximate engines,
 * batched"; the per-row maths (fields, kernel K, gradients): the header
 * comment of src/ising_mf.c.
 *
 * Batching. Row i of a block is the query over keys 0..i. With the rows'
 * iterates m stacked as a matrix M whose row i is zero beyond column i,
 * all fields are one product, Phi = H + M A (A = J + J^T, zero diagonal,
 * symmetric): the zeros mask, Phi_ij sums A_jk m_ik over k <= i only. tap's
 * c = (1 - M o M, zeroed beyond each row) (A o A) likewise. Rows go in
 * groups of BA_APPROX_GEMM_GROUP consecutive ones, a group's GEMM (rows,
 * r1) x (r1, r1) with r1 its longest row; a converged row leaves its group
 * and the active rows are compacted, so late sweeps cost only those.
 *
 * Convergence. Damped Jacobi, x <- x + lambda (F(x) - x), has the
 * linearisation I - lambda (I - D K), D = diag(1 - m^2): an eigenvalue mu of
 * D K gives 1 - lambda (1 - mu). The paper-like couplings' antiferromagnetic
 * tail (-a/2 beyond distance 5) gives A one eigenvalue near -a n / 2 (-6 at
 * n = 256, -25 at 1024 for a = 0.1): at lambda = 0.5 Jacobi diverges once
 * mu < -3, the retry at lambda / 4 once mu < -15, and converges slowly
 * where it does (bench_approx at T = 256: 800 sweeps a row, 935 of 2048
 * rows retried; at T = 1024 rows are left unconverged). Anderson
 * acceleration (type II, history BA_APPROX_GEMM_MEMORY, mixing = the
 * settings' damping; least squares by the normal equations of a Gram
 * matrix kept up to date, the oldest step dropped while ill-conditioned)
 * is a windowed GMRES on the linearised map and takes out the outlying
 * eigenvalue in a few steps. It iterates on the fields psi (m = tanh psi,
 * map psi -> phi(tanh psi)), not on m: in m the iterate saturates at +-1,
 * where the map is flat and the history carries nothing, and rows of 800+
 * keys cycled between +-1 forever (5 of 1024 at T = 1024); in the fields
 * every row converged (bench/approx_gemm.c measures it; --memory 0 runs
 * the per-query Jacobi in m on this path, sweep for sweep). The stopping
 * test and the result are the per-query path's at m = tanh psi: max_j
 * |F(m)_j - m_j| < tol, then m = F(m) = tanh phi, logw = log sigmoid(2 phi):
 * the same equations to the same tolerance. For mf with lambda_max(A) < 1
 * the mean-field free energy is strictly convex (Hessian diag(1 / (1 -
 * m^2)) - A), so the fixed point is unique and both paths find it (for the
 * paper-like pattern at a = 0.1 Weyl's bound gives only lambda_max(A) <=
 * 0.7 + 0.55, so this is not proven there; the two paths agree to the
 * tolerance in the tests and the bench); with stronger ferromagnetic
 * couplings, or for tap, there may be several fixed points, and the paths
 * may stop at different ones. tanh is computed from the library's vectorised exponential
 * (within a few ulp; libm's cost as much as the GEMMs).
 *
 * Non-convergence. Anderson gets at most BA_APPROX_GEMM_AA_SWEEPS sweeps
 * (memory 0, plain Jacobi: max_iter). A row it has not solved (or not
 * finite) goes to the per-query kernel's sequential sweeps, undamped, then
 * their retry at damping / 4 and 4 x max_iter (seq_forward; why:
 * docs/internals.md, "Long full-range blocks"); counted in retried (once), its
 * sweeps added to the row's, and in unconverged if they did not converge
 * either; a row they solved is a converged row from then on.
 *
 * Backward. The forward is run again (same code, same data: the same
 * sweeps and fixed point, bit for bit; or, given the forward's logw, from
 * its fields: a few sweeps to a fixed point within about tol of it), then
 * the adjoints (I - K D) u = g
 * of the converged rows together by the same Anderson iteration on u <- g
 * + K D u (the damped transposed iteration, accelerated; stop at max |step|
 * < tol max |g|, as per query): K D u = A (D u) for mf, plus 2 m o ((A o
 * A)(m o D u)) - c o (D u) for tap, GEMMs over the active rows. An adjoint
 * not converged in max_iter sweeps is solved by LU at the same fixed point
 * (ba_mf_backward); a row whose forward went to the per-query path takes
 * the per-query backward. With v = D u: dh = v, and over a block's rows
 * dJ_jk = S_jk + S_kj with S = V^T M, for tap minus 2 A_jk (S2_jk + S2_kj)
 * with S2 = (V o M)^T D: two GEMMs a group.
 *
 * Threads. Batch elements go to OpenMP's threads (dynamic), every BLAS
 * call single-threaded (ba_blas_serial). A block's results depend only on
 * its data; its coupling sum is taken in a fixed order (groups in order,
 * then its other rows), the blocks' sums added in b order: no result
 * depends on the thread count. Only the batch is parallel: B = 1 runs on
 * one thread. */
#include "ising/approx_gemm.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------- the maps */

static void gemm_nn(int M, int N, int K, const double *X, int ldx, const double *A, int lda,
                    double beta, double *C, int ldc)
{
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0, X, ldx, A, lda, beta,
                C, ldc);
}

/* The rows r0.. of one block, and what the maps read. */
typedef struct {
    int tap, T, r0;
    int fields;             /* the forward iterates the fields (Anderson) */
    const double *A, *A2;   // (T,T) each: J + J^T, its square elementwise
    const double *h, *g;    // the block's (T,T) fields (or NULL) and dL/dm
    const double *lw0;      // the block's (T,T) forward log-weights: starts, or NULL
    const double *D, *M, *C; // (G,T) by group row: sech^2 phi, tanh phi, tap's c
} blk_ctx;

/* max_j |f_j - x_j| over n, NaN when any is. */
static double step_max(int n, const double *f, const double *x)
{
    double res = 0.0;
    for (int j = 0; j < n; j++) {
        double d = fabs(f[j] - x[j]);
        res = (d > res || isnan(d)) ? d : res;
    }
    return res;
}

/* Forward map, AUX = phi(m) the effective fields and res = max |tanh(phi)
 * - m|; in m (memory 0: X = m, F = tanh(phi)) or in the fields (X = the
 * fields psi, m = tanh(psi) in Z, F = phi). */
static void ev_forward(void *vc, int na, int Lg, aa_ws *w)
{
    const blk_ctx *b = vc;
    int ld = b->T;
    const double *m = b->fields ? w->Z : w->X; // (na,ld)
    for (int r = 0; r < na; r++) {
        int i = b->r0 + w->idx[r], n = i + 1;
        double *phi = w->AUX + (size_t)r * ld;
        if (b->fields) {
            ba_mf_tanh(n, w->X + (size_t)r * ld, w->Z + (size_t)r * ld);
            memset(w->Z + (size_t)r * ld + n, 0, sizeof(double) * (Lg - n));
        }
        if (b->h)
            memcpy(phi, b->h + (size_t)i * ld, sizeof(double) * n);
        else
            memset(phi, 0, sizeof(double) * n);
        memset(phi + n, 0, sizeof(double) * (Lg - n));
    }
    gemm_nn(na, Lg, Lg, m, ld, b->A, ld, 1.0, w->AUX, ld);
    if (b->tap) {
        for (int r = 0; r < na; r++) {
            int n = b->r0 + w->idx[r] + 1;
            const double *x = m + (size_t)r * ld;
            double *q = w->E + (size_t)r * ld;
            for (int j = 0; j < n; j++)
                q[j] = (1.0 - x[j]) * (1.0 + x[j]);
            memset(q + n, 0, sizeof(double) * (Lg - n));
        }
        gemm_nn(na, Lg, Lg, w->E, ld, b->A2, ld, 0.0, w->F, ld); /* c */
        for (int r = 0; r < na; r++) {
            int n = b->r0 + w->idx[r] + 1;
            const double *x = m + (size_t)r * ld, *cr = w->F + (size_t)r * ld;
            double *phi = w->AUX + (size_t)r * ld;
            for (int j = 0; j < n; j++)
                phi[j] -= x[j] * cr[j];
        }
    }
    for (int r = 0; r < na; r++) {
        int n = b->r0 + w->idx[r] + 1;
        double *f = w->F + (size_t)r * ld;
        ba_mf_tanh(n, w->AUX + (size_t)r * ld, f);
        w->res[r] = step_max(n, f, m + (size_t)r * ld);
        if (b->fields)
            memcpy(f, w->AUX + (size_t)r * ld, sizeof(double) * n);
    }
}

/* Adjoint map: F = AUX = g + K D u. */
static void ev_adjoint(void *vc, int na, int Lg, aa_ws *w)
{
    const blk_ctx *b = vc;
    int ld = b->T;
    for (int r = 0; r < na; r++) {
        int gi = w->idx[r], i = b->r0 + gi, n = i + 1;
        const double *u = w->X + (size_t)r * ld, *D = b->D + (size_t)gi * ld;
        double *e = w->E + (size_t)r * ld, *f = w->F + (size_t)r * ld;
        for (int j = 0; j < n; j++)
            e[j] = D[j] * u[j];
        memset(e + n, 0, sizeof(double) * (Lg - n));
        memcpy(f, b->g + (size_t)i * ld, sizeof(double) * n);
        memset(f + n, 0, sizeof(double) * (Lg - n));
    }
    gemm_nn(na, Lg, Lg, w->E, ld, b->A, ld, 1.0, w->F, ld);
    if (b->tap) {
        for (int r = 0; r < na; r++) {
            int gi = w->idx[r], n = b->r0 + gi + 1;
            const double *C = b->C + (size_t)gi * ld, *M = b->M + (size_t)gi * ld;
            double *e = w->E + (size_t)r * ld, *f = w->F + (size_t)r * ld;
            for (int j = 0; j < n; j++) {
                f[j] -= C[j] * e[j];
                e[j] *= M[j];
            }
        }
        gemm_nn(na, Lg, Lg, w->E, ld, b->A2, ld, 0.0, w->AUX, ld);
        for (int r = 0; r < na; r++) {
            int gi = w->idx[r], n = b->r0 + gi + 1;
            const double *M = b->M + (size_t)gi * ld, *a2 = w->AUX + (size_t)r * ld;
            double *f = w->F + (size_t)r * ld;
            for (int j = 0; j < n; j++)
                f[j] += 2.0 * M[j] * a2[j];
        }
    }
    for (int r = 0; r < na; r++) {
        int n = b->r0 + w->idx[r] + 1;
        memcpy(w->AUX + (size_t)r * ld, w->F + (size_t)r * ld, sizeof(double) * n);
        w->res[r] = step_max(n, w->F + (size_t)r * ld, w->X + (size_t)r * ld);
    }
}

/* ------------------------------------------------- one block */

/* What every block of one call shares. */
typedef struct {
    ba_mf_method meth;
    ba_mf_settings s; /* the per-query path's (fallbacks) */
    aa_cfg fwd, adj;  /* the forward's and the adjoint's iterations */
    int T, ldj;
    const double *h, *J, *g; // h (B,T,T) or NULL, J (T,ldj), g (B,T,T) or NULL
    const double *lw0;       // (B,T,T) the forward's log-weights (backward starts) or NULL
    const double *A, *A2;    // (T,T) each
    double *logw, *dhs;      // (B,T,T) each, or NULL
} job;

/* One thread's workspace. */
typedef struct {
    aa_ws aa;
    double *phi, *U, *D, *M, *C; // (G,T) each, by group row
    double *tolv;                // (G)
    int *len, *sw, *conv, *asw, *aconv, *retr; // (G) each
    double *S2;                  // (T,T): tap's second coupling sum
    /* the per-query path's, on first use: state (2T), ws, zeros (T), a
     * start and a log-weight row (2T), pivots (T) */
    double *state, *ws, *hz, *lw;
    int *ipiv;
} thr_ws;

static int thr_init(thr_ws *t, const job *jb, int mem)
{
    int G = BA_APPROX_GEMM_GROUP, T = jb->T;
    size_t gt = (size_t)G * T;
    memset(t, 0, sizeof *t);
    int ok = ba_aa_ws_init(&t->aa, G, T, mem);
    t->phi = malloc(sizeof(double) * 5 * gt);
    t->tolv = malloc(sizeof(double) * G);
    t->len = malloc(sizeof(int) * 6 * (size_t)G);
    if (jb->g && jb->meth == BA_MF_TAP)
        t->S2 = malloc(sizeof(double) * (size_t)T * T);
    if (!ok || !t->phi || !t->tolv || !t->len || (jb->g && jb->meth == BA_MF_TAP && !t->S2))
        return 0;
    t->U = t->phi + gt, t->D = t->U + gt, t->M = t->D + gt, t->C = t->M + gt;
    t->sw = t->len + G, t->conv = t->sw + G, t->asw = t->conv + G, t->aconv = t->asw + G;
    t->retr = t->aconv + G;
    return 1;
}

static int thr_fallback_ws(thr_ws *t, int T)
{
    if (t->ws)
        return 1;
    t->state = malloc(sizeof(double) * 2 * (size_t)T);
    t->hz = calloc((size_t)T, sizeof(double));
    t->lw = malloc(sizeof(double) * 2 * (size_t)T);
    t->ipiv = malloc(sizeof(int) * (size_t)T);
    t->ws = malloc(sizeof(double) * ba_mf_ws_doubles(T));
    return t->state && t->hz && t->lw && t->ipiv && t->ws;
}

static void thr_free(thr_ws *t)
{
    ba_aa_ws_free(&t->aa);
    free(t->phi), free(t->tolv), free(t->len), free(t->S2);
    free(t->state), free(t->ws), free(t->hz), free(t->lw), free(t->ipiv);
}

static void count(ba_approx_stats *st, int sweeps)
{
    st->queries++;
    st->sweeps += sweeps;
    if (sweeps > st->max_sweeps)
        st->max_sweeps = sweeps;
}

/* x (n) = the iterate at the forward's log-weights lw (n): the fields phi
 * = (1/2) log(w / (1 - w)) clamped to |phi| <= 20 (tanh 20 is 1 to 1e-17;
 * a w that rounded to 1 has no finite field), or m = 2 w - 1 when the
 * iteration is in m. 0 when an entry is NaN (x then is rewritten). */
static int warm_start(int n, const double *lw, int fields, double *x)
{
    for (int j = 0; j < n; j++) {
        if (isnan(lw[j]))
            return 0;
        double l = lw[j] > 0.0 ? 0.0 : lw[j];
        double v = fields ? 0.5 * (l - log(-expm1(l))) : ba_m_of_logw(l);
        x[j] = fields ? (v > 20.0 ? 20.0 : v < -20.0 ? -20.0 : v) : (v < -1.0 ? -1.0 : v);
    }
    return 1;
}

/* A row the GEMM iteration left unsolved: the per-query kernel's
 * sequential sweeps, undamped (src/ising_mf.c; for mf each update is the
 * minimum of the mean-field free energy along its spin, a descent, so they
 * converge where Jacobi cycles or diverges, as on learned couplings with a
 * long antiferromagnetic tail), from the forward's answer when the
 * backward has it, else from the J = 0 solution, up to max_iter sweeps;
 * then once more from J = 0 at damping / 4 and 4 x max_iter (the
 * per-query policy's retry). Its fields into phi (n), converged or not;
 * *info its sweeps (both solves). */
static int seq_forward(thr_ws *t, const job *jb, int n, const double *hr, const double *lw0,
                       double *phi, ba_mf_info *info, char *err)
{
    ba_mf_settings used = jb->s;
    used.sequential = 1;
    used.damping = 1.0;
    used.start = lw0 && warm_start(n, lw0, 0, t->lw) ? t->lw : NULL; /* m, not fields */
    int rc = ba_mf_forward(jb->meth, &used, n, hr ? hr : t->hz, jb->J, jb->ldj, t->lw + n,
                           t->state, t->ws, info, err);
    if (rc == BA_OK && !info->converged) {
        ba_mf_retry(&jb->s, &used);
        used.start = NULL;
        int first = info->iters;
        rc = ba_mf_forward(jb->meth, &used, n, hr ? hr : t->hz, jb->J, jb->ldj, t->lw + n,
                           t->state, t->ws, info, err);
        info->iters += first;
    }
    if (rc == BA_OK)
        memcpy(phi, t->state + n, sizeof(double) * n);
    return rc;
}

/* The forward of group rows r0 .. r0 + nr - 1 of block bc: phi, sw, conv
 * and retr (solved by seq_forward) by group row; on error *row is the
 * failing row (of block b). */
static int group_forward(thr_ws *t, const job *jb, blk_ctx *bc, int nr, int b, long *row,
                         char *err)
{
    int T = jb->T, Lg = bc->r0 + nr;
    for (int gi = 0; gi < nr; gi++) {
        int n = bc->r0 + gi + 1;
        const double *hr = bc->h ? bc->h + (size_t)(bc->r0 + gi) * T : NULL;
        double *x = t->aa.X + (size_t)gi * T;
        t->aa.idx[gi] = gi, t->len[gi] = n, t->tolv[gi] = jb->s.tol;
        const double *lw = bc->lw0 ? bc->lw0 + (size_t)(bc->r0 + gi) * T : NULL;
        if (!lw || !warm_start(n, lw, bc->fields, x))
            for (int j = 0; j < n; j++) /* m = tanh(h) either way */
                x[j] = bc->fields ? (hr ? hr[j] : 0.0) : tanh(hr ? hr[j] : 0.0);
        memset(x + n, 0, sizeof(double) * (Lg - n));
    }
    ba_aa_solve(&t->aa, &jb->fwd, nr, Lg, t->len, t->tolv, ev_forward, bc, t->phi, t->sw,
             t->conv);
    for (int gi = 0; gi < nr; gi++) {
        t->retr[gi] = !t->conv[gi];
        if (t->conv[gi])
            continue;
        int i = bc->r0 + gi, n = i + 1;
        *row = (long)b * T + i;
        if (!thr_fallback_ws(t, T))
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the per-query workspace");
        ba_mf_info info = {0, 0};
        int rc = seq_forward(t, jb, n, bc->h ? bc->h + (size_t)i * T : NULL,
                             bc->lw0 ? bc->lw0 + (size_t)i * T : NULL, t->phi + (size_t)gi * T,
                             &info, err);
        if (rc)
            return rc;
        t->sw[gi] += info.iters;
        t->conv[gi] = info.converged;
    }
    return BA_OK;
}

static void blk_init(blk_ctx *bc, const job *jb, const thr_ws *t, int b)
{
    size_t TT = (size_t)jb->T * jb->T;
    bc->tap = jb->meth == BA_MF_TAP, bc->T = jb->T, bc->r0 = 0;
    bc->fields = jb->fwd.mem > 0;
    bc->A = jb->A, bc->A2 = jb->A2;
    bc->h = jb->h ? jb->h + b * TT : NULL;
    bc->g = jb->g ? jb->g + b * TT : NULL;
    bc->lw0 = jb->lw0 ? jb->lw0 + b * TT : NULL;
    bc->D = t->D, bc->M = t->M, bc->C = t->C;
}

/* Block b's forward into jb->logw; *row the failing row on error. */
static int block_forward(const job *jb, thr_ws *t, int b, ba_approx_stats *st, long *row,
                         char *err)
{
    int T = jb->T;
    blk_ctx bc;
    blk_init(&bc, jb, t, b);
    for (int r0 = 0; r0 < T; r0 += BA_APPROX_GEMM_GROUP) {
        int nr = T - r0 < BA_APPROX_GEMM_GROUP ? T - r0 : BA_APPROX_GEMM_GROUP;
        bc.r0 = r0;
        int rc = group_forward(t, jb, &bc, nr, b, row, err);
        if (rc)
            return rc;
        for (int gi = 0; gi < nr; gi++) {
            int i = r0 + gi, n = i + 1;
            double *lw = jb->logw + ((size_t)b * T + i) * T;
            const double *phi = t->phi + (size_t)gi * T;
            for (int j = 0; j < n; j++)
                lw[j] = ba_log_sigmoid2(phi[j]);
            count(st, t->sw[gi]);
            st->retried += t->retr[gi];
            st->unconverged += !t->conv[gi];
        }
    }
    return BA_OK;
}

/* After group_forward: D, M (and tap's C) of the converged rows, and the
 * adjoint iteration's rows set up (u = g, tolerance tol max |g|); rows
 * with g = 0 have u = 0 at once. Returns the rows to iterate. */
static int adj_setup(thr_ws *t, const job *jb, const blk_ctx *bc, int nr)
{
    int T = jb->T, Lg = bc->r0 + nr, na = 0;
    for (int gi = 0; gi < nr; gi++) {
        int n = bc->r0 + gi + 1;
        const double *phi = t->phi + (size_t)gi * T;
        double *D = t->D + (size_t)gi * T, *M = t->M + (size_t)gi * T;
        for (int j = 0; j < n && t->conv[gi]; j++)
            D[j] = ba_sech2(phi[j]), M[j] = tanh(phi[j]);
        memset(D + (t->conv[gi] ? n : 0), 0, sizeof(double) * (Lg - (t->conv[gi] ? n : 0)));
        memset(M + (t->conv[gi] ? n : 0), 0, sizeof(double) * (Lg - (t->conv[gi] ? n : 0)));
    }
    if (bc->tap) /* c_j = sum_k A_jk^2 D_k, as the per-query kernel */
        gemm_nn(nr, Lg, Lg, t->D, T, jb->A2, T, 0.0, t->C, T);
    for (int gi = 0; gi < nr; gi++) {
        if (!t->conv[gi])
            continue;
        int n = bc->r0 + gi + 1;
        const double *g = bc->g + (size_t)(bc->r0 + gi) * T;
        double gmax = 0.0;
        for (int j = 0; j < n; j++)
            gmax = fabs(g[j]) > gmax ? fabs(g[j]) : gmax;
        if (gmax == 0.0) {
            memset(t->U + (size_t)gi * T, 0, sizeof(double) * n);
            t->asw[gi] = 0, t->aconv[gi] = 1;
            continue;
        }
        double *u = t->aa.X + (size_t)na * T;
        memcpy(u, g, sizeof(double) * n);
        memset(u + n, 0, sizeof(double) * (Lg - n));
        t->aa.idx[na++] = gi;
        t->tolv[gi] = jb->s.tol * gmax;
    }
    return na;
}

/* The rows whose adjoint converged: v = D u into dh, and their coupling
 * sums S += V^T M (tap: S2 += (V o M)^T D) by GEMM, S and S2 (T,T). */
static void adj_gemm_rows(thr_ws *t, const job *jb, const blk_ctx *bc, int nr, double *dhb,
                          double *S, ba_approx_stats *st)
{
    int T = jb->T, Lg = bc->r0 + nr, nk = 0;
    double *V = t->aa.X, *Mg = t->aa.XP, *P = t->aa.FP, *Dg = t->aa.F; // (G,T) each
    for (int gi = 0; gi < nr; gi++) {
        if (!t->conv[gi] || !t->aconv[gi])
            continue;
        int n = bc->r0 + gi + 1;
        const double *u = t->U + (size_t)gi * T, *D = t->D + (size_t)gi * T;
        const double *M = t->M + (size_t)gi * T;
        double *v = V + (size_t)nk * T;
        for (int j = 0; j < n; j++)
            v[j] = D[j] * u[j];
        memset(v + n, 0, sizeof(double) * (Lg - n));
        if (dhb) {
            double *dh = dhb + (size_t)(bc->r0 + gi) * T;
            for (int j = 0; j < n; j++)
                dh[j] += v[j];
        }
        memcpy(Mg + (size_t)nk * T, M, sizeof(double) * Lg);
        if (bc->tap) {
            for (int j = 0; j < Lg; j++)
                P[(size_t)nk * T + j] = v[j] * M[j];
            memcpy(Dg + (size_t)nk * T, D, sizeof(double) * Lg);
        }
        count(st, t->asw[gi]);
        nk++;
    }
    if (!S || nk == 0)
        return;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Lg, Lg, nk, 1.0, V, T, Mg, T, 1.0, S,
                T);
    if (bc->tap)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Lg, Lg, nk, 1.0, P, T, Dg, T, 1.0,
                    t->S2, T);
}

/* The group's other rows, in row order: an adjoint that did not converge
 * by LU at the same fixed point; a forward that did not converge (even by
 * the sequential sweeps) has no gradient and is counted unconverged. dh
 * and the entries j < k of S +=. */
static int adj_other_rows(thr_ws *t, const job *jb, const blk_ctx *bc, int nr, double *dhb,
                          double *S, ba_approx_stats *st, long *row, int b, char *err)
{
    int T = jb->T;
    for (int gi = 0; gi < nr; gi++) {
        if (t->conv[gi] && t->aconv[gi])
            continue;
        int i = bc->r0 + gi, n = i + 1;
        *row = (long)b * T + i;
        if (!t->conv[gi]) { /* not even the sequential sweeps converged: no gradient */
            st->queries++, st->unconverged++;
            continue;
        }
        if (!thr_fallback_ws(t, T))
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the per-query workspace");
        const double *g = bc->g + (size_t)i * T;
        double *dh = dhb ? dhb + (size_t)i * T : NULL;
        ba_mf_settings used = jb->s;
        ba_mf_info info = {0, 0};
        memcpy(t->state, t->M + (size_t)gi * T, sizeof(double) * n);
        memcpy(t->state + n, t->phi + (size_t)gi * T, sizeof(double) * n);
        used.adjoint = BA_MF_ADJ_LU;
        int extra = t->asw[gi];
        int rc = ba_mf_backward(jb->meth, &used, n, jb->J, jb->ldj, t->state, g, dh, S, T,
                                t->ws, t->ipiv, &info, err);
        if (rc == BA_ERR_NUMERIC) { /* singular or diverged: nothing written */
            st->queries++, st->unconverged++;
            continue;
        }
        if (rc)
            return rc;
        count(st, extra + info.iters);
        st->unconverged += !info.converged;
    }
    return BA_OK;
}

/* Block b's backward: dh rows of dhb (T,T) +=, and its whole coupling
 * gradient into S (T,T), entries j < k (NULL: none). */
static int block_backward(const job *jb, thr_ws *t, int b, double *S, ba_approx_stats *st,
                          long *row, char *err)
{
    int T = jb->T;
    blk_ctx bc;
    blk_init(&bc, jb, t, b);
    double *dhb = jb->dhs ? jb->dhs + (size_t)b * T * T : NULL;
    if (S)
        memset(S, 0, sizeof(double) * (size_t)T * T);
    if (S && bc.tap)
        memset(t->S2, 0, sizeof(double) * (size_t)T * T);
    for (int r0 = 0; r0 < T; r0 += BA_APPROX_GEMM_GROUP) {
        int nr = T - r0 < BA_APPROX_GEMM_GROUP ? T - r0 : BA_APPROX_GEMM_GROUP;
        bc.r0 = r0;
        int rc = group_forward(t, jb, &bc, nr, b, row, err);
        if (rc)
            return rc;
        int na = adj_setup(t, jb, &bc, nr);
        ba_aa_solve(&t->aa, &jb->adj, na, r0 + nr, t->len, t->tolv, ev_adjoint, &bc, t->U, t->asw,
                 t->aconv);
        adj_gemm_rows(t, jb, &bc, nr, dhb, S, st);
        rc = adj_other_rows(t, jb, &bc, nr, dhb, S, st, row, b, err);
        if (rc)
            return rc;
    }
    if (S) /* dJ_jk = S_jk + S_kj (- 2 A_jk (S2_jk + S2_kj) for tap), j < k */
        for (int j = 0; j + 1 < T; j++)
            for (int k = j + 1; k < T; k++) {
                double d = S[(size_t)j * T + k] + S[(size_t)k * T + j];
                if (bc.tap)
                    d -= 2.0 * jb->A[(size_t)j * T + k] *
                         (t->S2[(size_t)j * T + k] + t->S2[(size_t)k * T + j]);
                S[(size_t)j * T + k] = d;
            }
    return BA_OK;
}

/* ------------------------------------------------- entry points */

int ba_approx_gemm_applies(ba_engine e, int T)
{
    return (e == BA_ENGINE_MF || e == BA_ENGINE_TAP) && T >= BA_APPROX_GEMM_MIN_T;
}

/* The checks of the approximate engines' entry points (before anything is
 * written), for mf and tap, and the history depth. */
static int check_args(const ba_engine_ops *o, const ba_approx *a, int memory, int B, int T,
                      const double *h, const double *J, int ldj, char *err)
{
    if (o->id != BA_ENGINE_MF && o->id != BA_ENGINE_TAP)
        return ba_fail(err, BA_ERR_ARG, "engine '%s' has no batched GEMM path (mf, tap)",
                       o->name);
    int rc = ba_approx_validate(a, err);
    if (rc)
        return rc;
    if (memory < 0 || memory > BA_APPROX_GEMM_MAX_MEMORY)
        return ba_fail(err, BA_ERR_ARG, "Anderson memory %d is outside [0, %d]", memory,
                       BA_APPROX_GEMM_MAX_MEMORY);
    return ba_approx_check_block(B, T, h, J, ldj, err);
}

/* A = J + J^T (zero diagonal) and A o A, (T,T) each in one allocation. */
static double *build_sym2(int T, const double *J, int ldj)
{
    size_t TT = (size_t)T * T;
    double *A = malloc(sizeof(double) * 2 * TT);
    if (!A)
        return NULL;
    for (int j = 0; j < T; j++) {
        A[(size_t)j * T + j] = 0.0;
        for (int k = j + 1; k < T; k++)
            A[(size_t)j * T + k] = A[(size_t)k * T + j] = J[(size_t)j * ldj + k];
    }
    for (size_t e = 0; e < TT; e++)
        A[TT + e] = A[e] * A[e];
    return A;
}

static void job_init(job *jb, ba_engine e, const ba_approx *a, int memory, int T,
                     const double *h, const double *J, int ldj)
{
    memset(jb, 0, sizeof *jb);
    jb->meth = e == BA_ENGINE_TAP ? BA_MF_TAP : BA_MF_NAIVE;
    jb->s = ba_approx_mf_settings(a);
    jb->fwd = (aa_cfg){a->damping, a->max_iter, memory};
    if (memory > 0 && jb->fwd.max_iter > BA_APPROX_GEMM_AA_SWEEPS)
        jb->fwd.max_iter = BA_APPROX_GEMM_AA_SWEEPS;
    jb->adj = (aa_cfg){a->damping, a->max_iter, memory};
    jb->T = T, jb->ldj = ldj, jb->h = h, jb->J = J;
}

/* Blocks b0 .. b1-1 over the threads: forward (slots NULL and jb->g NULL)
 * or backward (block b's coupling sum into slots + (b - b0) T^2, or none
 * when slots is NULL). Stats into *tot; 0, or 1 when a workspace could not
 * be allocated. */
static int run_blocks(const job *jb, int mem, int b0, int b1, double *slots,
                      ba_approx_stats *tot, ba_approx_fail *ff)
{
    int nomem = 0;
    size_t TT = (size_t)jb->T * jb->T;
#pragma omp parallel
    {
        thr_ws t;
        ba_approx_stats my = {0, 0, 0, 0, 0};
        char msg[BA_ERR_LEN];
        int ok = thr_init(&t, jb, mem);
        if (!ok) {
#pragma omp atomic write
            nomem = 1;
        }
        int saved = ba_blas_serial();
#pragma omp for schedule(dynamic, 1)
        for (int b = b0; b < b1; b++) {
            if (!ok)
                continue;
            long row = (long)b * jb->T;
            int rc = jb->g ? block_backward(jb, &t, b, slots ? slots + (b - b0) * TT : NULL,
                                            &my, &row, msg)
                           : block_forward(jb, &t, b, &my, &row, msg);
            if (rc)
                ba_approx_fail_note(ff, row, rc, msg);
        }
        ba_blas_end(saved);
#pragma omp critical(ba_approx_gemm_stats)
        ba_engine_stats_add(tot, &my);
        thr_free(&t);
    }
    return nomem;
}

static int finish(int nomem, const ba_approx_fail *ff, const char *name, int T, char *err)
{
    if (nomem)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the %s engine's GEMM workspace "
                       "(T = %d)", name, T);
    return ba_approx_fail_report(ff, name, T, err);
}

int ba_gemm_forward(const ba_engine_ops *o, const ba_approx *a, int memory, int B, int T,
                    const double *h, const double *J, int ldj, double *logw, ba_approx_stats *st,
                    char *err)
{
    int rc = check_args(o, a, memory, B, T, h, J, ldj, err);
    if (rc)
        return rc;
    if (!logw)
        return ba_fail(err, BA_ERR_ARG, "log-weights output is NULL");
    job jb;
    job_init(&jb, o->id, a, memory, T, h, J, ldj);
    double *A = build_sym2(T, J, ldj); // (2,T,T)
    if (!A)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the %s engine's couplings (T = %d)",
                       o->name, T);
    jb.A = A, jb.A2 = A + (size_t)T * T, jb.logw = logw;
    ba_approx_fail ff = {-1, BA_OK, ""};
    ba_approx_stats tot = {0, 0, 0, 0, 0};
    int nomem = run_blocks(&jb, memory, 0, B, NULL, &tot, &ff);
    free(A);
    if (nomem || ff.row >= 0)
        return finish(nomem, &ff, o->name, T, err);
    if (st)
        ba_engine_stats_add(st, &tot);
    return BA_OK;
}

int ba_gemm_backward(const ba_engine_ops *o, const ba_approx *a, int memory, int B, int T,
                     const double *h, const double *J, int ldj, const double *lw0,
                     const double *g, double *dh, double *dJ, ba_approx_stats *st, char *err)
{
    int rc = check_args(o, a, memory, B, T, h, J, ldj, err);
    if (rc || (rc = ba_approx_check_grad(B, T, g, err)))
        return rc;
    job jb;
    job_init(&jb, o->id, a, memory, T, h, J, ldj);
    jb.g = g, jb.lw0 = lw0;
    size_t TT = (size_t)T * T;
    /* blocks' coupling sums in rounds of at most 2^25 doubles (256 MiB) */
    long cap = (1L << 25) / (long)TT;
    int nslot = dJ ? (int)(cap < 1 ? 1 : cap < B ? cap : B) : 0;
    double *A = build_sym2(T, J, ldj);                                 // (2,T,T)
    double *slots = nslot ? malloc(sizeof(double) * nslot * TT) : NULL; // (nslot,T,T)
    jb.dhs = dh ? calloc((size_t)B * TT, sizeof(double)) : NULL;        // (B,T,T)
    if (!A || (nslot && !slots) || (dh && !jb.dhs)) {
        free(A), free(slots), free(jb.dhs);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the %s engine's gradient buffers "
                       "(T = %d)", o->name, T);
    }
    jb.A = A, jb.A2 = A + TT;
    ba_approx_fail ff = {-1, BA_OK, ""};
    ba_approx_stats tot = {0, 0, 0, 0, 0};
    int nomem = 0;
    double *acc = dJ ? calloc(TT, sizeof(double)) : NULL; // (T,T): dJ's increment, b order
    if (dJ && !acc)
        nomem = 1;
    int step = nslot ? nslot : B;
    for (int b0 = 0; b0 < B && !nomem && ff.row < 0; b0 += step) {
        int b1 = b0 + step < B ? b0 + step : B;
        nomem = run_blocks(&jb, memory, b0, b1, slots, &tot, &ff);
        for (int b = b0; acc && b < b1 && !nomem && ff.row < 0; b++)
            for (int j = 0; j + 1 < T; j++)
                for (int k = j + 1; k < T; k++)
                    acc[(size_t)j * T + k] += slots[(b - b0) * TT + (size_t)j * T + k];
    }
    if (!nomem && ff.row < 0) {
        if (dh)
            for (long r = 0; r < (long)B * T; r++)
                for (int j = 0; j <= (int)(r % T); j++)
                    dh[(size_t)r * T + j] += jb.dhs[(size_t)r * T + j];
        if (dJ)
            for (int j = 0; j + 1 < T; j++)
                for (int k = j + 1; k < T; k++)
                    dJ[(size_t)j * ldj + k] += acc[(size_t)j * T + k];
    }
    free(A), free(slots), free(jb.dhs), free(acc);
    if (nomem || ff.row >= 0)
        return finish(nomem, &ff, o->name, T, err);
    if (st)
        ba_engine_stats_add(st, &tot);
    return BA_OK;
}
