/* The length-extrapolation figure of `boltzattn plot`: each arm's
 * validation perplexity against the length it is evaluated at, from
 * DIR/extrapolation.json (ablate --extrapolate): at its trained T (an
 * entry's at_T) and at each longer T (at_T_eval), mean ± sd over the runs
 * with an entry. The ALiBi paper's protocol drawn as its readers know it:
 * a flat line extrapolates, a rising one does not.
 *
 * The file is read whole before anything is written, so a damaged one
 * leaves the grid's other figures as they were. A run evaluated on
 * several window counts at one length counts once, with its largest
 * (0: every window); refused arms have no points and are named in the
 * figure's note. */
#include "figure.h"

#include <stdlib.h>
#include <string.h>

#define XF_MAX_X 24 /* evaluation lengths, the trained ones included */

/* One series: a variant at one trained T, over the lengths xs. */
typedef struct {
    char name[64];
    const char *variant;
    int T;
    ba_running s[XF_MAX_X];
} xseries;

struct lab_xfigure {
    lab_xentries xe;
    const lab_xentry **e; /* the finished entries (one per run and length) */
    int ne;
    int xs[XF_MAX_X], nx;
    xseries *sr;
    int ns;
    long steps_lo, steps_hi, items;
    int items_mixed, nruns;
    char refused[160]; /* the refused variants, for the note */
};

static void add_x(lab_xfigure *f, int x)
{
    for (int i = 0; i < f->nx; i++)
        if (f->xs[i] == x)
            return;
    if (f->nx < XF_MAX_X)
        f->xs[f->nx++] = x;
}

static int x_index(const lab_xfigure *f, int x)
{
    for (int i = 0; i < f->nx; i++)
        if (f->xs[i] == x)
            return i;
    return -1;
}

static int int_asc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

static int series_asc(const void *a, const void *b)
{
    const xseries *p = a, *q = b;
    int v = variant_cmp(p->variant, q->variant);
    return v ? v : (p->T > q->T) - (p->T < q->T);
}

/* The series of f's entries (named by variant, and by trained T where the
 * file has several), each filled at its trained T once per run (with the
 * entry of that run read first: the smallest length) and at every T_eval. */
static int build_series(lab_xfigure *f)
{
    int multiT = 0;
    for (int i = 1; i < f->ne; i++)
        multiT |= f->e[i]->T != f->e[0]->T;
    if (!(f->sr = calloc((size_t)f->ne + 1, sizeof *f->sr)))
        return 1;
    for (int i = 0; i < f->ne; i++) {
        const lab_xentry *x = f->e[i];
        int k = 0;
        while (k < f->ns && !(strcmp(f->sr[k].variant, x->variant) == 0 && f->sr[k].T == x->T))
            k++;
        if (k == f->ns) {
            xseries *s = &f->sr[f->ns++];
            s->variant = x->variant, s->T = x->T;
            if (multiT)
                snprintf(s->name, sizeof s->name, "%s-T%d", x->variant, x->T);
            else
                snprintf(s->name, sizeof s->name, "%s", x->variant);
        }
    }
    qsort(f->sr, (size_t)f->ns, sizeof *f->sr, series_asc);
    for (int i = 0; i < f->ne; i++) {
        const lab_xentry *x = f->e[i];
        xseries *s = f->sr;
        while (strcmp(s->variant, x->variant) != 0 || s->T != x->T)
            s++;
        ba_running_add(&s->s[x_index(f, x->T_eval)], x->at);
        int first = 1; /* this run's first length: its trained-T value */
        for (int j = 0; j < f->ne; j++)
            if (strcmp(f->e[j]->run, x->run) == 0 && f->e[j]->T_eval < x->T_eval)
                first = 0;
        if (first) {
            ba_running_add(&s->s[x_index(f, x->T)], x->own);
            f->nruns++;
        }
    }
    return 0;
}

/* Refused variants, once each, into the note's list. */
static void note_refused(lab_xfigure *f, const char *v)
{
    if (strstr(f->refused, v))
        return;
    size_t l = strlen(f->refused);
    if (l + strlen(v) + 8 < sizeof f->refused)
        snprintf(f->refused + l, sizeof f->refused - l, "%s%s", l ? ", " : "", v);
}

void lab_xfigure_free(lab_xfigure *f)
{
    if (!f)
        return;
    lab_xentries_free(&f->xe);
    free(f->e);
    free(f->sr);
    free(f);
}

int lab_xfigure_read(const command *c, const char *dir, lab_xfigure **out)
{
    *out = NULL;
    char err[BA_ERR_LEN];
    lab_xfigure *f = calloc(1, sizeof *f);
    if (!f)
        return fail_lib(c, "out of memory", 1);
    int code = lab_xentries_read(dir, &f->xe, err);
    if (!code && f->xe.n == 0) {
        lab_xfigure_free(f);
        return 0;
    }
    for (int i = 0; i < f->xe.n && !code; i++) /* quoted in gnuplot's script */
        if (!plain_token(f->xe.e[i].variant, 48)) {
            snprintf(err, sizeof err, "its variant \"%.60s\" is not a plain name",
                     f->xe.e[i].variant);
            code = 2;
        }
    if (!code && !(f->e = calloc((size_t)f->xe.n + 1, sizeof *f->e)))
        snprintf(err, sizeof err, "out of memory"), code = 1;
    if (code) {
        fprintf(stderr, "%s %s: %s/extrapolation.json: %s\n", prog, c->cmd, dir, err);
        lab_xfigure_free(f);
        return code;
    }
    for (int i = 0; i < f->xe.n; i++) {
        if (f->xe.e[i].refused)
            note_refused(f, f->xe.e[i].variant);
        else
            f->e[f->ne++] = &f->xe.e[i];
    }
    for (int i = 0; i < f->ne; i++) {
        const lab_xentry *x = f->e[i];
        add_x(f, x->T), add_x(f, x->T_eval);
        f->steps_lo = i == 0 || x->steps < f->steps_lo ? x->steps : f->steps_lo;
        f->steps_hi = x->steps > f->steps_hi ? x->steps : f->steps_hi;
        f->items_mixed |= i > 0 && x->items != f->items;
        f->items = x->items;
    }
    if (f->nx == XF_MAX_X) {
        fprintf(stderr, "%s %s: %s/extrapolation.json: more than %d lengths; the figure draws "
                        "at most that many\n",
                prog, c->cmd, dir, XF_MAX_X - 1);
        lab_xfigure_free(f);
        return 2;
    }
    qsort(f->xs, (size_t)f->nx, sizeof f->xs[0], int_asc);
    if (build_series(f)) {
        lab_xfigure_free(f);
        return fail_lib(c, "out of memory", 1);
    }
    *out = f;
    return 0;
}

int lab_xfigure_write(const command *c, const char *plots, const lab_xfigure *f, int *made)
{
    *made = 0;
    if (!f || f->ns == 0)
        return 0;
    panel p;
    panel_init(&p);
    p.logy = 1;
    snprintf(p.dat, sizeof p.dat, "extrapolation.dat");
    snprintf(p.title, sizeof p.title, "each run's model at its trained T and at longer T "
                                      "(ablate --extrapolate)");
    snprintf(p.ylabel, sizeof p.ylabel, "validation perplexity (lower is better)");
    char path[PATH_LEN];
    out_file o;
    if (mkpath(c, path, "%s/%s", plots, p.dat) || out_open(c, &o))
        return 1;
    fprintf(o.f, "# validation perplexity against the evaluation length (extrapolation.json); "
                 "one block per arm (gnuplot index)\n# columns: T n mean sd min max  (over the "
                 "runs with an entry; sd: sample standard deviation)\n");
    int Tlo = f->sr[0].T, Thi = f->sr[0].T;
    for (int k = 0; k < f->ns && p.nvar < MAX_VARIANTS; k++) {
        const xseries *s = &f->sr[k];
        Tlo = s->T < Tlo ? s->T : Tlo, Thi = s->T > Thi ? s->T : Thi;
        fprintf(o.f, "%s# variant %s, trained at T = %d\n", p.nvar ? "\n\n" : "", s->name, s->T);
        snprintf(p.var[p.nvar++], sizeof p.var[0], "%s", s->name);
        for (int i = 0; i < f->nx; i++) {
            const ba_running *r = &s->s[i];
            if (r->n == 0)
                continue;
            fprintf(o.f, "%d %ld %.9g %.9g %.9g %.9g\n", f->xs[i], r->n, r->mean,
                    ba_running_sd(r), r->min, r->max);
            panel_extent(&p, r);
        }
    }
    if (out_close(c, &o, path))
        return 1;
    figure fg = {"extrapolation.gp", "extrapolation.png", "", "",
                 "evaluation length T (tokens of context)", 1, 1, 1, "", 2, 1, 0};
    char trained[48], win[64];
    if (Tlo == Thi)
        snprintf(trained, sizeof trained, "trained at T = %d", Tlo);
    else
        snprintf(trained, sizeof trained, "trained at T = %d to %d", Tlo, Thi);
    snprintf(fg.title, sizeof fg.title, "charlm: validation perplexity at longer contexts (%s)",
             trained);
    if (f->items_mixed)
        snprintf(win, sizeof win, "each run's largest window count");
    else if (f->items == 0)
        snprintf(win, sizeof win, "every validation window");
    else
        snprintf(win, sizeof win, "%ld windows of each length", f->items);
    char steps[48];
    if (f->steps_lo == f->steps_hi)
        snprintf(steps, sizeof steps, "%ld steps", f->steps_lo);
    else
        snprintf(steps, sizeof steps, "%ld-%ld steps", f->steps_lo, f->steps_hi);
    snprintf(fg.note, sizeof fg.note, "mean ± sd over %d run%s (%s), %s", f->nruns,
             f->nruns == 1 ? "" : "s", steps, win);
    /* then what fits of: the refused arms, the arms left out */
    const char *tail[3] = {f->refused[0] ? "; refused: " : "", f->refused,
                           p.nvar < f->ns ? "; more arms than colours, some left out" : ""};
    for (int i = 0; i < 3; i++)
        if (strlen(fg.note) + strlen(tail[i]) < sizeof fg.note)
            strcat(fg.note, tail[i]);
    set_xtics(&fg, f->xs, f->nx);
    if (write_figure(c, plots, &fg, &p, 1))
        return 1;
    *made = 1;
    return 0;
}
