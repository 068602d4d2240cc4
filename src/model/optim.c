/* AdamW with global gradient clipping, and the learning-rate schedule.
 * The update works on the model's flat parameter block through its tensor
 * views (decay per tensor), in double, and refuses any update that would
 * leave a value non-finite. */
#include "model/model.h"
#include "core/vmath.h"

#include <float.h>
#include <math.h>

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
    /* Two passes: the first only checks that no parameter or moment would
     * leave the model's range (a huge rate or decay, or a squared gradient
     * beyond float), so a refused step changes nothing and a non-finite
     * value can never reach a checkpoint or a saved training state. Both
     * are vectorised loops; only a refusal walks the tensor again to name
     * the element. */
    for (int pass = 0; pass < 2; pass++)
        for (int t = 0; t < nt; t++) {
            ba_tensor_info info;
            ba_model_tensor(m, t, &info);
            double wd = info.decay ? o->weight_decay : 0.0;
            ba_real *pt = p + info.offset, *mt = mm + info.offset, *vt = vv + info.offset;
            const ba_real *gt = g + info.offset;
            adamw_coef k = {o->beta1, o->beta2, o->eps, lr, clip, wd, bc1, bc2};
            if (pass == 1) {
                adamw_apply(&k, info.size, pt, gt, mt, vt);
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
