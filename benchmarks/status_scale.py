"""playbooks/status.yml on 1 and 8 hosts, and its controller part alone (issue 35).

    python3 benchmarks/status_scale.py [--sizes 1 8] [--runs 3] [--json FILE]

Not part of `make test`. No containers: each "host" is this machine over the local connection, with the
sglang_build, sglang_service and model_download paths pointed at a small converged-looking tree under a
temporary directory (a served build with build.json and SGLang 0.5.10.post1's real device_communicators
from PyPI, patched, in the release's whole sglang package, against which status renders the unit; a unit and its
known-good copy; a recorded model). The driver and CUDA are read from this
machine's real dpkg database (no NVIDIA stack here: those two concerns drift, so every run exits 2 by design and
the exit status is not judged). What it measures is the cost that grows with the fleet: one host_status run per
host (AnsiballZ, forks) and the plan on the controller.

Printed per size: wall seconds of the whole `ansible-playbook` (min and median of --runs), and the controller
part alone - fleet_status_report + fleet_status_table + one textfile per host - on N synthetic host results
(copies of one real host_status result), median of 200 calls.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".collections"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "unit" / "status"))

from ansible_collections.gpufleet.llm_server.plugins.module_utils import fleet_plan as fp  # noqa: E402
from ansible_collections.gpufleet.llm_server.plugins.module_utils import fleet_status as fs  # noqa: E402


def host_tree(work):
    import test_host_status as t  # the unit tests' converged host (real files)
    from support import pypi
    release = work / "release"
    release.mkdir()
    root = t.make_host(work, t.unpack_release(release))
    # The whole sglang package of the release under the served build (its patched device_communicators kept), so that
    # status renders the unit against its real flag definitions as on a real host (sglang_service's render_files).
    full = pypi.extract(pypi.download("sglang", "0.5.10.post1"), work / "sdist")
    [pkg] = [p.parent.parent for p in full.rglob("srt/server_args.py")
             if p.parent.parent.name == "sglang" and "multimodal_gen" not in str(p)]
    served = root / "opt/sglang/builds" / t.COMMIT / "src/python/sglang"
    shutil.copytree(pkg, served, dirs_exist_ok=True, ignore=lambda d, names: [n for n in names if (
        pathlib.Path(d) / n).relative_to(pkg).as_posix() == "srt/distributed/device_communicators"])
    return root, t


def inventory(root, size, work):
    hostvars = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "llm_server_model": "tiny",
                "llm_server_models": {"tiny": {"model_path": str(root / "srv/models/tiny"), "served_model_name": "tiny",
                                               "tp_size": 1}},
                "llm_server_expected_gpu_count": 0, "sglang_service_python": sys.executable,
                "sglang_service_env_dir": str(root / "etc/gpufleet/sglang"),
                "sglang_service_launcher": str(root / "usr/local/libexec/gpufleet/gpufleet-launch"),
                "sglang_build_dir": str(root / "opt/sglang"), "sglang_build_ref": "4f2a" + "0" * 36,
                "sglang_service_unit_dir": str(root / "etc/systemd/system"),
                "sglang_service_unit_name": "sglang-tiny.service",
                "sglang_service_state_dir": str(root / "var/lib/gpufleet/sglang"),
                "llm_server_restart_marker": str(root / "var/lib/gpufleet/sglang/restart-pending"),
                "model_download_record_dir": str(root / "var/lib/gpufleet/models"),
                "openai_smoke_test_results_dir": str(work / "smoke"),
                "llm_server_status_json_file": str(work / "status.json")}
    data = {"llm_servers": {"hosts": {"status-%d" % i: dict(hostvars) for i in range(1, size + 1)}}}
    path = work / ("inventory-%d.json" % size)
    path.write_text(json.dumps(data))
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--no-render", action="store_true",
                        help="llm_server_status_render=false: the unit against its known-good copy only")
    args = parser.parse_args()
    out = {"load_before": os.getloadavg()[0], "render": not args.no_render, "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        root, _t = host_tree(work)
        (work / "smoke").mkdir()
        result = fs.read({"dpkg_status": "/var/lib/dpkg/status", "procfs_root": "/proc", "sysfs_root": "/sys",
                          "apt_preferences": ["/etc/apt/preferences"], "apt_preferences_dirs": ["/etc/apt/preferences.d"],
                          "driver": {"branch": "595", "flavor": "open", "hold": True}, "cuda_version": "13.0",
                          "build_dir": str(root / "opt/sglang"), "ref": "4f2a" + "0" * 36, "git_url": "",
                          "python": "/opt/sglang/venv/bin/python", "patches": _t.PATCHES, "required_keys": [12],
                          "unit_dir": str(root / "etc/systemd/system"), "unit_name": "sglang-tiny.service",
                          "unit_content": None, "known_good_dir": str(root / "var/lib/gpufleet/sglang/known-good"),
                          "restart_marker": str(root / "var/lib/gpufleet/sglang/restart-pending"),
                          "model_path": str(root / "srv/models/tiny"),
                          "model_record_dir": str(root / "var/lib/gpufleet/models"), "hashes": False,
                          "deployment_record": str(root / "var/lib/gpufleet/sglang/deployment-tiny.json")},
                         lambda argv: (1, "", "no systemd here"), lambda name: None)
        env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORKS="10")
        for size in args.sizes:
            inv = inventory(root, size, work)
            walls = []
            for _run in range(args.runs):
                start = time.monotonic()
                proc = subprocess.run([str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv),
                                       str(ROOT / "playbooks" / "status.yml")]
                                      + (["-e", "llm_server_status_render=false"] if args.no_render else []), cwd=ROOT, env=env,
                                      capture_output=True, text=True, check=False)
                walls.append(time.monotonic() - start)
                # rc 2 only from the final drift check (driver and CUDA are absent here), with every host read
                if proc.returncode not in (0, 2) or "fleet: %d host(s)" % size not in proc.stdout:
                    raise SystemExit("status.yml failed (rc %d):\n%s\n%s" % (proc.returncode, proc.stdout[-3000:],
                                                                             proc.stderr[-3000:]))
                # every host's unit was compared with sglang_service's rendering (its render ran, not the fallback)
                report = json.loads((work / "status.json").read_text())
                compared = {h["concerns"]["unit"].get("compared_with") for h in report["hosts"].values()}
                if (compared == {"rendered from the inventory"}) == args.no_render:
                    raise SystemExit("the unit was not rendered: %s" % [
                        h["concerns"]["unit"]["detail"] for h in report["hosts"].values()])
            entries = [{"host": "status-%d" % i, "result": result, "smoke": None} for i in range(1, size + 1)]
            calls = []
            for _call in range(200):
                start = time.perf_counter()
                rep = fp.report(entries, 1)
                fp.table(rep)
                for name in rep["hosts"]:
                    fp.textfile(name, rep["hosts"][name], 0.0)
                calls.append(time.perf_counter() - start)
            out["sizes"][size] = {"playbook_wall_s": {"min": round(min(walls), 2), "median": round(statistics.median(walls), 2)},
                                  "controller_ms": round(statistics.median(calls) * 1000, 3)}
            print("%d host(s): status.yml %.2f s (min) / %.2f s (median) of %d runs; controller part %.3f ms" % (
                size, min(walls), statistics.median(walls), args.runs, statistics.median(calls) * 1000))
    print("load average before: %.2f" % out["load_before"])
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
