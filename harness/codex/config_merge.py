"""Undo a projection key by key: a three-way merge of original, projected and current TOML.

A projection changes some keys of a user's ``config.toml`` for the length of a
run; meanwhile the user may edit the same file. Undoing it must put back what
the projection changed and the user did not touch, and keep whatever the user
changed. For every key (a dotted path to a value; inline tables and arrays are
values) with ``o``, ``p`` and ``c`` its value in the original, projected and
current file (or absent):

* ``c == p``: the user left it alone, so it becomes ``o`` again (removed when
  ``o`` is absent);
* ``c != p``: the user changed it, so ``c`` stays; when the projection had
  changed it too (``o != p``) and the user did not simply set it back
  (``c != o``), that is a :class:`Conflict`, reported.

The current document is edited in place (tomlkit), so the user's comments,
order and formatting survive, and an original value comes back with its own
comment. Tables the projection added that end up empty are removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tomlkit
from tomlkit.container import OutOfOrderTableProxy
from tomlkit.items import Table

Key = tuple[str, ...]

# A table whose parts are spread over the file ([a.x], then [b], then [a.y]) is read through a proxy.
_TABLES = (Table, OutOfOrderTableProxy)


class _Absent:
    def __repr__(self) -> str:
        return "absent"


ABSENT: Any = _Absent()


@dataclass(frozen=True)
class Conflict:
    """A key both the projection and the user changed; the user's value was kept.

    ``key`` is dotted (``""``: the whole file); ``original``, ``projected`` and
    ``current`` are plain values, ``None`` where the key was absent.
    """

    key: str
    original: Any
    projected: Any
    current: Any
    note: str = ""

    def __str__(self) -> str:
        if self.note:
            return self.note
        return (f"{self.key}: kept your edit {self.current!r} made during the run "
                f"(before the run {self.original!r}, projected {self.projected!r})")


def merge(original: str, projected: str, current: str) -> tuple[str, list[Conflict]]:
    """The text that undoes the projection in ``current``, and the conflicts kept as the user left them.

    Raises ``tomlkit.exceptions.TOMLKitError`` when ``current`` is not TOML
    (``original`` and ``projected`` were parsed before, by the projection).
    """
    document = tomlkit.parse(current)
    before, during = tomlkit.parse(original), tomlkit.parse(projected)
    o, p, c = _leaves(before), _leaves(during), _leaves(document)
    conflicts = []
    for key in sorted(set(o) | set(p) | set(c)):
        was, set_to, now = o.get(key, ABSENT), p.get(key, ABSENT), c.get(key, ABSENT)
        if _plain(now) == _plain(set_to):
            if _plain(now) != _plain(was):
                _put(document, key, was)
        elif _plain(was) != _plain(set_to) and _plain(now) != _plain(was):
            conflicts.append(Conflict(".".join(key), _plain_or_none(was), _plain_or_none(set_to),
                                      _plain_or_none(now)))
    _prune(document, _tables(before))
    return tomlkit.dumps(document), conflicts


def _leaves(container: Any, prefix: Key = ()) -> dict[Key, Any]:
    out: dict[Key, Any] = {}
    for name, item in container.items():
        key = (*prefix, str(name))
        if isinstance(item, _TABLES):
            out.update(_leaves(item, key))
        else:
            out[key] = item
    return out


def _tables(container: Any, prefix: Key = ()) -> set[Key]:
    out: set[Key] = set()
    for name, item in container.items():
        if isinstance(item, _TABLES):
            key = (*prefix, str(name))
            out.add(key)
            out |= _tables(item, key)
    return out


def _plain(item: Any) -> Any:
    if item is ABSENT:
        return ABSENT
    return item.unwrap() if hasattr(item, "unwrap") else item


def _plain_or_none(item: Any) -> Any:
    value = _plain(item)
    return None if value is ABSENT else value


def _put(document: tomlkit.TOMLDocument, key: Key, item: Any) -> None:
    """Set ``key`` to ``item`` (the original's own item, with its comment), or remove it when absent."""
    parent: Any = document
    for name in key[:-1]:
        if name not in parent or not isinstance(parent[name], _TABLES):
            if item is ABSENT:
                return
            parent[name] = tomlkit.table(is_super_table=True)
        parent = parent[name]
    if item is ABSENT:
        if key[-1] in parent:
            del parent[key[-1]]
    else:
        parent[key[-1]] = item


def _prune(document: tomlkit.TOMLDocument, keep: set[Key]) -> None:
    """Remove tables left empty that the original did not have (deepest first)."""
    for key in sorted(_tables(document), key=len, reverse=True):
        if key in keep:
            continue
        parent: Any = document
        for name in key[:-1]:
            parent = parent[name]
        if len(parent[key[-1]]) == 0:
            del parent[key[-1]]
