"""Builds batchcast._core through CMake for `pip install .` (metadata: pyproject.toml).

The extension is the CMake target `_core` (python/CMakeLists.txt) of the
top-level project, configured with tests and benchmarks off and the running
interpreter as Python3_EXECUTABLE; the built module is copied to where
setuptools expects it. Build files go to build-pip/ (not build/).

Environment:
  BATCHCAST_CMAKE_ARGS        extra CMake arguments, e.g. "-DBATCHCAST_WITH_CUDA=OFF"
  CMAKE_BUILD_PARALLEL_LEVEL  parallel jobs (default: all cores)
"""
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name, target):
        super().__init__(name, sources=[])
        self.target = target


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if not isinstance(ext, CMakeExtension):
            return super().build_extension(ext)
        build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        os.makedirs(build_dir, exist_ok=True)
        config = "Debug" if self.debug else "Release"
        args = [
            f"-DCMAKE_BUILD_TYPE={config}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            "-DBATCHCAST_BUILD_TESTS=OFF",
            "-DBATCHCAST_BUILD_BENCHMARKS=OFF",
            "-DBATCHCAST_BUILD_PYTHON=ON",
        ]
        if shutil.which("ninja") and not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            args += ["-G", "Ninja"]
        args += shlex.split(os.environ.get("BATCHCAST_CMAKE_ARGS", ""))
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir] + args)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.check_call(
            ["cmake", "--build", build_dir, "--config", config, "--target", ext.target, "-j", jobs]
        )
        built_dir = os.path.join(build_dir, "python", "batchcast")
        suffix = os.path.basename(self.get_ext_filename(ext.name.split(".")[-1]))
        built = os.path.join(built_dir, suffix)
        if not os.path.exists(built):
            raise RuntimeError(
                f"CMake did not produce {built}: files there: {os.listdir(built_dir)}")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built, dest)


setup(
    ext_modules=[CMakeExtension("batchcast._core", target="_core")],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build-pip"}},
)
