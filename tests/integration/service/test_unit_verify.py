"""A systemd unit rendered from each accepted profile passes `systemd-analyze verify`.

Profiles: every one in inventories/*/group_vars/llm_servers/models.yml and inventories/examples/**
(the reference profiles). Each is checked and rendered by sglang_service's own render tasks
(roles/sglang_service/tasks/render.yml: gpufleet.llm_server.sglang_preflight against the REAL flag
definitions of SGLang 0.5.10.post1 and 0.5.23, downloaded from PyPI) and its own templates, in one
ansible-playbook run (connection local, one inventory host per case; nothing is installed or
started), then verified by systemd's own parser: `systemd-analyze verify` from Debian's systemd
package on this machine (systemd 252 on the Debian 12 development/CI VM; it loads the unit file
offline, systemd need not be PID 1). ExecStart's interpreter is this test's Python, so the unit's
command exists. Also shown: systemd-analyze rejects a unit whose ExecStart the renderer would have
refused, and the role refuses such a profile before writing any file."""

import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from support import pypi
from support.ansible_harness import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLAYBOOK = ROOT / "tests" / "integration" / "service" / "unit_verify" / "render.yml"
MODEL_FILES = sorted(ROOT.glob("inventories/**/group_vars/llm_servers/models.yml"))
RELEASES = {"0.5.10.post1": "sdist", "0.5.23": "wheel"}
SM120 = {"llm_server_expected_gpu_count": 8, "llm_server_expected_compute_capability": "12.0"}


def _systemd_analyze():
    path = shutil.which("systemd-analyze")
    if not path:
        pytest.fail("systemd-analyze is missing: install Debian's systemd package (apt-get install systemd); "
                    "it verifies the rendered units offline")
    return path


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    out = {}
    for version, prefer in RELEASES.items():
        dest = pypi.extract(pypi.download("sglang", version, prefer=prefer), tmp_path_factory.mktemp("sglang-" + version))
        [pkg] = [p.parent.parent for p in dest.rglob("srt/server_args.py")
                 if p.parent.parent.name == "sglang" and "multimodal_gen" not in str(p)]
        out[version] = str(pkg)
    return out


def _host(tmp, name, profiles, model, **extra):
    base = tmp / name
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "unit_verify_role": str(ROOT / "roles" / "sglang_service"),
            "llm_server_models": profiles, "llm_server_model": model,
            "sglang_service_python": sys.executable, "sglang_service_api_key": "sk-unit-verify",
            "sglang_service_hf_token": "hf_unitverify", "sglang_service_unit_dir": str(base / "units"),
            "sglang_service_env_dir": str(base / "env"), "sglang_service_state_dir": str(base / "state"),
            # credentials as plain root-only files (encrypting would create this VM's systemd host key)
            "sglang_service_credential_encrypt": "never", "sglang_service_launcher": str(base / "gpufleet-launch"),
            "sglang_service_restart_marker": str(base / "state" / "restart-pending"),
            "sglang_service_defer_restart": True}  # (the credential tasks notify restart sglang: nothing runs here)
    host.update(SM120)
    host.update(extra)
    return host


def _play(tmp, hosts):
    inventory = tmp / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    proc = run_playbook(tmp, PLAYBOOK, inventory=inventory, connection=None,
                        env={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    return proc, proc.output


def _failures(result):
    """'host: task: msg' of every failed task in ansible's JSON output."""
    out = []
    for play in result.get("plays", []):
        for task in play.get("tasks", []):
            for host, res in task.get("hosts", {}).items():
                if res.get("failed"):
                    out.append("%s: %s: %s" % (host, task["task"]["name"], res.get("msg")))
    return out


def _verify(unit):
    return subprocess.run([_systemd_analyze(), "verify", str(unit)], capture_output=True, text=True, check=False)


def test_every_accepted_profile_renders_a_unit_systemd_accepts(tmp_path, trees):
    _systemd_analyze()
    hosts, expected = {}, {}
    for models in MODEL_FILES:
        profiles = yaml.safe_load(models.read_text())["llm_server_models"]
        where = models.parts[len(ROOT.parts) + 1]  # production / examples
        for name in profiles:
            for version, tree in trees.items():
                host = ("%s-%s-%s" % (where, name, version)).replace(".", "_")
                hosts[host] = _host(tmp_path, host, profiles, name, sglang_service_sglang_dir=tree)
                expected[host] = (name, version)
    assert len({name for name, _v in expected.values()}) >= 2
    # Issue 34: the InfiniBand switch on one of them (multi-node NCCL over IB/RoCE).
    ib_host = sorted(expected)[-1]
    hosts[ib_host]["sglang_service_infiniband"] = True
    proc, result = _play(tmp_path, hosts)
    assert proc.rc == 0, _failures(result) or proc.stdout[-6000:] + proc.stderr[-3000:]
    for host, (name, version) in expected.items():
        unit = tmp_path / host / "units" / ("sglang-%s.service" % name)
        devices = unit.parent / "gpufleet-nvidia-devices.service"
        for path in (unit, devices):
            verify = _verify(path)
            assert verify.returncode == 0 and not verify.stderr.strip(), (host, verify.stderr, path.read_text())
        text = unit.read_text()
        # Issue 34: the exposure score of the sandbox (offline: the unit need not be loaded) stays at 2.1 or below.
        security = subprocess.run([_systemd_analyze(), "security", "--offline=yes", "--no-pager", str(unit)],
                                  capture_output=True, text=True, check=False)
        score = re.search(r"Overall exposure level for \S+: ([0-9.]+)", security.stdout)
        assert score and float(score.group(1)) <= 2.1, (host, security.stdout[-3000:], security.stderr)
        # The modules are loaded and the nodes made by the device unit, outside the server's device cgroup,
        # before each start; the restart marker is cleared only by a start of the unit as it is on disk.
        assert "Wants=network-online.target gpufleet-nvidia-devices.service" in text
        assert "nvidia-modprobe" not in text and "nvidia-modprobe --unified-memory" in devices.read_text()
        [marker] = [line for line in text.splitlines() if line.startswith("ExecStartPre=")]
        assert "NeedDaemonReload" in marker and marker.endswith(
            "' %s %%n gpufleet-nvidia-devices.service" % (tmp_path / host / "state" / "restart-pending"))
        ib_lines = ["DeviceAllow=char-infiniband_verbs rw", "DeviceAllow=char-infiniband_mad rw",
                    "DeviceAllow=/dev/infiniband/rdma_cm rw"]
        assert all((line in text) == (host == ib_host) for line in ib_lines), host
        assert ("modprobe -a ib_uverbs" in devices.read_text()) == (host == ib_host)
        assert "against SGLang %s" % version in text
        exec_start = [line for line in text.splitlines() if line.startswith("ExecStart=")]
        # The key is no word of ExecStart: the launcher appends it inside the process from the credential.
        assert len(exec_start) == 1 and "sk-unit-verify" not in text and '"--api-key"' not in exec_start[0]
        assert "--credential-argument api-key=--api-key" in exec_start[0]
        assert "--credential-environment environment" in exec_start[0]
        credentials = tmp_path / host / "env" / "credentials"
        assert "LoadCredential=api-key:%s/api-key" % credentials in text
        assert (credentials / "api-key").read_text() == "sk-unit-verify"
        assert oct((credentials / "api-key").stat().st_mode & 0o777) == "0o600"
        assert '"HF_TOKEN": "hf_unitverify"' in (credentials / "environment").read_text()
        env_file = tmp_path / host / "env" / ("%s.env" % name)
        env = env_file.read_text()
        assert "sk-unit-verify" not in env and "hf_unitverify" not in env and oct(env_file.stat().st_mode & 0o777) == "0o600"
        assert all(line.isprintable() for line in env.splitlines())


def test_a_split_exec_start_is_what_systemd_rejects(tmp_path):
    """The renderer's refusal is not cosmetic: a line break in one word makes the unit unloadable."""
    bypass = {"flags_checked": False, "exec_start_args": '"--model-path" "/shared/m\n" "--tp-size" "8"'}
    hosts = {"bypass": _host(tmp_path, "bypass", {"m": {}}, "m", unit_verify_bypass=bypass)}
    proc, _result = _play(tmp_path, hosts)
    assert proc.rc == 0, proc.stdout[-4000:]
    unit = tmp_path / "bypass" / "units" / "sglang-m.service"
    assert unit.is_file()  # in tmp: systemd-analyze would otherwise find a unit of that name under /etc
    verify = _verify(unit)
    assert verify.returncode != 0 and "Unbalanced quoting" in verify.stderr


def test_a_profile_with_a_line_break_writes_nothing(tmp_path, trees):
    profiles = yaml.safe_load(MODEL_FILES[0].read_text())["llm_server_models"]
    profiles["qwen3.5-397b-nvfp4"]["served_model_name"] = "qwen3.5-397b\n"
    hosts = {"broken": _host(tmp_path, "broken", profiles, "qwen3.5-397b-nvfp4",
                             sglang_service_sglang_dir=trees["0.5.23"])}
    # Issue 34: operator settings systemd would expand in the unit (a clean profile otherwise).
    clean = yaml.safe_load(MODEL_FILES[0].read_text())["llm_server_models"]
    hosts["expands"] = _host(tmp_path, "expands", clean, "qwen3.5-397b-nvfp4", sglang_service_sglang_dir=trees["0.5.23"],
                             sglang_service_restart_marker="/var/lib/%h/restart-pending",
                             sglang_service_read_write_paths=["/srv/../etc"])
    proc, result = _play(tmp_path, hosts)
    assert proc.rc != 0
    assert "[control-characters] llm_server_models['qwen3.5-397b-nvfp4'].served_model_name" in proc.stdout
    assert "[unit-settings] sglang_service_restart_marker" in proc.stdout and "/var/lib/%h/restart-pending" in proc.stdout
    assert "[unit-settings] sglang_service_read_write_paths[0]" in proc.stdout
    for host in ("broken", "expands"):
        assert not (tmp_path / host / "units").exists() and not (tmp_path / host / "env").exists()
