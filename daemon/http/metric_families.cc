#include "daemon/http/metric_families.h"

#include <prometheus/text_serializer.h>

#include <sstream>
#include <utility>

namespace perld::http {

prometheus::MetricFamily& AddFamily(MetricFamilies* families, std::string name,
                                    prometheus::MetricType type, std::string help) {
  prometheus::MetricFamily& family = families->emplace_back();
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

void AddSample(prometheus::MetricFamily& family, double value, MetricLabels labels) {
  prometheus::ClientMetric& metric = family.metric.emplace_back();
  metric.label = std::move(labels);
  switch (family.type) {
    case prometheus::MetricType::Counter:
      metric.counter.value = value;
      break;
    case prometheus::MetricType::Gauge:
      metric.gauge.value = value;
      break;
    default:
      metric.untyped.value = value;
      break;
  }
}

void AddSingle(MetricFamilies* families, std::string name, prometheus::MetricType type,
               std::string help, double value) {
  AddSample(AddFamily(families, std::move(name), type, std::move(help)), value);
}

void CollectInto(const std::vector<const prometheus::Collectable*>& collectables,
                 MetricFamilies* out) {
  for (const prometheus::Collectable* c : collectables) {
    MetricFamilies collected = c->Collect();
    out->insert(out->end(), std::make_move_iterator(collected.begin()),
                std::make_move_iterator(collected.end()));
  }
}

void AppendFamiliesText(const MetricFamilies& families, std::string* out) {
  // The stream writes after the text already there, into its capacity.
  std::ostringstream stream(std::move(*out), std::ios_base::out | std::ios_base::ate);
  prometheus::TextSerializer().Serialize(stream, families);
  *out = std::move(stream).str();
}

std::string FamiliesText(const MetricFamilies& families) {
  std::string text;
  AppendFamiliesText(families, &text);
  return text;
}

}  // namespace perld::http
