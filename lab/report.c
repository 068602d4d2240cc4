/* boltzattn report: the results report of a reproduce output directory,
 * generated from the grids under it (their run records, the runs' metrics
 * logs and the couplings analyses): no number in it is typed by hand. It
 * works on a partial grid (the summaries say which runs are missing). With
 * --samplers-doc it regenerates the samplers section of a document instead
 * (report_samplers.c). */
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
    {"preset", "NAME", NULL, "the preset that made OUT: quick, full, converged, samplers or long",
     0, 0},
    {"link-prefix", "P", "none",
     "put before the image paths, which are relative to OUT (e.g. ../results/full/)", 0, 0},
    {"samplers-doc", "DOC", NULL,
     "instead of the report: rewrite DOC from its line '## Training with sampled statistics' "
     "to its end with the section generated from OUT",
     0, 0},
    {"section-only", NULL, NULL,
     "with --preset long or converged: only that preset's section, with its own generator "
     "line (make results-doc appends it to docs/results.md)", 0, 0},
    {"converged", "DIR", NULL,
     "with --preset full: the converged preset's grids in DIR give the 'Against the paper' "
     "rows of the cells they hold", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command report_cmd = {
    "report",
    "OUT --preset quick|full|converged|samplers|long [--link-prefix P] [--section-only]\n"
    "                 [--converged DIR] | OUT --samplers-doc DOC\n\n"
    "Writes the results report of OUT, the output directory of lab/reproduce.sh, to\n"
    "stdout as Markdown: every grid under OUT (a subdirectory with grid.json, written\n"
    "by 'boltzattn ablate'), its runs, summaries, convergence, figures and couplings;\n"
    "the full preset adds the headline rows and the comparisons with the paper (with\n"
    "--converged, those rows of the converged preset's cells from its runs), the long\n"
    "and converged presets their sections (--section-only: that section alone).\n"
    "With --samplers-doc the section '## Training with sampled statistics' of DOC\n"
    "(from that line to the end) is regenerated from the grids of the samplers\n"
    "preset and DOC rewritten atomically.",
    report_opts};

/* The largest thread count of a run the header lists. */
#define MAX_THREADS 4096

/* --------------------------------------------------------------- grids */

/* The shell lists OUT/<name>/ sorted with the trailing slash, so in the C
 * locale "charlm-T12/" comes before "charlm/". */
static int dir_cmp(const void *pa, const void *pb)
{
    const char *a = *(const char *const *)pa, *b = *(const char *const *)pb;
    size_t i = 0;
    while (a[i] && a[i] == b[i])
        i++;
    return (a[i] ? (unsigned char)a[i] : '/') - (b[i] ? (unsigned char)b[i] : '/');
}

static void sort_ints(int *v, int n)
{
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && v[b - 1] > v[b]; b--) {
            int t = v[b];
            v[b] = v[b - 1], v[b - 1] = t;
        }
}

/* dir/name + tail is a regular file. */
static int is_file(const char *dir, const char *name, const char *tail)
{
    char path[PATH_LEN];
    struct stat sb;
    return snprintf(path, sizeof path, "%s/%s%s", dir, name, tail) < (int)sizeof path &&
           stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int has_grid(const char *dir, const char *name) { return is_file(dir, name, "/grid.json"); }

static int is_png(const char *dir, const char *name)
{
    size_t l = strlen(name);
    return l > 4 && strcmp(name + l - 4, ".png") == 0 && is_file(dir, name, "");
}

int rep_pngs(const char *dir, char ***names, int *n)
{
    return lab_list_dir(dir, is_png, NULL, names, n);
}

int rep_grids_load(const command *c, const char *out, rep_grids *gs)
{
    gs->v = NULL, gs->n = 0;
    struct stat sb;
    if (stat(out, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s %s: %s is not a directory\n", prog, c->cmd, out);
        return 2;
    }
    char **names;
    int n, code = 0;
    if (lab_list_dir(out, has_grid, dir_cmp, &names, &n) ||
        (n && !(gs->v = calloc((size_t)n, sizeof *gs->v))))
        code = fail_lib(c, "out of memory", 1);
    else if (n == 0)
        code = usage_error(c, "%s holds no grid (no subdirectory with a grid.json of "
                              "'boltzattn ablate')", out);
    for (int i = 0; i < n && !code; i++) {
        rep_grid *x = &gs->v[i];
        snprintf(x->name, sizeof x->name, "%s", names[i]);
        if (strlen(names[i]) >= sizeof x->name || mkpath(c, x->dir, "%s/%s", out, names[i]))
            code = usage_error(c, "%s/%s: name too long", out, names[i]);
        if (!code && !(code = lab_grid_read(c, x->dir, &x->g)) &&
            !(code = lab_runs_scan(c, x->dir, &x->rs)))
            code = lab_cells_match(c, &x->g, &x->rs, &x->cs);
        gs->n = i + 1; /* freed from here on */
    }
    lab_names_free(names, n);
    if (code)
        rep_grids_free(gs);
    return code;
}

void rep_grids_free(rep_grids *gs)
{
    for (int i = 0; i < gs->n; i++) {
        lab_cells_free(&gs->v[i].cs);
        lab_runs_free(&gs->v[i].rs);
    }
    free(gs->v);
    gs->v = NULL, gs->n = 0;
}

const rep_grid *rep_grid_named(const rep_grids *gs, const char *name)
{
    for (int i = 0; i < gs->n; i++)
        if (strcmp(gs->v[i].name, name) == 0)
            return &gs->v[i];
    return NULL;
}

/* ------------------------------------------------------------- helpers */

void rep_date(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    if (t == (time_t)-1 || !gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%d", &tm))
        snprintf(buf, n, "?");
}

int rep_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int rep_summary_body(const lab_cells *cs, int skip, const char *heading, FILE *f)
{
    out_file o = {0};
    o.f = open_memstream(&o.buf, &o.len);
    if (!o.f)
        return 1;
    int bad = lab_summary_md(cs, o.f) != 0;
    if ((fclose(o.f) != 0) | bad) {
        free(o.buf);
        return 1;
    }
    int line = 0;
    for (const char *p = o.buf; *p; line++) {
        size_t l = strcspn(p, "\n");
        if (line >= skip) {
            if (strncmp(p, "## ", 3) == 0)
                fprintf(f, "%s %.*s\n", heading, (int)(l - 3), p + 3);
            else
                fprintf(f, "%.*s\n", (int)l, p);
        }
        p += l + (p[l] == '\n');
    }
    free(o.buf);
    return 0;
}

/* ------------------------------------------------------ training time */

/* The same run in two grids (copied by ablate --share-from): the same
 * records, result and training time. */
static int same_run(const lab_run *a, const lab_run *b)
{
    return a->value == b->value && a->wall_s == b->wall_s && a->info.step == b->info.step &&
           a->info.config_json && b->info.config_json && a->info.train_json &&
           b->info.train_json && strcmp(a->info.config_json, b->info.config_json) == 0 &&
           strcmp(a->info.train_json, b->info.train_json) == 0;
}

/* The header's line on the training time: the distinct finished runs of
 * every grid, their summed training time and their thread counts. */
static int time_line(const rep_grids *gs, const char *preset, FILE *f)
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
                dup = same_run(seen[k], r);
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
    if (strcmp(preset, "long") == 0)
        fprintf(f, "; the preset runs two chains side by side (`JOBS=2`, its default on 2 or more "
                   "cores), two runs at a time, so its wall time is at least half that, %.1f "
                   "hours",
                hours / 2);
    if (strcmp(preset, "full") == 0)
        fprintf(f, "; the preset runs its brackets and charlm chains side by side (`JOBS=2`, its "
                   "default on 2 or more cores), two runs at a time, so its wall time is at "
                   "least half that, %.1f hours",
                hours / 2);
    fprintf(f, ".\n\n");
    free(seen);
    return 0;
}

/* The machines sentence: where the report was made and where its
 * distinct finished runs trained, as their records say (a run resumed on
 * another machine counts for each). 0, or 1 out of memory (nothing written). */
int rep_machines(const rep_grids *gs, FILE *f)
{
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    char **names = NULL;
    int n = 0, *count = NULL, unnamed = 0, bad = 0, total = 0, nd = 0;
    for (int i = 0; i < gs->n; i++)
        total += gs->v[i].cs.n;
    const lab_run **seen = malloc(sizeof *seen * (size_t)(total + 1));
    bad = !seen;
    for (int i = 0; i < gs->n && !bad; i++)
        for (int j = 0; j < gs->v[i].cs.n && !bad; j++) {
            const lab_run *run = gs->v[i].cs.cells[j].run;
            int dup = !run;
            for (int k = 0; k < nd && !dup; k++)
                dup = same_run(seen[k], run);
            if (dup)
                continue;
            seen[nd++] = run;
            const ba_run_info *r = &run->info;
            unnamed += r->n_machines == 0;
            for (int k = 0; k < r->n_machines && !bad; k++) {
                int at = 0;
                while (at < n && strcmp(names[at], r->machines[k]) != 0)
                    at++;
                if (at == n) {
                    char **nv = realloc(names, sizeof *nv * (size_t)(n + 1));
                    int *nc = nv ? realloc(count, sizeof *nc * (size_t)(n + 1)) : NULL;
                    names = nv ? nv : names, count = nc ? nc : count;
                    if ((bad = !nc))
                        break;
                    names[n] = r->machines[k], count[n++] = 0;
                }
                count[at]++;
            }
        }
    if (!bad) {
        fprintf(f, "Machines: this report was made on %s, %d cores, with boltzattn %s", cpu,
                rep_cores(), BA_VERSION);
        for (int k = 0; k < n; k++)
            fprintf(f, "%s%s (%d run%s)", k ? ", " : "; its runs trained on ", names[k], count[k],
                    count[k] == 1 ? "" : "s");
        if (unnamed)
            fprintf(f, "; %d run record%s name%s no machine (written by versions before "
                       "2026-12-03)", unnamed, unnamed == 1 ? "" : "s", unnamed == 1 ? "s" : "");
        fprintf(f, ".\n");
    }
    free(names);
    free(count);
    free(seen);
    return bad;
}

static int header(const char *out, const char *preset, const rep_grids *gs, FILE *f)
{
    char date[32];
    rep_date(date, sizeof date);
    fprintf(f, "# Results: preset `%s`\n\n", preset);
    fprintf(f, "Generated by `boltzattn report` from the files under `%s` on %s; nothing below "
               "is typed by hand.\n", out, date);
    fprintf(f, "The grids were run by `make reproduce PRESET=%s` (`lab/reproduce.sh %s`), which "
               "resumes an interrupted grid.\n", preset, preset);
    if (rep_machines(gs, f))
        return 1;
    if (time_line(gs, preset, f))
        return 1;
    fprintf(f, "| grid | runs finished |\n|---|---|\n");
    for (int i = 0; i < gs->n; i++) {
        const lab_cells *cs = &gs->v[i].cs;
        int done = 0;
        for (int j = 0; j < cs->n; j++)
            done += cs->cells[j].run != NULL;
        fprintf(f, "| %s | %d of %d |\n", gs->v[i].name, done, cs->n);
    }
    fprintf(f, "\n");
    return 0;
}

static int conv_overview(const command *c, const rep_grids *gs, FILE *f)
{
    fprintf(f, "## Are the runs converged?\n\n");
    fprintf(f, "Per grid, the cell (T, C, FFN) whose validation metric still moved most late in "
               "training: the mean change over its runs between the periodic evaluations at the "
               "steps shown (the same items both times). 'flat' means every cell of the grid "
               "moved by less than %g (%% of perplexity or accuracy points), half the effect the "
               "grids are sized to resolve; otherwise the direction is named. Each grid's "
               "section has the table per cell.\n\n",
            CONV_LIMIT);
    int code = rep_convergence_overview(c, gs, f);
    fprintf(f, "\n");
    return code;
}

/* ------------------------------------------------------------ verdicts */

/* Every effect of a grid against softmax, with a verdict read off its
 * confidence interval; prefix (may be "") opens each row. */
static int has_int(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* Whether a grid of over holds the cell (task, T, C, FFN). */
static int covered(const rep_grids *over, ba_task task, int T, int C, int ffn)
{
    for (int i = 0; over && i < over->n; i++) {
        const lab_grid *g = &over->v[i].g;
        if (g->task == task && has_int(g->T, g->nT, T) && has_int(g->C, g->nC, C) &&
            has_int(g->ffn, g->nffn, ffn))
            return 1;
    }
    return 0;
}

void rep_effect_text(ba_task task, const lab_effect_row *r, char *eff, size_t n,
                     const char **verdict, const char **paper)
{
    int pct = task == BA_TASK_CHARLM;
    const char *unit = pct ? " %" : "";
    snprintf(eff, n, "missing");
    *verdict = "not measured", *paper = "";
    if (!isnan(r->effect) && isnan(r->lo)) {
        snprintf(eff, n, "%+.2f%s (one pair)", r->effect, unit);
        *verdict = "too few seeds";
    } else if (!isnan(r->effect)) {
        snprintf(eff, n, "%+.2f%s [%+.2f, %+.2f]", r->effect, unit, r->lo, r->hi);
        int better = pct ? -1 : 1; /* lower perplexity is better */
        *verdict = r->lo > 0 || r->hi < 0 ? (r->effect * better > 0 ? "better than softmax"
                                                                     : "worse than softmax")
                                          : "no resolved difference";
        double pv = r->paper ? strtod(r->paper, NULL) : 0; /* "-1.08 %" is -1.08 */
        if (r->paper)
            *paper = pv >= r->lo && pv <= r->hi ? "; the paper's value is inside the interval"
                                                : "; the paper's value is outside the interval";
    }
}

int rep_verdicts(const rep_grid *x, const char *prefix, const char *note,
                 const rep_grids *over, FILE *f)
{
    lab_effect_row *rows;
    int n;
    if (lab_effect_rows(&x->cs, &rows, &n))
        return 1;
    const lab_grid *g = &x->g;
    for (int i = 0; i < n; i++) {
        const lab_effect_row *r = &rows[i];
        const lab_arm *a = &g->arms[r->arm];
        if (r->arm == lab_softmax_arm(g)) /* the reference itself */
            continue;
        if (covered(over, g->task, r->T, r->C, r->ffn))
            continue;
        char eff[128], label[96];
        const char *verdict, *paper;
        rep_effect_text(g->task, r, eff, sizeof eff, &verdict, &paper);
        lab_arm_label(a, label, sizeof label);
        fprintf(f, "%s| %s | %d | %d | %s | %s | %d/%d | %s | %s | %s%s%s |\n", prefix,
                ba_task_name(g->task), r->T, r->C, r->ffn ? "yes" : "no", label, r->pairs, r->seeds,
                eff, r->paper ? r->paper : "", verdict, paper, note ? note : "");
    }
    free(rows);
    return 0;
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

/* The full preset's grids by the names lab/reproduce.sh gives them (its
 * --out): which sections are its headline rows. A grid's name says where
 * it is, never what it holds: T and FFN pick sections of its summary. */
static const struct {
    const char *grid;
    int T, ffn;
} headline_rows[] = {
    {"charlm-T12", 12, 1}, {"charlm-40k", 12, 1},   {"charlm-80k", 12, 1},
    {"charlm-320k", 12, 1}, {"brackets", 16, 1},    {"brackets", 16, 0},
    {"brackets", 20, 1},   {"brackets", 20, 0},    {"charlm", 20, 1},
    {"brackets-T24", 24, 1}, {"brackets-T24", 24, 0},
};
static const char *const paper_grids[] = {"charlm-T12", "charlm", "brackets", "brackets-T24"};
static const char *const budget_grids[] = {"charlm-T12", "charlm-40k", "charlm-80k",
                                           "charlm-320k"};
/* the fixed budgets of the converged preset's cells, one grid per budget */
static const char *const ladder_grids[] = {"charlm-T12", "charlm-40k", "charlm-80k", "charlm-320k",
                                           "brackets"};
static const char *const width_grids[] = {"brackets-width", "charlm-width"};


static int headlines(const rep_grids *gs, FILE *f)
{
    int code = 0;
    fprintf(f, "## Headline rows\n\n");
    for (size_t i = 0; i < sizeof headline_rows / sizeof headline_rows[0]; i++) {
        const rep_grid *x = rep_grid_named(gs, headline_rows[i].grid);
        int T = headline_rows[i].T, ffn = headline_rows[i].ffn;
        for (int ci = 0; x && has_int(x->g.T, x->g.nT, T) && has_int(x->g.ffn, x->g.nffn, ffn) &&
                         ci < x->g.nC;
             ci++) {
            fprintf(f, "### %s: T = %d, C = %d, %s FFN\n", x->name, T, x->g.C[ci],
                    ffn ? "with" : "without");
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
#define NAMES(a) (a), sizeof(a) / sizeof(a)[0]

/* What only the full preset has: the headline rows and the comparisons
 * with the paper; the rows of cells conv (the converged preset's grids, or
 * NULL) holds come from conv. */
static int full_sections(const command *c, const rep_grids *gs, const rep_grids *conv, FILE *f)
{
    int code = headlines(gs, f), nb = 0;
    fprintf(f, "### Against the paper\n\n"
               "Every variant against softmax on the same seeds at the headline widths (effect: "
               "relative perplexity change, negative is better, for charlm; accuracy points for "
               "brackets; 95 %% confidence interval over seeds). The verdict is read off the "
               "interval: 'better' or 'worse' only when it excludes zero.%s\n\n" REP_VERDICT_HEAD,
            conv ? " Rows marked 'PRESET=converged' come from the converged preset's runs "
                   "(section 'Converged headline rows', which says whether they are flat); they "
                   "replace the fixed-budget rows of the same cells."
                 : "");
    code |= verdict_grids(gs, NAMES(paper_grids), 0, conv, f);
    code |= conv && rep_converged_verdicts(conv, f);
    fprintf(f, "\n");
    code |= conv && rep_converged_changes(gs, NAMES(paper_grids), conv, f);
    code |= conv && rep_budget_ladder(c, gs, NAMES(ladder_grids), conv, f);
    for (size_t i = 0; i < sizeof budget_grids / sizeof budget_grids[0]; i++)
        nb += rep_grid_named(gs, budget_grids[i]) != NULL;
    if (nb > 1) {
        fprintf(f, "### The headline row as the training budget grows\n\n"
                   "charlm at T = 12 with the same settings and seeds but more steps (the cosine "
                   "schedule stretched over them). Perplexity still falls with more steps (see the "
                   "convergence overview); this shows whether the effect moves with it.\n\n"
                   "| steps | task | T | C | FFN | variant | pairs/seeds | effect [95 %% CI] | "
                   "paper | verdict |\n|---|---|---|---|---|---|---|---|---|---|\n");
        code |= verdict_grids(gs, NAMES(budget_grids), 1, NULL, f);
        fprintf(f, "\n");
    }
    if (rep_grid_named(gs, width_grids[0]) || rep_grid_named(gs, width_grids[1])) {
        fprintf(f, "### Against the paper across widths (T = 16)\n\n"
                   "The same comparison at every width of the sweeps, so an effect can be seen to "
                   "grow, shrink or vanish as the model widens; where a width saturates (next "
                   "table) no gap can show.\n\n" REP_VERDICT_HEAD);
        code |= verdict_grids(gs, NAMES(width_grids), 0, NULL, f);
        fprintf(f, "\n");
    }
    const rep_grid *x = rep_grid_named(gs, "charlm-T12");
    if (x && rep_jtable(c, x, "### Couplings against the paper's sign pattern (charlm, T = 12)\n\n",
                        f))
        fprintf(f, "\n");
    if ((x = rep_grid_named(gs, "brackets-width"))) {
        fprintf(f, "### Where brackets saturate (T = 16, width sweep)\n\n");
        saturation(x, f);
        fprintf(f, "\n");
    }
    return code;
}

/* The links to the figures of dir (sub: "" or "couplings/" under the
 * grid), as prefix + the path relative to OUT. */
int rep_png_links(const rep_grid *x, const char *sub, const char *prefix, FILE *f)
{
    char dir[PATH_LEN + 16], **names;
    int n;
    snprintf(dir, sizeof dir, "%s/%s", x->dir, sub);
    if (rep_pngs(dir, &names, &n))
        return 1;
    for (int i = 0; i < n; i++)
        fprintf(f, "![%s](%s%s/%s%s)\n", names[i], prefix, x->name, sub, names[i]);
    lab_names_free(names, n);
    return 0;
}

/* A grid's own section: its summary, convergence table, figures and
 * couplings. */
static int grid_section(const command *c, const rep_grid *x, const char *prefix, FILE *f)
{
    fprintf(f, "## %s\n\n", x->name);
    if (rep_summary_body(&x->cs, 1, "###", f))
        return fail_lib(c, "out of memory", 1);
    fprintf(f, "\n#### Convergence\n\n"
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

/* The report, or with section_only the long or converged preset's section
 * alone; conv: the converged preset's grids for the full report's verdicts
 * (or NULL). */
static int write_report(const command *c, const char *out, const char *preset,
                        const char *prefix, const rep_grids *gs, int section_only,
                        const rep_grids *conv)
{
    out_file o;
    if (out_open(c, &o))
        return 1;
    int code = 0, converged = strcmp(preset, "converged") == 0;
    if (section_only)
        code = converged ? rep_converged_section(c, out, gs, 1, o.f)
                         : rep_long_section(c, out, prefix, gs, 1, o.f);
    else if (header(out, preset, gs, o.f))
        code = fail_lib(c, "out of memory", 1);
    if (!code && !section_only)
        code = conv_overview(c, gs, o.f);
    if (!code && strcmp(preset, "full") == 0 && full_sections(c, gs, conv, o.f))
        code = fail_lib(c, "out of memory", 1);
    if (!code && !section_only && strcmp(preset, "long") == 0)
        code = rep_long_section(c, out, prefix, gs, 0, o.f);
    if (!code && !section_only && converged)
        code = rep_converged_section(c, out, gs, 0, o.f);
    for (int i = 0; i < gs->n && !code && !section_only; i++)
        code = grid_section(c, &gs->v[i], prefix, o.f);
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

int cmd_report(int argc, char **argv)
{
    const command *c = &report_cmd;
    const char *out = NULL;
    int rc = parse_args(c, argc, argv, &out, 1, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!out || !*out)
        return usage_error(c, "the output directory OUT is required");
    const char *preset = get_str(c, "preset"), *doc = get_str(c, "samplers-doc");
    const char *prefix = is_set(c, "link-prefix") ? get_str(c, "link-prefix") : "";
    if (doc && (preset || is_set(c, "link-prefix")))
        return usage_error(c, "--samplers-doc excludes --preset and --link-prefix");
    if (doc && !*doc)
        return usage_error(c, "--samplers-doc must not be empty");
    if (!doc && !preset)
        return usage_error(c, "option '--preset' (or '--samplers-doc') is required");
    if (preset && strcmp(preset, "quick") != 0 && strcmp(preset, "full") != 0 &&
        strcmp(preset, "converged") != 0 && strcmp(preset, "samplers") != 0 &&
        strcmp(preset, "long") != 0)
        return usage_error(c, "unknown preset '%s' (quick|full|converged|samplers|long)", preset);
    int section = is_set(c, "section-only");
    if (section && (!preset || (strcmp(preset, "long") != 0 && strcmp(preset, "converged") != 0)))
        return usage_error(c, "--section-only applies to --preset long or converged");
    const char *cdir = get_str(c, "converged");
    if (cdir && (!preset || strcmp(preset, "full") != 0))
        return usage_error(c, "--converged applies to --preset full");
    if (cdir && !*cdir)
        return usage_error(c, "--converged must not be empty");
    rep_grids gs, conv;
    int code = rep_grids_load(c, out, &gs);
    if (code)
        return code;
    if (cdir && (code = rep_grids_load(c, cdir, &conv))) {
        rep_grids_free(&gs);
        return code;
    }
    code = doc ? rep_samplers_doc(c, out, doc, &gs)
               : write_report(c, out, preset, prefix, &gs, section, cdir ? &conv : NULL);
    rep_grids_free(&gs);
    if (cdir)
        rep_grids_free(&conv);
    return code;
}
