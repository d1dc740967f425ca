"""Reading files for analysis: training logs (MaxText), the run files ``diff`` accepts, and
jax.profiler captures (``capture``; XProf's own reading of one, ``xprof_view``).

The parts below (``analysis/`` above all) stay pure: they take lines, columns and records,
never paths. This package opens files (plain or gzip-compressed, any line endings), reads
them line by line, and hands what it read to ``analysis``.
"""
