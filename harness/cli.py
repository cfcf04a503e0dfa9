"""``peerwire-harness``: the harness's one command line, installed as a console script.

  peerwire-harness contract [OPTIONS]   the messaging contract suite against an MCP server command
  peerwire-harness mailbox [OPTIONS]    the mailbox profile against any messaging server, through a binding
  peerwire-harness accept [OPTIONS]     the acceptance runner: real Codex agents against a core
  peerwire-harness report ...           summarize a report, compare two, merge shard reports, or a results matrix
  peerwire-harness record [ROUTE ...]   refresh the recorded app-server fixtures from the pinned Codex
  peerwire-harness drift --codex-version V   what would change on another Codex release
  peerwire-harness pins [suite|accept|all]   the npm packages (and versions) a use needs
  peerwire-harness docs [PAGE]          the documentation that ships with peerwire

Each command has its own ``--help``. In a checkout, ``python runner.py`` is the same
dispatcher, with the acceptance runner as its default command. Every command is
imported only when chosen, so each needs only its own extra (``peerwire[suite]``,
``peerwire[accept]``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from harness import invocation

COMMANDS: dict[str, tuple[str, str]] = {
    "contract": ("harness.contract.cli", "run the messaging contract suite against a server command"),
    "mailbox": ("harness.contract.mailbox.cli", "judge any messaging server's semantics through a binding of its tools"),
    "accept": ("harness.acceptance.run", "run the acceptance scenarios against two real Codex agents"),
    "report": ("harness.report.cli", "summarize a run report, compare two (--compare OLD NEW), merge shards, or put many runs side by side (matrix)"),
    "record": ("harness.acceptance.record", "refresh the adapter fixtures from the pinned Codex"),
    "drift": ("harness.acceptance.drift", "report what would change for peerwire on another Codex release"),
    "pins": ("harness.npm", "print the npm packages a use needs, pinned: npm install $(peerwire-harness pins ...)"),
    "docs": ("harness.docs", "list the documentation pages that ship with peerwire, or print one"),
}
"""Command -> (the module whose ``main(argv)`` runs it, a one-line summary)."""
EXTRAS = {"contract": "suite", "mailbox": "suite", "accept": "accept", "record": "accept", "drift": "accept"}
"""Command -> the extra that installs its dependencies (``pip install 'peerwire[suite]'``); others need none."""
OWN_PACKAGES = ("peerwire", "harness", "peerwire_data")
PROG = invocation.PROG


def _docs_folder() -> str:
    from harness.resources import docs

    try:
        return str(docs())
    except Exception as exc:  # an install without its docs still prints its usage
        return f"(not found: {exc})"


def usage(prog: str = PROG, default: str | None = None) -> str:
    """The dispatcher's help: every command and its summary."""
    lines = [f"usage: {prog} COMMAND [OPTIONS]", "", "commands:"]
    lines += [f"  {name:<10} {summary}" for name, (_, summary) in COMMANDS.items()]
    lines += ["", f"`{prog} COMMAND --help` explains a command; `{prog} docs` lists the documentation, which is "
              f"installed in {_docs_folder()}."]
    if default is not None:
        lines += [f"Without a command, the arguments go to `{default}` (`{prog} {default} --help`)."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, *, default: str | None = None, prog: str = PROG) -> int:
    """Run the command ``argv`` names; with ``default``, arguments that name none go to that command.

    Returns the command's exit status; 2 (usage) for no command or an unknown one when there is no
    default.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    invocation.started_as(prog)
    if args[:1] in (["-h"], ["--help"]) or (not args and default is None):
        print(usage(prog, default), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args and args[0] in COMMANDS:
        command, rest = args[0], args[1:]
    elif default is not None:
        command, rest = default, args
    else:
        print(f"{prog}: unknown command {args[0]!r}\n\n{usage(prog)}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(COMMANDS[command][0])
        return int(module.main(rest) or 0)
    except ModuleNotFoundError as exc:
        if not exc.name or exc.name.partition(".")[0] in OWN_PACKAGES or command not in EXTRAS:
            raise
        # A dependency of the command's extra, missing (imports are lazy, so this may come mid-run).
        print(f"{prog} {command}: needs the Python package {exc.name.partition('.')[0]!r}, which the extra "
              f"{EXTRAS[command]!r} installs: pip install 'peerwire[{EXTRAS[command]}]'", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
