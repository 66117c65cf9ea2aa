"""Stand-in for `python -m sglang.bench_serving` (a test double: the real one needs SGLang's
dependencies, transformers and a tokenizer, none of which the stand-in venvs have).

It takes the arguments playbooks/benchmark.yml passes, reads the API key from OPENAI_API_KEY as the real
bench_serving does (`sglang/bench_serving.py`: `Authorization: Bearer $OPENAI_API_KEY`, 0.5.4-0.5.23),
sends --num-prompts chat requests (at most --max-concurrency at a time) to --base-url and appends one
JSON line with the result fields bench_serving writes (names as in its output; tests/unit/fleet/data/bench
holds real lines). Exits 1 when a request fails (a missing or wrong key gives 401), so a test that runs
benchmark.yml proves the key reached the process.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import time
import urllib.error
import urllib.request


def parse(argv):
    p = argparse.ArgumentParser(prog="sglang.bench_serving (gpufleet stand-in)")
    p.add_argument("--backend", default="sglang")
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", default="")
    p.add_argument("--tokenizer", default="")
    p.add_argument("--dataset-name", default="random-ids")
    p.add_argument("--dataset-path", default=None)
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=256)
    p.add_argument("--random-range-ratio", type=float, default=1.0)
    p.add_argument("--num-prompts", type=int, default=16)
    p.add_argument("--max-concurrency", type=int, default=1)
    p.add_argument("--request-rate", default="inf")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--disable-tqdm", action="store_true")
    p.add_argument("--warmup-requests", type=int, default=1)
    p.add_argument("--tag", default=None)
    p.add_argument("--output-file", default=None)
    args, _unknown = p.parse_known_args(argv)
    return args


def one_request(args, key):
    body = json.dumps({"model": args.model, "messages": [{"role": "user", "content": "What is the capital of France?"}],
                       "max_tokens": 8}).encode()
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    request = urllib.request.Request(args.base_url.rstrip("/") + "/v1/chat/completions", data=body, method="POST",
                                     headers=headers)
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=30) as response:
        json.loads(response.read())
    return (time.monotonic() - started) * 1000.0


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    key = os.environ.get("OPENAI_API_KEY", "")
    started = time.monotonic()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.max_concurrency)) as pool:
            latencies = list(pool.map(lambda _i: one_request(args, key), range(args.num_prompts)))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"bench_serving stand-in: request failed: {exc}", file=sys.stderr)
        return 1
    duration = time.monotonic() - started
    result = {"backend": args.backend, "dataset_name": args.dataset_name, "tag": args.tag,
              "max_concurrency": args.max_concurrency, "completed": len(latencies), "duration": duration,
              "request_throughput": len(latencies) / duration if duration else None,
              "output_throughput": 8 * len(latencies) / duration if duration else None,
              "median_e2e_latency_ms": statistics.median(latencies), "median_ttft_ms": statistics.median(latencies),
              "median_itl_ms": statistics.median(latencies) / 8, "mean_tpot_ms": statistics.median(latencies) / 8}
    if args.output_file:
        with open(args.output_file, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(result) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
