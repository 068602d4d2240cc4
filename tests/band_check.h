/* What the band engine's tests share (test_band.c: the paths, the band
 * layout, the arguments; test_band_dense.c: the dense entry points against
 * the reference): their tolerances, the inputs, the scaled error they
 * compare gradients by and the record of the worst errors. Needs <cmocka.h>
 * (after its own prerequisites), <math.h>, <stdlib.h> and "model/model.h". */
#ifndef BA_TEST_BAND_CHECK_H
#define BA_TEST_BAND_CHECK_H

#define TWIN_TOL 1e-12
#define LONG_TOL 1e-10

static inline double uniform(ba_rng *r, double a) { return a * (2.0 * ba_rng_uniform(r) - 1.0); }

/* Couplings for band W: in-band entries (0 < k-j <= W) of size a (normal
 * when normal is set, else uniform in [-a, a]); out-of-band upper entries
 * garbage (uniform +-50) in Jg and 0 in Jz; lower triangle and diagonal NaN
 * in both (no engine may read them). */
static inline void fill_band(ba_rng *r, int T, int W, double a, int normal, double *Jg, double *Jz)
{
    for (int j = 0; j < T; j++)
        for (int k = 0; k < T; k++) {
            size_t e = (size_t)j * T + k;
            if (j >= k) {
                Jg[e] = Jz[e] = NAN;
            } else if (k - j <= W) {
                Jg[e] = Jz[e] = normal ? a * ba_rng_normal(r) : uniform(r, a);
            } else {
                Jg[e] = uniform(r, 50.0);
                Jz[e] = 0.0;
            }
        }
}

static inline double *alloc_d(size_t n)
{
    double *p = malloc(sizeof(double) * (n ? n : 1));
    assert_non_null(p);
    return p;
}

/* Worst |a - b| / (1 + max |b|) over the entries where mask (may be NULL)
 * is set, i.e. j < k. */
static inline double scaled_err(const double *a, const double *b, size_t n,
                                const unsigned char *mask)
{
    double mb = 0.0, d = 0.0;
    for (size_t i = 0; i < n; i++)
        if (!mask || mask[i]) {
            mb = fmax(mb, fabs(b[i]));
            d = fmax(d, fabs(a[i] - b[i]));
        }
    return d / (1.0 + mb);
}

typedef struct {
    double logw, dh, dJ;
} twin_err;

#endif
