"""scripts/check_yaml_traps.py refuses list items that YAML turned into mappings (issue 12's trap)."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[3]
CHECK = ROOT / "scripts" / "check_yaml_traps.py"


def _check(tmp_path: pathlib.Path, text: str) -> subprocess.CompletedProcess:
    path = tmp_path / "play.yml"
    path.write_text(textwrap.dedent(text))
    return subprocess.run([sys.executable, str(CHECK), str(path)], capture_output=True, text=True, check=False)


# The task that failed cold in molecule/fleet/prepare.yml, as it was written.
TRAP = """\
    - name: Download the wheels
      ansible.builtin.command:
        argv:
          - python3
          - -m
          - pip
          - download
          - --only-binary=:all:
          - sglang-router==0.3.2
    """


def test_the_argv_item_that_failed_cold_is_refused_with_file_line_and_fix(tmp_path):
    proc = _check(tmp_path, TRAP)
    assert proc.returncode == 1
    assert f"{tmp_path / 'play.yml'}:8:" in proc.stderr
    assert "{'--only-binary=:all': None}" in proc.stderr
    assert 'quote it: - "--only-binary=:all:"' in proc.stderr


def test_the_quoted_item_passes(tmp_path):
    proc = _check(tmp_path, TRAP.replace("- --only-binary=:all:", '- "--only-binary=:all:"'))
    assert proc.returncode == 0, proc.stderr


def test_other_shapes_of_the_trap(tmp_path):
    proc = _check(tmp_path, """\
        - hosts: all
          vars:
            pip_args: [--upgrade, "--index-url=http://127.0.0.1:1/simple"]
            extra: ["--no-deps", --constraint=c.txt]
            words:
              - alpha
              - beta:
          tasks:
            - name: nested argv list
              ansible.builtin.command:
                argv: ["echo", ["a", "b"]]
        """)
    assert proc.returncode == 1
    assert ":7:" in proc.stderr and "- beta:" in proc.stderr
    assert ":11:" in proc.stderr and "must be one string, not a list" in proc.stderr
    assert proc.stderr.count("parses as a mapping") == 1


def test_ordinary_task_lists_and_mappings_pass(tmp_path):
    proc = _check(tmp_path, """\
        - hosts: all
          handlers:
            - name: restart sglang
              ansible.builtin.meta: noop
          tasks:
            - ansible.builtin.meta: flush_handlers
            - name: a dict item in a list of dicts is fine
              ansible.builtin.set_fact:
                items: [{name: a, value: null}, {name: b}]
            - name: empty values in a mapping are fine
              ansible.builtin.set_fact:
                nothing:
        """)
    assert proc.returncode == 0, proc.stderr


def test_the_project_itself_is_clean():
    proc = subprocess.run([sys.executable, str(CHECK)], capture_output=True, text=True, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
