// Model suites: a model file (workloads/models/*.json) + a phase + a precision recipe
// (workloads/recipes/*.json) + parallelism (Megatron TP, ZeRO/DP) expand into the operators of
// one training or inference step, each with its count. plan_suite() costs them without running
// anything; run_suite() checks and times them on a device.
//
// Entry points for other commands (e.g. the default job):
//   Run plan_suite(const SuiteConfig&, const std::vector<MemoryLevel>& levels);
//   Run run_suite(const SuiteConfig&, const ExecContext&);          // levels of ctx.device
//   Run run_instances(const std::vector<OpInstance>&, const ExecContext&, nlohmann::json suite);
//   std::vector<MemoryLevel> device_memory_levels(std::string_view device);
// All throw InputError (or FormatError) with a one-line message on bad input, before running.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rafter/collector/run_record.hpp"
#include "rafter/workloads/backend.hpp"
#include "rafter/workloads/operator.hpp"

namespace rafter::workloads {

struct ModelConfig {
  std::string name;
  std::string architecture;  // "llama" (attention + SwiGLU MLP) or "gla" (gated linear attention)
  std::int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, layers = 0, vocab = 0;
  std::int64_t head_dim_v = 0;     // gla: value dimension per head
  std::int64_t gate_low_rank = 0;  // gla: forget-gate projection rank
  std::int64_t chunk = 64;         // gla: chunk length
  bool tied_embeddings = false;
  std::string origin;              // file it came from

  double layer_parameters() const;  // weights of one layer (projections, MLP, norms)
  double parameters() const;        // all weights, embeddings and head included
};

// Reads and validates a model file: a missing or wrong field is a FormatError naming it.
ModelConfig model_from_json(const nlohmann::json& j, std::string_view origin);
// A model by name (workloads/models/<name>.json, or $RAFTER_DATA_DIR/models) or by path.
ModelConfig load_model(std::string_view name);
ModelConfig load_model_file(const std::filesystem::path& path);
std::vector<std::string> available_models();

// Which precision each operator class runs in (workloads/recipes/<name>.json).
struct Recipe {
  std::string name, description;
  std::string linear_fwd, linear_bwd_input, linear_bwd_weight;
  std::string attention, elementwise, head;
  std::int64_t bf16_first_layers = 0, bf16_last_layers = 0;  // layers kept in BF16
  bool quantize_ops = false;
  std::string quant_activation, quant_weight, quant_gradient;
  bool weight_block2d = false, rht_on_wgrad = false, stochastic_rounding_on_grad = false;
  std::int64_t hot_channels = 0;  // hot-channel patch width (0: none)
};
Recipe recipe_from_json(const nlohmann::json& j, std::string_view origin);
Recipe load_recipe(std::string_view name);  // "bf16", "fp8", "nvfp4" or a path
std::vector<std::string> available_recipes();

struct SuiteConfig {
  std::string model = "llama2-7b";  // name, ignored when model_file is set
  std::string model_file;
  std::string phase = "train";      // prefill | decode | train
  std::int64_t batch = 1;
  std::int64_t seq = 2048;          // tokens per sequence (prefill, train)
  std::int64_t kv_len = 0;          // decode: cached tokens (0 → seq)
  std::string precision = "bf16";   // recipe: bf16 | fp8 | nvfp4 | path
  std::int64_t tp = 1;              // Megatron tensor parallelism
  int zero = 0;                     // ZeRO stage 0..3 (0: plain data parallelism)
  std::int64_t dp = 1;              // data-parallel ranks
};

// The suite as JSON (model values, recipe name, parallelism) for Run::suite.
nlohmann::json suite_json(const SuiteConfig& config, const ModelConfig& model);

// The operators of one step, each with its count. Throws InputError on a bad config (unknown
// phase, TP not dividing heads/kv_heads/ffn/vocab, non-positive sizes).
std::vector<OpInstance> expand_suite(const SuiteConfig& config);
std::vector<OpInstance> expand_suite(const SuiteConfig& config, const ModelConfig& model, const Recipe& recipe);

// Memory levels of a device for the traffic model: the CPU's caches from hwloc + DRAM; for
// "cuda:N" the levels of an H100-class GPU unless a machine profile provides them.
std::vector<MemoryLevel> device_memory_levels(std::string_view device);
Device describe_device_for_run(std::string_view device);

Run plan_suite(const SuiteConfig& config, const std::vector<MemoryLevel>& levels);
Run run_suite(const SuiteConfig& config, const ExecContext& ctx);
// Checks and times `instances` on ctx.device (NoBackend records for what no backend runs), with a
// progress bar on a terminal. Throws InputError before running anything when an instance does not
// fit in the device's memory.
Run run_instances(const std::vector<OpInstance>& instances, const ExecContext& ctx, nlohmann::json suite);

// Step totals over records (each weighted by its count).
struct StepTotals {
  double flops = 0;
  double bytes_outer = 0;  // DRAM/HBM bytes
  double seconds = 0;      // measured records only
  double timed_flops = 0, timed_bytes_outer = 0;  // the part of flops / bytes_outer that `seconds` covers
  int invalid = 0, failed = 0, no_backend = 0, does_not_fit = 0, not_run = 0, measured = 0, scaled = 0;
  // FLOP/s of the timed records alone (0 without any): never the step's FLOPs over part of its time.
  double timed_flops_per_second() const { return seconds > 0 ? timed_flops / seconds : 0; }
  // Shares of the step's FLOPs and DRAM/HBM bytes in records without a measured time.
  double untimed_flops_share() const { return flops > 0 ? 1 - timed_flops / flops : 0; }
  double untimed_bytes_share() const { return bytes_outer > 0 ? 1 - timed_bytes_outer / bytes_outer : 0; }
};
StepTotals step_totals(const Run& run);

// Where the models/ and recipes/ folders are.
std::filesystem::path data_directory();

}  // namespace rafter::workloads
