/* A grid's summary: per (T, C, FFN) every arm's metric over seeds and its
 * paired effect against softmax with a 95 % interval (the library's
 * statistics), as Markdown (summary.md, and the sections reports quote)
 * and the export files (results.csv, results.json, effects.csv). All of
 * it is computed from the cells' run records; nothing is read back. */
#include "grid.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *lab_ref_text(const lab_refs *refs, ba_task task, ba_attn a, int T, int ffn)
{
    for (int i = 0; refs && i < refs->n; i++) {
        const lab_ref *r = &refs->v[i];
        if (r->task == task && r->attn == a && r->T == T && (r->ffn < 0 || r->ffn == ffn))
            return r->text;
    }
    return NULL;
}

double lab_shown(ba_task task, double value)
{
    return task == BA_TASK_CHARLM ? value : 100.0 * value;
}

double lab_effect(ba_task task, double v, double s)
{
    if (task == BA_TASK_CHARLM)
        return 100.0 * (v / s - 1.0);
    return 100.0 * (v - s);
}

/* One row: an arm in one (T, C, FFN), over the grid's seeds. missing (may
 * be NULL) lists the seeds without a run. */
static void effect_row(const lab_cells *cs, int a, int T, int C, int ffn, double *work,
                       lab_effect_row *row, char *missing, size_t mcap)
{
    const lab_grid *g = cs->g;
    int sm = lab_softmax_arm(g), n = 0, np = 0, ne = 0;
    double *xs = work, *ys = work + g->nseeds, *es = ys + g->nseeds;
    if (missing)
        missing[0] = '\0';
    for (int si = 0; si < g->nseeds; si++) {
        uint64_t seed = g->seed0 + (uint64_t)si;
        const lab_cell *x = lab_cells_find(cs, a, T, C, ffn, seed);
        const lab_cell *s = sm >= 0 ? lab_cells_find(cs, sm, T, C, ffn, seed) : NULL;
        if (x && x->run) {
            xs[n++] = lab_shown(g->task, x->run->value);
            if (x->run->has_exact)
                es[ne++] = lab_shown(g->task, x->run->exact_value);
            if (s && s->run && a != sm)
                ys[np++] = lab_effect(g->task, x->run->value, s->run->value);
        } else if (missing) {
            size_t l = strlen(missing);
            snprintf(missing + l, mcap - l, "%s%" PRIu64, l ? ", " : "", seed);
        }
    }
    ba_summary m = ba_summarize(xs, n), d = ba_summarize(ys, np);
    row->arm = a, row->T = T, row->C = C, row->ffn = ffn;
    row->runs = n, row->seeds = g->nseeds, row->pairs = np;
    row->mean = n > 0 ? m.mean : NAN;
    row->sd = n > 1 ? m.sd : NAN;
    row->effect = np > 0 ? d.mean : NAN;
    row->lo = np > 1 ? d.mean - d.ci95 : NAN;
    row->hi = np > 1 ? d.mean + d.ci95 : NAN;
    row->exact_mean = ne > 0 ? ba_summarize(es, ne).mean : NAN;
    /* the paper's numbers are of its own model: exact and plain */
    row->paper = lab_arm_sampled(&g->arms[a]) || !lab_form_is_plain(&g->arms[a].form)
                     ? NULL
                     : lab_ref_text(cs->refs, g->task, g->arms[a].attn, T, ffn);
}

int lab_effect_rows(const lab_cells *cs, lab_effect_row **rows, int *n)
{
    const lab_grid *g = cs->g;
    *n = g->nT * g->nC * g->nffn * g->narms;
    *rows = calloc((size_t)*n + 1, sizeof **rows);
    double *work = malloc(sizeof(double) * (size_t)g->nseeds * 3);
    if (!*rows || !work) {
        free(*rows), free(work);
        *rows = NULL;
        return 1;
    }
    int k = 0;
    for (int ti = 0; ti < g->nT; ti++)
        for (int ci = 0; ci < g->nC; ci++)
            for (int fi = 0; fi < g->nffn; fi++)
                for (int a = 0; a < g->narms; a++)
                    effect_row(cs, a, g->T[ti], g->C[ci], g->ffn[fi], work, &(*rows)[k++], NULL,
                               0);
    free(work);
    return 0;
}

/* The table of one (T, C, FFN): held-out size, header and a row per arm. */
static void section_table(const lab_cells *cs, int T, int C, int ffn, double *work, FILE *f)
{
    const lab_grid *g = cs->g;
    int bt = g->task != BA_TASK_CHARLM, sm = lab_softmax_arm(g); /* an accuracy */
    /* held-out size beside every bracket accuracy */
    const lab_run *any = NULL;
    for (int i = 0; i < cs->n && !any; i++) {
        const lab_cell *x = &cs->cells[i];
        if (x->run && x->T == T && x->C == C && x->ffn == ffn)
            any = x->run;
    }
    if (any && bt)
        fprintf(f, "Held-out set: %d sequences, %ld %s targets.\n\n", any->info.result.n_items,
                any->info.result.n_targets,
                g->task == BA_TASK_RECALL ? "queried-value" : "')'");
    else if (any)
        fprintf(f, "Validation: %d windows, %ld targets.\n\n", any->info.result.n_items,
                any->info.result.n_targets);
    fprintf(f, "| variant | runs | %s | effect vs softmax (95 %% CI) | paper |\n",
            bt ? "accuracy %" : "perplexity");
    fprintf(f, "|---|---|---|---|---|\n");
    for (int a = 0; a < g->narms; a++) {
        lab_effect_row r;
        char missing[256], val[160], eff[128], runs[320], label[160];
        effect_row(cs, a, T, C, ffn, work, &r, missing, sizeof missing);
        if (r.runs == 0)
            snprintf(val, sizeof val, "missing");
        else if (r.runs == 1)
            snprintf(val, sizeof val, "%.2f (one run)", r.mean);
        else
            snprintf(val, sizeof val, "%.2f ± %.2f", r.mean, r.sd);
        if (!isnan(r.exact_mean)) {
            size_t l = strlen(val);
            snprintf(val + l, sizeof val - l, " (exact inference %.2f)", r.exact_mean);
        }
        if (a == sm)
            snprintf(eff, sizeof eff, "(reference)");
        else if (r.pairs == 0)
            snprintf(eff, sizeof eff, "missing");
        else if (r.pairs == 1)
            snprintf(eff, sizeof eff, "%+.2f (one pair, no interval)", r.effect);
        else
            snprintf(eff, sizeof eff, "%+.2f [%+.2f, %+.2f]", r.effect, r.lo, r.hi);
        if (missing[0])
            snprintf(runs, sizeof runs, "%d of %d (missing seeds %s)", r.runs, g->nseeds, missing);
        else
            snprintf(runs, sizeof runs, "%d", r.runs);
        lab_arm_label(&g->arms[a], label, sizeof label);
        fprintf(f, "| %s | %s | %s | %s | %s |\n", label, runs, val, eff, r.paper ? r.paper : "");
    }
}

int lab_summary_section(const lab_cells *cs, int T, int C, int ffn, FILE *f)
{
    const lab_grid *g = cs->g;
    int found = 0;
    for (int ti = 0; ti < g->nT; ti++)
        for (int ci = 0; ci < g->nC; ci++)
            for (int fi = 0; fi < g->nffn; fi++)
                found |= g->T[ti] == T && g->C[ci] == C && g->ffn[fi] == ffn;
    if (!found)
        return 0;
    double *work = malloc(sizeof(double) * (size_t)g->nseeds * 3);
    if (!work)
        return -1;
    fprintf(f, "\n");
    section_table(cs, T, C, ffn, work, f);
    fprintf(f, "\n");
    free(work);
    return 1;
}

int lab_summary_md(const lab_cells *cs, FILE *f)
{
    const lab_grid *g = cs->g;
    int bt = g->task != BA_TASK_CHARLM, done = lab_cells_finished(cs); /* bt: an accuracy */
    fprintf(f, "# Ablation summary: %s\n\n", ba_task_name(g->task));
    fprintf(f, "%d of %d runs finished. Metric: %s. Each row: mean ± standard deviation over "
               "seeds; the effect is the paired difference to `softmax` on the same seeds (%s) "
               "with its 95 %% confidence interval (Student t over seeds). Cells with missing "
               "runs say so; nothing is filled in. A sampled variant (sampler and shots S in "
               "parentheses) is trained and evaluated with that sampler; its value is followed "
               "by the mean of the same weights evaluated with exact inference, where T "
               "allows.\n\n",
            done, cs->n, bt ? "held-out accuracy (%)" : "validation perplexity",
            bt ? "accuracy points" : "relative perplexity change, negative is better");
    int forms = 0;
    for (int a = 0; a < g->narms; a++)
        forms |= !lab_form_is_plain(&g->arms[a].form);
    if (forms) /* said only where it applies: plain grids' summaries stay as they were */
        fprintf(f, "A variant's label names its form beyond the paper's: `-rel` relative "
                   "couplings (one per distance), `-W<W>` couplings of range W (a band), `-logn` "
                   "the log-n field bias, `-nopos` / `-pos` position embeddings left out / "
                   "learned against the default (none with relative couplings).\n\n");
    double *work = malloc(sizeof(double) * (size_t)g->nseeds * 3);
    if (!work)
        return -1;
    for (int ti = 0; ti < g->nT; ti++)
        for (int ci = 0; ci < g->nC; ci++)
            for (int fi = 0; fi < g->nffn; fi++) {
                fprintf(f, "## T = %d, C = %d, %s\n\n", g->T[ti], g->C[ci],
                        g->ffn[fi] ? "with FFN" : "without FFN");
                section_table(cs, g->T[ti], g->C[ci], g->ffn[fi], work, f);
                fprintf(f, "\n");
            }
    free(work);
    if (lab_softmax_arm(g) < 0)
        fprintf(f, "`softmax` is not in the grid, so no effects are computed.\n");
    return 0;
}

/* ------------------------------------------------------------ exports */

static void effects_csv(const lab_cells *cs, FILE *f)
{
    const lab_grid *g = cs->g;
    fprintf(f, "task,T,C,ffn,variant,sampler,shots,runs,seeds,mean,sd,pairs,effect,ci_lo,ci_hi,"
               "unit,paper\n");
    lab_effect_row *rows;
    int n;
    if (lab_effect_rows(cs, &rows, &n))
        return;
    for (int i = 0; i < n; i++) {
        const lab_effect_row *r = &rows[i];
        const lab_arm *ar = &g->arms[r->arm];
        char v[96];
        lab_arm_variant(ar, v, sizeof v);
        /* empty fields where a value does not exist */
        fprintf(f, "%s,%d,%d,%d,%s,%s,%d,%d,%d,", ba_task_name(g->task), r->T, r->C, r->ffn, v,
                ba_sampler_name(ar->sampler.kind),
                lab_arm_sampled(ar) ? ar->sampler.shots : 0, r->runs, r->seeds);
        if (!isnan(r->mean))
            fprintf(f, "%.6g", r->mean);
        fprintf(f, ",");
        if (!isnan(r->sd))
            fprintf(f, "%.6g", r->sd);
        fprintf(f, ",%d,", r->pairs);
        if (!isnan(r->effect))
            fprintf(f, "%.6g", r->effect);
        fprintf(f, ",");
        if (!isnan(r->lo))
            fprintf(f, "%.6g,%.6g,", r->lo, r->hi);
        else
            fprintf(f, ",,");
        fprintf(f, "%s,%s\n", g->task == BA_TASK_CHARLM ? "percent" : "points",
                r->paper ? r->paper : "");
    }
    free(rows);
}

static cJSON *cell_json(const lab_grid *g, const lab_cell *c)
{
    const lab_run *r = c->run;
    const lab_arm *a = &g->arms[c->arm];
    char v[96];
    lab_arm_variant(a, v, sizeof v);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "task", ba_task_name(g->task));
    cJSON_AddStringToObject(o, "variant", v);
    if (!lab_form_is_plain(&a->form)) { /* the label's parts, for scripts */
        cJSON_AddStringToObject(o, "attn", ba_attn_name(a->attn));
        cJSON_AddStringToObject(o, "couplings", ba_couplings_name(a->form.couplings));
        cJSON_AddNumberToObject(o, "band", a->form.band);
        cJSON_AddStringToObject(o, "field_bias", ba_field_bias_name(a->form.field_bias));
        lab_add_pos_emb(o, a->form.pos_emb);
    }
    cJSON_AddStringToObject(o, "sampler", ba_sampler_name(a->sampler.kind));
    cJSON_AddNumberToObject(o, "shots", lab_arm_sampled(a) ? a->sampler.shots : 0);
    cJSON_AddNumberToObject(o, "T", c->T);
    cJSON_AddNumberToObject(o, "C", c->C);
    cJSON_AddNumberToObject(o, "ffn", c->ffn);
    cJSON_AddNumberToObject(o, "seed", (double)c->seed);
    cJSON_AddNumberToObject(o, "steps", (double)r->info.step);
    cJSON_AddStringToObject(o, "metric", g->task == BA_TASK_CHARLM ? "val_ppl" : "accuracy");
    cJSON_AddNumberToObject(o, "value", r->value);
    cJSON_AddNumberToObject(o, "val_loss", r->info.result.loss);
    cJSON_AddNumberToObject(o, "val_ppl", r->info.result.ppl);
    cJSON_AddNumberToObject(o, "val_acc", r->info.result.accuracy);
    cJSON_AddNumberToObject(o, "items", r->info.result.n_items);
    cJSON_AddNumberToObject(o, "targets", (double)r->info.result.n_targets);
    cJSON_AddNumberToObject(o, "wall_s", r->wall_s);
    if (r->has_exact) {
        cJSON_AddNumberToObject(o, "exact_value", r->exact_value);
        cJSON_AddNumberToObject(o, "exact_val_loss", r->info.exact.loss);
        cJSON_AddNumberToObject(o, "exact_val_ppl", r->info.exact.ppl);
        cJSON_AddNumberToObject(o, "exact_val_acc", r->info.exact.accuracy);
    }
    return o;
}

static void results_csv(const lab_cells *cs, FILE *f, cJSON *arr)
{
    const lab_grid *g = cs->g;
    fprintf(f, "task,variant,T,C,ffn,seed,steps,metric,value,val_loss,val_ppl,val_acc,items,"
               "targets,wall_s,sampler,shots,exact_value\n");
    for (int i = 0; i < cs->n; i++) {
        const lab_cell *c = &cs->cells[i];
        if (!c->run)
            continue;
        const lab_run *r = c->run;
        const lab_arm *a = &g->arms[c->arm];
        char xv[32] = "", v[96];
        lab_arm_variant(a, v, sizeof v);
        if (r->has_exact)
            snprintf(xv, sizeof xv, "%.8g", r->exact_value);
        fprintf(f, "%s,%s,%d,%d,%d,%" PRIu64 ",%ld,%s,%.8g,%.8g,%.8g,%.8g,%d,%ld,%.3f,%s,%d,%s\n",
                ba_task_name(g->task), v, c->T, c->C, c->ffn, c->seed,
                r->info.step, g->task == BA_TASK_CHARLM ? "val_ppl" : "accuracy", r->value,
                r->info.result.loss, r->info.result.ppl, r->info.result.accuracy,
                r->info.result.n_items, r->info.result.n_targets, r->wall_s,
                ba_sampler_name(a->sampler.kind), lab_arm_sampled(a) ? a->sampler.shots : 0, xv);
        cJSON_AddItemToArray(arr, cell_json(g, c));
    }
}

int lab_write_outputs(const command *c, const char *dir, const lab_cells *cs)
{
    char path[PATH_LEN];
    out_file o;
    cJSON *arr = cJSON_CreateArray();
    if (!arr || out_open(c, &o)) {
        cJSON_Delete(arr);
        return 1;
    }
    results_csv(cs, o.f, arr);
    int rc = mkpath(c, path, "%s/results.csv", dir) ? 1 : out_close(c, &o, path);
    char *js = cJSON_Print(arr);
    cJSON_Delete(arr);
    if (!rc && (rc = out_open(c, &o)) == 0) {
        fputs(js ? js : "[]", o.f);
        rc = mkpath(c, path, "%s/results.json", dir) ? 1 : out_close(c, &o, path);
    }
    cJSON_free(js);
    if (!rc && (rc = out_open(c, &o)) == 0) {
        if (lab_summary_md(cs, o.f)) {
            out_discard(&o);
            rc = fail_lib(c, "out of memory", 1);
        } else {
            rc = mkpath(c, path, "%s/summary.md", dir) ? 1 : out_close(c, &o, path);
        }
    }
    if (!rc && (rc = out_open(c, &o)) == 0) {
        effects_csv(cs, o.f);
        rc = mkpath(c, path, "%s/effects.csv", dir) ? 1 : out_close(c, &o, path);
    }
    return rc;
}
