"""module_utils/model_manifest.py: the per-run check of a model directory against its record, which lives
outside the directory (issue 34). Real files in tmp_path; records written as the helper writes them
(roles/model_download/files/hf_download.py: its record_name and fingerprint, loaded from the file)."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import pathlib

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import model_manifest
from ansible_collections.gpufleet.llm_server.plugins.module_utils.model_manifest import (
    LEGACY_MANIFEST_NAME, ManifestError, check, present_entries, read_record, record_path)

HELPER = pathlib.Path(__file__).resolve().parents[3] / "roles/model_download/files/hf_download.py"


def helper():
    spec = importlib.util.spec_from_file_location("hf_download_under_test", HELPER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_model(model, records, files, record=True, **fields):
    model.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (model / name).parent.mkdir(parents=True, exist_ok=True)
        (model / name).write_bytes(data)
    if record:
        body = {"format": 2, "model_path": str(model), "repo": "org/model", "revision": "main", "commit": "c" * 40,
                "source": "hub", "verified": "sha256", "verified_at": "2026-12-04T00:00:00Z",
                "files": {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                 "stat": helper().fingerprint(str(model / name))} for name, data in files.items()}}
        body.update(fields)
        records.mkdir(parents=True, exist_ok=True)
        pathlib.Path(record_path(str(model), str(records))).write_text(json.dumps(body))
    return model


FILES = {"config.json": b"{}", "model-00001-of-00002.safetensors": b"a" * 100,
         "sub/model-00002-of-00002.safetensors": b"b" * 50}


@pytest.fixture(name="dirs")
def _dirs(tmp_path):
    return tmp_path / "models" / "m", tmp_path / "records"


def run(model, records, hub_repo="org/model", revision="main", **kw):
    return check(str(model), hub_repo, revision, record_dir=str(records), **kw)


def test_record_name_is_the_helpers_and_outside_the_model(dirs):
    model, records = dirs
    assert helper().record_name(str(model)) == model_manifest.record_name(str(model))
    assert helper().record_name(str(model) + "/") == model_manifest.record_name(str(model))
    assert model_manifest.record_name("/a/b") != model_manifest.record_name("/a_b")  # same slug, other path
    assert helper().BOOKKEEPING == model_manifest.BOOKKEEPING and helper().OWN_FILES == model_manifest.OWN_FILES
    assert not record_path(str(model), str(records)).startswith(str(model) + "/")


def test_complete_model_has_no_problems(dirs):
    model = write_model(*dirs, FILES)
    result = run(model, dirs[1])
    assert result["state"] == "complete" and result["problems"] == [] and result["stray"] == []
    assert result["files"] == 3 and result["bytes"] == result["bytes_present"] == 152
    assert "all 3 files" in result["msg"] and "inode, mtime, ctime" in result["msg"]


def test_missing_truncated_and_replaced_files_are_named(dirs):
    model = write_model(*dirs, FILES)
    (model / "config.json").unlink()
    (model / "model-00001-of-00002.safetensors").write_bytes(b"a" * 40)
    (model / "sub" / "model-00002-of-00002.safetensors").unlink()
    (model / "sub" / "model-00002-of-00002.safetensors").mkdir()
    result = run(model, dirs[1])
    assert result["state"] == "incomplete"
    assert [(p["path"], p["reason"], p["have"], p["want"]) for p in result["problems"]] == [
        ("config.json", "missing", None, 2),
        ("model-00001-of-00002.safetensors", "size", 40, 100),
        ("sub/model-00002-of-00002.safetensors", "not a file", None, 50)]
    assert "3 of 3 files" in result["msg"] and "(40 bytes, want 100)" in result["msg"]
    assert result["bytes_present"] == 0


def test_same_size_edit_is_changed_even_with_the_mtime_put_back(dirs):
    """A flipped byte in the middle of a shard (mtime restored with utime: only the ctime tells) and a file
    replaced by a copy of the same size (new inode): both 'changed', without reading a byte."""
    model = write_model(*dirs, FILES)
    shard = model / "model-00001-of-00002.safetensors"
    before = shard.stat()
    with open(shard, "r+b") as handle:
        handle.seek(50)
        handle.write(b"X")
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert shard.stat().st_mtime_ns == before.st_mtime_ns and shard.stat().st_size == before.st_size
    replaced = model / "config.json"
    (model / "config.new").write_bytes(b"[]")
    os.replace(model / "config.new", replaced)
    result = run(model, dirs[1])
    assert result["state"] == "incomplete"
    assert {p["path"]: p["reason"] for p in result["problems"]} == {
        "config.json": "changed", "model-00001-of-00002.safetensors": "changed"}
    assert "changed since it was hashed" in result["msg"]
    assert result["bytes_present"] == 152  # changed files are there: only their content is in question


def test_stray_files_the_server_would_load_are_reported_unless_allowed(dirs):
    model = write_model(*dirs, FILES)
    (model / "model-00003-of-00002.safetensors").write_bytes(b"evil")
    (model / "modeling_evil.py").write_text("import os\n")
    (model / "sub" / "extra.bin").write_bytes(b"x")
    (model / "README.md").write_text("notes")  # not loaded
    (model / LEGACY_MANIFEST_NAME).write_text("{}")  # this collection's own (format 1) file
    (model / ".gpufleet").mkdir()
    (model / ".gpufleet" / "status.json").write_text("{}")  # bookkeeping
    (model / ".cache" / "huggingface").mkdir(parents=True)
    (model / ".cache" / "huggingface" / "x.json").write_text("{}")
    result = run(model, dirs[1])
    assert result["state"] == "stray"
    assert result["stray"] == ["model-00003-of-00002.safetensors", "modeling_evil.py", "sub/extra.bin"]
    assert "model_download_allowed_extra_files" in result["msg"] and "Nothing was changed" in result["msg"]
    allowed = run(model, dirs[1], allow_extra=["*.py", "sub/*.bin"])
    assert allowed["stray"] == ["model-00003-of-00002.safetensors"]
    assert run(model, dirs[1], allow_extra=["*.py", "*.bin", "model-00003-*"])["state"] == "complete"
    # a damaged file and a stray one: the damage is the state, the stray files are reported all the same
    (model / "config.json").unlink()
    both = run(model, dirs[1])
    assert both["state"] == "incomplete" and len(both["stray"]) == 3 and "stray_msg" in both


def test_without_record_hub_repo_decides_between_buildable_lost_and_unverifiable(dirs):
    model, records = dirs
    write_model(model, records, FILES, record=False)
    (model / ".cache" / "huggingface").mkdir(parents=True)
    (model / ".cache" / "huggingface" / "junk").write_bytes(b"x" * 1000)  # bookkeeping is not model bytes
    with_repo = run(model, records)
    assert with_repo["state"] == "no_manifest" and with_repo["bytes_present"] == 152 and not with_repo["warnings"]
    without = run(model, records, "")
    assert without["state"] == "unverifiable"
    assert "cannot be verified" in without["msg"] and "set the profile's hub_repo" in without["msg"]
    assert "model_download_adopt=true" in without["msg"]
    assert run(model.parent / "absent", records)["state"] == "no_manifest"

    (model / ".gpufleet").mkdir()
    (model / ".gpufleet" / "recorded").write_text("x\n")  # the helper's marker: a record existed
    lost = run(model, records, "")
    assert lost["state"] == "record_lost"
    assert "its record %s is gone" % record_path(str(model), str(records)) in lost["msg"]
    assert "restore the record" in lost["msg"] and "model_download_adopt=true" in lost["msg"]
    rebuilt = run(model, records)
    assert rebuilt["state"] == "no_manifest" and "recorded before" in rebuilt["warnings"][0]


def test_a_format_1_manifest_in_the_directory_is_not_trusted_but_marks_it_recorded(dirs):
    model, records = dirs
    write_model(model, records, FILES, record=False)
    (model / LEGACY_MANIFEST_NAME).write_text(json.dumps({"format": 1, "files": {"config.json": {"size": 2}}}))
    assert run(model, records, "")["state"] == "record_lost"


def test_a_record_for_another_repo_or_revision_is_other_source(dirs):
    model = write_model(*dirs, FILES)
    assert run(model, dirs[1], "org/other")["state"] == "other_source"
    assert run(model, dirs[1], "org/model", "v2")["state"] == "other_source"
    assert run(model, dirs[1], "", "v2")["state"] == "complete"  # no hub_repo: the record is all there is


@pytest.mark.parametrize("body, reason", [
    ("not json", "cannot be read"),
    ({"format": 2, "files": {}}, "holds no file list"),
    ({"format": 1, "files": {"a": {"size": 1}}}, "has format 1"),
    ({"format": 2, "model_path": "/elsewhere", "files": {"a": {"size": 1, "stat": [1, 2, 3]}}}, "is the record of"),
    ({"format": 2, "files": {"a": {"size": "1", "stat": [1, 2, 3]}}}, "no valid size"),
    ({"format": 2, "files": {"a": {"size": 1}}}, "no stat fingerprint"),
    ({"format": 2, "files": {"../etc/passwd": {"size": 1, "stat": [1, 2, 3]}}}, "not a path inside"),
])
def test_an_unusable_record_is_refused_and_ignored_with_a_warning(dirs, body, reason):
    model, records = dirs
    model.mkdir(parents=True)
    records.mkdir()
    if isinstance(body, dict) and "model_path" not in body:
        body["model_path"] = str(model)
    pathlib.Path(record_path(str(model), str(records))).write_text(body if isinstance(body, str) else json.dumps(body))
    with pytest.raises(ManifestError, match=reason):
        read_record(str(model), str(records))
    result = run(model, records)
    assert result["state"] == "no_manifest" and reason in result["warnings"][0]
    assert "rebuilt by hashing every file" in result["warnings"][0]


def test_stray_files_of_older_versions_are_named_only_when_present(tmp_path):
    (tmp_path / ".gpufleet-hf-token").write_text("hf_left_by_an_older_run")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert present_entries(str(tmp_path), [".gpufleet-hf-token", "absent", "dangling"]) == [".gpufleet-hf-token", "dangling"]
    assert present_entries(str(tmp_path / "no-such-dir"), [".gpufleet-hf-token"]) == []


class _Quiet:
    def update(self, **_fields):
        pass


def _job_args(model, record_dir, **kw):
    base = dict(dir=str(model), repo="", revision="main", verify="size", workers=2, timeout=60, margin_bytes=0,
                expected_shards=None, profile_var="llm_server_models['m']", record_dir=str(record_dir), adopt=True)
    base.update(kw)
    return argparse.Namespace(**base)


def test_helper_refuses_a_record_dir_inside_the_model_and_an_unwritable_one(dirs):
    """The helper's job (run in-process, --adopt, no Hub): a record dir inside the model directory is refused
    before anything is read; one that cannot be written fails naming model_download_record_dir; a good one gets
    the record, which the per-run check then finds complete."""
    model, records = dirs
    write_model(model, records, FILES, record=False)
    job = helper()
    with pytest.raises(job.JobError, match="is inside the model directory"):
        job.job(_job_args(model, model / "records"), "", _Quiet())
    (model.parent / "a-file").write_text("")
    with pytest.raises(job.JobError, match="record cannot be written to .*Fix: run the role as root"):
        job.job(_job_args(model, model.parent / "a-file" / "records"), "", _Quiet())
    result = job.job(_job_args(model, records), "", _Quiet())
    assert result["hashed"] == sorted(FILES) and result["manifest_written"]
    assert run(model, records, "")["state"] == "complete"
    assert read_record(str(model), str(records))["source"] == "adopted"
    again = job.job(_job_args(model, records), "", _Quiet())
    assert again["hashed"] == [] and not again["manifest_written"]
