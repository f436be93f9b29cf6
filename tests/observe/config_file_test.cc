// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Reading YAML configuration files: values with their lines, and every malformed shape refused
// with the file, the line and the reason.

#include "config/config_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace optcast::config {
namespace {

namespace fs = std::filesystem;

class ConfigFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    path_ = (fs::temp_directory_path() / ("optcast-config-test-" + std::to_string(::getpid()) + ".yaml")).string();
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override {
    if (!path_.empty()) fs::remove(path_);
  }
  std::string path_;
};

TEST_F(ConfigFileTest, ReadsScalarsAndListsWithTheirLines) {
  std::vector<ConfigEntry> e;
  ASSERT_TRUE(
      ReadConfigFile(Write("# a comment\nlisten: 0.0.0.0:9000\n\ntimeout-ms: 5000\nservers:\n  - a:1\n  - b:2\n"), &e)
          .ok());
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].key, "listen");
  EXPECT_EQ(e[0].values, std::vector<std::string>{"0.0.0.0:9000"});
  EXPECT_EQ(e[0].line, 2);
  EXPECT_FALSE(e[0].is_list);
  EXPECT_EQ(e[1].key, "timeout-ms");
  EXPECT_EQ(e[1].values, std::vector<std::string>{"5000"});
  EXPECT_EQ(e[1].line, 4);
  EXPECT_EQ(e[2].key, "servers");
  EXPECT_TRUE(e[2].is_list);
  EXPECT_EQ(e[2].values, (std::vector<std::string>{"a:1", "b:2"}));
}

TEST_F(ConfigFileTest, EmptyFileSetsNothing) {
  std::vector<ConfigEntry> e;
  ASSERT_TRUE(ReadConfigFile(Write("# nothing here\n"), &e).ok());
  EXPECT_TRUE(e.empty());
}

struct BadCase {
  const char* text;
  int line;
  const char* reason;
};

TEST_F(ConfigFileTest, RefusesMalformedFilesNamingLineAndReason) {
  const BadCase cases[] = {
      {"listen: a\nlisten: b\n", 2, "set twice (first on line 1)"},
      {"listen: a\nmetrics:\n  listen: b\n", 2, "nested mapping"},
      {"listen: a\ntrace:\n", 2, "has no value"},
      {"- a\n- b\n", 1, "a YAML mapping"},
      {"listen: a\nkey: [unclosed\n", 3, "not valid YAML"},
      {"list:\n  - a\n  - {x: 1}\n", 3, "not a plain value"},
  };
  for (const BadCase& c : cases) {
    std::vector<ConfigEntry> e;
    const std::string path = Write(c.text);
    Status st = ReadConfigFile(path, &e);
    ASSERT_FALSE(st.ok()) << c.text;
    EXPECT_NE(st.message().find(path + ":" + std::to_string(c.line) + ": "), std::string::npos)
        << c.text << " -> " << st.message();
    EXPECT_NE(st.message().find(c.reason), std::string::npos) << c.text << " -> " << st.message();
  }
}

TEST_F(ConfigFileTest, MissingFileIsAClearError) {
  std::vector<ConfigEntry> e;
  Status st = ReadConfigFile("/nonexistent/optcast.yaml", &e);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent/optcast.yaml: cannot open"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace optcast::config
