// Fastify example. Run `make run` at the repository root, then:
//   cd sdk/typescript && npm ci && npm run build && node examples/fastify-app.mjs
//   curl -s localhost:8000/whoami -H 'Authorization: Bearer anything'
//   curl -s localhost:8000/orders/42 -H 'Authorization: Bearer anything'
import Fastify from "fastify";

import { SvcClient } from "@svc/sdk";
import { requireAction, svcFastify } from "@svc/sdk/fastify";

const app = Fastify();
// SVC_SIDECAR_URL (default http://localhost:7700), SVC_FAIL_MODE (default open), or svc.toml [sdk].
await app.register(svcFastify, { client: new SvcClient(), exclude: ["/healthz"] });

app.get("/healthz", async () => "ok\n");

// request.svcClaims: the verified claims, or null (development mode, fail-open).
app.get("/whoami", async (request) =>
  ({ claims: request.svcClaims, subject: request.svcDecision.subject, reason: request.svcDecision.reason }));

app.get("/orders/:id", { preHandler: requireAction("orders:read", { resourceIdParam: "id" }) }, async (request) =>
  ({ order: request.params.id, decision_id: request.svcDecision.decisionId, claims: request.svcClaims }));

const url = await app.listen({ port: Number(process.env.PORT ?? 8000), host: "127.0.0.1" });
console.log(`listening on ${url}`);
