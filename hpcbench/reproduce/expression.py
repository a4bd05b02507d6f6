"""Claim quantities: a small expression language over the tables of a figure's runs.

A claim's ``quantity`` is written in Python's expression syntax but never
handed to ``eval``: :func:`parse` walks the syntax tree and accepts only the
nodes listed here, and :func:`evaluate` interprets that tree itself. What
may appear:

- **data**: ``JOB.TABLE.COLUMN`` is a column of table ``TABLE`` of every
  completed run of job ``JOB`` (rows of its runs one after the other, in
  run order); ``JOB.attrs.NAME`` is root attribute ``NAME`` of each run
  (one value per run: ``time_to_accuracy_s``, ``final_test_accuracy``);
- **row filters**: ``JOB.TABLE.COLUMN[CONDITION]`` keeps the rows where
  ``CONDITION`` holds; in it, bare names are that table's columns, else the
  run's root attributes (``world_size``, ``seed``, ``job_name``), else the
  constants below; conditions combine comparisons (``==``, ``!=``, ``<``,
  ``<=``, ``>``, ``>=``, ``in (..)``, ``not in (..)``) with ``and``, ``or``,
  ``not``; a quantity inside a condition (``JOB.TABLE.COLUMN``, filtered
  or not, or a function of one) is evaluated on its own and must give one
  number, which every row is compared with (``iteration <=
  first(a.iterations.iteration[accuracy >= 0.95])``);
- **arithmetic**: ``+ - * /``, unary minus, numbers, strings (in
  conditions), the constants ``KiB MiB GiB`` (powers of 1024), ``KB MB GB``
  (powers of 1000) and ``Mbit Gbit`` (bit/s);
- **functions**: ``mean median min max sum std count first last abs``;
  ``min`` and ``max`` also take several arguments (over all their values:
  ``min(a.attrs.x, b.attrs.x)``), the others one;
  arrays of equal length combine element by element (a scalar broadcasts).

The value of a quantity must be one number: a selection of exactly one row
is one number; more need a function (``mean(...)``). Examples::

    mean(random.attrs.time_to_accuracy_s) / mean(oort.attrs.time_to_accuracy_s)
    coll.results.busbw[impl == 'ring' and size == 16 * MiB] / coll.results.busbw[impl == 'mpi' and size == 16 * MiB]
    100 * fig8.summary.monitor_overhead[variant == 'gns']
    sum(a.steps.step_s[not warmup and iteration <= first(a.iterations.iteration[accuracy >= 0.95])])
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol

import numpy as np

__all__ = ["ExpressionError", "EmptySelection", "Ref", "Expression", "DataSource", "Evaluated", "parse",
           "evaluate", "CONSTANTS", "FUNCTIONS"]

#: names usable anywhere as numbers
CONSTANTS: dict[str, float] = {"KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3,
                               "KB": 1e3, "MB": 1e6, "GB": 1e9, "Mbit": 1e6, "Gbit": 1e9}


def _first(a):
    return a[0]


def _last(a):
    return a[-1]


#: function name -> reduction of a 1-D array to one value (``abs`` works element-wise)
FUNCTIONS: dict[str, Callable] = {
    "mean": np.mean, "median": np.median, "min": np.min, "max": np.max, "sum": np.sum, "std": np.std,
    "count": len, "first": _first, "last": _last, "abs": np.abs,
}

#: functions that take several arguments (reduced over all their values together)
_VARIADIC = frozenset({"min", "max"})

_ARITH = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide}
_COMPARE = {ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
            ast.Gt: np.greater, ast.GtE: np.greater_equal}


class ExpressionError(ValueError):
    """A quantity that the grammar does not allow, or that does not give one number."""


class EmptySelection(ExpressionError):
    """A data reference or filter selected no value."""


@dataclass(frozen=True)
class Ref:
    """A data reference ``JOB.TABLE.COLUMN`` (``TABLE == "attrs"``: a root attribute of each run)."""

    job: str
    table: str
    column: str

    def __str__(self) -> str:
        return f"{self.job}.{self.table}.{self.column}"


@dataclass(frozen=True)
class Expression:
    """A parsed quantity: its text, syntax tree and every data reference in it."""

    text: str
    tree: ast.Expression = field(repr=False)
    refs: tuple[Ref, ...]

    @property
    def jobs(self) -> set[str]:
        """The job ids it reads."""
        return {r.job for r in self.refs}


class DataSource(Protocol):
    """Where :func:`evaluate` reads data: one dict of equal-length columns per (job, table)."""

    def table(self, job: str, table: str) -> Mapping[str, np.ndarray]:
        """Columns of ``table`` over the job's completed runs (``"attrs"``: one row per run), plus the
        runs' root attributes broadcast to every row (for filters)."""


@dataclass
class Evaluated:
    """The value of a quantity and notes on how it came about (NaNs met, rows selected)."""

    value: float
    notes: list[str] = field(default_factory=list)


def _ref_of(node: ast.AST) -> Ref | None:
    """``a.b.c`` as a Ref, or None if ``node`` is not a three-part dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    if len(parts) != 3:
        return None
    job, table, column = reversed(parts)
    return Ref(job, table, column)


def _where(node: ast.AST) -> str:
    return f" (column {node.col_offset + 1})" if hasattr(node, "col_offset") else ""


def _is_quantity(node: ast.AST) -> bool:
    """Whether ``node`` is a quantity of its own inside a row filter (a data reference or a function call)."""
    return _ref_of(node) is not None or isinstance(node, (ast.Subscript, ast.Call))


def _check_condition(node: ast.AST, refs: list[Ref]) -> None:
    """Nodes allowed inside a row filter; collects the data references of quantities inside it."""
    if _is_quantity(node):
        _check(node, refs)
    elif isinstance(node, ast.BoolOp) and isinstance(node.op, (ast.And, ast.Or)):
        for v in node.values:
            _check_condition(v, refs)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.UAdd)):
        _check_condition(node.operand, refs)
    elif isinstance(node, ast.Compare):
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)):
                if not isinstance(right, (ast.Tuple, ast.List)):
                    raise ExpressionError(f"'in' needs a literal tuple or list{_where(right)}")
                for elt in right.elts:
                    _check_condition(elt, refs)
            elif type(op) not in _COMPARE:
                raise ExpressionError(f"comparison {type(op).__name__} is not allowed{_where(node)}")
            else:
                _check_condition(right, refs)
        _check_condition(node.left, refs)
    elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        _check_condition(node.left, refs)
        _check_condition(node.right, refs)
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        pass
    elif isinstance(node, ast.Name):
        pass
    else:
        raise ExpressionError(f"{type(node).__name__} is not allowed in a row filter{_where(node)}")


def _check(node: ast.AST, refs: list[Ref]) -> None:
    """Nodes allowed in a quantity (outside filters); collects the data references."""
    ref = _ref_of(node)
    if ref is not None:
        refs.append(ref)
    elif isinstance(node, ast.Subscript):
        ref = _ref_of(node.value)
        if ref is None:
            raise ExpressionError(f"only JOB.TABLE.COLUMN can be filtered with [...]{_where(node)}")
        refs.append(ref)
        _check_condition(node.slice, refs)
    elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        _check(node.left, refs)
        _check(node.right, refs)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _check(node.operand, refs)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise ExpressionError(f"unknown function {name!r}{_where(node)}; "
                                  f"allowed: {', '.join(FUNCTIONS)}")
        if node.keywords or not node.args or (len(node.args) > 1 and node.func.id not in _VARIADIC):
            raise ExpressionError(f"{node.func.id}() takes exactly one argument{_where(node)}"
                                  if node.func.id not in _VARIADIC else
                                  f"{node.func.id}() takes one or more arguments{_where(node)}")
        for arg in node.args:
            _check(arg, refs)
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value,
                                                                                                     bool):
        pass
    elif isinstance(node, ast.Name):
        if node.id not in CONSTANTS:
            raise ExpressionError(f"unknown name {node.id!r}{_where(node)}: data is JOB.TABLE.COLUMN or "
                                  f"JOB.attrs.NAME; constants are {', '.join(CONSTANTS)}")
    else:
        raise ExpressionError(f"{type(node).__name__} ({ast.unparse(node)!r}) is not allowed in a "
                              f"quantity{_where(node)}")


def parse(text: str) -> Expression:
    """Parse and check a quantity.

    Raises
    ------
    ExpressionError
        A syntax error or a construct the grammar does not allow (see the
        module docstring), with the column it starts at.
    """
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("empty quantity")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"syntax error at column {exc.offset}: {exc.msg}") from None
    refs: list[Ref] = []
    _check(tree.body, refs)
    if not refs:
        raise ExpressionError("the quantity reads no data (JOB.TABLE.COLUMN or JOB.attrs.NAME)")
    return Expression(text.strip(), tree, tuple(dict.fromkeys(refs)))


def _as_array(value) -> np.ndarray:
    return np.asarray(value).reshape(-1) if np.ndim(value) else np.asarray([value])


class _Evaluator:
    def __init__(self, source: DataSource) -> None:
        self.source = source
        self.notes: list[str] = []

    def _column(self, ref: Ref) -> tuple[np.ndarray, Mapping[str, np.ndarray]]:
        table = self.source.table(ref.job, ref.table)
        if ref.column not in table:
            known = ", ".join(sorted(table)) or "none"
            raise ExpressionError(f"{ref}: no column {ref.column!r} (has {known})")
        return np.asarray(table[ref.column]), table

    def _numbers(self, values: np.ndarray, what: str) -> np.ndarray:
        try:
            out = values.astype(np.float64)
        except (TypeError, ValueError):
            raise ExpressionError(f"{what} holds text, not numbers") from None
        bad = int(np.count_nonzero(np.isnan(out)))
        if bad:
            self.notes.append(f"{what}: {bad} of {len(out)} values NaN")
        return out

    def value(self, node: ast.AST):
        ref = _ref_of(node)
        if ref is not None:
            values, _ = self._column(ref)
            if not len(values):
                raise EmptySelection(f"{ref}: no rows")
            return self._numbers(values, str(ref))
        if isinstance(node, ast.Subscript):
            ref = _ref_of(node.value)
            values, table = self._column(ref)
            mask = np.asarray(self.condition(node.slice, table, len(values)), dtype=bool).reshape(-1)
            if mask.shape != values.shape:
                mask = np.broadcast_to(mask, values.shape)
            picked = values[mask]
            what = f"{ref}[{ast.unparse(node.slice)}]"
            if not len(picked):
                raise EmptySelection(f"{what}: no rows match")
            return self._numbers(picked, what)
        if isinstance(node, ast.BinOp):
            left, right = _as_array(self.value(node.left)), _as_array(self.value(node.right))
            if len(left) != len(right) and 1 not in (len(left), len(right)):
                raise ExpressionError(f"{ast.unparse(node)!r}: {len(left)} values against {len(right)}")
            with np.errstate(divide="ignore", invalid="ignore"):
                out = _ARITH[type(node.op)](left, right)
            return out
        if isinstance(node, ast.UnaryOp):
            v = self.value(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Call):
            arg = np.concatenate([_as_array(self.value(a)) for a in node.args])
            fn = FUNCTIONS[node.func.id]
            if node.func.id == "abs":
                return fn(arg)
            return np.asarray([float(fn(arg))])
        if isinstance(node, ast.Constant):
            return np.asarray([float(node.value)])
        if isinstance(node, ast.Name):
            return np.asarray([CONSTANTS[node.id]])
        raise ExpressionError(f"cannot evaluate {ast.unparse(node)!r}")  # pragma: no cover - parse() refused it

    def condition(self, node: ast.AST, table: Mapping[str, np.ndarray], n: int):
        if _is_quantity(node):
            v = _as_array(self.value(node))
            if len(v) != 1:
                raise ExpressionError(f"{ast.unparse(node)!r} in a row filter gives {len(v)} values, not one")
            return float(v[0])
        if isinstance(node, ast.BoolOp):
            parts = [np.asarray(self.condition(v, table, n), dtype=bool) for v in node.values]
            return np.logical_and.reduce(parts) if isinstance(node.op, ast.And) else np.logical_or.reduce(parts)
        if isinstance(node, ast.UnaryOp):
            v = self.condition(node.operand, table, n)
            if isinstance(node.op, ast.Not):
                return np.logical_not(np.asarray(v, dtype=bool))
            return -np.asarray(v) if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Compare):
            left = self.condition(node.left, table, n)
            result = np.ones(n, dtype=bool)
            for op, right_node in zip(node.ops, node.comparators):
                if isinstance(op, (ast.In, ast.NotIn)):
                    options = [self.condition(e, table, n) for e in right_node.elts]
                    hit = np.zeros(n, dtype=bool)
                    for opt in options:
                        hit |= _equal(left, opt, n)
                    result &= hit if isinstance(op, ast.In) else ~hit
                    continue
                right = self.condition(right_node, table, n)
                if isinstance(op, (ast.Eq, ast.NotEq)):
                    eq = _equal(left, right, n)
                    result &= eq if isinstance(op, ast.Eq) else ~eq
                else:
                    try:
                        result &= np.asarray(_COMPARE[type(op)](np.asarray(left, dtype=np.float64),
                                                                np.asarray(right, dtype=np.float64)), dtype=bool)
                    except (TypeError, ValueError):
                        raise ExpressionError(f"{ast.unparse(node)!r}: ordering compares numbers only") from None
                left = right
            return result
        if isinstance(node, ast.BinOp):
            left = np.asarray(self.condition(node.left, table, n), dtype=np.float64)
            right = np.asarray(self.condition(node.right, table, n), dtype=np.float64)
            return _ARITH[type(node.op)](left, right)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in table:
                return np.asarray(table[node.id])
            if node.id in CONSTANTS:
                return CONSTANTS[node.id]
            raise ExpressionError(f"unknown name {node.id!r} in a row filter: not a column or attribute "
                                  f"(has {', '.join(sorted(table))})")
        raise ExpressionError(f"cannot evaluate {ast.unparse(node)!r}")  # pragma: no cover


def _equal(left, right, n: int) -> np.ndarray:
    """Element-wise ``==`` of columns and constants, text and numbers alike (1 == 1.0, 'ring' == 'ring')."""
    a, b = np.asarray(left, dtype=object), np.asarray(right, dtype=object)
    a = np.broadcast_to(a.reshape(-1) if a.ndim else a, (n,))
    b = np.broadcast_to(b.reshape(-1) if b.ndim else b, (n,))
    out = np.empty(n, dtype=bool)
    for i in range(n):
        x, y = a[i], b[i]
        if isinstance(x, bytes):
            x = x.decode()
        if isinstance(y, bytes):
            y = y.decode()
        try:
            out[i] = float(x) == float(y) if not (isinstance(x, str) or isinstance(y, str)) else str(x) == str(y)
        except (TypeError, ValueError):
            out[i] = x == y
    return out


def evaluate(expr: Expression, source: DataSource) -> Evaluated:
    """The value of a parsed quantity over ``source``.

    Returns
    -------
    Evaluated
        ``value`` (float; NaN or inf when the data make it so, with a note
        saying which reference held NaN).

    Raises
    ------
    EmptySelection
        A reference or filter selected no row.
    ExpressionError
        A missing column, text where numbers are needed, or a result that is
        not one number.
    """
    ev = _Evaluator(source)
    out = _as_array(ev.value(expr.tree.body))
    if len(out) != 1:
        raise ExpressionError(f"{expr.text!r} gives {len(out)} values, not one: reduce them with "
                              f"mean(), median(), min(), max(), first() or last()")
    value = float(out[0])
    if math.isinf(value):
        ev.notes.append("division by zero")
    return Evaluated(value, ev.notes)

