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
    def __init__(self, url: str, token: str | None = None, retry_for_s: float = 15.0, timeout_s: float = 60.0) -> None:
        self.url = url
        self.token = token
        self.retry_for_s = retry_for_s
        self.timeout_s = timeout_s

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
        try:
            with _OPENER.open(req, timeout=self.timeout_s) as res:
                status = res.status
                text = res.read().decode()
        except urllib.error.HTTPError as err:
            status = err.code
            retry_after = _retry_after(err.headers.get("retry-after"))
            text = err.read().decode(errors="replace")
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as err:
            raise ForklineError([{"message": f"cannot reach {self.url}: {err}"}]) from err
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            raise ForklineError([{"message": f"HTTP {status}: {text[:200]}"}], status, retry_after) from None
        if parsed.get("errors"):
            raise ForklineError(parsed["errors"], status, retry_after)
        if parsed.get("data") is None:
            raise ForklineError([{"message": f"HTTP {status}"}], status, retry_after)
        data: dict[str, Any] = parsed["data"]
        return data

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
            res = _OPENER.open(req, timeout=None)
        except urllib.error.HTTPError as err:
            raise ForklineError([{"message": f"HTTP {err.code}"}], err.code) from err
        except (urllib.error.URLError, ConnectionError, OSError) as err:
            raise ForklineError([{"message": f"cannot reach {self.url}: {err}"}]) from err
        with res:
            event = ""
            data: list[str] = []
            for raw in res:
                line = raw.decode().rstrip("\r\n")
                if line.startswith(":"):
                    continue  # a keep-alive
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip())
                elif line == "":
                    if event == "complete":
                        return
                    if data:
                        payload = json.loads("\n".join(data))
                        if payload.get("errors"):
                            raise ForklineError(payload["errors"])
                        if payload.get("data") is not None:
                            yield payload["data"]
                    event, data = "", []


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value) if value else 0.0
    except ValueError:
        return None
    return seconds if seconds > 0 else None
