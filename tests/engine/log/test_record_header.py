"""engine/csrc/record.h, the record layout every kernel reads, against engine/log/record.py, the codec
with the byte table: each constant of the header is parsed from its ``#define`` and compared with the
codec's, so the two cannot drift."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mqstore.engine.log import record
from mqstore.engine.log.host import IPV4_HOST_SIZE, IPV6_HOST_SIZE, Host

CSRC = Path(record.__file__).resolve().parents[1] / "csrc"
_DEFINE = re.compile(r"^#define ([A-Z][A-Z0-9_]*) (.+?)\s*(?:/\*.*)?$", re.MULTILINE)
# the byte table's rows: position, size (IPv4|IPv6 for a host) and field name
_ROW = re.compile(r"^\s+(\d+)\s+(\d+)(?:\|\d+)?\s+([A-Z]+(?: [A-Z]+)*)", re.MULTILINE)
_TABLE_NAMES = {"TOTALSIZE": "TOTALSIZE_POS", "MAGICCODE": "MAGIC_POS", "BODYCRC": "BODY_CRC_POS",
                "QUEUEID": "QUEUE_ID_POS", "FLAG": "FLAG_POS", "QUEUEOFFSET": "QUEUE_OFFSET_POS",
                "PHYSICALOFFSET": "PHYS_OFFSET_POS", "SYSFLAG": "SYSFLAG_POS", "BORNTIMESTAMP": "BORN_MS_POS",
                "BORNHOST": "BORN_HOST_POS", "STORETIMESTAMP": "STORE_MS_POS", "STOREHOST": "STORE_HOST_POS",
                "RECONSUMETIMES": "RECONSUME_TIMES_POS", "PREPARED TX OFFSET": "PREPARED_TX_OFFSET_POS",
                "BODYLENGTH": "BODY_LENGTH_POS"}


def _header() -> dict[str, int | str]:
    """Every ``#define`` of record.h, evaluated: an int expression over earlier ones, or a string."""
    values: dict[str, int | str] = {}
    for name, text in _DEFINE.findall((CSRC / "record.h").read_text()):
        if name == "MQSTORE_RECORD_H":
            continue
        tree = ast.parse(text, mode="eval")
        allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Add, ast.Sub,
                   ast.Mult, ast.USub)
        assert all(isinstance(node, allowed) for node in ast.walk(tree)), f"{name}: {text}"
        values[name] = eval(compile(tree, name, "eval"), {"__builtins__": {}}, dict(values))
    return values


HEADER = _header()


SHARED = ("MAGIC_V1", "MAGIC_V2", "BLANK_MAGIC", "END_FILE_MIN_BLANK_SIZE", "MAX_PROPERTIES_SIZE", "PROP_CRC_KEY",
          "PROP_CRC_SIZE", "QUEUE_OFFSET_POS", "PHYS_OFFSET_POS", "SYSFLAG_POS", "BORN_MS_POS", "BORN_HOST_POS",
          "SYSFLAG_COMPRESSED", "SYSFLAG_MULTI_TAGS", "SYSFLAG_TX_PREPARED", "SYSFLAG_TX_COMMIT", "SYSFLAG_TX_ROLLBACK",
          "SYSFLAG_TX_MASK", "SYSFLAG_BORNHOST_V6", "SYSFLAG_STOREHOST_V6", "IPV4_HOST_SIZE", "IPV6_HOST_SIZE")


@pytest.mark.parametrize("name", SHARED)
def test_a_constant_both_define_is_the_same(name: str) -> None:
    assert HEADER[name] == getattr(record, name)


def test_every_name_both_define_is_compared() -> None:
    assert {name for name in HEADER if hasattr(record, name)} == set(SHARED)


def test_the_fixed_fields_sit_where_the_byte_table_puts_them() -> None:
    rows = {name.strip(): (int(pos), int(size)) for pos, size, name in _ROW.findall(record.__doc__ or "")}
    assert set(rows) == set(_TABLE_NAMES)
    for field, constant in _TABLE_NAMES.items():
        assert HEADER[constant] == rows[field][0], field
    assert rows["BORNHOST"][1] == rows["STOREHOST"][1] == HEADER["IPV4_HOST_SIZE"] == IPV4_HOST_SIZE
    assert HEADER["IPV6_HOST_SIZE"] == IPV6_HOST_SIZE == HEADER["IPV4_HOST_SIZE"] + HEADER["HOST_V6_EXTRA"]
    assert rows["BODYLENGTH"][1] == HEADER["BODY_LENGTH_SIZE"]


@pytest.mark.parametrize("sys_flag", [0, 0x10, 0x20, 0x30])
def test_the_moving_fields_move_as_the_codec_moves_them(sys_flag: int) -> None:
    """mq_record_store_ms_pos and mq_record_body_length_pos: each IPv6 host adds HOST_V6_EXTRA."""
    born_v6, store_v6 = sys_flag & 0x10 != 0, sys_flag & 0x20 != 0
    extra = int(HEADER["HOST_V6_EXTRA"])
    assert record.store_ms_pos(sys_flag) == int(HEADER["STORE_MS_POS"]) + extra * born_v6
    assert record.body_length_pos(sys_flag) == int(HEADER["BODY_LENGTH_POS"]) + extra * (born_v6 + store_v6)


def test_sizes_are_the_codec_s() -> None:
    assert HEADER["MIN_RECORD_SIZE_V1"] == record.record_size(0, 0, 0, 0, 1)
    assert HEADER["MIN_RECORD_SIZE_V2"] == record.record_size(0, 0, 0, 0, 2)
    # mq_record_size: FIXED_FIELDS_SIZE, both hosts, the body, the topic's field, PROPERTIESLENGTH, them
    fixed, props_len = int(HEADER["FIXED_FIELDS_SIZE"]), int(HEADER["PROPERTIES_LENGTH_SIZE"])
    assert record.record_size(0x30, 5, 7, 11, 2) == fixed + 2 * IPV6_HOST_SIZE + 5 + 2 + 7 + props_len + 11
    assert HEADER["PROP_CRC_SIZE"] == HEADER["PROP_CRC_KEY_SIZE"] + 1 + HEADER["PROP_CRC_DIGITS"] + 1
    assert HEADER["PROP_CRC_KEY_SIZE"] == len(record.PROP_CRC_KEY)
    assert len(record.prop_crc_digits(0)) == HEADER["PROP_CRC_DIGITS"]


def test_the_separators_are_the_codec_s() -> None:
    text = record.encode_properties({"a": "b"})
    assert text == bytes((HEADER["NAME_VALUE_SEPARATOR"],)).join([b"a", b"b"]) + bytes((HEADER["PROPERTY_SEPARATOR"],))


def test_a_topic_past_the_first_magic_s_length_takes_the_second() -> None:
    host = Host("10.0.0.1", 1)
    limit = int(HEADER["MAX_TOPIC_SIZE_V1"])
    for length, magic in ((limit, record.MAGIC_V1), (limit + 1, record.MAGIC_V2)):
        encoded = record.encode_record(topic="t" * length, body=b"", properties={}, born_host=host, store_host=host)
        assert int.from_bytes(encoded[4:8], "big", signed=True) == magic
