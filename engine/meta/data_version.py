"""RocketMQ's ``DataVersion``: the version a metadata table (topics, consumer offsets, delay offsets)
carries on disk and on the wire, ``{"stateVersion": S, "timestamp": ms, "counter": N}``. A slave
compares its master's with the one it adopted last to tell whether a table changed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class DataVersion:
    state_version: int = 0
    timestamp_ms: int = 0
    counter: int = 0

    def to_json(self) -> dict[str, int]:
        return {"stateVersion": self.state_version, "timestamp": self.timestamp_ms, "counter": self.counter}

    def text(self) -> str:
        """The compact JSON a request header carries (GET_ALL_TOPIC_CONFIG's ``dataVersion``)."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, doc: Any) -> DataVersion:
        """From a decoded ``dataVersion`` (absent: all zeros); ValueError on one that is not."""
        if doc is None:
            return cls()
        if not isinstance(doc, dict):
            raise ValueError(f"dataVersion is not an object: {doc!r}"[:200])
        values = [doc.get(key, 0) for key in ("stateVersion", "timestamp", "counter")]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise ValueError(f"dataVersion holds a non-integer: {doc!r}"[:200])
        return cls(*values)
