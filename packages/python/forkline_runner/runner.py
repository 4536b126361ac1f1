"""The runner protocol (docs/runners.md): claim, renew, read the model request, append fenced batches, release.

A :class:`Runner` serves a pool: it waits for work (the ``runnableSessions``
subscription over SSE, and a look every ``poll_s`` seconds), claims as many
sessions as it has room for and hands each :class:`RunnerSession` to your
function on a thread of its own. A session renews its lease in the background;
``lost`` is set when the lease is lost, and ``append`` then raises
:class:`LeaseLostError`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypedDict

from .graphql import MAX_RESPONSE_BYTES, ForklineError, GraphQLClient, backoff_delay, retry_after_of

Effect = Literal["read-only", "idempotent", "side-effects"]

#: Bytes of a tool's output a result stores by default (Runner ``max_result_bytes``), well under the server's body limit.
MAX_RESULT_BYTES = 1_000_000
#: The most text one publishTurnUpdate carries (the server takes up to 200,000 characters): joined deltas stop there.
MAX_DELTA_CHARS = 100_000
#: Delta text waiting to be sent past which more is dropped (logged): deltas are not stored, and a server that
#: answers slowly must not make the runner hold a model's whole output.
MAX_QUEUED_DELTA_CHARS = 4_000_000

REQUEST_FIELDS = (
    "messages tools { name description effect inputSchema } wireToolNames { name wireName } turn step inputId inTurn stepOpen model eventCount "
    "openCalls { id name arguments approval reason } approvalRequired "
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
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        start_turns: bool = False,
        max_result_bytes: int = MAX_RESULT_BYTES,
        timeout_s: float = 60.0,
        sse_idle_s: float = 60.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        log: Callable[[str], None] = lambda msg: None,
    ) -> None:
        self.client = GraphQLClient(url, token=token, retry_for_s=retry_for_s, timeout_s=timeout_s, sse_idle_s=sse_idle_s, max_response_bytes=max_response_bytes)
        self.pool = pool
        self.runner_id = runner_id or f"runner-{uuid.uuid4().hex[:8]}"
        self.lease_ms = lease_ms
        self.concurrency = concurrency
        self.poll_s = poll_s
        #: After a session failed or a claim failed, the next claim waits: doubling from backoff_s up to max_backoff_s (with jitter).
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        #: Claims write the next turn's opening (input taken, turn/start, step 1's start): one append fewer per claimed turn.
        #: For functions that write turns with run_turns/run_turn, which read the started step from the request (``stepOpen``).
        self.start_turns = start_turns
        #: Bytes of a tool's output a result stores; a longer one is an error result saying the tool ran (docs/runners.md).
        #: Above the server's body limit a result's batch is refused (413), and the turn ends failed.
        self.max_result_bytes = max_result_bytes
        self.log = log

    def claim(self, session_id: str) -> RunnerSession | None:
        """Claims the session named: its lease, or None while another runner holds it."""
        sent_at = time.monotonic()
        try:
            data = self.client.call(
                f"mutation($input: ClaimSessionInput!) {{ claimSession(input: $input) {{ {CLAIM_FIELDS} }} }}",
                {"input": {"sessionId": session_id, "runnerId": self.runner_id, "leaseMs": self.lease_ms, "startTurn": self.start_turns}},
            )
        except ForklineError as err:
            if err.code == "SESSION_BUSY":
                return None
            raise
        return self._held(data["claimSession"], sent_at)

    def claim_many(self, max_sessions: int) -> list[RunnerSession]:
        """Up to ``max_sessions`` of the pool's sessions with work that nobody holds (none: an empty list)."""
        sent_at = time.monotonic()
        data = self.client.call(
            f"mutation($input: ClaimSessionsInput!) {{ claimSessions(input: $input) {{ {CLAIM_FIELDS} }} }}",
            {"input": {"pool": self.pool, "runnerId": self.runner_id, "max": max_sessions, "leaseMs": self.lease_ms, "startTurn": self.start_turns}},
        )
        return [self._held(c, sent_at) for c in data["claimSessions"]]

    def _held(self, claim: dict[str, Any], sent_at: float) -> RunnerSession:
        session = RunnerSession(self, claim["session"]["id"], int(claim["lease"]["token"]), sent_at)
        session.prefetch(claim["session"]["modelRequest"])
        return session

    def run(self, handle: Callable[[RunnerSession], None], stop: threading.Event) -> None:
        """Serves the pool until ``stop`` is set; each claimed session is handled on its own thread, then released."""
        wake = threading.Event()
        threading.Thread(target=self._watch, args=(wake, stop), daemon=True).start()
        # Each worker with its session. A worker whose session is lost or given back holds no room and is not waited
        # for at the stop: its function may never return (a tool that hangs; Python cannot stop a thread), but it can
        # write nothing more (append raises LeaseLostError), and the session is another runner's to serve.
        workers: dict[threading.Thread, RunnerSession] = {}
        lock = threading.Lock()

        def busy() -> list[threading.Thread]:
            with lock:
                return [t for t, s in workers.items() if t.is_alive() and not s.lost.is_set() and not s.released]

        # A session that fails is released and offered again at once: without a pause its next claim
        # fails the same way, in a tight loop. Consecutive failures (sessions, claims) back off; a success resets.
        failures = 0
        resume_at = 0.0

        def failed(retry_after: float | None = None) -> None:
            nonlocal failures, resume_at
            with lock:
                # A Retry-After is the server's (or a proxy's) to name, not to stall the runner with: held to max_backoff_s.
                pause = min(retry_after, self.max_backoff_s) if retry_after else backoff_delay(failures, base_s=self.backoff_s, cap_s=self.max_backoff_s)
                failures += 1
                resume_at = max(resume_at, time.monotonic() + pause)

        def succeeded() -> None:
            nonlocal failures
            with lock:
                failures = 0

        def serve(session: RunnerSession) -> None:
            try:
                handle(session)
                succeeded()
            except LeaseLostError:
                self.log(f"lease on {session.session_id} lost")
            except Exception as err:  # one session's failure does not stop the runner
                self.log(f"session {session.session_id} failed: {err!r}")
                failed(retry_after_of(err))
            finally:
                try:
                    session.release()
                except Exception as err:
                    self.log(f"releasing {session.session_id} failed: {err!r}")
                with lock:
                    workers.pop(threading.current_thread(), None)
                wake.set()  # room for another

        while not stop.is_set():
            wake.wait(self.poll_s)
            wake.clear()
            with lock:
                pause = resume_at - time.monotonic()
            if pause > 0 and stop.wait(pause):
                break
            if stop.is_set():
                break
            room = self.concurrency - len(busy())
            if room <= 0:
                continue
            try:
                sessions = self.claim_many(room)
            except Exception as err:
                self.log(f"claiming sessions failed: {err!r}")
                failed(retry_after_of(err))
                wake.set()  # claim again after the pause
                continue
            if len(sessions) == room:
                wake.set()  # there may be more
            for s in sessions:
                t = threading.Thread(target=serve, args=(s,), daemon=True)
                with lock:
                    workers[t] = s
                t.start()
        # Sessions still held are finished (a step runs on to its end); one lost meanwhile is not waited for.
        while held := busy():
            held[0].join(0.5)

    def _watch(self, wake: threading.Event, stop: threading.Event) -> None:
        """Wakes the loop for each runnableSessions item; subscribes again after a lost connection."""
        wake.set()  # sessions waiting already
        attempt = 0
        while not stop.is_set():
            try:
                for _ in self.client.subscribe("subscription($pool: String!) { runnableSessions(pool: $pool) { id } }", {"pool": self.pool}):
                    attempt = 0
                    wake.set()
                    if stop.is_set():
                        return
            except Exception as err:
                self.log(f"runnableSessions failed; subscribing again: {err!r}")
            stop.wait(backoff_delay(attempt, base_s=self.backoff_s, cap_s=self.max_backoff_s))
            attempt += 1


class RunnerSession:
    """
    A session this runner holds the lease of. The lease's end is counted from when the claim or the last
    renewal was sent (time.monotonic, which runs on while the process is paused), so it comes before the
    server's: past it the lease is taken as lost (docs/runners.md "When the lease ends").
    """

    def __init__(self, runner: Runner, session_id: str, lease_token: int, claim_sent_at: float | None = None) -> None:
        self.runner = runner
        #: When the lease ends by this runner's count (time.monotonic()).
        self._lease_end = (time.monotonic() if claim_sent_at is None else claim_sent_at) + runner.lease_ms / 1000
        self.client = runner.client
        self.session_id = session_id
        self.lease_token = lease_token
        self.lost = threading.Event()
        self.released = False
        self.event_count: int | None = None
        self._prefetched: dict[str, Any] | None = None
        #: The tool set the session holds (its last request's ``tools``, see tool_set_key); None: not known.
        self._held_tools: str | None = None
        #: A declaration not stored yet: it goes first in the next append.
        self._pending_tools: RunnerEvent | None = None
        self._closed = threading.Event()
        #: Deltas not sent yet, in order: [turn, step, parts, characters]. One request is out at a time (a
        #: thread of its own); what the model streams meanwhile is joined into the next.
        self._deltas: list[list[Any]] = []
        self._queued_chars = 0
        self._deltas_lock = threading.Lock()
        #: Set while no delta waits or is being sent.
        self._deltas_sent = threading.Event()
        self._deltas_sent.set()
        threading.Thread(target=self._renew_loop, daemon=True).start()

    def _lease(self) -> dict[str, Any]:
        return {"sessionId": self.session_id, "leaseToken": self.lease_token}

    def _renew_loop(self) -> None:
        interval = max(0.1, self.runner.lease_ms / 3000)
        while not self._closed.wait(interval):
            sent_at = time.monotonic()
            try:
                self.client.call(
                    "mutation($input: LeaseInput!) { renewLease(input: $input) { expiresAt } }",
                    {"input": {**self._lease(), "leaseMs": self.runner.lease_ms}},
                )
                self._lease_end = max(self._lease_end, sent_at + self.runner.lease_ms / 1000)
            except ForklineError as err:
                if err.code in ("LEASE_LOST", "SESSION_NOT_FOUND"):
                    self._lose()
                    return
                self.runner.log(f"renewing the lease on {self.session_id} failed: {err}")

    def _lose(self) -> None:
        self.lost.set()
        self._closed.set()

    def assert_held(self) -> None:
        """
        The check at the act: raises LeaseLostError once the lease is lost or given back, or has run out by
        this runner's count (a pause past it). Called right before a stored call's tool runs: the server
        refuses every write after the lease's end, but cannot stop a tool the runner starts.
        """
        if not self.lost.is_set() and not self.released and time.monotonic() >= self._lease_end:
            self.runner.log(f"the lease on {self.session_id} ran out before it was renewed: giving the session up")
            self._lose()
        if self.lost.is_set() or self.released:
            raise self._lost()

    def _lost(self) -> LeaseLostError:
        self._lose()
        return LeaseLostError(self.session_id)

    def prefetch(self, request: dict[str, Any]) -> None:
        self._prefetched = request
        self._read(request)

    def _read(self, request: dict[str, Any]) -> None:
        """What a request read tells: the log's length, and the tool set the session holds."""
        self.event_count = int(request["eventCount"])
        self._held_tools = tool_set_key([{**t, "effect": str(t["effect"]).lower().replace("_", "-")} for t in request.get("tools") or []])

    def model_request(self) -> dict[str, Any]:
        """What the session's next model call should be sent (``turn`` None: nothing to run)."""
        if self.released:
            return {
                "messages": [],
                "tools": [],
                "turn": None,
                "step": None,
                "inputId": None,
                "inTurn": False,
                "stepOpen": False,
                "model": None,
                "eventCount": self.event_count,
                "compaction": None,
                "openCalls": [],
                "approvalRequired": [],
            }
        ready, self._prefetched = self._prefetched, None
        if ready is not None and ready["eventCount"] == self.event_count:
            return ready
        data = self.client.call(f"query($id: ID!) {{ session(id: $id) {{ modelRequest {{ {REQUEST_FIELDS} }} }} }}", {"id": self.session_id})
        if data["session"] is None:
            raise self._lost()
        request: dict[str, Any] = data["session"]["modelRequest"]
        self._read(request)
        return request

    def append(self, batch: Sequence[RunnerEvent], release: bool = False, request: bool = False) -> list[dict[str, Any]]:
        """
        Appends a batch after the log as last seen; ``release`` gives the lease back when the batch leaves
        nothing to run (a turn's last batch); ``request``: the answer brings the request of the step the
        batch starts (model_request() returns it, no read of its own). A declaration not stored yet goes first.
        An attempt whose answer was lost is recognised by the events
        stored since: the batch is ours only when they are exactly its events, in order, none synthetic
        (a repair's closers after a lost lease are not). Input queued meanwhile moves the expected count on.
        """
        if self.lost.is_set() or self.released:
            raise self._lost()
        if self.event_count is None:
            self.model_request()
        declaration = self._pending_tools
        events = [declaration, *batch] if declaration else list(batch)
        stored = self._append(events, release, request)
        if declaration:
            if self._pending_tools is declaration:
                self._pending_tools = None
            self._held_tools = tool_set_key(declaration["data"]["tools"])
            return stored[1:]
        return stored

    def _append(self, events: list[RunnerEvent], release: bool, request: bool) -> list[dict[str, Any]]:
        self._deltas_out()
        with_request = release or request
        fields = "eventCount released modelRequest { " + REQUEST_FIELDS + " }" if with_request else "eventCount"
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
            if with_request:
                if result["released"]:
                    self._let_go()
                elif result.get("modelRequest"):
                    self.prefetch(result["modelRequest"])
            # The batch went in whole, ending at eventCount: the answer sends no events back.
            first = self.event_count - len(events)
            return [{"seq": first + i, "type": e["type"], "data": e["data"]} for i, e in enumerate(events)]
        raise AssertionError("unreachable")

    def fail_refused_turn(self, turn_request: dict[str, Any], message: str) -> bool:
        """
        Ends the open turn ``failed`` after the server refused one of its batches (``BAD_USER_INPUT``, ``413``),
        from the log as it is (the refused batch is not in it): each call of the open step with no result gets an
        ``error`` result saying its result could not be recorded and the tool may have run, then the step's end,
        the error and the turn's end — the session is not left with a turn open until a repair. A turn whose
        opening was refused is opened first when its input is still waiting (else it is taken and refused again
        and again). Whether anything was written (nothing while a call awaits a person's decision).
        """
        self._prefetched = None
        now = self.model_request()
        events: list[RunnerEvent] = []
        turn = now["turn"]
        step = max(1, (now["step"] or 1) - (0 if now["stepOpen"] else 1))
        if not now["inTurn"]:
            if turn_request["inTurn"] or now["inputId"] is None or now["inputId"] != turn_request["inputId"]:
                return False
            events += [
                {"type": "inbox/remove", "data": {"inputId": now["inputId"], "reason": "taken"}},
                {"type": "turn/start", "data": {"turn": turn, "inputId": now["inputId"]}},
            ]
            step = 1
        elif now["stepOpen"]:
            for call in now["openCalls"]:
                if call.get("approval") == "pending":
                    return False  # the session waits for a person: nothing to close
                content = f"the runner could not record this call's result (the server refused its batch: {message}); the tool may have run"
                events.append(result_event(self.session_id, turn, now["step"], call, "error", content))
            events.append({"type": "step/end", "data": {"turn": turn, "step": now["step"], "reason": "failed"}})
        if turn is None:
            turn = turn_request["turn"]
        events += [
            {"type": "plugin/agent/error", "data": {"turn": turn, "step": step, "message": f"the server refused the runner's batch: {message}"[:10_000]}},
            {"type": "turn/end", "data": {"turn": turn, "reason": "failed"}},
        ]
        self._append(events, True, False)
        return True

    def declare_tools(self, tools: Sequence[ToolDeclaration]) -> None:
        """
        Declares the runner's tools with their effects: forks and repair word their calls by them. When the set
        differs from the one the session holds (its request's ``tools``), a session/runner-tools event goes first
        in the next append (before any call of them, no round trip of its own); the same set writes nothing.
        """
        if self.lost.is_set():
            raise self._lost()
        if self._held_tools is None:
            self.prefetch(self.model_request())  # what the session holds (still the request to run)
        if tool_set_key(tools) == self._held_tools:
            self._pending_tools = None
            return
        self._pending_tools = {"type": "session/runner-tools", "data": {"tools": [dict(t) for t in tools]}}

    def store_declared_tools(self) -> None:
        """Stores a declaration not stored yet now, in a batch of its own: the next request lists its tools' wire names."""
        if self._pending_tools:
            self.append([])

    def delta(self, turn: int, step: int, text: str) -> None:
        """
        A text delta for live clients (sessionTurns): not stored. It returns at once: a thread sends the deltas
        in order, one request at a time, and those given while one is out go joined as the next (a model streams
        far more pieces a second than a token's rate allows requests). A failure is only logged; so is text
        dropped past MAX_QUEUED_DELTA_CHARS waiting.
        """
        with self._deltas_lock:
            if self._queued_chars + len(text) > MAX_QUEUED_DELTA_CHARS:
                self.runner.log(f"a delta of {self.session_id} was dropped: {self._queued_chars} characters wait to be sent")
                return
            self._queued_chars += len(text)
            last = self._deltas[-1] if self._deltas else None
            if last and last[0] == turn and last[1] == step and last[3] + len(text) <= MAX_DELTA_CHARS:
                last[2].append(text)
                last[3] += len(text)
            else:
                self._deltas.append([turn, step, [text], len(text)])
            if not self._deltas_sent.is_set():
                return
            self._deltas_sent.clear()
        threading.Thread(target=self._send_deltas, daemon=True).start()

    def _send_deltas(self) -> None:
        while True:
            with self._deltas_lock:
                if not self._deltas:
                    self._deltas_sent.set()
                    return
                turn, step, parts, chars = self._deltas.pop(0)
                self._queued_chars -= chars
            try:
                self.client.request(
                    "mutation($input: PublishTurnUpdateInput!) { publishTurnUpdate(input: $input) }",
                    {"input": {**self._lease(), "turn": turn, "step": step, "text": "".join(parts)}},
                )
            except Exception as err:  # noqa: BLE001 — any failure: this thread must go on to set _deltas_sent
                self.runner.log(f"a delta of {self.session_id} was not sent: {err}")

    def _deltas_out(self) -> None:
        """Waits until the deltas given so far are sent: a batch after them is stored after them, as it was given."""
        self._deltas_sent.wait()

    def _let_go(self) -> None:
        self.released = True
        self._prefetched = None
        self._closed.set()

    def release(self) -> None:
        """Gives the lease back (a lost or already given back lease needs nothing)."""
        if self.released:
            return
        self._deltas_out()  # sent under the lease, before it goes
        self._let_go()
        if self.lost.is_set():
            return
        try:
            self.client.call("mutation($input: LeaseInput!) { releaseSession(input: $input) { id } }", {"input": self._lease()})
        except ForklineError as err:
            if err.code != "LEASE_LOST":
                raise


def is_refusal(err: BaseException) -> bool:
    """The server refused a batch for what it holds (a broken rule, a body over its limit): sending it again fails the same way."""
    return isinstance(err, ForklineError) and (err.code == "BAD_USER_INPUT" or err.status == 413)


def refusal_message(err: ForklineError) -> str:
    """A refusal in words a person reads in ``Turn.error``: the server's message, its code, and the rule it named."""
    rule = err.extensions.get("rule")
    return f"{err} ({err.code}{f', rule {rule}' if rule else ''}{', HTTP 413: the batch is over the server body limit' if err.status == 413 else ''})"


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(text: str) -> str:
    """Text the log can store: each NUL and unpaired surrogate becomes U+FFFD, as forkline's own agent stores it."""
    return _SURROGATE.sub("\ufffd", text.replace("\x00", "\ufffd"))


def result_id(session_id: str, call_id: str) -> str:
    """The id a call's result is recorded under: ``res_<session>_<call>``, or, when that is longer than an id may be (a
    call id may itself be 200 characters), ``res_<session>_`` and a digest of the call id (as the TypeScript runner)."""
    whole = f"res_{session_id}_{call_id}"
    if len(whole.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")) <= 200:
        return whole
    digest = base64.urlsafe_b64encode(hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).digest()).decode()[:16]
    return f"res_{session_id}_{digest}"


def result_event(session_id: str, turn: int, step: int, call: dict[str, Any], status: str, content: str) -> RunnerEvent:
    """A call's ``tool/result`` as the SDK writes it (its resultId made from the session and the call)."""
    return {
        "type": "tool/result",
        "data": {"turn": turn, "step": step, "callId": call["id"], "resultId": result_id(session_id, call["id"]), "status": status, "content": content, "name": call["name"]},
    }


def is_our_batch(stored: Sequence[dict[str, Any]], events: Sequence[RunnerEvent]) -> bool:
    """Whether the events stored are exactly ``events``: same count, types and data, none synthetic."""
    return len(stored) == len(events) and all(
        s["type"] == e["type"] and s["data"] == e["data"] and not s.get("synthetic") for s, e in zip(stored, events)
    )


def tool_set_key(tools: Sequence[Any]) -> str:
    """
    A tool set as a model request lists it, in one spelling: order does not matter, an absent description is an
    empty one and an absent schema an empty object's (ModelRequest.tools says no more).
    """
    rows = sorted(([t["name"], t["effect"], t.get("description") or "", t.get("inputSchema") or {"type": "object"}] for t in tools), key=lambda r: str(r[0]))
    return json.dumps(rows, sort_keys=True, separators=(",", ":"))
