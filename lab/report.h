/* What the parts of `boltzattn-lab report` share: the grids of an output
 * directory and their common tables (report_common.c, which calls none of
 * the others), the results report (report.c, on top), its converged and
 * long sections, the couplings tables, and the samplers section of a
 * document (report_samplers.c). */
#ifndef BA_LAB_REPORT_H
#define BA_LAB_REPORT_H

#include "presets.h"

#include <cjson/cJSON.h>

/* One grid of the output directory: a subdirectory holding grid.json, its
 * runs and the cells they fill. The directory's name is a label and a
 * path, nothing more. */
typedef struct {
    char name[256];     /* the subdirectory's name, for headings and links */
    char dir[PATH_LEN]; /* OUT/name */
    lab_grid g;
    lab_runs rs;
    lab_cells cs;       /* cs.g points at g: a rep_grid does not move */
} rep_grid;

typedef struct {
    rep_grid *v;
    int n;
} rep_grids;

/* Every grid under out, in the order the shell lists out/<name>/ in the C
 * locale, their summaries with the reference numbers of refs (may be
 * NULL). 0 or an exit code after printing (2: out is not a directory or
 * holds no grid, or a grid.json is damaged). */
int rep_grids_load(const command *c, const char *out, const lab_refs *refs, rep_grids *gs);
/* Whether x is one of v[0..n-1]. */
int rep_has_int(const int *v, int n, int x);
/* The same run in two grids (copied by ablate --share-from): the same
 * records, result and training time. */
int rep_same_run(const lab_run *a, const lab_run *b);
void rep_grids_free(rep_grids *gs);

/* Today's date in UTC, YYYY-MM-DD. */
void rep_date(char *buf, size_t n);
/* One line: the machine and version that made the report, and the
 * machines its runs' records name with their run counts (and how many
 * records name none). 0, or 1 out of memory (nothing written). */
int rep_machines(const rep_grids *gs, FILE *f);
/* The opening of a preset's section made on its own: the generator line
 * (out, today, the preset that ran the grids) and the machines line. */
void rep_generated_by(const char *out, const char *preset, const rep_grids *gs, FILE *f);
/* The grid's summary.md text with its first `skip` lines left out and
 * every "## " heading turned into `heading` followed by a space. 0, or 1
 * when out of memory (nothing written). */
int rep_summary_body(const lab_cells *cs, int skip, const char *heading, FILE *f);
/* The names of the regular *.png files in dir, sorted bytewise
 * (malloc'd, free with lab_names_free); none when dir cannot be read. */
int rep_pngs(const char *dir, char ***names, int *n);

/* The grid of gs named name (a subdirectory of OUT), or NULL. */
const rep_grid *rep_grid_named(const rep_grids *gs, const char *name);
/* Links to the figures (*.png) of the grid's directory sub ("" or e.g.
 * "couplings/"), as prefix + the path relative to OUT. 0, or 1 out of
 * memory. */
int rep_png_links(const rep_grid *x, const char *sub, const char *prefix, FILE *f);
/* A number of a JSON object (NAN when absent or not a number). */
double rep_num(const cJSON *o, const char *key);
/* Whether cell c of grid x holds a finished run of arm a with ffn at the
 * grid's (first) T and C: the runs a study table reads. */
int rep_cell_run(const rep_grid *x, const lab_cell *c, int a, int ffn);
/* The link to the grid's figure png (a file name in its directory), as
 * prefix + its path relative to OUT, with alt text alt; nothing where the
 * figure is not drawn (no gnuplot, no data). */
void rep_png_link(const rep_grid *x, const char *png, const char *alt, const char *prefix,
                  FILE *f);
/* 'flat' means every cell of a grid moved by less than this (% of
 * perplexity or accuracy points) late in training: half the effect the
 * grids are sized to resolve. */
#define CONV_LIMIT 0.5
/* report_converged.c, the convergence evidence. The grid's convergence
 * table: per (T, C, FFN) the change of the validation metric late in
 * training. 0 or an exit code after printing. */
int rep_convergence(const command *c, const rep_grid *x, FILE *f);

/* The convergence overview's table: per grid the cell that moved most late
 * in training and the verdict (flat, still improving, still getting worse).
 * 0 or an exit code after printing. */
int rep_convergence_overview(const command *c, const rep_grids *gs, FILE *f);

/* The head of a verdict table, and its rows for one grid: every variant
 * against softmax on the same seeds with the verdict read off the 95 %
 * interval. prefix opens each row (extra leading columns), note ends its
 * verdict (NULL: none); rows of cells that a grid of over holds are left
 * out (over may be NULL). 0, or 1 out of memory. */
#define REP_VERDICT_HEAD                                                                     \
    "| task | T | C | FFN | variant | pairs/seeds | effect [95 %% CI] | paper | verdict |\n"  \
    "|---|---|---|---|---|---|---|---|---|\n"
int rep_verdicts(const rep_grid *x, const char *prefix, const char *note,
                 const rep_grids *over, FILE *f);

/* The effect column of a verdict row (eff, n bytes: the effect with its
 * interval, "one pair" or "missing"), its verdict and the note on the
 * paper's value ("" when there is none); every string but eff static. */
/* The mean of s and its 95 % Student-t interval in *e, *lo, *hi (NAN
 * mean with no values, NAN bounds under two); returns the count. */
int rep_interval(const ba_running *s, double *e, double *lo, double *hi);

/* An effect as the tables print it into buf (cap bytes): "+1.23 %
 * [+0.50, +2.00]" (charlm: % of perplexity; else points, no unit), or
 * "+1.23 % (one pair)" where lo is NAN. */
void rep_fmt_effect(ba_task t, double e, double lo, double hi, char *buf, size_t cap);

void rep_effect_text(ba_task task, const lab_effect_row *r, char *eff, size_t n,
                     const char **verdict, const char **paper);

/* report_converged.c: the verdict rows of the converged preset's grids
 * (each marked with its budget), and its section: the grids (want, the
 * preset's) and how far they are, whether they are flat, the verdicts, and per grid the final
 * movement of every cell and its summary. standalone: the section opens
 * with its own generator line (for docs/results.md). 0 or an exit code
 * after printing. */
int rep_converged_verdicts(const rep_grids *conv, FILE *f);
int rep_converged_section(const command *c, const char *out, const rep_grids *gs,
                          const lab_names *want, int standalone, FILE *f);
/* The table "What the longer budget changed": every verdict row of a
 * converged grid beside the row of the same cell and variant in the first
 * of the n grids of gs named in names (the fixed-budget preset's) that
 * has one, and whether the verdict changed. Nothing when no row pairs up.
 * 0, or 1 out of memory. */
int rep_converged_changes(const rep_grids *gs, const char *const *names, size_t n,
                          const rep_grids *conv, FILE *f);
/* The table "Does the late movement shrink as the budget grows?": every
 * cell and variant of the converged grids with its runs, final metric and
 * mean late change at each budget the n named grids of gs (one budget
 * each) and the converged grid hold, by steps. Nothing when no row has a
 * fixed-budget rung. 0, or an exit code after printing. */
int rep_budget_ladder(const command *c, const rep_grids *gs, const char *const *names, size_t n,
                      const rep_grids *conv, FILE *f);

/* report_couplings.c: the paper's sign of J at distance d by refs ("> 0",
 * "< 0" or ""; "" when refs is NULL); the sentence that states that
 * pattern into buf; and the table of the grid's couplings analysis
 * (x->dir/couplings/couplings.json) after the text before: 1 when
 * written, 0 when there is none (a damaged one is a warning). */
const char *rep_paper_sign(const lab_refs *refs, int d);
void rep_paper_pattern(const lab_refs *refs, char *buf, size_t n);
int rep_jtable(const command *c, const rep_grid *x, const char *before, FILE *f);
/* J by key distance of x's exact Ising arms (report_couplings.c): lead
 * (NULL: none), then a table with one column per arm that has a couplings
 * analysis under x->dir/couplings/ (the mean over seeds with its 95 %
 * interval, the paper's sign beside), how many seeds each stands on, and
 * the analyses' figures; nothing when no arm has one, and then with
 * say_missing a line naming the arms without. *shown (NULL: not asked):
 * whether a table was written. 0, or an exit code after printing. */
int rep_couplings_table(const command *c, const rep_grid *x, const char *prefix, const char *lead,
                        int say_missing, int *shown, FILE *f);

/* report_common.c: a grid's extrapolation file (ablate --extrapolate's
 * GRID/extrapolation.json, read by lab_xentries_read) into *xe: empty when
 * there is none; a damaged one is a warning and read as none. Free with
 * lab_xentries_free. */
void rep_extrapolation_read(const command *c, const rep_grid *x, lab_xentries *xe);

/* report_long.c: the long-context section of the long preset's grids
 * under out (want: the preset's, named when missing): per T the arms
 * against softmax, learning curves, J by distance, length extrapolation;
 * what is missing is said. standalone:
 * the section opens with its own generator line (for docs/results.md).
 * 0 or an exit code after printing. */
int rep_long_section(const command *c, const char *out, const char *prefix, const rep_grids *gs,
                     const lab_names *want, int standalone, FILE *f);

/* report_study.c: the study preset's section: its grids of one task, T
 * and C at different budgets (a ladder) read at equal steps (each rung's
 * arms against its reference, with the training time per run) and at
 * equal compute (each arm's rung against the reference's largest rung
 * that costs no more per run: priced by the cost.json of a grid of the
 * ladder's setup, any budget or learning rate, that names every arm of
 * the ladder, else the runs' wall-clock times). want: the preset's grids
 * (others under out are left out). preset (NULL: none): its plan, whose
 * "order" opens the section with a row per grid (runs finished, arms and
 * seeds still to train, rungs not run yet). standalone: with its own
 * generator line. 0 or an exit code after printing. */
int rep_study_section(const command *c, const char *out, const char *prefix,
                      const rep_grids *gs, const lab_names *want, const cJSON *preset,
                      int standalone, FILE *f);
/* cost.c: grid_dir/cost.json (`boltzattn-lab cost`) read and checked
 * whole into *doc (the caller's: cJSON_Delete; NULL where there is no such
 * file). 0, or an exit code after printing (2: the file is damaged, what
 * is wrong named with the file and the entry). */
int lab_cost_read(const command *c, const char *grid_dir, cJSON **doc);
/* The ms a training step of the arm labelled label (lab_arm_label) at T,
 * C and ffn costs, from a doc of lab_cost_read, into *ms: 1 found, 0 not.
 * The machine it was measured on is the doc's "machine". */
int lab_cost_find(const cJSON *doc, const char *label, int T, int C, int ffn, double *ms);
/* report_extrap.c: the length extrapolation of a charlm rung x of the
 * study at ffn, from x's extrapolation file: every arm's perplexity at its
 * trained T and each longer T (mean ± sd over the runs with an entry; a
 * refused arm with the library's reason, runs without an entry counted),
 * then each arm against the grid's reference, paired on seeds, and the
 * link (prefix + path relative to OUT) to the grid's extrapolation.png
 * (boltzattn plot). Nothing where the file holds no finished evaluation
 * (a damaged one: a warning). */
void rep_study_extrapolation(const command *c, const rep_grid *x, int ffn, const char *prefix,
                             FILE *f);

/* The section "## Training with sampled statistics" of doc regenerated
 * from the grids of out, everything above the heading kept, written
 * atomically. 0, or an exit code after printing (2: no doc, or no such
 * heading in it). */
int rep_samplers_doc(const command *c, const char *out, const char *doc, const rep_grids *gs);

/* report_verdict.c: the rows of the verdict table, one per claim of the
 * presets file's "verdicts" (a couplings claim: one per key distance the
 * paper gives a sign for), read from the output directories under root
 * (e.g. results/full/charlm-320k for the claim grid "full/charlm-320k")
 * at the largest budget. A run is stuck when its final metric is worse
 * than its cell's median by more than STUCK_K times the robust spread:
 * 1.4826 x the median absolute deviation, at least STUCK_FLOOR (accuracy
 * points; % of the median for perplexity), in cells of STUCK_MIN_RUNS runs
 * or more. */
#define STUCK_K 5.0
#define STUCK_FLOOR 1.0
#define STUCK_MIN_RUNS 4
/* One row; every string but its buffers static or the presets
 * document's. */
typedef struct {
    const char *claim, *cell_grid, *same_info, *paper_text, *metric;
    char cell[96], arms[160];
    int measured, n;       /* n: seeds (pairs) of the interval */
    int dist;              /* a couplings row's key distance (0: an effect row) */
    long steps;            /* the budget of the runs (0: none) */
    double eff, lo, hi;    /* at the largest budget, every pair */
    char ours[96];
    const char *word;      /* the verdict word */
    char settled[256];     /* "settled: ...", "not settled: ..." or "no records" */
    char stuck[512];       /* "none", "**stuck**: ..." with the verdict without them, ... */
} rep_vrow;
typedef struct {
    rep_vrow *v;
    int n, cap;
} rep_vrows;
/* 0, or an exit code after printing (2: a malformed claim); rs->v
 * malloc'd (free it) either way. */
int rep_verdict_rows(const command *c, const char *root, const lab_presets *ps, rep_vrows *rs);
/* Where rep_verdict_rows_at reads claims: those whose grid or ladder
 * names PRESET/GRID, read at OUT/GRID (a path under the root, as a
 * claim's grid). */
typedef struct {
    const char *preset, *out, *grid;
    uint64_t seed_end;  /* the seeds read: those below it (0: every seed) */
    int ladder;         /* 1: with each claim's ladder (its PRESET/ grids at OUT/), 0: none */
    int no_extrapolate; /* 1: leave out claims evaluated at a longer T */
} rep_at;
/* The rows of the claims at (what `boltzattn-lab more-seeds` and
 * `settled` decide on). Errors as rep_verdict_rows. */
int rep_verdict_rows_at(const command *c, const char *root, const lab_presets *ps,
                        const rep_at *at, rep_vrows *rs);

/* report_findings.c: the verdict table of the presets file's claims
 * ("verdicts"), read from the output directories under root (e.g.
 * results/full/charlm-320k for the claim grid "full/charlm-320k"), with
 * the rules that assign its words, settled and stuck runs. 0 or an exit
 * code after printing (2: a malformed claim). */
int rep_verdict_section(const command *c, const char *root, const lab_presets *ps, FILE *f);
/* The same rows as README's findings block: the text between the lines
 * <!-- findings:begin --> and <!-- findings:end --> of readme rewritten,
 * atomically; a file without each marker exactly once, in order, is
 * refused and left untouched (2). 0 or an exit code after printing. */
int rep_verdict_readme(const command *c, const char *root, const lab_presets *ps,
                       const char *readme);

#endif
