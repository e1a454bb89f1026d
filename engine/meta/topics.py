"""Topic configuration, ``{store}/config/topics.json``, in the shape of RocketMQ's TopicConfigManager:

    {"dataVersion": {"counter": N, "stateVersion": 0, "timestamp": ms},
     "topicConfigTable": {"Orders": {"topicName": "Orders", "readQueueNums": 4, "writeQueueNums": 4,
                                     "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                                     "order": false}},
     "deletedTopics": {"Old": 123456}}

``deletedTopics`` (mqstore's own key, which RocketMQ's reader ignores) holds, for each topic ever
deleted, the commitlog's end when it last was: its records below that offset stay in the commitlog
until retention but belong to no topic, so ``verify`` expects no queue entry for them and a rebuild
gives them none. A topic made again under the name starts its queues afresh after that offset.

Written atomically (tmp, fsync, rename, ``.bak``) by its one owner, the commitlog writer, which
defers it (``deferred``: topics made in a burst cost one write at its next ``flush``, not one each).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqstore.engine.errors import MqstoreError
from mqstore.engine.meta.data_version import DataVersion
from mqstore.engine.meta.metafile import read_with_backup, write_atomic
from mqstore.engine.names import check_topic

TOPICS_FILE = "config/topics.json"
PERM_READ_WRITE = 6
# topics the broker makes for itself (retry and dead-letter queues): made on first send even where
# topics are not (RocketMQ creates them whatever autoCreateTopicEnable says)
BROKER_MADE_PREFIXES = ("%RETRY%", "%DLQ%")


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str
    queue_count: int
    perm: int = PERM_READ_WRITE


class TopicError(MqstoreError, ValueError):
    """An invalid topic name or queue count, or a new topic past the table's limit."""


class UnknownTopicError(TopicError):
    """A send to a topic the table does not hold, where topics are not made on first send."""


class TopicTable:
    def __init__(self, path: Path, now_ms: Callable[[], int], topics: dict[str, TopicConfig], counter: int,
                 max_topics: int | None = None, deferred: bool = False, auto_create: bool = True,
                 deleted: dict[str, int] | None = None) -> None:
        self.path = path
        self._now_ms = now_ms
        self.topics = topics
        self._counter = counter
        self.max_topics = max_topics  # new topics are refused once the table holds this many
        self.deferred = deferred      # changes wait for flush() instead of each writing the file
        self.auto_create = auto_create  # get_or_create makes a missing topic (RocketMQ's autoCreateTopicEnable)
        self.deleted = deleted if deleted is not None else {}  # topic -> commitlog end when it was deleted
        self.dirty = False

    @classmethod
    def load(cls, store_dir: Path | str, now_ms: Callable[[], int], *, max_topics: int | None = None,
             deferred: bool = False, auto_create: bool = True) -> TopicTable:
        path = Path(store_dir) / TOPICS_FILE
        loaded = read_with_backup(path, _decode)
        topics, counter, deleted = loaded if loaded is not None else ({}, 0, {})
        return cls(path, now_ms, topics, counter, max_topics, deferred, auto_create, deleted)

    def get(self, name: str) -> TopicConfig | None:
        return self.topics.get(name)

    def create(self, name: str, queue_count: int) -> TopicConfig:
        """Create or resize a topic and persist the table; queues are only ever added."""
        reason = check_topic(name)
        if reason is not None:
            raise TopicError(reason)
        if not 1 <= queue_count <= 1 << 16:
            raise TopicError(f"queue count {queue_count} out of range")
        current = self.topics.get(name)
        if current is not None and current.queue_count >= queue_count:
            return current
        if current is None and self.max_topics is not None and len(self.topics) >= self.max_topics:
            raise TopicError(f"topic {name!r} does not exist, and no new one is made past {self.max_topics} topics")
        self.topics[name] = TopicConfig(name, queue_count)
        if self.deferred:
            self.dirty = True
        else:
            self.persist()
        return self.topics[name]

    def get_or_create(self, name: str, default_queue_count: int) -> TopicConfig:
        """The topic a send goes to, made on its first send unless ``auto_create`` is off."""
        current = self.topics.get(name)
        if current is not None:
            return current
        if not self.auto_create and not name.startswith(BROKER_MADE_PREFIXES):
            raise UnknownTopicError(f"topic {name!r} does not exist, and topics are not made on first send "
                                    "([broker] auto_create_topics is off): create it first")
        return self.create(name, default_queue_count)

    def delete(self, name: str, end_phys_offset: int = 0) -> bool:
        """Remove a topic and persist the table at once, with the commitlog's end (``end_phys_offset``)
        below which its records are the deleted topic's; whether it was there."""
        if self.topics.pop(name, None) is None:
            return False
        self.deleted[name] = max(self.deleted.get(name, 0), end_phys_offset)
        self.persist()
        return True

    def flush(self) -> None:
        """Write the changes a deferred table holds, if any."""
        if self.dirty:
            self.persist()

    def persist(self) -> None:
        self._counter += 1
        write_topic_file(self.path.parent.parent, self.topics, DataVersion(0, self._now_ms(), self._counter),
                         self.deleted)
        self.dirty = False


def topic_config_json(t: TopicConfig) -> dict[str, Any]:
    """RocketMQ's TopicConfig as its JSON has it (the file's entry and GET_ALL_TOPIC_CONFIG's)."""
    return {"topicName": t.name, "readQueueNums": t.queue_count, "writeQueueNums": t.queue_count, "perm": t.perm,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}


def decode_topic_table(doc: Any) -> tuple[dict[str, TopicConfig], DataVersion]:
    """``{"topicConfigTable": {...}, "dataVersion": {...}}`` (the file, or a master's answer) decoded;
    ValueError, KeyError or TypeError on a document that is not one."""
    table = doc["topicConfigTable"]
    if not isinstance(table, dict):
        raise TypeError("topicConfigTable is not an object")
    topics = {}
    for name, entry in table.items():
        reason = check_topic(name)
        if reason is not None:
            raise ValueError(reason)
        topics[name] = TopicConfig(name, int(entry.get("writeQueueNums", entry.get("readQueueNums", 1))),
                                   int(entry.get("perm", PERM_READ_WRITE)))
    return topics, DataVersion.from_json(doc.get("dataVersion"))


def read_topic_file(store_dir: Path | str) -> tuple[dict[str, TopicConfig], DataVersion] | None:
    """The topics file as its owner last wrote it (None: never written)."""
    return read_with_backup(Path(store_dir) / TOPICS_FILE, lambda data: decode_topic_table(json.loads(data)))


def write_topic_file(store_dir: Path | str, topics: dict[str, TopicConfig], version: DataVersion,
                     deleted: dict[str, int] | None = None) -> None:
    """Replace the topics file atomically (``write_atomic``) with ``topics`` at ``version``, and the
    deleted topics' ends when there are any."""
    doc: dict[str, Any] = {"dataVersion": {"counter": version.counter, "stateVersion": version.state_version,
                                           "timestamp": version.timestamp_ms},
                           "topicConfigTable": {name: topic_config_json(t) for name, t in sorted(topics.items())}}
    if deleted:
        doc["deletedTopics"] = dict(sorted(deleted.items()))
    write_atomic(Path(store_dir) / TOPICS_FILE, json.dumps(doc, indent="\t").encode())


def deleted_topics(store_dir: Path | str) -> dict[str, int]:
    """Each deleted topic and the commitlog offset below which its records are the deleted topic's."""
    loaded = read_with_backup(Path(store_dir) / TOPICS_FILE, _decode)
    return loaded[2] if loaded is not None else {}


def _decode(data: bytes) -> tuple[dict[str, TopicConfig], int, dict[str, int]]:
    doc: Any = json.loads(data)
    topics, version = decode_topic_table(doc)
    deleted = {str(name): int(end) for name, end in doc.get("deletedTopics", {}).items()}
    return topics, version.counter, deleted
