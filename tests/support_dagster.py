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


# A schedule's or sensor's test context opens an instance of its own from the given one's ref,
# on first use of `context.instance`, and enters it: that sets Dagster's "current" state storage
# (a context variable). A context left unclosed is closed whenever the garbage collector gets to
# it, in a later test, and putting the variable back then restores the storage of an instance
# that is gone: "Attempted to resolve undefined DagsterInstance weakref" in that test's next
# materialisation. So every evaluation here closes its context.

def sensor_tick(instance, resource, cursor=None):
    """One evaluation of agentlake's sensor, its context closed after."""
    from pipelines.defs.sensors import discover_sources

    with dg.build_sensor_context(instance=instance, cursor=cursor, resources={"agentlake": resource}) as context:
        return discover_sources(context)


def schedule_tick(instance, resource, when):
    """One evaluation of the nightly full refresh at `when`, its context closed after."""
    from pipelines.defs.schedules import daily_full_refresh

    with dg.build_schedule_context(instance, scheduled_execution_time=when,
                                   resources={"agentlake": resource}) as context:
        return daily_full_refresh(context)
