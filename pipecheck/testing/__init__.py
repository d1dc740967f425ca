"""Tools for tests and benchmarks that users can run too: ``slow_mount`` serves a directory
through a real FUSE mount that is slow like remote storage (a network filesystem, gcsfuse
without its cache).

Nothing is imported here: ``python -m pipecheck.testing.slow_mount`` runs that module as
the server's program, and the FUSE binding is imported only in the server's process.
"""
