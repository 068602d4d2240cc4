/* The library's trainer resumed, and the files of a run (float library):
 * - exact resume: N steps in one go, and k steps, a save, a restore into a
 *   fresh trainer and N - k more, give the same bytes (parameters, both
 *   AdamW moments, the checkpoint file), in memory and through a run
 *   directory stopped by the stop hook, for an exact and a sampled model;
 * - the run directory: metrics.jsonl (records in order, trimmed on resume),
 *   run.json (status, step, result) and the state's checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boltzattn.h"

static char tmpdir[64];

static int make_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ba_test_trainer_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* tmpdir/name, created as a directory when mkd. */
static const char *path_of(const char *name, int mkd)
{
    static char buf[8][256];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 256, "%s/%s", tmpdir, name);
    if (mkd)
        mkdir(p, 0755);
    return p;
}

static ba_dataset *brackets(int T, uint64_t data_seed)
{
    char err[BA_ERR_LEN];
    ba_dataset *d;
    if (ba_dataset_brackets(&d, T, 1, 2000, data_seed, err))
        fail_msg("ba_dataset_brackets: %s", err);
    return d;
}

/* A small boltzmann run: N = 40 steps, an evaluation and a save point
 * every 10; sampled with the direct sampler when shots > 0. */
static ba_trainer *fresh(const ba_dataset *d, int shots)
{
    char err[BA_ERR_LEN];
    ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, ba_dataset_block_size(d));
    ba_config_set_data(&cfg, d);
    cfg.n_embd = 16, cfg.n_head = 2;
    if (shots) {
        cfg.sampler = ba_sampler_default(BA_SAMPLER_DIRECT);
        cfg.sampler.shots = shots;
    }
    ba_train_settings s = ba_train_settings_default(40);
    s.batch = 8, s.eval_items = 8, s.seed = 11, s.j_init_std = 0.1;
    s.eval_every = 10, s.save_every = 10;
    ba_trainer *t = NULL;
    if (ba_trainer_init(&t, &cfg, d, NULL, &s, err))
        fail_msg("ba_trainer_init: %s", err);
    return t;
}

static void assert_same_state(ba_trainer *a, ba_trainer *b)
{
    ba_model *ma = ba_trainer_model(a), *mb = ba_trainer_model(b);
    size_t P = ba_model_num_params(ma);
    assert_int_equal(P, ba_model_num_params(mb));
    assert_int_equal(ba_trainer_step_count(a), ba_trainer_step_count(b));
    assert_memory_equal(ba_model_params(ma), ba_model_params(mb), P * sizeof(ba_real));
    assert_memory_equal(ba_model_adam_m(ma), ba_model_adam_m(mb), P * sizeof(ba_real));
    assert_memory_equal(ba_model_adam_v(ma), ba_model_adam_v(mb), P * sizeof(ba_real));
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static void assert_same_file(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(x, y, na);
    free(x), free(y);
}

/* --------------------------------------------------------- in memory */

/* Run k steps, save the state, restore it into a fresh trainer, run the
 * rest: bit-identical to running all N at once. */
static void resume_in_memory(int shots, long k)
{
    char err[BA_ERR_LEN];
    ba_dataset *d = brackets(8, 1234);
    ba_trainer *whole = fresh(d, shots), *part = fresh(d, shots);
    assert_int_equal(ba_trainer_run(whole, NULL, NULL, NULL, err), BA_OK);
    for (long i = 0; i < k; i++)
        assert_int_equal(ba_trainer_step(part, NULL, NULL, NULL, err), BA_OK);
    const char *state = path_of(shots ? "mem-sampled.safetensors" : "mem.safetensors", 0);
    assert_int_equal(ba_trainer_save_state(part, state, err), BA_OK);
    ba_trainer_free(part);
    ba_trainer *back = NULL;
    if (ba_trainer_restore(&back, state, d, NULL, err))
        fail_msg("restore: %s", err);
    assert_int_equal(ba_trainer_step_count(back), k);
    ba_train_outcome out;
    assert_int_equal(ba_trainer_run(back, NULL, NULL, &out, err), BA_OK);
    assert_int_equal(out.steps_run, 40 - k);
    assert_same_state(whole, back);
    /* and the comparison can fail: one step more differs */
    ba_trainer *other = fresh(d, shots);
    for (long i = 0; i < 39; i++)
        assert_int_equal(ba_trainer_step(other, NULL, NULL, NULL, err), BA_OK);
    size_t P = ba_model_num_params(ba_trainer_model(whole));
    assert_memory_not_equal(ba_model_params(ba_trainer_model(whole)),
                            ba_model_params(ba_trainer_model(other)), P * sizeof(ba_real));
    ba_trainer_free(other);
    ba_trainer_free(back);
    ba_trainer_free(whole);
    ba_dataset_free(d);
}

static void test_resume_in_memory(void **state)
{
    (void)state;
    resume_in_memory(0, 17);
    resume_in_memory(0, 1);
    resume_in_memory(16, 23); /* the sampler stream is saved too */
}

/* --------------------------------------------------- a run directory */

typedef struct {
    long stop_at;      /* the stop hook says stop after this step */
    long last_step;    /* the progress hook's latest step */
    int records[6];    /* records seen, by kind */
} hook_state;

static void on_progress(const ba_record *r, void *user)
{
    hook_state *h = user;
    assert_int_equal(r->kind, BA_REC_TRAIN);
    assert_int_equal(r->step, h->last_step + 1); /* every step, in order */
    h->last_step = r->step;
}

static int on_stop(void *user)
{
    hook_state *h = user;
    return h->stop_at > 0 && h->last_step >= h->stop_at;
}

static int on_record(const ba_record *r, void *user, char *err)
{
    (void)err;
    hook_state *h = user;
    h->records[r->kind]++;
    return 0;
}

/* The steps of dir/metrics.jsonl's records: strictly increasing within
 * each kind, none after `last`, the log ending with a newline. */
static void check_log(const char *dir, long last, int *resumes)
{
    char path[512], *line = NULL, err[BA_ERR_LEN];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t cap = 0;
    long prev[6] = {-1, -1, -1, -1, -1, -1};
    ssize_t len;
    int n = 0;
    *resumes = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        assert_true(line[len - 1] == '\n');
        ba_record r;
        if (ba_record_from_json(line, &r, err))
            fail_msg("%s: %s: %s", path, line, err);
        if (n++ == 0)
            assert_int_equal(r.kind, BA_REC_CONFIG);
        *resumes += r.kind == BA_REC_RESUME;
        if (r.kind != BA_REC_CONFIG && r.kind != BA_REC_RESUME) {
            assert_true(r.step > prev[r.kind]);
            assert_true(r.step <= last);
            prev[r.kind] = r.step;
        }
    }
    free(line);
    fclose(f);
    assert_int_equal(prev[BA_REC_FINAL], last);
    assert_int_equal(prev[BA_REC_TRAIN], last);
}

static void test_resume_run_dir(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[512];
    ba_dataset *d = brackets(8, 1234);
    const char *A = path_of("whole", 1), *B = path_of("stopped", 1);
    ba_trainer *t = fresh(d, 0);
    hook_state ha = {0, 0, {0}};
    ba_train_hooks hooks = {on_record, on_progress, on_stop, &ha, NULL};
    ba_train_outcome oa;
    assert_int_equal(ba_trainer_run(t, A, &hooks, &oa, err), BA_OK);
    assert_false(oa.stopped);
    assert_int_equal(oa.step, 40);
    assert_int_equal(oa.saved_step, 40);
    /* records: config, 4 train, 3 evaluations (10, 20, 30; not at the end), final */
    assert_int_equal(ha.records[BA_REC_CONFIG], 1);
    assert_int_equal(ha.records[BA_REC_TRAIN], 4);
    assert_int_equal(ha.records[BA_REC_EVAL], 3);
    assert_int_equal(ha.records[BA_REC_FINAL], 1);
    ba_trainer_free(t);

    /* stopped after step 17: a save point there */
    t = fresh(d, 0);
    assert_int_equal(ba_trainer_set_machine(t, "", err), BA_ERR_ARG);
    assert_int_equal(ba_trainer_set_machine(t, "box\none", err), BA_ERR_ARG);
    assert_non_null(strstr(err, "byte 3"));
    assert_int_equal(ba_trainer_set_machine(t, "box one, 2 cores", err), BA_OK);
    hook_state hb = {17, 0, {0}};
    hooks.user = &hb;
    ba_train_outcome ob;
    assert_int_equal(ba_trainer_run(t, B, &hooks, &ob, err), BA_OK);
    assert_true(ob.stopped);
    assert_int_equal(ob.step, 17);
    assert_int_equal(ob.saved_step, 17);
    ba_trainer_free(t);
    ba_run_info info;
    assert_int_equal(ba_run_read(B, &info, err), BA_OK);
    assert_int_equal(info.status, BA_RUN_STOPPED);
    assert_int_equal(info.step, 17);
    ba_run_info_clear(&info);

    /* a killed call's records beyond the save point, and a torn line,
     * which the resumed run drops */
    snprintf(path, sizeof path, "%s/metrics.jsonl", B);
    FILE *f = fopen(path, "a");
    fputs("{\"event\":\"train\",\"step\":18,\"loss\":1,\"lr\":1,\"grad_norm\":1,"
          "\"steps_per_s\":1,\"elapsed_s\":1}\n{\"event\":\"tr",
          f);
    fclose(f);
    snprintf(path, sizeof path, "%s/state.safetensors", B);
    if (ba_trainer_restore(&t, path, d, NULL, err))
        fail_msg("restore: %s", err);
    assert_int_equal(ba_trainer_set_machine(t, "box two, 4 cores", err), BA_OK);
    hook_state hc = {0, 17, {0}};
    hooks.user = &hc;
    assert_int_equal(ba_trainer_run(t, B, &hooks, &ob, err), BA_OK);
    assert_int_equal(ob.steps_run, 23);
    assert_int_equal(hc.records[BA_REC_RESUME], 1);
    assert_same_state(t, t); /* (shape check) */
    ba_trainer_free(t);

    /* the same bytes as the run that was never stopped */
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/model.safetensors", A);
    snprintf(pb, sizeof pb, "%s/model.safetensors", B);
    assert_same_file(pa, pb);
    ba_st *sa, *sb;
    snprintf(pa, sizeof pa, "%s/state.safetensors", A);
    snprintf(pb, sizeof pb, "%s/state.safetensors", B);
    assert_int_equal(ba_st_read(&sa, pa, err), BA_OK);
    assert_int_equal(ba_st_read(&sb, pb, err), BA_OK);
    const char *names[] = {"params", "adam_m", "adam_v"};
    for (int i = 0; i < 3; i++) {
        const ba_st_tensor *x = ba_st_find(sa, names[i]), *y = ba_st_find(sb, names[i]);
        assert_non_null(x);
        assert_non_null(y);
        assert_int_equal(x->nbytes, y->nbytes);
        assert_memory_equal(x->data, y->data, x->nbytes);
    }
    assert_string_equal(ba_st_metadata(sa, "data_rng"), ba_st_metadata(sb, "data_rng"));
    assert_string_equal(ba_st_metadata(sa, "checksum"), ba_st_metadata(sb, "checksum"));
    ba_st_free(sa), ba_st_free(sb);
    int resumes;
    check_log(A, 40, &resumes);
    assert_int_equal(resumes, 0);
    check_log(B, 40, &resumes);
    assert_int_equal(resumes, 1);

    /* run.json of the finished runs: the result of the final evaluation */
    ba_run_info ra, rb;
    assert_int_equal(ba_run_read(A, &ra, err), BA_OK);
    assert_int_equal(ba_run_read(B, &rb, err), BA_OK);
    assert_int_equal(ra.status, BA_RUN_FINISHED);
    assert_int_equal(ra.step, 40);
    assert_true(ra.result.accuracy == oa.final.accuracy);
    assert_true(ra.result.loss == oa.final.loss);
    assert_int_equal(ra.result.n_items, oa.final.n_items);
    assert_true(ra.result.loss == rb.result.loss);
    assert_int_equal(ra.settings.steps, 40);
    assert_true(ra.settings.seed == 11);
    assert_int_equal(ra.spec.task, BA_TASK_BRACKETS);
    assert_int_equal(ra.config.n_head, 2);
    assert_true(rb.train_s >= 0 && isfinite(rb.train_s));
    /* the machines: none set for A; B's first call's, then the resume's */
    assert_int_equal(ra.n_machines, 0);
    assert_int_equal(rb.n_machines, 2);
    assert_string_equal(rb.machines[0], "box one, 2 cores");
    assert_string_equal(rb.machines[1], "box two, 4 cores");
    ba_run_info_clear(&ra), ba_run_info_clear(&rb);
    /* a damaged list is named */
    snprintf(path, sizeof path, "%s/run.json", B);
    f = fopen(path, "r");
    char text[8192];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    char *at = strstr(text, "\"box two, 4 cores\"");
    assert_non_null(at);
    memcpy(at, "17                ", 18); /* same length: a number in the list */
    f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    assert_int_equal(ba_run_read(B, &rb, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "'machines'"));
    ba_run_info_clear(&rb);
    ba_dataset_free(d);
}

/* ------------------------------------------------------ what is refused */

static void test_restore_refuses(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d = brackets(8, 1234), *other = brackets(8, 99), *longer = brackets(9, 1234);
    ba_trainer *t = fresh(d, 0), *r = (ba_trainer *)&r;
    for (int i = 0; i < 3; i++)
        assert_int_equal(ba_trainer_step(t, NULL, NULL, NULL, err), BA_OK);
    const char *p = path_of("refuse.safetensors", 0);
    assert_int_equal(ba_trainer_save_state(t, p, err), BA_OK);
    assert_int_equal(ba_trainer_restore(&r, p, other, NULL, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "seed 99"));
    assert_null(r);
    assert_int_equal(ba_trainer_restore(&r, p, longer, NULL, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "T = 9"));
    /* one flipped bit of the tensor data: the checksum */
    size_t n;
    unsigned char *buf = slurp(p, &n);
    buf[n - 5] ^= 0x10;
    FILE *f = fopen(p, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    free(buf);
    assert_int_equal(ba_trainer_restore(&r, p, d, NULL, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "checksum mismatch"));
    assert_int_equal(ba_trainer_restore(&r, path_of("absent", 0), d, NULL, err), BA_ERR_IO);
    ba_trainer_free(t);
    ba_dataset_free(d), ba_dataset_free(other), ba_dataset_free(longer);
}

/* src rewritten to dst with metadata key set to val (NULL: dropped) and,
 * when neg_v, the first AdamW second moment made negative. */
static void rewrite_state(const char *src, const char *dst, const char *key, const char *val,
                          int neg_v)
{
    char err[BA_ERR_LEN];
    ba_st *st;
    if (ba_st_read(&st, src, err))
        fail_msg("%s", err);
    ba_st_entry e[3];
    float *v = NULL;
    for (int i = 0; i < 3; i++) {
        const ba_st_tensor *t = ba_st_get(st, i);
        e[i].name = t->name, e[i].dtype = t->dtype, e[i].ndim = t->ndim;
        memcpy(e[i].shape, t->shape, sizeof e[i].shape);
        e[i].data = t->data;
        if (neg_v && !strcmp(t->name, "adam_v")) {
            v = malloc(t->nbytes);
            memcpy(v, t->data, t->nbytes);
            v[0] = -1e-3f;
            e[i].data = v;
        }
    }
    static const char *const keys[] = {"config", "train", "step", "data_rng", "sampler_rng",
                                       "train_s", "checksum"};
    const char *k[7], *vals[7];
    int n = 0;
    for (int i = 0; i < 7; i++) {
        const char *x = strcmp(keys[i], key) ? ba_st_metadata(st, keys[i]) : val;
        if (x)
            k[n] = keys[i], vals[n++] = x;
    }
    if (ba_st_write(dst, e, 3, k, vals, n, err))
        fail_msg("%s", err);
    free(v);
    ba_st_free(st);
}

/* A state's settings with one "key":old replaced by "key":new. */
static char *edit_train(const char *path, const char *from, const char *to)
{
    char err[BA_ERR_LEN];
    ba_st *st;
    if (ba_st_read(&st, path, err))
        fail_msg("%s", err);
    const char *tr = ba_st_metadata(st, "train");
    const char *at = strstr(tr, from);
    assert_non_null(at);
    char *out = malloc(strlen(tr) + strlen(to) + 1);
    memcpy(out, tr, (size_t)(at - tr));
    strcpy(out + (at - tr), to);
    strcat(out, at + strlen(from));
    ba_st_free(st);
    return out;
}

/* A resumable state is validated on load by the rules and messages of the
 * command line (issue 14, item 6). */
static void test_state_validation(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_dataset *d = brackets(8, 1234);
    ba_trainer *t = fresh(d, 0), *r = NULL;
    for (int i = 0; i < 3; i++)
        assert_int_equal(ba_trainer_step(t, NULL, NULL, NULL, err), BA_OK);
    const char *p = path_of("valid.safetensors", 0), *q = path_of("bad.safetensors", 0);
    assert_int_equal(ba_trainer_save_state(t, p, err), BA_OK);
    assert_int_equal(ba_trainer_restore(&r, p, d, NULL, err), BA_OK); /* the control */
    ba_trainer_free(r);
    r = NULL;
    rewrite_state(p, q, "step", "41", 0);
    assert_int_equal(ba_trainer_restore(&r, q, d, NULL, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "the saved step 41 is beyond the run's 40 steps"));
    rewrite_state(p, q, "data_rng", "0000000000000000000000000000000000000000000000000000000000000000", 0);
    assert_int_equal(ba_trainer_restore(&r, q, d, NULL, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "batch-stream RNG state"));
    char *tr = edit_train(p, "\"clip\":1", "\"clip\":-1");
    rewrite_state(p, q, "train", tr, 0);
    free(tr);
    assert_int_equal(ba_trainer_restore(&r, q, d, NULL, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "clip = -1 is out of range [0, 1e9]"));
    tr = edit_train(p, "\"warmup\":2", "\"warmup\":41");
    rewrite_state(p, q, "train", tr, 0);
    free(tr);
    assert_int_equal(ba_trainer_restore(&r, q, d, NULL, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "warmup = 41 is out of range [0, steps = 40]"));
    /* a negative second moment, with its checksum and without one (older
     * states): refused on load, not at the first update */
    rewrite_state(p, q, "step", "3", 1);
    assert_int_equal(ba_trainer_restore(&r, q, d, NULL, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "state tensor 'adam_v' value [0] = -0.001 is negative"));
    rewrite_state(p, q, "checksum", NULL, 1);
    assert_int_equal(ba_trainer_restore(&r, q, d, NULL, err), BA_ERR_FORMAT);
    assert_non_null(strstr(err, "state tensor 'adam_v' value [0] = -0.001 is negative"));
    assert_null(r);
    ba_trainer_free(t);
    ba_dataset_free(d);
}

/* A stop during the final evaluation: the trained weights were saved
 * first, the run is "stopped" at its last step without a final record, and
 * a resume evaluates it to the same result as a run never stopped; the
 * loop's evaluations go in batches of the training batch. */
typedef struct {
    int ticks, total, stop_in_eval;
} eval_hooks;

static void on_eval_progress(int done, int total, void *user)
{
    eval_hooks *e = user;
    assert_true(done > 0 && done <= total);
    assert_int_equal(done % 8 == 0 || done == total, 1); /* batch 8 */
    e->ticks++, e->total = total;
}

static int stop_in_eval(void *user)
{
    eval_hooks *e = user;
    return e->stop_in_eval && e->ticks > 0;
}

static void test_stop_in_final_eval(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[512];
    ba_dataset *d = brackets(8, 1234);
    const char *A = path_of("final-whole", 1), *B = path_of("final-stopped", 1);
    eval_hooks ea = {0, 0, 0}, eb = {0, 0, 1};
    ba_train_hooks ha = {NULL, NULL, stop_in_eval, &ea, on_eval_progress};
    ba_train_hooks hb = {NULL, NULL, stop_in_eval, &eb, on_eval_progress};
    ba_train_outcome oa, ob;
    ba_trainer *t = fresh(d, 0);
    assert_int_equal(ba_trainer_run(t, A, &ha, &oa, err), BA_OK);
    ba_trainer_free(t);
    assert_false(oa.stopped);
    assert_int_equal(ea.total, ba_dataset_num_eval(d));
    assert_int_equal(ea.ticks, (ea.total + 7) / 8);
    t = fresh(d, 0);
    assert_int_equal(ba_trainer_run(t, B, &hb, &ob, err), BA_OK);
    ba_trainer_free(t);
    assert_true(ob.stopped);
    assert_int_equal(ob.step, 40);
    assert_int_equal(eb.ticks, 1);
    ba_run_info info;
    assert_int_equal(ba_run_read(B, &info, err), BA_OK);
    assert_int_equal(info.status, BA_RUN_STOPPED);
    assert_int_equal(info.step, 40);
    ba_run_info_clear(&info);
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/model.safetensors", A);
    snprintf(pb, sizeof pb, "%s/model.safetensors", B);
    assert_same_file(pa, pb); /* the trained weights were saved */
    snprintf(path, sizeof path, "%s/state.safetensors", B);
    ba_trainer *r = NULL;
    if (ba_trainer_restore(&r, path, d, NULL, err))
        fail_msg("restore: %s", err);
    eb.stop_in_eval = 0;
    assert_int_equal(ba_trainer_run(r, B, &hb, &ob, err), BA_OK);
    assert_false(ob.stopped);
    assert_int_equal(ob.steps_run, 0);
    assert_true(ob.final.loss == oa.final.loss);
    assert_true(ob.final.accuracy == oa.final.accuracy);
    ba_trainer_free(r);
    int resumes;
    check_log(B, 40, &resumes);
    assert_int_equal(resumes, 1);

    /* the finished run restored again: evaluated again to the same
     * numbers, its end records replaced, never doubled (the CLI refuses
     * this by run.json; a kill between the final record and run.json
     * leaves a run that comes here) */
    snprintf(pb, sizeof pb, "%s/state.safetensors", B);
    if (ba_trainer_restore(&r, pb, d, NULL, err))
        fail_msg("restore: %s", err);
    assert_int_equal(ba_trainer_run(r, B, NULL, &ob, err), BA_OK);
    assert_true(ob.final.loss == oa.final.loss);
    ba_trainer_free(r);
    check_log(B, 40, &resumes);
    assert_int_equal(resumes, 2);
    snprintf(path, sizeof path, "%s/metrics.jsonl", B);
    size_t n;
    char *log = (char *)slurp(path, &n);
    log = realloc(log, n + 1);
    log[n] = '\0';
    int finals = 0;
    for (char *q = log; (q = strstr(q, "\"event\":\"final\"")); q++)
        finals++;
    assert_int_equal(finals, 1);
    free(log);
    ba_dataset_free(d);
}

/* A state resumed into another run's directory: refused before anything is
 * written, naming the first difference. */
static void test_resume_other_log(void **state)
{
    (void)state;
    char err[BA_ERR_LEN], path[512], st[512];
    ba_dataset *d = brackets(8, 1234);
    const char *A = path_of("log-a", 1), *B = path_of("log-b", 1);
    hook_state h = {5, 0, {0}};
    ba_train_hooks hooks = {on_record, on_progress, on_stop, &h, NULL};
    ba_trainer *t = fresh(d, 0);
    assert_int_equal(ba_trainer_run(t, A, &hooks, NULL, err), BA_OK);
    ba_trainer_free(t);
    /* B: another seed */
    ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, 8);
    ba_config_set_data(&cfg, d);
    cfg.n_embd = 16, cfg.n_head = 4;
    ba_train_settings s = ba_train_settings_default(40);
    s.batch = 8, s.eval_items = 8, s.seed = 12;
    if (ba_trainer_init(&t, &cfg, d, NULL, &s, err))
        fail_msg("%s", err);
    h.last_step = 0;
    assert_int_equal(ba_trainer_run(t, B, &hooks, NULL, err), BA_OK);
    ba_trainer_free(t);
    snprintf(path, sizeof path, "%s/metrics.jsonl", A);
    size_t n0, n1;
    unsigned char *before = slurp(path, &n0);
    snprintf(st, sizeof st, "%s/state.safetensors", B);
    if (ba_trainer_restore(&t, st, d, NULL, err))
        fail_msg("restore: %s", err);
    assert_int_equal(ba_trainer_run(t, A, NULL, NULL, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "is the log of another run: its config has n_head = 2, the "
                                "state's 4"));
    ba_trainer_free(t);
    unsigned char *after = slurp(path, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before), free(after);
    ba_dataset_free(d);
}

/* A charlm run records its text's size and hash; a resume with another
 * text of the same vocabulary is refused. */
static void test_resume_other_text(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    const char *ta = path_of("a.txt", 0), *tb = path_of("b.txt", 0);
    FILE *f = fopen(ta, "w"), *g = fopen(tb, "w");
    for (int i = 0; i < 400; i++) {
        fprintf(f, "%s", i % 3 ? "to be or not " : "that is it ");
        fprintf(g, "%s", i % 5 ? "to be or not " : "that is it ");
    }
    fclose(f), fclose(g);
    ba_dataset *a, *b;
    assert_int_equal(ba_dataset_charlm(&a, ta, NULL, 0, 8, err), BA_OK);
    assert_int_equal(ba_dataset_charlm(&b, tb, ba_dataset_vocab(a), ba_dataset_vocab_size(a), 8,
                                       err), BA_OK);
    uint64_t na, ha, nb, hb;
    ba_dataset_fingerprint(a, &na, &ha);
    ba_dataset_fingerprint(b, &nb, &hb);
    size_t len;
    unsigned char *txt = slurp(ta, &len);
    assert_int_equal(na, len);
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a of the file, computed here */
    for (size_t i = 0; i < len; i++)
        h = (h ^ txt[i]) * 0x100000001b3ULL;
    free(txt);
    assert_true(h == ha);
    assert_true(ha != hb);
    ba_config cfg = ba_config_default(BA_ATTN_SOFTMAX, 8);
    ba_config_set_data(&cfg, a);
    cfg.n_embd = 8, cfg.n_head = 2;
    ba_train_settings s = ba_train_settings_default(4);
    s.batch = 2;
    ba_trainer *t, *r = NULL;
    assert_int_equal(ba_trainer_init(&t, &cfg, a, ta, &s, err), BA_OK);
    assert_int_equal(ba_trainer_step(t, NULL, NULL, NULL, err), BA_OK);
    const char *p = path_of("text.safetensors", 0);
    assert_int_equal(ba_trainer_save_state(t, p, err), BA_OK);
    assert_int_equal(ba_trainer_restore(&r, p, b, tb, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "the data differs from the run's"));
    assert_null(r);
    assert_int_equal(ba_trainer_restore(&r, p, a, ta, err), BA_OK);
    ba_trainer_free(r), ba_trainer_free(t);
    ba_dataset_free(a), ba_dataset_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_in_memory),
        cmocka_unit_test(test_resume_run_dir),
        cmocka_unit_test(test_restore_refuses),
        cmocka_unit_test(test_state_validation),
        cmocka_unit_test(test_stop_in_final_eval),
        cmocka_unit_test(test_resume_other_log),
        cmocka_unit_test(test_resume_other_text),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
