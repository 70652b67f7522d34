// List filtering: an HTTP server that lists only the orders its caller may
// read, from PostgreSQL through pg. One call to the sidecar per listing
// (planResources), not one per row: the plan's where and params become the
// query's. Run `make run` at the repository root and have a PostgreSQL with
// an orders table (id, tenant, owner, status; PG* variables name it), then:
//   cd sdk/typescript && npm run build && node examples/list-orders.mjs
//   curl -s localhost:8000/orders -H 'Authorization: Bearer <token>'
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";

import pg from "pg";

import { apiKey, bearerToken, SvcClient } from "@svc/sdk";

/** The orders the bearer of token may read, and the plan that chose them. */
export async function listOrders(client, pool, token) {
  const plan = await client.planResources("orders:read", "orders", { token, dialect: "postgres" });
  // plan.sql.where holds only $n placeholders; its values are the params.
  const { rows } = await pool.query(
    `SELECT id, tenant, owner, status FROM orders WHERE ${plan.sql.where} ORDER BY id`, plan.sql.params);
  return { orders: rows, plan: plan.kind, reason: plan.reason, decisionId: plan.decisionId };
}

/** The server: GET /orders lists them as JSON. */
export function listOrdersServer(client, pool) {
  return createServer(async (req, res) => {
    if (req.method !== "GET" || req.url !== "/orders") {
      res.writeHead(404).end();
      return;
    }
    try {
      const auth = req.headers.authorization;
      const token = bearerToken(auth) || apiKey(auth, req.headers["x-api-key"]);
      const body = await listOrders(client, pool, token);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    } catch (e) {
      res.writeHead(503, { "content-type": "application/json" })
        .end(JSON.stringify({ error: e.reason ?? "unavailable" }));
    }
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // SVC_SIDECAR_URL (default http://localhost:7700), SVC_FAIL_MODE; PGHOST, PGDATABASE, ...
  listOrdersServer(new SvcClient(), new pg.Pool()).listen(8000, "127.0.0.1");
}
