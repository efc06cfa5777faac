"""Project identity: the git remote (read from the git config, never by running git), else the
directory name; a configured mapping wins."""

import pytest

from tests.conftest import T0, ingest_tables, query
from transforms.synth.crush import add_session
from transforms.projects import git_remote, project_name, remote_name


def _git(repo, remotes: dict[str, str]):
    (repo / ".git").mkdir(parents=True)
    text = "[core]\n\trepositoryformatversion = 0\n"
    for name, url in remotes.items():
        text += f'[remote "{name}"]\n\turl = {url}\n\tfetch = +refs/heads/*:refs/remotes/{name}/*\n'
    text += '[branch "main"]\n\tremote = origin\n'
    (repo / ".git" / "config").write_text(text)


@pytest.mark.parametrize("url", ["https://github.com/acme/webshop.git", "git@github.com:acme/webshop.git",
                                 "ssh://git@github.com:22/acme/webshop", "https://github.com/acme/webshop/"])
def test_remote_urls_give_owner_and_repo(url):
    assert remote_name(url) == "acme/webshop"


def test_origin_is_preferred_and_worktrees_share_the_config(tmp_path):
    repo = tmp_path / "checkout"
    _git(repo, {"upstream": "https://github.com/other/fork.git", "origin": "git@github.com:acme/webshop.git"})
    assert git_remote(repo) == "git@github.com:acme/webshop.git"
    worktree = tmp_path / "wt"
    (repo / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (repo / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {repo / '.git' / 'worktrees' / 'wt'}\n")
    assert git_remote(worktree) == "git@github.com:acme/webshop.git"
    assert git_remote(tmp_path) is None


def test_two_checkouts_of_one_repo_are_one_project_and_a_mapping_wins(layout, project, tmp_path):
    a, b = project("webshop"), project("webshop-copy")
    for p in (a, b):
        _git(p.path, {"origin": "https://github.com/acme/webshop.git"})
        add_session(p.conn, f"s-{p.path.name}", title="t", created_at=T0, cost=1.0)
        p.close()
    plain = project("scratch")
    plain.close()
    ingest_tables(layout, a.db, b.db, plain.db)
    assert query(layout, "SELECT project, COUNT(*) FROM sessions GROUP BY 1") == [("acme-webshop", 2)]
    assert sorted(r[0] for r in query(layout, "SELECT project_path FROM sessions")) == sorted(
        [str(a.path), str(b.path)])  # the local path is kept
    assert project_name(str(plain.path)) == "scratch"
    assert project_name(str(a.path), {"acme/webshop": "Shop"}) == "shop"
    assert project_name(str(b.path), {str(b.path): "copy"}) == "copy"


def test_a_secret_in_a_folders_name_is_never_a_projects_slug_and_plain_names_load_no_rules():
    """A team lead's trial: a token pasted into a folder's name was the project's slug (lower
    case gave an AWS key back whole). Plain names, long ones too, do not pay the rules' import."""
    import subprocess
    import sys

    from transforms.projects import project_slug

    key, token = "AKIA" + "IOSFODNN7EXAMPLE", "gh" + "p_" + "abcdefghijklmnopqrstuvwxyzABCDEF0123"
    assert project_slug(key) == "redacted-aws-access-key" and project_slug(token) == "redacted-github-token"
    assert project_slug(f"work-{key}") == "work-redacted-aws-access-key"
    # letters only, or dashes inside: looked at too (a review found them past a digits-only filter)
    assert project_slug("hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh") == "redacted-huggingface-token"
    assert project_slug("glpat-" + "Ab1Cd2Ef-Gh3Ij4Kl5Mn") == "redacted-gitlab-token"
    code = ("import sys; from transforms.projects import project_slug; "
            "print(project_slug('agentlake_warehouse_tools'), 'transforms.redact' in sys.modules)")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ran.stdout.split() == ["agentlake-warehouse-tools", "False"]
