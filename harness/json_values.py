"""Walking decoded JSON values: one walker for every reader that searches a document.

:func:`walk` yields every node of a value (objects, arrays and leaves) depth
first, each with its path of keys and indexes; a reader that must not enter some
nodes (the contract cases' expressions enter only their operands) says which
children to visit instead of writing its own recursion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

Path = tuple[str | int, ...]
"""Keys (of objects) and indexes (of arrays) from the top of a value to one of its nodes."""


def members(value: Any) -> Iterable[tuple[str | int, Any]]:
    """A node's children with their keys: an object's items, an array's indexed elements, a leaf's none."""
    if isinstance(value, dict):
        return value.items()
    if isinstance(value, list):
        return enumerate(value)
    return ()


def walk(value: Any, *, children: Callable[[Any], Iterable[tuple[str | int, Any]]] = members,
         path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every node of ``value`` as ``(path, node)``, the node before its children, in document order."""
    yield path, value
    for key, child in children(value):
        yield from walk(child, children=children, path=(*path, key))


def strings(value: Any) -> Iterator[str]:
    """Every string in ``value`` (keys excluded), in document order."""
    return (node for _, node in walk(value) if isinstance(node, str))
