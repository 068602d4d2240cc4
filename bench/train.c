/* bench_train: training steps per second of a 1-layer, 1-head brackets model
 * for the four attention variants at several block sizes, in one run.
 *
 * A step is ba_model_forward + ba_model_zero_grad + ba_model_backward +
 * ba_model_step (AdamW defaults, lr 1e-3); drawing the batch
 * (ba_dataset_train_batch) is done between steps and not timed. Each
 * configuration gets 2 untimed warm-up steps first. boltzmann and coupling
 * use the default engine (fast).
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

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define MAX_TS 64
#define BENCH_NAME "bench_train"
#include "bench_common.h"
#define WARMUP 2
#define MIN_STEPS 2 /* timed steps at least, when adaptive */

static const char *usage_text =
    "usage: bench_train [--T LIST] [--steps N] [--B N] [--C N] [--min-time S]\n"
    "                   [--seed N] [--csv PATH] [--quick]\n"
    "\n"
    "Steps/s of a full training step (forward, zero_grad, backward, AdamW step)\n"
    "of a 1-layer, 1-head brackets model for softmax, sigmoid, boltzmann and\n"
    "coupling attention.\n"
    "\n"
    "  --T LIST      comma-separated block sizes (default 8,12,16,20,24; 2..26)\n"
    "  --steps N     timed steps per configuration (default: adaptive, steps\n"
    "                until --min-time has passed, at least 2)\n"
    "  --B N         batch size (default 64)\n"
    "  --C N         embedding width (default 64)\n"
    "  --min-time S  seconds per configuration when adaptive (default 2)\n"
    "  --seed N      seed of the weights and batches (default 42)\n"
    "  --csv PATH    also write the results as CSV\n"
    "  --quick       smoke test: T = 8, 3 steps\n"
    "Threads: OMP_NUM_THREADS.\n";

/* Resets the kernel's peak-RSS mark; 0 on success. */
static int reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return 1;
    int bad = fputs("5", f) < 0;
    bad |= fclose(f) != 0;
    return bad;
}

/* Peak resident memory in MiB: VmHWM, else ru_maxrss; -1 if neither. */
static double peak_rss_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        long kb = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
                break;
        fclose(f);
        if (kb >= 0)
            return kb / 1024.0;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        return ru.ru_maxrss / 1024.0; /* kB on Linux */
    return -1.0;
}

typedef struct {
    long steps;
    double seconds, loss, peak_mib;
} result;

/* One full training step on a fresh batch; *dt gets its time. */
static int train_step(ba_model *m, const ba_dataset *data, ba_rng *rng, int B, int T, int *in,
                      int *tg, const ba_adamw *opt, double *loss, double *dt, char *err)
{
    ba_dataset_train_batch(data, rng, B, in, tg);
    double t0 = now_s();
    int rc = ba_model_forward(m, in, tg, B, T, loss, err);
    if (!rc) {
        ba_model_zero_grad(m);
        rc = ba_model_backward(m, err);
    }
    if (!rc)
        rc = ba_model_step(m, opt, 1e-3, NULL, err);
    *dt = now_s() - t0;
    return rc;
}

static int bench_one(const ba_dataset *data, ba_attn attn, int T, int B, int C, long steps,
                     double min_time, uint64_t seed, result *res, char *err)
{
    ba_config cfg = ba_config_default(BA_TASK_BRACKETS, attn, T);
    ba_config_set_data(&cfg, data);
    cfg.n_embd = C;
    int *in = malloc(sizeof(int) * (size_t)B * T), *tg = malloc(sizeof(int) * (size_t)B * T);
    if (!in || !tg) {
        free(in), free(tg);
        snprintf(err, BA_ERR_LEN, "out of memory for a batch of %d x %d", B, T);
        return BA_ERR_NOMEM;
    }
    ba_model *m = NULL;
    int rc = ba_model_init(&m, &cfg, err);
    if (rc) {
        free(in), free(tg);
        return rc;
    }
    ba_rng rng;
    ba_rng_seed(&rng, seed);
    ba_model_init_weights(m, &rng, 0.0);
    ba_adamw opt = ba_adamw_default();
    double loss = 0.0, dt, total = 0.0;
    for (int i = 0; i < WARMUP && !rc; i++)
        rc = train_step(m, data, &rng, B, T, in, tg, &opt, &loss, &dt, err);
    long n = 0;
    while (!rc && (steps > 0 ? n < steps : (n < MIN_STEPS || total < min_time))) {
        rc = train_step(m, data, &rng, B, T, in, tg, &opt, &loss, &dt, err);
        total += dt, n++;
    }
    res->steps = n, res->seconds = total, res->loss = loss;
    res->peak_mib = peak_rss_mib();
    ba_model_free(m);
    free(in), free(tg);
    return rc;
}

int main(int argc, char **argv)
{
    int Ts[MAX_TS] = {8, 12, 16, 20, 24}, nT = 5;
    long steps = 0, B = 64, C = 64, seed = 42;
    double min_time = 2.0;
    const char *csv_path = NULL;
    int quick = 0, T_set = 0, steps_set = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (!strcmp(a, "--quick")) {
            quick = 1;
            continue;
        }
        static const char *with_value[] = {"--T",        "--steps", "--B",  "--C",
                                           "--min-time", "--seed",  "--csv"};
        int known = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            known |= !strcmp(a, with_value[k]);
        if (!known)
            return usage_error("unknown option '%s'", a);
        if (i + 1 >= argc)
            return usage_error("option %s needs a value", a);
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(a, "--T")) {
            bad = parse_list(v, 2, BA_FAST_MAX_SPINS, Ts, &nT);
            T_set = 1;
        } else if (!strcmp(a, "--steps")) {
            bad = parse_int(v, 1, LONG_MAX, &steps);
            steps_set = 1;
        } else if (!strcmp(a, "--B")) {
            bad = parse_int(v, 1, 1 << 20, &B);
        } else if (!strcmp(a, "--C")) {
            bad = parse_int(v, 1, 1 << 16, &C);
        } else if (!strcmp(a, "--min-time")) {
            char *end;
            errno = 0;
            min_time = strtod(v, &end);
            bad = errno || end == v || *end || !(min_time >= 0.0 && min_time <= 3600.0);
        } else if (!strcmp(a, "--seed")) {
            bad = parse_int(v, 0, LONG_MAX, &seed);
        } else if (!strcmp(a, "--csv")) {
            csv_path = v;
        }
        if (bad)
            return usage_error("bad value '%s' for %s", v, a);
    }
    if (quick) {
        if (!T_set)
            Ts[0] = 8, nT = 1;
        if (!steps_set)
            steps = 3;
    }

    FILE *csv = NULL;
    if (csv_path) {
        csv = fopen(csv_path, "w");
        if (!csv) {
            fprintf(stderr, "bench_train: cannot open '%s' for writing: %s\n", csv_path,
                    strerror(errno));
            return EXIT_USAGE;
        }
        fprintf(csv, "T,variant,B,C,threads,steps,seconds,steps_per_s,ms_per_step,"
                     "time_vs_softmax,loss,peak_rss_mib\n");
    }

    int per_config = reset_peak_rss() == 0;
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    const char *env_thr = getenv("OMP_NUM_THREADS");
    printf("bench_train: brackets, 1 layer, 1 head, C = %ld, B = %ld, FFN on, AdamW defaults, "
           "lr 1e-3, engine fast\n",
           C, B);
    printf("cpu: %s | OpenMP threads: %d (OMP_NUM_THREADS=%s)\n", cpu, omp_threads(),
           env_thr ? env_thr : "unset");
    if (steps > 0)
        printf("timing: %d warm-up steps, then %ld timed steps (forward+zero_grad+backward+step; "
               "batch drawing not timed)\n",
               WARMUP, steps);
    else
        printf("timing: %d warm-up steps, then steps until %.2g s, at least %d "
               "(forward+zero_grad+backward+step;\n        batch drawing not timed)\n",
               WARMUP, min_time, MIN_STEPS);
    printf("peak MiB: VmHWM %s\n\n",
           per_config ? "of each configuration (reset before it; floored at the RSS it started "
                        "with)"
                      : "running maximum of the process (reset not available)");
    printf("%3s  %-9s  %6s  %9s  %10s  %9s  %8s  %8s\n", "T", "variant", "steps", "steps/s",
           "ms/step", "x softmax", "loss", "peak MiB");
    fflush(stdout);

    static const ba_attn variants[] = {BA_ATTN_SOFTMAX, BA_ATTN_SIGMOID, BA_ATTN_BOLTZMANN,
                                       BA_ATTN_COUPLING};
    char err[BA_ERR_LEN];
    for (int ti = 0; ti < nT; ti++) {
        int T = Ts[ti];
        ba_dataset *data = NULL;
        int rc = ba_dataset_brackets(&data, T, 1, 64, 1234, err);
        if (rc) {
            fprintf(stderr, "bench_train: T = %d: %s (%s)\n", T, err, ba_status_str(rc));
            if (csv)
                fclose(csv);
            return 1;
        }
        double soft_ms = NAN;
        for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
            ba_attn attn = variants[vi];
            result r;
            if (per_config)
                reset_peak_rss();
            rc = bench_one(data, attn, T, (int)B, (int)C, steps, min_time, (uint64_t)seed, &r,
                           err);
            if (rc) {
                fprintf(stderr, "bench_train: T = %d, %s: %s (%s)\n", T, ba_attn_name(attn),
                        err, ba_status_str(rc));
                ba_dataset_free(data);
                if (csv)
                    fclose(csv);
                return 1;
            }
            double ms = 1e3 * r.seconds / r.steps;
            if (attn == BA_ATTN_SOFTMAX)
                soft_ms = ms;
            printf("%3d  %-9s  %6ld  %9.2f  %10.3f  %9.2f  %8.4f  %8.1f\n", T, ba_attn_name(attn),
                   r.steps, 1e3 / ms, ms, ms / soft_ms, r.loss, r.peak_mib);
            fflush(stdout);
            if (csv) {
                fprintf(csv, "%d,%s,%ld,%ld,%d,%ld,%.6g,%.6g,%.6g,%.6g,%.6g,%.1f\n", T,
                        ba_attn_name(attn), B, C, omp_threads(), r.steps, r.seconds, 1e3 / ms,
                        ms, ms / soft_ms, r.loss, r.peak_mib);
                fflush(csv);
            }
        }
        ba_dataset_free(data);
    }
    printf("\nx softmax: time per step relative to softmax at the same T; loss: last timed "
           "step's training loss\n");
    if (csv && fclose(csv)) {
        fprintf(stderr, "bench_train: error writing '%s'\n", csv_path);
        return 1;
    }
    return 0;
}
