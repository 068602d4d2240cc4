/* Statistics against values computed by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "boltzattn.h"

static void test_mean_sd_ci(void **state)
{
    (void)state;
    /* 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sum of squares 32, sd = sqrt(32/7) */
    double x[] = {2, 4, 4, 4, 5, 5, 7, 9};
    ba_summary s = ba_summarize(x, 8);
    assert_int_equal(s.n, 8);
    assert_float_equal(s.mean, 5.0, 1e-15);
    assert_float_equal(s.sd, sqrt(32.0 / 7.0), 1e-15);
    /* t_{0.975,7} = 2.3646 */
    assert_float_equal(s.ci95, 2.3646 * sqrt(32.0 / 7.0) / sqrt(8.0), 1e-12);
    ba_summary one = ba_summarize(x, 1);
    assert_float_equal(one.mean, 2.0, 0);
    assert_true(isnan(one.sd) && isnan(one.ci95));
    ba_summary none = ba_summarize(x, 0);
    assert_true(isnan(none.mean));
}

static void test_paired(void **state)
{
    (void)state;
    /* differences 1, 2, 3, 4, 5: mean 3, sd sqrt(2.5), t_{0.975,4} = 2.7764 */
    double a[] = {11, 22, 33, 44, 55}, b[] = {10, 20, 30, 40, 50}, w[5];
    ba_summary d = ba_paired_diff(a, b, 5, w);
    assert_float_equal(d.mean, 3.0, 1e-15);
    assert_float_equal(d.sd, sqrt(2.5), 1e-15);
    assert_float_equal(d.ci95, 2.7764 * sqrt(2.5) / sqrt(5.0), 1e-12);
    /* pairing removes the shared seed effect: unpaired spread is far larger */
    ba_summary ua = ba_summarize(a, 5);
    assert_true(ua.sd > 5 * d.sd);
}

static void test_t_quantiles(void **state)
{
    (void)state;
    assert_float_equal(ba_t975(1), 12.7062, 1e-4);
    assert_float_equal(ba_t975(4), 2.7764, 1e-4);
    assert_float_equal(ba_t975(30), 2.0423, 1e-4);
    /* beyond the table: 40 -> 2.0211, 60 -> 2.0003, 120 -> 1.9799 */
    assert_float_equal(ba_t975(40), 2.0211, 2e-4);
    assert_float_equal(ba_t975(60), 2.0003, 2e-4);
    assert_float_equal(ba_t975(120), 1.9799, 2e-4);
    assert_true(isnan(ba_t975(0)));
    for (int df = 1; df < 200; df++) /* decreasing towards 1.96 */
        assert_true(ba_t975(df + 1) < ba_t975(df) && ba_t975(df) > 1.95996);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mean_sd_ci),
        cmocka_unit_test(test_paired),
        cmocka_unit_test(test_t_quantiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
