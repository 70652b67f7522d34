"""The Django settings of the test run, shared by the modules that use
Django (settings are configured once per process): test_django's URLs and
middleware, an in-memory SQLite database for test_plan's models, and
MariaDB and PostgreSQL ones that test_plan starts."""

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
        # "mysql" and "postgres" are servers test_plan starts, their ports set then.
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
                   "mysql": {"ENGINE": "django.db.backends.mysql", "NAME": "test", "USER": "root",
                             "HOST": "127.0.0.1", "PORT": "0", "OPTIONS": {"charset": "utf8mb4"},
                             "TEST": {"MIGRATE": False}},
                   "postgres": {"ENGINE": "django.db.backends.postgresql", "NAME": "postgres", "USER": "postgres",
                                "HOST": "127.0.0.1", "PORT": "0", "TEST": {"MIGRATE": False}}},
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()
