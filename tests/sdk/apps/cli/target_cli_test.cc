// SPDX-License-Identifier: Apache-2.0
// Tests of `backplane target`, run as a subprocess the way a user runs it: every form prints
// the canonical JSON with defaults, errors exit 1 with the core's message, --list shows the
// kinds, their schemas and the tags, as a table or as JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "subprocess.h"

#ifndef BACKPLANE_CLI_PATH
#error "BACKPLANE_CLI_PATH must name the built backplane executable"
#endif
#ifndef BACKPLANE_TEST_PLUGIN_DIR
#error "BACKPLANE_TEST_PLUGIN_DIR must name the folder of the test plugins"
#endif

namespace {

using Json = nlohmann::json;
namespace sp = backplane::subprocess;

sp::Result RunCli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BACKPLANE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  sp::Options options;
  options.unset_env = {"BACKPLANE_PLUGIN_PATH"};
  return sp::Run(argv, options);
}

// Runs `backplane target ARGS...`, expects success, and parses stdout as JSON.
Json TargetJson(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"target"};
  all.insert(all.end(), args.begin(), args.end());
  sp::Result result = RunCli(all);
  EXPECT_EQ(result.exit_code, 0) << result.Describe() << "\nstderr:\n" << result.err;
  Json doc = Json::parse(result.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(doc.is_discarded()) << "stdout is not JSON:\n" << result.out;
  return doc;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CliTarget, BareKindPrintsTheCanonicalJsonWithDefaults) {
  sp::Result result = RunCli({"target", "c"});
  ASSERT_EQ(result.exit_code, 0) << result.Describe() << "\n" << result.err;
  const Json doc = Json::parse(result.out);
  EXPECT_EQ(doc["kind"], "c");
  EXPECT_EQ(doc["keys"], Json::array({"cpu"}));
  EXPECT_EQ(doc["opt-level"], 3);
  EXPECT_EQ(doc["cc"], "cc");
  EXPECT_EQ(doc["fast-math"], false);
  EXPECT_TRUE(doc["mtriple"].is_string());
  // Pretty: one attribute per line, indented, keys in canonical (sorted) order.
  EXPECT_TRUE(Contains(result.out, "\n  \"cc\": \"cc\",\n")) << result.out;
  EXPECT_LT(result.out.find("\"cc\""), result.out.find("\"kind\"")) << result.out;
  EXPECT_TRUE(result.err.empty()) << result.err;
}

TEST(CliTarget, EveryFormGivesTheSameTarget) {
  const Json expected = TargetJson({"c -mcpu=skylake -num-cores=4 -fast-math"});
  EXPECT_EQ(expected["mcpu"], "skylake");
  EXPECT_EQ(expected["num-cores"], 4);
  EXPECT_EQ(expected["fast-math-nnan"], true);
  EXPECT_EQ(TargetJson({R"({"kind": "c", "mcpu": "skylake", "num-cores": 4, "fast-math": true})"}),
            expected);
  // Unquoted words after the kind are the target's own options.
  EXPECT_EQ(TargetJson({"c", "-mcpu=skylake", "-num-cores=4", "-fast-math"}), expected);
  // The printed JSON parses back to itself.
  EXPECT_EQ(TargetJson({expected.dump()}), expected);
}

TEST(CliTarget, JsonFlagPrintsTheCanonicalTextOnOneLine) {
  sp::Result result = RunCli({"target", "--json", "c -opt-level=2 -mattr=+avx2,+fma"});
  ASSERT_EQ(result.exit_code, 0) << result.Describe() << "\n" << result.err;
  const Json doc = Json::parse(result.out);
  EXPECT_EQ(result.out, doc.dump() + "\n") << "compact, sorted keys, one line";
  EXPECT_EQ(doc["mattr"], Json::array({"+avx2", "+fma"}));
  EXPECT_EQ(doc["opt-level"], 2);
}

TEST(CliTarget, TagsAndThirdPartyKindsFromAPluginFolder) {
  const Json board = TargetJson({"--plugin-path", BACKPLANE_TEST_PLUGIN_DIR, "testvendor/board1"});
  EXPECT_EQ(board["kind"], "testaccel");
  EXPECT_EQ(board["tag"], "testvendor/board1");
  EXPECT_EQ(board["isa"], "ta2+dma+fp16");
  const Json pi = TargetJson({"raspberry-pi/4b-aarch64 -opt-level=1"});
  EXPECT_EQ(pi["mcpu"], "cortex-a72");
  EXPECT_EQ(pi["opt-level"], 1);
}

TEST(CliTarget, ErrorsExitOneWithTheCoresMessage) {
  struct Case {
    const char* text;
    std::vector<const char*> named;
  };
  for (const Case& c : std::vector<Case>{
           {"c -opt-level=7", {"opt-level", "7", "0, 1, 2 or 3"}},
           {"c -mcpuu=skylake", {"'mcpuu'", "'mcpu'"}},
           {R"({"kind": "c", "fast-math": 1})", {"fast-math", "bool"}},
           {"nosuchkind", {"'nosuchkind'"}},
       }) {
    SCOPED_TRACE(c.text);
    sp::Result result = RunCli({"target", c.text});
    EXPECT_EQ(result.exit_code, 1) << result.Describe();
    EXPECT_TRUE(result.out.empty()) << result.out;
    EXPECT_TRUE(Contains(result.err, "backplane target: error")) << result.err;
    for (const char* part : c.named) EXPECT_TRUE(Contains(result.err, part)) << result.err;
  }
}

TEST(CliTarget, NoTargetOrBothAreUsageErrors) {
  sp::Result none = RunCli({"target"});
  EXPECT_EQ(none.exit_code, 2) << none.Describe();
  EXPECT_TRUE(Contains(none.err, "no target given")) << none.err;
  EXPECT_TRUE(Contains(none.err, "--list")) << none.err;
  sp::Result both = RunCli({"target", "--list", "c"});
  EXPECT_EQ(both.exit_code, 2) << both.Describe();
  EXPECT_TRUE(Contains(both.err, "--list")) << both.err;
  sp::Result folder = RunCli({"target", "--plugin-path", "/nonexistent/plugins", "c"});
  EXPECT_EQ(folder.exit_code, 2) << folder.Describe();
  EXPECT_TRUE(Contains(folder.err, "/nonexistent/plugins")) << folder.err;
}

TEST(CliTarget, ListShowsKindsSchemasAndTags) {
  sp::Result result = RunCli({"target", "--list", "--plugin-path", BACKPLANE_TEST_PLUGIN_DIR});
  ASSERT_EQ(result.exit_code, 0) << result.Describe() << "\n" << result.err;
  const std::string& out = result.out;
  for (const char* part :
       {"Target kinds:", "ATTRIBUTE", "TYPE", "DEFAULT", "DOC", "device type cpu", "keys: cpu",
        "device type simaccel", "testaccel", "num-cores", "multi_processor_count", "string array",
        "int array", "map", "Tags:", "raspberry-pi/4b-aarch64", "testvendor/board1",
        "-mcpu=cortex-a72", "Every Target also has"}) {
    EXPECT_TRUE(Contains(out, part)) << "no '" << part << "' in:\n" << out;
  }
}

TEST(CliTarget, ListJsonIsTheDescription) {
  const Json doc = TargetJson({"--list", "--json", "--plugin-path", BACKPLANE_TEST_PLUGIN_DIR});
  ASSERT_TRUE(doc.contains("kinds") && doc.contains("tags")) << doc.dump(2);
  const Json* c = nullptr;
  for (const Json& k : doc["kinds"]) {
    if (k["name"] == "c") c = &k;
  }
  ASSERT_NE(c, nullptr) << doc.dump(2);
  EXPECT_EQ((*c)["device_type"], "cpu");
  bool has_opt_level = false;
  for (const Json& a : (*c)["attrs"]) {
    if (a["name"] != "opt-level") continue;
    has_opt_level = true;
    EXPECT_EQ(a["type"], "int");
    EXPECT_EQ(a["default"], 3);
    EXPECT_FALSE(a["doc"].get<std::string>().empty());
  }
  EXPECT_TRUE(has_opt_level) << c->dump(2);
  EXPECT_EQ(doc["tags"]["testvendor/board1"]["kind"], "testaccel");
  EXPECT_EQ(doc["tags"]["raspberry-pi/4b-aarch64"]["num-cores"], 4);
}

TEST(CliTarget, HelpNamesTheForms) {
  sp::Result result = RunCli({"target", "--help"});
  EXPECT_EQ(result.exit_code, 0) << result.Describe();
  for (const char* part : {"--list", "--json", "--plugin-path", "-key=value"}) {
    EXPECT_TRUE(Contains(result.out, part)) << result.out;
  }
}

}  // namespace
