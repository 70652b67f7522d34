"""The package as it is published: a wheel built with the PEP 517 builder,
installed into empty virtual environments and imported from there; and
mypy --strict on the sources and on a consumer of the installed wheel.

The builder (Debian's python3-build), venv (python3-venv) and mypy
(python3-mypy) are in scripts/test-packages.txt. A missing one skips the
test, or fails it under CI, as the Go suites treat their peers.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

import harness

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# mypy's cache (it checks each file's hash, so a stale entry is never used):
# the standard library is analyzed once, not on every run.
MYPY_CACHE = os.path.join(tempfile.gettempdir(), "svc-sdk-mypy-cache")


def need(module: str, package: str) -> None:
    if importlib.util.find_spec(module) is None:
        harness.missing(f"python module {module}", f"apt-get install {package}")


def run(args: list[str], cwd: str, timeout: float = 300) -> str:
    p = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p.stdout


class WheelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        need("build", "python3-build")
        need("venv", "python3-venv")
        cls.dir = tempfile.mkdtemp(prefix="svc-sdk-wheel-")
        # Built from a copy: setuptools writes build/ and *.egg-info next
        # to the sources.
        src = os.path.join(cls.dir, "src")
        shutil.copytree(SDK, src, ignore=shutil.ignore_patterns("tests", "examples", "__pycache__", ".mypy_cache",
                                                                "build", "*.egg-info"))
        run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", os.path.join(cls.dir, "dist")], src)
        wheels = glob.glob(os.path.join(cls.dir, "dist", "*.whl"))
        assert len(wheels) == 1, wheels
        cls.wheel = wheels[0]

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.dir, ignore_errors=True)

    def venv(self, name: str, system_site: bool) -> str:
        """A new virtual environment with the wheel installed; its python."""
        path = os.path.join(self.dir, name)
        args = [sys.executable, "-m", "venv"] + (["--system-site-packages"] if system_site else []) + [path]
        run(args, self.dir)
        py = os.path.join(path, "bin", "python")
        run([py, "-m", "pip", "install", "--no-index", "--no-deps", "--quiet", "--disable-pip-version-check",
             self.wheel], self.dir)
        return py

    def test_wheel_contents(self) -> None:
        with zipfile.ZipFile(self.wheel) as z:
            names = set(z.namelist())
            meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
            metadata = z.read(meta).decode()
        for f in ("__init__.py", "client.py", "_pool.py", "_web.py", "saml.py", "flask.py", "fastapi.py", "plan.py",
                  "sqlalchemy.py",
                  "django.py", "identity.py", "py.typed"):
            self.assertIn(f"svc_sdk/{f}", names)
        self.assertFalse([n for n in names if "tests/" in n or n.endswith(".pyc")], names)
        self.assertIn("Requires-Python: >=3.11", metadata)
        self.assertIn("Classifier: Typing :: Typed", metadata)
        self.assertIn("Provides-Extra: django", metadata)
        self.assertIn("Provides-Extra: identity", metadata)
        self.assertRegex(metadata, r"Requires-Dist: cryptography ?\(?>=3\.4\)? ?; extra == ['\"]identity['\"]")
        self.assertIn("# svc_sdk", metadata)  # the README is the long description

    def test_imports_without_frameworks(self) -> None:
        # An empty environment: the standard library and the wheel only.
        py = self.venv("bare", system_site=False)
        out = run([py, "-c", "import svc_sdk, svc_sdk.saml, json, sys\n"
                   "from svc_sdk import Client\n"
                   "from svc_sdk.saml import SamlConfig, login_url\n"
                   "c = SamlConfig.load(env={}, config_file=None)\n"
                   "print(json.dumps([svc_sdk.__file__, svc_sdk.__version__, login_url('/a', c)]))\n"
                   "try:\n    import svc_sdk.flask\nexcept ImportError as e:\n    print(e.name)\n"
                   "import svc_sdk.identity\n"
                   "try:\n    svc_sdk.identity.IdentityVerifier('http://127.0.0.1:7700/.well-known/jwks.json')\n"
                   "except ImportError as e:\n    print(e.name, 'svc_sdk[identity]' in str(e))\n"], self.dir)
        lines = out.splitlines()
        self.assertIn(os.path.join(self.dir, "bare"), lines[0])
        self.assertIn('"/auth/saml/login?return_to=%2Fa"', lines[0])
        self.assertEqual(lines[1], "flask", "the frameworks are optional, not dependencies")
        # svc_sdk.identity imports without cryptography; a verifier says
        # what to install.
        self.assertEqual(lines[2], "cryptography True", out)

    def test_imports_with_frameworks(self) -> None:
        py = self.venv("frameworks", system_site=True)
        out = run([py, "-c", "import svc_sdk, svc_sdk.flask, svc_sdk.fastapi, svc_sdk.django, svc_sdk.saml, svc_sdk.sqlalchemy\n"
                   "print(svc_sdk.__file__)\n"], self.dir)
        self.assertTrue(out.strip().startswith(os.path.join(self.dir, "frameworks")), out)

    def test_consumer_type_checks_against_installed_wheel(self) -> None:
        need("mypy", "python3-mypy")
        py = self.venv("typed", system_site=True)
        consumer = os.path.join(self.dir, "consumer.py")
        with open(consumer, "w") as f:
            f.write('''
from svc_sdk import Client, Decision, Plan, TokenDecision, to_sql
from svc_sdk.saml import SamlConfig, login_url, wants_login_redirect

client = Client("http://127.0.0.1:7700", "closed", 0.5, config_file=None)


def check(token: str) -> bool:
    t: TokenDecision = client.validate_token(token)
    d: Decision = client.authorize(token, "orders:read", resource_id="42")
    return t.allowed and d.allow


def where(token: str) -> tuple[str, list[object]]:
    p: Plan = client.plan_resources("orders:read", "orders", "sqlite", token=token)
    s = to_sql(p, "postgres", {"attributes.owner": "owner_id"})
    return (p.sql.where if p.conditional else s.where), list(s.params)


saml: SamlConfig = SamlConfig.load(env={}, config_file=None)
url: str = login_url("/orders", saml)
browser: bool = wants_login_redirect("GET", "text/html", None)
wrong: int = client.timeout  # error: a float is not an int
''')
        p = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", MYPY_CACHE,
                            "--python-executable", py, consumer], cwd=self.dir, capture_output=True, text=True,
                           timeout=600)
        # The one deliberate error proves the installed annotations were
        # read (without py.typed mypy would not analyze the package).
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        errors = [line for line in p.stdout.splitlines() if ": error:" in line]
        self.assertEqual(len(errors), 1, p.stdout)
        self.assertRegex(errors[0], r'consumer\.py:\d+: error: Incompatible types in assignment '
                                    r'\(expression has type "float", variable has type "int"\)')


class MypyStrictTest(unittest.TestCase):
    def test_sources_are_strict_clean(self) -> None:
        need("mypy", "python3-mypy")
        # pyproject.toml's [tool.mypy] sets strict mode.
        p = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", MYPY_CACHE, "svc_sdk"], cwd=SDK,
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("Success: no issues found", p.stdout)


if __name__ == "__main__":
    unittest.main()
