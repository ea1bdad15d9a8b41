"""Python-facing hardening: every wrong argument of Loader, Server
and Producer is a batchcast.InvalidArgument naming it; bad option values and
endpoints are refused with the reason; a path the client may not examine is a
BatchcastError, never a bare RuntimeError; a killed server is reported at once.

Run: BATCHCAST_BUILD_DIR=build-py /usr/bin/python3 -m pytest tests/python -q
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()
import torch  # noqa: E402  (after the skip check)
from batchcast import _core  # noqa: E402


def invalid(match):
    """pytest.raises for an InvalidArgument (a ValueError too) whose message matches."""
    return pytest.raises(batchcast.InvalidArgument, match=match)


# ---- wrong arguments name the parameter ------------------------------------


@pytest.mark.parametrize("kwargs, name", [
    ({"endpoint_or_name": 5}, "endpoint_or_name"),
    ({"endpoint_or_name": "\udcff"}, "endpoint_or_name"),
    ({"name": "x\udcff"}, "name"),
    ({"batch_size": "8"}, "batch_size"),
    ({"batch_size": 2.5}, "batch_size"),
    ({"batch_size": True}, "batch_size"),
    ({"batch_size": 0}, "batch_size"),
    ({"drop_last": "yes"}, "drop_last"),
    ({"join": 3}, "join"),
    ({"prefetch": 0}, "prefetch"),
    ({"prefetch": 70000}, "prefetch"),
    ({"timeout": "1"}, "timeout"),
    ({"timeout": -1}, "timeout"),
    ({"timeout": float("nan")}, "timeout"),
    ({"connect_timeout": 0}, "connect_timeout"),
    ({"connect_timeout": [1]}, "connect_timeout"),
    ({"name": 7}, "name"),
    ({"as_dict": "no"}, "as_dict"),
])
def test_loader_arguments_are_checked_by_name(kwargs, name):
    args = {"endpoint_or_name": "nobody-" + H.unique_name(), "batch_size": 8}
    args.update(kwargs)
    with invalid(rf"^{name} must be") as e:
        batchcast.Loader(**args)
    assert isinstance(e.value, ValueError) and e.value.code == "InvalidArgument"


@pytest.mark.parametrize("kwargs, match", [
    ({"data": 5}, "data must be"),
    ({"synthetic": -5}, r"synthetic \(--synthetic\)"),
    ({"synthetic": "10"}, "synthetic must be"),
    ({"synthetic": 10, "epochs": -1}, r"epochs \(--epochs\)"),
    ({"synthetic": 10, "window": 2.5}, "window must be"),
    ({"synthetic": 10, "shuffle": 1}, "shuffle must be"),
    ({"synthetic": 10, "lag_timeout": "1s"}, "lag_timeout must be"),
    ({"synthetic": 10, "mean": (1, 2)}, "mean must be"),
    ({"synthetic": 10, "device": "cuda:99999999999"}, "device"),
    ({"synthetic": 10, "device": 0}, "device must be"),
    ({"synthetic": 10, "endpoint": "tcp://127.0.0.1:99999"}, "1..65535"),
    ({"synthetic": 10, "endpoint": "inproc://x"}, "inproc://"),
    ({"synthetic": 10, "name": "a/b"}, "name"),
    ({"synthetic": 10, "nvjpeg_calls": 5}, r"nvjpeg_calls \(--nvjpeg-calls\) must be in 1\.\.4"),
    ({"synthetic": 10, "nvjpeg_calls": 0}, r"nvjpeg_calls \(--nvjpeg-calls\)"),
    ({"synthetic": 10, "read_threads": 0}, r"read_threads \(--read-threads\) must be in 1\.\.64"),
    ({"synthetic": 10, "read_threads": 65}, r"read_threads \(--read-threads\)"),
    ({"synthetic": 10, "gpu_priority": "urgent"},
     r"gpu_priority \(--gpu-priority\) must be normal or high, got 'urgent'"),
])
def test_server_options_are_checked_by_name(kwargs, match):
    kwargs.setdefault("name", H.unique_name("opt"))
    with invalid(match):
        batchcast.Server(**kwargs)


def test_server_wait_timeout_is_checked():
    with batchcast.Server(synthetic=10, size=4, name=H.unique_name("wait")) as srv:
        with invalid("^timeout must be"):
            srv.wait(timeout="soon")


def test_producer_arguments_are_checked_by_name():
    batches = [torch.zeros(4, 2)] * 2
    name = H.unique_name("prod")
    for kwargs, param in [({"epochs": 0}, "epochs"), ({"epochs": "2"}, "epochs"),
                          ({"epoch_len": "8"}, "epoch_len"), ({"batch_size": 0}, "batch_size"),
                          ({"device": 3}, "device"), ({"start": "yes"}, "start"),
                          ({"window": "8"}, "window"), ({"name": 1}, "name"),
                          ({"min_consumers": -1}, "min_consumers")]:
        with invalid(rf"^{param}"):
            batchcast.Producer(batches, name=kwargs.pop("name", name), **kwargs)
    with invalid("^iterable must be"):
        batchcast.Producer(42, name=name)


def test_other_entry_points_check_their_arguments():
    with invalid("^endpoint_or_name must be"):
        batchcast.query_stats(None)
    with invalid("^timeout must be"):
        batchcast.query_stats("x", timeout="3")
    with invalid("^level must be"):
        batchcast.set_log_level("loud")


def test_a_cpp_exception_is_a_batchcast_error():
    with pytest.raises(batchcast.InternalError, match="unexpected C\\+\\+ exception: boom") as e:
        _core._raise_cpp_exception("boom")
    assert isinstance(e.value, batchcast.BatchcastError)


# ---- endpoints and sizes ---------------------------------------------------


def test_tcp_port_zero_reports_the_port_it_got():
    with batchcast.Server(synthetic=100, size=4, name=H.unique_name("tcp0"),
                          endpoint="tcp://127.0.0.1:0") as srv:
        host, port = srv.endpoint.rsplit(":", 1)
        assert host == "tcp://127.0.0.1" and 0 < int(port) < 65536
        with batchcast.Loader(srv.endpoint, batch_size=10) as loader:
            images, _ = next(iter(loader))
            assert images.shape[0] == 10


def test_a_ring_larger_than_dev_shm_is_refused_with_the_sizes():
    name = H.unique_name("huge")
    with pytest.raises(batchcast.ResourceExhausted, match="/dev/shm has .* free"):
        batchcast.Server(synthetic=10, size=1024, batch_size=4096, window=64, name=name)
    assert not os.path.exists("/dev/shm/" + _core.host_ring_shm_name(name))


# ---- paths the client may not examine; dead servers -------------------------


def test_a_path_the_client_cannot_examine_is_a_batchcast_error(tmp_path):
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(batchcast.ServerUnavailable, match="cannot reach") as e:
        batchcast.Loader(f"ipc://{tmp_path}/loop/x.sock", batch_size=8)
    assert isinstance(e.value, batchcast.BatchcastError)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_users_runtime_directory_is_a_batchcast_error(tmp_path):
    os.chmod(tmp_path, 0o700)  # root's, like a runtime directory
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {H.PYDIR!r})
        import batchcast
        try:
            batchcast.Loader("ipc://{tmp_path}/server.sock", batch_size=8)
        except batchcast.BatchcastError as e:
            print(type(e).__name__, e)
        except BaseException as e:
            print("NOT A BATCHCAST ERROR", type(e).__name__, e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))
    assert out.stdout.startswith("ServerUnavailable"), out.stdout + out.stderr
    assert "Permission denied" in out.stdout


def test_a_killed_server_is_reported_at_once(tmp_path):
    H.require_server()
    name = H.unique_name("killed")
    with H.server_process(name, "--synthetic", 1000, "--size", 4) as proc:
        with batchcast.Loader(name, batch_size=8) as loader:
            next(iter(loader))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        t0 = time.monotonic()
        with pytest.raises(batchcast.ServerUnavailable, match=f"'{name}' is not running"):
            batchcast.Loader(name, batch_size=8)
        with pytest.raises(batchcast.ServerUnavailable):
            batchcast.query_stats(name)
        assert time.monotonic() - t0 < 1.0
    # Reclaimed by the next server (of any name).
    with batchcast.Server(synthetic=10, size=4, name=H.unique_name("next")):
        assert not os.path.exists("/dev/shm/" + _core.host_ring_shm_name(name))


def test_gpu_only_options_on_a_host_ring_are_said_to_be_ignored():
    # --gpu-priority, --nvjpeg-calls, --no-nvjpeg-region, --transcode-cache-mb, --device-cache-mb
    # change nothing on a host ring: the server says so at start (once),
    # and says nothing when they keep their defaults.
    def start_log(**options):
        code = ("import batchcast\n"
                f"batchcast.Server(synthetic=100, size=8, name='{H.unique_name('gpuonly')}',"
                f" **{options!r}).close()\n")
        r = subprocess.run([sys.executable, "-c", code], env=H.python_env(), capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stderr

    log = start_log(gpu_priority="high", nvjpeg_calls=2, nvjpeg_region=False)
    assert ("nvjpeg_calls (--nvjpeg-calls), nvjpeg_region (--no-nvjpeg-region), gpu_priority "
            "(--gpu-priority): only a CUDA ring (--device cuda:N) uses them; ignored on this host "
            "ring") in log, log
    assert "transcode_cache_mb" not in log, log
    log = start_log(transcode_cache_mb=0)
    assert "transcode_cache_mb (--transcode-cache-mb): only a CUDA ring (--device cuda:N) uses it" \
        in log, log
    assert "only a CUDA ring" not in start_log(gpu_priority="normal", nvjpeg_calls=1,
                                               nvjpeg_region=True)
    # --placement places batches among several rings.
    assert "placement (--placement): only a server of several rings" in start_log(
        placement="round-robin")
    assert "placement" not in start_log(placement="demand")
