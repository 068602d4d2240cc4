/* Data-parallel training through the library's reducer interface
 * (ba_trainer_set_reducer), with the ranks as threads of this process and
 * a reducer over a barrier, so the library's side is tested without MPI
 * (tests/mpi.sh runs the command-line tool's MPI reducer):
 * - N = 2, 3, 4 replicas of a brackets run take the losses of the single
 *   process with the same global batch to float rounding, and end with
 *   bit-identical parameters on every rank;
 * - a sampled model too (its shares draw the shots one process would);
 * - the replicas' evaluation is the single process's to the bit;
 * - replicas that differ fail the step on every rank, naming the rank;
 * - a batch the ranks cannot share, a bad rank: BA_ERR_ARG. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boltzattn.h"

enum { MAXR = 4, STEPS = 20, BATCH = 12 };

/* ------------------------------------------------ a reducer over threads */

typedef struct {
    int size;
    pthread_barrier_t bar;
    double *x[MAXR];
    size_t n[MAXR];
    uint64_t check[MAXR];
    double *sum;
    size_t cap;
    int rc;
    char msg[BA_ERR_LEN];
} pool;

typedef struct {
    pool *p;
    int rank;
} member;

/* Every rank's x summed in rank order, as the MPI reducer does. */
static int pool_sum(void *user, double *x, size_t n, uint64_t check, char *err)
{
    member *me = user;
    pool *p = me->p;
    p->x[me->rank] = x, p->n[me->rank] = n, p->check[me->rank] = check;
    pthread_barrier_wait(&p->bar);
    if (me->rank == 0) {
        p->rc = 0;
        if (n > p->cap) {
            free(p->sum);
            p->sum = malloc(sizeof(double) * n);
            p->cap = p->sum ? n : 0;
        }
        for (int k = 1; k < p->size && !p->rc; k++)
            if (p->n[k] != n || p->check[k] != check) {
                p->rc = BA_ERR_NUMERIC;
                snprintf(p->msg, sizeof p->msg, "rank %d's %s differs from rank 0's", k,
                         p->n[k] != n ? "length" : "check");
            }
        for (size_t i = 0; i < n && !p->rc; i++) {
            double s = 0.0;
            for (int k = 0; k < p->size; k++)
                s += p->x[k][i];
            p->sum[i] = s;
        }
    }
    pthread_barrier_wait(&p->bar);
    int rc = p->rc;
    if (rc)
        snprintf(err, BA_ERR_LEN, "%s", p->msg);
    else
        memcpy(x, p->sum, sizeof(double) * n);
    pthread_barrier_wait(&p->bar); /* rank 0 may not reuse sum before all copied */
    return rc;
}

/* ------------------------------------------------------------ the runs */

static ba_dataset *data;

static ba_trainer *make(int shots)
{
    char err[BA_ERR_LEN];
    ba_config cfg = ba_config_default(BA_ATTN_BOLTZMANN, ba_dataset_block_size(data));
    ba_config_set_data(&cfg, data);
    cfg.n_embd = 16, cfg.n_head = 2;
    if (shots) {
        cfg.sampler = ba_sampler_default(BA_SAMPLER_DIRECT);
        cfg.sampler.shots = shots;
    }
    ba_train_settings s = ba_train_settings_default(STEPS);
    s.batch = BATCH, s.seed = 5, s.j_init_std = 0.1;
    ba_trainer *t = NULL;
    if (ba_trainer_init(&t, &cfg, data, NULL, &s, err))
        fail_msg("ba_trainer_init: %s", err);
    return t;
}

typedef struct {
    member me;
    int shots, perturb; /* perturb: rank 1 changes a parameter before step 1 */
    double loss[STEPS];
    int rc[STEPS];
    char err[BA_ERR_LEN];
    ba_eval_result ev; /* the replicas' evaluation after the steps */
    ba_real *params;   /* (P) at the end, malloc'd */
    size_t P;
} replica;

static void *run_replica(void *arg)
{
    replica *r = arg;
    char err[BA_ERR_LEN];
    ba_trainer *t = make(r->shots);
    ba_reducer red = {r->me.rank, r->me.p ? r->me.p->size : 1, pool_sum, &r->me};
    if (r->me.p && ba_trainer_set_reducer(t, &red, err))
        fail_msg("ba_trainer_set_reducer: %s", err);
    if (r->perturb && r->me.rank == 1)
        ba_model_params(ba_trainer_model(t))[0] += 1e-3f;
    for (int k = 0; k < STEPS; k++) {
        r->rc[k] = ba_trainer_step(t, &r->loss[k], NULL, NULL, r->err);
        if (r->rc[k])
            break;
    }
    if (!r->perturb && ba_trainer_evaluate(t, 48, &r->ev, err))
        fail_msg("ba_trainer_evaluate: %s", err);
    ba_model *m = ba_trainer_model(t);
    r->P = ba_model_num_params(m);
    r->params = malloc(sizeof(ba_real) * r->P);
    memcpy(r->params, ba_model_params(m), sizeof(ba_real) * r->P);
    ba_trainer_free(t);
    return NULL;
}

/* N replicas (N = 1: a single process, no reducer) into r[0..N-1]. */
static void run(int N, int shots, int perturb, replica *r)
{
    pool p;
    memset(&p, 0, sizeof p);
    p.size = N;
    pthread_barrier_init(&p.bar, NULL, (unsigned)N);
    pthread_t th[MAXR];
    for (int k = 0; k < N; k++) {
        memset(&r[k], 0, sizeof r[k]);
        r[k].me.p = N > 1 ? &p : NULL;
        r[k].me.rank = k;
        r[k].shots = shots, r[k].perturb = perturb;
        assert_int_equal(pthread_create(&th[k], NULL, run_replica, &r[k]), 0);
    }
    for (int k = 0; k < N; k++)
        pthread_join(th[k], NULL);
    pthread_barrier_destroy(&p.bar);
    free(p.sum);
}

static void free_replicas(replica *r, int N)
{
    for (int k = 0; k < N; k++)
        free(r[k].params);
}

/* The single process against N replicas: losses to `tol` relative, the
 * replicas' parameters bit-identical, their evaluation that of one
 * process on rank 0's model. */
static void check_against_single(int shots, double tol)
{
    replica one[1], many[MAXR];
    run(1, shots, 0, one);
    for (int N = 2; N <= MAXR; N++) {
        run(N, shots, 0, many);
        double worst = 0;
        for (int k = 0; k < STEPS; k++)
            for (int q = 0; q < N; q++) {
                assert_int_equal(many[q].rc[k], BA_OK);
                double rel = fabs(many[q].loss[k] - one[0].loss[k]) / fabs(one[0].loss[k]);
                worst = fmax(worst, rel);
            }
        printf("  N = %d, shots %d: worst relative loss difference over %d steps %.2e\n", N,
               shots, STEPS, worst);
        assert_true(worst < tol);
        /* the steps moved the model (a run that did not train is no test) */
        assert_true(fabs(many[0].loss[STEPS - 1] - many[0].loss[0]) > 1e-3);
        for (int q = 1; q < N; q++) {
            assert_int_equal(many[q].P, many[0].P);
            assert_memory_equal(many[q].params, many[0].params, sizeof(ba_real) * many[0].P);
            assert_true(many[q].ev.loss == many[0].ev.loss);
        }
        /* the shared evaluation is one process's, to the bit */
        if (!shots) {
            char err[BA_ERR_LEN];
            ba_trainer *t = make(0);
            ba_model *m = ba_trainer_model(t);
            memcpy(ba_model_params(m), many[0].params, sizeof(ba_real) * many[0].P);
            ba_eval_result ev;
            assert_int_equal(ba_trainer_evaluate(t, 48, &ev, err), BA_OK);
            assert_true(ev.loss == many[0].ev.loss);
            assert_true(ev.accuracy == many[0].ev.accuracy);
            assert_int_equal(ev.n_items, many[0].ev.n_items);
            assert_int_equal(ev.n_targets, many[0].ev.n_targets);
            ba_trainer_free(t);
        }
        free_replicas(many, N);
    }
    free_replicas(one, 1);
}

static void test_exact(void **state)
{
    (void)state;
    check_against_single(0, 1e-5);
}

static void test_sampled(void **state)
{
    (void)state;
    /* the shots of every share are the single process's: the same
     * estimate up to the float rounding of the reduction */
    check_against_single(16, 1e-5);
}

static void test_diverged(void **state)
{
    (void)state;
    replica r[3];
    run(3, 0, 1, r);
    for (int q = 0; q < 3; q++) {
        assert_int_equal(r[q].rc[0], BA_ERR_NUMERIC);
        assert_non_null(strstr(r[q].err, "rank 1"));
    }
    free_replicas(r, 3);
}

static void test_refused(void **state)
{
    (void)state;
    char err[BA_ERR_LEN];
    ba_trainer *t = make(0);
    member me = {NULL, 0};
    ba_reducer red = {0, 5, pool_sum, &me};
    assert_int_equal(ba_trainer_set_reducer(t, &red, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "12"));
    assert_non_null(strstr(err, "5 ranks"));
    red.size = 3, red.rank = 3;
    assert_int_equal(ba_trainer_set_reducer(t, &red, err), BA_ERR_ARG);
    assert_non_null(strstr(err, "rank 3"));
    red.rank = 0, red.sum = NULL;
    assert_int_equal(ba_trainer_set_reducer(t, &red, err), BA_ERR_ARG);
    /* size 1: a single process again */
    red.size = 1;
    assert_int_equal(ba_trainer_set_reducer(t, &red, err), BA_OK);
    double loss;
    assert_int_equal(ba_trainer_step(t, &loss, NULL, NULL, err), BA_OK);
    ba_trainer_free(t);
}

int main(void)
{
    char err[BA_ERR_LEN];
    if (ba_dataset_brackets(&data, 8, 1, 200, 7, err)) {
        fprintf(stderr, "ba_dataset_brackets: %s\n", err);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_sampled),
        cmocka_unit_test(test_diverged),
        cmocka_unit_test(test_refused),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ba_dataset_free(data);
    return rc;
}
