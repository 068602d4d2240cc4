/* The attention core, generic over its floating type: a template included
 * once per precision (src/attention_f32.c, src/attention_f64.c), so that
 * libboltzattn holds both a float and a double core whatever its ba_real.
 * The model's layer (ba_attention_forward/backward, packed qkv in ba_real)
 * and the public op (src/op.c: [B,H,T,d] tensors in either precision) both
 * run it: one implementation, addressed through a ba_attn_io_* view.
 *
 * The includer defines AT_REAL (float or double) and AT_SFX (f32 or f64).
 * Not a header of its own: no include guard, nothing here is public. */
#if !defined(AT_REAL) || !defined(AT_SFX)
#error "define AT_REAL and AT_SFX before including attention_core.h"
#endif

#include "model/model.h"
#include "core/vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AT_CAT2(a, b) a##_##b
#define AT_CAT(a, b) AT_CAT2(a, b)
/* name_f32 / name_f64 */
#define AT_FN(name) AT_CAT(name, AT_SFX)
#define AT_IO AT_CAT(ba_attn_io, AT_SFX)
/* Offsets of element 0 of (batch b, head h, position i) in q, k, v (and
 * dq, dk, dv), and in out (and dout). */
#define AT_AT(io, b, h, i) \
    ((size_t)(b) * (io)->sb + (size_t)(h) * (io)->sh + (size_t)(i) * (io)->st)
#define AT_OUT(io, b, h, i) \
    ((size_t)(b) * (io)->ob + (size_t)(h) * (io)->oh + (size_t)(i) * (io)->ot)

/* --------------------------------------------------------- attention
 *
 * Every variant forms unnormalised log-weights l_ij for the visible keys
 * j <= i of query i and normalises them with a softmax over j:
 *   softmax   l = h
 *   sigmoid   l = log sigmoid(2h)           (= log P(s_j=+1) at J = 0)
 *   boltzmann l = log P_i(s_j = +1)         (exact Ising marginal)
 *   coupling  l = log P_i(s_j = +1) at h = 0
 * Working with l rather than w keeps the normalisation finite and exact even
 * when every w_ij underflows (|h| of hundreds): a = softmax(l) never divides
 * by a sum that rounded to zero. pre (B,H,T,T) saves l for backward. */

static inline double log_sigmoid(double x)
{
    /* log(1/(1+e^-x)) without overflow for either sign. */
    return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x));
}

static inline double sigmoid(double x)
{
    return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}

/* The inner loops over a head's d channels, in functions of their own so
 * they are built for AVX-512 and AVX2 too (BA_CLONES): the parallel loops
 * around them are not. dot_d: sum x y in double; axpy_r: y += a x in
 * AT_REAL; axpy_d: y += f x formed in double, rounded per entry. */
BA_CLONES static double dot_d(const AT_REAL *x, const AT_REAL *y, int d)
{
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (int c = 0; c < d; c++)
        acc += (double)x[c] * y[c];
    return acc;
}

BA_CLONES static void axpy_r(AT_REAL *y, AT_REAL a, const AT_REAL *x, int d)
{
#pragma omp simd
    for (int c = 0; c < d; c++)
        y[c] += a * x[c];
}

BA_CLONES static void axpy_d(AT_REAL *y, double f, const AT_REAL *x, int d)
{
#pragma omp simd
    for (int c = 0; c < d; c++)
        y[c] += (AT_REAL)(f * x[c]);
}

/* One query's row: att = softmax(l) over its n visible keys (their
 * maximum mx), pre = l, both 0 for the T - n keys it does not see. The
 * exponentials exp(l - mx) <= 1 are vectorised (src/vmath.h). */
BA_CLONES static void normalise_row(const double *l, AT_REAL *att, AT_REAL *pre, int n, int T,
                                    double mx)
{
    double z = 0.0;
#pragma omp simd reduction(+ : z)
    for (int j = 0; j < n; j++)
        z += ba_exp_nonpos1(l[j] - mx);
    double iz = 1.0 / z;
#pragma omp simd
    for (int j = 0; j < n; j++) {
        att[j] = (AT_REAL)(ba_exp_nonpos1(l[j] - mx) * iz);
        pre[j] = (AT_REAL)l[j];
    }
    for (int j = n; j < T; j++)
        att[j] = pre[j] = 0;
}

typedef struct {
    int B, T, C, H, d;
    double scale;
} dims;

static dims get_dims(const ba_attn_shape *s, const AT_IO *io)
{
    dims g = {s->B, s->T, s->C, s->H, s->C / s->H, 1.0 / sqrt((double)(s->C / s->H))};
    if (io->scale_set)
        g.scale = io->scale;
    return g;
}

/* Fields h_ij = scale q_i . k_j (the model's scale is 1/sqrt(d)) of head
 * hh for every batch element, in double, less (1/2) log(i+1) with the
 * log-n bias and less m_hh (i - j) with ALiBi. hd (B,T,T), entries j > i
 * left untouched. */
static void compute_fields(const ba_attn_shape *s, const dims *g, int hh, const AT_IO *io,
                           double *hd)
{
    int T = g->T, d = g->d;
    double slope = ba_attn_alibi_slope(s, hh);
#pragma omp parallel for schedule(static) if (0.5 * g->B * T * T * d > BA_PAR_MIN_WORK)
    for (int b = 0; b < g->B; b++)
        for (int i = 0; i < T; i++) {
            const AT_REAL *q = io->q + AT_AT(io, b, hh, i);
            double bias = ba_field_bias_value(s->field_bias, i + 1);
            for (int j = 0; j <= i; j++) {
                const AT_REAL *k = io->k + AT_AT(io, b, hh, j);
                /* without ALiBi, x - 0 is x: the same bits as before */
                hd[((size_t)b * T + i) * T + j] =
                    dot_d(q, k, d) * g->scale - bias - slope * (i - j);
            }
        }
}

/* The fields of coupling attention's one shared system per row of head hh
 * (h = 0 but for the field bias and ALiBi's distance bias): hd (T,T) row
 * i holds -bias(i+1) - m_hh (i - j) at j <= i. Returns hd, or NULL (h = 0)
 * without either. */
static const double *coupling_fields(const ba_attn_shape *s, int hh, double *hd)
{
    if (s->field_bias == BA_FIELD_BIAS_NONE && !s->alibi)
        return NULL;
    int T = s->T;
    double slope = ba_attn_alibi_slope(s, hh);
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++)
            hd[(size_t)i * T + j] = -ba_field_bias_value(s->field_bias, i + 1) - slope * (i - j);
    return hd;
}

/* The band engine's window: the band, or without one every earlier key. */
static int band_width(const ba_attn_shape *s)
{
    return s->band > 0 ? s->band : s->T > 1 ? s->T - 1 : 1;
}

/* Whether this call runs the band engine (which reads the (T,W) layout). */
static int uses_band_layout(const ba_attn_shape *s);

/* Coupling of head hh between keys j < k as the model defines it: the
 * absolute entry or the relative one of distance k - j, 0 beyond the band
 * or the relative distances. */
static inline double coupling(const ba_attn_shape *s, const AT_REAL *Jh, int j, int k)
{
    int d = k - j;
    if (s->band > 0 && d > s->band)
        return 0.0;
    if (s->couplings == BA_COUPLINGS_RELATIVE)
        return d <= s->D ? (double)Jh[d - 1] : 0.0;
    return (double)Jh[(size_t)j * s->Tmax + k];
}

/* This layer's couplings of head hh (J of the layer: (H,Tmax,Tmax)
 * absolute or (H,D) relative) in the layout the engine reads: Jd (T,T)
 * dense for the enumerating engines and the samplers (j < k used), or
 * (T,W) for the band engine, Jd[t*W + d-1] = J_{t-d,t} (d <= t). */
static void copy_couplings(const ba_attn_shape *s, int hh, const AT_REAL *J, double *Jd)
{
    int T = s->T;
    const AT_REAL *Jh = J + (size_t)hh * (s->couplings == BA_COUPLINGS_RELATIVE
                                               ? (size_t)s->D
                                               : (size_t)s->Tmax * s->Tmax);
    if (uses_band_layout(s)) {
        int W = band_width(s);
        for (int t = 0; t < T; t++)
            for (int d = 1; d <= W; d++)
                Jd[(size_t)t * W + d - 1] = d <= t ? coupling(s, Jh, t - d, t) : 0.0;
        return;
    }
    for (int j = 0; j < T; j++)
        for (int k = 0; k < T; k++)
            Jd[(size_t)j * T + k] = k > j ? coupling(s, Jh, j, k) : 0.0;
}

/* The largest key distance whose coupling is a parameter: the band, or the
 * relative distances, else T - 1. Gradients of pairs farther apart are
 * never read, so the engines need not form them. */
static int grad_reach(const ba_attn_shape *s)
{
    int reach = s->band > 0 ? s->band : s->T - 1;
    if (s->couplings == BA_COUPLINGS_RELATIVE && s->D < reach)
        reach = s->D;
    return reach;
}

/* Adds the engine's coupling gradient dJd (the layout of copy_couplings)
 * into head hh's parameters dJ: an absolute entry gets its pair's
 * gradient, a relative distance the sum over its pairs (in key order, so
 * the sum is the same on any thread count); pairs beyond the band or the
 * relative distances are not parameters. */
static void scatter_coupling_grads(const ba_attn_shape *s, int hh, const double *dJd, AT_REAL *dJ)
{
    int T = s->T, rel = s->couplings == BA_COUPLINGS_RELATIVE;
    int reach = grad_reach(s);
    AT_REAL *dJh = dJ + (size_t)hh * (rel ? (size_t)s->D : (size_t)s->Tmax * s->Tmax);
    int W = uses_band_layout(s) ? band_width(s) : 0;
    for (int d = 1; d <= reach && d < T; d++) {
        double acc = 0.0;
        for (int t = d; t < T; t++) {
            double v = W ? dJd[(size_t)t * W + d - 1] : dJd[(size_t)(t - d) * T + t];
            if (rel)
                acc += v;
            else
                dJh[(size_t)(t - d) * s->Tmax + t] += (AT_REAL)v;
        }
        if (rel)
            dJh[d - 1] += (AT_REAL)acc;
    }
}

static int is_ising(ba_attn a) { return a == BA_ATTN_BOLTZMANN || a == BA_ATTN_COUPLING; }

/* Whether this call estimates the Ising marginals from shots. */
static int is_sampled(const ba_attn_shape *s)
{
    return is_ising(s->attn) && s->sampler && s->sampler->kind != BA_SAMPLER_EXACT;
}

static int uses_band_layout(const ba_attn_shape *s)
{
    return (ba_engine_caps(s->engine) & BA_ENGINE_CAP_BAND) && !is_sampled(s);
}

/* The context of head hh for an engine that keeps one
 * (BA_ENGINE_CAP_CONTEXT): the shape's, or without one (a caller of the
 * layer alone) a temporary one in *tmp for the caller to free. Either way
 * an engine with float32 products (BA_ENGINE_CAP_F32) runs them in this
 * core's precision. */
static int head_ctx(const ba_attn_shape *s, const ba_engine_ops *o, int hh, ba_engine_ctx **c,
                    ba_engine_ctx **tmp, char *err)
{
    *c = s->ctx ? s->ctx[hh] : NULL;
    *tmp = NULL;
    if (!*c && !(*c = *tmp = ba_engine_ctx_new()))
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate an engine context");
    if (o->caps & BA_ENGINE_CAP_F32)
        ba_engine_ctx_set_f32(*c, sizeof(AT_REAL) == sizeof(float));
    return BA_OK;
}

/* The engine of s from the table, and B queries' rows of head hh for it:
 * the band layout and width for a band engine, the window and settings
 * otherwise, the head's context for an engine that keeps one (*tmp: a
 * temporary one to free). lw0 (B,T,T): the forward's log-weights of the
 * head, or NULL; the approximate engines' re-solves start from them. */
static int head_rows(const ba_attn_shape *s, int hh, int B, const double *h, const double *Jd,
                     const double *lw0, const ba_engine_ops **o, ba_engine_rows *r,
                     ba_engine_ctx **tmp, char *err)
{
    *tmp = NULL;
    if (!(*o = ba_engine_ops_of(s->engine)))
        return ba_fail(err, BA_ERR_ARG, "engine %d is not a known engine", (int)s->engine);
    /* Jd is in the layout copy_couplings wrote: (T,W) for a band engine */
    int band = ((*o)->caps & BA_ENGINE_CAP_BAND) != 0;
    ba_engine_rows rr = {B, s->T, h, Jd, s->T, uses_band_layout(s),
                         band ? band_width(s) : s->window, &s->approx, NULL, lw0,
                         grad_reach(s), s->astats, s->stop, s->band_f32};
    *r = rr;
    return ((*o)->caps & BA_ENGINE_CAP_CONTEXT) ? head_ctx(s, *o, hh, &r->ctx, tmp, err) : BA_OK;
}

/* Below this largest log-weight of a query's row (every key has
 * P(s_j = +1) < e^-600, fields below about -300) the backward refuses:
 * S = exp(logsumexp l) is then under 1e-260, dL/dm = (da - a.da)/(2S)
 * over 1e260, and an engine's products of it with state probabilities
 * near the double's smallest normal (1e-308) would lose their digits
 * silently or overflow (docs/internals.md, "Gradients"). */
#define BA_ATTN_LOGW_MIN (-600.0)

/* BA_ERR_INTERRUPTED when the caller asked to stop, before head hh. */
static int stop_check(const ba_attn_shape *s, int hh, const char *pass, char *err)
{
    return ba_stop_requested(s->stop)
               ? ba_fail(err, BA_ERR_INTERRUPTED, "%s attention %s: stopped on request before "
                         "head %d of %d", ba_attn_name(s->attn), pass, hh, s->H)
               : BA_OK;
}

/* The engine of s as its user asked for it, for messages. */
static const char *engine_label(const ba_attn_shape *s)
{
    if (is_sampled(s))
        return "sampled";
    const ba_engine_ops *o = ba_engine_ops_of(s->engine);
    return o ? o->name : "unknown";
}

/* BA_ERR_NUMERIC naming the first field h = q.k scale of head hh (hd,
 * (B,T,T)) that overflowed: finite q and k whose product does not fit. */
static int check_fields(const ba_attn_shape *s, int hh, int B, int T, const double *hd,
                        char *err)
{
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j <= i; j++)
                if (!isfinite(hd[((size_t)b * T + i) * T + j]))
                    return ba_fail(err, BA_ERR_NUMERIC,
                                   "%s attention: head %d, batch %d, query %d, key %d: the "
                                   "field q.k scale = %g is not finite (q or k too large)",
                                   ba_attn_name(s->attn), hh, b, i, j,
                                   hd[((size_t)b * T + i) * T + j]);
    return BA_OK;
}

/* BA_ERR_NUMERIC naming the first row of head hh whose log-weights (ld,
 * (B,T,T)) hold a NaN or +inf: an engine that overflowed (couplings too
 * large for it) rather than weights any softmax could use. */
static int check_logw(const ba_attn_shape *s, int hh, int B, int T, const double *ld, char *err)
{
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j <= i; j++) {
                double x = ld[((size_t)b * T + i) * T + j];
                if (isnan(x) || x > 1e-6)
                    return ba_fail(err, BA_ERR_NUMERIC,
                                   "%s attention forward (engine %s): head %d, batch %d, query "
                                   "%d, key %d: log P(s = +1) = %g is not a log-probability "
                                   "(fields or couplings too large for the engine)",
                                   ba_attn_name(s->attn), engine_label(s), hh, b, i, j, x);
            }
    return BA_OK;
}

/* BA_ERR_NUMERIC naming the first query of head hh whose dL/dm (gd,
 * (B,T,T)) is not finite or whose largest log-weight (pre, the forward's
 * l) is below BA_ATTN_LOGW_MIN: every key of it is too unlikely for the
 * gradient to be formed in double. hd: the fields (boltzmann, exact). */
static int check_dldm(const ba_attn_shape *s, int hh, int B, int T, int H, const double *gd,
                      const AT_REAL *pre, const double *hd, char *err)
{
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            const AT_REAL *l = pre + (((size_t)b * H + hh) * T + i) * T;
            const double *gr = gd + ((size_t)b * T + i) * T;
            int jm = 0, bad = 0;
            for (int j = 0; j <= i; j++) {
                jm = l[j] > l[jm] ? j : jm;
                bad |= !isfinite(gr[j]);
            }
            if (!bad && (l[jm] >= BA_ATTN_LOGW_MIN || is_sampled(s)))
                continue;
            double h = s->attn == BA_ATTN_BOLTZMANN && !is_sampled(s)
                           ? hd[((size_t)b * T + i) * T + jm]
                           : 0.0;
            return ba_fail(err, BA_ERR_NUMERIC,
                           "%s attention backward (engine %s): head %d, batch %d, query %d: "
                           "every key is too unlikely to differentiate in double (largest "
                           "log P(s = +1) = %g at key %d, field %g; the bound is %g, fields "
                           "near -300)",
                           ba_attn_name(s->attn), engine_label(s), hh, b, i, (double)l[jm], jm,
                           h, BA_ATTN_LOGW_MIN);
        }
    return BA_OK;
}

/* BA_ERR_NUMERIC naming the first non-finite entry of an engine's
 * gradients of head hh: dh (n entries, may be NULL) and dJ (nj). */
static int check_grads(const ba_attn_shape *s, int hh, const double *dh, size_t n,
                       const double *dJ, size_t nj, char *err)
{
    for (size_t q = 0; dh && q < n; q++)
        if (!isfinite(dh[q]))
            return ba_fail(err, BA_ERR_NUMERIC,
                           "%s attention backward (engine %s): head %d: dL/dh[%zu] = %g is not "
                           "finite (fields or couplings too large for the engine)",
                           ba_attn_name(s->attn), engine_label(s), hh, q, dh[q]);
    for (size_t q = 0; q < nj; q++)
        if (!isfinite(dJ[q]))
            return ba_fail(err, BA_ERR_NUMERIC,
                           "%s attention backward (engine %s): head %d: dL/dJ entry %zu = %g is "
                           "not finite (fields or couplings too large for the engine)",
                           ba_attn_name(s->attn), engine_label(s), hh, q, dJ[q]);
    return BA_OK;
}

/* The engine of s over B queries' rows, through its interface. */
static int exact_forward(const ba_attn_shape *s, int hh, int B, const double *h,
                         const double *Jd, double *logw, char *err)
{
    const ba_engine_ops *o;
    ba_engine_rows r;
    ba_engine_ctx *tmp;
    int rc = head_rows(s, hh, B, h, Jd, NULL, &o, &r, &tmp, err);
    if (rc == BA_OK)
        rc = o->forward(&r, logw, err);
    ba_engine_ctx_free(tmp);
    return rc;
}

static int exact_backward(const ba_attn_shape *s, int hh, int B, const double *h,
                          const double *Jd, const double *lw0, const double *g, double *dh,
                          double *dJd, char *err)
{
    const ba_engine_ops *o;
    ba_engine_rows r;
    ba_engine_ctx *tmp;
    int rc = head_rows(s, hh, B, h, Jd, lw0, &o, &r, &tmp, err);
    if (rc == BA_OK)
        rc = o->backward(&r, g, dh, dJd, err);
    ba_engine_ctx_free(tmp);
    return rc;
}

int AT_FN(ba_attn_core_forward)(const ba_attn_shape *s, const AT_IO *io, AT_REAL *att,
                                AT_REAL *pre, const AT_REAL *J, char *err)
{
    // att (B,H,T,T), pre (B,H,T,T), J (H,Tmax,Tmax) or (H,D); io: q, k, v in, out
    dims g = get_dims(s, io);
    int B = g.B, T = g.T, H = g.H, d = g.d;
    size_t btt = (size_t)B * T * T;
    if (is_ising(s->attn) && !J)
        return ba_fail(err, BA_ERR_ARG, "%s attention needs couplings J", ba_attn_name(s->attn));
    int sampled = is_sampled(s);
    if (sampled && (!s->sctx || !s->srng))
        return ba_fail(err, BA_ERR_ARG, "sampled attention needs sample contexts and an RNG");
    /* (T,T) dense or (T,W) band couplings of one head */
    size_t jsz = (size_t)T * (uses_band_layout(s) ? (size_t)band_width(s) : (size_t)T);
    double *hd = calloc(btt, sizeof(double)); // (B,T,T) fields
    double *ld = malloc(sizeof(double) * btt); // (B,T,T) log-weights
    double *Jd = is_ising(s->attn) ? malloc(sizeof(double) * (jsz ? jsz : 1)) : NULL;
    if (!hd || !ld || (is_ising(s->attn) && !Jd)) {
        free(hd), free(ld), free(Jd);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate attention workspace (B=%d, T=%d)", B,
                       T);
    }
    int rc = BA_OK;
    for (int hh = 0; hh < H && rc == BA_OK; hh++) {
        /* a stop request ends the layer between heads (and inside a long
         * engine call, between its queries) */
        if ((rc = stop_check(s, hh, "forward", err)))
            break;
        if (s->attn != BA_ATTN_COUPLING)
            compute_fields(s, &g, hh, io, hd);
        if (s->attn != BA_ATTN_COUPLING && (rc = check_fields(s, hh, B, T, hd, err)))
            break;
        switch (s->attn) {
        case BA_ATTN_SOFTMAX:
            memcpy(ld, hd, sizeof(double) * btt);
            break;
        case BA_ATTN_SIGMOID:
            for (size_t q = 0; q < btt; q++)
                ld[q] = log_sigmoid(2.0 * hd[q]);
            break;
        case BA_ATTN_BOLTZMANN:
            copy_couplings(s, hh, J, Jd);
            if (sampled)
                rc = ba_sampled_forward(s->sctx[hh], s->sampler, ba_rng_u64(s->srng),
                                        s->item0 * T, B, T, hd,
                                        Jd, T, ld, err);
            else
                rc = exact_forward(s, hh, B, hd, Jd, ld, err);
            break;
        case BA_ATTN_COUPLING:
            /* With h = 0 the weights depend only on the number of visible keys,
             * not on the query's content: one system per row, shared by all b.
             * Sampled, that is one set of shots per row for the whole batch.
             * The log-n bias is a field of its own: -(1/2) log n, the same
             * for every b too. */
            copy_couplings(s, hh, J, Jd);
            {
                const double *h0 = coupling_fields(s, hh, hd);
                if (sampled)
                    rc = ba_sampled_forward(s->sctx[hh], s->sampler, ba_rng_u64(s->srng), 0, 1, T,
                                            h0, Jd, T, ld, err);
                else
                    rc = exact_forward(s, hh, 1, h0, Jd, ld, err);
            }
            for (int b = 1; b < B && rc == BA_OK; b++)
                memcpy(ld + (size_t)b * T * T, ld, sizeof(double) * T * T);
            break;
        }
        if (rc == BA_OK && is_ising(s->attn))
            rc = check_logw(s, hh, s->attn == BA_ATTN_COUPLING ? 1 : B, T, ld, err);
        if (rc)
            break;
        /* normalise each row: a = softmax over the visible keys of l */
#pragma omp parallel for schedule(static) if (20.0 * B * T * T > BA_PAR_MIN_WORK)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < T; i++) {
                const double *l = ld + ((size_t)b * T + i) * T;
                size_t o = (((size_t)b * H + hh) * T + i) * T;
                double mx = -INFINITY;
                for (int j = 0; j <= i; j++)
                    mx = l[j] > mx ? l[j] : mx;
                normalise_row(l, att + o, pre + o, i + 1, T, mx);
            }
    }
    free(hd), free(ld), free(Jd);
    if (rc)
        return rc;
    // y_i = sum_j a_ij v_j for every head
#pragma omp parallel for collapse(2) schedule(static) if (0.5 * B * H * T * T * d > BA_PAR_MIN_WORK)
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++)
            for (int i = 0; i < T; i++) {
                AT_REAL *y = io->out + AT_OUT(io, b, hh, i);
                const AT_REAL *a = att + (((size_t)b * H + hh) * T + i) * T;
                for (int c = 0; c < d; c++)
                    y[c] = 0;
                for (int j = 0; j <= i; j++)
                    axpy_r(y, a[j], io->v + AT_AT(io, b, hh, j), d);
            }
    return BA_OK;
}

int AT_FN(ba_attn_core_backward)(const ba_attn_shape *s, const AT_IO *io, AT_REAL *dJ,
                                 const AT_REAL *J, const AT_REAL *att, const AT_REAL *pre,
                                 char *err)
{
    // att, pre (B,H,T,T) of the forward; dJ (the layout of J) +=; io: q, k, v, dout in,
    // dq, dk, dv +=
    dims g = get_dims(s, io);
    int B = g.B, T = g.T, H = g.H, d = g.d;
    size_t btt = (size_t)B * T * T;
    /* (T,T) dense or (T,W) band couplings of one head, and their gradient */
    size_t jsz = (size_t)T * (uses_band_layout(s) ? (size_t)band_width(s) : (size_t)T);
    jsz = jsz ? jsz : 1;
    double *hd = calloc(btt, sizeof(double)); // (B,T,T) fields
    double *gd = calloc(btt, sizeof(double)); // (B,T,T) dL/dl or dL/dm
    double *dh = malloc(sizeof(double) * btt); // (B,T,T) dL/dh
    double *Jd = malloc(sizeof(double) * jsz);
    double *dJd = malloc(sizeof(double) * jsz);
    /* (B,T,T) the forward's log-weights of a head, where an approximate
     * engine's backward starts from them */
    int warm = s->attn == BA_ATTN_BOLTZMANN && ba_engine_is_approx(s->engine) && !is_sampled(s);
    double *lw0 = warm ? malloc(sizeof(double) * btt) : NULL;
    if (!hd || !gd || !dh || !Jd || !dJd || (warm && !lw0)) {
        free(hd), free(gd), free(dh), free(Jd), free(dJd), free(lw0);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate attention workspace (B=%d, T=%d)", B,
                       T);
    }
    int rc = BA_OK, sampled = is_sampled(s);
    if (sampled && !s->sctx)
        rc = ba_fail(err, BA_ERR_ARG, "sampled attention needs the sample contexts of its forward");
    for (int hh = 0; hh < H && rc == BA_OK; hh++) {
        if ((rc = stop_check(s, hh, "backward", err)))
            break;
        /* the fields enter the sigmoid derivative and the exact engine; the
         * sampled backward needs only the shots */
        if (s->attn == BA_ATTN_SIGMOID || (s->attn == BA_ATTN_BOLTZMANN && !sampled))
            compute_fields(s, &g, hh, io, hd);
        /* Through y = a v and the row softmax: da_ij = dy_i . v_j,
         * dv_j += a_ij dy_i, dl_ij = a_ij (da_ij - sum_l a_il da_il). */
#pragma omp parallel for schedule(static) if (1.0 * B * T * T * d > BA_PAR_MIN_WORK)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < T; i++) {
                const AT_REAL *a = att + (((size_t)b * H + hh) * T + i) * T;
                const AT_REAL *l = pre + (((size_t)b * H + hh) * T + i) * T;
                const AT_REAL *dy = io->dout + AT_OUT(io, b, hh, i);
                double *gr = gd + ((size_t)b * T + i) * T;
                double adot = 0.0;
                for (int j = 0; j <= i; j++) {
                    size_t vo = AT_AT(io, b, hh, j);
                    double da = dot_d(dy, io->v + vo, d);
                    axpy_r(io->dv + vo, a[j], dy, d);
                    gr[j] = da;
                    adot += a[j] * da;
                }
                if (is_ising(s->attn)) {
                    /* l = log w with w = (1+m)/2, a = w/S: dL/dm_j =
                     * (da_j - adot) / (2 S), S = exp(logsumexp_j l_j).
                     * Sampled, ba_sampled_backward rescales this to its
                     * estimator's dw/dm^. */
                    double mx = -INFINITY, z = 0.0;
                    for (int j = 0; j <= i; j++)
                        mx = l[j] > mx ? l[j] : mx;
                    for (int j = 0; j <= i; j++)
                        z += exp(l[j] - mx);
                    double inv2s = 0.5 * exp(-mx) / z;
                    for (int j = 0; j <= i; j++)
                        gr[j] = (gr[j] - adot) * inv2s;
                } else {
                    double *dr = dh + ((size_t)b * T + i) * T;
                    const double *hr = hd + ((size_t)b * T + i) * T;
                    for (int j = 0; j <= i; j++) {
                        double dl = a[j] * (gr[j] - adot);
                        /* sigmoid: dl/dh = 2 sigmoid(-2h) */
                        dr[j] = s->attn == BA_ATTN_SOFTMAX ? dl : dl * 2.0 * sigmoid(-2.0 * hr[j]);
                    }
                }
            }
        if (is_ising(s->attn) && (rc = check_dldm(s, hh, B, T, H, gd, pre, hd, err)))
            break;
        if (is_ising(s->attn)) {
            copy_couplings(s, hh, J, Jd);
            memset(dJd, 0, sizeof(double) * jsz);
            if (s->attn == BA_ATTN_BOLTZMANN) {
                memset(dh, 0, sizeof(double) * btt);
                if (sampled)
                    rc = ba_sampled_backward(s->sctx[hh], s->sampler, B, T, gd, dh, dJd, T, err);
                else {
                    if (lw0)
                        for (int b = 0; b < B; b++)
                            for (size_t q = 0; q < (size_t)T * T; q++)
                                lw0[(size_t)b * T * T + q] =
                                    pre[((size_t)b * H + hh) * T * T + q];
                    rc = exact_backward(s, hh, B, hd, Jd, lw0, gd, dh, dJd, err);
                }
            } else {
                /* Covariances are linear in g and every batch element shares
                 * the same system, so sum g over b and solve once (with the
                 * forward's fields: the log-n bias, or none). */
                for (int b = 1; b < B; b++)
                    for (size_t q = 0; q < (size_t)T * T; q++)
                        gd[q] += gd[(size_t)b * T * T + q];
                const double *h0 = coupling_fields(s, hh, hd);
                if (sampled)
                    rc = ba_sampled_backward(s->sctx[hh], s->sampler, 1, T, gd, NULL, dJd, T, err);
                else
                    rc = exact_backward(s, hh, 1, h0, Jd, NULL, gd, NULL, dJd, err);
            }
            if (rc == BA_OK)
                rc = check_grads(s, hh, s->attn == BA_ATTN_BOLTZMANN ? dh : NULL, btt, dJd, jsz,
                                 err);
            if (rc)
                break;
            if (dJ)
                scatter_coupling_grads(s, hh, dJd, dJ);
        }
        if (s->attn == BA_ATTN_COUPLING)
            continue; /* no fields, so no gradient into q and k */
        /* h_ij = q_i . k_j * scale: dq_i += scale sum_j dh_ij k_j,
         * dk_j += scale dh_ij q_i */
#pragma omp parallel for schedule(static) if (1.0 * B * T * T * d > BA_PAR_MIN_WORK)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < T; i++) {
                size_t qo = AT_AT(io, b, hh, i);
                const double *dr = dh + ((size_t)b * T + i) * T;
                for (int j = 0; j <= i; j++) {
                    size_t ko = AT_AT(io, b, hh, j);
                    double f = dr[j] * g.scale;
                    axpy_d(io->dq + qo, f, io->k + ko, d);
                    axpy_d(io->dk + ko, f, io->q + qo, d);
                }
            }
    }
    free(hd), free(gd), free(dh), free(Jd), free(dJd), free(lw0);
    return rc;
}


/* ------------------------------------------------ the model's layout
 * qkv (B,T,3C): q, k, v stacked, heads contiguous inside each; out and
 * dout (B,T,C). */
AT_IO AT_FN(ba_attn_packed_io)(const ba_attn_shape *s, const AT_REAL *qkv)
{
    size_t C = (size_t)s->C, d = (size_t)(s->C / s->H);
    AT_IO io;
    memset(&io, 0, sizeof io);
    io.q = qkv, io.k = qkv + C, io.v = qkv + 2 * C;
    io.sb = (size_t)s->T * 3 * C, io.sh = d, io.st = 3 * C;
    io.ob = (size_t)s->T * C, io.oh = d, io.ot = C;
    return io;
}

int AT_FN(ba_attention_forward)(const ba_attn_shape *s, AT_REAL *out, AT_REAL *att,
                                AT_REAL *pre, const AT_REAL *qkv, const AT_REAL *J, char *err)
{
    // out (B,T,C), att (B,H,T,T), pre (B,H,T,T), qkv (B,T,3C), J (H,Tmax,Tmax) or (H,D)
    AT_IO io = AT_FN(ba_attn_packed_io)(s, qkv);
    io.out = out;
    return AT_FN(ba_attn_core_forward)(s, &io, att, pre, J, err);
}

int AT_FN(ba_attention_backward)(const ba_attn_shape *s, AT_REAL *dqkv, AT_REAL *dJ,
                                 const AT_REAL *dout, const AT_REAL *qkv, const AT_REAL *J,
                                 const AT_REAL *att, const AT_REAL *pre, char *err)
{
    // dqkv (B,T,3C) +=, dout (B,T,C), qkv (B,T,3C)
    AT_IO io = AT_FN(ba_attn_packed_io)(s, qkv);
    size_t C = (size_t)s->C;
    io.dout = dout;
    io.dq = dqkv, io.dk = dqkv + C, io.dv = dqkv + 2 * C;
    return AT_FN(ba_attn_core_backward)(s, &io, dJ, J, att, pre, err);
}

#undef AT_CAT2
#undef AT_CAT
#undef AT_FN
#undef AT_IO
#undef AT_AT
#undef AT_OUT
