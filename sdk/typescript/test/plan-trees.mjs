// Condition trees and rows for the plan tests: a seeded generator of
// random trees, a table whose rows lack attributes, and what a tree means
// for one row (the policy's view: a missing field makes a comparison
// false, "not" true).

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
};
export const COLUMN = { "id": "id", "tenant": "tenant", "attributes.owner": "owner", "attributes.status": "status",
  "attributes.level": "level" };

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
    for (const f of ["attributes.owner", "attributes.status", "attributes.level"]) {
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
  return [...fixed, ...Array.from({ length: n }, () => randomTree(r))].map(parseCondition);
}
