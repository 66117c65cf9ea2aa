"""Find YAML lines that stand again elsewhere: the YAML half of the duplicate report.

The `duplicates` tool reads source files only; roles, Molecule scenarios and playbooks are YAML.
This scan normalises every tracked *.yml / *.yaml file (indentation folded, blank lines and
comments dropped), slides a window of --lines lines over it and reports each window that stands
in two or more places, merged into runs. Prints the totals first (the figures issue 19 compares
before and after a clean-up), then the longest runs.

    python3 scripts/yaml_window_scan.py [--lines 6] [--most 20] [--repo DIR]
"""
from __future__ import annotations

import argparse
import collections
import subprocess
import sys
from pathlib import Path

# Lines too thin to make two windows alike on their own (YAML punctuation, document markers).
THIN_LINES = {"---", "...", "-", "[]", "{}"}


def tracked_yaml_files(repo: Path) -> list[Path]:
    listing = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "--cached", "--others", "--exclude-standard", "*.yml", "*.yaml"],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    return [repo / name for name in sorted(set(listing)) if (repo / name).is_file()]


def normalised_lines(path: Path) -> list[tuple[int, str]]:
    kept = []
    for number, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        line = " ".join(raw.split())
        if not line or line.startswith("#") or line in THIN_LINES:
            continue
        kept.append((number, line))
    return kept


def scan(repo: Path, window: int) -> tuple[dict, dict]:
    places = collections.defaultdict(list)
    lines_of = {}
    for path in tracked_yaml_files(repo):
        lines = normalised_lines(path)
        relative = str(path.relative_to(repo))
        lines_of[relative] = lines
        for start in range(len(lines) - window + 1):
            key = tuple(text for _number, text in lines[start:start + window])
            places[key].append((relative, start))
    repeated = {key: where for key, where in places.items() if len(where) > 1}
    return repeated, lines_of


def runs(repeated: dict, lines_of: dict, window: int) -> list[tuple[int, str, str]]:
    """Merge overlapping repeated windows of one pair of places into runs: (lines, place A, place B)."""
    starts_by_pair = collections.defaultdict(set)
    for where in repeated.values():
        first = where[0]
        for other in where[1:]:
            starts_by_pair[(first[0], other[0], other[1] - first[1])].add(first[1])
    merged = []
    for (file_a, file_b, offset), starts in starts_by_pair.items():
        ordered = sorted(starts)
        run_start = previous = ordered[0]
        for start in ordered[1:] + [None]:
            if start is not None and start == previous + 1:
                previous = start
                continue
            length = previous - run_start + window
            a_lines, b_lines = lines_of[file_a], lines_of[file_b]
            a = f"{file_a}:{a_lines[run_start][0]}-{a_lines[run_start + length - 1][0]}"
            b_first = run_start + offset
            b = f"{file_b}:{b_lines[b_first][0]}-{b_lines[b_first + length - 1][0]}"
            merged.append((length, a, b))
            if start is not None:
                run_start = previous = start
    return sorted(merged, key=lambda row: (-row[0], row[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=6, help="window size in normalised lines (default 6)")
    parser.add_argument("--most", type=int, default=20, help="how many runs to list (default 20)")
    parser.add_argument("--repo", type=Path, default=Path("."), help="checkout to scan (default .)")
    options = parser.parse_args(argv)
    repeated, lines_of = scan(options.repo.resolve(), options.lines)
    covered = {(name, start + offset) for where in repeated.values() for name, start in where
               for offset in range(options.lines)}
    total_lines = sum(len(lines) for lines in lines_of.values())
    merged = runs(repeated, lines_of, options.lines)
    print(f"{len(lines_of)} YAML files, {total_lines} normalised lines; "
          f"{len(repeated)} distinct {options.lines}-line windows stand in 2+ places "
          f"({sum(len(where) for where in repeated.values())} places), "
          f"{len(covered)} lines ({100 * len(covered) / max(total_lines, 1):.1f}%) inside a repeated window; "
          f"{len(merged)} runs")
    for length, a, b in merged[:options.most]:
        print(f"{length:4d}  {a} ~ {b}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
