"""A user's ``grain.DataLoader`` (data source + sampler + operations) measured at the
settings pipecheck chooses.

A DataLoader fixes its worker count when it is built, so pipecheck builds the same loader
again (same data source, sampler, operations and shard options) with the worker count, read
threads and per-worker buffer of the setting being measured, and iterates the IterDataset
that the DataLoader itself iterates (``DataLoader._dataset``; its ``__iter__`` only wraps
it). The DataLoader's own multiprocessing runs the workers.

Grain's stage timing does not follow the DataLoader's internal wrappers (its execution
summary stays empty), so DataLoader pipelines get no per-stage breakdown.

Reads the loader's private attributes (checked with grain 0.2.18).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pipecheck.errors import ConfigError
from pipecheck.records.grain_settings import GrainSettings

if TYPE_CHECKING:  # pragma: no cover
    import grain


def is_data_loader(dataset: object) -> bool:
    """Is this a ``grain.DataLoader`` (without importing Grain for other objects)?"""
    grain = sys.modules.get("grain")
    loader_type = getattr(grain, "DataLoader", None)
    return isinstance(loader_type, type) and isinstance(dataset, loader_type)


def with_settings(loader: grain.DataLoader, settings: GrainSettings) -> grain.IterDataset:
    """The IterDataset of ``loader`` rebuilt with ``settings``."""
    # lazy: Grain imported where used, so `import pipecheck` stays light
    import grain

    try:
        parts = {"data_source": loader._data_source, "sampler": loader._sampler,
                 "operations": list(loader._operations),
                 "shard_options": loader._shard_options}
    except AttributeError as e:  # pragma: no cover - a Grain version with other internals

        raise ConfigError(f"cannot set the worker count of this grain.DataLoader ({e}); "
                          "return a grain.MapDataset or IterDataset from workload.dataset "
                          "instead") from None
    rebuilt = grain.DataLoader(
        **parts,
        worker_count=settings.workers,
        worker_buffer_size=settings.per_worker_buffer,
        read_options=settings.options()[1],
    )
    return rebuilt._dataset
