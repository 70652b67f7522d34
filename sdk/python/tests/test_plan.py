"""Resource plans: parsing condition trees, rendering them as SQL
(svc_sdk.plan.to_sql, run with the standard library's sqlite3), as a
SQLAlchemy filter and as a Django Q, each run on a real SQLite table whose
rows lack attributes, and compared with the tree's own meaning: a missing
field makes comparisons false and ``not`` true."""

from __future__ import annotations

import random
import sqlite3
import unittest
from typing import Any

import djangoconf

djangoconf.setup()

from django.db import connection, models  # noqa: E402
from sqlalchemy import Column, ForeignKey, Integer, MetaData, String, Table, create_engine, select  # noqa: E402
from sqlalchemy.dialects import mysql, postgresql, sqlite  # noqa: E402
from sqlalchemy.orm import declarative_base, relationship  # noqa: E402

from svc_sdk.django import plan_filter as django_filter  # noqa: E402
from svc_sdk.plan import Condition, Plan, PlanError, to_sql  # noqa: E402
from svc_sdk.sqlalchemy import plan_filter as sqlalchemy_filter  # noqa: E402

SAMPLE = {"op": "and", "args": [
    {"op": "eq", "field": "tenant", "value": "acme"},
    {"op": "or", "args": [
        {"op": "eq", "field": "attributes.owner", "value": "alice"},
        {"op": "in", "field": "attributes.status", "values": ["open", "shared"]},
    ]},
    {"op": "not", "arg": {"op": "ge", "field": "attributes.level", "value": 3}},
    {"op": "ne", "field": "attributes.status", "value": None},
]}

# The rows' columns, each attribute nullable; the values a random tree
# compares them with (of the column's type, and some no row has).
FIELDS: dict[str, list[Any]] = {
    "id": ["o1", "o2", "o5", "o9", "zz"],
    "tenant": ["acme", "globex", "initech"],
    "attributes.owner": ["alice", "bob", "carol", "nobody"],
    "attributes.status": ["open", "shared", "closed"],
    "attributes.level": [0, 1, 2, 3, 5],
    # Every dialect's pattern characters, case and multi-byte differences.
    "attributes.name": ["/team-a/x.pdf", "/team-A/x.PDF", "a%c", "a_c", "abc", "a\\b", "*?[", "a!b", "é",
                        "É", "日本語", "draft", "Draft v2", "nothing"],
}
COLUMN = {"id": "id", "tenant": "tenant", "attributes.owner": "owner", "attributes.status": "status",
          "attributes.level": "level", "attributes.name": "name"}
STRING_FIELDS = ("id", "tenant", "attributes.owner", "attributes.status", "attributes.name")
# The values of the string tests: prefixes, suffixes, substrings of the
# values above, pattern characters and case differences.
PARTS = ["", "a", "A", "/team-a/", "/team-", ".pdf", ".PDF", "%", "_", "a%", "a_", "\\", "\\b", "*", "?", "[",
         "!", "a!", "é", "É", "本", "日本", "語", "draft", "Draft", "o", "al", "ice", "ope", "acme", "sha"]


def rows(n: int = 120, seed: int = 7) -> list[dict[str, Any]]:
    r = random.Random(seed)
    out = []
    for i in range(n):
        row: dict[str, Any] = {"id": f"o{i}", "tenant": r.choice(FIELDS["tenant"])}
        for f in ("attributes.owner", "attributes.status", "attributes.level", "attributes.name"):
            # A third of the rows lack each attribute.
            row[COLUMN[f]] = r.choice(FIELDS[f][:-1]) if r.random() < 0.67 else None
        out.append(row)
    return out


def holds(c: Condition, row: dict[str, Any]) -> bool:
    """What the tree means for one resource (the policy's view): a field
    the row lacks makes a comparison false."""
    if c.op == "and":
        return all(holds(a, row) for a in c.args)
    if c.op == "or":
        return any(holds(a, row) for a in c.args)
    if c.op == "not":
        assert c.arg is not None
        return not holds(c.arg, row)
    v = row[COLUMN[c.field]]
    if c.op == "in":
        return v in [x for x in c.values if x is not None] or (v is None and None in c.values)
    if c.op in ("starts_with", "ends_with", "contains"):
        if not isinstance(v, str):
            return False
        assert isinstance(c.value, str)
        return {"starts_with": v[:len(c.value)] == c.value, "ends_with": v[len(v) - len(c.value):] == c.value,
                "contains": v.find(c.value) >= 0}[c.op]
    if c.value is None:
        return (v is None) == (c.op == "eq")
    if v is None:
        return False
    return {"eq": v == c.value, "ne": v != c.value, "lt": v < c.value, "le": v <= c.value,
            "gt": v > c.value, "ge": v >= c.value}[c.op]


def random_tree(r: random.Random, depth: int = 0) -> dict[str, Any]:
    k = r.random()
    if depth < 4 and k < 0.35:
        op = r.choice(["and", "or"])
        return {"op": op, "args": [random_tree(r, depth + 1) for _ in range(r.randint(0, 3))]}
    if depth < 4 and k < 0.55:
        return {"op": "not", "arg": random_tree(r, depth + 1)}
    f = r.choice(list(FIELDS))
    if r.random() < 0.2:
        vals = r.sample(FIELDS[f], r.randint(0, 3)) + ([None] if r.random() < 0.3 else [])
        return {"op": "in", "field": f, "values": vals}
    if f in STRING_FIELDS and r.random() < 0.3:
        return {"op": r.choice(["starts_with", "ends_with", "contains"]), "field": f, "value": r.choice(PARTS)}
    ops = ["eq", "ne", "lt", "le", "gt", "ge"]
    op = r.choice(ops)
    if op in ("eq", "ne") and r.random() < 0.2:
        return {"op": op, "field": f, "value": None}
    return {"op": op, "field": f, "value": r.choice(FIELDS[f])}


def trees(n: int = 300) -> list[Condition]:
    r = random.Random(34)
    # The sample, the NULL cases of "not" by themselves, then random trees.
    fixed = [SAMPLE,
             {"op": "not", "arg": {"op": "eq", "field": "attributes.owner", "value": "alice"}},
             {"op": "not", "arg": {"op": "not", "arg": {"op": "eq", "field": "attributes.owner", "value": "alice"}}},
             {"op": "not", "arg": {"op": "and", "args": [{"op": "eq", "field": "tenant", "value": "acme"},
                                                         {"op": "not", "arg": {"op": "lt", "field": "attributes.level",
                                                                               "value": 2}}]}},
             {"op": "not", "arg": {"op": "ne", "field": "attributes.status", "value": "open"}},
             {"op": "not", "arg": {"op": "in", "field": "attributes.status", "values": []}},
             {"op": "not", "arg": {"op": "or", "args": []}},
             {"op": "not", "arg": {"op": "and", "args": []}}]
    for op in ("starts_with", "ends_with", "contains"):
        for v in PARTS:
            fixed += [{"op": op, "field": "attributes.name", "value": v},
                      {"op": "not", "arg": {"op": op, "field": "attributes.name", "value": v}}]
    return [Condition.from_json(t) for t in fixed + [random_tree(r) for _ in range(n)]]


class ConditionTest(unittest.TestCase):
    def test_round_trip(self) -> None:
        c = Condition.from_json(SAMPLE)
        self.assertEqual(c.to_json(), SAMPLE)
        self.assertEqual(Condition.from_json({"op": "in", "field": "id"}).to_json(),
                         {"op": "in", "field": "id", "values": []})

    def test_string_tests(self) -> None:
        src = {"op": "or", "args": [{"op": "starts_with", "field": "attributes.path", "value": "/team-a/"},
                                    {"op": "ends_with", "field": "id", "value": ".pdf"},
                                    {"op": "not", "arg": {"op": "contains", "field": "tenant", "value": "é%_"}}]}
        self.assertEqual(Condition.from_json(src).to_json(), src)
        for bad in ({"op": "starts_with", "field": "id", "value": 1}, {"op": "ends_with", "field": "id", "value": None},
                    {"op": "contains", "field": "id"}, {"op": "contains", "field": "id", "value": True},
                    {"op": "starts_with", "field": "path", "value": "a"}):
            with self.subTest(bad=bad), self.assertRaises(PlanError):
                Condition.from_json(bad)

    def test_holds_is_the_tree(self) -> None:
        # Condition.holds on a resource is the tree's meaning on its row.
        for c in trees():
            for r in rows():
                attrs = {k: r[COLUMN[f]] for f, k in ((f, f[len("attributes."):]) for f in FIELDS
                                                       if f.startswith("attributes.")) if r[COLUMN[f]] is not None}
                resource = {"id": r["id"], "tenant": r["tenant"], "attributes": attrs}
                if c.holds(resource) != holds(c, r):
                    self.fail(f"{c.to_json()} on {resource}: holds {c.holds(resource)}")
        starts = Condition.from_json({"op": "starts_with", "field": "attributes.n", "value": "1"})
        self.assertFalse(starts.holds({"attributes": {"n": 1}}), "a number is no string")
        self.assertTrue(Condition.from_json({"op": "not", "arg": starts.to_json()}).holds({"attributes": {"n": 1}}))
        self.assertFalse(Condition.from_json({"op": "eq", "field": "attributes.n", "value": 1}).holds(
            {"attributes": {"n": True}}), "a boolean is no number")
        self.assertTrue(Plan("conditional", starts).permits({"attributes": {"n": "12"}}))
        self.assertTrue(Plan("always_allowed").permits({}))
        self.assertFalse(Plan("always_denied").permits({}))

    def test_malformed(self) -> None:
        for bad in ({"op": "xor"}, {"op": "eq", "field": "owner", "value": "a"},
                    {"op": "eq", "field": "attributes.", "value": "a"},
                    {"op": "eq", "field": "id", "value": {"a": 1}}, {"op": "lt", "field": "id", "value": None},
                    {"op": "not"}, {"op": "in", "field": "id", "values": [[1]]},
                    {"op": "gt", "field": "id", "value": float("nan")}, [], "eq"):
            with self.subTest(bad=bad), self.assertRaises(PlanError):
                Condition.from_json(bad)
        deep: dict[str, Any] = {"op": "and", "args": []}
        for _ in range(64):
            deep = {"op": "not", "arg": deep}
        with self.assertRaisesRegex(PlanError, "deeper than 64"):
            Condition.from_json(deep)

    def test_plan_from_json(self) -> None:
        p = Plan.from_json({"kind": "conditional", "condition": SAMPLE,
                            "sql": {"where": '"tenant" = $1', "params": ["acme", 3.0, 1.5]},
                            "decision_id": "d1", "reason": "plan-conditional", "subject": "alice"})
        self.assertTrue(p.conditional)
        self.assertEqual(p.condition, Condition.from_json(SAMPLE))
        # A ListValue's numbers are doubles: whole ones go to drivers as int.
        self.assertEqual(p.sql.params, ["acme", 3, 1.5])
        self.assertIsInstance(p.sql.params[1], int)
        self.assertEqual((p.decision_id, p.reason, p.subject), ("d1", "plan-conditional", "alice"))
        d = Plan.from_json({"kind": "always_denied", "reason": "token-expired"})
        self.assertEqual((d.always_denied, d.condition, d.sql.where, d.sql.params), (True, None, "1 = 0", []))
        with self.assertRaises(PlanError):
            Plan.from_json({"kind": "conditional"})
        with self.assertRaises(PlanError):
            Plan.from_json({"kind": "maybe"})


class SQLTest(unittest.TestCase):
    def test_dialects_as_the_sidecar_renders(self) -> None:
        # The same tree and text as plan/plan_test.go's TestSQLDialects.
        c = Condition.from_json(SAMPLE)
        for dialect, cols, want in (
                ("postgres", None, '("tenant" = $1 AND ("owner" = $2 OR "status" IN ($3, $4)) AND ("level" >= $5) '
                                   'IS NOT TRUE AND "status" IS NOT NULL)'),
                ("sqlite", {"tenant": "tenant_id", "attributes.owner": "o.owner_id"},
                 "(`tenant_id` = ? AND (`o`.`owner_id` = ? OR `status` IN (?, ?)) AND (`level` >= ?) IS NOT TRUE "
                 "AND `status` IS NOT NULL)"),
                ("mysql", None, "(`tenant` = CAST(? AS BINARY) AND (`owner` = CAST(? AS BINARY) OR `status` IN "
                                "(CAST(? AS BINARY), CAST(? AS BINARY))) AND (`level` >= ?) IS NOT TRUE "
                                "AND `status` IS NOT NULL)")):
            with self.subTest(dialect=dialect):
                s = to_sql(c, dialect, cols)
                self.assertEqual(s.where, want)
                self.assertEqual(s.params, ["acme", "alice", "open", "shared", 3])
        for tree, want in (({"op": "in", "field": "id", "values": []}, "1 = 0"),
                           ({"op": "in", "field": "id", "values": [None]}, '"id" IS NULL'),
                           ({"op": "in", "field": "id", "values": ["a", None]}, '("id" IN ($1) OR "id" IS NULL)'),
                           ({"op": "eq", "field": "id", "value": None}, '"id" IS NULL'),
                           ({"op": "or", "args": []}, "1 = 0"), ({"op": "and", "args": []}, "1 = 1")):
            self.assertEqual(to_sql(Condition.from_json(tree)).where, want)
        self.assertEqual(to_sql(Plan("always_allowed")).where, "1 = 1")
        self.assertEqual(to_sql(Plan("always_denied")).where, "1 = 0")

    def test_string_tests_as_the_sidecar_renders(self) -> None:
        # The same tree, text and parameters as plan/plan_test.go's TestSQLStringTests.
        c = Condition.from_json({"op": "and", "args": [
            {"op": "starts_with", "field": "attributes.path", "value": "/a_b%\\!*?["},
            {"op": "not", "arg": {"op": "ends_with", "field": "attributes.name", "value": ".pdf"}},
            {"op": "contains", "field": "attributes.title", "value": "draft"}]})
        for dialect, want, params in (
                ("postgres", '("path" LIKE $1 ESCAPE \'\\\' AND ("name" LIKE $2 ESCAPE \'\\\') IS NOT TRUE AND '
                             '"title" LIKE $3 ESCAPE \'\\\')', ["/a\\_b\\%\\\\!*?[%", "%.pdf", "%draft%"]),
                ("sqlite", "(`path` GLOB ? AND (`name` GLOB ?) IS NOT TRUE AND `title` GLOB ?)",
                 ["/a_b%\\![*][?][[]*", "*.pdf", "*draft*"]),
                ("mysql", "(`path` LIKE CAST(? AS BINARY) ESCAPE '!' AND (`name` LIKE CAST(? AS BINARY) ESCAPE '!') "
                          "IS NOT TRUE AND `title` LIKE CAST(? AS BINARY) ESCAPE '!')",
                 ["/a!_b!%\\!!*?[%", "%.pdf", "%draft%"])):
            with self.subTest(dialect=dialect):
                s = to_sql(c, dialect)
                self.assertEqual(s.where, want)
                self.assertEqual(s.params, params)

    def test_values_never_in_the_text(self) -> None:
        evil = "x' OR '1'='1"
        s = to_sql(Condition.from_json({"op": "eq", "field": "attributes.owner", "value": evil}), "sqlite")
        self.assertNotIn(evil, s.where)
        self.assertEqual(s.params, [evil])
        for bad in ('owner"; DROP TABLE x; --', "a.b.c", "1x", ""):
            with self.subTest(column=bad), self.assertRaises(PlanError):
                to_sql(Condition.from_json({"op": "eq", "field": "attributes.owner", "value": "a"}), "sqlite",
                       {"attributes.owner": bad})
        with self.assertRaises(PlanError):
            to_sql(Condition.from_json({"op": "eq", "field": "attributes.x-y", "value": "a"}))
        with self.assertRaises(PlanError):
            to_sql(Condition.from_json(SAMPLE), "oracle")

    def test_sqlite_rows_agree_with_the_tree(self) -> None:
        db = sqlite3.connect(":memory:")
        db.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, owner TEXT, status TEXT, "
                   "level INTEGER, name TEXT)")
        data = rows()
        db.executemany("INSERT INTO orders VALUES (:id, :tenant, :owner, :status, :level, :name)", data)
        for c in trees():
            s = to_sql(c, "sqlite")
            got = {r[0] for r in db.execute(f"SELECT id FROM orders WHERE {s.where}", s.params)}
            want = {r["id"] for r in data if holds(c, r)}
            self.assertEqual(got, want, f"{c.to_json()}\n{s.where}")


class SQLAlchemyTest(unittest.TestCase):
    def setUp(self) -> None:
        self.engine = create_engine("sqlite://")
        self.orders = Table("orders", MetaData(), Column("id", String, primary_key=True), Column("tenant", String),
                            Column("owner_name", String), Column("status", String), Column("level", Integer),
                            Column("name", String))
        self.orders.metadata.create_all(self.engine)
        self.data = rows()
        with self.engine.begin() as conn:
            conn.execute(self.orders.insert(), [{**r, "owner_name": r["owner"]} for r in self.data])

    def select(self, where: Any) -> set[str]:
        with self.engine.connect() as conn:
            return {r[0] for r in conn.execute(select(self.orders.c.id).where(where))}

    def test_rows_agree_with_the_tree(self) -> None:
        cols = {"attributes.owner": self.orders.c.owner_name}
        for c in trees():
            got = self.select(sqlalchemy_filter(c, self.orders, cols))
            want = {r["id"] for r in self.data if holds(c, r)}
            self.assertEqual(got, want, c.to_json())

    def test_plans(self) -> None:
        everything = {r["id"] for r in self.data}
        self.assertEqual(self.select(sqlalchemy_filter(Plan("always_allowed"), self.orders)), everything)
        self.assertEqual(self.select(sqlalchemy_filter(Plan("always_denied"), self.orders)), set())
        not_alice = Plan("conditional", Condition.from_json(
            {"op": "not", "arg": {"op": "eq", "field": "attributes.owner", "value": "alice"}}))
        got = self.select(sqlalchemy_filter(not_alice, self.orders, {"attributes.owner": self.orders.c.owner_name}))
        self.assertEqual(got, {r["id"] for r in self.data if r["owner"] != "alice"})
        self.assertTrue({r["id"] for r in self.data if r["owner"] is None} <= got, "a missing owner is not alice")

    def test_strings_compare_byte_for_byte(self) -> None:
        # The same tree and text as plan/plan_test.go's TestSQLStringComparisons.
        c = Condition.from_json({"op": "and", "args": [
            {"op": "lt", "field": "attributes.name", "value": "m"},
            {"op": "eq", "field": "attributes.name", "value": "a"},
            {"op": "ge", "field": "attributes.level", "value": 2}]})
        for dialect, want in (("postgres", '("name" < $1 COLLATE "C" AND "name" = $2 AND "level" >= $3)'),
                              ("sqlite", "(`name` < ? AND `name` = ? AND `level` >= ?)"),
                              ("mysql", "(`name` < CAST(? AS BINARY) AND `name` = CAST(? AS BINARY) AND `level` >= ?)")):
            self.assertEqual(to_sql(c, dialect).where, want, dialect)
        pg = str(sqlalchemy_filter(c, self.orders).compile(dialect=postgresql.dialect()))
        self.assertEqual(pg, 'orders.name < %(param_1)s COLLATE "C" AND orders.name = %(param_2)s '
                             'AND orders.level >= %(level_1)s')

    def test_not_keeps_its_parentheses(self) -> None:
        c = Condition.from_json({"op": "not", "arg": {"op": "eq", "field": "tenant", "value": "acme"}})
        sql = str(sqlalchemy_filter(c, self.orders).compile(dialect=postgresql.dialect()))
        self.assertEqual(sql, "(orders.tenant = %(param_1)s) IS NOT true")

    def test_string_tests_per_dialect(self) -> None:
        c = Condition.from_json({"op": "not", "arg": {"op": "starts_with", "field": "tenant", "value": "a_%"}})
        f = sqlalchemy_filter(c, self.orders)
        pg = f.compile(dialect=postgresql.dialect())
        self.assertEqual(str(pg), "(orders.tenant LIKE %(param_1)s ESCAPE '\\') IS NOT true")
        self.assertEqual(list(pg.params.values()), ["a\\_\\%%"])
        my = f.compile(dialect=mysql.dialect())
        self.assertEqual(str(my), "(orders.tenant LIKE CAST(%s AS BINARY) ESCAPE '!') IS NOT true")
        self.assertEqual(list(my.params.values()), ["a!_!%%"])
        lite = f.compile(dialect=sqlite.dialect())
        self.assertEqual(str(lite), "(orders.tenant GLOB ?) IS NOT 1")
        self.assertEqual(list(lite.params.values()), ["a_%*"])

    def test_mysql_compares_strings_byte_for_byte(self) -> None:
        c = Condition.from_json({"op": "or", "args": [
            {"op": "eq", "field": "tenant", "value": "acme"},
            {"op": "in", "field": "attributes.status", "values": ["open", None]},
            {"op": "ge", "field": "attributes.level", "value": 3}]})
        f = sqlalchemy_filter(c, self.orders)
        my = f.compile(dialect=mysql.dialect())
        self.assertEqual(str(my), "orders.tenant = CAST(%s AS BINARY) OR orders.status IN (CAST(%s AS BINARY)) "
                                  "OR orders.status IS NULL OR orders.level >= %s")
        self.assertEqual(list(my.params.values()), ["acme", "open", 3])
        pg = f.compile(dialect=postgresql.dialect())
        self.assertNotIn("BINARY", str(pg))

    def test_missing_column(self) -> None:
        c = Condition.from_json({"op": "eq", "field": "attributes.owner", "value": "a"})
        with self.assertRaisesRegex(PlanError, "no column for attributes.owner"):
            sqlalchemy_filter(c, self.orders)

    def test_attribute_that_is_no_column(self) -> None:
        # A mapped class answers for its Python properties, methods and
        # relationships, a Table's .c for its own methods: compared with a
        # number, such an attribute was a Python bool, and "ne" of it, True,
        # dropped out of the filter, which listed rows the plan excludes.
        base = declarative_base()

        class Person(base):  # type: ignore[misc,valid-type]
            __tablename__ = "people"
            id = Column(Integer, primary_key=True)

        class Doc(base):  # type: ignore[misc,valid-type]
            __tablename__ = "docs"
            id = Column(String, primary_key=True)
            tenant = Column(String)
            archived_at = Column(String)
            author_id = Column(Integer, ForeignKey("people.id"))
            author = relationship(Person)

            @property
            def status(self) -> str:
                return "archived" if self.archived_at else "open"

        base.metadata.create_all(self.engine)
        with self.engine.begin() as conn:
            conn.execute(Doc.__table__.insert(), [{"id": "d1", "tenant": "acme", "archived_at": "2026-01-01"},
                                                  {"id": "d2", "tenant": "acme", "archived_at": None}])
        for source, field in ((Doc, "attributes.status"), (Doc, "attributes.metadata"), (Doc, "attributes.author"),
                              (Doc, "attributes.registry"), (self.orders, "attributes.keys"),
                              (self.orders, "attributes.items")):
            for tree in ({"op": "ne", "field": field, "value": "archived"},
                         {"op": "ne", "field": field, "value": 5},
                         {"op": "ne", "field": field, "value": True},
                         {"op": "eq", "field": field, "value": "archived"},
                         {"op": "in", "field": field, "values": ["open"]},
                         {"op": "not", "arg": {"op": "eq", "field": field, "value": "archived"}},
                         {"op": "starts_with", "field": field, "value": "a"}):
                with self.subTest(source=getattr(source, "__name__", "orders"), tree=tree):
                    with self.assertRaisesRegex(PlanError, f"no column for {field}"):
                        sqlalchemy_filter(Condition.from_json(tree), source)
        with self.assertRaisesRegex(PlanError, "not a column"):
            sqlalchemy_filter(Condition.from_json({"op": "ne", "field": "attributes.status", "value": "x"}),
                              Doc, {"attributes.status": Doc.status})
        # The mapped class's columns still serve, and a column named like
        # a method of Table.c is found by its key.
        c = Condition.from_json({"op": "and", "args": [{"op": "eq", "field": "tenant", "value": "acme"},
                                                       {"op": "ne", "field": "attributes.archived_at", "value": None}]})
        with self.engine.connect() as conn:
            got = {r[0] for r in conn.execute(select(Doc.id).where(sqlalchemy_filter(c, Doc)))}
        self.assertEqual(got, {"d1"})
        keyed = Table("keyed", MetaData(), Column("id", String, primary_key=True), Column("keys", String))
        sql = str(sqlalchemy_filter(Condition.from_json({"op": "eq", "field": "attributes.keys", "value": "k"}), keyed)
                  .compile(dialect=postgresql.dialect()))
        self.assertEqual(sql, "keyed.keys = %(param_1)s")


class Order(models.Model):
    id = models.CharField(primary_key=True, max_length=16)
    tenant = models.CharField(max_length=16)
    owner_name = models.CharField(max_length=16, null=True)
    status = models.CharField(max_length=16, null=True)
    level = models.IntegerField(null=True)
    name = models.CharField(max_length=32, null=True)

    class Meta:
        app_label = "svc_plan_tests"


class OrderDoc(models.Model):
    """The rows again, their attributes as keys of a JSONField; a missing
    attribute is a missing key."""
    id = models.CharField(primary_key=True, max_length=16)
    tenant = models.CharField(max_length=16)
    attributes = models.JSONField(null=True)

    class Meta:
        app_label = "svc_plan_tests"


class DjangoTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        with connection.schema_editor() as editor:
            editor.create_model(Order)
            editor.create_model(OrderDoc)
        cls.data = rows()
        Order.objects.bulk_create([Order(owner_name=r["owner"], **{k: v for k, v in r.items() if k != "owner"})
                                   for r in cls.data])
        OrderDoc.objects.bulk_create([OrderDoc(id=r["id"], tenant=r["tenant"], attributes={
            k: v for k, v in r.items() if k not in ("id", "tenant") and v is not None}) for r in cls.data])

    @classmethod
    def tearDownClass(cls) -> None:
        with connection.schema_editor() as editor:
            editor.delete_model(Order)
            editor.delete_model(OrderDoc)

    def select(self, q: Any) -> set[str]:
        return set(Order.objects.filter(q).values_list("id", flat=True))

    def test_rows_agree_with_the_tree(self) -> None:
        fields = {"attributes.owner": "owner_name"}
        for c in trees():
            got = self.select(django_filter(c, fields))
            want = {r["id"] for r in self.data if holds(c, r)}
            self.assertEqual(got, want, c.to_json())

    def test_json_keys_agree_with_the_tree(self) -> None:
        fields = {f"attributes.{a}": f"attributes__{a}" for a in ("owner", "status", "level", "name")}
        for c in trees():
            got = set(OrderDoc.objects.filter(django_filter(c, fields)).values_list("id", flat=True))
            want = {r["id"] for r in self.data if holds(c, r)}
            self.assertEqual(got, want, c.to_json())

    def test_plans(self) -> None:
        everything = {r["id"] for r in self.data}
        self.assertEqual(self.select(django_filter(Plan("always_allowed"))), everything)
        self.assertEqual(self.select(django_filter(Plan("always_denied"))), set())
        self.assertEqual(self.select(~django_filter(Plan("always_denied"))), everything)
        self.assertEqual(self.select(~django_filter(Plan("always_allowed"))), set())


class _DjangoServerTest:
    """The same trees on a real database server (the Django alias
    ``alias``), with rows that differ from others only by case, accent or
    a trailing space: the Q's comparisons must be byte for byte, as the
    policy's are."""

    alias = ""

    @classmethod
    def start(cls) -> Any:
        raise NotImplementedError

    @classmethod
    def prepare(cls) -> None:
        """Runs after the tables are made."""

    @classmethod
    def setUpClass(cls) -> None:
        from django.db import connections
        cls.server = cls.start()
        # Run even when the rest of setUpClass fails.
        cls.addClassCleanup(cls.server.stop)
        cls.db = connections[cls.alias]
        cls.addClassCleanup(cls.db.close)
        cls.db.settings_dict["PORT"] = str(cls.server.port)
        with cls.db.schema_editor() as editor:
            editor.create_model(Order)
            editor.create_model(OrderDoc)
        cls.prepare()
        cls.data = rows() + [{"id": "x1", "tenant": "ACME", "owner": "Alice", "status": "open ", "level": None,
                              "name": "/TEAM-A/X.PDF"}, {"id": "x2", "tenant": "acmé", "owner": "alicé",
                                                         "status": "Open", "level": 1, "name": "Draft"}]
        Order.objects.using(cls.alias).bulk_create([
            Order(owner_name=r["owner"], **{k: v for k, v in r.items() if k != "owner"}) for r in cls.data])
        OrderDoc.objects.using(cls.alias).bulk_create([OrderDoc(id=r["id"], tenant=r["tenant"], attributes={
            k: v for k, v in r.items() if k not in ("id", "tenant") and v is not None}) for r in cls.data])

    def test_rows_agree_with_the_tree(self) -> None:
        for c in trees():
            got = set(Order.objects.using(self.alias).filter(django_filter(c, {"attributes.owner": "owner_name"}))
                      .values_list("id", flat=True))
            self.assertEqual(got, {r["id"] for r in self.data if holds(c, r)}, c.to_json())

    def test_json_keys_agree_with_the_tree(self) -> None:
        fields = {f"attributes.{a}": f"attributes__{a}" for a in ("owner", "status", "level", "name")}
        for c in trees():
            got = set(OrderDoc.objects.using(self.alias).filter(django_filter(c, fields))
                      .values_list("id", flat=True))
            self.assertEqual(got, {r["id"] for r in self.data if holds(c, r)}, c.to_json())

    def test_case_accents_and_spaces_differ(self) -> None:
        for tree, want in (({"op": "eq", "field": "tenant", "value": "acme"}, "acme"),
                           ({"op": "in", "field": "attributes.status", "values": ["open"]}, "open")):
            c = Condition.from_json(tree)
            got = set(Order.objects.using(self.alias).filter(django_filter(c)).values_list("id", flat=True))
            self.assertNotIn("x1", got)
            self.assertNotIn("x2", got)
            self.assertTrue(got, f"no row is {want!r}")


class DjangoMySQLTest(_DjangoServerTest, unittest.TestCase):
    """MariaDB, its tables in the server's default, case- and
    accent-insensitive collation."""

    alias = "mysql"

    @classmethod
    def start(cls) -> Any:
        import harness
        return harness.MariaDB()


class DjangoPostgresTest(_DjangoServerTest, unittest.TestCase):
    """PostgreSQL, the string columns in a linguistic (ICU) collation,
    which orders "a" < "B" < "b" where bytes have "B" < "a"."""

    alias = "postgres"

    @classmethod
    def start(cls) -> Any:
        import harness
        return harness.PostgreSQL()

    @classmethod
    def prepare(cls) -> None:
        with cls.db.cursor() as cur:
            for col in ("id", "tenant", "owner_name", "status", "name"):
                cur.execute(f'ALTER TABLE {Order._meta.db_table} ALTER COLUMN {col} TYPE varchar(32) '
                            'COLLATE "und-x-icu"')


if __name__ == "__main__":
    unittest.main()
