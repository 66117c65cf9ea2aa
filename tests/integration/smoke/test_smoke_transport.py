"""Transport failures on real loopback sockets, each classified as its own cause with its own variable.

No double of the network: a port nothing listens on (refused), a listener whose accept queue is full
(the kernel drops further SYNs: a real connect timeout), https against the plain-HTTP replay server
(a real TLS protocol error), and a real TLS server with a self-signed certificate made here with the
`cryptography` package ansible-core already depends on (certificate verification fails, and passes
with validate_certs false).
"""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
import time

import pytest
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke import SmokeTest
from smoke_helpers import free_port

KIMI = {"served_model_name": "kimi-k2.5", "profile": "kimi-k2.5", "tool_call_parser": "kimi_k2", "timeout": 2,
        "suite_timeout": 20}


def run(base_url, checks=("models", "chat"), **params):
    smoke = SmokeTest(dict(KIMI, base_url=base_url, **params))
    return smoke.run(list(checks)), smoke.causes


def test_refused_names_the_port_and_blocks_the_other_checks():
    results, causes = run("http://127.0.0.1:%d" % free_port())
    assert results["models"]["cause"] == "refused"
    assert results["models"]["variable"] == "llm_server_models['kimi-k2.5'].port"
    assert results["chat"]["message"].startswith("not run:")
    assert [c["checks"] for c in causes] == [["models", "chat"]]


def test_connect_timeout_is_not_a_refusal():
    listener = socket.socket()
    listener.bind(("127.0.0.1", free_port()))
    listener.listen(0)
    fillers = []
    for _filler in range(3):  # fill the accept queue: the kernel then drops new SYNs
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(listener.getsockname())
        except BlockingIOError:
            pass
        fillers.append(filler)
    time.sleep(0.2)
    try:
        started = time.monotonic()
        results, _causes = run("http://127.0.0.1:%d" % listener.getsockname()[1], ["models"], timeout=1)
        assert time.monotonic() - started < 4  # the 1 s connect timeout, not the kernel's SYN retries (over a minute)
        assert results["models"]["cause"] == "connect_timeout"
        assert results["models"]["variable"] == "llm_server_models['kimi-k2.5'].host"
    finally:
        for sock in fillers + [listener]:
            sock.close()


def test_https_against_plain_http_names_the_scheme(replay):
    server = replay("healthy")
    results, _causes = run(server.base_url.replace("http://", "https://"), ["models"])
    assert results["models"]["cause"] == "tls"
    assert results["models"]["variable"] == "openai_smoke_test_base_url"
    assert "plain HTTP" in results["models"]["diagnosis"]


@pytest.fixture
def tls_server(tmp_path, replay):
    """A TLS terminator with a fresh self-signed certificate in front of the replay server."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .sign(key, hashes.SHA256()))
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                         serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    backend = replay("healthy")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    listener = socket.socket()
    listener.bind(("127.0.0.1", free_port()))
    listener.listen(8)
    stop = threading.Event()

    def pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.close()
                except OSError:
                    pass

    def serve():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                raw, _addr = listener.accept()
            except OSError:
                continue
            try:
                client = context.wrap_socket(raw, server_side=True)
            except (ssl.SSLError, OSError):
                raw.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", backend.port))
            threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield "https://127.0.0.1:%d" % listener.getsockname()[1]
    stop.set()
    thread.join(2)
    listener.close()


def test_untrusted_certificate_names_validate_certs(tls_server):
    results, causes = run(tls_server, ["models", "chat"])
    assert results["models"]["cause"] == "tls"
    assert results["models"]["variable"] == "openai_smoke_test_validate_certs"
    assert causes[0]["fault"] == "test_settings"
    trusted, causes = run(tls_server, ["models", "chat"], validate_certs=False)
    assert causes == [] and trusted["chat"]["status"] == "passed"
