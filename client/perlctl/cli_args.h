// Command-line helpers shared by perlctl's commands (perlctl.cc, load_command.cc).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace perld::perlctl {

// Removes every `--NAME` from `args`; true if there was one.
inline bool TakeFlag(std::vector<std::string>* args, const std::string& name) {
  bool found = false;
  std::vector<std::string> rest;
  for (const std::string& a : *args) {
    if (a == "--" + name) {
      found = true;
    } else {
      rest.push_back(a);
    }
  }
  *args = std::move(rest);
  return found;
}

}  // namespace perld::perlctl
