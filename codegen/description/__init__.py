"""Stage 1: robot descriptions (YAML, URDF) -> RobotDescription."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import sympy as sp

from robodyn.cache import read_description
from robodyn.options import BuildOptions

from ..errors import DescriptionError

URDF_SUFFIXES = (".urdf",)


def parse_source(data: bytes, path: str, options: BuildOptions | None = None):
    """Parse description bytes, by file type: URDF (``.urdf``) or our YAML format.

    URDF only: ``options.lock`` freezes joints, ``options.runtime_parameters`` keeps inertial
    values as named parameters (YAML says which values are parameters), ``options.base`` "floating"
    frees the root link (YAML declares it). ``options.tool`` names
    the link carrying the tool frame, in either format. ``options.exact_angles`` takes every angle
    within 1e-9 rad of a multiple of pi/2 as that multiple, in either format (and in ``tool_offset``)."""
    from .parse import decode_description, parse_text

    options = options or BuildOptions()
    if Path(path).suffix.lower() in URDF_SUFFIXES:
        from .urdf import parse_urdf_text

        if options.assembly_mode != 1:
            raise DescriptionError(path, None, "assembly_mode", "--assembly-mode is for closed chains (a YAML "
                                   "description with 'loops'); a URDF describes a tree")
        description = parse_urdf_text(data, path, data, lock=options.lock_map,
                                      runtime_parameters=options.runtime_parameters, tool=options.tool,
                                      accept_invalid_inertia=options.accept_invalid_inertia,
                                      floating=options.base == "floating", exact_angles=options.exact_angles)
        # The URDF tool frame is the tool link's own frame (a link merged into its parent keeps it).
        return _with_tool_offset(description, options, description.tool)
    if options.lock:
        raise DescriptionError(path, None, "", "locking joints is supported for URDF input only; "
                               "in a YAML description, remove the joint or fix its value instead")
    if options.runtime_parameters:
        raise DescriptionError(path, None, "", "--runtime-parameters is for URDF input; a YAML description "
                               "declares its runtime parameters under 'parameters'")
    description = parse_text(decode_description(data, path), path, data, tool_override=options.tool,
                             accept_invalid_inertia=options.accept_invalid_inertia, exact_angles=options.exact_angles)
    if options.base == "floating" and description.floating_base is None:
        raise DescriptionError(path, None, "base", "--base floating is for URDF input; a YAML description declares "
                               "its floating base: base: {floating: true, link: {mass: ..., com: [...], inertia: "
                               "{...}}}")
    if options.assembly_mode != 1 and description.closure is None:
        raise DescriptionError(path, None, "assembly_mode", "--assembly-mode is for closed chains (a description "
                               "with 'loops'); this robot has no loop")
    # A YAML description's tool xyz/rpy is its offset from the link: the option replaces it.
    return _with_tool_offset(description, options, sp.eye(4))


def _with_tool_offset(description, options: BuildOptions, link_frame):
    """``options.tool_offset`` (x, y, z[, roll, pitch, yaw]) placed in the tool link's frame."""
    if not options.tool_offset:
        return description
    from .. import geometry
    from .expressions import parse_number_literal

    values = list(options.tool_offset) + [0.0] * (6 - len(options.tool_offset))
    try:
        exact = [parse_number_literal(repr(v)) if v != 0 else sp.Integer(0) for v in values]
    except ValueError as exc:
        raise DescriptionError(description.path, None, "tool_offset", str(exc)) from None
    angles = exact[3:]
    if options.exact_angles:
        angles = [geometry.snap_quarter_turn(angle) for angle in angles]
    offset = geometry.homogeneous(geometry.rpy(*angles), sp.Matrix(exact[:3]))
    return dataclasses.replace(description, tool=sp.ImmutableMatrix(sp.Matrix(link_frame) * offset))


def parse_path(path: str | Path, options: BuildOptions | None = None):
    """Read and parse a description file."""
    return parse_source(read_description(path), str(path), options)
