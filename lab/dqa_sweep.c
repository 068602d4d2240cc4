/* The dqa calibration's output files: dqa.dat and dqa.gp (the figure
 * gnuplot draws as dqa.png) and dqa.csv. */
#include "dqa_sweep.h"

#include <string.h>

/* Curve colours of the plot. */
static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#17becf", "#bcbd22"};

int dqa_write_plot_files(const command *c, const char *dir, const sweep *w,
                         const ba_summary *stv, const ba_summary *sb, int n, int K,
                         const char *source)
{
    const double *lam = w->lam, *steps = w->steps, *tau = w->tau;
    int nl = w->nl, nm = w->nm, nt = w->nt;
    char path[PATH_LEN];
    out_file o;
    FILE *f = out_openf(c, &o, path, "%s/dqa.dat", dir);
    if (!f)
        return 1;
    fprintf(f, "# boltzattn-lab dqa: one block per (lambda, M) (gnuplot index), rows by tau\n"
               "# tau tv_mean tv_sd beta_eff_mean beta_eff_sd\n");
    int allpos = 1;
    for (int li = 0; li < nl; li++)
        for (int mi = 0; mi < nm; mi++) {
            fprintf(f, "# lambda = %g, M = %g\n", lam[li], steps[mi]);
            for (int ti = 0; ti < nt; ti++) {
                int s = (li * nm + mi) * nt + ti;
                fprintf(f, "%.9g %.9g %.9g %.9g %.9g\n", tau[ti], stv[s].mean,
                        K > 1 ? stv[s].sd : 0.0, sb[s].mean, K > 1 ? sb[s].sd : 0.0);
                allpos &= sb[s].mean > 0;
            }
            fprintf(f, "\n\n");
        }
    if (out_close(c, &o, path) || !(f = out_openf(c, &o, path, "%s/dqa.gp", dir)))
        return 1;
    gp_header(f, "dqa.gp", "dqa.png", 1300, 560);
    fprintf(f,
            "set multiplot layout 1,2 title \"simulated DQA vs the exact β = 1 distribution "
            "(%s, n = %d, %d instance%s, Γ = %g, order %d; mean ± sd over instances)\"\n"
            "set grid\n"
            "set key bottom left box opaque\n"
            "set xlabel \"anneal time τ\"\n",
            source, n, K, K == 1 ? "" : "s", w->gamma, w->order);
    if (nt > 1)
        fprintf(f, "set logscale x 2\n");
    else /* one tau: give the single points some room */
        fprintf(f, "set xrange [%g:%g]\n", 0.5 * tau[0], 1.5 * tau[0]);
    fprintf(f, "set ylabel \"total variation distance to the β = 1 target\"\n"
               "set yrange [0:1]\n"
               "plot ");
    int nc = nl * nm;
    /* colour by lambda, dashes and points by M */
    static const int pts[] = {7, 5, 9, 13, 11, 15};
    for (int i = 0; i < nc; i++)
        fprintf(f,
                "%s'dqa.dat' index %d using 1:2:3 with yerrorlines linewidth 2 dashtype %d "
                "pointtype %d linecolor rgb \"%s\" title \"M = %g, λ = %g\"",
                i ? ", \\\n     " : "", i, i % nm % 5 + 1, pts[i % nm % 6], colors[i / nm % 10],
                steps[i % nm], lam[i / nm]);
    fprintf(f, "\nset ylabel \"effective inverse temperature β_{eff}\"\n"
               "set autoscale y\n"
               "set key top left box opaque\n");
    if (allpos)
        fprintf(f, "set logscale y 10\n");
    else
        fprintf(f, "unset logscale y\n");
    fprintf(f, "plot 1 with lines dashtype 2 linecolor rgb \"black\" title \"target β = 1\"");
    for (int i = 0; i < nc; i++)
        fprintf(f,
                ", \\\n     'dqa.dat' index %d using 1:4:5 with yerrorlines linewidth 2 "
                "dashtype %d pointtype %d linecolor rgb \"%s\" title \"M = %g, λ = %g\"",
                i, i % nm % 5 + 1, pts[i % nm % 6], colors[i / nm % 10], steps[i % nm],
                lam[i / nm]);
    fprintf(f, "\nunset multiplot\n");
    return out_close(c, &o, path);
}

/* dqa.csv: a row per instance and setting, then the mean and sd rows. */
int dqa_write_csv(const command *c, const char *dir, const sweep *w, const result *res,
                  const ba_summary *sm, int K, int n)
{
    char path[PATH_LEN];
    out_file o;
    FILE *f = out_openf(c, &o, path, "%s/dqa.csv", dir);
    if (!f)
        return 1;
    int S = n_settings(w);
    fprintf(f, "instance,n,order,gamma,lambda,steps,tau,tv,kl,beta_eff,r2,tv_beta_eff,"
               "tv_trotter\n");
    for (int k = 0; k < K + 2; k++)
        for (int li = 0; li < w->nl; li++)
            for (int mi = 0; mi < w->nm; mi++)
                for (int ti = 0; ti < w->nt; ti++) {
                    int s = (li * w->nm + mi) * w->nt + ti;
                    double v[NMEAS];
                    if (k < K) {
                        memcpy(v, res[(size_t)k * S + s].v, sizeof v);
                        fprintf(f, "%d", k);
                    } else {
                        for (int i = 0; i < NMEAS; i++)
                            v[i] = k == K ? sm[NMEAS * s + i].mean
                                          : (K > 1 ? sm[NMEAS * s + i].sd : 0.0);
                        fprintf(f, "%s", k == K ? "mean" : "sd");
                    }
                    fprintf(f, ",%d,%d,%g,%g,%g,%g", n, w->order, w->gamma, w->lam[li],
                            w->steps[mi], w->tau[ti]);
                    for (int i = 0; i < NMEAS; i++)
                        fprintf(f, ",%.6g", v[i]);
                    fprintf(f, "\n");
                }
    return out_close(c, &o, path);
}

