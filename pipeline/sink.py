"""The writer: ``df.write.format("mqstore").option("broker", store_dir).mode("append").save()``.

Rows become messages sent to a running broker through ``mqstore.ipc.client.api.Producer``: the writer never
touches a store's files (the broker's commitlog writer is their one writer). Columns: ``topic``
(string) and ``body`` (binary or string) are required; ``tags`` (string), ``keys`` (array<string>),
``properties`` (map<string,string>) and ``queue_id`` (int) are used when present; every other
column is ignored, so a DataFrame read from another store can be written as it is.

Each task opens its own Producer and sends batches of ``batchSize`` (default 500) messages; its
commit message counts what the broker acknowledged. The driver's ``commit`` raises when any message
was not sent. Sent messages stay sent whatever happens after (a message log cannot take a message
back), so a failed and retried job may store a message twice: the write is at-least-once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from mqstore.engine.errors import MqstoreError
from mqstore.ipc.client.api import Admin, BrokerError, BrokerTimeoutError, Endpoints, Producer
from mqstore.pipeline.options import OptionError, lower_keys, positive_option

DEFAULT_BATCH_SIZE = 500
DEFAULT_TIMEOUT_MS = 10_000
PING_TIMEOUT_MS = 2_000
MAX_REASONS = 3
_TEXT = StringType()
_COLUMN_TYPES: dict[str, tuple[tuple[Any, ...], str]] = {
    "topic": ((_TEXT,), "string"),
    "body": ((BinaryType(), _TEXT), "binary or string"),
    "tags": ((_TEXT,), "string"),
    "keys": ((ArrayType(_TEXT, True), ArrayType(_TEXT, False)), "array<string>"),
    "properties": ((MapType(_TEXT, _TEXT, True), MapType(_TEXT, _TEXT, False)), "map<string,string>"),
    "queue_id": ((IntegerType(), LongType(), ShortType()), "int"),
}


class BrokerUnavailableError(MqstoreError, RuntimeError):
    """No broker answers for the store the writer was pointed at."""


class SendFailedError(MqstoreError, RuntimeError):
    """Some messages were not stored."""


@dataclass(frozen=True, slots=True)
class SendReport(WriterCommitMessage):
    """What one task's sends came to."""

    sent: int
    failed: int
    reasons: tuple[str, ...] = ()  # the first few distinct reasons a message was not sent


@dataclass(frozen=True, slots=True)
class WriteOptions:
    broker: str
    batch_size: int = DEFAULT_BATCH_SIZE
    timeout_ms: int = DEFAULT_TIMEOUT_MS

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        opts = lower_keys(options)
        broker = opts.get("broker")
        if not broker:
            raise OptionError("the mqstore writer sends to a running broker: give .option('broker', store_dir) "
                              "of a store a broker serves; it never writes store files itself")
        return cls(str(broker), positive_option(opts, "batchSize", DEFAULT_BATCH_SIZE) or DEFAULT_BATCH_SIZE,
                   positive_option(opts, "timeoutMs", DEFAULT_TIMEOUT_MS) or DEFAULT_TIMEOUT_MS)


def check_columns(schema: StructType) -> tuple[str, ...]:
    """The message columns present (checked against their types); topic and body are required."""
    fields = {f.name: f.dataType for f in schema.fields}
    for required in ("topic", "body"):
        if required not in fields:
            raise OptionError(f"the mqstore writer needs a {required!r} column; the DataFrame has {sorted(fields)}")
    present = []
    for name, (types, text) in _COLUMN_TYPES.items():
        if name in fields:
            if fields[name] not in types:
                raise OptionError(f"column {name!r} must be {text}, not {fields[name].simpleString()}")
            present.append(name)
    return tuple(present)


def check_broker(store_dir: str) -> None:
    """Refuse early, on the driver, when nothing answers at the store's broker endpoints."""
    ingress = Endpoints.for_store(store_dir).ingress
    if ingress.startswith("ipc://") and not Path(ingress.removeprefix("ipc://")).exists():
        raise BrokerUnavailableError(f"no broker is running for {store_dir} (no socket at {ingress}); start one "
                                     f"with `mqstore start --store {store_dir}`: the writer never writes store "
                                     f"files directly")
    try:
        with Admin(store_dir, timeout_ms=PING_TIMEOUT_MS) as admin:
            admin.ping_writer()
    except (BrokerTimeoutError, BrokerError) as exc:
        raise BrokerUnavailableError(f"no broker answers for {store_dir} ({exc}); the writer never writes store "
                                     f"files directly") from None


def _messages(batch: pa.RecordBatch, columns: tuple[str, ...]) -> Iterator[dict[str, Any] | str]:
    """Each row as a Producer message, or the reason it cannot be one."""
    data = {name: batch.column(name).to_pylist() for name in columns}
    for i in range(batch.num_rows):
        topic, body = data["topic"][i], data["body"][i]
        if topic is None or body is None:
            yield f"row has a null {'topic' if topic is None else 'body'}"
            continue
        message: dict[str, Any] = {"topic": topic, "body": body.encode() if isinstance(body, str) else body}
        if "tags" in data and data["tags"][i] is not None:
            message["tags"] = data["tags"][i]
        if "keys" in data and data["keys"][i]:
            message["keys"] = tuple(k for k in data["keys"][i] if k)
        if "properties" in data and data["properties"][i]:
            message["properties"] = dict(data["properties"][i])
        if "queue_id" in data and data["queue_id"][i] is not None:
            message["queue_id"] = int(data["queue_id"][i])
        yield message


class MqstoreWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions, columns: tuple[str, ...]) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SendReport:
        o = self.options
        sent = failed = 0
        reasons: list[str] = []

        def refused(reason: str) -> None:
            nonlocal failed
            failed += 1
            if reason not in reasons and len(reasons) < MAX_REASONS:
                reasons.append(reason)
        with Producer(o.broker, timeout_ms=o.timeout_ms) as producer:
            pending: list[dict[str, Any]] = []

            def flush() -> None:
                nonlocal sent
                try:
                    results = producer.send_batch(pending)
                except BrokerTimeoutError:
                    raise SendFailedError(
                        f"the broker for {o.broker} did not answer within {o.timeout_ms} ms; {sent} messages of "
                        f"this task were stored, the {len(pending)} in flight may or may not have been") from None
                for result in results:
                    if result.ok:
                        sent += 1
                    else:
                        refused(f"{result.status}: {result.reason}")
                pending.clear()

            for batch in iterator:
                for message in _messages(batch, self.columns):
                    if isinstance(message, str):
                        refused(message)
                        continue
                    pending.append(message)
                    if len(pending) >= o.batch_size:
                        flush()
            if pending:
                flush()
        return SendReport(sent, failed, tuple(reasons))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        reports = [m for m in messages if isinstance(m, SendReport)]
        failed = sum(r.failed for r in reports)
        if failed:
            total = failed + sum(r.sent for r in reports)
            reasons = list(dict.fromkeys(reason for r in reports for reason in r.reasons))[:MAX_REASONS]
            raise SendFailedError(f"{failed} of {total} messages were not sent: {'; '.join(reasons)}")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: what the broker acknowledged is stored (at-least-once on a retry)."""


def make_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> MqstoreWriter:
    if overwrite:
        raise OptionError("an mqstore store is an append-only message log: write with mode('append'), "
                          "overwrite is not possible")
    write_options = WriteOptions.parse(options)
    columns = check_columns(schema)
    check_broker(write_options.broker)
    return MqstoreWriter(write_options, columns)
