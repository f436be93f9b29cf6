/* Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause */
/* Loads a shared library as a preload would (dlopen, every symbol bound now) and looks up the
 * symbols named after it. Exit 0 when all resolve, else 1 with the loader's message. Needs only
 * libc, so it runs in the minimal root filesystems of run_rootfs_load.py. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s LIBRARY [SYMBOL...]\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen(%s): %s\n", argv[1], dlerror());
    return 1;
  }
  for (int i = 2; i < argc; ++i) {
    if (dlsym(lib, argv[i]) == NULL) {
      fprintf(stderr, "%s defines no %s\n", argv[1], argv[i]);
      return 1;
    }
  }
  printf("%s loads and defines the %d symbol(s) asked for\n", argv[1], argc - 2);
  return 0;
}
