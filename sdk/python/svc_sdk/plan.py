"""Resource plans: which resources of a type a caller may act on.

:meth:`svc_sdk.Client.plan_resources` asks the sidecar
(``POST /v1/plan-resources``) and returns a :class:`Plan`: its ``kind`` is
``always_allowed``, ``always_denied`` or ``conditional``; a conditional
plan carries a :class:`Condition` tree over the resource's ``id``,
``tenant`` and ``attributes.<name>``, and every plan the sidecar's SQL
(``plan.sql.where`` with bind parameters ``plan.sql.params``).

The tree, as JSON::

    {"op": "and" | "or", "args": [...]}
    {"op": "not", "arg": ...}
    {"op": "eq" | "ne" | "lt" | "le" | "gt" | "ge", "field": "id" | "tenant" | "attributes.<name>", "value": ...}
    {"op": "in", "field": ..., "values": [...]}
    {"op": "starts_with" | "ends_with" | "contains", "field": ..., "value": "..."}

A field the resource lacks (a NULL column) makes every comparison false;
``not`` holds when its argument does not hold, so a missing field makes
``not`` true (SQL ``(x) IS NOT TRUE``); ``eq`` / ``ne`` with ``None`` test
for a missing field; ``in`` with no values is false. ``starts_with``,
``ends_with`` and ``contains`` take a string and hold for a string field
with that prefix, suffix or substring, case-sensitively; a field that is
not a string never meets them. :meth:`Condition.holds` evaluates a tree on
one resource.

:func:`to_sql` renders a plan in another dialect or with other column
names than the sidecar's; :mod:`svc_sdk.sqlalchemy` and
:func:`svc_sdk.django.plan_filter` turn it into an ORM filter.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

__all__ = [
    "ALWAYS_ALLOWED", "ALWAYS_DENIED", "CONDITIONAL", "DIALECTS", "Condition", "Plan", "PlanError",
    "SQLFilter", "column_name", "like_pattern", "to_sql",
]

ALWAYS_ALLOWED = "always_allowed"
ALWAYS_DENIED = "always_denied"
CONDITIONAL = "conditional"
KINDS = (ALWAYS_ALLOWED, ALWAYS_DENIED, CONDITIONAL)

#: The SQL dialects: postgres numbers its parameters ($1, $2…), sqlite and
#: mysql use ?; sqlite and mysql quote identifiers with backticks, postgres
#: with "" (SQLite reads a double-quoted name that is not a column as a
#: string literal; a backticked one is "no such column").
DIALECTS = ("postgres", "sqlite", "mysql")

WHERE_TRUE = "1 = 1"
WHERE_FALSE = "1 = 0"

#: Bounds of a parsed tree, as the sidecar's.
MAX_DEPTH = 64
MAX_NODES = 10000

ATTRIBUTE_PREFIX = "attributes."
_COMPARISONS = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ORDERED = ("lt", "le", "gt", "ge")
#: The string tests: a prefix, a suffix, a substring.
STRING_TESTS = ("starts_with", "ends_with", "contains")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")

#: A value a condition compares with: a JSON scalar.
Scalar = Union[str, int, float, bool, None]


class PlanError(ValueError):
    """A plan or condition that is not well formed, or a field without a
    column."""


@dataclass(frozen=True)
class Condition:
    """A node of a plan's condition tree. Which fields are set depends on
    ``op``: ``args`` for and/or, ``arg`` for not, ``field`` and ``value`` for
    the comparisons, ``field`` and ``values`` for in."""

    op: str
    args: tuple[Condition, ...] = ()
    arg: Condition | None = None
    field: str = ""
    value: Scalar = None
    values: tuple[Scalar, ...] = ()

    @classmethod
    def from_json(cls, data: Any) -> Condition:
        """The condition of its JSON shape (parsed JSON), validated."""
        nodes = [0]
        return cls._decode(data, 1, nodes)

    @classmethod
    def _decode(cls, data: Any, depth: int, nodes: list[int]) -> Condition:
        nodes[0] += 1
        if depth > MAX_DEPTH:
            raise PlanError(f"plan: conditions nested deeper than {MAX_DEPTH}")
        if nodes[0] > MAX_NODES:
            raise PlanError(f"plan: more than {MAX_NODES} conditions")
        if not isinstance(data, Mapping):
            raise PlanError(f"plan: a condition is a JSON object, not {type(data).__name__}")
        op = data.get("op")
        if op in ("and", "or"):
            args = data.get("args") or []
            if not isinstance(args, list):
                raise PlanError(f"plan: {op}: args is not a list")
            return cls(op, args=tuple(cls._decode(a, depth + 1, nodes) for a in args))
        if op == "not":
            if data.get("arg") is None:
                raise PlanError("plan: not: missing condition")
            return cls(op, arg=cls._decode(data["arg"], depth + 1, nodes))
        if op in _COMPARISONS or op == "in" or op in STRING_TESTS:
            f = data.get("field")
            if not isinstance(f, str) or not valid_field(f):
                raise PlanError(f"plan: {op}: field {f!r} is not id, tenant or attributes.<name>")
            if op == "in":
                vals = data.get("values")
                if vals is None:
                    vals = []
                if not isinstance(vals, list):
                    raise PlanError(f"plan: {f} in: values is not a list")
                return cls(op, field=f, values=tuple(_scalar(f, op, v) for v in vals))
            v = _scalar(f, op, data.get("value"))
            if op in STRING_TESTS and not isinstance(v, str):
                raise PlanError(f"plan: {f} {op}: value {v!r} is not a string")
            if v is None and op in _ORDERED:
                raise PlanError(f"plan: {f} {op}: null cannot be ordered")
            return cls(op, field=f, value=v)
        raise PlanError(f"plan: unknown op {op!r}")

    def to_json(self) -> dict[str, Any]:
        """The condition's JSON shape."""
        if self.op in ("and", "or"):
            return {"op": self.op, "args": [a.to_json() for a in self.args]}
        if self.op == "not":
            assert self.arg is not None
            return {"op": "not", "arg": self.arg.to_json()}
        if self.op == "in":
            return {"op": "in", "field": self.field, "values": list(self.values)}
        return {"op": self.op, "field": self.field, "value": self.value}

    def holds(self, resource: Mapping[str, Any]) -> bool:
        """Whether the condition holds for one resource,
        ``{"id": ..., "tenant": ..., "attributes": {...}}``, as a database
        finds it with the condition's SQL: a missing (or null) field makes
        a comparison false and ``not`` true; values of different types
        (a string and a number) are neither equal nor ordered."""
        if self.op == "and":
            return all(a.holds(resource) for a in self.args)
        if self.op == "or":
            return any(a.holds(resource) for a in self.args)
        if self.op == "not":
            assert self.arg is not None
            return not self.arg.holds(resource)
        if self.field.startswith(ATTRIBUTE_PREFIX):
            attrs = resource.get("attributes") or {}
            v = attrs.get(self.field[len(ATTRIBUTE_PREFIX):]) if isinstance(attrs, Mapping) else None
        else:
            v = resource.get(self.field)
        if self.op == "in":
            if v is None:
                return None in self.values
            return any(_order(v, w) == 0 for w in self.values if w is not None)
        if self.op in STRING_TESTS:
            if not isinstance(v, str) or not isinstance(self.value, str):
                return False
            if self.op == "starts_with":
                return v.startswith(self.value)
            if self.op == "ends_with":
                return v.endswith(self.value)
            return self.value in v
        if self.value is None:
            return (v is None) == (self.op == "eq")
        if v is None:
            return False
        o = _order(v, self.value)
        if o is None:
            return False
        return {"eq": o == 0, "ne": o != 0, "lt": o < 0, "le": o <= 0, "gt": o > 0, "ge": o >= 0}[self.op]


def _order(a: Any, b: Any) -> int | None:
    """-1, 0 or 1 for two scalars of one type; None for different types."""
    def kind(x: Any) -> str:
        if isinstance(x, bool):
            return "bool"
        if isinstance(x, (int, float)):
            return "number"
        return "string" if isinstance(x, str) else "other"
    if kind(a) != kind(b) or kind(a) == "other":
        return None
    return int((a > b) - (a < b))


def valid_field(f: str) -> bool:
    """Whether ``f`` names a field of a resource: ``id``, ``tenant`` or
    ``attributes.<name>``."""
    return f in ("id", "tenant") or (f.startswith(ATTRIBUTE_PREFIX) and len(f) > len(ATTRIBUTE_PREFIX))


def _scalar(f: str, op: str, v: Any) -> Scalar:
    if v is None or isinstance(v, (str, bool, int)):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return v
    raise PlanError(f"plan: {f} {op}: value {v!r} is not a string, number, boolean or null")


@dataclass(frozen=True)
class SQLFilter:
    """A WHERE clause with its bind parameters, in order."""

    where: str
    params: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    """The result of :meth:`svc_sdk.Client.plan_resources`.

    ``condition`` is set only for a ``conditional`` plan. ``sql`` is the
    sidecar's rendering in the requested dialect with its configured
    columns (``list_filter.columns``): ``1 = 1`` for ``always_allowed``,
    ``1 = 0`` for ``always_denied``. A refused credential is an
    ``always_denied`` plan whose ``reason`` is the token's failure code.
    """

    kind: str
    condition: Condition | None = None
    sql: SQLFilter = field(default_factory=lambda: SQLFilter(WHERE_FALSE, []))
    decision_id: str = ""
    reason: str = ""
    subject: str = ""
    tenant_id: str = ""
    policy_revision: str = ""
    message: str = ""

    @property
    def always_allowed(self) -> bool:
        return self.kind == ALWAYS_ALLOWED

    @property
    def always_denied(self) -> bool:
        return self.kind == ALWAYS_DENIED

    @property
    def conditional(self) -> bool:
        return self.kind == CONDITIONAL

    def permits(self, resource: Mapping[str, Any]) -> bool:
        """Whether the plan permits one resource (see :meth:`Condition.holds`)."""
        if self.kind == ALWAYS_ALLOWED:
            return True
        return self.kind == CONDITIONAL and self.condition is not None and self.condition.holds(resource)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Plan:
        """The plan of the sidecar's JSON answer, validated."""
        kind = body.get("kind")
        if kind not in KINDS:
            raise PlanError(f"plan: kind {kind!r} is not always_allowed, always_denied or conditional")
        cond = None
        if kind == CONDITIONAL:
            if body.get("condition") is None:
                raise PlanError("plan: a conditional plan without a condition")
            cond = Condition.from_json(body["condition"])
        sql = body.get("sql") or {}
        if not isinstance(sql, Mapping):
            raise PlanError("plan: sql is not an object")
        params = sql.get("params") or []
        if not isinstance(params, list):
            raise PlanError("plan: sql.params is not a list")
        where = str(sql.get("where") or (WHERE_TRUE if kind == ALWAYS_ALLOWED else WHERE_FALSE))
        return cls(kind=str(kind), condition=cond, sql=SQLFilter(where, [_param(p) for p in params]),
                   decision_id=str(body.get("decision_id") or ""), reason=str(body.get("reason") or ""),
                   subject=str(body.get("subject") or ""), tenant_id=str(body.get("tenant_id") or ""),
                   policy_revision=str(body.get("policy_revision") or ""), message=str(body.get("message") or ""))


def _param(v: Any) -> Any:
    # A ListValue carries every number as a double: a whole one is an int
    # to a database driver, as the sidecar's own rendering has it.
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    return v


def column_name(f: str, columns: Mapping[str, str] | None = None) -> str:
    """The column of field ``f``: ``columns[f]``, else ``id``, ``tenant`` or
    the attribute's own name. A column is an identifier, optionally
    qualified by a table (``orders.owner_id``)."""
    name = (columns or {}).get(f)
    if name is None:
        name = f[len(ATTRIBUTE_PREFIX):] if f.startswith(ATTRIBUTE_PREFIX) else f
    if len(name) > 128 or not _IDENTIFIER.fullmatch(name):
        raise PlanError(f"plan: column {name!r} for {f} is not an identifier (letters, digits, _; "
                        "one optional table. prefix)")
    return name


def like_pattern(dialect: str, op: str, value: str) -> str:
    """The bind parameter of ``starts_with``, ``ends_with`` or ``contains``
    of ``value`` in ``dialect``, as the sidecar writes it: a LIKE pattern
    for postgres (escape ``\\``) and mysql (escape ``!``), a GLOB pattern
    for sqlite, the value's special characters escaped and a wildcard
    before, after or on both sides."""
    if dialect == "sqlite":
        wild = "*"
        body = "".join(f"[{c}]" if c in "*?[" else c for c in value)
    else:
        wild = "%"
        esc = "!" if dialect == "mysql" else "\\"
        body = "".join(esc + c if c in ("%", "_", esc) else c for c in value)
    before = wild if op in ("ends_with", "contains") else ""
    after = wild if op in ("starts_with", "contains") else ""
    return before + body + after


def to_sql(plan: Plan | Condition, dialect: str = "postgres", columns: Mapping[str, str] | None = None) -> SQLFilter:
    """``plan`` (or a condition) as a WHERE clause in ``dialect`` with
    ``columns`` naming the columns (see :func:`column_name`), rendered as the
    sidecar renders it. Every value is a bind parameter, never part of the
    text."""
    if dialect not in DIALECTS:
        raise PlanError(f"plan: dialect {dialect!r} is not postgres, sqlite or mysql")
    if isinstance(plan, Plan):
        if plan.kind == ALWAYS_ALLOWED:
            return SQLFilter(WHERE_TRUE, [])
        if plan.kind == ALWAYS_DENIED or plan.condition is None:
            return SQLFilter(WHERE_FALSE, [])
        plan = plan.condition
    r = _Renderer(dialect, columns or {})
    where = r.cond(plan)
    return SQLFilter(where, r.params)


class _Renderer:
    def __init__(self, dialect: str, columns: Mapping[str, str]) -> None:
        self.dialect = dialect
        self.columns = columns
        self.params: list[Any] = []

    def param(self, v: Any) -> str:
        self.params.append(v)
        return f"${len(self.params)}" if self.dialect == "postgres" else "?"

    def value(self, v: Any, ordering: bool = False) -> str:
        """A compared value's parameter, a string compared byte for byte as
        the policy compares, not by the column's collation: in MySQL (whose
        default ones ignore case, accents and trailing spaces) CAST(? AS
        BINARY); in PostgreSQL, for an ordering, $n COLLATE "C"."""
        p = self.param(v)
        if isinstance(v, str) and self.dialect == "mysql":
            return f"CAST({p} AS BINARY)"
        if isinstance(v, str) and self.dialect == "postgres" and ordering:
            return f'{p} COLLATE "C"'
        return p

    def column(self, f: str) -> str:
        q = '"' if self.dialect == "postgres" else "`"
        return ".".join(q + p + q for p in column_name(f, self.columns).split("."))

    def cond(self, c: Condition) -> str:
        if c.op in ("and", "or"):
            if not c.args:
                return WHERE_TRUE if c.op == "and" else WHERE_FALSE
            return "(" + f" {c.op.upper()} ".join(self.cond(a) for a in c.args) + ")"
        if c.op == "not":
            assert c.arg is not None
            return f"({self.cond(c.arg)}) IS NOT TRUE"
        col = self.column(c.field)
        if c.op == "in":
            vals = [v for v in c.values if v is not None]
            has_null = len(vals) < len(c.values)
            if not vals:
                return f"{col} IS NULL" if has_null else WHERE_FALSE
            s = f"{col} IN (" + ", ".join(self.value(v) for v in vals) + ")"
            return f"({s} OR {col} IS NULL)" if has_null else s
        if c.op in STRING_TESTS:
            # Case-sensitive in every dialect: SQLite's LIKE ignores ASCII
            # case, its GLOB does not; MySQL compares a binary pattern byte
            # for byte.
            p = self.param(like_pattern(self.dialect, c.op, str(c.value)))
            if self.dialect == "sqlite":
                return f"{col} GLOB {p}"
            if self.dialect == "mysql":
                return f"{col} LIKE CAST({p} AS BINARY) ESCAPE '!'"
            return f"{col} LIKE {p} ESCAPE '\\'"
        if c.value is None:
            return f"{col} IS NULL" if c.op == "eq" else f"{col} IS NOT NULL"
        return f"{col} {_COMPARISONS[c.op]} {self.value(c.value, c.op not in ('eq', 'ne'))}"
