/* The decoder-only transformer (spec section 5): its parameters, forward
 * and backward.
 *
 * Parameters are stacked by kind across layers (e.g. all L ln1 weights in
 * one (L,C) array) inside one contiguous block; gradients and the two AdamW
 * moments are laid out identically right after it, so the whole training
 * state is four equal slices of one allocation. ba_param_sizes() is the single
 * place that defines that layout. */
#include "model/model.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Activations, all sized for B*T rows of the current batch. */
enum {
    A_ENC,      // (B,T,C) token + position embedding
    A_LN1,      // (L,B,T,C)
    A_LN1M,     // (L,B,T)
    A_LN1R,     // (L,B,T)
    A_QKV,      // (L,B,T,3C)
    A_ATTY,     // (L,B,T,C) attention output before the projection
    A_ATT,      // (L,B,H,T,T) normalised weights; none for the tiled variants
    A_PRE,      // (L,B,H,T,T) log-weights l; tiled: (L,B,H,T) row log-sum-exp
    A_ATTPROJ,  // (L,B,T,C)
    A_RES2,     // (L,B,T,C) residual after attention
    A_LN2,      // (L,B,T,C)
    A_LN2M,     // (L,B,T)
    A_LN2R,     // (L,B,T)
    A_FCH,      // (L,B,T,4C)
    A_FCHG,     // (L,B,T,4C) after GELU
    A_FCPROJ,   // (L,B,T,C)
    A_RES3,     // (L,B,T,C) residual after the FFN
    A_LNF,      // (B,T,C)
    A_LNFM,     // (B,T)
    A_LNFR,     // (B,T)
    A_LOGITS,   // (B,T,O)
    A_PROBS,    // (B,T,O)
    NUM_A
};

/* Scratch gradients of activations for one layer at a time. */
enum { G_X, G_LN, G_ATTY, G_QKV, G_FCH, G_FCHG, G_LOGITS, NUM_G };

struct ba_model {
    ba_config cfg;
    size_t psize[BA_NUM_P];
    size_t poff[BA_NUM_P];
    size_t nparams;
    ba_real *mem; /* (4P): params | grads | adam m | adam v */
    int ntensors;
    ba_tensor_info *tensors; /* (ntensors) named views, checkpoint order */
    long step;
    /* activations */
    int B, T;       /* shape of the last forward */
    size_t cap_bt;  /* rows the activation buffers were sized for */
    ba_real *acts;
    size_t aoff[NUM_A];
    ba_real *gacts;
    size_t goff[NUM_G];
    int *inputs, *targets; /* (B,T) copies of the last batch */
    ba_engine_ctx **ectx;  /* (L*H) engine state of each attention head */
    ba_sample_ctx **sctx;  /* (L*H) shots of each head's last sampled forward */
    ba_rng srng;           /* the sampler RNG (ba_model_sampler_rng) */
    long n_targets;
    int has_targets;
    ba_approx_stats astats; /* the approximate engines' counts since the last take */
    ba_stop stop;           /* the caller's stop request (ba_model_set_stop) */
    ba_real *attw;          /* (L,B,H,T,T) tiled weights, ba_model_attention's cache */
    size_t attw_cap;
    int attw_ok;            /* attw holds the last forward's weights */
};

static int is_ising(ba_attn a) { return a == BA_ATTN_BOLTZMANN || a == BA_ATTN_COUPLING; }

static void act_sizes(const ba_config *c, size_t BT, size_t *sz)
{
    size_t L = c->n_layer, C = c->n_embd, H = c->n_head, T = c->block_size;
    size_t F = c->ffn ? 4 * C : 0;
    size_t ffc = c->ffn ? C : 0;
    sz[A_ENC] = BT * C;
    sz[A_LN1] = L * BT * C;
    sz[A_LN1M] = L * BT;
    sz[A_LN1R] = L * BT;
    sz[A_QKV] = L * BT * 3 * C;
    sz[A_ATTY] = L * BT * C;
    int tl = ba_model_attn_tiled(c);
    sz[A_ATT] = tl ? 0 : L * BT * H * T; /* B*H*T*T <= BT*H*Tmax */
    sz[A_PRE] = tl ? L * BT * H : L * BT * H * T;
    sz[A_ATTPROJ] = L * BT * C;
    sz[A_RES2] = L * BT * C;
    sz[A_LN2] = L * BT * ffc;
    sz[A_LN2M] = c->ffn ? L * BT : 0;
    sz[A_LN2R] = c->ffn ? L * BT : 0;
    sz[A_FCH] = L * BT * F;
    sz[A_FCHG] = L * BT * F;
    sz[A_FCPROJ] = L * BT * ffc;
    sz[A_RES3] = L * BT * ffc;
    sz[A_LNF] = BT * C;
    sz[A_LNFM] = BT;
    sz[A_LNFR] = BT;
    sz[A_LOGITS] = BT * c->out_size;
    sz[A_PROBS] = BT * c->out_size;
}

static void gact_sizes(const ba_config *c, size_t BT, size_t *sz)
{
    size_t C = c->n_embd, F = c->ffn ? 4 * C : 0;
    sz[G_X] = BT * C;
    sz[G_LN] = BT * C;
    sz[G_ATTY] = BT * C;
    sz[G_QKV] = BT * 3 * C;
    sz[G_FCH] = BT * F;
    sz[G_FCHG] = BT * F;
    sz[G_LOGITS] = BT * c->out_size;
}

static int walk_tensors(const ba_model *m, int idx, ba_tensor_info *info);

int ba_model_init(ba_model **out, const ba_config *cfg, char *err)
{
    int rc = ba_config_validate(cfg, err);
    if (rc)
        return rc;
    ba_model *m = calloc(1, sizeof *m);
    if (!m)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the model");
    m->cfg = *cfg;
    ba_param_sizes(cfg, m->psize);
    size_t off = 0;
    for (int i = 0; i < BA_NUM_P; i++) {
        m->poff[i] = off;
        off += m->psize[i];
    }
    m->nparams = off;
    size_t bytes;
    if (ba_mul_size(off, 4 * sizeof(ba_real), &bytes) || !(m->mem = calloc(1, bytes))) {
        free(m);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate %zu parameters", off);
    }
    int nt = walk_tensors(m, -1, NULL);
    m->tensors = malloc(sizeof(ba_tensor_info) * (size_t)nt);
    if (!m->tensors) {
        free(m->mem);
        free(m);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the tensor table");
    }
    for (int i = 0; i < nt; i++)
        walk_tensors(m, i, &m->tensors[i]);
    m->ntensors = nt;
    if (is_ising(cfg->attn)) {
        size_t nctx = (size_t)cfg->n_layer * cfg->n_head;
        m->ectx = calloc(nctx, sizeof *m->ectx);
        for (size_t i = 0; m->ectx && i < nctx; i++)
            if (!(m->ectx[i] = ba_engine_ctx_new())) {
                ba_model_free(m);
                return ba_fail(err, BA_ERR_NOMEM, "cannot allocate engine contexts");
            }
        if (!m->ectx) {
            ba_model_free(m);
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate engine contexts");
        }
        /* Sample contexts exist whatever the sampler, since
         * ba_model_set_sampler may switch to one later; empty ones are a
         * few bytes. */
        m->sctx = calloc(nctx, sizeof *m->sctx);
        for (size_t i = 0; m->sctx && i < nctx; i++)
            if (!(m->sctx[i] = ba_sample_ctx_new())) {
                ba_model_free(m);
                return ba_fail(err, BA_ERR_NOMEM, "cannot allocate sample contexts");
            }
        if (!m->sctx) {
            ba_model_free(m);
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate sample contexts");
        }
    }
    ba_rng_seed(&m->srng, BA_SAMPLER_RNG_DEFAULT_SEED);
    /* LayerNorm gains start at 1 so a fresh model is a well-defined identity
     * normaliser even before ba_model_init_weights. */
    ba_real *p = m->mem;
    int lnw[] = {BA_P_LN1W, BA_P_LN2W, BA_P_LNFW};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < m->psize[lnw[k]]; i++)
            p[m->poff[lnw[k]] + i] = 1;
    *out = m;
    return BA_OK;
}

void ba_model_free(ba_model *m)
{
    if (!m)
        return;
    if (m->ectx)
        for (int i = 0; i < m->cfg.n_layer * m->cfg.n_head; i++)
            ba_engine_ctx_free(m->ectx[i]);
    free(m->ectx);
    if (m->sctx)
        for (int i = 0; i < m->cfg.n_layer * m->cfg.n_head; i++)
            ba_sample_ctx_free(m->sctx[i]);
    free(m->sctx);
    free(m->mem);
    free(m->tensors);
    free(m->acts);
    free(m->gacts);
    free(m->inputs);
    free(m->targets);
    free(m->attw);
    free(m);
}

const ba_config *ba_model_config(const ba_model *m) { return &m->cfg; }
size_t ba_model_num_params(const ba_model *m) { return m->nparams; }
ba_real *ba_model_params(ba_model *m) { return m->mem; }
const size_t *ba_model_param_offsets(const ba_model *m) { return m->poff; }
const size_t *ba_model_param_kind_sizes(const ba_model *m) { return m->psize; }
ba_real *ba_model_grads(ba_model *m) { return m->mem + m->nparams; }
ba_real *ba_model_adam_m(ba_model *m) { return m->mem + 2 * m->nparams; }
ba_real *ba_model_adam_v(ba_model *m) { return m->mem + 3 * m->nparams; }
long ba_model_step_count(const ba_model *m) { return m->step; }
void ba_model_set_step_count(ba_model *m, long t) { m->step = t; }
ba_rng *ba_model_sampler_rng(ba_model *m) { return &m->srng; }
long ba_model_num_targets(const ba_model *m) { return m->n_targets; }

int ba_model_set_sampler(ba_model *m, const ba_sampler *s, char *err)
{
    if (!m || !s)
        return ba_fail(err, BA_ERR_ARG, "ba_model_set_sampler: model and sampler are required");
    ba_config c = m->cfg;
    c.sampler = *s;
    c.band_f32 = s->kind == BA_SAMPLER_EXACT ? c.band_f32 : 0; /* shots run no band engine */
    int rc = ba_config_validate(&c, err);
    if (rc)
        return rc;
    m->cfg.sampler = *s, m->cfg.band_f32 = c.band_f32;
    /* The saved activations (and shots) belong to the old sampler. */
    m->has_targets = 0;
    return BA_OK;
}

int ba_model_set_engine(ba_model *m, ba_engine e, const ba_approx *approx, int window,
                        char *err)
{
    if (!m)
        return ba_fail(err, BA_ERR_ARG, "ba_model_set_engine: model is NULL");
    ba_config c = m->cfg;
    c.engine = e;
    c.approx = approx ? *approx : ba_approx_default();
    c.window = (ba_engine_caps(e) & BA_ENGINE_CAP_WINDOW) ? window : 0;
    c.band_f32 = ba_config_engine(&c) == BA_ENGINE_BAND ? c.band_f32 : 0; /* the band's own */
    int rc = ba_config_validate(&c, err);
    if (rc)
        return rc;
    m->cfg = c;
    m->has_targets = 0; /* the saved activations belong to the old engine */
    return BA_OK;
}

int ba_model_set_band_precision(ba_model *m, int f32, char *err)
{
    if (!m)
        return ba_fail(err, BA_ERR_ARG, "ba_model_set_band_precision: model is NULL");
    ba_config c = m->cfg;
    c.band_f32 = f32;
    int rc = ba_config_validate(&c, err);
    if (rc)
        return rc;
    if (m->cfg.band_f32 != f32)
        m->has_targets = 0; /* the saved activations were made in the other precision */
    m->cfg = c;
    return BA_OK;
}

/* ------------------------------------------------------------ tensors */

/* Per-layer kinds in checkpoint order with their names. */
static const struct {
    int kind;
    const char *name;
} layer_tensors[] = {
    {BA_P_LN1W, "ln1.weight"},        {BA_P_LN1B, "ln1.bias"},        {BA_P_QKVW, "attn.qkv.weight"},
    {BA_P_QKVB, "attn.qkv.bias"},     {BA_P_PROJW, "attn.proj.weight"}, {BA_P_PROJB, "attn.proj.bias"},
    {BA_P_J, "attn.J"},               {BA_P_LN2W, "ln2.weight"},      {BA_P_LN2B, "ln2.bias"},
    {BA_P_FCW, "ffn.fc.weight"},      {BA_P_FCB, "ffn.fc.bias"},      {BA_P_FCPW, "ffn.proj.weight"},
    {BA_P_FCPB, "ffn.proj.bias"},
};
#define N_LAYER_TENSORS ((int)(sizeof layer_tensors / sizeof layer_tensors[0]))

static int kind_decays(int k)
{
    return k == BA_P_TOK || k == BA_P_POS || k == BA_P_QKVW || k == BA_P_PROJW || k == BA_P_FCW ||
           k == BA_P_FCPW || k == BA_P_HEADW;
}

/* Shape of one layer's slice of kind k (or of the whole tensor for global
 * kinds). Returns ndim. */
static int kind_shape(const ba_config *c, int k, int *shape)
{
    int C = c->n_embd, T = c->block_size, H = c->n_head;
    switch (k) {
    case BA_P_TOK: shape[0] = c->vocab_size, shape[1] = C; return 2;
    case BA_P_POS: shape[0] = T, shape[1] = C; return 2;
    case BA_P_QKVW: shape[0] = 3 * C, shape[1] = C; return 2;
    case BA_P_QKVB: shape[0] = 3 * C; return 1;
    case BA_P_PROJW: shape[0] = C, shape[1] = C; return 2;
    case BA_P_J:
        shape[0] = H;
        if (c->couplings == BA_COUPLINGS_RELATIVE) {
            shape[1] = ba_config_distances(c);
            return 2;
        }
        shape[1] = T, shape[2] = T;
        return 3;
    case BA_P_FCW: shape[0] = 4 * C, shape[1] = C; return 2;
    case BA_P_FCB: shape[0] = 4 * C; return 1;
    case BA_P_FCPW: shape[0] = C, shape[1] = 4 * C; return 2;
    case BA_P_HEADW: shape[0] = c->out_size, shape[1] = C; return 2;
    case BA_P_HEADB: shape[0] = c->out_size; return 1;
    default: shape[0] = C; return 1; /* LayerNorm weights and C-biases */
    }
}

/* Enumerates the tensors that exist (size > 0) in checkpoint order; fills
 * info for index idx. Returns the total count. */
static int walk_tensors(const ba_model *m, int idx, ba_tensor_info *info)
{
    const ba_config *c = &m->cfg;
    int n = 0;
#define EMIT(kind, lay, nm)                                                                   \
    do {                                                                                      \
        if (m->psize[kind] > 0) {                                                             \
            if (n == idx && info) {                                                           \
                size_t per = m->psize[kind] / ((lay) < 0 ? 1 : (size_t)c->n_layer);           \
                memset(info, 0, sizeof *info);                                                \
                if ((lay) < 0)                                                                \
                    snprintf(info->name, sizeof info->name, "%s", nm);                        \
                else                                                                          \
                    snprintf(info->name, sizeof info->name, "blocks.%d.%s", (int)(lay), nm);  \
                info->ndim = kind_shape(c, kind, info->shape);                                \
                info->offset = m->poff[kind] + ((lay) < 0 ? 0 : (size_t)(lay) * per);         \
                info->size = per;                                                             \
                info->decay = kind_decays(kind);                                              \
            }                                                                                 \
            n++;                                                                              \
        }                                                                                     \
    } while (0)
    EMIT(BA_P_TOK, -1, "tok_emb");
    EMIT(BA_P_POS, -1, "pos_emb");
    for (int l = 0; l < c->n_layer; l++)
        for (int t = 0; t < N_LAYER_TENSORS; t++) {
            const char *nm = layer_tensors[t].name;
            if (layer_tensors[t].kind == BA_P_J && c->couplings == BA_COUPLINGS_RELATIVE)
                nm = "attn.J_rel";
            EMIT(layer_tensors[t].kind, l, nm);
        }
    EMIT(BA_P_LNFW, -1, "ln_f.weight");
    EMIT(BA_P_LNFB, -1, "ln_f.bias");
    EMIT(BA_P_HEADW, -1, "head.weight");
    EMIT(BA_P_HEADB, -1, "head.bias");
#undef EMIT
    return n;
}

int ba_model_num_tensors(const ba_model *m) { return m->ntensors; }

int ba_model_tensor(const ba_model *m, int idx, ba_tensor_info *info)
{
    if (idx < 0 || idx >= m->ntensors)
        return BA_ERR_ARG;
    *info = m->tensors[idx];
    return BA_OK;
}

int ba_model_find_tensor(const ba_model *m, const char *name)
{
    for (int i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return i;
    return -1;
}

/* ------------------------------------------------------------ forward */

static int ensure_acts(ba_model *m, int B, char *err)
{
    size_t bt = (size_t)B * m->cfg.block_size;
    if (bt <= m->cap_bt)
        return BA_OK;
    size_t asz[NUM_A], gsz[NUM_G], an = 0, gn = 0;
    act_sizes(&m->cfg, bt, asz);
    gact_sizes(&m->cfg, bt, gsz);
    for (int i = 0; i < NUM_A; i++)
        m->aoff[i] = an, an += asz[i];
    for (int i = 0; i < NUM_G; i++)
        m->goff[i] = gn, gn += gsz[i];
    free(m->acts);
    free(m->gacts);
    free(m->inputs);
    free(m->targets);
    m->acts = malloc(sizeof(ba_real) * an);
    m->gacts = malloc(sizeof(ba_real) * gn);
    m->inputs = malloc(sizeof(int) * bt);
    m->targets = malloc(sizeof(int) * bt);
    if (!m->acts || !m->gacts || !m->inputs || !m->targets) {
        free(m->acts), free(m->gacts), free(m->inputs), free(m->targets);
        m->acts = m->gacts = NULL;
        m->inputs = m->targets = NULL;
        m->cap_bt = 0;
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate activations for batch size %d", B);
    }
    m->cap_bt = bt;
    return BA_OK;
}

#define ACT(k) (m->acts + m->aoff[k])
#define GACT(k) (m->gacts + m->goff[k])
#define PAR(k) (m->mem + m->poff[k])
#define GRAD(k) (m->mem + m->nparams + m->poff[k])


/* After a non-finite failure in the forward pass, names the first tensor
 * holding a non-finite value in the order the pass computes them: the
 * parameters (checkpoint order), the embedding, each layer's activations,
 * the final LayerNorm and the logits. fail_layer < n_layer: the attention of
 * that layer failed, so only its LayerNorm and qkv exist yet. Writes "" if
 * every value computed so far is finite. */
static void describe_nonfinite(const ba_model *m, int fail_layer, char *buf, size_t cap)
{
    const ba_config *c = &m->cfg;
    size_t N = (size_t)m->B * m->T, C = c->n_embd, F = 4 * (size_t)C;
    size_t natt = ba_model_attn_tiled(c) ? 0 : N * c->n_head * m->T; /* tiled: no weights */
    buf[0] = '\0';
    for (int t = 0; t < m->ntensors; t++) {
        const ba_tensor_info *ti = &m->tensors[t];
        size_t i = ba_first_nonfinite(m->mem + ti->offset, ti->size);
        if (i < ti->size) {
            snprintf(buf, cap, "parameter %s[%zu] = %g", ti->name, i,
                     (double)m->mem[ti->offset + i]);
            return;
        }
    }
    /* (name, kind, elements per layer, values per row of B*T) in forward order */
    struct {
        const char *name;
        int kind;
        size_t per, row;
    } st[] = {
        {"ln1", A_LN1, N * C, C},         {"qkv", A_QKV, N * 3 * C, 3 * C},
        {"attn.weights", A_ATT, natt, 0}, {"attn.out", A_ATTY, N * C, C},
        {"attn.proj", A_ATTPROJ, N * C, C}, {"residual1", A_RES2, N * C, C},
        {"ln2", A_LN2, N * C, C},         {"fc", A_FCH, N * F, F},
        {"gelu", A_FCHG, N * F, F},       {"fc.proj", A_FCPROJ, N * C, C},
        {"residual2", A_RES3, N * C, C},
    };
    int nst = c->ffn ? 11 : 6;
    size_t i = ba_first_nonfinite(ACT(A_ENC), N * C);
    if (i < N * C) {
        snprintf(buf, cap, "activation embedding at batch %zu position %zu", i / C / m->T,
                 i / C % m->T);
        return;
    }
    for (int l = 0; l < c->n_layer && l <= fail_layer; l++)
        for (int k = 0; k < nst && (l < fail_layer || k < 2); k++) {
            const ba_real *x = ACT(st[k].kind) + (size_t)l * st[k].per;
            if ((i = ba_first_nonfinite(x, st[k].per)) == st[k].per)
                continue;
            /* (B,H,T,T) weights: row (b*H + h)*T + query */
            size_t row = st[k].row ? i / st[k].row : i / m->T;
            size_t b = st[k].row ? row / m->T : row / m->T / c->n_head;
            snprintf(buf, cap, "activation blocks.%d.%s at batch %zu position %zu", l,
                     st[k].name, b, row % m->T);
            return;
        }
    if (fail_layer < c->n_layer)
        return;
    if ((i = ba_first_nonfinite(ACT(A_LNF), N * C)) < N * C) {
        snprintf(buf, cap, "activation ln_f at batch %zu position %zu", i / C / m->T,
                 i / C % m->T);
        return;
    }
    /* Masked pointer logits are -INFINITY by design: only a row's usable
     * columns count (see ba_crossentropy_forward). */
    const ba_real *lg = ACT(A_LOGITS);
    int O = c->out_size;
    for (size_t r = 0; r < N; r++) {
        int t = (int)(r % m->T);
        int nv = c->head == BA_HEAD_POINTER ? (t < O ? t : O) : O;
        if ((i = ba_first_nonfinite(lg + r * O, (size_t)nv)) < (size_t)nv) {
            snprintf(buf, cap, "activation logits at batch %zu position %d", r / m->T, t);
            return;
        }
    }
}

int ba_inputs_check(const ba_config *c, const int *inputs, int B, int T, char *err)
{
    if (!inputs)
        return ba_fail(err, BA_ERR_ARG, "inputs are NULL");
    if (B < 1)
        return ba_fail(err, BA_ERR_ARG, "batch size B = %d must be at least 1", B);
    if (T < 1 || T > c->block_size)
        return ba_fail(err, BA_ERR_ARG, "sequence length T = %d is outside [1, %d]", T,
                       c->block_size);
    if (c->head == BA_HEAD_POINTER && T != c->block_size)
        return ba_fail(err, BA_ERR_ARG,
                       "pointer-head sequences must have the model's length %d, got T = %d",
                       c->block_size, T);
    size_t N = (size_t)B * T;
    for (size_t i = 0; i < N; i++)
        if (inputs[i] < 0 || inputs[i] >= c->vocab_size)
            return ba_fail(err, BA_ERR_ARG, "token %d at batch %zu position %zu is outside [0, %d)",
                           inputs[i], i / T, i % T, c->vocab_size);
    return BA_OK;
}

/* The attention layers' description of this model for a batch (B,T)
 * whose first sequence is item0 of the whole batch (ba_attn_shape). */
static ba_attn_shape attn_shape(ba_model *m, int B, int T, ba_rng *srng, long item0)
{
    return ba_model_attn_shape(&m->cfg, B, T, srng, item0, &m->astats,
                               m->stop.requested ? &m->stop : NULL);
}

void ba_model_set_stop(ba_model *m, const ba_stop *stop)
{
    if (!m)
        return;
    m->stop.requested = stop ? stop->requested : NULL;
    m->stop.user = stop ? stop->user : NULL;
}

ba_approx_stats ba_model_approx_stats_take(ba_model *m)
{
    ba_approx_stats st = m->astats;
    memset(&m->astats, 0, sizeof m->astats);
    return st;
}

int ba_model_forward(ba_model *m, const int *inputs, const int *targets, int B, int T,
                     double *loss, char *err)
{
    return ba_model_forward_share(m, inputs, targets, B, T, 0, loss, err);
}

int ba_model_forward_share(ba_model *m, const int *inputs, const int *targets, int B, int T,
                           long item0, double *loss, char *err)
{
    // inputs, targets (B,T)
    const ba_config *c = &m->cfg;
    int rc = ba_inputs_check(c, inputs, B, T, err);
    if (rc)
        return rc;
    size_t N = (size_t)B * T;
    rc = ensure_acts(m, B, err);
    if (rc)
        return rc;
    m->B = B, m->T = T;
    m->has_targets = 0, m->attw_ok = 0;
    memcpy(m->inputs, inputs, sizeof(int) * N);
    int L = c->n_layer, C = c->n_embd, H = c->n_head, O = c->out_size;
    size_t NC = N * C;
    size_t natt = ba_model_attn_tiled(c) ? 0 : N * H * T, npre = natt ? natt : N * H;

    ba_real *enc = ACT(A_ENC);
    const ba_real *tok = PAR(BA_P_TOK), *pos = PAR(BA_P_POS);
    for (size_t i = 0; i < N; i++)
        for (int k = 0; k < C; k++)
            enc[i * C + k] = tok[(size_t)inputs[i] * C + k] +
                             (c->pos_emb == BA_POS_LEARNED ? pos[(i % T) * C + k] : 0);

    ba_attn_shape as = attn_shape(m, B, T, &m->srng, item0);
    size_t JL = m->psize[BA_P_J] / (size_t)L; /* one layer's couplings */
    const ba_real *x = enc;
    for (int l = 0; l < L; l++) {
        as.ctx = m->ectx ? m->ectx + (size_t)l * H : NULL;
        as.sctx = m->sctx ? m->sctx + (size_t)l * H : NULL;
        ba_real *ln1 = ACT(A_LN1) + l * NC, *qkv = ACT(A_QKV) + l * NC * 3;
        ba_real *atty = ACT(A_ATTY) + l * NC, *attp = ACT(A_ATTPROJ) + l * NC;
        ba_real *res2 = ACT(A_RES2) + l * NC;
        ba_layernorm_forward(ln1, ACT(A_LN1M) + l * N, ACT(A_LN1R) + l * N, x,
                             PAR(BA_P_LN1W) + l * C, PAR(BA_P_LN1B) + l * C, (int)N, C);
        ba_linear_forward(qkv, ln1, PAR(BA_P_QKVW) + (size_t)l * 3 * C * C, PAR(BA_P_QKVB) + l * 3 * C,
                          (int)N, C, 3 * C);
        const ba_real *J = JL ? PAR(BA_P_J) + (size_t)l * JL : NULL;
        rc = ba_model_attn_forward(&as, l, atty, ACT(A_ATT) + l * natt, ACT(A_PRE) + l * npre,
                                   qkv, J, err);
        if (rc == BA_ERR_NUMERIC) {
            char why[BA_ERR_LEN], where[160];
            snprintf(why, sizeof why, "%s", err ? err : "");
            describe_nonfinite(m, l, where, sizeof where);
            return ba_fail(err, rc, "blocks.%d attention: %.80s; first non-finite tensor: %s", l,
                           why, where[0] ? where : "none before the attention scores");
        }
        if (rc)
            return rc;
        ba_linear_forward(attp, atty, PAR(BA_P_PROJW) + (size_t)l * C * C, PAR(BA_P_PROJB) + l * C,
                          (int)N, C, C);
        ba_residual_forward(res2, x, attp, NC);
        x = res2;
        if (c->ffn) {
            size_t F = 4 * (size_t)C;
            ba_real *ln2 = ACT(A_LN2) + l * NC, *fch = ACT(A_FCH) + l * N * F;
            ba_real *fchg = ACT(A_FCHG) + l * N * F, *fcp = ACT(A_FCPROJ) + l * NC;
            ba_real *res3 = ACT(A_RES3) + l * NC;
            ba_layernorm_forward(ln2, ACT(A_LN2M) + l * N, ACT(A_LN2R) + l * N, res2,
                                 PAR(BA_P_LN2W) + l * C, PAR(BA_P_LN2B) + l * C, (int)N, C);
            ba_linear_forward(fch, ln2, PAR(BA_P_FCW) + l * F * C, PAR(BA_P_FCB) + l * F, (int)N, C,
                              (int)F);
            ba_gelu_forward(fchg, fch, N * F);
            ba_linear_forward(fcp, fchg, PAR(BA_P_FCPW) + l * F * C, PAR(BA_P_FCPB) + l * C, (int)N,
                              (int)F, C);
            ba_residual_forward(res3, res2, fcp, NC);
            x = res3;
        }
    }
    ba_layernorm_forward(ACT(A_LNF), ACT(A_LNFM), ACT(A_LNFR), x, PAR(BA_P_LNFW), PAR(BA_P_LNFB),
                         (int)N, C);
    ba_linear_forward(ACT(A_LOGITS), ACT(A_LNF), PAR(BA_P_HEADW), PAR(BA_P_HEADB), (int)N, C, O);

    double ls = 0.0;
    long cnt = 0;
    rc = ba_crossentropy_forward(ACT(A_LOGITS), ACT(A_PROBS), targets, (int)N, O, T,
                                 c->head == BA_HEAD_POINTER, &ls, &cnt, err);
    if (rc)
        return rc;
    if (targets) {
        memcpy(m->targets, targets, sizeof(int) * N);
        m->has_targets = 1;
    }
    m->n_targets = cnt;
    double mean = cnt > 0 ? ls / cnt : 0.0;
    if (!isfinite(mean)) {
        char where[160];
        describe_nonfinite(m, c->n_layer, where, sizeof where);
        return ba_fail(err, BA_ERR_NUMERIC, "loss is not finite (%g); first non-finite tensor: %s",
                       mean, where[0] ? where : "none (the cross-entropy overflowed)");
    }
    if (loss)
        *loss = mean;
    return BA_OK;
}

const ba_real *ba_model_logits(const ba_model *m) { return m->acts ? ACT(A_LOGITS) : NULL; }

const ba_real *ba_model_attention(const ba_model *m, int l)
{
    const ba_config *c = &m->cfg;
    if (!m->acts || l < 0 || l >= c->n_layer)
        return NULL;
    size_t natt = (size_t)m->B * c->n_head * m->T * m->T;
    if (!ba_model_attn_tiled(c))
        return ACT(A_ATT) + l * natt;
    /* softmax, sigmoid: recomputed at the first call after a forward into a
     * cache the model owns (the cast: the model's state is unchanged) */
    ba_model *w = (ba_model *)m;
    if (!m->attw_ok) {
        ba_attn_shape as = ba_model_attn_shape(c, m->B, m->T, NULL, 0, NULL, NULL);
        w->attw_ok = !ba_model_attn_weights(&as, c->n_layer, ACT(A_QKV), ACT(A_ATTY), ACT(A_PRE),
                                            &w->attw, &w->attw_cap, NULL);
    }
    return m->attw_ok ? m->attw + l * natt : NULL;
}

int ba_model_fields(const ba_model *m, int l, int head, int b, int i, double *h, char *err)
{
    const ba_config *c = &m->cfg;
    if (!m->acts || m->B < 1)
        return ba_fail(err, BA_ERR_ARG, "no forward has run yet");
    if (l < 0 || l >= c->n_layer)
        return ba_fail(err, BA_ERR_ARG, "layer %d is out of range [0, %d)", l, c->n_layer);
    if (head < 0 || head >= c->n_head)
        return ba_fail(err, BA_ERR_ARG, "head %d is out of range [0, %d)", head, c->n_head);
    if (b < 0 || b >= m->B)
        return ba_fail(err, BA_ERR_ARG, "batch element %d is out of range [0, %d)", b, m->B);
    if (i < 0 || i >= m->T)
        return ba_fail(err, BA_ERR_ARG, "query %d is out of range [0, %d)", i, m->T);
    int T = m->T, C = c->n_embd, d = C / c->n_head;
    size_t N = (size_t)m->B * T;
    const ba_real *qkv = ACT(A_QKV) + (size_t)l * N * C * 3; // (B,T,3C) of layer l
    const ba_real *q = qkv + ((size_t)b * T + i) * 3 * C + (size_t)head * d;
    /* the same sum, in the same order, as the dense core's fields (the
     * Ising variants'; the tiled softmax and sigmoid round theirs in
     * ba_real), with the same biases (x - 0 is x without ALiBi) */
    double bias = ba_field_bias_value(c->field_bias, i + 1);
    double slope = c->pos_emb == BA_POS_ALIBI ? ba_alibi_slope(head, c->n_head) : 0.0;
    for (int j = 0; j <= i; j++) {
        const ba_real *k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)head * d;
        double acc = 0.0;
        for (int e = 0; e < d; e++)
            acc += (double)q[e] * k[e];
        h[j] = acc * (1.0 / sqrt((double)d)) - bias - slope * (i - j);
    }
    return BA_OK;
}

/* ----------------------------------------------------------- backward */

void ba_model_zero_grad(ba_model *m) { memset(GRAD(0), 0, sizeof(ba_real) * m->nparams); }

int ba_model_backward(ba_model *m, char *err)
{
    if (!m->has_targets)
        return ba_fail(err, BA_ERR_ARG, "backward needs a forward pass with targets first");
    const ba_config *c = &m->cfg;
    int B = m->B, T = m->T, L = c->n_layer, C = c->n_embd, H = c->n_head, O = c->out_size;
    size_t N = (size_t)B * T, NC = N * C, F = 4 * (size_t)C;
    size_t natt = ba_model_attn_tiled(c) ? 0 : N * H * T, npre = natt ? natt : N * H;
    int rc;

    ba_real *dx = GACT(G_X), *dln = GACT(G_LN), *dlogits = GACT(G_LOGITS);
    memset(dlogits, 0, sizeof(ba_real) * N * O);
    if (m->n_targets > 0)
        ba_crossentropy_backward(dlogits, ACT(A_PROBS), m->targets, (int)N, O,
                                 1.0 / (double)m->n_targets);
    memset(dln, 0, sizeof(ba_real) * NC);
    ba_linear_backward(dln, GRAD(BA_P_HEADW), GRAD(BA_P_HEADB), dlogits, ACT(A_LNF), PAR(BA_P_HEADW),
                       (int)N, C, O);
    const ba_real *xlast = L == 0 ? ACT(A_ENC)
                           : c->ffn ? ACT(A_RES3) + (size_t)(L - 1) * NC
                                    : ACT(A_RES2) + (size_t)(L - 1) * NC;
    memset(dx, 0, sizeof(ba_real) * NC);
    ba_layernorm_backward(dx, GRAD(BA_P_LNFW), GRAD(BA_P_LNFB), dln, xlast, PAR(BA_P_LNFW), ACT(A_LNFM),
                          ACT(A_LNFR), (int)N, C);

    ba_attn_shape as = attn_shape(m, B, T, NULL, 0); /* the shots are the forward's */
    size_t JL = m->psize[BA_P_J] / (size_t)L; /* one layer's couplings */
    /* dx holds dL/d(residual stream) at the output of layer l on entry and at
     * its input on exit: each residual add passes it through unchanged and
     * the branch adds its own contribution. */
    for (int l = L - 1; l >= 0; l--) {
        const ba_real *xin = l == 0 ? ACT(A_ENC)
                             : c->ffn ? ACT(A_RES3) + (size_t)(l - 1) * NC
                                      : ACT(A_RES2) + (size_t)(l - 1) * NC;
        if (c->ffn) {
            ba_real *dfchg = GACT(G_FCHG), *dfch = GACT(G_FCH);
            memset(dfchg, 0, sizeof(ba_real) * N * F);
            ba_linear_backward(dfchg, GRAD(BA_P_FCPW) + l * F * C, GRAD(BA_P_FCPB) + l * C, dx,
                               ACT(A_FCHG) + l * N * F, PAR(BA_P_FCPW) + l * F * C, (int)N, (int)F,
                               C);
            ba_gelu_backward_set(dfch, ACT(A_FCH) + l * N * F, dfchg, N * F); /* no zeroing */
            memset(dln, 0, sizeof(ba_real) * NC);
            ba_linear_backward(dln, GRAD(BA_P_FCW) + l * F * C, GRAD(BA_P_FCB) + l * F, dfch,
                               ACT(A_LN2) + l * NC, PAR(BA_P_FCW) + l * F * C, (int)N, C, (int)F);
            ba_layernorm_backward(dx, GRAD(BA_P_LN2W) + l * C, GRAD(BA_P_LN2B) + l * C, dln,
                                  ACT(A_RES2) + l * NC, PAR(BA_P_LN2W) + l * C,
                                  ACT(A_LN2M) + l * N, ACT(A_LN2R) + l * N, (int)N, C);
        }
        ba_real *datty = GACT(G_ATTY), *dqkv = GACT(G_QKV);
        memset(datty, 0, sizeof(ba_real) * NC);
        memset(dqkv, 0, sizeof(ba_real) * NC * 3);
        ba_linear_backward(datty, GRAD(BA_P_PROJW) + (size_t)l * C * C, GRAD(BA_P_PROJB) + l * C, dx,
                           ACT(A_ATTY) + l * NC, PAR(BA_P_PROJW) + (size_t)l * C * C, (int)N, C, C);
        const ba_real *J = m->psize[BA_P_J] ? PAR(BA_P_J) + l * JL : NULL;
        ba_real *dJ = m->psize[BA_P_J] ? GRAD(BA_P_J) + l * JL : NULL;
        as.ctx = m->ectx ? m->ectx + (size_t)l * H : NULL;
        as.sctx = m->sctx ? m->sctx + (size_t)l * H : NULL;
        rc = ba_model_attn_backward(&as, l, dqkv, dJ, datty, ACT(A_QKV) + l * NC * 3,
                                    ACT(A_ATTY) + l * NC, J, ACT(A_ATT) + l * natt,
                                    ACT(A_PRE) + l * npre, err);
        if (rc)
            return rc;
        memset(dln, 0, sizeof(ba_real) * NC);
        ba_linear_backward(dln, GRAD(BA_P_QKVW) + (size_t)l * 3 * C * C, GRAD(BA_P_QKVB) + l * 3 * C,
                           dqkv, ACT(A_LN1) + l * NC, PAR(BA_P_QKVW) + (size_t)l * 3 * C * C,
                           (int)N, C, 3 * C);
        ba_layernorm_backward(dx, GRAD(BA_P_LN1W) + l * C, GRAD(BA_P_LN1B) + l * C, dln, xin,
                              PAR(BA_P_LN1W) + l * C, ACT(A_LN1M) + l * N, ACT(A_LN1R) + l * N,
                              (int)N, C);
    }
    ba_real *dtok = GRAD(BA_P_TOK), *dpos = GRAD(BA_P_POS);
    for (size_t i = 0; i < N; i++)
        for (int k = 0; k < C; k++) {
            dtok[(size_t)m->inputs[i] * C + k] += dx[i * C + k];
            if (c->pos_emb == BA_POS_LEARNED)
                dpos[(i % T) * C + k] += dx[i * C + k];
        }
    return BA_OK;
}
