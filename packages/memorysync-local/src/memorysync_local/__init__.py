"""memorysync-local: a MemorySync-compatible server on SQLite, embedded or on loopback.

It answers the MemorySync HTTP API (add_turn, recall, query, list, forget, add,
status, history) over one SQLite file, with deterministic fact extraction and
recall by word forms fused with recall by meaning (on by default), so that the
adapters and the official client run offline. How recall scores memories is in
the local-server page of the documentation.

Embedded (no socket):

```python
from memorysync_local import embedded

srv = embedded()            # ":memory:" database, key "ms_local_dev_key"
# MemorySyncAPI(api_key=srv.api_key, base_url=srv.base_url, transport=srv.transport)
srv.close()
```

Served:

```bash
memorysync-local serve --db ./memorysync.db --port 8765 --api-key ms_dev
```
"""

from memorysync_local._embedded import EMBEDDED_BASE_URL, EmbeddedServer, embedded
from memorysync_local._extraction.extractor import (
    ExplicitExtractor,
    Extraction,
    Extractor,
    ExtractorFeatures,
    ExtractorSetting,
    Fact,
    RelatedMemory,
    Retraction,
    TextOnlyExtractor,
)
from memorysync_local._extraction.rules import RuleBasedExtractor
from memorysync_local._http.app import DEV_API_KEY, create_app
from memorysync_local._plans import Plan
from memorysync_local._served import ServedServer, serve_in_thread
from memorysync_local._version import __version__

__all__ = [
    "DEV_API_KEY",
    "EMBEDDED_BASE_URL",
    "EmbeddedServer",
    "ExplicitExtractor",
    "Extraction",
    "Extractor",
    "ExtractorFeatures",
    "ExtractorSetting",
    "Fact",
    "Plan",
    "RelatedMemory",
    "Retraction",
    "RuleBasedExtractor",
    "ServedServer",
    "TextOnlyExtractor",
    "__version__",
    "create_app",
    "embedded",
    "serve_in_thread",
]
