// Command-line helpers shared by perlctl's commands (perlctl.cc,
// load_command.cc, import_command.cc): taking options out of the argument
// list, and the usage error every command throws (perlctl prints it with
// the usage text and exits 2).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace perld::perlctl {

struct UsageError {
  std::string message;
};

// Takes every "--NAME VALUE" / "--NAME=VALUE" out of `args`, in order.
inline std::vector<std::string> TakeValues(std::vector<std::string>* args,
                                           const std::string& name) {
  std::vector<std::string> values;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args->size(); ++i) {
    const std::string& a = (*args)[i];
    if (a == "--" + name) {
      if (i + 1 >= args->size()) throw UsageError{"--" + name + " needs a value"};
      values.push_back((*args)[++i]);
    } else if (a.rfind("--" + name + "=", 0) == 0) {
      values.push_back(a.substr(name.size() + 3));
    } else {
      rest.push_back(a);
    }
  }
  *args = std::move(rest);
  return values;
}

// The one "--NAME VALUE" of `args` (taken out), if given; twice is an error.
inline std::optional<std::string> TakeOne(std::vector<std::string>* args, const std::string& name) {
  std::vector<std::string> v = TakeValues(args, name);
  if (v.size() > 1) throw UsageError{"--" + name + " given more than once"};
  if (v.empty()) return std::nullopt;
  return v.front();
}

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
