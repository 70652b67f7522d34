/**
 * What every middleware does with a request, whatever the framework:
 *
 *     no bearer token or API key 401 token-missing, WWW-Authenticate: Bearer
 *     invalid token              401, WWW-Authenticate: Bearer error="invalid_token"
 *     invalid API key            401, WWW-Authenticate: ApiKey error="invalid_key"
 *     token of another tenant    403 tenant-mismatch
 *     policy denies              403 with the deny reasons and decision id
 *     tenant rate-limited        429 with Retry-After
 *     sidecar unreachable        open: admitted, claims null, reason fail-open; closed: 503
 *     keys or policy unavailable 503
 */

import { type AuthorizeOptions, type Decision, SidecarUnavailableError, type SvcClient, SvcError,
  type TokenDecision } from "./client.js";
import { gatewayAcsUrl, oidcRedirectUrls } from "./config.js";

/**
 * Reasons for which the token itself was refused (RFC 6750 invalid_token): the
 * sidecar's (reason/testdata/failures.json, which the tests compare).
 */
export const TOKEN_FAILURES = new Set([
  "token-malformed", "token-expired", "token-not-yet-valid", "token-issued-in-future", "token-bound",
  "signature-invalid", "unknown-kid", "alg-not-allowed", "key-too-weak", "tenant-missing",
  "issuer-mismatch", "issuer-unknown", "audience-mismatch", "typ-not-allowed", "token-inactive",
]);

/** Reasons for which an API key was refused: challenged in its own scheme (ApiKey error="invalid_key"). */
export const API_KEY_FAILURES = new Set(["api-key-malformed", "api-key-unknown", "api-key-revoked", "api-key-expired"]);

/** Reasons for which nothing could be said about the token. */
const UNDECIDED = new Set([
  "jwks-unavailable", "introspection-unavailable", "introspection-invalid", "policy-error", "unavailable",
]);

/** The JSON body of every refusal. */
export interface DenyBody {
  allow: false;
  deny_reasons: string[];
  reason: string;
  decision_id?: string;
}

/** Headers of every refusal, besides the refusal's own (as the Go middleware sends). */
export const REFUSAL_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
});

/** A refused request: status, headers and body. */
export interface Refusal {
  status: number;
  headers: Record<string, string>;
  body: DenyBody;
}

/** A request let through, with the verified claims (null in development mode and on fail-open). */
export interface Admission {
  claims: Record<string, unknown> | null;
  decision: TokenDecision | Decision;
}

export type Outcome = { admitted: true; admission: Admission } | { admitted: false; refusal: Refusal };

/** The parts of a request the middleware of every framework reads and writes. */
export interface SvcRequestLike {
  headers: Record<string, string | string[] | undefined>;
  svcClaims?: Record<string, unknown> | null;
  svcDecision?: TokenDecision | Decision | null;
  svcClient?: SvcClient;
}

/**
 * The parts of the sign-in gateways' settings (SamlConfig, from
 * resolveSamlConfig) that say which session cookie to read.
 */
export interface SessionCookieSettings {
  /** The session cookie, unprefixed (sdk.session.cookie_name, older name sdk.saml.cookie_name). */
  cookieName: string;
  /** The SAML gateway's public ACS URL (sdk.saml.acs_url): whether its cookies are Secure, and so prefixed. */
  acsUrl: string;
  /**
   * The OpenID Connect gateway's public URLs, the redirect_url of each provider (oidcRedirectUrls):
   * the session cookie it sets is prefixed likewise wherever they are Secure.
   */
  oidcRedirectUrls?: string[];
}

/** How a middleware finds the session cookie. */
export interface SessionCookieOptions {
  /**
   * Cookie holding the token when there is no Authorization header, unprefixed, e.g. "svc_session"
   * (the sign-in gateways'); default saml.cookieName, else none.
   */
  sessionCookie?: string;
  /**
   * Read the session cookie only as `__Host-<sessionCookie>`: an unprefixed one, which a sibling
   * subdomain can toss in for the parent domain, is no session. `false` reads `__Host-<sessionCookie>`
   * when the request has it, else `<sessionCookie>`. Default: sessionPrefixedOnly(saml) with saml
   * (prefixed only behind Secure gateways), else the same of the gateways' URLs in the environment
   * or svc.toml: gatewayAcsUrl() (SVC_SAML_ACS_URL, or sdk.saml.acs_url) and oidcRedirectUrls()
   * (SVC_OIDC_REDIRECT_URL, or the redirect_url of [sdk.oidc] and [[sdk.oidc.providers]]).
   */
  sessionCookiePrefixedOnly?: boolean;
  /** The SAML gateway's settings (resolveSamlConfig()): the default of the two options above. */
  saml?: SessionCookieSettings;
}

/** Where middleware finds the token. */
export interface TokenSource {
  /** The Authorization header. */
  authorization?: string | undefined;
  /** The Cookie header, read when sessionCookie is set and there is no bearer token. */
  cookie?: string | undefined;
  /** The X-Api-Key header, read when there is no Authorization header. */
  xApiKey?: string | undefined;
}

/** The token of "Authorization: Bearer <token>" (scheme case-insensitive), or "". */
export function bearerToken(authorization: string | undefined | null): string {
  if (!authorization) return "";
  const m = /^\s*bearer\s+(.+?)\s*$/i.exec(authorization);
  return m?.[1] ?? "";
}

/**
 * The API key a request presents, by the rule of the sidecar's checks: the
 * credential of "Authorization: ApiKey <key>" (scheme case-insensitive),
 * else, when the request has no Authorization header at all (undefined or
 * null), its X-Api-Key header; "" when it presents none. Another
 * Authorization scheme (a bearer token) decides: X-Api-Key beside it is not read.
 */
export function apiKey(authorization: string | undefined | null, xApiKey?: string | undefined | null): string {
  if (authorization === undefined || authorization === null) return (xApiKey ?? "").trim();
  const m = /^apikey[ \t]([^]*)$/i.exec(authorization.trim());
  return m?.[1]?.trim() ?? "";
}

/** The value of cookie `name` in a Cookie header, or "". */
export function cookieValue(cookieHeader: string | undefined | null, name: string): string {
  if (!cookieHeader) return "";
  for (const part of cookieHeader.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    let v = part.slice(eq + 1).trim();
    if (v.startsWith('"') && v.endsWith('"') && v.length >= 2) v = v.slice(1, -1);
    try {
      return decodeURIComponent(v);
    } catch {
      return v;
    }
  }
  return "";
}

/**
 * The prefix of the SAML gateway's cookies wherever it marks them Secure
 * ("__Host-svc_session"): a browser takes a cookie so named only from the
 * host itself, never from a sibling subdomain.
 */
export const HOST_COOKIE_PREFIX = "__Host-";

/**
 * The session token in a Cookie header: the cookie `__Host-<name>` when the
 * header has one, else, unless prefixedOnly, `<name>`, else "". An
 * unprefixed cookie that a sibling subdomain tossed in never displaces the
 * prefixed one the gateway set, wherever it stands in the header; alone it
 * would still sign a browser without a session of its own in as whoever it
 * names, which prefixedOnly (behind a Secure gateway, sessionPrefixedOnly)
 * prevents. `name` is sdk.saml.cookie_name, unprefixed.
 */
export function sessionCookieValue(cookieHeader: string | undefined | null, name: string, prefixedOnly = false): string {
  if (!cookieHeader || !name) return "";
  const prefixed = HOST_COOKIE_PREFIX + name;
  const hasPrefixed = prefixedOnly || cookieHeader.split(";").some((part) => {
    const eq = part.indexOf("=");
    return eq >= 0 && part.slice(0, eq).trim() === prefixed;
  });
  return cookieValue(cookieHeader, hasPrefixed ? prefixed : name);
}

/**
 * Whether a Host header names a loopback host: localhost, 127.0.0.0/8 or
 * ::1 (the rule of the sidecar's engine/loopback).
 */
export function loopbackHost(host: string | string[] | undefined): boolean {
  if (typeof host !== "string") return false;
  let name = host.trim();
  if (name.startsWith("[")) {
    const end = name.indexOf("]");
    if (end < 0) return false;
    name = name.slice(1, end);
  } else if (name.indexOf(":") === name.lastIndexOf(":")) {
    name = name.split(":")[0] ?? "";
  }
  name = name.toLowerCase();
  if (name === "localhost" || name === "::1" || name === "0:0:0:0:0:0:0:1") return true;
  const m = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(name);
  return m !== null && m.slice(1).every((o) => Number(o) <= 255);
}

/**
 * Whether the cookies of a gateway whose public URL is url (its acs_url)
 * are Secure, and so named `__Host-<name>`: everywhere but plain http on a
 * loopback host, the sidecar's rule. A URL that does not parse counts as
 * Secure: the sidecar refuses it.
 */
export function secureCookies(url: string): boolean {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return true;
  }
  return !(u.protocol === "http:" && loopbackHost(u.host));
}

/**
 * Whether the session cookie is read only as `__Host-<cookieName>`: of the
 * gateways' public URLs (acsUrl, oidcRedirectUrls) at least one is set and
 * on every one their cookies are Secure (secureCookies), the sidecar's
 * rule. The gateways then set no other session cookie, so an unprefixed
 * one can only be one a sibling subdomain tossed in (session fixation).
 * Without a URL (how the gateways name their cookies is not known) or
 * with one on plain http on loopback, the unprefixed cookie is read too.
 */
export function sessionPrefixedOnly(saml: Pick<SessionCookieSettings, "acsUrl" | "oidcRedirectUrls">): boolean {
  const urls = [saml.acsUrl, ...(saml.oidcRedirectUrls ?? [])].filter(Boolean);
  return urls.length > 0 && urls.every(secureCookies);
}

/**
 * The gateways' public URLs of the environment, else of configFile:
 * gatewayAcsUrl and oidcRedirectUrls, as the Go and Python middlewares
 * read them.
 */
export function gatewaySettings(env: Record<string, string | undefined> = process.env,
  configFile?: string | null): Pick<SessionCookieSettings, "acsUrl" | "oidcRedirectUrls"> {
  return { acsUrl: gatewayAcsUrl(env, configFile), oidcRedirectUrls: oidcRedirectUrls(env, configFile) };
}

/**
 * The session cookie a middleware reads by its options, and whether only
 * under its prefixed name. Without sessionCookiePrefixedOnly nor saml, the
 * gateways' URLs are those of the environment or svc.toml
 * (gatewaySettings), as the Go and Python middlewares read them: behind
 * Secure gateways, SAML or OpenID Connect, the session is read prefixed
 * only, even when only the cookie's name was given.
 */
export function sessionCookieOf(opts: SessionCookieOptions): { name: string | undefined; prefixedOnly: boolean } {
  const name = opts.sessionCookie ?? opts.saml?.cookieName;
  let prefixedOnly = opts.sessionCookiePrefixedOnly;
  if (prefixedOnly === undefined) {
    prefixedOnly = name !== undefined && sessionPrefixedOnly(opts.saml ?? gatewaySettings());
  }
  return { name, prefixedOnly };
}

/** sessionCookieOf of the options of a route's check, worked out once per options. */
const routeSessions = new WeakMap<ActionOptions, { name: string | undefined; prefixedOnly: boolean }>();

/**
 * The request's credential: the bearer header, else its API key (apiKey:
 * "Authorization: ApiKey", or X-Api-Key without an Authorization header),
 * sent to the sidecar as the token (a key starts svck_, which no token
 * does); without either nor any Authorization header, the session cookie
 * when one is named (sessionCookieValue; only `__Host-<sessionCookie>` with
 * prefixedOnly). A request that carries another
 * Authorization scheme (Basic, ...) is judged by that header alone, as the
 * sidecar, the Go and the Python middlewares do: a cookie never stands in
 * for credentials the client chose to send.
 */
export function tokenOf(src: TokenSource, sessionCookie?: string, prefixedOnly = false): string {
  const tok = bearerToken(src.authorization) || apiKey(src.authorization, src.xApiKey);
  if (tok || src.authorization || !sessionCookie) return tok;
  return sessionCookieValue(src.cookie, sessionCookie, prefixedOnly);
}

/** Whether path is exempt: an entry matches exactly, or as a prefix when it ends with "*". */
export function isExcluded(path: string, exclude: readonly string[] | undefined): boolean {
  for (const e of exclude ?? []) {
    if (e.endsWith("*") ? path.startsWith(e.slice(0, -1)) : path === e) return true;
  }
  return false;
}

/** Validates the token (no policy evaluation). */
export async function checkToken(client: SvcClient, token: string): Promise<Outcome> {
  if (!token) return refused(challenge("token-missing"));
  let d: TokenDecision;
  try {
    d = await client.validateToken(token);
  } catch (e) {
    return refused(failed(e));
  }
  if (d.allowed) return { admitted: true, admission: { claims: d.claims, decision: d } };
  return refused(refusalOf(d.reason));
}

/** Validates the token and authorizes action by the policy. */
export async function checkAction(client: SvcClient, token: string, action: string,
  opts: AuthorizeOptions = {}): Promise<Outcome> {
  if (!token) return refused(challenge("token-missing"));
  let d: Decision;
  try {
    d = await client.authorize(token, action, opts);
  } catch (e) {
    return refused(failed(e));
  }
  if (d.allow) return { admitted: true, admission: { claims: d.claims, decision: d } };
  return refused(refusalOf(d.reason, d.denyReasons, d.decisionId, d.retryAfter));
}

/** The options of requireAction in "@svc/sdk/express" and "@svc/sdk/fastify". */
export interface ActionOptions extends SessionCookieOptions {
  /** Default: the framework middleware's client, else new SvcClient(). */
  client?: SvcClient;
  /** Resource type; default the action's prefix. */
  resource?: string;
  /** Route parameter holding the resource id. */
  resourceIdParam?: string;
}

/**
 * The check of a framework's requireAction: the token of src (or of the
 * session cookie of opts, sessionCookieOf) authorized for action on
 * opts.resource and on the resource id in the route parameter
 * opts.resourceIdParam of params.
 */
export function checkRequiredAction(client: SvcClient, src: TokenSource, action: string, opts: ActionOptions,
  params: Readonly<Record<string, string | undefined>> | undefined): Promise<Outcome> {
  const resourceId = opts.resourceIdParam ? params?.[opts.resourceIdParam] : undefined;
  const authz: AuthorizeOptions = {};
  if (opts.resource) authz.resource = opts.resource;
  if (resourceId) authz.resourceId = resourceId;
  let session = routeSessions.get(opts);
  if (!session) routeSessions.set(opts, session = sessionCookieOf(opts));
  return checkAction(client, tokenOf(src, session.name, session.prefixedOnly), action, authz);
}

/** Maps a refused decision to its answer. */
export function refusalOf(reason: string, denyReasons: string[] = [], decisionId = "",
  retryAfter: number | null = null): Refusal {
  const body: DenyBody = { allow: false, deny_reasons: [...denyReasons], reason };
  if (decisionId) body.decision_id = decisionId;
  if (reason === "rate-limited") {
    return { status: 429, headers: { "retry-after": String(Math.max(1, Math.ceil(retryAfter ?? 1))) }, body };
  }
  if (UNDECIDED.has(reason)) return { status: 503, headers: {}, body };
  if (reason === "token-missing") return { status: 401, headers: { "www-authenticate": "Bearer" }, body };
  if (TOKEN_FAILURES.has(reason)) {
    return { status: 401, headers: { "www-authenticate": `Bearer error="invalid_token", error_description="${reason}"` }, body };
  }
  if (API_KEY_FAILURES.has(reason)) {
    return { status: 401, headers: { "www-authenticate": `ApiKey error="invalid_key", error_description="${reason}"` }, body };
  }
  // policy-deny, tenant-mismatch (an authentic token of another tenant), and anything newer.
  return { status: 403, headers: {}, body };
}

function challenge(reason: string): Refusal {
  return refusalOf(reason);
}

function refused(refusal: Refusal): Outcome {
  return { admitted: false, refusal };
}

function failed(e: unknown): Refusal {
  if (e instanceof SidecarUnavailableError) {
    const reason = e.reason && e.reason !== "fail-open" ? e.reason : "unavailable";
    return { status: 503, headers: {}, body: { allow: false, deny_reasons: [], reason } };
  }
  // The route's configuration or the sidecar URL is wrong: the server's fault.
  const reason = e instanceof SvcError ? e.reason : "policy-error";
  console.error(`svc: ${e instanceof Error ? e.message : String(e)}`);
  return { status: 500, headers: {}, body: { allow: false, deny_reasons: [], reason } };
}
