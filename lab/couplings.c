/* boltzattn couplings: the learned couplings J of one or more boltzmann or
 * coupling checkpoints (the seeds of one configuration, or the cell a grid
 * picks): CSV and matrix files, statistics by key distance, the paper's
 * sign pattern beside them, gnuplot figures, and couplings.json, the
 * analysis as the reports read it. */
#include "lab.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CKPTS 256

static opt couplings_opts[] = {
    {"ckpt", "FILE", NULL,
     "boltzmann or coupling checkpoint (model.safetensors); give it again for more runs of one "
     "configuration, e.g. the seeds of a grid cell",
     0, 0},
    {"grid", "DIR", NULL,
     "instead of --ckpt: the finished runs (with checkpoints) of a grid's exact boltzmann cell "
     "with the largest T, with the FFN where it has both, at --prefer-C where it has it", 0, 0},
    {"prefer-C", "C", "the largest", "with --grid: the width to take at that T", 0, 0},
    {"out", "DIR", "couplings/ next to the (first) checkpoint, or in the grid", "output directory",
     0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command couplings_cmd = {
    "couplings",
    "--ckpt FILE [--ckpt FILE ...] | --grid DIR [--prefer-C C]  [--out DIR]\n\n"
    "Writes the learned couplings J of a boltzmann or coupling checkpoint to DIR:\n"
    "J_l<l>_h<h>.csv (j,k,J for each used pair j < k), J_l<l>_h<h>_matrix.txt (T x T),\n"
    "distance.csv (statistics by key distance k - j, per head and over all),\n"
    "couplings.json (the same statistics for reports) and, when gnuplot is on PATH,\n"
    "J_heatmap_l<l>_h<h>.png and J_vs_distance.png from .gp scripts kept in DIR.\n"
    "Prints mean J by distance next to the paper's sign pattern.\n\n"
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
static int write_head_files(const command *c, const char *dir, int l, int h, const double *J,
                            const double *sd, int T)
{
    char path[PATH_LEN];
    out_file o;
    FILE *f = out_openf(c, &o, path, "%s/J_l%d_h%d.csv", dir, l, h);
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
    if (out_close(c, &o, path))
        return 1;

    if (!(f = out_openf(c, &o, path, "%s/J_l%d_h%d_matrix.txt", dir, l, h)))
        return 1;
    fprintf(f, "# couplings J of layer %d, head %d%s: row j, column k (0-based key positions); "
               "J_jk for j < k, 0 where unused (k <= j)\n",
            l, h, sd ? " (mean over runs)" : "");
    for (int j = 0; j < T; j++)
        for (int k = 0; k < T; k++)
            fprintf(f, "%.9g%s", k > j ? J[(size_t)j * T + k] : 0.0, k + 1 < T ? " " : "\n");
    return out_close(c, &o, path);
}

static int write_heatmap_gp(const command *c, const char *dir, int l, int h, ba_task task,
                            const ba_config *cfg, int runs, double absmax)
{
    int T = cfg->block_size;
    char path[PATH_LEN], script[64], png[64], what[48] = "";
    out_file o;
    snprintf(script, sizeof script, "J_heatmap_l%d_h%d.gp", l, h);
    snprintf(png, sizeof png, "J_heatmap_l%d_h%d.png", l, h);
    if (runs > 1)
        snprintf(what, sizeof what, ", mean of %d runs", runs);
    FILE *f = out_openf(c, &o, path, "%s/%s", dir, script);
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
            l, h, ba_task_name(task), ba_attn_name(cfg->attn), T, what, T - 0.5, T - 0.5,
            T <= 32 ? 1 : T / 16, T <= 32 ? 1 : T / 16, -r, r, l, h);
    if (T <= 12) /* small enough to print the values in the cells */
        fprintf(f,
                ", \\\n     'J_l%d_h%d_matrix.txt' matrix using 2:1:($2 < $1 ? "
                "sprintf(\"%%.2f\", $3) : \"\") with labels font \",10\" notitle",
                l, h);
    fprintf(f, "\n");
    return out_close(c, &o, path);
}

static int write_distance_gp(const command *c, const char *dir, ba_task task,
                             const ba_config *cfg, int T, int L, int H, int runs, double absmax)
{
    char path[PATH_LEN];
    out_file o;
    FILE *f = out_openf(c, &o, path, "%s/J_vs_distance.gp", dir);
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
            ba_task_name(task), ba_attn_name(cfg->attn), T, L, L == 1 ? "" : "s", H,
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
    return out_close(c, &o, path);
}

static int write_distance_row(FILE *f, const char *layer, const char *head, int d,
                              const ba_running *s)
{
    return fprintf(f, "%s,%s,%d,%ld,%.9g,%.9g,%.9g,%.9g\n", layer, head, d, s->n, s->mean,
                   ba_running_sd(s), s->min, s->max) < 0;
}

/* The couplings of one or more checkpoints of the same shape, accumulated
 * as they are loaded (only one model is held at a time). */
typedef struct {
    ba_model *model0;      /* first checkpoint's model (its config) */
    ba_task task;
    const char *path0;     /* first checkpoint's path */
    int L, H, T, runs;
    ba_running *pair;      // (L,H,T,T) J_jk over runs
    ba_running *dist;      // (L,H,T) J at distance d, pooled over pairs and runs
    ba_running *all;       // (T) the same over all layers and heads
    double *runmean;       // (runs,T) each run's mean J at distance d
    ba_summary *over;      // (T) per distance, each run's mean over the runs
    int *positive;         // (T) runs whose mean J at d is positive
} couplings_acc;

static void couplings_acc_free(couplings_acc *a)
{
    free(a->pair);
    free(a->dist);
    free(a->all);
    free(a->runmean);
    free(a->over);
    free(a->positive);
    ba_model_free(a->model0);
}

/* The first checkpoint fixes the shape. */
static int acc_init(const command *c, couplings_acc *a, const ba_config *cfg)
{
    a->L = cfg->n_layer, a->H = cfg->n_head, a->T = cfg->block_size;
    size_t lht = (size_t)a->L * a->H * a->T;
    a->pair = calloc(lht * a->T, sizeof *a->pair);
    a->dist = calloc(lht, sizeof *a->dist);
    a->all = calloc((size_t)a->T, sizeof *a->all);
    a->runmean = calloc((size_t)a->runs * a->T, sizeof *a->runmean);
    a->over = calloc((size_t)a->T, sizeof *a->over);
    a->positive = calloc((size_t)a->T, sizeof *a->positive);
    if (!a->pair || !a->dist || !a->all || !a->runmean || !a->over || !a->positive)
        return fail_lib(c, "out of memory", 1);
    return 0;
}

/* Adds the J tensors of model m as run r. */
static int acc_add_model(const command *c, couplings_acc *a, ba_model *m, const char *path, int r)
{
    int L = a->L, H = a->H, T = a->T;
    const ba_real *params = ba_model_params(m);
    ba_running *mine = calloc((size_t)T, sizeof *mine); /* this run, by distance */
    if (!mine)
        return fail_lib(c, "out of memory", 1);
    for (int l = 0; l < L; l++) {
        char name[64];
        snprintf(name, sizeof name, "blocks.%d.attn.J", l);
        int idx = ba_model_find_tensor(m, name);
        ba_tensor_info ti;
        if (idx < 0 || ba_model_tensor(m, idx, &ti) || ti.ndim != 3 || ti.shape[0] != H ||
            ti.shape[1] != T || ti.shape[2] != T) {
            fprintf(stderr, "%s %s: %s: tensor %s missing or not of shape [%d,%d,%d]\n", prog,
                    c->cmd, path, name, H, T, T);
            free(mine);
            return 2;
        }
        for (int h = 0; h < H; h++) {
            const ba_real *J = params + ti.offset + (size_t)h * T * T; // (T,T)
            size_t lh = (size_t)l * H + h;
            for (int j = 0; j < T; j++)
                for (int k = j + 1; k < T; k++) {
                    double x = J[(size_t)j * T + k];
                    ba_running_add(&a->pair[(lh * T + j) * T + k], x);
                    ba_running_add(&a->dist[lh * T + (k - j)], x);
                    ba_running_add(&a->all[k - j], x);
                    ba_running_add(&mine[k - j], x);
                }
        }
    }
    for (int d = 0; d < T; d++)
        a->runmean[(size_t)r * T + d] = mine[d].mean;
    free(mine);
    return 0;
}

/* Adds the checkpoint at path as run number r. Returns 0, else an exit code
 * after printing which file and which value is wrong. */
static int couplings_add(const command *c, couplings_acc *a, const char *path, int r)
{
    char err[BA_ERR_LEN];
    ba_model *m;
    ba_data_spec spec;
    int st = ba_checkpoint_load(path, &m, &spec, err);
    if (st)
        return fail_lib(c, err, input_status(st));
    const ba_config *cfg = ba_model_config(m);
    int code = 0;
    if (cfg->attn != BA_ATTN_BOLTZMANN && cfg->attn != BA_ATTN_COUPLING)
        code = usage_error(c, "%s is a %s model: it has no couplings J (only boltzmann and "
                              "coupling models do)",
                           path, ba_attn_name(cfg->attn));
    else if (r == 0)
        code = acc_init(c, a, cfg);
    else if (spec.task != a->task || cfg->n_layer != a->L || cfg->n_head != a->H ||
             cfg->block_size != a->T)
        code = usage_error(c, "%s (%s, T=%d, %d layers x %d heads) does not match %s (%s, T=%d, "
                              "%d layers x %d heads): give checkpoints of one configuration",
                           path, ba_task_name(spec.task), cfg->block_size, cfg->n_layer,
                           cfg->n_head, a->path0, ba_task_name(a->task), a->T, a->L, a->H);
    if (!code)
        code = acc_add_model(c, a, m, path, r);
    if (r == 0 && !code) {
        a->model0 = m, a->task = spec.task, a->path0 = path;
        return 0;
    }
    ba_model_free(m);
    return code;
}

/* Per distance, the spread over runs of each run's mean J. */
static int acc_over_runs(const command *c, couplings_acc *a)
{
    double *x = malloc((size_t)a->runs * sizeof *x);
    if (!x)
        return fail_lib(c, "out of memory", 1);
    for (int d = 1; d < a->T; d++) {
        a->positive[d] = 0;
        for (int r = 0; r < a->runs; r++) {
            x[r] = a->runmean[(size_t)r * a->T + d];
            a->positive[d] += x[r] > 0;
        }
        a->over[d] = ba_summarize(x, a->runs);
    }
    free(x);
    return 0;
}

/* distance_runs.csv (runs > 1). */
static int write_distance_runs(const command *c, const char *dir, const couplings_acc *a)
{
    char path[PATH_LEN];
    out_file o;
    FILE *f = out_openf(c, &o, path, "%s/distance_runs.csv", dir);
    if (!f)
        return 1;
    fprintf(f, "distance,runs,mean,sd,ci95_lo,ci95_hi,positive_runs\n");
    for (int d = 1; d < a->T; d++) {
        const ba_summary *s = &a->over[d];
        fprintf(f, "%d,%d,%.9g,%.9g,%.9g,%.9g,%d\n", d, a->runs, s->mean, s->sd,
                s->mean - s->ci95, s->mean + s->ci95, a->positive[d]);
    }
    return out_close(c, &o, path);
}

static int write_runs_txt(const command *c, const char *dir, const char **ckpts, int n)
{
    char path[PATH_LEN];
    out_file o;
    FILE *f = out_openf(c, &o, path, "%s/runs.txt", dir);
    if (!f)
        return 1;
    for (int r = 0; r < n; r++)
        fprintf(f, "%s\n", ckpts[r]);
    return out_close(c, &o, path);
}

static int write_distance_csv(const command *c, const char *dir, const couplings_acc *a)
{
    char path[PATH_LEN];
    out_file o;
    FILE *f = out_openf(c, &o, path, "%s/distance.csv", dir);
    if (!f)
        return 1;
    fprintf(f, "layer,head,distance,n,mean,sd,min,max\n");
    for (int l = 0; l < a->L; l++)
        for (int h = 0; h < a->H; h++) {
            char ls[16], hs[16];
            snprintf(ls, sizeof ls, "%d", l);
            snprintf(hs, sizeof hs, "%d", h);
            for (int d = 1; d < a->T; d++)
                write_distance_row(f, ls, hs, d, &a->dist[((size_t)l * a->H + h) * a->T + d]);
        }
    for (int d = 1; d < a->T; d++)
        write_distance_row(f, "all", "all", d, &a->all[d]);
    return out_close(c, &o, path);
}

static cJSON *running_json(const ba_running *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", (double)s->n);
    cJSON_AddNumberToObject(o, "mean", s->mean);
    cJSON_AddNumberToObject(o, "sd", ba_running_sd(s));
    cJSON_AddNumberToObject(o, "min", s->min);
    cJSON_AddNumberToObject(o, "max", s->max);
    return o;
}

/* couplings.json: what the analysis found, as the reports read it. The
 * cell is named from the first checkpoint's config, the run (one
 * checkpoint) by its directory. */
static int write_json(const command *c, const char *dir, const couplings_acc *a,
                      const char **ckpts, int n)
{
    const ba_config *cfg = ba_model_config(a->model0);
    cJSON *o = cJSON_CreateObject(), *runs = cJSON_AddArrayToObject(o, "runs");
    char cell[160], path[PATH_LEN];
    snprintf(cell, sizeof cell, "%s-T%d-C%d-ffn%d-%s", ba_task_name(a->task), a->T, cfg->n_embd,
             cfg->ffn, ba_attn_name(cfg->attn));
    cJSON_AddStringToObject(o, "format", "boltzattn-couplings");
    cJSON_AddNumberToObject(o, "version", 1);
    cJSON_AddStringToObject(o, "cell", cell);
    cJSON_AddStringToObject(o, "task", ba_task_name(a->task));
    cJSON_AddStringToObject(o, "attn", ba_attn_name(cfg->attn));
    cJSON_AddNumberToObject(o, "T", a->T);
    cJSON_AddNumberToObject(o, "C", cfg->n_embd);
    cJSON_AddNumberToObject(o, "ffn", cfg->ffn);
    cJSON_AddNumberToObject(o, "layers", a->L);
    cJSON_AddNumberToObject(o, "heads", a->H);
    for (int r = 0; r < n; r++) {
        char run[PATH_LEN];
        snprintf(run, sizeof run, "%s", ckpts[r]);
        char *slash = strrchr(run, '/');
        if (slash)
            *slash = '\0';
        slash = strrchr(run, '/');
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "checkpoint", ckpts[r]);
        cJSON_AddStringToObject(x, "run", slash ? slash + 1 : run);
        cJSON_AddItemToArray(runs, x);
    }
    cJSON *all = cJSON_AddArrayToObject(o, "by_distance");
    for (int d = 1; d < a->T; d++) {
        cJSON *x = running_json(&a->all[d]);
        cJSON_AddNumberToObject(x, "distance", d);
        cJSON_AddItemToArray(all, x);
    }
    cJSON *over = n > 1 ? cJSON_AddArrayToObject(o, "over_runs") : NULL;
    for (int d = 1; over && d < a->T; d++) {
        const ba_summary *s = &a->over[d];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "distance", d);
        cJSON_AddNumberToObject(x, "runs", n);
        cJSON_AddNumberToObject(x, "mean", s->mean);
        cJSON_AddNumberToObject(x, "sd", s->sd);
        cJSON_AddNumberToObject(x, "ci95_lo", s->mean - s->ci95);
        cJSON_AddNumberToObject(x, "ci95_hi", s->mean + s->ci95);
        cJSON_AddNumberToObject(x, "positive_runs", a->positive[d]);
        cJSON_AddItemToArray(over, x);
    }
    char *txt = cJSON_Print(o);
    cJSON_Delete(o);
    out_file of;
    FILE *f = txt ? out_openf(c, &of, path, "%s/couplings.json", dir) : NULL;
    if (f)
        fprintf(f, "%s\n", txt);
    cJSON_free(txt);
    return f ? out_close(c, &of, path) : 1;
}

/* The table, and the paper's sign pattern next to ours. */
static void print_table(const couplings_acc *a, const char **ckpts, int n)
{
    const ba_config *cfg = ba_model_config(a->model0);
    int L = a->L, H = a->H, T = a->T;
    if (n == 1)
        printf("couplings of %s: ", ckpts[0]);
    else
        printf("couplings of %d runs (%s ...): ", n, ckpts[0]);
    printf("%s %s, T=%d, %d layer%s x %d head%s\n", ba_task_name(a->task),
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
        const ba_summary *o = &a->over[d];
        double mean = n == 1 ? a->all[d].mean : o->mean;
        if (n == 1) {
            const ba_running *s = &a->all[d];
            printf("%4d %6ld %+10.4f %9.4f %+9.4f %+9.4f  %c\n", d, s->n, s->mean,
                   ba_running_sd(s), s->min, s->max, mean > 0 ? '+' : mean < 0 ? '-' : '0');
        } else {
            printf("%4d %+10.4f %9.4f  [%+8.4f, %+8.4f] %6d/%d\n", d, o->mean, o->sd,
                   o->mean - o->ci95, o->mean + o->ci95, a->positive[d], n);
        }
        if (d >= 2 && d <= 4)
            n24++, pos24 += mean > 0, sure24 += n > 1 && o->mean - o->ci95 > 0;
        if (d >= 6)
            n6++, neg6 += mean < 0, sure6 += n > 1 && o->mean + o->ci95 < 0;
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
}

/* Every file of the analysis into dir. */
static int write_files(const command *c, const char *dir, const couplings_acc *a,
                       const char **ckpts, int n)
{
    const ba_config *cfg = ba_model_config(a->model0);
    int L = a->L, H = a->H, T = a->T;
    size_t TT = (size_t)T * T;
    double *Jm = calloc(TT, sizeof *Jm), *Js = calloc(TT, sizeof *Js);
    char err[BA_ERR_LEN];
    int code = 0;
    if (!Jm || !Js)
        code = fail_lib(c, "out of memory", 1);
    else if (make_dirs(dir, err))
        code = fail_lib(c, err, 1);
    double absmax = 0; /* colour range: the largest |J| shown */
    for (size_t i = 0; i < (size_t)L * H * TT; i++)
        if (a->pair[i].n)
            absmax = fmax(absmax, fabs(a->pair[i].mean));
    for (int l = 0; l < L && !code; l++)
        for (int h = 0; h < H && !code; h++) {
            const ba_running *p = a->pair + ((size_t)l * H + h) * TT; // (T,T)
            for (size_t i = 0; i < TT; i++)
                Jm[i] = p[i].mean, Js[i] = ba_running_sd(&p[i]);
            code = write_head_files(c, dir, l, h, Jm, n > 1 ? Js : NULL, T) ||
                   write_heatmap_gp(c, dir, l, h, a->task, cfg, n, absmax);
        }
    free(Jm), free(Js);
    if (!code)
        code = write_distance_csv(c, dir, a) || (n > 1 && write_distance_runs(c, dir, a)) ||
               write_runs_txt(c, dir, ckpts, n) ||
               write_distance_gp(c, dir, a->task, cfg, T, L, H, n, absmax) ||
               write_json(c, dir, a, ckpts, n);
    return code;
}

/* --grid: the checkpoints of the grid's exact boltzmann cell with the
 * largest T (with the FFN where both exist, at the preferred width where
 * it exists, else the widest), over its finished runs that kept their
 * checkpoint. *paths: malloc'd strings. */
static int grid_ckpts(const command *c, const char *grid, int prefer_C, char **paths, int *n)
{
    lab_runs rs;
    int code = lab_runs_scan(c, grid, &rs);
    *n = 0;
    const lab_run *best = NULL;
    char path[PATH_LEN];
    for (int i = 0; !code && i < rs.n; i++) {
        const lab_run *r = &rs.v[i];
        if (!r->finished || r->attn != BA_ATTN_BOLTZMANN || r->sampler != BA_SAMPLER_EXACT ||
            mkpath(c, path, "%s/model.safetensors", r->dir) || access(path, R_OK) != 0)
            continue;
        int better = !best;
        if (best && r->T != best->T)
            better = r->T > best->T;
        else if (best && r->ffn != best->ffn)
            better = r->ffn > best->ffn;
        else if (best && (r->C == prefer_C) != (best->C == prefer_C))
            better = r->C == prefer_C;
        else if (best)
            better = r->C > best->C;
        if (better)
            best = r;
    }
    for (int i = 0; !code && best && i < rs.n && *n < MAX_CKPTS; i++) {
        const lab_run *r = &rs.v[i];
        if (r->finished && r->attn == best->attn && r->sampler == BA_SAMPLER_EXACT &&
            r->T == best->T && r->C == best->C && r->ffn == best->ffn &&
            !mkpath(c, path, "%s/model.safetensors", r->dir) && access(path, R_OK) == 0 &&
            !(paths[(*n)++] = strdup(path)))
            code = fail_lib(c, "out of memory", 1);
    }
    lab_runs_free(&rs);
    if (!code && *n == 0)
        code = usage_error(c, "%s has no finished exact boltzmann run with its checkpoint",
                           grid);
    return code;
}

/* The checkpoints to read (--ckpt repeated, or --grid) and the output
 * directory. */
static int choose_inputs(const command *c, int argc, char **argv, const char **ckpts, char **owned,
                         int *n, char *dir)
{
    int rc, C = 0;
    const char *grid = get_str(c, "grid");
    if ((*n = get_repeated(c, argc, argv, "ckpt", ckpts, MAX_CKPTS)) < 0)
        return -*n;
    if (grid && *n)
        return usage_error(c, "--ckpt and --grid exclude each other");
    if (!grid && !*n)
        return usage_error(c, "option '--ckpt' (or '--grid') is required");
    if (!grid && is_set(c, "prefer-C"))
        return usage_error(c, "--prefer-C needs --grid");
    if (is_set(c, "prefer-C") && (rc = get_int(c, "prefer-C", 1, 8192, &C)))
        return rc;
    if (grid && (rc = grid_ckpts(c, grid, C, owned, n)))
        return rc;
    /* One run given twice (under two names, say) would count as two seeds
     * and get a confidence interval it does not have. */
    for (int i = 0; !grid && i < *n; i++)
        for (int j = 0; j < i; j++)
            if (same_file(ckpts[i], ckpts[j]))
                return usage_error(c, "--ckpt %s and --ckpt %s are the same file: each run may "
                                      "be given once",
                                   ckpts[j], ckpts[i]);
    for (int i = 0; grid && i < *n; i++)
        ckpts[i] = owned[i];
    if (is_set(c, "out")) {
        const char *o = get_str(c, "out");
        if (!*o)
            return usage_error(c, "--out must not be empty");
        return mkpath(c, dir, "%s", o) ? EXIT_USAGE : 0;
    }
    if (grid)
        return mkpath(c, dir, "%s/couplings", grid) ? EXIT_USAGE : 0;
    const char *slash = strrchr(ckpts[0], '/');
    return mkpath(c, dir, "%.*scouplings", slash ? (int)(slash - ckpts[0] + 1) : 0, ckpts[0])
               ? EXIT_USAGE
               : 0;
}

static int draw(const command *c, const char *dir, const couplings_acc *a)
{
    if (!have_gnuplot()) {
        fprintf(stderr, "gnuplot not found: CSV written, plots skipped %s\n", no_gnuplot_fix);
        return 0;
    }
    int bad = 0;
    for (int l = 0; l < a->L; l++)
        for (int h = 0; h < a->H; h++) {
            char script[64];
            snprintf(script, sizeof script, "J_heatmap_l%d_h%d.gp", l, h);
            bad |= run_gnuplot(c, dir, script);
        }
    if (a->T >= 2)
        bad |= run_gnuplot(c, dir, "J_vs_distance.gp");
    if (!bad)
        printf("plots: %s/J_heatmap_l*_h*.png%s\n", dir, a->T >= 2 ? ", J_vs_distance.png" : "");
    return bad;
}

int cmd_couplings(int argc, char **argv)
{
    const command *c = &couplings_cmd;
    int rc = parse_args(c, argc, argv, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *ckpts[MAX_CKPTS];
    char *owned[MAX_CKPTS], dir[PATH_LEN];
    int n = 0;
    memset(owned, 0, sizeof owned);
    couplings_acc a;
    memset(&a, 0, sizeof a);
    int code = choose_inputs(c, argc, argv, ckpts, owned, &n, dir);
    a.runs = n;
    for (int r = 0; r < n && !code; r++)
        code = couplings_add(c, &a, ckpts[r], r);
    if (!code)
        code = acc_over_runs(c, &a);
    if (!code)
        code = write_files(c, dir, &a, ckpts, n);
    if (!code) {
        print_table(&a, ckpts, n);
        printf("wrote %s/J_l*_h*.csv, J_l*_h*_matrix.txt, distance.csv%s, runs.txt, "
               "couplings.json and .gp scripts\n",
               dir, n > 1 ? ", distance_runs.csv" : "");
        code = draw(c, dir, &a);
    }
    for (int i = 0; i < MAX_CKPTS; i++)
        free(owned[i]);
    couplings_acc_free(&a);
    return code;
}
