"""The corpus of broken inventories (corpus.yml, one case per class) through the REAL preflight role.

One ansible-playbook run (the role alone, tests/integration/preflight/preflight.yml) for an inventory
the test writes: one host per case, connection local, so pass 1 (controller, no connection) and pass
2 (facts, gpu_info, disk and config.json of "the host" = this machine, read only) run exactly as in
site.yml, and every host must report all of its problems in that one run: the host pass runs even
when the controller pass found problems (it refuses with both passes' problems), unless there is nothing
to connect to (the inventory rule) or the host cannot be reached. The reference profiles must pass both
passes. Nothing runs after preflight, so a case that wrongly passes changes nothing.

The 223 GB of the accepted Qwen3.5 model are six sparse files with a model_download record (a
stand-in: only their sizes are read).
"""

import copy
import json
import os
import pathlib
import sys

import pytest
import yaml
from ansible_collections.gpufleet.llm_server.plugins.module_utils import model_manifest
from support.ansible_harness import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]
HERE = pathlib.Path(__file__).resolve().parent
CORPUS = yaml.safe_load((HERE / "corpus.yml").read_text())
REFERENCE = yaml.safe_load((ROOT / "inventories/production/group_vars/llm_servers/models.yml").read_text())["llm_server_models"]
PASS_TASKS = {1: "Check the inventory and the model profile (on the controller, no connection)",
              2: "Validate the model profile against the host (GPUs, RAM, disk, config.json)",
              3: "Check the variables of the roles this run will use (on the controller)"}


def _subst(value, tmp, case_id):
    if isinstance(value, str):
        return value.replace("{tmp}", str(tmp)).replace("{id}", case_id)
    if isinstance(value, dict):
        return {k: _subst(v, tmp, case_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_subst(v, tmp, case_id) for v in value]
    return value


def _host(case, tmp):
    case = _subst(case, tmp, case["id"])
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    host.update(CORPUS["defaults"]["vars"])
    if "profiles" in case:
        host["llm_server_models"] = case["profiles"]
    else:
        profile = copy.deepcopy(REFERENCE[case.get("profile", "kimi-k2.5")])
        for path, value in (case.get("set") or {}).items():
            node, keys = profile, path.split(".")
            for key in keys[:-1]:
                node = node[key]
            if value is None:
                node.pop(keys[-1], None)
            else:
                node[keys[-1]] = value
        for path in case.get("unset") or []:
            node, keys = profile, path.split(".")
            for key in keys[:-1]:
                node = node[key]
            del node[keys[-1]]
        host["llm_server_models"] = {case["id"]: profile}
    host["llm_server_model"] = case["id"]
    for key, value in (case.get("vars") or {}).items():
        if value is None:
            host.pop(key, None)
        else:
            host[key] = value
    profile = (host.get("llm_server_models") or {}).get(host.get("llm_server_model")) \
        if isinstance(host.get("llm_server_models"), dict) else None
    if isinstance(profile, dict) and "config_json" in case:
        os.makedirs(profile["model_path"], exist_ok=True)
        pathlib.Path(profile["model_path"], "config.json").write_text(json.dumps(case["config_json"]))
    if isinstance(profile, dict) and "sparse_shards" in case:
        os.makedirs(profile["model_path"], exist_ok=True)
        files = {}
        for i in range(case["sparse_shards"]["count"]):
            name = "model-%05d.safetensors" % i
            with open(pathlib.Path(profile["model_path"], name), "wb") as shard:
                shard.truncate(int(case["sparse_shards"]["gb"] * 1e9))
            files[name] = int(case["sparse_shards"]["gb"] * 1e9)
        # The record as model_download's helper writes it after a verified download, outside the model directory
        # (plugins/module_utils/model_manifest.py): sizes and stat of every file (hashes are not read by preflight).
        for name in os.listdir(profile["model_path"]):
            files[name] = os.path.getsize(os.path.join(profile["model_path"], name))
        records = tmp / "records"
        records.mkdir(exist_ok=True)
        host["model_download_record_dir"] = str(records)
        pathlib.Path(model_manifest.record_path(profile["model_path"], str(records))).write_text(json.dumps({
            "format": model_manifest.FORMAT, "model_path": os.path.normpath(profile["model_path"]),
            "repo": profile["hub_repo"], "revision": profile.get("hub_revision", "main"), "commit": "0" * 40,
            "source": "hub", "verified": "sha256", "verified_at": "2026-12-01T00:00:00Z",
            "files": {name: {"size": size, "sha256": "0" * 64, "stat": model_manifest.fingerprint(
                os.stat(os.path.join(profile["model_path"], name)))} for name, size in files.items()}}))
    return host


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corpus")
    hosts = {case["id"]: _host(case, tmp) for case in CORPUS["cases"] + CORPUS["accepted"]}
    # Ansible's YAML loader reads back what PyYAML writes: NaN as .nan, line breaks as escapes.
    inventory = tmp / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}, allow_unicode=False))
    proc = run_playbook(tmp, HERE / "preflight.yml", inventory=inventory, connection=None,
                        env={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}, timeout=900)
    result = proc.output
    failed = {}
    for play in result["plays"]:
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                if res.get("failed"):
                    failed[host] = (task["task"]["name"], res.get("msg", ""), json.dumps(res.get("errors")))
    return result, failed, proc


@pytest.mark.parametrize("case", CORPUS["cases"], ids=[c["id"] for c in CORPUS["cases"]])
def test_case_refused_with_every_expected_problem(outcome, case):
    _result, failed, proc = outcome
    assert case["id"] in failed, "%s was not refused" % case["id"]
    task, msg, errors = failed[case["id"]]
    assert task.endswith(PASS_TASKS[case.get("pass", 2)]), (task, msg)
    lines = [line for line in msg.splitlines() if line.startswith("[")]
    for want in case["expect"]:
        variable = want["variable"].replace("{id}", case["id"])
        fix = want["fix"].replace("{id}", case["id"])
        matching = [line for line in lines if line.startswith("[%s] " % want["rule"]) and variable in line.split(" = ")[0]]
        assert matching, "no [%s] %s in:\n%s" % (want["rule"], variable, msg)
        assert any(fix in line.split("Fix: ", 1)[1] for line in matching), "fix %r not in %s" % (fix, matching)
    for line in lines:
        assert " = " in line and ": " in line and "Fix: " in line and "(source: " in line, line
    for secret in case.get("absent") or []:
        assert secret not in msg and secret not in errors
    if case.get("message"):
        assert case["message"] in msg, msg
    # Every problem in one refusal; the host pass only reads: nothing changed on any refused host.
    assert len({want["rule"] for want in case["expect"]}) <= len({line.split("]")[0] for line in lines})
    assert _result["stats"][case["id"]]["changed"] == 0


def test_reference_profiles_pass_both_passes(outcome):
    result, failed, _proc = outcome
    for case in CORPUS["accepted"]:
        assert case["id"] not in failed, failed.get(case["id"])
        assert result["stats"][case["id"]]["failures"] == 0


def test_one_run_reported_every_case(outcome):
    result, failed, _proc = outcome
    assert set(failed) == {c["id"] for c in CORPUS["cases"]}
    assert set(result["stats"]) == {c["id"] for c in CORPUS["cases"] + CORPUS["accepted"]}
