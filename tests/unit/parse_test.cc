// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Parsing of addresses, type and op names, job ids, and the small common helpers.

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/bit_rate.h"
#include "optcast/job_id.h"
#include "optcast/status.h"
#include "optcast/types.h"
#include "transport/endpoint.h"
#include "transport/posix/interface_rate.h"

namespace optcast {
namespace {

using transport::Endpoint;
using transport::ParseEndpoint;
using transport::ParseEndpointList;

// ---- Endpoints ----

TEST(Endpoint, HostAndPort) {
  Endpoint ep;
  ASSERT_TRUE(ParseEndpoint("127.0.0.1:8918", &ep).ok());
  EXPECT_EQ(ep.host, "127.0.0.1");
  EXPECT_EQ(ep.port, 8918);
  ASSERT_TRUE(ParseEndpoint("server-3.example.org:1", &ep).ok());
  EXPECT_EQ(ep.host, "server-3.example.org");
  EXPECT_EQ(ep.port, 1);
  ASSERT_TRUE(ParseEndpoint("h:65535", &ep).ok());
  EXPECT_EQ(ep.port, 65535);
}

TEST(Endpoint, BracketedIPv6) {
  Endpoint ep;
  ASSERT_TRUE(ParseEndpoint("[::1]:9000", &ep).ok());
  EXPECT_EQ(ep.host, "::1");
  EXPECT_EQ(ep.port, 9000);
  ASSERT_TRUE(ParseEndpoint("[fe80::1:2]:80", &ep).ok());
  EXPECT_EQ(ep.host, "fe80::1:2");
  EXPECT_EQ(ep.port, 80);
  ASSERT_TRUE(ParseEndpoint("[::1]", &ep, 8918).ok());
  EXPECT_EQ(ep.host, "::1");
  EXPECT_EQ(ep.port, 8918);
}

TEST(Endpoint, BarePortMeansAnyHost) {
  Endpoint ep;
  ASSERT_TRUE(ParseEndpoint(":9000", &ep).ok());
  EXPECT_EQ(ep.host, "0.0.0.0");
  EXPECT_EQ(ep.port, 9000);
}

TEST(Endpoint, DefaultPortAppliesToBareHost) {
  Endpoint ep;
  ASSERT_TRUE(ParseEndpoint("10.0.0.1", &ep, 8918).ok());
  EXPECT_EQ(ep.host, "10.0.0.1");
  EXPECT_EQ(ep.port, 8918);
  // An explicit port wins over the default.
  ASSERT_TRUE(ParseEndpoint("10.0.0.1:7", &ep, 8918).ok());
  EXPECT_EQ(ep.port, 7);
}

TEST(Endpoint, RejectsBadInputNamingIt) {
  struct Case {
    const char* text;
    const char* word;
  };
  const Case cases[] = {
      {"10.0.0.1", "no port"},  {"host:0", "bad port"},     {"host:65536", "bad port"},
      {"host:-1", "bad port"},  {"host:abc", "bad port"},   {"host:12x", "bad port"},
      {"host:", "no port"},     {"[::1", "without ']'"},    {"[::1]x", "expected ':'"},
      {"[::1]", "no port"},     {"host:99999999999", "bad port"},
  };
  for (const auto& c : cases) {
    Endpoint ep;
    Status st = ParseEndpoint(c.text, &ep);
    ASSERT_FALSE(st.ok()) << c.text << " -> " << ep.ToString();
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << c.text;
    EXPECT_NE(st.message().find(c.word), std::string::npos) << c.text << ": " << st.message();
    EXPECT_NE(st.message().find(c.text), std::string::npos) << c.text << ": " << st.message();
  }
}

TEST(Endpoint, ToStringRoundTrip) {
  for (const char* text : {"127.0.0.1:1", "a.b:65535", "0.0.0.0:8918"}) {
    Endpoint ep;
    ASSERT_TRUE(ParseEndpoint(text, &ep).ok());
    EXPECT_EQ(ep.ToString(), text);
    Endpoint again;
    ASSERT_TRUE(ParseEndpoint(ep.ToString(), &again).ok());
    EXPECT_EQ(again.host, ep.host);
    EXPECT_EQ(again.port, ep.port);
  }
}

TEST(EndpointList, ParsesInOrder) {
  std::vector<Endpoint> eps;
  ASSERT_TRUE(ParseEndpointList("a:1,b:2,[::1]:3", &eps).ok());
  ASSERT_EQ(eps.size(), 3u);
  EXPECT_EQ(eps[0].ToString(), "a:1");
  EXPECT_EQ(eps[1].ToString(), "b:2");
  EXPECT_EQ(eps[2].host, "::1");
  EXPECT_EQ(eps[2].port, 3);
}

TEST(EndpointList, SkipsEmptyItemsAndUsesDefaultPort) {
  std::vector<Endpoint> eps;
  ASSERT_TRUE(ParseEndpointList(",a,,b:5,", &eps, 8918).ok());
  ASSERT_EQ(eps.size(), 2u);
  EXPECT_EQ(eps[0].ToString(), "a:8918");
  EXPECT_EQ(eps[1].ToString(), "b:5");
}

TEST(EndpointList, ReplacesPreviousContents) {
  std::vector<Endpoint> eps(5);
  ASSERT_TRUE(ParseEndpointList("a:1", &eps).ok());
  EXPECT_EQ(eps.size(), 1u);
}

TEST(EndpointList, RejectsEmptyAndBadItems) {
  std::vector<Endpoint> eps;
  for (const char* text : {"", ",", ",,,"}) {
    Status st = ParseEndpointList(text, &eps);
    ASSERT_FALSE(st.ok()) << text;
    EXPECT_NE(st.message().find("empty"), std::string::npos) << st.message();
  }
  Status st = ParseEndpointList("a:1,b:0", &eps);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("b:0"), std::string::npos) << st.message();
  EXPECT_FALSE(ParseEndpointList("a:1,b", &eps).ok());  // no default port
}

// ---- Data types and ops ----

TEST(DataTypeNames, CanonicalNamesRoundTrip) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    const auto dt = static_cast<DataType>(i);
    const auto parsed = ParseDataType(DataTypeName(dt));
    ASSERT_TRUE(parsed.has_value()) << DataTypeName(dt);
    EXPECT_EQ(*parsed, dt);
  }
}

TEST(DataTypeNames, Aliases) {
  const std::pair<const char*, DataType> cases[] = {
      {"float", DataType::kFloat32},    {"f32", DataType::kFloat32},    {"fp32", DataType::kFloat32},
      {"FLOAT32", DataType::kFloat32},  {"half", DataType::kFloat16},   {"f16", DataType::kFloat16},
      {"fp16", DataType::kFloat16},     {"Half", DataType::kFloat16},   {"bf16", DataType::kBFloat16},
      {"BF16", DataType::kBFloat16},    {"double", DataType::kFloat64}, {"f64", DataType::kFloat64},
      {"fp64", DataType::kFloat64},     {"i8", DataType::kInt8},        {"char", DataType::kInt8},
      {"u8", DataType::kUInt8},         {"int", DataType::kInt32},      {"i32", DataType::kInt32},
      {"u32", DataType::kUInt32},       {"i64", DataType::kInt64},      {"u64", DataType::kUInt64},
  };
  for (const auto& [name, want] : cases) {
    const auto got = ParseDataType(name);
    ASSERT_TRUE(got.has_value()) << name;
    EXPECT_EQ(*got, want) << name;
  }
}

TEST(DataTypeNames, RejectsUnknown) {
  for (const char* name : {"", "float8", "f 32", "int16", "float32 ", "bfloat", "uint", "long"}) {
    EXPECT_FALSE(ParseDataType(name).has_value()) << "'" << name << "'";
  }
}

TEST(DataTypeNames, SizesAndKinds) {
  const size_t sizes[kNumDataTypes] = {4, 2, 2, 8, 1, 1, 4, 4, 8, 8};
  for (int i = 0; i < kNumDataTypes; ++i) {
    const auto dt = static_cast<DataType>(i);
    EXPECT_EQ(DataTypeSize(dt), sizes[i]) << DataTypeName(dt);
    EXPECT_EQ(IsFloatingPoint(dt), i <= 3) << DataTypeName(dt);
    EXPECT_TRUE(IsValidDataType(static_cast<uint8_t>(i)));
  }
  EXPECT_FALSE(IsValidDataType(kNumDataTypes));
  EXPECT_FALSE(IsValidDataType(255));
  EXPECT_TRUE(IsValidCollType(2));
  EXPECT_FALSE(IsValidCollType(3));
  EXPECT_TRUE(IsValidRedOp(kNumRedOps - 1));
  EXPECT_FALSE(IsValidRedOp(kNumRedOps));
}

TEST(RedOpNames, CanonicalAndAliases) {
  for (int i = 0; i < kNumRedOps; ++i) {
    const auto op = static_cast<RedOp>(i);
    const auto parsed = ParseRedOp(RedOpName(op));
    ASSERT_TRUE(parsed.has_value()) << RedOpName(op);
    EXPECT_EQ(*parsed, op);
  }
  const std::pair<const char*, RedOp> cases[] = {
      {"product", RedOp::kProd}, {"mean", RedOp::kAvg}, {"SUM", RedOp::kSum},   {"Max", RedOp::kMax},
      {"MIN", RedOp::kMin},      {"AVG", RedOp::kAvg},  {"Prod", RedOp::kProd}, {"BAND", RedOp::kBand},
      {"and", RedOp::kBand},     {"bor", RedOp::kBor},  {"OR", RedOp::kBor},    {"bxor", RedOp::kBxor},
      {"Xor", RedOp::kBxor},
  };
  for (const auto& [name, want] : cases) {
    const auto got = ParseRedOp(name);
    ASSERT_TRUE(got.has_value()) << name;
    EXPECT_EQ(*got, want) << name;
  }
  for (const char* name : {"", "add", "multiply", "average", "minimum", " sum"}) {
    EXPECT_FALSE(ParseRedOp(name).has_value()) << "'" << name << "'";
  }
}

TEST(RedOpNames, BitwiseOpsAreDefinedForIntegerTypesOnly) {
  for (int o = 0; o < kNumRedOps; ++o) {
    const auto op = static_cast<RedOp>(o);
    EXPECT_EQ(IsBitwise(op), o >= 5) << RedOpName(op);
    for (int d = 0; d < kNumDataTypes; ++d) {
      const auto dt = static_cast<DataType>(d);
      EXPECT_EQ(IsRedOpDefinedFor(op, dt), !IsBitwise(op) || !IsFloatingPoint(dt))
          << RedOpName(op) << " " << DataTypeName(dt);
    }
  }
  const std::string msg = UndefinedRedOpMessage(RedOp::kBxor, DataType::kBFloat16);
  EXPECT_NE(msg.find("bxor"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bfloat16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("integer type"), std::string::npos) << msg;
}

TEST(CollTypeNames, Stable) {
  EXPECT_STREQ(CollTypeName(CollType::kAllReduce), "allreduce");
  EXPECT_STREQ(CollTypeName(CollType::kReduceScatter), "reducescatter");
  EXPECT_STREQ(CollTypeName(CollType::kAllGather), "allgather");
}

// ---- Job ids ----

TEST(JobIdHex, RandomRoundTrip) {
  std::set<std::string> seen;
  for (int i = 0; i < 64; ++i) {
    const JobId id = JobId::Random();
    const std::string hex = id.ToHex();
    ASSERT_EQ(hex.size(), 32u);
    for (char c : hex) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << hex;
    const auto back = JobId::FromHex(hex);
    ASSERT_TRUE(back.has_value()) << hex;
    EXPECT_EQ(*back, id);
    seen.insert(hex);
  }
  EXPECT_EQ(seen.size(), 64u) << "random job ids collided";
}

TEST(JobIdHex, KnownValueAndUppercase) {
  const auto id = JobId::FromHex("00112233445566778899AABBCCDDEEFF");
  ASSERT_TRUE(id.has_value());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(id->bytes[i], static_cast<uint8_t>(i * 0x11));
  EXPECT_EQ(id->ToHex(), "00112233445566778899aabbccddeeff");
  EXPECT_EQ(JobId{}.ToHex(), std::string(32, '0'));
}

TEST(JobIdHex, RejectsMalformed) {
  for (const char* hex : {"", "0", "00112233445566778899aabbccddeef", "00112233445566778899aabbccddeeff0",
                          "00112233445566778899aabbccddeefg", "0x112233445566778899aabbccddeeff",
                          " 0112233445566778899aabbccddeeff", "00112233-4556-6778-899a-abbccddeeff"}) {
    EXPECT_FALSE(JobId::FromHex(hex).has_value()) << "'" << hex << "'";
  }
}

// ---- Status ----

TEST(StatusText, ToStringNamesCode) {
  EXPECT_EQ(Status::Ok().ToString(), "OK");
  EXPECT_TRUE(Status().ok());
  const Status st = MismatchError("ranks disagree");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kMismatch);
  EXPECT_NE(st.ToString().find("ranks disagree"), std::string::npos);
  for (int c = 0; c <= static_cast<int>(Code::kCancelled); ++c) {
    EXPECT_STRNE(CodeName(static_cast<Code>(c)), "unknown error") << c;
  }
}

TEST(ParseBitRate, RatesAsTcWritesThem) {
  EXPECT_EQ(ParseBitRate("500mbit"), 500'000'000u);
  EXPECT_EQ(ParseBitRate("25Gbit"), 25'000'000'000u);
  EXPECT_EQ(ParseBitRate("750kbit"), 750'000u);
  EXPECT_EQ(ParseBitRate("1.5gbit"), 1'500'000'000u);
  EXPECT_EQ(ParseBitRate("1000000"), 1'000'000u);
  for (const char* bad : {"", "fast", "100mbps", "10bps", "-5mbit", "50kbit", "2000gbit", "1e400"}) {
    EXPECT_FALSE(ParseBitRate(bad).has_value()) << bad;
  }
  EXPECT_EQ(FormatBitRate(500'000'000), "500mbit");
  EXPECT_EQ(FormatBitRate(25'000'000'000), "25gbit");
  EXPECT_EQ(FormatBitRate(1'500'000), "1500kbit");
}

TEST(InterfaceRate, SysfsSpeedIsMbitOrUnknown) {
  EXPECT_EQ(transport::posix::ParseSysfsSpeed("10000\n"), 10'000'000'000u);
  EXPECT_EQ(transport::posix::ParseSysfsSpeed("100"), 100'000'000u);
  EXPECT_EQ(transport::posix::ParseSysfsSpeed("-1\n"), 0u);  // virtio, veth without carrier
  EXPECT_EQ(transport::posix::ParseSysfsSpeed(""), 0u);      // the read failed (loopback: EINVAL)
  EXPECT_EQ(transport::posix::ParseSysfsSpeed("0"), 0u);
  // Loopback reports no speed, so a server there announces none.
  EXPECT_EQ(transport::posix::RateOfInterfaceFor("127.0.0.1").bits, 0u);
  EXPECT_EQ(transport::posix::RateOfInterfaceFor("not-an-address").bits, 0u);
}

}  // namespace
}  // namespace optcast
