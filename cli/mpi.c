/* The tool under MPI (`mpirun -np N boltzattn train|ablate ...`): one
 * process per rank. The library has no MPI in it; this file gives it a
 * ba_reducer over MPI and keeps the job's ranks in step at the edges of a
 * command (docs/internals.md, "Data-parallel training").
 *
 * - MPI starts only when a launcher started this process (its
 *   environment says so): a plain `boltzattn` never loads MPI's runtime.
 *   A build without MPI refuses to run under a launcher with more than one
 *   rank, rather than run N copies of one run into one directory.
 * - Rank 0 speaks. The others' stdout goes nowhere, and their stderr into
 *   memory; it reaches the terminal, each line marked with the rank, only
 *   when that rank fails on its own (a message the others did not give).
 * - The reduction gathers every rank's buffer on rank 0, which adds them
 *   in rank order and sends the sums back: a fixed order, so a run is
 *   bit-reproducible for a given N (an MPI_Allreduce may sum in an order
 *   that depends on the message size and the library's tuning).
 * - Before training the ranks agree: each passes its status so far, and a
 *   command that failed anywhere ends everywhere with the same exit code.
 *   Then they compare their settings (mpi_agree_train, mpi_agree_grid):
 *   every rank's canonical JSON text of what it is about to run against
 *   rank 0's, so ranks started with different options stop together with
 *   exit code 2, rank 0 naming the first setting that differs, rather than
 *   reduce buffers of different sizes or wait for steps that never come.
 *   A rank that fails after that point cannot be waited for by the others
 *   (they are inside a reduction): it ends the job with MPI_Abort, whose
 *   message names it, and mpirun exits non-zero. Rank 0 writes atomically,
 *   so the last complete save point survives. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef BA_HAVE_MPI
#include <mpi.h>
#endif

typedef struct {
    int active;       /* MPI_Init was called */
    int rank, size, local;
    int agreed;       /* times the ranks' statuses were exchanged */
    int lockstep;     /* in a training that reduces every step */
    FILE *real_err;   /* a nonzero rank's own stderr */
    char *cap;        /* what a nonzero rank wrote to stderr */
    size_t cap_len;
    double *gather;   /* (size, n + 1) rank 0's receive buffer */
    size_t gather_cap;
    double *send;     /* (n + 1) */
    size_t send_cap;
    mpi_totals tot;
    const char *cmd;  /* the command, for messages */
} mpi_state;

static mpi_state S = {.size = 1, .local = 1, .cmd = ""};

/* The launcher's count of ranks, from its environment (0: not launched). */
static int launched_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                       "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v) > 0 ? atoi(v) : 1;
    }
    return getenv("PMIX_RANK") || getenv("PMI_RANK") ? 1 : 0;
}

int mpi_rank(void) { return S.rank; }
int mpi_size(void) { return S.size; }
const mpi_totals *mpi_get_totals(void) { return &S.tot; }

FILE *mpi_err(void) { return S.real_err ? S.real_err : stderr; }

int mpi_start(int *argc, char ***argv, const char *cmd)
{
    int n = launched_size();
    if (n <= 1)
        return 0;
#ifndef BA_HAVE_MPI
    (void)argc, (void)argv, (void)cmd;
    fprintf(stderr, "%s: started as one of %d MPI ranks, but this build has no MPI (install "
                    "libopenmpi-dev and rebuild with -DBA_MPI=ON); refusing to run %d copies of "
                    "one command\n", prog, n, n);
    return EXIT_USAGE;
#else
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "%s: MPI_Init failed\n", prog);
        return 1;
    }
    S.active = 1;
    S.cmd = cmd;
    MPI_Comm_rank(MPI_COMM_WORLD, &S.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &S.size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, S.rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &S.local);
    MPI_Comm_free(&node);
    set_local_ranks(S.local);
    if (S.rank != 0) {
        int fd = dup(STDERR_FILENO);
        FILE *cap = fd >= 0 ? open_memstream(&S.cap, &S.cap_len) : NULL;
        if (cap && (S.real_err = fdopen(fd, "w"))) {
            stderr = cap;
            if (!freopen("/dev/null", "w", stdout))
                fprintf(S.real_err, "%s: rank %d: cannot silence stdout\n", prog, S.rank);
        } else if (cap) {
            fclose(cap);
        }
    }
    /* only the commands that share work among ranks run on several */
    if (S.size > 1 && strcmp(cmd, "train") != 0 && strcmp(cmd, "ablate") != 0) {
        /* every rank says it: a nonzero rank's words show when rank 0's
         * command was another (MPMD) */
        fprintf(stderr, "%s %s: does not run on several MPI ranks (only train and ablate "
                        "do); run it without mpirun\n", prog, cmd);
        return EXIT_USAGE;
    }
    return 0;
#endif
}

#ifdef BA_HAVE_MPI
/* The lines of text on f, each marked with the rank. */
static void print_marked(FILE *f, int rank, const char *text)
{
    const char *p = text;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        if (len > 0)
            fprintf(f, "[rank %d] %.*s\n", rank, len, p);
        p = nl ? nl + 1 : NULL;
    }
    fflush(f);
}

/* A nonzero rank's captured messages on its real stderr, marked. */
static void show_captured(void)
{
    if (!S.real_err || !S.cap)
        return;
    fflush(stderr);
    print_marked(S.real_err, S.rank, S.cap);
    rewind(stderr);
}

/* Where a rank meets the others: at the end of a command it never met
 * them in (mpi_finish), at a plain mpi_agree, or at the comparison of the
 * settings before any work. */
enum { AT_FINISH, AT_AGREE, AT_SETTINGS };

static const char *at_words(int at)
{
    return at == AT_FINISH     ? "ended its command (exit code 0) without meeting the others"
           : at == AT_SETTINGS ? "is ready to start"
                               : "is at another meeting point";
}

/* Rank k's captured messages printed by rank 0, marked: rank 0 speaks,
 * and once a rank has exited non-zero mpirun may drop what the others
 * still write (the first 16 KiB). */
static void forward_captured(int k)
{
    static char buf[16384];
    int len = 0;
    if (S.rank == k) {
        fflush(stderr);
        if (S.real_err && S.cap)
            len = S.cap_len < sizeof buf ? (int)S.cap_len : (int)sizeof buf - 1;
        MPI_Send(&len, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
        MPI_Send(S.cap, len, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
        if (len > 0)
            rewind(stderr);
    } else if (S.rank == 0) {
        MPI_Recv(&len, 1, MPI_INT, k, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(buf, len, MPI_CHAR, k, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        buf[len] = '\0';
        fflush(stderr);
        print_marked(stderr, k, buf);
    }
}

/* Every rank's (status, meeting point) exchanged: the worst exit code, or
 * 2 where all succeeded but some rank is elsewhere (it was started with
 * another command or options: --help on one rank, say). */
static int exchange(int code, int at)
{
    S.agreed++;
    int mine[2] = {code, at}, *all = calloc(2 * (size_t)S.size, sizeof(int));
    if (!all) {
        fprintf(mpi_err(), "%s: rank %d: out of memory\n", prog, S.rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    int worst = 0, elsewhere = -1;
    for (int k = 0; k < S.size; k++) {
        worst = all[2 * k] > worst ? all[2 * k] : worst;
        if (elsewhere < 0 && all[2 * k + 1] != all[1])
            elsewhere = k;
    }
    /* rank 0 has said why when it failed; else it shows the first failed
     * rank's messages, and any other failed rank shows its own */
    int failed = 0;
    while (failed < S.size && all[2 * failed] == 0)
        failed++;
    if (all[0] == 0 && failed < S.size) {
        if (S.rank == 0)
            fprintf(stderr, "%s: rank %d failed (exit code %d; its messages follow, marked "
                            "[rank %d])\n", prog, failed, all[2 * failed], failed);
        forward_captured(failed);
        if (S.rank != 0 && S.rank != failed && code != 0)
            show_captured();
    }
    if (worst == 0 && elsewhere >= 0) {
        worst = EXIT_USAGE;
        if (S.rank == 0)
            fprintf(stderr, "%s %s: rank %d %s, while rank 0 %s: start every rank "
                            "with the same command and options\n", prog, S.cmd, elsewhere,
                    at_words(all[2 * elsewhere + 1]), at_words(all[1]));
    }
    free(all);
    return worst;
}
#endif

int mpi_agree(int code)
{
#ifdef BA_HAVE_MPI
    if (!S.active)
        return code;
    return exchange(code, AT_AGREE);
#else
    return code;
#endif
}

void mpi_lockstep(int on) { S.lockstep = on; }

int mpi_finish(int code)
{
#ifdef BA_HAVE_MPI
    if (!S.active)
        return code;
    if (!S.agreed)
        code = exchange(code, AT_FINISH);
    else if (code != 0 && S.lockstep && S.size > 1) {
        /* the others may be waiting in a reduction for this rank */
        if (S.rank != 0)
            show_captured();
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    free(S.gather), free(S.send);
    if (S.real_err) {
        fclose(stderr);
        stderr = S.real_err;
        free(S.cap);
    }
    MPI_Finalize();
#endif
    return code;
}

#ifdef BA_HAVE_MPI
/* ba_reducer.sum: gather on rank 0, add in rank order, check, broadcast.
 * The last double of each rank's message carries its check's bits; the
 * last of the broadcast, the first rank whose check differs (or -1). */
static int reduce_sum(void *user, double *x, size_t n, uint64_t check, char *err)
{
    (void)user;
    double t0 = MPI_Wtime();
    size_t m = n + 1;
    if (m > (size_t)(INT32_MAX / (S.size > 0 ? S.size : 1)))
        return ba_fail(err, BA_ERR_LIMIT, "%zu values are too many for one MPI message", n);
    if (m > S.send_cap) {
        free(S.send);
        S.send_cap = 0;
        if (!(S.send = malloc(sizeof(double) * m)))
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the reduction buffer");
        S.send_cap = m;
    }
    if (S.rank == 0 && m * (size_t)S.size > S.gather_cap) {
        free(S.gather);
        S.gather_cap = 0;
        if (!(S.gather = malloc(sizeof(double) * m * (size_t)S.size)))
            return ba_fail(err, BA_ERR_NOMEM, "cannot allocate the reduction buffer on rank 0");
        S.gather_cap = m * (size_t)S.size;
    }
    memcpy(S.send, x, sizeof(double) * n);
    memcpy(&S.send[n], &check, sizeof check);
    /* the ranks meet first, so that the time of the transfer and the sum
     * is told apart from the time a rank waits for a slower one */
    double tw = MPI_Wtime();
    MPI_Barrier(MPI_COMM_WORLD);
    S.tot.wait += MPI_Wtime() - tw;
    MPI_Gather(S.send, (int)m, MPI_DOUBLE, S.gather, (int)m, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (S.rank == 0) {
        for (size_t i = 0; i < n; i++) {
            double s = 0.0;
            for (int k = 0; k < S.size; k++)
                s += S.gather[(size_t)k * m + i];
            S.send[i] = s;
        }
        double bad = -1;
        for (int k = 1; k < S.size && bad < 0; k++) {
            uint64_t ck;
            memcpy(&ck, &S.gather[(size_t)k * m + n], sizeof ck);
            if (ck != check)
                bad = k;
        }
        S.send[n] = bad;
    }
    MPI_Bcast(S.send, (int)m, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    S.tot.calls++;
    S.tot.bytes += sizeof(double) * m;
    S.tot.seconds += MPI_Wtime() - t0;
    if (S.send[n] >= 0)
        return ba_fail(err, BA_ERR_NUMERIC, "the parameters of rank %d differ from rank 0's: "
                       "the replicas diverged", (int)S.send[n]);
    memcpy(x, S.send, sizeof(double) * n);
    return BA_OK;
}
#endif

int mpi_reducer(ba_reducer *r)
{
    memset(r, 0, sizeof *r);
    r->rank = S.rank, r->size = S.size;
#ifdef BA_HAVE_MPI
    r->sum = reduce_sum;
#endif
    return S.size > 1;
}

/* ------------------------------------------------- the ranks' settings
 * Before any work every rank's settings, as a canonical JSON text, are
 * compared with rank 0's (its text broadcast, each rank comparing its
 * own, the first that differs describing the difference to rank 0). */
#ifdef BA_HAVE_MPI
/* The options that JSON keys (the last part of a path) stand for, where
 * the value reads as the option's; other keys are named by their path. */
static const char *const key_opts[][2] = {
    {"block_size", "T"}, {"n_embd", "embd"}, {"C", "embd"}, {"n_layer", "layers"},
    {"n_head", "heads"}, {"n_heldout", "heldout"}, {"data_seed", "data-seed"},
    {"recall_vocab", "recall-vocab"}, {"pairs", "pairs"},
    {"field_bias", "field-bias"}, {"band_precision", "band-precision"},
    {"weight_decay", "weight-decay"},
    {"j_init_std", "j-init-std"}, {"init_std", "init-std"}, {"eval_every", "eval-every"}, {"eval_items", "eval-items"},
    {"log_every", "log-every"}, {"save_every", "save-every"}, {"max_iter", "max-iter"},
    {"arms", "attn/arm"}, {"task", "task"}, {"attn", "attn"}, {"engine", "engine"},
    {"couplings", "couplings"}, {"band", "band"}, {"kinds", "kinds"}, {"window", "window"},
    {"damping", "damping"}, {"tol", "tol"}, {"shots", "shots"}, {"steps", "steps"},
    {"batch", "batch"}, {"lr", "lr"}, {"warmup", "warmup"}, {"clip", "clip"},
    {"seed", "seed"}, {"seeds", "seeds"}, {"seed0", "seed0"}, {"T", "T"}, {"out", "out"},
    {"data", "data"}, {"command", "command"},
};

static const char *key_name(const char *path)
{
    const char *dot = strrchr(path, '.'), *leaf = dot ? dot + 1 : path;
    size_t n = strlen(path);
    if (n >= 12 && strcmp(path + n - 12, "sampler.kind") == 0)
        return "sampler";
    for (size_t i = 0; i < sizeof key_opts / sizeof key_opts[0]; i++)
        if (strcmp(leaf, key_opts[i][0]) == 0)
            return key_opts[i][1];
    return path;
}

static void value_text(const cJSON *v, char *buf, size_t n)
{
    if (!v) {
        snprintf(buf, n, "(not given)");
    } else if (cJSON_IsString(v)) {
        snprintf(buf, n, "%s", v->valuestring);
    } else {
        char *t = cJSON_PrintUnformatted(v);
        snprintf(buf, n, "%s", t ? t : "?");
        cJSON_free(t);
    }
}

/* The first difference of objects a (rank 0's) and b, descending into
 * objects: its path appended to key (n bytes), each side's item (NULL
 * where absent). 1 when there is one. */
static int first_diff(const cJSON *a, const cJSON *b, char *key, size_t n, const cJSON **va,
                      const cJSON **vb)
{
    size_t len = strlen(key);
    for (const cJSON *x = a->child; x; x = x->next) {
        const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
        snprintf(key + len, n - len, "%s%s", len ? "." : "", x->string);
        if (y && cJSON_IsObject(x) && cJSON_IsObject(y)) {
            if (first_diff(x, y, key, n, va, vb))
                return 1;
        } else if (!y || !cJSON_Compare(x, y, 1)) {
            *va = x, *vb = y;
            return 1;
        }
    }
    for (const cJSON *y = b->child; y; y = y->next)
        if (!cJSON_GetObjectItemCaseSensitive(a, y->string)) {
            snprintf(key + len, n - len, "%s%s", len ? "." : "", y->string);
            *va = NULL, *vb = y;
            return 1;
        }
    key[len] = '\0';
    return 0;
}

/* "T = 10, not 8": mine against rank 0's text ref, into msg. */
static void describe(const char *ref, const char *mine, char *msg, size_t n)
{
    cJSON *a = cJSON_Parse(ref), *b = cJSON_Parse(mine);
    const cJSON *va = NULL, *vb = NULL;
    char key[160] = "", x[160], y[160];
    if (cJSON_IsObject(a) && cJSON_IsObject(b) && first_diff(a, b, key, sizeof key, &va, &vb)) {
        value_text(vb, y, sizeof y);
        value_text(va, x, sizeof x);
        snprintf(msg, n, "%.150s = %.150s, not %.150s", key_name(key), y, x);
    } else {
        snprintf(msg, n, "their digests differ (%zu bytes of settings, not %zu)", strlen(mine),
                 strlen(ref));
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
}

/* The statuses exchanged, then (all well) every rank's text compared with
 * rank 0's: 0, or the same exit code on every rank (2 for settings that
 * differ, rank 0 naming the first difference of the first such rank). */
static int agree_text(int code, const char *text)
{
    if ((code = exchange(code, AT_SETTINGS)) != 0)
        return code;
    int len = S.rank == 0 ? (int)strlen(text) : 0;
    MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char *ref = malloc((size_t)len + 1);
    if (!ref) {
        fprintf(mpi_err(), "%s: rank %d: out of memory\n", prog, S.rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (S.rank == 0)
        memcpy(ref, text, (size_t)len);
    MPI_Bcast(ref, len, MPI_CHAR, 0, MPI_COMM_WORLD);
    ref[len] = '\0';
    int mine = strcmp(ref, text) != 0 ? S.rank : S.size, first = S.size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first < S.size) {
        char msg[480] = "";
        if (S.rank == first) {
            describe(ref, text, msg, sizeof msg);
            MPI_Send(msg, (int)sizeof msg, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        } else if (S.rank == 0) {
            MPI_Recv(msg, (int)sizeof msg, MPI_CHAR, first, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            msg[sizeof msg - 1] = '\0';
            fprintf(stderr, "%s %s: rank %d's settings differ from rank 0's: %s; start every "
                            "rank with the same options\n", prog, S.cmd, first, msg);
        }
        code = EXIT_USAGE;
    }
    free(ref);
    return code;
}

/* Parses a malloc'd JSON text, which it frees. */
static cJSON *parsed(char *txt)
{
    cJSON *o = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    return o;
}

static uint64_t fnv1a(const void *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ULL;
    return h;
}

/* What a rank of train is about to run: the command, the run directory,
 * the charlm text (size and hash), the model config with the data spec,
 * the training settings but the thread count (each rank's own: every
 * replica applies the same sums), the step and the weights' hash (a
 * resumed state). */
static char *train_text(ba_trainer *t, const char *dir, int fresh)
{
    ba_data_spec spec;
    ba_trainer_data_spec(t, &spec);
    ba_model *m = ba_trainer_model(t);
    cJSON *o = cJSON_CreateObject(), *cfg = parsed(ba_config_to_json(ba_model_config(m), &spec));
    cJSON *set = parsed(ba_train_settings_to_json(ba_trainer_settings(t), NULL));
    cJSON_DeleteItemFromObjectCaseSensitive(set, "threads");
    uint64_t bytes, hash;
    ba_dataset_fingerprint(ba_trainer_dataset(t), &bytes, &hash);
    char data[96], weights[24];
    snprintf(data, sizeof data, "a text of %" PRIu64 " bytes, hash %016" PRIx64, bytes, hash);
    snprintf(weights, sizeof weights, "%016" PRIx64,
             fnv1a(ba_model_params(m), sizeof(ba_real) * ba_model_num_params(m)));
    int ok = o && cfg && set && cJSON_AddStringToObject(o, "command", fresh ? "train" :
                                                        "train --resume") &&
             cJSON_AddStringToObject(o, "out", dir) &&
             (bytes == 0 || cJSON_AddStringToObject(o, "data", data));
    if (ok && cJSON_AddItemToObject(o, "config", cfg))
        cfg = NULL;
    if (ok && !cfg && cJSON_AddItemToObject(o, "train", set))
        set = NULL;
    double step = (double)ba_trainer_step_count(t);
    ok = ok && !cfg && !set && cJSON_AddNumberToObject(o, "step", step) &&
         cJSON_AddStringToObject(o, "weights", weights);
    char *txt = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o), cJSON_Delete(cfg), cJSON_Delete(set);
    return txt;
}

/* What a rank of ablate is about to run: its directory, the grid (but
 * the thread count) and, for charlm, the data path. */
static char *grid_text(const char *dir, const char *data_path, const char *grid_json)
{
    cJSON *o = cJSON_CreateObject(), *g = grid_json ? cJSON_Parse(grid_json) : NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(g, "train"),
                                            "threads");
    const cJSON *task = cJSON_GetObjectItemCaseSensitive(g, "task");
    int charlm = cJSON_IsString(task) && strcmp(task->valuestring, "charlm") == 0;
    int ok = o && g && cJSON_AddStringToObject(o, "command", "ablate") &&
             cJSON_AddStringToObject(o, "out", dir) &&
             (!charlm || cJSON_AddStringToObject(o, "data", data_path));
    if (ok && cJSON_AddItemToObject(o, "grid", g))
        g = NULL;
    char *txt = ok && !g ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o), cJSON_Delete(g);
    return txt;
}

/* agree_text over the text made (code 1 when it cannot be made). */
static int agree_made(int code, char *txt)
{
    if (code == 0 && !txt) {
        fprintf(stderr, "%s %s: out of memory comparing the ranks' settings\n", prog, S.cmd);
        code = 1;
    }
    code = agree_text(code, txt);
    cJSON_free(txt);
    return code;
}
#endif

int mpi_agree_train(int code, ba_trainer *t, const char *dir, int fresh)
{
#ifdef BA_HAVE_MPI
    if (!S.active || S.size < 2)
        return mpi_agree(code);
    return agree_made(code, code ? NULL : train_text(t, dir, fresh));
#else
    (void)t, (void)dir, (void)fresh;
    return code;
#endif
}

int mpi_agree_grid(int code, const char *dir, const char *data_path, const char *grid_json)
{
#ifdef BA_HAVE_MPI
    if (!S.active || S.size < 2)
        return mpi_agree(code);
    return agree_made(code, code ? NULL : grid_text(dir, data_path, grid_json));
#else
    (void)dir, (void)data_path, (void)grid_json;
    return code;
#endif
}

int cli_main(int argc, char **argv, const cli_command *cmds, size_t n, void (*help)(void))
{
    if (argc < 2) {
        help();
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        help();
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("%s %s\n", prog, BA_VERSION);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (strcmp(cmd, cmds[i].name) == 0) {
            /* under mpirun: MPI, and whether the command runs on ranks */
            int code = mpi_start(&argc, &argv, cmd);
            if (code == 0)
                code = cmds[i].fn(argc - 2, argv + 2);
            return mpi_finish(code);
        }
    fprintf(stderr, "%s: unknown command '%s' (try '%s --help')\n", prog, cmd, prog);
    return EXIT_USAGE;
}
