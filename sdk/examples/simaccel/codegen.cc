// SPDX-License-Identifier: Apache-2.0
// target.build.simaccel. bp_build has already parsed and verified the IR, split the host
// code from the kernels (the host part runs in the core), and sends only the kernels here.
// Building a kernel for simaccel means checking it against the Target -- the checks a GPU
// compiler makes before it emits code -- and compiling it for the IR interpreter, which is
// what this simulated device executes (module.h).
#include "codegen.h"

#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/sdk/plugin.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "module.h"

namespace simaccel {

namespace ir = backplane::ir;
namespace sdk = backplane::sdk;
using backplane::Error;
using backplane::Module;
using backplane::Target;

namespace {

// Bytes of the shared allocations in `s`, a statement of kernel `func`. Every shared
// allocation counts, as if all were live at once (an upper bound, which is what a compiler
// without liveness analysis must assume). Shared memory is sized at build time, so a shape
// must be constant.
int64_t SharedBytes(const ir::Stmt& s, const std::string& func) {
  if (!s) return 0;
  switch (s.kind()) {
    case ir::StmtKind::kFor:
      return SharedBytes(s.As<ir::ForNode>()->body, func);
    case ir::StmtKind::kIfThenElse: {
      const auto* n = s.As<ir::IfThenElseNode>();
      return SharedBytes(n->then_case, func) + SharedBytes(n->else_case, func);
    }
    case ir::StmtKind::kLetStmt:
      return SharedBytes(s.As<ir::LetStmtNode>()->body, func);
    case ir::StmtKind::kSeq: {
      int64_t total = 0;
      for (const ir::Stmt& item : s.As<ir::SeqNode>()->seq) total += SharedBytes(item, func);
      return total;
    }
    case ir::StmtKind::kAllocate: {
      const auto* n = s.As<ir::AllocateNode>();
      int64_t bytes = 0;
      if (n->scope == ir::StorageScope::kShared) {
        const ir::DType t = n->buffer.dtype();
        bytes = (t.bits * t.lanes + 7) / 8;
        for (const ir::Expr& extent : n->buffer->shape) {
          const auto* imm = extent.As<ir::IntImmNode>();
          BACKPLANE_REQUIRE(imm != nullptr, BP_ERR_INVALID_ARGUMENT,
                            "kernel '" + func + "' allocates shared " + "buffer '" +
                                n->buffer.name() + "' with shape " + ir::Print(extent) +
                                ", which is not a constant; simaccel sizes shared memory when "
                                "it builds, so give shared buffers constant shapes");
          bytes *= imm->value;
        }
      }
      return bytes + SharedBytes(n->body, func);
    }
    default:  // store, evaluate, barrier: no allocation
      return 0;
  }
}

}  // namespace

Module BuildModule(SimAccelDeviceAPI* api, const std::string& ir_text, const Target& target) {
  // Only the Target is read: the machine that builds may have no simaccel device.
  const std::string arch = target.GetAttr<std::string>("arch", "sim1");
  BACKPLANE_REQUIRE(
      arch == "sim1", BP_ERR_INVALID_ARGUMENT,
      "attribute 'arch' is '" + arch + "'; this code generator emits code for arch sim1 only");
  KernelLimits limits;
  limits.max_num_threads = target.GetAttr<int64_t>("max_num_threads", 0);
  const int64_t max_shared = target.GetAttr<int64_t>("max_shared_memory_per_block", 0);
  BACKPLANE_REQUIRE(limits.max_num_threads > 0, BP_ERR_INVALID_ARGUMENT,
                    "attribute 'max_num_threads' is " + std::to_string(limits.max_num_threads) +
                        "; give a positive count");

  // An ir::Error from Parse (or from the interpreter's compiler below) becomes
  // BP_ERR_INVALID_ARGUMENT in sdk::RegisterCodegen's wrapper.
  ir::IRModule kernels = ir::Parse(ir_text, "target.build.simaccel input");
  for (const ir::PrimFunc& f : kernels.functions()) {
    BACKPLANE_REQUIRE(f.attrs.count("launch_params") != 0, BP_ERR_INVALID_ARGUMENT,
                      "function '" + f.name +
                          "' is not a kernel (it has no launch_params); build through "
                          "bp_build, which splits host code from kernels");
    const int64_t shared = SharedBytes(f.body, f.name);
    BACKPLANE_REQUIRE(shared <= max_shared, BP_ERR_INVALID_ARGUMENT,
                      "kernel '" + f.name + "' uses " + std::to_string(shared) +
                          " bytes of shared memory but the Target allows "
                          "max_shared_memory_per_block = " +
                          std::to_string(max_shared) + "; use smaller tiles");
  }
  return sdk::MakeModule(std::make_shared<SimAccelModule>(api, std::move(kernels), limits));
}

Module LoadModule(SimAccelDeviceAPI* api, const std::string& bytes) {
  return sdk::MakeModule(SimAccelModule::FromBytes(api, bytes));
}

}  // namespace simaccel
