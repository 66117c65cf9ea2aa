"""module_utils/package_state: which requests of an apt state=present task are already installed, from dpkg alone.

Real parts: this machine's /var/lib/dpkg/status, compared with dpkg-query's answer on the same database (read-only,
no root needed). The NVIDIA stanzas come from dpkg_fixtures (recorded indexes and a recorded molecule installed set,
see its docstring); the other states (half-installed, config-files, foreign architecture) are written here in
dpkg's status format, with the Status words dpkg uses (dpkg-query(1), deb-control(5)).
"""

import pathlib
import shutil
import subprocess
import sys

from support.requires import requires

from ansible_collections.gpufleet.llm_server.plugins.module_utils import package_state as ps

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import dpkg_fixtures as fx  # noqa: E402

DPKG_STATUS = pathlib.Path("/var/lib/dpkg/status")
needs_dpkg = requires(not DPKG_STATUS.is_file() or not shutil.which("dpkg-query"), "a dpkg database and dpkg-query")


def _dpkg_query():
    """[(abbrev, package, architecture, version)] as dpkg-query prints them."""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}\t${Package}\t${Architecture}\t${Version}\n"],
                         capture_output=True, text=True, check=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"}).stdout
    return [tuple(line.split("\t")) for line in out.splitlines() if line.count("\t") == 3]


@needs_dpkg
def test_every_package_of_this_machine_agrees_with_dpkg_query():
    rows = _dpkg_query()
    names = [row[1] for row in rows]
    single = [row for row in rows if names.count(row[1]) == 1]  # multi-arch names: see the module's documentation
    native = [row[2] for row in rows if row[1] == "dpkg"][0]
    text = ps.read_status(str(DPKG_STATUS))
    requests = [row[1] for row in single]
    missing, installed, reasons = ps.missing_packages(requests, text)
    for abbrev, name, arch, version in single:
        # "ii " / "hi ": installed, no error flag; a bare name is the native architecture's (or arch all)
        expect_installed = abbrev[1] == "i" and abbrev[2] == " " and arch in (native, "all")
        assert (name in installed) == expect_installed, (abbrev, name, arch, reasons.get(name))
        if expect_installed:
            assert installed[name] == version
    assert len(installed) > 50
    assert set(missing) | set(installed) == set(requests)
    # versions and architectures, on real packages
    abbrev, name, arch, version = [row for row in single if row[1] == "dpkg"][0]
    missing, installed, reasons = ps.missing_packages(
        ["dpkg=" + version, "dpkg:" + arch, "dpkg=0.0-not-this", "dpkg:" + ("i386" if arch != "i386" else "amd64")],
        text)
    assert installed == {"dpkg=" + version: version, "dpkg:" + arch: version}
    assert missing == ["dpkg=0.0-not-this", "dpkg:" + ("i386" if arch != "i386" else "amd64")]
    assert reasons["dpkg=0.0-not-this"] == "version %s installed, 0.0-not-this requested" % version


def _nvidia_host(states=None):
    installed, held = fx.recorded_ubuntu_580()
    return installed, fx.status_text("ubuntu-noble", installed, held=held, states=states)


def test_recorded_driver_host_installed_and_held_count():
    installed, text = _nvidia_host()
    held = [pair[0] for pair in installed if pair[0] in fx.recorded_ubuntu_580()[1]]
    requests = [pair[0] for pair in installed] + ["dkms"]
    missing, found, reasons = ps.missing_packages(requests, text)
    assert missing == [] and reasons == {}
    assert found == dict(installed, dkms=fx.OTHERS["dkms"])
    assert held, "the recorded host holds its driver packages: a held package counts as installed"


def test_half_installed_half_configured_and_config_files_are_missing():
    installed = _nvidia_host()[0]
    names = [pair[0] for pair in installed][:3]
    text = _nvidia_host(states={names[0]: "iU", names[1]: "iF", names[2]: "rc"})[1]
    missing, found, reasons = ps.missing_packages(names, text)
    assert missing == names and found == {}
    assert reasons[names[0]] == "dpkg status is 'install ok unpacked'"
    assert reasons[names[1]] == "dpkg status is 'install ok half-configured'"
    assert reasons[names[2]] == "dpkg status is 'deinstall ok config-files'"


def test_names_only_apt_can_decide_are_missing():
    installed, text = _nvidia_host()
    name, version = installed[0]
    requests = [
        "linux-modules-nvidia-580-open-{kernel_flavor}",  # not rendered
        name + ">=" + version,  # apt's >=: needs apt's version comparison
        name + "=" + version.split("-")[0] + "*",  # a pattern: apt may move to a newer match
        "nvidia-*",  # a name glob
        "/tmp/nvidia.deb",
        "nvidia-kernel-common",  # virtual in the recorded stanzas? either way not installed under that name here
        "Upper-Case",
    ]
    missing, found, reasons = ps.missing_packages(requests, text)
    assert missing == requests and found == {}
    assert "not a plain package name" in reasons[requests[0]]
    assert "not a plain package name" in reasons[requests[1]]
    assert reasons[requests[2]].startswith("version pattern")
    assert "not known to dpkg" in reasons["nvidia-kernel-common"]


def test_a_provided_virtual_name_is_left_to_apt():
    text = ("Package: mawk\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.3.4.20200120-3.1\n"
            "Provides: awk\n")
    missing, found, reasons = ps.missing_packages(["awk", "mawk"], text)
    assert missing == ["awk"] and found == {"mawk": "1.3.4.20200120-3.1"}


def test_foreign_architecture_only_is_missing_for_a_bare_name():
    text = ("Package: dpkg\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.21.22\n\n"
            "Package: libfoo1\nStatus: install ok installed\nArchitecture: i386\nVersion: 1.0-1\n\n"
            "Package: foo-data\nStatus: install ok installed\nArchitecture: all\nVersion: 1.0-1\n")
    missing, found, reasons = ps.missing_packages(["libfoo1", "libfoo1:i386", "foo-data", "dpkg"], text)
    assert missing == ["libfoo1"]
    assert reasons["libfoo1"] == "installed for architecture i386 only, not the native amd64"
    assert found == {"libfoo1:i386": "1.0-1", "foo-data": "1.0-1", "dpkg": "1.21.22"}


def test_reinstreq_flag_is_missing():
    text = "Package: gpg\nStatus: install reinstreq installed\nArchitecture: amd64\nVersion: 2.2.40-1.1\n"
    missing, found, reasons = ps.missing_packages(["gpg"], text)
    assert missing == ["gpg"] and reasons["gpg"] == "dpkg status is 'install reinstreq installed'"


def test_unreadable_database_makes_everything_missing_once_in_order(tmp_path):
    text = ps.read_status(str(tmp_path / "no-status"))
    assert text is None
    missing, found, reasons = ps.missing_packages(["git", "gpg", "git"], text)
    assert missing == ["git", "gpg"] and found == {}
    assert reasons == {"git": "cannot read dpkg's status database", "gpg": "cannot read dpkg's status database"}


def test_parse_request():
    nccl = {"name": "libnccl2", "arch": None, "version": "2.27.3-1+cuda12.9"}
    assert ps.parse_request("libnccl2=2.27.3-1+cuda12.9") == nccl
    assert ps.parse_request("libc6:amd64=2.36-9") == {"name": "libc6", "arch": "amd64", "version": "2.36-9"}
    assert ps.parse_request("g++") == {"name": "g++", "arch": None, "version": None}
    assert ps.parse_request("git>=1") is None and ps.parse_request("") is None
