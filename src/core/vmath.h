/* Elementwise exponentials the compiler can vectorise (internal).
 *
 * libm's exp, expm1 and tanh are scalar calls: in loops over every entry of
 * an activation or a kernel they stop vectorisation and were the largest
 * single cost of a small model's step. These take x <= 0 only, which is all
 * their callers need (a sigmoid and a softmax shift their argument so), and
 * reduce x = k ln2 + r with |r| <= ln2/2, k rounded by adding 1.5 * 2^p (the
 * mantissa width), then put 2^k straight into the exponent bits.
 *
 * Accuracy (tests/test_train.c and tests/test_grad_f64.c hold them to libm):
 *   ba_exp_nonpos1   double, Taylor to r^13 (truncation < 1e-17 relative):
 *                    within 2 ulps; 0 below -708.39.
 *   ba_exp_nonpos1f  float, Taylor to r^7 (truncation < 6e-9 relative):
 *                    within 2 ulps; 0 below -87.3 (e^-87.3 ~ 1.2e-38, the
 *                    smallest normal float, so no denormals are made). */
#ifndef BA_VMATH_H
#define BA_VMATH_H

#include <stdint.h>
#include <string.h>

/* A loop over these, built three times (AVX-512, AVX2, baseline) and chosen
 * at load time: one binary runs everywhere and vectorises where it can. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define BA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BA_CLONES
#endif

static inline double ba_exp_nonpos1(double x)
{
    const double shift = 0x1.8p52;
    double t = x < -708.39 ? -708.39 : x;
    double kd = t * 0x1.71547652b82fep0 + shift; /* log2(e) */
    uint64_t kbits;
    memcpy(&kbits, &kd, sizeof kbits);
    kd -= shift;
    double r = t - kd * 0x1.62e42fefa3800p-1 - kd * 0x1.ef35793c76730p-45; /* ln 2 hi, lo */
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    /* kbits holds k in its low bits: (k + 1023) << 52 is 2^k */
    uint64_t sbits = (kbits + 1023) << 52;
    double scale;
    memcpy(&scale, &sbits, sizeof scale);
    return x < -708.39 ? 0.0 : p * scale;
}

static inline float ba_exp_nonpos1f(float x)
{
    const float shift = 0x1.8p23f;
    float t = x < -87.3f ? -87.3f : x;
    float kf = t * 0x1.715476p0f + shift; /* log2(e) */
    uint32_t kbits;
    memcpy(&kbits, &kf, sizeof kbits);
    kf -= shift;
    /* ln 2 split so kf * hi is exact for |k| < 2^8 */
    float r = t - kf * 0x1.62e4p-1f - kf * 0x1.7f7d1cp-20f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* kbits holds k in its low bits (k >= -126 here): (k + 127) << 23 is 2^k */
    uint32_t sbits = (kbits + 127u) << 23;
    float scale;
    memcpy(&scale, &sbits, sizeof scale);
    return x < -87.3f ? 0.0f : p * scale;
}

#endif
