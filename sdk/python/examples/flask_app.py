"""Flask example: run `make run` at the repository root, then

    cd sdk/python && /usr/bin/python3 examples/flask_app.py
    curl -s localhost:8000/whoami -H 'Authorization: Bearer anything'
    curl -s localhost:8000/orders/42 -H 'Authorization: Bearer anything'
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flask import Flask, g, jsonify  # noqa: E402

from svc_sdk import Client  # noqa: E402
from svc_sdk.flask import SvcAuth, require_action  # noqa: E402

app = Flask(__name__)
# SVC_SIDECAR_URL (default http://localhost:7700), SVC_FAIL_MODE (default open), or svc.toml [sdk].
auth = SvcAuth(app, client=Client(), exclude=("/healthz",))


@app.get("/healthz")
def healthz():
    return "ok\n"


@app.get("/whoami")
def whoami():
    # g.claims: the verified claims, or None (development mode, fail-open).
    d = g.svc_decision
    return jsonify(claims=g.claims, subject=d.subject, reason=d.reason)


@app.get("/orders/<order_id>")
@require_action("orders:read", resource_id_arg="order_id")
def order(order_id):
    return jsonify(order=order_id, decision_id=g.svc_decision.decision_id, claims=g.claims)


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=8000)
