"""Item 11: what the OpenTelemetry instrumentation costs the hot path (issue 16).

The hot path is ``UserMemory.recall`` (what every adapter's recall runs) against
``memorysync-local`` embedded in the process, so the server's cost is the same in every
series. Three ways to run the same code:

- ``off``: the instrumentation turned off (``MEMORYSYNC_TELEMETRY=off``), as if compiled out;
- ``api``: ``opentelemetry-api`` installed and no SDK configured (the default for an
  application that does not trace);
- ``sdk``: the SDK recording every span to memory (an application that traces).

Samples are paired: each round times ``off`` and the other series back to back, in an order
that alternates, so drift on a shared machine hits both. The figure is the median of the
paired differences with its 95% bootstrap confidence interval. Timing the same code twice
the same way (off vs off) measures the noise floor, ordering effects included; "no
difference distinguishable from noise" means the API-only interval overlaps the noise
floor's (a conservative test: the figures themselves are in the table). ``api`` is
measured first: OpenTelemetry allows one global SDK per process, so once it is installed
there is no going back.

Run it alone with ``python -m bench.telemetry [--quick]``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import random
import statistics
import sys

import httpx

import memorysync_local
from memorysync_core import MemorySyncAPI, UserMemory
from memorysync_core import _telemetry as telemetry

from ._server import FACTS, PROMPT, USER, print_item
from ._stats import Row, Section, now, p50_p99, stat


async def _seed(server: memorysync_local.EmbeddedServer) -> None:
    headers = {"X-API-Key": server.api_key, "X-End-User-ID": USER}
    async with httpx.AsyncClient(
        transport=server.transport, base_url=server.base_url, headers=headers
    ) as client:
        for fact in FACTS:
            (
                await client.post("/memory/add", json={"text": fact, "source": "bench"})
            ).raise_for_status()


async def _timed(memory: UserMemory, enabled: bool) -> float:
    telemetry.set_enabled(enabled)
    started = now()
    result = await memory.recall(PROMPT)
    elapsed = now() - started
    assert result, "the benchmark user has memories to recall"
    return elapsed


async def _paired(
    memory: UserMemory, rounds: int, *, second: bool = True
) -> tuple[list[float], list[float]]:
    """``rounds`` pairs of (off, ``second``) samples, the order alternating each round.

    ``second=False`` times the same code twice: the noise floor of the comparison.
    """
    off: list[float] = []
    on: list[float] = []
    for turn in range(rounds):
        if turn % 2:
            on.append(await _timed(memory, second))
            off.append(await _timed(memory, False))
        else:
            off.append(await _timed(memory, False))
            on.append(await _timed(memory, second))
    return off, on


def _install_sdk() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)


async def _measure(rounds: int) -> dict[str, tuple[list[float], list[float]]]:
    with memorysync_local.embedded() as server:
        await _seed(server)
        api = MemorySyncAPI(server.api_key, base_url=server.base_url, transport=server.transport)
        memory = UserMemory(api, user_id=USER, session_id="bench-otel", surface="autogen")
        await _paired(memory, 50)  # warm-up: connection, tenant, caches
        results = {
            "same": await _paired(memory, rounds, second=False),
            "api": await _paired(memory, rounds),
        }
        _install_sdk()
        await _paired(memory, 50)
        results["sdk"] = await _paired(memory, rounds)
        await memory.aclose()
    telemetry.set_enabled(True)
    return results


def _difference(off: list[float], on: list[float]) -> tuple[float, float, float]:
    """Median paired difference (ms) and its 95% bootstrap confidence interval.

    The median, not the mean: a shared machine's pauses land on single samples and would
    swamp a mean. The interval comes from 2,000 resamples of the pairs (fixed seed).
    """
    deltas = [(b - a) * 1000 for a, b in zip(off, on, strict=True)]
    picks = random.Random(11)
    medians = sorted(statistics.median(picks.choices(deltas, k=len(deltas))) for _ in range(2000))
    return statistics.median(deltas), medians[50], medians[1949]


def run(*, quick: bool) -> list[Section]:
    """Item 11, on its own embedded server."""
    if importlib.util.find_spec("opentelemetry") is None:
        raise SystemExit("item 11 needs opentelemetry-api installed")
    rounds = 300 if quick else 2000
    results = asyncio.run(_measure(rounds))
    rows: list[Row] = []
    stats = []
    floor = _difference(*results["same"])  # two identical runs: what noise alone gives
    modes = (("same", "off again"), ("api", "API, no SDK"), ("sdk", "SDK recording"))
    for mode, label in modes:
        off, on = results[mode]
        median, low, high = _difference(off, on)
        series_off = stat(f"recall, instrumentation off (paired with {label})", off)
        series_on = stat(f"recall, {label}", on)
        stats += [series_on, series_off]
        figure = f"{median * 1000:+.1f} µs [{low * 1000:+.1f}, {high * 1000:+.1f}]"
        if mode == "same":
            rows.append(
                Row(
                    "recall, instrumentation off vs off (the noise floor)",
                    p50_p99(series_on),
                    p50_p99(series_off),
                    figure,
                    "reported",
                    None,
                )
            )
        elif mode == "api":
            # Indistinguishable when the two 95% intervals overlap (conservative).
            within = low <= floor[2] and floor[1] <= high
            rows.append(
                Row(
                    f"recall with telemetry ({label}) vs off",
                    p50_p99(series_on),
                    p50_p99(series_off),
                    figure,
                    "interval overlaps the noise floor's",
                    within,
                )
            )
        else:
            rows.append(
                Row(
                    f"recall with telemetry ({label}) vs off",
                    p50_p99(series_on),
                    p50_p99(series_off),
                    figure,
                    "reported",
                    None,
                )
            )
    return [
        Section(
            title="11. OpenTelemetry instrumentation on the hot path",
            setup=(
                f"{rounds} paired rounds per comparison: `UserMemory.recall` against "
                "`memorysync-local` embedded in the process, timed with the "
                "instrumentation off and on back to back (alternating order). The ratio "
                "column is the median paired difference with its 95% bootstrap confidence "
                "interval. The noise floor times the same code twice the same way; the goal "
                "holds when the API-only interval overlaps the noise floor's."
            ),
            rows=rows,
            stats=stats,
        )
    ]


def main(argv: list[str] | None = None) -> int:
    """Print this item's rows; exit status 1 when one misses its goal."""
    return print_item("python -m bench.telemetry", __doc__, lambda quick: run(quick=quick), argv)


if __name__ == "__main__":
    sys.exit(main())
