/* Extreme fields and couplings through the attention op (issue 41, H1).
 *
 * When every key of a query is very unlikely (fields q.k scale near -300
 * and below) the weights' total S = exp(logsumexp l) underflows in double
 * and dL/dm = (da - a.da) / (2 S) overflows: the engines used to return
 * NaN gradients with BA_OK. The rule held here, for every engine of the
 * table (ba_engine_at), both precisions of the op, and several variants of
 * each class (fields offset by 0, -20, -250, -360, -745, -1000, -1e6,
 * +1e6, mixed; couplings huge and non-finite; q, k whose product
 * overflows; a huge upstream gradient):
 *   - BA_OK comes with finite outputs and gradients only; and for the
 *     exact engines (reference, fast, band) in double those gradients
 *     match central finite differences of the op's own forward within
 *     1e-6 of the gradient's scale (plus 1e-7 absolute);
 *   - otherwise the status is BA_ERR_NUMERIC or BA_ERR_ARG and the message
 *     names the bad input or the query, and a backward refusal names the
 *     engine that was asked for;
 *   - the exact engines refuse, in both precisions, the offsets whose
 *     largest log-weight is below -600 (-360 and lower), and the op
 *     refuses |J| > BA_ATTN_OP_MAX_COUPLING naming J's index. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boltzattn_op.h"
#include "ising/ising.h"

enum { B = 2, H = 1, T = 5, D = 2, N = B * H * T * D, NJ = H * T * T };

typedef struct {
    double q[N], k[N], v[N], J[NJ], dout[N];
} inputs;

typedef struct {
    double out[N], dq[N], dk[N], dv[N], dJ[NJ];
    int rc, stage; /* stage: 0 ok, 1 forward failed, 2 backward failed */
    char err[BA_ERR_LEN];
} result;

/* Fields h_ij = q_i . k_j = off_j + 0.3 j + 0.5 x_i sin(j + b): offset off
 * on every key (mixed: -1000 on odd keys, 0 on even ones). */
static void make_inputs(inputs *in, double off, int mixed)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int o = (b * T + t) * D;
            double kof = mixed ? (t % 2 ? -1000.0 : 0.0) : off;
            in->q[o] = 1.0, in->q[o + 1] = 0.2 * t - 0.3 * b;
            in->k[o] = kof + 0.3 * t, in->k[o + 1] = 0.5 * sin(t + b);
            in->v[o] = 0.7 * t - 1.0, in->v[o + 1] = cos(1.3 * t + b);
            in->dout[o] = 1.0 + 0.1 * t, in->dout[o + 1] = 0.4 - 0.2 * b;
        }
    for (int a = 0; a < NJ; a++)
        in->J[a] = 0.15 * ((a * 7) % 5 - 2);
}

static ba_attn_op_desc desc_of(const ba_engine_ops *o)
{
    ba_attn_op_desc d = ba_attn_op_default(B, H, T, D);
    d.engine = o->id;
    d.scale = 1.0;
    if (o->caps & BA_ENGINE_CAP_WINDOW)
        d.window = 2;
    return d;
}

static int all_finite(const double *x, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

/* The op's forward and backward in precision prec (32: float copies) on
 * in; outputs as doubles. */
static void run_op(const ba_attn_op_desc *d, const inputs *in, int prec, result *r)
{
    ba_attn_op_ctx *ctx = NULL;
    memset(r, 0, sizeof *r);
    assert_int_equal(ba_attn_op_ctx_new(&ctx, r->err), BA_OK);
    if (prec == 64) {
        r->rc = ba_attn_op_forward_f64(ctx, d, in->q, in->k, in->v, in->J, r->out, r->err);
        r->stage = r->rc ? 1 : 0;
        if (!r->rc) {
            r->rc = ba_attn_op_backward_f64(ctx, in->q, in->k, in->v, in->J, in->dout, r->dq,
                                            r->dk, r->dv, r->dJ, r->err);
            r->stage = r->rc ? 2 : 0;
        }
    } else {
        float q[N], k[N], v[N], J[NJ], dout[N];
        float out[N] = {0}, dq[N] = {0}, dk[N] = {0}, dv[N] = {0}, dJ[NJ] = {0};
        for (int i = 0; i < N; i++)
            q[i] = (float)in->q[i], k[i] = (float)in->k[i], v[i] = (float)in->v[i],
            dout[i] = (float)in->dout[i];
        for (int i = 0; i < NJ; i++)
            J[i] = (float)in->J[i];
        r->rc = ba_attn_op_forward_f32(ctx, d, q, k, v, J, out, r->err);
        r->stage = r->rc ? 1 : 0;
        if (!r->rc) {
            r->rc = ba_attn_op_backward_f32(ctx, q, k, v, J, dout, dq, dk, dv, dJ, r->err);
            r->stage = r->rc ? 2 : 0;
        }
        for (int i = 0; i < N; i++)
            r->out[i] = out[i], r->dq[i] = dq[i], r->dk[i] = dk[i], r->dv[i] = dv[i];
        for (int i = 0; i < NJ; i++)
            r->dJ[i] = dJ[i];
    }
    ba_attn_op_ctx_free(ctx);
}

/* The rule every result obeys: BA_OK with everything finite, or a named
 * BA_ERR_NUMERIC / BA_ERR_ARG; a backward refusal names engine o. */
static void check_rule(const ba_engine_ops *o, const result *r, const char *what)
{
    if (r->rc == BA_OK) {
        int fin = all_finite(r->out, N) && all_finite(r->dq, N) && all_finite(r->dk, N) &&
                  all_finite(r->dv, N) && all_finite(r->dJ, NJ);
        if (!fin)
            fail_msg("%s, engine %s: BA_OK with a non-finite output or gradient", what, o->name);
        return;
    }
    if (r->rc != BA_ERR_NUMERIC && r->rc != BA_ERR_ARG)
        fail_msg("%s, engine %s: status %d (%s)", what, o->name, r->rc, r->err);
    assert_true(strlen(r->err) > 0);
    if (r->stage == 2 && strstr(r->err, "attention backward") && !strstr(r->err, o->name))
        fail_msg("%s: engine %s's refusal names another engine: %s", what, o->name, r->err);
}

/* The op's loss sum(dout * out) in double. */
static double loss_of(const ba_attn_op_desc *d, const inputs *in)
{
    result r;
    ba_attn_op_ctx *ctx = NULL;
    assert_int_equal(ba_attn_op_ctx_new(&ctx, r.err), BA_OK);
    assert_int_equal(ba_attn_op_forward_f64(ctx, d, in->q, in->k, in->v, in->J, r.out, r.err),
                     BA_OK);
    ba_attn_op_ctx_free(ctx);
    double s = 0;
    for (int i = 0; i < N; i++)
        s += in->dout[i] * r.out[i];
    return s;
}

/* Central differences of the loss against r's gradients of q, k, v and
 * the couplings J[j][k], j < k (exact engines, double). */
static void check_fd(const ba_attn_op_desc *d, const inputs *in, const result *r,
                     const char *what)
{
    double *x[4], *g[4];
    int n[4] = {N, N, N, NJ};
    inputs w = *in;
    x[0] = w.q, x[1] = w.k, x[2] = w.v, x[3] = w.J;
    g[0] = (double *)r->dq, g[1] = (double *)r->dk, g[2] = (double *)r->dv,
    g[3] = (double *)r->dJ;
    double scale = 0, worst = 0;
    for (int a = 0; a < 4; a++)
        for (int i = 0; i < n[a]; i++)
            scale = fmax(scale, fabs(g[a][i]));
    for (int a = 0; a < 4; a++)
        for (int i = 0; i < n[a]; i++) {
            if (a == 3 && (i / T % T) >= (i % T))
                continue; /* not a coupling */
            double x0 = x[a][i], e = 1e-5 * fmax(1.0, fabs(x0));
            x[a][i] = x0 + e;
            double lp = loss_of(d, &w);
            x[a][i] = x0 - e;
            double lm = loss_of(d, &w);
            x[a][i] = x0;
            double fd = (lp - lm) / (2 * e);
            /* finite differences of a loss near |x| = 1e6 lose their
             * digits to the step's rounding: 1e-5 * |x| * eps / e */
            double tol = 1e-6 * scale + 1e-7 + 1e-9 * fabs(x0);
            worst = fmax(worst, fabs(fd - g[a][i]) - tol);
            if (fabs(fd - g[a][i]) > tol)
                fail_msg("%s: gradient %d[%d] = %.10g, central difference %.10g", what, a, i,
                         g[a][i], fd);
        }
    (void)worst;
}

static int is_exact(const ba_engine_ops *o) { return (o->caps & BA_ENGINE_CAP_EXACT) != 0; }

static void test_fields(void **state)
{
    (void)state;
    static const double offs[] = {0, -20, -250, -360, -745, -1000, -1e6, 1e6, NAN};
    for (int e = 0; ba_engine_at(e); e++) {
        const ba_engine_ops *o = ba_engine_at(e);
        ba_attn_op_desc d = desc_of(o);
        for (size_t c = 0; c < sizeof offs / sizeof *offs; c++) {
            int mixed = isnan(offs[c]);
            inputs in;
            make_inputs(&in, mixed ? 0 : offs[c], mixed);
            for (int prec = 32; prec <= 64; prec += 32) {
                char what[128];
                snprintf(what, sizeof what, "%s fields, offset %g, float%d",
                         mixed ? "mixed" : "uniform", offs[c], prec);
                result r;
                run_op(&d, &in, prec, &r);
                check_rule(o, &r, what);
                if (!is_exact(o))
                    continue;
                int deep = !mixed && offs[c] <= -360;
                if (deep) {
                    /* every key too unlikely: a named refusal of the backward */
                    if (r.rc != BA_ERR_NUMERIC || r.stage != 2 || !strstr(r.err, "query"))
                        fail_msg("%s, engine %s: expected the backward's refusal, got %d: %s",
                                 what, o->name, r.rc, r.err);
                } else {
                    if (r.rc != BA_OK)
                        fail_msg("%s, engine %s: %s", what, o->name, r.err);
                    if (prec == 64) {
                        char w2[160];
                        snprintf(w2, sizeof w2, "%s, engine %s", what, o->name);
                        check_fd(&d, &in, &r, w2);
                    }
                }
            }
        }
    }
}

static void test_couplings(void **state)
{
    (void)state;
    /* huge within the bound, beyond it, and not finite */
    static const double Jv[] = {1e5, -1e5, 2e6, -1e12, INFINITY, -INFINITY, NAN};
    for (int e = 0; ba_engine_at(e); e++) {
        const ba_engine_ops *o = ba_engine_at(e);
        ba_attn_op_desc d = desc_of(o);
        for (size_t c = 0; c < sizeof Jv / sizeof *Jv; c++)
            for (int prec = 32; prec <= 64; prec += 32) {
                inputs in;
                make_inputs(&in, 0.0, 0);
                in.J[1 * T + 3] = Jv[c]; /* J[0][1][3] */
                char what[128];
                snprintf(what, sizeof what, "J[0][1][3] = %g, float%d", Jv[c], prec);
                result r;
                run_op(&d, &in, prec, &r);
                check_rule(o, &r, what);
                if (!isfinite(Jv[c]) || fabs(Jv[c]) > BA_ATTN_OP_MAX_COUPLING) {
                    int want = isfinite(Jv[c]) ? BA_ERR_ARG : BA_ERR_NUMERIC;
                    if (r.rc != want || r.stage != 1 || !strstr(r.err, "J[0][1][3]"))
                        fail_msg("%s, engine %s: expected %d naming J[0][1][3], got %d: %s",
                                 what, o->name, want, r.rc, r.err);
                }
            }
    }
}

static void test_products(void **state)
{
    (void)state;
    for (int e = 0; ba_engine_at(e); e++) {
        const ba_engine_ops *o = ba_engine_at(e);
        ba_attn_op_desc d = desc_of(o);
        for (int prec = 32; prec <= 64; prec += 32) {
            inputs in;
            result r;
            char what[128];
            /* q.k overflows double (float: the inputs themselves overflow) */
            make_inputs(&in, 0.0, 0);
            in.q[2 * D] = 1e200, in.k[0] = 1e200;
            snprintf(what, sizeof what, "q.k overflowing, float%d", prec);
            run_op(&d, &in, prec, &r);
            check_rule(o, &r, what);
            assert_int_equal(r.rc, BA_ERR_NUMERIC);
            /* a huge upstream gradient: OK and finite, or a named refusal */
            make_inputs(&in, 0.0, 0);
            for (int i = 0; i < N; i++)
                in.dout[i] *= prec == 64 ? 1e305 : 1e37;
            snprintf(what, sizeof what, "dout near the largest value, float%d", prec);
            run_op(&d, &in, prec, &r);
            check_rule(o, &r, what);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_couplings),
        cmocka_unit_test(test_products),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
