"""List filtering: a Flask app that lists only the orders its caller may
read, from a real database (SQLite through SQLAlchemy). Run `make run` at
the repository root, then

    cd sdk/python && /usr/bin/python3 examples/list_orders.py
    curl -s localhost:8000/orders -H 'Authorization: Bearer <token>'

One call to the sidecar per listing (``plan_resources``), not one per
row: the plan becomes the query's WHERE clause. ORDERS_DB names the
SQLite file (default: a demo table in memory).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flask import Flask, jsonify, request  # noqa: E402
from sqlalchemy import Column, MetaData, String, Table, create_engine, select  # noqa: E402
from sqlalchemy.engine import Engine  # noqa: E402
from sqlalchemy.pool import StaticPool  # noqa: E402

from svc_sdk import Client, api_key, bearer_token  # noqa: E402
from svc_sdk.sqlalchemy import plan_filter  # noqa: E402

metadata = MetaData()
# The resource's id and tenant, and its attributes owner and status as
# columns (owner_id is named for the field attributes.owner below).
orders = Table("orders", metadata,
               Column("id", String, primary_key=True), Column("tenant", String, nullable=False),
               Column("owner_id", String), Column("status", String))
COLUMNS = {"attributes.owner": orders.c.owner_id}

DEMO_ROWS = [
    {"id": "ord-1", "tenant": "acme", "owner_id": "alice", "status": "open"},
    {"id": "ord-2", "tenant": "acme", "owner_id": "bob", "status": "archived"},
    {"id": "ord-3", "tenant": "acme", "owner_id": None, "status": None},
    {"id": "ord-4", "tenant": "globex", "owner_id": "alice", "status": "open"},
]


def demo_database() -> Engine:
    """An in-memory SQLite database holding DEMO_ROWS."""
    db = create_engine("sqlite://", connect_args={"check_same_thread": False}, poolclass=StaticPool)
    metadata.create_all(db)
    with db.begin() as conn:
        conn.execute(orders.insert(), DEMO_ROWS)
    return db


def create_app(client: Client, db: Engine) -> Flask:
    app = Flask(__name__)

    @app.get("/orders")
    def list_orders() -> Any:
        auth = request.headers.get("Authorization")
        token = bearer_token(auth) or api_key(auth, request.headers.get("X-Api-Key"))
        plan = client.plan_resources("orders:read", "orders", "sqlite", token=token)
        with db.connect() as conn:
            rows = conn.execute(select(orders).where(plan_filter(plan, orders, COLUMNS)).order_by(orders.c.id))
            listed = [dict(r._mapping) for r in rows]
        return jsonify({"orders": listed, "plan": plan.kind, "reason": plan.reason, "decision_id": plan.decision_id})

    return app


if __name__ == "__main__":
    path = os.environ.get("ORDERS_DB")
    database = create_engine(f"sqlite:///{path}") if path else demo_database()
    create_app(Client(), database).run(port=8000)
