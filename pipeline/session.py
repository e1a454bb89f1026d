"""A Spark session set up for this project: quiet, small on 2 cores, UTC, workers on this interpreter,
and the ``mqstore`` data source registered. ``local[*]`` by default; any cluster with ``master``."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

LOG4J_PROPERTIES = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def spark_session(master: str = "local[*]", app_name: str = "mqstore", **conf: str) -> Any:
    """Build (or get) the session. Environment first: workers must run this interpreter (it has
    pyarrow and this project installed), and Spark must bind to loopback."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    log4j = Path(tempfile.gettempdir()) / "mqstore-log4j2.properties"
    if not log4j.exists():
        log4j.write_text(LOG4J_PROPERTIES)
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j} -Duser.timezone=UTC -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.driver.memory", "1g")
               .config("spark.driver.extraJavaOptions", java_opts)
               .config("spark.executor.extraJavaOptions", java_opts)
               .config("spark.sql.python.filterPushdown.enabled", "true"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from mqstore.pipeline.datasource import MqstoreDataSource
    spark.dataSource.register(MqstoreDataSource)
    return spark
