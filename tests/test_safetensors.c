/* Tests of the safetensors files (ba_st_*): round trips and a hand-built
 * file, malformed, truncated and bit-flipped files, and write errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boltzattn.h"
#include "io_files.h"

/* ------------------------------------------------------------- helpers */

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_st_roundtrip),
        cmocka_unit_test(test_st_handbuilt),
        cmocka_unit_test(test_st_malformed),
        cmocka_unit_test(test_st_truncated),
        cmocka_unit_test(test_st_bitflip),
        cmocka_unit_test(test_st_write_errors),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
