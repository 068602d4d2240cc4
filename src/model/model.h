/* The model layer's private declarations (src/model/: the config and its
 * parameter layout, layers, the attention variants, the op, the model,
 * AdamW, checkpoints). Not installed; it includes only the Ising layer's
 * header (and through it the core's). */
#ifndef BA_MODEL_H
#define BA_MODEL_H

#include "ising/ising.h"

/* The config (and data description, may be NULL) as a new cJSON object,
 * and the reverse (as ba_config_from_json). */
struct cJSON *ba_config_json_object(const ba_config *cfg, const ba_data_spec *spec);
int ba_config_from_object(const struct cJSON *o, ba_config *cfg, ba_data_spec *spec, char *err);

/* The field bias subtracted from every field of a query that sees n keys:
 * (1/2) log n for log-n, else 0. The attention layer and ba_model_fields
 * share it, so the fields they report are the ones the engines see. */
static inline double ba_field_bias_value(ba_field_bias b, int n)
{
    return b == BA_FIELD_BIAS_LOG_N ? 0.5 * log((double)n) : 0.0;
}
/* A banded model with absolute couplings stores 0 beyond the band: a
 * loaded file holding anything else there is BA_ERR_FORMAT (what names the
 * file for the message). */
int ba_model_check_band(const ba_model *m, const char *what, char *err);
/* ba_model_forward of a share of a whole batch (data-parallel training)
 * whose first sequence is item0 of the whole: a sampled model draws the
 * share's shots as one process would for the whole (ba_attn_shape.item0).
 * inputs, targets (B,T). ba_model_forward is the share at item0 0. */
/* Sets the stop request the model's attention layers poll (copied; stop
 * NULL: none): a forward or backward then ends early with
 * BA_ERR_INTERRUPTED once stop->requested answers nonzero, and the model's
 * activations and gradients are unspecified (parameters and optimiser
 * state untouched). The trainer sets its hooks' stop for a run. */
void ba_model_set_stop(ba_model *m, const ba_stop *stop);
int ba_model_forward_share(ba_model *m, const int *inputs, const int *targets, int B, int T,
                           long item0, double *loss, char *err);
/* The update of ba_model_step in its parts (src/model/optim.c), as the
 * trainer's step reads: the gradients' global L2 norm (BA_ERR_NUMERIC, no
 * *norm, naming the first non-finite tensor from the head back); the clip
 * factor that scales a gradient of that norm to o->grad_clip (1 when
 * within it or clipping is off); the AdamW update with the gradients times
 * clip, which changes nothing when a parameter or moment would leave
 * ba_real's range (BA_ERR_NUMERIC naming it) and otherwise counts the step. */
int ba_model_grad_norm(ba_model *m, double *norm, char *err);
double ba_clip_scale(const ba_adamw *o, double norm);
int ba_model_adamw_update(ba_model *m, const ba_adamw *o, double lr, double clip, char *err);
/* The forward's check of a batch's shape and tokens against the model of c
 * (ba_model_forward and ba_batch_check share it). */
int ba_inputs_check(const ba_config *c, const int *inputs, int B, int T, char *err);
/* The kinds of parameter tensor, stacked across layers (all L ln1 weights
 * form one (L,C) array) in this order inside the model's block, and their
 * sizes for a valid config (src/config.c: the one definition of the
 * layout). */
enum {
    BA_P_TOK, BA_P_POS, BA_P_LN1W, BA_P_LN1B, BA_P_QKVW, BA_P_QKVB, BA_P_PROJW,
    BA_P_PROJB, BA_P_J, BA_P_LN2W, BA_P_LN2B, BA_P_FCW, BA_P_FCB, BA_P_FCPW,
    BA_P_FCPB, BA_P_LNFW, BA_P_LNFB, BA_P_HEADW, BA_P_HEADB, BA_NUM_P
};
void ba_param_sizes(const ba_config *c, size_t *sz);
/* The model's layout of that block: each kind's offset and size (BA_NUM_P
 * each, owned by the model). */
const size_t *ba_model_param_offsets(const ba_model *m);
const size_t *ba_model_param_kind_sizes(const ba_model *m);

/* ---------------------------------------------------------- layers
 * Each layer is a forward/backward pair over plain arrays; backward
 * accumulates (+=) into the gradients of its inputs and parameters.
 * N = number of rows (B*T). */

/* out = inp W^T + b. inp (N,IC), W (OC,IC), b (OC) or NULL, out (N,OC). */
void ba_linear_forward(ba_real *out, const ba_real *inp, const ba_real *w,
                       const ba_real *b, int N, int IC, int OC);
/* dinp += dout W, dw += dout^T inp, db += sum dout. dinp/dw/db may be NULL. */
void ba_linear_backward(ba_real *dinp, ba_real *dw, ba_real *db,
                        const ba_real *dout, const ba_real *inp,
                        const ba_real *w, int N, int IC, int OC);

/* LayerNorm over C with eps 1e-5. mean/rstd (N) saved for backward. */
void ba_layernorm_forward(ba_real *out, ba_real *mean, ba_real *rstd,
                          const ba_real *inp, const ba_real *w,
                          const ba_real *b, int N, int C);
void ba_layernorm_backward(ba_real *dinp, ba_real *dw, ba_real *db,
                           const ba_real *dout, const ba_real *inp,
                           const ba_real *w, const ba_real *mean,
                           const ba_real *rstd, int N, int C);

/* GELU, tanh form. */
void ba_gelu_forward(ba_real *out, const ba_real *inp, size_t n);
void ba_gelu_backward(ba_real *dinp, const ba_real *inp, const ba_real *dout,
                      size_t n);
/* ba_gelu_backward into a dinp it need not zero first: dinp = the gradient
 * (bit for bit what zeroing dinp and then accumulating gives). */
void ba_gelu_backward_set(ba_real *dinp, const ba_real *inp, const ba_real *dout, size_t n);

/* out = a + b elementwise (residual). */
void ba_residual_forward(ba_real *out, const ba_real *a, const ba_real *b,
                         size_t n);

/* Causal multi-head attention core, one of the four variants.
 * qkv (B,T,3C): q, k, v stacked, heads contiguous inside each.
 * J couplings of this layer (used by boltzmann/coupling; may be NULL
 *   otherwise): absolute (H,Tmax,Tmax) indexed by key position, or
 *   relative (H,D) indexed by distance - 1.
 * att (B,H,T,T): the normalised weights a_ij (row i, j <= i).
 * pre (B,H,T,T): per-variant saved values for backward (fields h_ij for
 *   softmax/sigmoid/boltzmann; unused by coupling but kept zero).
 * out (B,T,C). */
typedef struct {
    ba_attn attn;
    ba_engine engine; /* resolved (never auto) */
    int B, T, C, H, Tmax;
    ba_engine_ctx **ctx; /* (H) one per head, or NULL for stateless calls */
    /* Sampled attention, used when sampler is not NULL and not exact
     * (boltzmann/coupling): sctx (H) keeps each head's shots for the
     * backward; the forward draws one seed per head, in head order, from
     * srng. Zero-initialised fields mean exact. */
    const ba_sampler *sampler;
    ba_sample_ctx **sctx;
    ba_rng *srng;
    /* the batch's first sequence in the whole batch it is a share of (data-
     * parallel training): query q of this forward draws its shots as query
     * item0 T + q would, so the shares sample what one process would */
    long item0;
    /* The couplings' form (Ising attention): absolute J (H,Tmax,Tmax), or
     * relative r (H,D) with J_jk = r[k-j-1] for k - j <= D; band W > 0 sets
     * J_jk = 0 for k - j > W (0: no band); the band engine runs with W, or
     * without a band with T - 1. field_bias subtracts (1/2) log(i+1) from
     * query i's fields. Zero-initialised fields mean absolute, no band, no
     * bias. */
    ba_couplings couplings;
    int band, D;
    ba_field_bias field_bias;
    /* The approximate engines (engine mf, tap, bp, hybrid): their settings,
     * hybrid's window, and counts (ba_approx_stats) added to *astats (may
     * be NULL) by every forward and backward. */
    ba_approx approx;
    int window;
    ba_approx_stats *astats;
    /* the caller's stop request, polled between heads and by the engines
     * between queries (NULL: never; ba_model_set_stop) */
    const ba_stop *stop;
    /* the band engine's window term in float where its range allows
     * (config band_f32; ba_engine_rows.f32): 0 double. Last, so the
     * positional initialisers above it keep their meaning */
    int band_f32;
    /* the model's layer only (ba_model_attn_forward/backward): 1 turns q
     * and k by their positions first (rotary embeddings, config pos_emb
     * BA_POS_ROPE); the kernels themselves never read it */
    int rope;
    /* 1 adds ALiBi's distance bias -m_h (i - j) to head h's field of key
     * j for query i (config pos_emb BA_POS_ALIBI, the op's desc.alibi), in
     * every kernel that forms fields (ba_attn_alibi_slope) */
    int alibi;
} ba_attn_shape;

/* Where the core reads q, k, v and writes its output, in one precision:
 * element c of head h at position i of batch element b is at
 * q[b*sb + h*sh + i*st + c] (the same for k, v and the backward's dq, dk,
 * dv, which accumulate) and at out[b*ob + h*oh + i*ot + c] (the same for
 * dout). The model's packed qkv (B,T,3C) and the op's [B,H,T,d] tensors
 * are two sets of strides. Outputs must not overlap inputs. The fields are
 * h_ij = scale q_i . k_j with scale_set, else 1/sqrt(d) (the model's). */
typedef struct {
    const float *q, *k, *v;
    float *dq, *dk, *dv;
    size_t sb, sh, st;
    float *out;
    const float *dout;
    size_t ob, oh, ot;
    int scale_set;
    double scale;
} ba_attn_io_f32;
typedef struct {
    const double *q, *k, *v;
    double *dq, *dk, *dv;
    size_t sb, sh, st;
    double *out;
    const double *dout;
    size_t ob, oh, ot;
    int scale_set;
    double scale;
} ba_attn_io_f64;

/* The core (src/attention_core.h), in float and in double whatever
 * ba_real is: forward writes io->out, att and pre; backward accumulates
 * into io->dq, dk, dv and dJ (the layout of J; may be NULL). */
int ba_attn_core_forward_f32(const ba_attn_shape *s, const ba_attn_io_f32 *io, float *att,
                             float *pre, const float *J, char *err);
int ba_attn_core_backward_f32(const ba_attn_shape *s, const ba_attn_io_f32 *io, float *dJ,
                              const float *J, const float *att, const float *pre, char *err);
int ba_attn_core_forward_f64(const ba_attn_shape *s, const ba_attn_io_f64 *io, double *att,
                             double *pre, const double *J, char *err);
int ba_attn_core_backward_f64(const ba_attn_shape *s, const ba_attn_io_f64 *io, double *dJ,
                              const double *J, const double *att, const double *pre, char *err);

/* Tiled attention with linear memory (src/model/attention_tiled.c, issue
 * 42), softmax and sigmoid only (ba_attn_tiled_supports): the dense core's
 * results to rounding, with no (B,H,T,T) buffer. The forward writes
 * io->out and lse (B,H,T), each query row's log-sum-exp of its log-weights;
 * the backward reads io->q, k, v, the forward's io->out and lse, and
 * io->dout, and accumulates into io->dq, dk, dv. weights writes the
 * forward's a (B,H,T,T) (as the core's att) recomputed from lse. The same
 * results on any number of threads. */
int ba_attn_tiled_supports(const ba_attn_shape *s);
int ba_attn_tiled_forward_f32(const ba_attn_shape *s, const ba_attn_io_f32 *io, float *lse,
                              char *err);
int ba_attn_tiled_backward_f32(const ba_attn_shape *s, const ba_attn_io_f32 *io,
                               const float *lse, char *err);
int ba_attn_tiled_weights_f32(const ba_attn_shape *s, const ba_attn_io_f32 *io, const float *lse,
                              float *att, char *err);
int ba_attn_tiled_forward_f64(const ba_attn_shape *s, const ba_attn_io_f64 *io, double *lse,
                              char *err);
int ba_attn_tiled_backward_f64(const ba_attn_shape *s, const ba_attn_io_f64 *io,
                               const double *lse, char *err);
int ba_attn_tiled_weights_f64(const ba_attn_shape *s, const ba_attn_io_f64 *io,
                              const double *lse, double *att, char *err);

/* The strides of the model's packed qkv (B,T,3C) (heads contiguous inside
 * each of q, k, v) and of out and dout (B,T,C); every pointer but q, k, v
 * NULL. The dense layer below and the model's tiled layer
 * (src/model/model_attn.c) use it. */
ba_attn_io_f32 ba_attn_packed_io_f32(const ba_attn_shape *s, const float *qkv);
ba_attn_io_f64 ba_attn_packed_io_f64(const ba_attn_shape *s, const double *qkv);

/* The model's layer: the core on packed qkv (B,T,3C), out and dout
 * (B,T,C), in each precision; ba_attention_forward/backward are those of
 * ba_real. dqkv (B,T,3C) and dJ (the layout of J) accumulate (dJ may be
 * NULL). */
int ba_attention_forward_f32(const ba_attn_shape *s, float *out, float *att, float *pre,
                             const float *qkv, const float *J, char *err);
int ba_attention_backward_f32(const ba_attn_shape *s, float *dqkv, float *dJ, const float *dout,
                              const float *qkv, const float *J, const float *att,
                              const float *pre, char *err);
int ba_attention_forward_f64(const ba_attn_shape *s, double *out, double *att, double *pre,
                             const double *qkv, const double *J, char *err);
int ba_attention_backward_f64(const ba_attn_shape *s, double *dqkv, double *dJ,
                              const double *dout, const double *qkv, const double *J,
                              const double *att, const double *pre, char *err);
#ifdef BA_DOUBLE
#define BA_ATTN_SFX(name) name##_f64
#else
#define BA_ATTN_SFX(name) name##_f32
#endif
static inline int ba_attention_forward(const ba_attn_shape *s, ba_real *out, ba_real *att,
                                       ba_real *pre, const ba_real *qkv, const ba_real *J,
                                       char *err)
{
    return BA_ATTN_SFX(ba_attention_forward)(s, out, att, pre, qkv, J, err);
}
static inline int ba_attention_backward(const ba_attn_shape *s, ba_real *dqkv, ba_real *dJ,
                                        const ba_real *dout, const ba_real *qkv,
                                        const ba_real *J, const ba_real *att,
                                        const ba_real *pre, char *err)
{
    return BA_ATTN_SFX(ba_attention_backward)(s, dqkv, dJ, dout, qkv, J, att, pre, err);
}
#undef BA_ATTN_SFX

/* The model's attention layer (src/model/model_attn.c), in ba_real.
 * ba_model_attn_tiled: whether c's variant runs the tiled kernels (softmax,
 * sigmoid), which keep pre (B,H,T), each query row's log-sum-exp, and no
 * att; the others run the dense core with att and pre (B,H,T,T).
 * ba_model_attn_shape: the layer's description of a batch (B,T) whose first
 * sequence is item0 of the whole batch (ba_attn_shape; stop may be NULL).
 * forward/backward: the layer l of the model (ba_attention_forward/backward
 * or the tiled kernels on packed qkv; out is the forward's (B,T,C), which
 * the tiled backward reads); a stop request is polled before the tiled
 * kernels (BA_ERR_INTERRUPTED naming the layer), and the backward's
 * BA_ERR_NUMERIC names the layer. weights: the att (L,B,H,T,T) of a tiled
 * forward of L layers, recomputed from its qkv (L,B,T,3C), out (L,B,T,C)
 * and lse (L,B,H,T) into *att, grown (realloc'd, *cap elements) as needed
 * (for ba_model_attention). With s->rope the forward first turns the q
 * and k of qkv in place (what the attention and everything after it read),
 * and the backward turns dqkv's q and k parts back after the attention's
 * backward, so they must hold zeros on entry (the model zeroes them).
 */
int ba_model_attn_tiled(const ba_config *c);
ba_attn_shape ba_model_attn_shape(const ba_config *c, int B, int T, ba_rng *srng, long item0,
                                  ba_approx_stats *astats, const ba_stop *stop);
int ba_model_attn_forward(const ba_attn_shape *s, int l, ba_real *out, ba_real *att,
                          ba_real *pre, ba_real *qkv, const ba_real *J, char *err);
int ba_model_attn_backward(const ba_attn_shape *s, int l, ba_real *dqkv, ba_real *dJ,
                           const ba_real *dout, const ba_real *qkv, const ba_real *out,
                           const ba_real *J, const ba_real *att, const ba_real *pre, char *err);
int ba_model_attn_weights(const ba_attn_shape *s, int L, const ba_real *qkv, const ba_real *out,
                          const ba_real *lse, ba_real **att, size_t *cap, char *err);

/* Cross-entropy over logits (N,O) against targets (N) with -1 = none.
 * If mask_pointer, row i (position t = i % T) may only point at columns
 * [0, t): the rest are set to -INFINITY in logits before the softmax.
 * probs (N,O). Returns the number of targets; *loss_sum gets the sum of
 * -log p(target). A target outside the allowed range is BA_ERR_ARG. */
int ba_crossentropy_forward(ba_real *logits, ba_real *probs,
                            const int *targets, int N, int O, int T,
                            int mask_pointer, double *loss_sum, long *count,
                            char *err);
/* dlogits += (probs - onehot) * scale on rows with a target. */
void ba_crossentropy_backward(ba_real *dlogits, const ba_real *probs,
                              const int *targets, int N, int O, double scale);


/* Position encodings (src/model/positions.c, issue 43). ba_alibi_slope:
 * ALiBi's slope m_h of head h of H (the field of query i, key j gets
 * -m_h (i - j)). ba_rope_theta:
 * pair i's frequency base^(-2i/d) for heads of d channels. rotate: rows t0
 * .. t0+T-1 of B sequences (row stride ld), the first H*d channels of each
 * row as H heads, each channel pair (2i, 2i+1) turned in place by sign * t
 * * theta_i (sign +1: the forward; -1: its backward, the inverse). d must
 * be even (the config's check says so). */
#define BA_ROPE_BASE 10000.0
double ba_alibi_slope(int h, int H);
/* The slope head h of s's fields carry: ba_alibi_slope with s->alibi, else
 * 0 (no bias). */
static inline double ba_attn_alibi_slope(const ba_attn_shape *s, int h)
{
    return s->alibi ? ba_alibi_slope(h, s->H) : 0.0;
}
double ba_rope_theta(int i, int d);
void ba_rope_rotate_f32(int B, int T, int t0, int H, int d, size_t ld, int sign, float *x);
void ba_rope_rotate_f64(int B, int T, int t0, int H, int d, size_t ld, int sign, double *x);

#endif
