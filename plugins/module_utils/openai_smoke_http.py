# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""HTTP for the smoke test: deadlines, whole-body reads, SSE, and one classification of every failure.

Every request of `openai_smoke_test` goes through `Client`, which raises only `RequestFailed`
(never a raw socket, TLS, HTTP or JSON exception) with `kind` set to one of:

- ``refused``: nothing listens (connection refused);
- ``dns``: the host name does not resolve;
- ``connect_timeout``: the TCP connect got no answer in time (a firewall drops packets, wrong host);
- ``tls``: the TLS handshake failed (``tls_problem``: ``verify`` or ``protocol``);
- ``reset``: the server closed the connection without answering;
- ``timeout``: the server accepted the request and then sent no (more) data before the deadline
  (``phase`` headers, body or stream; ``received`` bytes/events so far; ``idle_s``);
- ``cut``: the body ended early (fewer bytes than Content-Length, a broken chunked body, a reset
  mid-body);
- ``http``: a status >= 400, with the body and SGLang's error message (``message``);
- ``bad_json``: a 200 whose body is not a JSON object.

A hard lesson behind this module: `resp.read()` outside the error mapping turned a stalled or cut body
into a module traceback, so no check result, no report and no rollback. Bodies are read here with
`read1` in a loop under a deadline that covers the whole request (connect, headers, every body read),
and the socket timeout is lowered before each read to what is left, so a server trickling one byte
per second cannot stretch a 10-second request to minutes. `Budget` is the whole suite's limit; a
request's deadline is the earlier of its own timeout and what is left of the budget.
"""

from __future__ import annotations

import json
import socket
import ssl
import time

from http.client import HTTPException, IncompleteRead
from urllib.error import HTTPError, URLError

from ansible.module_utils.urls import open_url

READ_SIZE = 65536
BODY_LIMIT = 8 * 1024 * 1024  # an answer of the smoke test is a few KiB; stop reading garbage early


class Budget:
    """The whole suite's time limit (None: unlimited)."""

    def __init__(self, seconds=None, clock=time.monotonic):
        self.clock = clock
        self.seconds = seconds
        self.started = clock()
        self.at = None if seconds is None else self.started + seconds

    def remaining(self):
        return None if self.at is None else self.at - self.clock()

    def spent(self):
        return self.clock() - self.started


class Deadline:
    """The end of one request: its own timeout or the suite budget's end, whichever comes first."""

    def __init__(self, timeout, budget=None, clock=time.monotonic):
        self.clock = clock
        self.started = clock()
        self.timeout = timeout
        self.at = self.started + timeout
        self.by = "request"
        self.budget_s = None
        if budget is not None and budget.at is not None and budget.at < self.at:
            self.at = budget.at
            self.by = "suite"
            self.budget_s = budget.seconds

    def remaining(self):
        return self.at - self.clock()

    def elapsed(self):
        return self.clock() - self.started

    def limit_s(self):
        return round(self.at - self.started, 1)


class RequestFailed(Exception):
    """One request failed; `kind` says how (see the module docstring). Carries what was seen."""

    def __init__(self, kind, detail, url, **info):
        super(RequestFailed, self).__init__("%s: %s" % (url, detail))
        self.kind = kind
        self.detail = detail
        self.url = url
        self.status = info.get("status")
        self.body = info.get("body") or ""
        self.message = info.get("message")  # SGLang's error message, when the body carries one
        self.phase = info.get("phase")
        self.received = info.get("received")
        self.idle_s = info.get("idle_s")
        self.elapsed_s = info.get("elapsed_s")
        self.limit_s = info.get("limit_s")
        self.limit_by = info.get("limit_by")
        self.tls_problem = info.get("tls_problem")


def error_message(body):
    """The error text of an error body in the shapes SGLang sends, or None.

    SGLang's OpenAI routes answer errors with `ErrorResponse` ({"object": "error", "message": ...,
    "type": ..., "param": ..., "code": ...}, serving_base.create_error_response); its API-key
    middleware with {"error": "Unauthorized"}; a streamed error is {"error": {ErrorResponse}}; FastAPI
    itself (llama-cpp-python too) answers {"detail": ...}.
    """
    try:
        data = json.loads(body) if isinstance(body, (str, bytes)) else body
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    inner = data.get("error")
    if isinstance(inner, dict):
        data = inner
    elif isinstance(inner, str):
        return inner
    for key in ("message", "detail"):
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
        if value:
            return json.dumps(value)[:500]
    return None


def _sock_of(resp):
    """The socket under an http.client response, or None (then the open-time timeout stays)."""
    fp = getattr(resp, "fp", None)
    raw = getattr(fp, "raw", None)
    return getattr(raw, "_sock", None)


def _set_timeout(resp, seconds):
    sock = _sock_of(resp)
    if sock is not None:
        try:
            sock.settimeout(max(0.01, seconds))
        except OSError:
            pass


def _short(data, limit=300):
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + "..."


class Client:
    """Minimal OpenAI-API client over ansible.module_utils.urls.open_url (proxies, validate_certs)."""

    def __init__(self, base_url, api_key=None, timeout=120, validate_certs=True, clock=time.monotonic):
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        self.api_key = api_key
        self.timeout = timeout
        self.validate_certs = validate_certs
        self.clock = clock

    def deadline(self, timeout=None, budget=None):
        return Deadline(timeout or self.timeout, budget, self.clock)

    # ------------------------------------------------------------------ opening
    def _open(self, method, path, payload, deadline, accept):
        url = self.base_url + path
        headers = {"Accept": accept}
        if self.api_key:
            headers["Authorization"] = "Bearer %s" % self.api_key
        data = None
        if payload is not None:
            data = json.dumps(payload).encode("utf-8")
            headers["Content-Type"] = "application/json"
        remaining = deadline.remaining()
        if remaining <= 0:
            raise self._timeout(url, deadline, "connect", 0, 0.0)
        try:
            return open_url(url, data=data, headers=headers, method=method, timeout=remaining,
                            validate_certs=self.validate_certs, follow_redirects="safe", use_netrc=False)
        except HTTPError as exc:
            body, _cut = self._drain(exc, url, deadline, quiet=True)
            text = body.decode("utf-8", "replace")
            raise RequestFailed("http", "HTTP %s %s" % (exc.code, _short(text, 300)), url, status=exc.code,
                                body=text[:4000], message=error_message(text), elapsed_s=deadline.elapsed())
        except URLError as exc:
            # urllib wraps what fails while connecting and sending (do_open): refused, DNS, TLS, timeout.
            raise self._connect_failure(url, exc.reason, deadline)
        except (TimeoutError, socket.timeout):
            # Raised by getresponse(): connected and sent, then no status line before the deadline.
            raise self._timeout(url, deadline, "headers", 0, deadline.elapsed())
        except ssl.SSLError as exc:
            raise self._connect_failure(url, exc, deadline)
        except (ConnectionError, HTTPException) as exc:
            # RemoteDisconnected (a ConnectionResetError): closed without a status line.
            raise RequestFailed("reset", "the server closed the connection without answering (%s)"
                                % (type(exc).__name__), url, elapsed_s=deadline.elapsed())
        except (OSError, ValueError) as exc:
            raise RequestFailed("reset", "%s: %s" % (type(exc).__name__, exc), url, elapsed_s=deadline.elapsed())

    def _connect_failure(self, url, reason, deadline):
        if isinstance(reason, ConnectionRefusedError):
            return RequestFailed("refused", "connection refused", url, elapsed_s=deadline.elapsed())
        if isinstance(reason, socket.gaierror):
            return RequestFailed("dns", "the host name does not resolve (%s)" % reason, url,
                                 elapsed_s=deadline.elapsed())
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return RequestFailed("connect_timeout", "TCP connect timed out after %.1fs" % deadline.elapsed(), url,
                                 elapsed_s=deadline.elapsed(), limit_s=deadline.limit_s(), limit_by=deadline.by)
        if isinstance(reason, (ssl.SSLError, ssl.CertificateError)):
            text = str(reason)
            problem = "verify" if ("CERTIFICATE_VERIFY_FAILED" in text or isinstance(reason, ssl.CertificateError)
                                   or "certificate" in text.lower()) else "protocol"
            return RequestFailed("tls", "TLS handshake failed: %s" % text, url, tls_problem=problem,
                                 elapsed_s=deadline.elapsed())
        if isinstance(reason, ConnectionError):
            return RequestFailed("reset", "the connection was reset while sending the request (%s)"
                                 % type(reason).__name__, url, elapsed_s=deadline.elapsed())
        return RequestFailed("refused" if "refused" in str(reason).lower() else "reset",
                             "cannot connect: %s" % reason, url, elapsed_s=deadline.elapsed())

    def _timeout(self, url, deadline, phase, received, idle):
        unit = "events" if phase == "stream" else "bytes"
        limit = deadline.limit_s()
        if phase == "connect":
            what = "no time left to send the request"
        elif phase == "headers":
            what = "no answer (not even a status line) within %.1fs" % deadline.elapsed()
        elif not received:
            what = "the status line came, then no %s data for %.1fs" % (phase, idle)
        elif idle >= limit / 2.0:
            what = ("the %s stopped after %d %s: no more data for %.1fs, %.1fs after the request"
                    % (phase, received, unit, idle, deadline.elapsed()))
        else:
            what = ("the %s was still arriving when the %ss deadline passed: %d %s in %.1fs, the last %.1fs earlier"
                    % (phase, limit, received, unit, deadline.elapsed(), idle))
        return RequestFailed("timeout", what, url, phase=phase, received=received, idle_s=round(idle, 1),
                             elapsed_s=round(deadline.elapsed(), 1), limit_s=limit, limit_by=deadline.by)

    # ------------------------------------------------------------------ reading
    def _read_some(self, resp, url, deadline, phase, received, last_data):
        """One read1() under the deadline; returns bytes (b'' at the end). Raises RequestFailed."""
        remaining = deadline.remaining()
        if remaining <= 0:
            raise self._timeout(url, deadline, phase, received, self.clock() - last_data)
        _set_timeout(resp, remaining)
        try:
            return resp.read1(READ_SIZE)
        except (TimeoutError, socket.timeout):
            raise self._timeout(url, deadline, phase, received, self.clock() - last_data)
        except IncompleteRead:
            raise RequestFailed("cut", "the %s ended early, inside a chunk of its chunked encoding, after %d %s"
                                % (phase, received, "events" if phase == "stream" else "bytes"), url, phase=phase,
                                received=received, elapsed_s=deadline.elapsed())
        except (ConnectionError, ssl.SSLError, HTTPException, OSError, ValueError) as exc:
            raise RequestFailed("cut", "the connection broke after %d %s of the %s (%s)"
                                % (received, "events" if phase == "stream" else "bytes", phase,
                                   type(exc).__name__), url, phase=phase, received=received,
                                elapsed_s=deadline.elapsed())

    def _drain(self, resp, url, deadline, quiet=False):
        """The whole body within the deadline: (bytes, cut_reason or None). quiet: never raise."""
        chunks = []
        total = 0
        last = self.clock()
        fp_resp = getattr(resp, "fp", resp) if isinstance(resp, HTTPError) else resp
        if not hasattr(fp_resp, "read1"):
            fp_resp = resp
        try:
            while total < BODY_LIMIT:
                data = self._read_some(fp_resp, url, deadline, "body", total, last)
                if not data:
                    break
                last = self.clock()
                chunks.append(data)
                total += len(data)
        except RequestFailed:
            if quiet:
                return b"".join(chunks), "unreadable"
            raise
        except Exception:  # pylint: disable=broad-except
            # An HTTPError body that cannot be read at all: the status alone has to do.
            if quiet:
                return b"".join(chunks), "unreadable"
            raise
        left = getattr(fp_resp, "length", None)
        if left and total < BODY_LIMIT:
            reason = "the body ended after %d bytes, %d short of its Content-Length" % (total, left)
            if quiet:
                return b"".join(chunks), reason
            raise RequestFailed("cut", reason, url, phase="body", received=total, elapsed_s=deadline.elapsed())
        return b"".join(chunks), None

    # ------------------------------------------------------------------ public
    def request_json(self, path, payload=None, timeout=None, budget=None, deadline=None):
        """GET (payload None) or POST PATH; the decoded JSON object. Raises RequestFailed."""
        deadline = deadline or self.deadline(timeout, budget)
        url = self.base_url + path
        resp = self._open("POST" if payload is not None else "GET", path, payload, deadline, "application/json")
        try:
            raw, _cut = self._drain(resp, url, deadline)
        finally:
            _close(resp)
        try:
            body = json.loads(raw.decode("utf-8"))
        except ValueError as exc:
            raise RequestFailed("bad_json", "HTTP %s, but the body is not JSON (%s): %s"
                                % (_status(resp), exc, _short(raw, 200)), url, status=_status(resp),
                                body=_short(raw, 2000), elapsed_s=deadline.elapsed())
        if not isinstance(body, dict):
            raise RequestFailed("bad_json", "HTTP %s, but the body is a JSON %s, not an object: %s"
                                % (_status(resp), type(body).__name__, _short(raw, 200)), url,
                                status=_status(resp), body=_short(raw, 2000), elapsed_s=deadline.elapsed())
        return body

    def get_json(self, path, timeout=None, budget=None):
        return self.request_json(path, None, timeout, budget)

    def post_json(self, path, payload, timeout=None, budget=None):
        return self.request_json(path, payload, timeout, budget)

    def probe(self, path, timeout=25.0):
        """(HTTP status or None, RequestFailed or None) of GET PATH; never raises."""
        deadline = self.deadline(timeout)
        url = self.base_url + path
        try:
            resp = self._open("GET", path, None, deadline, "application/json")
        except RequestFailed as exc:
            return exc.status, (None if exc.status else exc)
        try:
            self._drain(resp, url, deadline)
            return _status(resp), None
        except RequestFailed as exc:
            return _status(resp), exc
        finally:
            _close(resp)

    def events(self, path, payload, timeout=None, budget=None, deadline=None):
        """POST PATH with stream=true; yield each SSE event's data (str) until the stream ends.

        Raises RequestFailed: the open failures above, ``timeout`` (phase stream: nothing more before
        the deadline, or a trickle past it), ``cut`` (the connection broke), and ``stream`` for a
        response that is not an event stream (e.g. a JSON answer to a stream request).
        """
        deadline = deadline or self.deadline(timeout, budget)
        url = self.base_url + path
        resp = self._open("POST", path, payload, deadline, "text/event-stream")
        try:
            ctype = (resp.headers.get("Content-Type") or "") if getattr(resp, "headers", None) else ""
            if "text/event-stream" not in ctype.lower():
                raw, _cut = self._drain(resp, url, deadline)  # a hung or cut answer is that, not a format error
                message = error_message(raw)
                raise RequestFailed("stream", "a stream was asked for, the answer is %s: %s"
                                    % (ctype or "without Content-Type", _short(raw, 200)), url,
                                    status=_status(resp), body=_short(raw, 2000), message=message,
                                    phase="stream")
            buffer = b""
            data_lines = []
            events = 0
            last = self.clock()
            while True:
                chunk = self._read_some(resp, url, deadline, "stream", events, last)
                if not chunk:
                    break
                last = self.clock()
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    line = line.rstrip(b"\r")
                    if not line:
                        if data_lines:
                            events += 1
                            yield "\n".join(data_lines)
                            data_lines = []
                        continue
                    if line.startswith(b":"):
                        continue  # an SSE comment (keep-alive)
                    field, _sep, value = line.partition(b":")
                    if field == b"data":
                        data_lines.append(value[1:].decode("utf-8", "replace") if value.startswith(b" ")
                                          else value.decode("utf-8", "replace"))
                if len(buffer) > BODY_LIMIT:
                    raise RequestFailed("stream", "an SSE line longer than %d bytes" % BODY_LIMIT, url,
                                        phase="stream")
            if buffer.strip():
                line = buffer.rstrip(b"\r")
                if line.startswith(b"data:"):
                    data_lines.append(line[5:].strip().decode("utf-8", "replace"))
            if data_lines:
                yield "\n".join(data_lines)
            left = getattr(resp, "length", None)
            if left:
                raise RequestFailed("cut", "the stream ended %d bytes short of its Content-Length" % left, url,
                                    phase="stream", received=events)
        finally:
            _close(resp)


def _status(resp):
    return getattr(resp, "status", None) or (resp.getcode() if hasattr(resp, "getcode") else None)


def _close(resp):
    try:
        resp.close()
    except Exception:  # pylint: disable=broad-except
        pass
