"""A request's tool names on the wire (docs/runners.md#wire-names).

The log keeps each tool's name as it came (a recording's, an MCP server's, the
runner's own: ``files.read v2``); providers refuse names outside
``^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$``. A request lists, in ``wireToolNames``, the
form forkline's own agent sends each such name under. :func:`run_turns` hands
the model function the request with those forms in place of the names, and
reads the names of its reply's calls back, so the log holds the real names and
the wire valid ones, as the TypeScript SDK's adapters do.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

#: Names every provider takes as they are (forkline's rule): only whether a runner's tool needs the server's form first.
PROVIDER_TOOL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_-]{0,63}")


def needs_wire_names(names: Iterable[str]) -> bool:
    """Whether some of these tool names are not sent as they are: their forms come with a request that lists them."""
    return any(PROVIDER_TOOL_NAME.fullmatch(name) is None for name in names)


class WireNames:
    """The tools a request offers by their wire names, and the way back from the name a reply's call uses."""

    def __init__(self, request: dict[str, Any], offered: Iterable[str]) -> None:
        """``offered``: the runner's tools, in order. Of two whose forms meet only the first is offered, so a
        reply's name always means one tool."""
        self._wire = {w["name"]: w["wireName"] for w in request.get("wireToolNames") or []}
        self._real: dict[str, str] = {}
        for name in offered:
            self._real.setdefault(self.wire_name(name), name)

    def wire_name(self, name: str) -> str:
        """The name a tool is offered and its calls are shown under: its form in the request, else its own."""
        return self._wire.get(name, name)

    def offers(self, name: str) -> bool:
        """Whether the tool is offered (no earlier tool goes by its wire name)."""
        return self._real.get(self.wire_name(name)) == name

    def tool_of(self, wire_name: str) -> str | None:
        """The offered tool a reply's call names, or None: a name no request offered (an unknown tool, never run)."""
        return self._real.get(wire_name)

    def outgoing(self, request: dict[str, Any]) -> dict[str, Any]:
        """The request as the model is handed it: its tools (those offered) and its history's calls under their wire names."""
        out = copy.deepcopy(request)
        out["tools"] = [{**t, "name": self.wire_name(t["name"])} for t in request.get("tools") or [] if self.offers(t["name"])]
        for message in out.get("messages") or []:
            for call in message.get("tool_calls") or []:
                call["function"]["name"] = self.wire_name(call["function"]["name"])
        return out
