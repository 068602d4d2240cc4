/* The experiment layer's data file, lab/presets.json: every preset's plan
 * (its grids, their order and chains, what follows them, its report's
 * grids) and the paper's reference numbers. Read and checked whole at the
 * boundary (presets.c) by `boltzattn-lab plan` (plan.c) and `report`;
 * lab/reproduce.sh runs what plan prints. */
#ifndef BA_LAB_PRESETS_H
#define BA_LAB_PRESETS_H

#include "grid.h"

#include <cjson/cJSON.h>

/* A list of names held by the document (the strings are its). */
typedef struct {
    const char **v;
    size_t n;
} lab_names;

/* A headline row of the full report: the sections of a grid's summary at
 * (T, FFN). */
typedef struct {
    const char *grid;
    int T, ffn;
} lab_headline;

/* A preset's report: which sections it has ("plain", "full", "long",
 * "converged") and which of its grids answer which question. Absent
 * lists are empty. */
typedef struct {
    const char *sections;
    lab_headline *rows;
    size_t nrows;
    lab_names paper_grids, budget_grids, ladder_grids, width_grids, grids;
    const char *couplings_grid, *saturation_grid; /* NULL: none */
} lab_report_plan;

typedef struct {
    cJSON *doc;
    char path[PATH_LEN];
    lab_refs refs; /* the paper's numbers (summary and report columns) */
} lab_presets;

/* Splits a parameter reference s ("$NAME" or "$NAME/K", s[0] == '$'):
 * NAME into name (n bytes), K into *div (1 without "/K"). 0; -1 when NAME
 * is empty or does not fit; -2 when K is not a positive integer. */
int lab_param_ref(const char *s, char *name, size_t n, long *div);
/* A "$NAME/K" reference's value: v's integer quotient by div, at least 1. */
long lab_param_divide(long v, long div);
/* Reads and checks the data file: path, else $BA_PRESETS, else the source
 * tree's lab/presets.json. A missing, damaged or inconsistent file is
 * refused naming the file and the bad key (exit 2). 0 or an exit code
 * after printing. */
int lab_presets_load(const command *c, const char *path, lab_presets *p);
void lab_presets_free(lab_presets *p);
/* The preset named name, or NULL. */
const cJSON *lab_preset(const lab_presets *p, const char *name);
/* The grid named name in the preset's "grids", or NULL. */
const cJSON *lab_preset_grid(const cJSON *preset, const char *name);
/* The grid named name as the plan runs it: the preset's "defaults", then
 * the grid's base, then the grid's own keys, a later layer's key replacing
 * an earlier one's. References ("$NAME") are left as they are. A new
 * object the caller frees with cJSON_Delete; NULL out of memory (an
 * unknown name gives the defaults alone). */
cJSON *lab_preset_grid_merged(const cJSON *preset, const char *name);
/* Whether key is one of a grid's keys beside the `ablate` options (its
 * name, base, comment and the steps that follow its training), which the
 * plan does not pass to ablate. */
int lab_preset_meta_key(const char *key);
/* The presets' names joined by '|' into buf. */
void lab_preset_names(const lab_presets *p, int with_report, char *buf, size_t n);
/* The preset's report plan: 1 when it has a report, 0 when not (the
 * approx preset: docs/approximate.md is its document), -1 out of memory.
 * Free with lab_report_plan_free. */
int lab_report_plan_get(const cJSON *preset, lab_report_plan *r);
void lab_report_plan_free(lab_report_plan *r);

#endif
