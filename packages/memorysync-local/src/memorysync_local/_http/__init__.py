"""The HTTP layer: the FastAPI app (:mod:`.app`), its guard and error answers, the
request models, the routes' dependencies (:mod:`.dependencies`: the one key check and
its one 401 answer, the app's store) and three module-level routers: the MemorySync
contract (:mod:`.contract_routes`), the official client's ``/memory/...`` routes
(:mod:`.official_client_routes`) and the ``/x-local`` extension with the web
inspector (:mod:`.extension_routes`). Routes call ``_service.store.Store``; none
touches a database engine.
"""
