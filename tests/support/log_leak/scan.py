"""Scan a log for every encoding of some secrets: `python3 scan.py SECRETS.json < LOG` (SECRETS.json: a JSON
list of strings) prints one line per hit (the secret's index and the encoding's name, never the text)
and exits 1 when there is one, 2 when the log lacks what the leak probe (leak_probe.py) always writes.

The encodings are written here apart from gpufleet-launch's own list: raw, Python repr (inside quotes),
ascii(), JSON (ASCII and UTF-8), URL-encoded (quote with no safe characters, quote_plus), bytes repr,
and repr/JSON of each of those once more."""

import json
import sys
import urllib.parse

PROBE_MARKERS = ("[main] server_args=ServerArgs(", "[child] server_args=ServerArgs(", "child json", "child environ",
                 "shell PROBE_", "shell-err PROBE_", "Traceback", "RuntimeError: scheduler died", "child exit 1",
                 "fatal: bad key <redacted>", "url http://h/?key=<redacted>")


def forms(secret):
    """{name: text} of every encoding of SECRET a scan must not find."""
    once = {"raw": secret, "repr": repr(secret)[1:-1], "ascii": ascii(secret)[1:-1],
            "json": json.dumps(secret)[1:-1], "json-utf8": json.dumps(secret, ensure_ascii=False)[1:-1],
            "url": urllib.parse.quote(secret, safe=""), "url-plus": urllib.parse.quote_plus(secret),
            "bytes": repr(secret.encode())[2:-1]}
    out = dict(once)
    for name, text in once.items():
        out["repr(%s)" % name] = repr(text)[1:-1]
        out["json(%s)" % name] = json.dumps(text)[1:-1]
    return {name: text for name, text in out.items() if len(text) >= 4}


def hits(log, secrets):
    """[(index, encoding name)] of every encoding of every secret found in LOG."""
    return sorted({(index, name) for index, secret in enumerate(secrets)
                   for name, text in forms(secret).items() if text in log})


def missing_markers(log):
    return [marker for marker in PROBE_MARKERS if marker not in log]


def main():
    with open(sys.argv[1], encoding="utf-8") as handle:
        secrets = json.load(handle)
    log = sys.stdin.buffer.read().decode("utf-8", "backslashreplace")
    found = hits(log, secrets)
    for index, name in found:
        print("hit: secret %d as %s" % (index, name))
    missing = missing_markers(log)
    for marker in missing:
        print("missing: %r (the probe did not run through)" % marker)
    print("redacted: %d, secrets: %d, hits: %d" % (log.count("<redacted>"), len(secrets), len(found)))
    return 1 if found else 2 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
