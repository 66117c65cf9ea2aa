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
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_multinode import as_int


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


# --- The router role's inputs, computed on the controller (plugins/filter/sglang_router.py) ----------------------

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
DEFAULT_WORKER_PORT = 30000

# The router's options in command-line order: each NAME becomes --NAME-WITH-DASHES VALUE.
ROUTER_OPTIONS = (
    "host", "port", "policy", "prometheus_host", "prometheus_port", "health_check_endpoint",
    "health_check_interval_secs", "health_check_timeout_secs", "health_failure_threshold",
    "health_success_threshold", "worker_startup_timeout_secs", "worker_startup_check_interval",
    "request_timeout_secs", "log_level",
)

_TRUE_STRINGS = ("yes", "on", "1", "true")
_UNDEFINED = object()


def _as_bool(value):
    """Jinja's ``bool`` filter: booleans as they are, the strings yes/on/1/true (any case) and 1 true."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.lower() in _TRUE_STRINGS
    return value == 1


def _var(host_vars, name, default=None):
    """A host's variable, DEFAULT when it is not defined (like ``| default(...)``)."""
    try:
        return host_vars[name]
    except KeyError:
        return default


def _profile(host_vars):
    """The host's serving profile: llm_server_models[llm_server_model], {} when either is missing."""
    models = _var(host_vars, "llm_server_models", {}) or {}
    return models.get(_var(host_vars, "llm_server_model", ""), {}) or {}


def _worker_enabled(host_vars):
    return _as_bool(_var(host_vars, "sglang_router_worker_enabled", True))


def _worker_address(name, host_vars):
    return _var(host_vars, "sglang_router_worker_address", _var(host_vars, "ansible_host", name))


def worker_urls(hosts):
    """The workers' URLs of HOSTS, a list of (inventory name, host variables) in group order.

    Every enabled node 0 (llm_server_node_rank 0) is one worker: sglang_router_worker_url, else
    http://ADDRESS:PORT with ADDRESS sglang_router_worker_address, ansible_host or the name and PORT its
    profile's port (default 30000).
    """
    urls = []
    for name, host_vars in hosts:
        if not _worker_enabled(host_vars) or as_int(_var(host_vars, "llm_server_node_rank", 0)) != 0:
            continue
        port = _profile(host_vars).get("port", DEFAULT_WORKER_PORT)
        urls.append(_var(host_vars, "sglang_router_worker_url",
                         "http://%s:%s" % (_worker_address(name, host_vars), port)))
    return urls


def loopback_workers(hosts, router_host):
    """Names of the HOSTS (other than ROUTER_HOST) whose worker URL is derived but whose profile listens on
    loopback only while the address the router would use is not loopback: the router could not reach them."""
    found = []
    for name, host_vars in hosts:
        if name == router_host or not _worker_enabled(host_vars):
            continue
        if _var(host_vars, "sglang_router_worker_url", _UNDEFINED) is not _UNDEFINED:
            continue
        if (_profile(host_vars).get("host", "127.0.0.1") in LOOPBACK_HOSTS
                and _worker_address(name, host_vars) not in LOOPBACK_HOSTS):
            found.append(name)
    return found


def unique_worker_urls(urls):
    """URLS without trailing slashes and duplicates, in their first order."""
    seen = []
    for url in urls:
        url = re.sub(r"/+$", "", url)
        if url not in seen:
            seen.append(url)
    return seen


def router_argv(python, options, workers, extra_args):
    """The command line of sglang-router: PYTHON -m sglang_router.launch_router, OPTIONS (a dict with every
    name of ROUTER_OPTIONS), --worker-urls WORKERS (deduplicated, when any) and EXTRA_ARGS as strings."""
    argv = [python, "-m", "sglang_router.launch_router"]
    for name in ROUTER_OPTIONS:
        argv += ["--" + name.replace("_", "-"), str(options[name])]
    workers = unique_worker_urls(workers)
    if workers:
        argv += ["--worker-urls"] + workers
    return argv + [str(arg) for arg in extra_args]
