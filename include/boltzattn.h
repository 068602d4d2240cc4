/*
 * boltzattn: Boltzmann attention, exact, in C.
 *
 * Attention whose weights are the spin marginals of an Ising model with
 * learnable pairwise couplings J (see docs/ and the README for the maths).
 *
 * A worked example (tests/test_trainer.c runs it): train a tiny brackets
 * model and read its held-out accuracy.
 *
 *     char err[BA_ERR_LEN];
 *     ba_dataset *data;
 *     if (ba_dataset_brackets(&data, 8, 1, 512, 1234, err)) { puts(err); return 1; }
 *     ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, 8);
 *     ba_config_set_data(&cfg, data);        // vocabulary, head and output sizes
 *     ba_train_settings s = ba_train_settings_default(300);
 *     s.eval_every = s.save_every = 0;      // only the final evaluation
 *     ba_trainer *t;
 *     if (ba_trainer_init(&t, &cfg, data, NULL, &s, err)) { puts(err); return 1; }
 *     ba_train_outcome out;                 // a directory instead of NULL keeps
 *     if (ba_trainer_run(t, NULL, NULL, &out, err)) { puts(err); return 1; } // the files
 *     printf("held-out accuracy %.2f %%\n", 100 * out.final.accuracy);
 *     ba_trainer_free(t);
 *     ba_dataset_free(data);
 *
 * The trainer's API is in boltzattn_train.h, the attention op (the layer
 * alone, on [B,H,T,d] tensors, for frameworks) in boltzattn_op.h; this
 * header includes both. Linking: docs/c-api.md (pkg-config boltzattn,
 * find_package(boltzattn)); this example is examples/train/train_example.c.
 * Below the trainer: ba_trainer_step is one step; ba_model_forward,
 * ba_model_backward and ba_model_step are its parts, for a loop of your own.
 *
 * Conventions
 * - Every public symbol starts with ba_ / BA_.
 * - Functions that can fail return a ba_status (0 = BA_OK) and, on failure,
 *   write a message naming the offending value into `err`, a caller buffer of
 *   at least BA_ERR_LEN bytes (err may be NULL). The library never prints,
 *   never exits and keeps no mutable global state.
 * - Objects come in init/free pairs; free accepts NULL.
 * - Randomness only through an explicit ba_rng passed by pointer.
 * - ba_real is the model's floating type: float in libboltzattn, double in
 *   the test build (compiled with BA_DOUBLE). Checkpoints are always F32.
 *   The Ising engine always works in double.
 */
#ifndef BOLTZATTN_H
#define BOLTZATTN_H

#include <stddef.h>
#include <stdint.h>

/* Everything declared in the public headers is the shared library's
 * interface: libboltzattn.so is compiled with -fvisibility=hidden, and
 * these declarations (only these) are exported. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#ifdef __cplusplus
extern "C" {
#endif

#ifdef BA_DOUBLE
typedef double ba_real;
#else
typedef float ba_real;
#endif

#define BA_VERSION "0.1.0"
#define BA_ERR_LEN 512

/* Largest number of spins the reference (enumeration) engine accepts. */
#define BA_REFERENCE_MAX_SPINS 20
/* Largest number of spins the fast (factorised) engine accepts: its kernels
 * take 2 * 2^n doubles, 1 GiB at n = 26. */
#define BA_FAST_MAX_SPINS 26
/* Largest block size (T) any model accepts: softmax, sigmoid and Ising
 * attention with a band (the band engine) go this far. */
#define BA_MAX_BLOCK 4096
/* Widest band (couplings of range W) the band engine accepts: it carries
 * 2^W window states per key. */
#define BA_MAX_BAND 16
/* Largest charlm data file (1 GiB): the file is held in memory, one byte a
 * token; anything larger, and anything not a regular file, is refused
 * before a byte is read. */
#define BA_MAX_DATA_BYTES 1073741824LL
/* Largest file read whole by ba_read_file (4 GiB): checkpoints, states,
 * batch files, run records. A larger (or sparse, hostile) file is refused
 * from its size before any memory is taken for it. */
#define BA_MAX_FILE_BYTES 4294967296LL

typedef enum {
    BA_OK = 0,
    BA_ERR_ARG = 1,     /* an argument or input value is out of range */
    BA_ERR_IO = 2,      /* a file could not be opened, read or written */
    BA_ERR_FORMAT = 3,  /* a file is malformed or does not match the model */
    BA_ERR_NOMEM = 4,   /* an allocation failed */
    BA_ERR_NUMERIC = 5, /* a non-finite value appeared */
    BA_ERR_LIMIT = 6,   /* the problem is too large for the chosen engine */
    BA_ERR_INTERRUPTED = 7 /* a caller's stop request ended the call early */
} ba_status;

/* A short English name of a status code ("ok", "bad argument", ...). */
const char *ba_status_str(int status);
/* Writes a printf-style message into err (BA_ERR_LEN bytes; may be NULL)
 * and returns status, so code that reports errors the library's way (the
 * library itself, the CLI, bindings) reads `return ba_fail(err,
 * BA_ERR_ARG, "...", ...)`. */
int ba_fail(char *err, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ------------------------------------------------------------------ RNG */

/* xoshiro256** seeded through splitmix64. Plain value type: copy it to fork
 * a stream, store it to resume one. */
typedef struct {
    uint64_t s[4];
} ba_rng;

void ba_rng_seed(ba_rng *r, uint64_t seed);
uint64_t ba_rng_u64(ba_rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
double ba_rng_uniform(ba_rng *r);
/* Uniform integer in [0, n), unbiased; returns 0 when n == 0. */
uint64_t ba_rng_below(ba_rng *r, uint64_t n);
/* Standard normal (Box-Muller, no cached state so the stream stays plain). */
double ba_rng_normal(ba_rng *r);

/* ------------------------------------------------------------ settings */

typedef enum {
    BA_ATTN_SOFTMAX = 0,   /* a = softmax(h) */
    BA_ATTN_SIGMOID = 1,   /* w = sigmoid(2h), a = w / sum w (J = 0 limit) */
    BA_ATTN_BOLTZMANN = 2, /* w = P(s_j = +1) of the Ising model (h + J) */
    BA_ATTN_COUPLING = 3   /* as boltzmann with h = 0 (J only) */
} ba_attn;

/* The built-in tasks (the data, not the model: see ba_data_spec). */
typedef enum { BA_TASK_CHARLM = 0, BA_TASK_BRACKETS = 1, BA_TASK_RECALL = 2 } ba_task;

/* The model's output head. token: logits over out_size classes at every
 * position (next-token prediction). pointer: position i's logits are over
 * the positions 0..i-1 before it (out_size = block_size; later positions are
 * masked), the head of bracket matching. */
typedef enum { BA_HEAD_TOKEN = 0, BA_HEAD_POINTER = 1 } ba_head;

/* Which implementation computes the Ising marginals and their gradients.
 * All compute the same exact quantities: `reference` enumerates every
 * state of every query (the test oracle); `fast` factorises the state
 * space into two halves with a coupling kernel shared by all queries;
 * `band` runs a forward-backward pass along the keys for couplings of
 * range at most W (a config's band), linear in the number of keys; `auto`
 * (the default) is band when the config has a band, else fast
 * (ba_config_engine). */
typedef enum {
    BA_ENGINE_REFERENCE = 0,
    BA_ENGINE_FAST = 1,
    BA_ENGINE_BAND = 2,
    BA_ENGINE_AUTO = 3,
    BA_ENGINE_MF = 4,    /* naive mean field: m = tanh(h + A m) */
    BA_ENGINE_TAP = 5,   /* mean field with the TAP (Onsager) correction */
    BA_ENGINE_BP = 6,    /* loopy belief propagation */
    BA_ENGINE_HYBRID = 7 /* exact inside a window W, mean field beyond it */
} ba_engine;

/* The approximate engines (mf, tap, bp, hybrid) iterate
 * x <- (1 - damping) x + damping F(x) from the J = 0 solution until the
 * undamped step max |F(x) - x| is below tol, at most max_iter sweeps per
 * query (attention row). Defaults (ba_approx_default): damping 0.5, tol
 * 1e-8, max_iter 1000 (at most BA_APPROX_MAX_ITER). Gradients are those of
 * the fixed point, by implicit differentiation (one adjoint solve per row).
 * The policy on non-convergence: a row that has not converged is solved
 * again with a quarter of the damping and four times the sweeps; one that
 * still has not keeps its last iterate as its weights, adds no gradient
 * (a point that is not a fixed point has no implicit gradient), and is
 * counted (ba_model_approx_stats_take, "approx" in the metrics log, a line
 * from the CLI). A diverged adjoint likewise adds nothing and is counted. */
typedef struct {
    double damping; /* in (0, 1] */
    double tol;     /* > 0, finite */
    int max_iter;   /* >= 1 */
} ba_approx;
#define BA_APPROX_MAX_ITER 1000000
ba_approx ba_approx_default(void);
/* BA_OK, or BA_ERR_ARG naming the field out of range. */
int ba_approx_validate(const ba_approx *a, char *err);
/* What the approximate engines did over some rows (attention queries):
 * the forward's sweeps, and the rows retried or left unconverged under the
 * policy above. A backward counts its adjoint solves the same way (sweeps
 * of the adjoint iteration, 1 for a direct solve; unconverged: rows whose
 * forward or adjoint did not converge). */
typedef struct {
    long queries;     /* rows solved */
    long sweeps;      /* sweeps summed over them */
    int max_sweeps;   /* the most one row took */
    long retried;     /* rows solved again with a quarter of the damping */
    long unconverged; /* forward: rows whose last iterate was kept;
                         backward: rows whose forward or adjoint did not
                         converge */
} ba_approx_stats;
/* 1 for the approximate engines (mf, tap, bp, hybrid: BA_ENGINE_CAP_APPROX
 * in the engine table below), 0 otherwise. */
int ba_engine_is_approx(ba_engine e);

/* How a layer's couplings are parameterised. absolute (the paper's): J_jk
 * for every pair of key positions j < k, a (T, T) matrix per head
 * (tensor blocks.{l}.attn.J, shape [H, T, T]). relative: J_jk = r(k - j),
 * one value per distance d = 1..D per head (tensor blocks.{l}.attn.J_rel,
 * shape [H, D], entry d-1 is distance d), D = the band W when set, else
 * T - 1. */
typedef enum { BA_COUPLINGS_ABSOLUTE = 0, BA_COUPLINGS_RELATIVE = 1 } ba_couplings;

/* A constant added to every field of a query with n visible keys. log-n:
 * h_j - (1/2) log n, so that at J = 0 the weight is sigmoid(2h - log n),
 * about e^(2h) / n (the bias of Ramapuram et al. 2024 for sigmoid
 * attention at long context). */
typedef enum { BA_FIELD_BIAS_NONE = 0, BA_FIELD_BIAS_LOG_N = 1 } ba_field_bias;

/* Name <-> value for the enums above. parse returns BA_ERR_ARG on an
 * unknown name and lists the accepted ones in err. */
const char *ba_attn_name(ba_attn a);
int ba_attn_parse(const char *s, ba_attn *out, char *err);
const char *ba_task_name(ba_task t);
int ba_task_parse(const char *s, ba_task *out, char *err);
const char *ba_head_name(ba_head h);
int ba_head_parse(const char *s, ba_head *out, char *err);
const char *ba_engine_name(ba_engine e);
int ba_engine_parse(const char *s, ba_engine *out, char *err);
const char *ba_couplings_name(ba_couplings c);
int ba_couplings_parse(const char *s, ba_couplings *out, char *err);
const char *ba_field_bias_name(ba_field_bias b);
int ba_field_bias_parse(const char *s, ba_field_bias *out, char *err);
/* Position encodings, ba_config.pos_emb: "none" (0), "learned" (1),
 * "rope" (2; rotary embeddings of each head's q and k, pairs of channels
 * turned by t * 10000^(-2i/d)), "alibi" (3; head h's field of key j for
 * query i gets -m_h (i - j), m_h ALiBi's geometric slopes);
 * docs/design.md "Positions". */
typedef enum { BA_POS_NONE = 0, BA_POS_LEARNED = 1, BA_POS_ROPE = 2, BA_POS_ALIBI = 3 } ba_pos_emb;
const char *ba_pos_emb_name(int pos_emb);
int ba_pos_emb_parse(const char *s, int *pos_emb, char *err);
/* The band engine's precision, ba_config.band_f32: "double" (0) or
 * "float" (1). */
const char *ba_band_precision_name(int f32);
int ba_band_precision_parse(const char *s, int *f32, char *err);
/* Largest number of spins (= block size for boltzmann/coupling) an engine
 * accepts for couplings without a band: 20 (reference), 26 (fast and
 * auto), 17 (band: a window of n - 1 spins, at most BA_MAX_BAND). With a
 * band the band engine goes to BA_MAX_BLOCK (ba_config_validate). */
int ba_engine_max_spins(ba_engine e);

/* The model config: everything needed to rebuild a model (shapes,
 * attention variant, engine, sampler, output head), stored in every
 * checkpoint. The struct is defined after the samplers section below,
 * because it holds the model's sampler (a ba_sampler). What the model was
 * trained on is separate: ba_data_spec, with the tasks. */
typedef struct ba_config ba_config;

/* Largest vocabulary and output size of a token head. */
#define BA_MAX_VOCAB 65536

/* Defaults: 1 layer, 1 head, C = 64, FFN on, auto engine, absolute
 * couplings without a band, no field bias, learned position embeddings,
 * exact sampler (ba_sampler_default(BA_SAMPLER_EXACT)), token head.
 * vocab_size and out_size are left 0: set them, or let ba_config_set_data
 * fill them (and the head) from a dataset. */
ba_config ba_config_default(ba_attn attn, int block_size);

/* The engine a model of cfg runs: cfg->engine, except that auto is band
 * when cfg->band > 0 and fast otherwise. */
ba_engine ba_config_engine(const ba_config *cfg);
/* Number of coupling distances D of relative couplings (the band, else
 * block_size - 1); 0 for absolute couplings. */
int ba_config_distances(const ba_config *cfg);

/* BA_OK when cfg describes a buildable model; otherwise names the bad field.
 * Refuses boltzmann/coupling with block_size above the engine's limit, or,
 * when cfg->sampler is not exact, above the sampler's (ba_sampler_max_spins:
 * gibbs and sa go to 64) (BA_ERR_LIMIT; without a band, T > 26 names the
 * band as the way to go further); a non-exact sampler for softmax or
 * sigmoid, a sampler parameter out of range and a pointer head whose
 * out_size is not block_size are BA_ERR_ARG, and so are a band outside
 * [0, min(block_size - 1, BA_MAX_BAND)], a band or relative couplings for
 * softmax or sigmoid, a field bias for softmax (a per-query constant
 * that cancels) and the band engine without a band beyond 17 keys. */
int ba_config_validate(const ba_config *cfg, char *err);

/* BA_OK when the exact engines can run a model of cfg, its sampler set
 * aside: whether a sampled model can also be evaluated with exact
 * inference. Otherwise ba_config_validate's verdict on the exact config
 * (BA_ERR_LIMIT naming the engine's limit). */
int ba_config_check_exact(const ba_config *cfg, char *err);

/* Number of parameters a model of cfg has (0 if cfg is invalid), without
 * allocating it. */
size_t ba_config_num_params(const ba_config *cfg);

/* ------------------------------------------------------------- model */

typedef struct ba_model ba_model;

/* One named parameter tensor of the model (checkpoint layout). */
typedef struct {
    char name[64];
    int ndim;
    int shape[3];
    size_t offset; /* into ba_model_params(), in elements */
    size_t size;   /* elements */
    int decay;     /* 1 if AdamW weight decay applies */
} ba_tensor_info;

/* Allocates a model (parameters, gradients and AdamW moments in one block,
 * all zero; LayerNorm weights 1). Returns BA_ERR_ARG/BA_ERR_LIMIT for a bad
 * config, BA_ERR_NOMEM. *out is owned by the caller: ba_model_free. */
int ba_model_init(ba_model **out, const ba_config *cfg, char *err);
void ba_model_free(ba_model *m);
const ba_config *ba_model_config(const ba_model *m);

/* GPT-2 style initialisation: N(0, 0.02) weights, residual projections
 * scaled by 1/sqrt(2L), zero biases, unit LayerNorm gains. J is zero, or
 * N(0, j_init_std) on its used (j<k) entries when j_init_std > 0. */
void ba_model_init_weights(ba_model *m, ba_rng *rng, double j_init_std);
/* GPT-2's std of the initial weights: ba_model_init_weights' and the
 * trainer's default (ba_train_settings.init_std). */
#define BA_INIT_STD 0.02
/* The same with N(0, init_std) weights (residual projections
 * init_std/sqrt(2L)) in place of 0.02: at 0.02, the same draws bit for bit.
 * A small model may need more than GPT-2's 0.02, whose width it was chosen
 * for (docs/cli.md, "recall"). init_std > 0 (the caller checks: the
 * trainer's settings validate it). */
void ba_model_init_weights_std(ba_model *m, ba_rng *rng, double init_std, double j_init_std);

size_t ba_model_num_params(const ba_model *m);
ba_real *ba_model_params(ba_model *m); /* (P) owned by the model */
ba_real *ba_model_grads(ba_model *m);  /* (P) owned by the model */
/* AdamW state: first and second moments (P each) and the step count. */
ba_real *ba_model_adam_m(ba_model *m);
ba_real *ba_model_adam_v(ba_model *m);
int ba_model_num_tensors(const ba_model *m);
/* Fills info for tensor idx in checkpoint order; BA_ERR_ARG if idx is out
 * of range. */
int ba_model_tensor(const ba_model *m, int idx, ba_tensor_info *info);
/* Index of a tensor by name, or -1. */
int ba_model_find_tensor(const ba_model *m, const char *name);

/* A new model *out (caller owned: ba_model_free) equal to m but for its
 * block size (context length) T2 = block_size, with m's parameters (not
 * its gradients or AdamW moments), step count and sampler RNG: to evaluate
 * a model at another length. A shorter T2 keeps the leading rows of
 * pos_emb and J (the model on its first T2 positions). A longer T2 needs a
 * model whose parameters do not depend on T: token head, no position
 * embeddings (pos_emb 0) and, for Ising attention, relative couplings with
 * a band (distances 1..W at any T). BA_ERR_ARG naming the reason
 * otherwise, BA_ERR_LIMIT when T2 is beyond the engine's limits, as
 * ba_config_validate; BA_ERR_NOMEM. */
int ba_model_resize(const ba_model *m, int block_size, ba_model **out, char *err);

/* Forward pass over a batch. inputs and targets are (B,T) token ids / target
 * ids, T <= block_size; targets may be NULL (no loss) and -1 marks a
 * position without target. For brackets a target at position i must lie in
 * [0, i). On success *loss (may be NULL) is the mean cross-entropy over the
 * positions with a target (0 when there are none). Activations are kept for
 * ba_model_backward; buffers grow as needed. Errors: BA_ERR_ARG naming a bad
 * token, target or size; BA_ERR_NOMEM; BA_ERR_NUMERIC for a non-finite loss
 * or attention input, naming the first tensor holding a non-finite value (a
 * parameter, else the first activation in forward order). */
int ba_model_forward(ba_model *m, const int *inputs, const int *targets,
                     int B, int T, double *loss, char *err);
/* Logits of the last forward, (B,T,out_size); masked pointer positions
 * hold -INFINITY. Valid until the next forward. */
const ba_real *ba_model_logits(const ba_model *m);
/* Attention weights of the last forward for layer l: (B,H,T,T), row i holds
 * a_ij for j <= i and 0 above; valid until the next forward. NULL if l is
 * out of range, or (softmax and sigmoid, whose tiled forward keeps no
 * weights) if the model cannot allocate the buffer it recomputes every
 * layer's weights into at the first call after a forward: so a call may
 * write inside the model, and two threads must not call it on one model
 * at once. */
const ba_real *ba_model_attention(const ba_model *m, int l);

/* The fields h_ij = q_i . k_j / sqrt(d) of query i (j = 0..i) of batch
 * element b in layer l, head `head`, from the last forward: h gets i+1
 * values (caller owned). With the layer's couplings (tensor
 * "blocks.{l}.attn.J") they define query i's Ising system, e.g. to
 * measure a sampler on the instances a model actually meets. BA_ERR_ARG if
 * no forward has run or an index is out of range. */
int ba_model_fields(const ba_model *m, int l, int head, int b, int i, double *h, char *err);
/* The approximate engines' counts (ba_approx_stats) summed over every
 * forward and backward since the last call or the model's creation, and
 * starts them again from zero. All zero for the other engines. */
ba_approx_stats ba_model_approx_stats_take(ba_model *m);
/* Number of positions with a target in the last forward. */
long ba_model_num_targets(const ba_model *m);
void ba_model_zero_grad(ba_model *m);
/* Backward pass of the last forward (which must have had targets);
 * accumulates d(loss)/d(params) into the gradients. */
int ba_model_backward(ba_model *m, char *err);

typedef struct {
    double beta1, beta2, eps;
    double weight_decay; /* decoupled; only tensors with decay = 1 */
    double grad_clip;    /* global L2 norm; <= 0 disables */
} ba_adamw;

/* beta1 0.9, beta2 0.99, eps 1e-8, weight decay 0.1, clip 1.0. */
ba_adamw ba_adamw_default(void);

/* One AdamW update with learning rate lr from the accumulated gradients,
 * after clipping their global norm. *grad_norm (may be NULL) gets the norm
 * before clipping. BA_ERR_NUMERIC (and no update at all) if a gradient is
 * not finite, or if the update would make a parameter or an AdamW moment
 * non-finite or too large for ba_real, naming the tensor: parameters and
 * moments stay finite whatever the rate. */
int ba_model_step(ba_model *m, const ba_adamw *opt, double lr,
                  double *grad_norm, char *err);
/* Number of AdamW steps taken (bias correction uses it). */
long ba_model_step_count(const ba_model *m);
void ba_model_set_step_count(ba_model *m, long t);

/* Linear warmup over `warmup` steps to lr_max, then cosine decay to lr_min
 * at step `total`. step counts from 0. */
double ba_lr_schedule(long step, long total, long warmup, double lr_max,
                      double lr_min);

/* The Ising engines by number (the engine table, one system's marginals
 * and backward), the samplers (boltzattn_samplers.h) and sampled
 * attention live in boltzattn_ising.h, read here: the model config below
 * holds a ba_sampler. */
#include "boltzattn_ising.h"

/* The model config (ba_config, in the settings section above). */
struct ba_config {
    ba_attn attn;
    ba_engine engine;
    int n_layer;
    int n_head;
    int n_embd;     /* C, divisible by n_head */
    int block_size; /* T: longest context, also the pointer-head width */
    int vocab_size; /* V: input tokens, at most BA_MAX_VOCAB */
    ba_head head;   /* token or pointer logits */
    int out_size;   /* logits per position: classes of a token head (V for a
                       language model), block_size for a pointer head */
    int ffn;        /* 1: blocks have the MLP, 0: attention only */
    int pos_emb;    /* ba_pos_emb. BA_POS_LEARNED (1): learned position
                       embeddings (tensor pos_emb, (T, C)); BA_POS_NONE (0):
                       none, the model knows positions only through the
                       causal mask and relative couplings; BA_POS_ROPE (2):
                       rotary embeddings of q and k (no parameters). All
                       but learned can run a model at a longer T than it
                       was trained at */
    /* Ising attention only (boltzmann/coupling): */
    ba_couplings couplings; /* absolute or relative */
    int band;               /* W: couplings of range at most W (J_jk = 0, not a
                               parameter, for k - j > W); 0 = no band */
    ba_field_bias field_bias; /* sigmoid, boltzmann, coupling */
    /* approximate engines (engine mf, tap, bp, hybrid): their iteration,
     * and hybrid's exact window W (1..BA_MAX_BAND; 0 for the other
     * engines): couplings of range at most W are treated exactly (the band
     * engine), farther ones by mean field; the couplings themselves are
     * full range (band 0) */
    ba_approx approx;
    int window;
    /* sampled attention (boltzmann/coupling only): BA_SAMPLER_EXACT (the
     * default) uses the exact engine; any other kind draws shots */
    ba_sampler sampler;
    /* the band engine's window term in float32 (issue 42; config
     * "band_precision": "float", --band-precision float): 1 runs each
     * query whose dynamic range float holds on the float linear path,
     * the others in double as before; 0 (the default): double throughout.
     * Only for an exact Ising model the band engine runs
     * (ba_config_validate refuses it elsewhere, where it would do
     * nothing). Last, so positional initialisers keep their meaning. */
    int band_f32;
};

/* ------------------------------------------------------------- tasks */

typedef struct ba_dataset ba_dataset;

/* What a model was trained on: the task and its parameters, enough to
 * rebuild the evaluation data. Checkpoints store it beside the config. */
typedef struct {
    ba_task task;
    int vocab_size;     /* charlm: entries of vocab; 0 for brackets */
    uint8_t vocab[256]; /* charlm: token id -> byte */
    int kinds;          /* brackets: bracket kinds (the model's vocab is 2*kinds) */
    int n_heldout;      /* brackets, recall: requested held-out set size */
    uint64_t data_seed; /* brackets, recall: seed of the held-out set */
    int recall_vocab;   /* recall: vocabulary V (keys 0..V/2-1, values V/2..V-1) */
    int pairs;          /* recall: key-value pairs N of the context */
    int max_depth;      /* brackets: nesting depth cap, 0 = none (uniform over all) */
} ba_data_spec;

/* Defaults for task: kinds 1, n_heldout 2000, data_seed 1234, no vocab,
 * recall_vocab 64, pairs 8. */
ba_data_spec ba_data_spec_default(ba_task task);
/* BA_OK when spec is well formed and can feed a model of cfg (the head and
 * the sizes the task needs), else BA_ERR_ARG naming the mismatch. */
int ba_data_spec_check(const ba_data_spec *spec, const ba_config *cfg, char *err);

/* charlm over a UTF-8 text file, modelled byte by byte (a multi-byte
 * character is several tokens). vocab == NULL: the vocabulary is the sorted
 * distinct bytes of the file. Otherwise the file is encoded with the given
 * vocabulary (from a checkpoint) and a byte outside it is BA_ERR_FORMAT
 * naming the byte and its offset. First 90 % train, last 10 % validation.
 * block_size T: training windows are T+1 bytes; validation uses the
 * non-overlapping windows starting at 0, T, 2T, ... of the validation split.
 * Errors: BA_ERR_IO (missing, unreadable, or not a regular file: a
 * device or a FIFO is refused before anything is read), BA_ERR_LIMIT
 * (above BA_MAX_DATA_BYTES), BA_ERR_FORMAT (empty, too small for T, a NUL
 * byte, invalid UTF-8: a stray continuation byte, an overlong form, a
 * surrogate, a code point above U+10FFFF, a truncated sequence, a byte
 * 0xF8-0xFF; a byte outside the given vocabulary). Messages name the
 * offset and the kind of problem, never the file's bytes: the path may
 * come from a checkpoint rather than the user. */
int ba_dataset_charlm(ba_dataset **out, const char *path, const uint8_t *vocab,
                      int vocab_size, int block_size, char *err);

/* brackets: valid prefixes of length T over `kinds` bracket kinds, drawn
 * uniformly. The held-out set holds min(n_heldout, 20 % of all prefixes)
 * distinct sequences chosen by data_seed; training batches never contain
 * one of them. Token 2k opens kind k, 2k+1 closes it. Where the number of
 * prefixes fits 64 bits (T <= 67, 41, 32, 27 for 1-4 kinds) the draws are
 * exactly uniform, from integer counts, and the same as ever; beyond, each
 * step opens with a probability from a double-precision DP, uniform up to
 * double rounding (docs/design.md "Brackets"). BA_ERR_ARG for kinds
 * outside [1, 4], T outside [1, ba_brackets_max_T(kinds)] (4096),
 * n_heldout < 1, too few prefixes for a held-out set, or a held-out set
 * without a closing bracket (nothing to score: T = 2 can draw "(("). */
int ba_dataset_brackets(ba_dataset **out, int T, int kinds, int n_heldout,
                        uint64_t data_seed, char *err);
/* ba_dataset_brackets over the prefixes of nesting depth <= max_depth
 * only, uniformly (max_depth 0: no cap, the same data as
 * ba_dataset_brackets). Uncapped prefixes reach a depth of about sqrt(T)
 * (ba_dataset_depth_stats). BA_ERR_ARG also for max_depth < 0 and for a
 * cap that leaves fewer than 2 prefixes (max_depth 1 with one kind). */
int ba_dataset_brackets_capped(ba_dataset **out, int T, int kinds, int max_depth,
                               int n_heldout, uint64_t data_seed, char *err);
/* recall: multi-query associative recall (MQAR, Arora et al. 2023) over a
 * vocabulary of `vocab` tokens, keys 0..vocab/2-1 and values
 * vocab/2..vocab-1. A sequence of length T starts with `pairs` pairs
 * "k v" (distinct keys drawn without replacement, values uniform with
 * replacement); the remaining T - 2*pairs positions are query pairs "k v"
 * repeating the context's keys, each round a fresh random permutation of
 * them, cut off at T (when T - 2*pairs is odd the last query is its key
 * alone). The target at each query key is its value, -1 elsewhere; the
 * model has a token head over the vocabulary. The held-out set holds
 * min(n_heldout, 20 % of all sequences, at least 1) distinct sequences
 * chosen by data_seed; training batches never contain one of them.
 * BA_ERR_ARG naming the value for vocab odd or outside [4, 256], pairs
 * outside [1, vocab/2], T outside [4*pairs, BA_MAX_BLOCK] (at least as
 * many query pairs as context pairs), or n_heldout < 1. */
int ba_dataset_recall(ba_dataset **out, int T, int vocab, int pairs, int n_heldout,
                      uint64_t data_seed, char *err);
void ba_dataset_free(ba_dataset *d);

ba_task ba_dataset_task(const ba_dataset *d);
int ba_dataset_block_size(const ba_dataset *d);
int ba_dataset_vocab_size(const ba_dataset *d);
/* charlm: token id -> byte table (vocab_size entries); NULL for brackets
 * and recall. */
const uint8_t *ba_dataset_vocab(const ba_dataset *d);
/* Sets what the data decides in cfg: block size, vocab_size, head and
 * out_size (token head over the vocabulary for charlm and recall, pointer
 * head for brackets). */
void ba_config_set_data(ba_config *cfg, const ba_dataset *d);
/* The data description of d (task, vocabulary, kinds, recall vocabulary
 * and pairs, held-out size and seed) into spec. */
void ba_dataset_spec(const ba_dataset *d, ba_data_spec *spec);

/* One training batch (B,T) of inputs and targets (-1 = none), drawn with
 * rng. */
void ba_dataset_train_batch(const ba_dataset *d, ba_rng *rng, int B,
                            int *inputs, int *targets);
/* Number of evaluation items (validation windows or held-out sequences). */
int ba_dataset_num_eval(const ba_dataset *d);
/* Evaluation item idx (0 <= idx < num_eval) as (T) inputs and targets. */
void ba_dataset_eval_item(const ba_dataset *d, int idx, int *inputs,
                          int *targets);
/* Sizes of the splits in bytes (charlm: train and validation) or sequences
 * (brackets: valid prefixes left for training, i.e. all minus the held-out
 * ones, UINT64_MAX for 2^64 or more, and the held-out count; recall: the
 * same over its sequences). */
void ba_dataset_sizes(const ba_dataset *d, uint64_t *train, uint64_t *eval);
/* charlm: the text's size in bytes and its 64-bit FNV-1a hash (of the
 * file's bytes, so any tool can recompute it); training records them, and
 * a resumed run refuses other data. 0 and 0 for brackets and recall, whose
 * data the spec's seed and sizes determine. */
void ba_dataset_fingerprint(const ba_dataset *d, uint64_t *bytes, uint64_t *hash);
/* brackets: the best accuracy a predictor using only the position of each
 * ')' can reach on the held-out set; recall: chance, 2/V (a uniform guess
 * among the V/2 values); -1 for charlm. */
double ba_dataset_position_baseline(const ba_dataset *d);
/* brackets: the deepest nesting of each held-out sequence, its mean over
 * the set (*mean_max) and its largest (*max); -1 and -1 for other tasks.
 * Either pointer may be NULL. */
void ba_dataset_depth_stats(const ba_dataset *d, double *mean_max, int *max);

/* Number of valid bracket prefixes of length T with `kinds` kinds
 * (saturates at UINT64_MAX). */
uint64_t ba_brackets_count(int T, int kinds);
/* The largest T brackets data accepts with kinds kinds: 4096
 * (BA_MAX_BLOCK) for kinds in [1, 4], 0 outside. (The counts fit 64 bits,
 * and the draws are exact, up to T = 67, 41, 32, 27 for 1-4 kinds.) */
int ba_brackets_max_T(int kinds);

/* Encodes a byte string with a charlm vocabulary; BA_ERR_ARG naming the
 * first byte outside it. out holds len ids. */
int ba_encode_text(const uint8_t *vocab, int vocab_size, const char *text,
                   size_t len, int *out, char *err);

typedef struct {
    double loss;     /* mean cross-entropy over targets */
    double ppl;      /* exp(loss) */
    double accuracy; /* argmax == target, over targets */
    long n_targets;
    int n_items;
} ba_eval_result;

/* Evaluates the model on the first max_items evaluation items (0 = all, or
 * an evenly spaced deterministic subset when max_items < num_eval), B at a
 * time, with the model's current sampler (ba_model_set_sampler). A sampled
 * model draws its shots from the sampler RNG reseeded with
 * BA_EVAL_SAMPLER_SEED, and the RNG's previous state is restored on return:
 * the result is reproducible and the training stream is not perturbed. */
int ba_evaluate(ba_model *m, const ba_dataset *d, int max_items, int B,
                ba_eval_result *res, char *err);
/* ba_evaluate with a tick, called after every batch with the items done
 * and the total (for a progress line); a non-zero return stops early and
 * the result covers the items done (res->n_items). With no targets at all
 * (n_targets 0) loss, ppl and accuracy are NAN, never a score. */
int ba_evaluate_ex(ba_model *m, const ba_dataset *d, int max_items, int B,
                   int (*tick)(int done, int total, void *user), void *user,
                   ba_eval_result *res, char *err);

/* -------------------------------------------------------- statistics */

/* n values summarised: mean, sample standard deviation (n-1), and the
 * half-width of the 95 % confidence interval of the mean (Student t,
 * t_{0.975, n-1} sd / sqrt n). sd and ci95 are NAN when n < 2, mean when
 * n < 1. */
typedef struct {
    int n;
    double mean, sd, ci95;
} ba_summary;

ba_summary ba_summarize(const double *x, int n);
/* The paired difference a_i - b_i summarised (work holds n doubles). */
ba_summary ba_paired_diff(const double *a, const double *b, int n, double *work);
/* Values summarised as they come (Welford): count, mean, min, max and the
 * sample standard deviation (0 for fewer than two values). Start from a
 * zeroed struct. */
typedef struct {
    long n;
    double mean, m2, min, max;
} ba_running;
void ba_running_add(ba_running *s, double x);
double ba_running_sd(const ba_running *s);
/* The 0.975 quantile of Student's t with df degrees of freedom (NAN if
 * df < 1): a table to 30, a Cornish-Fisher expansion beyond. */
double ba_t975(int df);

/* ---------------------------------------------------------------- io */

/* Safetensors dtypes this library reads and writes. */
typedef enum { BA_DT_F32 = 0, BA_DT_I32 = 1, BA_DT_F64 = 2 } ba_dtype;

typedef struct {
    char name[128];
    ba_dtype dtype;
    int ndim;
    int64_t shape[8];
    size_t nbytes;
    const void *data; /* little-endian bytes inside the loaded file; may be
                       * unaligned, so read values with memcpy */
} ba_st_tensor;

typedef struct ba_st ba_st;

/* Reads and validates a whole safetensors file (header length, JSON,
 * dtypes, shapes, offsets against the file size). BA_ERR_IO / BA_ERR_FORMAT
 * naming the problem. Caller frees with ba_st_free. */
int ba_st_read(ba_st **out, const char *path, char *err);
void ba_st_free(ba_st *st);
int ba_st_count(const ba_st *st);
const ba_st_tensor *ba_st_get(const ba_st *st, int idx);
const ba_st_tensor *ba_st_find(const ba_st *st, const char *name);
/* A string value of __metadata__, or NULL. Owned by st. */
const char *ba_st_metadata(const ba_st *st, const char *key);

/* A tensor to write. data points to ndim-shaped host values of dtype. */
typedef struct {
    const char *name;
    ba_dtype dtype;
    int ndim;
    int64_t shape[8];
    const void *data;
} ba_st_entry;

/* Writes a safetensors file with the entries in order and string metadata
 * pairs (keys/vals may be NULL when n_meta is 0). BA_ERR_IO on failure. */
int ba_st_write(const char *path, const ba_st_entry *entries, int n,
                const char *const *meta_keys, const char *const *meta_vals,
                int n_meta, char *err);

/* The config and, when spec is not NULL, the data description as one JSON
 * object string (malloc'd, caller frees), and back. from_json validates
 * with ba_config_validate and, when the object names a task, with
 * ba_data_spec_check; spec (may be NULL) receives the data description, and
 * a config without "task" is then BA_ERR_FORMAT. A config without "head"
 * (written before heads were named) has the head its task implies. The
 * sampler is the object
 * "sampler": {"kind": NAME} for exact, with every parameter of ba_sampler
 * (shots, beta_assumed, tau, gamma, lambda, trotter_steps, order, chains,
 * burnin, thin, sweeps, beta0) otherwise. A config without "sampler" reads
 * as exact (older checkpoints); in one that has it, "kind" is required, a
 * missing parameter takes ba_sampler_default(kind)'s value, a malformed
 * one is BA_ERR_FORMAT naming "sampler.FIELD", and an out-of-range one
 * BA_ERR_FORMAT with ba_sampler_validate's message (naming the parameter). */
char *ba_config_to_json(const ba_config *cfg, const ba_data_spec *spec);
int ba_config_from_json(const char *json, ba_config *cfg, ba_data_spec *spec, char *err);

/* Saves the model's parameters as F32 with the config (and the data
 * description spec, may be NULL) in __metadata__ ("config"), plus optional
 * extra metadata pairs (e.g. "step"), atomically (ba_write_file). */
int ba_checkpoint_save(const char *path, const ba_model *m, const ba_data_spec *spec,
                       const char *const *meta_keys,
                       const char *const *meta_vals, int n_meta, char *err);
/* Saves a checkpoint from values held outside the library (the Python
 * package's models): config_json is a checkpoint's "config" object (with
 * its task and data description, as ba_config_to_json writes it), and
 * tensors i < n_tensors are named names[i], of ndims[i] <= 3 dimensions
 * shapes[3 i .. 3 i + ndims[i] - 1], with the F32 values data[i]
 * (row-major). Every tensor of the config's model must be given exactly
 * once with its shape, and no other; the values must be finite, and the
 * couplings zero past the band, as ba_checkpoint_load requires. The file is
 * then written by ba_checkpoint_save (so through ba_write_file), with the
 * optional metadata pairs. BA_ERR_FORMAT for a bad config, BA_ERR_ARG
 * naming a missing, unknown or misshapen tensor, BA_ERR_NUMERIC, BA_ERR_IO,
 * BA_ERR_NOMEM; path is not touched on any error. */
int ba_checkpoint_save_tensors(const char *path, const char *config_json, int n_tensors,
                               const char *const *names, const int *ndims, const int *shapes,
                               const float *const *data, const char *const *meta_keys,
                               const char *const *meta_vals, int n_meta, char *err);
/* Loads a checkpoint into a new model (*out, caller frees) and its data
 * description into spec (may be NULL; a checkpoint without a task is then
 * BA_ERR_FORMAT). Every tensor is checked against the config's names and
 * shapes; values must be finite. BA_ERR_IO, BA_ERR_FORMAT naming the
 * tensor or field. */
int ba_checkpoint_load(const char *path, ba_model **out, ba_data_spec *spec, char *err);

/* Replaces the file at path with len bytes atomically: they are written to
 * PATH.<pid>.tmp in the same directory, flushed and fsync'ed, and renamed
 * over path, so a crash leaves the old file or the new one, never a mix.
 * Every file the library writes goes through it. BA_ERR_IO naming the
 * file, also when path exists and is not a regular file (a device such as
 * /dev/null, a FIFO, a directory): such a target is never replaced. */
int ba_write_file(const char *path, const void *data, size_t len, char *err);
/* Reads the whole regular file at path into *out (malloc'd, caller frees;
 * one NUL byte appended past *size, so text reads as a string). BA_ERR_IO
 * for a missing, unreadable or non-regular file (a directory or a FIFO is
 * refused, not waited on) or one above BA_MAX_FILE_BYTES, BA_ERR_NOMEM. */
int ba_read_file(const char *path, unsigned char **out, size_t *size, char *err);

/* Batch file: safetensors with inputs I32 (B,T) and targets I32 (B,T).
 * load allocates *inputs and *targets (caller frees). */
int ba_batch_save(const char *path, const int *inputs, const int *targets,
                  int B, int T, char *err);
int ba_batch_load(const char *path, int **inputs, int **targets, int *B,
                  int *T, char *err);
/* A batch checked against the model of cfg before it is used: T, every
 * token, every target (-1 for none; a pointer head's must point at an
 * earlier position), at least one target. BA_ERR_ARG naming the first bad
 * value by its batch row and position. */
int ba_batch_check(const ba_config *cfg, const int *inputs, const int *targets, int B, int T,
                   char *err);
/* Gradient file: "loss" F32 [1] and one F32 tensor per parameter with the
 * parameter's name and shape, from ba_model_grads. */
int ba_grads_save(const char *path, const ba_model *m, double loss,
                  char *err);

#ifdef __cplusplus
}
#endif

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

/* The training layer (ba_trainer, its settings, records and run records)
 * and the attention op (tensors [B,H,T,d] in float or double, forward and
 * backward with a caller-owned context) live in their own headers; this
 * one brings them in, so one include serves. */
#include "boltzattn_train.h"
#include "boltzattn_op.h"

#endif
