from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine.log.commitlog import CommitLog, RecordTooLargeError
from mqstore.engine.log.host import Host
from mqstore.engine.log.mapped_file import file_name
from mqstore.engine.log.msgid import offset_msg_id
from mqstore.engine.log.record import (
    BLANK_MAGIC,
    END_FILE_MIN_BLANK_SIZE,
    PROP_CRC_SIZE,
    DecodeKind,
    decode_record,
    encode_record,
)

FILE_SIZE = 1024
STORE_V4 = Host("10.0.0.5", 10911)
STORE_V6 = Host("fe80::1", 10911)
BORN_V6 = Host("2001:db8::7", 5555)
MIN_SIZE = 92  # IPv4 hosts, v1, topic "T", no properties, empty body


def record_of_size(total: int, *, store_host: Host = STORE_V4, born_host: Host = STORE_V4, tag: int = 0,
                   prop_crc: bool = False) -> bytearray:
    overhead = len(encode_record(topic="T", body=b"", properties={}, born_host=born_host, store_host=store_host,
                                 prop_crc=prop_crc))
    body = bytes([(tag + i) % 256 for i in range(total - overhead)])
    rec = encode_record(topic="T", body=body, properties={}, born_host=born_host, store_host=store_host,
                        prop_crc=prop_crc)
    assert len(rec) == total
    return rec


def batch_of(records: list[bytearray]) -> tuple[bytearray, list[int]]:
    return bytearray(b"".join(records)), [len(r) for r in records]


def append_sizes(log: CommitLog, sizes: list[int], first_queue_offset: int = 0, store_ms: int = 1000,
                 appended: list[int] | None = None) -> list[int]:
    """Append records of the given total sizes in one batch, queue offsets counting from the first."""
    batch, lengths = batch_of([record_of_size(s, tag=first_queue_offset + i) for i, s in enumerate(sizes)])
    queue_offsets = list(range(first_queue_offset, first_queue_offset + len(sizes)))
    return log.append(batch, lengths, queue_offsets, store_ms, appended=appended)


def blank_header(size: int) -> bytes:
    return struct.pack(">ii", size, BLANK_MAGIC)


def test_a_record_that_does_not_fit_leaves_a_blank_and_goes_to_the_next_file(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        phys = [append_sizes(log, [300], i)[0] for i in range(4)]
        assert phys == [0, 300, 600, 1024]
        first, second = log.queue.files
        assert first.is_full and second.written_pos == 300
        # 900 + 300 + 8 > 1024: the blank holds exactly the 124 remaining bytes
        assert bytes(first.read(900, 124)) == blank_header(124) + bytes(116)
        blank = decode_record(first.buffer, 900)
        assert (blank.kind, blank.size) == (DecodeKind.BLANK, 124)
        assert log.read_record(900).kind is DecodeKind.BLANK
        assert log.max_offset == 1324
        assert sorted(p.name for p in tmp_path.iterdir()) == [file_name(0), file_name(1024)]
    finally:
        log.close()


def test_a_record_may_leave_exactly_the_8_byte_blank(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        assert append_sizes(log, [FILE_SIZE - END_FILE_MIN_BLANK_SIZE]) == [0]
        assert log.queue.files[0].free_bytes == 8  # never filled exactly
        assert append_sizes(log, [MIN_SIZE], 1) == [1024]
        assert bytes(log.queue.files[0].read(1016, 8)) == blank_header(8)
    finally:
        log.close()


def test_a_record_larger_than_a_file_is_refused_without_writing(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        append_sizes(log, [300])
        with pytest.raises(RecordTooLargeError):
            append_sizes(log, [FILE_SIZE - END_FILE_MIN_BLANK_SIZE + 1], 1)
        assert log.max_offset == 300
        assert len(log.queue.files) == 1 and log.queue.files[0].written_pos == 300  # no blank written
        assert bytes(log.queue.files[0].read(300, 8)) == bytes(8)
        assert append_sizes(log, [300], 1) == [300]
    finally:
        log.close()


def test_a_too_large_record_in_a_batch_stops_it_after_the_records_before(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        appended: list[int] = []
        with pytest.raises(RecordTooLargeError):
            append_sizes(log, [200, 300, 2000, 100], appended=appended)
        assert appended == [0, 200]
        assert log.max_offset == 500
        assert [d.kind for _, d in log.scan(0)][:2] == [DecodeKind.RECORD, DecodeKind.RECORD]
    finally:
        log.close()


def test_a_batch_larger_than_a_file_is_split_at_record_boundaries(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        phys = append_sizes(log, [300] * 10, first_queue_offset=7, store_ms=5555)
        assert phys == [0, 300, 600, 1024, 1324, 1624, 2048, 2348, 2648, 3072]
        assert len(log.queue.files) == 4
        for mf in log.queue.files[:3]:
            assert bytes(mf.read(900, 8)) == blank_header(124)
        for i, p in enumerate(phys):
            decoded = log.read_record(p)
            assert decoded.record is not None
            assert (decoded.record.phys_offset, decoded.record.queue_offset, decoded.record.store_ms) == \
                (p, 7 + i, 5555)
            assert decoded.record.body == bytes((7 + i + j) % 256 for j in range(300 - MIN_SIZE))
    finally:
        log.close()


def test_append_returns_into_the_appended_list(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        appended: list[int] = []
        result = append_sizes(log, [400, 400, 400], appended=appended)
        assert result is appended and appended == [0, 400, 1024]
    finally:
        log.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.integers(MIN_SIZE, FILE_SIZE - END_FILE_MIN_BLANK_SIZE), min_size=1, max_size=6),
                min_size=1, max_size=8))
def test_records_never_straddle_and_scan_returns_them_in_order(batches: list[list[int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = CommitLog.open(tmp, FILE_SIZE)
        try:
            placed: list[tuple[int, int, int, int]] = []  # phys, size, queue offset, store ms
            queue_offset = 0
            for n, sizes in enumerate(batches):
                phys = append_sizes(log, sizes, queue_offset, store_ms=10_000 + n)
                assert len(phys) == len(sizes)
                for p, s in zip(phys, sizes, strict=True):
                    placed.append((p, s, queue_offset, 10_000 + n))
                    queue_offset += 1
            for (p, s, _, _), nxt in zip(placed, [*placed[1:], None], strict=True):
                pos = p % FILE_SIZE
                assert pos + s + END_FILE_MIN_BLANK_SIZE <= FILE_SIZE  # never straddles, 8 bytes to spare
                if nxt is not None and nxt[0] // FILE_SIZE != p // FILE_SIZE:
                    # the next record went to a new file: a blank holds exactly what was left
                    assert nxt[0] == (p // FILE_SIZE + 1) * FILE_SIZE
                    remaining = FILE_SIZE - pos - s
                    assert bytes(log.read_bytes(p + s, 8) or b"") == blank_header(remaining)
                elif nxt is not None:
                    assert nxt[0] == p + s
            scanned = list(log.scan(0))
            records = [(p, d) for p, d in scanned if d.kind is DecodeKind.RECORD]
            assert [d.kind for _, d in scanned if d.kind is not DecodeKind.RECORD] == \
                [DecodeKind.BLANK] * (len(log.queue.files) - 1)
            assert len(records) == len(placed)
            for (p, d), (exp_p, exp_s, exp_qo, exp_ms) in zip(records, placed, strict=True):
                assert d.record is not None
                assert (p, d.size, d.record.phys_offset, d.record.queue_offset, d.record.store_ms) == \
                    (exp_p, exp_s, exp_p, exp_qo, exp_ms)
        finally:
            log.close()


def test_scan_stops_at_a_corrupt_record(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        phys = append_sizes(log, [200] * 7)
        assert phys[5] == 1024
        mf = log.queue.files[1]
        mf.buffer[phys[6] - 1024 + 100] ^= 0xFF  # a body byte of the 7th record
        log.queue.files[0].buffer[phys[2] + 90] ^= 0x01  # and of the 3rd
        scanned = list(log.scan(0))
        assert [(p, d.kind) for p, d in scanned] == [(0, DecodeKind.RECORD), (200, DecodeKind.RECORD),
                                                      (400, DecodeKind.CORRUPT)]
        assert scanned[-1][1].reason == "body CRC mismatch"
        unchecked = list(log.scan(0, check_crc=False))
        assert [p for p, d in unchecked if d.kind is DecodeKind.RECORD] == phys
        assert [p for p, d in unchecked if d.kind is DecodeKind.BLANK] == [1000]
        assert [p for p, _ in log.scan(600)] == [600, 800, 1000, 1024, 1224]
        assert next(log.scan(1224))[1].kind is DecodeKind.CORRUPT
    finally:
        log.close()


def test_scan_stops_where_the_header_is_garbage(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        phys = append_sizes(log, [150] * 4)
        log.queue.files[0].buffer[phys[2] + 4:phys[2] + 8] = b"\x00\x00\x00\x00"  # magic
        assert [(p, d.kind) for p, d in log.scan(0, check_crc=False)] == \
            [(0, DecodeKind.RECORD), (150, DecodeKind.RECORD), (300, DecodeKind.CORRUPT)]
    finally:
        log.close()


def test_scan_to_phys_and_before_the_min_offset(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        phys = append_sizes(log, [300] * 6)
        assert [p for p, _ in log.scan(0, 600)] == [0, 300]
        assert [p for p, _ in log.scan(-50, 301)] == [0, 300]
        assert [p for p, _ in log.scan(phys[-1] + 300)] == []
    finally:
        log.close()


def test_sealed_records_carry_the_whole_record_crc(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        records = [record_of_size(250, prop_crc=True, tag=i) for i in range(5)]
        batch, sizes = batch_of(records)
        phys = log.append(batch, sizes, list(range(5)), 42, sealed=True)
        assert phys == [0, 250, 500, 750, 1024]
        scanned = list(log.scan(0, require_prop_crc=True))
        assert [p for p, d in scanned if d.kind is DecodeKind.RECORD] == phys
        # a byte of the header, which the body CRC does not cover, is caught by the record CRC
        log.queue.files[1].buffer[13] ^= 0x40  # queue id of the record at 1024
        scanned = list(log.scan(0, require_prop_crc=True))
        assert (scanned[-1][0], scanned[-1][1].kind) == (1024, DecodeKind.CORRUPT)
        assert scanned[-1][1].reason == "whole-record CRC mismatch"
        unsealed = list(log.scan(0, check_crc=True, require_prop_crc=False))
        assert unsealed[-1][1].kind is DecodeKind.CORRUPT
        tail = log.read_bytes(250 - PROP_CRC_SIZE, PROP_CRC_SIZE)
        assert tail is not None and tail.startswith(b"__CRC32#\x01") and tail != b"__CRC32#\x01" + b"0" * 10 + b"\x02"
    finally:
        log.close()


def test_unsealed_prop_crc_records_fail_the_crc(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        batch, sizes = batch_of([record_of_size(250, prop_crc=True)])
        log.append(batch, sizes, [0], 42, sealed=False)
        assert log.read_record(0).kind is DecodeKind.CORRUPT
        assert log.read_record(0, check_crc=False).kind is DecodeKind.RECORD
    finally:
        log.close()


def test_read_record_and_the_point_reads(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        batch, sizes = batch_of([record_of_size(300, born_host=BORN_V6, store_host=STORE_V6, tag=i)
                                 for i in range(4)])
        phys = log.append(batch, sizes, [0, 1, 2, 3], 1_700_000_000_321)
        assert phys == [0, 300, 600, 1024]
        assert log.size_at(300) == 300
        assert log.size_at(900) == 124  # the blank
        assert log.size_at(5000) == -1
        assert log.store_ms_at(600) == 1_700_000_000_321  # after a 20-byte born host
        assert log.store_ms_at(5000) == -1
        assert log.read_bytes(300, 300) == bytes(batch[300:600])  # the batch was stamped in place
        assert struct.unpack_from(">q", batch, 300 + 28)[0] == 300
        assert log.read_bytes(1024, 301) is None  # past the written end
        assert log.read_record(-1).kind is DecodeKind.CORRUPT
        assert log.read_record(4096).kind is DecodeKind.CORRUPT
        decoded = log.read_record(600, read_body=False)
        assert decoded.record is not None and decoded.record.body == b"" and decoded.record.store_host == STORE_V6
        log.queue.files[1].set_positions(200)  # a record that passes the written position is not there yet
        assert log.read_record(1024).kind is DecodeKind.INCOMPLETE
    finally:
        log.close()


def test_reopen_reads_the_same_records_then_zeros(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    phys = append_sizes(log, [300] * 5, store_ms=77)
    assert log.queue.flush_all() == log.max_offset == 1624
    log.close()
    reopened = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        assert reopened.max_offset == 2048  # load puts cursors at the file end; recovery trims
        scanned = list(reopened.scan(0))
        assert [p for p, d in scanned if d.kind is DecodeKind.RECORD] == phys
        assert (scanned[-1][0], scanned[-1][1].kind) == (1624, DecodeKind.CORRUPT)  # zeros after the end
        reopened.queue.truncate_after(1624)
        assert [d.kind for _, d in reopened.scan(0)][-1] is DecodeKind.RECORD
        assert append_sizes(reopened, [300], 5) == [1624]
    finally:
        reopened.close()


def test_flush_advances_one_file_per_call(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        append_sizes(log, [300] * 7)
        assert log.flush() == 1024
        assert log.flush() == 2048
        assert log.flush() == 2048 + 300
        assert log.flush() == log.max_offset == log.flushed_where
    finally:
        log.close()


# -- RocketMQ AppendCallbackTest (reference §11.13, §11.14) ---------------------------------------


def test_end_of_file_blank_is_exactly_the_remaining_bytes(tmp_path: Path) -> None:
    log = CommitLog.open(tmp_path, 2048)
    try:
        assert append_sizes(log, [1048]) == [0]
        assert log.queue.files[0].free_bytes == 1000
        batch, sizes = batch_of([record_of_size(993, tag=1), record_of_size(993, tag=2)])  # 993 + 8 > 1000
        phys = log.append(batch, sizes, [1, 2], 99)
        assert phys == [2048, 2048 + 993]
        first = log.queue.files[0]
        assert bytes(first.read(1048, 1000)) == blank_header(1000) + bytes(992)  # only the header written
        blank = log.read_record(1048)
        assert (blank.kind, blank.size) == (DecodeKind.BLANK, 1000)
        assert [(p, d.kind) for p, d in log.scan(0)] == [(0, DecodeKind.RECORD), (1048, DecodeKind.BLANK),
                                                         (2048, DecodeKind.RECORD), (3041, DecodeKind.RECORD)]
    finally:
        log.close()


@pytest.mark.parametrize(("born", "store", "id_len"), [(STORE_V4, STORE_V4, 32), (BORN_V6, STORE_V6, 56)])
def test_batch_that_fits_gets_consecutive_offsets_and_msg_ids(tmp_path: Path, born: Host, store: Host,
                                                              id_len: int) -> None:
    log = CommitLog.open(tmp_path, 10 * 1024)
    try:
        append_sizes(log, [500])
        records = [encode_record(topic="TopicTest", body=f"body {i}".encode(), properties={"KEYS": f"k{i}"},
                                 born_host=born, store_host=store) for i in range(5)]
        batch, sizes = batch_of(records)
        phys = log.append(batch, sizes, [10, 11, 12, 13, 14], 1_700_000_000_000)
        expected_phys = [500 + sum(sizes[:i]) for i in range(5)]
        assert phys == expected_phys
        for i, p in enumerate(phys):
            decoded = log.read_record(p)
            assert decoded.record is not None
            r = decoded.record
            assert (r.queue_offset, r.phys_offset, r.body, r.keys) == (10 + i, p, f"body {i}".encode(), [f"k{i}"])
            assert (r.born_host, r.store_host) == (born, store)
            assert r.msg_id == offset_msg_id(store, p) and len(r.msg_id) == id_len
    finally:
        log.close()
