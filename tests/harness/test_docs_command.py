"""``peerwire-harness docs``: the documentation ships as package data and the command finds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli, docs
from harness.resources import docs as docs_folder

ROOT = Path(__file__).resolve().parents[2]


def test_the_listing_names_the_folder_and_every_page(capsys):
    assert cli.main(["docs"]) == 0
    out = capsys.readouterr().out
    assert str(docs_folder()) in out
    for page in ("adopting", "contract-suite", "acceptance"):
        assert f"  {page} " in out


@pytest.mark.parametrize("name", ["contract-suite", "contract-suite.md", "docs/contract-suite.md"])
def test_a_page_is_printed_whole(capsys, name):
    assert cli.main(["docs", name]) == 0
    assert capsys.readouterr().out == (docs_folder() / "contract-suite.md").read_text("utf-8")


def test_an_unknown_page_names_the_pages(capsys):
    assert cli.main(["docs", "no-such-page"]) == 2
    err = capsys.readouterr().err
    assert "no page 'no-such-page'" in err and "adopting" in err


def test_the_dispatchers_help_says_where_the_docs_are(capsys):
    assert cli.main(["--help"]) == 0
    assert f"installed in {docs_folder()}" in capsys.readouterr().out


def test_every_page_of_the_checkout_is_package_data():
    """What the wheel ships is what ``docs/`` holds: pyproject.toml's package-data globs cover every page."""
    shipped = set(docs.pages(docs_folder()))
    assert shipped == {p.stem for p in (ROOT / "docs").glob("*.md")} and "adopting" in shipped
    assert {p.suffix for p in (ROOT / "docs").iterdir() if p.is_file() and p.name != "__init__.py"} <= {".md", ".png"}
