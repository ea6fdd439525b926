/* robodyn_sim: see robodyn_sim.h. Static C99 + POSIX clocks. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "robodyn_sim.h"

#include <math.h>
#include <string.h>
#include <time.h>

/* Workspace layout, in doubles: the control law, one integration step and the
 * simulation loop each own a disjoint slice, so rd_simulate can call the others. */
#define CONTROL_SIZE(n) (2L * (n) * (n) + 6L * (n))
/* fixed base: 10 vectors of n; floating base: 4 accelerations, 3 rates, a stage velocity, Omega (n each)
 * and a stage configuration (n + 1) */
#define STEP_SIZE(n) (10L * (n) + (n) + 1L)
#define LOOP_SIZE(n) (8L * (n) + 6L)

long rd_workspace_size(int n)
{
    return CONTROL_SIZE(n) + STEP_SIZE(n) + LOOP_SIZE(n);
}

static int all_finite(const double *x, int n)
{
    double sum = 0.0;
    for (int i = 0; i < n; ++i)
        sum += x[i];
    if (isfinite(sum))
        return 1;
    for (int i = 0; i < n; ++i)
        if (!isfinite(x[i]))
            return 0;
    return 1; /* the sum overflowed, every term is finite */
}

/* Calls through the uniform kernel signature of robodyn_abi.h. */
static void call_1_1(rd_kernel k, const double *a, const double *p, double *out)
{
    const double *in[1] = {a};
    double *const o[1] = {out};
    (void)k(in, p, o);
}

static void call_2_1(rd_kernel k, const double *a, const double *b, const double *p, double *out)
{
    const double *in[2] = {a, b};
    double *const o[1] = {out};
    (void)k(in, p, o);
}

static int call_4_1(rd_kernel k, const double *a, const double *b, const double *c, const double *h,
                    const double *p, double *out)
{
    const double *in[4] = {a, b, c, h};
    double *const o[1] = {out};
    return k(in, p, o);
}

/* ------------------------------------------------------------------ references */

/* Minimum-jerk blend s(u) = 10u^3 - 15u^4 + 6u^5 on u in [0, 1], with ds/du and d2s/du2. */
static void quintic_blend(double u, double *s, double *ds, double *dds)
{
    if (u <= 0.0) {
        *s = *ds = *dds = 0.0;
        return;
    }
    if (u >= 1.0) {
        *s = 1.0;
        *ds = *dds = 0.0;
        return;
    }
    double u2 = u * u, u3 = u2 * u;
    *s = u3 * (10.0 + u * (-15.0 + 6.0 * u));
    *ds = u2 * (30.0 + u * (-60.0 + 30.0 * u));
    *dds = u * (60.0 + u * (-180.0 + 120.0 * u));
}

void rd_reference_eval(const rd_reference *ref, int n, double t, double *q, double *qd, double *qdd)
{
    switch (ref->kind) {
    case RD_REF_STEP: {
        const double *target = t >= ref->t0 ? ref->b : ref->a;
        for (int i = 0; i < n; ++i) {
            q[i] = target[i];
            qd[i] = qdd[i] = 0.0;
        }
        return;
    }
    case RD_REF_SINE:
        for (int i = 0; i < n; ++i) {
            double w = ref->omega[i], angle = w * t + ref->phase[i];
            double s = sin(angle), c = cos(angle);
            q[i] = ref->a[i] + ref->b[i] * s;
            qd[i] = ref->b[i] * w * c;
            qdd[i] = -ref->b[i] * w * w * s;
        }
        return;
    case RD_REF_QUINTIC: {
        double T = ref->duration, s, ds, dds;
        quintic_blend((t - ref->t0) / T, &s, &ds, &dds);
        for (int i = 0; i < n; ++i) {
            double delta = ref->b[i] - ref->a[i];
            q[i] = ref->a[i] + delta * s;
            qd[i] = delta * ds / T;
            qdd[i] = delta * dds / (T * T);
        }
        return;
    }
    default: /* RD_REF_HOLD */
        for (int i = 0; i < n; ++i) {
            q[i] = ref->a[i];
            qd[i] = qdd[i] = 0.0;
        }
        return;
    }
}

/* ------------------------------------------------------------------ control laws */

static void mat_vec(const double *A, const double *x, int n, double *y)
{
    for (int i = 0; i < n; ++i) {
        double acc = 0.0;
        for (int j = 0; j < n; ++j)
            acc += A[i * n + j] * x[j];
        y[i] = acc;
    }
}

int rd_control(const rd_controller *ctrl, const double *q, const double *qd, const double *q_r,
               const double *qd_r, const double *qdd_r, double *tau, double *work)
{
    const rd_model *m = ctrl->model;
    int n = m->n;
    double *matrix = work;            /* n x n */
    double *v = work + 2L * n * n;    /* 6 vectors of n */
    double *a = v + n, *s = a + n, *tmp = s + n, *f_measured = tmp + n, *f_reference = f_measured + n;
    const double *kp = ctrl->kp, *kd = ctrl->kd;

    switch (ctrl->kind) {
    case RD_CTRL_NONE:
        for (int i = 0; i < n; ++i)
            tau[i] = 0.0;
        break;
    case RD_CTRL_PD:
    case RD_CTRL_PD_GRAVITY:
        if (ctrl->kind == RD_CTRL_PD_GRAVITY)
            call_1_1(m->gravity, q, m->p, tau);
        else
            for (int i = 0; i < n; ++i)
                tau[i] = 0.0;
        for (int i = 0; i < n; ++i)
            tau[i] += kp[i] * (q_r[i] - q[i]) + kd[i] * (qd_r[i] - qd[i]);
        break;
    case RD_CTRL_COMPUTED_TORQUE:
        /* One inverse-dynamics call: M(q) a + C(q, qd) qd + g(q) + friction(qd). */
        for (int i = 0; i < n; ++i)
            a[i] = qdd_r[i] + kd[i] * (qd_r[i] - qd[i]) + kp[i] * (q_r[i] - q[i]);
        (void)call_4_1(m->inverse_dynamics, q, qd, a, NULL, m->p, tau);
        break;
    case RD_CTRL_SLOTINE_LI:
        /* M a + C(q, qd) v + g + friction = ID(q, qd, a) + C(q, qd) (v - qd) = ID(q, qd, a) - C s. */
        for (int i = 0; i < n; ++i) {
            double e = q_r[i] - q[i], ed = qd_r[i] - qd[i];
            v[i] = qd_r[i] + kp[i] * e;
            a[i] = qdd_r[i] + kp[i] * ed;
            s[i] = qd[i] - v[i];
        }
        (void)call_4_1(m->inverse_dynamics, q, qd, a, NULL, m->p, tau);
        call_2_1(m->coriolis_matrix, q, qd, m->p, matrix);
        mat_vec(matrix, s, n, tmp);
        for (int i = 0; i < n; ++i)
            tau[i] -= tmp[i] + kd[i] * s[i];
        break;
    case RD_CTRL_STATE_FEEDBACK:
        if (ctrl->gain == NULL || ctrl->tau_ref == NULL)
            return RD_ERR_ARGUMENT;
        for (int i = 0; i < n; ++i) {
            const double *row = ctrl->gain + 2L * n * i;
            double acc = ctrl->tau_ref[i];
            for (int j = 0; j < n; ++j)
                acc += row[j] * (q_r[j] - q[j]) + row[n + j] * (qd_r[j] - qd[j]);
            tau[i] = acc;
        }
        break;
    default:
        return RD_ERR_ARGUMENT;
    }
    if (ctrl->friction_at_reference
        && (ctrl->kind == RD_CTRL_COMPUTED_TORQUE || ctrl->kind == RD_CTRL_SLOTINE_LI)) {
        call_1_1(m->friction, qd, m->p, f_measured);
        call_1_1(m->friction, qd_r, m->p, f_reference);
        for (int i = 0; i < n; ++i)
            tau[i] += f_reference[i] - f_measured[i];
    }
    if (ctrl->tau_limit != NULL)
        for (int i = 0; i < n; ++i) {
            double limit = ctrl->tau_limit[i];
            tau[i] = tau[i] > limit ? limit : (tau[i] < -limit ? -limit : tau[i]);
        }
    return all_finite(tau, n) ? RD_OK : RD_ERR_NONFINITE;
}

/* ------------------------------------------------------------------ floating base */

/* A floating base's step is robodyn.floating_step.ManifoldStepper's, operation for operation (same order of
 * evaluation, libm's sin, cos and pow as Python's math module), so the two agree to rounding. */

/* numpy.cross(a, b) */
static void cross3(const double *a, const double *b, double *out)
{
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

/* [omega, v] = ad_omega v on se(3), twists as (linear, angular): floating_step._bracket. */
static void bracket(const double *omega, const double *v, double *out)
{
    double a[3], b[3];
    cross3(omega + 3, v, a);
    cross3(omega, v + 3, b);
    cross3(omega + 3, v + 3, out + 3);
    for (int i = 0; i < 3; ++i)
        out[i] = a[i] + b[i];
}

/* The rate of the local coordinates Omega at velocity v: dexp^-1_{-Omega}(v) on the base's twist truncated
 * after 1/12 [Omega, [Omega, v]] (enough for order 4), v on the joints. floating_step.ManifoldStepper._rate. */
static void dexp_inverse(const double *omega, const double *v, int n, double *out)
{
    double first[6], second[6];
    bracket(omega, v, first);
    bracket(omega, first, second);
    for (int i = 0; i < 6; ++i)
        out[i] = v[i] + (0.5 * first[i] + second[i] / 12.0);
    for (int i = 6; i < n; ++i)
        out[i] = v[i];
}

/* out = q (+) step: the base pose T exp(step[0..6)), the joints q_J + step[6..n); robot.integrate of one
 * configuration (floating_base._integrate_one), the quaternion renormalised and kept in q's hemisphere.
 * out may be q. */
static void se3_integrate(const double *q, const double *step, int n, double *out)
{
    const double x = q[3], y = q[4], z = q[5], w = q[6];
    const double wx = step[3], wy = step[4], wz = step[5];
    const double vx = step[0], vy = step[1], vz = step[2];
    const double theta = sqrt(wx * wx + wy * wy + wz * wz);
    double c;
    if (theta < 1e-2) { /* the series of floating_base._coefficients, below its _SERIES_ANGLE */
        double t2 = theta * theta;
        c = 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0 - pow(t2, 3.0) / 362880.0;
    } else {
        c = (theta - sin(theta)) / pow(theta, 3.0);
    }
    const double sine_half = theta > 0.0 ? sin(0.5 * theta) / (0.5 * theta) : 1.0;
    const double b = 0.5 * sine_half * sine_half; /* (1 - cos theta) / theta^2 by the half angle */
    const double half = 0.5 * sine_half;          /* sin(theta / 2) / theta */
    const double dx = half * wx, dy = half * wy, dz = half * wz, dw = cos(0.5 * theta);
    double r[4] = {w * dx + x * dw + y * dz - z * dy, w * dy - x * dz + y * dw + z * dx,
                   w * dz + x * dy - y * dx + z * dw, w * dw - x * dx - y * dy - z * dz};
    const double norm = sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2] + r[3] * r[3]);
    for (int i = 0; i < 4; ++i)
        r[i] /= norm;
    if (r[0] * x + r[1] * y + r[2] * z + r[3] * w < 0.0) /* q and -q are one rotation: no jumps */
        for (int i = 0; i < 4; ++i)
            r[i] = -r[i];
    /* V(omega) nu = nu + b omega x nu + c omega x (omega x nu) */
    const double cx = wy * vz - wz * vy, cy = wz * vx - wx * vz, cz = wx * vy - wy * vx;
    const double ex = wy * cz - wz * cy, ey = wz * cx - wx * cz, ez = wx * cy - wy * cx;
    const double delta[3] = {vx + b * cx + c * ex, vy + b * cy + c * ey, vz + b * cz + c * ez};
    const double R[9] = {1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                         2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                         2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)};
    for (int i = 0; i < 3; ++i)
        out[i] = q[i] + (R[3 * i] * delta[0] + R[3 * i + 1] * delta[1] + R[3 * i + 2] * delta[2]);
    for (int i = 0; i < 4; ++i)
        out[3 + i] = r[i];
    for (int i = 6; i < n; ++i)
        out[i + 1] = q[i + 1] + step[i];
}

/* floating_step.ManifoldStepper._check: a velocity beyond RD_DIVERGED, or not finite (the comparison is false
 * for NaN). */
static int diverged(const double *v, int n)
{
    for (int i = 0; i < n; ++i)
        if (!(fabs(v[i]) <= RD_DIVERGED))
            return 1;
    return 0;
}

/* One step of a floating base: ManifoldStepper.step without contacts. */
static int floating_step(const rd_model *plant, int integrator, double dt, double *q, double *qd,
                         const double *tau, const double *h, double *work, double *qdd0)
{
    int n = plant->n;
    const double *p = plant->p;
    double *a1 = work, *a2 = a1 + n, *a3 = a2 + n, *a4 = a3 + n; /* accelerations */
    double *k2 = a4 + n, *k3 = k2 + n, *k4 = k3 + n;              /* rates of Omega; k1 = qd */
    double *vs = k4 + n, *omega = vs + n, *qs = omega + n;         /* stage velocity, Omega, q (+) Omega */
    const double half = 0.5 * dt, sixth = dt / 6.0;

    if (call_4_1(plant->forward_dynamics, q, qd, tau, h, p, a1) != 0)
        return RD_ERR_SINGULAR;
    if (qdd0 != NULL)
        memcpy(qdd0, a1, (size_t)n * sizeof(double));
    if (integrator == RD_SEMI_IMPLICIT_EULER) {
        for (int i = 0; i < n; ++i)
            qd[i] = qd[i] + dt * a1[i];
        if (diverged(qd, n))
            return RD_ERR_DIVERGED;
        for (int i = 0; i < n; ++i)
            omega[i] = dt * qd[i];
        se3_integrate(q, omega, n, q);
        return RD_OK;
    }
    {
        /* stages 2 to 4: Omega = c k_prev on the manifold, velocity qd + c a_prev */
        const double *k_prev[3] = {qd, k2, k3}, *a_prev[3] = {a1, a2, a3};
        double *k_next[3] = {k2, k3, k4}, *a_next[3] = {a2, a3, a4};
        const double c[3] = {half, half, dt};
        for (int stage = 0; stage < 3; ++stage) {
            for (int i = 0; i < n; ++i) {
                omega[i] = c[stage] * k_prev[stage][i];
                vs[i] = qd[i] + c[stage] * a_prev[stage][i];
            }
            dexp_inverse(omega, vs, n, k_next[stage]);
            se3_integrate(q, omega, n, qs);
            if (call_4_1(plant->forward_dynamics, qs, vs, tau, h, p, a_next[stage]) != 0)
                return RD_ERR_SINGULAR;
        }
    }
    /* Omega of the whole step before qd (k1) is overwritten by the new velocity */
    for (int i = 0; i < n; ++i) {
        omega[i] = sixth * (qd[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
        qd[i] = qd[i] + sixth * (a1[i] + 2.0 * a2[i] + 2.0 * a3[i] + a4[i]);
    }
    if (diverged(qd, n))
        return RD_ERR_DIVERGED;
    se3_integrate(q, omega, n, q);
    return RD_OK;
}

/* ------------------------------------------------------------------ integrators */

int rd_step(const rd_model *plant, int integrator, double dt, int substeps, double *q, double *qd,
            const double *tau, const double *h, double *work, double *qdd0)
{
    int n = plant->n;
    const double *p = plant->p;
    double *k1 = work, *k2 = k1 + n, *k3 = k2 + n, *k4 = k3 + n; /* accelerations */
    double *v2 = k4 + n, *v3 = v2 + n, *v4 = v3 + n;              /* velocities at stages 2-4 */
    double *qs = v4 + n, *qds = qs + n;                            /* stage state */

    if (!(dt > 0.0) || substeps < 1)
        return RD_ERR_ARGUMENT;
    if (integrator != RD_EULER && integrator != RD_SEMI_IMPLICIT_EULER && integrator != RD_RK4)
        return RD_ERR_ARGUMENT;
    if (plant->floating) {
        if (integrator == RD_EULER || n < 6) /* robodyn.floating_step.MANIFOLD_INTEGRATORS: rk4, semi-implicit */
            return RD_ERR_ARGUMENT;
        for (int step = 0; step < substeps; ++step) {
            int status = floating_step(plant, integrator, dt, q, qd, tau, h, work, step == 0 ? qdd0 : NULL);
            if (status != RD_OK)
                return status;
            if (!all_finite(q, n + 1))
                return RD_ERR_NONFINITE;
        }
        return RD_OK;
    }
    for (int step = 0; step < substeps; ++step) {
        /* Every method starts from the acceleration at the current state. */
        if (call_4_1(plant->forward_dynamics, q, qd, tau, h, p, k1) != 0)
            return RD_ERR_SINGULAR;
        if (step == 0 && qdd0 != NULL)
            memcpy(qdd0, k1, (size_t)n * sizeof(double));
        switch (integrator) {
        case RD_EULER:
            for (int i = 0; i < n; ++i) {
                q[i] += dt * qd[i];
                qd[i] += dt * k1[i];
            }
            break;
        case RD_SEMI_IMPLICIT_EULER: /* symplectic: the position update uses the new velocity */
            for (int i = 0; i < n; ++i) {
                qd[i] += dt * k1[i];
                q[i] += dt * qd[i];
            }
            break;
        case RD_RK4: {
            double half = 0.5 * dt;
            for (int i = 0; i < n; ++i) {
                qs[i] = q[i] + half * qd[i];
                v2[i] = qds[i] = qd[i] + half * k1[i];
            }
            if (call_4_1(plant->forward_dynamics, qs, qds, tau, h, p, k2) != 0)
                return RD_ERR_SINGULAR;
            for (int i = 0; i < n; ++i) {
                qs[i] = q[i] + half * v2[i];
                v3[i] = qds[i] = qd[i] + half * k2[i];
            }
            if (call_4_1(plant->forward_dynamics, qs, qds, tau, h, p, k3) != 0)
                return RD_ERR_SINGULAR;
            for (int i = 0; i < n; ++i) {
                qs[i] = q[i] + dt * v3[i];
                v4[i] = qds[i] = qd[i] + dt * k3[i];
            }
            if (call_4_1(plant->forward_dynamics, qs, qds, tau, h, p, k4) != 0)
                return RD_ERR_SINGULAR;
            for (int i = 0; i < n; ++i) {
                q[i] += dt / 6.0 * (qd[i] + 2.0 * v2[i] + 2.0 * v3[i] + v4[i]);
                qd[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
            }
            break;
        }
        }
        if (!all_finite(q, n) || !all_finite(qd, n))
            return RD_ERR_NONFINITE;
    }
    return RD_OK;
}

/* ------------------------------------------------------------------ clocks */

double rd_monotonic(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* ------------------------------------------------------------------ closed loop */

int rd_simulate(const rd_model *plant, const rd_controller *ctrl, const rd_reference *ref,
                const rd_sim_config *config, const rd_trajectory *out, double *work, long *failed_tick)
{
    int n = plant->n, nq = RD_NQ(plant);
    double *control_work = work;
    double *step_work = work + CONTROL_SIZE(n);
    double *q_r = step_work + STEP_SIZE(n);
    double *qd_r = q_r + n, *qdd_r = qd_r + n, *tau = qdd_r + n, *applied = tau + n, *qdd = applied + n;
    double dt = config->period / (double)config->substeps;
    int status = RD_OK;
    long k;

    *failed_tick = -1;
    if (ctrl->model->n != n || !(config->period > 0.0) || config->substeps < 1 || config->ticks < 0
        || config->first_sample < 0 || config->end_sample > config->ticks + 1
        || (plant->floating && ctrl->kind != RD_CTRL_NONE))
        return RD_ERR_ARGUMENT;
    for (k = config->first_sample; k < config->end_sample; ++k) {
        double t = (double)k * config->period; /* no accumulated rounding */
        double *q = out->q + k * nq, *qd = out->qd + k * n;
        const double *h = config->wrench ? config->wrench + k * config->wrench_stride : NULL;
        double started = config->measure_time ? rd_monotonic() : 0.0;

        rd_reference_eval(ref, n, t, q_r, qd_r, qdd_r);
        status = rd_control(ctrl, q, qd, q_r, qd_r, qdd_r, tau, control_work);
        if (status != RD_OK)
            goto fail;
        if (config->actuation)
            for (int i = 0; i < n; ++i)
                tau[i] *= config->actuation[i];
        for (int i = 0; i < n; ++i)
            applied[i] = tau[i];
        if (config->disturbance) {
            const double *d = config->disturbance + k * config->disturbance_stride;
            for (int i = 0; i < n; ++i)
                applied[i] += d[i];
        }
        if (k < config->ticks) {
            memcpy(q + nq, q, (size_t)nq * sizeof(double));
            memcpy(qd + n, qd, (size_t)n * sizeof(double));
            status = rd_step(plant, config->integrator, dt, config->substeps, q + nq, qd + n, applied, h, step_work,
                             qdd);
        } else if (call_4_1(plant->forward_dynamics, q, qd, applied, h, plant->p, qdd) != 0) { /* last sample */
            status = RD_ERR_SINGULAR;
        }
        if (status != RD_OK)
            goto fail;
        if (config->measure_time && out->compute_time)
            out->compute_time[k] = rd_monotonic() - started;

        if (out->qdd)
            memcpy(out->qdd + k * n, qdd, (size_t)n * sizeof(double));
        if (out->tau)
            memcpy(out->tau + k * n, tau, (size_t)n * sizeof(double));
        if (out->q_ref) {
            memcpy(out->q_ref + k * n, q_r, (size_t)n * sizeof(double));
            memcpy(out->qd_ref + k * n, qd_r, (size_t)n * sizeof(double));
            memcpy(out->qdd_ref + k * n, qdd_r, (size_t)n * sizeof(double));
        }
    }
    return RD_OK;
fail:
    *failed_tick = k;
    return status;
}
