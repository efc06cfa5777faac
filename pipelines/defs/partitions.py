import dagster as dg

# One partition per agent and project (slug keys such as `codex-webshop`, never paths), holding
# that project's sources on this machine (Source.dagster_partition). Every provider shares it,
# so one sensor and one schedule treat them alike.
sources_partitions = dg.DynamicPartitionsDefinition(name="sources")


def partition_changes(registered: set[str], partitions: set[str], found: dict) -> list:
    """Add the new partitions; delete a source's own key left by a version with a partition per source."""
    requests = []
    new = sorted(partitions - registered)
    if new:
        requests.append(sources_partitions.build_add_request(new))
    stale = sorted((registered & set(found)) - partitions)
    if stale:
        requests.append(sources_partitions.build_delete_request(stale))
    return requests
