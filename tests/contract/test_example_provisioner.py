"""The interface an implementer needs, and the example provisioner ``contracts/README.md`` documents.

The example is taken from the README itself, so the documentation cannot rot:
it must import nothing but the standard library and the harness's interface,
and the suite must pass with it against the reference, through every method
of the interface (registering aliases and twins, a stranger, a crash restart,
a stop and a start, a collaboration root).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract.layout import CONTRACTS_DIR

from .conftest import run_contract

PROJECT_ROOT = Path(__file__).resolve().parents[2]

README = CONTRACTS_DIR / "README.md"
MARKER = "<!-- example provisioner:"
EXAMPLE_CLASS = "CommandLineProvisioner"
# Each one uses another part of the interface: register with aliases and twins, stranger_env,
# crash, make_unavailable and make_available, register(collab_root=True), agent_kinds.
REQUIREMENTS = ("target:alias", "target:ambiguous", "identity:caller:unknown", "task:claim:durable",
                "app:unavailable:recovers", "collab:spawn:task-name", "interrupt:idle:not-active")


def example_source() -> str:
    text = README.read_text("utf-8")
    assert MARKER in text, f"{README.name} has no example provisioner block"
    block = re.search(r"```python\n(.*?)```", text[text.index(MARKER):], re.DOTALL)
    assert block, f"no python block follows the marker in {README.name}"
    return block.group(1)


def test_the_interface_imports_no_part_of_the_core():
    code = ("import sys, harness.contract.interface as i; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('peerwire', 'jsonschema', 'pytest')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT_ROOT,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]", f"importing the interface imported {done.stdout.strip()}"


def test_the_example_needs_only_the_standard_library_and_the_interface():
    tree = ast.parse(example_source())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    foreign = sorted(m for m in imported if m not in sys.stdlib_module_names and m != "__future__")
    assert foreign == ["harness.contract.interface"], f"the example imports {foreign}"


@pytest.mark.slow
def test_the_readme_example_provisioner_passes_the_suite_against_the_reference(tmp_path):
    package = tmp_path / "example"
    package.mkdir()
    (package / "example_provisioner.py").write_text(example_source(), "utf-8")
    selected = [arg for requirement_id in REQUIREMENTS for arg in ("--requirement", requirement_id)]
    run = run_contract(tmp_path, "--provisioner", f"example_provisioner:{EXAMPLE_CLASS}", *selected,
                       env={"PYTHONPATH": str(package)})
    assert run.returncode == 0, run.output[-3000:]
    assert run.compliance["target"]["provisioner"] == f"example_provisioner:{EXAMPLE_CLASS}"
    for requirement_id in REQUIREMENTS:
        assert run.result(requirement_id)["result"] == "pass", f"{requirement_id}:\n{run.output[-3000:]}"


class FirstVersionProvisioner:
    """A provisioner written for the first interface: restart, stop_app, start_app."""

    def __init__(self):
        self.calls: list[str] = []

    def restart(self):
        self.calls.append("restart")

    def stop_app(self):
        self.calls.append("stop_app")

    def start_app(self):
        self.calls.append("start_app")


def test_a_first_version_provisioner_runs_through_the_adapter():
    from harness.contract.interface import UNAVAILABLE, adapt, capabilities_of

    old = FirstVersionProvisioner()
    adapted = adapt(old)
    assert capabilities_of(FirstVersionProvisioner) == {UNAVAILABLE} and adapted.agent_kinds == ("manual",)
    adapted.crash([12345])
    adapted.make_unavailable()
    adapted.make_available()
    assert old.calls == ["restart", "stop_app", "start_app"], "its restart is its crash; the servers are left alone"
    with pytest.raises(TypeError, match="crash"):
        adapt(object())


def test_a_provisioner_offers_the_capability_of_each_whole_set_of_hooks_it_has():
    """Hooks are capabilities: a run selects the requirements needing ``hang`` or ``agent-states`` only when the
    provisioner has every hook of it (half a set offers nothing), declared capabilities or not."""
    from harness.contract.interface import AGENT_STATES, HANG, UNAVAILABLE, capabilities_of

    class Hooks:
        capabilities = frozenset({UNAVAILABLE})

        def freeze(self): ...

        def thaw(self): ...

        def set_agent(self, caller, *, enabled=None, sendable=None): ...

    class HalfHang:
        def freeze(self): ...

    assert capabilities_of(Hooks) == {UNAVAILABLE, HANG, AGENT_STATES}
    assert capabilities_of(HalfHang) == frozenset()
    assert capabilities_of(FirstVersionProvisioner) == {UNAVAILABLE}
