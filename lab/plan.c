/* boltzattn-lab plan PRESET: the preset's plan from lab/presets.json as
 * lines lab/reproduce.sh runs, one step a line, words separated by spaces:
 *
 *   STAGE ablate NAME ARGS...        train (or summarise) grid NAME: ARGS are
 *                                    `boltzattn ablate`'s, --out @OUT/NAME last
 *                                    (a grid with "extrapolate": its lengths,
 *                                    items and batch too, but in a summary)
 *   STAGE couplings NAME ARMS        one couplings analysis per Ising arm of ARMS
 *   STAGE extrapolate NAME ARGS...   `boltzattn ablate --out @OUT/NAME ARGS`
 *   STAGE if-unsettled NAME PREV ARGS...  the next rung of a ladder: `boltzattn
 *                                    ablate ARGS` once it is started, or when a
 *                                    claim read at grid PREV is not settled
 *                                    (`boltzattn-lab settled`)
 *   STAGE more-seeds NAME N ARGS...  the grid's claims read on its N seeds:
 *                                    where one is unresolved (`boltzattn-lab
 *                                    more-seeds`), `boltzattn ablate ARGS` (the
 *                                    grid's, with "seeds_if_unresolved" seeds)
 *   STAGE cost NAME ARGS...          `boltzattn-lab cost ARGS` (the grids of the
 *                                    grid's "cost", then the options), once:
 *                                    skipped where the first grid has a cost.json
 *   STAGE eval-engines NAME ARGS...  `boltzattn-lab eval-engines ARGS`
 *   STAGE approx-ckpt NAME ARGS...   `boltzattn-lab approx --ckpt C ARGS` per checkpoint
 *   end prefer-C PREFIX C            grids named PREFIX* analyse width C
 *   end curves-C NAME C              grid NAME draws the curves of width C
 *   end couplings-arms ARMS          every grid: one couplings analysis per arm
 *   end report                       the preset has a report (boltzattn-lab report)
 *
 * STAGE is order (one process: JOBS=1, or a summary), chain0 and chain1
 * (the two chains run side by side with JOBS=2), or after (once the
 * chains are done). @DATA, @OUT and @THREADS stand for what the script
 * fills in. Parameters ("$NAME") take the environment variable NAME when
 * it is set (checked here: exit 2 naming it), else their default. */
#include "presets.h"

#include <stdlib.h>
#include <string.h>

static opt plan_opts[] = {
    {"presets", "FILE", "$BA_PRESETS, else the source tree's lab/presets.json",
     "the presets file", 0, 0},
    {"summary-only", NULL, NULL,
     "the plan of a summary (SUMMARY_ONLY=1): parameters take their summary defaults", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command plan_cmd = {
    "plan",
    "PRESET [--presets FILE] [--summary-only]\n\n"
    "Prints the preset's plan (its grids as `boltzattn ablate` arguments, in order, and\n"
    "what follows them) from the presets file, for lab/reproduce.sh to run.",
    plan_opts};

typedef struct {
    const command *c;
    const cJSON *global, *local; /* the parameters */
    int summary;
    FILE *f;
} planner;

static const cJSON *param(const planner *p, const char *name)
{
    const cJSON *x = p->local ? cJSON_GetObjectItemCaseSensitive(p->local, name) : NULL;
    return x ? x : cJSON_GetObjectItemCaseSensitive(p->global, name);
}

/* The value of reference s ("$NAME" or "$NAME/K") into buf. 0 or 2 after
 * printing (a bad environment value). */
static int resolve(const planner *p, const char *s, char *buf, size_t n)
{
    char name[64];
    long div;
    lab_param_ref(s, name, sizeof name, &div); /* checked when the file was read */
    const cJSON *d = param(p, name);
    const cJSON *def = cJSON_GetObjectItemCaseSensitive(d, "default");
    const cJSON *sdef = cJSON_GetObjectItemCaseSensitive(d, "summary_default");
    const cJSON *min = cJSON_GetObjectItemCaseSensitive(d, "min");
    int empty_ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "empty_ok"));
    const char *env = getenv(name);
    if (env && !*env && !empty_ok)
        env = NULL;
    if (!env && p->summary && sdef && cJSON_IsString(sdef))
        env = sdef->valuestring;
    if (env) {
        if (strpbrk(env, " \t\n'\"\\"))
            return usage_error(p->c, "%s must be one word, not '%s'", name, env);
        snprintf(buf, n, "%s", env);
    } else if (cJSON_IsNumber(def)) {
        snprintf(buf, n, "%ld", (long)def->valuedouble);
    } else {
        snprintf(buf, n, "%s", def->valuestring);
    }
    if (min) {
        char *end;
        long v = strtol(buf, &end, 10);
        if (!*buf || *end || v < (long)min->valuedouble)
            return usage_error(p->c, "%s must be an integer of at least %ld, not '%s'", name,
                               (long)min->valuedouble, buf);
        if (strchr(s, '/'))
            snprintf(buf, n, "%ld", lab_param_divide(v, div));
    }
    return 0;
}

/* One value (number, string, reference, or a list of them joined by
 * commas, empty items left out) into buf. */
static int value(const planner *p, const cJSON *v, char *buf, size_t n)
{
    buf[0] = '\0';
    if (cJSON_IsNumber(v)) {
        snprintf(buf, n, "%ld", (long)v->valuedouble);
        return 0;
    }
    if (cJSON_IsString(v))
        return v->valuestring[0] == '$' ? resolve(p, v->valuestring, buf, n)
                                        : (snprintf(buf, n, "%s", v->valuestring), 0);
    const cJSON *e;
    size_t at = 0;
    cJSON_ArrayForEach(e, v)
    {
        char one[1024];
        int rc = value(p, e, one, sizeof one);
        if (rc)
            return rc;
        if (*one && at + strlen(one) + 2 < n)
            at += (size_t)snprintf(buf + at, n - at, "%s%s", at ? "," : "", one);
    }
    return 0;
}

/* The options of o as words: --key value (a list comma-joined; share_from
 * repeated; true a flag); with grid, a grid's keys that are not options
 * are left out. */
static int words(const planner *p, const cJSON *o, int grid, FILE *f)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, o)
    {
        if (grid && lab_preset_meta_key(v->string))
            continue;
        char opt[64], buf[4096];
        snprintf(opt, sizeof opt, "%s", v->string);
        for (char *q = opt; *q; q++)
            *q = *q == '_' ? '-' : *q;
        if (cJSON_IsTrue(v)) {
            fprintf(f, " --%s", opt);
            continue;
        }
        if (strcmp(v->string, "share_from") == 0 && cJSON_IsArray(v)) {
            const cJSON *e;
            cJSON_ArrayForEach(e, v) fprintf(f, " --%s %s", opt, e->valuestring);
            continue;
        }
        int rc = value(p, v, buf, sizeof buf);
        if (rc)
            return rc;
        if (*buf)
            fprintf(f, " --%s %s", opt, buf);
    }
    return 0;
}

/* Whether the grid is in the plan: "if_listed": PARAM keeps it only when
 * its engine is one of PARAM's comma-separated names. -1: an error. */
static int listed(const planner *p, const cJSON *m)
{
    const cJSON *il = cJSON_GetObjectItemCaseSensitive(m, "if_listed");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(m, "engine");
    if (!il)
        return 1;
    char ref[80], list[1024], pad[1100], want[80];
    snprintf(ref, sizeof ref, "$%s", il->valuestring);
    if (!param(p, il->valuestring) || resolve(p, ref, list, sizeof list))
        return -1;
    snprintf(pad, sizeof pad, ",%s,", list);
    snprintf(want, sizeof want, ",%s,", cJSON_IsString(en) ? en->valuestring : "");
    return strstr(pad, want) != NULL;
}

static int extrapolate_line(const planner *p, const char *stage, const char *name,
                            const cJSON *ex)
{
    fprintf(p->f, "%s extrapolate %s", stage, name);
    int rc = words(p, ex, 0, p->f);
    fprintf(p->f, "\n");
    return rc;
}

/* The grid's "extrapolate" as training's words (none in a summary):
 * --extrapolate, --extrapolate-items and its batch as --extrapolate-batch,
 * so that ablate evaluates each run as soon as it is trained; the
 * extrapolate lines after the grid then find its entries kept. */
static int train_extrap_words(const planner *p, const cJSON *ex, FILE *f)
{
    static const char *const keys[][2] = {{"extrapolate", "extrapolate"},
                                          {"extrapolate_items", "extrapolate-items"},
                                          {"batch", "extrapolate-batch"}};
    if (!ex || p->summary)
        return 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(ex, keys[i][0]);
        char buf[1024];
        int rc = v ? value(p, v, buf, sizeof buf) : 0;
        if (rc)
            return rc;
        if (v && *buf)
            fprintf(f, " --%s %s", keys[i][1], buf);
    }
    return 0;
}

/* With "seeds_if_unresolved" above the grid's seeds: its extrapolation
 * (if any), the more-seeds line (the grid's options with that many
 * seeds), its extrapolation again; *more: that count, else 0. */
static int more_seeds_line(const planner *p, const char *stage, const char *name,
                           const cJSON *m, const cJSON *ex, long *more)
{
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(m, "seeds_if_unresolved");
    char buf[64], base[64];
    int rc;
    *more = 0;
    if (!ms)
        return 0;
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(m, "seeds");
    if (!sv)
        return usage_error(p->c, "grid %s: \"seeds_if_unresolved\" needs the grid's \"seeds\"",
                           name);
    if ((rc = value(p, ms, buf, sizeof buf)) || (rc = value(p, sv, base, sizeof base)))
        return rc;
    char *e1, *e2;
    long n = strtol(buf, &e1, 10), b = strtol(base, &e2, 10);
    if (!*buf || *e1 || n < 1 || !*base || *e2 || b < 1)
        return usage_error(p->c, "grid %s: \"seeds_if_unresolved\" and \"seeds\" must be "
                                 "positive integers, not '%s' and '%s'", name, buf, base);
    if (n <= b) /* nothing to add: the grid runs that many already */
        return 0;
    cJSON *more_m = cJSON_Duplicate(m, 1), *nv = cJSON_CreateNumber((double)n);
    if (!more_m || !nv || !cJSON_ReplaceItemInObjectCaseSensitive(more_m, "seeds", nv)) {
        cJSON_Delete(more_m), cJSON_Delete(nv);
        return fail_lib(p->c, "out of memory", 1);
    }
    if (ex)
        rc = extrapolate_line(p, stage, name, ex);
    if (!rc) {
        fprintf(p->f, "%s more-seeds %s %ld", stage, name, b);
        rc = words(p, more_m, 1, p->f);
        if (!rc)
            rc = train_extrap_words(p, ex, p->f);
        fprintf(p->f, " --out @OUT/%s\n", name);
    }
    cJSON_Delete(more_m);
    if (!rc && ex)
        rc = extrapolate_line(p, stage, name, ex);
    *more = n;
    return rc;
}

/* The cost line of grid m (name), when it has "cost": a list of the
 * preset's grids, timed side by side (their arms' step costs) with one
 * thread a run as the training, the text where the grid reads one. 0 or
 * an exit code after printing. */
static int cost_line(const planner *p, const cJSON *preset, const char *stage, const char *name,
                     const cJSON *m)
{
    const cJSON *co = cJSON_GetObjectItemCaseSensitive(m, "cost"), *e;
    if (!co)
        return 0;
    if (!cJSON_IsArray(co) || !cJSON_GetArraySize(co))
        return usage_error(p->c, "grid %s: \"cost\" must be a non-empty list of grids", name);
    cJSON_ArrayForEach(e, co)
    if (!cJSON_IsString(e) || !lab_preset_grid(preset, e->valuestring))
        return usage_error(p->c, "grid %s: \"cost\" names '%s', not a grid of the preset", name,
                           cJSON_IsString(e) ? e->valuestring : "(not a string)");
    fprintf(p->f, "%s cost %s", stage, name);
    cJSON_ArrayForEach(e, co)
    fprintf(p->f, " @OUT/%s", e->valuestring);
    fprintf(p->f, " --threads @THREADS%s\n",
            cJSON_GetObjectItemCaseSensitive(m, "data") ? " --data @DATA" : "");
    return 0;
}

/* The lines of grid name in stage: ablate, then (with more seeds where
 * unresolved) its extrapolation and the more-seeds step, its couplings,
 * its extrapolation and its step costs. */
static int grid_lines(const planner *p, const cJSON *preset, const char *stage, const char *name)
{
    cJSON *m = lab_preset_grid_merged(preset, name);
    if (!m)
        return fail_lib(p->c, "out of memory", 1);
    int rc = listed(p, m);
    if (rc <= 0) {
        cJSON_Delete(m);
        return rc < 0 ? EXIT_USAGE : 0;
    }
    char buf[4096];
    const cJSON *iu = cJSON_GetObjectItemCaseSensitive(m, "if_unsettled");
    if (iu)
        fprintf(p->f, "%s if-unsettled %s %s", stage, name, iu->valuestring);
    else
        fprintf(p->f, "%s ablate %s", stage, name);
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(m, "extrapolate");
    rc = words(p, m, 1, p->f);
    if (!rc)
        rc = train_extrap_words(p, ex, p->f);
    fprintf(p->f, " --out @OUT/%s\n", name);
    /* the claims read at the grid's extrapolation too: it comes first, and
     * again after the seeds added (entries there are kept) */
    long more = 0;
    if (!rc)
        rc = more_seeds_line(p, stage, name, m, ex, &more);
    const cJSON *ca = cJSON_GetObjectItemCaseSensitive(m, "couplings_arms");
    if (!rc && ca && !(rc = value(p, ca, buf, sizeof buf)))
        fprintf(p->f, "%s couplings %s %s\n", stage, name, buf);
    if (!rc && ex && !more)
        rc = extrapolate_line(p, stage, name, ex);
    if (!rc)
        rc = cost_line(p, preset, stage, name, m);
    cJSON_Delete(m);
    return rc;
}

/* An "after" step: a grid, its extrapolation, or the measurements of its
 * checkpoints (eval-engines, approx --ckpt). */
static int after_line(const planner *p, const cJSON *preset, const cJSON *step)
{
    const char *kind = step->child->string, *name = step->child->valuestring;
    if (strcmp(kind, "grid") == 0)
        return grid_lines(p, preset, "after", name);
    cJSON *m = lab_preset_grid_merged(preset, name);
    if (!m)
        return fail_lib(p->c, "out of memory", 1);
    int rc = 0, data = cJSON_GetObjectItemCaseSensitive(m, "data") != NULL;
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(m, "threads");
    char thr[4200] = "", buf[4096];
    if (th && !(rc = value(p, th, buf, sizeof buf)))
        snprintf(thr, sizeof thr, " --threads %s", buf);
    if (!rc && strcmp(kind, "extrapolate") == 0) {
        const cJSON *ex = cJSON_GetObjectItemCaseSensitive(m, "extrapolate");
        fprintf(p->f, "after extrapolate %s", name);
        rc = ex ? words(p, ex, 0, p->f)
                : usage_error(p->c, "grid %s has no \"extrapolate\"", name);
        fprintf(p->f, "\n");
    } else if (!rc) {
        const cJSON *ee = cJSON_GetObjectItemCaseSensitive(m, "eval_engines");
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(step, "instances");
        if (!ee)
            rc = usage_error(p->c, "grid %s has no \"eval_engines\" to measure", name);
        else if (!(rc = value(p, ee, buf, sizeof buf))) {
            fprintf(p->f, "after eval-engines %s --out @OUT/%s --engines %s%s%s\n", name, name,
                    buf, data ? " --data @DATA" : "", thr);
            fprintf(p->f, "after approx-ckpt %s --instances %d%s%s --out @OUT\n", name,
                    cJSON_IsNumber(in) ? in->valueint : 100, data ? " --data @DATA" : "", thr);
        }
    }
    cJSON_Delete(m);
    return rc;
}

static int figure_lines(const planner *p, const cJSON *doc, const cJSON *preset)
{
    const cJSON *fig = cJSON_GetObjectItemCaseSensitive(doc, "figures"), *v;
    char buf[1024];
    int rc = 0;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(fig, "prefer_C"))
    {
        if ((rc = value(p, v, buf, sizeof buf)))
            return rc;
        fprintf(p->f, "end prefer-C %s %s\n", v->string, buf);
    }
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(fig, "curves_C"))
    {
        if ((rc = value(p, v, buf, sizeof buf)))
            return rc;
        fprintf(p->f, "end curves-C %s %s\n", v->string, buf);
    }
    const cJSON *ca = cJSON_GetObjectItemCaseSensitive(preset, "couplings_arms");
    if (ca && !(rc = value(p, ca, buf, sizeof buf)))
        fprintf(p->f, "end couplings-arms %s\n", buf);
    if (!rc && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(preset, "report")))
        fprintf(p->f, "end report\n");
    return rc;
}

static int write_plan(planner *p, const cJSON *doc, const cJSON *preset)
{
    static const char *const stages[] = {"chain0", "chain1"};
    const cJSON *e, *ch = cJSON_GetObjectItemCaseSensitive(preset, "chains");
    int rc = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(preset, "order"))
    if ((rc = grid_lines(p, preset, "order", e->valuestring))) return rc;
    for (int i = 0; i < 2 && ch; i++)
        cJSON_ArrayForEach(e, cJSON_GetArrayItem(ch, i))
        if ((rc = grid_lines(p, preset, stages[i], e->valuestring))) return rc;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(preset, "after"))
    if ((rc = after_line(p, preset, e))) return rc;
    return figure_lines(p, doc, preset);
}

int cmd_plan(int argc, char **argv)
{
    const command *c = &plan_cmd;
    const char *name = NULL;
    int rc = parse_args(c, argc, argv, &name, 1, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!name || !*name)
        return usage_error(c, "the preset PRESET is required");
    lab_presets ps;
    if ((rc = lab_presets_load(c, is_set(c, "presets") ? get_str(c, "presets") : NULL, &ps)))
        return rc;
    const cJSON *preset = lab_preset(&ps, name);
    if (!preset) {
        char names[256];
        lab_preset_names(&ps, 0, names, sizeof names);
        lab_presets_free(&ps);
        return usage_error(c, "unknown preset '%s' (%s)", name, names);
    }
    out_file o;
    if (out_open(c, &o)) {
        lab_presets_free(&ps);
        return 1;
    }
    planner p = {c, cJSON_GetObjectItemCaseSensitive(ps.doc, "params"),
                 cJSON_GetObjectItemCaseSensitive(preset, "params"), is_set(c, "summary-only"),
                 o.f};
    rc = write_plan(&p, ps.doc, preset);
    int bad = ferror(o.f);
    bad |= fclose(o.f) != 0;
    if (!rc && bad)
        rc = fail_lib(c, "out of memory", 1);
    /* the whole plan or nothing: a bad parameter prints no half plan */
    if (!rc && (fwrite(o.buf, 1, o.len, stdout) != o.len || fflush(stdout) != 0))
        rc = 1;
    free(o.buf);
    lab_presets_free(&ps);
    return rc;
}
