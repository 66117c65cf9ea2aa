"""Download a Hugging Face repo snapshot into a directory (resumable; token from a file, never argv).

usage: hf_download.py REPO REVISION LOCAL_DIR TOKEN_FILE MAX_WORKERS
"""
import os
import sys


def main():
    repo, revision, local_dir, token_file, workers = sys.argv[1:6]
    token = None
    if token_file and os.path.isfile(token_file):
        with open(token_file, encoding="utf-8") as handle:
            token = handle.read().strip() or None
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        sys.exit("huggingface_hub is not installed for %s: install SGLang first (sglang_build) or set "
                 "model_download_python to an interpreter that has it" % sys.executable)
    path = snapshot_download(repo_id=repo, revision=revision or None, local_dir=local_dir, token=token,
                             max_workers=int(workers))
    print(path)


if __name__ == "__main__":
    main()
