"""ZeroMQ over TCP is CURVE or nothing: keys from ``mqstore keys``, clients with the right key served,
a wrong key or none let nothing through while the broker goes on serving the good client, and a
plain TCP config refused unless explicitly allowed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mqstore.actors.config import ConfigError, load_config
from mqstore.ipc.client.api import Admin, Consumer, Producer
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError
from mqstore.ipc.transport.curve import CurveError, CurveKeys, generate_keys
from tests.integration.broker import Broker, free_port_range

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
        sent = subprocess.run([*cli, "--keys", str(broker.keys_dir)], capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0 and "2 sent, 0 failed" in sent.stderr, sent.stderr
        keyless = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert keyless.returncode != 0 and "sent" not in keyless.stderr, keyless.stderr
        got = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "consume", "--store",
                              str(broker.store),
                              "--topic", "Cli", "--from", "earliest", "--tcp", f"127.0.0.1:{broker.tcp_port}",
                              "--keys", str(broker.keys_dir)], capture_output=True, text=True, timeout=60)
        assert got.returncode == 0 and "2 received" in got.stderr, got.stderr
        assert broker.stop() == 0


def test_cli_reports_an_undeliverable_request_without_a_traceback(tmp_path: Path) -> None:
    """A request the client could not deliver (nothing listening, or a broker refusing the key)
    ended ``mqstore produce`` in a BrokerError traceback."""
    generate_keys(tmp_path / "keys")
    port = free_port_range(1)
    run = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "produce", "--store",
                          str(tmp_path / "store"),
                          "--topic", "T", "--tcp", f"127.0.0.1:{port}", "--keys", str(tmp_path / "keys")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith("mqstore produce: ")
