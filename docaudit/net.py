"""HTTP requests with one deadline rule, shared by the OpenAI-compatible client and the book fetcher (httpx).

A request's ``timeout`` bounds the whole of it: connecting, sending, the status line, headers and body, however
slowly the server sends them (httpx's own timeouts bound each phase or each read, so a server trickling one byte a
second is never abandoned by them alone). Each socket operation waits at most until the request's deadline, and an
answer longer than ``max_bytes`` is refused. Only the host name's lookup is outside the deadline (the system
resolver's own timeouts bound it). The body is read raw and decoded here, at most ``max_bytes`` of it held at
any time: one ``gzip`` or ``deflate`` encoding is inflated a bounded piece at a time, and nested (``gzip, gzip``)
or unknown encodings are refused (a few KB on the wire must never become GBs in memory). A request may be
``cancelled`` (a :class:`threading.Event`) by another thread: it then stops within ``POLL_SECONDS``. A proxy is
used only when the caller names one (the fetcher passes the one the environment names for its mirror, as urllib
did); the OpenAI-compatible client uses none."""

from __future__ import annotations

import contextvars
import math
import threading
import time
import zlib
from dataclasses import dataclass

import httpcore
import httpx

# the current request's deadline (time.monotonic()) and the event that cancels it
_DEADLINE: contextvars.ContextVar[tuple[float, threading.Event | None] | None] = contextvars.ContextVar(
    "docaudit_deadline", default=None
)

MAX_ANSWER_BYTES = 1 << 28  # a JSON answer or a book longer than this is refused
POLL_SECONDS = 0.1  # how often a waiting read looks whether its request was cancelled
INFLATE_STEP = 1 << 20  # bytes inflated at a time from a compressed answer
# wbits of zlib for the one content encoding accepted (gzip: header and trailer; deflate: zlib's, or raw with -15)
_ENCODINGS = {"gzip": 31, "x-gzip": 31, "deflate": 15}


class Timeout(Exception):
    """The request's deadline passed."""


class Unacceptable(Exception):
    """The answer cannot be accepted as sent (too long, or in an encoding that is not read)."""


class TooLarge(Unacceptable):
    """The answer is longer than allowed."""


class Cancelled(Exception):
    """Another thread cancelled the request."""


def _left(timeout: float | None) -> float | None:
    """The time a socket operation may wait: its phase's ``timeout``, at most what is left before the deadline."""
    current = _DEADLINE.get()
    if current is None:
        return timeout
    deadline, cancelled = current
    if cancelled is not None and cancelled.is_set():
        raise httpcore.ReadError("the request was cancelled")
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write waits at most until the current request's deadline."""

    def __init__(self, stream: httpcore.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Wait in steps of ``POLL_SECONDS``, so that a cancelled request stops waiting (a read that times out
        has consumed nothing)."""
        while True:
            wait = _left(timeout)
            step = wait if wait is not None and wait <= POLL_SECONDS else POLL_SECONDS
            try:
                return self._stream.read(max_bytes, step)
            except httpcore.ReadTimeout:
                if wait is not None and wait <= POLL_SECONDS:
                    raise
                if timeout is not None:
                    timeout -= step

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, _left(timeout)))

    def get_extra_info(self, info: str):
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's synchronous sockets, bounded by the current request's deadline."""

    def __init__(self):
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        stream = self._backend.connect_tcp(host, port, _left(timeout), local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return _DeadlineStream(self._backend.connect_unix_socket(path, _left(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _Transport(httpx.HTTPTransport):
    """httpx's transport over :class:`_DeadlineBackend` (httpx has no parameter for the network backend, so its
    connection pool is made here with the same settings), through an HTTP(S) ``proxy`` when given."""

    def __init__(self, limits: httpx.Limits, proxy: str | None = None):
        super().__init__(limits=limits)
        common = {
            "ssl_context": httpx.create_ssl_context(),
            "max_connections": limits.max_connections,
            "max_keepalive_connections": limits.max_keepalive_connections,
            "keepalive_expiry": limits.keepalive_expiry,
            "network_backend": _DeadlineBackend(),
        }
        if proxy is None:
            self._pool = httpcore.ConnectionPool(**common)
        else:
            self._pool = httpcore.HTTPProxy(proxy_url=proxy, **common)


def client(
    connections: int = 10, follow_redirects: bool = False, headers: dict | None = None, proxy: str | None = None
) -> httpx.Client:
    """A pooled client (up to ``connections`` at once, through the HTTP(S) ``proxy`` when given) whose requests go
    through :func:`request`."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.Client(
        transport=_Transport(limits, proxy),
        follow_redirects=follow_redirects,
        trust_env=False,
        headers={"Accept-Encoding": ", ".join(_ENCODINGS), **(headers or {})},
        timeout=None,
    )


@dataclass(frozen=True)
class Answer:
    """A server's answer read whole: the final URL, status, content type (without parameters, lower case; None
    when not given) and body."""

    url: str
    status: int
    content_type: str | None
    content: bytes
    headers: httpx.Headers


def request(
    http: httpx.Client,
    method: str,
    url: str,
    timeout: float,
    max_bytes: int = MAX_ANSWER_BYTES,
    cancelled: threading.Event | None = None,
    **kwargs,
) -> Answer:
    """``method url`` answered within ``timeout`` seconds from the first connection attempt to the last byte
    (redirects included). Raises :class:`Timeout` when the deadline passes, :class:`TooLarge` for an answer of more
    than ``max_bytes`` (counted as inflated), :class:`Unacceptable` for an encoding that is not read,
    :class:`Cancelled` once ``cancelled`` is set, and httpx's errors for the rest (refused or reset connections, a
    body cut short)."""
    if not (timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"a request's timeout must be a positive number of seconds, got {timeout}")
    token = _DEADLINE.set((time.monotonic() + timeout, cancelled))
    limit = httpx.Timeout(timeout)
    try:
        with http.stream(method, url, timeout=limit, **kwargs) as answer:
            declared = answer.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > max_bytes:
                raise TooLarge(f"the answer is {int(declared)} bytes, more than the {max_bytes} allowed")
            body = _body(answer, max_bytes)
            kind = answer.headers.get("Content-Type")
            kind = kind.split(";", 1)[0].strip().lower() if kind else None
            return Answer(str(answer.url), answer.status_code, kind, body, answer.headers)
    except httpx.TimeoutException as e:
        raise Timeout(f"no complete answer within {timeout:g} s") from e
    except httpx.HTTPError:
        if cancelled is not None and cancelled.is_set():
            raise Cancelled(f"the request to {url} was cancelled") from None
        raise
    finally:
        _DEADLINE.reset(token)


def _body(answer: httpx.Response, max_bytes: int) -> bytes:
    """The body as sent (``iter_raw``), inflated here when it has one gzip or deflate encoding, ``INFLATE_STEP``
    bytes at a time: never more than ``max_bytes`` (plus one step) held."""
    codings = [c.strip().lower() for c in answer.headers.get("Content-Encoding", "").split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if len(codings) > 1 or (codings and codings[0] not in _ENCODINGS):
        raise Unacceptable(
            f"the answer is encoded as {', '.join(codings)}: only one gzip or deflate encoding is accepted"
        )
    inflate = zlib.decompressobj(_ENCODINGS[codings[0]]) if codings else None
    body, first = bytearray(), True
    for chunk in answer.iter_raw():
        if inflate is None:
            body += chunk
        elif chunk:
            if first and codings[0] == "deflate" and chunk[0] & 0x0F != 8:
                inflate = zlib.decompressobj(-15)  # a raw deflate stream, without zlib's header
            first = False
            try:
                while chunk and not inflate.eof:
                    body += inflate.decompress(chunk, INFLATE_STEP)
                    chunk = inflate.unconsumed_tail
                    if len(body) > max_bytes:
                        break
            except zlib.error as e:
                raise httpx.DecodingError(f"the answer's {codings[0]} encoding is damaged ({e})") from None
        if len(body) > max_bytes:
            raise TooLarge(f"the answer is more than the {max_bytes} bytes allowed")
    return bytes(body)
