"""mqstore.engine.reclaim.move and mqstore.engine.reclaim.consumed.plan_move: a copy is a normal record on the moved
topic
that presents as its original (moved once or twice, with or without REAL_TOPIC of its own); a
file's stragglers are moved only when ack-mode groups' listed unacked messages alone hold it and
weigh less than the share; a moved message holds its copy's file, not the old one."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine import Geometry, Message, MessageStore, StoreConfig
from mqstore.engine.ackindex.low_water import AckProgress, read_ack_progress, write_low_water
from mqstore.engine.log.host import Host
from mqstore.engine.log.message import encode_message
from mqstore.engine.log.record import PROP_REAL_QID, PROP_REAL_TOPIC, DecodeKind, Record, decode_record, encode_record
from mqstore.engine.reclaim.consumed import ACK, NO_GROUP, OFFSET, ConsumedFiles, FileHold, HeldFile, Holder, plan_move
from mqstore.engine.reclaim.move import MOVED_TOPIC, copy_message, origin_of, presented, same_message
from mqstore.engine.reclaim.retention import RetentionPolicy
from tests.conftest import FakeClock

HOST = Host("10.0.0.7", 10911)
FILE = 1000

text = st.text(st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)), min_size=1,
               max_size=12)


def _stored(buf: bytes | bytearray, phys_offset: int) -> Record:
    decoded = decode_record(buf)
    assert decoded.kind is DecodeKind.RECORD and decoded.record is not None
    return decoded.record


def _append_copy(record: Record, phys_offset: int, queue_offset: int, store_ms: int) -> Record:
    """Encode ``copy_message(record)`` as the writer would and read it back at ``phys_offset``."""
    copy = copy_message(record)
    encoded = encode_message(copy, queue_id=0, born_ms=1, store_host=HOST, uniq_key=None, prop_crc=False,
                             max_body_bytes=1 << 20)
    assert isinstance(encoded, bytearray)
    decoded = _stored(encoded, phys_offset)
    assert decoded.topic == MOVED_TOPIC
    return dataclasses.replace(decoded, phys_offset=phys_offset, queue_offset=queue_offset, store_ms=store_ms)


@settings(max_examples=60, deadline=None)
@given(topic=st.from_regex(r"[A-Za-z][A-Za-z0-9_%-]{0,40}", fullmatch=True),
       props=st.dictionaries(text, text, max_size=5), real=st.booleans(), body=st.binary(max_size=64),
       queue_id=st.integers(0, 1000), queue_offset=st.integers(0, 1 << 40), phys_offset=st.integers(0, 1 << 50),
       sys_flag=st.sampled_from([0, 0x1, 0x2, 0x8]), twice=st.booleans())
def test_a_copy_presents_as_its_original(topic: str, props: dict[str, str], real: bool, body: bytes, queue_id: int,
                                         queue_offset: int, phys_offset: int, sys_flag: int, twice: bool) -> None:
    props = {k: v for k, v in props.items() if not k.startswith(("MOVED_", "__CRC"))}
    props.pop(PROP_REAL_TOPIC, None)
    props.pop(PROP_REAL_QID, None)
    if real:
        props.update({PROP_REAL_TOPIC: "elsewhere", PROP_REAL_QID: "7"})
    original = _stored(encode_record(topic=topic, body=body, properties=props, queue_id=queue_id, flag=3,
                                     sys_flag=sys_flag, born_ms=11, born_host=Host("10.1.2.3", 4), store_host=HOST,
                                     store_ms=22, queue_offset=queue_offset, phys_offset=phys_offset,
                                     reconsume_times=2, prepared_tx_offset=5 if sys_flag == 0x8 else 0), phys_offset)
    copy = _append_copy(original, phys_offset + 10_000, 4, 33)
    if twice:
        copy = _append_copy(copy, phys_offset + 20_000, 9, 44)
    origin = origin_of(copy)
    assert origin is not None and (origin.phys_offset, origin.queue_offset) == (phys_offset, queue_offset)
    assert copy.properties[PROP_REAL_TOPIC] == topic and copy.properties[PROP_REAL_QID] == str(queue_id)
    assert copy.sys_flag & 0xC == 0  # a copy is never a transaction's record
    assert presented(copy) == original
    assert same_message(original, copy) and not same_message(original, dataclasses.replace(copy, body=b"x" + body))
    assert presented(original) is original and origin_of(original) is None


def _hold(kind: str, messages: int, stragglers: tuple[tuple[int, int], ...] = (), group: str = "G") -> FileHold:
    progress = AckProgress(group, "T", 0, 0, 100, {0: messages}, stragglers) if kind == ACK else None
    return FileHold(Holder(kind, group, "T", 0, 0, 0, 100, progress), messages)


def _file(base: int, *holds: FileHold, newest: bool = False) -> HeldFile:
    return HeldFile(base, base + FILE, 0, newest, False, tuple(holds))


def test_plan_move_takes_the_oldest_held_file_only_when_few_listed_unacked_messages_hold_it() -> None:
    two = ((100, 50), (300, 60))
    newest = _file(2 * FILE, newest=True)
    plan = plan_move([_file(0, _hold(ACK, 2, two), _hold(ACK, 1, two[:1], "H")), _file(FILE), newest], 0.5)
    assert plan is not None and (plan.file_base, plan.stragglers, plan.straggler_bytes) == (0, two, 110)
    assert plan_move([_file(0), _file(FILE, _hold(ACK, 1, ((FILE + 5, 10),))), newest], 0.5).stragglers == (
        (FILE + 5, 10),)  # a file nobody holds goes by itself: the next one is the oldest held
    assert plan_move([_file(0, _hold(ACK, 2, two)), newest], 0.1) is None  # 110 bytes: not below 10 %
    assert plan_move([_file(0, _hold(ACK, 3, two)), newest], 0.5) is None  # one not listed
    assert plan_move([_file(0, _hold(ACK, 2, two), _hold(OFFSET, 5)), newest], 0.5) is None
    assert plan_move([_file(0, _hold(NO_GROUP, 1)), newest], 0.5) is None
    assert plan_move([_file(0, _hold(OFFSET, 1)), _file(FILE, _hold(ACK, 1, ((FILE, 9),))), newest], 0.5) is None
    assert plan_move([_file(0, _hold(ACK, 1, ((5, 9),)), newest=True)], 0.5) is None  # never the newest


def test_the_mark_carries_the_stragglers(tmp_path: Path) -> None:
    progress = [AckProgress("G", "T", 0, 3, 9, {0: 2, 4096: 1}, ((10, 100), (300, 90))),
                AckProgress("G", "T", 1, 0, 0, {})]
    write_low_water(tmp_path, 0, 10, progress)
    assert list(read_ack_progress(tmp_path, 1).values()) == progress


def test_a_moved_message_holds_its_copys_file_and_the_moved_topic_holds_nothing(tmp_path: Path) -> None:
    geometry = Geometry(commitlog_file_size=8192, cq_entries_per_file=16, index_slot_count=16, index_entry_count=64)
    store = MessageStore.open(tmp_path / "s", StoreConfig(geometry=geometry), now_ms=FakeClock(0))
    store.put_batch([Message("T", bytes(300)) for _ in range(60)])
    phys_10 = store.get("T", 0, 10, 1).messages[0].phys_offset
    decoded = store.commitlog.read_record(phys_10)
    assert decoded.record is not None
    [moved] = store.put_batch([copy_message(decoded.record)])
    copy_base = moved.phys_offset - moved.phys_offset % geometry.commitlog_file_size
    (store.path / "queueindex" / "G" / "T" / "0").mkdir(parents=True)
    files = ConsumedFiles(store.path, geometry.cq_entries_per_file, reader_count=1)
    try:
        write_low_water(store.path, 0, moved.phys_offset, [AckProgress("G", "T", 0, 10, 60, {copy_base: 1})])
        consumption = files.read(store.commitlog.min_offset)
        assert [(h.kind, h.topic, h.phys_offset) for h in consumption.holders] == [(ACK, "T", copy_base)]
        assert consumption.consumed_end == copy_base > phys_10  # every file before the copy's may go
        write_low_water(store.path, 0, phys_10, [AckProgress("G", "T", 0, 10, 60, {0: 1})])
        assert files.read(store.commitlog.min_offset).consumed_end == phys_10  # not moved: its own entry holds
    finally:
        files.close()
        store.close()


def test_the_setting_is_a_share_and_needs_reclaim_consumed() -> None:
    assert RetentionPolicy(reclaim_consumed=True, move_stragglers_below=0.5).validate().move_stragglers_below == 0.5
    for bad in (RetentionPolicy(move_stragglers_below=0.5), RetentionPolicy(reclaim_consumed=True,
                                                                            move_stragglers_below=1.0)):
        with pytest.raises(ValueError, match="move_stragglers_below"):
            bad.validate()
