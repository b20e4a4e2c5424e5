"""What the memory and the transcript operations are built on."""

from __future__ import annotations

from memorysync_local._service.extraction_jobs import ExtractionJobs
from memorysync_local._service.facts import FactWriter
from memorysync_local._service.quota import Quota


class Operations:
    """Writes over one storage: its fact writer, the quota, the extraction jobs."""

    def __init__(
        self,
        facts: FactWriter,
        quota: Quota,
        jobs: ExtractionJobs,
        *,
        async_extraction: bool,
    ) -> None:
        self._facts = facts
        self._storage = facts.storage
        self._quota = quota
        self._jobs = jobs
        self.async_extraction = async_extraction
        self._prepare()

    def _prepare(self) -> None:
        """Set up what a kind of operations keeps beside these (none by default)."""
