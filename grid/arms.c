/* Arms: what a grid compares. An arm is an attention variant with its form
 * (couplings absolute or relative, a band, a field bias, position
 * embeddings, its own approximate engine) and its sampler. This file names them: the specs of the
 * command line (ablate --arm), the labels of tables and plots, and the
 * part of a cell's directory name. A plain arm (the paper's form) is named
 * by its variant alone, as every arm was before forms existed, so grids
 * made then keep their labels and their cells' names. */
#include "grid.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

lab_form lab_form_plain(void)
{
    lab_form f;
    memset(&f, 0, sizeof f);
    f.couplings = BA_COUPLINGS_ABSOLUTE;
    f.band = 0;
    f.field_bias = BA_FIELD_BIAS_NONE;
    f.pos_emb = 1;
    f.engine = -1;
    return f;
}

int lab_form_same(const lab_form *a, const lab_form *b)
{
    return a->couplings == b->couplings && a->band == b->band &&
           a->field_bias == b->field_bias && a->pos_emb == b->pos_emb;
}

int lab_form_is_plain(const lab_form *f)
{
    lab_form p = lab_form_plain();
    return lab_form_same(f, &p) && f->engine < 0;
}

cJSON *lab_add_pos_emb(cJSON *o, int pos_emb)
{
    return pos_emb > BA_POS_LEARNED
               ? cJSON_AddStringToObject(o, "pos_emb", ba_pos_emb_name(pos_emb))
               : cJSON_AddBoolToObject(o, "pos_emb", pos_emb);
}

lab_form lab_form_of(const ba_config *cfg)
{
    lab_form f;
    memset(&f, 0, sizeof f);
    f.couplings = cfg->couplings;
    f.band = cfg->band;
    f.field_bias = cfg->field_bias;
    f.pos_emb = cfg->pos_emb;
    /* an approximate engine is part of what the model learned with: its
     * label says so, as its arm's does (exact engines all agree) */
    f.engine = ba_engine_is_approx(cfg->engine) ? (int)cfg->engine : -1;
    return f;
}

void lab_form_label(ba_attn attn, const lab_form *f, char *buf, size_t n)
{
    char band[24] = "";
    if (f->band > 0)
        snprintf(band, sizeof band, "-W%d", f->band);
    const char *pos = "";
    if (f->pos_emb == BA_POS_ROPE)
        pos = "-rope";
    else if (f->pos_emb == BA_POS_ALIBI)
        pos = "-alibi";
    else if (f->pos_emb != lab_form_default_pos(f->couplings))
        pos = f->pos_emb ? "-pos" : "-nopos";
    char engine[24] = "";
    if (f->engine >= 0)
        snprintf(engine, sizeof engine, "-%s", ba_engine_name((ba_engine)f->engine));
    snprintf(buf, n, "%s%s%s%s%s%s", ba_attn_name(attn),
             f->couplings == BA_COUPLINGS_RELATIVE ? "-rel" : "", band,
             f->field_bias == BA_FIELD_BIAS_LOG_N ? "-logn" : "", pos, engine);
}

lab_arm lab_arm_plain(ba_attn attn)
{
    lab_arm a;
    memset(&a, 0, sizeof a);
    a.attn = attn;
    a.form = lab_form_plain();
    a.sampler = ba_sampler_default(BA_SAMPLER_EXACT);
    return a;
}

void lab_arm_variant(const lab_arm *a, char *buf, size_t n)
{
    lab_form_label(a->attn, &a->form, buf, n);
}

void lab_arm_label(const lab_arm *a, char *buf, size_t n)
{
    char v[96], d[96];
    lab_arm_variant(a, v, sizeof v);
    sampler_desc(&a->sampler, d, sizeof d);
    if (lab_arm_sampled(a))
        snprintf(buf, n, "%s (%s)", v, d);
    else
        snprintf(buf, n, "%s", v);
}

/* band<W>: W in 1..BA_MAX_BAND written in plain decimal. 0, or -1. */
static int parse_band(const char *s, int *w)
{
    if (strncmp(s, "band", 4) != 0)
        return -1;
    s += 4;
    if (!*s || strspn(s, "0123456789") != strlen(s) || *s == '0' || strlen(s) > 4)
        return -1;
    *w = atoi(s);
    return *w >= 1 && *w <= BA_MAX_BAND ? 0 : -1;
}

/* The parts of a spec, as bits of what has been given. */
enum { COUPLINGS = 1, BAND = 2, BIAS = 4, POS = 8, ENGINE = 16 };

/* One PART of a spec into *a; seen marks the parts given so far (a part
 * twice, or relative with absolute, is a contradiction, not a choice). */
static int parse_part(const char *spec, const char *p, lab_arm *a, unsigned *seen, char *err)
{
    unsigned kind;
    if (strcmp(p, "relative") == 0 || strcmp(p, "absolute") == 0) {
        kind = COUPLINGS;
        a->form.couplings = p[0] == 'r' ? BA_COUPLINGS_RELATIVE : BA_COUPLINGS_ABSOLUTE;
    } else if (strncmp(p, "band", 4) == 0) {
        kind = BAND;
        if (parse_band(p, &a->form.band))
            return ba_fail(err, BA_ERR_ARG,
                           "'%s': '%s' is not a band: band<W> with W in 1..%d, e.g. band8", spec,
                           p, BA_MAX_BAND);
    } else if (strcmp(p, "log-n") == 0) {
        kind = BIAS;
        a->form.field_bias = BA_FIELD_BIAS_LOG_N;
    } else if (strncmp(p, "pos-emb=", 8) == 0 && ba_pos_emb_parse(p + 8, &a->form.pos_emb, NULL) == BA_OK) {
        kind = POS;
    } else if (strncmp(p, "engine=", 7) == 0) {
        kind = ENGINE;
        ba_engine e;
        /* only the approximate engines: the exact ones compute the same
         * weights, and the grid's auto already picks the one that fits */
        if (ba_engine_parse(p + 7, &e, NULL) || !ba_engine_is_approx(e))
            return ba_fail(err, BA_ERR_ARG,
                           "'%s': '%s' is not an arm engine: engine=mf, tap, bp or hybrid", spec,
                           p);
        a->form.engine = (int)e;
    } else {
        return ba_fail(err, BA_ERR_ARG,
                       "'%s': unknown part '%s' (expected relative, absolute, band<W>, log-n, "
                       "pos-emb=learned, pos-emb=none, pos-emb=rope, pos-emb=alibi or engine=NAME)",
                       spec, p);
    }
    if (*seen & kind)
        return ba_fail(err, BA_ERR_ARG, "'%s': %s given twice", spec,
                       kind == COUPLINGS ? "the couplings' form"
                       : kind == BAND    ? "the band"
                       : kind == BIAS    ? "the field bias"
                       : kind == POS     ? "pos-emb"
                                         : "the engine");
    *seen |= kind;
    return BA_OK;
}

int lab_arm_parse(const char *spec, lab_arm *out, char *err)
{
    char buf[128], why[BA_ERR_LEN];
    if (!*spec)
        return ba_fail(err, BA_ERR_ARG, "an arm spec is empty");
    if (strlen(spec) >= sizeof buf)
        return ba_fail(err, BA_ERR_ARG, "'%.40s...': arm spec too long", spec);
    strcpy(buf, spec);
    char *plus = strchr(buf, '+');
    if (plus)
        *plus = '\0';
    ba_attn attn;
    if (ba_attn_parse(buf, &attn, why))
        return ba_fail(err, BA_ERR_ARG, "'%s': %s", spec, why);
    lab_arm a = lab_arm_plain(attn);
    unsigned seen = 0;
    for (char *p = plus ? plus + 1 : NULL; p;) {
        char *next = strchr(p, '+');
        if (next)
            *next = '\0';
        if (!*p)
            return ba_fail(err, BA_ERR_ARG, "'%s' has an empty part", spec);
        int rc = parse_part(spec, p, &a, &seen, err);
        if (rc)
            return rc;
        p = next ? next + 1 : NULL;
    }
    if ((seen & ENGINE) && attn != BA_ATTN_BOLTZMANN && attn != BA_ATTN_COUPLING)
        return ba_fail(err, BA_ERR_ARG, "'%s': an engine applies to boltzmann and coupling arms",
                       spec);
    if (!(seen & POS)) /* train's rule */
        a.form.pos_emb = lab_form_default_pos(a.form.couplings);
    *out = a;
    return BA_OK;
}

int lab_softmax_arm(const lab_grid *g)
{
    int any = -1;
    for (int a = 0; a < g->narms; a++) {
        if (g->arms[a].attn != BA_ATTN_SOFTMAX)
            continue;
        if (lab_form_is_plain(&g->arms[a].form) && !lab_arm_sampled(&g->arms[a]))
            return a;
        if (any < 0) /* the grid's first softmax: the study's +RoPE, not its +ALiBi */
            any = a;
    }
    return any;
}

/* ------------------------------------------ the arms of ablate's options */

/* arms named on the command line, before samplers multiply them */
#define MAX_BASE_ARMS 16

/* A comma-separated list of names into parsed values (no empty item, no
 * repeat): parse(name, &value, err) for each. */
static int name_list(const command *c, const char *opt_name, int max,
                     int (*parse)(const char *, int *, char *), int *out, int *n)
{
    char list[512], err[BA_ERR_LEN];
    const char *v = get_str(c, opt_name);
    *n = 0;
    if (snprintf(list, sizeof list, "%s", v) >= (int)sizeof list)
        return usage_error(c, "--%s: list too long", opt_name);
    char *p = list;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (!*p)
            return usage_error(c, "--%s: '%s' has an empty item", opt_name, v);
        if (*n >= max)
            return usage_error(c, "--%s: at most %d values", opt_name, max);
        if (parse(p, &out[*n], err))
            return usage_error(c, "--%s: %s", opt_name, err);
        for (int i = 0; i < *n; i++)
            if (out[i] == out[*n])
                return usage_error(c, "--%s: '%s' is listed twice", opt_name, p);
        (*n)++;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static int parse_attn(const char *s, int *out, char *err)
{
    ba_attn a;
    int rc = ba_attn_parse(s, &a, err);
    *out = (int)a;
    return rc;
}

static int parse_kind(const char *s, int *out, char *err)
{
    ba_sampler_kind k;
    int rc = ba_sampler_parse(s, &k, err);
    *out = (int)k;
    return rc;
}

/* Splits the items of the --arm values (each comma-separated) into
 * arms: no empty item, no arm twice (two specs of one arm included). */
static int arm_specs(const command *c, const char *const *vals, int nv, lab_arm *out, int *n)
{
    char err[BA_ERR_LEN], item[MAX_BASE_ARMS][128];
    *n = 0;
    for (int v = 0; v < nv; v++)
        for (const char *p = vals[v];;) {
            size_t len = strcspn(p, ",");
            if (len == 0)
                return usage_error(c, "--arm: '%s' has an empty item", vals[v]);
            if (*n == MAX_BASE_ARMS)
                return usage_error(c, "--arm: at most %d arms", MAX_BASE_ARMS);
            if (len >= sizeof item[0])
                return usage_error(c, "--arm: '%.40s...' is too long", p);
            memcpy(item[*n], p, len);
            item[*n][len] = '\0';
            if (lab_arm_parse(item[*n], &out[*n], err))
                return usage_error(c, "--arm %s", err);
            for (int i = 0; i < *n; i++)
                if (out[i].attn == out[*n].attn && lab_form_same(&out[i].form, &out[*n].form))
                    return usage_error(c,
                                       "--arm: '%s' and '%s' are the same arm (arms of one "
                                       "grid differ by more than their engine: one grid per "
                                       "engine)",
                                       item[i], item[*n]);
            (*n)++;
            if (!p[len])
                break;
            p += len + 1;
        }
    return 0;
}

/* The variants and forms the grid compares, before samplers: the --arm
 * specs, or the plain variants of --attn. */
static int base_arms(const command *c, int argc, char **argv, lab_arm *out, int *n)
{
    const char *vals[MAX_BASE_ARMS];
    int nv = get_repeated(c, argc, argv, "arm", vals, MAX_BASE_ARMS), attn[4], rc;
    if (nv < 0)
        return -nv;
    if (nv > 0 && is_set(c, "attn"))
        return usage_error(c, "--arm and --attn exclude each other (--arm boltzmann is --attn "
                              "boltzmann)");
    if (nv > 0)
        return arm_specs(c, vals, nv, out, n);
    if ((rc = name_list(c, "attn", 4, parse_attn, attn, n)))
        return rc;
    for (int a = 0; a < *n; a++)
        out[a] = lab_arm_plain((ba_attn)attn[a]);
    return 0;
}

int lab_arms_from_cli(const command *c, int argc, char **argv, lab_grid *g)
{
    int kinds[8], nk, shots[LAB_MAX_LIST], ns = 0, rc, any_sampled = 0, na;
    lab_arm base[MAX_BASE_ARMS];
    if ((rc = base_arms(c, argc, argv, base, &na)) ||
        (rc = name_list(c, "sampler", 5, parse_kind, kinds, &nk)))
        return rc;
    for (int k = 0; k < nk; k++)
        any_sampled |= kinds[k] != BA_SAMPLER_EXACT;
    if (is_set(c, "shots") && !any_sampled)
        return usage_error(c, "--shots needs a sampler other than exact (--sampler)");
    if (any_sampled && (rc = get_int_list(c, "shots", 1, 1 << 24, shots, LAB_MAX_LIST, &ns)))
        return rc;
    ba_sampler_kind sk[8];
    for (int k = 0; k < nk; k++)
        sk[k] = (ba_sampler_kind)kinds[k];
    if ((rc = parse_sampler_params(c, sk, nk, 0)))
        return rc;
    int ising_in_grid = 0;
    for (int a = 0; a < na; a++) {
        int ising = base[a].attn == BA_ATTN_BOLTZMANN || base[a].attn == BA_ATTN_COUPLING;
        ising_in_grid |= ising;
        /* sampling applies to boltzmann and coupling only */
        for (int k = 0; k < (ising ? nk : 1); k++)
            for (int si = 0; si < (ising && kinds[k] != BA_SAMPLER_EXACT ? ns : 1); si++) {
                if (g->narms == LAB_MAX_ARMS)
                    return usage_error(c, "at most %d arms (variants x samplers x shots)",
                                       LAB_MAX_ARMS);
                lab_arm *ar = &g->arms[g->narms++];
                *ar = base[a];
                ar->sampler = ba_sampler_default(ising ? sk[k] : BA_SAMPLER_EXACT);
                if (lab_arm_sampled(ar)) {
                    apply_sampler_params(c, &ar->sampler, 0);
                    ar->sampler.shots = shots[si];
                }
            }
    }
    if (any_sampled && !ising_in_grid)
        return usage_error(c, "--sampler: sampling applies to boltzmann and coupling only, "
                              "and neither is among the arms (--attn, --arm)");
    return 0;
}
