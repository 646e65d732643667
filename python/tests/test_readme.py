# SPDX-License-Identifier: Apache-2.0
"""The README's Python example runs and checks out on every device here."""
import os
import re
import subprocess
import sys

import backplane as bp

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_the_readme_example_passes_on_every_device(devices):
    with open(README, encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines == [f"{d} True" for d in devices], r.stdout
