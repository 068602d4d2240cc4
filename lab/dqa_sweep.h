/* The dqa calibration's sweep and results (dqa_calibrate.c runs it,
 * dqa_sweep.c writes its files). */
#ifndef BA_LAB_DQA_SWEEP_H
#define BA_LAB_DQA_SWEEP_H

#include "grid.h"

#define MAX_LIST 32

/* The measures of one instance and setting, in CSV order: TV(dqa, exact),
 * KL(dqa || exact), beta_eff, r2, TV(dqa, Boltzmann(beta_eff)), TV(dqa,
 * dqa with --ref-steps) (NAN without --ref-steps). */
enum { M_TV, M_KL, M_BETA, M_R2, M_TVB, M_TVT, NMEAS };
typedef struct {
    double v[NMEAS];
} result;

/* The sweep's settings: lambda x M x tau, one gamma and Trotter order. */
typedef struct {
    double tau[MAX_LIST], steps[MAX_LIST], lam[MAX_LIST], gamma;
    int nt, nm, nl, order, ref_steps;
} sweep;

/* Setting s of the sweep, ordered lambda, M, tau. */
static inline int n_settings(const sweep *w) { return w->nl * w->nm * w->nt; }

/* DIR/dqa.dat and DIR/dqa.gp: TV and beta_eff against tau, one curve per
 * (lambda, M); stv and sb the summaries per setting. 0 or 1 after
 * printing. */
int dqa_write_plot_files(const command *c, const char *dir, const sweep *w,
                         const ba_summary *stv, const ba_summary *sb, int n, int K,
                         const char *source);
/* DIR/dqa.csv: a row per instance and setting, then the mean and sd rows. */
int dqa_write_csv(const command *c, const char *dir, const sweep *w, const result *res,
                  const ba_summary *sm, int K, int n);

#endif
