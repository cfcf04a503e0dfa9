"""The boundaries the layout promises, checked on the source (imports read with ``ast``, nothing imported).

* The harness reads a core only through its evidence export and its operator
  interface: no harness module imports ``sqlite3`` or the reference core's store.
* The core imports nothing from the harness nor from its lab (``peerwire_lab``: the fault
  campaign and the benchmark), and no third-party package beyond its declared dependencies.
* ``peerwire/`` holds only the core: its commands are the core's own (:data:`CORE_COMMANDS`).
* The harness's folders keep their order: each imports only from floors below its own
  (:data:`HARNESS_FLOORS`), so no two folders depend on each other.
* Every import of a project module names one that exists, even inside a function.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("peerwire", "harness", "peerwire_lab")

CORE_IMPORTS_HARNESS_TODAY: set[str] = set()
"""Modules of the core that still import the harness; each must go, and an entry that no longer does fails."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(package: str) -> dict[str, Path]:
    return {module_name(path): path for path in sorted((ROOT / package).rglob("*.py"))}


def statements(name: str, path: Path) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Each import of module ``name`` as (absolute module, names taken from it), at any depth of the
    file (imports inside functions included); ``import x`` takes no names."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            yield base, tuple(alias.name for alias in node.names)


def imports(name: str, path: Path) -> Iterator[str]:
    """Every module ``name`` imports (``from pkg import module`` counts that module too)."""
    for base, names in statements(name, path):
        yield base
        yield from (f"{base}.{taken}" for taken in names)


def within(imported: str, target: str) -> bool:
    return imported == target or imported.startswith(target + ".")


@pytest.mark.parametrize("name", sorted(modules("harness")))
def test_no_harness_module_reads_a_core_store(name):
    found = [i for i in imports(name, modules("harness")[name]) if within(i, "sqlite3") or within(i, "peerwire.store")]
    assert not found, f"{name} imports {found}: read a core through its export (harness.evidence.core)"


def test_the_core_imports_nothing_from_the_harness():
    offenders = {name for name, path in modules("peerwire").items()
                 if any(within(i, "harness") for i in imports(name, path))}
    assert offenders - CORE_IMPORTS_HARNESS_TODAY == set(), "the core must not depend on the harness"
    assert CORE_IMPORTS_HARNESS_TODAY <= offenders, (
        f"{sorted(CORE_IMPORTS_HARNESS_TODAY - offenders)} no longer import the harness: drop them from the list")


def test_the_core_imports_nothing_from_its_lab():
    offenders = {name: found for name, path in modules("peerwire").items()
                 if (found := sorted(i for i in imports(name, path) if within(i, "peerwire_lab")))}
    assert offenders == {}, "the fault campaign and the benchmark drive the core from peerwire_lab/, never the reverse"


JSONSCHEMA_BRINGS = {"referencing"}
"""What the core may import of what its one dependency, jsonschema, installs with it."""


def third_party(package: str) -> dict[str, set[str]]:
    """Module -> the top-level packages it imports that are neither the standard library nor the project's."""
    found: dict[str, set[str]] = {}
    for name, path in modules(package).items():
        tops = {i.split(".")[0] for i in imports(name, path)} - {""}
        outside = {top for top in tops if top not in sys.stdlib_module_names and top not in PACKAGES}
        if outside:
            found[name] = outside
    return found


def test_the_core_needs_only_its_declared_dependencies():
    # psutil, the MCP SDK and persist-queue belong to the suite, the runner and the lab: an import of one in
    # peerwire/ would break the core as installed with jsonschema alone.
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    allowed = {dependency.split(">")[0].split("=")[0].split("<")[0].strip() for dependency in declared}
    allowed |= JSONSCHEMA_BRINGS
    assert {name: tops - allowed for name, tops in third_party("peerwire").items() if tops - allowed} == {}


CORE_COMMANDS = {"peerwire.__main__", "peerwire.cli", "peerwire.codex.listen_bridge", "peerwire.diagrams"}
"""The core's modules that run as a command: ``peerwire`` itself, the listen socket's stdio face the Codex
adapter starts, and the lifecycle diagrams' generator. A campaign or a benchmark is a command too, which is
how one put back into peerwire/ shows."""


def commands(package: str) -> set[str]:
    found = set()
    for name, path in modules(package).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        guarded = any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)
        if guarded or path.name == "__main__.py":
            found.add(name)
    return found


def test_the_core_package_holds_only_the_core():
    assert commands("peerwire") == CORE_COMMANDS, (
        "peerwire/ holds the core alone: a new command of the core joins CORE_COMMANDS, a tool that drives the "
        "core goes to peerwire_lab/")


def test_the_lab_is_found_as_commands_and_third_party_imports():
    # The two checks above must see what the lab is made of, or they would pass on anything.
    assert {"peerwire_lab.faults", "peerwire_lab.bench.__main__"} <= commands("peerwire_lab")
    assert "psutil" in third_party("harness")["harness.contract.unread_flood"]


def test_every_project_import_names_a_module_that_exists():
    known = {name for package in PACKAGES for name in modules(package)}
    missing = [(name, base) for package in PACKAGES for name, path in modules(package).items()
               for base, _ in statements(name, path) if base.split(".")[0] in PACKAGES and base not in known]
    assert not missing, f"imports of modules that do not exist (an import inside a function fails late): {missing}"


def test_the_scan_sees_imports_in_every_form(tmp_path):
    # The scan itself must not miss the forms a regression would use.
    source = tmp_path / "harness" / "x" / "m.py"
    source.parent.mkdir(parents=True)
    source.write_text("import sqlite3 as s\nfrom peerwire import store\nfrom ..evidence import core\n"
                      "def f():\n    from peerwire.store import Store\n", encoding="utf-8")
    found = set(imports("harness.x.m", source))
    assert {"sqlite3", "peerwire.store", "harness.evidence.core"} <= found


def dependency_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports (anywhere in the file, ``TYPE_CHECKING`` included)."""
    known = {name: path for package in PACKAGES for name, path in modules(package).items()}
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for base, names in statements(name, path):
            targets = [f"{base}.{taken}" for taken in names if f"{base}.{taken}" in known]
            if len(targets) < len(names) or not names:
                targets.append(base)  # names taken from the module itself, or a plain ``import``
            graph[name].update(t for t in targets if t in known and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_among_project_modules():
    assert cycles(dependency_graph()) == []


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def layout_rows() -> list[str]:
    """The paths the README's layout table names, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text[text.index("## Layout"):]
    end = table.find("\n\n", table.index("| path |"))
    table = table if end < 0 else table[:end]
    return [line.split("`")[1] for line in table.splitlines() if line.startswith("| `")]


def test_the_readme_layout_table_matches_the_tree():
    rows = layout_rows()
    assert [row for row in rows if not (ROOT / row.rstrip("/")).exists() and row != "reports/"] == []
    packages = sorted(f"{path.parent.relative_to(ROOT).as_posix()}/" for package in PACKAGES
                      for path in (ROOT / package).rglob("__init__.py"))
    assert [package for package in packages if package not in rows] == []


def reach(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every project module ``start`` imports, directly or through others, with the packages that hold them."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for module in [*(".".join(parts[:i]) for i in range(1, len(parts))), name]:
            if module in graph and module not in seen:
                seen.add(module)
                todo.extend(graph[module])
    return seen - {start}


@pytest.mark.parametrize("interface", ["harness.contract.interface", "harness.lab.driver"])
def test_what_another_core_implements_imports_nothing_of_the_reference(interface):
    core = sorted(name for name in reach(dependency_graph(), interface) if within(name, "peerwire"))
    assert core == [], f"{interface} pulls in {core}: another core's provisioner or driver could not use it alone"


JUDGES = ("harness.evidence", "harness.acceptance")
"""What judges a core: it takes stage names, the envelope grammar and the capability table from the contract's
data (:mod:`harness.contract_tables`), never from the reference core, so a change to the reference cannot move
the verdicts with it."""
CONTRACT_READERS = ("harness.contract_tables", "harness.capabilities", "harness.evidence.envelope_grammar",
                    "harness.evidence.stages")
FINDS_THE_DATA = {"peerwire", "peerwire.resources"}
"""Where the package data is found (:mod:`harness.resources` builds on it): no rule of the core."""


def imports_of_the_reference(graph: dict[str, set[str]], packages: tuple[str, ...]) -> dict[str, list[str]]:
    found = {name: sorted(t for t in targets if within(t, "peerwire"))
             for name, targets in graph.items() if any(within(name, package) for package in packages)}
    return {name: targets for name, targets in found.items() if targets}


def test_the_judges_import_nothing_from_the_reference_core():
    assert imports_of_the_reference(dependency_graph(), JUDGES) == {}


@pytest.mark.parametrize("reader", CONTRACT_READERS)
def test_what_the_judges_read_of_the_contract_reaches_no_rule_of_the_reference(reader):
    reached = sorted(name for name in reach(dependency_graph(), reader) if within(name, "peerwire"))
    assert set(reached) <= FINDS_THE_DATA, f"{reader} pulls in {reached}"


def test_the_scripted_model_reads_envelopes_by_the_contracts_grammar():
    # It decides only from what Codex sends it: read by the reference's own renderer, another core's envelope
    # would be understood the way the reference writes one, not the way the contract says.
    renders = {"peerwire.envelope", "peerwire.collab"}
    found = {name: sorted(targets & renders) for name, targets in dependency_graph().items()
             if within(name, "harness.model")}
    assert {name: targets for name, targets in found.items() if targets} == {}


def test_the_judges_check_finds_an_import_of_the_reference():
    graph = {"harness.acceptance.checks.x": {"peerwire.envelope"}, "harness.evidence.y": {"harness.evidence.z"},
             "harness.lab.w": {"peerwire.app"}}
    assert imports_of_the_reference(graph, JUDGES) == {"harness.acceptance.checks.x": ["peerwire.envelope"]}


HARNESS_FLOORS: tuple[tuple[str, ...], ...] = (
    ("cli", "docs"),                                            # peerwire-harness: names every command's module
    ("acceptance",),                                            # the runner: scenarios, checks, its commands
    ("lab",),                                                   # live labs and the drivers of cores under test
    ("report", "codex"),                                        # reports; Codex installs, homes, protocol, probes
    ("model", "contract"),                                      # the scripted model; the contract suite
    ("evidence",),                                              # what a run left, read back
    ("capabilities",),                                          # agent kinds, providers, Codex capabilities
    # The ground floor (npm: Codex, MCP clients; invocation: the command the user typed; contract_tables: the
    # contract's tables, as data).
    ("process", "shards", "json_values", "names", "private", "npm", "invocation", "contract_tables"),
    ("resources",),                                             # the cellar: where the package data is found
)
"""The harness's rooms (folders, or modules directly in ``harness/``), top floor first. A room imports only
from rooms on lower floors: an import back up, or across one floor, makes two rooms one."""


def room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "harness" and len(parts) > 1 else None


def floor_of() -> dict[str, int]:
    return {name: height for height, rooms in enumerate(reversed(HARNESS_FLOORS)) for name in rooms}


def imports_against_the_floors(graph: dict[str, set[str]]) -> list[str]:
    floors = floor_of()
    found = []
    for module, targets in sorted(graph.items()):
        here = room(module)
        if here is None:
            continue
        for target in sorted(targets):
            there = room(target)
            if there is not None and there != here and floors[there] >= floors[here]:
                found.append(f"{module} -> {target} ({here} may import only from floors below its own)")
    return found


def test_every_harness_room_has_a_floor():
    rooms = {room(name) for name in modules("harness")} - {None}
    assert rooms - set(floor_of()) == set(), "give each new harness folder a floor in HARNESS_FLOORS"
    assert set(floor_of()) - rooms == set(), "HARNESS_FLOORS names rooms that no longer exist"


def test_harness_imports_run_only_down_the_floors():
    assert imports_against_the_floors(dependency_graph()) == []


def test_the_floor_check_finds_an_import_back_up_and_one_across():
    graph = {"harness.model.rules": {"harness.codex.home"}, "harness.codex.home": {"harness.report.writer"},
             "harness.report.writer": {"harness.evidence.stored"}, "harness.evidence.stored": set()}
    assert imports_against_the_floors(graph) == [
        "harness.codex.home -> harness.report.writer (codex may import only from floors below its own)",
        "harness.model.rules -> harness.codex.home (model may import only from floors below its own)",
    ]


def test_windows_code_is_tested_or_declared_experimental():
    # Code for a platform no CI job runs must say so where a reader decides whether to rely on it.
    workflows = " ".join(path.read_text(encoding="utf-8") for path in (ROOT / ".github" / "workflows").glob("*.yml"))
    if "windows-" in workflows:
        return
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "jobs_windows.py" in readme and "**experimental**" in readme
    assert "Experimental: no CI job runs it." in (ROOT / "harness/process/jobs_windows.py").read_text(encoding="utf-8")


def test_every_state_table_is_in_the_lifecycle_module():
    # One place for every lifecycle, as h11 keeps its state machine: a table built elsewhere is a second home.
    built = [f"{name}:{node.lineno}" for name, path in modules("peerwire").items() if name != "peerwire.lifecycle"
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("StateTable", "Lifecycle")]
    assert built == [], "build state tables in peerwire/lifecycle.py"


NAMES_REUSED_TODAY = {"adapter.py", "app.py", "artifacts.py", "capabilities.py", "cli.py", "collab.py", "delivery.py",
                      "driver.py", "fixtures.py", "home.py", "layout.py", "limits.py", "reference.py", "resources.py",
                      "scenario.py", "tui.py", "turns.py"}
"""File names more than one package uses today; a name joins only by a rename that says the concept, and leaves
when one of its files is renamed (a stale entry fails)."""


def test_no_file_name_is_reused_beyond_todays():
    # merge.py once meant a TOML three-way merge, shard verdicts and shard reports: a name should say which.
    counts: dict[str, int] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name not in ("__init__.py", "__main__.py"):
                counts[path.name] = counts.get(path.name, 0) + 1
    reused = {name for name, count in counts.items() if count > 1}
    assert reused - NAMES_REUSED_TODAY == set(), "name the new file after its concept"
    assert NAMES_REUSED_TODAY - reused == set(), "no longer reused: drop it from NAMES_REUSED_TODAY"


STORE_PARTS = {"database": "Database", "registry": "Registry", "mailbox": "Mailbox", "bindings": "Bindings"}


def store_classes() -> dict[str, ast.ClassDef]:
    return {node.name: node for path in (ROOT / "peerwire" / "store").glob("*.py")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef)}


def test_the_store_is_composed_of_parts_a_reader_finds_in_one_step():
    # store.mailbox.receive is Mailbox.receive: no part inherits another, so no method hides five classes down.
    classes = store_classes()
    inherited = {name: [ast.unparse(base) for base in node.bases if ast.unparse(base) in classes]
                 for name, node in classes.items()}
    assert {name: bases for name, bases in inherited.items() if bases} == {}
    init = next(node for node in classes["Store"].body if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    parts = {target.attr: ast.unparse(assign.value.func) for assign in init.body if isinstance(assign, ast.Assign)
             for target in assign.targets if isinstance(target, ast.Attribute) and isinstance(assign.value, ast.Call)}
    assert parts == STORE_PARTS
    # Every part is built over the one database, and nothing else.
    over = {ast.unparse(assign.value) for assign in init.body if isinstance(assign, ast.Assign)
            and isinstance(assign.value, ast.Call) and ast.unparse(assign.value.func) != "Database"}
    assert over == {f"{cls}(self.database)" for cls in STORE_PARTS.values() if cls != "Database"}
