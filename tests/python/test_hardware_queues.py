"""Note [Hardware queues]: a GPU batchcast.Server asks for 32 CUDA hardware
queues for the CUDA start it makes (CUDA_DEVICE_MAX_CONNECTIONS set for that
moment only) and says when CUDA had started with fewer. No GPU needed here;
what the GPU sees is checked in test_cuda.py (hardware_queues_probe.py)."""
import os
import subprocess
import sys

import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()
from batchcast import _queues  # noqa: E402

VAR = "CUDA_DEVICE_MAX_CONNECTIONS"


@pytest.fixture
def no_var(monkeypatch):
    monkeypatch.delenv(VAR, raising=False)


def test_import_leaves_the_variable_alone():
    # Processes started later (a batchcast-server: 8 suits it) inherit it.
    r = subprocess.run([sys.executable, "-c",
                        f"import os, batchcast; print(os.environ.get('{VAR}'))"],
                       env=H.python_env(drop=(VAR,)), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "None", r.stdout + r.stderr


def test_the_variable_is_set_for_a_gpu_start_only_and_then_restored(no_var, monkeypatch):
    monkeypatch.setattr(_queues, "cuda_started", lambda: False)
    with _queues.for_server_start("cuda:0") as warning:
        assert os.environ[VAR] == "32" and warning is None
    assert VAR not in os.environ
    with _queues.for_server_start("cpu") as warning:
        assert VAR not in os.environ and warning is None
    # Restored also when the start fails.
    with pytest.raises(ValueError):
        with _queues.for_server_start("cuda:all"):
            raise ValueError("no GPU")
    assert VAR not in os.environ


def test_a_value_the_user_set_is_kept(monkeypatch):
    monkeypatch.setattr(_queues, "cuda_started", lambda: False)
    for value in ("1", "8", "16"):  # 1: Megatron-LM's setting
        monkeypatch.setenv(VAR, value)
        with _queues.for_server_start("cuda:0") as warning:
            assert os.environ[VAR] == value and warning is None
        assert os.environ[VAR] == value


def test_cuda_started_before_the_server_is_reported(no_var, monkeypatch):
    monkeypatch.setattr(_queues, "cuda_started", lambda: True)
    with _queues.for_server_start("cuda:0") as warning:
        assert VAR not in os.environ  # too late to matter: not set
    assert warning.startswith(
        "batchcast.Server on a GPU shares this process's 8 CUDA hardware queues "
        f"({VAR} unset: CUDA's default; CUDA started before the Server)"), warning
    assert "create the Server before any other CUDA work" in warning
    monkeypatch.setenv(VAR, "32")
    with _queues.for_server_start("cuda:0") as warning:
        pass
    assert warning is None
    one = _queues.shortfall(True, "1")
    assert "1 CUDA hardware queue (" in one and "run the server as its own process" in one, one


def test_values_cuda_does_not_take_count_as_its_default():
    # Read by cuda::HardwareQueuesFor, as the server reads the variable
    # (tests/cuda/hardware_queues_test.cc).
    read = batchcast._core.hardware_queues
    assert [read(v) for v in (None, "", "0", "33", " 4", "4 ", "x", "1", "32")] == [
        8, 8, 8, 8, 8, 8, 8, 1, 32]
    assert _queues.PREFERRED == batchcast._core.MAX_HARDWARE_QUEUES == 32


def test_a_gpu_server_is_one_whose_device_option_names_a_gpu():
    # The device option as the server reads it (server/src/device_list.h).
    for device in ("cuda:0", "cuda:1,0", "cuda:all"):
        assert _queues.on_gpu(device), device
    for device in ("cpu", None, 0, "cuda:x", "cuda:0,0", "gpu"):
        assert not _queues.on_gpu(device), device


def test_cuda_started_asks_torch_without_importing_it(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "torch", None)
    assert _queues.cuda_started() is False
    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(is_initialized=lambda: True)
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert _queues.cuda_started() is True


def test_a_cpu_server_neither_sets_nor_warns(no_var, recwarn):
    with batchcast.Server(synthetic=100, size=8, name=H.unique_name("queues")):
        assert VAR not in os.environ
    assert not [w for w in recwarn if "hardware queue" in str(w.message)]
