/* boltzattn-lab: the experiment layer beside the user's tool. The presets'
 * plan (lab/presets.json, run by lab/reproduce.sh), the summaries with
 * the paper's reference numbers, the reports (docs/results.md, a preset's
 * report.md, the samplers section of docs/samplers.md), the simulated
 * quantum annealer's calibration, the approximate engines' accuracy study
 * and document, and a grid's runs evaluated with other engines. Training
 * and a grid's own summary and figures are boltzattn's (cli/main.c). Only
 * the program prints and picks exit codes: 0 ok, 1 runtime failure, 2 bad
 * usage or bad input. */
#include "presets.h"

#include <string.h>

static opt summary_opts[] = {
    {"presets", "FILE", "$BA_PRESETS, else the source tree's lab/presets.json",
     "the presets file (its paper numbers)", 0, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command summary_cmd = {
    "summary",
    "GRID [--presets FILE]\n\n"
    "Rewrites the summary of the grid in GRID (results.csv, results.json, effects.csv,\n"
    "summary.md: the files `boltzattn ablate` writes) with the paper's numbers of the\n"
    "presets file in their 'paper' column. Trains nothing.",
    summary_opts};

int cmd_summary(int argc, char **argv)
{
    const command *c = &summary_cmd;
    const char *dir = NULL;
    int rc = parse_args(c, argc, argv, &dir, 1, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!dir || !*dir)
        return usage_error(c, "the grid directory GRID is required");
    lab_presets ps;
    if ((rc = lab_presets_load(c, is_set(c, "presets") ? get_str(c, "presets") : NULL, &ps)))
        return rc;
    lab_grid g;
    lab_runs rs = {0};
    lab_cells cs = {0};
    if (!(rc = lab_grid_read(c, dir, &g)) && !(rc = lab_runs_scan(c, dir, &rs)) &&
        !(rc = lab_cells_match(c, &g, &rs, &cs))) {
        cs.refs = &ps.refs;
        rc = lab_write_outputs(c, dir, &cs);
    }
    lab_cells_free(&cs);
    lab_runs_free(&rs);
    lab_presets_free(&ps);
    return rc;
}

static void print_main_help(void)
{
    printf("boltzattn-lab %s: the experiment layer of boltzattn (presets, reports, "
           "calibration).\n\n"
           "usage: %s COMMAND [options]\n\n"
           "commands:\n"
           "  plan     the plan of a preset (lab/presets.json) that lab/reproduce.sh runs\n"
           "  more-seeds  whether a preset's grid takes more seeds (a claim it answers unresolved)\n"
           "  settled  whether a preset's ladder takes its next rung (a claim not settled)\n"
           "  summary  a grid's summary with the paper's numbers beside its effects\n"
           "  report   the results report of reproduced grids (Markdown, generated)\n"
           "  dqa      calibrate simulated quantum annealing against the exact distribution\n"
           "  approx   accuracy of the approximate engines (mf, tap, bp, hybrid) against exact\n"
           "  eval-engines  a grid's Ising runs evaluated with other engines\n"
           "  cost     what a training step of each arm of grids costs, timed side by side\n"
           "  version  print the version\n\n"
           "'%s COMMAND --help' lists a command's options and their defaults. Training,\n"
           "grids (ablate), plots and couplings: boltzattn.\n",
           BA_VERSION, prog, prog);
}

int main(int argc, char **argv)
{
    prog = "boltzattn-lab";
    /* under mpirun every lab command refuses (mpi_start: none shares work) */
    static const cli_command cmds[] = {
        {"plan", cmd_plan}, {"summary", cmd_summary}, {"report", cmd_report},
        {"dqa", cmd_dqa},   {"approx", cmd_approx},   {"eval-engines", cmd_eval_engines},
        {"more-seeds", cmd_more_seeds}, {"settled", cmd_settled}, {"cost", cmd_cost}};
    return cli_main(argc, argv, cmds, sizeof cmds / sizeof cmds[0], print_main_help);
}
