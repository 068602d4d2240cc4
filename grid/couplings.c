/* boltzattn couplings: the learned couplings J of one or more boltzmann or
 * coupling checkpoints (the seeds of one configuration, or the cell a grid
 * picks): CSV and matrix files, statistics by key distance, the paper's
 * sign pattern beside them, gnuplot figures, and couplings.json, the
 * analysis as the reports read it. Absolute couplings (J_jk per pair of
 * positions, tensor attn.J) are summarised by distance over their pairs,
 * within the band where the model has one; relative couplings (attn.J_rel,
 * one value per distance) are J by distance already. */
#include "couplings.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CKPTS 256

static opt couplings_opts[] = {
    {"ckpt", "FILE", NULL,
     "boltzmann or coupling checkpoint (model.safetensors); give it again for more runs of one "
     "configuration, e.g. the seeds of a grid cell",
     0, 0},
    {"grid", "DIR", NULL,
     "instead of --ckpt: the finished runs (with checkpoints) of a grid's exact boltzmann cell "
     "with the largest T, with the FFN where it has both, at --prefer-C where it has it", 0, 0},
    {"prefer-C", "C", "the largest", "with --grid: the width to take at that T", 0, 0},
    {"arm", "SPEC", "the plain boltzmann arm where there is one",
     "with --grid: the arm (variant and form, as ablate --arm: e.g. boltzmann+relative+band8) "
     "whose runs to take", 0, 0},
    {"out", "DIR", "couplings/ next to the (first) checkpoint, or in the grid", "output directory",
     0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command couplings_cmd = {
    "couplings",
    "--ckpt FILE [--ckpt FILE ...] | --grid DIR [--prefer-C C] [--arm SPEC]  [--out DIR]\n\n"
    "Writes the learned couplings J of a boltzmann or coupling checkpoint to DIR:\n"
    "J_l<l>_h<h>.csv (j,k,J for each used pair j < k), J_l<l>_h<h>_matrix.txt (T x T),\n"
    "distance.csv (statistics by key distance k - j, per head and over all),\n"
    "couplings.json (the same statistics for reports) and, when gnuplot is on PATH,\n"
    "J_heatmap_l<l>_h<h>.png and J_vs_distance.png from .gp scripts kept in DIR.\n"
    "Prints mean J by distance next to the paper's sign pattern.\n\n"
    "Several checkpoints (the same task, T, layers and heads: the seeds of one\n"
    "configuration) are summarised together: the pair files and heatmaps hold J\n"
    "averaged over the runs (the CSV adds its sd over runs), distance.csv pools\n"
    "the pairs of every run, and distance_runs.csv gives per distance the mean\n"
    "over runs of each run's mean J, its sd and 95 % interval over runs (Student\n"
    "t) and how many runs have it positive; the plot's error bars are that\n"
    "interval. runs.txt lists the checkpoints.\n\n"
    "Relative couplings (one J per distance, layer and head) give J by distance\n"
    "directly: J_l<l>_h<h>.csv holds distance,J (and its sd over runs), and no\n"
    "heatmap is drawn. Absolute couplings with a band W are summarised at the\n"
    "distances 1..W (beyond it J is 0 by construction); their pair files hold the\n"
    "pairs within the band, and the matrix and heatmap are drawn up to T = 64.",
    couplings_opts};

static void couplings_acc_free(couplings_acc *a)
{
    free(a->pair);
    free(a->dist);
    free(a->all);
    free(a->runmean);
    free(a->over);
    free(a->positive);
    ba_model_free(a->model0);
}

/* The first checkpoint fixes the shape and the form. */
static int acc_init(const command *c, couplings_acc *a, const ba_config *cfg)
{
    a->L = cfg->n_layer, a->H = cfg->n_head, a->T = cfg->block_size;
    a->rel = cfg->couplings == BA_COUPLINGS_RELATIVE;
    a->band = cfg->band;
    a->D = a->rel ? ba_config_distances(cfg) : a->band > 0 ? a->band : a->T - 1;
    size_t lh = (size_t)a->L * a->H, nd = (size_t)a->D + 1;
    /* pair (j, j + d) at [(lh T + j)(D + 1) + d]: a banded model keeps its
     * band only (T x T at T = 1024 would be mostly structural zeros) */
    a->pair = a->rel ? NULL : calloc(lh * a->T * nd, sizeof *a->pair);
    a->dist = calloc(lh * nd, sizeof *a->dist);
    a->all = calloc(nd, sizeof *a->all);
    a->runmean = calloc((size_t)a->runs * nd, sizeof *a->runmean);
    a->over = calloc(nd, sizeof *a->over);
    a->positive = calloc(nd, sizeof *a->positive);
    if ((!a->rel && !a->pair) || !a->dist || !a->all || !a->runmean || !a->over || !a->positive)
        return fail_lib(c, "out of memory", 1);
    return 0;
}

/* The J tensor of layer l, checked against its shape: absolute (H,T,T),
 * relative (H,D). Its offset, or -1 after printing. */
static long coupling_tensor(const command *c, const couplings_acc *a, ba_model *m,
                            const char *path, int l)
{
    char name[64];
    snprintf(name, sizeof name, a->rel ? "blocks.%d.attn.J_rel" : "blocks.%d.attn.J", l);
    int idx = ba_model_find_tensor(m, name);
    ba_tensor_info ti;
    int ok = idx >= 0 && !ba_model_tensor(m, idx, &ti) && ti.ndim == (a->rel ? 2 : 3) &&
             ti.shape[0] == a->H && ti.shape[1] == (a->rel ? a->D : a->T) &&
             (a->rel || ti.shape[2] == a->T);
    if (ok)
        return (long)ti.offset;
    if (a->rel)
        fprintf(stderr, "%s %s: %s: tensor %s missing or not of shape [%d,%d]\n", prog, c->cmd,
                path, name, a->H, a->D);
    else
        fprintf(stderr, "%s %s: %s: tensor %s missing or not of shape [%d,%d,%d]\n", prog,
                c->cmd, path, name, a->H, a->T, a->T);
    return -1;
}

/* Adds the J tensors of model m as run r: every pair j < k within the
 * band (absolute), or every distance (relative). */
static int acc_add_model(const command *c, couplings_acc *a, ba_model *m, const char *path, int r)
{
    int L = a->L, H = a->H, T = a->T, D = a->D;
    size_t nd = (size_t)D + 1;
    const ba_real *params = ba_model_params(m);
    ba_running *mine = calloc(nd, sizeof *mine); /* this run, by distance */
    if (!mine)
        return fail_lib(c, "out of memory", 1);
    for (int l = 0; l < L; l++) {
        long off = coupling_tensor(c, a, m, path, l);
        if (off < 0) {
            free(mine);
            return 2;
        }
        for (int h = 0; h < H; h++) {
            size_t lh = (size_t)l * H + h;
            if (a->rel) {
                const ba_real *Jr = params + off + (size_t)h * D; // (D): entry d-1 is d
                for (int d = 1; d <= D; d++) {
                    ba_running_add(&a->dist[lh * nd + d], Jr[d - 1]);
                    ba_running_add(&a->all[d], Jr[d - 1]);
                    ba_running_add(&mine[d], Jr[d - 1]);
                }
                continue;
            }
            const ba_real *J = params + off + (size_t)h * T * T; // (T,T)
            for (int j = 0; j < T; j++)
                for (int k = j + 1; k < T && k - j <= D; k++) {
                    double x = J[(size_t)j * T + k];
                    ba_running_add(&a->pair[(lh * T + j) * nd + (k - j)], x);
                    ba_running_add(&a->dist[lh * nd + (k - j)], x);
                    ba_running_add(&a->all[k - j], x);
                    ba_running_add(&mine[k - j], x);
                }
        }
    }
    for (size_t d = 0; d < nd; d++)
        a->runmean[(size_t)r * nd + d] = mine[d].mean;
    free(mine);
    return 0;
}

/* Adds the checkpoint at path as run number r. Returns 0, else an exit code
 * after printing which file and which value is wrong. */
static int couplings_add(const command *c, couplings_acc *a, const char *path, int r)
{
    char err[BA_ERR_LEN];
    ba_model *m;
    ba_data_spec spec;
    int st = ba_checkpoint_load(path, &m, &spec, err);
    if (st)
        return fail_lib(c, err, input_status(st));
    const ba_config *cfg = ba_model_config(m);
    int code = 0;
    if (cfg->attn != BA_ATTN_BOLTZMANN && cfg->attn != BA_ATTN_COUPLING)
        code = usage_error(c, "%s is a %s model: it has no couplings J (only boltzmann and "
                              "coupling models do)",
                           path, ba_attn_name(cfg->attn));
    else if (r == 0)
        code = acc_init(c, a, cfg);
    else if (spec.task != a->task || cfg->n_layer != a->L || cfg->n_head != a->H ||
             cfg->block_size != a->T)
        code = usage_error(c, "%s (%s, T=%d, %d layers x %d heads) does not match %s (%s, T=%d, "
                              "%d layers x %d heads): give checkpoints of one configuration",
                           path, ba_task_name(spec.task), cfg->block_size, cfg->n_layer,
                           cfg->n_head, a->path0, ba_task_name(a->task), a->T, a->L, a->H);
    else if ((cfg->couplings == BA_COUPLINGS_RELATIVE) != a->rel || cfg->band != a->band)
        code = usage_error(c, "%s (%s couplings, band %d) does not match %s (%s couplings, band "
                              "%d): give checkpoints of one configuration",
                           path, ba_couplings_name(cfg->couplings), cfg->band, a->path0,
                           a->rel ? "relative" : "absolute", a->band);
    if (!code)
        code = acc_add_model(c, a, m, path, r);
    if (r == 0 && !code) {
        a->model0 = m, a->task = spec.task, a->path0 = path;
        return 0;
    }
    ba_model_free(m);
    return code;
}

/* Per distance, the spread over runs of each run's mean J. */
static int acc_over_runs(const command *c, couplings_acc *a)
{
    double *x = malloc((size_t)a->runs * sizeof *x);
    if (!x)
        return fail_lib(c, "out of memory", 1);
    for (int d = 1; d <= a->D; d++) {
        a->positive[d] = 0;
        for (int r = 0; r < a->runs; r++) {
            x[r] = a->runmean[(size_t)r * (a->D + 1) + d];
            a->positive[d] += x[r] > 0;
        }
        a->over[d] = ba_summarize(x, a->runs);
    }
    free(x);
    return 0;
}

/* A run --grid may take: finished, exact, of the arm asked for (any
 * boltzmann run without one), with its checkpoint. */
static int candidate(const command *c, const lab_run *r, const lab_arm *arm)
{
    char path[PATH_LEN];
    if (!r->finished || r->sampler != BA_SAMPLER_EXACT ||
        r->attn != (arm ? arm->attn : BA_ATTN_BOLTZMANN) ||
        (arm && !lab_form_same(&r->form, &arm->form)))
        return 0;
    return !mkpath(c, path, "%s/model.safetensors", r->dir) && access(path, R_OK) == 0;
}

/* --grid: the checkpoints of the grid's exact boltzmann cell with the
 * largest T (with the FFN where both exist, at the preferred width where
 * it exists, else the widest; of the plain form where the grid has
 * several), or of the arm asked for, over its finished runs that kept
 * their checkpoint. *paths: malloc'd strings. */
static int grid_ckpts(const command *c, const char *grid, int prefer_C, const lab_arm *arm,
                      char **paths, int *n)
{
    lab_runs rs;
    int code = lab_runs_scan(c, grid, &rs);
    *n = 0;
    const lab_run *best = NULL;
    char path[PATH_LEN];
    for (int i = 0; !code && i < rs.n; i++) {
        const lab_run *r = &rs.v[i];
        if (!candidate(c, r, arm))
            continue;
        int better = !best;
        if (best && lab_form_is_plain(&r->form) != lab_form_is_plain(&best->form))
            better = lab_form_is_plain(&r->form);
        else if (best && r->T != best->T)
            better = r->T > best->T;
        else if (best && r->ffn != best->ffn)
            better = r->ffn > best->ffn;
        else if (best && (r->C == prefer_C) != (best->C == prefer_C))
            better = r->C == prefer_C;
        else if (best)
            better = r->C > best->C;
        if (better)
            best = r;
    }
    for (int i = 0; !code && best && i < rs.n && *n < MAX_CKPTS; i++) {
        const lab_run *r = &rs.v[i];
        if (candidate(c, r, arm) && lab_form_same(&r->form, &best->form) && r->T == best->T &&
            r->C == best->C && r->ffn == best->ffn &&
            !mkpath(c, path, "%s/model.safetensors", r->dir) &&
            !(paths[(*n)++] = strdup(path)))
            code = fail_lib(c, "out of memory", 1);
    }
    lab_runs_free(&rs);
    char label[96];
    if (arm)
        lab_arm_variant(arm, label, sizeof label);
    if (!code && *n == 0)
        code = usage_error(c, "%s has no finished exact %s run with its checkpoint", grid,
                           arm ? label : "boltzmann");
    return code;
}

/* The checkpoints to read (--ckpt repeated, or --grid) and the output
 * directory. */
static int choose_inputs(const command *c, int argc, char **argv, const char **ckpts, char **owned,
                         int *n, char *dir)
{
    int rc, C = 0;
    const char *grid = get_str(c, "grid");
    if ((*n = get_repeated(c, argc, argv, "ckpt", ckpts, MAX_CKPTS)) < 0)
        return -*n;
    if (grid && *n)
        return usage_error(c, "--ckpt and --grid exclude each other");
    if (!grid && !*n)
        return usage_error(c, "option '--ckpt' (or '--grid') is required");
    if (!grid && is_set(c, "prefer-C"))
        return usage_error(c, "--prefer-C needs --grid");
    if (is_set(c, "prefer-C") && (rc = get_int(c, "prefer-C", 1, 8192, &C)))
        return rc;
    lab_arm arm;
    char err[BA_ERR_LEN];
    if (!grid && is_set(c, "arm"))
        return usage_error(c, "--arm needs --grid");
    if (is_set(c, "arm") && lab_arm_parse(get_str(c, "arm"), &arm, err))
        return usage_error(c, "--arm %s", err);
    if (is_set(c, "arm") && arm.attn != BA_ATTN_BOLTZMANN && arm.attn != BA_ATTN_COUPLING)
        return usage_error(c, "--arm %s: only boltzmann and coupling models have couplings J",
                           get_str(c, "arm"));
    if (grid && (rc = grid_ckpts(c, grid, C, is_set(c, "arm") ? &arm : NULL, owned, n)))
        return rc;
    /* One run given twice (under two names, say) would count as two seeds
     * and get a confidence interval it does not have. */
    for (int i = 0; !grid && i < *n; i++)
        for (int j = 0; j < i; j++)
            if (same_file(ckpts[i], ckpts[j]))
                return usage_error(c, "--ckpt %s and --ckpt %s are the same file: each run may "
                                      "be given once",
                                   ckpts[j], ckpts[i]);
    for (int i = 0; grid && i < *n; i++)
        ckpts[i] = owned[i];
    if (is_set(c, "out")) {
        const char *o = get_str(c, "out");
        if (!*o)
            return usage_error(c, "--out must not be empty");
        return mkpath(c, dir, "%s", o) ? EXIT_USAGE : 0;
    }
    if (grid)
        return mkpath(c, dir, "%s/couplings", grid) ? EXIT_USAGE : 0;
    const char *slash = strrchr(ckpts[0], '/');
    return mkpath(c, dir, "%.*scouplings", slash ? (int)(slash - ckpts[0] + 1) : 0, ckpts[0])
               ? EXIT_USAGE
               : 0;
}

static int draw(const command *c, const char *dir, const couplings_acc *a)
{
    if (!have_gnuplot()) {
        fprintf(stderr, "gnuplot not found: CSV written, plots skipped %s\n", no_gnuplot_fix);
        return 0;
    }
    int bad = 0, heatmap = couplings_has_heatmap(a);
    for (int l = 0; heatmap && l < a->L; l++)
        for (int h = 0; h < a->H; h++) {
            char script[64];
            snprintf(script, sizeof script, "J_heatmap_l%d_h%d.gp", l, h);
            bad |= run_gnuplot(c, dir, script);
        }
    if (a->D >= 1)
        bad |= run_gnuplot(c, dir, "J_vs_distance.gp");
    if (!bad && heatmap)
        printf("plots: %s/J_heatmap_l*_h*.png%s\n", dir, a->D >= 1 ? ", J_vs_distance.png" : "");
    else if (!bad && a->D >= 1)
        printf("plots: %s/J_vs_distance.png\n", dir);
    return bad;
}

int cmd_couplings(int argc, char **argv)
{
    const command *c = &couplings_cmd;
    int rc = parse_args(c, argc, argv, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *ckpts[MAX_CKPTS];
    char *owned[MAX_CKPTS], dir[PATH_LEN];
    int n = 0;
    memset(owned, 0, sizeof owned);
    couplings_acc a;
    memset(&a, 0, sizeof a);
    int code = choose_inputs(c, argc, argv, ckpts, owned, &n, dir);
    a.runs = n;
    for (int r = 0; r < n && !code; r++)
        code = couplings_add(c, &a, ckpts[r], r);
    if (!code)
        code = acc_over_runs(c, &a);
    if (!code)
        code = couplings_write_files(c, dir, &a, ckpts, n);
    if (!code) {
        couplings_print_table(&a, ckpts, n);
        printf("wrote %s/J_l*_h*.csv, %sdistance.csv%s, runs.txt, couplings.json and .gp "
               "scripts\n",
               dir, couplings_has_heatmap(&a) ? "J_l*_h*_matrix.txt, " : "",
               n > 1 ? ", distance_runs.csv" : "");
        code = draw(c, dir, &a);
    }
    for (int i = 0; i < MAX_CKPTS; i++)
        free(owned[i]);
    couplings_acc_free(&a);
    return code;
}
