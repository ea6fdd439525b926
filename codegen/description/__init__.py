"""Stage 1: robot descriptions (YAML, URDF) -> RobotDescription."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ..errors import DescriptionError

URDF_SUFFIXES = (".urdf",)


def parse_source(data: bytes, path: str, lock: Mapping[str, float] | None = None,
                 runtime_parameters: bool = False):
    """Parse description bytes, by file type: URDF (``.urdf``) or our YAML format.

    URDF only: ``lock`` freezes joints; ``runtime_parameters`` keeps inertial values as named
    parameters instead of baking them into the code (YAML says which values are parameters)."""
    from .parse import decode_description, parse_text

    if Path(path).suffix.lower() in URDF_SUFFIXES:
        from .urdf import parse_urdf_text

        return parse_urdf_text(data, path, data, lock=lock, runtime_parameters=runtime_parameters)
    if lock:
        raise DescriptionError(path, None, "", "locking joints is supported for URDF input only; "
                               "in a YAML description, remove the joint or fix its value instead")
    return parse_text(decode_description(data, path), path, data)


def parse_path(path: str | Path, lock: Mapping[str, float] | None = None, runtime_parameters: bool = False):
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DescriptionError(str(path), None, "", f"cannot read the description: {exc.strerror}") from None
    return parse_source(data, str(path), lock, runtime_parameters)
