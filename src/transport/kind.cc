// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/kind.h"

#include "common/env.h"

namespace optcast::transport {

const char* KindName(Kind k) { return k == Kind::kOfi ? "ofi" : "tcp"; }

Status CheckKindBuilt(Kind k) {
#if !OPTCAST_WITH_OFI
  if (k == Kind::kOfi) {
    return InvalidArgument(
        "this build of Optcast has no libfabric support (configured with -DOPTCAST_WITH_OFI=OFF); install "
        "libfabric-dev and rebuild with -DOPTCAST_WITH_OFI=ON for the ofi transport, or use tcp");
  }
#endif
  return Status::Ok();
}

Status ParseKind(const std::string& text, const std::string& what, Kind* out) {
  Kind k;
  if (text == "tcp") {
    k = Kind::kTcp;
  } else if (text == "ofi") {
    k = Kind::kOfi;
  } else {
    return InvalidArgument(what + "='" + text + "' is not a transport; use tcp (built in) or ofi (libfabric)");
  }
  if (Status st = CheckKindBuilt(k); !st.ok()) return Status(st.code(), what + "='" + text + "': " + st.message());
  *out = k;
  return Status::Ok();
}

Status KindFromEnvironment(Kind fallback, Kind* out) {
  *out = fallback;
  if (auto v = GetEnv("OPTCAST_TRANSPORT")) return ParseKind(*v, "OPTCAST_TRANSPORT", out);
  return Status::Ok();
}

}  // namespace optcast::transport
