"""Consumer offsets: RocketMQ's ``{store}/config/consumerOffset.json`` (ConsumerOffsetManager).

In memory the table maps ``"topic@group"`` to ``{queue_id: next_offset}``; the stored offset is the
next one to consume (a consumer commits ``last_consumed + 1``), and a missing entry reads as -1.

On disk it is the broker's fastjson 1.x output, pretty-printed with tabs, fields sorted by name,
map keys sorted (fastjson's default SortField turns every unsorted map into a TreeMap), integer map
keys unquoted, and a non-empty map's closing brace on its own line (fastjson's MapSerializer writes
no line break before an integer key, only before the closing brace)::

    {
    \t"dataVersion":{
    \t\t"counter":3,
    \t\t"stateVersion":0,
    \t\t"timestamp":1700000000000
    \t},
    \t"offsetTable":{
    \t\t"TopicA@GroupA":{0:12,1:7
    \t\t}
    \t}
    }

No trailing newline. Unquoted integer keys are not JSON, so reading quotes them first; files
written by other tools with quoted keys (``{"0":12}``) read the same. The file is replaced
atomically with a ``.bak`` of the previous version (``mqstore.engine.meta.metafile``).

A commit is checked against the queue as readers see it, which under ASYNC_FLUSH includes entries
of records not flushed yet; a power cut can take those records and leave the offset past the
recovered queue. Left there, the group would skip the messages sent after recovery at the offsets
the lost ones had (a pull beyond the end is moved to the end, RocketMQ's OFFSET_OVERFLOW_BADLY, and
one within the new messages reads on from there). So recovery brings every committed offset back to
its queue's recovered end before any actor starts (``clamp_to_queue_ends``); RocketMQ leaves it to
the pull's correction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from mqstore.engine.meta.metafile import StrPath, read_with_backup, write_atomic

TOPIC_GROUP_SEPARATOR = "@"
CONSUMER_OFFSET_FILE = "config/consumerOffset.json"

# RocketMQ's TopicValidator charset, which group names share. Excluding "@" keeps
# "topic@group" splittable; excluding quotes, commas and colons keeps the key quoting below safe.
_NAME_RE = re.compile(r"[%|a-zA-Z0-9_-]+")

# A JSON string is matched whole (so nothing inside one is ever touched) or else an unquoted
# integer key: one directly after "{" or "," and directly before ":".
_STRING_OR_BARE_KEY_RE = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)')

_LONG_MAX = (1 << 63) - 1
_INT_MAX = (1 << 31) - 1

OffsetTable = dict[str, dict[int, int]]


@dataclass(frozen=True, slots=True)
class OffsetFile:
    """The decoded content of a consumerOffset.json."""

    table: OffsetTable
    counter: int
    state_version: int
    timestamp_ms: int


def topic_group_key(topic: str, group: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


def _quote_bare_int_keys(text: str) -> str:
    def quote(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return match.group(0)
        return f'{match.group(1)}"{match.group(2)}"{match.group(3)}'

    return _STRING_OR_BARE_KEY_RE.sub(quote, text)


def _as_long(value: Any, what: str) -> int:
    # bool is an int in Python but never a Java long.
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return value


def decode_offset_file(data: bytes) -> OffsetFile:
    """Parse fastjson output (quoted or unquoted integer keys). Raises ValueError on bad content."""
    doc = json.loads(_quote_bare_int_keys(data.decode("utf-8")))
    if not isinstance(doc, dict):
        raise ValueError("consumer offsets: top level is not an object")
    version = doc.get("dataVersion")
    version = {} if version is None else version
    if not isinstance(version, dict):
        raise ValueError("consumer offsets: dataVersion is not an object")
    raw_table = doc.get("offsetTable")
    raw_table = {} if raw_table is None else raw_table
    if not isinstance(raw_table, dict):
        raise ValueError("consumer offsets: offsetTable is not an object")
    table: OffsetTable = {}
    for key, queues in raw_table.items():
        if not isinstance(queues, dict):
            raise ValueError(f"consumer offsets: entry {key!r} is not an object")
        table[key] = {
            int(queue_id): _as_long(next_offset, f"offset of {key} queue {queue_id}")
            for queue_id, next_offset in queues.items()
        }
    return OffsetFile(
        table=table,
        counter=_as_long(version.get("counter", 0), "dataVersion.counter"),
        state_version=_as_long(version.get("stateVersion", 0), "dataVersion.stateVersion"),
        timestamp_ms=_as_long(version.get("timestamp", 0), "dataVersion.timestamp"),
    )


def _java_string_order(key: str) -> bytes:
    # Java's String.compareTo compares UTF-16 code units; big-endian UTF-16 bytes sort the same.
    return key.encode("utf-16-be")


def encode_offset_file(table: Mapping[str, Mapping[int, int]], *, counter: int, state_version: int,
                       timestamp_ms: int) -> bytes:
    """The exact bytes fastjson's pretty format gives for this table and data version."""
    entries = []
    for key in sorted(table, key=_java_string_order):
        queues = table[key]
        # fastjson breaks the line only before a non-empty map's closing brace.
        pairs = ",".join(f"{queue_id}:{queues[queue_id]}" for queue_id in sorted(queues))
        inner = "{" + pairs + "\n\t\t}" if queues else "{}"
        entries.append("\n\t\t" + json.dumps(key, ensure_ascii=False) + ":" + inner)
    offset_table = "{" + ",".join(entries) + "\n\t}" if entries else "{}"
    text = (
        "{\n"
        '\t"dataVersion":{\n'
        f'\t\t"counter":{counter},\n'
        f'\t\t"stateVersion":{state_version},\n'
        f'\t\t"timestamp":{timestamp_ms}\n'
        "\t},\n"
        f'\t"offsetTable":{offset_table}\n'
        "}"
    )
    return text.encode("utf-8")


def _check_name(name: str, what: str) -> None:
    if not _NAME_RE.fullmatch(name):
        raise ValueError(f"{what} {name!r} has characters outside [%|a-zA-Z0-9_-]")


class ConsumerOffsets:
    """The broker's table of committed consumer offsets, persisted on demand by its owner."""

    __slots__ = ("_by_group", "_counter", "_now_ms", "_state_version", "_table")

    def __init__(self, now_ms: Callable[[], int], table: Mapping[str, Mapping[int, int]] | None = None,
                 *, counter: int = 0, state_version: int = 0) -> None:
        self._now_ms = now_ms
        self._table: OffsetTable = {key: dict(queues) for key, queues in (table or {}).items()}
        # group -> the topics it committed on: describing one group reads its keys, not the whole table
        self._by_group: dict[str, set[str]] = {}
        for key in self._table:
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            self._by_group.setdefault(group, set()).add(topic)
        self._counter = counter
        self._state_version = state_version

    @classmethod
    def load(cls, path: StrPath, now_ms: Callable[[], int]) -> ConsumerOffsets:
        """Read ``path`` (falling back to its ``.bak``); an absent file gives an empty table.

        Raises mqstore.engine.meta.metafile.MetafileError when the file and its backup both hold garbage.
        """
        loaded = read_with_backup(path, decode_offset_file)
        if loaded is None:
            return cls(now_ms)
        return cls(now_ms, loaded.table, counter=loaded.counter, state_version=loaded.state_version)

    @property
    def table(self) -> Mapping[str, Mapping[int, int]]:
        """Read-only view of ``{"topic@group": {queue_id: next_offset}}``."""
        return MappingProxyType(self._table)

    @property
    def counter(self) -> int:
        """dataVersion.counter of the last persist (or load)."""
        return self._counter

    def commit(self, group: str, topic: str, queue_id: int, next_offset: int) -> None:
        """Record that ``group`` will next consume ``next_offset`` of ``topic``'s queue.

        Offsets may move backwards: that is how a consumer resets.
        """
        _check_name(group, "group")
        _check_name(topic, "topic")
        if not 0 <= queue_id <= _INT_MAX:
            raise ValueError(f"queue_id {queue_id} out of range")
        if not 0 <= next_offset <= _LONG_MAX:
            raise ValueError(f"next_offset {next_offset} out of range")
        self._table.setdefault(topic_group_key(topic, group), {})[queue_id] = next_offset
        self._by_group.setdefault(group, set()).add(topic)

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed next offset, or -1 when the group never committed on this queue."""
        queues = self._table.get(topic_group_key(topic, group))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def topics_of(self, group: str) -> list[str]:
        """Every topic ``group`` committed an offset on, sorted; without a pass over the table."""
        return sorted(self._by_group.get(group, ()))

    def groups_of(self, topic: str) -> frozenset[str]:
        """Every group with a committed offset on ``topic``."""
        prefix = topic + TOPIC_GROUP_SEPARATOR
        return frozenset(key[len(prefix):] for key in self._table if key.startswith(prefix))

    def delete_topic(self, topic: str) -> bool:
        """Forget every group's offsets on ``topic`` (a deleted topic, as RocketMQ's cleanOffsetByTopic)."""
        prefix = topic + TOPIC_GROUP_SEPARATOR
        keys = [key for key in self._table if key.startswith(prefix)]
        for key in keys:
            del self._table[key]
            group = key[len(prefix):]
            topics = self._by_group[group]
            topics.discard(topic)
            if not topics:
                del self._by_group[group]
        return bool(keys)

    def encode(self, *, counter: int, timestamp_ms: int) -> bytes:
        return encode_offset_file(self._table, counter=counter, state_version=self._state_version,
                                  timestamp_ms=timestamp_ms)

    def clamp(self, queue_ends: Mapping[tuple[str, int], int]) -> list[tuple[str, int, int, int]]:
        """Every offset past its queue's end (``queue_ends``: topic, queue id -> next queue offset; a
        queue absent has none) brought back to it; returns (topic@group, queue id, was, now) of each."""
        moved = []
        for key, queues in self._table.items():
            topic = key.partition(TOPIC_GROUP_SEPARATOR)[0]
            for queue_id, next_offset in queues.items():
                end = queue_ends.get((topic, queue_id), 0)
                if next_offset > end:
                    queues[queue_id] = end
                    moved.append((key, queue_id, next_offset, end))
        return moved

    def delete_group(self, group: str) -> list[str]:
        """Forget every offset ``group`` committed (a deleted group, as RocketMQ's deleteSubGroup with
        its offsets); the topics it had offsets on."""
        topics = sorted(self._by_group.pop(group, ()))
        for topic in topics:
            self._table.pop(topic_group_key(topic, group), None)
        return topics

    def persist(self, path: StrPath) -> None:
        """Write the whole table atomically with the next data version; OSErrors propagate."""
        counter = self._counter + 1
        write_atomic(path, self.encode(counter=counter, timestamp_ms=self._now_ms()))
        self._counter = counter


def clamp_to_queue_ends(store_dir: StrPath, queue_ends: Mapping[tuple[str, int], int],
                        now_ms: Callable[[], int]) -> list[tuple[str, int, int, int]]:
    """Recovery's part: the store's committed offsets brought back to the recovered queue ends
    (``ConsumerOffsets.clamp``), the file written (atomically) only when one moved."""
    path = Path(store_dir) / CONSUMER_OFFSET_FILE
    offsets = ConsumerOffsets.load(path, now_ms)
    moved = offsets.clamp(queue_ends)
    if moved:
        offsets.persist(path)
    return moved
