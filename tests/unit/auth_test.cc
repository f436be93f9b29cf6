// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Hello proofs (HMAC-SHA256 over the documented layout), secrets from files and the environment,
// the join handshake that ranks and servers share, and the memory budgets behind the server's
// limits.

#include <grp.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "auth/handshake.h"
#include "auth/proof.h"
#include "auth/secret.h"
#include "server/memory_budget.h"

namespace optcast {
namespace {

wire::Hello SampleHello() {
  wire::Hello h;
  for (int i = 0; i < 16; ++i) h.job_id[i] = static_cast<uint8_t>(0xa0 + i);
  h.nranks = 4;
  h.rank = 2;
  return h;
}

wire::Nonce CountingNonce() {
  wire::Nonce n{};
  for (int i = 0; i < 32; ++i) n[i] = static_cast<uint8_t>(i);
  return n;
}

std::string Hex(const wire::Mac& m) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (uint8_t b : m) s += {kHex[b >> 4], kHex[b & 15]};
  return s;
}

TEST(HelloProof, MatchesTheDocumentedLayout) {
  // Computed independently (Python's hmac module) over
  // "optcast-hello-proof-v1" | nonce | job_id | nranks u32le | rank u32le | flags u32le | lane u32le.
  EXPECT_EQ(Hex(auth::ComputeProof("0123456789abcdef0123", CountingNonce(), SampleHello())),
            "ded5927e47f85881dc487d688e8e77673619fdd4ad857419d4ec6f0134312535");
  wire::Hello lane1 = SampleHello();
  lane1.lane = 1;
  EXPECT_EQ(Hex(auth::ComputeProof("0123456789abcdef0123", CountingNonce(), lane1)),
            "2610a15ae52cbdf80aae69eb2edb9da53951b1fbe0b408135a6eab0c0e8f4d25");
}

TEST(HelloProof, EveryFieldAndTheSecretMatter) {
  const std::string secret = "0123456789abcdef0123";
  const wire::Nonce nonce = CountingNonce();
  const wire::Hello hello = SampleHello();
  const wire::Mac good = auth::ComputeProof(secret, nonce, hello);
  EXPECT_TRUE(auth::VerifyProof(secret, nonce, hello, good));
  EXPECT_FALSE(auth::VerifyProof(secret + "x", nonce, hello, good));
  wire::Nonce other_nonce = nonce;
  other_nonce[31] ^= 1;
  EXPECT_FALSE(auth::VerifyProof(secret, other_nonce, hello, good));
  for (int field = 0; field < 5; ++field) {
    wire::Hello h = hello;
    if (field == 0) h.job_id[0] ^= 1;
    if (field == 1) h.nranks += 1;
    if (field == 2) h.rank -= 1;
    if (field == 3) h.flags = 1;
    if (field == 4) h.lane = 1;  // a proof is for one lane's connection
    EXPECT_FALSE(auth::VerifyProof(secret, nonce, h, good)) << "field " << field;
  }
  wire::Mac flipped = good;
  flipped[7] ^= 0x80;
  EXPECT_FALSE(auth::VerifyProof(secret, nonce, hello, flipped));
}

// The joining side's state machine, as ranks and servers joining their parent drive it.
auth::JoinHandshake SampleJoin(const std::string& secret) {
  return auth::JoinHandshake(SampleHello(), secret, "server 10.0.0.1:8918", "rank 2", "give it the secret");
}

TEST(JoinHandshake, AnswersAChallengeWithTheProofThenTakesTheWelcome) {
  auth::JoinHandshake join = SampleJoin("s3cret-s3cret-s3cret");
  wire::Message m;
  ASSERT_TRUE(wire::Decode(join.HelloMeta(), &m).ok());
  EXPECT_EQ(m.type, wire::MsgType::kHello);
  wire::Message challenge;
  challenge.type = wire::MsgType::kChallenge;
  challenge.challenge = CountingNonce();
  std::vector<uint8_t> reply;
  ASSERT_TRUE(join.OnMessage(challenge, &reply).ok());
  ASSERT_TRUE(wire::Decode(reply, &m).ok());
  ASSERT_EQ(m.type, wire::MsgType::kProof);
  EXPECT_TRUE(auth::VerifyProof("s3cret-s3cret-s3cret", CountingNonce(), SampleHello(), m.proof));
  EXPECT_EQ(join.OnMessage(challenge, &reply).code(), Code::kProtocol) << "a second challenge";
  wire::Message welcome;
  welcome.type = wire::MsgType::kWelcome;
  welcome.welcome.max_payload = 12345;
  ASSERT_TRUE(join.OnMessage(welcome, &reply).ok());
  EXPECT_TRUE(reply.empty());
  EXPECT_TRUE(join.welcomed());
  EXPECT_EQ(join.max_payload(), 12345u);
}

TEST(JoinHandshake, NamesTheServerAndTheFixOnEveryFailure) {
  wire::Message challenge;
  challenge.type = wire::MsgType::kChallenge;
  std::vector<uint8_t> reply;
  Status st = SampleJoin("").OnMessage(challenge, &reply);
  EXPECT_EQ(st.code(), Code::kUnauthenticated);
  EXPECT_EQ(st.message(), "server 10.0.0.1:8918 requires authentication; give it the secret");
  wire::Message error;
  error.type = wire::MsgType::kError;
  error.error = {Code::kInvalidArgument, 0, "nranks disagrees"};
  st = SampleJoin("").OnMessage(error, &reply);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "server 10.0.0.1:8918 refused rank 2: nranks disagrees");
  wire::Message other;
  other.type = wire::MsgType::kResult;
  st = SampleJoin("").OnMessage(other, &reply);
  EXPECT_EQ(st.code(), Code::kProtocol);
  EXPECT_NE(st.message().find("server 10.0.0.1:8918"), std::string::npos) << st.message();
}

TEST(HelloProof, NoncesAreFresh) { EXPECT_NE(auth::NewNonce(), auth::NewNonce()); }

class SecretFile : public testing::Test {
 protected:
  std::string Write(const std::string& text, mode_t mode) {
    path_ = testing::TempDir() + "optcast-secret-" + std::to_string(::getpid());
    ::unlink(path_.c_str());
    std::ofstream(path_) << text;
    ::chmod(path_.c_str(), mode);
    return path_;
  }
  void TearDown() override {
    if (!path_.empty()) ::unlink(path_.c_str());
    ::unsetenv("OPTCAST_SECRET_FILE");
    ::unsetenv("OPTCAST_SECRET");
  }
  std::string path_;
};

TEST_F(SecretFile, ReadsTheSecretWithoutItsNewline) {
  std::string s;
  ASSERT_TRUE(auth::LoadSecretFile(Write("sixteen-bytes-or-more\n", 0600), &s).ok());
  EXPECT_EQ(s, "sixteen-bytes-or-more");
}

TEST_F(SecretFile, RefusesFilesOthersCanReadShortSecretsAndMissingFiles) {
  std::string s;
  Status st = auth::LoadSecretFile(Write("sixteen-bytes-or-more\n", 0640), &s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("chmod 600"), std::string::npos) << st.message();
  st = auth::LoadSecretFile(Write("short\n", 0600), &s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("at least 16"), std::string::npos) << st.message();
  st = auth::LoadSecretFile("/nonexistent/optcast-secret", &s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent/optcast-secret"), std::string::npos) << st.message();
}

// A server in a container runs as a user of its own; Kubernetes mounts its secret owned by root,
// readable by the pod's group (fsGroup), mode 0440. That is accepted; a file the group may write,
// or that everyone may read, is not.
TEST_F(SecretFile, AUserReadsARootOwnedSecretThroughItsGroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give the file to root and run as another user";
  constexpr uid_t kNobody = 65534;
  const std::string path = Write("a-secret-of-sixteen-bytes\n", 0440);
  ASSERT_EQ(::chown(path.c_str(), 0, kNobody), 0);
  // 0: read the secret, 1: refused; the check runs in a child that became user and group nobody.
  auto as_nobody = [&](mode_t mode) {
    ::chmod(path.c_str(), mode);
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(2);
      std::string s;
      ::_exit(auth::LoadSecretFile(path, &s).ok() && s == "a-secret-of-sixteen-bytes" ? 0 : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(as_nobody(0440), 0);
  EXPECT_EQ(as_nobody(0460), 1) << "the group may write it";
  EXPECT_EQ(as_nobody(0444), 1) << "everyone may read it";
  // Owned by a third user and readable by the group: refused as well.
  ASSERT_EQ(::chown(path.c_str(), 4242, kNobody), 0);
  EXPECT_EQ(as_nobody(0440), 1);
}

TEST_F(SecretFile, EnvironmentPrefersTheFile) {
  std::string s = "left over";
  ASSERT_TRUE(auth::SecretFromEnvironment(&s).ok());
  EXPECT_EQ(s, "");
  ::setenv("OPTCAST_SECRET", "from-the-variable-itself", 1);
  ASSERT_TRUE(auth::SecretFromEnvironment(&s).ok());
  EXPECT_EQ(s, "from-the-variable-itself");
  ::setenv("OPTCAST_SECRET_FILE", Write("from-the-file-of-the-job\n", 0600).c_str(), 1);
  ASSERT_TRUE(auth::SecretFromEnvironment(&s).ok());
  EXPECT_EQ(s, "from-the-file-of-the-job");
  ::unsetenv("OPTCAST_SECRET_FILE");
  ::setenv("OPTCAST_SECRET", "short", 1);
  EXPECT_FALSE(auth::SecretFromEnvironment(&s).ok());
}

TEST(MemoryBudget, AChargeMustFitTheJobAndTheServer) {
  auto server = std::make_shared<server::MemoryBudget>("--memory-limit", 1000);
  auto a = std::make_shared<server::MemoryBudget>("--job-memory-limit", 600, server);
  auto b = std::make_shared<server::MemoryBudget>("--job-memory-limit", 600, server);
  const server::MemoryBudget* refused = nullptr;
  EXPECT_TRUE(a->TryCharge(500, &refused));
  EXPECT_FALSE(a->TryCharge(200, &refused));  // over the job's 600
  EXPECT_EQ(refused, a.get());
  EXPECT_TRUE(b->TryCharge(450, &refused));
  EXPECT_FALSE(b->TryCharge(100, &refused));  // b has room, the server does not
  EXPECT_EQ(refused, server.get());
  EXPECT_EQ(a->used(), 500u);
  EXPECT_EQ(b->used(), 450u);
  EXPECT_EQ(server->used(), 950u);
  a->Release(500);
  EXPECT_TRUE(b->TryCharge(100, &refused));
  EXPECT_EQ(server->used(), 550u);
  b->Release(550);
  EXPECT_EQ(server->used(), 0u);
}

}  // namespace
}  // namespace optcast
