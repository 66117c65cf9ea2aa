"""The tests' one way to run a playbook from the checkout and read its per-task results.

One environment (the caller's, less any ANSIBLE_* setting, plus the collection path, the json stdout callback,
no colour and a local temp under tmp_path) and one callback (ansible.builtin.json), so every test reads the
same structure: PlaybookResult.tasks is [(task name, host, host result), ...] in run order.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK_BIN = pathlib.Path(sys.executable).parent / "ansible-playbook"


@dataclasses.dataclass
class PlaybookResult:
    rc: int
    stdout: str
    stderr: str
    output: dict  # the json callback's document ({} when ansible-playbook printed none)

    @property
    def tasks(self) -> list[tuple[str, str, dict]]:
        return [(task["task"]["name"], host, result) for play in self.output.get("plays", [])
                for task in play["tasks"] for host, result in task["hosts"].items()]

    def host_results(self, host: str) -> list[dict]:
        return [result for _task_name, name, result in self.tasks if name == host]


def ansible_env(tmp_path: pathlib.Path, base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """BASE (default: this process's environment) less any ANSIBLE_* setting, then the harness's settings, then
    EXTRA."""
    env = {key: value for key, value in (os.environ if base is None else base).items()
           if not key.startswith("ANSIBLE_")}
    env.update(ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_NOCOLOR="1")
    env.update(extra)
    return env


def run_playbook(tmp_path: pathlib.Path, playbook: str | list, *, inventory: str | dict = "localhost,",
                 connection: str | None = "local", check: bool = False, args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, base_env: dict[str, str] | None = None,
                 timeout: int = 600) -> PlaybookResult:
    """Run PLAYBOOK (YAML text or a list of plays) in tmp_path; INVENTORY is an inventory string or a JSON
    inventory document; ARGS are further ansible-playbook arguments (-e, --tags, ...); ENV is added to the
    harness's environment, BASE_ENV replaces this process's environment as its start (see ansible_env)."""
    play_file = tmp_path / "playbook.yml"
    play_file.write_text(playbook if isinstance(playbook, str) else json.dumps(playbook))
    if isinstance(inventory, dict):
        (tmp_path / "inventory.json").write_text(json.dumps(inventory))
        inventory = str(tmp_path / "inventory.json")
    argv = [str(PLAYBOOK_BIN), "-i", inventory, *(["-c", connection] if connection else []),
            *(["--check"] if check else []), *args, str(play_file)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=ansible_env(tmp_path, base_env, **(env or {})),
                          cwd=tmp_path, timeout=timeout, check=False)
    start = proc.stdout.find("{")
    output = json.loads(proc.stdout[start:]) if start >= 0 else {}
    return PlaybookResult(proc.returncode, proc.stdout, proc.stderr, output)
