// The server's option table (batchcast/server/option_table.h): every option
// reads back what it prints, the CUDA-only options a host ring ignores, the
// command-line spellings, and the Markdown reference made from it.
#include "batchcast/server/option_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace batchcast {
namespace {

TEST(OptionTable, NamesAreUniqueSnakeCaseAndFoundInBothSpellings) {
  std::set<std::string_view> names;
  for (const ServerOption& o : ServerOptionTable()) {
    EXPECT_TRUE(names.insert(o.name).second) << o.name;
    EXPECT_EQ(o.name.find('-'), std::string_view::npos) << o.name;
    EXPECT_EQ(FindServerOption(o.name), &o);
    EXPECT_EQ(FindServerOption(CommandLineName(o.name)), &o);
  }
  EXPECT_EQ(CommandLineName("batch_size"), "--batch-size");
  EXPECT_EQ(FindServerOption("no_such_option"), nullptr);
}

TEST(OptionTable, EveryDefaultReadsBackAsItself) {
  const ServerOptions defaults;
  for (const ServerOption& o : ServerOptionTable()) {
    const std::string text = o.get(defaults);
    if (text.empty()) continue;  // derived: unset
    ServerOptions again;
    ASSERT_TRUE(SetServerOption(again, o.name, text).ok()) << o.name << " = " << text;
    EXPECT_EQ(o.get(again), text) << o.name;
  }
}

TEST(OptionTable, TextIsReadAsTheOptionsTypeWhateverItLooksLike) {
  // A number-like text option stays text (a file named 123).
  ServerOptions o;
  ASSERT_TRUE(SetServerOption(o, "key_file", "123").ok());
  EXPECT_EQ(o.key_file, "123");
  ASSERT_TRUE(SetServerOption(o, "--lag-timeout", "1.5").ok());
  EXPECT_EQ(o.lag_timeout.count(), 1500);
  ASSERT_TRUE(SetServerOption(o, "shuffle", "false").ok());
  EXPECT_FALSE(o.shuffle);
  ASSERT_TRUE(SetServerOption(o, "mean", "0.5,0.5,0.5").ok());
  EXPECT_EQ(o.source.mean[1], 0.5f);
  const Status bad = SetServerOption(o, "batch_size", "many");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("batch_size (--batch-size)"), std::string::npos) << bad.message();
}

TEST(OptionTable, CudaOnlyOptionsAreTheGpuDecodeOnesAndThePriority) {
  std::set<std::string_view> cuda_only;
  for (const ServerOption& o : ServerOptionTable()) {
    if (o.cuda_only) cuda_only.insert(o.name);
  }
  EXPECT_EQ(cuda_only,
            (std::set<std::string_view>{"device_cache_mb", "transcode_cache_mb", "nvjpeg_calls",
                                        "read_threads", "nvjpeg_region", "gpu_priority"}));
}

TEST(OptionTable, CudaOnlyOptionsSetNamesThoseOffTheirDefaultsAsTyped) {
  ServerOptions o;
  EXPECT_EQ(CudaOnlyOptionsSet(o), "");
  ASSERT_TRUE(SetServerOption(o, "nvjpeg_calls", "2").ok());
  ASSERT_TRUE(SetServerOption(o, "nvjpeg_region", "false").ok());
  ASSERT_TRUE(SetServerOption(o, "gpu_priority", "high").ok());
  ASSERT_TRUE(SetServerOption(o, "batch_size", "7").ok());  // not CUDA-only
  EXPECT_EQ(CudaOnlyOptionsSet(o),
            "nvjpeg_calls (--nvjpeg-calls), nvjpeg_region (--no-nvjpeg-region), "
            "gpu_priority (--gpu-priority)");
  // Set back to the default: not named.
  ServerOptions back;
  ASSERT_TRUE(SetServerOption(back, "gpu_priority", "normal").ok());
  EXPECT_EQ(CudaOnlyOptionsSet(back), "");
}

TEST(OptionTable, CommandLineSpellingOfFlags) {
  const ServerOption& shuffle = *FindServerOption("shuffle");
  EXPECT_EQ(CommandLineSpelling(shuffle, "true"), "--shuffle");
  EXPECT_EQ(CommandLineSpelling(shuffle, "false"), "--no-shuffle");
  EXPECT_EQ(CommandLineSpelling(*FindServerOption("window"), "0"), "--window");
}

TEST(OptionTable, HelpTextsReadAsTheReference) {
  for (const ServerOption& o : ServerOptionTable()) {
    const std::string help(o.help);
    EXPECT_FALSE(help.empty()) << o.name;
    EXPECT_NE(help.back(), '.') << o.name << ": the reference adds its own punctuation";
    for (const char* word : {"issue", "H100", "A100", "benchmark", "RESULTS", "measured"}) {
      EXPECT_EQ(help.find(word), std::string::npos) << o.name << " mentions " << word;
    }
    EXPECT_EQ(help.find('\n'), std::string::npos) << o.name;
  }
}

TEST(OptionTableMarkdown, AHeadingPerGroupAndARowPerOption) {
  const std::string md = OptionTableMarkdown();
  EXPECT_EQ(md.rfind("<!-- Generated", 0), 0u) << "first line says it is generated";
  EXPECT_NE(md.find("--help-markdown > docs/options.md"), std::string::npos);
  EXPECT_NE(md.find("snake_case"), std::string::npos);
  for (OptionGroup g :
       {OptionGroup::kSource, OptionGroup::kRing, OptionGroup::kOrder, OptionGroup::kConsumers}) {
    EXPECT_NE(md.find("\n## " + std::string(OptionGroupTitle(g)) + "\n"), std::string::npos);
  }
  for (const ServerOption& o : ServerOptionTable()) {
    if (o.name == "data") continue;
    EXPECT_NE(md.find("| `" + CommandLineName(o.name)), std::string::npos) << o.name;
  }
  // Cells: a '|' of a value name would end the cell; flags show both spellings.
  EXPECT_NE(md.find("`--lag-policy block\\|skip\\|evict`"), std::string::npos);
  EXPECT_NE(md.find("`--shuffle`, `--no-shuffle` | on |"), std::string::npos);
  EXPECT_NE(md.find("| `--batch-size N` | `64` |"), std::string::npos);
  EXPECT_EQ(md.find("<TAB>"), std::string::npos) << "read as HTML";
}

}  // namespace
}  // namespace batchcast
