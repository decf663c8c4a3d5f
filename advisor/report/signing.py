"""Signed results: a saved `advisor analyze --json` result the gate can trust.

`advisor gate` takes a trace (it analyses it itself) or a saved JSON result, whose numbers it can
only check against each other: a result edited by hand so that it still agrees with itself (every
steady step scaled, the median and counts rewritten to match) passes the schema and the
consistency checks. Where results cross a trust boundary (a pull request's CI job writes the
candidate's, a stored artifact holds the baseline's), the pipeline sets a secret,
``ADVISOR_RESULT_KEY``: every result advisor writes then carries an HMAC-SHA256 of its content
under that key (``signature``), and a gate run with the key refuses a saved result whose
signature is missing or does not match (exit 2). Without the key nothing changes.

The MAC is the standard library's `hmac` (a keyed hash needs no dependency); it covers the
result's canonical form (keys sorted, no whitespace, as parsed back), so the indentation of the
file does not matter and any change to a value does.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any

KEY_ENV = "ADVISOR_RESULT_KEY"
ALGORITHM = "hmac-sha256"


def result_key() -> bytes | None:
    """The signing key from the environment, or None where none is set (or it is empty)."""
    key = os.environ.get(KEY_ENV, "")
    return key.encode("utf-8") if key else None


def _canonical(data: dict[str, Any]) -> bytes:
    body = {k: v for k, v in data.items() if k != "signature"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def signature(data: dict[str, Any], key: bytes) -> dict[str, str]:
    """The ``signature`` member for ``data`` (its other members) under ``key``."""
    return {"algorithm": ALGORITHM,
            "value": hmac.new(key, _canonical(data), hashlib.sha256).hexdigest()}


def check(data: dict[str, Any], key: bytes, path: str) -> str | None:
    """Why ``data`` is not a result signed with ``key`` (None: it is)."""
    sig = data.get("signature")
    if not isinstance(sig, dict) or sig.get("algorithm") != ALGORITHM \
            or not isinstance(sig.get("value"), str):
        return (f"{path}: unsigned advisor result, refused: {KEY_ENV} is set, so a saved result "
                "must be one advisor wrote with that key (or give the trace)")
    try:
        expected = signature(data, key)["value"]
    except ValueError:  # a value JSON cannot carry (NaN): not what advisor wrote
        expected = ""
    if not hmac.compare_digest(expected, sig["value"]):
        return (f"{path}: the advisor result's signature does not match its content under "
                f"{KEY_ENV}: edited after advisor wrote it, or signed with another key; refused")
    return None
