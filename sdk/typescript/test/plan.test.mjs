// Resource plans without a sidecar: parsing condition trees, rendering them
// as SQL (toSql, as the sidecar renders it) and as a Prisma where object,
// checked by shape and by what Prisma's SQL for that shape selects (three-
// valued, as SQL is) on rows that lack attributes.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { holds as sdkHolds, parseCondition, parsePlan, permits, PlanError, prismaWhere, toSql } from "../dist/index.js";
import { COLUMN, FIELDS, holds, prismaEval, rows, SAMPLE, trees } from "./plan-trees.mjs";

describe("condition trees", () => {
  test("round trip and defaults", () => {
    assert.deepEqual(parseCondition(SAMPLE), SAMPLE);
    assert.deepEqual(parseCondition({ op: "in", field: "id" }), { op: "in", field: "id", values: [] });
  });

  test("malformed trees are refused", () => {
    let deep = { op: "and", args: [] };
    for (let i = 0; i < 64; i++) deep = { op: "not", arg: deep };
    for (const bad of [{ op: "xor" }, { op: "eq", field: "owner", value: "a" }, { op: "eq", field: "attributes.", value: "a" },
      { op: "eq", field: "id", value: { a: 1 } }, { op: "lt", field: "id", value: null }, { op: "not" },
      { op: "in", field: "id", values: [[1]] }, { op: "gt", field: "id", value: Infinity }, [], "eq", null, deep]) {
      assert.throws(() => parseCondition(bad), PlanError, JSON.stringify(bad)?.slice(0, 60));
    }
  });

  test("string tests", () => {
    const src = { op: "or", args: [{ op: "starts_with", field: "attributes.path", value: "/team-a/" },
      { op: "ends_with", field: "id", value: ".pdf" }, { op: "not", arg: { op: "contains", field: "tenant", value: "é%_" } }] };
    assert.deepEqual(parseCondition(src), src);
    for (const bad of [{ op: "starts_with", field: "id", value: 1 }, { op: "ends_with", field: "id", value: null },
      { op: "contains", field: "id" }, { op: "contains", field: "id", value: true }, { op: "starts_with", field: "path", value: "a" }]) {
      assert.throws(() => parseCondition(bad), PlanError, JSON.stringify(bad));
    }
  });

  test("holds is the tree's meaning on one resource", () => {
    const data = rows();
    for (const c of trees()) {
      for (const r of data) {
        const attributes = {};
        for (const f of Object.keys(FIELDS)) {
          if (f.startsWith("attributes.") && r[COLUMN[f]] !== null) attributes[f.slice("attributes.".length)] = r[COLUMN[f]];
        }
        const resource = { id: r.id, tenant: r.tenant, attributes };
        assert.equal(sdkHolds(c, resource), holds(c, r), `${JSON.stringify(c)} on ${JSON.stringify(resource)}`);
      }
    }
    const starts = parseCondition({ op: "starts_with", field: "attributes.n", value: "1" });
    assert.equal(sdkHolds(starts, { attributes: { n: 1 } }), false, "a number is no string");
    assert.equal(sdkHolds({ op: "not", arg: starts }, { attributes: { n: 1 } }), true);
    assert.equal(sdkHolds(parseCondition({ op: "lt", field: "id", value: "\uffff" }), { id: "😀" }), false,
      "code point order, not UTF-16 order");
    assert.equal(permits(parsePlan({ kind: "conditional", condition: starts }), { attributes: { n: "12" } }), true);
    assert.equal(permits(parsePlan({ kind: "always_allowed" }), {}), true);
    assert.equal(permits(parsePlan({ kind: "always_denied" }), {}), false);
  });

  test("plans", () => {
    const p = parsePlan({ kind: "conditional", condition: SAMPLE, sql: { where: '"tenant" = $1', params: ["acme"] },
      decision_id: "d1", reason: "plan-conditional", subject: "alice", tenant_id: "acme", policy_revision: "r1" });
    assert.deepEqual(p, { kind: "conditional", condition: SAMPLE, sql: { where: '"tenant" = $1', params: ["acme"] },
      decisionId: "d1", reason: "plan-conditional", subject: "alice", tenantId: "acme", policyRevision: "r1", message: "" });
    const d = parsePlan({ kind: "always_denied", reason: "token-expired" });
    assert.deepEqual([d.condition, d.sql], [null, { where: "1 = 0", params: [] }]);
    assert.throws(() => parsePlan({ kind: "conditional" }), PlanError);
    assert.throws(() => parsePlan({ kind: "maybe" }), PlanError);
  });
});

describe("toSql", () => {
  test("dialects, as the sidecar renders them", () => {
    // The tree and text of plan/plan_test.go's TestSQLDialects.
    const c = parseCondition(SAMPLE);
    const cases = [
      ["postgres", {}, '("tenant" = $1 AND ("owner" = $2 OR "status" IN ($3, $4)) AND ("level" >= $5) IS NOT TRUE AND "status" IS NOT NULL)'],
      ["sqlite", { "tenant": "tenant_id", "attributes.owner": "o.owner_id" },
        "(`tenant_id` = ? AND (`o`.`owner_id` = ? OR `status` IN (?, ?)) AND (`level` >= ?) IS NOT TRUE AND `status` IS NOT NULL)"],
      ["mysql", {}, "(`tenant` = CAST(? AS BINARY) AND (`owner` = CAST(? AS BINARY) OR `status` IN (CAST(? AS BINARY), CAST(? AS BINARY))) AND (`level` >= ?) IS NOT TRUE AND `status` IS NOT NULL)"],
    ];
    for (const [dialect, cols, want] of cases) {
      assert.deepEqual(toSql(c, dialect, cols), { where: want, params: ["acme", "alice", "open", "shared", 3] });
    }
    for (const [tree, want] of [[{ op: "in", field: "id", values: [] }, "1 = 0"],
      [{ op: "in", field: "id", values: [null] }, '"id" IS NULL'],
      [{ op: "in", field: "id", values: ["a", null] }, '("id" IN ($1) OR "id" IS NULL)'],
      [{ op: "eq", field: "id", value: null }, '"id" IS NULL'],
      [{ op: "or", args: [] }, "1 = 0"], [{ op: "and", args: [] }, "1 = 1"]]) {
      assert.equal(toSql(parseCondition(tree)).where, want);
    }
    assert.equal(toSql(parsePlan({ kind: "always_allowed" })).where, "1 = 1");
    assert.equal(toSql(parsePlan({ kind: "always_denied" })).where, "1 = 0");
  });

  test("string tests, as the sidecar renders them", () => {
    // The tree, text and parameters of plan/plan_test.go's TestSQLStringTests.
    const c = parseCondition({ op: "and", args: [
      { op: "starts_with", field: "attributes.path", value: "/a_b%\\!*?[" },
      { op: "not", arg: { op: "ends_with", field: "attributes.name", value: ".pdf" } },
      { op: "contains", field: "attributes.title", value: "draft" }] });
    const cases = [
      ["postgres", `("path" LIKE $1 ESCAPE '\\' AND ("name" LIKE $2 ESCAPE '\\') IS NOT TRUE AND "title" LIKE $3 ESCAPE '\\')`,
        ["/a\\_b\\%\\\\!*?[%", "%.pdf", "%draft%"]],
      ["sqlite", "(`path` GLOB ? AND (`name` GLOB ?) IS NOT TRUE AND `title` GLOB ?)", ["/a_b%\\![*][?][[]*", "*.pdf", "*draft*"]],
      ["mysql", "(`path` LIKE CAST(? AS BINARY) ESCAPE '!' AND (`name` LIKE CAST(? AS BINARY) ESCAPE '!') IS NOT TRUE AND " +
        "`title` LIKE CAST(? AS BINARY) ESCAPE '!')", ["/a!_b!%\\!!*?[%", "%.pdf", "%draft%"]],
    ];
    for (const [dialect, where, params] of cases) assert.deepEqual(toSql(c, dialect), { where, params }, dialect);
  });

  test("strings compare byte for byte, as the sidecar renders them", () => {
    const c = parseCondition({ op: "and", args: [
      { op: "lt", field: "attributes.name", value: "m" },
      { op: "eq", field: "attributes.name", value: "a" },
      { op: "ge", field: "attributes.level", value: 2 }] });
    assert.equal(toSql(c, "postgres").where, '("name" < $1 COLLATE "C" AND "name" = $2 AND "level" >= $3)');
    assert.equal(toSql(c, "sqlite").where, "(`name` < ? AND `name` = ? AND `level` >= ?)");
    assert.equal(toSql(c, "mysql").where, "(`name` < CAST(? AS BINARY) AND `name` = CAST(? AS BINARY) AND `level` >= ?)");
  });

  test("values are never part of the text; columns are identifiers", () => {
    const evil = "x' OR '1'='1";
    const s = toSql(parseCondition({ op: "eq", field: "attributes.owner", value: evil }), "sqlite");
    assert.ok(!s.where.includes(evil));
    assert.deepEqual(s.params, [evil]);
    for (const bad of ['owner"; DROP TABLE x; --', "a.b.c", "1x", ""]) {
      assert.throws(() => toSql(parseCondition({ op: "eq", field: "attributes.owner", value: "a" }), "sqlite",
        { "attributes.owner": bad }), PlanError, bad);
    }
    assert.throws(() => toSql(parseCondition({ op: "eq", field: "attributes.x-y", value: "a" })), PlanError);
    assert.throws(() => toSql(parseCondition(SAMPLE), "oracle"), PlanError);
  });
});

describe("prismaWhere", () => {
  test("shape", () => {
    assert.deepEqual(prismaWhere(parseCondition(SAMPLE), { "tenant": "tenantId", "attributes.owner": "owner.username" }), {
      AND: [
        { tenantId: { equals: "acme" } },
        { OR: [{ owner: { username: { equals: "alice" } } }, { status: { in: ["open", "shared"] } }] },
        { NOT: { AND: [{ level: { not: null } }, { level: { gte: 3 } }] } },
        { status: { not: null } },
      ],
    });
    assert.deepEqual(prismaWhere(parseCondition({ op: "in", field: "id", values: [1, null] })),
      { OR: [{ id: { in: [1] } }, { id: { equals: null } }] });
    assert.deepEqual(prismaWhere(parsePlan({ kind: "always_allowed" })), {});
    assert.deepEqual(prismaWhere(parsePlan({ kind: "always_denied" })), { OR: [] });
  });

  test("refuses to order a string, which Prisma orders by the column's collation", () => {
    for (const op of ["lt", "le", "gt", "ge"]) {
      const c = parseCondition({ op: "not", arg: { op, field: "attributes.name", value: "a" } });
      assert.throws(() => prismaWhere(c), (e) => e instanceof PlanError && /cannot order strings/.test(e.message), op);
      assert.deepEqual(prismaWhere(parseCondition({ op, field: "attributes.level", value: 3 })),
        { level: { [{ lt: "lt", le: "lte", gt: "gt", ge: "gte" }[op]]: 3 } });
    }
  });

  test("selects the rows the tree means, NULLs included", () => {
    const data = rows();
    const fields = { "attributes.owner": "ownerName" };
    const prismaRows = data.map(({ owner, ...r }) => ({ ...r, ownerName: owner }));
    const ordersString = (c) => c.op === "and" || c.op === "or" ? c.args.some(ordersString)
      : c.op === "not" ? ordersString(c.arg) : ["lt", "le", "gt", "ge"].includes(c.op) && typeof c.value === "string";
    for (const c of trees()) {
      if (ordersString(c)) {
        assert.throws(() => prismaWhere(c, fields), PlanError, JSON.stringify(c));
        continue;
      }
      const w = prismaWhere(c, fields);
      const got = prismaRows.filter((r) => prismaEval(w, r) === true).map((r) => r.id);
      const want = data.filter((r) => holds(c, r)).map((r) => r.id);
      assert.deepEqual(got, want, JSON.stringify(c));
    }
    assert.equal(COLUMN["attributes.owner"], "owner");
  });
});
