/* The helpers the file tests share (test_safetensors.c, test_config_json.c,
 * test_io.c): one fresh directory for a run's files (the group setup and
 * teardown) and paths in it, whole files written and read back, and
 * configs, samplers and data descriptions compared field by field.
 * Included by a test file once, after <cmocka.h> and "boltzattn.h"; the
 * functions are static inline, so a file need not use them all. */
#ifndef BA_TEST_IO_FILES_H
#define BA_TEST_IO_FILES_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* All files of a run live in one fresh directory, removed at the end. */
static char g_dir[64];

static inline int make_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/ba_test_io_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static inline int remove_dir(void **state)
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
static inline const char *path_of(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static inline void write_bytes(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n)
        assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Reads a whole file; *n gets its size. Caller frees. */
static inline unsigned char *slurp(const char *path, size_t *n)
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

/* Every field for a sampled kind; the kind alone for exact (the config
 * stores no parameters for it). */
static inline void assert_sampler_equal(const ba_sampler *a, const ba_sampler *b)
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

static inline void assert_config_equal(const ba_config *a, const ba_config *b)
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

static inline void assert_spec_equal(const ba_data_spec *a, const ba_data_spec *b)
{
    assert_int_equal(a->task, b->task);
    assert_int_equal(a->kinds, b->kinds);
    assert_int_equal(a->n_heldout, b->n_heldout);
    assert_true(a->data_seed == b->data_seed);
    assert_int_equal(a->vocab_size, b->vocab_size);
    if (a->task == BA_TASK_CHARLM)
        assert_memory_equal(a->vocab, b->vocab, (size_t)a->vocab_size);
}

#endif
