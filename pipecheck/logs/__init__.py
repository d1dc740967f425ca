"""Reading files for analysis: training logs (MaxText) and the run files ``diff`` accepts.

The parts below (``analysis/`` above all) stay pure: they take lines, columns and records,
never paths. This package opens files (plain or gzip-compressed, any line endings), reads
them line by line, and hands what it read to ``analysis``.
"""
