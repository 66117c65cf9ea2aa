"""A real dependency resolution of real SGLang releases, with torch held at a fixed version.

The gpufleet.llm_server.sglang_dependencies module runs (through ansible-playbook, local
connection) in check mode, which resolves with `pip install --dry-run --report`, against the
pyproject.toml of real SGLang sdists from PyPI (tests/support/pypi.py): 0.5.10.post1 pins
torch==2.9.1, 0.5.5 pins torch==2.8.0 / torchaudio==2.8.0.

The "host" is a fresh venv whose torch 2.9.1 and its whole dependency closure (triton, the
nvidia-*-cu12 libraries, sympy, ...) are installed as metadata only: one dist-info per package,
written from the METADATA pip reads from the real PyPI wheels (`pip install --dry-run --report
torch==2.9.1`). That is the one test double here, because the real wheels are about 4 GB: pip sees
exactly what a real install of torch 2.9.1 would show it. Everything else is real PyPI.

Independent of this machine's pip configuration (its /etc/xdg/pip constraints cap torch and add
local find-links): PIP_CONFIG_FILE=/dev/null and no PIP_* variables except the TLS trust store
(PIP_CERT) and the timeout. Fast: pip's `fast-deps` reads each wheel's METADATA with HTTP range
requests (this index serves no PEP 658 metadata files), so no multi-GB CUDA wheel is downloaded;
a resolution takes about 20 s.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tarfile
import time

import pytest

from support.ansible_harness import run_playbook
from support.archives import extract_tar
from support.pypi import download

PIP = "26.3"  # a pip with --dry-run --report and a working fast-deps
FAST = ["--use-feature=fast-deps", "--only-binary=:all:"]


def pip_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and not k.startswith("ANSIBLE_")}
    env.update({k: os.environ[k] for k in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT") if k in os.environ})
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1")
    return env


def write_dist_info(site, metadata):
    """One installed-looking distribution from a pip report's metadata (name, version, Requires-Dist)."""
    folder = site / ("%s-%s.dist-info" % (metadata["name"].replace("-", "_"), metadata["version"]))
    folder.mkdir()
    lines = ["Metadata-Version: 2.1", "Name: " + metadata["name"], "Version: " + metadata["version"]]
    lines += ["Requires-Dist: " + r for r in metadata.get("requires_dist", [])]
    if metadata.get("requires_python"):
        lines.append("Requires-Python: " + metadata["requires_python"])
    (folder / "METADATA").write_text("\n".join(lines) + "\n")
    (folder / "INSTALLER").write_text("gpufleet-test (metadata only)\n")
    (folder / "RECORD").write_text("")
    return folder


@pytest.fixture(scope="module")
def held_torch(tmp_path_factory):
    """A venv whose torch 2.9.1 closure is installed as its real metadata; returns (python, site, closure)."""
    base = tmp_path_factory.mktemp("held-torch")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "pip==" + PIP], env=pip_env(), check=True)
    report = base / "torch.json"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed", "--report",
                    str(report), *FAST, "torch==2.9.1"], env=pip_env(), check=True)
    site = pathlib.Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                       capture_output=True, text=True, check=True).stdout.strip())
    closure = {}
    for item in json.loads(report.read_text())["install"]:
        write_dist_info(site, item["metadata"])
        closure[item["metadata"]["name"].lower().replace("_", "-")] = item["metadata"]["version"]
    assert closure["torch"] == "2.9.1" and "triton" in closure and any(n.startswith("nvidia-") for n in closure)
    return python, site, closure


def release_tree(version, dest):
    archive = download("sglang", version)
    assert archive.name.endswith(".tar.gz"), archive
    with tarfile.open(archive) as tf:
        member = tf.getmember("sglang-%s/pyproject.toml" % version)
        member.name = "pyproject.toml"
        extract_tar(tf, dest, [member])
    return dest


def run_module(tmp_path, python, project_dir, **options):
    args = dict(python=str(python), project_dir=str(project_dir), pip_args=FAST, hint_prefix="sglang_build_",
                requirements=["huggingface_hub"])
    args.update(options)
    play = [{"name": "resolve", "hosts": "localhost", "gather_facts": False,
             "vars": {"ansible_python_interpreter": sys.executable},
             "tasks": [{"name": "Resolve", "gpufleet.llm_server.sglang_dependencies": args, "register": "r"}]}]
    started = time.monotonic()
    proc = run_playbook(tmp_path, play, check=True, base_env=pip_env())
    took = time.monotonic() - started
    result = proc.host_results("localhost")[0]
    print("resolution of %s took %.1f s" % (project_dir, took))
    return result


def held_files(site):
    return {p.name: p.stat().st_mtime_ns for p in site.iterdir() if p.name.endswith(".dist-info")}


def test_release_resolves_with_torch_held(held_torch, tmp_path):
    python, site, closure = held_torch
    before = held_files(site)
    result = run_module(tmp_path, python, release_tree("0.5.10.post1", tmp_path / "src"))
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] and result["held"] == {"torch": "2.9.1"}
    assert result["disagreements"] == [] and result["family_install"] == ["torchaudio==2.9.1", "torchvision"]
    would = {i["name"]: i["version"] for i in result["would_install"]}
    # torch and everything it pins stay as installed; SGLang's own pins are what pip picked
    assert not set(would) & set(closure), sorted(set(would) & set(closure))
    assert would["torchaudio"] == "2.9.1" and would["flashinfer-python"] == "0.6.7.post3"
    assert would["transformers"] == "5.3.0" and "huggingface-hub" in would
    assert {d["name"] for d in result["drift"]} >= {"numpy", "flashinfer-python", "sglang-kernel", "transformers"}
    # the pip command pinned the held torch both as a constraint and as a requirement
    command = result["pip_commands"][-1]
    assert "torch==2.9.1" in command and "-c" in command and "--dry-run" in command
    assert held_files(site) == before


def test_release_with_other_torch_pins_fails_with_a_clear_report(held_torch, tmp_path):
    python, site, _closure = held_torch
    before = held_files(site)
    result = run_module(tmp_path, python, release_tree("0.5.5", tmp_path / "src"))
    assert result.get("failed")
    message = result["msg"]
    assert "with torch==2.9.1 held" in message
    assert "torchaudio" in message and "2.8.0" in message and "The conflict is caused by" in message
    assert "sglang_build_torch_install: replace" in message
    warnings = " ".join(result.get("warnings", []))
    assert "declares torch==2.8.0, but torch 2.9.1 is installed" in warnings and "is kept" in warnings
    assert held_files(site) == before


def test_replace_resolves_the_pins_instead(held_torch, tmp_path):
    """Only when asked (torch_install: replace) does the resolution replace the held torch. The project
    declares just 0.5.5's torch pins (its whole list was resolved above), against real PyPI metadata."""
    python, _site, _closure = held_torch
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "pyproject.toml").write_text(
        '[project]\nname = "sglang"\nversion = "0.5.5"\ndependencies = ["torch==2.8.0", "torchaudio==2.8.0"]\n')
    result = run_module(tmp_path, python, tmp_path / "src", torch_install="replace", requirements=[])
    assert not result.get("failed"), result.get("msg")
    would = {i["name"]: (i["version"], i["installed"]) for i in result["would_install"]}
    assert would["torch"] == ("2.8.0", "2.9.1") and would["torchaudio"] == ("2.8.0", None)
    assert result["family_install"] == ["torch==2.8.0", "torchaudio==2.8.0"]
