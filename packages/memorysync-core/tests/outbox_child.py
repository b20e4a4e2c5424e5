"""A process that captures turns into an outbox, or delivers what one holds (test helper).

``MODE=capture``: queue ``COUNT`` user turns ("Turn <n> of <SESSION>.") in ``SESSION``,
print ``captured`` and wait to be killed. ``MODE=deliver``: flush (which first takes
over what dead processes left in the outbox), print the report as JSON and exit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os

from memorysync_core import AdapterSettings
from memorysync_core.adapters import AdapterKit


async def main() -> None:
    settings = AdapterSettings.build(
        surface="outbox-test",
        user_id="alice",
        api_key=os.environ["KEY"],
        base_url=os.environ["URL"],
        tenant_id="local",
        outbox=os.environ["OUTBOX"],
        session_id=os.environ.get("SESSION", "s"),
    )
    kit = AdapterKit(settings)
    if os.environ["MODE"] == "capture":
        memory = kit.home
        for n in range(int(os.environ["COUNT"])):
            kit.submit([memory.capture("user", f"Turn {n} of {memory.session_id}.")])
        print("captured", flush=True)
        await asyncio.sleep(3600)  # delivering in vain until killed
    report = await kit.flush(timeout=60)
    print(json.dumps(dataclasses.asdict(report)), flush=True)
    await kit.aclose()


asyncio.run(main())
