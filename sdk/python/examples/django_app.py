"""Django example in one file: run `make run` at the repository root, then

    cd sdk/python && /usr/bin/python3 examples/django_app.py runserver 8000
    curl -s localhost:8000/whoami -H 'Authorization: Bearer anything'
    curl -s localhost:8000/orders/42 -H 'Authorization: Bearer anything'
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from django.conf import settings  # noqa: E402

settings.configure(
    DEBUG=True,
    SECRET_KEY=os.environ.get("DJANGO_SECRET_KEY", "example-only"),
    ALLOWED_HOSTS=["localhost", "127.0.0.1"],
    ROOT_URLCONF=__name__,
    MIDDLEWARE=["svc_sdk.django.SvcMiddleware"],
    # Read by the middleware; without them SVC_SIDECAR_URL / SVC_FAIL_MODE
    # from the environment apply, then http://localhost:7700 and "open".
    SVC_SIDECAR_URL=os.environ.get("SVC_SIDECAR_URL", "http://localhost:7700"),
    SVC_FAIL_MODE=os.environ.get("SVC_FAIL_MODE", "open"),
    SVC_EXCLUDE=("/healthz",),
)

from django.http import HttpResponse, JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402

from svc_sdk.django import require_action  # noqa: E402


def healthz(request):
    return HttpResponse("ok\n")


def whoami(request):
    # request.svc_claims: the verified claims, or None (development mode,
    # fail-open).
    d = request.svc_decision
    return JsonResponse({"claims": request.svc_claims, "subject": d.subject, "reason": d.reason})


@require_action("orders:read", resource_id_kwarg="order_id")
def order(request, order_id):
    return JsonResponse({"order": order_id, "decision_id": request.svc_decision.decision_id,
                         "claims": request.svc_claims})


urlpatterns = [path("healthz", healthz), path("whoami", whoami), path("orders/<str:order_id>", order)]

if __name__ == "__main__":
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
