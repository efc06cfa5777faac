"""What the marts read: each SQL file's `-- reads:` line against the relations its SQL names (as
DuckDB's parser sees them)."""

import json
import re

import duckdb

from transforms.contract import ALL_TABLES
from warehouse.catalog.marts import mart_sql, reads

TABLES = {t.name for t in ALL_TABLES}


def referenced(sql: str) -> set[str]:
    """The tables, views and table macros a file's query names, and the tables it hands a macro
    by name (`_in_tree('usage')`); its own CTEs left out."""
    body = re.split(r"^CREATE OR REPLACE (?:VIEW \w+ AS|MACRO \w+\(\w*\) AS TABLE)\s", sql, maxsplit=1,
                    flags=re.MULTILINE)[1]
    tree = json.loads(duckdb.sql("SELECT json_serialize_sql($1)", params=[body]).fetchone()[0])
    assert not tree["error"], tree
    names, ctes = set(), set()

    def walk(node):
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            ctes.update(entry["key"] for entry in (node.get("cte_map") or {}).get("map", []))
            if node.get("type") == "BASE_TABLE":
                names.add(node["table_name"])
            elif node.get("type") == "TABLE_FUNCTION":
                function = node["function"]
                names.add(function["function_name"])
                names.update(arg["value"]["value"] for arg in function["children"]
                             if arg.get("class") == "CONSTANT" and arg["value"]["type"]["id"] == "VARCHAR")
            for value in node.values():
                walk(value)

    walk(tree["statements"])
    return names - ctes - {"query_table"}  # a macro's parameter table: its callers name it


def test_every_file_declares_what_its_sql_reads():
    for name, sql in mart_sql():
        declared = reads(sql)
        assert declared and len(set(declared)) == len(declared), name
        assert set(declared) == referenced(sql), name


def test_a_file_reads_only_tables_and_what_is_defined_before_it():
    defined = set()
    for name, sql in mart_sql():
        assert set(reads(sql)) <= TABLES | defined, name
        defined.add(name)


def test_the_parser_sees_ctes_macros_and_the_tables_handed_to_them():
    sql = ("-- reads: x\nCREATE OR REPLACE VIEW v AS\nWITH usage AS (SELECT * FROM messages)\n"
           "SELECT * FROM usage JOIN _in_tree('sessions') AS s USING (a) WHERE b IN (SELECT b FROM c)")
    assert referenced(sql) == {"messages", "_in_tree", "sessions", "c"}
