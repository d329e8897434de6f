#include "program/trace_io.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"

namespace fs = std::filesystem;

namespace trainsim {
namespace {

// Version 2 gives an op's place (layer, micro-batch, chunk) as fields; version 1 traces, read
// still, gave it only in the op's name.
constexpr int format_version = 3;
constexpr int oldest_version = 1;
constexpr std::size_t max_ops_per_program = 50'000'000;

Stream default_stream(OpKind kind) {
  switch (kind) {
  case OpKind::collective: return Stream::dp_comm;
  case OpKind::send:
  case OpKind::recv: return Stream::pp_comm;
  case OpKind::copy: return Stream::copy;
  case OpKind::read: return Stream::io_read;
  case OpKind::write: return Stream::io_write;
  default: return Stream::compute;
  }
}

// Slots are written as what they are on `rank`: every rank of a program file binds them alike.
void write_op(std::ostream& out, OpId id, const Op& op, const Workload& workload, std::size_t rank) {
  out << id << ' ' << to_string(op.kind);
  if (op.stream != default_stream(op.kind))
    out << " stream=" << to_string(op.stream);
  if (!op.name.empty())
    out << " name=" << op.name;
  if (op.place.layer != OpPlace::none)
    out << " layer=" << op.place.layer;
  if (op.place.micro_batch != OpPlace::none)
    out << " micro_batch=" << op.place.micro_batch;
  if (op.place.chunk != OpPlace::none)
    out << " chunk=" << op.place.chunk;
  switch (op.kind) {
  case OpKind::compute:
    out << " flops=" << format_double(op.flops) << " bytes=" << format_double(op.bytes);
    if (op.kernel_set >= 0)
      out << " kernels=" << op.kernel_set;
    if (op.phase != Phase::other)
      out << " phase=" << to_string(op.phase);
    if (!op.target.empty())
      out << " host=" << op.target;
    break;
  case OpKind::collective:
    out << " op=" << to_string(op.collective) << " group=" << workload.groups[workload.group_of(rank, op.group)].name << " bytes=" << format_double(op.bytes);
    if (op.collective == Collective::all_to_all && op.peer >= 0)
      out << " split=" << op.peer;
    break;
  case OpKind::send:
  case OpKind::recv:
    out << " peer=" << workload.peer_of(rank, op.peer) << " bytes=" << format_double(op.bytes);
    if (op.tag != 0)
      out << " tag=" << op.tag;
    break;
  case OpKind::copy:
    out << (op.inbound ? " source=" : " target=") << op.target << " bytes=" << format_double(op.bytes);
    break;
  case OpKind::read:
  case OpKind::write:
    out << " target=" << op.target << " bytes=" << format_double(op.bytes);
    break;
  case OpKind::alloc:
    out << " tensor=" << op.tensor << " category=" << to_string(op.category) << " device=" << to_string(op.device)
        << " bytes=" << format_double(op.bytes);
    break;
  case OpKind::free:
    out << " tensor=" << op.tensor;
    break;
  }
  if (!op.deps.empty()) {
    out << " deps=";
    for (std::size_t i = 0; i < op.deps.size(); ++i)
      out << (i ? "," : "") << op.deps[i];
  }
  out << '\n';
}

// The number after `prefix` in `part` ("mb" in "mb12"), if it fits in T; else none.
template <typename T>
T number_after(const std::string& part, std::size_t prefix) {
  constexpr std::size_t max_digits = std::numeric_limits<T>::digits10;  // any number of them fits
  if (part.size() <= prefix || part.size() > prefix + max_digits)
    return OpPlace::none;
  for (std::size_t i = prefix; i < part.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(part[i])))
      return OpPlace::none;
  return static_cast<T>(std::stol(part.substr(prefix)));
}

// The value of `choices` whose name (to_string) is `name`; else `fail` with the names accepted.
template <typename Enum, std::size_t N, typename Fail>
Enum named_choice(const Enum (&choices)[N], const std::string& key, const std::string& name, const Fail& fail) {
  std::string accepted;
  for (const Enum& choice : choices) {
    if (name == to_string(choice))
      return choice;
    accepted += (accepted.empty() ? "" : ", ") + std::string(to_string(choice));
  }
  fail(key + " '" + name + "'; accepted: " + accepted);
  return choices[0];
}

std::string program_file_name(std::size_t index) {
  std::string number = std::to_string(index);
  if (number.size() < 5)
    number.insert(0, 5 - number.size(), '0');
  return "program-" + number + ".trace";
}

class LineParser {
public:
  LineParser(std::string where, std::map<std::string, std::string> fields)
      : where_(std::move(where)), fields_(std::move(fields)) {}

  [[noreturn]] void fail(const std::string& problem) const { throw InputError(where_ + ": " + problem); }

  bool has(const std::string& key) const { return fields_.count(key) != 0; }

  std::string text(const std::string& key, const std::string& accepted) const {
    const auto it = fields_.find(key);
    if (it == fields_.end() || it->second.empty())
      fail("missing " + key + "=; accepted: " + accepted);
    used_.push_back(key);
    return it->second;
  }

  std::string optional_text(const std::string& key) const {
    const auto it = fields_.find(key);
    if (it == fields_.end())
      return "";
    used_.push_back(key);
    return it->second;
  }

  double number(const std::string& key) const {
    const std::string value = text(key, "a non-negative number");
    char* end = nullptr;
    const double parsed = std::strtod(value.c_str(), &end);
    if (end != value.c_str() + value.size() || !(parsed >= 0) || parsed > 1e30)
      fail(key + "=" + value + " is not a non-negative number");
    return parsed;
  }

  long long integer(const std::string& key, long long fallback) const {
    if (!has(key))
      return fallback;
    long long value = 0;
    if (!parse_integer(text(key, "an integer"), value) || value < 0 || value > 1'000'000'000)
      fail(key + "=" + fields_.at(key) + " is not a non-negative integer");
    return value;
  }

  template <typename Enum>
  Enum choice(const std::string& key, std::optional<Enum> fallback = std::nullopt) const {
    if (!has(key) && fallback)
      return *fallback;
    const std::string value = text(key, names_of<Enum>());
    const auto parsed = from_name<Enum>(value);
    if (!parsed)
      fail(key + "=" + value + " is not known; accepted: " + names_of<Enum>());
    return *parsed;
  }

  void reject_unused() const {
    for (const auto& [key, value] : fields_)
      if (std::find(used_.begin(), used_.end(), key) == used_.end())
        fail("unknown field '" + key + "' for this op");
  }

private:
  std::string where_;
  std::map<std::string, std::string> fields_;
  mutable std::vector<std::string> used_;
};

// The key=value words left in `words`.
std::map<std::string, std::string> fields_of(std::istringstream& words, const std::string& where) {
  std::map<std::string, std::string> fields;
  std::string word;
  while (words >> word) {
    const auto equals = word.find('=');
    if (equals == std::string::npos)
      throw InputError(where + ": '" + word + "' is not key=value");
    if (!fields.emplace(word.substr(0, equals), word.substr(equals + 1)).second)
      throw InputError(where + ": field '" + word.substr(0, equals) + "' given twice");
  }
  return fields;
}

void write_kernel(std::ostream& out, const Kernel& kernel) {
  out << "kernel " << kernel.name << ' ' << to_string(kernel.kind);
  if (kernel.kind != KernelKind::memory)
    out << " m=" << format_double(kernel.m) << " n=" << format_double(kernel.n) << " k=" << format_double(kernel.k)
        << " batch=" << format_double(kernel.batch) << " flops=" << format_double(kernel.flops);
  out << " bytes=" << format_double(kernel.bytes);
  if (kernel.count != 1)
    out << " count=" << format_double(kernel.count);
  out << '\n';
}

Kernel parse_kernel(const std::string& name, std::istringstream& words, const std::string& where) {
  Kernel kernel;
  kernel.name = name;
  std::string kind;
  words >> kind;
  const KernelKind kinds[] = {KernelKind::gemm, KernelKind::attention_forward, KernelKind::attention_backward,
                              KernelKind::memory};
  const auto named = std::find_if(std::begin(kinds), std::end(kinds), [&](KernelKind k) { return kind == to_string(k); });
  if (name.empty() || named == std::end(kinds))
    throw InputError(where + ": expected: kernel <name> <gemm | attention-fwd | attention-bwd | memory> key=value ...");
  kernel.kind = *named;
  const LineParser fields(where, fields_of(words, where));
  if (kernel.kind != KernelKind::memory) {
    kernel.m = fields.number("m");
    kernel.n = fields.number("n");
    kernel.k = fields.number("k");
    kernel.batch = fields.number("batch");
    kernel.flops = fields.number("flops");
    if (!(kernel.m >= 1 && kernel.n >= 1 && kernel.k >= 1 && kernel.batch >= 1))
      fields.fail("m, n, k and batch must be at least 1");
  }
  kernel.bytes = fields.number("bytes");
  kernel.count = fields.has("count") ? fields.number("count") : 1.0;
  fields.reject_unused();
  return kernel;
}

Op parse_op(const std::string& line, const std::string& where, OpId expected_id, const std::map<std::string, int>& groups,
            int version) {
  std::istringstream words(line);
  std::string id_text, kind_text;
  words >> id_text >> kind_text;
  long long id = 0;
  if (!parse_integer(id_text, id) || id != static_cast<long long>(expected_id))
    throw InputError(where + ": expected op id " + std::to_string(expected_id) + " first, found '" + id_text +
                     "'; accepted: ids 0, 1, 2, ... in order");
  const auto kind = from_name<OpKind>(kind_text);
  if (!kind)
    throw InputError(where + ": unknown op kind '" + kind_text + "'; accepted: " + names_of<OpKind>());
  const LineParser fieldsOf(where, fields_of(words, where));
  Op op;
  op.kind = *kind;
  op.stream = fieldsOf.choice<Stream>("stream", default_stream(*kind));
  op.name = fieldsOf.optional_text("name");
  if (version == 1) {
    op.place = place_in_name(op.name);
  } else {
    op.place.layer = static_cast<std::int32_t>(fieldsOf.integer("layer", OpPlace::none));
    op.place.micro_batch = static_cast<std::int32_t>(fieldsOf.integer("micro_batch", OpPlace::none));
    const long long chunk = fieldsOf.integer("chunk", OpPlace::none);
    if (chunk > std::numeric_limits<std::int16_t>::max())
      fieldsOf.fail("chunk=" + std::to_string(chunk) + "; accepted: 0 to " +
                    std::to_string(std::numeric_limits<std::int16_t>::max()));
    op.place.chunk = static_cast<std::int16_t>(chunk);
  }
  switch (op.kind) {
  case OpKind::compute:
    op.flops = fieldsOf.has("flops") ? fieldsOf.number("flops") : 0.0;
    op.bytes = fieldsOf.has("bytes") ? fieldsOf.number("bytes") : 0.0;
    op.kernel_set = static_cast<int>(fieldsOf.integer("kernels", -1));
    op.phase = fieldsOf.choice<Phase>("phase", Phase::other);
    op.target = fieldsOf.optional_text("host");
    break;
  case OpKind::collective: {
    op.collective = fieldsOf.choice<Collective>("op");
    const std::string group = fieldsOf.text("group", "a group declared in workload.txt");
    const auto it = groups.find(group);
    if (it == groups.end())
      fieldsOf.fail("group '" + group + "' is not declared in workload.txt");
    op.group = it->second;
    op.bytes = fieldsOf.number("bytes");
    if (op.collective == Collective::all_to_all)
      op.peer = static_cast<int>(fieldsOf.integer("split", -1));
    break;
  }
  case OpKind::send:
  case OpKind::recv:
    op.peer = static_cast<int>(fieldsOf.integer("peer", -1));
    if (op.peer < 0)
      fieldsOf.fail("missing peer=; accepted: the other rank");
    op.tag = static_cast<int>(fieldsOf.integer("tag", 0));
    op.bytes = fieldsOf.number("bytes");
    break;
  case OpKind::copy:
    if (fieldsOf.has("target") == fieldsOf.has("source"))
      fieldsOf.fail("a copy needs target=HOST (from the GPU) or source=HOST (to the GPU), one of them");
    op.inbound = fieldsOf.has("source");
    op.target = fieldsOf.text(op.inbound ? "source" : "target", "a host name");
    op.bytes = fieldsOf.number("bytes");
    break;
  case OpKind::read:
  case OpKind::write:
    op.target = fieldsOf.text("target", "a disk name");
    op.bytes = fieldsOf.number("bytes");
    break;
  case OpKind::alloc:
    op.tensor = fieldsOf.text("tensor", "a name without spaces");
    op.category = fieldsOf.choice<MemCategory>("category");
    op.device = fieldsOf.choice<Device>("device", Device::gpu);
    op.bytes = fieldsOf.number("bytes");
    break;
  case OpKind::free:
    op.tensor = fieldsOf.text("tensor", "the name given at its alloc");
    break;
  }
  const std::string deps = fieldsOf.optional_text("deps");
  if (!deps.empty())
    for (const auto& dep : split(deps, ',')) {
      long long value = 0;
      if (!parse_integer(dep, value) || value < 0 || value >= static_cast<long long>(expected_id))
        fieldsOf.fail("deps entry '" + dep + "' is not the id of an earlier op");
      op.deps.push_back(static_cast<OpId>(value));
    }
  fieldsOf.reject_unused();
  return op;
}

std::shared_ptr<const Program> parse_program(const std::string& text, const std::string& file,
                                             const std::map<std::string, int>& groups, int version) {
  std::istringstream in(text);
  auto program = std::make_shared<Program>();
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string content = trim(line.substr(0, line.find('#')));
    if (content.empty())
      continue;
    if (program->ops.size() >= max_ops_per_program)
      throw InputError(file + ":" + std::to_string(number) + ": more than " + std::to_string(max_ops_per_program) +
                       " ops in one program; accepted: at most that many");
    program->ops.push_back(
        parse_op(content, file + ":" + std::to_string(number), static_cast<OpId>(program->ops.size()), groups,
                 version));
  }
  return program;
}

std::string read_text(const fs::path& file, const std::string& what) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw InputError(file.string() + ": cannot read; " + what);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

} // namespace

OpPlace place_in_name(const std::string& name) {
  OpPlace place;
  for (const std::string& part : split(name, '.')) {
    if (part.rfind("mb", 0) == 0 && number_after<std::int32_t>(part, 2) != OpPlace::none)
      place.micro_batch = number_after<std::int32_t>(part, 2);
    else if (part.rfind('L', 0) == 0 && number_after<std::int32_t>(part, 1) != OpPlace::none)
      place.layer = number_after<std::int32_t>(part, 1);
    else if (part.rfind('c', 0) == 0 && number_after<std::int16_t>(part, 1) != OpPlace::none)
      place.chunk = number_after<std::int16_t>(part, 1);
  }
  return place;
}

void write_trace(const Workload& workload, const fs::path& directory,
                 const std::vector<std::pair<std::string, std::string>>& extra) {
  OutputDirectory made(directory);
  // One file per program and binding: the format names groups and peers directly.
  using Variant = std::pair<const Program*, Binding>;
  std::map<Variant, std::vector<int>> ranks_of_variant;
  std::vector<Variant> order;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    Variant variant{workload.programs[rank].get(), workload.bindings.empty() ? Binding{} : workload.bindings[rank]};
    auto& ranks = ranks_of_variant[variant];
    if (ranks.empty())
      order.push_back(variant);
    ranks.push_back(static_cast<int>(rank));
  }

  std::ostringstream meta;
  const StepInfo& step = workload.step;
  meta << "# trainsim workload (docs/trace-format.md)\n"
       << "format " << format_version << '\n'
       << "ranks " << workload.ranks() << '\n';
  if (!step.model.empty())
    meta << "model " << step.model << '\n';
  meta << "parameters " << format_double(step.parameters) << '\n'
       << "tokens_per_step " << format_double(step.tokens_per_step) << '\n'
       << "model_flops_per_step " << format_double(step.model_flops_per_step) << '\n'
       << "precision " << to_string(step.precision) << '\n'
       << "matmul_efficiency " << format_double(step.efficiency.matmul) << '\n'
       << "memory_efficiency " << format_double(step.efficiency.memory) << '\n'
       << "allow_tf32 " << (step.efficiency.allow_tf32 ? "true" : "false") << '\n'
       << "compute_model " << to_string(step.efficiency.model) << '\n'
       << "attention_kernel " << to_string(step.efficiency.attention) << '\n';
  for (const KernelSet& set : workload.kernel_sets) {
    meta << "kernel_set " << set.name << '\n';
    for (const Kernel& kernel : set.kernels)
      write_kernel(meta, kernel);
  }
  for (const std::vector<double>& split : workload.all_to_all_splits) {
    meta << "all_to_all_split ";
    for (std::size_t i = 0; i < split.size(); ++i)
      meta << (i ? "," : "") << format_double(split[i]);
    meta << '\n';
  }
  for (const Group& group : workload.groups)
    meta << "group " << group.name << ' ' << group.kind << ' ' << format_rank_list(group.ranks) << '\n';
  // This trace's files, and an earlier trace's program files, which it replaces.
  std::vector<std::string> known = {"workload.txt"};
  for (const auto& [name, text] : extra)
    known.push_back(name);
  for (std::size_t i = 0; i < order.size(); ++i)
    known.push_back(program_file_name(i));
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(directory, ignored)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("program-", 0) == 0 && entry.path().extension() == ".trace" &&
        std::find(known.begin(), known.end(), name) == known.end())
      known.push_back(name);
  }
  OutputSet outputs(directory, known);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::vector<int>& ranks = ranks_of_variant[order[i]];
    meta << "program " << program_file_name(i) << ' ' << format_rank_list(ranks) << '\n';
    std::ostringstream ops;
    ops << "# one op per line: <id> <kind> key=value ... (docs/trace-format.md)\n";
    const Program& program = *order[i].first;
    for (std::size_t op = 0; op < program.ops.size(); ++op)
      write_op(ops, static_cast<OpId>(op), program.ops[op], workload, static_cast<std::size_t>(ranks.front()));
    outputs.write(program_file_name(i), ops.str());
  }
  for (const auto& [name, text] : extra)
    outputs.write(name, text);
  outputs.write("workload.txt", meta.str());
  outputs.commit();
  made.keep();
}

Workload read_trace(const fs::path& directory) {
  const fs::path meta_file = directory / "workload.txt";
  const std::string text = read_text(meta_file, "a trace directory holds workload.txt and program files");
  return parse_trace(text, meta_file.string(), [&](const std::string& file) {
    return read_text(directory / file, "the program file named in workload.txt");
  });
}

Workload parse_trace(const std::string& workload_text, const std::string& meta_name,
                     const std::function<std::string(const std::string&)>& program_text) {
  const fs::path meta_file = meta_name;
  std::istringstream in(workload_text);
  Workload workload;
  // Written before this key existed, a trace was timed at its efficiencies.
  workload.step.efficiency.model = ComputeModel::roofline;
  std::map<std::string, int> groups;
  long long ranks = -1;
  std::vector<std::pair<std::string, std::vector<int>>> program_lines;
  std::string line;
  int number = 0;
  long long version = 0;  // none seen yet
  while (std::getline(in, line)) {
    ++number;
    const std::string where = meta_file.string() + ":" + std::to_string(number);
    const std::string content = trim(line.substr(0, line.find('#')));
    if (content.empty())
      continue;
    std::istringstream words(content);
    std::string key, value, extra;
    words >> key >> value;
    const auto fail = [&](const std::string& problem) { throw InputError(where + ": " + problem); };
    const auto number_value = [&]() {
      char* end = nullptr;
      const double parsed = std::strtod(value.c_str(), &end);
      if (value.empty() || end != value.c_str() + value.size() || !(parsed >= 0) || parsed > 1e30)
        fail(key + " '" + value + "' is not a non-negative number");
      return parsed;
    };
    try {
      if (key == "format") {
        if (!parse_integer(value, version) || version < oldest_version || version > format_version)
          fail("format " + value + " is not supported; accepted: " + std::to_string(oldest_version) + " to " +
               std::to_string(format_version));
      } else if (key == "ranks") {
        if (!parse_integer(value, ranks) || ranks < 1 || ranks > max_ranks)
          fail("ranks '" + value + "'; accepted: 1 to " + std::to_string(max_ranks));
      } else if (key == "model") {
        workload.step.model = value;
      } else if (key == "parameters") {
        workload.step.parameters = number_value();
      } else if (key == "tokens_per_step") {
        workload.step.tokens_per_step = number_value();
      } else if (key == "model_flops_per_step") {
        workload.step.model_flops_per_step = number_value();
      } else if (key == "precision") {
        const Precision precisions[] = {Precision::fp32, Precision::fp16, Precision::bf16, Precision::fp8};
        const auto named = std::find_if(std::begin(precisions), std::end(precisions),
                                        [&](Precision precision) { return value == to_string(precision); });
        if (named == std::end(precisions))
          fail("precision '" + value + "'; accepted: fp32, fp16, bf16, fp8");
        workload.step.precision = *named;
      } else if (key == "matmul_efficiency" || key == "memory_efficiency") {
        const double fraction = number_value();
        if (!(fraction > 0 && fraction <= 1))
          fail(key + " '" + value + "'; accepted: a number in (0, 1]");
        (key == "matmul_efficiency" ? workload.step.efficiency.matmul : workload.step.efficiency.memory) = fraction;
      } else if (key == "compute_model") {
        static constexpr ComputeModel models[] = {ComputeModel::automatic, ComputeModel::kernels,
                                                  ComputeModel::roofline};
        workload.step.efficiency.model = named_choice(models, key, value, fail);
      } else if (key == "attention_kernel") {
        static constexpr AttentionKernel kernels[] = {AttentionKernel::fa2, AttentionKernel::fa3,
                                                      AttentionKernel::cudnn, AttentionKernel::transformer_engine};
        workload.step.efficiency.attention = named_choice(kernels, key, value, fail);
      } else if (key == "kernel_set") {
        workload.kernel_sets.push_back({value, {}});
      } else if (key == "kernel") {
        if (workload.kernel_sets.empty())
          fail("a kernel line comes after the kernel_set line it belongs to");
        workload.kernel_sets.back().kernels.push_back(parse_kernel(value, words, where));
      } else if (key == "all_to_all_split") {
        std::vector<double> shares;
        for (const std::string& part : split(value, ',')) {
          char* end = nullptr;
          const double share = std::strtod(part.c_str(), &end);
          if (part.empty() || end != part.c_str() + part.size())
            fail("all_to_all_split entry '" + part + "' is not a number; accepted: each member's share, e.g. 0.5,0.25,0.25");
          shares.push_back(share);
        }
        workload.all_to_all_splits.push_back(std::move(shares));
      } else if (key == "allow_tf32") {
        if (value != "true" && value != "false")
          fail("allow_tf32 '" + value + "'; accepted: true, false");
        workload.step.efficiency.allow_tf32 = value == "true";
      } else if (key == "group") {
        std::string kind, list;
        words >> kind >> list;
        if (list.empty())
          fail("expected: group <name> <kind> <ranks>, e.g. group dp0 dp 0-7");
        if (groups.count(value))
          fail("group " + value + " is declared twice");
        groups[value] = static_cast<int>(workload.groups.size());
        workload.groups.push_back({value, kind, parse_rank_list(list)});
      } else if (key == "program") {
        std::string list;
        words >> list;
        if (list.empty() || fs::path(value).filename() != fs::path(value))
          fail("expected: program <file in this directory> <ranks>, e.g. program program-00000.trace 0-7");
        program_lines.emplace_back(value, parse_rank_list(list));
      } else {
        fail("unknown key '" + key +
             "'; accepted: format, ranks, model, parameters, tokens_per_step, model_flops_per_step, precision, "
             "matmul_efficiency, memory_efficiency, allow_tf32, compute_model, attention_kernel, kernel_set, kernel, "
             "group, program");
      }
      if (words >> extra)
        fail("unexpected '" + extra + "' at the end of the line");
    } catch (const std::invalid_argument& error) {
      fail(error.what());
    }
  }
  if (version == 0)
    throw InputError(meta_file.string() + ": missing 'format " + std::to_string(format_version) + "' line");
  if (ranks < 1)
    throw InputError(meta_file.string() + ": missing 'ranks N' line");
  workload.programs.assign(static_cast<std::size_t>(ranks), nullptr);
  for (const auto& [file, assigned] : program_lines) {
    const auto program = parse_program(program_text(file), (meta_file.parent_path() / file).string(), groups,
                                       static_cast<int>(version));
    for (int rank : assigned) {
      if (rank >= ranks)
        throw InputError(meta_file.string() + ": program " + file + " is given to rank " + std::to_string(rank) +
                         " but there are " + std::to_string(ranks) + " ranks");
      if (workload.programs[rank])
        throw InputError(meta_file.string() + ": rank " + std::to_string(rank) + " is given two programs");
      workload.programs[rank] = program;
    }
  }
  for (long long rank = 0; rank < ranks; ++rank)
    if (!workload.programs[rank])
      throw InputError(meta_file.string() + ": rank " + std::to_string(rank) + " has no program line");
  validate_workload(workload, meta_file.parent_path().string());
  return workload;
}

} // namespace trainsim
