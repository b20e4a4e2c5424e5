"""A bound on reading a request's headers, as the guard bounds its body.

uvicorn reads a request's head with no deadline: a client that sends one header line
every few seconds holds a connection (and its memory) for as long as it likes, and
one that connects and sends nothing holds it forever. The app cannot help, since it
is called once the head is complete. This protocol (uvicorn's h11 one, with a timer)
gives a request ``header_timeout`` seconds from its first byte to complete its head;
past that the server answers 408 and closes the connection. A new connection that
sends nothing is closed silently after the same time or uvicorn's keep-alive timeout
(5 s), whichever is longer: an idle connection is treated as an idle keep-alive one.

``serve`` and :func:`memorysync_local.serve_in_thread` use it, with the app's body
timeout (``create_app(body_timeout=...)``, 10 s by default).
"""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from memorysync_local._http.guard import BODY_TIMEOUT_SECONDS


class _HeaderTimeoutProtocol(H11Protocol):
    header_timeout: float = BODY_TIMEOUT_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_started = False
        self._head_timed = False  # the timer runs from the head's first byte
        super().connection_made(transport)
        self._arm(max(self.header_timeout, float(self.timeout_keep_alive)))

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            # A head is (partly) here and not complete: its clock runs from its first byte.
            self._head_started = self._head_started or bool(data.strip())
            if self._head_started and not self._head_timed:
                self._arm(self.header_timeout)
                self._head_timed = True
        else:
            self._disarm()
            self._head_started = self._head_timed = False

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(seconds, self._head_timed_out)

    def _disarm(self) -> None:
        timer, self._head_timer = getattr(self, "_head_timer", None), None
        if timer is not None:
            timer.cancel()

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return  # the head completed meanwhile: the guard times the body
        if self.conn.our_state is h11.IDLE:
            if self._head_started:
                self.transport.write(_timed_out(self.header_timeout))
            self.transport.close()


def _timed_out(timeout: float) -> bytes:
    body = json.dumps(
        {"detail": f"headers: the request's headers did not arrive within {timeout:g} seconds"}
    ).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def header_timeout_protocol(timeout: float = BODY_TIMEOUT_SECONDS) -> type[H11Protocol]:
    """uvicorn's ``http`` protocol class with a ``timeout``-second bound on each head."""
    if not timeout > 0:
        raise ValueError(f"the header timeout must be positive, got {timeout!r}")
    return type("HeaderTimeoutProtocol", (_HeaderTimeoutProtocol,), {"header_timeout": timeout})
