# SPDX-License-Identifier: Apache-2.0
"""What the installed package carries: the catalog's kernels, found relative to the package."""
import os
import re
import subprocess
import sys

import numpy as np

import backplane as bp
import backplane.demo

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CATALOG = ["conv2d", "matmul", "saxpy", "softmax", "sum", "transpose", "vector_add"]


def test_kernel_dir_holds_the_catalog_and_matches_the_sources():
    folder = bp.kernel_dir()
    assert "kernel_dir" in bp.__all__
    assert backplane.demo.kernel_dir() == folder
    names = sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".bpir"))
    assert names == CATALOG
    for name in CATALOG:
        with open(os.path.join(folder, name + ".bpir"), encoding="utf-8") as f:
            installed = f.read()
        with open(os.path.join(REPO, "sdk", "apps", "kernels", name + ".bpir"), encoding="utf-8") as f:
            assert installed == f.read(), f"{name}.bpir in {folder} differs from the sources'"


def test_a_catalog_kernel_from_kernel_dir_runs_and_matches_numpy():
    with open(os.path.join(bp.kernel_dir(), "vector_add.bpir"), encoding="utf-8") as f:
        source = f.read()
    functions = backplane.demo.split_functions(source)
    name = next(n for n in functions if not n.endswith("_gpu"))
    f = bp.build(functions[name], bp.Target.from_device(bp.Device("cpu:0")))[name]
    rng = np.random.default_rng(41)
    n = 4099
    a = rng.uniform(-1, 1, n).astype(np.float32)
    b = rng.uniform(-1, 1, n).astype(np.float32)
    out = bp.empty([n], "float32", "cpu:0")
    f(n, bp.from_numpy(a), bp.from_numpy(b), out)
    np.testing.assert_allclose(out.numpy(), a.astype(np.float64) + b, rtol=1e-6)


def test_backplane_kernel_dir_overrides(tmp_path):
    code = ("import backplane as bp, backplane.demo as d\n"
            "print(bp.kernel_dir())\nprint(d.kernel_dir())")
    env = dict(os.environ, BACKPLANE_KERNEL_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [str(tmp_path)] * 2


def test_the_package_readme_example_runs():
    with open(os.path.join(REPO, "python", "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Using it"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [repr(bp.devices())], r.stdout


def test_the_package_version_is_the_projects():
    import importlib.metadata

    with open(os.path.join(REPO, "CMakeLists.txt"), encoding="utf-8") as f:
        version = re.search(r"project\(Backplane VERSION ([0-9.]+)", f.read()).group(1)
    for pyproject in ("pyproject.toml", os.path.join("python", "pyproject.toml")):
        with open(os.path.join(REPO, pyproject), encoding="utf-8") as f:
            text = f.read()
        assert re.search(r'(?m)^name = "backplane-runtime"$', text), pyproject
        assert re.search(r'(?m)^version = "([0-9.]+)"$', text).group(1) == version, (
            f"{pyproject}'s version differs from CMakeLists.txt's project VERSION {version}")
    assert importlib.metadata.version("backplane-runtime") == version
