"""A stand-in for huggingface.co, small enough to read: a test double for the Hub, on loopback.

TEST DOUBLE. The real Hub cannot be reached from the test machines (only PyPI is), so the
model_download tests point the *real* huggingface_hub library (HF_ENDPOINT=http://127.0.0.1:PORT) at this
server. It serves exactly what the role's helper and `huggingface_hub.hf_hub_download(..., local_dir=...)`
use for a model repo, as read from huggingface_hub 2.4.0 (hf_api.py, file_download.py, utils/_http.py):

- GET  /api/models/{repo}/revision/{revision}      repo_info: {"id", "sha", "siblings": [{"rfilename"}]}
- GET  /api/models/{repo}/tree/{commit}?recursive  list_repo_tree: [{"type": "file", "path", "size", "oid",
                                                    "lfs": {"oid", "size", "pointerSize"}}]
- HEAD /{repo}/resolve/{revision}/{file}           get_hf_file_metadata: X-Repo-Commit; regular files 200 with
                                                    ETag (git blob id) + Content-Length; LFS files 302 to the
                                                    "CDN" with X-Linked-Etag (sha256) + X-Linked-Size
- GET  /{repo}/resolve/{revision}/{file}           regular file body (Range supported)
- GET  /cdn/{sha256}   on 127.0.0.2 (another origin, like the real CDN: the library drops the Authorization
                       header there)                LFS body, Range supported (206 + Content-Range)

Where each replayed fact about the real Hub comes from (the manifest is built from the first four):
- tree entry fields `type`, `path`, `size`, `oid` (git blob id) and `lfs: {oid (= sha256), size,
  pointerSize}`: the Hub API's tree listing as documented for huggingface.js (ListFileEntry, "pointerSize:
  size of the raw pointer file, 100~200 bytes") and parsed by huggingface_hub 2.4.0 hf_api.RepoFile
  (`blob_id = oid`, `BlobLfsInfo(sha256=lfs["oid"], ...)`); the Hub's file pages show the same
  "SHA256 / Pointer size / Size of remote file" for LFS files.
- `X-Linked-Etag: "<sha256>"` (quoted) and `X-Linked-Size` on the HEAD of an LFS file, `X-Repo-Commit` on
  every resolve: a recorded `curl -sI https://huggingface.co/<repo>/resolve/main/<file>` answer
  (x-linked-size, x-linked-etag, x-repo-commit); huggingface_hub's constants HUGGINGFACE_HEADER_X_LINKED_ETAG
  / _SIZE / X_REPO_COMMIT and get_hf_file_metadata, which prefers them over ETag / Content-Length; and its
  _xet_file_metadata_from_tree_cache ("Mirror the server's HEAD response: ETag/size come from the LFS
  metadata"), i.e. the HEAD's sha256 is the tree's lfs.oid.
- the LFS HEAD answer is a redirect off the Hub (302, Location on another host) whose size is the file's,
  not the pointer's: huggingface_hub's own test against the real Hub (test_get_hf_file_metadata_from_a_lfs_file:
  gpt2 tf_model.h5, size 497933648, location on the CDN host); _httpx2_follow_hub_redirects_with_backoff
  follows only redirects that stay on the Hub, so the metadata is read from the redirect itself.
- `ETag` of a regular file = its git blob id, with Content-Length and no redirect: huggingface_hub names
  its cache blobs by the ETag it reads (the Hub Local Cache reference: git SHA-1 for regular files, SHA-256
  for LFS files) and test_get_hf_file_metadata_basic (config.json of a pinned commit on the real Hub: an
  etag, size 851, location = the URL asked). The role itself takes blob ids from the tree listing only
  (hf_api.list_repo_tree's docstring shows the real gpt2 listing: 40-hex blob ids, `lfs` only on LFS files).
tests/integration/model_download/test_fake_hub_contract.py checks this double against the real client's
parsing. Not replayed: Xet (X-Xet-Hash, the xet-auth Link header, `xetHash` in the tree); without it
huggingface_hub uses its plain HTTP download path, which is also what it does when hf_xet is absent.

Knobs for tests: `token` (require `Authorization: Bearer <token>` on Hub requests; 401 otherwise),
`fail_once` (file names whose first body GET is cut at `cut_at` bytes, default half: the library resumes
with a Range request once it has written a 10 MiB chunk, else it restarts the file),
`fail_always` (file names whose body GET answers 500), `bytes_per_second` (throttle LFS bodies) and
`requests` (a log of every request: method, host, path, Range, Authorization; `hook(entry)` sees each).

Run by hand: python tests/support/fake_hf_hub.py --port 30300 --shards 3 (then HF_ENDPOINT=http://127.0.0.1:30300).
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import os
import re
import threading
import time
import urllib.parse

try:
    from support.ports import PortPool
except ImportError:  # run by hand as a script: tests/support is sys.path[0]
    from ports import PortPool  # type: ignore[no-redef]

PORTS = range(30300, 30400)
_PORT_POOL = PortPool(PORTS)
CDN_HOST = "127.0.0.2"


def _git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _lfs_pointer(data: bytes) -> bytes:
    return ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
            % (hashlib.sha256(data).hexdigest(), len(data))).encode()


def model_files(shards: int, shard_size: int, seed: int = 0) -> dict[str, bytes]:
    """A small model repo: config, tokenizer, index and SHARDS safetensors shards of random bytes."""
    rnd = __import__("random").Random(seed)
    files = {
        ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": b"# stand-in model for the model_download tests\n",
        "config.json": json.dumps({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe"}).encode(),
        "tokenizer_config.json": b'{"model_max_length": 4096}',
    }
    weight_map = {}
    for k in range(1, shards + 1):
        name = "model-%05d-of-%05d.safetensors" % (k, shards)
        files[name] = rnd.randbytes(shard_size)
        weight_map["layer.%d.weight" % k] = name
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": shards * shard_size}, "weight_map": weight_map}).encode()
    return files


class FakeHub:
    """One model repo (`repo_id`, branch `main` and its commit) served on 127.0.0.1 and 127.0.0.2."""

    def __init__(self, repo_id: str, files: dict[str, bytes], *, token: str | None = None,
                 fail_once: set[str] | None = None, fail_always: set[str] | None = None,
                 bytes_per_second: int | None = None, cut_at: int | None = None, port: int | None = None,
                 hook=None):
        self.repo_id = repo_id
        self.files = dict(files)
        self.token = token
        self.fail_once = set(fail_once or ())
        self.fail_always = set(fail_always or ())
        self.bytes_per_second = bytes_per_second
        self.cut_at = cut_at
        self.hook = hook
        self.commit = hashlib.sha1(repr(sorted((k, hashlib.sha256(v).hexdigest()) for k, v in files.items()))
                                   .encode()).hexdigest()
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._servers: list[http.server.ThreadingHTTPServer] = []
        self._wanted_port = port
        self.port = 0

    # -- repo data -------------------------------------------------------------------------------------
    @staticmethod
    def is_lfs(name: str) -> bool:
        return name.endswith(".safetensors")

    def tree(self) -> list[dict]:
        entries = []
        for name, data in sorted(self.files.items()):
            if self.is_lfs(name):
                pointer = _lfs_pointer(data)
                entries.append({"type": "file", "path": name, "size": len(data), "oid": _git_blob_oid(pointer),
                                "lfs": {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                                        "pointerSize": len(pointer)}})
            else:
                entries.append({"type": "file", "path": name, "size": len(data), "oid": _git_blob_oid(data)})
        return entries

    def by_sha256(self, sha: str) -> tuple[str, bytes] | None:
        for name, data in self.files.items():
            if hashlib.sha256(data).hexdigest() == sha:
                return name, data
        return None

    # -- log helpers -------------------------------------------------------------------------------
    def log(self, entry: dict) -> None:
        with self._lock:
            self.requests.append(entry)
        if self.hook:
            self.hook(entry)

    def body_downloads(self) -> list[dict]:
        """GET requests that returned (part of) a file body."""
        with self._lock:
            return [r for r in self.requests if r["method"] == "GET" and r.get("file") and r["status"] in (200, 206)]

    # -- server ----------------------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        return "http://127.0.0.1:%d" % self.port

    def start(self) -> FakeHub:
        handler = _make_handler(self)
        if self._wanted_port:
            self.port = self._wanted_port
            hub = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), handler)
            try:
                self._servers = [hub, http.server.ThreadingHTTPServer((CDN_HOST, self.port), handler)]
            except OSError:
                hub.server_close()
                raise
        else:
            # A port of the pool (held under its lock until stop(): tests/support/ports.py) on both addresses.
            refused = []
            try:
                while not self._servers:
                    port = _PORT_POOL.take()
                    try:
                        hub = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
                    except OSError:
                        refused.append(port)
                        continue
                    try:
                        cdn = http.server.ThreadingHTTPServer((CDN_HOST, port), handler)
                    except OSError:
                        hub.server_close()
                        refused.append(port)
                        continue
                    self.port = port
                    self._servers = [hub, cdn]
            finally:
                for port in refused:
                    _PORT_POOL.release(port)
        for server in self._servers:
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers = []
        if not self._wanted_port and self.port:
            _PORT_POOL.release(self.port)

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _make_handler(hub: FakeHub):
    resolve = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
    revision = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/revision/(?P<rev>[^/]+)$")
    tree = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)$")
    cdn = re.compile(r"^/cdn/(?P<sha>[0-9a-f]{64})$")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet: the test reads hub.requests
            pass

        # -- plumbing -------------------------------------------------------------------------------
        def _entry(self, status, file=None):
            hub.log({"method": self.command, "host": self.headers.get("Host", ""),
                     "path": urllib.parse.urlsplit(self.path).path, "range": self.headers.get("Range"),
                     "authorization": self.headers.get("Authorization"), "status": status, "file": file,
                     "time": time.monotonic()})

        def _send(self, status, body=b"", headers=None, file=None):
            self._entry(status, file)
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, data, headers=None):
            self._send(200, json.dumps(data).encode(), {"Content-Type": "application/json", **(headers or {})})

        def _error(self, status, message, code=None):
            headers = {"X-Error-Message": message, "Content-Type": "application/json"}
            if code:
                headers["X-Error-Code"] = code
            self._send(status, json.dumps({"error": message}).encode(), headers)

        def _authorized(self):
            if hub.token is None or self.headers.get("Authorization") == "Bearer %s" % hub.token:
                return True
            self._error(401, "Invalid credentials in Authorization header")
            return False

        def _commit_for(self, repo, rev):
            if repo != hub.repo_id:
                self._error(404, "Repository not found", "RepoNotFound")
                return None
            if rev not in ("main", hub.commit):
                self._error(404, "Invalid rev id: %s" % rev, "RevisionNotFound")
                return None
            return hub.commit

        def _body(self, name, data, extra_headers):
            """Send DATA honouring Range; throttled / cut / failed as the hub's knobs say."""
            if name in hub.fail_always:
                self._error(500, "stand-in failure for %s" % name)
                return
            start = 0
            status = 200
            headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream", **extra_headers}
            wanted = self.headers.get("Range")
            if wanted:
                match = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted.strip())
                if not match or int(match.group(1)) >= len(data):
                    self._error(416, "bad range %s" % wanted)
                    return
                start = int(match.group(1))
                total = len(data)
                end = int(match.group(2)) if match.group(2) else total - 1
                data = data[start:end + 1]
                status = 206
                headers["Content-Range"] = "bytes %d-%d/%d" % (start, start + len(data) - 1, total)
            self._entry(status, name)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command == "HEAD":
                return
            cut = None
            with hub._lock:
                if name in hub.fail_once:
                    hub.fail_once.discard(name)
                    cut = min(hub.cut_at, len(data) - 1) if hub.cut_at else len(data) // 2
            sent = 0
            chunk = 16384
            while sent < len(data):
                piece = data[sent:sent + chunk]
                if cut is not None and sent + len(piece) > cut:
                    self.wfile.write(data[sent:cut])
                    self.wfile.flush()
                    self.close_connection = True  # the client sees a body shorter than Content-Length
                    return
                self.wfile.write(piece)
                sent += len(piece)
                if hub.bytes_per_second:
                    time.sleep(len(piece) / hub.bytes_per_second)

        # -- routes ---------------------------------------------------------------------------------
        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
            host = self.headers.get("Host", "").split(":")[0]
            if host == CDN_HOST:
                match = cdn.match(path)
                found = hub.by_sha256(match.group("sha")) if match else None
                if not found:
                    self._error(404, "no such object")
                    return
                self._body(found[0], found[1], {"ETag": '"%s"' % match.group("sha")})
                return
            if not (revision.match(path) or tree.match(path) or resolve.match(path)):
                self._error(404, "not served by the stand-in hub: %s" % path)
                return
            if not self._authorized():
                return
            if match := revision.match(path):
                commit = self._commit_for(match.group("repo"), match.group("rev"))
                if commit:
                    self._json({"id": hub.repo_id, "modelId": hub.repo_id, "sha": commit, "private": hub.token is not None,
                                "siblings": [{"rfilename": name} for name in sorted(hub.files)]})
            elif match := tree.match(path):
                if self._commit_for(match.group("repo"), match.group("rev")):
                    self._json(hub.tree())
            elif match := resolve.match(path):
                commit = self._commit_for(match.group("repo"), match.group("rev"))
                if not commit:
                    return
                name = match.group("file")
                if name not in hub.files:
                    self._error(404, "Entry not found", "EntryNotFound")
                    return
                data = hub.files[name]
                if hub.is_lfs(name):
                    sha = hashlib.sha256(data).hexdigest()
                    self._send(302, b"", {"Location": "http://%s:%d/cdn/%s" % (CDN_HOST, hub.port, sha),
                                          "X-Repo-Commit": commit, "X-Linked-Etag": '"%s"' % sha,
                                          "X-Linked-Size": str(len(data)),
                                          "ETag": '"%s"' % _git_blob_oid(_lfs_pointer(data))}, file=None)
                else:
                    self._body(name, data, {"X-Repo-Commit": commit, "ETag": '"%s"' % _git_blob_oid(data)})
            else:
                self._error(404, "not served by the stand-in hub: %s" % path)

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=30300)
    parser.add_argument("--repo", default="gpufleet-test/tiny-model")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--shard-size", type=int, default=1 << 20)
    parser.add_argument("--token")
    args = parser.parse_args()
    hub = FakeHub(args.repo, model_files(args.shards, args.shard_size), token=args.token, port=args.port).start()
    print("serving %s at %s (commit %s); Ctrl-C stops" % (args.repo, hub.endpoint, hub.commit), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        hub.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
