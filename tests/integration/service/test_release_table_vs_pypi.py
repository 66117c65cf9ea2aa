"""The committed release table against the real releases it was generated from.

plugins/module_utils/sglang_release_table.py is what preflight checks flags against before SGLang is
built. Here real releases are downloaded from PyPI (tests/support/pypi.py, cached) and read from
source with the same reader preflight uses on an installed tree; every flag definition, the
quantization minimums, the hybrid GDN sets and the successor each deprecated flag names (its action's
new_flag= or its help text) must equal the table's entry for that release. A
reader change or a hand edit of the table fails here until the table is regenerated with
scripts/generate-sglang-release-table.py. The releases span both flag layouts and the changes the
rules depend on (--fp4-gemm-backend from 0.5.8, arg_groups from 0.5.12, prefill/decode GDN checks
from 0.5.16)."""

import importlib.util
import pathlib

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils import sglang_flags as sf
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_releases import release_table
from support import pypi

ROOT = pathlib.Path(__file__).resolve().parents[3]
RELEASES = ["0.5.4", "0.5.8", "0.5.10.post1", "0.5.12", "0.5.16", "0.5.23"]


def _definition(flag):
    return (tuple(flag.names), flag.dest, bool(flag.takes_value), flag.nargs, flag.value_type,
            tuple(sorted(flag.choices)) if flag.choices is not None else None, bool(flag.deprecated), bool(flag.repeatable),
            flag.successor)


@pytest.fixture(scope="module", params=RELEASES)
def tree(request, tmp_path_factory):
    version = request.param
    archive = pypi.download("sglang", version, prefer="wheel")
    dest = pypi.extract(archive, tmp_path_factory.mktemp("sglang-" + version))
    [pkg] = [p.parent.parent for p in dest.rglob("srt/server_args.py")
             if p.parent.parent.name == "sglang" and "multimodal_gen" not in str(p)]
    return version, str(pkg)


def test_table_matches_the_release(tree):
    version, pkg = tree
    real = sf.load_flag_table(pkg)
    table = release_table(version)
    assert real.version == version and table.layout == real.layout
    assert sorted(map(_definition, table.definitions()), key=repr) == sorted(map(_definition, real.definitions()), key=repr)
    assert {o: _definition(f) for o, f in table.flags.items()} == {o: _definition(f) for o, f in real.flags.items()}
    assert table.quant_min_capability == real.quant_min_capability
    assert table.gdn_blackwell == real.gdn_blackwell


def test_generator_ranges_and_grouping():
    spec = importlib.util.spec_from_file_location("generator", ROOT / "scripts" / "generate-sglang-release-table.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    releases = ["a", "b", "c", "d", "e"]
    assert generator.ranges([0, 1, 2, 4], releases) == "a-c,e"
    assert generator.ranges([3], releases) == "d"
    assert generator.grouped([1, 1, 2, 1, None], releases) == [("a-b,d", 1), ("c", 2), ("e", None)]
