// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "auth/proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <vector>

namespace optcast::auth {

namespace {

// Domain separation: a MAC made for this purpose is useless for any other.
constexpr char kContext[] = "optcast-hello-proof-v1";

void PutU32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

wire::Nonce NewNonce() {
  wire::Nonce nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) {
    // Without randomness a challenge could repeat and a recorded proof be replayed.
    std::abort();
  }
  return nonce;
}

wire::Mac ComputeProof(const std::string& secret, const wire::Nonce& nonce, const wire::Hello& hello) {
  std::vector<uint8_t> msg(kContext, kContext + sizeof(kContext) - 1);
  msg.insert(msg.end(), nonce.begin(), nonce.end());
  msg.insert(msg.end(), hello.job_id.begin(), hello.job_id.end());
  PutU32(msg, hello.nranks);
  PutU32(msg, hello.rank);
  PutU32(msg, hello.flags);
  PutU32(msg, hello.lane);  // a proof is for one lane's connection
  wire::Mac mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg.data(), msg.size(), mac.data(), &len);
  return mac;
}

bool VerifyProof(const std::string& secret, const wire::Nonce& nonce, const wire::Hello& hello,
                 const wire::Mac& proof) {
  const wire::Mac expected = ComputeProof(secret, nonce, hello);
  return CRYPTO_memcmp(expected.data(), proof.data(), expected.size()) == 0;
}

}  // namespace optcast::auth
