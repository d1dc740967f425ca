"""pipecheck: is a JAX training run held back by input, compute, or a forced host sync?"""

from typing import TYPE_CHECKING

__version__ = "0.1.0"

__all__ = ["Monitor", "__version__", "grain_options"]

if TYPE_CHECKING:  # pragma: no cover
    from pipecheck.monitor import Monitor
    from pipecheck.tuned_config import grain_options


def __getattr__(name: str) -> object:
    # lazy: ``import pipecheck`` (and every Grain worker that unpickles a pipecheck object)
    # stays cheap: Monitor pulls in the measuring modules, numpy and tabulate
    if name == "Monitor":
        from pipecheck.monitor import Monitor

        return Monitor
    if name == "grain_options":
        from pipecheck.tuned_config import grain_options

        return grain_options
    raise AttributeError(f"module 'pipecheck' has no attribute {name!r}")
