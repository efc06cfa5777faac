import re

import dagster as dg

from transforms.providers import PROVIDERS

# One partition per agent and project (slug keys such as `codex-webshop`, never paths), holding
# that project's sources on this machine (Source.dagster_partition). Every provider shares it,
# so one sensor and one schedule treat them alike.
sources_partitions = dg.DynamicPartitionsDefinition(name="sources")
# what an older version keyed a partition by: a source, `<provider>-<project>-<8 hex>`
_PER_SOURCE_KEY = re.compile(rf"^(?:{'|'.join(map(re.escape, PROVIDERS))})-[a-z0-9-]+-[0-9a-f]{{8}}$")


def partition_changes(registered: set[str], partitions: set[str], landed=lambda providers: set()) -> list:
    """Add the new partitions; delete the per-source keys an older version registered
    (`<provider>-<project>-<8 hex>`), whether or not their source is still found: the nightly
    run over every partition would fail on each one. `landed(providers)`: the partitions of
    those agents' sources the lake holds, found or not: a project whose name ends so
    (`hotfix-20261201`) is one of them, and keeps its partition once its sources are gone."""
    requests = []
    new = sorted(partitions - registered)
    if new:
        requests.append(sources_partitions.build_add_request(new))
    stale = [key for key in registered - partitions if _PER_SOURCE_KEY.match(key)]
    kept = landed({key.partition("-")[0] for key in stale}) if stale else set()
    stale = sorted(key for key in stale if key not in kept)
    if stale:
        requests.append(sources_partitions.build_delete_request(stale))
    return requests


def keys_after(registered: list[str], requests: list) -> list[str]:
    """The partitions in their order once `requests` are applied: Dagster keeps them in the order
    they were added, and a range run covers every key between its ends in that order."""
    deleted = {k for r in requests if isinstance(r, dg.DeleteDynamicPartitionsRequest) for k in r.partition_keys}
    added = [k for r in requests if isinstance(r, dg.AddDynamicPartitionsRequest) for k in r.partition_keys]
    return [k for k in registered if k not in deleted] + added
