"""Where the fields of many commitlog records lie in a mapped file: the engine's ``RecordColumns``,
under the name the pipeline's scan and columns know it by."""

from __future__ import annotations

from mqstore.engine.batch.record_columns import BORN_HOST_POS, RecordColumns

RecordLayout = RecordColumns

__all__ = ["BORN_HOST_POS", "RecordLayout"]
