#include "report/trace_events.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "common/text.hpp"
#include "report/svg.hpp"

namespace trainsim {
namespace {

// JSON string contents: the names trainsim writes are plain, but a hand-written trace's are not.
std::string json_text(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else if (static_cast<unsigned char>(c) < 0x20)
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string micros(double seconds) { return format_double(seconds * 1e6); }

std::string slice_category(const Op& op, const Workload& workload, int rank) {
  if (op.kind == OpKind::compute && op.target.empty())
    return op.phase == Phase::other ? "compute" : to_string(op.phase);
  return comm_kind(op, workload, static_cast<std::size_t>(rank));
}

} // namespace

std::string coordinates_label(const std::vector<RankCoords>& coords, int rank) {
  if (coords.empty())
    return "";
  const RankCoords& c = coords[rank];
  return "dp" + std::to_string(c.dp) + " tp" + std::to_string(c.tp) + " pp" + std::to_string(c.pp) + " cp" +
         std::to_string(c.cp);
}

std::string chrome_trace(const Workload& workload, const std::vector<GpuInfo>& gpus,
                         const std::vector<RankCoords>& coords, const SpanRecorder& spans, const StepMetrics& metrics) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  const auto event = [&](const std::string& body) {
    out += (first ? "" : ",\n") + std::string("{") + body + "}";
    first = false;
  };
  std::vector<bool> recorded(workload.ranks(), false);
  for (int rank : spans.ranks())
    recorded[rank] = true;

  // Sends and receives pair in program order per (source, destination, tag), as the replay's
  // mailboxes match them: the k-th send meets the k-th receive.
  using Key = std::tuple<int, int, int>;
  std::map<Key, std::vector<std::pair<int, const Span*>>> sends, receives;
  for (std::size_t i = 0; i < spans.ranks().size(); ++i) {
    const int rank = spans.ranks()[i];
    const Program& program = workload.program(rank);
    for (const Span& span : spans.spans(i)) {
      const Op& op = program.ops[span.op];
      const int peer = workload.peer_of(rank, op.peer);
      if (op.kind == OpKind::send && recorded[peer])
        sends[{rank, peer, op.tag}].push_back({rank, &span});
      else if (op.kind == OpKind::recv && recorded[peer])
        receives[{peer, rank, op.tag}].push_back({rank, &span});
    }
  }

  for (std::size_t i = 0; i < spans.ranks().size(); ++i) {
    const int rank = spans.ranks()[i];
    const std::string pid = std::to_string(rank);
    const std::string where = coordinates_label(coords, rank);
    event("\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"name\":\"rank " + pid +
          (where.empty() ? "" : " (" + where + ")") + " on " + json_text(gpus[rank].host) + "\"}");
    event("\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"sort_index\":" + pid +
          "}");
    const Program& program = workload.program(rank);
    std::vector<bool> stream_seen(stream_count, false);
    for (const Span& span : spans.spans(i)) {
      const Op& op = program.ops[span.op];
      if (op.kind == OpKind::alloc || op.kind == OpKind::free)
        continue;  // instants: the memory counter shows them
      const int tid = static_cast<int>(op.stream) + 1;
      if (!stream_seen[tid - 1]) {
        stream_seen[tid - 1] = true;
        event("\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + std::to_string(tid) +
              ",\"args\":{\"name\":\"" + to_string(op.stream) + "\"}");
      }
      std::string args = "\"bytes\":" + format_double(op.bytes);
      if (op.kind == OpKind::compute)
        args += ",\"flops\":" + format_double(op.flops);
      if (op.place.layer != OpPlace::none)
        args += ",\"layer\":" + std::to_string(op.place.layer);
      if (op.place.micro_batch != OpPlace::none)
        args += ",\"micro_batch\":" + std::to_string(op.place.micro_batch);
      if (op.place.chunk != OpPlace::none)
        args += ",\"chunk\":" + std::to_string(op.place.chunk);
      if (span.algorithm != CommAlgorithm::automatic)
        args += std::string(",\"algorithm\":\"") + to_string(span.algorithm) + "\",\"protocol\":\"" +
                to_string(span.protocol) + "\"";
      event("\"ph\":\"X\",\"name\":\"" + json_text(op.name.empty() ? to_string(op.kind) : op.name) + "\",\"cat\":\"" +
            json_text(slice_category(op, workload, rank)) + "\",\"pid\":" + pid + ",\"tid\":" + std::to_string(tid) +
            ",\"ts\":" + micros(span.start) + ",\"dur\":" + micros(span.end - span.start) + ",\"args\":{" + args + "}");
    }
    const std::vector<MemoryPoint>& timeline = metrics.ranks[rank].timeline;
    const bool offloads = std::any_of(timeline.begin(), timeline.end(),
                                      [](const MemoryPoint& point) { return point.host > 0 || point.nvme > 0; });
    for (const MemoryPoint& point : timeline) {
      std::string args;
      for (int c = 0; c < category_count; ++c)
        args += std::string(c ? "," : "") + "\"" + to_string(static_cast<MemCategory>(c)) +
                "\":" + format_double(point.gpu[c]);
      event("\"ph\":\"C\",\"name\":\"GPU memory (bytes)\",\"pid\":" + pid + ",\"tid\":0,\"ts\":" + micros(point.time) +
            ",\"args\":{" + args + "}");
      if (offloads)
        event("\"ph\":\"C\",\"name\":\"offloaded memory (bytes)\",\"pid\":" + pid + ",\"tid\":0,\"ts\":" +
              micros(point.time) + ",\"args\":{\"host\":" + format_double(point.host) +
              ",\"nvme\":" + format_double(point.nvme) + "}");
    }
  }

  long long flow = 0;
  for (const auto& [key, from] : sends) {
    const auto found = receives.find(key);
    if (found == receives.end())
      continue;
    const auto& to = found->second;
    const Program& sender = workload.program(std::get<0>(key));
    for (std::size_t k = 0; k < from.size() && k < to.size(); ++k) {
      const Span& send = *from[k].second;
      const Span& receive = *to[k].second;
      const Op& op = sender.ops[send.op];
      const std::string id = std::to_string(flow++);
      const std::string tid = std::to_string(static_cast<int>(op.stream) + 1);
      const std::string receiver_tid =
          std::to_string(static_cast<int>(workload.program(to[k].first).ops[receive.op].stream) + 1);
      event("\"ph\":\"s\",\"name\":\"" + json_text(op.name) + "\",\"cat\":\"pp\",\"id\":" + id + ",\"pid\":" +
            std::to_string(from[k].first) + ",\"tid\":" + tid + ",\"ts\":" + micros(send.start));
      event("\"ph\":\"f\",\"bp\":\"e\",\"name\":\"" + json_text(op.name) + "\",\"cat\":\"pp\",\"id\":" + id +
            ",\"pid\":" + std::to_string(to[k].first) + ",\"tid\":" + receiver_tid + ",\"ts\":" +
            micros(std::min(receive.end, std::max(receive.start, send.start))));
    }
  }
  out += "\n]}\n";
  return out;
}

} // namespace trainsim
