#!/usr/bin/env python3
"""model_server.py — a scripted model provider for tests (Python 3 stdlib only).

A real HTTP server on 127.0.0.1 that speaks both wire formats the kernel uses:

  POST /v1/chat/completions   OpenAI-style chat completions (also /chat/completions)
  POST /v1/messages           Anthropic Messages (also /messages)

It checks each request the way the real APIs do (shape, roles, tool call ids,
tool results answering the previous turn's calls; Anthropic also needs the
anthropic-version and x-api-key headers) and answers 400 in the provider's own
error format when a request is wrong. A well-formed request is answered by the
next step of a JSON script, one step per model request, in order.

Usage:
  model_server.py [--script FILE] [--port N] [--port-file FILE] [--verbose]
  The first line on stdout is "PORT <n>" (the port actually bound; 0 picks a
  free one); --port-file also writes the number to FILE (atomically).

The script is a JSON list of steps (or {"steps": [...]}). Each step is an
object with exactly one kind:

  {"text": "...", "stop": "end" | "max_tokens"}
      a text reply; stop defaults to "end" (OpenAI finish_reason "stop" or
      "length", Anthropic stop_reason "end_turn" or "max_tokens").
  {"tool_calls": [{"name": "...", "arguments": {...} | "raw text", "id": optional}],
   "text": optional, "stop": optional}
      the model asks for tools. Object arguments are sent as JSON text
      (OpenAI) or as the input object (Anthropic); a string is sent as is
      (OpenAI: the raw arguments text, even when not JSON; Anthropic: parsed
      if it is a JSON object, else the string itself as "input", which the
      real API never does). Ids default to call_<step>_<i> / toolu_<step>_<i>.
      stop defaults to tool calls ("tool_calls" / "tool_use").
  {"http_error": 429, "body": optional str or JSON, "headers": optional {name: value}}
      that status; the body defaults to a provider-shaped error.
  {"error_in_200": {"message": "...", "code": 502}}
      HTTP 200 whose body is an error ({"error": {...}} for OpenAI style, as
      OpenRouter does; {"type": "error", ...} for Anthropic).
  {"malformed": "raw body text"}
      HTTP 200 with exactly that body.
  {"empty": true}
      HTTP 200 with a reply that holds nothing: OpenAI style "choices": []
      (what providers behind routers send under load), Anthropic a message
      whose content is [] (no text, no tool_use).
  {"outage": {"ms": N, "mode": "503" | "refuse"}}
      the provider is down for N ms from the request that reaches this step
      (that one included): every model request meanwhile is answered 503
      (in the provider's error format, "overloaded_error" for Anthropic) or,
      with "refuse", has its connection closed without an answer; no step is
      used. Then the script goes on with the next step. Outage requests are
      recorded with "outage": true.

Any step may also carry:
  "delay_ms": N           wait N ms before answering
  "hold": "name"          wait, before answering, until POST /_release
                          {"name": "name"} (or a new script) lets it go:
                          a model call that lasts exactly as long as a test
                          needs it to (a kernel fault injected meanwhile).
                          GET /_state lists the holds being waited on.
  "match": "substring"    assert that the request contains the substring (in
                          its raw JSON text or in any decoded string value).
                          On a mismatch the server fails loudly: it answers
                          400 with "script step N: request does not contain
                          ..." to this and every later model request until a
                          new script is loaded, and prints it on stderr.
  "cut": N                send only the first N bytes of the answer's body
                          (its Content-Length says the whole) and close the
                          connection: a body cut short.
  "stop": "none"          (text and tool_calls steps) no finish reason:
                          OpenAI "finish_reason": null, Anthropic
                          "stop_reason": null, as a stream the provider cut
                          would end.
  "usage": {"input_tokens": N, "output_tokens": M, "cost": X,
            "cached_tokens": C, "cache_write_tokens": W}
                          the usage reported (default 100 in, 20 out, no
                          cost, nothing cached); N counts every input token,
                          C of them read from the prompt cache and W written
                          to it. OpenAI style reports prompt_tokens (N),
                          completion_tokens, total_tokens, cost when given and,
                          when C or W is given, prompt_tokens_details
                          {"cached_tokens": C, "cache_write_tokens": W} (as
                          OpenRouter passes Anthropic's on); Anthropic reports
                          input_tokens N - C - W (the uncached rest),
                          cache_read_input_tokens C and
                          cache_creation_input_tokens W.

Prompt-caching breakpoints ("cache_control": {"type": "ephemeral"}) are
checked as Anthropic checks them, in both formats (OpenRouter takes them in
content parts): at most 4 a request, each {"type": "ephemeral"} (an optional
"ttl" of "5m" or "1h"); each request records "cache_breakpoints" (how many
it held) in /_requests.

When the script is exhausted every model request gets 400 "script exhausted":
a permanent refusal, so the kernel fails the call at once instead of waiting
out what would look like an outage (a 5xx). Script the outage to have one.

It also lists the models it offers, as the providers do:

  GET /v1/models    (also /models) OpenRouter-style {"data": [{"id", "name",
                    "context_length", "supported_parameters"}]}; with an
                    anthropic-version header, Anthropic's {"data": [{"type":
                    "model", "id", "display_name"}], "has_more": false}.
                    The models: "scripted" and "scripted-large" take tools,
                    "scripted-no-tools" does not. Recorded in /_requests.

A completion request that offers tools to "scripted-no-tools" is refused
with 404, as OpenRouter refuses a model without tool support, without using
a script step. Any other model name is answered by the script.

Control endpoints:
  GET  /_health     {"ok": true}
  GET  /_requests   every request so far, in order: {"n", "method", "path",
                    "headers" (lower-case names; authorization and x-api-key
                    values replaced by "<redacted>"), "auth" ({"authorization":
                    {"present", "scheme", "sha256"}, "x-api-key": {"present",
                    "sha256"}}: sha256 hex of the key, i.e. of the value after
                    "Bearer " for authorization), "body" (parsed JSON or null),
                    "raw" (the body text when it was not JSON), "images" (each
                    picture in the request's messages, either wire format:
                    {"message", "media_type", "bytes", "sha256", "width",
                    "height"} with width and height read from a PNG or JPEG
                    header, else null), "step" (the
                    script step index used, or null), "status",
                    "started_at" (Unix time in seconds, float, when the
                    request was read), "duration_ms" (float: from then until
                    the answer was sent, delay_ms included; null while the
                    request is still being answered)}
  GET  /_state      {"index", "steps", "remaining", "failure", "holding": [names]}
  POST /_release    body: {"name": "..."}: every request held on that name
                    is answered (a later step holding on it waits again).
  POST /_script     body: a script (list) or {"steps": [...], "keep_requests": bool};
                    replaces the script, rewinds it, clears a match failure and
                    (unless keep_requests) the recorded requests.
"""

import argparse
import base64
import hashlib
import json
import os
import re
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

MAX_BODY = 64 << 20
KINDS = ("text", "tool_calls", "http_error", "error_in_200", "malformed", "empty", "outage")
KEYS = set(KINDS) | {"stop", "body", "headers", "delay_ms", "match", "usage", "cut", "hold"}
OPENAI_PATHS = ("/v1/chat/completions", "/chat/completions")
ANTHROPIC_PATHS = ("/v1/messages", "/messages")
MODELS_PATHS = ("/v1/models", "/models")
# The models this server offers: (id, display name, takes tools).
CATALOG = (("scripted", "Scripted", True), ("scripted-large", "Scripted Large", True),
           ("scripted-no-tools", "Scripted without tools", False))
NO_TOOLS = {m[0] for m in CATALOG if not m[2]}
NO_TOOLS_MESSAGE = "No endpoints found that support tool use."


class BadRequest(Exception):
    """A request the real API would refuse with 400 (or status)."""

    def __init__(self, message, status=400, kind="invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.kind = kind


# ---- the script ----------------------------------------------------------

def parse_script(obj):
    steps = obj.get("steps") if isinstance(obj, dict) else obj
    if not isinstance(steps, list):
        raise ValueError("a script is a JSON list of steps (or {\"steps\": [...]})")
    for i, s in enumerate(steps):
        if not isinstance(s, dict):
            raise ValueError(f"step {i}: not an object")
        unknown = set(s) - KEYS
        if unknown:
            raise ValueError(f"step {i}: unknown keys {sorted(unknown)}")
        kinds = [k for k in KINDS if k in s]
        if kinds == ["text", "tool_calls"] or kinds == ["tool_calls", "text"]:
            kinds = ["tool_calls"]
        if len(kinds) != 1:
            raise ValueError(f"step {i}: needs exactly one of {list(KINDS)} (text may go with tool_calls)")
        kind = kinds[0]
        if "stop" in s and s["stop"] not in ("end", "max_tokens", "tool_calls", "none"):
            raise ValueError(f"step {i}: stop must be end, max_tokens, tool_calls or none")
        if kind == "outage":
            o = s["outage"]
            if not (isinstance(o, dict) and isinstance(o.get("ms"), int) and o["ms"] > 0
                    and o.get("mode", "503") in ("503", "refuse")):
                raise ValueError(f"step {i}: outage needs ms > 0 and mode 503 or refuse")
        if "cut" in s and not (isinstance(s["cut"], int) and s["cut"] >= 0):
            raise ValueError(f"step {i}: cut must be a non-negative integer")
        if kind == "tool_calls":
            calls = s["tool_calls"]
            if not isinstance(calls, list) or not calls:
                raise ValueError(f"step {i}: tool_calls must be a non-empty list")
            for c in calls:
                if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                    raise ValueError(f"step {i}: each tool call needs a name")
        if kind == "http_error" and not (isinstance(s["http_error"], int) and 100 <= s["http_error"] <= 599):
            raise ValueError(f"step {i}: http_error must be an HTTP status")
        if kind == "error_in_200" and not isinstance(s["error_in_200"], dict):
            raise ValueError(f"step {i}: error_in_200 must be an object")
        if kind == "malformed" and not isinstance(s["malformed"], str):
            raise ValueError(f"step {i}: malformed must be a string")
        if "delay_ms" in s and not (isinstance(s["delay_ms"], int) and s["delay_ms"] >= 0):
            raise ValueError(f"step {i}: delay_ms must be a non-negative integer")
        if "match" in s and not isinstance(s["match"], str):
            raise ValueError(f"step {i}: match must be a string")
        if "hold" in s and not (isinstance(s["hold"], str) and s["hold"]):
            raise ValueError(f"step {i}: hold must be a non-empty string")
    return steps


class State:
    def __init__(self, steps):
        self.lock = threading.Lock()
        self.steps = steps
        self.index = 0
        self.failure = None
        self.requests = []
        self.outage_until = 0.0   # time.monotonic() until which the provider is down
        self.outage_mode = "503"
        self.holding = {}         # hold name -> threading.Event, while requests wait on it

    def release(self, name=None):
        """Lets the requests held on name (None: on every name) go."""
        with self.lock:
            for n in [name] if name is not None else list(self.holding):
                ev = self.holding.pop(n, None)
                if ev:
                    ev.set()

    HOLD_MAX_S = 1800  # a test that never releases must not leave a thread waiting forever

    def hold(self, name):
        """Blocks until release(name), or HOLD_MAX_S (a forgotten hold then answers)."""
        with self.lock:
            ev = self.holding.setdefault(name, threading.Event())
        if not ev.wait(self.HOLD_MAX_S):
            print(f"hold {name!r} was never released in {self.HOLD_MAX_S} s; answering", file=sys.stderr, flush=True)

    def load(self, steps, keep_requests=False):
        self.release()
        with self.lock:
            self.steps = steps
            self.index = 0
            self.failure = None
            self.outage_until = 0.0
            if not keep_requests:
                self.requests = []


def strings_in(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)


def request_contains(raw, body, needle):
    return needle in raw or any(needle in s for s in strings_in(body))


# ---- request validation (what the real APIs refuse) ------------------------

def need(cond, message):
    if not cond:
        raise BadRequest(message)


CACHE_BREAKPOINTS_MAX = 4


def count_cache_control(v):
    """Checks every cache_control in a request body and returns how many there are."""
    n = 0
    if isinstance(v, dict):
        for k, x in v.items():
            if k == "cache_control":
                need(isinstance(x, dict) and x.get("type") == "ephemeral"
                     and set(x) <= {"type", "ttl"} and x.get("ttl", "5m") in ("5m", "1h"),
                     "cache_control: must be {\"type\": \"ephemeral\"}")
                n += 1
            else:
                n += count_cache_control(x)
    elif isinstance(v, list):
        for x in v:
            n += count_cache_control(x)
    return n


def validate_cache_control(body):
    n = count_cache_control(body)
    need(n <= CACHE_BREAKPOINTS_MAX,
         f"A maximum of {CACHE_BREAKPOINTS_MAX} blocks with cache_control may be provided. Found {n}.")
    return n


def validate_openai(body):
    need(isinstance(body, dict), "body must be a JSON object")
    need(isinstance(body.get("model"), str) and body["model"], "model is required")
    need(not body.get("stream"), "streaming is not supported by this server")
    msgs = body.get("messages")
    need(isinstance(msgs, list) and msgs, "messages must be a non-empty list")
    pending = set()  # tool call ids of the last assistant turn not yet answered
    for i, m in enumerate(msgs):
        need(isinstance(m, dict), f"messages[{i}] must be an object")
        role = m.get("role")
        need(role in ("system", "developer", "user", "assistant", "tool"), f"messages[{i}].role is invalid")
        if role != "tool":
            need(not pending, f"messages[{i}]: an assistant message with tool_calls must be followed by "
                              f"tool messages answering each tool_call_id (missing {sorted(pending)})")
        content = m.get("content")
        if role in ("system", "developer", "user"):
            need(isinstance(content, (str, list)), f"messages[{i}].content must be a string")
            if isinstance(content, list):
                for j, part in enumerate(content):
                    where = f"messages[{i}].content[{j}]"
                    need(isinstance(part, dict) and part.get("type") in ("text", "image_url"),
                         f"{where}.type must be 'text' or 'image_url'")
                    if part["type"] == "text":
                        need(isinstance(part.get("text"), str), f"{where}.text must be a string")
                    else:
                        need(role == "user", f"{where}: images are only allowed in user messages")
                        url = (part.get("image_url") or {}).get("url") if isinstance(part.get("image_url"), dict) else None
                        need(isinstance(url, str) and DATA_URL.match(url) is not None,
                             f"{where}.image_url.url must be a data:image/(png|jpeg|gif|webp);base64 URL")
        elif role == "assistant":
            calls = m.get("tool_calls")
            need(content is None or isinstance(content, (str, list)), f"messages[{i}].content is invalid")
            need(content is not None or calls, f"messages[{i}]: content is required without tool_calls")
            if calls is not None:
                need(isinstance(calls, list) and calls, f"messages[{i}].tool_calls must be a non-empty list")
                for j, c in enumerate(calls):
                    where = f"messages[{i}].tool_calls[{j}]"
                    need(isinstance(c, dict) and isinstance(c.get("id"), str) and c["id"], f"{where}.id is required")
                    need(c.get("type") == "function", f"{where}.type must be 'function'")
                    fn = c.get("function")
                    need(isinstance(fn, dict) and isinstance(fn.get("name"), str), f"{where}.function.name is required")
                    need(isinstance(fn.get("arguments"), str), f"{where}.function.arguments must be a string")
                    pending.add(c["id"])
        else:
            tid = m.get("tool_call_id")
            need(isinstance(tid, str) and tid in pending,
                 f"messages[{i}]: tool message must answer a tool_call_id of the preceding assistant message")
            need(isinstance(content, (str, list)), f"messages[{i}].content must be a string")
            pending.discard(tid)
    tools = body.get("tools")
    if tools is not None:
        need(isinstance(tools, list), "tools must be a list")
        for j, t in enumerate(tools):
            need(isinstance(t, dict) and t.get("type") == "function", f"tools[{j}].type must be 'function'")
            fn = t.get("function")
            need(isinstance(fn, dict) and isinstance(fn.get("name"), str), f"tools[{j}].function.name is required")
            need(isinstance(fn.get("parameters", {}), dict), f"tools[{j}].function.parameters must be an object")
    mt = body.get("max_tokens", body.get("max_completion_tokens"))
    need(mt is None or (isinstance(mt, int) and mt > 0), "max_tokens must be a positive integer")


def validate_anthropic(body, headers):
    if not headers.get("x-api-key"):
        raise BadRequest("x-api-key header is required", 401, "authentication_error")
    need(headers.get("anthropic-version"), "anthropic-version header is required")
    need(isinstance(body, dict), "body must be a JSON object")
    need(isinstance(body.get("model"), str) and body["model"], "model: field required")
    need(isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 0, "max_tokens: field required")
    need(not body.get("stream"), "streaming is not supported by this server")
    system = body.get("system")
    need(system is None or isinstance(system, (str, list)), "system must be a string or a list of blocks")
    msgs = body.get("messages")
    need(isinstance(msgs, list) and msgs, "messages: field required")
    prev_tool_uses = set()
    for i, m in enumerate(msgs):
        need(isinstance(m, dict), f"messages.{i}: must be an object")
        role = m.get("role")
        need(role == ("user" if i % 2 == 0 else "assistant"),
             f"messages.{i}: roles must alternate between user and assistant, starting with user")
        content = m.get("content")
        if isinstance(content, str):
            need(content, f"messages.{i}: content must be non-empty")
            blocks = [{"type": "text", "text": content}]
        else:
            need(isinstance(content, list) and content, f"messages.{i}: content must be a non-empty list")
            blocks = content
        tool_uses, results, seen_text = set(), set(), False
        for j, b in enumerate(blocks):
            where = f"messages.{i}.content.{j}"
            need(isinstance(b, dict), f"{where}: must be an object")
            t = b.get("type")
            if t == "text":
                need(isinstance(b.get("text"), str) and b["text"], f"{where}: text content blocks must be non-empty")
                seen_text = True
            elif t == "tool_use":
                need(role == "assistant", f"{where}: tool_use blocks are only allowed in assistant messages")
                need(isinstance(b.get("id"), str) and b["id"], f"{where}.id: field required")
                need(isinstance(b.get("name"), str) and b["name"], f"{where}.name: field required")
                need(isinstance(b.get("input"), dict), f"{where}.input: must be an object")
                tool_uses.add(b["id"])
            elif t == "image":
                need(role == "user", f"{where}: image blocks are only allowed in user messages")
                src = b.get("source")
                need(isinstance(src, dict) and src.get("type") == "base64", f"{where}.source.type must be 'base64'")
                need(src.get("media_type") in ("image/png", "image/jpeg", "image/gif", "image/webp"),
                     f"{where}.source.media_type is invalid")
                need(isinstance(src.get("data"), str) and src["data"], f"{where}.source.data is required")
                try:
                    base64.b64decode(src["data"], validate=True)
                except ValueError:
                    raise BadRequest(f"{where}.source.data is not base64")
            elif t == "tool_result":
                need(role == "user", f"{where}: tool_result blocks are only allowed in user messages")
                need(not seen_text, f"{where}: tool_result blocks must come before any text")
                tid = b.get("tool_use_id")
                need(isinstance(tid, str) and tid in prev_tool_uses,
                     f"{where}: unexpected tool_use_id found in tool_result blocks: {tid}. Each tool_result "
                     f"block must have a corresponding tool_use block in the previous message.")
                need(b.get("content") is None or isinstance(b["content"], (str, list)), f"{where}.content is invalid")
                need(isinstance(b.get("is_error", False), bool), f"{where}.is_error must be a boolean")
                results.add(tid)
            else:
                raise BadRequest(f"{where}.type: unknown block type {t!r}")
        if role == "user" and prev_tool_uses:
            missing = prev_tool_uses - results
            need(not missing, f"messages.{i}: tool_use ids were found without tool_result blocks immediately "
                              f"after: {sorted(missing)}")
        prev_tool_uses = tool_uses if role == "assistant" else set()
    tools = body.get("tools")
    if tools is not None:
        need(isinstance(tools, list), "tools must be a list")
        for j, t in enumerate(tools):
            need(isinstance(t, dict) and isinstance(t.get("name"), str), f"tools.{j}.name: field required")
            need(isinstance(t.get("input_schema"), dict), f"tools.{j}.input_schema: field required")


# ---- responses -----------------------------------------------------------

def usage_of(step):
    u = step.get("usage") or {}
    return int(u.get("input_tokens", 100)), int(u.get("output_tokens", 20)), u.get("cost")


def cache_usage_of(step):
    """(read, written) prompt-cache tokens, or None when the step gives neither."""
    u = step.get("usage") or {}
    if "cached_tokens" not in u and "cache_write_tokens" not in u:
        return None
    return int(u.get("cached_tokens", 0)), int(u.get("cache_write_tokens", 0))


def openai_reply(step, idx, model):
    text = step.get("text")
    calls = []
    for i, c in enumerate(step.get("tool_calls") or []):
        args = c.get("arguments", {})
        calls.append({"id": c.get("id") or f"call_{idx}_{i}", "type": "function",
                      "function": {"name": c["name"],
                                   "arguments": args if isinstance(args, str) else json.dumps(args)}})
    stop = step.get("stop") or ("tool_calls" if calls else "end")
    finish = {"end": "stop", "max_tokens": "length", "tool_calls": "tool_calls", "none": None}[stop]
    msg = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = calls
    inp, out, cost = usage_of(step)
    usage = {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}
    if cost is not None:
        usage["cost"] = cost
    cache = cache_usage_of(step)
    if cache:
        usage["prompt_tokens_details"] = {"cached_tokens": cache[0], "cache_write_tokens": cache[1]}
    return {"id": f"chatcmpl-script-{idx}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage}


def anthropic_reply(step, idx, model):
    content = []
    if step.get("text"):
        content.append({"type": "text", "text": step["text"]})
    for i, c in enumerate(step.get("tool_calls") or []):
        args = c.get("arguments", {})
        if isinstance(args, str):
            try:
                parsed = json.loads(args)
                args = parsed if isinstance(parsed, dict) else args
            except ValueError:
                pass
        content.append({"type": "tool_use", "id": c.get("id") or f"toolu_{idx}_{i}", "name": c["name"],
                        "input": args})
    calls = bool(step.get("tool_calls"))
    stop = step.get("stop") or ("tool_calls" if calls else "end")
    reason = {"end": "end_turn", "max_tokens": "max_tokens", "tool_calls": "tool_use", "none": None}[stop]
    inp, out, _ = usage_of(step)
    usage = {"input_tokens": inp, "output_tokens": out}
    cache = cache_usage_of(step)
    if cache:
        usage = {"input_tokens": max(inp - cache[0] - cache[1], 0), "cache_read_input_tokens": cache[0],
                 "cache_creation_input_tokens": cache[1], "output_tokens": out}
    return {"id": f"msg_script_{idx}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": reason, "stop_sequence": None, "usage": usage}


def anthropic_error_type(code):
    if isinstance(code, str):
        return code
    return {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
            529: "overloaded_error"}.get(code, "api_error")


def error_body(fmt, status, message, code=None):
    if fmt == "anthropic":
        return {"type": "error", "error": {"type": anthropic_error_type(code if code is not None else status),
                                           "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                      "code": code if code is not None else status}}


# ---- the server ----------------------------------------------------------

DATA_URL = re.compile(r"^data:(image/(?:png|jpeg|gif|webp));base64,([A-Za-z0-9+/]+=*)$")


def image_size(data):
    """(width, height) from a PNG or JPEG header, else (None, None)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(data) and data[i] == 0xFF:
            marker, seg = data[i + 1], struct.unpack(">H", data[i + 2:i + 4])[0]
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                h, w = struct.unpack(">HH", data[i + 5:i + 9])
                return w, h
            i += 2 + seg
    return None, None


def request_images(body):
    """Every picture in a request's messages, in either wire format."""
    out = []
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return out
    for n, m in enumerate(body["messages"]):
        content = m.get("content") if isinstance(m, dict) else None
        for part in content if isinstance(content, list) else []:
            if not isinstance(part, dict):
                continue
            media, b64 = None, None
            if part.get("type") == "image_url" and isinstance(part.get("image_url"), dict):
                match = DATA_URL.match(str(part["image_url"].get("url", "")))
                if match:
                    media, b64 = match.group(1), match.group(2)
            elif part.get("type") == "image" and isinstance(part.get("source"), dict):
                media, b64 = part["source"].get("media_type"), part["source"].get("data")
            if not b64:
                continue
            try:
                data = base64.b64decode(b64)
            except ValueError:
                continue
            w, h = image_size(data)
            out.append({"message": n, "media_type": media, "bytes": len(data),
                        "sha256": hashlib.sha256(data).hexdigest(), "width": w, "height": h})
    return out


def auth_record(headers):
    out = {}
    a = headers.get("Authorization")
    rec = {"present": a is not None, "scheme": None, "sha256": None}
    if a is not None:
        scheme, _, token = a.partition(" ")
        rec["scheme"] = scheme
        rec["sha256"] = hashlib.sha256(token.encode()).hexdigest()
    out["authorization"] = rec
    k = headers.get("x-api-key")
    out["x-api-key"] = {"present": k is not None,
                        "sha256": hashlib.sha256(k.encode()).hexdigest() if k is not None else None}
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "seed-model-server/1"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("model_server: " + (fmt % args) + "\n")

    @property
    def state(self):
        return self.server.state

    def send_json(self, status, obj, headers=None):
        self.send_raw(status, json.dumps(obj).encode(), headers)

    def send_raw(self, status, data, headers=None, cut=None):
        """Sends an answer; with cut, only its first cut bytes, then closes."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, str(v))
            self.end_headers()
            self.wfile.write(data if cut is None else data[:cut])
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. its timeout passed)
        if cut is not None:
            self.close_connection = True

    def refuse(self):
        """Closes the connection without an answer (a provider that is down)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def read_body(self):
        n = self.headers.get("Content-Length")
        if n is None or not n.isdigit() or int(n) > MAX_BODY:
            return None
        return self.rfile.read(int(n))

    def do_GET(self):
        path = urlsplit(self.path).path
        if path in MODELS_PATHS:
            self.list_models(path)
            return
        if path == "/_health":
            self.send_json(200, {"ok": True})
        elif path == "/_requests":
            with self.state.lock:
                data = json.dumps(self.state.requests)
            self.send_raw(200, data.encode())
        elif path == "/_state":
            with self.state.lock:
                s = self.state
                self.send_json(200, {"index": s.index, "steps": len(s.steps),
                                     "remaining": max(0, len(s.steps) - s.index), "failure": s.failure,
                                     "holding": sorted(s.holding)})
        else:
            self.send_json(404, {"error": {"message": f"no such path {path}", "code": 404}})

    def do_POST(self):
        path = urlsplit(self.path).path
        raw = self.read_body()
        if raw is None:
            self.send_json(411, {"error": {"message": "a Content-Length of at most 64 MiB is required"}})
            return
        if path == "/_script":
            try:
                obj = json.loads(raw)
                self.state.load(parse_script(obj), isinstance(obj, dict) and bool(obj.get("keep_requests")))
            except ValueError as e:
                self.send_json(400, {"error": {"message": f"bad script: {e}"}})
                return
            self.send_json(200, {"ok": True, "steps": len(self.state.steps)})
        elif path == "/_release":
            try:
                name = json.loads(raw).get("name")
                if not isinstance(name, str) or not name:
                    raise ValueError("name must be a non-empty string")
            except (ValueError, AttributeError) as e:
                self.send_json(400, {"error": {"message": f"bad release: {e}"}})
                return
            self.state.release(name)
            self.send_json(200, {"ok": True})
        elif path in OPENAI_PATHS:
            self.model_request("openai", raw)
        elif path in ANTHROPIC_PATHS:
            self.model_request("anthropic", raw)
        else:
            self.send_json(404, {"error": {"message": f"no such path {path}", "code": 404}})

    def record(self, method, path, body=None, raw=None):
        """Appends a request to /_requests (keys only as hashes); returns the record."""
        headers = {k.lower(): ("<redacted>" if k.lower() in ("authorization", "x-api-key") else v)
                   for k, v in self.headers.items()}
        rec = {"method": method, "path": path, "headers": headers, "auth": auth_record(self.headers),
               "body": body, "step": None, "status": None, "started_at": time.time(), "duration_ms": None}
        if raw is not None:
            rec["raw"] = raw
        rec["images"] = request_images(body)
        with self.state.lock:
            rec["n"] = len(self.state.requests)
            self.state.requests.append(rec)
        return rec

    def list_models(self, path):
        rec = self.record("GET", path)
        if self.headers.get("anthropic-version"):
            data = [{"type": "model", "id": m, "display_name": name, "created_at": "2025-01-01T00:00:00Z"}
                    for m, name, _ in CATALOG]
            body = {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}
        else:
            body = {"object": "list", "data": [
                {"id": m, "name": name, "context_length": 200000,
                 "supported_parameters": ["max_tokens", "temperature"] + (["tools", "tool_choice"] if tools else [])}
                for m, name, tools in CATALOG]}
        with self.state.lock:
            rec["status"] = 200
            rec["duration_ms"] = 0.0
        self.send_json(200, body)

    def model_request(self, fmt, raw):
        t0 = time.monotonic()
        text = raw.decode("utf-8", errors="replace")
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        rec = self.record("POST", urlsplit(self.path).path, body, text if body is None else None)
        st = self.state
        with st.lock:
            step, idx, status_override = None, None, None
            try:
                if body is None:
                    raise BadRequest("the body is not valid JSON")
                if fmt == "openai":
                    validate_openai(body)
                else:
                    validate_anthropic(body, {k.lower(): v for k, v in self.headers.items()})
                rec["cache_breakpoints"] = validate_cache_control(body)
            except BadRequest as e:
                status_override = (e.status, error_body(fmt, e.status, str(e), e.kind if fmt == "anthropic" else None))
            if status_override is None and body.get("model") in NO_TOOLS and body.get("tools"):
                status_override = (404, error_body(fmt, 404, NO_TOOLS_MESSAGE))
            outage = None
            if status_override is None and time.monotonic() < st.outage_until:
                outage = st.outage_mode
            elif status_override is None and not st.failure and st.index < len(st.steps) \
                    and "outage" in st.steps[st.index]:
                o = st.steps[st.index]["outage"]
                rec["step"] = st.index
                st.index += 1
                st.outage_until = time.monotonic() + o["ms"] / 1000.0
                st.outage_mode = outage = o.get("mode", "503")
            if outage is not None:
                rec["outage"] = True
                if outage == "refuse":
                    rec["status"] = None
                    rec["duration_ms"] = (time.monotonic() - t0) * 1000.0
                else:
                    status_override = (503, error_body(fmt, 503, "the provider is down (scripted outage)",
                                                       "overloaded_error" if fmt == "anthropic" else None))
            elif status_override is None:
                if st.failure:
                    status_override = (400, error_body(fmt, 400, st.failure))
                elif st.index >= len(st.steps):
                    status_override = (400, error_body(fmt, 400, "script exhausted"))
                else:
                    idx = st.index
                    step = st.steps[idx]
                    st.index += 1
                    rec["step"] = idx
                    needle = step.get("match")
                    if needle is not None and not request_contains(text, body, needle):
                        st.failure = f"script step {idx}: request does not contain {needle!r}"
                        sys.stderr.write(f"model_server: FAILED: {st.failure}\n")
                        sys.stderr.flush()
                        status_override = (400, error_body(fmt, 400, st.failure))
            if outage == "refuse":
                self.refuse()
                return
            rec["status"] = status_override[0] if status_override else self.status_of(step)
        if step is not None and step.get("delay_ms"):
            # A scripted slow provider (timeouts, a kernel killed mid-call):
            # the delay is what the test asks for, not a wait for something.
            time.sleep(step["delay_ms"] / 1000.0)
        if step is not None and step.get("hold"):
            self.state.hold(step["hold"])
        try:
            if status_override:
                self.send_json(*status_override)
            else:
                self.answer(fmt, step, idx, body.get("model", ""))
        finally:
            with st.lock:
                rec["duration_ms"] = (time.monotonic() - t0) * 1000.0

    @staticmethod
    def status_of(step):
        return step["http_error"] if "http_error" in step else 200

    def answer(self, fmt, step, idx, model):
        status, headers = 200, None
        if "http_error" in step:
            status = step["http_error"]
            headers = step.get("headers")
            b = step.get("body")
            if b is None:
                data = json.dumps(error_body(fmt, status, f"scripted HTTP {status}")).encode()
            elif isinstance(b, str):
                data = b.encode()
            else:
                data = json.dumps(b).encode()
        elif "error_in_200" in step:
            e = step["error_in_200"]
            data = json.dumps(error_body(fmt, 200, e.get("message", "error"), e.get("code"))).encode()
        elif "malformed" in step:
            data = step["malformed"].encode()
        elif "empty" in step:
            if fmt == "openai":
                body = {"id": f"chatcmpl-script-{idx}", "object": "chat.completion", "created": 0, "model": model,
                        "choices": []}
            else:
                body = {"id": f"msg_script_{idx}", "type": "message", "role": "assistant", "model": model,
                        "content": [], "stop_reason": "end_turn", "stop_sequence": None,
                        "usage": {"input_tokens": 100, "output_tokens": 0}}
            data = json.dumps(body).encode()
        elif fmt == "openai":
            data = json.dumps(openai_reply(step, idx, model)).encode()
        else:
            data = json.dumps(anthropic_reply(step, idx, model)).encode()
        self.send_raw(status, data, headers, step.get("cut"))


def main():
    ap = argparse.ArgumentParser(description="scripted model server for tests")
    ap.add_argument("--script", help="JSON script file")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (the container test: the container network's gateway)")
    ap.add_argument("--port-file")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    steps = []
    if args.script:
        try:
            with open(args.script, encoding="utf-8") as f:
                steps = parse_script(json.load(f))
        except (OSError, ValueError) as e:
            sys.stderr.write(f"model_server: {args.script}: {e}\n")
            return 2
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.state = State(steps)
    server.verbose = args.verbose
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    print(f"PORT {port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
