"""The README's install recipe, run line by line as written there, with its
virtual environment (`.venv`) in a temporary folder: the installed package,
not the build's, imports and serves a whole epoch, and `batchcast-launch`
is installed beside it. The first run builds the extension (build-pip/, a
few minutes on 2 cores); later runs reuse that build.
"""
import os
import re
import subprocess

import pytest

import _bc_helpers as H

README = os.path.join(H.REPO, "README.md")


def install_recipe():
    """The lines of the README's install block (the code block after
    "Install the Python package")."""
    with open(README) as f:
        text = f.read()
    m = re.search(r"^Install the Python package.*?^```\n(.*?)^```", text, re.S | re.M)
    assert m, "README.md: no code block after 'Install the Python package'"
    return [line for line in m.group(1).splitlines() if line.strip()]


def test_the_readme_recipe_makes_a_venv_and_installs_the_package_into_it():
    lines = install_recipe()
    assert any("venv" in line for line in lines) and any("pip install" in line for line in lines)
    assert all(".venv" in line for line in lines), "the recipe names its environment .venv"


def test_the_installed_package_imports_and_serves_a_whole_epoch(tmp_path):
    try:
        import ensurepip  # noqa: F401  (python3-venv: what `venv` needs to give it pip)
    except ImportError:
        pytest.skip("no venv with pip here: Debian's python3-venv "
                    "(scripts/install-deps.sh installs it)")
    venv = str(tmp_path / "venv")
    # The installed package only: not the build's through PYTHONPATH.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for line in install_recipe():
        r = subprocess.run(line.replace(".venv", venv), shell=True, cwd=H.REPO, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=1200)
        assert r.returncode == 0, f"{line}: exit {r.returncode}\n{r.stdout[-3000:]}"
    python = os.path.join(venv, "bin", "python")
    assert os.path.exists(os.path.join(venv, "bin", "batchcast-launch"))
    script = f"""
import batchcast
print("FILE", batchcast.__file__)
name = {H.unique_name("install")!r}
with batchcast.Server(synthetic=300, size=16, batch_size=64, name=name) as s:
    loader = batchcast.Loader(s.name, batch_size=32, drop_last=False)
    print("SAMPLES", sum(len(labels) for _, labels in loader))
"""
    r = subprocess.run([python, "-c", script], cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:]
    where = re.search(r"^FILE (.*)$", r.stdout, re.M).group(1)
    assert where.startswith(venv), f"imported {where}, not the installed package"
    assert re.search(r"^SAMPLES (\d+)$", r.stdout, re.M).group(1) == "300"
