/* Summary statistics for comparing attention variants over seeds: mean,
 * sample standard deviation, Student-t quantiles and the paired-difference
 * confidence interval. */
#include "core/core.h"

#include <math.h>

/* Two-sided 95 % points of Student's t (the 0.975 quantile) for 1..30
 * degrees of freedom. */
static const double t975[31] = {
    NAN,    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788,  2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796,
    2.0739, 2.0687,  2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423};

double ba_t975(int df)
{
    if (df < 1)
        return NAN;
    if (df <= 30)
        return t975[df];
    /* Cornish-Fisher expansion around the normal point, good to about 1e-4
     * beyond 30 degrees of freedom. */
    double z = 1.959963984540054, v = df;
    return z + (z * z * z + z) / (4 * v) + (5 * pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * v * v);
}

ba_summary ba_summarize(const double *x, int n)
{
    ba_summary s = {n, NAN, NAN, NAN};
    if (n < 1)
        return s;
    double m = 0.0;
    for (int i = 0; i < n; i++)
        m += x[i];
    m /= n;
    s.mean = m;
    if (n < 2)
        return s;
    double v = 0.0;
    for (int i = 0; i < n; i++)
        v += (x[i] - m) * (x[i] - m);
    s.sd = sqrt(v / (n - 1));
    s.ci95 = ba_t975(n - 1) * s.sd / sqrt((double)n);
    return s;
}

ba_summary ba_paired_diff(const double *a, const double *b, int n, double *work)
{
    for (int i = 0; i < n; i++)
        work[i] = a[i] - b[i];
    return ba_summarize(work, n);
}

void ba_running_add(ba_running *s, double x)
{
    if (s->n == 0)
        s->min = s->max = x;
    s->n++;
    double d = x - s->mean;
    s->mean += d / (double)s->n;
    s->m2 += d * (x - s->mean);
    s->min = fmin(s->min, x);
    s->max = fmax(s->max, x);
}

double ba_running_sd(const ba_running *s) { return s->n > 1 ? sqrt(s->m2 / (double)(s->n - 1)) : 0.0; }
