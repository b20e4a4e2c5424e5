"""Benchmarks of the MemorySync adapters against their peers' patterns (``python -m bench``).

Every figure is measured in one run against ``memorysync-local`` served by uvicorn on
loopback; ``bench/results.md`` and ``bench/latency.png`` are written at the end.
"""
