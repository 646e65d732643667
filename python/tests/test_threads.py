# SPDX-License-Identifier: Apache-2.0
"""Threads calling into Backplane in parallel (the GIL is released during calls and copies)."""
import threading

import numpy as np

import backplane as bp
from conftest import scale_add_source


def test_threads_call_functions_in_parallel(devices):
    modules = {}
    for d in devices:
        target = bp.Target.from_device(d)
        modules[d] = bp.build(scale_add_source(target), target)
    errors = []

    def worker(k):
        try:
            rng = np.random.default_rng(1000 + k)
            d = devices[k % len(devices)]
            f = modules[d]["scale_add"]
            for _ in range(20):
                n = int(rng.integers(1, 5000))
                x = rng.standard_normal(n).astype(np.float32)
                y = rng.standard_normal(n).astype(np.float32)
                out = bp.empty([n], "float32", d)
                f(n, bp.from_numpy(x, d), bp.from_numpy(y, d), out)
                got = out.numpy()
                if not np.array_equal(got, 2 * x + y):
                    errors.append(f"thread {k} on {d}: wrong result for n={n}")
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(f"thread {k}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
