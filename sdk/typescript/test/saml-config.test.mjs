// @svc/sdk/saml: the SamlConfig fields (spec SamlConfig, camelCase) as
// resolveSamlConfig reads them, and the browser rule of the sign-on redirect.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { inspect } from "node:util";
import { describe, test } from "node:test";

import { prefersHtml, resolveSamlConfig, sessionPrefixedOnly, wantsLoginRedirect } from "@svc/sdk/saml";

const EMAIL = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress";
// The svc.toml both SDKs' configuration tests read.
const SHARED_SVC_TOML = fileURLToPath(new URL("../../testdata/saml/svc.toml", import.meta.url));

function file(text) {
  const p = join(mkdtempSync(join(tmpdir(), "samlcfg-")), "svc.toml");
  writeFileSync(p, text);
  return p;
}

describe("resolveSamlConfig", () => {
  test("defaults are the sidecar's", () => {
    assert.deepEqual(resolveSamlConfig({}, {}, null), {
      entityId: "", acsUrl: "", idpMetadataUrl: "", clockSkewSeconds: 30,
      attributeMapping: { email: EMAIL, role: "role", tenant: "tenant_id" },
      cookieName: "svc_session", pathPrefix: "/auth/saml", gatewayUrl: "http://127.0.0.1:7701",
    });
  });

  test("svc.toml [sdk.saml], then the environment, then the options", () => {
    const p = SHARED_SVC_TOML;
    const fromFile = resolveSamlConfig({}, {}, p);
    assert.equal(fromFile.entityId, "https://app.example/saml/metadata");
    assert.equal(fromFile.acsUrl, "https://app.example/auth/saml/acs");
    assert.equal(fromFile.idpMetadataUrl, "https://idp.example/metadata");
    assert.equal(fromFile.clockSkewSeconds, 45);
    assert.deepEqual(fromFile.attributeMapping, { email: EMAIL, role: "groups", tenant: "org" });
    assert.equal(fromFile.cookieName, "app_session");
    assert.equal(fromFile.pathPrefix, "/sso");
    assert.equal(fromFile.spPrivateKeyPem, undefined);
    assert.equal(sessionPrefixedOnly(fromFile), true, "an https acsUrl: the gateway's cookies are Secure");

    const env = { SVC_SAML_COOKIE_NAME: "env_session", SVC_SAML_CLOCK_SKEW_SECONDS: "10", SVC_SAML_URL: "http://gw:7701/",
      SVC_SAML_SP_PRIVATE_KEY_PEM: "-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n" };
    const fromEnv = resolveSamlConfig({}, env, p);
    assert.equal(fromEnv.cookieName, "env_session");
    assert.equal(fromEnv.clockSkewSeconds, 10);
    assert.equal(fromEnv.gatewayUrl, "http://gw:7701");
    assert.equal(fromEnv.spPrivateKeyPem, env.SVC_SAML_SP_PRIVATE_KEY_PEM);
    // The key is readable but never printed.
    assert.doesNotMatch(JSON.stringify(fromEnv), /secret/);
    assert.doesNotMatch(inspect(fromEnv), /secret/);

    const given = resolveSamlConfig({ cookieName: "opt_session", attributeMapping: { role: "r" } }, env, p);
    assert.equal(given.cookieName, "opt_session");
    assert.deepEqual(given.attributeMapping, { email: EMAIL, role: "r", tenant: "org" });
  });

  test("the session cookie's name: [sdk.session] first, as the sidecar reads it", () => {
    const p = file('[sdk.session]\ncookie_name = "sess"\n\n[sdk.saml]\ncookie_name = "old"\n');
    assert.equal(resolveSamlConfig({}, {}, p).cookieName, "sess");
    assert.equal(resolveSamlConfig({}, {}, file('[sdk.saml]\ncookie_name = "old"\n')).cookieName, "old");
    assert.equal(resolveSamlConfig({}, { SVC_SAML_COOKIE_NAME: "env_old" }, p).cookieName, "env_old");
    assert.equal(resolveSamlConfig({}, { SVC_SESSION_COOKIE_NAME: "env_new", SVC_SAML_COOKIE_NAME: "env_old" }, p).cookieName,
      "env_new");
    assert.equal(resolveSamlConfig({ cookieName: "opt" }, { SVC_SESSION_COOKIE_NAME: "env_new" }, p).cookieName, "opt");
  });

  test("the OpenID Connect gateway's redirect URLs decide with acsUrl", () => {
    const env = { SVC_OIDC_ISSUER_URL: "https://idp.example", SVC_OIDC_REDIRECT_URL: "https://app.example/auth/oidc/callback" };
    let c = resolveSamlConfig({}, env, null);
    assert.deepEqual([c.acsUrl, c.oidcRedirectUrls], ["", ["https://app.example/auth/oidc/callback"]]);
    assert.equal(sessionPrefixedOnly(c), true, "an https redirect_url: the gateway's cookies are Secure");
    // Each [[sdk.oidc.providers]] entry's redirect_url defaults to [sdk.oidc]'s.
    c = resolveSamlConfig({}, {}, file('[sdk.oidc]\nissuer_url = "https://idp.example"\n' +
      'redirect_url = "https://app.example/auth/oidc/callback"\n\n[[sdk.oidc.providers]]\nname = "b"\ntenant = "t"\n' +
      'issuer_url = "https://idp-b.example"\n\n[[sdk.oidc.providers]]\nname = "dev"\ntenant = "t2"\n' +
      'redirect_url = "http://127.0.0.1:8080/auth/oidc/callback"\n'));
    assert.deepEqual(c.oidcRedirectUrls, ["https://app.example/auth/oidc/callback", "https://app.example/auth/oidc/callback",
      "http://127.0.0.1:8080/auth/oidc/callback"]);
    assert.equal(sessionPrefixedOnly(c), false, "one gateway on loopback http sets unprefixed cookies");
    // Without an issuer_url [sdk.oidc]'s own keys are no provider.
    c = resolveSamlConfig({}, {}, file('[sdk.oidc]\nredirect_url = "https://app.example/auth/oidc/callback"\n'));
    assert.equal(c.oidcRedirectUrls, undefined);
    assert.equal(sessionPrefixedOnly(c), false);
    assert.equal(sessionPrefixedOnly({ acsUrl: "https://app.example/auth/saml/acs", oidcRedirectUrls: ["http://[::1]:8080/cb"] }), false);
  });

  test("bad values are errors naming the key", () => {
    assert.throws(() => resolveSamlConfig({}, {}, file("[sdk.saml]\nclock_skew_seconds = \"30\"\n")),
      /svc\.toml:2: sdk\.saml\.clock_skew_seconds must be an integer/);
    assert.throws(() => resolveSamlConfig({}, {}, file("[sdk]\nsaml = { cookie_name = \"x\" }\n")),
      /sdk\.saml is read as a \[sdk\.saml\] table/);
    assert.throws(() => resolveSamlConfig({}, { SVC_SAML_CLOCK_SKEW_SECONDS: "-1" }, null),
      /SVC_SAML_CLOCK_SKEW_SECONDS="-1" is not a number of seconds/);
    assert.equal(resolveSamlConfig({}, {}, join(tmpdir(), "no-such-dir-svc", "svc.toml")).cookieName, "svc_session");
  });
});

describe("untrusted text never breaks the readers", () => {
  // A seeded generator: a failure names the seed that reproduces it.
  function rng(seed) {
    let x = seed >>> 0 || 1;
    return () => ((x ^= x << 13, x ^= x >>> 17, x ^= x << 5) >>> 0) / 2 ** 32;
  }
  const SEED_DOC = '[sdk]\nfail_mode = "closed"\n[sdk.saml]\ncookie_name = "a"\nclock_skew_seconds = 1_0\n' +
    "[sdk.saml.attribute_mapping]\nrole = 'r' # c\nx = [1, {a = \"\"\"m\"\"\"}]\n";
  const ALPHABET = ['"', "'", "[", "]", "{", "}", "=", ".", "#", "\n", "\\", " ", "_", "1", "a", "-", "\u00e9", "\r"];

  test("svc.toml: a value or a TypeError naming the file", async () => {
    const { tomlKeysOf } = await import("../dist/config.js");
    const wanted = { "sdk.saml.cookie_name": "string", "sdk.saml.clock_skew_seconds": "integer",
      "sdk.saml.attribute_mapping.role": "string" };
    for (let seed = 1; seed <= 3000; seed++) {
      const r = rng(seed);
      const chars = [...SEED_DOC];
      for (let n = 1 + Math.floor(r() * 4); n > 0; n--) {
        const at = Math.floor(r() * (chars.length + 1));
        const op = r();
        const c = ALPHABET[Math.floor(r() * ALPHABET.length)];
        if (op < 0.4) chars.splice(at, 1);
        else if (op < 0.8) chars.splice(at, 0, c);
        else chars[at] = c;
      }
      const text = chars.join("");
      try {
        const out = tomlKeysOf(text, wanted, "svc.toml");
        for (const [k, v] of Object.entries(out)) {
          assert.equal(typeof v, wanted[k] === "integer" ? "number" : "string", `seed ${seed}: ${k}`);
        }
      } catch (e) {
        assert.ok(e instanceof TypeError && e.message.startsWith("svc.toml:"), `seed ${seed}: ${e}\n${text}`);
      }
    }
  });

  test("Accept headers", () => {
    for (let seed = 1; seed <= 3000; seed++) {
      const r = rng(seed);
      let s = "";
      for (let n = Math.floor(r() * 40); n > 0; n--) s += "text/html;q=0.,*/ajson\u0000"[Math.floor(r() * 24)];
      assert.equal(typeof prefersHtml(s), "boolean", `seed ${seed}`);
    }
  });
});

describe("the browser rule", () => {
  test("prefersHtml", () => {
    const cases = [
      ["text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", true], // Chromium, Firefox
      ["text/html", true],
      ["application/json", false],
      ["*/*", false],
      ["", false],
      [undefined, false],
      ["application/json, text/html", true], // equal weight: html
      ["text/html;q=0.5, application/json", false],
      ["text/html;q=0.5, */*", false],
      ["text/html;q=0.5, application/*;q=0.4, */*", true], // application/* is more specific than */*
      ["text/html;q=abc", false],
      ["text/html;q=2", false],
    ];
    for (const [accept, want] of cases) assert.equal(prefersHtml(accept), want, String(accept));
  });

  test("wantsLoginRedirect: GET/HEAD, preferring text/html, no Authorization", () => {
    assert.equal(wantsLoginRedirect("GET", "text/html", undefined), true);
    assert.equal(wantsLoginRedirect("head", "text/html", undefined), true);
    assert.equal(wantsLoginRedirect("POST", "text/html", undefined), false);
    assert.equal(wantsLoginRedirect("GET", "application/json", undefined), false);
    assert.equal(wantsLoginRedirect("GET", "text/html", "Bearer x"), false);
  });
});
