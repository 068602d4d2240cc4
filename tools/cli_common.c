/* Helpers shared by the tool's subcommands (see cli.h): options, messages,
 * exit codes, and the training loop. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void openblas_set_num_threads(int); /* from OpenBLAS; its header varies by distro */

/* ------------------------------------------------------------ options */

const char *prog = "boltzattn";

int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s %s: ", prog, cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see '%s %s --help')\n", prog, cmd);
    va_end(ap);
    return EXIT_USAGE;
}

void print_help(const command *c)
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

/* The option named by the first len bytes of name, or NULL. */
static opt *lookup(const command *c, const char *name, size_t len)
{
    for (opt *p = c->opts; p->name; p++)
        if (strlen(p->name) == len && strncmp(p->name, name, len) == 0)
            return p;
    return NULL;
}

/* Returns -1 on --help (already printed), 0 on success, else an exit code. */
int parse_args(const command *c, int argc, char **argv, const char **pos, int maxpos, int *npos)
{
    for (opt *o = c->opts; o->name; o++)
        o->val = o->def, o->set = 0;
    int np = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_help(c);
            return -1;
        }
        if (strncmp(a, "--", 2) != 0) {
            /* a positional argument: anything not starting with '-', or "-" */
            if (np == maxpos || (a[0] == '-' && a[1]))
                return usage_error(c->cmd, "unexpected argument '%s'", a);
            pos[np++] = a;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        opt *o = lookup(c, name, len);
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
    if (npos)
        *npos = np;
    return 0;
}

int parse_opts(const command *c, int argc, char **argv)
{
    return parse_args(c, argc, argv, NULL, 0, NULL);
}

opt *find_opt(const command *c, const char *name)
{
    for (opt *o = c->opts; o->name; o++)
        if (strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

const char *get_str(const command *c, const char *name) { return find_opt(c, name)->val; }
int get_flag(const command *c, const char *name) { return find_opt(c, name)->set; }

int get_repeated(const command *c, int argc, char **argv, const char *name, const char **vals,
                 int max)
{
    /* The same walk as parse_args, which has already rejected anything
     * malformed; positional arguments name no option and are passed over. */
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0)
            continue;
        const char *a = argv[i] + 2, *eq = strchr(a, '=');
        const opt *o = lookup(c, a, eq ? (size_t)(eq - a) : strlen(a));
        if (!o || !o->arg)
            continue;
        const char *v = eq ? eq + 1 : argv[++i];
        if (strcmp(o->name, name) != 0)
            continue;
        if (n == max)
            return -usage_error(c->cmd, "--%s given more than %d times", name, max);
        vals[n++] = v;
    }
    return n;
}

int get_long(const command *c, const char *name, long lo, long hi, long *out)
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

int get_int(const command *c, const char *name, int lo, int hi, int *out)
{
    long x;
    int rc = get_long(c, name, lo, hi, &x);
    if (!rc)
        *out = (int)x;
    return rc;
}

int get_u64(const command *c, const char *name, uint64_t *out)
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

int get_double(const command *c, const char *name, double lo, double hi, double *out)
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

/* ---------------------------------------------------- sampler options */

/* The sampler's command-line parameters: option, the kind that uses it (-1:
 * every kind but exact), int or double, field, and range [lo, hi], open at
 * lo when open_lo. The ranges are ba_sampler_validate's, which has the last
 * word (it also checks chains <= shots). */
static const struct {
    const char *name;
    int kind, is_int;
    size_t off;
    double lo, hi;
    int open_lo;
} sampler_params[] = {
    {"shots", -1, 1, offsetof(ba_sampler, shots), 1, 1 << 24, 0},
    {"sampler-beta", -1, 0, offsetof(ba_sampler, beta_assumed), 0, 1000, 1},
    {"dqa-tau", BA_SAMPLER_DQA, 0, offsetof(ba_sampler, tau), 0, 1e4, 1},
    {"dqa-gamma", BA_SAMPLER_DQA, 0, offsetof(ba_sampler, gamma), 0, 1e4, 1},
    {"dqa-lambda", BA_SAMPLER_DQA, 0, offsetof(ba_sampler, lambda), 0, 1e4, 1},
    {"dqa-steps", BA_SAMPLER_DQA, 1, offsetof(ba_sampler, trotter_steps), 1, 1e6, 0},
    {"dqa-order", BA_SAMPLER_DQA, 1, offsetof(ba_sampler, order), 1, 2, 0},
    {"gibbs-chains", BA_SAMPLER_GIBBS, 1, offsetof(ba_sampler, chains), 1, 1 << 24, 0},
    {"gibbs-burnin", BA_SAMPLER_GIBBS, 1, offsetof(ba_sampler, burnin), 0, 1e6, 0},
    {"gibbs-thin", BA_SAMPLER_GIBBS, 1, offsetof(ba_sampler, thin), 1, 1e6, 0},
    {"sa-sweeps", BA_SAMPLER_SA, 1, offsetof(ba_sampler, sweeps), 1, 1e6, 0},
    {"sa-beta0", BA_SAMPLER_SA, 0, offsetof(ba_sampler, beta0), 0, 1, 1},
};
#define N_SAMPLER_PARAMS ((int)(sizeof sampler_params / sizeof sampler_params[0]))

void sampler_opt_defaults(const command *c)
{
    static char defs[N_SAMPLER_PARAMS][32];
    for (int i = 0; i < N_SAMPLER_PARAMS; i++) {
        opt *o = find_opt(c, sampler_params[i].name);
        if (!o)
            continue;
        int k = sampler_params[i].kind;
        ba_sampler d = ba_sampler_default(k < 0 ? BA_SAMPLER_DIRECT : (ba_sampler_kind)k);
        const char *p = (const char *)&d + sampler_params[i].off;
        if (sampler_params[i].is_int) {
            int x;
            memcpy(&x, p, sizeof x);
            snprintf(defs[i], sizeof defs[i], "%d", x);
        } else {
            double x;
            memcpy(&x, p, sizeof x);
            snprintf(defs[i], sizeof defs[i], "%g", x);
        }
        o->def = defs[i];
    }
}

int parse_sampler_params(const command *c, const ba_sampler_kind *kinds, int nkinds,
                         int with_shots)
{
    for (int i = 0; i < N_SAMPLER_PARAMS; i++) {
        const char *name = sampler_params[i].name;
        opt *o = find_opt(c, name);
        if (!o || !o->set || (!with_shots && strcmp(name, "shots") == 0))
            continue;
        int k = sampler_params[i].kind, used = 0;
        for (int j = 0; j < nkinds; j++)
            used |= k < 0 ? kinds[j] != BA_SAMPLER_EXACT : (int)kinds[j] == k;
        if (!used && k < 0)
            return usage_error(c->cmd, "--%s needs a sampler other than exact (--sampler)", name);
        if (!used)
            return usage_error(c->cmd, "--%s applies to the %s sampler only, which is not in use",
                               name, ba_sampler_name((ba_sampler_kind)k));
        int rc, xi;
        double xd;
        if (sampler_params[i].is_int)
            rc = get_int(c, name, (int)sampler_params[i].lo, (int)sampler_params[i].hi, &xi);
        else if ((rc = get_double(c, name, sampler_params[i].lo, sampler_params[i].hi, &xd)) == 0 &&
                 sampler_params[i].open_lo && !(xd > sampler_params[i].lo))
            rc = usage_error(c->cmd, "--%s: %g is out of range (%g, %g]", name, xd,
                             sampler_params[i].lo, sampler_params[i].hi);
        if (rc)
            return rc;
    }
    return 0;
}

void apply_sampler_params(const command *c, ba_sampler *s, int with_shots)
{
    for (int i = 0; i < N_SAMPLER_PARAMS; i++) {
        const char *name = sampler_params[i].name;
        opt *o = find_opt(c, name);
        int k = sampler_params[i].kind;
        if (!o || !o->set || (!with_shots && strcmp(name, "shots") == 0) ||
            s->kind == BA_SAMPLER_EXACT || (k >= 0 && (int)s->kind != k))
            continue;
        char *p = (char *)s + sampler_params[i].off;
        if (sampler_params[i].is_int) {
            int x = (int)strtol(o->val, NULL, 10);
            memcpy(p, &x, sizeof x);
        } else {
            double x = strtod(o->val, NULL);
            memcpy(p, &x, sizeof x);
        }
    }
}

int parse_sampler_opt(const command *c, const ba_sampler *base, ba_sampler *out)
{
    char err[BA_ERR_LEN];
    ba_sampler_kind kind = base->kind;
    /* Only a given --sampler counts: eval's default is a description. */
    const char *name = find_opt(c, "sampler")->set ? get_str(c, "sampler") : NULL;
    if (name && ba_sampler_parse(name, &kind, err))
        return usage_error(c->cmd, "--sampler: %s", err);
    *out = kind == base->kind ? *base : ba_sampler_default(kind);
    int rc = parse_sampler_params(c, &kind, 1, 1);
    if (rc)
        return rc;
    apply_sampler_params(c, out, 1);
    if (ba_sampler_validate(out, err))
        return usage_error(c->cmd, "sampler: %s", err);
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

/* Exit code for a library status while reading inputs: bad input is 2, an
 * allocation or numerical failure is a runtime failure. */
int input_status(int st) { return (st == BA_ERR_NOMEM || st == BA_ERR_NUMERIC) ? 1 : 2; }

int fail_lib(const char *cmd, int st, const char *err, int code)
{
    fprintf(stderr, "%s %s: %s\n", prog, cmd, err);
    (void)st;
    return code;
}

void set_threads(int n)
{
    if (n <= 0)
        return;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    openblas_set_num_threads(n);
}

int threads_in_use(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* mkdir -p */
int make_dirs(const char *path, char *err)
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
const char *default_data_path(void)
{
    const char *env = getenv("BA_DATA");
    if (env && *env)
        return env;
    return "data/tinyshakespeare.txt";
}

/* Opens the dataset a config describes (the held-out set of brackets is
 * rebuilt from its seed; charlm reads `path` with the config's vocabulary
 * when use_vocab). */
int open_dataset(const ba_config *cfg, const char *path, int use_vocab, ba_dataset **out,
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

void print_eval(FILE *f, const char *label, ba_task task, const ba_eval_result *r)
{
    if (task == BA_TASK_CHARLM)
        fprintf(f, "%s: val_loss %.4f  val_ppl %.4f  (%d windows, %ld targets)\n", label,
                r->loss, r->ppl, r->n_items, r->n_targets);
    else
        fprintf(f, "%s: accuracy %.2f %%  (%ld of %ld ')' in %d held-out sequences)  loss %.4f\n",
                label, 100.0 * r->accuracy, lround(r->accuracy * r->n_targets), r->n_targets,
                r->n_items, r->loss);
}

void fmt_duration(double s, char *buf, size_t n)
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


char *train_settings_json(const train_settings *s, const char *data)
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
    cJSON_AddNumberToObject(o, "eval_every", s->eval_every);
    cJSON_AddNumberToObject(o, "eval_items", s->eval_items);
    cJSON_AddNumberToObject(o, "log_every", s->log_every);
    cJSON_AddNumberToObject(o, "save_every", s->save_every);
    cJSON_AddNumberToObject(o, "threads", threads_in_use());
    if (data)
        cJSON_AddStringToObject(o, "data", data);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return txt;
}

int train_settings_from_json(const char *json, train_settings *s, char **data, char *err)
{
    cJSON *o = cJSON_Parse(json);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        snprintf(err, BA_ERR_LEN, "the saved training settings are not a JSON object");
        return BA_ERR_FORMAT;
    }
    static const char *const keys[] = {"steps",  "batch",      "lr",        "min_lr",
                                       "warmup", "weight_decay", "beta1",   "beta2",
                                       "clip",   "j_init_std", "eval_every", "eval_items",
                                       "log_every", "save_every"};
    double v[14];
    for (int i = 0; i < 14; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble)) {
            snprintf(err, BA_ERR_LEN, "the saved training settings lack a number '%s'", keys[i]);
            cJSON_Delete(o);
            return BA_ERR_FORMAT;
        }
        v[i] = x->valuedouble;
    }
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(o, "seed");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "data");
    char *end = NULL;
    unsigned long long sd = cJSON_IsString(seed) ? strtoull(seed->valuestring, &end, 10) : 0;
    if (!cJSON_IsString(seed) || !end || *end || v[0] < 1 || v[1] < 1 || v[13] < 0 ||
        v[10] < 0 || v[11] < 1 || v[12] < 1) {
        snprintf(err, BA_ERR_LEN, "the saved training settings are out of range");
        cJSON_Delete(o);
        return BA_ERR_FORMAT;
    }
    memset(s, 0, sizeof *s);
    s->steps = (long)v[0], s->batch = (int)v[1], s->lr = v[2];
    s->min_lr_frac = v[2] > 0 ? v[3] / v[2] : 0.0;
    s->warmup = (long)v[4];
    s->opt = ba_adamw_default();
    s->opt.weight_decay = v[5], s->opt.beta1 = v[6], s->opt.beta2 = v[7], s->opt.grad_clip = v[8];
    s->j_init_std = v[9], s->eval_every = (int)v[10], s->eval_items = (int)v[11];
    s->log_every = (int)v[12], s->save_every = (int)v[13], s->seed = sd;
    if (data)
        *data = cJSON_IsString(d) ? strdup(d->valuestring) : NULL;
    cJSON_Delete(o);
    return BA_OK;
}

/* ------------------------------------------------- resumable training state
 * DIR/state.safetensors holds everything a run needs to continue exactly:
 * parameters, both AdamW moments (flat F32, in parameter order), and in the
 * metadata the config, the training settings, the step and the batch
 * stream's RNG state. One file, replaced atomically, so parameters and
 * optimiser state can never come from different steps. */

_Static_assert(sizeof(ba_real) == sizeof(float), "the tool stores ba_real as F32");

/* An RNG state as 64 hex digits, and back (0, or -1 if malformed). */
static void rng_hex(const ba_rng *r, char *buf, size_t n)
{
    snprintf(buf, n, "%016llx%016llx%016llx%016llx", (unsigned long long)r->s[0],
             (unsigned long long)r->s[1], (unsigned long long)r->s[2],
             (unsigned long long)r->s[3]);
}

static int rng_from_hex(const char *hex, ba_rng *r)
{
    if (!hex || strlen(hex) != 64)
        return -1;
    ba_rng t;
    for (int i = 0; i < 4; i++) {
        char part[17], *end;
        memcpy(part, hex + 16 * i, 16);
        part[16] = '\0';
        t.s[i] = strtoull(part, &end, 16);
        if (*end || part[0] == '-' || part[0] == '+' || part[0] == ' ')
            return -1;
    }
    *r = t;
    return 0;
}

/* train_s: the training time of the run up to this step, over all the calls
 * that trained it (a resumed run continues the count). */
static int save_state(const char *dir, ba_model *m, long step, const ba_rng *data_rng,
                      const char *train_json, double train_s, char *err)
{
    char path[4096], stepbuf[32], rngbuf[80], srngbuf[80], timebuf[40];
    snprintf(path, sizeof path, "%s/state.safetensors", dir);
    snprintf(stepbuf, sizeof stepbuf, "%ld", step);
    snprintf(timebuf, sizeof timebuf, "%.3f", train_s);
    rng_hex(data_rng, rngbuf, sizeof rngbuf);
    rng_hex(ba_model_sampler_rng(m), srngbuf, sizeof srngbuf);
    char *cfg = ba_config_to_json(ba_model_config(m));
    if (!cfg) {
        snprintf(err, BA_ERR_LEN, "out of memory");
        return BA_ERR_NOMEM;
    }
    int64_t P = (int64_t)ba_model_num_params(m);
    /* ba_model_step keeps all three finite; checked again so a non-finite
     * value can never replace the last good state. */
    const ba_real *vals3[3] = {ba_model_params(m), ba_model_adam_m(m), ba_model_adam_v(m)};
    for (int k = 0; k < 3; k++)
        for (int64_t j = 0; j < P; j++)
            if (!isfinite(vals3[k][j])) {
                free(cfg);
                snprintf(err, BA_ERR_LEN, "training state value %s[%lld] is not finite; not saving",
                         k == 0 ? "params" : k == 1 ? "adam_m" : "adam_v", (long long)j);
                return BA_ERR_NUMERIC;
            }
    ba_st_entry e[3] = {
        {"params", BA_DT_F32, 1, {P}, ba_model_params(m)},
        {"adam_m", BA_DT_F32, 1, {P}, ba_model_adam_m(m)},
        {"adam_v", BA_DT_F32, 1, {P}, ba_model_adam_v(m)},
    };
    const char *keys[] = {"config", "train", "step", "data_rng", "sampler_rng", "train_s"};
    const char *vals[] = {cfg, train_json, stepbuf, rngbuf, srngbuf, timebuf};
    int rc = ba_st_write(path, e, 3, keys, vals, 6, err);
    free(cfg);
    return rc;
}

/* Opens dir/state.safetensors and checks its parts; *st is the caller's. */
static int open_state(const char *dir, ba_st **st, char *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/state.safetensors", dir);
    int rc = ba_st_read(st, path, err);
    if (rc)
        return rc;
    if (!ba_st_metadata(*st, "config") || !ba_st_metadata(*st, "train") ||
        !ba_st_metadata(*st, "step") || !ba_st_metadata(*st, "data_rng")) {
        snprintf(err, BA_ERR_LEN, "%.200s lacks the metadata of a resumable state", path);
        ba_st_free(*st);
        *st = NULL;
        return BA_ERR_FORMAT;
    }
    return BA_OK;
}

int read_resume_info(const char *dir, ba_config *cfg, train_settings *s, char **data,
                     char *err)
{
    ba_st *st;
    int rc = open_state(dir, &st, err);
    if (rc)
        return rc;
    rc = ba_config_from_json(ba_st_metadata(st, "config"), cfg, err);
    if (rc == BA_OK)
        rc = train_settings_from_json(ba_st_metadata(st, "train"), s, data, err);
    ba_st_free(st);
    return rc;
}

/* Restores parameters, moments, step and batch stream from the state, and
 * the training time so far (*train_s; -1 in states written before it was
 * kept). */
static int load_state(const char *dir, ba_model *m, long *step, ba_rng *data_rng,
                      double *train_s, char *err)
{
    ba_st *st;
    int rc = open_state(dir, &st, err);
    if (rc)
        return rc;
    size_t P = ba_model_num_params(m);
    const char *names[] = {"params", "adam_m", "adam_v"};
    ba_real *dst[] = {ba_model_params(m), ba_model_adam_m(m), ba_model_adam_v(m)};
    for (int i = 0; i < 3 && rc == BA_OK; i++) {
        const ba_st_tensor *t = ba_st_find(st, names[i]);
        if (!t || t->dtype != BA_DT_F32 || t->ndim != 1 || (size_t)t->shape[0] != P) {
            snprintf(err, BA_ERR_LEN, "state tensor '%s' is missing or not F32 [%zu]", names[i], P);
            rc = BA_ERR_FORMAT;
            break;
        }
        memcpy(dst[i], t->data, sizeof(float) * P);
        for (size_t j = 0; j < P && rc == BA_OK; j++)
            if (!isfinite(dst[i][j])) {
                snprintf(err, BA_ERR_LEN, "state tensor '%s' value [%zu] is not finite", names[i],
                         j);
                rc = BA_ERR_FORMAT;
            }
    }
    char *end;
    const char *sv = ba_st_metadata(st, "step"), *rv = ba_st_metadata(st, "data_rng");
    const char *srv = ba_st_metadata(st, "sampler_rng");
    long stp = rc == BA_OK ? strtol(sv, &end, 10) : 0;
    if (rc == BA_OK && (*end || stp < 0 || rng_from_hex(rv, data_rng))) {
        snprintf(err, BA_ERR_LEN, "the saved step or RNG state is malformed");
        rc = BA_ERR_FORMAT;
    }
    /* The sampler stream: states written before sampled attention lack it,
     * which matters only to a sampled run (none could be saved then). */
    if (rc == BA_OK && srv && rng_from_hex(srv, ba_model_sampler_rng(m))) {
        snprintf(err, BA_ERR_LEN, "the saved sampler RNG state is malformed");
        rc = BA_ERR_FORMAT;
    }
    if (rc == BA_OK && !srv && ba_model_config(m)->sampler.kind != BA_SAMPLER_EXACT) {
        snprintf(err, BA_ERR_LEN, "the saved state of a sampled run lacks the sampler RNG");
        rc = BA_ERR_FORMAT;
    }
    const char *tv = ba_st_metadata(st, "train_s");
    double secs = -1;
    if (rc == BA_OK && tv && (secs = strtod(tv, &end), *end || !(secs >= 0) || !isfinite(secs))) {
        snprintf(err, BA_ERR_LEN, "the saved training time '%.40s' is malformed", tv);
        rc = BA_ERR_FORMAT;
    }
    if (rc == BA_OK) {
        *step = stp;
        *train_s = secs;
        ba_model_set_step_count(m, stp);
    }
    ba_st_free(st);
    return rc;
}

/* The run's training time so far: the earlier calls' plus this one's. */
static double total_s(double prior_s, double t0) { return prior_s + (now_s() - t0); }

/* A save point: the checkpoint and the resumable state of this step. The
 * metrics log is flushed first, so a resumed run finds every record up to
 * the step it continues from. */
static int save_point(const char *dir, ba_model *m, long step, const ba_rng *data_rng,
                      const char *train_json, double train_s, FILE *log, char *err)
{
    if (fflush(log) != 0 || fsync(fileno(log)) != 0) {
        snprintf(err, BA_ERR_LEN, "cannot write %.200s/metrics.jsonl: %s", dir, strerror(errno));
        return BA_ERR_IO;
    }
    int rc = save_state(dir, m, step, data_rng, train_json, train_s, err);
    return rc ? rc : save_ckpt(dir, m, step, train_json, err);
}

/* Keeps the metrics log's records up to step (and the config record), so a
 * resumed run does not repeat the steps its predecessor logged after its
 * last saved state. *logged_s receives the training time the kept records
 * show: each call's last elapsed_s, summed (a resume record starts a call;
 * every resumed run has written one). */
static int truncate_metrics(const char *path, long step, double *logged_s)
{
    *logged_s = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    double seg = 0; /* elapsed_s of the current call's latest kept record */
    char *keep = NULL, *line = NULL;
    size_t klen = 0, cap = 0;
    FILE *mem = open_memstream(&keep, &klen);
    ssize_t len;
    while (mem && (len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] != '\n')
            break; /* a record torn by the kill */
        const char *sp = strstr(line, "\"step\":");
        if (sp && strtol(sp + 7, NULL, 10) > step)
            continue;
        fputs(line, mem);
        if (strstr(line, "\"event\":\"resume\"")) { /* a new call began */
            *logged_s += seg;
            seg = 0;
        }
        const char *ep = strstr(line, "\"elapsed_s\":");
        double e = ep ? strtod(ep + 12, NULL) : -1;
        if (e >= 0 && isfinite(e))
            seg = e;
    }
    *logged_s += seg;
    free(line);
    fclose(f);
    if (!mem)
        return -1;
    fclose(mem);
    /* Replaced atomically like the other files: a kill during the rewrite
     * leaves the old log, which the next resume trims again. */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "w");
    int rc = f && fwrite(keep, 1, klen, f) == klen ? 0 : -1;
    if (f && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        rc = -1;
    if (f && fclose(f) != 0)
        rc = -1;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1;
    if (rc)
        unlink(tmp);
    free(keep);
    return rc;
}

int save_ckpt(const char *dir, const ba_model *m, long step, const char *train_json,
                     char *err)
{
    char path[4096], stepbuf[32];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(stepbuf, sizeof stepbuf, "%ld", step);
    const char *keys[] = {"step", "train"};
    const char *vals[] = {stepbuf, train_json ? train_json : "{}"};
    return ba_checkpoint_save(path, m, keys, vals, 2, err);
}

int parse_shared_opts(const command *c, model_opts *m, train_settings *s)
{
    char err[BA_ERR_LEN];
    int rc, threads = 0;
    memset(s, 0, sizeof *s);
    s->opt = ba_adamw_default();
    s->log_every = 10;
    if (ba_engine_parse(get_str(c, "engine"), &m->engine, err))
        return usage_error(c->cmd, "%s", err);
    if ((rc = get_int(c, "layers", 1, 64, &m->layers)) ||
        (rc = get_int(c, "heads", 1, 64, &m->heads)) ||
        (rc = get_long(c, "steps", 1, 1000000000L, &s->steps)) ||
        (rc = get_int(c, "batch", 1, 1 << 20, &s->batch)) ||
        (rc = get_double(c, "lr", 0, 10, &s->lr)) ||
        (rc = get_double(c, "min-lr", 0, 1, &s->min_lr_frac)) ||
        (rc = get_double(c, "weight-decay", 0, 10, &s->opt.weight_decay)) ||
        (rc = get_double(c, "clip", 0, 1e9, &s->opt.grad_clip)) ||
        (rc = get_int(c, "kinds", 1, 4, &m->kinds)) ||
        (rc = get_int(c, "heldout", 0, 1 << 24, &m->heldout)) ||
        (rc = get_u64(c, "data-seed", &m->data_seed)) ||
        (rc = get_int(c, "eval-items", 1, INT_MAX, &s->eval_items)))
        return rc;
    s->warmup = s->steps / 20;
    if (find_opt(c, "warmup")->set && (rc = get_long(c, "warmup", 0, s->steps, &s->warmup)))
        return rc;
    s->eval_every = (int)(s->steps / 10 > 0 ? s->steps / 10 : s->steps);
    if (find_opt(c, "eval-every")->set &&
        (rc = get_int(c, "eval-every", 0, INT_MAX, &s->eval_every)))
        return rc;
    s->save_every = s->eval_every > 0 ? s->eval_every : (int)(s->steps / 10 > 0 ? s->steps / 10 : s->steps);
    if (find_opt(c, "save-every")->set &&
        (rc = get_int(c, "save-every", 0, INT_MAX, &s->save_every)))
        return rc;
    if (find_opt(c, "threads")->set && (rc = get_int(c, "threads", 1, 1024, &threads)))
        return rc;
    set_threads(threads);
    return 0;
}

/* ------------------------------------------- interruption and the lock */

/* The signal that asked the running training to stop, 0 if none. */
static volatile sig_atomic_t stop_signal;

/* First SIGINT/SIGTERM: finish the step, save, exit. Second: die at once,
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
    static const char msg[] = "\nboltzattn: signal received: stopping after this step to save a checkpoint "
                              "(a second signal exits at once, without saving)\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
}

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

/* ------------------------------------------------------- training loop */

/* Sample quality along training: the sampler measured against the exact
 * distribution on the Ising systems the model meets, the last query of
 * n = min(T, 8) keys of the first evaluation items (layer 0, head 0), as a
 * "quality" record in the metrics log. n stays at 8 so the histogram of the
 * shot samplers resolves 2^n states (shot noise of the total variation at
 * most about 0.5 sqrt(2^n 2 / (pi S)), 0.035 here); the direct sampler's
 * figure on the same systems is logged as that floor. The model's sampler
 * is set to exact for the forward that yields the fields, then restored:
 * the training stream is untouched. Returns 0 or a ba_status. */
static int log_quality(ba_model *m, const ba_dataset *data, long step, FILE *log, char *err)
{
    const ba_config *cfg = ba_model_config(m);
    ba_sampler own = cfg->sampler, exact = ba_sampler_default(BA_SAMPLER_EXACT);
    int T = cfg->block_size, n = T < 8 ? T : 8, K = ba_dataset_num_eval(data);
    enum { SHOTS = 16384 };
    K = K < 4 ? K : 4;
    if (K < 1 || T > ba_engine_max_spins(cfg->engine))
        return BA_OK;
    int *in = malloc(sizeof(int) * (size_t)K * T), *tg = malloc(sizeof(int) * (size_t)K * T);
    double *J = calloc((size_t)n * n, sizeof(double)), h[8];
    int rc = BA_OK;
    if (!in || !tg || !J) {
        snprintf(err, BA_ERR_LEN, "out of memory for the sampler quality check");
        rc = BA_ERR_NOMEM;
    }
    for (int k = 0; rc == BA_OK && k < K; k++)
        ba_dataset_eval_item(data, k, in + (size_t)k * T, tg + (size_t)k * T);
    double loss;
    if (rc == BA_OK && (rc = ba_model_set_sampler(m, &exact, err)) == BA_OK) {
        rc = ba_model_forward(m, in, tg, K, T, &loss, err);
        int rc2 = ba_model_set_sampler(m, &own, err);
        rc = rc ? rc : rc2;
    }
    /* head 0's couplings of layer 0, (Tmax,Tmax) rows */
    int jt = ba_model_find_tensor(m, "blocks.0.attn.J");
    ba_tensor_info ti;
    if (rc == BA_OK && jt >= 0 && ba_model_tensor(m, jt, &ti) == BA_OK)
        for (int j = 0; j < n; j++)
            for (int k = j + 1; k < n; k++)
                J[j * n + k] = ba_model_params(m)[ti.offset + (size_t)j * T + k];
    ba_sampler_quality mean = {0, 0, 0, 0, 0}, q;
    int fitted = 0; /* instances whose temperature could be fitted */
    double floor_tv = 0.0;
    ba_rng r;
    ba_rng_seed(&r, 0x9a1171e5ULL ^ (uint64_t)step);
    ba_sampler direct = ba_sampler_default(BA_SAMPLER_DIRECT);
    for (int k = 0; rc == BA_OK && k < K; k++) {
        int hit = cfg->attn == BA_ATTN_BOLTZMANN;
        if (hit && (rc = ba_model_fields(m, 0, 0, k, n - 1, h, err)))
            break;
        if ((rc = ba_sampler_measure(&own, n, hit ? h : NULL, J, n, SHOTS, &r, &q, err)))
            break;
        mean.tv += q.tv / K, mean.kl += q.kl / K;
        if (isfinite(q.beta_eff)) { /* NAN: frozen on one energy, no fit */
            mean.beta_eff += q.beta_eff, mean.r2 += q.r2, mean.tv_eff += q.tv_eff;
            fitted++;
        }
        if (own.kind != BA_SAMPLER_DQA) {
            if ((rc = ba_sampler_measure(&direct, n, hit ? h : NULL, J, n, SHOTS, &r, &q, err)))
                break;
            floor_tv += q.tv / K;
        }
    }
    if (rc == BA_OK) {
        /* KL is infinite where the exact distribution underflows to 0 on a
         * state the sampler reaches: JSON has no infinity, so null */
        char kl[32], fit[128];
        if (isfinite(mean.kl))
            snprintf(kl, sizeof kl, "%.6f", mean.kl);
        else
            snprintf(kl, sizeof kl, "null");
        /* the fit's means over the instances that have one; null if none */
        if (fitted)
            snprintf(fit, sizeof fit, "\"beta_eff\":%.6f,\"r2\":%.6f,\"tv_eff\":%.6f",
                     mean.beta_eff / fitted, mean.r2 / fitted, mean.tv_eff / fitted);
        else
            snprintf(fit, sizeof fit, "\"beta_eff\":null,\"r2\":null,\"tv_eff\":null");
        fprintf(log,
                "{\"event\":\"quality\",\"step\":%ld,\"n\":%d,\"instances\":%d,\"tv\":%.6f,"
                "\"kl\":%s,%s,\"fitted\":%d",
                step, n, K, mean.tv, kl, fit, fitted);
        if (own.kind != BA_SAMPLER_DQA)
            fprintf(log, ",\"tv_shot_floor\":%.6f,\"shots\":%d", floor_tv, (int)SHOTS);
        fprintf(log, "}\n");
    }
    free(in), free(tg), free(J);
    return rc;
}

int run_training(const char *cmd, const ba_config *cfg, const ba_dataset *data,
                 const train_settings *s, const char *outdir, const char *data_path,
                 int verbose, train_outcome *out)
{
    char err[BA_ERR_LEN];
    dir_lock lk;
    int st = take_lock(outdir, &lk, err);
    if (st)
        return fail_lib(cmd, 0, err, st);
    st = run_training_locked(cmd, cfg, data, s, outdir, data_path, verbose, out);
    release_lock(&lk);
    return st;
}

int run_training_locked(const char *cmd, const ba_config *cfg, const ba_dataset *data,
                        const train_settings *s, const char *outdir, const char *data_path,
                        int verbose, train_outcome *out)
{
    char err[BA_ERR_LEN];
    ba_task task = cfg->task;
    int T = cfg->block_size, st;
    ba_model *m = NULL;
    if ((st = ba_model_init(&m, cfg, err)))
        return fail_lib(cmd, st, err, 1);
    ba_rng rng;
    ba_rng_seed(&rng, s->seed);
    ba_model_init_weights(m, &rng, s->j_init_std);
    /* Batches come from their own stream, so the data order for a seed is
     * the same for every variant and model size. */
    ba_rng data_rng;
    ba_rng_seed(&data_rng, s->seed ^ 0x5eedda7a5eedda7aULL);
    /* Sampled attention draws its shots from a third stream, so a sampled
     * run has the initialisation and data order of the exact one. */
    ba_rng_seed(ba_model_sampler_rng(m), s->seed ^ 0x5a3b1e5a3b1e0001ULL);

    long start_step = 0;
    double prior_s = 0; /* training time of the calls before this one */
    if (s->resume && (st = load_state(outdir, m, &start_step, &data_rng, &prior_s, err))) {
        ba_model_free(m);
        return fail_lib(cmd, st, err, input_status(st));
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", outdir);
    double logged_s;
    if (s->resume && truncate_metrics(path, start_step, &logged_s)) {
        fprintf(stderr, "%s %s: cannot rewrite %s: %s\n", prog, cmd, path, strerror(errno));
        ba_model_free(m);
        return 1;
    }
    if (s->resume && prior_s < 0)
        prior_s = logged_s; /* a state from before the count: the log's figure */
    FILE *log = fopen(path, s->resume ? "a" : "w");
    if (!log) {
        fprintf(stderr, "%s %s: cannot write %s: %s\n", prog, cmd, path, strerror(errno));
        ba_model_free(m);
        return 1;
    }
    char *cfg_json = ba_config_to_json(cfg);
    char *train_json = train_settings_json(s, task == BA_TASK_CHARLM ? data_path : NULL);
    if (s->resume)
        fprintf(log, "{\"event\":\"resume\",\"step\":%ld}\n", start_step);
    else
        fprintf(log, "{\"event\":\"config\",\"config\":%s,\"train\":%s,\"params\":%zu}\n",
                cfg_json, train_json, ba_model_num_params(m));
    fflush(log);
    /* From here on every exit goes through `done`, which restores these. */
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    /* Restart interrupted calls: the first signal must not fail a save in
     * progress (a write to a slow device or a pipe). */
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    stop_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    uint64_t ntrain, neval;
    ba_dataset_sizes(data, &ntrain, &neval);
    int quiet = verbose < 1, tty = verbose >= 2;
    int sampled = cfg->sampler.kind != BA_SAMPLER_EXACT;
    char sdesc[96];
    sampler_desc(&cfg->sampler, sdesc, sizeof sdesc);
    if (!quiet)
        fprintf(stderr,
                "train %s %s T=%d L=%d H=%d C=%d ffn=%s engine=%s%s%s: %zu parameters, %d "
                "threads, out %s\n",
                ba_task_name(task), ba_attn_name(cfg->attn), T, cfg->n_layer, cfg->n_head,
                cfg->n_embd, cfg->ffn ? "on" : "off", ba_engine_name(cfg->engine),
                sampled ? " sampler=" : "", sampled ? sdesc : "", ba_model_num_params(m),
                threads_in_use(), outdir);
    if (quiet)
        ;
    else if (task == BA_TASK_BRACKETS)
        fprintf(stderr, "brackets: %llu training prefixes, %llu held out; position-only "
                        "baseline %.2f %%\n",
                (unsigned long long)ntrain, (unsigned long long)neval,
                100.0 * ba_dataset_position_baseline(data));
    else
        fprintf(stderr, "charlm: %s, vocabulary %d, %llu train / %llu validation bytes\n",
                data_path, cfg->vocab_size, (unsigned long long)ntrain,
                (unsigned long long)neval);

    size_t bt = (size_t)s->batch * T;
    int *in = malloc(sizeof(int) * bt), *tg = malloc(sizeof(int) * bt);
    int code = 0;
    if (!in || !tg) {
        fprintf(stderr, "%s %s: out of memory for a batch of %d\n", prog, cmd, s->batch);
        code = 1;
        goto done;
    }
    double t0 = now_s(), tlast = t0, ema_loss = NAN;
    long last_step = start_step;
    long saved_step = s->resume ? start_step : -1; /* step of the checkpoint on disk */
    if (!quiet && s->resume)
        fprintf(stderr, "resuming at step %ld of %ld\n", start_step, s->steps);
    for (long step = start_step; step < s->steps; step++) {
        double lr = ba_lr_schedule(step, s->steps, s->warmup, s->lr, s->lr * s->min_lr_frac);
        double loss, gnorm;
        ba_dataset_train_batch(data, &data_rng, s->batch, in, tg);
        if ((st = ba_model_forward(m, in, tg, s->batch, T, &loss, err)) == BA_OK) {
            ba_model_zero_grad(m);
            if ((st = ba_model_backward(m, err)) == BA_OK)
                st = ba_model_step(m, &s->opt, lr, &gnorm, err);
        }
        if (st) {
            fprintf(stderr, "%s%s %s: step %ld: %s\n", tty ? "\n" : "", prog, cmd, step + 1, err);
            if (st == BA_ERR_NUMERIC && saved_step >= 0)
                fprintf(stderr, "%s %s: training stopped; %s/model.safetensors keeps the last good "
                                "checkpoint (step %ld)\n", prog, cmd, outdir, saved_step);
            else if (st == BA_ERR_NUMERIC)
                fprintf(stderr, "%s %s: training stopped before its first save; no checkpoint "
                                "was written\n", prog, cmd);
            code = 1;
            goto done;
        }
        ema_loss = isnan(ema_loss) ? loss : 0.9 * ema_loss + 0.1 * loss;
        long done_steps = step + 1;
        double t = now_s();
        double sps = (done_steps - start_step) / fmax(t - t0, 1e-9);
        if (done_steps % s->log_every == 0 || done_steps == s->steps)
            fprintf(log,
                    "{\"event\":\"train\",\"step\":%ld,\"loss\":%.6f,\"lr\":%.6g,"
                    "\"grad_norm\":%.6g,\"steps_per_s\":%.4f,\"elapsed_s\":%.3f}\n",
                    done_steps, loss, lr, gnorm, sps, t - t0);
        if (tty && (t - tlast > 0.2 || done_steps == s->steps)) {
            char eta[32];
            fmt_duration((s->steps - done_steps) / sps, eta, sizeof eta);
            fprintf(stderr, "\rstep %ld/%ld  loss %.4f  lr %.2e  %.2f steps/s  ETA %s   ",
                    done_steps, s->steps, ema_loss, lr, sps, eta);
            tlast = t;
        }
        if (s->eval_every > 0 && done_steps % s->eval_every == 0 && done_steps < s->steps) {
            ba_eval_result r;
            if ((st = ba_evaluate(m, data, s->eval_items, 64, &r, err))) {
                fprintf(stderr, "%s%s %s: evaluation at step %ld: %s\n", tty ? "\n" : "", prog,
                        cmd, done_steps, err);
                code = 1;
                goto done;
            }
            fprintf(log,
                    "{\"event\":\"eval\",\"step\":%ld,\"val_loss\":%.6f,\"val_ppl\":%.6f,"
                    "\"val_acc\":%.6f,\"items\":%d}\n",
                    done_steps, r.loss, r.ppl, r.accuracy, r.n_items);
            if (sampled && (st = log_quality(m, data, done_steps, log, err))) {
                fprintf(stderr, "%s%s %s: sampler quality at step %ld: %s\n", tty ? "\n" : "",
                        prog, cmd, done_steps, err);
                code = 1;
                goto done;
            }
            fflush(log);
            if (tty)
                fprintf(stderr, "\r\033[K");
            if (!quiet) {
                char label[64];
                snprintf(label, sizeof label, "step %ld (%d items)", done_steps, r.n_items);
                print_eval(stderr, label, task, &r);
            }
        }
        last_step = done_steps;
        if (s->save_every > 0 && done_steps % s->save_every == 0 && done_steps < s->steps) {
            if ((st = save_point(outdir, m, done_steps, &data_rng, train_json, total_s(prior_s, t0), log, err))) {
                fprintf(stderr, "%s %s: %s\n", prog, cmd, err);
                code = 1;
                goto done;
            }
            saved_step = done_steps;
        }
        if (stop_signal) {
            if (tty)
                fprintf(stderr, "\n");
            if ((st = save_point(outdir, m, done_steps, &data_rng, train_json, total_s(prior_s, t0), log, err)))
                fprintf(stderr, "%s %s: interrupted at step %ld, and the checkpoint could not "
                                "be saved: %s\n", prog, cmd, done_steps, err);
            else
                fprintf(stderr, "%s %s: interrupted by signal %d at step %ld; checkpoint saved "
                                "to %s/model.safetensors\n",
                        prog, cmd, (int)stop_signal, done_steps, outdir);
            code = 1;
            goto done;
        }
    }
    if (tty)
        fprintf(stderr, "\n");
    double train_s = now_s() - t0;
    ba_eval_result r;
    if ((st = ba_evaluate(m, data, 0, 64, &r, err))) {
        fprintf(stderr, "%s %s: final evaluation: %s\n", prog, cmd, err);
        code = 1;
        goto done;
    }
    /* A sampled model is also evaluated with exact inference where the
     * engine reaches, so the sampler's inference noise and the quality of
     * the trained weights can be told apart. */
    ba_eval_result rx;
    int has_exact = 0;
    char exact_json[160] = "";
    if (sampled && T <= ba_engine_max_spins(cfg->engine)) {
        ba_sampler exact = ba_sampler_default(BA_SAMPLER_EXACT), own = cfg->sampler;
        if ((st = ba_model_set_sampler(m, &exact, err)) == BA_OK) {
            st = ba_evaluate(m, data, 0, 64, &rx, err);
            int st2 = ba_model_set_sampler(m, &own, err);
            st = st ? st : st2;
        }
        if (st) {
            fprintf(stderr, "%s %s: final evaluation with exact inference: %s\n", prog, cmd, err);
            code = 1;
            goto done;
        }
        has_exact = 1;
        snprintf(exact_json, sizeof exact_json,
                 ",\"exact_val_loss\":%.6f,\"exact_val_ppl\":%.6f,\"exact_val_acc\":%.6f", rx.loss,
                 rx.ppl, rx.accuracy);
    }
    if (sampled && (st = log_quality(m, data, last_step, log, err))) {
        fprintf(stderr, "%s %s: sampler quality: %s\n", prog, cmd, err);
        code = 1;
        goto done;
    }
    fprintf(log,
            "{\"event\":\"final\",\"step\":%ld,\"val_loss\":%.6f,\"val_ppl\":%.6f,"
            "\"val_acc\":%.6f,\"items\":%d,\"targets\":%ld,\"train_s\":%.3f,"
            "\"steps_per_s\":%.4f,\"train_s_total\":%.3f%s}\n",
            last_step, r.loss, r.ppl, r.accuracy, r.n_items, r.n_targets, train_s,
            (last_step - start_step) / fmax(train_s, 1e-9), prior_s + train_s, exact_json);
    if (!quiet && sampled) {
        char label[128];
        snprintf(label, sizeof label, "final (%s)", sdesc);
        print_eval(stderr, label, task, &r);
        if (has_exact)
            print_eval(stderr, "final (exact inference)", task, &rx);
        else
            fprintf(stderr, "final (exact inference): skipped, T = %d is beyond the %s engine's "
                            "limit of %d\n",
                    T, ba_engine_name(cfg->engine), ba_engine_max_spins(cfg->engine));
    }
    if ((st = save_point(outdir, m, last_step, &data_rng, train_json, total_s(prior_s, t0), log, err))) {
        fprintf(stderr, "%s %s: %s\n", prog, cmd, err);
        code = 1;
        goto done;
    }
    if (out) {
        out->final = r;
        out->has_exact = has_exact;
        if (has_exact)
            out->exact = rx;
        out->train_s = train_s;
        out->train_s_total = prior_s + train_s;
        out->steps = last_step;
        out->steps_run = last_step - start_step;
    }
done:
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    fclose(log);
    free(in), free(tg);
    free(cfg_json);
    free(train_json);
    ba_model_free(m);
    return code;
}
