/* The learning curves of `boltzattn plot`: every validation record of the
 * runs' metrics.jsonl, one panel per (task, T, C, ffn) drawn. Per variant
 * the mean over its runs at each periodic evaluation (a line with points),
 * each run's own curve beside it (a thin line: with a handful of seeds a
 * mean ± sd hides what the runs did, e.g. one seed that solved a task and
 * one that did not, and its bars leave the metric's range), and the final
 * evaluation on all items apart (the mean as an open point, its bar the
 * runs' range). */
#include "figure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One validation point of one run's metrics.jsonl: a periodic evaluation
 * (the same subset of the items every time) or the final one (all items). */
typedef struct {
    ba_task task;
    char variant[64];
    int T, C, ffn;
    long step;
    double v;
    int final;     /* the final evaluation */
    int items;     /* items it was measured on */
    long steps;    /* the run's training steps */
    int run;       /* index of its run in the scan (directory order) */
    uint64_t seed; /* its run's seed */
} cpoint;

struct lab_curves {
    cpoint *pts; /* sorted by cpoint_cmp once read */
    int np;
};

/* Within a series, the periodic evaluations by step, then the final ones;
 * at one step the runs in scan order (the means add in a fixed order). */
static int cpoint_cmp(const void *pa, const void *pb)
{
    const cpoint *a = pa, *b = pb;
    int c = series_cmp(a->task, a->variant, a->ffn, a->C, a->T, b->task, b->variant, b->ffn, b->C,
                       b->T);
    if (c)
        return c;
    if (a->final != b->final)
        return a->final - b->final;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    return a->run < b->run ? -1 : a->run > b->run;
}

static int add_point(const command *c, lab_curves *cv, int *cap, const cpoint *q)
{
    if (cv->np == *cap) {
        int nc = *cap ? 2 * *cap : 256;
        cpoint *p = realloc(cv->pts, sizeof *p * (size_t)nc);
        if (!p)
            return fail_lib(c, "out of memory", 1);
        cv->pts = p, *cap = nc;
    }
    cv->pts[cv->np++] = *q;
    return 0;
}

int lab_curves_read(const command *c, const lab_runs *rs, lab_curves **out, int *nruns)
{
    int cap = 0, code = 0;
    *out = NULL, *nruns = 0;
    lab_curves *cv = calloc(1, sizeof *cv);
    if (!cv)
        return fail_lib(c, "out of memory", 1);
    for (int i = 0; i < rs->n && !code; i++) {
        const lab_run *r = &rs->v[i];
        ba_record *recs;
        int n, before = cv->np;
        if ((code = lab_metrics_read(c, r->dir, &recs, &n)))
            break;
        for (int k = 0; k < n && !code; k++) {
            const ba_record *e = &recs[k];
            double v = r->task == BA_TASK_CHARLM ? e->eval.ppl : e->eval.accuracy;
            if ((e->kind != BA_REC_EVAL && e->kind != BA_REC_FINAL) || !isfinite(v))
                continue;
            cpoint q;
            memset(&q, 0, sizeof q);
            q.task = r->task, q.T = r->T, q.C = r->C, q.ffn = r->ffn;
            lab_run_variant(r, q.variant, sizeof q.variant);
            q.step = e->step;
            q.v = v * (r->task == BA_TASK_CHARLM ? 1 : 100); /* accuracy in % */
            q.final = e->kind == BA_REC_FINAL;
            q.items = e->eval.n_items;
            q.steps = r->steps;
            q.run = i, q.seed = r->seed;
            code = add_point(c, cv, &cap, &q);
        }
        free(recs);
        *nruns += cv->np > before;
    }
    if (code) {
        lab_curves_free(cv);
        return code;
    }
    qsort(cv->pts, (size_t)cv->np, sizeof *cv->pts, cpoint_cmp);
    *out = cv;
    return 0;
}

void lab_curves_free(lab_curves *cv)
{
    if (cv)
        free(cv->pts);
    free(cv);
}

int lab_curves_check(const command *c, const char *dir, const lab_curves *cv, int Treq, int Creq)
{
    if (!Treq && !Creq)
        return 0;
    for (int i = 0; i < cv->np; i++)
        if ((!Treq || cv->pts[i].T == Treq) && (!Creq || cv->pts[i].C == Creq))
            return 0;
    char want[64] = "";
    if (Treq)
        snprintf(want, sizeof want, " T=%d", Treq);
    if (Creq)
        snprintf(want + strlen(want), sizeof want - strlen(want), " C=%d", Creq);
    return usage_error(c, "no runs with learning curves at%s in %s", want, dir);
}

/* What the runs of one learning-curve panel share, gathered while its
 * .dat is written: 0 not seen yet, -1 not the same in every run. */
typedef struct {
    long seeds_lo, seeds_hi, steps_lo, steps_hi;
    long items, fin_items; /* of the periodic and of the final evaluations */
} curve_info;

static void same_or_mixed(long *have, long v)
{
    *have = *have == 0 || *have == v ? v : -1;
}

/* The points [k0, k1) of one variant, all periodic or all final, as one
 * .dat block: per step, n mean sd min max over the runs. The panel's y
 * extent takes the runs' range (their own curves are drawn). Returns the
 * largest n (the variant's runs). */
static long write_mean_block(FILE *f, panel *p, const cpoint *pts, int k0, int k1,
                             curve_info *ci)
{
    long nmax = 0;
    for (int k = k0; k < k1;) {
        ba_running s = {0, 0, 0, 0, 0};
        int e = k;
        for (; e < k1 && pts[e].step == pts[k].step; e++) {
            ba_running_add(&s, pts[e].v);
            same_or_mixed(pts[e].final ? &ci->fin_items : &ci->items, pts[e].items);
            if (!ci->steps_hi || pts[e].steps < ci->steps_lo)
                ci->steps_lo = pts[e].steps;
            ci->steps_hi = pts[e].steps > ci->steps_hi ? pts[e].steps : ci->steps_hi;
        }
        fprintf(f, "%ld %ld %.9g %.9g %.9g %.9g\n", pts[k].step, s.n, s.mean, ba_running_sd(&s),
                s.min, s.max);
        panel_span(p, s.min, s.max);
        if (pts[k].final)
            p->fin_dx = fmax(p->fin_dx, 0.012 * (double)pts[k].step);
        nmax = s.n > nmax ? s.n : nmax;
        k = e;
    }
    return nmax;
}

typedef struct {
    int run;
    uint64_t seed;
} run_key;

static int run_key_cmp(const void *pa, const void *pb)
{
    const run_key *a = pa, *b = pb;
    if (a->seed != b->seed)
        return a->seed < b->seed ? -1 : 1;
    return a->run < b->run ? -1 : a->run > b->run;
}

/* The periodic points [k0, k1) of one variant as one block per run, in
 * seed order ("step value"), after the blocks already written (*blk
 * counts them). Returns the number of blocks, or -1 out of memory. */
static int write_run_blocks(FILE *f, const cpoint *pts, int k0, int k1, int *blk)
{
    run_key *keys = malloc(sizeof *keys * (size_t)(k1 - k0 + 1));
    int nk = 0;
    if (!keys)
        return -1;
    for (int k = k0; k < k1; k++) {
        int seen = 0;
        for (int j = 0; j < nk && !seen; j++)
            seen = keys[j].run == pts[k].run;
        if (!seen)
            keys[nk++] = (run_key){pts[k].run, pts[k].seed};
    }
    qsort(keys, (size_t)nk, sizeof *keys, run_key_cmp);
    for (int j = 0; j < nk; j++) {
        fprintf(f, "\n\n# variant %s\n# periodic evaluations, run of seed %llu\n",
                pts[k0].variant, (unsigned long long)keys[j].seed);
        for (int k = k0; k < k1; k++) /* by step already */
            if (pts[k].run == keys[j].run)
                fprintf(f, "%ld %.9g\n", pts[k].step, pts[k].v);
        (*blk)++;
    }
    free(keys);
    return nk;
}

/* One variant's blocks in the panel's .dat: [i, j) its points, sorted. */
static int write_variant(const command *c, FILE *f, panel *p, const cpoint *pts, int i, int j,
                         int *blk, curve_info *ci)
{
    int v = p->nvar++, m;
    long runs = 0, n;
    snprintf(p->var[v], sizeof p->var[0], "%s", pts[i].variant);
    p->curve[v] = p->fin[v] = -1;
    p->run0[v] = p->nrun[v] = 0;
    for (m = i; m < j && !pts[m].final;)
        m++;
    if (m > i) {
        fprintf(f, "%s# variant %s\n# periodic evaluations, over the runs\n", *blk ? "\n\n" : "",
                pts[i].variant);
        p->curve[v] = (*blk)++;
        runs = write_mean_block(f, p, pts, i, m, ci);
        p->run0[v] = *blk;
        if ((p->nrun[v] = write_run_blocks(f, pts, i, m, blk)) < 0)
            return fail_lib(c, "out of memory", 1);
    }
    if (j > m) {
        fprintf(f, "%s# variant %s\n# final evaluation, all items, over the runs\n",
                *blk ? "\n\n" : "", pts[i].variant);
        p->fin[v] = (*blk)++;
        n = write_mean_block(f, p, pts, m, j, ci);
        runs = n > runs ? n : runs;
    }
    if (!ci->seeds_hi || runs < ci->seeds_lo)
        ci->seeds_lo = runs;
    ci->seeds_hi = runs > ci->seeds_hi ? runs : ci->seeds_hi;
    return 0;
}

/* One learning-curve panel (task, T, C, ffn) and its .dat: per variant a
 * block of its periodic evaluations over the runs (the same items every
 * time), a block per run of the same, and a block of its final
 * evaluation (all items), which the figure draws apart. */
static int write_panel(const command *c, const char *plots, const lab_curves *cv, ba_task task,
                       int T, int C, int ffn, panel *p, curve_info *ci)
{
    const cpoint *pts = cv->pts;
    int np = cv->np;
    panel_init(p);
    memset(ci, 0, sizeof *ci);
    p->finals = 1;
    snprintf(p->dat, sizeof p->dat, "curves_%s_T%d_C%d_ffn%d.dat", ba_task_name(task), T, C, ffn);
    snprintf(p->ylabel, sizeof p->ylabel, "%s",
             task == BA_TASK_CHARLM ? "validation perplexity (lower is better)"
                                    : "validation accuracy, % (higher is better)");
    p->logy = task == BA_TASK_CHARLM;
    char path[PATH_LEN];
    out_file o;
    if (mkpath(c, path, "%s/%s", plots, p->dat) || out_open(c, &o))
        return 1;
    FILE *f = o.f;
    fprintf(f, "# learning curves %s, T=%d, C=%d, %s: eval records of runs/*/metrics.jsonl; "
               "per variant a block of the periodic evaluations (the same items every time) "
               "over the runs, a block of each run's own, and a block of the final evaluation "
               "(all items), not to be joined\n"
               "# columns: step n mean sd min max over the runs, or step value for one run  "
               "(%s)\n",
            ba_task_name(task), T, C, ffn ? "with FFN" : "without FFN", p->ylabel);
    int blk = 0, code = 0;
    for (int i = 0; i < np && !code;) {
        const cpoint *a = &pts[i];
        int j = i;
        while (j < np && pts[j].task == a->task && pts[j].T == a->T && pts[j].C == a->C &&
               pts[j].ffn == a->ffn && strcmp(pts[j].variant, a->variant) == 0)
            j++;
        if (a->task == task && a->T == T && a->C == C && a->ffn == ffn &&
            p->nvar < MAX_VARIANTS)
            code = write_variant(c, f, p, pts, i, j, &blk, ci);
        i = j;
    }
    if (code) { /* nothing written at path */
        out_discard(&o);
        return code;
    }
    p->fin_items = ci->fin_items > 0 ? ci->fin_items : 0;
    char budget[128];
    budget_text(budget, sizeof budget, ci->seeds_lo, ci->seeds_hi, ci->steps_lo, ci->steps_hi);
    snprintf(p->title, sizeof p->title, "%s, T=%d, C=%d%s: %s", ba_task_name(task), T, C,
             ffn ? "" : ", without FFN", budget);
    return out_close(c, &o, path);
}

int lab_curves_write(const command *c, const char *plots, const lab_curves *cv, int Treq,
                     int Creq, int *made)
{
    *made = 0;
    const cpoint *pts = cv->pts;
    int np = cv->np;
    panel pn[6]; /* (task, ffn) */
    int npan = 0;
    long items = 0; /* of the periodic evaluations, over the panels */
    for (int t = 0; t < 3; t++) {
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
            curve_info ci;
            if (!has[ffn])
                continue;
            if (write_panel(c, plots, cv, task, Tsel, Csel, ffn, &pn[npan++], &ci))
                return 1;
            if (ci.items)
                same_or_mixed(&items, ci.items);
        }
    }
    if (!npan)
        return 0;
    figure fg = {"learning_curves.gp",
                 "learning_curves.png",
                 "validation metric during training (thick: mean over seeds; thin: each seed)",
                 "",
                 "training step",
                 0,
                 0,
                 0,
                 "",
                 1,
                 1,
                 0};
    char subset[48] = "a fixed subset of the items";
    if (items > 0)
        snprintf(subset, sizeof subset, "the same %ld items", items);
    snprintf(fg.note, sizeof fg.note,
             "lines: periodic evaluations on %s\\nopen points: final evaluation on all "
             "items (bar: the seeds' range)",
             subset);
    *made = 1;
    return write_figure(c, plots, &fg, pn, npan);
}
