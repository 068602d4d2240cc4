/* Tests of the charlm task's loader: splits, windows, UTF-8 text (accepted,
 * rejected, against tests/utf8_ref.h), a given vocabulary, errors, data
 * that is not a regular file, and tinyshakespeare's sizes. */
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
#include "utf8_ref.h"

/* ------------------------------------------------------------- helpers */

static void write_temp(char path[64], const void *data, size_t n)
{
    strcpy(path, "/tmp/ba_test_tasks_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    if (n > 0)
        assert_int_equal((long)write(fd, data, n), (long)n);
    close(fd);
}

/* ------------------------------------------------------------ charlm */

/* "hello, world!\n" x 7 + "hello": 103 bytes, train 92, validation the
 * last 11 = "orld!\nhello". */
static void make_hello(char *buf)
{
    buf[0] = 0;
    for (int i = 0; i < 7; i++)
        strcat(buf, "hello, world!\n");
    strcat(buf, "hello");
}

static void test_charlm_basic(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[64], text[128];
    make_hello(text);
    assert_int_equal(strlen(text), 103);
    write_temp(path, text, 103);
    ba_dataset *d;
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 3, err), BA_OK);
    assert_int_equal(ba_dataset_task(d), BA_TASK_CHARLM);
    assert_int_equal(ba_dataset_block_size(d), 3);
    const char *vocab = "\n !,dehlorw";
    assert_int_equal(ba_dataset_vocab_size(d), 11);
    assert_memory_equal(ba_dataset_vocab(d), vocab, 11);
    uint64_t tr, ev;
    ba_dataset_sizes(d, &tr, &ev);
    assert_int_equal(tr, 92);
    assert_int_equal(ev, 11);
    assert_true(ba_dataset_position_baseline(d) == -1.0);
    /* windows at 0, 3, 6 of "orld!\nhello" (9 + 4 > 11 stops) */
    assert_int_equal(ba_dataset_num_eval(d), 3);
    const char *win_in[3] = {"orl", "d!\n", "hel"};
    const char *win_tg[3] = {"rld", "!\nh", "ell"};
    const uint8_t *V = ba_dataset_vocab(d);
    for (int n = 0; n < 3; n++) {
        int in[3], tg[3];
        ba_dataset_eval_item(d, n, in, tg);
        for (int t = 0; t < 3; t++) {
            assert_int_equal(V[in[t]], (uint8_t)win_in[n][t]);
            assert_int_equal(V[tg[t]], (uint8_t)win_tg[n][t]);
        }
    }
    ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, 99);
    cfg.n_layer = 2;
    ba_config_set_data(&cfg, d);
    assert_int_equal(cfg.head, BA_HEAD_TOKEN);
    assert_int_equal(cfg.block_size, 3);
    assert_int_equal(cfg.vocab_size, 11);
    assert_int_equal(cfg.out_size, 11);
    assert_int_equal(cfg.n_layer, 2);
    assert_int_equal(ba_config_validate(&cfg, err), BA_OK);
    ba_data_spec spec;
    ba_dataset_spec(d, &spec);
    assert_int_equal(spec.task, BA_TASK_CHARLM);
    assert_int_equal(spec.vocab_size, 11);
    assert_memory_equal(spec.vocab, vocab, 11);
    assert_int_equal(ba_data_spec_check(&spec, &cfg, err), BA_OK);
    cfg.out_size = 12; /* a charlm head predicts the vocabulary */
    assert_int_equal(ba_data_spec_check(&spec, &cfg, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "out_size = 12 must equal vocab_size = 11 for charlm"));

    /* round trip through ba_encode_text */
    int ids[5];
    assert_int_equal(ba_encode_text(V, 11, "world", 5, ids, err), BA_OK);
    for (int t = 0; t < 5; t++)
        assert_int_equal(V[ids[t]], (uint8_t)"world"[t]);
    assert_int_equal(ids[0], 10); /* 'w' is the largest byte */
    assert_int_equal(ba_encode_text(V, 11, "held", 4, ids, err), BA_OK);
    assert_int_equal(ba_encode_text(V, 11, "hexo", 4, ids, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "120"));
    assert_non_null(strstr(err, "'x'"));
    assert_non_null(strstr(err, "position 2"));
    assert_int_equal(ba_encode_text(V, 11, "h\x01", 2, ids, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "byte 1 "));
    assert_int_equal(ba_encode_text(NULL, 11, "h", 1, ids, err), BA_ERR_ARG);
    assert_int_equal(ba_encode_text(V, 0, "h", 1, ids, NULL), BA_ERR_ARG);
    const uint8_t dup[3] = {'a', 'b', 'a'};
    assert_int_equal(ba_encode_text(dup, 3, "a", 1, ids, err), BA_ERR_ARG);
    assert_int_equal(ba_encode_text(V, 11, NULL, 0, NULL, err), BA_OK);
    ba_dataset_free(d);
    unlink(path);
}

/* Bytes 1..120 each once (text: control characters and ASCII, no NUL):
 * token id = byte - 1 = offset, so a window's position in the file is its
 * first token and the split boundaries are exact. */
static void test_charlm_windows(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[64];
    uint8_t bytes[120];
    for (int i = 0; i < 120; i++)
        bytes[i] = (uint8_t)(i + 1);
    write_temp(path, bytes, 120);
    ba_dataset *d;
    const int T = 3;
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, T, err), BA_OK);
    assert_int_equal(ba_dataset_vocab_size(d), 120);
    assert_int_equal(ba_dataset_vocab(d)[0], 1);
    assert_int_equal(ba_dataset_vocab(d)[119], 120);
    uint64_t tr, ev;
    ba_dataset_sizes(d, &tr, &ev);
    assert_int_equal(tr, 108);
    assert_int_equal(ev, 12);
    /* validation 108..119: windows at 0, 3, 6 (9 + 4 > 12) */
    assert_int_equal(ba_dataset_num_eval(d), 3);
    for (int n = 0; n < 3; n++) {
        int in[3], tg[3];
        ba_dataset_eval_item(d, n, in, tg);
        for (int t = 0; t < T; t++) {
            assert_int_equal(in[t], 108 + 3 * n + t);
            assert_int_equal(tg[t], 108 + 3 * n + t + 1);
        }
    }
    /* training windows: T+1 consecutive train bytes, start in [0, 104] */
    ba_rng rng;
    ba_rng_seed(&rng, 11);
    int in[64 * 3], tg[64 * 3]; /* (B,T) */
    int hit[105] = {0};
    for (int it = 0; it < 200; it++) {
        ba_dataset_train_batch(d, &rng, 64, in, tg);
        for (int b = 0; b < 64; b++) {
            int s = in[b * T];
            assert_true(s >= 0 && s <= 104);
            for (int t = 0; t < T; t++) {
                assert_int_equal(in[b * T + t], s + t);
                assert_int_equal(tg[b * T + t], s + t + 1);
            }
            hit[s] = 1;
        }
    }
    /* both ends of the range are reachable */
    assert_true(hit[0] && hit[104]);
    ba_dataset_free(d);

    /* the same rng state gives the same batch */
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, T, err), BA_OK);
    ba_rng r1, r2;
    ba_rng_seed(&r1, 3);
    r2 = r1;
    int in2[64 * 3], tg2[64 * 3];
    ba_dataset_train_batch(d, &r1, 64, in, tg);
    ba_dataset_train_batch(d, &r2, 64, in2, tg2);
    assert_memory_equal(in, in2, sizeof in);
    assert_memory_equal(tg, tg2, sizeof tg);
    ba_dataset_free(d);
    unlink(path);
}

/* Valid multi-byte UTF-8 loads, byte by byte: "é" (2 bytes), "€" (3), "😀"
 * (4), the largest code point U+10FFFF and U+FFFD are each several tokens. */
static void test_charlm_utf8_accepted(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[64];
    /* "aé€😀\xf4\x8f\xbf\xbf\xef\xbf\xbd\n" repeated: 1+2+3+4+4+3+1 = 18 bytes */
    static const char unit[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"
                               "\xef\xbf\xbd\n";
    assert_int_equal(sizeof unit - 1, 18);
    char text[18 * 10];
    for (int i = 0; i < 10; i++)
        memcpy(text + 18 * i, unit, 18);
    write_temp(path, text, sizeof text);
    ba_dataset *d;
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 5, err), BA_OK);
    /* distinct bytes: a \n c3 a9 e2 82 ac f0 9f 98 80 f4 8f bf ef bd */
    assert_int_equal(ba_dataset_vocab_size(d), 16);
    const uint8_t *V = ba_dataset_vocab(d);
    assert_int_equal(V[0], '\n');
    assert_int_equal(V[1], 'a');
    assert_int_equal(V[15], 0xf4);
    uint64_t tr, ev;
    ba_dataset_sizes(d, &tr, &ev);
    assert_int_equal(tr + ev, 180);
    /* the validation split starts at byte 162 = 9 * 18: "aé€..." as bytes */
    int in[5], tg[5];
    ba_dataset_eval_item(d, 0, in, tg);
    for (int t = 0; t < 5; t++) {
        assert_int_equal(V[in[t]], (uint8_t)unit[t]);
        assert_int_equal(V[tg[t]], (uint8_t)unit[t + 1]);
    }
    ba_dataset_free(d);
    unlink(path);
    /* a byte-order mark is text too */
    char bom[3 + 18 * 10];
    memcpy(bom, "\xef\xbb\xbf", 3);
    memcpy(bom + 3, text, sizeof text);
    write_temp(path, bom, sizeof bom);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 5, err), BA_OK);
    ba_dataset_free(d);
    unlink(path);
}

/* Each kind of bad text, placed at offset 40 of otherwise valid text: the
 * error is BA_ERR_FORMAT, names offset 40 and the problem, leaves *out NULL,
 * and is the same with a given vocabulary that holds every byte. */
static void test_charlm_rejects_bad_text(void **state)
{
    (void)state;
    static const struct {
        const char *bytes;
        size_t n;
        const char *why; /* a substring of the message */
    } cases[] = {
        {"\x00", 1, "NUL byte at offset 40"},
        {"\x80", 1, "unexpected continuation byte (0x80-0xBF) where a character should start"},
        {"\xbf", 1, "unexpected continuation byte (0x80-0xBF) where a character should start"},
        {"\xc0\xaf", 2, "overlong 2-byte encoding (a shorter one exists)"},
        {"\xc1\xbf", 2, "overlong 2-byte encoding (a shorter one exists)"},
        {"\xe0\x80\xaf", 3, "overlong 3-byte encoding (a shorter one exists)"},
        {"\xe0\x9f\xbf", 3, "overlong 3-byte encoding (a shorter one exists)"},
        {"\xf0\x8f\xbf\xbf", 4, "overlong 4-byte encoding (a shorter one exists)"},
        {"\xed\xa0\x80", 3, "a UTF-16 surrogate (U+D800-U+DFFF)"},
        {"\xed\xbf\xbf", 3, "a UTF-16 surrogate (U+D800-U+DFFF)"},
        {"\xf4\x90\x80\x80", 4, "a code point above U+10FFFF"},
        {"\xf5\x80\x80\x80", 4, "a code point above U+10FFFF"},
        {"\xf8", 1, "a byte 0xF8-0xFF, which never occurs in UTF-8"},
        {"\xfe", 1, "a byte 0xF8-0xFF, which never occurs in UTF-8"},
        {"\xff", 1, "a byte 0xF8-0xFF, which never occurs in UTF-8"},
        {"\xc3" "a", 2, "truncated 2-byte sequence (byte 2 is not a continuation byte)"},
        {"\xc3" "b", 2, "truncated 2-byte sequence (byte 2 is not a continuation byte)"},
        {"\xe2\x82" "a", 3, "truncated 3-byte sequence (byte 3 is not a continuation byte)"},
        {"\xf0\x9f\x98\xc3\xa9", 5,
         "truncated 4-byte sequence (byte 4 is not a continuation byte)"},
    };
    /* The message names the offset and the kind of problem, never the
     * bytes (eval reads the file a checkpoint records, which the user may
     * not be allowed to read): two different bytes of one kind give the
     * same message, the path aside. */
    char prev_tail[BA_ERR_LEN] = "";
    char err[BA_ERR_LEN], path[64], text[100];
    uint8_t all[256];
    for (int b = 0; b < 256; b++)
        all[b] = (uint8_t)b;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        memset(text, 'x', sizeof text);
        memcpy(text + 40, cases[c].bytes, cases[c].n);
        write_temp(path, text, sizeof text);
        for (int given = 0; given < 2; given++) {
            ba_dataset *d = (ba_dataset *)&d;
            memset(err, 0, sizeof err);
            int rc = ba_dataset_charlm(&d, path, given ? all : NULL, given ? 256 : 0, 3, err);
            if (rc != BA_ERR_FORMAT || !strstr(err, cases[c].why) || !strstr(err, "offset 40") ||
                !strstr(err, path))
                fail_msg("case %zu (%s vocabulary): status %d, message '%s', expected '%s'", c,
                         given ? "given" : "own", rc, err, cases[c].why);
            assert_null(d);
            const char *tail = strstr(err, path) + strlen(path);
            if (given == 0 && c > 0 && strcmp(cases[c].why, cases[c - 1].why) == 0 &&
                strcmp(tail, prev_tail) != 0)
                fail_msg("case %zu: '%s' differs from the same kind's '%s'", c, tail, prev_tail);
            if (given == 0)
                snprintf(prev_tail, sizeof prev_tail, "%s", tail);
        }
        unlink(path);
    }
    /* a sequence cut off by the end of the file */
    memset(text, 'x', sizeof text);
    memcpy(text + 97, "\xe2\x82\xac", 3);
    write_temp(path, text, 99);
    ba_dataset *d;
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 3, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "offset 97"));
    assert_non_null(strstr(err, "3-byte sequence truncated by the end of the file"));
    unlink(path);
    /* the first problem is the one reported */
    memset(text, 'x', sizeof text);
    text[10] = (char)0xff;
    text[5] = 0;
    write_temp(path, text, sizeof text);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 3, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "NUL byte at offset 5"));
    unlink(path);
}

/* The library's check against its reference twin (tests/utf8_ref.h, the
 * RFC 3629 grammar) on 3000 random texts: valid characters of every length
 * (edges of each range included) mixed, one in 12, with single bytes from
 * the places where the grammar's ranges end. Both outcomes must occur often, so the
 * comparison is not vacuous. */
static size_t put_utf8(uint8_t *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | cp >> 6), o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | cp >> 12), o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | cp >> 18), o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)), o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

static void test_charlm_utf8_vs_reference(void **state)
{
    (void)state;
    static const uint32_t lo[] = {0x01, 0x80, 0x800, 0xE000, 0x10000};
    static const uint32_t hi[] = {0x7F, 0x7FF, 0xD7FF, 0xFFFF, 0x10FFFF};
    static const uint8_t edge[] = {0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0,
                                   0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF,
                                   0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF};
    char err[BA_ERR_LEN], path[64];
    uint8_t text[24 + 16 * 4];
    ba_rng rng;
    ba_rng_seed(&rng, 2024);
    int n_ok = 0, n_bad = 0;
    for (int it = 0; it < 3000; it++) {
        size_t n = 0;
        memset(text, 'x', 24); /* long enough for T = 1 whatever follows */
        n = 24;
        int units = 1 + (int)ba_rng_below(&rng, 16);
        for (int u = 0; u < units; u++) {
            if (ba_rng_below(&rng, 12) == 0) {
                text[n++] = edge[ba_rng_below(&rng, sizeof edge)];
            } else {
                int k = (int)ba_rng_below(&rng, 5);
                uint64_t span = hi[k] - lo[k] + 1;
                /* a quarter at the ends of the range */
                uint64_t pick = ba_rng_below(&rng, 4);
                uint32_t cp = pick == 0   ? lo[k]
                              : pick == 1 ? hi[k]
                                          : lo[k] + (uint32_t)ba_rng_below(&rng, span);
                n += put_utf8(text + n, cp);
            }
        }
        write_temp(path, text, n);
        ba_dataset *d;
        int rc = ba_dataset_charlm(&d, path, NULL, 0, 1, err);
        int want = utf8_ref_valid(text, n);
        if ((rc == BA_OK) != want)
            fail_msg("text %d of %zu bytes: library %s (%s), reference %s", it, n,
                     rc ? "rejects" : "accepts", rc ? err : "", want ? "valid" : "invalid");
        if (rc == BA_OK) {
            n_ok++;
            assert_int_equal(ba_dataset_num_eval(d) > 0, 1);
            ba_dataset_free(d);
        } else {
            n_bad++;
            assert_int_equal(rc, BA_ERR_FORMAT);
        }
        unlink(path);
    }
    print_message("utf8 vs reference: %d valid, %d invalid texts agree\n", n_ok, n_bad);
    assert_true(n_ok > 600 && n_bad > 600);
}

static void test_charlm_given_vocab(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[64], text[128];
    make_hello(text);
    write_temp(path, text, 103);
    ba_dataset *d;
    /* a reversed vocabulary: ids follow the given table, not sorted order */
    const uint8_t rev[11] = {'w', 'r', 'o', 'l', 'h', 'e', 'd', ',', '!', ' ', '\n'};
    assert_int_equal(ba_dataset_charlm(&d, path, rev, 11, 3, err), BA_OK);
    assert_memory_equal(ba_dataset_vocab(d), rev, 11);
    int in[3], tg[3];
    ba_dataset_eval_item(d, 0, in, tg); /* "orl" -> "rld" */
    assert_int_equal(in[0], 2);
    assert_int_equal(in[1], 1);
    assert_int_equal(in[2], 3);
    assert_int_equal(tg[2], 6);
    ba_dataset_free(d);
    /* a larger vocabulary is fine */
    uint8_t big[12];
    memcpy(big, rev, 11);
    big[11] = 'z';
    assert_int_equal(ba_dataset_charlm(&d, path, big, 12, 3, err), BA_OK);
    assert_int_equal(ba_dataset_vocab_size(d), 12);
    ba_dataset_free(d);
    /* 'w' missing: first seen at offset 7, named by its offset only (the
     * byte itself is the file's content, not the message's) */
    d = (ba_dataset *)&d;
    assert_int_equal(ba_dataset_charlm(&d, path, rev + 1, 10, 3, err), BA_ERR_FORMAT);
    assert_null(d);
    assert_non_null(strstr(err, "the byte at offset 7 of"));
    assert_non_null(strstr(err, "is not in the model's vocabulary of 10 symbols"));
    assert_null(strstr(err, "119"));
    assert_null(strstr(err, "'w'"));
    /* a vocabulary that repeats a byte is refused */
    uint8_t twice[11];
    memcpy(twice, rev, 11);
    twice[10] = 'w';
    assert_int_equal(ba_dataset_charlm(&d, path, twice, 11, 3, err), BA_ERR_ARG);
    assert_int_equal(ba_dataset_charlm(&d, path, rev, 0, 3, err), BA_ERR_ARG);
    unlink(path);
}

static void test_charlm_errors(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[64], text[128];
    ba_dataset *d = (ba_dataset *)&d;
    assert_int_equal(ba_dataset_charlm(&d, "/nonexistent/ba_no_such_file.txt", NULL, 0, 4, err),
                     BA_ERR_IO);
    assert_null(d);
    assert_non_null(strstr(err, "/nonexistent/ba_no_such_file.txt"));
    assert_non_null(strstr(err, "No such file"));
    assert_int_equal(ba_dataset_charlm(&d, "/nonexistent/x", NULL, 0, 4, NULL), BA_ERR_IO);

    make_hello(text);
    write_temp(path, text, 103);
    /* validation holds 11 bytes: T = 10 fits, T = 11 does not */
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 10, err), BA_OK);
    assert_int_equal(ba_dataset_num_eval(d), 1);
    ba_dataset_free(d);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 11, err), BA_ERR_FORMAT);
    assert_null(d);
    assert_non_null(strstr(err, "103 bytes"));
    assert_non_null(strstr(err, "(11)"));
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 0, err), BA_ERR_ARG);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, BA_MAX_BLOCK + 1, err), BA_ERR_ARG);
    char num[32];
    snprintf(num, sizeof num, "= %d", BA_MAX_BLOCK + 1);
    assert_non_null(strstr(err, num));
    unlink(path);

    write_temp(path, "", 0);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 1, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "empty"));
    unlink(path);
}

/* Data that is not a regular file, or too large, is refused before a byte
 * is read: /dev/zero would be read until memory runs out and a FIFO would
 * wait for a writer forever (this test would hang). */
static void test_charlm_not_a_file(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], dir[64], path[128];
    strcpy(dir, "/tmp/ba_test_tasks_dir_XXXXXX");
    assert_non_null(mkdtemp(dir));
    ba_dataset *d = (ba_dataset *)&d;
    assert_int_equal(ba_dataset_charlm(&d, "/dev/zero", NULL, 0, 4, err), BA_ERR_IO);
    assert_null(d);
    assert_non_null(strstr(err, "'/dev/zero' is a character device: charlm data must be a "
                                "regular file"));
    assert_int_equal(ba_dataset_charlm(&d, dir, NULL, 0, 4, err), BA_ERR_IO);
    assert_non_null(strstr(err, "is a directory"));
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 4, err), BA_ERR_IO);
    assert_non_null(strstr(err, "is a FIFO"));
    unlink(path);
    /* one byte over the limit (a sparse file: nothing is written) */
    snprintf(path, sizeof path, "%s/big.txt", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), (off_t)BA_MAX_DATA_BYTES + 1), 0);
    fclose(f);
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 4, err), BA_ERR_LIMIT);
    assert_null(d);
    assert_non_null(strstr(err, "has 1073741825 bytes, above the limit of 1073741824 bytes"));
    unlink(path);
    rmdir(dir);
}

static void test_tinyshakespeare(void **state)
{
    (void)state;
    const char *dir = getenv("BA_SHARED_DATA");
    char path[4096];
    if (!dir) {
        printf("SKIPPED: tinyshakespeare check: BA_SHARED_DATA is not set\n");
        skip();
    }
    snprintf(path, sizeof path, "%s/tinyshakespeare.txt", dir);
    if (access(path, R_OK) != 0) {
        printf("SKIPPED: tinyshakespeare check: %s is not readable\n", path);
        skip();
    }
    char err[BA_ERR_LEN];
    ba_dataset *d;
    assert_int_equal(ba_dataset_charlm(&d, path, NULL, 0, 12, err), BA_OK);
    uint64_t tr, ev;
    ba_dataset_sizes(d, &tr, &ev);
    assert_int_equal(tr + ev, 1115394);
    assert_int_equal(tr, 1003854);
    assert_int_equal(ba_dataset_vocab_size(d), 65);
    assert_int_equal(ba_dataset_num_eval(d), (111540 - 13) / 12 + 1);
    ba_dataset_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_charlm_basic),
        cmocka_unit_test(test_charlm_windows),
        cmocka_unit_test(test_charlm_utf8_accepted),
        cmocka_unit_test(test_charlm_rejects_bad_text),
        cmocka_unit_test(test_charlm_utf8_vs_reference),
        cmocka_unit_test(test_charlm_given_vocab),
        cmocka_unit_test(test_charlm_errors),
        cmocka_unit_test(test_charlm_not_a_file),
        cmocka_unit_test(test_tinyshakespeare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
