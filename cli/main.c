/* boltzattn: the command-line tool. Train, evaluate, sample and inspect
 * Boltzmann-attention models (cli/), and train, summarise and plot a grid
 * of them (grid/ablate.c, plot.c, couplings.c); the experiment layer is
 * boltzattn-lab (lab/lab_main.c). Only the tool prints and picks exit
 * codes: 0 ok, 1 runtime failure, 2 bad usage or bad input. */
#include "cli.h"

#include <string.h>

/* -------------------------------------------------------------- main */

static void print_main_help(void)
{
    printf("boltzattn %s: Boltzmann attention (Ising-marginal attention weights), exact.\n\n"
           "usage: %s COMMAND [options]\n\n"
           "commands:\n"
           "  train    train a model (charlm or brackets, any attention variant)\n"
           "  eval     validation perplexity (charlm) or held-out accuracy (brackets)\n"
           "  sample   generate text from a charlm checkpoint\n"
           "  grads    loss and every parameter's gradient for a batch file\n"
           "  batch    write a batch file drawn from a checkpoint's task\n"
           "  ablate   train a grid of variants x T x widths x seeds; results and summary\n"
           "  plot     plots of an ablation directory (gnuplot)\n"
           "  couplings  the couplings J of a checkpoint: CSV, by distance, plots\n"
           "  engines  the library's engines: numbers, limits, capabilities (--names)\n"
           "  version  print the version\n\n"
           "'%s COMMAND --help' lists a command's options and their defaults. Presets,\n"
           "reports, calibration and the approximate engines' studies: boltzattn-lab.\n",
           BA_VERSION, prog, prog);
}

int main(int argc, char **argv)
{
    static const cli_command cmds[] = {
        {"train", cmd_train}, {"eval", cmd_eval},           {"sample", cmd_sample},
        {"grads", cmd_grads}, {"batch", cmd_batch},         {"ablate", cmd_ablate},
        {"plot", cmd_plot},   {"couplings", cmd_couplings}, {"engines", cmd_engines}};
    return cli_main(argc, argv, cmds, sizeof cmds / sizeof cmds[0], print_main_help);
}
