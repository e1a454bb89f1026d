"""The Spark jobs on a store directory, from the command line.

    spark-submit pipeline/jobs.py JOB STORE [options]     (the master is spark-submit's)
    python -m mqstore.pipeline.jobs JOB STORE [options] [--master URL]
    mqstore spark JOB STORE [options] [--master URL]

    export STORE --to OUT [--format parquet|json] [--topics T ...] [--mode error|overwrite|append]
    verify STORE [--json] [--report FILE] [--split-bytes N]
    rebuild STORE [--json] [--split-bytes N]
    stats STORE [--out DIR] [--topics T ...] [--rows N]

``--master`` defaults to ``local[*]``. Exit status: 0 done; 1 verify found something; 2 bad
arguments, no store, a store in use (rebuild), a damaged commitlog (rebuild), no pyspark or Java.

Only the standard library is imported here at load time, so that ``mqstore`` can list these
commands, and say what to install, on a machine without pyspark.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mqstore.pipeline.commitlog_ranges import DEFAULT_SPLIT_BYTES
from mqstore.pipeline.export_job import FORMATS, MODES

DEFAULT_MASTER = "local[*]"
DEFAULT_STATS_DIR = Path("mqstore-stats")
INSTALL_HINT = "pip install -e '.[spark]'"

Handler = Callable[[Any, argparse.Namespace], int]


def main(argv: Sequence[str] | None = None) -> int:
    return run_job(build_parser().parse_args(argv))


def build_parser(prog: str = "jobs.py") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Spark jobs on a mqstore store directory.")
    add_job_parsers(parser.add_subparsers(dest="job", required=True, metavar="JOB"))
    return parser


def add_job_parsers(jobs: Any) -> None:
    """The four jobs as subcommands of ``jobs`` (an argparse subparsers object)."""
    export = _job(jobs, "export", _export, "write the store's table as Parquet or JSON, by topic and date")
    export.add_argument("--to", dest="out", type=Path, required=True, metavar="OUT", help="output directory")
    export.add_argument("--format", choices=FORMATS, default="parquet", help="output format")
    export.add_argument("--topics", nargs="+", metavar="TOPIC", help="only these topics (read only theirs)")
    export.add_argument("--mode", choices=MODES, default="error", help="when OUT exists (error)")

    verify = _job(jobs, "verify", _verify, "check consume queues and index files against the commitlog")
    verify.add_argument("--json", action="store_true", help="one JSON object per line")
    verify.add_argument("--report", type=Path, metavar="FILE", help="also write the findings there as JSON lines")
    _split_option(verify)

    rebuild = _job(jobs, "rebuild", _rebuild, "rebuild consume queues and index files of a stopped store")
    rebuild.add_argument("--json", action="store_true", help="the result as one JSON object")
    _split_option(rebuild)

    stats = _job(jobs, "stats", _stats, "messages, bytes, keys and tags per topic and minute, with a plot")
    stats.add_argument("--out", type=Path, default=DEFAULT_STATS_DIR, metavar="DIR",
                       help=f"where stats.csv, stats.json and stats.png go (./{DEFAULT_STATS_DIR})")
    stats.add_argument("--topics", nargs="+", metavar="TOPIC", help="only these topics")
    stats.add_argument("--rows", type=int, default=50, metavar="N", help="table rows to print, the latest (50)")


def _job(jobs: Any, name: str, handler: Handler, helptext: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = jobs.add_parser(name, help=helptext, description=helptext)
    parser.add_argument("store", type=Path, metavar="STORE")
    parser.add_argument("--master", help=f"Spark master URL ({DEFAULT_MASTER}, or spark-submit's)")
    parser.set_defaults(job_handler=handler)
    return parser


def _split_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--split-bytes", type=int, default=DEFAULT_SPLIT_BYTES, metavar="N",
                        help=f"commitlog bytes per task ({DEFAULT_SPLIT_BYTES})")


def run_job(args: argparse.Namespace) -> int:
    """Start (or join) a session, run the job, stop the session if this call started it. The one
    error boundary: faults a user can act on become a message and exit status 2."""
    name = f"mqstore spark {args.job}"
    missing = missing_runtime(args.job)
    if missing:
        print(f"{name}: {missing}", file=sys.stderr)
        return 2
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    from mqstore.engine.meta.metafile import MetafileError
    from mqstore.pipeline.session import spark_session

    # In a process that has a session already (a notebook, the tests), the job joins it as it is.
    spark = SparkSession.getActiveSession()
    started = spark is None
    if spark is None:
        spark = spark_session(_master(args.master), f"mqstore-{args.job}")
    else:
        from mqstore.pipeline.datasource import MqstoreDataSource
        spark.dataSource.register(MqstoreDataSource)
    try:
        handler: Handler = args.job_handler
        return handler(spark, args)
    except (OSError, ValueError, RuntimeError, MetafileError, PySparkException) as exc:
        print(f"{name}: {exc}{_hint(exc, args)}", file=sys.stderr)
        return 2
    finally:
        if started:
            spark.stop()


def missing_runtime(job: str) -> str:
    """Why this machine cannot run ``job`` ("" when it can)."""
    needed = ["pyspark", "pyarrow"] + (["matplotlib"] if job == "stats" else [])
    absent = [module for module in needed if importlib.util.find_spec(module) is None]
    if absent:
        return f"{', '.join(absent)} not installed: {INSTALL_HINT}"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Spark needs a Java runtime (17 or newer) on PATH or in JAVA_HOME"
    return ""


def _master(requested: str | None) -> str:
    if requested:
        return requested
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # spark-submit started the JVM, with its own --master
        from pyspark import SparkConf
        return str(SparkConf().get("spark.master", DEFAULT_MASTER))
    return DEFAULT_MASTER


def _hint(exc: BaseException, args: argparse.Namespace) -> str:
    from mqstore.engine.meta.store_lock import StoreLockedError
    from mqstore.pipeline.rebuild_job import DamagedCommitLogError

    if isinstance(exc, StoreLockedError):
        return f" (stop the broker first: mqstore stop --store {args.store})"
    if args.job == "rebuild" and not isinstance(exc, DamagedCommitLogError) and (Path(args.store) / "abort").exists():
        return " (the rebuild stopped part way: run it again)"
    return ""


# -- the jobs --------------------------------------------------------------------------------------


def _export(spark: Any, args: argparse.Namespace) -> int:
    from mqstore.pipeline.export_job import export

    result = export(spark, args.store, args.out, fmt=args.format, topics=args.topics, mode=args.mode)
    print(f"exported {args.store} to {result.out} as {result.fmt}: {len(result.partitions)} topic/date partitions")
    return 0


def _verify(spark: Any, args: argparse.Namespace) -> int:
    from mqstore.pipeline.report import print_findings, verdict
    from mqstore.pipeline.verify_job import verify

    report = verify(spark, args.store, split_bytes=args.split_bytes)
    lines = [json.dumps({"type": "finding"} | asdict(f)) for f in report.findings]
    lines.append(json.dumps({"type": "verify", "ok": report.ok, "findings": len(report.findings),
                             "records": report.records, "cq_entries": report.cq_entries,
                             "index_entries": report.index_entries, "repaired": False}))
    if args.report is not None:
        args.report.write_text("\n".join(lines) + "\n")
    if args.json:
        print("\n".join(lines))
    else:
        print_findings(report.findings)
        print(verdict(report))
    return 0 if report.ok else 1


def _rebuild(spark: Any, args: argparse.Namespace) -> int:
    from mqstore.pipeline.rebuild_job import rebuild

    start = time.perf_counter()
    result = rebuild(spark, args.store, split_bytes=args.split_bytes)
    seconds = time.perf_counter() - start
    if args.json:
        print(json.dumps({"type": "rebuild", **asdict(result), "seconds": round(seconds, 3)}))
    else:
        print(f"rebuilt the consume queues and index of {args.store} from {result.records} records "
              f"(commitlog {result.min_phys_offset} .. {result.max_phys_offset}) in {seconds:.1f} s")
    return 0


def _stats(spark: Any, args: argparse.Namespace) -> int:
    from mqstore.pipeline.report import plot_messages, print_stats
    from mqstore.pipeline.stats_job import PNG_NAME, traffic_stats, write_tables

    rows = traffic_stats(spark, args.store, topics=args.topics)
    csv_path, json_path = write_tables(rows, args.out)
    png_path = plot_messages(rows, args.out / PNG_NAME, f"messages per minute: {args.store}")
    print_stats(rows, args.rows)
    print(f"wrote {csv_path}, {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
