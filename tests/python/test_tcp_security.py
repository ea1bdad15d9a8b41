"""tcp:// security from Python (docs/security.md): a tcp://
server is CURVE-protected by default; a Loader of the same user on the same
machine needs nothing; elsewhere it passes the key file (key_file=, or
$BATCHCAST_KEY_FILE); a refused key is a PermissionDenied at once, a missing one
a NotFound naming what to do; a raw peer without the key gets nothing;
binding beyond loopback needs allow_remote.

Run: BATCHCAST_BUILD_DIR=build-py /usr/bin/python3 -m pytest tests/python -q
"""
import shutil
import socket
import stat
import subprocess
import time

import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    """A runtime directory of the test's own (so its own user key)."""
    monkeypatch.delenv("BATCHCAST_KEY_FILE", raising=False)
    home = tmp_path / "xdg"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(home))
    return home


def another_machine(tmp_path, monkeypatch, label="other"):
    """Points XDG_RUNTIME_DIR at an empty directory: no user key there."""
    home = tmp_path / label
    home.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(home))


def tcp_server(**options):
    return batchcast.Server(synthetic=40, size=4, batch_size=8, name=H.unique_name("tcp"),
                            endpoint="tcp://127.0.0.1:0", **options)


def refused(endpoint, at_least=1):
    """The server's refused_connections once it counted `at_least` (2 s at most:
    its handshake monitor is read by the control loop, in its own time)."""
    deadline = time.monotonic() + 2
    while True:
        count = batchcast.query_stats(endpoint)["refused_connections"]
        if count >= at_least or time.monotonic() > deadline:
            return count
        time.sleep(0.02)


def read_epoch(loader):
    return sum(images.shape[0] for images, _ in loader)


def test_the_same_user_on_the_same_machine_needs_no_key(runtime):
    with tcp_server() as srv:
        key = runtime / "batchcast" / "curve.key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        with batchcast.Loader(srv.endpoint, batch_size=8) as loader:
            assert read_epoch(loader) == 40
        stats = batchcast.query_stats(srv.endpoint)
        assert stats["endpoint"] == srv.endpoint and stats["refused_connections"] == 0
        out = subprocess.run([H.SERVER_BIN, "stat", srv.endpoint], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert srv.endpoint in out.stdout


def test_another_machine_passes_a_copy_of_the_key_file(runtime, tmp_path, monkeypatch):
    with tcp_server() as srv:
        copy = tmp_path / "server.key"
        shutil.copy(runtime / "batchcast" / "curve.key", copy)
        another_machine(tmp_path, monkeypatch)
        start = time.monotonic()
        with pytest.raises(batchcast.NotFound, match="pass its key file") as e:
            batchcast.Loader(srv.endpoint, batch_size=8, connect_timeout=30)
        assert isinstance(e.value, FileNotFoundError)
        assert time.monotonic() - start < 2
        for key_file in (copy, str(copy)):  # a path or a str
            with batchcast.Loader(srv.endpoint, batch_size=8, key_file=key_file) as loader:
                assert read_epoch(loader) == 40
        assert batchcast.query_stats(srv.endpoint, key_file=copy)["endpoint"] == srv.endpoint
        monkeypatch.setenv("BATCHCAST_KEY_FILE", str(copy))
        with batchcast.Loader(srv.endpoint, batch_size=8) as loader:
            assert read_epoch(loader) == 40


def test_a_server_started_with_a_key_file(runtime, tmp_path):
    key = tmp_path / "team.key"
    made = subprocess.run([H.SERVER_BIN, "key", "--new", str(key)], capture_output=True,
                          text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == str(key) and "public key:" in made.stderr
    with tcp_server(key_file=str(key)) as srv:
        # No user key here: told to pass the server's; the user's key (made
        # now) is another one: refused, and told which file to pass.
        with pytest.raises(batchcast.NotFound, match="started with --key-file"):
            batchcast.Loader(srv.endpoint, batch_size=8, connect_timeout=30)
        subprocess.run([H.SERVER_BIN, "key"], check=True, capture_output=True, timeout=30)
        with pytest.raises(batchcast.PermissionDenied, match="key_file"):
            batchcast.Loader(srv.endpoint, batch_size=8, connect_timeout=30)
        with batchcast.Loader(srv.endpoint, batch_size=8, key_file=key) as loader:
            assert read_epoch(loader) == 40


def test_a_refused_key_is_permission_denied_at_once(runtime, tmp_path):
    other = tmp_path / "other.key"
    subprocess.run([H.SERVER_BIN, "key", "--new", str(other)], check=True, capture_output=True,
                   timeout=30)
    with tcp_server() as srv:
        start = time.monotonic()
        with pytest.raises(batchcast.PermissionDenied, match=str(other)) as e:
            batchcast.Loader(srv.endpoint, batch_size=8, key_file=other, connect_timeout=30)
        assert time.monotonic() - start < 3
        assert isinstance(e.value, PermissionError) and e.value.code == "PermissionDenied"
        with pytest.raises(batchcast.PermissionDenied):
            batchcast.query_stats(srv.endpoint, key_file=other)
        assert refused(srv.endpoint) >= 1


def test_key_file_arguments_are_checked_by_name(runtime):
    with pytest.raises(batchcast.InvalidArgument, match="^key_file must be"):
        batchcast.Loader("tcp://127.0.0.1:9", batch_size=8, key_file=5)
    with pytest.raises(batchcast.InvalidArgument, match="^key_file must be"):
        batchcast.query_stats("tcp://127.0.0.1:9", key_file=["x"])
    with pytest.raises(batchcast.InvalidArgument, match="key_file"):
        batchcast.Server(synthetic=10, endpoint="tcp://127.0.0.1:0", key_file=5)


def test_a_key_file_others_may_read_is_refused(runtime, tmp_path):
    key = tmp_path / "open.key"
    subprocess.run([H.SERVER_BIN, "key", "--new", str(key)], check=True, capture_output=True,
                   timeout=30)
    key.chmod(0o644)
    with pytest.raises(batchcast.PermissionDenied, match="chmod 600"):
        tcp_server(key_file=str(key))
    with pytest.raises(batchcast.InvalidArgument, match="key_file is for tcp://"):
        batchcast.Loader("some-server", batch_size=8, key_file=key)


def test_a_raw_peer_without_the_key_gets_nothing(runtime):
    """A ZMTP 3.0 peer with the NULL mechanism (what any ZeroMQ socket without
    keys speaks) gets at most the server's greeting; then the connection is
    closed: no stats, no welcome, whatever it sends."""
    with tcp_server() as srv:
        host, port = srv.endpoint[len("tcp://"):].rsplit(":", 1)
        greeting = (b"\xff" + bytes(8) + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\0")
                    + bytes(32))
        ready = b"\x05READY" + bytes([11]) + b"Socket-Type" + (6).to_bytes(4, "big") + b"DEALER"
        received = b""
        with socket.create_connection((host, int(port)), timeout=5) as s:
            try:
                s.sendall(greeting[:11])
                received += s.recv(4096)  # the server's signature and version
                s.sendall(greeting[11:] + bytes([0x04, len(ready)]) + ready + b"\x00\x05hello")
                while chunk := s.recv(4096):
                    received += chunk
            except (ConnectionResetError, BrokenPipeError):
                pass
        # A ZMTP signature (0xff, padding, 0x7f); the rest of the greeting (major
        # version 3, ...) only when it arrived before the server's reset: a
        # reset discards what the client had not read yet (seen on a GPU host).
        assert received[:1] == b"\xff" and received[9:10] == b"\x7f", received
        assert len(received) <= 10 or received[10:11] == b"\x03", received
        assert len(received) <= 64, received  # at most the greeting
        assert refused(srv.endpoint) >= 1
        with batchcast.Loader(srv.endpoint, batch_size=8) as loader:
            assert read_epoch(loader) == 40


def test_binding_beyond_loopback_needs_allow_remote(runtime):
    for endpoint in ("tcp://*:0", "tcp://0.0.0.0:0"):
        with pytest.raises(batchcast.InvalidArgument, match=r"allow_remote \(--allow-remote\)"):
            batchcast.Server(synthetic=10, size=4, name=H.unique_name("remote"), endpoint=endpoint)
    with batchcast.Server(synthetic=40, size=4, batch_size=8, name=H.unique_name("remote"),
                          endpoint="tcp://0.0.0.0:0", allow_remote=True) as srv:
        port = srv.endpoint.rsplit(":", 1)[1]
        with batchcast.Loader("tcp://127.0.0.1:" + port, batch_size=8) as loader:
            assert read_epoch(loader) == 40
