"""Stage 1: robot descriptions (YAML, URDF) -> RobotDescription."""

from __future__ import annotations

from pathlib import Path

from robodyn.cache import read_description
from robodyn.options import BuildOptions

from ..errors import DescriptionError

URDF_SUFFIXES = (".urdf",)


def parse_source(data: bytes, path: str, options: BuildOptions | None = None):
    """Parse description bytes, by file type: URDF (``.urdf``) or our YAML format.

    URDF only: ``options.lock`` freezes joints, ``options.runtime_parameters`` keeps inertial
    values as named parameters (YAML says which values are parameters). ``options.tool`` names
    the link carrying the tool frame, in either format."""
    from .parse import decode_description, parse_text

    options = options or BuildOptions()
    if Path(path).suffix.lower() in URDF_SUFFIXES:
        from .urdf import parse_urdf_text

        return parse_urdf_text(data, path, data, lock=options.lock_map, runtime_parameters=options.runtime_parameters,
                               tool=options.tool)
    if options.lock:
        raise DescriptionError(path, None, "", "locking joints is supported for URDF input only; "
                               "in a YAML description, remove the joint or fix its value instead")
    if options.runtime_parameters:
        raise DescriptionError(path, None, "", "--runtime-parameters is for URDF input; a YAML description "
                               "declares its runtime parameters under 'parameters'")
    return parse_text(decode_description(data, path), path, data, tool_override=options.tool)


def parse_path(path: str | Path, options: BuildOptions | None = None):
    """Read and parse a description file."""
    return parse_source(read_description(path), str(path), options)
