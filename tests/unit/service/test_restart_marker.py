"""The restart-pending marker (plugins/module_utils/restart_marker.py): append-only, private, parseable."""

import json
import multiprocessing
import os
import stat

from ansible_collections.gpufleet.llm_server.plugins.module_utils.restart_marker import entry, mark, read


def test_mark_creates_private_file_and_directory(tmp_path):
    path = tmp_path / "state" / "restart-pending"
    mark(str(path), "sglang_service", "the unit changed")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    [line] = read(str(path))
    assert line["source"] == "sglang_service" and line["reason"] == "the unit changed" and line["at"].endswith("Z")


def test_marks_append_and_read_keeps_order(tmp_path):
    path = str(tmp_path / "m")
    for n in range(3):
        mark(path, "s%d" % n, "r%d" % n)
    assert [e["source"] for e in read(path)] == ["s0", "s1", "s2"]


def test_no_marker_reads_empty_and_garbage_is_kept_as_text(tmp_path):
    assert read(str(tmp_path / "absent")) == []
    path = tmp_path / "m"
    path.write_text(entry("a", "b") + "\nnot json\n\n")
    entries = read(str(path))
    assert entries[0]["source"] == "a" and entries[1] == {"at": None, "source": None, "reason": "not json"}


def _writer(path, n):
    for i in range(50):
        mark(path, "writer%d" % n, "line %d" % i)


def test_concurrent_writers_lose_no_line(tmp_path):
    path = str(tmp_path / "m")
    procs = [multiprocessing.Process(target=_writer, args=(path, n)) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    lines = read(path)
    assert len(lines) == 200 and all(line["at"] for line in lines)
    assert sorted({line["source"] for line in lines}) == ["writer0", "writer1", "writer2", "writer3"]


def test_entry_is_one_json_line():
    text = entry("x", "a\nb")
    assert "\n" not in text and json.loads(text)["reason"] == "a\nb"
    assert os.linesep not in text
