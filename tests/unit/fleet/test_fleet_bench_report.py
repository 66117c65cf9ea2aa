"""playbooks/files/bench_report.py on real bench_serving output.

tests/unit/fleet/data/bench/ holds JSONL written by `python -m sglang.bench_serving` (SGLang
0.5.10.post1) when playbooks/benchmark.yml ran against llama-cpp-python's server with SmolLM2-135M
on this project's CI-class machine (2 CPU cores; see docs/fleet.md "Benchmark"): run
smollm2-q4-a with the earlier two-field tag, smollm2-q4-b with benchmark.yml's "<run>|<set>|<n>" tag.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import shutil
import struct
import zlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
DATA = pathlib.Path(__file__).parent / "data" / "bench"
spec = importlib.util.spec_from_file_location("bench_report", ROOT / "playbooks" / "files" / "bench_report.py")
bench_report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_report)


def _png_pixels(data: bytes):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        crc = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    assert len(raw) == height * (1 + width * 3)
    return width, height, raw


def test_rows_from_real_output():
    rows = bench_report.load(DATA)
    runs = {r["run"] for r in rows}
    assert "smollm2-q4-a" in runs
    a = [r for r in rows if r["run"] == "smollm2-q4-a"]
    assert [r["concurrency"] for r in a] == [1, 2]
    for r in a:
        assert r["prompt_set"] == "in64-out32"
        assert r["output_throughput"] > 0 and r["mean_ttft_ms"] > 0 and r["mean_itl_ms"] > 0
        assert r["decode_tok_s"] > 0


def test_markdown_and_png(tmp_path):
    md, png = tmp_path / "r.md", tmp_path / "r.png"
    assert bench_report.main([str(DATA), "--markdown", str(md), "--png", str(png)]) == 0
    text = md.read_text()
    assert "| smollm2-q4-a | bench-local | in64-out32 | 1 |" in text
    assert "![output tok/s, TTFT and ITL per concurrency](r.png)" in text
    width, height, raw = _png_pixels(png.read_bytes())
    assert width > 1000 and height > 300
    blue = bytes(bench_report.PALETTE[0])
    assert raw.count(blue) > 200, "the first series' line is missing from the plot"
    # Unchanged inputs: nothing rewritten (the playbook reports changed=false).
    before = (md.stat().st_mtime_ns, png.stat().st_mtime_ns)
    bench_report.main([str(DATA), "--markdown", str(md), "--png", str(png)])
    assert (md.stat().st_mtime_ns, png.stat().st_mtime_ns) == before


def test_two_runs_compared_with_headline(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(DATA, results)
    if not (results / "smollm2-q4-b").exists():
        # A second configuration: the same real result under another run name.
        shutil.copytree(results / "smollm2-q4-a", results / "smollm2-q4-b")
    rows = bench_report.load(results, ["smollm2-q4-b", "smollm2-q4-a"])
    assert rows[0]["run"] == "smollm2-q4-b"
    text = bench_report.markdown(rows)
    assert "## Single-stream decode speed (concurrency 1)" in text
    assert "| in64-out32 | " in text and text.count("tok/s |") >= 1
    raw = _png_pixels(bench_report.plot(rows))[2]
    assert raw.count(bytes(bench_report.PALETTE[1])) > 200, "the second run's line is missing"


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(bench_report.ReportError, match="no bench_serving results"):
        bench_report.load(tmp_path)
    bad = tmp_path / "run" / "host"
    bad.mkdir(parents=True)
    (bad / "x-c1.jsonl").write_text("{not json\n")
    with pytest.raises(bench_report.ReportError, match="x-c1.jsonl:1: not JSON"):
        bench_report.load(tmp_path)
    (bad / "x-c1.jsonl").write_text(json.dumps({"output_throughput": 1}) + "\n")
    with pytest.raises(bench_report.ReportError, match="max_concurrency"):
        bench_report.load(tmp_path)
    with pytest.raises(bench_report.ReportError, match=r"runs \['nope'\] not found"):
        shutil.copytree(DATA / "smollm2-q4-a", tmp_path / "ok")
        (bad / "x-c1.jsonl").unlink()
        bench_report.load(tmp_path, ["nope"])
