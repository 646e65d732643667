// SPDX-License-Identifier: Apache-2.0
// Uses each library component of the installed package once (CMakeLists.txt beside it):
// Backplane::kernels reads vector_add from the catalog's kernel file, Backplane::ir parses
// and verifies it, Backplane::codegen round-trips fault sites through JSON,
// Backplane::backplane builds it for the Target `c` and Backplane::runner runs it on cpu:0
// against the float64 reference. Prints "components probe: ok" when all of it passes.
#include <backplane/backplane.hpp>
#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/kernels/catalog.hpp>
#include <backplane/runner/runner.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace bp = backplane;

int main() {
  try {
    bp::Check(bp_plugins_load_all());
    const bp::kernels::Case* c = bp::kernels::Find("vector_add");
    if (c == nullptr) {
      std::fprintf(stderr, "the catalog has no vector_add\n");
      return 1;
    }
    const std::string source = bp::runner::KernelSource(*c);
    bp::ir::IRModule module = bp::ir::Parse(source, c->file);
    if (module.Find("vector_add") == nullptr) {
      std::fprintf(stderr, "the parsed module lacks vector_add:\n%s\n", source.c_str());
      return 1;
    }
    bp::codegen::FaultSite site;
    site.kind = bp::codegen::FaultSite::Kind::kOutOfBounds;
    site.func = "vector_add";
    site.buffer = "a";
    site.text = "a[i]";
    const std::vector<bp::codegen::FaultSite> sites =
        bp::codegen::FaultSitesFromJson(bp::codegen::FaultSitesToJson({site}));
    if (sites.size() != 1 || sites[0].buffer != "a" || sites[0].text != "a[i]") {
      std::fprintf(stderr, "codegen: fault sites do not round-trip through JSON\n");
      return 1;
    }
    bp::Module m = bp::Build(source, bp::Target::Parse("c"));
    bp::runner::Result r = bp::runner::RunCase(*c, m, bp::Device("cpu", 0), c->small, 1, 7);
    if (!r.ok) {
      std::fprintf(stderr, "vector_add on cpu:0 failed: %s\n", r.error.c_str());
      return 1;
    }
    std::printf("vector_add on cpu:0: ok (max error %g)\ncomponents probe: ok\n", r.max_error);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "components probe: %s\n", e.what());
    return 1;
  }
}
