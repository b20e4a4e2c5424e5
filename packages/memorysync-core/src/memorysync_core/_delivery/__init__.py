"""Captured turns and their delivery: seeds, the ordered queue, the on-disk outbox."""
