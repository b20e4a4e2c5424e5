"""``forget_user()`` cancels the user's pending extraction: no fact reappears after it.

The extractor is held on the background thread (a gate the test opens), so turns are
acknowledged with their extraction still stored as jobs when the erase runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from memorysync_core import MemorySyncAPI, UserMemory
from memorysync_local._extraction.extractor import Extraction
from memorysync_local._extraction.rules import RuleBasedExtractor


class GatedExtractor:
    """The rule-based extractor, held on the background thread until ``gate`` opens."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.inner = RuleBasedExtractor()

    def extract(self, text: str, *, explicit: bool = False) -> Extraction:
        if threading.current_thread().name == "memorysync-extract":
            self.gate.wait(30)
        return self.inner.extract(text, explicit=explicit)


async def test_pending_jobs_are_cancelled_and_their_facts_never_land(
    make_local_server: Callable[..., Any],
) -> None:
    extractor = GatedExtractor()
    srv = make_local_server(async_extraction=True, extractor=extractor)
    api = MemorySyncAPI(base_url=srv.base_url, api_key=srv.api_key, transport=srv.transport)
    memory = UserMemory(api, user_id="ana", session_id="s1", surface="autogen")
    other = UserMemory(api, user_id="bo", session_id="s1", surface="autogen")
    try:
        # A transcript turn (its job names the turn) and a bare add_turn (its job does
        # not: only the cancellation keeps its fact from landing after the erase).
        await memory.record_exchange("I live in Porto.", "Noted.")
        await memory.add_user_turn("I am allergic to peanuts.")
        await other.record_exchange("I work as a nurse.", "Noted.")
        assert (await memory.export())["memories"] == []  # still pending

        report = await memory.forget_user()
        # One job may already be in the worker's hands: it is cancelled all the same.
        assert report.cancelled_jobs is not None
        assert report.cancelled_jobs >= 1
        assert report.deleted_turns == 2
        assert report.complete

        extractor.gate.set()
        assert srv.store.wait_for_extraction(30)
        after = await memory.export()
        assert after["memories"] == []
        assert after["transcripts"] == {}
        # Another user's pending extraction was left alone.
        assert [m["text"] for m in (await other.export())["memories"]] == ["Works as a nurse"]
    finally:
        extractor.gate.set()
        await memory.aclose()
        await other.aclose()
