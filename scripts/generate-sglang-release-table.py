# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Generate plugins/module_utils/sglang_release_table.py from real SGLang releases on PyPI.

Preflight must judge a profile against the SGLang that will run BEFORE anything is built (site.yml
runs preflight first, when a fresh host has no SGLang tree). So the collection carries, per release,
what plugins/module_utils/sglang_flags.py reads from that release's own source: every launch_server
flag (names, switch or value, nargs, type, choices, deprecated, repeatable), the minimum compute
capability of each --quantization method, and the attention backends hybrid GDN models accept on
Blackwell.

    .venv/bin/python scripts/generate-sglang-release-table.py                # refresh the releases in the table
    .venv/bin/python scripts/generate-sglang-release-table.py --add 0.5.24   # add a new release
    .venv/bin/python scripts/generate-sglang-release-table.py 0.5.4 0.5.23   # exactly these releases

Each release is downloaded once with `pip download --no-deps` (sdist up to 0.5.10.post1, the cp3X
wheel from 0.5.11: both hold the plain .py sources read here) through tests/support/pypi.py, cached
in $GPUFLEET_CACHE. Nothing is imported from SGLang. tests/integration/service/test_release_table_vs_pypi.py
re-reads some releases at test time and compares them with the committed table.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import pprint
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
TABLE = ROOT / "plugins" / "module_utils" / "sglang_release_table.py"
sys.path.insert(0, str(ROOT / "tests"))

from support import pypi  # noqa: E402  (tests/support: the project's PyPI cache)


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


flags_mod = _load("sglang_flags", ROOT / "plugins" / "module_utils" / "sglang_flags.py")

HEADER = '''# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang launch_server flags and release facts per PyPI release. GENERATED: do not edit by hand.

Written by scripts/generate-sglang-release-table.py, which downloads each release in RELEASES from
PyPI and reads it with plugins/module_utils/sglang_flags.py (the same reader preflight uses on an
installed tree). Regenerate after a new SGLang release:

    .venv/bin/python scripts/generate-sglang-release-table.py --add X.Y.Z

Release sets are written as ranges over RELEASES ("0.5.4-0.5.9,0.5.11"). FLAGS rows:
(releases, names, dest, takes_value, nargs, value_type, choices, deprecated, repeatable).
QUANT_MIN_CAPABILITY rows: (releases, --quantization method, minimum compute capability major * 10 + minor).
GDN_BLACKWELL rows: (releases, {"sm100": [...], "sm120": [...], "checks": [...]} or None).
SUCCESSORS rows: (releases, deprecated flag, the flag (=value) its action's new_flag= or its help text's
deprecation note names, as that release defines it).
"""

from __future__ import annotations

'''


def package_dir(extracted):
    found = [p.parent.parent for p in extracted.rglob("srt/server_args.py")
             if p.parent.parent.name == "sglang" and "multimodal_gen" not in str(p)]
    if len(found) != 1:
        raise SystemExit("cannot find the sglang package in %s: %s" % (extracted, found))
    return found[0]


def read_release(version, workdir):
    archive = pypi.download("sglang", version, prefer="wheel")
    dest = pathlib.Path(workdir) / version
    pypi.extract(archive, dest)
    pkg = str(package_dir(dest))
    table = flags_mod.load_flag_table(pkg)
    if table.version != version:
        raise SystemExit("%s: the tree says version %r" % (archive.name, table.version))
    flags = []
    for flag in table.definitions():
        # Choices sorted: their order means nothing to argparse, and a reordering is no new variant.
        flags.append(((flag.names[0], flag.dest),
                      (tuple(flag.names), flag.dest, bool(flag.takes_value), flag.nargs, flag.value_type,
                       tuple(sorted(flag.choices)) if flag.choices is not None else None, bool(flag.deprecated),
                       bool(flag.repeatable))))
    successors = [(flag.names[0], flag.successor) for flag in table.definitions() if flag.successor]
    quant = flags_mod.read_quantization_capabilities(pkg)
    gdn = flags_mod.read_gdn_blackwell_backends(pkg)
    print("%-14s %-12s %4d flags, %2d quantization methods, GDN on Blackwell: %s"
          % (version, table.layout, len(flags), len(quant or {}), gdn), flush=True)
    return {"layout": table.layout, "flags": flags, "quant": quant, "gdn": gdn, "successors": successors}


def ranges(indexes, releases):
    """[0, 1, 2, 5] -> '0.5.4-0.5.4.post2,0.5.5.post2' (over RELEASES order)."""
    out, start, prev = [], None, None
    for i in sorted(indexes):
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            out.append((start, prev))
            start = prev = i
    if start is not None:
        out.append((start, prev))
    return ",".join(releases[a] if a == b else "%s-%s" % (releases[a], releases[b]) for a, b in out)


def grouped(per_release, releases):
    """[(value per release)] -> [(ranges, value)] in first-seen order."""
    order, where = [], {}
    for index, value in enumerate(per_release):
        key = repr(value)
        if key not in where:
            where[key] = (value, [])
            order.append(key)
        where[key][1].append(index)
    return [(ranges(where[k][1], releases), where[k][0]) for k in order]


def build(releases, data):
    order, variants = [], {}
    for index, version in enumerate(releases):
        for key, definition in data[version]["flags"]:
            if key not in variants:
                variants[key] = {}
                order.append(key)
            variants[key].setdefault(repr(definition), (definition, []))[1].append(index)
    flags = []
    for key in order:
        for definition, indexes in variants[key].values():
            flags.append((ranges(indexes, releases),) + definition)
    layouts = grouped([data[v]["layout"] for v in releases], releases)
    methods = []
    for version in releases:
        methods += [m for m in sorted(data[version]["quant"] or {}) if m not in methods]
    quant = []
    for method in methods:
        per_release = [(data[v]["quant"] or {}).get(method) for v in releases]
        quant += [(spec, method, cap) for spec, cap in grouped(per_release, releases) if cap is not None]
    gdn = grouped([data[v]["gdn"] for v in releases], releases)
    successor_order, successor_releases = [], {}
    for index, version in enumerate(releases):
        for pair in data[version]["successors"]:
            if pair not in successor_releases:
                successor_releases[pair] = []
                successor_order.append(pair)
            successor_releases[pair].append(index)
    successors = [(ranges(successor_releases[pair], releases),) + pair for pair in successor_order]
    body = HEADER
    body += _assign("RELEASES", releases, compact=True)
    body += _assign("LAYOUTS", layouts)
    body += _assign("QUANT_MIN_CAPABILITY", quant)
    body += _assign("GDN_BLACKWELL", gdn)
    body += _assign("SUCCESSORS", successors)
    body += _assign("FLAGS", flags)
    return body


def _assign(name, rows, compact=False):
    """NAME = (one row per line, 4-space indent) in a layout pep8 accepts."""
    if compact:
        text = pprint.pformat(tuple(rows), width=106, compact=True)[1:-1]
        return "%s = (\n    %s,\n)\n\n" % (name, text.replace("\n", "\n   ").rstrip(","))
    lines = []
    for row in rows:
        text = pprint.pformat(row, width=106, compact=True, sort_dicts=False)
        lines.append("    " + text.replace("\n", "\n    ") + ",")
    return "%s = (\n%s\n)\n\n" % (name, "\n".join(lines))


def current_releases():
    if not TABLE.exists():
        return []
    return list(_load("sglang_release_table", TABLE).RELEASES)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("releases", nargs="*", help="exactly these releases (default: those in the table)")
    parser.add_argument("--add", action="append", default=[], help="add a release to those in the table")
    parser.add_argument("--output", default=str(TABLE))
    args = parser.parse_args()
    releases = args.releases or current_releases()
    releases = releases + [v for v in args.add if v not in releases]
    if not releases:
        raise SystemExit("name the releases to read (no table yet)")
    releases.sort(key=flags_mod.version_tuple)
    with tempfile.TemporaryDirectory(prefix="sglang-releases-") as workdir:
        data = {version: read_release(version, workdir) for version in releases}
    text = build(releases, data)
    pathlib.Path(args.output).write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    print("wrote %s (%d releases, %d bytes)" % (args.output, len(releases), len(text)))


if __name__ == "__main__":
    main()
