"""Django middleware and view decorator.

settings.py::

    MIDDLEWARE = [..., "svc_sdk.django.SvcMiddleware"]
    SVC_SIDECAR_URL = "http://localhost:7700"   # else the environment, then svc.toml, else this default
    SVC_FAIL_MODE = "closed"                    # else the environment, then svc.toml, else "open"
    SVC_EXCLUDE = ("/healthz",)                 # optional: exact paths, or prefixes ending with "*"
    SVC_LOGIN_REDIRECT = True                   # optional: send browsers without a session to sign in
    SVC_SAML = SamlConfig(...)                  # optional: else SamlConfig.load() (SVC_SAML_*, svc.toml)
    SVC_SESSION_PREFIXED_ONLY = True            # optional: read only __Host-<cookie_name>; else by SVC_SAML
    SVC_IDENTITY = IdentityVerifier(...)        # optional: admit on X-Svc-Identity alone (svc_sdk.identity)

views.py::

    from svc_sdk.django import require_action

    @require_action("orders:read", resource_id_kwarg="order_id")
    def order(request, order_id):
        return JsonResponse({"claims": request.svc_claims})

``require_action`` works on sync and async views alike (an ``async def``
view gets an async wrapper; the sidecar is called on a worker thread).

An API key is read as the sidecar's checks read it: ``Authorization: ApiKey
<key>``, or ``X-Api-Key`` when the request has no Authorization header.
A request with neither an Authorization header nor an API key is
authenticated by the sign-in gateways' session cookie (``cookie_name`` of the
SamlConfig, default ``svc_session``): ``__Host-<cookie_name>``, else, unless
``SVC_SESSION_PREFIXED_ONLY`` (by default the SamlConfig's ``prefixed_only``:
on behind Secure gateways, SAML or OpenID Connect), ``<cookie_name>``. With ``SVC_LOGIN_REDIRECT``, a browser refused for its
token (401; a GET or HEAD preferring text/html, see :mod:`svc_sdk.saml`) is
redirected (302) to the gateway's login with its path as ``return_to``.

With the setting ``SVC_IDENTITY`` (an :class:`~svc_sdk.identity.IdentityVerifier`),
the middleware admits a request on the ``X-Svc-Identity`` token the sidecar
handed it through the proxy, without calling the sidecar: 401 without one
or with one that does not verify, 503 ``jwks-unavailable`` while the
verifier has no keys; ``request.svc_decision`` is then a TokenDecision
with reason ``ok``.

``request.svc_claims`` holds the verified claims (a dict), or None in
development mode, on fail-open and on excluded paths; ``request.svc_decision``
holds the whole TokenDecision or Decision. Refused requests get a JSON body
``{"allow": false, "deny_reasons": [...], "reason": "...", "decision_id": "..."}``.

List filtering: :func:`plan_filter` turns a resource plan
(:meth:`Client.plan_resources <svc_sdk.Client.plan_resources>`) into a ``Q``::

    plan = client.plan_resources("orders:read", "orders", token=token)
    Order.objects.filter(plan_filter(plan, {"attributes.owner": "owner__username"}))
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Awaitable, Callable, TypeVar, cast

from django.conf import settings
from django.db.models import Field, Q, lookups
from django.db.models.fields import json as djson
from django.db.models.fields.json import KeyTransform
from django.http import HttpRequest, HttpResponse

from ._web import Admission, Refusal, check_action, check_token, excluded, login_redirect, once
from .client import Client
from .identity import IdentityVerifier, check_identity
from .plan import ALWAYS_ALLOWED, ATTRIBUTE_PREFIX, STRING_TESTS, Condition, Plan, like_pattern
from .saml import SamlConfig, login_redirect_url, session_token

__all__ = ["SvcMiddleware", "require_action", "client_from_settings", "saml_from_settings",
           "prefixed_only_from_settings", "identity_from_settings", "plan_filter"]

F = TypeVar("F", bound=Callable[..., Any])


def client_from_settings() -> Client:
    """A Client configured by the settings SVC_SIDECAR_URL, SVC_FAIL_MODE
    and SVC_TIMEOUT, each falling back to the environment and svc.toml (then to the
    defaults) when unset."""
    return Client(getattr(settings, "SVC_SIDECAR_URL", None) or None,
                  getattr(settings, "SVC_FAIL_MODE", None) or None,
                  getattr(settings, "SVC_TIMEOUT", None) or None)


def saml_from_settings() -> SamlConfig:
    """The setting SVC_SAML (a SamlConfig), else SamlConfig.load()."""
    s = getattr(settings, "SVC_SAML", None)
    if s is None:
        return SamlConfig.load()
    if not isinstance(s, SamlConfig):
        raise TypeError("the SVC_SAML setting must be a svc_sdk.saml.SamlConfig")
    return s


def prefixed_only_from_settings(saml: SamlConfig) -> bool:
    """Whether the session cookie is read only as ``__Host-<cookie_name>``:
    the setting SVC_SESSION_PREFIXED_ONLY (a bool), else
    ``saml.prefixed_only`` (on behind Secure gateways)."""
    v = getattr(settings, "SVC_SESSION_PREFIXED_ONLY", None)
    if v is None:
        return saml.prefixed_only
    if not isinstance(v, bool):
        raise TypeError("the SVC_SESSION_PREFIXED_ONLY setting must be a bool")
    return v


def identity_from_settings() -> IdentityVerifier | None:
    """The setting SVC_IDENTITY (an IdentityVerifier), else None."""
    v = getattr(settings, "SVC_IDENTITY", None)
    if v is not None and not isinstance(v, IdentityVerifier):
        raise TypeError("the SVC_IDENTITY setting must be a svc_sdk.identity.IdentityVerifier")
    return v


class SvcMiddleware:
    """Validates the bearer token, API key or session cookie of every
    request but those whose path (``path_info``, the path the URLconf
    routes, without the script prefix) is in the setting ``SVC_EXCLUDE``, or,
    with the setting ``SVC_IDENTITY``, its identity token."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response
        self.identity = identity_from_settings()
        self.client: Client | None = client_from_settings() if self.identity is None else None
        self.saml = saml_from_settings()
        self.prefixed_only = prefixed_only_from_settings(self.saml)
        self.login_redirect = bool(getattr(settings, "SVC_LOGIN_REDIRECT", False))
        self.exclude = tuple(getattr(settings, "SVC_EXCLUDE", ()) or ())

    def __call__(self, request: HttpRequest) -> HttpResponse:
        r: Any = request
        r.svc_claims = None
        r.svc_decision = None
        r.svc_client = self.client
        r.svc_saml = self.saml
        r.svc_prefixed_only = self.prefixed_only
        r.svc_login_redirect = self.login_redirect
        # The path the URLconf routes: without the script prefix, which
        # is no part of the route (and which a WSGI server may take from
        # the request itself).
        if excluded(request.path_info, self.exclude):
            return self.get_response(request)
        if self.identity is not None:
            got = check_identity(self.identity, request.META.get("HTTP_X_SVC_IDENTITY"))
            refused = _admit(request, got, self.saml, False)
            if refused is not None:
                return refused
            return self.get_response(request)
        assert self.client is not None  # made unless identity is set
        out = check_token(self.client, request.META.get("HTTP_AUTHORIZATION"),
                          session_token(request.META.get("HTTP_COOKIE"), self.saml.cookie_name, self.prefixed_only),
                          request.META.get("HTTP_X_API_KEY"))
        refused = _admit(request, out, self.saml, self.login_redirect)
        if refused is not None:
            return refused
        return self.get_response(request)


def require_action(action: str, resource: str | None = None, resource_id_kwarg: str | None = None,
                   client: Client | None = None) -> Callable[[F], F]:
    """Decorates a view, sync or async, so that the policy must allow
    ``action`` (on the resource whose id is the URL keyword argument
    ``resource_id_kwarg``, if given); a denial answers 403 with the deny
    reasons. The client is, in order: ``client``, the SvcMiddleware's, one
    made from the settings."""

    def check(request: HttpRequest, kwargs: dict[str, Any]) -> HttpResponse | None:
        r: Any = request
        c = client or getattr(r, "svc_client", None) or _default_client()
        saml = getattr(r, "svc_saml", None) or _default_saml()
        prefixed_only = getattr(r, "svc_prefixed_only", None)
        if prefixed_only is None:
            prefixed_only = prefixed_only_from_settings(saml)
        redirect = getattr(r, "svc_login_redirect", None)
        if redirect is None:
            redirect = bool(getattr(settings, "SVC_LOGIN_REDIRECT", False))
        rid = kwargs.get(resource_id_kwarg) if resource_id_kwarg else None
        out = check_action(c, request.META.get("HTTP_AUTHORIZATION"), action, resource,
                           None if rid is None else str(rid),
                           session=session_token(request.META.get("HTTP_COOKIE"), saml.cookie_name, prefixed_only),
                           x_api_key=request.META.get("HTTP_X_API_KEY"))
        return _admit(request, out, saml, redirect)

    def decorate(view: F) -> F:
        if asyncio.iscoroutinefunction(view):
            async_view = cast(Callable[..., Awaitable[HttpResponse]], view)

            @functools.wraps(view)
            async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
                # The client blocks: keep the event loop serving meanwhile.
                refused = await asyncio.to_thread(check, request, kwargs)
                if refused is not None:
                    return refused
                return await async_view(request, *args, **kwargs)

            return cast(F, async_wrapper)

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            refused = check(request, kwargs)
            if refused is not None:
                return refused
            result: HttpResponse = view(request, *args, **kwargs)
            return result

        return cast(F, wrapper)

    return decorate


def _admit(request: HttpRequest, out: Admission | Refusal, saml: SamlConfig, redirect: bool) -> HttpResponse | None:
    """Sets the request attributes of an admitted request, or returns the
    answer to a refused one."""
    r: Any = request
    if isinstance(out, Refusal):
        if redirect:
            loc = login_redirect_url(out.status, request.method, request.META.get("HTTP_ACCEPT"),
                                     request.META.get("HTTP_AUTHORIZATION"), request.get_full_path(), saml)
            if loc:
                out = login_redirect(out, loc)
        return _response(out)
    r.svc_claims = out.claims
    r.svc_decision = out.decision
    return None


# The client and the sign-in settings of views given none, made from the
# settings when a request first needs them.
_default_client = once(client_from_settings)
_default_saml = once(saml_from_settings)


def _response(r: Refusal) -> HttpResponse:
    resp = HttpResponse(r.body(), status=r.status)
    for k, v in r.all_headers().items():
        resp[k] = v
    return resp


def plan_filter(plan: Plan | Condition, fields: dict[str, str] | None = None) -> Q:
    """The ``Q`` of a resource plan (or of a condition) for
    ``Model.objects.filter``: every row for an always allowed plan, none
    for an always denied one, else the condition. ``fields`` maps a plan's
    fields (``"id"``, ``"tenant"``, ``"attributes.owner"``) to lookup paths
    (``"owner__username"``, ``"attributes__owner"`` for a JSONField); a
    field it does not name is the model field ``id``, ``tenant`` or the
    attribute's own name.

    A missing field (NULL) makes every comparison false and ``not`` true,
    as the sidecar's SQL has it: a comparison is ``Q(f=v)`` and Django's
    negation of it, ``NOT (f = v AND f IS NOT NULL)``, holds for NULL; ``ne``
    is ``~Q(f=v) & Q(f__isnull=False)``.

    Comparisons are byte for byte on every database, as the policy's and
    the sidecar's SQL are: the lookups are ``__svc_exact``, ``__svc_in``,
    ``__svc_lt``…, ``__svc_startswith``, ``__svc_endswith`` and
    ``__svc_contains``, which this module registers on every field and on
    JSONField keys. They are Django's own lookups except where those follow
    the database's collation: on SQLite, whose LIKE ignores ASCII case, the
    string tests are GLOB; on MySQL and MariaDB, whose default collations
    ignore case, accents and trailing spaces, a compared string is binary;
    on PostgreSQL an ordering of a column's string is in collation C. A
    number or boolean is compared by Django's own lookup.
    """
    if isinstance(plan, Plan):
        if plan.kind == ALWAYS_ALLOWED:
            return _Q_TRUE
        if plan.condition is None:
            return _Q_FALSE
        plan = plan.condition
    return _q(plan, fields or {})


# Django drops an empty Q from a filter, negated or not: true and false
# need lookups of their own. The primary key is never NULL; no row's is in
# an empty list.
_Q_TRUE = Q(pk__isnull=False)
_Q_FALSE = Q(pk__in=[])

class _Svc:
    """A plan's comparison as the policy makes it, byte for byte: Django's
    own lookup (its SQL, the lookup name it was registered under aside)
    except where that follows the database's collation. On SQLite, whose
    LIKE ignores ASCII case, a string test is GLOB with the sidecar's
    pattern; on MySQL, whose default collations ignore case, accents and
    trailing spaces in = and IN, a compared string is CAST(%s AS
    BINARY); on PostgreSQL, which orders strings by the column's
    collation, an ordering is COLLATE "C"."""

    svc_base = ""  # the Django lookup it is
    svc_op = ""  # the plan's op of a string test, else ""
    # A column's compared string is CAST(%s AS BINARY) on MySQL. A
    # JSONField key (svc_cast False) is cast on MariaDB only, whose JSON is
    # text in the column's collation: MySQL compares JSON strings byte for
    # byte already.
    svc_cast = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # SQL is made by Django's lookup of that name (its operator, casts).
        self.lookup_name = self.svc_base

    def as_sqlite(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        rhs = getattr(self, "rhs")
        if not self.svc_op:
            return getattr(super(), "as_sql")(compiler, connection)  # type: ignore[no-any-return]
        if not isinstance(rhs, str):
            raise TypeError(f"svc_sdk.django: {self.svc_op} takes a string, not {type(rhs).__name__}")
        lhs_sql, params = getattr(self, "process_lhs")(compiler, connection)
        return f"{lhs_sql} GLOB %s", [*params, like_pattern("sqlite", self.svc_op, rhs)]

    def as_postgresql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        # PostgreSQL orders strings by the column's collation, rarely C.
        if not self.svc_cast or self.svc_base not in ("lt", "lte", "gt", "gte") or \
                not isinstance(getattr(self, "rhs"), str):
            return getattr(super(), "as_sql")(compiler, connection)  # type: ignore[no-any-return]
        lhs_sql, params = getattr(self, "process_lhs")(compiler, connection)
        rhs_sql, rhs_params = getattr(self, "process_rhs")(compiler, connection)
        rhs_sql = getattr(self, "get_rhs_op")(connection, f'{rhs_sql} COLLATE "C"')
        return f"{lhs_sql} {rhs_sql}", [*params, *rhs_params]

    def as_mysql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        rhs = getattr(self, "rhs")
        values = list(rhs) if isinstance(rhs, (list, tuple, set)) else [rhs]
        mariadb_key = not self.svc_cast and getattr(connection, "mysql_is_mariadb", False)
        if not (self.svc_cast or mariadb_key) or self.svc_op or not values or \
                not all(isinstance(v, str) for v in values):
            # MySQL's string tests are LIKE BINARY already.
            return getattr(super(), "as_sql")(compiler, connection)  # type: ignore[no-any-return]
        # BuiltinLookup.as_sql, one side made binary: the value of a
        # column (so that its index still serves), the key of a JSONField.
        lhs_sql, params = getattr(self, "process_lhs")(compiler, connection)
        rhs_sql, rhs_params = getattr(self, "process_rhs")(compiler, connection)
        if mariadb_key:
            lhs_sql = f"CAST({lhs_sql} AS BINARY)"
        else:
            rhs_sql = rhs_sql.replace("%s", "CAST(%s AS BINARY)")
        return f"{lhs_sql} {getattr(self, 'get_rhs_op')(connection, rhs_sql)}", [*params, *rhs_params]


# Plan op -> the name of the lookup (svc_<Django's>) and Django's lookup.
_SVC_LOOKUPS: dict[str, tuple[str, Any]] = {}
for _op, _base, _key_base in (
        ("eq", lookups.Exact, djson.KeyTransformExact), ("in", lookups.In, djson.KeyTransformIn),
        ("lt", lookups.LessThan, djson.KeyTransformLt), ("le", lookups.LessThanOrEqual, djson.KeyTransformLte),
        ("gt", lookups.GreaterThan, djson.KeyTransformGt), ("ge", lookups.GreaterThanOrEqual, djson.KeyTransformGte),
        ("starts_with", lookups.StartsWith, None), ("ends_with", lookups.EndsWith, None),
        ("contains", lookups.Contains, None)):
    _name = "svc_" + _base.lookup_name
    _attrs = {"lookup_name": _name, "svc_base": _base.lookup_name, "svc_op": _op if _op in STRING_TESTS else ""}
    Field.register_lookup(type("_Svc" + _base.__name__, (_Svc, _base), _attrs))
    # A JSONField key: Django's own lookups on keys, which compare JSON
    # strings byte for byte on MySQL (utf8mb4_bin) and elsewhere; the
    # string tests on the key's text.
    _key_bases = (_key_base,) if _key_base else (djson.KeyTransformTextLookupMixin, _base)
    KeyTransform.register_lookup(type("_SvcKey" + _base.__name__, (_Svc, *_key_bases), {**_attrs, "svc_cast": False}))
    _SVC_LOOKUPS[_op] = (_name, _base)


def _lookup_path(path: str, op: str, values: list[Any]) -> str:
    """path's lookup for op of values: ours for strings (byte for byte),
    Django's own for numbers and booleans (a JSONField key's number is
    compared as a number, not as text)."""
    name, base = _SVC_LOOKUPS[op]
    if op in STRING_TESTS or all(isinstance(v, str) for v in values):
        return f"{path}__{name}"
    return f"{path}__{base.lookup_name}"


def _q(c: Condition, fields: dict[str, str]) -> Q:
    if c.op in ("and", "or"):
        if not c.args:
            return _Q_TRUE if c.op == "and" else _Q_FALSE
        out = _q(c.args[0], fields)
        for a in c.args[1:]:
            out = (out & _q(a, fields)) if c.op == "and" else (out | _q(a, fields))
        return out
    if c.op == "not":
        assert c.arg is not None
        return ~_q(c.arg, fields)
    path = fields.get(c.field) or (c.field[len(ATTRIBUTE_PREFIX):] if c.field.startswith(ATTRIBUTE_PREFIX) else c.field)
    if c.op == "in":
        vals = [v for v in c.values if v is not None]
        has_null = len(vals) < len(c.values)
        if not vals:
            return Q(**{f"{path}__isnull": True}) if has_null else _Q_FALSE
        q = Q(**{_lookup_path(path, "in", vals): vals})
        return (q | Q(**{f"{path}__isnull": True})) if has_null else q & Q(**{f"{path}__isnull": False})
    if c.value is None and c.op in ("eq", "ne"):
        return Q(**{f"{path}__isnull": c.op == "eq"})
    present = Q(**{f"{path}__isnull": False})
    if c.op == "ne":
        return ~Q(**{_lookup_path(path, "eq", [c.value]): c.value}) & present
    q = Q(**{_lookup_path(path, c.op, [c.value]): c.value})
    # False, not NULL, where the field is missing: Django's negation adds
    # "IS NOT NULL" for a nullable column, but not for a JSONField's key,
    # where NOT of a NULL comparison would leave out a row it should list.
    return q & present
