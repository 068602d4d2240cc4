/* The couplings tables of the report: J by key distance from a grid's
 * couplings analysis (couplings.json), next to the paper's sign pattern. */
#include "report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

double rep_num(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

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

