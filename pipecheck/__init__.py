"""pipecheck: is a JAX training run held back by input, compute, or a forced host sync?"""

__version__ = "0.1.0"
