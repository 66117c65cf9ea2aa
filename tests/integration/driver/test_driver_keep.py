"""nvidia_driver with nvidia_driver_upgrade false keeps an installed driver exactly (issue 33).

Real parts: the nvidia_driver role run by ansible-playbook (docker connection) on one Debian 12 systemd container
(the Molecule image), real apt, dpkg, dpkg holds, gpg and `signed-by`, and Debian's real dkms and
ocl-icd-libopencl1 (from Debian's archive, as the Molecule scenario gets them). The walk goes through the states in
one container, asserting the installed versions and holds (dpkg) before and after every run.

TEST DOUBLE: the repositories. Neither Ubuntu's archive nor NVIDIA's repository is reachable here, so stand-ins are
built in the container by tests/support/apt_repos/build_repo.py from tests/support/apt_repos/indexes.yml, which
mirrors the real indexes independently of the role's data; each fact cites its record there:
  - `ubuntu-noble-before-2026-03` -> `ubuntu-noble`: Ubuntu's noble archive before and after the 2026-03 changes.
    The point release 580.159.03 (noble-security) -> 580.173.02 (noble-updates) [U], which renames
    nvidia-firmware-580-<version> (Canonical's debian/control: nvidia-kernel-common-<B> depends on
    nvidia-firmware-<B>-<upstream>) [C]; and the transition: the last real 590, 590.48.01-0ubuntu0.24.04.4, replaced
    by 590.48.01-0ubuntu0.24.04.5, whose every -590 package is empty and depends on its -595 name [C].
  - `nvidia-ubuntu2404-earlier` -> `nvidia-ubuntu2404`: NVIDIA's ubuntu2404 repository publishing 595.71.05 after
    595.58.03, branch chosen by nvidia-driver-pinning-595 (priority-1000 pin) [N][G].
A later state of a repository is signed with the earlier state's key (build_repo.py --key-home), as the real ones
are; the test switches a `current` link and the role's own apt index refresh (cache_valid_time 0) sees it.
The payloads are stand-ins (no kernel module: nvidia_driver_kernel_module_steps false, as in Molecule).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import time
import uuid

import pytest
import yaml
from support.ansible_harness import run_playbook
from support.ports import PortPool
from support.requires import require_for_module

ROOT = pathlib.Path(__file__).resolve().parents[3]
IMAGE = os.environ.get("GPUFLEET_MOLECULE_IMAGE", "gpufleet/debian12-systemd:latest")
PORTS = PortPool(range(33100, 33200))


def _image_present():
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, check=False).returncode == 0


require_for_module(not _image_present(), "docker and the image %s (scripts/build-base-image.sh)" % IMAGE)


class Host:
    """One systemd container with the stand-in repositories, served from /srv/repos on 127.0.0.1:port."""

    def __init__(self, name, port, tmp):
        self.name, self.port, self.tmp = name, port, tmp
        self.runs = 0

    def sh(self, script, check=True):
        proc = subprocess.run(["docker", "exec", self.name, "sh", "-ec", script], capture_output=True, text=True,
                              check=False, timeout=300)
        if check and proc.returncode != 0:
            raise AssertionError("%s failed (rc %s): %s %s" % (script, proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:]))
        return proc.stdout

    def publish(self, source, state):
        """Point the stand-in of `source` (ubuntu, nvidia) at one of its recorded states (before, after), published
        now: its Release files re-dated and re-signed with the repository's key (apt keeps the indexes it has when
        the server's are older, by If-Modified-Since or by the Release Date; a test going back to an earlier state
        must publish it anew)."""
        time.sleep(1)
        self.sh("date=$(LC_ALL=C date -u '+%%a, %%d %%b %%Y %%H:%%M:%%S UTC'); "
                "for release in $(find /srv/repos/%s/%s -name Release); do dir=$(dirname $release); "
                "sed -i \"s/^Date: .*/Date: $date/\" $release; rm -f $dir/InRelease $dir/Release.gpg; "
                "gpg --homedir /srv/keys/%s --batch --quiet --yes --clearsign -o $dir/InRelease $release; "
                "gpg --homedir /srv/keys/%s --batch --quiet --yes --armor --detach-sign -o $dir/Release.gpg $release; done; "
                % (source, state, source, source)
                + "find /srv/repos/%s/%s -type f -exec touch {} + && " % (source, state)
                + "ln -sfn /srv/repos/%s/%s /srv/repos/%s/current.new && mv -T /srv/repos/%s/current.new /srv/repos/%s/current"
                % (source, state, source, source, source))

    def driver(self):
        """dpkg's view of every installed NVIDIA package: {name: (version, held)}."""
        out = self.sh("dpkg-query -W -f '${db:Status-Abbrev}\\t${Package}\\t${Version}\\n' '*nvidia*'", check=False)
        state = {}
        for line in out.splitlines():
            status, name, version = line.split("\t")
            if status[1] == "i":
                state[name] = (version, status[0] == "h")
        return state

    def role(self, **variables):
        """Run the role once; returns (rc, changed count, the failed task's message or '', output tail)."""
        self.runs += 1
        work = self.tmp / ("run%d" % self.runs)
        work.mkdir()
        host = {
            "ansible_connection": "community.docker.docker", "ansible_host": self.name,
            "ansible_python_interpreter": "/usr/bin/python3",
            # Debian container, Ubuntu-shaped repositories (as in molecule/nvidia_driver).
            "nvidia_driver_distribution": "ubuntu2404",
            "nvidia_driver_kernel_module_steps": False, "nvidia_driver_secure_boot": "disabled",
            "nvidia_driver_apt_cache_valid_time": 0,
            "nvidia_driver_repo_url": "http://127.0.0.1:%d/nvidia/current/" % self.port,
            "nvidia_driver_repo_key_url": "http://127.0.0.1:%d/nvidia/current/key.asc" % self.port,
            "nvidia_driver_repo_key_fingerprints": [self.sh("cat /srv/repos/nvidia/before/fingerprint").strip()],
            "nvidia_driver_flavor": "open", "nvidia_driver_profile": "compute",
        }
        host.update(variables)
        play = [{"hosts": "driver", "gather_facts": False, "roles": [{"role": "gpufleet.llm_server.nvidia_driver"}]}]
        started = time.monotonic()
        result = run_playbook(work, play, inventory={"all": {"hosts": {"driver": host}}}, connection=None, timeout=600,
                              env={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
        print("role run %d (%s): %.1f s" % (self.runs, variables, time.monotonic() - started))
        out = result.output
        stats = out.get("stats", {}).get("driver", {})
        failed = [res.get("msg", "") for _name, _host, res in result.tasks if res.get("failed")]
        return result.rc, stats.get("changed"), (failed[0] if failed else ""), result.stdout[-3000:] + result.stderr[-3000:]


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("driver-keep")
    port = PORTS.take()
    name = "gpufleet-driver-keep-%s" % uuid.uuid4().hex[:10]
    subprocess.run(["docker", "run", "-d", "--name", name, "--network", "host", "--cap-add", "SYS_ADMIN",
                    "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined", "--cgroupns=host",
                    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
                    "--stop-signal", "SIGRTMIN+3", IMAGE, "/lib/systemd/systemd"], check=True, capture_output=True)
    try:
        box = Host(name, port, tmp)
        for _attempt in range(60):
            if box.sh("systemctl is-system-running || true", check=False).strip() in ("running", "degraded"):
                break
            time.sleep(1)
        data = tmp / "indexes.json"
        data.write_text(json.dumps(yaml.safe_load((ROOT / "tests/support/apt_repos/indexes.yml").read_text())))
        subprocess.run(["docker", "cp", str(ROOT / "tests/support/apt_repos/build_repo.py"), "%s:/usr/local/lib/build_repo.py" % name],
                       check=True)
        subprocess.run(["docker", "cp", str(data), "%s:/usr/local/lib/indexes.json" % name], check=True)
        build = "python3 /usr/local/lib/build_repo.py --data /usr/local/lib/indexes.json"
        box.sh(" && ".join([
            # What the stand-ins depend on outside the driver: Debian's real packages.
            "apt-get update -qq", "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dkms ocl-icd-libopencl1 >/dev/null",
            # Then only the stand-ins: the role's index refreshes talk to loopback alone.
            "rm -f /etc/apt/sources.list && rm -rf /var/lib/apt/lists/*deb.debian.org*",
            "%s --repo ubuntu-noble-before-2026-03 --out /srv/repos/ubuntu/before --key-home /srv/keys/ubuntu" % build,
            "%s --repo ubuntu-noble --out /srv/repos/ubuntu/after --key-home /srv/keys/ubuntu" % build,
            "%s --repo nvidia-ubuntu2404-earlier --out /srv/repos/nvidia/before --key-home /srv/keys/nvidia" % build,
            "%s --repo nvidia-ubuntu2404 --out /srv/repos/nvidia/after --key-home /srv/keys/nvidia" % build,
            "ln -sfn /srv/repos/ubuntu/before /srv/repos/ubuntu/current", "ln -sfn /srv/repos/nvidia/before /srv/repos/nvidia/current",
            "systemd-run --unit=gpufleet-driver-keep-repos python3 -m http.server %d --bind 127.0.0.1 --directory /srv/repos" % port,
            # Ubuntu's archive is configured like the distribution's own (the role does not manage it).
            "install -m 0644 /srv/repos/ubuntu/before/key.asc /etc/apt/keyrings/gpufleet-test-ubuntu-noble.asc",
            "printf 'Types: deb\\nURIs: http://127.0.0.1:%d/ubuntu/current/\\nSuites: noble-security noble-updates\\n"
            "Components: restricted multiverse\\nSigned-By: /etc/apt/keyrings/gpufleet-test-ubuntu-noble.asc\\n'"
            " > /etc/apt/sources.list.d/gpufleet-test-ubuntu-noble.sources" % port,
        ]))
        for _attempt in range(30):
            if box.sh("python3 -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:%d/nvidia/before/fingerprint')\""
                      " && echo up || true" % port, check=False).strip() == "up":
                break
            time.sleep(1)
        yield box
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
        PORTS.release(port)


def _at(state, version):
    return sorted(name for name, (installed, _held) in state.items() if installed == version)


UBUNTU_580_OLD, UBUNTU_580_NEW = "580.159.03-0ubuntu0.24.04.1", "580.173.02-0ubuntu0.24.04.1"


def test_ubuntu_point_release_is_kept_a_mixed_stack_refused_upgrade_moves_all(host):
    """Ubuntu's archive, branch 580 open: 580.159.03 installed; the archive publishes 580.173.02 (renaming
    nvidia-firmware-580-<version>); upgrade false keeps every package, holds and changed=0; a stack mixed by hand is
    refused before any change, naming packages, versions and the fix; upgrade true moves the whole stack."""
    host.publish("ubuntu", "before")
    rc, _changed, msg, tail = host.role(nvidia_driver_source="ubuntu", nvidia_driver_branch="580")
    assert rc == 0, msg or tail
    installed = host.driver()
    assert installed["nvidia-headless-580-open"][0] == UBUNTU_580_OLD, installed
    assert "nvidia-firmware-580-580.159.03" in installed, installed
    assert {version for version, _held in installed.values()} == {UBUNTU_580_OLD}, installed
    assert all(held for _version, held in installed.values()), installed

    host.publish("ubuntu", "after")
    assert "580.173.02" in host.sh("apt-get update -qq && apt-cache policy nvidia-headless-580-open")
    rc, changed, msg, tail = host.role(nvidia_driver_source="ubuntu", nvidia_driver_branch="580")
    assert (rc, changed) == (0, 0), msg or tail
    assert host.driver() == installed  # every version and every hold

    # A host left with a mixed stack (what the role did before issue 33, and what apt does when told to install
    # one package of a stack ignoring the holds): everything moves to 580.173.02 but nvidia-headless-580-open.
    host.sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --ignore-hold --allow-change-held-packages nvidia-dkms-580-open >/dev/null")
    mixed = host.driver()
    assert _at(mixed, UBUNTU_580_OLD) and _at(mixed, UBUNTU_580_NEW), mixed
    assert mixed["nvidia-headless-580-open"][0] == UBUNTU_580_OLD and mixed["nvidia-dkms-580-open"][0] == UBUNTU_580_NEW
    sources = host.sh("ls -l --time-style=+%s /etc/apt/sources.list.d /etc/apt/preferences.d")
    rc, changed, msg, _tail = host.role(nvidia_driver_source="ubuntu", nvidia_driver_branch="580")
    assert rc != 0 and changed == 0
    assert "not one driver version" in msg and "nvidia-headless-580-open" in msg and UBUNTU_580_OLD in msg, msg
    assert "nvidia-dkms-580-open" in msg and UBUNTU_580_NEW in msg, msg
    assert "Nothing was changed" in msg and "nvidia_driver_upgrade: true" in msg, msg
    assert host.driver() == mixed
    assert host.sh("ls -l --time-style=+%s /etc/apt/sources.list.d /etc/apt/preferences.d") == sources

    rc, changed, msg, tail = host.role(nvidia_driver_source="ubuntu", nvidia_driver_branch="580", nvidia_driver_upgrade=True)
    assert rc == 0 and changed > 0, msg or tail
    upgraded = host.driver()
    assert {version for version, _held in upgraded.values()} == {UBUNTU_580_NEW}, upgraded
    assert "nvidia-firmware-580-580.173.02" in upgraded and "nvidia-firmware-580-580.159.03" not in upgraded
    assert set(upgraded) == set(mixed) - {"nvidia-firmware-580-580.159.03"}
    assert all(held for _version, held in upgraded.values()), upgraded


def test_the_seeds_real_590_is_kept_after_the_archive_made_590_transitional(host):
    """The seeds' host: branch 590 open installed from the archive before 2026-03-27 (590.48.01-0ubuntu0.24.04.4,
    the real driver); the archive then makes 590 transitional to 595 (.5). Branch 590, upgrade false: kept, no 595
    package installed, holds intact, changed=0."""
    host.publish("ubuntu", "before")
    rc, _changed, msg, tail = host.role(nvidia_driver_source="ubuntu", nvidia_driver_branch="590")
    assert rc == 0, msg or tail
    installed = host.driver()
    assert installed["nvidia-dkms-590-open"][0] == "590.48.01-0ubuntu0.24.04.4", installed
    assert {version for version, _held in installed.values()} == {"590.48.01-0ubuntu0.24.04.4"}, installed
    assert all(held for _version, held in installed.values()), installed

    host.publish("ubuntu", "after")
    assert "590.48.01-0ubuntu0.24.04.5" in host.sh("apt-get update -qq && apt-cache policy nvidia-dkms-590-open")
    rc, changed, msg, tail = host.role(nvidia_driver_source="ubuntu", nvidia_driver_branch="590")
    assert (rc, changed) == (0, 0), msg or tail
    assert host.driver() == installed


def test_nvidia_repository_point_release_is_kept(host):
    """NVIDIA's repository, branch 595 (pinning package, unsuffixed names): 595.58.03 installed; the repository
    publishes 595.71.05; upgrade false keeps every package (the pin is the lock, no holds) and changed=0. Before it,
    a refusal after the repository was configured in the same run names the files written."""
    host.publish("nvidia", "before")
    # First, a refusal after this run configured NVIDIA's repository: the earlier repository has no 590 build, so no
    # nvidia-driver-pinning-590 [N]. It must say what it wrote, and that no driver package changed.
    before = host.driver()
    rc, _changed, msg, _tail = host.role(nvidia_driver_source="nvidia", nvidia_driver_branch="590")
    assert rc != 0 and "nvidia-driver-pinning-590" in msg and "Nothing was changed" not in msg, msg
    assert "No driver package was installed, removed or held" in msg, msg
    for path in ("/etc/apt/keyrings/gpufleet-nvidia-cuda.asc", "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources",
                 "/etc/apt/preferences.d/gpufleet-nvidia-cuda"):
        assert path in msg, msg
        host.sh("test -f %s" % path)
    assert host.driver() == before

    rc, _changed, msg, tail = host.role(nvidia_driver_source="nvidia", nvidia_driver_branch="595")
    assert rc == 0, msg or tail
    installed = host.driver()
    assert installed["nvidia-dkms-open"][0] == "595.58.03-1ubuntu1" and "nvidia-driver-pinning-595" in installed, installed
    assert _at(installed, "595.58.03-1ubuntu1") == sorted(set(installed) - {"nvidia-driver-pinning-595"}), installed
    assert not any(held for _version, held in installed.values()), installed

    host.publish("nvidia", "after")
    assert "595.71.05" in host.sh("apt-get update -qq && apt-cache policy nvidia-dkms-open")
    rc, changed, msg, tail = host.role(nvidia_driver_source="nvidia", nvidia_driver_branch="595")
    assert (rc, changed) == (0, 0), msg or tail
    assert host.driver() == installed
