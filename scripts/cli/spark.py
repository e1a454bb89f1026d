"""``mqstore spark export | verify | rebuild | stats``: the jobs of ``pipeline/jobs.py`` under the
``mqstore`` command. Listing them needs no pyspark; running one on a machine without it says what to
install."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mqstore.pipeline.jobs import add_job_parsers, run_job
from mqstore.scripts.cli.arguments import DEFAULT_STORE


def add_spark_commands(commands: Any) -> None:
    spark = commands.add_parser("spark", help="Spark jobs on a store directory: export, verify, rebuild, stats",
                                description="Spark jobs on a store directory; --master picks the cluster "
                                            "(local[*] by default).")
    jobs = spark.add_subparsers(dest="job", required=True, metavar="JOB")
    add_job_parsers(jobs)
    for job in jobs.choices.values():
        _store_as_option(job)
    spark.set_defaults(handler=_run)


def _store_as_option(job: argparse.ArgumentParser) -> None:
    """The jobs name their store first (``STORE``); under ``mqstore`` it is ``--store`` as for every
    command, the leading STORE kept as the same thing."""
    for action in job._actions:
        if action.dest == "store" and not action.option_strings:
            action.dest, action.nargs, action.required, action.default = "store_path", "?", False, None
            action.help = "the same as --store"
    job.add_argument("--store", type=Path, default=DEFAULT_STORE, help="store directory")


def _run(args: argparse.Namespace) -> int:
    return run_job(args)
