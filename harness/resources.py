"""Where the harness's package data is: every file it reads at run time that is not the user's.

Everything is found through :mod:`importlib.resources` (:func:`peerwire.resources.data_folder`),
never by a path relative to a source file, so an editable install reads a checkout's
files and an installed wheel its own copies:

=====================================  ==============================  ==========================================
what                                   package (checkout folder)       read by
=====================================  ==============================  ==========================================
tool schemas, requirements, cases,     ``peerwire_data.contracts``     the core, the contract suite, the scripted
report/scenario/persona schemas        (``contracts/``)                model, scenarios, personas, the report writer
acceptance scenarios, personas         ``peerwire_data.scenarios``     the acceptance runner, the scripted model
                                       (``scenarios/``)
recorded app-server exchanges          ``peerwire_data.fixtures``      ``record``, ``drift``, the replays
                                       (``fixtures/``)
recorded durations                     ``peerwire_data.ci`` (``.ci/``) shard planning (contract and acceptance)
npm pins (Codex, MCP clients)          ``harness`` (``npm-pins.json``) :mod:`harness.npm`
the contract suite's tests, its        ``harness.contract.suite``,     ``peerwire-harness contract``
pytest configuration (``suite.ini``)   ``harness.contract``
the TypeScript SDK client script       ``harness.contract.interop``    the interop requirements
=====================================  ==============================  ==========================================
"""

from __future__ import annotations

from pathlib import Path

from peerwire.resources import CONTRACTS, PackageDataMissing, contracts, data_folder

__all__ = [
    "CONTRACTS",
    "PackageDataMissing",
    "appserver_fixtures",
    "contract_file",
    "contract_suite",
    "contract_suite_config",
    "contracts",
    "docs",
    "fixtures",
    "npm_pins_file",
    "packages_root",
    "personas",
    "recorded_durations",
    "scenarios",
    "typescript_client",
]

SCENARIOS = "peerwire_data.scenarios"
FIXTURES = "peerwire_data.fixtures"
RECORDED_DURATIONS = "peerwire_data.ci"
DOCS = "peerwire_data.docs"


def contract_file(name: str) -> Path:
    """A file of the contract's folder, e.g. ``report.schema.json`` (whether or not it exists)."""
    return contracts() / name


def scenarios() -> Path:
    """The acceptance scenarios (``*.toml``) and the scripted model's rules."""
    return data_folder(SCENARIOS)


def personas() -> Path:
    """The scripted model's personas (``*.toml``)."""
    return scenarios() / "personas"


def fixtures() -> Path:
    """The recorded provider transcripts: ``appserver/``, ``collab/``."""
    return data_folder(FIXTURES)


def appserver_fixtures() -> Path:
    """The recorded app-server exchanges (``*.jsonl``), which ``record`` refreshes."""
    return fixtures() / "appserver"


def recorded_durations() -> Path:
    """The recorded durations shards are balanced by (``durations.json``)."""
    return data_folder(RECORDED_DURATIONS) / "durations.json"


def docs() -> Path:
    """The documentation pages (``docs/*.md`` in a checkout; shipped in the wheel as ``peerwire_data.docs``)."""
    return data_folder(DOCS)


def npm_pins_file() -> Path:
    """The exact versions of the npm packages peerwire runs (:mod:`harness.npm`)."""
    return data_folder("harness") / "npm-pins.json"


def packages_root() -> Path:
    """The folder that holds the ``harness`` package: the contract suite's pytest root, so that its node
    ids (``harness/contract/suite/test_x.py::...``) are the same installed or in a checkout."""
    return data_folder("harness").parent


def contract_suite() -> Path:
    """The contract suite's test modules (``test_*.py``)."""
    return data_folder("harness.contract.suite")


def contract_suite_config() -> Path:
    """The pytest configuration the contract suite runs under, wherever it is run from."""
    return data_folder("harness.contract") / "suite.ini"


def typescript_client() -> Path:
    """``ts_sdk_client.mjs``: the MCP TypeScript SDK's client running a plan of calls."""
    return data_folder("harness.contract.interop") / "ts_sdk_client.mjs"
