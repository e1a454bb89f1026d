"""ZeroMQ CURVE for the broker's TCP sockets: key files, socket options, and who may connect.

Keys are Z85 text in ZeroMQ's certificate format (what ``zmq.auth.load_certificate`` reads), every
file mode 0600, each written with ``mqstore.engine.meta.metafile.write_atomic`` (fsynced before it is renamed into
place, so a crash never leaves an empty key file). ``mqstore keys --out DIR`` writes::

    DIR/server.key             the broker's public key: every client needs it
    DIR/server.key_secret      the broker's keypair: [ipc] curve_secret_key
    DIR/clients/NAME.key       a client's public key: [ipc] curve_clients_dir lets it in
    DIR/NAME.key_secret        that client's keypair: give it to the client only

One ``CurveKeys`` value serves both ends: a binding socket becomes a CURVE server with its own
keypair; a connecting socket authenticates with its own keypair to ``server_public``. Actors connect
to each other with the broker's keypair, which their authenticator lets in beside the clients'.
Only ``tcp://`` endpoints get CURVE: ``ipc://`` sockets live in the private run directory.

The keys ride on the process's context (``CurveContext``): every socket it makes puts CURVE on each
``tcp://`` bind and connect by itself, so no call site can open a TCP socket without it.

Each actor process that binds TCP runs a ZAP handler (``zmq.auth.thread.ThreadAuthenticator``)
accepting exactly the keys it was given: a client with another key, or none, never gets a frame
through, and the socket goes on serving everyone else. The broker's internal streams (the addresses
its context names ``own_only``: the notices its actors publish to each other) are a ZAP domain of
their own, ``OWN_ZAP_DOMAIN``, which lets in the broker's key alone: a client key admitted to the
request sockets cannot subscribe to them. What each key let in may do (produce,
consume, admin) is ``roles.toml`` beside ``clients/`` (``mqstore.ipc.transport.roles``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from mqstore.engine.errors import MqstoreError
from mqstore.engine.meta.metafile import make_dirs, write_atomic

SERVER_NAME = "server"
CLIENTS_DIR = "clients"
DEFAULT_CLIENT = "client"
PUBLIC_SUFFIX = ".key"
SECRET_SUFFIX = ".key_secret"
ZAP_DOMAIN = "mqstore"
OWN_ZAP_DOMAIN = "mqstore-own"
Z85_KEY_CHARS = 40
KEY_FILE_MODE = 0o600
_BANNER = "#   ZeroMQ CURVE {kind} for mqstore ({name}); Z85 keys in ZeroMQ's certificate format\n"


class CurveError(MqstoreError, ValueError):
    """A key file is missing, malformed, or readable by others than its owner."""


@dataclass(frozen=True, slots=True)
class CurveKeys:
    """Z85 keys: this end's keypair and the broker's public key."""

    server_public: bytes
    public: bytes
    secret: bytes = field(repr=False)  # an Endpoints in a log line or a traceback must not show it

    @classmethod
    def for_server(cls, secret_path: Path | str) -> CurveKeys:
        public, secret = read_keypair(secret_path)
        return cls(public, public, secret)

    @classmethod
    def for_client(cls, keys_dir: Path | str, name: str = DEFAULT_CLIENT) -> CurveKeys:
        """A client's keys out of a directory ``mqstore keys`` wrote (or one laid out like it)."""
        keys_dir = Path(keys_dir)
        public, secret = read_keypair(keys_dir / f"{name}{SECRET_SUFFIX}")
        return cls(read_public(keys_dir / f"{SERVER_NAME}{PUBLIC_SUFFIX}"), public, secret)

    def as_server(self, sock: zmq.Socket[Any], domain: str = ZAP_DOMAIN) -> None:
        sock.setsockopt(zmq.ZAP_DOMAIN, domain.encode())
        sock.setsockopt(zmq.CURVE_SERVER, 1)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.public)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.secret)

    def as_client(self, sock: zmq.Socket[Any]) -> None:
        sock.setsockopt(zmq.CURVE_SERVERKEY, self.server_public)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.public)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.secret)


def is_tcp(endpoint: str) -> bool:
    return endpoint.startswith("tcp://")


class CurveSocket(zmq.Socket[bytes]):
    """A socket whose ``tcp://`` binds are CURVE servers and ``tcp://`` connects CURVE clients, with
    the keys of the ``CurveContext`` that made it (none: plain, as any socket); a bind to one of its
    ``own_only`` addresses is in ``OWN_ZAP_DOMAIN``."""

    def _keys(self) -> CurveKeys | None:
        keys: CurveKeys | None = getattr(self.context, "curve", None)
        return keys

    def bind(self, addr: str) -> Any:
        keys = self._keys()
        if keys is not None and is_tcp(addr):
            own_only: frozenset[str] = getattr(self.context, "own_only", frozenset())
            keys.as_server(self, OWN_ZAP_DOMAIN if addr in own_only else ZAP_DOMAIN)
        return super().bind(addr)

    def connect(self, addr: str) -> Any:
        keys = self._keys()
        if keys is not None and is_tcp(addr):
            keys.as_client(self)
        return super().connect(addr)


class CurveContext(zmq.Context[CurveSocket]):
    """A process's one context, holding its CURVE keys for every TCP socket it makes, and the
    addresses whose binds admit the broker's own key alone (``own_only``)."""

    _socket_class = CurveSocket
    curve: CurveKeys | None
    own_only: frozenset[str]

    def __init__(self, curve: CurveKeys | None = None, own_only: Iterable[str] = ()) -> None:
        super().__init__()
        self.curve = curve
        self.own_only = frozenset(own_only)


# -- key files -------------------------------------------------------------------------------------


def generate_keys(out_dir: Path | str, clients: Iterable[str] = (DEFAULT_CLIENT,)) -> list[Path]:
    """A server keypair (kept when one exists: clients already trust it) and one keypair per client;
    returns the files written."""
    out = Path(out_dir)
    make_dirs(out / CLIENTS_DIR, mode=0o700)  # each directory made durable, before the key files in it
    os.chmod(out, 0o700)
    written: list[Path] = []
    server_secret = out / f"{SERVER_NAME}{SECRET_SUFFIX}"
    if not server_secret.exists():
        # the secret file last: once it exists the pair is kept, so its public half must be there
        public, secret = zmq.curve_keypair()
        written += [_write(out / f"{SERVER_NAME}{PUBLIC_SUFFIX}", SERVER_NAME, "public key", public),
                    _write(server_secret, SERVER_NAME, "keypair", public, secret)]
    for name in clients:
        if not name or not name.replace("-", "").replace("_", "").isalnum() or name == SERVER_NAME:
            raise CurveError(f"client name {name!r}: letters, digits, '-' and '_' only, and not {SERVER_NAME!r}")
        public, secret = zmq.curve_keypair()
        written += [_write(out / f"{name}{SECRET_SUFFIX}", name, "keypair", public, secret),
                    _write(out / CLIENTS_DIR / f"{name}{PUBLIC_SUFFIX}", name, "public key", public)]
    return written


def _write(path: Path, name: str, kind: str, public: bytes, secret: bytes | None = None) -> Path:
    text = _BANNER.format(kind=kind, name=name) + f'curve\n    public-key = "{public.decode()}"\n'
    if secret is not None:
        text += f'    secret-key = "{secret.decode()}"\n'
    write_atomic(path, text.encode(), mode=KEY_FILE_MODE, keep_backup=False)
    return path


def _load(path: Path | str) -> tuple[bytes, bytes | None]:
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise CurveError(f"cannot read CURVE key file {path}: {exc}") from None
    for key in (public, secret):
        if key is not None and len(key) != Z85_KEY_CHARS:
            raise CurveError(f"{path}: a CURVE key is {Z85_KEY_CHARS} Z85 characters, not {len(key)}")
    return public, secret


def read_public(path: Path | str) -> bytes:
    return _load(path)[0]


def read_keypair(path: Path | str) -> tuple[bytes, bytes]:
    """(public, secret) from a secret key file, which must be private to its owner."""
    public, secret = _load(path)
    if secret is None:
        raise CurveError(f"{path} holds no secret key")
    mode = os.stat(path).st_mode
    if stat.S_IMODE(mode) & 0o077:
        raise CurveError(f"{path} is readable by others (mode {stat.S_IMODE(mode):o}): chmod 600 it")
    return public, secret


def read_authorized(clients_dir: Path | str) -> frozenset[bytes]:
    """Every public key (``*.key``) in ``clients_dir``."""
    directory = Path(clients_dir)
    if not directory.is_dir():
        raise CurveError(f"no CURVE client key directory at {directory}")
    return frozenset(read_public(p) for p in sorted(directory.glob(f"*{PUBLIC_SUFFIX}")))


# -- who may connect -------------------------------------------------------------------------------


class _AllowedKeys:
    """The authenticator's question, answered from a fixed set."""

    def __init__(self, keys: frozenset[bytes]) -> None:
        self.keys = keys

    def callback(self, domain: str, z85_key: bytes) -> bool:
        return z85_key in self.keys


def start_authenticator(ctx: zmq.Context[Any], allowed: frozenset[bytes],
                        own: bytes | None = None) -> ThreadAuthenticator:
    """A ZAP handler on ``ctx`` that lets in the CURVE clients holding one of ``allowed``, and on the
    internal streams (``OWN_ZAP_DOMAIN``) the key ``own`` alone (None: nobody, as for any domain not
    configured here); stop it before the context is destroyed."""
    auth = ThreadAuthenticator(ctx)
    auth.start()
    auth.configure_curve_callback(ZAP_DOMAIN, credentials_provider=_AllowedKeys(allowed))
    if own is not None:
        auth.configure_curve_callback(OWN_ZAP_DOMAIN, credentials_provider=_AllowedKeys(frozenset({own})))
    return auth
