"""plugins/module_utils/sglang_build_upstream.py: what the role reads from a Rust-era tree (issue 32).

Real parts: upstream's own manifests and setup.py (tests/support/upstream_main, the commit of each in its
README); upstream's setup.py selection rules are the reference the selection is compared with (its
`_selected_rust_extensions` run on stand-in extension objects); the toolchain checks run the real cargo and
rustc of this machine (rustup's ~/.cargo, 1.95 on the development machine, or Debian's package cargo, which
scripts/test.sh installs where there is none; the Molecule containers have none).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import types

import pytest
from support.requires import requires

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_build_upstream as up

FIXTURE = pathlib.Path(__file__).resolve().parents[2] / "support" / "upstream_main"


def _toolchain_home():
    """The directory above the bin/ of this machine's real cargo: rustup's ~/.cargo (1.95 on the development
    machine) or Debian's /usr (package cargo, which scripts/test.sh installs when there is none)."""
    found = shutil.which("cargo") or shutil.which("cargo", path="/root/.cargo/bin")
    return pathlib.Path(found).parent.parent if found else None


CARGO_HOME = _toolchain_home()
NO_CARGO = CARGO_HOME is None or not (CARGO_HOME / "bin" / "rustc").exists()


# rustup's cargo and rustc are proxies that find their toolchains through RUSTUP_HOME (default ~/.rustup): a
# run with another HOME (scripts/test-cold.sh) must still name the machine's.
RUSTUP_ENV = ({"RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(CARGO_HOME.parent / ".rustup"))}
              if CARGO_HOME is not None and CARGO_HOME.name == ".cargo" else {})


def run(argv, env=None):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env=dict(os.environ, **RUSTUP_ENV, **(env or {})))
    return proc.returncode, proc.stdout, proc.stderr


def manifests():
    workspace = (FIXTURE / "rust" / "Cargo.toml").read_text()
    return {p: (FIXTURE / p).read_text() if (FIXTURE / p).exists() else None for p in up.workspace_manifests(workspace)}


def declared():
    return up.rust_extensions(manifests())


def test_the_workspace_manifests_are_those_setup_py_reads():
    workspace = (FIXTURE / "rust" / "Cargo.toml").read_text()
    assert up.workspace_manifests(workspace) == [
        "proto/Cargo.toml", "rust/sglang-grpc/Cargo.toml", "rust/sglang-mm/Cargo.toml",
        "rust/sglang-processor/Cargo.toml", "rust/sglang-renderer/Cargo.toml", "rust/sglang-server/Cargo.toml",
        "rust/sglang-radix-tree/Cargo.toml"]
    names = [(e["crate"], e["name"], e["torch"]) for e in declared()]
    assert names == [("sglang-grpc", "sglang.srt.rust_extensions._grpc", False),
                     ("sglang-mm", "sglang.srt.multimodal._core", False),
                     ("sglang-radix-tree", "sglang.srt.mem_cache.rust_tree_core.mem_cache", True),
                     ("sglang-server", "sglang.srt.server._core", False)]
    assert up.toolchain_channel((FIXTURE / "rust" / "rust-toolchain.toml").read_text()) == "1.92"
    assert up.rust_era((FIXTURE / "python" / "setup.py.upstream").read_text(), workspace)
    assert not up.rust_era("from setuptools import setup\nsetup()\n", workspace)


def upstream_selection(env_value, names):
    """Upstream's own _selected_rust_extensions (python/setup.py), executed on objects with .name."""
    source = (FIXTURE / "python" / "setup.py.upstream").read_text()
    namespace = {"os": types.SimpleNamespace(environ={} if env_value is None else {"SGLANG_BUILD_RUST_EXTS": env_value}),
                 "re": re}
    for function in ("_match_by_substring", "_selected_rust_extensions"):
        block = re.search(r"^def %s\(.*?(?=^\S)" % function, source, re.S | re.M).group(0)
        exec(compile(block, "setup.py", "exec"), namespace)  # pylint: disable=exec-used  # upstream's own rule
    namespace["_BUILD_RUST_EXTS_ENV"] = "SGLANG_BUILD_RUST_EXTS"
    return [e.name for e in namespace["_selected_rust_extensions"]([types.SimpleNamespace(name=n) for n in names])]


@pytest.mark.parametrize("value", ["all", "none", ["grpc"], ["MULTI", "server"], "grpc,core"])
def test_the_selection_is_upstream_s(value):
    env_value, tokens, error = up.rust_request(value)
    assert error is None
    selected, unmatched = up.select(declared(), "", env_value, tokens)
    assert unmatched == []
    names = [e["name"] for e in declared()]
    assert [e["name"] for e in selected] == upstream_selection(env_value, names)


def test_bad_requests_are_named():
    assert up.rust_request([])[2] and up.rust_request(["ok", "no spaces"])[2] and up.rust_request(3)[2]
    _env, tokens, _error = up.rust_request(["grpc", "nosuch"])
    assert up.select(declared(), "", "grpc,nosuch", tokens)[1] == ["nosuch"]
    # the pyproject allowlist narrows first, as setup.py's
    assert [e["name"] for e in up.select(declared(), '[tool.sglang]\nrust-extensions = ["multimodal"]\n', "all", None)[0]] \
        == ["sglang.srt.multimodal._core"]


def test_no_toolchain_directory():
    found = up.check_toolchain("/nonexistent/rust", "1.92", run)
    assert found["problems"] == ["/nonexistent/rust does not exist"]


@requires(NO_CARGO, "a real cargo and rustc (rustup's or Debian's package cargo)")
def test_a_real_toolchain_passes_and_an_older_one_than_the_channel_does_not():
    own = up.check_toolchain(str(CARGO_HOME), "1.0", run)
    assert own["problems"] == [], own
    version = up.version_tuple(own["rustc"])
    found = up.check_toolchain(str(CARGO_HOME), "%d.%d" % version[:2], run)
    assert found["problems"] == [], found
    newer = "%d.%d" % (version[0], version[1] + 1)
    too_new = up.check_toolchain(str(CARGO_HOME), newer, run)
    assert any("older than the channel %s" % newer in p for p in too_new["problems"]), too_new


@requires(NO_CARGO, "a real cargo and rustc (rustup's or Debian's package cargo)")
@requires(os.geteuid() != 0, "root (to give a copy of the toolchain's directory another owner)")
def test_a_toolchain_not_owned_by_root_is_refused(tmp_path):
    copy = tmp_path / "rust"
    (copy / "bin").mkdir(parents=True)
    for tool in ("cargo", "rustc"):
        os.symlink(CARGO_HOME / "bin" / tool, copy / "bin" / tool)
    os.chown(copy / "bin", 65534, 65534)
    found = up.check_toolchain(str(copy), "1.92", run)
    assert found["problems"] == ["%s is owned by uid 65534, not root" % (copy / "bin")], found
    declared_ = declared()
    msg = up.toolchain_refusal("all", "0" * 40, "1.92", found, declared_, declared_)
    assert "not root" in msg and "set sglang_build_rust_extensions: none" in msg and "--default-toolchain 1.92" in msg
