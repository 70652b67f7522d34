// How the middleware reads a request's credential, without a sidecar: the
// behaviour against the real sidecar is in behaviour.mjs.
import assert from "node:assert/strict";
import { test } from "node:test";

import { apiKey } from "@svc/sdk";
import { samlLoginRedirect } from "@svc/sdk/saml";

import { refusalOf, tokenOf } from "../dist/web.js";

test("apiKey reads a key by the rule of the sidecar's checks", () => {
  // [Authorization, X-Api-Key, key]; undefined is a header the request lacks.
  const cases = [
    [undefined, undefined, ""], [undefined, " svck_a_b ", "svck_a_b"], ["ApiKey svck_a_b", undefined, "svck_a_b"],
    ["apikey\tsvck_a_b ", "svck_other", "svck_a_b"], [" APIKEY  svck_a_b", undefined, "svck_a_b"],
    ["Bearer x", "svck_a_b", ""], ["", "svck_a_b", ""], ["ApiKey", undefined, ""], ["ApiKeyx y", undefined, ""],
    ["ApiKey ", "svck_a_b", ""], [null, "svck_a_b", "svck_a_b"],
  ];
  for (const [auth, x, want] of cases) assert.equal(apiKey(auth, x), want, `${auth}, ${x}`);
});

test("tokenOf: bearer token, else API key, else the session cookie", () => {
  const cookie = "svc_session=s";
  const cases = [
    [{ authorization: "Bearer t", xApiKey: "svck_a_b", cookie }, "t"],
    [{ authorization: "ApiKey svck_a_b", cookie }, "svck_a_b"],
    [{ xApiKey: "svck_a_b", cookie }, "svck_a_b"],
    [{ cookie }, "s"],
    [{ xApiKey: " ", cookie }, "s"],
    [{ authorization: "Basic x", xApiKey: "svck_a_b", cookie }, ""],
  ];
  for (const [src, want] of cases) assert.equal(tokenOf(src, "svc_session"), want, JSON.stringify(src));
});

test("a refused API key is challenged as ApiKey", () => {
  for (const reason of ["api-key-malformed", "api-key-unknown", "api-key-revoked", "api-key-expired"]) {
    const r = refusalOf(reason);
    assert.equal(r.status, 401, reason);
    assert.deepEqual(r.headers, { "www-authenticate": `ApiKey error="invalid_key", error_description="${reason}"` });
  }
});

test("samlLoginRedirect leaves a request with an API key to the middleware", () => {
  const redirect = samlLoginRedirect();
  for (const [headers, redirected] of [[{}, true], [{ "x-api-key": "svck_a_b" }, false]]) {
    let location = null;
    let passed = false;
    redirect({ method: "GET", url: "/page", headers: { accept: "text/html", ...headers } },
      { redirect: (_status, url) => (location = url) }, () => (passed = true));
    assert.deepEqual([location !== null, passed], [redirected, !redirected], JSON.stringify(headers));
  }
});
