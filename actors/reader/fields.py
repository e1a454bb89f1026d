"""``SYSTEM_ERROR``, the status a reader answers a fault with. A request's fields are read once,
where it comes in (``mqstore.ipc.wire.requests``): a bad one is a ``schema.SchemaError``, which the
reader's error boundary answers BAD_REQUEST."""

from __future__ import annotations

__all__ = ["SYSTEM_ERROR"]

SYSTEM_ERROR = "SYSTEM_ERROR"
