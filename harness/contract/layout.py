"""Where the contract suite's data lives, relative to this source tree."""

from __future__ import annotations

import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONTRACTS_DIR = PROJECT_ROOT / "contracts"
MANIFEST_PATH = CONTRACTS_DIR / "requirements.toml"
MANIFEST_SCHEMA_PATH = CONTRACTS_DIR / "requirements.schema.json"
CASE_SCHEMA_PATH = CONTRACTS_DIR / "case.schema.json"
CASES_DIR = CONTRACTS_DIR / "cases"
SUITE_DIR = Path(__file__).resolve().parent / "suite"

REFERENCE_SERVER_CMD: tuple[str, ...] = (sys.executable, "-m", "peerwire", "mcp", "serve")
"""The default implementation under test: peerwire's reference MCP server."""

REFERENCE_COLLAB_SERVER_CMD: tuple[str, ...] = (*REFERENCE_SERVER_CMD, "--profile", "collab")
"""The reference's collaboration profile (the default ``--collab-server-cmd`` when testing the reference)."""

REFERENCE_PROVISIONER = "harness.contract.reference:ReferenceProvisioner"
