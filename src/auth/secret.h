// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The deployment secret that servers and clients share. It comes from a file or the environment,
// never from a command line (which every user of the machine can read in /proc).

#include <string>

#include "optcast/status.h"

namespace optcast::auth {

// Shorter secrets are refused: HMAC is only as strong as its key.
inline constexpr size_t kMinSecretBytes = 16;

// Reads the secret from `path` (one trailing newline is dropped). Fails with a message naming the
// file and the fix when it is unreadable, too short, or readable by other users: the file must
// belong to this user with no group or other permissions, or belong to root and be readable by
// this user's group only (0440: a container user's mounted secret).
Status LoadSecretFile(const std::string& path, std::string* secret);

// OPTCAST_SECRET_FILE (a path) or else OPTCAST_SECRET (the secret itself). Leaves *secret empty
// when neither is set.
Status SecretFromEnvironment(std::string* secret);

}  // namespace optcast::auth
