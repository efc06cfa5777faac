"""Seeded generators of every agent's real store format, for the demo, the tests and the
benchmarks. They write what the agents write; nothing here reads a real store (the extractors
are in transforms/<agent>/)."""
