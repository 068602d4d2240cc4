/* Grids of training runs and what is made of them (summaries, plots, the
 * couplings analysis): the code that `boltzattn ablate`, `plot` and
 * `couplings` and the experiment program (lab/, boltzattn-lab) share.
 * Everything here reads the runs' records through records.c, the one
 * reader of run directories:
 *
 *   GRID/grid.json             the grid: task, arms, T, widths, FFN, seeds,
 *                              settings (written by ablate)
 *   GRID/runs/NAME/run.json    each run's record (the library's), or, for
 *                              runs of older versions, result.json beside
 *                              the config record of metrics.jsonl
 *   GRID/runs/NAME/metrics.jsonl   its records along training
 *   GRID/couplings/couplings.json  the couplings analysis (couplings); a
 *                              grid of several Ising forms (the long
 *                              preset) has one per arm in couplings/LABEL/
 *   GRID/extrapolation.json    its runs evaluated at a longer T (ablate
 *                              --extrapolate, extrapolate.c)
 *   GRID/engines.json          its Ising runs evaluated with other engines
 *                              (boltzattn-lab eval-engines, engine_eval.c)
 *
 * A directory's name carries no meaning: what a run is comes from its
 * record. Generated Markdown, CSV and plot data are outputs only. */
#ifndef BA_GRID_H
#define BA_GRID_H

#include "cli.h"

#define LAB_MAX_LIST 32
#define LAB_MAX_ARMS (4 * (1 + 4 * LAB_MAX_LIST))

/* ------------------------------------------------------------- runs */

/* A whole regular file as NUL-terminated text (malloc'd; ba_read_file), or
 * NULL. */
char *lab_slurp(const char *path);
/* The entries of dir but dot files that keep(dir, name) accepts (keep
 * NULL: all), sorted by cmp over char * elements (NULL: bytewise) into
 * *names (malloc'd; lab_names_free). 0 (none when dir cannot be read), or
 * -1 out of memory. */
int lab_list_dir(const char *dir, int (*keep)(const char *, const char *),
                 int (*cmp)(const void *, const void *), char ***names, int *n);
void lab_names_free(char **names, int n);

/* The form of an arm's attention beyond its variant: how the couplings
 * are parameterised and how far they reach (Ising attention), the field
 * bias (sigmoid and Ising attention) and whether positions are learned.
 * The plain form (absolute, no band, no bias, learned positions) is the
 * paper's model and every grid's before long contexts. */
typedef struct {
    ba_couplings couplings;
    int band;                 /* W, or 0: no band */
    ba_field_bias field_bias;
    int pos_emb;              /* ba_pos_emb: 1 learned, 0 none, 2 rope, 3 alibi */
    int engine;               /* -1: the grid's engine; else the arm's own
                                 approximate engine (ba_engine), e.g. a
                                 full-range arm beside banded exact ones */
} lab_form;

/* o's "pos_emb": true or false for learned and none (as in every file
 * before issue 43), the kind's name for rope and alibi. The member, or
 * NULL. */
struct cJSON;
struct cJSON *lab_add_pos_emb(struct cJSON *o, int pos_emb);

/* The position embeddings a form has unless told: none for relative
 * couplings (so the model runs at any T), learned otherwise (train's rule). */
static inline int lab_form_default_pos(ba_couplings c) { return c != BA_COUPLINGS_RELATIVE; }
lab_form lab_form_plain(void);
int lab_form_is_plain(const lab_form *f);
/* Whether two forms describe the same model; the engine is left out (a
 * run's config cannot tell the arm's engine from the grid's), so two arms
 * of one grid may not differ by their engine alone (ablate refuses them as
 * the same arm; compare engines with one grid per engine). */
int lab_form_same(const lab_form *a, const lab_form *b);
/* The form of a model config; engine: the config's if approximate, else -1. */
lab_form lab_form_of(const ba_config *cfg);
/* The short label of a variant with its form: the variant's name for the
 * plain form, else with -rel (relative couplings), -W<W> (band), -logn
 * (log-n field bias), -pos / -nopos (position embeddings other than
 * the default) and -<engine> (an arm's own engine), e.g.
 * "boltzmann-rel-W8", "sigmoid-logn", "boltzmann-rel-tap". Labels tables,
 * plots and cell directory names. */
void lab_form_label(ba_attn attn, const lab_form *f, char *buf, size_t n);

/* One run as the lab sees it: the record and the keys grids group by. */
typedef struct {
    char *dir;          /* the run directory (malloc'd) */
    const char *name;   /* its last component, for messages and labels */
    ba_run_info info;   /* the record (legacy runs: rebuilt) */
    int legacy;         /* read from result.json and the log's config record */
    /* keys */
    ba_task task;
    ba_attn attn;
    lab_form form;
    ba_sampler_kind sampler;
    int shots;          /* 0 for exact */
    int T, C, ffn;
    uint64_t seed;
    long steps;         /* the run's planned steps */
    /* result (finished runs) */
    int finished;
    double value;       /* the grid metric: val_ppl (charlm) or val_acc (brackets) */
    int has_exact;
    double exact_value; /* the same with exact inference (sampled runs) */
    double wall_s;      /* training time over every call */
} lab_run;

/* Reads the record of the run in dir. 0; BA_ERR_IO when dir holds no
 * record (an unfinished legacy run has none); another status with err
 * filled for a damaged one. */
int lab_run_read(const char *dir, lab_run *r, char *err);
void lab_run_free(lab_run *r);
/* "boltzmann", "boltzmann-gibbs-S256" or "boltzmann-rel-W8": a run's
 * variant label in plots (lab_form_label, then the sampler). */
void lab_run_variant(const lab_run *r, char *buf, size_t n);

/* Every run under grid/runs/ with a record, sorted by directory name. A
 * damaged record is a warning (the run is left out); 0, or an exit code
 * after printing (out of memory). */
typedef struct {
    lab_run *v;
    int n;
} lab_runs;
int lab_runs_scan(const command *c, const char *grid, lab_runs *out);
void lab_runs_free(lab_runs *rs);

/* The records of dir/metrics.jsonl in order (the config record left
 * out): *recs malloc'd. A torn last line (a kill mid-write) is ignored
 * quietly; a damaged complete line is a warning. A missing log is no
 * error (none). 0 or an exit code (out of memory). */
int lab_metrics_read(const command *c, const char *dir, ba_record **recs, int *n);
/* Copies the regular files of run directory src into dst (created), the
 * lock file excepted (ablate --share-from). 0, or -1 with err filled. */
int lab_copy_run(const char *src, const char *dst, char *err);
/* Removes a run directory's regular files and the directory itself. */
void lab_remove_run_dir(const char *dir);
/* The raw text of a run's settings object, for reports: "sampler" of the
 * config or the whole "train" (malloc'd, or NULL). */
char *lab_run_sampler_json(const lab_run *r);

/* ------------------------------------------------------------ grids */

/* One arm of a comparison: a variant with its form and its sampler
 * (exact for softmax and sigmoid, and for exact boltzmann/coupling). */
typedef struct {
    ba_attn attn;
    lab_form form;
    ba_sampler sampler;
} lab_arm;

/* A variant in the plain form, exact. */
lab_arm lab_arm_plain(ba_attn attn);

/* An arm spec of ablate --arm (and couplings --arm): VARIANT[+PART]...,
 * PART one of relative, absolute, band<W>, log-n, pos-emb=learned|none,
 * engine=mf|tap|bp|hybrid (boltzmann and coupling: the arm's own
 * approximate engine, overriding the grid's), each at most once, e.g.
 * "boltzmann+relative+band8", "sigmoid+log-n", "boltzmann+relative+engine=tap".
 * The sampler is exact. BA_OK, or BA_ERR_ARG with err saying what is
 * wrong with the spec; whether the form suits the variant is the
 * library's to judge (ba_config_validate). */
int lab_arm_parse(const char *spec, lab_arm *out, char *err);

typedef struct {
    ba_task task;
    int narms, nT, nC, nffn, nseeds;
    lab_arm arms[LAB_MAX_ARMS];
    int T[LAB_MAX_LIST], C[LAB_MAX_LIST], ffn[2];
    uint64_t seed0;
    /* what every cell shares */
    int layers, heads;
    ba_engine engine;
    ba_approx approx;         /* the approximate engines' settings */
    int window;               /* hybrid's window (0: 8, or T - 1 where T <= 8) */
    ba_data_spec data;        /* kinds, held-out size and seed */
    ba_train_settings train;  /* the seed is each cell's */
} lab_grid;

/* The arms of ablate's --arm (or --attn), --sampler, --shots and sampler
 * options into g->arms, g->narms (arms.c): every base arm, and the
 * boltzmann and coupling ones once per sampler (and shot count, for
 * sampled ones). 0 or a usage exit code after printing. */
int lab_arms_from_cli(const command *c, int argc, char **argv, lab_grid *g);
/* The arm every effect is measured against: the plain, exact softmax arm
 * (learned positions), else the first softmax arm of another form (e.g. the
 * study's softmax+RoPE before its +ALiBi), or -1. */
int lab_softmax_arm(const lab_grid *g);

/* grid.json of dir: written by ablate, read by the summaries and reports.
 * 0, or an exit code after printing. */
int lab_grid_write(const command *c, const char *dir, const lab_grid *g);
int lab_grid_read(const command *c, const char *dir, lab_grid *g);

static inline int lab_arm_sampled(const lab_arm *a) { return a->sampler.kind != BA_SAMPLER_EXACT; }
/* The arm's row label: the variant with its form (lab_form_label), with
 * its sampler when sampled. */
void lab_arm_label(const lab_arm *a, char *buf, size_t n);
/* The arm's short label: lab_form_label of its variant and form. */
void lab_arm_variant(const lab_arm *a, char *buf, size_t n);
/* The conventional directory name of a cell: TASK-T<T>-C<C>-ffn<f>-LABEL-s<SEED>
 * (LABEL: lab_arm_variant, the variant's name for the plain form) with
 * -KIND-S<shots> for sampled arms (where ablate trains it). */
void lab_cell_name(const lab_grid *g, int arm, int T, int C, int ffn, uint64_t seed, char *buf,
                   size_t n);
/* The model config of a cell (without the data's sizes). */
ba_config lab_cell_config(const lab_grid *g, int arm, int T, int C, int ffn);

/* The cells of a grid, T x C x FFN x seed x arm in that nesting, each
 * with the run that fills it (NULL: missing). */
typedef struct {
    int arm, T, C, ffn;
    uint64_t seed;
    const lab_run *run; /* a finished run with the cell's keys, or NULL */
} lab_cell;
/* The reference numbers a summary prints in its "paper" column: one per
 * (task, variant, T, FFN) of the paper's plain exact model, and the sign
 * pattern of its couplings by key distance. The lab program fills them
 * from lab/presets.json; ablate has none (the column stays empty). */
typedef struct {
    ba_task task;
    ba_attn attn;
    int T, ffn; /* ffn -1: with or without */
    const char *text; /* e.g. "-1.08 %" */
} lab_ref;
typedef struct {
    lab_ref *v;
    int n;
    int pos_lo, pos_hi, neg_from; /* J > 0 for d in [pos_lo, pos_hi], J < 0 from neg_from */
} lab_refs;

typedef struct {
    const lab_grid *g;
    lab_cell *cells;
    int n;
    const lab_refs *refs; /* NULL (lab_cells_match's): no reference numbers */
} lab_cells;
/* Pairs the grid's cells with the finished runs of rs (by their records'
 * keys). 0 or an exit code after printing. */
int lab_cells_match(const command *c, const lab_grid *g, const lab_runs *rs, lab_cells *out);
void lab_cells_free(lab_cells *cs);
const lab_cell *lab_cells_find(const lab_cells *cs, int arm, int T, int C, int ffn,
                               uint64_t seed);
/* How many of the cells have their finished run. */
int lab_cells_finished(const lab_cells *cs);

/* The first difference of two JSON objects (descending into objects):
 * its key ("train.lr") and each side's value as JSON. */
typedef struct {
    char key[96], a[128], b[128];
} lab_diff;
/* 1 with *d filled when objects ja and jb differ outside the top-level
 * keys of skip (NULL-ended, or NULL), 0 when not, -1 when either is not a
 * JSON object (identity.c). */
int lab_json_diff(const char *ja, const char *jb, const char *const *skip, lab_diff *d);
/* Whether finished run r, matched to cell x by its keys, was trained with
 * other settings than the grid asks of x: 1 with *d (a: the run's, b: the
 * grid's), 0 when not, -1 out of memory. Compared: the model config (the
 * engine as lab_cells_match compares it; a charlm run's vocabulary is its
 * data's), the data spec and every training setting but the thread count,
 * the data path and the log and save intervals. */
int lab_run_differs(const lab_grid *g, const lab_cell *x, const lab_run *r, lab_diff *d);
/* grid.json's object of g as compact JSON (malloc'd), or NULL. */
char *lab_grid_json(const lab_grid *g);

/* ------------------------------------------------------- summaries */

/* The reference number of refs for a comparison, or NULL (also when refs
 * is NULL). */
const char *lab_ref_text(const lab_refs *refs, ba_task task, ba_attn a, int T, int ffn);
/* The metric in the unit summaries show: perplexity, or accuracy in %. */
double lab_shown(ba_task task, double value);
/* The paired effect of value v against softmax's s on one seed: relative
 * perplexity change in % (charlm), accuracy points (brackets). */
double lab_effect(ba_task task, double v, double s);

/* summary.md of a grid into f: per (T, C, FFN) each arm's mean and sd
 * over seeds and its paired effect against softmax with a 95 % interval.
 * 0, or -1 out of memory (f then holds a partial summary). */
int lab_summary_md(const lab_cells *cs, FILE *f);
/* One (T, C, FFN) section of it, as the report quotes it ("## T = ..."
 * heading left out): 1, 0 if the grid has no such section, -1 out of
 * memory. */
int lab_summary_section(const lab_cells *cs, int T, int C, int ffn, FILE *f);
/* The grid's output files: results.csv and results.json (a row per
 * finished run), effects.csv (the summary's numbers) and summary.md. 0 or
 * an exit code after printing. */
int lab_write_outputs(const command *c, const char *dir, const lab_cells *cs);

/* One row of a grid's effects: an arm against softmax in one (T, C, FFN). */
typedef struct {
    int arm, T, C, ffn;
    int runs, seeds, pairs;
    double mean, sd;          /* of the metric (shown units) over its runs */
    double effect, lo, hi;    /* paired effect and 95 % interval (NAN: none) */
    double exact_mean;        /* with exact inference (NAN: none) */
    const char *paper;
} lab_effect_row;
/* Every (T, C, FFN, arm) row in summary order; *rows malloc'd. */
int lab_effect_rows(const lab_cells *cs, lab_effect_row **rows, int *n);

/* ------------------------------------------ evaluations of a grid's runs */

/* The evaluations of a grid's runs (ablate --extrapolate, boltzattn-lab
 * eval-engines) share the
 * handling of their file (grid_eval.c): GRID/FILE is {"format": F,
 * "version": 1, "entries": [...]}, each entry with "run" and "status"
 * strings and the mode's keys; an entry found by its run and keys is
 * never redone, the file is rewritten atomically after every new entry,
 * and one process at a time works on it (the grid directory's lock). */
struct cJSON;
typedef struct lab_eval_file lab_eval_file;
typedef struct {
    const char *file;        /* "extrapolation.json", in the grid */
    const char *format;      /* its "format" */
    const char *what;        /* "extrapolation" (messages) */
    const char *const *keys; /* an entry's keys beside "run" (NULL-ended) */
    /* one finished run of the grid's cells: its entries found
     * (lab_eval_find: f->kept) or added (lab_eval_add); 0 or an exit code */
    int (*run)(const command *c, const lab_grid *g, const lab_run *r, lab_eval_file *f,
               void *user);
    void *user;
    /* when another process holds the grid's lock: 0 skip this pass (a
     * note, f->busy), 1 wait for it (a note, then a try every
     * LAB_EVAL_POLL_S seconds) */
    int wait;
} lab_eval_mode;
#define LAB_EVAL_POLL_S 2
struct lab_eval_file {
    const lab_eval_mode *mode;
    char path[PATH_LEN];
    struct cJSON *doc, *entries; /* while lab_eval_grid runs */
    int changed, busy;           /* busy: another process held the lock (nothing done) */
    int done, refused, skipped, kept;
};
/* Takes dir's lock (or waits for it, m->wait), reads dir/m->file (a
 * damaged one, or one whose entries lack a key, is refused: exit 2), and
 * calls m->run for the finished run of each cell of g, in cell order; *f
 * keeps the path and counts. 0 (also when the lock is held elsewhere and
 * m->wait is 0: f->busy, a note) or an exit code. */
int lab_eval_grid(const command *c, const char *dir, const lab_grid *g, const lab_eval_mode *m,
                  lab_eval_file *f);
/* The entry of f with head's run and keys (compared as JSON), or NULL. */
const struct cJSON *lab_eval_find(const lab_eval_file *f, const struct cJSON *head);
/* Appends entry e (taken: freed on failure) as done or refused and
 * rewrites the file. 0 or an exit code. */
int lab_eval_add(const command *c, lab_eval_file *f, struct cJSON *e, int refused);
/* A new entry with the run's keys: run, variant, attn, couplings, band,
 * field_bias, pos_emb, T, C, ffn, seed, steps (NULL: out of memory). */
struct cJSON *lab_eval_head(const lab_run *r);
/* res as e[key] = {val_loss, val_ppl, val_acc, items, targets}; 0 out of
 * memory. */
int lab_eval_add_result(struct cJSON *e, const char *key, const ba_eval_result *res);
/* The run's checkpoint into ckpt (PATH_LEN): 1 when it is there; 0 when
 * not (a note, f->skipped counted); -2 when the path does not fit. */
int lab_eval_ckpt(const command *c, const lab_run *r, lab_eval_file *f, char *ckpt);
/* m evaluated on `items` evenly spaced validation items (0: all) of block
 * size T in batches of B; the data of spec, charlm's text at path. 0 or
 * an exit code after printing (also when no target was scored). */
int lab_eval_data(const command *c, ba_model *m, const ba_data_spec *spec, int T,
                  const char *path, int items, int B, ba_eval_result *res);

/* ---------------------------------------------------- extrapolation */

/* ablate --extrapolate (extrapolate.c): every finished charlm run of the
 * grid in dir evaluated at block size T2 (on `items` evenly spaced
 * validation windows, 0: all; batch B) and at its own T, into
 * dir/extrapolation.json; a run whose model cannot run at T2 is recorded
 * with the reason, one without its checkpoint skipped with a note; entries
 * already there are kept. data_path: the text (NULL: each run's recorded
 * one). wait: while another process holds the grid's lock, 0 skips this
 * pass with a note, 1 waits for the lock. 0 or an exit code after
 * printing. */
int lab_extrapolate(const command *c, const char *dir, int T2, int items, int B,
                    const char *data_path, int wait);
/* What ablate --extrapolate evaluates: the lengths (in the order given),
 * the validation windows per evaluation (0: all) and the batch (0: the
 * grid's); wait as lab_extrapolate's. */
typedef struct {
    int T2[LAB_MAX_LIST], nT, items, B, wait;
} lab_xplan;
/* --extrapolate, --extrapolate-items and --extrapolate-batch of c into *x
 * (the batch stays 0 when not given). 0 or a usage exit code. */
int lab_extrapolate_opts(const command *c, lab_xplan *x);
/* lab_extrapolate at each length of x, in the order given: 0 or an
 * exit code after printing. */
int lab_extrapolate_list(const command *c, const char *dir, const lab_xplan *x,
                         const char *data_path);

/* Reading dir/extrapolation.json back (extrapolate.c, beside its writer;
 * the plot's figure and the lab's report both read it this way). One
 * entry per run and length: a finished one before a refused one, of two
 * finished ones the one on more windows (0: every window, the most), else
 * the first in the file. */
typedef struct {
    const char *run, *variant; /* strings of the document */
    const char *reason;        /* refused: why; else NULL */
    int T, T_eval, refused;
    long items, steps; /* items: the windows asked for, 0 every window */
    double own, at;    /* val_ppl at T and at T_eval; NAN when refused */
} lab_xentry;
typedef struct {
    struct cJSON *doc; /* owns the strings */
    lab_xentry *e;     /* (n) in the file's order */
    int n;
} lab_xentries;
/* dir/extrapolation.json read and checked whole into *x: 0 (with x->n = 0
 * when there is none), 1 out of memory, 2 unreadable or damaged; on
 * failure *x is empty and err (BA_ERR_LEN) says what is wrong, naming the
 * entry (from 1) where one is damaged; the caller names the file. A finished entry has run, variant, T, T_eval, items, steps and a
 * val_ppl >= 1 in at_T and at_T_eval; a refused one run, variant, T,
 * T_eval and reason. Free with lab_xentries_free (also after a failure). */
int lab_xentries_read(const char *dir, lab_xentries *x, char *err);
void lab_xentries_free(lab_xentries *x);
/* The entry of run `run` at T_eval, or NULL. */
const lab_xentry *lab_xentries_find(const lab_xentries *x, const char *run, int T_eval);
/* The distinct T_eval of x's entries into v, ascending (at most max);
 * returns their count. */
int lab_xentries_lengths(const lab_xentries *x, int *v, int max);

/* boltzattn-lab eval-engines --out DIR --engines LIST (engine_eval.c), the
 * option values from its table: every finished run of the grid in --out
 * whose attention is boltzmann or coupling (exact, not sampled) evaluated
 * on --items validation items (0: all; --batch, default the
 * grid's) with its own engine and with each engine of LIST, into
 * dir/engines.json. Approximate engines run with --damping, --tol,
 * --max-iter (defaults ba_approx_default) and hybrid with --window
 * (default 8, or T - 1 where T <= 8); each of these options is a usage
 * error where LIST has no engine it applies to. An engine the model cannot
 * run on is recorded with the library's reason; a run without its
 * checkpoint is skipped with a note; entries already there are kept. A
 * grid without such an arm is said to have nothing to evaluate (0).
 * --data: the text (default: each run's recorded one). 0 or an exit code
 * after printing. */
int lab_eval_engines(const command *c);

/* dqa --compare-samplers (lab/dqa_compare.c): the option values come from
 * the dqa command's table; 0 or an exit code after printing. */
int dqa_compare_samplers(const command *c);

/* The lab program's commands (boltzattn-lab, lab/lab_main.c). */
int cmd_report(int argc, char **argv);
int cmd_dqa(int argc, char **argv);
int cmd_approx(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_more_seeds(int argc, char **argv);
int cmd_settled(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_eval_engines(int argc, char **argv);
int cmd_cost(int argc, char **argv);

/* approx --doc DOC --from DIR (lab/approx_doc.c): the Markdown document
 * of the approximate engines' accuracy from DIR/accuracy.json and, when
 * DIR holds them, the grids trained with the engines (paired with the
 * exact runs of DIR or else of the grids in exact_from, NULL:
 * results/full) and their engines.json; 0 or an exit code after
 * printing. */
int approx_write_doc(const command *c, const char *doc, const char *from,
                     const char *exact_from);

#endif
