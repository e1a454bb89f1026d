"""The commitlog's write path, for its single writer: validate and encode messages, assign queue
offsets, append them in one copy per file, and say what each derived file must learn.

Dispatching is the caller's business: the embedded store applies the requests at once, the
commitlog-writer actor publishes them to the builder processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mqstore.engine import _native
from mqstore.engine.batch.dispatch import DispatchRequest
from mqstore.engine.batch.record_batch import BatchOutcome, CheckedBatch
from mqstore.engine.config import StoreConfig
from mqstore.engine.delay.table import tags_code_of
from mqstore.engine.log.commitlog import CommitLog, RecordTooLargeError
from mqstore.engine.log.message import Message, PutResult, PutStatus, Refusal, encode_message
from mqstore.engine.log.msgid import UniqKeyGenerator, offset_msg_id
from mqstore.engine.log.record import PROP_KEYS, PROP_TAGS, PROP_UNIQ_KEY, SYSFLAG_TX_COMMIT, SYSFLAG_TX_MASK

MAX_QUEUE_ID = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    results: list[PutResult]          # one per message, in the order given
    requests: list[DispatchRequest]   # one per record appended, in commitlog order
    store_ms: int


def index_keys(message: Message) -> tuple[str, ...]:
    """The keys the index gets for ``message``: its own, else a KEYS property it carries (a message
    relayed with its properties as given, as recovery reads them back from the record)."""
    own = tuple(k for k in message.keys if k)
    return own or tuple(k for k in message.properties.get(PROP_KEYS, "").split(" ") if k)


def _gets_queue_offset(sys_flag: int) -> bool:
    """Prepared and rolled-back transaction records take no queue offset (and get no entry)."""
    return sys_flag & SYSFLAG_TX_MASK in (0, SYSFLAG_TX_COMMIT)


class CommitLogWriter:
    def __init__(self, commitlog: CommitLog, config: StoreConfig, next_queue_offsets: dict[tuple[str, int], int],
                 uniq: UniqKeyGenerator) -> None:
        self.commitlog = commitlog
        self.config = config
        self.next_queue_offsets = next_queue_offsets
        self._uniq = uniq

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        return self.next_queue_offsets.get((topic, queue_id), 0)

    def write(self, messages: Sequence[Message], queue_ids: Sequence[int], now_ms: int) -> WriteOutcome:
        results: list[PutResult | None] = [None] * len(messages)
        batch = bytearray()
        accepted: list[int] = []
        sizes: list[int] = []
        uniq_keys: list[str] = []
        for i, (message, qid) in enumerate(zip(messages, queue_ids, strict=True)):
            if not 0 <= qid <= MAX_QUEUE_ID:
                results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL, reason=f"queue id {qid} out of range")
                continue
            uniq = message.properties.get(PROP_UNIQ_KEY) or self._uniq.next()
            encoded = encode_message(message, queue_id=qid, born_ms=now_ms, store_host=self.config.store_host,
                                     uniq_key=uniq, prop_crc=self.config.geometry.prop_crc,
                                     max_body_bytes=self.config.max_body_bytes)
            if isinstance(encoded, Refusal):
                results[i] = PutResult(encoded.status, reason=encoded.reason)
                continue
            accepted.append(i)
            sizes.append(len(encoded))
            uniq_keys.append(uniq)
            batch += encoded
        queue_offsets = self._assign([(messages[i].topic, queue_ids[i], messages[i].sys_flag) for i in accepted])
        phys_offsets, failure = self._append(batch, sizes, queue_offsets, now_ms)
        requests: list[DispatchRequest] = []
        for n, i in enumerate(accepted):
            if n >= len(phys_offsets):
                results[i] = PutResult(failure[0], reason=failure[1])
                continue
            message, qid = messages[i], queue_ids[i]
            props = dict(message.properties)
            if message.tags:
                props[PROP_TAGS] = message.tags
            code = tags_code_of(message.topic, props, now_ms, self.config.delay_levels)
            requests.append(DispatchRequest(message.topic, qid, phys_offsets[n], sizes[n], code, now_ms,
                                            queue_offsets[n], index_keys(message), uniq_keys[n], message.sys_flag))
            results[i] = PutResult(PutStatus.PUT_OK, offset_msg_id(self.config.store_host, phys_offsets[n]),
                                   phys_offsets[n], qid, queue_offsets[n], uniq_keys[n])
        for n in range(len(accepted) - 1, len(phys_offsets) - 1, -1):  # give back offsets not written
            message = messages[accepted[n]]
            if _gets_queue_offset(message.sys_flag):
                self.next_queue_offsets[(message.topic, queue_ids[accepted[n]])] = queue_offsets[n]
        return WriteOutcome([r for r in results if r is not None], requests, now_ms)

    def write_batch(self, records: bytes | memoryview, batch: CheckedBatch, topics: Sequence[str],
                    queue_ids: np.ndarray[Any, Any], now_ms: int) -> BatchOutcome:
        """Append a producer-encoded batch (already checked): queue offsets assigned per (topic, queue)
        (``assign_queue_offsets``), one copy per file, fields stamped in place. Records after a
        failure (a full disk creating the next file) are not written and give their queue offsets
        back."""
        queue_offsets, groups, group_of = self.assign_queue_offsets(batch.columns["topic"], queue_ids, topics)
        appended: list[np.ndarray[Any, Any]] = []  # each file's phys offsets, once written
        failure = (PutStatus.PUT_OK, "")
        try:
            self.commitlog.append_checked(records, batch.starts, batch.columns["size"], batch.store_ms_pos, queue_ids,
                                          queue_offsets, now_ms, sealed=self.config.geometry.prop_crc,
                                          appended=appended)
        except RecordTooLargeError as exc:
            failure = (PutStatus.MESSAGE_ILLEGAL, str(exc))
        except OSError as exc:
            failure = (PutStatus.CREATE_MAPPED_FILE_FAILED, f"cannot create a commitlog file: {exc}")
        phys_offsets = appended[0] if len(appended) == 1 else np.concatenate([np.empty(0, np.int64), *appended])
        written = len(phys_offsets)
        if written < len(queue_offsets):  # give back the offsets of records not written
            kept = np.bincount(group_of[:written], minlength=len(groups))
            for (key, base), n in zip(groups, kept.tolist(), strict=True):
                self.next_queue_offsets[key] = base + n
        return BatchOutcome(phys_offsets, queue_offsets[:written], now_ms, failure)

    def assign_queue_offsets(self, topic_ids: np.ndarray[Any, Any], queue_ids: np.ndarray[Any, Any],
                             topics: Sequence[str]) -> tuple[np.ndarray[Any, Any], list[tuple[tuple[str, int], int]],
                                                             np.ndarray[Any, Any]]:
        """Each record's queue offset, counting on per (topic, queue) in batch order: the records
        grouped in one compiled call (``_native.group_ranks``), one dict lookup a group. Returns the
        offsets, each group's (topic, queue) and first offset, and each record's group."""
        n = len(queue_ids)
        keys = (topic_ids.astype(np.int64) << 32) | queue_ids
        out = np.empty(4 * n, np.int64)
        count = _native.group_ranks(keys, out)
        rank, group_of, firsts, counts = out.reshape(4, n)
        names = [(topics[k >> 32], k & 0xFFFFFFFF) for k in keys[firsts[:count]].tolist()]
        bases = [self.next_queue_offsets.get(name, 0) for name in names]
        for name, base, taken in zip(names, bases, counts[:count].tolist(), strict=True):
            self.next_queue_offsets[name] = base + taken
        return np.array(bases, np.int64)[group_of] + rank, list(zip(names, bases, strict=True)), group_of

    def _assign(self, keys: list[tuple[str, int, int]]) -> list[int]:
        out = []
        for topic, queue_id, sys_flag in keys:
            if not _gets_queue_offset(sys_flag):
                out.append(0)
                continue
            qo = self.next_queue_offsets.get((topic, queue_id), 0)
            out.append(qo)
            self.next_queue_offsets[(topic, queue_id)] = qo + 1
        return out

    def _append(self, batch: bytearray, sizes: list[int], queue_offsets: list[int], now_ms: int
                ) -> tuple[list[int], tuple[PutStatus, str]]:
        appended: list[int] = []
        if not sizes:
            return appended, (PutStatus.PUT_OK, "")
        try:
            self.commitlog.append(batch, sizes, queue_offsets, now_ms, sealed=self.config.geometry.prop_crc,
                                  appended=appended)
        except RecordTooLargeError as exc:
            return appended, (PutStatus.MESSAGE_ILLEGAL, str(exc))
        except OSError as exc:  # ENOSPC creating the next file: nothing half-written, nothing acked
            return appended, (PutStatus.CREATE_MAPPED_FILE_FAILED, f"cannot create a commitlog file: {exc}")
        return appended, (PutStatus.PUT_OK, "")
