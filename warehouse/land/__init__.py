"""Landing a source's rows: the one owner of a source's state, the ingest, the landing files, and retention."""
