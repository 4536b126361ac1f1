"""forkline runner SDK for Python (standard library only): see docs/runners.md."""

from .compaction import write_compaction
from .graphql import ForklineError, GraphQLClient
from .runner import Effect, LeaseLostError, Runner, RunnerEvent, RunnerSession, ToolDeclaration, is_our_batch
from .turns import Model, ModelReply, Summarize, Tool, ToolCall, declare_tools, run_turn, run_turns

__all__ = [
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
    "declare_tools",
    "is_our_batch",
    "run_turn",
    "run_turns",
    "write_compaction",
]
