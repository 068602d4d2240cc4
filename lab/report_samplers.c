/* boltzattn-lab report OUT --samplers-doc DOC: the section "Training with
 * sampled statistics" of docs/samplers.md, generated from the grids of
 * the samplers preset (their run records and the runs' quality records):
 * the settings the runs recorded, each grid's summary, every sampled arm
 * against exact boltzmann training and the samplers' quality along
 * training. Nothing in it is typed by hand. */
#include "report.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char samplers_head[] = "## Training with sampled statistics";

/* ------------------------------------------------------------ settings */

/* A kind with parameters of its own, beyond the shots and beta_assumed
 * every sampler has (direct has none). */
static int kind_has_params(ba_sampler_kind k)
{
    int np;
    const ba_sampler_param *p = ba_sampler_params(&np);
    for (int i = 0; i < np; i++)
        if (k != BA_SAMPLER_EXACT && p[i].kind == k)
            return 1;
    return 0;
}

/* The first run of the grid (in directory order) that fills a cell and,
 * when kind is not exact, was sampled with kind. */
static const lab_run *first_run(const rep_grid *x, int any, ba_sampler_kind kind)
{
    for (int i = 0; i < x->rs.n; i++) {
        const lab_run *r = &x->rs.v[i];
        if (!any && r->sampler != kind)
            continue;
        for (int j = 0; j < x->cs.n; j++)
            if (x->cs.cells[j].run == r)
                return r;
    }
    return NULL;
}

/* The settings, read back from the records of one run of each sampler
 * kind with parameters, and the training settings (so they cannot drift
 * from what ran). */
static int settings(const rep_grid *x, FILE *f)
{
    const lab_grid *g = &x->g;
    for (int a = 0; a < g->narms; a++) {
        ba_sampler_kind k = g->arms[a].sampler.kind;
        int seen = 0;
        for (int b = 0; b < a; b++)
            seen |= g->arms[b].sampler.kind == k;
        const lab_run *r = seen || !kind_has_params(k) ? NULL : first_run(x, 0, k);
        char *js = r ? lab_run_sampler_json(r) : NULL;
        if (r && !js)
            return 1;
        if (js)
            fprintf(f, "- %s: `\"sampler\":%s`\n", ba_sampler_name(k), js);
        free(js);
    }
    const lab_run *r = first_run(x, 1, BA_SAMPLER_EXACT);
    if (r && r->info.train_json)
        fprintf(f, "- training: `\"train\":%s`\n", r->info.train_json);
    return 0;
}

/* ------------------------------------------------------ against exact */

/* The arm of exact boltzmann, or -1. */
static int exact_arm(const lab_grid *g)
{
    for (int a = 0; a < g->narms; a++)
        if (g->arms[a].attn == BA_ATTN_BOLTZMANN && !lab_arm_sampled(&g->arms[a]))
            return a;
    return -1;
}

static int sampled_boltzmann(const lab_grid *g, int a)
{
    return g->arms[a].attn == BA_ATTN_BOLTZMANN && lab_arm_sampled(&g->arms[a]);
}

/* The training time of the runs of arm a. */
static ba_running arm_wall(const lab_cells *cs, int a)
{
    ba_running s = {0};
    for (int i = 0; i < cs->n; i++)
        if (a >= 0 && cs->cells[i].arm == a && cs->cells[i].run)
            ba_running_add(&s, cs->cells[i].run->wall_s);
    return s;
}

/* One sampled arm against exact boltzmann on the same seeds: its value
 * with its own sampler and with exact inference (means over seeds), the
 * paired difference to exact training with its 95 % interval, and the
 * training time, also relative to exact. */
static void versus_row(const rep_grid *x, int a, int ex, double *work, FILE *f)
{
    const lab_grid *g = &x->g;
    const lab_cells *cs = &x->cs;
    int np = 0, lm = g->task == BA_TASK_CHARLM;
    ba_running v = {0}, xv = {0}, wall = {0}, ref = arm_wall(cs, ex);
    for (int i = 0; i < cs->n; i++) {
        const lab_cell *c = &cs->cells[i];
        if (c->arm != a || !c->run)
            continue;
        ba_running_add(&v, lab_shown(g->task, c->run->value));
        ba_running_add(&wall, c->run->wall_s);
        if (c->run->has_exact)
            ba_running_add(&xv, lab_shown(g->task, c->run->exact_value));
        const lab_cell *r = ex >= 0 ? lab_cells_find(cs, ex, c->T, c->C, c->ffn, c->seed) : NULL;
        if (r && r->run)
            work[np++] = lab_effect(g->task, c->run->value, r->run->value);
    }
    if (v.n == 0)
        return;
    char eff[96] = "no exact pair", own[32], exv[32] = "-", tr[32] = "-";
    const char *verdict = "not measured";
    ba_summary d = ba_summarize(work, np);
    if (np == 1) {
        snprintf(eff, sizeof eff, "%+.2f (one pair)", d.mean);
        verdict = "too few seeds";
    } else if (np > 1) {
        double lo = d.mean - d.ci95, hi = d.mean + d.ci95;
        snprintf(eff, sizeof eff, "%+.2f [%+.2f, %+.2f]", d.mean, lo, hi);
        if (lo > 0 || hi < 0) /* lower perplexity, higher accuracy is better */
            verdict = d.mean * (lm ? -1 : 1) > 0 ? "better than exact" : "worse than exact";
        else
            verdict = "no resolved difference";
    }
    snprintf(own, sizeof own, lm ? "%.3f" : "%.2f", v.mean);
    if (xv.n)
        snprintf(exv, sizeof exv, lm ? "%.3f" : "%.2f", xv.mean);
    if (ref.n && ref.mean > 0)
        snprintf(tr, sizeof tr, "%.1f x", wall.mean / ref.mean);
    fprintf(f, "| %s | %d | %ld | %s | %s | %s | %s | %.1f | %s |\n",
            ba_sampler_name(g->arms[a].sampler.kind), g->arms[a].sampler.shots, v.n, own, exv, eff,
            verdict, wall.mean, tr);
}

static int versus_exact_section(const rep_grid *x, FILE *f)
{
    const lab_grid *g = &x->g;
    int ex = exact_arm(g);
    double *work = malloc(sizeof *work * (size_t)(x->cs.n + 1));
    if (!work)
        return 1;
    fprintf(f, "\n#### Against exact training\n\n"
               "Each sampled arm against exact boltzmann on the same seeds (relative perplexity "
               "change for charlm, negative is better; accuracy points for brackets), with the "
               "value of the same weights under exact inference and the mean training time of a "
               "run (its steps and periodic evaluations, one thread), also relative to the exact "
               "run (exact boltzmann took %.1f s):\n\n",
            arm_wall(&x->cs, ex).mean);
    fprintf(f, "| sampler | S | runs | with its sampler | with exact inference | vs exact "
               "training (%s, 95 %% CI) | verdict | training time (s) | vs exact |\n",
            g->task == BA_TASK_CHARLM ? "%" : "points");
    fprintf(f, "|---|---|---|---|---|---|---|---|---|\n");
    for (int a = 0; a < g->narms; a++)
        if (sampled_boltzmann(g, a))
            versus_row(x, a, ex, work, f);
    free(work);
    return 0;
}

/* ------------------------------------------------------------- quality */

/* The sample quality of one sampled arm along training, from the quality
 * records of its runs: the first evaluation and the end, means over the
 * runs (beta_eff and tv_eff over those with a fitted temperature, the
 * floor over those with one). 0 when no run has quality records. */
static int quality_row(const command *c, const rep_grid *x, int a, FILE *f, int *code)
{
    ba_running t1 = {0}, tl = {0}, b1 = {0}, bl = {0}, el = {0}, fl = {0};
    for (int i = 0; i < x->cs.n && !*code; i++) {
        const lab_cell *cell = &x->cs.cells[i];
        ba_record *recs;
        int nr;
        if (cell->arm != a || !cell->run ||
            (*code = lab_metrics_read(c, cell->run->dir, &recs, &nr)))
            continue;
        const ba_record *first = NULL, *last = NULL;
        for (int k = 0; k < nr; k++)
            if (recs[k].kind == BA_REC_QUALITY)
                last = &recs[k], first = first ? first : &recs[k];
        if (first) {
            ba_running_add(&t1, first->tv), ba_running_add(&tl, last->tv);
            if (!isnan(first->beta_eff))
                ba_running_add(&b1, first->beta_eff);
            if (!isnan(last->beta_eff))
                ba_running_add(&bl, last->beta_eff), ba_running_add(&el, last->tv_eff);
            if (!isnan(last->tv_shot_floor))
                ba_running_add(&fl, last->tv_shot_floor);
        }
        free(recs);
    }
    if (t1.n == 0 || *code)
        return 0;
    char bf[32] = "no fit", be[32] = "no fit", te[32] = "no fit",
         floor[48] = "none (exact output distribution)";
    if (b1.n)
        snprintf(bf, sizeof bf, "%.3g", b1.mean);
    if (bl.n) {
        snprintf(be, sizeof be, "%.3g", bl.mean);
        snprintf(te, sizeof te, "%.3f", el.mean);
    }
    if (fl.n)
        snprintf(floor, sizeof floor, "%.3f", fl.mean);
    fprintf(f, "| %s | %d | %ld | %.3f | %.3f | %s | %s | %s | %s |\n",
            ba_sampler_name(x->g.arms[a].sampler.kind), x->g.arms[a].sampler.shots, t1.n,
            t1.mean, tl.mean, bf, be, te, floor);
    return 1;
}

static int quality(const command *c, const rep_grid *x, FILE *f)
{
    int rows = 0, code = 0;
    out_file o = {0};
    if (!(o.f = open_memstream(&o.buf, &o.len)))
        return fail_lib(c, "out of memory", 1);
    for (int a = 0; a < x->g.narms && !code; a++)
        if (sampled_boltzmann(&x->g, a))
            rows += quality_row(c, x, a, o.f, &code);
    if (fclose(o.f) != 0 && !code)
        code = fail_lib(c, "out of memory", 1);
    if (!code && rows)
        fprintf(f, "| sampler | S | runs | TV to β = 1, first evaluation | TV at the end | "
                   "β_eff first | β_eff at the end | TV to Boltzmann(β_eff) at the end | "
                   "shot-noise floor of TV at the end |\n"
                   "|---|---|---|---|---|---|---|---|---|\n%s",
                o.buf);
    else if (!code)
        fprintf(f, "(no sampled runs with quality records yet)\n");
    free(o.buf);
    return code;
}

/* ------------------------------------------------------------ the doc */

/* to as a path relative to the directory from, both absolute and
 * canonical, as realpath --relative-to writes it. */
static void relative_to(const char *from, const char *to, char *buf, size_t n)
{
    size_t k = 0, sep = 0;
    for (; from[k] && from[k] == to[k]; k++)
        if (from[k] == '/')
            sep = k;
    size_t base = !from[k] && (to[k] == '/' || !to[k]) ? k : sep;
    size_t len = 0;
    buf[0] = '\0';
    for (const char *p = from + base; *p;) { /* one "../" per component left in from */
        p += strspn(p, "/");
        if (*p && len + 3 < n)
            memcpy(buf + len, "../", 4), len += 3;
        p += strcspn(p, "/");
    }
    const char *rest = to + base;
    rest += strspn(rest, "/");
    snprintf(buf + len, n - len, "%s", *rest || len ? rest : ".");
}

/* The links to the figures of a grid, relative to the document's
 * directory. */
static int doc_links(const rep_grid *x, const char *docdir, FILE *f)
{
    char **names, base[PATH_MAX];
    int n;
    if (rep_pngs(x->dir, &names, &n))
        return 1;
    int canon = realpath(docdir, base) != NULL;
    for (int i = 0; i < n; i++) {
        char path[PATH_LEN + 256], real[PATH_MAX], rel[2 * PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", x->dir, names[i]);
        if (canon && realpath(path, real))
            relative_to(base, real, rel, sizeof rel);
        else
            snprintf(rel, sizeof rel, "%s", path);
        fprintf(f, "![%s](%s)\n", names[i], rel);
    }
    lab_names_free(names, n);
    return 0;
}

/* The whole section, from its heading. */
static int section(const command *c, const char *out, const char *doc, const rep_grids *gs,
                   FILE *f)
{
    char date[32], docdir[PATH_LEN];
    rep_date(date, sizeof date);
    const char *slash = strrchr(doc, '/');
    snprintf(docdir, sizeof docdir, "%.*s", slash ? (int)(slash - doc) + (slash == doc) : 1,
             slash ? doc : ".");
    fprintf(f, "%s\n\nGenerated by `boltzattn-lab report %s --samplers-doc %s` on %s from the "
               "files of\n`make reproduce PRESET=samplers OUT=%s` (`lab/reproduce.sh samplers`): "
               "brackets and charlm at T = 8, softmax, exact boltzmann, and boltzmann trained and "
               "evaluated with each sampler at 64, 256 and 1024 shots per query, the same seeds, "
               "data order and steps for all; one thread per run. Nothing below is typed by "
               "hand.\n",
            samplers_head, out, doc, date, out);
    if (rep_machines(gs, f))
        return 1;
    fputc('\n', f);
    fprintf(f, "The gradient of a sampled run is the estimator of docs/internals.md (\"Sampled "
               "attention\") with `beta_assumed` = 1: it treats the shots as if they came from the "
               "β = 1 distribution, whatever the sampler's real temperature. Sample quality is "
               "measured at every evaluation on the Ising systems the model meets (the last "
               "query of the first evaluation items, layer 0, head 0; `quality` records of "
               "metrics.jsonl, docs/internals.md).\n\nSettings of the runs (from their config "
               "records):\n\n");
    int code = 0;
    for (int i = 0; i < gs->n && !code; i++) {
        fprintf(f, "%s:\n\n", gs->v[i].name);
        code = settings(&gs->v[i], f) ? fail_lib(c, "out of memory", 1) : 0;
        fprintf(f, "\n");
    }
    for (int i = 0; i < gs->n && !code; i++) {
        const rep_grid *x = &gs->v[i];
        fprintf(f, "### %s\n\n", x->name);
        if (rep_summary_body(&x->cs, 2, "####", f) || versus_exact_section(x, f))
            return fail_lib(c, "out of memory", 1);
        fprintf(f, "\n#### Sample quality along training\n\n"
                   "Measured on the model's own systems at its first evaluation and at the end, "
                   "each with 16,384 shots of the arm's sampler whatever the arm's S (DQA: its "
                   "exact output distribution); the floor is the direct sampler's TV on the same "
                   "systems, i.e. pure shot noise. Means over seeds:\n\n");
        if ((code = quality(c, x, f)))
            break;
        fprintf(f, "\n");
        if (doc_links(x, docdir, f))
            return fail_lib(c, "out of memory", 1);
        fprintf(f, "\n");
    }
    return code;
}

int rep_samplers_doc(const command *c, const char *out, const char *doc, const rep_grids *gs)
{
    unsigned char *buf;
    size_t len;
    char err[BA_ERR_LEN];
    int st = ba_read_file(doc, &buf, &len, err);
    if (st)
        return fail_lib(c, err, input_status(st));
    char *txt = (char *)buf;
    /* everything before the heading's line is kept */
    const char *at = NULL;
    size_t hl = strlen(samplers_head);
    for (const char *p = txt; *p && !at; p += strcspn(p, "\n"), p += *p == '\n')
        if (strcspn(p, "\n") == hl && strncmp(p, samplers_head, hl) == 0)
            at = p;
    if (!at) {
        fprintf(stderr, "%s %s: %s has no line '%s'\n", prog, c->cmd, doc, samplers_head);
        free(txt);
        return 2;
    }
    out_file o;
    int code = out_open(c, &o);
    if (!code) {
        fwrite(txt, 1, (size_t)(at - txt), o.f);
        if ((code = section(c, out, doc, gs, o.f))) {
            fclose(o.f);
            free(o.buf);
        } else if (!(code = out_close(c, &o, doc))) {
            printf("wrote %s\n", doc);
        }
    }
    free(txt);
    return code;
}
