/* The files of the couplings analysis (see couplings.h): per head the
 * pairs (absolute couplings) or J by distance (relative), the statistics
 * by distance, couplings.json for the reports, the gnuplot scripts, and
 * the table printed with the paper's sign pattern beside it. */
#include "couplings.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Long-form CSV (one row per used pair j < k, k - j <= D) and, when
 * matrix, the T x T matrix of one head (0 beyond the band). p: (T,D+1),
 * pair (j, j + d) over the runs; sd: its sd over runs is written. */
static int write_head_files(const command *c, const char *dir, int l, int h,
                            const ba_running *p, int sd, int T, int D, int matrix)
{
    char path[PATH_LEN];
    out_file o;
    FILE *f = out_openf(c, &o, path, "%s/J_l%d_h%d.csv", dir, l, h);
    if (!f)
        return 1;
    fprintf(f, sd ? "j,k,J,sd\n" : "j,k,J\n");
    for (int j = 0; j < T; j++)
        for (int k = j + 1; k < T && k - j <= D; k++) {
            const ba_running *x = &p[(size_t)j * (D + 1) + (k - j)];
            fprintf(f, "%d,%d,%.9g", j, k, x->mean);
            if (sd)
                fprintf(f, ",%.9g", ba_running_sd(x));
            fprintf(f, "\n");
        }
    if (out_close(c, &o, path))
        return 1;
    if (!matrix)
        return 0;
    if (!(f = out_openf(c, &o, path, "%s/J_l%d_h%d_matrix.txt", dir, l, h)))
        return 1;
    fprintf(f, "# couplings J of layer %d, head %d%s: row j, column k (0-based key positions); "
               "J_jk for j < k, 0 where unused (k <= j)\n",
            l, h, sd ? " (mean over runs)" : "");
    for (int j = 0; j < T; j++)
        for (int k = 0; k < T; k++)
            fprintf(f, "%.9g%s", k > j && k - j <= D ? p[(size_t)j * (D + 1) + (k - j)].mean : 0.0,
                    k + 1 < T ? " " : "\n");
    return out_close(c, &o, path);
}

/* Relative couplings of one head: J by distance (mean over the runs, and
 * with several runs its sd over them). */
static int write_rel_head_file(const command *c, const char *dir, int l, int h,
                               const ba_running *byd, int D, int runs)
{
    char path[PATH_LEN];
    out_file o;
    FILE *f = out_openf(c, &o, path, "%s/J_l%d_h%d.csv", dir, l, h);
    if (!f)
        return 1;
    fprintf(f, runs > 1 ? "distance,J,sd\n" : "distance,J\n");
    for (int d = 1; d <= D; d++) {
        fprintf(f, "%d,%.9g", d, byd[d].mean);
        if (runs > 1)
            fprintf(f, ",%.9g", ba_running_sd(&byd[d]));
        fprintf(f, "\n");
    }
    return out_close(c, &o, path);
}

static int write_heatmap_gp(const command *c, const char *dir, int l, int h, ba_task task,
                            const ba_config *cfg, int runs, double absmax)
{
    int T = cfg->block_size;
    char path[PATH_LEN], script[64], png[64], what[48] = "", label[96];
    lab_form form = lab_form_of(cfg);
    lab_form_label(cfg->attn, &form, label, sizeof label);
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
            l, h, ba_task_name(task), label, T, what, T - 0.5, T - 0.5,
            T <= 32 ? 1 : T / 16, T <= 32 ? 1 : T / 16, -r, r, l, h);
    if (T <= 12) /* small enough to print the values in the cells */
        fprintf(f,
                ", \\\n     'J_l%d_h%d_matrix.txt' matrix using 2:1:($2 < $1 ? "
                "sprintf(\"%%.2f\", $3) : \"\") with labels font \",10\" notitle",
                l, h);
    fprintf(f, "\n");
    return out_close(c, &o, path);
}

/* D: the largest distance shown (T - 1 without a band). */
static int write_distance_gp(const command *c, const char *dir, ba_task task,
                             const ba_config *cfg, int T, int D, int L, int H, int runs,
                             double absmax)
{
    char path[PATH_LEN], label[96];
    lab_form form = lab_form_of(cfg);
    lab_form_label(cfg->attn, &form, label, sizeof label);
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
            ba_task_name(task), label, T, L, L == 1 ? "" : "s", H, H == 1 ? "" : "s", what,
            D + 0.5, D + 1 <= 33 ? 1 : (D + 1) / 16);
    if (absmax == 0) /* all J zero: give the flat line a range */
        fprintf(f, "set yrange [-1:1]\n");
    /* The paper's sign pattern (spec section 1) as shaded bands. */
    if (D >= 2)
        fprintf(f,
                "set object 1 rectangle from 1.5, graph 0 to %g, graph 1 behind fillcolor rgb "
                "\"#fbe4e4\" fillstyle solid noborder\n"
                "set label 1 \"paper: J > 0\" at %g, graph 0.04 center textcolor rgb "
                "\"#b2182b\"\n",
                fmin(4.5, D + 0.5), (1.5 + fmin(4.5, D + 0.5)) / 2);
    if (D >= 6)
        fprintf(f,
                "set object 2 rectangle from 5.5, graph 0 to graph 1, graph 1 behind fillcolor "
                "rgb \"#e3ecf7\" fillstyle solid noborder\n"
                "set label 2 \"paper: J < 0\" at %g, graph 0.04 center textcolor rgb "
                "\"#2166ac\"\n",
                (5.5 + D + 0.5) / 2);
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

/* distance_runs.csv (runs > 1). */
static int write_distance_runs(const command *c, const char *dir, const couplings_acc *a)
{
    char path[PATH_LEN];
    out_file o;
    FILE *f = out_openf(c, &o, path, "%s/distance_runs.csv", dir);
    if (!f)
        return 1;
    fprintf(f, "distance,runs,mean,sd,ci95_lo,ci95_hi,positive_runs\n");
    for (int d = 1; d <= a->D; d++) {
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
            for (int d = 1; d <= a->D; d++)
                write_distance_row(f, ls, hs, d,
                                   &a->dist[((size_t)l * a->H + h) * (a->D + 1) + d]);
        }
    for (int d = 1; d <= a->D; d++)
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
    char cell[160], path[PATH_LEN], label[96];
    lab_form form = lab_form_of(cfg);
    lab_form_label(cfg->attn, &form, label, sizeof label);
    snprintf(cell, sizeof cell, "%s-T%d-C%d-ffn%d-%s", ba_task_name(a->task), a->T, cfg->n_embd,
             cfg->ffn, label);
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
    if (!lab_form_is_plain(&form)) { /* the paper's form: the file as it always was */
        cJSON_AddStringToObject(o, "variant", label);
        cJSON_AddStringToObject(o, "couplings", ba_couplings_name(cfg->couplings));
        cJSON_AddNumberToObject(o, "band", cfg->band);
        cJSON_AddNumberToObject(o, "distances", a->D);
    }
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
    for (int d = 1; d <= a->D; d++) {
        cJSON *x = running_json(&a->all[d]);
        cJSON_AddNumberToObject(x, "distance", d);
        cJSON_AddItemToArray(all, x);
    }
    cJSON *over = n > 1 ? cJSON_AddArrayToObject(o, "over_runs") : NULL;
    for (int d = 1; over && d <= a->D; d++) {
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

void couplings_print_table(const couplings_acc *a, const char **ckpts, int n)
{
    const ba_config *cfg = ba_model_config(a->model0);
    int L = a->L, H = a->H, T = a->T, D = a->D;
    char label[96];
    lab_form form = lab_form_of(cfg);
    lab_form_label(cfg->attn, &form, label, sizeof label);
    if (n == 1)
        printf("couplings of %s: ", ckpts[0]);
    else
        printf("couplings of %d runs (%s ...): ", n, ckpts[0]);
    printf("%s %s, T=%d, %d layer%s x %d head%s\n", ba_task_name(a->task), label, T, L,
           L == 1 ? "" : "s", H, H == 1 ? "" : "s");
    int pos24 = 0, n24 = 0, neg6 = 0, n6 = 0, sure24 = 0, sure6 = 0;
    if (n == 1 && a->rel) {
        printf("J by key distance d = k - j (relative couplings: one per distance, layer and "
               "head; their mean over all layers and heads):\n");
        printf("%4s %6s %10s %9s %9s %9s  %s\n", "d", "n", "mean", "sd", "min", "max", "sign");
    } else if (n == 1) {
        if (a->band > 0)
            printf("mean J by key distance d = k - j (pairs j < k within the band W = %d over "
                   "all layers and heads):\n", a->band);
        else
            printf("mean J by key distance d = k - j (pairs j < k over all layers and heads):\n");
        printf("%4s %6s %10s %9s %9s %9s  %s\n", "d", "n", "mean", "sd", "min", "max", "sign");
    } else {
        printf("mean J by key distance d = k - j: each run's mean over its %slayers and "
               "heads, then mean, sd and 95 %% interval over the %d runs:\n",
               a->rel ? "" : "pairs, ", n);
        printf("%4s %10s %9s %21s %9s\n", "d", "mean", "sd", "95 % interval", "runs > 0");
    }
    for (int d = 1; d <= D; d++) {
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
    if (D < 1)
        printf("(T = %d: no pairs j < k)\n", T);
    printf("paper (spec section 1): J > 0 for d = 2..4, J < 0 for d >= 6\n");
    printf("%s: d = 2..4: ", n == 1 ? "this checkpoint" : "these runs");
    if (n24) {
        printf("%d of %d positive", pos24, n24);
        if (n > 1)
            printf(" (%d with the interval above 0)", sure24);
    } else if (D < T - 1) {
        printf("none (distances 1..%d only)", D);
    } else {
        printf("none (T = %d)", T);
    }
    printf("; d >= 6: ");
    if (n6) {
        printf("%d of %d negative", neg6, n6);
        if (n > 1)
            printf(" (%d with the interval below 0)", sure6);
        printf("\n");
    } else if (D < T - 1) {
        printf("none (distances 1..%d only)\n", D);
    } else {
        printf("none (T = %d has d <= %d)\n", T, T - 1);
    }
}

/* Absolute couplings are drawn as a T x T heatmap (and written as a
 * matrix) without a band, or with one up to T = 64: beyond, the band is a
 * thin line along the diagonal of a picture of zeros. */
#define MAX_BANDED_HEATMAP_T 64
int couplings_has_heatmap(const couplings_acc *a)
{
    return !a->rel && (a->band == 0 || a->T <= MAX_BANDED_HEATMAP_T);
}

int couplings_write_files(const command *c, const char *dir, const couplings_acc *a,
                          const char **ckpts, int n)
{
    const ba_config *cfg = ba_model_config(a->model0);
    int L = a->L, H = a->H, T = a->T, D = a->D;
    size_t per_head = (size_t)T * (D + 1);
    int heatmap = couplings_has_heatmap(a);
    char err[BA_ERR_LEN];
    int code = 0;
    if (make_dirs(dir, err))
        code = fail_lib(c, err, 1);
    double absmax = 0; /* colour range: the largest |J| shown */
    for (size_t i = 0; !a->rel && i < (size_t)L * H * per_head; i++)
        if (a->pair[i].n)
            absmax = fmax(absmax, fabs(a->pair[i].mean));
    for (int d = 1; a->rel && d <= D; d++)
        for (size_t lh = 0; lh < (size_t)L * H; lh++)
            absmax = fmax(absmax, fabs(a->dist[lh * (D + 1) + d].mean));
    for (int l = 0; l < L && !code; l++)
        for (int h = 0; h < H && !code; h++) {
            size_t lh = (size_t)l * H + h;
            if (a->rel) {
                code = write_rel_head_file(c, dir, l, h, a->dist + lh * (D + 1), D, n);
                continue;
            }
            code = write_head_files(c, dir, l, h, a->pair + lh * per_head, n > 1, T, D,
                                    heatmap) ||
                   (heatmap && write_heatmap_gp(c, dir, l, h, a->task, cfg, n, absmax));
        }
    if (!code)
        code = write_distance_csv(c, dir, a) || (n > 1 && write_distance_runs(c, dir, a)) ||
               write_runs_txt(c, dir, ckpts, n) ||
               write_distance_gp(c, dir, a->task, cfg, T, D, L, H, n, absmax) ||
               write_json(c, dir, a, ckpts, n);
    return code;
}

