"""The server's state and what the routes call, over one storage: :class:`Store`.

Nothing here knows about HTTP (the routes validate input, call one method, and
answer its result) or about a database engine (everything goes through the
storage interface). The work is split by concern, each in its module:

- ``memories.py``: ``add_turn``, ``/memory/add``, recall, list, status, forget;
- ``transcript.py``: conversation turns;
- ``extraction_jobs.py``: background extraction;
- ``quota.py``: plans and their monthly counts;
- ``facts.py``: storing what an extractor found (shared by the above);
- ``users_data.py`` and ``hosted_memories.py``: the extension and official-client
  routes' reads and writes.

Every call is filtered by (tenant, user), so none reads or deletes another tenant's
or another end user's data.
"""

from __future__ import annotations

import logging
import threading

from memorysync_local._extraction.extractor import Extractor
from memorysync_local._recall.embedding import Embedder
from memorysync_local._recall.vectors import backfill_vectors
from memorysync_local._service.extraction_jobs import ExtractionJobs, JobRole
from memorysync_local._service.facts import FactWriter
from memorysync_local._service.memories import Memories
from memorysync_local._service.quota import Quota
from memorysync_local._service.transcript import Transcript
from memorysync_local._storage.target import open_storage
from memorysync_local._text.analyzer import load as load_analyzer

logger = logging.getLogger("memorysync.local")

# How long close() lets background extraction drain before leaving the rest stored.
DRAIN_SECONDS = 5.0


class Store:
    """The storage ``db`` (opened from ``target``: a path, ``:memory:`` or a URL), the
    extractor, the embedder and the background worker, with the operations on them.
    ``job_role`` says which stored extraction jobs this process works (``extraction_jobs``:
    ``"sole"`` unless ``serve --workers`` started it).

    ``facts``, ``memories``, ``transcript``, ``jobs`` and ``quota`` are its parts;
    the operations the routes call are theirs: ``add_turn``, ``add_memory``,
    ``search``, ``list_memories``, ``memory_status``, ``memory_count`` and ``forget``
    (memories), ``append_history``, ``list_history`` and ``delete_history``
    (transcript), ``over_limit``, ``usage`` and ``retry_after`` (quota).
    """

    def __init__(
        self,
        target: str,
        extractor: Extractor,
        *,
        async_extraction: bool = False,
        embedder: Embedder | None = None,
        job_role: JobRole = "sole",
    ) -> None:
        # Before any text is read (a re-index at start, the first write or recall):
        # loading it on the first recall made that recall wait about 0.6 s.
        load_analyzer()
        self.db = open_storage(target)
        self.facts = FactWriter(self.db, extractor, embedder)
        if embedder is not None:
            self._backfill_vectors(embedder)
        self.quota = Quota(self.db)
        self.jobs = ExtractionJobs(self.facts, job_role)
        self.memories = Memories(
            self.facts, self.quota, self.jobs, async_extraction=async_extraction
        )
        self.transcript = Transcript(
            self.facts, self.quota, self.jobs, async_extraction=async_extraction
        )
        self.async_extraction = async_extraction
        # The operations the routes call, each its part's own method.
        self.add_turn = self.memories.add_turn
        self.add_memory = self.memories.add_memory
        self.search = self.memories.search
        self.list_memories = self.memories.list_memories
        self.memory_status = self.memories.memory_status
        self.memory_count = self.memories.memory_count
        self.forget = self.memories.forget
        self.append_history = self.transcript.append_history
        self.list_history = self.transcript.list_history
        self.delete_history = self.transcript.delete_history
        self.over_limit = self.quota.over_limit
        self.usage = self.quota.usage
        self.retry_after = self.quota.retry_after
        # The background worker and the in-memory vector index (tests reach for them).
        self._jobs = self.jobs.runner
        self._vectors = self.memories.vectors
        self._closing = threading.Lock()
        self.jobs.resume()

    @property
    def extractor(self) -> Extractor:
        """Who decides the facts of a turn."""
        return self.facts.extractor

    @property
    def embedder(self) -> Embedder | None:
        """Recall by meaning when set (the default); word recall when None."""
        return self.facts.embedder

    def _backfill_vectors(self, embedder: Embedder) -> None:
        """Embed the memories stored without a vector (an upgrade, another model)."""
        try:
            done = backfill_vectors(self.db, embedder)
        except Exception as exc:  # start serving anyway: the rest is filled next start
            logger.warning("embedding stored memories stopped (%s); next start continues", exc)
            return
        if done:
            logger.info("embedded %d stored memories with %s", done, embedder.name)

    # --- lifecycle -------------------------------------------------------------

    def close(self, drain_timeout: float = DRAIN_SECONDS) -> None:
        """Let background extraction drain (at most ``drain_timeout`` s), then close the
        storage; jobs not done stay stored and resume at the next start. Idempotent."""
        with self._closing:
            if not self.db.closed:
                self.jobs.stop(drain_timeout)
                self.db.close()

    def wait_for_extraction(self, timeout: float | None = None) -> bool:
        """Block until no background extraction is stored or running; False on timeout."""
        return self.jobs.runner.wait_idle(timeout)

    def created_at(self) -> str:
        """When the database was created."""
        return self.db.created_at()
