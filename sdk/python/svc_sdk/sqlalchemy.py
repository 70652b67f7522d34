"""Resource plans as SQLAlchemy (1.4 and later) filters.

::

    from sqlalchemy import select
    from svc_sdk.sqlalchemy import plan_filter

    plan = client.plan_resources("orders:read", "orders", token=token)
    rows = session.execute(select(Order).where(plan_filter(plan, Order))).scalars().all()

``plan_filter`` turns a :class:`~svc_sdk.plan.Plan` (or a
:class:`~svc_sdk.plan.Condition`) into a ``ColumnElement``: ``true()`` for
an always allowed plan, ``false()`` for an always denied one, else the
condition over the columns. A field's column is ``columns[field]`` (a
mapping of fields such as ``"attributes.owner"`` to columns or mapped
attributes), else the attribute of ``source`` (a ``Table`` or a mapped
class) named ``id``, ``tenant`` or the attribute's own name. It must be a
column (or a mapped column attribute, a hybrid's expression): a name that
``source`` answers with anything else, a Python property or method of the
class, a relationship, is :class:`~svc_sdk.plan.PlanError`, as a missing
one is, never a comparison of a Python object that holds for every row.

A missing field (NULL) makes every comparison false and ``not`` true:
``not`` renders as ``(x) IS NOT true``, as the sidecar's SQL has it.

``starts_with``, ``ends_with`` and ``contains`` render as the sidecar's
SQL does for the dialect the statement is compiled for, case-sensitive in
each (SQLAlchemy's own ``startswith`` is a LIKE, which ignores ASCII case
in SQLite): ``LIKE :p ESCAPE '\\'`` (PostgreSQL and others), ``GLOB :p``
(SQLite), ``LIKE CAST(:p AS BINARY) ESCAPE '!'`` (MySQL, MariaDB), the
pattern a bound parameter with its wildcards escaped.
"""

from __future__ import annotations

from typing import Any, Mapping

from sqlalchemy import Boolean, String, and_, bindparam, false, or_, true
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import ColumnProperty
from sqlalchemy.sql.elements import ColumnElement, Grouping

from .plan import ALWAYS_ALLOWED, ATTRIBUTE_PREFIX, STRING_TESTS, Condition, Plan, PlanError, like_pattern

__all__ = ["plan_filter"]


def plan_filter(plan: Plan | Condition, source: Any = None,
                columns: Mapping[str, Any] | None = None) -> ColumnElement:
    """The filter of ``plan``, over the columns of ``source`` (a ``Table``
    or a mapped class) and ``columns`` (field → column, first)."""
    if isinstance(plan, Plan):
        if plan.kind == ALWAYS_ALLOWED:
            return true()
        if plan.condition is None:
            return false()
        plan = plan.condition
    return _Filter(source, columns or {}).cond(plan)


class _Filter:
    def __init__(self, source: Any, columns: Mapping[str, Any]) -> None:
        self.source = source
        self.columns = columns

    def column(self, f: str) -> Any:
        if f in self.columns:
            col = self.columns[f]
            if not _is_column(col):
                raise PlanError(f"plan: columns[{f!r}] is not a column, but {type(col).__name__}")
            return col
        name = f[len(ATTRIBUTE_PREFIX):] if f.startswith(ATTRIBUTE_PREFIX) else f
        cols = getattr(self.source, "c", None)
        if cols is not None and hasattr(cols, "get"):
            # A Table's (or alias's) columns by key: getattr would also
            # find the collection's own methods (keys, items, update...).
            col = cols.get(name)
        else:
            col = getattr(self.source, name, None) if self.source is not None else None
        # A mapped class answers for its Python properties, methods and
        # relationships too: compared with a value, such an attribute is a
        # Python bool, and "ne" of it would hold for every row.
        if not _is_column(col):
            raise PlanError(f"plan: no column for {f}: name one in columns")
        return col

    def cond(self, c: Condition) -> Any:
        if c.op in ("and", "or"):
            if not c.args:
                return true() if c.op == "and" else false()
            return (and_ if c.op == "and" else or_)(*(self.cond(a) for a in c.args))
        if c.op == "not":
            assert c.arg is not None
            # NULL (a missing field) is not true: "not" holds then.
            return self.cond(c.arg).is_not(true())
        col = self.column(c.field)
        if c.op == "in":
            vals = [v for v in c.values if v is not None]
            has_null = len(vals) < len(c.values)
            if not vals:
                return col.is_(None) if has_null else false()
            expr = col.in_([_value(v) for v in vals])
            return or_(expr, col.is_(None)) if has_null else expr
        if c.op in STRING_TESTS:
            clause = col.__clause_element__() if hasattr(col, "__clause_element__") else col
            return _StringTest(clause, c.op, str(c.value))
        if c.value is None:
            return col.is_(None) if c.op == "eq" else col.is_not(None)
        v = _value(c.value, c.op not in ("eq", "ne"))
        if c.op == "eq":
            return col == v
        if c.op == "ne":
            return col != v
        if c.op == "lt":
            return col < v
        if c.op == "le":
            return col <= v
        if c.op == "gt":
            return col > v
        return col >= v


def _is_column(col: Any) -> bool:
    """Whether col is a SQL column expression: a Column, a mapped
    class's column attribute, a hybrid's expression."""
    if isinstance(col, ColumnElement):
        return True
    clause = getattr(col, "__clause_element__", None)
    if not callable(clause):
        return False
    # A relationship's clause element is its join condition, a boolean
    # expression: compared with a value it is no column either.
    prop = getattr(col, "property", None)
    if prop is not None and not isinstance(prop, ColumnProperty):
        return False
    try:
        return isinstance(clause(), ColumnElement)
    except Exception:  # an attribute that names no column
        return False


class _StringTest(ColumnElement):  # type: ignore[misc]
    """starts_with, ends_with or contains of a column, rendered per
    dialect when the statement is compiled."""

    inherit_cache = False
    type = Boolean()

    def __init__(self, col: Any, op: str, value: str) -> None:
        self.col = col
        self.op = op
        self.value = value

    def self_group(self, against: Any = None) -> Any:
        # Parenthesized wherever it is an operand: LIKE binds less tightly
        # than IS in PostgreSQL.
        return Grouping(self)


def _pattern(element: _StringTest, compiler: Any, dialect: str, **kw: Any) -> str:
    p = bindparam(None, like_pattern(dialect, element.op, element.value), type_=String(), unique=True)
    return str(compiler.process(p, **kw))


def _compile_like(element: _StringTest, compiler: Any, **kw: Any) -> str:
    col = compiler.process(element.col, **kw)
    return f"{col} LIKE {_pattern(element, compiler, 'postgres', **kw)} ESCAPE '\\'"


def _compile_glob(element: _StringTest, compiler: Any, **kw: Any) -> str:
    return f"{compiler.process(element.col, **kw)} GLOB {_pattern(element, compiler, 'sqlite', **kw)}"


def _compile_binary_like(element: _StringTest, compiler: Any, **kw: Any) -> str:
    col = compiler.process(element.col, **kw)
    return f"{col} LIKE CAST({_pattern(element, compiler, 'mysql', **kw)} AS BINARY) ESCAPE '!'"


compiles(_StringTest)(_compile_like)
compiles(_StringTest, "sqlite")(_compile_glob)
compiles(_StringTest, "mysql")(_compile_binary_like)


class _Binary(ColumnElement):  # type: ignore[misc]
    """A compared string value, compared byte for byte as the policy
    compares, not by the column's collation: its bound parameter, CAST(...
    AS BINARY) in MySQL (whose default collations ignore case, accents and
    trailing spaces), and in PostgreSQL for an ordering, COLLATE "C"."""

    inherit_cache = False
    type = String()

    def __init__(self, value: str, ordering: bool) -> None:
        self.value = value
        self.ordering = ordering


def _value(v: Any, ordering: bool = False) -> Any:
    return _Binary(v, ordering) if isinstance(v, str) else v


def _compile_value(element: _Binary, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(bindparam(None, element.value, type_=String(), unique=True), **kw))


def _compile_binary_value(element: _Binary, compiler: Any, **kw: Any) -> str:
    return f"CAST({_compile_value(element, compiler, **kw)} AS BINARY)"


def _compile_collate_c(element: _Binary, compiler: Any, **kw: Any) -> str:
    p = _compile_value(element, compiler, **kw)
    return f'{p} COLLATE "C"' if element.ordering else p


compiles(_Binary)(_compile_value)
compiles(_Binary, "mysql")(_compile_binary_value)
compiles(_Binary, "postgresql")(_compile_collate_c)
