# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Smoke tests of an OpenAI-compatible server (SGLang) and the diagnosis of its failures.

The logic behind the `gpufleet.llm_server.openai_smoke_test` module; unit tests import it directly.
Standard library only on the target. HTTP goes through Ansible's own URL helper
(`ansible.module_utils.urls.open_url`), which AnsiballZ ships with the module: no `requests` on
the target, and proxies / `validate_certs` behave like in every other Ansible module.

Each check returns a dict (see `CheckResult`): name, status (passed/failed/skipped), message,
latency_s, tokens_per_s, completion_tokens, diagnosis (the likely cause) and variable (the
profile variable to change). The diagnoses come from failures seen on real SGLang deployments:
raw `<|tool_calls_section_begin|>` in content (no tool-call parser), the model listed under its
file path (no served_model_name), `matched_stop: "NaN happened"` / `!!!!` (a wrong FP4 / MoE
backend on SM120), `<think>` in content (no reasoning parser).
"""

from __future__ import absolute_import, division, print_function

import json
import re
import threading
import time

from urllib.error import HTTPError, URLError

from ansible.module_utils.urls import open_url


ALL_CHECKS = ("models", "chat", "tools", "reasoning", "stream", "concurrency")

DEFAULT_CHAT_PROMPT = "What is the capital of France? Answer with one word."
DEFAULT_CHAT_EXPECT = "Paris"
DEFAULT_TOOL_PROMPT = "Use the get_weather function to get the weather in Paris."
DEFAULT_REASONING_PROMPT = "What is 17 + 25? Think it through briefly, then give the number."

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city name, e.g. Paris"},
            },
            "required": ["city"],
        },
    },
}

# Raw tool-call markup that reaches `content` when the server's tool-call parser is missing or
# does not match the model (SGLang's formats, docs sglang-facts.md "HTTP surface").
TOOL_MARKUP = (
    # (format, regex, the parser that turns it into tool_calls)
    ("kimi_k2", re.compile(r"<\|tool_calls?_section_begin\|>|<\|tool_call_begin\|>|<\|tool_call_argument_begin\|>"),
     "kimi_k2"),
    ("qwen3_coder", re.compile(r"<function=[^>\s]+>|<parameter=[^>\s]+>"), "qwen3_coder"),
    ("hermes", re.compile(r"<tool_call>\s*\{"), "qwen25 (Qwen2.5/Qwen3 models) or hermes"),
    ("generic", re.compile(r"</?tool_call>|<\|tool_call\|>|\[TOOL_CALLS\]|<\|python_tag\|>"), None),
)
THINK_MARKUP = re.compile(r"</?think>")
NAN_STOP = "NaN happened"
# Degenerate output: the FP4 NaN failure printed `!!!!!!`; long runs of one character or one word.
DEGENERATE = (
    re.compile(r"([!?¿¡])\1{3,}"),
    re.compile(r"(\S)\1{11,}"),
    re.compile(r"\b(\w+)\b(?:\W+\1\b){7,}", re.IGNORECASE),
)
NAN_FIX = ("NaN logits or degenerate output: the FP4 GEMM / MoE runner backend produces garbage on this GPU "
           "(flashinfer_cutlass FP4 GEMM race on SM120, flashinfer#2708). Set fp4_gemm_backend: flashinfer_cudnn "
           "and moe_runner_backend: flashinfer_cutlass in the profile")


class SmokeError(Exception):
    """A request failed at the HTTP level (connection, status, JSON)."""

    def __init__(self, message, status=None, body=None, diagnosis=None, variable=None):
        super(SmokeError, self).__init__(message)
        self.status = status
        self.body = body
        self.diagnosis = diagnosis
        self.variable = variable


def profile_var(profile, key):
    """How a message names a profile variable: llm_server_models['kimi-k2.5'].tool_call_parser."""
    if profile:
        return "llm_server_models['%s'].%s" % (profile, key)
    return "the profile's %s" % key


class Client:
    """Minimal OpenAI-API client over ansible.module_utils.urls.open_url."""

    def __init__(self, base_url, api_key=None, timeout=120, validate_certs=True, profile=None):
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        self.api_key = api_key
        self.timeout = timeout
        self.validate_certs = validate_certs
        self.profile = profile

    def _headers(self, extra=None):
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = "Bearer %s" % self.api_key
        headers.update(extra or {})
        return headers

    def open(self, path, payload=None, timeout=None, extra_headers=None):
        data = None
        headers = self._headers(extra_headers)
        if payload is not None:
            data = json.dumps(payload).encode("utf-8")
            headers["Content-Type"] = "application/json"
        url = self.base_url + path
        try:
            return open_url(url, data=data, headers=headers, method="POST" if data is not None else "GET",
                            timeout=timeout or self.timeout, validate_certs=self.validate_certs,
                            follow_redirects="safe", use_netrc=False)
        except HTTPError as exc:
            body = ""
            try:
                body = exc.read().decode("utf-8", "replace")[:2000]
            except Exception:  # pylint: disable=broad-except
                body = ""
            raise self._http_error(url, exc.code, body)
        except (URLError, OSError, ValueError) as exc:
            raise SmokeError(
                "%s: %s" % (url, getattr(exc, "reason", exc)),
                diagnosis="The server does not answer at %s: check that the unit is running and that "
                          "the profile's host/port match what the test uses." % self.base_url,
                variable=profile_var(self.profile, "port"))

    def _http_error(self, url, code, body):
        if code in (401, 403):
            return SmokeError(
                "%s: HTTP %s %s" % (url, code, body[:200]), status=code, body=body,
                diagnosis="The API key was rejected: llm_server_api_key must equal the server's --api-key.",
                variable="llm_server_api_key")
        if code == 404:
            return SmokeError("%s: HTTP 404 %s" % (url, body[:200]), status=code, body=body,
                              diagnosis="The endpoint does not exist: the URL is not an OpenAI-compatible "
                                        "server (check openai_smoke_test_base_url).",
                              variable="openai_smoke_test_base_url")
        if code == 503:
            return SmokeError("%s: HTTP 503 (server still starting or overloaded) %s" % (url, body[:200]),
                              status=code, body=body)
        return SmokeError("%s: HTTP %s %s" % (url, code, body[:300]), status=code, body=body)

    def get_json(self, path, timeout=None):
        resp = self.open(path, timeout=timeout)
        return _decode_json(resp.read(), self.base_url + path)

    def post_json(self, path, payload, timeout=None):
        resp = self.open(path, payload=payload, timeout=timeout)
        return _decode_json(resp.read(), self.base_url + path)

    def status(self, path, timeout=5):
        """HTTP status of GET path; None when nothing answers."""
        try:
            resp = self.open(path, timeout=timeout)
            resp.read()
            return resp.status if hasattr(resp, "status") else resp.getcode()
        except SmokeError as exc:
            return exc.status


def _decode_json(raw, url):
    try:
        return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except ValueError as exc:
        raise SmokeError("%s: response is not JSON (%s): %r" % (url, exc, raw[:200]))


def new_result(name):
    return {
        "name": name,
        "status": "failed",
        "message": "",
        "latency_s": None,
        "tokens_per_s": None,
        "completion_tokens": None,
        "diagnosis": None,
        "variable": None,
    }


def _fail(result, message, diagnosis=None, variable=None):
    result["status"] = "failed"
    result["message"] = message
    if diagnosis:
        result["diagnosis"] = diagnosis
    if variable:
        result["variable"] = variable
    return result


def _from_error(result, exc):
    return _fail(result, str(exc), exc.diagnosis, exc.variable)


def _short(text, limit=160):
    text = "" if text is None else str(text)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + "..."


def find_tool_markup(text):
    """Return (format, recommended parser) of raw tool-call markup in TEXT, or None."""
    if not text:
        return None
    for fmt, regex, parser in TOOL_MARKUP:
        if regex.search(text):
            return fmt, parser
    return None


def tool_markup_diagnosis(fmt, parser, configured, profile):
    var = profile_var(profile, "tool_call_parser")
    if parser is None:
        return ("Raw tool-call markup is in content instead of structured tool_calls: the server has no "
                "tool-call parser for this model's format. Set %s (currently %s) to the parser of the "
                "model's tool-call format." % (var, configured or "unset"), var)
    if configured and configured == parser:
        return ("Raw %s tool-call markup is in content although %s is %s: the running server was not "
                "started with --tool-call-parser %s (restart the service) or its SGLang is too old for it."
                % (fmt, var, configured, configured), var)
    return ("Raw %s tool-call markup is in content: the tool-call parser is missing or wrong. Set %s: %s "
            "(currently %s)." % (fmt, var, parser, configured or "unset"), var)


def degenerate(text):
    """Return the degenerate run found in TEXT (e.g. '!!!!'), or None."""
    if not text:
        return None
    for regex in DEGENERATE:
        match = regex.search(text)
        if match:
            return match.group(0)
    return None


def _speed(body, latency):
    """latency_s, completion_tokens (from the answer's usage) and tokens_per_s of one request."""
    tokens = (body.get("usage") or {}).get("completion_tokens")
    tokens = tokens if isinstance(tokens, int) else None
    return {"latency_s": round(latency, 3), "completion_tokens": tokens, "tokens_per_s": _rate(tokens, latency)}


def _rate(tokens, seconds):
    if tokens and seconds and seconds > 0:
        return round(tokens / seconds, 2)
    return None


def _first_choice(body):
    choices = body.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        raise SmokeError("response has no choices: %s" % _short(json.dumps(body), 300))
    return choices[0]


class SmokeTest:
    """Runs the checks. `params` are the module's options (see the module's DOCUMENTATION)."""

    def __init__(self, params, client=None):
        self.p = params
        self.profile = params.get("profile")
        self.client = client or Client(params["base_url"], params.get("api_key"), params.get("timeout", 120),
                                       params.get("validate_certs", True), self.profile)
        self.model = params.get("served_model_name")
        self.tool_parser = params.get("tool_call_parser") or None
        self.reasoning_parser = params.get("reasoning_parser") or None

    # ------------------------------------------------------------------ helpers
    def _chat_payload(self, prompt, **extra):
        payload = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": self.p.get("max_tokens", 1024),
        }
        payload.update(extra)
        return payload

    def _timed_post(self, payload):
        started = time.monotonic()
        body = self.client.post_json("/v1/chat/completions", payload)
        return body, time.monotonic() - started

    # ------------------------------------------------------------------ checks
    def check_models(self):
        result = new_result("models")
        started = time.monotonic()
        try:
            body = self.client.get_json("/v1/models")
        except SmokeError as exc:
            return _from_error(result, exc)
        result["latency_s"] = round(time.monotonic() - started, 3)
        ids = [str(m.get("id")) for m in (body.get("data") or []) if isinstance(m, dict)]
        result["models"] = ids
        var = profile_var(self.profile, "served_model_name")
        if ids == [self.model]:
            result["status"] = "passed"
            result["message"] = "/v1/models lists exactly %r" % self.model
            return result
        if self.model in ids:
            return _fail(result, "/v1/models lists %s; expected only %r" % (ids, self.model),
                         "The server exposes more than the expected model: check that one server answers "
                         "on this port and that %s is the only served name." % var, var)
        pathlike = [i for i in ids if i.startswith("/") or i.count("/") >= 1 or i.startswith("~")]
        if pathlike:
            return _fail(result, "/v1/models lists %s, not %r" % (ids, self.model),
                         "The model is exposed under its file path %r: SGLang was started without "
                         "--served-model-name. Set %s: %s." % (pathlike[0], var, self.model), var)
        return _fail(result, "/v1/models lists %s, not %r" % (ids, self.model),
                     "The served model name differs from what clients ask for: set %s to the name "
                     "clients use (the smoke test expects %r)." % (var, self.model), var)

    def _judge_chat(self, result, body, latency):
        """Shared by chat and concurrency: the answer is the expected one, and not garbage."""
        try:
            choice = _first_choice(body)
        except SmokeError as exc:
            return _from_error(result, exc)
        message = choice.get("message") or {}
        content = message.get("content") or ""
        reasoning = message.get("reasoning_content") or ""
        result.update(_speed(body, latency))
        result["content"] = _short(content)
        result["finish_reason"] = choice.get("finish_reason")
        result["matched_stop"] = choice.get("matched_stop")
        if choice.get("matched_stop") == NAN_STOP:
            backends = (profile_var(self.profile, "fp4_gemm_backend"), profile_var(self.profile, "moe_runner_backend"))
            return _fail(result, "matched_stop is %r (content %r)" % (NAN_STOP, _short(content, 60)),
                         NAN_FIX + " (%s, %s)." % backends, profile_var(self.profile, "fp4_gemm_backend"))
        bad = degenerate(content)
        if bad:
            return _fail(result, "degenerate content %r (run %r)" % (_short(content, 60), _short(bad, 20)),
                         NAN_FIX + ".", profile_var(self.profile, "fp4_gemm_backend"))
        if not content.strip():
            if choice.get("finish_reason") == "length" and reasoning:
                return _fail(result, "content is empty: all %s tokens went to reasoning_content"
                             % self.p.get("max_tokens", 1024),
                             "The model spent max_tokens thinking: raise openai_smoke_test_max_tokens.",
                             "openai_smoke_test_max_tokens")
            return _fail(result, "content is empty (finish_reason %r)" % choice.get("finish_reason"),
                         "The server returned no text: read the unit's journal for errors.")
        if THINK_MARKUP.search(content):
            var = profile_var(self.profile, "reasoning_parser")
            return _fail(result, "content carries <think> markup: %r" % _short(content, 80),
                         "Reasoning leaks into content: set %s (currently %s) so SGLang moves it to "
                         "reasoning_content." % (var, self.reasoning_parser or "unset"), var)
        expect = self.p.get("chat_expect") or DEFAULT_CHAT_EXPECT
        if not re.search(expect, content, re.IGNORECASE):
            return _fail(result, "answer %r does not match %r" % (_short(content, 80), expect),
                         "A wrong answer at temperature 0 to a trivial question: the model is broken or "
                         "not the expected one (check the profile's model_path and quantization).",
                         profile_var(self.profile, "model_path"))
        result["status"] = "passed"
        result["message"] = "answered %r in %.2fs" % (_short(content, 60), latency)
        return result

    def check_chat(self):
        result = new_result("chat")
        try:
            body, latency = self._timed_post(self._chat_payload(self.p.get("chat_prompt") or DEFAULT_CHAT_PROMPT))
        except SmokeError as exc:
            return _from_error(result, exc)
        return self._judge_chat(result, body, latency)

    def check_tools(self):
        result = new_result("tools")
        tool_choice = self.p.get("tool_choice") or "auto"
        if tool_choice == "function":
            tool_choice = {"type": "function", "function": {"name": WEATHER_TOOL["function"]["name"]}}
        payload = self._chat_payload(self.p.get("tool_prompt") or DEFAULT_TOOL_PROMPT,
                                     tools=[WEATHER_TOOL], tool_choice=tool_choice)
        try:
            body, latency = self._timed_post(payload)
            choice = _first_choice(body)
        except SmokeError as exc:
            return _from_error(result, exc)
        message = choice.get("message") or {}
        content = message.get("content") or ""
        calls = message.get("tool_calls") or []
        result.update(_speed(body, latency),
                      content=_short(content), finish_reason=choice.get("finish_reason"), tool_calls=calls)
        var = profile_var(self.profile, "tool_call_parser")
        if choice.get("matched_stop") == NAN_STOP or degenerate(content):
            return _fail(result, "NaN / degenerate output instead of a tool call: %r" % _short(content, 60),
                         NAN_FIX + ".", profile_var(self.profile, "fp4_gemm_backend"))
        markup = find_tool_markup(content) or find_tool_markup(message.get("reasoning_content"))
        if markup:
            diagnosis, variable = tool_markup_diagnosis(markup[0], markup[1], self.tool_parser, self.profile)
            return _fail(result, "raw %s tool-call markup in content: %r" % (markup[0], _short(content, 120)),
                         diagnosis, variable)
        if not calls:
            return _fail(result, "no structured tool_calls (finish_reason %r, content %r)"
                         % (choice.get("finish_reason"), _short(content, 120)),
                         "The server did not turn the model's tool call into tool_calls: set %s (currently "
                         "%s) to the parser of the model's tool-call format (kimi_k2 for Kimi K2.x, "
                         "qwen3_coder for Qwen3.5/Qwen3-Coder, see docs/smoke-tests.md)."
                         % (var, self.tool_parser or "unset"), var)
        call = calls[0] if isinstance(calls[0], dict) else {}
        function = call.get("function") or {}
        name = function.get("name")
        if name != WEATHER_TOOL["function"]["name"]:
            return _fail(result, "tool_calls[0] calls %r, expected 'get_weather'" % name,
                         "The tool call names an unknown function: the tool-call parser %s does not match "
                         "the model's format." % (self.tool_parser or "(unset)"), var)
        raw = function.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError as exc:
            return _fail(result, "tool_calls[0].function.arguments is not JSON (%s): %r" % (exc, _short(raw, 120)),
                         "Tool-call arguments do not parse: the tool-call parser %s does not match the "
                         "model's format (or the output is degenerate)." % (self.tool_parser or "(unset)"), var)
        problems = schema_problems(args, WEATHER_TOOL["function"]["parameters"])
        if problems:
            return _fail(result, "tool_calls[0] arguments %r do not match the schema: %s"
                         % (_short(json.dumps(args), 120), "; ".join(problems)),
                         "Tool-call arguments do not match the tool's schema: the parser %s or the chat "
                         "template mangles arguments." % (self.tool_parser or "(unset)"), var)
        result["status"] = "passed"
        result["message"] = "structured tool call get_weather(%s) in %.2fs" % (_short(json.dumps(args), 60), latency)
        return result

    def check_reasoning(self):
        result = new_result("reasoning")
        if not self.reasoning_parser:
            result["status"] = "skipped"
            result["message"] = "the profile sets no reasoning_parser"
            return result
        try:
            body, latency = self._timed_post(self._chat_payload(self.p.get("reasoning_prompt")
                                                                or DEFAULT_REASONING_PROMPT))
            choice = _first_choice(body)
        except SmokeError as exc:
            return _from_error(result, exc)
        message = choice.get("message") or {}
        content = message.get("content") or ""
        reasoning = message.get("reasoning_content") or ""
        result.update(_speed(body, latency),
                      content=_short(content), reasoning_content=_short(reasoning))
        var = profile_var(self.profile, "reasoning_parser")
        if THINK_MARKUP.search(content):
            return _fail(result, "content carries <think> markup: %r" % _short(content, 120),
                         "Reasoning leaks into content although the profile sets reasoning_parser %s: the "
                         "parser does not match the model's format or the running server was not started "
                         "with --reasoning-parser %s (restart the service)."
                         % (self.reasoning_parser, self.reasoning_parser), var)
        if choice.get("matched_stop") == NAN_STOP or degenerate(content) or degenerate(reasoning):
            return _fail(result, "NaN / degenerate output in reasoning check", NAN_FIX + ".",
                         profile_var(self.profile, "fp4_gemm_backend"))
        if not reasoning.strip():
            return _fail(result, "reasoning_content is empty (content %r)" % _short(content, 80),
                         "No reasoning was separated: %s (%s) does not match the model, or thinking is off in "
                         "the chat template." % (var, self.reasoning_parser), var)
        result["status"] = "passed"
        result["message"] = "reasoning_content filled (%d chars), content clean" % len(reasoning)
        return result

    def check_stream(self):
        result = new_result("stream")
        payload = self._chat_payload(self.p.get("chat_prompt") or DEFAULT_CHAT_PROMPT, stream=True)
        started = time.monotonic()
        first = None
        chunks = 0
        done = False
        parts = []
        finish = None
        matched = None
        try:
            resp = self.client.open("/v1/chat/completions", payload=payload,
                                    extra_headers={"Accept": "text/event-stream"})
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                try:
                    event = json.loads(data)
                except ValueError:
                    return _fail(result, "an SSE chunk is not JSON: %r" % _short(data, 120))
                chunks += 1
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        if first is None:
                            first = time.monotonic() - started
                        parts.append(delta["content"])
                    finish = choice.get("finish_reason") or finish
                    matched = choice.get("matched_stop") or matched
        except SmokeError as exc:
            return _from_error(result, exc)
        except (OSError, ValueError) as exc:
            return _fail(result, "stream broke after %d chunks: %s" % (chunks, exc),
                         "The connection dropped mid-stream: the server may have crashed (read the journal).")
        latency = time.monotonic() - started
        content = "".join(parts)
        result.update(latency_s=round(latency, 3), chunks=chunks, content=_short(content),
                      time_to_first_token_s=round(first, 3) if first is not None else None,
                      completion_tokens=len(parts), tokens_per_s=_rate(len(parts), latency),
                      finish_reason=finish)
        if not done:
            return _fail(result, "the stream ended without 'data: [DONE]' after %d chunks" % chunks,
                         "The SSE stream was cut off: the server may have crashed (read the journal).")
        if matched == NAN_STOP or degenerate(content):
            return _fail(result, "NaN / degenerate streamed content %r" % _short(content, 60), NAN_FIX + ".",
                         profile_var(self.profile, "fp4_gemm_backend"))
        if not parts:
            return _fail(result, "%d SSE chunks but no content" % chunks,
                         "The stream carried no text: read the unit's journal.")
        result["status"] = "passed"
        result["message"] = "%d chunks ending in [DONE], first token after %.2fs" % (chunks, first or 0.0)
        return result

    def check_concurrency(self):
        result = new_result("concurrency")
        count = int(self.p.get("concurrency") or 4)
        payload = self._chat_payload(self.p.get("chat_prompt") or DEFAULT_CHAT_PROMPT)
        outcomes = [None] * count

        def worker(i):
            sub = new_result("concurrency[%d]" % i)
            try:
                body, latency = self._timed_post(payload)
                outcomes[i] = self._judge_chat(sub, body, latency)
            except SmokeError as exc:
                outcomes[i] = _from_error(sub, exc)
            except Exception as exc:  # pylint: disable=broad-except
                outcomes[i] = _fail(sub, "%s: %s" % (type(exc).__name__, exc))

        started = time.monotonic()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - started
        tokens = sum(o.get("completion_tokens") or 0 for o in outcomes)
        failed = [o for o in outcomes if o["status"] != "passed"]
        result.update(latency_s=round(wall, 3), completion_tokens=tokens or None, tokens_per_s=_rate(tokens, wall),
                      requests=count, passed_requests=count - len(failed),
                      latencies_s=[o.get("latency_s") for o in outcomes])
        if failed:
            worst = failed[0]
            return _fail(result, "%d of %d parallel requests failed; first: %s" % (len(failed), count,
                                                                                   worst["message"]),
                         worst.get("diagnosis") and ("Under load: " + worst["diagnosis"]), worst.get("variable"))
        result["status"] = "passed"
        result["message"] = "%d parallel requests passed in %.2fs" % (count, wall)
        return result

    # ------------------------------------------------------------------ all
    def run(self, checks):
        results = {}
        for name in checks:
            results[name] = getattr(self, "check_" + name)()
        return results


def schema_problems(args, schema):
    """Problems of ARGS against a simple JSON schema (object with typed properties, required)."""
    problems = []
    if not isinstance(args, dict):
        return ["arguments are %s, not an object" % type(args).__name__]
    props = schema.get("properties") or {}
    for key in schema.get("required") or []:
        if key not in args:
            problems.append("missing required %r" % key)
    types = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict,
             "array": list}
    for key, value in args.items():
        spec = props.get(key)
        if spec is None:
            if schema.get("additionalProperties") is False:
                problems.append("unexpected property %r" % key)
            continue
        expected = types.get(spec.get("type"))
        if expected and not isinstance(value, expected):
            problems.append("%r is %s, schema says %s" % (key, type(value).__name__, spec.get("type")))
        elif spec.get("type") == "string" and not str(value).strip():
            problems.append("%r is empty" % key)
    return problems


def summarize(results):
    """One line per check, for the play output."""
    lines = []
    for name, res in results.items():
        extra = []
        if res.get("latency_s") is not None:
            extra.append("%.2fs" % res["latency_s"])
        if res.get("tokens_per_s"):
            extra.append("%.1f tok/s" % res["tokens_per_s"])
        line = "%-11s %-7s %s%s" % (name, res["status"].upper(), res.get("message", ""),
                                    (" [" + ", ".join(extra) + "]") if extra else "")
        if res["status"] == "failed" and res.get("diagnosis"):
            line += " -> " + res["diagnosis"]
        lines.append(line)
    return lines
