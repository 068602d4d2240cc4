/* The figures of the lab: gnuplot scripts of panels of series with
 * error bars, written beside the data they read (see figure.h). */
#include "figure.h"

#include <math.h>
#include <string.h>

/* Variant names come from files: allow only plain tokens, which are safe
 * inside gnuplot strings and file names. */
int plain_token(const char *s, size_t max)
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

/* The order of series: the known variants, each followed by its forms
 * (softmax-rope after softmax: the name before the first '-'), then the
 * rest. */
static int order_rank(const char *v)
{
    int r = variant_rank(v);
    if (r < 4)
        return 2 * r;
    char base[16];
    size_t n = strcspn(v, "-");
    if (n >= sizeof base)
        return 8;
    memcpy(base, v, n);
    base[n] = '\0';
    return 2 * variant_rank(base) + 1;
}

int variant_cmp(const char *a, const char *b)
{
    int ra = order_rank(a), rb = order_rank(b);
    return ra != rb ? (ra < rb ? -1 : 1) : strcmp(a, b);
}

int series_cmp(ba_task ta, const char *va, int ffna, int Ca, int Ta, ba_task tb, const char *vb,
               int ffnb, int Cb, int Tb)
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

void budget_text(char *out, size_t n, long seeds_lo, long seeds_hi, long steps_lo,
                 long steps_hi)
{
    char sd[48], st[48];
    if (seeds_lo == seeds_hi)
        snprintf(sd, sizeof sd, "%ld seed%s", seeds_lo, seeds_lo == 1 ? "" : "s");
    else
        snprintf(sd, sizeof sd, "%ld-%ld seeds", seeds_lo, seeds_hi);
    if (steps_lo == steps_hi)
        snprintf(st, sizeof st, "%ld steps", steps_lo);
    else
        snprintf(st, sizeof st, "%ld-%ld steps", steps_lo, steps_hi);
    snprintf(out, n, "%s, %s", sd, st);
}

const char *variant_color(const char *v, int idx)
{
    static const char *const known[] = {"#1f77b4", "#ff7f0e", "#d62728", "#2ca02c"};
    static const char *const other[] = {"#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf"};
    int r = variant_rank(v);
    return r < 4 ? known[r] : other[idx % 5];
}

/* Filled points whose open form is the number before (a final evaluation's):
 * the known variants' own, the others' by their index, as their colours. */
int variant_point(const char *v, int idx)
{
    static const int known[] = {7, 5, 9, 13}, other[] = {11, 15, 5, 7, 9};
    int r = variant_rank(v);
    return r < 4 ? known[r] : other[idx % 5];
}

void panel_init(panel *p)
{
    memset(p, 0, sizeof *p);
    p->ylo = INFINITY, p->yhi = -INFINITY;
}

/* Widens the panel's y extent by one point's mean -+ sd (on a log axis the
 * lower end stays positive: the smallest value when mean - sd is not). */
void panel_extent(panel *p, const ba_running *s)
{
    double sd = ba_running_sd(s), lo = s->mean - sd;
    if (p->logy && lo <= 0)
        lo = s->min;
    panel_span(p, lo, s->mean + sd);
}

void panel_span(panel *p, double lo, double hi)
{
    if (!p->logy || lo > 0)
        p->ylo = fmin(p->ylo, lo);
    p->yhi = fmax(p->yhi, hi);
}

/* Distinct x values (sorted) as a gnuplot tics list, and their smallest
 * gap or ratio. */
void set_xtics(figure *fg, const int *xs, int n)
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

/* Tics of a log y axis. Within a decade (a learning curve of perplexity,
 * say 6.8 to 10), evenly spaced tics at a round step (1, 2, 2.5 or 5 times
 * a power of ten) give five to eleven labels; across decades, 1-1.5-2-3-4-5-7
 * x 10^k (1-2-5 when that makes too many). */
static void log_tics(FILE *f, double lo, double hi)
{
    static const double fine[] = {1, 1.5, 2, 3, 4, 5, 7}, coarse[] = {1, 2, 5};
    if (!(lo > 0 && hi > lo))
        return;
    if (hi / lo < 10) {
        /* the largest round step that fits five times: at most twice
         * smaller than a fifth of the range, so five to eleven labels */
        static const double mult[] = {1, 2, 2.5, 5};
        double raw = (hi - lo) / 5, step = 0;
        double p10 = pow(10, floor(log10(raw)));
        for (int i = 0; i < 4; i++)
            if (mult[i] * p10 <= raw * (1 + 1e-12))
                step = mult[i] * p10;
        fprintf(f, "set ytics (");
        int first = 1;
        for (double k = ceil(lo / step); k * step <= hi * (1 + 1e-12); k++) {
            fprintf(f, "%s%.6g", first ? "" : ", ", k * step);
            first = 0;
        }
        fprintf(f, ")\n");
        return;
    }
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

/* How a series is drawn: a line with sd error bars (a vs-T or vs-C
 * figure), a learning curve's mean line (its runs drawn beside it), or a
 * final evaluation's mean as an open point with the runs' range as its
 * bar. */
enum { SERIES_SD, SERIES_MEAN, SERIES_FINAL };

/* One series of a panel: block `index` of its .dat at x (a gnuplot
 * expression), drawn as `how` says; a final is never joined to anything
 * and has no key entry of its own (the panel has one for all). */
static void plot_series(FILE *f, const panel *q, int v, int index, const char *x, int how,
                        int first)
{
    static const char *const using[] = {"3:4", "3", "3:5:6"};
    static const char *const style[] = {"yerrorlines", "linespoints", "yerrorbars"};
    /* a final's point: the open form of the variant's filled one */
    fprintf(f,
            "%s'%s' index %d using %s:%s with %s linewidth 2 pointtype %d pointsize %s "
            "linecolor rgb \"%s\" ",
            first ? "" : ", \\\n     ", q->dat, index, x, using[how], style[how],
            variant_point(q->var[v], v) - (how == SERIES_FINAL),
            how == SERIES_FINAL ? "2" : "1.2", variant_color(q->var[v], v));
    if (how == SERIES_FINAL)
        fprintf(f, "notitle");
    else
        fprintf(f, "title \"%s\" noenhanced", q->var[v]);
}

/* Each run's learning curve as a thin, half-transparent line in its
 * variant's colour, without a key entry: drawn first, beneath the
 * means. */
static int plot_runs(FILE *f, const panel *q, int first)
{
    for (int v = 0; v < q->nvar; v++)
        for (int r = 0; r < q->nrun[v]; r++) {
            fprintf(f,
                    "%s'%s' index %d using 1:2 with lines linewidth 1 linecolor rgb \"#80%s\" "
                    "notitle",
                    first ? "" : ", \\\n     ", q->dat, q->run0[v] + r,
                    variant_color(q->var[v], v) + 1);
            first = 0;
        }
    return first;
}

/* The plot command of one panel: a series per variant (learning curves:
 * each run's periodic evaluations, their mean as a line, the final
 * evaluation apart, and one key entry for the finals). */
static void plot_panel(FILE *f, const figure *fg, const panel *q)
{
    fprintf(f, "plot ");
    int first = 1, finals = 0;
    if (q->finals)
        first = plot_runs(f, q, first);
    for (int v = 0; v < q->nvar; v++) {
        double rel = q->nvar > 1 ? v - (q->nvar - 1) / 2.0 : 0;
        char x[64];
        if (!fg->spread)
            snprintf(x, sizeof x, "1");
        else if (fg->logx)
            snprintf(x, sizeof x, "($1*%.6g)", pow(fg->mingap, 0.04 * rel));
        else
            snprintf(x, sizeof x, "($1%+.6g)", 0.04 * rel * fg->mingap);
        if (!q->finals) {
            plot_series(f, q, v, v, x, SERIES_SD, first);
            first = 0;
            continue;
        }
        if (q->curve[v] >= 0) {
            plot_series(f, q, v, q->curve[v], x, SERIES_MEAN, first);
            first = 0;
        }
        if (q->fin[v] >= 0) {
            snprintf(x, sizeof x, "($1%+.6g)", rel * q->fin_dx);
            plot_series(f, q, v, q->fin[v], x, SERIES_FINAL, first);
            first = 0, finals = 1;
        }
    }
    if (finals) { /* a key entry only (NaN draws nothing) */
        char items[48] = "all items";
        if (q->fin_items > 0)
            snprintf(items, sizeof items, "all %ld items", q->fin_items);
        fprintf(f,
                ", \\\n     NaN with points pointtype 6 pointsize 2 linewidth 2 linecolor rgb "
                "\"black\" title \"final, %s\"",
                items);
    }
    fprintf(f, "\n");
}

int write_figure(const command *c, const char *plots, const figure *fg, const panel *p, int np)
{
    char path[PATH_LEN], png[PATH_LEN];
    out_file o;
    if (mkpath(c, png, "../%s", fg->png) || mkpath(c, path, "%s/%s", plots, fg->script) ||
        out_open(c, &o))
        return 1;
    FILE *f = o.f;
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
            fprintf(f, "set title \"%s\\n%s\\n%s\"\n", fg->title, q->title, fg->note);
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
        plot_panel(f, fg, q);
    }
    if (np > 1)
        fprintf(f, "unset multiplot\n");
    return out_close(c, &o, path);
}

