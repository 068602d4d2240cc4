/* The parameter block's initial values; AdamW with global gradient
 * clipping, and the learning-rate schedule. The update works on the
 * model's flat parameter block through its tensor views (decay per
 * tensor), in double, and refuses any update that would leave a value
 * non-finite. */
#include "model/model.h"
#include "core/vmath.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---------------------------------------------------------- initial values */

void ba_model_init_weights(ba_model *m, ba_rng *rng, double j_init_std)
{
    ba_model_init_weights_std(m, rng, BA_INIT_STD, j_init_std);
}

void ba_model_init_weights_std(ba_model *m, ba_rng *rng, double init_std, double j_init_std)
{
    const ba_config *c = ba_model_config(m);
    ba_real *p = ba_model_params(m); // (P) the kinds' arrays in order
    const size_t *off = ba_model_param_offsets(m), *size = ba_model_param_kind_sizes(m);
    memset(p, 0, sizeof(ba_real) * ba_model_num_params(m));
    double proj_std = init_std / sqrt(2.0 * c->n_layer); /* residual projections */
    for (int k = 0; k < BA_NUM_P; k++) {
        double std = 0.0;
        switch (k) {
        case BA_P_TOK: case BA_P_POS: case BA_P_QKVW: case BA_P_FCW: case BA_P_HEADW: std = init_std; break;
        case BA_P_PROJW: case BA_P_FCPW: std = proj_std; break;
        case BA_P_LN1W: case BA_P_LN2W: case BA_P_LNFW:
            for (size_t i = 0; i < size[k]; i++)
                p[off[k] + i] = 1;
            break;
        default: break;
        }
        for (size_t i = 0; std > 0 && i < size[k]; i++)
            p[off[k] + i] = (ba_real)(std * ba_rng_normal(rng));
    }
    if (j_init_std > 0 && size[BA_P_J]) {
        size_t T = c->block_size, D = (size_t)ba_config_distances(c);
        ba_real *J = p + off[BA_P_J];
        /* the parameters only: pairs within the band (all of them without
         * one), or every relative distance */
        size_t reach = c->band > 0 ? (size_t)c->band : T;
        for (size_t lh = 0; lh < (size_t)c->n_layer * c->n_head; lh++) {
            if (c->couplings == BA_COUPLINGS_RELATIVE) {
                for (size_t d = 0; d < D; d++)
                    J[lh * D + d] = (ba_real)(j_init_std * ba_rng_normal(rng));
                continue;
            }
            for (size_t j = 0; j < T; j++)
                for (size_t k = j + 1; k < T && k - j <= reach; k++)
                    J[(lh * T + j) * T + k] = (ba_real)(j_init_std * ba_rng_normal(rng));
        }
    }
}

/* ---------------------------------------------------------- optimiser */

ba_adamw ba_adamw_default(void)
{
    ba_adamw o = {0.9, 0.99, 1e-8, 0.1, 1.0};
    return o;
}

double ba_lr_schedule(long step, long total, long warmup, double lr_max, double lr_min)
{
    if (warmup > 0 && step < warmup)
        return lr_max * (double)(step + 1) / (double)warmup;
    if (step >= total)
        return lr_min;
    double span = (double)(total - warmup);
    double frac = span > 0 ? (double)(step - warmup) / span : 1.0;
    return lr_min + 0.5 * (lr_max - lr_min) * (1.0 + cos(M_PI * frac));
}

/* x is finite and inside ba_real's range, so the conversion is defined
 * (false for NaN and infinities too); branch-free, so a loop over it
 * vectorises. */
static inline int fits_real(double x)
{
#ifdef BA_DOUBLE
    return fabs(x) <= DBL_MAX;
#else
    return fabs(x) <= FLT_MAX;
#endif
}

/* BA_ERR_NUMERIC naming the first gradient tensor that holds a non-finite
 * value (else the first whose squared norm overflows), scanning from the
 * head back to the embeddings: roughly the order backward computes them, so
 * the tensor named is near where the non-finite values arose. */
static int nonfinite_grad(ba_model *m, char *err)
{
    const ba_real *g = ba_model_grads(m);
    int nt = ba_model_num_tensors(m);
    for (int t = nt - 1; t >= 0; t--) {
        ba_tensor_info ti, *info = &ti;
        ba_model_tensor(m, t, info);
        size_t i = ba_first_nonfinite(g + info->offset, info->size);
        if (i < info->size)
            return ba_fail(err, BA_ERR_NUMERIC,
                           "gradient of %s is not finite ([%zu] = %g; the first such tensor from "
                           "the head back); no update made",
                           info->name, i, (double)g[info->offset + i]);
    }
    for (int t = nt - 1; t >= 0; t--) {
        ba_tensor_info ti, *info = &ti;
        ba_model_tensor(m, t, info);
        double ts = 0.0;
        for (size_t i = info->offset; i < info->offset + info->size; i++)
            ts += (double)g[i] * g[i];
        if (!isfinite(ts))
            return ba_fail(err, BA_ERR_NUMERIC,
                           "gradient of %s is not finite (its squared norm overflows); no "
                           "update made",
                           info->name);
    }
    return ba_fail(err, BA_ERR_NUMERIC, "the gradient norm is not finite; no update made");
}

/* One tensor's AdamW update, in double (the caller rounds to ba_real): its
 * coefficients, then the check and the update
 * proper, each one vectorised loop (three instruction sets, src/vmath.h). */
typedef struct {
    double beta1, beta2, eps, lr, clip, wd, bc1, bc2;
} adamw_coef;

/* The largest |parameter|, |gradient|, |first moment| and second moment
 * of the block, and whether all are finite with no second moment below
 * 0: enough to prove an update safe without computing it (below). */
typedef struct {
    ba_real p, g, m, v;
    int ok;
} adamw_bound;

static inline void adamw_one(const adamw_coef *k, ba_real p, ba_real g, ba_real m, ba_real v,
                             double *np, double *nm, double *nv)
{
    double gi = g * k->clip;
    double mi = k->beta1 * m + (1.0 - k->beta1) * gi;
    double vi = k->beta2 * v + (1.0 - k->beta2) * gi * gi;
    double upd = (mi / k->bc1) / (sqrt(vi / k->bc2) + k->eps) + k->wd * p;
    *nm = mi;
    *nv = vi;
    *np = p - k->lr * upd;
}

/* 1 when every updated value of the n elements fits ba_real. */
BA_CLONES static int adamw_fits(const adamw_coef *k, size_t n, const ba_real *p,
                                const ba_real *g, const ba_real *m, const ba_real *v)
{
    int ok = 1;
#pragma omp simd reduction(& : ok)
    for (size_t i = 0; i < n; i++) {
        double np, nm, nv;
        adamw_one(k, p[i], g[i], m[i], v[i], &np, &nm, &nv);
        ok &= fits_real(np) & fits_real(nm) & fits_real(nv);
    }
    return ok;
}

BA_CLONES static void adamw_apply(const adamw_coef *k, size_t n, ba_real *p, const ba_real *g,
                                  ba_real *m, ba_real *v)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        double np, nm, nv;
        adamw_one(k, p[i], g[i], m[i], v[i], &np, &nm, &nv);
        p[i] = (ba_real)np, m[i] = (ba_real)nm, v[i] = (ba_real)nv;
    }
}

/* Elements per unit of the update's parallel loop: fixed, so that the
 * thread count never changes which element is computed how (each is
 * independent anyway). */
#define ADAMW_CHUNK 16384

/* adamw_apply over a whole tensor, its chunks shared among the threads
 * when it is large enough to pay for them. */
static void adamw_apply_par(const adamw_coef *k, size_t n, ba_real *p, const ba_real *g,
                            ba_real *m, ba_real *v)
{
    size_t nc = (n + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
#pragma omp parallel for schedule(static) if (40.0 * n > BA_PAR_MIN_WORK && nc > 1)
    for (size_t c = 0; c < nc; c++) {
        size_t lo = c * ADAMW_CHUNK, len = n - lo < ADAMW_CHUNK ? n - lo : ADAMW_CHUNK;
        adamw_apply(k, len, p + lo, g + lo, m + lo, v + lo);
    }
}

/* The largest magnitudes in n elements of the parameters, gradients and
 * moments, max-reduced into mx[0..3] (|p|, |g|, |m|, v); *ok becomes 0 when
 * a value is not finite or a second moment is negative. Maxima are exact
 * whatever the order, so the loop may be vectorised and split freely. */
BA_CLONES static void block_maxima(size_t n, const ba_real *p, const ba_real *g,
                                   const ba_real *m, const ba_real *v, ba_real *mx, int *ok)
{
    ba_real a = mx[0], b = mx[1], c = mx[2], d = mx[3];
    int f = 1;
#pragma omp simd reduction(max : a, b, c, d) reduction(& : f)
    for (size_t i = 0; i < n; i++) {
        ba_real ap = p[i] < 0 ? -p[i] : p[i], ag = g[i] < 0 ? -g[i] : g[i];
        ba_real am = m[i] < 0 ? -m[i] : m[i];
        f &= fits_real(ap) & fits_real(ag) & fits_real(am) & fits_real(v[i]) & (v[i] >= 0);
        a = ap > a ? ap : a, b = ag > b ? ag : b, c = am > c ? am : c, d = v[i] > d ? v[i] : d;
    }
    mx[0] = a, mx[1] = b, mx[2] = c, mx[3] = d;
    *ok &= f;
}

/* The bound of the whole block (adamw_bound): one parallel pass of
 * fixed chunks, its maxima combined in chunk order (exact either way). */
static void adamw_bound_of(ba_model *m, adamw_bound *bd)
{
    size_t P = ba_model_num_params(m), nc = (P + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
    const ba_real *p = ba_model_params(m), *g = ba_model_grads(m); // (P)
    const ba_real *mm = ba_model_adam_m(m), *vv = ba_model_adam_v(m); // (P)
    ba_real mx[4] = {0, 0, 0, 0};
    int ok = 1;
#pragma omp parallel if (4.0 * P > BA_PAR_MIN_WORK && nc > 1)
    {
        ba_real t[4] = {0, 0, 0, 0};
        int tok = 1;
#pragma omp for schedule(static) nowait
        for (size_t c = 0; c < nc; c++) {
            size_t lo = c * ADAMW_CHUNK, len = P - lo < ADAMW_CHUNK ? P - lo : ADAMW_CHUNK;
            block_maxima(len, p + lo, g + lo, mm + lo, vv + lo, t, &tok);
        }
#pragma omp critical(adamw_bound)
        {
            for (int q = 0; q < 4; q++)
                mx[q] = t[q] > mx[q] ? t[q] : mx[q];
            ok &= tok;
        }
    }
    bd->ok = ok;
    bd->p = mx[0], bd->g = mx[1], bd->m = mx[2], bd->v = mx[3];
}

/* 1 when the maxima prove that every updated parameter and moment stays
 * far inside ba_real's range, so the guard pass can be skipped: with
 * 0 <= beta <= 1, |g clip| <= G, |m'| <= M + G and 0 <= v' <= V + G^2; the
 * step m'/bc1 / (sqrt(v'/bc2) + eps) is at most (M + G) / (bc1 eps) since
 * its denominator is at least eps > 0, so |p'| <= P + |lr| ((M + G) /
 * (bc1 eps) + |wd| P). The limit 1e30 leaves eight orders of magnitude
 * below FLT_MAX for the rounding of these sums. A NaN anywhere fails the
 * comparisons. */
static int adamw_bound_holds(const ba_adamw *o, double lr, double clip, double bc1, double bc2,
                             const adamw_bound *bd)
{
    const double lim = 1e30;
    if (!bd || !bd->ok || !(o->beta1 >= 0 && o->beta1 <= 1 && o->beta2 >= 0 && o->beta2 <= 1))
        return 0;
    if (!(o->eps > 0 && bc1 > 0 && bc2 > 0 && clip >= 0 && clip <= lim && fabs(lr) <= lim &&
          fabs(o->weight_decay) <= lim))
        return 0;
    double G = (double)bd->g * clip, mb = (double)bd->m + G, vb = (double)bd->v + G * G;
    double pb = bd->p + fabs(lr) * (mb / bc1 / o->eps + fabs(o->weight_decay) * bd->p);
    return mb <= lim && vb <= lim && pb <= lim;
}

/* The refusal of an update: names the first element of the tensor whose
 * parameter or moment would leave ba_real's range. */
static int refused_update(const adamw_coef *k, const ba_tensor_info *info, const ba_real *pt,
                          const ba_real *gt, const ba_real *mt, const ba_real *vt, char *err)
{
    for (size_t i = 0; i < info->size; i++) {
        double np, nm, nv;
        adamw_one(k, pt[i], gt[i], mt[i], vt[i], &np, &nm, &nv);
        if (fits_real(np) && fits_real(nm) && fits_real(nv))
            continue;
        const char *what = !fits_real(np) ? "parameter" : !fits_real(nm) ? "first moment"
                                                                          : "second moment";
        return ba_fail(err, BA_ERR_NUMERIC,
                       "the update would make %s %s[%zu] non-finite (parameter %g, gradient %g, "
                       "lr %g); no update made",
                       what, info->name, i, (double)pt[i], (double)gt[i], k->lr);
    }
    return ba_fail(err, BA_ERR_NUMERIC, "the update of %s would leave the model's range; no "
                   "update made", info->name);
}

int ba_model_grad_norm(ba_model *m, double *norm, char *err)
{
    const ba_real *g = ba_model_grads(m); // (P)
    int nt = ba_model_num_tensors(m);
    /* tensor by tensor, so that a non-finite sum is caught (and named)
     * before it is added in */
    double ss = 0.0;
    for (int t = 0; t < nt; t++) {
        ba_tensor_info info;
        ba_model_tensor(m, t, &info);
        double ts = 0.0;
        const ba_real *gt = g + info.offset;
#pragma omp simd reduction(+ : ts)
        for (size_t i = 0; i < info.size; i++)
            ts += (double)gt[i] * gt[i];
        if (!isfinite(ts))
            return nonfinite_grad(m, err);
        ss += ts;
    }
    *norm = sqrt(ss);
    return BA_OK;
}

double ba_clip_scale(const ba_adamw *o, double norm)
{
    return (o->grad_clip > 0 && norm > o->grad_clip) ? o->grad_clip / norm : 1.0;
}

int ba_model_adamw_update(ba_model *m, const ba_adamw *o, double lr, double clip, char *err)
{
    // params, grads, both moments (P)
    ba_real *p = ba_model_params(m), *g = ba_model_grads(m), *mm = ba_model_adam_m(m), *vv = ba_model_adam_v(m);
    int nt = ba_model_num_tensors(m);
    long step = ba_model_step_count(m) + 1;
    double bc1 = 1.0 - pow(o->beta1, (double)step);
    double bc2 = 1.0 - pow(o->beta2, (double)step);
    /* A refused step must change nothing, so that a non-finite value can
     * never reach a checkpoint or a saved training state. The guard pass
     * that proves it (adamw_fits: the whole update computed once more,
     * division and square root included) cost as much as the update; a
     * pass of maxima (loads and compares only) proves it in the normal
     * case instead, and the guard runs only when that bound fails (huge
     * values, odd settings). Only a refusal walks its tensor again, to name
     * the element. The update itself is the same in both cases. */
    adamw_bound bd;
    adamw_bound_of(m, &bd);
    int guard = !adamw_bound_holds(o, lr, clip, bc1, bc2, &bd);
    for (int pass = !guard; pass < 2; pass++)
        for (int t = 0; t < nt; t++) {
            ba_tensor_info info;
            ba_model_tensor(m, t, &info);
            double wd = info.decay ? o->weight_decay : 0.0;
            ba_real *pt = p + info.offset, *mt = mm + info.offset, *vt = vv + info.offset;
            const ba_real *gt = g + info.offset;
            adamw_coef k = {o->beta1, o->beta2, o->eps, lr, clip, wd, bc1, bc2};
            if (pass == 1) {
                adamw_apply_par(&k, info.size, pt, gt, mt, vt);
                continue;
            }
            if (!adamw_fits(&k, info.size, pt, gt, mt, vt))
                return refused_update(&k, &info, pt, gt, mt, vt, err);
        }
    ba_model_set_step_count(m, step);
    /* J's unused entries (j >= k) get no gradient and no decay, so they
     * stay exactly zero and a checkpoint shows only what the model uses. */
    return BA_OK;
}

/* The update in one call (the public API): norm, clip, AdamW. */
int ba_model_step(ba_model *m, const ba_adamw *o, double lr, double *grad_norm, char *err)
{
    double norm;
    int rc = ba_model_grad_norm(m, &norm, err);
    if (rc)
        return rc;
    if (grad_norm)
        *grad_norm = norm;
    return ba_model_adamw_update(m, o, lr, ba_clip_scale(o, norm), err);
}
