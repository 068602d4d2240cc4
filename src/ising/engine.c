/* The engine table (src/ising/engine.h): the one list of the library's
 * engines, and every lookup of an engine by number or name. To add an
 * engine: define `const ba_engine_ops ba_engine_NAME_ops` in a file of its
 * own under src/ising/ (CMake globs it) and add X(NAME) to BA_ENGINES
 * below, in the order of the public numbers. Nothing else names it: the
 * model, the op, the tool, Python and the tests iterate this table. */
#include "ising/ising.h"

#include <string.h>

/* In the order of the public numbers (include/boltzattn.h); the numbers
 * are fixed, the name of 3 (auto) is a rule below, not a row. */
#define BA_ENGINES(X) X(reference) X(fast) X(band) X(mf) X(tap) X(bp) X(hybrid)

#define BA_ENGINE_DECLARE(n) extern const ba_engine_ops ba_engine_##n##_ops;
BA_ENGINES(BA_ENGINE_DECLARE)
#define BA_ENGINE_ROW(n) &ba_engine_##n##_ops,
static const ba_engine_ops *const table[] = {BA_ENGINES(BA_ENGINE_ROW)};
#define N_ENGINES ((int)(sizeof table / sizeof table[0]))
static const char auto_name[] = "auto";

int ba_engine_count(void) { return N_ENGINES; }

const ba_engine_ops *ba_engine_at(int i) { return i >= 0 && i < N_ENGINES ? table[i] : NULL; }

const ba_engine_ops *ba_engine_ops_of(ba_engine e)
{
    for (int i = 0; i < N_ENGINES; i++)
        if (table[i]->id == e)
            return table[i];
    return NULL;
}

const ba_engine_ops *ba_engine_ops_named(const char *name)
{
    for (int i = 0; name && i < N_ENGINES; i++)
        if (strcmp(table[i]->name, name) == 0)
            return table[i];
    return NULL;
}

unsigned ba_engine_caps(ba_engine e)
{
    const ba_engine_ops *o = ba_engine_ops_of(e);
    return o ? o->caps : 0u;
}

int ba_engine_info(int i, ba_engine *id, const char **name, const char **summary,
                   int *max_spins, unsigned *caps)
{
    const ba_engine_ops *o = ba_engine_at(i);
    if (!o)
        return BA_ERR_ARG;
    if (id)
        *id = o->id;
    if (name)
        *name = o->name;
    if (summary)
        *summary = o->summary;
    if (max_spins)
        *max_spins = o->max_spins;
    if (caps)
        *caps = o->caps;
    return BA_OK;
}

const char *ba_engine_name(ba_engine e)
{
    if (e == BA_ENGINE_AUTO)
        return auto_name;
    const ba_engine_ops *o = ba_engine_ops_of(e);
    return o ? o->name : "?";
}

int ba_engine_parse(const char *s, ba_engine *out, char *err)
{
    const ba_engine_ops *o = ba_engine_ops_named(s);
    if (o || (s && strcmp(s, auto_name) == 0)) {
        *out = o ? o->id : BA_ENGINE_AUTO;
        return BA_OK;
    }
    /* the accepted names by number, auto in its place among them */
    char list[256] = "";
    int top = BA_ENGINE_AUTO;
    for (int i = 0; i < N_ENGINES; i++)
        top = (int)table[i]->id > top ? (int)table[i]->id : top;
    for (int e = 0; e <= top; e++) {
        const char *name = ba_engine_name((ba_engine)e);
        if (strcmp(name, "?") == 0)
            continue;
        if (*list)
            strncat(list, "|", sizeof list - strlen(list) - 1);
        strncat(list, name, sizeof list - strlen(list) - 1);
    }
    return ba_fail(err, BA_ERR_ARG, "unknown engine '%s' (expected %s)", s ? s : "(null)", list);
}

int ba_engine_max_spins(ba_engine e)
{
    /* auto without a band is the fast engine */
    const ba_engine_ops *o = ba_engine_ops_of(e == BA_ENGINE_AUTO ? BA_ENGINE_FAST : e);
    return o ? o->max_spins : 0;
}

int ba_engine_is_approx(ba_engine e) { return (ba_engine_caps(e) & BA_ENGINE_CAP_APPROX) != 0; }
