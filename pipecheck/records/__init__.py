"""Every result record (frozen, versioned, JSON round-trip) and the file store."""
