/* The error norm the engine-gradient tests compare by (test_fast_f32.c,
 * test_unlikely_keys.c): only the entries an engine defines count, so the
 * unused upper part of dh and lower part of dJ cannot hide or fake an
 * error. Needs <math.h> and <stddef.h>. */
#ifndef BA_TEST_GRAD_NORM_H
#define BA_TEST_GRAD_NORM_H

/* The 2-norm of a - b (b NULL: of a) over the entries j <= i of every
 * query row (dh: B*T rows of T), or over the strict upper triangle of
 * T x T (dJ, is_dj = 1). */
static double diff_norm(const double *a, const double *b, int B, int T, int is_dj)
{
    double s = 0.0;
    for (int q = 0; q < (is_dj ? T : B * T); q++)
        for (int j = is_dj ? q + 1 : 0; j < (is_dj ? T : q % T + 1); j++) {
            size_t i = (size_t)q * T + j;
            double d = a[i] - (b ? b[i] : 0.0);
            s += d * d;
        }
    return sqrt(s);
}

#endif
