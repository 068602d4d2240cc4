/* JSON helpers the library's readers and writers share (cJSON does the
 * parsing and printing): value-type names for messages, exact integers,
 * numbers written with a chosen precision, and the strict checks that
 * refuse what readers disagree on (repeated keys, \u0000, a BOM). */
#include "core/core.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ba_json_type(const cJSON *it)
{
    if (!it)
        return "nothing";
    if (cJSON_IsString(it))
        return "a string";
    if (cJSON_IsNumber(it))
        return "a number";
    if (cJSON_IsBool(it))
        return "a boolean";
    if (cJSON_IsNull(it))
        return "null";
    if (cJSON_IsArray(it))
        return "an array";
    if (cJSON_IsObject(it))
        return "an object";
    return "an invalid value";
}

/* A JSON number that is an exact non-negative integer below 2^53. */
int ba_json_u53(const cJSON *it, uint64_t *out)
{
    if (!cJSON_IsNumber(it))
        return 0;
    double d = it->valuedouble;
    if (!(d >= 0.0 && d < BA_JSON_MAX_INT) || d != floor(d))
        return 0;
    *out = (uint64_t)d;
    return 1;
}

/* "1.5", "a string", ... for messages about a value that is not an
 * acceptable integer. */
void ba_json_describe(const cJSON *it, char *buf, size_t cap)
{
    if (cJSON_IsNumber(it))
        snprintf(buf, cap, "%.17g", it->valuedouble);
    else
        snprintf(buf, cap, "%s", ba_json_type(it));
}

char *ba_json_own(char *s)
{
    if (!s)
        return NULL;
    size_t len = strlen(s);
    char *r = malloc(len + 1);
    if (r)
        memcpy(r, s, len + 1);
    cJSON_free(s);
    return r;
}

/* ------------------------------------------------ strict JSON checks
 * cJSON accepts what other readers treat differently: a repeated key (cJSON
 * finds the first, Python's json the last), a \u0000 escape (cJSON cuts the
 * string at it, so a name would differ from the file's) and a leading UTF-8
 * BOM (skipped). A file that two readers understand differently is refused
 * instead. */

int ba_json_check_text(const char *txt, size_t len, const char *what, char *err)
{
    if (len >= 3 && memcmp(txt, "\xEF\xBB\xBF", 3) == 0)
        return ba_fail(err, BA_ERR_FORMAT,
                       "%s starts with a UTF-8 byte order mark, which JSON text must not have",
                       what);
    /* A backslash outside a string is a syntax error the parser reports,
     * so every backslash here starts an escape: skipping each escape whole
     * keeps an escaped backslash followed by "u0000" from counting. */
    for (size_t i = 0; i + 1 < len; i++) {
        if (txt[i] != '\\')
            continue;
        if (txt[i + 1] == 'u' && i + 5 < len && memcmp(txt + i + 2, "0000", 4) == 0)
            return ba_fail(err, BA_ERR_FORMAT,
                           "%s byte %zu: the escape \\u0000 puts a NUL inside a string, which "
                           "would cut a name or value short",
                           what, i);
        i++;
    }
    return BA_OK;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* The repeated key of object o, or NULL; -1 out of memory. Sorting keeps a
 * hostile header of a million keys at n log n. */
static int repeated_key(const cJSON *o, const char **dup)
{
    size_t n = 0;
    *dup = NULL;
    for (const cJSON *it = o->child; it; it = it->next)
        n++;
    if (n < 2)
        return 0;
    const cJSON **keys = malloc(n * sizeof *keys);
    if (!keys)
        return -1;
    size_t i = 0;
    for (const cJSON *it = o->child; it; it = it->next)
        keys[i++] = it;
    qsort(keys, n, sizeof *keys, cmp_key);
    for (i = 1; i < n && !*dup; i++)
        if (strcmp(keys[i - 1]->string, keys[i]->string) == 0)
            *dup = keys[i]->string;
    free(keys);
    return 0;
}

static int check_node(const cJSON *it, const char *what, char *err);

/* Every element of a list of siblings. */
static int check_list(const cJSON *first, const char *what, char *err)
{
    for (const cJSON *it = first; it; it = it->next) {
        int rc = check_node(it, what, err);
        if (rc)
            return rc;
    }
    return BA_OK;
}

/* One value and everything inside it. cJSON's parser caps nesting
 * (CJSON_NESTING_LIMIT), which bounds this recursion. */
static int check_node(const cJSON *it, const char *what, char *err)
{
    if (cJSON_IsObject(it)) {
        const char *dup;
        if (repeated_key(it, &dup))
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the key index of %s", what);
        if (dup && it->string)
            return ba_fail(err, BA_ERR_FORMAT, "%s key '%.64s' appears twice in '%.64s'", what,
                           dup, it->string);
        if (dup)
            return ba_fail(err, BA_ERR_FORMAT, "%s key '%.64s' appears twice", what, dup);
    }
    return cJSON_IsObject(it) || cJSON_IsArray(it) ? check_list(it->child, what, err) : BA_OK;
}

int ba_json_check_keys(const cJSON *it, const char *what, char *err)
{
    return it ? check_node(it, what, err) : BA_OK;
}

cJSON *ba_json_parse_strict(const char *txt, size_t len, const char *what, char *err)
{
    if (!txt || ba_json_check_text(txt, len, what, err))
        return NULL;
    cJSON *o = cJSON_ParseWithLength(txt, len);
    if (!o) {
        ba_fail(err, BA_ERR_FORMAT, "%s is not valid JSON", what);
        return NULL;
    }
    if (ba_json_check_keys(o, what, err)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
