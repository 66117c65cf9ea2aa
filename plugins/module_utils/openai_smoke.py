# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Smoke tests of an OpenAI-compatible server (SGLang) and the diagnosis of its failures.

The logic behind the `gpufleet.llm_server.openai_smoke_test` module; unit tests import it directly.
Standard library only on the target. HTTP goes through `openai_smoke_http.Client` (Ansible's own
`open_url` underneath: no `requests` on the target; proxies and `validate_certs` as in every module),
which raises only classified `RequestFailed` errors, so no server behaviour can crash a check.

Each check returns a dict (see `new_result`): name, status (passed/failed/skipped), message,
latency_s, tokens_per_s, completion_tokens, cause (a stable key), diagnosis (what it means and the
fix), variable (what to change, or None), fault (deployment/test_settings). `SmokeTest.run` bounds
the whole suite by `suite_timeout` and every request by `timeout` (streams included), stops sending
requests after a failure no request can get past (refused, wrong key, ...), and reports each cause
once with the checks it explains (`SmokeTest.causes`). The diagnoses come from failures seen on real
SGLang deployments (openai_smoke_causes).
"""

from __future__ import annotations

import json
import threading
import time

from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke_causes import (
    BLOCKING,
    TEST_SETTINGS,
    Answer,
    Context,
    cause,
    consolidate,
    from_error_status,
    from_failure,
    judge_reasoning,
    judge_text,
    judge_tool,
    profile_var,
    short,
)
# Re-exported: callers and unit tests use them through this module.
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke_causes import (  # noqa: F401 pylint: disable=unused-import
    degenerate,
    find_tool_markup,
    tool_markup_diagnosis,
)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke_http import (
    Budget,
    Client,
    RequestFailed,
    error_message,
)

ALL_CHECKS = ("models", "chat", "tools", "reasoning", "stream", "stream_tools", "concurrency")

DEFAULT_CHAT_PROMPT = "What is the capital of France? Answer with one word."
DEFAULT_CHAT_EXPECT = "Paris"
DEFAULT_TOOL_PROMPT = "Use the get_weather function to get the weather in Paris."
DEFAULT_REASONING_PROMPT = "What is 17 + 25? Think it through briefly, then give the number."
CHAT_PATH = "/v1/chat/completions"

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


def new_result(name):
    return {
        "name": name,
        "status": "failed",
        "message": "",
        "latency_s": None,
        "tokens_per_s": None,
        "completion_tokens": None,
        "cause": None,
        "diagnosis": None,
        "variable": None,
        "fault": None,
    }


def _fail(result, found, message=None):
    """Mark RESULT failed with the cause FOUND (a dict from openai_smoke_causes)."""
    result["status"] = "failed"
    result["message"] = message or found.get("message") or ""
    for key in ("cause", "diagnosis", "variable", "fault"):
        result[key] = found.get(key)
    return result


def _pass(result, message):
    result["status"] = "passed"
    result["message"] = message
    return result


def _speed(body, latency):
    """latency_s, completion_tokens (from the answer's usage) and tokens_per_s of one request."""
    usage = body.get("usage") if isinstance(body, dict) else None
    tokens = (usage or {}).get("completion_tokens") if isinstance(usage, dict) else None
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
    return {"latency_s": round(latency, 3), "completion_tokens": tokens, "tokens_per_s": _rate(tokens, latency)}


def _rate(tokens, seconds):
    if tokens and seconds and seconds > 0:
        return round(tokens / seconds, 2)
    return None


class _NoChoice(Exception):
    pass


def _first_choice(body):
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _NoChoice("the answer has no choices: %s" % short(json.dumps(body), 300))
    return choices[0]


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


class _Stream:
    """An SSE chat answer assembled from its chunks (content, reasoning, tool-call deltas by index)."""

    def __init__(self):
        self.chunks = 0
        self.content = []
        self.reasoning = []
        self.calls = {}
        self.argument_pieces = 0
        self.finish = None
        self.matched = None
        self.done = False
        self.first = None
        self.error = None
        self.usage_tokens = None

    def add(self, event, elapsed):
        if "error" in event and not event.get("choices"):
            self.error = event["error"]
            return
        self.chunks += 1
        usage = event.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.usage_tokens = usage["completion_tokens"]
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                continue
            for key, parts in (("content", self.content), ("reasoning_content", self.reasoning)):
                piece = delta.get(key)
                if isinstance(piece, str) and piece:
                    parts.append(piece)
                    if self.first is None:
                        self.first = elapsed
            for call in delta.get("tool_calls") or []:
                self._merge_call(call, elapsed)
            self.finish = choice.get("finish_reason") or self.finish
            self.matched = choice.get("matched_stop") or self.matched

    def _merge_call(self, call, elapsed):
        # SGLang streams a tool call as deltas of one index: the first with id and name (arguments
        # "" or a first piece), the next with id/name null and the next piece of the arguments
        # (serving_chat._process_tool_call_stream); the pieces concatenate to the JSON arguments.
        if not isinstance(call, dict):
            return
        index = call.get("index") if isinstance(call.get("index"), int) else len(self.calls)
        entry = self.calls.setdefault(index, {"id": None, "index": index, "type": "function",
                                              "function": {"name": None, "arguments": ""}})
        if call.get("id"):
            entry["id"] = call["id"]
        function = call.get("function") or {}
        if isinstance(function, dict):
            if function.get("name") and not entry["function"]["name"]:
                entry["function"]["name"] = function["name"]
            if isinstance(function.get("arguments"), str) and function["arguments"]:
                entry["function"]["arguments"] += function["arguments"]
                self.argument_pieces += 1
        if self.first is None:
            self.first = elapsed

    def answer(self):
        calls = [self.calls[i] for i in sorted(self.calls)]
        return Answer("".join(self.content), "".join(self.reasoning), calls, self.finish, self.matched)


class SmokeTest:
    """Runs the checks. `params` are the module's options (see the module's DOCUMENTATION)."""

    def __init__(self, params, client=None, clock=time.monotonic):
        self.p = params
        self.clock = clock
        self.profile = params.get("profile")
        self.ctx = Context(params)
        self.timeout = params.get("timeout", 120)
        self.client = client or Client(params["base_url"], params.get("api_key"), self.timeout,
                                       params.get("validate_certs", True), clock=clock)
        self.ctx.base_url = self.client.base_url
        self.model = params.get("served_model_name")
        self.tool_parser = params.get("tool_call_parser") or None
        self.reasoning_parser = params.get("reasoning_parser") or None
        self.budget = Budget(params.get("suite_timeout"), clock)
        self.causes = []
        self.results = {}

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

    def _tool_payload(self, **extra):
        tool_choice = self.p.get("tool_choice") or "auto"
        if tool_choice == "function":
            tool_choice = {"type": "function", "function": {"name": WEATHER_TOOL["function"]["name"]}}
        return self._chat_payload(self.p.get("tool_prompt") or DEFAULT_TOOL_PROMPT, tools=[WEATHER_TOOL],
                                  tool_choice=tool_choice, **extra)

    def _timed_post(self, payload, what):
        started = self.clock()
        body = self.client.post_json(CHAT_PATH, payload, timeout=self.timeout, budget=self.budget)
        latency = self.clock() - started
        self.ctx.answered.append((what, latency))
        return body, latency

    def _transport(self, result, exc, share=None, where=None):
        path = exc.url.replace(self.client.base_url, "") or exc.url
        where = where or ("%s %s" % ("GET" if path == "/v1/models" else "POST", path))
        found = from_failure(exc, self.ctx, where, share)
        if exc.elapsed_s is not None and result.get("latency_s") is None:
            result["latency_s"] = round(exc.elapsed_s, 3)
        return _fail(result, found, exc.detail if share is None else "%s: %s" % (where, exc.detail))

    def _no_choice(self, result, exc):
        return _fail(result, cause("bad_answer", "The answer to POST %s is not a chat completion (%s): the server "
                                   "is not OpenAI-compatible at %s (check openai_smoke_test_base_url)."
                                   % (CHAT_PATH, exc, self.client.base_url), "openai_smoke_test_base_url"),
                     str(exc))

    # ------------------------------------------------------------------ checks
    def check_models(self):
        result = new_result("models")
        started = self.clock()
        try:
            body = self.client.get_json("/v1/models", timeout=self.timeout, budget=self.budget)
        except RequestFailed as exc:
            return self._transport(result, exc)
        result["latency_s"] = round(self.clock() - started, 3)
        self.ctx.answered.append(("GET /v1/models", self.clock() - started))
        data = body.get("data")
        ids = [str(m.get("id")) for m in (data if isinstance(data, list) else []) if isinstance(m, dict)]
        result["models"] = ids
        var = profile_var(self.profile, "served_model_name")
        if ids == [self.model]:
            return _pass(result, "/v1/models lists exactly %r" % self.model)
        if self.model in ids:
            return _fail(result, cause("models_extra", "The server exposes more than the expected model: check that "
                                       "one server answers on this port and that %s is its only served name." % var,
                                       var), "/v1/models lists %s; expected only %r" % (ids, self.model))
        pathlike = [i for i in ids if i.startswith("/") or i.count("/") >= 1 or i.startswith("~")]
        if pathlike:
            if self.profile:
                text = ("The model is exposed under its file path %r: the running server was started without "
                        "--served-model-name, although %s is %r. Restart the service so that the unit's command "
                        "line (sglang_service renders --served-model-name from the profile) applies, and check "
                        "that %s does not override it." % (pathlike[0], var, self.model,
                                                           profile_var(self.profile, "extra_args")))
            else:
                text = ("The model is exposed under its file path %r: SGLang was started without "
                        "--served-model-name; start it with --served-model-name %s." % (pathlike[0], self.model))
            return _fail(result, cause("served_model_name_missing", text, var),
                         "/v1/models lists %s, not %r" % (ids, self.model))
        return _fail(result, cause("served_model_name_other", "The server serves %s, not %r: it runs another "
                                   "configuration than %s (restart the service if the profile changed), or clients "
                                   "use another name than the server serves." % (ids, self.model, var), var),
                     "/v1/models lists %s, not %r" % (ids, self.model))

    def check_chat(self):
        result = new_result("chat")
        try:
            body, latency = self._timed_post(self._chat_payload(self.p.get("chat_prompt") or DEFAULT_CHAT_PROMPT),
                                             "POST %s (chat)" % CHAT_PATH)
            choice = _first_choice(body)
        except RequestFailed as exc:
            return self._transport(result, exc)
        except _NoChoice as exc:
            return self._no_choice(result, exc)
        return self._judge_chat(result, body, choice, latency)

    def _judge_chat(self, result, body, choice, latency):
        answer = Answer.from_choice(choice)
        result.update(_speed(body, latency))
        result.update(content=short(answer.content), finish_reason=answer.finish_reason,
                      matched_stop=answer.matched_stop)
        found = judge_text(answer, self.ctx, self.p.get("chat_expect") or DEFAULT_CHAT_EXPECT)
        if found:
            return _fail(result, found)
        return _pass(result, "answered %r in %.2fs" % (short(answer.content, 60), latency))

    def check_tools(self):
        result = new_result("tools")
        try:
            body, latency = self._timed_post(self._tool_payload(), "POST %s (tools)" % CHAT_PATH)
            choice = _first_choice(body)
        except RequestFailed as exc:
            return self._transport(result, exc)
        except _NoChoice as exc:
            return self._no_choice(result, exc)
        answer = Answer.from_choice(choice)
        result.update(_speed(body, latency), content=short(answer.content), finish_reason=answer.finish_reason,
                      tool_calls=answer.tool_calls)
        found, args = judge_tool(answer, self.ctx, WEATHER_TOOL["function"]["name"],
                                 WEATHER_TOOL["function"]["parameters"], schema_problems)
        if found:
            return _fail(result, found)
        return _pass(result, "structured tool call get_weather(%s) in %.2fs" % (short(json.dumps(args), 60), latency))

    def check_reasoning(self):
        result = new_result("reasoning")
        if not self.reasoning_parser:
            result["status"] = "skipped"
            result["message"] = "the profile sets no reasoning_parser"
            return result
        try:
            body, latency = self._timed_post(self._chat_payload(self.p.get("reasoning_prompt")
                                                                or DEFAULT_REASONING_PROMPT),
                                             "POST %s (reasoning)" % CHAT_PATH)
            choice = _first_choice(body)
        except RequestFailed as exc:
            return self._transport(result, exc)
        except _NoChoice as exc:
            return self._no_choice(result, exc)
        answer = Answer.from_choice(choice)
        result.update(_speed(body, latency), content=short(answer.content), reasoning_content=short(answer.reasoning),
                      finish_reason=answer.finish_reason)
        found = judge_reasoning(answer, self.ctx)
        if found:
            return _fail(result, found)
        return _pass(result, "reasoning_content filled (%d chars), content clean" % len(answer.reasoning))

    def _stream(self, result, payload):
        """Send a streaming request; the assembled _Stream, or a failed RESULT (returned as the 2nd item)."""
        started = self.clock()
        stream = _Stream()
        url = self.client.base_url + CHAT_PATH
        try:
            deadline = self.client.deadline(self.timeout, self.budget)
            for data in self.client.events(CHAT_PATH, payload, deadline=deadline):
                if data.strip() == "[DONE]":
                    stream.done = True
                    break
                try:
                    event = json.loads(data)
                except ValueError:
                    raise RequestFailed("stream", "an SSE event is not JSON: %r" % short(data, 120), url,
                                        phase="stream", received=stream.chunks)
                if not isinstance(event, dict):
                    raise RequestFailed("stream", "an SSE event is not a JSON object: %r" % short(data, 120), url,
                                        phase="stream", received=stream.chunks)
                stream.add(event, self.clock() - started)
        except RequestFailed as exc:
            self._stream_fields(result, stream, started)
            return stream, self._transport(result, exc, where="POST %s (stream)" % CHAT_PATH)
        self._stream_fields(result, stream, started)
        if stream.error is not None:
            inner = stream.error if isinstance(stream.error, dict) else {"message": stream.error}
            code = inner.get("code") if isinstance(inner.get("code"), int) else 500
            text = error_message({"error": inner}) or json.dumps(inner)
            found = from_error_status(code, text, self.ctx, "POST %s (stream)" % CHAT_PATH, in_stream=True)
            return stream, _fail(result, found, "error event after %d chunks: code %s %r"
                                 % (stream.chunks, code, short(text, 120)))
        if not stream.done and not stream.chunks:
            return stream, _fail(result, cause(
                "stream_empty", "POST %s (stream) was accepted (HTTP 200) and the stream ended without a single "
                "event: the server failed while starting the answer; read the unit's journal for the exception."
                % CHAT_PATH), "the stream ended without any event (no data, no 'data: [DONE]')")
        if not stream.done:
            exc = RequestFailed("cut", "the stream ended after %d chunks without 'data: [DONE]'" % stream.chunks, url,
                                phase="stream", received=stream.chunks)
            return stream, self._transport(result, exc, where="POST %s (stream)" % CHAT_PATH)
        self.ctx.answered.append(("POST %s (stream)" % CHAT_PATH, self.clock() - started))
        return stream, None

    def _stream_fields(self, result, stream, started):
        latency = self.clock() - started
        answer = stream.answer()
        tokens = stream.usage_tokens or (len(stream.content) + len(stream.reasoning)) or None
        result.update(latency_s=round(latency, 3), chunks=stream.chunks, content=short(answer.content),
                      time_to_first_token_s=round(stream.first, 3) if stream.first is not None else None,
                      completion_tokens=tokens, tokens_per_s=_rate(tokens, latency), finish_reason=answer.finish_reason,
                      matched_stop=answer.matched_stop)

    def check_stream(self):
        result = new_result("stream")
        payload = self._chat_payload(self.p.get("chat_prompt") or DEFAULT_CHAT_PROMPT, stream=True)
        stream, failed = self._stream(result, payload)
        if failed:
            return failed
        answer = stream.answer()
        found = judge_text(answer, self.ctx, self.p.get("chat_expect") or DEFAULT_CHAT_EXPECT)
        if found:
            return _fail(result, found, "streamed: " + found["message"])
        return _pass(result, "%d chunks ending in [DONE], first token after %.2fs, answer %r"
                     % (stream.chunks, stream.first or 0.0, short(answer.content, 40)))

    def check_stream_tools(self):
        result = new_result("stream_tools")
        if not self.tool_parser:
            result["status"] = "skipped"
            result["message"] = "the profile sets no tool_call_parser (the tools check covers a missing parser)"
            return result
        stream, failed = self._stream(result, self._tool_payload(stream=True))
        if failed and failed["cause"] == "stream_empty" and self.results.get("stream", {}).get("status") == "passed":
            # Seen on llama-cpp-python's chatml-function-calling: "Automatic streaming tool choice is not
            # supported" raised after the 200, so plain streams work and tool streams end empty.
            failed.update(cause="stream_tools_unsupported", variable=profile_var(self.profile, "tool_call_parser"),
                          diagnosis="The server streams plain answers (the stream check passed) but ends a stream "
                          "with tools at once, without any event: it cannot stream tool calls with this tool-call "
                          "parser (%s); streaming agent clients get nothing. Read the unit's journal for the "
                          "exception." % (self.tool_parser or "unset"))
        if failed:
            return failed
        answer = stream.answer()
        result["tool_calls"] = answer.tool_calls
        found, args = judge_tool(answer, self.ctx, WEATHER_TOOL["function"]["name"],
                                 WEATHER_TOOL["function"]["parameters"], schema_problems)
        if found and found["cause"].startswith("tool_markup:") and \
                self.results.get("tools", {}).get("status") == "passed":
            # The same tool call parsed when not streamed: the streaming parser misses markup split
            # across chunks (sglang#31119), a bug of the installed SGLang, not of the profile.
            found = dict(found, cause="stream_tool_markup", variable="sglang_build_ref", diagnosis=(
                "Only the streamed tool call leaks raw %s markup into content (the tools check parsed the same "
                "call): SGLang's streaming tool-call parser (%s) misses tags split across chunks, so streaming "
                "agent clients see markup instead of tool_calls. Build an SGLang release whose streaming parser "
                "holds back partial tags (sglang_build_ref)." % (found["cause"].split(":", 1)[1],
                                                                 self.tool_parser)))
        if found:
            return _fail(result, found, "streamed: " + found["message"])
        return _pass(result, "streamed tool call get_weather(%s): %d chunks, arguments in %d pieces"
                     % (short(json.dumps(args), 60), stream.chunks, stream.argument_pieces))

    def check_concurrency(self):
        result = new_result("concurrency")
        count = int(self.p.get("concurrency") or 4)
        payload = self._chat_payload(self.p.get("chat_prompt") or DEFAULT_CHAT_PROMPT)
        outcomes = [None] * count
        errors = [None] * count

        def worker(i):
            sub = new_result("concurrency[%d]" % i)
            try:
                body, latency = self._timed_post(payload, "a parallel chat request")
                outcomes[i] = self._judge_chat(sub, body, _first_choice(body), latency)
            except RequestFailed as exc:
                errors[i] = exc
                outcomes[i] = self._transport(sub, exc)
            except _NoChoice as exc:
                outcomes[i] = self._no_choice(sub, exc)
            except Exception as exc:  # pylint: disable=broad-except
                outcomes[i] = _fail(sub, cause("unexpected", "A parallel request failed in the smoke test itself "
                                               "(%s: %s): report this with the server's answer." %
                                               (type(exc).__name__, exc)), "%s: %s" % (type(exc).__name__, exc))

        started = self.clock()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.daemon = True
            thread.start()
        for thread in threads:
            # Each request ends at its deadline; the margin only guards against a stuck thread.
            thread.join(self.timeout + 30)
        wall = self.clock() - started
        for i, outcome in enumerate(outcomes):
            if outcome is None:
                outcomes[i] = _fail(new_result("concurrency[%d]" % i),
                                    cause("timeout", "A parallel request did not end within its deadline."),
                                    "did not end within %ss" % self.timeout)
        tokens = sum(o.get("completion_tokens") or 0 for o in outcomes)
        failed = [i for i, o in enumerate(outcomes) if o["status"] != "passed"]
        result.update(latency_s=round(wall, 3), completion_tokens=tokens or None, tokens_per_s=_rate(tokens, wall),
                      requests=count, passed_requests=count - len(failed),
                      latencies_s=[o.get("latency_s") for o in outcomes])
        if not failed:
            return _pass(result, "%d parallel requests passed in %.2fs" % (count, wall))
        by_cause = {}
        for i in failed:
            by_cause.setdefault(outcomes[i].get("cause"), []).append(i)
        key, members = max(by_cause.items(), key=lambda item: len(item[1]))
        first = members[0]
        share = "%d of %d parallel requests" % (len(members), count)
        if errors[first] is not None:
            found = from_failure(errors[first], self.ctx, "POST %s" % CHAT_PATH, share)
        else:
            found = dict(outcomes[first])
            found["diagnosis"] = "Under load (%s): %s" % (share, found.get("diagnosis") or "")
        others = "" if len(by_cause) == 1 else " (other failures: %s)" % ", ".join(
            "%d x %s" % (len(v), k) for k, v in by_cause.items() if k != key)
        return _fail(result, found, "%d of %d parallel requests failed; %s: %s%s"
                     % (len(failed), count, "all" if len(members) == len(failed) else share,
                        outcomes[first]["message"], others))

    # ------------------------------------------------------------------ all
    def run(self, checks):
        self.budget = Budget(self.p.get("suite_timeout"), self.clock)
        results = self.results = {}
        blocked = None
        for name in checks:
            if (name == "reasoning" and not self.reasoning_parser) or (name == "stream_tools" and not self.tool_parser):
                results[name] = getattr(self, "check_" + name)()  # skipped, sends nothing
                continue
            if blocked is not None:
                results[name] = self._not_run(name, blocked)
                continue
            remaining = self.budget.remaining()
            # Half a second is no time for a request: starting one would only report a bogus timeout.
            if remaining is not None and remaining <= 0.5:
                results[name] = self._out_of_budget(name, results)
                continue
            try:
                res = getattr(self, "check_" + name)()
            except Exception as exc:  # pylint: disable=broad-except
                # A bug of this module must still give a result (and the role its report and decision).
                res = _fail(new_result(name), cause("unexpected", "The %s check failed in the smoke test itself (%s: "
                                                    "%s): report this together with the server's answer." %
                                                    (name, type(exc).__name__, exc)),
                            "%s: %s" % (type(exc).__name__, exc))
            results[name] = res
            if res["status"] == "failed" and res.get("cause") in BLOCKING:
                blocked = res
        self.causes = consolidate(results)
        return results

    def _not_run(self, name, blocker):
        result = new_result(name)
        return _fail(result, blocker, "not run: %s failed with a cause no request can get past (%s)"
                     % (blocker["name"], blocker["cause"]))

    def _out_of_budget(self, name, results):
        result = new_result(name)
        hung = [r for r in results.values() if r.get("cause") == "timeout"]
        message = "not run: the suite budget (openai_smoke_test_suite_timeout=%ss) was spent after %.1fs" % (
            self.budget.seconds, self.budget.spent())
        if hung:
            return _fail(result, hung[0], message + ", most of it waiting for %s" % hung[0]["name"])
        return _fail(result, cause("budget", "The checks did not fit the suite budget (openai_smoke_test_suite_timeout"
                                   "=%ss): the server answers, but slowly; raise openai_smoke_test_suite_timeout or "
                                   "run fewer checks (openai_smoke_test_checks)." % self.budget.seconds,
                                   "openai_smoke_test_suite_timeout", TEST_SETTINGS), message)


def rollback_advised(causes):
    """A rollback helps only when some cause is the deployment's, not the smoke test's own settings."""
    return any(c.get("fault") != TEST_SETTINGS for c in causes)


def summarize(results, causes=None):
    """One line per check, then one line per cause with the checks it explains (for the play output)."""
    if causes is None:
        causes = consolidate(results)
    lines = []
    for name, res in results.items():
        extra = []
        if res.get("latency_s") is not None:
            extra.append("%.2fs" % res["latency_s"])
        if res.get("tokens_per_s"):
            extra.append("%.1f tok/s" % res["tokens_per_s"])
        lines.append("%-12s %-7s %s%s" % (name, res["status"].upper(), res.get("message", ""),
                                          (" [" + ", ".join(extra) + "]") if extra else ""))
    for group in causes:
        line = "%-12s %s -> %s" % ("cause", ", ".join(group["checks"]), group.get("diagnosis") or "no diagnosis")
        if group.get("variable"):
            line += " [variable: %s]" % group["variable"]
        lines.append(line)
    return lines
