"""Runs a claimed session's turns with your model and your tools, in two parts per step.

Each step is written as forkline's own runner writes it: its start before the
model is called, the model's message with its tool calls as soon as the model
has answered, before any tool runs; then each tool's result as it comes, the
last one with the step's end and the next step's start. A fork taken while a tool runs, or a runner killed mid-tool,
therefore finds the call in the log: the fork (or the repair after the lease
ends) closes it with a synthetic result naming the tool's declared effect,
and no runner runs the tool again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from .compaction import write_compaction
from .runner import Effect, LeaseLostError, RunnerEvent, RunnerSession, ToolDeclaration


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

    def declaration(self) -> ToolDeclaration:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema, "effect": self.effect}


#: The model: (the request forkline built — messages in OpenAI chat format, tools, model —, a text-delta sink) -> its reply.
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
        if request["turn"] is None or request["step"] is None:
            return turns
        run_turn(session, request, model, by_name, max_steps=max_steps)
        turns += 1


def declare_tools(session: RunnerSession, tools: Sequence[Tool]) -> None:
    """Declares the runner's tools (written with the next append, unless the session holds exactly them already)."""
    if tools:
        session.declare_tools([t.declaration() for t in tools])


def graphql_effect(effect: str) -> str:
    """An effect as the GraphQL enum ToolEffect spells it (``side-effects`` -> ``SIDE_EFFECTS``)."""
    return effect.upper().replace("-", "_")


def run_turn(session: RunnerSession, request: dict[str, Any], model: Model, tools: dict[str, Tool], *, max_steps: int = 16) -> None:
    """
    One turn (or the rest of an open one) from ``request``, in the batches of docs/runners.md: the step's
    start before its model call (with the turn's opening, or the last step's last result and end), the
    message with its calls before any tool runs, each result as it comes (the last with what follows it),
    and an answer without calls with the turn's end.
    """
    turn: int = request["turn"]
    step: int = request["step"]
    carry: list[RunnerEvent] = []
    # A claim with start_turns wrote the turn's opening and this step's start: the model is called first.
    started = bool(request["inTurn"] and request.get("stepOpen"))
    if not request["inTurn"]:
        carry = [
            {"type": "inbox/remove", "data": {"inputId": request["inputId"], "reason": "taken"}},
            {"type": "turn/start", "data": {"turn": turn, "inputId": request["inputId"]}},
        ]
    for n in range(max_steps):
        # The step's start is in the log when the model is called; after the first step the answer brings its request.
        if not (n == 0 and started):
            session.append([*carry, {"type": "step/start", "data": {"turn": turn, "step": step}}], request=n > 0)
        carry = []
        if n > 0:
            request = session.model_request()
        current = step
        try:
            reply = model(request, lambda text: session.delta(turn, current, text))
        except LeaseLostError:
            raise
        except Exception as err:  # the model failed: the turn ends failed, as forkline's runner ends it
            fail(session, [step_end(turn, step, "failed")], turn, step, f"model failed: {err}")
            return
        calls = reply.tool_calls
        # Each call of a declared tool carries its effect, as forkline records it: the stored event is exactly what was sent.
        tool_calls = [{**c, **({"effect": tools[c["name"]].effect} if c["name"] in tools else {})} for c in calls]
        message: dict[str, Any] = {"turn": turn, "step": step, "text": reply.text or "", "toolCalls": tool_calls}
        if reply.usage:
            message["usage"] = reply.usage
        if not calls:
            session.append(
                [{"type": "model/message", "data": message}, step_end(turn, step), {"type": "turn/end", "data": {"turn": turn, "reason": "completed"}}],
                release=True,
            )
            return
        # Part one: the calls are in the log before any tool runs.
        session.append([{"type": "model/message", "data": message}])
        for i, call in enumerate(calls):
            if session.lost.is_set():
                raise LeaseLostError(session.session_id)
            result = tool_result(session.session_id, turn, step, call, tools.get(call["name"]))
            if i < len(calls) - 1:
                session.append([result])  # other calls still to run
            else:
                carry = [result, step_end(turn, step)]  # nothing happens before the next step's start
        step += 1
    fail(session, carry, turn, step - 1, f"stopped after {max_steps} steps")


def step_end(turn: int, step: int, reason: str = "completed") -> RunnerEvent:
    return {"type": "step/end", "data": {"turn": turn, "step": step, "reason": reason}}


#: Bytes of a tool's output a result stores; a longer one is an error result saying the tool ran (docs/runners.md).
MAX_RESULT_BYTES = 1_000_000
_SURROGATE = re.compile("[\ud800-\udfff]")


def result_content(output: Any, max_bytes: int = MAX_RESULT_BYTES) -> tuple[str, str]:
    """A tool's output as a result's (status, content). The tool has run: an output with no JSON form, or over
    max_bytes, is an error result saying so (never a lost batch); NUL and lone surrogates become U+FFFD, as
    forkline stores them."""
    if isinstance(output, str):
        content = output
    else:
        try:
            content = json.dumps(output, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as err:
            return "error", f"the tool ran, but its output could not be recorded: it is not JSON ({err})"
    content = _SURROGATE.sub("\ufffd", content.replace("\x00", "\ufffd"))
    size = len(content.encode("utf-8"))
    if size > max_bytes:
        return "error", f"the tool ran, but its output ({size} bytes) is over this runner's limit of {max_bytes} bytes (max_result_bytes), so it was not recorded"
    return "ok", content


def tool_result(session_id: str, turn: int, step: int, call: ToolCall, tool: Tool | None) -> RunnerEvent:
    status, content = "ok", ""
    if tool is None:
        status, content = "error", "the runner has no such tool"
    else:
        try:
            args = json.loads(call["arguments"] or "{}")
            output = tool.run(args if isinstance(args, dict) else {})
        except Exception as err:
            status, content = "error", f"tool failed: {err}"
        else:
            status, content = result_content(output)
    return {
        "type": "tool/result",
        "data": {"turn": turn, "step": step, "callId": call["id"], "resultId": f"res_{session_id}_{call['id']}", "status": status, "content": content, "name": call["name"]},
    }


def fail(session: RunnerSession, before: list[RunnerEvent], turn: int, step: int, message: str) -> None:
    session.append(
        [*before, {"type": "plugin/agent/error", "data": {"turn": turn, "step": max(1, step), "message": message[:2000]}}, {"type": "turn/end", "data": {"turn": turn, "reason": "failed"}}],
        release=True,
    )
