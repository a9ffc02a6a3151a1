"""The one JSON spelling that ids, digests and build Value nodes use (standard library only)."""
from __future__ import annotations

import json
from typing import Any


def canonical_json(obj: Any) -> str:
    """Key-sorted, whitespace-free JSON."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))
