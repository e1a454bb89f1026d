"""What a Spark task does with a partition: decode commitlog records into Arrow batches.

A ``ScanPartition`` walks a byte range of one commitlog file record by record (reading only each
TOTALSIZE and magic), decodes the records it found in batches, and stops at the first position that
holds no valid record: that is where a file's data ends, and in a live store it is the last complete
record, whatever any checkpoint says. In the newest file (the one a broker appends to) every CRC is
checked, so a record torn by an append in progress ends the scan instead of becoming a row.

A ``QueueSlicePartition`` decodes the records its consume-queue entries point at; each must be
there, whole, with the entry's size, queue id and queue offset, or the read fails.

Files are mapped with ``np.memmap`` in the task (nothing is opened on the driver or kept on the
reader) and unmapped when the last view is gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from mqstore.engine.batch.column_scan import walk
from mqstore.engine.batch.record_columns import CHECK_CRC, CHECK_TOPIC, DECODER, REASONS, REQUIRE_PROP_CRC
from mqstore.engine.config import Geometry
from mqstore.engine.consumequeue.entry import entry_holds_message
from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.mapped_file import file_name
from mqstore.engine.log.record import DecodeKind, decode_record
from mqstore.engine.repair.recovery import TORN_TAIL_LOOKAHEAD
from mqstore.pipeline.columns import records_to_batch, to_batch
from mqstore.pipeline.options import BATCH_BYTES, Pushdown
from mqstore.pipeline.plan import QueueSlicePartition, ScanPartition
from mqstore.pipeline.queues import QueueFiles, commitlog_min_offset
from mqstore.pipeline.record_layout import RecordLayout
from mqstore.pipeline.schema import FULL, Projection

Array = npt.NDArray[Any]


class CorruptRecordError(MqstoreError, RuntimeError):
    """A record fails its CRC or structure where more data follows (``verifyCrc``)."""


class QueueEntryError(MqstoreError, RuntimeError):
    """A consume-queue entry does not point at the record it names."""


class DataLossError(MqstoreError, RuntimeError):
    """Records a read was planned for are gone: their commitlog file was deleted (retention)."""


@dataclass(frozen=True, slots=True)
class ReadContext:
    """Everything a task needs besides its partition (pickled with the reader)."""

    store_dir: str
    geometry: Geometry
    pushdown: Pushdown
    include_body: bool
    verify_crc: bool
    batch_rows: int
    fail_on_data_loss: bool = True
    projection: Projection = FULL


def read_partition(part: Any, ctx: ReadContext) -> Iterator[pa.RecordBatch]:
    if isinstance(part, ScanPartition):
        return scan_range(part, ctx)
    if isinstance(part, QueueSlicePartition):
        return read_slice(part, ctx)
    raise TypeError(f"not an mqstore partition: {part!r}")


def _map(path: str) -> Array:
    try:
        return np.memmap(path, dtype=np.uint8, mode="r")
    except FileNotFoundError:
        raise DataLossError(f"{path} was deleted (retention) after the read was planned") from None


# -- commitlog ranges ----------------------------------------------------------------------------


def scan_range(part: ScanPartition, ctx: ReadContext) -> Iterator[pa.RecordBatch]:
    """The records of ``part``, a chunk of up to ``batch_rows`` at a time, each chunk walked, decoded and
    checked by one kernel call (``mqstore.engine.batch.column_scan.walk``)."""
    buf = _map(part.path)
    mv = memoryview(buf)  # type: ignore[arg-type]  # numpy arrays export the buffer protocol
    crc = CHECK_CRC | (REQUIRE_PROP_CRC if ctx.geometry.prop_crc else 0) if ctx.verify_crc or part.newest else 0
    pos = part.start_pos
    while True:
        layout, next_pos, why, code = walk(buf, pos, part.end_pos, ctx.batch_rows, CHECK_TOPIC | crc)
        if len(layout):
            yield from _byte_batches(buf, mv, layout, ctx)
        if why == "bad" and code == DECODER:  # a __CRC32# property only the exact decoder can judge
            decoded = decode_record(mv, next_pos, check_crc=True, read_body=False,
                                    require_prop_crc=ctx.geometry.prop_crc)
            if decoded.kind is DecodeKind.RECORD:
                yield from _batches(buf, mv, RecordLayout.of(buf, np.array([next_pos], dtype=np.int64)), ctx)
                pos = next_pos + decoded.size
                continue
        if why == "bad":
            _check_end_of_data(part, buf, mv, next_pos, REASONS[code], ctx)
            return
        if why != "full":
            return
        pos = next_pos


def _zeros_from(buf: Array, pos: int) -> bool:
    return not bool(np.count_nonzero(buf[pos:pos + TORN_TAIL_LOOKAHEAD]))


def _check_end_of_data(part: ScanPartition, buf: Array, mv: memoryview, pos: int, reason: str,
                       ctx: ReadContext) -> None:
    """A scan stopped at ``pos``. Where the data simply ends (zeros follow; in the newest file, a
    torn record followed by zeros) that is the end; elsewhere, under ``verifyCrc``, it is damage."""
    if not ctx.verify_crc or _zeros_from(buf, pos):
        return
    decoded = decode_record(mv, pos, check_crc=True, require_prop_crc=ctx.geometry.prop_crc)
    size = decoded.size
    if part.newest and size > 0 and pos + size <= len(buf) and _zeros_from(buf, pos + size):
        return
    raise CorruptRecordError(
        f"{part.path}: the record at position {pos} (commitlog offset {part.file_base + pos}) is damaged: "
        f"{reason or decoded.reason}; records follow it, so the store is corrupt (verifyCrc=true)")


def _batches(buf: Array, mv: memoryview, layout: RecordLayout, ctx: ReadContext) -> Iterator[pa.RecordBatch]:
    """The rows of ``layout``'s records (all valid) that pass the pushed filters."""
    p = ctx.pushdown
    mask = p.layout_mask(buf, layout)
    if mask is not None:
        if not bool(mask.any()):
            return
        if not bool(mask.all()):
            layout = layout.select(np.flatnonzero(mask))
    batch = to_batch(buf, layout, read_body=ctx.include_body, projection=ctx.projection)
    if batch is None:  # text the fast path cannot reproduce exactly
        records = []
        for start in layout.starts.tolist():
            decoded = decode_record(mv, start, check_crc=False, read_body=ctx.include_body)
            if decoded.record is None:
                raise CorruptRecordError(f"record at position {start}: {decoded.reason}")
            records.append(decoded.record)
        batch = records_to_batch(records, read_body=ctx.include_body, projection=ctx.projection)
    yield batch


# -- consume-queue slices ------------------------------------------------------------------------


def read_slice(part: QueueSlicePartition, ctx: ReadContext) -> Iterator[pa.RecordBatch]:
    store_dir, g = Path(ctx.store_dir), ctx.geometry
    queue = QueueFiles.open(store_dir, part.topic, part.queue_id, g.cq_entries_per_file)
    log_min = commitlog_min_offset(store_dir, g.commitlog_file_size)
    for lo in range(part.from_offset, part.to_offset, ctx.batch_rows):
        hi = min(lo + ctx.batch_rows, part.to_offset)
        entries = queue.read(lo, hi)
        if len(entries) < hi - lo or lo < queue.first_queue_offset:
            _lost(ctx, f"consume queue {part.topic}/{part.queue_id} no longer holds entries {lo}..{hi - 1}")
        queue_offset = lo + np.arange(len(entries), dtype=np.int64) + max(queue.first_queue_offset - lo, 0)
        phys, size = entries["phys_offset"].astype(np.int64), entries["size"].astype(np.int64)
        wanted = entry_holds_message(phys, size)
        if part.keep is not None:
            starts = np.array([a for a, _ in part.keep], dtype=np.int64)
            ends = np.array([b for _, b in part.keep], dtype=np.int64)
            slot = np.searchsorted(starts, phys, side="right") - 1
            wanted &= (slot >= 0) & (phys < ends[np.maximum(slot, 0)])
        gone = wanted & (phys < log_min)
        if bool(gone.any()):
            _lost(ctx, f"consume queue {part.topic}/{part.queue_id} entry {int(queue_offset[gone][0])} points at "
                       f"commitlog offset {int(phys[gone][0])}, below the commitlog's first file ({log_min})")
            wanted &= ~gone
        index = np.flatnonzero(wanted)
        file_no = phys[index] // g.commitlog_file_size
        for f in np.unique(file_no).tolist():
            pick = index[file_no == f]
            yield from _entry_batches(part, ctx, f * g.commitlog_file_size, phys[pick], size[pick],
                                      queue_offset[pick])


def _lost(ctx: ReadContext, what: str) -> None:
    if ctx.fail_on_data_loss:
        raise DataLossError(f"{what}: deleted by retention? (failOnDataLoss=false skips lost records)")


def _entry_batches(part: QueueSlicePartition, ctx: ReadContext, file_base: int, phys: Array, size: Array,
                   queue_offset: Array) -> Iterator[pa.RecordBatch]:
    path = Path(ctx.store_dir) / "commitlog" / file_name(file_base)
    try:
        buf = _map(str(path))
    except DataLossError as exc:
        _lost(ctx, str(exc))
        return
    mv = memoryview(buf)  # type: ignore[arg-type]  # numpy arrays export the buffer protocol
    layout = RecordLayout.of(buf, phys - file_base)
    ok = np.zeros(len(layout), dtype=bool)
    ok[:layout.valid_count] = True
    ok &= (layout.size == size) & (layout.queue_id == part.queue_id) & (layout.queue_offset == queue_offset)
    ok &= layout.topic_is(buf, part.topic)
    if not bool(ok.all()):
        i = int(np.argmin(ok))
        decoded = decode_record(mv, int(phys[i] - file_base), check_crc=False)
        found = decoded.record
        what = decoded.reason if found is None else (
            f"a record of {found.topic}/{found.queue_id} offset {found.queue_offset}, size {found.size}")
        raise QueueEntryError(
            f"consume queue {part.topic}/{part.queue_id} entry {int(queue_offset[i])} (commitlog offset "
            f"{int(phys[i])}, size {int(size[i])}) finds {what} in {path}; rebuild the consume queues, "
            f"or read without topic/queue filters")
    if ctx.verify_crc:
        n_crc, why = layout.first_crc_failure(buf, require_prop_crc=ctx.geometry.prop_crc)
        if n_crc < len(layout):
            raise CorruptRecordError(f"{path}: the record at commitlog offset {int(phys[n_crc])} "
                                     f"(consume queue {part.topic}/{part.queue_id} entry "
                                     f"{int(queue_offset[n_crc])}) is damaged: {why}")
    yield from _byte_batches(buf, mv, layout, ctx)


def _byte_batches(buf: Array, mv: memoryview, layout: RecordLayout, ctx: ReadContext) -> Iterator[pa.RecordBatch]:
    """``_batches`` of ``layout`` cut every ``BATCH_BYTES`` of records: an Arrow binary column holds < 2 GiB."""
    cumulative = np.cumsum(layout.size)
    if int(cumulative[-1]) <= BATCH_BYTES:
        yield from _batches(buf, mv, layout, ctx)
        return
    bounds = np.searchsorted(cumulative, np.arange(BATCH_BYTES, int(cumulative[-1]), BATCH_BYTES), side="right")
    for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), len(layout)], strict=True):
        if b > a:
            yield from _batches(buf, mv, layout.select(np.arange(a, b)), ctx)
