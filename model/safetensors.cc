#include "model/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/json_depth.h"

namespace pagoda {
namespace {

using Json = nlohmann::json;

struct DtypeInfo {
  const char* name;
  int bytes;
  std::optional<GgmlType> type;
};

constexpr DtypeInfo kDtypes[] = {
    {"F32", 4, GgmlType::kF32}, {"F16", 2, GgmlType::kF16},   {"BF16", 2, GgmlType::kBF16},
    {"F64", 8, std::nullopt},   {"I64", 8, std::nullopt},     {"I32", 4, std::nullopt},
    {"I16", 2, std::nullopt},   {"I8", 1, std::nullopt},      {"U8", 1, std::nullopt},
    {"U16", 2, std::nullopt},   {"U32", 4, std::nullopt},     {"U64", 8, std::nullopt},
    {"BOOL", 1, std::nullopt},  {"F8_E4M3", 1, std::nullopt}, {"F8_E5M2", 1, std::nullopt},
};

const DtypeInfo* FindDtype(std::string_view name) {
  for (const DtypeInfo& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

// Parses JSON without throwing (nesting bounded first: common/json_depth.h); `duplicate`
// receives the first key repeated in the top-level object (nlohmann would silently keep the last
// one). Errors start with `what` ("header", "index").
Result<Json> ParseJson(std::string_view text, const std::string& what, std::string* duplicate) {
  PAGODA_RETURN_IF_ERROR(CheckJsonDepth(text, what));
  std::set<std::string> seen;
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      auto s = parsed.get<std::string>();
      if (!seen.insert(s).second && duplicate->empty()) *duplicate = s;
    }
    return true;
  };
  try {
    Json j = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
    if (j.is_discarded()) return InvalidArgument(what + ": not valid JSON");
    return j;
  } catch (const std::exception& e) {
    return InvalidArgument(what + ": not valid JSON (" + e.what() + ")");
  }
}

Result<uint64_t> JsonUint(const Json& v, const std::string& field) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return static_cast<uint64_t>(v.get<int64_t>());
  return InvalidArgument(field + ": expected a non-negative integer");
}

Status ParseShape(const Json& v, const std::string& field, int bytes_per_elem,
                  std::vector<int64_t>* shape, uint64_t* nbytes) {
  if (!v.is_array()) return InvalidArgument(field + ": expected an array of dimensions");
  if (v.size() > 8) return InvalidArgument(field + ": more than 8 dimensions");
  uint64_t n = static_cast<uint64_t>(bytes_per_elem);
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    PAGODA_ASSIGN_OR_RETURN(uint64_t d, JsonUint(v[i], f));
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgument(f + ": " + std::to_string(d) + " is too large");
    }
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / d) {
      return InvalidArgument(field + ": byte size overflows");
    }
    n *= d;
    shape->push_back(static_cast<int64_t>(d));
  }
  *nbytes = n;
  return Status::Ok();
}

Result<SafetensorsTensor> ParseTensorEntry(const std::string& name, const Json& v,
                                           uint64_t buffer_size) {
  const std::string f = "tensor '" + name + "'";
  if (!v.is_object()) return InvalidArgument(f + ": expected an object");
  SafetensorsTensor t;
  t.name = name;
  auto dtype = v.find("dtype");
  if (dtype == v.end() || !dtype->is_string()) return InvalidArgument(f + ".dtype: missing");
  t.dtype = dtype->get<std::string>();
  const DtypeInfo* info = FindDtype(t.dtype);
  if (!info) return InvalidArgument(f + ".dtype: unknown dtype '" + t.dtype + "'");
  t.type = info->type;
  auto shape = v.find("shape");
  if (shape == v.end()) return InvalidArgument(f + ".shape: missing");
  uint64_t nbytes = 0;
  PAGODA_RETURN_IF_ERROR(ParseShape(*shape, f + ".shape", info->bytes, &t.shape, &nbytes));
  auto offs = v.find("data_offsets");
  if (offs == v.end() || !offs->is_array() || offs->size() != 2) {
    return InvalidArgument(f + ".data_offsets: expected [begin, end]");
  }
  PAGODA_ASSIGN_OR_RETURN(t.begin, JsonUint((*offs)[0], f + ".data_offsets[0]"));
  PAGODA_ASSIGN_OR_RETURN(t.end, JsonUint((*offs)[1], f + ".data_offsets[1]"));
  if (t.begin > t.end || t.end > buffer_size) {
    return InvalidArgument(f + ".data_offsets: [" + std::to_string(t.begin) + ", " +
                           std::to_string(t.end) + "] outside the data buffer of " +
                           std::to_string(buffer_size) + " bytes");
  }
  if (t.end - t.begin != nbytes) {
    return InvalidArgument(f + ": shape " + t.ShapeString() + " of " + t.dtype + " needs " +
                           std::to_string(nbytes) + " bytes but data_offsets span " +
                           std::to_string(t.end - t.begin));
  }
  return t;
}

Status ParseMetadata(const Json& v, std::map<std::string, std::string>* out) {
  if (!v.is_object()) return InvalidArgument("__metadata__: expected an object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it.value().is_string()) {
      return InvalidArgument("__metadata__." + it.key() + ": expected a string");
    }
    (*out)[it.key()] = it.value().get<std::string>();
  }
  return Status::Ok();
}

// The tensors must tile the buffer exactly, as the reference implementation requires.
Status CheckTiling(std::vector<const SafetensorsTensor*> by_offset, uint64_t buffer_size) {
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t pos = 0;
  for (const SafetensorsTensor* t : by_offset) {
    if (t->begin != pos) {
      return InvalidArgument("tensor '" + t->name + "'.data_offsets: begins at " +
                             std::to_string(t->begin) + ", expected " + std::to_string(pos) +
                             (t->begin < pos ? " (overlaps the previous tensor)" : " (a hole)"));
    }
    pos = t->end;
  }
  if (pos != buffer_size) {
    return InvalidArgument("data buffer: " + std::to_string(buffer_size) + " bytes but tensors " +
                           "cover " + std::to_string(pos));
  }
  return Status::Ok();
}

}  // namespace

std::string SafetensorsTensor::ShapeString() const {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

Status SafetensorsTensor::CheckSupported() const {
  if (type) return Status::Ok();
  return Unimplemented("tensor '" + name + "': dtype " + dtype +
                       " is not supported (expected F32, F16 or BF16)");
}

Status SafetensorsFile::ParseHeader() {
  if (bytes_.size() < 8) {
    return DataLoss("header length: file of " + std::to_string(bytes_.size()) +
                    " bytes is too short");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes_[static_cast<size_t>(i)];
  if (n > kMaxSafetensorsHeaderBytes || n > bytes_.size() - 8) {
    return DataLoss("header length: " + std::to_string(n) + " bytes, but the file has " +
                    std::to_string(bytes_.size() - 8) + " after it (limit " +
                    std::to_string(kMaxSafetensorsHeaderBytes) + ")");
  }
  if (n < 2) return InvalidArgument("header: too short to be a JSON object");
  std::string duplicate;
  const auto* text = reinterpret_cast<const char*>(bytes_.data() + 8);
  PAGODA_ASSIGN_OR_RETURN(Json root, ParseJson(std::string_view(text, n), "header", &duplicate));
  if (!root.is_object()) return InvalidArgument("header: expected a JSON object");
  if (!duplicate.empty()) return InvalidArgument("header: duplicate name '" + duplicate + "'");
  const uint64_t buffer_size = bytes_.size() - 8 - n;
  const uint8_t* buffer = bytes_.data() + 8 + n;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      PAGODA_RETURN_IF_ERROR(ParseMetadata(it.value(), &metadata_));
      continue;
    }
    PAGODA_ASSIGN_OR_RETURN(SafetensorsTensor t,
                            ParseTensorEntry(it.key(), it.value(), buffer_size));
    t.data = buffer + t.begin;
    index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  std::vector<const SafetensorsTensor*> ptrs;
  for (const auto& t : tensors_) ptrs.push_back(&t);
  return CheckTiling(std::move(ptrs), buffer_size);
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Parse(std::span<const uint8_t> bytes) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->bytes_ = bytes;
  PAGODA_RETURN_IF_ERROR(file->ParseHeader());
  return file;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path));
  auto parsed = Parse(map.bytes());
  if (!parsed.ok()) return parsed.status().WithPrefix(path);
  parsed.value()->map_ = std::move(map);
  return parsed;
}

SafetensorsFile::~SafetensorsFile() = default;

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<std::map<std::string, std::string>> ParseSafetensorsIndex(std::string_view json_text) {
  std::string duplicate;
  PAGODA_ASSIGN_OR_RETURN(Json root, ParseJson(json_text, "index", &duplicate));
  if (!root.is_object()) return InvalidArgument("index: expected a JSON object");
  auto wm = root.find("weight_map");
  if (wm == root.end() || !wm->is_object()) {
    return InvalidArgument("weight_map: missing or not an object");
  }
  std::map<std::string, std::string> out;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string()) {
      return InvalidArgument("weight_map." + it.key() + ": expected a file name");
    }
    const std::string file = it.value().get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
      return InvalidArgument("weight_map." + it.key() + ": '" + file +
                             "' is not a plain file name");
    }
    out[it.key()] = file;
  }
  return out;
}

Result<std::unique_ptr<SafetensorsSet>> SafetensorsSet::OpenDir(const std::string& dir) {
  auto set = std::make_unique<SafetensorsSet>();
  const std::string index_path = dir + "/model.safetensors.index.json";
  auto index_text = ReadSmallFile(index_path, uint64_t{64} << 20);
  if (!index_text.ok() && index_text.status().code() != StatusCode::kNotFound) {
    return index_text.status();
  }
  std::map<std::string, std::string> weight_map;
  if (index_text.ok()) {
    auto parsed = ParseSafetensorsIndex(*index_text);
    if (!parsed.ok()) return parsed.status().WithPrefix(index_path);
    weight_map = std::move(parsed).value();
  }
  std::map<std::string, size_t> shard_index;
  for (const auto& [name, file] : weight_map) shard_index.emplace(file, 0);
  if (!index_text.ok()) shard_index.emplace("model.safetensors", 0);
  for (auto& [file, idx] : shard_index) {
    PAGODA_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(dir + "/" + file));
    idx = set->files_.size();
    set->files_.push_back(std::move(f));
    set->file_names_.push_back(file);
  }
  if (!index_text.ok()) {
    for (const auto& t : set->files_[0]->tensors()) set->where_[t.name] = 0;
    return set;
  }
  for (const auto& [name, file] : weight_map) {
    const size_t idx = shard_index[file];
    if (!set->files_[idx]->Find(name)) {
      return InvalidArgument(index_path + ": weight_map." + name + ": not found in " + file);
    }
    set->where_[name] = idx;
  }
  return set;
}

const SafetensorsTensor* SafetensorsSet::Find(std::string_view name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : files_[it->second]->Find(name);
}

std::vector<const SafetensorsTensor*> SafetensorsSet::AllTensors() const {
  std::vector<const SafetensorsTensor*> out;
  out.reserve(where_.size());
  for (const auto& [name, file] : where_) out.push_back(files_[file]->Find(name));
  return out;
}

std::string SafetensorsSet::FileOf(std::string_view name) const {
  auto it = where_.find(name);
  return it == where_.end() ? "" : file_names_[it->second];
}

namespace {

// The 8-byte length and the JSON header (padded with spaces to a multiple of 8 bytes) of a
// safetensors image holding `ts` in order. Errors as SerializeSafetensors.
Result<std::string> SafetensorsHeader(const std::vector<SafetensorsWriteTensor>& ts,
                                      const std::map<std::string, std::string>& meta) {
  Json header = Json::object();
  if (!meta.empty()) header["__metadata__"] = meta;
  uint64_t offset = 0;
  for (const auto& t : ts) {
    const DtypeInfo* info = FindDtype(t.dtype);
    if (!info) return InvalidArgument("tensor '" + t.name + "': unknown dtype " + t.dtype);
    uint64_t n = static_cast<uint64_t>(info->bytes);
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    if (n != t.data.size()) {
      return InvalidArgument("tensor '" + t.name + "': " + std::to_string(t.data.size()) +
                             " bytes, shape needs " + std::to_string(n));
    }
    if (header.contains(t.name)) return InvalidArgument("tensor '" + t.name + "': duplicate");
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) {
    out[static_cast<size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  }
  return out + text;
}

}  // namespace

Result<std::vector<uint8_t>> SerializeSafetensors(const std::vector<SafetensorsWriteTensor>& ts,
                                                  const std::map<std::string, std::string>& meta) {
  PAGODA_ASSIGN_OR_RETURN(std::string header, SafetensorsHeader(ts, meta));
  std::vector<uint8_t> out(header.begin(), header.end());
  size_t data_bytes = 0;
  for (const auto& t : ts) data_bytes += t.data.size();
  out.reserve(out.size() + data_bytes);
  for (const auto& t : ts) out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsWriteTensor>& ts,
                        const std::map<std::string, std::string>& meta) {
  PAGODA_ASSIGN_OR_RETURN(std::string header, SafetensorsHeader(ts, meta));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return NotFound(path + ": cannot create");
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const auto& t : ts) {
    out.write(reinterpret_cast<const char*>(t.data.data()),
              static_cast<std::streamsize>(t.data.size()));
  }
  if (!out.flush()) return DataLoss(path + ": write failed");
  return Status::Ok();
}

}  // namespace pagoda
