/* boltzattn ablate: the grid of attention variants (with their forms:
 * --arm) x T x widths x FFN x seeds (x samplers x shots for boltzmann and
 * coupling), trained with identical settings and data order per seed
 * through the library's loop, resumable, shared by processes, summarised
 * with paired confidence intervals against softmax. The grid is recorded
 * in DIR/grid.json, each run in DIR/runs/NAME/run.json; --extrapolate
 * evaluates a grid's runs at a longer T (extrapolate.c). (Evaluating its
 * Ising runs with other engines is boltzattn-lab eval-engines.) */
#include "grid.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SHARE 16
#define STR_(x) #x
#define STR(x) STR_(x)

static opt ablate_opts[64] = {
    {"task", "charlm|brackets|recall", NULL, "task (required)", 0, 0},
    {"attn", "LIST", "softmax,sigmoid,boltzmann,coupling", "attention variants (plain form)", 0,
     0},
    {"arm", "SPEC", NULL,
     "instead of --attn: an arm with its form, SPEC = VARIANT[+PART]... with PART relative or "
     "absolute (couplings), band<W>, log-n (field bias), pos-emb=learned|none (default none "
     "with relative couplings), engine=mf|tap|bp|hybrid (the arm's own approximate engine, "
     "with the grid's --damping, --tol, --max-iter, --window), e.g. boltzmann+relative+band8, "
     "sigmoid+log-n, boltzmann+relative+engine=tap; comma-separated "
     "and/or repeated; cells of a form are named by its label (boltzmann-rel-W8)", 0, 0},
    {"T", "LIST", "8",
     "block sizes, each in 1.." STR(BA_MAX_BLOCK) "; brackets: exact draws to 64 (41, 32, 27 with "
     "2-4 --kinds), double beyond; exact boltzmann/coupling: at most 26 (fast engine) or 20 "
     "(reference), any with a band; sampled: at most 24 (direct, dqa) or 64 (gibbs, sa)", 0, 0},
    {"embd", "LIST", "64", "model widths C", 0, 0},
    {"seeds", "N", "5", "seeds per cell", 0, 0},
    {"seed0", "N", "1", "first seed (seeds are seed0 .. seed0+N-1)", 0, 0},
    {"no-ffn-too", NULL, NULL, "run every cell with and without the FFN", 0, 0},
    {"no-ffn", NULL, NULL, "run every cell without the FFN only", 0, 0},
    SHARED_TRAIN_OPTS,
    {"out", "DIR", NULL, "grid directory (required); finished cells there are kept", 0, 0},
    {"summary-only", NULL, NULL,
     "train nothing: rewrite results and summary of the grid in DIR (which must hold its "
     "grid.json)", 0, 0},
    {"share-from", "DIR", NULL,
     "another grid whose finished runs fill this grid's cells when their config and settings "
     "are the same (copied, not rerun); may be given more than once", 0, 0},
    {"sampler", "LIST", "exact",
     "samplers of the boltzmann/coupling cells: exact,direct,dqa,gibbs,sa (sampled cells are "
     "named ...-KIND-S<shots>)", 0, 0},
    {"shots", "LIST", NULL, "shots of the sampled cells", 0, 0},
    {"extrapolate", "LIST", NULL,
     "evaluate the grid's charlm runs at each block size T of the list (e.g. "
     "512,1024,2048,4096, in order) and at their own, into DIR/extrapolation.json (kept "
     "entries are not redone; runs that cannot run at T are recorded with the reason, runs "
     "without their checkpoint skipped). With the grid's options: each run as soon as it "
     "is trained, then every finished run still missing; with --out alone: train nothing "
     "(then it takes only --extrapolate-items, --extrapolate-batch or --batch, --data, "
     "default each run's, and --threads)", 0, 0},
    {"extrapolate-items", "N", "0 (all)",
     "with --extrapolate: evenly spaced validation windows per evaluation", 0, 0},
    {"extrapolate-batch", "N", "the grid's --batch",
     "with --extrapolate: the evaluations' batch", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command ablate_cmd = {
    "ablate", "--task charlm|brackets|recall --out DIR [options]", ablate_opts};

/* ------------------------------------------------------ the grid */

/* The grid of the command line; every cell's config is checked before
 * anything is trained. */
static int parse_grid(const command *c, int argc, char **argv, lab_grid *g)
{
    char err[BA_ERR_LEN];
    memset(g, 0, sizeof *g);
    if (!get_str(c, "task"))
        return usage_error(c, "option '--task' is required");
    if (!get_str(c, "out"))
        return usage_error(c, "option '--out' is required");
    if (ba_task_parse(get_str(c, "task"), &g->task, err))
        return usage_error(c, "%s", err);
    model_opts mo;
    long seed0;
    int rc;
    if ((rc = lab_arms_from_cli(c, argc, argv, g)))
        return rc;
    /* the engine whose settings the approximate options give when the
     * grid's is exact: an arm's own (hybrid first, which also has --window) */
    ba_engine arm_engine = BA_ENGINE_AUTO;
    for (int a = 0; a < g->narms; a++)
        if (g->arms[a].form.engine >= 0 && arm_engine != BA_ENGINE_HYBRID)
            arm_engine = (ba_engine)g->arms[a].form.engine;
    if ((rc = parse_shared_opts(c, g->task, arm_engine, &mo, &g->train)) ||
        (rc = get_int_list(c, "T", 1, BA_MAX_BLOCK, g->T, LAB_MAX_LIST, &g->nT)) ||
        (rc = get_int_list(c, "embd", 1, 8192, g->C, LAB_MAX_LIST, &g->nC)) ||
        (rc = get_int(c, "seeds", 1, 1000, &g->nseeds)) ||
        (rc = get_long(c, "seed0", 0, LONG_MAX, &seed0)))
        return rc;
    g->seed0 = (uint64_t)seed0;
    g->layers = mo.layers, g->heads = mo.heads, g->engine = mo.engine, g->data = mo.data;
    g->approx = mo.approx, g->window = mo.window;
    if (is_set(c, "no-ffn") && is_set(c, "no-ffn-too"))
        return usage_error(c, "--no-ffn and --no-ffn-too exclude each other");
    g->nffn = is_set(c, "no-ffn-too") ? 2 : 1;
    g->ffn[0] = is_set(c, "no-ffn") ? 0 : 1;
    g->ffn[1] = 0;
    for (int ti = 0; ti < g->nT; ti++)
        for (int ci = 0; ci < g->nC; ci++)
            for (int a = 0; a < g->narms; a++) {
                ba_config cfg = lab_cell_config(g, a, g->T[ti], g->C[ci], 1);
                if (ba_config_validate(&cfg, err))
                    return usage_error(c, "%s", err);
            }
    /* Generated data (brackets, recall): every T's is built now, so a T it cannot serve or
     * an empty held-out set is refused before any cell trains (charlm's file is read later). */
    for (int ti = 0; g->task != BA_TASK_CHARLM && ti < g->nT; ti++) {
        ba_dataset *d;
        if (open_dataset(&g->data, g->T[ti], NULL, 0, &d, err))
            return usage_error(c, "--T %d: %s", g->T[ti], err);
        ba_dataset_free(d);
    }
    return 0;
}

/* ------------------------------------------------- runs and cells */

/* The same run: config (with the data) and every setting but the thread
 * count and the data path. The engine is compared as it resolves (auto is
 * fast without a band): grids made before auto existed recorded fast. */
static int same_run(const ba_config *ca, const ba_data_spec *da, const ba_train_settings *a,
                    const ba_config *cb, const ba_data_spec *db, const ba_train_settings *b)
{
    ba_config xa = *ca, xb = *cb;
    xa.engine = ba_config_engine(ca), xb.engine = ba_config_engine(cb);
    char *ja = ba_config_to_json(&xa, da), *jb = ba_config_to_json(&xb, db);
    int same = ja && jb && strcmp(ja, jb) == 0;
    free(ja), free(jb);
    char *sa = ba_train_settings_to_json(a, NULL), *sb = ba_train_settings_to_json(b, NULL);
    same = same && sa && sb && strcmp(sa, sb) == 0;
    free(sa), free(sb);
    return same;
}

/* The grid's state: its runs (rescanned after every change) and cells. */
typedef struct {
    const command *c;
    const char *dir;
    lab_grid g;
    lab_runs runs;
    lab_cells cells;
    const lab_xplan *x; /* --extrapolate beside training, or NULL */
} grid_state;

static int refresh(grid_state *s)
{
    lab_cells_free(&s->cells);
    lab_runs_free(&s->runs);
    int rc = lab_runs_scan(s->c, s->dir, &s->runs);
    return rc ? rc : lab_cells_match(s->c, &s->g, &s->runs, &s->cells);
}

/* Runs finished by older versions kept their result in result.json and
 * their settings only in the log: each gets the run record that holds
 * both (result.json stays, for older binaries). */
static int upgrade_legacy(grid_state *s)
{
    int n = 0;
    char err[BA_ERR_LEN];
    for (int i = 0; i < s->runs.n; i++) {
        lab_run *r = &s->runs.v[i];
        if (!r->legacy)
            continue;
        if (ba_run_write(r->dir, &r->info, err))
            return fail_lib(s->c, err, 1);
        n++;
    }
    if (n)
        fprintf(stderr, "ablate: %d run%s of an older version got run.json, the run record\n",
                n, n == 1 ? "" : "s");
    return n ? refresh(s) : 0;
}

/* The engine a cell trains with (an arm's own, or the grid's). */
static ba_engine cell_engine(const grid_state *s, const lab_cell *x)
{
    ba_config cfg = lab_cell_config(&s->g, x->arm, x->T, x->C, x->ffn);
    return cfg.engine;
}

/* A cell's directory that holds a finished run of other settings is not
 * overwritten: that would destroy a result. */
static int check_foreign(grid_state *s)
{
    for (int i = 0; i < s->cells.n; i++) {
        const lab_cell *x = &s->cells.cells[i];
        char name[256], dir[PATH_LEN], err[BA_ERR_LEN];
        lab_cell_name(&s->g, x->arm, x->T, x->C, x->ffn, x->seed, name, sizeof name);
        /* nor is a damaged record (one the scan left out): it is repaired
         * or moved by hand, never trained over */
        lab_run r;
        int st = x->run || mkpath(s->c, dir, "%s/runs/%s", s->dir, name)
                     ? BA_ERR_IO
                     : lab_run_read(dir, &r, err);
        if (st == BA_OK)
            lab_run_free(&r);
        else if (st != BA_ERR_IO)
            return usage_error(s->c, "%s: move the run away or repair its record", err);
        for (int j = 0; !x->run && j < s->runs.n; j++) {
            const lab_run *r = &s->runs.v[j];
            if (r->finished && strcmp(r->name, name) == 0)
                return usage_error(s->c,
                                   "%s/runs/%s holds a finished run that is not this grid's "
                                   "cell (%ld steps, seed %" PRIu64 ", engine %s; the grid has "
                                   "%ld steps, engine %s, and its settings): move it away or "
                                   "choose another --out",
                                   s->dir, name, r->steps, r->seed,
                                   ba_engine_name(ba_config_engine(&r->info.config)),
                                   s->g.train.steps, ba_engine_name(cell_engine(s, x)));
        }
    }
    return 0;
}

/* A finished run that fills a cell by its keys but was trained with other
 * settings (another --lr, --batch, --kinds...) is not the cell's: the
 * grid is refused, naming the setting, rather than counting it finished
 * or training over it. */
static int check_settings(grid_state *s)
{
    for (int i = 0; i < s->cells.n; i++) {
        const lab_cell *x = &s->cells.cells[i];
        lab_diff d;
        int df = x->run ? lab_run_differs(&s->g, x, x->run, &d) : 0;
        if (df < 0)
            return fail_lib(s->c, "out of memory", 1);
        if (df)
            return usage_error(s->c,
                               "%s holds a finished run of this grid's cell trained with "
                               "other settings: '%s' is %s there, %s asked now; rerun with "
                               "its settings, or choose another --out",
                               x->run->dir, d.key, d.a, d.b);
    }
    return 0;
}

/* ------------------------------------------------------------ sharing */

/* Puts a copy of run r under the cell's name. The copy is made aside and
 * renamed into place, so it appears whole; an unfinished run of that name
 * (an interrupted cell's save point) goes as a whole first. */
static int put_copy(grid_state *s, const lab_run *r, const char *name)
{
    char dst[PATH_LEN], tmp[PATH_LEN], err[BA_ERR_LEN];
    if (mkpath(s->c, dst, "%s/runs/%s", s->dir, name) ||
        mkpath(s->c, tmp, "%s/runs/.%s.%ld.copy", s->dir, name, (long)getpid()))
        return 1;
    lab_remove_run_dir(tmp);
    if (lab_copy_run(r->dir, tmp, err))
        return fail_lib(s->c, err, 1);
    lab_remove_run_dir(dst);
    if (rename(tmp, dst) != 0) {
        snprintf(err, sizeof err, "cannot rename %.200s to %.200s: %s", tmp, dst, strerror(errno));
        return fail_lib(s->c, err, 1);
    }
    return 0;
}

/* The missing cell finished run r of another grid fills: the same keys,
 * config and settings (the record decides, not the name); -1 if none. */
static int cell_of(const grid_state *s, const lab_run *r)
{
    for (int j = 0; j < s->cells.n; j++) {
        const lab_cell *x = &s->cells.cells[j];
        if (x->run || x->T != r->T || x->C != r->C || x->ffn != r->ffn || x->seed != r->seed)
            continue;
        ba_config cfg = lab_cell_config(&s->g, x->arm, x->T, x->C, x->ffn);
        cfg.vocab_size = r->info.config.vocab_size, cfg.out_size = r->info.config.out_size;
        ba_train_settings ts = s->g.train;
        ts.seed = x->seed;
        ba_data_spec spec = s->g.data;
        if (s->g.task == BA_TASK_CHARLM)
            spec = r->info.spec; /* the vocabulary is the data's */
        if (same_run(&cfg, &spec, &ts, &r->info.config, &r->info.spec, &r->info.settings))
            return j;
    }
    return -1;
}

/* Fills this grid's missing cells with the finished runs of another grid
 * that have the same config and settings: their files are copied. */
static int share_from(grid_state *s, const char *other)
{
    lab_runs rs;
    int code = lab_runs_scan(s->c, other, &rs), copied = 0;
    for (int i = 0; !code && i < rs.n; i++) {
        int j = rs.v[i].finished ? cell_of(s, &rs.v[i]) : -1;
        if (j < 0)
            continue;
        const lab_cell *x = &s->cells.cells[j];
        char name[256];
        lab_cell_name(&s->g, x->arm, x->T, x->C, x->ffn, x->seed, name, sizeof name);
        if (!(code = put_copy(s, &rs.v[i], name)))
            copied++;
    }
    lab_runs_free(&rs);
    if (!code && copied)
        fprintf(stderr, "ablate: %d finished run%s copied from %s\n", copied,
                copied == 1 ? "" : "s", other);
    return code ? code : refresh(s);
}

/* ------------------------------------------------------------ training */

/* A cell interrupted mid-run left its last save point in its directory: it
 * continues from there (bit-identical to an uninterrupted run) when it was
 * started with exactly this model and these settings; otherwise it starts
 * over. */
static int can_resume(const char *rundir, const ba_config *cfg, const ba_data_spec *spec,
                      const ba_train_settings *s)
{
    char path[PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/state.safetensors", rundir);
    ba_config sc;
    ba_data_spec sd;
    ba_train_settings ss;
    if (ba_trainer_peek(path, &sc, &sd, &ss, NULL, NULL) != BA_OK)
        return 0;
    return same_run(&sc, &sd, &ss, cfg, spec, s);
}

/* Trains one cell in its directory, whose lock the caller holds. */
static int train_cell(grid_state *s, const lab_cell *x, const ba_dataset *data,
                      const char *data_path, const char *rundir, const char *name)
{
    char err[BA_ERR_LEN], state[PATH_LEN];
    ba_config cfg = lab_cell_config(&s->g, x->arm, x->T, x->C, x->ffn);
    ba_config_set_data(&cfg, data);
    ba_data_spec spec;
    ba_dataset_spec(data, &spec);
    ba_train_settings ts = s->g.train;
    ts.seed = x->seed;
    ba_trainer *t = NULL;
    int st;
    if (mkpath(s->c, state, "%s/state.safetensors", rundir))
        return 1;
    if (can_resume(rundir, &cfg, &spec, &ts)) {
        fprintf(stderr, "%s continues from its last save point\n", name);
        st = ba_trainer_restore(&t, state, data, data_path, err);
    } else {
        st = ba_trainer_init(&t, &cfg, data, data_path, &ts, err);
    }
    if (st)
        return fail_lib(s->c, err, input_status(st));
    ba_train_outcome res;
    int code = run_trainer(s->c, t, rundir, 0, &res);
    ba_trainer_free(t);
    return code;
}

/* Trains every cell still missing. Each is trained under its run
 * directory's lock (the one `train` takes), re-checked once held: two
 * ablate processes on one grid share its cells. */
static int train_missing(grid_state *s, const char *data_path)
{
    char err[BA_ERR_LEN];
    fprintf(stderr, "ablate %s: %d runs in the grid, %d already finished in %s\n",
            ba_task_name(s->g.task), s->cells.n, lab_cells_finished(&s->cells), s->dir);
    ba_dataset *data = NULL;
    int data_T = -1, ran = 0, code = 0;
    double t0 = now_s();
    for (int i = 0; i < s->cells.n && !code; i++) {
        lab_cell x = s->cells.cells[i];
        if (x.run)
            continue;
        if (data_T != x.T) { /* datasets depend on T only */
            ba_dataset_free(data);
            data = NULL;
            int st = open_dataset(&s->g.data, x.T, data_path, 0, &data, err);
            if (st) {
                code = fail_lib(s->c, err, input_status(st));
                break;
            }
            data_T = x.T;
        }
        char name[256], rundir[PATH_LEN];
        lab_cell_name(&s->g, x.arm, x.T, x.C, x.ffn, x.seed, name, sizeof name);
        if (mkpath(s->c, rundir, "%s/runs/%s", s->dir, name)) { /* printed */
            code = 1;
            break;
        }
        if (make_dirs(rundir, err)) {
            code = fail_lib(s->c, err, 1);
            break;
        }
        dir_lock lock;
        int lk = take_lock(rundir, &lock, err);
        if (lk == 2) {
            fprintf(stderr, "%s is being trained by another process: skipped\n", name);
            continue;
        }
        if (lk || (code = refresh(s))) {
            code = code ? code : fail_lib(s->c, err, 1);
            release_lock(&lock);
            break;
        }
        if (s->cells.cells[i].run) { /* finished by another process meanwhile */
            release_lock(&lock);
            continue;
        }
        code = train_cell(s, &x, data, data_path, rundir, name);
        /* the record is written before the lock goes: a process that
         * takes the lock next finds the cell finished */
        release_lock(&lock);
        if (code || (code = refresh(s)) || (code = lab_write_outputs(s->c, s->dir, &s->cells)))
            break;
        ran++;
        const lab_cell *now = &s->cells.cells[i];
        if (!now->run)
            continue;
        int ahead = 0; /* what this process has left */
        for (int j = i + 1; j < s->cells.n; j++)
            ahead += !s->cells.cells[j].run;
        char eta[32], elb[32];
        double el = now_s() - t0;
        fmt_duration(ran > 0 ? el / ran * ahead : NAN, eta, sizeof eta);
        fmt_duration(el, elb, sizeof elb);
        /* every rank's cells reach the terminal, marked with the rank */
        char who[24] = "";
        if (mpi_size() > 1)
            snprintf(who, sizeof who, "[rank %d] ", mpi_rank());
        fprintf(mpi_err(), "%s[%d/%d] %s: %s %.4g  (%s elapsed, ETA %s)\n", who,
                lab_cells_finished(&s->cells), s->cells.n, name,
                s->g.task == BA_TASK_CHARLM ? "val_ppl" : "accuracy", now->run->value, elb, eta);
        /* evaluated while its checkpoint is surely at hand: a study spans
         * machines, and checkpoints are not committed */
        if (s->x)
            code = lab_extrapolate_list(s->c, s->dir, s->x, data_path);
    }
    ba_dataset_free(data);
    /* then every finished run still missing, trained here or not. The
     * passes above skip when the other chain of a study holds the grid's
     * lock; this one waits for it, since the holder's pass may have read
     * the runs before this process's last one finished, and a checkpoint
     * not evaluated now may be gone with the machine. */
    if (!code && s->x) {
        lab_xplan last = *s->x;
        last.wait = 1;
        code = lab_extrapolate_list(s->c, s->dir, &last, data_path);
    }
    return code;
}

/* --extrapolate with --out alone reads the grid from DIR/grid.json and
 * trains nothing, so grid options would be ignored; they are refused
 * instead. */
static int only_opts(const command *c, const char *const *apply, size_t n)
{
    for (const opt *o = c->opts; o->name; o++) {
        int ok = !o->set;
        for (size_t i = 0; !ok && i < n; i++)
            ok = strcmp(o->name, apply[i]) == 0;
        if (!ok)
            return usage_error(c, "--extrapolate reads the grid from DIR/grid.json and trains "
                                  "nothing: --%s does not apply%s", o->name,
                               strcmp(o->name, "engine") == 0
                                   ? " (each run keeps its own engine)"
                                   : " (to train the grid and evaluate each run as it "
                                     "finishes, give every grid option, --task included)");
    }
    return 0;
}

/* ablate --extrapolate with --out alone (extrapolate.c). */
static int extrapolate_mode(const command *c)
{
    static const char *const apply[] = {"out",   "extrapolate", "extrapolate-items",
                                        "batch", "extrapolate-batch", "data", "threads"};
    int rc = only_opts(c, apply, sizeof apply / sizeof apply[0]);
    if (rc)
        return rc;
    const char *dir = get_str(c, "out");
    lab_xplan x;
    if (!dir || !*dir)
        return usage_error(c, "option '--out' is required");
    if (is_set(c, "batch") && is_set(c, "extrapolate-batch"))
        return usage_error(c, "--batch and --extrapolate-batch say the same with --out alone: "
                              "give one");
    if ((rc = lab_extrapolate_opts(c, &x)) ||
        (is_set(c, "batch") && (rc = get_int(c, "batch", 1, 1 << 20, &x.B))) ||
        (rc = apply_threads(c)))
        return rc;
    return lab_extrapolate_list(c, dir, &x, is_set(c, "data") ? get_str(c, "data") : NULL);
}

/* Options given to --summary-only beside --out must be every option the
 * grid was made with (or fewer seeds): compared with DIR's grid. */
static int same_grid(const command *c, int argc, char **argv, const lab_grid *g,
                     const char *dir)
{
    static const char *const skip[] = {"threads", NULL};
    if (!is_set(c, "task"))
        return usage_error(c, "--summary-only reads the grid from %s/grid.json: give --out "
                              "alone, or every option the grid was made with",
                           dir);
    lab_grid opt;
    int rc = parse_grid(c, argc, argv, &opt);
    if (rc)
        return rc;
    /* trained on to more seeds (reproduce.sh's more-seeds), the same grid */
    if (opt.nseeds < g->nseeds && opt.seed0 == g->seed0)
        opt.nseeds = g->nseeds;
    char *ja = lab_grid_json(g), *jb = lab_grid_json(&opt);
    lab_diff d;
    int df = ja && jb ? lab_json_diff(ja, jb, skip, &d) : -1;
    cJSON_free(ja), cJSON_free(jb);
    if (df < 0)
        return fail_lib(c, "out of memory", 1);
    if (df)
        return usage_error(c, "--summary-only: the options describe another grid than "
                              "%s/grid.json ('%s' is %s there, %s by the options): give --out "
                              "alone to summarise the grid as it was made",
                           dir, d.key, d.a, d.b);
    return 0;
}

/* ablate --summary-only: the grid of DIR/grid.json summarised from its
 * runs' records. Nothing but the summary's files (results.csv,
 * results.json, summary.md, effects.csv) is written: not grid.json, not
 * the runs (older runs are read as they are); --share-from copies nothing
 * into a summary, and --data and --threads do not change it. */
static int summary_mode(const command *c, int argc, char **argv)
{
    grid_state s;
    memset(&s, 0, sizeof s);
    s.c = c;
    s.dir = get_str(c, "out");
    char path[PATH_LEN];
    struct stat gs;
    if (!s.dir || !*s.dir)
        return usage_error(c, "option '--out' is required");
    if (mkpath(c, path, "%s/grid.json", s.dir))
        return EXIT_USAGE;
    if (lstat(path, &gs) != 0) /* a grid never started: nothing is made for it */
        return usage_error(c, "--summary-only: %s holds no grid (no grid.json): nothing to "
                              "summarise",
                           s.dir);
    int given = 0, code;
    for (const opt *o = c->opts; o->name; o++)
        given |= o->set && strcmp(o->name, "out") != 0 && strcmp(o->name, "summary-only") != 0 &&
                 strcmp(o->name, "threads") != 0 && strcmp(o->name, "share-from") != 0 &&
                 strcmp(o->name, "data") != 0;
    if ((code = lab_grid_read(c, s.dir, &s.g)) ||
        (given && (code = same_grid(c, argc, argv, &s.g, s.dir))))
        return code;
    if (!(code = refresh(&s)))
        code = lab_write_outputs(c, s.dir, &s.cells);
    if (code == 0)
        printf("results: %s/results.csv, %s/results.json, %s/summary.md\n", s.dir, s.dir, s.dir);
    lab_cells_free(&s.cells);
    lab_runs_free(&s.runs);
    return code;
}

int cmd_ablate(int argc, char **argv)
{
    const command *c = &ablate_cmd;
    sampler_opts_append(ablate_opts, (int)(sizeof ablate_opts / sizeof ablate_opts[0]), NULL);
    int rc = parse_args(c, argc, argv, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    /* under MPI only training is shared: the rest is one process's work,
     * and several writing the same files would race */
    if (mpi_size() > 1) {
        static const char *const single[] = {"extrapolate", "summary-only"};
        for (size_t i = 0; i < sizeof single / sizeof single[0]; i++)
            if (is_set(c, single[i]))
                return usage_error(c, "--%s runs on one process: run it without mpirun",
                                   single[i]);
    }
    if (is_set(c, "extrapolate") && !is_set(c, "task"))
        return extrapolate_mode(c);
    if (!is_set(c, "extrapolate") &&
        (is_set(c, "extrapolate-items") || is_set(c, "extrapolate-batch")))
        return usage_error(c, "--%s needs --extrapolate",
                           is_set(c, "extrapolate-items") ? "extrapolate-items"
                                                          : "extrapolate-batch");
    if (is_set(c, "summary-only") && is_set(c, "extrapolate"))
        return usage_error(c, "--summary-only trains and evaluates nothing: --extrapolate does "
                              "not apply");
    if (is_set(c, "summary-only"))
        return summary_mode(c, argc, argv);
    grid_state s;
    memset(&s, 0, sizeof s);
    s.c = c;
    s.dir = get_str(c, "out");
    const char *share[MAX_SHARE];
    int nshare = get_repeated(c, argc, argv, "share-from", share, MAX_SHARE);
    if (nshare < 0)
        return -nshare;
    if ((rc = parse_grid(c, argc, argv, &s.g)))
        return rc;
    lab_xplan xp;
    if (is_set(c, "extrapolate")) {
        if (s.g.task != BA_TASK_CHARLM)
            return usage_error(c, "--extrapolate evaluates language models (charlm), not a %s "
                                  "grid", ba_task_name(s.g.task));
        if ((rc = lab_extrapolate_opts(c, &xp)))
            return rc;
        s.x = &xp;
    }
    char path[PATH_LEN], err[BA_ERR_LEN];
    /* grid.json is replaced below: one that is not a file is refused */
    struct stat gs;
    if (mkpath(c, path, "%s/grid.json", s.dir))
        return EXIT_USAGE;
    if (lstat(path, &gs) == 0 && (stat(path, &gs) != 0 || !S_ISREG(gs.st_mode)))
        return usage_error(c, "%s is not a regular file: not replacing it", path);
    /* the grid's directory: one to be, or one there (not a link to
     * nothing, a loop of links, or a path through a file) */
    if (stat(s.dir, &gs) != 0 ? errno != ENOENT || lstat(s.dir, &gs) == 0
                              : !S_ISDIR(gs.st_mode))
        return usage_error(c, "--out %s: not a directory to write into", s.dir);
    if (mkpath(c, path, "%s/runs", s.dir))
        return EXIT_USAGE;
    if (make_dirs(path, err))
        return fail_lib(c, err, 1);
    const char *data_path = is_set(c, "data") ? get_str(c, "data") : default_data_path();
    /* grid.json is written only once the runs there are known to fit the
     * grid: a refused command leaves the grid's definition as it was */
    /* Under MPI rank 0 sets the grid up, then every rank takes cells (the
     * lock of each cell's directory shares them out as they come free),
     * and once all are done rank 0 writes the results: the same cells,
     * seeds and files as one process. */
    int lead = mpi_rank() == 0, code = 0;
    if (mpi_size() > 1) { /* every rank's grid against rank 0's, before any work */
        char *gj = lab_grid_json(&s.g);
        code = mpi_agree_grid(gj ? 0 : fail_lib(c, "out of memory", 1), s.dir, data_path, gj);
        cJSON_free(gj);
        if (code)
            return code;
    }
    if (lead) {
        code = refresh(&s);
        if (!code)
            code = upgrade_legacy(&s);
        if (!code)
            code = check_foreign(&s);
        if (!code)
            code = check_settings(&s);
        if (!code)
            code = lab_grid_write(c, s.dir, &s.g);
        for (int i = 0; i < nshare && !code; i++)
            code = share_from(&s, share[i]);
    }
    if (mpi_size() > 1 && !(code = mpi_agree(code)) && !lead)
        code = refresh(&s);
    if (!code)
        code = train_missing(&s, data_path);
    if (mpi_size() > 1)
        code = mpi_agree(code);
    if (!code && lead && !(code = refresh(&s)))
        code = lab_write_outputs(c, s.dir, &s.cells);
    if (code == 0 && lead)
        printf("results: %s/results.csv, %s/results.json, %s/summary.md\n", s.dir, s.dir, s.dir);
    lab_cells_free(&s.cells);
    lab_runs_free(&s.runs);
    return code;
}
