/* The verdict table that opens docs/results.md, with the rules that
 * assign its words, and README.md's findings block made of the same rows
 * (report_verdict.c computes them from the records). */
#include "report.h"

#include <stdlib.h>
#include <string.h>

static void vd_rules(FILE *f)
{
    fprintf(f,
            "How to read it. *ours*: the paired effect of the first arm against the second on the "
            "same seeds at the largest budget the records hold, with its 95 %% interval (Student "
            "t over seeds); charlm: relative change of validation perplexity in %% (lower is "
            "better, so a negative effect favours the first arm); brackets: held-out accuracy "
            "points (higher is better); J rows: the mean coupling at that key distance over the "
            "runs (interval over runs). *steps*: the training budget of those runs. The largest "
            "budget is that of the claim's grid, or, while its cell still trains (fewer pairs "
            "than its seeds), the largest finished rung of its ladder; the grid column names the "
            "one read. A row *evaluated at T = n* compares the same models' perplexity on "
            "windows of n tokens, longer than they were trained on (length extrapolation, "
            "`ablate --extrapolate`); their stuck flags are those of training.\n\n"
            "Verdict words, read off the interval: **agrees**: it excludes 0 on the paper's side "
            "and contains the paper's number (for a claim with a side but no number: excludes 0 on "
            "that side); **smaller** / **larger**: excludes 0 on the paper's side, entirely "
            "nearer 0 than the paper's number / entirely beyond it; **not resolved**: contains 0 "
            "and the paper's number (or the claim has no number), or fewer than two pairs; "
            "**not reproduced**: contains 0 but not the paper's number; **opposite**: excludes 0 "
            "on the other side; **not yet measured**: no records. A *comparable* claim (no worse "
            "than a margin m: 1 %% of perplexity or 1 accuracy point) **agrees** when the "
            "interval's worse end is within m, is **opposite** when its better end is worse than "
            "m, else **not resolved**. Rows marked 'beyond the paper' ask whether the first arm "
            "is better.\n\n"
            "**Settled** (the convergence criterion): the effect on the seeds both budgets share, "
            "at the largest budget and at the next smaller one of the same cell, settings and "
            "seeds; its change divided by log2 of the ratio of the steps (per doubling of the "
            "budget) must be smaller than the half-width of the largest budget's interval. A "
            "row with one budget is not settled. A budget is called 'long' in this document, "
            "never 'converged', unless its rows are settled.\n\n"
            "**Stuck runs**: a run whose final metric is worse than its cell's median (same arm, "
            "T, C, FFN, over the seeds) by more than %g times the robust spread, 1.4826 x the "
            "median absolute deviation but at least %g (accuracy points; %% of the median "
            "perplexity), in cells of at least %d runs. Flagged runs stay in *ours*; the column "
            "gives the effect and verdict without them.\n\n",
            STUCK_K, STUCK_FLOOR, STUCK_MIN_RUNS);
}

static void vd_steps(long s, char *buf, size_t n)
{
    if (s)
        snprintf(buf, n, "%ld", s);
    else
        snprintf(buf, n, "-");
}

static void vd_table(const rep_vrows *rs, FILE *f)
{
    fprintf(f, "| claim | cell (task, T, width C, FFN) | arms | same information | metric | "
               "paper | ours [95 %% CI] | seeds | steps | verdict | settled | stuck runs |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < rs->n; i++) {
        const rep_vrow *r = &rs->v[i];
        char st[32];
        vd_steps(r->steps, st, sizeof st);
        char dist[32] = "";
        if (r->dist)
            snprintf(dist, sizeof dist, ", key distance %d", r->dist);
        fprintf(f, "| %s | %s%s (`%s`) | %s | %s | %s | %s | %s | %d | %s | **%s** | %s | %s |\n",
                r->claim, r->cell, dist, r->cell_grid, r->arms, r->same_info, r->metric, r->paper_text,
                r->ours, r->n, st, r->word, r->settled, r->stuck);
    }
    int ns = 0;
    for (int i = 0; i < rs->n; i++) {
        const rep_vrow *r = &rs->v[i];
        if (strncmp(r->stuck, "**stuck**", 9) == 0)
            fprintf(f, "%s%s, %s (`%s`): %s", ns++ ? ". " : "\nStuck runs by the rule below: ",
                    r->claim, r->cell, r->cell_grid, r->stuck + 11);
    }
    fprintf(f, ns ? ".\n\n" : "\nNo run of these cells is stuck by the rule below.\n\n");
}

int rep_verdict_section(const command *c, const char *root, const lab_presets *ps, FILE *f)
{
    rep_vrows rs;
    int code = rep_verdict_rows(c, root, ps, &rs);
    if (!code) {
        fprintf(f, "## Verdicts\n\n"
                   "Each claim of the paper (and two questions beyond it) against the records "
                   "under `%s` at the largest budget run; the rules that assign the words are "
                   "under the table, the grids that answer each claim are the `verdicts` of "
                   "`lab/presets.json`.\n\n", root);
        vd_table(&rs, f);
        vd_rules(f);
    }
    free(rs.v);
    return code;
}

/* ------------------------------------------------------------- README */

#define MARK_BEGIN "<!-- findings:begin -->"
#define MARK_END "<!-- findings:end -->"

/* The number of lines of t that are exactly mark, and the first. */
static int vd_marks(const char *t, const char *mark, const char **first)
{
    int n = 0;
    size_t l = strlen(mark);
    *first = NULL;
    for (const char *p = t; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == l && memcmp(p, mark, l) == 0 && n++ == 0)
            *first = p;
        p = e ? e + 1 : NULL;
    }
    return n;
}

/* The README line of the couplings rows from i on with the same claim:
 * the distances by verdict word. The first row after them. */
static int vd_jline(const rep_vrows *rs, int i, FILE *f)
{
    static const char *const words[] = {"agrees", "opposite", "not resolved", "not yet measured"};
    const rep_vrow *r0 = &rs->v[i];
    int end = i, k = 0;
    while (end < rs->n && rs->v[end].dist && rs->v[end].claim == r0->claim)
        end++;
    fprintf(f, "- %s, %s (`%s`; %d seeds, %ld steps; the paper's sign at each distance, read off "
               "the interval over runs):", r0->claim, r0->cell, r0->cell_grid, r0->n, r0->steps);
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        int m = 0;
        for (int j = i; j < end; j++) {
            if (strcmp(rs->v[j].word, words[w]) != 0)
                continue;
            if (!m++)
                fprintf(f, "%s **%s** at d = ", k++ ? ";" : "", words[w]);
            fprintf(f, "%s%d", m > 1 ? ", " : "", rs->v[j].dist);
        }
    }
    fprintf(f, ".\n");
    return end;
}

static void vd_findings(const rep_vrows *rs, const char *root, FILE *f)
{
    fprintf(f, "Generated by `boltzattn-lab report --verdicts %s --readme` from the run records "
               "(`make results-doc`); the table, its rules and the caveats: "
               "[docs/results.md](docs/results.md#verdicts).\n\n", root);
    for (int i = 0; i < rs->n; i++) {
        const rep_vrow *r = &rs->v[i];
        if (r->dist) {
            i = vd_jline(rs, i, f) - 1;
            continue;
        }
        fprintf(f, "- **%s**: %s, %s, %s: ", r->word, r->claim, r->cell, r->arms);
        if (r->measured)
            fprintf(f, "%s (%s; %d seed%s, %ld steps; %s)", r->ours, r->metric, r->n,
                    r->n == 1 ? "" : "s", r->steps,
                    strncmp(r->settled, "settled", 7) == 0 ? "settled" : "not settled");
        else
            fprintf(f, "no records");
        if (strncmp(r->stuck, "**stuck**", 9) == 0)
            fprintf(f, "; flagged as stuck: %s", r->stuck + 11);
        fprintf(f, "; paper: %s%s%s.\n", r->paper_text, strncmp(r->same_info, "no", 2) == 0
                ? "; arms without equal information: " : "",
                strncmp(r->same_info, "no", 2) == 0 ? r->same_info + 4 : "");
    }
}

int rep_verdict_readme(const command *c, const char *root, const lab_presets *ps,
                       const char *readme)
{
    char *t = lab_slurp(readme);
    if (!t) {
        fprintf(stderr, "%s %s: cannot read %s\n", prog, c->cmd, readme);
        return 2;
    }
    const char *b, *e;
    int nb = vd_marks(t, MARK_BEGIN, &b), ne = vd_marks(t, MARK_END, &e);
    if (nb != 1 || ne != 1 || e < b) {
        fprintf(stderr, "%s %s: %s must hold the line '%s' once and then the line '%s' once "
                        "(found %d and %d); left untouched\n",
                prog, c->cmd, readme, MARK_BEGIN, MARK_END, nb, ne);
        free(t);
        return 2;
    }
    rep_vrows rs;
    int code = rep_verdict_rows(c, root, ps, &rs);
    out_file o;
    if (!code && !(code = out_open(c, &o))) {
        const char *after = b + strlen(MARK_BEGIN) + 1;
        fwrite(t, 1, (size_t)(after - t), o.f);
        vd_findings(&rs, root, o.f);
        fputs(e, o.f);
        code = out_close(c, &o, readme);
    }
    free(rs.v);
    free(t);
    return code;
}
