/* What bench_long's two files share: the parsed options and part 2's
 * entry. bench/long.c owns the options, part 1 (the attention core) and
 * main; bench/long/train_step.c owns part 2 (the training step and its cost
 * model). */
#ifndef BENCH_LONG_H
#define BENCH_LONG_H

#include <stdio.h>

#define MAX_TS 16 /* block sizes of a list */
#define MAX_WS 8  /* bands of a list */

typedef struct {
    int Ts[MAX_TS], nT, Ws[MAX_WS], nW;
    int B, d, fast_max, reps, slope_from;
    double min_time, qkv_std, j_std;
    int tTs[MAX_TS], ntT, tWs[MAX_WS], ntW;
    int tB;
    double train_time;
    long train_steps; /* 0: until train_time */
    int core, train;
    int train_f32; /* each band row also with the band engine in float */
    long seed;
    const char *data, *csv_path;
} bench_args;

/* Part 2 for the options a, its rows also into csv (may be NULL): 0, or an
 * exit code after printing the problem. */
int train_part(const bench_args *a, FILE *csv);

#endif
