"""``peerwire-harness docs [PAGE]``: the documentation that ships with peerwire, wherever it is installed.

Without a page it names the folder the pages are in and lists them with their titles; with one
(``contract-suite``, ``adopting.md``) it prints that page. The pages are package data
(:func:`harness.resources.docs`), so a wheel installed into an empty folder carries them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness import invocation
from harness.resources import docs


def pages(folder: Path) -> dict[str, Path]:
    """Page name (the file name without ``.md``) -> its file."""
    return {path.stem: path for path in sorted(folder.glob("*.md"))}


def title(path: Path) -> str:
    for line in path.read_text("utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=invocation.command("docs"),
                                     description="List the documentation pages that ship with peerwire, or print one.")
    parser.add_argument("page", nargs="?", help="a page to print, e.g. contract-suite or adopting (default: list them)")
    args = parser.parse_args(argv)
    folder = docs()
    found = pages(folder)
    if args.page is None:
        print(f"peerwire's documentation is in {folder}:")
        width = max(map(len, found), default=0)
        for name, path in found.items():
            print(f"  {name:<{width}}  {title(path)}")
        print(f"`{invocation.command('docs')} PAGE` prints one.")
        return 0
    name = Path(args.page).name.removesuffix(".md")
    if name not in found:
        print(f"{invocation.command('docs')}: no page {args.page!r}; the pages: {', '.join(found)}", file=sys.stderr)
        return 2
    sys.stdout.write(found[name].read_text("utf-8"))
    return 0
