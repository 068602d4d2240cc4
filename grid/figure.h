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
    double ylo, yhi; /* extent of mean -+ sd over the panel's points */
    int nvar;
    char var[MAX_VARIANTS][64];
    /* Learning curves (finals = 1): block curve[v] holds variant v's
     * periodic evaluations, drawn as a line, and block fin[v] its final
     * evaluation on the whole set, drawn as a point apart (never joined to
     * the line: it is measured on other items); -1: no such block. With
     * finals = 0 block v is variant v's series. */
    int finals;
    int curve[MAX_VARIANTS], fin[MAX_VARIANTS];
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
