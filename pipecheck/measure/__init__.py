"""Measurement: the timed loop, spans, compile watcher, sync locator, Grain pipeline, and the
synthetic, dataloader, real-data and Monitor runs built on them."""
