// SPDX-License-Identifier: Apache-2.0
// The C-family emitter's run-time checks: fault messages, the site table's JSON, and the
// checked divisions, indices and fault helpers generated code calls.
#include <algorithm>
#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/expf.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "c_family_internal.hpp"

namespace backplane {
namespace codegen {

// ---- Faults -------------------------------------------------------------------------------

std::string FaultMessage(const FaultSite& site, const FaultRecord& r) {
  switch (site.kind) {
    case FaultSite::Kind::kDivisionByZero:  // quoted again: a module saved by an older build
      return site.func + ": integer division by zero in `" + ir::QuoteText(site.text) + "`";
    case FaultSite::Kind::kOutOfBounds:
      return site.func + ": index " + std::to_string(r.arg[0]) +
             " is out of bounds for dimension " + std::to_string(r.arg[2]) + " of buffer '" +
             site.buffer + "' (extent " + std::to_string(r.arg[1]) + ") in `" +
             ir::QuoteText(site.text) + "`";
    case FaultSite::Kind::kAllocation: {
      const std::string what =
          "allocation '" + site.buffer + "' (" + site.dtype + ", shape " + site.text + ")";
      if (r.arg[0] == 1) {
        return site.func + ": " + what + " has extent " + std::to_string(r.arg[2]) +
               " in dimension " + std::to_string(r.arg[1]) +
               "; an extent must be >= 0 (check the scalar arguments its shape uses)";
      }
      if (r.arg[0] == 2) {
        return site.func + ": out of host memory for " + what + " of " + std::to_string(r.arg[1]) +
               " bytes; free memory or make it smaller";
      }
      double bytes = 0;
      std::memcpy(&bytes, &r.arg[1], sizeof(bytes));
      char text[32];
      std::snprintf(text, sizeof(text), "%.6g", bytes);
      return site.func + ": " + what + " needs " + text +
             " bytes, more than the address space holds (its size overflows); make it smaller";
    }
  }
  return site.func + ": a run-time check failed";
}

std::string FaultMessage(const std::vector<FaultSite>& sites, const FaultRecord& record) {
  if (record.site == 0) return "";
  if (record.site < 0 || static_cast<size_t>(record.site) > sites.size()) {
    return "a run-time check of site " + std::to_string(record.site) +
           " failed, and the module has no such site (the module is damaged; rebuild it)";
  }
  return FaultMessage(sites[static_cast<size_t>(record.site) - 1], record);
}

bool FaultIsOutOfMemory(const std::vector<FaultSite>& sites, const FaultRecord& record) {
  if (record.site <= 0 || static_cast<size_t>(record.site) > sites.size()) return false;
  return sites[static_cast<size_t>(record.site) - 1].kind == FaultSite::Kind::kAllocation &&
         record.arg[0] == 2;
}

namespace {

// JSON string escaping for the site table (names and IR text: printable ASCII and `\n`).
std::string Quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      q += '\\';
      q += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      q += buf;
    } else {
      q += c;
    }
  }
  return q + "\"";
}

}  // namespace

std::string FaultSitesToJson(const std::vector<FaultSite>& sites) {
  std::string j = "[";
  for (size_t i = 0; i < sites.size(); ++i) {
    const FaultSite& f = sites[i];
    j += std::string(i ? "," : "") + "[" + std::to_string(static_cast<int>(f.kind)) + "," +
         Quote(f.func) + "," + Quote(f.buffer) + "," + Quote(f.text) + "," + Quote(f.dtype) + "]";
  }
  return j + "]";
}

std::vector<FaultSite> FaultSitesFromJson(const std::string& json) {
  // The inverse of FaultSitesToJson: an array of [kind, func, buffer, text, dtype].
  std::vector<FaultSite> sites;
  size_t pos = 0;
  auto fail = [&]() -> void {
    throw ir::Error(ir::ErrorKind::kValue,
                    "the fault site table of a saved module is damaged near byte " +
                        std::to_string(pos) + "; build and save the module again");
  };
  auto expect = [&](char c) {
    if (pos >= json.size() || json[pos] != c) fail();
    ++pos;
  };
  auto string = [&]() {
    expect('"');
    std::string out;
    while (pos < json.size() && json[pos] != '"') {
      char c = json[pos++];
      if (c == '\\') {
        if (pos >= json.size()) fail();
        c = json[pos++];
        if (c == 'u') {
          if (pos + 4 > json.size()) fail();
          c = static_cast<char>(std::stoi(json.substr(pos, 4), nullptr, 16));
          pos += 4;
        }
      }
      out += c;
    }
    expect('"');
    return out;
  };
  expect('[');
  while (pos < json.size() && json[pos] != ']') {
    if (!sites.empty()) expect(',');
    expect('[');
    FaultSite f;
    if (pos >= json.size() || json[pos] < '0' || json[pos] > '2') fail();
    f.kind = static_cast<FaultSite::Kind>(json[pos++] - '0');
    expect(',');
    f.func = string();
    expect(',');
    f.buffer = string();
    expect(',');
    f.text = string();
    expect(',');
    f.dtype = string();
    expect(']');
    sites.push_back(std::move(f));
  }
  expect(']');
  return sites;
}

// ---- Run-time checks ----------------------------------------------------------------------

std::string CFamilyEmitter::StatementExpression(const std::string& statements,
                                                const std::string& value) {
  return "({ " + statements + " " + value + "; })";
}

std::string CFamilyEmitter::HoistStatements(const std::string& statements,
                                            const std::string& value) {
  pending_.back().push_back(statements);
  return value;
}

std::string CFamilyEmitter::FaultClaim(const std::string& record, const std::string& site) {
  return "__sync_bool_compare_and_swap(&" + record + "->site, 0, " + site + ")";
}

int CFamilyEmitter::AddFaultSite(FaultSite::Kind kind, const std::string& buffer,
                                 const std::string& text, const std::string& dtype) {
  FaultSite site;
  site.kind = kind;
  site.func = func_ != nullptr ? func_->name : "";
  site.buffer = buffer;
  // The interpreter's quote of the expression or statement (at most 200 characters), so the
  // fault's message is the interpreter's, and a site of a 99,000-term chain is not its text.
  site.text = kind == FaultSite::Kind::kAllocation ? text : ir::QuoteText(text);
  site.dtype = dtype;
  sites_.push_back(std::move(site));
  if (sites_.size() > static_cast<size_t>(INT32_MAX) - 1) Fail("too many run-time checks");
  return static_cast<int>(sites_.size());
}

std::string CFamilyEmitter::CheckedIntDivision(BinaryOp op, DType t, const std::string& x,
                                               const std::string& y, const ir::Expr& divisor,
                                               const ir::Expr& e) {
  // A constant divisor other than 0 (and -1 for signed types) needs no check.
  const ir::IntImmNode* c = AsIntImm(divisor);
  if (c == nullptr) {
    if (const auto* bc = divisor.As<ir::BroadcastNode>()) c = AsIntImm(bc->value);
  }
  const bool safe = c != nullptr && c->value != 0 && !(t.is_int() && c->value == -1);
  const std::string width = t.bits <= 32 ? "32" : "64";
  if (safe) {
    if (op == BinaryOp::kMod)
      return t.is_uint() ? "(" + x + " % " + y + ")" : SignedRemainder(x, y, t);
    if (op == BinaryOp::kDiv || t.is_uint()) {
      return "(" + x + (op == BinaryOp::kFloorMod ? " % " : " / ") + y + ")";
    }
    uses_floordiv_ = true;
    return std::string(op == BinaryOp::kFloorDiv ? "bp_floordiv(" : "bp_floormod(") +
           CastText("int64_t", "(" + x + ")") + ", " + CastText("int64_t", "(" + y + ")") + ")";
  }
  std::string text = ir::Print(e);
  const std::string site = std::to_string(AddFaultSite(FaultSite::Kind::kDivisionByZero, "", text));
  ++effects_;  // a fault noted: kept in the IR's order with the other operands
  std::string helper;
  if (t.is_uint()) {
    helper = (op == BinaryOp::kFloorMod || op == BinaryOp::kMod ? "mod_u" : "div_u") + width;
  } else if (op == BinaryOp::kDiv) {
    helper = "div_i" + width;
  } else if (op == BinaryOp::kMod) {
    helper = "mod_i" + width;
  } else {
    helper = op == BinaryOp::kFloorDiv ? "floordiv_chk" : "floormod_chk";
  }
  helpers_.insert(helper);
  return "bp_" + helper + "(bp_fault, " + site + ", " + x + ", " + y + ")";
}

int CFamilyEmitter::AccessSite(const ir::Buffer& buffer, const std::string& text) {
  if (!checks_.bounds_check) return 0;
  helpers_.insert("chk");
  return AddFaultSite(FaultSite::Kind::kOutOfBounds, buffer.name(), text);
}

std::string CFamilyEmitter::CheckedIndex(const std::string& index, const std::string& extent,
                                         int dim, int site) {
  return "bp_chk(bp_fault, " + std::to_string(site) + ", " + std::to_string(dim) + ", (int64_t)(" +
         index + "), (int64_t)(" + extent + "), &";
}

std::string CFamilyEmitter::CheckedFlat(const ir::Buffer& buffer,
                                        const std::vector<std::string>& idx) {
  const ir::BufferNode& b = *buffer.get();
  if (idx.size() == 1 && b.strides.empty()) return idx[0];
  std::string flat;
  if (!b.strides.empty()) {
    for (size_t k = 0; k < idx.size(); ++k) {
      flat += (k ? " + " : "") + idx[k] + " * (int64_t)(" + EmitExpr(b.strides[k]) + ")";
    }
    return flat;
  }
  flat = idx[0];
  for (size_t k = 1; k < idx.size(); ++k) {
    flat = "(" + flat + ") * (int64_t)(" + EmitExpr(b.shape[k]) + ") + " + idx[k];
  }
  return flat;
}

std::string CFamilyEmitter::FaultHelpers() {
  const std::string q = HelperQualifier() + " ";
  const std::string r = FaultRecordType();
  std::string p =
      "\n/* The fault record: the first run-time check that fails claims it "
      "(docs/codegen-guide.md). */\n"
      "typedef struct { int32_t site; int32_t reserved; int64_t arg[3]; } bp_fault_t;\n";
  if (helpers_.empty()) return p;
  p += q + "void bp_fault_set(" + r +
       " f, int32_t site, int64_t a0, int64_t a1, int64_t a2) {\n"
       "  if (" +
       FaultClaim("f", "site") +
       ") {\n"
       "    f->arg[0] = a0;\n"
       "    f->arg[1] = a1;\n"
       "    f->arg[2] = a2;\n"
       "  }\n"
       "}\n";
  for (const char* w : {"32", "64"}) {
    const std::string it = std::string("int") + w + "_t", ut = std::string("uint") + w + "_t";
    if (helpers_.count(std::string("div_i") + w)) {
      // b == 0 or b == -1 in one compare; -1 negates with wrap-around (INT_MIN / -1 = INT_MIN).
      p += q + it + " bp_div_i" + w + "(" + r + " f, int32_t site, " + it + " a, " + it +
           " b) {\n"
           "  if ((" +
           ut +
           ")b + 1u <= 1u) {\n"
           "    if (b == 0) { bp_fault_set(f, site, 0, 0, 0); return 0; }\n"
           "    return (" +
           it + ")((" + ut + ")0 - (" + ut +
           ")a);\n"
           "  }\n"
           "  return a / b;\n"
           "}\n";
    }
    if (helpers_.count(std::string("mod_i") + w)) {
      // C's %: by -1 it is 0 (INT_MIN % -1 would trap), by 0 a fault.
      p += q + it + " bp_mod_i" + w + "(" + r + " f, int32_t site, " + it + " a, " + it +
           " b) {\n"
           "  if ((" +
           ut +
           ")b + 1u <= 1u) {\n"
           "    if (b == 0) bp_fault_set(f, site, 0, 0, 0);\n"
           "    return 0;\n"
           "  }\n"
           "  return a % b;\n"
           "}\n";
    }
    for (const char* op : {"div", "mod"}) {
      if (!helpers_.count(std::string(op) + "_u" + w)) continue;
      p += q + ut + " bp_" + op + "_u" + w + "(" + r + " f, int32_t site, " + ut + " a, " + ut +
           " b) {\n"
           "  if (b == 0u) { bp_fault_set(f, site, 0, 0, 0); return 0u; }\n"
           "  return a " +
           (std::string(op) == "div" ? "/" : "%") +
           " b;\n"
           "}\n";
    }
  }
  if (helpers_.count("floordiv_chk")) {
    p += q + "int64_t bp_floordiv_chk(" + r +
         " f, int32_t site, int64_t a, int64_t b) {\n"
         "  if ((uint64_t)b + 1u <= 1u) {\n"
         "    if (b == 0) { bp_fault_set(f, site, 0, 0, 0); return 0; }\n"
         "    return (int64_t)((uint64_t)0 - (uint64_t)a);\n"
         "  }\n"
         "  int64_t q = a / b;\n"
         "  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
         "}\n";
  }
  if (helpers_.count("floormod_chk")) {
    p += q + "int64_t bp_floormod_chk(" + r +
         " f, int32_t site, int64_t a, int64_t b) {\n"
         "  if ((uint64_t)b + 1u <= 1u) {\n"
         "    if (b == 0) bp_fault_set(f, site, 0, 0, 0);\n"
         "    return 0;\n"
         "  }\n"
         "  int64_t r = a % b;\n"
         "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
         "}\n";
  }
  if (helpers_.count("chk")) {
    // An index out of bounds clears *ok: the access is skipped (a load gives 0).
    p += q + "int64_t bp_chk(" + r +
         " f, int32_t site, int32_t dim, int64_t i, int64_t n, int* ok) {\n"
         "  if ((uint64_t)i < (uint64_t)n) return i;\n"
         "  bp_fault_set(f, site, i, n, dim);\n"
         "  *ok = 0;\n"
         "  return 0;\n"
         "}\n"
         // A contiguous vector access of `lanes` elements from i. The index reported is the
         // first lane's out of bounds, as the interpreter's: n when i is in bounds.
         + q + "int64_t bp_chkv(" + r +
         " f, int32_t site, int32_t dim, int64_t i, int64_t lanes, int64_t n, int* ok) {\n"
         "  if ((uint64_t)i < (uint64_t)n && (uint64_t)(i + lanes - 1) < (uint64_t)n) return i;\n"
         "  bp_fault_set(f, site, (uint64_t)i < (uint64_t)n ? n : i, n, dim);\n"
         "  *ok = 0;\n"
         "  return 0;\n"
         "}\n";
  }
  if (helpers_.count("alloc")) {
    // The bytes of an allocation, or 0 after recording why it cannot be made. Never 0
    // otherwise (an empty allocation takes one byte, so calloc's NULL always means failure).
    p += q + "size_t bp_alloc_bytes(" + r +
         " f, int32_t site, int64_t elem, int32_t ndim, const int64_t* dims) {\n"
         "  uint64_t bytes = (uint64_t)elem;\n"
         "  double approx = (double)elem;\n"
         "  int overflow = 0;\n"
         "  for (int32_t k = 0; k < ndim; ++k) {\n"
         "    if (dims[k] < 0) { bp_fault_set(f, site, 1, k, dims[k]); return 0; }\n"
         "    approx *= (double)dims[k];\n"
         "    overflow |= __builtin_mul_overflow(bytes, (uint64_t)dims[k], &bytes);\n"
         "  }\n"
         "  if (overflow || bytes > (uint64_t)PTRDIFF_MAX) {\n"
         "    int64_t bits;\n"
         "    memcpy(&bits, &approx, sizeof(bits));\n"
         "    bp_fault_set(f, site, 0, bits, 0);\n"
         "    return 0;\n"
         "  }\n"
         "  return bytes == 0 ? 1 : (size_t)bytes;\n"
         "}\n";
  }
  return p;
}

}  // namespace codegen
}  // namespace backplane
