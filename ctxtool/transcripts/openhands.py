"""OpenHands event streams: a trajectory (one JSON array of events, as OpenHands saves and
replays it) or one event a line.

An event is an action (``action``) or an observation (``observation``) with its ``source``
(``user``, ``agent``, ``environment``). The conversation the model saw is rebuilt from them:

- a ``message`` action is the user's request (source ``user``) or the agent's reply;
- an action with ``tool_call_metadata`` was asked for by a model response, which the metadata
  holds (``model_response``, an OpenAI chat completion): that response becomes one assistant
  message, its text and every tool call it made, at the first action it asked for (a response
  that calls two tools is two actions carrying the same response). Without a response (older
  OpenHands) the call is the metadata's ``tool_call_id`` and ``function_name`` with the
  action's arguments;
- an observation with ``tool_call_metadata`` is the tool result for its ``tool_call_id``, the
  text the agent was shown: ``content`` between the command metadata's ``prefix`` and
  ``suffix`` (``[The command completed with exit code 0.]``);
- a ``finish`` action is the agent's last reply (its call is never answered: OpenHands sends
  the model its text alone), a ``system`` action the session's system prompt.

What maps to no message is counted: agent state changes, ``null`` observations, actions the
runtime ran without a tool call, and an observation whose call no response made.
"""

from __future__ import annotations

from typing import Any

from ..core.source_records import InvalidRecord, Line, Record, SourceMessage
from . import fields as f
from .openai_chat import chat_tool_calls
from .walk import FormatParser

# The arguments OpenHands adds to an action itself, never part of what the model asked for.
_NOT_ARGUMENTS = {"thought", "is_input", "blocking", "hidden", "confirmation_state"}
_ROLES = {"user": "user", "agent": "assistant"}


class OpenHandsParser(FormatParser):
    name = "openhands"

    def __init__(self) -> None:
        super().__init__()
        self.responses: set[str] = set()  # model responses already turned into a message
        self.calls: set[str] = set()  # tool call ids those responses made
        self.events: set[str] = set()  # event ids read (unique in a stream)

    @staticmethod
    def fits(obj: dict) -> bool:
        return "source" in obj and ("action" in obj or "observation" in obj)

    def kind_of(self, obj: dict) -> str:
        event = _event_id(obj)
        if event is not None:
            if event in self.events:
                return "duplicate_event"  # a record written twice: the same event again
            self.events.add(event)
        action, observation = obj.get("action"), obj.get("observation")
        if isinstance(action, str):
            if action in ("message", "system", "finish"):
                return action
            return (
                "tool_action" if obj.get("tool_call_metadata") is not None else f"action:{action}"
            )
        if isinstance(observation, str):
            if obj.get("tool_call_metadata") is not None:
                return "tool_observation"
            return f"observation:{observation}"
        return f"event:{f.label(action if action is not None else observation)}"

    def observe(self, obj: dict) -> bool:
        self.session.created_at = f.parse_time(obj.get("timestamp"))
        return True  # the first event's time is the session's

    # -- one method per record kind ------------------------------------------------------------

    def _message(self, line: Line) -> list[Record]:
        rec = line.obj
        source = rec.get("source")
        role = _ROLES.get(source) if isinstance(source, str) else None
        if role is None:
            raise InvalidRecord(f"a message's 'source' must be user or agent, not {_shown(source)}")
        args = f.obj(rec, "args") or {}
        text = f.text_of(args["content"], self.skipped) if "content" in args else None
        return [
            SourceMessage(
                self.ids(_event_id(rec), line.number),
                role,
                text if text is not None else f.string(rec, "message") or "",
                line.number,
                created_at=self.time(rec.get("timestamp")),
            )
        ]

    def _system(self, line: Line) -> None:
        args = f.obj(line.obj, "args") or {}
        text = f.text_of(args.get("content"), self.skipped)
        prompt = self.session.system_prompt
        if text:  # an empty system event adds no blank lines
            self.session.system_prompt = text if not prompt else prompt + "\n\n" + text
        self.skipped["system"] += 1

    def _tool_action(self, line: Line) -> list[Record] | None:
        rec = line.obj
        meta = f.obj(rec, "tool_call_metadata") or {}
        call_id = f.required(f.identifier(meta, "tool_call_id"), "'tool_call_id'")
        response = f.obj(meta, "model_response")
        key = (f.identifier(response, "id") if response else None) or call_id
        if key in self.responses and call_id in self.calls:
            self.skipped["same_response"] += 1  # another call of a response already read
            return None
        # A response read before whose tool_calls do not list this call (a cut response):
        # the call alone, its own message, so that its observation has a call to answer.
        repeated = key in self.responses
        self.responses.add(key)
        args = f.obj(rec, "args") or {}
        if response is None or repeated:
            text = None if repeated else f.text_of(args.get("thought"), self.skipped)
            calls = None
            details = None
        else:
            text, calls, details = self._response(response)
        if not calls or call_id not in {c["id"] for c in calls}:
            arguments = {k: v for k, v in args.items() if k not in _NOT_ARGUMENTS}
            name = f.required(f.name(meta, "function_name"), "'function_name'")
            calls = [*(calls or []), f.tool_call(call_id, name, arguments)]
        self.calls.update(c["id"] for c in calls)
        return [
            SourceMessage(
                self.ids(_event_id(rec), line.number),
                "assistant",
                text or None,
                line.number,
                tool_calls=calls,
                created_at=self.time(rec.get("timestamp")),
                details=details,
            )
        ]

    def _response(self, response: dict) -> tuple[str, list[dict] | None, dict | None]:
        """The text, tool calls and usage of a chat completion's first choice."""
        choices = response.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        message = f.obj(choice, "message") if isinstance(choice, dict) else None
        if message is None:
            raise InvalidRecord("'model_response' has no choices[0].message object")
        self.session.model = f.name(response, "model") or self.session.model
        tool_calls = message.get("tool_calls")
        if tool_calls is not None and not isinstance(tool_calls, list):
            raise InvalidRecord(f"'tool_calls' must be an array, not {f.json_type(tool_calls)}")
        calls = chat_tool_calls(tool_calls) if tool_calls else None
        details: dict[str, Any] = {}
        if isinstance(response.get("model"), str):
            details["model"] = response["model"]
        usage = _usage(response.get("usage"))
        if usage:
            details["usage"] = usage
        return f.text_of(message.get("content"), self.skipped), calls, details or None

    def _tool_observation(self, line: Line) -> list[Record] | None:
        rec = line.obj
        meta = f.obj(rec, "tool_call_metadata") or {}
        call_id = f.required(f.identifier(meta, "tool_call_id"), "'tool_call_id'")
        text = f.string(rec, "content") or ""
        metadata = (f.obj(rec, "extras") or {}).get("metadata")
        if isinstance(metadata, dict):
            prefix, suffix = metadata.get("prefix"), metadata.get("suffix")
            text = (prefix if isinstance(prefix, str) else "") + text
            text += suffix if isinstance(suffix, str) else ""
        if call_id not in self.calls:
            self.skipped["observation_without_call"] += 1
            return None
        kind = rec["observation"]
        return [
            SourceMessage(
                self.ids(_event_id(rec), line.number),
                "tool",
                text or f.string(rec, "message") or "",
                line.number,
                tool_call_id=call_id,
                name=f.name(meta, "function_name"),
                created_at=self.time(rec.get("timestamp")),
                details={"is_error": True} if kind == "error" else None,
            )
        ]

    def _finish(self, line: Line) -> list[Record]:
        """The agent's last reply: its thought, and the text of the response that finished."""
        rec = line.obj
        args = f.obj(rec, "args") or {}
        parts = [f.text_of(args.get(k), self.skipped) for k in ("thought", "final_thought")]
        meta = f.obj(rec, "tool_call_metadata")
        response = f.obj(meta, "model_response") if meta else None
        if response is not None:
            parts.append(self._response(response)[0])
        texts = list(dict.fromkeys(p for p in parts if p))  # the same text once
        return [
            SourceMessage(
                self.ids(_event_id(rec), line.number),
                "assistant",
                "\n".join(texts) or f.string(rec, "message") or "",
                line.number,
                created_at=self.time(rec.get("timestamp")),
            )
        ]

    handlers = {
        "message": _message,
        "system": _system,
        "tool_action": _tool_action,
        "tool_observation": _tool_observation,
        "finish": _finish,
    }


def _event_id(rec: dict) -> str | None:
    """The event's own id (a number in OpenHands): stable while a live stream grows."""
    value = rec.get("id")
    if f.integer(value) is not None:
        return str(value)
    return f.identifier(rec, "id")


def _shown(value: Any) -> str:
    return repr(value[:40]) if isinstance(value, str) else f.json_type(value)


def _usage(usage: Any) -> dict | None:
    """A chat completion's usage in the shared shape. ``prompt_tokens`` includes what was read
    from and written to the cache (Anthropic's counts through litellm, or OpenAI's
    ``prompt_tokens_details.cached_tokens``): the uncached rest is the input."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    read = f.token_count(usage.get("cache_read_input_tokens"))
    read = read if read is not None else f.token_count(cached) or 0
    written = f.token_count(usage.get("cache_creation_input_tokens")) or 0
    prompt = f.token_count(usage.get("prompt_tokens"))
    uncached = max(prompt - read - written, 0) if prompt is not None else None
    return f.normalise_usage(uncached, usage.get("completion_tokens"), read, written)
