"""The log wing: MaxText training logs read into steps, events and wall time."""
