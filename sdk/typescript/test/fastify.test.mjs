// @svc/sdk/fastify against the real sidecar.
import Fastify from "fastify";

import { requireAction, svcFastify } from "@svc/sdk/fastify";

import { middlewareBehaviour } from "./behaviour.mjs";

async function startFastify(client) {
  const app = Fastify();
  await app.register(svcFastify, { client, exclude: ["/healthz"] });
  app.get("/whoami", async (request) => ({ claims: request.svcClaims }));
  app.get("/healthz", async (request) => ({ claims: request.svcClaims }));
  // The plugin is not encapsulated: its hook covers /whoami above, which a
  // plugin confined to its own context would leave open.
  await app.register(async (child) => {
    child.get("/orders/:id", { preHandler: requireAction("orders:read", { resourceIdParam: "id" }) },
      async (request) => ({ claims: request.svcClaims, decision_id: request.svcDecision.decisionId }));
    child.get("/orders/:id/delete", { preHandler: requireAction("orders:delete", { resourceIdParam: "id" }) },
      async (request) => ({ claims: request.svcClaims, decision_id: request.svcDecision.decisionId }));
  });
  const url = await app.listen({ port: 0, host: "127.0.0.1" });
  return { url, close: () => app.close() };
}

middlewareBehaviour("fastify", startFastify);
