"""svc_sdk.django against the real sidecar."""

import asyncio
import json
import os
import unittest
from unittest import mock

import djangoconf

djangoconf.setup()

from django.http import JsonResponse  # noqa: E402
from django.test import AsyncClient, Client as DjangoClient, override_settings  # noqa: E402
from django.urls import path  # noqa: E402

from frameworks import MiddlewareBehaviour  # noqa: E402
from svc_sdk.django import client_from_settings, require_action  # noqa: E402


def whoami(request):
    return JsonResponse({"claims": request.svc_claims})


@require_action("orders:read", resource_id_kwarg="order_id")
def order(request, order_id):
    return JsonResponse({"claims": request.svc_claims, "decision_id": request.svc_decision.decision_id})


@require_action("orders:delete", resource_id_kwarg="order_id")
def delete(request, order_id):
    return JsonResponse({"claims": request.svc_claims, "decision_id": request.svc_decision.decision_id})


@require_action("orders:read", resource_id_kwarg="order_id")
async def async_order(request, order_id):
    await asyncio.sleep(0)
    return JsonResponse({"claims": request.svc_claims, "decision_id": request.svc_decision.decision_id,
                         "order": order_id})


@require_action("orders:delete", resource_id_kwarg="order_id")
async def async_delete(request, order_id):
    return JsonResponse({"deleted": order_id})


urlpatterns = [
    path("async/orders/<str:order_id>", async_order),
    path("async/orders/<str:order_id>/delete", async_delete),
    path("whoami", whoami),
    path("healthz", whoami),
    path("orders/<str:order_id>", order),
    path("orders/<str:order_id>/delete", delete),
]


class DjangoTest(MiddlewareBehaviour, unittest.TestCase):
    def call(self, client, path, token, headers=None):
        headers = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
        headers = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()}
        with override_settings(SVC_SIDECAR_URL=client.sidecar_url, SVC_FAIL_MODE=client.fail_mode,
                               SVC_TIMEOUT=client.timeout):
            resp = DjangoClient().get(path, **headers)
        return resp.status_code, {k.lower(): v for k, v in resp.items()}, json.loads(resp.content)

    def test_require_action_on_async_views(self):
        # Django runs an async view natively only when the view itself is a
        # coroutine function: the decorator must keep it one.
        self.assertTrue(asyncio.iscoroutinefunction(async_order))
        token = self.token(roles=["viewer"])
        with override_settings(SVC_SIDECAR_URL=self.client.sidecar_url, SVC_FAIL_MODE="closed",
                               SVC_TIMEOUT=self.client.timeout):
            # Django 3.2's AsyncClient takes header names as sent, not as
            # WSGI environ keys.
            for name, get in (("async", lambda p, **h: asyncio.run(AsyncClient().get(
                    p, **{k.removeprefix("HTTP_").lower(): v for k, v in h.items()}))),
                              ("sync", lambda p, **h: DjangoClient().get(p, **h))):
                with self.subTest(client=name):
                    resp = get("/async/orders/7", HTTP_AUTHORIZATION=f"Bearer {token}")
                    self.assertEqual(resp.status_code, 200, resp.content)
                    j = json.loads(resp.content)
                    self.assertEqual((j["order"], j["claims"]["sub"]), ("7", "alice"))
                    self.assertTrue(j["decision_id"])
                    resp = get("/async/orders/7/delete", HTTP_AUTHORIZATION=f"Bearer {token}")
                    self.assertEqual(resp.status_code, 403, resp.content)
                    self.assertEqual(self.body(json.loads(resp.content))["reason"], "policy-deny")
                    resp = get("/async/orders/7")
                    self.assertEqual(resp.status_code, 401, resp.content)

    def test_excluded_paths_are_the_urlconfs(self):
        # Django routes a request by its path_info; the script prefix
        # (SCRIPT_NAME, which a WSGI server may take from the request
        # itself) is not part of the route. An excluded prefix must not
        # open every view to a request whose prefix spells it.
        tok = self.token()
        with override_settings(SVC_SIDECAR_URL=self.client.sidecar_url, SVC_FAIL_MODE="closed",
                               SVC_TIMEOUT=self.client.timeout, SVC_EXCLUDE=("/healthz", "/static/*")):
            for name, path, extra in [
                ("prefix spelling an excluded prefix", "/whoami", {"SCRIPT_NAME": "/static/x"}),
                ("prefix spelling an excluded path", "/whoami", {"SCRIPT_NAME": "/healthz"}),
                ("action, prefix spelling an excluded prefix", "/orders/7", {"SCRIPT_NAME": "/static"}),
            ]:
                with self.subTest(name):
                    resp = DjangoClient().get(path, **extra)
                    self.assertEqual(resp.status_code, 401, resp.content)
                    self.assertEqual(self.body(json.loads(resp.content))["reason"], "token-missing")
                    resp = DjangoClient().get(path, HTTP_AUTHORIZATION=f"Bearer {tok}", **extra)
                    self.assertEqual((resp.status_code, json.loads(resp.content)["claims"]["sub"]), (200, "alice"))
            with self.subTest("excluded path under a script prefix"):
                resp = DjangoClient().get("/healthz", SCRIPT_NAME="/app")
                self.assertEqual((resp.status_code, json.loads(resp.content)), (200, {"claims": None}))

    def test_settings_then_environment(self):
        with mock.patch.dict(os.environ, {"SVC_SIDECAR_URL": "http://127.0.0.1:7788", "SVC_FAIL_MODE": "closed"}):
            c = client_from_settings()
            self.assertEqual((c.sidecar_url, c.fail_mode), ("http://127.0.0.1:7788", "closed"))
            with override_settings(SVC_SIDECAR_URL="http://127.0.0.1:7799", SVC_FAIL_MODE="open"):
                c = client_from_settings()
            self.assertEqual((c.sidecar_url, c.fail_mode), ("http://127.0.0.1:7799", "open"))


if __name__ == "__main__":
    unittest.main()
