"""Run one of the collection's modules as Ansible does (a Python process reading its JSON arguments), from
the checkout, on this machine: no mocks of AnsibleModule."""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]


def run_module(module_name, tmp_path, **args):
    args.setdefault("_ansible_check_mode", False)
    args.setdefault("_ansible_diff", False)
    args.setdefault("_ansible_tmpdir", str(tmp_path))
    args.setdefault("_ansible_remote_tmp", str(tmp_path))
    args_file = tmp_path / ("args-%s.json" % module_name)
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(ROOT / ".collections"))
    proc = subprocess.run([sys.executable, str(ROOT / "plugins" / "modules" / (module_name + ".py")), str(args_file)],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    out = proc.stdout.strip().splitlines()
    result = json.loads(out[-1]) if out else {}
    result["_rc"], result["_stderr"] = proc.returncode, proc.stderr
    return result
