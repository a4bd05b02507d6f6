"""Typed YAML job configuration shared by every runner.

A runner describes its job as a pydantic model (subclass :class:`Strict`);
:func:`load_config` reads a YAML file, applies ``--dotted.key value``
overrides from the command line, and validates. Every failure, whatever the
input (a missing, unreadable, non-UTF-8, empty or malformed file, an unknown
key, a wrong type, an out-of-range value), is a :class:`ConfigError` whose
message names the key and the value (and, for a value given as ``--KEY
VALUE``, the flag rather than the file). Bounded whatever the input: a YAML
document whose aliases expand beyond :data:`MAX_CONFIG_VALUES` values is
refused before it is built, and values are shortened in messages
(:func:`~hpcbench.runtime.bounded.short_repr`) without walking them. Floats
are finite everywhere: :class:`Strict` refuses ``.inf`` and ``.nan`` for
every float field of every section.
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import math
import textwrap
import typing
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Mapping, Union

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model

from hpcbench.runtime.bounded import INPUT_BOUNDS, ExpansionError, short_repr, yaml_node_size
from hpcbench.runtime.errors import InputError

__all__ = ["ConfigError", "Strict", "StrategyConfig", "strategy_section", "section_options", "validate_section", "load_config", "flatten_keys", "keys_help",
           "attribute_docstrings", "field_description",
           "short_repr", "add_config_arguments", "config_overrides", "read_yaml_mapping", "load_yaml_text", "parse_finite",
           "finite_float", "MAX_CONFIG_BYTES", "MAX_CONFIG_VALUES"]

#: Largest config file accepted (a job file is a few hundred bytes).
MAX_CONFIG_BYTES = INPUT_BOUNDS["config"]
#: Most values a YAML document (a job file or a ``--KEY VALUE``) may stand for once its aliases are expanded.
MAX_CONFIG_VALUES = 100_000


class ConfigError(InputError):
    """Invalid job configuration; the message names the key and the value."""


class Strict(BaseModel):
    """Base of every config section: unknown keys are errors, types are not coerced, frozen.

    A field's meaning, shown by ``--help`` (:func:`keys_help`), is its
    ``Field(description=...)`` or the docstring written on the line after it.
    The docstrings are read from the source only when ``--help`` asks
    (:func:`attribute_docstrings`), not by pydantic's
    ``use_attribute_docstrings`` at class creation: that walks the stack and
    ``inspect.getmodule`` for every model class (with the eager help listing,
    about 0.06 s of CPU per process, docs/fl.md "Start-up"), paid by each of a job's ranks (64 of them in ``mpirun -np 64
    python -m hpcbench.fl``) at every start.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class StrategyConfig(Strict):
    """Base of a strategy's config section (a strategy with no keys uses it as is)."""


def _title(entry, name: str) -> str:
    """A class's name, or the CamelCase of a registered name (``sky-milp`` -> ``SkyMilp``) for an entry object."""
    return entry.__name__ if isinstance(entry, type) else "".join(w.title() for w in name.replace("_", "-").split("-"))


def strategy_section(registry: Mapping[str, type], key: str, default: str | None = None,
                     shorthand: Callable[[str], dict] | None = None):
    """The config field of a strategy registry: ``{name: NAME, ...NAME's own keys}``.

    Each registered class's ``Config`` (a :class:`StrategyConfig` subclass)
    gets a ``name`` literal (its registry key), and the section is validated
    as the union discriminated by ``name``; a bare string stands for
    ``shorthand(string)``, by default ``{name: string}``. Every runner builds
    its strategies this way (FL selectors and server optimizers, training
    synchronisers, policies): a strategy is built from its own section, never
    from the whole job config. A list of sections is ``list[annotation]``.

    Parameters
    ----------
    registry : mapping of str to class
        Name to a strategy class (or a registry entry, such as a layer
        allocator's) with a ``Config`` attribute (a
        :class:`hpcbench.runtime.registry.Registry`: an unknown name is its
        message, listing the registered ones).
    key : str
        The config key, for messages and ``--help``.
    default : str, optional
        Registered name used when the key is omitted (None: no default instance).
    shorthand : callable, optional
        ``str -> dict`` for a bare string (e.g. ``"ring:priority"`` ->
        ``{name: ring, schedule: priority}``).

    Returns
    -------
    (annotation, default instance or None)
        For a pydantic field ``key: annotation = default``.
    """
    sections = {name: create_model(f"{_title(cls, name)}Section", __base__=cls.Config,
                                   __doc__=cls.Config.__doc__,
                                   name=(Literal[name], Field(name, description=f"{key} strategy")))
                for name, cls in registry.items()}
    names = ", ".join(sections)
    unknown = getattr(registry, "unknown", lambda name: f"unknown name {name!r}; registered: {names}")

    def _named(value):
        if isinstance(value, str):
            value = shorthand(value) if shorthand is not None else {"name": value}
        if isinstance(value, dict):
            name = value.get("name")
            if name not in sections:
                raise ValueError(f"no name; registered: {names}" if name is None else unknown(name))
        return value

    annotation = Annotated[Union[tuple(sections.values())], Field(discriminator="name"),
                           BeforeValidator(_named)]
    return annotation, sections[default]() if default is not None else None


def section_options(section: BaseModel) -> dict:
    """The keyword arguments a strategy's section gives its method: every key but ``name``."""
    return section.model_dump(exclude={"name"})


def validate_section(adapter, value, key: str):
    """``value`` validated by ``adapter`` (a ``TypeAdapter`` of a :func:`strategy_section`), for a validator
    or a method that builds a section on demand.

    Raises
    ------
    ValueError
        ``KEY: NAME.OPTION: what is wrong`` for the first error (an unknown name: the registry's message).
    """
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise ValueError(f"{key}: {where + ': ' if where else ''}{first['msg'].removeprefix('Value error, ')}") \
            from None


def parse_finite(text: str) -> float:
    """A finite float from text.

    Raises
    ------
    ValueError
        The text is not a number, or is infinite or NaN (the message quotes it).
    """
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"invalid number {short_repr(text)}") from None
    if not math.isfinite(value):
        raise ValueError(f"{short_repr(text)} is not a finite number")
    return value


def finite_float(text: str) -> float:
    """:func:`parse_finite` as an ``argparse`` type: the type of every ``type=float`` flag.

    The lifecycle's parser registers it for ``float``
    (:class:`~hpcbench.lifecycle.parser.RankParser`), so no runner's flag
    takes ``inf`` or ``nan``.

    Raises
    ------
    argparse.ArgumentTypeError
        The text is not a number, or is infinite or NaN.
    """
    try:
        return parse_finite(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def load_yaml_text(text: str, source: str) -> Any:
    """``yaml.safe_load(text)`` bounded: aliases may not expand it beyond :data:`MAX_CONFIG_VALUES` values.

    The composed node graph is counted (:func:`~hpcbench.runtime.bounded.yaml_node_size`)
    before any Python object is built, so an alias bomb costs microseconds.

    Raises
    ------
    ConfigError
        Not valid YAML, nested too deeply, several documents, a recursive
        alias, or too many values once expanded; the message names ``source``.
    """
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        yaml_node_size(node, MAX_CONFIG_VALUES, source)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {short_repr(str(exc), 300)}") from None
    except ExpansionError as exc:
        raise ConfigError(str(exc)) from None
    except RecursionError:
        raise ConfigError(f"{source}: YAML nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def _sections(ann: Any) -> list[type[BaseModel]]:
    """The models a field holds: ``[ann]`` for a section, its members for a union of sections, else []."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [ann]
    members = typing.get_args(ann) if typing.get_origin(ann) is typing.Union else ()
    if members and all(isinstance(m, type) and issubclass(m, BaseModel) for m in members):
        return list(members)
    return []


def _annotation(model: type[BaseModel], dotted: str) -> Any:
    """The type annotation of the field at ``dotted`` (None when a part is not one single section)."""
    parts = dotted.split(".")
    for part in parts[:-1]:
        field = model.model_fields.get(part)
        sections = _sections(field.annotation) if field is not None else []
        if len(sections) != 1:
            return None
        model = sections[0]
    field = model.model_fields.get(parts[-1])
    return None if field is None else field.annotation


def _listed_sections(ann: Any) -> list[type[BaseModel]]:
    """The sections a ``list`` of sections chosen by ``name`` holds (``sync: [ring, {name: sma}]``), else []."""
    if typing.get_origin(ann) is not list or len(typing.get_args(ann)) != 1:
        return []
    item = typing.get_args(ann)[0]
    if typing.get_origin(item) is Annotated:
        item = typing.get_args(item)[0]
    sections = _sections(item)      # one registered strategy: no Union left
    return sections if all("name" in s.model_fields for s in sections) else []


def _chosen_sections(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted keys of the fields holding one of several sections, chosen by their ``name``."""
    keys = []
    for name, field in model.model_fields.items():
        sections = _sections(field.annotation)
        if len(sections) > 1:
            keys.append(prefix + name)
        elif sections:
            keys += _chosen_sections(sections[0], prefix + name + ".")
    return keys


def flatten_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every leaf key of a config model, dotted (``dataset.alpha``...).

    A field holding one of several sections (a strategy chosen by ``name``)
    contributes itself (``--selection oort`` replaces the whole section) and
    the keys of all of them, each once.
    """
    keys: list[str] = []
    for name, field in model.model_fields.items():
        sections = _sections(field.annotation)
        if len(sections) != 1:
            keys.append(prefix + name)
        for section in sections:
            keys += [k for k in flatten_keys(section, prefix + name + ".") if k not in keys]
    return keys


@functools.lru_cache(maxsize=None)
def attribute_docstrings(cls: type) -> dict[str, str]:
    """The docstrings written under the annotated attributes of ``cls``'s own body, by attribute name.

    A string literal on the statement right after ``name: annotation [= value]``
    is ``name``'s docstring (PEP 257's "attribute docstrings"; the convention
    pydantic's ``use_attribute_docstrings`` reads). Classes whose source
    cannot be read (built at run time by ``create_model``, or without source
    files) give an empty mapping.

    Parameters
    ----------
    cls : type
        A class; only its own body is read (see :func:`field_description` for
        the inherited fields).

    Returns
    -------
    dict of str to str
        Attribute name to its docstring, cleaned by :func:`inspect.cleandoc`.
    """
    try:
        source = textwrap.dedent(inspect.getsource(cls))
        body = ast.parse(source).body[0].body
    except (OSError, TypeError, SyntaxError, IndexError, AttributeError):
        return {}
    docs = {}
    for stmt, after in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


def field_description(model: type[BaseModel], name: str) -> str:
    """A field's meaning for ``--help``: its ``Field(description=...)``, else its attribute docstring.

    The docstring is looked up in the classes of ``model``'s MRO, nearest
    first, that declare ``name`` in their own body (a section made by
    :func:`strategy_section` inherits its strategy's ``Config``).

    Returns
    -------
    str
        The description, or ``""`` when there is none.
    """
    field = model.model_fields[name]
    if field.description:
        return field.description
    for cls in model.__mro__:
        if name in inspect.get_annotations(cls):
            doc = attribute_docstrings(cls).get(name)
            if doc:
                return doc
    return ""


def keys_help(model: type[BaseModel], prefix: str = "") -> str:
    """One entry per leaf key, read from the model itself (nothing is listed twice by hand).

    Each entry is ``--dotted.key (default VALUE)`` followed by the field's
    description (its ``Field(description=...)`` or attribute docstring). A
    field holding one of several sections chosen by ``name`` (an FL selector
    or server optimizer) lists every registered section under a
    ``key: {name: NAME}`` heading, each with its own keys and defaults.

    Parameters
    ----------
    model : type of pydantic.BaseModel
        A runner's config model (a :class:`Strict` subclass).
    prefix : str, optional
        Dotted prefix of ``model``'s keys (for a nested section).

    Returns
    -------
    str
        Text for ``--help``, lines indented by two spaces, descriptions by eight.
    """
    return "\n".join(line for line in _help_lines(model, prefix, None) if line)


def _help_lines(model: type[BaseModel], prefix: str, values: BaseModel | None) -> list[str]:
    """:func:`keys_help`'s lines; ``values``: the instance whose values are the defaults (a section's
    default may differ from its class's, e.g. ``traces.device`` = ``TraceConfig(format=...)``)."""
    lines = []
    for name, field in model.model_fields.items():
        sections = _sections(field.annotation)
        default = getattr(values, name) if values is not None else field.get_default(call_default_factory=True)
        if len(sections) == 1:
            lines += _help_lines(sections[0], prefix + name + ".", default)
            continue
        if sections:  # one of several sections, by name: list each one's own keys under it
            names = [s.model_fields["name"].default for s in sections]
            lines.append(f"  --{prefix}{name} NAME (default {getattr(default, 'name', default)!s}): one of "
                         f"{', '.join(names)}; a new {prefix}{name} section, whose keys follow by NAME")
            for tag, section in zip(names, sections):
                lines.append(f"  {prefix}{name}: {{name: {tag}}}")
                lines += _help_lines(section, f"{prefix}{name}.", None)
            continue
        listed = _listed_sections(field.annotation)
        if isinstance(default, BaseModel):
            default = default.model_dump()
        elif listed and isinstance(default, list):   # a list of sections: each shown by its set keys
            default = [d.model_dump(exclude_defaults=True) or d.name for d in default]
            default = [d["name"] if isinstance(d, dict) and list(d) == ["name"] else d for d in default]
        desc = " ".join(field_description(model, name).split())
        head = f"  --{prefix}{name} (default {short_repr(default, 60)})"
        lines.append(head if not desc else head + "\n" + textwrap.indent(textwrap.fill(desc, 76), " " * 8))
        if listed:
            lines += _entry_help_lines(listed, f"{prefix}{name}")
    return lines


def _entry_help_lines(sections: list[type[BaseModel]], key: str) -> list[str]:
    """Help of a list of sections (``key: [NAME, {name: NAME, ...}]``): the keys every entry takes once, then
    each name with keys of its own, then the names without any (a list entry has no ``--`` flag of its own)."""
    common = set.intersection(*(set(s.model_fields) for s in sections)) - {"name"} if len(sections) > 1 else set()

    def keys(section, only) -> list[str]:
        return [line.replace(f"  --{key}[].", f"    {key}[].", 1) for line in _help_lines(section, f"{key}[].", None)
                if line.split(" ")[2].split("[].")[-1].split(".")[0] in only]

    lines = [f"  {key} entry, any name:"] + keys(sections[0], common) if common else []
    plain = []
    for section in sections:
        tag, own = section.model_fields["name"].default, set(section.model_fields) - common - {"name"}
        if own:
            lines += [f"  {key} entry {{name: {tag}}}:"] + keys(section, own)
        else:
            plain.append(tag)
    if plain:
        lines.append(textwrap.fill(f"{key} entries without keys of their own: {', '.join(plain)}", 84,
                                   initial_indent="  ", subsequent_indent=" " * 8))
    return lines


def add_config_arguments(parser, model: type[BaseModel]) -> None:
    """Give a runner's parser its config file argument, a ``--KEY VALUE`` per leaf key, and their help.

    Adds the optional positional ``config`` (a YAML job file) and one hidden
    ``--dotted.key`` option per key of :func:`flatten_keys` (stored under
    ``key:dotted.key``, read back by :func:`config_overrides`), and has the
    parser's help end with :func:`keys_help`, so ``--help`` lists every key
    with its default and meaning. The listing is built when the help is
    formatted, not here: it reads the config classes' source for their
    attribute docstrings, work that every rank of every job would otherwise
    do at start-up for a help text only ``--help`` prints.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The runner's parser (with a raw-text formatter, as the lifecycle makes).
    model : type of pydantic.BaseModel
        The runner's config model.
    """
    parser.add_argument("config", nargs="?", help="YAML job file (defaults apply where omitted)")
    for key in flatten_keys(model):
        parser.add_argument(f"--{key}", dest="key:" + key, metavar="VALUE", default=None,
                            help=argparse.SUPPRESS)
    format_help = parser.format_help

    def format_help_with_keys() -> str:
        listing = ("config keys (set in the YAML file, or on the command line as --KEY VALUE, "
                   "dotted for nested keys):\n" + keys_help(model))
        epilog = parser.epilog
        parser.epilog = f"{epilog}\n\n{listing}" if epilog else listing
        try:
            return format_help()
        finally:
            parser.epilog = epilog

    parser.format_help = format_help_with_keys


def config_overrides(args) -> dict[str, str]:
    """The ``--KEY VALUE`` flags given on the command line, as ``{dotted key: raw text}``.

    The counterpart of :func:`add_config_arguments`, for :func:`load_config`'s ``overrides``.
    """
    return {k[4:]: v for k, v in vars(args).items() if k.startswith("key:") and v is not None}


def _set_dotted(tree: dict, dotted: str, value: Any) -> None:
    node = tree
    parts = dotted.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"{dotted}: cannot set a sub-key of {part!r} (= {short_repr(child)})")
        node = child
    node[parts[-1]] = value


def _blamed(key: str, flags: Mapping[str, str], source: str) -> str:
    """Where the value at dotted ``key`` came from: the ``--FLAG VALUE`` that set it (or its section), else ``source``."""
    for flag in sorted(flags, key=len, reverse=True):
        if key == flag or key.startswith(flag + "."):
            return f"command line --{flag} {short_repr(flags[flag], 60)}"
    inside = sorted(flag for flag in flags if flag.startswith(key + "."))
    if inside:
        return f"command line --{', --'.join(inside)}"
    return source


def _dotted_loc(loc: tuple, chosen: set[str]) -> str:
    """A pydantic error location as the config's dotted key (a chosen section's tag left out:
    ``selection.oort.pacer_step`` is ``selection.pacer_step``)."""
    parts: list[str] = []
    skip = False
    for part in loc:
        if skip and isinstance(part, str):
            skip = False
            continue
        skip = False
        parts.append(str(part))
        skip = ".".join(parts) in chosen
    return ".".join(parts)


def _accepts_text(ann: Any) -> bool:
    return ann is str or str in typing.get_args(ann)


def _format_error(err: ValidationError, source: str, flags: Mapping[str, str] | None = None,
                  model: type[BaseModel] | None = None) -> str:
    flags = flags or {}
    chosen = set(_chosen_sections(model)) if model is not None else set()
    lines = []
    for e in err.errors()[:10]:
        key = _dotted_loc(e["loc"], chosen) or "(top level)"
        where = _blamed(key, flags, source)
        shown = short_repr(e.get("input"))
        if e["type"] == "extra_forbidden":
            lines.append(f"{where}: unknown key {key!r} (value {shown})")
        elif e["type"] == "value_error" and not e["loc"]:
            both = f"{source} with --{', --'.join(sorted(flags))}" if flags else source
            lines.append(f"{both}: {e['msg'].removeprefix('Value error, ')}")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            hint = ""
            text = flags.get(key)
            if (text is not None and isinstance(e.get("input"), (dict, list)) and model is not None
                    and _accepts_text(_annotation(model, key))):
                hint = (f" (the command line's {short_repr(text, 60)} reads as YAML {type(e['input']).__name__}; "
                        f"quote it to pass text)")
            lines.append(f"{where}: key {key!r} has bad value {shown}: {msg}{hint}")
    if len(err.errors()) > 10:
        lines.append(f"{source}: ... and {len(err.errors()) - 10} more errors")
    return "\n".join(lines)


def _read_yaml(path: Path, source: str, key: str = "config file", kind: str = "config") -> dict:
    from hpcbench.runtime.bounded import read_input

    try:
        raw = read_input(path, key, kind, "FedScale job file" if kind == "fedscale" else "YAML file", gunzip=False)
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {source!r} is not UTF-8 text (byte {exc.start})") from None
    loaded = load_yaml_text(text, source)
    if loaded is None:
        raise ConfigError(f"config file {source!r} is empty; give at least one key, or omit the file "
                          f"to run the defaults")
    if not isinstance(loaded, dict):
        raise ConfigError(f"{source}: top level must be a mapping of keys, got {type(loaded).__name__}")
    return loaded


def read_yaml_mapping(path: str | Path, key: str = "config file", kind: str = "config") -> dict:
    """A YAML file whose top level is a mapping, read with the checks of :func:`load_config`.

    Raises
    ------
    ConfigError
        Missing, unreadable, oversized, non-UTF-8, empty or malformed file, or
        a top level that is not a mapping; the message names the file.
    """
    return _read_yaml(Path(path), str(path), key, kind)


def load_config(model: type[BaseModel], path: str | Path | None = None,
                overrides: Mapping[str, str] | None = None, tree: Mapping[str, Any] | None = None):
    """Read a YAML job file, apply ``--key value`` overrides, validate.

    Parameters
    ----------
    model : type of pydantic.BaseModel
        The runner's config model (a :class:`Strict` subclass).
    path : str or pathlib.Path, optional
        YAML job file; defaults apply where omitted (or with no file at all).
    overrides : mapping of str to str, optional
        Dotted key to raw string value, parsed as a YAML scalar.
    tree : mapping, optional
        Keys already read from elsewhere (e.g. a translated FedScale job file);
        the YAML file, then ``overrides``, take precedence over it.

    Returns
    -------
    pydantic.BaseModel
        An instance of ``model``.

    Raises
    ------
    ConfigError
        Missing, unreadable, non-UTF-8, empty or unparsable file, unknown key,
        wrong type or out-of-range value; the message names the key and the value.
    """
    source = str(path) if path is not None else "<config>" if tree else "<defaults>"
    raw: dict = dict(tree or {})
    if path is not None:
        raw.update(_read_yaml(Path(path), source))
    known = set(flatten_keys(model))
    chosen = set(_chosen_sections(model))
    # a whole section before its keys, whatever the order on the command line
    flags = dict(overrides or {})
    for key, text in sorted(flags.items(), key=lambda kv: kv[0].count(".")):
        if key not in known:
            raise ConfigError(f"command line: unknown key {key!r} (value {short_repr(text)})")
        if text == "" or _annotation(model, key) is str:
            value = text  # a text key takes the flag's text as it is (--checkpoint {output}, --job_name 123)
        else:
            try:
                value = load_yaml_text(text, f"command line --{key}")
            except ConfigError as exc:
                if "expands to" in str(exc) or "contains itself" in str(exc):
                    raise
                value = text
        if key in chosen and isinstance(value, str):
            value = {"name": value}  # --selection oort: a new section, to which --selection.KEY may add
        _set_dotted(raw, key, value)
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_format_error(err, source, flags, model)) from None
    except (RecursionError, TypeError, OverflowError) as exc:  # exotic trees pydantic does not wrap
        raise ConfigError(f"{source}: cannot read the config: {short_repr(str(exc), 200)}") from None
