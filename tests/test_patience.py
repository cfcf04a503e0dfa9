"""Every time limit in the suite is one of ``tests/patience.py``'s, so no verdict depends on machine speed.

A bound written as a number next to its wait (``timeout=20``, ``WAIT = 10.0``, ``fail_after(60)``) is
set by how fast the machine it was written on was; with both cores busy a healthy run crosses it and the
test fails for nothing. This scan refuses every such literal in the test suite (``tests/contract/``, the
contract suite's own tests, keeps its bounds in its own options): a bound is a name from
:mod:`tests.patience`, or an expression of one. A literal that is the very bound the test exercises (a
timeout handed to the code under test, whose expiry is the behaviour checked) says so on its line with
``# the bound under test``.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import patience

TESTS = Path(__file__).resolve().parent
OWN = TESTS / "patience.py"
NOT_SCANNED = (TESTS / "contract",)
OPT_OUT = "# the bound under test"

BOUND_KEYWORDS = {"timeout", "timeout_s", "wait_s", "deadline", "timeout_seconds"}
"""Keyword arguments (and parameters) that bound a wait, in seconds."""
BOUND_NAME = re.compile(r"_S$|TIMEOUT|WAIT|BOUND|DEADLINE|PATIENCE|GRACE", re.IGNORECASE)
"""Names that hold a bound (or any span in seconds); a name ending in ``_MS`` is a tool's argument in
milliseconds (``timeout_ms``), an input of the code under test, not a bound."""
BOUNDING_CALLS = {"fail_after", "move_on_after", "timeout", "wait_for"}
"""Calls whose first positional argument (the second for ``wait_for``) is a bound in seconds."""
WAITING_METHODS = {"wait", "join", "result", "communicate", "get", "acquire", "settimeout"}
"""Methods whose only positional argument, when numeric, is a bound in seconds."""
WAITING_HELPERS = {"wait_until", "await_turn", "await_core", "await_record", "await_change", "wait_for_line",
                   "read_line", "call_tool", "wait_for_hold", "wait_for_exchange", "wait_for_notification",
                   "wait_procs", "first_line"}
"""The suite's and the harness's waits: any numeric positional argument of theirs is a bound in seconds."""


def scanned_files() -> list[Path]:
    return sorted(path for path in TESTS.rglob("*.py")
                  if path != OWN and not any(path.is_relative_to(skip) for skip in NOT_SCANNED))


def is_number(node: ast.AST | None) -> bool:
    """A positive numeric literal (0 waits for nothing and bounds nothing; True and False are not numbers)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return False
    return (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool) and node.value > 0)


def is_bound_name(name: str) -> bool:
    return bool(BOUND_NAME.search(name)) and not name.lower().endswith("_ms")


def literal_bounds(source: str) -> Iterator[tuple[int, str]]:
    """``(line, what)`` for every numeric literal used as a bound in ``source``."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            for keyword in node.keywords:
                if keyword.arg in BOUND_KEYWORDS and is_number(keyword.value):
                    yield node.lineno, f"{name}({keyword.arg}={ast.unparse(keyword.value)})"
            position = 1 if name == "wait_for" else 0
            if name in BOUNDING_CALLS and len(node.args) > position and is_number(node.args[position]):
                yield node.lineno, f"{name}({ast.unparse(node.args[position])})"
            if (isinstance(node.func, ast.Attribute) and name in WAITING_METHODS and len(node.args) == 1
                    and is_number(node.args[0])):
                yield node.lineno, f".{name}({ast.unparse(node.args[0])})"
            if name.lstrip("_") in WAITING_HELPERS:
                yield from ((node.lineno, f"{name}(... {ast.unparse(arg)} ...)") for arg in node.args if is_number(arg))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                pairs = (zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple)
                         and isinstance(node.value, ast.Tuple) else [(target, node.value)])
                for name, value in pairs:
                    if isinstance(name, ast.Name) and is_bound_name(name.id) and is_number(value):
                        yield node.lineno, f"{name.id} = {ast.unparse(value)}"  # type: ignore[arg-type]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = [*node.args.posonlyargs, *node.args.args]
            defaults = [*([None] * (len(arguments) - len(node.args.defaults))), *node.args.defaults]
            pairs = [*zip(arguments, defaults), *zip(node.args.kwonlyargs, node.args.kw_defaults)]
            for argument, default in pairs:
                if (argument.arg in BOUND_KEYWORDS or is_bound_name(argument.arg)) and is_number(default):
                    yield node.lineno, f"def {node.name}(... {argument.arg}={ast.unparse(default)})"  # type: ignore[arg-type]


def test_no_test_bounds_a_wait_with_a_number_of_its_own() -> None:
    found = []
    for path in scanned_files():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        found += [f"{path.relative_to(TESTS.parent)}:{line}: {what}" for line, what in literal_bounds(text)
                  if OPT_OUT not in lines[line - 1]]
    assert not found, ("bound these waits with tests.patience (WAIT_S, RUN_S; GLANCE_S for what must not "
                       "happen), or mark the bound the test exercises with '" + OPT_OUT + "':\n  "
                       + "\n  ".join(found))


@pytest.mark.parametrize("source", [
    "proc.wait(timeout=20)", "subprocess.run(argv, timeout=60.0)", "WAIT = 10.0", "START_TIMEOUT: float = 20",
    "with anyio.fail_after(60): pass", "thread.join(5)", "pytest.mark.timeout(120)",
    "def read(stream, timeout=30): pass", "def cli(*args, timeout: float = 30): pass",
    "READY_S, STOP_S = 20.0, 10.0",
    "asyncio.wait_for(coro, 10)", "future.result(20)", "wait_until(lambda: done(), 60, 'done')",
    "lab.await_turn('A', turn, 60)", "driver.call_tool(caller, 'reply', {}, 5)", "sock.settimeout(20.0)",
])
def test_the_scan_finds_a_literal_bound(source: str) -> None:
    assert list(literal_bounds(source)), source


@pytest.mark.parametrize("source", [
    "proc.wait(timeout=patience.WAIT_S)", "subprocess.run(argv, timeout=RUN_S)", "WAIT = patience.WAIT_S",
    "client.call('wait_agent', {'timeout_ms': 60000})", "RECEIVE_WAIT_MS = 30000", "lab.await_change(mark, 0)",
    "queue.get(block=False)", "items.get('key')", "stop = threading.Event(); stop.wait(deadline - now)",
    "def read(stream, timeout=None): pass", "sleep(0.01)",
])
def test_the_scan_leaves_named_bounds_and_other_numbers_alone(source: str) -> None:
    assert not list(literal_bounds(source)), source


def test_the_bounds_nest_and_pytest_timeout_is_the_outermost() -> None:
    assert patience.GLANCE_S < 1 < patience.WAIT_S < patience.RUN_S < patience.TEST_S
    settings = tomllib.loads((TESTS.parent / "pyproject.toml").read_text(encoding="utf-8"))
    assert settings["tool"]["pytest"]["ini_options"]["timeout"] == patience.TEST_S


def test_no_hypothesis_verdict_depends_on_machine_speed():
    from hypothesis import HealthCheck, settings
    assert settings().deadline is None
    assert HealthCheck.too_slow in settings().suppress_health_check
