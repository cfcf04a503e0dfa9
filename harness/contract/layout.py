"""Where the contract suite's data lives: the package data :mod:`harness.resources` finds."""

from __future__ import annotations

import sys

from harness.resources import contract_suite, contracts

CONTRACTS_DIR = contracts()
MANIFEST_PATH = CONTRACTS_DIR / "requirements.toml"
MANIFEST_SCHEMA_PATH = CONTRACTS_DIR / "requirements.schema.json"
CASE_SCHEMA_PATH = CONTRACTS_DIR / "case.schema.json"
CASES_DIR = CONTRACTS_DIR / "cases"
SUITE_DIR = contract_suite()

REFERENCE_SERVER_CMD: tuple[str, ...] = (sys.executable, "-m", "peerwire", "mcp", "serve")
"""The default implementation under test: peerwire's reference MCP server."""

REFERENCE_COLLAB_SERVER_CMD: tuple[str, ...] = (*REFERENCE_SERVER_CMD, "--profile", "collab")
"""The reference's collaboration profile (the default ``--collab-server-cmd`` when testing the reference)."""

REFERENCE_PROVISIONER = "harness.contract.reference:ReferenceProvisioner"
