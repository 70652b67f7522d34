"""The SDK's types read the local API's JSON shapes as the sidecar writes them.

The golden files are the Go wire package's (wire/testdata), which
the Go tests marshal from the sidecar's own types: a field renamed on either
side fails here.
"""

import dataclasses
import json
import pathlib
import unittest

from svc_sdk._web import API_KEY_FAILURES, TOKEN_FAILURES, Refusal, refusal_of
from svc_sdk.client import Decision, _error_of

GOLDEN = pathlib.Path(__file__).resolve().parents[3] / "wire" / "testdata"


def golden(name: str) -> dict:
    with open(GOLDEN / name, encoding="utf-8") as f:
        return json.load(f)


class DenyBodyGoldenTest(unittest.TestCase):
    def test_refusal_writes_the_deny_body(self):
        g = golden("deny-body.json")
        r = refusal_of(g["reason"], g["deny_reasons"], g["decision_id"])
        self.assertEqual(r.payload(), g)
        self.assertEqual(json.loads(r.body()), g)

    def test_every_key_is_a_field(self):
        g = golden("deny-body.json")
        decision = {f.name for f in dataclasses.fields(Decision)}
        self.assertLessEqual(set(g), decision, "deny body keys missing from Decision")
        refusal = {f.name for f in dataclasses.fields(Refusal)}
        self.assertLessEqual(set(g) - {"allow"}, refusal, "deny body keys missing from Refusal")


class ErrorEnvelopeGoldenTest(unittest.TestCase):
    def test_error_of_reads_code_and_message(self):
        g = golden("error.json")
        self.assertEqual(set(g), {"error"})
        self.assertEqual(set(g["error"]), {"code", "message"})
        raw = (GOLDEN / "error.json").read_bytes()
        self.assertEqual(_error_of(raw), (g["error"]["code"], g["error"]["message"]))


if __name__ == "__main__":
    unittest.main()


class FailuresGoldenTest(unittest.TestCase):
    """The credential failures are the sidecar's (reason/testdata/failures.json)."""

    def test_lists_are_the_sidecars(self):
        with open(GOLDEN.parent.parent / "reason" / "testdata" / "failures.json", encoding="utf-8") as f:
            g = json.load(f)
        self.assertEqual(TOKEN_FAILURES, frozenset(g["token_failures"]))
        self.assertEqual(API_KEY_FAILURES, frozenset(g["api_key_failures"]))
