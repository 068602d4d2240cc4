/* bench_train: training steps per second of a 1-layer, 1-head brackets model
 * for the four attention variants at several block sizes, in one run.
 *
 * A step is the library's one training step, ba_trainer_step: it draws the
 * next batch from the trainer's batch stream, then forward, zero_grad,
 * backward and the AdamW step (defaults, lr 1e-3 held constant). Drawing
 * the batch is therefore inside the timed step now; it costs microseconds
 * against the milliseconds of the rest, so the rates stay comparable with
 * the older figures that left it out. Timing the trainer's step rather than
 * a copy of its sequence keeps the benchmark measuring what training runs.
 * Each configuration gets 2 untimed warm-up steps first. boltzmann and
 * coupling use the default engine (fast).
 *
 * Peak memory is VmHWM from /proc/self/status. Before each configuration the
 * high-water mark is reset (writing 5 to /proc/self/clear_refs), so it is
 * that configuration's peak, floored at the resident size when it started;
 * where the reset is refused it is the running maximum of the process, as
 * the header then says. Without /proc it falls back to getrusage's ru_maxrss
 * (a running maximum).
 *
 * Exit status: 0 ok, 1 library error, 2 bad arguments. */
#include "boltzattn.h"
#include "model/model.h" /* the model's linear layers, for the dense limit */
#include "opts.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define MAX_TS 64
#define WARMUP 2
#define MIN_STEPS 2 /* timed steps at least, when adaptive */
#define LR 1e-3

static opt train_opts[] = {
    {"T", "LIST", "8,12,16,20,24", "comma-separated block sizes, 2..26", 0, 0},
    {"steps", "N", "adaptive", "timed steps per configuration (adaptive: until --min-time, "
     "at least 2)", 0, 0},
    {"B", "N", "64", "batch size", 0, 0},
    {"C", "N", "64", "embedding width", 0, 0},
    {"min-time", "S", "2", "seconds per configuration when adaptive", 0, 0},
    {"seed", "N", "42", "seed of the weights and the trainer's batch stream", 0, 0},
    {"csv", "PATH", NULL, "also write the results as CSV", 0, 0},
    {"quick", NULL, NULL, "smoke test: T = 8, 3 steps (unless --T, --steps are given)", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command train_cmd = {
    NULL,
    "[--T LIST] [--steps N] [--B N] [--C N] [--min-time S]\n"
    "                   [--seed N] [--csv PATH] [--quick]\n\n"
    "Steps/s of the library's training step (ba_trainer_step: batch drawing, forward,\n"
    "zero_grad, backward, AdamW step) of a 1-layer, 1-head brackets model for softmax,\n"
    "sigmoid, boltzmann and coupling attention. Threads: OMP_NUM_THREADS.",
    train_opts};

typedef struct {
    int Ts[MAX_TS], nT;
    long steps; /* 0: adaptive */
    int B, C;
    long seed;
    double min_time;
    const char *csv_path;
} bench_args;

/* The options into a; 0, -1 after --help, or an exit code after printing
 * the problem. */
static int read_args(int argc, char **argv, bench_args *a)
{
    const command *c = &train_cmd;
    int rc = parse_args(c, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc)
        return rc;
    memset(a, 0, sizeof *a);
    if ((rc = get_int_list(c, "T", 2, BA_FAST_MAX_SPINS, a->Ts, MAX_TS, &a->nT)) ||
        (is_set(c, "steps") && (rc = get_long(c, "steps", 1, LONG_MAX, &a->steps))) ||
        (rc = get_int(c, "B", 1, 1 << 20, &a->B)) || (rc = get_int(c, "C", 1, 1 << 16, &a->C)) ||
        (rc = get_double(c, "min-time", 0.0, 3600.0, &a->min_time)) ||
        (rc = get_long(c, "seed", 0, LONG_MAX, &a->seed)))
        return rc;
    a->csv_path = get_str(c, "csv");
    if (is_set(c, "quick")) {
        if (!is_set(c, "T"))
            a->Ts[0] = 8, a->nT = 1;
        if (!is_set(c, "steps"))
            a->steps = 3;
    }
    return 0;
}

typedef struct {
    long steps;
    double seconds, loss, peak_mib;
} result;

/* The run the benchmark times: AdamW defaults at a constant lr (no warmup,
 * and a final rate equal to the peak, so the cosine schedule is flat), J = 0
 * at start, no periodic evaluation or save point (ba_trainer_step never
 * does them; ba_trainer_run is not used). */
static ba_train_settings bench_settings(const bench_args *a)
{
    /* steps only bounds ba_trainer_run and shapes the schedule, which is
     * flat here; the benchmark stops stepping by itself. */
    ba_train_settings s = ba_train_settings_default(LONG_MAX);
    s.batch = a->B;
    s.lr = LR;
    s.warmup = 0;
    s.min_lr_frac = 1.0;
    s.j_init_std = 0.0;
    s.seed = (uint64_t)a->seed;
    s.opt = ba_adamw_default();
    s.eval_every = 0;
    s.save_every = 0;
    return s;
}

/* One ba_trainer_step timed: *dt gets its wall time, *loss its loss. */
static int timed_step(ba_trainer *t, double *loss, double *dt, char *err)
{
    double t0 = now_s();
    int rc = ba_trainer_step(t, loss, NULL, NULL, err);
    *dt = now_s() - t0;
    return rc;
}

static int bench_one(const ba_dataset *data, ba_attn attn, int T, const bench_args *a,
                     result *res, char *err)
{
    ba_config cfg = ba_config_default(attn, T);
    ba_config_set_data(&cfg, data);
    cfg.n_embd = a->C;
    ba_train_settings s = bench_settings(a);
    ba_trainer *t = NULL;
    int rc = ba_trainer_init(&t, &cfg, data, NULL, &s, err);
    if (rc)
        return rc;
    double loss = 0.0, dt, total = 0.0;
    for (int i = 0; i < WARMUP && !rc; i++)
        rc = timed_step(t, &loss, &dt, err);
    long n = 0;
    while (!rc && (a->steps > 0 ? n < a->steps : (n < MIN_STEPS || total < a->min_time))) {
        rc = timed_step(t, &loss, &dt, err);
        total += dt, n++;
    }
    res->steps = n, res->seconds = total, res->loss = loss;
    res->peak_mib = peak_rss_mib();
    ba_trainer_free(t);
    return rc;
}

static void print_header(const bench_args *a, int per_config)
{
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    const char *env_thr = getenv("OMP_NUM_THREADS");
    printf("bench_train: brackets, 1 layer, 1 head, C = %d, B = %d, FFN on, AdamW defaults, "
           "lr 1e-3 constant, engine fast\n",
           a->C, a->B);
    printf("cpu: %s | OpenMP threads: %d (OMP_NUM_THREADS=%s)\n", cpu, threads_in_use(),
           env_thr ? env_thr : "unset");
    if (a->steps > 0)
        printf("timing: %d warm-up steps, then %ld timed steps of ba_trainer_step", WARMUP,
               a->steps);
    else
        printf("timing: %d warm-up steps, then steps of ba_trainer_step until %.2g s, at least "
               "%d",
               WARMUP, a->min_time, MIN_STEPS);
    printf(" (batch drawing +\n        forward + zero_grad + backward + AdamW step; the batch "
           "drawing, now inside the timed step,\n        costs microseconds against "
           "milliseconds)\n");
    printf("peak MiB: VmHWM %s\n\n",
           per_config ? "of each configuration (reset before it; floored at the RSS it started "
                        "with)"
                      : "running maximum of the process (reset not available)");
    printf("%3s  %-9s  %6s  %9s  %10s  %9s  %8s  %8s  %8s\n", "T", "variant", "steps",
           "steps/s", "ms/step", "x softmax", "x limit", "loss", "peak MiB");
    fflush(stdout);
}

/* The step's dense products alone: forward and backward (input, weight and
 * bias gradients) of the model's linear layers at their shapes (qkv C->3C,
 * attention projection C->C, FFN C->4C->C, pointer head C->T; N = B*T
 * rows), through the library's own linear layer, repeated for at least
 * 0.5 s. Returns ms per step of them (*gflop: their GFLOP per step), the
 * floor a step's time is compared with (x dense); -1 when out of memory. */
static double dense_limit(int T, const bench_args *a, double *gflop)
{
    int C = a->C, N = a->B * T;
    const int shapes[5][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, T}};
    size_t big = (size_t)N * 4 * C, wsz = (size_t)4 * C * C;
    ba_real *buf = calloc(4 * big + 2 * wsz + 8 * (size_t)C, sizeof(ba_real));
    if (!buf)
        return -1;
    ba_real *x = buf, *y = x + big, *dx = y + big, *dy = dx + big, *w = dy + big, *dw = w + wsz;
    ba_real *b = dw + wsz, *db = b + 4 * C;
    for (size_t i = 0; i < big; i++)
        x[i] = dy[i] = (ba_real)((i % 7) * 0.01);
    for (size_t i = 0; i < wsz; i++)
        w[i] = (ba_real)((i % 5) * 0.01);
    double fl = 0.0;
    for (int k = 0; k < 5; k++)
        fl += 3.0 * 2.0 * N * shapes[k][0] * shapes[k][1]; /* forward + two backward products */
    *gflop = fl * 1e-9;
    long reps = 0;
    double t0 = now_s(), t = 0.0;
    while (reps < 3 || t < 0.5) {
        for (int k = 0; k < 5; k++) {
            int ic = shapes[k][0], oc = shapes[k][1];
            ba_linear_forward(y, x, w, b, N, ic, oc);
            ba_linear_backward(dx, dw, db, dy, x, w, N, ic, oc);
        }
        reps++;
        t = now_s() - t0;
    }
    free(buf);
    return 1e3 * t / reps;
}

/* GFLOP of the fast engine's products in one step of one head: for each
 * n = 1..T with Q = B queries and b = n - n/2, the forward's R and L, the
 * backward's R2 and L2 (each 2 Q 2^n), the moment matrix (2 (2Q) 2^n) and
 * its reduction by the spins of B (2 b 2^n). */
static double engine_gflop(int T, int B)
{
    double f = 0.0;
    for (int n = 1; n <= T; n++)
        f += (12.0 * B + 2.0 * (n - n / 2)) * ldexp(1.0, n);
    return f * 1e-9;
}

/* The four variants at block size T: a table row and a CSV row (csv may be
 * NULL) each. 0, or 1 after printing the library's error. */
static int bench_T(int T, const bench_args *a, int per_config, FILE *csv)
{
    static const ba_attn variants[] = {BA_ATTN_SOFTMAX, BA_ATTN_SIGMOID, BA_ATTN_BOLTZMANN,
                                       BA_ATTN_COUPLING};
    char err[BA_ERR_LEN];
    ba_dataset *data = NULL;
    int rc = ba_dataset_brackets(&data, T, 1, 64, 1234, err);
    if (rc) {
        fprintf(stderr, "%s: T = %d: %s (%s)\n", prog, T, err, ba_status_str(rc));
        return 1;
    }
    double gflop, dense_ms = dense_limit(T, a, &gflop);
    if (dense_ms < 0) {
        fprintf(stderr, "%s: T = %d: out of memory for the dense limit\n", prog, T);
        ba_dataset_free(data);
        return 1;
    }
    double rate = gflop / dense_ms * 1e3, eng_ms = engine_gflop(T, a->B) / rate * 1e3;
    printf("%3d  dense products alone: %.3f ms/step (%.3f GFLOP, %.1f GFLOP/s); boltzmann's "
           "engine products at that rate: %.3f ms (%.3f GFLOP)\n",
           T, dense_ms, gflop, rate, eng_ms, engine_gflop(T, a->B));
    double soft_ms = NAN;
    for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
        ba_attn attn = variants[vi];
        result r;
        if (per_config)
            reset_peak_rss();
        if ((rc = bench_one(data, attn, T, a, &r, err))) {
            fprintf(stderr, "%s: T = %d, %s: %s (%s)\n", prog, T, ba_attn_name(attn), err,
                    ba_status_str(rc));
            ba_dataset_free(data);
            return 1;
        }
        double ms = 1e3 * r.seconds / r.steps;
        if (attn == BA_ATTN_SOFTMAX)
            soft_ms = ms;
        /* the floor: the dense products, and for boltzmann the engine's
         * products too (coupling's fields are 0: no kernels) */
        double limit = dense_ms + (attn == BA_ATTN_BOLTZMANN ? eng_ms : 0.0);
        printf("%3d  %-9s  %6ld  %9.2f  %10.3f  %9.2f  %8.2f  %8.4f  %8.1f\n", T,
               ba_attn_name(attn), r.steps, 1e3 / ms, ms, ms / soft_ms, ms / limit, r.loss,
               r.peak_mib);
        fflush(stdout);
        if (csv) {
            fprintf(csv, "%d,%s,%d,%d,%d,%ld,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.1f\n", T,
                    ba_attn_name(attn), a->B, a->C, threads_in_use(), r.steps, r.seconds,
                    1e3 / ms, ms, ms / soft_ms, limit, ms / limit, r.loss, r.peak_mib);
            fflush(csv);
        }
    }
    ba_dataset_free(data);
    return 0;
}

int main(int argc, char **argv)
{
    prog = "bench_train"; /* messages name this program (cli/opts.c) */
    bench_args a;
    int rc = read_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    FILE *csv = NULL;
    if (a.csv_path) {
        csv = open_csv(a.csv_path, "T,variant,B,C,threads,steps,seconds,steps_per_s,"
                                   "ms_per_step,time_vs_softmax,limit_ms,time_vs_limit,loss,"
                                   "peak_rss_mib\n");
        if (!csv)
            return EXIT_USAGE;
    }
    int per_config = reset_peak_rss() == 0;
    print_header(&a, per_config);
    for (int ti = 0; ti < a.nT && !rc; ti++)
        rc = bench_T(a.Ts[ti], &a, per_config, csv);
    if (!rc)
        printf("\nx softmax: time per step relative to softmax at the same T; x limit: relative "
               "to the\nstep's dense products alone (timed in this run, the line above each T), "
               "plus for\nboltzmann its engine's products at their rate; loss: last timed step's "
               "training loss\n");
    if (csv && fclose(csv) && !rc) {
        fprintf(stderr, "%s: error writing '%s'\n", prog, a.csv_path);
        return 1;
    }
    return rc;
}
