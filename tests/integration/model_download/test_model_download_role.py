"""The model_download role, run for real (ansible-playbook, connection local) against a stand-in Hub.

Real parts: ansible-playbook and the role, the real huggingface_hub library (the project venv's, the
role's `model_download_python`), real files and `df`. Test double: tests/support/fake_hf_hub.py stands in
for huggingface.co on loopback (the Hub cannot be reached here); the role reaches it through
`model_download_environment: {HF_ENDPOINT: ...}` as a mirror would be configured.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import stat
import subprocess
import sys
import time

from support.fake_hf_hub import FakeHub, model_files

ROOT = pathlib.Path(__file__).resolve().parents[3]
BIN = pathlib.Path(sys.executable).parent
REPO = "gpufleet-test/tiny-moe"
TOKEN = "hf_gpufleetTESTtoken0123456789abcdef"
SHARD = 256 * 1024


def _profile(model_path, shards, shard_size, **extra):
    return {"model_path": str(model_path), "hub_repo": REPO, "hub_revision": "main", "expected_shards": shards,
            "expected_size_gb": shards * shard_size / 1e9, **extra}


def run_role(tmp_path, hub, profile, *, verbose=False, check=False, token="", **role_vars):
    """Run the role once; return (rc, stdout+stderr, per-task results from the json callback or None)."""
    model_vars = {
        "llm_server_model": "tiny",
        "llm_server_models": {"tiny": profile},
        "llm_server_hf_token": token,
        "ansible_python_interpreter": str(BIN / "python"),
        "model_download_python": str(BIN / "python"),
        "model_download_helper_path": str(tmp_path / "helper" / "gpufleet-hf-download.py"),
        "model_download_environment": {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf-home"),
                                       "HF_HUB_DISABLE_TELEMETRY": "1"},
        "model_download_poll_seconds": 1,
        "model_download_timeout_seconds": 120,
        "model_download_space_margin_gb": 0,
        **role_vars,
    }
    (tmp_path / "helper").mkdir(exist_ok=True)
    vars_file = tmp_path / "vars.json"
    vars_file.write_text(json.dumps(model_vars))
    vars_file.chmod(0o600)
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n"
        "  roles:\n    - gpufleet.llm_server.model_download\n"
        "  handlers:\n    - name: restart sglang\n      ansible.builtin.debug:\n        msg: HANDLER restart sglang ran\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "HF_"))}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_ASYNC_DIR=str(tmp_path / "async"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_PIPELINING="1")
    if not verbose:
        env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.builtin.json"
    cmd = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-e", "@" + str(vars_file), str(play)]
    if verbose:
        cmd.append("-vvv")
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    out = proc.stdout + proc.stderr
    results = None
    if not verbose:
        start = re.search(r"^\{", proc.stdout, re.M)  # profile_tasks (ansible.cfg) prints around the JSON
        assert start, out[-3000:]
        data = json.JSONDecoder().raw_decode(proc.stdout[start.start():])[0]
        results = {"stats": data["stats"]["localhost"],
                   "tasks": {t["task"]["name"].split(" : ")[-1]: t["hosts"].get("localhost", {}) for p in data["plays"] for t in p["tasks"]}}
    return proc.returncode, out, results


def shard_names(n):
    return ["model-%05d-of-%05d.safetensors" % (k, n) for k in range(1, n + 1)]


def test_download_verify_then_noop_then_repair(tmp_path):
    """First run downloads everything (one dropped connection resumed by Range); rerun is a no-op;
    a missing shard and a truncated shard are fetched again, and only those."""
    shard = 11 * 1024 * 1024  # > the library's 10 MiB write chunk, so the resume is a Range request
    files = model_files(2, shard)
    cut = shard_names(2)[1]
    model = tmp_path / "models" / "tiny"
    with FakeHub(REPO, files, fail_once={cut}, cut_at=shard - 4096) as hub:
        t0 = time.monotonic()
        rc, out, res = run_role(tmp_path, hub, _profile(model, 2, shard))
        assert rc == 0, out
        first = time.monotonic() - t0
        assert res["stats"]["changed"] >= 1 and res["stats"]["failures"] == 0
        for name, data in files.items():
            assert (model / name).read_bytes() == data, name
        ranges = [r for r in hub.requests if r["file"] == cut and r["range"]]
        assert ranges and ranges[0]["range"].startswith("bytes=10485760-"), hub.requests
        assert "HANDLER restart sglang ran" in json.dumps(res["tasks"]["restart sglang"])
        assert not (model / ".gpufleet-hf-token").exists()

        seen = len(hub.requests)
        rc, out, res = run_role(tmp_path, hub, _profile(model, 2, shard))
        assert rc == 0, out
        assert res["stats"]["changed"] == 0, res["stats"]
        assert hub.requests[seen:] == [], "a verified model must not contact the Hub"

        (model / shard_names(2)[0]).unlink()
        before = (model / shard_names(2)[1]).stat()
        with open(model / shard_names(2)[1], "r+b") as handle:  # a corruption huggingface_hub cannot see:
            handle.truncate(shard // 2)                             # same mtime, so its metadata looks fresh
        os.utime(model / shard_names(2)[1], ns=(before.st_atime_ns, before.st_mtime_ns))
        seen = len(hub.requests)
        rc, out, res = run_role(tmp_path, hub, _profile(model, 2, shard))
        assert rc == 0, out
        assert res["stats"]["changed"] >= 1
        fetched = sorted({r["file"] for r in hub.requests[seen:] if r["method"] == "GET" and r["file"]})
        assert fetched == shard_names(2)
        for name, data in files.items():
            assert (model / name).read_bytes() == data, name
    print("first download %.1fs" % first)


def test_wrong_token_then_hub_error_fail_clearly_and_rerun_resumes(tmp_path):
    """A rejected token and a Hub error fail the run with a clear message; nothing secret is printed;
    the rerun fetches only the files that are not complete yet."""
    files = model_files(3, SHARD)
    broken = shard_names(3)[1]
    model = tmp_path / "models" / "tiny"
    with FakeHub(REPO, files, token=TOKEN, fail_always={broken}) as hub:
        rc, out, res = run_role(tmp_path, hub, _profile(model, 3, SHARD), token="hf_wrong")
        assert rc != 0
        assert "HTTP 401" in out and "set model_download_hf_token" in out, out[-3000:]
        assert "hf_wrong" not in out
        assert not (model / ".gpufleet-hf-token").exists()
        assert not [r for r in hub.requests if r["file"]]

        rc, out, res = run_role(tmp_path, hub, _profile(model, 3, SHARD), token=TOKEN, model_download_max_workers=1)
        assert rc != 0
        assert "HTTP 500): " + broken in out, out[-3000:]
        assert (model / shard_names(3)[0]).read_bytes() == files[shard_names(3)[0]]
        assert not (model / broken).exists()
        missing = {name for name in files if not (model / name).is_file()}
        assert broken in missing and len(missing) < len(files)
        hub.fail_always.clear()
        seen = len(hub.requests)
        rc, out, res = run_role(tmp_path, hub, _profile(model, 3, SHARD), token=TOKEN, model_download_max_workers=1)
        assert rc == 0, out
        fetched = {r["file"] for r in hub.requests[seen:] if r["method"] == "GET" and r["file"]}
        assert fetched == missing, (fetched, missing)  # complete files are kept, not fetched again
        for name, data in files.items():
            assert (model / name).read_bytes() == data, name


def test_wrong_revision_or_shard_count_fails_with_the_variable(tmp_path):
    files = model_files(2, SHARD)
    model = tmp_path / "models" / "tiny"
    with FakeHub(REPO, files) as hub:
        rc, out, res = run_role(tmp_path, hub, _profile(model, 3, SHARD))  # the repo has 2 shards
        assert rc != 0
        msg = json.dumps(res["tasks"]["Refuse an incomplete model"])
        assert "holds 2 shards" in msg and "expected_shards" in msg and "llm_server_models['tiny']" in msg, msg


def test_not_enough_space_is_refused_before_any_download(tmp_path):
    files = model_files(2, SHARD)
    model = tmp_path / "models" / "tiny"
    with FakeHub(REPO, files) as hub:
        rc, out, res = run_role(tmp_path, hub, _profile(model, 2, SHARD), model_download_space_margin_gb=10**9)
        assert rc != 0
        msg = json.dumps(res["tasks"]["Refuse to start when the filesystem lacks space"])
        assert "model_download_space_margin_gb" in msg and "1000000000" in msg and "model_path" in msg, msg
        assert hub.requests == []
        assert not model.exists()


def test_token_sent_never_logged_and_progress_lines(tmp_path):
    """Token: the Hub sees `Bearer <token>`, the token file is 0600 while in use and removed after; -vvv
    output and every file left behind hold no token. A slow download prints one line per poll."""
    files = model_files(2, SHARD)
    model = tmp_path / "models" / "tiny"
    modes = []

    def watch(entry):
        token_file = model / ".gpufleet-hf-token"
        if token_file.exists():
            modes.append(stat.S_IMODE(token_file.stat().st_mode))

    with FakeHub(REPO, files, token=TOKEN, bytes_per_second=2 * SHARD // 3, hook=watch) as hub:
        rc, out, _results = run_role(tmp_path, hub, _profile(model, 2, SHARD), verbose=True, token=TOKEN)  # ~3 s of body
        assert rc == 0, out[out.find("fatal:"):][:4000]
        hub_calls = [r for r in hub.requests if r["host"].startswith("127.0.0.1")]
        assert hub_calls and all(r["authorization"] == "Bearer " + TOKEN for r in hub_calls)
        cdn_calls = [r for r in hub.requests if r["host"].startswith("127.0.0.2")]
        assert cdn_calls and all(r["authorization"] is None for r in cdn_calls)
    assert TOKEN not in out
    assert modes and set(modes) == {0o600}, modes
    assert not (model / ".gpufleet-hf-token").exists()
    leaks = []
    for path in tmp_path.rglob("*"):
        # vars.json is the extra-vars file that stands in for the vault (0600, written by this test)
        if path.is_file() and path.name != "vars.json" and TOKEN.encode() in path.read_bytes():
            leaks.append(str(path))
    assert leaks == []
    retries = re.findall(r"FAILED - RETRYING: \[localhost\]: Wait for the download", out)
    assert len(retries) >= 2, out[-3000:]


def test_check_mode_downloads_nothing(tmp_path):
    files = model_files(1, SHARD)
    model = tmp_path / "models" / "tiny"
    with FakeHub(REPO, files) as hub:
        rc, out, res = run_role(tmp_path, hub, _profile(model, 1, SHARD), check=True)
        assert rc == 0, out
        assert hub.requests == []
        assert not model.exists()
