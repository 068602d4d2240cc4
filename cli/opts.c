/* The command-line option parser shared by the tool and the benchmarks
 * (see opts.h). */
#include "opts.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void openblas_set_num_threads(int); /* from OpenBLAS; its header varies by distro */
char *openblas_get_corename(void);  /* likewise */

/* The program messages start with: the tool's name unless a program
 * (boltzattn-lab, a benchmark) sets its own first thing in main. Defined
 * here, beside its only reader, so the parser calls nothing back. */
const char *prog = "boltzattn";

/* "boltzattn train" or "bench_train" for messages. */
static void print_name(FILE *f, const command *c)
{
    if (c->cmd)
        fprintf(f, "%s %s", prog, c->cmd);
    else
        fprintf(f, "%s", prog);
}

int usage_error(const command *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_name(stderr, c);
    fprintf(stderr, ": ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see '");
    print_name(stderr, c);
    fprintf(stderr, " --help')\n");
    va_end(ap);
    return EXIT_USAGE;
}

void print_help(const command *c)
{
    printf("usage: ");
    print_name(stdout, c);
    printf(" %s\n\noptions:\n", c->usage);
    for (opt *o = c->opts; o->name; o++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        printf("  %-24s %s", left, o->help);
        if (o->def)
            printf(" (default: %s)", o->def);
        printf("\n");
    }
    printf("  %-24s %s\n", "--help", "show this help");
}

/* The option named by the first len bytes of name, or NULL. */
static opt *lookup(const command *c, const char *name, size_t len)
{
    for (opt *p = c->opts; p->name; p++)
        if (strlen(p->name) == len && strncmp(p->name, name, len) == 0)
            return p;
    return NULL;
}

int parse_args(const command *c, int argc, char **argv, const char **pos, int maxpos, int *npos)
{
    for (opt *o = c->opts; o->name; o++)
        o->val = o->def, o->set = 0;
    int np = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_help(c);
            return -1;
        }
        if (strncmp(a, "--", 2) != 0) {
            /* a positional argument: anything not starting with '-', or "-" */
            if (np == maxpos || (a[0] == '-' && a[1]))
                return usage_error(c, "unexpected argument '%s'", a);
            pos[np++] = a;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        opt *o = lookup(c, name, len);
        if (!o)
            return usage_error(c, "unknown option '--%.*s'", (int)len, name);
        if (!o->arg) {
            if (eq)
                return usage_error(c, "option '--%s' takes no value", o->name);
            o->val = "1";
        } else if (eq) {
            o->val = eq + 1;
        } else {
            if (i + 1 >= argc)
                return usage_error(c, "option '--%s' needs a value (%s)", o->name, o->arg);
            o->val = argv[++i];
        }
        o->set = 1;
    }
    if (npos)
        *npos = np;
    return 0;
}

opt *find_opt(const command *c, const char *name)
{
    for (opt *o = c->opts; o->name; o++)
        if (strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

const char *get_str(const command *c, const char *name) { return find_opt(c, name)->val; }
int is_set(const command *c, const char *name)
{
    const opt *o = find_opt(c, name);
    return o && o->set;
}

int get_repeated(const command *c, int argc, char **argv, const char *name, const char **vals,
                 int max)
{
    /* The same walk as parse_args, which has already rejected anything
     * malformed; positional arguments name no option and are passed over. */
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0)
            continue;
        const char *a = argv[i] + 2, *eq = strchr(a, '=');
        const opt *o = lookup(c, a, eq ? (size_t)(eq - a) : strlen(a));
        if (!o || !o->arg)
            continue;
        const char *v = eq ? eq + 1 : argv[++i];
        if (strcmp(o->name, name) != 0)
            continue;
        if (n == max)
            return -usage_error(c, "--%s given more than %d times", name, max);
        vals[n++] = v;
    }
    return n;
}

int get_long(const command *c, const char *name, long lo, long hi, long *out)
{
    const char *v = find_opt(c, name)->val;
    if (!v)
        return usage_error(c, "option '--%s' is required", name);
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno == ERANGE || end == v || *end != '\0')
        return usage_error(c, "--%s: '%s' is not an integer", name, v);
    if (x < lo || x > hi)
        return usage_error(c, "--%s: %ld is out of range [%ld, %ld]", name, x, lo, hi);
    *out = x;
    return 0;
}

int get_int(const command *c, const char *name, int lo, int hi, int *out)
{
    long x;
    int rc = get_long(c, name, lo, hi, &x);
    if (!rc)
        *out = (int)x;
    return rc;
}

int get_u64(const command *c, const char *name, uint64_t *out)
{
    const char *v = find_opt(c, name)->val;
    char *end;
    errno = 0;
    if (!v || *v == '-')
        return usage_error(c, "--%s: '%s' is not a non-negative integer", name, v ? v : "");
    unsigned long long x = strtoull(v, &end, 10);
    if (errno == ERANGE || end == v || *end != '\0')
        return usage_error(c, "--%s: '%s' is not a non-negative integer", name, v);
    *out = (uint64_t)x;
    return 0;
}

int get_double(const command *c, const char *name, double lo, double hi, double *out)
{
    const char *v = find_opt(c, name)->val;
    if (!v)
        return usage_error(c, "option '--%s' is required", name);
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno == ERANGE || end == v || *end != '\0' || !isfinite(x))
        return usage_error(c, "--%s: '%s' is not a finite number", name, v);
    if (x < lo || x > hi)
        return usage_error(c, "--%s: %g is out of range [%g, %g]", name, x, lo, hi);
    *out = x;
    return 0;
}

int get_list(const command *c, const char *name, double lo, double hi, int integral,
             double *out, int max, int *n)
{
    const char *v = find_opt(c, name)->val;
    *n = 0;
    if (!v)
        return usage_error(c, "option '--%s' is required", name);
    const char *p = v;
    for (;;) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        /* Plain decimal items only: strtod would also skip leading blanks
         * ("4, 8") and read hexadecimal ("0x8"), which the name lists
         * (--attn, --sampler) refuse. */
        int plain = strchr("+-.0123456789", *p) && *p && !memchr(p, 'x', (size_t)(end - p)) &&
                    !memchr(p, 'X', (size_t)(end - p));
        if (end == p || !plain || errno == ERANGE || (*end != ',' && *end != '\0') ||
            !isfinite(x) || (integral && x != floor(x)))
            return usage_error(c, "--%s: '%s' is not a comma-separated list of %s", name, v,
                               integral ? "integers" : "numbers");
        if (x < lo || x > hi)
            return usage_error(c, "--%s: %g is out of range [%g, %g]", name, x, lo, hi);
        if (*n >= max)
            return usage_error(c, "--%s: more than %d values", name, max);
        for (int i = 0; i < *n; i++)
            if (out[i] == x)
                return usage_error(c, "--%s: %g is listed twice", name, x);
        out[(*n)++] = x;
        if (*end == '\0')
            break;
        p = end + 1;
    }
    return 0;
}

int get_int_list(const command *c, const char *name, int lo, int hi, int *out, int max, int *n)
{
    double buf[256];
    if (max > 256)
        max = 256;
    int rc = get_list(c, name, lo, hi, 1, buf, max, n);
    for (int i = 0; !rc && i < *n; i++)
        out[i] = (int)buf[i];
    return rc;
}

/* ------------------------------------------------------------ threads */

/* Without --threads or OMP_NUM_THREADS, a command uses the cores that are
 * idle when it starts, not every core. libgomp's threads spin for a few
 * milliseconds after each parallel region before they sleep (its default
 * wait policy); a thread whose core is busy with another program uses up
 * its share of that core spinning, then waits a time slice behind the
 * other program at the next region, and the whole team waits with it: with
 * one of the two cores busy, two threads ran 3-7x slower than one
 * (issue 14, docs/performance.md "Threads"). OMP_WAIT_POLICY=passive
 * avoids the spinning, but libgomp reads it only as the process starts
 * (setenv in main is too late), and it cost 4-7 % on an idle machine,
 * where the spinning pays off; so the tool keeps libgomp's policy and
 * leaves busy cores alone instead.
 *
 * The count is chosen before the first parallel region. The library
 * computes the same results on any number of threads (its products are
 * split in blocks that do not depend on the count, src/core/core.h), so the
 * choice changes the speed only; it is printed (a line below, and train's
 * header) and recorded (the runs' "threads") all the same. A load that
 * starts later is seen only by retune_threads, where a caller calls it
 * between steps; otherwise --threads 1 is the answer there. */

static char threads_why[128]; /* how the count was chosen, "" for all cores */

static int auto_cpus;      /* CPUs the count is shared out of; 0: the user chose */
static double retune_at;   /* when retune_threads looks next */
static int retune_seen;    /* the count its last look called for, 0 none */
#define RETUNE_S 0.25      /* seconds between retune_threads' looks */

/* The kernel's count of runnable tasks at this moment, the fourth field of
 * /proc/loadavg ("running/total"); -1 if unknown. */
static int runnable_now(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    int running = -1, total = 0;
    if (f && fscanf(f, "%*f %*f %*f %d/%d", &running, &total) != 2)
        running = -1;
    if (f)
        fclose(f);
    return running;
}

/* Runnable tasks besides this one at the start (this thread is the only
 * one of ours). A program computing throughout is runnable at every
 * reading, a shell starting a job or a short-lived helper is not: one
 * reading that shows nobody else settles it at no cost, otherwise the
 * least of three readings a millisecond apart counts. -1 if unknown. */
static int other_runnable(void)
{
    int least = -1;
    for (int i = 0; i < 3 && least != 0; i++) {
        if (i > 0) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        int running = runnable_now();
        if (running < 1)
            return -1;
        if (least < 0 || running - 1 < least)
            least = running - 1;
    }
    return least;
}

/* The default thread count, 0 for libgomp's own (every CPU this process
 * may use): those CPUs less the other runnable tasks, at least 1. The
 * machine-wide count only describes our CPUs when we may use all of them;
 * a process confined to some (taskset, a cpuset) keeps libgomp's default,
 * and so does a run whose start finds nobody else, though retune_threads
 * may change it later. */
static int idle_threads(void)
{
#ifdef _OPENMP
    int cpus = omp_get_max_threads();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus <= 1 || online != cpus)
        return 0;
    int others = other_runnable();
    auto_cpus = cpus;
    retune_at = now_s() + RETUNE_S;
    if (others <= 0)
        return 0;
    snprintf(threads_why, sizeof threads_why, "%d other program%s running on %d cores at start",
             others, others == 1 ? " was" : "s were", cpus);
    return cpus - others > 1 ? cpus - others : 1;
#else
    return 0;
#endif
}

void set_threads(int n)
{
    if (n <= 0)
        return;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    openblas_set_num_threads(n);
}

int threads_in_use(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

const char *threads_note(void) { return threads_why; }

/* Processes of this job on this machine (MPI ranks); see set_local_ranks. */
static int local_ranks = 1;

void set_local_ranks(int n) { local_ranks = n > 1 ? n : 1; }

int apply_threads(const command *c)
{
    int threads = 0, rc;
    threads_why[0] = 0;
    auto_cpus = 0;
    if (!is_set(c, "threads") && local_ranks > 1 && !getenv("OMP_NUM_THREADS")) {
        /* the ranks of one machine share its cores; a fixed count, since
         * the replicas must agree (and they start together, so each would
         * see the cores idle) */
        int cpus = 1;
#ifdef _OPENMP
        cpus = omp_get_num_procs() > 1 ? omp_get_num_procs() : 1;
#endif
        threads = cpus / local_ranks > 0 ? cpus / local_ranks : 1;
        snprintf(threads_why, sizeof threads_why, "%d ranks on this machine share its %d core%s",
                 local_ranks, cpus, cpus == 1 ? "" : "s");
    } else if (is_set(c, "threads")) {
        /* more threads than CPUs only take turns on them (and wait for
         * each other at every barrier) */
        int cpus = 1;
#ifdef _OPENMP
        cpus = omp_get_num_procs() > 1 ? omp_get_num_procs() : 1;
#endif
        if ((rc = get_int(c, "threads", 1, cpus, &threads)))
            return rc;
    } else if (!getenv("OMP_NUM_THREADS") && (threads = idle_threads()) > 0) {
        /* said once, on stderr: fewer threads than cores */
        print_name(stderr, c);
        fprintf(stderr, ": %d thread%s: %s (--threads N to choose)\n", threads,
                threads == 1 ? "" : "s", threads_why);
    }
    set_threads(threads);
    return 0;
}

/* This process's threads that are runnable now (state R in
 * /proc/self/task/N/stat), which the kernel's count includes. */
static int own_runnable(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/self/task/%.20s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[len] = 0;
        const char *p = strrchr(buf, ')'); /* the name may hold anything */
        n += p && p[1] == ' ' && p[2] == 'R';
    }
    closedir(d);
    return n;
}

/* A long run's threads follow the load: while the count is automatic, at
 * most every RETUNE_S, the other runnable tasks are counted again (the
 * kernel's count less our own runnable threads, read before and after it
 * so that a thread of ours going to sleep in between is not taken for
 * another program), and when two looks in a row call for the same new
 * count, it is set. Results do not depend on the count, so switching
 * between steps changes the speed only. */
int retune_threads(void)
{
#ifdef _OPENMP
    double t = now_s();
    if (!auto_cpus || t < retune_at)
        return 0;
    retune_at = t + RETUNE_S;
    int own1 = own_runnable(), running = runnable_now(), own2 = own_runnable();
    if (own1 < 0 || running < 0 || own2 < 0)
        return 0;
    int others = running - (own1 > own2 ? own1 : own2);
    int n = auto_cpus - (others > 0 ? others : 0);
    n = n > 1 ? n : 1;
    if (n == threads_in_use() || n != retune_seen) {
        retune_seen = n == threads_in_use() ? 0 : n;
        return 0;
    }
    retune_seen = 0;
    set_threads(n);
    return 1;
#else
    return 0;
#endif
}

/* ------------------------------------------------------------- clocks */

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void fmt_duration(double s, char *buf, size_t n)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, n, "?");
    else if (s < 60)
        snprintf(buf, n, "%.0fs", s);
    else if (s < 3600)
        snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, n, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
}

void cpu_model(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        char *p = strchr(line, ':');
        if (p) {
            p++;
            while (*p == ' ' || *p == '\t')
                p++;
            p[strcspn(p, "\n")] = 0;
            snprintf(out, len, "%s", p);
        }
        break;
    }
    fclose(f);
}

void machine_desc(char *out, size_t len)
{
    char cpu[160];
    cpu_model(cpu, sizeof cpu);
    for (char *p = cpu; *p; p++) /* a text line, whatever /proc says */
        if ((unsigned char)*p < 32 || *p == 127)
            *p = ' ';
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char *isa = "";
#if defined(__x86_64__) && defined(__GNUC__)
    /* the widest set the kernels' load-time clones can take; feature
     * names both gcc and clang know (not the x86-64-vN levels) */
    __builtin_cpu_init();
    isa = __builtin_cpu_supports("avx512f") ? ", AVX-512"
          : __builtin_cpu_supports("avx2")  ? ", AVX2"
                                            : ", SSE2";
#endif
    const char *blas = openblas_get_corename();
    snprintf(out, len, "%s, %ld cores%s, OpenBLAS %.40s", cpu, cores > 0 ? cores : 1, isa,
             blas && *blas ? blas : "unknown");
}

int reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return 1;
    int bad = fputs("5", f) < 0;
    bad |= fclose(f) != 0;
    return bad;
}

double peak_rss_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        long kb = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
                break;
        fclose(f);
        if (kb >= 0)
            return kb / 1024.0;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        return ru.ru_maxrss / 1024.0; /* kB on Linux */
    return -1.0;
}

FILE *open_csv(const char *path, const char *header)
{
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "%s: cannot open '%s' for writing: %s\n", prog, path, strerror(errno));
    else
        fputs(header, f);
    return f;
}
