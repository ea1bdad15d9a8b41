"""Note [Hardware queues]: `import batchcast` asks for 32 CUDA hardware
queues unless CUDA_DEVICE_MAX_CONNECTIONS is set, and a GPU batchcast.Server
says when its process's CUDA context has fewer. No GPU needed here; the
warning of a real in-process GPU server is checked in test_cuda.py."""
import os
import subprocess
import sys

import _bc_helpers as H

H.require_batchcast()
from batchcast import _queues  # noqa: E402

VAR = "CUDA_DEVICE_MAX_CONNECTIONS"


def _python(code, value=None):
    """Runs `code` in a fresh interpreter with batchcast importable and
    CUDA_DEVICE_MAX_CONNECTIONS unset (or `value`); its stdout."""
    env = {k: v for k, v in os.environ.items() if k != VAR}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (H.PYDIR, env.get("PYTHONPATH")) if p)
    if value is not None:
        env[VAR] = value
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip()


def test_import_asks_for_32_queues_unless_the_user_set_a_value():
    code = f"import os, batchcast; print(os.environ['{VAR}'])"
    assert _python(code) == "32"
    assert _python(code, value="1") == "1"  # Megatron-LM's setting is kept
    assert _python(code, value="16") == "16"


def test_a_context_made_before_the_import_is_reported():
    # torch said CUDA had started before `import batchcast` (a stand-in
    # module, since no GPU here): the context has CUDA's default 8 queues.
    code = ("import sys, types\n"
            "fake = types.ModuleType('torch')\n"
            "fake.cuda = types.SimpleNamespace(is_initialized=lambda: True)\n"
            "sys.modules['torch'] = fake\n"
            "from batchcast import _queues\n"
            "import batchcast\n"
            "print(_queues.check_server_process())")
    out = _python(code)
    assert "shares this process's 8 CUDA hardware queues" in out, out
    assert "CUDA started before `import batchcast`" in out, out
    assert "import batchcast before any CUDA work" in out, out
    # Not started: the import's 32 hold for the context made later.
    assert _python("from batchcast import _queues\nprint(_queues.check_server_process())") == "None"


def test_shortfall_reads_the_value_the_context_got():
    # Created before the import: the value then counts, whatever it is now.
    assert _queues.shortfall(None, True, "32").startswith(
        "batchcast.Server on a GPU shares this process's 8 CUDA hardware queues "
        f"({VAR} unset, CUDA's default, CUDA started before `import batchcast`)")
    assert _queues.shortfall("32", True, "8") is None
    # Created after the import (or not yet): the value now.
    assert _queues.shortfall(None, False, "32") is None
    assert "(CUDA_DEVICE_MAX_CONNECTIONS=16)" in _queues.shortfall("16", False, "16")
    one = _queues.shortfall("1", False, "1")
    assert "1 CUDA hardware queue (" in one and "run the server as its own process" in one, one
    # What CUDA does not take counts as its default 8 (cuda::HardwareQueues).
    assert [_queues.parse(v) for v in (None, "", "0", "33", " 4", "x", "1", "32")] == [
        8, 8, 8, 8, 8, 8, 1, 32]


def test_a_cpu_server_does_not_warn(recwarn):
    batchcast = H.require_batchcast()
    os.environ[VAR] = "8"
    try:
        with batchcast.Server(synthetic=100, size=8, name=H.unique_name("queues")):
            pass
    finally:
        os.environ[VAR] = "32"
    assert not [w for w in recwarn if "hardware queue" in str(w.message)]
