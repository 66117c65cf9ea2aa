"""Download a Hugging Face repo snapshot into a directory (resumable; token from a file, never argv).

usage: hf_download.py REPO REVISION LOCAL_DIR TOKEN_FILE MAX_WORKERS

Files already complete are kept (huggingface_hub checks them against the Hub's ETag / sha256); a
connection dropped mid-file is resumed with an HTTP Range request. After the download every local
file's size is compared with the repo's listing at the resolved commit: a file of the wrong size
(truncated, or changed without huggingface_hub noticing) is downloaded again once; if still wrong
the helper exits non-zero naming the files. Prints one JSON line: commit, files, bytes, redownloaded.
"""
import json
import os
import sys


def main():
    repo, revision, local_dir, token_file, workers = sys.argv[1:6]
    token = None
    if token_file and os.path.isfile(token_file):
        with open(token_file, encoding="utf-8") as handle:
            token = handle.read().strip() or None
    try:
        from huggingface_hub import HfApi, hf_hub_download, snapshot_download
    except ImportError:
        sys.exit("huggingface_hub is not installed for %s: install SGLang first (sglang_build) or set "
                 "model_download_python to an interpreter that has it" % sys.executable)
    api = HfApi(token=token)
    commit = api.repo_info(repo_id=repo, revision=revision or None).sha
    tree = [entry for entry in api.list_repo_tree(repo_id=repo, revision=commit, recursive=True)
            if hasattr(entry, "size") and hasattr(entry, "blob_id")]
    sizes = {entry.path: entry.size for entry in tree}
    try:
        snapshot_download(repo_id=repo, revision=commit, local_dir=local_dir, token=token, max_workers=int(workers))
    except Exception as error:
        # Name the file: a failed LFS download reports only the storage URL (which holds its sha256).
        try:
            url = str(error.response.request.url)
        except Exception:  # no HTTP response (connection error): nothing to name
            url = ""
        names = [entry.path for entry in tree
                 if entry.path in url or (entry.lfs is not None and entry.lfs.sha256 in url)] if url else []
        if names:
            error.args = ("%s: %s" % (names[0], error.args[0] if error.args else error),) + tuple(error.args[1:])
        raise

    def wrong():
        bad = {}
        for path, size in sizes.items():
            local = os.path.join(local_dir, path)
            have = os.path.getsize(local) if os.path.isfile(local) else None
            if have != size:
                bad[path] = (have, size)
        return bad

    redownloaded = sorted(wrong())
    for path in redownloaded:
        hf_hub_download(repo_id=repo, filename=path, revision=commit, local_dir=local_dir, token=token,
                        force_download=True)
    still = wrong()
    if still:
        sys.exit("model_download: %s@%s: wrong size after downloading again: %s. Free space / check the "
                 "filesystem under %s and rerun." % (repo, commit, ", ".join(
                     "%s (have %s, want %s bytes)" % (path, have, want) for path, (have, want) in sorted(still.items())),
                     local_dir))
    print(json.dumps({"repo": repo, "commit": commit, "files": len(sizes), "bytes": sum(sizes.values()),
                      "redownloaded": redownloaded}))


def run():
    try:
        main()
    except Exception as error:  # report the Hub's answer in one line, not a traceback
        status = getattr(getattr(error, "response", None), "status_code", None)
        hint = "check hub_repo / hub_revision in the profile, HF_ENDPOINT in model_download_environment"
        if status in (401, 403) or type(error).__name__ in ("RepositoryNotFoundError", "GatedRepoError"):
            hint = ("set model_download_hf_token (llm_server_hf_token in the vault) to a token that can read %s"
                    % sys.argv[1])
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        sys.exit("model_download: downloading %s@%s failed: %s (HTTP %s): %s. Fix: %s; then rerun (complete files "
                 "are kept)." % (sys.argv[1], sys.argv[2], type(error).__name__, status, first, hint))


if __name__ == "__main__":
    run()
