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
class) named ``id``, ``tenant`` or the attribute's own name.

A missing field (NULL) makes every comparison false and ``not`` true:
``not`` renders as ``(x) IS NOT true``, as the sidecar's SQL has it.
"""

from __future__ import annotations

from typing import Any, Mapping

from sqlalchemy import and_, false, or_, true
from sqlalchemy.sql.elements import ColumnElement

from .plan import ALWAYS_ALLOWED, ATTRIBUTE_PREFIX, Condition, Plan, PlanError

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
            return self.columns[f]
        name = f[len(ATTRIBUTE_PREFIX):] if f.startswith(ATTRIBUTE_PREFIX) else f
        holder = getattr(self.source, "c", self.source)
        col = getattr(holder, name, None) if holder is not None else None
        if col is None:
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
            expr = col.in_(vals)
            return or_(expr, col.is_(None)) if has_null else expr
        if c.value is None:
            return col.is_(None) if c.op == "eq" else col.is_not(None)
        v = c.value
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

