"""The catalog: the merge of landing files into the curated tables, the marts, and the checks."""
