"""The stand-in SGLang engine (tests/support/standin_sglang, a test double for a 400B model that cannot
run here) installed into a real venv with pip and started with a real rendered argv on loopback.
Ports from 30190-30199, each test its own, free at run time and held by one process at a time
(tests/support/ports.py)."""

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from support.ports import PortPool
from support.standin import standin_python

PORTS = PortPool(range(30190, 30200))


@pytest.fixture(scope="module")
def venv_python():
    return standin_python()


def _free(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture
def port():
    """A loopback port of this module's range that nothing listens on, for this test alone."""
    taken = PORTS.take()
    yield taken
    PORTS.release(taken)


def _get(url, key=None, body=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None)
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def server(venv_python, tmp_path):
    procs = []

    def start(port, extra=(), mode="ok"):
        assert _free(port), f"port {port} busy"
        env = dict(os.environ, GPUFLEET_STANDIN_MODE=mode, GPUFLEET_STANDIN_ARGV_FILE=str(tmp_path / "argv.json"))
        argv = [str(venv_python), "-m", "sglang.launch_server", "--model-path", "/m", "--served-model-name", "demo",
                "--tp-size", "8", "--enable-hierarchical-cache", "--host", "127.0.0.1", "--port", str(port), *extra]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def _wait_ready(proc):
    deadline = time.time() + 120  # a loaded 2-core machine, not an idle one
    lines = []
    while time.time() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if "The server is fired up and ready to roll!" in line:
            return lines
    raise AssertionError("not ready: %s" % lines)


def test_ok_mode_serves_the_openai_surface(port, server, tmp_path):
    proc = server(port, ["--api-key", "k", "--tool-call-parser", "kimi_k2", "--reasoning-parser", "kimi_k2"])
    _wait_ready(proc)
    base = f"http://127.0.0.1:{port}"
    assert _get(base + "/health")[0] == 200 and _get(base + "/ping")[0] == 200
    assert _get(base + "/v1/models")[0] == 401
    status, body = _get(base + "/v1/models", "k")
    assert status == 200 and json.loads(body)["data"][0]["id"] == "demo"
    q = {"messages": [{"role": "user", "content": "What is the capital of France?"}]}
    msg = json.loads(_get(base + "/v1/chat/completions", "k", q)[1])["choices"][0]["message"]
    assert msg["content"] == "Paris" and msg["reasoning_content"]
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    choice = json.loads(_get(base + "/v1/chat/completions", "k", dict(q, tools=tools))[1])["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    stream = _get(base + "/v1/chat/completions", "k", dict(q, stream=True))[1]
    assert stream.rstrip().endswith("data: [DONE]") and '"content": "Paris"' in stream
    info = json.loads(_get(base + "/server_info", "k")[1])
    assert info["ignored_args"] == ["--tp-size", "8", "--enable-hierarchical-cache"]
    assert "k" not in info["argv"] and "<redacted>" in info["argv"]
    assert json.loads((tmp_path / "argv.json").read_text())["argv"][:2] == ["--model-path", "/m"]


def test_no_parsers_means_no_tool_calls_or_reasoning(port, server):
    proc = server(port)
    _wait_ready(proc)
    q = {"messages": [{"role": "user", "content": "capital of France?"}],
         "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}
    msg = json.loads(_get(f"http://127.0.0.1:{port}/v1/chat/completions", body=q)[1])["choices"][0]["message"]
    assert msg["tool_calls"] is None and msg["reasoning_content"] is None and msg["content"] == "Paris"


def test_delay_mode_answers_503_while_loading(port, server):
    proc = server(port, mode="delay=3")
    # Waited for, not slept for: /ping answers as soon as the port is bound, the 3 s of "loading"
    # start then (a fixed sleep failed on a loaded machine, issue 12).
    deadline = time.monotonic() + 120
    while True:
        try:
            if _get(f"http://127.0.0.1:{port}/ping")[0] == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline and proc.poll() is None, "the stand-in never bound its port"
        time.sleep(0.05)
    assert _get(f"http://127.0.0.1:{port}/health")[0] == 503
    _wait_ready(proc)
    assert _get(f"http://127.0.0.1:{port}/health")[0] == 200


def test_unknown_mode_refused(venv_python, port):
    proc = subprocess.run([str(venv_python), "-m", "sglang.launch_server", "--model-path", "/m",
                           "--port", str(port)],
                          env=dict(os.environ, GPUFLEET_STANDIN_MODE="bogus"), capture_output=True, text=True, timeout=20,
                          check=False)
    assert proc.returncode != 0 and "unknown GPUFLEET_STANDIN_MODE entry 'bogus'" in proc.stderr
