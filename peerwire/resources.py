"""Where peerwire's package data is: found through :mod:`importlib.resources`, never beside a source file.

The data folders of a checkout (``contracts/``, ``scenarios/``, ``fixtures/``, ``.ci/``)
ship as the packages ``peerwire_data.*`` (``setup.py`` maps them). An editable install
resolves those names to the checkout's folders, an installed wheel to its own copies,
so the same lookup serves both and nothing depends on where this file lies.

The core reads only the contract (:func:`contracts`); the harness finds the rest
through :mod:`harness.resources`, built on :func:`data_folder`.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

CONTRACTS = "peerwire_data.contracts"
"""The tool schemas, shared definitions, the evidence export's schema, requirements and cases."""


class PackageDataMissing(LookupError):
    """A data package is not installed, or not as plain files; the message says how to fix it."""


def data_folder(package: str) -> Path:
    """The folder of the data package ``package`` (e.g. :data:`CONTRACTS`), as a filesystem path.

    Raises :class:`PackageDataMissing` when the package cannot be imported (an
    install that predates it, or a checkout run without installing) or is not a
    folder on disk (a zipped install, which peerwire does not support: its
    subprocesses and reports need real files).
    """
    try:
        found = importlib.resources.files(package)
    except ModuleNotFoundError as exc:
        raise PackageDataMissing(
            f"peerwire's package data {package} is not installed ({exc}); reinstall peerwire "
            "(in a checkout: `pip install -e .`, which `make setup` runs)") from None
    if not isinstance(found, Path) or not found.is_dir():
        raise PackageDataMissing(f"peerwire's package data {package} is not a folder on disk ({found!r}); "
                                 "install peerwire from a wheel or a source tree, not as a zip")
    return found


def contracts() -> Path:
    """The contract's folder: ``tools/``, ``collab/``, ``definitions.json``, ``export.schema.json``, ..."""
    return data_folder(CONTRACTS)
