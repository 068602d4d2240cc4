/* The analysis subcommands of the tool:
 *
 *   couplings  the learned couplings J of a boltzmann/coupling checkpoint as
 *              CSV and matrix files, statistics by key distance, and plots;
 *   plot       the figures of an ablation directory (results.csv and the
 *              runs' metrics.jsonl), aggregated over seeds.
 *
 * The numbers are computed and written here; figures are drawn by gnuplot
 * when it is on PATH, from .gp scripts kept next to the data they read so a
 * user can edit and re-run them. The scripts name their files relative to
 * their own directory (gnuplot runs there), so no user path ever appears
 * inside one and none needs quoting. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_VARIANTS 16

/* ------------------------------------------------------------ helpers */

/* snprintf into a PATH_LEN buffer; -1 (after printing) if it does not fit. */
static int vmkpath(const char *cmd, char *buf, const char *fmt, va_list ap)
{
    int n = vsnprintf(buf, PATH_LEN, fmt, ap);
    if (n < 0 || n >= PATH_LEN) {
        fprintf(stderr, "%s %s: path too long (%d bytes)\n", prog, cmd, n);
        return -1;
    }
    return 0;
}

int __attribute__((format(printf, 3, 4)))
mkpath(const char *cmd, char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vmkpath(cmd, buf, fmt, ap);
    va_end(ap);
    return rc;
}

/* Output files are written as PATH.tmp and renamed over PATH by close_out,
 * so an interrupted plot, couplings or dqa run leaves each file whole (old
 * or new), never cut short. */
static int tmp_name(const char *cmd, const char *path, char *tmp)
{
    return mkpath(cmd, tmp, "%s.tmp", path);
}

FILE *open_out(const char *cmd, const char *path)
{
    char tmp[PATH_LEN];
    if (tmp_name(cmd, path, tmp))
        return NULL;
    FILE *f = fopen(tmp, "w");
    if (!f)
        fprintf(stderr, "%s %s: cannot write %s: %s\n", prog, cmd, tmp, strerror(errno));
    return f;
}

FILE *__attribute__((format(printf, 3, 4)))
open_outf(const char *cmd, char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vmkpath(cmd, path, fmt, ap);
    va_end(ap);
    return rc ? NULL : open_out(cmd, path);
}

/* Closes an output file of open_out and puts it in place; 0, or 1 after
 * printing a write error (the temporary file is removed then). */
int close_out(const char *cmd, FILE *f, const char *path)
{
    char tmp[PATH_LEN];
    int bad = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad)
        bad = 1, e = errno;
    if (tmp_name(cmd, path, tmp))
        return 1;
    if (!bad && rename(tmp, path) != 0)
        bad = 1, e = errno;
    if (bad) {
        fprintf(stderr, "%s %s: cannot write %s: %s\n", prog, cmd, path, strerror(e));
        unlink(tmp);
        return 1;
    }
    return 0;
}

/* Running mean, variance (Welford), min and max. sd is the sample standard
 * deviation (n - 1), 0 for a single value. */
typedef struct {
    long n;
    double mean, m2, min, max;
} stats;

static void stats_add(stats *s, double x)
{
    if (s->n == 0)
        s->min = s->max = x;
    s->n++;
    double d = x - s->mean;
    s->mean += d / s->n;
    s->m2 += d * (x - s->mean);
    s->min = fmin(s->min, x);
    s->max = fmax(s->max, x);
}

static double stats_sd(const stats *s) { return s->n > 1 ? sqrt(s->m2 / (s->n - 1)) : 0.0; }

/* 1 if an executable `gnuplot` is on PATH. */
int have_gnuplot(void)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        return 0;
    char dir[PATH_LEN], file[PATH_LEN + 16];
    while (*path) {
        size_t len = strcspn(path, ":");
        if (len < sizeof dir) {
            memcpy(dir, path, len);
            dir[len] = '\0';
            if (len == 0)
                strcpy(dir, ".");
            snprintf(file, sizeof file, "%s/gnuplot", dir);
            struct stat st;
            if (stat(file, &st) == 0 && S_ISREG(st.st_mode) && access(file, X_OK) == 0)
                return 1;
        }
        path += len;
        if (*path == ':')
            path++;
    }
    return 0;
}

const char *const no_gnuplot_fix = "(apt-get install gnuplot-nox)";

/* Runs `gnuplot SCRIPT` inside dir (no shell). 0, or 1 after printing. */
int run_gnuplot(const char *cmd, const char *dir, const char *script)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s %s: cannot start gnuplot: %s\n", prog, cmd, strerror(errno));
        return 1;
    }
    if (pid == 0) {
        if (chdir(dir) != 0)
            _exit(126);
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) { /* gnuplot's stdout is ours; its warnings stay on stderr */
            dup2(fd, STDOUT_FILENO);
            close(fd);
        }
        char *args[] = {"gnuplot", (char *)script, NULL};
        execvp("gnuplot", args);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "%s %s: waiting for gnuplot: %s\n", prog, cmd, strerror(errno));
            return 1;
        }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFEXITED(status))
        fprintf(stderr, "%s %s: gnuplot failed on %s/%s (exit %d)\n", prog, cmd, dir, script,
                WEXITSTATUS(status));
    else
        fprintf(stderr, "%s %s: gnuplot killed by signal %d on %s/%s\n", prog, cmd,
                WIFSIGNALED(status) ? WTERMSIG(status) : 0, dir, script);
    return 1;
}

/* The opening of every script: terminal (pngcairo when this gnuplot has it,
 * else libgd png) and output file, relative to the script's directory. */
void gp_header(FILE *f, const char *script, const char *png, int w, int h)
{
    fprintf(f,
            "# Written by boltzattn. Re-run from this directory: gnuplot %s\n"
            "set encoding utf8\n"
            "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n"
            "    set terminal pngcairo size %d,%d enhanced font \"sans,11\"\n"
            "} else {\n"
            "    set terminal png size %d,%d enhanced\n"
            "}\n"
            "set output '%s'\n",
            script, w, h, w, h, png);
}

/* Variant names come from files: allow only plain tokens, which are safe
 * inside gnuplot strings and file names. */
static int plain_token(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n >= max)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-' || *s == '+' || *s == '.'))
            return 0;
    return 1;
}

/* Fixed order and colours of the known variants; others follow by name. */
static int variant_rank(const char *v)
{
    static const char *const known[] = {"softmax", "sigmoid", "boltzmann", "coupling"};
    for (int i = 0; i < 4; i++)
        if (strcmp(v, known[i]) == 0)
            return i;
    return 4;
}

static int variant_cmp(const char *a, const char *b)
{
    int ra = variant_rank(a), rb = variant_rank(b);
    return ra != rb ? (ra < rb ? -1 : 1) : strcmp(a, b);
}

static const char *variant_color(const char *v, int idx)
{
    static const char *const known[] = {"#1f77b4", "#ff7f0e", "#d62728", "#2ca02c"};
    static const char *const other[] = {"#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf"};
    int r = variant_rank(v);
    return r < 4 ? known[r] : other[idx % 5];
}

static int variant_point(const char *v)
{
    static const int pts[] = {7, 5, 9, 13, 11};
    return pts[variant_rank(v)];
}

/* ---------------------------------------------------------- couplings */

#define MAX_CKPTS 256

static opt couplings_opts[] = {
    {"ckpt", "FILE", NULL,
     "boltzmann or coupling checkpoint (model.safetensors); give it again for more runs of one "
     "configuration, e.g. the seeds of a grid cell",
     0, 0},
    {"out", "DIR", "couplings/ next to the (first) checkpoint", "output directory", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command couplings_cmd = {
    "couplings",
    "--ckpt FILE [--ckpt FILE ...] [--out DIR]\n\n"
    "Writes the learned couplings J of a boltzmann or coupling checkpoint to DIR:\n"
    "J_l<l>_h<h>.csv (j,k,J for each used pair j < k), J_l<l>_h<h>_matrix.txt (T x T),\n"
    "distance.csv (statistics by key distance k - j, per head and over all), and,\n"
    "when gnuplot is on PATH, J_heatmap_l<l>_h<h>.png and J_vs_distance.png from .gp\n"
    "scripts kept in DIR. Prints mean J by distance next to the paper's sign pattern.\n\n"
    "Several checkpoints (the same task, T, layers and heads: the seeds of one\n"
    "configuration) are summarised together: the pair files and heatmaps hold J\n"
    "averaged over the runs (the CSV adds its sd over runs), distance.csv pools\n"
    "the pairs of every run, and distance_runs.csv gives per distance the mean\n"
    "over runs of each run's mean J, its sd and 95 % interval over runs (Student\n"
    "t) and how many runs have it positive; the plot's error bars are that\n"
    "interval. runs.txt lists the checkpoints.",
    couplings_opts};

/* Long-form CSV (one row per used pair j < k) and the T x T matrix of one
 * head. J: (T,T) mean over the runs, J[j*T + k]; sd: (T,T) sd over runs, or
 * NULL for a single run. */
static int write_head_files(const char *cmd, const char *dir, int l, int h, const double *J,
                            const double *sd, int T)
{
    char path[PATH_LEN];
    FILE *f = open_outf(cmd, path, "%s/J_l%d_h%d.csv", dir, l, h);
    if (!f)
        return 1;
    fprintf(f, sd ? "j,k,J,sd\n" : "j,k,J\n");
    for (int j = 0; j < T; j++)
        for (int k = j + 1; k < T; k++) {
            fprintf(f, "%d,%d,%.9g", j, k, J[(size_t)j * T + k]);
            if (sd)
                fprintf(f, ",%.9g", sd[(size_t)j * T + k]);
            fprintf(f, "\n");
        }
    if (close_out(cmd, f, path))
        return 1;

    if (!(f = open_outf(cmd, path, "%s/J_l%d_h%d_matrix.txt", dir, l, h)))
        return 1;
    fprintf(f, "# couplings J of layer %d, head %d%s: row j, column k (0-based key positions); "
               "J_jk for j < k, 0 where unused (k <= j)\n",
            l, h, sd ? " (mean over runs)" : "");
    for (int j = 0; j < T; j++)
        for (int k = 0; k < T; k++)
            fprintf(f, "%.9g%s", k > j ? J[(size_t)j * T + k] : 0.0, k + 1 < T ? " " : "\n");
    return close_out(cmd, f, path);
}

static int write_heatmap_gp(const char *cmd, const char *dir, int l, int h, const ba_config *cfg,
                            int runs, double absmax)
{
    int T = cfg->block_size;
    char path[PATH_LEN], script[64], png[64], what[48] = "";
    snprintf(script, sizeof script, "J_heatmap_l%d_h%d.gp", l, h);
    snprintf(png, sizeof png, "J_heatmap_l%d_h%d.png", l, h);
    if (runs > 1)
        snprintf(what, sizeof what, ", mean of %d runs", runs);
    FILE *f = open_outf(cmd, path, "%s/%s", dir, script);
    if (!f)
        return 1;
    gp_header(f, script, png, 900, 650);
    double r = absmax > 0 ? absmax : 1.0;
    fprintf(f,
            "set title \"couplings J_{jk}, layer %d, head %d (%s, %s, T=%d%s)\"\n"
            "set xlabel \"key j\"\n"
            "set ylabel \"key k\"\n"
            "set cblabel \"J_{jk}\"\n"
            "set size ratio -1\n"
            "set xrange [-0.5:%g]\n"
            "set yrange [-0.5:%g]\n"
            "set xtics %d\n"
            "set ytics %d\n"
            "set cbrange [%.6g:%.6g]\n"
            "set palette defined (-1 \"#2166ac\", 0 \"#f7f7f7\", 1 \"#b2182b\")\n"
            "# unused cells (k <= j) show the grey background\n"
            "set object 1 rectangle from graph 0,0 to graph 1,1 behind fillcolor rgb "
            "\"#d9d9d9\" fillstyle solid noborder\n"
            "# matrix file: row j, column k; drawn with x = j, y = k\n"
            "plot 'J_l%d_h%d_matrix.txt' matrix using 2:1:($2 < $1 ? $3 : NaN) with image "
            "notitle",
            l, h, ba_task_name(cfg->task), ba_attn_name(cfg->attn), T, what, T - 0.5, T - 0.5,
            T <= 32 ? 1 : T / 16, T <= 32 ? 1 : T / 16, -r, r, l, h);
    if (T <= 12) /* small enough to print the values in the cells */
        fprintf(f,
                ", \\\n     'J_l%d_h%d_matrix.txt' matrix using 2:1:($2 < $1 ? "
                "sprintf(\"%%.2f\", $3) : \"\") with labels font \",10\" notitle",
                l, h);
    fprintf(f, "\n");
    return close_out(cmd, f, path);
}

static int write_distance_gp(const char *cmd, const char *dir, const ba_config *cfg, int T,
                             int L, int H, int runs, double absmax)
{
    char path[PATH_LEN];
    FILE *f = open_outf(cmd, path, "%s/J_vs_distance.gp", dir);
    if (!f)
        return 1;
    gp_header(f, "J_vs_distance.gp", "J_vs_distance.png", 900, 650);
    char what[48] = "";
    if (runs > 1)
        snprintf(what, sizeof what, ", %d runs", runs);
    fprintf(f,
            "set datafile separator \",\"\n"
            "set title \"mean coupling J by key distance (%s, %s, T=%d, %d layer%s x %d "
            "head%s%s)\"\n"
            "set xlabel \"key distance d = k - j\"\n"
            "set ylabel \"coupling J_{jk}\"\n"
            "set xrange [0.5:%g]\n"
            "set xtics %d\n"
            "set grid\n"
            "set key outside bottom center horizontal\n",
            ba_task_name(cfg->task), ba_attn_name(cfg->attn), T, L, L == 1 ? "" : "s", H,
            H == 1 ? "" : "s", what, T - 0.5, T <= 33 ? 1 : T / 16);
    if (absmax == 0) /* all J zero: give the flat line a range */
        fprintf(f, "set yrange [-1:1]\n");
    /* The paper's sign pattern (spec section 1) as shaded bands. */
    if (T - 1 >= 2)
        fprintf(f,
                "set object 1 rectangle from 1.5, graph 0 to %g, graph 1 behind fillcolor rgb "
                "\"#fbe4e4\" fillstyle solid noborder\n"
                "set label 1 \"paper: J > 0\" at %g, graph 0.04 center textcolor rgb "
                "\"#b2182b\"\n",
                fmin(4.5, T - 0.5), (1.5 + fmin(4.5, T - 0.5)) / 2);
    if (T - 1 >= 6)
        fprintf(f,
                "set object 2 rectangle from 5.5, graph 0 to graph 1, graph 1 behind fillcolor "
                "rgb \"#e3ecf7\" fillstyle solid noborder\n"
                "set label 2 \"paper: J < 0\" at %g, graph 0.04 center textcolor rgb "
                "\"#2166ac\"\n",
                (5.5 + T - 0.5) / 2);
    fprintf(f, "plot 0 with lines dashtype 2 linecolor rgb \"black\" title \"J = 0\", \\\n");
    if (runs > 1)
        /* error bars over seeds: the spread that decides a sign */
        fprintf(f,
                "     'distance_runs.csv' using 1:3:5:6 with yerrorlines linewidth 2 "
                "pointtype 7 linecolor rgb \"#d62728\" title \"mean over %d runs, 95 %% "
                "interval over runs\"",
                runs);
    else
        fprintf(f,
                "     'distance.csv' using (strcol(1) eq \"all\" ? $3 : NaN):5:6 with "
                "yerrorlines linewidth 2 pointtype 7 linecolor rgb \"#d62728\" "
                "title \"mean ± sd over all pairs%s\"",
                L * H > 1 ? ", layers and heads" : "");
    static const char *const head_colors[8] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
                                               "#8c564b", "#e377c2", "#7f7f7f", "#17becf"};
    if (L * H > 1 && L * H <= 8)
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++)
                fprintf(f,
                        ", \\\n     'distance.csv' using ((strcol(1) eq \"%d\" && strcol(2) eq "
                        "\"%d\") ? $3 : NaN):5 with linespoints dashtype 2 linewidth 1.2 "
                        "pointtype %d linecolor rgb \"%s\" title \"layer %d, head %d\"",
                        l, h, 4 + 2 * ((l * H + h) % 6), head_colors[(l * H + h) % 8], l, h);
    fprintf(f, "\n");
    return close_out(cmd, f, path);
}

static int write_distance_row(FILE *f, const char *layer, const char *head, int d,
                              const stats *s)
{
    return fprintf(f, "%s,%s,%d,%ld,%.9g,%.9g,%.9g,%.9g\n", layer, head, d, s->n, s->mean,
                   stats_sd(s), s->min, s->max) < 0;
}

/* The couplings of one or more checkpoints of the same shape, accumulated
 * as they are loaded (only one model is held at a time). */
typedef struct {
    const ba_config *cfg0; /* first checkpoint's config (owned by model0) */
    ba_model *model0;
    const char *path0; /* first checkpoint's path */
    int L, H, T, runs;
    stats *pair;    // (L,H,T,T) J_jk over runs
    stats *dist;    // (L,H,T) J at distance d, pooled over pairs and runs
    stats *all;     // (T) the same over all layers and heads
    double *runmean; // (runs,T) each run's mean J at distance d
} couplings_acc;

static void couplings_acc_free(couplings_acc *a)
{
    free(a->pair);
    free(a->dist);
    free(a->all);
    free(a->runmean);
    ba_model_free(a->model0);
}

/* Adds the checkpoint at path as run number r. Returns 0, else an exit code
 * after printing which file and which value is wrong. */
static int couplings_add(const char *cmd, couplings_acc *a, const char *path, int r)
{
    char err[BA_ERR_LEN];
    ba_model *m;
    int st = ba_checkpoint_load(path, &m, err);
    if (st)
        return fail_lib(cmd, st, err, input_status(st));
    const ba_config *cfg = ba_model_config(m);
    int code = 0;
    if (cfg->attn != BA_ATTN_BOLTZMANN && cfg->attn != BA_ATTN_COUPLING) {
        code = usage_error(cmd,
                           "%s is a %s model: it has no couplings J (only boltzmann and "
                           "coupling models do)",
                           path, ba_attn_name(cfg->attn));
        goto out;
    }
    if (r == 0) {
        a->L = cfg->n_layer, a->H = cfg->n_head, a->T = cfg->block_size;
        size_t lht = (size_t)a->L * a->H * a->T;
        a->pair = calloc(lht * a->T, sizeof *a->pair);
        a->dist = calloc(lht, sizeof *a->dist);
        a->all = calloc((size_t)a->T, sizeof *a->all);
        a->runmean = calloc((size_t)a->runs * a->T, sizeof *a->runmean);
        if (!a->pair || !a->dist || !a->all || !a->runmean) {
            fprintf(stderr, "%s %s: out of memory\n", prog, cmd);
            code = 1;
            goto out;
        }
    } else if (cfg->task != a->cfg0->task || cfg->n_layer != a->L || cfg->n_head != a->H ||
               cfg->block_size != a->T) {
        code = usage_error(cmd,
                           "%s (%s, T=%d, %d layers x %d heads) does not match %s (%s, T=%d, "
                           "%d layers x %d heads): give checkpoints of one configuration",
                           path, ba_task_name(cfg->task), cfg->block_size, cfg->n_layer,
                           cfg->n_head, a->path0, ba_task_name(a->cfg0->task), a->T, a->L,
                           a->H);
        goto out;
    }
    int L = a->L, H = a->H, T = a->T;
    const ba_real *params = ba_model_params(m);
    stats *mine = calloc((size_t)T, sizeof *mine); /* this run, by distance */
    if (!mine) {
        fprintf(stderr, "%s %s: out of memory\n", prog, cmd);
        code = 1;
        goto out;
    }
    for (int l = 0; l < L && !code; l++) {
        char name[64];
        snprintf(name, sizeof name, "blocks.%d.attn.J", l);
        int idx = ba_model_find_tensor(m, name);
        ba_tensor_info ti;
        if (idx < 0 || ba_model_tensor(m, idx, &ti) || ti.ndim != 3 || ti.shape[0] != H ||
            ti.shape[1] != T || ti.shape[2] != T) {
            fprintf(stderr, "%s %s: %s: tensor %s missing or not of shape [%d,%d,%d]\n", prog,
                    cmd, path, name, H, T, T);
            code = 2;
            break;
        }
        for (int h = 0; h < H; h++) {
            const ba_real *J = params + ti.offset + (size_t)h * T * T; // (T,T)
            size_t lh = (size_t)l * H + h;
            for (int j = 0; j < T; j++)
                for (int k = j + 1; k < T; k++) {
                    double x = J[(size_t)j * T + k];
                    stats_add(&a->pair[(lh * T + j) * T + k], x);
                    stats_add(&a->dist[lh * T + (k - j)], x);
                    stats_add(&a->all[k - j], x);
                    stats_add(&mine[k - j], x);
                }
        }
    }
    for (int d = 0; d < T; d++)
        a->runmean[(size_t)r * T + d] = mine[d].mean;
    free(mine);
out:
    if (r == 0 && !code) {
        a->model0 = m, a->cfg0 = cfg, a->path0 = path;
        return 0;
    }
    ba_model_free(m);
    return code;
}

/* distance_runs.csv: per distance, the spread over runs of each run's mean
 * J (runs > 1). Fills s[d] for the printed table. */
static int write_distance_runs(const char *cmd, const char *dir, const couplings_acc *a,
                               ba_summary *s, int *positive)
{
    char path[PATH_LEN];
    FILE *f = open_outf(cmd, path, "%s/distance_runs.csv", dir);
    if (!f)
        return 1;
    double *x = malloc((size_t)a->runs * sizeof *x);
    if (!x) {
        fclose(f);
        fprintf(stderr, "%s %s: out of memory\n", prog, cmd);
        return 1;
    }
    fprintf(f, "distance,runs,mean,sd,ci95_lo,ci95_hi,positive_runs\n");
    for (int d = 1; d < a->T; d++) {
        positive[d] = 0;
        for (int r = 0; r < a->runs; r++) {
            x[r] = a->runmean[(size_t)r * a->T + d];
            positive[d] += x[r] > 0;
        }
        s[d] = ba_summarize(x, a->runs);
        fprintf(f, "%d,%d,%.9g,%.9g,%.9g,%.9g,%d\n", d, a->runs, s[d].mean, s[d].sd,
                s[d].mean - s[d].ci95, s[d].mean + s[d].ci95, positive[d]);
    }
    free(x);
    return close_out(cmd, f, path);
}

static int write_runs_txt(const char *cmd, const char *dir, const char **ckpts, int n)
{
    char path[PATH_LEN];
    FILE *f = open_outf(cmd, path, "%s/runs.txt", dir);
    if (!f)
        return 1;
    for (int r = 0; r < n; r++)
        fprintf(f, "%s\n", ckpts[r]);
    return close_out(cmd, f, path);
}

int cmd_couplings(int argc, char **argv)
{
    const command *c = &couplings_cmd;
    int rc = parse_opts(c, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *ckpts[MAX_CKPTS];
    int n = get_repeated(c, argc, argv, "ckpt", ckpts, MAX_CKPTS);
    if (n < 0)
        return -n;
    if (n == 0)
        return usage_error(c->cmd, "option '--ckpt' is required");
    char dir[PATH_LEN];
    if (find_opt(c, "out")->set) {
        const char *o = get_str(c, "out");
        if (!*o)
            return usage_error(c->cmd, "--out must not be empty");
        if (mkpath(c->cmd, dir, "%s", o))
            return EXIT_USAGE;
    } else {
        const char *slash = strrchr(ckpts[0], '/');
        if (mkpath(c->cmd, dir, "%.*scouplings", slash ? (int)(slash - ckpts[0] + 1) : 0,
                   ckpts[0]))
            return EXIT_USAGE;
    }

    couplings_acc a = {0};
    a.runs = n;
    double *Jm = NULL, *Js = NULL;
    ba_summary *over = NULL;
    int *positive = NULL;
    int code = 0;
    for (int r = 0; r < n && !code; r++)
        code = couplings_add(c->cmd, &a, ckpts[r], r);
    if (code)
        goto done;
    const ba_config *cfg = a.cfg0;
    int L = a.L, H = a.H, T = a.T;
    Jm = calloc((size_t)T * T, sizeof *Jm);
    Js = calloc((size_t)T * T, sizeof *Js);
    over = calloc((size_t)T, sizeof *over);
    positive = calloc((size_t)T, sizeof *positive);
    char err[BA_ERR_LEN];
    if (!Jm || !Js || !over || !positive) {
        fprintf(stderr, "%s %s: out of memory\n", prog, c->cmd);
        code = 1;
        goto done;
    }
    double absmax = 0; /* colour range: the largest |J| shown */
    for (size_t i = 0; i < (size_t)L * H * T * T; i++)
        if (a.pair[i].n)
            absmax = fmax(absmax, fabs(a.pair[i].mean));

    if (make_dirs(dir, err)) {
        fprintf(stderr, "%s %s: %s\n", prog, c->cmd, err);
        code = 1;
        goto done;
    }
    char path[PATH_LEN];
    for (int l = 0; l < L && !code; l++)
        for (int h = 0; h < H && !code; h++) {
            const stats *p = a.pair + ((size_t)l * H + h) * T * T; // (T,T)
            for (size_t i = 0; i < (size_t)T * T; i++)
                Jm[i] = p[i].mean, Js[i] = stats_sd(&p[i]);
            code = write_head_files(c->cmd, dir, l, h, Jm, n > 1 ? Js : NULL, T) ||
                   write_heatmap_gp(c->cmd, dir, l, h, cfg, n, absmax);
        }
    if (code)
        goto done;
    FILE *f = open_outf(c->cmd, path, "%s/distance.csv", dir);
    if (!f) {
        code = 1;
        goto done;
    }
    fprintf(f, "layer,head,distance,n,mean,sd,min,max\n");
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            char ls[16], hs[16];
            snprintf(ls, sizeof ls, "%d", l);
            snprintf(hs, sizeof hs, "%d", h);
            for (int d = 1; d < T; d++)
                write_distance_row(f, ls, hs, d, &a.dist[((size_t)l * H + h) * T + d]);
        }
    for (int d = 1; d < T; d++)
        write_distance_row(f, "all", "all", d, &a.all[d]);
    if ((code = close_out(c->cmd, f, path)))
        goto done;
    if (n > 1 && (code = write_distance_runs(c->cmd, dir, &a, over, positive)))
        goto done;
    if ((code = write_runs_txt(c->cmd, dir, ckpts, n)))
        goto done;
    if ((code = write_distance_gp(c->cmd, dir, cfg, T, L, H, n, absmax)))
        goto done;

    /* The table, and the paper's sign pattern next to ours. */
    if (n == 1)
        printf("couplings of %s: ", ckpts[0]);
    else
        printf("couplings of %d runs (%s ...): ", n, ckpts[0]);
    printf("%s %s, T=%d, %d layer%s x %d head%s\n", ba_task_name(cfg->task),
           ba_attn_name(cfg->attn), T, L, L == 1 ? "" : "s", H, H == 1 ? "" : "s");
    int pos24 = 0, n24 = 0, neg6 = 0, n6 = 0, sure24 = 0, sure6 = 0;
    if (n == 1) {
        printf("mean J by key distance d = k - j (pairs j < k over all layers and heads):\n");
        printf("%4s %6s %10s %9s %9s %9s  %s\n", "d", "n", "mean", "sd", "min", "max", "sign");
    } else {
        printf("mean J by key distance d = k - j: each run's mean over its pairs, layers and "
               "heads, then mean, sd and 95 %% interval over the %d runs:\n", n);
        printf("%4s %10s %9s %21s %9s\n", "d", "mean", "sd", "95 % interval", "runs > 0");
    }
    for (int d = 1; d < T; d++) {
        double mean = n == 1 ? a.all[d].mean : over[d].mean;
        if (n == 1) {
            const stats *s = &a.all[d];
            printf("%4d %6ld %+10.4f %9.4f %+9.4f %+9.4f  %c\n", d, s->n, s->mean, stats_sd(s),
                   s->min, s->max, mean > 0 ? '+' : mean < 0 ? '-' : '0');
        } else {
            const ba_summary *s = &over[d];
            printf("%4d %+10.4f %9.4f  [%+8.4f, %+8.4f] %6d/%d\n", d, s->mean, s->sd,
                   s->mean - s->ci95, s->mean + s->ci95, positive[d], n);
        }
        if (d >= 2 && d <= 4) {
            n24++, pos24 += mean > 0;
            sure24 += n > 1 && over[d].mean - over[d].ci95 > 0;
        }
        if (d >= 6) {
            n6++, neg6 += mean < 0;
            sure6 += n > 1 && over[d].mean + over[d].ci95 < 0;
        }
    }
    if (T < 2)
        printf("(T = %d: no pairs j < k)\n", T);
    printf("paper (spec section 1): J > 0 for d = 2..4, J < 0 for d >= 6\n");
    printf("%s: d = 2..4: ", n == 1 ? "this checkpoint" : "these runs");
    if (n24) {
        printf("%d of %d positive", pos24, n24);
        if (n > 1)
            printf(" (%d with the interval above 0)", sure24);
    } else {
        printf("none (T = %d)", T);
    }
    printf("; d >= 6: ");
    if (n6) {
        printf("%d of %d negative", neg6, n6);
        if (n > 1)
            printf(" (%d with the interval below 0)", sure6);
        printf("\n");
    } else {
        printf("none (T = %d has d <= %d)\n", T, T - 1);
    }
    printf("wrote %s/J_l*_h*.csv, J_l*_h*_matrix.txt, distance.csv%s, runs.txt and .gp "
           "scripts\n",
           dir, n > 1 ? ", distance_runs.csv" : "");

    if (!have_gnuplot()) {
        fprintf(stderr, "gnuplot not found: CSV written, plots skipped %s\n", no_gnuplot_fix);
        goto done;
    }
    int bad = 0;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            char script[64];
            snprintf(script, sizeof script, "J_heatmap_l%d_h%d.gp", l, h);
            bad |= run_gnuplot(c->cmd, dir, script);
        }
    if (T >= 2)
        bad |= run_gnuplot(c->cmd, dir, "J_vs_distance.gp");
    if (bad)
        code = 1;
    else
        printf("plots: %s/J_heatmap_l*_h*.png%s\n", dir, T >= 2 ? ", J_vs_distance.png" : "");

done:
    free(Jm);
    free(Js);
    free(over);
    free(positive);
    couplings_acc_free(&a);
    return code;
}

/* --------------------------------------------------------------- plot */

static opt plot_opts[] = {
    {"curves-T", "T", "the largest T", "learning curves of the runs at this T", 0, 0},
    {"curves-C", "C", "the largest C at that T", "learning curves of the runs at this width",
     0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command plot_cmd = {
    "plot",
    "DIR [--curves-T T] [--curves-C C]\n\n"
    "Redraws the figures of an ablation directory: DIR/results.csv (one row per run)\n"
    "and DIR/runs/*/metrics.jsonl (learning curves). Writes aggregated .dat files and\n"
    "gnuplot scripts to DIR/plots/ (replacing the .dat and .gp files there) and the\n"
    "figures (PNG, mean ± sd over seeds) to DIR/: ppl_vs_T.png (charlm), acc_vs_T.png\n"
    "(brackets), width_T<T>.png (when several C), learning_curves.png (the largest T\n"
    "and C unless chosen). Without gnuplot only the data and scripts are written.",
    plot_opts};

/* One (task, variant, T, C, ffn) cell of results.csv, over seeds. The value
 * is in plot units: perplexity (charlm) or accuracy in % (brackets). */
typedef struct {
    ba_task task;
    char variant[32];
    int T, C, ffn;
    stats s;
} group;

/* One validation point of one run's metrics.jsonl. */
typedef struct {
    ba_task task;
    char variant[32];
    int T, C, ffn;
    long step;
    double v;
} cpoint;

/* The order of plotted series: task, variant, FFN first, then C and T. */
static int series_cmp(ba_task ta, const char *va, int ffna, int Ca, int Ta, ba_task tb,
                      const char *vb, int ffnb, int Cb, int Tb)
{
    if (ta != tb)
        return ta < tb ? -1 : 1;
    int v = variant_cmp(va, vb);
    if (v)
        return v;
    if (ffna != ffnb)
        return ffna > ffnb ? -1 : 1; /* ffn=1 first */
    if (Ca != Cb)
        return Ca < Cb ? -1 : 1;
    return Ta < Tb ? -1 : Ta > Tb;
}

static int group_cmp(const void *pa, const void *pb)
{
    const group *a = pa, *b = pb;
    return series_cmp(a->task, a->variant, a->ffn, a->C, a->T, b->task, b->variant, b->ffn, b->C,
                      b->T);
}

/* Within a series, by step. */
static int cpoint_cmp(const void *pa, const void *pb)
{
    const cpoint *a = pa, *b = pb;
    int c = series_cmp(a->task, a->variant, a->ffn, a->C, a->T, b->task, b->variant, b->ffn, b->C,
                       b->T);
    if (c)
        return c;
    return a->step < b->step ? -1 : a->step > b->step;
}

static int parse_int_field(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi)
        return -1;
    *out = (int)x;
    return 0;
}

/* Splits one CSV line in place (double-quoted fields with "" escapes).
 * Returns the field count, or -1 for a bad quote, max + 1 for too many. */
static int split_csv(char *s, char **fields, int max)
{
    int n = 0;
    for (;;) {
        if (n == max)
            return max + 1;
        char *w = s;
        fields[n] = w;
        if (*s == '"') {
            s++;
            for (;;) {
                if (*s == '\0')
                    return -1;
                if (*s == '"') {
                    if (s[1] == '"') {
                        *w++ = '"';
                        s += 2;
                        continue;
                    }
                    s++;
                    break;
                }
                *w++ = *s++;
            }
            if (*s != ',' && *s != '\0')
                return -1;
        } else {
            while (*s && *s != ',')
                s++;
            w = s;
        }
        n++;
        if (*s == '\0') {
            *w = '\0';
            return n;
        }
        *w = '\0';
        s++;
    }
}

/* Reads DIR/results.csv into groups. 0, or an exit code after printing. */
static int read_results(const char *cmd, const char *path, group **out, int *nout,
                        long *nrows, long *nskipped)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s %s: cannot read %s: %s\n", prog, cmd, path, strerror(errno));
        return 2;
    }
    enum { F_TASK, F_VARIANT, F_T, F_C, F_FFN, F_SEED, F_METRIC, F_VALUE, NREQ };
    static const char *const names[NREQ] = {"task", "variant", "T",      "C",
                                            "ffn",  "seed",    "metric", "value"};
    int col[NREQ], ncol = 0, code = 0, ng = 0, cap = 0;
    int col_sampler = -1, col_shots = -1; /* optional: sampled rows (ablate --sampler) */
    group *g = NULL;
    char *line = NULL, *fields[65];
    size_t lcap = 0;
    long lineno = 0;
    *nrows = *nskipped = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (lineno > 1 && len == 0)
            continue;
        int n = split_csv(line, fields, 64);
        if (n < 0 || n > 64) {
            fprintf(stderr, "%s %s: %s:%ld: %s\n", prog, cmd, path, lineno,
                    n < 0 ? "unbalanced double quote" : "more than 64 fields");
            code = 2;
            break;
        }
        if (lineno == 1) {
            ncol = n;
            for (int r = 0; r < NREQ && !code; r++) {
                col[r] = -1;
                for (int i = 0; i < n; i++)
                    if (strcmp(fields[i], names[r]) == 0)
                        col[r] = i;
                if (col[r] < 0) {
                    fprintf(stderr,
                            "%s %s: %s:1: the header lacks column '%s' (expected "
                            "task,variant,T,C,ffn,seed,steps,metric,value,...)\n",
                            prog, cmd, path, names[r]);
                    code = 2;
                }
            }
            if (code)
                break;
            for (int i = 0; i < n; i++) {
                if (strcmp(fields[i], "sampler") == 0)
                    col_sampler = i;
                if (strcmp(fields[i], "shots") == 0)
                    col_shots = i;
            }
            continue;
        }
        if (n != ncol) {
            fprintf(stderr, "%s %s: %s:%ld: %d fields, the header has %d\n", prog, cmd, path,
                    lineno, n, ncol);
            code = 2;
            break;
        }
        group k;
        memset(&k, 0, sizeof k);
        const char *task = fields[col[F_TASK]], *variant = fields[col[F_VARIANT]];
        const char *metric = fields[col[F_METRIC]], *value = fields[col[F_VALUE]];
        int bad = -1;
        char terr[BA_ERR_LEN];
        if (ba_task_parse(task, &k.task, terr))
            bad = F_TASK;
        else if (!plain_token(variant, sizeof k.variant))
            bad = F_VARIANT;
        else if (parse_int_field(fields[col[F_T]], 1, 1000000, &k.T))
            bad = F_T;
        else if (parse_int_field(fields[col[F_C]], 1, 1000000000, &k.C))
            bad = F_C;
        else if (parse_int_field(fields[col[F_FFN]], 0, 1, &k.ffn))
            bad = F_FFN;
        if (bad >= 0) {
            fprintf(stderr, "%s %s: %s:%ld: bad %s '%s'%s\n", prog, cmd, path, lineno, names[bad],
                    fields[col[bad]],
                    bad == F_TASK      ? " (expected charlm or brackets)"
                    : bad == F_VARIANT ? " (expected a name of letters, digits, _ - + .)"
                    : bad == F_FFN     ? " (expected 0 or 1)"
                                       : " (expected a positive integer)");
            code = 2;
            break;
        }
        strcpy(k.variant, variant);
        /* A sampled run is its own variant: VARIANT-KIND-S<shots>. */
        if (col_sampler >= 0 && strcmp(fields[col_sampler], "exact") != 0 &&
            fields[col_sampler][0]) {
            char key[96];
            snprintf(key, sizeof key, "%s-%s-S%s", variant, fields[col_sampler],
                     col_shots >= 0 ? fields[col_shots] : "?");
            if (!plain_token(key, sizeof k.variant)) {
                fprintf(stderr, "%s %s: %s:%ld: bad sampler '%s' or shots\n", prog, cmd, path,
                        lineno, fields[col_sampler]);
                code = 2;
                break;
            }
            strcpy(k.variant, key);
        }
        const char *want = k.task == BA_TASK_CHARLM ? "val_ppl" : "accuracy";
        if (strcmp(metric, want) != 0) {
            fprintf(stderr, "%s %s: %s:%ld: metric '%s' for task %s, expected '%s'\n", prog,
                    cmd, path, lineno, metric, task, want);
            code = 2;
            break;
        }
        (*nrows)++;
        /* A run without a result (failed, or still running) has an empty or
         * non-finite value: left out of the aggregates. */
        char *end;
        double v = strtod(value, &end);
        if (!*value || !isfinite(v)) {
            if (*value && *end) {
                fprintf(stderr, "%s %s: %s:%ld: value '%s' is not a number\n", prog, cmd, path,
                        lineno, value);
                code = 2;
                break;
            }
            (*nskipped)++;
            continue;
        }
        if (*end) {
            fprintf(stderr, "%s %s: %s:%ld: value '%s' is not a number\n", prog, cmd, path,
                    lineno, value);
            code = 2;
            break;
        }
        if (k.task == BA_TASK_BRACKETS && (v < 0 || v > 1)) {
            fprintf(stderr, "%s %s: %s:%ld: accuracy %s is not a fraction in [0, 1]\n", prog,
                    cmd, path, lineno, value);
            code = 2;
            break;
        }
        if (k.task == BA_TASK_CHARLM && v <= 0) {
            fprintf(stderr, "%s %s: %s:%ld: perplexity %s is not positive\n", prog, cmd, path,
                    lineno, value);
            code = 2;
            break;
        }
        if (k.task == BA_TASK_BRACKETS)
            v *= 100;
        int i;
        for (i = 0; i < ng; i++)
            if (g[i].task == k.task && g[i].T == k.T && g[i].C == k.C && g[i].ffn == k.ffn &&
                strcmp(g[i].variant, k.variant) == 0)
                break;
        if (i == ng) {
            if (ng == cap) {
                int nc = cap ? 2 * cap : 16;
                group *ngp = realloc(g, sizeof *g * nc);
                if (!ngp) {
                    fprintf(stderr, "%s %s: out of memory\n", prog, cmd);
                    code = 1;
                    break;
                }
                g = ngp, cap = nc;
            }
            g[ng++] = k;
        }
        stats_add(&g[i].s, v);
    }
    if (!code && ferror(f)) {
        fprintf(stderr, "%s %s: error reading %s: %s\n", prog, cmd, path, strerror(errno));
        code = 2;
    }
    if (!code && lineno == 0) {
        fprintf(stderr, "%s %s: %s:1: empty file, expected the header line\n", prog, cmd, path);
        code = 2;
    }
    if (!code && *nrows == 0) {
        fprintf(stderr, "%s %s: %s:%ld: no result rows after the header\n", prog, cmd, path,
                lineno + 1);
        code = 2;
    }
    free(line);
    fclose(f);
    if (code) {
        free(g);
        return code;
    }
    if (ng)
        qsort(g, ng, sizeof *g, group_cmp);
    *out = g;
    *nout = ng;
    return 0;
}

/* Reads the eval and final points of one metrics.jsonl. Problems are
 * warnings (a run may still be writing its file); 1 only when out of
 * memory. The log is append-only and not rewritten atomically (docs/
 * design.md, Reliability): a kill can leave its last record torn, without
 * its newline. Such a final fragment is no record and is ignored quietly,
 * like a record still being written; an unparsable line with its newline
 * is damage and is reported. */
static int read_metrics(const char *cmd, const char *path, cpoint **pts, int *np, int *cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char *line = NULL;
    size_t lcap = 0;
    long lineno = 0;
    int have_cfg = 0, code = 0;
    cpoint proto;
    memset(&proto, 0, sizeof proto);
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        cJSON *o = cJSON_Parse(line);
        if (!o) {
            if (line[len - 1] != '\n')
                break; /* a torn last record */
            fprintf(stderr, "%s %s: warning: %s:%ld: not JSON, line skipped\n", prog, cmd, path,
                    lineno);
            continue;
        }
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
        const char *e = cJSON_IsString(ev) ? ev->valuestring : "";
        if (strcmp(e, "config") == 0) {
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "config");
            const cJSON *task = cJSON_GetObjectItemCaseSensitive(c, "task");
            const cJSON *attn = cJSON_GetObjectItemCaseSensitive(c, "attn");
            const cJSON *T = cJSON_GetObjectItemCaseSensitive(c, "block_size");
            const cJSON *C = cJSON_GetObjectItemCaseSensitive(c, "n_embd");
            const cJSON *ffn = cJSON_GetObjectItemCaseSensitive(c, "ffn");
            char terr[BA_ERR_LEN];
            if (cJSON_IsString(task) && !ba_task_parse(task->valuestring, &proto.task, terr) &&
                cJSON_IsString(attn) && plain_token(attn->valuestring, sizeof proto.variant) &&
                cJSON_IsNumber(T) && T->valuedouble >= 1 && T->valuedouble <= 1e6 &&
                cJSON_IsNumber(C) && C->valuedouble >= 1 && C->valuedouble <= 1e9 &&
                (cJSON_IsBool(ffn) || cJSON_IsNumber(ffn))) {
                strcpy(proto.variant, attn->valuestring);
                /* a sampled run: VARIANT-KIND-S<shots>, as in read_results */
                const cJSON *sp = cJSON_GetObjectItemCaseSensitive(c, "sampler");
                const cJSON *kind = cJSON_GetObjectItemCaseSensitive(sp, "kind");
                const cJSON *shots = cJSON_GetObjectItemCaseSensitive(sp, "shots");
                char key[96];
                if (cJSON_IsString(kind) && strcmp(kind->valuestring, "exact") != 0 &&
                    cJSON_IsNumber(shots) &&
                    snprintf(key, sizeof key, "%s-%s-S%d", attn->valuestring, kind->valuestring,
                             (int)shots->valuedouble) > 0 &&
                    plain_token(key, sizeof proto.variant))
                    strcpy(proto.variant, key);
                proto.T = (int)T->valuedouble;
                proto.C = (int)C->valuedouble;
                proto.ffn = cJSON_IsBool(ffn) ? cJSON_IsTrue(ffn) : ffn->valuedouble != 0;
                have_cfg = 1;
            } else {
                fprintf(stderr, "%s %s: warning: %s:%ld: config record lacks task, attn, "
                                "block_size, n_embd or ffn; run skipped\n",
                        prog, cmd, path, lineno);
                cJSON_Delete(o);
                break;
            }
        } else if (strcmp(e, "eval") == 0 || strcmp(e, "final") == 0) {
            const cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
            const cJSON *val = cJSON_GetObjectItemCaseSensitive(
                o, proto.task == BA_TASK_CHARLM ? "val_ppl" : "val_acc");
            if (!have_cfg) {
                fprintf(stderr, "%s %s: warning: %s:%ld: %s record before the config; run "
                                "skipped\n",
                        prog, cmd, path, lineno, e);
                cJSON_Delete(o);
                break;
            }
            if (cJSON_IsNumber(step) && cJSON_IsNumber(val) && isfinite(val->valuedouble)) {
                if (*np == *cap) {
                    int nc = *cap ? 2 * *cap : 64;
                    cpoint *p = realloc(*pts, sizeof **pts * nc);
                    if (!p) {
                        fprintf(stderr, "%s %s: out of memory\n", prog, cmd);
                        cJSON_Delete(o);
                        code = 1;
                        break;
                    }
                    *pts = p, *cap = nc;
                }
                cpoint q = proto;
                q.step = (long)step->valuedouble;
                q.v = val->valuedouble * (proto.task == BA_TASK_BRACKETS ? 100 : 1);
                (*pts)[(*np)++] = q;
            }
        }
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    return code;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* All runs' points from DIR/runs/ * /metrics.jsonl (a missing runs/ is no
 * error). */
static int read_runs(const char *cmd, const char *dir, cpoint **pts, int *np, int *nruns)
{
    char path[PATH_LEN];
    *pts = NULL, *np = 0, *nruns = 0;
    if (mkpath(cmd, path, "%s/runs", dir))
        return 1;
    DIR *d = opendir(path);
    if (!d)
        return 0;
    char **names = NULL;
    int nn = 0, ncap = 0, code = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (nn == ncap) {
            int nc = ncap ? 2 * ncap : 32;
            char **p = realloc(names, sizeof *names * nc);
            if (!p) {
                code = 1;
                break;
            }
            names = p, ncap = nc;
        }
        if (!(names[nn] = strdup(e->d_name))) {
            code = 1;
            break;
        }
        nn++;
    }
    closedir(d);
    if (code)
        fprintf(stderr, "%s %s: out of memory\n", prog, cmd);
    if (nn)
        qsort(names, nn, sizeof *names, str_cmp);
    for (int i = 0; i < nn && !code; i++) {
        if (mkpath(cmd, path, "%s/runs/%s/metrics.jsonl", dir, names[i])) {
            code = 1;
            break;
        }
        if (access(path, R_OK) != 0)
            continue;
        int before = *np;
        code = read_metrics(cmd, path, pts, np, &cap);
        *nruns += *np > before;
    }
    for (int i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    return code;
}

/* One panel of a figure: the blocks (one per variant, in `index` order) of
 * one .dat file whose first four columns are x, n, mean, sd. */
typedef struct {
    char dat[128];
    char title[160];
    char ylabel[64];
    int logy;
    double ylo, yhi; /* extent of mean -+ sd over the panel's points */
    int nvar;
    char var[MAX_VARIANTS][32];
} panel;

static void panel_init(panel *p)
{
    memset(p, 0, sizeof *p);
    p->ylo = INFINITY, p->yhi = -INFINITY;
}

/* Widens the panel's y extent by one point's mean -+ sd (on a log axis the
 * lower end stays positive: the smallest value when mean - sd is not). */
static void panel_extent(panel *p, const stats *s)
{
    double sd = stats_sd(s), lo = s->mean - sd;
    if (p->logy && lo <= 0)
        lo = s->min;
    if (!p->logy || lo > 0)
        p->ylo = fmin(p->ylo, lo);
    p->yhi = fmax(p->yhi, s->mean + sd);
}

typedef struct {
    const char *script; /* NAME.gp in plots/ */
    const char *png;    /* written as ../PNG */
    char title[256]; /* first line */
    char note[256];  /* second line (with the panel title when there is one panel) */
    const char *xlabel;
    int logx;        /* log2 x axis (C) */
    int spread;      /* offset the variants' x slightly so error bars do not overlap */
    int share_y;     /* one y range for all panels (they show the same metric) */
    char xtics[512]; /* "(4, 8, 12)" or "" for automatic */
    double mingap;   /* smallest gap between x values (additive) or ratio (log) */
    double xlo, xhi; /* the x values' extent (xlo > xhi: automatic) */
} figure;

/* Distinct x values (sorted) as a gnuplot tics list, and their smallest
 * gap or ratio. */
static void set_xtics(figure *fg, const int *xs, int n)
{
    fg->xtics[0] = '\0';
    fg->mingap = fg->logx ? 2 : 1;
    fg->xlo = 1, fg->xhi = 0;
    if (n <= 0)
        return;
    fg->xlo = xs[0], fg->xhi = xs[n - 1];
    if (n > 24)
        return;
    size_t used = 0;
    double gap = INFINITY;
    for (int i = 0; i < n; i++) {
        int w = snprintf(fg->xtics + used, sizeof fg->xtics - used, "%s%d", i ? ", " : "(",
                         xs[i]);
        if (w < 0 || (size_t)w >= sizeof fg->xtics - used) {
            fg->xtics[0] = '\0';
            return;
        }
        used += (size_t)w;
        if (i)
            gap = fmin(gap, fg->logx ? (double)xs[i] / xs[i - 1] : (double)(xs[i] - xs[i - 1]));
    }
    if (used + 2 > sizeof fg->xtics) {
        fg->xtics[0] = '\0';
        return;
    }
    strcat(fg->xtics, ")");
    if (isfinite(gap))
        fg->mingap = gap;
}

/* Tics of a log y axis at 1-1.5-2-3-4-5-7 x 10^k (1-2-5 when that makes too
 * many), so a range within one decade still gets labels. */
static void log_tics(FILE *f, double lo, double hi)
{
    static const double fine[] = {1, 1.5, 2, 3, 4, 5, 7}, coarse[] = {1, 2, 5};
    if (!(lo > 0 && hi > lo))
        return;
    for (int pass = 0; pass < 2; pass++) {
        const double *m = pass ? coarse : fine;
        int nm = pass ? 3 : 7, n = 0;
        for (int k = (int)floor(log10(lo)); k <= (int)ceil(log10(hi)); k++)
            for (int i = 0; i < nm; i++)
                n += m[i] * pow(10, k) >= lo && m[i] * pow(10, k) <= hi;
        if (n > 12 && !pass)
            continue;
        fprintf(f, "set ytics (");
        int first = 1;
        for (int k = (int)floor(log10(lo)); k <= (int)ceil(log10(hi)); k++)
            for (int i = 0; i < nm; i++) {
                double v = m[i] * pow(10, k);
                if (v >= lo && v <= hi) {
                    fprintf(f, "%s%.6g", first ? "" : ", ", v);
                    first = 0;
                }
            }
        fprintf(f, ")\n");
        return;
    }
}

static int write_figure(const char *cmd, const char *plots, const figure *fg, const panel *p,
                        int np)
{
    char path[PATH_LEN], png[PATH_LEN];
    if (mkpath(cmd, png, "../%s", fg->png))
        return 1;
    FILE *f = open_outf(cmd, path, "%s/%s", plots, fg->script);
    if (!f)
        return 1;
    int cols = np <= 1 ? 1 : 2, rows = (np + cols - 1) / cols;
    gp_header(f, fg->script, png, 900 * cols, 650 * rows + (np > 1 ? 40 : 0));
    fprintf(f,
            "set xlabel \"%s\"\n"
            "set grid\n"
            "set key outside right top vertical\n"
            "set bars small\n",
            fg->xlabel);
    if (fg->logx)
        fprintf(f, "set logscale x 2\n");
    if (fg->xtics[0])
        fprintf(f, "set xtics %s\n", fg->xtics);
    if (fg->xlo > fg->xhi) {
        fprintf(f, "set offsets graph 0.03, graph 0.03, 0, 0\n");
    } else if (fg->logx) {
        double r = fg->xhi > fg->xlo ? pow(fg->xhi / fg->xlo, 0.08) : 1.5;
        fprintf(f, "set xrange [%.6g:%.6g]\n", fg->xlo / r, fg->xhi * r);
    } else {
        double pad = fg->xhi > fg->xlo ? 0.06 * (fg->xhi - fg->xlo) : 1;
        fprintf(f, "set xrange [%.6g:%.6g]\n", fg->xlo - pad, fg->xhi + pad);
    }
    double slo = INFINITY, shi = -INFINITY;
    for (int i = 0; i < np; i++)
        slo = fmin(slo, p[i].ylo), shi = fmax(shi, p[i].yhi);
    if (np > 1)
        fprintf(f, "set multiplot layout %d,%d title \"%s\\n%s\" font \",13\"\n", rows, cols,
                fg->title, fg->note);
    for (int i = 0; i < np; i++) {
        const panel *q = &p[i];
        if (np > 1)
            fprintf(f, "set title \"%s\"\n", q->title);
        else
            fprintf(f, "set title \"%s\\n%s; %s\"\n", fg->title, q->title, fg->note);
        fprintf(f, "set ylabel \"%s\"\n%s\nset ytics autofreq\n", q->ylabel,
                q->logy ? "set logscale y" : "unset logscale y");
        double lo = fg->share_y ? slo : q->ylo, hi = fg->share_y ? shi : q->yhi;
        if (!(lo <= hi && isfinite(lo) && isfinite(hi)))
            fprintf(f, "set autoscale y\n");
        else if (q->logy) {
            double r = hi > lo ? pow(hi / lo, 0.06) : 1.1;
            fprintf(f, "set yrange [%.6g:%.6g]\n", lo / r, hi * r);
            log_tics(f, lo / r, hi * r);
        } else {
            double pad = hi > lo ? 0.06 * (hi - lo) : fmax(0.05 * fabs(hi), 1);
            fprintf(f, "set yrange [%.6g:%.6g]\n", lo - pad, hi + pad);
        }
        fprintf(f, "plot ");
        for (int v = 0; v < q->nvar; v++) {
            double rel = q->nvar > 1 ? v - (q->nvar - 1) / 2.0 : 0;
            char x[64];
            if (!fg->spread)
                snprintf(x, sizeof x, "1");
            else if (fg->logx)
                snprintf(x, sizeof x, "($1*%.6g)", pow(fg->mingap, 0.04 * rel));
            else
                snprintf(x, sizeof x, "($1%+.6g)", 0.04 * rel * fg->mingap);
            fprintf(f,
                    "%s'%s' index %d using %s:3:4 with yerrorlines linewidth 2 pointtype %d "
                    "pointsize 1.2 linecolor rgb \"%s\" title \"%s\" noenhanced",
                    v ? ", \\\n     " : "", q->dat, v, x, variant_point(q->var[v]),
                    variant_color(q->var[v], v), q->var[v]);
        }
        fprintf(f, "\n");
    }
    if (np > 1)
        fprintf(f, "unset multiplot\n");
    return close_out(cmd, f, path);
}

static const char *metric_label(ba_task t)
{
    return t == BA_TASK_CHARLM ? "validation perplexity" : "held-out accuracy (%)";
}

/* Writes one .dat of the groups of `task` with ffn, where x runs over T (at
 * C = fixC) or over C (at T = fixT); fills the panel's variant list. */
static int write_series(const char *cmd, const char *plots, const group *g, int ng, ba_task task,
                        int ffn, int fixC, int fixT, panel *pn)
{
    char path[PATH_LEN];
    FILE *f = open_outf(cmd, path, "%s/%s", plots, pn->dat);
    if (!f)
        return 1;
    int xT = fixT < 0;
    fprintf(f, "# %s %s, %s, %s = %d; one block per variant (gnuplot index)\n",
            ba_task_name(task), xT ? "vs T" : "vs C", ffn ? "with FFN" : "without FFN",
            xT ? "C" : "T", xT ? fixC : fixT);
    fprintf(f, "# columns: %s n mean sd min max  (%s over seeds; sd: sample standard "
               "deviation)\n",
            xT ? "T" : "C", metric_label(task));
    pn->nvar = 0;
    for (int i = 0; i < ng;) {
        int j = i;
        while (j < ng && g[j].task == g[i].task && strcmp(g[j].variant, g[i].variant) == 0)
            j++;
        int any = 0;
        for (int k = i; k < j; k++) {
            const group *q = &g[k];
            if (q->task != task || q->ffn != ffn || (xT ? q->C != fixC : q->T != fixT))
                continue;
            if (!any) {
                if (pn->nvar == MAX_VARIANTS)
                    break;
                fprintf(f, "%s# variant %s\n", pn->nvar ? "\n\n" : "", q->variant);
                snprintf(pn->var[pn->nvar++], sizeof pn->var[0], "%s", q->variant);
                any = 1;
            }
            fprintf(f, "%d %ld %.9g %.9g %.9g %.9g\n", xT ? q->T : q->C, q->s.n, q->s.mean,
                    stats_sd(&q->s), q->s.min, q->s.max);
            panel_extent(pn, &q->s);
        }
        i = j;
    }
    return close_out(cmd, f, path);
}

static int int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* Sorted distinct values of x (in place); returns the count. */
static int distinct(int *x, int n)
{
    if (n == 0)
        return 0;
    qsort(x, n, sizeof *x, int_cmp);
    int m = 1;
    for (int i = 1; i < n; i++)
        if (x[i] != x[m - 1])
            x[m++] = x[i];
    return m;
}

/* Adds a figure's script name to the list of scripts to run. */
typedef struct {
    char script[64];
    char png[64];
} job;

/* ppl_vs_T / acc_vs_T: the largest C of the task, one panel per ffn. */
static int figure_vs_T(const char *cmd, const char *plots, const group *g, int ng, ba_task task,
                       int *scratch, job *jobs, int *njobs)
{
    int Cmax = 0, nT = 0, has[2] = {0, 0}, nC = 0;
    for (int i = 0; i < ng; i++)
        if (g[i].task == task) {
            Cmax = g[i].C > Cmax ? g[i].C : Cmax;
            scratch[nC++] = g[i].C;
        }
    if (!Cmax)
        return 0;
    nC = distinct(scratch, nC);
    for (int i = 0; i < ng; i++)
        if (g[i].task == task && g[i].C == Cmax) {
            scratch[nT++] = g[i].T;
            has[g[i].ffn] = 1;
        }
    nT = distinct(scratch, nT);
    job *jb = &jobs[(*njobs)++];
    snprintf(jb->script, sizeof jb->script, "%s_vs_T.gp",
             task == BA_TASK_CHARLM ? "ppl" : "acc");
    snprintf(jb->png, sizeof jb->png, "%s_vs_T.png", task == BA_TASK_CHARLM ? "ppl" : "acc");
    figure fg = {jb->script, jb->png, "", "", "block size T (context length)", 0, 1, 1, "", 1,
                 1, 0};
    snprintf(fg.title, sizeof fg.title, "%s: %s vs T at C=%d", ba_task_name(task),
             metric_label(task), Cmax);
    snprintf(fg.note, sizeof fg.note, "mean ± sd over seeds%s",
             nC > 1 ? "; the largest C run (others: width plots)" : "");
    set_xtics(&fg, scratch, nT);
    panel pn[2];
    int np = 0;
    for (int ffn = 1; ffn >= 0; ffn--) {
        if (!has[ffn])
            continue;
        panel *p = &pn[np++];
        panel_init(p);
        snprintf(p->dat, sizeof p->dat, "%s_C%d_ffn%d_vs_T.dat", ba_task_name(task), Cmax, ffn);
        snprintf(p->title, sizeof p->title, "%s", ffn ? "with FFN" : "without FFN (attention only)");
        snprintf(p->ylabel, sizeof p->ylabel, "%s", metric_label(task));
        if (write_series(cmd, plots, g, ng, task, ffn, Cmax, -1, p))
            return 1;
    }
    return write_figure(cmd, plots, &fg, pn, np);
}

/* width_T<T>.png for every T of the task run at several C. */
static int figures_vs_C(const char *cmd, const char *plots, const group *g, int ng,
                        ba_task task, int both_tasks, int *scratch, int *scratch2, job *jobs,
                        int *njobs, int maxjobs)
{
    int nT = 0;
    for (int i = 0; i < ng; i++)
        if (g[i].task == task)
            scratch[nT++] = g[i].T;
    nT = distinct(scratch, nT);
    for (int t = 0; t < nT; t++) {
        int T = scratch[t], nC = 0, has[2] = {0, 0};
        for (int i = 0; i < ng; i++)
            if (g[i].task == task && g[i].T == T) {
                scratch2[nC++] = g[i].C;
                has[g[i].ffn] = 1;
            }
        nC = distinct(scratch2, nC);
        if (nC < 2 || *njobs >= maxjobs)
            continue;
        job *jb = &jobs[(*njobs)++];
        if (both_tasks) {
            snprintf(jb->script, sizeof jb->script, "width_%s_T%d.gp", ba_task_name(task), T);
            snprintf(jb->png, sizeof jb->png, "width_%s_T%d.png", ba_task_name(task), T);
        } else {
            snprintf(jb->script, sizeof jb->script, "width_T%d.gp", T);
            snprintf(jb->png, sizeof jb->png, "width_T%d.png", T);
        }
        figure fg = {jb->script, jb->png, "", "", "embedding width C", 1, 1, 1, "", 2, 1, 0};
        snprintf(fg.title, sizeof fg.title, "%s: %s vs width C at T=%d", ba_task_name(task),
                 metric_label(task), T);
        snprintf(fg.note, sizeof fg.note, "mean ± sd over seeds");
        set_xtics(&fg, scratch2, nC);
        panel pn[2];
        int np = 0;
        for (int ffn = 1; ffn >= 0; ffn--) {
            if (!has[ffn])
                continue;
            panel *p = &pn[np++];
            panel_init(p);
            snprintf(p->dat, sizeof p->dat, "%s_T%d_ffn%d_vs_C.dat", ba_task_name(task), T, ffn);
            snprintf(p->title, sizeof p->title, "%s",
                     ffn ? "with FFN" : "without FFN (attention only)");
            snprintf(p->ylabel, sizeof p->ylabel, "%s", metric_label(task));
            if (write_series(cmd, plots, g, ng, task, ffn, -1, T, p))
                return 1;
        }
        if (write_figure(cmd, plots, &fg, pn, np))
            return 1;
    }
    return 0;
}

/* learning_curves.png: per task, the runs at the largest T (and the largest
 * C there), or at Treq / Creq when those are not 0 (Creq alone: the largest
 * T that has runs of that width), one panel per (task,
 * ffn), one line per variant averaged over seeds at each step. A task
 * without runs at the requested T / C gets no panel; *npanels says how many
 * were drawn. */
static int figure_curves(const char *cmd, const char *plots, cpoint *pts, int np, int Treq,
                         int Creq, job *jobs, int *njobs, int *npanels)
{
    *npanels = 0;
    if (np == 0)
        return 0;
    qsort(pts, np, sizeof *pts, cpoint_cmp);
    panel pn[4];
    int npan = 0;
    for (int t = 0; t < 2; t++) {
        ba_task task = (ba_task)t;
        int Tsel = 0, Csel = 0, has[2] = {0, 0};
        for (int i = 0; i < np; i++)
            if (pts[i].task == task && (!Creq || pts[i].C == Creq) &&
                (Treq ? pts[i].T == Treq : pts[i].T > Tsel))
                Tsel = pts[i].T;
        for (int i = 0; i < np; i++)
            if (pts[i].task == task && pts[i].T == Tsel &&
                (Creq ? pts[i].C == Creq : pts[i].C > Csel))
                Csel = pts[i].C;
        if (!Tsel || !Csel)
            continue;
        for (int i = 0; i < np; i++)
            if (pts[i].task == task && pts[i].T == Tsel && pts[i].C == Csel)
                has[pts[i].ffn] = 1;
        for (int ffn = 1; ffn >= 0; ffn--) {
            if (!has[ffn])
                continue;
            panel *p = &pn[npan++];
            panel_init(p);
            snprintf(p->dat, sizeof p->dat, "curves_%s_T%d_C%d_ffn%d.dat", ba_task_name(task),
                     Tsel, Csel, ffn);
            snprintf(p->title, sizeof p->title, "%s, T=%d, C=%d%s", ba_task_name(task), Tsel,
                     Csel, ffn ? "" : ", without FFN");
            snprintf(p->ylabel, sizeof p->ylabel, "%s",
                     task == BA_TASK_CHARLM ? "validation perplexity"
                                            : "validation accuracy (%)");
            p->logy = task == BA_TASK_CHARLM;
            char path[PATH_LEN];
            FILE *f = open_outf(cmd, path, "%s/%s", plots, p->dat);
            if (!f)
                return 1;
            fprintf(f, "# learning curves %s, T=%d, C=%d, %s: eval records of "
                       "runs/*/metrics.jsonl (the last point: the final evaluation on the "
                       "whole set)\n"
                       "# columns: step n mean sd min max  (%s over the runs' seeds)\n",
                    ba_task_name(task), Tsel, Csel, ffn ? "with FFN" : "without FFN",
                    p->ylabel);
            for (int i = 0; i < np;) {
                const cpoint *a = &pts[i];
                int j = i;
                while (j < np && pts[j].task == a->task && pts[j].T == a->T &&
                       pts[j].C == a->C && pts[j].ffn == a->ffn &&
                       strcmp(pts[j].variant, a->variant) == 0)
                    j++;
                if (a->task == task && a->T == Tsel && a->C == Csel && a->ffn == ffn &&
                    p->nvar < MAX_VARIANTS) {
                    fprintf(f, "%s# variant %s\n", p->nvar ? "\n\n" : "", a->variant);
                    snprintf(p->var[p->nvar++], sizeof p->var[0], "%s", a->variant);
                    for (int k = i; k < j;) {
                        stats s = {0, 0, 0, 0, 0};
                        int e = k;
                        while (e < j && pts[e].step == pts[k].step)
                            stats_add(&s, pts[e++].v);
                        fprintf(f, "%ld %ld %.9g %.9g %.9g %.9g\n", pts[k].step, s.n, s.mean,
                                stats_sd(&s), s.min, s.max);
                        panel_extent(p, &s);
                        k = e;
                    }
                }
                i = j;
            }
            if (close_out(cmd, f, path))
                return 1;
        }
    }
    *npanels = npan;
    if (!npan)
        return 0;
    job *jb = &jobs[(*njobs)++];
    snprintf(jb->script, sizeof jb->script, "learning_curves.gp");
    snprintf(jb->png, sizeof jb->png, "learning_curves.png");
    figure fg = {jb->script, jb->png, "validation metric during training",
                 "mean ± sd over seeds; last point: final evaluation, whole set",
                 "training step", 0, 0, 0, "", 1, 1, 0};
    return write_figure(cmd, plots, &fg, pn, npan);
}

static int write_summary(const char *cmd, const char *plots, const group *g, int ng)
{
    char path[PATH_LEN];
    FILE *f = open_outf(cmd, path, "%s/summary.dat", plots);
    if (!f)
        return 1;
    fprintf(f, "# every (task, variant, T, C, ffn) of results.csv over seeds; value: "
               "perplexity (charlm) or accuracy in %% (brackets); sd: sample standard "
               "deviation\n"
               "# task variant T C ffn n mean sd min max\n");
    for (int i = 0; i < ng; i++)
        fprintf(f, "%s %s %d %d %d %ld %.9g %.9g %.9g %.9g\n", ba_task_name(g[i].task),
                g[i].variant, g[i].T, g[i].C, g[i].ffn, g[i].s.n, g[i].s.mean,
                stats_sd(&g[i].s), g[i].s.min, g[i].s.max);
    return close_out(cmd, f, path);
}

int cmd_plot(int argc, char **argv)
{
    const command *c = &plot_cmd;
    const char *dir = NULL; /* the one positional argument */
    int rc = parse_args(c, argc, argv, &dir, 1, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    int Treq = 0, Creq = 0;
    if ((find_opt(c, "curves-T")->set && get_int(c, "curves-T", 1, 64, &Treq)) ||
        (find_opt(c, "curves-C")->set && get_int(c, "curves-C", 1, 1 << 16, &Creq)))
        return EXIT_USAGE;
    if (!dir || !*dir)
        return usage_error(c->cmd, "the ablation directory DIR is required");
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        fprintf(stderr, "%s %s: cannot open %s: %s\n", prog, c->cmd, dir, strerror(errno));
        return 2;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s %s: %s is not a directory\n", prog, c->cmd, dir);
        return 2;
    }
    char results[PATH_LEN], plots[PATH_LEN];
    if (mkpath(c->cmd, results, "%s/results.csv", dir) ||
        mkpath(c->cmd, plots, "%s/plots", dir))
        return 2;
    group *g = NULL;
    int ng = 0;
    long nrows, nskipped;
    int code = read_results(c->cmd, results, &g, &ng, &nrows, &nskipped);
    if (code)
        return code;
    cpoint *pts = NULL;
    int np = 0, nruns = 0;
    int *scratch = malloc(sizeof(int) * (ng + 1)), *scratch2 = malloc(sizeof(int) * (ng + 1));
    /* at most: 2 vs-T figures, one width figure per (task, T), curves */
    int maxjobs = 2 * ng + 3;
    job *jobs = calloc((size_t)maxjobs, sizeof *jobs);
    int njobs = 0;
    char err[BA_ERR_LEN];
    if (!scratch || !scratch2 || !jobs) {
        fprintf(stderr, "%s %s: out of memory\n", prog, c->cmd);
        code = 1;
        goto done;
    }
    if ((code = read_runs(c->cmd, dir, &pts, &np, &nruns)))
        goto done;
    if (Treq || Creq) { /* before anything is written */
        int found = 0;
        for (int i = 0; i < np && !found; i++)
            found = (!Treq || pts[i].T == Treq) && (!Creq || pts[i].C == Creq);
        if (!found) {
            char want[64] = "";
            if (Treq)
                snprintf(want, sizeof want, " T=%d", Treq);
            if (Creq)
                snprintf(want + strlen(want), sizeof want - strlen(want), " C=%d", Creq);
            code = usage_error(c->cmd, "no runs with learning curves at%s in %s", want, dir);
            goto done;
        }
    }
    if (make_dirs(plots, err)) {
        fprintf(stderr, "%s %s: %s\n", prog, c->cmd, err);
        code = 1;
        goto done;
    }
    /* plots/ is this command's own: the .dat and .gp files of an earlier
     * call go, so none is left that the figures no longer read. */
    DIR *pd = opendir(plots);
    for (struct dirent *e; pd && (e = readdir(pd));) {
        size_t n = strlen(e->d_name);
        char old[PATH_LEN];
        if (((n > 4 && strcmp(e->d_name + n - 4, ".dat") == 0) ||
             (n > 3 && strcmp(e->d_name + n - 3, ".gp") == 0)) &&
            !mkpath(c->cmd, old, "%s/%s", plots, e->d_name))
            unlink(old);
    }
    if (pd)
        closedir(pd);

    printf("%s: %ld runs in %d groups", results, nrows - nskipped, ng);
    if (nskipped)
        printf(" (%ld without a value left out)", nskipped);
    printf("\n%-9s %-10s %5s %6s %4s %5s  %-22s %10s %9s\n", "task", "variant", "T", "C", "ffn",
           "seeds", "metric", "mean", "sd");
    for (int i = 0; i < ng; i++)
        printf("%-9s %-10s %5d %6d %4d %5ld  %-22s %10.4f %9.4f\n", ba_task_name(g[i].task),
               g[i].variant, g[i].T, g[i].C, g[i].ffn, g[i].s.n,
               g[i].task == BA_TASK_CHARLM ? "val perplexity" : "accuracy %", g[i].s.mean,
               stats_sd(&g[i].s));

    int tasks[2] = {0, 0};
    for (int i = 0; i < ng; i++)
        tasks[g[i].task] = 1;
    if ((code = write_summary(c->cmd, plots, g, ng)))
        goto done;
    for (int t = 0; t < 2 && !code; t++)
        if (tasks[t])
            code = figure_vs_T(c->cmd, plots, g, ng, (ba_task)t, scratch, jobs, &njobs) ||
                   figures_vs_C(c->cmd, plots, g, ng, (ba_task)t, tasks[0] && tasks[1], scratch,
                                scratch2, jobs, &njobs, maxjobs - 3);
    int ncurves = 0; /* checked above: > 0 when a T or C was asked for */
    if (!code)
        code = figure_curves(c->cmd, plots, pts, np, Treq, Creq, jobs, &njobs, &ncurves);
    if (code)
        goto done;
    printf("learning curves: %d run%s with validation records under %s/runs\n", nruns,
           nruns == 1 ? "" : "s", dir);
    printf("wrote %s/: summary.dat, the .dat files and .gp scripts\n", plots);
    if (!have_gnuplot()) {
        fprintf(stderr, "gnuplot not found: .dat files and scripts written to %s, plots skipped "
                        "%s\n",
                plots, no_gnuplot_fix);
        goto done;
    }
    for (int i = 0; i < njobs; i++) {
        if (run_gnuplot(c->cmd, plots, jobs[i].script))
            code = 1;
        else
            printf("plot: %s/%s\n", dir, jobs[i].png);
    }

done:
    free(g);
    free(pts);
    free(scratch);
    free(scratch2);
    free(jobs);
    return code;
}
