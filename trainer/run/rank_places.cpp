#include "trainer/run/rank_places.h"

#include <cstdlib>

#include "trainer/run/backend.h"

namespace gpt {

std::vector<RankPlace> gather_rank_places(Comm& comm, const std::string& backend, int threads, int local_rank) {
  // Fixed-size text records, one per rank: host, tab, device description.
  static constexpr int64_t kRecord = 256;
  const Device device = backend_device(backend);
  std::string mine = describe_environment(backend, threads).hostname + '\t' + device_description(device);
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr && device == Device::cuda)
    mine += std::string(" CUDA_VISIBLE_DEVICES=") + visible;
  if (device == Device::cuda) mine += " local_rank=" + std::to_string(local_rank);
  mine.resize(kRecord, '\0');
  const std::vector<double> codes(mine.begin(), mine.end());
  Tensor local = Tensor::from_doubles(codes, {kRecord}, DType::f32, device);  // character codes, exact in f32
  Tensor all = Tensor::zeros({kRecord * comm.world_size()}, DType::f32, device);
  comm.all_gather(local, all);
  const std::vector<double> gathered = all.to_doubles();
  std::vector<RankPlace> places;
  for (int q = 0; q < comm.world_size(); ++q) {
    std::string text;
    for (int64_t i = 0; i < kRecord; ++i) {
      const char c = static_cast<char>(gathered[static_cast<size_t>(q * kRecord + i)]);
      if (c == '\0') break;
      text += c;
    }
    const size_t tab = text.find('\t');
    places.push_back({q, text.substr(0, tab), tab == std::string::npos ? "" : text.substr(tab + 1)});
  }
  return places;
}

}  // namespace gpt
