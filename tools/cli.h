/* Shared pieces of the boltzattn tool: option parsing, messages and exit
 * codes, the training loop (used by train and ablate). Only the tool prints. */
#ifndef BA_CLI_H
#define BA_CLI_H

#include "boltzattn.h"

#include <stdint.h>
#include <stdio.h>

#define EXIT_USAGE 2

extern const char *prog;

typedef struct {
    const char *name; /* long name without dashes */
    const char *arg;  /* metavariable, or NULL for a flag */
    const char *def;  /* default shown in --help (NULL: none) */
    const char *help;
    const char *val; /* parsed value (or def) */
    int set;         /* given on the command line */
} opt;

typedef struct {
    const char *cmd;
    const char *usage;
    opt *opts;
} command;


typedef struct {
    long steps, warmup;
    int batch, eval_every, eval_items, log_every, save_every;
    double lr, min_lr_frac, j_init_std;
    uint64_t seed;
    ba_adamw opt;
    int resume; /* continue from outdir/state.safetensors */
} train_settings;

/* Options: parse_opts returns -1 after printing --help, 0 on success, else
 * an exit code (after printing the problem). */
int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void print_help(const command *c);
int parse_opts(const command *c, int argc, char **argv);
/* parse_opts that also takes up to maxpos positional arguments (those not
 * starting with '-', or "-"), in order, into pos; *npos gets their count. */
int parse_args(const command *c, int argc, char **argv, const char **pos, int maxpos,
               int *npos);
opt *find_opt(const command *c, const char *name);
const char *get_str(const command *c, const char *name);
int get_flag(const command *c, const char *name);
/* Every value of an option that may be given more than once, in command-line
 * order (parse_opts keeps only the last). Call after parse_opts succeeded.
 * Fills vals[0..max-1] with pointers into argv; returns the count, or
 * EXIT_USAGE negated (after printing) when there are more than max. */
int get_repeated(const command *c, int argc, char **argv, const char *name, const char **vals,
                 int max);
int get_long(const command *c, const char *name, long lo, long hi, long *out);
int get_int(const command *c, const char *name, int lo, int hi, int *out);
int get_u64(const command *c, const char *name, uint64_t *out);
int get_double(const command *c, const char *name, double lo, double hi, double *out);

/* Exit code for a library status met while reading inputs. */
int input_status(int st);
int fail_lib(const char *cmd, int st, const char *err, int code);
void set_threads(int n);
int threads_in_use(void);
double now_s(void);
int make_dirs(const char *path, char *err);
const char *default_data_path(void);
int open_dataset(const ba_config *cfg, const char *path, int use_vocab, ba_dataset **out,
                 char *err);
void print_eval(FILE *f, const char *label, ba_task task, const ba_eval_result *r);
void fmt_duration(double s, char *buf, size_t n);

/* ------------------------------------------------------ sampler options
 * Sampled attention's options, a reusable piece of any command's table:
 * SAMPLER_OPTS(DEF) is --sampler KIND (default DEF, may be NULL) and
 * --shots S followed by SAMPLER_PARAM_OPTS, the parameters of the kinds
 * (ablate has list versions of --sampler and --shots, then
 * SAMPLER_PARAM_OPTS). Call sampler_opt_defaults(c) before parse_opts so
 * --help shows ba_sampler_default's values. */
#define SAMPLER_PARAM_OPTS                                                                  \
    {"sampler-beta", "X", NULL,                                                             \
     "inverse temperature the sampled gradient assumes the shots come from (beta_assumed)", \
     0, 0},                                                                                 \
    {"dqa-tau", "X", NULL, "dqa: anneal time tau", 0, 0},                                  \
    {"dqa-gamma", "X", NULL, "dqa: driver strength Gamma", 0, 0},                          \
    {"dqa-lambda", "X", NULL, "dqa: problem-Hamiltonian scale lambda", 0, 0},              \
    {"dqa-steps", "M", NULL, "dqa: Trotter steps", 0, 0},                                  \
    {"dqa-order", "1|2", NULL, "dqa: Trotter order", 0, 0},                                \
    {"gibbs-chains", "N", NULL, "gibbs: chains the shots are split over", 0, 0},           \
    {"gibbs-burnin", "N", NULL, "gibbs: sweeps discarded at the start of each chain", 0, 0}, \
    {"gibbs-thin", "N", NULL, "gibbs: sweeps between kept states", 0, 0},                  \
    {"sa-sweeps", "N", NULL, "sa: sweeps of one anneal (one shot)", 0, 0},                 \
    {"sa-beta0", "X", NULL, "sa: inverse temperature the anneal starts at", 0, 0}

#define SAMPLER_OPTS(sampler_def)                                                            \
    {"sampler", "KIND", sampler_def,                                                         \
     "Ising marginals of boltzmann/coupling attention: exact, or estimated from the shots "  \
     "of direct|dqa|gibbs|sa",                                                               \
     0, 0},                                                                                  \
    {"shots", "S", NULL, "states drawn per query by a sampler", 0, 0}, SAMPLER_PARAM_OPTS

/* Fills the --help defaults of the sampler options c has. */
void sampler_opt_defaults(const command *c);
/* Checks the sampler parameter options given (--shots when with_shots,
 * and SAMPLER_PARAM_OPTS): each in range, and each used by one of the
 * nkinds kinds in use. 0, or an exit code after printing the problem. */
int parse_sampler_params(const command *c, const ba_sampler_kind *kinds, int nkinds,
                         int with_shots);
/* Sets the parameters given on the command line that s->kind uses (after
 * parse_sampler_params accepted them). */
void apply_sampler_params(const command *c, ba_sampler *s, int with_shots);
/* --sampler KIND, --shots and the parameters into *out: starts from *base
 * when the kind is base's (eval: the checkpoint's sampler), else from
 * ba_sampler_default(kind), and validates the result. 0 or an exit code. */
int parse_sampler_opt(const command *c, const ba_sampler *base, ba_sampler *out);
/* "exact" or e.g. "gibbs, S=256" (beta_assumed added when not 1). */
void sampler_desc(const ba_sampler *s, char *buf, size_t n);

/* The options train and ablate share: model depth and heads, the task-data
 * settings, the engine and the optimisation schedule. Both option tables
 * hold every one of them. */
typedef struct {
    int layers, heads, kinds, heldout;
    uint64_t data_seed;
    ba_engine engine;
} model_opts;

/* Reads the shared options into m and s (s->seed, j_init_std and log_every
 * are left to the caller) and applies --threads. Returns 0 or an exit code
 * after printing the problem. */
int parse_shared_opts(const command *c, model_opts *m, train_settings *s);

/* The training settings as a JSON object (malloc'd), and back: the
 * reverse fills s and, if present, *data (malloc'd). */
char *train_settings_json(const train_settings *s, const char *data);
int train_settings_from_json(const char *json, train_settings *s, char **data, char *err);

/* Reads the config and training settings of the run saved in
 * dir/state.safetensors (for train --resume). *data is malloc'd or NULL. */
int read_resume_info(const char *dir, ba_config *cfg, train_settings *s, char **data,
                     char *err);
int save_ckpt(const char *dir, const ba_model *m, long step, const char *train_json, char *err);

typedef struct {
    ba_eval_result final; /* evaluation on the whole validation/held-out set,
                             with the model's sampler */
    int has_exact;        /* a sampled model also evaluated exactly: */
    ba_eval_result exact; /* the same evaluation with exact inference */
    double train_s;       /* wall time of the optimisation steps of this call */
    double train_s_total; /* the same over every call that trained the run */
    long steps;           /* steps the model has taken in all */
    long steps_run;       /* steps taken by this call (fewer after a resume) */
} train_outcome;

/* Trains a fresh model of cfg on data into outdir (checkpoint, metrics.jsonl).
 * verbose 0: silent; 1: header and validation lines on stderr; 2: also the
 * progress line (a terminal). Returns 0, or 1 after printing a runtime
 * failure. */
int run_training(const char *cmd, const ba_config *cfg, const ba_dataset *data,
                 const train_settings *s, const char *outdir, const char *data_path,
                 int verbose, train_outcome *out);

/* One writer per output directory: a POSIX record lock on DIR/.lock (which
 * holds the holder's process id, for people). The kernel drops the lock
 * when its process ends, however it ends, so a lock left by a dead process
 * is simply taken. take_lock returns 0 (lk holds it until release_lock);
 * 2 if a live process holds it (err names its id); 1 if the lock file
 * cannot be made. release_lock removes the file and drops the lock; it
 * does nothing on a lock not held. The descriptor must stay open while the
 * lock is held: the process must not open and close DIR/.lock elsewhere. */
typedef struct {
    int fd;
    char path[4096 + 8];
} dir_lock;
int take_lock(const char *dir, dir_lock *lk, char *err);
void release_lock(dir_lock *lk);

/* run_training for a caller that already holds outdir's lock (take_lock):
 * ablate locks a cell before deciding to train it. */
int run_training_locked(const char *cmd, const ba_config *cfg, const ba_dataset *data,
                        const train_settings *s, const char *outdir, const char *data_path,
                        int verbose, train_outcome *out);

/* Output files and gnuplot (tools/analysis.c). Paths are PATH_LEN bytes;
 * mkpath is snprintf into one, -1 (after printing) if it does not fit.
 * open_out prints and returns NULL on failure; close_out returns 0 or 1
 * after printing a write error. run_gnuplot runs `gnuplot SCRIPT` inside
 * dir (no shell): 0, or 1 after printing. gp_header opens a script:
 * terminal (pngcairo if available) and output file relative to dir. */
#define PATH_LEN 4096
int mkpath(const char *cmd, char *buf, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
FILE *open_out(const char *cmd, const char *path);
/* open_out of the path formatted into path (PATH_LEN bytes); NULL after
 * printing when it does not fit or cannot be opened. */
FILE *open_outf(const char *cmd, char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int close_out(const char *cmd, FILE *f, const char *path);
int have_gnuplot(void);
extern const char *const no_gnuplot_fix; /* the install hint after "gnuplot not found" */
int run_gnuplot(const char *cmd, const char *dir, const char *script);
void gp_header(FILE *f, const char *script, const char *png, int w, int h);

/* The charlm data path recorded by train in a checkpoint, or NULL
 * (malloc'd; tools/boltzattn.c). */
char *ckpt_data_path(const char *ckpt);

/* subcommands living outside boltzattn.c */
int cmd_ablate(int argc, char **argv);
int cmd_couplings(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_dqa(int argc, char **argv);

#endif
