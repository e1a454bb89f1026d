"""The PySpark pipeline: the ``mqstore`` data source for store directories (batch reads with
pushdown, streaming, a sink to a running broker) and the jobs built on it (export, verify, rebuild,
stats)."""
