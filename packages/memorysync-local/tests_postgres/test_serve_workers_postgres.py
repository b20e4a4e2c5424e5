"""``memorysync-local serve --workers 2`` on PostgreSQL: every worker works the queue.

On PostgreSQL a job is claimed in the database and every process is notified of new
ones, so each worker extracts (not only the lead, as on SQLite); what one worker
stores, the other recalls.
"""

from __future__ import annotations

import pytest

from shared.served_workers import ServedWorkers, facts_once_extracted, keep, recall

pytestmark = pytest.mark.timeout(300)


def test_two_workers_on_postgresql_share_the_data_and_the_extraction(postgres_url: str) -> None:
    served = ServedWorkers(postgres_url, "--async-extraction")
    try:
        first, second = served.workers
        facts = ["Allergic to peanuts"]
        with served.only(first) as client:
            keep(client, "eve", "I am allergic to peanuts.")
            assert facts_once_extracted(client, "eve", 1) == facts
        with served.only(second) as client:
            # The other worker is stopped: this one works the job it stored.
            keep(client, "eve", "I live in Porto.")
            assert facts_once_extracted(client, "eve", 2) == [*facts, "Lives in Porto"]
        with served.only(first) as client:
            assert recall(client, "eve", "Porto") == ["Lives in Porto"]
    finally:
        status, err = served.stop()
    assert status == 0, err
