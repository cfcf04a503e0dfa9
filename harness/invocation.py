"""How the user started peerwire's harness, so that help texts and errors name the command they typed.

The installed console script is ``peerwire-harness``; a checkout also has ``python runner.py``. The
dispatcher (:func:`harness.cli.main`) records which one ran; a command names itself and the others
through :func:`command`.
"""

from __future__ import annotations

PROG = "peerwire-harness"

_program = PROG


def started_as(program: str) -> None:
    """Record the program the user ran (the dispatcher calls this before a command runs)."""
    global _program
    _program = program


def command(name: str = "") -> str:
    """``name`` as the user would type it: ``peerwire-harness report merge``, ``python runner.py report merge``."""
    return f"{_program} {name}".strip()


DURATIONS_DEFAULT_HELP = ("the durations shipped with peerwire (the package peerwire_data.ci's durations.json; "
                          ".ci/durations.json in a checkout)")
"""What every command's ``--durations`` defaults to, in words: one default for all of them."""
