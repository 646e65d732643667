// SPDX-License-Identifier: Apache-2.0
// `backplane target`: parses a Target in any accepted form and prints its canonical JSON
// (defaults filled), or (--list) lists every target kind with its device type, keys and
// attribute schema, and every tag. Kinds and tags come from plugins, which load on first
// use; --plugin-path adds folders to search first.
#include <backplane/c_api.h>

#include <CLI/CLI.hpp>
#include <backplane/backplane.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "device_target.h"
#include "output.h"
#include "table.h"

namespace backplane {
namespace cli {

namespace {

using Json = nlohmann::ordered_json;

// Narrower than this, `target --list` prints each attribute's doc under its row.
constexpr size_t kWideTable = 100;

constexpr const char* kNone = "\xE2\x80\x94";  // U+2014 em dash: no default, no device attr

struct TargetOptions {
  std::string text;
  std::vector<std::string> extra;  // unquoted "-key=value" words after the kind
  bool list = false;
  bool json = false;
  std::vector<std::string> plugin_paths;
};

std::string Text(const Json& value) {
  if (value.is_null()) return kNone;
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

// A value as the "-key=value" form writes it: arrays joined by commas, maps as JSON, and
// single quotes around anything the tokenizer would otherwise split.
std::string FlagValue(const Json& value) {
  std::string text;
  if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) text += (i ? "," : "") + Text(value[i]);
  } else {
    text = Text(value);
  }
  if (text.empty() || text.find_first_of(" \t\r\n\"'") != std::string::npos) {
    if (text.find('\'') == std::string::npos) return "'" + text + "'";
    std::string quoted = "\"";
    for (char c : text) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    return quoted + "\"";
  }
  return text;
}

// A tag's Target in the "kind -key=value" form, showing only what differs from the kind's
// defaults: "c -mcpu=cortex-a72 -num-cores=4 ...".
std::string TagSummary(const Json& target, const Json& kinds) {
  const std::string kind_name = target.value("kind", "");
  const Json* kind = nullptr;
  for (const Json& k : kinds) {
    if (k.value("name", "") == kind_name) kind = &k;
  }
  std::string out = kind_name;
  for (const auto& [key, value] : target.items()) {
    if (key == "kind" || key == "tag") continue;
    if (key == "keys" && kind != nullptr && value == (*kind)["keys"]) continue;
    bool is_default = false;
    if (kind != nullptr) {
      for (const Json& a : (*kind)["attrs"]) {
        if (a.value("name", "") == key && a.contains("default") && a["default"] == value) {
          is_default = true;
        }
      }
    }
    if (is_default) continue;
    if (value.is_boolean() && value.get<bool>()) {
      out += " -" + key;
    } else {
      out += " -" + key + "=" + FlagValue(value);
    }
  }
  return out;
}

void PrintList(const Json& described, std::ostream& out) {
  const size_t width = OutputWidth();
  const Json& kinds = described["kinds"];
  out << "Target kinds: " << kinds.size() << '\n';
  if (kinds.empty()) {
    out << "  No plugin registers a target kind. Pass --plugin-path DIR or set\n"
           "  BACKPLANE_PLUGIN_PATH to a folder holding plugins and their manifests.\n";
  }
  for (const Json& kind : kinds) {
    std::string keys;
    for (const Json& k : kind["keys"]) keys += (keys.empty() ? "" : ", ") + Text(k);
    out << "\n  " << Text(kind["name"]) << "  (device type " << Text(kind["device_type"])
        << "; keys: " << (keys.empty() ? kNone : keys);
    if (kind.contains("owner") && kind["owner"].is_string()) {
      out << "; registered by " << Text(kind["owner"]);
    }
    out << ")\n";
    // On a narrow terminal the doc goes under its row, across the table's width: as a column
    // it would start right of the defaults, and its long words (device attribute names) would
    // pass the edge.
    const bool narrow = width < kWideTable;
    Table table(narrow ? std::vector<std::string>{"ATTRIBUTE", "TYPE", "DEFAULT"}
                       : std::vector<std::string>{"ATTRIBUTE", "TYPE", "DEFAULT", "DOC"});
    for (const Json& a : kind["attrs"]) {
      const Json& def = a.contains("default") ? a["default"] : Json();
      std::string doc = a.contains("doc") && a["doc"].is_string() ? Text(a["doc"]) : "";
      if (a.contains("device_attr") && a["device_attr"].is_string()) {
        doc +=
            (doc.empty() ? "" : " ") + std::string("[FromDevice: ") + Text(a["device_attr"]) + "]";
      }
      if (narrow) {
        table.AddRow({Text(a["name"]), Text(a["type"]), def.is_null() ? kNone : def.dump()});
        if (!doc.empty()) table.AddNote(doc);
      } else {
        table.AddRow({Text(a["name"]), Text(a["type"]), def.is_null() ? kNone : def.dump(), doc});
      }
    }
    if (table.empty()) {
      out << "    (no attributes of its own)\n";
    } else {
      table.Print(out, 4, width);
    }
  }
  out << '\n';
  for (const std::string& line :
       WrapText("Every Target also has: keys (string array; the kind's keys are appended), tag "
                "(string), host (a Target, for host-side code) and from_device (int, the device "
                "id it was read from).",
                width - 2)) {
    out << "  " << line << '\n';
  }

  const Json& tags = described["tags"];
  out << "\nTags: " << tags.size() << '\n';
  if (tags.empty()) {
    out << "  (none)\n";
  } else {
    Table table({"TAG", "TARGET (what differs from the kind's defaults)"});
    for (const auto& [tag, target] : tags.items()) table.AddRow({tag, TagSummary(target, kinds)});
    table.Print(out, 2, width);
  }
}

int RunTarget(TargetOptions options) {
  if (!options.extra.empty()) {
    // `backplane target c -mcpu=skylake` without quotes: the words belong to the target.
    for (const std::string& word : options.extra) options.text += " " + word;
  }
  const bool has_text = !options.text.empty();
  if (options.list == has_text) {
    std::cerr << "backplane target: "
              << (options.list ? "give either --list or a target, not both"
                               : "no target given; pass one, e.g. backplane target 'c -opt-level=2'"
                                 ", or --list for the kinds and tags")
              << ". Run 'backplane target --help' for the forms.\n";
    return kExitUsage;
  }
  for (const std::string& folder : options.plugin_paths) {
    Check(bp_plugin_path_add(folder.c_str()));
  }
  Check(bp_plugins_discover());

  if (options.list) {
    const std::string text = TargetKinds::Describe();
    Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("kinds") || !doc.contains("tags")) {
      throw Error(BP_ERR_INTERNAL,
                  "bp_target_kinds_describe returned text that is not the documented JSON (a bug "
                  "in libbackplane; please report it): " +
                      text.substr(0, 200));
    }
    if (options.json) {
      // The description with the version of its schema first (docs/cli.md, "JSON output").
      Json versioned = {{"schema_version", kJsonSchemaVersion}, {"command", "target"}};
      for (auto& [key, value] : doc.items()) versioned[key] = value;
      std::cout << versioned.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';
    } else {
      PrintList(doc, std::cout);
    }
  } else {
    // A device (opencl:0) gives its own Target (Target::FromDevice), as `build -t` takes it.
    Target target;
    if (LooksLikeDevice(options.text)) {
      if (std::string e = ParseTargetOrDevice(options.text, &target); !e.empty()) {
        std::cerr << "backplane target: " << options.text << ": " << e << "\n";
        return e.rfind("device ", 0) == 0 ? kExitUsage : kExitFailure;
      }
    } else {
      target = Target::Parse(options.text);
    }
    const std::string canonical = target.ToJson();
    if (options.json) {
      std::cout << canonical << '\n';
    } else {
      // nlohmann::json keeps keys sorted, so the pretty form has the canonical order.
      std::cout << nlohmann::json::parse(canonical).dump(2) << '\n';
    }
  }
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "backplane target: could not write to standard output\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

Command AddTargetCommand(CLI::App& parent) {
  auto options = std::make_shared<TargetOptions>();
  CLI::App* app = parent.add_subcommand(
      "target",
      "Parse a Target (JSON, a kind name, a tag, or 'kind -key=value -flag') and print its "
      "canonical JSON with the defaults; or list the target kinds and tags");
  app->add_option("TARGET", options->text,
                  "The Target, quoted as one word: 'c', 'c -mcpu=skylake -num-cores=4 "
                  "-fast-math', '{\"kind\": \"c\"}', a tag such as raspberry-pi/4b-aarch64, "
                  "or a device (opencl:0): the Target read off that device");
  app->add_flag("--list", options->list,
                "List every target kind (device type, keys, attributes with type, default and "
                "doc) and every tag");
  app->add_flag("--json", options->json,
                "Print JSON for machines: the canonical JSON on one line, or with --list the "
                "whole description");
  AddPluginPathOption(app, &options->plugin_paths);
  // Words after the target that CLI11 does not know ("-mcpu=skylake" left unquoted) are
  // the target's own options: they are joined back to it.
  app->allow_extras();
  app->footer(
      "--json prints the Target itself (canonical, one line), which every --target accepts "
      "back; --list --json prints the description with schema_version.\n"
      "Examples:\n"
      "  backplane target c\n"
      "  backplane target 'c -mcpu=skylake -num-cores=4'\n"
      "  backplane target raspberry-pi/4b-aarch64 --json\n"
      "  backplane target opencl:0\n"
      "  backplane target --list\n"
      "Exit codes: 0 ok, 1 the Target does not parse, 2 a usage error.\n"
      "Environment: BACKPLANE_PLUGIN_PATH (plugins, whose kinds and tags are listed); "
      "docs/targets.md.");
  return Command{app, [options, app] {
                   TargetOptions copy = *options;
                   copy.extra = app->remaining();
                   return RunTarget(std::move(copy));
                 }};
}

}  // namespace cli
}  // namespace backplane
