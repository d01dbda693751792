// Model and recipe files: location, parsing and validation (a missing or wrong field is a
// FormatError naming the file and field).
#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>

#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"
#include "rafter/workloads/operator.hpp"
#include "rafter/workloads/precision.hpp"
#include "rafter/workloads/suite.hpp"

namespace rafter::workloads {
namespace fs = std::filesystem;

fs::path data_directory() {
  if (const char* env = std::getenv("RAFTER_DATA_DIR"); env && *env) return env;
#ifdef RAFTER_DATA_DIR
  if (fs::exists(fs::path(RAFTER_DATA_DIR) / "models")) return RAFTER_DATA_DIR;
#endif
#ifdef RAFTER_INSTALL_DATA_DIR
  if (fs::exists(fs::path(RAFTER_INSTALL_DATA_DIR) / "models")) return RAFTER_INSTALL_DATA_DIR;
#endif
  return "workloads";
}

namespace {

std::int64_t positive(const JsonReader& r, std::string_view key) {
  const auto& j = r.raw();
  if (!j.contains(std::string(key))) r.fail(key, "missing");
  const auto& v = j.at(std::string(key));
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(kMaxShapeValue)))
    r.fail(key, v.is_number_integer() ? "too large (at most 2^48)" : "expected a positive integer");
  const auto x = v.get<std::int64_t>();
  if (x <= 0) r.fail(key, fmt::format("expected a positive integer, got {}", x));
  // Sizes become shape values (operators take at most 2^48), and products of a few stay finite.
  if (x > kMaxShapeValue) r.fail(key, fmt::format("{} is too large (at most 2^48)", x));
  return x;
}

// An optional count (layers kept in BF16, hot channels): 0 when absent, never negative.
std::int64_t count_field(const JsonReader& r, std::string_view key) {
  const std::int64_t x = r.integer_or(key, 0);
  if (x < 0 || x > kMaxShapeValue) r.fail(key, fmt::format("expected a count in [0, 2^48], got {}", x));
  return x;
}

std::vector<std::string> stems(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

fs::path resolve(std::string_view name, std::string_view folder, std::string_view what) {
  const fs::path as_path(name);
  if (name.find('/') != std::string_view::npos || as_path.extension() == ".json") {
    if (!fs::exists(as_path)) throw InputError(fmt::format("{} file '{}' does not exist", what, name));
    return as_path;
  }
  const fs::path p = data_directory() / folder / (std::string(name) + ".json");
  if (!fs::exists(p))
    throw InputError(fmt::format("unknown {} '{}' (known: {})", what, name,
                                 fmt::join(stems(data_directory() / folder), ", ")));
  return p;
}

std::string precision_field(const JsonReader& r, std::string_view key) {
  const std::string p = r.string(key);
  try {
    precision_info(p);
  } catch (const InputError&) {
    r.fail(key, fmt::format("unknown precision '{}'", p));
  }
  return p;
}

}  // namespace

double ModelConfig::layer_parameters() const {
  const double H = double(hidden);
  if (architecture == "gla") {
    const double dk = double(heads) * double(head_dim), dv = double(heads) * double(head_dim_v);
    // q, k (H·dk each), v, output gate (H·dv each), o (dv·H), low-rank forget gate (H·r + r·dk), norms
    return 2 * H * dk + 2 * H * dv + dv * H + H * gate_low_rank + gate_low_rank * dk + 3 * H * ffn + 2 * H +
           double(head_dim_v);
  }
  // In double: a model file's sizes may multiply beyond int64 (model_from_json bounds each by 2^48).
  const double attn = H * (double(heads) + 2 * double(kv_heads)) * double(head_dim) + double(heads) * double(head_dim) * H;
  return attn + 3 * H * double(ffn) + 2 * H;
}

double ModelConfig::parameters() const {
  const double embed = double(vocab) * double(hidden);
  return double(layers) * layer_parameters() + embed * (tied_embeddings ? 1 : 2) + double(hidden);
}

ModelConfig model_from_json(const nlohmann::json& j, std::string_view origin) {
  if (!j.is_object()) throw FormatError(fmt::format("{}: expected a JSON object", origin));
  const JsonReader r(j, std::string(origin));
  ModelConfig m;
  m.origin = std::string(origin);
  m.name = r.string("name");
  m.architecture = r.string_or("architecture", "llama");
  if (m.architecture != "llama" && m.architecture != "gla")
    r.fail("architecture", fmt::format("expected \"llama\" or \"gla\", got \"{}\"", m.architecture));
  m.hidden = positive(r, "hidden");
  m.heads = positive(r, "heads");
  m.kv_heads = positive(r, "kv_heads");
  m.head_dim = positive(r, "head_dim");
  m.ffn = positive(r, "ffn");
  m.layers = positive(r, "layers");
  m.vocab = positive(r, "vocab");
  m.tied_embeddings = r.boolean_or("tied_embeddings", false);
  if (m.heads % m.kv_heads != 0)
    r.fail("kv_heads", fmt::format("heads={} is not a multiple of kv_heads={}", m.heads, m.kv_heads));
  if (m.architecture == "gla") {
    m.head_dim_v = positive(r, "head_dim_v");
    m.gate_low_rank = positive(r, "gate_low_rank");
    m.chunk = positive(r, "chunk");
  }
  return m;
}

ModelConfig load_model_file(const fs::path& path) {
  return model_from_json(read_json_file(path), path.filename().string());
}

ModelConfig load_model(std::string_view name) { return load_model_file(resolve(name, "models", "model")); }

std::vector<std::string> available_models() { return stems(data_directory() / "models"); }
std::vector<std::string> available_recipes() { return stems(data_directory() / "recipes"); }

Recipe recipe_from_json(const nlohmann::json& j, std::string_view origin) {
  if (!j.is_object()) throw FormatError(fmt::format("{}: expected a JSON object", origin));
  const JsonReader r(j, std::string(origin));
  Recipe rc;
  rc.name = r.string("name");
  rc.description = r.string_or("description", "");
  const JsonReader lin = r.object("linear");
  rc.linear_fwd = precision_field(lin, "fwd");
  rc.linear_bwd_input = precision_field(lin, "bwd_input");
  rc.linear_bwd_weight = precision_field(lin, "bwd_weight");
  rc.attention = precision_field(r, "attention");
  rc.elementwise = precision_field(r, "elementwise");
  rc.head = precision_field(r, "head");
  if (r.has("bf16_layers")) {
    const JsonReader b = r.object("bf16_layers");
    rc.bf16_first_layers = count_field(b, "first");
    rc.bf16_last_layers = count_field(b, "last");
  }
  rc.quantize_ops = r.boolean_or("quantize_ops", false);
  if (rc.quantize_ops) {
    const JsonReader q = r.object("quantize");
    rc.quant_activation = precision_field(q, "activation");
    rc.quant_weight = precision_field(q, "weight");
    rc.quant_gradient = precision_field(q, "gradient");
    rc.weight_block2d = q.boolean_or("weight_block2d", false);
    rc.rht_on_wgrad = q.boolean_or("rht_on_wgrad", false);
    rc.stochastic_rounding_on_grad = q.boolean_or("stochastic_rounding_on_grad", false);
  }
  rc.hot_channels = count_field(r, "hot_channel_patch");
  return rc;
}

Recipe load_recipe(std::string_view name) {
  const fs::path p = resolve(name, "recipes", "precision recipe");
  return recipe_from_json(read_json_file(p), p.filename().string());
}

}  // namespace rafter::workloads
