/**
 * Resource plans: which resources of a type a caller may act on.
 *
 * SvcClient.planResources asks the sidecar (`POST /v1/plan-resources`) and
 * returns a Plan: its kind is "always_allowed", "always_denied" or
 * "conditional"; a conditional plan carries a condition tree over the
 * resource's `id`, `tenant` and `attributes.<name>`, and every plan the
 * sidecar's SQL (`plan.sql.where` with bind parameters `plan.sql.params`,
 * for node-postgres as `pool.query(text, params)`).
 *
 *     {"op":"and"|"or","args":[…]}
 *     {"op":"not","arg":…}
 *     {"op":"eq"|"ne"|"lt"|"le"|"gt"|"ge","field":"id"|"tenant"|"attributes.<name>","value":…}
 *     {"op":"in","field":…,"values":[…]}
 *     {"op":"starts_with"|"ends_with"|"contains","field":…,"value":"…"}
 *
 * A field the resource lacks (a NULL column) makes every comparison false;
 * "not" holds when its argument does not, so a missing field makes "not"
 * true (SQL `(x) IS NOT TRUE`); eq and ne with null test for a missing
 * field; "in" with no values is false. starts_with, ends_with and contains
 * take a string and hold for a string field with that prefix, suffix or
 * substring, case-sensitively; a field that is not a string never meets
 * them. holds evaluates a tree on one resource.
 *
 * toSql renders a plan for another dialect or other column names than the
 * sidecar's; prismaWhere builds a Prisma `where` object.
 */

export type PlanKind = "always_allowed" | "always_denied" | "conditional";
export type Dialect = "postgres" | "sqlite" | "mysql";
export type Scalar = string | number | boolean | null;
export type ComparisonOp = "eq" | "ne" | "lt" | "le" | "gt" | "ge";
export type StringTestOp = "starts_with" | "ends_with" | "contains";

/** A node of a plan's condition tree. */
export type Condition =
  | { op: "and" | "or"; args: Condition[] }
  | { op: "not"; arg: Condition }
  | { op: ComparisonOp; field: string; value: Scalar }
  | { op: "in"; field: string; values: Scalar[] }
  | { op: StringTestOp; field: string; value: string };

/** A WHERE clause with its bind parameters, in order. */
export interface SqlFilter {
  where: string;
  params: Scalar[];
}

/** The result of SvcClient.planResources. */
export interface Plan {
  kind: PlanKind;
  /** Set only for a conditional plan. */
  condition: Condition | null;
  /**
   * The sidecar's rendering in the requested dialect with its configured
   * columns (list_filter.columns): "1 = 1" for always_allowed, "1 = 0" for
   * always_denied.
   */
  sql: SqlFilter;
  decisionId: string;
  /** "plan-conditional", …; a refused credential's failure code for an always_denied plan. */
  reason: string;
  subject: string;
  tenantId: string;
  policyRevision: string;
  message: string;
}

export const DIALECTS: readonly Dialect[] = ["postgres", "sqlite", "mysql"];
export const WHERE_TRUE = "1 = 1";
export const WHERE_FALSE = "1 = 0";
/** Bounds of a parsed tree, as the sidecar's. */
export const MAX_DEPTH = 64;
export const MAX_NODES = 10_000;

const ATTRIBUTE_PREFIX = "attributes.";
const STRING_TESTS: readonly string[] = ["starts_with", "ends_with", "contains"];
const isStringTest = (op: string): op is StringTestOp => STRING_TESTS.includes(op);
const SQL_OPS: Record<ComparisonOp, string> = { eq: "=", ne: "<>", lt: "<", le: "<=", gt: ">", ge: ">=" };
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/;

/** A plan or condition that is not well formed, or a field without a column. */
export class PlanError extends Error {
  override name = "PlanError";
}

/** Whether f names a field of a resource: "id", "tenant" or "attributes.<name>". */
export function validField(f: string): boolean {
  return f === "id" || f === "tenant" || (f.startsWith(ATTRIBUTE_PREFIX) && f.length > ATTRIBUTE_PREFIX.length);
}

/** The condition of its JSON shape (parsed JSON), validated. */
export function parseCondition(data: unknown): Condition {
  const nodes = { n: 0 };
  return decode(data, 1, nodes);
}

function decode(data: unknown, depth: number, nodes: { n: number }): Condition {
  nodes.n++;
  if (depth > MAX_DEPTH) throw new PlanError(`plan: conditions nested deeper than ${MAX_DEPTH}`);
  if (nodes.n > MAX_NODES) throw new PlanError(`plan: more than ${MAX_NODES} conditions`);
  if (data === null || typeof data !== "object" || Array.isArray(data)) {
    throw new PlanError("plan: a condition is a JSON object");
  }
  const d = data as Record<string, unknown>;
  const op = d.op;
  if (op === "and" || op === "or") {
    const args = d.args ?? [];
    if (!Array.isArray(args)) throw new PlanError(`plan: ${op}: args is not a list`);
    return { op, args: args.map((a) => decode(a, depth + 1, nodes)) };
  }
  if (op === "not") {
    if (d.arg === undefined || d.arg === null) throw new PlanError("plan: not: missing condition");
    return { op, arg: decode(d.arg, depth + 1, nodes) };
  }
  if (op === "in" || (typeof op === "string" && (Object.hasOwn(SQL_OPS, op) || isStringTest(op)))) {
    const field = d.field;
    if (typeof field !== "string" || !validField(field)) {
      throw new PlanError(`plan: ${String(op)}: field ${JSON.stringify(field)} is not id, tenant or attributes.<name>`);
    }
    if (op === "in") {
      const vals = d.values ?? [];
      if (!Array.isArray(vals)) throw new PlanError(`plan: ${field} in: values is not a list`);
      return { op, field, values: vals.map((v) => scalar(field, op, v)) };
    }
    const value = scalar(field, op as string, d.value ?? null);
    if (isStringTest(op as string)) {
      if (typeof value !== "string") throw new PlanError(`plan: ${field} ${String(op)}: value ${JSON.stringify(value)} is not a string`);
      return { op: op as StringTestOp, field, value };
    }
    if (value === null && (op === "lt" || op === "le" || op === "gt" || op === "ge")) {
      throw new PlanError(`plan: ${field} ${op}: null cannot be ordered`);
    }
    return { op: op as ComparisonOp, field, value };
  }
  throw new PlanError(`plan: unknown op ${JSON.stringify(op)}`);
}

function scalar(field: string, op: string, v: unknown): Scalar {
  if (v === null || typeof v === "string" || typeof v === "boolean") return v;
  if (typeof v === "number" && Number.isFinite(v)) return v;
  throw new PlanError(`plan: ${field} ${op}: value ${JSON.stringify(v)} is not a string, number, boolean or null`);
}

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

/** The plan of the sidecar's JSON answer, validated. */
export function parsePlan(body: Record<string, unknown>): Plan {
  const kind = body.kind;
  if (kind !== "always_allowed" && kind !== "always_denied" && kind !== "conditional") {
    throw new PlanError(`plan: kind ${JSON.stringify(kind)} is not always_allowed, always_denied or conditional`);
  }
  let condition: Condition | null = null;
  if (kind === "conditional") {
    if (body.condition === undefined || body.condition === null) {
      throw new PlanError("plan: a conditional plan without a condition");
    }
    condition = parseCondition(body.condition);
  }
  const sql = (body.sql ?? {}) as Record<string, unknown>;
  if (typeof sql !== "object" || Array.isArray(sql)) throw new PlanError("plan: sql is not an object");
  const params = sql.params ?? [];
  if (!Array.isArray(params)) throw new PlanError("plan: sql.params is not a list");
  return {
    kind,
    condition,
    sql: {
      where: str(sql.where) || (kind === "always_allowed" ? WHERE_TRUE : WHERE_FALSE),
      params: params.map((p) => scalar("sql", "params", p)),
    },
    decisionId: str(body.decision_id),
    reason: str(body.reason),
    subject: str(body.subject),
    tenantId: str(body.tenant_id),
    policyRevision: str(body.policy_revision),
    message: str(body.message),
  };
}

/** A resource as a plan's condition sees it. */
export interface PlanResource {
  id?: string;
  tenant?: string;
  attributes?: Record<string, unknown>;
}

/** -1, 0 or 1 for two scalars of one type; null for different types. */
function order(a: unknown, b: unknown): number | null {
  if (typeof a !== typeof b || !["string", "number", "boolean"].includes(typeof a)) return null;
  if (typeof a === "string") {
    // By code point (UTF-8 byte order), as the sidecar compares, not by
    // UTF-16 unit.
    const x = Array.from(a as string, (ch) => ch.codePointAt(0)!);
    const y = Array.from(b as string, (ch) => ch.codePointAt(0)!);
    for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1;
    return x.length === y.length ? 0 : x.length < y.length ? -1 : 1;
  }
  return a === b ? 0 : (a as number) < (b as number) ? -1 : 1;
}

/**
 * Whether condition c holds for one resource, as a database finds it
 * with the condition's SQL: a missing (or null) field makes a comparison
 * false and "not" true; values of different types (a string and a
 * number) are neither equal nor ordered.
 */
export function holds(c: Condition, resource: PlanResource): boolean {
  switch (c.op) {
    case "and":
      return c.args.every((a) => holds(a, resource));
    case "or":
      return c.args.some((a) => holds(a, resource));
    case "not":
      return !holds(c.arg, resource);
  }
  const raw = c.field.startsWith(ATTRIBUTE_PREFIX)
    ? resource.attributes?.[c.field.slice(ATTRIBUTE_PREFIX.length)]
    : c.field === "id" ? resource.id : resource.tenant;
  const v = raw === undefined ? null : raw;
  if (c.op === "in") {
    if (v === null) return c.values.includes(null);
    return c.values.some((w) => w !== null && order(v, w) === 0);
  }
  if (c.op === "starts_with" || c.op === "ends_with" || c.op === "contains") {
    if (typeof v !== "string") return false;
    if (c.op === "starts_with") return v.startsWith(c.value);
    if (c.op === "ends_with") return v.endsWith(c.value);
    return v.includes(c.value);
  }
  if (c.value === null) return (v === null) === (c.op === "eq");
  if (v === null) return false;
  const o = order(v, c.value);
  if (o === null) return false;
  return { eq: o === 0, ne: o !== 0, lt: o < 0, le: o <= 0, gt: o > 0, ge: o >= 0 }[c.op as ComparisonOp];
}

/** Whether a plan permits one resource (see holds). */
export function permits(plan: Plan, resource: PlanResource): boolean {
  if (plan.kind === "always_allowed") return true;
  return plan.kind === "conditional" && plan.condition !== null && holds(plan.condition, resource);
}

/**
 * The bind parameter of starts_with, ends_with or contains of value in
 * dialect, as the sidecar writes it: a LIKE pattern for postgres (escape
 * \) and mysql (escape !), a GLOB pattern for sqlite, the value's special
 * characters escaped and a wildcard before, after or on both sides.
 */
export function likePattern(dialect: Dialect, op: StringTestOp, value: string): string {
  let wild = "%";
  let body: string;
  if (dialect === "sqlite") {
    wild = "*";
    body = value.replace(/[*?[]/g, (ch) => `[${ch}]`);
  } else {
    const esc = dialect === "mysql" ? "!" : "\\";
    body = value.replace(dialect === "mysql" ? /[%_!]/g : /[%_\\]/g, (ch) => esc + ch);
  }
  return (op === "starts_with" ? "" : wild) + body + (op === "ends_with" ? "" : wild);
}

/**
 * The column of field f: columns[f], else "id", "tenant" or the
 * attribute's own name. A column is an identifier, optionally qualified by
 * a table ("orders.owner_id").
 */
export function columnName(f: string, columns: Record<string, string> = {}): string {
  const name = Object.hasOwn(columns, f) ? columns[f]! : f.startsWith(ATTRIBUTE_PREFIX) ? f.slice(ATTRIBUTE_PREFIX.length) : f;
  if (name.length > 128 || !IDENTIFIER.test(name)) {
    throw new PlanError(`plan: column ${JSON.stringify(name)} for ${f} is not an identifier (letters, digits, _; one optional table. prefix)`);
  }
  return name;
}

/**
 * A plan (or a condition) as a WHERE clause in dialect with columns naming
 * the columns (see columnName), rendered as the sidecar renders it. Every
 * value is a bind parameter, never part of the text.
 */
export function toSql(plan: Plan | Condition, dialect: Dialect = "postgres", columns: Record<string, string> = {}): SqlFilter {
  if (!DIALECTS.includes(dialect)) throw new PlanError(`plan: dialect ${JSON.stringify(dialect)} is not postgres, sqlite or mysql`);
  let cond: Condition;
  if ("kind" in plan) {
    if (plan.kind === "always_allowed") return { where: WHERE_TRUE, params: [] };
    if (plan.kind === "always_denied" || plan.condition === null) return { where: WHERE_FALSE, params: [] };
    cond = plan.condition;
  } else {
    cond = plan;
  }
  const params: Scalar[] = [];
  const param = (v: Scalar) => {
    params.push(v);
    return dialect === "postgres" ? `$${params.length}` : "?";
  };
  // A compared value, a string compared byte for byte as the policy
  // compares, not by the column's collation: in MySQL (whose default ones
  // ignore case, accents and trailing spaces) CAST(? AS BINARY); in
  // PostgreSQL, for an ordering, $n COLLATE "C".
  const value = (v: Scalar, ordering = false) => {
    if (typeof v === "string" && dialect === "mysql") return `CAST(${param(v)} AS BINARY)`;
    if (typeof v === "string" && dialect === "postgres" && ordering) return `${param(v)} COLLATE "C"`;
    return param(v);
  };
  // SQLite reads a double-quoted name that is not a column as a string
  // literal; a backticked one is "no such column".
  const q = dialect === "postgres" ? '"' : "`";
  const column = (f: string) => columnName(f, columns).split(".").map((p) => q + p + q).join(".");
  const render = (c: Condition): string => {
    switch (c.op) {
      case "and":
      case "or":
        if (c.args.length === 0) return c.op === "and" ? WHERE_TRUE : WHERE_FALSE;
        return "(" + c.args.map(render).join(` ${c.op.toUpperCase()} `) + ")";
      case "not":
        return `(${render(c.arg)}) IS NOT TRUE`;
      case "in": {
        const col = column(c.field);
        const vals = c.values.filter((v) => v !== null);
        const hasNull = vals.length < c.values.length;
        if (vals.length === 0) return hasNull ? `${col} IS NULL` : WHERE_FALSE;
        const s = `${col} IN (${vals.map((v) => value(v)).join(", ")})`;
        return hasNull ? `(${s} OR ${col} IS NULL)` : s;
      }
      case "starts_with":
      case "ends_with":
      case "contains": {
        // Case-sensitive in every dialect: SQLite's LIKE ignores ASCII
        // case, its GLOB does not; MySQL compares a binary pattern byte
        // for byte.
        const col = column(c.field);
        const p = param(likePattern(dialect, c.op, c.value));
        if (dialect === "sqlite") return `${col} GLOB ${p}`;
        if (dialect === "mysql") return `${col} LIKE CAST(${p} AS BINARY) ESCAPE '!'`;
        return `${col} LIKE ${p} ESCAPE '\\'`;
      }
      default: {
        const col = column(c.field);
        if (c.value === null) return c.op === "eq" ? `${col} IS NULL` : `${col} IS NOT NULL`;
        return `${col} ${SQL_OPS[c.op]} ${value(c.value, c.op !== "eq" && c.op !== "ne")}`;
      }
    }
  };
  return { where: render(cond), params };
}

/** A Prisma filter on one field: the operators prismaWhere uses. */
export interface PrismaFieldFilter {
  equals?: Scalar;
  not?: Scalar;
  lt?: Scalar;
  lte?: Scalar;
  gt?: Scalar;
  gte?: Scalar;
  in?: Scalar[];
  startsWith?: string;
  endsWith?: string;
  contains?: string;
}

/** A Prisma `where` object: AND, OR, NOT and field filters, nested along relations. */
export type PrismaWhere = { [key: string]: PrismaWhere | PrismaWhere[] | PrismaFieldFilter };

const PRISMA_OPS: Record<ComparisonOp | StringTestOp, keyof PrismaFieldFilter> = {
  eq: "equals", ne: "not", lt: "lt", le: "lte", gt: "gt", ge: "gte",
  starts_with: "startsWith", ends_with: "endsWith", contains: "contains",
};

/**
 * A Prisma `where` object of a plan (or a condition): `{}` (every row) for
 * always_allowed, `{OR: []}` (no row) for always_denied, else the
 * condition. fields maps a plan's fields ("id", "tenant",
 * "attributes.owner") to Prisma fields, a dotted path following relations
 * ("owner.username" → `{owner: {username: …}}`); a field it does not name
 * is the field "id", "tenant" or the attribute's own name.
 *
 * Prisma renders NOT as SQL NOT, which is NULL (no row) for a NULL
 * column; under an odd number of "not"s each comparison is therefore
 * paired with `{field: {not: null}}`, so that a missing field makes "not"
 * true, as the sidecar's SQL has it.
 *
 * An ordering (lt, le, gt, ge) of a string throws PlanError: Prisma
 * compares strings by the column's collation on PostgreSQL and MySQL,
 * rarely byte for byte as the policy does, so its lt and gt would list
 * rows the plan does not permit; toSql orders them in collation C.
 *
 * starts_with, ends_with and contains are Prisma's startsWith, endsWith
 * and contains filters, whose case sensitivity is the database's: on
 * PostgreSQL they are case-sensitive (Prisma's default mode), on MySQL
 * and SQLite they follow the column's collation and LIKE, which ignore
 * case by default; there a where object may list rows the plan does not
 * permit: use toSql instead.
 */
export function prismaWhere(plan: Plan | Condition, fields: Record<string, string> = {}): PrismaWhere {
  let cond: Condition;
  if ("kind" in plan) {
    if (plan.kind === "always_allowed") return {};
    if (plan.kind === "always_denied" || plan.condition === null) return { OR: [] };
    cond = plan.condition;
  } else {
    cond = plan;
  }
  const on = (f: string, filter: PrismaFieldFilter): PrismaWhere => {
    const path = Object.hasOwn(fields, f) ? fields[f]! : f.startsWith(ATTRIBUTE_PREFIX) ? f.slice(ATTRIBUTE_PREFIX.length) : f;
    const parts = path.split(".");
    let out: PrismaWhere | PrismaFieldFilter = filter;
    for (let i = parts.length - 1; i >= 0; i--) out = { [parts[i]!]: out } as PrismaWhere;
    return out as PrismaWhere;
  };
  const build = (c: Condition, negated: boolean): PrismaWhere => {
    switch (c.op) {
      case "and":
        return { AND: c.args.map((a) => build(a, negated)) };
      case "or":
        return { OR: c.args.map((a) => build(a, negated)) };
      case "not":
        return { NOT: build(c.arg, !negated) };
    }
    if ((c.op === "lt" || c.op === "le" || c.op === "gt" || c.op === "ge") && typeof c.value === "string") {
      // Prisma orders strings by the column's collation on PostgreSQL and
      // MySQL ("B" < "a" in bytes, not in en_US): such a where object
      // would list rows on the other side of the policy's bound.
      throw new PlanError(`plan: ${c.field} ${c.op} ${JSON.stringify(c.value)}: prismaWhere cannot order strings ` +
        "byte for byte, as the policy does; use toSql");
    }
    let w: PrismaWhere;
    if (c.op === "in") {
      const vals = c.values.filter((v) => v !== null);
      w = on(c.field, { in: vals });
      if (vals.length < c.values.length) w = { OR: [w, on(c.field, { equals: null })] };
    } else {
      w = on(c.field, { [PRISMA_OPS[c.op]]: c.value });
    }
    // Under an odd number of NOTs a NULL must count as false, not unknown.
    const nullTest = (c.op === "eq" || c.op === "ne") && c.value === null;
    if (!negated || nullTest || (c.op === "in" && c.values.includes(null))) return w;
    return { AND: [on(c.field, { not: null }), w] };
  };
  return build(cond, false);
}
