/* Figures drawn by gnuplot from .dat files: a figure is one or more
 * panels, a panel the blocks (one per variant) of one .dat file whose
 * first four columns are x, n, mean, sd. Scripts name their files relative
 * to their own directory (gnuplot runs there), so no user path appears in
 * one. */
#ifndef BA_FIGURE_H
#define BA_FIGURE_H

#include "grid.h"

#define MAX_VARIANTS 16

/* One panel of a figure: the blocks (one per variant, in `index` order) of
 * one .dat file whose first four columns are x, n, mean, sd. */
typedef struct {
    char dat[128];
    char title[160];
    char ylabel[64];
    int logy;
    double ylo, yhi; /* extent of the panel's points (mean -+ sd, or a range) */
    int nvar;
    char var[MAX_VARIANTS][64];
    /* Learning curves (finals = 1): block curve[v] holds variant v's
     * periodic evaluations, drawn as a line, and block fin[v] its final
     * evaluation on the whole set, drawn as a point apart (never joined to
     * the line: it is measured on other items); -1: no such block. Blocks
     * run0[v] .. run0[v] + nrun[v] - 1 hold each run's periodic
     * evaluations (columns step, value), drawn as thin lines. With
     * finals = 0 block v is variant v's series. */
    int finals;
    int curve[MAX_VARIANTS], fin[MAX_VARIANTS];
    int run0[MAX_VARIANTS], nrun[MAX_VARIANTS];
    long fin_items; /* items of the final evaluations (0: not the same in every run) */
    double fin_dx;  /* x distance between neighbouring variants' final points */
} panel;

typedef struct {
    const char *script; /* NAME.gp in plots/ */
    const char *png;    /* written as ../PNG */
    char title[256]; /* first line */
    char note[256];  /* last line (after the panel title when there is one panel) */
    const char *xlabel;
    int logx;        /* log2 x axis (C) */
    int spread;      /* offset the variants' x slightly so error bars do not overlap */
    int share_y;     /* one y range for all panels (they show the same metric) */
    char xtics[512]; /* "(4, 8, 12)" or "" for automatic */
    double mingap;   /* smallest gap between x values (additive) or ratio (log) */
    double xlo, xhi; /* the x values' extent (xlo > xhi: automatic) */
} figure;

void panel_init(panel *p);
/* Widens the panel's y extent by one point's mean -+ sd (on a log axis the
 * lower end stays positive: the smallest value when mean - sd is not). */
void panel_extent(panel *p, const ba_running *s);
/* Widens the panel's y extent to [lo, hi] (on a log axis only positive
 * values count). */
void panel_span(panel *p, double lo, double hi);
/* Distinct x values (sorted) as a gnuplot tics list, and their smallest
 * gap or ratio. */
void set_xtics(figure *fg, const int *xs, int n);
/* plots/SCRIPT drawing the panels into ../PNG. 0, or 1 after printing. */
int write_figure(const command *c, const char *plots, const figure *fg, const panel *p, int np);

/* Variant names come from records: only plain tokens (safe inside gnuplot
 * strings and file names); the known variants' order, colours and points. */
int plain_token(const char *s, size_t max);
int variant_cmp(const char *a, const char *b);
const char *variant_color(const char *v, int idx);
int variant_point(const char *v, int idx);
/* The order of plotted series: task, variant, FFN first, then C and T. */
int series_cmp(ba_task ta, const char *va, int ffna, int Ca, int Ta, ba_task tb, const char *vb,
               int ffnb, int Cb, int Tb);
/* "N seeds, S steps" (ranges where they differ), into out. */
void budget_text(char *out, size_t n, long seeds_lo, long seeds_hi, long steps_lo,
                 long steps_hi);

/* The learning curves (plot_curves.c): the periodic and final evaluations
 * in the metrics.jsonl of the runs in rs (*nruns: how many runs have
 * one; lab_curves_free). lab_curves_check: --curves-T / --curves-C
 * (0: not asked) must name runs with curves, checked before anything is
 * written. lab_curves_write: per task the panels of the largest T and C
 * (or Treq / Creq) as plots/curves_*.dat and plots/learning_curves.gp
 * drawing ../learning_curves.png, *made 1 when there is a panel. All: 0,
 * or an exit code after printing. */
typedef struct lab_curves lab_curves;
int lab_curves_read(const command *c, const lab_runs *rs, lab_curves **out, int *nruns);
int lab_curves_check(const command *c, const char *dir, const lab_curves *cv, int Treq, int Creq);
int lab_curves_write(const command *c, const char *plots, const lab_curves *cv, int Treq,
                     int Creq, int *made);
void lab_curves_free(lab_curves *cv);

/* The length-extrapolation figure (plot_extrap.c): DIR/extrapolation.json
 * read whole (*out NULL when the grid has none; lab_xfigure_free), then
 * plots/extrapolation.dat and .gp drawing ../extrapolation.png, *made 1
 * when it has a finished entry. Both: 0, or an exit code after printing
 * (a damaged file: 2, before anything is written). */
typedef struct lab_xfigure lab_xfigure;
int lab_xfigure_read(const command *c, const char *dir, lab_xfigure **out);
int lab_xfigure_write(const command *c, const char *plots, const lab_xfigure *f, int *made);
void lab_xfigure_free(lab_xfigure *f);

#endif
