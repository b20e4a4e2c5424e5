"""Background extraction (``async_extraction``): jobs stored with their turn, worked
by a background thread (``_extraction.runner.JobRunner``).

A job is written in the same write as the turn it comes from, so an acknowledged
turn's extraction survives ``kill -9``; a restart resumes the jobs left over.

Which jobs a process works is its ``role`` (``serve --workers N`` gives each worker
process one):

- ``"sole"``: the jobs it stores, and at start those left over; on a backend that
  notifies (PostgreSQL), also any process's, as they are stored.
- ``"lead"``: as ``"sole"``; on a backend that cannot notify (a SQLite file), it also
  looks every ``POLL_SECONDS`` for jobs the other processes stored.
- ``"follower"``: on a backend that notifies, as ``"sole"``; on one that cannot, it only
  stores jobs and leaves them to the lead. SQLite's queue has no claims, so two
  processes working it would extract the same turn twice (an LLM extractor paid
  twice; the facts would still be stored once: finishing a job deletes it, and only
  the first to delete stores facts).
- ``"idle"``: works none (the parent of ``serve --workers``, which only opens the
  database to do the start-up work before its workers serve).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict
from typing import Literal

from memorysync_local._extraction.runner import JobRunner
from memorysync_local._service.facts import FactContext, FactWriter
from memorysync_local._storage.interface import Session
from memorysync_local._timeutil import render, utc_now

logger = logging.getLogger("memorysync.local")

JobRole = Literal["sole", "lead", "follower", "idle"]
# How often a lead process on SQLite looks for jobs the other processes stored.
POLL_SECONDS = 0.5


class ExtractionJobs:
    """The stored jobs and the thread that works them."""

    def __init__(self, facts: FactWriter, role: JobRole = "sole") -> None:
        self._facts = facts
        self._storage = facts.storage
        self.runner = JobRunner(self.run_next)
        notifies = self._storage.features.job_notifications
        self._works = role in ("sole", "lead") or (role == "follower" and notifies)
        self._polls = role == "lead" and not notifies
        self._stopping = threading.Event()

    def resume(self) -> None:
        """Start working the jobs a previous run left stored, if any; on a database other
        processes share, also whenever any of them stores a job (its role allowing)."""
        if not self._works:
            return
        if self._polls:
            threading.Thread(target=self._poll, name="memorysync-jobs-poll", daemon=True).start()
        with self._storage.read() as session:
            left = session.jobs.count()
        if left:
            # Turns acknowledged before the last stop (or crash) whose facts are not in.
            logger.info("resuming %d stored extraction job(s)", left)
            self.runner.wake()
        if self._storage.features.job_notifications:
            # PostgreSQL: every process works the one queue, and takes over the jobs of
            # a process that died holding them.
            self._storage.watch_jobs(self.runner.wake)

    @staticmethod
    def store(session: Session, text: str, ctx: FactContext) -> None:
        """Store a job in the caller's write: it commits with the turn it comes from,
        or not at all. Call :meth:`wake` after the commit."""
        session.jobs.add(text, asdict(ctx), render(utc_now()))

    def wake(self) -> None:
        """Jobs were committed: make sure the worker looks (a follower on SQLite leaves
        them to the lead, which finds them within ``POLL_SECONDS``)."""
        if self._works:
            self.runner.wake()

    def stop(self, drain_timeout: float) -> None:
        """Stop looking for other processes' jobs, then let the worker drain (at most
        ``drain_timeout`` s) and stop; jobs not done stay stored."""
        self._stopping.set()
        self.runner.stop(drain_timeout)

    def _poll(self) -> None:
        """The lead on SQLite: wake the worker whenever any job is stored."""
        while not self._stopping.wait(POLL_SECONDS):
            try:
                with self._storage.read() as session:
                    waiting = session.jobs.count()
            except Exception as exc:  # closed, busy: the next look tries again
                logger.debug("looking for stored extraction jobs failed (%s)", exc)
                continue
            if waiting:
                self.runner.wake()

    def run_next(self) -> bool:
        """Do the oldest stored job; False when there is none.

        The extractor runs outside any transaction; its facts are inserted and the
        job deleted in one, so a crash in between redoes the job and never stores
        its facts twice.
        """
        with self._storage.read() as session:
            # Looked for in a read first: an empty queue takes no write lock (the worker
            # looks once more after every job), so other processes' writes never wait
            # on it.
            if not session.jobs.count():
                return False
        with self._storage.write() as session:
            job = session.jobs.claim_next()
        if job is None:
            return False
        ctx = FactContext(**job.context)
        with self._storage.read() as session:
            related = self._facts.related(session, ctx, job.text)
        extraction = self._facts.extract(job.text, related)
        with self._facts.write() as session:
            if session.jobs.finish(job.id):
                # A turn deleted meanwhile (with its facts) gets none afterwards.
                turn_gone = ctx.history_id is not None and not session.transcript.exists(
                    ctx.history_id
                )
                if not turn_gone:
                    self._facts.apply(session, extraction, ctx)
        return True
