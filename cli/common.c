/* Pieces the tool's commands share (see cli.h): messages and exit codes,
 * directories, data, output files and gnuplot, the sampler options, the
 * shared training options and the run directory's lock. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int input_status(int st) { return (st == BA_ERR_NOMEM || st == BA_ERR_NUMERIC) ? 1 : 2; }

int fail_lib(const command *c, const char *err, int code)
{
    fprintf(stderr, "%s %s: %s\n", prog, c->cmd, err);
    return code;
}

int make_dirs(const char *path, char *err)
{
    char buf[PATH_LEN];
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

const char *default_data_path(void)
{
    const char *env = getenv("BA_DATA");
    if (env && *env)
        return env;
    return "data/tinyshakespeare.txt";
}

int open_dataset(const ba_data_spec *spec, int T, const char *path, int use_vocab,
                 ba_dataset **out, char *err)
{
    if (spec->task == BA_TASK_RECALL)
        return ba_dataset_recall(out, T, spec->recall_vocab, spec->pairs, spec->n_heldout,
                                 spec->data_seed, err);
    if (spec->task == BA_TASK_BRACKETS)
        return ba_dataset_brackets_capped(out, T, spec->kinds, spec->max_depth, spec->n_heldout,
                                          spec->data_seed, err);
    if (access(path, R_OK) != 0) {
        snprintf(err, BA_ERR_LEN,
                 "cannot read data file %s (%s); run 'make data' or pass --data PATH", path,
                 strerror(errno));
        return BA_ERR_IO;
    }
    return ba_dataset_charlm(out, path, use_vocab ? spec->vocab : NULL,
                             use_vocab ? spec->vocab_size : 0, T, err);
}

char *ckpt_data_path(const char *ckpt)
{
    ba_st *st;
    char err[BA_ERR_LEN];
    if (ba_st_read(&st, ckpt, err))
        return NULL;
    /* only the "data" key: settings of older versions may lack others */
    const char *train = ba_st_metadata(st, "train");
    char *out = NULL;
    cJSON *o = train ? cJSON_Parse(train) : NULL;
    const cJSON *d = o ? cJSON_GetObjectItemCaseSensitive(o, "data") : NULL;
    /* a repeated "data" key is read differently by other readers: none */
    int n = 0;
    for (const cJSON *it = o ? o->child : NULL; it; it = it->next)
        n += it->string && !strcmp(it->string, "data");
    if (cJSON_IsString(d) && n == 1 && strlen(d->valuestring) > 0)
        out = strdup(d->valuestring);
    cJSON_Delete(o);
    ba_st_free(st);
    return out;
}

void print_eval(FILE *f, const char *label, ba_task task, const ba_eval_result *r)
{
    if (r->n_targets == 0) /* nothing was scored: no number to show */
        fprintf(f, "%s: no targets (%d items)\n", label, r->n_items);
    else if (task == BA_TASK_CHARLM)
        fprintf(f, "%s: val_loss %.4f  val_ppl %.4f  (%d windows, %ld targets)\n", label,
                r->loss, r->ppl, r->n_items, r->n_targets);
    else /* brackets scores each ')', recall each queried value */
        fprintf(f, "%s: accuracy %.2f %%  (%ld of %ld %s in %d held-out sequences)  loss %.4f\n",
                label, 100.0 * r->accuracy, lround(r->accuracy * r->n_targets), r->n_targets,
                task == BA_TASK_RECALL ? "queried values" : "')'", r->n_items, r->loss);
}

int print_exact_skipped(FILE *f, const char *label, const ba_config *cfg)
{
    char why[BA_ERR_LEN];
    if (ba_config_check_exact(cfg, why) == BA_OK)
        return 0;
    fprintf(f, "%s (exact inference): skipped: %s\n", label, why);
    return 1;
}

/* ------------------------------------------------------ output files */

static int vmkpath(const command *c, char *buf, const char *fmt, va_list ap)
{
    int n = vsnprintf(buf, PATH_LEN, fmt, ap);
    if (n < 0 || n >= PATH_LEN) {
        fprintf(stderr, "%s %s: path too long (%d bytes)\n", prog, c->cmd, n);
        return -1;
    }
    return 0;
}

int mkpath(const command *c, char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vmkpath(c, buf, fmt, ap);
    va_end(ap);
    return rc;
}

int out_open(const command *c, out_file *o)
{
    o->buf = NULL, o->len = 0;
    if (!(o->f = open_memstream(&o->buf, &o->len))) {
        fprintf(stderr, "%s %s: out of memory\n", prog, c->cmd);
        return 1;
    }
    return 0;
}

FILE *out_openf(const command *c, out_file *o, char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vmkpath(c, path, fmt, ap);
    va_end(ap);
    return rc || out_open(c, o) ? NULL : o->f;
}

int out_close(const command *c, out_file *o, const char *path)
{
    char err[BA_ERR_LEN];
    int bad = ferror(o->f);
    bad |= fclose(o->f) != 0;
    int rc = bad ? -1 : ba_write_file(path, o->buf, o->len, err);
    free(o->buf);
    o->f = NULL, o->buf = NULL;
    if (bad)
        fprintf(stderr, "%s %s: cannot build %s: out of memory\n", prog, c->cmd, path);
    else if (rc)
        fprintf(stderr, "%s %s: %s\n", prog, c->cmd, err);
    return bad || rc ? 1 : 0;
}

void out_discard(out_file *o)
{
    fclose(o->f);
    free(o->buf);
    o->f = NULL, o->buf = NULL;
}

int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int check_out_file(const command *c, const char *what, const char *path,
                   const char *const *inputs, int n)
{
    if (!path)
        return usage_error(c, "option '%s' is required", what);
    if (!*path)
        return usage_error(c, "%s: the path is empty", what);
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return usage_error(c, "%s %s: exists and is not a regular file (%s); not replacing it",
                           what, path, S_ISDIR(st.st_mode)    ? "a directory"
                                       : S_ISCHR(st.st_mode)  ? "a character device"
                                       : S_ISBLK(st.st_mode)  ? "a block device"
                                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                                                              : "not a file");
    for (int i = 0; i < n; i++)
        if (inputs[i] && same_file(path, inputs[i]))
            return usage_error(c, "%s %s: is the input %s; writing it would destroy the input",
                               what, path, inputs[i]);
    return 0;
}

int have_gnuplot(void)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        return 0;
    char dir[PATH_LEN], file[PATH_LEN + 16];
    while (*path) {
        size_t len = strcspn(path, ":");
        if (len < sizeof dir) {
            memcpy(dir, path, len);
            dir[len] = '\0';
            if (len == 0)
                strcpy(dir, ".");
            snprintf(file, sizeof file, "%s/gnuplot", dir);
            struct stat st;
            if (stat(file, &st) == 0 && S_ISREG(st.st_mode) && access(file, X_OK) == 0)
                return 1;
        }
        path += len;
        if (*path == ':')
            path++;
    }
    return 0;
}

const char *const no_gnuplot_fix = "(apt-get install gnuplot-nox)";

int run_gnuplot(const command *c, const char *dir, const char *script)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s %s: cannot start gnuplot: %s\n", prog, c->cmd, strerror(errno));
        return 1;
    }
    if (pid == 0) {
        if (chdir(dir) != 0)
            _exit(126);
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) { /* gnuplot's stdout is ours; its warnings stay on stderr */
            dup2(fd, STDOUT_FILENO);
            close(fd);
        }
        char *args[] = {"gnuplot", (char *)script, NULL};
        execvp("gnuplot", args);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "%s %s: waiting for gnuplot: %s\n", prog, c->cmd, strerror(errno));
            return 1;
        }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFEXITED(status))
        fprintf(stderr, "%s %s: gnuplot failed on %s/%s (exit %d)\n", prog, c->cmd, dir, script,
                WEXITSTATUS(status));
    else
        fprintf(stderr, "%s %s: gnuplot killed by signal %d on %s/%s\n", prog, c->cmd,
                WIFSIGNALED(status) ? WTERMSIG(status) : 0, dir, script);
    return 1;
}

void gp_header(FILE *f, const char *script, const char *png, int w, int h)
{
    fprintf(f,
            "# Written by boltzattn. Re-run from this directory: gnuplot %s\n"
            "set encoding utf8\n"
            "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n"
            "    set terminal pngcairo size %d,%d enhanced font \"sans,11\"\n"
            "} else {\n"
            "    set terminal png size %d,%d enhanced\n"
            "}\n"
            "set output '%s'\n",
            script, w, h, w, h, png);
}

/* ---------------------------------------------------- sampler options */

void sampler_opts_append(opt *table, int cap, const char *const *skip)
{
    /* The defaults shown in --help: ba_sampler_default of the kind that
     * uses the parameter (direct for the ones every kind uses). */
    static char defs[SAMPLER_PARAM_SLOTS][32];
    int n = 0, np;
    while (table[n].name)
        n++;
    const ba_sampler_param *p = ba_sampler_params(&np);
    for (int i = 0; i < np && i < SAMPLER_PARAM_SLOTS && n + 1 < cap; i++) {
        int skipped = 0;
        for (int k = 0; skip && skip[k]; k++)
            skipped |= strcmp(skip[k], p[i].option) == 0;
        if (skipped || find_opt(&(command){NULL, NULL, table}, p[i].option))
            continue;
        ba_sampler d = ba_sampler_default(p[i].kind == BA_SAMPLER_EXACT ? BA_SAMPLER_DIRECT
                                                                        : p[i].kind);
        snprintf(defs[i], sizeof defs[i], "%g", ba_sampler_param_get(&d, &p[i]));
        table[n++] = (opt){p[i].option, p[i].is_int ? "N" : "X", defs[i], p[i].help, 0, 0};
        table[n] = (opt){0, 0, 0, 0, 0, 0};
    }
}

int parse_sampler_params(const command *c, const ba_sampler_kind *kinds, int nkinds,
                         int with_shots)
{
    int np;
    const ba_sampler_param *p = ba_sampler_params(&np);
    for (int i = 0; i < np; i++) {
        const char *name = p[i].option;
        opt *o = find_opt(c, name);
        if (!o || !o->set || (!with_shots && strcmp(name, "shots") == 0))
            continue;
        int used = 0;
        for (int j = 0; j < nkinds; j++)
            used |= ba_sampler_param_used(&p[i], kinds[j]);
        if (!used && p[i].kind == BA_SAMPLER_EXACT)
            return usage_error(c, "--%s needs a sampler other than exact (--sampler)", name);
        if (!used)
            return usage_error(c, "--%s applies to the %s sampler only, which is not in use",
                               name, ba_sampler_name(p[i].kind));
        int rc, xi;
        double xd;
        if (p[i].is_int)
            rc = get_int(c, name, (int)p[i].lo, (int)p[i].hi, &xi);
        else if ((rc = get_double(c, name, p[i].lo, p[i].hi, &xd)) == 0 && p[i].lo_open &&
                 !(xd > p[i].lo))
            rc = usage_error(c, "--%s: %g is out of range (%g, %g]", name, xd, p[i].lo, p[i].hi);
        if (rc)
            return rc;
    }
    return 0;
}

void apply_sampler_params(const command *c, ba_sampler *s, int with_shots)
{
    int np;
    const ba_sampler_param *p = ba_sampler_params(&np);
    for (int i = 0; i < np; i++) {
        opt *o = find_opt(c, p[i].option);
        if (!o || !o->set || (!with_shots && strcmp(p[i].option, "shots") == 0) ||
            !ba_sampler_param_used(&p[i], s->kind))
            continue;
        ba_sampler_param_set(s, &p[i], strtod(o->val, NULL));
    }
}

int parse_sampler_opt(const command *c, const ba_sampler *base, ba_sampler *out)
{
    char err[BA_ERR_LEN];
    ba_sampler_kind kind = base->kind;
    /* Only a given --sampler counts: eval's default is a description. */
    const char *name = is_set(c, "sampler") ? get_str(c, "sampler") : NULL;
    if (name && ba_sampler_parse(name, &kind, err))
        return usage_error(c, "--sampler: %s", err);
    *out = kind == base->kind ? *base : ba_sampler_default(kind);
    int rc = parse_sampler_params(c, &kind, 1, 1);
    if (rc)
        return rc;
    apply_sampler_params(c, out, 1);
    if (ba_sampler_validate(out, err))
        return usage_error(c, "sampler: %s", err);
    return 0;
}

void sampler_desc(const ba_sampler *s, char *buf, size_t n)
{
    if (s->kind == BA_SAMPLER_EXACT)
        snprintf(buf, n, "exact");
    else if (s->beta_assumed != 1.0)
        snprintf(buf, n, "%s, S=%d, beta_assumed=%g", ba_sampler_name(s->kind), s->shots,
                 s->beta_assumed);
    else
        snprintf(buf, n, "%s, S=%d", ba_sampler_name(s->kind), s->shots);
}

/* ------------------------------------------------- shared train options */

int parse_approx_opts(const command *c, ba_engine engine, const ba_approx *base,
                      int base_window, ba_approx *approx, int *window)
{
    static const char *const names[4] = {"window", "damping", "tol", "max-iter"};
    *approx = *base;
    int has_window = (engine_caps(engine) & BA_ENGINE_CAP_WINDOW) != 0;
    *window = has_window ? base_window : 0;
    int is_approx = ba_engine_is_approx(engine), rc;
    for (int i = 0; i < 4; i++)
        if (is_set(c, names[i]) && (!is_approx || (i == 0 && !has_window)))
            return usage_error(c, "--%s applies to %s, not to the %s engine", names[i],
                               i == 0 ? "the hybrid engine (--engine hybrid)"
                                      : "the approximate engines (--engine mf|tap|bp|hybrid)",
                               ba_engine_name(engine));
    if (is_set(c, "window") && (rc = get_int(c, "window", 1, BA_MAX_BAND, window)))
        return rc;
    if ((is_set(c, "damping") && (rc = get_double(c, "damping", 0, 1, &approx->damping))) ||
        (is_set(c, "tol") && (rc = get_double(c, "tol", 0, 1, &approx->tol))) ||
        (is_set(c, "max-iter") &&
         (rc = get_int(c, "max-iter", 1, BA_APPROX_MAX_ITER, &approx->max_iter))))
        return rc;
    if (!(approx->damping > 0))
        return usage_error(c, "--damping %g: must be above 0 (the iteration would never move)",
                           approx->damping);
    if (!(approx->tol > 0))
        return usage_error(c, "--tol %g: must be above 0 (no iteration reaches it)",
                           approx->tol);
    return 0;
}

int parse_shared_opts(const command *c, ba_task task, ba_engine arm_engine, model_opts *m,
                      ba_train_settings *s)
{
    char err[BA_ERR_LEN];
    int rc;
    long steps;
    if ((rc = get_long(c, "steps", 1, 1000000000L, &steps)))
        return rc;
    *s = ba_train_settings_default(steps);
    m->data = ba_data_spec_default(task);
    if (ba_engine_parse(get_str(c, "engine"), &m->engine, err))
        return usage_error(c, "%s", err);
    ba_approx defaults = ba_approx_default();
    ba_engine settings_of = ba_engine_is_approx(m->engine) ? m->engine : arm_engine;
    if ((rc = parse_approx_opts(c, settings_of, &defaults, 0, &m->approx, &m->window)))
        return rc;
    if ((rc = get_int(c, "layers", 1, 64, &m->layers)) ||
        (rc = get_int(c, "heads", 1, 64, &m->heads)) ||
        (rc = get_int(c, "batch", 1, 1 << 20, &s->batch)) ||
        (rc = get_double(c, "lr", 0, 10, &s->lr)) ||
        (rc = get_double(c, "min-lr", 0, 1, &s->min_lr_frac)) ||
        (rc = get_double(c, "weight-decay", 0, 10, &s->opt.weight_decay)) ||
        (rc = get_double(c, "clip", 0, 1e9, &s->opt.grad_clip)) ||
        (rc = get_double(c, "init-std", 1e-6, 1, &s->init_std)) ||
        (rc = get_int(c, "kinds", 1, 4, &m->data.kinds)) ||
        (rc = get_int(c, "heldout", 1, 1 << 24, &m->data.n_heldout)) ||
        (rc = get_u64(c, "data-seed", &m->data.data_seed)) ||
        (rc = get_int(c, "recall-vocab", 4, 256, &m->data.recall_vocab)) ||
        (rc = get_int(c, "pairs", 1, 128, &m->data.pairs)) ||
        (rc = get_int(c, "eval-items", 1, INT_MAX, &s->eval_items)) ||
        (rc = get_int(c, "log-every", 1, INT_MAX, &s->log_every)))
        return rc;
    if ((is_set(c, "recall-vocab") || is_set(c, "pairs")) && task != BA_TASK_RECALL)
        return usage_error(c, "--%s is for --task recall",
                           is_set(c, "pairs") ? "pairs" : "recall-vocab");
    if (is_set(c, "max-depth") && task != BA_TASK_BRACKETS)
        return usage_error(c, "--max-depth is for --task brackets");
    if (is_set(c, "max-depth") &&
        (rc = get_int(c, "max-depth", 1, BA_MAX_BLOCK, &m->data.max_depth)))
        return rc;
    if (is_set(c, "warmup") && (rc = get_long(c, "warmup", 0, s->steps, &s->warmup)))
        return rc;
    if (is_set(c, "eval-every") && (rc = get_int(c, "eval-every", 0, INT_MAX, &s->eval_every)))
        return rc;
    long tenth = s->steps / 10 > 0 ? s->steps / 10 : s->steps;
    s->save_every = s->eval_every > 0 ? s->eval_every : (int)tenth;
    if (is_set(c, "save-every") && (rc = get_int(c, "save-every", 0, INT_MAX, &s->save_every)))
        return rc;
    return apply_threads(c);
}

/* ------------------------------------------------------------- the lock */

int take_lock(const char *dir, dir_lock *lk, char *err)
{
    lk->fd = -1;
    snprintf(lk->path, sizeof lk->path, "%s/.lock", dir);
    /* A few tries: the holder unlinks the file as it releases it, so the
     * file this process opened and locked may already be gone from dir. */
    errno = 0;
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(lk->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            break;
        struct flock fl = {0};
        fl.l_type = F_WRLCK, fl.l_whence = SEEK_SET; /* l_len 0: the whole file */
        if (fcntl(fd, F_SETLK, &fl) != 0) {
            int e = errno;
            struct flock q = {0};
            q.l_type = F_WRLCK, q.l_whence = SEEK_SET;
            long pid = fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK ? (long)q.l_pid : 0;
            close(fd);
            if (e != EACCES && e != EAGAIN) {
                errno = e;
                break;
            }
            if (pid == 0)
                continue; /* released meanwhile: try again */
            snprintf(err, BA_ERR_LEN, "%.100s is in use by process %ld (lock file %.100s/.lock)",
                     dir, pid, dir);
            return 2;
        }
        struct stat held, named;
        if (fstat(fd, &held) != 0 || stat(lk->path, &named) != 0 || held.st_ino != named.st_ino ||
            held.st_dev != named.st_dev) {
            close(fd); /* locked a file its holder had just removed */
            continue;
        }
        /* the process id, for people: the lock itself is the kernel's */
        char pid[32];
        int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
            close(fd);
            break;
        }
        lk->fd = fd;
        return 0;
    }
    /* out of tries: the file kept vanishing under this process */
    snprintf(err, BA_ERR_LEN, "cannot take the lock file %.200s: %s", lk->path,
             errno ? strerror(errno) : "it was removed at every try");
    return 1;
}

void release_lock(dir_lock *lk)
{
    if (lk->fd < 0)
        return;
    unlink(lk->path); /* while still held, so no one locks a file about to go */
    close(lk->fd);
    lk->fd = -1;
}
