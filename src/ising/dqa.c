/* Simulated diabatic quantum annealing (spec section 7): the state-vector
 * simulator behind the dqa sampler and the calibration of `boltzattn dqa`.
 * Its output distribution |psi|^2 is drawn from by src/samplers.c. */
#include "ising/ising.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ DQA
 *
 * State-vector simulation of H(t) = (1 - t/tau) H_X + (t/tau) lambda E on
 * n qubits, H_X = -gamma sum_j X_j, from |+>^n. The state lives in two
 * arrays re, im (2^n each, amplitude x at index x, bit j of x = qubit j, set
 * <=> s_j = +1): split real and imaginary parts vectorise as plain double
 * loops, where interleaved complex pairs need shuffles.
 *
 * Trotter steps (dt = tau/M, s_k = (k + 1/2)/M, the midpoint of step k):
 *   X(a) = exp(-i a H_X / gamma) = prod_j (cos a + i sin a X_j), a = dt (1 - s_k) gamma;
 *   P(c) = exp(-i c E) (diagonal), c = dt s_k lambda;
 *   order 1: psi <- P(c_k) X(a_k) psi                 (driver, then problem);
 *   order 2: psi <- P(c_k/2) X(a_k) P(c_k/2) psi     (symmetric Strang).
 * The phases of neighbouring steps commute and merge, so both orders cost M
 * driver passes and M phase passes: step k applies the pending phase (none
 * at k = 0 for order 1; c_0/2, then (c_{k-1} + c_k)/2 for order 2) and then
 * its driver. The last phase (c_{M-1}, or c_{M-1}/2) changes no |psi(x)|^2
 * and is skipped unless the caller asks for the state itself.
 *
 * The driver is one 2x2 rotation per qubit over amplitude pairs (qubits
 * taken two at a time on quadruples of amplitudes, to halve the loads and
 * stores). The other way to apply it, a Walsh-Hadamard transform, a
 * diagonal phase of the popcount and a second transform, does twice the
 * butterfly passes plus a diagonal pass, and measured 2.5-4.5 times slower
 * (bench/samplers.c, docs/performance.md). Passes are cache-blocked: one pass over
 * blocks of 2^DQA_LO_BITS contiguous amplitudes applies the pending phase
 * and the rotations of the low qubits; the high qubits go in groups, each
 * group one pass over tiles that gather 2^g chunks of 2^DQA_CHUNK_BITS
 * contiguous amplitudes (the chunks' bit patterns over the group's qubits)
 * into a small buffer. Each amplitude sees the same operations in the same
 * order whatever the number of threads, so results are bit-identical across
 * thread counts. The block sizes were chosen with bench_samplers. */

/* The hot loops are compiled twice where the toolchain can pick a version
 * at load time (GCC/clang on x86-64 glibc): AVX2 and the SSE2 baseline.
 * Floating-point contraction is off (ISO C mode), so both versions do the
 * same IEEE operations and give bit-identical results. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define BA_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef BA_SIMD_CLONES
#define BA_SIMD_CLONES
#endif

#ifndef DQA_LO_BITS
#define DQA_LO_BITS 11                    /* amplitudes per block: 2^11 (32 KiB re + im, an L1) */
#endif
#ifndef DQA_CHUNK_BITS
#define DQA_CHUNK_BITS 5                  /* contiguous amplitudes per tile chunk: 32 */
#endif
_Static_assert(DQA_LO_BITS > DQA_CHUNK_BITS, "a tile holds at least two chunks");
#define DQA_TILE (1 << DQA_LO_BITS)       /* amplitudes per tile of a high pass */
#define DQA_GROUP (DQA_LO_BITS - DQA_CHUNK_BITS) /* most high qubits per pass */

/* exp(i a X) on len amplitude pairs: (r0, i0) with the qubit at 0 and (r1, i1)
 * with it at 1. cos a + i sin a X maps (u, v) to (c u + i s v, i s u + c v). */
static inline void rotate_pairs(double *restrict r0, double *restrict i0, double *restrict r1,
                                double *restrict i1, size_t len, double c, double s)
{
    for (size_t i = 0; i < len; i++) {
        double a = r0[i], b = i0[i], x = r1[i], y = i1[i];
        r0[i] = c * a - s * y;
        i0[i] = c * b + s * x;
        r1[i] = c * x - s * b;
        i1[i] = c * y + s * a;
    }
}

/* Qubit 0 of a block: pairs of neighbours (the generic loop would run
 * pairs of length 1). */
static void rotate_q0(double *restrict re, double *restrict im, size_t len, double c, double s)
{
    for (size_t i = 0; i < len; i += 2) {
        double a = re[i], b = im[i], x = re[i + 1], y = im[i + 1];
        re[i] = c * a - s * y;
        im[i] = c * b + s * x;
        re[i + 1] = c * x - s * b;
        im[i + 1] = c * y + s * a;
    }
}

/* Qubits j and j+1 together on len quadruples (r0..r3, i0..i3: the
 * amplitudes with bits (j+1, j) = 00, 01, 10, 11): qubit j on the pairs
 * (0,1), (2,3), then qubit j+1 on (0,2), (1,3), as two single-qubit passes
 * would, with half their loads and stores. */
static inline void rotate_quads(double *restrict r0, double *restrict i0, double *restrict r1,
                                double *restrict i1, double *restrict r2, double *restrict i2,
                                double *restrict r3, double *restrict i3, size_t len, double c,
                                double s)
{
    for (size_t i = 0; i < len; i++) {
        double a0 = r0[i], b0 = i0[i], a1 = r1[i], b1 = i1[i];
        double a2 = r2[i], b2 = i2[i], a3 = r3[i], b3 = i3[i];
        double x0 = c * a0 - s * b1, y0 = c * b0 + s * a1;
        double x1 = c * a1 - s * b0, y1 = c * b1 + s * a0;
        double x2 = c * a2 - s * b3, y2 = c * b2 + s * a3;
        double x3 = c * a3 - s * b2, y3 = c * b3 + s * a2;
        r0[i] = c * x0 - s * y2, i0[i] = c * y0 + s * x2;
        r2[i] = c * x2 - s * y0, i2[i] = c * y2 + s * x0;
        r1[i] = c * x1 - s * y3, i1[i] = c * y1 + s * x3;
        r3[i] = c * x3 - s * y1, i3[i] = c * y3 + s * x1;
    }
}

/* Qubits [q0, q1) of a contiguous block of len = 2^bits amplitudes, in
 * order: qubit 0 alone (neighbours), then pairs of qubits as quadruples,
 * a last odd one alone. */
BA_SIMD_CLONES
static void rotate_block(double *re, double *im, size_t len, int q0, int q1, double c, double s)
{
    int j = q0;
    if (j == 0 && j < q1)
        rotate_q0(re, im, len, c, s), j++;
    for (; j + 1 < q1; j += 2) {
        size_t st = (size_t)1 << j;
        for (size_t b = 0; b < len; b += 4 * st)
            rotate_quads(re + b, im + b, re + b + st, im + b + st, re + b + 2 * st,
                         im + b + 2 * st, re + b + 3 * st, im + b + 3 * st, st, c, s);
    }
    if (j < q1) {
        size_t st = (size_t)1 << j;
        for (size_t b = 0; b < len; b += 2 * st)
            rotate_pairs(re + b, im + b, re + b + st, im + b + st, st, c, s);
    }
}

/* Range reduction for the phases: theta = q pi/2 + r, |r| <= pi/4, with
 * pi/2 split in a 33-bit head (q * PIO2_HI is exact for |q| < 2^20) and its
 * tail. Beyond |theta| = DQA_SINCOS_MAX a step uses libm. */
#define PIO2_HI 1.57079632673412561417e+00
#define PIO2_LO 6.07710050650619224932e-11
#define DQA_SINCOS_MAX 1.0e6
#define ROUND_MAGIC 0x1.8p52 /* (x + M) - M rounds x to an integer for |x| < 2^51 */

/* re + i im <- (re + i im) exp(-i coef E), len amplitudes. sin r and cos r
 * come from their Taylor series to r^15 and r^16 (the first omitted terms
 * are below 5e-17 at |r| = pi/4), evaluated in z = r^2 by Estrin's scheme
 * for short dependency chains; the quadrant q mod 4 picks and signs them
 * with selects on doubles so the loop vectorises. Accuracy: a few 1e-16
 * absolute. Caller guarantees |coef E| <= DQA_SINCOS_MAX. */
BA_SIMD_CLONES
static void phase_poly(double *restrict re, double *restrict im, const double *restrict E,
                       size_t len, double coef)
{
    for (size_t i = 0; i < len; i++) {
        double x = coef * E[i];
        double q = (x * (2.0 / M_PI) + ROUND_MAGIC) - ROUND_MAGIC;
        double r = (x - q * PIO2_HI) - q * PIO2_LO;
        double q4 = (0.25 * q + ROUND_MAGIC) - ROUND_MAGIC;
        double k = q - 4.0 * q4; /* q mod 4 in {-2, -1, 0, 1, 2} */
        double z = r * r, w = z * z, w2 = w * w;
        /* sin r = r + r z P(z), P = sum_{m=0..6} (-1)^(m+1) z^m / (2m+3)! */
        double p01 = -1.0 / 6.0 + z * (1.0 / 120.0);
        double p23 = -1.0 / 5040.0 + z * (1.0 / 362880.0);
        double p45 = -1.0 / 39916800.0 + z * (1.0 / 6227020800.0);
        double p6 = -1.0 / 1307674368000.0;
        double P = (p01 + w * p23) + w2 * (p45 + w * p6);
        double sn = r + r * z * P;
        /* cos r = 1 - z Q(z), Q = sum_{m=0..7} (-1)^m z^m / (2m+2)! */
        double q01 = 0.5 - z * (1.0 / 24.0);
        double q23 = 1.0 / 720.0 - z * (1.0 / 40320.0);
        double q45 = 1.0 / 3628800.0 - z * (1.0 / 479001600.0);
        double q67 = 1.0 / 87178291200.0 - z * (1.0 / 20922789888000.0);
        double Q = (q01 + w * q23) + w2 * (q45 + w * q67);
        double cs = 1.0 - z * Q;
        /* theta = q pi/2 + r: odd quadrants swap sin and cos; sin is
         * negative for q mod 4 in {2, 3}, cos for {1, 2} */
        int swap = fabs(k) == 1.0;
        double s0 = swap ? cs : sn, c0 = swap ? sn : cs;
        s0 = (k < -0.5 || k > 1.5) ? -s0 : s0;
        c0 = (k > 0.5 || k < -1.5) ? -c0 : c0;
        double a = re[i], b = im[i];
        re[i] = a * c0 + b * s0;
        im[i] = b * c0 - a * s0;
    }
}

/* The twin of phase_poly for large angles: libm's sin and cos. */
static void phase_libm(double *re, double *im, const double *E, size_t len, double coef)
{
    for (size_t i = 0; i < len; i++) {
        double x = coef * E[i], sn = sin(x), cs = cos(x), a = re[i], b = im[i];
        re[i] = a * cs + b * sn;
        im[i] = b * cs - a * sn;
    }
}

/* Largest |E(x)|, for choosing the phase path. */
static double max_abs(const double *E, size_t N)
{
    double m = 0.0;
    for (size_t x = 0; x < N; x++) {
        double a = fabs(E[x]);
        m = a > m ? a : m; /* not fmax: a libm call per element */
    }
    return m;
}

/* One fused step on the whole state: the phase exp(-i coef E) when E is
 * not NULL, then the driver prod_j (cos a + i sin a X_j). emax = max |E|. */
static void dqa_step(int n, double *re, double *im, const double *E, double emax, double coef,
                     double a)
{
    size_t N = (size_t)1 << n;
    int lo = n < DQA_LO_BITS ? n : DQA_LO_BITS;
    size_t B = (size_t)1 << lo, nblk = N >> lo;
    double c = cos(a), s = sin(a);
    int libm = E && !(fabs(coef) * emax <= DQA_SINCOS_MAX);
    double work = (double)N * (n + (E ? 8 : 0));
#pragma omp parallel for schedule(static) if (work > BA_PAR_MIN_WORK)
    for (size_t k = 0; k < nblk; k++) {
        double *r = re + k * B, *m = im + k * B;
        if (E && libm)
            phase_libm(r, m, E + k * B, B, coef);
        else if (E)
            phase_poly(r, m, E + k * B, B, coef);
        rotate_block(r, m, B, 0, lo, c, s);
    }
    /* High qubits [lo, n) in groups of at most DQA_GROUP, split evenly. */
    int nh = n - lo;
    if (nh <= 0)
        return;
    int ngroups = (nh + DQA_GROUP - 1) / DQA_GROUP;
    for (int gi = 0, q0 = lo; gi < ngroups; gi++) {
        int g = nh / ngroups + (gi < nh % ngroups);
        int cb = DQA_CHUNK_BITS, lowbits = q0 - cb; /* tile index bits below the group */
        size_t L = (size_t)1 << cb, nchunk = (size_t)1 << g;
        size_t ntiles = N >> (g + cb);
        double wk = (double)N * g;
#pragma omp parallel for schedule(static) if (wk > BA_PAR_MIN_WORK)
        for (size_t t = 0; t < ntiles; t++) {
            double br[DQA_TILE], bi[DQA_TILE];
            size_t base = ((t & (((size_t)1 << lowbits) - 1)) << cb) |
                          ((t >> lowbits) << (q0 + g));
            for (size_t ch = 0; ch < nchunk; ch++) {
                memcpy(br + ch * L, re + base + (ch << q0), sizeof(double) * L);
                memcpy(bi + ch * L, im + base + (ch << q0), sizeof(double) * L);
            }
            /* in the buffer, qubit q0 + j has stride L << j: a block rotation
             * of qubits [cb, cb + g) */
            rotate_block(br, bi, L * nchunk, cb, cb + g, c, s);
            for (size_t ch = 0; ch < nchunk; ch++) {
                memcpy(re + base + (ch << q0), br + ch * L, sizeof(double) * L);
                memcpy(im + base + (ch << q0), bi + ch * L, sizeof(double) * L);
            }
        }
        q0 += g;
    }
}

void ba_dqa_step(int n, double *re, double *im, const double *E, double coef, double a)
{
    dqa_step(n, re, im, E, E ? max_abs(E, (size_t)1 << n) : 0.0, coef, a);
}

void ba_dqa_phase(int n, double *re, double *im, const double *E, double coef)
{
    size_t N = (size_t)1 << n;
    int libm = !(fabs(coef) * max_abs(E, N) <= DQA_SINCOS_MAX);
    size_t B = N < 4096 ? N : 4096, nblk = N / B;
#pragma omp parallel for schedule(static) if (8.0 * N > BA_PAR_MIN_WORK)
    for (size_t k = 0; k < nblk; k++) {
        if (libm)
            phase_libm(re + k * B, im + k * B, E + k * B, B, coef);
        else
            phase_poly(re + k * B, im + k * B, E + k * B, B, coef);
    }
}

/* E(x) for all 2^n states, built spin by spin: with E_k the energy of
 * spins 0..k-1 and F_k(x) = sum_{j<k} J_jk s_j(x),
 *   E_{k+1}(x) = E_k(x) + h_k + F_k(x),  E_{k+1}(x | 2^k) = E_k(x) - h_k - F_k(x),
 * and F_k itself doubles from F_k(0) = -sum_{j<k} J_jk by F(x | 2^m) = F(x) + 2 J_mk.
 * O(2^n) in all instead of O(n^2 2^n). scratch holds 2^(n-1) doubles. */
void ba_dqa_energies(int n, const double *h, const double *J, int ldj, double *E,
                     double *scratch)
{
    E[0] = 0.0;
    for (int k = 0; k < n; k++) {
        size_t half = (size_t)1 << k;
        double *F = scratch, f0 = 0.0;
        for (int j = 0; j < k; j++)
            f0 -= J[(size_t)j * ldj + k];
        F[0] = f0;
        for (int m = 0; m < k; m++) {
            size_t w = (size_t)1 << m;
            double d = 2.0 * J[(size_t)m * ldj + k];
            for (size_t x = 0; x < w; x++)
                F[x | w] = F[x] + d;
        }
        double hk = h ? h[k] : 0.0;
        for (size_t x = 0; x < half; x++) {
            double e = E[x], f = hk + F[x];
            E[x | half] = e - f;
            E[x] = e + f;
        }
    }
}

/* The dqa parameters of s in range (whatever s->kind says). */
static int validate_dqa(const ba_sampler *s, char *err)
{
    if (!s)
        return ba_fail(err, BA_ERR_ARG, "sampler is NULL");
    ba_sampler d = *s;
    d.kind = BA_SAMPLER_DQA;
    d.shots = 1;
    d.beta_assumed = 1.0;
    return ba_sampler_validate(&d, err);
}

int ba_dqa_evolve(const ba_sampler *s, int n, const double *E, double *re, double *im,
                  int final_phase)
{
    size_t N = (size_t)1 << n;
    int M = s->trotter_steps;
    double dt = s->tau / M, amp = 1.0 / sqrt((double)N), emax = max_abs(E, N);
    for (size_t x = 0; x < N; x++)
        re[x] = amp, im[x] = 0.0;
    double prev = 0.0; /* c_{k-1} of the schedule, for order 2 */
    for (int k = 0; k < M; k++) {
        double sk = (k + 0.5) / M;
        double a = dt * (1.0 - sk) * s->gamma, ck = dt * sk * s->lambda;
        double pend = s->order == 1 ? prev : k == 0 ? 0.5 * ck : 0.5 * (prev + ck);
        /* order 1, k = 0: nothing pending */
        dqa_step(n, re, im, (s->order == 1 && k == 0) ? NULL : E, emax, pend, a);
        prev = ck;
    }
    if (final_phase)
        ba_dqa_phase(n, re, im, E, s->order == 1 ? prev : 0.5 * prev);
    return BA_OK;
}

/* A 64-byte aligned array of count doubles (count a power of two), or NULL. */
static double *alloc_state(size_t count)
{
    size_t bytes = sizeof(double) * (count < 8 ? 8 : count);
    return aligned_alloc(64, bytes);
}

int ba_dqa_distribution(const ba_sampler *s, int n, const double *h, const double *J, int ldj,
                        double *p, char *err)
{
    int rc = validate_dqa(s, err);
    if (rc)
        return rc;
    if (n < 1 || n > BA_DQA_MAX_SPINS)
        return ba_fail(err, n < 1 ? BA_ERR_ARG : BA_ERR_LIMIT,
                       "n = %d spins is out of range [1, %d] for the dqa simulator", n,
                       BA_DQA_MAX_SPINS);
    if (!p || (!J && n > 1) || ldj < n)
        return ba_fail(err, BA_ERR_ARG, "bad arguments (p, J or ldj = %d)", ldj);
    size_t N = (size_t)1 << n;
    double *re = alloc_state(N), *im = alloc_state(N);
    if (!re || !im) {
        free(re), free(im);
        return ba_fail(err, BA_ERR_NOMEM,
                       "cannot allocate the 2^%d-amplitude state (2 arrays of 2^%d doubles, "
                       "%.0f MiB)", n, n, ldexp(2.0 * sizeof(double), n) / 1048576.0);
    }
    /* p holds the energies during the run (im is the scratch of their
     * construction), then the probabilities. */
    ba_dqa_energies(n, h, J, ldj, p, im);
    for (size_t x = 0; x < N; x++)
        if (!isfinite(p[x])) {
            free(re), free(im);
            return ba_fail(err, BA_ERR_NUMERIC, "energy of state %zu is not finite", x);
        }
    ba_dqa_evolve(s, n, p, re, im, 0);
    double z = 0.0;
    for (size_t x = 0; x < N; x++)
        z += (p[x] = re[x] * re[x] + im[x] * im[x]);
    free(re), free(im);
    if (!(z > 0) || !isfinite(z))
        return ba_fail(err, BA_ERR_NUMERIC, "the dqa state has norm^2 %g", z);
    /* the norm is 1 to rounding (about 1e-14); make the sum exact-ish */
    for (size_t x = 0; x < N; x++)
        p[x] /= z;
    return BA_OK;
}

