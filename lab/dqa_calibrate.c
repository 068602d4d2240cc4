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
#include "dqa_sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The largest n taken from a checkpoint's T without --n. At n = 20 a run
 * holds 40 MiB and an anneal of 200 Trotter steps takes about a second on
 * two cores; each spin more doubles both, so n = 24 (the simulator's limit)
 * needs 640 MiB and about 50 s an anneal, 20 minutes for the default
 * sweep's 25. A size that costly runs only when asked for. */
#define DQA_AUTO_MAX_N 20

static opt dqa_opts[] = {
    {"n", "N", "8; with --ckpt T, if at most 20",
     "spins (qubits) per instance, 1..24 (with --ckpt at most T: the query at position N-1); "
     "memory (5 arrays of 2^N doubles, 640 MiB at 24) and time double with each spin, so a "
     "checkpoint's T above 20 is refused without --n", 0, 0},
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
    {"compare-samplers", "S", NULL,
     "instead of the anneal sweep: the total variation between S shots of every sampler at its "
     "default parameters (direct, gibbs, sa, dqa) and the exact distribution, on --instances "
     "random instances of each size in --sizes", 0, 0},
    {"sizes", "LIST", "8,12", "with --compare-samplers: the system sizes n (at most 16)", 0, 0},
    {"threads", "N", "idle cores", "OpenMP threads (at most the CPUs)", 0, 0},
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
    "sd over instances). States n, the memory and the anneals before it starts; on a\n"
    "terminal, a progress line with an ETA on stderr. Exit status: 0 ok, 1 runtime\n"
    "failure, 2 bad usage or input.",
    dqa_opts};

/* What a run at n costs, said before it starts and when a size is refused:
 * the 2^n-double arrays held at the peak and the anneals. The run holds the
 * exact, dqa and beta_eff distributions (and the reference one with
 * --ref-steps) throughout; an anneal adds its two state arrays (the beta
 * fit's 1.5 arrays and the exact distribution's half array come at other
 * times and fit within them). */
typedef struct {
    int held, arrays; /* held through the run; at the peak */
    double bytes;     /* at the peak: arrays * 2^n doubles */
    long anneals;     /* over all instances, reference anneals included */
    double steps;     /* Trotter steps over all instances */
} run_cost;

static run_cost cost_of(const sweep *w, int K, int n)
{
    run_cost r;
    r.held = w->ref_steps ? 4 : 3;
    r.arrays = r.held + 2;
    r.bytes = r.arrays * ldexp((double)sizeof(double), n);
    double msum = 0.0;
    for (int i = 0; i < w->nm; i++)
        msum += w->steps[i];
    long per = (long)w->nl * w->nt;
    r.anneals = (long)K * per * (w->nm + (w->ref_steps ? 1 : 0));
    r.steps = (double)K * per * (msum + w->ref_steps);
    return r;
}

/* "2 KiB", "40 MiB", "1.5 GiB" (rounded up below a GiB). */
static void fmt_bytes(double b, char *buf, size_t len)
{
    if (b < 1048576.0)
        snprintf(buf, len, "%.0f KiB", ceil(b / 1024.0));
    else if (b < 1024.0 * 1048576.0)
        snprintf(buf, len, "%.0f MiB", ceil(b / 1048576.0));
    else
        snprintf(buf, len, "%.1f GiB", b / (1024.0 * 1048576.0));
}

/* The instances' source: random, or a checkpoint (its model, the couplings
 * of the chosen layer and head, and the evaluation data whose layer-0
 * fields the instances take). */
typedef struct {
    ba_model *m;
    ba_dataset *data;
    const ba_real *J; /* (T,T) of the chosen layer and head */
    int T, head;
    int fields;   /* 1: layer-0 fields from the data, 0: h = 0 (coupling), -1: random */
    int check;    /* with fields 1: the model runs exact, its attention checks the fields */
    int *in, *tg; /* (T) one evaluation item */
} source;

static void source_free(source *s)
{
    ba_model_free(s->m);
    ba_dataset_free(s->data);
    free(s->in), free(s->tg);
}

/* The evaluation data of a checkpoint (charlm: --data, else the recorded
 * file, else the default). */
static int open_source_data(const command *c, const char *ckpt, const ba_data_spec *spec,
                            source *src, int K)
{
    char err[BA_ERR_LEN], *recorded = NULL;
    const char *path = NULL;
    if (spec->task == BA_TASK_CHARLM) {
        if (is_set(c, "data"))
            path = get_str(c, "data");
        else if ((recorded = ckpt_data_path(ckpt)) && access(recorded, R_OK) == 0)
            path = recorded;
        else
            path = default_data_path();
    }
    int st = open_dataset(spec, src->T, path, 1, &src->data, err);
    free(recorded);
    if (st)
        return fail_lib(c, err, input_status(st));
    if (K > ba_dataset_num_eval(src->data))
        return usage_error(c, "--instances %d: the data has %d evaluation items", K,
                           ba_dataset_num_eval(src->data));
    src->in = malloc(sizeof(int) * (size_t)src->T), src->tg = malloc(sizeof(int) * (size_t)src->T);
    if (!src->in || !src->tg)
        return fail_lib(c, "out of memory", 1);
    return 0;
}

/* n from the checkpoint's T: --n when given (at most T and the simulator's
 * limit), else min(T, 24) — refused (exit 2, before any work) above
 * DQA_AUTO_MAX_N, naming the size, its cost and the option that asks for
 * it, since nobody asked for minutes of work and hundreds of MiB. */
static int ckpt_size(const command *c, const char *ckpt, const sweep *w, int K, int T, int *n)
{
    *n = T < BA_DQA_MAX_SPINS ? T : BA_DQA_MAX_SPINS;
    if (is_set(c, "n"))
        return get_int(c, "n", 1, *n, n);
    if (*n <= DQA_AUTO_MAX_N)
        return 0;
    run_cost r = cost_of(w, K, *n);
    char mem[32], capped[64] = "";
    fmt_bytes(r.bytes, mem, sizeof mem);
    if (T > *n)
        snprintf(capped, sizeof capped, ", capped at the simulator's %d", BA_DQA_MAX_SPINS);
    return usage_error(c,
                       "%s has T = %d, so n would be %d spins (its T%s): 2^%d states, about "
                       "%s of memory (%d arrays of 2^%d doubles) and %ld anneal%s of 2^%d "
                       "amplitudes, %.0f Trotter steps in all. Without --n, n is at most %d; "
                       "give --n %d to run this size anyway, or a smaller --n",
                       ckpt, T, *n, capped, *n, mem, r.arrays, *n, r.anneals,
                       r.anneals == 1 ? "" : "s", *n, r.steps, DQA_AUTO_MAX_N, *n);
}

/* The layer-0 fields are checked against the model's exact attention: the
 * model is switched to exact inference for good (this tool only reads its
 * fields and attention). A model that samples its attention at a T past
 * exact inference keeps its sampler: layer 0's fields come before any
 * attention, so they are the same, but there is no exact attention to
 * check them against (a sampled one differs by shot noise). */
static int use_exact(const command *c, source *src)
{
    char err[BA_ERR_LEN];
    ba_sampler exact = ba_sampler_default(BA_SAMPLER_EXACT);
    const ba_config *cfg = ba_model_config(src->m);
    ba_sampler_kind own = cfg->sampler.kind;
    int st = ba_model_set_sampler(src->m, &exact, err);
    src->check = st == BA_OK;
    if (st == BA_ERR_LIMIT)
        fprintf(stderr,
                "note: the model samples its attention (%s) and its T = %d is beyond exact "
                "inference (the %s engine's limit is %d spins): the fields are layer 0's all "
                "the same, but the fields check against the model's exact attention is "
                "skipped\n",
                ba_sampler_name(own), src->T, ba_engine_name(cfg->engine),
                ba_engine_max_spins(cfg->engine));
    else if (st)
        return fail_lib(c, err, 1);
    return 0;
}

/* Opens --ckpt: exit code, 0 on success (src filled, *n set). */
static int open_ckpt(const command *c, const char *ckpt, const sweep *w, int K, int layer,
                     source *src, int *n)
{
    char err[BA_ERR_LEN];
    ba_data_spec spec;
    int st = ba_checkpoint_load(ckpt, &src->m, &spec, err);
    if (st)
        return fail_lib(c, err, input_status(st));
    const ba_config *cfg = ba_model_config(src->m);
    if (cfg->attn != BA_ATTN_BOLTZMANN && cfg->attn != BA_ATTN_COUPLING)
        return usage_error(c, "%s is a %s model: it has no couplings J (boltzmann and "
                              "coupling models do)", ckpt, ba_attn_name(cfg->attn));
    int T = src->T = cfg->block_size, H = cfg->n_head, rc;
    if (layer >= cfg->n_layer)
        return usage_error(c, "--layer %d: the model has %d layer%s", layer, cfg->n_layer,
                           cfg->n_layer == 1 ? "" : "s");
    if (src->head >= H)
        return usage_error(c, "--head %d: the model has %d head%s", src->head, H,
                           H == 1 ? "" : "s");
    if ((rc = ckpt_size(c, ckpt, w, K, T, n)))
        return rc;
    char name[64];
    snprintf(name, sizeof name, "blocks.%d.attn.J", layer);
    int idx = ba_model_find_tensor(src->m, name);
    ba_tensor_info ti;
    if (idx < 0 || ba_model_tensor(src->m, idx, &ti) || ti.size != (size_t)H * T * T) {
        fprintf(stderr, "%s %s: %s: tensor %s missing or not [%d,%d,%d]\n", prog, c->cmd, ckpt,
                name, H, T, T);
        return 2;
    }
    src->J = ba_model_params(src->m) + ti.offset + (size_t)src->head * T * T;
    if (layer > 0) {
        src->fields = -1;
        fprintf(stderr, "note: the fields of layer %d depend on the layers below; this tool "
                        "takes layer 0's only, so the instances use random fields "
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
    if ((rc = use_exact(c, src)))
        return rc;
    return open_source_data(c, ckpt, &spec, src, K);
}

/* The layer-0 fields of query n-1 of evaluation item k (head src->head)
 * from the model's own forward pass. With src->check, the model runs exact
 * inference (use_exact) and *maxdiff is the largest difference between
 * that query's attention weights and the ones h and J give through the
 * exact engine (the check that h and J are the model's; the model's
 * sampled attention would differ by its shot noise); else *maxdiff = NAN. */
static int model_fields(source *src, int k, int n, const double *J, double *h, double *maxdiff,
                        char *err)
{
    ba_model *m = src->m;
    int T = src->T;
    ba_dataset_eval_item(src->data, k, src->in, src->tg);
    int st = ba_model_forward(m, src->in, NULL, 1, T, NULL, err);
    if (st == BA_OK)
        st = ba_model_fields(m, 0, src->head, 0, n - 1, h, err);
    *maxdiff = NAN;
    if (st || !src->check)
        return st;
    double logw[BA_DQA_MAX_SPINS], z = 0.0;
    if ((st = ba_ising_marginals(BA_ENGINE_FAST, n, h, J, n, logw, err)))
        return st;
    const ba_real *att = ba_model_attention(m, 0) + ((size_t)src->head * T + (n - 1)) * T;
    for (int j = 0; j < n; j++)
        z += exp(logw[j]);
    *maxdiff = 0.0;
    for (int j = 0; j < n; j++)
        *maxdiff = fmax(*maxdiff, fabs(exp(logw[j]) / z - (double)att[j]));
    return BA_OK;
}

/* Instance k's fields and couplings into h (n) and J (n,n); hp gets h or
 * NULL (h = 0). */
static int make_instance(const command *c, source *src, int has_ckpt, int k, int n, double hstd,
                         double jstd, ba_rng *rng, double *h, double *J, const double **hp,
                         double *maxcheck)
{
    char err[BA_ERR_LEN];
    *hp = h;
    if (!has_ckpt || src->fields == -1)
        for (int j = 0; j < n; j++)
            h[j] = hstd * ba_rng_normal(rng);
    for (int j = 0; j < n; j++)
        for (int l = j + 1; l < n; l++)
            J[(size_t)j * n + l] = has_ckpt ? (double)src->J[(size_t)j * src->T + l]
                                            : jstd * ba_rng_normal(rng);
    if (has_ckpt && src->fields == 0)
        *hp = NULL;
    if (!has_ckpt || src->fields != 1)
        return 0;
    double md;
    int st = model_fields(src, k, n, J, h, &md, err);
    if (st)
        return fail_lib(c, err, 1);
    if (!src->check)
        return 0;
    /* the model runs in float: its weights carry ~1e-7 relative error */
    *maxcheck = fmax(*maxcheck, md);
    if (!(md < 1e-4)) {
        fprintf(stderr, "%s %s: item %d: the fields give attention weights %g away from the "
                        "model's exact attention\n", prog, c->cmd, k, md);
        return 1;
    }
    return 0;
}

/* The progress line on a terminal: stderr, redrawn as each anneal starts
 * (at most five times a second), with the anneals done, the share of the
 * Trotter steps done, the elapsed time and the ETA at the rate so far.
 * Nothing when stderr is not a terminal, so logs and pipes stay clean. */
typedef struct {
    int on, drawn;
    long done_anneals, anneals;
    double t0, tlast, done, total; /* Trotter steps */
} progress;

static void progress_draw(progress *p)
{
    double t = now_s();
    if (!p->on || (p->tlast >= 0 && t - p->tlast < 0.2))
        return;
    p->tlast = t;
    double el = t - p->t0;
    char elb[32], eta[32];
    fmt_duration(el, elb, sizeof elb);
    fmt_duration(p->done > 0 ? el / p->done * (p->total - p->done) : NAN, eta, sizeof eta);
    fprintf(stderr, "\ranneal %ld/%ld  %3.0f%%  %s elapsed  ETA %s   ", p->done_anneals + 1,
            p->anneals, 100.0 * p->done / p->total, elb, eta);
    fflush(stderr);
    p->drawn = 1;
}

/* Wipes the line (before a message, and at the end). */
static void progress_clear(progress *p)
{
    if (p->drawn)
        fprintf(stderr, "\r%60s\r", "");
    p->drawn = 0, p->tlast = -1.0;
}

/* One anneal into p (the reference anneal or a measured one), with the
 * progress line. */
static int anneal(const command *c, progress *pg, const ba_sampler *s, int n, const double *h,
                  const double *J, double *p)
{
    char err[BA_ERR_LEN];
    progress_draw(pg);
    int st = ba_dqa_distribution(s, n, h, J, n, p, err);
    if (st) {
        progress_clear(pg);
        return fail_lib(c, err, input_status(st));
    }
    pg->done += s->trotter_steps, pg->done_anneals++;
    return 0;
}

/* The scratch of the measurements: 2^n distributions (pr only with
 * --ref-steps), the progress line, and the count of failed beta fits. */
typedef struct {
    double *pe, *pd, *pb, *pr;
    progress pg;
    int fitfail;
} workspace;

/* Every setting of the sweep on one instance: v[s] for setting s. */
static int measure(const command *c, const sweep *w, int k, int n, const double *h,
                   const double *J, result *v, workspace *ws)
{
    char err[BA_ERR_LEN];
    size_t N = (size_t)1 << n;
    double *pe = ws->pe, *pd = ws->pd, *pb = ws->pb, *pr = ws->pr;
    int st = ba_boltzmann_distribution(n, h, J, n, 1.0, pe, err);
    if (st) {
        progress_clear(&ws->pg);
        return fail_lib(c, err, 1);
    }
    for (int li = 0; li < w->nl; li++)
        for (int ti = 0; ti < w->nt; ti++) {
            ba_sampler s = ba_sampler_default(BA_SAMPLER_DQA);
            s.tau = w->tau[ti], s.gamma = w->gamma, s.lambda = w->lam[li], s.order = w->order;
            if (w->ref_steps) { /* the reference anneal of the Trotter error */
                s.trotter_steps = w->ref_steps;
                if ((st = anneal(c, &ws->pg, &s, n, h, J, pr)))
                    return st;
            }
            for (int mi = 0; mi < w->nm; mi++) {
                s.trotter_steps = (int)w->steps[mi];
                double *x = v[(li * w->nm + mi) * w->nt + ti].v;
                if ((st = anneal(c, &ws->pg, &s, n, h, J, pd)))
                    return st;
                x[M_TV] = ba_tv_distance(pd, pe, N);
                x[M_KL] = ba_kl_divergence(pd, pe, N);
                x[M_TVT] = w->ref_steps ? ba_tv_distance(pd, pr, N) : NAN;
                x[M_BETA] = x[M_R2] = x[M_TVB] = NAN;
                if (ba_fit_beta(n, h, J, n, pd, &x[M_BETA], &x[M_R2], err) == BA_OK &&
                    ba_boltzmann_distribution(n, h, J, n, x[M_BETA], pb, err) == BA_OK)
                    x[M_TVB] = ba_tv_distance(pd, pb, N);
                else if (!ws->fitfail++) {
                    progress_clear(&ws->pg);
                    fprintf(stderr, "note: instance %d, tau %g, M %d, lambda %g: no beta "
                                    "fit (%s); written as nan\n",
                            k, s.tau, s.trotter_steps, s.lambda, err);
                }
            }
        }
    return 0;
}

/* The table of means over instances, and the setting closest to the
 * target. sm: NMEAS summaries per setting. */
static void print_summary(const sweep *w, const ba_summary *sm, int K, double elapsed)
{
    printf("mean %s over instances:\n", K > 1 ? "± sd" : "(one instance)");
    printf("%8s %7s %7s | %17s | %17s | %17s | %13s | %17s", "lambda", "M", "tau",
           "TV(dqa, beta=1)", "KL(dqa||exact)", "beta_eff", "r2", "TV(dqa, b_eff)");
    if (w->ref_steps)
        printf(" | %17s", "TV(M, M_ref)");
    printf("\n");
    int best = 0;
    for (int li = 0; li < w->nl; li++)
        for (int mi = 0; mi < w->nm; mi++)
            for (int ti = 0; ti < w->nt; ti++) {
                int s = (li * w->nm + mi) * w->nt + ti;
                const ba_summary *q = &sm[NMEAS * s];
                printf("%8g %7g %7g", w->lam[li], w->steps[mi], w->tau[ti]);
                for (int i = 0; i < (w->ref_steps ? NMEAS : NMEAS - 1); i++) {
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
    int nmt = w->nm * w->nt;
    printf("closest to the beta = 1 target: TV %.4f at lambda %g, M %g, tau %g "
           "(beta_eff %.4g); %.2f s\n",
           sm[NMEAS * best].mean, w->lam[best / nmt], w->steps[(best / w->nt) % w->nm],
           w->tau[best % w->nt], sm[NMEAS * best + M_BETA].mean, elapsed);
}

/* The options into the sweep and the instances' description. */
static int parse_dqa_opts(const command *c, sweep *w, int *K, int *layer, uint64_t *seed,
                          double *hstd, double *jstd, int *head)
{
    int rc;
    if ((rc = get_int(c, "instances", 1, 100000, K)) || (rc = get_u64(c, "seed", seed)) ||
        (rc = get_double(c, "h-std", 0, 100, hstd)) ||
        (rc = get_double(c, "j-std", 0, 100, jstd)) ||
        (rc = get_double(c, "gamma", 1e-6, 1e4, &w->gamma)) ||
        (rc = get_int(c, "order", 1, 2, &w->order)) ||
        (is_set(c, "ref-steps") && (rc = get_int(c, "ref-steps", 1, 1000000, &w->ref_steps))) ||
        (rc = get_int(c, "layer", 0, 1 << 20, layer)) ||
        (rc = get_int(c, "head", 0, 1 << 20, head)) ||
        (rc = get_list(c, "tau", 1e-9, 1e4, 0, w->tau, MAX_LIST, &w->nt)) ||
        (rc = get_list(c, "steps", 1, 1e6, 1, w->steps, MAX_LIST, &w->nm)) ||
        (rc = get_list(c, "lambda", 1e-9, 1e4, 0, w->lam, MAX_LIST, &w->nl)))
        return rc;
    return apply_threads(c);
}

/* The instances: their source, n, and the output directory. */
static int open_instances(const command *c, const sweep *w, source *src, int K, int layer,
                          int *n, char *dir)
{
    int rc;
    const char *ckpt = get_str(c, "ckpt");
    if (!ckpt) {
        static const char *const needs[] = {"layer", "head", "data"};
        for (int i = 0; i < 3; i++)
            if (is_set(c, needs[i]))
                return usage_error(c, "--%s needs --ckpt", needs[i]);
        if (is_set(c, "n") && (rc = get_int(c, "n", 1, BA_DQA_MAX_SPINS, n)))
            return rc;
    } else {
        if (is_set(c, "j-std"))
            return usage_error(c, "--j-std does not apply with --ckpt: the couplings are "
                                  "the checkpoint's");
        if ((rc = open_ckpt(c, ckpt, w, K, layer, src, n)))
            return rc;
    }
    const char *o = get_str(c, "out");
    char err[BA_ERR_LEN];
    if (!*o)
        return usage_error(c, "--out must not be empty");
    if (mkpath(c, dir, "%s", o))
        return 1;
    if (make_dirs(dir, err))
        return fail_lib(c, err, 1);
    return 0;
}

/* The measurements of every instance: res (K, S). */
static int run_instances(const command *c, source *src, const sweep *w, int K, int n,
                         uint64_t seed, double hstd, double jstd, result *res)
{
    size_t N = (size_t)1 << n;
    run_cost r = cost_of(w, K, n);
    workspace ws;
    memset(&ws, 0, sizeof ws);
    double *h = malloc(sizeof(double) * (size_t)n), *J = calloc((size_t)n * n, sizeof(double));
    ws.pe = malloc(sizeof(double) * N), ws.pd = malloc(sizeof(double) * N);
    ws.pb = malloc(sizeof(double) * N);
    ws.pr = w->ref_steps ? malloc(sizeof(double) * N) : NULL;
    int code = 0, has_ckpt = src->m != NULL;
    double maxcheck = 0.0; /* largest attention difference of the field check */
    /* The anneal's two state arrays come and go inside the library: asking
     * for them once here makes a memory limit fail now, with the figure,
     * rather than after the first instance's work. */
    void *probe = malloc(2 * sizeof(double) * N);
    if (!h || !J || !ws.pe || !ws.pd || !ws.pb || (w->ref_steps && !ws.pr) || !probe) {
        char peak[32];
        fmt_bytes(r.bytes, peak, sizeof peak);
        fprintf(stderr, "%s %s: out of memory for n = %d: asked for %s (%d arrays of 2^%d "
                        "doubles, the run's peak); each spin fewer halves it\n",
                prog, c->cmd, n, peak, r.arrays, n);
        code = 1;
    }
    free(probe);
    ba_rng rng;
    ba_rng_seed(&rng, seed);
    ws.pg.on = isatty(STDERR_FILENO), ws.pg.anneals = r.anneals, ws.pg.total = r.steps;
    ws.pg.t0 = now_s(), ws.pg.tlast = -1.0;
    for (int k = 0; k < K && !code; k++) {
        const double *hp;
        code = make_instance(c, src, has_ckpt, k, n, hstd, jstd, &rng, h, J, &hp, &maxcheck);
        if (code)
            progress_clear(&ws.pg);
        else
            code = measure(c, w, k, n, hp, J, res + (size_t)k * n_settings(w), &ws);
    }
    progress_clear(&ws.pg);
    if (!code && has_ckpt && src->fields == 1 && src->check)
        printf("fields check: h and J give the model's exact layer-0 attention of query %d "
               "to within %.1e\n", n - 1, maxcheck);
    else if (!code && has_ckpt && src->fields == 1)
        printf("fields check: skipped (no exact inference at the model's T = %d)\n", src->T);
    free(h), free(J), free(ws.pe), free(ws.pd), free(ws.pb), free(ws.pr);
    return code;
}

/* What the run does and what it costs, before the work starts (the cost
 * matters from n of about 20: memory and time double with each spin). */
static void print_header(const command *c, const sweep *w, const source *src, int K, int n,
                         const char *desc)
{
    int S = n_settings(w);
    run_cost r = cost_of(w, K, n);
    char mem[32];
    fmt_bytes(r.bytes, mem, sizeof mem);
    printf("dqa: %d instance%s (%s), n = %d; Gamma = %g, order %d; %d setting%s\n", K,
           K == 1 ? "" : "s", desc, n, w->gamma, w->order, S, S == 1 ? "" : "s");
    printf("size: n = %d (%s), 2^%d = %.0f states; memory about %s at the peak (%d arrays of "
           "2^%d doubles); %ld anneal%s, %.0f Trotter step%s in all\n",
           n, is_set(c, "n") ? "--n" : is_set(c, "ckpt") ? "the checkpoint's T" : "the default",
           n, ldexp(1.0, n), mem, r.arrays, n, r.anneals, r.anneals == 1 ? "" : "s", r.steps,
           r.steps == 1 ? "" : "s");
    /* The model's exact forward (the fields check) keeps the fast engine's
     * kernels, 2^(T+1) doubles per layer and head, whatever n is. */
    const ba_config *cfg = src->m ? ba_model_config(src->m) : NULL;
    double mb = cfg ? cfg->n_layer * cfg->n_head * ldexp(2.0 * sizeof(double), src->T) : 0.0;
    if (cfg && src->fields == 1 && src->check && ba_config_engine(cfg) == BA_ENGINE_FAST &&
        mb >= 1048576.0) {
        fmt_bytes(mb, mem, sizeof mem);
        printf("model: its exact forward at T = %d (the fields check) holds about %s more "
               "(the fast engine's kernels)\n", src->T, mem);
    }
    fflush(stdout);
}

int cmd_dqa(int argc, char **argv)
{
    const command *c = &dqa_cmd;
    int rc = parse_args(c, argc, argv, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (is_set(c, "compare-samplers"))
        return dqa_compare_samplers(c);
    if (is_set(c, "sizes"))
        return usage_error(c, "--sizes needs --compare-samplers");
    sweep w;
    memset(&w, 0, sizeof w);
    int K, layer, n = 8;
    uint64_t seed;
    double hstd, jstd;
    source src;
    memset(&src, 0, sizeof src);
    char dir[PATH_LEN];
    if ((rc = parse_dqa_opts(c, &w, &K, &layer, &seed, &hstd, &jstd, &src.head)) ||
        (rc = open_instances(c, &w, &src, K, layer, &n, dir))) {
        source_free(&src);
        return rc;
    }
    int S = n_settings(&w), code = 0;
    result *res = malloc(sizeof(result) * (size_t)K * S);
    ba_summary *sm = malloc(sizeof(ba_summary) * (size_t)S * NMEAS);
    double *col = malloc(sizeof(double) * (size_t)K);
    ba_summary *stv = malloc(sizeof(ba_summary) * S), *sb = malloc(sizeof(ba_summary) * S);
    if (!res || !sm || !col || !stv || !sb)
        code = fail_lib(c, "out of memory", 1);
    const char *ckpt = get_str(c, "ckpt");
    char desc[256];
    if (ckpt)
        snprintf(desc, sizeof desc, "checkpoint, layer %d head %d, %s", layer, src.head,
                 src.fields == 1   ? "fields of evaluation items"
                 : src.fields == 0 ? "h = 0"
                                   : "random fields");
    else
        snprintf(desc, sizeof desc, "random, h ~ N(0, %g), J ~ N(0, %g)", hstd, jstd);
    if (!code)
        print_header(c, &w, &src, K, n, desc);
    double t0 = now_s();
    if (!code)
        code = run_instances(c, &src, &w, K, n, seed, hstd, jstd, res);
    /* summaries over instances: measure i of setting s at sm[NMEAS s + i] */
    for (int s = 0; !code && s < S; s++) {
        for (int i = 0; i < NMEAS; i++) {
            for (int k = 0; k < K; k++)
                col[k] = res[(size_t)k * S + s].v[i];
            sm[NMEAS * s + i] = ba_summarize(col, K);
        }
        stv[s] = sm[NMEAS * s + M_TV], sb[s] = sm[NMEAS * s + M_BETA];
    }
    if (!code) {
        print_summary(&w, sm, K, now_s() - t0);
        code = dqa_write_csv(c, dir, &w, res, sm, K, n) ||
               dqa_write_plot_files(c, dir, &w, stv, sb, n, K,
                                ckpt ? "checkpoint" : "random instances");
    }
    if (!code) {
        printf("wrote %s/dqa.csv, dqa.dat, dqa.gp\n", dir);
        if (!have_gnuplot())
            fprintf(stderr, "gnuplot not found: CSV written, plot skipped %s\n", no_gnuplot_fix);
        else if ((code = run_gnuplot(c, dir, "dqa.gp")) == 0)
            printf("plot: %s/dqa.png\n", dir);
    }
    free(res), free(sm), free(col), free(stv), free(sb);
    source_free(&src);
    return code;
}
