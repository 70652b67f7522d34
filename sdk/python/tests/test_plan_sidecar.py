"""Client.plan_resources against the real sidecar, and the list-filtering
example (examples/list_orders.py) on a real SQLite database: the rows a
plan selects are exactly those whose own authorize answer allows them,
through the sidecar's SQL, SQLAlchemy and Django alike, rows that lack an
attribute included."""

from __future__ import annotations

import os
import sqlite3
import sys
import time
import unittest
from typing import Any

import djangoconf
import harness

djangoconf.setup()

from django.db import connection, models  # noqa: E402
from sqlalchemy import Column, MetaData, String, Table, create_engine, select  # noqa: E402

from svc_sdk import Client, SidecarRequestError, SidecarUnavailableError  # noqa: E402
from svc_sdk.django import plan_filter as django_filter  # noqa: E402
from svc_sdk.plan import to_sql  # noqa: E402
from svc_sdk.sqlalchemy import plan_filter as sqlalchemy_filter  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import list_orders  # noqa: E402

ROWS = [{"id": f"o{i}", "tenant": ("acme", "globex")[i % 5 == 0], "owner": ("alice", "bob", None)[i % 3],
         "status": ("open", None, "archived", ("public", "Public", "public draft")[i % 3])[i % 4]} for i in range(40)]
# The policy of sdk/testdata/plan: owners read their orders unless
# archived, the tenant reads public ones (a status starting with
# "public", case-sensitively, without "draft").
ATTRIBUTE_POLICY = str(harness.REPO / "sdk" / "testdata" / "plan")


def allowed(client: Client, token: str, action: str) -> list[str]:
    """The rows each one's own authorize answer allows."""
    out = []
    for r in ROWS:
        attrs = {k: r[k] for k in ("owner", "status") if r[k] is not None}
        d = client.authorize(token, action, "orders", r["id"], resource_tenant=r["tenant"], resource_attributes=attrs)
        if d.allow:
            out.append(r["id"])
    return sorted(out)


class PlanResourcesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.idp, cls.sidecar = harness.shared()
        cls.client = Client(cls.sidecar.url, "closed", harness.CALL_TIMEOUT, config_file=None)
        cls.db = sqlite3.connect(":memory:")
        cls.db.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, owner TEXT, status TEXT)")
        cls.db.executemany("INSERT INTO orders VALUES (:id, :tenant, :owner, :status)", ROWS)

    def token(self, **over: Any) -> str:
        return self.idp.token(harness.claims(**over))

    def select(self, where: str, params: list[Any]) -> list[str]:
        return sorted(r[0] for r in self.db.execute(f"SELECT id FROM orders WHERE {where}", params))

    def test_a_viewer_lists_its_tenants_rows(self) -> None:
        token = self.token(roles=["viewer"])
        plan = self.client.plan_resources("orders:read", "orders", "sqlite", token=token)
        self.assertTrue(plan.conditional, plan)
        self.assertEqual((plan.reason, plan.subject, plan.tenant_id), ("plan-conditional", "alice", harness.TENANT))
        self.assertTrue(plan.decision_id and plan.policy_revision, plan)
        self.assertNotIn(harness.TENANT, plan.sql.where, "values are parameters")
        got = self.select(plan.sql.where, plan.sql.params)
        self.assertTrue(0 < len(got) < len(ROWS), got)
        self.assertEqual(got, allowed(self.client, token, "orders:read"))
        assert plan.condition is not None
        local = to_sql(plan.condition, "sqlite")
        self.assertEqual(self.select(local.where, local.params), got)
        pg = self.client.plan_resources("orders:read", "orders", token=token)
        self.assertIn("$1", pg.sql.where)

    def test_always_denied(self) -> None:
        plan = self.client.plan_resources("orders:delete", "orders", "sqlite", token=self.token(roles=["viewer"]))
        self.assertEqual((plan.kind, plan.condition, plan.sql.where), ("always_denied", None, "1 = 0"))
        self.assertEqual(self.select(plan.sql.where, plan.sql.params), [])
        expired = self.token(exp=int(time.time()) - 3600)
        plan = self.client.plan_resources("orders:read", "orders", "sqlite", token=expired)
        self.assertEqual((plan.kind, plan.reason), ("always_denied", "token-expired"))
        self.assertEqual(self.client.plan_resources("orders:read", "orders").kind, "always_denied")

    def test_errors_and_fail_modes(self) -> None:
        with self.assertRaises(SidecarRequestError) as cm:
            self.client.plan_resources("", "orders", token=self.token())
        self.assertEqual(cm.exception.reason, "input-invalid")
        with self.assertRaises(ValueError):
            self.client.plan_resources("orders:read", "orders", "oracle")
        down = harness.down_url()
        with self.assertRaises(SidecarUnavailableError):
            Client(down, "closed", 1.0, config_file=None).plan_resources("orders:read", "orders")
        # A plan never fails open: listing every row is no safe default.
        with self.assertRaises(SidecarUnavailableError):
            Client(down, "open", 1.0, config_file=None).plan_resources("orders:read", "orders")


class Order(models.Model):
    id = models.CharField(primary_key=True, max_length=16)
    tenant = models.CharField(max_length=16)
    owner = models.CharField(max_length=16, null=True)
    status = models.CharField(max_length=16, null=True)

    class Meta:
        app_label = "svc_plan_sidecar_tests"


class AttributePlanTest(unittest.TestCase):
    """A plan with "not" over an attribute some rows lack, from a sidecar
    running sdk/testdata/plan's policy."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.idp, _ = harness.shared()
        cls.sidecar = harness.Sidecar(cls.idp, {"SVC_POLICY_DIR": ATTRIBUTE_POLICY})
        cls.client = Client(cls.sidecar.url, "closed", harness.CALL_TIMEOUT, config_file=None)
        cls.db = sqlite3.connect(":memory:")
        cls.db.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, owner TEXT, status TEXT)")
        cls.db.executemany("INSERT INTO orders VALUES (:id, :tenant, :owner, :status)", ROWS)
        cls.engine = create_engine("sqlite://")
        cls.orders = Table("orders", MetaData(), Column("id", String, primary_key=True), Column("tenant", String),
                           Column("owner", String), Column("status", String))
        cls.orders.metadata.create_all(cls.engine)
        with cls.engine.begin() as conn:
            conn.execute(cls.orders.insert(), ROWS)
        with connection.schema_editor() as editor:
            editor.create_model(Order)
        Order.objects.bulk_create([Order(**r) for r in ROWS])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sidecar.stop()
        with connection.schema_editor() as editor:
            editor.delete_model(Order)

    def test_every_adapter_selects_the_permitted_rows(self) -> None:
        token = self.idp.token(harness.claims(sub="alice"))
        plan = self.client.plan_resources("orders:read", "orders", "sqlite", token=token)
        self.assertTrue(plan.conditional, plan)
        self.assertIn("IS NOT TRUE", plan.sql.where)
        self.assertIn("GLOB", plan.sql.where)
        want = allowed(self.client, token, "orders:read")
        # Public orders of the tenant are listed; "Public" and drafts not.
        public = {r["id"] for r in ROWS if r["tenant"] == harness.TENANT and r["status"] == "public"}
        self.assertTrue(public and public <= set(want), want)
        self.assertFalse({r["id"] for r in ROWS if r["owner"] != "alice" and r["status"] in ("Public", "public draft")}
                         & set(want), want)
        assert plan.condition is not None
        self.assertEqual(sorted(r["id"] for r in ROWS if plan.condition.holds(
            {"id": r["id"], "tenant": r["tenant"],
             "attributes": {k: r[k] for k in ("owner", "status") if r[k] is not None}})), want)
        # Alice's orders of acme without a status are not archived: listed.
        unknown = {r["id"] for r in ROWS if r["owner"] == "alice" and r["tenant"] == harness.TENANT
                   and r["status"] is None}
        self.assertTrue(unknown and unknown <= set(want), want)
        self.assertEqual(sorted(r[0] for r in self.db.execute(f"SELECT id FROM orders WHERE {plan.sql.where}",
                                                              plan.sql.params)), want, plan.sql.where)
        with self.engine.connect() as conn:
            got = sorted(r[0] for r in conn.execute(select(self.orders.c.id).where(sqlalchemy_filter(plan, self.orders))))
        self.assertEqual(got, want)
        self.assertEqual(sorted(Order.objects.filter(django_filter(plan)).values_list("id", flat=True)), want)


class ListOrdersExampleTest(unittest.TestCase):
    def test_lists_only_permitted_rows(self) -> None:
        idp, sidecar = harness.shared()
        client = Client(sidecar.url, "closed", harness.CALL_TIMEOUT, config_file=None)
        app = list_orders.create_app(client, list_orders.demo_database()).test_client()
        resp = app.get("/orders", headers={"Authorization": f"Bearer {idp.token(harness.claims(roles=['viewer']))}"})
        self.assertEqual(resp.status_code, 200, resp.data)
        body = resp.get_json()
        self.assertEqual(body["plan"], "conditional")
        want = [r["id"] for r in list_orders.DEMO_ROWS if r["tenant"] == harness.TENANT]
        self.assertEqual([o["id"] for o in body["orders"]], want)
        resp = app.get("/orders")
        self.assertEqual((resp.get_json()["plan"], resp.get_json()["orders"]), ("always_denied", []))


if __name__ == "__main__":
    unittest.main()
