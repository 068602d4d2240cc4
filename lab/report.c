/* boltzattn-lab report: the results report of a reproduce output directory,
 * generated from the grids under it (their run records, the runs' metrics
 * logs and the couplings analyses): no number in it is typed by hand. It
 * works on a partial grid (the summaries say which runs are missing). With
 * --samplers-doc it regenerates the samplers section of a document instead
 * (report_samplers.c). Which preset's grids answer which question, and the
 * paper's numbers, come from lab/presets.json (presets.c). */
#include "report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static opt report_opts[] = {
    {"preset", "NAME", NULL,
     "the preset that made OUT, one of the presets file's with a report: quick, full, "
     "converged, samplers, long or study", 0, 0},
    {"presets", "FILE", "$BA_PRESETS, else the source tree's lab/presets.json",
     "the presets file (the presets' report grids and the paper's numbers)", 0, 0},
    {"link-prefix", "P", "none",
     "put before the image paths, which are relative to OUT (e.g. ../results/full/)", 0, 0},
    {"samplers-doc", "DOC", NULL,
     "instead of the report: rewrite DOC from its line '## Training with sampled statistics' "
     "to its end with the section generated from OUT",
     0, 0},
    {"section-only", NULL, NULL,
     "with --preset long, converged or study: only that preset's section, with its own generator "
     "line (make results-doc appends it to docs/results.md)", 0, 0},
    {"converged", "DIR", NULL,
     "with --preset full: the converged preset's grids in DIR give the 'Against the paper' "
     "rows of the cells they hold", 0, 0},
    {"verdicts", "ROOT", NULL,
     "with --preset full: open the report with the verdict table of the presets file's claims, "
     "read from the output directories under ROOT (e.g. results)", 0, 0},
    {"readme", "FILE", NULL,
     "with --verdicts and no OUT: rewrite only the findings block of FILE (between the lines "
     "<!-- findings:begin --> and <!-- findings:end -->) from the verdict rows", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command report_cmd = {
    "report",
    "OUT --preset quick|full|converged|samplers|long|study [--link-prefix P]\n"
    "                 [--section-only] [--converged DIR] [--verdicts ROOT]\n"
    "                 | OUT --samplers-doc DOC\n"
    "                 | --verdicts ROOT --readme FILE\n\n"
    "Writes the results report of OUT, the output directory of lab/reproduce.sh, to\n"
    "stdout as Markdown: every grid under OUT (a subdirectory with grid.json, written\n"
    "by 'boltzattn ablate'), its runs, summaries, convergence, figures and couplings;\n"
    "the full preset adds the headline rows and the comparisons with the paper (with\n"
    "--converged, those rows of the converged preset's cells from its runs), the long,\n"
    "converged and study presets their sections (--section-only: that section\n"
    "alone; the study's: its ladders at equal steps and equal wall-clock compute).\n"
    "With --samplers-doc the section '## Training with sampled statistics' of DOC\n"
    "(from that line to the end) is regenerated from the grids of the samplers\n"
    "preset and DOC rewritten atomically. With --verdicts ROOT the full report opens\n"
    "with the verdict table (lab/presets.json's claims, from the grids under ROOT);\n"
    "with --readme FILE only FILE's findings block is rewritten from the same rows.",
    report_opts};

/* The largest thread count of a run the header lists. */
#define MAX_THREADS 4096

/* ------------------------------------------------------ training time */

static void sort_ints(int *v, int n)
{
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && v[b - 1] > v[b]; b--) {
            int t = v[b];
            v[b] = v[b - 1], v[b - 1] = t;
        }
}


/* The header's line on the training time: the distinct finished runs of
 * every grid, their summed training time and their thread counts. */
static int time_line(const rep_grids *gs, const char *kind, FILE *f)
{
    int total = 0, nd = 0;
    for (int i = 0; i < gs->n; i++)
        total += gs->v[i].cs.n;
    const lab_run **seen = malloc(sizeof *seen * (size_t)(total + 1));
    if (!seen)
        return 1;
    unsigned char threads[MAX_THREADS + 1] = {0}; /* the counts the runs recorded */
    double secs = 0;
    for (int i = 0; i < gs->n; i++)
        for (int j = 0; j < gs->v[i].cs.n; j++) {
            const lab_run *r = gs->v[i].cs.cells[j].run;
            int dup = !r;
            for (int k = 0; k < nd && !dup; k++)
                dup = rep_same_run(seen[k], r);
            if (dup)
                continue;
            seen[nd++] = r;
            secs += r->wall_s;
            threads[r->info.threads > 0 && r->info.threads <= MAX_THREADS ? r->info.threads : 0] = 1;
        }
    double hours = secs / 3600;
    fprintf(f, "Training time of the %d distinct finished runs (a run shared between grids "
               "counted once), summed: %.1f hours", nd, hours);
    for (int t = 1, k = 0; t <= MAX_THREADS; t++) /* ascending, as sort -un gave them */
        if (threads[t])
            fprintf(f, "%s%d", k++ ? "/" : ", ", t);
    if (memchr(threads + 1, 1, MAX_THREADS))
        fprintf(f, " thread(s) per run");
    if (strcmp(kind, "long") == 0)
        fprintf(f, "; the preset runs two chains side by side (`JOBS=2`, its default on 2 or more "
                   "cores), two runs at a time, so its wall time is at least half that, %.1f "
                   "hours",
                hours / 2);
    if (strcmp(kind, "full") == 0)
        fprintf(f, "; the preset runs its brackets and charlm chains side by side (`JOBS=2`, its "
                   "default on 2 or more cores), two runs at a time, so its wall time is at "
                   "least half that, %.1f hours",
                hours / 2);
    fprintf(f, ".\n\n");
    free(seen);
    return 0;
}

static int header(const command *c, const char *out, const char *preset, const char *kind,
                  const rep_grids *gs, const char *vroot, const lab_presets *ps, FILE *f)
{
    char date[32];
    rep_date(date, sizeof date);
    fprintf(f, "# Results: preset `%s`\n\n", preset);
    fprintf(f, "Generated by `boltzattn-lab report` from the files under `%s` on %s; nothing below "
               "is typed by hand.\n", out, date);
    fprintf(f, "The grids were run by `make reproduce PRESET=%s` (`lab/reproduce.sh %s`), which "
               "resumes an interrupted grid.\n", preset, preset);
    if (vroot) {
        fprintf(f, "\n");
        int code = rep_verdict_section(c, vroot, ps, f);
        if (code)
            return code;
        fprintf(f, "## The runs\n\n");
    }
    if (rep_machines(gs, f))
        return 1;
    if (time_line(gs, kind, f))
        return 1;
    fprintf(f, "| grid | runs finished |\n|---|---|\n");
    for (int i = 0; i < gs->n; i++)
        fprintf(f, "| %s | %d of %d |\n", gs->v[i].name, lab_cells_finished(&gs->v[i].cs),
                gs->v[i].cs.n);
    fprintf(f, "\n");
    return 0;
}

static int conv_overview(const command *c, const rep_grids *gs, FILE *f)
{
    fprintf(f, "## Late movement of the curves (not a convergence test)\n\n");
    fprintf(f, "Per grid, the cell (T, C, FFN) whose validation metric still moved most late in "
               "training: the mean change over its runs between the periodic evaluations at the "
               "steps shown (the same items both times). 'flat' means every cell of the grid "
               "moved by less than %g (%% of perplexity or accuracy points), half the effect the "
               "grids are sized to resolve; otherwise the direction is named. Under the cosine "
               "schedule this stretch is where the learning rate anneals, so it measures the "
               "schedule as much as the curve: whether a verdict has settled is the verdict "
               "table's test (the change per doubling of the budget). Each grid's section has "
               "the table per cell.\n\n",
            CONV_LIMIT);
    int code = rep_convergence_overview(c, gs, f);
    fprintf(f, "\n");
    return code;
}

/* ---------------------------------------------------------- saturation */

/* The widest C of a width sweep at which no exact variant's mean accuracy
 * reaches 99 %, per C (ascending) and FFN (with FFN first). Of variants
 * with equal means the grid's first is named. */
static void saturation(const rep_grid *x, FILE *f)
{
    const lab_grid *g = &x->g;
    int Cs[LAB_MAX_LIST];
    memcpy(Cs, g->C, sizeof(int) * (size_t)g->nC);
    sort_ints(Cs, g->nC);
    fprintf(f, "| C | FFN | best variant mean (%%) | saturated (>= 99 %%) |\n|---|---|---|---|\n");
    for (int ci = 0; ci < g->nC; ci++)
        for (int ffn = 1; ffn >= 0; ffn--) {
            int best = -1;
            double bv = -1;
            for (int a = 0; a < g->narms; a++) {
                ba_running v = {0};
                for (int i = 0; i < x->cs.n && !lab_arm_sampled(&g->arms[a]); i++) {
                    const lab_cell *cell = &x->cs.cells[i];
                    if (cell->run && cell->arm == a && cell->C == Cs[ci] && cell->ffn == ffn)
                        ba_running_add(&v, cell->run->value);
                }
                if (v.n && v.mean > bv)
                    bv = v.mean, best = a;
            }
            if (best >= 0)
                fprintf(f, "| %d | %s | %.2f (%s) | %s |\n", Cs[ci], ffn ? "yes" : "no",
                        100 * bv, ba_attn_name(g->arms[best].attn), 100 * bv >= 99 ? "yes" : "no");
        }
}

/* ---------------------------------------------------------- the report */

static const char *metric_dir(ba_task t)
{
    return t == BA_TASK_CHARLM ? "validation perplexity (lower is better)"
                               : "held-out accuracy % (higher is better)";
}

/* The full preset's headline rows (lab/presets.json): sections of the
 * summaries of grids by the names lab/reproduce.sh gives them. A grid's
 * name says where it is, never what it holds: T and FFN pick sections of
 * its summary. */
static int headlines(const rep_grids *gs, const lab_report_plan *rp, FILE *f)
{
    int code = 0;
    fprintf(f, "## Headline rows\n\n");
    for (size_t i = 0; i < rp->nrows; i++) {
        const rep_grid *x = rep_grid_named(gs, rp->rows[i].grid);
        int T = rp->rows[i].T, ffn = rp->rows[i].ffn;
        int has = x && rep_has_int(x->g.T, x->g.nT, T) && rep_has_int(x->g.ffn, x->g.nffn, ffn);
        for (int ci = 0; has && ci < x->g.nC; ci++) {
            fprintf(f, "### %s: T = %d, C = %d, %s FFN; %s, %ld steps, %d seeds, %s\n", x->name,
                    T, x->g.C[ci], ffn ? "with" : "without", ba_task_name(x->g.task),
                    x->g.train.steps, x->g.nseeds, metric_dir(x->g.task));
            code |= lab_summary_section(&x->cs, T, x->g.C[ci], ffn, f) < 0;
        }
    }
    return code;
}

/* The verdict rows of those of the n named grids there are; with steps,
 * each row opens with its grid's steps. */
static int verdict_grids(const rep_grids *gs, const char *const *names, size_t n, int steps,
                         const rep_grids *over, FILE *f)
{
    int code = 0;
    for (size_t i = 0; i < n; i++) {
        const rep_grid *x = rep_grid_named(gs, names[i]);
        char prefix[40] = "";
        if (x && steps)
            snprintf(prefix, sizeof prefix, "| %ld ", x->g.train.steps);
        code |= x && rep_verdicts(x, prefix, NULL, over, f);
    }
    return code;
}
#define NAMES(a) (a).v, (a).n

/* What only the full preset has: the headline rows and the comparisons
 * with the paper; the rows of cells conv (the converged preset's grids, or
 * NULL) holds come from conv. */
static int full_sections(const command *c, const rep_grids *gs, const lab_report_plan *rp,
                         const rep_grids *conv, FILE *f)
{
    int code = headlines(gs, rp, f), nb = 0;
    fprintf(f, "### Against the paper\n\n"
               "Every variant against softmax on the same seeds at the headline widths (effect: "
               "relative perplexity change, negative is better, for charlm; accuracy points for "
               "brackets; 95 %% confidence interval over seeds). The verdict is read off the "
               "interval: 'better' or 'worse' only when it excludes zero.%s\n\n" REP_VERDICT_HEAD,
            conv ? " Rows marked 'PRESET=converged' come from the long-budget runs of the preset "
                   "`converged` (section 'Long-budget headline rows'); they "
                   "replace the fixed-budget rows of the same cells."
                 : "");
    code |= verdict_grids(gs, NAMES(rp->paper_grids), 0, conv, f);
    code |= conv && rep_converged_verdicts(conv, f);
    fprintf(f, "\n");
    code |= conv && rep_converged_changes(gs, NAMES(rp->paper_grids), conv, f);
    code |= conv && rep_budget_ladder(c, gs, NAMES(rp->ladder_grids), conv, f);
    for (size_t i = 0; i < rp->budget_grids.n; i++)
        nb += rep_grid_named(gs, rp->budget_grids.v[i]) != NULL;
    if (nb > 1) {
        fprintf(f, "### The headline row as the training budget grows\n\n"
                   "charlm at T = 12 with the same settings and seeds but more steps (the cosine "
                   "schedule stretched over them). Perplexity still falls with more steps (see the "
                   "late-movement overview); this shows whether the effect moves with it.\n\n"
                   "| steps | task | T | C | FFN | variant | pairs/seeds | effect [95 %% CI] | "
                   "paper | verdict |\n|---|---|---|---|---|---|---|---|---|---|\n");
        code |= verdict_grids(gs, NAMES(rp->budget_grids), 1, NULL, f);
        fprintf(f, "\n");
    }
    int nw = 0;
    for (size_t i = 0; i < rp->width_grids.n; i++)
        nw += rep_grid_named(gs, rp->width_grids.v[i]) != NULL;
    if (nw) {
        fprintf(f, "### Against the paper across widths (T = 16)\n\n"
                   "The same comparison at every width of the sweeps, so an effect can be seen to "
                   "grow, shrink or vanish as the model widens; where a width saturates (next "
                   "table) no gap can show.\n\n" REP_VERDICT_HEAD);
        code |= verdict_grids(gs, NAMES(rp->width_grids), 0, NULL, f);
        fprintf(f, "\n");
    }
    const rep_grid *x = rp->couplings_grid ? rep_grid_named(gs, rp->couplings_grid) : NULL;
    if (x && rep_jtable(c, x, "### Couplings against the paper's sign pattern (charlm, T = 12)\n\n",
                        f))
        fprintf(f, "\n");
    if (rp->saturation_grid && (x = rep_grid_named(gs, rp->saturation_grid))) {
        fprintf(f, "### Where brackets saturate (T = 16, width sweep)\n\n");
        saturation(x, f);
        fprintf(f, "\n");
    }
    return code;
}

/* A grid's own section: its summary, convergence table, figures and
 * couplings. */
static int grid_section(const command *c, const rep_grid *x, const char *prefix, FILE *f)
{
    fprintf(f, "## %s\n\n%s, %ld steps, %d seeds; metric: %s. T, C and FFN head each "
               "table.\n\n", x->name, ba_task_name(x->g.task), x->g.train.steps, x->g.nseeds,
            metric_dir(x->g.task));
    if (rep_summary_body(&x->cs, 1, "###", f))
        return fail_lib(c, "out of memory", 1);
    fprintf(f, "\n#### Late movement\n\n"
               "Change of the validation metric late in training, between the periodic "
               "evaluations (same items) at the steps shown; near zero means the curves are "
               "flat:\n\n");
    int code = rep_convergence(c, x, f);
    if (code)
        return code;
    fprintf(f, "\n");
    if (rep_png_links(x, "", prefix, f) || rep_png_links(x, "couplings/", prefix, f))
        return 1;
    rep_jtable(c, x, "\n", f);
    fprintf(f, "\n");
    return 0;
}

/* What a report is made of: the preset and its report plan (from the
 * presets file), the link prefix and whether only the section is asked
 * for; conv: the converged preset's grids for the full report's verdicts
 * (or NULL). */
typedef struct {
    const char *out, *preset, *prefix, *vroot;
    const lab_report_plan *rp;
    const lab_presets *ps;
    int section_only;
    const rep_grids *conv;
} report_args;

/* The report, or with section_only the long, converged or study preset's
 * section alone. */
static int write_report(const command *c, const report_args *a, const rep_grids *gs)
{
    out_file o;
    if (out_open(c, &o))
        return 1;
    const char *kind = a->rp->sections;
    int code = 0, converged = strcmp(kind, "converged") == 0, lng = strcmp(kind, "long") == 0;
    int study = strcmp(kind, "study") == 0;
    const cJSON *pre = lab_preset(a->ps, a->preset);
    if (a->section_only)
        code = converged ? rep_converged_section(c, a->out, gs, &a->rp->grids, 1, o.f)
               : study   ? rep_study_section(c, a->out, a->prefix, gs, &a->rp->grids, pre, 1, o.f)
                         : rep_long_section(c, a->out, a->prefix, gs, &a->rp->grids, 1, o.f);
    else if ((code = header(c, a->out, a->preset, kind, gs, a->vroot, a->ps, o.f)) == 1)
        code = fail_lib(c, "out of memory", 1);
    if (!code && !a->section_only)
        code = conv_overview(c, gs, o.f);
    if (!code && strcmp(kind, "full") == 0 && full_sections(c, gs, a->rp, a->conv, o.f))
        code = fail_lib(c, "out of memory", 1);
    if (!code && !a->section_only && lng)
        code = rep_long_section(c, a->out, a->prefix, gs, &a->rp->grids, 0, o.f);
    if (!code && !a->section_only && converged)
        code = rep_converged_section(c, a->out, gs, &a->rp->grids, 0, o.f);
    if (!code && !a->section_only && study)
        code = rep_study_section(c, a->out, a->prefix, gs, &a->rp->grids, pre, 0, o.f);
    for (int i = 0; i < gs->n && !code && !a->section_only; i++)
        code = grid_section(c, &gs->v[i], a->prefix, o.f);
    int bad = ferror(o.f);
    bad |= fclose(o.f) != 0;
    if (!code && bad)
        code = fail_lib(c, "out of memory", 1);
    /* the whole report or nothing: a failure leaves no partial file */
    if (!code && (fwrite(o.buf, 1, o.len, stdout) != o.len || fflush(stdout) != 0)) {
        fprintf(stderr, "%s %s: cannot write the report: %s\n", prog, c->cmd, strerror(errno));
        code = 1;
    }
    free(o.buf);
    return code;
}

/* The options against the presets file: the preset's report plan into rp
 * (with a report: 1) or 0 with --samplers-doc. 0 or an exit code. */
static int check_preset(const command *c, const lab_presets *ps, const char *preset,
                        lab_report_plan *rp)
{
    memset(rp, 0, sizeof *rp);
    if (!preset)
        return 0;
    const cJSON *pr = lab_preset(ps, preset);
    int has = pr ? lab_report_plan_get(pr, rp) : 0;
    if (has < 0)
        return fail_lib(c, "out of memory", 1);
    if (!has) {
        char names[256];
        lab_preset_names(ps, 1, names, sizeof names);
        return usage_error(c, "unknown preset '%s' (%s)", preset, names);
    }
    const char *kind = rp->sections;
    if (is_set(c, "section-only") && strcmp(kind, "long") != 0 &&
        strcmp(kind, "converged") != 0 && strcmp(kind, "study") != 0)
        return usage_error(c, "--section-only applies to --preset long, converged or study");
    if (get_str(c, "converged") && strcmp(kind, "full") != 0)
        return usage_error(c, "--converged applies to --preset full");
    if (get_str(c, "verdicts") && strcmp(kind, "full") != 0)
        return usage_error(c, "--verdicts applies to --preset full");
    return 0;
}

static int run_report(const command *c, const char *out, const char *doc, const lab_presets *ps,
                      report_args *a)
{
    const char *cdir = get_str(c, "converged");
    rep_grids gs, conv;
    int code = rep_grids_load(c, out, &ps->refs, &gs);
    if (code)
        return code;
    if (cdir && (code = rep_grids_load(c, cdir, &ps->refs, &conv))) {
        rep_grids_free(&gs);
        return code;
    }
    a->conv = cdir ? &conv : NULL;
    code = doc ? rep_samplers_doc(c, out, doc, &gs) : write_report(c, a, &gs);
    rep_grids_free(&gs);
    if (cdir)
        rep_grids_free(&conv);
    return code;
}

/* --verdicts ROOT --readme FILE: the findings block of FILE alone. */
static int readme_only(const command *c, const char *out, const char *vroot, const char *readme)
{
    if (!readme || !*readme)
        return usage_error(c, "--readme must not be empty");
    if (!vroot || !*vroot)
        return usage_error(c, "--readme needs --verdicts ROOT");
    if (out || is_set(c, "preset") || is_set(c, "samplers-doc") || is_set(c, "converged"))
        return usage_error(c, "--readme takes no OUT, --preset, --samplers-doc or --converged");
    lab_presets ps;
    int rc = lab_presets_load(c, is_set(c, "presets") ? get_str(c, "presets") : NULL, &ps);
    if (!rc)
        rc = rep_verdict_readme(c, vroot, &ps, readme);
    lab_presets_free(&ps);
    return rc;
}

int cmd_report(int argc, char **argv)
{
    const command *c = &report_cmd;
    const char *out = NULL;
    int rc = parse_args(c, argc, argv, &out, 1, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *vroot = get_str(c, "verdicts"), *readme = get_str(c, "readme");
    if (vroot && !*vroot)
        return usage_error(c, "--verdicts must not be empty");
    if (readme)
        return readme_only(c, out, vroot, readme);
    const char *preset = get_str(c, "preset"), *doc = get_str(c, "samplers-doc");
    const char *prefix = is_set(c, "link-prefix") ? get_str(c, "link-prefix") : "";
    if (!out || !*out)
        return usage_error(c, "the output directory OUT is required");
    if (doc && (preset || is_set(c, "link-prefix")))
        return usage_error(c, "--samplers-doc excludes --preset and --link-prefix");
    if (doc && !*doc)
        return usage_error(c, "--samplers-doc must not be empty");
    if (!doc && !preset)
        return usage_error(c, "option '--preset' (or '--samplers-doc') is required");
    if (is_set(c, "section-only") && !preset)
        return usage_error(c, "--section-only applies to --preset long, converged or study");
    if (get_str(c, "converged") && !preset)
        return usage_error(c, "--converged applies to --preset full");
    if (get_str(c, "converged") && !*get_str(c, "converged"))
        return usage_error(c, "--converged must not be empty");
    lab_presets ps;
    lab_report_plan rp;
    if ((rc = lab_presets_load(c, is_set(c, "presets") ? get_str(c, "presets") : NULL, &ps)))
        return rc;
    if (!(rc = check_preset(c, &ps, preset, &rp))) {
        report_args a = {out, preset, prefix, vroot, &rp, &ps, is_set(c, "section-only"), NULL};
        rc = run_report(c, out, doc, &ps, &a);
    }
    lab_report_plan_free(&rp);
    lab_presets_free(&ps);
    return rc;
}
