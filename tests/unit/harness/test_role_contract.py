"""scripts/check_role_contract.py: a role's defaults, argument spec and README table must agree (issue 19).

The script runs as lint does (a subprocess), on the repository as it is and on a copy of one role (with the
shared-input declarations) that a test breaks in one place.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
CHECK = ROOT / "scripts" / "check_role_contract.py"


def run(*args):
    return subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True, check=False)


@pytest.fixture
def checkout(tmp_path):
    """A checkout holding the shared-input declarations and copies of two roles."""
    (tmp_path / "meta").mkdir()
    shutil.copy(ROOT / "meta" / "llm_server_inputs.yml", tmp_path / "meta")
    for role in ("cuda_toolkit", "sglang_service"):
        shutil.copytree(ROOT / "roles" / role, tmp_path / "roles" / role)
    return tmp_path


def edit(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_the_repository_passes():
    result = run()
    assert result.returncode == 0, result.stderr
    assert "roles: defaults, argument specs and README tables agree" in result.stdout


def test_the_copy_passes(checkout):
    result = run("--root", str(checkout), "cuda_toolkit", "sglang_service")
    assert result.returncode == 0, result.stderr


def test_a_mismatched_default_fails_naming_the_variable(checkout):
    edit(checkout / "roles/cuda_toolkit/defaults/main.yml", "cuda_toolkit_link: /usr/local/cuda\n",
         "cuda_toolkit_link: /opt/cuda\n")
    result = run("--root", str(checkout), "cuda_toolkit")
    assert result.returncode == 1
    assert ("cuda_toolkit: roles/cuda_toolkit/meta/argument_specs.yml: cuda_toolkit_link: `default: /usr/local/cuda` "
            "differs from defaults/main.yml (/opt/cuda)") in result.stderr
    assert "fix:" in result.stderr


def test_a_default_of_another_type_fails(checkout):
    """"13.0" (a string) and 13.0 (a float) are different defaults."""
    edit(checkout / "roles/cuda_toolkit/defaults/main.yml", 'cuda_toolkit_version: "13.0"', "cuda_toolkit_version: 13.0")
    result = run("--root", str(checkout), "cuda_toolkit")
    assert result.returncode == 1
    assert "cuda_toolkit_version: `default: '13.0'` differs from defaults/main.yml (13.0)" in result.stderr


def test_a_key_only_in_defaults_fails(checkout):
    path = checkout / "roles/cuda_toolkit/defaults/main.yml"
    path.write_text(path.read_text() + "cuda_toolkit_extra: 1\n")
    result = run("--root", str(checkout), "cuda_toolkit")
    assert result.returncode == 1
    assert ("roles/cuda_toolkit/defaults/main.yml: cuda_toolkit_extra: not an option of meta/argument_specs.yml (main)"
            in result.stderr)


def test_an_option_without_a_default_fails(checkout):
    edit(checkout / "roles/cuda_toolkit/defaults/main.yml", "cuda_toolkit_nccl: false\n", "")
    result = run("--root", str(checkout), "cuda_toolkit")
    assert result.returncode == 1
    assert "cuda_toolkit_nccl: an option of meta/argument_specs.yml (main) with no default here" in result.stderr


def test_a_missing_readme_row_fails(checkout):
    readme = checkout / "roles/cuda_toolkit/README.md"
    row = next(line for line in readme.read_text().splitlines(keepends=True)
               if line.startswith("| `cuda_toolkit_nccl_version` |"))
    edit(readme, row, "")
    result = run("--root", str(checkout), "cuda_toolkit")
    assert result.returncode == 1
    assert ("roles/cuda_toolkit/README.md: cuda_toolkit_nccl_version: an option with no row in the variables table"
            in result.stderr)


def test_a_wrong_readme_default_fails_and_write_readme_fixes_it(checkout):
    readme = checkout / "roles/cuda_toolkit/README.md"
    edit(readme, "| `cuda_toolkit_link` | path | `/usr/local/cuda` |", "| `cuda_toolkit_link` | path | `/cuda` |")
    result = run("--root", str(checkout), "cuda_toolkit")
    assert result.returncode == 1
    assert "cuda_toolkit_link: default column `/cuda` is not the spec's `/usr/local/cuda`" in result.stderr
    assert run("--root", str(checkout), "--write-readme", "cuda_toolkit").returncode == 0
    assert run("--root", str(checkout), "cuda_toolkit").returncode == 0
    assert readme.read_text() == (ROOT / "roles/cuda_toolkit/README.md").read_text()


def test_an_undeclared_shared_input_fails(checkout):
    edit(checkout / "roles/sglang_service/defaults/main.yml", "sglang_service_enabled: true",
         "sglang_service_enabled: \"{{ llm_server_enabled | default(true) }}\"")
    result = run("--root", str(checkout), "sglang_service")
    assert result.returncode == 1, result.stdout
    assert ("roles/sglang_service/defaults/main.yml: llm_server_enabled: a shared input not declared in "
            "meta/llm_server_inputs.yml") in result.stderr


def test_a_shared_input_read_by_an_unlisted_role_fails(checkout):
    shared = checkout / "meta/llm_server_inputs.yml"
    edit(shared, "    used_by: [model_download, preflight, sglang_service]\n", "    used_by: [model_download, preflight]\n")
    result = run("--root", str(checkout), "sglang_service")
    assert result.returncode == 1
    assert "llm_server_hf_token: read by the role, which meta/llm_server_inputs.yml does not list in used_by" in result.stderr
