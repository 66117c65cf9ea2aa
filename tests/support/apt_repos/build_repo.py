"""Build a signed apt repository of STAND-IN packages from the mirrored index data (indexes.yml).

TEST DOUBLE: neither Ubuntu's archive nor NVIDIA's repository is reachable from the development and CI
machines, and no container has a GPU. The package names, versions, suites/components and the
Depends/Provides/Conflicts/Replaces relations come from indexes.yml, which mirrors the real indexes and cites
where each fact comes from - it is written independently of the nvidia_driver role. Only the payloads are
stand-ins (an nvidia-smi that answers like the real one without a driver, a persistenced that only waits, a
dkms.conf without module source, an nvcc printing the real --version format). Real apt, dpkg, gpg then run
against the result: signature checks through signed-by, Conflicts/Replaces, pins, holds.

Standard library + dpkg-deb + gpg (present in the Debian/Ubuntu base images). The data file may be the YAML
(needs PyYAML, on the controller) or its JSON dump (what serve.yml copies into a container).

usage: python3 build_repo.py --data indexes.json --repo nvidia-ubuntu2404 --out DIR [--omit PACKAGE ...] [--key-home DIR]
  --repo auto: nvidia-<ID><VERSION_ID> from /etc/os-release (e.g. nvidia-debian12).
Writes DIR/... (flat: *.deb, Packages, Release, InRelease; dists: pool/, dists/<suite>/...), DIR/key.asc,
DIR/fingerprint and DIR/index.json (every stanza, for the tests).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import time

STANDIN = "Stand-in test package built by gpufleet tests/support/apt_repos (not NVIDIA or Canonical software)."
FIELD_ORDER = ["Package", "Version", "Architecture", "Maintainer", "Section", "Priority", "Depends", "Breaks",
               "Conflicts", "Replaces", "Provides", "Description"]


def load_data(path):
    text = pathlib.Path(path).read_text()
    if str(path).endswith(".json"):
        return json.loads(text)
    import yaml  # controller only

    return yaml.safe_load(text)


def upstream(version):
    version = version.split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def expand(value, subst):
    if isinstance(value, list):
        return [expand(item, subst) for item in value]
    if isinstance(value, dict):
        return {key: expand(item, subst) for key, item in value.items()}
    if isinstance(value, str):
        for key, replacement in subst.items():
            value = value.replace("{%s}" % key, replacement)
        return value
    return value


def stanzas(data, repo):
    """Every package of one mirrored repository: dicts with the control fields plus files/scripts/suite."""
    spec = data["repos"][repo]
    out, seen = [], set()
    by_branch = {}
    for build in spec["builds"]:
        template = data["templates"][build["template"]]
        if build["template"] == "nvidia-pinning":
            continue  # after the driver packages: its pin lists them
        subst = {"B": build.get("branch", ""), "V": build.get("version", ""), "U": upstream(build.get("version", "")),
                 "R": build.get("to", ""), "K": build.get("kernel_abi", ""), "D": build.get("driver", "")}
        for package in template:
            package = expand(package, subst)
            package.setdefault("version", subst["V"])
            package["suite"], package["component"] = build.get("suite", "/"), build.get("component", "")
            package["branch"] = build.get("branch", "")
            key = (package["name"], package["version"])
            if key not in seen:
                seen.add(key)
                out.append(package)
                if package["branch"]:
                    by_branch.setdefault(package["branch"], []).append(package)
    for build in spec["builds"]:
        if build["template"] != "nvidia-pinning":
            continue
        for branch in build["branches"]:
            members = by_branch.get(branch, [])
            names = sorted({p["name"] for p in members})
            versions = sorted({p["version"] for p in members if p["name"] in names and upstream(p["version"]).startswith(branch + ".")})
            for package in data["templates"]["nvidia-pinning"]:
                targets = versions if package.get("per_version") else [None]
                for version in targets:
                    subst = {"B": branch, "REV": str(build["revision"]), "V": version or "", "U": upstream(version or "")}
                    item = expand({k: v for k, v in package.items() if k != "per_version"}, subst)
                    item["pin"] = {"packages": names, "version": ("%s-*" % upstream(version)) if version else "%s.*" % branch}
                    item.update(suite="/", component="", branch=branch, architecture="all")
                    out.append(item)
    return out


def control(package, arch, maintainer):
    fields = {
        "Package": package["name"], "Version": package["version"], "Architecture": package.get("architecture", arch),
        "Maintainer": maintainer, "Section": package.get("section", "non-free/libs"), "Priority": "optional",
        "Description": "%s (stand-in)\n %s" % (package["name"], STANDIN),
    }
    for key in ("depends", "breaks", "conflicts", "replaces", "provides"):
        if package.get(key):
            fields[key.capitalize()] = ", ".join(package[key])
    return "".join("%s: %s\n" % (key, fields[key]) for key in FIELD_ORDER if key in fields)


def payload(package):
    """{path: (mode, text)} and {script: text} for the stand-in payload kinds named in `files`/`scripts`."""
    u, name, branch = upstream(package["version"]), package["name"], package.get("branch", "")
    smi = ("#!/bin/sh\n# stand-in nvidia-smi %s (%s): answers like the real one when no driver is loaded\n"
           "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
           "Make sure that the latest NVIDIA driver is installed and running.\"\nexit 9\n" % (u, name))
    unit = ("[Unit]\nDescription=NVIDIA Persistence Daemon (stand-in)\nWants=syslog.target\n\n"
            "[Service]\nType=simple\nExecStart=/usr/bin/nvidia-persistenced\n\n[Install]\nWantedBy=multi-user.target\n")
    files, scripts = {}, {}
    for kind in package.get("files", []):
        if kind == "nvidia-smi":
            files["/usr/bin/nvidia-smi"] = (0o755, smi)
        elif kind == "persistenced":
            files["/usr/bin/nvidia-persistenced"] = (0o755, "#!/bin/sh\n# stand-in nvidia-persistenced %s\nexec sleep infinity\n" % u)
            files["/lib/systemd/system/nvidia-persistenced.service"] = (0o644, unit)
        elif kind == "modprobe":
            files["/usr/bin/nvidia-modprobe"] = (0o755, "#!/bin/sh\n# stand-in nvidia-modprobe %s\nexit 0\n" % u)
        elif kind == "libcuda":
            files["/usr/lib/x86_64-linux-gnu/libcuda.so.%s" % u] = (0o644, "stand-in\n")
        elif kind == "firmware":
            files["/lib/firmware/nvidia/%s/gsp-stand-in.txt" % u] = (0o644, "stand-in firmware of %s\n" % name)
        elif kind in ("kernel-source-open", "kernel-source-proprietary"):
            flavour = kind.rsplit("-", 1)[1]
            files["/usr/src/nvidia-%s/dkms.conf" % u] = (
                0o644, 'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="%s"\n# %s kernel module source (stand-in, not buildable)\n' % (u, flavour))
        elif kind in ("precompiled-open", "precompiled-proprietary"):
            abi = name.split("-%s-" % branch, 1)[1]
            abi = abi[len("open-"):] if abi.startswith("open-") else abi
            files["/lib/modules/%s/kernel/nvidia-%s%s/nvidia.ko.stand-in" % (
                abi, branch, "-open" if kind.endswith("open") else "")] = (0o644, "stand-in module of %s\n" % name)
        elif kind in ("pin-branch", "pin-version"):
            pin = package["pin"]
            files["/etc/apt/preferences.d/nvidia-driver-pin"] = (0o644, (
                "# stand-in of NVIDIA's %s (modelled stanza, see indexes.yml)\nPackage: %s\nPin: version %s\nPin-Priority: 1000\n"
                % (name, " ".join(pin["packages"]), pin["version"])))
        elif kind == "nvcc":
            cuda = re.match(r"cuda-toolkit-(\d+)-(\d+)", name).groups()
            dotted = ".".join(cuda)
            home = "/usr/local/cuda-%s" % dotted
            files["%s/bin/nvcc" % home] = (0o755, (
                "#!/bin/sh\n# stand-in nvcc: prints the real --version format\n"
                "echo 'nvcc: NVIDIA (R) Cuda compiler driver'\necho 'Copyright (c) 2005-2025 NVIDIA Corporation'\n"
                "echo 'Built on Wed_Aug_20_01:58:59_PM_PDT_2025'\necho 'Cuda compilation tools, release %s, V%s.%s'\n"
                "echo 'Build cuda_%s.r%s/compiler.36424714_0'\n" % (dotted, dotted, u.split(".")[-1], dotted, dotted)))
            files["%s/lib64/libcudart.so.%s" % (home, cuda[0])] = (0o644, "stand-in\n")
        else:
            raise SystemExit("unknown payload kind %r in %s" % (kind, name))
    for kind in package.get("scripts", []):
        if kind == "cuda-alternatives":  # like NVIDIA's cuda-toolkit-*-config-common: /usr/local/cuda via alternatives
            cuda = re.match(r"cuda-toolkit-(\d+)-(\d+)", name).groups()
            home = "/usr/local/cuda-%s" % ".".join(cuda)
            scripts["postinst"] = "#!/bin/sh\nset -e\nupdate-alternatives --install /usr/local/cuda cuda %s %s\n" % (home, "".join(cuda))
            scripts["prerm"] = "#!/bin/sh\nset -e\nif [ \"$1\" = remove ]; then update-alternatives --remove cuda %s; fi\n" % home
    return files, scripts


def build_deb(directory, package, arch, maintainer):
    text = control(package, arch, maintainer)
    files, scripts = payload(package)
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "DEBIAN").mkdir()
        (root / "DEBIAN" / "control").write_text(text)
        doc = root / "usr" / "share" / "doc" / package["name"]
        doc.mkdir(parents=True)
        (doc / "STAND-IN").write_text(STANDIN + "\n")
        for path, (mode, content) in files.items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            target.chmod(mode)
        for script, content in scripts.items():
            (root / "DEBIAN" / script).write_text(content)
            (root / "DEBIAN" / script).chmod(0o755)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / ("%s_%s_%s.deb" % (package["name"], package["version"].replace(":", "%3a"),
                                              package.get("architecture", arch)))
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(path)],
                       check=True, stdout=subprocess.DEVNULL)
    return path, text


def digest(path, algo):
    return hashlib.new(algo, path.read_bytes()).hexdigest()


def index_entry(path, text, filename):
    return text.replace("Description:", "Filename: %s\nSize: %d\nMD5sum: %s\nSHA256: %s\nDescription:" % (
        filename, path.stat().st_size, digest(path, "md5"), digest(path, "sha256")), 1)


def write_packages(directory, entries):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "Packages").write_text("\n".join(entries))
    with gzip.open(directory / "Packages.gz", "wb") as handle:
        handle.write((directory / "Packages").read_bytes())


def write_release(directory, fields, files):
    lines = ["%s: %s" % item for item in fields.items()]
    lines.append("Date: %s" % time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()))
    for algo, title in (("md5", "MD5Sum"), ("sha256", "SHA256")):
        lines.append("%s:" % title)
        for name in files:
            path = directory / name
            lines.append(" %s %d %s" % (digest(path, algo), path.stat().st_size, name))
    (directory / "Release").write_text("\n".join(lines) + "\n")


def make_key(gnupg_home, uid):
    """A throw-away signing key in gnupg_home: the one already there (--key-home, a repository published again
    with the key its users trust), else a new one."""
    env = dict(os.environ, GNUPGHOME=str(gnupg_home))
    gnupg_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    gpg = ["gpg", "--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", ""]
    present = subprocess.run(["gpg", "--batch", "--with-colons", "--list-secret-keys"], env=env, capture_output=True,
                             text=True, check=False).stdout
    if "\nfpr:" not in "\n" + present:
        subprocess.run(gpg + ["--quick-gen-key", uid, "ed25519", "sign", "never"], check=True, env=env)
    listing = subprocess.run(["gpg", "--batch", "--with-colons", "--list-keys"], check=True, env=env,
                             capture_output=True, text=True).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
    key = subprocess.run(["gpg", "--batch", "--armor", "--export", fingerprint], check=True, env=env,
                         capture_output=True, text=True).stdout
    return env, gpg, fingerprint, key


def sign(directory, env, gpg, fingerprint):
    for name in ("InRelease", "Release.gpg"):
        (directory / name).unlink(missing_ok=True)
    subprocess.run(gpg + ["--local-user", fingerprint, "--clearsign", "--output", str(directory / "InRelease"),
                          str(directory / "Release")], check=True, env=env)
    subprocess.run(gpg + ["--local-user", fingerprint, "--armor", "--detach-sign", "--output",
                          str(directory / "Release.gpg"), str(directory / "Release")], check=True, env=env)


def auto_repo():
    release = dict(line.split("=", 1) for line in pathlib.Path("/etc/os-release").read_text().splitlines() if "=" in line)
    return "nvidia-%s%s" % (release["ID"].strip('"'), release.get("VERSION_ID", "").strip('"').replace(".", ""))


def build(data, repo, out, omit=(), key_home=None):
    spec = data["repos"][repo]
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True, text=True).stdout.strip()
    packages = [p for p in stanzas(data, repo) if p["name"] not in omit]
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as gnupg_home:
        home = pathlib.Path(key_home) if key_home else pathlib.Path(gnupg_home) / "gnupg"
        env, gpg, fingerprint, key = make_key(home, "gpufleet stand-in %s <tests@gpufleet.invalid>" % repo)
        if spec["layout"] == "flat":
            entries = []
            for package in packages:
                path, text = build_deb(out, package, arch, spec["maintainer"])
                entries.append(index_entry(path, text, "./" + path.name))
            write_packages(out, entries)
            write_release(out, dict(spec["release"], Architectures=arch,
                                    Description="gpufleet stand-in of %s (test double)" % repo), ["Packages", "Packages.gz"])
            sign(out, env, gpg, fingerprint)
        else:
            suites = {}
            for package in packages:
                component = package["component"]
                path, text = build_deb(out / "pool" / component, package, arch, spec["maintainer"])
                entry = index_entry(path, text, str(path.relative_to(out)))
                suites.setdefault(package["suite"], {}).setdefault(component, []).append(entry)
            for suite, components in suites.items():
                base = out / "dists" / suite
                names = []
                for component, entries in sorted(components.items()):
                    write_packages(base / component / ("binary-%s" % arch), entries)
                    names += ["%s/binary-%s/Packages" % (component, arch), "%s/binary-%s/Packages.gz" % (component, arch)]
                write_release(base, dict(spec["release"], Suite=suite, Architectures=arch,
                                         Components=" ".join(sorted(components))), names)
                sign(base, env, gpg, fingerprint)
    (out / "key.asc").write_text(key)
    (out / "fingerprint").write_text(fingerprint + "\n")
    kept = ("name", "version", "depends", "provides", "conflicts", "replaces", "breaks", "suite", "component", "branch")
    (out / "index.json").write_text(json.dumps([{k: v for k, v in p.items() if k in kept} for p in packages], indent=1))
    return len(packages), fingerprint


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--repo", required=True, help="a key of repos in the data, or auto (nvidia-<os><version>)")
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--omit", action="append", default=[], help="leave this package out (refusal tests)")
    parser.add_argument("--key-home", help="GnuPG home whose key signs (made there if absent): a later state of a "
                                           "repository signed with the key of the earlier one")
    args = parser.parse_args()
    repo = auto_repo() if args.repo == "auto" else args.repo
    count, fingerprint = build(load_data(args.data), repo, args.out, args.omit, args.key_home)
    print("%s: %s, %d packages%s, key %s" % (args.out, repo, count,
                                             (" (omitted %s)" % ", ".join(args.omit)) if args.omit else "", fingerprint))


if __name__ == "__main__":
    main()
