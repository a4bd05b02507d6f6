"""Bounds on untrusted structured input: how many values shared references expand to, and short reprs.

YAML aliases (``*a``) and pickle's memo references let a few hundred bytes
stand for billions of values: the parsed object shares one list many times
over, which costs nothing until something walks it as a tree (``repr``,
``numpy.asarray``, a validator), and then it costs gigabytes and minutes
("billion laughs"). :func:`expanded_size` counts the values an object stands
for with every shared reference expanded, in time linear in the number of
*distinct* containers, and stops at a limit; callers refuse inputs beyond it
before anything walks them. :func:`short_repr` formats any value within a
bounded number of characters without walking more of it than it shows.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["ExpansionError", "expanded_size", "yaml_node_size", "short_repr"]

_CONTAINERS = (dict, list, tuple, set, frozenset)


class ExpansionError(ValueError):
    """An input expands beyond the allowed number of values, or contains itself."""


def _children(obj):
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield key
            yield value
    else:
        yield from obj


def _count(root, is_container, children, limit: int, what: str) -> int:
    """Shared post-order walk of :func:`expanded_size` and :func:`yaml_node_size` (iterative, memoised)."""
    if not is_container(root):
        return 1
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, closing = stack.pop()
        key = id(node)
        if closing:
            open_.discard(key)
            total = 1 + sum(sizes[id(c)] if is_container(c) else 1 for c in children(node))
            if total > limit:
                raise ExpansionError(f"{what} expands to more than {limit} values (shared references "
                                     f"such as YAML aliases or pickle memo entries repeat their contents)")
            sizes[key] = total
            continue
        if key in sizes:
            continue
        open_.add(key)
        stack.append((node, True))
        for child in children(node):
            if is_container(child) and id(child) not in sizes:
                if id(child) in open_:
                    raise ExpansionError(f"{what} contains itself (a recursive alias or reference)")
                stack.append((child, False))
    return sizes[id(root)]


def expanded_size(obj: Any, limit: int, what: str = "the input") -> int:
    """Number of values ``obj`` stands for when every shared reference is expanded.

    A container counts itself plus the expanded size of each item (a dict:
    each key and each value); anything else counts 1. The walk visits each
    distinct container once, however often it is shared.

    Parameters
    ----------
    obj : object
        Parsed input (dict, list, tuple, set, frozenset and scalars).
    limit : int
        Largest size accepted.
    what : str
        Names the input in the error message.

    Returns
    -------
    int
        The expanded size (at most ``limit``).

    Raises
    ------
    ExpansionError
        The expanded size exceeds ``limit``, or ``obj`` contains itself.
    """
    return _count(obj, lambda o: isinstance(o, _CONTAINERS), _children, limit, what)


def yaml_node_size(node, limit: int, what: str = "the YAML document") -> int:
    """:func:`expanded_size` of a composed YAML node graph (before any Python object is built).

    Aliases are shared nodes here, and merge keys (``<<: *a``) reference the
    merged mapping's node, so counting the graph bounds what constructing it
    (which copies merged entries) will cost.

    Raises
    ------
    ExpansionError
        As :func:`expanded_size`.
    """
    import yaml

    def is_container(n):
        return isinstance(n, yaml.CollectionNode)

    def children(n):
        if isinstance(n, yaml.MappingNode):
            for key, value in n.value:
                yield key
                yield value
        else:
            yield from n.value

    return _count(node, is_container, children, limit, what)


def _bounded_repr(limit: int) -> reprlib.Repr:
    r = reprlib.Repr()
    r.maxlevel = 3
    r.maxdict = r.maxlist = r.maxtuple = r.maxset = r.maxfrozenset = r.maxdeque = r.maxarray = 6
    r.maxstring = r.maxother = max(limit, 8)
    r.maxlong = 40
    return r


def short_repr(value: Any, limit: int = 120) -> str:
    """A repr of ``value`` of at most about ``limit`` characters, however large or shared ``value`` is.

    Nested containers are shown to three levels and six items each
    (``reprlib``); whatever is left out is written ``...``. Safe on
    anything: a repr that raises is replaced by the type name.
    """
    try:
        text = _bounded_repr(limit).repr(value)
    except Exception:  # noqa: BLE001 - a message must never fail
        return f"<{type(value).__name__}>"
    if len(text) > limit:
        return f"{text[:limit]}..."
    return text
