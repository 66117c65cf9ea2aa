"""tests/hardware/check_gpu_info.py on results shaped like the GPU test host's (one H200).

The inputs are produced by gpu_info.collect over the fake sysfs tree (a TEST DOUBLE, see
tests/support/fake_sysfs.py) with a fake NVML object reporting an H200, so the report logic is
proven to PASS on good facts and FAIL on bad ones before the lead spends device time on it.
"""

import json
import pathlib
import subprocess
import sys

from ansible_collections.gpufleet.llm_server.plugins.module_utils import gpu_info as gi
from support.fake_sysfs import FakeKernel
from unit.gpu.test_gpu_info import FakeNvml

CHECKER = pathlib.Path(__file__).resolve().parents[2] / "hardware" / "check_gpu_info.py"


def write_results(tmp_path, flavor="open"):
    kernel = FakeKernel(str(tmp_path / "host")).build(gpus=1, audio=False, device_id="0x2335", flavor=flavor)
    out = tmp_path / "out"
    out.mkdir()
    for probe in ("auto", "nvml", "nvidia-smi", "sysfs"):
        if probe == "nvidia-smi":
            data = {"failed": True, "msg": "probe=nvidia-smi: not on PATH"}
        else:
            facts = gi.collect(kernel.sys, kernel.proc, kernel.dev, probe="sysfs" if probe == "sysfs" else "nvml",
                               pynvml=FakeNvml(), modules_root=str(tmp_path / "none"))
            data = {"changed": False, "gpu_info": facts}
        (out / (probe + ".json")).write_text(json.dumps(data), encoding="utf-8")
    return out


def run(out, *extra):
    return subprocess.run([sys.executable, str(CHECKER), "--results", str(out), "--started", "now", *extra],
                          capture_output=True, text=True, check=False, timeout=60)


def test_h200_facts_pass_except_missing_probe(tmp_path):
    out = write_results(tmp_path)
    (out / "nvidia-smi.json").unlink()
    result = run(out, "--expect-address", "0000:01:00.0")
    assert "| nvml | nvml | compute capability 9.0 | PASS | 9.0 |" in result.stdout
    assert "| nvml | nvml | memory > 100 GiB | PASS | 143771 MiB |" in result.stdout
    assert "| auto | nvml | open kernel module detected | PASS |" in result.stdout
    assert "| sysfs | sysfs | GPU bound to nvidia | PASS | 0000:01:00.0: nvidia |" in result.stdout
    # The missing nvidia-smi result is a failure, not a silent pass.
    assert "| nvidia-smi | - | gpu_info ran | **FAIL** |" in result.stdout
    assert "1 CHECK(S) FAILED" in result.stdout and result.returncode == 1


def test_proprietary_module_fails(tmp_path):
    out = write_results(tmp_path, flavor="proprietary")
    result = run(out)
    assert "| auto | nvml | open kernel module detected | **FAIL** | module_flavor=proprietary (from proc) |" \
        in result.stdout
    assert result.returncode == 1


def test_all_good_exits_zero(tmp_path):
    out = write_results(tmp_path)
    smi = json.loads((out / "nvml.json").read_text(encoding="utf-8"))
    smi["gpu_info"]["source"] = "nvidia-smi"
    (out / "nvidia-smi.json").write_text(json.dumps(smi), encoding="utf-8")
    result = run(out)
    assert result.returncode == 0, result.stdout
    assert "ALL CHECKS PASSED" in result.stdout and "**FAIL**" not in result.stdout
