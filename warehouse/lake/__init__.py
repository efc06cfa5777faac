"""Where the lake and the warehouse live, and how they are opened: the layout, config.toml, object storage, DuckDB and DuckLake, locks and scratch folders."""
