/* Position encodings that the attention kernels take as relative
 * information (issue 43): RoPE rotates q and k, ALiBi biases the fields.
 *
 * Rotary position embedding (RoPE, Su et al. 2021): each head's
 * query and key are rotated, pair of channels by pair of channels, by an
 * angle proportional to their position, so that q_m . k_n depends on the
 * positions only through m - n. The fields of every attention variant are
 * built from q . k (h_ij = scale q_i . k_j), so the rotation gives softmax,
 * sigmoid and the Ising variants' fields the same relative-position
 * information, whatever engine then reads them.
 *
 * The pairs are the paper's: channels (2i, 2i+1) of a head of d channels
 * (d even) turn by t * theta_i, theta_i = base^(-2i/d), base 10000
 * [choice]. The rotation is orthogonal, so its backward is the rotation by
 * the opposite angle, applied to dq and dk in place.
 *
 * Angles and their cosines and sines are formed in double whatever the
 * array's precision: t * theta_i at t = 4095 needs more than float's 24
 * bits to keep the small frequencies' rotation exact to rounding. A table
 * would save the sin/cos calls (T * d/2 per call, against the attention's
 * T^2 * d), but it would be state to keep per length; recomputing keeps the
 * kernel a pure function of its arguments.
 *
 * The file is its own template: compiled once, it includes itself for
 * float (f32) and for double (f64). */
#ifndef RP_PASS

#include "model/model.h"

#include <math.h>

double ba_rope_theta(int i, int d) { return pow(BA_ROPE_BASE, -2.0 * i / d); }

/* ALiBi (Press et al. 2022): head h of H adds -m_h (i - j) to the field of
 * query i and key j. For H a power of two m_h = 2^(-8 (h+1) / H), a
 * geometric sequence from 2^(-8/H) to 2^-8; otherwise the paper's rule:
 * the slopes of the largest power of two n < H, then every other slope of
 * 2n (the odd-numbered ones) for the remaining H - n heads. */
double ba_alibi_slope(int h, int H)
{
    int n = 1;
    while (2 * n <= H)
        n *= 2;
    if (h < n)
        return pow(2.0, -8.0 * (h + 1) / n);
    return pow(2.0, -8.0 * (2 * (h - n) + 1) / (2 * n));
}

#define RP_PASS 1
#define RP_REAL float
#define RP_SFX f32
#include "model/positions.c"
#undef RP_REAL
#undef RP_SFX
#define RP_REAL double
#define RP_SFX f64
#include "model/positions.c"

#else /* one precision's kernels */

#define RP_CAT2(a, b) a##_##b
#define RP_CAT(a, b) RP_CAT2(a, b)
#define RP(name) RP_CAT(name, RP_SFX)

/* The rotation of x (rows t = t0 .. t0+T-1 of B sequences, row stride ld,
 * H heads of d channels from channel 0 of the row) by sign * t * theta_i:
 * sign +1 rotates q or k, -1 is the backward (or the inverse). */
void RP(ba_rope_rotate)(int B, int T, int t0, int H, int d, size_t ld, int sign, RP_REAL *x)
{
    // x (B,T,ld): the H*d channels rotated in place
    int half = d / 2;
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < half; i++) {
            double a = (double)(t0 + t) * ba_rope_theta(i, d);
            RP_REAL c = (RP_REAL)cos(a), s = (RP_REAL)(sign * sin(a));
            for (int b = 0; b < B; b++) {
                RP_REAL *row = x + ((size_t)b * T + t) * ld;
                for (int h = 0; h < H; h++) {
                    RP_REAL *p = row + (size_t)h * d + 2 * i;
                    RP_REAL x0 = p[0], x1 = p[1];
                    p[0] = c * x0 - s * x1;
                    p[1] = s * x0 + c * x1;
                }
            }
        }
    }
}

#undef RP_CAT2
#undef RP_CAT
#undef RP

#endif
