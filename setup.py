"""Package layout: the generator lives in codegen/, the runtime in src/robodyn/.

Metadata and dependencies are in pyproject.toml; this file only maps the two
package roots, which a plain [tool.setuptools] table cannot mix with package data.
"""

from setuptools import setup

setup(
    packages=["codegen", "codegen.description", "codegen.model", "codegen.emit", "codegen.build", "robodyn"],
    package_dir={"robodyn": "src/robodyn"},
    package_data={"codegen.build": ["bridge.pyx", "robodyn_sim.h", "robodyn_sim.c"]},
    include_package_data=False,
    zip_safe=False,
)
