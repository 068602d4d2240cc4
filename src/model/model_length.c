/* What ties a model to its context length T: the band check of absolute
 * couplings and the resize of a model to another T (a relative model run
 * at a T longer than it was trained at). Through the public model API
 * only: tensors by name, parameters by offset. */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

int ba_model_check_band(const ba_model *m, const char *what, char *err)
{
    const ba_config *c = ba_model_config(m);
    if (c->band <= 0 || c->couplings != BA_COUPLINGS_ABSOLUTE ||
        (c->attn != BA_ATTN_BOLTZMANN && c->attn != BA_ATTN_COUPLING))
        return BA_OK;
    int T = c->block_size, H = c->n_head;
    const ba_real *p = ba_model_params((ba_model *)m);
    for (int l = 0; l < c->n_layer; l++) {
        char name[64];
        ba_tensor_info ti;
        snprintf(name, sizeof name, "blocks.%d.attn.J", l);
        if (ba_model_tensor(m, ba_model_find_tensor(m, name), &ti))
            return ba_fail(err, BA_ERR_ARG, "%s: the model has no tensor '%s'", what, name);
        const ba_real *J = p + ti.offset; // (H,T,T)
        for (int h = 0; h < H; h++)
            for (int j = 0; j < T; j++)
                for (int k = j + c->band + 1; k < T; k++) {
                    ba_real v = J[((size_t)h * T + j) * T + k];
                    if (v != 0)
                        return ba_fail(err, BA_ERR_FORMAT,
                                       "%s: tensor '%s' holds %g at [%d, %d, %d], %d keys apart, "
                                       "beyond the band W = %d (a banded model stores 0 there)",
                                       what, name, (double)v, h, j, k, k - j, c->band);
                }
    }
    return BA_OK;
}

/* Why m cannot run at block size T2 > T, or NULL when it can. */
static const char *longer_refusal(const ba_config *c)
{
    int ising = c->attn == BA_ATTN_BOLTZMANN || c->attn == BA_ATTN_COUPLING;
    if (c->pos_emb == BA_POS_LEARNED)
        return "it has learned position embeddings for its T positions only (models without "
               "them: pos_emb false, --pos-emb none)";
    if (ising && c->couplings == BA_COUPLINGS_ABSOLUTE)
        return "its absolute couplings exist only between its T positions (relative couplings "
               "with a band run at any T)";
    if (ising && c->band == 0)
        return "its relative couplings without a band cover distances up to T - 1 only (with a "
               "band W they cover 1..W at any T)";
    return NULL;
}

/* Copies tensor `from` of src into tensor `to` of dst: leading rows and
 * columns where the new one is smaller (pos_emb (T,C), J (H,T,T), J_rel
 * (H,D)). */
static void copy_tensor(const ba_real *src, const ba_tensor_info *from, ba_real *dst,
                        const ba_tensor_info *to)
{
    if (from->size == to->size) {
        memcpy(dst + to->offset, src + from->offset, sizeof(ba_real) * to->size);
        return;
    }
    if (to->ndim == 2) { /* rows of the leading dimension or, for (H,D), per head */
        int same_rows = from->shape[0] == to->shape[0];
        size_t rows = (size_t)to->shape[0], n = (size_t)to->shape[1];
        for (size_t r = 0; r < rows; r++)
            memcpy(dst + to->offset + r * n,
                   src + from->offset + r * (same_rows ? (size_t)from->shape[1] : n),
                   sizeof(ba_real) * n);
        return;
    }
    size_t H = (size_t)to->shape[0], T2 = (size_t)to->shape[1], T = (size_t)from->shape[1];
    for (size_t h = 0; h < H; h++)
        for (size_t j = 0; j < T2; j++)
            memcpy(dst + to->offset + (h * T2 + j) * T2, src + from->offset + (h * T + j) * T,
                   sizeof(ba_real) * T2);
}

int ba_model_resize(const ba_model *m, int block_size, ba_model **out, char *err)
{
    if (!m || !out)
        return ba_fail(err, BA_ERR_ARG, "ba_model_resize: m and out must not be NULL");
    *out = NULL;
    ba_config c = *ba_model_config(m);
    int T = c.block_size;
    if (block_size != T && c.head == BA_HEAD_POINTER)
        return ba_fail(err, BA_ERR_ARG,
                       "T = %d: a pointer head's outputs are the model's %d positions; it runs "
                       "at T = %d only",
                       block_size, T, T);
    const char *why = block_size > T ? longer_refusal(&c) : NULL;
    if (why)
        return ba_fail(err, BA_ERR_ARG, "T = %d is longer than the model's T = %d: %s",
                       block_size, T, why);
    c.block_size = block_size;
    char v[BA_ERR_LEN];
    int rc = ba_config_validate(&c, v);
    if (rc)
        return ba_fail(err, rc, "at T = %d: %s", block_size, v);
    ba_model *n;
    if ((rc = ba_model_init(&n, &c, err)))
        return rc;
    const ba_real *src = ba_model_params((ba_model *)m);
    ba_real *dst = ba_model_params(n);
    for (int i = 0; i < ba_model_num_tensors(n); i++) {
        ba_tensor_info to, from;
        ba_model_tensor(n, i, &to);
        if (ba_model_tensor(m, ba_model_find_tensor(m, to.name), &from) || from.size < to.size) {
            ba_model_free(n);
            return ba_fail(err, BA_ERR_ARG, "tensor '%s' of T = %d has no counterpart in the "
                           "model of T = %d", to.name, block_size, T);
        }
        copy_tensor(src, &from, dst, &to);
    }
    ba_model_set_step_count(n, ba_model_step_count(m));
    *ba_model_sampler_rng(n) = *ba_model_sampler_rng((ba_model *)m);
    *out = n;
    return BA_OK;
}
