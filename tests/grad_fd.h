/* Central finite differences for the double-precision gradient checks
 * (test_grad_f64.c: the layers; test_grad_model_f64.c: the whole model;
 * test_op.c: the op's float64 entry points):
 * the step, the tolerance and the relative error the checks compare by, and
 * the approximate engines' tight convergence. Every helper takes
 * double arrays, whatever ba_real is. Needs <cmocka.h> (after its
 * own prerequisites), <math.h> and "model/model.h".
 *
 * Measure: per tensor, ||analytic - numeric||_2 / ||numeric||_2 < 1e-6
 * (both norms below 1e-11 counts as agreement on a zero gradient). */
#ifndef BA_TEST_GRAD_FD_H
#define BA_TEST_GRAD_FD_H

#define FD_EPS 1e-5
#define REL_TOL 1e-6

static inline double rel_err(const double *a, const double *n, size_t len)
{
    double d = 0.0, nn = 0.0, na = 0.0;
    for (size_t i = 0; i < len; i++) {
        d += (a[i] - n[i]) * (a[i] - n[i]);
        nn += n[i] * n[i];
        na += a[i] * a[i];
    }
    if (sqrt(nn) < 1e-11 && sqrt(na) < 1e-11)
        return 0.0;
    return sqrt(d) / fmax(sqrt(nn), 1e-300);
}

/* Numeric gradient of f with respect to x (n entries), into g. */
typedef double (*scalar_fn)(void *ctx);
static inline void numeric_grad(scalar_fn f, void *ctx, double *x, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + FD_EPS;
        double fp = f(ctx);
        x[i] = keep - FD_EPS;
        double fm = f(ctx);
        x[i] = keep;
        g[i] = (fp - fm) / (2 * FD_EPS);
    }
}

static inline void expect_close(const char *what, const double *a, const double *n, size_t len)
{
    double e = rel_err(a, n, len);
    if (!(e < REL_TOL))
        fail_msg("%s: relative error %.3e exceeds %.0e", what, e, REL_TOL);
}

/* The approximate engines converged far below the finite differences'
 * resolution, so that the implicit gradient is the derivative of what the
 * forward returns. */
static const ba_approx TIGHT = {0.5, 1e-14, 20000};

#endif
