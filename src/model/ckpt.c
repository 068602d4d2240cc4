/* Model files: checkpoints (parameters and config, checksummed), gradient
 * files and batch files, all safetensors. */
#include "model/model.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Converts a double to float without undefined behaviour: values beyond
 * float's range become infinities instead of an out-of-range conversion. */
static float to_f32(double x)
{
    if (isnan(x))
        return NAN;
    if (x > FLT_MAX)
        return INFINITY;
    if (x < -FLT_MAX)
        return -INFINITY;
    return (float)x;
}

/* ---------------------------------------------------------- model files */

/* Converts the model values src (P elements, laid out by the model's
 * tensors) to F32 in dst and fills one F32 entry per tensor pointing into
 * dst. infos and entries have num_tensors elements. With check_finite,
 * a value that is not finite as a float is BA_ERR_NUMERIC. */
static int model_entries(const ba_model *m, const ba_real *src, float *dst,
                         ba_tensor_info *infos, ba_st_entry *entries, int check_finite,
                         const char *what, char *err)
{
    int nt = ba_model_num_tensors(m);
    size_t P = ba_model_num_params(m);
    for (int i = 0; i < nt; i++) {
        ba_tensor_info *t = &infos[i];
        if (ba_model_tensor(m, i, t) != BA_OK || t->ndim < 0 || t->ndim > 3 ||
            t->offset > P || t->size > P - t->offset)
            return ba_fail(err, BA_ERR_ARG, "model tensor %d does not lie inside the %zu %s", i,
                           P, what);
        for (size_t j = 0; j < t->size; j++) {
            ba_real v = src[t->offset + j];
            float f = to_f32((double)v);
            if (check_finite && !isfinite(f))
                return ba_fail(err, BA_ERR_NUMERIC,
                               "%s '%s'[%zu] = %g is not finite as F32; not saving", what,
                               t->name, j, (double)v);
            dst[t->offset + j] = f;
        }
        ba_st_entry *e = &entries[i];
        memset(e, 0, sizeof *e);
        e->name = t->name;
        e->dtype = BA_DT_F32;
        e->ndim = t->ndim;
        for (int k = 0; k < t->ndim; k++)
            e->shape[k] = t->shape[k];
        e->data = dst + t->offset;
    }
    return BA_OK;
}

/* Saves one F32 entry per model tensor from src, after `lead` entries
 * (0 or 1) given by the caller. */
static int save_model_values(const char *path, const ba_model *m, const ba_real *src,
                             const ba_st_entry *lead, int n_lead, int check_finite,
                             const char *what, const char *const *meta_keys,
                             const char *const *meta_vals, int n_meta, char *err)
{
    int nt = ba_model_num_tensors(m);
    size_t P = ba_model_num_params(m);
    if (nt < 0)
        return ba_fail(err, BA_ERR_ARG, "model reports %d tensors", nt);
    if (P > (SIZE_MAX - 1) / sizeof(float))
        return ba_fail(err, BA_ERR_NOMEM, "%zu %ss do not fit in memory as F32", P, what);
    float *dst = malloc(P * sizeof *dst + 1);
    ba_tensor_info *infos = malloc((size_t)nt * sizeof *infos + 1);
    ba_st_entry *entries = malloc(((size_t)nt + 1) * sizeof *entries);
    int rc;
    if (!dst || !infos || !entries) {
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate the F32 copy of %zu %s", P, what);
    } else {
        for (int i = 0; i < n_lead; i++)
            entries[i] = lead[i];
        rc = model_entries(m, src, dst, infos, entries + n_lead, check_finite, what, err);
        /* A checkpoint (check_finite) carries the checksum of its tensor
         * data, in tensor order, as the last metadata entry; the caller's
         * arrays have room for it. */
        char sum[32];
        if (rc == BA_OK && check_finite) {
            uint64_t h = BA_FNV_INIT;
            for (int i = 0; i < nt; i++)
                h = ba_fnv1a64(h, dst + infos[i].offset, infos[i].size * sizeof(float));
            snprintf(sum, sizeof sum, "fnv1a64:%016llx", (unsigned long long)h);
            ((const char **)meta_keys)[n_meta] = "checksum";
            ((const char **)meta_vals)[n_meta] = sum;
            n_meta++;
        }
        if (rc == BA_OK)
            rc = ba_st_write(path, entries, nt + n_lead, meta_keys, meta_vals, n_meta, err);
    }
    free(entries);
    free(infos);
    free(dst);
    return rc;
}

int ba_checkpoint_save(const char *path, const ba_model *m, const ba_data_spec *spec,
                       const char *const *meta_keys, const char *const *meta_vals, int n_meta,
                       char *err)
{
    if (!path || !m)
        return ba_fail(err, BA_ERR_ARG, "ba_checkpoint_save: path and model must not be NULL");
    if (n_meta < 0 || (n_meta > 0 && (!meta_keys || !meta_vals)))
        return ba_fail(err, BA_ERR_ARG,
                       "ba_checkpoint_save: %d metadata pairs without key/value arrays", n_meta);
    for (int i = 0; i < n_meta; i++)
        if (meta_keys[i] && (strcmp(meta_keys[i], "config") == 0 ||
                             strcmp(meta_keys[i], "checksum") == 0))
            return ba_fail(err, BA_ERR_ARG, "metadata key '%s' is reserved", meta_keys[i]);
    int rc;
    if (spec && (rc = ba_data_spec_check(spec, ba_model_config(m), err)))
        return rc;
    char *cfg = ba_config_to_json(ba_model_config(m), spec);
    /* room for config, the caller's pairs and the checksum */
    const char **keys = malloc(((size_t)n_meta + 2) * sizeof *keys);
    const char **vals = malloc(((size_t)n_meta + 2) * sizeof *vals);
    if (!cfg || !keys || !vals) {
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot build the checkpoint metadata");
    } else {
        keys[0] = "config";
        vals[0] = cfg;
        for (int i = 0; i < n_meta; i++) {
            keys[i + 1] = meta_keys[i];
            vals[i + 1] = meta_vals[i];
        }
        /* ba_model_params takes a non-const model because training writes
         * through it; here the parameters are only read. */
        const ba_real *params = ba_model_params((ba_model *)m);
        rc = save_model_values(path, m, params, NULL, 0, 1, "parameter", keys, vals, n_meta + 1,
                               err);
    }
    free(vals);
    free(keys);
    free(cfg);
    return rc;
}

int ba_checkpoint_save_tensors(const char *path, const char *config_json, int n_tensors,
                               const char *const *names, const int *ndims, const int *shapes,
                               const float *const *data, const char *const *meta_keys,
                               const char *const *meta_vals, int n_meta, char *err)
{
    if (!path || !config_json || n_tensors < 0 ||
        (n_tensors > 0 && (!names || !ndims || !shapes || !data)))
        return ba_fail(err, BA_ERR_ARG, "ba_checkpoint_save_tensors: bad arguments");
    ba_config cfg;
    ba_data_spec spec;
    char why[BA_ERR_LEN];
    int rc = ba_config_from_json(config_json, &cfg, &spec, why);
    if (rc != BA_OK)
        return ba_fail(err, rc, "checkpoint config: %s", why);
    ba_model *m;
    if ((rc = ba_model_init(&m, &cfg, why)) != BA_OK)
        return ba_fail(err, rc, "checkpoint config: %s", why);
    int nt = ba_model_num_tensors(m);
    size_t P = ba_model_num_params(m);
    ba_real *params = ba_model_params(m);
    if (n_tensors != nt)
        rc = ba_fail(err, BA_ERR_ARG, "%d tensors given; the config's model has %d",
                     n_tensors, nt);
    for (int i = 0; i < nt && rc == BA_OK; i++) {
        ba_tensor_info t;
        if (ba_model_tensor(m, i, &t) != BA_OK || t.ndim < 0 || t.ndim > 3 || t.offset > P ||
            t.size > P - t.offset) {
            rc = ba_fail(err, BA_ERR_ARG, "model tensor %d does not lie inside the %zu "
                         "parameters", i, P);
            break;
        }
        int k = 0;
        while (k < n_tensors && (!names[k] || strcmp(names[k], t.name) != 0))
            k++;
        if (k == n_tensors) {
            rc = ba_fail(err, BA_ERR_ARG, "tensor '%s' of the config's model is not given",
                         t.name);
            break;
        }
        int same = ndims[k] == t.ndim && (t.size == 0 || data[k]);
        for (int j = 0; same && j < t.ndim; j++)
            same = shapes[3 * k + j] == t.shape[j];
        if (!same) {
            char want[64] = "", got[64] = "";
            for (int j = 0; j < t.ndim; j++)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", j ? ", " : "",
                         t.shape[j]);
            for (int j = 0; j < ndims[k] && j < 3 && ndims[k] >= 0; j++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d", j ? ", " : "",
                         shapes[3 * k + j]);
            rc = ba_fail(err, BA_ERR_ARG, "tensor '%s' has shape [%s]; the config's model "
                         "has [%s]", t.name, got, want);
            break;
        }
        for (size_t j = 0; j < t.size; j++)
            params[t.offset + j] = (ba_real)data[k][j];
    }
    /* names are unique in the model, so n_tensors == nt given names that
     * all matched leaves none over unless one is given twice */
    for (int a = 0; a < n_tensors && rc == BA_OK; a++)
        for (int b = a + 1; b < n_tensors && rc == BA_OK; b++)
            if (names[a] && names[b] && strcmp(names[a], names[b]) == 0)
                rc = ba_fail(err, BA_ERR_ARG, "tensor '%s' is given twice", names[a]);
    if (rc == BA_OK)
        rc = ba_model_check_band(m, "checkpoint", err);
    if (rc == BA_OK)
        rc = ba_checkpoint_save(path, m, &spec, meta_keys, meta_vals, n_meta, err);
    ba_model_free(m);
    return rc;
}

/* Copies the F32 file tensor ft into the model tensor t of params,
 * checking dtype, shape and finiteness. */
static int load_tensor(const ba_st_tensor *ft, const ba_tensor_info *t, ba_real *params,
                       char *err)
{
    if (ft->dtype != BA_DT_F32)
        return ba_fail(err, BA_ERR_FORMAT, "tensor '%s' has dtype %s, expected F32", t->name,
                       ba_dtype_name(ft->dtype));
    int64_t want[3] = {0, 0, 0};
    for (int k = 0; k < t->ndim && k < 3; k++)
        want[k] = t->shape[k];
    int same = ft->ndim == t->ndim;
    for (int k = 0; same && k < t->ndim; k++)
        same = ft->shape[k] == want[k];
    if (!same || ft->nbytes != t->size * sizeof(float)) {
        char a[96], b[96];
        ba_format_shape(a, sizeof a, ft->ndim, ft->shape);
        ba_format_shape(b, sizeof b, t->ndim, want);
        return ba_fail(err, BA_ERR_FORMAT, "tensor '%s' has shape %s in the file but %s in the model",
                       t->name, a, b);
    }
    const unsigned char *src = ft->data;
    for (size_t j = 0; j < t->size; j++) {
        float v;
        memcpy(&v, src + j * sizeof v, sizeof v); /* the data need not be aligned */
        if (!isfinite(v))
            return ba_fail(err, BA_ERR_FORMAT, "tensor '%s' value [%zu] = %g is not finite",
                           t->name, j, (double)v);
        params[t->offset + j] = (ba_real)v;
    }
    return BA_OK;
}

/* A model tensor the file lacks; the couplings' two forms get a message
 * of their own (a config that says one form over tensors of the other). */
static int missing_tensor(const ba_st *st, const ba_config *cfg, const char *name, char *err)
{
    size_t n = strlen(name);
    char other[80];
    int rel = n > 6 && strcmp(name + n - 6, ".J_rel") == 0;
    int abs = n > 2 && strcmp(name + n - 2, ".J") == 0;
    if (rel || abs) {
        snprintf(other, sizeof other, "%.*s%s", (int)(n - (rel ? 4 : 0)), name, rel ? "" : "_rel");
        if (ba_st_find(st, other))
            return ba_fail(err, BA_ERR_FORMAT,
                           "the checkpoint's config says %s couplings (tensor '%s') but the file "
                           "holds %s ones ('%s'): its config and tensors disagree",
                           ba_couplings_name(cfg->couplings), name, rel ? "absolute" : "relative",
                           other);
    }
    return ba_fail(err, BA_ERR_FORMAT, "tensor '%s' is missing from the file", name);
}

static int load_checkpoint(const ba_st *st, ba_model **out, ba_data_spec *spec, char *err)
{
    const char *cj = ba_st_metadata(st, "config");
    if (!cj)
        return ba_fail(err, BA_ERR_FORMAT, "no \"config\" entry in __metadata__");
    ba_config cfg;
    char why[BA_ERR_LEN];
    int rc = ba_config_from_json(cj, &cfg, spec, why);
    if (rc != BA_OK)
        return ba_fail(err, rc, "checkpoint config: %s", why);
    /* A small file must not make us allocate a large model: the config's
     * parameters have to be (nearly) in the file before any memory is taken.
     * The 1 MiB of slack leaves small mismatches (a missing bias) to the
     * precise per-tensor checks below; the model's allocation stays bounded
     * by the file's size. */
    size_t need = ba_config_num_params(&cfg), have = 0;
    for (int i = 0; i < ba_st_count(st); i++)
        have += ba_st_get(st, i)->nbytes;
    if (need > (have + ((size_t)1 << 20)) / sizeof(float))
        return ba_fail(err, BA_ERR_FORMAT,
                       "checkpoint config describes %zu parameters (%zu bytes as F32) but the "
                       "file holds only %zu bytes of tensor data",
                       need, need * sizeof(float), have);
    ba_model *m;
    if ((rc = ba_model_init(&m, &cfg, why)) != BA_OK)
        return ba_fail(err, rc, "checkpoint config: %s", why);
    int nt = ba_model_num_tensors(m);
    size_t P = ba_model_num_params(m);
    ba_real *params = ba_model_params(m);
    /* The descriptions are fetched once: a name lookup through the model
     * API per file tensor would cost a walk over all tensors each time. */
    ba_tensor_info *infos = malloc((size_t)(nt > 0 ? nt : 0) * sizeof *infos + 1);
    if (!infos)
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate %d tensor descriptions", nt);
    for (int i = 0; i < nt && rc == BA_OK; i++) {
        ba_tensor_info *t = &infos[i];
        if (ba_model_tensor(m, i, t) != BA_OK || t->ndim < 0 || t->ndim > 3 ||
            t->offset > P || t->size > P - t->offset)
            rc = ba_fail(err, BA_ERR_ARG, "model tensor %d does not lie inside the %zu parameters",
                         i, P);
    }
    for (int i = 0; i < nt && rc == BA_OK; i++) {
        const ba_st_tensor *ft = ba_st_find(st, infos[i].name);
        if (!ft)
            rc = missing_tensor(st, &cfg, infos[i].name, err);
        else
            rc = load_tensor(ft, &infos[i], params, err);
    }
    if (rc == BA_OK)
        rc = ba_model_check_band(m, "checkpoint", err);
    /* The checksum, when the file has one (files from other writers may
     * not), covers the tensor data in the model's order. */
    const char *sum = ba_st_metadata(st, "checksum");
    if (rc == BA_OK && sum) {
        uint64_t h = BA_FNV_INIT;
        for (int i = 0; i < nt; i++) {
            const ba_st_tensor *ft = ba_st_find(st, infos[i].name);
            h = ba_fnv1a64(h, ft->data, ft->nbytes);
        }
        char want[32];
        snprintf(want, sizeof want, "fnv1a64:%016llx", (unsigned long long)h);
        if (strcmp(sum, want) != 0)
            rc = ba_fail(err, BA_ERR_FORMAT,
                         "checksum mismatch: the file says %.40s but its tensor data gives %s "
                         "(the data is corrupt)",
                         sum, want);
    }
    /* Every model tensor was found and file names are unique, so any
     * further file tensor is one the model does not have. */
    if (rc == BA_OK && ba_st_count(st) > nt) {
        for (int i = 0; i < ba_st_count(st) && rc == BA_OK; i++) {
            const char *name = ba_st_get(st, i)->name;
            int k = 0;
            while (k < nt && strcmp(infos[k].name, name) != 0)
                k++;
            if (k == nt)
                rc = ba_fail(err, BA_ERR_FORMAT,
                             "tensor '%s' in the file is not a parameter of the model", name);
        }
    }
    free(infos);
    if (rc != BA_OK) {
        ba_model_free(m);
        return rc;
    }
    *out = m;
    return BA_OK;
}

int ba_checkpoint_load(const char *path, ba_model **out, ba_data_spec *spec, char *err)
{
    if (!path || !out)
        return ba_fail(err, BA_ERR_ARG, "ba_checkpoint_load: path and out must not be NULL");
    *out = NULL;
    ba_st *st;
    int rc = ba_st_read(&st, path, err);
    if (rc != BA_OK)
        return rc;
    rc = load_checkpoint(st, out, spec, err);
    ba_st_free(st);
    return rc;
}

int ba_grads_save(const char *path, const ba_model *m, double loss, char *err)
{
    if (!path || !m)
        return ba_fail(err, BA_ERR_ARG, "ba_grads_save: path and model must not be NULL");
    float l = to_f32(loss);
    ba_st_entry lead;
    memset(&lead, 0, sizeof lead);
    lead.name = "loss";
    lead.dtype = BA_DT_F32;
    lead.ndim = 1;
    lead.shape[0] = 1;
    lead.data = &l;
    /* Read only, as in ba_checkpoint_save. Non-finite gradients are
     * written as they are: this file is for inspecting them. */
    const ba_real *grads = ba_model_grads((ba_model *)m);
    return save_model_values(path, m, grads, &lead, 1, 0, "gradient", NULL, NULL, 0, err);
}

/* ---------------------------------------------------------- batches */

int ba_batch_save(const char *path, const int *inputs, const int *targets, int B, int T,
                  char *err)
{
    if (!path || !inputs || !targets)
        return ba_fail(err, BA_ERR_ARG, "ba_batch_save: path, inputs and targets must not be NULL");
    if (B < 1 || T < 1)
        return ba_fail(err, BA_ERR_ARG, "ba_batch_save: B = %d and T = %d must be >= 1", B, T);
    ba_st_entry e[2];
    memset(e, 0, sizeof e);
    const char *names[2] = {"inputs", "targets"};
    const int *data[2] = {inputs, targets};
    for (int i = 0; i < 2; i++) {
        e[i].name = names[i];
        e[i].dtype = BA_DT_I32;
        e[i].ndim = 2;
        e[i].shape[0] = B;
        e[i].shape[1] = T;
        e[i].data = data[i];
    }
    return ba_st_write(path, e, 2, NULL, NULL, 0, err);
}

/* A batch tensor: I32, 2-D, both dimensions in [1, INT_MAX]. */
static int batch_tensor(const ba_st *st, const char *name, const ba_st_tensor **out, char *err)
{
    const ba_st_tensor *t = ba_st_find(st, name);
    if (!t)
        return ba_fail(err, BA_ERR_FORMAT, "batch file has no '%s' tensor", name);
    char s[96];
    ba_format_shape(s, sizeof s, t->ndim, t->shape);
    if (t->dtype != BA_DT_I32)
        return ba_fail(err, BA_ERR_FORMAT, "batch tensor '%s' has dtype %s, expected I32", name,
                       ba_dtype_name(t->dtype));
    if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1 || t->shape[0] > INT_MAX ||
        t->shape[1] > INT_MAX)
        return ba_fail(err, BA_ERR_FORMAT,
                       "batch tensor '%s' has shape %s, expected [B, T] with B, T >= 1", name, s);
    *out = t;
    return BA_OK;
}

int ba_batch_load(const char *path, int **inputs, int **targets, int *B, int *T, char *err)
{
    if (!path || !inputs || !targets || !B || !T)
        return ba_fail(err, BA_ERR_ARG, "ba_batch_load: no argument may be NULL");
    *inputs = *targets = NULL;
    ba_st *st;
    int rc = ba_st_read(&st, path, err);
    if (rc != BA_OK)
        return rc;
    const ba_st_tensor *ti = NULL, *tt = NULL;
    if ((rc = batch_tensor(st, "inputs", &ti, err)) == BA_OK &&
        (rc = batch_tensor(st, "targets", &tt, err)) == BA_OK &&
        (ti->shape[0] != tt->shape[0] || ti->shape[1] != tt->shape[1])) {
        char a[96], b[96];
        ba_format_shape(a, sizeof a, ti->ndim, ti->shape);
        ba_format_shape(b, sizeof b, tt->ndim, tt->shape);
        rc = ba_fail(err, BA_ERR_FORMAT, "batch shapes differ: inputs %s, targets %s", a, b);
    }
    if (rc == BA_OK) {
        /* nbytes was checked against the file size by the reader. */
        int *in = malloc(ti->nbytes), *tg = malloc(tt->nbytes);
        if (!in || !tg) {
            free(in);
            free(tg);
            rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate a batch of %zu bytes", ti->nbytes);
        } else {
            memcpy(in, ti->data, ti->nbytes);
            memcpy(tg, tt->data, tt->nbytes);
            *inputs = in;
            *targets = tg;
            *B = (int)ti->shape[0];
            *T = (int)ti->shape[1];
        }
    }
    ba_st_free(st);
    return rc;
}


int ba_batch_check(const ba_config *cfg, const int *inputs, const int *targets, int B, int T,
                   char *err)
{
    if (!cfg || !inputs || !targets)
        return ba_fail(err, BA_ERR_ARG, "ba_batch_check: no argument may be NULL");
    int rc = ba_inputs_check(cfg, inputs, B, T, err);
    if (rc)
        return rc;
    size_t N = (size_t)B * (size_t)T, n_targets = 0;
    /* Where a target sits is said as the file's own coordinates (batch
     * row, position), not the flat index a model's rows are laid out in. */
    for (size_t i = 0; i < N; i++) {
        int tg = targets[i], t = (int)(i % (size_t)T);
        if (tg == -1)
            continue;
        if (cfg->head == BA_HEAD_POINTER && (tg < 0 || tg >= t))
            return ba_fail(err, BA_ERR_ARG,
                           "target %d at batch %zu position %d must point at an earlier "
                           "position in [0, %d)",
                           tg, i / (size_t)T, t, t);
        if (cfg->head != BA_HEAD_POINTER && (tg < 0 || tg >= cfg->out_size))
            return ba_fail(err, BA_ERR_ARG,
                           "target %d at batch %zu position %d is outside [0, %d) (or -1 for "
                           "none)",
                           tg, i / (size_t)T, t, cfg->out_size);
        n_targets++;
    }
    /* A loss over no targets would be reported as 0, a perfect score. */
    if (n_targets == 0)
        return ba_fail(err, BA_ERR_ARG,
                       "the batch has no targets (all %zu are -1): there is no loss to compute",
                       N);
    return BA_OK;
}
