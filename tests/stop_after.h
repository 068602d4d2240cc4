/* A caller's stop request for the tests of stops (ba_stop in
 * src/core/core.h): answers yes from its (after + 1)-th poll on, counting
 * the polls (OpenMP threads poll it too). Included by a test file once. */
#ifndef BA_TEST_STOP_AFTER_H
#define BA_TEST_STOP_AFTER_H

typedef struct {
    long polls, after;
} stop_after;

static int stop_after_requested(void *user)
{
    stop_after *s = user;
    long k;
#pragma omp atomic capture
    k = ++s->polls;
    return k > s->after;
}

#endif
