/* Sampled attention (spec sections 3 and 7): the Ising marginals of every
 * query of one head, and their gradients, estimated from the shots of a
 * sampler instead of enumerated. The estimator and its bias are documented
 * in boltzattn.h ("sampled attention") and docs/internals.md.
 *
 * Determinism: query q draws its shots from its own ba_rng seeded from
 * (seed, q), and the couplings' gradient is summed over a fixed partition
 * of the queries into chunks, reduced in chunk order. Neither depends on
 * the number of threads or on the schedule, so results are bit-identical
 * for any thread count. */
#include "ising/ising.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ba_sample_ctx {
    int B, T, S;     /* shape of the stored forward; B = 0: none */
    size_t cap;      /* words allocated in shots */
    uint64_t *shots; // (B*T, S) states of query q at q*S
};

ba_sample_ctx *ba_sample_ctx_new(void) { return calloc(1, sizeof(ba_sample_ctx)); }

void ba_sample_ctx_free(ba_sample_ctx *c)
{
    if (!c)
        return;
    free(c->shots);
    free(c);
}

const uint64_t *ba_sample_ctx_shots(const ba_sample_ctx *c, int *B, int *T, int *S)
{
    if (!c || c->B == 0)
        return NULL;
    if (B)
        *B = c->B;
    if (T)
        *T = c->T;
    if (S)
        *S = c->S;
    return c->shots;
}

/* The seed of query q's generator. ba_rng_seed runs it through splitmix64,
 * so neighbouring values give unrelated streams; the odd multiplier keeps
 * (seed, q) -> seed' one-to-one in q for a fixed seed. */
static uint64_t query_seed(uint64_t seed, long q)
{
    return seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(q + 1));
}

/* Queries per chunk of the backward's dJ reduction: at most MAX_CHUNKS
 * chunks, fixed by the number of queries alone. */
#define MAX_CHUNKS 64

static int check_args(const ba_sampler *s, int B, int T, int ldj, char *err)
{
    int rc = ba_sampler_validate(s, err);
    if (rc)
        return rc;
    if (s->kind == BA_SAMPLER_EXACT)
        return ba_fail(err, BA_ERR_ARG, "sampled attention needs a sampler other than exact");
    if (B < 1 || T < 1 || ldj < T)
        return ba_fail(err, BA_ERR_ARG, "bad shape B = %d, T = %d, ldj = %d", B, T, ldj);
    if (T > ba_sampler_max_spins(s->kind))
        return ba_fail(err, BA_ERR_LIMIT, "T = %d exceeds the %s sampler's limit of %d spins", T,
                       ba_sampler_name(s->kind), ba_sampler_max_spins(s->kind));
    return BA_OK;
}

int ba_sampled_forward(ba_sample_ctx *c, const ba_sampler *s, uint64_t seed, long q0, int B, int T,
                       const double *h, const double *J, int ldj, double *logw, char *err)
{
    if (!c || !J || !logw)
        return ba_fail(err, BA_ERR_ARG, "sampled forward: context, J and logw are required");
    c->B = 0; /* no valid forward until this one succeeds */
    int rc = check_args(s, B, T, ldj, err);
    if (rc)
        return rc;
    int S = s->shots;
    long Q = (long)B * T;
    size_t need;
    if (ba_mul_size((size_t)Q, (size_t)S, &need))
        return ba_fail(err, BA_ERR_NOMEM, "%ld queries x %d shots overflow", Q, S);
    if (need > c->cap) {
        free(c->shots);
        c->cap = 0;
        if (!(c->shots = malloc(sizeof(uint64_t) * need)))
            return ba_fail(err, BA_ERR_NOMEM, "cannot keep %ld x %d shots", Q, S);
        c->cap = need;
    }
    long bad_q = Q; /* the lowest failing query, so the error reported is fixed */
    int bad_rc = BA_OK;
    char bad_err[BA_ERR_LEN] = "";
    /* Every sampler costs at least ~S n^2 per query (an energy per shot). */
    double work = (double)Q * S * T * T;
#pragma omp parallel for schedule(dynamic) if (work > BA_PAR_MIN_WORK)
    for (long q = 0; q < Q; q++) {
        int i = (int)(q % T), n = i + 1;
        size_t row = (size_t)q * T;
        uint64_t *x = c->shots + (size_t)q * S; // (S)
        ba_rng r;
        ba_rng_seed(&r, query_seed(seed, q0 + q));
        char e[BA_ERR_LEN];
        int qrc = ba_sample(s, n, h ? h + row : NULL, J, ldj, &r, x, e);
        if (qrc) {
#pragma omp critical(ba_sampled_error)
            if (q < bad_q) {
                bad_q = q, bad_rc = qrc;
                memcpy(bad_err, e, sizeof e);
            }
            continue;
        }
        int cnt[BA_SAMPLER_MAX_SPINS] = {0};
        for (int k = 0; k < S; k++)
            for (int j = 0; j < n; j++)
                cnt[j] += (int)((x[k] >> j) & 1);
        /* (count + 1/2) / (S + 1): never 0, so the row's sum stays positive */
        double lden = log((double)S + 1.0);
        for (int j = 0; j < T; j++)
            logw[row + j] = j < n ? log(cnt[j] + 0.5) - lden : -INFINITY;
    }
    if (bad_rc)
        return ba_fail(err, bad_rc, "query %ld (batch %ld, position %ld): %s", bad_q, bad_q / T,
                       bad_q % T, bad_err);
    c->B = B, c->T = T, c->S = S;
    return BA_OK;
}

int ba_sampled_backward(const ba_sample_ctx *c, const ba_sampler *s, int B, int T,
                        const double *g, double *dh, double *dJ, int ldj, char *err)
{
    if (!c || !g)
        return ba_fail(err, BA_ERR_ARG, "sampled backward: context and g are required");
    int rc = check_args(s, B, T, ldj, err);
    if (rc)
        return rc;
    if (c->B != B || c->T != T || c->S != s->shots)
        return ba_fail(err, BA_ERR_ARG,
                       "sampled backward of B = %d, T = %d, S = %d does not follow a forward of "
                       "that shape (the context holds B = %d, T = %d, S = %d)",
                       B, T, s->shots, c->B, c->T, c->S);
    int S = c->S;
    if (S < 2 || (!dh && !dJ))
        return BA_OK; /* one shot carries no covariance: the estimate is 0 */
    long Q = (long)B * T;
    int nchunk = Q < MAX_CHUNKS ? (int)Q : MAX_CHUNKS;
    size_t tt = (size_t)T * T;
    double *D = dJ ? calloc(tt * (size_t)nchunk, sizeof(double)) : NULL; // (nchunk,T,T)
    if (dJ && !D)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate %d x %d x %d coupling sums", nchunk,
                       T, T);
    int nt = ba_nthreads();
    double *Gall = malloc(sizeof(double) * (size_t)S * (size_t)nt); // (threads,S)
    if (!Gall) {
        free(D);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate %d x %d shot values", nt, S);
    }
    double gscale = (double)S / (S + 1.0);  /* dw/dm^ over the layer's 1/2 */
    double f = s->beta_assumed / (S - 1.0); /* unbiased covariance, at beta */
    double work = (double)Q * S * T * (dJ ? T : 2);
#pragma omp parallel for schedule(dynamic) num_threads(nt) if (work > BA_PAR_MIN_WORK)
    for (int ch = 0; ch < nchunk; ch++) {
        double *Gs = Gall + (size_t)S * ba_thread_id(); // (S) G of each shot
        double *Dc = D ? D + tt * (size_t)ch : NULL; // (T,T) this chunk's sum
        long q0 = Q * ch / nchunk, q1 = Q * (ch + 1) / nchunk;
        for (long q = q0; q < q1; q++) {
            int i = (int)(q % T), n = i + 1;
            const uint64_t *x = c->shots + (size_t)q * S; // (S)
            const double *gq = g + (size_t)q * T;        // (T), j <= i used
            double gsc[BA_SAMPLER_MAX_SPINS], xs[BA_SAMPLER_MAX_SPINS];
            for (int j = 0; j < n; j++)
                gsc[j] = gscale * gq[j];
            /* G(s) = sum_j g_j s_j less its constant: 2 sum_{j: s_j = +1}
             * g_j. No covariance sees the constant -sum_j g_j, and when
             * every key is unlikely g is large (1/(2 sum_j w_j)) and the
             * shots are mostly all -1, where this G is exactly 0 instead
             * of a large number the mean must cancel (src/ising_fast.c,
             * backward_n) */
            double mean = 0.0;
            for (int k = 0; k < S; k++) {
                double acc = 0.0;
                for (int j = 0; j < n; j++)
                    acc += (x[k] >> j) & 1 ? gsc[j] : 0.0;
                Gs[k] = 2.0 * acc;
                mean += Gs[k];
            }
            mean /= S;
            /* Cov^(G, y) = sum_k (G_k - mean G) y_k / (S - 1) */
            double acch[BA_SAMPLER_MAX_SPINS] = {0};
            for (int k = 0; k < S; k++) {
                double ck = Gs[k] - mean;
                if (ck == 0.0)
                    continue;
                for (int j = 0; j < n; j++)
                    xs[j] = (x[k] >> j) & 1 ? 1.0 : -1.0;
                for (int j = 0; j < n; j++)
                    acch[j] += ck * xs[j];
                if (!Dc)
                    continue;
                for (int j = 0; j + 1 < n; j++) {
                    double u = ck * xs[j];
                    double *row = Dc + (size_t)j * T;
                    for (int l = j + 1; l < n; l++)
                        row[l] += u * xs[l];
                }
            }
            if (dh)
                for (int j = 0; j < n; j++)
                    dh[(size_t)q * T + j] += f * acch[j];
        }
    }
    free(Gall);
    if (dJ)
        for (int j = 0; j < T; j++)
            for (int l = j + 1; l < T; l++) {
                double acc = 0.0;
                for (int ch = 0; ch < nchunk; ch++)
                    acc += D[tt * (size_t)ch + (size_t)j * T + l];
                dJ[(size_t)j * ldj + l] += f * acc;
            }
    free(D);
    return BA_OK;
}

/* ------------------------------------------------------ sampler quality */

int ba_sampler_measure(const ba_sampler *s, int n, const double *h, const double *J, int ldj,
                       int shots, ba_rng *rng, ba_sampler_quality *q, char *err)
{
    int rc = ba_sampler_validate(s, err);
    if (rc)
        return rc;
    if (s->kind == BA_SAMPLER_EXACT)
        return ba_fail(err, BA_ERR_ARG, "the exact sampler has nothing to measure");
    if (n < 1 || n > BA_DQA_MAX_SPINS)
        return ba_fail(err, n < 1 ? BA_ERR_ARG : BA_ERR_LIMIT,
                       "n = %d is out of range [1, %d] for measuring a sampler", n,
                       BA_DQA_MAX_SPINS);
    if (!q || !rng || (s->kind != BA_SAMPLER_DQA && shots < 1))
        return ba_fail(err, BA_ERR_ARG, "bad arguments (q, rng or shots = %d)", shots);
    size_t N = (size_t)1 << n;
    double *p = malloc(sizeof(double) * N), *qd = calloc(N, sizeof(double));
    double *pe = malloc(sizeof(double) * N);
    uint64_t *x = NULL;
    if (!p || !qd || !pe) {
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate 3 x 2^%d probabilities", n);
        goto done;
    }
    if ((rc = ba_boltzmann_distribution(n, h, J, ldj, 1.0, p, err)))
        goto done;
    if (s->kind == BA_SAMPLER_DQA) {
        if ((rc = ba_dqa_distribution(s, n, h, J, ldj, qd, err)))
            goto done;
    } else {
        ba_sampler one = *s;
        one.shots = shots;
        if (one.kind == BA_SAMPLER_GIBBS && one.chains > shots)
            one.chains = shots;
        if (!(x = malloc(sizeof(uint64_t) * (size_t)shots))) {
            rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate %d shots", shots);
            goto done;
        }
        if ((rc = ba_sample(&one, n, h, J, ldj, rng, x, err)))
            goto done;
        for (int k = 0; k < shots; k++)
            qd[x[k]] += 1.0 / shots;
    }
    q->tv = ba_tv_distance(qd, p, N);
    q->kl = ba_kl_divergence(qd, p, N);
    rc = ba_fit_beta(n, h, J, ldj, qd, &q->beta_eff, &q->r2, err);
    if (rc == BA_ERR_NUMERIC) {
        /* Q sits on states of a single energy (a sampler frozen into one
         * state, say): no temperature fits, which is a measurement, not a
         * failure */
        q->beta_eff = q->r2 = q->tv_eff = NAN;
        rc = BA_OK;
        goto done;
    }
    if (rc)
        goto done;
    if ((rc = ba_boltzmann_distribution(n, h, J, ldj, q->beta_eff, pe, err)))
        goto done;
    q->tv_eff = ba_tv_distance(qd, pe, N);
done:
    free(p), free(qd), free(pe), free(x);
    return rc;
}
