# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Plan and apply one apt transaction (install these, remove those) the way apt itself resolves it.

The plan never changes the host: apt runs in simulation (`apt-get -s`) with a private copy of
/etc/apt/preferences.d, to which the preference files of packages still to be installed first (a
driver pinning package) and preference stanzas the play has not written yet are added. So the
plan answers, before anything changes: is every wanted package offered, what exactly would be
installed and removed, and which driver version would that be.

Standard library only; apt-get, apt-cache, dpkg-query and dpkg-deb are called through `run`
(the module's run_command).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil

DRIVER_VERSION_RE = re.compile(r"^(?:\d+:)?(\d{3})\.(\d+)(?:\.(\d+))?(?:-|$)")
APT_ENV = {"LC_ALL": "C", "LANG": "C", "DEBIAN_FRONTEND": "noninteractive"}
# The system's source cache: apt's parse of every list file, valid until a list changes.
SYSTEM_SRCPKGCACHE = "/var/cache/apt/srcpkgcache.bin"


class AptError(Exception):
    """apt refused or failed; `output` holds what it said."""

    def __init__(self, message, output=""):
        super().__init__(message)
        self.output = output


def upstream(version):
    """'1:595.84-0ubuntu0.24.04.1' -> '595.84' (no epoch, no Debian revision)."""
    version = version.split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def driver_version_key(version):
    """Sort key of an NVIDIA driver version (branch.minor[.patch]), None for any other version."""
    match = DRIVER_VERSION_RE.match(version or "")
    if not match:
        return None
    return tuple(int(part) for part in match.groups(default="0"))


def parse_dpkg_status(text):
    """`dpkg-query -W -f '${db:Status-Abbrev}\\t${Package}\\t${Version}\\n'` -> ({name: version}, {held names}).

    Only packages whose files are installed count (status letter 'i'); the first letter 'h' is a hold.
    """
    installed, held = {}, set()
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or len(parts[0]) < 2:
            continue
        status, name, version = parts
        name = name.split(":", 1)[0]
        if status[1] == "i":
            installed[name] = version
        if status[0] == "h":
            held.add(name)
    return installed, held


def parse_policy(text):
    """`apt-cache policy A B ...` -> {name: {'installed': v|None, 'candidate': v|None, 'versions': [v, ...]}}.

    A name apt does not know at all is absent; a purely virtual one has no candidate and no versions.
    """
    result, current, in_table = {}, None, False
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1].split(":", 1)[0]
            result[current] = {"installed": None, "candidate": None, "versions": []}
            in_table = False
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped.startswith("Installed:"):
            value = stripped.split(":", 1)[1].strip()
            result[current]["installed"] = None if value == "(none)" else value
        elif stripped.startswith("Candidate:"):
            value = stripped.split(":", 1)[1].strip()
            result[current]["candidate"] = None if value == "(none)" else value
        elif stripped.startswith("Version table:"):
            in_table = True
        elif in_table:
            match = re.match(r"^ (?:\*\*\*|   ) (\S+) (-?\d+)$", line)
            if match:
                result[current]["versions"].append(match.group(1))
    return result


def parse_simulation(text):
    """`apt-get -s install ...` -> list of {'op': 'install'|'remove', 'name', 'version', 'previous'}."""
    ops = []
    for line in text.splitlines():
        match = re.match(r"^Inst (\S+) (?:\[(\S+)\] )?\((\S+) ", line)
        if match:
            ops.append({"op": "install", "name": match.group(1).split(":", 1)[0],
                        "version": match.group(3), "previous": match.group(2)})
            continue
        match = re.match(r"^(?:Remv|Purg) (\S+)(?: \[(\S+)\])?", line)
        if match:
            ops.append({"op": "remove", "name": match.group(1).split(":", 1)[0],
                        "version": match.group(2), "previous": match.group(2)})
    return ops


def parse_depends_closure(text):
    """`apt-cache depends --recurse ...` -> every real package named at the start of a line."""
    names = set()
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("<"):
            names.add(line.strip().split(":", 1)[0])
    return names


def parse_search(text):
    """`apt-cache search --names-only RE` -> sorted package names."""
    return sorted({line.split(" - ", 1)[0].strip() for line in text.splitlines() if " - " in line})


def driver_version(versions, name_re):
    """Highest NVIDIA driver version among {name: version} whose name matches name_re, '' if none."""
    best, best_key = "", None
    for name, version in versions.items():
        if not re.search(name_re, name):
            continue
        key = driver_version_key(version)
        if key is not None and (best_key is None or key > best_key):
            best, best_key = upstream(version), key
    return best


def mixed_stack(stack):
    """{name: version} of one driver stack -> {version: [names]} when it is not one driver version, else {}.

    Packages whose version is no NVIDIA driver version (a pinning package "595-1ubuntu1", Canonical's precompiled
    modules "6.8.0-146.146+2") do not count. The packages of the highest branch must share one upstream version.
    Packages of a lower branch are accepted only as Ubuntu's transitional packages, named for their own branch
    ("nvidia-dkms-590-open" at 590.48.01 depending on the 595 names), all at one Debian version: a real 590 build
    left beside the transitional one (".4" beside ".5", the same upstream 590.48.01) is mixed too.
    """
    keyed = {name: driver_version_key(version) for name, version in stack.items()}
    keyed = {name: key for name, key in keyed.items() if key is not None}
    if not keyed:
        return {}
    top_branch = max(keyed.values())[0]
    top, lower, lower_full, mixed = set(), set(), set(), False
    for name, key in keyed.items():
        version = stack[name]
        if key[0] == top_branch:
            top.add(upstream(version))
        else:
            lower.add(upstream(version))
            lower_full.add(version.split(":", 1)[-1])
            mixed = mixed or not re.search(r"-%d(-|$)" % key[0], name)
    if not (mixed or len(top) > 1 or len(lower_full) > 1):
        return {}
    groups = {}
    for name in sorted(keyed):
        groups.setdefault(stack[name], []).append(name)
    return groups


def describe_mixed(groups):
    """{version: [names]} -> 'a, b at 580.159.03-0ubuntu0.24.04.1; c at 580.173.02-0ubuntu0.24.04.1'."""
    return "; ".join("%s at %s" % (", ".join(names), version)
                     for version, names in sorted(groups.items(), key=lambda item: driver_version_key(item[0])))


def expand_patterns(patterns, names):
    """Names (sorted) matching any fnmatch pattern."""
    return sorted(name for name in names if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns))


class AptTransaction:
    """One planned apt transaction. `plan()` is read-only; `apply()` runs it."""

    def __init__(self, run, workdir, install, install_first=(), remove=(), preferences=None,
                 driver_version_from=r"^(lib)?nvidia-", offered_pattern=r"^(lib)?nvidia-",
                 install_recommends=False, preferences_dir="/etc/apt/preferences.d", no_upgrade=False,
                 dpkg_status="/var/lib/dpkg/status", system_srcpkgcache=SYSTEM_SRCPKGCACHE):
        self.run = run
        self.workdir = workdir
        self.install = list(install)
        self.install_first = list(install_first)
        self.remove_patterns = list(remove)
        self.preferences = dict(preferences or {})
        self.driver_version_from = driver_version_from
        self.offered_pattern = offered_pattern
        self.install_recommends = install_recommends
        self.preferences_dir = preferences_dir
        self.no_upgrade = no_upgrade
        self.dpkg_status = dpkg_status
        self.prefs = os.path.join(workdir, "preferences.d")
        self.system_srcpkgcache = system_srcpkgcache
        self.commands = []
        self.main_ops = []

    def _read_only_options(self):
        """A plan must not write apt's binary caches or lists: its caches live in the work directory.

        Not `Dir::Cache::pkgcache=` (no cache at all): then every apt call parses every list file again, about
        0.45 s each against Debian's 82 MB of lists (measured 2026-12-06 in a Debian 12 container, 0.54 s against
        0.11 s with a cache), and a plan makes four to six calls. The private caches are built once per plan,
        from a copy of the system's source cache where there is one (`_seed_caches`).
        """
        return ["-o", "Dir::Cache::pkgcache=%s" % os.path.join(self.workdir, "pkgcache.bin"),
                "-o", "Dir::Cache::srcpkgcache=%s" % os.path.join(self.workdir, "srcpkgcache.bin")]

    def _seed_caches(self):
        """Copy the system's source cache into the work directory: apt checks a cache against the list files and
        dpkg's status before using it and rebuilds what is stale, so a copy is never trusted blindly."""
        if os.path.isfile(self.system_srcpkgcache):
            try:
                shutil.copyfile(self.system_srcpkgcache, os.path.join(self.workdir, "srcpkgcache.bin"))
            except OSError:
                pass  # apt builds it from the lists

    # -- apt calls ---------------------------------------------------------------------------
    def _apt(self, argv, check=True, read_only=True, cwd=None):
        options = (self._read_only_options() + ["-o", "Dir::Etc::PreferencesParts=%s" % self.prefs]) if read_only else []
        command = argv[:1] + options + argv[1:]
        rc, out, err = self.run(command, environ_update=APT_ENV, cwd=cwd)
        if check and rc != 0:
            raise AptError("%s failed (rc %s)" % (" ".join(argv[:2]), rc), (out or "") + (err or ""))
        return rc, out or "", err or ""

    def _installed(self):
        rc, out, err = self.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}\t${Package}\t${Version}\n"],
                                environ_update=APT_ENV, cwd=None)
        if rc != 0:
            raise AptError("dpkg-query failed (rc %s)" % rc, out + err)
        return parse_dpkg_status(out)

    def _policy(self, names):
        if not names:
            return {}
        return parse_policy(self._apt(["apt-cache", "policy"] + sorted(set(names)))[1])

    def _simulate(self, install, remove, no_upgrade=False):
        if not install and not remove:
            return []
        argv = ["apt-get", "-s", "-y", "--allow-downgrades", "--allow-change-held-packages", "--ignore-hold"]
        argv += [] if self.install_recommends else ["--no-install-recommends"]
        argv += ["--no-upgrade"] if no_upgrade else []
        argv += ["install"] + install + ["%s-" % name for name in remove]
        self.commands.append(" ".join(argv))
        rc, out, err = self._apt(argv, check=False)
        if rc != 0:
            raise AptError("apt cannot resolve this transaction", out + err)
        return parse_simulation(out)

    def _closure(self, names):
        if not names:
            return set()
        argv = ["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                "--no-breaks", "--no-replaces", "--no-enhances"] + sorted(set(names))
        return parse_depends_closure(self._apt(argv)[1])

    def _installed_closure(self, names):
        """The closure over the INSTALLED versions' relations (dpkg's status file): what the installed stack
        needs, whatever the repositories now publish (a point release renames nvidia-firmware-<B>-<V>)."""
        # host_state imports this module: imported here, not at the top.
        from ansible_collections.gpufleet.llm_server.plugins.module_utils import host_state as hs

        with open(self.dpkg_status, encoding="utf-8", errors="replace") as handle:
            packages = hs.parse_dpkg_status_file(handle.read())
        # Only the requested packages installed under their own name: another stack that merely Provides a
        # requested name (Canonical's libnvidia-compute-580 provides libnvidia-compute) is not kept by this.
        roots = [name for name in names if (packages.get(name) or {}).get("state") == "installed"]
        return hs.dependency_closure(packages, roots) if roots else set()

    def offered(self):
        return parse_search(self._apt(["apt-cache", "search", "--names-only", self.offered_pattern])[1])

    # -- preferences overlay ----------------------------------------------------------------
    def _prepare_preferences(self):
        if os.path.isdir(self.prefs):
            shutil.rmtree(self.prefs)
        os.makedirs(self.prefs)
        if os.path.isdir(self.preferences_dir):
            for entry in sorted(os.listdir(self.preferences_dir)):
                source = os.path.join(self.preferences_dir, entry)
                if os.path.isfile(source):
                    shutil.copy(source, os.path.join(self.prefs, entry))
        for name, content in sorted(self.preferences.items()):
            target = os.path.join(self.prefs, os.path.basename(name))
            if content:
                with open(target, "w") as handle:
                    handle.write(content.rstrip("\n") + "\n")
            elif os.path.exists(target):
                os.unlink(target)

    def _drop_preferences_of(self, names):
        """Preference files shipped by packages the transaction removes no longer apply."""
        for name in names:
            rc, out, err = self.run(["dpkg-query", "-L", name], environ_update=APT_ENV)
            for path in (out or "").splitlines() if rc == 0 else []:
                if os.path.dirname(path) == self.preferences_dir.rstrip("/"):
                    target = os.path.join(self.prefs, os.path.basename(path))
                    if os.path.isfile(target):
                        os.unlink(target)

    def _add_preferences_of(self, names):
        """Download (not install) each package and add the apt preference files it ships."""
        download = os.path.join(self.workdir, "download")
        os.makedirs(download, exist_ok=True)
        for name in names:
            argv = ["apt-get", "-o", "APT::Sandbox::User=root", "download", name]
            self.commands.append(" ".join(argv))
            rc, out, err = self._apt(argv, check=False, cwd=download)
            if rc != 0:
                raise AptError("apt-get download %s failed (rc %s)" % (name, rc), out + err)
        for deb in sorted(os.listdir(download)):
            if not deb.endswith(".deb"):
                continue
            tree = os.path.join(self.workdir, "tree-" + deb)
            rc, out, err = self.run(["dpkg-deb", "-x", os.path.join(download, deb), tree], environ_update=APT_ENV)
            if rc != 0:
                raise AptError("dpkg-deb -x %s failed (rc %s)" % (deb, rc), (out or "") + (err or ""))
            shipped = os.path.join(tree, self.preferences_dir.lstrip("/"))
            if os.path.isdir(shipped):
                for entry in sorted(os.listdir(shipped)):
                    shutil.copy(os.path.join(shipped, entry), os.path.join(self.prefs, entry))

    # -- plan and apply ---------------------------------------------------------------------
    def plan(self):
        """Read-only. Returns a dict; `missing` non-empty means apt does not offer some wanted package."""
        self._prepare_preferences()
        self._seed_caches()
        installed, held = self._installed()
        result = {"missing": [], "offered": [], "install_first": [], "installed": [], "removed": [],
                  "packages": [], "driver_version": "", "held_changed": [], "held": [], "commands": self.commands}

        policy = self._policy(self.install_first)
        first = []
        for name in self.install_first:
            info = policy.get(name)
            if not info or not info["candidate"]:
                result["missing"].append(name)
            elif info["installed"] is None or (info["installed"] != info["candidate"] and not self.no_upgrade):
                first.append(name)
        if not result["missing"] and first:
            self._add_preferences_of(first)
        policy = self._policy(self.install)
        result["missing"] += [name for name in self.install if not (policy.get(name) or {}).get("candidate")]
        if result["missing"]:
            result["offered"] = self.offered()
            return result

        first_ops = self._simulate(first, [])
        first_removed = {op["name"] for op in first_ops if op["op"] == "remove"}
        self._drop_preferences_of(sorted(first_removed))
        roots = self.install_first + self.install
        closure = self._closure(roots)
        installed_closure = self._installed_closure(roots) if self.no_upgrade else set()
        # Keeping: what the installed packages depend on stays, even where the candidates depend on other names.
        closure |= installed_closure
        remove = [name for name in expand_patterns(self.remove_patterns, installed)
                  if name not in closure and name not in first_removed]
        main_ops = self._simulate(self.install, remove, no_upgrade=self.no_upgrade)
        self.main_ops = main_ops

        after = dict(installed)
        for op in first_ops + main_ops:
            if op["op"] == "remove":
                after.pop(op["name"], None)
            else:
                after[op["name"]] = op["version"]
        stack = {name: version for name, version in after.items()
                 if name in closure and (re.search(self.driver_version_from, name)
                                         or name in self.install or name in self.install_first)}
        result.update(
            install_first=first,
            installed=[op for op in first_ops + main_ops if op["op"] == "install"],
            removed=[op for op in first_ops + main_ops if op["op"] == "remove"],
            packages=[{"name": name, "version": stack[name]} for name in sorted(stack)],
            driver_version=driver_version(stack, self.driver_version_from),
            held_changed=sorted({op["name"] for op in first_ops + main_ops} & held),
            held=sorted(set(stack) & held),
            remove_requested=remove,
            mixed=mixed_stack(stack),
            # Keeping: every planned operation on a package of the installed stack (a version move or a removal).
            moved=[op for op in first_ops + main_ops if op["name"] in installed_closure],
        )
        return result

    def apply(self, planned):
        """Run the planned transaction: the install_first packages in their own apt run (their
        preference files must be in place before the rest is resolved), then one transaction for
        the rest. Returns the state read back from dpkg afterwards."""
        common = ["-y", "--allow-downgrades", "--allow-change-held-packages", "--ignore-hold",
                  "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
                  "-o", "DPkg::Lock::Timeout=120"]
        common += [] if self.install_recommends else ["--no-install-recommends"]
        if planned["install_first"]:
            argv = ["apt-get"] + common + ["install"] + planned["install_first"]
            self.commands.append(" ".join(argv))
            rc, out, err = self._apt(argv, check=False, read_only=False)
            if rc != 0:
                raise AptError("installing %s failed" % ", ".join(planned["install_first"]), out + err)
        if self.main_ops:
            argv = ["apt-get"] + common + (["--no-upgrade"] if self.no_upgrade else []) + ["install"] + self.install
            argv += ["%s-" % name for name in planned["remove_requested"]]
            self.commands.append(" ".join(argv))
            rc, out, err = self._apt(argv, check=False, read_only=False)
            if rc != 0:
                raise AptError("the apt transaction failed", out + err)
        # Read back what is really installed now: the installed versions' closure (the candidates' may name
        # packages that are not installed, or miss installed ones).
        installed, held = self._installed()
        closure = self._installed_closure(self.install_first + self.install)
        stack = {name: version for name, version in installed.items()
                 if name in closure and (re.search(self.driver_version_from, name)
                                         or name in self.install or name in self.install_first)}
        missing = [name for name in self.install_first + self.install if name not in installed]
        if missing:
            raise AptError("apt finished but %s is not installed" % ", ".join(missing))
        return {"packages": [{"name": name, "version": stack[name]} for name in sorted(stack)],
                "driver_version": driver_version(stack, self.driver_version_from),
                "mixed": mixed_stack(stack)}
