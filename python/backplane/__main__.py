# SPDX-License-Identifier: Apache-2.0
"""python -m backplane demo [options] | devices"""
import sys


def _main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m backplane demo [--size small|demo] [-k KERNEL] [-d DEVICE] "
              "[--repeat N]\n       python -m backplane devices")
        return 0 if argv else 2
    if argv[0] == "demo":
        # The demo's float64 references use NumPy's matrix product; OpenBLAS's workers then
        # spin on the cores the cpu kernels run on and slow the times shown 2-3x
        # (docs/host-guide.md, "The cpu device"). One BLAS thread, unless the caller chose.
        import os

        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        from .demo import main

        return main(argv[1:])
    if argv[0] == "devices":
        import backplane as bp

        for d in bp.devices():
            print(f"{d}  {d.name}")
        return 0
    print(f"python -m backplane: unknown command '{argv[0]}'; try 'demo' or 'devices'",
          file=sys.stderr)
    return 2


sys.exit(_main(sys.argv[1:]))
