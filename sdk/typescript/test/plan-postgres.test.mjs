// Resource plans on a real PostgreSQL (test/postgres.mjs; skipped when its
// binaries are absent): toSql's where and params for random trees run with
// pg on a table whose rows lack attributes, and the sidecar's own plans
// (SvcClient.planResources against the real svc-sidecar) select exactly the
// rows its per-row authorize answers allow, as the list-filtering example
// (examples/list-orders.mjs) does.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { join } from "node:path";

import { permits, prismaWhere, SidecarRequestError, SidecarUnavailableError, SvcClient, toSql } from "@svc/sdk";

import { listOrdersServer } from "../examples/list-orders.mjs";
import { claims, downUrl, REPO, startSidecar, TENANT } from "./harness.mjs";
import { holds, prismaEval, rows, trees } from "./plan-trees.mjs";
import { postgresMissing, startPostgres } from "./postgres.mjs";

const skip = postgresMissing() ?? false;

/** The ids of rows whose own authorize answer allows action, sorted. */
async function allowedOf(client, rows, token, action) {
  const out = [];
  for (const r of rows) {
    const attributes = Object.fromEntries(["owner", "status", "level"].filter((k) => r[k] !== null && r[k] !== undefined)
      .map((k) => [k, r[k]]));
    const d = await client.authorize(token, action, { resource: "orders", resourceId: r.id, resourceTenant: r.tenant,
      resourceAttributes: attributes });
    if (d.allow) out.push(r.id);
  }
  return out.sort();
}

describe("plans on PostgreSQL", { skip }, () => {
  let db;
  const data = rows();

  before(async () => {
    db = await startPostgres();
    await db.pool.query(`CREATE TABLE orders (id text PRIMARY KEY, tenant text NOT NULL, owner text, status text,
      level integer, name text)`);
    for (const r of data) {
      await db.pool.query("INSERT INTO orders VALUES ($1, $2, $3, $4, $5, $6)",
        [r.id, r.tenant, r.owner, r.status, r.level, r.name]);
    }
  });
  after(async () => db?.stop());

  const ids = async (where, params) =>
    (await db.pool.query(`SELECT id FROM orders WHERE ${where} ORDER BY id`, params)).rows.map((r) => r.id);

  test("toSql selects the rows the tree means, NULLs included", async () => {
    for (const c of trees()) {
      const s = toSql(c, "postgres");
      const want = data.filter((r) => holds(c, r)).map((r) => r.id).sort();
      assert.deepEqual(await ids(s.where, s.params), want, `${JSON.stringify(c)}\n${s.where}`);
    }
  });

  describe("the sidecar's plans", () => {
    let idp, client, stop;
    before(async () => ({ idp, client, stop } = await startSidecar()));
    after(() => stop?.());

    // Every row's own authorize answer, for the plan to agree with.
    const allowedRows = async (token, action) => allowedOf(client, data, token, action);

    test("a viewer's plan lists its tenant's rows", async () => {
      const token = idp.token(claims({ roles: ["viewer"] }));
      const plan = await client.planResources("orders:read", "orders", { token });
      assert.equal(plan.kind, "conditional", JSON.stringify(plan));
      assert.equal(plan.reason, "plan-conditional");
      assert.equal(plan.subject, "alice");
      assert.equal(plan.tenantId, TENANT);
      assert.ok(plan.decisionId);
      assert.ok(!plan.sql.where.includes(TENANT), "values are parameters");
      const got = await ids(plan.sql.where, plan.sql.params);
      assert.ok(got.length > 0 && got.length < data.length, got.join(","));
      assert.deepEqual(got, await allowedRows(token, "orders:read"));
      // The condition rendered here selects the same rows.
      const local = toSql(plan.condition, "postgres");
      assert.deepEqual(await ids(local.where, local.params), got);
    });

    test("always denied: an action no role grants, a refused token", async () => {
      const viewer = idp.token(claims({ roles: ["viewer"] }));
      let plan = await client.planResources("orders:delete", "orders", { token: viewer });
      assert.deepEqual([plan.kind, plan.condition, plan.sql.where], ["always_denied", null, "1 = 0"]);
      assert.deepEqual(await ids(plan.sql.where, plan.sql.params), []);
      const expired = idp.token(claims({ exp: Math.floor(Date.now() / 1000) - 3600 }));
      plan = await client.planResources("orders:read", "orders", { token: expired });
      assert.deepEqual([plan.kind, plan.reason], ["always_denied", "token-expired"]);
      plan = await client.planResources("orders:read", "orders");
      assert.equal(plan.kind, "always_denied");
    });

    test("the example lists only permitted rows", async () => {
      const server = listOrdersServer(client, db.pool);
      await new Promise((r) => server.listen(0, "127.0.0.1", r));
      try {
        const url = `http://127.0.0.1:${server.address().port}/orders`;
        const token = idp.token(claims({ roles: ["viewer"] }));
        const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
        assert.equal(res.status, 200);
        const body = await res.json();
        assert.equal(body.plan, "conditional");
        assert.deepEqual(body.orders.map((o) => o.id), data.filter((r) => r.tenant === TENANT).map((r) => r.id).sort());
        assert.ok(body.orders.every((o) => o.tenant === TENANT));
        const anonymous = await (await fetch(url)).json();
        assert.deepEqual([anonymous.plan, anonymous.orders], ["always_denied", []]);
      } finally {
        server.closeAllConnections();
        server.close();
      }
    });

    test("dialects; a bad request is an error", async () => {
      const token = idp.token(claims({ roles: ["viewer"] }));
      const plan = await client.planResources("orders:read", "orders", { token, dialect: "sqlite" });
      assert.ok(plan.sql.where.includes("?") && !plan.sql.where.includes("$1"), plan.sql.where);
      await assert.rejects(client.planResources("", "orders", { token }),
        (e) => e instanceof SidecarRequestError && e.reason === "input-invalid");
      await assert.rejects(client.planResources("orders:read", "orders", { token, dialect: "oracle" }), TypeError);
    });

    test("a plan never fails open", async () => {
      const sidecarUrl = await downUrl();
      for (const failMode of ["open", "closed"]) {
        const c = new SvcClient({ sidecarUrl, failMode, timeoutMs: 1000, warn: () => {} });
        await assert.rejects(c.planResources("orders:read", "orders"), SidecarUnavailableError, failMode);
      }
    });
  });

  describe("a plan over attributes some rows lack", () => {
    // sdk/testdata/plan: owners read their orders unless archived, the
    // tenant reads public ones (a status starting with "public",
    // case-sensitively, without "draft").
    let idp, client, stop;
    before(async () => ({ idp, client, stop } = await startSidecar({ SVC_POLICY_DIR: join(REPO, "sdk/testdata/plan") })));
    after(() => stop?.());

    const attrRows = Array.from({ length: 40 }, (_, i) => ({ id: `a${String(i).padStart(2, "0")}`,
      tenant: i % 5 === 0 ? "globex" : TENANT, owner: ["alice", "bob", null][i % 3],
      status: ["open", null, "archived", ["public", "Public", "public draft"][i % 3]][i % 4] }));

    test("the sidecar's SQL and prismaWhere select the permitted rows", async () => {
      await db.pool.query("CREATE TABLE attr_orders (id text PRIMARY KEY, tenant text NOT NULL, owner text, status text)");
      for (const r of attrRows) {
        await db.pool.query("INSERT INTO attr_orders VALUES ($1, $2, $3, $4)", [r.id, r.tenant, r.owner, r.status]);
      }
      const token = idp.token(claims({ sub: "alice" }));
      const plan = await client.planResources("orders:read", "orders", { token });
      assert.equal(plan.kind, "conditional", JSON.stringify(plan));
      assert.ok(plan.sql.where.includes("IS NOT TRUE"), plan.sql.where);
      const want = await allowedOf(client, attrRows, token, "orders:read");
      // Alice's orders without a status are not archived: listed.
      const unknown = attrRows.filter((r) => r.owner === "alice" && r.tenant === TENANT && r.status === null);
      assert.ok(unknown.length > 0 && unknown.every((r) => want.includes(r.id)), want.join(","));
      const { rows: got } = await db.pool.query(`SELECT id FROM attr_orders WHERE ${plan.sql.where} ORDER BY id`,
        plan.sql.params);
      assert.deepEqual(got.map((r) => r.id), want);
      const where = prismaWhere(plan);
      assert.deepEqual(attrRows.filter((r) => prismaEval(where, r) === true).map((r) => r.id), want);
      assert.ok(plan.sql.where.includes("LIKE"), plan.sql.where);
      const publicRows = attrRows.filter((r) => r.tenant === TENANT && r.status === "public").map((r) => r.id);
      assert.ok(publicRows.length > 0 && publicRows.every((id) => want.includes(id)), want.join(","));
      const resource = (r) => ({ id: r.id, tenant: r.tenant,
        attributes: Object.fromEntries(["owner", "status"].filter((k) => r[k] !== null).map((k) => [k, r[k]])) });
      assert.deepEqual(attrRows.filter((r) => permits(plan, resource(r))).map((r) => r.id), want);
    });
  });
});
