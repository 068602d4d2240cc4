/* What the report's parts share (report.c, report_converged.c,
 * report_long.c, report_samplers.c call it; it calls none of them): the
 * grids of an output directory, the date and machine lines, a grid's
 * summary text, figure links and its verdict rows against softmax. */
#include "report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double rep_num(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* --------------------------------------------------------------- grids */

/* The shell lists OUT/<name>/ sorted with the trailing slash, so in the C
 * locale "charlm-T12/" comes before "charlm/". */
static int dir_cmp(const void *pa, const void *pb)
{
    const char *a = *(const char *const *)pa, *b = *(const char *const *)pb;
    size_t i = 0;
    while (a[i] && a[i] == b[i])
        i++;
    return (a[i] ? (unsigned char)a[i] : '/') - (b[i] ? (unsigned char)b[i] : '/');
}

/* dir/name + tail is a regular file. */
static int is_file(const char *dir, const char *name, const char *tail)
{
    char path[PATH_LEN];
    struct stat sb;
    return snprintf(path, sizeof path, "%s/%s%s", dir, name, tail) < (int)sizeof path &&
           stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* A subdirectory with an entry grid.json of any kind: one that is not a
 * file (a FIFO, a directory, a loop) is refused by lab_grid_read, naming
 * it, never skipped. */
static int has_grid(const char *dir, const char *name)
{
    char path[PATH_LEN];
    struct stat sb;
    return snprintf(path, sizeof path, "%s/%s/grid.json", dir, name) < (int)sizeof path &&
           lstat(path, &sb) == 0;
}

static int is_png(const char *dir, const char *name)
{
    size_t l = strlen(name);
    return l > 4 && strcmp(name + l - 4, ".png") == 0 && is_file(dir, name, "");
}

int rep_pngs(const char *dir, char ***names, int *n)
{
    return lab_list_dir(dir, is_png, NULL, names, n);
}

int rep_grids_load(const command *c, const char *out, const lab_refs *refs, rep_grids *gs)
{
    gs->v = NULL, gs->n = 0;
    struct stat sb;
    if (stat(out, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s %s: %s is not a directory\n", prog, c->cmd, out);
        return 2;
    }
    char **names;
    int n, code = 0;
    if (lab_list_dir(out, has_grid, dir_cmp, &names, &n) ||
        (n && !(gs->v = calloc((size_t)n, sizeof *gs->v))))
        code = fail_lib(c, "out of memory", 1);
    else if (n == 0)
        code = usage_error(c, "%s holds no grid (no subdirectory with a grid.json of "
                              "'boltzattn ablate')", out);
    for (int i = 0; i < n && !code; i++) {
        rep_grid *x = &gs->v[i];
        snprintf(x->name, sizeof x->name, "%s", names[i]);
        if (strlen(names[i]) >= sizeof x->name || mkpath(c, x->dir, "%s/%s", out, names[i]))
            code = usage_error(c, "%s/%s: name too long", out, names[i]);
        if (!code && !(code = lab_grid_read(c, x->dir, &x->g)) &&
            !(code = lab_runs_scan(c, x->dir, &x->rs)))
            code = lab_cells_match(c, &x->g, &x->rs, &x->cs);
        x->cs.refs = refs;
        gs->n = i + 1; /* freed from here on */
    }
    lab_names_free(names, n);
    if (code)
        rep_grids_free(gs);
    return code;
}

void rep_grids_free(rep_grids *gs)
{
    for (int i = 0; i < gs->n; i++) {
        lab_cells_free(&gs->v[i].cs);
        lab_runs_free(&gs->v[i].rs);
    }
    free(gs->v);
    gs->v = NULL, gs->n = 0;
}

const rep_grid *rep_grid_named(const rep_grids *gs, const char *name)
{
    for (int i = 0; i < gs->n; i++)
        if (strcmp(gs->v[i].name, name) == 0)
            return &gs->v[i];
    return NULL;
}

/* ------------------------------------------------------------- helpers */

void rep_date(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    if (t == (time_t)-1 || !gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%d", &tm))
        snprintf(buf, n, "?");
}

int rep_summary_body(const lab_cells *cs, int skip, const char *heading, FILE *f)
{
    out_file o = {0};
    o.f = open_memstream(&o.buf, &o.len);
    if (!o.f)
        return 1;
    int bad = lab_summary_md(cs, o.f) != 0;
    if ((fclose(o.f) != 0) | bad) {
        free(o.buf);
        return 1;
    }
    int line = 0;
    for (const char *p = o.buf; *p; line++) {
        size_t l = strcspn(p, "\n");
        if (line >= skip) {
            if (strncmp(p, "## ", 3) == 0)
                fprintf(f, "%s %.*s\n", heading, (int)(l - 3), p + 3);
            else
                fprintf(f, "%.*s\n", (int)l, p);
        }
        p += l + (p[l] == '\n');
    }
    free(o.buf);
    return 0;
}

/* The same run in two grids (copied by ablate --share-from): the same
 * records, result and training time. */
int rep_same_run(const lab_run *a, const lab_run *b)
{
    return a->value == b->value && a->wall_s == b->wall_s && a->info.step == b->info.step &&
           a->info.config_json && b->info.config_json && a->info.train_json &&
           b->info.train_json && strcmp(a->info.config_json, b->info.config_json) == 0 &&
           strcmp(a->info.train_json, b->info.train_json) == 0;
}

/* The machines sentence: where the report was made and where its
 * distinct finished runs trained, as their records say (a run resumed on
 * another machine counts for each). 0, or 1 out of memory (nothing written). */
int rep_machines(const rep_grids *gs, FILE *f)
{
    char here[256];
    machine_desc(here, sizeof here);
    char **names = NULL;
    int n = 0, *count = NULL, unnamed = 0, bad = 0, total = 0, nd = 0;
    for (int i = 0; i < gs->n; i++)
        total += gs->v[i].cs.n;
    const lab_run **seen = malloc(sizeof *seen * (size_t)(total + 1));
    bad = !seen;
    for (int i = 0; i < gs->n && !bad; i++)
        for (int j = 0; j < gs->v[i].cs.n && !bad; j++) {
            const lab_run *run = gs->v[i].cs.cells[j].run;
            int dup = !run;
            for (int k = 0; k < nd && !dup; k++)
                dup = rep_same_run(seen[k], run);
            if (dup)
                continue;
            seen[nd++] = run;
            const ba_run_info *r = &run->info;
            unnamed += r->n_machines == 0;
            for (int k = 0; k < r->n_machines && !bad; k++) {
                int at = 0;
                while (at < n && strcmp(names[at], r->machines[k]) != 0)
                    at++;
                if (at == n) {
                    char **nv = realloc(names, sizeof *nv * (size_t)(n + 1));
                    int *nc = nv ? realloc(count, sizeof *nc * (size_t)(n + 1)) : NULL;
                    names = nv ? nv : names, count = nc ? nc : count;
                    if ((bad = !nc))
                        break;
                    names[n] = r->machines[k], count[n++] = 0;
                }
                count[at]++;
            }
        }
    if (!bad) {
        fprintf(f, "Machines: this report was made on %s, with boltzattn %s", here, BA_VERSION);
        for (int k = 0; k < n; k++)
            fprintf(f, "%s%s (%d run%s)", k ? ", " : "; its runs trained on ", names[k], count[k],
                    count[k] == 1 ? "" : "s");
        if (unnamed)
            fprintf(f, "; %d run record%s name%s no machine (written by versions before "
                       "2026-12-03)", unnamed, unnamed == 1 ? "" : "s", unnamed == 1 ? "s" : "");
        fprintf(f, ".\n");
    }
    free(names);
    free(count);
    free(seen);
    return bad;
}

/* ------------------------------------------------------------ verdicts */

/* Every effect of a grid against softmax, with a verdict read off its
 * confidence interval; prefix (may be "") opens each row. */
int rep_has_int(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* Whether a grid of over holds the cell (task, T, C, FFN). */
static int covered(const rep_grids *over, ba_task task, int T, int C, int ffn)
{
    for (int i = 0; over && i < over->n; i++) {
        const lab_grid *g = &over->v[i].g;
        if (g->task == task && rep_has_int(g->T, g->nT, T) && rep_has_int(g->C, g->nC, C) &&
            rep_has_int(g->ffn, g->nffn, ffn))
            return 1;
    }
    return 0;
}

int rep_interval(const ba_running *s, double *e, double *lo, double *hi)
{
    *e = s->n ? s->mean : NAN, *lo = *hi = NAN;
    if (s->n >= 2) {
        double h = ba_t975((int)s->n - 1) * ba_running_sd(s) / sqrt((double)s->n);
        *lo = s->mean - h, *hi = s->mean + h;
    }
    return (int)s->n;
}

void rep_fmt_effect(ba_task t, double e, double lo, double hi, char *buf, size_t cap)
{
    const char *u = t == BA_TASK_CHARLM ? " %" : "";
    if (isnan(lo))
        snprintf(buf, cap, "%+.2f%s (one pair)", e, u);
    else
        snprintf(buf, cap, "%+.2f%s [%+.2f, %+.2f]", e, u, lo, hi);
}

void rep_effect_text(ba_task task, const lab_effect_row *r, char *eff, size_t n,
                     const char **verdict, const char **paper)
{
    int pct = task == BA_TASK_CHARLM;
    snprintf(eff, n, "missing");
    *verdict = "not measured", *paper = "";
    if (!isnan(r->effect))
        rep_fmt_effect(task, r->effect, r->lo, r->hi, eff, n);
    if (!isnan(r->effect) && isnan(r->lo)) {
        *verdict = "too few seeds";
    } else if (!isnan(r->effect)) {
        int better = pct ? -1 : 1; /* lower perplexity is better */
        *verdict = r->lo > 0 || r->hi < 0 ? (r->effect * better > 0 ? "better than softmax"
                                                                     : "worse than softmax")
                                          : "no resolved difference";
        double pv = r->paper ? strtod(r->paper, NULL) : 0; /* "-1.08 %" is -1.08 */
        if (r->paper)
            *paper = pv >= r->lo && pv <= r->hi ? "; the paper's value is inside the interval"
                                                : "; the paper's value is outside the interval";
    }
}

int rep_verdicts(const rep_grid *x, const char *prefix, const char *note,
                 const rep_grids *over, FILE *f)
{
    lab_effect_row *rows;
    int n;
    if (lab_effect_rows(&x->cs, &rows, &n))
        return 1;
    const lab_grid *g = &x->g;
    for (int i = 0; i < n; i++) {
        const lab_effect_row *r = &rows[i];
        const lab_arm *a = &g->arms[r->arm];
        if (r->arm == lab_softmax_arm(g)) /* the reference itself */
            continue;
        if (covered(over, g->task, r->T, r->C, r->ffn))
            continue;
        char eff[128], label[96];
        const char *verdict, *paper;
        rep_effect_text(g->task, r, eff, sizeof eff, &verdict, &paper);
        lab_arm_label(a, label, sizeof label);
        fprintf(f, "%s| %s | %d | %d | %s | %s | %d/%d | %s | %s | %s%s%s |\n", prefix,
                ba_task_name(g->task), r->T, r->C, r->ffn ? "yes" : "no", label, r->pairs, r->seeds,
                eff, r->paper ? r->paper : "", verdict, paper, note ? note : "");
    }
    free(rows);
    return 0;
}

/* The links to the figures of dir (sub: "" or "couplings/" under the
 * grid), as prefix + the path relative to OUT. */
int rep_png_links(const rep_grid *x, const char *sub, const char *prefix, FILE *f)
{
    char dir[PATH_LEN + 16], **names;
    int n;
    snprintf(dir, sizeof dir, "%s/%s", x->dir, sub);
    if (rep_pngs(dir, &names, &n))
        return 1;
    for (int i = 0; i < n; i++)
        fprintf(f, "![%s](%s%s/%s%s)\n", names[i], prefix, x->name, sub, names[i]);
    lab_names_free(names, n);
    return 0;
}

int rep_cell_run(const rep_grid *x, const lab_cell *c, int a, int ffn)
{
    return c->run && c->arm == a && c->T == x->g.T[0] && c->C == x->g.C[0] && c->ffn == ffn;
}

void rep_png_link(const rep_grid *x, const char *png, const char *alt, const char *prefix,
                  FILE *f)
{
    if (is_file(x->dir, png, ""))
        fprintf(f, "![%s](%s%s/%s)\n\n", alt, prefix, x->name, png);
}

/* ------------------------------------------------------- extrapolation */

void rep_extrapolation_read(const command *c, const rep_grid *x, lab_xentries *xe)
{
    char err[BA_ERR_LEN];
    if (lab_xentries_read(x->dir, xe, err))
        fprintf(stderr, "%s %s: warning: %s/extrapolation.json: %s; left out\n", prog, c->cmd,
                x->dir, err);
}

void rep_generated_by(const char *out, const char *preset, const rep_grids *gs, FILE *f)
{
    char date[32];
    rep_date(date, sizeof date);
    fprintf(f, "Generated by `boltzattn-lab report` from the files under `%s` on %s; nothing "
               "below is typed by hand. The grids were run by `make reproduce PRESET=%s` "
               "(`lab/reproduce.sh %s`), which resumes an interrupted preset.\n",
            out, date, preset, preset);
    if (rep_machines(gs, f) == 0)
        fputc('\n', f);
}
