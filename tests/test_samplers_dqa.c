/* Tests of the dqa sampler's simulator (spec section 7,
 * src/ising/samplers.c): energies, the Boltzmann distribution, the phase,
 * single steps, whole Trotterised schedules, the norm, the Trotter error,
 * the limits of the anneal and the thread count. The shots, the fits,
 * Gibbs, SA and the API are tested in test_samplers.c.
 *
 * References written here, independently of the library:
 *   - energies by brute force over the spins of each state (sampler_ref.h);
 *   - a slow DQA twin: one full pass per qubit and libm's sin/cos;
 *   - dense 2^n x 2^n Hamiltonians and their exponentials by scaling and
 *     squaring of the Taylor series in complex double (n <= 6), for single
 *     Trotter steps, whole Trotterised schedules, and the unsplit evolution
 *     with fine time steps (the reference of the Trotter error).
 * Each check names its tolerance where it is made. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "sampler_ref.h"

typedef double complex cplx;

/* --------------------------------------------------------- slow twin */

/* exp(i a X_j) on the whole state, one pass, pairs (x, x | 2^j). */
static void twin_rotate(int n, double *re, double *im, int j, double a)
{
    double c = cos(a), s = sin(a);
    size_t N = (size_t)1 << n, w = (size_t)1 << j;
    for (size_t x = 0; x < N; x++)
        if (!(x & w)) {
            double u = re[x], v = im[x], p = re[x | w], q = im[x | w];
            re[x] = c * u - s * q;
            im[x] = c * v + s * p;
            re[x | w] = c * p - s * v;
            im[x | w] = c * q + s * u;
        }
}

static void twin_phase(int n, double *re, double *im, const double *E, double coef)
{
    for (size_t x = 0; x < ((size_t)1 << n); x++) {
        double t = coef * E[x], c = cos(t), s = sin(t), u = re[x], v = im[x];
        re[x] = u * c + v * s;
        im[x] = v * c - u * s;
    }
}

static void twin_driver(int n, double *re, double *im, double a)
{
    for (int j = 0; j < n; j++)
        twin_rotate(n, re, im, j, a);
}

/* ------------------------------------------------- dense linear algebra */

static double norm1(int N, const cplx *A)
{
    double m = 0.0;
    for (int c = 0; c < N; c++) {
        double s = 0.0;
        for (int r = 0; r < N; r++)
            s += cabs(A[r * N + c]);
        m = fmax(m, s);
    }
    return m;
}

static void matmul(int N, const cplx *A, const cplx *B, cplx *C)
{
    for (int i = 0; i < N; i++)
        for (int k = 0; k < N; k++) {
            cplx s = 0;
            for (int j = 0; j < N; j++)
                s += A[i * N + j] * B[j * N + k];
            C[i * N + k] = s;
        }
}

/* out = exp(A) by scaling and squaring: A / 2^q with norm <= 1/4, Taylor
 * until a term is below 1e-20 relative, then q squarings. */
static void expm(int N, const cplx *A, cplx *out)
{
    size_t NN = (size_t)N * N;
    cplx *S = malloc(sizeof(cplx) * NN), *term = malloc(sizeof(cplx) * NN),
         *tmp = malloc(sizeof(cplx) * NN);
    assert_non_null(S), assert_non_null(term), assert_non_null(tmp);
    double nrm = norm1(N, A);
    int q = nrm > 0.25 ? (int)ceil(log2(nrm / 0.25)) : 0;
    double scale = ldexp(1.0, -q);
    for (size_t i = 0; i < NN; i++)
        S[i] = term[i] = (i % (N + 1) == 0) ? 1.0 : 0.0;
    for (int k = 1; k < 40; k++) {
        matmul(N, term, A, tmp);
        for (size_t i = 0; i < NN; i++)
            term[i] = tmp[i] * (scale / k);
        for (size_t i = 0; i < NN; i++)
            S[i] += term[i];
        if (norm1(N, term) < 1e-20)
            break;
    }
    for (int i = 0; i < q; i++) {
        matmul(N, S, S, tmp);
        memcpy(S, tmp, sizeof(cplx) * NN);
    }
    memcpy(out, S, sizeof(cplx) * NN);
    free(S), free(term), free(tmp);
}

static void matvec(int N, const cplx *A, cplx *v)
{
    cplx *w = malloc(sizeof(cplx) * N);
    assert_non_null(w);
    for (int i = 0; i < N; i++) {
        cplx s = 0;
        for (int j = 0; j < N; j++)
            s += A[i * N + j] * v[j];
        w[i] = s;
    }
    memcpy(v, w, sizeof(cplx) * N);
    free(w);
}

/* v <- exp(-i t H) v for the dense H(s) = xw (-gamma sum X) + pw lambda diag(E):
 * the driver part with weight xw and the problem part with weight pw. */
static void dense_evolve(int n, const double *E, double gamma, double lambda, double xw,
                         double pw, double t, cplx *v)
{
    int N = 1 << n;
    cplx *A = calloc((size_t)N * N, sizeof(cplx)), *U = malloc(sizeof(cplx) * N * N);
    assert_non_null(A), assert_non_null(U);
    for (int x = 0; x < N; x++) {
        A[x * N + x] = -I * t * pw * lambda * E[x];
        for (int j = 0; j < n; j++)
            A[x * N + (x ^ (1 << j))] = -I * t * xw * -gamma;
    }
    expm(N, A, U);
    matvec(N, U, v);
    free(A), free(U);
}

/* The Trotterised schedule of s with dense exponentials of each factor
 * (the same splitting as the library, none of its code). */
static void dense_trotter(const ba_sampler *s, int n, const double *E, cplx *v)
{
    int N = 1 << n, M = s->trotter_steps;
    double dt = s->tau / M;
    for (int x = 0; x < N; x++)
        v[x] = 1.0 / sqrt((double)N);
    for (int k = 0; k < M; k++) {
        double sk = (k + 0.5) / M;
        if (s->order == 2)
            dense_evolve(n, E, s->gamma, s->lambda, 0.0, sk, 0.5 * dt, v);
        dense_evolve(n, E, s->gamma, s->lambda, 1.0 - sk, 0.0, dt, v);
        dense_evolve(n, E, s->gamma, s->lambda, 0.0, sk, s->order == 2 ? 0.5 * dt : dt, v);
    }
}

/* The unsplit evolution: Mf steps of exp(-i dt H(s_k)) at the midpoints. */
static void dense_fine(const ba_sampler *s, int n, const double *E, int Mf, cplx *v)
{
    int N = 1 << n;
    double dt = s->tau / Mf;
    for (int x = 0; x < N; x++)
        v[x] = 1.0 / sqrt((double)N);
    for (int k = 0; k < Mf; k++) {
        double sk = (k + 0.5) / Mf;
        dense_evolve(n, E, s->gamma, s->lambda, 1.0 - sk, sk, dt, v);
    }
}

/* ||fast - v||_2 */
static double state_dist(int n, const double *re, const double *im, const cplx *v)
{
    double d = 0.0;
    for (size_t x = 0; x < ((size_t)1 << n); x++) {
        cplx e = re[x] + I * im[x] - v[x];
        d += creal(e) * creal(e) + cimag(e) * cimag(e);
    }
    return sqrt(d);
}

/* The library's whole schedule, final phase included. */
static void fast_state(const ba_sampler *s, int n, const double *E, double *re, double *im)
{
    char err[BA_ERR_LEN];
    assert_int_equal(ba_sampler_validate(s, err), BA_OK);
    assert_int_equal(ba_dqa_evolve(s, n, E, re, im, 1), BA_OK);
}

/* ------------------------------------------------------------ DQA tests */

static void test_energies(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 11);
    for (int n = 1; n <= 11; n++) {
        double h[16], J[16 * 16], E[1 << 11], Eb[1 << 11], scratch[1 << 10];
        instance(&r, n, 13, 1.0, 0.5, h, J);
        for (int withh = 0; withh < 2; withh++) {
            ba_dqa_energies(n, withh ? h : NULL, J, 13, E, scratch);
            brute_energies(n, withh ? h : NULL, J, 13, Eb);
            for (int x = 0; x < (1 << n); x++)
                assert_true(fabs(E[x] - Eb[x]) <= 1e-12 * (1 + fabs(Eb[x])));
        }
    }
}

/* The library's Boltzmann distribution against brute force: 1e-12
 * relative, at several temperatures; h = NULL is h = 0. */
static void test_boltzmann_distribution(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 10);
    char err[BA_ERR_LEN];
    for (int n = 1; n <= 9; n++) {
        double h[9], J[81], E[512], p[512], pb[512];
        instance(&r, n, 9, 1.0, 0.5, h, J);
        for (int withh = 0; withh < 2; withh++)
            for (double beta = 0.0; beta <= 3.0; beta += 1.5) {
                assert_int_equal(
                    ba_boltzmann_distribution(n, withh ? h : NULL, J, 9, beta, p, err), BA_OK);
                brute_energies(n, withh ? h : NULL, J, 9, E);
                brute_boltzmann(n, E, beta, pb);
                for (int x = 0; x < (1 << n); x++)
                    assert_true(fabs(p[x] - pb[x]) <= 1e-12 * pb[x]);
            }
    }
}

/* The vectorised phase against libm, below and above the polynomial's
 * range (|theta| <= 1e6 uses it, larger angles fall back to libm). The
 * difference is ~1e-16 times the angle's magnitude order: bound 4e-16 *
 * (1 + |theta|), relative to the rounding of theta itself. */
static void test_phase_vs_libm(void **state)
{
    (void)state;
    int n = 13;
    size_t N = (size_t)1 << n;
    double *E = malloc(sizeof(double) * N), *re = malloc(sizeof(double) * N),
           *im = malloc(sizeof(double) * N), *r2 = malloc(sizeof(double) * N),
           *i2 = malloc(sizeof(double) * N);
    assert_non_null(E), assert_non_null(re), assert_non_null(im), assert_non_null(r2),
        assert_non_null(i2);
    ba_rng r;
    ba_rng_seed(&r, 12);
    double coefs[] = {1e-3, 0.37, 2.0, 40.0, 1e4, 3e5};
    for (int ci = 0; ci < 6; ci++) {
        for (size_t x = 0; x < N; x++) {
            E[x] = 3.0 * ba_rng_normal(&r); /* |E| up to ~15: the last coef goes past 1e6 */
            re[x] = r2[x] = ba_rng_normal(&r);
            im[x] = i2[x] = ba_rng_normal(&r);
        }
        ba_dqa_phase(n, re, im, E, coefs[ci]);
        twin_phase(n, r2, i2, E, coefs[ci]);
        for (size_t x = 0; x < N; x++) {
            double a = hypot(r2[x], i2[x]), tol = 4e-16 * (1 + fabs(coefs[ci] * E[x])) * (1 + a);
            assert_true(fabs(re[x] - r2[x]) <= tol);
            assert_true(fabs(im[x] - i2[x]) <= tol);
        }
    }
    free(E), free(re), free(im), free(r2), free(i2);
}

/* One fused step against the dense product exp(i a sum X) exp(-i c E),
 * n = 1..6: 1e-13 (measured ~1e-15). */
static void test_step_vs_dense(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 13);
    for (int n = 1; n <= 6; n++) {
        int N = 1 << n;
        double h[6], J[36], E[64], scratch[32], re[64], im[64];
        cplx v[64];
        instance(&r, n, 6, 1.0, 0.3, h, J);
        ba_dqa_energies(n, h, J, 6, E, scratch);
        for (int x = 0; x < N; x++) {
            re[x] = ba_rng_normal(&r), im[x] = ba_rng_normal(&r);
            v[x] = re[x] + I * im[x];
        }
        double coef = 0.31, a = 0.47;
        ba_dqa_step(n, re, im, E, coef, a);
        dense_evolve(n, E, 1.0, 1.0, 0.0, 1.0, coef, v); /* exp(-i coef E) */
        dense_evolve(n, E, 1.0, 1.0, 1.0, 0.0, a, v);    /* exp(-i a (-sum X)) */
        assert_true(state_dist(n, re, im, v) < 1e-13 * sqrt(N));
        /* driver only (E = NULL) */
        ba_dqa_step(n, re, im, NULL, 0.0, -0.2);
        dense_evolve(n, E, 1.0, 1.0, 1.0, 0.0, -0.2, v);
        assert_true(state_dist(n, re, im, v) < 1e-13 * sqrt(N));
    }
}

/* The blocked step against the slow twin above the block size (n > 12
 * uses the high-qubit passes; n = 20 splits them in two groups). The
 * rotations do the same arithmetic in the same qubit order, so the states
 * agree to the phase's ~1e-16; bound 1e-14. */
static void test_step_vs_twin(void **state)
{
    (void)state;
    int ns[] = {3, 12, 13, 16, 20};
    ba_rng r;
    ba_rng_seed(&r, 14);
    for (int t = 0; t < 5; t++) {
        int n = ns[t];
        size_t N = (size_t)1 << n;
        double h[20], J[400];
        double *E = malloc(sizeof(double) * N), *sc = malloc(sizeof(double) * N),
               *re = malloc(sizeof(double) * N), *im = malloc(sizeof(double) * N),
               *r2 = malloc(sizeof(double) * N), *i2 = malloc(sizeof(double) * N);
        assert_true(E && sc && re && im && r2 && i2);
        instance(&r, n, 20, 1.0, 0.3, h, J);
        ba_dqa_energies(n, h, J, 20, E, sc);
        for (size_t x = 0; x < N; x++) {
            re[x] = r2[x] = ba_rng_normal(&r);
            im[x] = i2[x] = ba_rng_normal(&r);
        }
        ba_dqa_step(n, re, im, E, 0.13, 0.29);
        twin_phase(n, r2, i2, E, 0.13);
        twin_driver(n, r2, i2, 0.29);
        double md = 0.0;
        for (size_t x = 0; x < N; x++)
            md = fmax(md, fmax(fabs(re[x] - r2[x]), fabs(im[x] - i2[x])));
        SHOW("step vs twin n = %d: max diff %.3e\n", n, md);
        assert_true(md < 1e-14);
        free(E), free(sc), free(re), free(im), free(r2), free(i2);
    }
}

/* Whole Trotterised schedules against the dense products of the same
 * factors, both orders, n = 1..5: 1e-12. */
static void test_schedule_vs_dense(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 15);
    for (int n = 1; n <= 5; n++)
        for (int order = 1; order <= 2; order++) {
            int N = 1 << n;
            double h[5], J[25], E[32], scratch[16], re[32], im[32];
            cplx v[32];
            instance(&r, n, 5, 1.0, 0.3, h, J);
            ba_dqa_energies(n, h, J, 5, E, scratch);
            ba_sampler s = dqa(1.3, 0.9, 1.4, 9, order);
            fast_state(&s, n, E, re, im);
            dense_trotter(&s, n, E, v);
            SHOW("schedule vs dense n = %d order %d: %.3e\n", n, order, state_dist(n, re, im, v));
            assert_true(state_dist(n, re, im, v) < 1e-12);
            (void)N;
        }
}

/* Norm after long schedules: 1 within 1e-12. */
static void test_norm(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 16);
    int ns[] = {9, 14};
    for (int t = 0; t < 2; t++) {
        int n = ns[t];
        size_t N = (size_t)1 << n;
        double h[14], J[196];
        double *E = malloc(sizeof(double) * N), *re = malloc(sizeof(double) * N),
               *im = malloc(sizeof(double) * N);
        assert_true(E && re && im);
        instance(&r, n, 14, 1.0, 0.3, h, J);
        ba_dqa_energies(n, h, J, 14, E, re);
        ba_sampler s = dqa(3.0, 1.0, 2.0, 200, 2);
        fast_state(&s, n, E, re, im);
        double z = 0.0;
        for (size_t x = 0; x < N; x++)
            z += re[x] * re[x] + im[x] * im[x];
        SHOW("norm n = %d: |z - 1| = %.3e\n", n, fabs(z - 1.0));
        assert_true(fabs(z - 1.0) < 1e-12);
        free(E), free(re), free(im);
    }
}

/* Trotter error ||psi_M - psi_ref|| against the unsplit evolution with
 * Mf = 2048 midpoint steps (its own error is ~(M/Mf)^2 of the errors
 * measured here): doubling M divides the error by 2 (order 1) and by 4
 * (order 2). Bands: ratio in [1.8, 2.2] and [3.6, 4.4]. */
static void test_trotter_convergence(void **state)
{
    (void)state;
    int n = 4, N = 1 << n;
    double h[4] = {0.9, -0.6, 0.4, -1.1}, J[16], E[16], scratch[8], re[16], im[16];
    for (int j = 0; j < 16; j++)
        J[j] = NAN;
    J[0 * 4 + 1] = 0.5, J[0 * 4 + 2] = -0.3, J[1 * 4 + 3] = 0.4, J[2 * 4 + 3] = 0.2,
              J[0 * 4 + 3] = -0.2, J[1 * 4 + 2] = 0.1;
    ba_dqa_energies(n, h, J, 4, E, scratch);
    ba_sampler ref = dqa(2.0, 1.0, 1.0, 1, 2);
    cplx v[16];
    dense_fine(&ref, n, E, 2048, v);
    for (int order = 1; order <= 2; order++) {
        int M0 = order == 1 ? 32 : 16;
        double err[3];
        for (int i = 0; i < 3; i++) {
            ba_sampler s = dqa(2.0, 1.0, 1.0, M0 << i, order);
            fast_state(&s, n, E, re, im);
            err[i] = state_dist(n, re, im, v);
        }
        SHOW("trotter order %d: errors %.3e %.3e %.3e at M = %d, %d, %d\n", order, err[0],
             err[1], err[2], M0, 2 * M0, 4 * M0);
        for (int i = 0; i < 2; i++) {
            double ratio = err[i] / err[i + 1];
            if (order == 1)
                assert_true(ratio > 1.8 && ratio < 2.2);
            else
                assert_true(ratio > 3.6 && ratio < 4.4);
        }
    }
    (void)N;
}

/* tau -> 0: the state stays |+>^n, a uniform distribution (1e-12). */
static void test_tau_zero_uniform(void **state)
{
    (void)state;
    ba_rng r;
    ba_rng_seed(&r, 17);
    int n = 7;
    double h[7], J[49], p[128];
    instance(&r, n, 7, 1.0, 0.3, h, J);
    char err[BA_ERR_LEN];
    ba_sampler s = dqa(1e-12, 1.0, 1.0, 10, 2);
    assert_int_equal(ba_dqa_distribution(&s, n, h, J, 7, p, err), BA_OK);
    for (int x = 0; x < 128; x++)
        assert_true(fabs(p[x] - 1.0 / 128) < 1e-12);
}

/* A slow anneal of a small instance with a clear gap ends in its ground
 * state: n = 5, fields of magnitude 0.6..1.2 and weak couplings, tau = 40,
 * M = 800, order 2. P(ground) > 0.97 (measured 0.99...). */
static void test_slow_anneal_ground_state(void **state)
{
    (void)state;
    int n = 5;
    double h[5] = {1.0, -0.8, 0.6, -1.2, 0.9}, J[25], E[32], p[32];
    for (int j = 0; j < 25; j++)
        J[j] = NAN;
    for (int j = 0; j < 5; j++)
        for (int k = j + 1; k < 5; k++)
            J[j * 5 + k] = 0.1 * ((j + k) % 3 - 1);
    brute_energies(n, h, J, 5, E);
    int g = 0;
    for (int x = 1; x < 32; x++)
        if (E[x] < E[g])
            g = x;
    char err[BA_ERR_LEN];
    ba_sampler s = dqa(40.0, 1.0, 1.0, 800, 2);
    assert_int_equal(ba_dqa_distribution(&s, n, h, J, 5, p, err), BA_OK);
    SHOW("slow anneal: P(ground) = %.6f\n", p[g]);
    assert_true(p[g] > 0.97);
    /* the fast quench of the same instance does not get there */
    ba_sampler q = dqa(0.5, 1.0, 1.0, 50, 2);
    assert_int_equal(ba_dqa_distribution(&q, n, h, J, 5, p, err), BA_OK);
    SHOW("fast quench: P(ground) = %.6f\n", p[g]);
    assert_true(p[g] < 0.2);
}

/* Results do not depend on the thread count: n = 17 runs the steps in
 * parallel; 1 and 2 threads give bit-identical distributions. */
static void test_dqa_threads(void **state)
{
    (void)state;
#ifdef _OPENMP
    int n = 17;
    size_t N = (size_t)1 << n;
    double h[17], J[17 * 17];
    ba_rng r;
    ba_rng_seed(&r, 18);
    instance(&r, n, 17, 1.0, 0.3, h, J);
    double *p1 = malloc(sizeof(double) * N), *p2 = malloc(sizeof(double) * N);
    assert_true(p1 && p2);
    char err[BA_ERR_LEN];
    ba_sampler s = dqa(1.0, 1.0, 1.0, 3, 2);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_int_equal(ba_dqa_distribution(&s, n, h, J, 17, p1, err), BA_OK);
    omp_set_num_threads(2);
    assert_int_equal(ba_dqa_distribution(&s, n, h, J, 17, p2, err), BA_OK);
    omp_set_num_threads(saved);
    assert_memory_equal(p1, p2, sizeof(double) * N);
    free(p1), free(p2);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_energies),
        cmocka_unit_test(test_boltzmann_distribution),
        cmocka_unit_test(test_phase_vs_libm),
        cmocka_unit_test(test_step_vs_dense),
        cmocka_unit_test(test_step_vs_twin),
        cmocka_unit_test(test_schedule_vs_dense),
        cmocka_unit_test(test_norm),
        cmocka_unit_test(test_trotter_convergence),
        cmocka_unit_test(test_tau_zero_uniform),
        cmocka_unit_test(test_slow_anneal_ground_state),
        cmocka_unit_test(test_dqa_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
