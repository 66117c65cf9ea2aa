"""Benchmark (not a timed test): how long the openai_smoke_test role takes, and when it gives up.

1. The whole role (readiness wait, every check, JSON report) against a READY real engine:
   llama-cpp-python serving SmolLM2-135M-Instruct on the CPU (tests/support/llama_engine.py; built
   and cached on first use), with the role's defaults (request 120 s, suite 300 s, max_tokens 1024,
   concurrency 4). Printed per run: the ansible-playbook wall time and the checks' own time.
2. A wrong API key on the real engine (it has no /health; /v1/models answers 401): the time until the
   role names llm_server_api_key (with the 1800 s readiness timeout of the defaults).
3. The same role against a server that answers /health and /v1/models but never answers a chat
   request (the replay server's `stalled_body`, tests/support/sglang_replay.py): the time until the
   role gives up, against the configured suite budget (--budget).

    .venv/bin/python benchmarks/smoke_suite.py [--runs 3] [--budget 30]

Ports come from the smoke-test range 30200-30299; everything runs on loopback.
"""

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.llama_engine import LlamaServer  # noqa: E402
from support.sglang_replay import ReplayServer  # noqa: E402

API_KEY = "sk-bench"


def free_port():
    for port in range(30200, 30300):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    sys.exit("no free port in 30200-30299")


def run_role(port, served, extra=None):
    """(wall seconds, return code, report dict) of the role on localhost against 127.0.0.1:PORT."""
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="smoke-bench-"))
    variables = {
        "llm_server_model": "bench",
        "llm_server_models": {"bench": {"host": "127.0.0.1", "port": port, "served_model_name": served}},
        "llm_server_api_key": API_KEY,
        "openai_smoke_test_watch_unit": False,
        "openai_smoke_test_mark_known_good": False,
        "openai_smoke_test_rollback": False,
        "openai_smoke_test_results_dir": str(tmp / "reports"),
        "ansible_python_interpreter": sys.executable,
    }
    variables.update(extra or {})
    (tmp / "vars.json").write_text(json.dumps(variables))
    (tmp / "play.yml").write_text(json.dumps([{"hosts": "localhost", "gather_facts": False,
                                               "roles": [{"role": "gpufleet.llm_server.openai_smoke_test"}]}]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    cmd = [str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
           "-e", "@" + str(tmp / "vars.json"), str(tmp / "play.yml")]
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    wall = time.monotonic() - started
    report_file = tmp / "reports" / "localhost-deploy.json"
    if not report_file.exists():
        sys.exit("no report written:\n" + proc.stdout[-4000:] + proc.stderr[-2000:])
    return wall, proc.returncode, json.loads(report_file.read_text())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="role runs against the ready engine (default 3)")
    parser.add_argument("--budget", type=int, default=30, help="suite budget for the hung-server case (default 30)")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", flush=True)

    with LlamaServer(free_port(), model_alias="smollm2", chat_format="chatml-function-calling", api_key=API_KEY,
                     timeout=1200) as engine:
        print("\n1. whole role against a ready real engine (llama-cpp-python, SmolLM2-135M, role defaults)")
        print(f"{'run':>4} {'playbook':>9} {'checks':>7}  {'passed':<6} per check (s)")
        for run in range(1, args.runs + 1):
            wall, rc, report = run_role(engine.port, "smollm2")
            per = " ".join(f"{name}={res['latency_s']}" for name, res in report["checks"].items()
                           if res.get("latency_s") is not None)
            print(f"{run:>4} {wall:>8.1f}s {report.get('elapsed_s') or 0:>6.1f}s  {str(report['passed']):<6} {per}",
                  flush=True)
            if rc or not report["passed"]:
                print("   " + "\n   ".join(report["summary"]))

        print("\n2. wrong API key (real engine: no /health, /v1/models 401; "
              "openai_smoke_test_ready_timeout 1800)")
        wall, rc, report = run_role(engine.port, "smollm2", {"openai_smoke_test_api_key": "sk-wrong"})
        print(f"   role failed (rc={rc}) after {wall:.1f}s, waited {report['waited_s']}s; causes: "
              f"{[(c['cause'], c['variable']) for c in report['causes']]}")

    print(f"\n3. a server that never answers a chat request (replay 'stalled_body'), suite budget {args.budget}s, "
          "request timeout 120s")
    with ReplayServer(free_port(), "stalled_body", model="bench") as server:
        wall, rc, report = run_role(server.port, "bench", {"openai_smoke_test_suite_timeout": args.budget})
        print(f"   gave up after {report.get('elapsed_s')}s of checks (budget {args.budget}s), playbook {wall:.1f}s; "
              f"causes: {[(c['cause'], c['checks']) for c in report['causes']]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
