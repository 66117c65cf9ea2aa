"""The tests' one way to run a playbook or a module from the checkout and read its per-task results.

One environment (the caller's, less any ANSIBLE_* setting, plus the collection path, the stdout callback,
no colour and a local temp under tmp_path) and one callback (ansible.builtin.json unless a test reads what a
user sees on the terminal), so every test reads the same structure: PlaybookResult.tasks is
[(task name, host, host result), ...] in run order.

- run_playbook: ansible-playbook on a playbook (text, plays, or a file of the checkout).
- run_module: one module as a one-task play on one host (AnsiballZ, argument spec, no_log, check and diff modes
  exactly as in a role); PlaybookResult.result is that task's result.
- run_module_file: one module's source run as a plain Python process reading its arguments from a JSON file
  (no Ansible around it: the _ansible_* arguments are the test's to set), for unit tests of a module's logic.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys

from support.code_cache_env import with_code_cache

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The checkout's ansible.cfg settings that change how fast a run is, not what it does (pipelining, the poll interval,
# the worker_gc callback), for the runs in tmp_path, where that ansible.cfg is not found (issue 36). A file, not
# environment variables: internal_poll_interval has none in ansible-core.
SPEED_CONFIG = ROOT / "tests" / "support" / "harness-ansible.cfg"
PLAYBOOK_BIN = pathlib.Path(sys.executable).parent / "ansible-playbook"
JSON_CALLBACK = "ansible.builtin.json"


@dataclasses.dataclass
class PlaybookResult:
    rc: int
    stdout: str
    stderr: str
    output: dict  # the json callback's document ({} when ansible-playbook printed none, or another callback ran)

    @property
    def tasks(self) -> list[tuple[str, str, dict]]:
        return [(task["task"]["name"], host, result) for play in self.output.get("plays", [])
                for task in play["tasks"] for host, result in task["hosts"].items()]

    def host_results(self, host: str) -> list[dict]:
        return [result for _task_name, name, result in self.tasks if name == host]

    @property
    def result(self) -> dict:
        """The first task's result on its first host (run_module's one task), {} when no task ran."""
        tasks = self.tasks
        return tasks[0][2] if tasks else {}


def ansible_env(tmp_path: pathlib.Path, base: dict[str, str] | None = None, callback: str = JSON_CALLBACK,
                **extra: str) -> dict[str, str]:
    """BASE (default: this process's environment) less any ANSIBLE_* setting, then the harness's settings
    (CALLBACK as the stdout callback; the payload code cache's directory first on PYTHONPATH; SPEED_CONFIG as
    ANSIBLE_CONFIG), then EXTRA (a test's own ANSIBLE_CONFIG replaces SPEED_CONFIG)."""
    # Module payloads compiled once per content instead of on every module run (issue 36: a quarter of a module
    # run's CPU); a test-only start-up hook, see tests/support/code_cache_env.py.
    env = with_code_cache({key: value for key, value in (os.environ if base is None else base).items()
                           if not key.startswith("ANSIBLE_")})
    env.update(ANSIBLE_STDOUT_CALLBACK=callback, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=str(SPEED_CONFIG))
    env.update(extra)
    return env


def parse_json_output(stdout: str) -> dict:
    """The json callback's document: the first line that starts with `{`, to the end of that document (a role's
    progress lines may come before it, a callback's lines after it); {} when there is none."""
    start = re.search(r"^\{", stdout, re.M)
    return json.JSONDecoder().raw_decode(stdout[start.start():])[0] if start else {}


def playbook_command(tmp_path: pathlib.Path, playbook: str | list | pathlib.Path, *,
                     inventory: str | dict | pathlib.Path | None = "localhost,", connection: str | None = "local",
                     check: bool = False, args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                     base_env: dict[str, str] | None = None,
                     callback: str = JSON_CALLBACK) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of the ansible-playbook run that run_playbook makes (same arguments), for a test that
    must start it in the background itself (to kill it midway); run it in tmp_path."""
    if isinstance(playbook, pathlib.Path):
        play_file = playbook
    else:
        play_file = tmp_path / "playbook.yml"
        play_file.write_text(playbook if isinstance(playbook, str) else json.dumps(playbook))
    if isinstance(inventory, dict):
        (tmp_path / "inventory.json").write_text(json.dumps(inventory))
        inventory = str(tmp_path / "inventory.json")
    argv = [str(PLAYBOOK_BIN), *(["-i", str(inventory)] if inventory is not None else []),
            *(["-c", connection] if connection else []), *(["--check"] if check else []), *args, str(play_file)]
    return argv, ansible_env(tmp_path, base_env, callback, **(env or {}))


def run_playbook(tmp_path: pathlib.Path, playbook: str | list | pathlib.Path, *,
                 callback: str = JSON_CALLBACK, cwd: pathlib.Path | None = None, timeout: int = 600,
                 **kwargs) -> PlaybookResult:
    """Run PLAYBOOK (YAML text, a list of plays, or the path of a playbook file) in tmp_path. KWARGS:
    inventory (an inventory string, default "localhost,"; a JSON inventory document; an inventory file; None for
    ansible.cfg's), connection (default local; None: the inventory's), check, args (further ansible-playbook
    arguments: -e, --tags, ...), env (added to the harness's environment), base_env (replaces this process's
    environment as its start, see ansible_env). CALLBACK: the stdout callback; only a test that reads what a user
    sees on the terminal sets another one than ansible.builtin.json (output is {} then). CWD (default tmp_path):
    the directory it runs in, the checkout for a test that needs its ansible.cfg found as a user's run finds it."""
    argv, env = playbook_command(tmp_path, playbook, callback=callback, **kwargs)
    if cwd is not None and env.get("ANSIBLE_CONFIG") == str(SPEED_CONFIG):
        del env["ANSIBLE_CONFIG"]  # CWD's ansible.cfg, found as a user's run finds it
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path if cwd is None else cwd,
                          timeout=timeout, check=False)
    output = parse_json_output(proc.stdout) if callback == JSON_CALLBACK else {}
    return PlaybookResult(proc.returncode, proc.stdout, proc.stderr, output)


def run_module(tmp_path: pathlib.Path, module: str, module_args: dict, *, check: bool = False, diff: bool = False,
               task: dict | None = None, interpreter: str | None = sys.executable, **kwargs) -> PlaybookResult:
    """Run MODULE (FQCN) with MODULE_ARGS as the one task of a play on localhost (connection local, this venv's
    Python unless INTERPRETER says otherwise) through run_playbook; CHECK and DIFF are --check and --diff; TASK
    adds task keywords (register, failed_when, ...); KWARGS go to run_playbook (env, timeout, ...). The module's
    result is PlaybookResult.result."""
    play = [{"hosts": "localhost", "gather_facts": False,
             "tasks": [dict({"name": module, module: module_args}, **(task or {}))]}]
    args = tuple(kwargs.pop("args", ()))
    if interpreter:
        args += ("-e", json.dumps({"ansible_python_interpreter": interpreter}))
    if diff:
        args += ("--diff",)
    return run_playbook(tmp_path, play, check=check, args=args, **kwargs)


def run_module_file(module_name: str, tmp_path: pathlib.Path, **args) -> dict:
    """Run plugins/modules/MODULE_NAME.py of the checkout as Ansible's module process runs (a Python process
    reading its JSON arguments; the collection importable from .collections), with no mock of AnsibleModule.
    ARGS are the module's arguments, the _ansible_* ones included (check mode, diff: default off; temp dirs:
    tmp_path). Returns the module's JSON result plus _rc (its exit status) and _stderr."""
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
