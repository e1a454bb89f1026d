"""The timer files checked read-only, for ``mqstore.engine.repair.verify``: sizes RocketMQ's, every timerlog record
pointing at a ``rmq_sys_wheel_timer`` record of its size (or below the commitlog's min offset,
taken by retention), and the log ending where its records end.

Findings are (kind, location, detail): ``file_unreadable`` for a wheel or checkpoint of another
size, ``timer_record_mismatch`` for a timerlog record whose commitlog record is not its timer
message, ``timer_log_corrupt`` for a file that ends neither in the blank nor, the last one, in zeros.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from pathlib import Path

from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file_queue import is_queue_file_name
from mqstore.engine.log.record import BLANK_MAGIC, DecodeKind
from mqstore.engine.timer.checkpoint import CHECKPOINT_FILE, CHECKPOINT_SIZE
from mqstore.engine.timer.log import BLANK_SIZE, LOG_DIR, RECORD_SIZE, TimerRecord, decode_record
from mqstore.engine.timer.put_rule import TIMER_TOPIC
from mqstore.engine.timer.wheel import WHEEL_FILE, WHEEL_FILE_SIZE

TimerFinding = tuple[str, str, str]


def timer_findings(store_dir: Path, commitlog: CommitLog) -> list[TimerFinding]:
    findings: list[TimerFinding] = []
    for name, size in ((WHEEL_FILE, WHEEL_FILE_SIZE), (CHECKPOINT_FILE, CHECKPOINT_SIZE)):
        path = store_dir / name
        if path.exists() and path.stat().st_size != size:
            findings.append(("file_unreadable", name, f"{path.stat().st_size} bytes, RocketMQ's has {size}"))
    for log_pos, record in _records(store_dir / LOG_DIR, findings):
        if record.phys_offset < commitlog.min_offset:
            continue
        decoded = commitlog.read_record(record.phys_offset, check_crc=False, read_body=False)
        found = decoded.record
        if (decoded.kind is not DecodeKind.RECORD or found is None or found.size != record.size
                or found.topic != TIMER_TOPIC):
            findings.append(("timer_record_mismatch", f"{LOG_DIR}@{log_pos}",
                             f"commitlog offset {record.phys_offset} holds no {TIMER_TOPIC} record of "
                             f"{record.size} bytes"))
    return findings


def _records(directory: Path, findings: list[TimerFinding]) -> Iterator[tuple[int, TimerRecord]]:
    paths = sorted(p for p in directory.iterdir() if is_queue_file_name(p.name)) if directory.is_dir() else []
    for index, path in enumerate(paths):
        size = path.stat().st_size
        if size == 0:
            continue
        with open(path, "rb") as f, mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) as mm:
            base, pos = int(path.name), 0
            while pos + RECORD_SIZE <= size:
                record = decode_record(mm[pos:pos + RECORD_SIZE])
                if record is None:
                    break
                yield base + pos, record
                pos += RECORD_SIZE
            blank = int.from_bytes(mm[pos:pos + 4], "big", signed=True) if pos + BLANK_SIZE <= size else 0
            magic = int.from_bytes(mm[pos + 12:pos + 16], "big", signed=True) if pos + BLANK_SIZE <= size else 0
            if magic == BLANK_MAGIC and blank == size - pos:
                continue
            if index < len(paths) - 1 or any(mm[pos:pos + RECORD_SIZE]):
                findings.append(("timer_log_corrupt", f"{LOG_DIR}/{path.name}", f"no record at position {pos}"))
            return
