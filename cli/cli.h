/* The boltzattn tool's shared pieces (cli/ and lab/): messages and exit
 * codes, data and output files, the sampler options, and the training
 * driver that runs the library's loop for `train` and `ablate`. Only the
 * tool prints and chooses exit codes: 0 ok, 1 runtime failure, 2 bad
 * usage or input. */
#ifndef BA_CLI_H
#define BA_CLI_H

#include "boltzattn.h"
#include "opts.h"

#include <stdint.h>
#include <stdio.h>

/* Exit code for a library status met while reading inputs: bad input is
 * 2, an allocation or numerical failure 1. */
int input_status(int st);
/* "boltzattn CMD: err" on stderr; returns code. */
int fail_lib(const command *c, const char *err, int code);

/* mkdir -p; 0, or -1 with err filled. */
int make_dirs(const char *path, char *err);
/* Where charlm data comes from without --data: $BA_DATA, else
 * data/tinyshakespeare.txt. */
const char *default_data_path(void);
/* The data a checkpoint or state describes: brackets rebuilt from spec,
 * charlm read from path (with spec's vocabulary when use_vocab). An
 * unreadable charlm file adds the hint to run 'make data'. */
int open_dataset(const ba_data_spec *spec, int T, const char *path, int use_vocab,
                 ba_dataset **out, char *err);
/* The charlm data path recorded by train in a checkpoint, or NULL
 * (malloc'd). */
char *ckpt_data_path(const char *ckpt);
void print_eval(FILE *f, const char *label, ba_task task, const ba_eval_result *r);
/* For a sampled model the exact engines cannot run (T beyond their
 * limits): "LABEL (exact inference): skipped: why" on f and 1; else 0. */
int print_exact_skipped(FILE *f, const char *label, const ba_config *cfg);

/* ------------------------------------------------------------- MPI
 * cli/mpi.c: the tool as one of the ranks of an MPI job (mpirun -np N).
 * Without a launcher, or in a build without MPI, a single process: rank
 * 0 of 1, and every call below does nothing. */
typedef struct {
    long calls;     /* reductions */
    size_t bytes;   /* bytes each rank sent (and received) in them */
    double seconds; /* time spent in them, waiting for the others included */
    double wait;    /* of which waiting for the others to arrive (a barrier first) */
} mpi_totals;
/* At the start of main, for command cmd: starts MPI when a launcher
 * started this process; quiets the other ranks (see cli/mpi.c). 0, or an
 * exit code after printing (a command that runs on one rank only; a build
 * without MPI under a launcher). */
int mpi_start(int *argc, char ***argv, const char *cmd);
int mpi_rank(void);
int mpi_size(void);
/* Every rank's status so far, exchanged: the worst exit code of them
 * all. Every rank calls it at the same points (a rank that fails before a
 * command's first one meets it in mpi_finish). */
int mpi_agree(int code);
/* mpi_agree where a command's ranks first meet, before any work, and then
 * (all well) every rank's settings compared with rank 0's: train's (the
 * command, fresh or resumed, the run directory dir, the model config and
 * data spec, the charlm text's size and hash, the training settings but
 * the thread count, the step and the weights' hash) or ablate's (the grid
 * directory, the grid as lab_grid_json writes it but the thread count,
 * and for charlm the data path). Settings that differ: 2 on every rank,
 * rank 0 naming the first difference ("T = 10, not 8"). A rank elsewhere
 * (one that ended its command with 0 without meeting the others): 2. */
int mpi_agree_train(int code, ba_trainer *t, const char *dir, int fresh);
int mpi_agree_grid(int code, const char *dir, const char *data_path, const char *grid_json);
/* From here on the ranks meet at every step (a data-parallel training),
 * or (0) no longer: they left it together (a stop they agreed on). */
void mpi_lockstep(int on);
/* At the end of main: the exit code. A rank that fails in lockstep ends
 * the job (MPI_Abort), since the others may wait for it in a reduction;
 * a rank that never met the others exchanges its status first. */
int mpi_finish(int code);
/* A program's commands, and main's whole dispatch over them (cli/mpi.c):
 * --help or help (help(), exit 0), version (NAME VERSION, where NAME is
 * prog), else the command named by argv[1] between mpi_start and
 * mpi_finish; an unknown or missing command is a usage error (2). */
typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} cli_command;
int cli_main(int argc, char **argv, const cli_command *cmds, size_t n, void (*help)(void));
/* A reducer over the job's ranks into r; 1 when there are several. */
int mpi_reducer(ba_reducer *r);
/* Where a rank's messages reach the terminal whatever its rank. */
FILE *mpi_err(void);
const mpi_totals *mpi_get_totals(void);

/* ------------------------------------------------------ output files
 * Files the lab writes with fprintf go through memory and then the
 * library's atomic writer: out_open gives a stream, out_close puts its
 * bytes at path (0, or 1 after printing). Paths are PATH_LEN bytes;
 * mkpath formats one (-1 after printing when it does not fit). */
#define PATH_LEN 4096
int mkpath(const command *c, char *buf, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
typedef struct {
    FILE *f;
    char *buf;
    size_t len;
} out_file;
/* 0 or 1 after printing (out of memory). */
int out_open(const command *c, out_file *o);
int out_close(const command *c, out_file *o, const char *path);
/* Drops what was written to o (nothing reaches any path): the way out
 * when the content could not be completed. */
void out_discard(out_file *o);
/* An output file the command is about to write, checked before any work:
 * 0, or 2 after printing when path is missing (NULL: "option '--out' is
 * required") or empty, exists and is not a regular
 * file (a device, a FIFO, a directory), or is the same file (device and
 * inode, whatever the names) as one of the n inputs (NULL entries are
 * skipped). what names the option, e.g. "--out". */
int check_out_file(const command *c, const char *what, const char *path,
                   const char *const *inputs, int n);
/* 1 when a and b name the same existing file (device and inode). */
int same_file(const char *a, const char *b);
/* out_open with the path formatted into path (PATH_LEN bytes): the
 * stream, or NULL after printing. */
FILE *out_openf(const command *c, out_file *o, char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 1 if an executable gnuplot is on PATH; its install hint. */
int have_gnuplot(void);
extern const char *const no_gnuplot_fix;
/* Runs `gnuplot SCRIPT` inside dir (no shell): 0, or 1 after printing. */
int run_gnuplot(const command *c, const char *dir, const char *script);
/* The opening of a gnuplot script: terminal and output file (relative to
 * the script's directory). */
void gp_header(FILE *f, const char *script, const char *png, int w, int h);

/* ------------------------------------------------------ sampler options
 * SAMPLER_OPTS(DEF): --sampler KIND (default DEF) and --shots S; the
 * parameters of the kinds (--dqa-tau, ...) come from the library's table
 * (ba_sampler_params): sampler_opts_append adds them, with their defaults
 * and help, at the end of an option table that has room for them. */
#define SAMPLER_OPTS(sampler_def)                                                            \
    {"sampler", "KIND", sampler_def,                                                         \
     "Ising marginals of boltzmann/coupling attention: exact, or estimated from the shots "  \
     "of direct|dqa|gibbs|sa",                                                               \
     0, 0}
#define SAMPLER_PARAM_SLOTS 16
/* Appends every parameter option but those named in skip (NULL-ended, may
 * be NULL) before the table's terminator; cap is the table's length. */
void sampler_opts_append(opt *table, int cap, const char *const *skip);
/* Checks the parameter options given (shots only when with_shots): each
 * in range and used by one of the nkinds kinds in use. 0 or an exit code. */
int parse_sampler_params(const command *c, const ba_sampler_kind *kinds, int nkinds,
                         int with_shots);
/* Sets the parameters given that s->kind uses (after parse_sampler_params). */
void apply_sampler_params(const command *c, ba_sampler *s, int with_shots);
/* --sampler KIND, --shots and the parameters into *out: from *base when
 * the kind is base's (eval: the checkpoint's sampler), else from
 * ba_sampler_default(kind), validated. 0 or an exit code. */
int parse_sampler_opt(const command *c, const ba_sampler *base, ba_sampler *out);
/* "exact" or e.g. "gibbs, S=256" (beta_assumed added when not 1). */
void sampler_desc(const ba_sampler *s, char *buf, size_t n);

/* ------------------------------------------------------ training */

/* The options train and ablate share (one definition, so their names,
 * defaults and help cannot drift apart): model depth and heads, the data
 * settings, the engine and the optimisation schedule. */
/* A macro's value as a string literal, for help texts. */
#define BA_STR_(x) #x
#define BA_STR(x) BA_STR_(x)

#define SHARED_TRAIN_OPTS                                                                    \
    {"layers", "N", "1", "transformer blocks", 0, 0},                                        \
    {"heads", "N", "1", "attention heads per block", 0, 0},                                  \
    {"steps", "N", "1000", "optimisation steps (of each run)", 0, 0},                        \
    {"batch", "N", "32", "sequences per step (and per batch of the evaluations)", 0, 0},     \
    {"lr", "X", "3e-3", "peak learning rate", 0, 0},                                         \
    {"min-lr", "X", "0.1", "final learning rate as a fraction of --lr", 0, 0},               \
    {"warmup", "N", "5% of steps", "linear warmup steps", 0, 0},                             \
    {"weight-decay", "X", "0.1", "AdamW decay of weight matrices (never J, LayerNorm, "     \
     "biases)", 0, 0},                                                                       \
    {"clip", "X", "1.0", "global gradient-norm clip (0 = off)", 0, 0},                       \
    {"init-std", "X", "0.02",                                                                \
     "std of the initial embeddings and weight matrices, in [1e-6, 1] (GPT-2's; residual "   \
     "projections that over sqrt(2 layers))", 0, 0},                                         \
    {"data", "PATH", "$BA_DATA or data/tinyshakespeare.txt",                                 \
     "charlm text file (a regular file of at most 1 GiB)", 0, 0},                            \
    {"kinds", "N", "1", "brackets: bracket kinds", 0, 0},                                    \
    {"max-depth", "D", "none",                                                               \
     "brackets: only prefixes nested at most D deep, drawn uniformly among those (uncapped "  \
     "ones reach a depth of about sqrt(T))", 0, 0},                                          \
    {"heldout", "N", "2000",                                                                 \
     "brackets, recall: held-out sequences (1 to 20% of all sequences)", 0, 0},             \
    {"data-seed", "N", "1234", "brackets, recall: seed of the held-out set", 0, 0},          \
    {"recall-vocab", "V", "64",                                                              \
     "recall: vocabulary, even, 4..256 (keys 0..V/2-1, values V/2..V-1)", 0, 0},             \
    {"pairs", "N", "8", "recall: key-value pairs of the context, 1..V/2 and 4N <= T", 0, 0}, \
    {"engine", "NAME", "auto",                                                               \
     "Ising engine: exact auto (band with --band, else fast)|fast|band|reference, or "      \
     "approximate mf|tap|bp|hybrid (any T; hybrid: exact within --window W, mean field "    \
     "beyond)", 0, 0},                                                                       \
    {"window", "W", "8 (with --engine hybrid)",                                              \
     "hybrid engine: couplings within distance W exact, 1.." BA_STR(BA_MAX_BAND)            \
     "; under --engine hybrid, --band W means the same", 0, 0},                              \
    {"damping", "X", "0.5", "approximate engines: share of the new iterate, in (0, 1]", 0,  \
     0},                                                                                     \
    {"tol", "X", "1e-8", "approximate engines: stop when max |step| < X (0 < X < 1)", 0, 0}, \
    {"max-iter", "N", "1000", "approximate engines: sweeps per query before the retry "     \
     "with damping/4 (1.." BA_STR(BA_APPROX_MAX_ITER) ")", 0, 0},                            \
    {"eval-every", "N", "steps/10", "validate every N steps (0 = only at the end)", 0, 0},   \
    {"save-every", "N", "as --eval-every",                                                   \
     "save the checkpoint and resumable state every N steps (0 = only at the end)", 0, 0},  \
    {"eval-items", "N", "512", "items in periodic validation (the final one uses all)", 0,  \
     0},                                                                                     \
    {"log-every", "N", "10", "write a training record to metrics.jsonl every N steps", 0,   \
     0},                                                                                     \
    {"threads", "N", "idle cores", "OpenMP threads (at most the CPUs)", 0, 0}

/* Reads SHARED_TRAIN_OPTS (s->seed and j_init_std are left to the
 * caller) and applies --threads. arm_engine: an approximate engine some
 * of ablate's arms run on their own (engine=NAME), whose settings
 * --damping, --tol, --max-iter (and --window for hybrid) then give even
 * when --engine is exact; BA_ENGINE_AUTO for none. 0 or an exit code. */
typedef struct {
    int layers, heads;
    ba_engine engine;
    ba_approx approx;  /* --damping, --tol, --max-iter */
    int window;        /* --window (or --band under --engine hybrid); 0 unless hybrid */
    ba_data_spec data; /* kinds, recall vocabulary and pairs, held-out size and seed */
} model_opts;
int parse_shared_opts(const command *c, ba_task task, ba_engine arm_engine, model_opts *m,
                      ba_train_settings *s);
/* --window, --damping, --tol, --max-iter over base values (a checkpoint's,
 * or ba_approx_default and 0): only with an approximate engine, and
 * --window only with hybrid, so that no option is silently ignored.
 * Ranges: damping (0, 1], tol (0, 1], max-iter 1..BA_APPROX_MAX_ITER,
 * window 1..BA_MAX_BAND. 0 or an exit code. (Under train's hybrid,
 * --band W is the window too.) */
int parse_approx_opts(const command *c, ba_engine engine, const ba_approx *base,
                      int base_window, ba_approx *approx, int *window);
/* The engine options of eval: the same names and help as train's. */
#define ENGINE_EVAL_OPTS                                                                     \
    {"engine", "NAME", "the checkpoint's",                                                   \
     "Ising engine to evaluate with: reference|fast|band|auto|mf|tap|bp|hybrid", 0, 0},    \
    {"window", "W", "the checkpoint's, else 8", "hybrid engine: its exact window", 0, 0},   \
    {"damping", "X", "the checkpoint's, else 0.5", "approximate engines: damping", 0, 0},   \
    {"tol", "X", "the checkpoint's, else 1e-8", "approximate engines: tolerance", 0, 0},    \
    {"max-iter", "N", "the checkpoint's, else 1000", "approximate engines: sweeps", 0, 0}

/* One writer per run directory: a POSIX record lock on DIR/.lock (which
 * holds the holder's process id, for people). The kernel drops it when its
 * process ends, however it ends, so a lock left by a dead process is
 * simply taken. take_lock: 0 (held until release_lock); 2 if a live
 * process holds it (err names its id); 1 if the lock file cannot be made.
 * The descriptor stays open while the lock is held. */
typedef struct {
    int fd;
    char path[PATH_LEN + 8];
} dir_lock;
int take_lock(const char *dir, dir_lock *lk, char *err);
void release_lock(dir_lock *lk);

/* Runs a trainer into dir (which the caller has locked): the progress
 * line (verbose 2), the header and validation lines (verbose >= 1), the
 * first SIGINT/SIGTERM stops at a save point and a second ends the process
 * at once. Returns 0, or 1 after printing a runtime failure or a stop. */
int run_trainer(const command *c, ba_trainer *t, const char *dir, int verbose,
                ba_train_outcome *out);

/* subcommands */
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_grads(int argc, char **argv);
int cmd_batch(int argc, char **argv);
int cmd_ablate(int argc, char **argv);
int cmd_couplings(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_engines(int argc, char **argv);

/* The BA_ENGINE_CAP_* bits of engine e from the library's table
 * (cli/engines.c); 0 for auto or an unknown number. */
unsigned engine_caps(ba_engine e);

#endif
