/* boltzattn: the command-line tool. Train, evaluate, sample and inspect
 * Boltzmann-attention models. Only the tool prints and picks exit codes:
 * 0 ok, 1 runtime failure, 2 bad usage or bad input. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    {"out", "DIR", "runs/TASK-ATTN-T<T>[-SAMPLER-S<S>]-s<SEED>", "output directory", 0, 0},
    {"eval-every", "N", "steps/10", "validate every N steps (0 = only at the end)", 0, 0},
    {"save-every", "N", "as --eval-every", "save the checkpoint and resumable state every N steps (0 = only at the end)", 0, 0},
    {"eval-items", "N", "512", "items in periodic validation (the final one uses all)", 0, 0},
    {"log-every", "N", "10", "write a training record to metrics.jsonl every N steps", 0, 0},
    {"threads", "N", "all cores", "OpenMP and BLAS threads", 0, 0},
    {"quiet", NULL, NULL, "no progress line", 0, 0},
    {"resume", "DIR", NULL,
     "continue the run saved in DIR exactly (its own settings; only --data, --threads and "
     "--quiet may be given)", 0, 0},
    SAMPLER_OPTS("exact"),
    {0, 0, 0, 0, 0, 0},
};
static const command train_cmd = {"train", "--task charlm|brackets [options]", train_opts};

static void report_training(const ba_config *cfg, const char *outdir, const train_outcome *res)
{
    char sdesc[96] = "";
    if (cfg->sampler.kind != BA_SAMPLER_EXACT) {
        strcpy(sdesc, " sampler ");
        sampler_desc(&cfg->sampler, sdesc + 9, sizeof sdesc - 9);
    }
    printf("%s %s T=%d%s: %ld steps in %.1f s (%.2f steps/s)\n", ba_task_name(cfg->task),
           ba_attn_name(cfg->attn), cfg->block_size, sdesc, res->steps_run, res->train_s,
           res->steps_run / fmax(res->train_s, 1e-9));
    print_eval(stdout, "final", cfg->task, &res->final);
    if (res->has_exact)
        print_eval(stdout, "final (exact inference)", cfg->task, &res->exact);
    printf("checkpoint: %s/model.safetensors\n", outdir);
}

/* train --resume DIR: the saved run continues with its own settings. */
static int train_resume(const command *c)
{
    for (opt *o = c->opts; o->name; o++)
        if (o->set && strcmp(o->name, "resume") && strcmp(o->name, "data") &&
            strcmp(o->name, "threads") && strcmp(o->name, "quiet"))
            return usage_error(c->cmd,
                               "--%s cannot be combined with --resume: the run continues with "
                               "the settings it was started with",
                               o->name);
    int rc, threads = 0;
    if (find_opt(c, "threads")->set && (rc = get_int(c, "threads", 1, 1024, &threads)))
        return rc;
    set_threads(threads);
    const char *dir = get_str(c, "resume");
    char err[BA_ERR_LEN], *saved_data = NULL;
    ba_config cfg;
    train_settings s;
    int st = read_resume_info(dir, &cfg, &s, &saved_data, err);
    if (st)
        return fail_lib(c->cmd, st, err, input_status(st));
    const char *data_path = find_opt(c, "data")->set ? get_str(c, "data")
                            : saved_data                ? saved_data
                                                        : default_data_path();
    ba_dataset *data = NULL;
    st = open_dataset(&cfg, data_path, 1, &data, err);
    if (st) {
        free(saved_data);
        return fail_lib(c->cmd, st, err, input_status(st));
    }
    s.resume = 1;
    int verbose = get_flag(c, "quiet") ? 0 : isatty(STDERR_FILENO) ? 2 : 1;
    train_outcome res;
    int code = run_training(c->cmd, &cfg, data, &s, dir, data_path, verbose, &res);
    ba_dataset_free(data);
    free(saved_data);
    if (code == 0)
        report_training(&cfg, dir, &res);
    return code;
}

static int cmd_train(int argc, char **argv)
{
    const command *c = &train_cmd;
    sampler_opt_defaults(c);
    int rc = parse_opts(c, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (find_opt(c, "resume")->set)
        return train_resume(c);
    char err[BA_ERR_LEN];
    ba_task task;
    ba_attn attn;
    if (ba_task_parse(get_str(c, "task"), &task, err) ||
        ba_attn_parse(get_str(c, "attn"), &attn, err))
        return usage_error(c->cmd, "%s", err);
    int T, embd;
    model_opts mo;
    train_settings s;
    if ((rc = parse_shared_opts(c, &mo, &s)) || (rc = get_int(c, "T", 1, BA_MAX_BLOCK, &T)) ||
        (rc = get_int(c, "embd", 1, 8192, &embd)) ||
        (rc = get_double(c, "j-init-std", 0, 100, &s.j_init_std)) ||
        (rc = get_u64(c, "seed", &s.seed)) ||
        (rc = get_int(c, "log-every", 1, INT_MAX, &s.log_every)))
        return rc;
    ba_sampler exact = ba_sampler_default(BA_SAMPLER_EXACT), sampler;
    if ((rc = parse_sampler_opt(c, &exact, &sampler)))
        return rc;

    ba_config cfg = ba_config_default(task, attn, T);
    cfg.sampler = sampler;
    cfg.engine = mo.engine;
    cfg.n_layer = mo.layers, cfg.n_head = mo.heads, cfg.n_embd = embd;
    cfg.ffn = !get_flag(c, "no-ffn");
    cfg.kinds = mo.kinds, cfg.n_heldout = mo.heldout, cfg.data_seed = mo.data_seed;
    /* Refuse an impossible model before reading any data. */
    cfg.vocab_size = task == BA_TASK_BRACKETS ? 2 * mo.kinds : 1;
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
    else if (sampler.kind != BA_SAMPLER_EXACT)
        snprintf(outdir, sizeof outdir, "runs/%s-%s-T%d-%s-S%d-s%llu", ba_task_name(task),
                 ba_attn_name(attn), T, ba_sampler_name(sampler.kind), sampler.shots,
                 (unsigned long long)s.seed);
    else
        snprintf(outdir, sizeof outdir, "runs/%s-%s-T%d-s%llu", ba_task_name(task),
                 ba_attn_name(attn), T, (unsigned long long)s.seed);
    if (make_dirs(outdir, err)) {
        ba_dataset_free(data);
        return fail_lib(c->cmd, 0, err, 1);
    }

    int verbose = get_flag(c, "quiet") ? 0 : isatty(STDERR_FILENO) ? 2 : 1;
    train_outcome res;
    int code = run_training(c->cmd, &cfg, data, &s, outdir, data_path, verbose, &res);
    ba_dataset_free(data);
    if (code)
        return code;
    report_training(&cfg, outdir, &res);
    return 0;
}

/* -------------------------------------------------------------- eval */

static opt eval_opts[] = {
    {"ckpt", "FILE", NULL, "checkpoint (model.safetensors)", 0, 0},
    {"data", "PATH", "the training file, else $BA_DATA or data/tinyshakespeare.txt",
     "charlm text file to evaluate on (its validation split)", 0, 0},
    {"items", "N", "0 (all)", "evaluate on N evenly spaced items only", 0, 0},
    {"batch", "N", "64", "evaluation batch size", 0, 0},
    {"threads", "N", "all cores", "OpenMP and BLAS threads", 0, 0},
    SAMPLER_OPTS("the checkpoint's"),
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
char *ckpt_data_path(const char *ckpt)
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

/* The evaluation of eval: with the model's sampler, and for a sampled one
 * also with exact inference where the engine reaches. */
static int eval_report(const command *c, ba_model *m, const ba_dataset *data, int items,
                       int batch)
{
    char err[BA_ERR_LEN], sdesc[96];
    const ba_config *cfg = ba_model_config(m);
    ba_sampler own = cfg->sampler;
    ba_eval_result r;
    int st = ba_evaluate(m, data, items, batch, &r, err);
    if (st)
        return fail_lib(c->cmd, st, err, input_status(st));
    sampler_desc(&own, sdesc, sizeof sdesc);
    printf("%s %s T=%d%s%s%s\n", ba_task_name(cfg->task), ba_attn_name(cfg->attn),
           cfg->block_size, own.kind ? " (sampler " : "", own.kind ? sdesc : "",
           own.kind ? ")" : "");
    print_eval(stdout, "eval", cfg->task, &r);
    if (own.kind == BA_SAMPLER_EXACT)
        return 0;
    int T = cfg->block_size;
    if (T > ba_engine_max_spins(cfg->engine)) {
        printf("eval (exact inference): skipped, T = %d is beyond the %s engine's limit of %d\n",
               T, ba_engine_name(cfg->engine), ba_engine_max_spins(cfg->engine));
        return 0;
    }
    ba_sampler exact = ba_sampler_default(BA_SAMPLER_EXACT);
    if ((st = ba_model_set_sampler(m, &exact, err)) ||
        (st = ba_evaluate(m, data, items, batch, &r, err)))
        return fail_lib(c->cmd, st, err, 1);
    print_eval(stdout, "eval (exact inference)", ba_model_config(m)->task, &r);
    return 0;
}

static int cmd_eval(int argc, char **argv)
{
    const command *c = &eval_cmd;
    sampler_opt_defaults(c);
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
    /* --sampler and its options: the checkpoint's own sampler unless told */
    ba_sampler sampler;
    if ((rc = parse_sampler_opt(c, &cfg->sampler, &sampler))) {
        ba_model_free(m);
        return rc;
    }
    int st = ba_model_set_sampler(m, &sampler, err);
    if (st) {
        ba_model_free(m);
        return usage_error(c->cmd, "--sampler: %s", err);
    }
    ba_dataset *data;
    if ((rc = open_eval_data(c, cfg, &data, err))) {
        ba_model_free(m);
        return rc;
    }
    rc = eval_report(c, m, data, items, batch);
    ba_model_free(m);
    ba_dataset_free(data);
    return rc;
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
           "  ablate   train a grid of variants x T x widths x seeds; results and summary\n"
           "  plot     plots of an ablation directory (gnuplot)\n"
           "  couplings  the couplings J of a checkpoint: CSV, by distance, plots\n"
           "  dqa      calibrate simulated quantum annealing against the exact distribution\n"
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
                {"grads", cmd_grads}, {"batch", cmd_batch}, {"ablate", cmd_ablate},
                {"couplings", cmd_couplings}, {"plot", cmd_plot}, {"dqa", cmd_dqa}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(cmd, cmds[i].name) == 0)
            return cmds[i].fn(argc - 2, argv + 2);
    fprintf(stderr, "%s: unknown command '%s' (try '%s --help')\n", prog, cmd, prog);
    return EXIT_USAGE;
}
