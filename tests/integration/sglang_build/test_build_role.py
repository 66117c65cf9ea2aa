"""The sglang_build role's refusals, run with ansible-playbook on this machine (local connection).

The SGLang source is the stand-in repository Molecule uses (molecule/shared/make_standin_repo.sh:
the real 0.5.10.post1 sdist with the stand-in server, declaring small real PyPI projects and the
torch stand-in); pip installs from the same local indexes (molecule/shared/sglang_test_inputs.py).
Every path lives under tmp_path; the target interpreter is a fresh venv of /usr/bin/python3 (the
system Python a target has). The happy paths, the switch and the rollback run in
molecule/sglang_build; these are the failures that must change nothing the server uses.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest
from support.ansible_harness import run_playbook
from support.archives import extract_tar

ROOT = pathlib.Path(__file__).resolve().parents[3]
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    """(repository, inputs folder): the stand-in repository and the unpacked package indexes."""
    base = tmp_path_factory.mktemp("upstream")
    bundle = subprocess.run([sys.executable, str(ROOT / "molecule" / "shared" / "sglang_test_inputs.py")],
                            capture_output=True, text=True, check=True).stdout.strip()
    inputs = base / "inputs"
    with tarfile.open(bundle) as tar:
        extract_tar(tar, inputs)
    standin = inputs / "standin"
    standin.mkdir()
    for name in ("__init__.py", "launch_server.py"):
        shutil.copy(ROOT / "tests" / "support" / "standin_sglang" / "sglang" / name, standin / name)
    subprocess.run(["sh", str(ROOT / "molecule" / "shared" / "make_standin_repo.sh"), str(inputs / "sglang-sdist.tar.gz"),
                    "0.5.10.post1", str(standin), str(base / "repo")], capture_output=True, check=True)
    return base / "repo", inputs


def run_role(tmp_path, upstream, **overrides):
    rc, out = run_play(tmp_path, upstream, (), **overrides)
    failed = [(t["task"]["name"].split(" : ")[-1], h) for p in out["plays"] for t in p["tasks"]
              for h in t["hosts"].values() if h.get("failed")]
    warnings = [w for p in out["plays"] for t in p["tasks"] for h in t["hosts"].values() for w in h.get("warnings", [])]
    return rc, failed, warnings


def run_play(tmp_path, upstream, args, **overrides):
    """(rc, the json callback's output) of the role alone on this machine, with ansible-playbook's `args`."""
    repo, inputs = upstream
    variables = {
        "ansible_python_interpreter": PYTHON,
        "sglang_build_git_url": str(repo), "sglang_build_ref": "v0.5.10.post1",
        "sglang_build_dir": str(tmp_path / "sglang"), "sglang_build_python": str(tmp_path / "venv" / "bin" / "python"),
        "sglang_build_venv_base_python": PYTHON,
        "sglang_build_state_file": str(tmp_path / "state" / "sglang_build.json"),
        # the restart-pending marker (issue 17) in the test directory, never this machine's /var/lib
        "sglang_build_restart_marker": str(tmp_path / "state" / "restart-pending"),
        "sglang_build_known_good_file": str(tmp_path / "state" / "known-good.json"),
        "sglang_build_install_os_packages": False,
        "sglang_build_pip_args": ["--index-url", (inputs / "pypi" / "simple").as_uri()],
        "sglang_build_torch_index_url": (inputs / "torch" / "simple").as_uri(),
    }
    variables.update(overrides)
    play = [{"name": "build", "hosts": "localhost", "gather_facts": False, "vars": variables,
             "roles": [{"role": "gpufleet.llm_server.sglang_build"}]}]
    run = run_playbook(tmp_path, play, args=tuple(args), env={"PIP_CONFIG_FILE": os.devnull},
                       base_env={k: v for k, v in os.environ.items() if not k.startswith("PIP_")})
    return run.rc, run.output


def installed(tmp_path):
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    return sorted(p.name for p in site.iterdir() if p.name.endswith(".dist-info"))


def test_a_build_that_does_not_import_is_never_switched_to(tmp_path, upstream):
    """drift policy warn on a bare venv: SGLang's declared dependencies stay missing, so the real
    import of its HTTP server module fails; the build is refused before `current` exists."""
    rc, failed, warnings = run_role(tmp_path, upstream, sglang_build_dependency_drift="warn")
    assert rc != 0 and len(failed) == 1
    task, result = failed[0]
    assert task == "Check the build (location, imports, --help flags, no shadowing copy)"
    assert "nothing was switched; the server keeps its current build" in result["msg"]
    assert "sglang.srt.entrypoints.http_server: ModuleNotFoundError: No module named 'dateutil'" in result["msg"]
    assert "sglang_build_dependency_drift: install" in result["msg"]
    assert any("does not satisfy sglang's requirements (sglang_build_dependency_drift is warn, nothing installed)" in w
               and "python-dateutil>=2.8 (not installed)" in w and "torch==2.9.1 (torch family, not installed)" in w
               for w in warnings), warnings
    assert not (tmp_path / "sglang" / "current").exists()
    assert not list((tmp_path / "sglang" / "builds").glob("*/build.json"))
    assert not [n for n in installed(tmp_path) if n.startswith(("torch", "python_dateutil", "idna"))]


def test_drift_policy_fail_installs_nothing_and_names_each_requirement(tmp_path, upstream):
    rc, failed, _warnings = run_role(tmp_path, upstream, sglang_build_dependency_drift="fail")
    assert rc != 0 and len(failed) == 1
    task, result = failed[0]
    assert task == "Check and install SGLang's declared dependencies (torch held)"
    for words in ("sglang_build_dependency_drift is fail", "python-dateutil>=2.8 (not installed)", "idna>=3 (not installed)",
                  "huggingface_hub (not installed)", "torch==2.9.1 (torch family, not installed)", "Nothing was installed",
                  "decord2"):
        assert (words in result["msg"]) == (words != "decord2"), (words, result["msg"])  # decord2's marker never applies here
    assert not [n for n in installed(tmp_path) if not n.startswith(("pip-", "setuptools-"))]


def test_a_copy_of_sglang_installed_by_hand_is_refused_with_the_fix(tmp_path, upstream):
    """The seeds' `pip install -e` into the environment, or any copy in site-packages, would be imported
    instead of the build once the server starts: refused before the switch, with the uninstall named."""
    subprocess.run([PYTHON, "-m", "venv", str(tmp_path / "venv")], check=True)
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    (site / "sglang").mkdir()
    (site / "sglang" / "__init__.py").write_text("# a hand-made copy\n")
    rc, failed, _warnings = run_role(tmp_path, upstream)
    assert rc != 0 and len(failed) == 1
    task, result = failed[0]
    assert task == "Check the build (location, imports, --help flags, no shadowing copy)"
    assert "Other copies of sglang would shadow it: %s" % (site / "sglang" / "__init__.py") in result["msg"]
    assert "-m pip uninstall sglang" in result["msg"]
    assert not (tmp_path / "sglang" / "current").exists()


def test_a_no_op_writes_nothing_and_a_current_that_is_no_link_is_refused_before_any_change(tmp_path, upstream):
    """Issue 20: after a build, a rerun decides from one read (sglang_build_state) that nothing is to write:
    changed=0 and the state file, build.json and .pth are not rewritten (same inode and mtime); a run limited by
    tags reports the served build from one read; a `current` that is not a link is refused before any write."""
    rc, _out = run_play(tmp_path, upstream, ())
    assert rc == 0
    state_file = tmp_path / "state" / "sglang_build.json"
    current = tmp_path / "sglang" / "current"
    record = current.resolve() / "build.json"
    pth = next((tmp_path / "venv" / "lib").glob("python3*/site-packages/gpufleet-sglang.pth"))
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (state_file, record, pth)}

    rc, out = run_play(tmp_path, upstream, ())
    assert rc == 0 and out["stats"]["localhost"]["changed"] == 0, out["stats"]
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in before} == before

    rc, out = run_play(tmp_path, upstream, ("--tags", "sm120-patch"))
    facts = [h["ansible_facts"] for p in out["plays"] for t in p["tasks"] for h in t["hosts"].values()
             if t["task"]["name"].endswith("Report the served build")]
    assert rc == 0 and facts[0]["sglang_build_tree"] == str(current.resolve())
    assert facts[0]["sglang_build_commit"] == json.loads(record.read_text())["commit"]

    target = current.resolve()
    current.unlink()
    current.mkdir()
    state_file.write_text(state_file.read_text().replace(target.name, "0" * 40))  # a write would restore it
    edited = state_file.read_bytes()
    rc, failed, _warnings = run_role(tmp_path, upstream)
    assert rc != 0 and [task for task, _result in failed] == ["Refuse what the role must not build or switch"]
    assert failed[0][1]["msg"] == (
        "%s exists and is not a symbolic link: the role serves builds through a link there. Move it away (it is not "
        "one of this role's builds) or set sglang_build_dir to another directory." % current)
    assert state_file.read_bytes() == edited
