"""The Django settings of the test run, shared by the modules that use
Django (settings are configured once per process): test_django's URLs and
middleware, and an in-memory SQLite database for test_plan's models."""

import django
from django.conf import settings


def setup() -> None:
    if settings.configured:
        return
    settings.configure(
        DEBUG=False,
        SECRET_KEY="svc-sdk-tests-only",
        ALLOWED_HOSTS=["testserver"],
        ROOT_URLCONF="test_django",
        MIDDLEWARE=["svc_sdk.django.SvcMiddleware"],
        SVC_EXCLUDE=("/healthz",),
        INSTALLED_APPS=[],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()
