"""Crush discovery: the global data dir, projects.json in every shape, extra stores, slugs.

Discovery must never open a database nor read Crush's global crush.json
(docs/FORMATS.md, "Crush: the registry resolution").
"""

import json
import os
import re
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from transforms.crush.discover import discover, global_data_dir
from transforms.synth.crush import add_message, add_session, create_crush_db, text_part, write_registry
from warehouse.land.ingest import ingest_all
from warehouse.lake.layout import Layout

WHEN = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
SLUG = re.compile(r"^[a-z0-9-]+$")


# --------------------------------------------------------------------------- helpers


def make_project(root: Path, name: str, *, data_dir: str = ".crush", with_db: bool = True) -> dict:
    """A project directory (with `<data_dir>/crush.db` unless told not to) and its registry entry."""
    project = root / name
    project.mkdir(parents=True)
    dd = Path(data_dir) if Path(data_dir).is_absolute() else project / data_dir
    if with_db:
        conn = create_crush_db(dd / "crush.db")
        add_session(conn, "s1", title="t", created_at=1_767_600_000)
        add_message(conn, "m1", "s1", "user", [text_part("hi")], created_at=1_767_600_001)
        conn.close()
    else:
        dd.mkdir(parents=True, exist_ok=True)
    return {"path": str(project), "data_dir": data_dir, "last_accessed": WHEN}


def env_for(global_dir: Path) -> dict:
    return {"CRUSH_GLOBAL_DATA": str(global_dir)}


def dbs(found) -> set[str]:
    return {s.path for s in found.sources}


def readable(found) -> list:
    return [s for s in found.sources if not s.skip_reason]


# --------------------------------------------------------------------------- global data dir


@pytest.mark.parametrize(
    ("env", "platform", "expected"),
    [
        # CRUSH_GLOBAL_DATA wins over everything and gets no crush/ suffix
        ({"CRUSH_GLOBAL_DATA": "/g", "XDG_DATA_HOME": "/x", "LOCALAPPDATA": "/l", "HOME": "/h"}, "posix", "/g"),
        ({"CRUSH_GLOBAL_DATA": "/g", "XDG_DATA_HOME": "/x", "LOCALAPPDATA": "/l"}, "nt", "/g"),
        # XDG_DATA_HOME next, on every OS (Windows included)
        ({"XDG_DATA_HOME": "/x", "HOME": "/h"}, "posix", "/x/crush"),
        ({"XDG_DATA_HOME": "/x", "LOCALAPPDATA": "/l", "USERPROFILE": "/u"}, "nt", "/x/crush"),
        # Windows: LOCALAPPDATA, else USERPROFILE\AppData\Local
        ({"LOCALAPPDATA": "/l", "USERPROFILE": "/u", "HOME": "/h"}, "nt", "/l/crush"),
        ({"USERPROFILE": "/u", "HOME": "/h"}, "nt", "/u/AppData/Local/crush"),
        # elsewhere (macOS too): $HOME/.local/share/crush; Windows variables are ignored
        ({"HOME": "/h", "LOCALAPPDATA": "/l", "USERPROFILE": "/u"}, "posix", "/h/.local/share/crush"),
        # empty values count as unset, as with Go's os.Getenv(...) != ""
        ({"CRUSH_GLOBAL_DATA": "", "XDG_DATA_HOME": "", "HOME": "/h"}, "posix", "/h/.local/share/crush"),
        ({"XDG_DATA_HOME": "", "LOCALAPPDATA": "", "USERPROFILE": "/u"}, "nt", "/u/AppData/Local/crush"),
    ],
)
def test_global_data_dir_resolution_order(env, platform, expected):
    assert global_data_dir(env, platform=platform) == Path(expected)


# --------------------------------------------------------------------------- registry


@pytest.mark.parametrize("shape", ["object", "array", "keyed"])
def test_every_registry_shape_yields_the_same_sources(tmp_path, shape):
    entries = [make_project(tmp_path / "p", n) for n in ("alpha", "beta")]
    write_registry(tmp_path / "g", entries, shape=shape)

    found = discover(env=env_for(tmp_path / "g"))

    assert found.problems == []
    expected = {str(Path(e["path"]) / ".crush" / "crush.db") for e in entries}
    assert dbs(found) == expected
    assert {s.project_path for s in found.sources} == {e["path"] for e in entries}
    assert all(s.skip_reason is None and s.provider == "crush" for s in found.sources)


def test_relative_data_dir_resolves_against_the_project_not_the_cwd(tmp_path, monkeypatch):
    entry = make_project(tmp_path / "p", "old", data_dir="state/.crush")
    write_registry(tmp_path / "g", [entry])
    monkeypatch.chdir(tmp_path)  # a cwd-relative resolution would look in tmp_path/state/.crush

    found = discover(env=env_for(tmp_path / "g"))

    assert [s.path for s in readable(found)] == [str(Path(entry["path"]) / "state" / ".crush" / "crush.db")]


def test_absolute_data_dir_outside_the_project(tmp_path):
    elsewhere = tmp_path / "elsewhere" / "data"
    entry = make_project(tmp_path / "p", "proj", data_dir=str(elsewhere))
    write_registry(tmp_path / "g", [entry])

    (src,) = discover(env=env_for(tmp_path / "g")).sources

    assert src.path == str(elsewhere / "crush.db")
    assert src.project_path == entry["path"]
    assert src.skip_reason is None


def test_projects_sharing_one_data_dir_give_one_source(tmp_path):
    # Crush's upward .crush search: a sub-directory registered with its parent's data dir
    parent = make_project(tmp_path / "p", "mono")
    sub = Path(parent["path"]) / "pkg"
    sub.mkdir()
    shared = str(Path(parent["path"]) / ".crush")
    entries = [
        {"path": str(sub), "data_dir": shared, "last_accessed": WHEN},
        {"path": parent["path"], "data_dir": shared, "last_accessed": WHEN},
        {"path": str(sub), "data_dir": "../.crush", "last_accessed": WHEN},  # same dir, spelled relatively
    ]
    write_registry(tmp_path / "g", entries)

    found = discover(env=env_for(tmp_path / "g"))

    assert dbs(found) == {str(Path(shared) / "crush.db")}
    assert len(found.sources) == 1


def test_gone_project_and_missing_db_are_skipped_sources_not_problems(tmp_path):
    good = make_project(tmp_path / "p", "good")
    gone = make_project(tmp_path / "p", "gone", with_db=False)
    Path(gone["path"], ".crush").rmdir()
    Path(gone["path"]).rmdir()
    no_db = make_project(tmp_path / "p", "nodb", with_db=False)
    write_registry(tmp_path / "g", [good, gone, no_db])

    found = discover(env=env_for(tmp_path / "g"))

    assert found.problems == []
    by_project = {Path(s.project_path).name: s for s in found.sources}
    assert set(by_project) == {"good", "gone", "nodb"}
    assert by_project["good"].skip_reason is None
    assert "gone" in by_project["gone"].skip_reason
    assert "crush.db" in by_project["nodb"].skip_reason


@pytest.mark.parametrize(
    ("content", "words"),
    [("{not json", "not valid JSON"), ("42", "unknown shape"), ("", "not valid JSON")],
)
def test_unreadable_registry_is_a_problem_and_other_roots_still_count(tmp_path, content, words):
    bad_global = tmp_path / "bad"
    bad_global.mkdir()
    (bad_global / "projects.json").write_text(content)
    other = make_project(tmp_path / "p", "other")
    write_registry(tmp_path / "other-root", [other])

    found = discover(env=env_for(bad_global), extra_roots=[tmp_path / "other-root"])

    assert len(found.problems) == 1
    assert str(bad_global / "projects.json") in found.problems[0]
    assert words in found.problems[0]
    assert dbs(found) == {str(Path(other["path"]) / ".crush" / "crush.db")}


def test_registry_entries_without_a_path_are_reported_and_the_rest_kept(tmp_path):
    good = make_project(tmp_path / "p", "good")
    reg = tmp_path / "g" / "projects.json"
    reg.parent.mkdir()
    reg.write_text('{"projects": [{"data_dir": "/x"}, 7, {"path": "%s", "data_dir": ".crush"}]}' % good["path"])

    found = discover(env=env_for(tmp_path / "g"))

    assert [p.split(": ", 1)[1] for p in found.problems] == ["entry 0 ignored: no path", "entry 1 ignored: no path"]
    assert [s.project_path for s in found.sources] == [good["path"]]


def test_no_registry_at_all_is_silent(tmp_path):
    found = discover(env=env_for(tmp_path / "empty"))
    assert found.sources == [] and found.problems == []


# --------------------------------------------------------------------------- extra stores


def test_extra_stores_accept_db_file_data_dir_and_project_dir(tmp_path):
    a = make_project(tmp_path, "by-file")
    b = make_project(tmp_path, "by-data-dir", data_dir="custom")
    c = make_project(tmp_path, "by-project")
    extras = [Path(a["path"], ".crush", "crush.db"), Path(b["path"], "custom"), Path(c["path"])]

    found = discover(env={}, extra_dbs=extras, use_default=False)

    assert found.problems == []
    assert dbs(found) == {
        str(extras[0]), str(extras[1] / "crush.db"), str(extras[2] / ".crush" / "crush.db"),
    }
    # a .crush data dir belongs to its parent directory, the project
    assert {s.project_path for s in found.sources if "by-file" in s.path} == {a["path"]}


def test_extra_store_duplicating_a_registry_db_is_not_counted_twice(tmp_path):
    entry = make_project(tmp_path / "p", "proj")
    write_registry(tmp_path / "g", [entry])

    found = discover(env=env_for(tmp_path / "g"), extra_dbs=[entry["path"]])

    assert len(found.sources) == 1 and found.problems == []


def test_missing_extra_store_is_a_problem(tmp_path):
    good = make_project(tmp_path, "good")
    missing = tmp_path / "nowhere" / "crush.db"

    found = discover(env={}, extra_dbs=[missing, good["path"]], use_default=False)

    assert len(found.problems) == 1 and str(missing) in found.problems[0]
    assert [s.project_path for s in found.sources] == [good["path"]]


def test_use_default_false_ignores_the_env_registry(tmp_path):
    write_registry(tmp_path / "g", [make_project(tmp_path / "p", "registered")])
    extra = make_project(tmp_path, "extra")

    found = discover(env=env_for(tmp_path / "g"), extra_dbs=[extra["path"]], use_default=False)
    assert [s.project_path for s in found.sources] == [extra["path"]]

    with_default = discover(env=env_for(tmp_path / "g"), extra_dbs=[extra["path"]])
    assert len(with_default.sources) == 2


# --------------------------------------------------------------------------- ids and slugs


@pytest.mark.parametrize("name", ["My Project", "a,b, c", "Café Ünïcode", "日本語", "--x--", "UPPER_case.v2", "a" * 100])
def test_partition_key_is_a_slug_and_source_id_is_stable(tmp_path, name):
    entry = make_project(tmp_path / "p", name)
    write_registry(tmp_path / "g", [entry])

    (first,) = discover(env=env_for(tmp_path / "g")).sources
    (again,) = discover(env=env_for(tmp_path / "g")).sources

    assert SLUG.match(first.project) and SLUG.match(first.partition_key), first.partition_key
    assert first.partition_key.startswith("crush-")
    assert first.source_id == again.source_id and first.partition_key == again.partition_key


def test_slashes_in_a_registered_path_never_reach_the_slug(tmp_path):
    entry = make_project(tmp_path / "p" / "team, inc", "sub dir")
    write_registry(tmp_path / "g", [entry])

    (src,) = discover(env=env_for(tmp_path / "g")).sources

    assert "/" not in src.partition_key and SLUG.match(src.partition_key)
    assert src.project == "sub-dir"


def test_different_dbs_get_different_source_ids(tmp_path):
    entries = [make_project(tmp_path / "a", "same"), make_project(tmp_path / "b", "same")]
    write_registry(tmp_path / "g", entries)

    found = discover(env=env_for(tmp_path / "g"))

    assert len({s.source_id for s in found.sources}) == 2
    assert len({s.partition_key for s in found.sources}) == 2


# --------------------------------------------------------------------------- never opens anything


def test_discovery_never_opens_a_db_nor_reads_crush_json(tmp_path):
    global_dir = tmp_path / "g"
    good = make_project(tmp_path / "p", "good")
    bad = make_project(tmp_path / "p", "bad", with_db=False)
    bad_db = Path(bad["path"], ".crush", "crush.db")
    bad_db.write_bytes(b"this is not sqlite at all" * 40)
    write_registry(global_dir, [good, bad])
    (global_dir / "crush.json").write_text("{{{ garbage, and a secret: sk-XXXX")
    Path(good["path"], ".crush", "crush.json").write_text("not json either")
    before = bad_db.read_bytes()

    found = discover(env=env_for(global_dir))

    assert found.problems == []
    assert all(s.skip_reason is None for s in found.sources)
    assert str(bad_db) in dbs(found)
    assert bad_db.read_bytes() == before
    assert not Path(f"{bad_db}-wal").exists() and not Path(f"{bad_db}-shm").exists()

    summary = ingest_all(found.sources, Layout.resolve(home=tmp_path / "home"))
    status = {Path(r.source.project_path).name: r.status for r in summary.results}
    assert status == {"good": "ok", "bad": "failed"}


# --------------------------------------------------------------------------- shared data dirs, resolved paths


def test_gone_project_sharing_a_live_data_dir_does_not_hide_the_db(tmp_path):
    parent = make_project(tmp_path / "p", "mono")
    shared = str(Path(parent["path"]) / ".crush")
    deleted_sub = {"path": str(Path(parent["path"]) / "old-pkg"), "data_dir": shared, "last_accessed": WHEN}
    write_registry(tmp_path / "g", [deleted_sub, {**parent, "data_dir": shared}])  # newest first

    found = discover(env=env_for(tmp_path / "g"))

    assert [(s.path, s.skip_reason) for s in found.sources] == [(str(Path(shared) / "crush.db"), None)]


def test_source_id_does_not_depend_on_the_spelling_of_the_project_path(tmp_path):
    real = make_project(tmp_path / "p", "proj")
    link = tmp_path / "link-to-proj"
    link.symlink_to(real["path"], target_is_directory=True)
    via_link = {**real, "path": str(link)}

    write_registry(tmp_path / "g1", [real, via_link])
    write_registry(tmp_path / "g2", [via_link, real])  # Crush re-sorts the registry on every run
    ids = {s.source_id for g in ("g1", "g2") for s in discover(env=env_for(tmp_path / g)).sources}
    ids |= {s.source_id for s in discover(env={}, extra_dbs=[link], use_default=False).sources}

    assert len(ids) == 1


# --------------------------------------------------------------------------- odd registry entries


def test_bad_entries_are_reported_one_by_one(tmp_path):
    good = make_project(tmp_path / "p", "good")
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "projects.json").write_text(json.dumps({"projects": [
        {"path": "/x", "data_dir": 5}, {"path": "rel", "data_dir": ".crush"},
        {"path": good["path"], "data_dir": ".crush"}]}))
    found = discover(env=env_for(tmp_path / "g"))
    assert [p.split(": ", 1)[1] for p in found.problems] == [
        "entry 0 ignored: data_dir is a int, not a path",
        "entry 1 ignored: path 'rel' and data_dir '.crush' are both relative"]
    assert dbs(found) == {str(Path(good["path"]) / ".crush" / "crush.db")}


def test_relative_path_with_an_absolute_data_dir_is_found(tmp_path):
    real = make_project(tmp_path / "p", "proj")
    entry = {"path": "proj", "data_dir": str(Path(real["path"]) / ".crush"), "last_accessed": "x"}
    write_registry(tmp_path / "g", [entry])
    (source,) = discover(env=env_for(tmp_path / "g")).sources
    assert source.skip_reason is None and source.project_path == real["path"]


def test_shared_crush_dir_keeps_one_project_whichever_entry_is_newest(tmp_path):
    repo = make_project(tmp_path / "p", "repo")
    sub = Path(repo["path"]) / "pkg"
    sub.mkdir()
    shared = str(Path(repo["path"]) / ".crush")
    entries = [{"path": str(sub), "data_dir": shared, "last_accessed": "x"}, {**repo, "data_dir": shared}]
    write_registry(tmp_path / "g1", entries)
    write_registry(tmp_path / "g2", entries[::-1])
    first = discover(env=env_for(tmp_path / "g1")).sources
    second = discover(env=env_for(tmp_path / "g2")).sources
    assert [(s.project, s.partition_key) for s in first] == [(s.project, s.partition_key) for s in second]
    assert first[0].project == "repo"


def test_one_agents_unusable_place_does_not_stop_the_others(tmp_path):
    """`CLAUDE_CONFIG_DIR=~nosuchuser/.claude` made pathlib raise "Could not determine home
    directory" out of Claude's discovery, and the whole ingest stopped with a traceback."""
    from tests.conftest import options_for
    from warehouse.land.ingest import discover_sources

    home = tmp_path / "codex"
    (home / "sessions").mkdir(parents=True)
    options = replace(options_for(homes={"codex": [home]}), use_default=True,
                      env={"CLAUDE_CONFIG_DIR": "~nosuchuser-agentlake/.claude", "HOME": str(tmp_path)})
    _, problems = discover_sources(options)
    assert any(p.startswith("cannot look for claude's data: RuntimeError") and "~user" in p for p in problems), problems


def test_a_folder_name_that_is_not_utf8_is_read_and_logged(layout, tmp_path):
    """A Latin-1 folder name: its id came from `str.encode()`, which raised on its odd byte and
    took every agent's discovery down; its run log row could not be written."""
    from tests.conftest import ingest_tables, query
    from tests.test_claude import FIXTURE, SID

    folder = os.path.join(os.fsencode(tmp_path / "claude" / "projects"), b"caf\xe9")
    os.makedirs(folder)
    with open(os.path.join(folder, f"{SID}.jsonl".encode()), "w") as fh:  # no cwd: the folder names it
        fh.write("".join(ln.replace('"cwd":"/home/dev/shop",', "") + "\n" for ln in FIXTURE.lstrip().splitlines()))

    (result,) = ingest_tables(layout, homes={"claude": [tmp_path / "claude"]}).results
    assert result.status == "ok", result.error
    assert query(layout, "SELECT db_path, status FROM sources") == [(str(tmp_path / "claude" / "projects") + "/caf\ufffd", "ok")]
    assert query(layout, "SELECT COUNT(*), any_value(project_path) FROM sessions") == [(1, "caf\ufffd")]


def test_a_folder_named_crush_db_is_named_as_what_it_is(tmp_path):
    """It was skipped as "no crush.db in ...", though something named crush.db is there."""
    data = tmp_path / "proj" / ".crush"
    (data / "crush.db").mkdir(parents=True)
    write_registry(tmp_path / "global", [{"path": str(tmp_path / "proj"), "data_dir": str(data),
                                          "last_accessed": "2026-03-02T09:15:00Z"}])
    (source,) = discover(env={"CRUSH_GLOBAL_DATA": str(tmp_path / "global")}).sources
    assert source.skip_reason == f"{data / 'crush.db'} is a directory, not a regular file"


def test_a_warning_quoting_a_path_that_is_not_utf8_keeps_the_run_log(layout, tmp_path):
    """A Codex home under a Latin-1 folder with a stale copy of a session: the warning naming the
    copy could not be written, and the whole run's rows of `sources` were lost."""
    from tests.conftest import ingest_tables, query
    from tests.test_codex import write_fixture

    home = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"caf\xe9-codex")))
    full = write_fixture(home)
    full.with_name(full.name.replace(".jsonl", " (1).jsonl")).write_text(full.read_text().splitlines()[0] + "\n")
    summary = ingest_tables(layout, homes={"codex": [home]})
    (result,) = summary.results
    assert result.status == "ok" and any("another copy of a session" in w for w in result.warnings)
    (warnings,) = query(layout, "SELECT warnings FROM sources")[0]
    assert "caf\ufffd-codex" in warnings
