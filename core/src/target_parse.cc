// SPDX-License-Identifier: Apache-2.0
// Parsing Targets: JSON, a kind name, a tag, or "kind -key=value -flag"; type-checking
// against the kind's schema; defaults; the canonicalizer.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>

#include "target.h"

namespace backplane {
namespace core {
namespace {

constexpr size_t kMaxTextBytes = 1 << 20;
constexpr int kMaxJsonDepth = 64;  // brackets, checked before parsing
constexpr int kMaxHostDepth = 8;   // host inside host inside ...

[[noreturn]] void Bad(const std::string& message) { Fail(BP_ERR_INVALID_ARGUMENT, message); }

// Rejects text nested deeper than kMaxJsonDepth before any recursive code sees it.
void CheckDepth(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) {
        Bad("target: the text is nested deeper than " + std::to_string(kMaxJsonDepth) +
            " levels of brackets; flatten it");
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
}

std::string Quote(const std::string& s) {
  std::string shown = s.size() > 80 ? s.substr(0, 77) + "..." : s;
  return "'" + shown + "'";
}

// A JSON string for messages, with control characters (a NUL) escaped: "a\u0000b".
std::string Shown(const std::string& s) {
  std::string d = Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
  return d.size() > 80 ? d.substr(0, 77) + "...\"" : d;
}

// Where a NUL byte sits in `text` ("the value" of `what`), or "" when there is none.
std::string NulIn(const std::string& text) {
  const size_t at = text.find('\0');
  if (at == std::string::npos) return "";
  return " holds a NUL byte at offset " + std::to_string(at) + " (" + Shown(text) +
         "); a Target's strings end at the first NUL on their way to a compiler or a C API, so "
         "what follows would be dropped silently: remove it";
}

std::string Describe(const Json& v) {
  std::string d = v.dump();
  if (d.size() > 80) d = d.substr(0, 77) + "...";
  const char* type = v.is_boolean()          ? "a bool"
                     : v.is_number_integer() ? "an integer"
                     : v.is_number()         ? "a number"
                     : v.is_string()         ? "a string"
                     : v.is_array()          ? "an array"
                     : v.is_object()         ? "an object"
                                             : "null";
  return std::string(type) + " (" + d + ")";
}

bool FitsInt64(const Json& v) {
  if (v.is_number_unsigned()) {
    return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  }
  return v.is_number_integer();
}

// The "kind -key=value" tokens: whitespace-separated, quotes group, backslash escapes inside
// double quotes.
std::vector<std::string> Tokenize(const std::string& text) {
  std::vector<std::string> tokens;
  std::string cur;
  bool have = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < text.size()) {
        cur += text[++i];
      } else {
        cur += c;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
      have = true;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (have) tokens.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += c;
      have = true;
    }
  }
  if (quote != 0) Bad(std::string("target: unterminated ") + quote + " quote in " + Quote(text));
  if (have) tokens.push_back(cur);
  return tokens;
}

// Strings go into JSON, which holds UTF-8 only (RFC 3629: no overlong forms, no surrogates,
// nothing past U+10FFFF).
const std::string& CheckUtf8(const std::string& s, const std::string& what) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const unsigned char c = b(0);
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c < 0x80)
      n = 1;
    else if (c >= 0xC2 && c <= 0xDF)
      n = 2;
    else if (c == 0xE0)
      n = 3, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
      n = 3;
    else if (c == 0xED)
      n = 3, hi = 0x9F;
    else if (c == 0xF0)
      n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3)
      n = 4;
    else if (c == 0xF4)
      n = 4, hi = 0x8F;
    bool ok = n != 0 && i + n <= s.size();
    if (ok && n > 1) ok = b(1) >= lo && b(1) <= hi;
    for (size_t k = 2; ok && k < n; ++k) ok = b(k) >= 0x80 && b(k) <= 0xBF;
    if (!ok) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", c);
      Bad(what + ": the text is not valid UTF-8 (byte " + hex + " at offset " + std::to_string(i) +
          ")");
    }
    i += n;
  }
  return s;
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int64_t ParseInt(const std::string& s, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end == nullptr || *end != '\0' || errno == ERANGE) {
    Bad(what + ": expected an integer, got " + Quote(s));
  }
  return v;
}

// A value given as text in the "-key=value" form, converted by the attribute's type.
Json ValueFromText(const std::string& text, int32_t type, const std::string& what) {
  switch (type) {
    case BP_TARGET_ATTR_BOOL:
      if (text == "true" || text == "1") return true;
      if (text == "false" || text == "0") return false;
      Bad(what + ": expected a bool (true, false, 1 or 0), got " + Quote(text));
    case BP_TARGET_ATTR_INT:
      return ParseInt(text, what);
    case BP_TARGET_ATTR_FLOAT: {
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);  // underflow to a subnormal is fine
      if (text.empty() || *end != '\0' || !std::isfinite(v)) {
        Bad(what + ": expected a finite number, got " + Quote(text));
      }
      return v;
    }
    case BP_TARGET_ATTR_STRING:
      return CheckUtf8(text, what);
    case BP_TARGET_ATTR_INT_ARRAY: {
      Json a = Json::array();
      for (const auto& e : SplitCommas(text)) a.push_back(ParseInt(e, what + " element"));
      return a;
    }
    case BP_TARGET_ATTR_STRING_ARRAY: {
      Json a = Json::array();
      for (const auto& e : SplitCommas(text)) a.push_back(CheckUtf8(e, what));
      return a;
    }
    default: {  // map: JSON text
      Json m = ParseJson(text, what);
      if (m.is_discarded() || !m.is_object()) {
        Bad(what + ": expected a JSON object for a map attribute, got " + Quote(text));
      }
      return m;
    }
  }
}

// The "kind -key=value -flag" form (the first token may also be a tag).
Json JsonFromString(const std::string& text) {
  std::vector<std::string> tokens = Tokenize(text);
  if (tokens.empty()) Bad("target: the text is empty; expected a kind name, a tag or JSON");
  const std::string head = tokens[0];
  Json obj;
  KindPtr kind = FindKind(head);
  if (kind != nullptr) {
    obj["kind"] = head;
  } else if (auto tag = FindTag(head)) {
    obj = *tag;
    kind = FindKind(obj["kind"].get<std::string>());
  } else {
    std::vector<std::string> names = KindNames();
    for (auto& t : TagNames()) names.push_back(std::move(t));
    Fail(BP_ERR_NOT_FOUND,
         "target: unknown target kind or tag " + Quote(head) + "." + NearestNames(head, names));
  }
  for (size_t i = 1; i < tokens.size(); ++i) {
    const std::string& tok = tokens[i];
    if (tok.size() < 2 || tok[0] != '-') {
      Bad("target " + Quote(text) + ": expected -key=value or -flag, got " + Quote(tok));
    }
    const size_t eq = tok.find('=');
    const std::string key = tok.substr(1, eq == std::string::npos ? std::string::npos : eq - 1);
    const bool has_value = eq != std::string::npos;
    const std::string value = has_value ? tok.substr(eq + 1) : "";
    const std::string what = "target kind '" + kind->name + "' attribute '" + key + "'";
    if (key == "keys") {
      obj["keys"] = ValueFromText(value, BP_TARGET_ATTR_STRING_ARRAY, what);
    } else if (key == "tag") {
      obj["tag"] = CheckUtf8(value, what);
    } else if (key == "from_device") {
      obj["from_device"] = ParseInt(value, what);
    } else if (key == "host") {
      if (!has_value) Bad(what + ": give the host Target as -host='kind -key=value'");
      obj["host"] = CheckUtf8(value, what);  // parsed when the object is checked
    } else if (const AttrDef* a = kind->Find(key)) {
      if (!has_value && a->type != BP_TARGET_ATTR_BOOL) {
        Bad(what + " is " + AttrTypeName(a->type) + ": give a value as -" + key + "=VALUE");
      }
      obj[key] = has_value ? ValueFromText(value, a->type, what) : Json(true);
    } else {
      Bad("target kind '" + kind->name + "' has no attribute " + Quote(key) + "." +
          NearestNames(key, kind->AttrNames()));
    }
  }
  return obj;
}

Json CheckStringArray(const Json& v, const std::string& what) {
  if (!v.is_array()) Bad(what + ": expected a string array, got " + Describe(v));
  for (const auto& e : v) {
    if (!e.is_string()) Bad(what + ": expected a string array, but an element is " + Describe(e));
  }
  return v;
}

}  // namespace

Json ParseJson(const std::string& text, const std::string& what) {
  // One level per open object or array: the keys seen so far (an object), the key or index
  // of the value being read, for naming where a fault is.
  struct Level {
    bool object = false;
    std::set<std::string> keys;
    std::string key;
    size_t index = 0;
  };
  std::vector<Level> levels;
  auto where = [&levels](size_t depth) {
    std::string path;
    for (size_t i = 0; i < depth; ++i) {
      const Level& l = levels[i];
      path += l.object ? (path.empty() ? "" : ".") + l.key : "[" + std::to_string(l.index) + "]";
    }
    return path;
  };
  auto element_done = [&levels] {
    if (!levels.empty() && !levels.back().object) ++levels.back().index;
  };
  const Json::parser_callback_t check = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        levels.push_back(Level{event == Json::parse_event_t::object_start, {}, {}, 0});
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        levels.pop_back();
        element_done();
        break;
      case Json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        const std::string in = levels.size() > 1 ? " (in '" + where(levels.size() - 1) + "')" : "";
        if (std::string nul = NulIn(key); !nul.empty()) Bad(what + ": a key" + in + nul);
        if (!levels.back().keys.insert(key).second) {
          Bad(what + ": the key '" + key + "'" + in +
              " appears twice in one object; JSON readers disagree on which value wins, so a "
              "Target gives each key once");
        }
        levels.back().key = key;
        break;
      }
      case Json::parse_event_t::value:
        if (parsed.is_string()) {
          const std::string& value = parsed.get_ref<const std::string&>();
          if (std::string nul = NulIn(value); !nul.empty()) {
            const std::string path = where(levels.size());
            Bad(what + (path.empty() ? ": the text" : " attribute '" + path + "'") + nul);
          }
        }
        element_done();
        break;
    }
    return true;
  };
  return Json::parse(text, check, /*allow_exceptions=*/false);
}

Json CheckAttrValue(const Json& v, int32_t type, const std::string& what) {
  switch (type) {
    case BP_TARGET_ATTR_BOOL:
      if (!v.is_boolean()) Bad(what + ": expected a bool (true or false), got " + Describe(v));
      return v;
    case BP_TARGET_ATTR_INT:
      if (!FitsInt64(v)) Bad(what + ": expected an integer, got " + Describe(v));
      return Json(v.get<int64_t>());
    case BP_TARGET_ATTR_FLOAT:
      if (!v.is_number()) Bad(what + ": expected a number, got " + Describe(v));
      return Json(v.get<double>());
    case BP_TARGET_ATTR_STRING:
      if (!v.is_string()) Bad(what + ": expected a string, got " + Describe(v));
      return v;
    case BP_TARGET_ATTR_INT_ARRAY: {
      if (!v.is_array()) Bad(what + ": expected an int array, got " + Describe(v));
      Json out = Json::array();
      for (const auto& e : v) {
        if (!FitsInt64(e)) Bad(what + ": expected an int array, but an element is " + Describe(e));
        out.push_back(e.get<int64_t>());
      }
      return out;
    }
    case BP_TARGET_ATTR_STRING_ARRAY:
      return CheckStringArray(v, what);
    default:
      if (!v.is_object()) Bad(what + ": expected a map (a JSON object), got " + Describe(v));
      return v;
  }
}

Ref TargetFromJson(const Json& in, const DLDevice* device, int depth) {
  if (depth > kMaxHostDepth) {
    Bad("target: hosts are nested deeper than " + std::to_string(kMaxHostDepth) + " levels");
  }
  if (!in.is_object()) Bad("target: expected a JSON object, got " + Describe(in));
  auto kind_it = in.find("kind");
  if (kind_it == in.end() || !kind_it->is_string()) {
    Bad("target: the JSON object needs \"kind\": a string naming the target kind, e.g. "
        "{\"kind\": \"c\"}");
  }
  const std::string kind_name = kind_it->get<std::string>();
  KindPtr kind = FindKind(kind_name);
  if (kind == nullptr) {
    Fail(BP_ERR_NOT_FOUND, "target: unknown target kind " + Quote(kind_name) + "." +
                               NearestNames(kind_name, KindNames()));
  }
  Json out = Json::object();
  out["kind"] = kind_name;
  for (auto it = in.begin(); it != in.end(); ++it) {
    const std::string& key = it.key();
    const std::string what = "target kind '" + kind_name + "' attribute '" + key + "'";
    if (key == "kind") continue;
    if (key == "keys") {
      out["keys"] = CheckStringArray(*it, what);
    } else if (key == "tag") {
      if (!it->is_string()) Bad(what + ": expected a string, got " + Describe(*it));
      out["tag"] = *it;
    } else if (key == "from_device") {
      if (!FitsInt64(*it)) Bad(what + ": expected an integer, got " + Describe(*it));
      out["from_device"] = it->get<int64_t>();
    } else if (key == "host") {
      if (!it->is_string() && !it->is_object()) {
        Bad(what + ": expected a Target (a string or an object), got " + Describe(*it));
      }
      Ref host;
      try {
        // A host given as text counts a level too, so hosts hidden in strings stay bounded.
        host = TargetFromJson(it->is_string() ? ParseToObject(it->get<std::string>()) : *it,
                              nullptr, depth + 1);
      } catch (const CoreError& e) {
        // The input's fault keeps its kind (a bad value, an unknown kind) and names the
        // attribute: "target attribute 'host.host': ...".
        const std::string inner = e.what();
        const std::string nested = "target attribute '";
        Fail(e.kind(), inner.compare(0, nested.size(), nested) == 0
                           ? nested + "host." + inner.substr(nested.size())
                           : nested + "host': " + inner);
      }
      out["host"] = static_cast<const TargetObject*>(host.get())->json;
    } else if (const AttrDef* a = kind->Find(key)) {
      out[key] = CheckAttrValue(*it, a->type, what);
    } else {
      Bad("target kind '" + kind_name + "' has no attribute " + Quote(key) + "." +
          NearestNames(key, kind->AttrNames()));
    }
  }
  for (const auto& a : kind->attrs) {
    if (!out.contains(a.name) && a.default_value) out[a.name] = *a.default_value;
  }
  Json keys = out.contains("keys") ? out["keys"] : Json::array();
  for (const auto& k : kind->default_keys) {
    if (std::find(keys.begin(), keys.end(), Json(k)) == keys.end()) keys.push_back(k);
  }
  out["keys"] = keys;

  if (kind->canonicalize != nullptr) {
    bp_object_t* result = nullptr;
    const uint64_t seq = ErrorSequence();
    bp_status_t st;
    const std::string text = out.dump();
    try {
      st = kind->canonicalize(kind->canonicalize_self, text.c_str(), device, &result);
    } catch (...) {
      StatusFromCurrentException();
      Fail(BP_ERR_PLUGIN, "target kind '" + kind_name + "' canonicalizer threw a C++ exception (" +
                              LastErrorMessage() + ")");
    }
    Ref owned = Ref::Adopt(result);
    CheckPluginStatus(st, seq, "target kind '" + kind_name + "'");
    const auto& s = As<StringObject>(owned.get(), BP_OBJECT_STRING,
                                     "target kind '" + kind_name + "' canonicalizer result");
    Json canon;
    try {
      CheckDepth(s.text);
      canon = ParseJson(s.text, "canonicalizer result");
    } catch (const CoreError& e) {
      Fail(BP_ERR_PLUGIN, "target kind '" + kind_name + "': " + e.what());
    }
    if (canon.is_discarded() || !canon.is_object()) {
      Fail(BP_ERR_PLUGIN, "target kind '" + kind_name +
                              "' canonicalizer returned something that is not a JSON object");
    }
    auto k = canon.find("kind");
    if (k != canon.end() && (!k->is_string() || k->get<std::string>() != kind_name)) {
      Fail(BP_ERR_PLUGIN, "target kind '" + kind_name + "' canonicalizer changed the kind to " +
                              Describe(*k) + "; a canonicalizer may change attributes only");
    }
    canon["kind"] = kind_name;
    // Check its answer like any input, without running it again; a fault is the plugin's.
    try {
      for (auto it = canon.begin(); it != canon.end(); ++it) {
        const std::string& key = it.key();
        const std::string what = "canonicalizer result '" + key + "'";
        if (key == "kind") continue;
        if (key == "keys") {
          CheckStringArray(*it, what);
        } else if (key == "tag") {
          if (!it->is_string()) Bad(what + ": expected a string, got " + Describe(*it));
        } else if (key == "from_device") {
          if (!FitsInt64(*it)) Bad(what + ": expected an integer, got " + Describe(*it));
        } else if (key == "host") {
          // The input's host, checked above, is not the plugin's to answer for again.
          if (out.contains("host") && *it == out["host"]) continue;
          if (!it->is_object()) Bad(what + ": expected a Target object, got " + Describe(*it));
          Ref host = TargetFromJson(*it, nullptr, depth + 1);
          *it = static_cast<const TargetObject*>(host.get())->json;
        } else if (const AttrDef* a = kind->Find(key)) {
          *it = CheckAttrValue(*it, a->type, what);
        } else {
          Bad(what + ": the kind declares no such attribute");
        }
      }
    } catch (const CoreError& e) {
      Fail(BP_ERR_PLUGIN, "target kind '" + kind_name + "': " + e.what());
    }
    out = std::move(canon);
  }
  return Ref::Adopt(new TargetObject(std::move(out), kind));
}

Json ParseToObject(const std::string& text) {
  if (text.size() > kMaxTextBytes) {
    Bad("target: the text is " + std::to_string(text.size()) + " bytes; at most 1 MiB is accepted");
  }
  CheckDepth(text);
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    Json j = ParseJson(text, "target");
    if (j.is_discarded()) {
      Bad("target: the text starts with '{' but is not valid JSON (or not UTF-8): " + Quote(text));
    }
    return j;
  }
  return JsonFromString(text);
}

Ref ParseTarget(const std::string& text) { return TargetFromJson(ParseToObject(text), nullptr, 0); }

}  // namespace core
}  // namespace backplane
