#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: openai_smoke_test
short_description: Smoke-test an OpenAI-compatible LLM server (SGLang) and diagnose what is wrong
description:
  - Runs read-only checks against an OpenAI-compatible server and reports each one separately with
    pass/fail, latency and tokens/s, so that a deployment is known to be usable, not just running.
  - Every failure names one cause and the variable to change, for example raw
    C(<|tool_calls_section_begin|>) markup in C(content) means C(tool_call_parser) must be C(kimi_k2);
    a model listed under its file path means the server runs without C(served_model_name); C(matched_stop)
    C(NaN happened), C(!!!!) output or a 500 saying C(NaN happened) means a wrong FP4 GEMM / MoE runner backend.
  - One classifier serves every check, so transport failures are told apart (connection refused, reset,
    connect timeout, no answer or a stalled or trickling answer, a body cut off, TLS, an HTTP status with
    SGLang's error message, a body that is not JSON, a broken event stream or an error event in it), and
    checks that fail for the same reason are reported as one cause with the checks it explains
    (RV(causes)); the summary never gives two explanations of one failure.
  - No server behaviour makes the module crash; every check returns a result.
  - Time is bounded. Each request, streams included, ends at O(timeout); all checks together end at
    O(suite_timeout); checks that would start later are reported as not run. After a failure no request
    can get past (connection refused, a wrong API key, TLS, ...), the remaining checks are not sent.
  - "Checks: C(models) - C(/v1/models) lists exactly O(served_model_name)."
  - "C(chat) - a deterministic prompt (temperature 0) returns the expected answer (O(chat_expect)); content is
    non-empty, not degenerate (long runs of one character or word such as C(!!!!)), carries no C(<think>)
    markup, and C(matched_stop) is not C(NaN happened)."
  - "C(tools) - a request with one tool (C(get_weather(city))) returns structured C(tool_calls) whose
    arguments parse as JSON and match the schema, with no raw tool-call markup (kimi_k2, qwen3_coder,
    hermes/qwen formats) in C(content)."
  - "C(reasoning) - only when O(reasoning_parser) is set (otherwise reported as skipped):
    C(reasoning_content) is filled and C(content) carries no C(<think>) markup."
  - "C(stream) - an SSE request ends with C(data: [DONE]) and carries no error event (SGLang's
    C({\"error\": ...}) events); the assembled answer passes the same checks as C(chat) (O(chat_expect),
    NaN, degenerate output, C(<think>) markup, max_tokens spent on reasoning)."
  - "C(stream_tools) - only when O(tool_call_parser) is set (otherwise reported as skipped): the tools request
    streamed; the tool-call deltas are assembled by index (parsers split arguments across chunks) and the
    result passes the same checks as C(tools); raw markup split across content chunks is found in the joined
    content."
  - "C(concurrency) - O(concurrency) parallel chat requests all pass the C(chat) check (NaN under load was
    a real failure)."
  - Optionally waits first for readiness (C(/health) and C(/v1/models)) for up to O(wait_timeout) seconds
    while watching the systemd O(unit), and stops at once, with the journal tail, when the unit is
    failed or inactive or restarts while waiting. A server without C(/health) (404, like llama.cpp's) is
    judged by C(/v1/models). C(/health) answering while C(/v1/models) answers 401/403 is ready with a wrong
    key (SGLang lets C(/health) through without the key), so the wait ends at once and the checks name
    C(llm_server_api_key).
  - HTTP goes through Ansible's own URL helper (C(ansible.module_utils.urls)), so the target needs no extra
    Python library (C(requests) is not used) and proxies and O(validate_certs) behave as in other modules.
  - The module runs on the target (where the server listens on loopback) or, with C(delegate_to), on the
    controller; O(unit) needs systemd on the host that runs the module.
version_added: "0.1.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  base_url:
    description:
      - Root URL of the server, for example C(http://127.0.0.1:30000). A trailing C(/v1) is accepted.
    type: str
    required: true
  api_key:
    description:
      - Bearer token, the value of SGLang's C(--api-key). Not logged.
    type: str
  served_model_name:
    description:
      - The model name clients use; C(/v1/models) must list exactly this name, and requests send it.
    type: str
    required: true
  profile:
    description:
      - Name of the model profile in C(llm_server_models), used to name the variable to change in
        diagnoses (C(llm_server_models['kimi-k2.5'].tool_call_parser)).
    type: str
  checks:
    description:
      - The checks to run, in this order.
      - An empty list runs no check; with O(wait_timeout) that is a readiness probe only.
    type: list
    elements: str
    choices: [models, chat, tools, reasoning, stream, stream_tools, concurrency]
    default: [models, chat, tools, reasoning, stream, stream_tools, concurrency]
  tool_call_parser:
    description:
      - The profile's C(tool_call_parser) (SGLang C(--tool-call-parser)); used in diagnoses. The C(stream_tools)
        check runs only when it is set.
    type: str
  reasoning_parser:
    description:
      - The profile's C(reasoning_parser). The C(reasoning) check runs only when it is set.
    type: str
  tool_choice:
    description:
      - C(tool_choice) of the C(tools) request. V(auto) is what agent clients send and what exposes a
        missing tool-call parser; V(function) forces the C(get_weather) tool; V(required) forces some tool.
      - SGLang constrains output for V(function)/V(required) and can then return C(tool_calls) without a
        parser, hiding the failure the check exists to find, so keep V(auto) for SGLang.
    type: str
    choices: [auto, required, function]
    default: auto
  chat_prompt:
    description: The user message of the C(chat), C(stream) and C(concurrency) checks.
    type: str
    default: What is the capital of France? Answer with one word.
  chat_expect:
    description: Regular expression (case-insensitive) the C(chat) answer must contain.
    type: str
    default: Paris
  tool_prompt:
    description: The user message of the C(tools) check; it must make the model call C(get_weather).
    type: str
    default: Use the get_weather function to get the weather in Paris.
  reasoning_prompt:
    description: The user message of the C(reasoning) check.
    type: str
    default: What is 17 + 25? Think it through briefly, then give the number.
  max_tokens:
    description: C(max_tokens) of each request. Reasoning models need room to think before they answer.
    type: int
    default: 1024
  timeout:
    description:
      - Seconds each HTTP request may take as a whole (connect, answer, every chunk of a stream). A server that
        keeps sending a little data does not extend it.
    type: int
    default: 120
  suite_timeout:
    description:
      - Seconds all checks together may take (the readiness wait is not counted). A request's deadline is the
        earlier of its own O(timeout) and the end of this budget; checks that would start after it are
        reported as not run.
    type: int
    default: 300
  concurrency:
    description: Number of parallel requests of the C(concurrency) check.
    type: int
    default: 4
  validate_certs:
    description: Verify TLS certificates of an C(https) O(base_url).
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds to wait for readiness (see RV(wait.ready)) before the checks.
        V(0) probes once and does not wait.
      - When the server is not ready in time and O(checks) is empty, the module returns RV(ready=false)
        without failing (a progress step of a longer wait); with checks it fails.
    type: int
    default: 0
  not_ready_fails:
    description:
      - With O(checks) and O(wait_timeout), what a server that is not ready in time means.
      - V(true) fails the module (the checks cannot run).
      - V(false) returns RV(ready=false) without failing and without running the checks, as a progress step
        of a longer wait does; once the server is ready the same call runs the checks. A wait loop then needs
        one call per step and no separate call for the checks.
      - A unit that failed or restarted while waiting fails the module either way.
    type: bool
    default: true
  poll_interval:
    description: Seconds between readiness probes.
    type: float
    default: 2.0
  probe_timeout:
    description:
      - Seconds one readiness probe (C(/health) or C(/v1/models)) may take. SGLang's C(/health) runs a one-token
        generation and answers within 20 s, so keep this above 20. One call may overrun O(wait_timeout) by two
        probes.
    type: float
    default: 25.0
  unit:
    description:
      - systemd unit of the server (C(sglang-<profile>.service)). While waiting, a unit that is failed,
        inactive or not found, or that restarts, ends the wait at once with the journal tail.
    type: str
  unit_baseline:
    description:
      - RV(wait.baseline) of an earlier call, so that a restart between calls is noticed. Without it the
        unit's state at the start of this call is the baseline.
    type: dict
  journal_lines:
    description: Lines of the unit's journal returned when the unit fails.
    type: int
    default: 30
attributes:
  check_mode:
    support: full
    description: The checks only read (HTTP GET and chat completions); they run in check mode too.
  diff_mode:
    support: none
    description: The module changes nothing, so there is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Any POSIX host with Python 3.11+; O(unit) needs systemd (C(systemctl), C(journalctl)).
notes:
  - The module never reports C(changed).
  - Diagnoses and the SGLang markup formats are described in the collection's C(docs/smoke-tests.md).
seealso:
  - name: Smoke tests (collection docs)
    description: Checks, diagnoses and the role that runs them after a deploy with rollback.
    link: https://github.com/gpufleet/llm_server/blob/main/docs/smoke-tests.md
"""

EXAMPLES = r"""
- name: Smoke-test the local SGLang server
  gpufleet.llm_server.openai_smoke_test:
    base_url: http://127.0.0.1:30000
    api_key: "{{ llm_server_api_key }}"
    served_model_name: kimi-k2.5
    profile: kimi-k2.5
    tool_call_parser: kimi_k2
    reasoning_parser: kimi_k2
  register: smoke

- name: Wait up to 30 s for readiness, watching the unit, without checks (one progress step)
  gpufleet.llm_server.openai_smoke_test:
    base_url: http://127.0.0.1:30000
    served_model_name: kimi-k2.5
    checks: []
    wait_timeout: 30
    unit: sglang-kimi-k2.5.service

- name: One step of a readiness wait that runs the checks as soon as the server is ready
  gpufleet.llm_server.openai_smoke_test:
    base_url: http://127.0.0.1:30000
    served_model_name: kimi-k2.5
    checks: [models, chat, stream]
    wait_timeout: 30
    not_ready_fails: false
    unit: sglang-kimi-k2.5.service
  register: smoke_step

- name: A quick check with tight limits (10 s per request, 30 s for all)
  gpufleet.llm_server.openai_smoke_test:
    base_url: http://127.0.0.1:30000
    served_model_name: kimi-k2.5
    checks: [models, chat, stream]
    timeout: 10
    suite_timeout: 30

- name: Only the model list and one chat request, from the controller
  gpufleet.llm_server.openai_smoke_test:
    base_url: "http://{{ ansible_host }}:30000"
    served_model_name: qwen3.5-397b
    checks: [models, chat]
  delegate_to: localhost
"""

RETURN = r"""
passed:
  description: True when no check failed (skipped checks do not fail).
  returned: when the module got to run the checks or the readiness wait
  type: bool
  sample: false
ready:
  description: Whether the server answers (RV(wait.ready)); without a wait, whether any check passed.
  returned: when the module got to run the checks or the readiness wait
  type: bool
  sample: true
causes:
  description:
    - Each cause of failure once, first failure first, with the checks it explains. The checks listed carry
      the same diagnosis and variable.
  returned: when the module got to run the checks or the readiness wait
  type: list
  elements: dict
  contains:
    cause:
      description: A stable key, for example V(auth), V(refused), V(timeout), V(cut), V(nan), V(overload_queue),
        V(tool_markup:kimi_k2), V(stream_tool_markup), V(max_tokens).
      type: str
    diagnosis:
      description: What it means and the fix.
      type: str
    variable:
      description: The variable to change; null when no setting is at fault (a crash - then the diagnosis names the journal).
      type: str
    fault:
      description: V(deployment) (the server as deployed is broken - a rollback helps) or V(test_settings) (the smoke
        test's own settings, such as the API key, are wrong - a rollback would not help).
      type: str
    checks:
      description: The checks this cause explains.
      type: list
      elements: str
  sample:
    - cause: auth
      diagnosis: "The API key was rejected (HTTP 401 from GET /v1/models ('Unauthorized'); ...): llm_server_api_key ..."
      variable: llm_server_api_key
      fault: test_settings
      checks: [models, chat, tools, stream, concurrency]
rollback_advised:
  description: True when some cause is the deployment's (a rollback to the last known-good unit helps); false when
    the checks passed or every cause is in the smoke test's own settings.
  returned: when the module got to run the checks or the readiness wait
  type: bool
  sample: false
elapsed_s:
  description: Seconds the checks took (compare with O(suite_timeout)).
  returned: when the checks ran
  type: float
  sample: 2.31
failed_checks:
  description: Names of the checks that failed.
  returned: when the module got to run the checks or the readiness wait
  type: list
  elements: str
  sample: [tools]
summary:
  description: One line per check (status, message, latency, tokens/s), then one C(cause) line per cause with the
    checks it explains, the diagnosis and the variable.
  returned: when the module got to run the checks or the readiness wait
  type: list
  elements: str
  sample:
    - "models      PASSED  /v1/models lists exactly 'kimi-k2.5' [0.01s]"
    - "tools        FAILED  raw kimi_k2 tool-call markup in content: ... [0.82s]"
    - "cause        tools -> Raw kimi_k2 tool-call markup is in content: ... [variable: llm_server_models['kimi-k2.5'].tool_call_parser]"
checks:
  description: Result of each check that ran, by name.
  returned: when the module got to run the checks
  type: dict
  contains:
    name:
      description: The check (models, chat, tools, reasoning, stream, stream_tools, concurrency).
      type: str
      returned: always
    status:
      description: V(passed), V(failed) or V(skipped).
      type: str
      returned: always
    message:
      description: What was seen (C(not run - ...) for a check the suite budget or an earlier blocking cause left out).
      type: str
      returned: always
    cause:
      description: On failure, the key of its cause in RV(causes); null when passed.
      type: str
      returned: always
    diagnosis:
      description: On failure, the cause and the fix (the same text for every check of one cause); null when passed.
      type: str
      returned: always
    fault:
      description: On failure, V(deployment) or V(test_settings); null when passed.
      type: str
      returned: always
    variable:
      description: On failure, the variable to change (for example C(llm_server_models['kimi-k2.5'].tool_call_parser)); null when unknown.
      type: str
      returned: always
    latency_s:
      description: Seconds the request took (C(concurrency) - wall time of all requests).
      type: float
      returned: always
    tokens_per_s:
      description: Completion tokens per second over the whole request (C(stream) - content chunks per second;
        C(concurrency) - aggregate over all requests); null when the server reports no usage.
      type: float
      returned: always
    completion_tokens:
      description: Completion tokens reported in C(usage) (C(stream) - content chunks).
      type: int
      returned: always
    content:
      description: The answer's content, shortened (chat, tools, reasoning, stream, stream_tools).
      type: str
      returned: when the check got an answer
    finish_reason:
      description: The choice's C(finish_reason) (chat, tools, stream).
      type: str
      returned: when the check got an answer
    matched_stop:
      description: The choice's C(matched_stop) (chat); C(NaN happened) means NaN logits.
      type: raw
      returned: when the check got an answer
    models:
      description: The ids C(/v1/models) listed (models).
      type: list
      elements: str
      returned: when the models check got an answer
    tool_calls:
      description: The C(tool_calls) of the answer (tools; stream_tools - assembled from the deltas).
      type: list
      elements: dict
      returned: when the tools check got an answer
    reasoning_content:
      description: The C(reasoning_content), shortened (reasoning).
      type: str
      returned: when the reasoning check got an answer
    chunks:
      description: Number of SSE data chunks before C([DONE]) (stream, stream_tools).
      type: int
      returned: when the stream check got an answer
    time_to_first_token_s:
      description: Seconds until the first content, reasoning or tool-call chunk (stream, stream_tools).
      type: float
      returned: when the stream check got an answer
    requests:
      description: Parallel requests sent (concurrency).
      type: int
      returned: for concurrency
    passed_requests:
      description: Parallel requests that passed (concurrency).
      type: int
      returned: for concurrency
    latencies_s:
      description: Latency of each parallel request (concurrency).
      type: list
      elements: float
      returned: for concurrency
  sample:
    models:
      name: models
      status: passed
      message: "/v1/models lists exactly 'smollm2'"
      latency_s: 0.004
      tokens_per_s: null
      completion_tokens: null
      cause: null
      diagnosis: null
      variable: null
      fault: null
      models: [smollm2]
wait:
  description: The readiness wait.
  returned: when O(wait_timeout) is above 0 or O(unit) is set
  type: dict
  contains:
    ready:
      description:
        - The server answers - C(/health) 200 (or absent - 404/405, or behind the key - 401/403) and C(/v1/models)
          200, 401/403 (a wrong key) or 404 (no OpenAI API at this URL); the checks then say whether it is usable.
      type: bool
      returned: always
    health:
      description: The last C(/health) probe as progress lines show it - a status (V(503)) or V(refused), V(timed out), ...
      type: str
      returned: always
    models:
      description: The last C(/v1/models) probe, shown the same way.
      type: str
      returned: always
    health_endpoint:
      description: False when the server has no C(/health) (404/405); null until it answered.
      type: bool
      returned: always
    health_error_kind:
      description: How the last C(/health) probe failed without a status (V(refused), V(timeout), ...), or null.
      type: str
      returned: always
    models_error_kind:
      description: How the last C(/v1/models) probe failed without a status, or null.
      type: str
      returned: always
    cause:
      description: When not ready, or ready with a wrong key - the cause (cause, diagnosis, variable, fault); else null.
      type: dict
      returned: always
    elapsed_s:
      description: Seconds this call waited.
      type: float
      returned: always
    health_status:
      description: Last HTTP status of C(/health); null when nothing answered.
      type: int
      returned: always
    models_status:
      description: Last HTTP status of C(/v1/models); null when nothing answered.
      type: int
      returned: always
    unit:
      description: The unit's C(systemctl show) state (load_state, active_state, sub_state, result, n_restarts, invocation_id, main_pid).
      type: dict
      returned: always
    baseline:
      description: The unit state the restart detection compares with; pass it as O(unit_baseline) to the next call.
      type: dict
      returned: always
    problem:
      description: Why the wait stopped early (unit failed, inactive, restarted), or null.
      type: str
      returned: always
    last_log_line:
      description: The unit's last journal line.
      type: str
      returned: always
    journal:
      description: The journal tail, when the unit failed or restarted.
      type: list
      elements: str
      returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke import (
    ALL_CHECKS,
    DEFAULT_CHAT_EXPECT,
    DEFAULT_CHAT_PROMPT,
    DEFAULT_REASONING_PROMPT,
    DEFAULT_TOOL_PROMPT,
    Client,
    SmokeTest,
    rollback_advised,
    summarize,
)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke_wait import wait_ready


def validate(params):
    """Errors in the options, each naming the option, its value and the fix."""
    errors = []
    url = params["base_url"] or ""
    if not url.startswith(("http://", "https://")):
        errors.append("base_url=%r must start with http:// or https:// (e.g. http://127.0.0.1:30000)" % url)
    if not (params["served_model_name"] or "").strip():
        errors.append("served_model_name is empty: set the profile's served_model_name (the name clients use)")
    for key, low in (("timeout", 1), ("concurrency", 1), ("max_tokens", 1), ("wait_timeout", 0),
                     ("journal_lines", 1), ("suite_timeout", 1)):
        if params.get(key) is not None and params[key] < low:
            errors.append("%s=%r must be >= %d" % (key, params[key], low))
    for key in ("poll_interval", "probe_timeout"):
        if params.get(key) is not None and params[key] <= 0:
            errors.append("%s=%r must be > 0" % (key, params[key]))
    return errors


def _ready_line(wait, status):
    return "%-12s %-7s not ready after %ss (/health %s, /v1/models %s)" % (
        "ready", status, wait["elapsed_s"], wait["health"], wait["models"])


def fail_not_started(module, wait, result):
    """The unit died while starting: fail with its journal tail."""
    params = module.params
    result["failed_checks"] = ["ready"]
    result["summary"] = ["%-12s %-7s %s after %ss" % ("ready", "FAILED", wait["problem"], wait["elapsed_s"])]
    result["causes"] = [{"cause": "unit", "checks": ["ready"], "variable": None, "fault": "deployment",
                         "diagnosis": "%s %s: the server died while starting; the journal tail says why."
                                      % (params["unit"], wait["problem"])}]
    result["rollback_advised"] = True
    module.fail_json(msg="%s %s after %ss; journal tail:\n%s" % (
        params["unit"], wait["problem"], wait["elapsed_s"], "\n".join(wait["journal"])), **result)


def end_not_ready(module, wait, result):
    """The server did not get ready in time: fail (checks asked and not_ready_fails) or exit waiting."""
    params = module.params
    fails = bool(params["checks"]) and params["not_ready_fails"]
    result["summary"] = [_ready_line(wait, "FAILED" if fails else "WAITING")]
    if fails:
        result["failed_checks"] = ["ready"]
        result["causes"] = [dict(wait["cause"], checks=["ready"])]
        result["rollback_advised"] = True
        module.fail_json(msg="%s is not ready after %ss: /health %s, /v1/models %s -> %s" % (
            params["base_url"], wait["elapsed_s"], wait["health"], wait["models"],
            wait["cause"]["diagnosis"]), **result)
    module.exit_json(**result)


def wait_for_server(module, client, result):
    """Wait for readiness (and watch the unit) when asked; a server that is not ready ends the module."""
    params = module.params

    def run(cmd):
        return module.run_command(cmd)

    wait = wait_ready(client, params["wait_timeout"], unit=params["unit"], baseline=params["unit_baseline"],
                      run=run if params["unit"] else None, poll=params["poll_interval"],
                      journal_lines=params["journal_lines"], probe_timeout=params["probe_timeout"],
                      profile=params["profile"])
    result["wait"] = wait
    result["ready"] = wait["ready"]
    if wait["problem"]:
        fail_not_started(module, wait, result)
    if not wait["ready"]:
        end_not_ready(module, wait, result)


def run_checks(module, client, result):
    """Run the checks and report them: fail when one failed, else exit."""
    params = module.params
    smoke = SmokeTest(params, client=client)
    checks = smoke.run(params["checks"])
    result["checks"] = checks
    result["elapsed_s"] = round(smoke.budget.spent(), 2)
    # Without a wait, a server that answered any check is up.
    result["ready"] = result["ready"] or any(res["status"] == "passed" for res in checks.values())
    result["failed_checks"] = [name for name, res in checks.items() if res["status"] == "failed"]
    result["passed"] = not result["failed_checks"]
    result["causes"] = smoke.causes
    result["rollback_advised"] = rollback_advised(smoke.causes)
    result["summary"] = summarize(checks, smoke.causes)
    if result["failed_checks"]:
        details = ["%s -> %s" % (", ".join(c["checks"]), c["diagnosis"]) for c in smoke.causes]
        module.fail_json(msg="smoke test failed: " + " | ".join(details), **result)
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            base_url=dict(type="str", required=True),
            api_key=dict(type="str", no_log=True),
            served_model_name=dict(type="str", required=True),
            profile=dict(type="str"),
            checks=dict(type="list", elements="str", choices=list(ALL_CHECKS), default=list(ALL_CHECKS)),
            tool_call_parser=dict(type="str"),
            reasoning_parser=dict(type="str"),
            tool_choice=dict(type="str", choices=["auto", "required", "function"], default="auto"),
            chat_prompt=dict(type="str", default=DEFAULT_CHAT_PROMPT),
            chat_expect=dict(type="str", default=DEFAULT_CHAT_EXPECT),
            tool_prompt=dict(type="str", default=DEFAULT_TOOL_PROMPT),
            reasoning_prompt=dict(type="str", default=DEFAULT_REASONING_PROMPT),
            max_tokens=dict(type="int", default=1024, no_log=False),
            timeout=dict(type="int", default=120),
            suite_timeout=dict(type="int", default=300),
            concurrency=dict(type="int", default=4),
            validate_certs=dict(type="bool", default=True),
            wait_timeout=dict(type="int", default=0),
            not_ready_fails=dict(type="bool", default=True),
            poll_interval=dict(type="float", default=2.0),
            probe_timeout=dict(type="float", default=25.0),
            unit=dict(type="str"),
            unit_baseline=dict(type="dict"),
            journal_lines=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    errors = validate(params)
    if errors:
        module.fail_json(msg="openai_smoke_test: invalid options: " + "; ".join(errors))

    client = Client(params["base_url"], params["api_key"], params["timeout"], params["validate_certs"])
    result = dict(changed=False, ready=False, passed=False, failed_checks=[], summary=[], causes=[],
                  rollback_advised=False)
    if params["wait_timeout"] > 0 or params["unit"]:
        wait_for_server(module, client, result)
    if not params["checks"]:
        result["passed"] = result["ready"]
        module.exit_json(**result)
    run_checks(module, client, result)


if __name__ == "__main__":
    main()
