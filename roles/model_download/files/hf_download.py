"""Verify a model directory file by file and fetch from the Hub only the files that fail; runs in the
background and reports its progress in a status file. Installed by the model_download role.

usage:
  hf_download.py start  --dir DIR --repo REPO --revision REV --verify size|sha256 --workers N
                        --timeout SECONDS [--margin-bytes N] [--expected-shards N] [--profile-var TEXT]
                        [--record-dir RDIR] [--adopt] [--token-stdin]
      Starts the job detached (its own session; it outlives the play) and prints one JSON line
      {"pid": N, "attached": false}. When a job already runs for DIR (a previous play was interrupted)
      it starts nothing and prints {"pid": <that job>, "attached": true}. With --token-stdin the Hub
      token is read from stdin and kept in the job's memory only: never in argv, the environment, or
      a file.
  hf_download.py status --dir DIR
      Prints the job's status as one JSON line: state running|done|failed|lost, a progress `line`,
      and `result` (done) or `msg` (failed/lost).

The job: use DIR's record (RDIR/<name of DIR>.json, outside DIR; plugins/module_utils/model_manifest.py
describes it) when it is for REPO@REV, else list the repo at the resolved commit; check every file: a
recorded file whose size, inode, mtime and ctime are as recorded is not read again (unless --verify
sha256); every other file is hashed (against the record's sha256, or the Hub's sha256 for LFS files and
git blob id for the others); refuse when the filesystem lacks space for the files to fetch, fetch exactly
the failing files with huggingface_hub (a dropped connection resumes with a Range request), hash the
fetched files, then write the record atomically (with each file's sha256 and stat) and the marker
DIR/.gpufleet/recorded. Bookkeeping lives in DIR/.gpufleet/ (0700): lock, status.json, job.log,
recorded. With --repo "" nothing is fetched: a failing file fails the job, naming it; without a record
--adopt hashes and records the files as they are.
"""
import argparse
import concurrent.futures
import datetime
import errno
import fcntl
import hashlib
import json
import os
import re
import select
import sys
import threading
import time

WORK = ".gpufleet"
RECORDED = "recorded"
FORMAT = 2
# As plugins/module_utils/model_manifest.py (a test checks they agree): bookkeeping, this collection's files.
BOOKKEEPING = (".cache", WORK)
OWN_FILES = (".gpufleet-manifest.json", ".gpufleet-hf-token")
STATUS_EVERY = 2.0
READ_CHUNK = 8 * 1024 * 1024


# ---------------------------------------------------------------------------------------- helpers
def human(n):
    n = float(n or 0)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1000.0
    return "%.1f TB" % n


def duration(seconds):
    seconds = int(max(0, seconds))
    if seconds < 90:
        return "%d s" % seconds
    if seconds < 5400:
        return "%d min" % round(seconds / 60.0)
    return "%.1f h" % (seconds / 3600.0)


def write_json_atomic(path, data, mode=0o644):
    """Write DATA to PATH through a temporary file in the same directory + fsync + rename."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def proc_starttime(pid):
    """Field 22 of /proc/PID/stat (start time in clock ticks): tells a live job from a reused pid."""
    try:
        with open("/proc/%d/stat" % pid, encoding="ascii", errors="replace") as handle:
            data = handle.read()
    except OSError:
        return None
    return data.rsplit(")", 1)[-1].split()[19]


def git_blob_oid(path, size):
    digest = hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(READ_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def record_name(model_dir):
    """As plugins/module_utils/model_manifest.record_name."""
    path = os.path.normpath(model_dir)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", path.strip("/"))[-80:] or "root"
    return "%s.%s.json" % (slug, hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:12])


def fingerprint(path):
    info = os.stat(path)
    return [info.st_ino, info.st_mtime_ns, info.st_ctime_ns]


def read_record(path, model_dir):
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    if (not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("files"), dict)
            or os.path.normpath(str(data.get("model_path"))) != os.path.normpath(model_dir)):
        return None
    return data


def present_files(model_dir):
    """{relative path: {"size"}} of the regular files under MODEL_DIR, bookkeeping excepted (--adopt)."""
    found = {}
    for top, dirs, names in os.walk(model_dir):
        rel_top = os.path.relpath(top, model_dir)
        if rel_top == ".":
            dirs[:] = [d for d in dirs if d not in BOOKKEEPING]
            rel_top = ""
        for name in names:
            path = os.path.join(top, name)
            if (not rel_top and name in OWN_FILES) or os.path.islink(path) or not os.path.isfile(path):
                continue
            found[os.path.join(rel_top, name) if rel_top else name] = {"size": os.path.getsize(path)}
    return found


# ---------------------------------------------------------------------------------------- status
class Status:
    """The job's status file: rewritten atomically on every change and every STATUS_EVERY seconds."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.data = {"state": "running", "phase": "starting", "pid": os.getpid(),
                     "starttime": proc_starttime(os.getpid()), "started": time.time(), "line": "starting"}
        self.write()

    def update(self, **fields):
        with self.lock:
            self.data.update(fields)
            self.data["updated"] = time.time()
            write_json_atomic(self.path, self.data, 0o600)

    def write(self):
        self.update()


class Meter:
    """Bytes done of a phase, its rate over the last ~30 s, and a progress line."""

    def __init__(self, status, phase, verb, total, files_total):
        self.status, self.phase, self.verb = status, phase, verb
        self.total, self.files_total = total, files_total
        self.done_bytes = 0  # completed files (and, while hashing, bytes read)
        self.files_done = 0
        self.extra = lambda: 0  # bytes of files in flight (downloads: their .incomplete files)
        self.samples = [(time.monotonic(), 0)]
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def add(self, nbytes=0, files=0):
        with self.lock:
            self.done_bytes += nbytes
            self.files_done += files

    def line(self):
        with self.lock:
            done = min(self.total, self.done_bytes + self.extra()) if self.total else self.done_bytes
            files_done = self.files_done
        now = time.monotonic()
        self.samples.append((now, done))
        self.samples = [s for s in self.samples if now - s[0] <= 30] or [(now, done)]
        span = now - self.samples[0][0]
        rate = (done - self.samples[0][1]) / span if span > 0.5 else 0.0
        text = "%s %s of %s" % (self.verb, human(done), human(self.total))
        if self.total:
            text += " (%.1f %%)" % (100.0 * done / self.total)
        if rate > 0:
            text += ", %s/s" % human(rate)
        text += ", %d of %d files done" % (files_done, self.files_total)
        if rate > 0 and self.total > done and span >= 10:  # an estimate from a few seconds misleads
            text += ", about %s left" % duration((self.total - done) / rate)
        return text, done, rate, files_done

    def report(self):
        text, done, rate, files_done = self.line()
        self.status.update(phase=self.phase, line=text, bytes_done=done, bytes_total=self.total,
                           rate=round(rate), files_done=files_done, files_total=self.files_total)

    def _run(self):
        while not self.stop.wait(STATUS_EVERY):
            self.report()

    def __enter__(self):
        self.report()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.report()


# ---------------------------------------------------------------------------------------- the job
class JobError(Exception):
    pass


def hub_error_message(repo, revision, error, filename=None):
    status = getattr(getattr(error, "response", None), "status_code", None)
    hint = "check hub_repo / hub_revision in the profile, HF_ENDPOINT in model_download_environment"
    if status in (401, 403) or type(error).__name__ in ("RepositoryNotFoundError", "GatedRepoError"):
        hint = "set model_download_hf_token (llm_server_hf_token in the vault) to a token that can read %s" % repo
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if filename:
        first = "%s: %s" % (filename, first)
    return ("model_download: downloading %s@%s failed: %s (HTTP %s): %s. Fix: %s; then rerun (complete files are "
            "kept)." % (repo, revision, type(error).__name__, status, first, hint))


def listing(api, repo, revision):
    """(commit, {path: {"size", "sha256"?, "git_oid"}}) at the commit REVISION resolves to."""
    commit = api.repo_info(repo_id=repo, revision=revision or None).sha
    files = {}
    for entry in api.list_repo_tree(repo_id=repo, revision=commit, recursive=True):
        if not hasattr(entry, "size") or not hasattr(entry, "blob_id"):
            continue  # a folder
        item = {"size": int(entry.size), "git_oid": entry.blob_id}
        lfs = getattr(entry, "lfs", None)
        sha = (lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)) if lfs else None
        if sha:
            item["sha256"] = sha
        files[entry.path] = item
    return commit, files


def check_files(model_dir, files, mode, status, workers, previous=None, recorded=None):
    """({path: reason} of the files that fail, {path: {"sha256", "stat"}} of the files that pass, [paths hashed]).

    A file in RECORDED (the record's entries) whose size and stat are as recorded passes without being
    read (unless MODE is sha256); every other file present with the right size is hashed: against its
    entry's sha256 (the record's, or the Hub's for LFS files), else against its git blob id, else (files
    adopted as they are) against nothing."""
    bad = {}
    good = {}
    previous = previous or {}
    recorded = recorded or {}
    todo = []
    for path, want in files.items():
        old = previous.get(path)
        if old and old.get("git_oid") and want.get("git_oid") and old["git_oid"] != want["git_oid"]:
            bad[path] = "changed on the Hub since the last verified download"
            continue
        local = os.path.join(model_dir, path)
        if not os.path.isfile(local):
            bad[path] = "missing"
        elif os.path.getsize(local) != want["size"]:
            bad[path] = "size %d, want %d" % (os.path.getsize(local), want["size"])
        elif (mode != "sha256" and path in recorded and recorded[path].get("sha256")
              and fingerprint(local) == recorded[path].get("stat")):
            good[path] = {"sha256": recorded[path]["sha256"], "stat": recorded[path]["stat"]}
        else:
            todo.append(path)
    if not todo:
        return bad, good, todo
    todo.sort()
    meter = Meter(status, "verifying", "sha256 of", sum(files[p]["size"] for p in todo), len(todo))

    def digest(path):
        want = files[path]
        local = os.path.join(model_dir, path)
        before = fingerprint(local)
        content = hashlib.sha256()
        blob = None if want.get("sha256") or not want.get("git_oid") else hashlib.sha1(b"blob %d\0" % want["size"])
        with open(local, "rb") as handle:
            for chunk in iter(lambda: handle.read(READ_CHUNK), b""):
                content.update(chunk)
                if blob is not None:
                    blob.update(chunk)
                meter.add(len(chunk))
        meter.add(files=1)
        sha = {"sha256": content.hexdigest(), "stat": before}
        if fingerprint(local) != before:  # written to while it was read: the hash is of no version
            return path, sha, "changed", "not changed", "stat while hashing"
        if want.get("sha256"):
            return path, sha, content.hexdigest(), want["sha256"], "sha256"
        if blob is not None:
            return path, sha, blob.hexdigest(), want["git_oid"], "git blob id"
        return path, sha, None, None, None

    with meter:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(workers, 4))) as pool:
            for path, sha, got, expected, kind in pool.map(digest, todo):
                if kind == "stat while hashing":
                    bad[path] = "changed while it was being hashed"
                elif expected and got != expected:
                    bad[path] = "%s %s, want %s" % (kind, got[:16], expected[:16])
                else:
                    good[path] = sha
    return bad, good, todo


def free_bytes(path):
    info = os.statvfs(path)
    return info.f_bavail * info.f_frsize


def clean_incomplete(model_dir):
    """Partial downloads of an interrupted job (huggingface_hub names them *.incomplete)."""
    base = os.path.join(model_dir, ".cache", "huggingface", "download")
    for top, _dirs, names in os.walk(base):
        for name in names:
            if name.endswith(".incomplete"):
                try:
                    os.unlink(os.path.join(top, name))
                except OSError:
                    pass


def incomplete_bytes(model_dir):
    total = 0
    for top, _dirs, names in os.walk(os.path.join(model_dir, ".cache", "huggingface", "download")):
        for name in names:
            if name.endswith(".incomplete"):
                try:
                    total += os.path.getsize(os.path.join(top, name))
                except OSError:
                    pass
    return total


def fetch(args, token, commit, files, paths, status):
    """Download PATHS (force: a present file failed its check). Returns {path: error}."""
    from huggingface_hub import hf_hub_download

    meter = Meter(status, "downloading", "downloading", sum(files[p]["size"] for p in paths), len(paths))
    meter.extra = lambda: incomplete_bytes(args.dir)
    errors = {}

    def one(path):
        hf_hub_download(repo_id=args.repo, filename=path, revision=commit, local_dir=args.dir,
                        token=token or None, force_download=True)
        return path

    with meter:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
            futures = {pool.submit(one, path): path for path in sorted(paths)}
            for future in concurrent.futures.as_completed(futures):
                path = futures[future]
                try:
                    future.result()
                    meter.add(files[path]["size"], 1)
                except Exception as error:  # every failure is reported; complete files are kept
                    errors[path] = error
    return errors


def job(args, token, status):
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # progress goes to the status file
    started = time.monotonic()
    record_file = os.path.join(args.record_dir, record_name(args.dir))
    if os.path.commonpath([os.path.realpath(args.dir), os.path.realpath(args.record_dir)]) == os.path.realpath(args.dir):
        raise JobError("model_download: model_download_record_dir %s is inside the model directory %s, which could "
                       "then rewrite its own record. Nothing was changed. Fix: set model_download_record_dir to a "
                       "root-owned directory outside it (default /var/lib/gpufleet/models)." % (args.record_dir, args.dir))
    record = read_record(record_file, args.dir)
    trusted = record if record and (not args.repo or (
        record.get("repo") == args.repo and str(record.get("revision")) == str(args.revision))) else None
    clean_incomplete(args.dir)
    api = None
    if trusted:
        commit, files = trusted.get("commit"), trusted["files"]
        source = "the record"
    elif args.repo:
        status.update(phase="listing", line="listing %s@%s" % (args.repo, args.revision))
        try:
            from huggingface_hub import HfApi
        except ImportError:
            raise JobError("huggingface_hub is not installed for %s: install SGLang first (sglang_build) or set "
                           "model_download_python to an interpreter that has it" % sys.executable)
        api = HfApi(token=token or None)
        try:
            commit, files = listing(api, args.repo, args.revision)
        except Exception as error:
            raise JobError(hub_error_message(args.repo, args.revision, error))
        source = "the Hub listing"
    elif args.adopt:
        commit, files = None, present_files(args.dir)
        if not files:
            raise JobError("model_download: %s holds no files to adopt. Nothing was changed." % args.dir)
        source = "the files as they are (model_download_adopt)"
    else:
        raise JobError("model_download: %s has no record (%s) and no hub_repo: nothing to verify against. Fix: set "
                       "the profile's hub_repo, or run once with -e model_download_adopt=true to record the files as "
                       "they are." % (args.dir, record_file))
    shards = sorted(p for p in files if p.endswith(".safetensors"))
    if args.repo and args.expected_shards is not None and len(shards) != args.expected_shards:
        raise JobError(
            "model_download: %s@%s has %d *.safetensors shards, but %s.expected_shards is %d. Nothing was "
            "downloaded. Fix: correct expected_shards (or hub_revision) in %s."
            % (args.repo, (commit or "")[:12], len(shards), args.profile_var, args.expected_shards, args.profile_var))
    previous = record["files"] if record and record is not trusted and record.get("repo") == args.repo else None
    status.update(phase="verifying", line="checking %d files (%s) against %s" % (len(files), args.verify, source))
    bad, good, hashed = check_files(args.dir, files, args.verify, status, args.workers, previous,
                                    trusted["files"] if trusted else None)
    hashed = list(hashed)
    fetched = []
    if bad and not args.repo:
        raise JobError("model_download: %d of %d files in %s fail their check against the record %s: %s. The "
                       "profile names no hub_repo to fetch them from: copy them again from where the model came "
                       "from, or set hub_repo." % (len(bad), len(files), args.dir, record_file, "; ".join(
                           "%s (%s)" % item for item in sorted(bad.items())[:10])))
    for attempt in (1, 2):
        if not bad:
            break
        need = sum(files[p]["size"] for p in bad)
        have = sum(os.path.getsize(os.path.join(args.dir, p)) for p in bad
                   if os.path.isfile(os.path.join(args.dir, p)))
        free = free_bytes(args.dir)
        if need - have + args.margin_bytes > free:
            raise JobError(
                "model_download: fetching %d files of %s needs %s more plus model_download_space_margin_gb "
                "(%s) in %s, but only %s are free. Nothing was downloaded. Free space there, move the profile's "
                "model_path to a larger filesystem, or lower model_download_space_margin_gb."
                % (len(bad), args.repo, human(max(0, need - have)), human(args.margin_bytes), args.dir, human(free)))
        errors = fetch(args, token, commit, files, sorted(bad), status)
        if errors:
            path, error = sorted(errors.items())[0]
            raise JobError(hub_error_message(args.repo, args.revision, error, path)
                           + ("" if len(errors) == 1 else " (%d files failed: %s)" % (
                               len(errors), ", ".join(sorted(errors)))))
        fetched.extend(p for p in sorted(bad) if p not in fetched)
        status.update(phase="verifying", line="hashing the %d fetched files" % len(bad))
        bad, more, again = check_files(args.dir, {p: files[p] for p in bad}, "sha256", status, args.workers)
        good.update(more)
        hashed.extend(p for p in again if p not in hashed)
        if bad and attempt == 2:
            raise JobError("model_download: %s@%s: files still wrong after downloading them again: %s. Check the "
                           "filesystem under %s (space, errors in dmesg) and rerun."
                           % (args.repo, (commit or "")[:12], "; ".join("%s (%s)" % i for i in sorted(bad.items())),
                              args.dir))
    entries = {}
    for path, want in sorted(files.items()):
        entry = {"size": want["size"], "sha256": good[path]["sha256"], "stat": good[path]["stat"]}
        if want.get("git_oid"):
            entry["git_oid"] = want["git_oid"]
        entries[path] = entry
    repo = args.repo or (trusted or {}).get("repo")
    new = {"format": FORMAT, "tool": "gpufleet.llm_server.model_download", "model_path": os.path.normpath(args.dir),
           "repo": repo, "revision": args.revision if args.repo else (trusted or {}).get("revision"),
           "commit": commit, "source": (trusted or {}).get("source") or ("hub" if repo else "adopted"),
           "verified": "sha256", "files": entries}
    same = record is not None and all(record.get(k) == new[k]
                                      for k in ("model_path", "repo", "revision", "commit", "source", "files"))
    if not same:
        new["verified_at"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            os.makedirs(args.record_dir, mode=0o755, exist_ok=True)
            write_json_atomic(record_file, new, 0o644)
        except OSError as error:
            raise JobError("model_download: every file of %s passed, but its record cannot be written to %s: %s. "
                           "Fix: run the role as root (become), or point model_download_record_dir at a directory "
                           "root can write, outside the model directory; then rerun (the files are kept)."
                           % (args.dir, record_file, error))
    marker = os.path.join(work_dir(args.dir), RECORDED)
    if not os.path.isfile(marker):
        with open(marker, "w", encoding="utf-8") as handle:
            handle.write(record_file + "\n")
    total = sum(f["size"] for f in files.values())
    summary = "%s: %d files (%s) of %s %s; %s" % (
        args.dir, len(files), human(total), ("%s@%s" % (repo, (commit or "")[:12])) if repo else "(adopted)",
        "verified by sha256" if args.verify == "sha256" else "checked against %s" % source,
        ("fetched %d: %s" % (len(fetched), ", ".join(fetched[:5]) + (" ..." if len(fetched) > 5 else "")))
        if fetched else "nothing fetched")
    return {"repo": repo, "commit": commit, "files": len(files), "bytes": total, "fetched": fetched,
            "verified": args.verify, "manifest_written": not same, "manifest": record_file,
            "hashed": hashed, "changed": bool(fetched) or not same, "seconds": round(time.monotonic() - started, 1),
            "summary": summary}


def run_job(args, token, status):
    def give_up():
        status.update(state="failed", line="timed out", msg=(
            "model_download: the job for %s ran longer than model_download_timeout_seconds (%d s) and was "
            "stopped; rerun to continue (complete files are kept)." % (args.dir, args.timeout)))
        os._exit(3)

    deadline = threading.Timer(args.timeout, give_up)
    deadline.daemon = True
    deadline.start()
    try:
        result = job(args, token, status)
    except JobError as error:
        status.update(state="failed", line="failed", msg=str(error))
        return 1
    except Exception as error:  # report the cause in one line, not a traceback
        status.update(state="failed", line="failed", msg=hub_error_message(args.repo, args.revision, error)
                      if args.repo else "model_download: %s: %s" % (type(error).__name__, error))
        return 1
    status.update(state="done", phase="done", line=result["summary"], result=result)
    return 0


# ---------------------------------------------------------------------------------------- commands
def work_dir(model_dir):
    path = os.path.join(model_dir, WORK)
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def cmd_start(args):
    token = sys.stdin.read().strip() if args.token_stdin else ""
    work = work_dir(args.dir)
    lock = os.open(os.path.join(work, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        for _attempt in range(50):  # the running job writes its status right after taking the lock
            status = cmd_status_data(args.dir)
            if status.get("pid"):
                print(json.dumps({"pid": status["pid"], "attached": True}))
                return 0
            time.sleep(0.1)
        sys.exit("model_download: another job holds %s but wrote no status; stop it and rerun" % work)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # first child: new session, then fork again so the job is no session leader
        os.close(read_end)
        os.setsid()
        if os.fork():
            os._exit(0)
        try:
            devnull = os.open(os.devnull, os.O_RDONLY)
            log = os.open(os.path.join(work, "job.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(devnull, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(devnull)
            os.close(log)
            sys.stdout = os.fdopen(1, "w", buffering=1)
            sys.stderr = os.fdopen(2, "w", buffering=1)
            status = Status(os.path.join(work, "status.json"))
            os.write(write_end, b"%d\n" % os.getpid())
            os.close(write_end)
            code = run_job(args, token, status)
        except BaseException as error:  # never let the job die without a status
            try:
                Status(os.path.join(work, "status.json")).update(state="failed", line="failed",
                                                                 msg="model_download: job crashed: %r" % error)
            finally:
                os._exit(2)
        os._exit(code)
    os.close(write_end)
    os.close(lock)
    os.waitpid(child, 0)
    ready, _w, _x = select.select([read_end], [], [], 30)
    data = os.read(read_end, 64) if ready else b""
    os.close(read_end)
    if not data.strip():
        sys.exit("model_download: the job did not start (see %s/job.log)" % work)
    print(json.dumps({"pid": int(data), "attached": False}))
    return 0


def cmd_status_data(model_dir):
    try:
        with open(os.path.join(model_dir, WORK, "status.json"), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def cmd_status(args):
    status = cmd_status_data(args.dir)
    if not status:
        status = {"state": "lost", "msg": "model_download: no job status in %s/%s" % (args.dir, WORK)}
    elif status.get("state") == "running":
        pid = int(status.get("pid") or 0)
        if not pid or proc_starttime(pid) != status.get("starttime"):
            status["state"] = "lost"
            status["msg"] = ("model_download: the job (pid %s) for %s ended without a result (killed, or out of "
                             "memory?); see %s/%s/job.log. Rerun to continue: complete files are kept."
                             % (pid, args.dir, args.dir, WORK))
    print(json.dumps(status))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start")
    start.add_argument("--dir", required=True)
    start.add_argument("--repo", default="")
    start.add_argument("--revision", default="main")
    start.add_argument("--verify", choices=("size", "sha256"), default="size")
    start.add_argument("--workers", type=int, default=8)
    start.add_argument("--timeout", type=int, default=86400)
    start.add_argument("--margin-bytes", type=int, default=0)
    start.add_argument("--expected-shards", type=int)
    start.add_argument("--profile-var", default="the profile")
    start.add_argument("--record-dir", default="/var/lib/gpufleet/models")
    start.add_argument("--adopt", action="store_true")
    start.add_argument("--token-stdin", action="store_true")
    status = sub.add_parser("status")
    status.add_argument("--dir", required=True)
    args = parser.parse_args(argv)
    args.dir = os.path.abspath(getattr(args, "dir"))
    if getattr(args, "record_dir", None):
        args.record_dir = os.path.abspath(args.record_dir)
    return cmd_start(args) if args.command == "start" else cmd_status(args)


if __name__ == "__main__":
    sys.exit(main())
