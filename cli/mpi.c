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
 *   A rank that fails after that point cannot be waited for by the others
 *   (they are inside a reduction): it ends the job with MPI_Abort, whose
 *   message names it, and mpirun exits non-zero. Rank 0 writes atomically,
 *   so the last complete save point survives. */
#include "cli.h"

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
} mpi_state;

static mpi_state S = {0, 0, 1, 1, 0, 0, NULL, NULL, 0, NULL, 0, NULL, 0, {0, 0, 0}};

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
        if (S.rank == 0)
            fprintf(stderr, "%s %s: does not run on several MPI ranks (only train and ablate "
                            "do); run it without mpirun\n", prog, cmd);
        return EXIT_USAGE;
    }
    return 0;
#endif
}

/* A nonzero rank's captured messages on its real stderr, marked. */
static void show_captured(void)
{
    if (!S.real_err || !S.cap)
        return;
    fflush(stderr);
    const char *p = S.cap;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        if (len > 0)
            fprintf(S.real_err, "[rank %d] %.*s\n", S.rank, len, p);
        p = nl ? nl + 1 : NULL;
    }
    fflush(S.real_err);
    rewind(stderr);
}

int mpi_agree(int code)
{
#ifdef BA_HAVE_MPI
    if (!S.active)
        return code;
    S.agreed++;
    int *codes = calloc((size_t)S.size, sizeof(int));
    if (!codes) {
        fprintf(mpi_err(), "%s: rank %d: out of memory\n", prog, S.rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Allgather(&code, 1, MPI_INT, codes, 1, MPI_INT, MPI_COMM_WORLD);
    int worst = 0;
    for (int k = 0; k < S.size; k++)
        worst = codes[k] > worst ? codes[k] : worst;
    /* rank 0 has said why when it failed; a rank that failed alone says it */
    if (S.rank != 0 && code != 0 && codes[0] == 0)
        show_captured();
    if (S.rank == 0 && code == 0 && worst != 0) {
        for (int k = 1; k < S.size; k++)
            if (codes[k]) {
                fprintf(stderr, "%s: rank %d failed (exit code %d; its messages follow, marked "
                                "[rank %d])\n", prog, k, codes[k], k);
                break;
            }
    }
    free(codes);
    return worst;
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
        code = mpi_agree(code);
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
