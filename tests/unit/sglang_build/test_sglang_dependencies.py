"""Unit tests of the decisions behind gpufleet.llm_server.sglang_dependencies.

`plan()` gets PROBE's output, so most tests run the real PROBE in a real venv (tmp_path) whose
installed distributions are metadata written here: the point is the decision (what is held, what
drifts, what SGLang disagrees with), not pip. pip's own resolution against real SGLang releases
and real PyPI metadata is tests/integration/sglang_build/test_dependency_resolution.py; pip's error
texts below are copied from real runs of pip 26.3 (that test's 0.5.5 case) and pip 23.0.1.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_dependencies import (
    PROBE,
    DependencyError,
    conflict_summary,
    declared_requirements,
    plan,
    read_report,
    requirement_name,
    run,
    torch_version_requirement,
)

FAMILY = ["torch", "torchvision", "torchaudio"]


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv: only pip, so PROBE falls back to the `packaging` vendored in pip."""
    base = tmp_path_factory.mktemp("probe")
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True)
    return base / "venv" / "bin" / "python"


@pytest.fixture
def env(venv, tmp_path):
    """(python, site): each test's distributions live in its own folder on PYTHONPATH."""
    site = tmp_path / "site"
    site.mkdir()
    return venv, site


def install(site, name, version, cuda=None):
    folder = site / ("%s-%s.dist-info" % (name.replace("-", "_"), version))
    folder.mkdir(exist_ok=True)
    (folder / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
    (folder / "RECORD").write_text("")
    if cuda:
        package = site / name
        package.mkdir(exist_ok=True)
        (package / "version.py").write_text("__version__ = '%s'\ncuda: Optional[str] = '%s'\n" % (version, cuda))


def probe(env, requirements, packages=None):
    python, site = env
    args = {"requirements": requirements, "packages": list(FAMILY if packages is None else packages), "exclude": ["sglang"]}
    out = subprocess.run([str(python), "-c", PROBE, json.dumps(args)],
                         capture_output=True, text=True, check=True, env={"PYTHONPATH": str(site)}).stdout
    return json.loads(out)


def decide(env, requirements, torch_install="if-missing"):
    result = probe(env, [t for t, _o in requirements])
    return result, plan(result, requirements, list(FAMILY), torch_install)


def test_probe_reads_versions_markers_and_torch_cuda(env):
    _python, site = env
    install(site, "torch", "2.9.1+cu130", cuda="13.0")
    install(site, "Typing_Extensions", "4.16.0")
    result = probe(env, ["torch==2.9.1", "typing-extensions>=5", "decord2 ; platform_machine == 'aarch64'",
                         "not a requirement!"])
    torch, typing, decord, broken = result["requirements"]
    assert torch["satisfied"] and torch["installed"] == "2.9.1+cu130"  # a local label satisfies ==2.9.1
    assert typing["name"] == "typing-extensions" and not typing["satisfied"] and typing["installed"] == "4.16.0"
    assert decord["applies"] is False
    assert broken["name"] is None and "not a valid requirement" in broken["error"]
    assert result["held"]["torch"]["cuda"] == "13.0" and result["held"]["torch"]["version"] == "2.9.1+cu130"
    assert result["packaging"] == "pip._vendor.packaging"


def test_held_torch_that_satisfies_is_kept_and_the_rest_drifts(env):
    install(env[1], "torch", "2.9.1+cu130")
    install(env[1], "typing-extensions", "4.16.0")
    _result, decided = decide(env, [("torch==2.9.1", "declared"), ("torchaudio==2.9.1", "declared"),
                                    ("numpy", "declared"), ("typing-extensions>=4", "declared"),
                                    ("huggingface_hub", "extra")])
    assert decided["held"] == {"torch": "2.9.1+cu130"}
    assert decided["family_install"] == ["torchaudio==2.9.1"]
    assert decided["disagreements"] == []
    assert [d["name"] for d in decided["drift"]] == ["numpy", "huggingface-hub"]
    assert decided["drift"][1]["origin"] == "extra" and decided["drift"][0]["why"] == "not installed"
    assert decided["resolve"] == ["numpy", "typing-extensions>=4", "huggingface_hub"]


def test_a_disagreeing_pin_is_reported_and_never_installed(env):
    install(env[1], "torch", "2.9.1+cu130")
    _result, decided = decide(env, [("torch==2.8.0", "declared"), ("numpy", "declared")])
    assert decided["disagreements"] == [{"requirement": "torch==2.8.0", "name": "torch", "installed": "2.9.1+cu130"}]
    assert decided["family_install"] == []


def test_replace_installs_the_wanted_torch_and_its_family_again(env):
    install(env[1], "torch", "2.9.1+cu130")
    install(env[1], "torchvision", "0.24.1+cu130")
    _result, decided = decide(env, [("torch==2.8.0", "declared"), ("torchvision", "declared")], torch_install="replace")
    assert decided["family_install"] == ["torch==2.8.0", "torchvision"]
    assert decided["disagreements"] == []


def test_torch_version_override(env):
    install(env[1], "torch", "2.9.1+cu130")
    requirements = [("torch==2.9.1", "declared"), (torch_version_requirement("2.9.1+cu128"), "torch_version")]
    _r, keep = decide(env, requirements)
    assert keep["family_install"] == []  # if-missing: the installed cu130 build stays ...
    assert keep["disagreements"] == [{"requirement": "torch==2.9.1+cu128", "name": "torch", "installed": "2.9.1+cu130"}]
    _r, replace = decide(env, requirements, torch_install="replace")
    assert replace["family_install"] == ["torch==2.9.1+cu128"]  # ... replace switches the CUDA build
    assert torch_version_requirement(">=2.9,<2.10") == "torch>=2.9,<2.10" and torch_version_requirement("") is None


class _Module:
    """What run() uses of an AnsibleModule: run_command (a real subprocess with the test's site on
    PYTHONPATH), warn, check_mode."""

    def __init__(self, site, check_mode=True):
        self.site, self.check_mode, self.warnings = site, check_mode, []

    def run_command(self, argv):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, env={"PYTHONPATH": str(self.site)})
        return proc.returncode, proc.stdout, proc.stderr

    def warn(self, text):
        self.warnings.append(text)


@pytest.mark.parametrize("host_cuda, warned", [("13.0", True), ("12.8", False), ("", False)])
def test_torch_built_for_another_cuda_than_the_host_is_reported(env, tmp_path, host_cuda, warned):
    """torch/version.py in the format PyTorch writes (`cuda: Optional[str] = '12.8'`, a CUDA 12.8 build):
    a host with a CUDA 13 toolkit gets a warning naming the variables that fix it; nothing is installed."""
    python, site = env
    install(site, "torch", "2.9.1", cuda="12.8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "pyproject.toml").write_text('[project]\nname = "sglang"\ndependencies = ["torch==2.9.1"]\n')
    module = _Module(site)
    result = run(module, dict(python=str(python), project_dir=str(tmp_path / "src"), extras=[], requirements=[],
                              on_drift="install", torch_install="if-missing", torch_packages=list(FAMILY),
                              torch_version="", torch_index_url="", pip_args=[], cuda_version=host_cuda,
                              hint_prefix="sglang_build_"))
    assert not result["changed"] and result["pip_commands"] == []
    assert result["torch"]["cuda"] == "12.8" and result["held"] == {"torch": "2.9.1"}
    cuda_warnings = [w for w in module.warnings if "CUDA" in w]
    if warned:
        assert len(cuda_warnings) == 1, module.warnings
        for words in ("torch 2.9.1", "built for CUDA 12.8", "CUDA toolkit is 13.0", "sglang_build_torch_index_url",
                      "sglang_build_torch_install: replace", "sglang_build_torch_version"):
            assert words in cuda_warnings[0], cuda_warnings[0]
    else:
        assert cuda_warnings == [], module.warnings


def test_never_refuses_a_missing_torch(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    (tmp_path / "site").mkdir()
    result = probe((tmp_path / "bare" / "bin" / "python", tmp_path / "site"), ["torch==2.9.1"])
    assert result["requirements"][0]["error"] == "neither packaging nor pip is importable in this environment"
    fake = {"installed": {}, "requirements": [dict(result["requirements"][0], error=None, name="torch", applies=True)]}
    decided = plan(fake, [("torch==2.9.1", "declared")], FAMILY, "never")
    assert decided["errors"] and "torch is not installed" in decided["errors"][0] and "torch==2.9.1" in decided["errors"][0]


def test_environment_digest_ignores_sglang(env):
    first = probe(env, [])["environment"]
    install(env[1], "sglang", "0.5.10.post1")
    assert probe(env, [])["environment"] == first
    install(env[1], "numpy", "2.3.5")
    assert probe(env, [])["environment"] != first


PYPROJECT = '''
[project]
name = "sglang"
dynamic = ["version"]
dependencies = [
  "numpy",
  "torch==2.9.1",  # a comment
]
[project.optional-dependencies]
test = ["pytest"]
'''


def test_declared_requirements_read_the_static_list_and_extras():
    assert declared_requirements(PYPROJECT) == ("sglang", ["numpy", "torch==2.9.1"])
    assert declared_requirements(PYPROJECT, ["test"])[1] == ["numpy", "torch==2.9.1", "pytest"]
    with pytest.raises(DependencyError, match="no optional-dependency group.*all; it defines test"):
        declared_requirements(PYPROJECT, ["all"])
    with pytest.raises(DependencyError, match="declares its dependencies as dynamic"):
        declared_requirements('[project]\nname = "x"\ndynamic = ["dependencies"]\n')
    with pytest.raises(DependencyError, match="not valid TOML"):
        declared_requirements("[project\n")


# pip 26.3, `pip install --dry-run ... -c constraints.txt torch==2.9.1 torchaudio==2.8.0 ...` (stdout + stderr)
CONFLICT = """\
Collecting torchaudio==2.8.0
  Obtaining dependency information from torchaudio 2.8.0
INFO: pip is looking at multiple versions of torchaudio to determine which version is compatible with other requirements. This could take a while.
ERROR: Cannot install torch==2.9.1 and torchaudio==2.8.0 because these package versions have conflicting dependencies.

The conflict is caused by:
    The user requested torch==2.9.1
    torchaudio 2.8.0 depends on torch==2.8.0
    The user requested (constraint) torch==2.9.1

To fix this you could try to:
1. loosen the range of package versions you've specified
2. remove package versions to allow pip to attempt to solve the dependency conflict

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/#dealing-with-dependency-conflicts
"""
# pip 23.0.1 (Debian 12's venv), a requirement no index has
MISSING = """\
ERROR: Could not find a version that satisfies the requirement sglang-kernel==0.4.1 (from versions: none)
ERROR: No matching distribution found for sglang-kernel==0.4.1
"""


def test_conflict_summary_keeps_the_explanation():
    assert conflict_summary(CONFLICT) == [
        "Cannot install torch==2.9.1 and torchaudio==2.8.0 because these package versions have conflicting dependencies.",
        "The conflict is caused by:", "The user requested torch==2.9.1", "torchaudio 2.8.0 depends on torch==2.8.0",
        "The user requested (constraint) torch==2.9.1"]
    assert conflict_summary(MISSING) == [
        "Could not find a version that satisfies the requirement sglang-kernel==0.4.1 (from versions: none)",
        "No matching distribution found for sglang-kernel==0.4.1"]
    assert conflict_summary("something else\nbroke\n") == ["something else", "broke"]


def test_report_and_names():
    report = json.dumps({"install": [{"metadata": {"name": "Flashinfer_Python", "version": "0.6.7.post3"}}]})
    assert read_report(report) == [("flashinfer-python", "0.6.7.post3")]
    assert requirement_name("torch_memory_saver==0.0.9") == "torch-memory-saver"
    assert requirement_name("decord2 ; sys_platform == 'linux'") == "decord2"
    assert requirement_name("  ") is None
