/* The command-line option parser shared by the tool and the benchmarks
 * (see opts.h). */
#include "opts.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void openblas_set_num_threads(int); /* from OpenBLAS; its header varies by distro */

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
        if (end == p || errno == ERANGE || (*end != ',' && *end != '\0') || !isfinite(x) ||
            (integral && x != floor(x)))
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

int apply_threads(const command *c)
{
    int threads = 0, rc;
    if (is_set(c, "threads") && (rc = get_int(c, "threads", 1, 1024, &threads)))
        return rc;
    set_threads(threads);
    return 0;
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

FILE *open_csv(const char *path, const char *header)
{
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "%s: cannot open '%s' for writing: %s\n", prog, path, strerror(errno));
    else
        fputs(header, f);
    return f;
}
