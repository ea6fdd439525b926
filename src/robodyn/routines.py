"""The routine table: every compiled routine of a robot, declared once.

Each entry gives a routine's C name, its ``Robot`` method, its arguments, its
outputs (shapes in terms of the robot's dimensions), its documentation and its
cost class. Everything else is derived from this list:

* the generator (``codegen``) emits one C function per entry for which the model
  stage defines a value, and lists them in the robot module's ``rd_robot`` table
  (``native/robodyn_abi.h``);
* ``robodyn.Robot`` gets one real method per entry (name, signature, docstring),
  installed on the class by ``install`` (``help(robodyn.Robot)`` lists them);
* the post-build self-check compares every compiled routine with its symbolic value;
* the benchmarks time every routine;
* ``robot.pyi``'s routine section is rendered by ``render_stub`` (a test keeps it current).

Adding a routine: an entry here, and its definition in the model stage
(``codegen/model/routines.py``). Nothing else.

Conventions of every routine method: one state of shape (n,) per argument, or a
batch of shape (N, n) (results get a leading N); n is the number of degrees of freedom and
positions have nq of them (nq = n, but n + 1 for a floating base: docs/floating_base.md); ``out=`` a preallocated float64
array of the result's shape (then nothing is allocated; for several outputs, a
tuple of arrays); inputs float64, C-contiguous and finite (lists are converted,
anything else raises TypeError or ValueError).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = ["Argument", "Output", "Routine", "TABLE", "COST_CLASSES", "register", "table_fingerprint",
           "render_stub", "write_stub"]

#: How a routine's work grows with the number of joints n along the recursive route
#: (the Lagrange route's closed forms grow faster). The GIL policy does not use it: it
#: uses each compiled routine's measured operation count.
COST_CLASSES = ("O(1)", "O(n)", "O(n^2)", "O(n^3)")


@dataclass(frozen=True)
class Argument:
    """An array argument. ``size`` is a dimension name ("n", "nq") or a number ("6")."""

    name: str
    size: str
    doc: str
    optional: bool = False  # may be None: the routine then reads zeros


@dataclass(frozen=True)
class Output:
    """An output; ``shape`` () is a scalar (a float for one state)."""

    shape: tuple[str, ...]
    doc: str


@dataclass(frozen=True)
class Routine:
    name: str  # C name, prefixed by the robot's: rr_mass_matrix
    method: str  # Robot method
    arguments: tuple[Argument, ...]
    outputs: tuple[Output, ...]
    doc: str
    cost: str
    failure: str | None = None  # what a nonzero status of the C routine means (None: it cannot fail)

    def __post_init__(self):
        if self.cost not in COST_CLASSES:
            raise ValueError(f"routine {self.name}: cost {self.cost!r} is not one of {COST_CLASSES}")
        names = [a.name for a in self.arguments]
        if len(set(names)) != len(names) or "out" in names:
            raise ValueError(f"routine {self.name}: argument names must be distinct and not 'out'")
        required = [not a.optional for a in self.arguments]
        if required != sorted(required, reverse=True):
            raise ValueError(f"routine {self.name}: optional arguments must come last")
        if not self.outputs:
            raise ValueError(f"routine {self.name}: needs an output")
        if any(len(o.shape) > 3 for o in self.outputs):
            raise ValueError(f"routine {self.name}: outputs have at most three dimensions")

    @property
    def n_required(self) -> int:
        return sum(not a.optional for a in self.arguments)

    def shape(self, output: Output, dims: dict[str, int]) -> tuple[int, ...]:
        """An output's shape for one state, with the robot's dimensions."""
        return tuple(_size(s, dims) for s in output.shape)

    def docstring(self) -> str:
        """The method's docstring: summary, arguments, result, conventions."""
        lines = [self.doc, ""]
        lines += ["Arguments (one state, or a batch with a leading dimension N):"] if self.arguments else ["No arguments."]
        lines += [f"    {a.name} ({a.size},): {a.doc}" + (" (optional)" if a.optional else "") for a in self.arguments]
        if len(self.outputs) == 1:
            output = self.outputs[0]
            shape = "a float ((N,) for a batch)" if not output.shape else _shape_text(output.shape)
            lines += ["", f"Returns {shape}: {output.doc}"]
        else:
            lines += ["", "Returns a tuple:"]
            lines += [f"    {_shape_text(o.shape) if o.shape else 'a float'}: {o.doc}" for o in self.outputs]
        lines += ["", "out: a preallocated float64 array of the result's shape (a tuple of arrays for several "
                      "outputs); the call then allocates nothing and returns it."]
        if self.failure:
            lines += [f"Raises ValueError when {self.failure}."]
        lines += [f"Cost class: {self.cost} along the recursive route."]
        return "\n".join(lines)


def _shape_text(shape: tuple[str, ...]) -> str:
    return f"({shape[0]},)" if len(shape) == 1 else f"({', '.join(shape)})"


def _size(size: str, dims: dict[str, int]) -> int:
    return int(size) if size.isdigit() else dims[size]


#: Why the base-parameter routines can fail (a fixed base's base parameters can depend on gravity's direction).
_TILTED = ("gravity, set at run time, is not parallel to the gravity the base parameters were derived for "
           "(Robot.base_parameter_gravity); regressor() holds for any gravity")
_Q = Argument("q", "nq", "joint positions [rad or m]; a floating base's pose first (x y z, quaternion x y z w)")
_QD = Argument("qd", "n", "joint velocities; a floating base's first (linear, angular; base frame)")
_QDD = Argument("qdd", "n", "joint accelerations; a floating base's first (the derivative of its velocity)")
_TAU = Argument("tau", "n", "joint torques or forces; a floating base's wrench first (force, moment; base frame)")
_QDR = Argument("qdr", "n", "reference velocity (adaptive control: qd_desired - Lambda (q - q_desired))")
_QDDR = Argument("qddr", "n", "reference acceleration (its time derivative)")
_X = Argument("x", "e", "end-effector (task) coordinates of a closed chain: the in-plane coordinates of its "
                        "platform point")
_QT = Argument("qt", "t", "positions of every joint of a closed chain's virtual tree (actuated and passive, "
                          "description order)")
_QTD = Argument("qtd", "t", "velocities of every joint of the virtual tree")
_H = Argument("h", "6", "wrench the environment exerts on the tool origin: force, then moment, base frame",
              optional=True)

TABLE: tuple[Routine, ...] = (
    Routine("mass_matrix", "M", (_Q,), (Output(("n", "n"), "M(q), symmetric positive definite"),),
            "Joint-space inertia matrix M(q).", "O(n^2)"),
    Routine("coriolis_matrix", "C", (_Q, _QD), (Output(("n", "n"), "C(q, qd)"),),
            "Coriolis and centrifugal matrix C(q, qd) from Christoffel symbols: Mdot - 2C is skew-symmetric.",
            "O(n^2)"),
    Routine("gravity", "g", (_Q,), (Output(("n",), "g(q) = dP/dq"),), "Gravity torques g(q).", "O(n)"),
    Routine("friction", "friction", (_QD,), (Output(("n",), "Fv qd + Fs sgn(qd)"),),
            "Joint friction torques: viscous plus Coulomb (sgn(0) = 0).", "O(n)"),
    Routine("nonlinear_effects", "nonlinear_effects", (_Q, _QD), (Output(("n",), "C(q, qd) qd + g(q) + friction"),),
            "Bias torques: Coriolis, centrifugal, gravity and friction.", "O(n)"),
    Routine("inverse_dynamics", "inverse_dynamics", (_Q, _QD, _QDD, _H),
            (Output(("n",), "tau = M qdd + C qd + g + friction - J^T h"),),
            "Inverse dynamics: the joint torques that produce qdd.", "O(n)"),
    Routine("forward_dynamics", "forward_dynamics", (_Q, _QD, _TAU, _H),
            (Output(("n",), "qdd solving M qdd = tau + J^T h - C qd - g - friction"),),
            "Forward dynamics: joint accelerations under the torques tau (no matrix inverse).", "O(n^2)",
            failure="the mass matrix is not positive definite at the state (check the parameters)"),
    Routine("inverse_dynamics_derivatives", "inverse_dynamics_derivatives", (_Q, _QD, _QDD),
            (Output(("n", "n"), "dtau/dq"), Output(("n", "n"), "dtau/dqd")),
            "Partial derivatives of the inverse dynamics (without the tool wrench): dtau/dq and dtau/dqd; dtau/dqdd "
            "is M(q). Coulomb friction's derivative is taken as zero (it does not exist at qd = 0).", "O(n^2)"),
    Routine("forward_dynamics_derivatives", "forward_dynamics_derivatives", (_Q, _QD, _TAU),
            (Output(("n", "n"), "dqdd/dq"), Output(("n", "n"), "dqdd/dqd"), Output(("n", "n"), "dqdd/dtau = M^-1")),
            "Partial derivatives of the forward dynamics (without the tool wrench): qdd = FD(q, qd, tau), then "
            "dqdd/dq = -M^-1 dtau/dq and dqdd/dqd = -M^-1 dtau/dqd with the inverse-dynamics derivatives at "
            "(q, qd, qdd), and dqdd/dtau = M^-1, from one factorisation of M (no inverse is differentiated). "
            "Coulomb friction's derivative is taken as zero (it does not exist at qd = 0).", "O(n^3)",
            failure="the mass matrix is not positive definite at the state (check the parameters)"),
    Routine("kinetic_energy", "kinetic_energy", (_Q, _QD), (Output((), "0.5 qd^T M(q) qd"),),
            "Kinetic energy.", "O(n)"),
    Routine("potential_energy", "potential_energy", (_Q,), (Output((), "gravitational potential energy"),),
            "Gravitational potential energy, zero with every link's centre of mass at the base origin height.",
            "O(n)"),
    Routine("tool_pose", "fk", (_Q,), (Output(("4", "4"), "homogeneous transform base -> tool"),),
            "Forward kinematics: pose of the tool frame in the base frame.", "O(n)"),
    Routine("tool_jacobian", "jacobian", (_Q,),
            (Output(("6", "n"), "linear velocity of the tool origin, then angular velocity (base frame)"),),
            "Geometric Jacobian of the tool frame.", "O(n)"),
    # Named frames (every link) and, for a floating base, the centre of mass and the centroidal momentum.
    Routine("frame_placements", "frame_placements", (_Q,),
            (Output(("f", "4", "4"), "pose of every frame in the world (frame_names order)"),),
            "Placements of every link frame (see frame_placement for one by name).", "O(n)"),
    Routine("frame_jacobians", "frame_jacobians", (_Q,),
            (Output(("f", "6", "n"), "per frame: linear velocity of its origin, then angular velocity, world axes"),),
            "Jacobians of every link frame, world-aligned at the frame's origin (Pinocchio's LOCAL_WORLD_ALIGNED; "
            "see frame_jacobian).", "O(n^2)"),
    Routine("frame_bias_accelerations", "frame_bias_accelerations", (_Q, _QD),
            (Output(("f", "6"), "per frame: Jdot qd, the classical acceleration of its origin and the angular "
                                "acceleration at qdd = 0 (world axes)"),),
            "Velocity-product accelerations of every link frame: [p''; w'] = J qdd + Jdot qd.", "O(n)"),
    Routine("center_of_mass", "center_of_mass", (_Q,), (Output(("3",), "position of the centre of mass, world"),),
            "Centre of mass of the whole robot (floating base).", "O(n)"),
    Routine("center_of_mass_jacobian", "center_of_mass_jacobian", (_Q,),
            (Output(("3", "n"), "Jc: velocity of the centre of mass = Jc qd (world axes)"),),
            "Jacobian of the centre of mass (floating base).", "O(n^2)"),
    Routine("centroidal_momentum_matrix", "centroidal_momentum_matrix", (_Q,),
            (Output(("6", "n"), "Ag: linear, then angular momentum about the centre of mass = Ag qd (world axes)"),),
            "Centroidal momentum matrix Ag (Orin & Goswami; Pinocchio's data.Ag), floating base.", "O(n^2)"),
    Routine("centroidal_momentum_bias", "centroidal_momentum_bias", (_Q, _QD),
            (Output(("6",), "Agdot qd: the rate of change of the centroidal momentum at qdd = 0"),),
            "Velocity-product term of the centroidal momentum's rate: hdot = Ag qdd + Agdot qd (floating base).",
            "O(n)"),
    # Identification (robodyn.identification): tau = Y pi, linear in the dynamic parameters pi.
    Routine("regressor", "regressor", (_Q, _QD, _QDD),
            (Output(("n", "p"), "Y with Y @ dynamic_parameters() = inverse_dynamics(q, qd, qdd)"),),
            "Inverse-dynamics regressor Y(q, qd, qdd): per link the ten barycentric parameters (inertia about the "
            "link origin, first moments, mass), per rotor its spin inertia, per joint viscous and Coulomb friction "
            "(names: dynamic_parameter_names).", "O(n^2)"),
    Routine("base_regressor", "base_regressor", (_Q, _QD, _QDD),
            (Output(("n", "b"), "the independent columns of Y: Y_base @ base_parameters() = inverse dynamics"),),
            "Base regressor: the columns of Y that are linearly independent (names: base_parameter_names).",
            "O(n^2)", failure=_TILTED),
    Routine("slotine_li_regressor", "slotine_li_regressor", (_Q, _QD, _QDR, _QDDR),
            (Output(("n", "b"), "Y_base(q, qd, qdr, qddr) @ base_parameters() = M qddr + C(q, qd) qdr + g + "
                                "friction(qd)"),),
            "Slotine-Li regressor on the base parameters, with the Christoffel C (Mdot - 2C skew): the model "
            "of adaptive control.", "O(n^2)", failure=_TILTED),
    Routine("dynamic_parameters", "dynamic_parameters", (),
            (Output(("p",), "the dynamic parameters at the current parameter values"),),
            "Dynamic parameters pi (the regressor's columns), from the current parameter values.", "O(n)"),
    Routine("base_parameter_matrix", "base_parameter_matrix", (),
            (Output(("b", "p"), "K: base_parameters() = K @ dynamic_parameters(), Y = Y_base @ K"),),
            "Base-parameter map K at the current parameter values (geometric parameters enter it).", "O(n^2)"),
    # Closed chains (docs/closed_chains.md): geometry with its modes, loop kinematics, the virtual tree.
    Routine("direct_geometry", "dgm_modes", (_Q,),
            (Output(("am", "e"), "end-effector coordinates, one row per assembly mode (NaN: cannot assemble)"),),
            "Direct geometric model in closed form for every assembly mode (closed chains; see dgm).", "O(n)"),
    Routine("inverse_geometry", "igm_modes", (_X,),
            (Output(("wm", "n"), "actuated coordinates, one row per working mode (NaN: out of reach)"),),
            "Inverse geometric model in closed form for every working mode (closed chains; see igm).", "O(n)"),
    Routine("passive_geometry", "passive_modes", (_Q,),
            (Output(("am", "np"), "passive joint positions, one row per assembly mode"),),
            "Passive joints' positions for every assembly mode (closed chains; see passive_positions).", "O(n)"),
    Routine("loop_matrices", "loop_matrices", (_Q,),
            (Output(("e", "e"), "A = dh/dx"), Output(("e", "n"), "B = dh/dq")),
            "First-order loop kinematics A xdot + B qdot = 0 of the loop equations h(x, q) = 0 in the task "
            "coordinates, at the build's assembly mode.", "O(n)"),
    Routine("task_jacobian", "task_jacobian", (_Q,), (Output(("e", "n"), "J = -A^-1 B: xdot = J qdot"),),
            "End-effector Jacobian of a closed chain in its task coordinates.", "O(n)"),
    Routine("task_jacobian_derivative", "task_jacobian_derivative", (_Q, _QD), (Output(("e", "n"), "dJ/dt"),),
            "Time derivative of the end-effector Jacobian.", "O(n)"),
    Routine("task_bias", "task_bias", (_Q, _QD), (Output(("e",), "b = Jdot qdot: xddot = J qddot + b"),),
            "Second-order term of the end-effector kinematics.", "O(n)"),
    Routine("passive_jacobian", "passive_jacobian", (_Q,), (Output(("np", "n"), "Jp: passive velocities = Jp qdot"),),
            "Jacobian of the passive joints' positions with respect to the actuated coordinates.", "O(n)"),
    Routine("passive_jacobian_derivative", "passive_jacobian_derivative", (_Q, _QD),
            (Output(("np", "n"), "dJp/dt"),), "Time derivative of the passive-joint Jacobian.", "O(n)"),
    Routine("singularity_measures", "singularity_measures", (_Q,),
            (Output(("4",), "det A (type 2), det B (type 1), and each normalised to [-1, 1]"),),
            "Singularity measures of a closed chain: zero on a type-2 (det A) or type-1 (det B) singularity; "
            "the normalised ones are products of sines of the angles that vanish there.", "O(n)"),
    Routine("tree_mass_matrix", "tree_M", (_QT,), (Output(("t", "t"), "M of the virtual tree"),),
            "Mass matrix of the virtual tree (every joint, the loops cut): the multiplier model's.", "O(n^2)"),
    Routine("tree_nonlinear_effects", "tree_nonlinear_effects", (_QT, _QTD),
            (Output(("t",), "C qtd + g + friction of the virtual tree"),),
            "Bias forces of the virtual tree.", "O(n)"),
    Routine("tree_potential_energy", "tree_potential_energy", (_QT,),
            (Output((), "gravitational potential energy of the virtual tree"),),
            "Potential energy of the virtual tree (the mechanism's when the loops are closed).", "O(n)"),
    Routine("loop_residual", "loop_residual", (_QT,), (Output(("k",), "h(qt), zero when the loops are closed"),),
            "Loop-closure equations of a closed chain in the tree's coordinates.", "O(n)"),
    Routine("loop_jacobian", "loop_jacobian", (_QT,), (Output(("k", "t"), "H = dh/dqt"),),
            "Jacobian of the loop-closure equations.", "O(n)"),
    Routine("loop_bias", "loop_bias", (_QT, _QTD), (Output(("k",), "Hdot qtd"),),
            "Second-order term of the loop-closure equations: H qtdd + Hdot qtd = 0 on the constraint.", "O(n)"),
)


def register(routine: Routine) -> None:
    """Append a routine to the table and give ``robodyn.Robot`` its method (robots built from then on
    have it when the model stage defines it). For extensions and tests; the built-in routines are
    declared in TABLE above."""
    global TABLE
    if any(r.name == routine.name or r.method == routine.method for r in TABLE):
        raise ValueError(f"routine {routine.name!r} or method {routine.method!r} already exists")
    TABLE = TABLE + (routine,)
    from .robot import Robot, install

    install(Robot, TABLE)


def table_fingerprint() -> str:
    """A hash of the table's layout (names, arguments, outputs): part of every robot's cache key."""
    layout = [(r.name, [(a.name, a.size, a.optional) for a in r.arguments], [o.shape for o in r.outputs],
               r.failure is not None) for r in TABLE]
    return hashlib.sha256(repr(layout).encode()).hexdigest()


def render_stub() -> str:
    """The routine methods of ``robodyn.Robot`` as stub text (the generated section of robot.pyi)."""
    lines = []
    for r in TABLE:
        params = ", ".join(["self"] + [f"{a.name}: ArrayLike" + (" | None = None" if a.optional else "")
                                       for a in r.arguments])
        if len(r.outputs) == 1:
            result = "np.ndarray | float" if not r.outputs[0].shape else "np.ndarray"
            out = "np.ndarray | None = None"
        else:
            result = "tuple[np.ndarray, ...]"
            out = "tuple[np.ndarray, ...] | None = None"
        lines.append(f"    def {r.method}({params}, out: {out}) -> {result}:")
        lines.append(f'        """{r.doc}"""')
    return "\n".join(lines) + "\n"


def write_stub() -> None:
    """Rewrite the generated section of robot.pyi from the table (a test checks it is current)."""
    from pathlib import Path

    path = Path(__file__).with_name("robot.pyi")
    text = path.read_text(encoding="utf-8")
    begin = text.index("\n", text.index("# BEGIN ROUTINES")) + 1
    end = text.index("    # END ROUTINES")
    path.write_text(text[:begin] + render_stub() + text[end:], encoding="utf-8")
    print(f"wrote {path}")

