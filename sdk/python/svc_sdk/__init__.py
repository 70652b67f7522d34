"""svc_sdk: the Python client of the svc sidecar, and middleware for Flask
(:mod:`svc_sdk.flask`), FastAPI (:mod:`svc_sdk.fastapi`) and Django
(:mod:`svc_sdk.django`).

The client talks to the sidecar's local HTTP JSON API
(``POST /v1/validate-token``, ``POST /v1/authorize``, ``POST /v1/plan-resources``) over pooled keep-alive
connections, with the standard library only::

    from svc_sdk import Client
    client = Client()                       # SVC_SIDECAR_URL, SVC_FAIL_MODE, svc.toml
    d = client.validate_token(token)        # TokenDecision(allowed, claims, reason)
    d = client.authorize(token, "orders:read", resource_id="42")
    d.allow, d.deny_reasons, d.reason, d.decision_id
    plan = client.plan_resources("orders:read", "orders", "sqlite", token=token)
    plan.kind, plan.condition, plan.sql.where, plan.sql.params   # svc_sdk.plan

An API key (``svck_...``) is passed where a token is.

Behind a proxy that asked the sidecar, :mod:`svc_sdk.identity` verifies the
sidecar's signed ``X-Svc-Identity`` token instead (with the optional
``cryptography`` package), and the middleware admits a request on it alone.
"""

from .client import (
    DEFAULT_CONFIG_FILE,
    DEFAULT_SIDECAR_URL,
    DEFAULT_TIMEOUT,
    FAIL_CLOSED,
    FAIL_OPEN,
    FAIL_OPEN_NOTICE,
    Client,
    Decision,
    SidecarRequestError,
    SidecarUnavailableError,
    SvcError,
    TokenDecision,
)
from .plan import Condition, Plan, PlanError, SQLFilter, to_sql
from ._web import Admission, Refusal, api_key, bearer_token

__version__ = "0.1.0"

__all__ = [
    "Client", "TokenDecision", "Decision", "SvcError", "SidecarUnavailableError",
    "SidecarRequestError", "Admission", "Refusal", "api_key", "bearer_token",
    "DEFAULT_SIDECAR_URL", "DEFAULT_TIMEOUT", "DEFAULT_CONFIG_FILE", "FAIL_OPEN", "FAIL_CLOSED",
    "FAIL_OPEN_NOTICE", "Plan", "Condition", "SQLFilter", "PlanError", "to_sql",
]
