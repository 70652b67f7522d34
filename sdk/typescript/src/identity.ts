/**
 * Verifies the identity token the sidecar hands the upstream of every
 * allowed request (X-Svc-Identity, with identity_token configured) against
 * the sidecar's keys at /.well-known/jwks.json, with node:crypto only. A
 * service behind a proxy that asked the sidecar has its decision in that
 * token: svcIdentityExpress admits a request on it alone, without calling
 * the sidecar.
 *
 *     import express from "express";
 *     import { IdentityVerifier, svcIdentityExpress } from "@svc/sdk/identity";
 *
 *     const verifier = new IdentityVerifier({
 *       jwksUrl: "http://127.0.0.1:7700/.well-known/jwks.json",
 *       audience: "orders.internal",
 *     });
 *     app.use(svcIdentityExpress({ verifier }));
 *     app.get("/orders/:id", (req, res) => res.json({ sub: req.svcClaims?.sub }));
 */

import { createPublicKey, type JsonWebKey, type KeyObject, verify } from "node:crypto";

import { REFUSAL_HEADERS, type Refusal } from "./web.js";

/** The header carrying the identity token. */
export const IDENTITY_HEADER = "x-svc-identity";

export interface IdentityVerifierOptions {
  /** The sidecar's key set, such as "http://127.0.0.1:7700/.well-known/jwks.json". */
  jwksUrl: string;
  /** This service as the sidecar names it in aud (the Host the proxy forwards); unset accepts any audience. */
  audience?: string;
  /** When set, the iss claim must be this (the sidecar's sdk.service_name). */
  issuer?: string;
  /** How long a fetched key set is used, in ms; default 60 000. */
  refreshMs?: number;
  /** Clock skew tolerated on exp and nbf, in seconds; default 5. */
  skewSeconds?: number;
}

/** A refused identity token, with the reason code the Go SDK gives. */
export class IdentityError extends Error {
  constructor(readonly reason: string, message: string) {
    super(message);
    this.name = "IdentityError";
  }
}

/** A token of an unknown key fetches the set again at most this often. */
const MIN_REFETCH_MS = 5_000;

/** Verifies identity tokens; share one per sidecar. */
export class IdentityVerifier {
  readonly #opts: Required<Omit<IdentityVerifierOptions, "audience" | "issuer">> & IdentityVerifierOptions;
  #keys: Map<string, KeyObject> | null = null;
  #fetched = 0;

  constructor(opts: IdentityVerifierOptions) {
    if (!opts.jwksUrl) throw new Error("IdentityVerifier: jwksUrl is required");
    this.#opts = { refreshMs: 60_000, skewSeconds: 5, ...opts };
  }

  /** Verifies token and returns its claims; throws IdentityError when it is refused. */
  async verify(token: string | undefined): Promise<Record<string, unknown>> {
    if (!token) throw new IdentityError("token-missing", "no identity token");
    const parts = token.split(".");
    if (parts.length !== 3) throw new IdentityError("token-malformed", "not a JWT");
    let header: { alg?: string; kid?: string };
    let claims: Record<string, unknown>;
    try {
      header = JSON.parse(Buffer.from(parts[0]!, "base64url").toString("utf8"));
      claims = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8"));
    } catch {
      throw new IdentityError("token-malformed", "not a JWT");
    }
    if (header.alg !== "ES256" || !header.kid) throw new IdentityError("signature-invalid", "not an ES256 token with a kid");
    let key = (await this.#keySet(false)).get(header.kid);
    if (!key) key = (await this.#keySet(true)).get(header.kid);
    const signed = Buffer.from(`${parts[0]}.${parts[1]}`);
    if (!key || !verify("sha256", signed, { key, dsaEncoding: "ieee-p1363" }, Buffer.from(parts[2]!, "base64url"))) {
      throw new IdentityError("signature-invalid", "the token does not verify against the sidecar's keys");
    }
    const now = Date.now() / 1000;
    const skew = this.#opts.skewSeconds;
    if (typeof claims.exp !== "number" || now > claims.exp + skew) throw new IdentityError("token-expired", "identity token expired");
    if (typeof claims.nbf === "number" && now < claims.nbf - skew) {
      throw new IdentityError("token-not-yet-valid", "identity token not yet valid");
    }
    const aud = this.#opts.audience;
    if (aud !== undefined && !(claims.aud === aud || (Array.isArray(claims.aud) && claims.aud.includes(aud)))) {
      throw new IdentityError("audience-mismatch", "identity token is for another audience");
    }
    if (this.#opts.issuer !== undefined && claims.iss !== this.#opts.issuer) {
      throw new IdentityError("issuer-mismatch", "identity token of another issuer");
    }
    return claims;
  }

  async #keySet(refetch: boolean): Promise<Map<string, KeyObject>> {
    const age = Date.now() - this.#fetched;
    if (this.#keys && (refetch ? age < MIN_REFETCH_MS : age < this.#opts.refreshMs)) return this.#keys;
    try {
      const r = await fetch(this.#opts.jwksUrl, { signal: AbortSignal.timeout(5_000) });
      if (r.status !== 200) throw new Error(`status ${r.status}`);
      const doc = (await r.json()) as { keys?: (JsonWebKey & { kid?: string })[] };
      const keys = new Map<string, KeyObject>();
      for (const jwk of doc.keys ?? []) {
        if (jwk.kid && jwk.kty === "EC" && jwk.crv === "P-256") keys.set(jwk.kid, createPublicKey({ key: jwk, format: "jwk" }));
      }
      this.#keys = keys;
      this.#fetched = Date.now();
    } catch {
      if (!this.#keys) throw new IdentityError("jwks-unavailable", "the sidecar's identity keys could not be fetched");
      // The keys of a moment ago still verify; try again in MIN_REFETCH_MS.
      this.#fetched = Date.now() - this.#opts.refreshMs + MIN_REFETCH_MS;
    }
    return this.#keys;
  }
}

/** The refusal of a token verify threw on: 401 with a challenge, or 503 without keys. */
export function identityRefusal(err: unknown): Refusal {
  const reason = err instanceof IdentityError ? err.reason : "signature-invalid";
  if (reason === "jwks-unavailable") {
    return { status: 503, headers: {}, body: { allow: false, deny_reasons: [], reason } };
  }
  const challenge = reason === "token-missing" ? "Bearer" : `Bearer error="invalid_token", error_description="${reason}"`;
  return { status: 401, headers: { "www-authenticate": challenge }, body: { allow: false, deny_reasons: [], reason } };
}

interface RequestLike {
  headers: Record<string, string | string[] | undefined>;
  svcClaims?: Record<string, unknown> | null;
}

interface ResponseLike {
  status(code: number): this;
  set(field: Record<string, string>): this;
  json(body: unknown): unknown;
}

/** Express middleware: admits a request on its X-Svc-Identity alone and sets req.svcClaims. */
export function svcIdentityExpress(opts: { verifier: IdentityVerifier }) {
  return function svcIdentity(req: RequestLike, res: ResponseLike, next: (err?: unknown) => void): void {
    const v = req.headers[IDENTITY_HEADER];
    opts.verifier.verify(Array.isArray(v) ? v[0] : v).then(
      (claims) => {
        req.svcClaims = claims;
        next();
      },
      (err: unknown) => {
        const r = identityRefusal(err);
        res.status(r.status).set({ ...REFUSAL_HEADERS, ...r.headers }).json(r.body);
      },
    );
  };
}
