"""A report's run-level store: what its scenario runs share, kept once for the whole report.

Every scenario run offers its models the same tool lists and sends them the same
system prompts; kept per scenario run they made a report mostly copies. So:

* ``report.json`` holds each distinct tool list a model was offered once, under
  ``store.tool_lists`` by its SHA-256; a scenario's ``tool_schemas`` name theirs
  by that digest (:func:`keep_tool_lists`, :func:`tool_list`).
* ``artifacts/model-bodies.jsonl`` holds the values of every scenario run's
  model request bodies file (:mod:`harness.evidence.model_bodies`), each once,
  so the runs' prompts and tool lists are stored, and compressed, together
  (:func:`gather_bodies`). Every request of every log still expands to its whole
  body, checked against the SHA-256 logged when it arrived.
* the same store holds the long strings of every Codex rollout (the system prompt
  each rollout opens with, instructions and context blocks), each once; a stored
  rollout names them by digest and reads back byte for byte
  (:mod:`harness.evidence.long_strings`, :func:`keep_long_strings`).

Both are built when a report is written and again when shard reports merge.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.evidence import long_strings, stored
from harness.evidence.model_bodies import BODIES_SUFFIX, RUN_BODIES
from harness.private import write_private

STORE = "store"
TOOL_LISTS = "tool_lists"


def keep_tool_lists(sections: Iterable[dict[str, Any]],
                    store: dict[str, Any] | None = None) -> dict[str, Any]:
    """Move the tool lists of ``sections``' ``tool_schemas`` into ``store`` (a report's ``store``), each once
    by its digest; the sections keep the digest. Returns the store."""
    store = store if store is not None else {TOOL_LISTS: {}}
    lists = store.setdefault(TOOL_LISTS, {})
    for section in sections:
        for seen in section["tool_schemas"]:
            tools = seen.pop("tools", None)
            if tools is not None:
                lists.setdefault(seen["sha256"], tools)
    return store


def tool_list(report: Mapping[str, Any], digest: str) -> list[dict[str, Any]]:
    """The tool list a report keeps under ``digest``."""
    return report[STORE][TOOL_LISTS][digest]


def gather_bodies(artifacts: Path, files: list[Path], *, also: Iterable[Path] = ()) -> list[Path]:
    """Keep the values of every bodies file among ``files`` (and of the stores in ``also``, such as shards'
    run-level stores) once, in ``artifacts/model-bodies.jsonl``; the bodies files are removed.

    Returns ``files`` without the bodies files, with the run-level store (when there is anything to keep).
    Values are kept in the order first met, each under the digest its file gave it.
    """
    bodies = [path for path in files if path.name.endswith(BODIES_SUFFIX)]
    sources = [*bodies, *also]
    if not sources:
        return files
    kept: dict[str, str] = {}
    for source in sources:
        with stored.open_text(source) as handle:
            for raw in handle:
                if raw.strip():
                    kept.setdefault(json.loads(raw)["sha256"], raw if raw.endswith("\n") else raw + "\n")
    for path in bodies:
        path.unlink()
    store = artifacts / RUN_BODIES
    write_private(store, "".join(kept.values()))
    return [path for path in files if path not in bodies] + [store]


def keep_long_strings(artifacts: Path, files: list[Path]) -> list[Path]:
    """Store the Codex rollouts among ``files`` (plain, as the run wrote them) with their long strings kept
    once in ``artifacts``' run-level store (:mod:`harness.evidence.long_strings`), which is created if need
    be. Returns ``files``, with the store when it was created. Call once everything that reads the rollouts
    plain has read them, right before the files are compressed."""
    store = artifacts / RUN_BODIES
    known: set[str] = set()
    if store.is_file():
        with store.open(encoding="utf-8") as handle:
            known = {json.loads(raw)["sha256"] for raw in handle if raw.strip()}
    added: list[str] = []

    def keep(key: str, value: Any) -> None:
        if key not in known:
            known.add(key)
            added.append(json.dumps({"sha256": key, "value": value}, ensure_ascii=False) + "\n")

    for path in files:
        if long_strings.applies(path.name):
            data = path.read_bytes()
            interned = long_strings.intern(data, keep)
            if interned != data:
                mode = path.stat().st_mode & 0o777
                path.write_bytes(interned)
                path.chmod(mode)
    if not added:
        return files
    created = not store.is_file()
    if created:
        write_private(store, "".join(added))
    else:
        with store.open("a", encoding="utf-8") as out:
            out.write("".join(added))
    return [*files, store] if created else files
