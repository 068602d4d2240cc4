/* The model's attention layer (issue 42): its description of a batch and
 * the choice of kernel. Softmax and sigmoid run the tiled kernels
 * (src/model/attention_tiled.c), which keep one log-sum-exp per query row
 * (B,H,T) and no (B,H,T,T) buffer; boltzmann and coupling run the dense
 * core (src/model/attention_core.h), which keeps att and pre (B,H,T,T).
 * The op (src/model/op.c) chooses the same way; sampled attention stays
 * on the dense core.
 * Compiled once per library, in its ba_real. */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#ifdef BA_DOUBLE
#define MA(name) name##_f64
typedef ba_attn_io_f64 ma_io;
#else
#define MA(name) name##_f32
typedef ba_attn_io_f32 ma_io;
#endif

int ba_model_attn_tiled(const ba_config *c)
{
    ba_attn_shape s;
    memset(&s, 0, sizeof s);
    s.attn = c->attn;
    return ba_attn_tiled_supports(&s);
}

ba_attn_shape ba_model_attn_shape(const ba_config *c, int B, int T, ba_rng *srng, long item0,
                                  ba_approx_stats *astats, const ba_stop *stop)
{
    ba_attn_shape as;
    memset(&as, 0, sizeof as);
    as.attn = c->attn;
    as.engine = ba_config_engine(c);
    as.B = B, as.T = T, as.C = c->n_embd, as.H = c->n_head, as.Tmax = c->block_size;
    as.sampler = &c->sampler;
    as.srng = srng;
    as.item0 = item0;
    as.couplings = c->couplings;
    as.band = c->band;
    as.D = ba_config_distances(c);
    as.field_bias = c->field_bias;
    as.approx = c->approx;
    as.window = c->window;
    as.band_f32 = c->band_f32;
    as.rope = c->pos_emb == BA_POS_ROPE;
    as.alibi = c->pos_emb == BA_POS_ALIBI;
    as.astats = astats;
    as.stop = stop;
    return as;
}

/* The model's packed qkv (B,T,3C) and out (B,T,C) as the kernels' io. */
static ma_io packed_io(const ba_attn_shape *s, const ba_real *qkv, const ba_real *out)
{
    ma_io io = MA(ba_attn_packed_io)(s, qkv);
    io.out = (ba_real *)out; /* only the forward writes it */
    return io;
}

static int stop_check(const ba_attn_shape *s, int l, const char *pass, char *err)
{
    return ba_stop_requested(s->stop)
               ? ba_fail(err, BA_ERR_INTERRUPTED, "%s attention %s: stopped on request before "
                         "layer %d", ba_attn_name(s->attn), pass, l)
               : BA_OK;
}

/* Rotary embeddings: q and k of packed qkv (B,T,3C) (or their gradients)
 * turned by sign * their positions' angles. */
static void rope_qk(const ba_attn_shape *s, int sign, ba_real *qkv)
{
    size_t ld = 3 * (size_t)s->C;
    int d = s->C / s->H;
    MA(ba_rope_rotate)(s->B, s->T, 0, s->H, d, ld, sign, qkv);
    MA(ba_rope_rotate)(s->B, s->T, 0, s->H, d, ld, sign, qkv + s->C);
}

int ba_model_attn_forward(const ba_attn_shape *s, int l, ba_real *out, ba_real *att,
                          ba_real *pre, ba_real *qkv, const ba_real *J, char *err)
{
    // out (B,T,C); tiled: pre (B,H,T) the row log-sum-exp, att unused; else att, pre (B,H,T,T)
    if (s->rope)
        rope_qk(s, 1, qkv);
    if (!ba_attn_tiled_supports(s))
        return ba_attention_forward(s, out, att, pre, qkv, J, err);
    int rc = stop_check(s, l, "forward", err);
    if (rc)
        return rc;
    ma_io io = packed_io(s, qkv, out);
    return MA(ba_attn_tiled_forward)(s, &io, pre, err);
}

int ba_model_attn_backward(const ba_attn_shape *s, int l, ba_real *dqkv, ba_real *dJ,
                           const ba_real *dout, const ba_real *qkv, const ba_real *out,
                           const ba_real *J, const ba_real *att, const ba_real *pre, char *err)
{
    // dqkv (B,T,3C) +=; dout, out (B,T,C), out the forward's; att, pre as the forward's
    int rc;
    if (!ba_attn_tiled_supports(s))
        rc = ba_attention_backward(s, dqkv, dJ, dout, qkv, J, att, pre, err);
    else if (!(rc = stop_check(s, l, "backward", err))) {
        ma_io io = packed_io(s, qkv, out);
        size_t C = (size_t)s->C;
        io.dout = dout;
        io.dq = dqkv, io.dk = dqkv + C, io.dv = dqkv + 2 * C;
        rc = MA(ba_attn_tiled_backward)(s, &io, pre, err);
    }
    if (rc == BA_OK && s->rope)
        rope_qk(s, -1, dqkv);
    if (rc == BA_ERR_NUMERIC) {
        char why[BA_ERR_LEN];
        snprintf(why, sizeof why, "%s", err ? err : "");
        return ba_fail(err, rc, "blocks.%d attention backward: %.160s", l, why);
    }
    return rc;
}

int ba_model_attn_weights(const ba_attn_shape *s, int L, const ba_real *qkv, const ba_real *out,
                          const ba_real *lse, ba_real **att, size_t *cap, char *err)
{
    // qkv (L,B,T,3C), out (L,B,T,C), lse (L,B,H,T) of a tiled forward; *att (L,B,H,T,T)
    size_t N = (size_t)s->B * s->T, NC = N * s->C, natt = N * s->H * s->T;
    if (natt * L > *cap) {
        free(*att);
        *cap = (*att = malloc(sizeof(ba_real) * natt * L)) ? natt * L : 0;
        if (!*att)
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the attention weights (%d layers, "
                           "B=%d, H=%d, T=%d)", L, s->B, s->H, s->T);
    }
    int rc = BA_OK;
    for (int l = 0; l < L && rc == BA_OK; l++) {
        ma_io io = packed_io(s, qkv + l * NC * 3, out + l * NC);
        rc = MA(ba_attn_tiled_weights)(s, &io, lse + l * N * s->H, *att + l * natt, err);
    }
    return rc;
}
