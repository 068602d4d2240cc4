/* boltzattn-lab approx --doc DOC --from DIR: the Markdown document of the
 * approximate engines' accuracy, generated from DIR/accuracy.json alone
 * (written by the approx command, lab/approx.c): what is compared and
 * how, per field shift the tables of the worst |delta w|, the KL of the
 * attention rows, the worst |delta a| and the convergence, the
 * checkpoints' records, and the comparison with the spec's probe numbers
 * by a stated rule; then, when DIR holds grids of models trained with the
 * engines, the sections of lab/approx_train_doc.c. Every field read is
 * checked for its type and range (lab/approx_read.c): a damaged file is
 * bad input (exit 2), never a crash. */
#include "approx.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The measures of a record, in the order of their JSON keys. */
enum { DW_MEAN, DW_P95, KL_MEAN, KL_P95, DA_MEAN, DA_P95, CONV, FIRST, SW_MEAN, SW_MAX, NMET };
static const char *const met_keys[NMET] = {
    "worst_dw_mean", "worst_dw_p95", "kl_mean",   "kl_p95",      "worst_da_mean",
    "worst_da_p95",  "converged",    "first_try", "sweeps_mean", "sweeps_max"};

static const char *const bias_order[] = {"none", "log-n", "twice-log-n"};
static const char *const engine_order[] = {"mf", "tap", "bp", "hybrid", "band"};

typedef struct {
    char engine[16], bias[16];
    int n, instances, rows;
    double a, v[NMET];
    /* checkpoint records */
    char label[128], variant[64], model_engine[16];
    int T, layers, heads, items, window;
} rec;

typedef struct {
    /* settings of the random cells */
    int has_settings, K, window, max_iter;
    double damping, tol;
    char seed[32], command[2048];
    rec *cells, *ckpts;
    int ncells, nckpts;
} approx_data;

/* ----------------------------------------------------------- reading */

/* One name out of names (n of them). */
static int rd_name(const ax_reader *r, const cJSON *o, const char *key, const char *const *names,
                   int n, char *buf, size_t len)
{
    int rc = ax_rd_str(r, o, key, buf, len);
    for (int i = 0; !rc && i < n; i++)
        if (strcmp(buf, names[i]) == 0)
            return 0;
    return rc ? rc : ax_bad(r, key);
}

/* The fields every record has: engine, n, bias and the measures. */
static int rd_record(const ax_reader *r, const cJSON *o, int ckpt, rec *x)
{
    int rc;
    if (!cJSON_IsObject(o))
        return ax_bad(r, "");
    if ((rc = rd_name(r, o, "engine", engine_order, 5, x->engine, sizeof x->engine)) ||
        (rc = ax_rd_int(r, o, "n", 2, 20, &x->n)) ||
        (rc = rd_name(r, o, "bias", bias_order, ckpt ? 2 : 3, x->bias, sizeof x->bias)) ||
        (rc = ax_rd_int(r, o, "instances", 1, 1 << 30, &x->instances)) ||
        (rc = ax_rd_int(r, o, "stats_rows", 0, x->instances, &x->rows)))
        return rc;
    for (int m = 0; m < NMET; m++) {
        int rate = m == CONV || m == FIRST;
        if ((rc = ax_rd_num(r, o, met_keys[m], 0, rate ? 1 : INFINITY, !rate, &x->v[m])))
            return rc;
    }
    return 0;
}

static int rd_ckpt(const ax_reader *r, const cJSON *o, rec *x)
{
    int rc;
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "settings");
    if ((rc = rd_record(r, o, 1, x)) ||
        (rc = ax_rd_str(r, o, "label", x->label, sizeof x->label)) ||
        (rc = ax_rd_str(r, o, "variant", x->variant, sizeof x->variant)) ||
        (rc = ax_rd_str(r, o, "model_engine", x->model_engine, sizeof x->model_engine)) ||
        (rc = ax_rd_int(r, o, "T", 1, BA_MAX_BLOCK, &x->T)) ||
        (rc = ax_rd_int(r, o, "layers", 1, 64, &x->layers)) ||
        (rc = ax_rd_int(r, o, "heads", 1, 1 << 16, &x->heads)) ||
        (rc = ax_rd_int(r, o, "items", 1, 1 << 30, &x->items)))
        return rc;
    if (!cJSON_IsObject(s))
        return ax_bad(r, "settings");
    ax_reader rs = *r; /* messages name checkpoints[i].settings.KEY */
    snprintf(rs.where, sizeof rs.where, "%.80ssettings.", r->where);
    return ax_rd_int(&rs, s, "window", 1, BA_MAX_BAND, &x->window);
}

/* The settings of the random cells. */
static int rd_settings(ax_reader *r, const cJSON *s, approx_data *d)
{
    int rc;
    snprintf(r->where, sizeof r->where, "settings.");
    if (!cJSON_IsObject(s))
        return snprintf(r->where, sizeof r->where, "%s", ""), ax_bad(r, "settings");
    if ((rc = ax_rd_int(r, s, "instances", 1, 1 << 30, &d->K)) ||
        (rc = ax_rd_int(r, s, "window", 1, BA_MAX_BAND, &d->window)) ||
        (rc = ax_rd_int(r, s, "max_iter", 1, BA_APPROX_MAX_ITER, &d->max_iter)) ||
        (rc = ax_rd_num(r, s, "damping", 1e-300, 1, 0, &d->damping)) ||
        (rc = ax_rd_num(r, s, "tol", 1e-300, INFINITY, 0, &d->tol)) ||
        (rc = ax_rd_str(r, s, "seed", d->seed, sizeof d->seed)) ||
        (rc = ax_rd_str(r, s, "command", d->command, sizeof d->command)))
        return rc;
    d->has_settings = 1;
    return 0;
}

/* An array of records into *out (malloc'd). */
static int rd_array(ax_reader *r, const cJSON *root, const char *key, int ckpt, rec **out, int *n)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, key);
    r->where[0] = '\0';
    if (!cJSON_IsArray(a))
        return ax_bad(r, key);
    int cnt = cJSON_GetArraySize(a), i = 0, rc;
    *out = calloc(cnt ? (size_t)cnt : 1, sizeof(rec));
    if (!*out)
        return fail_lib(r->c, "out of memory", 1);
    for (const cJSON *x = a->child; x; x = x->next, i++) {
        snprintf(r->where, sizeof r->where, "%s[%d].", key, i);
        if ((rc = ckpt ? rd_ckpt(r, x, &(*out)[i]) : rd_record(r, x, 0, &(*out)[i])))
            return rc;
        if (!ckpt && (rc = ax_rd_num(r, x, "a", 0, 1e6, 0, &(*out)[i].a)))
            return rc;
    }
    *n = cnt;
    return 0;
}

static int read_data(const command *c, const char *path, approx_data *d)
{
    char *txt = lab_slurp(path);
    if (!txt)
        return usage_error(c, "--from: cannot read %s (run 'boltzattn-lab approx --out DIR' "
                              "first)", path);
    cJSON *root = cJSON_Parse(txt);
    free(txt);
    ax_reader r = {c, path, ""};
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    double ver;
    int rc = 0;
    if (!root)
        rc = usage_error(c, "%s is not valid JSON", path);
    else if (!cJSON_IsString(f) || strcmp(f->valuestring, "boltzattn-approx") != 0)
        rc = ax_bad(&r, "format");
    else if (!(rc = ax_rd_num(&r, root, "version", 1, 1, 0, &ver)) &&
             !(rc = rd_array(&r, root, "cells", 0, &d->cells, &d->ncells)) &&
             !(rc = rd_array(&r, root, "checkpoints", 1, &d->ckpts, &d->nckpts)) &&
             (d->ncells || cJSON_GetObjectItemCaseSensitive(root, "settings")))
        rc = rd_settings(&r, cJSON_GetObjectItemCaseSensitive(root, "settings"), d);
    cJSON_Delete(root);
    return rc;
}

/* ----------------------------------------------------------- writing */

/* A measure: three significant digits; "n/a" for a missing one. */
static const char *num(double v, char *buf)
{
    if (isnan(v))
        snprintf(buf, 24, "n/a");
    else if (v == 0)
        snprintf(buf, 24, "0");
    else
        snprintf(buf, 24, "%.3g", v);
    return buf;
}

/* A count of sweeps: whole above 10. */
static const char *sweeps(double v, char *buf)
{
    if (isnan(v))
        snprintf(buf, 24, "n/a");
    else
        snprintf(buf, 24, v >= 10 ? "%.0f" : "%.1f", v);
    return buf;
}

static const char *pct(double rate, char *buf)
{
    double p = 100.0 * rate;
    snprintf(buf, 24, p == floor(p) ? "%.0f %%" : "%.1f %%", p);
    return buf;
}

static int cmp_int(const void *a, const void *b)
{
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

static int cmp_dbl(const void *a, const void *b)
{
    return (*(const double *)a > *(const double *)b) - (*(const double *)a < *(const double *)b);
}

/* The distinct n and a of the cells (sorted). */
typedef struct {
    int n[32], nn;
    double a[64];
    int na;
} axes;

static void cell_axes(const approx_data *d, axes *x)
{
    x->nn = x->na = 0;
    for (int i = 0; i < d->ncells; i++) {
        int seen = 0;
        for (int j = 0; j < x->nn; j++)
            seen |= x->n[j] == d->cells[i].n;
        if (!seen && x->nn < 32)
            x->n[x->nn++] = d->cells[i].n;
        seen = 0;
        for (int j = 0; j < x->na; j++)
            seen |= x->a[j] == d->cells[i].a;
        if (!seen && x->na < 64)
            x->a[x->na++] = d->cells[i].a;
    }
    qsort(x->n, (size_t)x->nn, sizeof(int), cmp_int);
    qsort(x->a, (size_t)x->na, sizeof(double), cmp_dbl);
}

static const rec *find_cell(const approx_data *d, const char *engine, int n, double a,
                            const char *bias)
{
    for (int i = d->ncells - 1; i >= 0; i--) /* the last one, should a file repeat one */
        if (d->cells[i].n == n && d->cells[i].a == a && strcmp(d->cells[i].engine, engine) == 0 &&
            strcmp(d->cells[i].bias, bias) == 0)
            return &d->cells[i];
    return NULL;
}

/* What a table shows in a cell of a record. */
typedef enum { T_DW, T_KL, T_DA, T_CONV } table_kind;

static void table_cell(FILE *f, table_kind t, const rec *x)
{
    char b1[24], b2[24], b3[24];
    if (!x) {
        fprintf(f, t == T_DW ? " – | – |" : " – |");
        return;
    }
    switch (t) {
    case T_DW:
        fprintf(f, " %s (%s) | %s |", num(x->v[DW_MEAN], b1), num(x->v[DW_P95], b2),
                pct(x->v[CONV], b3));
        break;
    case T_KL:
        fprintf(f, " %s (%s) |", num(x->v[KL_MEAN], b1), num(x->v[KL_P95], b2));
        break;
    case T_DA:
        fprintf(f, " %s (%s) |", num(x->v[DA_MEAN], b1), num(x->v[DA_P95], b2));
        break;
    case T_CONV:
        if (isnan(x->v[SW_MEAN]))
            fprintf(f, " exact |");
        else
            fprintf(f, " %s / %s / %s / %s |", pct(x->v[FIRST], b1), pct(x->v[CONV], b2),
                    sweeps(x->v[SW_MEAN], b3), sweeps(x->v[SW_MAX], (char[24]){0}));
        break;
    }
}

static void table(FILE *f, const approx_data *d, const axes *x, const char *bias, table_kind t)
{
    fprintf(f, "| engine | a |");
    for (int i = 0; i < x->nn; i++)
        fprintf(f, t == T_DW ? " n = %d | conv. |" : " n = %d |", x->n[i]);
    fprintf(f, "\n|---|---|");
    for (int i = 0; i < x->nn; i++)
        fprintf(f, t == T_DW ? "---|---|" : "---|");
    fprintf(f, "\n");
    for (int e = 0; e < 5; e++)
        for (int ai = 0; ai < x->na; ai++) {
            int any = 0;
            for (int i = 0; i < x->nn; i++)
                any |= find_cell(d, engine_order[e], x->n[i], x->a[ai], bias) != NULL;
            if (!any)
                continue;
            fprintf(f, "| %s | %g |", engine_order[e], x->a[ai]);
            for (int i = 0; i < x->nn; i++)
                table_cell(f, t, find_cell(d, engine_order[e], x->n[i], x->a[ai], bias));
            fprintf(f, "\n");
        }
    fprintf(f, "\n");
}

/* ------------------------------------------------ against the probe */

/* The spec's probe (section 8, "Measured by a probe"): n = 16. */
typedef struct {
    const char *engine; /* hybrid stands for "band-8 + mf", band for "band-8 alone" */
    double a;
    const char *bias;   /* the probe's -log n shift is our twice-log-n */
    double dw, da;      /* mean worst |dw| and |da| (NAN: not given) */
    double conv;        /* convergence rate (NAN: not given) */
} probe_row;

static const probe_row probe[] = {
    {"mf", 0.25, "none", 0.16, 0.023, NAN},    {"tap", 0.25, "none", 0.09, 0.013, NAN},
    {"bp", 0.25, "none", 0.09, 0.013, NAN},    {"band", 0.25, "none", 0.30, 0.035, NAN},
    {"hybrid", 0.25, "none", 0.09, 0.013, NAN}, {"mf", 1, "none", 0.14, 0.018, NAN},
    {"tap", 1, "none", NAN, NAN, 0.10},        {"bp", 1, "none", 0.24, 0.032, NAN},
    {"hybrid", 1, "none", 0.08, 0.011, NAN},   {"mf", 0.25, "twice-log-n", 0.002, NAN, NAN},
    {"tap", 0.25, "twice-log-n", 0.0003, NAN, NAN}, {"bp", 0.25, "twice-log-n", 0.0001, NAN, NAN},
};
#define PROBE_REL 0.25  /* a mean agrees within +-25 % of the probe's */
#define PROBE_CONV 0.10 /* a convergence rate within 10 points */

/* "agrees" or "higher, x1.8" for ours against the probe's p; counts. */
static void verdict(FILE *f, double ours, double p, int rate, int *agree, int *total)
{
    char b[24];
    (*total)++;
    if (isnan(ours)) {
        fprintf(f, "n/a");
        return;
    }
    int ok = rate ? fabs(ours - p) <= PROBE_CONV : fabs(ours / p - 1.0) <= PROBE_REL;
    *agree += ok;
    if (rate)
        fprintf(f, "%s vs %s: %s", pct(ours, b), pct(p, (char[24]){0}),
                ok ? "agrees" : ours > p ? "higher" : "lower");
    else
        fprintf(f, "%s vs %g: %s", num(ours, b), p,
                ok ? "agrees" : ours > p ? "higher" : "lower");
    if (!ok && !rate && p > 0)
        fprintf(f, " (x%.2g)", ours / p);
}

static void probe_section(FILE *f, const approx_data *d)
{
    fprintf(f, "## Against the spec's probe\n\n"
               "Spec section 8 (\"Measured by a probe\") reports, at n = 16 over 100 instances "
               "of the same pattern, the mean worst |Δw| and, in brackets, the mean worst "
               "|Δa|. The rule here: a mean agrees when it lies within ±%.0f %% of the probe's "
               "number (the probe gives one or two significant digits and its own 100 draws), "
               "a convergence rate when it lies within %.0f points; otherwise it is higher or "
               "lower by the factor shown. The probe's \"band-8 + mf\" is hybrid with "
               "window 8, its \"band-8 alone\" is band with window 8; its shift of the fields "
               "by -log n is twice-log-n here (log-n, the models' bias, is half of it).\n\n",
            100 * PROBE_REL, 100 * PROBE_CONV);
    int agree = 0, total = 0, missing = 0;
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        const probe_row *p = &probe[i];
        int windowed = !strcmp(p->engine, "hybrid") || !strcmp(p->engine, "band");
        const rec *x = find_cell(d, p->engine, 16, p->a, p->bias);
        const char *name = !windowed                    ? p->engine
                           : strcmp(p->engine, "band") ? "band-8 + mf (hybrid)"
                                                       : "band-8 alone (band)";
        fprintf(f, "- %s, a = %g, %s: ", name, p->a,
                strcmp(p->bias, "none") ? "fields shifted by -log n" : "no shift");
        if (!x || (windowed && d->window != 8)) {
            missing++;
            fprintf(f, "not in the data (%s).\n",
                    x ? "the window is not 8"
                      : "no cell with this engine, n = 16, a and shift");
            continue;
        }
        if (!isnan(p->dw)) {
            fprintf(f, "worst |Δw| ");
            verdict(f, x->v[DW_MEAN], p->dw, 0, &agree, &total);
        }
        if (!isnan(p->da)) {
            fprintf(f, "; worst |Δa| ");
            verdict(f, x->v[DA_MEAN], p->da, 0, &agree, &total);
        }
        if (!isnan(p->conv)) {
            char b[24];
            fprintf(f, "converged on the first try ");
            verdict(f, x->v[FIRST], p->conv, 1, &agree, &total);
            fprintf(f, " (after the library's retry: %s)", pct(x->v[CONV], b));
        }
        fprintf(f, ".\n");
    }
    fprintf(f, "\n%d of the %d probe numbers compared agree under this rule", agree, total);
    if (missing)
        fprintf(f, "; %d probe row%s had no matching cell", missing, missing == 1 ? "" : "s");
    fprintf(f, ".\n");
    /* the shifted rows at the models' log-n shift, said but not compared */
    int said = 0;
    for (int e = 0; e < 3; e++) {
        const rec *x = find_cell(d, engine_order[e], 16, 0.25, "log-n");
        if (!x || find_cell(d, engine_order[e], 16, 0.25, "twice-log-n"))
            continue;
        char b[24];
        if (!said++)
            fprintf(f, "\nThe shifted probe rows need `--bias twice-log-n`. At the models' "
                       "log-n shift, half the probe's (fields (1/2) log 16 = 1.39 higher), "
                       "a = 0.25, n = 16, the mean worst |Δw| is");
        fprintf(f, "%s %s %s", said > 1 ? "," : "", engine_order[e], num(x->v[DW_MEAN], b));
    }
    if (said)
        fprintf(f, "; not the probe's setting, so not compared.\n");
    fprintf(f, "\n");
}

/* ------------------------------------------------------------ document */

static void intro(FILE *f, const approx_data *d, const char *doc, const char *from,
                  const char *exact_from, int grids)
{
    fprintf(f, "# Approximate engines against exact inference\n\n"
               "<!-- generated by `boltzattn-lab approx --doc` from %s/accuracy.json%s; edit the "
               "generator (lab/approx_doc.c, lab/approx_train_doc.c), not this file -->\n\n",
            from, grids ? " and the grids beside it" : "");
    fprintf(f,
            "How close the approximate Ising engines of spec section 8 (\"Mean-field family\") "
            "come to the exact spin marginals of the same system: **mf** (naive mean field), "
            "**tap** (with the Onsager correction), **bp** (loopy belief propagation) and "
            "**hybrid** (exact chain inference inside a window of W keys, mean field beyond "
            "it); **band**, where present, is the band alone (exact inference with the "
            "couplings beyond W dropped). The oracle is the fast exact engine "
            "(`ba_ising_marginals`). Each approximate engine runs through the library's "
            "batched entry point (`ba_approx_forward`) on a (1, n, n) block whose last row is "
            "the instance, as the attention layer would run it.\n\n");
    if (d->has_settings)
        fprintf(f,
                "**Instances.** Random: h_j ~ N(0, 1); couplings by distance d = k - j: "
                "J(1) = a/2, J(2..4) = a, J(5) = 0, J(>= 6) = -a/2, each plus uniform noise "
                "in [-a/4, a/4] (the spec probe's pattern); every a scales the same draws. "
                "Field shifts: none, log-n (h_j - (1/2) log n, the models' field bias) and "
                "twice-log-n (h_j - log n, the probe's). %d instances per (n, a), seed %s; "
                "hybrid and band window W = %d; damping %g, tolerance %g on max |F(x) - x|, "
                "at most %d sweeps, then the library's one retry with a quarter of the "
                "damping and four times the sweeps.\n\n",
                d->K, d->seed, d->window, d->damping, d->tol, d->max_iter);
    fprintf(f,
            "**Measures**, per instance, then over instances: the worst |Δw| = max_j "
            "|w_j - w_j^exact| with w_j = P(s_j = +1); KL(exact ‖ approx) between the "
            "attention rows a_j = w_j / Σ_k w_k (nats); the worst |Δa_j|. Tables give the "
            "mean and, in brackets, the 95th percentile (linear interpolation at 0.95 (K - 1) "
            "of the sorted values). conv. is the share of instances whose query converged "
            "(after the retry); the convergence tables give first try / after the retry / "
            "mean / max sweeps of the instance's query (both attempts when it was retried). "
            "The batched entry point counts over the whole block; the query's own counts "
            "are the difference between that call and one on the block without its last "
            "row (the rows are solved independently), exact for every record whose "
            "stats_rows equals its instances.\n\n");
    if (d->has_settings)
        fprintf(f, "Produced by\n\n    %s\n\n", d->command);
    fprintf(f, "Regenerated from the data alone (no computing) by\n\n"
               "    boltzattn-lab approx --doc %s --from %s%s%s\n\n"
               "(`make approx-doc` for docs/approximate.md from results/approx).",
            doc, from, exact_from ? " --exact-from " : "", exact_from ? exact_from : "");
    if (grids)
        fprintf(f, " The last two sections come from the grids of %s (`boltzattn ablate`): "
                   "models trained with each engine, and exact-trained models evaluated with "
                   "each engine.",
                from);
    fprintf(f, "\n\n");
}

static void random_sections(FILE *f, const approx_data *d)
{
    axes x;
    cell_axes(d, &x);
    static const char *const shift_desc[] = {"fields unshifted", "fields h_j - (1/2) log n",
                                             "fields h_j - log n"};
    for (int b = 0; b < 3; b++) {
        int any = 0;
        for (int i = 0; i < d->ncells; i++)
            any |= strcmp(d->cells[i].bias, bias_order[b]) == 0;
        if (!any)
            continue;
        fprintf(f, "## Random instances, bias %s (%s)\n\n", bias_order[b], shift_desc[b]);
        fprintf(f, "Mean worst |Δw| (95th percentile) and convergence rate:\n\n");
        table(f, d, &x, bias_order[b], T_DW);
        fprintf(f, "KL(exact ‖ approx) of the attention rows, mean (95th percentile):\n\n");
        table(f, d, &x, bias_order[b], T_KL);
        fprintf(f, "Worst |Δa_j| of the attention rows, mean (95th percentile):\n\n");
        table(f, d, &x, bias_order[b], T_DA);
        fprintf(f, "Convergence: first try / after the retry / mean sweeps / max sweeps:\n\n");
        table(f, d, &x, bias_order[b], T_CONV);
    }
}

static void ckpt_section(FILE *f, const approx_data *d)
{
    char b[8][24];
    fprintf(f, "## Trained checkpoints\n\n"
               "Instances: each evaluation item's forward, every layer and head, the query of "
               "n keys (i = n - 1), with the model's own couplings and field bias. The "
               "checkpoints are those of the exact-trained grids (`make reproduce "
               "PRESET=approx` trains them and runs `boltzattn-lab approx --ckpt PATH --instances "
               "100` on each).\n\n"
               "| checkpoint | variant | bias | model engine | n | engine | W | instances | "
               "worst \\|Δw\\| mean (p95) | KL mean (p95) | worst \\|Δa\\| mean | conv. | "
               "sweeps mean / max |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < d->nckpts; i++) {
        const rec *x = &d->ckpts[i];
        fprintf(f, "| %s | %s | %s | %s | %d | %s | %d | %d (%d item%s x %d x %d) | %s (%s) | "
                   "%s (%s) | %s | %s | %s / %s |\n",
                x->label, x->variant, x->bias, x->model_engine, x->n, x->engine, x->window,
                x->instances, x->items, x->items == 1 ? "" : "s", x->layers, x->heads,
                num(x->v[DW_MEAN], b[0]), num(x->v[DW_P95], b[1]), num(x->v[KL_MEAN], b[2]),
                num(x->v[KL_P95], b[3]), num(x->v[DA_MEAN], b[4]), pct(x->v[CONV], b[5]),
                sweeps(x->v[SW_MEAN], b[6]), sweeps(x->v[SW_MAX], b[7]));
    }
    fprintf(f, "\n");
}

int approx_write_doc(const command *c, const char *doc, const char *from,
                     const char *exact_from)
{
    char path[PATH_LEN];
    int rc;
    if (!*from)
        return usage_error(c, "--from must not be empty");
    if (exact_from && !*exact_from)
        return usage_error(c, "--exact-from must not be empty");
    if (mkpath(c, path, "%s/accuracy.json", from))
        return 1;
    const char *inputs[1] = {path};
    if ((rc = check_out_file(c, "--doc", doc, inputs, 1)))
        return rc;
    approx_data d;
    ax_train *t = NULL;
    memset(&d, 0, sizeof d);
    if (!(rc = read_data(c, path, &d)) && !d.ncells && !d.nckpts)
        rc = usage_error(c, "%s holds no records", path);
    if (!rc)
        rc = ax_train_read(c, from, exact_from ? exact_from : "results/full", &t);
    out_file o;
    if (!rc)
        rc = out_open(c, &o);
    if (rc) {
        free(d.cells), free(d.ckpts);
        ax_train_free(t);
        return rc;
    }
    intro(o.f, &d, doc, from, exact_from, t != NULL);
    if (d.ncells)
        random_sections(o.f, &d);
    if (d.nckpts)
        ckpt_section(o.f, &d);
    if (d.ncells)
        probe_section(o.f, &d);
    if (t)
        ax_train_write(o.f, t);
    rc = out_close(c, &o, doc);
    if (!rc)
        printf("wrote %s from %s (%d cell%s, %d checkpoint record%s%s)\n", doc, path, d.ncells,
               d.ncells == 1 ? "" : "s", d.nckpts, d.nckpts == 1 ? "" : "s",
               t ? "; and the grids' training sections" : "");
    free(d.cells), free(d.ckpts);
    ax_train_free(t);
    return rc;
}
