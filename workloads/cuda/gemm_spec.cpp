// GEMM specification rules and the algorithm record (no CUDA calls; unit-tested without a GPU).
#include "gemm_spec.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "rafter/collector/error.hpp"

namespace rafter::workloads::cuda {
namespace {
#include "gemm_enum_names.inc"

template <std::size_t N>
std::string lookup(const std::pair<int, const char*> (&table)[N], int id) {
  if (id == 0) return "undefined";
  for (const auto& [key, name] : table)
    if (key == id) return name;
  return "id" + std::to_string(id);
}

bool is_fp8(std::string_view p) { return p.starts_with("fp8"); }
bool is_fp4(std::string_view p) { return p == "nvfp4" || p == "mxfp4"; }
}  // namespace

std::string tile_name(int tile_id) { return lookup(kTileNames, tile_id); }
std::string stages_name(int stages_id) { return lookup(kStagesNames, stages_id); }
std::string cluster_name(int cluster_id) {
  return cluster_id == 1 ? "auto" : lookup(kClusterNames, cluster_id);
}

GemmSpec linear_pass_spec(std::string_view pass, std::int64_t tokens, std::int64_t in_features,
                          std::int64_t out_features, std::string precision) {
  GemmSpec s;
  s.precision = std::move(precision);
  if (pass == "fwd") {
    s.m = tokens, s.n = out_features, s.k = in_features, s.trans_b = true;
  } else if (pass == "bwd_input") {
    s.m = tokens, s.n = in_features, s.k = out_features;
  } else if (pass == "bwd_weight") {
    s.m = out_features, s.n = in_features, s.k = tokens, s.trans_a = true;
  } else {
    throw InputError("unknown GEMM pass '" + std::string(pass) + "' (known: fwd, bwd_input, bwd_weight)");
  }
  return s;
}

GemmTypes gemm_types(const GemmSpec& spec) {
  const std::string& p = spec.precision;
  auto same = [](const char* t, const char* c) { return GemmTypes{t, t, t, c, false, ""}; };
  if (p == "fp64") return same("f64", "64F");
  if (p == "fp32") return same("f32", "32F");
  if (p == "tf32") return same("f32", "32F_FAST_TF32");
  if (p == "bf16") return same("bf16", "32F");
  if (p == "fp16") return same("f16", "32F");
  if (p == "int8") return GemmTypes{"i8", "i8", "i32", "32I", false, ""};
  const char* out = spec.out_fp32 ? "f32" : "bf16";
  if (p == "fp8_e4m3") return GemmTypes{"e4m3", "e4m3", out, "32F", true, ""};
  if (p == "fp8_e4m3_e5m2") return GemmTypes{"e4m3", "e5m2", out, "32F", true, ""};
  if (p == "fp8_e5m2_e4m3") return GemmTypes{"e5m2", "e4m3", out, "32F", true, ""};
  if (p == "fp8_e5m2")
    throw InputError("cuBLASLt has no E5M2×E5M2 GEMM (use fp8_e4m3_e5m2 or fp8_e5m2_e4m3)");
  if (is_fp4(p))
    return GemmTypes{"e2m1", "e2m1", out, "32F", false, p == "nvfp4" ? "vec16_ue4m3" : "vec32_ue8m0"};
  throw InputError("precision '" + p + "' has no cuBLASLt GEMM");
}

std::string gemm_shape_problem(const GemmSpec& s) {
  if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0) return "GEMM dimensions must be positive";
  bool tn = s.trans_b && !s.trans_a;  // cuBLAS column-major: A' = our B (op T), B' = our A (op N)
  if (is_fp8(s.precision)) {
    if (!tn) return "FP8 GEMMs on sm_90 need the TN layout (store the operands pre-transposed)";
    // m (the tokens of a linear layer's forward; cuBLAS's n) is free: decode's 1 to 15 tokens run.
    if (s.k % 16 || s.n % 16) return "FP8 GEMMs need n and k multiples of 16";
  }
  if (s.precision == "int8") {
    if (!tn) return "INT8 GEMMs need the TN layout (store the operands pre-transposed)";
    if (s.k % 4 || s.m % 4 || s.n % 4) return "INT8 GEMMs need m, n and k multiples of 4";
  }
  if (is_fp4(s.precision)) {
    if (!tn) return "block-scaled FP4 GEMMs need the TN layout (K-contiguous copies of both operands)";
    if (s.k % 32 || s.m % 16 || s.n % 16)
      return "block-scaled FP4 GEMMs need k a multiple of 32, m and n of 16";
  }
  return "";
}

GemmSpec to_tn_layout(const GemmSpec& spec, std::string* note) {
  GemmSpec s = spec;
  if (s.trans_b && !s.trans_a) return s;
  s.trans_a = false;
  s.trans_b = true;
  if (note)
    *note = "operands stored pre-transposed into the TN layout that sm_90 FP8/INT8 kernels need "
            "(as Transformer Engine stores them); the transpose itself is not timed";
  return s;
}

nlohmann::json to_json(const GemmAlgoRecord& r) {
  return {{"algo_id", r.algo_id},
          {"tile", r.tile},
          {"tile_id", r.tile_id},
          {"stages", r.stages},
          {"stages_id", r.stages_id},
          {"split_k", r.split_k},
          {"reduction_scheme", r.reduction_scheme},
          {"swizzle", r.swizzle},
          {"custom_option", r.custom_option},
          {"cluster", r.cluster},
          {"cluster_shape_id", r.cluster_shape_id},
          {"workspace_bytes", r.workspace_bytes},
          {"candidate_rank", r.candidate_rank},
          {"candidates", r.candidates},
          {"candidate_seconds", r.candidate_seconds},
          {"choice", r.choice},
          {"contest_fastest_seconds", r.contest_fastest},
          {"contest_heuristic_seconds", r.contest_heuristic}};
}

bool fastest_wins_contest(const std::vector<double>& fastest, const std::vector<double>& heuristic,
                          double margin) {
  if (fastest.empty() || fastest.size() != heuristic.size())
    throw std::invalid_argument("GEMM contest: both sides need the same number of rounds, at least one");
  double f = 0, h = 0;
  for (std::size_t i = 0; i < fastest.size(); ++i) f += fastest[i], h += heuristic[i];
  return f < h * (1.0 - margin);
}

namespace {
template <class T>
T field(const nlohmann::json& j, const char* name) {
  if (!j.contains(name)) throw FormatError(std::string("algorithm record: missing field '") + name + "'");
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw FormatError(std::string("algorithm record: field '") + name + "' has the wrong type");
  }
}
}  // namespace

GemmAlgoRecord gemm_algo_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw FormatError("algorithm record: expected an object");
  GemmAlgoRecord r;
  r.algo_id = field<int>(j, "algo_id");
  r.tile = field<std::string>(j, "tile");
  r.tile_id = field<int>(j, "tile_id");
  r.stages = field<std::string>(j, "stages");
  r.stages_id = field<int>(j, "stages_id");
  r.split_k = field<int>(j, "split_k");
  r.reduction_scheme = field<int>(j, "reduction_scheme");
  r.swizzle = field<int>(j, "swizzle");
  r.custom_option = field<int>(j, "custom_option");
  r.cluster = field<std::string>(j, "cluster");
  r.cluster_shape_id = field<int>(j, "cluster_shape_id");
  r.workspace_bytes = field<std::size_t>(j, "workspace_bytes");
  r.candidate_rank = field<int>(j, "candidate_rank");
  r.candidates = field<int>(j, "candidates");
  r.candidate_seconds = field<double>(j, "candidate_seconds");
  r.choice = field<std::string>(j, "choice");
  if (j.contains("contest_fastest_seconds")) {  // absent in records written before the contest
    r.contest_fastest = field<std::vector<double>>(j, "contest_fastest_seconds");
    r.contest_heuristic = field<std::vector<double>>(j, "contest_heuristic_seconds");
  }
  if (r.algo_id < 0) throw FormatError("algorithm record: field 'algo_id' must be >= 0");
  if (r.split_k < 1) throw FormatError("algorithm record: field 'split_k' must be >= 1");
  if (r.candidate_rank < 0 || (r.candidates > 0 && r.candidate_rank >= r.candidates))
    throw FormatError("algorithm record: field 'candidate_rank' outside [0, candidates)");
  if (r.choice != "best" && r.choice != "heuristic")
    throw FormatError("algorithm record: field 'choice' must be 'best' or 'heuristic'");
  return r;
}

}  // namespace rafter::workloads::cuda
