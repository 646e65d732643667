# SPDX-License-Identifier: Apache-2.0
"""Remote devices from Python (docs/remote.md): a real `backplane serve` on loopback, attached
with remote.attach; its cpu:0 is a device here, tensors go there and back, and a kernel built for
its Target runs there with Python tensor objects as arguments."""
import json
import os
import subprocess
import time

import numpy as np
import pytest

import backplane as bp
from conftest import SCALE_ADD_CPU

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The server: $BACKPLANE_CLI, else the release build's program (bash cmake/bootstrap.sh test
# builds it), else an install's in build/install.
CLI = os.environ.get("BACKPLANE_CLI") or next(
    (p for p in (os.path.join(ROOT, "build", d, "bin", "backplane") for d in ("release", "install"))
     if os.path.exists(p)), os.path.join(ROOT, "build", "release", "bin", "backplane"))


@pytest.fixture
def server(tmp_path):
    if not os.path.exists(CLI):
        pytest.skip(f"no backplane program at {CLI} (set BACKPLANE_CLI)")
    try:
        bp.get_function("remote.attach")
    except bp.NotFoundError:
        pytest.skip("no remote plugin (a build without gRPC)")
    port_file = tmp_path / "port"
    log = open(tmp_path / "server.log", "w")
    env = {k: v for k, v in os.environ.items() if k != "BACKPLANE_REMOTE"}
    p = subprocess.Popen([CLI, "serve", "--listen", "127.0.0.1:0", "--port-file", str(port_file),
                          "--devices", "cpu", "--allow-native-modules"],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        for _ in range(300):
            if port_file.exists() and port_file.read_text().endswith("\n"):
                break
            assert p.poll() is None, (tmp_path / "server.log").read_text()
            time.sleep(0.1)
        yield "127.0.0.1:" + port_file.read_text().strip()
    finally:
        p.terminate()
        p.wait(20)
        log.close()


def test_a_remote_cpu_runs_a_kernel_built_here(server, rng):
    info = json.loads(bp.get_function("remote.attach")(server, "{}"))
    d = bp.Device(info["devices"][0]["device"])
    assert d.type == "remote" and d.exists
    props = d.properties()
    assert props["server"] == server and props["remote_device"] == "cpu:0"

    n = 4099
    x = rng.uniform(-10, 10, n).astype(np.float32)
    y = rng.uniform(-10, 10, n).astype(np.float32)
    tx, ty = bp.from_numpy(x, d), bp.from_numpy(y, d)
    np.testing.assert_array_equal(tx.numpy(), x)

    target = bp.Target.from_device(d)
    assert target.kind == "remote"
    m = bp.build(SCALE_ADD_CPU, target)
    out = bp.from_numpy(np.full(n, np.nan, np.float32), d)
    m["scale_add"](n, tx, ty, out)
    np.testing.assert_array_equal(out.numpy(), 2 * x + y)

    status = json.loads(bp.get_function("remote.status")(server))
    assert status["sessions"] >= 1 and status["buffers"] >= 3
    bp.get_function("remote.detach")(server)
    with pytest.raises(bp.NotFoundError, match="detached"):
        bp.empty((4,), "float32", d)
