// Condition trees and rows for the plan tests: a seeded generator of
// random trees, a table whose rows lack attributes, and what a tree means
// for one row (the policy's view: a missing field makes a comparison
// false, "not" true).

import assert from "node:assert/strict";

import { parseCondition } from "../dist/index.js";

export const SAMPLE = {
  op: "and", args: [
    { op: "eq", field: "tenant", value: "acme" },
    { op: "or", args: [
      { op: "eq", field: "attributes.owner", value: "alice" },
      { op: "in", field: "attributes.status", values: ["open", "shared"] },
    ] },
    { op: "not", arg: { op: "ge", field: "attributes.level", value: 3 } },
    { op: "ne", field: "attributes.status", value: null },
  ],
};

// Each field's values (of the column's type; the last one no row has).
export const FIELDS = {
  "id": ["o1", "o2", "o5", "o9", "zz"],
  "tenant": ["acme", "globex", "initech"],
  "attributes.owner": ["alice", "bob", "carol", "nobody"],
  "attributes.status": ["open", "shared", "closed"],
  "attributes.level": [0, 1, 2, 3, 5],
  // Every dialect's pattern characters, case and multi-byte differences.
  "attributes.name": ["/team-a/x.pdf", "/team-A/x.PDF", "a%c", "a_c", "abc", "a\\b", "*?[", "a!b", "é", "É", "日本語",
    "😀x", "draft", "Draft v2", "nothing"],
};
export const COLUMN = { "id": "id", "tenant": "tenant", "attributes.owner": "owner", "attributes.status": "status",
  "attributes.level": "level", "attributes.name": "name" };
const STRING_FIELDS = ["id", "tenant", "attributes.owner", "attributes.status", "attributes.name"];
// The values of the string tests: prefixes, suffixes, substrings of the
// values above, pattern characters and case differences.
export const PARTS = ["", "a", "A", "/team-a/", "/team-", ".pdf", ".PDF", "%", "_", "a%", "a_", "\\", "\\b", "*", "?", "[",
  "!", "a!", "é", "É", "本", "日本", "語", "😀", "draft", "Draft", "o", "al", "ice", "ope", "acme", "sha"];

/** A deterministic random number generator (mulberry32). */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = (r, xs) => xs[Math.floor(r() * xs.length)];

/** n rows; a third of them lack each attribute (null). */
export function rows(n = 120, seed = 7) {
  const r = rng(seed);
  const out = [];
  for (let i = 0; i < n; i++) {
    const row = { id: `o${i}`, tenant: pick(r, FIELDS.tenant) };
    for (const f of ["attributes.owner", "attributes.status", "attributes.level", "attributes.name"]) {
      row[COLUMN[f]] = r() < 0.67 ? pick(r, FIELDS[f].slice(0, -1)) : null;
    }
    out.push(row);
  }
  return out;
}

/** Whether condition c holds for row. */
export function holds(c, row) {
  switch (c.op) {
    case "and": return c.args.every((a) => holds(a, row));
    case "or": return c.args.some((a) => holds(a, row));
    case "not": return !holds(c.arg, row);
  }
  const v = row[COLUMN[c.field]];
  if (c.op === "in") return (v !== null && c.values.includes(v)) || (v === null && c.values.includes(null));
  if (c.op === "starts_with" || c.op === "ends_with" || c.op === "contains") {
    if (typeof v !== "string") return false;
    return { starts_with: v.slice(0, c.value.length) === c.value, ends_with: v.slice(v.length - c.value.length) === c.value,
      contains: v.indexOf(c.value) >= 0 }[c.op];
  }
  if (c.value === null) return (v === null) === (c.op === "eq");
  if (v === null) return false;
  return { eq: v === c.value, ne: v !== c.value, lt: v < c.value, le: v <= c.value, gt: v > c.value,
    ge: v >= c.value }[c.op];
}

function randomTree(r, depth = 0) {
  const k = r();
  if (depth < 4 && k < 0.35) {
    const n = Math.floor(r() * 4);
    return { op: pick(r, ["and", "or"]), args: Array.from({ length: n }, () => randomTree(r, depth + 1)) };
  }
  if (depth < 4 && k < 0.55) return { op: "not", arg: randomTree(r, depth + 1) };
  const f = pick(r, Object.keys(FIELDS));
  if (r() < 0.2) {
    const vals = FIELDS[f].filter(() => r() < 0.4);
    if (r() < 0.3) vals.push(null);
    return { op: "in", field: f, values: vals };
  }
  if (STRING_FIELDS.includes(f) && r() < 0.3) {
    return { op: pick(r, ["starts_with", "ends_with", "contains"]), field: f, value: pick(r, PARTS) };
  }
  const op = pick(r, ["eq", "ne", "lt", "le", "gt", "ge"]);
  if ((op === "eq" || op === "ne") && r() < 0.2) return { op, field: f, value: null };
  return { op, field: f, value: pick(r, FIELDS[f]) };
}

/** The sample, the NULL cases of "not" by themselves, then n random trees; parsed. */
export function trees(n = 300) {
  const r = rng(34);
  const fixed = [
    SAMPLE,
    { op: "not", arg: { op: "eq", field: "attributes.owner", value: "alice" } },
    { op: "not", arg: { op: "not", arg: { op: "eq", field: "attributes.owner", value: "alice" } } },
    { op: "not", arg: { op: "and", args: [{ op: "eq", field: "tenant", value: "acme" },
      { op: "not", arg: { op: "lt", field: "attributes.level", value: 2 } }] } },
    { op: "not", arg: { op: "ne", field: "attributes.status", value: "open" } },
    { op: "not", arg: { op: "in", field: "attributes.status", values: [] } },
    { op: "not", arg: { op: "in", field: "attributes.status", values: ["open", null] } },
    { op: "not", arg: { op: "or", args: [] } },
    { op: "not", arg: { op: "and", args: [] } },
  ];
  for (const op of ["starts_with", "ends_with", "contains"]) {
    for (const value of PARTS) {
      const c = { op, field: "attributes.name", value };
      fixed.push(c, { op: "not", arg: c });
    }
  }
  return [...fixed, ...Array.from({ length: n }, () => randomTree(r))].map(parseCondition);
}

// What Prisma's SQL for a where object selects, three-valued: true, false
// or null (unknown; the row is not selected). Throws on anything that is
// not the shape prismaWhere promises.
const FILTER_OPS = new Set(["equals", "not", "lt", "lte", "gt", "gte", "in", "startsWith", "endsWith", "contains"]);

export function prismaEval(where, row) {
  assert.equal(typeof where, "object");
  assert.ok(where !== null && !Array.isArray(where), "a where is an object");
  let out = true;
  for (const [k, v] of Object.entries(where)) out = and3(out, prismaKey(k, v, row));
  return out;
}

function prismaKey(k, v, row) {
  if (k === "AND" || k === "OR") {
    assert.ok(Array.isArray(v), `${k} takes a list`);
    const vals = v.map((w) => prismaEval(w, row));
    return k === "AND" ? vals.reduce(and3, true) : vals.reduce(or3, false);
  }
  if (k === "NOT") {
    const x = prismaEval(v, row);
    return x === null ? null : !x;
  }
  assert.ok(/^[A-Za-z_][A-Za-z0-9_]*$/.test(k), `field ${k}`);
  if (Object.keys(v).some((op) => !FILTER_OPS.has(op))) return prismaEval(v, row[k]); // a relation
  assert.equal(Object.keys(v).length, 1, `one operator per filter: ${JSON.stringify(v)}`);
  const [op, arg] = Object.entries(v)[0];
  const col = row[k];
  assert.ok(col !== undefined, `row has no field ${k}`);
  if (op === "in") {
    assert.ok(Array.isArray(arg) && !arg.includes(null), "in takes non-null values");
    if (arg.length === 0) return false;
    return col === null ? null : arg.includes(col);
  }
  if (arg === null) {
    assert.ok(op === "equals" || op === "not", `${op} null`);
    return (col === null) === (op === "equals");
  }
  if (col === null) return null;
  if (op === "startsWith" || op === "endsWith" || op === "contains") {
    // Case-sensitive, as on PostgreSQL.
    assert.equal(typeof arg, "string", `${op} takes a string`);
    if (typeof col !== "string") return null;
    return { startsWith: col.startsWith(arg), endsWith: col.endsWith(arg), contains: col.includes(arg) }[op];
  }
  return { equals: col === arg, not: col !== arg, lt: col < arg, lte: col <= arg, gt: col > arg, gte: col >= arg }[op];
}

const and3 = (a, b) => (a === false || b === false ? false : a === null || b === null ? null : true);
const or3 = (a, b) => (a === true || b === true ? true : a === null || b === null ? null : false);
