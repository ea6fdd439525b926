"""Type information for robodyn.robot (the routine methods are installed at import time)."""

from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._native import RobotCore
from .options import BuildOptions

class Parameters(MutableMapping[str, float]):
    def __init__(self, robot: Robot, names: list[str], defaults: list[float]) -> None: ...
    def __getitem__(self, name: str) -> float: ...
    def __setitem__(self, name: str, value: float) -> None: ...
    def __delitem__(self, name: str) -> None: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def reset(self) -> None: ...
    @property
    def defaults(self) -> dict[str, float]: ...
    def as_array(self) -> np.ndarray: ...

class Robot(RobotCore):
    metadata: dict[str, Any]
    name: str
    joint_names: tuple[str, ...]
    joint_types: tuple[str, ...]
    source: Path | None
    options: BuildOptions
    manifest: dict[str, Any]
    selfcheck: dict[str, Any]
    params: Parameters
    def __init__(self, extension: Any, *, source: Path | None = ..., options: BuildOptions | None = ...,
                 manifest: dict | None = ..., selfcheck: dict | None = ..., cache_dir: Path | None = ...) -> None: ...
    @classmethod
    def from_extension(cls, extension: Any) -> Robot: ...
    @property
    def joint_limits(self) -> list[dict[str, float | None]]: ...
    @property
    def actuated(self) -> tuple[int, ...]: ...
    @property
    def passive(self) -> tuple[int, ...]: ...
    @property
    def n_actuated(self) -> int: ...
    @property
    def is_underactuated(self) -> bool: ...
    @property
    def actuated_joint_names(self) -> tuple[str, ...]: ...
    @property
    def actuation_matrix(self) -> np.ndarray: ...
    @property
    def coordinate_names(self) -> tuple[str, ...]: ...
    @property
    def nq(self) -> int: ...
    @property
    def nv(self) -> int: ...
    @property
    def is_floating_base(self) -> bool: ...
    @property
    def base_link(self) -> str | None: ...
    def neutral(self) -> np.ndarray: ...
    def integrate(self, q: ArrayLike, v: ArrayLike, dt: float = 1.0) -> np.ndarray: ...
    def difference(self, q0: ArrayLike, q1: ArrayLike) -> np.ndarray: ...
    def total_mass(self) -> float: ...
    @property
    def frame_names(self) -> tuple[str, ...]: ...
    def frame_index(self, frame: str | int) -> int: ...
    def frame_placement(self, q: ArrayLike, frame: str | int) -> np.ndarray: ...
    def frame_jacobian(self, q: ArrayLike, frame: str | int, reference: str = "world_aligned") -> np.ndarray: ...
    def frame_bias_acceleration(self, q: ArrayLike, qd: ArrayLike, frame: str | int) -> np.ndarray: ...
    def total_energy(self, q: ArrayLike, qd: ArrayLike) -> float | np.ndarray: ...
    def linearize(self, q: ArrayLike, qd: ArrayLike, tau: ArrayLike, dt: float | None = None) -> tuple[np.ndarray, np.ndarray]: ...
    def copy(self) -> Robot: ...
    @property
    def dimensions(self) -> dict[str, int]: ...
    @property
    def dynamic_parameter_names(self) -> tuple[str, ...]: ...
    @property
    def dynamic_parameter_layout(self) -> tuple[tuple[str, str, int, int], ...]: ...
    @property
    def base_parameter_names(self) -> tuple[str, ...]: ...
    @property
    def base_parameter_expressions(self) -> dict[str, str]: ...
    @property
    def base_parameter_columns(self) -> tuple[int, ...]: ...
    @property
    def known_zero_base_parameters(self) -> tuple[str, ...]: ...
    def base_parameters(self) -> np.ndarray: ...
    @property
    def is_closed_chain(self) -> bool: ...
    @property
    def is_constrained(self) -> bool: ...
    @property
    def assembly_mode(self) -> int: ...
    @property
    def modes(self) -> dict[str, Any]: ...
    @property
    def passive_joint_names(self) -> tuple[str, ...]: ...
    @property
    def tree_joint_names(self) -> tuple[str, ...]: ...
    @property
    def task_coordinates(self) -> tuple[str, ...]: ...
    @property
    def singularity_loci(self) -> tuple[str, ...]: ...
    def dgm(self, q: ArrayLike, mode: int | None = None) -> np.ndarray: ...
    def igm(self, x: ArrayLike, mode: tuple[int, ...] | None = None) -> np.ndarray: ...
    def passive_positions(self, q: ArrayLike, mode: int | None = None) -> np.ndarray: ...
    def tree_positions(self, q: ArrayLike, mode: int | None = None) -> np.ndarray: ...
    def tree_velocities(self, q: ArrayLike, qd: ArrayLike) -> np.ndarray: ...
    # BEGIN ROUTINES: generated from the table by robodyn.routines.write_stub(); do not edit.
    def M(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Joint-space inertia matrix M(q)."""
    def C(self, q: ArrayLike, qd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Coriolis and centrifugal matrix C(q, qd) from Christoffel symbols: Mdot - 2C is skew-symmetric."""
    def g(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Gravity torques g(q)."""
    def friction(self, qd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Joint friction torques: viscous plus Coulomb (sgn(0) = 0)."""
    def nonlinear_effects(self, q: ArrayLike, qd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Bias torques: Coriolis, centrifugal, gravity and friction."""
    def inverse_dynamics(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, h: ArrayLike | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Inverse dynamics: the joint torques that produce qdd."""
    def forward_dynamics(self, q: ArrayLike, qd: ArrayLike, tau: ArrayLike, h: ArrayLike | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Forward dynamics: joint accelerations under the torques tau (no matrix inverse)."""
    def inverse_dynamics_derivatives(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, out: tuple[np.ndarray, ...] | None = None) -> tuple[np.ndarray, ...]:
        """Partial derivatives of the inverse dynamics (without the tool wrench): dtau/dq and dtau/dqd; dtau/dqdd is M(q). Coulomb friction's derivative is taken as zero (it does not exist at qd = 0)."""
    def forward_dynamics_derivatives(self, q: ArrayLike, qd: ArrayLike, tau: ArrayLike, out: tuple[np.ndarray, ...] | None = None) -> tuple[np.ndarray, ...]:
        """Partial derivatives of the forward dynamics (without the tool wrench): qdd = FD(q, qd, tau), then dqdd/dq = -M^-1 dtau/dq and dqdd/dqd = -M^-1 dtau/dqd with the inverse-dynamics derivatives at (q, qd, qdd), and dqdd/dtau = M^-1, from one factorisation of M (no inverse is differentiated). Coulomb friction's derivative is taken as zero (it does not exist at qd = 0)."""
    def kinetic_energy(self, q: ArrayLike, qd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray | float:
        """Kinetic energy."""
    def potential_energy(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray | float:
        """Gravitational potential energy, zero with every link's centre of mass at the base origin height."""
    def fk(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Forward kinematics: pose of the tool frame in the base frame."""
    def jacobian(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Geometric Jacobian of the tool frame."""
    def frame_placements(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Placements of every link frame (see frame_placement for one by name)."""
    def frame_jacobians(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Jacobians of every link frame, world-aligned at the frame's origin (Pinocchio's LOCAL_WORLD_ALIGNED; see frame_jacobian)."""
    def frame_bias_accelerations(self, q: ArrayLike, qd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Velocity-product accelerations of every link frame: [p''; w'] = J qdd + Jdot qd."""
    def center_of_mass(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Centre of mass of the whole robot (floating base)."""
    def center_of_mass_jacobian(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Jacobian of the centre of mass (floating base)."""
    def centroidal_momentum_matrix(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Centroidal momentum matrix Ag (Orin & Goswami; Pinocchio's data.Ag), floating base."""
    def centroidal_momentum_bias(self, q: ArrayLike, qd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Velocity-product term of the centroidal momentum's rate: hdot = Ag qdd + Agdot qd (floating base)."""
    def regressor(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Inverse-dynamics regressor Y(q, qd, qdd): per link the ten barycentric parameters (inertia about the link origin, first moments, mass), per rotor its spin inertia, per joint viscous and Coulomb friction (names: dynamic_parameter_names)."""
    def base_regressor(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Base regressor: the columns of Y that are linearly independent (names: base_parameter_names)."""
    def slotine_li_regressor(self, q: ArrayLike, qd: ArrayLike, qdr: ArrayLike, qddr: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Slotine-Li regressor on the base parameters, with the Christoffel C (Mdot - 2C skew): the model of adaptive control."""
    def dynamic_parameters(self, out: np.ndarray | None = None) -> np.ndarray:
        """Dynamic parameters pi (the regressor's columns), from the current parameter values."""
    def base_parameter_matrix(self, out: np.ndarray | None = None) -> np.ndarray:
        """Base-parameter map K at the current parameter values (geometric parameters enter it)."""
    def dgm_modes(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Direct geometric model in closed form for every assembly mode (closed chains; see dgm)."""
    def igm_modes(self, x: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Inverse geometric model in closed form for every working mode (closed chains; see igm)."""
    def passive_modes(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Passive joints' positions for every assembly mode (closed chains; see passive_positions)."""
    def loop_matrices(self, q: ArrayLike, out: tuple[np.ndarray, ...] | None = None) -> tuple[np.ndarray, ...]:
        """First-order loop kinematics A xdot + B qdot = 0 of the loop equations h(x, q) = 0 in the task coordinates, at the build's assembly mode."""
    def task_jacobian(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """End-effector Jacobian of a closed chain in its task coordinates."""
    def task_jacobian_derivative(self, q: ArrayLike, qd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Time derivative of the end-effector Jacobian."""
    def task_bias(self, q: ArrayLike, qd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Second-order term of the end-effector kinematics."""
    def passive_jacobian(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Jacobian of the passive joints' positions with respect to the actuated coordinates."""
    def passive_jacobian_derivative(self, q: ArrayLike, qd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Time derivative of the passive-joint Jacobian."""
    def singularity_measures(self, q: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Singularity measures of a closed chain: zero on a type-2 (det A) or type-1 (det B) singularity; the normalised ones are products of sines of the angles that vanish there."""
    def tree_M(self, qt: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Mass matrix of the virtual tree (every joint, the loops cut): the multiplier model's."""
    def tree_nonlinear_effects(self, qt: ArrayLike, qtd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Bias forces of the virtual tree."""
    def tree_potential_energy(self, qt: ArrayLike, out: np.ndarray | None = None) -> np.ndarray | float:
        """Potential energy of the virtual tree (the mechanism's when the loops are closed)."""
    def loop_residual(self, qt: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Loop-closure equations of a closed chain in the tree's coordinates."""
    def loop_jacobian(self, qt: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Jacobian of the loop-closure equations."""
    def loop_bias(self, qt: ArrayLike, qtd: ArrayLike, out: np.ndarray | None = None) -> np.ndarray:
        """Second-order term of the loop-closure equations: H qtdd + Hdot qtd = 0 on the constraint."""
    # END ROUTINES

def install(cls: type, table: Any) -> None: ...
