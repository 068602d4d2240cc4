/* boltzattn: the command-line tool. Train, evaluate, sample and inspect
 * Boltzmann-attention models. Only this file prints and picks exit codes:
 * 0 ok, 1 runtime failure, 2 bad usage or bad input. */
#include "boltzattn.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void openblas_set_num_threads(int); /* from OpenBLAS; its header varies by distro */

#define EXIT_USAGE 2

/* ------------------------------------------------------------ options */

typedef struct {
    const char *name; /* long name without dashes */
    const char *arg;  /* metavariable, or NULL for a flag */
    const char *def;  /* default shown in --help (NULL: none) */
    const char *help;
    const char *val; /* parsed value (or def) */
    int set;         /* given on the command line */
} opt;

typedef struct {
    const char *cmd;
    const char *usage;
    opt *opts;
} command;

static const char *prog = "boltzattn";

static int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s %s: ", prog, cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see '%s %s --help')\n", prog, cmd);
    va_end(ap);
    return EXIT_USAGE;
}

static void print_help(const command *c)
{
    printf("usage: %s %s %s\n\noptions:\n", prog, c->cmd, c->usage);
    for (opt *o = c->opts; o->name; o++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        printf("  %-24s %s", left, o->help);
        if (o->def)
            printf(" (default: %s)", o->def);
        printf("\n");
    }
    printf("  %-24s %s\n", "--help", "show this help");
}

/* Returns -1 on --help (already printed), 0 on success, else an exit code. */
static int parse_opts(const command *c, int argc, char **argv)
{
    for (opt *o = c->opts; o->name; o++)
        o->val = o->def, o->set = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_help(c);
            return -1;
        }
        if (strncmp(a, "--", 2) != 0)
            return usage_error(c->cmd, "unexpected argument '%s'", a);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        opt *o = NULL;
        for (opt *p = c->opts; p->name; p++)
            if (strlen(p->name) == len && strncmp(p->name, name, len) == 0)
                o = p;
        if (!o)
            return usage_error(c->cmd, "unknown option '--%.*s'", (int)len, name);
        if (!o->arg) {
            if (eq)
                return usage_error(c->cmd, "option '--%s' takes no value", o->name);
            o->val = "1";
        } else if (eq) {
            o->val = eq + 1;
        } else {
            if (i + 1 >= argc)
                return usage_error(c->cmd, "option '--%s' needs a value (%s)", o->name, o->arg);
            o->val = argv[++i];
        }
        o->set = 1;
    }
    return 0;
}

static opt *find_opt(const command *c, const char *name)
{
    for (opt *o = c->opts; o->name; o++)
        if (strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

static const char *get_str(const command *c, const char *name) { return find_opt(c, name)->val; }
static int get_flag(const command *c, const char *name) { return find_opt(c, name)->set; }

static int get_long(const command *c, const char *name, long lo, long hi, long *out)
{
    const char *v = find_opt(c, name)->val;
    if (!v)
        return usage_error(c->cmd, "option '--%s' is required", name);
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno == ERANGE || end == v || *end != '\0')
        return usage_error(c->cmd, "--%s: '%s' is not an integer", name, v);
    if (x < lo || x > hi)
        return usage_error(c->cmd, "--%s: %ld is out of range [%ld, %ld]", name, x, lo, hi);
    *out = x;
    return 0;
}

static int get_int(const command *c, const char *name, int lo, int hi, int *out)
{
    long x;
    int rc = get_long(c, name, lo, hi, &x);
    if (!rc)
        *out = (int)x;
    return rc;
}

static int get_u64(const command *c, const char *name, uint64_t *out)
{
    const char *v = find_opt(c, name)->val;
    char *end;
    errno = 0;
    if (!v || *v == '-')
        return usage_error(c->cmd, "--%s: '%s' is not a non-negative integer", name,
                           v ? v : "");
    unsigned long long x = strtoull(v, &end, 10);
    if (errno == ERANGE || end == v || *end != '\0')
        return usage_error(c->cmd, "--%s: '%s' is not a non-negative integer", name, v);
    *out = (uint64_t)x;
    return 0;
}

static int get_double(const command *c, const char *name, double lo, double hi, double *out)
{
    const char *v = find_opt(c, name)->val;
    if (!v)
        return usage_error(c->cmd, "option '--%s' is required", name);
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno == ERANGE || end == v || *end != '\0' || !isfinite(x))
        return usage_error(c->cmd, "--%s: '%s' is not a finite number", name, v);
    if (x < lo || x > hi)
        return usage_error(c->cmd, "--%s: %g is out of range [%g, %g]", name, x, lo, hi);
    *out = x;
    return 0;
}

/* Exit code for a library status while reading inputs: bad input is 2, an
 * allocation or numerical failure is a runtime failure. */
static int input_status(int st) { return (st == BA_ERR_NOMEM || st == BA_ERR_NUMERIC) ? 1 : 2; }

static int fail_lib(const char *cmd, int st, const char *err, int code)
{
    fprintf(stderr, "%s %s: %s\n", prog, cmd, err);
    (void)st;
    return code;
}

static void set_threads(int n)
{
    if (n <= 0)
        return;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    openblas_set_num_threads(n);
}

static int threads_in_use(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* mkdir -p */
static int make_dirs(const char *path, char *err)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        snprintf(err, BA_ERR_LEN, "output path too long");
        return -1;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                snprintf(err, BA_ERR_LEN, "cannot create directory %.180s: %s", buf, strerror(errno));
                return -1;
            }
            *p = '/';
        }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
        snprintf(err, BA_ERR_LEN, "cannot create directory %.180s: %s", buf, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, BA_ERR_LEN, "%.200s exists and is not a directory", buf);
        return -1;
    }
    return 0;
}

/* Where charlm data comes from when --data is not given. */
static const char *default_data_path(void)
{
    const char *env = getenv("BA_DATA");
    if (env && *env)
        return env;
    return "data/tinyshakespeare.txt";
}

/* Opens the dataset a config describes (the held-out set of brackets is
 * rebuilt from its seed; charlm reads `path` with the config's vocabulary
 * when use_vocab). */
static int open_dataset(const ba_config *cfg, const char *path, int use_vocab, ba_dataset **out,
                        char *err)
{
    if (cfg->task == BA_TASK_BRACKETS)
        return ba_dataset_brackets(out, cfg->block_size, cfg->kinds, cfg->n_heldout,
                                   cfg->data_seed, err);
    if (access(path, R_OK) != 0) {
        snprintf(err, BA_ERR_LEN,
                 "cannot read data file %s (%s); run 'make data' or pass --data PATH", path,
                 strerror(errno));
        return BA_ERR_IO;
    }
    return ba_dataset_charlm(out, path, use_vocab ? cfg->vocab : NULL,
                             use_vocab ? cfg->vocab_size : 0, cfg->block_size, err);
}

static void print_eval(FILE *f, const char *label, ba_task task, const ba_eval_result *r)
{
    if (task == BA_TASK_CHARLM)
        fprintf(f, "%s: val_loss %.4f  val_ppl %.4f  (%d windows, %ld targets)\n", label,
                r->loss, r->ppl, r->n_items, r->n_targets);
    else
        fprintf(f, "%s: accuracy %.2f %%  (%ld of %ld ')' in %d held-out sequences)  loss %.4f\n",
                label, 100.0 * r->accuracy, lround(r->accuracy * r->n_targets), r->n_targets,
                r->n_items, r->loss);
}

static void fmt_duration(double s, char *buf, size_t n)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, n, "?");
    else if (s < 60)
        snprintf(buf, n, "%.0fs", s);
    else if (s < 3600)
        snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, n, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
}

/* ------------------------------------------------------------- train */

static opt train_opts[] = {
    {"task", "charlm|brackets", "brackets", "task to train on", 0, 0},
    {"attn", "VARIANT", "boltzmann", "attention: softmax|sigmoid|boltzmann|coupling", 0, 0},
    {"T", "N", "8", "block size (context length)", 0, 0},
    {"layers", "N", "1", "transformer blocks", 0, 0},
    {"heads", "N", "1", "attention heads per block", 0, 0},
    {"embd", "N", "64", "embedding width C (divisible by --heads)", 0, 0},
    {"no-ffn", NULL, NULL, "blocks without the MLP", 0, 0},
    {"steps", "N", "1000", "optimisation steps", 0, 0},
    {"batch", "N", "32", "sequences per step", 0, 0},
    {"lr", "X", "3e-3", "peak learning rate", 0, 0},
    {"min-lr", "X", "0.1", "final learning rate as a fraction of --lr", 0, 0},
    {"warmup", "N", "5% of steps", "linear warmup steps", 0, 0},
    {"weight-decay", "X", "0.1", "AdamW decay of weight matrices (never J, LayerNorm, biases)",
     0, 0},
    {"clip", "X", "1.0", "global gradient-norm clip (0 = off)", 0, 0},
    {"j-init-std", "X", "0", "std of the initial couplings J (0 = start at sigmoid)", 0, 0},
    {"seed", "N", "1", "seed of initialisation and batch order", 0, 0},
    {"data", "PATH", "$BA_DATA or data/tinyshakespeare.txt", "charlm text file", 0, 0},
    {"kinds", "N", "1", "brackets: bracket kinds", 0, 0},
    {"heldout", "N", "2000", "brackets: held-out sequences (at most 20% of all prefixes)", 0,
     0},
    {"data-seed", "N", "1234", "brackets: seed of the held-out set", 0, 0},
    {"engine", "NAME", "fast", "exact Ising engine: fast|reference", 0, 0},
    {"out", "DIR", "runs/TASK-ATTN-T<T>-s<SEED>", "output directory", 0, 0},
    {"eval-every", "N", "steps/10", "validate every N steps (0 = only at the end)", 0, 0},
    {"eval-items", "N", "512", "items in periodic validation (the final one uses all)", 0, 0},
    {"log-every", "N", "10", "write a training record to metrics.jsonl every N steps", 0, 0},
    {"threads", "N", "all cores", "OpenMP and BLAS threads", 0, 0},
    {"quiet", NULL, NULL, "no progress line", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command train_cmd = {"train", "--task charlm|brackets [options]", train_opts};

typedef struct {
    long steps, warmup;
    int batch, eval_every, eval_items, log_every;
    double lr, min_lr_frac, j_init_std;
    uint64_t seed;
    ba_adamw opt;
} train_settings;

static char *train_settings_json(const train_settings *s, const char *data)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "steps", (double)s->steps);
    cJSON_AddNumberToObject(o, "batch", s->batch);
    cJSON_AddNumberToObject(o, "lr", s->lr);
    cJSON_AddNumberToObject(o, "min_lr", s->lr * s->min_lr_frac);
    cJSON_AddNumberToObject(o, "warmup", (double)s->warmup);
    cJSON_AddNumberToObject(o, "weight_decay", s->opt.weight_decay);
    cJSON_AddNumberToObject(o, "beta1", s->opt.beta1);
    cJSON_AddNumberToObject(o, "beta2", s->opt.beta2);
    cJSON_AddNumberToObject(o, "clip", s->opt.grad_clip);
    cJSON_AddNumberToObject(o, "j_init_std", s->j_init_std);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->seed);
    cJSON_AddStringToObject(o, "seed", seed);
    cJSON_AddNumberToObject(o, "threads", threads_in_use());
    if (data)
        cJSON_AddStringToObject(o, "data", data);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return txt;
}

static int save_ckpt(const char *dir, const ba_model *m, long step, const char *train_json,
                     char *err)
{
    char path[4096], stepbuf[32];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(stepbuf, sizeof stepbuf, "%ld", step);
    const char *keys[] = {"step", "train"};
    const char *vals[] = {stepbuf, train_json ? train_json : "{}"};
    return ba_checkpoint_save(path, m, keys, vals, 2, err);
}

static int cmd_train(int argc, char **argv)
{
    const command *c = &train_cmd;
    int rc = parse_opts(c, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    char err[BA_ERR_LEN];
    ba_task task;
    ba_attn attn;
    ba_engine engine;
    if (ba_task_parse(get_str(c, "task"), &task, err) ||
        ba_attn_parse(get_str(c, "attn"), &attn, err) ||
        ba_engine_parse(get_str(c, "engine"), &engine, err))
        return usage_error(c->cmd, "%s", err);
    int T, layers, heads, embd, kinds, heldout, threads = 0;
    train_settings s;
    memset(&s, 0, sizeof s);
    s.opt = ba_adamw_default();
    uint64_t data_seed;
    if ((rc = get_int(c, "T", 1, BA_MAX_BLOCK, &T)) || (rc = get_int(c, "layers", 1, 64, &layers)) ||
        (rc = get_int(c, "heads", 1, 64, &heads)) || (rc = get_int(c, "embd", 1, 8192, &embd)) ||
        (rc = get_long(c, "steps", 1, 1000000000L, &s.steps)) ||
        (rc = get_int(c, "batch", 1, 1 << 20, &s.batch)) ||
        (rc = get_double(c, "lr", 0, 10, &s.lr)) ||
        (rc = get_double(c, "min-lr", 0, 1, &s.min_lr_frac)) ||
        (rc = get_double(c, "weight-decay", 0, 10, &s.opt.weight_decay)) ||
        (rc = get_double(c, "clip", 0, 1e9, &s.opt.grad_clip)) ||
        (rc = get_double(c, "j-init-std", 0, 100, &s.j_init_std)) ||
        (rc = get_u64(c, "seed", &s.seed)) || (rc = get_int(c, "kinds", 1, 4, &kinds)) ||
        (rc = get_int(c, "heldout", 0, 1 << 24, &heldout)) ||
        (rc = get_u64(c, "data-seed", &data_seed)) ||
        (rc = get_int(c, "eval-items", 1, INT_MAX, &s.eval_items)) ||
        (rc = get_int(c, "log-every", 1, INT_MAX, &s.log_every)))
        return rc;
    s.warmup = s.steps / 20;
    if (find_opt(c, "warmup")->set && (rc = get_long(c, "warmup", 0, s.steps, &s.warmup)))
        return rc;
    s.eval_every = (int)(s.steps / 10 > 0 ? s.steps / 10 : s.steps);
    if (find_opt(c, "eval-every")->set &&
        (rc = get_int(c, "eval-every", 0, INT_MAX, &s.eval_every)))
        return rc;
    if (find_opt(c, "threads")->set && (rc = get_int(c, "threads", 1, 1024, &threads)))
        return rc;
    set_threads(threads);

    ba_config cfg = ba_config_default(task, attn, T);
    cfg.engine = engine;
    cfg.n_layer = layers, cfg.n_head = heads, cfg.n_embd = embd;
    cfg.ffn = !get_flag(c, "no-ffn");
    cfg.kinds = kinds, cfg.n_heldout = heldout, cfg.data_seed = data_seed;
    /* Refuse an impossible model before reading any data. */
    cfg.vocab_size = task == BA_TASK_BRACKETS ? 2 * kinds : 1;
    cfg.out_size = task == BA_TASK_BRACKETS ? T : 1;
    int st = ba_config_validate(&cfg, err);
    if (st)
        return usage_error(c->cmd, "%s", err);

    const char *data_path = find_opt(c, "data")->set ? get_str(c, "data") : default_data_path();
    ba_dataset *data = NULL;
    st = open_dataset(&cfg, data_path, 0, &data, err);
    if (st)
        return fail_lib(c->cmd, st, err, input_status(st));
    ba_config_set_data(&cfg, data);

    char outdir[2048];
    if (find_opt(c, "out")->set)
        snprintf(outdir, sizeof outdir, "%s", get_str(c, "out"));
    else
        snprintf(outdir, sizeof outdir, "runs/%s-%s-T%d-s%llu", ba_task_name(task),
                 ba_attn_name(attn), T, (unsigned long long)s.seed);
    if (make_dirs(outdir, err)) {
        ba_dataset_free(data);
        return fail_lib(c->cmd, 0, err, 1);
    }

    ba_model *m = NULL;
    st = ba_model_init(&m, &cfg, err);
    if (st) {
        ba_dataset_free(data);
        return fail_lib(c->cmd, st, err, input_status(st));
    }
    ba_rng rng;
    ba_rng_seed(&rng, s.seed);
    ba_model_init_weights(m, &rng, s.j_init_std);
    /* Batches come from their own stream, so the data order for a seed is
     * the same for every variant and model size. */
    ba_rng data_rng;
    ba_rng_seed(&data_rng, s.seed ^ 0x5eedda7a5eedda7aULL);

    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", outdir);
    FILE *log = fopen(path, "w");
    if (!log) {
        fprintf(stderr, "%s train: cannot write %s: %s\n", prog, path, strerror(errno));
        ba_model_free(m);
        ba_dataset_free(data);
        return 1;
    }
    char *cfg_json = ba_config_to_json(&cfg);
    char *train_json = train_settings_json(&s, task == BA_TASK_CHARLM ? data_path : NULL);
    fprintf(log, "{\"event\":\"config\",\"config\":%s,\"train\":%s,\"params\":%zu}\n", cfg_json,
            train_json, ba_model_num_params(m));
    fflush(log);

    uint64_t ntrain, neval;
    ba_dataset_sizes(data, &ntrain, &neval);
    int quiet = get_flag(c, "quiet");
    int tty = !quiet && isatty(STDERR_FILENO);
    fprintf(stderr, "train %s %s T=%d L=%d H=%d C=%d ffn=%s: %zu parameters, %d threads, out %s\n",
            ba_task_name(task), ba_attn_name(attn), T, layers, heads, embd,
            cfg.ffn ? "on" : "off", ba_model_num_params(m), threads_in_use(), outdir);
    if (task == BA_TASK_BRACKETS)
        fprintf(stderr, "brackets: %llu training prefixes, %llu held out; position-only "
                        "baseline %.2f %%\n",
                (unsigned long long)ntrain, (unsigned long long)neval,
                100.0 * ba_dataset_position_baseline(data));
    else
        fprintf(stderr, "charlm: %s, vocabulary %d, %llu train / %llu validation bytes\n",
                data_path, cfg.vocab_size, (unsigned long long)ntrain,
                (unsigned long long)neval);

    size_t bt = (size_t)s.batch * T;
    int *in = malloc(sizeof(int) * bt), *tg = malloc(sizeof(int) * bt);
    int code = 0;
    if (!in || !tg) {
        fprintf(stderr, "%s train: out of memory for a batch of %d\n", prog, s.batch);
        code = 1;
        goto done;
    }
    double t0 = now_s(), tlast = t0, ema_loss = NAN;
    long last_step = 0;
    for (long step = 0; step < s.steps; step++) {
        double lr = ba_lr_schedule(step, s.steps, s.warmup, s.lr, s.lr * s.min_lr_frac);
        double loss, gnorm;
        ba_dataset_train_batch(data, &data_rng, s.batch, in, tg);
        if ((st = ba_model_forward(m, in, tg, s.batch, T, &loss, err)) == BA_OK) {
            ba_model_zero_grad(m);
            if ((st = ba_model_backward(m, err)) == BA_OK)
                st = ba_model_step(m, &s.opt, lr, &gnorm, err);
        }
        if (st) {
            fprintf(stderr, "\n%s train: step %ld: %s\n", prog, step + 1, err);
            code = 1;
            goto done;
        }
        ema_loss = isnan(ema_loss) ? loss : 0.9 * ema_loss + 0.1 * loss;
        long done_steps = step + 1;
        double t = now_s();
        double sps = done_steps / fmax(t - t0, 1e-9);
        if (done_steps % s.log_every == 0 || done_steps == s.steps)
            fprintf(log,
                    "{\"event\":\"train\",\"step\":%ld,\"loss\":%.6f,\"lr\":%.6g,"
                    "\"grad_norm\":%.6g,\"steps_per_s\":%.4f,\"elapsed_s\":%.3f}\n",
                    done_steps, loss, lr, gnorm, sps, t - t0);
        if (tty && (t - tlast > 0.2 || done_steps == s.steps)) {
            char eta[32];
            fmt_duration((s.steps - done_steps) / sps, eta, sizeof eta);
            fprintf(stderr, "\rstep %ld/%ld  loss %.4f  lr %.2e  %.2f steps/s  ETA %s   ",
                    done_steps, s.steps, ema_loss, lr, sps, eta);
            tlast = t;
        }
        if (s.eval_every > 0 && done_steps % s.eval_every == 0 && done_steps < s.steps) {
            ba_eval_result r;
            if ((st = ba_evaluate(m, data, s.eval_items, 64, &r, err))) {
                fprintf(stderr, "\n%s train: evaluation at step %ld: %s\n", prog, done_steps,
                        err);
                code = 1;
                goto done;
            }
            fprintf(log,
                    "{\"event\":\"eval\",\"step\":%ld,\"val_loss\":%.6f,\"val_ppl\":%.6f,"
                    "\"val_acc\":%.6f,\"items\":%d}\n",
                    done_steps, r.loss, r.ppl, r.accuracy, r.n_items);
            fflush(log);
            if (tty)
                fprintf(stderr, "\r\033[K");
            if (!quiet) {
                char label[64];
                snprintf(label, sizeof label, "step %ld (%d items)", done_steps, r.n_items);
                print_eval(stderr, label, task, &r);
            }
            if ((st = save_ckpt(outdir, m, done_steps, train_json, err))) {
                fprintf(stderr, "%s train: %s\n", prog, err);
                code = 1;
                goto done;
            }
        }
        last_step = done_steps;
    }
    if (tty)
        fprintf(stderr, "\n");
    double train_s = now_s() - t0;
    ba_eval_result r;
    if ((st = ba_evaluate(m, data, 0, 64, &r, err))) {
        fprintf(stderr, "%s train: final evaluation: %s\n", prog, err);
        code = 1;
        goto done;
    }
    fprintf(log,
            "{\"event\":\"final\",\"step\":%ld,\"val_loss\":%.6f,\"val_ppl\":%.6f,"
            "\"val_acc\":%.6f,\"items\":%d,\"targets\":%ld,\"train_s\":%.3f,"
            "\"steps_per_s\":%.4f}\n",
            last_step, r.loss, r.ppl, r.accuracy, r.n_items, r.n_targets, train_s,
            last_step / fmax(train_s, 1e-9));
    if ((st = save_ckpt(outdir, m, last_step, train_json, err))) {
        fprintf(stderr, "%s train: %s\n", prog, err);
        code = 1;
        goto done;
    }
    printf("%s %s T=%d: %ld steps in %.1f s (%.2f steps/s)\n", ba_task_name(task),
           ba_attn_name(attn), T, last_step, train_s, last_step / fmax(train_s, 1e-9));
    print_eval(stdout, "final", task, &r);
    printf("checkpoint: %s/model.safetensors\n", outdir);
done:
    fclose(log);
    free(in), free(tg);
    free(cfg_json);
    free(train_json);
    ba_model_free(m);
    ba_dataset_free(data);
    return code;
}

/* -------------------------------------------------------------- eval */

static opt eval_opts[] = {
    {"ckpt", "FILE", NULL, "checkpoint (model.safetensors)", 0, 0},
    {"data", "PATH", "the training file, else $BA_DATA or data/tinyshakespeare.txt",
     "charlm text file to evaluate on (its validation split)", 0, 0},
    {"items", "N", "0 (all)", "evaluate on N evenly spaced items only", 0, 0},
    {"batch", "N", "64", "evaluation batch size", 0, 0},
    {"threads", "N", "all cores", "OpenMP and BLAS threads", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command eval_cmd = {"eval", "--ckpt FILE [options]", eval_opts};

static int load_model(const command *c, ba_model **m, char *err)
{
    const char *path = get_str(c, "ckpt");
    if (!path)
        return usage_error(c->cmd, "option '--ckpt' is required");
    int st = ba_checkpoint_load(path, m, err);
    if (st)
        return fail_lib(c->cmd, st, err, input_status(st));
    return 0;
}

/* The charlm data path recorded by train in the checkpoint, if any. */
static char *ckpt_data_path(const char *ckpt)
{
    ba_st *st;
    char err[BA_ERR_LEN];
    if (ba_st_read(&st, ckpt, err))
        return NULL;
    const char *train = ba_st_metadata(st, "train");
    char *out = NULL;
    cJSON *o = train ? cJSON_Parse(train) : NULL;
    const cJSON *d = o ? cJSON_GetObjectItemCaseSensitive(o, "data") : NULL;
    if (cJSON_IsString(d))
        out = strdup(d->valuestring);
    cJSON_Delete(o);
    ba_st_free(st);
    return out;
}

static int open_eval_data(const command *c, const ba_config *cfg, ba_dataset **data, char *err)
{
    char *recorded = NULL;
    const char *path = NULL;
    if (cfg->task == BA_TASK_CHARLM) {
        if (find_opt(c, "data")->set)
            path = get_str(c, "data");
        else if ((recorded = ckpt_data_path(get_str(c, "ckpt"))) && access(recorded, R_OK) == 0)
            path = recorded;
        else
            path = default_data_path();
    }
    int st = open_dataset(cfg, path, 1, data, err);
    free(recorded);
    if (st)
        return fail_lib(c->cmd, st, err, input_status(st));
    return 0;
}

static int cmd_eval(int argc, char **argv)
{
    const command *c = &eval_cmd;
    int rc = parse_opts(c, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    int items = 0, batch, threads = 0;
    if ((rc = get_int(c, "batch", 1, 1 << 20, &batch)))
        return rc;
    if (find_opt(c, "items")->set && (rc = get_int(c, "items", 0, INT_MAX, &items)))
        return rc;
    if (find_opt(c, "threads")->set && (rc = get_int(c, "threads", 1, 1024, &threads)))
        return rc;
    set_threads(threads);
    char err[BA_ERR_LEN];
    ba_model *m;
    if ((rc = load_model(c, &m, err)))
        return rc;
    const ba_config *cfg = ba_model_config(m);
    ba_dataset *data;
    if ((rc = open_eval_data(c, cfg, &data, err))) {
        ba_model_free(m);
        return rc;
    }
    ba_eval_result r;
    int st = ba_evaluate(m, data, items, batch, &r, err);
    if (st) {
        ba_model_free(m);
        ba_dataset_free(data);
        return fail_lib(c->cmd, st, err, input_status(st));
    }
    printf("%s %s T=%d\n", ba_task_name(cfg->task), ba_attn_name(cfg->attn), cfg->block_size);
    print_eval(stdout, "eval", cfg->task, &r);
    ba_model_free(m);
    ba_dataset_free(data);
    return 0;
}

/* ------------------------------------------------------------ sample */

static opt sample_opts[] = {
    {"ckpt", "FILE", NULL, "charlm checkpoint", 0, 0},
    {"prompt", "TEXT", "\"\\n\"", "text to continue (bytes must be in the vocabulary)", 0, 0},
    {"len", "N", "200", "characters to generate", 0, 0},
    {"temperature", "X", "1.0", "sampling temperature (0 = greedy)", 0, 0},
    {"seed", "N", "1", "sampling seed", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command sample_cmd = {"sample", "--ckpt FILE [--prompt TEXT] [options]",
                                   sample_opts};

static int cmd_sample(int argc, char **argv)
{
    const command *c = &sample_cmd;
    int rc = parse_opts(c, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    int len;
    double temp;
    uint64_t seed;
    if ((rc = get_int(c, "len", 0, 100000000, &len)) ||
        (rc = get_double(c, "temperature", 0, 100, &temp)) || (rc = get_u64(c, "seed", &seed)))
        return rc;
    const char *prompt = find_opt(c, "prompt")->set ? get_str(c, "prompt") : "\n";
    char err[BA_ERR_LEN];
    ba_model *m;
    if ((rc = load_model(c, &m, err)))
        return rc;
    const ba_config *cfg = ba_model_config(m);
    if (cfg->task != BA_TASK_CHARLM) {
        ba_task task = cfg->task; /* cfg dies with the model */
        ba_model_free(m);
        return usage_error(c->cmd, "sampling needs a charlm checkpoint, this one is %s",
                           ba_task_name(task));
    }
    size_t plen = strlen(prompt);
    if (plen == 0) {
        ba_model_free(m);
        return usage_error(c->cmd, "--prompt must not be empty");
    }
    int *toks = malloc(sizeof(int) * (plen + (size_t)len));
    if (!toks) {
        ba_model_free(m);
        fprintf(stderr, "%s sample: out of memory\n", prog);
        return 1;
    }
    int st = ba_encode_text(cfg->vocab, cfg->vocab_size, prompt, plen, toks, err);
    if (st) {
        free(toks);
        ba_model_free(m);
        return usage_error(c->cmd, "--prompt: %s", err);
    }
    ba_rng rng;
    ba_rng_seed(&rng, seed);
    fwrite(prompt, 1, plen, stdout);
    size_t n = plen;
    int V = cfg->vocab_size, Tm = cfg->block_size;
    double *p = malloc(sizeof(double) * V);
    for (int k = 0; k < len && p; k++) {
        int T = n < (size_t)Tm ? (int)n : Tm;
        const int *ctx = toks + n - T;
        if ((st = ba_model_forward(m, ctx, NULL, 1, T, NULL, err)))
            break;
        const ba_real *lg = ba_model_logits(m) + (size_t)(T - 1) * V;
        int next = 0;
        if (temp == 0) {
            for (int v = 1; v < V; v++)
                if (lg[v] > lg[next])
                    next = v;
        } else {
            double mx = -INFINITY, z = 0;
            for (int v = 0; v < V; v++)
                mx = fmax(mx, lg[v] / temp);
            for (int v = 0; v < V; v++)
                z += p[v] = exp(lg[v] / temp - mx);
            double u = ba_rng_uniform(&rng) * z, acc = 0;
            next = V - 1;
            for (int v = 0; v < V; v++)
                if ((acc += p[v]) > u) {
                    next = v;
                    break;
                }
        }
        toks[n++] = next;
        fputc(cfg->vocab[next], stdout);
    }
    fputc('\n', stdout);
    free(p);
    free(toks);
    ba_model_free(m);
    if (st) {
        fprintf(stderr, "%s sample: %s\n", prog, err);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------- grads */

static opt grads_opts[] = {
    {"ckpt", "FILE", NULL, "checkpoint", 0, 0},
    {"batch", "FILE", NULL, "batch file (safetensors: inputs, targets I32 [B,T])", 0, 0},
    {"out", "FILE", NULL, "gradient file to write (safetensors)", 0, 0},
    {"threads", "N", "all cores", "OpenMP and BLAS threads", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command grads_cmd = {"grads", "--ckpt FILE --batch FILE --out FILE", grads_opts};

static int cmd_grads(int argc, char **argv)
{
    const command *c = &grads_cmd;
    int rc = parse_opts(c, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    int threads = 0;
    if (find_opt(c, "threads")->set && (rc = get_int(c, "threads", 1, 1024, &threads)))
        return rc;
    set_threads(threads);
    if (!get_str(c, "batch"))
        return usage_error(c->cmd, "option '--batch' is required");
    if (!get_str(c, "out"))
        return usage_error(c->cmd, "option '--out' is required");
    char err[BA_ERR_LEN];
    ba_model *m;
    if ((rc = load_model(c, &m, err)))
        return rc;
    int *in = NULL, *tg = NULL, B, T;
    int st = ba_batch_load(get_str(c, "batch"), &in, &tg, &B, &T, err);
    double loss = 0;
    if (st) {
        ba_model_free(m);
        return fail_lib(c->cmd, st, err, input_status(st));
    }
    if ((st = ba_model_forward(m, in, tg, B, T, &loss, err)) == BA_OK) {
        ba_model_zero_grad(m);
        st = ba_model_backward(m, err);
        if (st) {
            fprintf(stderr, "%s grads: %s\n", prog, err);
            rc = 1;
        } else if ((st = ba_grads_save(get_str(c, "out"), m, loss, err))) {
            fprintf(stderr, "%s grads: %s\n", prog, err);
            rc = 1;
        } else {
            printf("loss %.8f over %d x %d positions; gradients of %d tensors written to %s\n",
                   loss, B, T, ba_model_num_tensors(m), get_str(c, "out"));
        }
    } else {
        fprintf(stderr, "%s grads: batch does not fit the model: %s\n", prog, err);
        rc = input_status(st);
    }
    free(in), free(tg);
    ba_model_free(m);
    return rc;
}

/* ------------------------------------------------------------- batch */

static opt batch_opts[] = {
    {"ckpt", "FILE", NULL, "checkpoint whose task and data the batch is drawn for", 0, 0},
    {"data", "PATH", "as eval", "charlm text file", 0, 0},
    {"size", "N", "8", "sequences in the batch", 0, 0},
    {"split", "train|eval", "train", "draw training batches or the first evaluation items", 0,
     0},
    {"seed", "N", "1", "seed for training batches", 0, 0},
    {"out", "FILE", NULL, "batch file to write", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command batch_cmd = {"batch", "--ckpt FILE --out FILE [options]", batch_opts};

static int cmd_batch(int argc, char **argv)
{
    const command *c = &batch_cmd;
    int rc = parse_opts(c, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    int B;
    uint64_t seed;
    if ((rc = get_int(c, "size", 1, 1 << 20, &B)) || (rc = get_u64(c, "seed", &seed)))
        return rc;
    const char *split = get_str(c, "split");
    if (strcmp(split, "train") != 0 && strcmp(split, "eval") != 0)
        return usage_error(c->cmd, "--split: '%s' is not train or eval", split);
    if (!get_str(c, "out"))
        return usage_error(c->cmd, "option '--out' is required");
    char err[BA_ERR_LEN];
    ba_model *m;
    if ((rc = load_model(c, &m, err)))
        return rc;
    const ba_config *cfg = ba_model_config(m);
    ba_dataset *data;
    if ((rc = open_eval_data(c, cfg, &data, err))) {
        ba_model_free(m);
        return rc;
    }
    int T = cfg->block_size;
    int *in = malloc(sizeof(int) * (size_t)B * T), *tg = malloc(sizeof(int) * (size_t)B * T);
    int st = BA_OK;
    if (!in || !tg) {
        rc = 1;
        fprintf(stderr, "%s batch: out of memory\n", prog);
    } else {
        if (strcmp(split, "train") == 0) {
            ba_rng r;
            ba_rng_seed(&r, seed);
            ba_dataset_train_batch(data, &r, B, in, tg);
        } else {
            int n = ba_dataset_num_eval(data);
            for (int b = 0; b < B; b++)
                ba_dataset_eval_item(data, b % n, in + (size_t)b * T, tg + (size_t)b * T);
        }
        if ((st = ba_batch_save(get_str(c, "out"), in, tg, B, T, err))) {
            fprintf(stderr, "%s batch: %s\n", prog, err);
            rc = 1;
        } else {
            printf("wrote %d x %d batch to %s\n", B, T, get_str(c, "out"));
        }
    }
    free(in), free(tg);
    ba_model_free(m);
    ba_dataset_free(data);
    return rc;
}

/* -------------------------------------------------------------- main */

static void print_main_help(void)
{
    printf("boltzattn %s: Boltzmann attention (Ising-marginal attention weights), exact.\n\n"
           "usage: %s COMMAND [options]\n\n"
           "commands:\n"
           "  train    train a model (charlm or brackets, any attention variant)\n"
           "  eval     validation perplexity (charlm) or held-out accuracy (brackets)\n"
           "  sample   generate text from a charlm checkpoint\n"
           "  grads    loss and every parameter's gradient for a batch file\n"
           "  batch    write a batch file drawn from a checkpoint's task\n"
           "  version  print the version\n\n"
           "'%s COMMAND --help' lists a command's options and their defaults.\n",
           BA_VERSION, prog, prog);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_main_help();
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        print_main_help();
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("boltzattn %s\n", BA_VERSION);
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"train", cmd_train}, {"eval", cmd_eval},   {"sample", cmd_sample},
                {"grads", cmd_grads}, {"batch", cmd_batch}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(cmd, cmds[i].name) == 0)
            return cmds[i].fn(argc - 2, argv + 2);
    fprintf(stderr, "%s: unknown command '%s' (try '%s --help')\n", prog, cmd, prog);
    return EXIT_USAGE;
}
