"""Spark, in local mode, reads the hive export the central deployment publishes, through the
deploy recipe's own code (deploy/spark/read_lake.py), and gets DuckDB's answers.

Spark has no DuckLake reader, so it reads `<lake>/export/` (warehouse/serve/hive_export.py). Only the local
filesystem is tested: the S3A connector (hadoop-aws) is a Maven download, not a PyPI package,
so reading from S3 is covered by the recipe's settings test in tests/test_central.py instead.
"""

import importlib.util
import os
import shutil
import signal
from datetime import date
from pathlib import Path

import pytest

from tests.conftest import query
from transforms.contract import ALL_TABLES
from warehouse.serve.hive_export import export_tables

pytest.importorskip("pyspark")
if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
    if os.environ.get("CI"):  # .ci/run installs a JRE: its absence there is a failure, not a skip
        pytest.fail("no Java runtime for pyspark (apt-get install default-jre-headless)", pytrace=False)
    pytest.skip("no Java runtime on this machine: apt-get install default-jre-headless", allow_module_level=True)

RECIPE = Path(__file__).parent.parent / "deploy" / "spark" / "read_lake.py"


def _recipe():
    spec = importlib.util.spec_from_file_location("read_lake", RECIPE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    recipe = _recipe()
    builder = (SparkSession.builder.master("local[1]").appName("agentlake-test")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
               # a short-lived JVM on tiny data: the quick JIT tier only, and no whole-stage code
               # generation (Java compiled for each query); the same answers, sooner
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .config("spark.sql.codegen.wholeStage", "false"))
    for key, value in recipe.spark_conf("/unused", env={}).items():
        builder = builder.config(key, value)
    handler = signal.getsignal(signal.SIGINT)
    session = builder.getOrCreate()  # PySpark puts its own Ctrl-C handler in: the process's, not ours
    yield session
    session.stop()
    signal.signal(signal.SIGINT, handler)  # the tests after these in this worker get Python's back


def test_spark_reads_the_export_and_agrees_with_duckdb(spark, lake):
    layout = lake
    export_tables(layout.warehouse, layout.lake)
    recipe = _recipe()
    tables = recipe.register_tables(spark, str(layout.lake))
    # every table, those without a row too (their one file of none: an analyst's trial found none)
    assert set(tables) == {t.name for t in ALL_TABLES}
    assert [t for t in tables if not query(layout, f"SELECT COUNT(*) FROM {t}")[0][0]]

    # the recipe's example query, as Spark and as DuckDB answer it
    got = [tuple(r) for r in spark.sql(recipe.EXAMPLE).collect()]
    want = query(layout, recipe.EXAMPLE)
    assert [(d, p, prov, float(usd), n) for d, p, prov, usd, n in got] == \
        [(d, p, prov, float(usd), n) for d, p, prov, usd, n in want]
    assert all(isinstance(r[0], date) for r in got)  # `date` is a DATE, not a string

    # every table: the same rows per (date, project), keys read from the directory names
    for table in tables:
        sql = f"SELECT CAST(date AS STRING), project, COUNT(*) FROM {table} GROUP BY 1, 2 ORDER BY 1, 2"
        spark_rows = [tuple(r) for r in spark.sql(sql).collect()]
        duck_rows = query(layout, sql.replace("STRING", "VARCHAR"))
        assert spark_rows == [tuple(r) for r in duck_rows], table

    # the fixture's own totals (tests/conftest.py `lake`): failed tool calls and the root costs
    errors = spark.sql("SELECT COUNT(*) FROM tool_calls WHERE is_error").collect()[0][0]
    assert errors == query(layout, "SELECT COUNT(*) FROM tool_calls WHERE is_error")[0][0] > 0
    roots = spark.sql("SELECT ROUND(SUM(cost_usd), 9) FROM sessions WHERE is_root").collect()[0][0]
    assert float(roots) == float(query(layout, "SELECT ROUND(SUM(cost_usd), 9) FROM sessions WHERE is_root")[0][0])
