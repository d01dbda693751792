// Holding a compute ceiling for seconds (see sustained.hpp).
#include "sustained.hpp"

#include <chrono>
#include <vector>

#include "cuda_util.hpp"
#include "gpu_model.hpp"
#include "rafter/collector/gpu_timing.hpp"
#include "rafter/collector/interrupt.hpp"

namespace rafter::probes::cuda {
namespace {

struct HoldSample {
  double at_seconds, rate, sm_hz, watts, celsius;
};

nlohmann::json range_of(const std::vector<double>& v) {
  const Summary s = summarize(v);
  return {{"min", s.min}, {"median", s.median}, {"max", s.max}};
}

}  // namespace

Ceiling hold_ceiling(const Ceiling& burst, const std::function<void(cudaStream_t)>& launch,
                     double work_per_launch, double seconds, int device,
                     const std::function<double()>& sm_cycles) {
  cudaStream_t stream;
  cudaEvent_t start, stop;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<HoldSample> samples;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const gpu::Clocks first = gpu::read_clocks(device);
  while (elapsed() < seconds && !interrupt_requested()) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    launch(stream);
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "held launch");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    const double sm_hz = sm_cycles ? sm_cycles() / (ms * 1e-3) : gpu::read_clocks(device).sm_hz;
    const gpu::PowerReading p = gpu::read_power(device);
    samples.push_back({elapsed(), work_per_launch / (ms * 1e-3), sm_hz, p.watts, p.celsius});
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  throw_if_interrupted();  // a hold cut short is not a sustained figure
  const gpu::Clocks last = gpu::read_clocks(device);
  std::vector<double> rates, clocks, watts, celsius;
  nlohmann::json trace = nlohmann::json::array();
  double next_trace = 0;
  for (const HoldSample& s : samples) {
    if (s.at_seconds >= next_trace) {
      trace.push_back({{"at_seconds", s.at_seconds}, {"rate", s.rate}, {"sm_clock_hz", s.sm_hz},
                       {"power_watts", s.watts}, {"temperature_c", s.celsius}});
      next_trace = s.at_seconds + 0.25;
    }
    if (s.at_seconds < seconds / 2) continue;  // the first half: clock and power still settling
    rates.push_back(s.rate);
    clocks.push_back(s.sm_hz);
    watts.push_back(s.watts);
    celsius.push_back(s.celsius);
  }
  if (rates.empty()) throw InputError("cuda: --sustained hold too short for one launch");
  Ceiling c = burst;
  c.regime = "sustained";
  c.figure = Figure::measured(summarize(rates), burst.figure.unit);
  c.clocks = {first.sm_hz, last.sm_hz, first.memory_hz, last.memory_hz, last.sm_hz < 0.95 * first.sm_hz};
  c.frequency_hz = summarize(clocks).median;
  c.params["hold_seconds"] = seconds;
  c.params["held_launches"] = samples.size();
  c.params["figure_from"] = "the launches of the hold's second half";
  c.params["sm_clock_hz"] = range_of(clocks);
  c.params["sm_clock_from"] =
      sm_cycles ? "clock64: the launch's SM cycles over its time" : "NVML, after each launch";
  c.params["power_watts"] = range_of(watts);
  c.params["temperature_c"] = range_of(celsius);
  c.params["power_readable"] = gpu::read_power(device).ok;
  c.params["burst_value"] = burst.figure.value;
  c.params["sustained_over_burst"] = c.figure.value / burst.figure.value;
  c.params["trace"] = std::move(trace);
  if (burst.datasheet_value && burst.frequency_hz > 0) {  // the datasheet figure scales with the clock
    c.datasheet_value = *burst.datasheet_value * c.frequency_hz / burst.frequency_hz;
  }
  apply_flags(c);
  return c;
}

}  // namespace rafter::probes::cuda
