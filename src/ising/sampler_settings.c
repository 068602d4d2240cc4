/* A sampler's settings (ba_sampler): the kinds and their names, the
 * defaults, the table of numeric parameters and their validation. A leaf:
 * the samplers themselves (src/samplers.c, src/dqa.c) and the config
 * (src/config.c) check settings here. */
#include "ising/ising.h"

#include <stddef.h>
#include <string.h>

static const char *const sampler_names[] = {"exact", "direct", "dqa", "gibbs", "sa"};
#define NSAMPLERS ((int)(sizeof sampler_names / sizeof *sampler_names))

const char *ba_sampler_name(ba_sampler_kind k)
{
    return (unsigned)k < (unsigned)NSAMPLERS ? sampler_names[k] : "?";
}

int ba_sampler_parse(const char *s, ba_sampler_kind *out, char *err)
{
    for (int i = 0; s && i < NSAMPLERS; i++)
        if (strcmp(s, sampler_names[i]) == 0) {
            *out = (ba_sampler_kind)i;
            return BA_OK;
        }
    return ba_fail(err, BA_ERR_ARG, "unknown sampler '%s' (exact|direct|dqa|gibbs|sa)",
                   s ? s : "(null)");
}

ba_sampler ba_sampler_default(ba_sampler_kind kind)
{
    ba_sampler s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.shots = 256;
    s.beta_assumed = 1.0;
    s.tau = 1.0, s.gamma = 1.0, s.lambda = 1.0;
    s.trotter_steps = 50, s.order = 2;
    s.chains = 8, s.burnin = 20, s.thin = 1;
    s.sweeps = 20, s.beta0 = 0.1;
    return s;
}

int ba_sampler_max_spins(ba_sampler_kind kind)
{
    switch (kind) {
    case BA_SAMPLER_EXACT:
        return BA_FAST_MAX_SPINS;
    case BA_SAMPLER_DIRECT:
    case BA_SAMPLER_DQA:
        return BA_DQA_MAX_SPINS;
    default:
        return BA_SAMPLER_MAX_SPINS;
    }
}

/* Every numeric parameter of ba_sampler, in the order configs list them:
 * the one table behind validation, the config's JSON form and the
 * command-line options. */
#define P_(field) offsetof(ba_sampler, field)
static const ba_sampler_param params[] = {
    {"shots", "shots", BA_SAMPLER_EXACT, 1, P_(shots), 1, 1 << 24, 0,
     "states drawn per query by a sampler"},
    {"beta_assumed", "sampler-beta", BA_SAMPLER_EXACT, 0, P_(beta_assumed), 0, 1000, 1,
     "inverse temperature the sampled gradient assumes the shots come from (beta_assumed)"},
    {"tau", "dqa-tau", BA_SAMPLER_DQA, 0, P_(tau), 0, 1e4, 1, "dqa: anneal time tau"},
    {"gamma", "dqa-gamma", BA_SAMPLER_DQA, 0, P_(gamma), 0, 1e4, 1, "dqa: driver strength Gamma"},
    {"lambda", "dqa-lambda", BA_SAMPLER_DQA, 0, P_(lambda), 0, 1e4, 1,
     "dqa: problem-Hamiltonian scale lambda"},
    {"trotter_steps", "dqa-steps", BA_SAMPLER_DQA, 1, P_(trotter_steps), 1, 1e6, 0,
     "dqa: Trotter steps"},
    {"order", "dqa-order", BA_SAMPLER_DQA, 1, P_(order), 1, 2, 0, "dqa: Trotter order"},
    {"chains", "gibbs-chains", BA_SAMPLER_GIBBS, 1, P_(chains), 1, 1 << 24, 0,
     "gibbs: chains the shots are split over"},
    {"burnin", "gibbs-burnin", BA_SAMPLER_GIBBS, 1, P_(burnin), 0, 1e6, 0,
     "gibbs: sweeps discarded at the start of each chain"},
    {"thin", "gibbs-thin", BA_SAMPLER_GIBBS, 1, P_(thin), 1, 1e6, 0,
     "gibbs: sweeps between kept states"},
    {"sweeps", "sa-sweeps", BA_SAMPLER_SA, 1, P_(sweeps), 1, 1e6, 0,
     "sa: sweeps of one anneal (one shot)"},
    {"beta0", "sa-beta0", BA_SAMPLER_SA, 0, P_(beta0), 0, 1, 1,
     "sa: inverse temperature the anneal starts at"},
};
#undef P_
#define NPARAMS ((int)(sizeof params / sizeof params[0]))

const ba_sampler_param *ba_sampler_params(int *n)
{
    if (n)
        *n = NPARAMS;
    return params;
}

double ba_sampler_param_get(const ba_sampler *s, const ba_sampler_param *p)
{
    const char *at = (const char *)s + p->offset;
    if (p->is_int) {
        int x;
        memcpy(&x, at, sizeof x);
        return x;
    }
    double x;
    memcpy(&x, at, sizeof x);
    return x;
}

void ba_sampler_param_set(ba_sampler *s, const ba_sampler_param *p, double v)
{
    char *at = (char *)s + p->offset;
    if (p->is_int) {
        int x = (int)v;
        memcpy(at, &x, sizeof x);
    } else {
        memcpy(at, &v, sizeof v);
    }
}

int ba_sampler_param_used(const ba_sampler_param *p, ba_sampler_kind kind)
{
    return kind != BA_SAMPLER_EXACT && (p->kind == BA_SAMPLER_EXACT || p->kind == kind);
}

int ba_sampler_validate(const ba_sampler *s, char *err)
{
    if (!s)
        return ba_fail(err, BA_ERR_ARG, "sampler is NULL");
    if ((unsigned)s->kind >= (unsigned)NSAMPLERS)
        return ba_fail(err, BA_ERR_ARG, "sampler kind %d is not a known sampler", (int)s->kind);
    for (int i = 0; i < NPARAMS; i++) {
        const ba_sampler_param *p = &params[i];
        if (!ba_sampler_param_used(p, s->kind))
            continue;
        double v = ba_sampler_param_get(s, p);
        /* the kind's name before a parameter that is the kind's alone */
        const char *kn = p->kind == BA_SAMPLER_EXACT ? "" : ba_sampler_name(p->kind);
        const char *sp = *kn ? " " : "";
        if (p->offset == offsetof(ba_sampler, chains) && v > s->shots)
            return ba_fail(err, BA_ERR_ARG, "%s%s%s = %d is out of range [1, shots = %d]", kn, sp,
                           p->name, (int)v, s->shots);
        if (!(p->lo_open ? v > p->lo : v >= p->lo) || !(v <= p->hi)) {
            if (p->is_int)
                return ba_fail(err, BA_ERR_ARG, "%s%s%s = %d is out of range [%g, %g]", kn, sp,
                               p->name, (int)v, p->lo, p->hi);
            return ba_fail(err, BA_ERR_ARG, "%s%s%s = %g is out of range %c%g, %g]", kn, sp,
                           p->name, v, p->lo_open ? '(' : '[', p->lo, p->hi);
        }
    }
    return BA_OK;
}

