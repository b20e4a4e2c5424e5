"""Timing helpers and the result records every benchmark returns."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field


def now() -> float:
    """A monotonic clock in seconds (``perf_counter``)."""
    return time.perf_counter()


def percentile(samples: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0..100) of ``samples``."""
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


@dataclass(frozen=True)
class Stat:
    """Median and p99 (and max) of one series of samples, in milliseconds."""

    name: str
    samples_ms: tuple[float, ...]

    @property
    def p50(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p99(self) -> float:
        return percentile(self.samples_ms, 99)

    @property
    def max(self) -> float:
        return max(self.samples_ms)

    @property
    def n(self) -> int:
        return len(self.samples_ms)


def stat(name: str, seconds: Sequence[float]) -> Stat:
    """A :class:`Stat` from samples in seconds."""
    return Stat(name, tuple(s * 1000 for s in seconds))


@dataclass
class Row:
    """One line of a results table."""

    figure: str
    ours: str
    baseline: str
    ratio: str
    goal: str
    passed: bool | None  # None: no goal, reported honestly either way


@dataclass
class Section:
    """The results of one numbered item of the issue."""

    title: str
    setup: str
    rows: list[Row] = field(default_factory=list)
    stats: list[Stat] = field(default_factory=list)  # every series, for the tables and chart
    notes: list[str] = field(default_factory=list)
    markdown: str = ""  # a section may bring its own markdown (the server's benchmark)


def ms(value: float) -> str:
    """Milliseconds with a sensible number of digits."""
    if value >= 100:
        return f"{value:.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms"


def p50_p99(s: Stat) -> str:
    """``"p50 / p99"`` of a series."""
    return f"{ms(s.p50)} / {ms(s.p99)}"


def ratio(ours: float, baseline: float) -> str:
    """``ours / baseline`` as ``"1.07×"``."""
    return f"{ours / baseline:.2f}×" if baseline > 0 else "n/a"


def against_bare(figure: str, ours: Stat, bare: Stat, goal: float = 1.15) -> Row:
    """A hot path against the bare recall POST: p50 and p99 ratios, goal ``goal``× at p50."""
    return Row(
        figure,
        p50_p99(ours),
        p50_p99(bare),
        f"{ratio(ours.p50, bare.p50)} (p50), {ratio(ours.p99, bare.p99)} (p99)",
        f"≤ {goal}× at p50",
        ours.p50 / bare.p50 <= goal,
    )
