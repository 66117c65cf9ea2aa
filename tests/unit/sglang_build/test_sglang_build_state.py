"""sglang_build_state's rules and reads (plugins/module_utils/sglang_build_rules.py, sglang_build_state.py).

Real parts: the refs come from a real git repository made here and are answered by real `git ls-remote`;
what a ref names is checked against `git rev-parse <ref>^{commit}` (git's own answer, not the rule's);
the state file's expected bytes come from Ansible's own to_nice_json filter; the interpreter is this
test's Python (its real sysconfig purelib). Every path is under tmp_path.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from ansible.plugins.filter.core import to_nice_json as ansible_to_nice_json
from support.requires import require_for_module

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_build_rules as rules
from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_build_state as state

GIT = shutil.which("git") or "git"
require_for_module(shutil.which("git") is None, "git")
PTH = "#\n# Ansible managed\n#\n/opt/sglang/current/src/python\n/opt/sglang/current/meta\n"


IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def git(*argv, cwd=None):
    return subprocess.run([GIT, *argv], cwd=cwd, capture_output=True, text=True, check=True,
                          env=dict(os.environ, **IDENTITY)).stdout.strip()


def run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    """A repository with a branch `main` (2 commits), `feature`, an annotated tag v1 on the first commit, a
    lightweight tag v2 on the second, and a tag named like the branch `feature` on the first commit."""
    repo = tmp_path_factory.mktemp("upstream") / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "one", cwd=repo)
    git("tag", "-a", "v1", "-m", "annotated", cwd=repo)
    git("tag", "feature-tag", cwd=repo)
    git("branch", "feature", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "two", cwd=repo)
    git("tag", "v2", cwd=repo)
    git("tag", "feature", "v1^{commit}", cwd=repo)
    git("checkout", "-q", "feature", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "three", cwd=repo)
    git("checkout", "-q", "main", cwd=repo)
    return repo


def ls_remote(repo, ref):
    return run([GIT, "ls-remote", "file://%s" % repo] + rules.ls_remote_patterns(ref))[1]


@pytest.mark.parametrize("ref", ["main", "v1", "v2", "HEAD"])
def test_a_branch_or_tag_resolves_to_the_commit_git_names(upstream, ref):
    assert rules.resolve_ref(ref, ls_remote(upstream, ref)) == git("rev-parse", ref + "^{commit}", cwd=upstream)


def test_a_branch_wins_over_a_tag_of_the_same_name_as_in_the_git_module(upstream):
    """ansible.builtin.git asks is_remote_branch before is_remote_tag: the branch `feature`, not the tag."""
    assert rules.resolve_ref("feature", ls_remote(upstream, "feature")) == git("rev-parse", "refs/heads/feature", cwd=upstream)
    assert git("rev-parse", "refs/heads/feature", cwd=upstream) != git("rev-parse", "refs/tags/feature^{commit}", cwd=upstream)


def test_a_ref_that_names_nothing_comes_back_verbatim(upstream):
    assert ls_remote(upstream, "v9") == ""
    assert rules.resolve_ref("v9", "") == "v9"


def test_only_a_full_commit_id_with_build_json_is_not_new():
    full = "a" * 40
    assert not rules.is_new(full, True)
    assert rules.is_new(full, False)
    assert rules.is_new("a" * 12, True)
    assert rules.is_new(None, False)


def test_verify_reasons_compare_like_the_roles_defaults():
    seen = {"verified": {"python": "/v/bin/python", "modules": ["sglang.launch_server"], "environment": "e1"}}
    assert rules.verify_reasons(False, seen, "/v/bin/python", ["sglang.launch_server"]) == []
    assert rules.verify_reasons(True, seen, "/v/bin/python", ["sglang.launch_server"]) == ["new build"]
    assert len(rules.verify_reasons(False, seen, "/w/bin/python", ["sglang.launch_server"])) == 1
    assert len(rules.verify_reasons(False, seen, "/v/bin/python", [])) == 1
    assert len(rules.verify_reasons(False, {}, "/v/bin/python", [])) == 1  # no record: python '' differs
    assert rules.verified_environment(seen) == "e1"
    assert rules.verified_environment({}) == ""
    assert rules.verified_environment({"verified": {"environment": None}}) is None  # null is not missing


@pytest.mark.parametrize("data", [{}, {"builds": {"c": {"ref": "main", "version": None}}, "installs": 2, "x": "é"}])
def test_to_nice_json_is_ansibles(data):
    assert rules.to_nice_json(data) == ansible_to_nice_json(data)


def state_file(tmp_path, text, mode=0o644):
    path = tmp_path / "state.json"
    path.write_text(text)
    path.chmod(mode)
    return state.hs.file_state(str(path))


def test_the_state_file_is_unchanged_when_it_holds_what_the_role_writes(tmp_path):
    data = {"builds": {"c" * 40: {"ref": "main", "version": "0.5", "built_at": "2026-01-01T00:00:00Z"}},
            "installs": 1, "python": "/v/bin/python", "builds_dir": "/opt/sglang/builds"}
    written = ansible_to_nice_json(data) + "\n"
    assert rules.state_file_reasons(data, "c" * 40, state_file(tmp_path, written)) == []
    assert rules.state_file_reasons(data, "c" * 40, state_file(tmp_path, json.dumps(data))) == [
        "content differs from what the role writes"]
    assert rules.state_file_reasons(data, "c" * 40, state_file(tmp_path, written, 0o600)) == ["mode 0600, wanted 0644"]
    assert rules.state_file_reasons(data, "d" * 40, state_file(tmp_path, written)) == [
        "%s is not in the state file's builds" % ("d" * 40)]
    assert rules.state_file_reasons({}, "c" * 40, {"exists": False}) == ["%s is not in the state file's builds" % ("c" * 40)]


# -- the whole read on a tmp tree ----------------------------------------------------------------------
def params(tmp_path, upstream, **overrides):
    values = {"dir": str(tmp_path / "sglang") + "/", "python": sys.executable, "venv_create": True,
              "git_url": str(upstream), "ref": "main", "state_file": str(tmp_path / "state" / "sglang_build.json"),
              "os_packages": [], "dpkg_status": str(tmp_path / "no-dpkg-status"), "verify_modules": ["sglang.launch_server"],
              "pth_content": PTH, "host": "host1"}
    values.update(overrides)
    return values


def which(name):
    return GIT if name == "git" else None


def converge(tmp_path, upstream, commit):
    """Lay out what a converged host has for `commit`, written the way the role writes it."""
    builds = tmp_path / "sglang" / "builds"
    tree = builds / commit
    tree.mkdir(parents=True)
    record = {"commit": commit, "ref": "main", "version": "0.5", "built_at": "2026-01-01T00:00:00Z",
              "verified": {"python": sys.executable, "environment": "env1", "modules": ["sglang.launch_server"], "flags": 3}}
    (tree / "build.json").write_text(ansible_to_nice_json(record) + "\n")
    (tmp_path / "sglang" / "current").symlink_to(tree)
    (tmp_path / "state").mkdir(mode=0o755)
    (tmp_path / "state").chmod(0o755)
    data = {"builds": {commit: {"ref": "main", "version": "0.5", "built_at": "2026-01-01T00:00:00Z"}}, "installs": 1,
            "python": sys.executable, "builds_dir": str(builds)}
    (tmp_path / "state" / "sglang_build.json").write_text(ansible_to_nice_json(data) + "\n")
    (tmp_path / "state" / "sglang_build.json").chmod(0o644)
    purelib = pathlib.Path(run([sys.executable, "-c", state.PURELIB])[1].strip())
    return purelib


def test_a_converged_tree_needs_nothing(tmp_path, upstream, monkeypatch):
    commit = git("rev-parse", "main", cwd=upstream)
    purelib = converge(tmp_path, upstream, commit)
    real = state.hs.file_state
    pth = str(purelib / state.PTH_NAME)
    # the interpreter's site-packages is not ours to write: its .pth is read from a copy under tmp_path
    (tmp_path / "pth").write_text(PTH)
    (tmp_path / "pth").chmod(0o644)
    monkeypatch.setattr(state.hs, "file_state", lambda path: real(str(tmp_path / "pth") if path == pth else path))
    result = state.read_state(params(tmp_path, upstream), run, which)
    assert result["refusals"] == []
    assert result["commit"] == commit
    assert not any(result["needs"].values()), (result["needs"], result["reasons"])
    assert result["verified_environment"] == "env1"
    assert result["previous"]["version"] == "0.5"
    assert result["purelib"] == str(purelib)
    assert str(tmp_path / "sglang" / "current") in result["resources"]
    # a full id is never sent to a remote: the same answer with the repository gone
    gone = params(tmp_path, tmp_path / "nowhere", ref=commit)
    assert not any(state.read_state(gone, run, which)["needs"].values())
    # and one changed file is found
    (tmp_path / "pth").write_text(PTH + "# edited\n")
    assert state.read_state(params(tmp_path, upstream), run, which)["reasons"]["pth"] == ["content differs"]


def test_a_fresh_host_needs_everything_and_refuses_nothing(tmp_path, upstream):
    result = state.read_state(params(tmp_path, upstream, python=str(tmp_path / "venv" / "bin" / "python")), run, which)
    assert result["refusals"] == []
    needs = result["needs"]
    assert needs["venv"] and needs["build"] and needs["verify"] and needs["state_file"] and needs["state_dir"]
    assert needs["switch"] and not needs["pth"] and not needs["resolve"]  # no interpreter yet: no site-packages
    assert result["commit"] == git("rev-parse", "main", cwd=upstream)


def test_the_refusals_carry_the_roles_messages(tmp_path, upstream):
    (tmp_path / "sglang" / "current").mkdir(parents=True)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "sglang_build.json").write_text("{not json")
    result = state.read_state(params(tmp_path, upstream, ref="no-such-ref", venv_create=False,
                                     python=str(tmp_path / "venv" / "bin" / "python")), run, which)
    refusals = result["refusals"]
    assert refusals[0] == rules.interpreter_refusal(str(tmp_path / "venv" / "bin" / "python"), "host1")
    assert refusals[1] == ("sglang_build_ref=no-such-ref is not a branch or tag of %s (and not a commit hash). Set "
                           "sglang_build_ref to an existing branch, tag or commit." % upstream)
    assert refusals[2].startswith("sglang_build_state_file=%s is not the role's JSON record (not JSON" % (
        tmp_path / "state" / "sglang_build.json"))
    assert refusals[3].startswith("%s exists and is not a symbolic link" % (tmp_path / "sglang" / "current"))
    assert len(refusals) == 4


def test_git_missing_waits_for_the_install_or_is_refused(tmp_path, upstream):
    status = tmp_path / "status"
    status.write_text("Package: dpkg\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.21\n\n")
    waiting = state.read_state(params(tmp_path, upstream, os_packages=["git"], dpkg_status=str(status)), run, lambda _n: None)
    assert waiting["needs"]["resolve"] and waiting["needs"]["os_packages"] and waiting["refusals"] == []
    refused = state.read_state(params(tmp_path, upstream), run, lambda _n: None)
    assert refused["refusals"] == [rules.git_refusal("main")]


def test_a_short_hash_is_completed_from_the_local_clone(tmp_path, upstream):
    commit = git("rev-parse", "v2", cwd=upstream)
    git("clone", "-q", "--bare", str(upstream), str(tmp_path / "sglang" / "repo.git"))
    result = state.read_state(params(tmp_path, upstream, ref=commit[:10]), run, which)
    assert result["commit"] == commit


def test_git_failing_is_an_error_not_a_guess(tmp_path):
    with pytest.raises(state.ReadError, match="git ls-remote file://"):
        state.read_state(params(tmp_path, tmp_path / "nowhere"), run, which)


def test_served_reads_the_link_and_its_record(tmp_path, upstream):
    commit = git("rev-parse", "main", cwd=upstream)
    converge(tmp_path, upstream, commit)
    served = state.read_served(str(tmp_path / "sglang"))
    assert served["tree"] == str(tmp_path / "sglang" / "builds" / commit)
    assert served["record"]["commit"] == commit
    assert state.read_served(str(tmp_path / "elsewhere")) == {"tree": None, "record": {},
                                                              "resources": [str(tmp_path / "elsewhere" / "current")]}
