// Express example. Run `make run` at the repository root, then:
//   cd sdk/typescript && npm ci && npm run build && node examples/express-app.mjs
//   curl -s localhost:8000/whoami -H 'Authorization: Bearer anything'
//   curl -s localhost:8000/orders/42 -H 'Authorization: Bearer anything'
//   curl -si localhost:8000/app -H 'Accept: text/html' | grep -i location   # a browser: sent to sign in
import express from "express";

import { SvcClient } from "@svc/sdk";
import { requireAction, svcExpress } from "@svc/sdk/express";
import { samlAcs, samlLoginRedirect } from "@svc/sdk/saml";

// SVC_SIDECAR_URL (default http://localhost:7700), SVC_FAIL_MODE (default open), or svc.toml [sdk].
const client = new SvcClient();
const app = express();

app.get("/healthz", (req, res) => res.send("ok\n"));

// Browser pages signed in through the SAML gateway (sidecar.saml_addr): the
// IdP posts to this origin's ACS, which trades the assertion for a token in
// the Secure __Host-svc_session cookie; browsers (GET/HEAD preferring
// text/html) without it go to the gateway's login, API clients get the 401.
// Only that name is read: an unprefixed svc_session can only be one a
// sibling subdomain tossed in.
app.post("/auth/saml/acs", samlAcs({ gatewayUrl: process.env.SVC_SAML_URL ?? "http://127.0.0.1:7701" }));
app.use("/app", samlLoginRedirect({ sessionCookiePrefixedOnly: true }));

app.use(svcExpress({ client, exclude: ["/healthz", "/auth/saml/*"], sessionCookie: "svc_session",
  sessionCookiePrefixedOnly: true }));

// req.svcClaims: the verified claims, or null (development mode, fail-open).
app.get("/whoami", (req, res) =>
  res.json({ claims: req.svcClaims, subject: req.svcDecision.subject, reason: req.svcDecision.reason }));

app.get("/orders/:id", requireAction("orders:read", { resourceIdParam: "id" }), (req, res) =>
  res.json({ order: req.params.id, decision_id: req.svcDecision.decisionId, claims: req.svcClaims }));

app.get("/app", (req, res) => res.send(`signed in as ${req.svcDecision.subject}\n`));

const port = Number(process.env.PORT ?? 8000);
app.listen(port, "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${port}`));
