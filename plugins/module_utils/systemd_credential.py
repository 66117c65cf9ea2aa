# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Store a secret as a systemd credential: encrypted with `systemd-creds` where the host has it, else a
root-only file; the unit reads it with LoadCredentialEncrypted= / LoadCredential=.

Why credentials: a secret given to a service through Environment=/EnvironmentFile= and `${VAR}` in
ExecStart= ends up in the process's argv, which every local user reads in /proc/<pid>/cmdline
(issue 17). A credential is a file only the service's own user can read, in its private
$CREDENTIALS_DIRECTORY (a ramfs systemd mounts for the unit, gone when it stops).

Facts (systemd.exec(5), systemd-creds(1)): LoadCredential= since systemd 247, LoadCredentialEncrypted=
and systemd-creds since 250. `systemd-creds encrypt` uses the host key /var/lib/systemd/credential.secret
(root 0400, created on first use) and a TPM2 where present; the ciphertext is different on every call,
so "unchanged" is decided by decrypting the stored file and comparing, never by comparing ciphertexts.
"""

from __future__ import annotations

import os
import re
import tempfile

from ansible_collections.gpufleet.llm_server.plugins.module_utils.restart_marker import maybe_mark

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
MIN_PLAIN = 247
MIN_ENCRYPTED = 250


def systemd_version(text):
    """The major version from `systemctl --version` output ('systemd 252 (252.39-1~deb12u2)' -> 252)."""
    match = re.match(r"\s*systemd\s+(\d+)", text or "")
    return int(match.group(1)) if match else None


def choose_format(encrypt, version, have_creds):
    """('encrypted'|'plain', None) or (None, error) for ENCRYPT (auto|always|never) on this host."""
    if version is None:
        return None, "cannot tell the systemd version (systemctl --version)"
    if version < MIN_PLAIN:
        return None, ("systemd %d has no LoadCredential= (needs %d or newer); the secret cannot be kept out of the "
                      "service's argv and environment on this host" % (version, MIN_PLAIN))
    can_encrypt = version >= MIN_ENCRYPTED and have_creds
    if encrypt == "always" and not can_encrypt:
        return None, ("encrypt=always, but this host has systemd %d%s (encrypted credentials need %d and systemd-creds)"
                      % (version, "" if have_creds else " without systemd-creds", MIN_ENCRYPTED))
    if encrypt == "never" or not can_encrypt:
        return "plain", None
    return "encrypted", None


def paths(directory, name):
    return {"plain": os.path.join(directory, name), "encrypted": os.path.join(directory, name + ".cred")}


def run_systemd_credential(module, params):
    """The systemd_credential module's work, given an AnsibleModule."""
    name, directory, state = params["name"], params["directory"], params["state"]
    if not NAME_RE.match(name):
        module.fail_json(msg="systemd_credential: name=%r must be letters, digits, '.', '_' or '-' (a systemd "
                             "credential name, also the file name under $CREDENTIALS_DIRECTORY)" % name)
    files = paths(directory, name)
    result = {"changed": False, "name": name, "restart_marked": False}

    def mark(reason):
        result["restart_marked"] = maybe_mark(module, params["restart_marker"], params["restart_source"],
                                              params["restart_reason"] or reason) or result["restart_marked"]

    if state == "absent":
        present = [p for p in files.values() if os.path.lexists(p)]
        if present:
            result["changed"] = True
            mark("credential %s removed" % name)
            if not module.check_mode:
                for path in present:
                    os.unlink(path)
        result.update(path=None, format=None, directive=None)
        return result

    value = params["value"]
    if value is None:
        module.fail_json(msg="systemd_credential: state=present needs value (name=%s)" % name)
    rc, out, err = module.run_command(["systemctl", "--version"])
    version = systemd_version(out) if rc == 0 else None
    creds = module.get_bin_path("systemd-creds")
    fmt, error = choose_format(params["encrypt"], version, bool(creds))
    if error:
        module.fail_json(msg="systemd_credential %s: %s. Nothing was written. Fix: %s" % (
            name, error, "set encrypt=never" if params["encrypt"] == "always" and fmt is None and version
            and version >= MIN_PLAIN else "upgrade systemd on this host"), systemd_version=version)
    path, other = files[fmt], files["encrypted" if fmt == "plain" else "plain"]
    result.update(path=path, format=fmt, systemd_version=version,
                  directive=("LoadCredentialEncrypted" if fmt == "encrypted" else "LoadCredential"))

    current_ok = False
    if os.path.isfile(path):
        if fmt == "plain":
            with open(path, "rb") as handle:
                current_ok = handle.read() == value.encode("utf-8")
        else:
            rc, out, _err = module.run_command([creds, "decrypt", "--name=" + name, path, "-"], encoding=None)
            current_ok = rc == 0 and out == value.encode("utf-8")
        st = os.stat(path)
        current_ok = current_ok and st.st_uid == os.geteuid() and (st.st_mode & 0o077) == 0
    stale = os.path.lexists(other)
    if current_ok and not stale:
        return result

    result["changed"] = True
    mark("credential %s changed" % name)
    if module.check_mode:
        return result
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700)
    os.chmod(directory, 0o700)
    if not current_ok:
        fd, tmp = tempfile.mkstemp(prefix=".%s." % name, dir=directory)
        try:
            os.fchmod(fd, 0o600)
            if fmt == "plain":
                with os.fdopen(fd, "wb") as handle:
                    handle.write(value.encode("utf-8"))
                    handle.flush()
                    os.fsync(handle.fileno())
            else:
                os.close(fd)
                # The secret goes to systemd-creds on stdin: never on a command line.
                rc, _out, err = module.run_command([creds, "encrypt", "--name=" + name, "-", tmp],
                                                   data=value, binary_data=True)
                if rc != 0:
                    module.fail_json(msg="systemd_credential %s: systemd-creds encrypt failed (rc=%d): %s. Nothing was "
                                         "changed. Fix the host key (/var/lib/systemd/credential.secret) or set "
                                         "encrypt=never." % (name, rc, (err or "").strip()), changed=False)
                os.chmod(tmp, 0o600)
            os.chown(tmp, os.geteuid(), os.getegid())
            os.rename(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    if stale:
        os.unlink(other)
    return result


def run_systemd_credentials(module, params):
    """Several credentials in one module run (O(credentials)): each as run_systemd_credential stores it.

    Every name and every state=present value is checked before the first write; the results are keyed by name."""
    wanted = []
    problems = []
    for entry in params["credentials"]:
        one = {key: params.get(key) for key in ("directory", "encrypt", "restart_marker", "restart_source")}
        one.update(name=entry["name"], value=entry.get("value"), state=entry.get("state") or "present",
                   restart_reason=entry.get("restart_reason"))
        if not NAME_RE.match(one["name"] or ""):
            problems.append("name=%r must be letters, digits, '.', '_' or '-'" % one["name"])
        elif one["state"] == "present" and one["value"] is None:
            problems.append("state=present needs value (name=%s)" % one["name"])
        wanted.append(one)
    names = [one["name"] for one in wanted]
    if len(set(names)) != len(names):
        problems.append("credentials[].name must be unique (got %s)" % ", ".join(names))
    if problems:
        module.fail_json(msg="systemd_credential: %s. Nothing was written." % "; ".join(problems), changed=False)
    results = {}
    for one in wanted:
        results[one["name"]] = run_systemd_credential(module, one)
    return {"changed": any(r["changed"] for r in results.values()), "credentials": results,
            "restart_marked": any(r["restart_marked"] for r in results.values()),
            # One file per credential: the one in use, or where the plain one would be (absent).
            "resources": [r["path"] or os.path.join(params["directory"], r["name"]) for r in results.values()]}
