/* Files: safetensors reading and writing, the config's JSON form,
 * checkpoints, batch files and gradient files.
 *
 * The reader treats every file as hostile: all sizes are checked before
 * they are used, arithmetic on sizes is overflow-checked, nothing is
 * allocated beyond the file's own size (plus the JSON tree of a header of
 * at most ST_MAX_HEADER bytes), and every failure returns a status with a
 * message naming the offending field and value. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fileno, fstat */
#endif

#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

/* The on-disk formats are little-endian IEEE 754 and the code below moves
 * values with memcpy, so it needs a little-endian host with 4-byte floats,
 * 8-byte doubles and 32-bit ints. Compilers that say their byte order are
 * stopped here; host_is_little_endian() catches the others at run time. */
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "boltzattn's file formats need a little-endian host"
#endif
_Static_assert(sizeof(float) == 4 && FLT_MANT_DIG == 24, "F32 must be IEEE binary32");
_Static_assert(sizeof(double) == 8 && DBL_MANT_DIG == 53, "F64 must be IEEE binary64");
_Static_assert(sizeof(int) == sizeof(int32_t), "batch files store int as I32");

/* Largest header accepted, as in the reference safetensors implementation:
 * it bounds the JSON tree a hostile file can make us build. */
#define ST_MAX_HEADER 100000000u
#define ST_MAX_NDIM 8
#define ST_MAX_NAME 127 /* bytes, so a name fits ba_st_tensor.name */
/* JSON numbers go through double; integers below 2^53 are exact. */
#define ST_MAX_JSON_INT 9007199254740992.0

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static int fail_big_endian(char *err)
{
    return ba_fail(err, BA_ERR_FORMAT,
                   "this host is big-endian; safetensors files are little-endian and this "
                   "library does not swap bytes");
}

static const char *const dtype_names[] = {"F32", "I32", "F64"};
static const size_t dtype_sizes[] = {4, 4, 8};

static int dtype_known(ba_dtype d) { return (unsigned)d <= BA_DT_F64; }

/* Converts a double to float without undefined behaviour: values beyond
 * float's range become infinities instead of an out-of-range conversion. */
static float to_f32(double x)
{
    if (isnan(x))
        return NAN;
    if (x > FLT_MAX)
        return INFINITY;
    if (x < -FLT_MAX)
        return -INFINITY;
    return (float)x;
}

/* "[2, 3, 4]" into buf (always terminated, truncated if cap is short). */
static void format_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
}

static const char *json_type_name(const cJSON *it)
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
static int json_u53(const cJSON *it, uint64_t *out)
{
    if (!cJSON_IsNumber(it))
        return 0;
    double d = it->valuedouble;
    if (!(d >= 0.0 && d < ST_MAX_JSON_INT) || d != floor(d))
        return 0;
    *out = (uint64_t)d;
    return 1;
}

/* "1.5", "a string", ... for messages about a value that is not an
 * acceptable integer. */
static void describe_value(const cJSON *it, char *buf, size_t cap)
{
    if (cJSON_IsNumber(it))
        snprintf(buf, cap, "%.17g", it->valuedouble);
    else
        snprintf(buf, cap, "%s", json_type_name(it));
}

/* ---------------------------------------------------------- reading */

struct ba_st {
    unsigned char *buf; /* the whole file */
    size_t size;
    int n;
    ba_st_tensor *t;
    cJSON *meta; /* the __metadata__ object (values checked to be strings), or NULL */
};

/* Reads a whole regular file into one malloc'd buffer. */
static int read_file(const char *path, unsigned char **out, size_t *size, char *err)
{
    *out = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ba_fail(err, BA_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        int e = errno;
        fclose(f);
        return ba_fail(err, BA_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    /* Directories and pipes have no meaningful size to allocate from. */
    if (!S_ISREG(sb.st_mode)) {
        fclose(f);
        return ba_fail(err, BA_ERR_IO, "'%s' is not a regular file", path);
    }
    if (sb.st_size < 0 || (uintmax_t)sb.st_size >= (uintmax_t)SIZE_MAX) {
        fclose(f);
        return ba_fail(err, BA_ERR_IO, "'%s' is too large to read into memory", path);
    }
    size_t n = (size_t)sb.st_size;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate %zu bytes to read '%s'", n, path);
    }
    size_t got = fread(buf, 1, n, f);
    int read_error = ferror(f);
    int e = errno;
    /* One more byte would mean the file grew after fstat: refuse rather
     * than parse a prefix of it. */
    int grew = got == n && fgetc(f) != EOF;
    fclose(f);
    if (got != n || read_error || grew) {
        free(buf);
        if (read_error)
            return ba_fail(err, BA_ERR_IO, "cannot read '%s': %s", path, strerror(e));
        return ba_fail(err, BA_ERR_IO, "'%s' changed size while being read (%zu of %zu bytes)",
                       path, got, n);
    }
    *out = buf;
    *size = n;
    return BA_OK;
}

static uint64_t load_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void store_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static int cmp_tensor_name(const void *a, const void *b)
{
    const ba_st_tensor *x = *(const ba_st_tensor *const *)a;
    const ba_st_tensor *y = *(const ba_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

/* By data position, then length: zero-length tensors sort before the
 * tensor that starts where they sit. */
static int cmp_tensor_pos(const void *a, const void *b)
{
    const ba_st_tensor *x = *(const ba_st_tensor *const *)a;
    const ba_st_tensor *y = *(const ba_st_tensor *const *)b;
    const unsigned char *px = x->data, *py = y->data;
    if (px != py)
        return px < py ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int cmp_json_key(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* Checks one tensor entry of the header and fills t; its data lies at
 * data + data_offsets[0] in a region of data_size bytes. */
static int parse_tensor(const cJSON *e, const unsigned char *data, size_t data_size,
                        ba_st_tensor *t, char *err)
{
    const char *name = e->string;
    size_t name_len = strlen(name);
    if (name_len == 0)
        return ba_fail(err, BA_ERR_FORMAT, "a tensor has an empty name");
    if (name_len > ST_MAX_NAME)
        return ba_fail(err, BA_ERR_FORMAT, "tensor name '%.40s...' is %zu bytes long (limit %d)",
                       name, name_len, ST_MAX_NAME);
    memcpy(t->name, name, name_len + 1);
    if (!cJSON_IsObject(e))
        return ba_fail(err, BA_ERR_FORMAT, "tensor '%s': entry is %s, not an object", name,
                       json_type_name(e));

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dt))
        return ba_fail(err, BA_ERR_FORMAT, "tensor '%s': 'dtype' is %s, expected a string", name,
                       json_type_name(dt));
    int d = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(dt->valuestring, dtype_names[i]) == 0)
            d = i;
    if (d < 0)
        return ba_fail(err, BA_ERR_FORMAT, "tensor '%s': unknown dtype '%.32s' (expected F32, I32 or F64)",
                       name, dt->valuestring);
    t->dtype = (ba_dtype)d;

    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsArray(sh))
        return ba_fail(err, BA_ERR_FORMAT, "tensor '%s': 'shape' is %s, expected an array", name,
                       json_type_name(sh));
    int ndim = 0;
    size_t nbytes = dtype_sizes[d];
    int overflow = 0;
    for (const cJSON *it = sh->child; it; it = it->next) {
        if (ndim == ST_MAX_NDIM)
            return ba_fail(err, BA_ERR_FORMAT, "tensor '%s': shape has more than %d dimensions",
                           name, ST_MAX_NDIM);
        uint64_t dim;
        if (!json_u53(it, &dim)) {
            char v[48];
            describe_value(it, v, sizeof v);
            return ba_fail(err, BA_ERR_FORMAT,
                           "tensor '%s': shape[%d] = %s is not a non-negative integer below 2^53",
                           name, ndim, v);
        }
        t->shape[ndim++] = (int64_t)dim;
        /* Keep multiplying after an overflow is seen only to report it
         * once; a later zero dimension makes the product 0 again, which
         * is a legitimate empty tensor. */
        if (dim > SIZE_MAX || ba_mul_size(nbytes, (size_t)dim, &nbytes))
            overflow = 1;
    }
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] == 0)
            overflow = 0, nbytes = 0;
    if (overflow) {
        char s[96];
        format_shape(s, sizeof s, ndim, t->shape);
        return ba_fail(err, BA_ERR_FORMAT, "tensor '%s': shape %s has more bytes than fit in memory",
                       name, s);
    }
    t->nbytes = nbytes;

    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return ba_fail(err, BA_ERR_FORMAT,
                       "tensor '%s': 'data_offsets' is %s, expected an array [begin, end]", name,
                       cJSON_IsArray(off) ? "an array without exactly 2 entries" : json_type_name(off));
    uint64_t begin, end;
    for (int i = 0; i < 2; i++) {
        const cJSON *it = cJSON_GetArrayItem(off, i);
        if (!json_u53(it, i ? &end : &begin)) {
            char v[48];
            describe_value(it, v, sizeof v);
            return ba_fail(err, BA_ERR_FORMAT,
                           "tensor '%s': data_offsets[%d] = %s is not a non-negative integer", name,
                           i, v);
        }
    }
    if (begin > end || end > data_size)
        return ba_fail(err, BA_ERR_FORMAT,
                       "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                       "] lie outside the %zu data bytes",
                       name, begin, end, data_size);
    if (end - begin != nbytes) {
        char s[96];
        format_shape(s, sizeof s, ndim, t->shape);
        return ba_fail(err, BA_ERR_FORMAT,
                       "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                       " bytes but dtype %s shape %s needs %zu",
                       name, begin, end, end - begin, dtype_names[d], s, nbytes);
    }
    t->data = data + begin;
    return BA_OK;
}

static int parse_metadata(const cJSON *meta, char *err)
{
    if (!cJSON_IsObject(meta))
        return ba_fail(err, BA_ERR_FORMAT, "__metadata__ is %s, expected an object",
                       json_type_name(meta));
    int n = 0;
    for (const cJSON *it = meta->child; it; it = it->next) {
        if (!cJSON_IsString(it))
            return ba_fail(err, BA_ERR_FORMAT, "__metadata__ value of '%.64s' is %s, not a string",
                           it->string, json_type_name(it));
        n++;
    }
    if (n < 2)
        return BA_OK;
    /* Sorting finds duplicate keys in n log n even in a huge header. */
    const cJSON **keys = malloc((size_t)n * sizeof *keys);
    if (!keys)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the metadata index");
    int i = 0;
    for (const cJSON *it = meta->child; it; it = it->next)
        keys[i++] = it;
    qsort(keys, (size_t)n, sizeof *keys, cmp_json_key);
    int rc = BA_OK;
    for (i = 1; i < n && rc == BA_OK; i++)
        if (strcmp(keys[i - 1]->string, keys[i]->string) == 0)
            rc = ba_fail(err, BA_ERR_FORMAT, "__metadata__ key '%.64s' appears twice",
                         keys[i]->string);
    free(keys);
    return rc;
}

/* Names unique; tensors laid end to end from offset 0 to the end of the
 * data region, as the safetensors reference implementation requires: no
 * overlap, no hole, no trailing bytes. */
static int check_layout(const ba_st *st, const unsigned char *data, size_t data_size, char *err)
{
    int n = st->n;
    if (n == 0) {
        if (data_size != 0)
            return ba_fail(err, BA_ERR_FORMAT, "no tensors but %zu data bytes follow the header",
                           data_size);
        return BA_OK;
    }
    const ba_st_tensor **ix = malloc((size_t)n * sizeof *ix);
    if (!ix)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the tensor index (%d tensors)", n);
    for (int i = 0; i < n; i++)
        ix[i] = &st->t[i];
    int rc = BA_OK;
    qsort(ix, (size_t)n, sizeof *ix, cmp_tensor_name);
    for (int i = 1; i < n && rc == BA_OK; i++)
        if (strcmp(ix[i - 1]->name, ix[i]->name) == 0)
            rc = ba_fail(err, BA_ERR_FORMAT, "tensor name '%s' appears twice", ix[i]->name);
    if (rc == BA_OK) {
        qsort(ix, (size_t)n, sizeof *ix, cmp_tensor_pos);
        size_t expect = 0; /* end of the tensors so far */
        const char *prev = NULL;
        for (int i = 0; i < n && rc == BA_OK; i++) {
            size_t begin = (size_t)((const unsigned char *)ix[i]->data - data);
            if (begin < expect)
                rc = ba_fail(err, BA_ERR_FORMAT,
                             "tensors '%s' and '%s' overlap (bytes %zu..%zu and %zu..%zu)", prev,
                             ix[i]->name, expect - ix[i - 1]->nbytes, expect, begin,
                             begin + ix[i]->nbytes);
            else if (begin > expect)
                rc = ba_fail(err, BA_ERR_FORMAT,
                             "%zu unused data bytes before tensor '%s' (offset %zu, expected %zu)",
                             begin - expect, ix[i]->name, begin, expect);
            expect = begin + ix[i]->nbytes;
            prev = ix[i]->name;
        }
        if (rc == BA_OK && expect != data_size)
            rc = ba_fail(err, BA_ERR_FORMAT,
                         "the tensors end at data byte %zu but the data region has %zu bytes",
                         expect, data_size);
    }
    free(ix);
    return rc;
}

/* Parses the header JSON (hdr is NUL-terminated, len bytes) into st. */
static int parse_header(ba_st *st, const char *hdr, size_t len, const unsigned char *data,
                        size_t data_size, char *err)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, len, &end, 0);
    if (!root) {
        size_t at = end && end >= hdr && end <= hdr + len ? (size_t)(end - hdr) : 0;
        return ba_fail(err, BA_ERR_FORMAT, "header is not valid JSON (error near header byte %zu)",
                       at);
    }
    /* Only padding may follow the JSON value. */
    for (const char *p = end; p < hdr + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return ba_fail(err, BA_ERR_FORMAT,
                           "header has bytes after its JSON value (header byte %zu is 0x%02x)",
                           (size_t)(p - hdr), (unsigned)(unsigned char)*p);
        }
    if (!cJSON_IsObject(root)) {
        int rc = ba_fail(err, BA_ERR_FORMAT, "header is %s, not a JSON object",
                         json_type_name(root));
        cJSON_Delete(root);
        return rc;
    }
    size_t count = 0;
    int n_meta = 0;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0)
            n_meta++;
        else
            count++;
    }
    int rc = BA_OK;
    if (n_meta > 1)
        rc = ba_fail(err, BA_ERR_FORMAT, "header has %d __metadata__ entries", n_meta);
    else if (count > INT_MAX)
        rc = ba_fail(err, BA_ERR_FORMAT, "header lists %zu tensors", count);
    else if (!(st->t = calloc(count ? count : 1, sizeof *st->t)))
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate %zu tensor descriptions", count);
    for (cJSON *it = root->child; it && rc == BA_OK; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0)
            rc = parse_metadata(it, err);
        else if ((rc = parse_tensor(it, data, data_size, &st->t[st->n], err)) == BA_OK)
            st->n++;
    }
    if (rc == BA_OK)
        rc = check_layout(st, data, data_size, err);
    if (rc == BA_OK)
        st->meta = cJSON_DetachItemFromObjectCaseSensitive(root, "__metadata__");
    cJSON_Delete(root);
    return rc;
}

int ba_st_read(ba_st **out, const char *path, char *err)
{
    if (!out || !path)
        return ba_fail(err, BA_ERR_ARG, "ba_st_read: out and path must not be NULL");
    *out = NULL;
    if (!host_is_little_endian())
        return fail_big_endian(err);
    ba_st *st = calloc(1, sizeof *st);
    if (!st)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate a safetensors reader");
    int rc = read_file(path, &st->buf, &st->size, err);
    if (rc != BA_OK) {
        ba_st_free(st);
        return rc;
    }
    if (st->size < 8) {
        rc = ba_fail(err, BA_ERR_FORMAT,
                     "'%s' is %zu bytes long, too short for the 8-byte header length", path,
                     st->size);
        ba_st_free(st);
        return rc;
    }
    uint64_t hlen = load_le64(st->buf);
    size_t avail = st->size - 8;
    if (hlen > ST_MAX_HEADER)
        rc = ba_fail(err, BA_ERR_FORMAT,
                     "'%s': header length %" PRIu64 " is above the limit of %u bytes", path, hlen,
                     ST_MAX_HEADER);
    else if (hlen > avail)
        rc = ba_fail(err, BA_ERR_FORMAT,
                     "'%s': header length %" PRIu64 " exceeds the %zu bytes after the length field",
                     path, hlen, avail);
    if (rc != BA_OK) {
        ba_st_free(st);
        return rc;
    }
    /* A NUL-terminated copy keeps the JSON parser inside the header
     * whatever it does at the end of its input. */
    char *hdr = malloc((size_t)hlen + 1);
    if (!hdr) {
        ba_st_free(st);
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the %" PRIu64 "-byte header", hlen);
    }
    memcpy(hdr, st->buf + 8, (size_t)hlen);
    hdr[hlen] = '\0';
    /* JSON text never holds a raw NUL; the parser would read one as the end
     * of a string and report a misleading problem further on. */
    const char *nul = memchr(hdr, '\0', (size_t)hlen);
    if (nul) {
        rc = ba_fail(err, BA_ERR_FORMAT, "'%s': header byte %zu is NUL, which JSON never holds",
                     path, (size_t)(nul - hdr));
        free(hdr);
        ba_st_free(st);
        return rc;
    }
    const unsigned char *data = st->buf + 8 + hlen;
    rc = parse_header(st, hdr, (size_t)hlen, data, avail - (size_t)hlen, err);
    free(hdr);
    if (rc != BA_OK) {
        ba_st_free(st);
        return rc;
    }
    *out = st;
    return BA_OK;
}

void ba_st_free(ba_st *st)
{
    if (!st)
        return;
    cJSON_Delete(st->meta);
    free(st->t);
    free(st->buf);
    free(st);
}

int ba_st_count(const ba_st *st) { return st ? st->n : 0; }

const ba_st_tensor *ba_st_get(const ba_st *st, int idx)
{
    if (!st || idx < 0 || idx >= st->n)
        return NULL;
    return &st->t[idx];
}

const ba_st_tensor *ba_st_find(const ba_st *st, const char *name)
{
    if (!st || !name)
        return NULL;
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->t[i].name, name) == 0)
            return &st->t[i];
    return NULL;
}

const char *ba_st_metadata(const ba_st *st, const char *key)
{
    if (!st || !st->meta || !key)
        return NULL;
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(st->meta, key);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* ---------------------------------------------------------- writing */

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first name that occurs twice among n, or NULL (*nomem set if the
 * index could not be allocated). */
static const char *find_duplicate(const char *const *names, int n, int *nomem)
{
    *nomem = 0;
    if (n < 2)
        return NULL;
    const char **s = malloc((size_t)n * sizeof *s);
    if (!s) {
        *nomem = 1;
        return NULL;
    }
    memcpy(s, names, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_cstr);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (strcmp(s[i - 1], s[i]) == 0)
            dup = s[i];
    free(s);
    return dup;
}

static cJSON *json_u64(uint64_t v)
{
    /* Raw text keeps the integer exact, whatever cJSON's number printing
     * does with large doubles. */
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, v);
    return cJSON_CreateRaw(num);
}

/* Builds the header JSON; sizes[i] are the entries' byte counts. */
static cJSON *build_header(const ba_st_entry *entries, int n, const size_t *sizes,
                           const char *const *meta_keys, const char *const *meta_vals, int n_meta)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    if (n_meta > 0) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        if (!meta)
            goto fail;
        for (int i = 0; i < n_meta; i++)
            if (!cJSON_AddStringToObject(meta, meta_keys[i], meta_vals[i]))
                goto fail;
    }
    uint64_t pos = 0;
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_AddObjectToObject(root, entries[i].name);
        if (!e || !cJSON_AddStringToObject(e, "dtype", dtype_names[entries[i].dtype]))
            goto fail;
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        if (!shape)
            goto fail;
        for (int k = 0; k < entries[i].ndim; k++) {
            cJSON *d = json_u64((uint64_t)entries[i].shape[k]);
            if (!d || !cJSON_AddItemToArray(shape, d)) {
                cJSON_Delete(d);
                goto fail;
            }
        }
        cJSON *off = cJSON_AddArrayToObject(e, "data_offsets");
        if (!off)
            goto fail;
        uint64_t ends[2] = {pos, pos + sizes[i]};
        for (int k = 0; k < 2; k++) {
            cJSON *d = json_u64(ends[k]);
            if (!d || !cJSON_AddItemToArray(off, d)) {
                cJSON_Delete(d);
                goto fail;
            }
        }
        pos += sizes[i];
    }
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}

/* Checks the entries and metadata of ba_st_write; sizes[i] gets each
 * entry's byte count. */
static int check_entries(const ba_st_entry *entries, int n, const char *const *meta_keys,
                         const char *const *meta_vals, int n_meta, size_t *sizes, char *err)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const ba_st_entry *e = &entries[i];
        if (!e->name || !e->name[0] || strlen(e->name) > ST_MAX_NAME)
            return ba_fail(err, BA_ERR_ARG, "entry %d: name must have 1 to %d bytes", i,
                           ST_MAX_NAME);
        if (strcmp(e->name, "__metadata__") == 0)
            return ba_fail(err, BA_ERR_ARG, "entry %d: '__metadata__' is reserved", i);
        if (!dtype_known(e->dtype))
            return ba_fail(err, BA_ERR_ARG, "tensor '%s': dtype %d is not F32, I32 or F64",
                           e->name, (int)e->dtype);
        if (e->ndim < 0 || e->ndim > ST_MAX_NDIM)
            return ba_fail(err, BA_ERR_ARG, "tensor '%s': ndim = %d is out of range [0, %d]",
                           e->name, e->ndim, ST_MAX_NDIM);
        size_t nb = dtype_sizes[e->dtype];
        for (int k = 0; k < e->ndim; k++) {
            /* The reader accepts dimensions below 2^53 only. */
            if (e->shape[k] < 0 || (double)e->shape[k] >= ST_MAX_JSON_INT)
                return ba_fail(err, BA_ERR_ARG,
                               "tensor '%s': shape[%d] = %" PRId64 " is out of range", e->name,
                               k, e->shape[k]);
            if ((uint64_t)e->shape[k] > SIZE_MAX || ba_mul_size(nb, (size_t)e->shape[k], &nb))
                return ba_fail(err, BA_ERR_ARG, "tensor '%s': shape is too large", e->name);
        }
        if (nb > 0 && !e->data)
            return ba_fail(err, BA_ERR_ARG, "tensor '%s': data is NULL", e->name);
        if (total + nb < total || (double)(total + nb) >= ST_MAX_JSON_INT)
            return ba_fail(err, BA_ERR_ARG, "tensor '%s': the data would exceed 2^53 bytes",
                           e->name);
        sizes[i] = nb;
        total += nb;
    }
    for (int i = 0; i < n_meta; i++)
        if (!meta_keys[i] || !meta_vals[i])
            return ba_fail(err, BA_ERR_ARG, "metadata pair %d has a NULL key or value", i);

    const char **names = malloc((size_t)(n > n_meta ? n : n_meta) * sizeof *names + 1);
    if (!names)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the name index");
    for (int i = 0; i < n; i++)
        names[i] = entries[i].name;
    int nomem;
    const char *dup = find_duplicate(names, n, &nomem);
    int rc = BA_OK;
    if (nomem)
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate the name index");
    else if (dup)
        rc = ba_fail(err, BA_ERR_ARG, "tensor name '%s' appears twice", dup);
    if (rc == BA_OK && n_meta > 1) {
        memcpy(names, meta_keys, (size_t)n_meta * sizeof *names);
        dup = find_duplicate(names, n_meta, &nomem);
        if (nomem)
            rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate the name index");
        else if (dup)
            rc = ba_fail(err, BA_ERR_ARG, "metadata key '%.64s' appears twice", dup);
    }
    free(names);
    return rc;
}

/* Writes the bytes of a file to path via path.tmp, fsync and a rename, so an
 * interrupted save never leaves a half-written file under path. */
static int write_file(const char *path, const unsigned char *head, size_t head_len,
                      const ba_st_entry *entries, const size_t *sizes, int n, char *err)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate a file name");
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int rc = ba_fail(err, BA_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    int ok = fwrite(head, 1, head_len, f) == head_len;
    for (int i = 0; ok && i < n; i++)
        ok = sizes[i] == 0 || fwrite(entries[i].data, 1, sizes[i], f) == sizes[i];
    /* on the disk before the rename makes it the file, so a crash of the
     * machine cannot leave a renamed but empty file */
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        int rc = ba_fail(err, BA_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path,
                         strerror(errno));
        remove(tmp);
        free(tmp);
        return rc;
    }
    if (!ok) {
        remove(tmp);
        free(tmp);
        return ba_fail(err, BA_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    free(tmp);
    return BA_OK;
}

int ba_st_write(const char *path, const ba_st_entry *entries, int n,
                const char *const *meta_keys, const char *const *meta_vals, int n_meta, char *err)
{
    if (!path)
        return ba_fail(err, BA_ERR_ARG, "ba_st_write: path is NULL");
    if (n < 0 || (n > 0 && !entries))
        return ba_fail(err, BA_ERR_ARG, "ba_st_write: %d entries at %p", n, (const void *)entries);
    if (n_meta < 0 || (n_meta > 0 && (!meta_keys || !meta_vals)))
        return ba_fail(err, BA_ERR_ARG, "ba_st_write: %d metadata pairs without key/value arrays",
                       n_meta);
    if (!host_is_little_endian())
        return fail_big_endian(err);
    size_t *sizes = malloc((size_t)n * sizeof *sizes + 1);
    if (!sizes)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate %d entry sizes", n);
    int rc = check_entries(entries, n, meta_keys, meta_vals, n_meta, sizes, err);
    if (rc != BA_OK) {
        free(sizes);
        return rc;
    }
    cJSON *root = build_header(entries, n, sizes, meta_keys, meta_vals, n_meta);
    char *json = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json) {
        free(sizes);
        return ba_fail(err, BA_ERR_NOMEM, "cannot build the safetensors header");
    }
    size_t jlen = strlen(json);
    /* Spaces pad the header so the data starts 8-byte aligned. */
    size_t hlen = (jlen + 7) / 8 * 8;
    unsigned char *head = NULL;
    if (hlen > ST_MAX_HEADER)
        rc = ba_fail(err, BA_ERR_ARG, "the header would have %zu bytes, above the limit of %u",
                     hlen, ST_MAX_HEADER);
    else if (!(head = malloc(8 + hlen)))
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate the %zu-byte header", hlen);
    if (rc == BA_OK) {
        store_le64(head, hlen);
        memcpy(head + 8, json, jlen);
        memset(head + 8 + jlen, ' ', hlen - jlen);
        rc = write_file(path, head, 8 + hlen, entries, sizes, n, err);
    }
    free(head);
    cJSON_free(json);
    free(sizes);
    return rc;
}

/* ------------------------------------------------------ config JSON */

/* The sampler's fields as (name, kind of value, offset) rows: the one list
 * the writer and the reader share. */
enum { SF_INT, SF_DOUBLE };
static const struct {
    const char *name;
    int type;
    size_t off;
} sampler_fields[] = {
    {"shots", SF_INT, offsetof(ba_sampler, shots)},
    {"beta_assumed", SF_DOUBLE, offsetof(ba_sampler, beta_assumed)},
    {"tau", SF_DOUBLE, offsetof(ba_sampler, tau)},
    {"gamma", SF_DOUBLE, offsetof(ba_sampler, gamma)},
    {"lambda", SF_DOUBLE, offsetof(ba_sampler, lambda)},
    {"trotter_steps", SF_INT, offsetof(ba_sampler, trotter_steps)},
    {"order", SF_INT, offsetof(ba_sampler, order)},
    {"chains", SF_INT, offsetof(ba_sampler, chains)},
    {"burnin", SF_INT, offsetof(ba_sampler, burnin)},
    {"thin", SF_INT, offsetof(ba_sampler, thin)},
    {"sweeps", SF_INT, offsetof(ba_sampler, sweeps)},
    {"beta0", SF_DOUBLE, offsetof(ba_sampler, beta0)},
};
#define N_SAMPLER_FIELDS ((int)(sizeof sampler_fields / sizeof sampler_fields[0]))

/* "sampler": {"kind": ...} for exact, with every parameter otherwise.
 * cJSON prints doubles with enough digits to read them back exactly. */
static int add_sampler(cJSON *o, const ba_sampler *sp)
{
    cJSON *so = cJSON_AddObjectToObject(o, "sampler");
    int ok = so && cJSON_AddStringToObject(so, "kind", ba_sampler_name(sp->kind));
    for (int i = 0; ok && sp->kind != BA_SAMPLER_EXACT && i < N_SAMPLER_FIELDS; i++) {
        const char *p = (const char *)sp + sampler_fields[i].off;
        double v;
        if (sampler_fields[i].type == SF_INT) {
            int x;
            memcpy(&x, p, sizeof x);
            v = x;
        } else {
            memcpy(&v, p, sizeof v);
        }
        ok = cJSON_AddNumberToObject(so, sampler_fields[i].name, v) != NULL;
    }
    return ok;
}

/* Reads "sampler" (absent: exact, as written before samplers existed). */
static int cfg_sampler(const cJSON *o, ba_sampler *out, char *err)
{
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "sampler");
    if (!so) {
        *out = ba_sampler_default(BA_SAMPLER_EXACT);
        return BA_OK;
    }
    if (!cJSON_IsObject(so))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler' is %s, expected an object",
                       json_type_name(so));
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(so, "kind");
    if (!k)
        return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler.kind' is missing");
    if (!cJSON_IsString(k))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler.kind' is %s, expected a string",
                       json_type_name(k));
    char why[BA_ERR_LEN];
    ba_sampler_kind kind;
    if (ba_sampler_parse(k->valuestring, &kind, why))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler.kind': %s", why);
    ba_sampler sp = ba_sampler_default(kind);
    for (int i = 0; i < N_SAMPLER_FIELDS; i++) {
        const char *name = sampler_fields[i].name;
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(so, name);
        if (!it)
            continue;
        if (!cJSON_IsNumber(it))
            return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler.%s' is %s, expected a number",
                           name, json_type_name(it));
        double d = it->valuedouble;
        char *p = (char *)&sp + sampler_fields[i].off;
        if (sampler_fields[i].type == SF_INT) {
            if (!(d >= INT_MIN && d <= INT_MAX) || d != floor(d))
                return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler.%s' = %.17g is not an int",
                               name, d);
            int x = (int)d;
            memcpy(p, &x, sizeof x);
        } else {
            if (!isfinite(d))
                return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler.%s' is not finite", name);
            memcpy(p, &d, sizeof d);
        }
    }
    if (ba_sampler_validate(&sp, why))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'sampler': %s", why);
    *out = sp;
    return BA_OK;
}

char *ba_config_to_json(const ba_config *cfg)
{
    if (!cfg)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    char seed[24];
    snprintf(seed, sizeof seed, "%" PRIu64, cfg->data_seed);
    int ok = o && cJSON_AddStringToObject(o, "task", ba_task_name(cfg->task)) &&
             cJSON_AddStringToObject(o, "attn", ba_attn_name(cfg->attn)) &&
             cJSON_AddStringToObject(o, "engine", ba_engine_name(cfg->engine)) &&
             cJSON_AddNumberToObject(o, "n_layer", cfg->n_layer) &&
             cJSON_AddNumberToObject(o, "n_head", cfg->n_head) &&
             cJSON_AddNumberToObject(o, "n_embd", cfg->n_embd) &&
             cJSON_AddNumberToObject(o, "block_size", cfg->block_size) &&
             cJSON_AddNumberToObject(o, "vocab_size", cfg->vocab_size) &&
             cJSON_AddNumberToObject(o, "out_size", cfg->out_size) &&
             cJSON_AddBoolToObject(o, "ffn", cfg->ffn != 0) &&
             cJSON_AddNumberToObject(o, "kinds", cfg->kinds) &&
             cJSON_AddNumberToObject(o, "n_heldout", cfg->n_heldout) &&
             /* A string: JSON numbers are doubles and would round 64 bits. */
             cJSON_AddStringToObject(o, "data_seed", seed);
    if (ok && cfg->task == BA_TASK_CHARLM && cfg->vocab_size >= 1 && cfg->vocab_size <= 256) {
        cJSON *v = cJSON_AddArrayToObject(o, "vocab");
        ok = v != NULL;
        for (int i = 0; ok && i < cfg->vocab_size; i++) {
            cJSON *b = cJSON_CreateNumber(cfg->vocab[i]);
            ok = b && cJSON_AddItemToArray(v, b);
            if (!ok)
                cJSON_Delete(b);
        }
    }
    if (ok)
        ok = add_sampler(o, &cfg->sampler);
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s)
        return NULL;
    /* Copy into plain malloc so the caller's free() matches even if the
     * application installed other cJSON allocation hooks. */
    size_t len = strlen(s);
    char *r = malloc(len + 1);
    if (r)
        memcpy(r, s, len + 1);
    cJSON_free(s);
    return r;
}

/* An int field: required ones must be present. */
static int cfg_int(const cJSON *o, const char *key, int required, int *out, char *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it) {
        if (required)
            return ba_fail(err, BA_ERR_FORMAT, "config field '%s' is missing", key);
        return BA_OK;
    }
    if (!cJSON_IsNumber(it))
        return ba_fail(err, BA_ERR_FORMAT, "config field '%s' is %s, expected an integer", key,
                       json_type_name(it));
    double d = it->valuedouble;
    if (!(d >= INT_MIN && d <= INT_MAX) || d != floor(d))
        return ba_fail(err, BA_ERR_FORMAT, "config field '%s' = %.17g is not an int", key, d);
    *out = (int)d;
    return BA_OK;
}

/* A name field parsed with one of the ba_*_parse functions. */
static const char *cfg_name(const cJSON *o, const char *key, int required, char *err, int *rc)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    *rc = BA_OK;
    if (!it) {
        if (required)
            *rc = ba_fail(err, BA_ERR_FORMAT, "config field '%s' is missing", key);
        return NULL;
    }
    if (!cJSON_IsString(it)) {
        *rc = ba_fail(err, BA_ERR_FORMAT, "config field '%s' is %s, expected a string", key,
                      json_type_name(it));
        return NULL;
    }
    return it->valuestring;
}

/* A name the parse function rejected is a malformed file, not a bad
 * argument: restate its message under BA_ERR_FORMAT. */
static int cfg_bad_name(const char *key, const char *why, char *err)
{
    return ba_fail(err, BA_ERR_FORMAT, "config field '%s': %s", key, why);
}

static int cfg_seed(const cJSON *o, uint64_t *out, char *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, "data_seed");
    if (!it)
        return BA_OK;
    if (cJSON_IsNumber(it)) {
        uint64_t v;
        if (!json_u53(it, &v))
            return ba_fail(err, BA_ERR_FORMAT,
                           "config field 'data_seed' = %.17g is not an integer in [0, 2^53) "
                           "(write larger seeds as a decimal string)",
                           it->valuedouble);
        *out = v;
        return BA_OK;
    }
    if (!cJSON_IsString(it))
        return ba_fail(err, BA_ERR_FORMAT,
                       "config field 'data_seed' is %s, expected a decimal string or a number",
                       json_type_name(it));
    const char *s = it->valuestring;
    uint64_t v = 0;
    int ok = s[0] != '\0';
    for (const char *p = s; ok && *p; p++) {
        unsigned digit = (unsigned)(*p - '0');
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - digit) / 10)
            ok = 0;
        else
            v = v * 10 + digit;
    }
    if (!ok)
        return ba_fail(err, BA_ERR_FORMAT,
                       "config field 'data_seed' = '%.40s' is not a decimal integer below 2^64", s);
    *out = v;
    return BA_OK;
}

static int cfg_vocab(const cJSON *o, ba_config *c, char *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "vocab");
    if (!v)
        return ba_fail(err, BA_ERR_FORMAT, "config field 'vocab' is missing (required for charlm)");
    if (!cJSON_IsArray(v))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'vocab' is %s, expected an array",
                       json_type_name(v));
    int n = cJSON_GetArraySize(v);
    if (n != c->vocab_size)
        return ba_fail(err, BA_ERR_FORMAT, "config field 'vocab' has %d entries, vocab_size is %d",
                       n, c->vocab_size);
    unsigned char seen[256] = {0};
    int i = 0;
    for (const cJSON *it = v->child; it; it = it->next, i++) {
        uint64_t b;
        if (!json_u53(it, &b) || b > 255) {
            char d[48];
            describe_value(it, d, sizeof d);
            return ba_fail(err, BA_ERR_FORMAT, "config field 'vocab[%d]' = %s is not a byte 0..255",
                           i, d);
        }
        if (seen[b])
            return ba_fail(err, BA_ERR_FORMAT, "config field 'vocab[%d]' = %u appears twice", i,
                           (unsigned)b);
        seen[b] = 1;
        c->vocab[i] = (uint8_t)b;
    }
    return BA_OK;
}

static int config_from_object(const cJSON *o, ba_config *c, char *err)
{
    int rc;
    char why[BA_ERR_LEN];
    const char *s = cfg_name(o, "task", 1, err, &rc);
    if (rc)
        return rc;
    if (ba_task_parse(s, &c->task, why))
        return cfg_bad_name("task", why, err);
    if (!(s = cfg_name(o, "attn", 1, err, &rc)) && rc)
        return rc;
    if (ba_attn_parse(s, &c->attn, why))
        return cfg_bad_name("attn", why, err);
    if ((s = cfg_name(o, "engine", 0, err, &rc)) && ba_engine_parse(s, &c->engine, why))
        return cfg_bad_name("engine", why, err);
    if (rc)
        return rc;
    if ((rc = cfg_int(o, "n_layer", 1, &c->n_layer, err)) ||
        (rc = cfg_int(o, "n_head", 1, &c->n_head, err)) ||
        (rc = cfg_int(o, "n_embd", 1, &c->n_embd, err)) ||
        (rc = cfg_int(o, "block_size", 1, &c->block_size, err)) ||
        (rc = cfg_int(o, "vocab_size", 1, &c->vocab_size, err)) ||
        (rc = cfg_int(o, "out_size", 1, &c->out_size, err)) ||
        (rc = cfg_int(o, "kinds", 0, &c->kinds, err)) ||
        (rc = cfg_int(o, "n_heldout", 0, &c->n_heldout, err)) ||
        (rc = cfg_seed(o, &c->data_seed, err)))
        return rc;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "ffn");
    if (!f)
        return ba_fail(err, BA_ERR_FORMAT, "config field 'ffn' is missing");
    if (!cJSON_IsBool(f))
        return ba_fail(err, BA_ERR_FORMAT, "config field 'ffn' is %s, expected true or false",
                       json_type_name(f));
    c->ffn = cJSON_IsTrue(f) ? 1 : 0;
    if ((rc = cfg_sampler(o, &c->sampler, err)))
        return rc;
    /* An out-of-range vocab_size is left to ba_config_validate to report;
     * reading a vocab for it could overrun c->vocab. */
    if (c->task == BA_TASK_CHARLM && c->vocab_size >= 1 && c->vocab_size <= 256 &&
        (rc = cfg_vocab(o, c, err)))
        return rc;
    return ba_config_validate(c, err);
}

int ba_config_from_json(const char *json, ba_config *cfg, char *err)
{
    if (!json || !cfg)
        return ba_fail(err, BA_ERR_ARG, "ba_config_from_json: json and cfg must not be NULL");
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithOpts(json, &end, 1);
    if (!o) {
        size_t at = end && end >= json ? (size_t)(end - json) : 0;
        return ba_fail(err, BA_ERR_FORMAT, "config is not valid JSON (error near byte %zu)", at);
    }
    int rc;
    if (!cJSON_IsObject(o)) {
        rc = ba_fail(err, BA_ERR_FORMAT, "config is %s, not a JSON object", json_type_name(o));
    } else {
        /* Defaults for the optional fields; cfg is written only on success. */
        ba_config c = ba_config_default(BA_TASK_CHARLM, BA_ATTN_SOFTMAX, 0);
        rc = config_from_object(o, &c, err);
        if (rc == BA_OK)
            *cfg = c;
    }
    cJSON_Delete(o);
    return rc;
}

/* ---------------------------------------------------------- model files */

/* Converts the model values src (P elements, laid out by the model's
 * tensors) to F32 in dst and fills one F32 entry per tensor pointing into
 * dst. infos and entries have num_tensors elements. With check_finite,
 * a value that is not finite as a float is BA_ERR_NUMERIC. */
static int model_entries(const ba_model *m, const ba_real *src, float *dst,
                         ba_tensor_info *infos, ba_st_entry *entries, int check_finite,
                         const char *what, char *err)
{
    int nt = ba_model_num_tensors(m);
    size_t P = ba_model_num_params(m);
    for (int i = 0; i < nt; i++) {
        ba_tensor_info *t = &infos[i];
        if (ba_model_tensor(m, i, t) != BA_OK || t->ndim < 0 || t->ndim > 3 ||
            t->offset > P || t->size > P - t->offset)
            return ba_fail(err, BA_ERR_ARG, "model tensor %d does not lie inside the %zu %s", i,
                           P, what);
        for (size_t j = 0; j < t->size; j++) {
            ba_real v = src[t->offset + j];
            float f = to_f32((double)v);
            if (check_finite && !isfinite(f))
                return ba_fail(err, BA_ERR_NUMERIC,
                               "%s '%s'[%zu] = %g is not finite as F32; not saving", what,
                               t->name, j, (double)v);
            dst[t->offset + j] = f;
        }
        ba_st_entry *e = &entries[i];
        memset(e, 0, sizeof *e);
        e->name = t->name;
        e->dtype = BA_DT_F32;
        e->ndim = t->ndim;
        for (int k = 0; k < t->ndim; k++)
            e->shape[k] = t->shape[k];
        e->data = dst + t->offset;
    }
    return BA_OK;
}

/* Saves one F32 entry per model tensor from src, after `lead` entries
 * (0 or 1) given by the caller. */
static int save_model_values(const char *path, const ba_model *m, const ba_real *src,
                             const ba_st_entry *lead, int n_lead, int check_finite,
                             const char *what, const char *const *meta_keys,
                             const char *const *meta_vals, int n_meta, char *err)
{
    int nt = ba_model_num_tensors(m);
    size_t P = ba_model_num_params(m);
    if (nt < 0)
        return ba_fail(err, BA_ERR_ARG, "model reports %d tensors", nt);
    if (P > (SIZE_MAX - 1) / sizeof(float))
        return ba_fail(err, BA_ERR_NOMEM, "%zu %ss do not fit in memory as F32", P, what);
    float *dst = malloc(P * sizeof *dst + 1);
    ba_tensor_info *infos = malloc((size_t)nt * sizeof *infos + 1);
    ba_st_entry *entries = malloc(((size_t)nt + 1) * sizeof *entries);
    int rc;
    if (!dst || !infos || !entries) {
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate the F32 copy of %zu %s", P, what);
    } else {
        for (int i = 0; i < n_lead; i++)
            entries[i] = lead[i];
        rc = model_entries(m, src, dst, infos, entries + n_lead, check_finite, what, err);
        /* A checkpoint (check_finite) carries the checksum of its tensor
         * data, in tensor order, as the last metadata entry; the caller's
         * arrays have room for it. */
        char sum[32];
        if (rc == BA_OK && check_finite) {
            uint64_t h = BA_FNV_INIT;
            for (int i = 0; i < nt; i++)
                h = ba_fnv1a64(h, dst + infos[i].offset, infos[i].size * sizeof(float));
            snprintf(sum, sizeof sum, "fnv1a64:%016llx", (unsigned long long)h);
            ((const char **)meta_keys)[n_meta] = "checksum";
            ((const char **)meta_vals)[n_meta] = sum;
            n_meta++;
        }
        if (rc == BA_OK)
            rc = ba_st_write(path, entries, nt + n_lead, meta_keys, meta_vals, n_meta, err);
    }
    free(entries);
    free(infos);
    free(dst);
    return rc;
}

int ba_checkpoint_save(const char *path, const ba_model *m, const char *const *meta_keys,
                       const char *const *meta_vals, int n_meta, char *err)
{
    if (!path || !m)
        return ba_fail(err, BA_ERR_ARG, "ba_checkpoint_save: path and model must not be NULL");
    if (n_meta < 0 || (n_meta > 0 && (!meta_keys || !meta_vals)))
        return ba_fail(err, BA_ERR_ARG,
                       "ba_checkpoint_save: %d metadata pairs without key/value arrays", n_meta);
    for (int i = 0; i < n_meta; i++)
        if (meta_keys[i] && (strcmp(meta_keys[i], "config") == 0 ||
                             strcmp(meta_keys[i], "checksum") == 0))
            return ba_fail(err, BA_ERR_ARG, "metadata key '%s' is reserved", meta_keys[i]);
    char *cfg = ba_config_to_json(ba_model_config(m));
    /* room for config, the caller's pairs and the checksum */
    const char **keys = malloc(((size_t)n_meta + 2) * sizeof *keys);
    const char **vals = malloc(((size_t)n_meta + 2) * sizeof *vals);
    int rc;
    if (!cfg || !keys || !vals) {
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot build the checkpoint metadata");
    } else {
        keys[0] = "config";
        vals[0] = cfg;
        for (int i = 0; i < n_meta; i++) {
            keys[i + 1] = meta_keys[i];
            vals[i + 1] = meta_vals[i];
        }
        /* ba_model_params takes a non-const model because training writes
         * through it; here the parameters are only read. */
        const ba_real *params = ba_model_params((ba_model *)m);
        rc = save_model_values(path, m, params, NULL, 0, 1, "parameter", keys, vals, n_meta + 1,
                               err);
    }
    free(vals);
    free(keys);
    free(cfg);
    return rc;
}

/* Copies the F32 file tensor ft into the model tensor t of params,
 * checking dtype, shape and finiteness. */
static int load_tensor(const ba_st_tensor *ft, const ba_tensor_info *t, ba_real *params,
                       char *err)
{
    if (ft->dtype != BA_DT_F32)
        return ba_fail(err, BA_ERR_FORMAT, "tensor '%s' has dtype %s, expected F32", t->name,
                       dtype_names[ft->dtype]);
    int64_t want[3] = {0, 0, 0};
    for (int k = 0; k < t->ndim && k < 3; k++)
        want[k] = t->shape[k];
    int same = ft->ndim == t->ndim;
    for (int k = 0; same && k < t->ndim; k++)
        same = ft->shape[k] == want[k];
    if (!same || ft->nbytes != t->size * sizeof(float)) {
        char a[96], b[96];
        format_shape(a, sizeof a, ft->ndim, ft->shape);
        format_shape(b, sizeof b, t->ndim, want);
        return ba_fail(err, BA_ERR_FORMAT, "tensor '%s' has shape %s in the file but %s in the model",
                       t->name, a, b);
    }
    const unsigned char *src = ft->data;
    for (size_t j = 0; j < t->size; j++) {
        float v;
        memcpy(&v, src + j * sizeof v, sizeof v); /* the data need not be aligned */
        if (!isfinite(v))
            return ba_fail(err, BA_ERR_FORMAT, "tensor '%s' value [%zu] = %g is not finite",
                           t->name, j, (double)v);
        params[t->offset + j] = (ba_real)v;
    }
    return BA_OK;
}

static int load_checkpoint(const ba_st *st, ba_model **out, char *err)
{
    const char *cj = ba_st_metadata(st, "config");
    if (!cj)
        return ba_fail(err, BA_ERR_FORMAT, "no \"config\" entry in __metadata__");
    ba_config cfg;
    char why[BA_ERR_LEN];
    int rc = ba_config_from_json(cj, &cfg, why);
    if (rc != BA_OK)
        return ba_fail(err, rc, "checkpoint config: %s", why);
    /* A small file must not make us allocate a large model: the config's
     * parameters have to be (nearly) in the file before any memory is taken.
     * The 1 MiB of slack leaves small mismatches (a missing bias) to the
     * precise per-tensor checks below; the model's allocation stays bounded
     * by the file's size. */
    size_t need = ba_config_num_params(&cfg), have = 0;
    for (int i = 0; i < st->n; i++)
        have += st->t[i].nbytes;
    if (need > (have + ((size_t)1 << 20)) / sizeof(float))
        return ba_fail(err, BA_ERR_FORMAT,
                       "checkpoint config describes %zu parameters (%zu bytes as F32) but the "
                       "file holds only %zu bytes of tensor data",
                       need, need * sizeof(float), have);
    ba_model *m;
    if ((rc = ba_model_init(&m, &cfg, why)) != BA_OK)
        return ba_fail(err, rc, "checkpoint config: %s", why);
    int nt = ba_model_num_tensors(m);
    size_t P = ba_model_num_params(m);
    ba_real *params = ba_model_params(m);
    /* The descriptions are fetched once: a name lookup through the model
     * API per file tensor would cost a walk over all tensors each time. */
    ba_tensor_info *infos = malloc((size_t)(nt > 0 ? nt : 0) * sizeof *infos + 1);
    if (!infos)
        rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate %d tensor descriptions", nt);
    for (int i = 0; i < nt && rc == BA_OK; i++) {
        ba_tensor_info *t = &infos[i];
        if (ba_model_tensor(m, i, t) != BA_OK || t->ndim < 0 || t->ndim > 3 ||
            t->offset > P || t->size > P - t->offset)
            rc = ba_fail(err, BA_ERR_ARG, "model tensor %d does not lie inside the %zu parameters",
                         i, P);
    }
    for (int i = 0; i < nt && rc == BA_OK; i++) {
        const ba_st_tensor *ft = ba_st_find(st, infos[i].name);
        if (!ft)
            rc = ba_fail(err, BA_ERR_FORMAT, "tensor '%s' is missing from the file", infos[i].name);
        else
            rc = load_tensor(ft, &infos[i], params, err);
    }
    /* The checksum, when the file has one (files from other writers may
     * not), covers the tensor data in the model's order. */
    const char *sum = ba_st_metadata(st, "checksum");
    if (rc == BA_OK && sum) {
        uint64_t h = BA_FNV_INIT;
        for (int i = 0; i < nt; i++) {
            const ba_st_tensor *ft = ba_st_find(st, infos[i].name);
            h = ba_fnv1a64(h, ft->data, ft->nbytes);
        }
        char want[32];
        snprintf(want, sizeof want, "fnv1a64:%016llx", (unsigned long long)h);
        if (strcmp(sum, want) != 0)
            rc = ba_fail(err, BA_ERR_FORMAT,
                         "checksum mismatch: the file says %.40s but its tensor data gives %s "
                         "(the data is corrupt)",
                         sum, want);
    }
    /* Every model tensor was found and file names are unique, so any
     * further file tensor is one the model does not have. */
    if (rc == BA_OK && st->n > nt) {
        for (int i = 0; i < st->n && rc == BA_OK; i++) {
            int k = 0;
            while (k < nt && strcmp(infos[k].name, st->t[i].name) != 0)
                k++;
            if (k == nt)
                rc = ba_fail(err, BA_ERR_FORMAT,
                             "tensor '%s' in the file is not a parameter of the model",
                             st->t[i].name);
        }
    }
    free(infos);
    if (rc != BA_OK) {
        ba_model_free(m);
        return rc;
    }
    *out = m;
    return BA_OK;
}

int ba_checkpoint_load(const char *path, ba_model **out, char *err)
{
    if (!path || !out)
        return ba_fail(err, BA_ERR_ARG, "ba_checkpoint_load: path and out must not be NULL");
    *out = NULL;
    ba_st *st;
    int rc = ba_st_read(&st, path, err);
    if (rc != BA_OK)
        return rc;
    rc = load_checkpoint(st, out, err);
    ba_st_free(st);
    return rc;
}

int ba_grads_save(const char *path, const ba_model *m, double loss, char *err)
{
    if (!path || !m)
        return ba_fail(err, BA_ERR_ARG, "ba_grads_save: path and model must not be NULL");
    float l = to_f32(loss);
    ba_st_entry lead;
    memset(&lead, 0, sizeof lead);
    lead.name = "loss";
    lead.dtype = BA_DT_F32;
    lead.ndim = 1;
    lead.shape[0] = 1;
    lead.data = &l;
    /* Read only, as in ba_checkpoint_save. Non-finite gradients are
     * written as they are: this file is for inspecting them. */
    const ba_real *grads = ba_model_grads((ba_model *)m);
    return save_model_values(path, m, grads, &lead, 1, 0, "gradient", NULL, NULL, 0, err);
}

/* ---------------------------------------------------------- batches */

int ba_batch_save(const char *path, const int *inputs, const int *targets, int B, int T,
                  char *err)
{
    if (!path || !inputs || !targets)
        return ba_fail(err, BA_ERR_ARG, "ba_batch_save: path, inputs and targets must not be NULL");
    if (B < 1 || T < 1)
        return ba_fail(err, BA_ERR_ARG, "ba_batch_save: B = %d and T = %d must be >= 1", B, T);
    ba_st_entry e[2];
    memset(e, 0, sizeof e);
    const char *names[2] = {"inputs", "targets"};
    const int *data[2] = {inputs, targets};
    for (int i = 0; i < 2; i++) {
        e[i].name = names[i];
        e[i].dtype = BA_DT_I32;
        e[i].ndim = 2;
        e[i].shape[0] = B;
        e[i].shape[1] = T;
        e[i].data = data[i];
    }
    return ba_st_write(path, e, 2, NULL, NULL, 0, err);
}

/* A batch tensor: I32, 2-D, both dimensions in [1, INT_MAX]. */
static int batch_tensor(const ba_st *st, const char *name, const ba_st_tensor **out, char *err)
{
    const ba_st_tensor *t = ba_st_find(st, name);
    if (!t)
        return ba_fail(err, BA_ERR_FORMAT, "batch file has no '%s' tensor", name);
    char s[96];
    format_shape(s, sizeof s, t->ndim, t->shape);
    if (t->dtype != BA_DT_I32)
        return ba_fail(err, BA_ERR_FORMAT, "batch tensor '%s' has dtype %s, expected I32", name,
                       dtype_names[t->dtype]);
    if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1 || t->shape[0] > INT_MAX ||
        t->shape[1] > INT_MAX)
        return ba_fail(err, BA_ERR_FORMAT,
                       "batch tensor '%s' has shape %s, expected [B, T] with B, T >= 1", name, s);
    *out = t;
    return BA_OK;
}

int ba_batch_load(const char *path, int **inputs, int **targets, int *B, int *T, char *err)
{
    if (!path || !inputs || !targets || !B || !T)
        return ba_fail(err, BA_ERR_ARG, "ba_batch_load: no argument may be NULL");
    *inputs = *targets = NULL;
    ba_st *st;
    int rc = ba_st_read(&st, path, err);
    if (rc != BA_OK)
        return rc;
    const ba_st_tensor *ti = NULL, *tt = NULL;
    if ((rc = batch_tensor(st, "inputs", &ti, err)) == BA_OK &&
        (rc = batch_tensor(st, "targets", &tt, err)) == BA_OK &&
        (ti->shape[0] != tt->shape[0] || ti->shape[1] != tt->shape[1])) {
        char a[96], b[96];
        format_shape(a, sizeof a, ti->ndim, ti->shape);
        format_shape(b, sizeof b, tt->ndim, tt->shape);
        rc = ba_fail(err, BA_ERR_FORMAT, "batch shapes differ: inputs %s, targets %s", a, b);
    }
    if (rc == BA_OK) {
        /* nbytes was checked against the file size by the reader. */
        int *in = malloc(ti->nbytes), *tg = malloc(tt->nbytes);
        if (!in || !tg) {
            free(in);
            free(tg);
            rc = ba_fail(err, BA_ERR_NOMEM, "cannot allocate a batch of %zu bytes", ti->nbytes);
        } else {
            memcpy(in, ti->data, ti->nbytes);
            memcpy(tg, tt->data, tt->nbytes);
            *inputs = in;
            *targets = tg;
            *B = (int)ti->shape[0];
            *T = (int)ti->shape[1];
        }
    }
    ba_st_free(st);
    return rc;
}
