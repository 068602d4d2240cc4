/* The study's conditional steps, decided from the run records by the
 * claims of the presets file's verdicts (report_verdict.c reads them):
 *
 *   boltzattn-lab more-seeds OUT/GRID   whether the grid trains on to more
 *       seeds: a claim it answers, read on its first N seeds alone, is
 *       unresolved (its 95 % interval holds 0);
 *   boltzattn-lab settled OUT/GRID      whether the next rung of the budget
 *       ladder (twice the steps) is trained: a claim read at the grid,
 *       against the ladder's rung below, is not settled.
 *
 * Both print one line (the decision's word, a colon, why) and exit 0;
 * lab/reproduce.sh acts on the word (the plan's more-seeds and
 * if-unsettled steps, plan.c). Each reads records that no later step
 * changes, so a rerun decides the same. */
#include "report.h"

#include <stdlib.h>
#include <string.h>

static opt more_opts[] = {
    {"preset", "NAME", NULL, "the preset whose claims read the grid (their grids: NAME/GRID)", 0,
     0},
    {"base-seeds", "N", NULL,
     "the grid's seeds before any were added: the claims are read on its first N seeds", 0, 0},
    {"presets", "FILE", "$BA_PRESETS, else the source tree's lab/presets.json",
     "the presets file (its verdicts)", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command more_cmd = {
    "more-seeds",
    "OUT/GRID --preset NAME --base-seeds N [--presets FILE]\n\n"
    "Whether the grid in OUT/GRID takes more seeds: every claim of the presets file's\n"
    "verdicts whose grid or ladder is NAME/GRID is read at this grid alone, on its first N\n"
    "seeds. Prints 'extend: ...' when some claim's 95 % interval holds 0 (the effect under\n"
    "its interval), else 'keep: ...'. Trains nothing; lab/reproduce.sh trains the grid on\n"
    "to its \"seeds_if_unresolved\" seeds on 'extend'.",
    more_opts};

static opt settled_opts[] = {
    {"preset", "NAME", NULL, "the preset whose claims read the grid (their grids: NAME/GRID)", 0,
     0},
    {"presets", "FILE", "$BA_PRESETS, else the source tree's lab/presets.json",
     "the presets file (its verdicts)", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command settled_cmd = {
    "settled",
    "OUT/GRID --preset NAME [--presets FILE]\n\n"
    "Whether the claims that read the grid in OUT/GRID settled there: every claim of the\n"
    "presets file's verdicts whose grid or ladder is NAME/GRID (but those evaluated at a\n"
    "longer T) is read at this grid on all its seeds, against its ladder's next smaller\n"
    "rung. Prints 'unsettled: ...' when one moved by more than its interval's half-width\n"
    "per doubling of the budget, 'wait: ...' when the grid is not finished, else\n"
    "'settled: ...'. Trains nothing; lab/reproduce.sh trains the next rung on 'unsettled'.",
    settled_opts};

/* DIR = [ROOT/]OUT/GRID split in place in path (PATH_LEN) into at's out
 * and grid and *root; the grid's record into g. 0, or an exit code after
 * printing. */
static int split_dir(const command *c, const char *dir, char *path, const char **root, rep_at *at,
                     lab_grid *g)
{
    if (!dir || !*dir)
        return usage_error(c, "the grid directory OUT/GRID is required");
    if (!is_set(c, "preset") || !*get_str(c, "preset"))
        return usage_error(c, "option '--preset' is required");
    if (snprintf(path, PATH_LEN, "%s", dir) >= PATH_LEN)
        return usage_error(c, "OUT/GRID is too long");
    for (size_t l = strlen(path); l > 1 && path[l - 1] == '/'; l--)
        path[l - 1] = '\0';
    char *gr = strrchr(path, '/');
    if (!gr || gr == path || !gr[1])
        return usage_error(c, "the grid must be given as OUT/GRID (a preset's output directory, "
                              "then the grid's), not '%s'", dir);
    *gr++ = '\0';
    char *out = strrchr(path, '/');
    *root = out ? path : ".";
    if (out)
        *out++ = '\0';
    else
        out = path;
    at->preset = get_str(c, "preset"), at->out = out, at->grid = gr;
    char full[PATH_LEN];
    snprintf(full, sizeof full, "%s/%s/%s", *root, out, gr);
    return lab_grid_read(c, full, g);
}

/* The rows of at under root, then decide(rows, arg, line) printed. */
static int run_decision(const command *c, const char *root, const rep_at *at, long arg,
                        void (*decide)(const rep_vrows *, const rep_at *, long, char *, size_t))
{
    lab_presets ps;
    int rc = lab_presets_load(c, is_set(c, "presets") ? get_str(c, "presets") : NULL, &ps);
    if (rc)
        return rc;
    rep_vrows rs;
    rc = rep_verdict_rows_at(c, root, &ps, at, &rs);
    if (!rc) {
        char line[1024];
        decide(&rs, at, arg, line, sizeof line);
        if (printf("%s\n", line) < 0 || fflush(stdout) != 0)
            rc = 1;
    }
    free(rs.v);
    lab_presets_free(&ps);
    return rc;
}

/* more-seeds: extend when a claim read on the base seeds is open. */
static void decide_more(const rep_vrows *rs, const rep_at *at, long base, char *buf, size_t n)
{
    const rep_vrow *open = NULL, *short_of = NULL;
    for (int i = 0; i < rs->n; i++) {
        const rep_vrow *r = &rs->v[i];
        if (r->n < base)
            short_of = short_of ? short_of : r;
        else if (!open && !(r->lo > 0.0 || r->hi < 0.0))
            open = r;
    }
    if (open)
        snprintf(buf, n, "extend: %s (%s) is %s on %d seeds: its interval holds 0", open->claim,
                 open->cell, open->ours, open->n);
    else if (short_of)
        snprintf(buf, n, "keep: %s (%s) has %d of its %ld seeds paired: the grid is not finished",
                 short_of->claim, short_of->cell, short_of->n, base);
    else if (rs->n == 0)
        snprintf(buf, n, "keep: no claim reads %.200s/%.200s", at->preset, at->grid);
    else
        snprintf(buf, n, "keep: the %d claim(s) reading %.200s/%.200s are resolved on %ld seeds",
                 rs->n, at->preset, at->grid, base);
}

int cmd_more_seeds(int argc, char **argv)
{
    const command *c = &more_cmd;
    const char *dir = NULL, *root;
    int rc = parse_args(c, argc, argv, &dir, 1, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    long base;
    char path[PATH_LEN];
    rep_at at = {0};
    lab_grid g;
    if ((rc = split_dir(c, dir, path, &root, &at, &g)) ||
        (rc = get_long(c, "base-seeds", 1, 1000, &base)))
        return rc;
    at.seed_end = g.seed0 + (uint64_t)base;
    return run_decision(c, root, &at, base, decide_more);
}

/* settled: the next rung when a claim read at the grid did not settle;
 * wait while its cell has fewer pairs than the grid's seeds. */
static void decide_settled(const rep_vrows *rs, const rep_at *at, long seeds, char *buf,
                           size_t n)
{
    for (int i = 0; i < rs->n; i++) {
        const rep_vrow *r = &rs->v[i];
        if (r->n < seeds) {
            snprintf(buf, n, "wait: %s (%s) has %d of its %ld seeds paired at %.200s/%.200s: the "
                     "grid is not finished", r->claim, r->cell, r->n, seeds, at->out, at->grid);
            return;
        }
    }
    for (int i = 0; i < rs->n; i++)
        if (strncmp(rs->v[i].settled, "settled", 7) != 0) {
            snprintf(buf, n, "unsettled: %s (%s) is %s: %s", rs->v[i].claim, rs->v[i].cell,
                     rs->v[i].ours, rs->v[i].settled);
            return;
        }
    if (rs->n == 0)
        snprintf(buf, n, "settled: no claim reads %.200s/%.200s", at->preset, at->grid);
    else
        snprintf(buf, n, "settled: the %d claim(s) reading %.200s/%.200s", rs->n, at->preset,
                 at->grid);
}

int cmd_settled(int argc, char **argv)
{
    const command *c = &settled_cmd;
    const char *dir = NULL, *root;
    int rc = parse_args(c, argc, argv, &dir, 1, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    char path[PATH_LEN];
    rep_at at = {0};
    lab_grid g;
    if ((rc = split_dir(c, dir, path, &root, &at, &g)))
        return rc;
    at.ladder = 1, at.no_extrapolate = 1;
    return run_decision(c, root, &at, g.nseeds, decide_settled);
}
