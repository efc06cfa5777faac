import dagster as dg

# One partition per source store (slug keys such as `crush-webshop-1a2b3c4d`, never paths).
# Every provider's sources share it, so one sensor and one schedule treat them alike.
sources_partitions = dg.DynamicPartitionsDefinition(name="sources")
