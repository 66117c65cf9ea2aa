"""module_utils/host_state: the shared reads of the state modules (issue 20).

Real parts: the dpkg database and apt of the machine running the tests (a Debian 12 development or CI
machine) are read, read-only, and host_state's answers are compared with what dpkg-query and
apt-cache say about the same database; files are real files in tmp_path, compared the way
ansible.builtin.template/copy would. The alternatives file is the real one of an installed
alternative when the machine has any. Nothing here needs root or changes the machine.
"""

import os
import pathlib
import shutil
import subprocess

import pytest
from support.requires import requires

from ansible_collections.gpufleet.llm_server.plugins.module_utils import apt_transaction as at
from ansible_collections.gpufleet.llm_server.plugins.module_utils import host_state as hs

DPKG_STATUS = pathlib.Path("/var/lib/dpkg/status")
needs_dpkg = requires(not DPKG_STATUS.is_file() or not shutil.which("dpkg-query"), "a dpkg database and dpkg-query")
APT_ENV = dict(os.environ, LC_ALL="C", LANG="C")


@needs_dpkg
def test_status_file_agrees_with_dpkg_query_on_this_machine():
    packages = hs.parse_dpkg_status_file(DPKG_STATUS.read_text())
    out = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}\t${Package}\t${Version}\n"],
                         capture_output=True, text=True, check=True, env=APT_ENV).stdout
    assert hs.installed_and_held(packages) == at.parse_dpkg_status(out)
    assert len(packages) > 50
    assert hs.unsettled(packages) == []


@needs_dpkg
@requires(not shutil.which("apt-cache"), "apt-cache")
@pytest.mark.parametrize("root", ["apt", "python3", "dpkg"])
def test_closure_agrees_with_apt_cache_depends_on_installed_packages(root):
    """apt_transaction's closure (`apt-cache depends --recurse`) also names providers that are NOT installed
    (on Debian 12 `libelogind0` for apt's libsystemd0); the removal rule only looks at installed names."""
    packages = hs.parse_dpkg_status_file(DPKG_STATUS.read_text())
    installed = hs.installed_and_held(packages)[0]
    argv = ["apt-cache", "depends", "--recurse", "--installed", "--no-recommends", "--no-suggests", "--no-conflicts",
            "--no-breaks", "--no-replaces", "--no-enhances", root]
    apt = at.parse_depends_closure(subprocess.run(argv, capture_output=True, text=True, check=True, env=APT_ENV).stdout)
    mine = hs.dependency_closure(packages, [root])
    assert root in mine
    assert mine == apt & set(installed)


def test_relations_keep_every_alternative_and_drop_versions_and_arch():
    assert hs.parse_relations("a (>= 1.2), b | c:any (<< 3), d [amd64],\n e") == [["a"], ["b", "c"], ["d"], ["e"]]
    assert hs.parse_relations("") == []


def test_status_parser_continuations_multiarch_and_states():
    text = ("Package: libfoo\nStatus: install ok installed\nArchitecture: i386\nVersion: 1\n\n"
            "Package: libfoo\nStatus: hold ok installed\nArchitecture: amd64\nVersion: 1\nDepends: a,\n b\n\n"
            "Package: broken\nStatus: install reinstreq half-installed\nVersion: 2\n\n"
            "Package: gone\nStatus: deinstall ok config-files\nVersion: 3\n")
    packages = hs.parse_dpkg_status_file(text)
    # the first installed stanza of a multi-arch name is kept
    assert packages["libfoo"]["arch"] == "i386"
    assert hs.installed_and_held(packages) == ({"libfoo": "1"}, set())
    assert hs.unsettled(packages) == ["broken"]
    assert hs.parse_dpkg_status_file("Package: x\nStatus: install ok installed\nDepends: a,\n b\n")["x"]["depends"] == "a,\nb"


def test_compare_file_like_template(tmp_path):
    path = tmp_path / "f.conf"
    me = hs.file_state(str(path))
    spec = {"path": str(path), "content": "x = 1\n", "mode": "0644"}
    assert hs.compare_file(spec, me) == ["absent"]
    assert hs.compare_file(dict(spec, content=None), me) == []
    path.write_bytes(b"x = 1\n")
    path.chmod(0o600)
    state = hs.file_state(str(path))
    assert state["kind"] == "file" and state["mode"] == "0600"
    assert hs.compare_file(spec, state) == ["mode 0600, wanted 0644"]
    path.chmod(0o644)
    assert hs.compare_file(spec, hs.file_state(str(path))) == []
    # a missing final newline is a different file for template (checksum of the bytes)
    assert hs.compare_file(dict(spec, content="x = 1"), hs.file_state(str(path))) == ["content differs"]
    owner = hs.file_state(str(path))["owner"]
    assert hs.compare_file(dict(spec, owner=owner), hs.file_state(str(path))) == []
    assert hs.compare_file(dict(spec, owner="no-such-user-gpufleet"), hs.file_state(str(path))) == [
        "owner %s, wanted no-such-user-gpufleet" % owner]
    assert hs.compare_file(dict(spec, content=None), hs.file_state(str(path))) == ["present, wanted absent"]
    with pytest.raises(ValueError, match="octal"):
        hs.compare_file(dict(spec, mode="u=rw"), hs.file_state(str(path)))


def test_a_link_or_directory_is_not_the_file_template_writes(tmp_path):
    (tmp_path / "real").write_text("x = 1\n")
    os.symlink(tmp_path / "real", tmp_path / "link")
    spec = {"content": "x = 1\n", "mode": "0644"}
    assert hs.compare_file(spec, hs.file_state(str(tmp_path / "link"))) == ["a link, wanted a file"]
    assert hs.compare_file(spec, hs.file_state(str(tmp_path))) == ["a directory, wanted a file"]
    assert hs.compare_directory({"mode": "0755"}, hs.file_state(str(tmp_path / "real"))) == ["a file, wanted a directory"]
    assert hs.compare_directory({}, hs.file_state(str(tmp_path))) == []
    assert hs.compare_link(str(tmp_path / "real"), hs.read_link(str(tmp_path / "link"))) == []
    assert hs.compare_link("/elsewhere", hs.read_link(str(tmp_path / "link"))) == [
        "points to %s, wanted /elsewhere" % (tmp_path / "real")]
    assert hs.compare_link("/x", hs.read_link(str(tmp_path / "real"))) == ["no link"]


def _some_alternative():
    directory = pathlib.Path(hs.DPKG_ALTERNATIVES)
    if not directory.is_dir():
        return None
    for entry in sorted(directory.iterdir()):
        if entry.is_file() and shutil.which("update-alternatives"):
            return entry.name
    return None


@requires(_some_alternative() is None, "a dpkg alternative and update-alternatives")
def test_alternatives_file_agrees_with_update_alternatives():
    name = _some_alternative()
    parsed, current = hs.read_alternative(name)
    out = subprocess.run(["update-alternatives", "--query", name], capture_output=True, text=True, check=True,
                         env=APT_ENV).stdout
    fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line and not line.startswith(" "))
    assert parsed["status"] == fields["Status"]
    assert parsed["link"] == fields["Link"]
    assert current == fields["Value"]
    alternatives = [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("Alternative: ")]
    assert [choice["path"] for choice in parsed["choices"]] == alternatives


def test_alternatives_with_slaves():
    # data/alternatives/awk: /var/lib/dpkg/alternatives/awk copied from a Debian 12 machine (dpkg 1.21, mawk installed).
    text = (pathlib.Path(__file__).parent / "data" / "alternatives" / "awk").read_text()
    parsed = hs.parse_alternatives(text)
    assert parsed["status"] == "auto" and parsed["link"] == "/usr/bin/awk"
    assert [slave[0] for slave in parsed["slaves"]] == ["awk.1.gz", "nawk", "nawk.1.gz"]
    assert parsed["choices"] == [
        {"path": "/usr/bin/mawk", "priority": 5,
         "slaves": {"awk.1.gz": "/usr/share/man/man1/mawk.1.gz", "nawk": "/usr/bin/mawk",
                    "nawk.1.gz": "/usr/share/man/man1/mawk.1.gz"}}]
    # a choice without a man page leaves that slave's line empty
    text = text.replace("/usr/share/man/man1/mawk.1.gz\n/usr/bin/mawk\n/usr/share/man/man1/mawk.1.gz", "\n/usr/bin/mawk\n")
    assert hs.parse_alternatives(text)["choices"][0]["slaves"] == {"nawk": "/usr/bin/mawk"}


def test_systemctl_show_and_lists_signature(tmp_path):
    units = hs.parse_systemctl_show("Id=a.service\nActiveState=active\n\nId=b.service\nActiveState=inactive\n")
    assert [u["ActiveState"] for u in units] == ["active", "inactive"]
    (tmp_path / "deb_dists_x_Packages").write_text("Package: a\n")
    (tmp_path / "lock").write_text("")
    before = hs.apt_lists_signature(hs.lists_entries(str(tmp_path)))
    assert [e[0] for e in hs.lists_entries(str(tmp_path))] == ["deb_dists_x_Packages"]
    (tmp_path / "deb_dists_x_Packages").write_text("Package: a\nPackage: b\n")
    assert hs.apt_lists_signature(hs.lists_entries(str(tmp_path))) != before
    assert hs.lists_entries(str(tmp_path / "none")) == []
