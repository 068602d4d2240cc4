/* The dqa subcommand: calibration of the simulated diabatic quantum
 * annealer (spec section 7) against the exact Boltzmann distribution.
 *
 * For every instance (random fields and couplings, or the learned couplings
 * of a checkpoint with fields computed from its evaluation data) and every
 * setting of the sweep (tau x M x lambda, one gamma and Trotter order), the
 * DQA output distribution P_dqa = |psi|^2 of a full state-vector simulation
 * is compared with the beta = 1 target P: total variation, KL(P_dqa || P),
 * the effective inverse temperature beta_eff of P_dqa (weighted
 * least-squares fit of log P_dqa against -E, with its r^2), and the total
 * variation between P_dqa and the Boltzmann distribution at beta_eff (how
 * Boltzmann-like the output is, whatever its temperature).
 *
 * Outputs: a table on stdout; DIR/dqa.csv (one row per instance x setting,
 * then a "mean" and an "sd" row per setting); DIR/dqa.dat and DIR/dqa.gp,
 * and DIR/dqa.png drawn by gnuplot when it is on PATH. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LIST 32

static opt dqa_opts[] = {
    {"n", "N", "8; T with --ckpt",
     "spins (qubits) per instance, 1..24 (with --ckpt at most T: the query at position N-1)", 0,
     0},
    {"instances", "K", "5",
     "instances: random draws, or the first K evaluation items with --ckpt", 0, 0},
    {"seed", "N", "1", "seed of the random instances", 0, 0},
    {"h-std", "X", "1", "standard deviation of the random fields h_j", 0, 0},
    {"j-std", "X", "0.3", "standard deviation of the random couplings J_jk (j < k)", 0, 0},
    {"ckpt", "FILE", NULL,
     "boltzmann or coupling checkpoint: the learned J of --layer/--head; fields h of layer 0 "
     "computed from the first K evaluation items (for --layer > 0: random N(0, h-std) fields "
     "with the learned J)", 0, 0},
    {"layer", "L", "0", "with --ckpt: layer of the couplings", 0, 0},
    {"head", "H", "0", "with --ckpt: head of the couplings and fields", 0, 0},
    {"data", "PATH", "the training file, else $BA_DATA or data/tinyshakespeare.txt",
     "with a charlm --ckpt: the text whose validation windows give the fields", 0, 0},
    {"tau", "LIST", "0.25,0.5,1,2,4", "anneal times tau (comma-separated)", 0, 0},
    {"steps", "LIST", "200", "Trotter steps M", 0, 0},
    {"lambda", "LIST", "1", "problem-Hamiltonian scales lambda", 0, 0},
    {"gamma", "X", "1", "driver strength Gamma", 0, 0},
    {"order", "1|2", "2", "Trotter order", 0, 0},
    {"ref-steps", "M", "0 (off)",
     "also the TV between each output and the same anneal with M Trotter steps (the Trotter "
     "error of --steps, when M is much larger)", 0, 0},
    {"out", "DIR", "runs/dqa", "output directory", 0, 0},
    {"threads", "N", "all cores", "OpenMP threads", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command dqa_cmd = {
    "dqa",
    "[options]\n\n"
    "Simulates diabatic quantum annealing, H(t) = (1 - t/tau) H_X + (t/tau) lambda E,\n"
    "H_X = -gamma sum_j X_j, from |+>^n (M Trotter steps), on small Ising instances and\n"
    "compares the output distribution with the exact beta = 1 Boltzmann distribution:\n"
    "total variation (TV), KL(dqa || exact), the fitted beta_eff (and r2) and the TV\n"
    "between the output and the Boltzmann distribution at beta_eff. Writes DIR/dqa.csv\n"
    "(columns instance,n,order,gamma,lambda,steps,tau,tv,kl,beta_eff,r2,tv_beta_eff,\n"
    "tv_trotter; a row per instance and setting, then mean and sd rows; tv_trotter is\n"
    "nan without --ref-steps), DIR/dqa.dat, DIR/dqa.gp and, when gnuplot is on PATH,\n"
    "DIR/dqa.png (TV and beta_eff against tau, one curve per M and lambda, error bars:\n"
    "sd over instances). Exit status: 0 ok, 1 runtime failure, 2 bad usage or input.",
    dqa_opts};

/* Comma-separated numbers in [lo, hi] (integers when integral is set). */
static int get_list(const command *c, const char *name, double lo, double hi, int integral,
                    double *out, int *n)
{
    const char *v = get_str(c, name);
    char buf[1024];
    if (!v || strlen(v) >= sizeof buf)
        return usage_error(c->cmd, "--%s: list missing or too long", name);
    strcpy(buf, v);
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        double x = strtod(tok, &end);
        if (errno == ERANGE || end == tok || *end || !isfinite(x) ||
            (integral && x != floor(x)))
            return usage_error(c->cmd, "--%s: '%s' is not %s", name, tok,
                               integral ? "an integer" : "a finite number");
        if (x < lo || x > hi)
            return usage_error(c->cmd, "--%s: %g is out of range [%g, %g]", name, x, lo, hi);
        if (*n >= MAX_LIST)
            return usage_error(c->cmd, "--%s: more than %d values", name, MAX_LIST);
        out[(*n)++] = x;
    }
    if (*n == 0)
        return usage_error(c->cmd, "--%s: empty list", name);
    return 0;
}

/* One tensor of a loaded model by name, checked against an expected size. */
static const ba_real *tensor(const ba_model *m, const char *name, size_t size)
{
    int idx = ba_model_find_tensor(m, name);
    ba_tensor_info ti;
    if (idx < 0 || ba_model_tensor(m, idx, &ti) || ti.size != size)
        return NULL;
    return ba_model_params((ba_model *)m) + ti.offset;
}

/* Layer 0's tensors that make the attention fields. */
typedef struct {
    int C, d;
    const ba_real *tok, *pos, *lw, *lb, *W, *b;
} l0_tensors;

static int l0_init(const ba_model *m, l0_tensors *t)
{
    const ba_config *cfg = ba_model_config(m);
    int C = cfg->n_embd;
    t->C = C, t->d = C / cfg->n_head;
    t->tok = tensor(m, "tok_emb", (size_t)cfg->vocab_size * C);
    t->pos = tensor(m, "pos_emb", (size_t)cfg->block_size * C);
    t->lw = tensor(m, "blocks.0.ln1.weight", C);
    t->lb = tensor(m, "blocks.0.ln1.bias", C);
    t->W = tensor(m, "blocks.0.attn.qkv.weight", (size_t)3 * C * C);
    t->b = tensor(m, "blocks.0.attn.qkv.bias", (size_t)3 * C);
    return !t->tok || !t->pos || !t->lw || !t->lb || !t->W || !t->b;
}

/* Rows [row0, row0 + d) of the qkv projection of position p holding token
 * tk: token plus position embedding, LayerNorm (eps 1e-5), W x + b. x is C
 * doubles of workspace, out d. */
static void l0_project(const l0_tensors *t, int tk, int p, int row0, double *x, double *out)
{
    int C = t->C;
    double mean = 0.0, var = 0.0;
    for (int k = 0; k < C; k++)
        mean += (x[k] = (double)t->tok[(size_t)tk * C + k] + t->pos[(size_t)p * C + k]);
    mean /= C;
    for (int k = 0; k < C; k++)
        var += (x[k] - mean) * (x[k] - mean);
    double rs = 1.0 / sqrt(var / C + 1e-5);
    for (int k = 0; k < C; k++)
        x[k] = (x[k] - mean) * rs * t->lw[k] + t->lb[k];
    for (int r = 0; r < t->d; r++) {
        const ba_real *w = t->W + (size_t)(row0 + r) * C;
        double a = t->b[row0 + r];
        for (int k = 0; k < C; k++)
            a += w[k] * x[k];
        out[r] = a;
    }
}

/* The fields h_j = q_{n-1} . k_j / sqrt(d), j < n, of head hd in layer 0
 * for the input tokens `in` (q: rows [hd d, (hd+1) d) of the projection,
 * k: rows C + the same). 0, or 1 when out of memory. */
static int layer0_fields(const l0_tensors *t, const int *in, int n, int hd, double *h)
{
    int C = t->C, d = t->d;
    double *x = malloc(sizeof(double) * C), *q = malloc(sizeof(double) * d),
           *k = malloc(sizeof(double) * d);
    if (!x || !q || !k) {
        free(x), free(q), free(k);
        return 1;
    }
    l0_project(t, in[n - 1], n - 1, hd * d, x, q);
    for (int j = 0; j < n; j++) {
        l0_project(t, in[j], j, C + hd * d, x, k);
        double dot = 0.0;
        for (int r = 0; r < d; r++)
            dot += q[r] * k[r];
        h[j] = dot / sqrt((double)d);
    }
    free(x), free(q), free(k);
    return 0;
}

/* Largest |a_j - model attention a_j| of query n-1 when the weights come
 * from the fields h and couplings J (n spins, ld n) through the exact
 * engine: the check that h and J are the model's. */
static int check_fields(ba_model *m, const int *in, int n, int hd, const double *h,
                        const double *J, double *maxdiff, char *err)
{
    const ba_config *cfg = ba_model_config(m);
    int T = cfg->block_size;
    int st = ba_model_forward(m, in, NULL, 1, T, NULL, err);
    if (st)
        return st;
    const ba_real *att = ba_model_attention(m, 0) + ((size_t)hd * T + (n - 1)) * T;
    double logw[BA_DQA_MAX_SPINS], z = 0.0;
    st = ba_ising_marginals(BA_ENGINE_FAST, n, h, J, n, logw, err);
    if (st)
        return st;
    for (int j = 0; j < n; j++)
        z += exp(logw[j]);
    *maxdiff = 0.0;
    for (int j = 0; j < n; j++)
        *maxdiff = fmax(*maxdiff, fabs(exp(logw[j]) / z - (double)att[j]));
    return BA_OK;
}

/* The measures of one instance and setting, in CSV order: TV(dqa, exact),
 * KL(dqa || exact), beta_eff, r2, TV(dqa, Boltzmann(beta_eff)), TV(dqa,
 * dqa with --ref-steps) (NAN without --ref-steps). */
enum { M_TV, M_KL, M_BETA, M_R2, M_TVB, M_TVT, NMEAS };
typedef struct {
    double v[NMEAS];
} result;

/* Curve colours of the plot. */
static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#17becf", "#bcbd22"};

static int write_plot_files(const char *cmd, const char *dir, const double *lam, int nl,
                            const double *steps, int nm, const double *tau, int nt,
                            const ba_summary *stv, const ba_summary *sb, int n, int K,
                            double gamma, int order, const char *source)
{
    char path[PATH_LEN];
    FILE *f = open_outf(cmd, path, "%s/dqa.dat", dir);
    if (!f)
        return 1;
    fprintf(f, "# boltzattn dqa: one block per (lambda, M) (gnuplot index), rows by tau\n"
               "# tau tv_mean tv_sd beta_eff_mean beta_eff_sd\n");
    int allpos = 1;
    for (int li = 0; li < nl; li++)
        for (int mi = 0; mi < nm; mi++) {
            fprintf(f, "# lambda = %g, M = %g\n", lam[li], steps[mi]);
            for (int ti = 0; ti < nt; ti++) {
                int s = (li * nm + mi) * nt + ti;
                fprintf(f, "%.9g %.9g %.9g %.9g %.9g\n", tau[ti], stv[s].mean,
                        K > 1 ? stv[s].sd : 0.0, sb[s].mean, K > 1 ? sb[s].sd : 0.0);
                allpos &= sb[s].mean > 0;
            }
            fprintf(f, "\n\n");
        }
    if (close_out(cmd, f, path) || !(f = open_outf(cmd, path, "%s/dqa.gp", dir)))
        return 1;
    gp_header(f, "dqa.gp", "dqa.png", 1300, 560);
    fprintf(f,
            "set multiplot layout 1,2 title \"simulated DQA vs the exact β = 1 distribution "
            "(%s, n = %d, %d instance%s, Γ = %g, order %d; mean ± sd over instances)\"\n"
            "set grid\n"
            "set key bottom left box opaque\n"
            "set xlabel \"anneal time τ\"\n",
            source, n, K, K == 1 ? "" : "s", gamma, order);
    if (nt > 1)
        fprintf(f, "set logscale x 2\n");
    else /* one tau: give the single points some room */
        fprintf(f, "set xrange [%g:%g]\n", 0.5 * tau[0], 1.5 * tau[0]);
    fprintf(f, "set ylabel \"total variation distance to the β = 1 target\"\n"
               "set yrange [0:1]\n"
               "plot ");
    int nc = nl * nm;
    /* colour by lambda, dashes and points by M */
    static const int pts[] = {7, 5, 9, 13, 11, 15};
    for (int i = 0; i < nc; i++)
        fprintf(f,
                "%s'dqa.dat' index %d using 1:2:3 with yerrorlines linewidth 2 dashtype %d "
                "pointtype %d linecolor rgb \"%s\" title \"M = %g, λ = %g\"",
                i ? ", \\\n     " : "", i, i % nm % 5 + 1, pts[i % nm % 6], colors[i / nm % 10],
                steps[i % nm], lam[i / nm]);
    fprintf(f, "\nset ylabel \"effective inverse temperature β_{eff}\"\n"
               "set autoscale y\n"
               "set key top left box opaque\n");
    if (allpos)
        fprintf(f, "set logscale y 10\n");
    else
        fprintf(f, "unset logscale y\n");
    fprintf(f, "plot 1 with lines dashtype 2 linecolor rgb \"black\" title \"target β = 1\"");
    for (int i = 0; i < nc; i++)
        fprintf(f,
                ", \\\n     'dqa.dat' index %d using 1:4:5 with yerrorlines linewidth 2 "
                "dashtype %d pointtype %d linecolor rgb \"%s\" title \"M = %g, λ = %g\"",
                i, i % nm % 5 + 1, pts[i % nm % 6], colors[i / nm % 10], steps[i % nm],
                lam[i / nm]);
    fprintf(f, "\nunset multiplot\n");
    return close_out(cmd, f, path);
}

/* The instances' source: random, or a checkpoint (its model, the layer-0
 * tensors, the couplings of the chosen head and the evaluation data). */
typedef struct {
    ba_model *m;
    ba_dataset *data;
    l0_tensors l0;
    const ba_real *J; /* (T,T) of the chosen layer and head */
    int T, head;
    int fields;   /* 1: layer-0 fields from the data, 0: h = 0 (coupling), -1: random */
    int *in, *tg; /* (T) one evaluation item */
} source;

static void source_free(source *s)
{
    ba_model_free(s->m);
    ba_dataset_free(s->data);
    free(s->in), free(s->tg);
}

/* Opens --ckpt: exit code, 0 on success (src filled, *n set). */
static int open_ckpt(const command *c, const char *ckpt, int K, int layer, source *src, int *n)
{
    char err[BA_ERR_LEN];
    int st = ba_checkpoint_load(ckpt, &src->m, err);
    if (st)
        return fail_lib(c->cmd, st, err, input_status(st));
    const ba_config *cfg = ba_model_config(src->m);
    if (cfg->attn != BA_ATTN_BOLTZMANN && cfg->attn != BA_ATTN_COUPLING)
        return usage_error(c->cmd, "%s is a %s model: it has no couplings J (boltzmann and "
                           "coupling models do)", ckpt, ba_attn_name(cfg->attn));
    int T = src->T = cfg->block_size, H = cfg->n_head, rc;
    if (layer >= cfg->n_layer)
        return usage_error(c->cmd, "--layer %d: the model has %d layer%s", layer, cfg->n_layer,
                           cfg->n_layer == 1 ? "" : "s");
    if (src->head >= H)
        return usage_error(c->cmd, "--head %d: the model has %d head%s", src->head, H,
                           H == 1 ? "" : "s");
    *n = T < BA_DQA_MAX_SPINS ? T : BA_DQA_MAX_SPINS;
    if (find_opt(c, "n")->set && (rc = get_int(c, "n", 1, *n, n)))
        return rc;
    char name[64];
    snprintf(name, sizeof name, "blocks.%d.attn.J", layer);
    const ba_real *J = tensor(src->m, name, (size_t)H * T * T);
    if (!J) {
        fprintf(stderr, "%s %s: %s: tensor %s missing or not [%d,%d,%d]\n", prog, c->cmd, ckpt,
                name, H, T, T);
        return 2;
    }
    src->J = J + (size_t)src->head * T * T;
    if (layer > 0) {
        src->fields = -1;
        fprintf(stderr, "note: the fields of layer %d depend on the layers below; this tool "
                        "computes layer 0's only, so the instances use random fields "
                        "h ~ N(0, h-std) with the learned J\n", layer);
        return 0;
    }
    if (cfg->attn == BA_ATTN_COUPLING) {
        src->fields = 0;
        fprintf(stderr,
                "note: a coupling model has h = 0: every instance is the learned J alone\n");
        return 0;
    }
    src->fields = 1;
    if (l0_init(src->m, &src->l0)) {
        fprintf(stderr, "%s %s: %s: layer-0 tensors missing or of the wrong size\n", prog,
                c->cmd, ckpt);
        return 2;
    }
    char *recorded = NULL;
    const char *path = NULL;
    if (cfg->task == BA_TASK_CHARLM) {
        if (find_opt(c, "data")->set)
            path = get_str(c, "data");
        else if ((recorded = ckpt_data_path(ckpt)) && access(recorded, R_OK) == 0)
            path = recorded;
        else
            path = default_data_path();
    }
    st = open_dataset(cfg, path, 1, &src->data, err);
    free(recorded);
    if (st)
        return fail_lib(c->cmd, st, err, input_status(st));
    if (K > ba_dataset_num_eval(src->data))
        return usage_error(c->cmd, "--instances %d: the data has %d evaluation items", K,
                           ba_dataset_num_eval(src->data));
    src->in = malloc(sizeof(int) * T), src->tg = malloc(sizeof(int) * T);
    if (!src->in || !src->tg) {
        fprintf(stderr, "%s %s: out of memory\n", prog, c->cmd);
        return 1;
    }
    return 0;
}

int cmd_dqa(int argc, char **argv)
{
    const command *c = &dqa_cmd;
    int rc = parse_opts(c, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    int K, order, layer, threads = 0, n = 8, ref_steps = 0;
    uint64_t seed;
    double hstd, jstd, gamma, tau[MAX_LIST], steps[MAX_LIST], lam[MAX_LIST];
    int nt, nm, nl;
    source src;
    memset(&src, 0, sizeof src);
    if ((rc = get_int(c, "instances", 1, 100000, &K)) || (rc = get_u64(c, "seed", &seed)) ||
        (rc = get_double(c, "h-std", 0, 100, &hstd)) ||
        (rc = get_double(c, "j-std", 0, 100, &jstd)) ||
        (rc = get_double(c, "gamma", 1e-6, 1e4, &gamma)) ||
        (rc = get_int(c, "order", 1, 2, &order)) ||
        (find_opt(c, "ref-steps")->set && (rc = get_int(c, "ref-steps", 1, 1000000, &ref_steps))) ||
        (rc = get_int(c, "layer", 0, 1 << 20, &layer)) ||
        (rc = get_int(c, "head", 0, 1 << 20, &src.head)) ||
        (rc = get_list(c, "tau", 1e-9, 1e4, 0, tau, &nt)) ||
        (rc = get_list(c, "steps", 1, 1e6, 1, steps, &nm)) ||
        (rc = get_list(c, "lambda", 1e-9, 1e4, 0, lam, &nl)))
        return rc;
    if (find_opt(c, "threads")->set && (rc = get_int(c, "threads", 1, 1024, &threads)))
        return rc;
    set_threads(threads);
    const char *ckpt = get_str(c, "ckpt");
    if (!ckpt) {
        static const char *const needs[] = {"layer", "head", "data"};
        for (int i = 0; i < 3; i++)
            if (find_opt(c, needs[i])->set)
                return usage_error(c->cmd, "--%s needs --ckpt", needs[i]);
        if (find_opt(c, "n")->set && (rc = get_int(c, "n", 1, BA_DQA_MAX_SPINS, &n)))
            return rc;
    } else {
        if (find_opt(c, "j-std")->set)
            return usage_error(c->cmd, "--j-std does not apply with --ckpt: the couplings are "
                                       "the checkpoint's");
        if ((rc = open_ckpt(c, ckpt, K, layer, &src, &n))) {
            source_free(&src);
            return rc;
        }
    }
    char dir[PATH_LEN];
    const char *o = get_str(c, "out");
    char err[BA_ERR_LEN];
    if (!*o) {
        source_free(&src);
        return usage_error(c->cmd, "--out must not be empty");
    }
    if (mkpath(c->cmd, dir, "%s", o) || make_dirs(dir, err)) {
        if (*dir)
            fprintf(stderr, "%s %s: %s\n", prog, c->cmd, err);
        source_free(&src);
        return 1;
    }

    size_t N = (size_t)1 << n;
    int S = nl * nm * nt; /* settings, ordered lambda, M, tau */
    double *h = malloc(sizeof(double) * n), *J = calloc((size_t)n * n, sizeof(double));
    double *pe = malloc(sizeof(double) * N), *pd = malloc(sizeof(double) * N),
           *pb = malloc(sizeof(double) * N), *pr = malloc(sizeof(double) * N),
           *col = malloc(sizeof(double) * K);
    result *res = malloc(sizeof(result) * (size_t)K * S);
    ba_summary *sm = malloc(sizeof(ba_summary) * (size_t)S * NMEAS);
    int code = 0, fitfail = 0;
    double maxcheck = 0.0; /* largest attention difference of the field check */
    if (!h || !J || !pe || !pd || !pb || !pr || !col || !res || !sm) {
        fprintf(stderr, "%s %s: out of memory for n = %d\n", prog, c->cmd, n);
        code = 1;
        goto done;
    }
    char desc[256];
    if (ckpt)
        snprintf(desc, sizeof desc, "checkpoint, layer %d head %d, %s", layer, src.head,
                 src.fields == 1   ? "fields of evaluation items"
                 : src.fields == 0 ? "h = 0"
                                   : "random fields");
    else
        snprintf(desc, sizeof desc, "random, h ~ N(0, %g), J ~ N(0, %g)", hstd, jstd);
    printf("dqa: %d instance%s (%s), n = %d; Gamma = %g, order %d; %d setting%s\n", K,
           K == 1 ? "" : "s", desc, n, gamma, order, S, S == 1 ? "" : "s");
    fflush(stdout);
    double t0 = now_s();
    ba_rng rng;
    ba_rng_seed(&rng, seed);
    for (int k = 0; k < K && !code; k++) {
        /* the instance */
        const double *hp = h;
        if (!ckpt || src.fields == -1)
            for (int j = 0; j < n; j++)
                h[j] = hstd * ba_rng_normal(&rng);
        for (int j = 0; j < n; j++)
            for (int l = j + 1; l < n; l++)
                J[(size_t)j * n + l] = ckpt ? (double)src.J[(size_t)j * src.T + l]
                                            : jstd * ba_rng_normal(&rng);
        if (ckpt && src.fields == 0)
            hp = NULL;
        if (ckpt && src.fields == 1) {
            ba_dataset_eval_item(src.data, k, src.in, src.tg);
            double md;
            int st;
            if (layer0_fields(&src.l0, src.in, n, src.head, h)) {
                fprintf(stderr, "%s %s: out of memory\n", prog, c->cmd);
                code = 1;
                break;
            }
            if ((st = check_fields(src.m, src.in, n, src.head, h, J, &md, err))) {
                code = fail_lib(c->cmd, st, err, 1);
                break;
            }
            /* the model runs in float: its weights carry ~1e-7 relative error */
            maxcheck = fmax(maxcheck, md);
            if (!(md < 1e-4)) {
                fprintf(stderr,
                        "%s %s: item %d: the fields computed here give attention weights %g "
                        "away from the model's\n",
                        prog, c->cmd, k, md);
                code = 1;
                break;
            }
        }
        int st = ba_boltzmann_distribution(n, hp, J, n, 1.0, pe, err);
        if (st) {
            code = fail_lib(c->cmd, st, err, 1);
            break;
        }
        for (int li = 0; li < nl && !code; li++)
            for (int ti = 0; ti < nt && !code; ti++) {
                ba_sampler s = ba_sampler_default(BA_SAMPLER_DQA);
                s.tau = tau[ti], s.gamma = gamma, s.lambda = lam[li], s.order = order;
                if (ref_steps) { /* the reference anneal of the Trotter error */
                    s.trotter_steps = ref_steps;
                    if ((st = ba_dqa_distribution(&s, n, hp, J, n, pr, err))) {
                        code = fail_lib(c->cmd, st, err, input_status(st));
                        break;
                    }
                }
                for (int mi = 0; mi < nm; mi++) {
                    s.trotter_steps = (int)steps[mi];
                    double *v = res[(size_t)k * S + (li * nm + mi) * nt + ti].v;
                    if ((st = ba_dqa_distribution(&s, n, hp, J, n, pd, err))) {
                        code = fail_lib(c->cmd, st, err, input_status(st));
                        break;
                    }
                    v[M_TV] = ba_tv_distance(pd, pe, N);
                    v[M_KL] = ba_kl_divergence(pd, pe, N);
                    v[M_TVT] = ref_steps ? ba_tv_distance(pd, pr, N) : NAN;
                    v[M_BETA] = v[M_R2] = v[M_TVB] = NAN;
                    if (ba_fit_beta(n, hp, J, n, pd, &v[M_BETA], &v[M_R2], err) == BA_OK &&
                        ba_boltzmann_distribution(n, hp, J, n, v[M_BETA], pb, err) == BA_OK)
                        v[M_TVB] = ba_tv_distance(pd, pb, N);
                    else if (!fitfail++)
                        fprintf(stderr, "note: instance %d, tau %g, M %d, lambda %g: no beta "
                                        "fit (%s); written as nan\n",
                                k, s.tau, s.trotter_steps, s.lambda, err);
                }
            }
    }
    if (code)
        goto done;
    double elapsed = now_s() - t0;
    if (ckpt && src.fields == 1)
        printf("fields check: h and J give the model's layer-0 attention of query %d to "
               "within %.1e\n", n - 1, maxcheck);

    /* summaries over instances: measure i of setting s at sm[NMEAS s + i] */
    for (int s = 0; s < S; s++)
        for (int i = 0; i < NMEAS; i++) {
            for (int k = 0; k < K; k++)
                col[k] = res[(size_t)k * S + s].v[i];
            sm[NMEAS * s + i] = ba_summarize(col, K);
        }

    printf("mean %s over instances:\n", K > 1 ? "± sd" : "(one instance)");
    printf("%8s %7s %7s | %17s | %17s | %17s | %13s | %17s", "lambda", "M", "tau",
           "TV(dqa, beta=1)", "KL(dqa||exact)", "beta_eff", "r2", "TV(dqa, b_eff)");
    if (ref_steps)
        printf(" | %17s", "TV(M, M_ref)");
    printf("\n");
    int best = 0;
    for (int li = 0; li < nl; li++)
        for (int mi = 0; mi < nm; mi++)
            for (int ti = 0; ti < nt; ti++) {
                int s = (li * nm + mi) * nt + ti;
                const ba_summary *q = &sm[NMEAS * s];
                printf("%8g %7g %7g", lam[li], steps[mi], tau[ti]);
                for (int i = 0; i < (ref_steps ? NMEAS : NMEAS - 1); i++) {
                    const char *fmt = K > 1 ? (i == M_R2    ? " | %6.3f ± %5.3f"
                                               : i == M_TVT ? " | %8.1e ± %6.0e"
                                                            : " | %8.4f ± %6.4f")
                                            : (i == M_R2    ? " | %13.3f"
                                               : i == M_TVT ? " | %17.2e"
                                                            : " | %17.4f");
                    if (K > 1)
                        printf(fmt, q[i].mean, q[i].sd);
                    else
                        printf(fmt, q[i].mean);
                }
                printf("\n");
                if (sm[NMEAS * s].mean < sm[NMEAS * best].mean)
                    best = s;
            }
    printf("closest to the beta = 1 target: TV %.4f at lambda %g, M %g, tau %g "
           "(beta_eff %.4g); %.2f s\n",
           sm[NMEAS * best].mean, lam[best / (nm * nt)], steps[(best / nt) % nm], tau[best % nt],
           sm[NMEAS * best + M_BETA].mean, elapsed);

    char path[PATH_LEN];
    FILE *f = open_outf(c->cmd, path, "%s/dqa.csv", dir);
    if (!f) {
        code = 1;
        goto done;
    }
    fprintf(f, "instance,n,order,gamma,lambda,steps,tau,tv,kl,beta_eff,r2,tv_beta_eff,"
               "tv_trotter\n");
    for (int k = 0; k < K + 2; k++)
        for (int li = 0; li < nl; li++)
            for (int mi = 0; mi < nm; mi++)
                for (int ti = 0; ti < nt; ti++) {
                    int s = (li * nm + mi) * nt + ti;
                    double v[NMEAS];
                    if (k < K) {
                        memcpy(v, res[(size_t)k * S + s].v, sizeof v);
                        fprintf(f, "%d", k);
                    } else {
                        for (int i = 0; i < NMEAS; i++)
                            v[i] = k == K ? sm[NMEAS * s + i].mean
                                          : (K > 1 ? sm[NMEAS * s + i].sd : 0.0);
                        fprintf(f, "%s", k == K ? "mean" : "sd");
                    }
                    fprintf(f, ",%d,%d,%g,%g,%g,%g", n, order, gamma, lam[li], steps[mi],
                            tau[ti]);
                    for (int i = 0; i < NMEAS; i++)
                        fprintf(f, ",%.6g", v[i]);
                    fprintf(f, "\n");
                }
    if ((code = close_out(c->cmd, f, path)))
        goto done;
    {
        ba_summary *stv = malloc(sizeof(ba_summary) * S), *sb = malloc(sizeof(ba_summary) * S);
        if (!stv || !sb) {
            free(stv), free(sb);
            fprintf(stderr, "%s %s: out of memory\n", prog, c->cmd);
            code = 1;
            goto done;
        }
        for (int s = 0; s < S; s++)
            stv[s] = sm[NMEAS * s + M_TV], sb[s] = sm[NMEAS * s + M_BETA];
        code = write_plot_files(c->cmd, dir, lam, nl, steps, nm, tau, nt, stv, sb, n, K, gamma,
                                order, ckpt ? "checkpoint" : "random instances");
        free(stv), free(sb);
    }
    if (code)
        goto done;
    printf("wrote %s/dqa.csv, dqa.dat, dqa.gp\n", dir);
    if (!have_gnuplot()) {
        fprintf(stderr, "gnuplot not found: CSV written, plot skipped %s\n", no_gnuplot_fix);
        goto done;
    }
    if ((code = run_gnuplot(c->cmd, dir, "dqa.gp")) == 0)
        printf("plot: %s/dqa.png\n", dir);

done:
    free(h), free(J), free(pe), free(pd), free(pb), free(pr), free(col), free(res), free(sm);
    source_free(&src);
    return code;
}
