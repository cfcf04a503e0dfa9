"""Help texts and errors name the command the user ran: ``peerwire-harness`` or ``python runner.py``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.patience import WAIT_S

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())"]
CHECKOUT = [sys.executable, str(ROOT / "runner.py")]


def _help(command: list[str], *args: str) -> str:
    done = subprocess.run([*command, *args, "--help"], capture_output=True, text=True, timeout=WAIT_S, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("args", [["contract"], ["accept"], ["report"]])
def test_the_installed_commands_help_names_no_checkout_script(args):
    text = _help(INSTALLED, *args)
    assert "runner.py" not in text and f"peerwire-harness {args[0]}" in text


def test_the_checkout_script_names_itself():
    text = _help(CHECKOUT, "contract")
    assert "python runner.py contract" in text and "`python runner.py report merge`" in text


def test_contract_help_offers_the_protocol_profile_and_one_durations_default():
    contract, accept = _help(INSTALLED, "contract"), _help(INSTALLED, "accept")
    assert "protocol, messaging, collab" in " ".join(contract.split())
    shipped = "the durations shipped with peerwire"
    assert shipped in " ".join(contract.split()) and shipped in " ".join(accept.split())
