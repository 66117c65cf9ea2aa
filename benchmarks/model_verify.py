"""How long the model_download checks take: the per-run stat check against the record (size, inode, mtime,
ctime, and the stray-file scan), and the sha256 mode's full hash, on a synthetic model directory (random
shards written to disk here).

    python3 benchmarks/model_verify.py [--dir /path/on/the/model/filesystem] [--shards 16] [--shard-mb 128]

Prints the figures; nothing is asserted (not part of make test). The stat check is what every run does
(plugins/module_utils/model_manifest.check); the hash is what `model_download_verify: sha256` does
(roles/model_download/files/hf_download.py check_files, 4 files in parallel). Run it on the filesystem
that holds the models: the hash figure is bound by that disk unless the files are in the page cache
(the first pass after writing usually is; the script drops nothing, so it reports both passes).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.gpufleet.llm_server.plugins.module_utils.model_manifest import (  # noqa: E402
    FORMAT, check, fingerprint, record_path)


def load_helper():
    spec = importlib.util.spec_from_file_location("hf_download", ROOT / "roles/model_download/files/hf_download.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class QuietStatus:
    def update(self, **_fields):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="parent directory for the synthetic model (default: a temp dir)")
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--shard-mb", type=int, default=128)
    args = parser.parse_args()
    top = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-verify-", dir=args.dir))
    base, records = top / "model", top / "records"
    base.mkdir()
    records.mkdir()
    try:
        files = {}
        block = os.urandom(1 << 20)
        t0 = time.perf_counter()
        for k in range(1, args.shards + 1):
            name = "model-%05d-of-%05d.safetensors" % (k, args.shards)
            digest = hashlib.sha256()
            with open(base / name, "wb") as handle:
                for i in range(args.shard_mb):
                    chunk = bytes([k & 0xFF, i & 0xFF]) + block[2:]
                    handle.write(chunk)
                    digest.update(chunk)
            files[name] = {"size": args.shard_mb << 20, "sha256": digest.hexdigest(), "git_oid": "0" * 40,
                           "stat": fingerprint(os.stat(base / name))}
        write_s = time.perf_counter() - t0
        record = {"format": FORMAT, "model_path": str(base), "repo": "bench/model", "revision": "main",
                  "commit": "0" * 40, "source": "hub", "verified": "sha256", "files": files}
        pathlib.Path(record_path(str(base), str(records))).write_text(json.dumps(record))
        total = sum(f["size"] for f in files.values())
        print("model: %d shards x %d MiB = %.1f GB in %s (written in %.1f s)" % (
            args.shards, args.shard_mb, total / 1e9, base, write_s))

        t0 = time.perf_counter()
        for _repeat in range(100):
            result = check(str(base), "bench/model", "main", record_dir=str(records))
        size_s = (time.perf_counter() - t0) / 100
        assert result["state"] == "complete", result["msg"]
        print("stat check with stray scan (every run): %.2f ms for %d files" % (size_s * 1000, len(files)))

        helper = load_helper()
        for attempt in (1, 2):
            t0 = time.perf_counter()
            bad, _good, _hashed = helper.check_files(str(base), files, "sha256", QuietStatus(), workers=8)
            hash_s = time.perf_counter() - t0
            assert not bad, bad
            print("sha256 of every file, pass %d: %.1f s = %.2f GB/s (%d CPUs)" % (
                attempt, hash_s, total / hash_s / 1e9, os.cpu_count()))
        print("extrapolated to the 223 GB Qwen3.5-397B-A17B-NVFP4 at pass-2 speed: %.1f min" % (
            223e9 / (total / hash_s) / 60))
    finally:
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
