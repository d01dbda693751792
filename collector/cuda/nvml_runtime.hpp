// NVML opened at run time (dlopen of libnvidia-ml.so.1), so that rafter needs no NVML library at
// link time and runs on machines without one. Only the header's types are used at build time
// (RAFTER_HAVE_NVML_HEADER); without the header every query answers "unavailable".
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace rafter::gpu::nvml {

// Current clocks of the GPU with this PCI bus id ("0000:3B:00.0"), in Hz; false when NVML or the
// device is not available.
bool current_clocks_hz(const std::string& pci_bus_id, double& sm_hz, double& memory_hz);

// Board power draw in watts and GPU temperature in degrees Celsius; false when NVML or the device
// is not available.
bool current_power(const std::string& pci_bus_id, double& watts, double& celsius);

// Driver version, ECC, PCIe link, maximum clocks and power limit, or {"nvml": "unavailable (why)"}.
nlohmann::json device_properties(const std::string& pci_bus_id);

// How GPU a reaches GPU b, as NVML reports it: {"nvml": "available", "nvlink_p2p": NVML's P2P
// status over NVLink is OK, "common_ancestor": the PCIe topology level joining them ("internal",
// "single_switch", "multiple_switches", "host_bridge", "numa_node", "system"), "nvlinks": one entry
// per active NVLink of a: {"version": "4.0", "remote": "gpu" | "switch" | "ibmnpu" | "unknown",
// "to_peer": its far end is b}}, or {"nvml": "unavailable (why)"}. Fields NVML cannot answer are
// left out.
nlohmann::json peer_link(const std::string& pci_a, const std::string& pci_b);

}  // namespace rafter::gpu::nvml
