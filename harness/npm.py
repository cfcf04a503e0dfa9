"""The npm packages peerwire runs, and where they are installed.

The acceptance runner drives the Codex CLI (``@openai/codex``); the contract suite runs
the official MCP TypeScript clients (``@modelcontextprotocol/sdk`` and
``@modelcontextprotocol/inspector-cli``). Each is pinned to one exact version: the pins
ship with the package (``npm-pins.json``, read through :mod:`harness.resources`), equal
to the dependencies of a checkout's ``package.json``, which ``npm ci`` installs.

Where they are installed is the user's: a ``node_modules`` folder found, in order,

1. at ``$PEERWIRE_NODE_MODULES`` (when set, the only place looked at);
2. in the current directory or the nearest parent that has one holding the package, as
   npm itself resolves (a project that ran ``npm install`` at its root);
3. beside the Python environment peerwire runs in, or above it (a project's ``.venv``
   next to its ``node_modules``, as in a checkout after ``make setup``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .resources import npm_pins_file

NODE_MODULES_ENV = "PEERWIRE_NODE_MODULES"
CODEX = "@openai/codex"
TS_SDK = "@modelcontextprotocol/sdk"
INSPECTOR = "@modelcontextprotocol/inspector-cli"
GROUPS: dict[str, tuple[str, ...]] = {"suite": (TS_SDK, INSPECTOR), "accept": (CODEX,), "all": (CODEX, TS_SDK, INSPECTOR)}
"""What each use needs from npm: the contract suite's clients, the acceptance runner's Codex, or both."""


@functools.cache
def pins() -> dict[str, str]:
    """Package name -> the exact version peerwire is tested with."""
    return dict(json.loads(npm_pins_file().read_text(encoding="utf-8")))


def pin(package: str) -> str:
    """The exact version pinned for ``package``; KeyError for a package peerwire does not run."""
    return pins()[package]


def spec(package: str) -> str:
    """``package@version`` as ``npm install`` takes it."""
    return f"{package}@{pin(package)}"


def install_hint(packages: Sequence[str]) -> str:
    """The command that installs ``packages`` at their pins in the current project."""
    return "npm install " + " ".join(spec(package) for package in packages)


def search_path(environ: Mapping[str, str] | None = None, *, cwd: str | os.PathLike[str] | None = None,
                prefix: str | os.PathLike[str] | None = None) -> list[Path]:
    """The ``node_modules`` folders looked at, in order (whether or not they exist).

    ``environ`` defaults to ours, ``cwd`` to the current directory, ``prefix`` to the
    Python environment's (``sys.prefix``).
    """
    environ = os.environ if environ is None else environ
    if environ.get(NODE_MODULES_ENV):
        return [Path(environ[NODE_MODULES_ENV]).expanduser().absolute()]
    here = Path(os.getcwd() if cwd is None else cwd).absolute()
    python = Path(sys.prefix if prefix is None else prefix).absolute()
    found: list[Path] = []
    for start in (here, python.parent):
        for folder in (start, *start.parents):
            if folder / "node_modules" not in found:
                found.append(folder / "node_modules")
    return found


def find(package: str, environ: Mapping[str, str] | None = None, **where: str | os.PathLike[str] | None) -> Path | None:
    """The first ``node_modules`` folder of :func:`search_path` that holds ``package``; None when none does."""
    return next((folder for folder in search_path(environ, **where)
                 if (folder / package / "package.json").is_file()), None)


def where_looked(environ: Mapping[str, str] | None = None) -> str:
    """How :func:`search_path` searched, for an error message."""
    environ = os.environ if environ is None else environ
    if environ.get(NODE_MODULES_ENV):
        return f"{NODE_MODULES_ENV}={environ[NODE_MODULES_ENV]}"
    return (f"a node_modules in {os.getcwd()} or a parent, or beside this Python environment ({sys.prefix}); "
            f"{NODE_MODULES_ENV} names another")


def main(argv: Sequence[str] | None = None) -> int:
    """``peerwire-harness pins [suite|accept|all]``: one ``package@version`` a line, for ``npm install``."""
    parser = argparse.ArgumentParser(
        prog="peerwire-harness pins",
        description="Print the npm packages a use of peerwire needs, at the versions it pins, one a line: "
                    "`npm install $(peerwire-harness pins accept)` installs the Codex CLI the acceptance runner "
                    "drives, `... pins suite` the MCP TypeScript clients the contract suite runs. peerwire finds "
                    f"them in ${NODE_MODULES_ENV}, in a node_modules of the current folder or a parent, or beside "
                    "its Python environment.")
    parser.add_argument("use", nargs="?", choices=sorted(GROUPS), default="all",
                        help="suite: the contract suite's clients; accept: the acceptance runner's Codex (default: all)")
    args = parser.parse_args(argv)
    print("\n".join(spec(package) for package in GROUPS[args.use]))
    return 0
