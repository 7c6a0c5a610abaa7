#include "server/log_setup.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>

namespace pagoda {
namespace {

TEST(JsonEscaped, EveryMessageBecomesAValidJsonString) {
  const std::string messages[] = {"plain",
                                  "say \"hi\"",
                                  "back\\slash",
                                  "tab\tnew\nline\r",
                                  std::string("nul\0byte", 8),
                                  "bad utf-8 \xff\xfe end",
                                  "caf\xc3\xa9"};
  for (const std::string& m : messages) {
    const std::string escaped = JsonEscaped(m);
    const nlohmann::json parsed = nlohmann::json::parse("\"" + escaped + "\"", nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << escaped;
    if (m.find('\xff') == std::string::npos) {
      EXPECT_EQ(parsed.get<std::string>(), m);
    } else {  // invalid UTF-8 is replaced, the rest kept
      EXPECT_EQ(parsed.get<std::string>(), "bad utf-8 \xef\xbf\xbd\xef\xbf\xbd end");
    }
  }
}

// logging.format json: each line one JSON object whose msg is the message, quotes included.
TEST(SetupLogging, JsonFormatLinesParse) {
  std::ostringstream out;
  auto logger = std::make_shared<spdlog::logger>(
      "json_test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  LoggingSection json_format;
  json_format.format = LogFormat::kJson;
  SetupLogging(json_format);
  spdlog::info("request api=http POST /v1/completions id={} status=200", "cmpl-\"quoted\"\\x");
  spdlog::warn("two\nlines");
  SetupLogging(LoggingSection{});
  spdlog::set_default_logger(previous);
  std::istringstream lines(out.str());
  std::string line;
  std::vector<nlohmann::json> objects;
  while (std::getline(lines, line)) {
    objects.push_back(nlohmann::json::parse(line, nullptr, false));
    ASSERT_FALSE(objects.back().is_discarded()) << line;
  }
  ASSERT_EQ(objects.size(), 2u) << out.str();
  EXPECT_EQ(objects[0]["msg"],
            "request api=http POST /v1/completions id=cmpl-\"quoted\"\\x status=200");
  EXPECT_EQ(objects[0]["level"], "info");
  EXPECT_EQ(objects[1]["msg"], "two\nlines");
  EXPECT_EQ(objects[1]["level"], "warning");
}

}  // namespace
}  // namespace pagoda
