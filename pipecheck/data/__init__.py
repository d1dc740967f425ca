"""Data for the built-in workloads: the demo text corpus (a tfds builder), the byte-level
tokenizer, and the sources a user can name instead (``tfds:NAME``, an ArrayRecord path)."""
