/* The two tasks as datasets: charlm (next byte over any file) and brackets
 * (point from each close to its matching open, uniform valid prefixes with
 * a held-out set that training never sees). */
#include "train/train.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Brackets are capped so a sequence fits a fixed stack and the DP table
 * fits the dataset struct; counts saturate uint64 long before that anyway
 * for kinds >= 2. */
#define BR_MAX_T 64
#define BR_MAX_KINDS 4

struct ba_dataset {
    ba_task task;
    int T;
    int vocab_size;
    uint8_t vocab[256]; /* charlm: token id -> byte */

    /* charlm: the whole file as token ids, train split first. */
    uint8_t *tokens; /* (n_train + n_val) */
    size_t n_train, n_val;
    int n_windows; /* validation windows */

    /* brackets */
    int kinds;
    int n_heldout_req; /* as requested, for the config */
    uint64_t data_seed;
    /* f[t][d]: ways to finish positions t..T-1 from depth d. Only entries
     * with d <= t reachable from (0,0) are exact; the rest may saturate. */
    uint64_t f[BR_MAX_T + 1][BR_MAX_T + 2];
    uint64_t total;      /* f[0][0] = number of valid prefixes */
    int n_held;          /* held-out sequences actually stored */
    uint8_t *held;       /* (n_held, T) in generation order */
    uint32_t *slots;     /* (n_slots) held index + 1, 0 = empty */
    size_t n_slots;      /* power of two, at least 2 * n_held */
    double baseline;     /* position baseline over the held-out set */
};

/* -------------------------------------------------------------- helpers */

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    if (a != 0 && b > UINT64_MAX / a)
        return UINT64_MAX;
    return a * b;
}

/* Printable ASCII: messages show such a byte as a character too. */
static int is_print(int c) { return c >= 32 && c < 127; }

/* inverse[b] = token id of byte b, or -1. BA_ERR_ARG on a repeated byte,
 * which would make decoding ambiguous. */
static int build_inverse(const uint8_t *vocab, int vocab_size, int inverse[256], char *err)
{
    if (!vocab)
        return ba_fail(err, BA_ERR_ARG, "vocabulary is NULL");
    if (vocab_size < 1 || vocab_size > 256)
        return ba_fail(err, BA_ERR_ARG, "vocab_size = %d is out of range [1, 256]", vocab_size);
    for (int b = 0; b < 256; b++)
        inverse[b] = -1;
    for (int i = 0; i < vocab_size; i++) {
        if (inverse[vocab[i]] >= 0)
            return ba_fail(err, BA_ERR_ARG,
                           "vocabulary repeats byte %d at ids %d and %d", vocab[i],
                           inverse[vocab[i]], i);
        inverse[vocab[i]] = i;
    }
    return BA_OK;
}

/* "a directory", "a FIFO", ... for a file that is not a regular one. */
static const char *file_kind(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

/* The whole data file, refused before a byte is read when it is not a
 * regular file (/dev/zero would be read until memory runs out, a FIFO
 * would wait for a writer forever) or is above BA_MAX_DATA_BYTES.
 * ba_read_file reads exactly the size its own fstat reports; the size is
 * checked again after, for a file swapped in between. */
static int read_data_file(const char *path, uint8_t **out, size_t *len, char *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ba_fail(err, BA_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return ba_fail(err, BA_ERR_IO,
                       "'%s' is %s: charlm data must be a regular file (of at most 1 GiB)",
                       path, file_kind(sb.st_mode));
    if ((unsigned long long)sb.st_size > (unsigned long long)BA_MAX_DATA_BYTES)
        return ba_fail(err, BA_ERR_LIMIT,
                       "'%s' has %lld bytes, above the limit of %lld bytes (1 GiB) for charlm "
                       "data",
                       path, (long long)sb.st_size, (long long)BA_MAX_DATA_BYTES);
    unsigned char *buf = NULL;
    int rc = ba_read_file(path, &buf, len, err);
    if (rc)
        return rc;
    if (*len > (size_t)BA_MAX_DATA_BYTES) {
        free(buf);
        return ba_fail(err, BA_ERR_LIMIT,
                       "'%s' has %zu bytes, above the limit of %lld bytes (1 GiB) for charlm "
                       "data",
                       path, *len, (long long)BA_MAX_DATA_BYTES);
    }
    *out = buf;
    return BA_OK;
}

/* ---------------------------------------------------------------- charlm */

/* charlm data must be text: UTF-8 (RFC 3629) without NUL bytes. Binary
 * data, a UTF-16 file or a Latin-1 file would otherwise train "fine" on
 * garbage, and a NUL would cut the vocabulary's text forms short. The model
 * stays byte-level: a multi-byte character is several tokens. BA_ERR_FORMAT
 * names the offset of the first bad sequence's lead byte and the kind of
 * problem, never a byte or code point of the file: eval reads the path a
 * checkpoint records, which may name a file the user cannot read. */
static int check_utf8(const uint8_t *s, size_t len, const char *path, char *err)
{
    static const uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000}; /* by continuation count */
    for (size_t i = 0; i < len;) {
        uint8_t b = s[i];
        if (b == 0)
            return ba_fail(err, BA_ERR_FORMAT,
                           "NUL byte at offset %zu of '%.160s': charlm data must be text", i,
                           path);
        if (b < 0x80) {
            i++;
            continue;
        }
        if (b < 0xC0)
            return ba_fail(err, BA_ERR_FORMAT,
                           "invalid UTF-8 at offset %zu of '%.160s': unexpected continuation "
                           "byte (0x80-0xBF) where a character should start",
                           i, path);
        if (b >= 0xF8)
            return ba_fail(err, BA_ERR_FORMAT,
                           "invalid UTF-8 at offset %zu of '%.160s': a byte 0xF8-0xFF, which "
                           "never occurs in UTF-8",
                           i, path);
        /* C0-DF lead 2 bytes, E0-EF 3, F0-F7 4; C0/C1 and F5-F7 are caught
         * below as overlong and too large once their value is known. */
        int more = b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
        uint32_t cp = b & (0x3Fu >> more);
        for (int k = 1; k <= more; k++) {
            if (i + (size_t)k >= len)
                return ba_fail(err, BA_ERR_FORMAT,
                               "invalid UTF-8 at offset %zu of '%.160s': %d-byte sequence "
                               "truncated by the end of the file",
                               i, path, more + 1);
            uint8_t c = s[i + (size_t)k];
            if ((c & 0xC0) != 0x80)
                return ba_fail(err, BA_ERR_FORMAT,
                               "invalid UTF-8 at offset %zu of '%.160s': truncated %d-byte "
                               "sequence (byte %d is not a continuation byte)",
                               i, path, more + 1, k + 1);
            cp = cp << 6 | (c & 0x3Fu);
        }
        if (cp < min_cp[more])
            return ba_fail(err, BA_ERR_FORMAT,
                           "invalid UTF-8 at offset %zu of '%.160s': overlong %d-byte encoding "
                           "(a shorter one exists)",
                           i, path, more + 1);
        if (cp >= 0xD800 && cp <= 0xDFFF)
            return ba_fail(err, BA_ERR_FORMAT,
                           "invalid UTF-8 at offset %zu of '%.160s': a UTF-16 surrogate "
                           "(U+D800-U+DFFF)",
                           i, path);
        if (cp > 0x10FFFF)
            return ba_fail(err, BA_ERR_FORMAT,
                           "invalid UTF-8 at offset %zu of '%.160s': a code point above "
                           "U+10FFFF",
                           i, path);
        i += (size_t)more + 1;
    }
    return BA_OK;
}

int ba_dataset_charlm(ba_dataset **out, const char *path, const uint8_t *vocab,
                      int vocab_size, int block_size, char *err)
{
    if (!out)
        return ba_fail(err, BA_ERR_ARG, "out is NULL");
    *out = NULL;
    if (!path)
        return ba_fail(err, BA_ERR_ARG, "path is NULL");
    if (block_size < 1 || block_size > BA_MAX_BLOCK)
        return ba_fail(err, BA_ERR_ARG, "block_size (T) = %d is out of range [1, %d]", block_size,
                       BA_MAX_BLOCK);
    int inverse[256];
    if (vocab) {
        int rc = build_inverse(vocab, vocab_size, inverse, err);
        if (rc)
            return rc;
    }

    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = read_data_file(path, &buf, &len, err);
    if (rc)
        return rc;
    if (len == 0) {
        free(buf);
        return ba_fail(err, BA_ERR_FORMAT, "'%s' is empty: charlm needs text to train on", path);
    }
    if ((rc = check_utf8(buf, len, path, err))) {
        free(buf);
        return rc;
    }

    /* n_train = floor(0.9 * len) computed exactly in integers (9*len/10
     * without overflow); validation is the remaining len - n_train bytes.
     * For Tiny Shakespeare: 1003854 train, 111540 validation. */
    size_t n_train = (len / 10) * 9 + (len % 10) * 9 / 10;
    size_t n_val = len - n_train;
    size_t win = (size_t)block_size + 1;
    if (n_train < win || n_val < win) {
        free(buf);
        return ba_fail(err, BA_ERR_FORMAT,
                       "'%s' has %zu bytes: train (%zu) and validation (%zu) splits must each hold "
                       "a window of T+1 = %zu bytes",
                       path, len, n_train, n_val, win);
    }
    size_t n_windows = (n_val - win) / (size_t)block_size + 1;
    if (n_windows > INT_MAX) {
        free(buf);
        return ba_fail(err, BA_ERR_LIMIT,
                       "'%s' gives %zu validation windows at T = %d, more than %d", path,
                       n_windows, block_size, INT_MAX);
    }

    ba_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        free(buf);
        return ba_fail(err, BA_ERR_NOMEM, "out of memory allocating the dataset");
    }
    d->task = BA_TASK_CHARLM;
    d->T = block_size;
    d->n_train = n_train;
    d->n_val = n_val;
    d->n_windows = (int)n_windows;
    d->baseline = -1.0;

    if (vocab) {
        memcpy(d->vocab, vocab, (size_t)vocab_size);
        d->vocab_size = vocab_size;
        for (size_t i = 0; i < len; i++) {
            int id = inverse[buf[i]];
            if (id < 0) {
                free(buf);
                free(d);
                return ba_fail(err, BA_ERR_FORMAT,
                               "the byte at offset %zu of '%s' is not in the model's "
                               "vocabulary of %d symbols (is this the file the model was "
                               "trained on?)",
                               i, path, vocab_size);
            }
            buf[i] = (uint8_t)id;
        }
    } else {
        int seen[256] = {0};
        for (size_t i = 0; i < len; i++)
            seen[buf[i]] = 1;
        int map[256];
        int V = 0;
        for (int b = 0; b < 256; b++)
            if (seen[b]) {
                map[b] = V;
                d->vocab[V++] = (uint8_t)b;
            }
        d->vocab_size = V;
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)map[buf[i]];
    }
    d->tokens = buf; /* encoded in place: ids fit a byte since V <= 256 */
    *out = d;
    return BA_OK;
}

/* -------------------------------------------------------------- brackets */

uint64_t ba_brackets_count(int T, int kinds)
{
    if (T < 0 || kinds < 1)
        return 0;
    /* The count grows with T (every prefix extends by an open), and
     * C(128,64) > 2^64 already for one kind: no need to run the DP. */
    if (T > 128)
        return UINT64_MAX;
    uint64_t g[131]; /* g[d] = f(t, d) for the current t, d in [0, T+1] */
    for (int d = 0; d <= T + 1; d++)
        g[d] = 1;
    for (int t = T - 1; t >= 0; t--) {
        /* In-place update from low d upward would clobber g[d-1]; keep it. */
        uint64_t prev = 0; /* old g[d-1] */
        for (int d = 0; d <= t; d++) {
            uint64_t cur = g[d];
            uint64_t v = sat_mul((uint64_t)kinds, g[d + 1]);
            if (d > 0)
                v = sat_add(v, prev);
            prev = cur;
            g[d] = v;
        }
    }
    return g[0];
}

/* 64-bit hash of a token sequence: multiply-xor per token, then a final
 * avalanche so the low bits used for slots depend on every token. */
static uint64_t seq_hash(const uint8_t *s, int T)
{
    uint64_t h = 0x243f6a8885a308d3ULL;
    for (int i = 0; i < T; i++)
        h = (h ^ s[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* Slot holding s, or the empty slot where it would go. */
static size_t held_probe(const ba_dataset *d, const uint8_t *s)
{
    size_t mask = d->n_slots - 1;
    size_t i = (size_t)seq_hash(s, d->T) & mask;
    while (d->slots[i]) {
        const uint8_t *h = d->held + (size_t)(d->slots[i] - 1) * (size_t)d->T;
        if (memcmp(h, s, (size_t)d->T) == 0)
            return i;
        i = (i + 1) & mask;
    }
    return i;
}

static int is_held(const ba_dataset *d, const uint8_t *s)
{
    return d->n_held > 0 && d->slots[held_probe(d, s)] != 0;
}

/* One uniform valid prefix into s (T). Exact: at (t, d) the draw r is
 * uniform over the f(t,d) completions; the first kinds*f(t+1,d+1) of them
 * open (kind = r / f(t+1,d+1)), the rest close the top of the stack. */
static void sample_prefix(const ba_dataset *d, ba_rng *rng, uint8_t *s)
{
    int stack[BR_MAX_T]; /* kinds of the unmatched opens */
    int depth = 0;
    for (int t = 0; t < d->T; t++) {
        uint64_t r = ba_rng_below(rng, d->f[t][depth]);
        uint64_t up = d->f[t + 1][depth + 1];
        if (r < (uint64_t)d->kinds * up) {
            int k = (int)(r / up);
            stack[depth++] = k;
            s[t] = (uint8_t)(2 * k);
        } else {
            s[t] = (uint8_t)(2 * stack[--depth] + 1);
        }
    }
}

/* Tokens and targets of s: a close at i points at its matching open j. */
static void fill_item(int T, const uint8_t *s, int *inputs, int *targets)
{
    int stack[BR_MAX_T]; /* positions of the unmatched opens */
    int depth = 0;
    for (int t = 0; t < T; t++) {
        inputs[t] = s[t];
        if (s[t] % 2 == 0) {
            stack[depth++] = t;
            targets[t] = -1;
        } else {
            targets[t] = depth > 0 ? stack[--depth] : -1;
        }
    }
}

/* Best accuracy from the position of each close alone: per position the
 * most frequent target wins. 0 when the held-out set has no closes. */
static double position_baseline(const ba_dataset *d)
{
    int T = d->T;
    long count[BR_MAX_T][BR_MAX_T]; /* (i, j) close at i matching j */
    memset(count, 0, sizeof count);
    long closes = 0;
    int in[BR_MAX_T], tg[BR_MAX_T];
    for (int n = 0; n < d->n_held; n++) {
        fill_item(T, d->held + (size_t)n * (size_t)T, in, tg);
        for (int i = 0; i < T; i++)
            if (tg[i] >= 0) {
                count[i][tg[i]]++;
                closes++;
            }
    }
    if (closes == 0)
        return 0.0;
    long best = 0;
    for (int i = 0; i < T; i++) {
        long m = 0;
        for (int j = 0; j < i; j++)
            if (count[i][j] > m)
                m = count[i][j];
        best += m;
    }
    return (double)best / (double)closes;
}

int ba_dataset_brackets(ba_dataset **out, int T, int kinds, int n_heldout,
                        uint64_t data_seed, char *err)
{
    if (!out)
        return ba_fail(err, BA_ERR_ARG, "out is NULL");
    *out = NULL;
    if (kinds < 1 || kinds > BR_MAX_KINDS)
        return ba_fail(err, BA_ERR_ARG, "kinds = %d is out of range [1, %d]", kinds,
                       BR_MAX_KINDS);
    int max_T = ba_brackets_max_T(kinds);
    if (T < 1 || T > max_T)
        return ba_fail(err, BA_ERR_ARG,
                       "brackets T = %d is out of range [1, %d] with %d bracket kind%s (the "
                       "limit is %d for 1 kind; %d, %d and %d for 2, 3 and 4, whose counts of "
                       "valid prefixes must fit 64 bits)",
                       T, max_T, kinds, kinds == 1 ? "" : "s", ba_brackets_max_T(1),
                       ba_brackets_max_T(2), ba_brackets_max_T(3), ba_brackets_max_T(4));
    /* Without a held-out set an evaluation would score nothing and report
     * "0 of 0" as if it were a result. */
    if (n_heldout < 1)
        return ba_fail(err, BA_ERR_ARG,
                       "n_heldout = %d: the held-out set must hold at least 1 sequence (it is "
                       "what evaluation scores)",
                       n_heldout);

    ba_dataset *d = calloc(1, sizeof *d);
    if (!d)
        return ba_fail(err, BA_ERR_NOMEM, "out of memory allocating the dataset");
    d->task = BA_TASK_BRACKETS;
    d->T = T;
    d->kinds = kinds;
    d->vocab_size = 2 * kinds;
    d->n_heldout_req = n_heldout;
    d->data_seed = data_seed;

    for (int dd = 0; dd <= T + 1; dd++)
        d->f[T][dd] = 1;
    for (int t = T - 1; t >= 0; t--)
        for (int dd = 0; dd <= t; dd++) {
            uint64_t v = sat_mul((uint64_t)kinds, d->f[t + 1][dd + 1]);
            if (dd > 0)
                v = sat_add(v, d->f[t + 1][dd - 1]);
            d->f[t][dd] = v;
        }
    /* f[0][0] bounds every reachable entry (each reachable state extends
     * to at least that many distinct prefixes), so it alone tells whether
     * the sampler's arithmetic is exact. */
    d->total = d->f[0][0];
    if (d->total == UINT64_MAX) {
        free(d);
        return ba_fail(err, BA_ERR_ARG,
                       "T = %d with %d kinds has too many valid prefixes to count in 64 bits",
                       T, kinds);
    }
    if (d->total < 2) {
        uint64_t total = d->total;
        free(d);
        return ba_fail(err, BA_ERR_ARG,
                       "T = %d with %d kinds has only %llu valid prefix: no room for a disjoint "
                       "held-out set",
                       T, kinds, (unsigned long long)total);
    }

    /* Held-out size: min(n_heldout, floor(total / 5)), raised to 1 when
     * the 20 % cap floors to 0 (total in [2, 4]) and n_heldout > 0. */
    uint64_t cap = d->total / 5;
    if (cap == 0)
        cap = 1;
    d->n_held = (uint64_t)n_heldout < cap ? n_heldout : (int)cap;

    if (d->n_held > 0) {
        size_t bytes, slot_bytes;
        size_t n_slots = 1;
        while (n_slots < 2 * (size_t)d->n_held)
            n_slots *= 2;
        if (ba_mul_size((size_t)d->n_held, (size_t)T, &bytes) ||
            ba_mul_size(n_slots, sizeof *d->slots, &slot_bytes)) {
            int n = d->n_held;
            free(d);
            return ba_fail(err, BA_ERR_NOMEM, "held-out set of %d sequences is too large", n);
        }
        d->held = malloc(bytes);
        d->slots = calloc(n_slots, sizeof *d->slots);
        if (!d->held || !d->slots) {
            int n = d->n_held;
            free(d->held);
            free(d->slots);
            free(d);
            return ba_fail(err, BA_ERR_NOMEM,
                           "out of memory for a held-out set of %d sequences of length %d", n, T);
        }
        d->n_slots = n_slots;

        /* Distinct uniform draws in generation order; at most 20 % of the
         * space is taken (50 % for total <= 4) so rejection ends quickly. */
        ba_rng rng;
        ba_rng_seed(&rng, data_seed);
        int have = 0;
        while (have < d->n_held) {
            uint8_t *s = d->held + (size_t)have * (size_t)T;
            sample_prefix(d, &rng, s);
            size_t slot = held_probe(d, s);
            if (d->slots[slot] == 0) {
                d->slots[slot] = (uint32_t)have + 1;
                have++;
            }
        }
    }
    /* A tiny space can leave only sequences of opens (T = 2 draws "(("
     * or "()"): no close, no target, an accuracy of 0 of 0. */
    long closes = 0;
    for (size_t i = 0; i < (size_t)d->n_held * (size_t)T; i++)
        closes += d->held[i] % 2;
    if (closes == 0) {
        int n = d->n_held;
        ba_dataset_free(d);
        return ba_fail(err, BA_ERR_ARG,
                       "the held-out set (%d sequence%s of T = %d, data seed %llu) holds no "
                       "closing bracket: there is nothing to score; use a larger T or another "
                       "data seed",
                       n, n == 1 ? "" : "s", T, (unsigned long long)data_seed);
    }
    d->baseline = position_baseline(d);
    *out = d;
    return BA_OK;
}

int ba_brackets_max_T(int kinds)
{
    if (kinds < 1 || kinds > BR_MAX_KINDS)
        return 0;
    /* The count grows with T, so the first T from the top whose count fits
     * is the largest. */
    int T = BR_MAX_T;
    while (T > 1 && ba_brackets_count(T, kinds) == UINT64_MAX)
        T--;
    return T;
}

void ba_dataset_free(ba_dataset *d)
{
    if (!d)
        return;
    free(d->tokens);
    free(d->held);
    free(d->slots);
    free(d);
}

/* ------------------------------------------------------------ accessors */

ba_task ba_dataset_task(const ba_dataset *d) { return d ? d->task : BA_TASK_CHARLM; }
int ba_dataset_block_size(const ba_dataset *d) { return d ? d->T : 0; }
int ba_dataset_vocab_size(const ba_dataset *d) { return d ? d->vocab_size : 0; }

const uint8_t *ba_dataset_vocab(const ba_dataset *d)
{
    return d && d->task == BA_TASK_CHARLM ? d->vocab : NULL;
}

/* The config's sizes and head for a dataset: the model side of a task
 * (the model layer knows no dataset). */
void ba_config_set_data(ba_config *cfg, const ba_dataset *d)
{
    if (!cfg || !d)
        return;
    int T = ba_dataset_block_size(d);
    cfg->block_size = T;
    cfg->vocab_size = ba_dataset_vocab_size(d);
    if (ba_dataset_task(d) == BA_TASK_BRACKETS) {
        cfg->head = BA_HEAD_POINTER;
        cfg->out_size = T;
    } else {
        cfg->head = BA_HEAD_TOKEN;
        cfg->out_size = cfg->vocab_size;
    }
}

void ba_dataset_spec(const ba_dataset *d, ba_data_spec *spec)
{
    if (!d || !spec)
        return;
    *spec = ba_data_spec_default(d->task);
    if (d->task == BA_TASK_CHARLM) {
        spec->vocab_size = d->vocab_size;
        memcpy(spec->vocab, d->vocab, (size_t)d->vocab_size);
    } else {
        spec->kinds = d->kinds;
        spec->n_heldout = d->n_heldout_req;
        spec->data_seed = d->data_seed;
    }
}

void ba_dataset_train_batch(const ba_dataset *d, ba_rng *rng, int B, int *inputs, int *targets)
{
    if (!d || !rng || !inputs || !targets || B < 1)
        return;
    int T = d->T;
    for (int b = 0; b < B; b++) {
        int *in = inputs + (size_t)b * (size_t)T;  // (T)
        int *tg = targets + (size_t)b * (size_t)T; // (T)
        if (d->task == BA_TASK_CHARLM) {
            /* start in [0, n_train - T - 1] so all T+1 bytes are train */
            size_t start = (size_t)ba_rng_below(rng, d->n_train - (size_t)T);
            const uint8_t *w = d->tokens + start;
            for (int t = 0; t < T; t++) {
                in[t] = w[t];
                tg[t] = w[t + 1];
            }
        } else {
            uint8_t s[BR_MAX_T];
            do
                sample_prefix(d, rng, s);
            while (is_held(d, s));
            fill_item(T, s, in, tg);
        }
    }
}

int ba_dataset_num_eval(const ba_dataset *d)
{
    if (!d)
        return 0;
    return d->task == BA_TASK_CHARLM ? d->n_windows : d->n_held;
}

void ba_dataset_eval_item(const ba_dataset *d, int idx, int *inputs, int *targets)
{
    if (!d || !inputs || !targets || idx < 0 || idx >= ba_dataset_num_eval(d))
        return;
    int T = d->T;
    if (d->task == BA_TASK_CHARLM) {
        const uint8_t *w = d->tokens + d->n_train + (size_t)idx * (size_t)T;
        for (int t = 0; t < T; t++) {
            inputs[t] = w[t];
            targets[t] = w[t + 1];
        }
    } else {
        fill_item(T, d->held + (size_t)idx * (size_t)T, inputs, targets);
    }
}

void ba_dataset_sizes(const ba_dataset *d, uint64_t *train, uint64_t *eval)
{
    uint64_t tr = 0, ev = 0;
    if (d && d->task == BA_TASK_CHARLM) {
        tr = d->n_train;
        ev = d->n_val;
    } else if (d) {
        tr = d->total - (uint64_t)d->n_held;
        ev = (uint64_t)d->n_held;
    }
    if (train)
        *train = tr;
    if (eval)
        *eval = ev;
}

double ba_dataset_position_baseline(const ba_dataset *d) { return d ? d->baseline : -1.0; }

int ba_encode_text(const uint8_t *vocab, int vocab_size, const char *text, size_t len, int *out,
                   char *err)
{
    int inverse[256];
    int rc = build_inverse(vocab, vocab_size, inverse, err);
    if (rc)
        return rc;
    if (len > 0 && (!text || !out))
        return ba_fail(err, BA_ERR_ARG, "text or out is NULL with len = %zu", len);
    for (size_t i = 0; i < len; i++) {
        int b = (unsigned char)text[i];
        if (inverse[b] < 0) {
            if (is_print(b))
                return ba_fail(err, BA_ERR_ARG,
                               "byte %d ('%c') at position %zu is not in the vocabulary of %d "
                               "symbols",
                               b, b, i, vocab_size);
            return ba_fail(err, BA_ERR_ARG,
                           "byte %d (0x%02x) at position %zu is not in the vocabulary of %d "
                           "symbols",
                           b, b, i, vocab_size);
        }
        out[i] = inverse[b];
    }
    return BA_OK;
}

void ba_dataset_fingerprint(const ba_dataset *d, uint64_t *bytes, uint64_t *hash)
{
    uint64_t n = 0, h = 0;
    if (d && d->task == BA_TASK_CHARLM) {
        /* The tokens are the file's bytes in order (train split first), so
         * this is the FNV-1a of the file itself, in chunks. */
        n = (uint64_t)(d->n_train + d->n_val);
        h = BA_FNV_INIT;
        uint8_t chunk[4096];
        for (size_t i = 0; i < d->n_train + d->n_val;) {
            size_t k = 0;
            for (; k < sizeof chunk && i < d->n_train + d->n_val; k++, i++)
                chunk[k] = d->vocab[d->tokens[i]];
            h = ba_fnv1a64(h, chunk, k);
        }
    }
    if (bytes)
        *bytes = n;
    if (hash)
        *hash = h;
}
