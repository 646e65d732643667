// SPDX-License-Identifier: Apache-2.0
// The raw side of the vector_add benchmark (vulkan_bench.cc): hand-written, with the
// geometry of the catalog's vector_add_gpu (256 invocations a workgroup, one an element).
#version 450
layout(local_size_x = 256) in;
layout(push_constant) uniform Push { int n; } push;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
void main() {
  int i = int(gl_GlobalInvocationID.x);
  if (i < push.n) c[i] = a[i] + b[i];
}
