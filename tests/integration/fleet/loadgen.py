"""Bounded load generator: chat requests against a router on loopback, counting every failure.

    python3 loadgen.py --url http://127.0.0.1:32100 --api-key K --model fleet-demo \
        --stop-file /tmp/stop --max-seconds 600 --concurrency 4 --out result.json

Runs until STOP_FILE exists, MAX_SECONDS pass or MAX_REQUESTS were sent (whichever comes first),
then writes a JSON summary {total, ok, failed, by_status, errors[:20], duration_s}. A request fails
when it does not return HTTP 200 with a non-empty assistant message, or raises (timeout, reset).
Standard library only, so it runs with any Python on the controller.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import threading
import time
import urllib.error
import urllib.request


def one_request(url: str, api_key: str | None, model: str, timeout: float) -> tuple[bool, str]:
    body = json.dumps({"model": model, "max_tokens": 16, "temperature": 0,
                       "messages": [{"role": "user", "content": "What is the capital of France?"}]}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (loopback only)
            data = json.loads(resp.read())
            content = data["choices"][0]["message"].get("content") or ""
            return (bool(content.strip()), "200" if content.strip() else "200-empty")
    except urllib.error.HTTPError as exc:
        return False, f"{exc.code}: {exc.read()[:200]!r}"
    except Exception as exc:  # noqa: BLE001 (every failure counts)
        return False, f"{type(exc).__name__}: {exc}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--api-key")
    ap.add_argument("--model", required=True)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--max-seconds", type=float, default=600)
    ap.add_argument("--max-requests", type=int, default=200000)
    ap.add_argument("--pause", type=float, default=0.02, help="seconds between requests per thread")
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--stop-file")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    lock = threading.Lock()
    counts = collections.Counter()
    errors: list[str] = []
    started = time.monotonic()
    sent = [0]

    def keep_going() -> bool:
        if args.stop_file and os.path.exists(args.stop_file):
            return False
        with lock:
            if sent[0] >= args.max_requests:
                return False
            sent[0] += 1
        return time.monotonic() - started < args.max_seconds

    def worker() -> None:
        while keep_going():
            ok, status = one_request(args.url, args.api_key, args.model, args.timeout)
            with lock:
                counts["ok" if ok else "failed"] += 1
                counts["status " + status.split(":", maxsplit=1)[0]] += 1
                if not ok and len(errors) < 20:
                    errors.append(f"{time.monotonic() - started:.1f}s {status}")
            time.sleep(args.pause)

    threads = [threading.Thread(target=worker, daemon=True) for _thread in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    summary = {"total": counts["ok"] + counts["failed"], "ok": counts["ok"], "failed": counts["failed"],
               "by_status": {k[7:]: v for k, v in counts.items() if k.startswith("status ")},
               "errors": errors, "duration_s": round(time.monotonic() - started, 1)}
    with open(args.out + ".tmp", "w") as fh:
        json.dump(summary, fh, indent=1)
    os.replace(args.out + ".tmp", args.out)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
