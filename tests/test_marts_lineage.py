"""What the marts read: each SQL file's `-- reads:` line against the relations its SQL names (as
DuckDB's parser sees them), and the asset graph Dagster draws from those lines."""

import json
import re

import dagster as dg
import duckdb

from transforms.contract import ALL_TABLES
from warehouse.catalog import model_names
from warehouse.catalog.marts import MARTS, depends_on, mart_sql, reads

TABLES = {t.name for t in ALL_TABLES}
NAMES = model_names.NAME  # the catalog's table of the names models group under, filled by the merge
# the marts' parents: the tables and marts each reads, its building blocks resolved
STEPS = {"messages", "sessions", "tool_calls", "usage"}  # _step_costs' tables (and _file_calls')
PARENTS = {
    "daily_costs": {"messages", "sessions", "usage", NAMES},
    "session_summary": {"messages", "sessions", "tool_calls"},
    "tool_usage": {"tool_calls"},
    "shell_commands": {"tool_calls"},
    "file_activity": {"file_versions", "tool_calls"},
    "model_usage": {"daily_costs", "messages", "sessions", "usage", NAMES},
    "token_usage": {"usage", NAMES},
    "insight_duplicate_reads": STEPS,
    "insight_unused_reads": STEPS,
    "insight_read_edit_ratio": STEPS | {NAMES},
    "insight_idle_cost": STEPS | {"file_versions", "session_summary", NAMES},
    "insight_retry_loops": STEPS,
    "insight_context_growth": STEPS,
    "insight_cache_efficiency": {"sessions", "usage", NAMES},
    "insight_subagent_share": {"session_summary", "sessions", "tool_calls"},
    "insight_usage_blocks": {"sessions", "usage"},
}


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
        assert declared or "\n-- reads: nothing\n" in f"\n{sql}", name  # said, never left out
        assert len(set(declared)) == len(declared), name
        assert set(declared) == referenced(sql), name


def test_a_file_reads_only_tables_and_what_is_defined_before_it():
    defined = set()
    for name, sql in mart_sql():
        assert set(reads(sql)) <= TABLES | {NAMES} | defined, name
        defined.add(name)


def test_the_parser_sees_ctes_macros_and_the_tables_handed_to_them():
    sql = ("-- reads: x\nCREATE OR REPLACE VIEW v AS\nWITH usage AS (SELECT * FROM messages)\n"
           "SELECT * FROM usage JOIN _in_tree('sessions') AS s USING (a) WHERE b IN (SELECT b FROM c)")
    assert referenced(sql) == {"messages", "_in_tree", "sessions", "c"}


def test_each_mart_depends_on_the_tables_and_marts_it_reads():
    assert {name: set(depends_on(name)) for name in MARTS} == PARENTS


def test_the_asset_graph_draws_what_the_marts_read():
    from pipelines.definitions import defs

    graph = defs.get_repository_def().asset_graph
    parents = {name: {k.to_user_string() for k in graph.get(dg.AssetKey(name)).parent_keys} for name in MARTS}
    assert parents == PARENTS
    edges = [(mart, parent) for mart, of in parents.items() for parent in of]
    assert len([e for e in edges if e[1] in TABLES]) == 45
    assert sorted(e for e in edges if e[1] in MARTS) == [
        ("insight_idle_cost", "session_summary"), ("insight_subagent_share", "session_summary"),
        ("model_usage", "daily_costs")]
    # the building blocks are no assets; no mart reads the parts (the search index alone does),
    # read_files, quarantine or sources
    assert not any(k.to_user_string().startswith("_") for k in graph.get_all_asset_keys())
    assert {k.to_user_string() for k in graph.get(dg.AssetKey("parts")).child_keys} == {"search_index"}
    unread = {"read_files", "quarantine", "sources"}
    assert not any(graph.get(dg.AssetKey(t)).child_keys for t in unread)
    # the names' table is drawn from the tables that record a model, and feeds the marts that group by it
    names = graph.get(dg.AssetKey(NAMES))
    assert {k.to_user_string() for k in names.parent_keys} == {"messages", "sessions", "usage"}
    assert {k.to_user_string() for k in names.child_keys} == {"daily_costs", "model_usage", "token_usage",
                                                              "insight_read_edit_ratio", "insight_idle_cost",
                                                              "insight_cache_efficiency"}
