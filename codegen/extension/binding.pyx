# cython: language_level=3, binding=False, auto_pickle=False
"""One robot's compiled dynamics, for the robodyn runtime.

This file is static: the same for every robot. The module holds the robot's
generated C (one file per routine) and exports its routine table (an rd_robot,
``robodyn/native/robodyn_abi.h``) as the capsule ``table``; argument checks,
batches, control laws and simulation are the runtime's (robodyn._native,
compiled once at ``pip install``). ``robot()`` gives the same ``robodyn.Robot``
that ``robodyn.load`` returns.
"""

cdef extern from "Python.h":
    object PyCapsule_New(void* pointer, const char* name, void* destructor)

cdef extern from "robot_table.h":
    ctypedef struct rd_robot:
        const char* metadata_json
    const rd_robot ROBODYN_ROBOT_TABLE
    const char* ROBODYN_CAPSULE_NAME

table = PyCapsule_New(<void*>&ROBODYN_ROBOT_TABLE, ROBODYN_CAPSULE_NAME, NULL)
metadata_json = (<bytes>ROBODYN_ROBOT_TABLE.metadata_json).decode("utf-8")


def robot():
    """This robot as a robodyn.Robot (with the manifest and self-check of its cache entry)."""
    import sys
    from robodyn.robot import Robot

    return Robot.from_extension(sys.modules[__name__])
