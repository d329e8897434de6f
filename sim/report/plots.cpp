#include "report/plots.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/text.hpp"
#include "common/units.hpp"
#include "report/svg.hpp"
#include "report/trace_events.hpp"

namespace trainsim {
namespace {

const char* const category_colour[category_count] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                                     "#bab0ac", "#9c755f"};
const char* const empty_colour = "#f0f0f0";  // idle time, free memory

std::string phase_colour(Phase phase) {
  switch (phase) {
  case Phase::forward: return "#4e79a7";
  case Phase::backward: return "#59a14f";
  case Phase::recompute: return "#f28e2b";
  case Phase::optimizer: return "#b07aa1";
  case Phase::weight_gradient: return "#2e6b28";
  case Phase::other: break;
  }
  return "#b6992d";
}

// Communication and offload kinds in the order the legends list them, each with its own colour
// (none shared with a phase: a colour names one thing).
const std::vector<std::pair<std::string, std::string>>& kind_colours() {
  static const std::vector<std::pair<std::string, std::string>> colours = {
      {"tp", "#e15759"},        {"cp", "#ff9da7"},        {"ep", "#f28e2b"},         {"dp", "#edc948"},
      {"emb", "#bab0ac"},       {"mirror", "#7f3c8d"},
      {"pp", "#76b7b2"},        {"h2d", "#d37295"},       {"d2h", "#d4a6c8"},        {"nvme_read", "#8cd17d"},
      {"nvme_write", "#499894"}, {"cpu_optimizer", "#9d7660"}, {"cpu", "#d7b5a6"}};
  return colours;
}

std::string comm_colour(const std::string& kind) {
  for (const auto& [name, colour] : kind_colours())
    if (name == kind)
      return colour;
  return "#79706e";
}

std::string attribute(const std::string& name, double value) { return name + "=\"" + format_double(value) + "\""; }

std::string rank_title(const std::vector<RankCoords>& coords, int rank) {
  const std::string where = coordinates_label(coords, rank);
  return "rank " + std::to_string(rank) + (where.empty() ? "" : " (" + where + ")");
}

std::string percent(double part, double whole) {
  return whole > 0 ? format_double(std::round(part / whole * 1000) / 10) + "%" : "0%";
}

constexpr double gib = 1024.0 * 1024 * 1024;

// Ticks at round numbers of `unit` bytes up to at least `highest` bytes.
std::vector<double> byte_ticks(double highest, double unit = gib) {
  std::vector<double> ticks = nice_ticks(highest / unit, 5);
  for (double& tick : ticks)
    tick *= unit;
  return ticks;
}

// The colours of the offload kinds that fill each tier: host copies, NVMe writes.
std::string tier_colour(const std::string& tier) { return comm_colour(tier == "NVMe" ? "nvme_write" : "d2h"); }

} // namespace

std::string memory_svg(const StepMetrics& metrics, const std::vector<int>& ranks, const std::vector<GpuInfo>& gpus,
                       const std::vector<RankCoords>& coords) {
  constexpr double width = 760, panel_height = 210, left = 96, right = 30, top = 34, bottom = 46;
  std::vector<int> shown;
  for (int rank : ranks)
    if (!metrics.ranks[rank].timeline.empty())
      shown.push_back(rank);
  Svg svg(width, 30 + panel_height * static_cast<double>(std::max<std::size_t>(1, shown.size())));
  std::vector<std::pair<std::string, std::string>> legend;
  for (int c = 0; c < category_count; ++c)
    legend.emplace_back(to_string(static_cast<MemCategory>(c)), category_colour[c]);
  legend.emplace_back("capacity", "#d62728");
  svg.legend(left, 18, legend);
  const double end = std::max(metrics.step_time_s, 1e-12);
  for (std::size_t panel = 0; panel < shown.size(); ++panel) {
    const int rank = shown[panel];
    const RankMetrics& data = metrics.ranks[rank];
    const double capacity = gpus[rank].hbm_capacity;
    const double peak = data.memory.gpu().peak;
    const std::vector<double> y_ticks = byte_ticks(std::max(capacity, peak));
    const double y_max = y_ticks.back();
    const double origin = 30 + panel_height * static_cast<double>(panel);
    const double plot_top = origin + top, plot_bottom = origin + panel_height - bottom;
    const Scale x{0, end, left, width - right};
    const Scale y{0, y_max, plot_bottom, plot_top};
    svg.open_group("class=\"panel\" data-rank=\"" + std::to_string(rank) + "\" " + attribute("data-peak-bytes", peak) +
                   " " + attribute("data-end-s", end) + " " + attribute("data-y-max", y_max) + " " +
                   attribute("data-plot-top", plot_top) + " " + attribute("data-plot-bottom", plot_bottom));
    svg.text(left, origin + 20, rank_title(coords, rank) + " on " + gpus[rank].host + ": peak " + format_bytes(peak) +
                                    " of " + format_bytes(capacity), "font-weight=\"bold\"");
    // Stacked step functions: each category's band lies on the sum of the ones before it. Two
    // points per pixel column are enough: the column's fullest, so that the peak stays drawn, then
    // at the column's end its last, what holds until the next column.
    std::vector<MemoryPoint> timeline;
    const double seconds_per_pixel = end / (x(end) - x(0));
    const auto close_column = [&](const MemoryPoint& last, double next_time) {
      if (!timeline.empty() && last.gpu != timeline.back().gpu) {
        const double column_end = (std::floor(x(timeline.back().time)) + 1 - x(0)) * seconds_per_pixel;
        timeline.push_back(last);
        timeline.back().time = std::min(next_time, column_end);
      }
    };
    MemoryPoint last;
    for (const MemoryPoint& point : data.timeline) {
      if (!timeline.empty() && std::floor(x(point.time)) == std::floor(x(timeline.back().time))) {
        if (sum(point.gpu) > sum(timeline.back().gpu))
          timeline.back().gpu = point.gpu;
        last = point;
        continue;
      }
      close_column(last, point.time);
      timeline.push_back(point);
      last = point;
    }
    close_column(last, end);
    std::vector<double> below(timeline.size(), 0.0);
    for (int c = 0; c < category_count; ++c) {
      std::vector<double> upper, lower;
      bool any = false;
      for (std::size_t i = 0; i < timeline.size(); ++i) {
        const double t0 = timeline[i].time;
        const double t1 = i + 1 < timeline.size() ? timeline[i + 1].time : end;
        const double bottom_value = below[i], top_value = below[i] + timeline[i].gpu[c];
        any = any || timeline[i].gpu[c] > 0;
        upper.insert(upper.end(), {x(t0), y(top_value), x(t1), y(top_value)});
        lower.insert(lower.end(), {x(t0), y(bottom_value), x(t1), y(bottom_value)});
        below[i] = top_value;
      }
      if (!any)
        continue;
      // The outline runs along the top left to right, then back along the bottom.
      for (std::size_t k = lower.size(); k >= 2; k -= 2)
        upper.insert(upper.end(), {lower[k - 2], lower[k - 1]});
      svg.polygon(upper, category_colour[c], "class=\"band\" data-category=\"" +
                                                 std::string(to_string(static_cast<MemCategory>(c))) + "\"");
    }
    svg.line(x(0), y(capacity), x(end), y(capacity), "#d62728", "stroke-dasharray=\"6 4\" class=\"capacity\"");
    const double peak_x = x(std::min(data.memory.gpu().peak_time, end));
    svg.line(peak_x, y(peak), peak_x, plot_bottom, "#222", "stroke-dasharray=\"2 3\" class=\"peak\"");
    svg.text(std::min(peak_x + 4, width - right - 120), y(peak) - 4, "peak " + format_bytes(peak));
    svg.x_axis(x, plot_bottom, nice_ticks(end, 8), seconds_label, "simulated time");
    svg.y_axis(y, left, y_ticks, gib_label, "GPU memory");
    svg.close_group();
  }
  if (shown.empty())
    svg.text(left, 60, "no memory timeline was kept for these ranks");
  return svg.str();
}

std::string node_memory_svg(const StepMetrics& metrics, const std::vector<GpuInfo>& gpus) {
  constexpr double width = 760, panel_height = 190, left = 96, right = 30, top = 34, bottom = 46;
  constexpr std::size_t most_nodes = 4;
  // The fullest node first (the one the summary names, when it has a timeline), then the others
  // in rank order.
  std::vector<std::string> nodes;
  const auto add = [&](const std::string& node) {
    if (metrics.node_timelines.count(node) && std::find(nodes.begin(), nodes.end(), node) == nodes.end())
      nodes.push_back(node);
  };
  for (const NodeTier* tier : {&metrics.memory.host, &metrics.memory.nvme})
    if (tier->used)
      add(tier->node);
  for (const GpuInfo& gpu : gpus)
    add(gpu.node);
  const std::size_t node_count = nodes.size();
  nodes.resize(std::min(nodes.size(), most_nodes));
  struct Panel {
    std::string node, tier;
    double NodeMemoryPoint::*bytes;
    double capacity;
    double peak = 0;
    // The panel spans its peak, and its capacity too unless that is more than four times the
    // peak (a few GiB on a drive of many TiB would not show): the title gives it then.
    bool capacity_drawn() const { return capacity > 0 && capacity <= 4 * peak; }
  };
  std::vector<Panel> panels;
  for (const std::string& node : nodes) {
    const auto gpu = std::find_if(gpus.begin(), gpus.end(), [&](const GpuInfo& g) { return g.node == node; });
    for (Panel panel : {Panel{node, "host memory", &NodeMemoryPoint::host, gpu->host_memory_capacity},
                        Panel{node, "NVMe", &NodeMemoryPoint::nvme, gpu->nvme_capacity}}) {
      for (const NodeMemoryPoint& point : metrics.node_timelines.at(node))
        panel.peak = std::max(panel.peak, point.*panel.bytes);
      if (panel.peak > 0)
        panels.push_back(panel);
    }
  }
  if (panels.empty())
    return "";
  Svg svg(width, 30 + panel_height * static_cast<double>(panels.size()));
  std::vector<std::pair<std::string, std::string>> legend;
  for (const char* tier : {"host memory", "NVMe"})
    if (std::any_of(panels.begin(), panels.end(), [&](const Panel& panel) { return panel.tier == tier; }))
      legend.emplace_back(std::string(tier) + " in use (the node's GPUs together)", tier_colour(tier));
  if (std::any_of(panels.begin(), panels.end(), [](const Panel& panel) { return panel.capacity_drawn(); }))
    legend.emplace_back("capacity", "#d62728");
  // The panels start below the legend, which wraps on a narrow canvas, and the note of nodes left out.
  double panels_top = svg.legend(left, 18, legend) + 12;
  if (node_count > nodes.size()) {
    svg.text(left, panels_top + 4, "the first " + std::to_string(nodes.size()) + " of " + std::to_string(node_count) +
                                       " nodes with a timeline");
    panels_top += 16;
  }
  svg.set_height(panels_top + panel_height * static_cast<double>(panels.size()));
  const double end = std::max(metrics.step_time_s, 1e-12);
  for (std::size_t index = 0; index < panels.size(); ++index) {
    const Panel& panel = panels[index];
    const std::vector<NodeMemoryPoint>& points = metrics.node_timelines.at(panel.node);
    const double peak = panel.peak;
    const double highest = panel.capacity_drawn() ? std::max(panel.capacity, peak) : peak;
    // In the unit that reads best: drives of several TiB in TiB, less than a GiB in MiB.
    const double unit = highest >= 2 * 1024 * gib ? 1024 * gib : highest >= gib ? gib : gib / 1024;
    const std::vector<double> y_ticks = byte_ticks(highest, unit);
    const double origin = panels_top + panel_height * static_cast<double>(index);
    const double plot_top = origin + top, plot_bottom = origin + panel_height - bottom;
    const Scale x{0, end, left, width - right};
    const Scale y{0, y_ticks.back(), plot_bottom, plot_top};
    svg.open_group("class=\"node-panel\" data-node=\"" + xml_escape(panel.node) + "\" data-tier=\"" +
                   (panel.tier == "NVMe" ? "nvme" : "host") + "\" " + attribute("data-peak-bytes", peak) + " " +
                   attribute("data-capacity-bytes", panel.capacity) + " " + attribute("data-y-max", y_ticks.back()) +
                   " " + attribute("data-plot-top", plot_top) + " " + attribute("data-plot-bottom", plot_bottom));
    svg.text(left, origin + 20, panel.tier + " of " + panel.node + ": peak " + format_bytes(peak) +
                                    (panel.capacity > 0 ? " of " + format_bytes(panel.capacity) : ""),
             "font-weight=\"bold\"");
    // A step function: each value holds until the next point; the area under it filled. The
    // points of one pixel column are drawn as one: up to their fullest, which stays drawn, and
    // back to the last of them within the column.
    struct Column {
      double x, fullest, last;
    };
    std::vector<Column> columns;
    for (const NodeMemoryPoint& point : points) {
      const double bytes = point.*panel.bytes;
      if (!columns.empty() && std::floor(columns.back().x) == std::floor(x(point.time))) {
        columns.back().fullest = std::max(columns.back().fullest, bytes);
        columns.back().last = bytes;
      } else {
        columns.push_back({x(point.time), bytes, bytes});
      }
    }
    std::vector<double> outline{x(0), y(0)};
    double previous = 0;
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const Column& column = columns[c];
      outline.insert(outline.end(), {column.x, y(previous), column.x, y(column.fullest)});
      if (column.last != column.fullest) {
        const double column_end =
            std::min(std::floor(column.x) + 1, c + 1 < columns.size() ? columns[c + 1].x : x(end));
        outline.insert(outline.end(), {column_end, y(column.fullest), column_end, y(column.last)});
      }
      previous = column.last;
    }
    outline.insert(outline.end(), {x(end), y(previous), x(end), y(0)});
    svg.polygon(outline, tier_colour(panel.tier), "class=\"in-use\"");
    if (panel.capacity_drawn())
      svg.line(x(0), y(panel.capacity), x(end), y(panel.capacity), "#d62728",
               "stroke-dasharray=\"6 4\" class=\"capacity\"");
    svg.x_axis(x, plot_bottom, nice_ticks(end, 8), seconds_label, "simulated time");
    svg.y_axis(y, left, y_ticks, unit > gib ? tib_label : unit < gib ? mib_label : gib_label, panel.tier);
    svg.close_group();
  }
  return svg.str();
}

std::string pipeline_svg(const Workload& workload, const SpanRecorder& spans, const StepMetrics& metrics,
                         const std::vector<RankCoords>& coords) {
  constexpr double width = 960, right = 30, row_height = 30, kernel_height = 18, label_gap = 6;
  // The chart starts where the widest row label ends ("rank 999 (dp999 tp0 pp0 cp0)" needs more
  // than the usual 190 px).
  double left = 190;
  for (int rank : spans.ranks())
    left = std::max(left, text_width(rank_title(coords, rank)) + 2 * label_gap);
  const double end = std::max(metrics.step_time_s, 1e-12);
  const Scale x{0, end, left, width - right};
  // Consecutive kernels of one micro-batch, chunk and phase form one block, unless a gap
  // between them would show (a pixel or more). The CPU's optimizer step is the rank's optimizer
  // phase: it is drawn in the kernel band (kind "cpu_optimizer"), under any GPU kernel at the same
  // time, so that the band shows what the breakdown counts; transfers go in a strip below.
  const double invisible_gap = end / (width - left - right);
  struct Block {
    double start, end;
    Phase phase;
    long long micro_batch, chunk;
    std::string kind;  // empty for a GPU kernel
  };
  struct Row {
    int rank;
    std::vector<Block> kernels, transfers;
  };
  std::vector<Row> rows;
  std::set<std::string> drawn;  // legend names of what the rows draw
  for (std::size_t row = 0; row < spans.ranks().size(); ++row) {
    const int rank = spans.ranks()[row];
    const Program& program = workload.program(rank);
    Row& drawing = rows.emplace_back(Row{rank, {}, {}});
    std::vector<Span> ordered = spans.spans(row);
    std::sort(ordered.begin(), ordered.end(),
              [](const Span& a, const Span& b) { return a.start != b.start ? a.start < b.start : a.op < b.op; });
    for (const Span& span : ordered) {
      const Op& op = program.ops[span.op];
      if (op.kind == OpKind::alloc || op.kind == OpKind::free || op.kind == OpKind::recv || span.end <= span.start)
        continue;
      const std::string kind = comm_kind(op, workload, static_cast<std::size_t>(rank));
      if (op.kind == OpKind::compute && (op.target.empty() || kind == "cpu_optimizer")) {
        std::vector<Block>& kernels = drawing.kernels;
        if (!kernels.empty() && kernels.back().phase == op.phase && kernels.back().kind == kind &&
            kernels.back().micro_batch == op.place.micro_batch && kernels.back().chunk == op.place.chunk &&
            span.start - kernels.back().end < invisible_gap)
          kernels.back().end = std::max(kernels.back().end, span.end);
        else
          kernels.push_back({span.start, span.end, op.phase, op.place.micro_batch, op.place.chunk, kind});
        drawn.insert(kind.empty() ? to_string(op.phase) : kind);
        continue;
      }
      std::vector<Block>& transfers = drawing.transfers;
      if (!transfers.empty() && transfers.back().kind == kind && span.start - transfers.back().end < invisible_gap)
        transfers.back().end = std::max(transfers.back().end, span.end);
      else
        transfers.push_back({span.start, span.end, Phase::other, -1, -1, kind});
      drawn.insert(kind);
    }
    // GPU kernels last, over the CPU's step where both run.
    std::stable_partition(drawing.kernels.begin(), drawing.kernels.end(),
                          [](const Block& block) { return !block.kind.empty(); });
  }

  // The legend lists what is drawn: phases, the CPU's step, kinds in their usual order, any other.
  std::vector<std::pair<std::string, std::string>> legend;
  for (Phase phase :
       {Phase::forward, Phase::backward, Phase::weight_gradient, Phase::recompute, Phase::optimizer, Phase::other})
    if (drawn.erase(to_string(phase)))
      legend.emplace_back(to_string(phase), phase_colour(phase));
  if (drawn.erase("cpu_optimizer"))
    legend.emplace_back("optimizer on CPU", comm_colour("cpu_optimizer"));
  for (const auto& [kind, colour] : kind_colours())
    if (drawn.erase(kind))
      legend.emplace_back(kind, colour);
  for (const std::string& kind : drawn)
    legend.emplace_back(kind, comm_colour(kind));
  legend.emplace_back("idle", empty_colour);

  Svg svg(width, 0);
  // The rows over [from, to) on `scale` from `top`: kernels in the band, transfers in the strip
  // below, each block cut to the window.
  const auto draw_rows = [&](const Scale& scale, double from, double to, double top, const std::string& row_class) {
    for (std::size_t row = 0; row < rows.size(); ++row) {
      const int rank = rows[row].rank;
      const double y = top + row_height * static_cast<double>(row);
      svg.open_group("class=\"" + row_class + "\" data-rank=\"" + std::to_string(rank) + "\"", rank_title(coords, rank));
      svg.text(left - label_gap, y + 14, rank_title(coords, rank), "text-anchor=\"end\"");
      svg.rect(scale(from), y, scale(to) - scale(from), kernel_height, empty_colour);
      for (const Block& block : rows[row].kernels) {
        if (block.end <= from || block.start >= to)
          continue;
        const double x0 = scale(std::max(block.start, from)), w = std::max(0.5, scale(std::min(block.end, to)) - x0);
        svg.rect(x0, y, w, kernel_height, block.kind.empty() ? phase_colour(block.phase) : comm_colour(block.kind));
        if (block.kind.empty() && block.micro_batch >= 0 && w >= text_width(std::to_string(block.micro_batch), 10) + 4)
          svg.text(x0 + w / 2, y + 13, std::to_string(block.micro_batch),
                   "text-anchor=\"middle\" fill=\"#fff\" font-size=\"10\"");
      }
      for (const Block& block : rows[row].transfers) {
        if (block.end <= from || block.start >= to)
          continue;
        const double x0 = scale(std::max(block.start, from));
        svg.rect(x0, y + kernel_height + 1, std::max(0.5, scale(std::min(block.end, to)) - x0), 6, comm_colour(block.kind));
      }
      svg.close_group();
    }
  };
  const double top = svg.legend(left, 18, legend) + 22;
  svg.open_group("class=\"chart\" " + attribute("data-end-s", end) + " " + attribute("data-x-left", x(0)) + " " +
                 attribute("data-x-right", x(end)) + " " + attribute("data-top", top) + " " +
                 attribute("data-row-height", row_height) + " " + attribute("data-kernel-height", kernel_height));
  draw_rows(x, 0, end, top, "row");
  svg.close_group();
  double axis_y = top + row_height * static_cast<double>(rows.size());
  svg.x_axis(x, axis_y, nice_ticks(end, 10), seconds_label, "simulated time");
  // Past 32 micro-batches a block is a few pixels wide: the steady state's middle, some eight
  // micro-batches long, is drawn again below, zoomed.
  long long micro_batches = 0;
  for (const Row& row : rows)
    for (const Block& block : row.kernels)
      micro_batches = std::max(micro_batches, block.micro_batch + 1);
  if (micro_batches >= 32) {
    const double window = end * 8.0 / static_cast<double>(micro_batches);
    const double from = end / 2 - window / 2, to = end / 2 + window / 2;
    const Scale zoom{from, to, left, width - right};
    const double zoom_top = axis_y + 70;
    svg.text(left, zoom_top - 12,
             "the steady state, " + format_seconds(from) + " to " + format_seconds(to) + " (" +
                 format_double(std::round(end / window * 10) / 10) + "x zoom)",
             "font-weight=\"bold\"");
    svg.open_group("class=\"zoom\" " + attribute("data-from-s", from) + " " + attribute("data-to-s", to));
    draw_rows(zoom, from, to, zoom_top, "zoom-row");
    svg.close_group();
    axis_y = zoom_top + row_height * static_cast<double>(rows.size());
    // Round times within the window, as far apart as the window's own nice ticks.
    const std::vector<double> spacing = nice_ticks(window, 8);
    const double step = spacing.size() > 1 ? spacing[1] - spacing[0] : window;
    std::vector<double> ticks;
    for (double tick = std::ceil(from / step) * step; tick <= to; tick += step)
      ticks.push_back(tick);
    svg.x_axis(zoom, axis_y, ticks, seconds_label, "simulated time");
  }
  svg.set_height(axis_y + 44);
  return svg.str();
}

std::string breakdown_svg(const StepMetrics& metrics) {
  constexpr double width = 860, left = 20, bar_width = 820, bar_height = 28, legend_to_next_bar = 64;
  const auto tiers = node_tiers(metrics.memory);
  Svg svg(width, 0);
  // Each bar with its title above and its legend below; returns the y of the legend's last line.
  // Legends give each part's amount beside its name; the bar its share.
  const auto bar = [&](double y, const std::string& title,
                       const std::vector<std::tuple<std::string, double, std::string>>& parts, double total,
                       const std::string& group, std::string (*amount)(double)) {
    svg.text(left, y - 8, title, "font-weight=\"bold\"");
    svg.open_group("class=\"" + group + "\" " + attribute("data-total", total));
    const Scale x{0, total, left, left + bar_width};
    double at = 0;
    std::vector<std::pair<std::string, std::string>> legend;
    for (const auto& [name, value, colour] : parts) {
      if (value <= 0)
        continue;
      const double x0 = x(at), w = x(at + value) - x0;
      svg.rect(x0, y, w, bar_height, colour, "data-part=\"" + xml_escape(name) + "\" " + attribute("data-value", value));
      const std::string share = percent(value, total);
      if (w > text_width(share) + 6)
        svg.text(x0 + w / 2, y + 18, share,
                 std::string("text-anchor=\"middle\" fill=\"") + (colour == empty_colour ? "#222" : "#fff") + "\"");
      legend.emplace_back(name + " " + amount(value), colour);
      at += value;
    }
    svg.rect(x(0), y, x(total) - x(0), bar_height, "none", "stroke=\"#333\"");
    svg.close_group();
    return svg.legend(left, y + bar_height + 18, legend);
  };
  const RankMetrics& critical = metrics.ranks[metrics.critical_rank];
  const StepBreakdown& b = critical.breakdown;
  std::vector<std::tuple<std::string, double, std::string>> time_parts = {
      {"compute", b.compute_s, phase_colour(Phase::forward)},
      {"recompute", b.recompute_s, phase_colour(Phase::recompute)},
      {"optimizer", b.optimizer_s, phase_colour(Phase::optimizer)}};
  for (const auto& [kind, seconds] : b.exposed_comm_s)
    time_parts.emplace_back("exposed " + kind, seconds, comm_colour(kind));
  for (const auto& [rank, seconds] : b.waiting_s)
    time_parts.emplace_back("waiting for rank " + std::to_string(rank), seconds, "#8c8c8c");
  time_parts.emplace_back("idle (bubble)", b.bubble_s, "#c7c7c7");
  double y = bar(40, "step time " + format_seconds(metrics.step_time_s) + " on rank " + std::to_string(critical.rank) +
                        " (the last to finish)",
                 time_parts, metrics.step_time_s, "time-bar", format_seconds);

  const RankMetrics& peak_rank = metrics.ranks[metrics.memory.peak_rank];
  const DeviceMemory& gpu = peak_rank.memory.gpu();
  std::vector<std::tuple<std::string, double, std::string>> memory_parts;
  for (int c = 0; c < category_count; ++c)
    memory_parts.emplace_back(to_string(static_cast<MemCategory>(c)), gpu.at_peak[c], category_colour[c]);
  const double capacity = metrics.memory.capacity_bytes;
  memory_parts.emplace_back("free", std::max(0.0, capacity - gpu.peak), empty_colour);
  y = bar(y + legend_to_next_bar,
          "memory at peak on rank " + std::to_string(peak_rank.rank) + ": " + format_bytes(gpu.peak) + " of " +
              format_bytes(capacity),
          memory_parts, std::max(capacity, gpu.peak), "memory-bar", format_bytes);
  // Offload tiers are shared by a node's GPUs: the fullest node's.
  for (const auto& [tier, name] : tiers) {
    if (!tier->used)
      continue;
    y = bar(y + legend_to_next_bar,
            name + " on " + tier->node + ": " + format_bytes(tier->peak_bytes) + " of " +
                format_bytes(tier->capacity_bytes),
            {{"offloaded", tier->peak_bytes, "#a0cbe8"},
             {"free", std::max(0.0, tier->capacity_bytes - tier->peak_bytes), empty_colour}},
            std::max(tier->capacity_bytes, tier->peak_bytes), name == "NVMe" ? "nvme-bar" : "host-bar", format_bytes);
  }
  svg.set_height(y + 30);
  return svg.str();
}

std::string report_html(const ReportPage& page) {
  std::string html =
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<title>trainsim: " + xml_escape(page.title) + "</title>\n"
      "<style>body{font-family:sans-serif;margin:24px;max-width:1000px;color:#222}"
      "table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:left}"
      ".bottleneck{font-size:1.15em;background:#fff4e0;padding:8px 12px;border-left:4px solid #f28e2b}"
      "h2{margin-top:28px}</style>\n</head>\n<body>\n"
      "<h1>trainsim: " + xml_escape(page.title) + "</h1>\n"
      "<p class=\"bottleneck\">" + xml_escape(page.bottleneck) + "</p>\n<table class=\"summary\">\n";
  for (const auto& [name, value] : page.facts)
    html += "<tr><th>" + xml_escape(name) + "</th><td>" + xml_escape(value) + "</td></tr>\n";
  html += "</table>\n<h2>Where the step time goes</h2>\n" + page.breakdown_svg;
  for (const ReportTable& table : page.tables) {
    html += "<h2>" + xml_escape(table.title) + "</h2>\n<table class=\"" + xml_escape(table.name) + "\">\n<tr>";
    for (const std::string& cell : table.header)
      html += "<th>" + xml_escape(cell) + "</th>";
    html += "</tr>\n";
    for (const auto& row : table.rows) {
      html += "<tr>";
      for (const std::string& cell : row)
        html += "<td>" + xml_escape(cell) + "</td>";
      html += "</tr>\n";
    }
    html += "</table>\n";
    if (!table.note.empty())
      html += "<p>" + xml_escape(table.note) + "</p>\n";
  }
  html += "<h2>Pipeline</h2>\n" + page.pipeline_svg + "<h2>Memory over the step</h2>\n" + page.memory_svg;
  if (!page.node_memory_svg.empty())
    html += "<h2>Host memory and NVMe over the step</h2>\n" + page.node_memory_svg;
  html += "</body>\n</html>\n";
  return html;
}

} // namespace trainsim
