"""An end user's erase request, handled end to end, offline on the embedded memorysync-local.

1. The user talks to an AutoGen agent in two sessions (what they said is stored, and
   the facts in it are extracted).
2. "What do you remember about me?": the user's memories and sessions are listed.
3. "Give me my data": ``export()`` writes every fact and transcript turn to a JSON file.
4. "Delete everything about me": ``forget_user()`` erases every fact and turn in every
   session (and cancels extraction still pending), then a second ``export()`` proves
   that nothing is left. The script exits non-zero if anything is.

Run it with ``python examples/erase_request.py``. No network, no model: only the
adapter's memory calls are used.

Needs: ``pip install autogen-agentchat autogen-memorysync memorysync-local``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

import memorysync_local
from autogen_memorysync import MemorySyncMemory

USER = "alice@example.com"
CONVERSATIONS = (
    ("monday", "I live in Porto and I am allergic to peanuts.", "Noted, no peanuts."),
    ("friday", "I work as a nurse.", "Thanks for telling me."),
)


async def main(folder: Path) -> int:
    server = memorysync_local.embedded(str(folder / "memorysync.db"))
    connection = {"api_key": server.api_key, "base_url": server.base_url,
                  "transport": server.transport}  # fmt: skip
    try:
        print("=== The user talks to the agent")
        for session, said, answered in CONVERSATIONS:
            memory = MemorySyncMemory(user_id=USER, session_id=session, **connection)
            await memory.add_turn_pair(said, answered)
            await memory.close()
            print(f"{session}: {said!r}")

        # The request arrives: any session of the user will do to answer it.
        memory = MemorySyncMemory(user_id=USER, session_id="privacy-desk", **connection)
        try:
            print("=== What do you remember about me?")
            page = await memory.list_memories(limit=50)
            for item in page.items:
                print(f"- {item['text']}")
            for session in await memory.list_sessions():
                print(f"session {session['session_id']}: {session['turns']} turns")

            print("=== Give me my data")
            export = await memory.export()
            receipt = folder / "alice-export.json"
            receipt.write_text(json.dumps(export, indent=2), encoding="utf-8")
            turns = sum(len(t) for t in export["transcripts"].values())
            memories, sessions = len(export["memories"]), len(export["sessions"])
            print(f"exported {memories} memories and {turns} turns from {sessions} sessions "
                  f"(complete: {export['complete']})")  # fmt: skip

            print("=== Delete everything about me")
            report = await memory.forget_user()
            print(f"erased {report.deleted_memories} memories and {report.deleted_turns} turns "
                  f"in {len(report.sessions)} sessions (complete: {report.complete})")  # fmt: skip
            after = await memory.export()
            left = len(after["memories"]) + sum(len(t) for t in after["transcripts"].values())
            print(f"left after the erase: {left}")
        finally:
            await memory.close()
    finally:
        server.close()
    if left or not report.complete:
        print("the erase did not complete", file=sys.stderr)
        return 1
    print("erase request done: nothing about the user is stored")
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        sys.exit(asyncio.run(main(Path(tmp))))
