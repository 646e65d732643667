#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The remote protocol negotiates IR versions (docs/remote.md, "IR versions"): a client builds for
# a server that reads only IR text version 1 (the mock BACKPLANE_SERVE_MOCK_IR_NEWEST=1, which
# also refuses uploads of newer text as such a server would), lowering what it builds.
#   older_server_test.sh BACKPLANE WITH_SERVER_SH KERNEL_DIR
# Run by ctest (remote.older_server). Builds sum.bpir (version 2: a `var` and a loop by a
# host-computed count) for remote:0 and checks sum_gpu against the interpreter; builds a kernel
# with an atomic and expects the refusal naming the construct and the server.
set -euo pipefail
cli="$1"
with_server="$2"
kernels="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cat >"$work/hist.bpir" <<'IR'
# backplane-ir 2
func hist(n: int32, x: buffer<int32>[n], h: buffer<int32>[4]) {
  for b in thread(blockIdx.x, 0, (n + 63) / 64) {
    for t in thread(threadIdx.x, 0, 64) {
      if (b * 64 + t < n) {
        atomic_add(h[x[b * 64 + t]], 1)
      }
    }
  }
}
IR

cat >"$work/client.sh" <<'SH'
set -euo pipefail
cli="$1"; kernels="$2"; work="$3"
grep -q '^# backplane-ir 2' "$kernels/sum.bpir" || { echo "sum.bpir is no longer version 2"; exit 1; }
"$cli" build "$kernels/sum.bpir" -t remote:0 -o "$work/sum.bpmod"
"$cli" run "$work/sum.bpmod" -f sum_gpu --dim n=5000 --dim blocks=3 --check --ir "$kernels/sum.bpir"
if "$cli" build "$work/hist.bpir" -t remote:0 -o "$work/hist.bpmod" 2>"$work/err"; then
  echo "the atomic kernel built for a server that reads version 1 only"; exit 1
fi
for part in "uses atomic_add" "which needs IR text version 2" "remote server" \
            "reads IR text versions 1 to 1"; do
  grep -qF "$part" "$work/err" || { echo "missing '$part' in:"; cat "$work/err"; exit 1; }
done
echo "older server: sum_gpu lowered to version 1 and right; the atomic refused by name"
SH

BACKPLANE_SERVE_MOCK_IR_NEWEST=1 bash "$with_server" "$cli" --devices opencl -- \
  bash "$work/client.sh" "$cli" "$kernels" "$work"
