"""Errors keep their cause, and cancellation and interrupts propagate (the source read with ``ast``).

* A handler of ``BaseException`` (or a bare ``except:``) only cleans up and re-raises what it caught:
  converting a ``CancelledError`` or a ``KeyboardInterrupt`` into an ordinary error would make a
  cancelled call look like a failed one. Only the top-level entry points (:data:`ENTRY_POINTS`) may
  catch everything to report it and exit.
* An error raised while handling another says what it wraps: ``from exc``, or ``from None`` where the
  message carries all of it. An implicit context is dropped by whoever re-raises it later.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("peerwire", "peerwire_lab", "harness")
ENTRY_POINTS = {"peerwire/cli.py", "harness/cli.py", "runner.py"}
"""Where a handler may catch every exception: the commands' outermost frames."""


def sources() -> list[Path]:
    return [*(path for package in SOURCES for path in sorted((ROOT / package).rglob("*.py"))), ROOT / "runner.py"]


def catches_everything(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(ast.unparse(kind) in ("BaseException", "builtins.BaseException") for kind in caught)


def only_cleans_up(handler: ast.ExceptHandler) -> bool:
    """The body ends in a bare ``raise`` and leaves no other way: no other raise, return, break or continue."""
    last = handler.body[-1]
    if not (isinstance(last, ast.Raise) and last.exc is None):
        return False
    exits = (ast.Return, ast.Break, ast.Continue, ast.Raise)
    return not any(isinstance(node, exits) and node is not last
                   for statement in handler.body for node in ast.walk(statement))


def broad_handlers(name: str, text: str) -> list[str]:
    tree = ast.parse(text, name)
    return [f"{name}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.ExceptHandler) and catches_everything(node) and not only_cleans_up(node)]


def wraps_without_cause(name: str, text: str) -> list[str]:
    """``raise New(...)`` inside a handler with no ``from``; re-raising the caught exception is fine."""
    found = []
    for handler in ast.walk(ast.parse(text, name)):
        if not isinstance(handler, ast.ExceptHandler):
            continue
        for node in (n for statement in handler.body for n in ast.walk(statement)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(node, ast.Raise) and node.exc is not None and node.cause is None \
                    and not (isinstance(node.exc, ast.Name) and node.exc.id == handler.name):
                found.append(f"{name}:{node.lineno}")
    return found


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_no_handler_turns_a_cancellation_into_an_error():
    found = [where for path in sources() if relative(path) not in ENTRY_POINTS
             for where in broad_handlers(relative(path), path.read_text(encoding="utf-8"))]
    assert found == [], ("catch Exception (or the errors meant), or clean up and re-raise with a bare `raise`: "
                         f"{found}")


def test_every_wrapped_error_names_its_cause():
    found = [where for path in sources() for where in wraps_without_cause(relative(path), path.read_text(encoding="utf-8"))]
    assert found == [], f"raise ... from exc (or from None where the message says it all): {found}"


@pytest.mark.parametrize(("source", "broad", "uncaused"), [
    ("try:\n    f()\nexcept BaseException as exc:\n    raise ValueError(exc)\n", 1, 1),
    ("try:\n    f()\nexcept BaseException:\n    pass\n", 1, 0),
    ("try:\n    f()\nexcept:\n    return 1\n", 1, 0),
    ("try:\n    f()\nexcept (OSError, BaseException):\n    g()\n    raise\n", 0, 0),
    ("try:\n    f()\nexcept BaseException:\n    if x:\n        return\n    raise\n", 1, 0),
    ("try:\n    f()\nexcept OSError as exc:\n    raise ValueError(exc) from exc\n", 0, 0),
    ("try:\n    f()\nexcept OSError as exc:\n    raise exc\n", 0, 0),
    ("try:\n    f()\nexcept OSError:\n    raise ValueError('no') from None\n", 0, 0),
    ("try:\n    f()\nexcept OSError as exc:\n    if x:\n        raise KeyError(x)\n    raise\n", 0, 1),
])
def test_the_scans_tell_a_cleanup_from_a_conversion(source, broad, uncaused):
    text = f"def h():\n{''.join('    ' + line + chr(10) for line in source.splitlines())}"
    assert (len(broad_handlers("x.py", text)), len(wraps_without_cause("x.py", text))) == (broad, uncaused)
