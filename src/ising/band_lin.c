/* The band engine's linear path (spec section 8: "rescale per step"): the
 * recursions of src/ising_band.c with alpha and beta as plain doubles
 * rescaled at every step, and products where the log path takes a
 * log-sum-exp (an exp and a log1p per transition). Same window states
 * (bit d of x holds s_{t-d}), same steps, same quantities; only the number
 * representation differs.
 *
 * Step t's factor psi_t(x', s) = exp(s h_t) exp(s u_t(x')) with
 * u_t(x') = sum_d J_{t-d,t} s_{t-d}: the second factor depends on the
 * couplings alone, so one table of exp(-+u_t(x')) (in two halves, see
 * "tables") serves every query of a call, and a query step costs two
 * field factors exp(+-h_t) (vectorised over the query) instead of
 * 2^(W+1) exps and log1ps.
 *
 * Scaling. Each step multiplies by 2^-e, 2^e the exponent of the previous
 * step's sum (pow2_inv: the sum lands in [1/2, 1)): the per-step
 * marginals are ratios, so the scale cancels, and folding it into the
 * step's two field factors costs no extra pass. The dual parts
 * (D = d alpha / d eps, with alpha's scale) are shifted by c alpha,
 * c = sum D 2^-e, between 1/2 and 1 times the mean of D/alpha, folded
 * into the step the same way
 * (D_t = T D_{t-1} + (g_t s - c) alpha_t), so D/alpha = E[G | window] + const
 * stays of the size of a window's g instead of growing with t; the
 * constant cancels against Gbar. beta and its dual likewise.
 *
 * Underflow is the one risk (nothing is shifted by its maximum here): see
 * the guard at the end of the file for the bound that decides which
 * queries may take this path.
 *
 * Reductions run in fixed lanes: one running sum of doubles waits on the
 * adder's latency at every term, and without -ffast-math the compiler may
 * not split it itself. The lanes depend on the length alone, so results do
 * not depend on threads or on the instruction set. */
#include "ising/ising.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The kernels (src/ising/band_lin_core.h) in double: exactly the
 * operations this file held before the float twin (band_lin32.c) shared
 * them, bit for bit. */
#define LIN_REAL double
#define LIN_F32 0
#define LIN_CTX ba_band_lin
#define LIN_WS_NAME ba_band_lin_ws_doubles
#define LIN_FWD_NAME ba_band_lin_forward
#define LIN_BWD_NAME ba_band_lin_backward
#include "ising/band_lin_core.h"

/* ------------------------------------------------------------ tables */

/* The coupling factors of step t, exp(-+u_t(x')), split over the window's
 * low L = min(We-1, 5) bits and high H = We - L bits: u_t = u_lo(x' mod
 * 2^L) + u_hi(x' >> L), so row t of the call's table holds exp(-+u_lo)
 * (2^L each) and exp(-+u_hi) (2^H each): 80 doubles instead of the full
 * table's 512 at We = 8. With a full table (2^(We+1) doubles a row,
 * 4 MiB at T = 1024, We = 8) every step streamed 4 KiB from L2/L3 twice
 * per query, and a step took 1.8x as long at T = 2048 as at T = 128; the
 * halves stay in cache at any T and W, and the steps multiply them back
 * at no extra cost (fwd_step). H >= 1 keeps the leaving spin (the top bit) in the
 * high half; the low half's 2^5 entries are the step loops' contiguous
 * run. An entry's product is within ~2 ulps of the exp of the sum.
 * Couplings past d = t (the first steps) count as 0. */
size_t ba_band_lin_table_doubles(int we)
{
    int L = LIN_LO_BITS(we), H = we - L;
    return ((size_t)2 << L) + ((size_t)2 << H);
}

/* em, ep (2^b) = exp(-+u) for u(x) = sum_i j[i] s_i(x) over b bits, j[i]
 * for i < nj and 0 above; u by doubling (one addition an entry). */
static void half_table(const double *j, int b, int nj, double *em, double *ep)
{
    double base = 0.0, *u = em; /* u in em's place until its exps */
    for (int i = 0; i < b && i < nj; i++)
        base -= j[i];
    u[0] = base;
    for (int i = 0; i < b; i++) {
        double two = i < nj ? 2.0 * j[i] : 0.0;
        size_t half = (size_t)1 << i;
        for (size_t x = 0; x < half; x++)
            u[x | half] = u[x] + two;
    }
    for (size_t x = 0; x < (size_t)1 << b; x++) {
        double v = u[x];
        em[x] = exp(-v);
        ep[x] = exp(v);
    }
}

void ba_band_lin_table_row(int we, int t, const double *Jb, int ldb, double *row)
{
    int L = LIN_LO_BITS(we), H = we - L, kp = t < we ? t : we;
    const double *j = Jb + (size_t)t * ldb; /* j[i] = J_{t-1-i,t}: bit i of x' */
    half_table(j, L, kp, row, row + ((size_t)1 << L));
    half_table(j + L, H, kp - L, row + ((size_t)2 << L), row + ((size_t)2 << L) + ((size_t)1 << H));
}

/* ------------------------------------------------------------ guard */

/* Why the bound. With S = 2^We, Jin_k = sum_d |J_{k-d,k}| and each step
 * scaled so that the previous one sums to [1/2, 1):
 * - the largest alpha_t entry is at least 1/S: sum_x alpha_t(x) =
 *   sum_x' alpha_{t-1}(x') 2 cosh f_t(x') >= 2 * 1/2;
 * - the largest beta_t entry is at least 1/(2S), and every term
 *   f_b E_b(x') beta_t(x_b) of beta_{t-1} at least exp(-|h_t| - Jin_t)
 *   times beta_t's smallest entry;
 * - within a step, alpha_t's entries lie within exp(Ra) of each other,
 *   Ra = 2 sum_{j in window} |h_j| + 2 sum_{k in window} Jin_k (changing
 *   the window's spins changes the energy of every history by at most
 *   twice their fields and twice the couplings ending on them), and
 *   beta_t's within exp(Rb), Rb = 2 sum_{k=t+1..t+We} Jin_k (couplings
 *   from the window forward end on those rows).
 * So every product alpha * psi * beta that the path forms (windows, pair
 * terms) is at least S^-2 exp(-R) / 2 with
 *   R = 2 max_t sum_{j=t-We..t} |h_j| + 2 max_t sum_{k=t-We..t+We} Jin_k
 *       + max |h| + max Jin,
 * and R <= BA_BAND_LIN_MAX_NATS (600) keeps them above e^-623 for
 * We <= 16, 85 nats clear of the smallest normal double (e^-708): room
 * for the dual parts (alpha times sums of g, g scaled to [1/2, 1)) and
 * sums. The fields' part is the query's (hbound, O(n)), the couplings'
 * the call's (jbound, O(T We)): R = hbound + jbound. Both are sliding sums
 * of |.|; a running sum's rounding is far inside the margin. At T = 1024,
 * h ~ N(0, 3^2) and J ~ N(0, 0.5^2) give R ~ 110, 230, 390, 600 for
 * We = 4, 8, 12, 16 (h ~ N(0, 1.5^2), J ~ N(0, 0.3^2): 60, 130, 230,
 * 350); |h| = 20 alone over a window of 9 gives 380. */
double ba_band_lin_jbound(int we, int T, const double *Jb, int ldb)
{
    double sum = 0.0, best = 0.0, jmax = 0.0;
    int L = 2 * we + 1;
    /* jin of rows t-L+1..t in a ring of L entries */
    double ring[2 * BA_BAND_MAX_W + 1];
    for (int t = 0; t < T + L; t++) {
        double jin = 0.0;
        if (t < T)
            for (int d = 1; d <= we && d <= t; d++)
                jin += fabs(Jb[(size_t)t * ldb + d - 1]);
        jmax = jin > jmax ? jin : jmax;
        if (t >= L)
            sum -= ring[t % L];
        ring[t % L] = jin;
        sum += jin;
        best = sum > best ? sum : best;
    }
    return 2.0 * best + jmax;
}

double ba_band_lin_hbound(int we, int n, const double *h)
{
    if (!h)
        return 0.0;
    double sum = 0.0, best = 0.0, hmax = 0.0;
    for (int t = 0; t < n; t++) {
        double a = fabs(h[t]);
        hmax = a > hmax ? a : hmax;
        sum += a;
        if (t > we)
            sum -= fabs(h[t - we - 1]);
        best = sum > best ? sum : best;
    }
    /* sum carries a NaN or inf of h through (the comparisons would not) */
    return 2.0 * best + hmax + (sum - sum);
}
