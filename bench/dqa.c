/* bench_dqa: the DQA state-vector simulator's kernels against the memory
 * bandwidth of the same machine, and the per-shot cost of every sampler.
 *
 * Kernels, for each n (state of 2^n complex doubles, split re/im arrays):
 *   driver  ba_dqa_step without phase: prod_j (cos a + i sin a X_j), one
 *           2x2 rotation per qubit and amplitude pair, cache-blocked;
 *           reported in ns per amplitude per qubit;
 *   wht     the same operator through a Walsh-Hadamard transform, a phase
 *           of the popcount and a second transform (H^n D H^n), blocked the
 *           same way: the alternative the library does not use, timed here
 *           to justify that (and checked to give the same state);
 *   phase   ba_dqa_phase: psi <- exp(-i c E) psi (vectorised sin/cos of
 *           c E(x)); ns per amplitude;
 *   step    a fused Trotter step (phase + driver) per amplitude;
 *   stream  the bandwidth baseline: one in-place pass re, im <- (a re - b im,
 *           a im + b re) over the same 2^n amplitudes (16 bytes read and 16
 *           written per amplitude), in ns per amplitude and GB/s.
 * A kernel "at the memory limit" would take stream's time per pass; the
 * driver's ns per amplitude per qubit divided by stream's ns per amplitude
 * is the number of memory passes per qubit it costs (below 1 when blocking
 * keeps several qubits' work in cache).
 *
 * Samplers: per-shot wall time of ba_sample with default parameters
 * (256 shots) for gibbs and sa, and for dqa (the whole simulation divided
 * by its shots), on random instances h ~ N(0,1), J ~ N(0,0.3). With
 * --quality-shots S, also the total variation between the empirical
 * distribution of S shots and the exact beta = 1 distribution: the direct
 * sampler's is shot noise alone, the others' excess over it is their bias
 * at default parameters.
 *
 * Exit status: 0 ok, 1 library error, 2 bad arguments. */
#include "boltzattn.h"
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the library's vector versions of the hot loops (src/samplers.c) */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define WHT_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef WHT_CLONES
#define WHT_CLONES
#endif

#define MAX_TS 32
#define BENCH_NAME "bench_dqa"
#include "bench_common.h"

static const char *usage_text =
    "usage: bench_dqa [--n LIST] [--sampler-n LIST] [--threads N] [--min-time S]\n"
    "                 [--quality-shots S] [--quick]\n"
    "\n"
    "Times the DQA simulator's kernels (driver, phase, fused step, and a\n"
    "Walsh-Hadamard driver for comparison) next to an in-place memory pass over\n"
    "the same data, then the per-shot cost of the gibbs, sa and dqa samplers.\n"
    "\n"
    "  --n LIST          state sizes for the kernels (default 12,16,20,24; at most 24)\n"
    "  --sampler-n LIST  system sizes for the per-shot costs (default 8,12,16; at most 24)\n"
    "  --threads N       OpenMP threads (default: OMP_NUM_THREADS or all cores)\n"
    "  --min-time S      seconds of repetitions per measurement (default 0.5)\n"
    "  --quality-shots S also the total variation between S shots of each sampler\n"
    "                    (default parameters) and the exact distribution, for the\n"
    "                    sampler sizes up to 16 (default 0: skipped)\n"
    "  --quick           smoke test: n = 10,13, sampler n = 6, 0.02 s\n";

/* ------------------------------------------------------------ timing */

/* Mean seconds per call of fn over repetitions lasting min_time (after one
 * warm-up call). */
typedef void (*kernel_fn)(void *ctx);
static double time_it(kernel_fn fn, void *ctx, double min_time, int *reps)
{
    fn(ctx);
    double t0 = now_s(), t;
    int n = 0;
    do {
        fn(ctx);
        n++;
        t = now_s() - t0;
    } while (t < min_time);
    *reps = n;
    return t / n;
}

typedef struct {
    int n;
    double *re, *im, *E;
    double a, coef;
} kctx;

static void k_driver(void *c)
{
    kctx *k = c;
    ba_dqa_step(k->n, k->re, k->im, NULL, 0.0, k->a);
}

static void k_phase(void *c)
{
    kctx *k = c;
    ba_dqa_phase(k->n, k->re, k->im, k->E, k->coef);
}

static void k_step(void *c)
{
    kctx *k = c;
    ba_dqa_step(k->n, k->re, k->im, k->E, k->coef, k->a);
}

/* The bandwidth baseline: one in-place rotation of every amplitude. */
WHT_CLONES
static void k_stream(void *c)
{
    kctx *k = c;
    size_t N = (size_t)1 << k->n;
    double a = cos(k->a), b = sin(k->a), *restrict re = k->re, *restrict im = k->im;
#pragma omp parallel for schedule(static) if (N > 65536)
    for (size_t i = 0; i < N; i++) {
        double x = re[i], y = im[i];
        re[i] = a * x - b * y;
        im[i] = a * y + b * x;
    }
}

/* ------------------------------------------- Walsh-Hadamard comparison */

/* the library's block sizes (src/samplers.c) */
#define WHT_LO 11
#define WHT_CB 5

/* Unnormalised butterflies (u, v) -> (u + v, u - v) for qubits [q0, q1) of
 * a contiguous block. */
WHT_CLONES
static void wht_block(double *re, double *im, size_t len, int q0, int q1)
{
    for (int j = q0; j < q1; j++) {
        size_t st = (size_t)1 << j;
        for (size_t b = 0; b < len; b += 2 * st) {
            double *restrict r0 = re + b, *restrict i0 = im + b, *restrict r1 = re + b + st,
                             *restrict i1 = im + b + st;
            for (size_t i = 0; i < st; i++) {
                double a = r0[i], x = r1[i], c = i0[i], y = i1[i];
                r0[i] = a + x, r1[i] = a - x, i0[i] = c + y, i1[i] = c - y;
            }
        }
    }
}

/* The whole transform, blocked like the library's driver: low qubits per
 * block, high qubits in tiles gathered into a buffer. */
static void wht(int n, double *re, double *im)
{
    size_t N = (size_t)1 << n;
    int lo = n < WHT_LO ? n : WHT_LO;
    size_t B = (size_t)1 << lo;
#pragma omp parallel for schedule(static) if (N * (size_t)n > 2000000)
    for (size_t k = 0; k < N / B; k++)
        wht_block(re + k * B, im + k * B, B, 0, lo);
    int nh = n - lo, gmax = WHT_LO - WHT_CB;
    if (nh <= 0)
        return;
    int ng = (nh + gmax - 1) / gmax;
    for (int gi = 0, q0 = lo; gi < ng; gi++) {
        int g = nh / ng + (gi < nh % ng), lowbits = q0 - WHT_CB;
        size_t L = (size_t)1 << WHT_CB, nch = (size_t)1 << g, nt = N >> (g + WHT_CB);
#pragma omp parallel for schedule(static) if (N * (size_t)g > 2000000)
        for (size_t t = 0; t < nt; t++) {
            double br[1 << WHT_LO], bi[1 << WHT_LO];
            size_t base = ((t & (((size_t)1 << lowbits) - 1)) << WHT_CB) |
                          ((t >> lowbits) << (q0 + g));
            for (size_t c = 0; c < nch; c++) {
                memcpy(br + c * L, re + base + (c << q0), sizeof(double) * L);
                memcpy(bi + c * L, im + base + (c << q0), sizeof(double) * L);
            }
            wht_block(br, bi, L * nch, WHT_CB, WHT_CB + g);
            for (size_t c = 0; c < nch; c++) {
                memcpy(re + base + (c << q0), br + c * L, sizeof(double) * L);
                memcpy(im + base + (c << q0), bi + c * L, sizeof(double) * L);
            }
        }
        q0 += g;
    }
}

/* exp(i a sum X_j) = H^n diag(exp(i a (n - 2 popcount y))) H^n, with the
 * two unnormalised transforms' factor 2^n folded into the diagonal. */
typedef struct {
    kctx *k;
    double tr[BA_DQA_MAX_SPINS + 1], ti[BA_DQA_MAX_SPINS + 1];
} wctx;

static void k_wht(void *c)
{
    wctx *w = c;
    int n = w->k->n;
    size_t N = (size_t)1 << n;
    double *re = w->k->re, *im = w->k->im;
    wht(n, re, im);
#pragma omp parallel for schedule(static) if (N > 65536)
    for (size_t y = 0; y < N; y++) {
        int pc = __builtin_popcountll((unsigned long long)y);
        double a = re[y], b = im[y], cr = w->tr[pc], ci = w->ti[pc];
        re[y] = a * cr - b * ci;
        im[y] = a * ci + b * cr;
    }
    wht(n, re, im);
}

static void wctx_init(wctx *w, kctx *k)
{
    w->k = k;
    double scale = ldexp(1.0, -k->n);
    for (int pc = 0; pc <= k->n; pc++) {
        double ang = k->a * (k->n - 2 * pc);
        w->tr[pc] = scale * cos(ang), w->ti[pc] = scale * sin(ang);
    }
}

/* ------------------------------------------------------------- main */

static int parse_double(const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi))
        return 1;
    *out = x;
    return 0;
}

static void random_instance(ba_rng *r, int n, double *h, double *J)
{
    for (int j = 0; j < n; j++) {
        h[j] = ba_rng_normal(r);
        for (int k = 0; k < n; k++)
            J[j * n + k] = k > j ? 0.3 * ba_rng_normal(r) : 0.0;
    }
}

/* TV between S shots of every sampler (default parameters, S shots in one
 * call) and the exact distribution, 3 random instances per n <= 16. */
static int quality(int S, const int *sns, int nsn)
{
    printf("\ntotal variation between %d shots and the exact beta = 1 distribution (default "
           "parameters;\nthe direct sampler's is shot noise alone), 3 instances per n:\n", S);
    printf("%3s %4s %9s %9s %9s %9s\n", "n", "inst", "direct", "gibbs", "sa", "dqa");
    char err[BA_ERR_LEN];
    ba_rng rng;
    ba_rng_seed(&rng, 2);
    uint64_t *shots = malloc(sizeof(uint64_t) * S);
    double *p = malloc(sizeof(double) << 16), *c = malloc(sizeof(double) << 16);
    int rc = !shots || !p || !c;
    for (int t = 0; t < nsn && !rc; t++) {
        int n = sns[t];
        if (n > 16)
            continue;
        size_t N = (size_t)1 << n;
        double h[16], J[16 * 16];
        for (int inst = 0; inst < 3 && !rc; inst++) {
            random_instance(&rng, n, h, J);
            rc = ba_boltzmann_distribution(n, h, J, n, 1.0, p, err);
            printf("%3d %4d", n, inst);
            ba_sampler_kind kinds[4] = {BA_SAMPLER_DIRECT, BA_SAMPLER_GIBBS, BA_SAMPLER_SA,
                                        BA_SAMPLER_DQA};
            for (int ki = 0; ki < 4 && !rc; ki++) {
                ba_sampler s = ba_sampler_default(kinds[ki]);
                s.shots = S;
                if ((rc = ba_sample(&s, n, h, J, n, &rng, shots, err)))
                    break;
                memset(c, 0, sizeof(double) * N);
                for (int i = 0; i < S; i++)
                    c[shots[i]] += 1.0 / S;
                printf(" %9.4f", ba_tv_distance(c, p, N));
            }
            printf("\n");
            fflush(stdout);
        }
    }
    if (rc)
        fprintf(stderr, "bench_dqa: %s\n", shots && p && c ? err : "out of memory");
    free(shots), free(p), free(c);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    int ns[MAX_TS] = {12, 16, 20, 24}, nn = 4, sns[MAX_TS] = {8, 12, 16}, nsn = 3;
    long threads = 0, qshots = 0;
    double min_time = 0.5;
    int quick = 0, n_set = 0, sn_set = 0, mt_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (!strcmp(a, "--quick")) {
            quick = 1;
            continue;
        }
        if (strcmp(a, "--n") && strcmp(a, "--sampler-n") && strcmp(a, "--threads") &&
            strcmp(a, "--min-time") && strcmp(a, "--quality-shots"))
            return usage_error("unknown option '%s'", a);
        if (i + 1 >= argc)
            return usage_error("option %s needs a value", a);
        const char *v = argv[++i];
        int bad;
        if (!strcmp(a, "--n"))
            bad = parse_list(v, 1, BA_DQA_MAX_SPINS, ns, &nn), n_set = 1;
        else if (!strcmp(a, "--sampler-n"))
            bad = parse_list(v, 1, BA_DQA_MAX_SPINS, sns, &nsn), sn_set = 1;
        else if (!strcmp(a, "--threads"))
            bad = parse_int(v, 1, 1024, &threads);
        else if (!strcmp(a, "--quality-shots"))
            bad = parse_int(v, 0, 1 << 24, &qshots);
        else
            bad = parse_double(v, 0.0, 3600.0, &min_time), mt_set = 1;
        if (bad)
            return usage_error("bad value '%s' for %s", v, a);
    }
    if (quick) {
        if (!n_set)
            ns[0] = 10, ns[1] = 13, nn = 2;
        if (!sn_set)
            sns[0] = 6, nsn = 1;
        if (!mt_set)
            min_time = 0.02;
    }
#ifdef _OPENMP
    if (threads > 0)
        omp_set_num_threads((int)threads);
#endif
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    printf("bench_dqa: DQA state-vector kernels and per-shot sampler costs\n");
    printf("cpu: %s | OpenMP threads: %d | min time %.2g s per measurement\n", cpu,
           omp_threads(), min_time);
    printf("stream: in-place rotation pass, 32 bytes of traffic per amplitude; driver and wht "
           "in ns per\namplitude per qubit, phase and step in ns per amplitude; "
           "x stream = time / stream's time per amplitude\n\n");
    printf("%3s %9s %8s | %9s %7s | %9s %7s | %9s %7s | %9s %7s | %9s\n", "n", "stream", "GB/s",
           "driver", "x strm", "wht", "x strm", "phase", "x strm", "step", "x strm",
           "wht-drv");
    fflush(stdout);

    ba_rng rng;
    ba_rng_seed(&rng, 1);
    for (int t = 0; t < nn; t++) {
        int n = ns[t];
        size_t N = (size_t)1 << n;
        kctx k = {n, NULL, NULL, NULL, 0.37, 0.011};
        k.re = aligned_alloc(64, sizeof(double) * (N < 8 ? 8 : N));
        k.im = aligned_alloc(64, sizeof(double) * (N < 8 ? 8 : N));
        k.E = aligned_alloc(64, sizeof(double) * (N < 8 ? 8 : N));
        double *r2 = malloc(sizeof(double) * N), *i2 = malloc(sizeof(double) * N);
        double h[BA_DQA_MAX_SPINS], J[BA_DQA_MAX_SPINS * BA_DQA_MAX_SPINS];
        if (!k.re || !k.im || !k.E || !r2 || !i2) {
            fprintf(stderr, "bench_dqa: out of memory at n = %d\n", n);
            return 1;
        }
        random_instance(&rng, n, h, J);
        ba_dqa_energies(n, h, J, n, k.E, k.re);
        double amp = 1.0 / sqrt((double)N);
        for (size_t x = 0; x < N; x++)
            k.re[x] = amp, k.im[x] = 0.0;
        /* correctness of the comparison: both drivers on the same state */
        ba_dqa_phase(n, k.re, k.im, k.E, 0.3);
        memcpy(r2, k.re, sizeof(double) * N);
        memcpy(i2, k.im, sizeof(double) * N);
        wctx w;
        wctx_init(&w, &k);
        k_driver(&k);
        kctx k2 = k;
        k2.re = r2, k2.im = i2;
        wctx w2;
        wctx_init(&w2, &k2);
        k_wht(&w2);
        double diff = 0.0;
        for (size_t x = 0; x < N; x++)
            diff = fmax(diff, fmax(fabs(k.re[x] - r2[x]), fabs(k.im[x] - i2[x])));
        free(r2), free(i2);

        int reps;
        double ts = time_it(k_stream, &k, min_time, &reps) / N;
        double td = time_it(k_driver, &k, min_time, &reps) / N / n;
        double tw = time_it(k_wht, &w, min_time, &reps) / N / n;
        double tp = time_it(k_phase, &k, min_time, &reps) / N;
        double tf = time_it(k_step, &k, min_time, &reps) / N;
        printf("%3d %9.3f %8.2f | %9.3f %7.2f | %9.3f %7.2f | %9.3f %7.2f | %9.3f %7.2f | "
               "%9.1e\n",
               n, ts * 1e9, 32.0 / ts * 1e-9, td * 1e9, td / ts, tw * 1e9, tw / ts, tp * 1e9,
               tp / ts, tf * 1e9, tf / ts, diff);
        fflush(stdout);
        free(k.re), free(k.im), free(k.E);
    }
    printf("(wht-drv: max |difference| of the two drivers' states, a check of the comparison)\n");

    printf("\nper-shot cost, default parameters (256 shots per call), h ~ N(0,1), J ~ "
           "N(0,0.3):\n");
    printf("%3s %12s %12s %12s %12s   %s\n", "n", "gibbs us", "sa us", "dqa us", "dqa call ms",
           "dqa: tau, M, order");
    char err[BA_ERR_LEN];
    for (int t = 0; t < nsn; t++) {
        int n = sns[t];
        double h[BA_DQA_MAX_SPINS], J[BA_DQA_MAX_SPINS * BA_DQA_MAX_SPINS];
        random_instance(&rng, n, h, J);
        double us[3];
        ba_sampler_kind kinds[3] = {BA_SAMPLER_GIBBS, BA_SAMPLER_SA, BA_SAMPLER_DQA};
        ba_sampler d = ba_sampler_default(BA_SAMPLER_DQA);
        for (int ki = 0; ki < 3; ki++) {
            ba_sampler s = ba_sampler_default(kinds[ki]);
            uint64_t *shots = malloc(sizeof(uint64_t) * s.shots);
            if (!shots)
                return 1;
            double t0 = now_s(), el;
            int reps = 0;
            do {
                int rc = ba_sample(&s, n, h, J, n, &rng, shots, err);
                if (rc) {
                    fprintf(stderr, "bench_dqa: %s: %s\n", ba_sampler_name(kinds[ki]), err);
                    free(shots);
                    return 1;
                }
                reps++;
                el = now_s() - t0;
            } while (el < min_time);
            us[ki] = el / reps / s.shots * 1e6;
            free(shots);
        }
        printf("%3d %12.3f %12.3f %12.3f %12.3f   %g, %d, %d\n", n, us[0], us[1], us[2],
               us[2] * d.shots * 1e-3, d.tau, d.trotter_steps, d.order);
        fflush(stdout);
    }
    return qshots ? quality((int)qshots, sns, nsn) : 0;
}
