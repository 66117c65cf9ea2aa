# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one cause classifier of the smoke test: what went wrong, what to change, and whether to roll back.

Every failed check carries a cause (`Cause`): a stable key (`cause`), the diagnosis (what it means and
the fix), the variable to change (or None when no setting is at fault, e.g. a crash: then the
diagnosis names the journal), and `fault`: ``deployment`` (the server as deployed is broken: a
rollback helps) or ``test_settings`` (the smoke test's own settings are wrong, e.g. the API key:
rolling back a healthy server would not help). Checks that fail for the same reason get the same key
and text, and `consolidate` reports each cause once with the checks it explains.

Transport failures (`from_failure`) come from `openai_smoke_http.RequestFailed`; answers are judged by
`judge_text` (chat, stream, concurrency), `judge_tool` (tools, stream_tools) and `judge_reasoning`.
The texts name SGLang's real behaviour: the markup formats and messages are quoted from its source
(0.5.10.post1 and 0.5.23; docs/smoke-tests.md lists them).
"""

from __future__ import annotations

import json
import re

DEPLOYMENT = "deployment"
TEST_SETTINGS = "test_settings"

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
# SGLang's NaN texts: FINISH_MATCHED_STR(matched="NaN happened") (managers/schedule_batch.py) and the
# sampler's "Detected errors during sampling! NaN in the logits." (layers/sampler.py).
NAN_STOP = "NaN happened"
NAN_TEXT = re.compile(r"NaN happened|NaN in the logits|\bnan\b.*logits", re.IGNORECASE)
# Degenerate output: the FP4 NaN failure printed `!!!!!!`; long runs of one character or one word.
DEGENERATE = (
    re.compile(r"([!?¿¡])\1{3,}"),
    re.compile(r"(\S)\1{11,}"),
    re.compile(r"\b(\w+)\b(?:\W+\1\b){7,}", re.IGNORECASE),
)
NAN_FIX = ("NaN logits or degenerate output: the FP4 GEMM / MoE runner backend produces garbage on this GPU "
           "(flashinfer_cutlass FP4 GEMM race on SM120, flashinfer#2708). Set fp4_gemm_backend: flashinfer_cudnn "
           "and moe_runner_backend: flashinfer_cutlass in the profile")
# Causes after which no further request can succeed: the remaining checks are not run.
BLOCKING = ("refused", "dns", "connect_timeout", "tls", "auth", "not_found")


def profile_var(profile, key):
    """How a message names a profile variable: llm_server_models['kimi-k2.5'].tool_call_parser."""
    if profile:
        return "llm_server_models['%s'].%s" % (profile, key)
    return "the profile's %s" % key


def short(text, limit=160):
    text = "" if text is None else str(text)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + "..."


def cause(key, diagnosis, variable=None, fault=DEPLOYMENT):
    return {"cause": key, "diagnosis": diagnosis, "variable": variable, "fault": fault}


class Context:
    """What the diagnoses need to know about the run (options and what answered so far)."""

    def __init__(self, params):
        self.profile = params.get("profile")
        self.base_url = params.get("base_url") or ""
        self.timeout = params.get("timeout", 120)
        self.suite_timeout = params.get("suite_timeout")
        self.max_tokens = params.get("max_tokens", 1024)
        self.concurrency = params.get("concurrency", 4)
        self.tool_parser = params.get("tool_call_parser") or None
        self.reasoning_parser = params.get("reasoning_parser") or None
        self.api_key_sent = bool(params.get("api_key"))
        self.answered = []  # (what, seconds) of requests that got a complete answer

    def var(self, key):
        return profile_var(self.profile, key)

    def answered_note(self):
        if not self.answered:
            return ""
        what, seconds = self.answered[0]
        return " while %s answered in %.2fs" % (what, seconds)


# ---------------------------------------------------------------------- transport failures
def from_failure(exc, ctx, where=None, share=None):
    """The Cause of a RequestFailed. WHERE: 'POST /v1/chat/completions' and the like; SHARE: '1 of 4'."""
    where = where or exc.url
    kind = exc.kind
    if kind == "refused":
        if ctx.answered:
            return cause("refused", "Nothing listens at %s any more (connection refused)%s earlier in this run: "
                         "the server went down during the test (it crashed or was restarted): read the unit's "
                         "journal." % (ctx.base_url, ctx.answered_note().replace(" while", ", although")))
        return cause("refused", "Nothing listens at %s (connection refused): the server is down (read the unit's "
                     "journal) or listens on another port than %s." % (ctx.base_url, ctx.var("port")),
                     ctx.var("port"))
    if kind == "dns":
        return cause("dns", "The host of %s does not resolve (%s): fix %s (or openai_smoke_test_base_url)."
                     % (ctx.base_url, exc.detail, ctx.var("host")), ctx.var("host"), TEST_SETTINGS)
    if kind == "connect_timeout":
        return cause("connect_timeout", "The TCP connect to %s got no answer within %ss: a firewall drops the "
                     "packets or the host is wrong or unreachable from where the module runs (fix %s or "
                     "openai_smoke_test_base_url)." % (ctx.base_url, exc.limit_s, ctx.var("host")),
                     ctx.var("host"), TEST_SETTINGS)
    if kind == "tls":
        if exc.tls_problem == "verify":
            return cause("tls", "The server's TLS certificate is not trusted (%s): install a certificate the host "
                         "trusts, or set openai_smoke_test_validate_certs: false for a self-signed one."
                         % exc.detail, "openai_smoke_test_validate_certs", TEST_SETTINGS)
        return cause("tls", "TLS with %s failed (%s): the server most likely speaks plain HTTP (SGLang does "
                     "unless started with --ssl-certfile); use http:// in openai_smoke_test_base_url."
                     % (ctx.base_url, exc.detail), "openai_smoke_test_base_url", TEST_SETTINGS)
    if kind == "reset":
        return cause("reset", "The server closed the connection without answering %s (%s): it crashed or "
                     "restarted mid-request (read the unit's journal), or the port belongs to something that "
                     "is not an HTTP server." % (where, exc.detail))
    if kind == "cut":
        return cause("cut", "The answer to %s was cut off (%s): the server process died while answering or "
                     "something between cut the connection; read the unit's journal." % (where, exc.detail))
    if kind == "timeout":
        return _timeout_cause(exc, ctx, where)
    if kind == "bad_json":
        return cause("bad_json", "%s answered with something that is not an OpenAI JSON object (%s): another "
                     "program than the model server answers at %s (a proxy or web server page); check "
                     "openai_smoke_test_base_url and %s." % (where, short(exc.detail, 200), ctx.base_url,
                                                             ctx.var("port")),
                     "openai_smoke_test_base_url")
    if kind == "stream":
        return cause("stream_protocol", "%s did not answer as an SSE stream (%s): the server ignores "
                     "stream=true, so it is not an OpenAI-compatible streaming server; check "
                     "openai_smoke_test_base_url." % (where, short(exc.detail, 200)), "openai_smoke_test_base_url")
    if kind == "http":
        return from_error_status(exc.status, exc.message or exc.body, ctx, where, share)
    return cause("unexpected", "%s failed: %s" % (where, exc.detail))


def _timeout_cause(exc, ctx, where):
    suite = exc.limit_by == "suite"
    variable = "openai_smoke_test_suite_timeout" if suite else "openai_smoke_test_request_timeout"
    limit = ("the suite budget (openai_smoke_test_suite_timeout=%ss) ran out" % ctx.suite_timeout if suite
             else "the per-request deadline (openai_smoke_test_request_timeout=%ss) passed" % ctx.timeout)
    others = ctx.answered_note()
    if exc.phase in (None, "connect", "headers"):
        return cause("timeout", "%s got no answer at all before %s%s: the server accepts connections but does "
                     "not answer, so it is hung (a stuck scheduler or tokenizer: read the unit's journal) or far "
                     "slower than the limit (the first request after start-up can compile kernels for minutes: "
                     "then raise %s)." % (where, limit, others, variable), variable)
    unit = "events" if exc.phase == "stream" else "bytes"
    limit_s = exc.limit_s or 0
    if exc.idle_s is not None and limit_s and exc.idle_s >= limit_s / 2.0:
        return cause("timeout", "%s stalled: the answer stopped after %s %s and nothing more came for %ss, "
                     "until %s%s. The server is hung mid-answer (read the unit's journal); raising %s only "
                     "helps if it resumes." % (where, exc.received, unit, exc.idle_s, limit, others, variable),
                     variable)
    return cause("timeout", "%s was still trickling in when %s (%s %s in %ss, the last %ss before the end): the "
                 "server generates far slower than expected (long reasoning at a few tokens/s). Raise %s, or "
                 "lower openai_smoke_test_max_tokens (%s) if the model thinks at length."
                 % (where, limit, exc.received, unit, exc.elapsed_s, exc.idle_s, variable, ctx.max_tokens), variable)


def from_error_status(status, text, ctx, where, share=None, in_stream=False):
    """The Cause of an HTTP error status (or an SSE error event with that code) and its message."""
    text = text or ""
    said = short(text, 200)
    seen = ("an error event in the stream of %s (code %s: %r)" % (where, status, said) if in_stream
            else "HTTP %s from %s (%r)" % (status, where, said))
    if share:
        seen = "%s got %s" % (share, seen)
    if status in (401, 403):
        if not ctx.api_key_sent:
            return cause("auth", "The server wants an API key and none was sent (%s): set llm_server_api_key "
                         "(vault) to the server's --api-key." % seen, "llm_server_api_key", TEST_SETTINGS)
        return cause("auth", "The API key was rejected (%s; SGLang lets /health through without a key, so the "
                     "server itself is up): llm_server_api_key (sent as openai_smoke_test_api_key) must equal "
                     "the server's --api-key." % seen, "llm_server_api_key", TEST_SETTINGS)
    if NAN_TEXT.search(text):
        backends = (ctx.var("fp4_gemm_backend"), ctx.var("moe_runner_backend"))
        return cause("nan", "%s: %s (%s, %s)." % ((seen, NAN_FIX) + backends), backends[0])
    if status == 404:
        return cause("not_found", "%s: the endpoint does not exist, so %s is not the root of an OpenAI-compatible "
                     "server (check openai_smoke_test_base_url and %s)." % (seen, ctx.base_url, ctx.var("port")),
                     "openai_smoke_test_base_url", TEST_SETTINGS)
    lowered = text.lower()
    if status == 400 or (status and 400 <= status < 500):
        if "context length" in lowered or "max_tokens" in lowered or "maximum context" in lowered:
            text = ("%s: the request does not fit the model's context: lower openai_smoke_test_max_tokens (%s) or "
                    "raise %s." % (seen, ctx.max_tokens, ctx.var("context_length")))
            return cause("max_tokens_context", text, "openai_smoke_test_max_tokens", TEST_SETTINGS)
        if "tool" in lowered or "function" in lowered:
            return cause("bad_request_tools", "%s: the server refuses tool requests: the tool-call parser %s does "
                         "not fit this model or release." % (seen, ctx.tool_parser or "(unset)"),
                         ctx.var("tool_call_parser"))
        if "model" in lowered and ("not found" in lowered or "does not exist" in lowered):
            return cause("bad_request_model", "%s: the server does not know the model name the test sends: set %s "
                         "to the name the server serves." % (seen, ctx.var("served_model_name")),
                         ctx.var("served_model_name"))
        return cause("bad_request", "%s: the server rejected the request; its message says why." % seen)
    if status == 503:
        # SGLang's own 503 messages (managers/scheduler.py): a full queue (--max-queued-requests) and the
        # waiting/running timeouts (SGLANG_REQ_WAITING_TIMEOUT / SGLANG_REQ_RUNNING_TIMEOUT).
        if "queue is full" in lowered:
            return cause("overload_queue", "%s: SGLang turns requests away because its waiting queue is full "
                         "(--max-queued-requests) with only %s parallel clients (openai_smoke_test_concurrency): "
                         "raise --max-queued-requests in %s or drop it." % (seen, ctx.concurrency,
                                                                            ctx.var("extra_args")),
                         ctx.var("extra_args"))
        if "waiting timeout" in lowered or "running timeout" in lowered:
            env = "SGLANG_REQ_WAITING_TIMEOUT" if "waiting" in lowered else "SGLANG_REQ_RUNNING_TIMEOUT"
            return cause("overload_timeout", "%s: SGLang aborted the request after its %s: raise it in %s or "
                         "remove it." % (seen, env, ctx.var("env")), ctx.var("env"))
        return cause("unavailable", "%s: the server is overloaded, shutting down or restarting; read the unit's "
                     "journal, and if it only happens under load, lower openai_smoke_test_concurrency (%s) or "
                     "raise %s." % (seen, ctx.concurrency, ctx.var("max_running_requests")),
                     ctx.var("max_running_requests"))
    if status in (502, 504):
        return cause("gateway", "%s: a proxy between the module and the server got no good answer from it "
                     "(down or too slow); test the server directly (openai_smoke_test_base_url) and read its "
                     "journal." % seen, "openai_smoke_test_base_url")
    if "out of memory" in lowered:
        # managers/schedule_batch.py retract_decode: the KV cache cannot hold the running requests.
        return cause("kv_cache_oom", "%s: SGLang ran out of KV-cache memory while decoding and aborted the request: "
                     "give the KV cache more room (raise %s, lower %s or %s)." % (
                         seen, ctx.var("mem_fraction_static"), ctx.var("max_running_requests"),
                         ctx.var("context_length")), ctx.var("mem_fraction_static"))
    if "parse reasoning" in lowered:
        # serving_chat.py: "Failed to parse reasoning content" (500) when the reasoning parser throws.
        return cause("reasoning_parser_error", "%s: SGLang's reasoning parser failed on the model's output: %s (%s) "
                     "does not match the model." % (seen, ctx.var("reasoning_parser"), ctx.reasoning_parser or
                                                    "unset"), ctx.var("reasoning_parser"))
    return cause("server_error", "%s: the server failed while answering; read the unit's journal for the "
                 "traceback." % seen)


# ---------------------------------------------------------------------- answers
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


class Answer:
    """One assistant turn, from a JSON answer or assembled from a stream."""

    def __init__(self, content="", reasoning="", tool_calls=None, finish_reason=None, matched_stop=None):
        self.content = content or ""
        self.reasoning = reasoning or ""
        self.tool_calls = tool_calls or []
        self.finish_reason = finish_reason
        self.matched_stop = matched_stop

    @classmethod
    def from_choice(cls, choice):
        message = choice.get("message") or {}
        if not isinstance(message, dict):
            message = {}
        calls = message.get("tool_calls") or []
        return cls(_text(message.get("content")), _text(message.get("reasoning_content")),
                   calls if isinstance(calls, list) else [], choice.get("finish_reason"), choice.get("matched_stop"))


def _text(value):
    if value is None:
        return ""
    if isinstance(value, list):  # content parts
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in value)
    return str(value)


def _finding(key, message, diagnosis, variable=None, fault=DEPLOYMENT):
    found = cause(key, diagnosis, variable, fault)
    found["message"] = message
    return found


def _nan_or_garbage(answer, ctx, what, also_reasoning=False):
    if answer.matched_stop == NAN_STOP:
        return _finding("nan", "matched_stop is %r (content %r)" % (NAN_STOP, short(answer.content, 60)),
                        NAN_FIX + " (%s, %s)." % (ctx.var("fp4_gemm_backend"), ctx.var("moe_runner_backend")),
                        ctx.var("fp4_gemm_backend"))
    bad = degenerate(answer.content) or (degenerate(answer.reasoning) if also_reasoning else None)
    if bad:
        return _finding("nan", "degenerate %s %r (run %r)" % (what, short(answer.content or answer.reasoning, 60),
                                                              short(bad, 20)),
                        NAN_FIX + " (%s, %s)." % (ctx.var("fp4_gemm_backend"), ctx.var("moe_runner_backend")),
                        ctx.var("fp4_gemm_backend"))
    return None


def _thinking_ran_out(answer, ctx):
    """Empty content because max_tokens ran out while thinking: the same cause in every check."""
    if answer.content.strip() or answer.tool_calls or answer.finish_reason != "length":
        return None
    if answer.reasoning.strip():
        message = "content is empty: all %s tokens went to reasoning_content (finish_reason 'length')" % ctx.max_tokens
    else:
        message = "content is empty after finish_reason 'length' (max_tokens %s)" % ctx.max_tokens
    return _finding("max_tokens", message, "The model spent all of max_tokens (%s) before answering: raise "
                    "openai_smoke_test_max_tokens (reasoning models think first)." % ctx.max_tokens,
                    "openai_smoke_test_max_tokens", TEST_SETTINGS)


def _think_leak(answer, ctx):
    if not THINK_MARKUP.search(answer.content):
        return None
    var = ctx.var("reasoning_parser")
    message = "content carries <think> markup: %r" % short(answer.content, 80)
    if ctx.reasoning_parser:
        return _finding("think_leak", message, "Reasoning leaks into content although %s is %s: the parser does "
                        "not match the model's format or the running server was not started with "
                        "--reasoning-parser %s (restart the service)." % (var, ctx.reasoning_parser, ctx.reasoning_parser),
                        var)
    return _finding("think_leak", message, "Reasoning leaks into content: set %s (currently unset) so SGLang moves "
                    "it to reasoning_content." % var, var)


def _markup_in_reasoning(answer, ctx):
    markup = find_tool_markup(answer.reasoning)
    if not markup or find_tool_markup(answer.content):
        return None
    var = ctx.var("reasoning_parser")
    return _finding("tool_markup_in_reasoning", "raw %s tool-call markup in reasoning_content (content %r): %r"
                    % (markup[0], short(answer.content, 40), short(answer.reasoning, 100)),
                    "The tool call stayed inside reasoning_content, where the tool-call parser never looks: the "
                    "reasoning parser %s (%s) does not see the end of the model's thinking, so it does not "
                    "match the model's format." % (var, ctx.reasoning_parser or "unset"), var)


def _swallowed_answer(answer, ctx):
    """Content empty, reasoning filled, finished normally: the reasoning parser took the answer too."""
    if answer.content.strip() or answer.tool_calls or not answer.reasoning.strip():
        return None
    if answer.finish_reason == "length":
        return None
    var = ctx.var("reasoning_parser")
    return _finding("answer_in_reasoning", "content is empty, the whole answer is in reasoning_content: %r"
                    % short(answer.reasoning, 80),
                    "The reasoning parser %s (%s) put the answer into reasoning_content: it does not match how "
                    "this model ends its thinking." % (var, ctx.reasoning_parser or "unset"), var)


def judge_text(answer, ctx, expect):
    """Chat-like answer (chat, stream, each concurrency request): None when fine, else a finding."""
    for judge in (lambda: _nan_or_garbage(answer, ctx, "content"), lambda: _thinking_ran_out(answer, ctx),
                  lambda: _swallowed_answer(answer, ctx), lambda: _think_leak(answer, ctx)):
        found = judge()
        if found:
            return found
    if not answer.content.strip():
        return _finding("empty", "content is empty (finish_reason %r)" % answer.finish_reason,
                        "The server returned no text: read the unit's journal for errors.")
    if not re.search(expect, answer.content, re.IGNORECASE):
        return _finding("wrong_answer", "answer %r does not match %r" % (short(answer.content, 80), expect),
                        "A wrong answer at temperature 0 to a trivial question: the model is broken or not the "
                        "expected one (check the profile's model_path and quantization).", ctx.var("model_path"))
    return None


def judge_tool(answer, ctx, tool_name, parameters, schema_problems):
    """Tool-call answer (tools, stream_tools): (None, args) when fine, else (finding, None)."""
    var = ctx.var("tool_call_parser")
    found = _nan_or_garbage(answer, ctx, "output instead of a tool call")
    if found:
        return found, None
    markup = find_tool_markup(answer.content)
    if markup:
        diagnosis, variable = tool_markup_diagnosis(markup[0], markup[1], ctx.tool_parser, ctx.profile)
        return _finding("tool_markup:" + markup[0], "raw %s tool-call markup in content: %r"
                        % (markup[0], short(answer.content, 120)), diagnosis, variable), None
    for judge in (_markup_in_reasoning, _thinking_ran_out, _think_leak):
        found = judge(answer, ctx)
        if found:
            return found, None
    calls = answer.tool_calls
    if not calls:
        return _finding("no_tool_call", "no structured tool_calls (finish_reason %r, content %r)"
                        % (answer.finish_reason, short(answer.content, 120)),
                        "The server did not turn the model's tool call into tool_calls: set %s (currently %s) to "
                        "the parser of the model's tool-call format (kimi_k2 for Kimi K2.x, qwen3_coder for "
                        "Qwen3.5/Qwen3-Coder, see docs/smoke-tests.md)." % (var, ctx.tool_parser or "unset"),
                        var), None
    call = calls[0] if isinstance(calls[0], dict) else {}
    function = call.get("function") or {}
    name = function.get("name")
    if name != tool_name:
        return _finding("tool_name", "tool_calls[0] calls %r, expected %r" % (name, tool_name),
                        "The tool call names an unknown function: the tool-call parser %s does not match the "
                        "model's format." % (ctx.tool_parser or "(unset)"), var), None
    raw = function.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        return _finding("tool_arguments", "tool_calls[0].function.arguments is not JSON (%s): %r"
                        % (exc, short(raw, 120)),
                        "Tool-call arguments do not parse: the tool-call parser %s does not match the model's "
                        "format (or the output is degenerate)." % (ctx.tool_parser or "(unset)"), var), None
    problems = schema_problems(args, parameters)
    if problems:
        return _finding("tool_arguments", "tool_calls[0] arguments %r do not match the schema: %s"
                        % (short(json.dumps(args), 120), "; ".join(problems)),
                        "Tool-call arguments do not match the tool's schema: the parser %s or the chat template "
                        "mangles arguments." % (ctx.tool_parser or "(unset)"), var), None
    return None, args


def judge_reasoning(answer, ctx):
    var = ctx.var("reasoning_parser")
    for judge in (lambda: _think_leak(answer, ctx), lambda: _nan_or_garbage(answer, ctx, "output", True),
                  lambda: _thinking_ran_out(answer, ctx)):
        found = judge()
        if found:
            return found
    if not answer.reasoning.strip():
        return _finding("reasoning_empty", "reasoning_content is empty (content %r)" % short(answer.content, 80),
                        "No reasoning was separated: %s (%s) does not match the model, or thinking is off in the "
                        "chat template." % (var, ctx.reasoning_parser), var)
    return None


# ---------------------------------------------------------------------- one cause, once
def consolidate(results):
    """Group the failed checks by cause: [{cause, diagnosis, variable, fault, checks}], first failure first.

    Checks of one group get the group's diagnosis and variable, so the report never holds two
    different explanations of the same failure.
    """
    groups = []
    by_key = {}
    for name, res in results.items():
        if res.get("status") != "failed":
            continue
        key = res.get("cause") or "unexplained:" + name
        group = by_key.get(key)
        if group is None:
            group = {"cause": res.get("cause"), "diagnosis": res.get("diagnosis"), "variable": res.get("variable"),
                     "fault": res.get("fault") or DEPLOYMENT, "checks": []}
            by_key[key] = group
            groups.append(group)
        else:
            res["diagnosis"] = group["diagnosis"]
            res["variable"] = group["variable"]
        group["checks"].append(name)
    return groups
