// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "auth/secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/env.h"

namespace optcast::auth {

namespace {

constexpr size_t kMaxSecretBytes = 4096;

const char* kHowToMake = "create one with: head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE";

Status CheckLength(const std::string& secret, const std::string& source) {
  if (secret.size() < kMinSecretBytes) {
    return InvalidArgument(source + " holds a secret of " + std::to_string(secret.size()) + " bytes; at least " +
                           std::to_string(kMinSecretBytes) + " are needed (" + kHowToMake + ")");
  }
  return Status::Ok();
}

}  // namespace

Status LoadSecretFile(const std::string& path, std::string* secret) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return InvalidArgument("cannot read the secret file " + path + ": " + std::strerror(errno) + " (" + kHowToMake +
                           ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument("the secret file " + path + " is not a regular file");
  }
  // Only this user may read it; or, for a file root owns, also its group (read only): how a
  // container that runs as a user of its own gets a mounted secret (Kubernetes gives a secret
  // volume to the pod's fsGroup, mode 0440).
  const bool root_owned_for_group = st.st_uid == 0 && ::geteuid() != 0;
  const mode_t refused = root_owned_for_group ? (S_IWGRP | S_IXGRP | S_IRWXO) : (S_IRWXG | S_IRWXO);
  if ((st.st_mode & refused) != 0) {
    ::close(fd);
    return InvalidArgument("the secret file " + path + " can be read by other users; run: chmod 600 " + path);
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    ::close(fd);
    return InvalidArgument("the secret file " + path + " belongs to user " + std::to_string(st.st_uid) +
                           "; it must belong to the user the program runs as (" + std::to_string(::geteuid()) +
                           ") or to root");
  }
  std::string data(kMaxSecretBytes + 1, '\0');
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > kMaxSecretBytes) {
    return InvalidArgument("the secret file " + path + " is over " + std::to_string(kMaxSecretBytes) +
                           " bytes; is it the right file?");
  }
  data.resize(got);
  if (!data.empty() && data.back() == '\n') data.pop_back();
  if (!data.empty() && data.back() == '\r') data.pop_back();
  OPTCAST_RETURN_IF_ERROR(CheckLength(data, "the secret file " + path));
  *secret = std::move(data);
  return Status::Ok();
}

Status SecretFromEnvironment(std::string* secret) {
  secret->clear();
  if (auto path = GetEnv("OPTCAST_SECRET_FILE")) return LoadSecretFile(*path, secret);
  if (auto value = GetEnv("OPTCAST_SECRET")) {
    OPTCAST_RETURN_IF_ERROR(CheckLength(*value, "OPTCAST_SECRET"));
    *secret = *value;
  }
  return Status::Ok();
}

}  // namespace optcast::auth
