/* The study's length extrapolation (issue 43: train at T = 256, evaluate
 * at 512, 1024, 2048 and 4096, the ALiBi paper's protocol), one table per
 * rung with entries: every arm's validation perplexity at its trained T and
 * at each longer T of GRID/extrapolation.json, and each arm against the
 * grid's reference on the same seeds and windows. Every number comes from
 * that file (ablate --extrapolate) and the grid's records; the verdict rows
 * of the table that opens docs/results.md read the same entries
 * (report_verdict.c). */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define XS_MAX_T 16

/* The perplexity of entry e: at the trained T (own) or at T_eval; NAN
 * when e is not a finished evaluation. */
static double ppl_of(const lab_xentry *e, int own)
{
    if (!e || e->refused)
        return NAN;
    return own ? e->own : e->at;
}

/* The entry of the run of cell x at length T2; for T2 = 0 (the trained T)
 * the first finished entry of the run at any length of tv. */
static const lab_xentry *entry_at(const lab_xentries *xe, const lab_cell *x, int T2,
                                  const int *tv, int nt)
{
    if (T2)
        return lab_xentries_find(xe, x->run->name, T2);
    for (int k = 0; k < nt; k++) {
        const lab_xentry *e = lab_xentries_find(xe, x->run->name, tv[k]);
        if (e && !e->refused)
            return e;
    }
    return NULL;
}

/* One table cell: arm a's perplexity at T2 (0: trained T) over its runs
 * with an entry, "refused" (its reason kept), or "-" with none; *pending
 * counts the finished runs without an entry there. */
static void ppl_cell(const rep_grid *x, const lab_xentries *xe, int a, int ffn, int T2,
                     const int *tv, int nt, char *buf, size_t cap, const char **why,
                     int *pending)
{
    ba_running m = {0};
    int runs = 0, refused = 0;
    for (int i = 0; i < x->cs.n; i++) {
        const lab_cell *c = &x->cs.cells[i];
        if (!rep_cell_run(x, c, a, ffn))
            continue;
        runs++;
        const lab_xentry *e = entry_at(xe, c, T2, tv, nt);
        double v = ppl_of(e, T2 == 0);
        if (e && e->refused) {
            refused++;
            if (!*why) /* the shortest length's reason, the first asked */
                *why = e->reason;
        } else if (isfinite(v)) {
            ba_running_add(&m, v);
        } else if (!e) {
            (*pending)++;
        }
    }
    if (m.n == 0) {
        snprintf(buf, cap, "%s", refused ? "refused" : "-");
        return;
    }
    int n = (int)m.n;
    char part[48] = "";
    if (n < runs)
        snprintf(part, sizeof part, " (%d of %d runs)", n, runs);
    if (n > 1)
        snprintf(buf, cap, "%.3f ± %.3f%s", m.mean, ba_running_sd(&m), part);
    else
        snprintf(buf, cap, "%.3f%s", m.mean, part);
}

/* Arm a against the reference arm r at T2 (0: trained T), paired on the
 * seeds both have an entry for. */
static void effect_cell(const rep_grid *x, const lab_xentries *xe, int a, int r, int ffn, int T2,
                        const int *tv, int nt, char *buf, size_t cap)
{
    ba_running s = {0};
    for (int i = 0; i < x->cs.n; i++) {
        const lab_cell *c = &x->cs.cells[i];
        if (!rep_cell_run(x, c, a, ffn))
            continue;
        const lab_cell *rc = lab_cells_find(&x->cs, r, c->T, c->C, ffn, c->seed);
        if (!rc || !rc->run)
            continue;
        double v = ppl_of(entry_at(xe, c, T2, tv, nt), T2 == 0);
        double w = ppl_of(entry_at(xe, rc, T2, tv, nt), T2 == 0);
        if (isfinite(v) && isfinite(w))
            ba_running_add(&s, lab_effect(BA_TASK_CHARLM, v, w));
    }
    double e, lo, hi;
    if (rep_interval(&s, &e, &lo, &hi) == 0)
        snprintf(buf, cap, "-");
    else
        rep_fmt_effect(BA_TASK_CHARLM, e, lo, hi, buf, cap);
}

/* The windows the entries were evaluated on, as a phrase. */
static void windows_text(const lab_xentries *xe, char *buf, size_t cap)
{
    long items = -1;
    int mixed = 0;
    for (int i = 0; i < xe->n; i++) {
        if (xe->e[i].refused)
            continue;
        mixed |= items >= 0 && xe->e[i].items != items;
        items = xe->e[i].items;
    }
    if (mixed)
        snprintf(buf, cap, "evenly spaced validation windows (item counts differ between "
                           "entries; each run's largest is read)");
    else if (items == 0)
        snprintf(buf, cap, "every validation window");
    else
        snprintf(buf, cap, "%ld evenly spaced validation windows of each length", items);
}

static void header(int T, const int *tv, int nt, const char *first, FILE *f)
{
    fprintf(f, "| %s | T = %d (trained) |", first, T);
    for (int k = 0; k < nt; k++)
        fprintf(f, " T = %d |", tv[k]);
    fprintf(f, "\n|---|---|");
    for (int k = 0; k < nt; k++)
        fprintf(f, "---|");
    fputc('\n', f);
}

void rep_study_extrapolation(const command *c, const rep_grid *x, int ffn, const char *prefix,
                             FILE *f)
{
    if (x->g.task != BA_TASK_CHARLM)
        return;
    lab_xentries xe;
    rep_extrapolation_read(c, x, &xe);
    int tv[XS_MAX_T], nt = lab_xentries_lengths(&xe, tv, XS_MAX_T), any = 0;
    for (int i = 0; i < xe.n && !any; i++)
        any = !xe.e[i].refused;
    if (!any) {
        lab_xentries_free(&xe);
        return;
    }
    int T = x->g.T[0], ref = lab_softmax_arm(&x->g), pending = 0;
    char win[160], cell[128], label[160], rlabel[160] = "";
    windows_text(&xe, win, sizeof win);
    if (ref >= 0)
        lab_arm_label(&x->g.arms[ref], rlabel, sizeof rlabel);
    fprintf(f, "Length extrapolation at %ld steps (`%s`): each run's model evaluated on the "
               "validation split at its trained T = %d and at each longer T (`ablate "
               "--extrapolate`), on %s; the trained-T column uses those windows too, so it can "
               "differ from the training's own evaluation above. Perplexity, mean ± sd over "
               "the runs with an entry:\n\n",
            x->g.train.steps, x->name, T, win);
    header(T, tv, nt, "arm", f);
    char notes[2048] = "";
    for (int a = 0; a < x->g.narms; a++) {
        lab_arm_label(&x->g.arms[a], label, sizeof label);
        fprintf(f, "| %s |", label);
        const char *why = NULL;
        for (int k = -1; k < nt; k++) {
            int p = 0;
            ppl_cell(x, &xe, a, ffn, k < 0 ? 0 : tv[k], tv, nt, cell, sizeof cell, &why, &p);
            pending += k < 0 ? 0 : p;
            fprintf(f, " %s |", cell);
        }
        fputc('\n', f);
        if (why) {
            size_t l = strlen(notes);
            snprintf(notes + l, sizeof notes - l, "- `%s` refused: %s\n", label, why);
        }
    }
    if (ref >= 0) {
        fprintf(f, "\nAgainst `%s` on the same seeds and windows (the paired relative change "
                   "of perplexity with its 95 %% interval over seeds; negative: the arm is "
                   "better at that length):\n\n",
                rlabel);
        header(T, tv, nt, "arm", f);
        for (int a = 0; a < x->g.narms; a++) {
            if (a == ref)
                continue;
            lab_arm_label(&x->g.arms[a], label, sizeof label);
            fprintf(f, "| %s |", label);
            for (int k = -1; k < nt; k++) {
                effect_cell(x, &xe, a, ref, ffn, k < 0 ? 0 : tv[k], tv, nt, cell,
                            sizeof cell);
                fprintf(f, " %s |", cell);
            }
            fputc('\n', f);
        }
    }
    if (notes[0])
        fprintf(f, "\n%s", notes);
    if (pending)
        fprintf(f, "\n%d evaluation%s of finished runs %s no entry yet (a checkpoint gone "
                   "before its run was evaluated, or an interrupted preset).\n",
                pending, pending == 1 ? "" : "s", pending == 1 ? "has" : "have");
    fputc('\n', f);
    char alt[160];
    snprintf(alt, sizeof alt, "perplexity against the evaluation length, %.100s", x->name);
    rep_png_link(x, "extrapolation.png", alt, prefix, f);
    lab_xentries_free(&xe);
}
