/**
 * Helpers for the sidecar's SAML gateway (its own listener, default
 * http://127.0.0.1:7701, endpoints under /auth/saml):
 *
 *     GET  {prefix}/login?return_to=/path  redirect to the IdP; return_to comes back as RelayState
 *     POST {prefix}/acs                    form SAMLResponse (+ RelayState): a browser gets 303 to the
 *                                          return path and an HttpOnly cookie (default svc_session);
 *                                          Accept: application/json gets {"token","token_type","expires_at"}
 *     GET  {prefix}/metadata, {prefix}/jwks.json, {prefix}/logout
 *
 * When a proxy (Envoy, nginx) routes {prefix} of the application's origin to
 * the gateway, the browser flow needs nothing but loginUrl and the session
 * cookie. When it does not, samlAcs completes the flow on the application's
 * own origin: mount it at the ACS URL the IdP posts to.
 */

import { configText, DEFAULT_CONFIG_FILE, oidcRedirectUrlsOf, tomlKeysOf, type TomlKind } from "./config.js";
import { apiKey, cookieValue, gatewaySettings, HOST_COOKIE_PREFIX, loopbackHost, sessionCookieValue,
  sessionPrefixedOnly } from "./web.js";

export { HOST_COOKIE_PREFIX, loopbackHost, secureCookies, type SessionCookieSettings, sessionPrefixedOnly } from "./web.js";

/** The gateway's default path prefix. */
export const DEFAULT_PREFIX = "/auth/saml";
/** The gateway's default session cookie. */
export const DEFAULT_COOKIE = "svc_session";
/** The gateway's default listen address, as a URL. */
export const DEFAULT_GATEWAY_URL = "http://127.0.0.1:7701";
/** Largest ACS form accepted by samlAcs, as by the gateway. */
export const MAX_ACS_BODY = 1 << 20;

/** The gateway's default clock skew tolerance, in seconds. */
export const DEFAULT_CLOCK_SKEW_SECONDS = 30;
/** The SAML attribute that fills the email claim by default. */
export const DEFAULT_EMAIL_ATTRIBUTE = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress";

/** Which SAML attribute fills each JWT claim (sdk.saml.attribute_mapping). */
export interface AttributeMapping {
  /** Default the standard e-mail-address claim URI. */
  email: string;
  /** Default "role". */
  role: string;
  /** Fills tenant_id; default "tenant_id". */
  tenant: string;
}

/**
 * The [sdk.saml] settings of the sidecar (spec SamlConfig) in camelCase, as
 * resolveSamlConfig reads them: what an application needs to reach the
 * gateway and to show the identity provider's administrator the values to
 * enter. The SP private key is never read from a file here:
 * spPrivateKeyPem comes from SVC_SAML_SP_PRIVATE_KEY_PEM only.
 */
export interface SamlConfig {
  /** SP entity id; equals the audience at the IdP (sdk.saml.entity_id). */
  entityId: string;
  /** Assertion consumer service URL; equals the reply URL at the IdP (sdk.saml.acs_url). */
  acsUrl: string;
  /** The IdP's metadata URL (sdk.saml.idp_metadata_url). */
  idpMetadataUrl: string;
  /** Tolerated clock difference, seconds; default 30. */
  clockSkewSeconds: number;
  attributeMapping: AttributeMapping;
  /** SP private key, PEM, from SVC_SAML_SP_PRIVATE_KEY_PEM only; never logged. */
  spPrivateKeyPem?: string;
  /** SP certificate, PEM, from SVC_SAML_SP_CERTIFICATE_PEM. */
  spCertificatePem?: string;
  /**
   * The session cookie the sign-in gateways set, SAML or OpenID Connect (sdk.session.cookie_name,
   * older name sdk.saml.cookie_name); default "svc_session".
   */
  cookieName: string;
  /** Path prefix of the gateway's endpoints (sdk.saml.path_prefix); default "/auth/saml". */
  pathPrefix: string;
  /** The gateway's URL for server-side calls: SVC_SAML_URL, default http://127.0.0.1:7701. */
  gatewayUrl: string;
  /**
   * The OpenID Connect gateway's public URLs beside this one, the redirect_url of each provider
   * (oidcRedirectUrls: SVC_OIDC_REDIRECT_URL, [sdk.oidc], [[sdk.oidc.providers]]); absent when
   * there is none. With acsUrl they say whether the session cookie is read prefixed only.
   */
  oidcRedirectUrls?: string[];
}

const SAML_KEYS: Record<string, TomlKind> = {
  "sdk.saml.entity_id": "string",
  "sdk.saml.acs_url": "string",
  "sdk.saml.idp_metadata_url": "string",
  "sdk.saml.clock_skew_seconds": "integer",
  "sdk.saml.attribute_mapping.email": "string",
  "sdk.saml.attribute_mapping.role": "string",
  "sdk.saml.attribute_mapping.tenant": "string",
  "sdk.saml.cookie_name": "string",
  "sdk.saml.path_prefix": "string",
  "sdk.session.cookie_name": "string",
};

/**
 * The SAML settings: each field from `given`, else its SVC_SAML_* variable
 * (SVC_SAML_ENTITY_ID, SVC_SAML_ACS_URL, SVC_SAML_IDP_METADATA_URL,
 * SVC_SAML_CLOCK_SKEW_SECONDS, SVC_SAML_ATTRIBUTE_EMAIL/_ROLE/_TENANT,
 * SVC_SAML_COOKIE_NAME, SVC_SAML_PATH_PREFIX, SVC_SAML_URL), else the
 * [sdk.saml] key of `configFile` (null: no file; a missing file is no
 * error), else the sidecar's default. The PEM fields come from
 * SVC_SAML_SP_PRIVATE_KEY_PEM / SVC_SAML_SP_CERTIFICATE_PEM only. A
 * clock skew that is not a non-negative integer throws a TypeError.
 * cookieName is the session cookie whichever gateway signs in, as the
 * sidecar reads it: SVC_SESSION_COOKIE_NAME, SVC_SAML_COOKIE_NAME,
 * sdk.session.cookie_name, sdk.saml.cookie_name, "svc_session".
 * oidcRedirectUrls, when there are any, are those of oidcRedirectUrls.
 */
export function resolveSamlConfig(given: Partial<SamlConfig> = {},
  env: Record<string, string | undefined> = process.env,
  configFile: string | null = DEFAULT_CONFIG_FILE): SamlConfig {
  const text = configText(configFile);
  const file = text === undefined ? {} : tomlKeysOf(text, SAML_KEYS, configFile ?? undefined);
  const str = (key: string): string => (typeof file[key] === "string" ? (file[key] as string) : "");
  const pick = (g: string | undefined, envName: string, key: string, dflt: string): string =>
    g || env[envName] || str(key) || dflt;
  let skew = given.clockSkewSeconds;
  if (skew === undefined) {
    const raw = env.SVC_SAML_CLOCK_SKEW_SECONDS;
    if (raw) {
      if (!/^\d{1,9}$/.test(raw.trim())) throw new TypeError(`SVC_SAML_CLOCK_SKEW_SECONDS=${JSON.stringify(raw)} is not a number of seconds`);
      skew = Number(raw.trim());
    } else if (typeof file["sdk.saml.clock_skew_seconds"] === "number") {
      skew = file["sdk.saml.clock_skew_seconds"];
    }
  }
  if (skew !== undefined && (!Number.isSafeInteger(skew) || skew < 0)) {
    throw new TypeError(`clock_skew_seconds must be a non-negative integer, not ${skew}`);
  }
  const am: Partial<AttributeMapping> = given.attributeMapping ?? {};
  const cfg: SamlConfig = {
    entityId: pick(given.entityId, "SVC_SAML_ENTITY_ID", "sdk.saml.entity_id", ""),
    acsUrl: pick(given.acsUrl, "SVC_SAML_ACS_URL", "sdk.saml.acs_url", ""),
    idpMetadataUrl: pick(given.idpMetadataUrl, "SVC_SAML_IDP_METADATA_URL", "sdk.saml.idp_metadata_url", ""),
    clockSkewSeconds: skew || DEFAULT_CLOCK_SKEW_SECONDS,
    attributeMapping: {
      email: pick(am.email, "SVC_SAML_ATTRIBUTE_EMAIL", "sdk.saml.attribute_mapping.email", DEFAULT_EMAIL_ATTRIBUTE),
      role: pick(am.role, "SVC_SAML_ATTRIBUTE_ROLE", "sdk.saml.attribute_mapping.role", "role"),
      tenant: pick(am.tenant, "SVC_SAML_ATTRIBUTE_TENANT", "sdk.saml.attribute_mapping.tenant", "tenant_id"),
    },
    cookieName: given.cookieName || env.SVC_SESSION_COOKIE_NAME || env.SVC_SAML_COOKIE_NAME ||
      str("sdk.session.cookie_name") || str("sdk.saml.cookie_name") || DEFAULT_COOKIE,
    pathPrefix: trimSlash(pick(given.pathPrefix, "SVC_SAML_PATH_PREFIX", "sdk.saml.path_prefix", DEFAULT_PREFIX)),
    gatewayUrl: trimSlash(given.gatewayUrl || env.SVC_SAML_URL || DEFAULT_GATEWAY_URL),
  };
  const oidc = given.oidcRedirectUrls ?? oidcRedirectUrlsOf(text, env, configFile ?? undefined);
  if (oidc.length > 0) cfg.oidcRedirectUrls = oidc;
  const key = given.spPrivateKeyPem || env.SVC_SAML_SP_PRIVATE_KEY_PEM;
  const cert = given.spCertificatePem || env.SVC_SAML_SP_CERTIFICATE_PEM;
  // Not enumerable: JSON.stringify, console.log and util.inspect of the
  // config never show the private key.
  if (key) Object.defineProperty(cfg, "spPrivateKeyPem", { value: key, enumerable: false, writable: true, configurable: true });
  if (cert) cfg.spCertificatePem = cert;
  return cfg;
}

/**
 * Whether a browser, not an API client, asks: text/html named in Accept
 * with a quality at least that of application/json (by its most specific
 * range) — the sidecar's rule for HTML refusal pages and sign-on redirects.
 */
export function prefersHtml(accept: string | undefined | null): boolean {
  let html = 0;
  let json = 0;
  let spec = 0; // 3 application/json, 2 application/*, 1 */*
  for (const part of (accept ?? "").split(",")) {
    const [rawType, ...params] = part.split(";");
    const type = (rawType ?? "").trim().toLowerCase();
    let q = 1;
    for (const p of params) {
      const [k, v] = p.split("=");
      if (v !== undefined && (k ?? "").trim().toLowerCase() === "q") {
        const n = Number(v.trim());
        q = v.trim() !== "" && n >= 0 && n <= 1 ? n : 0; // unreadable: 0, never wins
        break;
      }
    }
    const rank = type === "application/json" ? 3 : type === "application/*" ? 2 : type === "*/*" ? 1 : 0;
    if (type === "text/html") html = Math.max(html, q);
    else if (rank > spec) [spec, json] = [rank, q];
    else if (rank > 0 && rank === spec) json = Math.max(json, q);
  }
  return html > 0 && html >= json;
}

/**
 * Whether a refused request is a browser's to send to sign in: a GET or
 * HEAD, preferring text/html, without an Authorization header (which a
 * browser does not send on its own) — the sidecar's browser_redirect rule.
 */
export function wantsLoginRedirect(method: string | undefined, accept: string | undefined | null,
  authorization: string | undefined | null): boolean {
  const m = (method ?? "").toUpperCase();
  return (m === "GET" || m === "HEAD") && !authorization && prefersHtml(accept);
}

export interface LoginUrlOptions {
  /** Path prefix of the gateway's endpoints; default "/auth/saml". */
  prefix?: string;
  /** Origin of the gateway as the browser reaches it; default "" (same origin, through the proxy). */
  baseUrl?: string;
}

/**
 * The URL that starts SP-initiated sign-on and brings the browser back to
 * returnTo. A returnTo that is not a relative path on this site (an open
 * redirect) is replaced by "/".
 */
export function loginUrl(returnTo: string = "/", opts: LoginUrlOptions = {}): string {
  const prefix = trimSlash(opts.prefix ?? DEFAULT_PREFIX);
  const base = trimSlash(opts.baseUrl ?? "");
  return `${base}${prefix}/login?return_to=${encodeURIComponent(safeReturnTo(returnTo))}`;
}

/**
 * The session token in a Cookie header (default cookie svc_session), or "":
 * the cookie `__Host-<name>` when the header has one, else, unless
 * prefixedOnly, `<name>`. The gateway names its cookies `__Host-` wherever
 * they are Secure; an unprefixed one a sibling subdomain tossed in never
 * displaces it, and with prefixedOnly (sessionPrefixedOnly(saml): behind a
 * Secure acsUrl) it is not read at all.
 */
export function sessionToken(cookieHeader: string | undefined | null, name: string = DEFAULT_COOKIE,
  prefixedOnly = false): string {
  return sessionCookieValue(cookieHeader, name, prefixedOnly);
}

/**
 * returnTo when it is a relative path on this site ("/app?x=1"), else "/":
 * never a URL a browser would resolve to another origin.
 */
export function safeReturnTo(returnTo: string | undefined | null): string {
  const s = returnTo ?? "";
  if (!s.startsWith("/") || s.startsWith("//") || s.startsWith("/\\") || s.length > 2048) return "/";
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0;
    if (c < 0x20 || c === 0x7f || ch === "\\") return "/";
  }
  return s;
}

/** The gateway's answer to a JSON ACS request. */
export interface SamlToken {
  token: string;
  tokenType: string;
  expiresAt: Date;
}

/** A refusal of the gateway: {"error": "<code>", "message": "..."} with its status. */
export class SamlError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
    this.name = "SamlError";
  }
}

export interface ExchangeOptions {
  /** The gateway's URL; default SVC_SAML_URL, then http://127.0.0.1:7701. */
  gatewayUrl?: string;
  prefix?: string;
  /** Default 5000 ms: the gateway validates signatures and may fetch metadata. */
  timeoutMs?: number;
}

/**
 * Posts a SAMLResponse (base64, as the IdP sent it) to the gateway's ACS
 * asking for JSON, and returns the issued token. Refusals reject with
 * SamlError (status and code of the gateway; 503 "unavailable" when it
 * cannot be reached).
 */
export async function exchangeAssertion(samlResponse: string, opts: ExchangeOptions = {}): Promise<SamlToken> {
  const form = new URLSearchParams({ SAMLResponse: samlResponse });
  return postAcs(form.toString(), opts);
}

async function postAcs(form: string, opts: ExchangeOptions, cookie = "", setCookies: string[] = []): Promise<SamlToken> {
  const url = `${gatewayOf(opts)}${trimSlash(opts.prefix ?? DEFAULT_PREFIX)}/acs`;
  let res: Response;
  let text: string;
  const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded", accept: "application/json" };
  if (cookie) headers.cookie = cookie;
  try {
    res = await fetch(url, {
      method: "POST",
      headers,
      body: form,
      redirect: "manual",
      signal: AbortSignal.timeout(opts.timeoutMs ?? 5000),
    });
    text = await res.text();
    setCookies.push(...res.headers.getSetCookie());
  } catch (e) {
    throw new SamlError(503, "unavailable", `SAML gateway ${url} unavailable: ${e instanceof Error ? e.message : String(e)}`);
  }
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object") body = parsed as Record<string, unknown>;
  } catch {
    // handled below
  }
  if (res.status !== 200) {
    const code = typeof body.error === "string" ? body.error : "saml-refused";
    const message = typeof body.message === "string" ? body.message : `the gateway answered ${res.status}`;
    throw new SamlError(res.status >= 500 ? 503 : res.status, code, message);
  }
  const expiresAt = new Date(typeof body.expires_at === "string" ? body.expires_at : NaN);
  if (typeof body.token !== "string" || !body.token || Number.isNaN(expiresAt.getTime())) {
    throw new SamlError(502, "saml-bad-answer", `the answer of ${url} is not a token`);
  }
  return { token: body.token, tokenType: typeof body.token_type === "string" ? body.token_type : "Bearer", expiresAt };
}

/** The parts of an Express request samlAcs reads (the raw body stream). */
export interface AcsRequestLike extends AsyncIterable<unknown> {
  headers: Record<string, string | string[] | undefined>;
  secure?: boolean;
  body?: unknown;
}

/** The parts of an Express response samlAcs uses. */
export interface AcsResponseLike {
  status(code: number): this;
  set(field: Record<string, string>): this;
  cookie?: unknown;
  json(body: unknown): unknown;
  redirect(status: number, url: string): unknown;
  append(field: string, value: string): this;
}

export interface SamlAcsOptions extends ExchangeOptions {
  /**
   * Cookie to set, unprefixed; default "svc_session", the name the
   * middleware's sessionCookie option reads. A Secure cookie is set as
   * `__Host-<cookieName>` (Path=/, no Domain), as the gateway sets its own:
   * no sibling subdomain can plant or overwrite it.
   */
  cookieName?: string;
  /**
   * The gateway's request cookie, unprefixed, which its login sets and the
   * ACS needs to accept the answer to that sign-on: sdk.saml.cookie_name +
   * "_req"; default cookieName + "_req". samlAcs forwards it to the gateway
   * under both names, `__Host-` prefixed and plain; the gateway takes the
   * one its own rule names.
   */
  requestCookieName?: string;
  /**
   * Mark the cookie Secure; default true. Behind a proxy that terminates TLS
   * the request reaches the application over plain http (req.secure is
   * false), so the default does not look at it. `false` leaves Secure (and
   * so the `__Host-` prefix) out only for a request whose Host is a
   * loopback host (localhost, 127.0.0.0/8, [::1]): local development over
   * plain http. For any other host the cookie stays Secure.
   */
  secure?: boolean;
  /**
   * Path of a cookie that is not Secure; default "/". A Secure cookie is
   * `__Host-` prefixed, which requires Path=/.
   */
  cookiePath?: string;
}

/**
 * An Express route handler that completes the browser flow on the
 * application's origin: mount it at the ACS URL the IdP posts to, e.g.
 * `app.post("/auth/saml/acs", samlAcs())`. It forwards the form to the
 * gateway, sets the HttpOnly, Secure session cookie `__Host-<cookieName>`
 * (SameSite=Lax; see the secure option for plain http on loopback) for the
 * token it issued, and answers 303 to the RelayState return path (a
 * relative path on this site, else "/"). A refused assertion answers the gateway's status
 * with {"error","message"}; an unreachable gateway 503.
 *
 * An SP-initiated sign-on is bound to the browser that started it: the
 * gateway's login sets the request cookie (requestCookieName, `__Host-`
 * prefixed with Path=/ wherever the gateway's cookies are Secure, else
 * under the gateway's prefix), which samlAcs forwards with the form, and the gateway
 * refuses an answer the posting browser did not ask for
 * (saml-request-not-bound). The browser sends that cookie here only if the
 * login URL and this route share the host name (cookies ignore the port)
 * and the route lies under the prefix: serve the login through the
 * application's origin, or the gateway on the same host.
 *
 * It reads the raw urlencoded body itself; when a body parser already ran
 * (req.body is an object), that is used instead.
 */
export function samlAcs(opts: SamlAcsOptions = {}) {
  const cookieName = opts.cookieName ?? DEFAULT_COOKIE;
  return async function svcSamlAcs(req: AcsRequestLike, res: AcsResponseLike, next: (err?: unknown) => void): Promise<void> {
    try {
      let form: URLSearchParams;
      if (req.body && typeof req.body === "object" && !Buffer.isBuffer(req.body)) {
        form = new URLSearchParams(req.body as Record<string, string>);
      } else {
        const ct = String(req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
        if (ct !== "application/x-www-form-urlencoded") {
          res.status(400).set({ "cache-control": "no-store" })
            .json({ error: "saml-malformed", message: "the ACS takes a form post with a SAMLResponse field" });
          return;
        }
        const raw = await readBody(req, MAX_ACS_BODY);
        if (raw === null) {
          res.status(413).set({ "cache-control": "no-store" })
            .json({ error: "saml-too-large", message: `the request body is over ${MAX_ACS_BODY} bytes` });
          return;
        }
        form = new URLSearchParams(raw);
      }
      const relay = safeReturnTo(form.get("RelayState"));
      // The gateway binds an SP-initiated sign-on to the browser that
      // started it: the browser's request cookie goes with the form, and
      // the gateway's update of that cookie goes back to the browser.
      // It goes under both of its names: the gateway reads the prefixed one
      // wherever its cookies are Secure, the plain one elsewhere.
      const requestCookie = opts.requestCookieName ?? `${cookieName}_req`;
      const requestCookies = [HOST_COOKIE_PREFIX + requestCookie, requestCookie];
      const cookieHeader = req.headers.cookie;
      const header = Array.isArray(cookieHeader) ? cookieHeader.join("; ") : cookieHeader;
      const pending = requestCookies
        .map((name) => [name, cookieValue(header, name)])
        .filter(([, v]) => /^[\w.-]{1,1024}$/.test(v ?? "")) // request ids are base64url, joined by "."
        .map(([name, v]) => `${name}=${v}`)
        .join("; ");
      const gatewayCookies: string[] = [];
      let tok: SamlToken;
      try {
        tok = await postAcs(form.toString(), opts, pending, gatewayCookies);
      } catch (e) {
        if (e instanceof SamlError) {
          res.status(e.status).set({ "cache-control": "no-store" }).json({ error: e.code, message: e.message });
          return;
        }
        throw e;
      }
      const maxAge = Math.max(0, Math.floor((tok.expiresAt.getTime() - Date.now()) / 1000));
      const secure = opts.secure !== false || !loopbackHost(req.headers.host);
      const sessionName = secure ? HOST_COOKIE_PREFIX + cookieName : cookieName;
      const attrs = [`${sessionName}=${encodeURIComponent(tok.token)}`, `Path=${secure ? "/" : (opts.cookiePath ?? "/")}`,
        `Max-Age=${maxAge}`, `Expires=${tok.expiresAt.toUTCString()}`, "HttpOnly", "SameSite=Lax"];
      if (secure) attrs.push("Secure");
      for (const c of gatewayCookies) {
        if (requestCookies.some((n) => c.startsWith(`${n}=`))) res.append("Set-Cookie", c);
      }
      res.append("Set-Cookie", attrs.join("; "));
      // A session cookie from before the prefix goes, as at the gateway:
      // the IdP's cross-site POST does not show whether the browser has one.
      if (secure) {
        res.append("Set-Cookie", `${cookieName}=; Path=${opts.cookiePath ?? "/"}; Max-Age=0; ` +
          "Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; SameSite=Lax; Secure");
      }
      res.set({ "cache-control": "no-store" });
      res.redirect(303, relay);
    } catch (e) {
      next(e);
    }
  };
}

/**
 * Express middleware for browser routes: a browser's request (GET or HEAD
 * preferring text/html, see wantsLoginRedirect) carrying no bearer token,
 * API key or session cookie is redirected (302) to loginUrl with its own
 * URL as the return path. Every other request goes on to the
 * authentication middleware, which answers an API client 401 in JSON.
 * The session cookie is read as sessionToken reads it, with
 * sessionCookiePrefixedOnly as the middleware's option of that name (by
 * default, as there, prefixed only behind Secure gateways, gatewaySettings()): give
 * both the same, or a tossed unprefixed cookie keeps a browser from being
 * sent to sign in.
 */
export function samlLoginRedirect(opts: LoginUrlOptions & { cookieName?: string; sessionCookiePrefixedOnly?: boolean } = {}) {
  const cookieName = opts.cookieName ?? DEFAULT_COOKIE;
  const prefixedOnly = opts.sessionCookiePrefixedOnly ?? sessionPrefixedOnly(gatewaySettings());
  return function svcSamlLoginRedirect(req: { method?: string; headers: Record<string, string | string[] | undefined>;
    originalUrl?: string; url?: string }, res: { redirect(status: number, url: string): unknown }, next: () => void): void {
    const auth = req.headers.authorization;
    const cookie = req.headers.cookie;
    const accept = req.headers.accept;
    const xApiKey = req.headers["x-api-key"];
    if ((typeof auth === "string" && /^\s*bearer\s+\S/i.test(auth)) ||
      apiKey(Array.isArray(auth) ? auth.join(",") : auth, Array.isArray(xApiKey) ? xApiKey.join(", ") : xApiKey) ||
      sessionToken(Array.isArray(cookie) ? cookie.join("; ") : cookie, cookieName, prefixedOnly) ||
      !wantsLoginRedirect(req.method ?? "GET", Array.isArray(accept) ? accept.join(",") : accept,
        Array.isArray(auth) ? auth.join(",") : auth)) {
      next();
      return;
    }
    res.redirect(302, loginUrl(req.originalUrl ?? req.url ?? "/", opts));
  };
}

async function readBody(req: AsyncIterable<unknown>, limit: number): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    size += b.length;
    if (size > limit) return null;
    chunks.push(b);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function gatewayOf(opts: ExchangeOptions): string {
  return trimSlash(opts.gatewayUrl || process.env.SVC_SAML_URL || DEFAULT_GATEWAY_URL);
}

function trimSlash(s: string): string {
  return s.replace(/\/+$/, "");
}
