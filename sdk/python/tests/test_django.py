"""svc_sdk.django against the real sidecar."""

import json
import os
import unittest

import django
from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="svc-sdk-tests-only",
        ALLOWED_HOSTS=["testserver"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=["svc_sdk.django.SvcMiddleware"],
        SVC_EXCLUDE=("/healthz",),
        INSTALLED_APPS=[],
        DATABASES={},
    )
    django.setup()

from django.http import JsonResponse  # noqa: E402
from django.test import Client as DjangoClient, override_settings  # noqa: E402
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


urlpatterns = [
    path("whoami", whoami),
    path("healthz", whoami),
    path("orders/<str:order_id>", order),
    path("orders/<str:order_id>/delete", delete),
]


class DjangoTest(MiddlewareBehaviour, unittest.TestCase):
    def call(self, client, path, token):
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
        with override_settings(SVC_SIDECAR_URL=client.sidecar_url, SVC_FAIL_MODE=client.fail_mode,
                               SVC_TIMEOUT=client.timeout):
            resp = DjangoClient().get(path, **headers)
        return resp.status_code, {k.lower(): v for k, v in resp.items()}, json.loads(resp.content)

    def test_settings_then_environment(self):
        old = {k: os.environ.get(k) for k in ("SVC_SIDECAR_URL", "SVC_FAIL_MODE")}
        os.environ.update({"SVC_SIDECAR_URL": "http://127.0.0.1:7788", "SVC_FAIL_MODE": "closed"})
        try:
            c = client_from_settings()
            self.assertEqual((c.sidecar_url, c.fail_mode), ("http://127.0.0.1:7788", "closed"))
            with override_settings(SVC_SIDECAR_URL="http://127.0.0.1:7799", SVC_FAIL_MODE="open"):
                c = client_from_settings()
            self.assertEqual((c.sidecar_url, c.fail_mode), ("http://127.0.0.1:7799", "open"))
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


if __name__ == "__main__":
    unittest.main()
