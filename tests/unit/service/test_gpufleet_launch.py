"""roles/sglang_service/files/gpufleet-launch, run for real: the secret reaches the module's sys.argv and
environment, but no process's /proc/<pid>/cmdline, not even a child started the way SGLang starts its
scheduler and detokenizer (multiprocessing, start method "spawn", server args passed as Process args)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest
from support.adversarial_secrets import ADVERSARIAL
from support.log_leak import scan

ROOT = pathlib.Path(__file__).resolve().parents[3]
LAUNCHER = ROOT / "roles" / "sglang_service" / "files" / "gpufleet-launch"

PROBE = textwrap.dedent('''
    import json, multiprocessing, os, sys

    def child(args, out):
        with open("/proc/self/cmdline", "rb") as f:
            cmdline = f.read().decode()
        with open(out, "w") as f:
            json.dump({"cmdline": cmdline, "args": args}, f)

    def main():
        with open("/proc/self/cmdline", "rb") as f:
            cmdline = f.read().decode()
        ctx = multiprocessing.get_context("spawn")
        p = ctx.Process(target=child, args=(sys.argv[1:], os.environ["PROBE_CHILD_OUT"]))
        p.start(); p.join()
        import logging
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
        logging.getLogger("probe").info("server_args=%s", sys.argv[1:])
        with open(os.environ["PROBE_CHILD_OUT"] + ".main", "w") as f:  # (stdout is redacted)
            json.dump({"argv": sys.argv[1:], "cmdline": cmdline, "token": os.environ.get("HF_TOKEN"),
                       "bench": os.environ.get("OPENAI_API_KEY")}, f)

    if __name__ == "__main__":
        main()
''')


def _run(tmp_path, *launcher_args, env=None):
    (tmp_path / "probe_module.py").write_text(PROBE)
    full_env = dict(os.environ, PROBE_CHILD_OUT=str(tmp_path / "child.json"), **(env or {}))
    return subprocess.run([sys.executable, str(LAUNCHER), *launcher_args], cwd=tmp_path, env=full_env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_secrets_reach_the_process_but_no_command_line(tmp_path):
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "api-key").write_text("sk-launch-secret")
    (creds / "environment").write_text(json.dumps({"HF_TOKEN": "hf_launch_secret"}))
    keyfile = tmp_path / "bench-key"
    keyfile.write_text("sk-bench-secret")
    proc = _run(tmp_path, "--credential-argument", "api-key=--api-key", "--credential-environment", "environment",
                "--file-environment", "OPENAI_API_KEY=%s" % keyfile, "-m", "probe_module", "--", "--port", "1",
                env={"CREDENTIALS_DIRECTORY": str(creds)})
    assert proc.returncode == 0, proc.stderr
    out = json.loads((tmp_path / "child.json.main").read_text())
    assert out["argv"] == ["--port", "1", "--api-key=sk-launch-secret"]
    assert out["token"] == "hf_launch_secret" and out["bench"] == "sk-bench-secret"
    child = json.loads((tmp_path / "child.json").read_text())
    assert child["args"][-1] == "--api-key=sk-launch-secret"  # pickled through the pipe, as SGLang's ServerArgs
    for cmdline in (out["cmdline"], child["cmdline"]):
        assert not any(v in cmdline for v in ("sk-launch-secret", "hf_launch_secret", "sk-bench-secret")), cmdline
    assert "multiprocessing" in child["cmdline"]
    # the launcher's log redaction: the parsed arguments are logged without the secrets
    assert "server_args=" in proc.stderr and "<redacted>" in proc.stderr
    assert not any(v in proc.stderr for v in ("sk-launch-secret", "hf_launch_secret", "sk-bench-secret"))


def test_missing_credentials_fail_with_the_reason(tmp_path):
    proc = _run(tmp_path, "--credential-argument", "api-key=--api-key", "-m", "probe_module")
    assert proc.returncode == 1 and "$CREDENTIALS_DIRECTORY is not set" in proc.stderr
    (tmp_path / "creds").mkdir()
    proc = _run(tmp_path, "--credential-argument", "api-key=--api-key", "-m", "probe_module",
                env={"CREDENTIALS_DIRECTORY": str(tmp_path / "creds")})
    assert proc.returncode == 1 and "cannot read credential 'api-key'" in proc.stderr and "make-rshared" in proc.stderr
    proc = _run(tmp_path, "--bogus", "-m", "probe_module")
    assert proc.returncode == 1 and "unknown option '--bogus'" in proc.stderr


PROBE_DIR = ROOT / "tests" / "support" / "log_leak"


def _as_nobody():
    """The launcher as an unprivileged user, as the unit runs it (root: through setpriv as nobody, with the
    system Python: the launcher is stdlib-only and the test venv's interpreter need not be usable by nobody)."""
    if os.geteuid() != 0:
        return [sys.executable]
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", "/usr/bin/python3"]


@pytest.mark.parametrize("index", range(len(ADVERSARIAL)))
def test_no_encoding_of_an_adversarial_secret_reaches_the_log(index):
    """The leak probe (tests/support/log_leak/leak_probe.py: SGLang's ways of logging, see there) as nobody,
    the secret as the API key and as two environment variables (one of them inside a longer value); its
    stdout and stderr are what the journal would get. tests/support/log_leak/scan.py lists the encodings."""
    secret = ADVERSARIAL[index]
    base = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-launch-"))
    try:
        os.chmod(base, 0o755)
        creds = base / "creds"
        creds.mkdir(mode=0o755)
        (creds / "api-key").write_text(secret, encoding="utf-8")
        (creds / "environment").write_text(json.dumps({"PROBE_SECRET": secret, "PROBE_OTHER": "hf_" + secret}),
                                           encoding="utf-8")
        for name in ("leak_probe.py", "leak_args.py"):
            shutil.copy(PROBE_DIR / name, base / name)
        # The launcher too, as the role installs it (outside the checkout): a checkout under a private directory
        # (scripts/test-cold.sh clones into a 0700 mktemp folder) is not readable by nobody.
        launcher = base / "gpufleet-launch"
        shutil.copy(LAUNCHER, launcher)
        for path in base.rglob("*"):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        env = {"PATH": "/usr/bin:/bin", "CREDENTIALS_DIRECTORY": str(creds), "LANG": "C.UTF-8"}
        argv = _as_nobody() + [str(launcher), "--credential-argument", "api-key=--api-key",
                               "--credential-environment", "environment", "-m", "leak_probe", "--", "--port", "1"]
        proc = subprocess.run(argv, cwd=base, env=env, capture_output=True, timeout=120, check=False)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    log = (proc.stdout + proc.stderr).decode("utf-8", "backslashreplace")
    # The probe ran to its end as a non-root user, through every path, and the secrets were redacted there.
    assert proc.returncode == 1, log[-3000:]
    assert scan.missing_markers(log) == [], log[-3000:]
    assert log.count("<redacted>") >= 30
    assert scan.hits(log, [secret, "hf_" + secret]) == []


def test_secrets_the_filter_cannot_protect_are_refused(tmp_path):
    """A line break splits the secret over two log lines; a short one cannot be told from log text."""
    creds = tmp_path / "creds"
    creds.mkdir()
    for value, reason in (("sk-line\nbreak", "line break"), ("k3y-4u", "shorter than 8")):
        (creds / "api-key").write_text(value)
        proc = _run(tmp_path, "--credential-argument", "api-key=--api-key", "-m", "probe_module",
                    env={"CREDENTIALS_DIRECTORY": str(creds)})
        assert proc.returncode == 1 and reason in proc.stderr and value not in proc.stderr
