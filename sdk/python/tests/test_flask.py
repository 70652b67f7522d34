"""svc_sdk.flask against the real sidecar."""

import json
import unittest

from flask import Flask, g, jsonify

from frameworks import MiddlewareBehaviour
from svc_sdk.flask import SvcAuth, require_action


def make_app(client):
    app = Flask(__name__)
    SvcAuth(app, client=client, exclude=("/healthz",))

    @app.get("/whoami")
    def whoami():
        return jsonify(claims=g.claims)

    @app.get("/healthz")
    def healthz():
        return jsonify(claims=g.claims)

    @app.get("/orders/<order_id>")
    @require_action("orders:read", resource_id_arg="order_id")
    def order(order_id):
        return jsonify(claims=g.claims, decision_id=g.svc_decision.decision_id)

    @app.get("/orders/<order_id>/delete")
    @require_action("orders:delete", resource_id_arg="order_id")
    def delete(order_id):
        return jsonify(claims=g.claims, decision_id=g.svc_decision.decision_id)

    return app


class FlaskTest(MiddlewareBehaviour, unittest.TestCase):
    def call(self, client, path, token, headers=None):
        headers = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
        app = make_app(client)
        resp = app.test_client().get(path, headers=headers)
        return resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, json.loads(resp.data)

    def test_client_from_app_config(self):
        app = Flask(__name__)
        app.config.update(SVC_SIDECAR_URL=self.sidecar.url, SVC_FAIL_MODE="closed")
        auth = SvcAuth(app)
        self.assertEqual((auth.client.sidecar_url, auth.client.fail_mode), (self.sidecar.url, "closed"))

        @app.get("/whoami")
        def whoami():
            return jsonify(claims=g.claims)

        resp = app.test_client().get("/whoami", headers={"Authorization": f"Bearer {self.token()}"})
        self.assertEqual(resp.get_json()["claims"]["sub"], "alice")


if __name__ == "__main__":
    unittest.main()
