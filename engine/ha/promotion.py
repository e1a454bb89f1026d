"""Promotion: a slave's store made a master's, in the order a crash at any instant survives.

A slave's log is its master's, byte for byte, up to where the last transfer stopped, maybe in the
middle of a record. Promoting it:

1. cuts the log at the end of its last whole record (``recover_replica``: the torn tail zeroed and
   synced, so no half record can later pass for one);
2. opens a new epoch there in the epoch file (``mqstore.engine.ha.epochs``): one above the last this
   store knows, starting at that end; from here on the log is this store's own;
3. records the promotion in ``{store}/config/role.json`` (``StoredRole``), so a later start with
   the slave's old settings is refused instead of following a master that is gone, or was this
   store's past (``check_start_role``).

Each step is durable before the next. A crash before step 3 leaves a store that still starts as a
slave, with an epoch it never used (harmless: epochs only need to rise). Queue offsets need no step:
the writer of the new master continues every queue from the records it finds, the ones the slave's
builders already indexed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from mqstore.engine.config import Geometry
from mqstore.engine.errors import MqstoreError
from mqstore.engine.ha.epochs import EpochFile
from mqstore.engine.ha.replica import recover_replica
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.meta.metafile import MetafileError, make_dirs, read_with_backup, write_atomic

ROLE_FILE = Path("config") / "role.json"


class RoleFileError(MqstoreError, ValueError):
    """The role file is unreadable, or says this store may not start in the role asked for."""


@dataclass(frozen=True, slots=True)
class StoredRole:
    """What the last promotion made of this store."""

    role: str          # the master role it was promoted to (ASYNC_MASTER or SYNC_MASTER)
    epoch: int         # the epoch it opened
    start: int         # where that epoch starts in the log: the end of the slave's last whole record
    promoted_ms: int


def role_path(store_dir: Path | str) -> Path:
    return Path(store_dir) / ROLE_FILE


def read_role(store_dir: Path | str) -> StoredRole | None:
    """The store's promotion, or None for a store never promoted."""
    path = role_path(store_dir)

    def parse(data: bytes) -> StoredRole:
        raw = json.loads(data)
        return StoredRole(str(raw["role"]), int(raw["epoch"]), int(raw["start"]), int(raw["promoted_ms"]))

    try:
        return read_with_backup(path, parse)
    except MetafileError as exc:
        raise RoleFileError(f"{path} is unreadable: {exc}") from None


def promote_store(store_dir: Path | str, geometry: Geometry, role: str, now_ms: int) -> StoredRole:
    """Make a stopped slave's store a master's (the module's three steps). The caller holds the store."""
    store_dir = Path(store_dir)
    commitlog = CommitLog.open(store_dir / "commitlog", geometry.commitlog_file_size)
    try:
        end = recover_replica(commitlog, require_prop_crc=geometry.prop_crc)
        end = max(end, commitlog.min_offset)
    finally:
        commitlog.close()
    epochs = EpochFile.load(store_dir)
    stored = StoredRole(role, epochs.last_epoch + 1, end, now_ms)
    epochs.append(stored.epoch, end)
    make_dirs(role_path(store_dir).parent)
    write_atomic(role_path(store_dir), json.dumps(asdict(stored)).encode())
    return stored


def check_start_role(store_dir: Path | str, starts_as_slave: bool) -> StoredRole | None:
    """A promoted store starts as a master: RoleFileError for a start as a slave (settings from
    before the promotion would make it follow a master that is gone, or cut what it took since)."""
    stored = read_role(store_dir)
    if stored is not None and starts_as_slave:
        raise RoleFileError(
            f"this store was promoted to {stored.role} (epoch {stored.epoch}, from commitlog offset "
            f"{stored.start}): start it as a master; to make it a slave again, remove {role_path(store_dir)} "
            "first (its log is then cut to what its new master holds)")
    return stored
