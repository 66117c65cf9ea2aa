"""nvidia_driver: the repository signing key and fingerprint follow the repository's distribution.

NVIDIA signs its debian13 repository with its own key (8793F200.pub) and the Ubuntu and debian12 repositories
with the cudatools key (3bf863cc.pub). A Debian 13 host given the 3bf863cc URL gets a 404, so the defaults
must pick the key per repository. Real ansible-playbook on localhost templating the role's own defaults and
vars; nothing is downloaded (tests talk only to loopback).

The second part runs the role's repository tasks (check mode) against keyrings of throw-away keys and a loopback
key server: the key is downloaded only when the installed keyring needs it.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest
from support.ansible_harness import run_playbook
from support.requires import requires

ROOT = pathlib.Path(__file__).resolve().parents[3]
QUIET = {"ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"}
ROLE = ROOT / "roles" / "nvidia_driver"

CUDATOOLS = ("3bf863cc.pub", "EB693B3035CD5710E231E123A4B469963BF863CC")
KITMAKER_TRIXIE = ("8793F200.pub", "02182E60104FCDC26EAE1B8597A5D4CB8793F200")


def _render(tmp_path: pathlib.Path, extra_vars: dict) -> dict:
    play = f"""
- hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - {ROLE}/defaults/main.yml
    - {ROLE}/vars/main.yml
  tasks:
    - name: Show the key the role would download and accept
      ansible.builtin.debug:
        msg:
          url: "{{{{ nvidia_driver_repo_key_url }}}}"
          fingerprints: "{{{{ nvidia_driver_repo_key_fingerprints }}}}"
"""
    result = run_playbook(tmp_path, play, args=("-e", json.dumps(extra_vars)), env=QUIET)
    assert result.rc == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result.host_results("localhost")[0]["msg"]


@pytest.mark.parametrize(("distro", "key"), [
    ("debian13", KITMAKER_TRIXIE),
    ("debian12", CUDATOOLS),
    ("ubuntu2404", CUDATOOLS),
    ("ubuntu2204", CUDATOOLS),
])
def test_signing_key_follows_the_repository(tmp_path, distro, key):
    shown = _render(tmp_path, {"nvidia_driver_repo_distro": distro, "nvidia_driver_repo_arch": "x86_64"})
    key_file, fingerprint = key
    assert shown["url"] == f"https://developer.download.nvidia.com/compute/cuda/repos/{distro}/x86_64/{key_file}"
    assert shown["fingerprints"] == [fingerprint]


def test_inventory_key_overrides_stay_in_force(tmp_path):
    shown = _render(tmp_path, {"nvidia_driver_repo_distro": "debian13",
                               "nvidia_driver_repo_key_url": "http://127.0.0.1:30090/key.asc",
                               "nvidia_driver_repo_key_fingerprints": ["AB" * 20]})
    assert shown == {"url": "http://127.0.0.1:30090/key.asc", "fingerprints": ["AB" * 20]}


# -- When the key is downloaded again (repository.yml, README "Repository key") -----------------------------------
#
# Real gpg and the role's real repository.yml, in check mode on this machine (nothing is written: the keyring,
# sources and pin paths are in tmp_path, apt's cache update does nothing in check mode). The keys are throw-away
# keys generated here with gpg (never a real NVIDIA key); the "published" key is served on loopback, and the
# server's log of GETs, not the role's output, says whether a download happened.
GPG = shutil.which("gpg")
needs_gpg = requires(GPG is None or os.geteuid() != 0, "gpg and root (the keyring must be root:root, as the role requires)")


def _gpg(home, *args):
    return subprocess.run([GPG, "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", "--passphrase", "",
                           *args], capture_output=True, check=True).stdout


def _throwaway_key(home, uid, expire, faked_time=None):
    """(fingerprint, ASCII-armored public key) of a new ed25519 key that expires as `expire` says (gpg's syntax)."""
    fake = ["--faked-system-time", faked_time] if faked_time else []
    _gpg(home, *fake, "--quick-gen-key", uid, "ed25519", "sign", expire)
    listing = _gpg(home, "--with-colons", "--list-keys", uid).decode()
    fingerprint = [line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:")][0]
    return fingerprint, _gpg(home, "--armor", "--export", uid)


@pytest.fixture(scope="module")
def throwaway_keys(tmp_path_factory):
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    return {
        "lasting": _throwaway_key(home, "Lasting <lasting@example.invalid>", "2y"),
        "expiring": _throwaway_key(home, "Expiring <expiring@example.invalid>", "5d"),
        "expired": _throwaway_key(home, "Expired <expired@example.invalid>", "2d", faked_time="20200101T000000!"),
        "forever": _throwaway_key(home, "Forever <forever@example.invalid>", "never"),
    }


@contextlib.contextmanager
def _key_server(keys):
    """Serves keys {path: bytes} on a free loopback port; yields (base URL, list of the paths GET asked for)."""
    asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            asked.append(self.path)
            body = keys.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.server_address[1], asked
    finally:
        server.shutdown()
        server.server_close()


def _run_repository_tasks(tmp_path, cases, served):
    """Check-mode run of tasks_from: repository for one inventory host per case; -> (rc, {host: {task: result}}, GETs).

    cases: {host: {"keyring": bytes | None, "mode": int, "serve": key name, "vars": {...}}}.
    """
    inventory = {"all": {"hosts": {}}}
    with _key_server({"/%s.asc" % host: served[case["serve"]][1] for host, case in cases.items()}) as (url, asked):
        for host, case in cases.items():
            keyring = tmp_path / ("%s.asc" % host)
            if case.get("keyring") is not None:
                keyring.write_bytes(case["keyring"])
                keyring.chmod(case.get("mode", 0o644))
            inventory["all"]["hosts"][host] = dict({
                "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "nvidia_driver_repo_url": url + "/repo/",
                "nvidia_driver_repo_key_url": "%s/%s.asc" % (url, host),
                "nvidia_driver_repo_keyring": str(keyring),
                "nvidia_driver_repo_sources_file": str(tmp_path / ("%s.sources" % host)),
                "nvidia_driver_repo_pin_file": str(tmp_path / ("%s.pref" % host)),
                "nvidia_driver_distribution": "debian12",
            }, **case.get("vars", {}))
        proc = run_playbook(tmp_path, """
- hosts: all
  gather_facts: false
  tasks:
    - name: The role's repository tasks
      ansible.builtin.include_role:
        name: gpufleet.llm_server.nvidia_driver
        tasks_from: repository
""", inventory=inventory, connection=None, check=True, env=dict(QUIET, ANSIBLE_FORKS="10"))
    if not proc.output:
        pytest.fail(proc.stdout[-3000:] + proc.stderr[-3000:])
    results = {}
    for task_name, host, result in proc.tasks:
        results.setdefault(host, {})[task_name.split(" : ", 1)[-1]] = result
    return proc.rc, results, asked, proc.stdout + proc.stderr


DOWNLOAD = "Download the repository signing key (read-only GET, also in check mode)"
INSTALL = "Install the repository keyring"
DECIDE = "Decide whether the repository key must be downloaded"


@needs_gpg
def test_the_key_is_downloaded_only_when_the_installed_keyring_needs_it(tmp_path, throwaway_keys):
    lasting_fpr, lasting = throwaway_keys["lasting"]
    accept = {"nvidia_driver_repo_key_fingerprints": [lasting_fpr]}
    cases = {
        # keep: an accepted, lasting key (lower-case, spaced fingerprint in the inventory is the same key)
        "kept": {"keyring": lasting, "serve": "lasting", "vars": accept},
        "kept-spaced": {"keyring": lasting, "serve": "lasting",
                        "vars": {"nvidia_driver_repo_key_fingerprints": [" ".join(lasting_fpr.lower()[i:i + 4]
                                                                                  for i in range(0, 40, 4))]}},
        "kept-never-expires": {"keyring": throwaway_keys["forever"][1], "serve": "forever",
                               "vars": {"nvidia_driver_repo_key_fingerprints": [throwaway_keys["forever"][0]]}},
        "kept-margin-0": {"keyring": throwaway_keys["expiring"][1], "serve": "expiring",
                          "vars": {"nvidia_driver_repo_key_fingerprints": [throwaway_keys["expiring"][0]],
                                   "nvidia_driver_repo_key_min_validity_days": 0}},
        # download
        "missing": {"keyring": None, "serve": "lasting", "vars": accept},
        "garbage": {"keyring": b"not a key\n", "serve": "lasting", "vars": accept},
        "mode-600": {"keyring": lasting, "mode": 0o600, "serve": "lasting", "vars": accept},
        "other-fingerprint": {"keyring": throwaway_keys["forever"][1], "serve": "lasting", "vars": accept},
        "expiring": {"keyring": throwaway_keys["expiring"][1], "serve": "lasting",
                     "vars": {"nvidia_driver_repo_key_fingerprints": [throwaway_keys["expiring"][0], lasting_fpr]}},
        "expired": {"keyring": throwaway_keys["expired"][1], "serve": "lasting",
                    "vars": {"nvidia_driver_repo_key_fingerprints": [throwaway_keys["expired"][0], lasting_fpr]}},
        # a download is checked as before: the published key has none of the accepted fingerprints
        "refused": {"keyring": throwaway_keys["expiring"][1], "serve": "forever",
                    "vars": {"nvidia_driver_repo_key_fingerprints": [throwaway_keys["expiring"][0]]}},
    }
    rc, results, asked, output = _run_repository_tasks(tmp_path, cases, throwaway_keys)
    downloaded = {path.strip("/").removesuffix(".asc") for path in asked}
    assert downloaded == {"missing", "garbage", "mode-600", "other-fingerprint", "expiring", "expired", "refused"}, output
    for host in ("kept", "kept-spaced", "kept-never-expires", "kept-margin-0"):
        assert results[host][DECIDE]["ansible_facts"]["__nvidia_driver_key_download_reason"] == "", (host, output)
        assert DOWNLOAD not in results[host] and INSTALL not in results[host], (host, output)
    reasons = {host: results[host][DECIDE]["ansible_facts"]["__nvidia_driver_key_download_reason"] for host in cases}
    assert "is missing or not an OpenPGP keyring" in reasons["missing"]
    assert "is missing or not an OpenPGP keyring" in reasons["garbage"]
    assert "mode 644, owned by root:root" in reasons["mode-600"] and ":600:root:root" in reasons["mode-600"]
    assert "has no key with a fingerprint in nvidia_driver_repo_key_fingerprints" in reasons["other-fingerprint"]
    assert "is expiring (expiry 20" in reasons["expiring"] and "min_validity_days is 30" in reasons["expiring"]
    assert "is expired (expiry 2020-01-0" in reasons["expired"]
    for host in ("missing", "garbage", "mode-600", "other-fingerprint", "expiring", "expired"):
        # check mode: the new key would be written (the copy reports changed, writes nothing)
        assert results[host][INSTALL]["changed"] is True, (host, output)
    assert (tmp_path / "expiring.asc").read_bytes() == throwaway_keys["expiring"][1]
    assert not (tmp_path / "missing.asc").exists()
    refusal = results["refused"]["Refuse a key with an unexpected fingerprint"]
    assert refusal.get("failed") and "none of nvidia_driver_repo_key_fingerprints" in refusal["msg"]
    assert "Nothing was written" in refusal["msg"] and INSTALL not in results["refused"]
    assert rc != 0  # the refused host failed the run; every other host is checked above
