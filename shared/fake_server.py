"""A scriptable fake MemorySync server on loopback (fault injection). Owned by the core work."""
