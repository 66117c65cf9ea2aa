"""scripts/test.sh's wait_images: the unit stage waits for the Debian 12 base image its container tests boot, the
Molecule stage for both images, and a failed build fails every later wait (issue 36: the unit stage did not wait, and
a wait emptied the list, so a second one passed over a failed build).

The function is taken from scripts/test.sh itself (the text between `image_pids=()` and its closing brace) and run by
bash against build results written as setup's background builds write them (LOGS/image-SUITE.rc and .log).
"""

from __future__ import annotations

import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _wait_images_source() -> str:
    text = (ROOT / "scripts" / "test.sh").read_text()
    match = re.search(r"^image_pids=\(\)\n.*?^}\n", text, re.S | re.M)
    assert match, "wait_images not found in scripts/test.sh"
    return match.group(0)


def test_unit_waits_for_bookworm_only_and_a_failed_build_fails_every_later_wait(tmp_path):
    script = f"""set -uo pipefail
logs={tmp_path}
{_wait_images_source()}
echo "bookworm log" >"$logs/image-bookworm.log"; echo 0 >"$logs/image-bookworm.rc"
echo "trixie log: E: debootstrap failed" >"$logs/image-trixie.log"
# trixie's build ends only once the unit stage's wait has been checked (a fixed `sleep 1` could end first on a
# busy machine: helper audit, 2026-12-07).
( while [ ! -e "$logs/unit-waited" ]; do sleep 0.05; done; echo 1 >"$logs/image-trixie.rc" ) &
image_pids=("$$:bookworm" "$!:trixie")
wait_images bookworm; echo "unit rc=$?"
[ -s "$logs/image-trixie.rc" ] && echo "trixie ended before" || echo "trixie still building"
touch "$logs/unit-waited"
wait_images; echo "molecule rc=$?"
wait_images; echo "again rc=$?"
wait_images bookworm; echo "bookworm again rc=$?"
"""
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False, timeout=60)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines[:3] == ["=== [setup] base image bookworm: ready", "unit rc=0", "trixie still building"], lines
    assert lines[3].startswith("=== [setup] base image trixie: FAILED (exit 1; log: "), lines
    assert lines[4:] == ["    trixie log: E: debootstrap failed", "molecule rc=1", "again rc=1", "bookworm again rc=0"], lines
