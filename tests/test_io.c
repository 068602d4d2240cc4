/* Tests of the files: safetensors round trips and a hand-built file,
 * malformed and truncated files, the config's JSON form, batch files,
 * checkpoints (bit-exact round trip, corrupted files) and gradient files. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boltzattn.h"

/* ------------------------------------------------------------- helpers */

/* All files of a run live in one fresh directory, removed at the end. */
static char g_dir[64];

static int make_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/ba_test_io_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    DIR *d = opendir(g_dir);
    if (!d)
        return -1;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
            remove(p);
        }
    closedir(d);
    return rmdir(g_dir);
}

/* Path of a file in the test directory (one of 4 rotating buffers). */
static const char *path_of(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static void write_bytes(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n)
        assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Reads a whole file; *n gets its size. Caller frees. */
static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    unsigned char *b = malloc((size_t)len + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* A file with the given header text (length as given) and data bytes. */
static void write_st_raw(const char *path, uint64_t hlen_field, const char *hdr,
                         const void *data, size_t dlen)
{
    size_t hl = strlen(hdr);
    unsigned char *b = malloc(8 + hl + dlen + 1);
    assert_non_null(b);
    put_le64(b, hlen_field);
    memcpy(b + 8, hdr, hl);
    if (dlen)
        memcpy(b + 8 + hl, data, dlen);
    write_bytes(path, b, 8 + hl + dlen);
    free(b);
}

static void write_st(const char *path, const char *hdr, const void *data, size_t dlen)
{
    write_st_raw(path, strlen(hdr), hdr, data, dlen);
}

/* Reading path must fail with status and a message containing sub. */
static void expect_read_fail(const char *path, int status, const char *sub)
{
    char err[BA_ERR_LEN] = "";
    ba_st *st = (ba_st *)&st; /* must be reset to NULL */
    int rc = ba_st_read(&st, path, err);
    if (rc != status || !strstr(err, sub))
        fail_msg("expected status %d with '%s', got %d: %s", status, sub, rc, err);
    assert_null(st);
}

static uint64_t load_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* ------------------------------------------------------ safetensors */

static void test_st_roundtrip(void **state)
{
    (void)state;
    float a[6] = {1.5f, -2.0f, 0.0f, -0.0f, 3.25e-30f, 1e30f};
    int32_t b[4] = {0, -1, 2147483647, -2147483647 - 1};
    double c = 0.1;
    float empty[1] = {0};
    ba_st_entry e[4] = {
        {.name = "w.a", .dtype = BA_DT_F32, .ndim = 2, .shape = {2, 3}, .data = a},
        {.name = "ints", .dtype = BA_DT_I32, .ndim = 1, .shape = {4}, .data = b},
        {.name = "scalar", .dtype = BA_DT_F64, .ndim = 0, .data = &c},
        {.name = "empty", .dtype = BA_DT_F32, .ndim = 2, .shape = {0, 5}, .data = empty},
    };
    const char *keys[] = {"step", "odd \"key\"\n"};
    const char *vals[] = {"17", "caf\xc3\xa9 \\ \"quoted\"\t"};
    char err[BA_ERR_LEN] = "";
    const char *p = path_of("rt.safetensors");
    assert_int_equal(ba_st_write(p, e, 4, keys, vals, 2, err), BA_OK);

    /* Layout on disk: header length a multiple of 8, padded with spaces,
     * data contiguous after it in the given order. */
    size_t n;
    unsigned char *raw = slurp(p, &n);
    uint64_t hlen = load_le64(raw);
    assert_int_equal(hlen % 8, 0);
    assert_int_equal(n, 8 + hlen + sizeof a + sizeof b + sizeof c);
    assert_int_equal(raw[8], '{');
    assert_memory_equal(raw + 8 + hlen, a, sizeof a);
    assert_memory_equal(raw + 8 + hlen + sizeof a, b, sizeof b);
    assert_memory_equal(raw + 8 + hlen + sizeof a + sizeof b, &c, sizeof c);
    free(raw);

    ba_st *st;
    assert_int_equal(ba_st_read(&st, p, err), BA_OK);
    assert_int_equal(ba_st_count(st), 4);
    for (int i = 0; i < 4; i++) {
        const ba_st_tensor *t = ba_st_get(st, i);
        assert_non_null(t);
        assert_string_equal(t->name, e[i].name);
        assert_int_equal(t->dtype, e[i].dtype);
        assert_int_equal(t->ndim, e[i].ndim);
        for (int k = 0; k < t->ndim; k++)
            assert_int_equal(t->shape[k], e[i].shape[k]);
        assert_ptr_equal(ba_st_find(st, e[i].name), t);
    }
    assert_int_equal(ba_st_get(st, 0)->nbytes, sizeof a);
    assert_int_equal(ba_st_get(st, 1)->nbytes, sizeof b);
    assert_int_equal(ba_st_get(st, 2)->nbytes, sizeof c);
    assert_int_equal(ba_st_get(st, 3)->nbytes, 0);
    assert_memory_equal(ba_st_get(st, 0)->data, a, sizeof a);
    assert_memory_equal(ba_st_get(st, 1)->data, b, sizeof b);
    assert_memory_equal(ba_st_get(st, 2)->data, &c, sizeof c);
    assert_null(ba_st_get(st, 4));
    assert_null(ba_st_get(st, -1));
    assert_null(ba_st_find(st, "nope"));
    assert_string_equal(ba_st_metadata(st, "step"), "17");
    assert_string_equal(ba_st_metadata(st, keys[1]), vals[1]);
    assert_null(ba_st_metadata(st, "missing"));
    ba_st_free(st);

    /* No tensors, no metadata: a valid empty file. */
    assert_int_equal(ba_st_write(p, NULL, 0, NULL, NULL, 0, err), BA_OK);
    assert_int_equal(ba_st_read(&st, p, err), BA_OK);
    assert_int_equal(ba_st_count(st), 0);
    assert_null(ba_st_metadata(st, "step"));
    ba_st_free(st);
    ba_st_free(NULL);
    assert_int_equal(ba_st_count(NULL), 0);
}

static void test_st_handbuilt(void **state)
{
    (void)state;
    /* Header length 0x6c = 108 (not a multiple of 8, so the data is
     * unaligned), tensors listed out of data order, I32 and F64. */
    const char *hdr = "{\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[8,16]},"
                      "\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    assert_int_equal(strlen(hdr), 108);
    unsigned char file[8 + 108 + 16];
    memcpy(file, "\x6c\0\0\0\0\0\0\0", 8);
    memcpy(file + 8, hdr, 108);
    const unsigned char data[16] = {1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, /* 1, -2 */
                                    0, 0, 0, 0, 0, 0, 0xf8, 0x3f};      /* 1.5 */
    memcpy(file + 8 + 108, data, 16);
    const char *p = path_of("hand.safetensors");
    write_bytes(p, file, sizeof file);
    char err[BA_ERR_LEN] = "";
    ba_st *st;
    assert_int_equal(ba_st_read(&st, p, err), BA_OK);
    assert_int_equal(ba_st_count(st), 2);
    const ba_st_tensor *a = ba_st_find(st, "a"), *b = ba_st_find(st, "b");
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->dtype, BA_DT_I32);
    assert_int_equal(a->ndim, 1);
    assert_int_equal(a->shape[0], 2);
    int32_t iv[2];
    memcpy(iv, a->data, 8);
    assert_int_equal(iv[0], 1);
    assert_int_equal(iv[1], -2);
    double dv;
    memcpy(&dv, b->data, 8);
    assert_true(dv == 1.5);
    assert_string_equal(ba_st_get(st, 0)->name, "b"); /* header order kept */
    ba_st_free(st);
}

typedef struct {
    const char *hdr;
    size_t dlen;
    int status;
    const char *sub;
} bad_case;

static void test_st_malformed(void **state)
{
    (void)state;
    const char *p = path_of("bad.safetensors");
    unsigned char zeros[64] = {0};

    write_bytes(p, "", 0);
    expect_read_fail(p, BA_ERR_FORMAT, "0 bytes long, too short");
    write_bytes(p, "\x02\0\0\0\0\0\0", 7);
    expect_read_fail(p, BA_ERR_FORMAT, "7 bytes long, too short");
    write_st_raw(p, 1000, "{}", NULL, 0);
    expect_read_fail(p, BA_ERR_FORMAT, "header length 1000 exceeds the 2 bytes");
    write_st_raw(p, UINT64_C(1) << 63, "{}", NULL, 0);
    expect_read_fail(p, BA_ERR_FORMAT, "header length 9223372036854775808 is above the limit");
    write_st_raw(p, 100000001, "{}", NULL, 0);
    expect_read_fail(p, BA_ERR_FORMAT, "above the limit");

    static const bad_case cases[] = {
        {"", 0, BA_ERR_FORMAT, "not valid JSON"},
        {"hello", 0, BA_ERR_FORMAT, "not valid JSON"},
        {"{\"a\":", 0, BA_ERR_FORMAT, "not valid JSON"},
        {"[1,2]", 0, BA_ERR_FORMAT, "header is an array, not a JSON object"},
        {"\"x\"", 0, BA_ERR_FORMAT, "not a JSON object"},
        {"{} x", 0, BA_ERR_FORMAT, "after its JSON value"},
        {"{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]}}", 2, BA_ERR_FORMAT,
         "tensor 'a': unknown dtype 'F16'"},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, BA_ERR_FORMAT,
         "'dtype' is nothing"},
        {"{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, BA_ERR_FORMAT,
         "'dtype' is a number"},
        {"{\"a\":[1]}", 0, BA_ERR_FORMAT, "tensor 'a': entry is an array"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, BA_ERR_FORMAT,
         "tensor 'a': shape[0] = -1 is not a non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2, 1.5],\"data_offsets\":[0,4]}}", 4,
         BA_ERR_FORMAT, "shape[1] = 1.5"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
         BA_ERR_FORMAT, "shape[0] = a string"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", 4,
         BA_ERR_FORMAT, "shape[0] = 1.0000000000000001e+300"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]}}", 4, BA_ERR_FORMAT,
         "'shape' is a number, expected an array"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],"
         "\"data_offsets\":[0,4]}}",
         4, BA_ERR_FORMAT, "shape [1099511627776, 1099511627776] has more bytes than fit"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         BA_ERR_FORMAT, "more than 8 dimensions"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, BA_ERR_FORMAT,
         "data_offsets [0, 8] lie outside the 4 data bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, BA_ERR_FORMAT,
         "data_offsets [8, 4] lie outside"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, BA_ERR_FORMAT,
         "data_offsets [0, 4] hold 4 bytes but dtype F32 shape [2] needs 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, BA_ERR_FORMAT,
         "'data_offsets' is an array without exactly 2 entries"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", 4, BA_ERR_FORMAT,
         "data_offsets[1] = -4"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, BA_ERR_FORMAT, "'data_offsets' is nothing"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, BA_ERR_FORMAT, "tensors 'a' and 'b' overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
         8, BA_ERR_FORMAT, "overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, BA_ERR_FORMAT,
         "4 unused data bytes before tensor 'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 12, BA_ERR_FORMAT,
         "the tensors end at data byte 4 but the data region has 12 bytes"},
        {"{}", 4, BA_ERR_FORMAT, "no tensors but 4 data bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, BA_ERR_FORMAT, "tensor name 'a' appears twice"},
        {"{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, BA_ERR_FORMAT,
         "empty name"},
        {"{\"__metadata__\":{\"k\":3}}", 0, BA_ERR_FORMAT,
         "__metadata__ value of 'k' is a number, not a string"},
        {"{\"__metadata__\":{\"k\":{}}}", 0, BA_ERR_FORMAT, "'k' is an object, not a string"},
        {"{\"__metadata__\":[\"k\"]}", 0, BA_ERR_FORMAT, "__metadata__ is an array"},
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, BA_ERR_FORMAT,
         "key 'k' appears twice"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, BA_ERR_FORMAT,
         "2 __metadata__ entries"},
        /* what cJSON and Python's json read differently: a repeated key
         * (first against last) at every depth, a \u0000 escape (cJSON cuts
         * the string there), a byte order mark (cJSON skips it) */
        {"{\"a\":{\"dtype\":\"I32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
         4, BA_ERR_FORMAT, "header key 'dtype' appears twice in 'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],"
         "\"x\":[{\"k\":1,\"k\":2}]}}",
         4, BA_ERR_FORMAT, "header key 'k' appears twice"},
        {"{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
         BA_ERR_FORMAT, "header byte 3: the escape \\u0000 puts a NUL inside a string"},
        {"{\"__metadata__\":{\"k\":\"x\\u0000\"}}", 0, BA_ERR_FORMAT,
         "header byte 23: the escape \\u0000"},
        {"\xef\xbb\xbf{}", 0, BA_ERR_FORMAT, "header starts with a UTF-8 byte order mark"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_st(p, cases[i].hdr, zeros, cases[i].dlen);
        expect_read_fail(p, cases[i].status, cases[i].sub);
    }

    /* A 128-byte name. */
    char hdr[512], name[129];
    memset(name, 'n', 128);
    name[128] = '\0';
    snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             name);
    write_st(p, hdr, zeros, 4);
    expect_read_fail(p, BA_ERR_FORMAT, "is 128 bytes long (limit 127)");
    /* 127 bytes is fine. */
    name[127] = '\0';
    snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             name);
    write_st(p, hdr, zeros, 4);
    char err[BA_ERR_LEN];
    ba_st *st;
    assert_int_equal(ba_st_read(&st, p, err), BA_OK);
    assert_non_null(ba_st_find(st, name));
    ba_st_free(st);

    /* Zero-size tensors may sit at any boundary, dims of 0 cancel a huge
     * product, and a scalar has shape []. */
    write_st(p,
             "{\"z\":{\"dtype\":\"F64\",\"shape\":[0, 1099511627776, 1099511627776],"
             "\"data_offsets\":[4,4]},\"s\":{\"dtype\":\"F32\",\"shape\":[],"
             "\"data_offsets\":[0,4]},\"e\":{\"dtype\":\"I32\",\"shape\":[0],\"data_offsets\":[0,0]}}   ",
             zeros, 4);
    assert_int_equal(ba_st_read(&st, p, err), BA_OK);
    assert_int_equal(ba_st_count(st), 3);
    assert_int_equal(ba_st_find(st, "z")->nbytes, 0);
    assert_int_equal(ba_st_find(st, "s")->ndim, 0);
    assert_int_equal(ba_st_find(st, "s")->nbytes, 4);
    ba_st_free(st);

    /* An escaped backslash before "u0000" is no NUL: the name is the six
     * characters \u0000 after "a". */
    write_st(p, "{\"a\\\\u0000\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             zeros, 4);
    assert_int_equal(ba_st_read(&st, p, err), BA_OK);
    assert_non_null(ba_st_find(st, "a\\u0000"));
    ba_st_free(st);

    /* I/O errors name the path; a FIFO is refused, not waited on. */
    expect_read_fail(path_of("does-not-exist"), BA_ERR_IO, "does-not-exist");
    const char *fifo = path_of("fifo.safetensors");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_read_fail(fifo, BA_ERR_IO, "not a regular file");
    remove(fifo);
    expect_read_fail(g_dir, BA_ERR_IO, "not a regular file");
    assert_int_equal(ba_st_read(NULL, p, err), BA_ERR_ARG);
}

/* A small valid file: two tensors and metadata. */
static void write_small(const char *p)
{
    float a[3] = {1, 2, 3};
    int32_t b[2] = {7, 8};
    ba_st_entry e[2] = {
        {.name = "alpha", .dtype = BA_DT_F32, .ndim = 1, .shape = {3}, .data = a},
        {.name = "beta", .dtype = BA_DT_I32, .ndim = 2, .shape = {1, 2}, .data = b},
    };
    const char *k[] = {"m"}, *v[] = {"x"};
    char err[BA_ERR_LEN];
    assert_int_equal(ba_st_write(p, e, 2, k, v, 1, err), BA_OK);
}

static void test_st_truncated(void **state)
{
    (void)state;
    const char *p = path_of("small.safetensors"), *q = path_of("cut.safetensors");
    write_small(p);
    size_t n;
    unsigned char *full = slurp(p, &n);
    char err[BA_ERR_LEN];
    ba_st *st;
    for (size_t len = 0; len < n; len++) {
        write_bytes(q, full, len);
        st = (ba_st *)&st;
        int rc = ba_st_read(&st, q, err);
        if (rc != BA_ERR_FORMAT)
            fail_msg("truncated at %zu of %zu bytes: status %d (%s)", len, n, rc, err);
        assert_null(st);
    }
    write_bytes(q, full, n);
    assert_int_equal(ba_st_read(&st, q, err), BA_OK);
    assert_int_equal(ba_st_count(st), 2);
    ba_st_free(st);
    /* One byte too many is trailing data. */
    unsigned char *longer = malloc(n + 1);
    memcpy(longer, full, n);
    longer[n] = 0;
    write_bytes(q, longer, n + 1);
    expect_read_fail(q, BA_ERR_FORMAT, "data region has 21 bytes");
    free(longer);
    free(full);
}

static void test_st_bitflip(void **state)
{
    (void)state;
    const char *p = path_of("small2.safetensors"), *q = path_of("flip.safetensors");
    write_small(p);
    size_t n;
    unsigned char *full = slurp(p, &n);
    size_t hend = 8 + (size_t)load_le64(full);
    unsigned char *buf = malloc(n);
    const unsigned char masks[] = {0x01, 0x02, 0x08, 0x20, 0x80, 0xff};
    int ok = 0, failed = 0;
    char err[BA_ERR_LEN];
    for (size_t pos = 0; pos < hend; pos++)
        for (size_t k = 0; k < sizeof masks; k++) {
            memcpy(buf, full, n);
            buf[pos] ^= masks[k];
            write_bytes(q, buf, n);
            ba_st *st;
            int rc = ba_st_read(&st, q, err);
            if (rc == BA_OK) {
                /* Whatever was accepted must be readable in full. */
                unsigned sum = 0;
                for (int i = 0; i < ba_st_count(st); i++) {
                    const ba_st_tensor *t = ba_st_get(st, i);
                    const unsigned char *d = t->data;
                    for (size_t j = 0; j < t->nbytes; j++)
                        sum += d[j];
                    assert_true(strlen(t->name) <= 127);
                    assert_ptr_equal(ba_st_find(st, t->name), t);
                }
                const char *m = ba_st_metadata(st, "m");
                if (m)
                    sum += (unsigned)strlen(m);
                (void)sum;
                ba_st_free(st);
                ok++;
            } else {
                assert_true(rc == BA_ERR_FORMAT);
                assert_true(strlen(err) > 0);
                failed++;
            }
        }
    /* Most flips break the JSON or the sizes; flips inside names or the
     * metadata value (and spaces) may survive. */
    assert_true(failed > 0);
    assert_true(ok > 0);
    assert_int_equal(ok + failed, (int)(hend * sizeof masks));
    free(buf);
    free(full);
}

static void test_st_write_errors(void **state)
{
    (void)state;
    float v[2] = {0, 1};
    char err[BA_ERR_LEN] = "";
    const char *p = path_of("w.safetensors");
    ba_st_entry e[2] = {
        {.name = "a", .dtype = BA_DT_F32, .ndim = 1, .shape = {2}, .data = v},
        {.name = "a", .dtype = BA_DT_F32, .ndim = 1, .shape = {2}, .data = v},
    };
    assert_int_equal(ba_st_write(p, e, 2, NULL, NULL, 0, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "tensor name 'a' appears twice"));
    e[1].name = "__metadata__";
    assert_int_equal(ba_st_write(p, e, 2, NULL, NULL, 0, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "reserved"));
    e[1].name = "b";
    e[1].dtype = (ba_dtype)7;
    assert_int_equal(ba_st_write(p, e, 2, NULL, NULL, 0, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "dtype 7"));
    e[1].dtype = BA_DT_F32;
    e[1].shape[0] = -3;
    assert_int_equal(ba_st_write(p, e, 2, NULL, NULL, 0, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "shape[0] = -3"));
    e[1].shape[0] = 2;
    e[1].ndim = 9;
    assert_int_equal(ba_st_write(p, e, 2, NULL, NULL, 0, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "ndim = 9"));
    e[1].ndim = 1;
    e[1].data = NULL;
    assert_int_equal(ba_st_write(p, e, 2, NULL, NULL, 0, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "data is NULL"));
    e[1].data = v;
    const char *k[] = {"x", "x"}, *val[] = {"1", "2"};
    assert_int_equal(ba_st_write(p, e, 2, k, val, 2, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "metadata key 'x' appears twice"));
    assert_int_equal(ba_st_write(NULL, e, 2, NULL, NULL, 0, err), BA_ERR_ARG);
    assert_int_equal(ba_st_write(p, e, 2, NULL, NULL, 1, err), BA_ERR_ARG);
    /* Nothing was written by the failed calls. */
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(ba_st_write(path_of("no-such-dir/x"), e, 2, NULL, NULL, 0, err),
                     BA_ERR_IO);
    assert_non_null(strstr(err, "no-such-dir/x"));
    assert_non_null(strstr(err, "No such file"));
    assert_int_equal(ba_st_write(p, e, 2, NULL, NULL, 0, NULL), BA_OK); /* err may be NULL */
    /* The temporary file is gone after the rename. */
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    assert_int_equal(access(tmp, F_OK), -1);
}

/* ------------------------------------------------------ config JSON */

/* Every field for a sampled kind; the kind alone for exact (the config
 * stores no parameters for it). */
static void assert_sampler_equal(const ba_sampler *a, const ba_sampler *b)
{
    assert_int_equal(a->kind, b->kind);
    if (a->kind == BA_SAMPLER_EXACT)
        return;
    assert_int_equal(a->shots, b->shots);
    assert_true(a->beta_assumed == b->beta_assumed);
    assert_true(a->tau == b->tau && a->gamma == b->gamma && a->lambda == b->lambda);
    assert_int_equal(a->trotter_steps, b->trotter_steps);
    assert_int_equal(a->order, b->order);
    assert_int_equal(a->chains, b->chains);
    assert_int_equal(a->burnin, b->burnin);
    assert_int_equal(a->thin, b->thin);
    assert_int_equal(a->sweeps, b->sweeps);
    assert_true(a->beta0 == b->beta0);
}

static void assert_config_equal(const ba_config *a, const ba_config *b)
{
    assert_int_equal(a->attn, b->attn);
    assert_int_equal(a->engine, b->engine);
    assert_int_equal(a->n_layer, b->n_layer);
    assert_int_equal(a->n_head, b->n_head);
    assert_int_equal(a->n_embd, b->n_embd);
    assert_int_equal(a->block_size, b->block_size);
    assert_int_equal(a->vocab_size, b->vocab_size);
    assert_int_equal(a->head, b->head);
    assert_int_equal(a->out_size, b->out_size);
    assert_int_equal(a->ffn, b->ffn);
    assert_int_equal(a->pos_emb, b->pos_emb);
    assert_int_equal(a->couplings, b->couplings);
    assert_int_equal(a->band, b->band);
    assert_int_equal(a->field_bias, b->field_bias);
    assert_sampler_equal(&a->sampler, &b->sampler);
}

static void assert_spec_equal(const ba_data_spec *a, const ba_data_spec *b)
{
    assert_int_equal(a->task, b->task);
    assert_int_equal(a->kinds, b->kinds);
    assert_int_equal(a->n_heldout, b->n_heldout);
    assert_true(a->data_seed == b->data_seed);
    assert_int_equal(a->vocab_size, b->vocab_size);
    if (a->task == BA_TASK_CHARLM)
        assert_memory_equal(a->vocab, b->vocab, (size_t)a->vocab_size);
}

/* A model config with the data description it is stored with. */
typedef struct {
    ba_config c;
    ba_data_spec d;
} full_config;

static char *to_json(const full_config *f) { return ba_config_to_json(&f->c, &f->d); }
static int from_json(const char *j, full_config *f, char *err)
{
    return ba_config_from_json(j, &f->c, &f->d, err);
}
static void assert_full_equal(const full_config *a, const full_config *b)
{
    assert_config_equal(&a->c, &b->c);
    assert_spec_equal(&a->d, &b->d);
}

static full_config charlm_config(void)
{
    full_config f;
    f.c = ba_config_default(BA_ATTN_BOLTZMANN, 12);
    f.d = ba_data_spec_default(BA_TASK_CHARLM);
    const uint8_t vocab[] = {'\n', ' ', 'z', 'a', 0, 255, 128};
    f.c.vocab_size = f.c.out_size = f.d.vocab_size = (int)sizeof vocab;
    memcpy(f.d.vocab, vocab, sizeof vocab);
    f.c.n_layer = 3;
    f.c.n_head = 4;
    f.c.n_embd = 32;
    f.c.ffn = 0;
    f.d.kinds = 3;
    f.d.n_heldout = 77;
    f.d.data_seed = (UINT64_C(1) << 63) + 5;
    return f;
}

static void test_config_roundtrip(void **state)
{
    (void)state;
    char err[BA_ERR_LEN] = "";
    full_config c = charlm_config(), r;
    char *j = to_json(&c);
    assert_non_null(j);
    assert_non_null(strstr(j, "\"data_seed\":\"9223372036854775813\""));
    assert_non_null(strstr(j, "\"ffn\":false"));
    assert_non_null(strstr(j, "\"attn\":\"boltzmann\""));
    assert_non_null(strstr(j, "\"head\":\"token\""));
    assert_non_null(strstr(j, "\"couplings\":\"absolute\""));
    assert_non_null(strstr(j, "\"band\":0"));
    assert_non_null(strstr(j, "\"field_bias\":\"none\""));
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(from_json(j, &r, err), BA_OK);
    assert_full_equal(&c, &r);
    free(j);
    /* the long-context fields */
    c.c.couplings = BA_COUPLINGS_RELATIVE, c.c.band = 4, c.c.pos_emb = 0;
    c.c.field_bias = BA_FIELD_BIAS_LOG_N, c.c.engine = BA_ENGINE_BAND;
    j = to_json(&c);
    assert_non_null(j);
    assert_non_null(strstr(j, "\"couplings\":\"relative\""));
    assert_non_null(strstr(j, "\"band\":4"));
    assert_non_null(strstr(j, "\"field_bias\":\"log-n\""));
    assert_non_null(strstr(j, "\"pos_emb\":false"));
    assert_non_null(strstr(j, "\"engine\":\"band\""));
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(from_json(j, &r, err), BA_OK);
    assert_full_equal(&c, &r);
    free(j);
    /* ALiBi (issue 43): by its name, and back */
    c.c.pos_emb = BA_POS_ALIBI;
    j = to_json(&c);
    assert_non_null(j);
    assert_non_null(strstr(j, "\"pos_emb\":\"alibi\""));
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(from_json(j, &r, err), BA_OK);
    assert_full_equal(&c, &r);
    free(j);
    c = charlm_config();

    full_config b;
    b.c = ba_config_default(BA_ATTN_SIGMOID, 40);
    b.d = ba_data_spec_default(BA_TASK_BRACKETS);
    b.d.kinds = 2;
    b.c.vocab_size = 4;
    b.c.out_size = 40;
    b.c.head = BA_HEAD_POINTER;
    b.d.data_seed = UINT64_MAX;
    j = to_json(&b);
    assert_non_null(j);
    assert_null(strstr(j, "vocab\":[")); /* no byte table for brackets */
    assert_int_equal(from_json(j, &r, err), BA_OK);
    assert_full_equal(&b, &r);
    free(j);
    assert_null(ba_config_to_json(NULL, NULL));

    /* The model alone: no task, no data fields; it reads back without a
     * data description, and is refused where one is asked for. */
    j = ba_config_to_json(&b.c, NULL);
    assert_null(strstr(j, "task"));
    assert_null(strstr(j, "data_seed"));
    ba_config m;
    assert_int_equal(ba_config_from_json(j, &m, NULL, err), BA_OK);
    assert_config_equal(&b.c, &m);
    assert_int_equal(ba_config_from_json(j, &m, &r.d, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "config field 'task' is missing"));
    free(j);

    /* Optional fields default; extra fields are ignored; data_seed may be
     * a number. */
    const char *minimal =
        "{\"task\":\"brackets\",\"attn\":\"coupling\",\"n_layer\":2,\"n_head\":2,"
        "\"n_embd\":16,\"block_size\":8,\"vocab_size\":2,\"out_size\":8,\"ffn\":true,"
        "\"comment\":[1,2,{}]}";
    assert_int_equal(from_json(minimal, &r, err), BA_OK);
    assert_int_equal(r.c.engine, BA_ENGINE_AUTO);
    /* written before long contexts: absolute couplings, no band, no bias,
     * learned positions */
    assert_int_equal(r.c.couplings, BA_COUPLINGS_ABSOLUTE);
    assert_int_equal(r.c.band, 0);
    assert_int_equal(r.c.field_bias, BA_FIELD_BIAS_NONE);
    assert_int_equal(r.c.pos_emb, 1);
    assert_int_equal(r.d.kinds, 1);
    assert_int_equal(r.d.n_heldout, 2000);
    assert_true(r.d.data_seed == 1234);
    assert_int_equal(r.c.ffn, 1);
    assert_int_equal(r.c.attn, BA_ATTN_COUPLING);
    /* written before heads were named: brackets means a pointer head */
    assert_int_equal(r.c.head, BA_HEAD_POINTER);
    const char *numseed =
        "{\"task\":\"brackets\",\"attn\":\"softmax\",\"n_layer\":1,\"n_head\":1,"
        "\"n_embd\":8,\"block_size\":8,\"vocab_size\":2,\"out_size\":8,\"ffn\":true,"
        "\"data_seed\":4503599627370497}";
    assert_int_equal(from_json(numseed, &r, err), BA_OK);
    assert_true(r.d.data_seed == UINT64_C(4503599627370497));
}

/* from_json of base with `field` replaced by `repl` (NULL: removed). */
static int config_with(const char *field, const char *repl, char *err, full_config *out)
{
    full_config c = charlm_config();
    c.c.attn = BA_ATTN_SOFTMAX;
    char *j = to_json(&c);
    assert_non_null(j);
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", field);
    char *at = strstr(j, key);
    assert_non_null(at);
    /* The value ends at the next ',' or '}' outside brackets. */
    char *end = at + strlen(key);
    int depth = 0, in_str = 0;
    for (; *end; end++) {
        if (in_str) {
            if (*end == '\\')
                end++;
            else if (*end == '"')
                in_str = 0;
        } else if (*end == '"')
            in_str = 1;
        else if (*end == '[' || *end == '{')
            depth++;
        else if ((*end == ']' || *end == '}') && depth > 0)
            depth--;
        else if ((*end == ',' || *end == '}') && depth == 0)
            break;
    }
    char buf[4096];
    if (repl)
        snprintf(buf, sizeof buf, "%.*s%s%s%s", (int)(at - j), j, key, repl, end);
    else if (*end == ',')
        snprintf(buf, sizeof buf, "%.*s%s", (int)(at - j), j, end + 1);
    else
        snprintf(buf, sizeof buf, "%.*s%s", (int)(at - j - 1), j, end);
    free(j);
    full_config tmp;
    return from_json(buf, out ? out : &tmp, err);
}

static void expect_config(const char *field, const char *repl, int status, const char *sub)
{
    char err[BA_ERR_LEN] = "";
    int rc = config_with(field, repl, err, NULL);
    if (rc != status || !strstr(err, sub))
        fail_msg("%s -> %s: expected %d with '%s', got %d: %s", field, repl ? repl : "(removed)",
                 status, sub, rc, err);
}

static void test_config_errors(void **state)
{
    (void)state;
    const char *required[] = {"task", "attn", "n_layer", "n_head", "n_embd", "block_size",
                              "vocab_size", "out_size", "ffn", "vocab"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char sub[64];
        snprintf(sub, sizeof sub, "'%s' is missing", required[i]);
        expect_config(required[i], NULL, BA_ERR_FORMAT, sub);
    }
    /* The optional ones may go. */
    char err[BA_ERR_LEN] = "";
    full_config r;
    assert_int_equal(config_with("engine", NULL, err, &r), BA_OK);
    assert_int_equal(config_with("head", NULL, err, &r), BA_OK);
    assert_int_equal(r.c.head, BA_HEAD_TOKEN);
    assert_int_equal(config_with("kinds", NULL, err, &r), BA_OK);
    assert_int_equal(r.d.kinds, 1);
    assert_int_equal(config_with("n_heldout", NULL, err, &r), BA_OK);
    assert_int_equal(config_with("data_seed", NULL, err, &r), BA_OK);
    assert_true(r.d.data_seed == 1234);

    expect_config("attn", "\"flash\"", BA_ERR_FORMAT, "unknown attention variant 'flash'");
    expect_config("attn", "2", BA_ERR_FORMAT, "'attn' is a number, expected a string");
    expect_config("task", "\"chess\"", BA_ERR_FORMAT, "unknown task 'chess'");
    expect_config("engine", "\"gpu\"", BA_ERR_FORMAT, "unknown engine 'gpu'");
    expect_config("head", "\"tree\"", BA_ERR_FORMAT, "unknown head 'tree'");
    expect_config("head", "\"pointer\"", BA_ERR_ARG, "for a pointer head");
    expect_config("n_head", "\"4\"", BA_ERR_FORMAT, "'n_head' is a string, expected an integer");
    expect_config("n_head", "2.5", BA_ERR_FORMAT, "'n_head' = 2.5 is not an int");
    expect_config("n_layer", "1e10", BA_ERR_FORMAT, "'n_layer' = 10000000000 is not an int");
    expect_config("ffn", "1", BA_ERR_FORMAT, "'ffn' is a number, expected true or false");
    expect_config("data_seed", "\"-1\"", BA_ERR_FORMAT, "'data_seed' = '-1'");
    expect_config("data_seed", "\"18446744073709551616\"", BA_ERR_FORMAT, "below 2^64");
    expect_config("data_seed", "\"\"", BA_ERR_FORMAT, "'data_seed' = ''");
    expect_config("data_seed", "1e17", BA_ERR_FORMAT, "decimal string");
    expect_config("data_seed", "null", BA_ERR_FORMAT, "'data_seed' is null");
    expect_config("vocab", "[1,2,3]", BA_ERR_FORMAT, "'vocab' has 3 entries, vocab_size is 7");
    expect_config("vocab", "[1,2,3,4,5,6,1]", BA_ERR_FORMAT, "'vocab[6]' = 1 appears twice");
    expect_config("vocab", "[1,2,3,4,5,6,256]", BA_ERR_FORMAT, "'vocab[6]' = 256 is not a byte");
    expect_config("vocab", "[1,2,3,4,5,6,\"a\"]", BA_ERR_FORMAT, "'vocab[6]' = a string");
    expect_config("vocab", "\"abc\"", BA_ERR_FORMAT, "'vocab' is a string");
    /* ba_config_validate's verdict passes through. */
    expect_config("n_embd", "30", BA_ERR_ARG, "n_embd = 30 is not divisible by n_head = 4");
    expect_config("vocab_size", "300", BA_ERR_ARG, "out_size = 7 must equal vocab_size = 300");
    expect_config("vocab_size", "70000", BA_ERR_ARG, "vocab_size = 70000");
    expect_config("attn", "\"boltzmann\"", BA_OK, "");
    /* the long-context fields: optional, typed, and checked against attn */
    assert_int_equal(config_with("couplings", NULL, err, &r), BA_OK);
    assert_int_equal(config_with("band", NULL, err, &r), BA_OK);
    assert_int_equal(config_with("field_bias", NULL, err, &r), BA_OK);
    assert_int_equal(config_with("pos_emb", NULL, err, &r), BA_OK);
    assert_int_equal(r.c.pos_emb, 1);
    expect_config("couplings", "\"toeplitz\"", BA_ERR_FORMAT, "unknown couplings 'toeplitz'");
    expect_config("field_bias", "\"log\"", BA_ERR_FORMAT, "unknown field bias 'log'");
    expect_config("band", "\"8\"", BA_ERR_FORMAT, "'band' is a string, expected an integer");
    expect_config("pos_emb", "0", BA_ERR_FORMAT,
                  "'pos_emb' is a number, expected true, false or a name (rope, alibi)");
    expect_config("pos_emb", "\"xpos\"", BA_ERR_FORMAT,
                  "'pos_emb': unknown position encoding 'xpos'");
    assert_int_equal(config_with("pos_emb", "\"alibi\"", err, &r), BA_OK);
    assert_int_equal(r.c.pos_emb, BA_POS_ALIBI);
    expect_config("band", "-1", BA_ERR_ARG, "band W = -1 must not be negative");
    /* the base config is softmax: no couplings to band or make relative */
    expect_config("band", "4", BA_ERR_ARG, "softmax attention has none");
    expect_config("couplings", "\"relative\"", BA_ERR_ARG, "softmax attention has none");
    expect_config("field_bias", "\"log-n\"", BA_ERR_ARG, "does nothing to softmax");
    expect_config("engine", "\"band\"", BA_OK, "");
    full_config c = charlm_config(); /* boltzmann, T = 12 */
    c.c.block_size = 64;
    char *j = to_json(&c);
    r.c.n_layer = -99;
    assert_int_equal(from_json(j, &r, err), BA_ERR_LIMIT);
    assert_non_null(strstr(err, "T = 64"));
    assert_int_equal(r.c.n_layer, -99); /* untouched on failure */
    free(j);

    /* Text two JSON readers read differently is refused: a repeated key at
     * any depth (cJSON would take the first, Python's json the last), a
     * \u0000 escape (cut there), a byte order mark (skipped). */
    j = to_json(&c);
    char twice[2048];
    snprintf(twice, sizeof twice, "{\"attn\":\"softmax\",%s", j + 1);
    assert_int_equal(from_json(twice, &r, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "config key 'attn' appears twice"));
    const char *so = strstr(j, "\"sampler\":{");
    assert_non_null(so);
    so += strlen("\"sampler\":{");
    snprintf(twice, sizeof twice, "%.*s\"kind\":\"gibbs\",%s", (int)(so - j), j, so);
    assert_int_equal(from_json(twice, &r, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "config key 'kind' appears twice in 'sampler'"));
    snprintf(twice, sizeof twice, "\xef\xbb\xbf%s", j);
    assert_int_equal(from_json(twice, &r, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "config starts with a UTF-8 byte order mark"));
    snprintf(twice, sizeof twice, "{\"x\":\"a\\u0000\",%s", j + 1);
    assert_int_equal(from_json(twice, &r, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "config byte 7: the escape \\u0000"));
    free(j);
    ba_sampler smp;
    assert_int_equal(ba_sampler_from_json("{\"kind\":\"sa\",\"kind\":\"exact\"}", &smp, err),
                     BA_ERR_FORMAT);
    assert_non_null(strstr(err, "sampler key 'kind' appears twice"));

    assert_int_equal(from_json("{\"task\":", &r, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "not valid JSON"));
    assert_int_equal(from_json("[]", &r, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "config is an array, not a JSON object"));
    assert_int_equal(from_json("{} {}", &r, err), BA_ERR_FORMAT);
    assert_int_equal(from_json(NULL, &r, err), BA_ERR_ARG);
    assert_int_equal(ba_config_from_json("{}", NULL, NULL, err), BA_ERR_ARG);
    assert_int_equal(from_json("{}", &r, NULL), BA_ERR_FORMAT);
}

/* The sampler in the config: every field of every kind round-trips
 * exactly (doubles too), a config without "sampler" (written before
 * samplers existed) reads as exact, and bad values are BA_ERR_FORMAT
 * naming the field. */
static void test_config_sampler(void **state)
{
    (void)state;
    char err[BA_ERR_LEN] = "";
    full_config f, q;
    f.c = ba_config_default(BA_ATTN_BOLTZMANN, 8);
    f.d = ba_data_spec_default(BA_TASK_BRACKETS);
    f.c.vocab_size = 2, f.c.out_size = 8, f.c.head = BA_HEAD_POINTER;
    ba_config *c = &f.c, *r = &q.c;
    char *j = to_json(&f);
    assert_non_null(strstr(j, "\"sampler\":{\"kind\":\"exact\"}"));
    free(j);
    for (int k = BA_SAMPLER_DIRECT; k <= BA_SAMPLER_SA; k++) {
        c->sampler = ba_sampler_default((ba_sampler_kind)k);
        /* values away from the defaults, doubles that need 17 digits */
        c->sampler.shots = 777 + k;
        c->sampler.beta_assumed = 0.1 + k / 3.0;
        c->sampler.tau = 2.0 / 3.0, c->sampler.gamma = 1.0 / 7.0, c->sampler.lambda = M_PI;
        c->sampler.trotter_steps = 123, c->sampler.order = 1;
        c->sampler.chains = 7, c->sampler.burnin = 0, c->sampler.thin = 3;
        c->sampler.sweeps = 55, c->sampler.beta0 = 0.3;
        j = to_json(&f);
        assert_non_null(j);
        memset(&q, 0x5a, sizeof q);
        if (from_json(j, &q, err) != BA_OK)
            fail_msg("%s: %s", j, err);
        assert_full_equal(&f, &q);
        free(j);
    }
    /* no "sampler": exact */
    c->sampler = ba_sampler_default(BA_SAMPLER_EXACT);
    j = to_json(&f);
    char *at = strstr(j, ",\"sampler\":{\"kind\":\"exact\"}");
    assert_non_null(at);
    memmove(at, at + strlen(",\"sampler\":{\"kind\":\"exact\"}"),
            strlen(at + strlen(",\"sampler\":{\"kind\":\"exact\"}")) + 1);
    assert_null(strstr(j, "sampler"));
    r->sampler.kind = BA_SAMPLER_GIBBS;
    assert_int_equal(from_json(j, &q, err), BA_OK);
    assert_int_equal(r->sampler.kind, BA_SAMPLER_EXACT);
    free(j);

    /* parameters left out take the kind's defaults */
    const char *base = "{\"task\":\"brackets\",\"attn\":\"coupling\",\"n_layer\":1,"
                       "\"n_head\":1,\"n_embd\":8,\"block_size\":40,\"vocab_size\":2,"
                       "\"out_size\":40,\"ffn\":true,\"sampler\":";
    char buf[1024];
    snprintf(buf, sizeof buf, "%s{\"kind\":\"gibbs\",\"shots\":64}}", base);
    assert_int_equal(from_json(buf, &q, err), BA_OK);
    ba_sampler d = ba_sampler_default(BA_SAMPLER_GIBBS);
    d.shots = 64;
    assert_sampler_equal(&r->sampler, &d);
    assert_int_equal(r->block_size, 40); /* gibbs goes beyond the engine's 26 */

    static const struct {
        const char *sampler, *msg;
    } bad[] = {
        {"[]", "'sampler' is an array, expected an object"},
        {"{}", "'sampler.kind' is missing"},
        {"{\"kind\":3}", "'sampler.kind' is a number, expected a string"},
        {"{\"kind\":\"quantum\"}", "'sampler.kind': unknown sampler 'quantum'"},
        {"{\"kind\":\"gibbs\",\"shots\":\"64\"}", "'sampler.shots' is a string"},
        {"{\"kind\":\"gibbs\",\"shots\":6.5}", "'sampler.shots' = 6.5 is not an int"},
        {"{\"kind\":\"gibbs\",\"shots\":0}", "'sampler': shots = 0"},
        {"{\"kind\":\"gibbs\",\"chains\":9,\"shots\":4}", "'sampler': gibbs chains = 9"},
        {"{\"kind\":\"sa\",\"beta0\":null}", "'sampler.beta0' is null"},
        {"{\"kind\":\"sa\",\"beta0\":2}", "'sampler': sa beta0 = 2"},
        {"{\"kind\":\"dqa\",\"order\":3}", "'sampler': dqa order = 3"},
        {"{\"kind\":\"direct\",\"beta_assumed\":-1}", "'sampler': beta_assumed = -1"},
        {"{\"kind\":\"direct\"}", "T = 40 is too large for coupling attention with the direct"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s}", base, bad[i].sampler);
        int rc = from_json(buf, &q, err);
        int want = i + 1 < sizeof bad / sizeof bad[0] ? BA_ERR_FORMAT : BA_ERR_LIMIT;
        if (rc != want || !strstr(err, bad[i].msg))
            fail_msg("sampler %s: expected %d with '%s', got %d: %s", bad[i].sampler, want,
                     bad[i].msg, rc, err);
    }
    /* a sampler for softmax: ba_config_validate's verdict */
    snprintf(buf, sizeof buf,
             "{\"task\":\"brackets\",\"attn\":\"softmax\",\"n_layer\":1,\"n_head\":1,"
             "\"n_embd\":8,\"block_size\":8,\"vocab_size\":2,\"out_size\":8,\"ffn\":true,"
             "\"sampler\":{\"kind\":\"direct\"}}");
    assert_int_equal(from_json(buf, &q, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "boltzmann and coupling attention only"));
}

/* ---------------------------------------------------------- batches */

static void test_batch(void **state)
{
    (void)state;
    enum { B = 3, T = 5 };
    int in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) {
        in[i] = i * 7 - 20;
        tg[i] = i % 3 ? i : -1;
    }
    in[0] = INT32_MAX;
    in[1] = INT32_MIN;
    char err[BA_ERR_LEN] = "";
    const char *p = path_of("batch.safetensors");
    assert_int_equal(ba_batch_save(p, in, tg, B, T, err), BA_OK);
    int *ri = NULL, *rt = NULL, rb = 0, rT = 0;
    assert_int_equal(ba_batch_load(p, &ri, &rt, &rb, &rT, err), BA_OK);
    assert_int_equal(rb, B);
    assert_int_equal(rT, T);
    assert_memory_equal(ri, in, sizeof in);
    assert_memory_equal(rt, tg, sizeof tg);
    free(ri);
    free(rt);
    assert_int_equal(ba_batch_save(p, in, tg, 0, T, err), BA_ERR_ARG);
    assert_int_equal(ba_batch_save(p, in, NULL, B, T, err), BA_ERR_ARG);

    /* Bad files. */
    float f[B * T] = {0};
    ba_st_entry e[2] = {
        {.name = "inputs", .dtype = BA_DT_I32, .ndim = 2, .shape = {B, T}, .data = in},
        {.name = "targets", .dtype = BA_DT_I32, .ndim = 2, .shape = {B, T}, .data = tg},
    };
    const char *q = path_of("badbatch.safetensors");
#define EXPECT_BATCH(n_entries, substr)                                                        \
    do {                                                                                       \
        assert_int_equal(ba_st_write(q, e, n_entries, NULL, NULL, 0, err), BA_OK);             \
        ri = rt = (int *)&ri;                                                                  \
        int rc_ = ba_batch_load(q, &ri, &rt, &rb, &rT, err);                                   \
        if (rc_ != BA_ERR_FORMAT || !strstr(err, substr))                                      \
            fail_msg("expected '%s', got %d: %s", substr, rc_, err);                           \
        assert_null(ri);                                                                       \
        assert_null(rt);                                                                       \
    } while (0)
    EXPECT_BATCH(1, "no 'targets' tensor");
    e[1].dtype = BA_DT_F32;
    e[1].data = f;
    EXPECT_BATCH(2, "'targets' has dtype F32, expected I32");
    e[1].dtype = BA_DT_I32;
    e[1].data = tg;
    e[1].shape[0] = T;
    e[1].shape[1] = B;
    EXPECT_BATCH(2, "batch shapes differ: inputs [3, 5], targets [5, 3]");
    e[1].ndim = 1;
    e[1].shape[0] = B * T;
    EXPECT_BATCH(2, "'targets' has shape [15], expected [B, T]");
    e[1].ndim = 2;
    e[1].shape[0] = 0;
    EXPECT_BATCH(2, "'targets' has shape [0, 3]");
    e[0].name = "input";
    EXPECT_BATCH(2, "no 'inputs' tensor");
#undef EXPECT_BATCH
    assert_int_equal(ba_batch_load(path_of("absent"), &ri, &rt, &rb, &rT, err), BA_ERR_IO);
    assert_non_null(strstr(err, "absent"));
}

/* A batch against a model's config: tokens, targets (by batch row and
 * position, not the flat index), at least one target. */
static void test_batch_check(void **state)
{
    (void)state;
    char err[BA_ERR_LEN] = "";
    ba_config lm = ba_config_default(BA_ATTN_SOFTMAX, 4), br = lm;
    lm.vocab_size = lm.out_size = 5;
    br.head = BA_HEAD_POINTER, br.vocab_size = 2, br.out_size = 4;
    int in[8] = {0, 1, 1, 0, 1, 0, 0, 1};
    int tg[8] = {-1, -1, 1, 0, -1, 0, -1, 2};
    assert_int_equal(ba_batch_check(&br, in, tg, 2, 4, err), BA_OK);
    assert_int_equal(ba_batch_check(&lm, in, tg, 2, 4, err), BA_OK);
    tg[6] = 7; /* batch row 1, position 2: the flat row 6 */
    assert_int_equal(ba_batch_check(&lm, in, tg, 2, 4, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "target 7 at batch 1 position 2 is outside [0, 5)"));
    assert_int_equal(ba_batch_check(&br, in, tg, 2, 4, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "target 7 at batch 1 position 2 must point at an earlier "
                                "position in [0, 2)"));
    tg[6] = 2; /* pointing at itself */
    assert_int_equal(ba_batch_check(&br, in, tg, 2, 4, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "target 2 at batch 1 position 2"));
    assert_int_equal(ba_batch_check(&lm, in, tg, 2, 4, err), BA_OK);
    tg[6] = -2;
    assert_int_equal(ba_batch_check(&lm, in, tg, 2, 4, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "target -2 at batch 1 position 2"));
    /* every target -1: no loss to compute (it would print as 0) */
    for (int i = 0; i < 8; i++)
        tg[i] = -1;
    assert_int_equal(ba_batch_check(&lm, in, tg, 2, 4, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "the batch has no targets (all 8 are -1)"));
    tg[7] = 0;
    assert_int_equal(ba_batch_check(&lm, in, tg, 2, 4, err), BA_OK);
    in[5] = 2; /* outside the pointer model's 2 tokens */
    assert_int_equal(ba_batch_check(&br, in, tg, 2, 4, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "token 2 at batch 1 position 1 is outside [0, 2)"));
    assert_int_equal(ba_batch_check(&br, in, tg, 2, 3, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "pointer-head sequences must have the model's length 4"));
    assert_int_equal(ba_batch_check(&lm, in, tg, 1, 5, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "sequence length T = 5 is outside [1, 4]"));
    assert_int_equal(ba_batch_check(NULL, in, tg, 2, 4, err), BA_ERR_ARG);
}

/* ------------------------------------------------------ checkpoints */

/* A small randomly initialised model; J nonzero where the variant has it. */
static ba_model *make_model(ba_task task, ba_attn attn, int ffn, uint64_t seed,
                            ba_data_spec *spec)
{
    ba_config c = ba_config_default(attn, 6);
    *spec = ba_data_spec_default(task);
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = 8;
    c.ffn = ffn;
    if (task == BA_TASK_CHARLM) {
        const uint8_t v[] = {'a', 'b', 'c', ' ', '\n'};
        c.vocab_size = c.out_size = spec->vocab_size = 5;
        memcpy(spec->vocab, v, sizeof v);
    } else {
        spec->kinds = 2;
        c.vocab_size = 4;
        c.out_size = 6;
        c.head = BA_HEAD_POINTER;
    }
    char err[BA_ERR_LEN] = "";
    ba_model *m = NULL;
    if (ba_model_init(&m, &c, err) != BA_OK)
        fail_msg("ba_model_init: %s", err);
    ba_rng rng;
    ba_rng_seed(&rng, seed);
    ba_model_init_weights(m, &rng, 0.3);
    /* Make every parameter distinct from its initial pattern (LayerNorm
     * gains of exactly 1, zero biases) so a missed copy shows. */
    ba_real *p = ba_model_params(m);
    for (size_t i = 0; i < ba_model_num_params(m); i++)
        p[i] += (ba_real)(0.01 * ba_rng_normal(&rng));
    return m;
}

static void test_checkpoint_roundtrip(void **state)
{
    (void)state;
    char err[BA_ERR_LEN] = "";
    const char *p = path_of("ckpt.safetensors");
    int n_cfg = 0;
    for (int attn = BA_ATTN_SOFTMAX; attn <= BA_ATTN_COUPLING; attn++)
        for (int ffn = 0; ffn <= 1; ffn++) {
            ba_task task = (attn + ffn) % 2 ? BA_TASK_CHARLM : BA_TASK_BRACKETS;
            ba_data_spec spec, back;
            ba_model *m = make_model(task, (ba_attn)attn, ffn, 100u + (unsigned)n_cfg++, &spec);
            const char *k[] = {"step", "note"}, *v[] = {"250", "hello"};
            assert_int_equal(ba_checkpoint_save(p, m, &spec, k, v, 2, err), BA_OK);
            ba_model *r = (ba_model *)&r;
            memset(&back, 0x5a, sizeof back);
            if (ba_checkpoint_load(p, &r, &back, err) != BA_OK)
                fail_msg("load %s ffn=%d: %s", ba_attn_name((ba_attn)attn), ffn, err);
            assert_config_equal(ba_model_config(m), ba_model_config(r));
            assert_spec_equal(&spec, &back);
            size_t P = ba_model_num_params(m);
            assert_int_equal(ba_model_num_params(r), P);
            int nt = ba_model_num_tensors(m);
            assert_int_equal(ba_model_num_tensors(r), nt);
            const ba_real *a = ba_model_params(m), *b = ba_model_params(r);
#ifdef BA_DOUBLE
            for (size_t i = 0; i < P; i++)
                assert_true((ba_real)(float)a[i] == b[i]);
#else
            assert_memory_equal(a, b, P * sizeof *a); /* bit-exact */
#endif
            /* The file itself: one F32 tensor per parameter tensor, the
             * model's names and shapes, config and extra metadata. */
            ba_st *st;
            assert_int_equal(ba_st_read(&st, p, err), BA_OK);
            assert_int_equal(ba_st_count(st), nt);
            int has_j = 0;
            for (int i = 0; i < nt; i++) {
                ba_tensor_info ti;
                assert_int_equal(ba_model_tensor(m, i, &ti), BA_OK);
                const ba_st_tensor *t = ba_st_get(st, i);
                assert_string_equal(t->name, ti.name);
                assert_int_equal(t->dtype, BA_DT_F32);
                assert_int_equal(t->ndim, ti.ndim);
                for (int d = 0; d < ti.ndim; d++)
                    assert_int_equal(t->shape[d], ti.shape[d]);
                has_j |= strstr(t->name, "attn.J") != NULL;
            }
            assert_int_equal(has_j, attn == BA_ATTN_BOLTZMANN || attn == BA_ATTN_COUPLING);
            assert_non_null(ba_st_find(st, "tok_emb"));
            assert_non_null(ba_st_find(st, "head.bias"));
            assert_int_equal(ba_st_find(st, "blocks.1.ffn.fc.weight") != NULL, ffn);
            assert_string_equal(ba_st_metadata(st, "step"), "250");
            assert_string_equal(ba_st_metadata(st, "note"), "hello");
            assert_non_null(strstr(ba_st_metadata(st, "config"), ba_attn_name((ba_attn)attn)));
            ba_st_free(st);
            ba_model_free(r);
            ba_model_free(m);
        }
}

/* Rewrites the checkpoint src into dst through ba_st_write, with tensor
 * `name` changed by mode: 's' reshaped to [1, n], 'n' a NaN at index 1,
 * 'd' removed, 'x' plus an extra tensor, 't' stored as F64, 'm' without
 * the config metadata, 'c' with the config replaced by cfg_json. */
static void rewrite(const char *src, const char *dst, const char *name, char mode,
                    const char *cfg_json)
{
    char err[BA_ERR_LEN];
    ba_st *st;
    assert_int_equal(ba_st_read(&st, src, err), BA_OK);
    int n = ba_st_count(st);
    ba_st_entry *e = calloc((size_t)n + 1, sizeof *e);
    float *copy = NULL;
    double *wide = NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        const ba_st_tensor *t = ba_st_get(st, i);
        if (mode == 'd' && name && strcmp(t->name, name) == 0)
            continue;
        e[k].name = t->name;
        e[k].dtype = t->dtype;
        e[k].ndim = t->ndim;
        memcpy(e[k].shape, t->shape, sizeof t->shape);
        e[k].data = t->data;
        if (name && strcmp(t->name, name) == 0) {
            size_t cnt = t->nbytes / 4;
            if (mode == 's') {
                e[k].ndim = 2;
                e[k].shape[0] = 1;
                e[k].shape[1] = (int64_t)cnt;
            } else if (mode == 'n') {
                copy = malloc(t->nbytes);
                memcpy(copy, t->data, t->nbytes);
                copy[1] = NAN;
                e[k].data = copy;
            } else if (mode == 't') {
                wide = malloc(cnt * sizeof *wide);
                for (size_t j = 0; j < cnt; j++) {
                    float f;
                    memcpy(&f, (const char *)t->data + 4 * j, 4);
                    wide[j] = f;
                }
                e[k].dtype = BA_DT_F64;
                e[k].data = wide;
            }
        }
        k++;
    }
    static const float extra[2] = {1, 2};
    if (mode == 'x')
        e[k++] = (ba_st_entry){.name = "blocks.9.extra", .dtype = BA_DT_F32, .ndim = 1,
                               .shape = {2}, .data = extra};
    const char *mk[] = {"config"};
    const char *mv[] = {mode == 'c' ? cfg_json : ba_st_metadata(st, "config")};
    assert_int_equal(ba_st_write(dst, e, k, mk, mv, mode == 'm' ? 0 : 1, err), BA_OK);
    free(copy);
    free(wide);
    free(e);
    ba_st_free(st);
}

static void expect_load_fail(const char *path, int status, const char *sub)
{
    char err[BA_ERR_LEN] = "";
    ba_model *m = (ba_model *)&m;
    ba_data_spec spec;
    int rc = ba_checkpoint_load(path, &m, &spec, err);
    if (rc != status || !strstr(err, sub))
        fail_msg("expected status %d with '%s', got %d: %s", status, sub, rc, err);
    assert_null(m);
}

static void test_checkpoint_corrupt(void **state)
{
    (void)state;
    char err[BA_ERR_LEN] = "";
    const char *p = path_of("good.ckpt"), *q = path_of("bad.ckpt");
    ba_data_spec spec;
    ba_model *m = make_model(BA_TASK_BRACKETS, BA_ATTN_BOLTZMANN, 1, 7, &spec);
    assert_int_equal(ba_checkpoint_save(p, m, &spec, NULL, NULL, 0, err), BA_OK);

    /* The unchanged rewrite loads: the helper itself is sound. */
    rewrite(p, q, NULL, 0, NULL);
    ba_model *r;
    assert_int_equal(ba_checkpoint_load(q, &r, NULL, err), BA_OK);
    ba_model_free(r);

    size_t n;
    unsigned char *full = slurp(p, &n);
    write_bytes(q, full, n / 2);
    expect_load_fail(q, BA_ERR_FORMAT, "data_offsets");
    write_bytes(q, full, 5);
    expect_load_fail(q, BA_ERR_FORMAT, "too short");
    free(full);
    expect_load_fail(path_of("missing.ckpt"), BA_ERR_IO, "missing.ckpt");

    rewrite(p, q, "head.bias", 's', NULL);
    expect_load_fail(q, BA_ERR_FORMAT, "tensor 'head.bias' has shape [1, 6] in the file but [6]");
    rewrite(p, q, "blocks.1.attn.J", 'n', NULL);
    expect_load_fail(q, BA_ERR_FORMAT, "tensor 'blocks.1.attn.J' value [1] = nan is not finite");
    rewrite(p, q, "blocks.0.ln2.bias", 'd', NULL);
    expect_load_fail(q, BA_ERR_FORMAT, "tensor 'blocks.0.ln2.bias' is missing");
    rewrite(p, q, NULL, 'x', NULL);
    expect_load_fail(q, BA_ERR_FORMAT, "'blocks.9.extra' in the file is not a parameter");
    rewrite(p, q, "pos_emb", 't', NULL);
    expect_load_fail(q, BA_ERR_FORMAT, "tensor 'pos_emb' has dtype F64, expected F32");
    rewrite(p, q, NULL, 'm', NULL);
    expect_load_fail(q, BA_ERR_FORMAT, "no \"config\"");

    /* Config problems, including a config that no longer matches the
     * tensors and one beyond the engine's limit. */
    ba_config c = *ba_model_config(m);
    c.attn = BA_ATTN_SOFTMAX;
    char *j = ba_config_to_json(&c, &spec);
    rewrite(p, q, NULL, 'c', j);
    expect_load_fail(q, BA_ERR_FORMAT, "'blocks.0.attn.J' in the file is not a parameter");
    free(j);
    c = *ba_model_config(m);
    c.n_embd = 16;
    j = ba_config_to_json(&c, &spec);
    rewrite(p, q, NULL, 'c', j);
    expect_load_fail(q, BA_ERR_FORMAT, "tensor 'tok_emb' has shape [4, 8] in the file but [4, 16]");
    free(j);
    c = *ba_model_config(m);
    c.block_size = c.out_size = 30;
    j = ba_config_to_json(&c, &spec);
    rewrite(p, q, NULL, 'c', j);
    expect_load_fail(q, BA_ERR_LIMIT, "T = 30");
    free(j);
    /* A sampler in the config travels with the checkpoint; one without
     * the key (written before samplers existed) loads as exact; a bad one
     * is named. */
    c = *ba_model_config(m);
    c.sampler = ba_sampler_default(BA_SAMPLER_SA);
    c.sampler.shots = 99, c.sampler.beta0 = 0.25;
    j = ba_config_to_json(&c, &spec);
    rewrite(p, q, NULL, 'c', j);
    free(j);
    assert_int_equal(ba_checkpoint_load(q, &r, NULL, err), BA_OK);
    assert_config_equal(ba_model_config(r), &c);
    ba_model_free(r);
    c = *ba_model_config(m);
    j = ba_config_to_json(&c, &spec);
    char *cut = strstr(j, ",\"sampler\":");
    assert_non_null(cut);
    strcpy(cut, "}");
    rewrite(p, q, NULL, 'c', j);
    free(j);
    assert_int_equal(ba_checkpoint_load(q, &r, NULL, err), BA_OK);
    assert_int_equal(ba_model_config(r)->sampler.kind, BA_SAMPLER_EXACT);
    ba_model_free(r);
    j = ba_config_to_json(&c, &spec);
    cut = strstr(j, ",\"sampler\":");
    char bad[4096];
    snprintf(bad, sizeof bad, "%.*s,\"sampler\":{\"kind\":\"sa\",\"sweeps\":-3}}",
             (int)(cut - j), j);
    free(j);
    rewrite(p, q, NULL, 'c', bad);
    expect_load_fail(q, BA_ERR_FORMAT, "config field 'sampler': sa sweeps = -3");
    rewrite(p, q, NULL, 'c', "{\"task\":\"brackets\"}");
    expect_load_fail(q, BA_ERR_FORMAT, "checkpoint config: config field 'attn' is missing");
    rewrite(p, q, NULL, 'c', "not json");
    expect_load_fail(q, BA_ERR_FORMAT, "not valid JSON");

    /* Saving refuses what loading would refuse. */
    const char *k[] = {"config"}, *v[] = {"{}"};
    assert_int_equal(ba_checkpoint_save(q, m, &spec, k, v, 1, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "'config' is reserved"));
    ba_real *params = ba_model_params(m);
    ba_tensor_info ti;
    assert_int_equal(ba_model_tensor(m, ba_model_find_tensor(m, "head.weight"), &ti), BA_OK);
    params[ti.offset + 3] = (ba_real)INFINITY;
    remove(q);
    assert_int_equal(ba_checkpoint_save(q, m, &spec, NULL, NULL, 0, err), BA_ERR_NUMERIC);
    assert_non_null(strstr(err, "'head.weight'[3] = inf"));
    assert_int_equal(access(q, F_OK), -1);
    assert_int_equal(ba_checkpoint_save(NULL, m, &spec, NULL, NULL, 0, err), BA_ERR_ARG);
    assert_int_equal(ba_checkpoint_load(p, NULL, NULL, err), BA_ERR_ARG);
    /* a data description the model cannot take is refused before writing */
    spec.task = BA_TASK_CHARLM;
    assert_int_equal(ba_checkpoint_save(q, m, &spec, NULL, NULL, 0, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "charlm needs a token head"));
    ba_model_free(m);
}

static void test_grads_save(void **state)
{
    (void)state;
    char err[BA_ERR_LEN] = "";
    ba_data_spec spec;
    ba_model *m = make_model(BA_TASK_CHARLM, BA_ATTN_COUPLING, 1, 3, &spec);
    size_t P = ba_model_num_params(m);
    ba_real *g = ba_model_grads(m);
    for (size_t i = 0; i < P; i++)
        g[i] = (ba_real)((double)i * 0.25 - 3.0);
    g[2] = (ba_real)NAN; /* written as is */
    const char *p = path_of("grads.safetensors");
    assert_int_equal(ba_grads_save(p, m, 1.25, err), BA_OK);
    ba_st *st;
    assert_int_equal(ba_st_read(&st, p, err), BA_OK);
    int nt = ba_model_num_tensors(m);
    assert_int_equal(ba_st_count(st), nt + 1);
    const ba_st_tensor *l = ba_st_get(st, 0);
    assert_string_equal(l->name, "loss");
    assert_int_equal(l->dtype, BA_DT_F32);
    assert_int_equal(l->ndim, 1);
    assert_int_equal(l->shape[0], 1);
    float lv;
    memcpy(&lv, l->data, 4);
    assert_true(lv == 1.25f);
    for (int i = 0; i < nt; i++) {
        ba_tensor_info ti;
        assert_int_equal(ba_model_tensor(m, i, &ti), BA_OK);
        const ba_st_tensor *t = ba_st_find(st, ti.name);
        assert_non_null(t);
        assert_ptr_equal(t, ba_st_get(st, i + 1));
        assert_int_equal(t->dtype, BA_DT_F32);
        assert_int_equal(t->ndim, ti.ndim);
        for (int d = 0; d < ti.ndim; d++)
            assert_int_equal(t->shape[d], ti.shape[d]);
        assert_int_equal(t->nbytes, ti.size * 4);
        for (size_t j = 0; j < ti.size; j++) {
            float v;
            memcpy(&v, (const char *)t->data + 4 * j, 4);
            size_t at = ti.offset + j;
            if (at == 2)
                assert_true(isnan(v));
            else
                assert_true(v == (float)g[at]);
        }
    }
    ba_st_free(st);
    ba_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_st_roundtrip),
        cmocka_unit_test(test_st_handbuilt),
        cmocka_unit_test(test_st_malformed),
        cmocka_unit_test(test_st_truncated),
        cmocka_unit_test(test_st_bitflip),
        cmocka_unit_test(test_st_write_errors),
        cmocka_unit_test(test_config_roundtrip),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_sampler),
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_batch_check),
        cmocka_unit_test(test_checkpoint_roundtrip),
        cmocka_unit_test(test_checkpoint_corrupt),
        cmocka_unit_test(test_grads_save),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
