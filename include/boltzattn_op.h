/*
 * boltzattn: the attention op. Included by boltzattn.h, so programs include
 * that one; this file keeps the unit a framework binds to (PyTorch through
 * ctypes, your own C) in one place: plain arrays, ints and doubles, and a
 * context the caller owns.
 *
 * The op is the model's own attention layer (one implementation, compiled
 * in float and in double: docs/c-api.md, "The attention op"), over tensors
 * laid out as torch.nn.functional.scaled_dot_product_attention takes them:
 *
 *   q, k, v, out, dout, dq, dk, dv   [B, H, T, d], contiguous, row-major
 *   J, dJ   absolute couplings [H, T, T]: J[h][j][k] couples keys j < k
 *           (only the upper triangle is read; dJ is 0 elsewhere), or
 *           relative ones [H, D]: J[h][dist - 1] couples keys dist apart
 *
 * For query i of head h and batch element b, with the fields
 * h_ij = scale q_i . k_j (less (1/2) log(i+1) with the log-n field bias)
 * over the keys j <= i (causal), the Ising system of those i+1 keys,
 *   P(s) ~ exp(sum_j h_ij s_j + sum_{j<k<=i} J_jk s_j s_k),
 * gives w_ij = P(s_j = +1), a_ij = w_ij / sum_l w_il and
 * out_i = sum_j a_ij v_j (boltzmann attention; softmax, sigmoid and coupling
 * attention are the other variants of the model, see ba_attn).
 *
 *     ba_attn_op_desc desc = ba_attn_op_default(B, H, T, d);   // boltzmann, auto engine
 *     ba_attn_op_ctx *ctx;
 *     if (ba_attn_op_ctx_new(&ctx, err)) ...
 *     if (ba_attn_op_forward_f32(ctx, &desc, q, k, v, J, out, err)) ...
 *     if (ba_attn_op_backward_f32(ctx, q, k, v, J, dout, dq, dk, dv, dJ, err)) ...
 *     ba_attn_op_ctx_free(ctx);
 *
 * examples/op/op_example.c is the whole program (docs/c-api.md).
 *
 * Threads: the op keeps no global state; everything a backward needs is in
 * the caller's context, so calls on different contexts may run at the same
 * time from different threads. A context is not to be shared by two calls
 * at once. Inside a call the work is threaded with OpenMP (omp_set_num_threads
 * or OMP_NUM_THREADS); results do not depend on the thread count.
 */
#ifndef BOLTZATTN_OP_H
#define BOLTZATTN_OP_H

#include "boltzattn.h"

#include <stddef.h>

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------- attention op */

/* What the op computes, all plain ints and doubles (a binding mirrors it
 * as a struct of C ints, doubles and the ba_approx triple {double, double,
 * int}; the enums are C ints). Start from ba_attn_op_default and change
 * what you need. */
typedef struct {
    int B, H, T, d;          /* batch, heads, sequence length, head width: >= 1 */
    int causal;              /* 1: query i sees keys 0..i (the only form the
                                model has; 0 is refused) */
    double scale;            /* factor of q.k in the fields; finite (the
                                default is 1/sqrt(d)) */
    ba_attn attn;            /* boltzmann (default), or softmax, sigmoid,
                                coupling (J only, h = 0) */
    ba_engine engine;        /* auto (band with a band, else fast), reference,
                                fast, band, or the approximate mf, tap, bp,
                                hybrid; ignored by softmax and sigmoid */
    ba_couplings couplings;  /* absolute: J [H,T,T]; relative: J [H,D] */
    int D;                   /* relative couplings: distances 1..D (>= 1);
                                0 with absolute couplings */
    int band;                /* W: couplings of range at most W (farther pairs
                                are 0 and get no gradient); 0 = no band; at
                                most min(T - 1, BA_MAX_BAND) */
    ba_field_bias field_bias; /* none, or log-n (not for softmax) */
    ba_approx approx;        /* mf, tap, bp, hybrid: damping, tol, max_iter */
    int window;              /* hybrid: its exact window (1..BA_MAX_BAND);
                                0 for the other engines */
    int alibi;               /* 1: ALiBi, head h's field of key j for query
                                i gets -m_h (i - j) (m_h the geometric
                                slopes of H heads: 2^(-8/H), 2^(-16/H), ...,
                                interleaved as ALiBi's paper does when H is
                                not a power of 2); 0: none. Every variant */
} ba_attn_op_desc;

/* Boltzmann attention over [B,H,T,d]: causal, scale 1/sqrt(d), auto
 * engine, absolute couplings (D 0), no band, no field bias,
 * ba_approx_default(), window 0, no ALiBi. */
ba_attn_op_desc ba_attn_op_default(int B, int H, int T, int d);

/* BA_OK when desc describes an op the library can run, else the error the
 * forward would return: BA_ERR_ARG naming the field (B, H, T or d below 1,
 * H*d above INT_MAX, B*H*T*T or B*H*T*d beyond what a size_t addresses,
 * causal not 1, alibi not 0 or 1,
 * a non-finite scale, an unknown attn, engine, couplings or field bias, D
 * out of range, a band outside [0, min(T - 1, BA_MAX_BAND)], a band or
 * relative couplings for softmax or sigmoid, the log-n bias for softmax,
 * approximate settings or a hybrid window out of range), BA_ERR_LIMIT with
 * the message the command line gives when T is beyond the engine's limit
 * (2^T states: T <= 26 for fast/auto and 20 for reference without a band;
 * the band engine's T * 2^W cells; BA_MAX_BLOCK for every engine). */
int ba_attn_op_check(const ba_attn_op_desc *desc, char *err);

/* Elements of J (and dJ) desc takes: H*T*T absolute, H*D relative; 0 for
 * softmax and sigmoid (J is then ignored and may be NULL). desc is assumed
 * valid (ba_attn_op_check); 0 for NULL. */
size_t ba_attn_op_j_size(const ba_attn_op_desc *desc);

/* What a backward needs from its forward: for softmax and sigmoid (tiled
 * kernels, linear memory) a copy of out and each query row's log-sum-exp
 * (B*H*T*(d+1) values of the forward's precision); for boltzmann and
 * coupling the attention weights and log-weights (2 B*H*T*T values), the
 * engines' per-head state (the fast engine's kernels); the forward's desc
 * and precision. Buffers are kept and grown across calls. Owned by the caller:
 * ba_attn_op_ctx_free (NULL accepted). BA_ERR_ARG for out NULL,
 * BA_ERR_NOMEM. */
/* The largest |J| the op accepts (BA_ERR_ARG beyond): trained couplings
 * are of order 1-10, and far larger ones overflow the engines' sums. */
#define BA_ATTN_OP_MAX_COUPLING 1e6

typedef struct ba_attn_op_ctx ba_attn_op_ctx;
int ba_attn_op_ctx_new(ba_attn_op_ctx **out, char *err);
void ba_attn_op_ctx_free(ba_attn_op_ctx *ctx);

/* Forward: out [B,H,T,d] (caller owned, overwritten) from q, k, v
 * [B,H,T,d] and J (ba_attn_op_j_size elements; may be NULL for softmax and
 * sigmoid), and keeps in ctx what the backward needs. Arrays are the
 * caller's and only read during the call; out must not overlap an input.
 * Errors: BA_ERR_ARG naming a NULL ctx, desc, q, k, v, J or out, or a bad
 * desc (ba_attn_op_check; BA_ERR_LIMIT for T beyond the engine's limit);
 * BA_ERR_NUMERIC naming the first non-finite value of q, k, v or of a
 * coupling the op reads (by index and coordinates, before anything is
 * computed), a field q.k scale that overflows, or a log-weight an Ising
 * engine could not form (NaN); BA_ERR_ARG naming a coupling the op reads
 * beyond |J| <= BA_ATTN_OP_MAX_COUPLING; BA_ERR_NOMEM.
 * On failure out is unspecified and ctx holds no forward. */
int ba_attn_op_forward_f32(ba_attn_op_ctx *ctx, const ba_attn_op_desc *desc, const float *q,
                           const float *k, const float *v, const float *J, float *out,
                           char *err);
int ba_attn_op_forward_f64(ba_attn_op_ctx *ctx, const ba_attn_op_desc *desc, const double *q,
                           const double *k, const double *v, const double *J, double *out,
                           char *err);

/* Backward of the last forward on ctx, in the same precision, given the
 * same q, k, v and J (the op does not copy them; other values give wrong
 * gradients, not an error) and dout = dL/dout [B,H,T,d]. dq, dk, dv
 * [B,H,T,d] and dJ (ba_attn_op_j_size elements; may be NULL to skip it)
 * are OVERWRITTEN with dL/dq, dL/dk, dL/dv, dL/dJ (add them to your own
 * accumulators yourself); none may overlap an input or each other. dJ is 0
 * on entries that are not couplings (j >= k, beyond the band or the
 * distances). An approximate engine's gradient is that of its fixed point
 * (ba_approx). The context keeps its forward: a second backward of the
 * same forward gives the same gradients.
 * Errors: BA_ERR_ARG naming a NULL ctx, q, k, v, J (Ising attention), dout,
 * dq, dk or dv, a ctx without a forward, or a forward in the other
 * precision; BA_ERR_NUMERIC naming the first non-finite value of dout (by
 * index and coordinates, before anything is computed), a query of Ising
 * attention whose every key is too unlikely to differentiate in double
 * (largest log P(s = +1) below -600: fields below about -300; naming the
 * head, batch, query, key, field and engine), a non-finite gradient an
 * engine returned (naming it), or from an approximate engine's adjoint;
 * BA_ERR_NOMEM. Never a non-finite gradient with BA_OK. On failure the
 * gradients are unspecified. */
int ba_attn_op_backward_f32(ba_attn_op_ctx *ctx, const float *q, const float *k, const float *v,
                            const float *J, const float *dout, float *dq, float *dk, float *dv,
                            float *dJ, char *err);
int ba_attn_op_backward_f64(ba_attn_op_ctx *ctx, const double *q, const double *k,
                            const double *v, const double *J, const double *dout, double *dq,
                            double *dk, double *dv, double *dJ, char *err);

/* The approximate engines' counts (ba_approx_stats) summed over the
 * forwards and backwards run on ctx since it was made or last asked, and
 * zeroed. All zero for the exact engines; zero for NULL. */
ba_approx_stats ba_attn_op_approx_stats_take(ba_attn_op_ctx *ctx);

/* Rotary position embeddings (RoPE) of [B,H,T,d] q or k, in place: at
 * position t0 + t each channel pair (2i, 2i+1) of a head turned by the
 * angle sign * (t0 + t) * 10000^(-2i/d). sign +1 before the op (on q and
 * k); -1 on the op's dq and dk after its backward (the inverse turn, which
 * is the rotation's gradient). The model's --pos-emb rope is this with t0
 * = 0. Returns BA_OK, or BA_ERR_ARG naming the value: x NULL, B, H or T
 * below 1, B*H or t0 + T above INT_MAX, d odd or below 2, t0 negative,
 * sign not +1 or -1. */
int ba_attn_op_rope_f32(int B, int H, int T, int d, int t0, int sign, float *x, char *err);
int ba_attn_op_rope_f64(int B, int H, int T, int d, int t0, int sign, double *x, char *err);

#ifdef __cplusplus
}
#endif

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
