"""The hash of the C layout shared by the runtime and robot modules (no imports: setup.py runs it)."""

import hashlib
from pathlib import Path

ABI_HEADERS = ("robodyn_abi.h", "robodyn_sim.h")


def abi_hash(native_dir) -> str:
    digest = hashlib.sha256()
    for name in ABI_HEADERS:
        digest.update((Path(native_dir) / name).read_bytes())
    return digest.hexdigest()[:16]
