/* The couplings analysis (boltzattn couplings) in two halves:
 * couplings.c reads checkpoints into the accumulator below and picks a
 * grid's runs; couplings_out.c writes the files, the table and the
 * figures' scripts from it. */
#ifndef BA_LAB_COUPLINGS_H
#define BA_LAB_COUPLINGS_H

#include "grid.h"

/* The couplings of one or more checkpoints of the same shape, accumulated
 * as they are loaded (only one model is held at a time). */
typedef struct {
    ba_model *model0;      /* first checkpoint's model (its config) */
    ba_task task;
    const char *path0;     /* first checkpoint's path */
    int L, H, T, runs;
    int rel;               /* relative couplings (J_rel), else absolute (J) */
    int band;              /* the models' band W, 0: none */
    int D;                 /* distances shown: 1..D (W, or T - 1 without a band) */
    /* distance-indexed arrays have D + 1 entries, d = 0 unused */
    ba_running *pair;      // (L,H,T,D+1) J_j,j+d over runs (absolute only)
    ba_running *dist;      // (L,H,D+1) J at distance d, pooled over pairs and runs
    ba_running *all;       // (D+1) the same over all layers and heads
    double *runmean;       // (runs,D+1) each run's mean J at distance d
    ba_summary *over;      // (D+1) per distance, each run's mean over the runs
    int *positive;         // (D+1) runs whose mean J at d is positive
} couplings_acc;

/* Every file of the analysis into dir (created): the pair or distance
 * files per head, distance.csv, distance_runs.csv (several runs),
 * runs.txt, the gnuplot scripts and couplings.json. 0 or 1 after
 * printing. */
int couplings_write_files(const command *c, const char *dir, const couplings_acc *a,
                          const char **ckpts, int n);
/* The table by distance on stdout, and the paper's sign pattern next to
 * it. */
void couplings_print_table(const couplings_acc *a, const char **ckpts, int n);
/* Whether the analysis has the T x T matrices and heatmaps (absolute
 * couplings without a band, or with one up to T = 64). */
int couplings_has_heatmap(const couplings_acc *a);

#endif
