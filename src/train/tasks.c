/* The tasks as datasets: charlm (next byte over any file) and brackets
 * (point from each close to its matching open, uniform valid prefixes with
 * a held-out set that training never sees); the dispatchers also send
 * brackets (src/train/brackets.c) and recall (src/train/recall.c) to
 * their generators. */
#include "train/dataset.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* -------------------------------------------------------------- helpers */

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

void ba_dataset_free(ba_dataset *d)
{
    if (!d)
        return;
    free(d->tokens);
    free(d->held);
    free(d->slots);
    free(d->f);
    free(d->p_open);
    free(d->p_row);
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
        if (d->task == BA_TASK_BRACKETS) {
            spec->kinds = d->kinds;
            spec->max_depth = d->max_depth;
        } else {
            spec->recall_vocab = d->vocab_size;
            spec->pairs = d->pairs;
        }
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
        } else if (d->task == BA_TASK_RECALL) {
            ba_recall_train_item(d, rng, in, tg);
        } else {
            ba_brackets_train_item(d, rng, in, tg);
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
    } else if (d->task == BA_TASK_RECALL) {
        ba_recall_eval_item(d, idx, inputs, targets);
    } else {
        ba_brackets_eval_item(d, idx, inputs, targets);
    }
}

void ba_dataset_sizes(const ba_dataset *d, uint64_t *train, uint64_t *eval)
{
    uint64_t tr = 0, ev = 0;
    if (d && d->task == BA_TASK_CHARLM) {
        tr = d->n_train;
        ev = d->n_val;
    } else if (d) {
        /* a saturated total stays saturated: "2^64 or more" */
        tr = d->total == UINT64_MAX ? UINT64_MAX : d->total - (uint64_t)d->n_held;
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
