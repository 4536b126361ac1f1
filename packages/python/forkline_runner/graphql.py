"""GraphQL over HTTP (POST /graphql) and subscriptions over SSE, standard library only.

Errors carry the server's ``extensions.code``; a lost connection and
SERVICE_UNAVAILABLE (HTTP 503, Retry-After) are retried for ``retry_for_s``
seconds by :meth:`GraphQLClient.retrying`.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

RETRYABLE = {"SERVICE_UNAVAILABLE", "NETWORK_ERROR"}

#: Bytes of one answer (a request's response body, one SSE event) a client holds at most by default: a proxy or a
#: broken server that answers with more (or without end) fails the call (``RESPONSE_TOO_LARGE``) instead of filling
#: the runner's memory. forkline sends none larger (FORKLINE_MAX_RESPONSE_BYTES' default, docs/operations.md).
MAX_RESPONSE_BYTES = 128 * 1024 * 1024
#: Bytes of an error response's body read (forkline's own are a few hundred): a 5xx storm of large pages holds no more.
ERROR_BODY_BYTES = 64 * 1024


def backoff_delay(attempt: int, *, base_s: float, cap_s: float, rng: Callable[[], float] = random.random) -> float:
    """
    The wait after failed attempt ``attempt`` (0: the first failure): doubling from ``base_s`` up to
    ``cap_s``, then shortened by up to half at random, so runners that failed together do not retry together.
    """
    full = min(cap_s, base_s * 2 ** max(0, attempt))
    return full * (1 - 0.5 * rng())


def retry_after_of(err: BaseException) -> float | None:
    """The wait the server asked for (Retry-After of a 429 or 503), in seconds; None when it named none."""
    return err.retry_after if isinstance(err, ForklineError) and err.status in (429, 503) else None


class ForklineError(Exception):
    """A GraphQL or transport error; ``code`` is the first error's extensions.code."""

    def __init__(self, errors: list[dict[str, Any]], status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__("; ".join(str(e.get("message", "")) for e in errors) or "GraphQL request failed")
        self.errors = errors
        self.status = status
        self.retry_after = retry_after
        code = next((e["extensions"]["code"] for e in errors if isinstance(e.get("extensions"), dict) and e["extensions"].get("code")), None)
        self.code: str = str(code) if code else (f"HTTP_{status}" if status else "NETWORK_ERROR")

    @property
    def extensions(self) -> dict[str, Any]:
        first = self.errors[0] if self.errors else {}
        ext = first.get("extensions")
        return ext if isinstance(ext, dict) else {}


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """
    Follows no redirect: urllib would follow a 301/302/303 of a POST as a GET and send the request's
    Authorization to whatever origin the Location names. forkline never redirects /graphql, so one is
    reported as an error (HTTP_3xx) and the token stays with the server it was given for.
    """

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects())


class GraphQLClient:
    """
    ``timeout_s`` bounds a request from its sending to the last byte of its answer (a server that stalls, or
    trickles its answer, fails it as a lost connection: retried); ``sse_idle_s`` is how long a subscription may
    stay silent (forkline sends a keep-alive every 12 s) before it is taken as lost; ``max_response_bytes`` bounds
    what one answer or SSE event may make the client hold.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        retry_for_s: float = 15.0,
        timeout_s: float = 60.0,
        *,
        sse_idle_s: float = 60.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.url = url
        self.token = token
        self.retry_for_s = retry_for_s
        self.timeout_s = timeout_s
        self.sse_idle_s = sse_idle_s
        self.max_response_bytes = max_response_bytes

    def _headers(self, accept: str) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": accept}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        return headers

    def request(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """One POST; the response's data, or ForklineError."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        req = urllib.request.Request(self.url, data=body, headers=self._headers("application/graphql-response+json, application/json"), method="POST")
        status: int | None = None
        retry_after: float | None = None
        # The socket's timeout bounds each wait; the deadline bounds the whole answer (one byte a minute passes the first).
        deadline = time.monotonic() + self.timeout_s
        try:
            with _OPENER.open(req, timeout=self.timeout_s) as res:
                status = res.status
                text = self._read(res, self.max_response_bytes, deadline, status).decode(errors="replace")
        except urllib.error.HTTPError as err:
            status = err.code
            retry_after = _retry_after(err.headers.get("retry-after"))
            try:
                text = self._read(err, ERROR_BODY_BYTES, deadline, status, cut=True).decode(errors="replace")
            except (ConnectionError, TimeoutError, OSError, ForklineError):
                text = ""  # the status says enough
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as err:
            raise ForklineError([{"message": f"cannot reach {self.url}: {err}"}]) from err
        if self.token and (status is None or status >= 300 or '"errors"' in text):
            # An error page that repeats the request's headers (a proxy's) would carry the token into logs and into the
            # turn's error event (Turn.error): it goes nowhere but to forkline.
            text = text.replace(self.token, "[token]")
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            raise ForklineError([{"message": f"HTTP {status}: {text[:200]}"}], status, retry_after) from None
        if not isinstance(parsed, dict):
            raise ForklineError([{"message": f"HTTP {status}: the answer is not a GraphQL response"}], status, retry_after)
        if parsed.get("errors"):
            raise ForklineError(parsed["errors"], status, retry_after)
        if parsed.get("data") is None:
            raise ForklineError([{"message": f"HTTP {status}"}], status, retry_after)
        data: dict[str, Any] = parsed["data"]
        return data

    def _read(self, res: Any, limit: int, deadline: float, status: int | None, cut: bool = False) -> bytes:
        """The body, read as it comes (``read1``: each wait is the socket's), until the deadline; over ``limit``
        bytes: RESPONSE_TOO_LARGE (``cut``: its first ``limit`` bytes)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no whole answer within {self.timeout_s} s")
            chunk = res.read1(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                if cut:
                    chunks.append(chunk[: len(chunk) - (size - limit)])
                    return b"".join(chunks)
                raise ForklineError(
                    [{"message": f"the answer from {self.url} is over {limit} bytes (max_response_bytes)", "extensions": {"code": "RESPONSE_TOO_LARGE"}}], status
                )
            chunks.append(chunk)

    def retrying(self, fn: Callable[[], T]) -> T:
        """
        Runs ``fn``, again after a lost connection, SERVICE_UNAVAILABLE or a 429 (refused before anything
        was done), for up to retry_for_s: after the server's Retry-After when it names one, else with backoff.
        """
        deadline = time.monotonic() + self.retry_for_s
        attempt = 0
        while True:
            try:
                return fn()
            except ForklineError as err:
                retryable = err.code in RETRYABLE or err.code.startswith("HTTP_5") or err.status in (429, 503)
                pause = retry_after_of(err) or backoff_delay(attempt, base_s=0.1, cap_s=2.0)
                if not retryable or time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)
                attempt += 1

    def call(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.retrying(lambda: self.request(query, variables))

    def subscribe(self, query: str, variables: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """A subscription over SSE (GraphQL over SSE, distinct connections): each ``next`` event's data."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        req = urllib.request.Request(self.url, data=body, headers=self._headers("text/event-stream"), method="POST")
        try:
            res = _OPENER.open(req, timeout=self.sse_idle_s)
        except urllib.error.HTTPError as err:
            raise ForklineError([{"message": f"HTTP {err.code}"}], err.code) from err
        except (urllib.error.URLError, ConnectionError, OSError) as err:
            raise ForklineError([{"message": f"cannot reach {self.url}: {err}"}]) from err
        limit = self.max_response_bytes
        with res:
            event = ""
            data: list[str] = []
            held = 0  # bytes of the event's data so far: an event without end is cut off at the limit
            while True:
                try:
                    # A line longer than the limit is never held whole: readline stops at it.
                    raw = res.readline(limit + 2)
                except (ConnectionError, TimeoutError, OSError) as err:
                    raise ForklineError([{"message": f"the subscription to {self.url} was lost: {err}"}]) from err
                if not raw:
                    return
                if len(raw) > limit:
                    raise ForklineError([{"message": f"an SSE line from {self.url} is over {limit} bytes (max_response_bytes)", "extensions": {"code": "RESPONSE_TOO_LARGE"}}])
                line = raw.decode(errors="replace").rstrip("\r\n")
                if line.startswith(":"):
                    continue  # a keep-alive
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip())
                    held += len(raw)
                    if held > limit:
                        raise ForklineError([{"message": f"an SSE event from {self.url} is over {limit} bytes (max_response_bytes)", "extensions": {"code": "RESPONSE_TOO_LARGE"}}])
                elif line == "":
                    if event == "complete":
                        return
                    if data:
                        try:
                            payload = json.loads("\n".join(data))
                        except json.JSONDecodeError:
                            raise ForklineError([{"message": f"an SSE event from {self.url} is not JSON"}]) from None
                        if not isinstance(payload, dict):
                            raise ForklineError([{"message": f"an SSE event from {self.url} is not a GraphQL result"}])
                        if payload.get("errors"):
                            raise ForklineError(payload["errors"])
                        if payload.get("data") is not None:
                            yield payload["data"]
                    event, data, held = "", [], 0


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value) if value else 0.0
    except ValueError:
        return None
    return seconds if seconds > 0 else None
