/* JSON helpers the library's readers and writers share (cJSON does the
 * parsing and printing): value-type names for messages, exact integers,
 * numbers written with a chosen precision. */
#include "internal.h"

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
