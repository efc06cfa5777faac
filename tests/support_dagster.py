"""A real, temporary Dagster instance with the storage agentlake gives its own Dagster home
(pipelines/dagster_storage.yaml, as `agentlake ingest` and `agentlake dev` run on it): Dagster's
SQLite files kept open between events. Dagster's default storage opened, committed, synced and
closed a file for every event, which was most of these tests' time; it is still what
tests/test_dagster_storage.py compares with, and what a DAGSTER_HOME of the user's own gets."""

from contextlib import contextmanager
from importlib import resources

import dagster as dg
import yaml


def agentlake_storage() -> dict:
    """The storage sections of agentlake's own dagster.yaml, read from the shipped file (its
    `dagster_home` is $DAGSTER_HOME, which `instance_for_test` sets to the instance's folder)."""
    return yaml.safe_load(resources.files("pipelines").joinpath("dagster_storage.yaml").read_text())


@contextmanager
def agentlake_instance(overrides: dict | None = None):
    with dg.instance_for_test(overrides={**agentlake_storage(), **(overrides or {})}) as instance:
        yield instance


def sensor_tick(instance, resource, cursor=None):
    """One evaluation of agentlake's sensor, its context closed after, as Dagster's docs use it: it
    holds the resources it built in an exit stack nothing else closes (the likely cause of
    "Attempted to resolve undefined DagsterInstance weakref" in a later materialisation of the
    same test, once in a full run)."""
    from pipelines.defs.sensors import discover_sources

    with dg.build_sensor_context(instance=instance, cursor=cursor, resources={"agentlake": resource}) as context:
        return discover_sources(context)
