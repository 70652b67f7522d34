"""The answer each refused decision maps to, the same in every framework."""

import unittest

from svc_sdk._web import bearer_token, excluded, refusal_of


class RefusalTest(unittest.TestCase):
    def test_status_by_reason(self):
        invalid = 'Bearer error="invalid_token", error_description="{}"'
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

    def test_excluded(self):
        ex = ("/healthz", "/static/*")
        cases = [("/healthz", True), ("/healthz/x", False), ("/static/a.css", True), ("/static", False),
                 ("/orders", False)]
        for path, want in cases:
            with self.subTest(path):
                self.assertEqual(excluded(path, ex), want)


if __name__ == "__main__":
    unittest.main()
