/* The approx subcommand: how close the approximate engines (mf, tap, bp,
 * hybrid; spec section 8, "Mean-field family") come to the exact spin
 * marginals, on random instances with the spec probe's coupling pattern or
 * on the instances a trained checkpoint meets.
 *
 * Each instance is one query of n keys. The oracle is the fast exact
 * engine (ba_ising_marginals); each approximate engine runs through the
 * library's batched entry point (ba_approx_forward) on a (1, n, n) block
 * whose last row is the instance, so it meets the instance exactly as the
 * attention layer would. Its counts (sweeps, retries, unconverged rows)
 * cover the whole block; the last row's own are the difference between
 * that call and one on the block without its last row (the rows are
 * solved independently, so the difference is exact; an instance where it
 * is not consistent keeps the block's counts and is counted in
 * stats_rows). Per cell: the mean and 95th percentile over instances of
 * the worst |delta w_j| (w_j = P(s_j = +1)) and of KL(exact || approx)
 * between the normalised attention rows, the worst |delta a_j|, the
 * convergence rates and the sweeps.
 *
 * Output: DIR/accuracy.json ("cells": random instances, "checkpoints":
 * checkpoint instances; a run replaces its own part and keeps the other);
 * a line per cell on stdout. --doc DOC --from DIR writes the Markdown
 * document from that file and the grids beside it (lab/approx_doc.c,
 * lab/approx_train_doc.c); the checkpoint instances are lab/approx_ckpt.c's,
 * the measurements lab/approx_measure.c's. */
#include "approx.h"
/* ba_field_bias_value: the library's internal field shift, which the
 * random instances' --bias applies (the one layer header the lab uses,
 * src/model/model.h: the study measures the model's internal entry points) */
#include "model/model.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static opt approx_opts[] = {
    {"out", "DIR", NULL, "output directory: DIR/accuracy.json (required unless --doc)", 0, 0},
    {"n", "LIST", "8,12,16,20",
     "spins (keys) per instance, 2..20 (the exact oracle enumerates 2^n states); with --ckpt "
     "the queries i = n-1 taken from each item, n at most T (default: T)", 0, 0},
    {"a", "LIST", "0.1,0.25,0.5,1",
     "coupling scales a: J(1) = a/2, J(2..4) = a, J(5) = 0, J(>=6) = -a/2, each plus "
     "U[-a/4, a/4] noise", 0, 0},
    {"bias", "LIST", "none,log-n",
     "field shifts of the random instances: none, log-n (h - (1/2) log n, the models' field "
     "bias), twice-log-n (h - log n, the spec probe's shift)", 0, 0},
    {"engines", "LIST", "mf,tap,bp,hybrid",
     "engines compared with the exact marginals: mf, tap, bp, hybrid, and band (exact "
     "inference with the couplings beyond --window dropped: the band alone)", 0, 0},
    {"window", "W", "8",
     "exact window of hybrid (and band), 1..16 (with --ckpt default: the model's window if "
     "it has one)", 0, 0},
    {"instances", "K", "100", "random instances per (n, a); with --ckpt evaluation items", 0,
     0},
    {"seed", "N", "1", "seed of the random instances", 0, 0},
    {"damping", "X", "0.5", "damping of the approximate engines' iteration, in (0, 1]", 0, 0},
    {"tol", "X", "1e-8", "tolerance on max |F(x) - x|, > 0", 0, 0},
    {"max-iter", "N", "1000", "sweeps per query before the retry, >= 1", 0, 0},
    {"ckpt", "FILE", NULL,
     "boltzmann or coupling checkpoint: instances are its evaluation forward's fields (every "
     "layer and head, queries i = n-1) with its couplings", 0, 0},
    {"data", "PATH", "the training file, else $BA_DATA or data/tinyshakespeare.txt",
     "with a charlm --ckpt: the text whose validation windows give the fields", 0, 0},
    {"label", "NAME", "the checkpoint's directory (or file) name",
     "with --ckpt: the checkpoint's label in the records", 0, 0},
    {"doc", "DOC", NULL, "write the Markdown document DOC from --from DIR (no computing)", 0,
     0},
    {"from", "DIR", NULL,
     "with --doc: the directory holding accuracy.json (and the grids trained with the "
     "engines, `make reproduce PRESET=approx`)", 0, 0},
    {"exact-from", "DIR", "results/full",
     "with --doc: the grids whose exact-trained runs pair with DIR's grids by seed where DIR "
     "has no exact grid at that T", 0, 0},
    {"threads", "N", "idle cores", "OpenMP threads (at most the CPUs)", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command approx_cmd = {
    "approx",
    "--out DIR [options]\n"
    "       boltzattn approx --doc DOC --from DIR\n\n"
    "Measures the approximate Ising engines (mf, tap, bp, hybrid) against the exact\n"
    "marginals: random instances (h_j ~ N(0, 1), the spec probe's couplings at each scale\n"
    "a, each field shift), or with --ckpt the fields and couplings a trained model meets.\n"
    "Per cell: mean and 95th percentile over instances of the worst |delta w_j| and of\n"
    "KL(exact || approx) of the attention row, the worst |delta a_j|, the convergence\n"
    "rates and sweeps. Writes DIR/accuracy.json (a random run replaces its \"cells\", a\n"
    "checkpoint run its own \"checkpoints\" records; the rest is kept). --doc DOC --from\n"
    "DIR writes the Markdown document from DIR/accuracy.json and, where DIR holds them,\n"
    "the grids trained with each engine (paired by seed with exact-trained runs of DIR or\n"
    "--exact-from) and their engines.json. Exit status: 0 ok, 1 runtime failure, 2 bad\n"
    "usage or input.",
    approx_opts};

static const char *const bias_names[NBIAS] = {"none", "log-n", "twice-log-n"};

/* The fields' shift of a query with n keys. */
static double bias_shift(int b, int n)
{
    double s = ba_field_bias_value(BA_FIELD_BIAS_LOG_N, n);
    return b == BIAS_LOGN ? s : b == BIAS_2LOGN ? 2.0 * s : 0.0;
}

/* Instance k of size n: h_j ~ N(0, 1) (j < n), then the couplings' noise
 * u_jk ~ U[-1, 1) (j < k, row order), from a stream seeded by (seed, n,
 * k) alone, so a cell's numbers do not depend on the other cells of the
 * run; every a scales the same draws, every bias shifts the same fields. */
static void draw_instance(uint64_t seed, int n, int k, double *z, double *u)
{
    ba_rng r;
    uint64_t x = seed * 0x9E3779B97F4A7C15ULL + (uint64_t)n;
    ba_rng_seed(&r, x * 0x9E3779B97F4A7C15ULL + (uint64_t)k);
    for (int j = 0; j < n; j++)
        z[j] = ba_rng_normal(&r);
    for (int j = 0; j < n; j++)
        for (int l = j + 1; l < n; l++)
            u[j * n + l] = 2.0 * ba_rng_uniform(&r) - 1.0;
}

/* The probe's coupling pattern at distance d, in units of a. */
static double pattern(int d) { return d == 1 ? 0.5 : d <= 4 ? 1.0 : d == 5 ? 0.0 : -0.5; }

/* Every (n, a, bias) cell: K instances, the exact marginals once, each
 * engine against them; a record per engine into cells. */
static int run_random(const command *c, const ax_study *s, cJSON *cells)
{
    char err[BA_ERR_LEN];
    int K = s->K, code = 0;
    ax_inst *res = malloc(sizeof(ax_inst) * (size_t)s->ne * K);
    double *tmp = malloc(sizeof(double) * (size_t)K);
    double z[AX_MAX_N], u[AX_MAX_N * AX_MAX_N], h[AX_MAX_N], J[AX_MAX_N * AX_MAX_N];
    ax_work w;
    if (!ax_work_init(&w, AX_MAX_N) || !res || !tmp)
        code = fail_lib(c, "out of memory", 1);
    ax_print_cell_head();
    for (int ni = 0; ni < s->nn && !code; ni++)
        for (int ai = 0; ai < s->na && !code; ai++)
            for (int bi = 0; bi < s->nb && !code; bi++) {
                int n = s->n[ni], b = s->bias[bi];
                double a = s->a[ai];
                for (int k = 0; k < K && !code; k++) {
                    draw_instance(s->seed, n, k, z, u);
                    memset(J, 0, sizeof(double) * (size_t)n * n);
                    for (int j = 0; j < n; j++) {
                        h[j] = z[j] - bias_shift(b, n);
                        for (int l = j + 1; l < n; l++)
                            J[j * n + l] = a * (pattern(l - j) + 0.25 * u[j * n + l]);
                    }
                    int st = ba_ising_marginals(BA_ENGINE_FAST, n, h, J, n, w.le, err);
                    for (int e = 0; e < s->ne && !st; e++)
                        st = ax_measure(s, s->eng[e], n, h, J, &w, &res[(size_t)e * K + k], err);
                    if (st)
                        code = fail_lib(c, err, 1);
                }
                for (int e = 0; e < s->ne && !code; e++) {
                    ax_cell_sum cs;
                    ax_summarize(&res[(size_t)e * K], K, 1, tmp, &cs);
                    char as[32];
                    snprintf(as, sizeof as, "%g", a);
                    ax_print_cell(s->eng[e], n, as, bias_names[b], &cs);
                    cJSON *o = cJSON_CreateObject();
                    if (!o || !cJSON_AddItemToArray(cells, o) ||
                        !cJSON_AddStringToObject(o, "engine", ba_engine_name(s->eng[e])) ||
                        !cJSON_AddNumberToObject(o, "n", n) ||
                        !cJSON_AddNumberToObject(o, "a", a) ||
                        !cJSON_AddStringToObject(o, "bias", bias_names[b]) ||
                        !ax_add_metrics(o, &cs))
                        code = fail_lib(c, "out of memory", 1);
                }
                fflush(stdout);
            }
    ax_work_free(&w);
    free(res), free(tmp);
    return code;
}

/* ------------------------------------------------------------ options */

/* A comma-separated list of names: each through parse (0 on success),
 * no repeats. 0 or an exit code. */
static int name_list(const command *c, const char *opt_name, int max, int *out, int *n,
                     int (*parse)(const command *, const char *, int *))
{
    const char *v = get_str(c, opt_name);
    char buf[256], *save = NULL;
    *n = 0;
    if (!v || !*v || strlen(v) >= sizeof buf || v[strlen(v) - 1] == ',')
        return usage_error(c, "--%s: '%s' is not a comma-separated list of names", opt_name,
                           v ? v : "");
    if (strstr(v, ",,") || v[0] == ',')
        return usage_error(c, "--%s: '%s' has an empty item", opt_name, v);
    strcpy(buf, v);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int x = 0, rc;
        if ((rc = parse(c, t, &x)))
            return rc;
        for (int i = 0; i < *n; i++)
            if (out[i] == x)
                return usage_error(c, "--%s: '%s' is listed twice", opt_name, t);
        if (*n == max)
            return usage_error(c, "--%s: more than %d names", opt_name, max);
        out[(*n)++] = x;
    }
    return 0;
}

static int parse_engine(const command *c, const char *t, int *out)
{
    ba_engine e;
    if (ba_engine_parse(t, &e, NULL) || !(ba_engine_is_approx(e) || e == BA_ENGINE_BAND))
        return usage_error(c, "--engines: unknown engine '%s' (mf, tap, bp, hybrid or band; "
                              "the exact engines are the oracle)", t);
    *out = (int)e;
    return 0;
}

static int parse_bias(const command *c, const char *t, int *out)
{
    for (int b = 0; b < NBIAS; b++)
        if (strcmp(t, bias_names[b]) == 0)
            return *out = b, 0;
    return usage_error(c, "--bias: unknown bias '%s' (none, log-n or twice-log-n)", t);
}

/* The study's settings from the options. 0 or an exit code. */
static int parse_study(const command *c, int ckpt, ax_study *s)
{
    int rc, eng[8];
    memset(s, 0, sizeof *s);
    if ((rc = get_int(c, "instances", 1, 100000, &s->K)) ||
        (rc = get_int(c, "window", 1, BA_MAX_BAND, &s->window)) ||
        (rc = get_double(c, "damping", -1e300, 1e300, &s->ap.damping)) ||
        (rc = get_double(c, "tol", -1e300, 1e300, &s->ap.tol)) ||
        (rc = get_int(c, "max-iter", 1, BA_APPROX_MAX_ITER, &s->ap.max_iter)) ||
        (rc = name_list(c, "engines", 8, eng, &s->ne, parse_engine)))
        return rc;
    if (!(s->ap.damping > 0 && s->ap.damping <= 1))
        return usage_error(c, "--damping: %g is outside (0, 1]", s->ap.damping);
    if (!(s->ap.tol > 0))
        return usage_error(c, "--tol: %g is not above 0", s->ap.tol);
    for (int e = 0; e < s->ne; e++)
        s->eng[e] = (ba_engine)eng[e];
    if (is_set(c, "n") || !ckpt) {
        double nv[AX_MAX_LIST];
        if ((rc = get_list(c, "n", 2, AX_MAX_N, 1, nv, AX_MAX_LIST, &s->nn)))
            return rc;
        for (int i = 0; i < s->nn; i++)
            s->n[i] = (int)nv[i];
    }
    if (ckpt)
        return 0;
    if ((rc = get_u64(c, "seed", &s->seed)) ||
        (rc = get_list(c, "a", 0, 100, 0, s->a, AX_MAX_LIST, &s->na)) ||
        (rc = name_list(c, "bias", NBIAS, s->bias, &s->nb, parse_bias)))
        return rc;
    return 0;
}

/* ------------------------------------------------------------- output */

/* The command line as run, for the records. */
static void command_line(int argc, char **argv, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "%s approx", prog);
    for (int i = 0; i < argc && o < len; i++) {
        int plain = argv[i][0] && strspn(argv[i], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
                                                  "QRSTUVWXYZ0123456789-_.,/=+:") ==
                                      strlen(argv[i]);
        o += (size_t)snprintf(buf + o, len - o, plain ? " %s" : " '%s'", argv[i]);
    }
}

/* The record already in path, or a new one: NULL after printing when the
 * file exists but is not an approx record (it is not replaced). */
static cJSON *existing_record(const command *c, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "format", "boltzattn-approx") ||
            !cJSON_AddNumberToObject(o, "version", 1) || !cJSON_AddArrayToObject(o, "cells") ||
            !cJSON_AddArrayToObject(o, "checkpoints")) {
            cJSON_Delete(o);
            fail_lib(c, "out of memory", 1);
            return NULL;
        }
        return o;
    }
    char *txt = lab_slurp(path);
    cJSON *o = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "format");
    if (!cJSON_IsString(f) || strcmp(f->valuestring, "boltzattn-approx") != 0 ||
        !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "cells")) ||
        !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "checkpoints"))) {
        cJSON_Delete(o);
        usage_error(c, "%s exists and is not an approx record; not replacing it", path);
        return NULL;
    }
    return o;
}

static int write_record(const command *c, const char *path, cJSON *o)
{
    char err[BA_ERR_LEN], *txt = cJSON_Print(o);
    size_t n = txt ? strlen(txt) : 0;
    char *line = txt ? malloc(n + 2) : NULL;
    int rc = 1;
    if (!line)
        fail_lib(c, "out of memory", 1);
    else {
        memcpy(line, txt, n), memcpy(line + n, "\n", 2);
        rc = ba_write_file(path, line, n + 1, err) ? fail_lib(c, err, 1) : 0;
    }
    free(line);
    cJSON_free(txt);
    return rc;
}

/* The settings object of a run. */
static cJSON *settings_object(const ax_study *s, int ckpt, const char *cmdline)
{
    cJSON *o = cJSON_CreateObject(), *a;
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->seed);
    int ok = o && cJSON_AddStringToObject(o, "command", cmdline) &&
             cJSON_AddStringToObject(o, "oracle", "fast") &&
             cJSON_AddNumberToObject(o, "window", s->window) &&
             cJSON_AddNumberToObject(o, "damping", s->ap.damping) &&
             cJSON_AddNumberToObject(o, "tol", s->ap.tol) &&
             cJSON_AddNumberToObject(o, "max_iter", s->ap.max_iter) &&
             cJSON_AddNumberToObject(o, "instances", s->K) &&
             cJSON_AddStringToObject(o, "p95", "linear interpolation at 0.95 (K - 1) of the "
                                               "sorted values");
    ok = ok && (a = cJSON_AddArrayToObject(o, "engines"));
    for (int e = 0; ok && e < s->ne; e++)
        ok = cJSON_AddItemToArray(a, cJSON_CreateString(ba_engine_name(s->eng[e])));
    ok = ok && (a = cJSON_AddArrayToObject(o, "n"));
    for (int i = 0; ok && i < s->nn; i++)
        ok = cJSON_AddItemToArray(a, cJSON_CreateNumber(s->n[i]));
    if (!ckpt) {
        ok = ok && cJSON_AddStringToObject(o, "seed", seed) &&
             (a = cJSON_AddArrayToObject(o, "a"));
        for (int i = 0; ok && i < s->na; i++)
            ok = cJSON_AddItemToArray(a, cJSON_CreateNumber(s->a[i]));
        ok = ok && (a = cJSON_AddArrayToObject(o, "bias"));
        for (int i = 0; ok && i < s->nb; i++)
            ok = cJSON_AddItemToArray(a, cJSON_CreateString(bias_names[s->bias[i]]));
    }
    if (!ok)
        cJSON_Delete(o);
    return ok ? o : NULL;
}

/* A random run's cells and settings into the file's record, replacing its
 * "cells" and "settings" (a checkpoint's records: ax_ckpt_merge). Takes
 * *fresh and *set (NULL after). 0 or an exit code. */
static int merge_cells(const command *c, cJSON *rec, cJSON **fresh, cJSON **set)
{
    int ok = cJSON_ReplaceItemInObjectCaseSensitive(rec, "cells", *fresh);
    if (ok)
        *fresh = NULL;
    ok = ok && (cJSON_GetObjectItemCaseSensitive(rec, "settings")
                    ? cJSON_ReplaceItemInObjectCaseSensitive(rec, "settings", *set)
                    : cJSON_AddItemToObject(rec, "settings", *set));
    if (ok)
        *set = NULL;
    return ok ? 0 : fail_lib(c, "out of memory", 1);
}

/* ---------------------------------------------------------------- main */

static int compute(const command *c, int argc, char **argv)
{
    static const char *const doc_only[] = {"from", "exact-from"};
    static const char *const random_only[] = {"a", "bias", "seed"};
    static const char *const ckpt_only[] = {"data", "label"};
    const char *ckpt = get_str(c, "ckpt"), *out = get_str(c, "out");
    int rc;
    for (int i = 0; i < 2; i++)
        if (is_set(c, doc_only[i]))
            return usage_error(c, "--%s needs --doc", doc_only[i]);
    for (int i = 0; i < 3; i++)
        if (ckpt && is_set(c, random_only[i]))
            return usage_error(c, "--%s does not apply with --ckpt (the model's fields and "
                                  "couplings are the instances)", random_only[i]);
    for (int i = 0; i < 2; i++)
        if (!ckpt && is_set(c, ckpt_only[i]))
            return usage_error(c, "--%s needs --ckpt", ckpt_only[i]);
    if (!out)
        return usage_error(c, "option '--out' is required");
    if (!*out)
        return usage_error(c, "--out must not be empty");
    struct stat st;
    if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode))
        return usage_error(c, "--out %s: exists and is not a directory", out);
    ax_study s;
    ax_ckpt *k = NULL;
    if ((rc = parse_study(c, ckpt != NULL, &s)) || (rc = apply_threads(c)))
        return rc;
    char path[PATH_LEN], err[BA_ERR_LEN], cmdline[4096];
    if (mkpath(c, path, "%s/accuracy.json", out))
        return 1;
    if ((rc = check_out_file(c, "--out", path, NULL, 0)))
        return rc;
    command_line(argc, argv, cmdline, sizeof cmdline);
    if (ckpt && (rc = ax_ckpt_open(c, ckpt, &s, &k)))
        return rc;
    cJSON *rec = existing_record(c, path);
    if (!rec || make_dirs(out, err)) {
        ax_ckpt_free(k);
        cJSON_Delete(rec);
        return rec ? fail_lib(c, err, 1) : 2;
    }
    cJSON *fresh = cJSON_CreateArray(), *set = settings_object(&s, ckpt != NULL, cmdline);
    char label[256];
    if (ckpt)
        ax_ckpt_label(ckpt, label, sizeof label);
    if (is_set(c, "label"))
        snprintf(label, sizeof label, "%s", get_str(c, "label"));
    int code = !fresh || !set ? fail_lib(c, "out of memory", 1) : 0;
    double check = NAN, t0 = now_s();
    if (!code && ckpt) {
        code = ax_ckpt_run(c, &s, k, ckpt, label, fresh, &check);
    } else if (!code) {
        printf("approx: %d random instance%s per (n, a), seed %llu; window %d, damping %g, "
               "tol %g, max-iter %d\n", s.K, s.K == 1 ? "" : "s", (unsigned long long)s.seed,
               s.window, s.ap.damping, s.ap.tol, s.ap.max_iter);
        code = run_random(c, &s, fresh);
    }
    if (!code)
        code = ckpt ? ax_ckpt_merge(c, rec, &fresh, set, ckpt, label)
                    : merge_cells(c, rec, &fresh, &set);
    if (!code)
        code = write_record(c, path, rec);
    if (!code && !isnan(check))
        printf("fields check: the instances' exact weights match the model's attention to "
               "within %.1e\n", check);
    if (!code)
        printf("wrote %s (%.1f s)\n", path, now_s() - t0);
    cJSON_Delete(rec), cJSON_Delete(fresh), cJSON_Delete(set);
    ax_ckpt_free(k);
    return code;
}

int cmd_approx(int argc, char **argv)
{
    const command *c = &approx_cmd;
    int rc = parse_args(c, argc, argv, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!is_set(c, "doc"))
        return compute(c, argc, argv);
    static const char *const compute_opts[] = {"out", "n", "a", "bias", "engines", "window",
                                               "instances", "seed", "damping", "tol",
                                               "max-iter", "ckpt", "data", "label", "threads"};
    for (size_t i = 0; i < sizeof compute_opts / sizeof compute_opts[0]; i++)
        if (is_set(c, compute_opts[i]))
            return usage_error(c, "--%s does not apply with --doc (it only reads --from)",
                               compute_opts[i]);
    const char *doc = get_str(c, "doc"), *from = get_str(c, "from");
    if (!from)
        return usage_error(c, "--doc needs --from DIR (the directory of accuracy.json)");
    if (!*doc)
        return usage_error(c, "--doc must not be empty");
    return approx_write_doc(c, doc, from,
                            is_set(c, "exact-from") ? get_str(c, "exact-from") : NULL);
}
