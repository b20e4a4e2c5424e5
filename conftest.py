"""Root conftest: every package's tests get the shared test kit's fixtures.

``shared.leak_guard`` fails the test that leaks a socket, task or thread (not a later
one). ``shared.postgres`` starts a real PostgreSQL (pgvector included) for the tests that ask
for one. ``shared.secret_guard`` watches the whole session for the test API keys: a key in any
log record, failed-test report or observed repr/error fails the run.
"""

pytest_plugins = [
    "shared.fake_server",
    "shared.leak_guard",
    "shared.local_server",
    "shared.postgres",
    "shared.secret_guard",
    "shared.telemetry",
]
