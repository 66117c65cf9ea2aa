# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Client for the control API of sglang-router (PyPI `sglang-router`, Rust binary).

Observed on sglang-router 0.3.2 (tests/integration/fleet run the real binary):

- ``GET /workers`` -> ``{"workers": [{"id", "url", "model_id", "is_healthy", "load", ...}], "total": N}``
- ``POST /workers`` with ``{"url": URL}`` -> 202 ``{"status": "accepted", "worker_id": ...}``; the worker
  is probed (``/health``, ``/server_info``, ``/model_info`` or ``/get_model_info``) and registered in the
  background, so callers poll ``GET /workers`` until it is listed and healthy.
- ``DELETE /workers/{id}`` -> 202; removal also happens in the background.
- With ``--api-key`` every control route needs ``Authorization: Bearer KEY`` (401 otherwise).

Draining: requests the router already forwarded to a worker keep running after its removal, so a
worker is drained by removing it and then waiting until its own ``/metrics`` (SGLang
``--enable-metrics``) shows no running or queued request, or, without metrics, a grace period.
"""

from __future__ import annotations

import json
import re
import time

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import open_url


class RouterError(Exception):
    """A control request failed; the message names the router, the request and the fix."""


def normalize_url(url):
    """Worker URLs compare without a trailing slash."""
    return (url or "").strip().rstrip("/")


def _metric_sum(text, names):
    """Sum the samples of Prometheus metrics NAMES in TEXT (None when none is present)."""
    total = None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)", line)
        if match and match.group(1) in names:
            try:
                total = (total or 0.0) + float(match.group(3))
            except ValueError:
                continue
    return total


RUNNING_METRICS = ("sglang:num_running_reqs", "sglang:num_queue_reqs")


class RouterClient:
    def __init__(self, router_url, api_key=None, timeout=10.0, validate_certs=True, sleep=time.sleep,
                 clock=time.monotonic):
        self.router_url = normalize_url(router_url)
        self.api_key = api_key or None
        self.timeout = timeout
        self.validate_certs = validate_certs
        self._sleep = sleep
        self._clock = clock

    # -- HTTP -------------------------------------------------------------------------------
    def _request(self, method, url, body=None, auth=True):
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        if auth and self.api_key:
            headers["Authorization"] = "Bearer %s" % self.api_key
        try:
            resp = open_url(url, data=data, headers=headers, method=method, timeout=self.timeout,
                            validate_certs=self.validate_certs)
            return resp.getcode(), resp.read()
        except HTTPError as exc:
            return exc.code, exc.read() if hasattr(exc, "read") else b""
        except (URLError, OSError, ValueError) as exc:
            raise RouterError("%s %s failed: %s" % (method, url, exc))

    def _json(self, method, path, body=None, expect=(200,)):
        url = self.router_url + path
        code, raw = self._request(method, url, body)
        if code == 401:
            raise RouterError(
                "%s %s answered 401: the router was started with --api-key; pass the same key "
                "(sglang_router_api_key / api_key)." % (method, url))
        if code not in expect:
            raise RouterError("%s %s answered HTTP %s: %s" % (method, url, code, raw[:300]))
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            raise RouterError("%s %s did not return JSON: %r" % (method, url, raw[:200]))

    # -- workers ----------------------------------------------------------------------------
    def workers(self):
        data = self._json("GET", "/workers")
        return data.get("workers") or []

    def find(self, url):
        url = normalize_url(url)
        for worker in self.workers():
            if normalize_url(worker.get("url")) == url:
                return worker
        return None

    def add(self, url):
        return self._json("POST", "/workers", {"url": normalize_url(url)}, expect=(200, 201, 202))

    def remove(self, worker):
        worker_id = worker.get("id")
        if not worker_id:
            raise RouterError("worker %s has no id in GET /workers: %r" % (worker.get("url"), worker))
        return self._json("DELETE", "/workers/%s" % worker_id, expect=(200, 202, 204))

    def wait_for(self, url, present, healthy, timeout, interval=1.0):
        """Poll until URL is listed (healthy when asked) or gone; return the last entry."""
        deadline = self._clock() + timeout
        while True:
            worker = self.find(url)
            if present and worker is not None and (not healthy or worker.get("is_healthy")):
                return worker
            if not present and worker is None:
                return None
            if self._clock() >= deadline:
                if present:
                    state = "not listed" if worker is None else "listed but unhealthy"
                    raise RouterError(
                        "worker %s is still %s on router %s after %ss: check that the worker answers "
                        "GET /health and /server_info from the router host, or raise the timeout."
                        % (url, state, self.router_url, timeout))
                raise RouterError("worker %s is still listed on router %s after %ss"
                                  % (url, self.router_url, timeout))
            self._sleep(interval)

    def running_requests(self, worker_url, worker_api_key=None):
        """Requests running or queued on the worker from its /metrics, or None without metrics."""
        url = normalize_url(worker_url) + "/metrics"
        headers = {}
        if worker_api_key:
            headers["Authorization"] = "Bearer %s" % worker_api_key
        try:
            resp = open_url(url, headers=headers, timeout=self.timeout, validate_certs=self.validate_certs)
            if resp.getcode() != 200:
                return None
            text = resp.read().decode("utf-8", "replace")
        except (HTTPError, URLError, OSError, ValueError):
            return None
        return _metric_sum(text, RUNNING_METRICS)

    def drain(self, worker_url, timeout, grace, worker_api_key=None, interval=1.0):
        """Wait until the (already removed) worker has nothing running; return what was observed."""
        started = self._clock()
        running = self.running_requests(worker_url, worker_api_key)
        if running is None:
            self._sleep(grace)
            return {"method": "grace", "seconds": round(self._clock() - started, 2)}
        while running and self._clock() - started < timeout:
            self._sleep(interval)
            running = self.running_requests(worker_url, worker_api_key) or 0
        if running:
            raise RouterError("worker %s still has %s running requests %ss after its removal from the "
                              "router; raise drain_timeout or check for stuck requests" %
                              (worker_url, running, timeout))
        return {"method": "metrics", "seconds": round(self._clock() - started, 2)}


def ensure_worker(client, url, state, wait=True, timeout=600, check_mode=False, drain=False,
                  drain_timeout=300, drain_grace=5.0, worker_api_key=None):
    """Make worker URL present or absent on the router. Returns a result dict for exit_json."""
    url = normalize_url(url)
    if not re.match(r"^(https?|grpc)://[^/\s]+$", url):
        raise RouterError("url=%r is not a worker base URL; use the form http://HOST:PORT "
                          "(no path), as the router lists it in GET /workers" % url)
    before = client.find(url)
    result = {"changed": False, "url": url, "router_url": client.router_url,
              "diff": {"before": {"workers": sorted(normalize_url(w.get("url")) for w in client.workers())}}}
    if state == "present":
        if before is None:
            result["changed"] = True
            if not check_mode:
                client.add(url)
                if wait:
                    before = client.wait_for(url, present=True, healthy=True, timeout=timeout)
        elif wait and not before.get("is_healthy") and not check_mode:
            before = client.wait_for(url, present=True, healthy=True, timeout=timeout)
        result["worker"] = before or {}
    else:
        if before is not None:
            result["changed"] = True
            if not check_mode:
                client.remove(before)
                if wait:
                    client.wait_for(url, present=False, healthy=False, timeout=timeout)
                if drain:
                    result["drain"] = client.drain(url, drain_timeout, drain_grace, worker_api_key)
        result["worker"] = {}
    after = set(result["diff"]["before"]["workers"])
    if state == "present":
        after.add(url)
    else:
        after.discard(url)
    result["diff"]["after"] = {"workers": sorted(after)}
    result["workers"] = sorted(after) if check_mode else sorted(
        normalize_url(w.get("url")) for w in client.workers())
    return result
