"""The server's operations, between the HTTP layer and the storage interface.

:class:`~memorysync_local._service.store.Store` holds them, split by concern:
memories, transcript, extraction jobs, quota, facts; plus the users'-data and
official-client reads and writes, and the answer shapes (:mod:`.answers`).
"""
