"""The lake URI as the CLI takes it: credentials in it refused with the secret masked, whatever
the secret holds; a query parameter object storage does not take refused by name, its value
never echoed (a team lead's report: a secret with a `/` went through, and `?endpoint=` was a
pyarrow traceback)."""

import os

import pytest

from tests.support_s3 import run_cli_fresh
from warehouse.lake.storage import LAKE_PARAMETERS, masked

KEY_ID = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # about half of AWS's secret keys hold a `/`
PIECES = [KEY_ID, *SECRET.split("/")]  # no piece of the key may be printed either


def run(*args, home, extra_env=None):
    """The CLI in this process, with nothing of this process's environment but what is given."""
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "AGENTLAKE_HOME": str(home / "al"),
           "AWS_EC2_METADATA_DISABLED": "true", **(extra_env or {})}
    return run_cli_fresh(*args, env=env, replace_env=True)


def assert_nothing_secret(out, *secrets: str) -> None:
    printed = out.stdout + out.stderr
    assert not [s for s in secrets if s in printed], printed
    assert "Traceback" not in out.stderr, out.stderr


@pytest.mark.parametrize("uri, shown", [
    (f"s3://{KEY_ID}:{SECRET}@acme-agentlake/lake", "s3://***@acme-agentlake/lake"),
    (f"s3://{KEY_ID}:wJalrXUtnFEMIK7MDENGbPxRfiCY@acme-agentlake/lake", "s3://***@acme-agentlake/lake"),
    (f"s3://{KEY_ID}:a/b@acme-agentlake/lake@2024/x?region=eu-west-1",
     "s3://***@acme-agentlake/lake@2024/x?region=eu-west-1"),
    (f"s3://{KEY_ID}:{SECRET}", "s3://***"),  # no bucket at all: nothing of the key is shown
    (f"s3://{KEY_ID}@acme-agentlake/lake", "s3://***@acme-agentlake/lake"),
    ("s3://acme-agentlake/lake@2024?endpoint_override=minio:9000&scheme=http",
     "s3://acme-agentlake/lake@2024?endpoint_override=minio:9000&scheme=http"),  # nothing to hide
    ("s3://acme-agentlake/lake?region=eu-west-1&session_token=FwoGZX/yIv&endpoint=minio:9000",
     "s3://acme-agentlake/lake?region=eu-west-1&session_token=***&endpoint=***"),
    ("/srv/lake@host:a", "/srv/lake@host:a"),  # a folder is no URI
])
def test_masked_hides_every_secret_a_uri_can_carry(uri, shown):
    assert masked(uri) == shown


@pytest.mark.parametrize("command", [["schedule", "--kind", "systemd"], ["merge"], ["ingest", "--no-default"]])
def test_a_secret_key_with_a_slash_is_refused_and_never_printed(tmp_path, command):
    lake = f"s3://{KEY_ID}:{SECRET}@acme-agentlake/lake"
    out = run(*command, "--lake", lake, home=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "holds credentials" in out.stderr and "s3://***@acme-agentlake/lake" in out.stderr
    assert "ExecStart" not in out.stdout  # no schedule printed
    assert_nothing_secret(out, *PIECES)


def test_a_secret_in_config_toml_is_refused_the_same_way(tmp_path):
    (tmp_path / "al").mkdir()
    (tmp_path / "al" / "config.toml").write_text(f'lake = "s3://{KEY_ID}:{SECRET}@acme-agentlake/lake"\n')
    for command in (["merge"], ["ingest", "--no-default"], ["schedule", "--kind", "cron"]):
        out = run(*command, home=tmp_path)
        assert out.returncode == 1 and "s3://***@acme-agentlake/lake" in out.stderr, out.stderr
        assert_nothing_secret(out, *PIECES)


@pytest.mark.parametrize("query, named, secret", [
    ("endpoint=127.0.0.1:9000", "endpoint (did you mean endpoint_override?)", None),
    ("endpoint_override=127.0.0.1:9000&access_key=AKIAQUERYKEYEXAMPLE", "access_key", "AKIAQUERYKEYEXAMPLE"),
    ("region=us-east-1&session_token=FwoGZXIvYXdzEXAMPLE/TOKEN", "session_token", "FwoGZXIvYXdzEXAMPLE"),
])
@pytest.mark.parametrize("command", [["merge"], ["ingest", "--no-default"]])
def test_a_parameter_the_store_does_not_take_is_named_with_the_ones_it_does(tmp_path, query, named, secret, command):
    out = run(*command, "--lake", f"s3://acme-agentlake/lake?{query}", home=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.startswith("error: the lake URI s3://acme-agentlake/lake?") and named in out.stderr
    if secret:
        assert "holds credentials" in out.stderr and "AWS_SECRET_ACCESS_KEY" in out.stderr
    else:
        assert all(p in out.stderr for p in LAKE_PARAMETERS)  # the ones it takes, all of them
    assert_nothing_secret(out, *([secret] if secret else []))
    assert "ArrowInvalid" not in out.stderr


def test_every_parameter_accepted_is_one_pyarrow_takes():
    """LAKE_PARAMETERS is pyarrow's own list: each one passes its URI parser (offline: with a
    region and an endpoint it asks nothing), and a name not in it does not."""
    from pyarrow import ArrowInvalid, fs

    values = {"scheme": "http", "region": "us-east-1", "endpoint_override": "127.0.0.1:9",
              "tls_ca_file_path": "/etc/ssl/certs/ca-certificates.crt", "tls_ca_dir_path": "/etc/ssl/certs"}
    for name in LAKE_PARAMETERS:
        value = values.get(name, "true")
        fs.FileSystem.from_uri(f"s3://bucket/lake?region=us-east-1&endpoint_override=127.0.0.1:9&{name}={value}")
    with pytest.raises(ArrowInvalid):
        fs.FileSystem.from_uri("s3://bucket/lake?region=us-east-1&endpoint_override=127.0.0.1:9&endpoint=x")


def test_a_lake_uri_without_credentials_still_works(tmp_path):
    """The refusal is not a false alarm: a URI with `@` in its path and every parameter spelled
    right resolves, and keeps its query for pyarrow."""
    from warehouse.lake.layout import Layout

    lake = "s3://acme-agentlake/lake@2024?endpoint_override=127.0.0.1:9000&scheme=http&region=us-east-1"
    layout = Layout.resolve(home=tmp_path, lake=lake, env={})
    assert layout.lake == lake and os.fspath(layout.home) == os.fspath(tmp_path.absolute())


@pytest.mark.parametrize("query, timeouts", [
    ("endpoint_override=127.0.0.1:5077&scheme=http&region=eu-west-1", (5.0, 10.0)),
    # options pyarrow's constructor cannot take: the store keeps them, and the SDK's own timeouts
    ("endpoint_override=127.0.0.1:5077&scheme=https&region=eu-west-1&tls_verify_certificates=false", (-1.0, -1.0)),
])
def test_an_object_store_waits_seconds_not_minutes_and_keeps_the_uris_options(monkeypatch, query, timeouts):
    """An endpoint that takes the connection and never answers was waited for minutes (three tries
    of the SDK's timeouts, a team lead's trial: docs/BENCHMARKS.md, "Figures behind the code's
    choices"): the store connects within 5 s and lets a request stall 10 s, about 30 s in all; every
    option the URI set is still the store's."""
    from warehouse.lake.storage import CONNECT_TIMEOUT, STALL_TIMEOUT, ObjectStore

    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    store = ObjectStore(f"s3://acme-agentlake/lake?{query}")
    _, (options,) = store.fs.__reduce__()
    assert (options["connect_timeout"], options["request_timeout"]) == timeouts
    assert timeouts == (-1.0, -1.0) or timeouts == (CONNECT_TIMEOUT, STALL_TIMEOUT)
    assert (options["endpoint_override"], options["scheme"], options["region"]) == (
        "127.0.0.1:5077", "http" if "http&" in query else "https", "eu-west-1")
    assert store.base == "acme-agentlake/lake"


def test_an_endpoint_that_is_a_web_server_not_s3_is_said_as_that(tmp_path):
    """A trial put a plain web server at the endpoint (as one does with an object store's console
    port): its 404s were taken for a bucket that does not exist ("create it")."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # its request log is its own, not the CLI's output
            pass

    handler = functools.partial(Quiet, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        endpoint = f"127.0.0.1:{server.server_address[1]}"
        lake = f"s3://team-lake/lake?endpoint_override={endpoint}&scheme=http&region=us-east-1"
        out = run("merge", "--lake", lake, home=tmp_path,
                  extra_env={"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET})
    finally:
        server.shutdown()
        server.server_close()
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr == (f"error: the lake {lake}'s endpoint http://{endpoint} answered, but not as S3 object "
                          "storage (HTTP 404, text/html): is it the S3 API's address and port?\n")
    assert_nothing_secret(out, *PIECES)


@pytest.mark.parametrize("lake, written", [
    ("s3://team/lake?endpoint_override=127.0.0.1:9000&scheme=http",
     "s3://team/lake/export/v1?endpoint_override=127.0.0.1:9000&scheme=http"),
    ("s3://team/lake/", "s3://team/lake/export/v1"),
    ("/srv/lake", "/srv/lake/export/v1")])
def test_a_path_under_a_lake_goes_before_its_query(lake, written):
    """The center's run log named `s3://b/lake?endpoint_override=...&scheme=http/export/v...` (a trial)."""
    from warehouse.lake.storage import under

    assert under(lake, "export/v1") == written
