"""Background extraction (``async_extraction``): jobs stored with their turn, worked
by a background thread (``_extraction.runner.JobRunner``).

A job is written in the same write as the turn it comes from, so an acknowledged
turn's extraction survives ``kill -9``; a restart resumes the jobs left over.
"""

from __future__ import annotations

import logging
from dataclasses import asdict

from memorysync_local._extraction.runner import JobRunner
from memorysync_local._service.facts import FactContext, FactWriter
from memorysync_local._storage.interface import Session
from memorysync_local._timeutil import render, utc_now

logger = logging.getLogger("memorysync.local")


class ExtractionJobs:
    """The stored jobs and the thread that works them."""

    def __init__(self, facts: FactWriter) -> None:
        self._facts = facts
        self._storage = facts.storage
        self.runner = JobRunner(self.run_next)

    def resume(self) -> None:
        """Start working the jobs a previous run left stored, if any; on a database other
        processes share, also whenever any of them stores a job."""
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
        """Jobs were committed: make sure the worker looks."""
        self.runner.wake()

    def run_next(self) -> bool:
        """Do the oldest stored job; False when there is none.

        The extractor runs outside any transaction; its facts are inserted and the
        job deleted in one, so a crash in between redoes the job and never stores
        its facts twice.
        """
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
