"""ZeroMQ over TCP is CURVE or nothing: keys from ``mqstore keys``, clients with the right key served,
a wrong key or none let nothing through while the broker goes on serving the good client, and a
plain TCP config refused unless explicitly allowed, and the broker's internal streams open to its own
key alone. Each key may be limited to its roles
(``roles.toml``): what it may not do is refused NO_PERMISSION, and without the file all is allowed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.actors.config import ConfigError, load_config
from mqstore.ipc.client.api import Admin, Consumer, Producer
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError, Channel
from mqstore.ipc.transport.curve import CurveContext, CurveError, CurveKeys, generate_keys
from mqstore.ipc.transport.sockets import connect
from mqstore.ipc.wire import requests, schema
from mqstore.scripts.survival.hostile.ipc_attacks import handshake_refused
from tests.integration.broker import Broker, free_port_range, wait_for

# what a client without an issued key sees: no reply, or (its connection torn down after each failed
# handshake) nowhere to queue the request
REFUSED = (BrokerTimeoutError, BrokerError)


def test_mqstore_keys_writes_private_z85_certificates(tmp_path: Path) -> None:
    out = tmp_path / "keys"
    run = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "keys", "--out", str(out), "--client",
                          "app",
                          "--client", "ops"], capture_output=True, text=True, check=True)
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert names == ["app.key_secret", "clients/app.key", "clients/ops.key", "ops.key_secret", "server.key",
                     "server.key_secret"]
    assert all(stat.S_IMODE(os.stat(out / n).st_mode) == 0o600 for n in names)
    assert "curve_secret_key" in run.stderr
    server = CurveKeys.for_server(out / "server.key_secret")
    app = CurveKeys.for_client(out, "app")
    assert app.server_public == server.public and len(app.secret) == 40 and app.public != server.public
    # a second run keeps the broker's keypair: clients already trust it
    generate_keys(out, ["late"])
    assert CurveKeys.for_server(out / "server.key_secret") == server


def test_secret_keys_stay_out_of_reprs(tmp_path: Path) -> None:
    generate_keys(tmp_path)
    keys = CurveKeys.for_client(tmp_path)
    assert keys.secret.decode() not in repr(keys) and keys.public.decode() in repr(keys)


def test_secret_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    generate_keys(tmp_path)
    os.chmod(tmp_path / "client.key_secret", 0o644)
    with pytest.raises(CurveError, match="readable by others"):
        CurveKeys.for_client(tmp_path)


def test_plain_tcp_config_refused_unless_allowed(tmp_path: Path) -> None:
    tcp = {"tcp_host": "127.0.0.1", "tcp_base_port": 30000}
    with pytest.raises(ConfigError, match="allow_plain_tcp"):
        load_config(tmp_path / "store", ipc=tcp)
    assert load_config(tmp_path / "store", ipc={**tcp, "allow_plain_tcp": True}).endpoints.curve is None
    generate_keys(tmp_path / "keys")
    toml = tmp_path / "broker.toml"
    toml.write_text('[ipc]\ntcp_host = "127.0.0.1"\ntcp_base_port = 30000\n'
                    'curve_secret_key = "keys/server.key_secret"\ncurve_clients_dir = "keys/clients"\n')
    config = load_config(tmp_path / "store", toml)  # key paths are relative to the config file
    assert config.endpoints.curve == CurveKeys.for_server(tmp_path / "keys" / "server.key_secret")
    with pytest.raises(ConfigError, match="go together"):
        load_config(tmp_path / "store", ipc={**tcp, "curve_secret_key": str(tmp_path / "keys/server.key_secret")})
    with pytest.raises(ConfigError, match="cannot read CURVE key file"):
        load_config(tmp_path / "store", ipc={**tcp, "curve_secret_key": str(tmp_path / "nope"),
                                             "curve_clients_dir": str(tmp_path / "keys/clients")})


@pytest.mark.slow
def test_curve_broker_serves_the_right_key_and_nothing_else(tmp_path: Path) -> None:
    broker = Broker(tmp_path, tcp_port=free_port_range(12))
    generate_keys(tmp_path / "other")
    stranger = CurveKeys.for_client(tmp_path / "other")  # a keypair the broker never heard of
    server_public = CurveKeys.for_client(broker.keys_dir).server_public
    wrong = CurveKeys(server_public, stranger.public, stranger.secret)
    with broker, Producer(endpoints=broker.endpoints()) as good:
        assert good.send("Secure", b"first", queue_id=0).ok
        for keys in (wrong, None):
            with Producer(endpoints=broker.endpoints(keys), timeout_ms=1500, retries=0) as bad:
                with pytest.raises(REFUSED):
                    bad.send("Secure", b"should not be stored", queue_id=0)
                assert good.send("Secure", b"still served", queue_id=0).ok  # while the bad one keeps trying
        with Admin(endpoints=broker.endpoints()) as admin:  # a waiting call: on the caller's own CURVE socket
            assert "Secure" in admin.topics()
        with Admin(endpoints=broker.endpoints(wrong), timeout_ms=1500) as stranger_admin, pytest.raises(REFUSED):
            stranger_admin.topics()
        with Consumer(endpoints=broker.endpoints(), group="G", topic="Secure", queues=[0],
                      start="earliest") as consumer:
            bodies = [m.body for m in consumer.messages(3, timeout_ms=10_000)]
        assert bodies == [b"first", b"still served", b"still served"]
        old_pid = broker.kill("writer")  # a restarted actor starts its own authenticator with the same keys
        broker.wait_restarted("writer", old_pid)
        assert good.send("Secure", b"after a restart", queue_id=1).ok
        with pytest.raises(REFUSED), Consumer(
                endpoints=broker.endpoints(None), group="G2", topic="Secure", queues=[0], start="earliest",
                timeout_ms=1500) as snoop:
            snoop.messages(1, timeout_ms=3000)
        cli = [sys.executable, "-m", "mqstore.scripts.cli.mqstore", "produce", "--store", str(broker.store),
               "--topic", "Cli",
               "--count", "2", "--tcp", f"127.0.0.1:{broker.tcp_port}"]
        sent = subprocess.run([*cli, "--curve-keys", str(broker.keys_dir)], capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0 and "2 sent, 0 failed" in sent.stderr, sent.stderr
        keyless = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert keyless.returncode != 0 and "sent" not in keyless.stderr, keyless.stderr
        got = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "consume", "--store",
                              str(broker.store),
                              "--topic", "Cli", "--from", "earliest", "--tcp", f"127.0.0.1:{broker.tcp_port}",
                              "--curve-keys", str(broker.keys_dir)], capture_output=True, text=True, timeout=60)
        assert got.returncode == 0 and "2 received" in got.stderr, got.stderr
        assert broker.stop() == 0


def test_cli_reports_an_undeliverable_request_without_a_traceback(tmp_path: Path) -> None:
    """A request the client could not deliver (nothing listening, or a broker refusing the key)
    ended ``mqstore produce`` in a BrokerError traceback."""
    generate_keys(tmp_path / "keys")
    port = free_port_range(1)
    run = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "produce", "--store",
                          str(tmp_path / "store"),
                          "--topic", "T", "--body", "x", "--tcp", f"127.0.0.1:{port}", "--curve-keys",
                          str(tmp_path / "keys")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith("mqstore produce: ")


def _refused(call: Callable[[], Any]) -> str | None:
    """The reason a call was refused NO_PERMISSION; None when it was served."""
    try:
        call()
    except BrokerError as exc:
        assert exc.status == schema.NO_PERMISSION, exc
        return exc.reason
    return None


@pytest.mark.slow
def test_curve_roles_limit_each_key_to_what_it_may_do(tmp_path: Path) -> None:
    broker = Broker(tmp_path, tcp_port=free_port_range(12))
    generate_keys(broker.keys_dir, ["prod", "cons", "ops"])
    with broker:
        with Admin(endpoints=broker.endpoints("prod")) as prod_admin:  # no roles file: everything, as before
            assert prod_admin.create_topic("Scratch", 1) == 1
            assert prod_admin.delete_topic("Scratch")
            assert prod_admin.queue_info("Scratch") == {}
        (broker.keys_dir / "roles.toml").write_text('prod = ["produce"]\ncons = ["consume"]\nops = ["admin"]\n')
        with Producer(endpoints=broker.endpoints("prod"), retries=0) as producer, \
                Admin(endpoints=broker.endpoints("prod")) as prod_admin, \
                Admin(endpoints=broker.endpoints("cons")) as cons_admin, \
                Admin(endpoints=broker.endpoints("ops")) as ops_admin:
            # the writer and the reader each read the changed file within a second
            wait_for(lambda: _refused(lambda: prod_admin.create_topic("Probe", 1)), 30, "the writer's roles")
            wait_for(lambda: _refused(lambda: prod_admin.queue_info("Roles")), 30, "the reader's roles")
            # the transactions actor: a producer registers for check-backs, a consumer may not
            ends = {name: Channel({"tx": [broker.endpoints(name).transactions]}, name=f"tx-{name}",
                                  curve=broker.endpoints(name).curve) for name in ("prod", "cons")}
            try:
                register = requests.RegisterProducer(("TxGroup",))
                wait_for(lambda: _refused(lambda: ends["cons"].request("tx", register, timeout_ms=5000)), 30,
                         "the transactions actor's roles")
                assert ends["prod"].request("tx", register, timeout_ms=5000)["ok"]
            finally:
                for channel in ends.values():
                    channel.close()
            # produce only: sends, but neither consumes nor deletes a topic
            assert producer.send("Roles", b"one", queue_id=0).ok and producer.send("Roles", b"two", queue_id=0).ok
            reason = _refused(lambda: prod_admin.delete_topic("Roles"))
            assert reason == "client key 'prod' has produce in roles.toml; 'delete_topic' needs the 'admin' role"
            with pytest.raises(BrokerError) as pulled, Consumer(
                    endpoints=broker.endpoints("prod"), group="P", topic="Roles", queues=[0], start="earliest",
                    auto_commit=False) as snoop:
                snoop.messages(1, timeout_ms=5000)
            assert pulled.value.status == schema.NO_PERMISSION and "needs the 'consume'" in pulled.value.reason
            # consume only: consumes and commits its offsets, but neither sends nor resets nor deletes
            with Consumer(endpoints=broker.endpoints("cons"), group="C", topic="Roles", queues=[0],
                          start="earliest", auto_commit=False) as consumer:
                assert [m.body for m in consumer.messages(2, timeout_ms=10_000)] == [b"one", b"two"]
                consumer.commit()
            assert cons_admin.fetch_offset("C", "Roles", 0) == 2
            with Producer(endpoints=broker.endpoints("cons"), retries=0) as cons_producer, \
                    pytest.raises(BrokerError) as sent:
                cons_producer.send("Roles", b"not mine to send", queue_id=0)
            assert sent.value.status == schema.NO_PERMISSION and "'send' needs the 'produce'" in sent.value.reason
            for admin_op in (lambda: cons_admin.reset_offset("C", "Roles", 0, 0),
                             lambda: cons_admin.delete_topic_offsets("Roles"),
                             lambda: cons_admin.delete_topic("Roles")):
                assert "needs the 'admin' role" in (_refused(admin_op) or "served")
            # admin: resets, creates and deletes; the key not listed ("client") may do nothing of that
            ops_admin.reset_offset("C", "Roles", 0, 1)
            assert cons_admin.fetch_offset("C", "Roles", 0) == 1
            assert ops_admin.create_topic("Made", 2) == 2
            with Admin(endpoints=broker.endpoints("client")) as unlisted:
                assert "has no roles" in (_refused(lambda: unlisted.delete_topic("Made")) or "served")
                assert "Made" in unlisted.topics()  # any key let in may list the topics
            assert ops_admin.delete_topic("Made") and ops_admin.delete_topic_offsets("Roles")
            assert "Made" not in ops_admin.topics()
        assert broker.stop() == 0


@pytest.mark.slow
def test_client_key_cannot_subscribe_to_the_broker_internal_streams(tmp_path: Path) -> None:
    """The notices the broker's actors pass to each other (dispatch, written, flushed, arrived, indexed)
    admit the broker's own key only: a client key let in for requests had them all, sends' bodies in
    the dispatch stream included."""
    # a master serving slaves: its HA actor binds the replicated stream, so every internal stream is there
    broker = Broker(tmp_path, tcp_port=free_port_range(12),
                    extra_toml=f"\n[ha]\nserve = true\nlisten_port = {free_port_range(1)}\n")
    client_ep = broker.endpoints()
    own_keys = CurveKeys.for_server(broker.keys_dir / "server.key_secret")
    client_ctx = CurveContext(client_ep.curve)
    own_ctx = CurveContext(own_keys)
    try:
        with broker:
            snoops = {address: connect(client_ctx, zmq.SUB, address, subscribe=(b"",))
                      for address in sorted(client_ep.internal)}
            monitors = {address: sock.get_monitor_socket() for address, sock in snoops.items()}
            own_dispatch = connect(own_ctx, zmq.SUB, client_ep.dispatch, subscribe=(b"",))
            with Producer(endpoints=client_ep) as producer, Consumer(
                    endpoints=client_ep, group="G", topic="Inside", queues=[0], start="earliest") as consumer:
                for address, monitor in monitors.items():
                    assert handshake_refused(monitor, 30), f"{address}: a client key completed a handshake"
                assert producer.send("Inside", b"private", queue_id=0).ok  # the requests still admit it
                # the broker's own actors keep passing notices: the send is consumed, and the broker's
                # key hears the dispatch stream
                assert [m.body for m in consumer.messages(1, timeout_ms=10_000)] == [b"private"]
                assert own_dispatch.poll(10_000), "the broker's own key heard nothing on the dispatch stream"
                for address, sock in snoops.items():
                    assert not sock.poll(0), f"{address}: a client key received a notice"
            assert broker.stop() == 0
    finally:
        client_ctx.destroy(linger=0)
        own_ctx.destroy(linger=0)
