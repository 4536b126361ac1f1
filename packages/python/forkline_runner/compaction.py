"""Automatic compaction with the runner's own model (docs/runners.md).

When a session's next request is over its budget, ``ModelRequest.compaction``
says so and holds the history to summarise. The runner's model writes the
summary; the compaction goes in as forkline's own agent writes it:
``plugin/compaction/start``, ``surface/replace {fromSeq, toSeq, content}``,
``plugin/compaction/end {fromSeq, toSeq, summarySeq, reason, requests}``. The
next model request holds the summary instead of that history.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .graphql import ForklineError
from .runner import LeaseLostError, RunnerSession, is_refusal, refusal_message, storable_text

START = "plugin/compaction/start"
END = "plugin/compaction/end"


def write_compaction(session: RunnerSession, compaction: dict[str, Any], summarize: Callable[[list[dict[str, Any]]], str]) -> bool:
    """Writes the compaction the request asked for; False (with the error in its end) when the summary failed."""
    reason = compaction.get("reason", "automatic")
    span = {"fromSeq": compaction["fromSeq"], "toSeq": compaction["throughSeq"]}
    # The start first: a fork taken while the model summarises inherits an unfinished compaction, which it ignores.
    session.append([{"type": START, "data": {"reason": reason, **span}}])
    try:
        text = summarize(list(compaction["messages"]))
    except LeaseLostError:
        raise
    except Exception as err:
        session.append([{"type": END, "data": {"reason": reason, **span, "error": str(err)[:2000]}}])
        session.runner.log(f"compacting {session.session_id} failed: {err!r}")
        return False
    try:
        [replace] = session.append([{"type": "surface/replace", "data": {**span, "content": storable_text(text)}}])
    except ForklineError as err:
        # A summary the server refuses (over its body limit) would be refused again at each claim: recorded as a failed compaction instead.
        if not is_refusal(err) or session.lost.is_set():
            raise
        message = f"the server refused the summary: {refusal_message(err)}"
        session.append([{"type": END, "data": {"reason": reason, **span, "error": message[:2000]}}])
        session.runner.log(f"compacting {session.session_id} failed: {message}")
        return False
    session.append([{"type": END, "data": {**span, "summarySeq": replace["seq"], "reason": reason, "requests": 1}}])
    return True
