"""The contract suite against the reference core, inside the project's own tests.

These are the very test functions ``python runner.py contract`` runs (from
``harness/contract/suite``), collected here so that ``make test`` holds the
reference to its contract, item by item and in parallel. No plugin is loaded
here, so nothing is deselected and no report is written.
"""

from __future__ import annotations

import importlib

from harness.contract.layout import SUITE_DIR

SUITE_MODULES = tuple(sorted(path.stem for path in SUITE_DIR.glob("test_*.py")))

for _name in SUITE_MODULES:
    _module = importlib.import_module(f"harness.contract.suite.{_name}")
    globals().update({k: v for k, v in vars(_module).items() if k.startswith("test_")})
