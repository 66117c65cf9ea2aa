"""module_utils/model_manifest.py: the per-run size check against the manifest (real files in tmp_path)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils.model_manifest import (
    MANIFEST_NAME, ManifestError, check, present_entries, read_manifest)


def write_model(tmp_path, files, manifest=True, **fields):
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    if manifest:
        body = {"format": 1, "repo": "org/model", "revision": "main", "commit": "c" * 40, "verified": "size",
                "files": {name: {"size": len(data)} for name, data in files.items()}}
        body.update(fields)
        (tmp_path / MANIFEST_NAME).write_text(json.dumps(body))
    return tmp_path


FILES = {"config.json": b"{}", "model-00001-of-00002.safetensors": b"a" * 100,
         "sub/model-00002-of-00002.safetensors": b"b" * 50}


def test_complete_model_has_no_problems(tmp_path):
    result = check(str(write_model(tmp_path, FILES)), "org/model", "main")
    assert result["state"] == "complete" and result["problems"] == []
    assert result["files"] == 3 and result["bytes"] == result["bytes_present"] == 152
    assert "all 3 files" in result["msg"] and "content last hashed: never" in result["msg"]


def test_missing_truncated_and_replaced_files_are_named(tmp_path):
    model = write_model(tmp_path, FILES)
    (model / "config.json").unlink()
    (model / "model-00001-of-00002.safetensors").write_bytes(b"a" * 40)
    (model / "sub" / "model-00002-of-00002.safetensors").unlink()
    (model / "sub" / "model-00002-of-00002.safetensors").mkdir()
    result = check(str(model), "org/model", "main")
    assert result["state"] == "incomplete"
    assert [(p["path"], p["reason"], p["have"], p["want"]) for p in result["problems"]] == [
        ("config.json", "missing", None, 2),
        ("model-00001-of-00002.safetensors", "size", 40, 100),
        ("sub/model-00002-of-00002.safetensors", "not a file", None, 50)]
    assert "3 of 3 files" in result["msg"] and "(40 bytes, want 100)" in result["msg"]
    assert result["bytes_present"] == 0


def test_a_grown_file_is_wrong_too(tmp_path):
    model = write_model(tmp_path, FILES)
    (model / "config.json").write_bytes(b"{}  ")
    assert [p["path"] for p in check(str(model), "org/model")["problems"]] == ["config.json"]


def test_without_manifest_hub_repo_decides_between_buildable_and_unverifiable(tmp_path):
    model = write_model(tmp_path, FILES, manifest=False)
    (model / ".cache" / "huggingface").mkdir(parents=True)
    (model / ".cache" / "huggingface" / "junk").write_bytes(b"x" * 1000)  # bookkeeping is not model bytes
    with_repo = check(str(model), "org/model", "main")
    assert with_repo["state"] == "no_manifest" and with_repo["bytes_present"] == 152
    without = check(str(model), "", "main")
    assert without["state"] == "unverifiable"
    assert "cannot be verified" in without["msg"] and "set the profile's hub_repo" in without["msg"]
    assert check(str(tmp_path / "absent"), "org/model")["state"] == "no_manifest"


def test_a_manifest_for_another_repo_or_revision_is_other_source(tmp_path):
    model = write_model(tmp_path, FILES)
    assert check(str(model), "org/other", "main")["state"] == "other_source"
    assert check(str(model), "org/model", "v2")["state"] == "other_source"
    assert check(str(model), "", "v2")["state"] == "complete"  # no hub_repo: the manifest is all there is


@pytest.mark.parametrize("body, reason", [
    ("not json", "cannot be read"),
    (json.dumps({"format": 1, "files": {}}), "holds no file list"),
    (json.dumps({"format": 2, "files": {"a": {"size": 1}}}), "has format 2"),
    (json.dumps({"format": 1, "files": {"a": {"size": "1"}}}), "no valid size"),
    (json.dumps({"format": 1, "files": {"../etc/passwd": {"size": 1}}}), "not a path inside"),
])
def test_an_unusable_manifest_is_refused_and_ignored_with_a_warning(tmp_path, body, reason):
    (tmp_path / MANIFEST_NAME).write_text(body)
    with pytest.raises(ManifestError, match=reason):
        read_manifest(str(tmp_path))
    result = check(str(tmp_path), "org/model")
    assert result["state"] == "no_manifest" and reason in result["warnings"][0]
    assert "rebuilt from the Hub listing" in result["warnings"][0]


def test_stray_files_are_named_only_when_present(tmp_path):
    (tmp_path / ".gpufleet-hf-token").write_text("hf_left_by_an_older_run")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert present_entries(str(tmp_path), [".gpufleet-hf-token", "absent", "dangling"]) == [".gpufleet-hf-token", "dangling"]
    assert present_entries(str(tmp_path / "no-such-dir"), [".gpufleet-hf-token"]) == []
