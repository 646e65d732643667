// SPDX-License-Identifier: Apache-2.0
// The raw side of the empty-dispatch benchmark (vulkan_bench.cc): one invocation that stores
// nothing, with the same interface as Backplane's empty_gpu (n pushed, x bound at 0).
#version 450
layout(local_size_x = 1) in;
layout(push_constant) uniform Push { int n; } push;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };
void main() {
  if (push.n < 0) x[0] = 0.0;
}
