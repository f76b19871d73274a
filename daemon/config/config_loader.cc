#include "daemon/config/config_loader.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "daemon/common/host_port.h"
#include "daemon/common/http_url.h"
#include "daemon/config/config_schema.h"
#include "daemon/config/nearest_name.h"

namespace perld::config {
namespace {

using internal::ConfigKey;
using internal::ConfigKeys;
using internal::LineOf;

constexpr size_t kMaxFileBytes = size_t{1} << 20;  // a configuration is a few KiB

absl::string_view Leaf(absl::string_view dotted) {
  const size_t dot = dotted.rfind('.');
  return dot == absl::string_view::npos ? dotted : dotted.substr(dot + 1);
}

// " (did you mean 'X'?)" for an unknown dotted key close to a known key or
// section, comparing whole names, then leaf names (a key under the wrong
// section, or a section key at the top level); "" when nothing is close.
std::string Suggestion(const std::string& unknown) {
  std::vector<std::string> names = ConfigKeyNames();
  const std::vector<std::string>& sections = internal::SectionNames();
  names.insert(names.end(), sections.begin(), sections.end());
  std::string best = NearestName(unknown, names);
  if (best.empty()) {
    std::vector<std::string> leaves;
    leaves.reserve(names.size());
    for (const std::string& name : names) leaves.emplace_back(Leaf(name));
    const std::string leaf = NearestName(std::string(Leaf(unknown)), leaves);
    for (size_t i = 0; i < leaves.size() && best.empty(); ++i) {
      if (!leaf.empty() && leaves[i] == leaf) best = names[i];
    }
  }
  return best.empty() ? "" : absl::StrCat(" (did you mean '", best, "'?)");
}

// yaml-cpp 0.7 can loop forever building nodes on some malformed input
// (found by fuzz_config: 367 bytes grew the heap without end). A first pass
// through the event parser counts nodes and stops past kMaxYamlNodes -- far
// above any real configuration -- before LoadAll builds anything.
constexpr int kMaxYamlNodes = 100'000;

struct TooManyNodes {
  YAML::Mark mark;
};

class NodeCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { Count(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Count(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Count(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Count(mark);
  }
  void OnMapEnd() override {}

 private:
  void Count(const YAML::Mark& mark) {
    if (++nodes_ > kMaxYamlNodes) throw TooManyNodes{mark};
  }
  int nodes_ = 0;
};

class Loader {
 public:
  explicit Loader(const std::string& display_name) : display_(display_name) {}

  absl::StatusOr<DaemonConfig> Load(const std::string& text) {
    if (const size_t nul = text.find('\0'); nul != std::string::npos) {
      const auto line = 1 + std::count(text.data(), text.data() + nul, '\n');
      return absl::InvalidArgumentError(
          absl::StrCat(display_, ":", line, ": not a text file (a NUL byte)"));
    }
    std::vector<YAML::Node> documents;
    try {
      std::istringstream stream(text);
      YAML::Parser parser(stream);
      NodeCounter counter;
      while (parser.HandleNextDocument(counter)) {
      }
      documents = YAML::LoadAll(text);
    } catch (const TooManyNodes& e) {
      return absl::InvalidArgumentError(absl::StrCat(display_, ":", LineOf(e.mark.line),
                                                     ": malformed YAML: more than ", kMaxYamlNodes,
                                                     " nodes (not a configuration file)"));
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(display_, ":", LineOf(e.mark.line), ": malformed YAML: ", e.msg));
    }
    for (size_t i = 1; i < documents.size(); ++i) {
      if (!documents[i].IsNull()) {
        Add(LineOf(documents[i].Mark().line),
            "a configuration file holds one YAML document; a second one starts here");
      }
    }
    if (!documents.empty() && !documents[0].IsNull()) {
      if (documents[0].IsMap()) {
        Walk(documents[0], "");
      } else {
        Add(LineOf(documents[0].Mark().line),
            absl::StrCat("the top level must be a mapping of keys (key: value), got ",
                         internal::Describe(documents[0])));
      }
    }
    CrossCheck();
    if (problems_.empty()) {
      if (absl::Status s = config_.latency.Normalize(); !s.ok()) {  // defensive: checked above
        problems_.push_back({0, absl::StrCat(display_, ": ", s.message())});
      }
    }
    if (!problems_.empty()) {
      std::stable_sort(problems_.begin(), problems_.end(),
                       [](const Problem& a, const Problem& b) { return a.line < b.line; });
      std::vector<std::string> lines;
      for (const Problem& p : problems_) lines.push_back(p.text);
      return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
    }
    return config_;
  }

 private:
  struct Problem {
    int line;
    std::string text;
  };

  void Add(int line, absl::string_view text) {
    problems_.push_back({line, absl::StrCat(display_, ":", line, ": ", text)});
  }
  void AddForKey(int line, absl::string_view key, absl::string_view reason) {
    Add(line, absl::StrCat("key '", key, "': ", reason));
    refused_.emplace(key);
  }

  // Reads every key of `map`; `section` is "" or "retention."/"limits.".
  void Walk(const YAML::Node& map, const std::string& section) {
    for (const auto& entry : map) {  // entry: a pair of node handles, by value
      const YAML::Node& key_node = entry.first;
      const YAML::Node& value = entry.second;
      const int line = LineOf(key_node.Mark().line);
      if (!key_node.IsScalar()) {
        Add(line, absl::StrCat("a key must be a name, got ", internal::Describe(key_node)));
        continue;
      }
      const std::string name = section + key_node.Scalar();
      if (key_node.Scalar().find('.') != std::string::npos) {  // sections nest, keys never dot
        const absl::string_view leaf = Leaf(name);
        Add(line,
            absl::StrCat("unknown key '", internal::Shown(name), "' (write '",
                         internal::Shown(leaf), ":' indented under '",
                         internal::Shown(name.substr(0, name.size() - leaf.size() - 1)), ":')"));
        continue;
      }
      if (const auto [first, inserted] = given_.emplace(name, line); !inserted) {
        Add(line, absl::StrCat("duplicate key '", internal::Shown(name), "' (first on line ",
                               first->second, ")"));
        refused_.insert(name);
        continue;
      }
      if (internal::IsSection(name)) {  // a section, or one nested in its section
        if (value.IsMap()) {
          Walk(value, name + ".");
        } else if (!value.IsNull()) {  // an empty section is all defaults
          AddForKey(line, name,
                    absl::StrCat("expected a mapping of ", name, ".* keys, got ",
                                 internal::Describe(value)));
        }
        continue;
      }
      const ConfigKey* key = internal::FindConfigKey(name);
      if (key == nullptr) {
        Add(line, absl::StrCat("unknown key '", internal::Shown(name), "'", Suggestion(name)));
        continue;
      }
      if (std::optional<internal::ValueError> error = key->parse(value, &config_)) {
        AddForKey(error->line > 0 ? error->line : line, name, error->reason);
      }
    }
  }

  bool Given(const std::string& key) const { return given_.contains(key); }
  bool Accepted(const std::string& key) const { return !refused_.contains(key); }
  int LineOfKey(const std::string& key) const {
    const auto it = given_.find(key);
    return it == given_.end() ? 0 : it->second;
  }

  // Rules between keys, checked only when each key involved was accepted.
  void CrossCheck() {
    LatencyConfig& latency = config_.latency;
    if (!Given("maxLatency")) latency.max_latency = DefaultMaxLatency(latency.time_unit);
    if (Accepted("minLatency") && Accepted("maxLatency") && Accepted("timeUnit") &&
        latency.min_latency > latency.max_latency) {
      if (Given("maxLatency")) {
        AddForKey(LineOfKey("maxLatency"), "maxLatency",
                  absl::StrCat(latency.max_latency, " is below minLatency ", latency.min_latency));
      } else {
        AddForKey(LineOfKey("minLatency"), "minLatency",
                  absl::StrCat(latency.min_latency, " is above maxLatency ", latency.max_latency,
                               " (the default for timeUnit ", RenderedTimeUnit(), ")"));
      }
    }
    const int64_t page_entries = int64_t{1} << latency.exact_latency_page_bits;
    if (Accepted("exactLatencyPageBits") && Accepted("exactLatencySparsePageEntries") &&
        latency.exact_latency_sparse_page_entries >= page_entries) {
      if (Given("exactLatencySparsePageEntries")) {
        AddForKey(LineOfKey("exactLatencySparsePageEntries"), "exactLatencySparsePageEntries",
                  absl::StrCat(latency.exact_latency_sparse_page_entries,
                               " must be below 2^exactLatencyPageBits = ", page_entries));
      } else {
        AddForKey(LineOfKey("exactLatencyPageBits"), "exactLatencyPageBits",
                  absl::StrCat("pages of 2^", latency.exact_latency_page_bits, " = ", page_entries,
                               " entries need exactLatencySparsePageEntries below ", page_entries,
                               " (it is ", latency.exact_latency_sparse_page_entries, ")"));
      }
    }
    // Every run's percentiles become series and answers: one cap for all.
    if (Accepted("percentiles") && Accepted("limits.maxPercentiles") &&
        static_cast<int64_t>(latency.percentiles.size()) > config_.limits.max_percentiles) {
      if (Given("percentiles")) {
        AddForKey(LineOfKey("percentiles"), "percentiles",
                  absl::StrCat(latency.percentiles.size(), " percentiles, more than ",
                               "limits.maxPercentiles ", config_.limits.max_percentiles));
      } else {
        AddForKey(LineOfKey("limits.maxPercentiles"), "limits.maxPercentiles",
                  absl::StrCat(config_.limits.max_percentiles, " is below the ",
                               latency.percentiles.size(), " default percentiles"));
      }
    }
    const ChannelOptions& channels = config_.channels;
    if (Accepted("maxQs") && Accepted("qPerWorker") && channels.max_qs == 0 &&
        channels.q_per_worker == 0) {
      AddForKey(LineOfKey("qPerWorker"), "qPerWorker",
                "0 needs maxQs > 0 (with maxQs 0 each worker has qPerWorker >= 1 queues)");
    }
    // A certificate and its key come together; client CAs need a server certificate.
    const TlsConfig& tls = config_.tls;
    if (Accepted("tls.certFile") && Accepted("tls.keyFile") &&
        tls.cert_file.empty() != tls.key_file.empty()) {
      const char* given = tls.cert_file.empty() ? "tls.keyFile" : "tls.certFile";
      AddForKey(LineOfKey(given), given, "tls.certFile and tls.keyFile are given together");
    }
    if (Accepted("tls.clientCaFile") && !tls.client_ca_file.empty() && tls.cert_file.empty()) {
      AddForKey(LineOfKey("tls.clientCaFile"), "tls.clientCaFile",
                "mutual TLS needs tls.certFile and tls.keyFile");
    }
    const UpstreamConfig& up = config_.upstream;
    if (Accepted("upstream.certFile") && Accepted("upstream.keyFile") &&
        up.cert_file.empty() != up.key_file.empty()) {
      const char* given = up.cert_file.empty() ? "upstream.keyFile" : "upstream.certFile";
      AddForKey(LineOfKey(given), given,
                "upstream.certFile and upstream.keyFile are given together");
    }
    CheckRemoteWrite();
  }

  // remoteWrite: credentials and TLS need a URL of the right scheme, one
  // kind of auth, and never a secret in clear text to another host.
  void CheckRemoteWrite() {
    const RemoteWriteConfig& rw = config_.remote_write;
    static constexpr const char* kNeedUrl[] = {
        "remoteWrite.bearerTokenFile",        "remoteWrite.basicAuth.username",
        "remoteWrite.basicAuth.passwordFile", "remoteWrite.tls.caFile",
        "remoteWrite.tls.certFile",           "remoteWrite.tls.keyFile"};
    if (!Accepted("remoteWrite.url")) return;
    if (rw.url.empty()) {
      for (const char* key : kNeedUrl) {
        if (Given(key) && !FindConfigKeyValueEmpty(key)) {
          AddForKey(LineOfKey(key), key, "needs remoteWrite.url (remote write is off without it)");
        }
      }
      return;
    }
    absl::StatusOr<common::HttpUrl> url = common::ParseHttpUrl(rw.url);
    if (!url.ok()) return;  // refused by the key itself
    const bool basic = !rw.basic_auth_username.empty() || !rw.basic_auth_password_file.empty();
    if (!rw.bearer_token_file.empty() && basic) {
      AddForKey(LineOfKey("remoteWrite.bearerTokenFile"), "remoteWrite.bearerTokenFile",
                "give bearerTokenFile or basicAuth, not both");
    }
    if (rw.basic_auth_username.empty() != rw.basic_auth_password_file.empty()) {
      const char* given = rw.basic_auth_username.empty() ? "remoteWrite.basicAuth.passwordFile"
                                                         : "remoteWrite.basicAuth.username";
      AddForKey(LineOfKey(given), given,
                "basicAuth.username and basicAuth.passwordFile are given together");
    }
    if (rw.tls_cert_file.empty() != rw.tls_key_file.empty()) {
      const char* given =
          rw.tls_cert_file.empty() ? "remoteWrite.tls.keyFile" : "remoteWrite.tls.certFile";
      AddForKey(LineOfKey(given), given, "tls.certFile and tls.keyFile are given together");
    }
    if (!url->https) {
      for (const char* key :
           {"remoteWrite.tls.caFile", "remoteWrite.tls.certFile", "remoteWrite.tls.keyFile"}) {
        if (Given(key) && !FindConfigKeyValueEmpty(key)) {
          AddForKey(LineOfKey(key), key, "TLS needs an https:// remoteWrite.url");
        }
      }
      if ((!rw.bearer_token_file.empty() || basic) && !common::IsLoopbackHost(url->host)) {
        const char* key = rw.bearer_token_file.empty() ? "remoteWrite.basicAuth.passwordFile"
                                                       : "remoteWrite.bearerTokenFile";
        AddForKey(LineOfKey(key), key,
                  absl::StrCat("a token or password is never sent in clear text to another "
                               "host (",
                               internal::Shown(url->host), "): use an https:// remoteWrite.url"));
      }
    }
  }

  // True when the (accepted) string key `key` holds "".
  bool FindConfigKeyValueEmpty(const char* key) const {
    return internal::FindConfigKey(key)->render(config_) == "\"\"";
  }

  std::string RenderedTimeUnit() const {
    return internal::FindConfigKey("timeUnit")->render(config_);
  }

  const std::string& display_;
  DaemonConfig config_;
  std::vector<Problem> problems_;
  std::map<std::string, int, std::less<>> given_;  // key -> its line
  std::set<std::string, std::less<>> refused_;
};

}  // namespace

absl::StatusOr<DaemonConfig> LoadConfigText(const std::string& text,
                                            const std::string& display_name) {
  try {
    return Loader(display_name).Load(text);
  } catch (const YAML::Exception& e) {  // not expected past parsing; still the file's fault
    return absl::InvalidArgumentError(
        absl::StrCat(display_name, ":", LineOf(e.mark.line), ": malformed YAML: ", e.msg));
  } catch (const std::exception& e) {  // std::bad_alloc
    return absl::InternalError(
        absl::StrCat(display_name, ": reading the configuration failed: ", e.what()));
  }
}

absl::StatusOr<DaemonConfig> LoadConfigFile(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (file == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  std::string text;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) {
    text.append(buffer, n);
    if (text.size() > kMaxFileBytes) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": larger than ", kMaxFileBytes >> 20,
                                                     " MiB: not a configuration file"));
    }
  }
  if (std::ferror(file.get())) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot read"));
  }
  return LoadConfigText(text, path);
}

std::vector<std::string> ConfigKeyNames() {
  std::vector<std::string> names;
  names.reserve(ConfigKeys().size());
  for (const ConfigKey& key : ConfigKeys()) names.push_back(key.name);
  return names;
}

}  // namespace perld::config
