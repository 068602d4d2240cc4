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
     "charlm text file to evaluate on (its validation split)", 0, 0},
    {"items", "N", "0 (all)", "evaluate on N evenly spaced items only", 0, 0},
    {"batch", "N", "64", "evaluation batch size", 0, 0},
    {"threads", "N", "all cores", "OpenMP and BLAS threads", 0, 0},
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
    free(recorded);
    if (st)
        return fail_lib(c, err, input_status(st));
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
    int st = ba_evaluate(m, data, items, batch, &r, err);
    if (st)
        return fail_lib(c, err, input_status(st));
    sampler_desc(&own, sdesc, sizeof sdesc);
    printf("%s %s T=%d%s%s%s\n", ba_task_name(task), ba_attn_name(cfg->attn),
           cfg->block_size, own.kind ? " (sampler " : "", own.kind ? sdesc : "",
           own.kind ? ")" : "");
    print_eval(stdout, "eval", task, &r);
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
        return fail_lib(c, err, 1);
    print_eval(stdout, "eval (exact inference)", task, &r);
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    const command *c = &eval_cmd;
    sampler_opts_append(eval_opts, (int)(sizeof eval_opts / sizeof eval_opts[0]), NULL);
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
    {0, 0, 0, 0, 0, 0},
};
static const command sample_cmd = {"sample", "--ckpt FILE [--prompt TEXT] [options]",
                                   sample_opts};

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
        (rc = get_double(c, "temperature", 0, 100, &temp)) || (rc = get_u64(c, "seed", &seed)))
        return rc;
    const char *prompt = is_set(c, "prompt") ? get_str(c, "prompt") : "\n";
    char err[BA_ERR_LEN];
    ba_model *m;
    ba_data_spec spec;
    if ((rc = load_model(c, &m, &spec, err)))
        return rc;
    const ba_config *cfg = ba_model_config(m);
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
        fprintf(stderr, "%s sample: out of memory\n", prog);
        return 1;
    }
    int st = ba_encode_text(spec.vocab, spec.vocab_size, prompt, plen, toks, err);
    if (st) {
        free(toks);
        ba_model_free(m);
        return usage_error(c, "--prompt: %s", err);
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
        fputc(spec.vocab[next], stdout);
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
    if (!get_str(c, "out"))
        return usage_error(c, "option '--out' is required");
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
    if (!get_str(c, "out"))
        return usage_error(c, "option '--out' is required");
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

