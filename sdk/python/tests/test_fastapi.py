"""svc_sdk.fastapi against the real sidecar."""

import asyncio
import time
import unittest

import httpx
from fastapi import Depends, FastAPI, Request
from fastapi.testclient import TestClient

import harness
from frameworks import MiddlewareBehaviour
from svc_sdk import Client, Decision
from svc_sdk.fastapi import SvcMiddleware, require_action


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
    def call(self, client, path, token):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with TestClient(make_app(client)) as tc:
            resp = tc.get(path, headers=headers)
        return resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, resp.json()

    def test_require_action_without_the_middleware(self):
        app = FastAPI()

        @app.get("/orders/{order_id}")
        async def order(order_id: str, request: Request,
                        decision: Decision = Depends(require_action("orders:delete", client=self.client))):
            return {"claims": request.state.svc_user}

        with TestClient(app) as tc:
            ok = tc.get("/orders/1", headers={"Authorization": f"Bearer {self.token(roles=['admin'])}"})
            denied = tc.get("/orders/1", headers={"Authorization": f"Bearer {self.token(roles=['viewer'])}"})
        self.assertEqual((ok.status_code, ok.json()["claims"]["sub"]), (200, "alice"))
        self.assertEqual(denied.status_code, 403)
        self.assertEqual(denied.json()["detail"]["deny_reasons"], ["role-forbidden: viewer cannot orders:delete"])

    def test_event_loop_keeps_serving_while_the_sidecar_is_slow(self):
        hole = harness.BlackHole()
        self.addCleanup(hole.close)
        app = make_app(Client(hole.url, "open", timeout=1.0))

        async def scenario():
            async with httpx.AsyncClient(app=app, base_url="http://test") as ac:
                finished = {}

                async def get(path, headers):
                    r = await ac.get(path, headers=headers)
                    finished[path] = time.monotonic()
                    return r

                slow = asyncio.create_task(get("/whoami", {"Authorization": "Bearer x"}))
                await asyncio.sleep(0.1)
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
