"""The runner protocol (docs/runners.md): claim, renew, read the model request, append fenced batches, release.

A :class:`Runner` serves a pool: it waits for work (the ``runnableSessions``
subscription over SSE, and a look every ``poll_s`` seconds), claims as many
sessions as it has room for and hands each :class:`RunnerSession` to your
function on a thread of its own. A session renews its lease in the background;
``lost`` is set when the lease is lost, and ``append`` then raises
:class:`LeaseLostError`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypedDict

from .graphql import ForklineError, GraphQLClient

Effect = Literal["read-only", "idempotent", "side-effects"]

REQUEST_FIELDS = (
    "messages tools { name description effect inputSchema } turn step inputId inTurn model eventCount "
    "compaction { reason fromSeq throughSeq estimatedTokens thresholdTokens messages }"
)
CLAIM_FIELDS = f"session {{ id modelRequest {{ {REQUEST_FIELDS} }} }} lease {{ token expiresAt }}"


class RunnerEvent(TypedDict):
    type: str
    data: dict[str, Any]


class ToolDeclaration(TypedDict):
    """A tool the runner runs itself, as declareRunnerTools records it."""

    name: str
    description: str
    inputSchema: dict[str, Any]
    effect: Effect


class LeaseLostError(Exception):
    """The lease is no longer this runner's: stop writing (another runner may run the session now)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"the lease on session {session_id} was lost")
        self.session_id = session_id


class Runner:
    def __init__(
        self,
        url: str,
        pool: str,
        *,
        runner_id: str | None = None,
        token: str | None = None,
        lease_ms: int = 30_000,
        retry_for_s: float = 15.0,
        concurrency: int = 4,
        poll_s: float = 5.0,
        log: Callable[[str], None] = lambda msg: None,
    ) -> None:
        self.client = GraphQLClient(url, token=token, retry_for_s=retry_for_s)
        self.pool = pool
        self.runner_id = runner_id or f"runner-{uuid.uuid4().hex[:8]}"
        self.lease_ms = lease_ms
        self.concurrency = concurrency
        self.poll_s = poll_s
        self.log = log
        #: Set once the server answered that it has no declareRunnerTools: tools are not declared again.
        self.runner_tools_unsupported = False

    def claim(self, session_id: str) -> RunnerSession | None:
        """Claims the session named: its lease, or None while another runner holds it."""
        try:
            data = self.client.call(
                f"mutation($input: ClaimSessionInput!) {{ claimSession(input: $input) {{ {CLAIM_FIELDS} }} }}",
                {"input": {"sessionId": session_id, "runnerId": self.runner_id, "leaseMs": self.lease_ms}},
            )
        except ForklineError as err:
            if err.code == "SESSION_BUSY":
                return None
            raise
        return self._held(data["claimSession"])

    def claim_many(self, max_sessions: int) -> list[RunnerSession]:
        """Up to ``max_sessions`` of the pool's sessions with work that nobody holds (none: an empty list)."""
        data = self.client.call(
            f"mutation($input: ClaimSessionsInput!) {{ claimSessions(input: $input) {{ {CLAIM_FIELDS} }} }}",
            {"input": {"pool": self.pool, "runnerId": self.runner_id, "max": max_sessions, "leaseMs": self.lease_ms}},
        )
        return [self._held(c) for c in data["claimSessions"]]

    def _held(self, claim: dict[str, Any]) -> RunnerSession:
        session = RunnerSession(self, claim["session"]["id"], int(claim["lease"]["token"]))
        session.prefetch(claim["session"]["modelRequest"])
        return session

    def run(self, handle: Callable[[RunnerSession], None], stop: threading.Event) -> None:
        """Serves the pool until ``stop`` is set; each claimed session is handled on its own thread, then released."""
        wake = threading.Event()
        threading.Thread(target=self._watch, args=(wake, stop), daemon=True).start()
        workers: set[threading.Thread] = set()
        lock = threading.Lock()

        def serve(session: RunnerSession) -> None:
            try:
                handle(session)
            except LeaseLostError:
                self.log(f"lease on {session.session_id} lost")
            except Exception as err:  # one session's failure does not stop the runner
                self.log(f"session {session.session_id} failed: {err!r}")
            finally:
                try:
                    session.release()
                except Exception as err:
                    self.log(f"releasing {session.session_id} failed: {err!r}")
                with lock:
                    workers.discard(threading.current_thread())
                wake.set()  # room for another

        while not stop.is_set():
            wake.wait(self.poll_s)
            wake.clear()
            if stop.is_set():
                break
            with lock:
                room = self.concurrency - len(workers)
            if room <= 0:
                continue
            try:
                sessions = self.claim_many(room)
            except Exception as err:
                self.log(f"claiming sessions failed: {err!r}")
                continue
            if len(sessions) == room:
                wake.set()  # there may be more
            for s in sessions:
                t = threading.Thread(target=serve, args=(s,), daemon=True)
                with lock:
                    workers.add(t)
                t.start()
        for t in list(workers):
            t.join()

    def _watch(self, wake: threading.Event, stop: threading.Event) -> None:
        """Wakes the loop for each runnableSessions item; subscribes again after a lost connection."""
        wake.set()  # sessions waiting already
        while not stop.is_set():
            try:
                for _ in self.client.subscribe("subscription($pool: String!) { runnableSessions(pool: $pool) { id } }", {"pool": self.pool}):
                    wake.set()
                    if stop.is_set():
                        return
            except Exception as err:
                self.log(f"runnableSessions failed; subscribing again: {err!r}")
            stop.wait(1.0)


class RunnerSession:
    """A session this runner holds the lease of."""

    def __init__(self, runner: Runner, session_id: str, lease_token: int) -> None:
        self.runner = runner
        self.client = runner.client
        self.session_id = session_id
        self.lease_token = lease_token
        self.lost = threading.Event()
        self.released = False
        self.event_count: int | None = None
        self._prefetched: dict[str, Any] | None = None
        self._closed = threading.Event()
        threading.Thread(target=self._renew_loop, daemon=True).start()

    def _lease(self) -> dict[str, Any]:
        return {"sessionId": self.session_id, "leaseToken": self.lease_token}

    def _renew_loop(self) -> None:
        interval = max(0.1, self.runner.lease_ms / 3000)
        while not self._closed.wait(interval):
            try:
                self.client.call(
                    "mutation($input: LeaseInput!) { renewLease(input: $input) { expiresAt } }",
                    {"input": {**self._lease(), "leaseMs": self.runner.lease_ms}},
                )
            except ForklineError as err:
                if err.code in ("LEASE_LOST", "SESSION_NOT_FOUND"):
                    self._lose()
                    return
                self.runner.log(f"renewing the lease on {self.session_id} failed: {err}")

    def _lose(self) -> None:
        self.lost.set()
        self._closed.set()

    def _lost(self) -> LeaseLostError:
        self._lose()
        return LeaseLostError(self.session_id)

    def prefetch(self, request: dict[str, Any]) -> None:
        self._prefetched = request
        self.event_count = int(request["eventCount"])

    def model_request(self) -> dict[str, Any]:
        """What the session's next model call should be sent (``turn`` None: nothing to run)."""
        if self.released:
            return {"messages": [], "tools": [], "turn": None, "step": None, "inputId": None, "inTurn": False, "model": None, "eventCount": self.event_count, "compaction": None}
        ready, self._prefetched = self._prefetched, None
        if ready is not None and ready["eventCount"] == self.event_count:
            return ready
        data = self.client.call(f"query($id: ID!) {{ session(id: $id) {{ modelRequest {{ {REQUEST_FIELDS} }} }} }}", {"id": self.session_id})
        if data["session"] is None:
            raise self._lost()
        request: dict[str, Any] = data["session"]["modelRequest"]
        self.event_count = int(request["eventCount"])
        return request

    def append(self, events: Sequence[RunnerEvent], release: bool = False) -> list[dict[str, Any]]:
        """
        Appends a batch after the log as last seen; ``release`` gives the lease back when the batch leaves
        nothing to run (a turn's last batch). An attempt whose answer was lost is recognised by the events
        stored since: the batch is ours only when they are exactly its events, in order, none synthetic
        (a repair's closers after a lost lease are not). Input queued meanwhile moves the expected count on.
        """
        if self.lost.is_set() or self.released:
            raise self._lost()
        if self.event_count is None:
            self.model_request()
        fields = "eventCount released modelRequest { " + REQUEST_FIELDS + " } events { seq type data }" if release else "eventCount events { seq type data }"
        for attempt in range(6):
            expected = self.event_count
            try:
                data = self.client.call(
                    f"mutation($input: AppendEventsInput!) {{ appendEvents(input: $input) {{ {fields} }} }}",
                    {"input": {**self._lease(), "expectedEventCount": expected, "events": list(events), **({"release": True} if release else {})}},
                )
            except ForklineError as err:
                if err.code not in ("SESSION_BUSY", "LEASE_LOST") or attempt == 5:
                    if err.code == "LEASE_LOST":
                        raise self._lost() from err
                    raise
                assert expected is not None
                page = self.client.call(
                    "query($id: ID!, $after: Int, $first: Int) { session(id: $id) { eventCount events(afterSeq: $after, first: $first) { edges { node { seq type data synthetic } } } } }",
                    {"id": self.session_id, "after": expected - 1, "first": len(events) + 100},
                )
                session = page["session"]
                since = [e["node"] for e in (session["events"]["edges"] if session else [])]
                theirs = [e for e in since if e["type"] != "inbox/add"]
                if is_our_batch(theirs, events):
                    self.event_count = int(session["eventCount"])
                    if err.code == "LEASE_LOST":
                        self._let_go()
                    return theirs
                if err.code == "LEASE_LOST" or theirs:
                    raise self._lost() from err  # someone else wrote: not ours to continue
                self.event_count = int(session["eventCount"])
                continue
            result = data["appendEvents"]
            self.event_count = int(result["eventCount"])
            if release:
                if result["released"]:
                    self._let_go()
                elif result.get("modelRequest"):
                    self.prefetch(result["modelRequest"])
            stored: list[dict[str, Any]] = result["events"]
            return stored
        raise AssertionError("unreachable")

    def declare_tools(self, tools: Sequence[ToolDeclaration]) -> None:
        """Records the runner's tools with their effects (declareRunnerTools): forks and repair word their calls by them."""
        if self.lost.is_set():
            raise self._lost()
        try:
            self.client.call(
                "mutation($input: DeclareRunnerToolsInput!) { declareRunnerTools(input: $input) { __typename } }",
                {"input": {**self._lease(), "tools": [{**t, "effect": t["effect"].upper().replace("-", "_")} for t in tools]}},
            )
        except ForklineError as err:
            if err.code == "LEASE_LOST":
                raise self._lost() from err
            raise
        self._prefetched = None
        self.event_count = None  # the declaration is an event: read the request again

    def delta(self, turn: int, step: int, text: str) -> None:
        """A text delta for live clients (sessionTurns): not stored; a failure is only logged."""
        try:
            self.client.request(
                "mutation($input: PublishTurnUpdateInput!) { publishTurnUpdate(input: $input) }",
                {"input": {**self._lease(), "turn": turn, "step": step, "text": text}},
            )
        except ForklineError as err:
            self.runner.log(f"a delta of {self.session_id} was not sent: {err}")

    def _let_go(self) -> None:
        self.released = True
        self._prefetched = None
        self._closed.set()

    def release(self) -> None:
        """Gives the lease back (a lost or already given back lease needs nothing)."""
        if self.released:
            return
        self._let_go()
        if self.lost.is_set():
            return
        try:
            self.client.call("mutation($input: LeaseInput!) { releaseSession(input: $input) { id } }", {"input": self._lease()})
        except ForklineError as err:
            if err.code != "LEASE_LOST":
                raise


def is_our_batch(stored: Sequence[dict[str, Any]], events: Sequence[RunnerEvent]) -> bool:
    """Whether the events stored are exactly ``events``: same count, types and data, none synthetic."""
    return len(stored) == len(events) and all(
        s["type"] == e["type"] and s["data"] == e["data"] and not s.get("synthetic") for s, e in zip(stored, events)
    )
