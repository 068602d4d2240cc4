/* approx --ckpt: the instances a trained checkpoint meets. Its evaluation
 * forward gives the fields of every layer and head (queries i = n-1; a
 * coupling model: the bias alone), its parameters the couplings; each
 * engine is measured on them as on the random instances (approx.c), and
 * the records are merged into the file's "checkpoints" by label. */
#include "approx.h"
/* ba_field_bias_value: the library's internal field shift */
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An opened --ckpt: its model, coupling tensors, evaluation data and
 * the buffers of one item. */
struct ax_ckpt {
    ba_model *m;
    ba_dataset *data;
    const ba_config *cfg;
    long joff[64]; /* per layer: offset of its coupling tensor */
    int T, L, H, D, exact, items;
    int *in, *tg;
};

void ax_ckpt_free(ax_ckpt *k)
{
    if (!k)
        return;
    ba_model_free(k->m), ba_dataset_free(k->data), free(k->in), free(k->tg);
    free(k);
}

/* Couplings of layer l, head hd for the first n keys as the model defines
 * them (absolute entries or relative distances, 0 beyond the band) into
 * J (n,n). */
static void ckpt_couplings(const ax_ckpt *k, int l, int hd, int n, double *J)
{
    const ba_config *cfg = k->cfg;
    int rel = cfg->couplings == BA_COUPLINGS_RELATIVE;
    const ba_real *Jh = ba_model_params(k->m) + k->joff[l] +
                        (size_t)hd * (rel ? (size_t)k->D : (size_t)k->T * k->T);
    memset(J, 0, sizeof(double) * (size_t)n * n);
    for (int j = 0; j < n; j++)
        for (int q = j + 1; q < n; q++) {
            int d = q - j;
            if (cfg->band > 0 && d > cfg->band)
                continue;
            J[j * n + q] = rel ? (d <= k->D ? (double)Jh[d - 1] : 0.0)
                               : (double)Jh[(size_t)j * k->T + q];
        }
}

/* ax_ckpt_open into k (zeroed). 0 or an exit code. */
static int ckpt_load(const command *c, const char *path, ax_study *s, ax_ckpt *k)
{
    char err[BA_ERR_LEN], name[64], *recorded = NULL;
    ba_data_spec spec;
    int st = ba_checkpoint_load(path, &k->m, &spec, err);
    if (st)
        return fail_lib(c, err, input_status(st));
    const ba_config *cfg = k->cfg = ba_model_config(k->m);
    if (cfg->attn != BA_ATTN_BOLTZMANN && cfg->attn != BA_ATTN_COUPLING)
        return usage_error(c, "%s is a %s model: it has no couplings J (boltzmann and coupling "
                              "models do)", path, ba_attn_name(cfg->attn));
    k->T = cfg->block_size, k->L = cfg->n_layer, k->H = cfg->n_head;
    int rel = cfg->couplings == BA_COUPLINGS_RELATIVE;
    k->D = ba_config_distances(cfg);
    if (k->L > 64)
        return usage_error(c, "%s has %d layers; at most 64 are read", path, k->L);
    if (!is_set(c, "window") && cfg->window > 0)
        s->window = cfg->window;
    if (!is_set(c, "n") && (k->T < 2 || k->T > AX_MAX_N))
        return usage_error(c, "%s has T = %d: the exact oracle takes 2..%d keys; give --n "
                              "(the queries i = n-1 to take, n in 2..%d)",
                           path, k->T, AX_MAX_N, k->T < AX_MAX_N ? k->T : AX_MAX_N);
    if (!is_set(c, "n"))
        s->n[0] = k->T, s->nn = 1;
    for (int i = 0; i < s->nn; i++)
        if (s->n[i] > k->T || s->n[i] > AX_MAX_N || s->n[i] < 2)
            return usage_error(c, "--n %d: %s has T = %d and the exact oracle takes 2..%d keys; "
                                  "give --n with queries in range", s->n[i], path, k->T,
                               AX_MAX_N);
    for (int l = 0; l < k->L; l++) {
        snprintf(name, sizeof name, rel ? "blocks.%d.attn.J_rel" : "blocks.%d.attn.J", l);
        int idx = ba_model_find_tensor(k->m, name);
        ba_tensor_info ti;
        if (idx < 0 || ba_model_tensor(k->m, idx, &ti) ||
            ti.size != (size_t)k->H * (rel ? (size_t)k->D : (size_t)k->T * k->T))
            return usage_error(c, "%s: tensor %s missing or of the wrong size", path, name);
        k->joff[l] = (long)ti.offset;
    }
    /* exact inference where the model can have it, so that the fields of
     * the layers above the first do not carry shot noise */
    ba_sampler exact = ba_sampler_default(BA_SAMPLER_EXACT);
    if (cfg->sampler.kind != BA_SAMPLER_EXACT &&
        ba_model_set_sampler(k->m, &exact, err) != BA_OK) {
        ba_rng_seed(ba_model_sampler_rng(k->m), BA_EVAL_SAMPLER_SEED);
        fprintf(stderr, "note: the model samples its attention (%s) at a T beyond exact "
                        "inference: the fields of layers above the first carry its shot "
                        "noise\n", ba_sampler_name(cfg->sampler.kind));
    }
    k->exact = !ba_engine_is_approx(cfg->engine) && cfg->sampler.kind == BA_SAMPLER_EXACT;
    /* a coupling model's fields are the bias alone: one item says it all */
    k->items = cfg->attn == BA_ATTN_COUPLING ? 1 : s->K;
    if (cfg->attn == BA_ATTN_COUPLING) {
        fprintf(stderr, "note: a coupling model has no query-dependent fields: one instance "
                        "per layer, head and n\n");
        return 0;
    }
    const char *dpath = NULL;
    if (spec.task == BA_TASK_CHARLM && is_set(c, "data"))
        dpath = get_str(c, "data");
    else if (spec.task == BA_TASK_CHARLM)
        dpath = (recorded = ckpt_data_path(path)) && access(recorded, R_OK) == 0
                    ? recorded
                    : default_data_path();
    st = open_dataset(&spec, k->T, dpath, 1, &k->data, err);
    free(recorded);
    if (st)
        return fail_lib(c, err, input_status(st));
    int ne = ba_dataset_num_eval(k->data);
    if (!is_set(c, "instances") && s->K > ne)
        s->K = k->items = ne; /* the default asks for 100: as many as there are */
    if (s->K > ne)
        return usage_error(c, "--instances %d: the data has %d evaluation items", s->K, ne);
    k->in = malloc(sizeof(int) * (size_t)k->T), k->tg = malloc(sizeof(int) * (size_t)k->T);
    if (!k->in || !k->tg)
        return fail_lib(c, "out of memory", 1);
    return 0;
}

/* The fields of query n-1 of layer l, head hd from the last forward (a
 * coupling model: the bias alone), into h (n). */
static int ckpt_fields(const ax_ckpt *k, int l, int hd, int n, double *h, char *err)
{
    if (k->cfg->attn == BA_ATTN_COUPLING) {
        for (int j = 0; j < n; j++)
            h[j] = -ba_field_bias_value(k->cfg->field_bias, n);
        return BA_OK;
    }
    return ba_model_fields(k->m, l, hd, 0, n - 1, h, err);
}

int ax_ckpt_open(const command *c, const char *path, ax_study *s, ax_ckpt **k)
{
    int rc;
    if (!(*k = calloc(1, sizeof **k)))
        return fail_lib(c, "out of memory", 1);
    if ((rc = ckpt_load(c, path, s, *k))) {
        ax_ckpt_free(*k);
        *k = NULL;
    }
    return rc;
}

/* Every item, layer, head and n (ax_ckpt_run, less its line). */
static int run_ckpt(const command *c, const ax_study *s, ax_ckpt *k, cJSON *recs, double *check)
{
    char err[BA_ERR_LEN];
    int L = k->L, H = k->H, T = k->T, code = 0;
    size_t per = (size_t)k->items * L * H; /* instances per (engine, n) */
    ax_inst *res = malloc(sizeof(ax_inst) * per * s->ne * s->nn);
    double *tmp = malloc(sizeof(double) * per), h[AX_MAX_N], J[AX_MAX_N * AX_MAX_N];
    ax_work w;
    if (!ax_work_init(&w, AX_MAX_N) || !res || !tmp)
        code = fail_lib(c, "out of memory", 1);
    int do_check = k->exact && k->cfg->attn == BA_ATTN_BOLTZMANN;
    *check = do_check ? 0.0 : NAN;
    for (int it = 0; it < k->items && !code; it++) {
        if (k->data) {
            ba_dataset_eval_item(k->data, it, k->in, k->tg);
            if (ba_model_forward(k->m, k->in, NULL, 1, T, NULL, err)) {
                code = fail_lib(c, err, 1);
                break;
            }
        }
        for (int ni = 0; ni < s->nn && !code; ni++)
            for (int l = 0; l < L && !code; l++)
                for (int hd = 0; hd < H && !code; hd++) {
                    int n = s->n[ni];
                    size_t idx = ((size_t)it * L + l) * H + hd;
                    ckpt_couplings(k, l, hd, n, J);
                    int st = ckpt_fields(k, l, hd, n, h, err);
                    if (!st)
                        st = ba_ising_marginals(BA_ENGINE_FAST, n, h, J, n, w.le, err);
                    if (!st && do_check) { /* the instance is the model's own query */
                        const ba_real *att = ba_model_attention(k->m, l) +
                                             ((size_t)hd * T + (n - 1)) * T;
                        double z = 0.0;
                        for (int j = 0; j < n; j++)
                            z += exp(w.le[j]);
                        for (int j = 0; j < n; j++)
                            *check = fmax(*check, fabs(exp(w.le[j]) / z - (double)att[j]));
                    }
                    for (int e = 0; e < s->ne && !st; e++)
                        st = ax_measure(s, s->eng[e], n, h, J, &w,
                                     &res[((size_t)e * s->nn + ni) * per + idx], err);
                    if (st)
                        code = fail_lib(c, err, 1);
                }
    }
    if (!code && do_check && !(*check < 1e-4)) {
        fprintf(stderr, "%s %s: the fields and couplings read give weights %g away from the "
                        "model's own attention\n", prog, c->cmd, *check);
        code = 1;
    }
    const ba_config *cfg = k->cfg;
    char variant[64], as[32] = "model";
    lab_form form = lab_form_of(cfg);
    lab_form_label(cfg->attn, &form, variant, sizeof variant);
    if (!code)
        ax_print_cell_head();
    for (int e = 0; e < s->ne && !code; e++)
        for (int ni = 0; ni < s->nn && !code; ni++) {
            ax_cell_sum cs;
            ax_summarize(&res[((size_t)e * s->nn + ni) * per], (int)per, 1, tmp, &cs);
            ax_print_cell(s->eng[e], s->n[ni], as, ba_field_bias_name(cfg->field_bias), &cs);
            cJSON *o = cJSON_CreateObject();
            if (!o || !cJSON_AddItemToArray(recs, o) ||
                !cJSON_AddStringToObject(o, "engine", ba_engine_name(s->eng[e])) ||
                !cJSON_AddNumberToObject(o, "n", s->n[ni]) ||
                !cJSON_AddStringToObject(o, "bias", ba_field_bias_name(cfg->field_bias)) ||
                !cJSON_AddStringToObject(o, "variant", variant) ||
                !cJSON_AddStringToObject(o, "model_engine",
                                         ba_engine_name(ba_config_engine(cfg))) ||
                !cJSON_AddNumberToObject(o, "T", T) || !cJSON_AddNumberToObject(o, "layers", L) ||
                !cJSON_AddNumberToObject(o, "heads", H) ||
                !cJSON_AddNumberToObject(o, "items", k->items) || !ax_add_metrics(o, &cs))
                code = fail_lib(c, "out of memory", 1);
        }
    ax_work_free(&w);
    free(res), free(tmp);
    return code;
}

int ax_ckpt_run(const command *c, const ax_study *s, ax_ckpt *k, const char *path,
                const char *label, cJSON *recs, double *check)
{
    printf("approx: %s (%s), %d item%s x %d layer%s x %d head%s, n = ", path, label, k->items,
           k->items == 1 ? "" : "s", k->L, k->L == 1 ? "" : "s", k->H, k->H == 1 ? "" : "s");
    for (int i = 0; i < s->nn; i++)
        printf("%s%d", i ? "," : "", s->n[i]);
    printf("; window %d, damping %g, tol %g, max-iter %d\n", s->window, s->ap.damping,
           s->ap.tol, s->ap.max_iter);
    return run_ckpt(c, s, k, recs, check);
}

/* The label of a checkpoint: its directory's name for DIR/model.safetensors,
 * else its file name without the extension. */
void ax_ckpt_label(const char *path, char *buf, size_t len)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strcmp(base, "model.safetensors") == 0 && base > path + 1) {
        const char *end = base - 1, *p = end;
        while (p > path && p[-1] != '/')
            p--;
        snprintf(buf, len, "%.*s", (int)(end - p), p);
    } else {
        const char *dot = strrchr(base, '.');
        int keep = (int)(dot && dot > base ? dot - base : (long)strlen(base));
        snprintf(buf, len, "%.*s", keep, base);
    }
}

int ax_ckpt_merge(const command *c, cJSON *rec, cJSON **fresh, const cJSON *set,
                  const char *path, const char *label)
{
    cJSON *old = cJSON_GetObjectItemCaseSensitive(rec, "checkpoints"), *x = old->child;
    while (x) {
        cJSON *next = x->next;
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(x, "label");
        for (cJSON *y = (*fresh)->child; cJSON_IsString(l) && !strcmp(l->valuestring, label) && y;
             y = y->next)
            if (cJSON_Compare(cJSON_GetObjectItemCaseSensitive(x, "engine"),
                              cJSON_GetObjectItemCaseSensitive(y, "engine"), 1) &&
                cJSON_Compare(cJSON_GetObjectItemCaseSensitive(x, "n"),
                              cJSON_GetObjectItemCaseSensitive(y, "n"), 1)) {
                cJSON_Delete(cJSON_DetachItemViaPointer(old, x));
                break;
            }
        x = next;
    }
    while ((*fresh)->child) {
        cJSON *y = cJSON_DetachItemViaPointer(*fresh, (*fresh)->child);
        cJSON_AddItemToArray(old, y);
        if (!cJSON_AddStringToObject(y, "label", label) ||
            !cJSON_AddStringToObject(y, "path", path) ||
            !cJSON_AddItemToObject(y, "settings", cJSON_Duplicate(set, 1)))
            return fail_lib(c, "out of memory", 1);
    }
    return 0;
}
