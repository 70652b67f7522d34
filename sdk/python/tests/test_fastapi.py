"""svc_sdk.fastapi against the real sidecar."""

import asyncio
import time
import unittest

import httpx
from fastapi import Depends, FastAPI, Request, WebSocket
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

import harness
import svc_sdk.fastapi
from frameworks import MiddlewareBehaviour
from svc_sdk import Client, Decision
from svc_sdk.fastapi import SvcMiddleware, SvcRefused, refusal_handler, require_action


def make_app(client, with_middleware=True):
    app = FastAPI()
    if with_middleware:
        app.add_middleware(SvcMiddleware, client=client, exclude=("/healthz",))

    @app.get("/whoami")
    async def whoami(request: Request):
        return {"claims": request.state.svc_user}

    @app.get("/healthz")
    async def healthz(request: Request):
        return {"claims": request.state.svc_user}

    @app.get("/orders/{order_id}")
    async def order(order_id: str, request: Request,
                    decision: Decision = Depends(require_action("orders:read", resource_id_param="order_id"))):
        return {"claims": request.state.svc_user, "decision_id": decision.decision_id}

    @app.get("/orders/{order_id}/delete")
    def delete(order_id: str, request: Request,
               decision: Decision = Depends(require_action("orders:delete", resource_id_param="order_id"))):
        return {"claims": request.state.svc_user, "decision_id": decision.decision_id}

    return app


class FastAPITest(MiddlewareBehaviour, unittest.TestCase):
    def call(self, client, path, token, headers=None):
        headers = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
        with TestClient(make_app(client)) as tc:
            resp = tc.get(path, headers=headers)
        return resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, resp.json()

    def test_require_action_without_the_middleware(self):
        def app_with(handler):
            app = FastAPI()
            if handler:
                app.add_exception_handler(SvcRefused, refusal_handler)

            @app.get("/orders/{order_id}")
            async def order(order_id: str, request: Request,
                            decision: Decision = Depends(require_action("orders:delete", client=self.client))):
                return {"claims": request.state.svc_user}

            return app

        admin = {"Authorization": f"Bearer {self.token(roles=['admin'])}"}
        viewer = {"Authorization": f"Bearer {self.token(roles=['viewer'])}"}
        with TestClient(app_with(True)) as tc:
            ok = tc.get("/orders/1", headers=admin)
            denied = tc.get("/orders/1", headers=viewer)
            missing = tc.get("/orders/1")
        self.assertEqual((ok.status_code, ok.json()["claims"]["sub"]), (200, "alice"))
        self.assertEqual(denied.status_code, 403)
        b = self.body(denied.json())
        self.assertEqual((b["reason"], b["deny_reasons"]), ("policy-deny", ["role-forbidden: viewer cannot orders:delete"]))
        self.assertEqual((missing.status_code, missing.headers.get("www-authenticate")), (401, "Bearer"))
        self.assertEqual(self.body(missing.json())["reason"], "token-missing")

        # With nothing to answer SvcRefused, the dependency still refuses
        # with the right status (in FastAPI's own body) and says why.
        svc_sdk.fastapi._warned = False
        with TestClient(app_with(False)) as tc, self.assertLogs("svc_sdk", "WARNING") as logs:
            denied = tc.get("/orders/1", headers=viewer)
        self.assertEqual(denied.status_code, 403)
        self.assertEqual(denied.json()["detail"]["deny_reasons"], ["role-forbidden: viewer cannot orders:delete"])
        self.assertIn("refusal_handler", "".join(logs.output))

    def test_websocket_handshakes_are_checked(self):
        # A WebSocket route is served by the same app: its handshake is
        # checked as an HTTP request is, and a refused one never reaches
        # the route.
        def app_of(client):
            app = FastAPI()
            app.add_middleware(SvcMiddleware, client=client, exclude=("/healthz",))
            reached = []

            @app.websocket("/ws")
            async def ws(websocket: WebSocket):
                reached.append(True)
                await websocket.accept()
                await websocket.send_json({"claims": websocket.state.svc_user})
                await websocket.close()

            @app.websocket("/healthz")
            async def health(websocket: WebSocket):
                await websocket.accept()
                await websocket.send_json({"claims": websocket.state.svc_user})
                await websocket.close()

            return app, reached

        def connect(client, path, headers):
            app, reached = app_of(client)
            with TestClient(app) as tc:
                try:
                    with tc.websocket_connect(path, headers=headers) as w:
                        return w.receive_json(), None, reached
                except WebSocketDisconnect as e:
                    return None, (e.code, e.reason), reached

        now = int(time.time())
        refused = [
            ("no token", {}, "token-missing"),
            ("expired token", {"Authorization": f"Bearer {self.token(iat=now - 600, exp=now - 300)}"}, "token-expired"),
            ("forged token", {"Authorization": "Bearer abc"}, "token-malformed"),
            ("token of another tenant", {"Authorization": f"Bearer {self.token(tenant='globex')}"}, "tenant-mismatch"),
        ]
        for name, headers, reason in refused:
            with self.subTest(name):
                got, closed, reached = connect(self.client, "/ws", headers)
                self.assertIsNone(got)
                self.assertEqual(closed, (1008, reason))
                self.assertEqual(reached, [])
        with self.subTest("valid token"):
            got, closed, reached = connect(self.client, "/ws", {"Authorization": f"Bearer {self.token()}"})
            self.assertIsNone(closed)
            self.assertEqual(got["claims"]["sub"], "alice")
        with self.subTest("session cookie"):
            got, closed, _ = connect(self.client, "/ws", {"Cookie": f"svc_session={self.token()}"})
            self.assertEqual((closed, got["claims"]["sub"]), (None, "alice"))
        with self.subTest("excluded path"):
            got, closed, _ = connect(self.client, "/healthz", {})
            self.assertEqual((got, closed), ({"claims": None}, None))
        with self.subTest("sidecar down, closed"):
            got, closed, reached = connect(Client(harness.down_url(), "closed", 1.0), "/ws",
                                           {"Authorization": f"Bearer {self.token()}"})
            self.assertEqual((got, closed, reached), (None, (1008, "unavailable"), []))

    def test_refusal_body_matches_the_middleware(self):
        # The dependency and the middleware answer the same refusal with
        # the same status, headers and bytes. /open/* is left to the
        # dependency alone.
        app = FastAPI()
        app.add_middleware(SvcMiddleware, client=self.client, exclude=("/open/*",))

        @app.get("/whoami")
        async def whoami(request: Request):
            return {"claims": request.state.svc_user}

        @app.get("/open/orders/{order_id}")
        async def order(order_id: str, decision: Decision = Depends(require_action("orders:read"))):
            return {"decision_id": decision.decision_id}

        with TestClient(app) as tc:
            by_middleware = tc.get("/whoami")
            by_dependency = tc.get("/open/orders/1")
            ok = tc.get("/open/orders/1", headers={"Authorization": f"Bearer {self.token()}"})
        for r in (by_middleware, by_dependency):
            self.assertEqual(r.status_code, 401)
            self.assertEqual(r.headers["www-authenticate"], "Bearer")
            self.assertEqual(r.headers["content-type"], "application/json")
            self.assertEqual(r.headers["cache-control"], "no-store")
        self.assertEqual(by_dependency.content, by_middleware.content)
        self.assertEqual(by_dependency.json(), {"allow": False, "deny_reasons": [], "reason": "token-missing"})
        self.assertEqual(ok.status_code, 200, ok.text)

    def test_event_loop_keeps_serving_while_the_sidecar_is_slow(self):
        hole = harness.BlackHole()
        self.addCleanup(hole.close)
        # The slow call takes the whole timeout; the fast request is sent
        # once the slow one is known to wait on the sidecar.
        app = make_app(Client(hole.url, "open", timeout=3.0))

        async def scenario():
            async with httpx.AsyncClient(app=app, base_url="http://test") as ac:
                finished = {}

                async def get(path, headers):
                    r = await ac.get(path, headers=headers)
                    finished[path] = time.monotonic()
                    return r

                slow = asyncio.create_task(get("/whoami", {"Authorization": "Bearer x"}))
                deadline = time.monotonic() + 30
                while not hole.accepted() and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                self.assertTrue(hole.accepted(), "the slow request never reached the sidecar")
                fast = await get("/healthz", {})
                slow_resp = await slow
                return fast, slow_resp, finished

        fast, slow, finished = asyncio.run(scenario())
        self.assertEqual((fast.status_code, slow.status_code), (200, 200))
        self.assertIsNone(slow.json()["claims"])  # fail-open after the timeout
        # The excluded request was answered while the slow one waited.
        self.assertLess(finished["/healthz"], finished["/whoami"])


if __name__ == "__main__":
    unittest.main()
