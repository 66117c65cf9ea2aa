"""`python -m sglang.launch_server`: gpufleet's stand-in for SGLang's server (a TEST DOUBLE).

Why a double: the real engine serving Kimi-K2.5 / Qwen3.5-397B needs 8 Blackwell GPUs and ~10 minutes
to load; CI containers have no GPU. This module accepts the real SGLang command line the
`sglang_service` role renders, parses the few flags it acts on, ignores (but records) the rest, and
serves SGLang's HTTP surface on the given host/port with canned, deterministic answers.

Standard library only (it is pip-installed into a bare venv inside a systemd container).

Behaviour is selected with GPUFLEET_STANDIN_MODE: a comma-separated list of modes, each `name` or
`name=ARG` (e.g. `ok`, `delay=5`, `ok,delay=2`). Adding a mode = one function + one MODES entry:

    def _mode_nan(state, arg):                     # on_start hook: runs once before serving
        ...
    def _chat_nan(state, arg, request, reply):     # on_chat hook: may edit reply (a ChatReply)
        reply.content = ""; reply.finish_reason = "stop"; reply.matched_stop = "NaN happened"
    MODES["nan"] = Mode(on_chat=_chat_nan, doc="NaN logits: empty content, matched_stop 'NaN happened'")

`ChatReply` fields: content, reasoning_content, tool_calls (list of OpenAI tool-call dicts),
finish_reason, matched_stop. Hooks run in the order the modes are listed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import re
import select
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional

READY_LINE = "The server is fired up and ready to roll!"


def _version() -> str:
    """The version of the SGLang tree around this file (real `sglang/version.py` + setuptools-scm's
    `_version.py` when the stand-in is built into a copy of a release, as molecule/shared's stand-in
    repository does), else the stand-in's own."""
    try:
        from sglang.version import __version__  # pylint: disable=import-outside-toplevel

        return str(__version__)
    except ImportError:
        return "0.0.0+gpufleet.standin"


VERSION = _version()
# The modes when GPUFLEET_STANDIN_MODE is unset. molecule/shared/make_standin_repo.sh makes a "bad
# commit" of the stand-in repository by changing this line (code, not configuration, is at fault).
DEFAULT_MODE = "ok"


def _release_flags() -> list:
    """Option strings of the real SGLang release whose `srt/server_args.py` sits next to this file
    (the stand-in repository carries 0.5.10.post1's), read by a plain regex: `--help` lists them as
    accepted and ignored, as the real server would list them. Empty without such a file."""
    path = pathlib.Path(__file__).resolve().parent / "srt" / "server_args.py"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    return sorted(set(re.findall(r"[\"'](--[a-z0-9][a-z0-9-]*)[\"']", text)))


# --------------------------------------------------------------------------------------------
# State and replies
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass
class State:
    """What the server knows: parsed flags, the full argv, modes, and readiness."""

    args: argparse.Namespace
    argv: list
    ignored: list
    modes: list  # [(name, arg)]
    ready: threading.Event = dataclasses.field(default_factory=threading.Event)
    started_at: float = dataclasses.field(default_factory=time.time)
    health_503s: int = 0  # /health requests answered 503 while loading (mode loading_probes)

    @property
    def model_id(self) -> str:
        return self.args.served_model_name or self.args.model_path


@dataclasses.dataclass
class ChatReply:
    """One assistant turn before it is serialised (non-stream or SSE)."""

    content: Optional[str] = None
    reasoning_content: Optional[str] = None
    tool_calls: list = dataclasses.field(default_factory=list)
    finish_reason: str = "stop"
    matched_stop: Any = None


@dataclasses.dataclass
class Mode:
    on_start: Optional[Callable[[State, Optional[str]], None]] = None
    on_chat: Optional[Callable[[State, Optional[str], dict, ChatReply], None]] = None
    doc: str = ""


# --------------------------------------------------------------------------------------------
# Modes (GPUFLEET_STANDIN_MODE)
# --------------------------------------------------------------------------------------------
def _start_delay(state: State, arg: Optional[str]) -> None:
    seconds = float(arg if arg is not None else os.environ.get("GPUFLEET_STANDIN_DELAY", "5"))
    print(f"[standin] loading weights (simulated, {seconds:g} s)", flush=True)
    time.sleep(seconds)


def _start_loading_probes(state: State, arg: Optional[str]) -> None:
    # Loading for as many /health probes as asked, however long the prober takes to start: a fixed delay=12 was
    # sometimes over before a loaded machine's ansible-playbook sent its first probe (helper audit, 2026-12-07).
    probes = int(arg if arg is not None else 3)
    print(f"[standin] loading weights (simulated, until /health answered 503 {probes} times)", flush=True)
    while state.health_503s < probes:
        time.sleep(0.02)


MODES: dict = {
    "ok": Mode(doc="normal behaviour (default)"),
    "delay": Mode(on_start=_start_delay, doc="delay=SECONDS: stay 'loading' (health 503) before ready"),
    "loading_probes": Mode(on_start=_start_loading_probes,
                           doc="loading_probes=N: stay 'loading' until /health has answered 503 N times"),
}


# SGLang-shaped failures (added for the openai_smoke_test tests, issue 7). The strings are the ones
# real SGLang servers returned (docs: shared sglang-facts.md "HTTP surface"; seeds).
def _tool_name(request: dict) -> str:
    tools = request.get("tools") or [{}]
    return ((tools[0] or {}).get("function") or {}).get("name", "tool")


def _chat_nan(state: State, arg: Optional[str], request: dict, reply: ChatReply) -> None:
    # NaN logits (wrong FP4 GEMM backend on SM120): SGLang stops with matched_stop "NaN happened".
    reply.content = "!!!!!!!!!!!!!!!!"
    reply.reasoning_content = None
    reply.tool_calls = []
    reply.finish_reason = "stop"
    reply.matched_stop = "NaN happened"


def _chat_kimi_raw(state: State, arg: Optional[str], request: dict, reply: ChatReply) -> None:
    # Kimi K2 without --tool-call-parser kimi_k2: the tool call stays as raw markup in content.
    if not request.get("tools"):
        return
    reply.tool_calls = []
    reply.finish_reason = "stop"
    reply.content = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.%s:0<|tool_call_argument_begin|>"
                     '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>' % _tool_name(request))


def _chat_qwen3_coder_raw(state: State, arg: Optional[str], request: dict, reply: ChatReply) -> None:
    # Qwen3.5 / Qwen3-Coder without --tool-call-parser qwen3_coder: raw XML tool call in content.
    if not request.get("tools"):
        return
    reply.tool_calls = []
    reply.finish_reason = "stop"
    reply.content = ("<tool_call>\n<function=%s>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
                     "</tool_call>" % _tool_name(request))


def _chat_think_leak(state: State, arg: Optional[str], request: dict, reply: ChatReply) -> None:
    # No (or a wrong) --reasoning-parser: the thinking stays in content.
    thought = reply.reasoning_content or "The user asked a short question; answer it directly."
    reply.reasoning_content = None
    reply.content = "<think>\n%s\n</think>\n\n%s" % (thought, reply.content or "")


def _start_crash(state: State, arg: Optional[str]) -> None:
    # Dies while "loading weights", as SGLang did on SM120 with --enable-torch-symm-mem (KeyError: 12).
    seconds = float(arg if arg is not None else 1)
    print("[standin] loading weights (simulated, then crashing)", flush=True)
    time.sleep(seconds)
    print("Traceback (most recent call last):\n  File \"all_reduce_utils.py\", line 1, in <module>\n"
          "KeyError: 12", flush=True)
    print("[standin] crash_on_start: exiting with status 1", flush=True)
    os._exit(1)


def _start_restart_loop(state: State, arg: Optional[str]) -> None:
    # Becomes ready, then dies SECONDS later: under systemd's Restart= a restart loop that looks
    # healthy between crashes.
    seconds = float(arg if arg is not None else 3)

    def die() -> None:
        print("[standin] restart_loop: scheduler died (simulated), exiting with status 1", flush=True)
        os._exit(1)

    timer = threading.Timer(seconds, die)
    timer.daemon = True
    timer.start()


MODES.update({
    "nan": Mode(on_chat=_chat_nan, doc="content '!!!!', finish_reason stop, matched_stop 'NaN happened'"),
    "kimi_raw": Mode(on_chat=_chat_kimi_raw, doc="tool requests answered with raw kimi_k2 markup in content"),
    "qwen3_coder_raw": Mode(on_chat=_chat_qwen3_coder_raw,
                            doc="tool requests answered with raw qwen3_coder <function=...> XML in content"),
    "think_leak": Mode(on_chat=_chat_think_leak, doc="<think>...</think> in content, no reasoning_content"),
    "crash_on_start": Mode(on_start=_start_crash, doc="crash_on_start=SECONDS: die (exit 1) while loading"),
    "restart_loop": Mode(on_start=_start_restart_loop, doc="restart_loop=SECONDS: ready, then exit 1 after SECONDS"),
    # A server that is "up" (health, models) but hangs on every generation: the chat handler sends
    # the status line and headers, then nothing (issue 16: a hung scheduler behind a live HTTP front).
    "stall_chat": Mode(doc="POST /v1/chat/completions answers the headers, then hangs until the client leaves"),
})


def parse_modes(text: str) -> list:
    modes = []
    for item in (text or "ok").split(","):
        item = item.strip()
        if not item:
            continue
        name, _sep, arg = item.partition("=")
        if name not in MODES:
            raise SystemExit(
                f"[standin] unknown GPUFLEET_STANDIN_MODE entry {name!r}; known: {', '.join(sorted(MODES))}")
        modes.append((name, arg if arg else None))
    return modes or [("ok", None)]


# --------------------------------------------------------------------------------------------
# Command line: the flags the stand-in acts on; everything else is accepted and recorded
# --------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    flags = _release_flags()
    epilog = ("Also accepted and ignored: every other flag; the flags of SGLang %s (its server_args.py is next "
              "to this stand-in): %s" % (VERSION, " ".join(flags))) if flags else "Also accepted and ignored: every other flag."
    p = argparse.ArgumentParser(prog="sglang.launch_server (gpufleet stand-in)", allow_abbrev=False, epilog=epilog)
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--served-model-name", dest="served_model_name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--api-key", dest="api_key", default=None)
    p.add_argument("--tool-call-parser", dest="tool_call_parser", default=None)
    p.add_argument("--reasoning-parser", dest="reasoning_parser", default=None)
    return p


def redact_argv(argv: list) -> list:
    """ARGV with the API key hidden: `--api-key KEY` and `--api-key=KEY` (the form gpufleet-launch appends)."""
    return [("<redacted>" if prev == "--api-key" else "--api-key=<redacted>" if a.startswith("--api-key=") else a)
            for prev, a in zip([None] + argv[:-1], argv)]


def argv_file(port: int) -> pathlib.Path:
    explicit = os.environ.get("GPUFLEET_STANDIN_ARGV_FILE")
    if explicit:
        return pathlib.Path(explicit)
    # Under the sandboxed unit (ProtectSystem=strict, a dedicated user) /run is read-only: the unit's
    # StateDirectory= (systemd sets $STATE_DIRECTORY) is where the server may write.
    state = os.environ.get("STATE_DIRECTORY", "").split(":")[0]
    base = pathlib.Path(state) / "sglang-standin" if state else pathlib.Path("/run/sglang-standin")
    return base / f"{port}.argv.json"


# --------------------------------------------------------------------------------------------
# Chat logic (deterministic)
# --------------------------------------------------------------------------------------------
def _last_user_text(messages: list) -> str:
    for message in reversed(messages or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content or "")
    return ""


def _fake_arguments(parameters: dict, question: str) -> dict:
    props = (parameters or {}).get("properties", {}) or {}
    required = (parameters or {}).get("required", list(props)) or []
    out = {}
    for name in required:
        kind = (props.get(name) or {}).get("type", "string")
        if kind in ("number", "integer"):
            out[name] = 1
        elif kind == "boolean":
            out[name] = True
        else:
            out[name] = "Paris" if "france" in question.lower() else "example"
    return out


def answer(state: State, request: dict) -> ChatReply:
    question = _last_user_text(request.get("messages", []))
    lowered = question.lower()
    reply = ChatReply()
    if "capital" in lowered and "france" in lowered:
        reply.content = "Paris"
    else:
        reply.content = f"Stand-in answer to: {question[:200]}"
    if state.args.reasoning_parser:
        reply.reasoning_content = "The user asked a short question; answer it directly."
    tools = request.get("tools") or []
    if tools and state.args.tool_call_parser and request.get("tool_choice") != "none":
        function = (tools[0] or {}).get("function", {})
        reply.tool_calls = [{
            "id": "call_" + uuid.uuid4().hex[:24],
            "index": 0,
            "type": "function",
            "function": {
                "name": function.get("name", "tool"),
                "arguments": json.dumps(_fake_arguments(function.get("parameters"), question)),
            },
        }]
        reply.content = None
        reply.finish_reason = "tool_calls"
    for name, arg in state.modes:
        hook = MODES[name].on_chat
        if hook:
            hook(state, arg, request, reply)
    return reply


def _message_dict(reply: ChatReply) -> dict:
    message = {"role": "assistant", "content": reply.content, "reasoning_content": reply.reasoning_content}
    message["tool_calls"] = reply.tool_calls or None
    return message


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------
class Handler(BaseHTTPRequestHandler):
    server_version = "sglang-standin/" + VERSION
    state: State  # set on the subclass in serve()

    def log_message(self, fmt, *args):  # quieter: one line per request on stderr
        sys.stderr.write("[standin] %s %s\n" % (self.address_string(), fmt % args))

    # -- helpers
    def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else (
            json.dumps(body).encode() if content_type == "application/json" else str(body).encode())
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        request_log = os.environ.get("GPUFLEET_STANDIN_REQUEST_LOG")
        if request_log and self.path.startswith("/v1/"):  # API requests only (not the router's /health polls)
            with open(request_log, "a", encoding="utf-8") as handle:
                handle.write(f"{time.time():.3f} {self.command} {self.path.split('?')[0]} {code}\n")

    def _authorised(self) -> bool:
        key = self.state.args.api_key
        path = self.path.split("?")[0]
        if not key or path.startswith("/health") or path in ("/ping", "/metrics"):
            return True
        if self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        self._send(401, {"error": "Unauthorized"})
        return False

    def _ready_or_503(self) -> bool:
        if self.state.ready.is_set():
            return True
        self._send(503, {"error": "server is starting"})
        return False

    def _server_info(self) -> dict:
        info = {k: v for k, v in vars(self.state.args).items() if k != "api_key"}
        info.update({
            "version": VERSION,
            "standin": True,
            # the folder this server's code runs from, links resolved (which build of a versioned install)
            "code": str(pathlib.Path(__file__).resolve().parent),
            "argv": redact_argv(self.state.argv),
            "ignored_args": list(self.state.ignored),
            "modes": [n if a is None else f"{n}={a}" for n, a in self.state.modes],
            "pid": os.getpid(),
            "started_at": self.state.started_at,
        })
        return info

    # -- routes
    def do_GET(self):  # noqa: N802 (http.server API)
        path = self.path.split("?")[0]
        if not self._authorised():
            return
        if path == "/ping":
            return self._send(200, "pong", "text/plain")
        if path in ("/health", "/health_generate"):
            if self._ready_or_503():
                self._send(200, b"", "text/plain")
            elif path == "/health":
                self.state.health_503s += 1
            return
        if not self._ready_or_503():
            return
        if path == "/v1/models":
            return self._send(200, {"object": "list", "data": [{
                "id": self.state.model_id, "object": "model", "created": int(self.state.started_at),
                "owned_by": "sglang", "root": self.state.model_id}]})
        if path in ("/server_info", "/get_server_info"):
            return self._send(200, self._server_info())
        if path == "/metrics":
            return self._send(200, "# gpufleet stand-in: no metrics\n", "text/plain")
        self._send(404, {"error": f"not found: {path}"})

    def do_POST(self):  # noqa: N802
        path = self.path.split("?")[0]
        if not self._authorised() or not self._ready_or_503():
            return
        if path != "/v1/chat/completions":
            return self._send(404, {"error": f"not found: {path}"})
        try:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
        except (ValueError, json.JSONDecodeError) as exc:
            return self._send(400, {"error": f"bad JSON: {exc}"})
        if any(name == "stall_chat" for name, _arg in self.state.modes):
            return self._stall()
        reply = answer(self.state, request)
        created = int(time.time())
        rid = "chatcmpl-" + uuid.uuid4().hex
        if request.get("stream"):
            return self._stream(rid, created, reply)
        self._send(200, {
            "id": rid, "object": "chat.completion", "created": created, "model": self.state.model_id,
            "choices": [{"index": 0, "message": _message_dict(reply), "logprobs": None,
                         "finish_reason": reply.finish_reason, "matched_stop": reply.matched_stop}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        })

    def _stall(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "4096")
        self.end_headers()
        self.wfile.write(b'{"id": "chatcmpl-')
        self.wfile.flush()
        self.close_connection = True
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            readable, _w, _x = select.select([self.connection], [], [], 0.5)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                return  # the client gave up

    def _stream(self, rid: str, created: int, reply: ChatReply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

        def chunk(delta: dict, finish=None, matched=None) -> None:
            body = {"id": rid, "object": "chat.completion.chunk", "created": created,
                    "model": self.state.model_id,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish,
                                 "matched_stop": matched, "logprobs": None}]}
            self.wfile.write(b"data: " + json.dumps(body).encode() + b"\n\n")
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        if reply.reasoning_content:
            chunk({"reasoning_content": reply.reasoning_content})
        if reply.content:
            words = reply.content.split(" ")
            for i, word in enumerate(words):
                chunk({"content": word if i == 0 else " " + word})
        for call in reply.tool_calls:
            chunk({"tool_calls": [call]})
        chunk({}, reply.finish_reason, reply.matched_stop)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def serve(state: State) -> None:
    handler = type("BoundHandler", (Handler,), {"state": state})
    httpd = ThreadingHTTPServer((state.args.host, state.args.port), handler)
    httpd.daemon_threads = True
    print(f"[standin] listening on http://{state.args.host}:{state.args.port} "
          f"(model {state.model_id}, modes {state.modes})", flush=True)

    def start() -> None:
        for name, arg in state.modes:
            hook = MODES[name].on_start
            if hook:
                hook(state, arg)
        state.ready.set()
        print(READY_LINE, flush=True)

    threading.Thread(target=start, daemon=True).start()
    httpd.serve_forever()


def main(argv: Optional[list] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, ignored = build_parser().parse_known_args(argv)
    state = State(args=args, argv=argv, ignored=ignored,
                  modes=parse_modes(os.environ.get("GPUFLEET_STANDIN_MODE", DEFAULT_MODE)))
    record = argv_file(args.port)
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        redacted = redact_argv(argv)
        record.write_text(json.dumps({"argv": redacted, "ignored": ignored, "pid": os.getpid(),
                                      "env_mode": os.environ.get("GPUFLEET_STANDIN_MODE", DEFAULT_MODE)}) + "\n")
    except OSError as exc:
        print(f"[standin] cannot record argv in {record}: {exc}", file=sys.stderr, flush=True)
    start_log = os.environ.get("GPUFLEET_STANDIN_START_LOG")
    if start_log:  # one line per process start: tests count restarts with it
        pathlib.Path(start_log).parent.mkdir(parents=True, exist_ok=True)
        with open(start_log, "a", encoding="utf-8") as handle:
            handle.write(f"{time.time():.3f} pid={os.getpid()} port={args.port} version={VERSION} "
                         f"code={pathlib.Path(__file__).resolve().parent}\n")
    serve(state)


if __name__ == "__main__":
    main()
