/* The commands that use one trained model: eval (validation perplexity or
 * held-out accuracy), sample (text from a charlm model), grads (the loss
 * and every gradient of a batch file) and batch (a batch file drawn from a
 * checkpoint's task). */
#include "cli.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* -------------------------------------------------------------- eval */

static opt eval_opts[64] = {
    {"ckpt", "FILE", NULL, "checkpoint (model.safetensors)", 0, 0},
    {"data", "PATH", "the training file, else $BA_DATA or data/tinyshakespeare.txt",
     "charlm text file to evaluate on (its validation split; a regular file of at most 1 GiB)",
     0, 0},
    {"items", "N", "0 (all)", "evaluate on N evenly spaced items only", 0, 0},
    {"batch", "N", "64", "evaluation batch size", 0, 0},
    {"T", "N", "the model's",
     "context length to evaluate at (charlm): shorter than the model's, or longer for a "
     "model without position embeddings whose couplings are relative with a band", 0, 0},
    {"threads", "N", "idle cores", "OpenMP threads (at most the CPUs)", 0, 0},
    {"band-precision", "P", "the checkpoint's",
     "the band engine's window term: float (for each query whose dynamic range float holds) "
     "or double; a model the band engine does not run is refused", 0, 0},
    ENGINE_EVAL_OPTS,
    SAMPLER_OPTS("the checkpoint's"),
    {0, 0, 0, 0, 0, 0},
};
static const command eval_cmd = {"eval", "--ckpt FILE [options]", eval_opts};

/* --ckpt into a new model and its data description. */
static int load_model(const command *c, ba_model **m, ba_data_spec *spec, char *err)
{
    const char *path = get_str(c, "ckpt");
    if (!path)
        return usage_error(c, "option '--ckpt' is required");
    int st = ba_checkpoint_load(path, m, spec, err);
    if (st)
        return fail_lib(c, err, input_status(st));
    return 0;
}

static int open_eval_data(const command *c, const ba_config *cfg, const ba_data_spec *spec,
                          ba_dataset **data, char *err)
{
    char *recorded = NULL;
    const char *path = NULL;
    if (spec->task == BA_TASK_CHARLM) {
        if (is_set(c, "data"))
            path = get_str(c, "data");
        else if ((recorded = ckpt_data_path(get_str(c, "ckpt"))) && access(recorded, R_OK) == 0)
            path = recorded;
        else
            path = default_data_path();
    }
    int st = open_dataset(spec, cfg->block_size, path, 1, data, err);
    /* The user did not name that file: say where it came from. */
    if (st && path && path == recorded)
        fprintf(stderr, "%s %s: reading %s, the training data the checkpoint records (--data "
                        "PATH reads another file)\n",
                prog, c->cmd, recorded);
    free(recorded);
    if (st)
        return fail_lib(c, err, input_status(st));
    return 0;
}

/* eval's progress line: on a terminal only, so logs and pipes get the
 * results alone. */
static int eval_tick(int done, int total, void *user)
{
    fprintf(stderr, "\r%s: %d of %d items", (const char *)user, done, total);
    if (done == total)
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
    return 0;
}

/* ba_evaluate with the progress line; refuses a result over no targets
 * (which would print as a score of 0 of 0). */
static int evaluate(const command *c, ba_model *m, const ba_dataset *data, int items, int batch,
                    const char *label, ba_eval_result *r)
{
    char err[BA_ERR_LEN];
    int tty = isatty(STDERR_FILENO);
    int st = ba_evaluate_ex(m, data, items, batch, tty ? eval_tick : NULL, (void *)label, r, err);
    if (st && tty)
        fprintf(stderr, "\r\033[K"); /* the message replaces the progress line */
    if (st)
        return fail_lib(c, err, input_status(st));
    if (r->n_targets == 0)
        return usage_error(c, "the evaluation data has no targets: nothing to score");
    return 0;
}

/* The evaluation of eval: with the model's sampler, and for a sampled one
 * also with exact inference where the engine reaches. */
static int eval_report(const command *c, ba_model *m, ba_task task, const ba_dataset *data,
                       int items, int batch)
{
    char err[BA_ERR_LEN], sdesc[96];
    const ba_config *cfg = ba_model_config(m);
    ba_sampler own = cfg->sampler;
    ba_eval_result r;
    ba_model_approx_stats_take(m);
    int st, rc = evaluate(c, m, data, items, batch, "eval", &r);
    if (rc)
        return rc;
    sampler_desc(&own, sdesc, sizeof sdesc);
    char eng[64] = "";
    ba_engine e = ba_config_engine(cfg);
    int ising = cfg->attn == BA_ATTN_BOLTZMANN || cfg->attn == BA_ATTN_COUPLING;
    int windowed = (engine_caps(e) & BA_ENGINE_CAP_WINDOW) != 0;
    if (ising && !own.kind && ba_engine_is_approx(e))
        snprintf(eng, sizeof eng, " (engine %s%s)", ba_engine_name(e),
                 windowed ? ", window " : "");
    if (*eng && windowed)
        snprintf(eng + strlen(eng) - 1, sizeof eng - strlen(eng) + 1, "%d)", cfg->window);
    printf("%s %s T=%d%s%s%s%s\n", ba_task_name(task), ba_attn_name(cfg->attn),
           cfg->block_size, own.kind ? " (sampler " : "", own.kind ? sdesc : "",
           own.kind ? ")" : "", eng);
    print_eval(stdout, "eval", task, &r);
    if (*eng) { /* how the iterations went: never a silent last iterate */
        ba_approx_stats a = ba_model_approx_stats_take(m);
        printf("eval approx: %ld rows, %.1f sweeps on average (at most %d), %ld retried, "
               "%ld unconverged\n", a.queries, a.queries ? (double)a.sweeps / a.queries : 0.0,
               a.max_sweeps, a.retried, a.unconverged);
    }
    if (own.kind == BA_SAMPLER_EXACT)
        return 0;
    if (print_exact_skipped(stdout, "eval", cfg))
        return 0;
    ba_sampler exact = ba_sampler_default(BA_SAMPLER_EXACT);
    if ((st = ba_model_set_sampler(m, &exact, err)))
        return fail_lib(c, err, 1);
    if ((rc = evaluate(c, m, data, items, batch, "eval (exact inference)", &r)))
        return rc;
    print_eval(stdout, "eval (exact inference)", task, &r);
    return 0;
}

/* eval --T: *m replaced by the model at that context length. */
static int resize_model(const command *c, ba_model **m)
{
    char err[BA_ERR_LEN];
    int T, rc;
    if ((rc = get_int(c, "T", 1, BA_MAX_BLOCK, &T)))
        return rc;
    if (T == ba_model_config(*m)->block_size)
        return 0;
    ba_model *r;
    int st = ba_model_resize(*m, T, &r, err);
    if (st)
        return fail_lib(c, err, st == BA_ERR_NOMEM ? 1 : EXIT_USAGE);
    ba_model_free(*m);
    *m = r;
    return 0;
}

/* --engine and the approximate engines' options: the checkpoint's unless
 * told. */
static int set_engine(const command *c, ba_model *m)
{
    const ba_config *cfg = ba_model_config(m);
    ba_engine e = cfg->engine;
    char err[BA_ERR_LEN];
    if (is_set(c, "engine") && ba_engine_parse(get_str(c, "engine"), &e, err))
        return usage_error(c, "--engine: %s", err);
    ba_approx base = ba_engine_is_approx(cfg->engine) ? cfg->approx : ba_approx_default();
    int window = cfg->window > 0 ? cfg->window : 8, rc;
    if ((engine_caps(e) & BA_ENGINE_CAP_WINDOW) && cfg->window == 0 &&
        cfg->block_size - 1 < window)
        window = cfg->block_size > 1 ? cfg->block_size - 1 : 1;
    ba_approx a;
    if ((rc = parse_approx_opts(c, e, &base, window, &a, &window)))
        return rc;
    if (e == cfg->engine && !is_set(c, "window") && !is_set(c, "damping") &&
        !is_set(c, "tol") && !is_set(c, "max-iter"))
        return 0;
    if (ba_model_set_engine(m, e, &a, window, err))
        return usage_error(c, "--engine %s: %s", ba_engine_name(e), err);
    return 0;
}

/* --band-precision: the checkpoint's unless told; after the engine and
 * sampler, which decide whether a band engine runs at all. */
static int set_band_precision(const command *c, ba_model *m)
{
    if (!is_set(c, "band-precision"))
        return 0;
    char err[BA_ERR_LEN];
    const char *p = get_str(c, "band-precision");
    int f32;
    if (ba_band_precision_parse(p, &f32, err))
        return usage_error(c, "--band-precision: %s", err);
    if (ba_model_set_band_precision(m, f32, err))
        return usage_error(c, "--band-precision %s: %s", p, err);
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    const command *c = &eval_cmd;
    /* eval computes no gradient: the inverse temperature the sampled
     * gradient assumes has nothing to act on */
    static const char *const no_grad[] = {"sampler-beta", NULL};
    sampler_opts_append(eval_opts, (int)(sizeof eval_opts / sizeof eval_opts[0]), no_grad);
    int rc = parse_args(c, argc, argv, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    int items = 0, batch;
    if ((rc = get_int(c, "batch", 1, 1 << 20, &batch)))
        return rc;
    if (is_set(c, "items") && (rc = get_int(c, "items", 0, INT_MAX, &items)))
        return rc;
    if ((rc = apply_threads(c)))
        return rc;
    char err[BA_ERR_LEN];
    ba_model *m;
    ba_data_spec spec;
    if ((rc = load_model(c, &m, &spec, err)))
        return rc;
    const ba_config *cfg = ba_model_config(m);
    /* --sampler and its options: the checkpoint's own sampler unless told */
    if (is_set(c, "T") && (rc = resize_model(c, &m))) {
        ba_model_free(m);
        return rc;
    }
    if ((rc = set_engine(c, m))) {
        ba_model_free(m);
        return rc;
    }
    cfg = ba_model_config(m);
    ba_sampler sampler;
    if ((rc = parse_sampler_opt(c, &cfg->sampler, &sampler))) {
        ba_model_free(m);
        return rc;
    }
    int st = ba_model_set_sampler(m, &sampler, err);
    if (st) {
        ba_model_free(m);
        return usage_error(c, "--sampler: %s", err);
    }
    if ((rc = set_band_precision(c, m))) {
        ba_model_free(m);
        return rc;
    }
    ba_dataset *data;
    if ((rc = open_eval_data(c, cfg, &spec, &data, err))) {
        ba_model_free(m);
        return rc;
    }
    rc = eval_report(c, m, spec.task, data, items, batch);
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
    {"threads", "N", "idle cores", "OpenMP threads (at most the CPUs)", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command sample_cmd = {"sample", "--ckpt FILE [--prompt TEXT] [options]",
                                   sample_opts};

/* The next token after the T-token context ctx: greedy at temperature 0,
 * else drawn from softmax(logits / temp). p: V doubles of workspace.
 * BA_ERR_NUMERIC when a logit is not finite: a draw from NaN weights
 * would be a token all the same (the last one), text that looks like a
 * model's. */
static int next_token(ba_model *m, const int *ctx, int T, double temp, ba_rng *rng, double *p,
                      int *next, char *err)
{
    const ba_config *cfg = ba_model_config(m);
    int V = cfg->vocab_size;
    int st = ba_model_forward(m, ctx, NULL, 1, T, NULL, err);
    if (st)
        return st;
    const ba_real *lg = ba_model_logits(m) + (size_t)(T - 1) * V;
    for (int v = 0; v < V; v++)
        if (!isfinite(lg[v]))
            return ba_fail(err, BA_ERR_NUMERIC,
                           "the model's logit of token %d is %g, not finite: the checkpoint "
                           "cannot be sampled from",
                           v, (double)lg[v]);
    *next = 0;
    if (temp == 0) {
        for (int v = 1; v < V; v++)
            if (lg[v] > lg[*next])
                *next = v;
        return BA_OK;
    }
    double mx = -INFINITY, z = 0;
    for (int v = 0; v < V; v++)
        mx = fmax(mx, lg[v] / temp);
    for (int v = 0; v < V; v++)
        z += p[v] = exp(lg[v] / temp - mx);
    double u = ba_rng_uniform(rng) * z, acc = 0;
    *next = V - 1;
    for (int v = 0; v < V; v++)
        if ((acc += p[v]) > u) {
            *next = v;
            break;
        }
    return BA_OK;
}

/* Generates len tokens after the n prompt tokens of toks, streaming them
 * to stdout; the prompt is printed with the first token, so a model that
 * cannot be sampled prints nothing. 0, or 1 after printing the failure. */
static int generate(const command *c, ba_model *m, const ba_data_spec *spec, const char *prompt,
                    int *toks, size_t n, int len, double temp, uint64_t seed)
{
    char err[BA_ERR_LEN];
    ba_rng rng;
    ba_rng_seed(&rng, seed);
    const ba_config *cfg = ba_model_config(m);
    int Tm = cfg->block_size, st = BA_OK;
    double *p = malloc(sizeof(double) * (size_t)cfg->vocab_size);
    if (!p)
        return fail_lib(c, "out of memory", 1);
    for (int k = 0; k < len && st == BA_OK; k++) {
        int T = n < (size_t)Tm ? (int)n : Tm, next = 0;
        if ((st = next_token(m, toks + n - T, T, temp, &rng, p, &next, err)))
            break;
        if (k == 0)
            fputs(prompt, stdout);
        toks[n++] = next;
        fputc(spec->vocab[next], stdout);
    }
    free(p);
    if (st) {
        fflush(stdout);
        return fail_lib(c, err, 1);
    }
    if (len == 0)
        fputs(prompt, stdout);
    fputc('\n', stdout);
    return 0;
}

int cmd_sample(int argc, char **argv)
{
    const command *c = &sample_cmd;
    int rc = parse_args(c, argc, argv, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    int len;
    double temp;
    uint64_t seed;
    if ((rc = get_int(c, "len", 0, 100000000, &len)) ||
        (rc = get_double(c, "temperature", 0, 100, &temp)) || (rc = get_u64(c, "seed", &seed)) ||
        (rc = apply_threads(c)))
        return rc;
    const char *prompt = is_set(c, "prompt") ? get_str(c, "prompt") : "\n";
    char err[BA_ERR_LEN];
    ba_model *m;
    ba_data_spec spec;
    if ((rc = load_model(c, &m, &spec, err)))
        return rc;
    if (spec.task != BA_TASK_CHARLM) {
        ba_model_free(m);
        return usage_error(c, "sampling needs a charlm checkpoint, this one is %s",
                           ba_task_name(spec.task));
    }
    size_t plen = strlen(prompt);
    if (plen == 0) {
        ba_model_free(m);
        return usage_error(c, "--prompt must not be empty");
    }
    int *toks = malloc(sizeof(int) * (plen + (size_t)len));
    if (!toks) {
        ba_model_free(m);
        return fail_lib(c, "out of memory", 1);
    }
    int st = ba_encode_text(spec.vocab, spec.vocab_size, prompt, plen, toks, err);
    if (st)
        rc = usage_error(c, "--prompt: %s", err);
    else
        rc = generate(c, m, &spec, prompt, toks, plen, len, temp, seed);
    free(toks);
    ba_model_free(m);
    return rc;
}

/* ------------------------------------------------------------- grads */

static opt grads_opts[] = {
    {"ckpt", "FILE", NULL, "checkpoint", 0, 0},
    {"batch", "FILE", NULL, "batch file (safetensors: inputs, targets I32 [B,T])", 0, 0},
    {"out", "FILE", NULL, "gradient file to write (safetensors)", 0, 0},
    {"threads", "N", "idle cores", "OpenMP threads (at most the CPUs)", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command grads_cmd = {"grads", "--ckpt FILE --batch FILE --out FILE", grads_opts};

int cmd_grads(int argc, char **argv)
{
    const command *c = &grads_cmd;
    int rc = parse_args(c, argc, argv, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    if ((rc = apply_threads(c)))
        return rc;
    if (!get_str(c, "batch"))
        return usage_error(c, "option '--batch' is required");
    const char *inputs[] = {get_str(c, "ckpt"), get_str(c, "batch")};
    if ((rc = check_out_file(c, "--out", get_str(c, "out"), inputs, 2)))
        return rc;
    char err[BA_ERR_LEN];
    ba_model *m;
    if ((rc = load_model(c, &m, NULL, err)))
        return rc;
    int *in = NULL, *tg = NULL, B, T;
    int st = ba_batch_load(get_str(c, "batch"), &in, &tg, &B, &T, err);
    double loss = 0;
    if (st) {
        ba_model_free(m);
        return fail_lib(c, err, input_status(st));
    }
    if ((st = ba_batch_check(ba_model_config(m), in, tg, B, T, err))) {
        fprintf(stderr, "%s grads: batch does not fit the model: %s\n", prog, err);
        free(in), free(tg);
        ba_model_free(m);
        return input_status(st);
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
    {"data", "PATH", "as eval", "charlm text file (a regular file of at most 1 GiB)", 0, 0},
    {"size", "N", "8", "sequences in the batch (with --split eval: at most the split's items)",
     0, 0},
    {"split", "train|eval", "train", "draw training batches or the first evaluation items", 0,
     0},
    {"seed", "N", "1", "seed for training batches", 0, 0},
    {"out", "FILE", NULL, "batch file to write", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command batch_cmd = {"batch", "--ckpt FILE --out FILE [options]", batch_opts};

int cmd_batch(int argc, char **argv)
{
    const command *c = &batch_cmd;
    int rc = parse_args(c, argc, argv, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    int B;
    uint64_t seed;
    if ((rc = get_int(c, "size", 1, 1 << 20, &B)) || (rc = get_u64(c, "seed", &seed)))
        return rc;
    const char *split = get_str(c, "split");
    if (strcmp(split, "train") != 0 && strcmp(split, "eval") != 0)
        return usage_error(c, "--split: '%s' is not train or eval", split);
    const char *inputs[] = {get_str(c, "ckpt"), is_set(c, "data") ? get_str(c, "data") : NULL};
    if ((rc = check_out_file(c, "--out", get_str(c, "out"), inputs, 2)))
        return rc;
    char err[BA_ERR_LEN];
    ba_model *m;
    ba_data_spec spec;
    if ((rc = load_model(c, &m, &spec, err)))
        return rc;
    const ba_config *cfg = ba_model_config(m);
    ba_dataset *data;
    if ((rc = open_eval_data(c, cfg, &spec, &data, err))) {
        ba_model_free(m);
        return rc;
    }
    int T = cfg->block_size, n_eval = ba_dataset_num_eval(data);
    /* The evaluation items are a fixed set: more rows than it has would
     * repeat items silently. */
    if (strcmp(split, "eval") == 0 && B > n_eval) {
        ba_model_free(m);
        ba_dataset_free(data);
        return usage_error(c, "--size %d: the evaluation split has only %d %s%s", B, n_eval,
                           spec.task == BA_TASK_CHARLM ? "window" : "held-out sequence",
                           n_eval == 1 ? "" : "s");
    }
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
            for (int b = 0; b < B; b++)
                ba_dataset_eval_item(data, b, in + (size_t)b * T, tg + (size_t)b * T);
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

