// Combining a ceiling's trials (see trials.hpp).
#include "trials.hpp"

#include <algorithm>
#include <vector>

#include "rafter/collector/error.hpp"

namespace rafter::probes::cpu {

TrialCombination combine_trials(std::span<const Trial> trials, bool higher_is_better, double threshold) {
  if (trials.empty()) throw InputError("combine_trials: no trial to combine");
  TrialCombination r;
  std::vector<double> medians;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    const double m = trials[i].figure.median;
    medians.push_back(m);
    const double best = trials[r.best].figure.median;
    if (higher_is_better ? m > best : m < best) r.best = i;
  }
  std::sort(medians.begin(), medians.end());
  const std::size_t n = medians.size();
  r.median_min = medians.front();
  r.median_max = medians.back();
  r.median_median = n % 2 ? medians[n / 2] : 0.5 * (medians[n / 2 - 1] + medians[n / 2]);
  r.spread = r.median_median != 0 ? (r.median_max - r.median_min) / r.median_median : 0;
  r.disagree = r.spread > threshold;
  return r;
}

void record_trials(Ceiling& c, std::span<const Trial> trials, double threshold) {
  const TrialCombination k = combine_trials(trials, c.kind != CeilingKind::Latency, threshold);
  c.figure = Figure{trials[k.best].figure.median, c.figure.unit, c.figure.source, trials[k.best].figure};
  nlohmann::json list = nlohmann::json::array();
  for (const Trial& t : trials) {
    nlohmann::json j = {{"at_seconds", t.at_seconds},  {"median", t.figure.median},
                        {"min", t.figure.min},         {"max", t.figure.max},
                        {"samples", t.figure.samples}, {"thread_overlap_min", t.thread_overlap_min}};
    if (t.working_set_bytes > 0) j["working_set_bytes"] = t.working_set_bytes;
    list.push_back(std::move(j));
  }
  c.params["trials"] = list;
  c.params["best_trial"] = k.best;
  c.params["trial_medians"] = {{"min", k.median_min}, {"median", k.median_median}, {"max", k.median_max}};
  c.params["between_trial_spread"] = k.spread;
  c.params["trials_disagree_above"] = threshold;
  c.params["trials_disagree"] = k.disagree;
  for (const char* per_core : {"per_core_bytes_per_second", "per_core_flops_per_second"})
    if (c.params.contains(per_core) && c.threads > 0) c.params[per_core] = c.figure.value / c.threads;
}

void flag_drifting_trials(Ceiling& c) {
  const auto it = c.params.find("trials_disagree");
  if (it == c.params.end() || !it->is_boolean() || !it->get<bool>()) return;
  if (c.flag.empty() || c.flag == "noisy") c.flag = "drifting";
}

}  // namespace rafter::probes::cpu
