/* Small shared pieces every other file may use, and which use nothing
 * else of the library: status strings, error formatting, the RNG, enum
 * names and the vectorised exponential. */
#include "core/core.h"
#include "core/vmath.h"

#include <math.h>
#include <string.h>

int ba_fail(char *err, int status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, BA_ERR_LEN, fmt, ap);
        va_end(ap);
    }
    return status;
}

const char *ba_status_str(int status)
{
    switch (status) {
    case BA_OK: return "ok";
    case BA_ERR_ARG: return "bad argument";
    case BA_ERR_IO: return "i/o error";
    case BA_ERR_FORMAT: return "malformed input";
    case BA_ERR_NOMEM: return "out of memory";
    case BA_ERR_NUMERIC: return "non-finite value";
    case BA_ERR_LIMIT: return "beyond the engine's limit";
    case BA_ERR_INTERRUPTED: return "interrupted";
    default: return "unknown status";
    }
}

/* ------------------------------------------------------------------ RNG */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void ba_rng_seed(ba_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ba_rng_u64(ba_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double ba_rng_uniform(ba_rng *r) { return (double)(ba_rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t ba_rng_below(ba_rng *r, uint64_t n)
{
    if (n == 0)
        return 0;
    /* Rejection on the top of the range keeps every residue equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = ba_rng_u64(r);
    } while (x >= limit);
    return x % n;
}

double ba_rng_normal(ba_rng *r)
{
    double u1 = 1.0 - ba_rng_uniform(r); /* (0, 1], so log is finite */
    double u2 = ba_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* -------------------------------------------------------------- enums */

static const char *const attn_names[] = {"softmax", "sigmoid", "boltzmann", "coupling"};
static const char *const task_names[] = {"charlm", "brackets", "recall"};
static const char *const couplings_names[] = {"absolute", "relative"};
static const char *const field_bias_names[] = {"none", "log-n"};
static const char *const head_names[] = {"token", "pointer"};

static int parse_name(const char *s, const char *const *names, int n, int *out,
                      const char *what, char *err)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return BA_OK;
        }
    char list[128] = "";
    for (int i = 0; i < n; i++) {
        strncat(list, names[i], sizeof list - strlen(list) - 1);
        if (i + 1 < n)
            strncat(list, "|", sizeof list - strlen(list) - 1);
    }
    return ba_fail(err, BA_ERR_ARG, "unknown %s '%s' (expected %s)", what, s ? s : "(null)", list);
}

const char *ba_attn_name(ba_attn a) { return (unsigned)a < 4 ? attn_names[a] : "?"; }
const char *ba_task_name(ba_task t) { return (unsigned)t < 3 ? task_names[t] : "?"; }
const char *ba_couplings_name(ba_couplings c) { return (unsigned)c < 2 ? couplings_names[c] : "?"; }
const char *ba_field_bias_name(ba_field_bias b)
{
    return (unsigned)b < 2 ? field_bias_names[b] : "?";
}

int ba_couplings_parse(const char *s, ba_couplings *out, char *err)
{
    int v = 0;
    int rc = parse_name(s, couplings_names, 2, &v, "couplings", err);
    if (rc == BA_OK)
        *out = (ba_couplings)v;
    return rc;
}

int ba_field_bias_parse(const char *s, ba_field_bias *out, char *err)
{
    int v = 0;
    int rc = parse_name(s, field_bias_names, 2, &v, "field bias", err);
    if (rc == BA_OK)
        *out = (ba_field_bias)v;
    return rc;
}

/* ba_config.pos_emb, in ba_pos_emb's order. */
static const char *const pos_emb_names[4] = {"none", "learned", "rope", "alibi"};
const char *ba_pos_emb_name(int pos_emb)
{
    return (unsigned)pos_emb < 4 ? pos_emb_names[pos_emb] : "?";
}
int ba_pos_emb_parse(const char *s, int *pos_emb, char *err)
{
    return parse_name(s, pos_emb_names, 4, pos_emb, "position encoding", err);
}

/* The band engine's precision (ba_config.band_f32): 0 double, 1 float. */
static const char *const band_precision_names[2] = {"double", "float"};
const char *ba_band_precision_name(int f32) { return band_precision_names[f32 != 0]; }
int ba_band_precision_parse(const char *s, int *f32, char *err)
{
    return parse_name(s, band_precision_names, 2, f32, "band precision", err);
}
const char *ba_head_name(ba_head h) { return (unsigned)h < 2 ? head_names[h] : "?"; }

int ba_head_parse(const char *s, ba_head *out, char *err)
{
    int v = 0;
    int rc = parse_name(s, head_names, 2, &v, "head", err);
    if (rc == BA_OK)
        *out = (ba_head)v;
    return rc;
}

int ba_attn_parse(const char *s, ba_attn *out, char *err)
{
    int v = 0;
    int rc = parse_name(s, attn_names, 4, &v, "attention variant", err);
    if (rc == BA_OK)
        *out = (ba_attn)v;
    return rc;
}

int ba_task_parse(const char *s, ba_task *out, char *err)
{
    int v = 0;
    int rc = parse_name(s, task_names, 3, &v, "task", err);
    if (rc == BA_OK)
        *out = (ba_task)v;
    return rc;
}

ba_approx ba_approx_default(void) { return (ba_approx){0.5, 1e-8, 1000}; }

int ba_approx_validate(const ba_approx *a, char *err)
{
    if (!a)
        return ba_fail(err, BA_ERR_ARG, "approximate-engine settings are NULL");
    if (!(a->damping > 0.0 && a->damping <= 1.0))
        return ba_fail(err, BA_ERR_ARG, "damping %g is outside (0, 1] (0 would never move, "
                       "above 1 overshoots)", a->damping);
    if (!(a->tol > 0.0 && isfinite(a->tol)))
        return ba_fail(err, BA_ERR_ARG, "tolerance %g is not a positive number", a->tol);
    if (a->max_iter < 1 || a->max_iter > BA_APPROX_MAX_ITER)
        return ba_fail(err, BA_ERR_ARG, "max_iter %d is outside [1, %d]", a->max_iter,
                       BA_APPROX_MAX_ITER);
    return BA_OK;
}

/* ------------------------------------------------------ exponential */

/* ba_exp_nonpos1 (src/vmath.h): exp(x) for x <= 0, vectorisable */

BA_CLONES void ba_exp_nonpos(double *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        x[i] = ba_exp_nonpos1(x[i]);
}

/* log1p(y) for y in [0, 1], vectorisable: 2 atanh(s) with s = y / (2 + y)
 * in [0, 1/3], atanh by its odd series to s^35 (the first term left out is
 * below 2e-19 of the sum). bp's messages take a log1p of an exponential in
 * [0, 1] four times a pair; libm's scalar log1p was 45 % of a bp run. */
static inline double log1p_unit1(double y)
{
    double s = y / (2.0 + y), z = s * s;
    double p = 1.0 / 35;
    p = p * z + 1.0 / 33;
    p = p * z + 1.0 / 31;
    p = p * z + 1.0 / 29;
    p = p * z + 1.0 / 27;
    p = p * z + 1.0 / 25;
    p = p * z + 1.0 / 23;
    p = p * z + 1.0 / 21;
    p = p * z + 1.0 / 19;
    p = p * z + 1.0 / 17;
    p = p * z + 1.0 / 15;
    p = p * z + 1.0 / 13;
    p = p * z + 1.0 / 11;
    p = p * z + 1.0 / 9;
    p = p * z + 1.0 / 7;
    p = p * z + 1.0 / 5;
    p = p * z + 1.0 / 3;
    p = p * z + 1.0;
    return 2.0 * s * p;
}

BA_CLONES void ba_log1p_unit(double *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        x[i] = log1p_unit1(x[i]);
}
