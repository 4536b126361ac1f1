"""A model's calls as a step records them (docs/runners.md#call-ids), by the rules forkline's own agent keeps.

A model's reply is outside input: a call whose id the log cannot hold (over 200 code points, a NUL or an unpaired
surrogate) or that another call of the reply took is still recorded, under ``call_<position>``, and answered at once
with an ``error`` result saying why: it never runs. A call repeating an id the request's conversation already holds
(servers that number calls per answer) runs under a fresh ``call_<position>``. Every step's request comes from
forkline, which sends the history's ids in their wire form, so these are the only ids the runner gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .runner import storable_text

#: The longest id or tool name the log holds, in code points (a pair of surrogates is one, as the log's schema counts).
MAX_ID = 200


def _utf16(s: str) -> bytes:
    return s.encode("utf-16-le", "surrogatepass")


def _length(s: str) -> int:
    """Its length in UTF-16 units: what forkline's own agent says a refused id or name is long."""
    return len(_utf16(s)) // 2


def _fits(s: str) -> bool:
    """Whether the log takes its length: 1-MAX_ID code points (pairs read as forkline reads them, each lone surrogate one)."""
    return 1 <= len(_utf16(s).decode("utf-16-le", "surrogatepass")) <= MAX_ID


def _cut(s: str) -> str:
    """Its first MAX_ID UTF-16 units, as forkline's own agent cuts a name (a pair split by the cut leaves a lone half)."""
    return _utf16(s)[: 2 * MAX_ID].decode("utf-16-le", "surrogatepass")


def _storable(s: str) -> bool:
    return "\x00" not in s and not any("\ud800" <= ch <= "\udfff" for ch in s)


def earlier_ids(messages: Iterable[dict[str, Any]]) -> set[str]:
    """The call ids a request's conversation holds (its assistant messages')."""
    return {c["id"] for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []}


def admit_calls(calls: Sequence[dict[str, Any]], earlier: set[str]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The calls to record (ids unique and storable), and why each refused one does not run, by its recorded id."""
    ids: set[str] = set()
    given = {c["id"] for c in calls}
    refused: dict[str, str] = {}

    def fresh(i: int) -> str:
        new = f"call_{i + 1}"
        while new in given or new in ids or new in earlier:
            new += "_"
        return new

    out: list[dict[str, Any]] = []
    for i, call in enumerate(calls):
        cid, name = call["id"], call["name"]
        id_fits, id_text = _fits(cid), _storable(cid)
        name_fits, name_text = _fits(name), _storable(name)
        why = (
            f"the model gave it an id of {_length(cid)} characters (1-{MAX_ID} allowed)"
            if not id_fits
            else "the model gave it an id holding a NUL character or an unpaired surrogate"
            if not id_text
            else f"the model gave it the id of another call of this step ({cid})"
            if cid in ids
            else f"the model named a tool of {_length(name)} characters (1-{MAX_ID} allowed)"
            if not name_fits
            else "the model named a tool with a NUL character or an unpaired surrogate"
            if not name_text
            else None
        )
        recorded = fresh(i) if not id_fits or not id_text or cid in ids or cid in earlier else cid
        ids.add(recorded)
        if not (name_fits and name_text):
            name = storable_text(_cut(name)) or "unnamed"
        if why is not None:
            refused[recorded] = f"not run: {why}"
        out.append({**call, "id": recorded, "name": name})
    return out, refused
