/* boltzattn plot: the figures of a grid, from its run records: the metric
 * against T and against the width (mean and sd over seeds), the learning
 * curves (plot_curves.c, from each run's metrics.jsonl) and the length
 * extrapolation (plot_extrap.c). Aggregated .dat files and gnuplot
 * scripts go to DIR/plots/, the PNGs to DIR/. */
#include "figure.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static opt plot_opts[] = {
    {"curves-T", "T", "the largest T", "learning curves of the runs at this T", 0, 0},
    {"curves-C", "C", "the largest C at that T", "learning curves of the runs at this width",
     0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command plot_cmd = {
    "plot",
    "DIR [--curves-T T] [--curves-C C]\n\n"
    "Redraws the figures of an ablation directory from its run records\n"
    "(DIR/runs/*/run.json, and their metrics.jsonl for learning curves). Writes\n"
    "aggregated .dat files and\n"
    "gnuplot scripts to DIR/plots/ (replacing the .dat and .gp files there) and the\n"
    "figures (PNG, mean ± sd over seeds) to DIR/: ppl_vs_T.png (charlm), acc_vs_T.png\n"
    "(brackets), recall_acc_vs_T.png (recall), width_T<T>.png (when several C),\n"
    "learning_curves.png (the largest T and C unless chosen; the periodic evaluations\n"
    "as each seed's line and their mean, the final one on all items as a point apart\n"
    "with the seeds' range), extrapolation.png (when\n"
    "DIR/extrapolation.json has entries: each arm's perplexity at its trained T and\n"
    "at the longer T it was evaluated at). Without gnuplot only the data and scripts\n"
    "are written.",
    plot_opts};

/* One (task, variant, T, C, ffn) cell of results.csv, over seeds. The value
 * is in plot units: perplexity (charlm) or accuracy in % (brackets, recall). */
typedef struct {
    ba_task task;
    char variant[64];
    int T, C, ffn;
    ba_running s;
    long steps_lo, steps_hi; /* the runs' training steps */
} group;

static int group_cmp(const void *pa, const void *pb)
{
    const group *a = pa, *b = pb;
    return series_cmp(a->task, a->variant, a->ffn, a->C, a->T, b->task, b->variant, b->ffn, b->C,
                      b->T);
}

static const char *metric_label(ba_task t)
{
    return t == BA_TASK_CHARLM ? "validation perplexity" : "held-out accuracy (%)";
}

/* The metric with its direction, for axes. */
static const char *metric_axis(ba_task t)
{
    return t == BA_TASK_CHARLM ? "validation perplexity (lower is better)"
                               : "held-out accuracy, % (higher is better)";
}

/* The budget of the groups of `task` at width C (C < 0: any) and block
 * size T (T < 0: any). */
static void groups_budget(char *out, size_t n, const group *g, int ng, ba_task task, int C, int T)
{
    long nlo = 0, nhi = 0, slo = 0, shi = 0;
    for (int i = 0; i < ng; i++) {
        if (g[i].task != task || (C >= 0 && g[i].C != C) || (T >= 0 && g[i].T != T))
            continue;
        if (!nhi || g[i].s.n < nlo)
            nlo = g[i].s.n;
        if (!nhi || g[i].steps_lo < slo)
            slo = g[i].steps_lo;
        nhi = g[i].s.n > nhi ? g[i].s.n : nhi;
        shi = g[i].steps_hi > shi ? g[i].steps_hi : shi;
    }
    budget_text(out, n, nlo, nhi, slo, shi);
}

/* Writes one .dat of the groups of `task` with ffn, where x runs over T (at
 * C = fixC) or over C (at T = fixT); fills the panel's variant list. */
static int write_series(const command *c, const char *plots, const group *g, int ng, ba_task task,
                        int ffn, int fixC, int fixT, panel *pn)
{
    char path[PATH_LEN];
    out_file o;
    if (mkpath(c, path, "%s/%s", plots, pn->dat) || out_open(c, &o))
        return 1;
    FILE *f = o.f;
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
                    ba_running_sd(&q->s), q->s.min, q->s.max);
            panel_extent(pn, &q->s);
        }
        i = j;
    }
    return out_close(c, &o, path);
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

/* fg with a panel per FFN setting the task has (has[1] first): its
 * series at width C over T (T < 0), or at block size T over C (C < 0). */
static int ffn_figure(const command *c, const char *plots, const group *g, int ng,
                      ba_task task, int C, int T, const int has[2], figure *fg)
{
    panel pn[2];
    int np = 0;
    for (int ffn = 1; ffn >= 0; ffn--) {
        if (!has[ffn])
            continue;
        panel *p = &pn[np++];
        panel_init(p);
        if (T < 0)
            snprintf(p->dat, sizeof p->dat, "%s_C%d_ffn%d_vs_T.dat", ba_task_name(task), C, ffn);
        else
            snprintf(p->dat, sizeof p->dat, "%s_T%d_ffn%d_vs_C.dat", ba_task_name(task), T, ffn);
        snprintf(p->title, sizeof p->title, "%s", ffn ? "with FFN" : "without FFN (attention only)");
        snprintf(p->ylabel, sizeof p->ylabel, "%s", metric_axis(task));
        if (write_series(c, plots, g, ng, task, ffn, C, T, p))
            return 1;
    }
    return write_figure(c, plots, fg, pn, np);
}

/* ppl_vs_T / acc_vs_T: the largest C of the task, one panel per ffn. */
static int figure_vs_T(const command *c, const char *plots, const group *g, int ng, ba_task task,
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
    /* recall's accuracy has a file of its own beside brackets' */
    const char *stem = task == BA_TASK_CHARLM   ? "ppl"
                       : task == BA_TASK_RECALL ? "recall_acc"
                                                : "acc";
    snprintf(jb->script, sizeof jb->script, "%s_vs_T.gp", stem);
    snprintf(jb->png, sizeof jb->png, "%s_vs_T.png", stem);
    figure fg = {jb->script, jb->png, "", "", "block size T (context length)", 0, 1, 1, "", 1,
                 1, 0};
    snprintf(fg.title, sizeof fg.title, "%s: %s vs T at C=%d", ba_task_name(task),
             metric_label(task), Cmax);
    char budget[128];
    groups_budget(budget, sizeof budget, g, ng, task, Cmax, -1);
    snprintf(fg.note, sizeof fg.note, "mean ± sd over seeds (%s)%s", budget,
             nC > 1 ? "; the largest C run (others: width plots)" : "");
    set_xtics(&fg, scratch, nT);
    return ffn_figure(c, plots, g, ng, task, Cmax, -1, has, &fg);
}

/* width_T<T>.png for every T of the task run at several C. */
static int figures_vs_C(const command *c, const char *plots, const group *g, int ng,
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
        char budget[128];
        groups_budget(budget, sizeof budget, g, ng, task, -1, T);
        snprintf(fg.note, sizeof fg.note, "mean ± sd over seeds (%s)", budget);
        set_xtics(&fg, scratch2, nC);
        if (ffn_figure(c, plots, g, ng, task, -1, T, has, &fg))
            return 1;
    }
    return 0;
}

static int write_summary(const command *c, const char *plots, const group *g, int ng)
{
    char path[PATH_LEN];
    out_file o;
    if (mkpath(c, path, "%s/summary.dat", plots) || out_open(c, &o))
        return 1;
    FILE *f = o.f;
    fprintf(f, "# every (task, variant, T, C, ffn) of results.csv over seeds; value: "
               "perplexity (charlm) or accuracy in %% (brackets, recall); sd: sample standard "
               "deviation\n"
               "# task variant T C ffn n mean sd min max\n");
    for (int i = 0; i < ng; i++)
        fprintf(f, "%s %s %d %d %d %ld %.9g %.9g %.9g %.9g\n", ba_task_name(g[i].task),
                g[i].variant, g[i].T, g[i].C, g[i].ffn, g[i].s.n, g[i].s.mean,
                ba_running_sd(&g[i].s), g[i].s.min, g[i].s.max);
    return out_close(c, &o, path);
}

/* ------------------------------------------------------------ the data */

/* Adds one finished run's metric to its group (in plot units). */
static int add_to_group(const command *c, const lab_run *r, group **g, int *ng, int *cap)
{
    group k;
    memset(&k, 0, sizeof k);
    k.task = r->task, k.T = r->T, k.C = r->C, k.ffn = r->ffn;
    lab_run_variant(r, k.variant, sizeof k.variant);
    int i;
    for (i = 0; i < *ng; i++)
        if ((*g)[i].task == k.task && (*g)[i].T == k.T && (*g)[i].C == k.C &&
            (*g)[i].ffn == k.ffn && strcmp((*g)[i].variant, k.variant) == 0)
            break;
    if (i == *ng) {
        if (*ng == *cap) {
            int nc = *cap ? 2 * *cap : 16;
            group *p = realloc(*g, sizeof **g * (size_t)nc);
            if (!p)
                return fail_lib(c, "out of memory", 1);
            *g = p, *cap = nc;
        }
        k.steps_lo = k.steps_hi = r->steps;
        (*g)[(*ng)++] = k;
    }
    group *q = &(*g)[i];
    q->steps_lo = r->steps < q->steps_lo ? r->steps : q->steps_lo;
    q->steps_hi = r->steps > q->steps_hi ? r->steps : q->steps_hi;
    ba_running_add(&q->s, lab_shown(r->task, r->value));
    return 0;
}

/* The groups (task, variant, T, C, ffn) over seeds: the grid's cells in
 * grid order when DIR has a grid.json, else every finished run. */
static int collect_groups(const command *c, const char *dir, const lab_runs *rs, group **g,
                          int *ng, long *nruns)
{
    char path[PATH_LEN];
    int cap = 0, code = 0;
    *g = NULL, *ng = 0, *nruns = 0;
    if (mkpath(c, path, "%s/grid.json", dir))
        return 2;
    if (access(path, F_OK) == 0) {
        lab_grid grid;
        lab_cells cs = {0};
        if ((code = lab_grid_read(c, dir, &grid)) || (code = lab_cells_match(c, &grid, rs, &cs)))
            return code;
        for (int i = 0; i < cs.n && !code; i++)
            if (cs.cells[i].run && !(code = add_to_group(c, cs.cells[i].run, g, ng, &cap)))
                (*nruns)++;
        lab_cells_free(&cs);
    } else {
        for (int i = 0; i < rs->n && !code; i++)
            if (rs->v[i].finished && !(code = add_to_group(c, &rs->v[i], g, ng, &cap)))
                (*nruns)++;
    }
    if (!code && *ng == 0)
        code = usage_error(c, "no finished runs with a run record under %s/runs", dir);
    if (code) {
        free(*g);
        *g = NULL;
        return code;
    }
    qsort(*g, (size_t)*ng, sizeof **g, group_cmp);
    return 0;
}

/* plots/ is this command's own: the .dat and .gp files of an earlier call
 * go, so none is left that the figures no longer read. */
static void clear_plots(const command *c, const char *plots)
{
    DIR *pd = opendir(plots);
    for (struct dirent *e; pd && (e = readdir(pd));) {
        size_t n = strlen(e->d_name);
        char old[PATH_LEN];
        if (((n > 4 && strcmp(e->d_name + n - 4, ".dat") == 0) ||
             (n > 3 && strcmp(e->d_name + n - 3, ".gp") == 0)) &&
            !mkpath(c, old, "%s/%s", plots, e->d_name))
            unlink(old);
    }
    if (pd)
        closedir(pd);
}

/* Every figure's data and script; the jobs gnuplot runs. */
static int write_plots(const command *c, const char *plots, const group *g, int ng,
                       const lab_curves *cv, int Treq, int Creq, job *jobs, int *njobs)
{
    int maxjobs = 2 * ng + 4, code = write_summary(c, plots, g, ng);
    int *scratch = malloc(sizeof(int) * (size_t)(ng + 1));
    int *scratch2 = malloc(sizeof(int) * (size_t)(ng + 1));
    if (!scratch || !scratch2)
        code = fail_lib(c, "out of memory", 1);
    int tasks[3] = {0, 0, 0}; /* by ba_task */
    for (int i = 0; i < ng; i++)
        tasks[g[i].task] = 1;
    int several = tasks[0] + tasks[1] + tasks[2] > 1;
    for (int t = 0; t < 3 && !code; t++)
        if (tasks[t])
            code = figure_vs_T(c, plots, g, ng, (ba_task)t, scratch, jobs, njobs) ||
                   figures_vs_C(c, plots, g, ng, (ba_task)t, several, scratch, scratch2, jobs,
                                njobs, maxjobs - 4);
    int made = 0; /* checked before: 1 when a T or C was asked for */
    if (!code)
        code = lab_curves_write(c, plots, cv, Treq, Creq, &made);
    if (!code && made) {
        job *jb = &jobs[(*njobs)++];
        snprintf(jb->script, sizeof jb->script, "learning_curves.gp");
        snprintf(jb->png, sizeof jb->png, "learning_curves.png");
    }
    free(scratch), free(scratch2);
    return code;
}

int cmd_plot(int argc, char **argv)
{
    const command *c = &plot_cmd;
    const char *dir = NULL; /* the one positional argument */
    int rc = parse_args(c, argc, argv, &dir, 1, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    int Treq = 0, Creq = 0;
    if ((is_set(c, "curves-T") && get_int(c, "curves-T", 1, BA_MAX_BLOCK, &Treq)) ||
        (is_set(c, "curves-C") && get_int(c, "curves-C", 1, 1 << 16, &Creq)))
        return EXIT_USAGE;
    if (!dir || !*dir)
        return usage_error(c, "the ablation directory DIR is required");
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        fprintf(stderr, "%s %s: cannot open %s: %s\n", prog, c->cmd, dir, strerror(errno));
        return 2;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s %s: %s is not a directory\n", prog, c->cmd, dir);
        return 2;
    }
    char plots[PATH_LEN], err[BA_ERR_LEN];
    if (mkpath(c, plots, "%s/plots", dir))
        return 2;
    lab_runs rs;
    group *g = NULL;
    lab_curves *cv = NULL;
    int ng = 0, nruns = 0, njobs = 0;
    long nfinished = 0;
    job *jobs = NULL;
    lab_xfigure *xf = NULL;
    int code = lab_runs_scan(c, dir, &rs);
    if (!code)
        code = collect_groups(c, dir, &rs, &g, &ng, &nfinished);
    if (!code)
        code = lab_curves_read(c, &rs, &cv, &nruns);
    if (!code)
        code = lab_curves_check(c, dir, cv, Treq, Creq);
    if (!code)
        code = lab_xfigure_read(c, dir, &xf);
    /* at most: 3 vs-T figures, one width figure per (task, T), curves,
     * extrapolation */
    if (!code && !(jobs = calloc((size_t)(2 * ng + 5), sizeof *jobs)))
        code = fail_lib(c, "out of memory", 1);
    if (!code && make_dirs(plots, err))
        code = fail_lib(c, err, 1);
    if (code)
        goto done;
    clear_plots(c, plots);
    printf("%s: %ld runs in %d groups\n", dir, nfinished, ng);
    printf("%-9s %-10s %5s %6s %4s %5s  %-22s %10s %9s\n", "task", "variant", "T", "C", "ffn",
           "seeds", "metric", "mean", "sd");
    for (int i = 0; i < ng; i++)
        printf("%-9s %-10s %5d %6d %4d %5ld  %-22s %10.4f %9.4f\n", ba_task_name(g[i].task),
               g[i].variant, g[i].T, g[i].C, g[i].ffn, g[i].s.n,
               g[i].task == BA_TASK_CHARLM ? "val perplexity" : "accuracy %", g[i].s.mean,
               ba_running_sd(&g[i].s));
    if ((code = write_plots(c, plots, g, ng, cv, Treq, Creq, jobs, &njobs)))
        goto done;
    int xmade = 0;
    if ((code = lab_xfigure_write(c, plots, xf, &xmade)))
        goto done;
    if (xmade) {
        snprintf(jobs[njobs].script, sizeof jobs[0].script, "extrapolation.gp");
        snprintf(jobs[njobs++].png, sizeof jobs[0].png, "extrapolation.png");
    }
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
        if (run_gnuplot(c, plots, jobs[i].script))
            code = 1;
        else
            printf("plot: %s/%s\n", dir, jobs[i].png);
    }
done:
    free(g);
    lab_curves_free(cv);
    free(jobs);
    lab_xfigure_free(xf);
    lab_runs_free(&rs);
    return code;
}
