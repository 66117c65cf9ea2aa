"""The replay server (tests/support/sglang_replay.py) against the REAL SGLang releases it copies.

SGLang 0.5.10.post1 (sdist) and 0.5.23 (wheel) are downloaded from PyPI at test time
(tests/support/pypi.py, cached) and read with `ast`, never imported (no torch, no FastAPI here):
- every JSON body the replay server sends has the fields of SGLang's pydantic model of that body
  (entrypoints/openai/protocol.py; fields a model_serializer pops when None may be left out), exactly
  for 0.5.10.post1 and without any field 0.5.23 lacks;
- every SGLang text the replay server replays (the 401 body, the 503 queue message, the decode-OOM
  abort, "NaN happened", the stream's error event and [DONE]) occurs in the release's source;
- the streamed qwen3_coder tool call is cut the way the release's detector emits it.
This keeps the double honest: it cannot drift from SGLang without failing here, and its shapes do
not come from the code under test.
"""

from __future__ import annotations

import ast
import re
import pathlib
import tarfile
import zipfile

import pytest

from support import pypi
from support.archives import extract_tar
from support import sglang_replay as replay

RELEASES = {"0.5.10.post1": "sdist", "0.5.23": "wheel"}
FILES = {
    "protocol": "entrypoints/openai/protocol.py",
    "serving_base": "entrypoints/openai/serving_base.py",
    "serving_chat": "entrypoints/openai/serving_chat.py",
    "http_server": "entrypoints/http_server.py",
    "auth": "utils/auth.py",
    "scheduler": "managers/scheduler.py",
    "schedule_batch": "managers/schedule_batch.py",
    "tokenizer_manager": "managers/tokenizer_manager.py",
    "qwen3_coder": "function_call/qwen3_coder_detector.py",
}


@pytest.fixture(scope="module", params=sorted(RELEASES))
def release(request, tmp_path_factory):
    version = request.param
    archive = pypi.download("sglang", version, prefer=RELEASES[version])
    dest = tmp_path_factory.mktemp("sglang-" + version)
    wanted = {"sglang/srt/" + path for path in FILES.values()}
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name in wanted:
                    zf.extract(name, dest)
    else:
        prefix = "sglang-%s/" % version
        with tarfile.open(archive) as tf:
            members = [m for m in tf.getmembers() if m.name[len(prefix):] in wanted]
            extract_tar(tf, dest, members)
        dest = dest / prefix
    sources = {}
    for key, path in FILES.items():
        text = (pathlib.Path(dest) / "sglang" / "srt" / path).read_text()
        sources[key] = (text, ast.parse(text))
    return version, sources


def model(release, name):
    """(fields, fields its model_serializer pops when None) of pydantic class NAME in protocol.py."""
    _text, tree = release[1]["protocol"]
    [cls] = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name]
    fields = {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    popped = set()
    for node in ast.walk(cls):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "pop"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "data" and node.args
                and isinstance(node.args[0], ast.Constant)):
            popped.add(node.args[0].value)
    return fields, popped


def strings(release, key):
    """Every string constant of one source file (implicitly concatenated literals come joined)."""
    _text, tree = release[1][key]
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def assert_shape(release, name, body):
    fields, popped = model(release, name)
    keys = set(body)
    assert keys <= fields, f"{name}: the replay sends {sorted(keys - fields)}, which SGLang {release[0]} lacks"
    if release[0] == "0.5.10.post1":  # the release the replay copies: every field it always sends
        assert fields - popped <= keys, f"{name}: the replay omits {sorted(fields - popped - keys)}"


def test_chat_completion_shapes(release):
    body = replay.chat_response("m", "Paris", "thought",
                                [replay.tool_call("call_1", 0, "get_weather", '{"city": "Paris"}')])
    assert_shape(release, "ChatCompletionResponse", body)
    assert_shape(release, "ChatCompletionResponseChoice", body["choices"][0])
    assert_shape(release, "ChatMessage", body["choices"][0]["message"])
    assert_shape(release, "UsageInfo", body["usage"])
    assert_shape(release, "ToolCall", body["choices"][0]["message"]["tool_calls"][0])
    assert_shape(release, "FunctionResponse", body["choices"][0]["message"]["tool_calls"][0]["function"])


def test_stream_chunk_shapes(release):
    chunk = replay.stream_chunk("rid", "m", {"content": "Par"}, "stop", replay.EOS_TOKEN)
    assert_shape(release, "ChatCompletionStreamResponse", chunk)
    assert_shape(release, "ChatCompletionResponseStreamChoice", chunk["choices"][0])
    assert_shape(release, "DeltaMessage", chunk["choices"][0]["delta"])


def test_model_list_and_error_shapes(release):
    listing = replay.model_list("kimi-k2.5", 1)
    assert_shape(release, "ModelList", listing)
    assert_shape(release, "ModelCard", listing["data"][0])
    assert_shape(release, "ErrorResponse", replay.error_response("x", "500", 500))


def test_replayed_texts_are_sglangs(release):
    assert "Unauthorized" in strings(release, "auth")
    assert "/health" in strings(release, "auth")  # let through without a key (decide_request_auth)
    assert replay.QUEUE_FULL in strings(release, "scheduler")
    assert replay.DECODE_OOM in strings(release, "schedule_batch")
    assert replay.NAN_STOP in strings(release, "schedule_batch")
    assert "data: [DONE]\n\n" in strings(release, "serving_chat")


def test_error_paths_are_sglangs(release):
    base = release[1]["serving_base"][0]
    chat = release[1]["serving_chat"][0]
    # a stream error is {"error": ErrorResponse}, an HTTPException becomes ErrorResponse(type=str(status))
    assert 'json.dumps({"error": error.model_dump()})' in base
    assert "err_type=str(e.status_code)" in base
    assert "create_streaming_error_response(" in chat and 'yield f"data: {error}\\n\\n"' in chat
    # a scheduler abort with status 500/503 is raised as that HTTP status for a non-stream request
    assert "raise fastapi.HTTPException(" in release[1]["tokenizer_manager"][0]
    # /health answers 503 without a body while the server starts
    assert "return Response(status_code=503)" in release[1]["http_server"][0]


def test_streamed_qwen3_coder_tool_call_is_cut_like_the_detector(release):
    text = release[1]["qwen3_coder"][0]
    for piece in ("", "{", "}"):
        assert re.search(r'parameters\s*=\s*"%s"' % re.escape(piece), text), piece
    assert replay.QWEN3_CODER_STREAM_ARGS[0] == "" and replay.QWEN3_CODER_STREAM_ARGS[1] == "{"
    assert replay.QWEN3_CODER_STREAM_ARGS[-1] == "}"
    # the fragment between is '"key": value' as json.dumps writes it (f"{json.dumps(name)}: {json.dumps(v)}")
    assert 'f"{json.dumps(param_name)}: {json.dumps(converted_val, ensure_ascii=False)}"' in text
    joined = "".join(replay.QWEN3_CODER_SPLIT_MARKUP)
    tokens = strings(release, "qwen3_coder")
    assert {"<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>"} <= tokens
    assert joined.startswith("<tool_call>") and "<function=get_weather>" in joined
