/*
 * robodyn_sim: fixed-step simulation and joint-space control laws on top of one
 * robot's generated dynamics.
 *
 * This file and robodyn_sim.c are part of the runtime extension robodyn._native,
 * compiled once at `pip install`. They reach a robot only through the kernels of
 * its rd_robot table (robodyn_abi.h), so a controller may use another robot
 * module's model (a deliberately wrong one, say).
 * Nothing here allocates, keeps global state or calls back into Python: the
 * caller owns every array and a workspace of rd_workspace_size(n) doubles.
 *
 * Conventions: arrays are double, row-major; n is the number of joints;
 *   M(q) qdd + C(q, qd) qd + g(q) + friction(qd) = tau + J(q)^T h.
 * A floating base (rd_model.floating) follows Pinocchio's free flyer: q = (base position,
 * unit quaternion x y z w, joints) has nq = n + 1 values, qd = (base linear and angular
 * velocity in the base frame, joint rates) n; qd, qdd and tau have n, q has nq.
 */
#ifndef ROBODYN_SIM_H
#define ROBODYN_SIM_H

#include "robodyn_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One robot's dynamics and the parameter vector they are evaluated with: the kernels of
 * a robot module's rd_robot table (robodyn_abi.h) that the laws and integrators need. */
typedef struct {
    int n;
    int n_params;      /* length of p */
    const double *p;
    rd_kernel mass_matrix;       /* in: q              out: M (n x n) */
    rd_kernel coriolis_matrix;   /* in: q, qd          out: C (n x n) */
    rd_kernel gravity;           /* in: q              out: g */
    rd_kernel friction;          /* in: qd             out: friction torque */
    rd_kernel inverse_dynamics;  /* in: q, qd, qdd, h  out: tau */
    rd_kernel forward_dynamics;  /* in: q, qd, tau, h  out: qdd; nonzero if M is not positive definite */
    int floating;      /* 0: q has n values; 1: a floating base, q has nq = n + 1 (see above). Last, so that
                          an initialiser written before it existed leaves it 0 */
} rd_model;

/* The size of q for a model: n, or n + 1 with a floating base. */
#define RD_NQ(model) ((model)->floating ? (model)->n + 1 : (model)->n)

/* A floating base's run has diverged when a velocity leaves [-RD_DIVERGED, RD_DIVERGED] (rad/s or m/s;
 * robodyn.floating_step.DIVERGED). */
#define RD_DIVERGED 1e6

/* Status codes. */
enum {
    RD_OK = 0,
    RD_ERR_SINGULAR = 1,   /* forward dynamics failed: M(q) not positive definite */
    RD_ERR_NONFINITE = 2,  /* the state or a torque became NaN or infinite (the simulation diverged) */
    RD_ERR_ARGUMENT = 3,   /* unknown kind, non-positive step, n mismatch, a law or integrator a floating base
                              does not support */
    RD_ERR_DIVERGED = 4    /* a floating base's velocity left +-RD_DIVERGED or became NaN; rd_step leaves qd at
                              that velocity and q where the failed step started */
};

/* Desired motion q_r(t) with its first two derivatives. */
enum { RD_REF_HOLD = 0, RD_REF_STEP = 1, RD_REF_SINE = 2, RD_REF_QUINTIC = 3 };
typedef struct {
    int kind;
    double t0;          /* STEP: switching time; QUINTIC: start time */
    double duration;    /* QUINTIC: time from a to b (> 0) */
    const double *a;    /* HOLD, STEP, QUINTIC: start position; SINE: centre */
    const double *b;    /* STEP, QUINTIC: final position; SINE: amplitude */
    const double *omega; /* SINE: angular frequency [rad/s] */
    const double *phase; /* SINE: phase [rad] */
} rd_reference;

/* Joint-space control laws; e = q_r - q, ed = qd_r - qd.
 *   NONE             tau = 0
 *   PD               tau = Kp e + Kd ed
 *   PD_GRAVITY       tau = Kp e + Kd ed + g(q)
 *   COMPUTED_TORQUE  tau = M(q) (qdd_r + Kd ed + Kp e) + C(q, qd) qd + g(q) + friction(qd)
 *   SLOTINE_LI       v = qd_r + L e, a = qdd_r + L ed, s = qd - v,
 *                    tau = M(q) a + C(q, qd) v + g(q) + friction(qd) - K s
 *   STATE_FEEDBACK   tau = tau_ref + G [e; ed]   (G: n x 2n, row-major; an LQR about q_r, with tau_ref the
 *                    torque that holds the equilibrium; rows of passive joints are zero)
 * with diagonal gains (kp, kd) = (Kp, Kd), or (L, K) for SLOTINE_LI. The model terms
 * come from `model`, which may differ from the plant. With friction_at_reference set,
 * the friction term of COMPUTED_TORQUE and SLOTINE_LI is evaluated at qd_r instead of qd:
 * Coulomb friction's sign then follows the plan rather than a velocity that chatters
 * around zero. tau_limit (optional) saturates each joint symmetrically. */
enum { RD_CTRL_NONE = 0, RD_CTRL_PD = 1, RD_CTRL_PD_GRAVITY = 2, RD_CTRL_COMPUTED_TORQUE = 3,
       RD_CTRL_SLOTINE_LI = 4, RD_CTRL_STATE_FEEDBACK = 5 };
typedef struct {
    int kind;
    const rd_model *model;
    const double *kp;
    const double *kd;
    const double *tau_limit; /* NULL: no saturation */
    int friction_at_reference;
    const double *gain;      /* STATE_FEEDBACK: n x 2n */
    const double *tau_ref;   /* STATE_FEEDBACK: n */
} rd_controller;

/* A control law bound to its reference: what a compiled controller object carries. */
typedef struct {
    rd_controller controller;
    rd_reference reference;
} rd_law;

enum { RD_EULER = 0, RD_SEMI_IMPLICIT_EULER = 1, RD_RK4 = 2 };

typedef struct {
    double period;     /* control period [s]; the torque is held over each period */
    long ticks;        /* number of control periods to simulate */
    int integrator;    /* RD_EULER, RD_SEMI_IMPLICIT_EULER or RD_RK4 */
    int substeps;      /* integration steps per control period (>= 1) */
    const double *disturbance; /* joint torques added to the controller's, row k * disturbance_stride; NULL: none */
    long disturbance_stride;   /* 0: constant; n: one row per tick */
    const double *wrench;      /* wrench on the tool, 6 values, row k * wrench_stride; NULL: none */
    long wrench_stride;        /* 0: constant; 6: one row per tick */
    int measure_time;          /* record per-tick compute time (CLOCK_MONOTONIC) */
    long first_sample;         /* compute samples first_sample <= k < end_sample (0 and ticks + 1: all); */
    long end_sample;           /* a caller running in chunks can check for interrupts in between */
    const double *actuation;   /* n: 1 on a joint with a motor, 0 on a passive one, whose controller torque is
                                  dropped before the disturbance is added; NULL: every joint has a motor */
} rd_sim_config;

/* Samples k = 0..ticks (ticks + 1 rows, row k at t = k * period). q[0..nq) and qd[0..n)
 * hold the initial state on entry. Optional outputs may be NULL. tau is the motors' torque
 * (the controller's, zero on passive joints, before disturbance); qdd the acceleration under the applied torque and wrench. */
typedef struct {
    double *q, *qd;
    double *qdd, *tau;
    double *q_ref, *qd_ref, *qdd_ref;
    double *compute_time;      /* seconds per tick: controller + integration */
} rd_trajectory;

/* Doubles of workspace for n velocity coordinates, fixed or floating base. */
long rd_workspace_size(int n);

void rd_reference_eval(const rd_reference *ref, int n, double t, double *q, double *qd, double *qdd);

/* tau for the state (q, qd) and the reference sample (q_r, qd_r, qdd_r). */
int rd_control(const rd_controller *ctrl, const double *q, const double *qd, const double *q_r,
               const double *qd_r, const double *qdd_r, double *tau, double *work);

/* Advance (q, qd) in place by `substeps` steps of dt under constant tau and wrench h (may be NULL).
 * qdd0 (may be NULL) receives the acceleration at the initial state, which every method computes.
 * A floating base moves on SE(3) x R^n (robodyn.floating_step, the same arithmetic): RD_RK4 is
 * Runge-Kutta-Munthe-Kaas of order 4, RD_SEMI_IMPLICIT_EULER updates qd then moves q by q (+) dt qd;
 * RD_EULER is refused (RD_ERR_ARGUMENT). */
int rd_step(const rd_model *plant, int integrator, double dt, int substeps, double *q, double *qd,
            const double *tau, const double *h, double *work, double *qdd0);

/* Whole-horizon closed-loop simulation; on failure *failed_tick is the tick at which it stopped:
 * rows before it are complete, row k's outputs other than q and qd are unset, and later rows may
 * hold partial values. q's rows have RD_NQ(plant) values, the other arrays' n. A floating-base
 * plant runs only RD_CTRL_NONE (the joint-space laws read q as n joint positions). */
int rd_simulate(const rd_model *plant, const rd_controller *ctrl, const rd_reference *ref,
                const rd_sim_config *config, const rd_trajectory *out, double *work, long *failed_tick);

/* CLOCK_MONOTONIC in seconds (per-tick compute time). */
double rd_monotonic(void);

#ifdef __cplusplus
}
#endif
#endif
