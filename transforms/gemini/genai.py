"""What Gemini CLI and its fork Qwen Code store in the same shape: @google/genai `Part`s and
`GenerateContentResponseUsageMetadata` counts. Shared by transforms.gemini and transforms.qwen;
their files differ in everything else.

Usage, in disjoint buckets. `promptTokenCount` INCLUDES `cachedContentTokenCount`;
`toolUsePromptTokenCount` is input outside the prompt count. Whether the reasoning
(`thoughtsTokenCount`) is inside `candidatesTokenCount` depends on who filled the record:
Google's API counts it apart (total = prompt + candidates + thoughts + tool), Qwen Code's
OpenAI converter copies `completion_tokens`, which already holds `reasoning_tokens` (total =
prompt + candidates). The recorded total tells the two apart; without one, apart is assumed.
"""

import re

from transforms.jsontext import int64_or_none as _count
from transforms.jsontext import str_or_none
from transforms.pricing import Buckets, in_range
from transforms.tools import compact_json

# shell.ts (both agents): "Output: ...", then "Exit Code: N" only when N is not 0
_EXIT = re.compile(r"^Exit Code: (-?\d+)\s*$", re.MULTILINE)
# Part keys of @google/genai's `Part` with no typed column: known, kept raw as `other`
KEPT_RAW = {"executableCode", "codeExecutionResult", "videoMetadata", "toolCall", "toolResponse"}


def content_parts(content) -> list:
    """A PartListUnion as a list: a string, one Part, or a list of strings and Parts."""
    if content is None or content == "":
        return []
    return content if isinstance(content, list) else [content]


def result_text(result) -> str | None:
    """What a tool sent back to the model: its functionResponse outputs (or errors) and texts."""
    texts = []
    for part in content_parts(result):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
            response = part["functionResponse"].get("response")
            if isinstance(response, dict) and isinstance(response.get("output"), str):
                texts.append(response["output"])
            elif isinstance(response, dict) and isinstance(response.get("error"), str):
                texts.append(response["error"])
            elif response is not None:
                texts.append(compact_json(response))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n".join(texts) if texts else None


def part_columns(part) -> dict:
    """A content Part's canonical columns (`native_part_type` is the Part's key)."""
    if isinstance(part, str):
        return {"part_type": "text", "native_part_type": "text", "is_known_type": True, "text": part}
    if not isinstance(part, dict):
        return {"part_type": "other", "native_part_type": None, "is_known_type": False}
    if isinstance(part.get("text"), str):
        if part.get("thought") is True:
            return {"part_type": "reasoning", "native_part_type": "thought", "is_known_type": True,
                    "reasoning": part["text"]}
        return {"part_type": "text", "native_part_type": "text", "is_known_type": True, "text": part["text"]}
    if isinstance(part.get("functionCall"), dict):
        call = part["functionCall"]
        args = call.get("args")
        return {"part_type": "tool_call", "native_part_type": "functionCall", "is_known_type": True,
                "tool_call_id": str_or_none(call.get("id")), "tool_name": str_or_none(call.get("name")),
                "tool_input": compact_json(args) if args is not None else None}
    if isinstance(part.get("functionResponse"), dict):
        response = part["functionResponse"]
        return {"part_type": "tool_result", "native_part_type": "functionResponse", "is_known_type": True,
                "tool_call_id": str_or_none(response.get("id")), "tool_name": str_or_none(response.get("name")),
                "tool_result": result_text([part])}
    for key in ("inlineData", "fileData"):
        if isinstance(part.get(key), dict):
            blob = part[key]
            data = blob.get("data")
            size = len(data) * 3 // 4 - data[-2:].count("=") if isinstance(data, str) and data else None
            return {"part_type": "binary", "native_part_type": key, "is_known_type": True,
                    "mime_type": str_or_none(blob.get("mimeType")), "binary_path": str_or_none(blob.get("fileUri")),
                    "binary_size": size}
    known = next((k for k in part if k in KEPT_RAW), None)
    if known:
        return {"part_type": "other", "native_part_type": known, "is_known_type": True}
    return {"part_type": "other", "native_part_type": next(iter(part), None), "is_known_type": False}


def usage_buckets(prompt, cached, candidates, thoughts, tool, total) -> Buckets | None:
    """One response's counts in disjoint buckets; None when none is a positive count (no request)."""
    prompt, cached, candidates = _count(prompt), _count(cached), _count(candidates)
    thoughts, tool, total = _count(thoughts), _count(tool), _count(total)
    if not any((prompt, cached, candidates, thoughts, tool)):
        return None
    # a count out of range (negative, over 10^12) is kept as written in its own bucket, and takes no
    # part in a sum or a difference: the response is not priced, and the lake nulls it with the
    # source's warning; the other side (input or output) is read as usual
    if not all(map(in_range, (prompt, cached, tool))):
        uncached = next((v for v in (prompt, tool) if not in_range(v)), None)  # the input is not known
        if uncached is None:  # the cache reads alone: not taken out of the prompt
            uncached = None if prompt is None and tool is None else (prompt or 0) + (tool or 0)
    else:
        uncached = (None if prompt is None and tool is None
                    else (prompt or 0) - min(cached or 0, prompt or 0) + (tool or 0))
    if not all(map(in_range, (candidates, thoughts))):
        output = candidates  # the thoughts out of range are not added; candidates out of range stay as written
    else:  # the total only says whether the thoughts are inside the candidates: one out of range, no
        inside = bool(thoughts) and in_range(total) and total == (prompt or 0) + (candidates or 0) + (tool or 0)
        output = (None if candidates is None and thoughts is None
                  else (candidates or 0) + (0 if inside else thoughts or 0))
    return Buckets(input_uncached=uncached, cache_read=cached, output=output, reasoning=thoughts)


def shell_exit_code(status: str | None, text: str | None) -> int | None:
    """A shell call's exit code: the last `Exit Code: N` line, else 0 when it ran to an output;
    null when it was cancelled or never reported one."""
    if status == "cancelled" or not isinstance(text, str):
        return None
    codes = _EXIT.findall(text)
    if codes:
        return int(codes[-1])
    return 0 if text.startswith("Output:") or "\nOutput:" in text else None
