/* Safetensors files: the reader and the writer.
 *
 * The reader treats every file as hostile: all sizes are checked before
 * they are used, arithmetic on sizes is overflow-checked, nothing is
 * allocated beyond the file's own size (plus the JSON tree of a header of
 * at most ST_MAX_HEADER bytes), and every failure returns a status with a
 * message naming the offending field and value. The writer replaces its
 * file atomically (ba_write_file_parts). */
#include "core/core.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

const char *ba_dtype_name(ba_dtype d) { return dtype_known(d) ? dtype_names[d] : "?"; }

/* "[2, 3, 4]" into buf (always terminated, truncated if cap is short). */
void ba_format_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
}

/* ---------------------------------------------------------- reading */

struct ba_st {
    unsigned char *buf; /* the whole file */
    size_t size;
    int n;
    ba_st_tensor *t;
    cJSON *meta; /* the __metadata__ object (values checked to be strings), or NULL */
};

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
                       ba_json_type(e));
    /* "dtype" twice would be read as the first here and the last by
     * Python's json: one file, two tensors. */
    int rc = ba_json_check_keys(e, "header", err);
    if (rc)
        return rc;

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dt))
        return ba_fail(err, BA_ERR_FORMAT, "tensor '%s': 'dtype' is %s, expected a string", name,
                       ba_json_type(dt));
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
                       ba_json_type(sh));
    int ndim = 0;
    size_t nbytes = dtype_sizes[d];
    int overflow = 0;
    for (const cJSON *it = sh->child; it; it = it->next) {
        if (ndim == ST_MAX_NDIM)
            return ba_fail(err, BA_ERR_FORMAT, "tensor '%s': shape has more than %d dimensions",
                           name, ST_MAX_NDIM);
        uint64_t dim;
        if (!ba_json_u53(it, &dim)) {
            char v[48];
            ba_json_describe(it, v, sizeof v);
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
        ba_format_shape(s, sizeof s, ndim, t->shape);
        return ba_fail(err, BA_ERR_FORMAT, "tensor '%s': shape %s has more bytes than fit in memory",
                       name, s);
    }
    t->nbytes = nbytes;

    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return ba_fail(err, BA_ERR_FORMAT,
                       "tensor '%s': 'data_offsets' is %s, expected an array [begin, end]", name,
                       cJSON_IsArray(off) ? "an array without exactly 2 entries" : ba_json_type(off));
    uint64_t begin, end;
    for (int i = 0; i < 2; i++) {
        const cJSON *it = cJSON_GetArrayItem(off, i);
        if (!ba_json_u53(it, i ? &end : &begin)) {
            char v[48];
            ba_json_describe(it, v, sizeof v);
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
        ba_format_shape(s, sizeof s, ndim, t->shape);
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
                       ba_json_type(meta));
    int n = 0;
    for (const cJSON *it = meta->child; it; it = it->next) {
        if (!cJSON_IsString(it))
            return ba_fail(err, BA_ERR_FORMAT, "__metadata__ value of '%.64s' is %s, not a string",
                           it->string, ba_json_type(it));
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
                         ba_json_type(root));
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
    int rc = ba_read_file(path, &st->buf, &st->size, err);
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
    rc = ba_json_check_text(hdr, (size_t)hlen, "header", err);
    if (rc) {
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
            if (e->shape[k] < 0 || (double)e->shape[k] >= BA_JSON_MAX_INT)
                return ba_fail(err, BA_ERR_ARG,
                               "tensor '%s': shape[%d] = %" PRId64 " is out of range", e->name,
                               k, e->shape[k]);
            if ((uint64_t)e->shape[k] > SIZE_MAX || ba_mul_size(nb, (size_t)e->shape[k], &nb))
                return ba_fail(err, BA_ERR_ARG, "tensor '%s': shape is too large", e->name);
        }
        if (nb > 0 && !e->data)
            return ba_fail(err, BA_ERR_ARG, "tensor '%s': data is NULL", e->name);
        if (total + nb < total || (double)(total + nb) >= BA_JSON_MAX_INT)
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

/* The file: the header, then every entry's bytes, written atomically. */
static int write_parts(const char *path, const unsigned char *head, size_t head_len,
                       const ba_st_entry *entries, const size_t *sizes, int n, char *err)
{
    ba_file_part *parts = malloc(((size_t)n + 1) * sizeof *parts);
    if (!parts)
        return ba_fail(err, BA_ERR_NOMEM, "cannot allocate %d file parts", n + 1);
    parts[0].data = head, parts[0].len = head_len;
    for (int i = 0; i < n; i++)
        parts[i + 1].data = entries[i].data, parts[i + 1].len = sizes[i];
    int rc = ba_write_file_parts(path, parts, n + 1, err);
    free(parts);
    return rc;
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
        rc = write_parts(path, head, 8 + hlen, entries, sizes, n, err);
    }
    free(head);
    cJSON_free(json);
    free(sizes);
    return rc;
}
