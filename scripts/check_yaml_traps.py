"""Refuse YAML list items that were meant as one argument but parse as a mapping.

The trap (issue 12): in an argv list, `- --only-binary=:all:` ends in a colon, so YAML reads the
item as the mapping {'--only-binary=:all': None} and pip refused it. The task sat behind a cache
(`creates:`), so only a cold machine ever ran it; ansible-lint and yamllint both accept it. This
check reads the YAML node tree (so it reports file:line) and refuses, in any list:

- an item of an `argv:` list that is not a plain scalar;
- a one-key mapping with an empty value (`- text:`) in a list that also holds scalars;
- a one-key mapping whose key starts with `-` (an option that ended in `:`), anywhere.

    python scripts/check_yaml_traps.py [FILE ...]      (default: every YAML file git tracks or would add)
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
NULL = "tag:yaml.org,2002:null"


def _is_empty_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == NULL and node.value in ("", "~", "null")


def _single_pair(node: yaml.Node) -> tuple[yaml.Node, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode) and len(node.value) == 1:
        return node.value[0]
    return None


def _where(path: pathlib.Path, node: yaml.Node) -> str:
    return f"{path}:{node.start_mark.line + 1}"


def _trap_message(path: pathlib.Path, item: yaml.Node, key: yaml.Node, value: yaml.Node) -> str:
    text = f"{key.value}:" if _is_empty_null(value) else f"{key.value}: {getattr(value, 'value', '...')}"
    return (f"{_where(path, item)}: list item `- {text}` parses as a mapping {{{key.value!r}: "
            f"{None if _is_empty_null(value) else '...'}}}, not as the string {text!r}; "
            f"quote it: - \"{text}\"")


def check_node(path: pathlib.Path, node: yaml.Node, under_argv: bool = False) -> list[str]:
    problems: list[str] = []
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            problems += check_node(path, value, under_argv=isinstance(key, yaml.ScalarNode) and key.value == "argv")
    elif isinstance(node, yaml.SequenceNode):
        has_scalars = any(isinstance(item, yaml.ScalarNode) for item in node.value)
        for item in node.value:
            pair = _single_pair(item)
            if pair is not None and isinstance(pair[0], yaml.ScalarNode):
                key, value = pair
                option_like = key.value.startswith("-")
                if option_like or under_argv or (has_scalars and _is_empty_null(value)):
                    problems.append(_trap_message(path, item, key, value))
                    continue
            if under_argv and not isinstance(item, yaml.ScalarNode):
                problems.append(f"{_where(path, item)}: an `argv` item must be one string, not a "
                                f"{'list' if isinstance(item, yaml.SequenceNode) else 'mapping'}")
                continue
            problems += check_node(path, item)
    return problems


def check_file(path: pathlib.Path) -> list[str]:
    try:
        with open(path, encoding="utf-8") as stream:
            documents = list(yaml.compose_all(stream))
    except yaml.YAMLError as exc:
        return [f"{path}: not valid YAML: {exc}"]
    problems: list[str] = []
    for document in documents:
        if document is not None:
            problems += check_node(path, document)
    return problems


def project_yaml_files() -> list[pathlib.Path]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.yml", "*.yaml"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def main(argv: list[str]) -> int:
    files = [pathlib.Path(a) for a in argv] or project_yaml_files()
    problems = [problem for path in files for problem in check_file(path)]
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"yaml traps: {len(problems)} problem(s) in {len(files)} file(s)", file=sys.stderr)
        return 1
    print(f"yaml traps: none in {len(files)} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
