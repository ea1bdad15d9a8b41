// EscapeText (core/src/escape.h): names and paths from outside are shown on
// one line, as valid UTF-8, with nothing that drives a terminal.
#include "core/src/escape.h"

#include <gtest/gtest.h>

#include <string>

namespace batchcast {
namespace {

TEST(EscapeText, PrintableTextIsKept) {
  for (const std::string& s : {std::string("consumer:1234"), std::string("café ☕ 日本"),
                               std::string("a b\\c"), std::string("")}) {
    EXPECT_EQ(EscapeText(s), s);
    EXPECT_TRUE(IsPrintableText(s)) << s;
  }
}

TEST(EscapeText, ControlCharactersCannotForgeALine) {
  const std::string forged = "x\n[12:00:00.000] [batchcast] [error] forged\r\tend";
  const std::string e = EscapeText(forged);
  EXPECT_EQ(e, "x\\n[12:00:00.000] [batchcast] [error] forged\\r\\tend");
  EXPECT_EQ(e.find('\n'), std::string::npos);
  EXPECT_FALSE(IsPrintableText(forged));
  // ESC (a terminal escape sequence), DEL, NUL, and the C1 control CSI (U+009B).
  EXPECT_EQ(EscapeText("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(EscapeText(std::string("a\0b\x7f", 4)), "a\\x00b\\x7f");
  EXPECT_EQ(EscapeText("\xc2\x9b"), "\\xc2\\x9b");
}

TEST(EscapeText, InvalidUtf8BecomesHexAndTheResultIsValid) {
  EXPECT_EQ(EscapeText("\xff\xfe name"), "\\xff\\xfe name");
  EXPECT_EQ(EscapeText("\xc3"), "\\xc3");                             // truncated sequence
  EXPECT_EQ(EscapeText("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(EscapeText("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(EscapeText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // beyond U+10FFFF
  EXPECT_EQ(EscapeText("ok\xe2\x82"), "ok\\xe2\\x82");
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    EXPECT_TRUE(IsPrintableText(EscapeText(one + "x" + one))) << b;
  }
}

TEST(EscapeText, LongTextIsCutAtACharacterBoundary) {
  EXPECT_EQ(EscapeText(std::string(300, 'a'), 10), std::string(10, 'a') + "...");
  const std::string cut = EscapeText("ééééé", 5);  // two bytes each
  EXPECT_EQ(cut, "éé...");
  EXPECT_TRUE(IsPrintableText(cut));
  EXPECT_EQ(EscapeText("\n\n\n", 4), "\\n\\n...");
}

}  // namespace
}  // namespace batchcast
