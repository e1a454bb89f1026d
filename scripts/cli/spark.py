"""``mqstore spark export | verify | rebuild | stats``: the jobs of ``pipeline/jobs.py`` under the
``mqstore`` command. Listing them needs no pyspark; running one on a machine without it says what to
install."""

from __future__ import annotations

import argparse
from typing import Any

from pipeline.jobs import add_job_parsers, run_job


def add_spark_commands(commands: Any) -> None:
    spark = commands.add_parser("spark", help="Spark jobs on a store directory: export, verify, rebuild, stats",
                                description="Spark jobs on a store directory; --master picks the cluster "
                                            "(local[*] by default).")
    add_job_parsers(spark.add_subparsers(dest="job", required=True, metavar="JOB"))
    spark.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    return run_job(args)
