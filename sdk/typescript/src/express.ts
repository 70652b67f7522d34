/**
 * Express middleware (Express 4 and 5).
 *
 *     import express from "express";
 *     import { SvcClient } from "@svc/sdk";
 *     import { svcExpress, requireAction } from "@svc/sdk/express";
 *
 *     const app = express();
 *     app.use(svcExpress({ client: new SvcClient(), exclude: ["/healthz"] }));
 *     app.get("/orders/:id", requireAction("orders:read", { resourceIdParam: "id" }), (req, res) =>
 *       res.json({ claims: req.svcClaims }));
 *
 * `req.svcClaims` holds the verified claims, or null in development mode, on
 * fail-open and on excluded paths; `req.svcDecision` the whole decision.
 */

import { type Decision, SvcClient, type TokenDecision } from "./client.js";
import { type ActionOptions, checkRequiredAction, checkToken, isExcluded, type Outcome, REFUSAL_HEADERS, type Refusal,
  type SessionCookieOptions, sessionCookieOf, type SvcRequestLike, tokenOf } from "./web.js";

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The verified claims, or null (development mode, fail-open, excluded path). */
      svcClaims?: Record<string, unknown> | null;
      /** The whole decision behind svcClaims. */
      svcDecision?: TokenDecision | Decision | null;
      /** The client of the svcExpress middleware, used by requireAction. */
      svcClient?: SvcClient;
    }
  }
}

/** The parts of an Express request the middleware reads and writes. */
export interface ExpressRequestLike extends SvcRequestLike {
  path: string;
  params?: Record<string, string | undefined>;
}

/** The parts of an Express response the middleware uses. */
export interface ExpressResponseLike {
  status(code: number): this;
  set(field: Record<string, string>): this;
  json(body: unknown): unknown;
}

export type ExpressNext = (err?: unknown) => void;

/**
 * The options of svcExpress. The session cookie (SessionCookieOptions:
 * sessionCookie, sessionCookiePrefixedOnly, saml) is read when a request has
 * no Authorization header; with saml = resolveSamlConfig(), behind a Secure
 * acsUrl, only as `__Host-<cookieName>`.
 */
export interface SvcExpressOptions extends SessionCookieOptions {
  /** Default: new SvcClient() (SVC_SIDECAR_URL, SVC_FAIL_MODE, svc.toml). */
  client?: SvcClient;
  /** Exempt paths: exact, or prefixes ending with "*". */
  exclude?: string[];
}

/**
 * Validates the bearer token or API key ("Authorization: ApiKey", or
 * X-Api-Key without an Authorization header) of every request but the
 * excluded ones and sets req.svcClaims.
 */
export function svcExpress(opts: SvcExpressOptions = {}) {
  const client = opts.client ?? new SvcClient();
  const exclude = [...(opts.exclude ?? [])];
  const session = sessionCookieOf(opts);
  return function svcAuth(req: ExpressRequestLike, res: ExpressResponseLike, next: ExpressNext): void {
    req.svcClient = client;
    req.svcClaims = null;
    req.svcDecision = null;
    if (isExcluded(req.path, exclude)) {
      next();
      return;
    }
    checkToken(client, tokenOf(sources(req), session.name, session.prefixedOnly))
      .then((out) => settle(out, req, res, next), next);
  };
}

export interface RequireActionOptions extends ActionOptions {
  /** Default: the svcExpress middleware's client, else new SvcClient(). */
  client?: SvcClient;
}

let defaultClient: SvcClient | undefined;

/** Route middleware: the policy must allow action; a denial answers 403 with the deny reasons. */
export function requireAction(action: string, opts: RequireActionOptions = {}) {
  return function svcRequireAction(req: ExpressRequestLike, res: ExpressResponseLike, next: ExpressNext): void {
    const client = opts.client ?? req.svcClient ?? (defaultClient ??= new SvcClient());
    checkRequiredAction(client, sources(req), action, opts, req.params)
      .then((out) => settle(out, req, res, next), next);
  };
}

function sources(req: ExpressRequestLike) {
  return { authorization: header(req, "authorization"), cookie: header(req, "cookie"), xApiKey: header(req, "x-api-key") };
}

function header(req: ExpressRequestLike, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
}

function settle(out: Outcome, req: ExpressRequestLike, res: ExpressResponseLike, next: ExpressNext): void {
  if (!out.admitted) {
    send(res, out.refusal);
    return;
  }
  req.svcClaims = out.admission.claims;
  req.svcDecision = out.admission.decision;
  next();
}

function send(res: ExpressResponseLike, r: Refusal): void {
  res.status(r.status).set({ ...REFUSAL_HEADERS, ...r.headers }).json(r.body);
}
