# SPDX-License-Identifier: Apache-2.0
"""Layers from Python (docs/layer-guide.md): enable_layers, active_layers, and what happens when
a layer cannot be found or is enabled too late. The chain is fixed once per process, so each
case runs in a fresh interpreter."""
import os
import subprocess
import sys
import textwrap

from conftest import SCALE_ADD_CPU


def run(code: str, **env):
    full = dict(os.environ)
    full.pop("BACKPLANE_LAYERS", None)
    full.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, env=full)


def test_validation_layer_is_active_and_a_clean_run_has_no_finding():
    r = run("""
        import numpy as np
        import backplane as bp
        bp.enable_layers("validation")
        assert bp.active_layers() == ["validation"], bp.active_layers()
        rng = np.random.default_rng(3)
        x = rng.standard_normal(1000).astype(np.float32)
        t = bp.from_numpy(x, bp.Device("cpu:0"))
        assert np.array_equal(t.numpy(), x)
        del t
        # A module and a tensor kept in globals to the end: CPython frees them before the
        # layer's leak report at exit, so they are not leaks.
        m = bp.build(SCALE_ADD, bp.Target("c"))
        out = np.zeros(1000, np.float32)
        m["scale_add"](1000, x, x, out)
        assert np.array_equal(out, 2 * x + x)
        kept = bp.from_numpy(out, bp.Device("cpu:0"))
        print("ok")
    """.replace("SCALE_ADD", repr(SCALE_ADD_CPU)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok" in r.stdout
    assert "BP-VALID-" not in r.stderr, r.stderr


def test_layers_from_the_environment_come_first(tmp_path):
    trace = str(tmp_path / "trace.json")
    r = run("""
        import backplane as bp
        bp.enable_layers("validation")
        print(bp.active_layers())
    """, BACKPLANE_LAYERS="trace:file=" + trace)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "['trace:file=" + trace + "', 'validation']" in r.stdout, r.stdout


def test_an_unknown_layer_fails_the_first_use_naming_it():
    r = run("""
        import backplane as bp
        bp.enable_layers("no_such_layer")
        try:
            bp.Device("cpu:0").attrs()
        except bp.NotFoundError as e:
            assert "layer 'no_such_layer'" in str(e), e
            print("refused")
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "refused" in r.stdout


def test_enabling_after_the_first_use_is_refused():
    r = run("""
        import backplane as bp
        bp.Device("cpu:0").attrs()
        try:
            bp.enable_layers("validation")
        except bp.InvalidArgumentError as e:
            assert "fixed by the first use" in str(e), e
            print("refused")
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "refused" in r.stdout
