"""When each consumer group was last seen by this reader: its last pull (either mode) or offset
commit, in wall-clock ms. A group is live while one of its consumers pulls or commits within a
timeout (``mqstore groups reset`` refuses a live group's reset unless forced, as Kafka does); each
reader knows only the requests it served, so the caller asks every reader (``group_activity``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mqstore.ipc.wire import requests
from mqstore.ipc.wire.replies import GroupActivityReply

MAX_GROUPS = 100_000  # a client inventing group names costs this much memory at most


class GroupActivity:
    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self.last_seen_ms: dict[str, int] = {}

    def saw(self, group: str) -> None:
        if group and (group in self.last_seen_ms or len(self.last_seen_ms) < MAX_GROUPS):
            self.last_seen_ms[group] = self._now_ms()

    def op_group_activity(self, identity: bytes, request_id: Any, request: requests.GroupActivity) -> dict[str, Any]:
        return GroupActivityReply(dict(self.last_seen_ms), self._now_ms()).encode(request_id)
