/* boltzattn train: builds a model for a task, or restores a saved run, and
 * drives the library's training loop (ba_trainer_run) into a run
 * directory: the lock, the progress line, the messages, and stopping at a
 * save point on the first SIGINT/SIGTERM. ablate trains its cells through
 * the same driver (run_trainer). */
#include "cli.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ signals */

/* The signal that asked the running training to stop, 0 if none. */
static volatile sig_atomic_t stop_signal;
/* Set once the last step is taken: a signal then stops the final
 * evaluation, not a step. */
static volatile sig_atomic_t in_final_eval;
/* The other ranks of an MPI job: rank 0 says it for all. */
static volatile sig_atomic_t signal_quiet;

/* First SIGINT/SIGTERM: stop (a long step is abandoned within about one
 * query's time and redone on resume), save, exit. Second: die at once,
 * by the signal's default action, even in the middle of the save (whose
 * temporary file never replaces the last complete one). Only
 * async-signal-safe calls here. */
static void on_stop_signal(int sig)
{
    if (stop_signal) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_signal = sig;
    if (signal_quiet)
        return;
    static const char msg[] = "\nboltzattn: signal received: stopping to save a checkpoint (a step in "
                              "progress is abandoned and redone on --resume; a second signal "
                              "exits at once, without saving)\n";
    static const char fin[] = "\nboltzattn: signal received: stopping the final evaluation (the "
                              "trained model is saved; --resume evaluates it)\n";
    ssize_t w = in_final_eval ? write(STDERR_FILENO, fin, sizeof fin - 1)
                              : write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
}

/* --------------------------------------------------------- the driver */

typedef struct {
    const command *c;
    const ba_train_settings *s;
    ba_task task;
    int verbose;      /* 0 silent, 1 header and validation lines, 2 also progress */
    double tlast;     /* when the progress line was last drawn */
    double ema_loss;  /* smoothed loss of the progress line */
    double teval;     /* when the final evaluation's first batch ended (-1: not yet) */
    int line_open;    /* a progress line is on the terminal */
} driver;

static void on_progress(const ba_record *r, void *user)
{
    driver *d = user;
    if (r->step >= d->s->steps)
        in_final_eval = 1;
    retune_threads(); /* a load that began during the run */
    d->ema_loss = isnan(d->ema_loss) ? r->loss : 0.9 * d->ema_loss + 0.1 * r->loss;
    double t = now_s();
    if (d->verbose < 2 || (t - d->tlast <= 0.2 && r->step != d->s->steps))
        return;
    char eta[32];
    fmt_duration((double)(d->s->steps - r->step) / r->steps_per_s, eta, sizeof eta);
    fprintf(stderr, "\rstep %ld/%ld  loss %.4f  lr %.2e  %.2f steps/s  ETA %s   ", r->step,
            d->s->steps, d->ema_loss, r->lr, r->steps_per_s, eta);
    d->tlast = t;
    d->line_open = 1;
}

/* The final evaluation's progress line (items of the whole set). */
static void on_eval_progress(int done, int total, void *user)
{
    driver *d = user;
    in_final_eval = 1;
    retune_threads();
    double t = now_s();
    if (d->verbose < 2 || (t - d->tlast <= 0.2 && done != total))
        return;
    if (d->teval < 0)
        d->teval = t;
    char eta[32];
    double el = t - d->teval;
    fmt_duration(done > 0 && el > 0 ? el * (total - done) / done : -1, eta, sizeof eta);
    fprintf(stderr, "\r\033[Kfinal evaluation: %d/%d items  ETA %s", done, total, eta);
    d->tlast = t;
    d->line_open = 1;
}

/* The validation lines under the progress line. */
static int on_record(const ba_record *r, void *user, char *err)
{
    (void)err;
    driver *d = user;
    int unconv = r->has_approx && r->approx.unconverged > 0;
    if ((r->kind != BA_REC_EVAL && !unconv) || d->verbose < 1)
        return 0;
    if (d->line_open)
        fprintf(stderr, "\r\033[K");
    d->line_open = 0;
    if (unconv) /* never silent: the weights of those rows are a last iterate */
        fprintf(stderr, "%s %ld: %ld of %ld attention rows did not converge (%ld retried with "
                "a quarter of the damping; metrics.jsonl \"approx\"): consider a smaller "
                "--damping or a larger --max-iter\n",
                r->kind == BA_REC_EVAL ? "validation at step" : "steps up to", r->step,
                r->approx.unconverged, r->approx.queries, r->approx.retried);
    if (r->kind != BA_REC_EVAL)
        return 0;
    char label[64];
    snprintf(label, sizeof label, "step %ld (%d items)", r->step, r->eval.n_items);
    print_eval(stderr, label, d->task, &r->eval);
    return 0;
}

static int on_stop(void *user)
{
    (void)user;
    return stop_signal != 0;
}

/* What went wrong, and which checkpoint is left. */
static void report_failure(const driver *d, const char *dir, const ba_train_outcome *o, int st,
                           const char *err)
{
    const char *nl = d->line_open ? "\n" : "";
    if (o->stopped) {
        fprintf(stderr, "%s%s %s: interrupted at step %ld, and the checkpoint could not be "
                        "saved: %s\n", nl, prog, d->c->cmd, o->step, err);
        return;
    }
    fprintf(stderr, "%s%s %s: %s\n", nl, prog, d->c->cmd, err);
    if (!o->failed_step || st != BA_ERR_NUMERIC)
        return;
    if (o->saved_step >= 0)
        fprintf(stderr, "%s %s: training stopped; %s/model.safetensors keeps the last good "
                        "checkpoint (step %ld)\n", prog, d->c->cmd, dir, o->saved_step);
    else
        fprintf(stderr, "%s %s: training stopped before its first save; no checkpoint was "
                        "written\n", prog, d->c->cmd);
}

/* The lines before the first step: model, threads, data. */
static void print_header(ba_trainer *t, const char *dir)
{
    ba_model *m = ba_trainer_model(t);
    const ba_config *cfg = ba_model_config(m);
    ba_data_spec spec;
    char sdesc[96];
    sampler_desc(&cfg->sampler, sdesc, sizeof sdesc);
    int sampled = cfg->sampler.kind != BA_SAMPLER_EXACT;
    ba_trainer_data_spec(t, &spec);
    /* the couplings' form and the engine that runs them (auto resolved) */
    char form[128] = "";
    int ising = cfg->attn == BA_ATTN_BOLTZMANN || cfg->attn == BA_ATTN_COUPLING;
    if (ising) {
        char band[24] = "";
        if (cfg->band > 0)
            snprintf(band, sizeof band, " band=%d", cfg->band);
        else if (engine_caps(ba_config_engine(cfg)) & BA_ENGINE_CAP_WINDOW)
            snprintf(band, sizeof band, " window=%d", cfg->window);
        snprintf(form, sizeof form, " couplings=%s%s engine=%s%s",
                 ba_couplings_name(cfg->couplings), band,
                 ba_engine_name(ba_config_engine(cfg)),
                 cfg->engine == BA_ENGINE_AUTO ? " (auto)" : "");
    }
    if (cfg->field_bias != BA_FIELD_BIAS_NONE)
        snprintf(form + strlen(form), sizeof form - strlen(form), " field-bias=%s",
                 ba_field_bias_name(cfg->field_bias));
    if (cfg->band_f32)
        snprintf(form + strlen(form), sizeof form - strlen(form), " band-precision=%s",
                 ba_band_precision_name(cfg->band_f32));
    char pos[32] = ""; /* learned, the default of most forms, goes unsaid */
    if (cfg->pos_emb != BA_POS_LEARNED)
        snprintf(pos, sizeof pos, " pos-emb=%s", ba_pos_emb_name(cfg->pos_emb));
    fprintf(stderr,
            "train %s %s T=%d L=%d H=%d C=%d ffn=%s%s%s%s%s: %zu parameters, %d threads, out "
            "%s\n",
            ba_task_name(spec.task), ba_attn_name(cfg->attn), cfg->block_size, cfg->n_layer,
            cfg->n_head, cfg->n_embd, cfg->ffn ? "on" : "off",
            pos, form, sampled ? " sampler=" : "", sampled ? sdesc : "", ba_model_num_params(m),
            threads_in_use(), dir);
    uint64_t ntrain, neval;
    const ba_dataset *d = ba_trainer_dataset(t);
    ba_dataset_sizes(d, &ntrain, &neval);
    if (spec.task == BA_TASK_RECALL) {
        char space[32] = "2^64 or more"; /* the count saturates there */
        if (ntrain != UINT64_MAX)
            snprintf(space, sizeof space, "%llu", (unsigned long long)ntrain);
        fprintf(stderr, "recall: vocabulary %d, %d pairs, %s training sequences, %llu held "
                        "out; chance %.2f %%\n",
                spec.recall_vocab, spec.pairs, space, (unsigned long long)neval,
                100.0 * ba_dataset_position_baseline(d));
    } else if (spec.task == BA_TASK_BRACKETS) {
        /* the held-out set's deepest nesting per sequence: the depth a
         * model must track (about sqrt(T) for one kind uncapped) */
        double depth_mean;
        int depth_max;
        ba_dataset_depth_stats(d, &depth_mean, &depth_max);
        char cap[32] = "", n[32];
        if (spec.max_depth > 0)
            snprintf(cap, sizeof cap, " of depth <= %d", spec.max_depth);
        if (ntrain == UINT64_MAX)
            snprintf(n, sizeof n, "2^64 or more");
        else
            snprintf(n, sizeof n, "%llu", (unsigned long long)ntrain);
        fprintf(stderr, "brackets: %s training prefixes%s, %llu held out (deepest nesting: "
                        "mean %.1f, max %d); position-only baseline %.2f %%\n",
                n, cap, (unsigned long long)neval, depth_mean, depth_max,
                100.0 * ba_dataset_position_baseline(d));
    }
    else
        fprintf(stderr, "charlm: %s, vocabulary %d, %llu train / %llu validation bytes\n",
                ba_trainer_data_path(t) ? ba_trainer_data_path(t) : "(unnamed)",
                cfg->vocab_size, (unsigned long long)ntrain, (unsigned long long)neval);
    if (mpi_size() > 1)
        fprintf(stderr, "data parallel: %d MPI ranks x %d threads, %d sequences of the batch "
                        "of %d on each\n", mpi_size(), threads_in_use(),
                ba_trainer_settings(t)->batch / mpi_size(), ba_trainer_settings(t)->batch);
    long step = ba_trainer_step_count(t);
    if (step > 0)
        fprintf(stderr, "resuming at step %ld of %ld\n", step, ba_trainer_settings(t)->steps);
}

/* The final lines of a sampled run: both evaluations. */
static void print_final(const driver *d, ba_trainer *t, const ba_train_outcome *o)
{
    const ba_config *cfg = ba_model_config(ba_trainer_model(t));
    if (d->verbose < 1 || cfg->sampler.kind == BA_SAMPLER_EXACT)
        return;
    char label[128], sdesc[96];
    sampler_desc(&cfg->sampler, sdesc, sizeof sdesc);
    snprintf(label, sizeof label, "final (%s)", sdesc);
    print_eval(stderr, label, d->task, &o->final);
    if (o->has_exact)
        print_eval(stderr, "final (exact inference)", d->task, &o->exact);
    else
        print_exact_skipped(stderr, "final", cfg);
}

/* The run record's name of this machine (machine_desc), and under MPI
 * the ranks (rank 0's machine named for all of them). */
static const char *this_machine(char buf[256])
{
    machine_desc(buf, 256);
    size_t n = strlen(buf);
    if (mpi_size() > 1 && n < 256)
        snprintf(buf + n, 256 - n, ", %d MPI ranks", mpi_size());
    return buf;
}

int run_trainer(const command *c, ba_trainer *t, const char *dir, int verbose,
                ba_train_outcome *out)
{
    char err[BA_ERR_LEN], machine[256];
    /* the run record names the machine of every call (this one's always
     * a valid line, so only memory can fail it) */
    if (ba_trainer_set_machine(t, this_machine(machine), err))
        return fail_lib(c, err, 1);
    ba_data_spec spec;
    ba_trainer_data_spec(t, &spec);
    driver d = {c, ba_trainer_settings(t), spec.task, verbose, 0, NAN, -1, 0};
    if (verbose >= 1)
        print_header(t, dir);
    /* From here on every exit restores the handlers. */
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    /* Restart interrupted calls: the first signal must not fail a save in
     * progress (a write to a slow device or a pipe). */
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    stop_signal = 0;
    in_final_eval = 0;
    signal_quiet = mpi_rank() != 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    ba_train_hooks hooks = {on_record, on_progress, on_stop, &d, on_eval_progress};
    int st = ba_trainer_run(t, dir, &hooks, out, err);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (st) {
        report_failure(&d, dir, out, st, err);
        /* a run refused before its first step (another run's log, a
         * finished run) is bad input; anything later a runtime failure */
        return (st == BA_ERR_ARG || st == BA_ERR_FORMAT) && !out->failed_step &&
                       out->steps_run == 0
                   ? 2
                   : 1;
    }
    if (d.line_open)
        fprintf(stderr, "\n");
    if (out->stopped && out->step >= d.s->steps) {
        fprintf(stderr, "%s %s: interrupted by signal %d during the final evaluation; the "
                        "trained model is saved to %s/model.safetensors, and 'train --resume "
                        "%s' evaluates it\n",
                prog, c->cmd, (int)stop_signal, dir, dir);
        return 1;
    }
    if (out->stopped) {
        fprintf(stderr, "%s %s: interrupted by signal %d at step %ld; checkpoint saved to "
                        "%s/model.safetensors\n",
                prog, c->cmd, (int)stop_signal, out->step, dir);
        return 1;
    }
    print_final(&d, t, out);
    return 0;
}

/* ------------------------------------------------------------- train */

static opt train_opts[64] = {
    {"task", "charlm|brackets|recall", "brackets",
     "task to train on (recall: multi-query associative recall, --recall-vocab, --pairs)", 0, 0},
    {"attn", "VARIANT", "boltzmann", "attention: softmax|sigmoid|boltzmann|coupling", 0, 0},
    {"T", "N", "8",
     "block size (context length); boltzmann and coupling: at most " BA_STR(BA_FAST_MAX_SPINS)
     " (fast engine), " BA_STR(BA_REFERENCE_MAX_SPINS) " (reference), " BA_STR(BA_DQA_MAX_SPINS)
     " (sampler direct or dqa), " BA_STR(BA_SAMPLER_MAX_SPINS) " (gibbs, sa), "
     BA_STR(BA_MAX_BLOCK) " with --band (band engine); softmax and sigmoid: "
     BA_STR(BA_MAX_BLOCK) "; brackets data: at most " BA_STR(BA_MAX_BLOCK) " (drawn exactly up "
     "to 67, 41, 32, 27 with 1-4 --kinds, in double precision beyond)", 0, 0},
    {"embd", "N", "64", "embedding width C (divisible by --heads)", 0, 0},
    {"no-ffn", NULL, NULL, "blocks without the MLP", 0, 0},
    {"couplings", "FORM", "absolute",
     "boltzmann/coupling: absolute (J_jk per pair of positions, the paper's) or relative "
     "(J_jk = r(k-j), one per distance)", 0, 0},
    {"band", "W", "none",
     "boltzmann/coupling: couplings of range W only (J_jk = 0 for k-j > W), 1 <= W <= T-1 "
     "and <= " BA_STR(BA_MAX_BAND) "; exact at any T with the band engine", 0, 0},
    {"field-bias", "B", "none",
     "sigmoid/boltzmann/coupling: none, or log-n (fields - 1/2 log n for a query seeing n "
     "keys)", 0, 0},
    {"band-precision", "P", "double",
     "boltzmann/coupling on the band engine: float runs its window term in float32 for every "
     "query whose dynamic range float holds (the others in double, as always): 1.5-2.3x on "
     "that term; double: double throughout. Refused where no band engine runs", 0, 0},
    {"pos-emb", "KIND", "learned (none with relative couplings)",
     "positions: learned (embeddings), none, rope (rotary: q and k of each head turned by "
     "their positions; even head size) or alibi (head h's fields less m_h times the distance, "
     "every variant). A model without learned ones runs at any T: eval --T",
     0, 0},
    SHARED_TRAIN_OPTS,
    {"j-init-std", "X", "0", "std of the initial couplings J (0 = start at sigmoid)", 0, 0},
    {"seed", "N", "1", "seed of initialisation and batch order", 0, 0},
    {"out", "DIR", "runs/TASK-ATTN-T<T>[-SAMPLER-S<S>]-s<SEED>", "output directory", 0, 0},
    {"quiet", NULL, NULL, "no progress line", 0, 0},
    {"force", NULL, NULL, "replace the run already in --out (its model, state and log)", 0, 0},
    {"comm-stats", "FILE", NULL,
     "under MPI (mpirun -np N): rank 0 writes the reductions' totals (count, bytes, seconds "
     "spent in them with waits for the other ranks, the waits alone) and the training time to "
     "FILE as JSON",
     0, 0},
    {"resume", "DIR", NULL,
     "continue the run saved in DIR exactly (its own settings; only --data, --threads and "
     "--quiet may be given)", 0, 0},
    SAMPLER_OPTS("exact"),
    {0, 0, 0, 0, 0, 0},
};
static const command train_cmd = {"train", "--task charlm|brackets|recall [options]",
                                  train_opts};

static void report_training(const ba_config *cfg, ba_task task, const char *outdir,
                            const ba_train_outcome *res)
{
    char sdesc[96] = "";
    if (cfg->sampler.kind != BA_SAMPLER_EXACT) {
        strcpy(sdesc, " sampler ");
        sampler_desc(&cfg->sampler, sdesc + 9, sizeof sdesc - 9);
    }
    if (res->steps_run == 0) /* resumed after its last step: the evaluation only */
        printf("%s %s T=%d%s: no steps left; the model of step %ld evaluated\n",
               ba_task_name(task), ba_attn_name(cfg->attn), cfg->block_size, sdesc, res->step);
    else
        printf("%s %s T=%d%s: %ld steps in %.1f s (%.2f steps/s)\n", ba_task_name(task),
               ba_attn_name(cfg->attn), cfg->block_size, sdesc, res->steps_run, res->train_s,
               (double)res->steps_run / fmax(res->train_s, 1e-9));
    print_eval(stdout, "final", task, &res->final);
    if (res->has_exact)
        print_eval(stdout, "final (exact inference)", task, &res->exact);
    printf("checkpoint: %s/model.safetensors\n", outdir);
}

/* A fresh run goes into a directory that holds no run, unless --force: the
 * default --out names only task, variant, T and seed, so two different
 * runs easily meet there. 0, or 2 after saying what is there. */
static int check_fresh_dir(const command *c, const char *dir)
{
    static const char *const files[] = {"run.json", "state.safetensors", "model.safetensors",
                                        "metrics.jsonl"};
    char path[PATH_LEN];
    const char *found = NULL;
    for (size_t i = 0; !found && i < sizeof files / sizeof files[0]; i++) {
        struct stat st;
        if (mkpath(c, path, "%s/%s", dir, files[i]))
            return EXIT_USAGE;
        if (lstat(path, &st) == 0)
            found = files[i];
    }
    if (!found || is_set(c, "force"))
        return 0;
    ba_run_info ri;
    memset(&ri, 0, sizeof ri);
    char err[BA_ERR_LEN], what[160];
    if (ba_run_read(dir, &ri, err) == BA_OK)
        snprintf(what, sizeof what, "a %s run: %s %s T=%d, step %ld of %ld",
                 ba_run_status_name(ri.status), ba_task_name(ri.spec.task),
                 ba_attn_name(ri.config.attn), ri.config.block_size, ri.step, ri.settings.steps);
    else
        snprintf(what, sizeof what, "a run's %s", found);
    ba_run_info_clear(&ri);
    return usage_error(c, "%s already holds %s; pass --resume %s to continue it, --force to "
                       "replace it, or choose another --out", dir, what, dir);
}

/* Under MPI, rank 0's account of the reductions: a line on stderr and,
 * with --comm-stats FILE, the same as JSON. 0, or 1 after printing. */
static int report_comm(const command *c, const ba_train_outcome *res)
{
    const mpi_totals *m = mpi_get_totals();
    if (mpi_size() < 2 || res->steps_run < 1)
        return 0;
    double per_step = (double)m->bytes / (double)res->steps_run;
    fprintf(stderr, "data parallel: %ld reductions, %.3g MB a step per rank, %.3g s in them "
                    "(%.1f %% of the %.3g s of training), of which %.3g s rank 0 waited for the "
                    "other ranks\n",
            m->calls, per_step / 1e6, m->seconds, 100.0 * m->seconds / fmax(res->train_s, 1e-9),
            res->train_s, m->wait);
    if (!is_set(c, "comm-stats"))
        return 0;
    cJSON *o = cJSON_CreateObject();
    char *txt = NULL;
    if (o) {
        cJSON_AddNumberToObject(o, "ranks", mpi_size());
        cJSON_AddNumberToObject(o, "threads", threads_in_use());
        cJSON_AddNumberToObject(o, "steps", (double)res->steps_run);
        cJSON_AddNumberToObject(o, "train_s", res->train_s);
        cJSON_AddNumberToObject(o, "reductions", (double)m->calls);
        cJSON_AddNumberToObject(o, "bytes", (double)m->bytes);
        cJSON_AddNumberToObject(o, "reduce_s", m->seconds);
        cJSON_AddNumberToObject(o, "wait_s", m->wait);
        txt = cJSON_Print(o);
        cJSON_Delete(o);
    }
    char err[BA_ERR_LEN];
    if (!txt)
        return fail_lib(c, "out of memory writing --comm-stats", 1);
    size_t len = strlen(txt);
    txt[len] = '\n'; /* over the terminator: the length says where it ends */
    int st = ba_write_file(get_str(c, "comm-stats"), txt, len + 1, err);
    cJSON_free(txt);
    return st ? fail_lib(c, err, 1) : 0;
}

/* --comm-stats names no file of the run directory (the run's own files,
 * or a file a later run there would meet). 0, or 2 after printing. */
static int check_comm_stats(const command *c, const char *dir)
{
    char parent[PATH_LEN];
    const char *path = get_str(c, "comm-stats");
    const char *slash = strrchr(path, '/');
    if (mkpath(c, parent, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
               slash ? path : "."))
        return EXIT_USAGE;
    if (same_file(parent, dir))
        return usage_error(c, "--comm-stats %s: is inside the run directory %s; write it "
                              "elsewhere", path, dir);
    return 0;
}

/* Locks dir, runs t into it (fresh: refused where a run is, see
 * check_fresh_dir), reports; the exit code. */
static int train_into(const command *c, ba_trainer *t, const char *dir, int fresh)
{
    char err[BA_ERR_LEN];
    dir_lock lk = {-1, ""};
    /* under MPI rank 0 alone owns the directory; the others train with it */
    int lead = mpi_rank() == 0, code = 0;
    int st = lead ? take_lock(dir, &lk, err) : 0;
    if (st)
        code = fail_lib(c, err, st);
    else if (lead && fresh)
        code = check_fresh_dir(c, dir);
    if (!code && lead && is_set(c, "comm-stats"))
        code = check_comm_stats(c, dir);
    ba_reducer red;
    if (!code && mpi_reducer(&red) && (st = ba_trainer_set_reducer(t, &red, err)))
        code = st == BA_ERR_ARG ? usage_error(c, "%s", err) : fail_lib(c, err, 1);
    /* every rank's start agreed (one that cannot start stops them all), and
     * its settings the same as rank 0's */
    if ((code = mpi_agree_train(code, t, dir, fresh))) {
        if (lk.fd >= 0)
            release_lock(&lk);
        return code;
    }
    if (mpi_size() > 1)
        mpi_lockstep(1);
    int verbose = is_set(c, "quiet") || !lead ? 0 : isatty(STDERR_FILENO) ? 2 : 1;
    ba_train_outcome res;
    code = run_trainer(c, t, dir, verbose, &res);
    /* a stop is agreed at a step: every rank left the loop there */
    if (res.stopped)
        mpi_lockstep(0);
    if (lk.fd >= 0)
        release_lock(&lk);
    if (code == 0 && lead && (code = report_comm(c, &res)) == 0) {
        ba_data_spec spec;
        ba_trainer_data_spec(t, &spec);
        report_training(ba_model_config(ba_trainer_model(t)), spec.task, dir, &res);
    }
    return code;
}

/* train --resume DIR: the saved run continues with its own settings. */
static int train_resume(const command *c)
{
    for (opt *o = c->opts; o->name; o++)
        if (o->set && strcmp(o->name, "resume") && strcmp(o->name, "data") &&
            strcmp(o->name, "threads") && strcmp(o->name, "quiet"))
            return usage_error(c,
                               "--%s cannot be combined with --resume: the run continues with "
                               "the settings it was started with",
                               o->name);
    int rc = apply_threads(c);
    if (rc)
        return rc;
    const char *dir = get_str(c, "resume");
    char err[BA_ERR_LEN], *saved_data = NULL, state[PATH_LEN];
    if (mkpath(c, state, "%s/state.safetensors", dir))
        return EXIT_USAGE;
    /* a finished run has nothing to resume (its run record is written
     * last, so a run killed in its final evaluation is not "finished") */
    ba_run_info ri;
    memset(&ri, 0, sizeof ri);
    int done = ba_run_read(dir, &ri, err) == BA_OK && ri.status == BA_RUN_FINISHED;
    long done_step = ri.step;
    ba_run_info_clear(&ri);
    if (done)
        return usage_error(c, "the run in %s has already finished (step %ld); nothing to resume",
                           dir, done_step);
    ba_config cfg;
    ba_data_spec spec;
    int st = ba_trainer_peek(state, &cfg, &spec, NULL, &saved_data, err);
    if (st)
        return fail_lib(c, err, input_status(st));
    const char *data_path = is_set(c, "data") ? get_str(c, "data")
                            : saved_data      ? saved_data
                                              : default_data_path();
    ba_dataset *data = NULL;
    ba_trainer *t = NULL;
    st = open_dataset(&spec, cfg.block_size, data_path, 1, &data, err);
    if (st == BA_OK)
        st = ba_trainer_restore(&t, state, data, data_path, err);
    free(saved_data);
    int code = st ? fail_lib(c, err, input_status(st)) : train_into(c, t, dir, 0);
    ba_trainer_free(t);
    ba_dataset_free(data);
    return code;
}

/* --out names a directory to be: not empty, and not an existing file. */
static int check_out_dir(const command *c, const char *dir)
{
    struct stat st;
    if (!*dir)
        return usage_error(c, "--out: the path is empty");
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return usage_error(c, "--out %s: exists and is not a directory", dir);
    /* a link to nothing, a loop of links, a path through a file: not a
     * directory to be either */
    if (stat(dir, &st) != 0 && (errno != ENOENT || lstat(dir, &st) == 0))
        return usage_error(c, "--out %s: not a directory to write into (%s)", dir,
                           errno == ENOENT ? "a symbolic link to nothing" : strerror(errno));
    return 0;
}

/* --couplings, --band, --field-bias, --band-precision and --pos-emb into cfg. */
static int parse_couplings_opts(const command *c, ba_config *cfg)
{
    char err[BA_ERR_LEN];
    int rc;
    if (ba_couplings_parse(get_str(c, "couplings"), &cfg->couplings, err))
        return usage_error(c, "--couplings: %s", err);
    if (ba_field_bias_parse(get_str(c, "field-bias"), &cfg->field_bias, err))
        return usage_error(c, "--field-bias: %s", err);
    if (ba_band_precision_parse(get_str(c, "band-precision"), &cfg->band_f32, err))
        return usage_error(c, "--band-precision: %s", err);
    /* --band 0 would read as "a band of width 0": no band is the absence
     * of the option */
    if (is_set(c, "band") && (rc = get_int(c, "band", 1, BA_MAX_BAND, &cfg->band)))
        return rc;
    cfg->pos_emb = cfg->couplings == BA_COUPLINGS_RELATIVE ? BA_POS_NONE : BA_POS_LEARNED;
    if (is_set(c, "pos-emb") && ba_pos_emb_parse(get_str(c, "pos-emb"), &cfg->pos_emb, err))
        return usage_error(c, "--pos-emb: %s", err);
    return 0;
}

/* The model config of the command line (refused before any data is read). */
static int train_config(const command *c, ba_task task, const model_opts *mo, ba_config *cfg)
{
    ba_attn attn;
    char err[BA_ERR_LEN];
    int T, embd, rc;
    if (ba_attn_parse(get_str(c, "attn"), &attn, err))
        return usage_error(c, "%s", err);
    if ((rc = get_int(c, "T", 1, BA_MAX_BLOCK, &T)) || (rc = get_int(c, "embd", 1, 8192, &embd)))
        return rc;
    ba_sampler exact = ba_sampler_default(BA_SAMPLER_EXACT);
    *cfg = ba_config_default(attn, T);
    if ((rc = parse_sampler_opt(c, &exact, &cfg->sampler)))
        return rc;
    cfg->engine = mo->engine;
    cfg->approx = mo->approx, cfg->window = mo->window;
    cfg->n_layer = mo->layers, cfg->n_head = mo->heads, cfg->n_embd = embd;
    cfg->ffn = !is_set(c, "no-ffn");
    if ((rc = parse_couplings_opts(c, cfg)))
        return rc;
    if (engine_caps(cfg->engine) & BA_ENGINE_CAP_WINDOW) {
        /* the hybrid's couplings are full range; --band names its window */
        if (cfg->band > 0 && is_set(c, "window") && cfg->band != cfg->window)
            return usage_error(c, "--band %d and --window %d: under --engine hybrid both name "
                               "the exact window; give one", cfg->band, cfg->window);
        if (cfg->band > 0)
            cfg->window = cfg->band, cfg->band = 0;
        if (cfg->window == 0)
            cfg->window = T - 1 < 8 ? (T > 1 ? T - 1 : 1) : 8;
    }
    /* what the data will set, so the config can be checked now */
    cfg->head = task == BA_TASK_BRACKETS ? BA_HEAD_POINTER : BA_HEAD_TOKEN;
    cfg->vocab_size = task == BA_TASK_BRACKETS ? 2 * mo->data.kinds
                      : task == BA_TASK_RECALL ? mo->data.recall_vocab
                                               : 1;
    cfg->out_size = task == BA_TASK_BRACKETS  ? T
                    : task == BA_TASK_RECALL ? mo->data.recall_vocab
                                             : 1;
    if ((rc = ba_config_validate(cfg, err))) {
        int ising = attn == BA_ATTN_BOLTZMANN || attn == BA_ATTN_COUPLING;
        if (rc == BA_ERR_LIMIT && ising && cfg->band == 0 && T > BA_FAST_MAX_SPINS &&
            cfg->sampler.kind == BA_SAMPLER_EXACT)
            return usage_error(c, "%s. At --T %d these work: --band W (e.g. --band 8, with "
                               "--couplings absolute or relative), --sampler gibbs|sa (T <= "
                               "%d), or --attn softmax|sigmoid", err, T, BA_SAMPLER_MAX_SPINS);
        return usage_error(c, "%s", err);
    }
    return 0;
}

int cmd_train(int argc, char **argv)
{
    const command *c = &train_cmd;
    sampler_opts_append(train_opts, (int)(sizeof train_opts / sizeof train_opts[0]), NULL);
    int rc = parse_args(c, argc, argv, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (is_set(c, "resume"))
        return train_resume(c);
    char err[BA_ERR_LEN];
    ba_task task;
    if (ba_task_parse(get_str(c, "task"), &task, err))
        return usage_error(c, "%s", err);
    model_opts mo;
    ba_train_settings s;
    ba_config cfg;
    if ((rc = parse_shared_opts(c, task, BA_ENGINE_AUTO, &mo, &s)) ||
        (rc = get_double(c, "j-init-std", 0, 100, &s.j_init_std)) ||
        (rc = get_u64(c, "seed", &s.seed)) || (rc = train_config(c, task, &mo, &cfg)))
        return rc;
    if (is_set(c, "out") && (rc = check_out_dir(c, get_str(c, "out"))))
        return rc;
    if (is_set(c, "comm-stats") &&
        (rc = check_out_file(c, "--comm-stats", get_str(c, "comm-stats"), NULL, 0)))
        return rc;
    const char *data_path = is_set(c, "data") ? get_str(c, "data") : default_data_path();
    ba_dataset *data = NULL;
    int st = open_dataset(&mo.data, cfg.block_size, data_path, 0, &data, err);
    if (st)
        return fail_lib(c, err, input_status(st));
    ba_config_set_data(&cfg, data);
    char outdir[2048];
    if (is_set(c, "out"))
        snprintf(outdir, sizeof outdir, "%s", get_str(c, "out"));
    else if (cfg.sampler.kind != BA_SAMPLER_EXACT)
        snprintf(outdir, sizeof outdir, "runs/%s-%s-T%d-%s-S%d-s%llu", ba_task_name(task),
                 ba_attn_name(cfg.attn), cfg.block_size, ba_sampler_name(cfg.sampler.kind),
                 cfg.sampler.shots, (unsigned long long)s.seed);
    else
        snprintf(outdir, sizeof outdir, "runs/%s-%s-T%d-s%llu", ba_task_name(task),
                 ba_attn_name(cfg.attn), cfg.block_size, (unsigned long long)s.seed);
    ba_trainer *t = NULL;
    int code;
    if ((st = ba_trainer_init(&t, &cfg, data, data_path, &s, err)))
        code = fail_lib(c, err, input_status(st));
    else if (mpi_rank() == 0 && make_dirs(outdir, err))
        code = fail_lib(c, err, 1);
    else
        code = train_into(c, t, outdir, 1);
    ba_trainer_free(t);
    ba_dataset_free(data);
    return code;
}
