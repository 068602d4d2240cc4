/* The one command-line option parser: the boltzattn tool's commands (cli/,
 * lab/) and the benchmarks (bench/) declare their options in tables of
 * `opt` and read them through the getters below. Everything here prints
 * its own messages to stderr and returns an exit code (2: bad usage). */
#ifndef BA_OPTS_H
#define BA_OPTS_H

#include "boltzattn.h"

#include <stdint.h>
#include <stdio.h>

#define EXIT_USAGE 2

/* The program name messages start with ("boltzattn", "bench_train"; cli/opts.c). */
extern const char *prog;

typedef struct {
    const char *name; /* long name without dashes */
    const char *arg;  /* metavariable, or NULL for a flag */
    const char *def;  /* default shown in --help (NULL: none) */
    const char *help;
    const char *val;  /* parsed value (or def) */
    int set;          /* given on the command line */
} opt;

typedef struct {
    const char *cmd;   /* command name in messages; NULL for a whole program */
    const char *usage; /* text after the name in the usage line */
    opt *opts;         /* ends with an entry whose name is NULL */
} command;

/* "PROG CMD: message\n(see 'PROG CMD --help')" on stderr; returns 2. */
int usage_error(const command *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void print_help(const command *c);
/* Parses argv (without the program and command names). Up to maxpos
 * positional arguments (not starting with '-', or "-") go to pos, in order
 * (*npos their count; pos and npos may be NULL when maxpos is 0). Returns
 * -1 after printing --help, 0 on success, else an exit code after printing
 * the problem. */
int parse_args(const command *c, int argc, char **argv, const char **pos, int maxpos,
               int *npos);
opt *find_opt(const command *c, const char *name);
const char *get_str(const command *c, const char *name);
int is_set(const command *c, const char *name);
/* Every value of an option given more than once, in command-line order
 * (parse_args keeps the last): vals[0..max-1] point into argv. Returns the
 * count, or -EXIT_USAGE (after printing) when there are more than max. */
int get_repeated(const command *c, int argc, char **argv, const char *name, const char **vals,
                 int max);
/* Numbers in range: 0, or an exit code after printing the problem. A
 * missing value (no default) is "option '--NAME' is required". */
int get_long(const command *c, const char *name, long lo, long hi, long *out);
int get_int(const command *c, const char *name, int lo, int hi, int *out);
int get_u64(const command *c, const char *name, uint64_t *out);
int get_double(const command *c, const char *name, double lo, double hi, double *out);
/* A comma-separated list of at most max numbers in [lo, hi] (integers when
 * integral), each written in decimal without blanks: no empty items, no
 * repeats. */
int get_list(const command *c, const char *name, double lo, double hi, int integral,
             double *out, int max, int *n);
int get_int_list(const command *c, const char *name, int lo, int hi, int *out, int max, int *n);

/* --threads N (when the command has it and it was given): OpenMP and BLAS
 * threads. Otherwise, unless OMP_NUM_THREADS is set, the cores idle at the
 * start (all of them on an idle machine; a line on stderr says so when
 * other programs keep some busy). Call it before any parallel work. 0 or
 * an exit code. */
int apply_threads(const command *c);
/* How many processes of one job (MPI ranks) share this machine: without
 * --threads, apply_threads then gives each its share of the cores this
 * process may run on (mpirun binds a rank to its cores: omp_get_num_procs)
 * instead of following the load. */
void set_local_ranks(int n);
void set_threads(int n);
int threads_in_use(void);
/* Why apply_threads chose fewer threads than cores ("1 other program was
 * running on 2 cores at start"), or "". */
const char *threads_note(void);
/* For long runs, between steps (the progress hook): while apply_threads
 * chose the count itself, follows the load, looking at most every 0.25 s
 * (two looks in a row must agree). 1 when it changed the count, else 0. */
int retune_threads(void);

/* Monotonic seconds, and "2m05s" style durations ("?" when unknown). */
double now_s(void);
void fmt_duration(double s, char *buf, size_t n);
/* The CPU's model name from /proc/cpuinfo ("unknown" if none). */
void cpu_model(char *out, size_t len);
/* This machine as a run record and a report name it: the CPU's model, its
 * online cores, on x86-64 the widest vector set of AVX-512, AVX2 and
 * SSE2 it has (the vectorised kernels pick their clone by it) and
 * OpenBLAS's kernel ("AMD EPYC, 2 cores, AVX2, OpenBLAS Zen"): with the
 * seed, build and thread count, what a run's bits depend on (products
 * round per BLAS kernel). One line, at most len - 1 characters. */
void machine_desc(char *out, size_t len);
/* Benchmarks' peak memory: reset_peak_rss resets the kernel's peak-RSS
 * mark (writing 5 to /proc/self/clear_refs), 0 on success, so the next
 * peak_rss_mib is one configuration's; peak_rss_mib is VmHWM in MiB, else
 * getrusage's ru_maxrss (a running maximum), -1 if neither is there. */
int reset_peak_rss(void);
double peak_rss_mib(void);
/* A benchmark's CSV file opened for writing with its header line written:
 * the stream, or NULL after printing why (exit code 2, the path is bad). */
FILE *open_csv(const char *path, const char *header);

#endif
