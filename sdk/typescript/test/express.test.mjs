// @svc/sdk/express against the real sidecar.
import express from "express";

import { requireAction, svcExpress } from "@svc/sdk/express";

import { middlewareBehaviour } from "./behaviour.mjs";
import { serve } from "./harness.mjs";

export async function startExpress(client) {
  const app = express();
  app.use(svcExpress({ client, exclude: ["/healthz"] }));
  app.get("/whoami", (req, res) => res.json({ claims: req.svcClaims }));
  app.get("/healthz", (req, res) => res.json({ claims: req.svcClaims }));
  app.get("/orders/:id", requireAction("orders:read", { resourceIdParam: "id" }),
    (req, res) => res.json({ claims: req.svcClaims, decision_id: req.svcDecision.decisionId }));
  app.get("/orders/:id/delete", requireAction("orders:delete", { resourceIdParam: "id" }),
    (req, res) => res.json({ claims: req.svcClaims, decision_id: req.svcDecision.decisionId }));
  return serve(app);
}

middlewareBehaviour("express", startExpress);
