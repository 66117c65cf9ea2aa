"""The repository keyring and duplicate-source reads of nvidia_driver_state (repository.yml's shell + awk and find,
moved into module_utils for issue 20).

Where the data comes from: data/gpg/keyring.asc holds three ed25519 keys generated for this test with GnuPG 2.2.40
(Debian 12) on 2026-12-02: one that never expires, one expiring 2027-01-15, one revoked with its own revocation
certificate. data/gpg/show-keys.txt is what `gpg --homedir EMPTY --batch --show-keys --with-colons -- keyring.asc`
printed for it; data/gpg/lasting.asc is the first key alone. The tests run the real gpg again on the recorded
keyring (the recording must still be what gpg says) and the role's previous awk parser on the recorded output (the
Python port must decide as it did). No test double: real gpg, real awk, real files under tmp_path.
"""

import getpass
import grp
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import nvidia_driver_rules as rules
from ansible_collections.gpufleet.llm_server.plugins.module_utils.nvidia_driver_state import (
    HostIO, _duplicate_sources, _keyring_reason)

DATA = pathlib.Path(__file__).parent / "data" / "gpg"
SHOW_KEYS = (DATA / "show-keys.txt").read_text()
LASTING = "414F9802DD275E4A371BDF4E0E51A2BE7BB4C806"
EXPIRING = "14D388CD993BA613A1EC24806F1E990607F92039"
REVOKED = "6005C8F41852ED1E7D76B760D9E6450EA4E2871E"
EXPIRY = 1800014400  # the expiring key's expiry (2027-01-15), as recorded
CREATED = 1796179943  # 2026-12-02, when the keys were made
KEYRING = "/etc/apt/keyrings/gpufleet-nvidia-cuda.asc"

# repository.yml's awk parser before issue 20 (commit c28b0e5), verbatim but for the shell variables.
OLD_AWK = r'''
  $1 == "pub" { validity = $2; expires = $7; pub = 1; next }
  $1 == "fpr" && pub {
    state = "lasting"
    if (validity == "r") state = "revoked"
    else if (validity == "e" || (expires != "" && expires + 0 <= now)) state = "expired"
    else if (expires != "" && expires + 0 <= until) state = "expiring"
    print "key:" $10 ":" state ":" expires
  }
  { pub = 0 }'''


def old_awk(text, now, days):
    awk = shutil.which("awk")
    assert awk, "awk is needed to compare with the role's previous parser"
    out = subprocess.run([awk, "-F:", "-v", "now=%d" % now, "-v", "until=%d" % (now + days * 86400), OLD_AWK],
                         input=text, capture_output=True, text=True, check=True).stdout
    return [dict(zip(("fingerprint", "state", "expires"), line.split(":")[1:])) for line in out.splitlines()]


def real_run(argv):
    binary = shutil.which(argv[0])
    if binary is None:
        return None
    done = subprocess.run([binary] + argv[1:], capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"), check=False)
    return done.returncode, done.stdout, done.stderr


def test_the_recording_is_what_gpg_prints(tmp_path):
    assert shutil.which("gpg"), "gpg is needed: it is what the module runs"
    rc, out, _err = real_run(["gpg", "--homedir", str(tmp_path), "--batch", "--show-keys", "--with-colons", "--",
                              str(DATA / "keyring.asc")])
    assert rc == 0 and out == SHOW_KEYS


@pytest.mark.parametrize("now, days", [(CREATED, 30), (EXPIRY - 10 * 86400, 30), (EXPIRY - 10 * 86400, 5),
                                       (EXPIRY, 30), (EXPIRY + 1, 0)])
def test_parser_decides_as_the_old_awk(now, days):
    keys = rules.parse_gpg_colons(SHOW_KEYS, now, days)
    assert keys == old_awk(SHOW_KEYS, now, days)
    assert [key["fingerprint"] for key in keys] == [LASTING, EXPIRING, REVOKED]


def test_states():
    assert [key["state"] for key in rules.parse_gpg_colons(SHOW_KEYS, CREATED, 30)] == ["lasting", "lasting", "revoked"]
    assert [key["state"] for key in rules.parse_gpg_colons(SHOW_KEYS, EXPIRY - 86400, 30)] == ["lasting", "expiring",
                                                                                               "revoked"]
    assert [key["state"] for key in rules.parse_gpg_colons(SHOW_KEYS, EXPIRY, 30)] == ["lasting", "expired", "revoked"]


def reason(keys, fingerprints, gpg=True, rc=0, description="regular file:644:root:root", days=30):
    return rules.keyring_download_reason(KEYRING, gpg, rc, description, keys, fingerprints, days)


def test_download_reasons_in_the_roles_words():
    at_expiry_soon = rules.parse_gpg_colons(SHOW_KEYS, EXPIRY - 86400, 30)
    assert reason(at_expiry_soon, [LASTING]) == ""
    # spaces and lower case in nvidia_driver_repo_key_fingerprints do not matter
    assert reason(at_expiry_soon, [" ".join(LASTING[i:i + 4] for i in range(0, 40, 4)).lower()]) == ""
    assert reason(at_expiry_soon, [EXPIRING]) == (
        KEYRING + ": key " + EXPIRING + " is expiring (expiry 2027-01-15), nvidia_driver_repo_key_min_validity_days is 30")
    assert reason(at_expiry_soon, [REVOKED]) == (
        KEYRING + ": key " + REVOKED + " is revoked, nvidia_driver_repo_key_min_validity_days is 30")
    assert reason(at_expiry_soon, ["0" * 40]) == (
        KEYRING + " has no key with a fingerprint in nvidia_driver_repo_key_fingerprints")
    assert reason([], [LASTING], gpg=False) == "gpg is not installed (it reads the keyring and checks a downloaded key)"
    assert reason([], [LASTING], rc=2) == KEYRING + " is missing or not an OpenPGP keyring gpg can read"
    assert reason(at_expiry_soon, [LASTING], description="regular file:600:root:root") == (
        KEYRING + " is a regular file:600:root:root, not a regular file, mode 644, owned by root:root")


def host(tmp_path, content, mode=0o644):
    (tmp_path / "etc/apt/keyrings").mkdir(parents=True)
    (tmp_path / "etc/apt/sources.list.d").mkdir(parents=True)
    if content is not None:
        (tmp_path / KEYRING.lstrip("/")).write_bytes(content)
        (tmp_path / KEYRING.lstrip("/")).chmod(mode)
    return HostIO(real_run, root=str(tmp_path))


def params(fingerprints, days=30):
    return {"keyring": KEYRING, "repo_key_fingerprints": fingerprints, "repo_key_min_validity_days": days,
            "repo_url": "http://127.0.0.1:33000/", "repo_sources_file": "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources"}


def owner():
    return "%s:%s" % (getpass.getuser(), grp.getgrgid(os.getgid()).gr_name)


def test_real_gpg_on_a_real_keyring_file(tmp_path):
    io = host(tmp_path, (DATA / "lasting.asc").read_bytes())
    found = _keyring_reason(io, params([LASTING]))
    if owner() == "root:root":
        assert found == ""
    else:
        assert found == KEYRING + " is a regular file:644:%s, not a regular file, mode 644, owned by root:root" % owner()
    # the lasting key alone does not carry the expiring one
    assert "has no key with a fingerprint" in _keyring_reason(io, params([EXPIRING])) or owner() != "root:root"


def test_missing_empty_and_garbage_keyrings(tmp_path):
    assert _keyring_reason(host(tmp_path / "a", None), params([LASTING])) == (
        KEYRING + " is missing or not an OpenPGP keyring gpg can read")
    assert _keyring_reason(host(tmp_path / "b", b"not a key\n"), params([LASTING])) == (
        KEYRING + " is missing or not an OpenPGP keyring gpg can read")


def test_a_keyring_with_another_mode(tmp_path):
    found = _keyring_reason(host(tmp_path, (DATA / "keyring.asc").read_bytes(), mode=0o600), params([LASTING]))
    assert found == KEYRING + " is a regular file:600:%s, not a regular file, mode 644, owned by root:root" % owner()


def test_expiry_is_read_against_the_clock(tmp_path):
    found = _keyring_reason(host(tmp_path, (DATA / "keyring.asc").read_bytes()), params([EXPIRING], days=3650))
    if owner() == "root:root":
        assert found == (KEYRING + ": key " + EXPIRING + " is %s (expiry 2027-01-15), "
                         "nvidia_driver_repo_key_min_validity_days is 3650") % (
                             "expired" if time.time() >= EXPIRY else "expiring")


def test_duplicate_sources(tmp_path):
    io = host(tmp_path, None)
    sources = tmp_path / "etc/apt/sources.list.d"
    (sources / "gpufleet-nvidia-cuda.sources").write_text("URIs: http://127.0.0.1:33000/\n")
    (sources / "cuda-ubuntu2404-x86_64.list").write_text("deb [signed-by=/x.gpg] http://127.0.0.1:33000/ /\n")
    (sources / "other.sources").write_text("URIs: http://deb.debian.org/debian\n")
    (sources / "notes.txt").write_text("http://127.0.0.1:33000/\n")
    (sources / ".hidden.list").write_text("deb http://127.0.0.1:33000/ /\n")
    (sources / "dir.list").mkdir()
    found = _duplicate_sources(io, params([]))
    assert found == ["/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list"]
    assert rules.duplicate_source_message(found, "http://127.0.0.1:33000/", "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources") == (
        "/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list already point(s) apt at http://127.0.0.1:33000/ (e.g. from "
        "NVIDIA's cuda-keyring package); apt refuses two sources for one repository with different Signed-By keyrings. "
        "Remove that file (and the cuda-keyring package), then run again: this role manages "
        "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources.")
