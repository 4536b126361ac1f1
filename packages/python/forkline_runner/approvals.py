"""Tool approval (docs/runners.md, Tool approval; docs/contract.md#tool-approval).

A call that needs a person's decision is stored (the step's ``model/message``),
then asked for with ``tool/approval-request`` and the lease given back: the
session is WAITING, and its pool is offered it again once the call is decided
(``approveToolCall`` / ``denyToolCall``). The runner that claims it then finds
the step's calls without a result in ``ModelRequest.openCalls`` and settles
them in call order from the log alone — so the runner that asked, or any
other after a restart, does the same: an approved call runs once (after
``plugin/agent/approved-call-start`` is stored), a denied one gets a result
saying it did not run and why, a call not asked yet is asked when it needs a
decision (the turn waits again) and run when it does not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .runner import RunnerEvent, RunnerSession, result_event

#: Runs a call's tool: its (status, content).
RunCall = Callable[[dict[str, Any]], tuple[str, str]]
#: Whether a call not asked yet needs a person's decision before it runs.
NeedsApproval = Callable[[dict[str, Any]], bool]


def denied_content(call: dict[str, Any], reason: str | None) -> str:
    """The model-visible result of a denied call: it did not run, and why (the wording forkline's own agent stores)."""
    return f'Tool call "{call["name"]}" ({call["id"]}) was denied{f": {reason}" if reason else ""}. It did not run.'


def session_requires_approval(request: dict[str, Any], tool: str) -> bool:
    """Whether the session's own set (``ModelRequest.approvalRequired``: names, ``<server>__*``, ``*``) makes a call of ``tool`` wait."""
    return any(entry == "*" or entry == tool or (entry.endswith("__*") and tool.startswith(entry[:-1])) for entry in request.get("approvalRequired") or [])


def awaits_decision(request: dict[str, Any]) -> bool:
    """Whether a call of the open step still awaits a person's decision (a claim of a WAITING session): nothing is to run."""
    return any(c.get("approval") == "pending" for c in request.get("openCalls") or [])


def settle_calls(
    session: RunnerSession,
    turn: int,
    step: int,
    calls: Sequence[dict[str, Any]],
    *,
    run: RunCall,
    needs_approval: NeedsApproval,
    before: Sequence[RunnerEvent] = (),
) -> list[RunnerEvent] | None:
    """
    Settles the calls of the open step, in call order (``calls``: ``{id, name, arguments, approval, reason}``,
    approval None when never asked). What must be in the log before a tool runs (``before``: the step's message;
    a result; an approved call's start) is appended right before it; each result waits for the next write.
    None when a call is asked for (or still awaits) a decision: the request went in with the lease given back.
    Else every call has its result, and the events the step's end goes with (the last results): append them.
    """
    pending: list[RunnerEvent] = list(before)
    for call in calls:
        approval = call.get("approval")
        if approval == "pending":
            if pending:
                session.append(pending)
            return None  # still awaiting a person: nothing runs
        if approval == "denied":
            pending.append(result_event(session.session_id, turn, step, call, "error", denied_content(call, call.get("reason"))))
            continue
        if approval == "approved":
            # A runner that dies while it runs leaves a call the next claim repairs as one in flight, never one to run again.
            pending.append({"type": "plugin/agent/approved-call-start", "data": {"turn": turn, "step": step, "callId": call["id"]}})
        elif needs_approval(call):
            # Asked when reached, as forkline's agent asks: the calls after it wait their turn.
            session.append([*pending, {"type": "tool/approval-request", "data": {"turn": turn, "step": step, "callId": call["id"]}}], release=True)
            return None
        if pending:
            session.append(pending)  # in the log before the tool runs
        session.assert_held()  # the check at the act
        status, content = run(call)
        pending = [result_event(session.session_id, turn, step, call, status, content)]
    return pending
