#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_router_worker
short_description: Add or remove (and drain) a worker on a running sglang-router
description:
  - Adds an SGLang server to, or removes it from, a running C(sglang-router) through its control API
    (C(GET /workers), C(POST /workers), C(DELETE /workers/{id}); checked against sglang-router 0.3.2).
  - The router registers and removes workers in the background; with O(wait) the module polls
    C(GET /workers) until the worker is listed and healthy (V(present)) or gone (V(absent)).
  - With O(drain) (only for V(absent)) it then waits until the removed worker has no running or queued
    request, read from the worker's own C(/metrics) (SGLang C(--enable-metrics)); a worker without
    metrics gets O(drain_grace) seconds instead. Requests already forwarded keep running after removal,
    so stopping the worker after a drain fails no client request.
  - Idempotent; changed only when the router's worker list changes.
version_added: "0.1.0"
author:
  - gpufleet maintainers (@gpufleet)
options:
  router_url:
    description:
      - Base URL of the router's HTTP server, as seen from the host that runs the module.
    type: str
    default: http://127.0.0.1:30080
  url:
    description:
      - Base URL of the worker, C(http://HOST:PORT), exactly as the router should reach it.
    type: str
    required: true
  state:
    description:
      - Whether the worker is registered with the router.
    type: str
    choices: [present, absent]
    default: present
  api_key:
    description:
      - The router's C(--api-key) (sent as a bearer token). Not logged.
    type: str
  worker_api_key:
    description:
      - API key of the worker, used to read its C(/metrics) while draining. Not logged.
    type: str
  wait:
    description:
      - Wait until the router lists the worker as healthy (V(present)) or no longer lists it (V(absent)).
    type: bool
    default: true
  timeout:
    description:
      - Seconds to wait for the router (a large model's worker may need many minutes to become healthy).
    type: int
    default: 600
  drain:
    description:
      - After removal, wait until the worker has finished its running requests (see description).
    type: bool
    default: false
  drain_timeout:
    description:
      - Seconds to wait for running requests to finish before failing.
    type: int
    default: 300
  drain_grace:
    description:
      - Seconds to wait after removal when the worker exposes no C(/metrics).
    type: float
    default: 5.0
  request_timeout:
    description:
      - Timeout of each single HTTP request, in seconds.
    type: float
    default: 10.0
  validate_certs:
    description:
      - Verify TLS certificates of an C(https) router or worker.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reports whether the worker list would change without calling C(POST) or C(DELETE).
  diff_mode:
    support: full
    description: Shows the router's worker URLs before and after.
  platform:
    support: full
    platforms: posix
    description: Runs wherever the router's HTTP port is reachable (the router host, or the controller).
seealso:
  - name: sglang-router on PyPI
    description: The Rust load balancer for SGLang workers.
    link: https://pypi.org/project/sglang-router/
notes:
  - Used by the C(gpufleet.llm_server.sglang_router) role (C(tasks_from=worker)) and C(playbooks/swap_model.yml).
"""

EXAMPLES = r"""
- name: Take llm-a out of rotation and let its requests finish
  gpufleet.llm_server.sglang_router_worker:
    router_url: http://127.0.0.1:30080
    url: http://10.0.0.11:30000
    state: absent
    drain: true
    api_key: "{{ llm_server_api_key }}"
  delegate_to: router-1

- name: Put it back once its smoke test passed
  gpufleet.llm_server.sglang_router_worker:
    router_url: http://127.0.0.1:30080
    url: http://10.0.0.11:30000
    state: present
    timeout: 1800
    api_key: "{{ llm_server_api_key }}"
  delegate_to: router-1
"""

RETURN = r"""
url:
  description: The worker URL, normalised (no trailing slash).
  returned: always
  type: str
  sample: http://10.0.0.11:30000
router_url:
  description: The router that was asked.
  returned: always
  type: str
  sample: http://127.0.0.1:30080
worker:
  description: The router's entry for the worker after the change (empty when absent or in check mode before adding).
  returned: always
  type: dict
  sample: {"id": "c89278bd-24f7-4924-a77c-73b22bfe15fa", "url": "http://10.0.0.11:30000", "is_healthy": true, "model_id": "kimi-k2.5"}
workers:
  description: Worker URLs listed by the router afterwards (predicted in check mode).
  returned: always
  type: list
  elements: str
  sample: ["http://10.0.0.11:30000", "http://10.0.0.12:30000"]
drain:
  description: How the drain waited (V(metrics) or V(grace)) and for how long.
  returned: when a worker was removed with O(drain)
  type: dict
  sample: {"method": "metrics", "seconds": 3.2}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_router import (
    RouterClient,
    RouterError,
    ensure_worker,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            router_url=dict(type="str", default="http://127.0.0.1:30080"),
            url=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            api_key=dict(type="str", no_log=True),
            worker_api_key=dict(type="str", no_log=True),
            wait=dict(type="bool", default=True),
            timeout=dict(type="int", default=600),
            drain=dict(type="bool", default=False),
            drain_timeout=dict(type="int", default=300),
            drain_grace=dict(type="float", default=5.0),
            request_timeout=dict(type="float", default=10.0),
            validate_certs=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    client = RouterClient(p["router_url"], api_key=p["api_key"], timeout=p["request_timeout"],
                          validate_certs=p["validate_certs"])
    try:
        result = ensure_worker(client, p["url"], p["state"], wait=p["wait"], timeout=p["timeout"],
                               check_mode=module.check_mode, drain=p["drain"],
                               drain_timeout=p["drain_timeout"], drain_grace=p["drain_grace"],
                               worker_api_key=p["worker_api_key"])
    except RouterError as exc:
        module.fail_json(msg="sglang-router %s: %s" % (p["router_url"], exc), url=p["url"])
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
