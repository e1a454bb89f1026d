"""The broker configuration: every value of a TOML file type-checked, and each error naming the
key's path, what it expects and what it was given, down to ``mqstore start``'s message."""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest

from mqstore.actors.config import SECTIONS, ConfigError, load_config, log_level

ROOT = Path(__file__).resolve().parent.parent.parent


def load_toml(tmp_path: Path, text: str, **overrides: Any) -> Any:
    path = tmp_path / "broker.toml"
    path.write_text(text)
    return load_config(tmp_path / "store", path, **overrides)


@pytest.mark.parametrize(("toml_value", "shown"), [
    ("1.5", "1.5 (a float)"),
    ('"8MiB"', '"8MiB" (a string)'),
    ("true", "true (a boolean)"),
])
def test_prefault_ahead_bytes_of_another_type_is_refused_naming_the_key(
    tmp_path: Path, toml_value: str, shown: str
) -> None:
    """Regression: 1.5 was accepted, and "8MiB" failed with "'<' not supported between instances of
    'str' and 'int'"; a boolean is not a byte count either."""
    with pytest.raises(ConfigError) as caught:
        load_toml(tmp_path, f"[store]\nprefault_ahead_bytes = {toml_value}\n")
    assert str(caught.value) == f"store.prefault_ahead_bytes must be an integer, got {shown}"


def leaves(section_type: type, path: str) -> list[tuple[str, Any]]:
    """(dotted path, declared type) of every key a section holds, nested tables included."""
    hints = typing.get_type_hints(section_type)
    found: list[tuple[str, Any]] = []
    for f in fields(section_type):
        hint = hints[f.name]
        if is_dataclass(hint):
            found += [*leaves(hint, f"{path}.{f.name}"), (f"{path}.{f.name}", "table")]
        else:
            found.append((f"{path}.{f.name}", hint))
    return found


def wrong_values(hint: Any) -> list[Any]:
    plain = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    wrong = {int: ["1", True, 1.5], float: ["0.5", True], bool: [1, "true"], str: [1, False], "table": [1, "x"]}
    assert len(plain) == 1 and plain[0] in wrong, f"the test knows no wrong value for {hint}"
    return wrong[plain[0]]


# tables whose keys have no default: the others' values are given too
REQUIRED = {"store.store_host": {"ip": '"127.0.0.1"', "port": "10911"}}


def toml_table(path: str, value: Any) -> str:
    table, key = path.rsplit(".", 1)
    if isinstance(value, bool):
        rendered = str(value).lower()
    else:
        rendered = f'"{value}"' if isinstance(value, str) else repr(value)
    lines = {**REQUIRED.get(table, {}), key: rendered}
    return f"[{table}]\n" + "".join(f"{k} = {v}\n" for k, v in lines.items())


ALL_KEYS = [leaf for name, section_type in SECTIONS.items() for leaf in leaves(section_type, name)]


@pytest.mark.parametrize(("path", "hint"), ALL_KEYS, ids=[p for p, _ in ALL_KEYS])
def test_every_key_is_type_checked(tmp_path: Path, path: str, hint: Any) -> None:
    for value in wrong_values(hint):
        with pytest.raises(ConfigError, match=rf"^(\[{path}\]|{path}) must be .*, got "):
            load_toml(tmp_path, toml_table(path, value))


def test_right_types_load(tmp_path: Path) -> None:
    config = load_toml(tmp_path, "[store]\nprefault_ahead_bytes = 8388608\n[store.store_host]\n"
                       'ip = "10.0.0.7"\nport = 10911\n[retention]\ndisk_warning_ratio = 1\n'
                       "[flush]\nspare_file = false\n")
    assert config.store.prefault_ahead_bytes == 8388608
    assert (config.store.store_host.ip, config.store.store_host.port) == ("10.0.0.7", 10911)
    assert config.retention.disk_warning_ratio == 1.0  # an integer is a number
    assert config.flush.spare_file is False


@pytest.mark.parametrize(("text", "message"), [
    ("[flush]\ninterval_ms = -1\n", "flush.interval_ms must not be negative, got -1"),
    ("[store]\nmax_body_bytes = 0\n", "store.max_body_bytes must be between 1 and 67108864, got 0"),
    ("[store]\nprefault_ahead_bytes = -1\n", "store.prefault_ahead_bytes must not be negative, got -1"),
    ("[store.geometry]\ncommitlog_file_size = 100\n",
     "store.geometry.commitlog_file_size must be at least 4096 (one page), got 100"),
    ('[store.store_host]\nip = "nope"\nport = 1\n', 'store.store_host.ip must be an IP address, got "nope"'),
    ('[store.store_host]\nip = "10.0.0.7"\n', "store.store_host.port is missing"),
    ('[retention]\ndelete_when = "4am"\n', "retention.delete_when must list hours 00..23 separated by ';', "
                                           'got "4am"'),
    ("[ipc]\ntcp_base_port = -5\n", "ipc.tcp_base_port must not be negative, got -5"),
    ("[metrics]\nport = 0\n", "metrics.port must be between 1 and 65535, got 0"),
    ('[metrics]\nhost = "localhost"\n', 'metrics.host must be an IP address, got "localhost"'),
    ('[metrics]\nenabled = true\nhost = "0.0.0.0"\n', "[metrics] host '0.0.0.0' is not a loopback address and the "
     "listener has no authentication: set allow_non_loopback = true to serve it anyway"),
    ("[metrics]\ncollect_interval_ms = 0\n", "metrics.collect_interval_ms must be at least 1, got 0"),
])
def test_values_out_of_range_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_toml(tmp_path, text)
    assert str(caught.value) == message


def test_metrics_on_every_address_when_asked_and_its_url_dials_loopback(tmp_path: Path) -> None:
    config = load_toml(tmp_path, '[metrics]\nenabled = true\nhost = "0.0.0.0"\nallow_non_loopback = true\n'
                       "port = 9100\n")
    assert config.metrics.url == "http://127.0.0.1:9100/"


def test_a_section_that_is_not_a_table_is_refused_even_with_overrides(tmp_path: Path) -> None:
    """``mqstore start`` always overrides [remoting]: merging into a non-table must not raise
    AttributeError."""
    with pytest.raises(ConfigError, match=r"^\[remoting\] must be a table, got 1 \(an integer\)$"):
        load_toml(tmp_path, "remoting = 1\n", remoting={"enabled": True})
    with pytest.raises(ConfigError, match=r'^\[store.geometry\] must be a table, got "big" \(a string\)$'):
        load_toml(tmp_path, '[store]\ngeometry = "big"\n')


@pytest.mark.parametrize(("text", "message"), [
    ('[store]\nprefault_ahead_bytes = "8MiB"\n', 'store.prefault_ahead_bytes must be an integer, got "8MiB"'),
    ("remoting = 1\n", "[remoting] must be a table"),
])
def test_mqstore_start_prints_the_error_and_exits_2_without_a_traceback(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "start", "--store",
                           str(tmp_path / "store"),
                           "--config", str(config)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"mqstore start: {message}"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "store").exists()  # nothing started


def test_log_level_is_read_in_any_case_and_a_wrong_one_is_a_config_error(tmp_path: Path) -> None:
    assert log_level({}) == "INFO"
    assert log_level({"MQSTORE_LOG_LEVEL": "debug"}) == "DEBUG"
    with pytest.raises(ConfigError, match=r"^MQSTORE_LOG_LEVEL must be one of .*, got 'loud'$"):
        log_level({"MQSTORE_LOG_LEVEL": "loud"})


def test_mqstore_start_with_a_wrong_log_level_exits_2_without_a_traceback(tmp_path: Path) -> None:
    """A lower-case or unknown level used to raise in logging.basicConfig, in the supervisor and in
    every actor it started."""
    env = {**os.environ, "MQSTORE_LOG_LEVEL": "loud"}
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "start", "--store",
                           str(tmp_path / "store")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2
    assert proc.stderr.startswith("mqstore start: MQSTORE_LOG_LEVEL must be one of"), proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_remoting_front_goes_off_loopback_only_with_an_acl_file_or_when_told_plainly(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="set acl_file"):
        load_toml(tmp_path, '[remoting]\nenabled = true\nhost = "0.0.0.0"\n')
    assert load_toml(tmp_path, '[remoting]\nenabled = true\nhost = "0.0.0.0"\nallow_non_loopback = true\n')
    (tmp_path / "acl").mkdir()
    (tmp_path / "acl" / "plain_acl.yml").write_text("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n")
    config = load_toml(tmp_path, '[remoting]\nenabled = true\nhost = "0.0.0.0"\nacl_file = "acl/plain_acl.yml"\n')
    assert config.remoting.acl_file == str(tmp_path / "acl" / "plain_acl.yml")  # relative to the config file


def test_an_acl_file_that_does_not_read_stops_the_start(tmp_path: Path) -> None:
    (tmp_path / "plain_acl.yml").write_text("accounts:\n  - accessKey: short\n    secretKey: 12345678\n")
    with pytest.raises(ConfigError, match=r"^\[remoting\] ACL file .*longer than 6"):
        load_toml(tmp_path, '[remoting]\nenabled = true\nacl_file = "plain_acl.yml"\n')
    with pytest.raises(ConfigError, match=r"^\[remoting\] cannot read ACL file"):
        load_toml(tmp_path, '[remoting]\nenabled = true\nacl_file = "missing.yml"\n')
