/* bench_busy: the boltzattn tool's default thread settings against
 * --threads 1 and --threads 2, on an idle machine and with cores kept busy
 * by a spinning child process (issue 14, "Performance on a busy machine").
 *
 * Each measurement is one whole `boltzattn train` process (fork + exec,
 * wall time from fork to exit), because what is compared is fixed when a
 * process starts: the tool chooses its default thread count then, and
 * libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT (which a configuration
 * may set) in its constructor. Configurations are interleaved (every
 * round runs each configuration once, under each load, starting at a
 * different configuration each round), so a neighbour's compile job slows
 * all columns alike instead of one; the tables give medians and ratios to
 * "best": the fastest median among the configurations that use the tool
 * under test with its own arguments only (no VAR=VALUE, no @PATH), i.e.
 * the best a user of this build gets by choosing --threads.
 *
 * The busy load is bounded: a forked child spinning on the CPU, started
 * just before the measured run (after a short settling pause) and killed
 * with SIGKILL as soon as the run exits. The "late" load starts it --late
 * seconds into the run instead: a load that appears while a run is under
 * way, which a choice made at the start cannot see. A spinner also dies by
 * itself: alarm() ends it after --max-run seconds, and PR_SET_PDEATHSIG
 * kills it if this program dies first. The measured runs get the same
 * parent-death signal.
 *
 * "others" is the CPU (in cores) that processes other than ours used while
 * a run was measured: the machine's busy time from /proc/stat less the
 * CPU time of the run and of the busy child (wait4). It shows how noisy
 * the shared machine was.
 *
 * Exit status: 0 ok, 1 a run failed, 2 bad arguments. */
#define _GNU_SOURCE 1 /* prctl, wait4 */
#include "opts.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#define MAX_CONFIGS 8
#define MAX_WORKS 8
#define MAX_REPS 64
#define MAX_TOKENS 24
#define MAX_RERUNS 4
#define SETTLE_US 100000 /* lets the busy child reach its core before a run */

enum { LOAD_IDLE, LOAD_BUSY, LOAD_LATE, N_LOADS };
static const char *const load_names[N_LOADS] = {"idle", "busy", "late"};

/* The workloads: the commands (the tool's defaults otherwise, so
 * the periodic and final evaluations are included, as a user sees them). */
typedef struct {
    const char *name;
    const char *args;
} workload;
static const workload works[] = {
    {"softmax8", "train --task brackets --attn softmax --T 8 --steps 100"},
    {"softmax16", "train --task brackets --attn softmax --T 16 --steps 100"},
    {"boltzmann8", "train --task brackets --attn boltzmann --T 8 --steps 100"},
    {"boltzmann16", "train --task brackets --attn boltzmann --T 16 --batch 64 --steps 50 "
                    "--eval-every 0 --heldout 256"},
    {"boltzmann20", "train --task brackets --attn boltzmann --T 20 --batch 32 --steps 40 "
                    "--eval-every 0 --heldout 64"},
};
#define N_WORKS (int)(sizeof works / sizeof works[0])

static opt busy_opts[] = {
    {"bin", "PATH", "boltzattn beside this program", "the tool to run", 0, 0},
    {"work", "LIST", "softmax8,softmax16,boltzmann16",
     "workloads: softmax8, softmax16, boltzmann8, boltzmann16, boltzmann20", 0, 0},
    {"configs", "LIST", "default,--threads 1,--threads 2",
     "comma-separated configurations: extra arguments ('default' for none), optionally "
     "after VAR=VALUE environment settings and '@PATH' (another binary)", 0, 0},
    {"reps", "N", "5", "rounds (each runs every configuration once under each load)", 0, 0},
    {"loads", "LIST", "idle,busy",
     "idle, busy (spinning children from before the run) and/or late (from --late seconds "
     "into it)", 0, 0},
    {"late", "S", "0.3", "when the late load starts, after the run", 0, 0},
    {"busy", "N", "1", "spinning children under the busy load", 0, 0},
    {"max-run", "S", "300", "bound on one run; the busy children die after it in any case", 0,
     0},
    {"max-others", "X", "0.3",
     "rerun (up to 4 times) a run during which other processes used more than X cores", 0, 0},
    {"csv", "PATH", NULL, "also write every run as CSV", 0, 0},
    {"quick", NULL, NULL, "smoke test: softmax8 with --steps 5, 1 round", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command busy_cmd = {
    NULL,
    "[--bin PATH] [--work LIST] [--configs LIST] [--reps N] [--loads LIST]\n"
    "                  [--late S] [--busy N] [--max-run S] [--max-others X] [--csv PATH]\n"
    "                  [--quick]\n\n"
    "Wall time of whole 'boltzattn train' runs under each configuration, idle and with\n"
    "cores kept busy by bounded spinning children; medians, and ratios to the best\n"
    "configuration of the tool itself (no environment settings, no other binary).",
    busy_opts};

typedef struct {
    char label[96];
    char *env[MAX_TOKENS];  /* VAR=VALUE, NULL-terminated */
    char *args[MAX_TOKENS]; /* extra arguments, NULL-terminated */
    const char *bin;        /* NULL: --bin */
    char buf[256];
} config;

typedef struct {
    const char *bin, *csv_path;
    int work[MAX_WORKS], nwork;
    config cfg[MAX_CONFIGS];
    int ncfg, reps, busy, max_run, quick;
    double max_others;
    int reruns, noisy; /* runs repeated; runs kept although disturbed */
    int loads[N_LOADS], nloads; /* LOAD_* */
    double late;
} bench_args;

/* One config from its text: tokens split at spaces. 0, or an exit code. */
static int parse_config(const command *c, const char *text, config *cf)
{
    memset(cf, 0, sizeof *cf);
    snprintf(cf->label, sizeof cf->label, "%s", text);
    if (snprintf(cf->buf, sizeof cf->buf, "%s", text) >= (int)sizeof cf->buf)
        return usage_error(c, "--configs: '%s' is too long", text);
    int ne = 0, na = 0;
    for (char *save = NULL, *tok = strtok_r(cf->buf, " ", &save); tok;
         tok = strtok_r(NULL, " ", &save)) {
        if (ne + na + 2 >= MAX_TOKENS)
            return usage_error(c, "--configs: '%s' has too many words", text);
        if (strcmp(tok, "default") == 0) /* "default --steps 400": the tool's choice */
            continue;
        if (tok[0] == '@' && na == 0)
            cf->bin = tok + 1;
        else if (na == 0 && tok[0] != '-' && strchr(tok, '='))
            cf->env[ne++] = tok;
        else
            cf->args[na++] = tok;
    }
    return 0;
}

/* Splits a comma-separated list in place into at most max items. */
static int split_commas(char *s, char **items, int max)
{
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (n < max)
            items[n++] = tok;
        else
            return -1;
    return n;
}

/* The tool beside /proc/self/exe, into buf. */
static const char *default_bin(char *buf, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", buf, cap - 16);
    if (n <= 0)
        return "boltzattn";
    buf[n] = 0;
    char *slash = strrchr(buf, '/');
    snprintf(slash ? slash + 1 : buf, 16, "boltzattn");
    return buf;
}

static int read_lists(const command *c, bench_args *a)
{
    static char wbuf[256], cbuf[1024], lbuf[64];
    char *items[MAX_CONFIGS + 1];
    snprintf(wbuf, sizeof wbuf, "%s", get_str(c, "work"));
    int n = split_commas(wbuf, items, MAX_WORKS);
    if (n <= 0)
        return usage_error(c, "--work: one to %d workloads", MAX_WORKS);
    for (a->nwork = 0; a->nwork < n; a->nwork++) {
        int w = 0;
        while (w < N_WORKS && strcmp(works[w].name, items[a->nwork]))
            w++;
        if (w == N_WORKS)
            return usage_error(c, "--work: unknown workload '%s'", items[a->nwork]);
        a->work[a->nwork] = w;
    }
    snprintf(cbuf, sizeof cbuf, "%s", get_str(c, "configs"));
    if ((a->ncfg = split_commas(cbuf, items, MAX_CONFIGS)) <= 0)
        return usage_error(c, "--configs: one to %d configurations", MAX_CONFIGS);
    for (int i = 0; i < a->ncfg; i++) {
        int rc = parse_config(c, items[i], &a->cfg[i]);
        if (rc)
            return rc;
    }
    snprintf(lbuf, sizeof lbuf, "%s", get_str(c, "loads"));
    if ((n = split_commas(lbuf, items, N_LOADS)) <= 0)
        return usage_error(c, "--loads: one to three of idle, busy, late");
    for (a->nloads = 0; a->nloads < n; a->nloads++) {
        int l = 0;
        while (l < N_LOADS && strcmp(items[a->nloads], load_names[l]))
            l++;
        if (l == N_LOADS)
            return usage_error(c, "--loads: '%s' is not idle, busy or late", items[a->nloads]);
        a->loads[a->nloads] = l;
    }
    return 0;
}

static int read_args(int argc, char **argv, bench_args *a)
{
    static char binbuf[4096];
    const command *c = &busy_cmd;
    int rc = parse_args(c, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc)
        return rc;
    memset(a, 0, sizeof *a);
    a->quick = is_set(c, "quick");
    if (a->quick && !is_set(c, "work"))
        find_opt(c, "work")->val = "softmax8";
    if (a->quick && !is_set(c, "reps"))
        find_opt(c, "reps")->val = "1";
    if ((rc = read_lists(c, a)) || (rc = get_int(c, "reps", 1, MAX_REPS, &a->reps)) ||
        (rc = get_int(c, "busy", 1, 64, &a->busy)) ||
        (rc = get_int(c, "max-run", 1, 3600, &a->max_run)) ||
        (rc = get_double(c, "max-others", 0.0, 1024.0, &a->max_others)) ||
        (rc = get_double(c, "late", 0.0, 3600.0, &a->late)))
        return rc;
    a->bin = is_set(c, "bin") ? get_str(c, "bin") : default_bin(binbuf, sizeof binbuf);
    a->csv_path = get_str(c, "csv");
    return 0;
}

/* --------------------------------------------------------- processes */

/* A child spinning on the CPU until killed, or until max_s have passed. */
static pid_t start_spinner(int max_s)
{
    pid_t parent = getpid(), pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the parent died before prctl */
        _exit(0);
    alarm((unsigned)max_s); /* SIGALRM's default action ends it */
    for (volatile unsigned long x = 0;; x++)
        ;
}

/* Kills a spinner; its CPU seconds into *cpu. 0, or 1 if it had already
 * ended by itself (its bound expired). */
static int stop_spinner(pid_t pid, double *cpu)
{
    int st = 0;
    struct rusage ru;
    kill(pid, SIGKILL);
    while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR)
        ;
    *cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    return !(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* Busy and total jiffies of the whole machine (the "cpu" line). */
static void machine_jiffies(double *busy, double *total)
{
    unsigned long long v[10] = {0};
    *busy = *total = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    for (int i = 0; i < n && i < 8; i++) /* guest time is already in user */
        *total += (double)v[i];
    *busy = *total - (double)v[3] - (double)v[4]; /* less idle and iowait */
}

/* Deletes a run directory (nftw callback). */
static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

typedef struct {
    double wall, cpu, others; /* seconds, seconds, cores */
    int ok;
} run_result;

/* argv of one run: the binary, the workload's words, the config's, --out. */
static int build_argv(const bench_args *a, const config *cf, int w, const char *out,
                      char *wbuf, size_t wcap, char **argv)
{
    int n = 0;
    argv[n++] = (char *)(cf->bin ? cf->bin : a->bin);
    snprintf(wbuf, wcap, "%s", works[w].args);
    for (char *save = NULL, *tok = strtok_r(wbuf, " ", &save); tok && n < 40;
         tok = strtok_r(NULL, " ", &save))
        argv[n++] = tok;
    if (a->quick) {
        argv[n++] = "--steps";
        argv[n++] = "5";
    }
    for (int i = 0; cf->args[i] && n < 44; i++)
        argv[n++] = cf->args[i];
    argv[n++] = "--out";
    argv[n++] = (char *)out;
    argv[n++] = "--quiet";
    argv[n] = NULL;
    return n;
}

/* Runs the tool once (output to /dev/null, stderr kept in errlog). */
static void run_child(char **argv, const config *cf, const char *errlog, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    for (int i = 0; cf->env[i]; i++)
        putenv(cf->env[i]);
    int devnull = open("/dev/null", O_WRONLY), e = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (devnull >= 0)
        dup2(devnull, 1);
    if (e >= 0)
        dup2(e, 2);
    execv(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Waits for the run; under the late load, starts the spinners once it has
 * run --late seconds (none if it ended first). *nspin gets their count. */
static void wait_run(const bench_args *a, pid_t pid, int load, double start, pid_t *spin,
                     int *nspin, int *st, struct rusage *ru, double *end)
{
    *nspin = 0;
    if (load == LOAD_BUSY) /* started before the run */
        *nspin = a->busy;
    while (load == LOAD_LATE && now_s() - start < a->late) {
        if (wait4(pid, st, WNOHANG, ru) == pid) {
            *end = now_s();
            return;
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    if (load == LOAD_LATE)
        for (; *nspin < a->busy; (*nspin)++)
            spin[*nspin] = start_spinner(a->max_run);
    while (wait4(pid, st, 0, ru) < 0 && errno == EINTR)
        ;
    *end = now_s();
}

static run_result run_once(const bench_args *a, const config *cf, int w, int load,
                           const char *tmp)
{
    run_result r = {0, 0, 0, 0};
    char out[4200], errlog[4200], wbuf[512], *argv[48];
    snprintf(out, sizeof out, "%s/run", tmp);
    snprintf(errlog, sizeof errlog, "%s/stderr.txt", tmp);
    build_argv(a, cf, w, out, wbuf, sizeof wbuf, argv);
    pid_t spin[64];
    for (int i = 0; load == LOAD_BUSY && i < a->busy; i++)
        spin[i] = start_spinner(a->max_run);
    if (load == LOAD_BUSY)
        usleep(SETTLE_US);
    double b0, t0, b1, t1, spin_cpu = 0, c, end = 0;
    machine_jiffies(&b0, &t0);
    double start = now_s();
    pid_t parent = getpid(), pid = fork();
    if (pid == 0)
        run_child(argv, cf, errlog, parent);
    int st = 0, expired = 0, nspin = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (pid > 0)
        wait_run(a, pid, load, start, spin, &nspin, &st, &ru, &end);
    r.wall = (pid > 0 ? end : now_s()) - start;
    machine_jiffies(&b1, &t1);
    for (int i = 0; i < nspin; i++)
        expired |= stop_spinner(spin[i], &c), spin_cpu += c;
    r.ok = pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && !expired;
    r.cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
            1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    /* jiffies are 1/100 s (USER_HZ) on Linux; the busy children's CPU is
     * counted over the settling pause too, so use their share in the run */
    double hz = (double)sysconf(_SC_CLK_TCK), cores = (t1 - t0) / hz / r.wall;
    if (t1 > t0 && cores > 0) {
        double spin_in_run =
            load == LOAD_BUSY ? spin_cpu * r.wall / (r.wall + SETTLE_US * 1e-6) : spin_cpu;
        r.others = ((b1 - b0) / hz - r.cpu - spin_in_run) / r.wall;
    }
    if (expired)
        fprintf(stderr, "%s: a busy child ended by itself: raise --max-run\n", prog);
    nftw(out, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return r;
}

/* ---------------------------------------------------------- reporting */

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    double wall[MAX_REPS], cpu[MAX_REPS], others[MAX_REPS];
} samples;

static void print_tables(const bench_args *a, samples (*s)[N_LOADS][MAX_CONFIGS])
{
    for (int li = 0; li < a->nloads; li++) {
        int load = a->loads[li];
        static const char *const title[N_LOADS] = {
            "idle", "busy (spinning children from before each run)",
            "late (spinning children from --late seconds into each run)"};
        printf("\n%s: median wall s (min-max), [median CPU s]\n\n| workload |", title[load]);
        for (int k = 0; k < a->ncfg; k++)
            printf(" %s |", a->cfg[k].label);
        for (int k = 0; k < a->ncfg; k++)
            printf(" %s / best |", a->cfg[k].label);
        printf(" others |\n|---|");
        for (int k = 0; k < 2 * a->ncfg + 1; k++)
            printf("---|");
        printf("\n");
        for (int wi = 0; wi < a->nwork; wi++) {
            double med[MAX_CONFIGS], best = 1e300, oth[MAX_CONFIGS * MAX_REPS];
            int no = 0;
            printf("| %s |", works[a->work[wi]].name);
            for (int k = 0; k < a->ncfg; k++) {
                samples *x = &s[wi][load][k];
                double w[MAX_REPS], cpu[MAX_REPS];
                memcpy(w, x->wall, sizeof w), memcpy(cpu, x->cpu, sizeof cpu);
                for (int r = 0; r < a->reps; r++)
                    oth[no++] = x->others[r];
                double lo = 1e300, hi = 0;
                for (int r = 0; r < a->reps; r++)
                    lo = w[r] < lo ? w[r] : lo, hi = w[r] > hi ? w[r] : hi;
                med[k] = median(w, a->reps);
                if (!a->cfg[k].bin && !a->cfg[k].env[0]) /* a choice the tool offers */
                    best = med[k] < best ? med[k] : best;
                printf(" %.3f (%.2f-%.2f) [%.2f] |", med[k], lo, hi, median(cpu, a->reps));
            }
            for (int k = 0; k < a->ncfg; k++)
                printf(" %.2f |", med[k] / best);
            printf(" %.2f |\n", median(oth, no));
        }
    }
}

static void print_header(const bench_args *a)
{
    char cpu[256];
    double la[3] = {0, 0, 0};
    cpu_model(cpu, sizeof cpu);
    getloadavg(la, 3);
    printf("bench_busy: whole 'boltzattn train' runs, %d round(s) interleaved; busy load: %d "
           "spinning child(ren), each killed after its run\n",
           a->reps, a->busy);
    printf("cpu: %s | online cores: %ld | tool: %s | load average at start: %.2f %.2f %.2f\n",
           cpu, sysconf(_SC_NPROCESSORS_ONLN), a->bin, la[0], la[1], la[2]);
    for (int wi = 0; wi < a->nwork; wi++)
        printf("  %-12s boltzattn %s%s --out TMP --quiet\n", works[a->work[wi]].name,
               works[a->work[wi]].args, a->quick ? " --steps 5" : "");
    const char *vars[] = {"OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                          "OPENBLAS_NUM_THREADS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            printf("  environment: %s=%s (inherited by every run)\n", vars[i], getenv(vars[i]));
    fflush(stdout);
}

/* One round: every workload, load and configuration once; the order of
 * configurations rotates with the round. 0, or 1 after a failed run. */
static int round_once(bench_args *a, int rep, const char *tmp,
                      samples (*s)[N_LOADS][MAX_CONFIGS], FILE *csv)
{
    for (int wi = 0; wi < a->nwork; wi++)
        for (int li = 0; li < a->nloads; li++)
            for (int j = 0; j < a->ncfg; j++) {
                int k = (j + rep) % a->ncfg, load = a->loads[li];
                run_result r = run_once(a, &a->cfg[k], a->work[wi], load, tmp);
                /* a neighbour's burst of work (a compile) distorts one run;
                 * measure it again rather than let it into the medians */
                for (int retry = 0; r.ok && r.others > a->max_others && retry < MAX_RERUNS;
                     retry++, a->reruns++)
                    r = run_once(a, &a->cfg[k], a->work[wi], load, tmp);
                a->noisy += r.ok && r.others > a->max_others;
                if (!r.ok) {
                    fprintf(stderr, "%s: %s, %s, '%s' failed (its stderr: %s/stderr.txt)\n",
                            prog, works[a->work[wi]].name, load_names[load],
                            a->cfg[k].label, tmp);
                    return 1;
                }
                s[wi][load][k].wall[rep] = r.wall;
                s[wi][load][k].cpu[rep] = r.cpu;
                s[wi][load][k].others[rep] = r.others;
                if (csv)
                    fprintf(csv, "%d,%s,%s,%s,%.4f,%.4f,%.3f\n", rep, works[a->work[wi]].name,
                            load_names[load], a->cfg[k].label, r.wall, r.cpu, r.others);
            }
    fprintf(stderr, "%s: round %d of %d done\n", prog, rep + 1, a->reps);
    return 0;
}

int main(int argc, char **argv)
{
    prog = "bench_busy"; /* messages name this program (cli/opts.c) */
    static bench_args a;
    static samples s[MAX_WORKS][N_LOADS][MAX_CONFIGS];
    int rc = read_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (access(a.bin, X_OK))
        return usage_error(&busy_cmd, "cannot run '%s' (--bin)", a.bin);
    FILE *csv = NULL;
    if (a.csv_path && !(csv = open_csv(a.csv_path, "round,workload,load,config,wall_s,cpu_s,"
                                                   "others_cores\n")))
        return EXIT_USAGE;
    char tmp[] = "/tmp/bench_busy.XXXXXX";
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "%s: cannot make a temporary directory: %s\n", prog, strerror(errno));
        return 1;
    }
    print_header(&a);
    for (int rep = 0; rep < a.reps && !rc; rep++)
        rc = round_once(&a, rep, tmp, s, csv);
    if (!rc) {
        print_tables(&a, s);
        double la[3] = {0, 0, 0};
        getloadavg(la, 3);
        printf("\nload average at the end: %.2f %.2f %.2f; others: median CPU (cores) used by "
               "other processes during the runs;\n%d run(s) repeated because others exceeded "
               "%.2f cores, %d kept although they still did\n",
               la[0], la[1], la[2], a.reruns, a.max_others, a.noisy);
        char errlog[64];
        snprintf(errlog, sizeof errlog, "%s/stderr.txt", tmp);
        remove(errlog);
        rmdir(tmp);
    }
    if (csv && fclose(csv) && !rc)
        rc = 1;
    return rc;
}
