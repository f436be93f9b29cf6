#!/usr/bin/env bash
# Installs everything Optcast needs to build and test, from Debian packages. Idempotent.
#   scripts/setup.sh          # build and test
#   scripts/setup.sh --fuzz   # also clang with libFuzzer and its sanitizer runtimes (scripts/fuzz.sh)
#   scripts/setup.sh --image  # only what building the packages needs (deploy/docker/Dockerfile)
set -euo pipefail

# What building `optcast`, the plugin, the interposers' sources and the .deb packages needs.
IMAGE_PACKAGES=(
  build-essential cmake pkg-config ninja-build
  libcli11-dev                                 # command line of the optcast tool
  libfmt-dev libspdlog-dev                     # formatting and logging
  nlohmann-json3-dev                           # JSON results
  libyaml-cpp-dev                              # server configuration files
  libcpp-httplib-dev                           # Prometheus metrics endpoint
  libhwy-dev                                   # SIMD reduction kernels
  libssl-dev                                   # HMAC-SHA256 hello proofs (OpenSSL libcrypto, static for the plugin)
  libfabric-dev                                # the ofi transport (libfabric: EFA, verbs, TCP)
  dpkg-dev file                                # cpack's .deb packages (dpkg-shlibdeps)
)
PACKAGES=(
  "${IMAGE_PACKAGES[@]}"
  libgtest-dev libgmock-dev libbenchmark-dev   # tests and micro-benchmarks
  libgloo-dev                                  # Gloo ring baseline (optcast-gloo-bench)
  gnuplot-nox                                  # PNG plots (optcast emu run --plot, scripts/sim.sh)
  libsimgrid-dev                               # the scale simulator (sim/, docs/scale.md)
  iproute2 procps                              # emulated cluster, process inspection
  debootstrap                                  # scripts/package-check.sh --debian12 (a fresh Debian 12)
  libopenmpi-dev openmpi-bin                   # the MPI interposer and its tests, for Open MPI
  libmpich-dev mpich                           # ... and for MPICH (mpicc/mpirun stay Open MPI's)
  python3-torch libtorch-dev                   # the torch.distributed backend (Debian's /usr/bin/python3)
  pybind11-dev python3-pybind11                # its Python binding
)

for arg in "$@"; do
  case "$arg" in
    --fuzz) PACKAGES+=(clang libclang-rt-14-dev) ;;
    --image) PACKAGES=("${IMAGE_PACKAGES[@]}") ;;
    *)
      echo "usage: $0 [--fuzz | --image]" >&2
      exit 2
      ;;
  esac
done

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
