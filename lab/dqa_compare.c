/* boltzattn-lab dqa --compare-samplers S: the sampler-quality table (every
 * sampler at its defaults against the exact distribution on random
 * instances); the rest of the dqa command is lab/dqa_calibrate.c. */
#include "grid.h"

#include <stdlib.h>
#include <string.h>

/* --compare-samplers: every sampler at its defaults against the exact
 * distribution, S shots each, on random instances drawn from one stream
 * (the instance, then each sampler's shots, in turn). The direct sampler's
 * figure is the shot noise of S shots alone. */
int dqa_compare_samplers(const command *c)
{
    int S, K, rc, sizes[16], ns;
    uint64_t seed;
    double hstd, jstd;
    if ((rc = get_int(c, "compare-samplers", 1, 1 << 24, &S)) ||
        (rc = get_int(c, "instances", 1, 100000, &K)) || (rc = get_u64(c, "seed", &seed)) ||
        (rc = get_double(c, "h-std", 0, 100, &hstd)) ||
        (rc = get_double(c, "j-std", 0, 100, &jstd)) ||
        (rc = get_int_list(c, "sizes", 1, 16, sizes, 16, &ns)) || (rc = apply_threads(c)))
        return rc;
    static const char *const sweep_only[] = {"ckpt", "layer", "head", "data", "tau", "steps",
                                             "lambda", "gamma", "order", "ref-steps", "n"};
    for (size_t i = 0; i < sizeof sweep_only / sizeof sweep_only[0]; i++)
        if (is_set(c, sweep_only[i]))
            return usage_error(c, "--%s does not apply with --compare-samplers", sweep_only[i]);
    printf("total variation between %d shots and the exact beta = 1 distribution (default "
           "parameters;\nthe direct sampler's is shot noise alone), %d instance%s per n:\n",
           S, K, K == 1 ? "" : "s");
    printf("%3s %4s %9s %9s %9s %9s\n", "n", "inst", "direct", "gibbs", "sa", "dqa");
    char err[BA_ERR_LEN];
    ba_rng rng;
    ba_rng_seed(&rng, seed);
    uint64_t *shots = malloc(sizeof(uint64_t) * (size_t)S);
    double *p = malloc(sizeof(double) << 16), *q = malloc(sizeof(double) << 16);
    int code = !shots || !p || !q ? fail_lib(c, "out of memory", 1) : 0;
    static const ba_sampler_kind kinds[4] = {BA_SAMPLER_DIRECT, BA_SAMPLER_GIBBS, BA_SAMPLER_SA,
                                             BA_SAMPLER_DQA};
    for (int t = 0; t < ns && !code; t++) {
        int n = sizes[t];
        size_t N = (size_t)1 << n;
        double h[16], J[16 * 16];
        for (int k = 0; k < K && !code; k++) {
            for (int j = 0; j < n; j++) {
                h[j] = hstd * ba_rng_normal(&rng);
                for (int l = 0; l < n; l++)
                    J[j * n + l] = l > j ? jstd * ba_rng_normal(&rng) : 0.0;
            }
            if (ba_boltzmann_distribution(n, h, J, n, 1.0, p, err)) {
                code = fail_lib(c, err, 1);
                break;
            }
            printf("%3d %4d", n, k);
            for (int ki = 0; ki < 4 && !code; ki++) {
                ba_sampler s = ba_sampler_default(kinds[ki]);
                s.shots = S;
                if (ba_sample(&s, n, h, J, n, &rng, shots, err)) {
                    code = fail_lib(c, err, 1);
                    break;
                }
                memset(q, 0, sizeof(double) * N);
                for (int i = 0; i < S; i++)
                    q[shots[i]] += 1.0 / S;
                printf(" %9.4f", ba_tv_distance(q, p, N));
            }
            printf("\n");
            fflush(stdout);
        }
    }
    free(shots), free(p), free(q);
    return code;
}

