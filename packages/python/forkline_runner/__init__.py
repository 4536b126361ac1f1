"""forkline runner SDK for Python (standard library only): see docs/runners.md."""

from .approvals import denied_content, session_requires_approval, settle_calls
from .compaction import write_compaction
from .graphql import ForklineError, GraphQLClient
from .runner import MAX_RESULT_BYTES, Effect, LeaseLostError, Runner, RunnerEvent, RunnerSession, ToolDeclaration, is_our_batch, is_refusal
from .turns import Model, ModelReply, Summarize, Tool, ToolCall, declare_tools, run_turn, run_turns
from .wire_names import WireNames, needs_wire_names

__all__ = [
    "MAX_RESULT_BYTES",
    "Effect",
    "ForklineError",
    "GraphQLClient",
    "LeaseLostError",
    "Model",
    "ModelReply",
    "Runner",
    "RunnerEvent",
    "RunnerSession",
    "Summarize",
    "Tool",
    "ToolCall",
    "ToolDeclaration",
    "WireNames",
    "declare_tools",
    "denied_content",
    "is_our_batch",
    "is_refusal",
    "needs_wire_names",
    "run_turn",
    "run_turns",
    "session_requires_approval",
    "settle_calls",
    "write_compaction",
]
