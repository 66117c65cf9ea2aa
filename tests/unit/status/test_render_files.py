"""sglang_service's read-only rendering for playbooks/status.yml (roles/sglang_service/tasks/render_files.yml) gives
byte for byte the unit and environment file the deploy writes with the role's own render and credential tasks and
templates (no false drift on a converged host), against SGLang 0.5.10.post1's real flag definitions (PyPI sdist),
and says why when the profile cannot be rendered (a flag that SGLang does not have)."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest
import yaml

from support import pypi
from support.ansible_harness import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLAYBOOK = ROOT / "tests" / "unit" / "status" / "render_files" / "play.yml"
PROFILE = {"model_path": "/srv/models/tiny", "served_model_name": "tiny", "tp_size": 1, "host": "127.0.0.1",
           "port": 30001, "env": {"SGLANG_X": "1"}, "extra_args": []}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    dest = pypi.extract(pypi.download("sglang", "0.5.10.post1"), tmp_path_factory.mktemp("sglang"))
    [pkg] = [p.parent.parent for p in dest.rglob("srt/server_args.py")
             if p.parent.parent.name == "sglang" and "multimodal_gen" not in str(p)]
    return str(pkg)


def host(tmp, name, tree, profile, **extra):
    base = tmp / name
    out = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
           "role_dir": str(ROOT / "roles" / "sglang_service"), "out_file": str(base / "rendered.json"),
           "llm_server_models": {"tiny": profile}, "llm_server_model": "tiny", "llm_server_expected_gpu_count": 0,
           "sglang_service_python": sys.executable, "sglang_service_sglang_dir": tree,
           "sglang_service_api_key": "sk-render-files", "sglang_service_hf_token": "hf_renderfiles",
           "sglang_service_unit_dir": str(base / "units"), "sglang_service_env_dir": str(base / "env"),
           "sglang_service_state_dir": str(base / "state"), "sglang_service_credential_encrypt": "never",
           "sglang_service_launcher": str(base / "gpufleet-launch"),
           "sglang_service_restart_marker": str(base / "state" / "restart-pending"),
           "sglang_build_version": "0.5.10.post1", "sglang_service_defer_restart": True,
           "cuda_toolkit_env": {"CUDA_HOME": "/usr/local/cuda-13.0", "PATH": "/usr/local/cuda-13.0/bin:/usr/bin"}}
    (base / "state").mkdir(parents=True)
    out.update(extra)
    return out


def test_render_files_is_what_the_deploy_writes(tmp_path, tree):
    hosts = {"same": host(tmp_path, "same", tree, PROFILE),
             "refused": host(tmp_path, "refused", tree, dict(PROFILE, extra_args=["--no-such-flag-in-sglang"]),
                             render_only=True)}
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    proc = run_playbook(tmp_path, PLAYBOOK, inventory=inventory, connection=None,
                        env={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    assert proc.rc == 0, proc.stdout[-6000:] + proc.stderr[-3000:]

    rendered = json.loads((tmp_path / "same" / "rendered.json").read_text())
    unit = (tmp_path / "same" / "units" / "sglang-tiny.service").read_text()
    env = (tmp_path / "same" / "env" / "tiny.env").read_text()
    assert rendered["unit"] == unit and rendered["env"] == env
    # the parts that come from elsewhere than the profile: the checked SGLang, both credentials, the CUDA environment
    assert "against SGLang 0.5.10.post1" in unit
    assert "LoadCredential=api-key:%s" % (tmp_path / "same" / "env" / "credentials" / "api-key") in unit
    assert "LoadCredential=environment:" in unit and '"--served-model-name" "tiny"' in unit
    assert 'CUDA_HOME="/usr/local/cuda-13.0"' in env and 'SGLANG_X="1"' in env
    assert "sk-render-files" not in unit + env and "hf_renderfiles" not in unit + env

    refused = json.loads((tmp_path / "refused" / "rendered.json").read_text())
    assert refused["unit"] is None and refused["env"] is None
    assert "--no-such-flag-in-sglang" in refused["reason"], refused
    assert not (tmp_path / "refused" / "units").exists()
