"""The stand-in Hub (tests/support/fake_hf_hub.py) read by the real huggingface_hub client.

The model_download role trusts two pieces of Hub metadata: the tree listing (size, git blob id, and
`lfs.oid` = the sha256 of an LFS file), which the manifest is built from, and the HEAD /resolve answer
(`X-Linked-Etag` = that sha256 and `X-Linked-Size` for LFS files, `ETag` = git blob id and
`Content-Length` for the others, `X-Repo-Commit`), which huggingface_hub downloads by. This checks that
the double answers both the way the real Hub does, through the real client's own parsing (no header
is read by hand here, so a renamed header in a later huggingface_hub shows up as a failure). Where each
fact about the real Hub comes from is listed in the double's docstring.
"""

from __future__ import annotations

import hashlib

import httpx2  # huggingface_hub 2.x's HTTP client (a dependency of it)
import pytest
from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url
from huggingface_hub.utils import close_session

from support.fake_hf_hub import FakeHub, model_files

REPO = "gpufleet-test/contract"


@pytest.fixture(autouse=True)
def fresh_connections():
    """Each test's hub reuses the port of the last one: drop the client's pooled keep-alive connections,
    which the previous hub's handler threads would otherwise still answer."""
    close_session()
    yield
    close_session()


def git_blob_oid(data: bytes) -> str:  # what `git hash-object` prints
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_file_metadata_matches_what_the_hub_answers():
    files = model_files(2, 64 * 1024, seed=7)
    with FakeHub(REPO, files) as hub:
        for name, data in files.items():
            url = hf_hub_url(REPO, name, revision="main", endpoint=hub.endpoint)
            meta = get_hf_file_metadata(url, token=False, endpoint=hub.endpoint)
            assert meta.commit_hash == hub.commit and meta.size == len(data), name
            if name.endswith(".safetensors"):  # LFS: sha256 etag, real size (not the pointer's), CDN location
                assert meta.etag == hashlib.sha256(data).hexdigest(), name
                assert meta.location.startswith("http://127.0.0.2:%d/cdn/" % hub.port), meta.location
            else:  # regular file: git blob id, served where asked
                assert meta.etag == git_blob_oid(data), name
                assert meta.location == url


def test_lfs_head_answer_is_a_redirect_carrying_the_linked_headers():
    files = model_files(1, 1024)
    name = "model-00001-of-00001.safetensors"
    with FakeHub(REPO, files) as hub:
        response = httpx2.head(hf_hub_url(REPO, name, endpoint=hub.endpoint), follow_redirects=False)
        assert response.status_code == 302
        sha = hashlib.sha256(files[name]).hexdigest()
        assert response.headers["x-linked-etag"] == '"%s"' % sha  # quoted, as on the Hub
        assert response.headers["x-linked-size"] == str(len(files[name]))
        assert response.headers["x-repo-commit"] == hub.commit
        pointer = hub.tree()[[e["path"] for e in hub.tree()].index(name)]
        assert response.headers["etag"] == '"%s"' % pointer["oid"]  # the pointer's blob id


def test_tree_listing_matches_what_the_manifest_is_built_from():
    files = model_files(3, 32 * 1024, seed=3)
    with FakeHub(REPO, files) as hub:
        api = HfApi(endpoint=hub.endpoint, token=False)
        info = api.repo_info(REPO, revision="main")
        assert info.sha == hub.commit
        assert sorted(s.rfilename for s in info.siblings) == sorted(files)
        entries = {e.path: e for e in api.list_repo_tree(REPO, revision=hub.commit, recursive=True)}
        assert sorted(entries) == sorted(files)
        for name, data in files.items():
            entry = entries[name]
            assert entry.size == len(data), name
            if name.endswith(".safetensors"):
                assert entry.lfs.sha256 == hashlib.sha256(data).hexdigest() and entry.lfs.size == len(data)
                pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                           % (entry.lfs.sha256, len(data))).encode()
                assert entry.blob_id == git_blob_oid(pointer) and entry.lfs.pointer_size == len(pointer)
            else:
                assert entry.lfs is None and entry.blob_id == git_blob_oid(data), name
