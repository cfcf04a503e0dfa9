"""The protocol profile against a server that answers exactly as JSON-RPC 2.0 and MCP 2025-11-25 say.

``spec_exact_server.py`` answers in every legal form the suite must accept:
an error whose request id cannot be read carries ``"id": null`` or (under
2025-11-25) no id, and a batch under 2025-03-26 is answered in one array or one
line per answer. Its verdict is pinned like the official servers' (see
``test_official_servers.py``): every protocol MUST passes, in all four
combinations, and each form the server used is noted on the verdict. A
failure here is the suite being unfair to a correct server.

``make test`` runs a covering design (each form of each switch once: null ids
with one array, no ids with separate lines); ``make full`` adds the other two.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from harness.contract.manifest import PROTOCOL, Level, manifest

from .conftest import run_contract

SERVER = Path(__file__).resolve().parent / "spec_exact_server.py"
QUICK = {"PEERWIRE_FUZZ_EXAMPLES": "0.25"}
COVERING = {("null", "array"), ("omit", "lines")}


def _combinations():
    for missing_id in ("null", "omit"):
        for batch in ("array", "lines"):
            marks = () if (missing_id, batch) in COVERING else (pytest.mark.full,)
            yield pytest.param(missing_id, batch, marks=marks, id=f"{missing_id}-ids-{batch}")


@pytest.mark.slow
@pytest.mark.parametrize(("missing_id", "batch"), list(_combinations()))
def test_every_protocol_must_passes_in_each_legal_form(tmp_path, missing_id, batch):
    command = shlex.join([sys.executable, str(SERVER), "--missing-id", missing_id, "--batch", batch])
    run = run_contract(tmp_path, "--server-cmd", command, "--tool-call", 'echo {"text": "hi"}', "--call-timeout",
                       "10", "-n", "2", env=QUICK)
    verdicts = {r["id"]: r["result"] for r in run.compliance["requirements"] if r["profile"] == PROTOCOL}
    musts = {r.id for r in manifest() if r.profile == PROTOCOL and r.level is Level.MUST}
    assert musts and {rid: verdicts.get(rid) for rid in musts} == dict.fromkeys(musts, "pass"), run.output[-3000:]
    assert run.returncode == 0, run.output[-2000:]
    # The form the server used is shown, not silently accepted.
    notes = " ".join(note for r in run.compliance["requirements"] for note in r.get("notes", []))
    assert ('"id": null' if missing_id == "null" else "without id") in notes, notes[:2000]
    assert ("one array" if batch == "array" else "separate lines") in run.result("wire:batch:2025-03-26")["notes"][0]
