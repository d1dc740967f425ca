"""Reports: pure renderers of records to text, plus the trace and plot writers."""
