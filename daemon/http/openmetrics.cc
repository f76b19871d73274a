#include "daemon/http/openmetrics.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace perld::http {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits `s` at `sep` outside double quotes.
std::vector<std::string_view> SplitUnquoted(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  bool quoted = false;
  size_t begin = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (quoted && s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      quoted = !quoted;
    } else if (!quoted && s[i] == sep) {
      parts.push_back(s.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  parts.push_back(s.substr(begin));
  return parts;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// One line of a 0.0.4 sample: name, label text (inside the braces), value
// and optional timestamp. False when the line is not a sample.
struct SampleLine {
  std::string_view name;
  std::string_view labels;
  bool braces = false;
  std::string_view value;
  std::string_view timestamp;
};

bool ParseSample(std::string_view line, SampleLine* s) {
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ' && line[i] != '\t') ++i;
  if (i == 0) return false;
  s->name = line.substr(0, i);
  s->labels = {};
  s->braces = false;
  if (i < line.size() && line[i] == '{') {
    const size_t open = ++i;
    bool quoted = false;
    for (; i < line.size(); ++i) {
      if (quoted && line[i] == '\\') {
        ++i;
      } else if (line[i] == '"') {
        quoted = !quoted;
      } else if (!quoted && line[i] == '}') {
        break;
      }
    }
    if (i >= line.size()) return false;
    s->labels = line.substr(open, i - open);
    s->braces = true;
    ++i;
  }
  std::string_view rest = Trim(line.substr(i));
  const size_t space = rest.find_first_of(" \t");
  s->value = rest.substr(0, space);
  s->timestamp = space == std::string_view::npos ? std::string_view() : Trim(rest.substr(space));
  return !s->value.empty();
}

// OpenMetrics' spelling of a value (Go's ParseFloat accepts more: NaN and
// infinities get their canonical form).
std::string_view CanonicalValue(std::string_view v) {
  if (v.size() > 4 || (v.find_first_of("nNiI") == std::string_view::npos)) return v;
  const std::string lower = Lower(v);
  if (lower == "nan") return "NaN";
  if (lower == "inf" || lower == "+inf") return "+Inf";
  if (lower == "-inf") return "-Inf";
  return v;
}

// 0.0.4 timestamp (integer milliseconds) as OpenMetrics seconds.
std::string MillisToSeconds(std::string_view ms) {
  std::string sign;
  if (!ms.empty() && (ms.front() == '-' || ms.front() == '+')) {
    if (ms.front() == '-') sign = "-";
    ms.remove_prefix(1);
  }
  std::string digits(ms);
  if (digits.size() < 4) digits.insert(0, 4 - digits.size(), '0');
  std::string whole = digits.substr(0, digits.size() - 3);
  std::string frac = digits.substr(digits.size() - 3);
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return frac.empty() ? sign + whole : sign + whole + "." + frac;
}

// HELP text: 0.0.4 escapes \ and newline; OpenMetrics also ". A backslash
// that starts no 0.0.4 escape is a backslash.
void AppendHelp(std::string_view help, std::string* out) {
  for (size_t i = 0; i < help.size(); ++i) {
    if (help[i] == '\\' && i + 1 < help.size() && (help[i + 1] == '\\' || help[i + 1] == 'n')) {
      out->append(help.substr(i, 2));
      ++i;
    } else if (help[i] == '"') {
      out->append("\\\"");
    } else if (help[i] == '\\') {
      out->append("\\\\");
    } else {
      out->push_back(help[i]);
    }
  }
}

enum class Kind { kCounter, kSummary, kOther };

struct FamilyState {
  std::string_view name;  // the 0.0.4 family name
  std::string om_name;    // the OpenMetrics family name
  Kind kind = Kind::kOther;
  bool append_total = false;  // a counter without `_total`: samples get it
};

class Converter {
 public:
  Converter(std::string_view text, const OpenMetricsOptions& options, std::string* out)
      : text_(text), options_(options), out_(out) {}

  void Run() {
    Scan();
    ForEachLine([this](std::string_view line) { Line(line); });
    FlushHelp();
    out_->append("# EOF\n");
  }

 private:
  template <typename F>
  void ForEachLine(F f) {
    size_t begin = 0;
    while (begin < text_.size()) {
      size_t end = text_.find('\n', begin);
      if (end == std::string_view::npos) end = text_.size();
      std::string_view line = text_.substr(begin, end - begin);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      f(line);
      begin = end + 1;
    }
  }

  // First pass: family names, run and process start times.
  void Scan() {
    ForEachLine([this](std::string_view line) {
      if (line.rfind("# TYPE ", 0) == 0) {
        const std::vector<std::string_view> parts = SplitUnquoted(Trim(line.substr(7)), ' ');
        if (!parts.empty()) families_.insert(parts[0]);
        return;
      }
      SampleLine s;
      if (line.empty() || line[0] == '#' || !ParseSample(line, &s)) return;
      if (s.name == options_.run_start_family && !s.labels.empty()) {
        run_starts_.emplace(s.labels, s.value);
      } else if (s.name == options_.process_start_family && s.labels.empty()) {
        process_start_ = s.value;
      }
    });
  }

  // The start of what a sample with these labels counts: a run's start
  // when a prefix of its labels (at a label boundary) is a run's identity.
  std::optional<std::string_view> CreatedOf(std::string_view labels) const {
    if (!run_starts_.empty() && !labels.empty()) {
      if (auto it = run_starts_.find(labels); it != run_starts_.end()) return it->second;
      bool quoted = false;
      for (size_t i = 0; i < labels.size(); ++i) {
        if (quoted && labels[i] == '\\') {
          ++i;
        } else if (labels[i] == '"') {
          quoted = !quoted;
        } else if (!quoted && labels[i] == ',') {
          if (auto it = run_starts_.find(labels.substr(0, i)); it != run_starts_.end()) {
            return it->second;
          }
        }
      }
    }
    if (!process_start_.empty()) return process_start_;
    return std::nullopt;
  }

  void FlushHelp() {
    if (!help_name_.empty() && !Trim(help_text_).empty()) {
      out_->append("# HELP ").append(help_name_).push_back(' ');
      AppendHelp(help_text_, out_);
      out_->push_back('\n');
    }
    help_name_ = {};
    help_text_ = {};
  }

  void Type(std::string_view name, std::string_view type) {
    family_ = FamilyState{};
    family_.name = name;
    family_.om_name = std::string(name);
    std::string om_type = Lower(type);
    if (om_type == "counter") {
      family_.kind = Kind::kCounter;
      if (EndsWith(name, "_total")) {
        const std::string_view base = name.substr(0, name.size() - 6);
        if (families_.count(base) != 0 || base.empty()) {
          family_.kind = Kind::kOther;  // the name is another family's
          om_type = "unknown";
        } else {
          family_.om_name = std::string(base);
        }
      } else {
        family_.append_total = true;
      }
    } else if (om_type == "summary") {
      family_.kind = Kind::kSummary;
    } else if (om_type == "untyped") {
      om_type = "unknown";
    }
    if (help_name_ == name) help_name_ = family_.om_name;  // else a HELP of its own
    FlushHelp();
    out_->append("# TYPE ").append(family_.om_name).append(" ").append(om_type).push_back('\n');
    for (std::string_view unit : {"seconds", "bytes"}) {
      const std::string_view om = family_.om_name;
      if (om.size() > unit.size() + 1 && EndsWith(om, unit) &&
          om[om.size() - unit.size() - 1] == '_') {
        out_->append("# UNIT ").append(om).append(" ").append(unit).push_back('\n');
      }
    }
  }

  void Sample(std::string_view name, const SampleLine& s) {
    out_->append(name);
    if (s.braces) out_->append("{").append(s.labels).append("}");
    out_->push_back(' ');
    out_->append(CanonicalValue(s.value));
    if (!s.timestamp.empty()) out_->append(" ").append(MillisToSeconds(s.timestamp));
    out_->push_back('\n');
  }

  void Created(const SampleLine& s) {
    const std::optional<std::string_view> created = CreatedOf(s.labels);
    if (!created) return;
    SampleLine c = s;
    c.value = *created;
    c.timestamp = {};
    Sample(family_.om_name + "_created", c);
  }

  void Line(std::string_view line) {
    if (line.empty()) return;
    if (line[0] == '#') {
      std::string_view rest = line.substr(1);
      rest = rest.substr(std::min(rest.find_first_not_of(" \t"), rest.size()));
      if (rest.rfind("HELP ", 0) == 0 || rest.rfind("TYPE ", 0) == 0) {
        const bool help = rest[0] == 'H';
        rest = Trim(rest.substr(5));
        const size_t space = rest.find_first_of(" \t");
        const std::string_view name = rest.substr(0, space);
        const std::string_view value =
            space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
        if (help) {
          FlushHelp();
          help_name_ = std::string(name);
          help_text_ = value;
        } else {
          Type(name, Trim(value));
        }
      }
      return;  // other comments have no OpenMetrics form
    }
    FlushHelp();
    SampleLine s;
    if (!ParseSample(line, &s)) return;
    const bool in_family = !family_.name.empty() && s.name.rfind(family_.name, 0) == 0;
    if (in_family && family_.kind == Kind::kCounter) {
      if (family_.append_total && s.name == family_.name) {
        Sample(std::string(s.name) + "_total", s);
      } else {
        Sample(s.name, s);
      }
      if (EndsWith(s.name, "_total") || family_.append_total) Created(s);
      return;
    }
    Sample(s.name, s);
    if (in_family && family_.kind == Kind::kSummary && s.name.size() == family_.name.size() + 6 &&
        EndsWith(s.name, "_count")) {
      Created(s);
    }
  }

  std::string_view text_;
  const OpenMetricsOptions& options_;
  std::string* out_;
  std::unordered_set<std::string_view> families_;
  std::unordered_map<std::string_view, std::string_view> run_starts_;
  std::string_view process_start_;
  FamilyState family_;
  std::string help_name_;
  std::string_view help_text_;
};

// The q of one media range's parameters (1 when absent; 0 when malformed).
double Quality(const std::vector<std::string_view>& params, std::string* version) {
  double q = 1;
  for (size_t i = 1; i < params.size(); ++i) {
    const std::string_view p = Trim(params[i]);
    const size_t eq = p.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string key = Lower(Trim(p.substr(0, eq)));
    std::string_view value = Trim(p.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (key == "q") {
      const std::from_chars_result r =
          std::from_chars(value.data(), value.data() + value.size(), q);
      if (r.ec != std::errc() || q < 0) q = 0;
      q = std::min(q, 1.0);
    } else if (key == "version") {
      *version = std::string(value);
    }
  }
  return q;
}

}  // namespace

ExpositionFormat NegotiateExposition(std::string_view accept) {
  double om_q = 0;
  double text_q = 0;
  for (std::string_view range : SplitUnquoted(accept, ',')) {
    const std::vector<std::string_view> params = SplitUnquoted(range, ';');
    const std::string type = Lower(Trim(params[0]));
    if (type.empty()) continue;
    std::string version;
    const double q = Quality(params, &version);
    if (type == "application/openmetrics-text") {
      if (version.empty() || version == "1.0.0") om_q = std::max(om_q, q);
    } else if (type == "text/plain") {
      if (version.empty() || version == "0.0.4") text_q = std::max(text_q, q);
    } else if (type == "text/*" || type == "*/*") {
      text_q = std::max(text_q, q);
    }
  }
  return om_q > 0 && om_q >= text_q ? ExpositionFormat::kOpenMetrics100
                                    : ExpositionFormat::kText004;
}

void AppendOpenMetrics(std::string_view text, const OpenMetricsOptions& options, std::string* out) {
  out->reserve(out->size() + text.size() + text.size() / 8 + 16);
  Converter(text, options, out).Run();
}

std::string ToOpenMetrics(std::string_view text, const OpenMetricsOptions& options) {
  std::string out;
  AppendOpenMetrics(text, options, &out);
  return out;
}

}  // namespace perld::http
