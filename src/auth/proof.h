// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Proof of the deployment secret for one hello: HMAC-SHA256 (OpenSSL libcrypto) keyed with the
// secret, over a fresh server nonce and every field of the hello. A proof cannot be replayed on
// another connection (new nonce) nor moved to another job or rank (the hello is covered).

#include <string>

#include "wire/protocol.h"

namespace optcast::auth {

// 32 bytes from the operating system's random source.
wire::Nonce NewNonce();

wire::Mac ComputeProof(const std::string& secret, const wire::Nonce& nonce, const wire::Hello& hello);

// Constant-time comparison against the expected proof.
bool VerifyProof(const std::string& secret, const wire::Nonce& nonce, const wire::Hello& hello, const wire::Mac& proof);

}  // namespace optcast::auth
