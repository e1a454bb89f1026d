"""A slave's answers on the writer's ingress: the ipc clients' door to a broker stays where it is, and
a SLAVE, which runs no writer, answers there itself.

Sends, encoded sends and topic changes are refused with SERVICE_NOT_AVAILABLE and a reason naming the
master (RocketMQ's slave refuses puts with the same status); ``encoding`` too (it serves encoded sends
only). ``ping`` (the log's end here) and ``topics`` (the table as the metadata sync keeps it) are
answered from the local files. A request that does not decode is BAD_REQUEST, another op UNKNOWN_OP,
as on the writer.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqstore.actors.clock import wall_ms
from mqstore.engine.log.message import PutStatus
from mqstore.engine.meta.topics import TopicTable
from mqstore.ipc.wire import requests, schema
from mqstore.ipc.wire.replies import SendEncodedReply, SendReply, TopicsReply, WriterPingReply

REFUSED = PutStatus.SERVICE_NOT_AVAILABLE.value


class SlaveIngress:
    def __init__(self, store_dir: Path, master_address: str, log_end: Callable[[], int],
                 max_request_bytes: int) -> None:
        self.store_dir = store_dir
        self.reason = f"this broker is a SLAVE of {master_address}: send to its master"
        self._log_end = log_end
        self.max_request_bytes = max_request_bytes
        self.refused = 0  # sends refused since the actor started

    def answer(self, frame: bytes, parts: list[memoryview]) -> dict[str, Any]:
        """The reply to one request's map (and, for a send_encoded, its parts)."""
        request_id: Any = None
        try:
            message = schema.unpack_message(frame, parts, max_bytes=self.max_request_bytes)
            request_id = message.get("id")
            request = requests.decode_request(message, requests.WRITER)
        except requests.UnknownOpError as exc:
            return schema.error_reply(request_id, schema.UNKNOWN_OP, str(exc))
        except schema.SchemaError as exc:
            return schema.error_reply(request_id, schema.BAD_REQUEST, str(exc))
        if isinstance(request, requests.Send):
            self.refused += len(request.msgs)
            return SendReply([{"status": REFUSED, "reason": self.reason} for _ in request.msgs]).encode(request_id)
        if isinstance(request, requests.SendEncoded):
            self.refused += 1
            return SendEncodedReply(b"", REFUSED, self.reason).encode(request_id)
        if isinstance(request, requests.Ping):
            return WriterPingReply(os.getpid(), self._log_end()).encode(request_id)
        if isinstance(request, requests.Topics):
            table = TopicTable.load(self.store_dir, wall_ms)
            return TopicsReply({t.name: t.queue_count for t in table.topics.values()}).encode(request_id)
        # create_topic, delete_topic, encoding: what only a master's writer does
        return schema.error_reply(request_id, REFUSED, self.reason)
