"""The answer each refused decision maps to, the same in every framework."""

import unittest

from svc_sdk._web import api_key, bearer_token, excluded, login_redirect, refusal_of, request_token


class RefusalTest(unittest.TestCase):
    def test_status_by_reason(self):
        invalid = 'Bearer error="invalid_token", error_description="{}"'
        invalid_key = 'ApiKey error="invalid_key", error_description="{}"'
        cases = [
            ("policy-deny", ["no-role"], None, 403, {}),
            ("tenant-mismatch", [], None, 403, {}),
            ("rate-limited", ["rate-limited"], 2.2, 429, {"Retry-After": "3"}),
            ("rate-limited", ["rate-limited"], 0.1, 429, {"Retry-After": "1"}),
            ("jwks-unavailable", [], None, 503, {}),
            ("policy-error", [], None, 503, {}),
            ("token-missing", [], None, 401, {"WWW-Authenticate": "Bearer"}),
            ("token-expired", [], None, 401, {"WWW-Authenticate": invalid.format("token-expired")}),
            ("signature-invalid", [], None, 401, {"WWW-Authenticate": invalid.format("signature-invalid")}),
            ("unknown-kid", [], None, 401, {"WWW-Authenticate": invalid.format("unknown-kid")}),
            ("audience-mismatch", [], None, 401, {"WWW-Authenticate": invalid.format("audience-mismatch")}),
            ("api-key-malformed", [], None, 401, {"WWW-Authenticate": invalid_key.format("api-key-malformed")}),
            ("api-key-unknown", [], None, 401, {"WWW-Authenticate": invalid_key.format("api-key-unknown")}),
            ("api-key-revoked", [], None, 401, {"WWW-Authenticate": invalid_key.format("api-key-revoked")}),
            ("api-key-expired", [], None, 401, {"WWW-Authenticate": invalid_key.format("api-key-expired")}),
            ("some-future-reason", [], None, 403, {}),
        ]
        for reason, deny, retry, status, headers in cases:
            with self.subTest(reason):
                r = refusal_of(reason, deny, "d-1", retry)
                self.assertEqual((r.status, r.headers), (status, headers))
                self.assertEqual(r.payload(), {"allow": False, "deny_reasons": deny, "reason": reason,
                                               "decision_id": "d-1"})

    def test_bearer_token(self):
        cases = [(None, ""), ("", ""), ("Bearer abc", "abc"), ("bearer  abc ", "abc"), ("Basic abc", ""),
                 ("Bearer", "")]
        for header, want in cases:
            with self.subTest(header):
                self.assertEqual(bearer_token(header), want)

    def test_api_key(self):
        # (Authorization, X-Api-Key, key): the rule of the sidecar's checks
        # (wire.APIKeyFromHeaders); None is a header the request lacks.
        cases = [
            (None, None, ""), (None, " svck_a_b ", "svck_a_b"), ("ApiKey svck_a_b", None, "svck_a_b"),
            ("apikey\tsvck_a_b ", "svck_other", "svck_a_b"), (" APIKEY  svck_a_b", None, "svck_a_b"),
            ("Bearer x", "svck_a_b", ""), ("", "svck_a_b", ""), ("ApiKey", None, ""), ("ApiKeyx y", None, ""),
            ("ApiKey ", "svck_a_b", ""),
        ]
        for auth, x, want in cases:
            with self.subTest(f"{auth!r}, {x!r}"):
                self.assertEqual(api_key(auth, x), want)

    def test_request_token(self):
        # (Authorization, X-Api-Key, session cookie, credential)
        cases = [
            ("Bearer t", "svck_a_b", "s", "t"), ("ApiKey svck_a_b", None, "s", "svck_a_b"),
            (None, "svck_a_b", "s", "svck_a_b"), (None, None, "s", "s"), (None, " ", "s", "s"),
            ("Basic x", "svck_a_b", "s", ""),
        ]
        for auth, x, session, want in cases:
            with self.subTest(f"{auth!r}, {x!r}"):
                self.assertEqual(request_token(auth, session, x), want)

    def test_no_login_redirect_for_a_refused_key(self):
        # A browser sends no API key on its own: a refused key is answered.
        for reason, status in (("api-key-revoked", 401), ("token-expired", 302)):
            with self.subTest(reason):
                self.assertEqual(login_redirect(refusal_of(reason), "/login").status, status)

    def test_excluded(self):
        ex = ("/healthz", "/static/*")
        cases = [("/healthz", True), ("/healthz/x", False), ("/static/a.css", True), ("/static", False),
                 ("/orders", False)]
        for path, want in cases:
            with self.subTest(path):
                self.assertEqual(excluded(path, ex), want)


if __name__ == "__main__":
    unittest.main()
