// NVML through dlopen: the symbols are looked up once, by name, with the header's signatures.
#include "nvml_runtime.hpp"

#include <dlfcn.h>

#include <mutex>

#ifdef RAFTER_HAVE_NVML_HEADER
#include <nvml.h>
#endif

namespace rafter::gpu::nvml {

#ifdef RAFTER_HAVE_NVML_HEADER
namespace {

struct Api {
  void* handle = nullptr;
  std::string why;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, nvmlClockType_t, unsigned*) = nullptr;
  nvmlReturn_t (*max_clock)(nvmlDevice_t, nvmlClockType_t, unsigned*) = nullptr;
  nvmlReturn_t (*driver)(char*, unsigned) = nullptr;
  nvmlReturn_t (*ecc)(nvmlDevice_t, nvmlEnableState_t*, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*link_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*link_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned*) = nullptr;
  nvmlReturn_t (*p2p_status)(nvmlDevice_t, nvmlDevice_t, nvmlGpuP2PCapsIndex_t,
                             nvmlGpuP2PStatus_t*) = nullptr;
  nvmlReturn_t (*common_ancestor)(nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t*) = nullptr;
  nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*nvlink_version)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
  nvmlReturn_t (*nvlink_remote_type)(nvmlDevice_t, unsigned, nvmlIntNvLinkDeviceType_t*) = nullptr;
  nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
  bool ok() const { return init && by_pci && clock; }
};

template <class F>
void load(void* h, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(h, name));
}

const Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    a.handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!a.handle) {
      a.why = "libnvidia-ml.so.1 not found";
      return;
    }
    load(a.handle, a.init, "nvmlInit_v2");
    load(a.handle, a.by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    load(a.handle, a.clock, "nvmlDeviceGetClockInfo");
    load(a.handle, a.max_clock, "nvmlDeviceGetMaxClockInfo");
    load(a.handle, a.driver, "nvmlSystemGetDriverVersion");
    load(a.handle, a.ecc, "nvmlDeviceGetEccMode");
    load(a.handle, a.link_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
    load(a.handle, a.link_width, "nvmlDeviceGetCurrPcieLinkWidth");
    load(a.handle, a.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    load(a.handle, a.power_usage, "nvmlDeviceGetPowerUsage");
    load(a.handle, a.temperature, "nvmlDeviceGetTemperature");
    load(a.handle, a.p2p_status, "nvmlDeviceGetP2PStatus");
    load(a.handle, a.common_ancestor, "nvmlDeviceGetTopologyCommonAncestor");
    load(a.handle, a.pci_info, "nvmlDeviceGetPciInfo_v3");
    load(a.handle, a.nvlink_state, "nvmlDeviceGetNvLinkState");
    load(a.handle, a.nvlink_version, "nvmlDeviceGetNvLinkVersion");
    load(a.handle, a.nvlink_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
    load(a.handle, a.nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    if (!a.ok()) {
      a.why = "libnvidia-ml.so.1 lacks nvmlInit_v2/GetClockInfo";
      a.init = nullptr;
      return;
    }
    if (a.init() != NVML_SUCCESS) {
      a.why = "nvmlInit failed";
      a.init = nullptr;
    }
  });
  return a;
}

bool device(const std::string& pci, nvmlDevice_t& d) {
  const Api& a = api();
  return a.init && a.by_pci(pci.c_str(), &d) == NVML_SUCCESS;
}

}  // namespace

bool current_clocks_hz(const std::string& pci_bus_id, double& sm_hz, double& memory_hz) {
  nvmlDevice_t d;
  if (!device(pci_bus_id, d)) return false;
  unsigned sm_mhz = 0, mem_mhz = 0;
  if (api().clock(d, NVML_CLOCK_SM, &sm_mhz) != NVML_SUCCESS) return false;
  if (api().clock(d, NVML_CLOCK_MEM, &mem_mhz) != NVML_SUCCESS) return false;
  sm_hz = sm_mhz * 1e6;
  memory_hz = mem_mhz * 1e6;
  return true;
}

bool current_power(const std::string& pci_bus_id, double& watts, double& celsius) {
  nvmlDevice_t d;
  const Api& a = api();
  if (!device(pci_bus_id, d) || !a.power_usage || !a.temperature) return false;
  unsigned milliwatts = 0, degrees = 0;
  if (a.power_usage(d, &milliwatts) != NVML_SUCCESS) return false;
  if (a.temperature(d, NVML_TEMPERATURE_GPU, &degrees) != NVML_SUCCESS) return false;
  watts = milliwatts / 1000.0;
  celsius = degrees;
  return true;
}

nlohmann::json device_properties(const std::string& pci_bus_id) {
  nlohmann::json j = nlohmann::json::object();
  const Api& a = api();
  nvmlDevice_t d;
  if (!device(pci_bus_id, d)) {
    j["nvml"] = "unavailable (" + (a.why.empty() ? "no NVML device for " + pci_bus_id : a.why) + ")";
    return j;
  }
  j["nvml"] = "available";
  char version[96] = {};
  if (a.driver && a.driver(version, sizeof version) == NVML_SUCCESS) j["driver_version"] = version;
  nvmlEnableState_t current, pending;
  if (a.ecc && a.ecc(d, &current, &pending) == NVML_SUCCESS)
    j["ecc_enabled_nvml"] = current == NVML_FEATURE_ENABLED;
  unsigned v = 0;
  if (a.link_gen && a.link_gen(d, &v) == NVML_SUCCESS) j["pcie_link_generation"] = v;
  if (a.link_width && a.link_width(d, &v) == NVML_SUCCESS) j["pcie_link_width"] = v;
  if (a.max_clock && a.max_clock(d, NVML_CLOCK_SM, &v) == NVML_SUCCESS) j["max_sm_clock_hz"] = v * 1e6;
  if (a.max_clock && a.max_clock(d, NVML_CLOCK_MEM, &v) == NVML_SUCCESS)
    j["max_memory_clock_hz"] = v * 1e6;
  if (a.power_limit && a.power_limit(d, &v) == NVML_SUCCESS) j["power_limit_watts"] = v / 1000.0;
  return j;
}

namespace {

const char* topology_name(nvmlGpuTopologyLevel_t level) {  // levels 0, 10, ... 50
  static const char* names[] = {"internal",    "single_switch", "multiple_switches",
                                "host_bridge", "numa_node",     "system"};
  const unsigned i = unsigned(level) / 10;
  return i < 6 ? names[i] : "system";
}

std::string nvlink_version_name(unsigned v) {  // nvmlNvlinkVersion_t
  static const char* names[] = {"invalid", "1.0", "2.0", "2.2", "3.0", "3.1", "4.0", "5.0"};
  return v < sizeof names / sizeof names[0] ? names[v] : "nvml " + std::to_string(v);
}

const char* remote_name(nvmlIntNvLinkDeviceType_t t) {  // GPU 0, IBM NPU 1, switch 2, unknown 0xFF
  static const char* names[] = {"gpu", "ibmnpu", "switch"};
  return unsigned(t) < 3 ? names[unsigned(t)] : "unknown";
}

}  // namespace

nlohmann::json peer_link(const std::string& pci_a, const std::string& pci_b) {
  const Api& a = api();
  nvmlDevice_t da, db;
  if (!device(pci_a, da) || !device(pci_b, db))
    return {{"nvml", "unavailable (" +
                         (a.why.empty() ? "no NVML device for " + pci_a + " or " + pci_b : a.why) + ")"}};
  nlohmann::json j = {{"nvml", "available"}};
  nvmlGpuP2PStatus_t status;
  if (a.p2p_status && a.p2p_status(da, db, NVML_P2P_CAPS_INDEX_NVLINK, &status) == NVML_SUCCESS)
    j["nvlink_p2p"] = status == NVML_P2P_STATUS_OK;
  nvmlGpuTopologyLevel_t level;
  if (a.common_ancestor && a.common_ancestor(da, db, &level) == NVML_SUCCESS)
    j["common_ancestor"] = topology_name(level);
  nvmlPciInfo_t peer{};
  const bool peer_known = a.pci_info && a.pci_info(db, &peer) == NVML_SUCCESS;
  if (!a.nvlink_state) return j;
  j["nvlinks"] = nlohmann::json::array();
  for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; ++l) {
    nvmlEnableState_t active;
    if (a.nvlink_state(da, l, &active) != NVML_SUCCESS || active != NVML_FEATURE_ENABLED) continue;
    nlohmann::json link = {{"link", l}};
    unsigned v = 0;
    if (a.nvlink_version && a.nvlink_version(da, l, &v) == NVML_SUCCESS)
      link["version"] = nvlink_version_name(v);
    nvmlIntNvLinkDeviceType_t type;
    if (a.nvlink_remote_type && a.nvlink_remote_type(da, l, &type) == NVML_SUCCESS)
      link["remote"] = remote_name(type);
    nvmlPciInfo_t far{};
    if (peer_known && a.nvlink_remote_pci && a.nvlink_remote_pci(da, l, &far) == NVML_SUCCESS)
      link["to_peer"] = far.domain == peer.domain && far.bus == peer.bus && far.device == peer.device;
    j["nvlinks"].push_back(std::move(link));
  }
  return j;
}

#else  // no NVML header at build time: clocks come from CUDA's attributes

bool current_clocks_hz(const std::string&, double&, double&) { return false; }
bool current_power(const std::string&, double&, double&) { return false; }

nlohmann::json device_properties(const std::string&) {
  return {{"nvml", "unavailable (built without the NVML header)"}};
}

nlohmann::json peer_link(const std::string&, const std::string&) {
  return {{"nvml", "unavailable (built without the NVML header)"}};
}

#endif

}  // namespace rafter::gpu::nvml
