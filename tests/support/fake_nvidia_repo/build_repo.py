"""Build a signed, flat apt repository of STAND-IN packages for NVIDIA's CUDA repository.

TEST DOUBLE: NVIDIA's repository (developer.download.nvidia.com) is not reachable from the
development and CI machines, and no container has a GPU. This script makes packages with the
exact names, versions scheme, dependencies, Conflicts/Provides and file locations of NVIDIA's
Ubuntu-style packages (`nvidia-dkms-590-open`, the proprietary `nvidia-dkms-590`,
`nvidia-utils-590`, `libnvidia-compute-590`, `nvidia-compute-utils-590`, `cuda-toolkit-13-0`,
`libnccl2`, ...), but their payloads are small stand-ins: no kernel module source, an
`nvidia-smi` that answers like the real one without a driver, an `nvcc` that prints the real
`--version` format, an `nvidia-persistenced` that only waits. Real apt (signature check through
`signed-by`, Conflicts resolution, version pins, holds) then runs against this repository.

Standard library + `dpkg-deb` + `gpg` (both in the Debian/Ubuntu base images).
usage: python3 build_repo.py --out DIR [--branch 590] [--versions 590.44.01,590.48.01] [--cuda 13.0]
Writes DIR/{*.deb,Packages,Packages.gz,Release,InRelease,Release.gpg,key.asc,fingerprint}.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

STANDIN = "Stand-in test package built by gpufleet tests/support/fake_nvidia_repo (not NVIDIA software)."


def deb(out, arch, name, version, depends=(), extra=None, files=None, scripts=None):
    """Build one .deb with dpkg-deb; files: {path: (mode, text)}; scripts: {postinst: text}."""
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "DEBIAN").mkdir()
        fields = {
            "Package": name, "Version": version, "Architecture": arch,
            "Maintainer": "gpufleet tests <tests@gpufleet.invalid>", "Section": "non-free/libs",
            "Priority": "optional", "Description": "%s (stand-in)\n %s" % (name, STANDIN),
        }
        if depends:
            fields["Depends"] = ", ".join(depends)
        fields.update(extra or {})
        order = ["Package", "Version", "Architecture", "Maintainer", "Section", "Priority", "Depends",
                 "Conflicts", "Replaces", "Provides", "Description"]
        text = "".join("%s: %s\n" % (k, fields[k]) for k in order if k in fields)
        (root / "DEBIAN" / "control").write_text(text)
        doc = root / "usr" / "share" / "doc" / name
        doc.mkdir(parents=True)
        (doc / "STAND-IN").write_text(STANDIN + "\n")
        for path, (mode, content) in (files or {}).items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            target.chmod(mode)
        for script, content in (scripts or {}).items():
            target = root / "DEBIAN" / script
            target.write_text(content)
            target.chmod(0o755)
        path = out / ("%s_%s_%s.deb" % (name, version.replace(":", "%3a"), arch))
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(path)],
                       check=True, stdout=subprocess.DEVNULL)
        return path, text


def driver_packages(out, arch, branch, upstream):
    version = "%s-0ubuntu1" % upstream
    same = "(= %s)" % version
    smi = (
        "#!/bin/sh\n# stand-in nvidia-smi %s: answers like the real one when no driver is loaded\n"
        "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\"\nexit 9\n" % upstream
    )
    persistenced = "#!/bin/sh\n# stand-in nvidia-persistenced: waits, like the daemon, but touches no GPU\nexec sleep infinity\n"
    unit = (
        "[Unit]\nDescription=NVIDIA Persistence Daemon (stand-in)\nWants=syslog.target\n\n"
        "[Service]\nType=simple\nExecStart=/usr/bin/nvidia-persistenced\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
    built = [
        deb(out, arch, "nvidia-kernel-common-%s" % branch, version),
        deb(out, arch, "nvidia-kernel-source-%s-open" % branch, version,
            extra={"Conflicts": "nvidia-kernel-source-%s" % branch},
            files={"/usr/src/nvidia-%s/dkms.conf" % upstream: (0o644, 'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="%s"\n# open\n' % upstream)}),
        deb(out, arch, "nvidia-kernel-source-%s" % branch, version,
            extra={"Conflicts": "nvidia-kernel-source-%s-open" % branch},
            files={"/usr/src/nvidia-%s/dkms.conf" % upstream: (0o644, 'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="%s"\n# proprietary\n' % upstream)}),
    ]
    for flavor_suffix, other in (("-open", ""), ("", "-open")):
        name = "nvidia-dkms-%s%s" % (branch, flavor_suffix)
        built.append(deb(
            out, arch, name, version,
            depends=["nvidia-kernel-common-%s %s" % (branch, same),
                     "nvidia-kernel-source-%s%s %s" % (branch, flavor_suffix, same)],
            extra={"Conflicts": "nvidia-dkms-%s%s, nvidia-dkms-kernel" % (branch, other),
                   "Replaces": "nvidia-dkms-%s%s" % (branch, other),
                   "Provides": "nvidia-dkms-kernel (= %s)" % upstream}))
    built += [
        deb(out, arch, "libnvidia-compute-%s" % branch, version,
            files={"/usr/lib/x86_64-linux-gnu/libcuda.so.%s" % upstream: (0o644, "stand-in\n")}),
        deb(out, arch, "nvidia-utils-%s" % branch, version,
            depends=["libnvidia-compute-%s %s" % (branch, same)],
            files={"/usr/bin/nvidia-smi": (0o755, smi)}),
        deb(out, arch, "nvidia-compute-utils-%s" % branch, version,
            depends=["libnvidia-compute-%s %s" % (branch, same)],
            files={"/usr/bin/nvidia-persistenced": (0o755, persistenced),
                   "/lib/systemd/system/nvidia-persistenced.service": (0o644, unit)}),
    ]
    return built


def cuda_packages(out, arch, cuda):
    dashed = cuda.replace(".", "-")
    home = "/usr/local/cuda-%s" % cuda
    build = {"13.0": "88"}.get(cuda, "0")
    nvcc = (
        "#!/bin/sh\n# stand-in nvcc: prints the real --version format\n"
        "echo 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        "echo 'Copyright (c) 2005-2025 NVIDIA Corporation'\n"
        "echo 'Built on Wed_Aug_20_01:58:59_PM_PDT_2025'\n"
        "echo 'Cuda compilation tools, release %s, V%s.%s'\n"
        "echo 'Build cuda_%s.r%s/compiler.36424714_0'\n" % (cuda, cuda, build, cuda, cuda)
    )
    # Like NVIDIA's cuda-toolkit-*-config-common: /usr/local/cuda is an update-alternatives link.
    postinst = "#!/bin/sh\nset -e\nupdate-alternatives --install /usr/local/cuda cuda %s %s\n" % (home, dashed.replace("-", ""))
    prerm = "#!/bin/sh\nset -e\nif [ \"$1\" = remove ]; then update-alternatives --remove cuda %s; fi\n" % home
    return [
        deb(out, arch, "cuda-toolkit-%s" % dashed, "%s.%s-1" % (cuda, build),
            files={"%s/bin/nvcc" % home: (0o755, nvcc),
                   "%s/lib64/libcudart.so.%s" % (home, cuda.split(".")[0]): (0o644, "stand-in\n")},
            scripts={"postinst": postinst, "prerm": prerm}),
        deb(out, arch, "libnccl2", "2.28.3-1+cuda%s" % cuda),
        deb(out, arch, "libnccl-dev", "2.28.3-1+cuda%s" % cuda, depends=["libnccl2 (= 2.28.3-1+cuda%s)" % cuda]),
    ]


def digest(path, algo):
    return hashlib.new(algo, path.read_bytes()).hexdigest()


def write_index(out, built, arch):
    entries = []
    for path, control in built:
        entries.append(control.replace("Description:", "Filename: ./%s\nSize: %d\nMD5sum: %s\nSHA256: %s\nDescription:" % (
            path.name, path.stat().st_size, digest(path, "md5"), digest(path, "sha256")), 1))
    packages = out / "Packages"
    packages.write_text("\n".join(entries))
    with gzip.open(out / "Packages.gz", "wb") as handle:
        handle.write(packages.read_bytes())
    lines = ["Origin: NVIDIA", "Label: NVIDIA CUDA", "Architectures: %s" % arch,
             "Date: %s" % time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()),
             "Description: gpufleet stand-in for NVIDIA's CUDA repository (test double)"]
    for algo, title in (("md5", "MD5Sum"), ("sha256", "SHA256")):
        lines.append("%s:" % title)
        for name in ("Packages", "Packages.gz"):
            lines.append(" %s %d %s" % (digest(out / name, algo), (out / name).stat().st_size, name))
    (out / "Release").write_text("\n".join(lines) + "\n")


def sign(out, gnupg_home):
    env = dict(os.environ, GNUPGHOME=str(gnupg_home))
    gnupg_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    gpg = ["gpg", "--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", ""]
    subprocess.run(gpg + ["--quick-gen-key", "gpufleet stand-in NVIDIA repo <tests@gpufleet.invalid>",
                          "ed25519", "sign", "never"], check=True, env=env)
    listing = subprocess.run(["gpg", "--batch", "--with-colons", "--list-keys"], check=True, env=env,
                             capture_output=True, text=True).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
    key = subprocess.run(["gpg", "--batch", "--armor", "--export", fingerprint], check=True, env=env,
                         capture_output=True, text=True).stdout
    (out / "key.asc").write_text(key)
    (out / "fingerprint").write_text(fingerprint + "\n")
    for name in ("InRelease", "Release.gpg"):
        (out / name).unlink(missing_ok=True)
    subprocess.run(gpg + ["--local-user", fingerprint, "--clearsign", "--output", str(out / "InRelease"),
                          str(out / "Release")], check=True, env=env)
    subprocess.run(gpg + ["--local-user", fingerprint, "--armor", "--detach-sign", "--output",
                          str(out / "Release.gpg"), str(out / "Release")], check=True, env=env)
    return fingerprint


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--branch", default="590")
    parser.add_argument("--versions", default="590.44.01,590.48.01",
                        help="driver upstream versions to publish (comma separated)")
    parser.add_argument("--cuda", default="13.0")
    args = parser.parse_args()
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True, text=True).stdout.strip()
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    built = []
    for upstream in args.versions.split(","):
        built += driver_packages(args.out, arch, args.branch, upstream.strip())
    built += cuda_packages(args.out, arch, args.cuda)
    write_index(args.out, built, arch)
    with tempfile.TemporaryDirectory() as gnupg_home:
        fingerprint = sign(args.out, pathlib.Path(gnupg_home) / "gnupg")
    print("%s %d packages, key %s" % (args.out, len(built), fingerprint))


if __name__ == "__main__":
    main()
