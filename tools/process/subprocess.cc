// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/process/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

namespace optcast::tools {

namespace {

// What the child does between fork and exec: -1 leaves a descriptor as inherited.
struct ChildSetup {
  int stdout_fd = -1;
  int stderr_fd = -1;
  bool stdin_null = false;
  const char* output_file = nullptr;  // stdout and stderr, opened in the child
  bool die_with_parent = false;
  bool ignore_sigint = false;
};

// Forks and execs argv.
pid_t ForkExec(const std::vector<std::string>& argv, const ChildSetup& setup) {
  const std::string program = FindExecutable(argv.at(0));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (setup.die_with_parent) prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (setup.output_file != nullptr) {
    const int fd = open(setup.output_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
  }
  if (setup.stdout_fd >= 0) dup2(setup.stdout_fd, STDOUT_FILENO);
  if (setup.stderr_fd >= 0) dup2(setup.stderr_fd, STDERR_FILENO);
  if (setup.stdin_null) {
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  }
  if (setup.ignore_sigint) signal(SIGINT, SIG_IGN);
  execvp(program.c_str(), args.data());
  std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

}  // namespace

std::string JoinCommand(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a.find(' ') == std::string::npos ? a : "'" + a + "'";
  }
  return s;
}

CommandResult RunCommand(const std::vector<std::string>& argv) {
  CommandResult result;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return result;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return result;
  }
  ChildSetup setup;
  setup.stdout_fd = out_pipe[1];
  setup.stderr_fd = err_pipe[1];
  setup.stdin_null = true;
  const pid_t pid = ForkExec(argv, setup);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    result.err = std::string("fork: ") + std::strerror(errno);
    return result;
  }
  // Drain both pipes together so a chatty child cannot block on a full pipe.
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, n);
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

Status RunChecked(const std::vector<std::string>& argv, std::string* out) {
  CommandResult r = RunCommand(argv);
  if (out != nullptr) *out = r.out;
  if (r.exit_code == 0) return Status::Ok();
  std::string err = r.err;
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  return InternalError("`" + JoinCommand(argv) + "` failed (exit " + std::to_string(r.exit_code) + ")" +
                       (err.empty() ? std::string() : ": " + err));
}

Status RunChecked(const std::vector<std::string>& argv) { return RunChecked(argv, nullptr); }

bool InPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::string FindExecutable(const std::string& name) {
  if (InPath(name)) return name;
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    const std::string p = dir + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return name;
}

Status Spawn(const std::vector<std::string>& argv, const SpawnOptions& options, pid_t* pid) {
  ChildSetup setup;
  setup.output_file = options.output_file.empty() ? nullptr : options.output_file.c_str();
  setup.die_with_parent = options.die_with_parent;
  setup.ignore_sigint = options.ignore_sigint;
  *pid = ForkExec(argv, setup);
  if (*pid < 0) return InternalError(std::string("fork: ") + std::strerror(errno));
  return Status::Ok();
}

Status ForkCall(const std::function<int()>& body, pid_t* pid) {
  std::fflush(stdout);
  *pid = fork();
  if (*pid < 0) return InternalError(std::string("fork: ") + std::strerror(errno));
  if (*pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the caller
    const int rc = body();
    std::fflush(stdout);
    _exit(rc);
  }
  return Status::Ok();
}

bool Child::Succeeded() const { return done && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string Child::HowItEnded() const {
  return WIFEXITED(status) ? "exited with " + std::to_string(WEXITSTATUS(status))
                           : "was killed by signal " + std::to_string(WTERMSIG(status));
}

void KillChildren(const std::vector<Child*>& children) {
  for (Child* c : children) {
    if (!c->done) kill(c->pid, SIGKILL);
  }
  for (Child* c : children) {
    if (!c->done) {
      waitpid(c->pid, nullptr, 0);
      c->done = true;
    }
  }
}

WaitEnd WaitChildren(const std::vector<Child*>& children, const WaitOptions& options, size_t* failed) {
  const auto deadline = std::chrono::steady_clock::now() + options.limit;
  size_t left = 0;
  for (const Child* c : children) left += c->done ? 0 : 1;
  while (left > 0) {
    for (size_t i = 0; i < children.size(); ++i) {
      Child& c = *children[i];
      if (c.done) continue;
      rusage ru{};
      int status = 0;
      if (wait4(c.pid, &status, WNOHANG, &ru) != c.pid) continue;
      c.done = true;
      c.status = status;
      c.cpu_seconds = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
      --left;
      if (options.stop_at_first_failure && !c.Succeeded()) {
        KillChildren(children);
        if (failed != nullptr) *failed = i;
        return WaitEnd::kFailed;
      }
    }
    if (left == 0) break;
    if (options.interrupted != nullptr && *options.interrupted) {
      KillChildren(children);
      return WaitEnd::kInterrupted;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      KillChildren(children);
      return WaitEnd::kTimedOut;
    }
    std::this_thread::sleep_for(options.poll_interval);
  }
  return WaitEnd::kAllDone;
}

}  // namespace optcast::tools
