/**
 * Fastify plugin (Fastify 4 and 5).
 *
 *     import Fastify from "fastify";
 *     import { svcFastify, requireAction } from "@svc/sdk/fastify";
 *
 *     const app = Fastify();
 *     await app.register(svcFastify, { client: new SvcClient(), exclude: ["/healthz"] });
 *     app.get("/orders/:id", { preHandler: requireAction("orders:read", { resourceIdParam: "id" }) },
 *       async (request) => ({ claims: request.svcClaims }));
 *
 * The plugin applies to the whole application (it is not encapsulated).
 * `request.svcClaims` holds the verified claims, or null in development
 * mode, on fail-open and on excluded paths; `request.svcDecision` the whole
 * decision.
 */

import type {} from "fastify";
import { type Decision, SvcClient, type TokenDecision } from "./client.js";
import { type ActionOptions, checkRequiredAction, checkToken, isExcluded, type Outcome, REFUSAL_HEADERS,
  type SessionCookieOptions, sessionCookieOf, type SvcRequestLike, tokenOf } from "./web.js";

/** The parts of a Fastify request the plugin reads and writes. */
export interface FastifyRequestLike extends SvcRequestLike {
  url: string;
  params?: unknown;
}

/** The parts of a Fastify reply the plugin uses. */
export interface FastifyReplyLike {
  code(status: number): this;
  headers(values: Record<string, string>): this;
  send(payload?: unknown): unknown;
}

/** The parts of a Fastify instance the plugin uses. */
export interface FastifyInstanceLike {
  decorateRequest(name: string, value: unknown): unknown;
  addHook(name: "onRequest", hook: (request: FastifyRequestLike, reply: FastifyReplyLike) => Promise<unknown>): unknown;
}

/**
 * The options of svcFastify. The session cookie (SessionCookieOptions:
 * sessionCookie, sessionCookiePrefixedOnly, saml) is read when a request has
 * no Authorization header; with saml = resolveSamlConfig(), behind a Secure
 * acsUrl, only as `__Host-<cookieName>`.
 */
export interface SvcFastifyOptions extends SessionCookieOptions {
  /** Default: new SvcClient() (SVC_SIDECAR_URL, SVC_FAIL_MODE, svc.toml). */
  client?: SvcClient;
  /** Exempt paths: exact, or prefixes ending with "*". */
  exclude?: string[];
}

/**
 * Validates the bearer token or API key ("Authorization: ApiKey", or
 * X-Api-Key without an Authorization header) of every request but the
 * excluded ones and sets request.svcClaims.
 */
export async function svcFastify(app: FastifyInstanceLike, opts: SvcFastifyOptions = {}): Promise<void> {
  const client = opts.client ?? new SvcClient();
  const exclude = [...(opts.exclude ?? [])];
  const session = sessionCookieOf(opts);
  app.decorateRequest("svcClaims", null);
  app.decorateRequest("svcDecision", null);
  app.decorateRequest("svcClient", null);
  app.addHook("onRequest", async (request, reply) => {
    request.svcClient = client;
    request.svcClaims = null;
    request.svcDecision = null;
    if (isExcluded(pathOf(request.url), exclude)) return;
    const out = await checkToken(client, tokenOf(sources(request), session.name, session.prefixedOnly));
    return settle(out, request, reply);
  });
}

// Not encapsulated: the hook covers every route of the application, as
// fastify-plugin would arrange, without depending on it.
Object.assign(svcFastify, {
  [Symbol.for("skip-override")]: true,
  [Symbol.for("fastify.display-name")]: "svc",
});

export interface RequireActionOptions extends ActionOptions {
  /** Default: the plugin's client, else new SvcClient(). */
  client?: SvcClient;
}

let defaultClient: SvcClient | undefined;

/** A preHandler: the policy must allow action; a denial answers 403 with the deny reasons. */
export function requireAction(action: string, opts: RequireActionOptions = {}) {
  return async function svcRequireAction(request: FastifyRequestLike, reply: FastifyReplyLike): Promise<unknown> {
    const client = opts.client ?? request.svcClient ?? (defaultClient ??= new SvcClient());
    const params = request.params as Record<string, string | undefined> | undefined;
    const out = await checkRequiredAction(client, sources(request), action, opts, params);
    return settle(out, request, reply);
  };
}

function pathOf(url: string): string {
  const q = url.indexOf("?");
  return q < 0 ? url : url.slice(0, q);
}

function sources(req: FastifyRequestLike) {
  const h = (name: string) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v.join(", ") : v;
  };
  return { authorization: h("authorization"), cookie: h("cookie"), xApiKey: h("x-api-key") };
}

function settle(out: Outcome, request: FastifyRequestLike, reply: FastifyReplyLike): unknown {
  if (!out.admitted) {
    const r = out.refusal;
    return reply.code(r.status).headers({ ...REFUSAL_HEADERS, ...r.headers }).send(r.body);
  }
  request.svcClaims = out.admission.claims;
  request.svcDecision = out.admission.decision;
  return undefined;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The verified claims, or null (development mode, fail-open, excluded path). */
    svcClaims: Record<string, unknown> | null;
    /** The whole decision behind svcClaims. */
    svcDecision: TokenDecision | Decision | null;
  }
}
