"""CURVE client keys' roles (mqstore.ipc.transport.roles): the file beside clients/, what each op
needs (OP_ROLES), the broker's own key, reloads when the file changes, and a broken file refused at
start and ignored (the old roles kept) on reload."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mqstore.actors.config import ConfigError, load_config
from mqstore.ipc.transport import roles as roles_module
from mqstore.ipc.transport.curve import CurveKeys, generate_keys, read_public
from mqstore.ipc.transport.roles import KeyRoles, RolesError, read_roles
from mqstore.ipc.wire import requests
from mqstore.ipc.wire.requests import OP_ROLES, Op, Role

SEND = requests.Send((requests.SendMessage("T", b"x"),))
PULL = requests.Pull("G", "T", 0, 0)
DELETE = requests.DeleteTopic("T")


def _keys(tmp_path: Path) -> tuple[Path, dict[str, str], str]:
    """A key directory with clients prod, cons, ops, idle; each one's Z85 key; the broker's."""
    generate_keys(tmp_path, ["prod", "cons", "ops", "idle"])
    clients = tmp_path / "clients"
    keys = {name: read_public(clients / f"{name}.key").decode() for name in ("prod", "cons", "ops", "idle")}
    return clients, keys, CurveKeys.for_server(tmp_path / "server.key_secret").public.decode()


def _write(tmp_path: Path, text: str) -> None:
    path = tmp_path / "roles.toml"
    path.write_text(text)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a change the stamp must see


def test_every_op_says_its_role_and_a_reset_is_admin() -> None:
    assert set(OP_ROLES) == set(Op)
    assert [OP_ROLES[op] for op in (Op.SEND, Op.PULL, Op.DELETE_TOPIC, Op.PING)] == [
        Role.PRODUCE, Role.CONSUME, Role.ADMIN, None]
    assert requests.CommitOffset("G", "T", 0, 3).role is Role.CONSUME
    assert requests.CommitOffset("G", "T", 0, 3, admin=True).role is Role.ADMIN
    assert requests.DeleteTopicOffsets("T").role is Role.ADMIN


def test_without_a_roles_file_every_key_may_do_everything(tmp_path: Path) -> None:
    clients, keys, _ = _keys(tmp_path)
    roles = KeyRoles(clients, b"S" * 40)
    assert not roles.active
    assert all(roles.refusal(keys["idle"], r) is None for r in (SEND, PULL, DELETE))
    assert roles.refusal(None, DELETE) is None


def test_a_key_gets_only_its_roles_and_an_unlisted_key_none(tmp_path: Path) -> None:
    clients, keys, server = _keys(tmp_path)
    _write(tmp_path, 'prod = ["produce"]\ncons = ["consume"]\nops = ["admin", "consume"]\n')
    roles = KeyRoles(clients, server.encode())
    assert roles.active
    allowed = {name: [roles.refusal(keys[name], r) is None for r in (SEND, PULL, DELETE)] for name in keys}
    assert allowed == {"prod": [True, False, False], "cons": [False, True, False], "ops": [False, True, True],
                       "idle": [False, False, False]}
    reason = roles.refusal(keys["prod"], DELETE)
    assert reason == "client key 'prod' has produce in roles.toml; 'delete_topic' needs the 'admin' role"
    assert roles.refusal(keys["idle"], SEND) == ("client key 'idle' has no roles in roles.toml; 'send' needs the "
                                                 "'produce' role")
    assert roles.refusal(None, SEND) is not None  # a request that says no key has no role
    assert roles.refusal(keys["idle"], requests.Ping()) is None  # ping, encoding, topics: any key let in
    assert all(roles.refusal(server, r) is None for r in (SEND, PULL, DELETE))  # the broker's own key
    assert roles.refusal(keys["cons"], requests.CommitOffset("G", "T", 0, 1)) is None
    assert roles.refusal(keys["cons"], requests.CommitOffset("G", "T", 0, 1, admin=True)) is not None


def test_roles_reload_when_the_file_changes_and_a_broken_one_keeps_the_old(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(roles_module, "RELOAD_CHECK_MS", 0)  # look at every poll
    clients, keys, server = _keys(tmp_path)
    roles = KeyRoles(clients, server.encode())
    assert not roles.poll()
    _write(tmp_path, 'prod = ["produce"]\n')
    assert roles.poll() and roles.refusal(keys["prod"], DELETE) is not None
    _write(tmp_path, 'prod = ["produce", "admin"]\n')
    assert roles.poll() and roles.refusal(keys["prod"], DELETE) is None
    _write(tmp_path, 'prod = ["produce", "root"]\n')  # refused: the roles before stay
    assert roles.poll() and roles.refusal(keys["prod"], DELETE) is None
    _write(tmp_path, 'prod = ["produce"\n')
    assert roles.poll() and roles.refusal(keys["prod"], DELETE) is None
    (tmp_path / "roles.toml").unlink()
    assert not roles.poll() and roles.refusal(keys["idle"], DELETE) is None  # no file: as before roles


@pytest.mark.parametrize(("text", "match"), [('nobody = ["admin"]\n', "not a client key"),
                                             ('prod = ["root"]\n', "a list of roles"),
                                             ('prod = "produce"\n', "a list of roles"),
                                             ("prod = [\n", "cannot read")])
def test_a_malformed_roles_file_is_refused(tmp_path: Path, text: str, match: str) -> None:
    clients, _, _ = _keys(tmp_path)
    _write(tmp_path, text)
    with pytest.raises(RolesError, match=match):
        read_roles(clients)
    tcp = {"tcp_host": "127.0.0.1", "tcp_base_port": 30000, "curve_secret_key": str(tmp_path / "server.key_secret"),
           "curve_clients_dir": str(clients)}
    with pytest.raises(ConfigError, match=match):  # the broker does not start on it
        load_config(tmp_path / "store", ipc=tcp)


def test_roles_apply_to_curve_sockets_only(tmp_path: Path) -> None:
    clients, _, _ = _keys(tmp_path)
    _write(tmp_path, 'prod = ["produce"]\n')
    assert load_config(tmp_path / "store").key_roles() is None  # ipc:// in the private run directory
    tcp = {"tcp_host": "127.0.0.1", "tcp_base_port": 30000, "curve_secret_key": str(tmp_path / "server.key_secret"),
           "curve_clients_dir": str(clients)}
    curve = load_config(tmp_path / "store", ipc=tcp).key_roles()
    assert curve is not None and curve.active
