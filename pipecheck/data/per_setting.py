"""A pipeline that sets Grain's knobs itself and is built again for each setting.

Some frameworks build their whole Grain pipeline from their own config, worker processes
(``mp_prefetch``) and read options included: MaxText's ``grain_worker_count``,
``grain_per_worker_buffer_size``, ``grain_num_threads`` and ``grain_prefetch_buffer_size``.
pipecheck cannot add its own workers to such a pipeline; instead it asks the framework to build
the pipeline at the setting being measured (``PerSetting.at``), and measures what the
framework built, exactly as it would train on it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Iterator

from pipecheck.records.grain_settings import GrainSettings
from pipecheck.step_types import Batch

if TYPE_CHECKING:  # Grain is imported where used: `import pipecheck` stays light
    import grain


@dataclasses.dataclass(frozen=True)
class PerSetting:
    """A pipeline built by its owner at each Grain setting.

    ``build(settings)`` returns the Grain IterDataset the owner trains on with ``settings``
    (its own read options and ``mp_prefetch``, which therefore match ``settings``); ``name``
    says whose pipeline it is, for messages."""

    build: Callable[[GrainSettings], grain.IterDataset]
    name: str

    def at(self, settings: GrainSettings) -> grain.IterDataset:
        """The pipeline as its owner builds it for ``settings``."""
        return self.build(settings)

    def __iter__(self) -> Iterator[Batch]:
        return iter(self.at(GrainSettings(workers=0, threads=0)))


def at_setting(dataset: object, settings: GrainSettings) -> object:
    """``dataset`` as it runs at ``settings``: a :class:`PerSetting` is built for it, any
    other pipeline is returned as it is (pipecheck applies the setting to it)."""
    return dataset.at(settings) if isinstance(dataset, PerSetting) else dataset
