/*
 * robodyn_abi.h: what a generated robot module gives the robodyn runtime.
 *
 * A robot module (built by `python -m codegen` or `robodyn.load`) holds the robot's
 * generated C and one constant rd_robot table, exported as a PyCapsule named
 * "robodyn.rd_robot:<hash of this file>". The runtime (robodyn._native, compiled once
 * at `pip install`) checks the capsule name, then calls the routines only through
 * this table: the argument checks, batches, control laws and the simulation loop
 * live in the runtime, not in every robot module.
 *
 * Every routine has one uniform signature:
 *
 *     int kernel(const double *const *in, const double *p, double *const *out);
 *
 * in[k] is the k-th array argument (n_inputs of them, in_size[k] doubles each; an
 * optional argument may be NULL and then reads as zeros), p the parameter vector
 * (n_params doubles) and out[k] the k-th output (row-major, out_shape[k] doubles).
 * A kernel returns 0, or nonzero when it cannot produce a result (forward dynamics:
 * the mass matrix is not positive definite). Kernels keep no state, allocate nothing
 * and may run concurrently; outputs must not overlap inputs.
 *
 * The meaning of each routine (its name, argument names and documentation) is the
 * runtime's routine table (robodyn/routines.py); this file only fixes the layout.
 */
#ifndef ROBODYN_ABI_H
#define ROBODYN_ABI_H

#ifdef __cplusplus
extern "C" {
#endif

#define RD_MAX_INPUTS 6
#define RD_MAX_OUTPUTS 4

typedef int (*rd_kernel)(const double *const *in, const double *p, double *const *out);

typedef struct {
    const char *name;                    /* routine name without the robot prefix, e.g. "mass_matrix" */
    rd_kernel kernel;
    int n_inputs;
    int in_size[RD_MAX_INPUTS];          /* doubles per input, for one state */
    int n_outputs;
    int out_rank[RD_MAX_OUTPUTS];        /* 0 scalar, 1 vector, 2 matrix, 3 stack of matrices */
    int out_shape[RD_MAX_OUTPUTS][3];    /* sizes (1 where the rank is lower) */
    long operations;                     /* arithmetic operations and calls after CSE: the cost */
} rd_routine;

typedef struct {
    const char *robot;                   /* robot name, the prefix of every C symbol */
    int n;                               /* joints (degrees of freedom) */
    int n_params;                        /* length of the parameter vector p */
    const double *param_defaults;        /* n_params values (NULL when n_params is 0) */
    const char *metadata_json;           /* joint names, types, limits, parameters, versions... */
    int n_routines;
    const rd_routine *routines;
} rd_robot;

#ifdef __cplusplus
}
#endif
#endif
