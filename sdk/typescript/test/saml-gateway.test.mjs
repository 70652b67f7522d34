// @svc/sdk/saml against the sidecar's real SAML gateway: SP-initiated
// login, a SAMLResponse signed by xmlsec1 (an independent XML-DSig signer)
// with a certificate made by openssl, posted to the application's ACS
// route (samlAcs), which trades it at the gateway for a token in the
// session cookie that the sidecar then verifies.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { inflateRawSync } from "node:zlib";

import express from "express";

import { SvcClient } from "@svc/sdk";
import { svcExpress } from "@svc/sdk/express";
import { samlAcs, samlLoginRedirect } from "@svc/sdk/saml";

import { CALL_TIMEOUT_MS, freeAddr, IdP, serve, Sidecar, TENANT } from "./harness.mjs";

const IDP_ENTITY = "https://idp.test/metadata";
const IDP_SSO = "https://idp.test/sso";
const BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
const EMAIL_ATTR = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress";

const x = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

// A SAML Response whose Assertion carries an enveloped-signature template
// for xmlsec1 to fill.
function responseTemplate({ inResponseTo, acsUrl, audience, nameId, attrs }) {
  const now = new Date();
  const iso = (d) => d.toISOString().replace(/\.\d+Z$/, "Z");
  const later = new Date(now.getTime() + 5 * 60_000);
  const aid = `_a${randomUUID()}`;
  const attributes = Object.entries(attrs).map(([name, v]) =>
    `<saml:Attribute Name="${x(name)}"><saml:AttributeValue>${x(v)}</saml:AttributeValue></saml:Attribute>`).join("");
  return `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="_r${randomUUID()}" Version="2.0" IssueInstant="${iso(now)}" Destination="${x(acsUrl)}" InResponseTo="${x(inResponseTo)}"><saml:Issuer>${IDP_ENTITY}</saml:Issuer><samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status><saml:Assertion ID="${aid}" Version="2.0" IssueInstant="${iso(now)}"><saml:Issuer>${IDP_ENTITY}</saml:Issuer><ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:SignedInfo><ds:CanonicalizationMethod Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/><ds:SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"/><ds:Reference URI="#${aid}"><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"/><ds:Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/></ds:Transforms><ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/><ds:DigestValue></ds:DigestValue></ds:Reference></ds:SignedInfo><ds:SignatureValue></ds:SignatureValue><ds:KeyInfo><ds:X509Data></ds:X509Data></ds:KeyInfo></ds:Signature><saml:Subject><saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress">${x(nameId)}</saml:NameID><saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData NotOnOrAfter="${iso(later)}" Recipient="${x(acsUrl)}" InResponseTo="${x(inResponseTo)}"/></saml:SubjectConfirmation></saml:Subject><saml:Conditions NotBefore="${iso(now)}" NotOnOrAfter="${iso(later)}"><saml:AudienceRestriction><saml:Audience>${x(audience)}</saml:Audience></saml:AudienceRestriction></saml:Conditions><saml:AuthnStatement AuthnInstant="${iso(now)}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement><saml:AttributeStatement>${attributes}</saml:AttributeStatement></saml:Assertion></samlp:Response>`;
}

/** The request cookie a gateway login set, as a Cookie header ("name=value"). */
function requestCookieOf(res) {
  const c = res.headers.getSetCookie().find((h) => h.startsWith("svc_session_req="));
  assert.ok(c, `no request cookie in ${res.headers.getSetCookie()}`);
  return c.split(";")[0];
}

describe("SAML browser flow against the sidecar's gateway", () => {
  let dir, idp, sidecar, gatewayUrl, server, appUrl;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "saml-"));
    execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=idp.test", "-days", "1",
      "-keyout", join(dir, "idp-key.pem"), "-out", join(dir, "idp-cert.pem")], { stdio: "ignore" });
    const certB64 = readFileSync(join(dir, "idp-cert.pem"), "utf8").replace(/-----[^-]+-----|\s/g, "");
    writeFileSync(join(dir, "idp-metadata.xml"), `<?xml version="1.0" encoding="UTF-8"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="${IDP_ENTITY}">
  <md:IDPSSODescriptor WantAuthnRequestsSigned="false" protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:KeyDescriptor use="signing"><ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>${certB64}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>
    <md:NameIDFormat>urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress</md:NameIDFormat>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${IDP_SSO}"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>
`);

    const samlAddr = await freeAddr();
    gatewayUrl = `http://${samlAddr}`;
    const app = express();
    let client;
    app.post("/auth/saml/acs", samlAcs({ gatewayUrl }));
    app.use("/app", samlLoginRedirect({ baseUrl: gatewayUrl }));
    app.use("/app", (req, res, next) => svcExpress({ client, sessionCookie: "svc_session" })(req, res, next));
    app.get("/app/page", (req, res) => res.json({ claims: req.svcClaims }));
    server = await serve(app);
    appUrl = server.url;

    idp = await IdP.start();
    sidecar = await Sidecar.start(idp, {
      SVC_SAML_ADDR: samlAddr,
      SVC_SAML_ENTITY_ID: `${appUrl}/auth/saml/metadata`,
      SVC_SAML_ACS_URL: `${appUrl}/auth/saml/acs`,
      SVC_SAML_IDP_METADATA_FILE: join(dir, "idp-metadata.xml"),
    });
    client = new SvcClient({ sidecarUrl: sidecar.url, failMode: "closed", timeoutMs: CALL_TIMEOUT_MS });
  });

  after(async () => {
    await server?.close();
    await sidecar?.stop();
    idp?.close();
  });

  function sign(xml) {
    writeFileSync(join(dir, "in.xml"), xml);
    execFileSync("xmlsec1", ["--sign", "--privkey-pem", `${join(dir, "idp-key.pem")},${join(dir, "idp-cert.pem")}`,
      "--id-attr:ID", "urn:oasis:names:tc:SAML:2.0:assertion:Assertion", "--output", join(dir, "out.xml"), join(dir, "in.xml")]);
    return readFileSync(join(dir, "out.xml"));
  }

  test("login, ACS through samlAcs, cookie, request verified by the sidecar", async () => {
    // 1. A page without a session goes to the gateway's login with its path.
    //    An API client (no text/html preferred) gets the 401 instead.
    let r = await fetch(`${appUrl}/app/page?tab=2`, { redirect: "manual", headers: { accept: "application/json" } });
    assert.equal(r.status, 401);
    assert.equal((await r.json()).reason, "token-missing");
    r = await fetch(`${appUrl}/app/page?tab=2`, { method: "POST", redirect: "manual", headers: { accept: "text/html" } });
    assert.equal(r.status, 401, "a POST is not repeated after sign-on: no redirect");
    r = await fetch(`${appUrl}/app/page?tab=2`, { redirect: "manual", headers: { accept: BROWSER_ACCEPT } });
    assert.equal(r.status, 302);
    const login = r.headers.get("location");
    assert.equal(login, `${gatewayUrl}/auth/saml/login?return_to=%2Fapp%2Fpage%3Ftab%3D2`);

    // 2. The gateway redirects to the IdP with an AuthnRequest; the return
    //    path travels as RelayState.
    r = await fetch(login, { redirect: "manual" });
    assert.equal(r.status, 302, await r.clone().text());
    // The request cookie binds the sign-on to this browser; the browser
    // sends it to the application's ACS on the same host (cookies ignore
    // the port), as this test does.
    const requestCookie = requestCookieOf(r);
    const toIdP = new URL(r.headers.get("location"));
    assert.equal(`${toIdP.origin}${toIdP.pathname}`, IDP_SSO);
    const relayState = toIdP.searchParams.get("RelayState");
    assert.equal(relayState, "/app/page?tab=2");
    const authnRequest = inflateRawSync(Buffer.from(toIdP.searchParams.get("SAMLRequest"), "base64")).toString();
    const requestId = /\bID="([^"]+)"/.exec(authnRequest)[1];

    // 3. The IdP's signed response reaches the application's ACS.
    const signedResponse = sign(responseTemplate({
      inResponseTo: requestId, acsUrl: `${appUrl}/auth/saml/acs`, audience: `${appUrl}/auth/saml/metadata`,
      nameId: "alice@example.com", attrs: { [EMAIL_ATTR]: "alice@example.com", role: "viewer", tenant_id: TENANT },
    })).toString("base64");
    const post = () => fetch(`${appUrl}/auth/saml/acs`, {
      method: "POST", redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie: requestCookie },
      body: new URLSearchParams({ SAMLResponse: signedResponse, RelayState: relayState }),
    });
    r = await post();
    assert.equal(r.status, 303, await r.clone().text());
    assert.equal(r.headers.get("location"), "/app/page?tab=2");
    const cookies = r.headers.getSetCookie();
    const setCookie = cookies.find((c) => c.startsWith("__Host-svc_session="));
    assert.match(setCookie, /^__Host-svc_session=[\w-]+\.[\w-]+\.[\w-]+; Path=\/; Max-Age=\d+; .*HttpOnly; SameSite=Lax; Secure$/);
    // The answered sign-on is removed from the request cookie (cleared).
    assert.ok(cookies.some((c) => /^svc_session_req=; Path=\/auth\/saml; .*Max-Age=0/.test(c)), cookies.join("\n"));

    // 4. Back on the page: the sidecar verifies the gateway's token.
    r = await fetch(`${appUrl}/app/page?tab=2`, { headers: { cookie: setCookie.split(";")[0] }, redirect: "manual" });
    assert.equal(r.status, 200);
    const { claims } = await r.json();
    assert.equal(claims.sub, "alice@example.com");
    assert.equal(claims.email, "alice@example.com");
    assert.equal(claims.tenant_id, TENANT);
    assert.deepEqual(claims.roles, ["viewer"]);

    // 5. The same response again is a replay: refused with the gateway's
    //    code, no cookie.
    r = await post();
    assert.ok(r.status >= 400 && r.status < 500, `replay answered ${r.status}`);
    assert.equal(r.headers.get("set-cookie"), null);
    const refusal = await r.json();
    assert.equal(typeof refusal.error, "string");
    assert.match(refusal.error, /replay/, JSON.stringify(refusal));
  });

  test("an answer posted by a browser that did not start the sign-on is refused", async () => {
    // Login CSRF: the attacker's own sign-on, answered by the IdP, posted
    // from the victim's browser (no request cookie, or the victim's own).
    const r0 = await fetch(`${gatewayUrl}/auth/saml/login?return_to=%2F`, { redirect: "manual" });
    const toIdP = new URL(r0.headers.get("location"));
    const requestId = /\bID="([^"]+)"/.exec(
      inflateRawSync(Buffer.from(toIdP.searchParams.get("SAMLRequest"), "base64")).toString())[1];
    const victim = await fetch(`${gatewayUrl}/auth/saml/login?return_to=%2F`, { redirect: "manual" });
    const signedResponse = sign(responseTemplate({
      inResponseTo: requestId, acsUrl: `${appUrl}/auth/saml/acs`, audience: `${appUrl}/auth/saml/metadata`,
      nameId: "mallory@example.com", attrs: { role: "viewer", tenant_id: TENANT },
    })).toString("base64");
    const r = await fetch(`${appUrl}/auth/saml/acs`, {
      method: "POST", redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie: requestCookieOf(victim) },
      body: new URLSearchParams({ SAMLResponse: signedResponse, RelayState: "/" }),
    });
    assert.equal(r.status, 401);
    assert.deepEqual(r.headers.getSetCookie(), []);
    assert.equal((await r.json()).error, "saml-request-not-bound");
  });

  test("a response signed by another key is refused", async () => {
    const r0 = await fetch(`${gatewayUrl}/auth/saml/login?return_to=%2F`, { redirect: "manual" });
    const toIdP = new URL(r0.headers.get("location"));
    const requestId = /\bID="([^"]+)"/.exec(
      inflateRawSync(Buffer.from(toIdP.searchParams.get("SAMLRequest"), "base64")).toString())[1];
    const xml = responseTemplate({
      inResponseTo: requestId, acsUrl: `${appUrl}/auth/saml/acs`, audience: `${appUrl}/auth/saml/metadata`,
      nameId: "mallory@example.com", attrs: { role: "admin", tenant_id: TENANT },
    });
    execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=other", "-days", "1",
      "-keyout", join(dir, "other-key.pem"), "-out", join(dir, "other-cert.pem")], { stdio: "ignore" });
    writeFileSync(join(dir, "in2.xml"), xml);
    execFileSync("xmlsec1", ["--sign", "--privkey-pem", `${join(dir, "other-key.pem")},${join(dir, "other-cert.pem")}`,
      "--id-attr:ID", "urn:oasis:names:tc:SAML:2.0:assertion:Assertion", "--output", join(dir, "out2.xml"), join(dir, "in2.xml")]);
    const r = await fetch(`${appUrl}/auth/saml/acs`, {
      method: "POST", redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ SAMLResponse: readFileSync(join(dir, "out2.xml")).toString("base64"), RelayState: "/" }),
    });
    assert.ok(r.status >= 400 && r.status < 500, `answered ${r.status}`);
    assert.equal(r.headers.get("set-cookie"), null);
    assert.match((await r.json()).error, /signature/);
  });
});
