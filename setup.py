"""The package layout, which pyproject.toml alone cannot say: found code packages plus mapped data folders.

The contract, the scenarios, the recorded fixtures and the recorded durations stay where
a checkout keeps them (``contracts/``, ``scenarios/``, ``fixtures/``, ``.ci/``) and ship as
the packages ``peerwire_data.*``: an editable install maps those names onto the
checkout's folders, a wheel carries copies, and both are read through
``importlib.resources`` (:mod:`peerwire.resources`, :mod:`harness.resources`). Which
files of each ship is ``[tool.setuptools.package-data]`` in pyproject.toml.
"""

from setuptools import find_packages, setup

DATA_FOLDERS = {
    "peerwire_data.contracts": "contracts",
    "peerwire_data.scenarios": "scenarios",
    "peerwire_data.fixtures": "fixtures",
    "peerwire_data.ci": ".ci",
    "peerwire_data.docs": "docs",
}

setup(
    packages=[*find_packages(include=["peerwire", "peerwire.*", "harness", "harness.*"]), *DATA_FOLDERS],
    package_dir=DATA_FOLDERS,
)
