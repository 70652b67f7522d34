/**
 * The client of the svc sidecar's local HTTP JSON API
 * (`POST /v1/validate-token`, `POST /v1/authorize`, `POST /v1/plan-resources`).
 */

import { DEFAULT_CONFIG_FILE, resolveSettings } from "./config.js";
import { type Dialect, DIALECTS, parsePlan, type Plan } from "./plan.js";

/** Used when neither the options, the environment nor svc.toml name the sidecar. */
export const DEFAULT_SIDECAR_URL = "http://localhost:7700";
/** Milliseconds one call may take, connection included, before the sidecar is taken as unreachable. */
export const DEFAULT_TIMEOUT_MS = 1000;
/**
 * Largest timeoutMs: Node's fetch gives up waiting for an answer's headers
 * or body after 300 s of its own, which a longer timeout could not outlast.
 */
export const MAX_TIMEOUT_MS = 300_000;

/** Given to the warn option (default console.warn) once, when a fail-open client is made. */
export const FAIL_OPEN_NOTICE = "svc: fail_mode=open: requests are allowed when the sidecar is unreachable; " +
  'set SVC_FAIL_MODE=closed (or sdk.fail_mode, failMode: "closed") to deny them instead';

export type FailMode = "open" | "closed";

export interface SvcClientOptions {
  /**
   * Base URL of the sidecar's HTTP API; default SVC_SIDECAR_URL, then
   * SVC_SIDECAR_ADDR and sdk.sidecar_addr of svc.toml when they are http(s)
   * URLs (a host:port there is the gRPC address), then http://localhost:7700.
   */
  sidecarUrl?: string;
  /** What happens when the sidecar is unreachable; default SVC_FAIL_MODE, then sdk.fail_mode of svc.toml, then "open". */
  failMode?: FailMode;
  /**
   * Per-call timeout in milliseconds, connecting included; default 1000, at
   * most MAX_TIMEOUT_MS. The sidecar counts as unreachable when the
   * connection is refused or no answer came within it, never sooner.
   */
  timeoutMs?: number;
  /** Environment to read the defaults from; default process.env. */
  env?: Record<string, string | undefined>;
  /**
   * TOML file whose [sdk] sidecar_addr and fail_mode fill what the options
   * and the environment leave unset; default "svc.toml" in the working
   * directory, null for none. A missing file is no error; an unreadable or
   * malformed one is.
   */
  configFile?: string | null;
  /**
   * Receives the fail-open warnings: FAIL_OPEN_NOTICE once when a fail-open
   * client is made, then at most one every 10 s while the sidecar is
   * unavailable; default console.warn.
   */
  warn?: (message: string) => void;
}

/** The result of validateToken. */
export interface TokenDecision {
  allowed: boolean;
  /** The verified claims; null when refused, in development mode and on fail-open. */
  claims: Record<string, unknown> | null;
  /** A stable code: "ok", "dev-anonymous", "fail-open", or the failure ("token-expired", "api-key-revoked", ...). */
  reason: string;
  /** The sub claim, or "anonymous" in development mode and on fail-open. */
  subject: string;
  tenantId: string;
  message: string;
  /** Identifies the answer in the sidecar's audit and decision logs; "" on fail-open. */
  decisionId: string;
}

/** What authorize asks about. */
export interface AuthorizeOptions {
  /** Resource type; default the action's prefix. */
  resource?: string;
  resourceId?: string;
  /** Tenant owning the resource; default the deployment's tenant. */
  resourceTenant?: string;
  /**
   * What the application knows about the resource (owner, status…), JSON
   * values the policy sees as input.resource.attributes. At most 64, keys
   * of at most 128 bytes, 4 levels deep and 16 KiB as JSON, else the
   * sidecar rejects the request (SidecarRequestError, "input-invalid").
   */
  resourceAttributes?: Record<string, unknown>;
  /** The HTTP request being authorized, for policies that read input.request. */
  request?: {
    method?: string;
    path?: string;
    host?: string;
    query?: Record<string, string>;
    headers?: Record<string, string>;
  };
}

/** What planResources asks about besides the action and the resource type. */
export interface PlanResourcesOptions {
  /** A bearer token (without "Bearer ") or an API key; none asks as an anonymous caller. */
  token?: string;
  /** The SQL dialect of plan.sql: "postgres" ($1, $2…, the default), "sqlite" or "mysql" (?). */
  dialect?: Dialect;
}

/** The result of authorize: a token check and, when it passed, a policy evaluation. */
export interface Decision {
  allow: boolean;
  /** The policy's deny reasons, sorted; empty when allowed or when the token was refused. */
  denyReasons: string[];
  /** "policy-allow", "policy-deny", "rate-limited", a token failure code, or "fail-open". */
  reason: string;
  /** Identifies the policy evaluation; empty when the policy was not evaluated. */
  decisionId: string;
  subject: string;
  tenantId: string;
  claims: Record<string, unknown> | null;
  policyRevision: string;
  /** Seconds to wait, when reason is "rate-limited". */
  retryAfter: number | null;
  message: string;
}

/** Base of the SDK's errors; `reason` is a stable kebab-case code. */
export class SvcError extends Error {
  constructor(readonly reason: string, message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** No decision could be had: unreachable in "closed" mode, or policy-error in both modes; middleware answers 503. */
export class SidecarUnavailableError extends SvcError {}

/** The sidecar refused the request itself, or the URL is not its API: a bug, never a decision. */
export class SidecarRequestError extends SvcError {}

const WARN_EVERY_MS = 10_000;

/**
 * SvcClient asks the sidecar for decisions. Node's fetch keeps connections
 * alive and pools them per origin. Make one per process.
 *
 * Fail modes, when the sidecar is unreachable, times out, or answers 502,
 * 503 or 504: "open" resolves to an allowed decision with null claims and
 * reason "fail-open"; "closed" rejects with SidecarUnavailableError. A
 * sidecar that answers but cannot decide (500 policy-error) rejects with
 * SidecarUnavailableError in both modes. An invalid token is a decision
 * with allowed=false in both modes.
 */
export class SvcClient {
  readonly sidecarUrl: string;
  readonly failMode: FailMode;
  readonly timeoutMs: number;
  readonly #base: string;
  readonly #warn: (message: string) => void;
  #lastWarn = 0;

  constructor(opts: SvcClientOptions = {}) {
    const env = opts.env ?? process.env;
    const configFile = opts.configFile === undefined ? DEFAULT_CONFIG_FILE : opts.configFile;
    const settings = resolveSettings(opts.sidecarUrl, opts.failMode, env, configFile, DEFAULT_SIDECAR_URL);
    const url = settings.sidecarUrl.value;
    const mode = settings.failMode.value;
    if (mode !== "open" && mode !== "closed") {
      throw new TypeError(`fail mode ${JSON.stringify(mode)} is neither "open" nor "closed" (${settings.failMode.source})`);
    }
    const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0 || timeoutMs > MAX_TIMEOUT_MS) {
      throw new TypeError(`timeoutMs must be a positive number of at most ${MAX_TIMEOUT_MS}, not ${String(timeoutMs)}`);
    }
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new TypeError(`sidecar URL ${JSON.stringify(url)} must be http://host:port or https://host:port (${settings.sidecarUrl.source})`);
    }
    if ((parsed.protocol !== "http:" && parsed.protocol !== "https:") || !parsed.hostname) {
      throw new TypeError(`sidecar URL ${JSON.stringify(url)} must be http://host:port or https://host:port (${settings.sidecarUrl.source})`);
    }
    this.sidecarUrl = url;
    this.failMode = mode;
    this.timeoutMs = timeoutMs;
    this.#base = parsed.origin + parsed.pathname.replace(/\/+$/, "");
    this.#warn = opts.warn ?? ((m) => console.warn(m));
    if (mode === "open") {
      const from = settings.failMode.source === "default" ? "by default" : `from ${settings.failMode.source}`;
      this.#warn(`${FAIL_OPEN_NOTICE} (sidecar ${url}; fail_mode=open ${from})`);
    }
  }

  /** Verifies a bearer token (without the "Bearer " prefix) or an API key ("svck_..."). */
  async validateToken(token: string): Promise<TokenDecision> {
    const body = await this.#call("/v1/validate-token", { token: token ?? "" }, "validate-token");
    if (body === FAIL_OPEN) {
      return { allowed: true, claims: null, reason: "fail-open", subject: "anonymous", tenantId: "",
        message: "sidecar unavailable; allowed by fail_mode=open", decisionId: "" };
    }
    return {
      allowed: body.allowed === true,
      claims: claimsOf(body.claims),
      reason: str(body.reason),
      subject: str(body.subject),
      tenantId: str(body.tenant_id),
      message: str(body.message),
      decisionId: str(body.decision_id),
    };
  }

  /** Asks whether the bearer of token may perform action ("<resource>:<verb>"). */
  async authorize(token: string, action: string, opts: AuthorizeOptions = {}): Promise<Decision> {
    const msg: Record<string, unknown> = { token: token ?? "", action };
    const resource: Record<string, unknown> = {};
    if (opts.resource) resource.type = opts.resource;
    if (opts.resourceId) resource.id = opts.resourceId;
    if (opts.resourceTenant) resource.tenant = opts.resourceTenant;
    if (opts.resourceAttributes && Object.keys(opts.resourceAttributes).length > 0) {
      resource.attributes = opts.resourceAttributes;
    }
    if (Object.keys(resource).length > 0) msg.resource = resource;
    if (opts.request) msg.request = opts.request;
    const body = await this.#call("/v1/authorize", msg, "authorize");
    if (body === FAIL_OPEN) {
      return { allow: true, denyReasons: [], reason: "fail-open", decisionId: "", subject: "anonymous",
        tenantId: "", claims: null, policyRevision: "", retryAfter: null,
        message: "sidecar unavailable; allowed by fail_mode=open" };
    }
    return {
      allow: body.allowed === true,
      denyReasons: Array.isArray(body.deny_reasons) ? body.deny_reasons.map(String) : [],
      reason: str(body.reason),
      decisionId: str(body.decision_id),
      subject: str(body.subject),
      tenantId: str(body.tenant_id),
      claims: claimsOf(body.claims),
      policyRevision: str(body.policy_revision),
      retryAfter: durationOf(body.retry_after),
      message: str(body.message),
    };
  }

  /**
   * Asks which resources of type resourceType the bearer of opts.token (a
   * bearer token or an API key) may perform action on: a Plan,
   * always_allowed, always_denied or conditional with a condition tree,
   * and the sidecar's SQL in opts.dialect (default "postgres"): plan.sql.where
   * with bind parameters only, plan.sql.params. A refused credential is an
   * always_denied plan with the token's failure code as its reason. A
   * policy the plan cannot express throws SidecarRequestError with code
   * "plan-unsupported".
   *
   * A plan never fails open: with the sidecar unreachable it throws
   * SidecarUnavailableError in both fail modes, as listing every row of
   * every tenant is no safe default.
   */
  async planResources(action: string, resourceType: string, opts: PlanResourcesOptions = {}): Promise<Plan> {
    const dialect = opts.dialect ?? "postgres";
    if (!DIALECTS.includes(dialect)) {
      throw new TypeError(`svc: dialect ${JSON.stringify(dialect)} is not postgres, sqlite or mysql`);
    }
    const msg = { token: opts.token ?? "", action, resource_type: resourceType, dialect };
    // Never FAIL_OPEN: this call does not fail open.
    const body = await this.#call("/v1/plan-resources", msg, "plan-resources", false);
    try {
      return parsePlan(body as Record<string, unknown>);
    } catch (e) {
      throw new SidecarRequestError("input-invalid",
        `svc plan-resources: the answer at ${this.sidecarUrl}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  async #call(path: string, msg: unknown, op: string, failOpen = true): Promise<Record<string, unknown> | typeof FAIL_OPEN> {
    let res: Response;
    let text: string;
    const signal = AbortSignal.timeout(this.timeoutMs);
    const payload = JSON.stringify(msg);
    for (;;) {
      try {
        res = await fetch(this.#base + path, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json" },
          body: payload,
          signal,
          // The decision is the sidecar's own: a redirect is not followed
          // (fetch would send the token, and take the decision, from
          // wherever it points), it is an answer that is not the API's.
          redirect: "manual",
        });
        text = await res.text();
        break;
      } catch (e) {
        // Node's fetch abandons a connection attempt after 10 s of its own;
        // nothing was sent, so a longer timeout tries again until it ends.
        if (!signal.aborted && connectTimedOut(e)) continue;
        return this.#unavailable(op, "unavailable", describe(e, this.timeoutMs), failOpen);
      }
    }
    if (res.status === 500) {
      // The sidecar answered and could not decide (policy-error): a refusal
      // in both fail modes, never a fail-open pass.
      const [code, detail] = errorOf(text);
      throw new SidecarUnavailableError(code || "policy-error", `svc ${op}: sidecar ${this.sidecarUrl} could not decide: ${detail}`);
    }
    if (res.status >= 500) {
      const [code, detail] = errorOf(text);
      return this.#unavailable(op, code || "unavailable", `sidecar answered ${res.status}: ${detail}`, failOpen);
    }
    if (res.status !== 200) {
      const [code, detail] = errorOf(text);
      throw new SidecarRequestError(code || "input-invalid", `svc ${op}: sidecar answered ${res.status}: ${detail}`);
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new SidecarRequestError("input-invalid", `svc ${op}: the answer at ${this.sidecarUrl} is not JSON`);
    }
    if (body === null || typeof body !== "object" || Array.isArray(body)) {
      throw new SidecarRequestError("input-invalid", `svc ${op}: the answer at ${this.sidecarUrl} is not a JSON object`);
    }
    return body as Record<string, unknown>;
  }

  #unavailable(op: string, reason: string, detail: string, failOpen = true): typeof FAIL_OPEN {
    if (this.failMode === "open" && failOpen) {
      const now = Date.now();
      if (this.#lastWarn === 0 || now - this.#lastWarn >= WARN_EVERY_MS) {
        this.#lastWarn = now;
        this.#warn(`svc sidecar unavailable; allowing by fail_mode=open (op=${op} reason=${reason}: ${detail})`);
      }
      return FAIL_OPEN;
    }
    throw new SidecarUnavailableError(reason, `svc ${op}: sidecar ${this.sidecarUrl} unavailable: ${detail}`);
  }
}

const FAIL_OPEN = Symbol("fail-open");

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

function claimsOf(v: unknown): Record<string, unknown> | null {
  return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}

// protojson writes a google.protobuf.Duration as "1.500s".
function durationOf(v: unknown): number | null {
  if (typeof v !== "string" || !v.endsWith("s")) return null;
  const n = Number(v.slice(0, -1));
  return Number.isFinite(n) ? n : null;
}

function errorOf(text: string): [string, string] {
  try {
    const err = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown } }).error ?? {};
    return [str(err.code), str(err.message)];
  } catch {
    return ["", text.slice(0, 200)];
  }
}

function connectTimedOut(e: unknown): boolean {
  const cause = e instanceof Error ? (e.cause as { code?: string } | undefined) : undefined;
  return cause?.code === "UND_ERR_CONNECT_TIMEOUT";
}

function describe(e: unknown, timeoutMs: number): string {
  if (e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")) {
    return `no answer within ${timeoutMs} ms`;
  }
  const cause = e instanceof Error ? (e.cause as { code?: string; message?: string } | undefined) : undefined;
  if (cause?.code === "ECONNREFUSED") return "connection refused";
  return cause?.code ?? cause?.message ?? (e instanceof Error ? e.message : String(e));
}
