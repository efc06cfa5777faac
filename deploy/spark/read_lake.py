"""Read the agentlake lake with Spark, from the hive export the central deployment publishes.

    spark-submit --packages org.apache.hadoop:hadoop-aws:3.3.4 deploy/spark/read_lake.py \
        s3://team-agentlake/lake [--sql "SELECT ..."]

hadoop-aws must match the Hadoop that Spark was built with (3.3.4 for Spark 3.5, 3.4.1 for
Spark 4.0). Credentials come from S3A's default chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
(and AWS_SESSION_TOKEN), else the instance's IAM role. An S3-compatible server is named as
agentlake names it, in the lake URI (`?endpoint_override=host:9000&scheme=http`) or with
AWS_ENDPOINT_URL.

The curated tables are DuckLake tables, which Spark has no reader for; the central deployment
exports them (warehouse/serve/hive_export.py) as versions,
`<lake>/export/<version>/<table>/date=YYYY-MM-DD/project=<slug>/*.parquet`, one file per
partition, and names the published one in `<lake>/export/CURRENT`. The job reads that name once
and every table from that one version: one snapshot of the catalog, whatever the center exports
meanwhile (a replaced version stays for the export's grace, an hour by default). Spark discovers
the two hive keys from the directory names.
"""

import argparse
import os
from urllib.parse import parse_qs

# transforms/contract.py's tables (a test keeps this list equal to it)
TABLES = ("sessions", "messages", "parts", "tool_calls", "file_versions", "read_files", "usage",
          "quarantine", "sources")

EXAMPLE = """
SELECT date, project, provider, ROUND(SUM(cost_usd), 2) AS usd, COUNT(*) AS sessions
FROM sessions WHERE is_root GROUP BY date, project, provider ORDER BY date, project, provider
"""


def export_root(lake: str) -> str:
    """The export under the lake URI (no query string), over s3a."""
    root = lake.split("?", 1)[0].rstrip("/")
    if root.startswith("s3://"):
        root = "s3a://" + root[len("s3://"):]
    return f"{root}/export"


def table_path(lake: str, table: str, version: str) -> str:
    """Where Spark reads a table: its folder in one version of the export."""
    return f"{export_root(lake)}/{version}/{table}"


def current_version(spark, lake: str) -> str:
    """The version the export's pointer names, read through Spark's own file system (S3A too)."""
    return spark.read.text(f"{export_root(lake)}/CURRENT").first()[0].strip()


def spark_conf(lake: str, env=os.environ) -> dict[str, str]:
    """The Spark settings that make the lake read the way DuckDB reads it."""
    conf = {
        # a project slug such as `2024` must stay a string; `date` is cast explicitly instead
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        # the files hold naive UTC timestamps: show them as written, whatever the host's zone
        "spark.sql.session.timeZone": "UTC",
    }
    query = {k: v[-1] for k, v in parse_qs(lake.split("?", 1)[1] if "?" in lake else "").items()}
    endpoint = query.get("endpoint_override") or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:  # MinIO and friends: path-style requests, plain HTTP when the URI says so
        scheme = "http" if endpoint.startswith("http://") or query.get("scheme") == "http" else "https"
        conf["spark.hadoop.fs.s3a.endpoint"] = endpoint.split("://", 1)[-1]
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(scheme == "https").lower()
    region = query.get("region") or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = region
    return conf


def register_tables(spark, lake: str, merge_schema: bool = False, version: str | None = None) -> list[str]:
    """A temporary view per table that has files, with `date` as a DATE like DuckDB's views, all
    from one version of the export (`version`, else the one published now)."""
    from pyspark.sql import functions as F
    from pyspark.sql.utils import AnalysisException

    version = version or current_version(spark, lake)
    registered = []
    for table in TABLES:
        path = table_path(lake, table, version)
        try:
            # mergeSchema only while old and new files of a contract change sit side by side
            frame = spark.read.option("basePath", path).option("mergeSchema", str(merge_schema).lower()).parquet(path)
        except AnalysisException:  # no file yet (`usage` in a Crush-only team)
            continue
        frame.withColumn("date", F.to_date("date")).createOrReplaceTempView(table)
        registered.append(table)
    return registered


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("lake", help="the lake: s3://bucket/prefix (or a directory every executor can read)")
    parser.add_argument("--sql", default=EXAMPLE, help="a query over the tables (default: cost per day and project)")
    parser.add_argument("--merge-schema", action="store_true", help="files of two contract versions side by side")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("agentlake")
    for key, value in spark_conf(args.lake).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    version = current_version(spark, args.lake)
    print(f"export {version}, tables:", ", ".join(register_tables(spark, args.lake, args.merge_schema, version)))
    spark.sql(args.sql).show(50, truncate=False)
    spark.stop()


if __name__ == "__main__":
    main()
