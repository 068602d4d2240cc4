/* `boltzattn engines`: the library's engine table (ba_engine_count,
 * ba_engine_info), and the capability look-ups the tool's option checks
 * use, so that no part of the tool keeps its own list of engines. */
#include "cli.h"

#include <string.h>

unsigned engine_caps(ba_engine e)
{
    ba_engine id;
    unsigned caps;
    for (int i = 0; i < ba_engine_count(); i++)
        if (ba_engine_info(i, &id, NULL, NULL, NULL, &caps) == BA_OK && id == e)
            return caps;
    return 0;
}

static opt engines_opts[] = {
    {"names", NULL, NULL, "print only the engines' names, one a line (for scripts)", NULL, 0},
    {"with", "CAPS", NULL, "only the engines with every capability of the list (e.g. approx)",
     NULL, 0},
    {"without", "CAPS", NULL, "only the engines with none of the list's capabilities", NULL, 0},
    {0, 0, 0, 0, 0, 0},
};
static const command engines_cmd = {
    "engines",
    "[--names] [--with CAPS] [--without CAPS]\n\n"
    "Lists the library's engines from its engine table: the number a config or\n"
    "checkpoint stores, the name --engine takes, the most keys a query may have\n"
    "without a band, the capabilities and a summary. 'auto' (the default) is\n"
    "not an engine but a rule: band when the model has a band, else fast.",
    engines_opts};

/* The capability bits' words, in bit order. */
static const char *const words[] = {"exact", "enumerate", "approx", "band",
                                    "window", "context", "f32"};
#define N_WORDS (sizeof words / sizeof words[0])

static void caps_words(unsigned caps, char *buf, size_t n)
{
    buf[0] = 0;
    for (unsigned b = 0; b < N_WORDS; b++)
        if (caps & (1u << b)) {
            if (buf[0])
                strncat(buf, ",", n - strlen(buf) - 1);
            strncat(buf, words[b], n - strlen(buf) - 1);
        }
}

/* Option name's comma list of capability words as bits in *out (0 when
 * the option is not given); 0, or an exit code naming an unknown word. */
static int caps_opt(const command *c, const char *name, unsigned *out)
{
    *out = 0;
    if (!is_set(c, name))
        return 0;
    const char *p = get_str(c, name);
    while (*p) {
        size_t len = strcspn(p, ","), b = 0;
        while (b < N_WORDS && (strlen(words[b]) != len || strncmp(words[b], p, len) != 0))
            b++;
        if (b == N_WORDS)
            return usage_error(c, "--%s: unknown capability '%.*s' (expected a list of "
                               "exact|enumerate|approx|band|window|context|f32)",
                               name, (int)len, p);
        *out |= 1u << b;
        p += len + (p[len] == ',');
    }
    return 0;
}

int cmd_engines(int argc, char **argv)
{
    const command *c = &engines_cmd;
    int rc = parse_args(c, argc, argv, NULL, 0, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    unsigned with, without;
    if ((rc = caps_opt(c, "with", &with)) || (rc = caps_opt(c, "without", &without)))
        return rc;
    int names = is_set(c, "names");
    if (!names)
        printf("%-3s %-10s %-9s %-28s %s\n", "id", "engine", "max T", "capabilities",
               "summary");
    for (int i = 0; i < ba_engine_count(); i++) {
        ba_engine id;
        const char *name, *summary;
        int max_spins;
        unsigned caps;
        if (ba_engine_info(i, &id, &name, &summary, &max_spins, &caps) != BA_OK ||
            (caps & with) != with || (caps & without))
            continue;
        if (names) {
            printf("%s\n", name);
            continue;
        }
        char cw[96], lim[16];
        caps_words(caps, cw, sizeof cw);
        /* a band lifts the band engine's limit, the approximate engines
         * run at any block size */
        snprintf(lim, sizeof lim, "%d%s", max_spins, (caps & BA_ENGINE_CAP_BAND) ? "*" : "");
        printf("%-3d %-10s %-9s %-28s %s\n", (int)id, name, lim, cw, summary);
    }
    if (!names)
        printf("\n* without a band; with a band W <= %d, any T up to %d.\n"
               "auto (%d): band when the model has a band, else fast.\n",
               BA_MAX_BAND, BA_MAX_BLOCK, (int)BA_ENGINE_AUTO);
    return 0;
}
