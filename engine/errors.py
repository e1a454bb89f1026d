"""The one base of every exception the project raises.

``except MqstoreError`` catches whatever mqstore itself raised, from any layer. Each class keeps the
standard base its callers already catch beside this one (``class GeometryError(MqstoreError,
ValueError)``), so ``except ValueError`` goes on working. A leaf: it imports nothing, so every room of
every layer can import it.
"""

from __future__ import annotations


class MqstoreError(Exception):
    """Raised by mqstore (a subclass says what went wrong); never raised bare."""
