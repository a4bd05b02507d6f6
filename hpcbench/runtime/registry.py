"""Registries: name -> method, one helper for every extension point of the project.

Every registry (compressors, allreduce algorithms, synchronisers, monitors,
FL selectors, aggregators, datasets and models, layer allocators, policies,
trace formats...) is a :class:`Registry`: a ``dict`` from the name a config
uses to the class, function or entry that implements it. Reading an unknown
name is the same :class:`UnknownName` error everywhere, naming the registry's
kind and listing the registered names, so a config naming a method that does
not exist exits with status 2 and the same kind of message whichever registry
it is.

A registry that holds a method per file is filled by one line per method (a
``dict`` literal at its definition, or :meth:`Registry.register`); configs,
``--help`` and tests read the names from it, never from a second list.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, TypeVar

from hpcbench.runtime.errors import InputError

__all__ = ["Registry", "UnknownName"]

T = TypeVar("T")


class UnknownName(InputError, KeyError):
    """A name no registry entry has; the message names the kind and lists the registered names.

    An :class:`~hpcbench.runtime.errors.InputError` (a bad config ends the
    job with status 2, and pydantic validators turn it into a
    :class:`~hpcbench.runtime.config.ConfigError` naming the key) and a
    ``KeyError`` (a registry is a mapping; ``except KeyError`` keeps working).
    """

    __str__ = BaseException.__str__     # KeyError's would quote the message


class Registry(dict[str, T]):
    """A ``dict`` of name -> method whose missing names raise :class:`UnknownName`.

    Parameters
    ----------
    kind : str
        What the entries are, in messages (``"compressor"``, ``"allreduce
        algorithm"``).
    entries : mapping or iterable of (name, entry) pairs, optional
        The registered methods, in the order they are listed (``--help``,
        messages and sweeps keep it).

    Examples
    --------
    >>> ALLOCATORS = Registry("allocator", {"even": even.allocate})
    >>> ALLOCATORS["evn"]
    Traceback (most recent call last):
    UnknownName: unknown allocator 'evn'; registered: even
    """

    def __init__(self, kind: str, entries: Mapping[str, T] | Iterable[tuple[str, T]] = ()) -> None:
        super().__init__(entries)
        self.kind = kind

    def __missing__(self, name):
        raise UnknownName(self.unknown(name))

    def unknown(self, name) -> str:
        """The message for an unknown ``name``: ``unknown KIND 'NAME'; registered: a, b, c``."""
        return f"unknown {self.kind} {name!r}; registered: {', '.join(map(str, self)) or 'none'}"

    def register(self, name: str, entry: T | None = None):
        """Add ``entry`` under ``name``; without ``entry``, a decorator that adds what it decorates.

        Raises
        ------
        ValueError
            ``name`` is taken.
        """
        def add(obj: T) -> T:
            if name in self:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self[name] = obj
            return obj
        return add if entry is None else add(entry)

    def check(self, name: str) -> str:
        """``name`` if it is registered (a config validator's check).

        Raises
        ------
        UnknownName
            It is not.
        """
        if name not in self:
            raise UnknownName(self.unknown(name))
        return name

    def checker(self) -> Callable[[str], str]:
        """:meth:`check` as a plain function of the value, for ``field_validator("name")(REGISTRY.checker())``
        (pydantic would unwrap a bound method and pass it the validation info)."""
        def check(value: str) -> str:
            return self.check(value)
        return check

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {dict.__repr__(self)})"
