/* boltzattn ablate: the grid of attention variants x T x widths x FFN x
 * seeds (x samplers x shots for boltzmann and coupling), trained with
 * identical settings and data order per seed, resumable, summarised with
 * paired confidence intervals against softmax. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST 32

static opt ablate_opts[] = {
    {"task", "charlm|brackets", NULL, "task (required)", 0, 0},
    {"attn", "LIST", "softmax,sigmoid,boltzmann,coupling", "attention variants", 0, 0},
    {"T", "LIST", "8", "block sizes", 0, 0},
    {"embd", "LIST", "64", "model widths C", 0, 0},
    {"seeds", "N", "5", "seeds per cell", 0, 0},
    {"seed0", "N", "1", "first seed (seeds are seed0 .. seed0+N-1)", 0, 0},
    {"no-ffn-too", NULL, NULL, "run every cell with and without the FFN", 0, 0},
    {"no-ffn", NULL, NULL, "run every cell without the FFN only", 0, 0},
    {"layers", "N", "1", "transformer blocks", 0, 0},
    {"heads", "N", "1", "attention heads", 0, 0},
    {"steps", "N", "1000", "optimisation steps per run", 0, 0},
    {"batch", "N", "32", "sequences per step", 0, 0},
    {"lr", "X", "3e-3", "peak learning rate", 0, 0},
    {"min-lr", "X", "0.1", "final learning rate as a fraction of --lr", 0, 0},
    {"warmup", "N", "5% of steps", "linear warmup steps", 0, 0},
    {"weight-decay", "X", "0.1", "AdamW decay of weight matrices", 0, 0},
    {"clip", "X", "1.0", "global gradient-norm clip", 0, 0},
    {"data", "PATH", "$BA_DATA or data/tinyshakespeare.txt", "charlm text file", 0, 0},
    {"kinds", "N", "1", "brackets: bracket kinds", 0, 0},
    {"heldout", "N", "2000", "brackets: held-out sequences", 0, 0},
    {"data-seed", "N", "1234", "brackets: seed of the held-out set", 0, 0},
    {"engine", "NAME", "fast", "exact Ising engine: fast|reference", 0, 0},
    {"eval-every", "N", "steps/10", "validate every N steps (learning curves)", 0, 0},
    {"save-every", "N", "as --eval-every", "save the checkpoint and resumable state every N steps (0 = only at the end)", 0, 0},
    {"eval-items", "N", "512", "items in periodic validation", 0, 0},
    {"log-every", "N", "10", "write a training record to each run's metrics.jsonl every N steps", 0, 0},
    {"threads", "N", "all cores", "OpenMP and BLAS threads", 0, 0},
    {"out", "DIR", NULL, "grid directory (required); finished cells there are kept", 0, 0},
    {"summary-only", NULL, NULL, "train nothing: rewrite results and summary from DIR", 0, 0},
    {"sampler", "LIST", "exact",
     "samplers of the boltzmann/coupling cells: exact,direct,dqa,gibbs,sa (sampled cells are "
     "named ...-KIND-S<shots>)", 0, 0},
    {"shots", "LIST", NULL, "shots of the sampled cells", 0, 0},
    SAMPLER_PARAM_OPTS,
    {0, 0, 0, 0, 0, 0},
};
static const command ablate_cmd = {"ablate", "--task charlm|brackets --out DIR [options]",
                                   ablate_opts};

/* One arm of the comparison: a variant with its sampler (exact, shots 0,
 * for softmax and sigmoid and for exact boltzmann/coupling). */
typedef struct {
    int attn_i;
    ba_sampler sampler; /* kind and shots from the lists, the rest from the options */
} arm;

#define MAX_ARMS (4 * (1 + 4 * MAX_LIST))

/* One finished (or missing) run of the grid. */
typedef struct {
    int arm_i, T, C, ffn;
    uint64_t seed;
    int done;
    long steps;
    double value; /* val_ppl (charlm) or accuracy (brackets) */
    double val_loss, val_ppl, val_acc, wall_s;
    int items;
    long targets;
    /* a sampled run evaluated with exact inference too */
    int has_exact;
    double exact_value, exact_val_loss, exact_val_ppl, exact_val_acc;
} cell;

typedef struct {
    ba_task task;
    int nattn, nT, nC, nffn, nseeds, narms;
    ba_attn attn[MAX_LIST];
    arm arms[MAX_ARMS];
    int T[MAX_LIST], C[MAX_LIST], ffn[2];
    uint64_t seed0;
    const char *dir;
    cell *cells; /* nT x nC x nffn x nseeds x narms */
    int ncells;
} grid;

static int arm_sampled(const arm *a) { return a->sampler.kind != BA_SAMPLER_EXACT; }

static int parse_int_list(const char *cmd, const char *name, const char *s, int lo, int hi,
                          int *out, int *n)
{
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno == ERANGE || (*end != ',' && *end != '\0'))
            return usage_error(cmd, "--%s: '%s' is not a comma-separated list of integers", name,
                               s);
        if (v < lo || v > hi)
            return usage_error(cmd, "--%s: %ld is out of range [%d, %d]", name, v, lo, hi);
        if (*n >= MAX_LIST)
            return usage_error(cmd, "--%s: more than %d values", name, MAX_LIST);
        out[(*n)++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    if (*n == 0)
        return usage_error(cmd, "--%s: empty list", name);
    return 0;
}

/* Exact cells keep the names they always had (grids resume by name);
 * sampled ones add -KIND-S<shots>. */
static void cell_name(const grid *g, const cell *c, char *buf, size_t n)
{
    const arm *a = &g->arms[c->arm_i];
    char suffix[48] = "";
    if (arm_sampled(a))
        snprintf(suffix, sizeof suffix, "-%s-S%d", ba_sampler_name(a->sampler.kind),
                 a->sampler.shots);
    snprintf(buf, n, "%s-T%d-C%d-ffn%d-%s-s%llu%s", ba_task_name(g->task), c->T, c->C, c->ffn,
             ba_attn_name(g->attn[a->attn_i]), (unsigned long long)c->seed, suffix);
}

/* The arm's row label: the variant, with its sampler when sampled. */
static void arm_label(const grid *g, const arm *a, char *buf, size_t n)
{
    char d[96];
    sampler_desc(&a->sampler, d, sizeof d);
    if (arm_sampled(a))
        snprintf(buf, n, "%s (%s)", ba_attn_name(g->attn[a->attn_i]), d);
    else
        snprintf(buf, n, "%s", ba_attn_name(g->attn[a->attn_i]));
}

/* Reads DIR/runs/<cell>/result.json if a finished run left it. */
static void load_cell(const grid *g, cell *c)
{
    char name[256], path[4096];
    cell_name(g, c, name, sizeof name);
    snprintf(path, sizeof path, "%s/runs/%s/result.json", g->dir, name);
    c->done = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    char buf[4096];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    cJSON *o = cJSON_Parse(buf);
    const char *keys[] = {"steps", "value", "val_loss", "val_ppl", "val_acc", "wall_s",
                          "items", "targets"};
    double v[8];
    int ok = o != NULL;
    for (int i = 0; ok && i < 8; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
        ok = cJSON_IsNumber(x);
        if (ok)
            v[i] = x->valuedouble;
    }
    const char *xkeys[] = {"exact_value", "exact_val_loss", "exact_val_ppl", "exact_val_acc"};
    double xv[4];
    int has_exact = ok;
    for (int i = 0; has_exact && i < 4; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, xkeys[i]);
        has_exact = cJSON_IsNumber(x);
        if (has_exact)
            xv[i] = x->valuedouble;
    }
    cJSON_Delete(o);
    if (!ok)
        return; /* a torn or foreign file: the cell is run again */
    c->steps = (long)v[0], c->value = v[1], c->val_loss = v[2], c->val_ppl = v[3];
    c->val_acc = v[4], c->wall_s = v[5], c->items = (int)v[6], c->targets = (long)v[7];
    c->has_exact = has_exact;
    if (has_exact)
        c->exact_value = xv[0], c->exact_val_loss = xv[1], c->exact_val_ppl = xv[2],
        c->exact_val_acc = xv[3];
    c->done = 1;
}

/* Re-reads the cells still unfinished: another process working on the same
 * grid may have finished them since this one started. */
static void refresh_cells(const grid *g)
{
    for (int i = 0; i < g->ncells; i++)
        if (!g->cells[i].done)
            load_cell(g, &g->cells[i]);
}

/* Writes path atomically: a temporary file renamed over it. The temporary
 * name carries the process id, since two ablate processes on one grid write
 * its results files. */
static int write_atomic(const char *path, const char *text, char *err)
{
    char tmp[4096 + 32];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, BA_ERR_LEN, "cannot write %.200s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t n = strlen(text);
    int bad = fwrite(text, 1, n, f) != n;
    bad |= fflush(f) != 0;
    bad |= fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        snprintf(err, BA_ERR_LEN, "cannot write %.200s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static cJSON *cell_json(const grid *g, const cell *c)
{
    cJSON *o = cJSON_CreateObject();
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
    const arm *a = &g->arms[c->arm_i];
    cJSON_AddStringToObject(o, "task", ba_task_name(g->task));
    cJSON_AddStringToObject(o, "variant", ba_attn_name(g->attn[a->attn_i]));
    cJSON_AddStringToObject(o, "sampler", ba_sampler_name(a->sampler.kind));
    cJSON_AddNumberToObject(o, "shots", arm_sampled(a) ? a->sampler.shots : 0);
    cJSON_AddNumberToObject(o, "T", c->T);
    cJSON_AddNumberToObject(o, "C", c->C);
    cJSON_AddNumberToObject(o, "ffn", c->ffn);
    cJSON_AddNumberToObject(o, "seed", (double)c->seed);
    cJSON_AddNumberToObject(o, "steps", (double)c->steps);
    cJSON_AddStringToObject(o, "metric", g->task == BA_TASK_CHARLM ? "val_ppl" : "accuracy");
    cJSON_AddNumberToObject(o, "value", c->value);
    cJSON_AddNumberToObject(o, "val_loss", c->val_loss);
    cJSON_AddNumberToObject(o, "val_ppl", c->val_ppl);
    cJSON_AddNumberToObject(o, "val_acc", c->val_acc);
    cJSON_AddNumberToObject(o, "items", c->items);
    cJSON_AddNumberToObject(o, "targets", (double)c->targets);
    cJSON_AddNumberToObject(o, "wall_s", c->wall_s);
    if (c->has_exact) {
        cJSON_AddNumberToObject(o, "exact_value", c->exact_value);
        cJSON_AddNumberToObject(o, "exact_val_loss", c->exact_val_loss);
        cJSON_AddNumberToObject(o, "exact_val_ppl", c->exact_val_ppl);
        cJSON_AddNumberToObject(o, "exact_val_acc", c->exact_val_acc);
    }
    return o;
}

static int save_cell(const grid *g, const cell *c, char *err)
{
    char name[256], path[4096];
    cell_name(g, c, name, sizeof name);
    snprintf(path, sizeof path, "%s/runs/%s/result.json", g->dir, name);
    cJSON *o = cell_json(g, c);
    char *txt = cJSON_Print(o);
    cJSON_Delete(o);
    int rc = txt ? write_atomic(path, txt, err) : -1;
    free(txt);
    return rc;
}

static int same_double(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(a); }

/* A cell interrupted mid-run left its last save point in its directory: it
 * continues from there (bit-identical to an uninterrupted run) when it was
 * started with exactly this model and these settings; otherwise it starts
 * over. Long cells (T = 20 and up) then survive a stopped grid. */
static int can_resume(const char *rundir, const ba_config *cfg, const train_settings *s)
{
    char err[BA_ERR_LEN], *data = NULL;
    ba_config sc;
    train_settings ss;
    if (read_resume_info(rundir, &sc, &ss, &data, err) != BA_OK)
        return 0;
    free(data);
    char *a = ba_config_to_json(&sc), *b = ba_config_to_json(cfg);
    int same = a && b && strcmp(a, b) == 0;
    free(a), free(b);
    same = same && ss.steps == s->steps && ss.warmup == s->warmup && ss.batch == s->batch &&
           ss.eval_every == s->eval_every && ss.eval_items == s->eval_items &&
           ss.log_every == s->log_every && ss.save_every == s->save_every &&
           ss.seed == s->seed && same_double(ss.lr, s->lr) &&
           same_double(ss.lr * ss.min_lr_frac, s->lr * s->min_lr_frac) &&
           same_double(ss.j_init_std, s->j_init_std) &&
           same_double(ss.opt.weight_decay, s->opt.weight_decay) &&
           same_double(ss.opt.beta1, s->opt.beta1) && same_double(ss.opt.beta2, s->opt.beta2) &&
           same_double(ss.opt.grad_clip, s->opt.grad_clip);
    return same;
}

/* ----------------------------------------------------------- summary */

/* The paper's numbers (spec section 1) for a group, or NULL. */
static const char *paper_number(ba_task task, ba_attn a, int T, int ffn)
{
    if (a != BA_ATTN_BOLTZMANN)
        return NULL;
    if (task == BA_TASK_CHARLM && T == 12)
        return "-1.08 %";
    if (task == BA_TASK_BRACKETS && T == 16)
        return ffn ? "+2.89 points" : "+4.53 points";
    return NULL;
}

static const cell *find_cell(const grid *g, int arm_i, int T, int C, int ffn, uint64_t seed)
{
    for (int i = 0; i < g->ncells; i++) {
        const cell *c = &g->cells[i];
        if (c->arm_i == arm_i && c->T == T && c->C == C && c->ffn == ffn && c->seed == seed)
            return c;
    }
    return NULL;
}

/* Per-seed metric in the unit the summary reports: perplexity (charlm),
 * accuracy in % (brackets). */
static double shown(const grid *g, const cell *c)
{
    return g->task == BA_TASK_CHARLM ? c->value : 100.0 * c->value;
}

static double shown_exact(const grid *g, const cell *c)
{
    return g->task == BA_TASK_CHARLM ? c->exact_value : 100.0 * c->exact_value;
}

/* Paired effect of variant v against softmax on one seed: relative
 * perplexity change in % (charlm), accuracy points (brackets). */
static double effect(const grid *g, const cell *v, const cell *s)
{
    if (g->task == BA_TASK_CHARLM)
        return 100.0 * (v->value / s->value - 1.0);
    return 100.0 * (v->value - s->value);
}

/* summary.md into f and, for scripts (tools/report.sh), the same numbers
 * into ef as effects.csv: one row per (T, C, ffn, variant). */
static void write_summary(const grid *g, FILE *f, FILE *ef)
{
    fprintf(ef, "task,T,C,ffn,variant,sampler,shots,runs,seeds,mean,sd,pairs,effect,ci_lo,ci_hi,unit,paper\n");
    int bt = g->task == BA_TASK_BRACKETS;
    int done = 0;
    for (int i = 0; i < g->ncells; i++)
        done += g->cells[i].done;
    fprintf(f, "# Ablation summary: %s\n\n", ba_task_name(g->task));
    fprintf(f, "%d of %d runs finished. Metric: %s. Each row: mean ± standard deviation over "
               "seeds; the effect is the paired difference to `softmax` on the same seeds (%s) "
               "with its 95 %% confidence interval (Student t over seeds). Cells with missing "
               "runs say so; nothing is filled in. A sampled variant (sampler and shots S in "
               "parentheses) is trained and evaluated with that sampler; its value is followed "
               "by the mean of the same weights evaluated with exact inference, where T "
               "allows.\n\n",
            done, g->ncells,
            bt ? "held-out accuracy (%)" : "validation perplexity",
            bt ? "accuracy points" : "relative perplexity change, negative is better");
    int sm = -1;
    for (int a = 0; a < g->narms; a++)
        if (g->attn[g->arms[a].attn_i] == BA_ATTN_SOFTMAX)
            sm = a;
    double *xs = malloc(sizeof(double) * (size_t)g->nseeds * 3);
    if (!xs)
        return;
    double *ys = xs + g->nseeds, *es = ys + g->nseeds;
    for (int ti = 0; ti < g->nT; ti++)
        for (int ci = 0; ci < g->nC; ci++)
            for (int fi = 0; fi < g->nffn; fi++) {
                int T = g->T[ti], C = g->C[ci], ffn = g->ffn[fi];
                fprintf(f, "## T = %d, C = %d, %s\n\n", T, C, ffn ? "with FFN" : "without FFN");
                /* held-out size beside every bracket accuracy */
                const cell *any = NULL;
                for (int i = 0; i < g->ncells && !any; i++) {
                    const cell *c = &g->cells[i];
                    if (c->done && c->T == T && c->C == C && c->ffn == ffn)
                        any = c;
                }
                if (any && bt)
                    fprintf(f, "Held-out set: %d sequences, %ld ')' targets.\n\n", any->items,
                            any->targets);
                else if (any)
                    fprintf(f, "Validation: %d windows, %ld targets.\n\n", any->items,
                            any->targets);
                fprintf(f, "| variant | runs | %s | effect vs softmax (95 %% CI) | paper |\n",
                        bt ? "accuracy %" : "perplexity");
                fprintf(f, "|---|---|---|---|---|\n");
                for (int a = 0; a < g->narms; a++) {
                    int n = 0, np = 0, ne = 0;
                    char missing[256] = "";
                    for (int si = 0; si < g->nseeds; si++) {
                        uint64_t seed = g->seed0 + (uint64_t)si;
                        const cell *c = find_cell(g, a, T, C, ffn, seed);
                        const cell *s = sm >= 0 ? find_cell(g, sm, T, C, ffn, seed) : NULL;
                        if (c && c->done) {
                            xs[n++] = shown(g, c);
                            if (c->has_exact)
                                es[ne++] = shown_exact(g, c);
                            if (s && s->done && a != sm) {
                                ys[np] = effect(g, c, s);
                                np++;
                            }
                        } else {
                            size_t l = strlen(missing);
                            snprintf(missing + l, sizeof missing - l, "%s%llu", l ? ", " : "",
                                     (unsigned long long)seed);
                        }
                    }
                    ba_summary m = ba_summarize(xs, n);
                    ba_summary d = ba_summarize(ys, np);
                    char val[160], eff[128], runs[320], label[160];
                    if (n == 0)
                        snprintf(val, sizeof val, "missing");
                    else if (n == 1)
                        snprintf(val, sizeof val, "%.2f (one run)", m.mean);
                    else
                        snprintf(val, sizeof val, "%.2f ± %.2f", m.mean, m.sd);
                    if (ne > 0) {
                        size_t l = strlen(val);
                        snprintf(val + l, sizeof val - l, " (exact inference %.2f)",
                                 ba_summarize(es, ne).mean);
                    }
                    if (a == sm)
                        snprintf(eff, sizeof eff, "(reference)");
                    else if (np == 0)
                        snprintf(eff, sizeof eff, "missing");
                    else if (np == 1)
                        snprintf(eff, sizeof eff, "%+.2f (one pair, no interval)", d.mean);
                    else
                        snprintf(eff, sizeof eff, "%+.2f [%+.2f, %+.2f]", d.mean,
                                 d.mean - d.ci95, d.mean + d.ci95);
                    if (missing[0])
                        snprintf(runs, sizeof runs, "%d of %d (missing seeds %s)", n, g->nseeds,
                                 missing);
                    else
                        snprintf(runs, sizeof runs, "%d", n);
                    const arm *ar = &g->arms[a];
                    const char *paper = arm_sampled(ar)
                                            ? NULL
                                            : paper_number(g->task, g->attn[ar->attn_i], T, ffn);
                    arm_label(g, ar, label, sizeof label);
                    fprintf(f, "| %s | %s | %s | %s | %s |\n", label, runs, val, eff,
                            paper ? paper : "");
                    /* empty fields where a value does not exist */
                    fprintf(ef, "%s,%d,%d,%d,%s,%s,%d,%d,%d,", ba_task_name(g->task), T, C, ffn,
                            ba_attn_name(g->attn[ar->attn_i]), ba_sampler_name(ar->sampler.kind),
                            arm_sampled(ar) ? ar->sampler.shots : 0, n, g->nseeds);
                    if (n > 0)
                        fprintf(ef, "%.6g,", m.mean);
                    else
                        fprintf(ef, ",");
                    if (n > 1)
                        fprintf(ef, "%.6g,", m.sd);
                    else
                        fprintf(ef, ",");
                    fprintf(ef, "%d,", np);
                    if (np > 0)
                        fprintf(ef, "%.6g,", d.mean);
                    else
                        fprintf(ef, ",");
                    if (np > 1)
                        fprintf(ef, "%.6g,%.6g,", d.mean - d.ci95, d.mean + d.ci95);
                    else
                        fprintf(ef, ",,");
                    fprintf(ef, "%s,%s\n", g->task == BA_TASK_CHARLM ? "percent" : "points",
                            paper ? paper : "");
                }
                fprintf(f, "\n");
            }
    free(xs);
    if (sm < 0)
        fprintf(f, "`softmax` is not in the grid, so no effects are computed.\n");
}

static int write_outputs(const grid *g, char *err)
{
    char path[4096];
    /* results.csv and results.json: one row per finished run */
    size_t cap = 4096, len = 0;
    char *csv = malloc(cap);
    if (!csv) {
        snprintf(err, BA_ERR_LEN, "out of memory");
        return -1;
    }
    len = (size_t)snprintf(csv, cap, "task,variant,T,C,ffn,seed,steps,metric,value,val_loss,"
                                     "val_ppl,val_acc,items,targets,wall_s,sampler,shots,"
                                     "exact_value\n");
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < g->ncells; i++) {
        const cell *c = &g->cells[i];
        if (!c->done)
            continue;
        const arm *a = &g->arms[c->arm_i];
        char row[512], xv[32] = "";
        if (c->has_exact)
            snprintf(xv, sizeof xv, "%.8g", c->exact_value);
        int n = snprintf(row, sizeof row,
                         "%s,%s,%d,%d,%d,%llu,%ld,%s,%.8g,%.8g,%.8g,%.8g,%d,%ld,%.3f,%s,%d,%s\n",
                         ba_task_name(g->task), ba_attn_name(g->attn[a->attn_i]), c->T, c->C,
                         c->ffn, (unsigned long long)c->seed, c->steps,
                         g->task == BA_TASK_CHARLM ? "val_ppl" : "accuracy", c->value,
                         c->val_loss, c->val_ppl, c->val_acc, c->items, c->targets, c->wall_s,
                         ba_sampler_name(a->sampler.kind),
                         arm_sampled(a) ? a->sampler.shots : 0, xv);
        if (len + (size_t)n + 1 > cap) {
            char *bigger = realloc(csv, cap * 2 + (size_t)n);
            if (!bigger) {
                free(csv);
                cJSON_Delete(arr);
                snprintf(err, BA_ERR_LEN, "out of memory");
                return -1;
            }
            csv = bigger, cap = cap * 2 + (size_t)n;
        }
        memcpy(csv + len, row, (size_t)n + 1);
        len += (size_t)n;
        cJSON_AddItemToArray(arr, cell_json(g, c));
    }
    snprintf(path, sizeof path, "%s/results.csv", g->dir);
    int rc = write_atomic(path, csv, err);
    free(csv);
    char *js = cJSON_Print(arr);
    cJSON_Delete(arr);
    snprintf(path, sizeof path, "%s/results.json", g->dir);
    if (rc == 0)
        rc = js ? write_atomic(path, js, err) : -1;
    free(js);
    if (rc)
        return rc;
    /* summary.md and effects.csv */
    char *buf = NULL, *ebuf = NULL;
    size_t blen = 0, elen = 0;
    FILE *mem = open_memstream(&buf, &blen), *emem = open_memstream(&ebuf, &elen);
    if (!mem || !emem) {
        if (mem)
            fclose(mem);
        if (emem)
            fclose(emem);
        free(buf), free(ebuf);
        snprintf(err, BA_ERR_LEN, "out of memory");
        return -1;
    }
    write_summary(g, mem, emem);
    fclose(mem);
    fclose(emem);
    snprintf(path, sizeof path, "%s/summary.md", g->dir);
    rc = write_atomic(path, buf, err);
    snprintf(path, sizeof path, "%s/effects.csv", g->dir);
    if (rc == 0)
        rc = write_atomic(path, ebuf, err);
    free(buf), free(ebuf);
    return rc;
}

/* -------------------------------------------------------------- main */

int cmd_ablate(int argc, char **argv)
{
    const command *c = &ablate_cmd;
    sampler_opt_defaults(c);
    int rc = parse_opts(c, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    char err[BA_ERR_LEN];
    grid g;
    memset(&g, 0, sizeof g);
    if (!get_str(c, "task"))
        return usage_error(c->cmd, "option '--task' is required");
    if (!get_str(c, "out"))
        return usage_error(c->cmd, "option '--out' is required");
    g.dir = get_str(c, "out");
    if (ba_task_parse(get_str(c, "task"), &g.task, err))
        return usage_error(c->cmd, "%s", err);
    /* variants */
    char list[512];
    snprintf(list, sizeof list, "%s", get_str(c, "attn"));
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (g.nattn >= 4)
            return usage_error(c->cmd, "--attn: at most 4 variants");
        if (ba_attn_parse(tok, &g.attn[g.nattn], err))
            return usage_error(c->cmd, "--attn: %s", err);
        for (int i = 0; i < g.nattn; i++)
            if (g.attn[i] == g.attn[g.nattn])
                return usage_error(c->cmd, "--attn: '%s' is listed twice", tok);
        g.nattn++;
    }
    if (g.nattn == 0)
        return usage_error(c->cmd, "--attn: empty list");
    long seed0;
    model_opts mo;
    train_settings s;
    if ((rc = parse_shared_opts(c, &mo, &s)) ||
        (rc = parse_int_list(c->cmd, "T", get_str(c, "T"), 1, BA_MAX_BLOCK, g.T, &g.nT)) ||
        (rc = parse_int_list(c->cmd, "embd", get_str(c, "embd"), 1, 8192, g.C, &g.nC)) ||
        (rc = get_int(c, "seeds", 1, 1000, &g.nseeds)) ||
        (rc = get_long(c, "seed0", 0, LONG_MAX, &seed0)) ||
        (rc = get_int(c, "log-every", 1, INT_MAX, &s.log_every)))
        return rc;
    g.seed0 = (uint64_t)seed0;
    /* samplers and shots: the arms of the comparison */
    ba_sampler_kind skinds[8];
    int nkinds = 0, shots[MAX_LIST], nshots = 0, any_sampled = 0;
    snprintf(list, sizeof list, "%s", get_str(c, "sampler"));
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (nkinds >= 5)
            return usage_error(c->cmd, "--sampler: at most 5 samplers");
        if (ba_sampler_parse(tok, &skinds[nkinds], err))
            return usage_error(c->cmd, "--sampler: %s", err);
        for (int i = 0; i < nkinds; i++)
            if (skinds[i] == skinds[nkinds])
                return usage_error(c->cmd, "--sampler: '%s' is listed twice", tok);
        any_sampled |= skinds[nkinds] != BA_SAMPLER_EXACT;
        nkinds++;
    }
    if (nkinds == 0)
        return usage_error(c->cmd, "--sampler: empty list");
    if (find_opt(c, "shots")->set && !any_sampled)
        return usage_error(c->cmd, "--shots needs a sampler other than exact (--sampler)");
    if ((rc = parse_int_list(c->cmd, "shots", get_str(c, "shots"), 1, 1 << 24, shots, &nshots)) ||
        (rc = parse_sampler_params(c, skinds, nkinds, 0)))
        return rc;
    for (int i = 0; i < nshots; i++)
        for (int j = 0; j < i; j++)
            if (shots[i] == shots[j])
                return usage_error(c->cmd, "--shots: %d is listed twice", shots[i]);
    int ising_in_grid = 0;
    for (int a = 0; a < g.nattn; a++) {
        int ising = g.attn[a] == BA_ATTN_BOLTZMANN || g.attn[a] == BA_ATTN_COUPLING;
        ising_in_grid |= ising;
        /* sampling applies to boltzmann and coupling only */
        for (int k = 0; k < (ising ? nkinds : 1); k++)
            for (int si = 0; si < (ising && skinds[k] != BA_SAMPLER_EXACT ? nshots : 1); si++) {
                arm *ar = &g.arms[g.narms++];
                ar->attn_i = a;
                ar->sampler = ba_sampler_default(ising ? skinds[k] : BA_SAMPLER_EXACT);
                if (arm_sampled(ar)) {
                    apply_sampler_params(c, &ar->sampler, 0);
                    ar->sampler.shots = shots[si];
                }
            }
    }
    if (any_sampled && !ising_in_grid)
        return usage_error(c->cmd, "--sampler: sampling applies to boltzmann and coupling only, "
                                   "and neither is in --attn");
    ba_engine engine = mo.engine;
    int layers = mo.layers, heads = mo.heads, kinds = mo.kinds, heldout = mo.heldout;
    uint64_t data_seed = mo.data_seed;
    if (get_flag(c, "no-ffn") && get_flag(c, "no-ffn-too"))
        return usage_error(c->cmd, "--no-ffn and --no-ffn-too exclude each other");
    g.nffn = get_flag(c, "no-ffn-too") ? 2 : 1;
    g.ffn[0] = get_flag(c, "no-ffn") ? 0 : 1;
    g.ffn[1] = 0;
    /* Every configuration is checked before anything is trained. */
    for (int ti = 0; ti < g.nT; ti++)
        for (int ci = 0; ci < g.nC; ci++)
            for (int a = 0; a < g.narms; a++) {
                ba_config cfg = ba_config_default(g.task, g.attn[g.arms[a].attn_i], g.T[ti]);
                cfg.sampler = g.arms[a].sampler;
                cfg.engine = engine, cfg.n_layer = layers, cfg.n_head = heads;
                cfg.n_embd = g.C[ci], cfg.kinds = kinds;
                cfg.vocab_size = g.task == BA_TASK_BRACKETS ? 2 * kinds : 1;
                cfg.out_size = g.task == BA_TASK_BRACKETS ? g.T[ti] : 1;
                if (ba_config_validate(&cfg, err))
                    return usage_error(c->cmd, "%s", err);
            }
    g.ncells = g.nT * g.nC * g.nffn * g.nseeds * g.narms;
    g.cells = calloc((size_t)g.ncells, sizeof(cell));
    if (!g.cells) {
        fprintf(stderr, "%s ablate: out of memory\n", prog);
        return 1;
    }
    int k = 0;
    for (int ti = 0; ti < g.nT; ti++)
        for (int ci = 0; ci < g.nC; ci++)
            for (int fi = 0; fi < g.nffn; fi++)
                for (int si = 0; si < g.nseeds; si++)
                    for (int a = 0; a < g.narms; a++) {
                        cell *x = &g.cells[k++];
                        x->arm_i = a, x->T = g.T[ti], x->C = g.C[ci], x->ffn = g.ffn[fi];
                        x->seed = g.seed0 + (uint64_t)si;
                        load_cell(&g, x);
                    }
    char path[4096];
    snprintf(path, sizeof path, "%s/runs", g.dir);
    if (make_dirs(path, err)) {
        free(g.cells);
        return fail_lib(c->cmd, 0, err, 1);
    }
    int finished = 0;
    for (int i = 0; i < g.ncells; i++)
        finished += g.cells[i].done;
    const char *data_path = find_opt(c, "data")->set ? get_str(c, "data") : default_data_path();
    int code = 0;
    if (!get_flag(c, "summary-only")) {
        fprintf(stderr, "ablate %s: %d runs in the grid, %d already finished in %s\n",
                ba_task_name(g.task), g.ncells, finished, g.dir);
        ba_dataset *data = NULL;
        int data_T = -1;
        double t0 = now_s();
        int ran = 0;
        for (int i = 0; i < g.ncells && code == 0; i++) {
            cell *x = &g.cells[i];
            if (x->done)
                continue;
            ba_config cfg = ba_config_default(g.task, g.attn[g.arms[x->arm_i].attn_i], x->T);
            cfg.sampler = g.arms[x->arm_i].sampler;
            cfg.engine = engine, cfg.n_layer = layers, cfg.n_head = heads, cfg.n_embd = x->C;
            cfg.ffn = x->ffn, cfg.kinds = kinds, cfg.n_heldout = heldout;
            cfg.data_seed = data_seed;
            if (data_T != x->T) { /* datasets depend on T only */
                ba_dataset_free(data);
                data = NULL;
                int st = open_dataset(&cfg, data_path, 0, &data, err);
                if (st) {
                    code = fail_lib(c->cmd, st, err, input_status(st));
                    break;
                }
                data_T = x->T;
            }
            ba_config_set_data(&cfg, data);
            char name[256], rundir[4096];
            cell_name(&g, x, name, sizeof name);
            snprintf(rundir, sizeof rundir, "%s/runs/%s", g.dir, name);
            if (make_dirs(rundir, err)) {
                code = fail_lib(c->cmd, 0, err, 1);
                break;
            }
            /* The cell's lock (the one `train` takes) is held while this
             * process decides and trains: two ablate processes on one grid
             * share its cells instead of training one twice. */
            dir_lock lock;
            int lk = take_lock(rundir, &lock, err);
            if (lk == 2) {
                fprintf(stderr, "%s is being trained by another process: skipped\n", name);
                continue;
            }
            if (lk) {
                code = fail_lib(c->cmd, 0, err, 1);
                break;
            }
            load_cell(&g, x); /* finished by another process meanwhile? */
            if (x->done) {
                release_lock(&lock);
                continue;
            }
            train_settings si = s;
            si.seed = x->seed;
            si.resume = can_resume(rundir, &cfg, &si);
            if (si.resume)
                fprintf(stderr, "%s continues from its last save point\n", name);
            train_outcome res;
            code = run_training_locked(c->cmd, &cfg, data, &si, rundir, data_path, 0, &res);
            if (code) {
                release_lock(&lock);
                break;
            }
            x->done = 1, x->steps = res.steps, x->wall_s = res.train_s_total;
            x->val_loss = res.final.loss, x->val_ppl = res.final.ppl;
            x->val_acc = res.final.accuracy, x->items = res.final.n_items;
            x->targets = res.final.n_targets;
            x->value = g.task == BA_TASK_CHARLM ? res.final.ppl : res.final.accuracy;
            x->has_exact = res.has_exact;
            if (res.has_exact) {
                x->exact_val_loss = res.exact.loss, x->exact_val_ppl = res.exact.ppl;
                x->exact_val_acc = res.exact.accuracy;
                x->exact_value = g.task == BA_TASK_CHARLM ? res.exact.ppl : res.exact.accuracy;
            }
            /* result.json before the lock goes: a process that takes the
             * lock next must find the cell finished */
            int bad = save_cell(&g, x, err);
            release_lock(&lock);
            refresh_cells(&g);
            if (bad || write_outputs(&g, err)) {
                code = fail_lib(c->cmd, 0, err, 1);
                break;
            }
            ran++;
            double el = now_s() - t0;
            char eta[32], elb[32];
            int ndone = 0, ahead = 0; /* this process's runs and any other's */
            for (int j = 0; j < g.ncells; j++) {
                ndone += g.cells[j].done;
                ahead += j > i && !g.cells[j].done; /* what this process has left */
            }
            fmt_duration(el / ran * ahead, eta, sizeof eta);
            fmt_duration(el, elb, sizeof elb);
            fprintf(stderr, "[%d/%d] %s: %s %.4g  (%s elapsed, ETA %s)\n", ndone,
                    g.ncells, name, g.task == BA_TASK_CHARLM ? "val_ppl" : "accuracy",
                    x->value, elb, eta);
        }
        ba_dataset_free(data);
    }
    refresh_cells(&g);
    if (code == 0 && write_outputs(&g, err))
        code = fail_lib(c->cmd, 0, err, 1);
    if (code == 0)
        printf("results: %s/results.csv, %s/results.json, %s/summary.md\n", g.dir, g.dir, g.dir);
    free(g.cells);
    return code;
}
