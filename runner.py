#!/usr/bin/env python3
"""peerwire's single entry point: ``python runner.py [COMMAND] ...``.

Commands are dispatched to their own modules, each with its own options:

  contract   the messaging contract suite against an MCP server command
             (``python runner.py contract --help``)
  report     summarize a report (``report PATH``) or compare two (``report --compare A B``)
  record     refresh ``fixtures/appserver/`` from the pinned Codex (``record [PATH ...]``)
  drift      what would change on another Codex release (``drift --codex-version V``)

Without a command, runner.py is the acceptance runner.
"""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

COMMANDS: dict[str, tuple[str, str]] = {
    "contract": ("harness.contract.cli", "run the messaging contract suite against a server command"),
    "report": ("harness.report.cli", "summarize a run report, or compare two (--compare OLD NEW)"),
    "record": ("harness.acceptance.record", "refresh the adapter fixtures from the pinned Codex"),
    "drift": ("harness.acceptance.drift", "report what would change for peerwire on another Codex release"),
}


def usage() -> str:
    lines = ["usage: python runner.py [COMMAND] [OPTIONS]", "", "commands:"]
    lines += [f"  {name:<10} {summary}" for name, (_, summary) in COMMANDS.items()]
    lines += ["", "Without a command: the acceptance runner."]
    from harness.acceptance.options import parser

    lines += ["", parser().format_help()]
    return "\n".join(lines)


def acceptance(argv: Sequence[str]) -> int:
    """The acceptance run (``harness.acceptance.run``): every scenario, or those selected."""
    from harness.acceptance.run import main as run_acceptance

    return run_acceptance(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        module = importlib.import_module(COMMANDS[args[0]][0])
        return module.main(args[1:])
    if args[:1] in (["-h"], ["--help"]):
        print(usage())
        return 0
    return acceptance(args)


if __name__ == "__main__":
    sys.exit(main())
