// Test helper: validates Prometheus exposition text with the real promtool
// (`promtool check metrics`, Debian package prometheus).
#pragma once

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace perld::test_support {

inline bool HavePromtool() { return std::system("command -v promtool >/dev/null 2>&1") == 0; }

// Pipes `text` into `promtool check metrics`; returns its exit status and
// puts what it printed in *report (problems are listed there).
inline int PromtoolCheck(const std::string& text, std::string* report) {
  char path[] = "/tmp/perld_promtool_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return -1;
  close(fd);
  const std::string command = std::string("promtool check metrics >") + path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "w");
  if (pipe == nullptr) return -1;
  fwrite(text.data(), 1, text.size(), pipe);
  const int status = pclose(pipe);
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  *report = buffer.str();
  unlink(path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace perld::test_support
