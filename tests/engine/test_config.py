"""Settings as documents hold them: the saved geometry's values are type-checked like the broker's
TOML, and validation errors start with the key they are about."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqstore.engine.config import GEOMETRY_FILE, Geometry, GeometryError, StoreConfig, resolve_geometry
from mqstore.engine.log.host import Host
from mqstore.engine.meta.metafile import MetafileError

SMALL = Geometry(commitlog_file_size=64 * 1024, cq_entries_per_file=64, index_slot_count=16, index_entry_count=64)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("commitlog_file_size", 65536.5, "commitlog_file_size must be an integer, got 65536.5 (a float)"),
    ("cq_entries_per_file", "64", 'cq_entries_per_file must be an integer, got "64" (a string)'),
    ("index_slot_count", True, "index_slot_count must be an integer, got true (a boolean)"),
    ("prop_crc", 1, "prop_crc must be true or false, got 1 (an integer)"),
])
def test_a_saved_geometry_value_of_another_type_is_not_read(tmp_path: Path, key: str, value: object,
                                                            message: str) -> None:
    resolve_geometry(tmp_path, SMALL)
    path = tmp_path / "config" / GEOMETRY_FILE
    saved = json.loads(path.read_text())
    path.write_text(json.dumps({**saved, key: value}))
    with pytest.raises(MetafileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_geometry(tmp_path, None)


@pytest.mark.parametrize(("config", "message"), [
    (StoreConfig(geometry=Geometry(commitlog_file_size=100)),
     "geometry.commitlog_file_size must be at least 4096 (one page), got 100"),
    (StoreConfig(geometry=Geometry(index_slot_count=1)), "geometry.index_slot_count must be at least 2, got 1"),
    (StoreConfig(max_body_bytes=0), "max_body_bytes must be between 1 and 67108864, got 0"),
    (StoreConfig(prefault_ahead_bytes=-1), "prefault_ahead_bytes must not be negative, got -1"),
    (StoreConfig(store_host=Host("broker-a", 10911)), 'store_host.ip must be an IP address, got "broker-a"'),
    (StoreConfig(store_host=Host("::1", 70000)), "store_host.port must be between 0 and 65535, got 70000"),
])
def test_validation_errors_start_with_the_key(config: StoreConfig, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        config.validate()
    assert str(caught.value) == message
    if "geometry." in message:
        assert isinstance(caught.value, GeometryError)
