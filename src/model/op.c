/* The public attention op (include/boltzattn_op.h): [B,H,T,d] tensors in
 * float or double through the model's own kernels, compiled in both
 * precisions and addressed by strides, so no input is packed or copied:
 * softmax and sigmoid run the tiled kernels (src/model/attention_tiled.c),
 * the Ising variants the dense core (src/model/attention_core.h). The
 * caller's context keeps what the backward needs: for the tiled variants a
 * copy of out and the rows' log-sum-exp (linear in T; the backward's
 * signature does not pass out back), for the dense core att and pre
 * (B,H,T,T) each. */
#include "model/model.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ba_attn_op_ctx {
    ba_attn_op_desc desc; /* of the last successful forward */
    int prec;             /* its precision: 32, 64, or 0 without a forward */
    /* in prec: dense core att, pre (B,H,T,T) each; tiled: att the
     * forward's out [B,H,T,d], pre its lse (B,H,T) */
    void *att, *pre;
    size_t cap; /* bytes allocated for each of att and pre */
    ba_engine_ctx **ectx; /* (nectx) one per head */
    int nectx;
    ba_approx_stats stats;
};

ba_attn_op_desc ba_attn_op_default(int B, int H, int T, int d)
{
    ba_attn_op_desc o;
    memset(&o, 0, sizeof o);
    o.B = B, o.H = H, o.T = T, o.d = d;
    o.causal = 1;
    o.scale = d > 0 ? 1.0 / sqrt((double)d) : 1.0;
    o.attn = BA_ATTN_BOLTZMANN;
    o.engine = BA_ENGINE_AUTO;
    o.couplings = BA_COUPLINGS_ABSOLUTE;
    o.field_bias = BA_FIELD_BIAS_NONE;
    o.approx = ba_approx_default();
    return o;
}

static int is_ising(ba_attn a) { return a == BA_ATTN_BOLTZMANN || a == BA_ATTN_COUPLING; }

/* Whether o runs the tiled kernels (softmax and sigmoid). */
static int is_tiled(const ba_attn_op_desc *o)
{
    ba_attn_shape s;
    memset(&s, 0, sizeof s);
    s.attn = o->attn;
    return ba_attn_tiled_supports(&s);
}

/* The model config an op of o runs like: one layer of the op's attention,
 * so that ba_config_validate gives the engine's limits and the couplings'
 * rules in the command line's words. Sizes the op does not have are 1. */
static ba_config mirror_config(const ba_attn_op_desc *o)
{
    ba_config c = ba_config_default(o->attn, o->T);
    c.engine = o->engine;
    c.n_head = 1, c.n_embd = 1, c.vocab_size = 1, c.out_size = 1;
    c.head = BA_HEAD_TOKEN;
    c.couplings = o->couplings;
    c.band = o->band;
    c.field_bias = o->field_bias;
    c.approx = o->approx;
    c.window = o->window;
    return c;
}

int ba_attn_op_check(const ba_attn_op_desc *o, char *err)
{
    if (!o)
        return ba_fail(err, BA_ERR_ARG, "desc is NULL");
    const struct {
        const char *name;
        int v;
    } dims[4] = {{"B", o->B}, {"H", o->H}, {"T", o->T}, {"d", o->d}};
    for (int i = 0; i < 4; i++)
        if (dims[i].v < 1)
            return ba_fail(err, BA_ERR_ARG, "%s = %d must be at least 1", dims[i].name,
                           dims[i].v);
    if ((long long)o->H * o->d > INT_MAX)
        return ba_fail(err, BA_ERR_ARG, "H = %d times d = %d exceeds %d", o->H, o->d, INT_MAX);
    if (o->T > BA_MAX_BLOCK)
        return ba_fail(err, BA_ERR_ARG, "T = %d is out of range [1, %d]", o->T, BA_MAX_BLOCK);
    size_t bh, btt, btd;
    if (ba_mul_size((size_t)o->B, (size_t)o->H, &bh) ||
        ba_mul_size(bh, (size_t)o->T * (size_t)o->T, &btt) ||
        ba_mul_size(btt, 2 * sizeof(double), &btt) ||
        ba_mul_size(bh, (size_t)o->T * (size_t)o->d, &btd) ||
        ba_mul_size(btd, sizeof(double), &btd))
        return ba_fail(err, BA_ERR_ARG,
                       "B = %d, H = %d, T = %d, d = %d: the tensors' sizes overflow size_t",
                       o->B, o->H, o->T, o->d);
    if (o->alibi != 0 && o->alibi != 1)
        return ba_fail(err, BA_ERR_ARG, "alibi = %d must be 0 (none) or 1 (ALiBi's slopes)",
                       o->alibi);
    if (o->causal != 1)
        return ba_fail(err, BA_ERR_ARG,
                       "causal = %d: only causal attention (causal = 1) is implemented",
                       o->causal);
    if (!isfinite(o->scale))
        return ba_fail(err, BA_ERR_ARG, "scale = %g is not finite", o->scale);
    if ((unsigned)o->attn > BA_ATTN_COUPLING)
        return ba_fail(err, BA_ERR_ARG, "attn %d is not a known attention variant", (int)o->attn);
    if (o->engine != BA_ENGINE_AUTO && !ba_engine_ops_of(o->engine))
        return ba_fail(err, BA_ERR_ARG, "engine %d is not a known engine", (int)o->engine);
    if ((unsigned)o->couplings > BA_COUPLINGS_RELATIVE)
        return ba_fail(err, BA_ERR_ARG, "couplings %d is not a known form", (int)o->couplings);
    if (o->couplings == BA_COUPLINGS_ABSOLUTE && o->D != 0)
        return ba_fail(err, BA_ERR_ARG,
                       "D = %d must be 0 with absolute couplings (J is [H, T, T])", o->D);
    if (o->couplings == BA_COUPLINGS_RELATIVE && (o->D < 1 || o->D > BA_MAX_BLOCK))
        return ba_fail(err, BA_ERR_ARG,
                       "D = %d is out of range [1, %d] for relative couplings (J is [H, D])",
                       o->D, BA_MAX_BLOCK);
    ba_config c = mirror_config(o);
    return ba_config_validate(&c, err);
}

size_t ba_attn_op_j_size(const ba_attn_op_desc *o)
{
    if (!o || !is_ising(o->attn))
        return 0;
    if (o->couplings == BA_COUPLINGS_RELATIVE)
        return (size_t)o->H * (size_t)o->D;
    return (size_t)o->H * (size_t)o->T * (size_t)o->T;
}

int ba_attn_op_ctx_new(ba_attn_op_ctx **out, char *err)
{
    if (!out)
        return ba_fail(err, BA_ERR_ARG, "out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate an attention op context");
    return BA_OK;
}

void ba_attn_op_ctx_free(ba_attn_op_ctx *ctx)
{
    if (!ctx)
        return;
    for (int i = 0; i < ctx->nectx; i++)
        ba_engine_ctx_free(ctx->ectx[i]);
    free(ctx->ectx);
    free(ctx->att);
    free(ctx->pre);
    free(ctx);
}

ba_approx_stats ba_attn_op_approx_stats_take(ba_attn_op_ctx *ctx)
{
    ba_approx_stats st;
    memset(&st, 0, sizeof st);
    if (ctx) {
        st = ctx->stats;
        memset(&ctx->stats, 0, sizeof ctx->stats);
    }
    return st;
}

/* att and pre of nbytes each, and an engine context per head. */
static int ctx_reserve(ba_attn_op_ctx *ctx, size_t nbytes, int H, char *err)
{
    if (nbytes > ctx->cap) {
        free(ctx->att), free(ctx->pre);
        ctx->att = malloc(nbytes);
        ctx->pre = malloc(nbytes);
        ctx->cap = ctx->att && ctx->pre ? nbytes : 0;
        if (!ctx->cap) {
            free(ctx->att), free(ctx->pre);
            ctx->att = ctx->pre = NULL;
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate %zu bytes for the attention weights",
                           2 * nbytes);
        }
    }
    if (H > ctx->nectx) {
        ba_engine_ctx **e = realloc(ctx->ectx, sizeof *e * (size_t)H);
        if (!e)
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate %d engine contexts", H);
        ctx->ectx = e;
        for (; ctx->nectx < H; ctx->nectx++) {
            e[ctx->nectx] = ba_engine_ctx_new();
            if (!e[ctx->nectx])
                return ba_fail(err, BA_ERR_NOMEM, "cannot allocate an engine context");
        }
    }
    return BA_OK;
}

/* The core's description of an op of o, with ctx's engine contexts. */
static ba_attn_shape op_shape(const ba_attn_op_desc *o, ba_attn_op_ctx *ctx)
{
    ba_attn_shape s;
    memset(&s, 0, sizeof s);
    ba_config c = mirror_config(o);
    s.attn = o->attn;
    s.engine = ba_config_engine(&c);
    s.B = o->B, s.T = o->T, s.H = o->H, s.C = o->H * o->d, s.Tmax = o->T;
    s.ctx = ctx->ectx;
    s.couplings = o->couplings;
    s.band = o->band;
    s.D = o->couplings == BA_COUPLINGS_RELATIVE ? o->D : 0;
    s.field_bias = o->field_bias;
    s.alibi = o->alibi;
    s.approx = o->approx;
    s.window = o->window;
    s.astats = &ctx->stats;
    return s;
}

/* Strides of contiguous [B,H,T,d] tensors, for every array of the view,
 * and the op's scale. */
#define BHTD_VIEW(io, o)                                                                 \
    do {                                                                                 \
        (io).st = (io).ot = (size_t)(o)->d;                                              \
        (io).sh = (io).oh = (size_t)(o)->T * (o)->d;                                     \
        (io).sb = (io).ob = (size_t)(o)->H * (o)->T * (o)->d;                            \
        (io).scale_set = 1, (io).scale = (o)->scale;                                     \
    } while (0)

/* The checks shared by both precisions' forward. */
static int forward_check(ba_attn_op_ctx *ctx, const ba_attn_op_desc *o, const void *q,
                         const void *k, const void *v, const void *J, const void *out,
                         size_t elem, char *err)
{
    if (!ctx)
        return ba_fail(err, BA_ERR_ARG, "ctx is NULL (ba_attn_op_ctx_new makes one)");
    ctx->prec = 0;
    int rc = ba_attn_op_check(o, err);
    if (rc)
        return rc;
    const struct {
        const char *name;
        const void *p;
    } need[4] = {{"q", q}, {"k", k}, {"v", v}, {"out", out}};
    for (int i = 0; i < 4; i++)
        if (!need[i].p)
            return ba_fail(err, BA_ERR_ARG, "%s is NULL", need[i].name);
    if (is_ising(o->attn) && !J)
        return ba_fail(err, BA_ERR_ARG, "J is NULL: %s attention needs its couplings (%s)",
                       ba_attn_name(o->attn),
                       o->couplings == BA_COUPLINGS_RELATIVE ? "[H, D]" : "[H, T, T]");
    size_t n = (size_t)o->B * o->H * o->T * (is_tiled(o) ? (size_t)o->d : (size_t)o->T);
    return ctx_reserve(ctx, n * elem, o->H, err);
}

/* Whether the op reads entry i of J. */
static int coupling_read(const ba_attn_op_desc *o, size_t i)
{
    int reach = o->band > 0 ? o->band : o->T - 1;
    if (o->couplings == BA_COUPLINGS_RELATIVE)
        return (int)(i % (size_t)o->D) < reach;
    int j = (int)(i / o->T % o->T), k = (int)(i % o->T);
    return j < k && k - j <= reach;
}

static int nonfinite_input(const ba_attn_op_desc *o, const char *name, size_t i, double x,
                           char *err)
{
    if (name[0] == 'J') {
        if (o->couplings == BA_COUPLINGS_RELATIVE)
            return ba_fail(err, BA_ERR_NUMERIC, "J[%zu][%zu] (distance %zu) = %g is not finite",
                           i / o->D, i % o->D, i % o->D + 1, x);
        return ba_fail(err, BA_ERR_NUMERIC, "J[%zu][%zu][%zu] = %g is not finite",
                       i / ((size_t)o->T * o->T), i / o->T % o->T, i % o->T, x);
    }
    size_t d = (size_t)o->d, T = (size_t)o->T, H = (size_t)o->H;
    return ba_fail(err, BA_ERR_NUMERIC, "%s[%zu] (b %zu, h %zu, t %zu, c %zu) = %g is not finite",
                   name, i, i / (d * T * H), i / (d * T) % H, i / d % T, i % d, x);
}

/* BA_ERR_ARG naming coupling i of J, beyond BA_ATTN_OP_MAX_COUPLING. */
static int huge_coupling(const ba_attn_op_desc *o, size_t i, double x, char *err)
{
    if (o->couplings == BA_COUPLINGS_RELATIVE)
        return ba_fail(err, BA_ERR_ARG,
                       "J[%zu][%zu] (distance %zu) = %g exceeds the bound |J| <= %g", i / o->D,
                       i % o->D, i % o->D + 1, x, BA_ATTN_OP_MAX_COUPLING);
    return ba_fail(err, BA_ERR_ARG, "J[%zu][%zu][%zu] = %g exceeds the bound |J| <= %g",
                   i / ((size_t)o->T * o->T), i / o->T % o->T, i % o->T, x,
                   BA_ATTN_OP_MAX_COUPLING);
}

/* Element i of a float (prec 32) or double array, as a double. */
static double elem_of(const void *p, int prec, size_t i)
{
    return prec == 32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* BA_ERR_NUMERIC naming the first non-finite value of q, k, v [B,H,T,d]
 * or of a coupling the op reads (absolute: j < k, within the band;
 * relative: distances up to D and the band): the engines would otherwise
 * carry it into every output of its query. */
static int check_finite(const ba_attn_op_desc *o, int prec, const void *q, const void *k,
                        const void *v, const void *J, char *err)
{
    size_t n = (size_t)o->B * o->H * o->T * o->d;
    const void *x[3] = {q, k, v};
    const char *name[3] = {"q", "k", "v"};
    for (int a = 0; a < 3; a++)
        for (size_t i = 0; i < n; i++)
            if (!isfinite(elem_of(x[a], prec, i)))
                return nonfinite_input(o, name[a], i, elem_of(x[a], prec, i), err);
    size_t nJ = ba_attn_op_j_size(o);
    for (size_t i = 0; i < nJ; i++)
        if (coupling_read(o, i) && !isfinite(elem_of(J, prec, i)))
            return nonfinite_input(o, "J", i, elem_of(J, prec, i), err);
    for (size_t i = 0; i < nJ; i++)
        if (coupling_read(o, i) && fabs(elem_of(J, prec, i)) > BA_ATTN_OP_MAX_COUPLING)
            return huge_coupling(o, i, elem_of(J, prec, i), err);
    return BA_OK;
}

int ba_attn_op_forward_f32(ba_attn_op_ctx *ctx, const ba_attn_op_desc *desc, const float *q,
                           const float *k, const float *v, const float *J, float *out,
                           char *err)
{
    // q, k, v, out [B,H,T,d]; J [H,T,T] or [H,D]
    int rc = forward_check(ctx, desc, q, k, v, J, out, sizeof(float), err);
    if (rc)
        return rc;
    rc = check_finite(desc, 32, q, k, v, J, err);
    if (rc)
        return rc;
    ba_attn_shape s = op_shape(desc, ctx);
    ba_attn_io_f32 io;
    memset(&io, 0, sizeof io);
    io.q = q, io.k = k, io.v = v, io.out = out;
    BHTD_VIEW(io, desc);
    if (is_tiled(desc)) {
        rc = ba_attn_tiled_forward_f32(&s, &io, ctx->pre, err);
        if (rc == BA_OK)
            memcpy(ctx->att, out, sizeof(float) * (size_t)desc->B * desc->H * desc->T * desc->d);
    } else
        rc = ba_attn_core_forward_f32(&s, &io, ctx->att, ctx->pre, J, err);
    if (rc == BA_OK)
        ctx->desc = *desc, ctx->prec = 32;
    return rc;
}

int ba_attn_op_forward_f64(ba_attn_op_ctx *ctx, const ba_attn_op_desc *desc, const double *q,
                           const double *k, const double *v, const double *J, double *out,
                           char *err)
{
    // q, k, v, out [B,H,T,d]; J [H,T,T] or [H,D]
    int rc = forward_check(ctx, desc, q, k, v, J, out, sizeof(double), err);
    if (rc)
        return rc;
    rc = check_finite(desc, 64, q, k, v, J, err);
    if (rc)
        return rc;
    ba_attn_shape s = op_shape(desc, ctx);
    ba_attn_io_f64 io;
    memset(&io, 0, sizeof io);
    io.q = q, io.k = k, io.v = v, io.out = out;
    BHTD_VIEW(io, desc);
    if (is_tiled(desc)) {
        rc = ba_attn_tiled_forward_f64(&s, &io, ctx->pre, err);
        if (rc == BA_OK)
            memcpy(ctx->att, out, sizeof(double) * (size_t)desc->B * desc->H * desc->T * desc->d);
    } else
        rc = ba_attn_core_forward_f64(&s, &io, ctx->att, ctx->pre, J, err);
    if (rc == BA_OK)
        ctx->desc = *desc, ctx->prec = 64;
    return rc;
}

/* The checks shared by both precisions' backward; zeroes the gradients
 * (the core accumulates) of n = B*H*T*d elements each, and dJ. */
static int backward_check(ba_attn_op_ctx *ctx, int prec, const void *q, const void *k,
                          const void *v, const void *J, const void *dout, void *dq, void *dk,
                          void *dv, void *dJ, size_t elem, char *err)
{
    if (!ctx)
        return ba_fail(err, BA_ERR_ARG, "ctx is NULL (ba_attn_op_ctx_new makes one)");
    if (ctx->prec == 0)
        return ba_fail(err, BA_ERR_ARG,
                       "ctx holds no forward: the backward needs a successful forward first");
    if (ctx->prec != prec)
        return ba_fail(err, BA_ERR_ARG,
                       "ctx holds a float%d forward; this is the float%d backward", ctx->prec,
                       prec);
    const struct {
        const char *name;
        const void *p;
    } need[7] = {{"q", q}, {"k", k}, {"v", v}, {"dout", dout}, {"dq", dq}, {"dk", dk}, {"dv", dv}};
    for (int i = 0; i < 7; i++)
        if (!need[i].p)
            return ba_fail(err, BA_ERR_ARG, "%s is NULL", need[i].name);
    const ba_attn_op_desc *o = &ctx->desc;
    if (is_ising(o->attn) && !J)
        return ba_fail(err, BA_ERR_ARG, "J is NULL: %s attention needs its couplings",
                       ba_attn_name(o->attn));
    /* a non-finite upstream gradient would spread into every gradient of
     * its query: named here, like the forward's inputs */
    size_t nel = (size_t)o->B * o->H * o->T * o->d;
    for (size_t i = 0; i < nel; i++)
        if (!isfinite(elem_of(dout, prec, i)))
            return nonfinite_input(o, "dout", i, elem_of(dout, prec, i), err);
    size_t n = nel * elem;
    memset(dq, 0, n), memset(dk, 0, n), memset(dv, 0, n);
    if (dJ)
        memset(dJ, 0, ba_attn_op_j_size(o) * elem);
    return BA_OK;
}

int ba_attn_op_backward_f32(ba_attn_op_ctx *ctx, const float *q, const float *k, const float *v,
                            const float *J, const float *dout, float *dq, float *dk, float *dv,
                            float *dJ, char *err)
{
    // q, k, v, dout, dq, dk, dv [B,H,T,d]; J, dJ [H,T,T] or [H,D]
    int rc = backward_check(ctx, 32, q, k, v, J, dout, dq, dk, dv, dJ, sizeof(float), err);
    if (rc)
        return rc;
    ba_attn_shape s = op_shape(&ctx->desc, ctx);
    ba_attn_io_f32 io;
    memset(&io, 0, sizeof io);
    io.q = q, io.k = k, io.v = v, io.dout = dout, io.dq = dq, io.dk = dk, io.dv = dv;
    BHTD_VIEW(io, &ctx->desc);
    if (is_tiled(&ctx->desc)) {
        io.out = ctx->att; /* the forward's, as the tiled backward reads it */
        return ba_attn_tiled_backward_f32(&s, &io, ctx->pre, err);
    }
    return ba_attn_core_backward_f32(&s, &io, is_ising(ctx->desc.attn) ? dJ : NULL, J, ctx->att,
                                     ctx->pre, err);
}

int ba_attn_op_backward_f64(ba_attn_op_ctx *ctx, const double *q, const double *k,
                            const double *v, const double *J, const double *dout, double *dq,
                            double *dk, double *dv, double *dJ, char *err)
{
    // q, k, v, dout, dq, dk, dv [B,H,T,d]; J, dJ [H,T,T] or [H,D]
    int rc = backward_check(ctx, 64, q, k, v, J, dout, dq, dk, dv, dJ, sizeof(double), err);
    if (rc)
        return rc;
    ba_attn_shape s = op_shape(&ctx->desc, ctx);
    ba_attn_io_f64 io;
    memset(&io, 0, sizeof io);
    io.q = q, io.k = k, io.v = v, io.dout = dout, io.dq = dq, io.dk = dk, io.dv = dv;
    BHTD_VIEW(io, &ctx->desc);
    if (is_tiled(&ctx->desc)) {
        io.out = ctx->att; /* the forward's, as the tiled backward reads it */
        return ba_attn_tiled_backward_f64(&s, &io, ctx->pre, err);
    }
    return ba_attn_core_backward_f64(&s, &io, is_ising(ctx->desc.attn) ? dJ : NULL, J, ctx->att,
                                     ctx->pre, err);
}

/* The checks of ba_attn_op_rope_*: see its contract. */
static int rope_check(int B, int H, int T, int d, int t0, int sign, const void *x, char *err)
{
    if (!x)
        return ba_fail(err, BA_ERR_ARG, "x is NULL");
    if (B < 1 || H < 1 || T < 1)
        return ba_fail(err, BA_ERR_ARG, "B = %d, H = %d, T = %d must each be at least 1", B, H,
                       T);
    if ((long long)B * H > INT_MAX)
        return ba_fail(err, BA_ERR_ARG, "B = %d times H = %d exceeds %d", B, H, INT_MAX);
    if (d < 2 || d % 2)
        return ba_fail(err, BA_ERR_ARG,
                       "d = %d: rope turns pairs of channels, so d must be even and at least 2", d);
    if (t0 < 0 || (long long)t0 + T > INT_MAX)
        return ba_fail(err, BA_ERR_ARG, "t0 = %d must be at least 0 with t0 + T <= %d", t0,
                       INT_MAX);
    if (sign != 1 && sign != -1)
        return ba_fail(err, BA_ERR_ARG, "sign = %d must be +1 (forward) or -1 (backward)", sign);
    return BA_OK;
}

/* [B,H,T,d] is B*H sequences of T rows of one head of d channels. */
int ba_attn_op_rope_f32(int B, int H, int T, int d, int t0, int sign, float *x, char *err)
{
    int rc = rope_check(B, H, T, d, t0, sign, x, err);
    if (rc == BA_OK)
        ba_rope_rotate_f32(B * H, T, t0, 1, d, (size_t)d, sign, x);
    return rc;
}

int ba_attn_op_rope_f64(int B, int H, int T, int d, int t0, int sign, double *x, char *err)
{
    int rc = rope_check(B, H, T, d, t0, sign, x, err);
    if (rc == BA_OK)
        ba_rope_rotate_f64(B * H, T, t0, 1, d, (size_t)d, sign, x);
    return rc;
}
