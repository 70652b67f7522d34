// Compiled by `npm run typecheck` (never run): the published declarations,
// reached through the package's exports, fit Express and Fastify as an
// application would use them.
import express from "express";
import Fastify from "fastify";

import { type Decision, type Plan, prismaWhere, type PrismaWhere, SidecarUnavailableError, SvcClient, type TokenDecision,
  toSql } from "@svc/sdk";
import { requireAction as expressAction, svcExpress } from "@svc/sdk/express";
import { requireAction as fastifyAction, svcFastify } from "@svc/sdk/fastify";
import { exchangeAssertion, loginUrl, resolveSamlConfig, samlAcs, samlLoginRedirect, sessionPrefixedOnly,
  sessionToken } from "@svc/sdk/saml";

const client = new SvcClient({ sidecarUrl: "http://localhost:7700", failMode: "closed", timeoutMs: 500 });

export async function direct(token: string): Promise<string> {
  const t: TokenDecision = await client.validateToken(token);
  const d: Decision = await client.authorize(token, "orders:read", { resourceId: "42" });
  try {
    await client.validateToken(token);
  } catch (e) {
    if (e instanceof SidecarUnavailableError) return e.reason;
  }
  return `${t.allowed} ${String(t.claims?.sub)} ${d.allow} ${d.denyReasons.join(",")} ${d.decisionId}`;
}

export function expressApp(): express.Express {
  const app = express();
  app.post("/auth/saml/acs", samlAcs({ gatewayUrl: "http://127.0.0.1:7701" }));
  const saml = resolveSamlConfig();
  app.use("/app", samlLoginRedirect({ cookieName: saml.cookieName, sessionCookiePrefixedOnly: sessionPrefixedOnly(saml) }));
  app.use("/app", svcExpress({ client, saml }));
  app.use(svcExpress({ client, exclude: ["/healthz"], sessionCookie: "svc_session", sessionCookiePrefixedOnly: true }));
  app.get("/orders/:id", expressAction("orders:read", { resourceIdParam: "id" }), (req, res) => {
    const claims: Record<string, unknown> | null | undefined = req.svcClaims;
    res.json({ claims, decision: req.svcDecision?.reason });
  });
  return app;
}

export async function fastifyApp() {
  const app = Fastify();
  await app.register(svcFastify, { client, exclude: ["/healthz"], saml: resolveSamlConfig() });
  app.get("/orders/:id", { preHandler: fastifyAction("orders:read", { resourceIdParam: "id" }) }, async (request) => {
    const claims: Record<string, unknown> | null = request.svcClaims;
    return { claims, reason: request.svcDecision?.reason };
  });
  return app;
}

export async function saml(cookie: string): Promise<string> {
  const t = await exchangeAssertion("PHNhbWw+", { gatewayUrl: "http://127.0.0.1:7701" });
  return loginUrl("/app") + sessionToken(cookie) + sessionToken(cookie, "svc_session", true) + t.token + t.expiresAt.toISOString();
}

export async function listFilter(token: string): Promise<[string, unknown[], PrismaWhere]> {
  const plan: Plan = await client.planResources("orders:read", "orders", { token, dialect: "postgres" });
  const local = toSql(plan, "sqlite", { "attributes.owner": "owner_id" });
  const where: PrismaWhere = prismaWhere(plan, { tenant: "tenantId" });
  return [plan.kind === "conditional" ? plan.sql.where : local.where, plan.sql.params, where];
}
