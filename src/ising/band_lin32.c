/* The band engine's linear path in float (issue 42, item 4): the kernels
 * of src/ising/band_lin.c compiled with float alpha, beta, duals and
 * coupling factors (src/ising/band_lin_core.h, one template for both):
 * twice the SIMD lanes per instruction and half the memory per window
 * state. A model opts in (config band_f32, --band-precision float); the
 * double path stays its twin and the answer for every query whose dynamic
 * range float cannot hold (the guard below, applied in src/ising/band.c).
 *
 * What stays double (see the template): the inputs and outputs, the field
 * factors' exps (rounded once to float), the unscale of g, and every sum
 * across steps or queries (dh, djb): float's 6e-8 per rounding is fine
 * for one step's products and sums, but a sum of T or B T terms would
 * carry T times that. */
#include "ising/ising.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define LIN_REAL float
#define LIN_F32 1
#define LIN_CTX ba_band_lin32
#define LIN_WS_NAME ba_band_lin32_ws_doubles
#define LIN_FWD_NAME ba_band_lin32_forward
#define LIN_BWD_NAME ba_band_lin32_backward
#include "ising/band_lin_core.h"

void ba_band_lin32_table(int we, int T, const double *tab, float *tab32)
{
    size_t n = ba_band_lin_table_doubles(we) * (size_t)T; // (T, row) both
    for (size_t i = 0; i < n; i++)
        tab32[i] = (float)tab[i];
}

/* Why the bound. The double path's guard (src/ising/band_lin.c) shows
 * that with R = hbound + jbound every product the path forms (alpha,
 * beta, windows, pair terms) is at least 2^-(2 We + 1) e^-R, every single
 * factor (exp(+-h), exp(+-u)) at most e^R, and every step's sum at most
 * 2^(We+1) e^R. Float must hold those as normal numbers: its smallest
 * normal is 2^-126 = e^-87.34 and its largest 2^128 = e^88.72. On the low
 * side the smallest product must stay 2^24 above 2^-126 (24 ln 2 = 16.6
 * nats): the dual parts (alpha times sums of g, g scaled to [1/2, 1))
 * can cancel to any size, and what they lose to underflow must stay
 * below float's rounding of the alpha they are compared with. So
 *   R <= 87.34 - 16.64 - (2 We + 1) ln 2,
 * 68.6 nats at We = 1, 58.9 at We = 8, 53.4 at We = 12, 47.8 at We = 16;
 * factors then stay below e^69 and sums below 2^17 e^69 = e^80.8, inside
 * float's range. A query past it goes to the double path (of range 600
 * nats), never to a float result that underflowed. */
double ba_band_lin32_max_nats(int we)
{
    const double ln2 = 0.69314718055994531;
    return -log(FLT_MIN) - 24.0 * ln2 - (2.0 * we + 1.0) * ln2;
}
