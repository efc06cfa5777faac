"""A real S3 protocol server (moto, on loopback) for the team-lake tests: one server per module,
each test in its own prefix of the bucket (or a bucket of its own), and the CLI run in this
process as a new process would start it, with no object store kept from an earlier call."""

import logging

import pytest

from tests.conftest import run_cli

BUCKET = "team-lake"


@pytest.fixture(scope="module")
def s3_server():
    """One moto server for the module: a start per test cost more than most of its tests."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(s3_server, monkeypatch):
    """The AWS settings every client reads, pointing at the module's server, and its bucket."""
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": s3_server}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    forget_object_stores()
    s3_client(env).create_bucket(Bucket=BUCKET)  # the module's tests share it, each under its own prefix
    yield env
    forget_object_stores()


def s3_client(env):
    import boto3

    return boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                        aws_access_key_id=env.get("AWS_ACCESS_KEY_ID", "testing"),
                        aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY", "testing"))


def forget_object_stores() -> None:
    """A process keeps one object store per lake URI, made with the endpoint and credentials of
    its environment then (warehouse.lake.storage.open_store): a command run in this process must
    not get one an earlier test made against another server."""
    from warehouse.lake.storage import _object_store

    _object_store.cache_clear()


def run_cli_fresh(*args, env=None, **kwargs):
    """`run_cli`, with the object stores an earlier command of this process kept forgotten, as a
    new process starts."""
    forget_object_stores()
    try:
        return run_cli(*args, env=env, **kwargs)
    finally:
        forget_object_stores()
