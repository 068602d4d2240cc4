/* Helpers shared by the benchmark programs: argument parsing, the clock,
 * the CPU's name. Define BENCH_NAME and MAX_TS before including. */
#ifndef BA_BENCH_COMMON_H
#define BA_BENCH_COMMON_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define EXIT_USAGE 2

static inline int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", BENCH_NAME);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see '%s --help')\n", BENCH_NAME);
    va_end(ap);
    return EXIT_USAGE;
}

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Integer in [lo, hi]; 0 on success. */
static inline int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return 1;
    *out = v;
    return 0;
}

/* Comma-separated integers in [lo, hi]; 0 on success. */
static inline int parse_list(const char *s, long lo, long hi, int *out, int *n)
{
    char buf[512];
    if (strlen(s) >= sizeof buf)
        return 1;
    strcpy(buf, s);
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long v;
        if (*n >= MAX_TS || parse_int(tok, lo, hi, &v))
            return 1;
        out[(*n)++] = (int)v;
    }
    return *n == 0;
}

static inline void cpu_model(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
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
    }
    fclose(f);
}

static inline int omp_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

#endif
