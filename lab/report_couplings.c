/* The couplings tables of the report: J by key distance from a grid's
 * couplings analysis (couplings.json), next to the paper's sign pattern:
 * one analysis (rep_jtable), or the analyses of a grid's exact Ising arms
 * side by side (rep_couplings_table: GRID/couplings/SPEC/, written by
 * lab/reproduce.sh's couplings step; the long-context and study
 * sections). */
#include "report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The paper's sign of J at key distance d (spec section 1), or "". */
const char *rep_paper_sign(const lab_refs *refs, int d)
{
    if (!refs)
        return "";
    return d >= refs->pos_lo && d <= refs->pos_hi ? "> 0" : d >= refs->neg_from ? "< 0" : "";
}

/* "J > 0 for d = 2..4 and J < 0 for d >= 6" from the presets file. */
void rep_paper_pattern(const lab_refs *refs, char *buf, size_t n)
{
    if (refs)
        snprintf(buf, n, "J > 0 for d = %d..%d and J < 0 for d >= %d", refs->pos_lo,
                 refs->pos_hi, refs->neg_from);
    else
        snprintf(buf, n, "no sign pattern (no presets file)");
}

static void jtable_runs(const lab_refs *refs, const cJSON *o, const cJSON *over, int nruns,
                        FILE *f)
{
    const cJSON *cell = cJSON_GetObjectItemCaseSensitive(o, "cell");
    char pattern[128];
    rep_paper_pattern(refs, pattern, sizeof pattern);
    fprintf(f, "Coupling J by key distance d = k - j in cell `%s`, over its %d seeds: each run's "
               "mean J over its pairs (all layers and heads), then the mean, standard deviation "
               "and 95 %% interval over the runs. The paper reports %s; the verdict is read off "
               "the interval.\n\n",
            cJSON_IsString(cell) ? cell->valuestring : "?", nruns, pattern);
    fprintf(f, "| distance | mean J | sd over seeds | 95 %% interval | seeds with J > 0 | paper | "
               "verdict |\n|---|---|---|---|---|---|---|\n");
    for (const cJSON *x = over->child; x; x = x->next) {
        int d = (int)rep_num(x, "distance");
        double lo = rep_num(x, "ci95_lo"), hi = rep_num(x, "ci95_hi");
        const char *paper = rep_paper_sign(refs, d), *v;
        int side = lo > 0 ? 1 : hi < 0 ? -1 : 0, want = *paper ? (paper[0] == '>' ? 1 : -1) : 0;
        if (side == 0)
            v = "sign not resolved";
        else if (want == 0)
            v = side > 0 ? "positive (the paper says nothing)" : "negative (the paper says nothing)";
        else
            v = side == want ? "agrees" : "opposite sign";
        fprintf(f, "| %d | %+.4f | %.4f | [%+.4f, %+.4f] | %d of %d | %s | %s |\n", d,
                rep_num(x, "mean"), rep_num(x, "sd"), lo, hi, (int)rep_num(x, "positive_runs"),
                (int)rep_num(x, "runs"), paper, v);
    }
}

/* The coupling J by key distance of a grid's couplings analysis, next to
 * the paper's sign pattern, after the text before; with several runs the
 * verdict per distance is read off the 95 % interval over runs. Nothing
 * without couplings.json; a damaged one is a warning. */
int rep_jtable(const command *c, const rep_grid *x, const char *before, FILE *f)
{
    char path[PATH_LEN];
    if (mkpath(c, path, "%s/couplings/couplings.json", x->dir) || access(path, F_OK) != 0)
        return 0;
    char *txt = lab_slurp(path);
    cJSON *o = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(o, "runs");
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(o, "by_distance");
    const cJSON *over = cJSON_GetObjectItemCaseSensitive(o, "over_runs");
    int nruns = cJSON_GetArraySize(runs);
    if (!cJSON_IsArray(runs) || nruns < 1 || !cJSON_IsArray(by) || (over && !cJSON_IsArray(over))) {
        fprintf(stderr, "%s %s: warning: %s is not a couplings analysis; its table is left out\n",
                prog, c->cmd, path);
        cJSON_Delete(o);
        return 0;
    }
    fputs(before, f);
    if (over) {
        jtable_runs(x->cs.refs, o, over, nruns, f);
    } else {
        const cJSON *run = cJSON_GetObjectItemCaseSensitive(runs->child, "run");
        char pattern[128];
        rep_paper_pattern(x->cs.refs, pattern, sizeof pattern);
        fprintf(f, "Mean coupling J by key distance d = k - j of run `%s` (all its layers and "
                   "heads; the paper reports %s):\n\n",
                cJSON_IsString(run) ? run->valuestring : "?", pattern);
        fprintf(f, "| distance | mean J | sd |\n|---|---|---|\n");
        for (const cJSON *d = by->child; d; d = d->next)
            fprintf(f, "| %d | %+.4f | %.4f |\n", (int)rep_num(d, "distance"), rep_num(d, "mean"),
                    rep_num(d, "sd"));
    }
    cJSON_Delete(o);
    return 1;
}

/* ------------------------------------------------ arms side by side */

static int ising(ba_attn a) { return a == BA_ATTN_BOLTZMANN || a == BA_ATTN_COUPLING; }

static int has_analysis(const char *dir, const char *name)
{
    char path[PATH_LEN];
    return snprintf(path, sizeof path, "%s/%s/couplings.json", dir, name) < (int)sizeof path &&
           access(path, R_OK) == 0;
}

/* The couplings analysis of one arm: the x->dir/couplings/NAME/couplings.json
 * whose variant (its "variant", or "attn" for the plain form) is label,
 * with NAME into sub (NULL when there is none; a damaged one is a
 * warning). The directory's name says nothing: the analysis does. */
static cJSON *arm_couplings(const command *c, const rep_grid *x, const char *label, char *sub,
                            size_t cap)
{
    char dir[PATH_LEN], path[PATH_LEN], **names;
    int n;
    cJSON *found = NULL;
    if (mkpath(c, dir, "%s/couplings", x->dir) || lab_list_dir(dir, has_analysis, NULL, &names, &n))
        return NULL;
    for (int i = 0; i < n && !found; i++) {
        if (mkpath(c, path, "%s/%s/couplings.json", dir, names[i]))
            continue;
        char *txt = lab_slurp(path);
        cJSON *o = txt ? cJSON_Parse(txt) : NULL;
        free(txt);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "variant");
        if (!cJSON_IsString(v))
            v = cJSON_GetObjectItemCaseSensitive(o, "attn");
        if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "by_distance")) ||
            !cJSON_IsString(v)) {
            fprintf(stderr, "%s %s: warning: %s is not a couplings analysis; left out\n", prog,
                    c->cmd, path);
        } else if (strcmp(v->valuestring, label) == 0) {
            snprintf(sub, cap, "couplings/%s/", names[i]);
            found = o;
            continue;
        }
        cJSON_Delete(o);
    }
    lab_names_free(names, n);
    return found;
}

/* One cell of the J table: the mean over runs with its interval (and the
 * sign it resolves), or the single run's mean; "" beyond the arm's
 * distances. */
static void jcell(const cJSON *o, int d, char *buf, size_t n)
{
    const cJSON *over = cJSON_GetObjectItemCaseSensitive(o, "over_runs");
    const cJSON *arr = over ? over : cJSON_GetObjectItemCaseSensitive(o, "by_distance");
    buf[0] = '\0';
    for (const cJSON *x = arr ? arr->child : NULL; x; x = x->next) {
        if ((int)rep_num(x, "distance") != d)
            continue;
        double m = rep_num(x, "mean"), lo = rep_num(x, "ci95_lo"), hi = rep_num(x, "ci95_hi");
        if (!over)
            snprintf(buf, n, "%+.4f (one run)", m);
        else
            snprintf(buf, n, "%+.4f [%+.4f, %+.4f]%s", m, lo, hi,
                     lo > 0 ? " > 0" : hi < 0 ? " < 0" : "");
        return;
    }
}

int rep_couplings_table(const command *c, const rep_grid *x, const char *prefix, const char *lead,
                        int say_missing, int *shown, FILE *f)
{
    const lab_grid *g = &x->g;
    cJSON *js[16] = {0};
    char labels[16][96], subs[16][PATH_LEN / 8], none[512] = "";
    int na = 0, maxd = 0;
    for (int a = 0; a < g->narms && na < 16; a++) {
        if (!ising(g->arms[a].attn) || lab_arm_sampled(&g->arms[a]))
            continue;
        lab_arm_variant(&g->arms[a], labels[na], sizeof labels[na]);
        if (!(js[na] = arm_couplings(c, x, labels[na], subs[na], sizeof subs[na]))) {
            size_t l = strlen(none);
            snprintf(none + l, sizeof none - l, "%s`%s`", l ? ", " : "", labels[na]);
            continue;
        }
        const cJSON *by = cJSON_GetObjectItemCaseSensitive(js[na], "by_distance");
        maxd = cJSON_GetArraySize(by) > maxd ? cJSON_GetArraySize(by) : maxd;
        na++;
    }
    if (shown)
        *shown = na > 0;
    if (na) {
        char pattern[128];
        rep_paper_pattern(x->cs.refs, pattern, sizeof pattern);
        fprintf(f, "%s", lead ? lead : "");
        fprintf(f, "Coupling J by key distance d, per Ising arm: the mean over seeds of each "
                   "run's mean over its layers and heads (and, for absolute couplings, its "
                   "pairs), with the 95 %% interval over seeds; '> 0' or '< 0' where the interval "
                   "excludes zero. The paper reports %s (absolute couplings at T = 12).\n\n"
                   "| distance |",
                pattern);
        for (int i = 0; i < na; i++)
            fprintf(f, " %s |", labels[i]);
        fprintf(f, " paper |\n|---|");
        for (int i = 0; i <= na; i++)
            fprintf(f, "---|");
        fprintf(f, "\n");
        for (int d = 1; d <= maxd; d++) {
            fprintf(f, "| %d |", d);
            for (int i = 0; i < na; i++) {
                char cell[96];
                jcell(js[i], d, cell, sizeof cell);
                fprintf(f, " %s |", cell);
            }
            fprintf(f, " %s |\n", rep_paper_sign(x->cs.refs, d));
        }
        /* an analysis needs its runs' checkpoints, which are not
         * committed: say how many seeds each column stands on */
        fprintf(f, "\nSeeds analysed (runs whose checkpoints were at hand):");
        for (int i = 0; i < na; i++)
            fprintf(f, "%s `%s` %d of %d", i ? "," : "", labels[i],
                    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(js[i], "runs")),
                    g->nseeds);
        fprintf(f, ".\n\n");
        for (int i = 0; i < na; i++)
            if (rep_png_links(x, subs[i], prefix, f))
                return 1;
    }
    if (none[0] && say_missing)
        fprintf(f, "%sNo couplings analysis for %s (it is made from finished runs with their "
                   "checkpoints, which are not committed).\n",
                na ? "\n" : "", none);
    for (int i = 0; i < na; i++)
        cJSON_Delete(js[i]);
    return 0;
}
