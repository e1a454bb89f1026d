"""The offline commands on a store directory: ``inspect`` (what is in it, read without opening it),
``query`` (records by key, message id, unique key or queue offset; a running broker's readers are
asked when one holds the store) and ``verify`` (derived files checked against the commitlog).
Errors a user can fix are ``CommandError``s: the command prints them and exits 2."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mqstore.engine import Geometry, GetStatus, MessageStore, Record, StoreLockedError
from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file import MappedFileError, file_name
from mqstore.engine.log.record import DecodeKind
from mqstore.engine.meta.checkpoint import Checkpoint
from mqstore.engine.meta.metafile import abort_exists
from mqstore.engine.read.store_files import IndexHeader, QueueEntries, index_paths, queue_ids, read_geometry, scan_all
from mqstore.engine.repair.verify import VerifyReport, verify_store
from mqstore.scripts.cli.arguments import add_store, non_negative, positive
from mqstore.scripts.cli.broker import broker_running
from mqstore.scripts.cli.clients import query_broker
from mqstore.scripts.cli.output import Row, local_time, print_records, print_table, record_json

PULL_BATCH = 32  # a pull reads ahead max_count entries: ask for what one pull can return


class CommandError(MqstoreError):
    """A problem the user can fix (missing store, store in use, bad id): message, exit 2."""


def add_offline_commands(commands: Any) -> None:
    inspect = commands.add_parser("inspect", help="summarise a store's files and print its first records")
    add_store(inspect, positional=True)
    inspect.add_argument("--json", action="store_true", help="one JSON object per line")
    inspect.add_argument("--records", type=non_negative, default=20, metavar="N", help="records to print (20)")
    inspect.set_defaults(handler=_inspect)

    query_help = "find records: asks the running broker's readers when one runs on the store, else reads its files"
    query = commands.add_parser("query", help=query_help, description=query_help)
    add_store(query, positional=True)
    how = query.add_mutually_exclusive_group(required=True)
    how.add_argument("--key", help="a KEYS token (needs --topic)")
    how.add_argument("--msg-id", help="an offset message id")
    how.add_argument("--uniq-key", help="a UNIQ_KEY (client message id); every topic without --topic")
    how.add_argument("--queue", type=non_negative, metavar="Q", help="a queue id (needs --topic)")
    query.add_argument("--topic", help="the topic to look in")
    query.add_argument("--offset", type=non_negative, default=0, metavar="N", help="queue offset (0)")
    query.add_argument("--count", type=positive, default=1, metavar="C", help="records from --offset (1)")
    query.add_argument("--tags", metavar="EXPR", help="tag filter for --queue, e.g. 'TagA || TagB'")
    query.add_argument("--json", action="store_true", help="one JSON object per line")
    query.set_defaults(handler=_query, parser=query)

    verify = commands.add_parser("verify", help="check consume queues and index files against the commitlog",
                                 description="Reads the store without locking it: run it on a stopped store.")
    add_store(verify, positional=True)
    verify.add_argument("--repair", action="store_true",
                        help="open the store (recovering it) and rebuild its consume queues and index first")
    verify.add_argument("--json", action="store_true", help="one JSON object per line")
    verify.set_defaults(handler=_verify)


def existing_store(path: Path) -> Path:
    """``path`` when it holds a store; opening anything else would create one there."""
    if not path.is_dir():
        raise CommandError(f"no store directory at {path}")
    if not (path / "commitlog").is_dir():
        raise CommandError(f"{path} is not a store: it has no commitlog directory")
    return path


# -- inspect ---------------------------------------------------------------------------------------


def _inspect(args: argparse.Namespace) -> int:
    store_dir = existing_store(args.store)
    geometry = read_geometry(store_dir)
    files: dict[int, list[int]] = {}  # file base -> [end of data in the file, records]
    bad: list[dict[str, Any]] = []
    records: list[Record] = []
    total = 0
    commitlog = CommitLog.open(store_dir / "commitlog", geometry.commitlog_file_size, writable=False)
    try:
        for mf in commitlog.queue.files:
            files[mf.file_base] = [mf.file_base, 0]
        for phys, decoded in scan_all(commitlog, require_prop_crc=geometry.prop_crc):
            info = files[phys - phys % geometry.commitlog_file_size]
            if decoded.kind is DecodeKind.RECORD:
                total += 1
                info[0], info[1] = phys + decoded.size, info[1] + 1
                if len(records) < args.records:
                    record = commitlog.read_record(phys, check_crc=False).record
                    records.extend([record] if record is not None else [])
            elif decoded.kind is DecodeKind.BLANK:
                info[0] = commitlog.queue.roll_next(phys)
            else:
                bad.append({"phys_offset": phys, "problem": decoded.reason or decoded.kind.value})
        min_phys, max_phys = commitlog.min_offset, max((end for end, _ in files.values()), default=0)
    finally:
        commitlog.close()

    out: list[dict[str, Any]] = [{
        "type": "store", "path": str(store_dir), "geometry": asdict(geometry), "abort": abort_exists(store_dir),
        "records": total, "min_phys_offset": min_phys, "max_phys_offset": max_phys, "bad_records": bad}]
    if (store_dir / "checkpoint").is_file():
        with Checkpoint.open(store_dir / "checkpoint", read_only=True) as cp:
            out.append({"type": "checkpoint", "physic_msg_ms": cp.physic_msg_ms, "logics_msg_ms": cp.logics_msg_ms,
                        "index_msg_ms": cp.index_msg_ms, "master_flushed_offset": cp.master_flushed_offset,
                        "confirm_phys_offset": cp.confirm_phys_offset})
    out.extend({"type": "commitlog", "file": file_name(base), "min_phys_offset": base, "max_phys_offset": end,
                "records": count} for base, (end, count) in files.items())
    out.extend(_queue_info(store_dir, topic, queue_id, geometry.cq_entries_per_file)
               for topic, queue_id in queue_ids(store_dir))
    out.extend(_index_info(path, geometry) for path in index_paths(store_dir))
    out.extend(record_json(r) for r in records)
    if args.json:
        for obj in out:
            print(json.dumps(obj))
    else:
        _print_inspect(out)
    return 0


def _queue_info(store_dir: Path, topic: str, queue_id: int, entries_per_file: int) -> dict[str, Any]:
    info: dict[str, Any] = {"type": "queue", "topic": topic, "queue_id": queue_id}
    try:
        q = QueueEntries.open(store_dir, topic, queue_id, entries_per_file)
    except MappedFileError as exc:
        return info | {"error": str(exc)}
    return info | {"min_queue_offset": q.min_queue_offset, "max_queue_offset": q.end_queue_offset,
                   "files": len(q.files)}


def _index_info(path: Path, geometry: Geometry) -> dict[str, Any]:
    try:
        header = IndexHeader.read(path, geometry)
    except ValueError as exc:
        return {"type": "index", "file": path.name, "error": str(exc)}
    return {"type": "index", "file": path.name} | {k: v for k, v in asdict(header).items() if k != "path"}


def _print_inspect(out: list[dict[str, Any]]) -> None:
    store = out[0]
    rows: list[Row] = [("path", store["path"]), ("records", store["records"]),
                       ("commitlog", f"{store['min_phys_offset']} .. {store['max_phys_offset']}"),
                       ("abort marker", "present (last stop was not clean)" if store["abort"] else "absent")]
    rows += [(name, value) for name, value in store["geometry"].items()]
    rows += [(f"checkpoint {k}", v) for obj in out if obj["type"] == "checkpoint" for k, v in obj.items()
             if k != "type"]
    rows += [("bad record", f"{b['phys_offset']}: {b['problem']}") for b in store["bad_records"]]
    print_table("store", ("field", "value"), rows)
    print_table("commitlog files", ("file", "min phys offset", "max phys offset", "records"),
                [(o["file"], o["min_phys_offset"], o["max_phys_offset"], o["records"])
                 for o in out if o["type"] == "commitlog"])
    print_table("consume queues", ("topic", "queue", "min offset", "max offset", "files"),
                [(o["topic"], o["queue_id"], o.get("min_queue_offset", o.get("error")), o.get("max_queue_offset"),
                  o.get("files")) for o in out if o["type"] == "queue"])
    print_table("index files", ("file", "begin", "end", "begin phys", "end phys", "slots used", "index count"),
                [(o["file"], local_time(o.get("begin_ms")), local_time(o.get("end_ms")), o.get("begin_phys_offset"),
                  o.get("end_phys_offset"), o.get("slot_used_count"), o.get("index_count", o.get("error")))
                 for o in out if o["type"] == "index"])
    print_records([o for o in out if o["type"] == "record"])


# -- query -----------------------------------------------------------------------------------------


def _query(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.parser
    if (args.key is not None or args.queue is not None) and not args.topic:
        parser.error("--key and --queue need --topic")
    if args.tags is not None and args.queue is None:
        parser.error("--tags goes with --queue")
    try:
        with opened(existing_store(args.store)) as store:
            found = [record_json(r) for r in _find(store, args)]
    except CommandError:
        if not broker_running(args.store):
            raise
        found = query_broker(args)  # a running broker holds the store: ask its readers
    if args.json:
        for record in found:
            print(json.dumps(record))
    else:
        print_records(found)
    records = found
    if not records:
        print("no matching records", file=sys.stderr)
    return 0 if records else 1


@contextmanager
def opened(store_dir: Path) -> Iterator[MessageStore]:
    try:
        store = MessageStore.open(store_dir)
    except StoreLockedError as exc:
        raise CommandError(f"{exc}; stop it, or use 'mqstore inspect', which reads without opening") from None
    with store:
        yield store


def _find(store: MessageStore, args: argparse.Namespace) -> list[Record]:
    if args.key is not None:
        return store.query_by_key(args.topic, args.key)
    if args.msg_id is not None:
        record = store.view_by_id(args.msg_id)
        return [record] if record is not None else []
    if args.uniq_key is not None:
        topics = [args.topic] if args.topic else sorted(store.topics())
        return [r for topic in topics for r in store.query_by_uniq_key(topic, args.uniq_key)]
    return pull(store, args.topic, args.queue, args.offset, args.count, args.tags)


def pull(store: MessageStore, topic: str, queue_id: int, queue_offset: int, count: int,
         tags: str | None) -> list[Record]:
    """Up to ``count`` records matching ``tags`` from ``queue_offset`` on, pull after pull."""
    records: list[Record] = []
    while len(records) < count:
        got = store.get(topic, queue_id, queue_offset, max_count=min(count - len(records), PULL_BATCH), tags=tags)
        records.extend(got.messages)
        if got.status not in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE) or \
                got.next_queue_offset <= queue_offset:
            break
        queue_offset = got.next_queue_offset
    return records


# -- verify ----------------------------------------------------------------------------------------


def _verify(args: argparse.Namespace) -> int:
    report = verify_store(existing_store(args.store), repair=args.repair)
    if args.json:
        for finding in report.findings:
            print(json.dumps({"type": "finding"} | asdict(finding)))
        print(json.dumps({"type": "verify", "ok": report.ok, "findings": len(report.findings),
                          "records": report.records, "cq_entries": report.cq_entries,
                          "index_entries": report.index_entries, "repaired": report.repaired}))
    else:
        if report.findings:
            print_table("findings", ("kind", "location", "detail"),
                        [(f.kind, f.location, f.detail) for f in report.findings])
        print(verdict(report))
    return 0 if report.ok else 1


def verdict(report: VerifyReport) -> str:
    checked = (f"{report.records} records, {report.cq_entries} consume-queue entries, "
               f"{report.index_entries} index entries checked")
    done = " after repair" if report.repaired else ""
    return f"{checked}{done}: " + ("ok" if report.ok else f"{len(report.findings)} findings")
