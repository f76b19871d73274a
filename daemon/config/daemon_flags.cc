#include "daemon/config/daemon_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "daemon/config/listen_address.h"
#include "daemon/config/nearest_name.h"

namespace perld::config {
namespace {

enum class Arity { kNone, kRequired, kOptional };

struct FlagSpec {
  const char* name;  // without the leading "--"
  Arity arity;
};

constexpr FlagSpec kFlags[] = {
    {"config", Arity::kRequired},      {"grpc-listen", Arity::kRequired},
    {"http-listen", Arity::kRequired}, {"state-dir", Arity::kRequired},
    {"log-level", Arity::kRequired},   {"check-config", Arity::kOptional},
    {"version", Arity::kNone},         {"help", Arity::kNone},
    {"grpc-unix", Arity::kRequired},
};

absl::Status Bad(absl::string_view text) { return absl::InvalidArgumentError(std::string(text)); }

const FlagSpec* FindFlag(absl::string_view name) {
  for (const FlagSpec& spec : kFlags) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

absl::Status UnknownFlag(absl::string_view name) {
  std::vector<std::string> known;
  for (const FlagSpec& spec : kFlags) known.push_back(absl::StrCat("--", spec.name));
  const std::string near = NearestName(absl::StrCat("--", name), known);
  return Bad(absl::StrCat("unknown flag '--", name, "'",
                          near.empty() ? "" : absl::StrCat(" (did you mean '", near, "'?)")));
}

absl::Status Set(absl::string_view name, const std::string& value, DaemonFlags* flags) {
  if (name == "config") {
    flags->config_file = value;
  } else if (name == "grpc-listen") {
    flags->grpc_listen = value;
  } else if (name == "grpc-unix") {
    flags->grpc_unix = value;
  } else if (name == "http-listen") {
    flags->http_listen = value;
  } else if (name == "state-dir") {
    flags->state_dir = value;
  } else if (name == "log-level") {
    flags->log_level = log::ParseLevel(value);
    if (!flags->log_level) {
      return Bad(absl::StrCat(
          "flag --log-level: expected one of debug, info, warning, error, got '", value, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DaemonFlags> ParseDaemonFlags(const std::vector<std::string>& args) {
  DaemonFlags flags;
  std::optional<std::string> check_file;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "--") || arg == "--") {
      return Bad(absl::StrCat("unexpected argument '", arg,
                              "' (flags start with --; `perld bench` runs a benchmark)"));
    }
    const size_t equals = arg.find('=');
    const std::string name =
        arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    std::optional<std::string> value;
    if (equals != std::string::npos) value = arg.substr(equals + 1);
    const FlagSpec* spec = FindFlag(name);
    if (spec == nullptr) return UnknownFlag(name);
    const bool next_is_value = i + 1 < args.size() && !absl::StartsWith(args[i + 1], "-");
    switch (spec->arity) {
      case Arity::kNone:
        if (value) return Bad(absl::StrCat("flag --", name, " takes no value"));
        if (name == "version") flags.version = true;
        if (name == "help") flags.help = true;
        break;
      case Arity::kOptional:  // --check-config [FILE]
        flags.check_config = true;
        if (!value && next_is_value) value = args[++i];
        if (value && value->empty()) return Bad("flag --check-config: empty FILE");
        if (value) check_file = value;
        break;
      case Arity::kRequired:
        if (!value && next_is_value) value = args[++i];
        if (!value || value->empty()) {
          return Bad(absl::StrCat("flag --", name, " needs a value"));
        }
        if (absl::Status s = Set(name, *value, &flags); !s.ok()) return s;
        break;
    }
  }
  if (check_file) {
    if (flags.config_file && *flags.config_file != *check_file) {
      return Bad(absl::StrCat("--check-config '", *check_file, "' and --config '",
                              *flags.config_file, "' name different files"));
    }
    flags.config_file = check_file;
  }
  return flags;
}

std::string DaemonUsage() {
  const DaemonConfig defaults;
  return absl::StrCat(
      "usage: perld [options]                run the perld daemon\n"
      "       perld --check-config [FILE]    validate a configuration, print the effective one\n"
      "       perld bench [options]          in-process PerlBench run (perld bench -help)\n"
      "       perld --version | --help\n"
      "\n"
      "options (override the configuration file; --flag VALUE or --flag=VALUE):\n"
      "  --config FILE             YAML configuration (default: none, the built-in defaults;\n"
      "                            config/perld.yaml documents every key)\n"
      "  --grpc-listen HOST:PORT   gRPC listen address (default ",
      defaults.grpc_listen,
      "; IPv6 as [::1]:9717)\n"
      "  --grpc-unix PATH          gRPC on a Unix socket as well, mode 0660 (default: off;\n"
      "                            $RUNTIME_DIRECTORY/perld.sock under systemd)\n"
      "  --http-listen HOST:PORT   HTTP /metrics listen address (default ",
      defaults.http_listen,
      ")\n"
      "  --state-dir DIR           state directory (default: $STATE_DIRECTORY, else "
      "./perld-state)\n"
      "  --log-level LEVEL         debug, info, warning or error (default ",
      log::LevelName(defaults.log_level),
      ")\n"
      "  --check-config [FILE]     load FILE (or --config) with the flags, print the effective\n"
      "                            configuration and exit: 0 if valid, 2 with every error if not\n"
      "  --version                 print the version and exit\n"
      "  --help                    print this help and exit\n");
}

absl::Status ApplyFlags(const DaemonFlags& flags, DaemonConfig* config) {
  std::vector<std::string> errors;
  for (const auto& [flag, value] : {std::pair{"--grpc-listen", &flags.grpc_listen},
                                    std::pair{"--http-listen", &flags.http_listen}}) {
    if (!value->has_value()) continue;
    if (absl::StatusOr<ListenAddress> a = ParseListenAddress(**value); !a.ok()) {
      errors.push_back(absl::StrCat("flag ", flag, ": ", a.status().message()));
    }
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  if (flags.grpc_listen) config->grpc_listen = *flags.grpc_listen;
  if (flags.http_listen) config->http_listen = *flags.http_listen;
  if (flags.grpc_unix) config->grpc_unix = *flags.grpc_unix;
  if (flags.state_dir) config->state_dir = *flags.state_dir;
  if (flags.log_level) config->log_level = *flags.log_level;
  return absl::OkStatus();
}

}  // namespace perld::config
