"""A replay server for the smoke-test tests: SGLang's HTTP behaviours, good and bad, on loopback (a TEST DOUBLE).

Why a double: the failures replayed here (a NaN-producing FP4 kernel, a full request queue, a
scheduler abort mid-stream, a parser that misses a tag split across chunks, a hung process) need
GPUs, a 400B model or a broken build; the real CPU engine (tests/support/llama_engine.py) covers
what a healthy engine does. The module under test is never consulted: every shape below is taken
from SGLang's own source, release 0.5.10.post1 (the sdist tests/support/pypi.py downloads; file paths
are under python/sglang/srt/), and tests/integration/smoke/test_replay_shapes.py checks the key
sets and strings against the real 0.5.10.post1 and 0.5.23 releases, so the double cannot drift from
SGLang without a test failing. Where a behaviour is not an SGLang shape (a transport failure), its
docstring says so.

Shapes (0.5.10.post1):
- JSON bodies are the pydantic models of entrypoints/openai/protocol.py dumped with every field:
  ModelList/ModelCard, ChatCompletionResponse (choices, usage=UsageInfo, metadata
  {"weight_version": ...}; `sglext` dropped when None), ChatCompletionResponseChoice (`hidden_states`
  dropped when None), ChatMessage, ToolCall/FunctionResponse.
- SSE: `data: <ChatCompletionStreamResponse JSON>\\n\\n` per chunk, a first chunk with
  {"role": "assistant", "content": ""}, a last chunk with the finish_reason and matched_stop, then
  `data: [DONE]\\n\\n` (serving_chat._generate_chat_stream), sent with chunked transfer encoding as
  uvicorn does.
- Errors: ErrorResponse {"object": "error", "message", "type", "param", "code"}
  (serving_base.create_error_response); a scheduler abort becomes HTTPException(status, message) in
  managers/tokenizer_manager.py, answered with type str(status) (serving_base.handle_request); in a
  stream the abort is `data: {"error": ErrorResponse}` with type = HTTPStatus name
  (create_streaming_error_response), followed by `data: [DONE]`.
- Auth: utils/auth.py lets /health* and /metrics through without a key and answers everything else
  401 {"error": "Unauthorized"}.
- /health: 503 with an empty body while starting, 200 with an empty body when a one-token
  generation answered (entrypoints/http_server.health_generate).

`ReplayServer(behaviour, ...)` is a context manager serving one behaviour (see BEHAVIOURS) on
127.0.0.1:PORT from a thread of the test process; `requests` records what it received.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EOS_TOKEN = 151645  # Qwen's <|im_end|>: SGLang reports the matched stop token id in matched_stop

# ------------------------------------------------------------------ SGLang's JSON shapes (0.5.10.post1)


def model_list(model_id: str, created: int) -> dict:
    """protocol.ModelList with one protocol.ModelCard (entrypoints/openai/serving_... models route)."""
    return {"object": "list", "data": [{"id": model_id, "object": "model", "created": created, "owned_by": "sglang",
                                        "root": model_id, "parent": None, "max_model_len": 262144}]}


def tool_call(call_id, index, name, arguments) -> dict:
    """protocol.ToolCall with protocol.FunctionResponse."""
    return {"id": call_id, "index": index, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat_response(model: str, content=None, reasoning=None, tool_calls=None, finish_reason="stop",
                  matched_stop=EOS_TOKEN, completion_tokens=2) -> dict:
    """protocol.ChatCompletionResponse as serving_chat._build_chat_response fills it."""
    return {
        "id": uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0,
                     "message": {"role": "assistant", "content": content, "reasoning_content": reasoning,
                                 "tool_calls": tool_calls},
                     "logprobs": None, "finish_reason": finish_reason, "matched_stop": matched_stop}],
        "usage": {"prompt_tokens": 17, "total_tokens": 17 + completion_tokens, "completion_tokens": completion_tokens,
                  "prompt_tokens_details": None, "reasoning_tokens": 0},
        "metadata": {"weight_version": "default"},
    }


def stream_chunk(rid: str, model: str, delta: dict, finish_reason=None, matched_stop=None) -> dict:
    """protocol.ChatCompletionStreamResponse with one ChatCompletionResponseStreamChoice and DeltaMessage."""
    full_delta = {"role": None, "content": None, "reasoning_content": None, "tool_calls": None}
    full_delta.update(delta)
    return {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "delta": full_delta, "logprobs": None, "finish_reason": finish_reason,
                         "matched_stop": matched_stop}],
            "usage": None}


def error_response(message: str, err_type: str, code: int) -> dict:
    """protocol.ErrorResponse (serving_base.create_error_response)."""
    return {"object": "error", "message": message, "type": err_type, "param": None, "code": code}


# Real SGLang texts (0.5.10.post1), checked against the releases by test_replay_shapes.py.
UNAUTHORIZED = {"error": "Unauthorized"}                      # utils/auth.py
QUEUE_FULL = "The request queue is full."                     # managers/scheduler.py _abort_on_queued_limit
DECODE_OOM = ("Out of memory even after retracting all other requests in the decode batch. "
              "Aborting the last request.")                    # managers/schedule_batch.py retract_decode
NAN_STOP = "NaN happened"                                      # managers/schedule_batch.py FINISH_MATCHED_STR
FASTAPI_404 = {"detail": "Not Found"}                          # FastAPI/Starlette's default 404 (llama.cpp server)

# The qwen3_coder detector's streaming output for <function=get_weather><parameter=city>Paris</parameter>
# </function>: the name with arguments "", then "{", then '"city": "Paris"', then "}"
# (function_call/qwen3_coder_detector.parse_streaming_increment), each a ToolCall delta of index 0.
QWEN3_CODER_STREAM_ARGS = ["", "{", '"city": "Paris"', "}"]
# The same call as raw qwen3_coder markup (function_call/qwen3_coder_detector.py tokens), cut where a
# streaming parser that does not hold back partial tags lets it through as content: tags split
# across chunks made SGLang's streaming parsers miss tool calls (sglang#31119 "cross-chunk tag
# truncation", sglang#40739 stream vs non-stream qwen3_coder differences).
QWEN3_CODER_SPLIT_MARKUP = ["<tool_", "call>\n<func", "tion=get_weather>\n<param", "eter=city>\nPar", "is\n</para",
                            "meter>\n</function>\n</tool_call>"]

BEHAVIOURS = {
    "healthy": "every endpoint answers as SGLang does (chat 'Paris', structured tool calls, reasoning, SSE)",
    "no_health": "like healthy, but /health is FastAPI's 404 (llama-cpp-python's server has no /health)",
    "starting": "/health 503 with an empty body forever (SGLang while ServerStatus.Starting)",
    "stalled_body": "chat answers the status line, headers and 20 bytes, then nothing (a hung process; not an "
                    "SGLang shape)",
    "stalled_models": "GET /v1/models answers the headers and 10 bytes, then nothing (a hung process)",
    "cut_body": "chat answers half of its Content-Length, then closes (a process killed mid-write)",
    "cut_stream": "the stream sends two chunks, then closes without the last chunk (a process killed mid-stream)",
    "silent": "accepts connections, reads the request, never answers (a hung server)",
    "reset": "closes every connection without answering (not an HTTP server, or a crash)",
    "nan_200": "SGLang's NaN answer: content '!!!!', finish_reason stop, matched_stop 'NaN happened'",
    "nan_500": "chat answers 500 ErrorResponse 'NaN happened' (a scheduler abort with status 500)",
    "queue_full": "max_queued_requests=3: a chat request arriving while 3 are held 0.5 s gets 503 "
                  "'The request queue is full.' (one of 4 parallel requests)",
    "trickle": "the stream trickles reasoning_content, one piece every 0.25 s, for 2 minutes",
    "trickle_body": "the chat JSON body arrives one byte every 0.25 s (each read is fast, the whole is not)",
    "error_event": "the stream sends a content chunk, then SGLang's abort event (decode OOM, code 500), then [DONE]",
    "split_markup": "the streamed tool call leaks as raw qwen3_coder markup split across content chunks; "
                    "the non-streamed tools request is parsed",
    "length_thinking": "every chat answer: content null, reasoning_content filled, finish_reason length",
    "markup_in_reasoning": "tool requests: the kimi_k2 tool-call markup sits in reasoning_content, content null",
    "path_name": "/v1/models lists the model's path (SGLang without --served-model-name)",
    "not_json": "chat answers 200 with an HTML page",
    "stream_as_json": "a stream request is answered with a JSON chat completion (stream ignored)",
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    replay: "ReplayServer"

    def log_message(self, fmt, *args):  # quiet
        return

    # ---------------------------------------------------------------- plumbing
    def _send_json(self, code, body, extra_headers=()):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in extra_headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_empty(self, code):
        self.send_response(code)
        self.send_header("content-length", "0")
        self.end_headers()

    def _hold(self, seconds=120.0):
        """Keep the connection open without writing until the client leaves or the server stops."""
        deadline = time.monotonic() + seconds
        sock = self.connection
        while time.monotonic() < deadline and not self.replay.stopping.is_set():
            readable, _w, _x = select.select([sock], [], [], 0.1)
            if readable:
                try:
                    if not sock.recv(1, socket.MSG_PEEK):
                        return
                except OSError:
                    return
                time.sleep(0.05)
        self.close_connection = True

    def _chunk(self, data: bytes):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _sse(self, events, pause=0.0, end=True):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event in events:
            if self.replay.stopping.is_set():
                return
            payload = event if isinstance(event, str) else json.dumps(event)
            try:
                self._chunk(b"data: " + payload.encode() + b"\n\n")
            except OSError:
                return  # the client gave up (its deadline)
            if pause:
                time.sleep(pause)
        if end:
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _body(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def _authorised(self, path):
        key = self.replay.api_key
        if not key or path.startswith("/health") or path.startswith("/metrics"):
            return True
        if self.headers.get("authorization", "") == "Bearer " + key:
            return True
        self._send_json(401, UNAUTHORIZED)
        return False

    # ---------------------------------------------------------------- routes
    def do_GET(self):  # noqa: N802 (http.server API)
        path = self.path.split("?")[0]
        behaviour = self.replay.behaviour
        self.replay.record("GET", path, self.headers)
        if behaviour == "reset":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if behaviour == "silent":
            return self._hold()
        if not self._authorised(path):
            return
        if path in ("/health", "/health_generate"):
            if behaviour == "no_health":
                return self._send_json(404, FASTAPI_404)
            if behaviour == "starting":
                return self._send_empty(503)
            return self._send_empty(200)
        if path == "/v1/models":
            if behaviour == "stalled_models":
                data = json.dumps(model_list(self.replay.model, self.replay.created)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[:10])
                self.wfile.flush()
                return self._hold()
            model_id = self.replay.model_path if behaviour == "path_name" else self.replay.model
            return self._send_json(200, model_list(model_id, self.replay.created))
        self._send_json(404, FASTAPI_404)

    def do_POST(self):  # noqa: N802
        path = self.path.split("?")[0]
        behaviour = self.replay.behaviour
        self.replay.record("POST", path, self.headers)
        if behaviour == "reset":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if behaviour == "silent":
            return self._hold()
        if not self._authorised(path):
            return
        request = self._body()
        if path != "/v1/chat/completions":
            return self._send_json(404, FASTAPI_404)
        if request.get("stream"):
            return self._stream(request)
        return self._chat(request)

    def _chat(self, request):
        behaviour = self.replay.behaviour
        model = request.get("model") or self.replay.model
        if behaviour == "nan_500":
            # tokenizer_manager raises HTTPException(status_code=500, detail=message) for a scheduler
            # abort with status 500; serving_base.handle_request answers ErrorResponse(type=str(status)).
            return self._send_json(500, error_response(NAN_STOP, "500", 500))
        if behaviour == "queue_full":
            with self.replay.lock:
                self.replay.in_flight += 1
                queued = self.replay.in_flight
                self.replay.last_arrival = time.monotonic()
            try:
                if queued > 3:
                    self.replay.overflowed.set()
                    return self._send_json(503, error_response(QUEUE_FULL, "503", 503))
                # Held until a fourth request overflowed the queue of three, or none arrived for 0.6 s: a fixed 0.5 s
                # let all four pass when a busy machine spread their arrivals wider (helper audit, 2026-12-07).
                while not self.replay.overflowed.wait(0.05):
                    with self.replay.lock:
                        if time.monotonic() - self.replay.last_arrival >= 0.6:
                            break
            finally:
                with self.replay.lock:
                    self.replay.in_flight -= 1
        body = self.replay.answer(request, model)
        if behaviour == "not_json":
            data = b"<html><body><h1>Welcome to nginx!</h1></body></html>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        data = json.dumps(body).encode()
        if behaviour in ("stalled_body", "cut_body", "trickle_body"):
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            if behaviour == "stalled_body":
                self.wfile.write(data[:20])
                self.wfile.flush()
                return self._hold()
            if behaviour == "cut_body":
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            for i in range(len(data)):
                if self.replay.stopping.is_set():
                    return
                try:
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.25)
            return
        self._send_json(200, body)

    def _stream(self, request):
        behaviour = self.replay.behaviour
        model = request.get("model") or self.replay.model
        rid = uuid.uuid4().hex
        if behaviour == "stream_as_json":
            return self._send_json(200, self.replay.answer(dict(request, stream=False), model))
        first = stream_chunk(rid, model, {"role": "assistant", "content": ""})
        if behaviour == "trickle":
            pieces = (stream_chunk(rid, model, {"reasoning_content": "step "}) for _piece in range(480))
            return self._sse([first, *pieces], pause=0.25)
        if behaviour == "error_event":
            # serving_chat: an abort from the scheduler -> create_streaming_error_response(message,
            # code.name, code.value), yielded as one event, then the loop ends and [DONE] follows.
            return self._sse([first, stream_chunk(rid, model, {"content": "The"}),
                              {"error": error_response(DECODE_OOM, "INTERNAL_SERVER_ERROR", 500)}])
        if behaviour == "cut_stream":
            self._sse([first, stream_chunk(rid, model, {"content": "Par"})], end=False)
            self.close_connection = True
            return
        events = [first]
        if request.get("tools") and self.replay.tool_parser:
            if behaviour == "split_markup":
                events += [stream_chunk(rid, model, {"content": piece}) for piece in QWEN3_CODER_SPLIT_MARKUP]
                events.append(stream_chunk(rid, model, {}, "stop", EOS_TOKEN))
                return self._sse(events)
            call_id = "call_" + uuid.uuid4().hex[:24]
            for i, piece in enumerate(QWEN3_CODER_STREAM_ARGS):
                events.append(stream_chunk(rid, model, {"tool_calls": [
                    tool_call(call_id if i == 0 else None, 0, "get_weather" if i == 0 else None, piece)]}))
            # A stop after tool calls is reported as finish_reason "tool_calls" (serving_chat).
            events.append(stream_chunk(rid, model, {}, "tool_calls", EOS_TOKEN))
            return self._sse(events)
        body = self.replay.answer(dict(request, stream=False), model)
        message = body["choices"][0]["message"]
        if message.get("reasoning_content"):
            events.append(stream_chunk(rid, model, {"reasoning_content": message["reasoning_content"]}))
        for i, word in enumerate((message.get("content") or "").split(" ")):
            if word:
                events.append(stream_chunk(rid, model, {"content": word if i == 0 else " " + word}))
        choice = body["choices"][0]
        events.append(stream_chunk(rid, model, {}, choice["finish_reason"], choice["matched_stop"]))
        self._sse(events)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """A client that gave up (its deadline) breaks the pipe: expected here, not worth a traceback."""


class ReplayServer(contextlib.AbstractContextManager):
    """One behaviour of BEHAVIOURS on 127.0.0.1:PORT (served from a thread of this process)."""

    def __init__(self, port: int, behaviour: str = "healthy", *, model: str = "kimi-k2.5",
                 model_path: str = "/shared/kimi-k2.5-int4", api_key: str | None = None,
                 tool_parser: bool = True, reasoning: bool = False):
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r}; known: {', '.join(sorted(BEHAVIOURS))}")
        self.port = port
        self.behaviour = behaviour
        self.model = model
        self.model_path = model_path
        self.api_key = api_key
        self.tool_parser = tool_parser
        self.reasoning = reasoning
        self.created = int(time.time())
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.last_arrival = 0.0  # queue_full: the latest request's arrival, and whether one was refused
        self.overflowed = threading.Event()
        self.requests: list[tuple[str, str, bool]] = []
        handler = type("ReplayHandler", (_Handler,), {"replay": self})
        self.httpd = _QuietServer(("127.0.0.1", port), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def record(self, method, path, headers):
        with self.lock:
            self.requests.append((method, path, bool(headers.get("authorization"))))

    def answer(self, request: dict, model: str) -> dict:
        """The non-streamed answer of this behaviour to a chat request."""
        prompt = " ".join(str(m.get("content", "")) for m in request.get("messages") or [] if isinstance(m, dict))
        reasoning = "The user asks a short question; answer it directly." if self.reasoning else None
        if self.behaviour == "nan_200":
            return chat_response(model, "!!!!!!!!!!!!!!!!", None, None, "stop", NAN_STOP, 16)
        if self.behaviour == "length_thinking":
            return chat_response(model, None, "Let me think step by step about this. " * 20, None, "length", None,
                                 request.get("max_tokens") or 1024)
        if request.get("tools") and self.tool_parser:
            if self.behaviour == "markup_in_reasoning":
                markup = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                          '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>')
                return chat_response(model, None, "I should call the tool. " + markup, None, "stop", EOS_TOKEN, 40)
            calls = [tool_call("call_" + uuid.uuid4().hex[:24], 0, "get_weather", '{"city": "Paris"}')]
            return chat_response(model, None, reasoning, calls, "tool_calls", None, 12)
        content = "Paris" if "capital of France" in prompt else "42"
        return chat_response(model, content, reasoning)

    def __enter__(self) -> "ReplayServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)
