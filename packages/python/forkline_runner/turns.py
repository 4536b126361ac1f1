"""Runs a claimed session's turns with your model and your tools, in two parts per step.

Each step is written as forkline's own runner writes it: its start before the
model is called, the model's message with its tool calls as soon as the model
has answered, before any tool runs; then each tool's result before the next
tool runs, the last one with the step's end and the next step's start. A fork
taken while a tool runs, or a runner killed mid-tool, therefore finds the call
in the log: the fork (or the repair after the lease ends) closes it with a
synthetic result naming the tool's declared effect, and no runner runs the
tool again. A call that needs a person's decision waits for it (approvals.py).
The model is handed the request with the tools' names as providers take them,
and its calls are recorded under the names they stand for (wire_names.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from .approvals import awaits_decision, session_requires_approval, settle_calls
from .call_ids import admit_calls, earlier_ids
from .compaction import write_compaction
from .graphql import ForklineError
from .runner import MAX_RESULT_BYTES, Effect, LeaseLostError, RunnerEvent, RunnerSession, ToolDeclaration, is_refusal, refusal_message, result_event, storable_text
from .wire_names import WireNames, needs_wire_names


class ToolCall(TypedDict):
    id: str
    name: str
    arguments: str  # JSON text, as the model wrote it


@dataclass
class ModelReply:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, int] | None = None  # {"inputTokens", "outputTokens"}


@dataclass
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    effect: Effect
    run: Callable[[dict[str, Any]], Any]  # its output: text, or anything JSON (result_content)
    #: Whether a call waits for a person's decision before it runs: a flag, or a function of the call's arguments (docs/runners.md, Tool approval).
    needs_approval: bool | Callable[[dict[str, Any]], bool] = False

    def declaration(self) -> ToolDeclaration:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema, "effect": self.effect}


#: The model: (the request forkline built — messages in OpenAI chat format, tools, model; tool names as providers take
#: them, docs/runners.md#wire-names —, a text-delta sink) -> its reply, whose calls name tools as the request offers them.
Model = Callable[[dict[str, Any], Callable[[str], None]], ModelReply]
#: A summariser for compaction: the history to summarise (chat messages) -> the summary's text.
Summarize = Callable[[list[dict[str, Any]]], str]


def run_turns(
    session: RunnerSession,
    model: Model,
    tools: Sequence[Tool] = (),
    *,
    max_steps: int = 16,
    summarize: Summarize | None = None,
) -> int:
    """Runs the session's work — an open turn's next steps, then a turn per pending input — until none is left."""
    by_name = {t.name: t for t in tools}
    declare_tools(session, tools)
    turns = 0
    compacting = summarize is not None
    while True:
        request = session.model_request()
        if compacting and request.get("compaction") and summarize is not None:
            # Over the budget: the runner's model summarises first (a failed summary is not tried again in this claim).
            compacting = write_compaction(session, request["compaction"], summarize)
            continue
        if request["turn"] is None or request["step"] is None or awaits_decision(request):
            return turns  # nothing to run, or a call still awaits a person's decision (a claim of a WAITING session)
        run_turn(session, request, model, by_name, max_steps=max_steps)
        turns += 1


def declare_tools(session: RunnerSession, tools: Sequence[Tool]) -> None:
    """Declares the runner's tools (written with the next append, unless the session holds exactly them already).
    A tool providers refuse by its own name has its form in a request only once the session holds the declaration:
    then it is stored at once, in a batch of its own."""
    if tools:
        session.declare_tools([t.declaration() for t in tools])
        if needs_wire_names(t.name for t in tools):
            session.store_declared_tools()


def graphql_effect(effect: str) -> str:
    """An effect as the GraphQL enum ToolEffect spells it (``side-effects`` -> ``SIDE_EFFECTS``)."""
    return effect.upper().replace("-", "_")


def run_turn(session: RunnerSession, request: dict[str, Any], model: Model, tools: dict[str, Tool], *, max_steps: int = 16) -> None:
    """
    One turn (or the rest of an open one) from ``request``, in the batches of docs/runners.md: the step's
    start before its model call (with the turn's opening, or the last step's last result and end), the
    message with its calls before any tool runs, each result before the next tool runs (the last with what
    follows it), and an answer without calls with the turn's end. A call that needs a person's decision is
    asked for and the turn waits (docs/runners.md, Tool approval); a step taken up after the decision is
    settled first. A batch the server refused (``BAD_USER_INPUT``, ``413``) ends the turn ``failed``
    (``RunnerSession.fail_refused_turn``) instead of leaving it open until a repair.
    """
    try:
        _write_turn(session, request, model, tools, max_steps)
    except ForklineError as err:
        if not is_refusal(err) or session.lost.is_set():
            raise
        message = refusal_message(err)
        session.runner.log(f"the server refused a batch of {session.session_id}: {message}")
        if not session.fail_refused_turn(request, message):
            raise


def _write_turn(session: RunnerSession, request: dict[str, Any], model: Model, tools: dict[str, Tool], max_steps: int) -> None:
    turn: int = request["turn"]
    step: int = request["step"]
    carry: list[RunnerEvent] = []
    # A claim with start_turns wrote the turn's opening and this step's start: the model is called first.
    started = bool(request["inTurn"] and request.get("stepOpen"))
    # Whether the request in hand is older than the log (a step settled since): the next step's start brings a new one.
    stale = False

    names = WireNames(request, tools)
    # Calls of the step whose name no request offered (a hostile or confused model): recorded as written, never run.
    unknown: set[str] = set()
    # Calls recorded under an id the step can hold (call_ids.py): never run, answered with why.
    refused: dict[str, str] = {}

    def tool_for(call: dict[str, Any]) -> Tool | None:
        """The tool a call runs: one the model is offered (of two whose wire names meet, the first), else none."""
        return tools.get(call["name"]) if call["id"] not in unknown and call["id"] not in refused and names.offers(call["name"]) else None

    def run(call: dict[str, Any]) -> tuple[str, str]:
        if call["id"] in refused:
            return "error", refused[call["id"]]
        if call["id"] in unknown:
            return "error", f"the model was offered no tool named {json.dumps(call['name'])}: the call did not run"
        return tool_outcome(call, tool_for(call), session.runner.max_result_bytes)

    if started and request.get("openCalls"):
        # A step taken up after a person's decision: its message is stored; its calls are settled from the log.
        decided = request
        settled = settle_calls(session, turn, step, request["openCalls"], run=run, needs_approval=lambda c: call_needs_approval(decided, tool_for(c), c))
        if settled is None:
            return  # a call awaits a decision (asked now, or still pending)
        carry, started, stale = [*settled, step_end(turn, step)], False, True
        step += 1
    if not request["inTurn"]:
        carry = [
            {"type": "inbox/remove", "data": {"inputId": request["inputId"], "reason": "taken"}},
            {"type": "turn/start", "data": {"turn": turn, "inputId": request["inputId"]}},
        ]
    for _ in range(max_steps):
        # The step's start is in the log when the model is called; after a step the answer brings its request.
        if not started:
            session.append([*carry, {"type": "step/start", "data": {"turn": turn, "step": step}}], request=stale)
            if stale:
                request = session.model_request()
        started, carry = False, []
        current = step
        names = WireNames(request, tools)  # this step's history may name tools the last one's did not
        try:
            reply = checked_reply(model(names.outgoing(request), lambda text: session.delta(turn, current, text)))
        except LeaseLostError:
            raise
        except Exception as err:  # the model failed (or answered what is no reply): the turn ends failed, as forkline's runner ends it
            fail(session, [step_end(turn, step, "failed")], turn, step, f"model failed: {err}")
            return
        # Each call under the name of the tool its wire name stands for (else as the model wrote it: an unknown tool),
        # and under an id the step can hold (a call given one it cannot hold, or another's, is refused: call_ids.py).
        named = [{"id": c["id"], "name": names.tool_of(c["name"]) or c["name"], "arguments": c["arguments"]} for c in reply.tool_calls]
        calls, why = admit_calls(named, earlier_ids(request["messages"]))
        refused.clear()
        refused.update(why)
        unknown = {c["id"] for c, given in zip(calls, reply.tool_calls) if names.tool_of(given["name"]) is None}
        # Each call of a declared tool carries its effect, as forkline records it: the stored event is exactly what was sent.
        # Its arguments are stored as forkline's own agent stores them (a NUL or an unpaired surrogate as U+FFFD), or the
        # log refuses the answer; the tool runs on them as the model gave them.
        tool_calls = [
            {**c, "arguments": storable_text(c["arguments"]), **({"effect": tools[c["name"]].effect} if c["name"] in tools else {})} for c in calls
        ]
        message: dict[str, Any] = {"turn": turn, "step": step, "text": storable_text(reply.text or ""), "toolCalls": tool_calls}
        if reply.usage:
            message["usage"] = reply.usage
        if not calls:
            session.append(
                [{"type": "model/message", "data": message}, step_end(turn, step), {"type": "turn/end", "data": {"turn": turn, "reason": "completed"}}],
                release=True,
            )
            return
        # The calls are in the log before any tool runs (settle_calls writes the message first).
        asked = request
        settled = settle_calls(
            session,
            turn,
            step,
            calls,
            run=run,
            # A refused call is answered at once: never asked for.
            needs_approval=lambda c: c["id"] not in refused and call_needs_approval(asked, tool_for(c), c),
            before=[{"type": "model/message", "data": message}],
        )
        if settled is None:
            return  # a call was asked for: the session waits for a person's decision, its lease given back
        carry = [*settled, step_end(turn, step)]  # nothing happens before the next step's start
        step += 1
        stale = True
    fail(session, carry, turn, step - 1, f"stopped after {max_steps} steps")


def checked_reply(reply: Any) -> ModelReply:
    """
    The model's reply, checked before anything of it is written: text, and calls each with a text id, name and
    arguments. What is checked is what is used: a copy, each field read once (a subclass whose property or a dict
    whose ``get`` answers differently at each read cannot pass the check with one value and be written with another).
    """
    if not isinstance(reply, ModelReply):
        raise TypeError(f"the model returned {type(reply).__name__}, not a ModelReply")
    text, calls, usage = reply.text, reply.tool_calls, reply.usage
    if text is not None and not isinstance(text, str):
        raise TypeError(f"the model's text is {type(text).__name__}, not text")
    if not isinstance(calls, list):
        raise TypeError("the model's tool_calls is not a list")
    copied: list[ToolCall] = []
    for call in list(calls):
        fields = {k: call.get(k) for k in ("id", "name", "arguments")} if isinstance(call, dict) else {}
        # An empty id or name is text the log cannot hold: admit_calls records the call under one it can, never run.
        if not all(isinstance(fields.get(k), str) for k in ("id", "name", "arguments")):
            raise TypeError(f"the model's tool call {_shown(call)} lacks a text id, name or arguments")
        copied.append({"id": str.__str__(fields["id"]), "name": str.__str__(fields["name"]), "arguments": str.__str__(fields["arguments"])})
    return ModelReply(text=str.__str__(text) if text is not None else "", tool_calls=copied, usage=dict(usage) if isinstance(usage, dict) else usage)


def _shown(value: Any) -> str:
    """A value in a message, at most 200 characters (its repr may raise: a hostile object's)."""
    try:
        return repr(value)[:200]
    except Exception:
        return type(value).__name__


def call_needs_approval(request: dict[str, Any], tool: Tool | None, call: dict[str, Any]) -> bool:
    """Whether a call waits for a person's decision: the session's set names its tool, or the tool asks (a flag, or a function of its arguments)."""
    if session_requires_approval(request, call["name"]):
        return True
    gate = tool.needs_approval if tool else False
    if not callable(gate):
        return gate is True
    try:
        return bool(gate(parse_arguments(call["arguments"])))
    except Exception:
        return True  # a check that fails asks a person rather than running the tool unchecked


def parse_arguments(arguments: str) -> dict[str, Any]:
    """A call's arguments as the model wrote them (JSON text): an object, else empty."""
    args = json.loads(arguments or "{}")
    return args if isinstance(args, dict) else {}


def step_end(turn: int, step: int, reason: str = "completed") -> RunnerEvent:
    return {"type": "step/end", "data": {"turn": turn, "step": step, "reason": reason}}


def result_content(output: Any, max_bytes: int = MAX_RESULT_BYTES) -> tuple[str, str]:
    """A tool's output as a result's (status, content). The tool has run: an output with no JSON form, or over
    max_bytes, is an error result saying so (never a lost batch); NUL and lone surrogates become U+FFFD, as
    forkline stores them."""
    if isinstance(output, str):
        return bounded_result("ok", output, max_bytes)
    try:
        content = json.dumps(output, ensure_ascii=False, allow_nan=False)
    except Exception as err:  # a cycle, NaN, bytes, an object; nesting deeper than the recursion limit; a __repr__ that raises
        return "error", f"the tool ran, but its output could not be recorded: it is not JSON ({message_of(err)[:200]})"
    return bounded_result("ok", content, max_bytes)


def bounded_result(status: str, content: str, max_bytes: int) -> tuple[str, str]:
    """``content`` made storable and held to ``max_bytes`` of UTF-8 — an output, or a failed tool's message —, as the
    TypeScript SDK's boundedResult: over it, an ``error`` result saying the tool ran and how big its output was."""
    content = storable_text(content)
    size = len(content.encode("utf-8"))
    if size > max_bytes:
        return "error", f"the tool ran, but its output ({size} bytes) is over this runner's limit of {max_bytes} bytes (max_result_bytes), so it was not recorded"
    return status, content


def message_of(err: BaseException) -> str:
    """An exception's words; one whose ``str`` raises (or is no text) by its type's name."""
    try:
        text = str(err)
    except Exception:
        return f"{type(err).__name__} (its message could not be read)"
    return text if isinstance(text, str) else type(err).__name__


def tool_outcome(call: ToolCall | dict[str, Any], tool: Tool | None, max_bytes: int = MAX_RESULT_BYTES) -> tuple[str, str]:
    """Runs the call's tool: its result's (status, content); a tool that raises is an error result (its message held to max_bytes)."""
    if tool is None:
        return "error", "the runner has no such tool"
    try:
        output = tool.run(parse_arguments(call["arguments"]))
    except LeaseLostError:
        raise
    except Exception as err:
        return bounded_result("error", f"tool failed: {message_of(err)}", max_bytes)
    return result_content(output, max_bytes)


def tool_result(session_id: str, turn: int, step: int, call: ToolCall, tool: Tool | None, max_bytes: int = MAX_RESULT_BYTES) -> RunnerEvent:
    """The call's tool run, and its ``tool/result``."""
    status, content = tool_outcome(call, tool, max_bytes)
    return result_event(session_id, turn, step, dict(call), status, content)


def fail(session: RunnerSession, before: list[RunnerEvent], turn: int, step: int, message: str) -> None:
    session.append(
        [*before, {"type": "plugin/agent/error", "data": {"turn": turn, "step": max(1, step), "message": message[:2000]}}, {"type": "turn/end", "data": {"turn": turn, "reason": "failed"}}],
        release=True,
    )
