// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Each MPI library has its own binary interface, so each has its own build of the interposer
// (liboptcast-mpi.so for Open MPI, liboptcast-mpi-mpich.so for MPICH). Preloaded into a program of
// the other MPI, a build would hand that library handles and constants it cannot read, and the
// program would crash somewhere inside MPI. So when it is loaded, the interposer looks for the
// other MPI in the process and, if it is there, stops with an error that names the right build.

#include <dlfcn.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace optcast::mpi {
namespace {

struct Flavor {
  const char* name;     // the MPI this build is for
  const char* library;  // this build's file name
};

#if defined(OPEN_MPI)
constexpr Flavor kThis{"Open MPI", "liboptcast-mpi.so"};
constexpr Flavor kOther{"MPICH", "liboptcast-mpi-mpich.so"};
// Defined by libmpich alone.
constexpr const char* kOtherSymbol = "MPII_Version_string";
#elif defined(MPICH)
constexpr Flavor kThis{"MPICH", "liboptcast-mpi-mpich.so"};
constexpr Flavor kOther{"Open MPI", "liboptcast-mpi.so"};
// Defined by Open MPI's libmpi alone.
constexpr const char* kOtherSymbol = "ompi_mpi_comm_world";
#else
#error "the MPI interposer is built for Open MPI or MPICH"
#endif

// Where this library was loaded from, so that the error can name the right build's path.
std::string ThisLibrary() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ThisLibrary), &info) == 0 || info.dli_fname == nullptr) return kThis.library;
  return info.dli_fname;
}

__attribute__((constructor)) void RefuseTheOtherMpi() {
  if (dlsym(RTLD_DEFAULT, kOtherSymbol) == nullptr) return;
  const std::string self = ThisLibrary();
  const size_t slash = self.rfind('/');
  const std::string right = (slash == std::string::npos ? "" : self.substr(0, slash + 1)) + kOther.library;
  std::fprintf(stderr,
               "optcast-mpi: %s is the build for %s, but this program uses %s; preload %s instead "
               "(built when %s's development package is installed). Stopping before any MPI call reaches the "
               "wrong library.\n",
               self.c_str(), kThis.name, kOther.name, right.c_str(), kOther.name);
  std::fflush(stderr);
  _exit(1);
}

}  // namespace
}  // namespace optcast::mpi
