"""The fixed canonical conversations every chat template is rendered over (ids are change keys)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

WEATHER_TOOL: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}

_SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
_USER = {"role": "user", "content": "What is the capital of France?"}
_ASSISTANT = {"role": "assistant", "content": "The capital of France is Paris."}
_USER2 = {"role": "user", "content": "And of Italy?"}
_ASSISTANT2 = {"role": "assistant", "content": "The capital of Italy is Rome."}
_WEATHER_Q = {"role": "user", "content": "What is the weather in Paris?"}


def _call(city: str, call_id: str | None) -> dict[str, Any]:
    """One get_weather tool call (an `id` only when given: templates differ on ids)."""
    call: dict[str, Any] = {
        "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": city, "unit": "celsius"}},
    }
    return {"id": call_id, **call} if call_id is not None else call


def _calls(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": list(calls)}


def _result(temperature: int, call_id: str | None) -> dict[str, Any]:
    ids = {"tool_call_id": call_id} if call_id is not None else {}
    return {
        "role": "tool",
        **ids,
        "name": "get_weather",
        "content": f'{{"temperature": {temperature}}}',
    }


_TOOL_CALL = _calls(_call("Paris", "call00001"))
_TOOL_RESULT = _result(18, "call00001")
_TOOL_CALL_NO_ID = _calls(_call("Paris", None))
_TOOL_RESULT_NO_ID = _result(18, None)
_WEATHER_Q2 = {"role": "user", "content": "What is the weather in Paris and in Rome?"}
_TWO_TOOL_CALLS = _calls(_call("Paris", "call00001"), _call("Rome", "call00002"))
_TWO_TOOL_RESULTS = (_result(18, "call00001"), _result(24, "call00002"))
_REASONING = "France's capital is Paris; Italy's is Rome."


@dataclass(frozen=True)
class Conversation:
    """One canonical conversation: id (the RENDERED change key), messages, tools, generation prompt."""

    id: str
    messages: tuple[Mapping[str, Any], ...]
    add_generation_prompt: bool
    tools: tuple[Mapping[str, Any], ...] | None = None


def _with_reasoning(message: Mapping[str, Any], reasoning: str) -> dict[str, Any]:
    # transformers aliases reasoning under `thinking` too (chat_template_utils._alias_reasoning_fields)
    return {"thinking": reasoning, **message, "reasoning_content": reasoning}


CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation("system_user", (_SYSTEM, _USER), add_generation_prompt=False),
    Conversation("generation_prompt", (_SYSTEM, _USER), add_generation_prompt=True),
    Conversation(
        "multi_turn", (_USER, _ASSISTANT, _USER2, _ASSISTANT2), add_generation_prompt=False
    ),
    Conversation("tools", (_WEATHER_Q,), add_generation_prompt=True, tools=(WEATHER_TOOL,)),
    Conversation(
        "tool_calls",
        (_WEATHER_Q, _TOOL_CALL, _TOOL_RESULT),
        add_generation_prompt=True,
        tools=(WEATHER_TOOL,),
    ),
    Conversation(
        "reasoning",
        (_USER, _with_reasoning(_ASSISTANT, _REASONING), _USER2),
        add_generation_prompt=True,
    ),
    Conversation(
        "tool_calls_no_ids",
        (_WEATHER_Q, _TOOL_CALL_NO_ID, _TOOL_RESULT_NO_ID),
        add_generation_prompt=True,
        tools=(WEATHER_TOOL,),
    ),
    Conversation(
        "parallel_tool_calls",
        (_WEATHER_Q2, _TWO_TOOL_CALLS, *_TWO_TOOL_RESULTS),
        add_generation_prompt=True,
        tools=(WEATHER_TOOL,),
    ),
)
"""In this order; ids are stable (advisories classify on them). Together they cover: a system
prompt, the generation prompt off (`system_user`, `multi_turn`) and on, several turns, tools
offered, a tool call with an id and its result, a tool call without ids (as templates that do not
expect ids see it), several tool calls in one turn with their results, and reasoning content."""


def template_variables(conv: Conversation, special_tokens: Mapping[str, Any]) -> dict[str, Any]:
    """The variables a template sees for `conv`, as transformers passes them (fresh copies each call)."""
    import copy

    variables: dict[str, Any] = {
        "messages": copy.deepcopy(list(conv.messages)),
        "tools": copy.deepcopy(list(conv.tools)) if conv.tools is not None else None,
        "documents": None,
        "add_generation_prompt": conv.add_generation_prompt,
    }
    for name, value in special_tokens.items():
        if isinstance(value, str) or (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            variables[name] = value
    return variables
