#include "model/gguf.h"

#include <cstring>
#include <limits>
#include <sstream>

namespace pagoda {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;
constexpr int kMaxArrayNesting = 4;
constexpr uint64_t kMaxStringBytes = 1ull << 30;

// Bytes a value of `type` needs at least in the file (for bounding counts before reserving).
uint64_t MinEncodedSize(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kString:
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kArray:
      return 12;
  }
  return 1;
}

bool ValidGgufType(uint32_t raw) { return raw <= static_cast<uint32_t>(GgufType::kFloat64); }

}  // namespace

const char* GgufTypeName(GgufType type) {
  static const char* kNames[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                 "int32",  "float32", "bool",   "string", "array",
                                 "uint64", "int64",   "float64"};
  const auto i = static_cast<uint32_t>(type);
  return i < 13 ? kNames[i] : "unknown";
}

// Sequential bounds-checked reader over the file image; every failure names the field.
class GgufParser {
 public:
  GgufParser(std::span<const uint8_t> bytes, GgufFile& out) : bytes_(bytes), out_(out) {}

  Status Run() {
    PAGODA_RETURN_IF_ERROR(ReadHeader());
    for (uint64_t k = 0; k < n_kv_; ++k) PAGODA_RETURN_IF_ERROR(ReadKv(k));
    PAGODA_RETURN_IF_ERROR(ReadAlignment());
    for (uint64_t t = 0; t < n_tensors_; ++t) PAGODA_RETURN_IF_ERROR(ReadTensorInfo(t));
    return PlaceTensors();
  }

 private:
  uint64_t remaining() const { return bytes_.size() - pos_; }

  template <typename T>
  Status Read(T* v, const std::string& field) {
    if (remaining() < sizeof(T)) {
      return DataLoss("truncated file: reading " + field + " at offset " + std::to_string(pos_) +
                      " needs " + std::to_string(sizeof(T)) + " bytes, " +
                      std::to_string(remaining()) + " left");
    }
    std::memcpy(v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status ReadString(std::string* s, const std::string& field) {
    uint64_t len = 0;
    PAGODA_RETURN_IF_ERROR(Read(&len, field + " length"));
    if (len > remaining() || len > kMaxStringBytes) {
      return DataLoss(field + ": string length " + std::to_string(len) + " exceeds the " +
                      std::to_string(remaining()) + " bytes left in the file");
    }
    s->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return Status::Ok();
  }

  Status ReadHeader() {
    uint32_t magic = 0;
    PAGODA_RETURN_IF_ERROR(Read(&magic, "magic"));
    if (magic != kGgufMagic) {
      return InvalidArgument("magic: not a GGUF file (expected \"GGUF\" in the first 4 bytes)");
    }
    PAGODA_RETURN_IF_ERROR(Read(&out_.version_, "version"));
    if (out_.version_ != 2 && out_.version_ != 3) {
      return InvalidArgument("version: GGUF version " + std::to_string(out_.version_) +
                             " is not supported (expected 2 or 3)");
    }
    PAGODA_RETURN_IF_ERROR(Read(&n_tensors_, "tensor_count"));
    PAGODA_RETURN_IF_ERROR(Read(&n_kv_, "metadata_kv_count"));
    // Each kv needs >= 8 (key len) + 4 (type) + 1 bytes; each tensor info >= 8 + 4 + 4 + 8.
    if (n_kv_ > remaining() / 13) {
      return DataLoss("metadata_kv_count: " + std::to_string(n_kv_) +
                      " entries cannot fit in a file of " + std::to_string(bytes_.size()) +
                      " bytes");
    }
    if (n_tensors_ > remaining() / 24) {
      return DataLoss("tensor_count: " + std::to_string(n_tensors_) +
                      " tensors cannot fit in a file of " + std::to_string(bytes_.size()) +
                      " bytes");
    }
    return Status::Ok();
  }

  Status ReadScalar(GgufType type, GgufValue* v, const std::string& field) {
    v->type = type;
    switch (type) {
      case GgufType::kUint8:
        return ReadInt<uint8_t>(v, field);
      case GgufType::kInt8:
        return ReadInt<int8_t>(v, field);
      case GgufType::kUint16:
        return ReadInt<uint16_t>(v, field);
      case GgufType::kInt16:
        return ReadInt<int16_t>(v, field);
      case GgufType::kUint32:
        return ReadInt<uint32_t>(v, field);
      case GgufType::kInt32:
        return ReadInt<int32_t>(v, field);
      case GgufType::kUint64:
        return ReadInt<uint64_t>(v, field);
      case GgufType::kInt64:
        return ReadInt<int64_t>(v, field);
      case GgufType::kBool: {
        uint8_t b = 0;
        PAGODA_RETURN_IF_ERROR(Read(&b, field));
        if (b > 1) return DataLoss(field + ": bool value " + std::to_string(b) + " is not 0 or 1");
        v->i = b;
        return Status::Ok();
      }
      case GgufType::kFloat32: {
        float f = 0;
        PAGODA_RETURN_IF_ERROR(Read(&f, field));
        v->f = f;
        return Status::Ok();
      }
      case GgufType::kFloat64:
        return Read(&v->f, field);
      case GgufType::kString:
        return ReadString(&v->str, field);
      case GgufType::kArray:
        break;
    }
    return Internal(field + ": ReadScalar on array");
  }

  template <typename T>
  Status ReadInt(GgufValue* v, const std::string& field) {
    T x{};
    PAGODA_RETURN_IF_ERROR(Read(&x, field));
    v->i = static_cast<int64_t>(x);
    return Status::Ok();
  }

  Status ReadType(GgufType* type, const std::string& field) {
    uint32_t raw = 0;
    PAGODA_RETURN_IF_ERROR(Read(&raw, field));
    if (!ValidGgufType(raw)) {
      return DataLoss(field + ": unknown GGUF value type " + std::to_string(raw) +
                      " (expected 0..12)");
    }
    *type = static_cast<GgufType>(raw);
    return Status::Ok();
  }

  Status ReadArray(GgufValue* v, const std::string& field, int depth) {
    if (depth > kMaxArrayNesting) return DataLoss(field + ": arrays nested too deeply");
    v->type = GgufType::kArray;
    PAGODA_RETURN_IF_ERROR(ReadType(&v->elem_type, field + " element type"));
    uint64_t n = 0;
    PAGODA_RETURN_IF_ERROR(Read(&n, field + " array length"));
    if (n > remaining() / MinEncodedSize(v->elem_type)) {
      return DataLoss(field + ": array of " + std::to_string(n) + " " + GgufTypeName(v->elem_type) +
                      " cannot fit in the " + std::to_string(remaining()) + " bytes left");
    }
    for (uint64_t j = 0; j < n; ++j) {
      const std::string item = field + "[" + std::to_string(j) + "]";
      if (v->elem_type == GgufType::kArray) {
        v->arr.emplace_back();
        PAGODA_RETURN_IF_ERROR(ReadArray(&v->arr.back(), item, depth + 1));
        continue;
      }
      GgufValue e;
      PAGODA_RETURN_IF_ERROR(ReadScalar(v->elem_type, &e, item));
      if (v->elem_type == GgufType::kString) {
        v->arr_str.push_back(std::move(e.str));
      } else if (e.is_float()) {
        v->arr_f.push_back(e.f);
      } else {
        v->arr_i.push_back(e.i);
      }
    }
    return Status::Ok();
  }

  Status ReadKv(uint64_t k) {
    std::string key;
    PAGODA_RETURN_IF_ERROR(ReadString(&key, "metadata key #" + std::to_string(k)));
    GgufType type;
    PAGODA_RETURN_IF_ERROR(ReadType(&type, "metadata '" + key + "' type"));
    GgufValue v;
    const std::string field = "metadata '" + key + "'";
    if (type == GgufType::kArray) {
      PAGODA_RETURN_IF_ERROR(ReadArray(&v, field, 1));
    } else {
      PAGODA_RETURN_IF_ERROR(ReadScalar(type, &v, field));
    }
    if (out_.kv_index_.count(key)) return DataLoss(field + ": duplicate key");
    out_.kv_index_.emplace(key, out_.kv_.size());
    out_.kv_.emplace_back(std::move(key), std::move(v));
    return Status::Ok();
  }

  Status ReadAlignment() {
    const GgufValue* a = out_.Find("general.alignment");
    if (a == nullptr) return Status::Ok();
    if (!a->is_integer() || a->i <= 0 || (a->i & (a->i - 1)) != 0 || a->i > (1 << 20)) {
      return DataLoss("metadata 'general.alignment': expected a power of two integer, got " +
                      a->ToShortString());
    }
    out_.alignment_ = static_cast<uint64_t>(a->i);
    return Status::Ok();
  }

  Status ReadTensorInfo(uint64_t t) {
    GgufTensor info;
    PAGODA_RETURN_IF_ERROR(ReadString(&info.name, "tensor #" + std::to_string(t) + " name"));
    const std::string field = "tensor '" + info.name + "'";
    uint32_t n_dims = 0;
    PAGODA_RETURN_IF_ERROR(Read(&n_dims, field + " n_dims"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return DataLoss(field + ": n_dims " + std::to_string(n_dims) + " (expected 1.." +
                      std::to_string(kMaxDims) + ")");
    }
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      PAGODA_RETURN_IF_ERROR(Read(&ne, field + " ne[" + std::to_string(d) + "]"));
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          static_cast<int64_t>(ne) > std::numeric_limits<int64_t>::max() / elements) {
        return DataLoss(field + ": dimension ne[" + std::to_string(d) +
                        "] = " + std::to_string(ne) + " is zero or overflows the element count");
      }
      elements *= static_cast<int64_t>(ne);
      info.ne.push_back(static_cast<int64_t>(ne));
    }
    uint32_t raw_type = 0;
    PAGODA_RETURN_IF_ERROR(Read(&raw_type, field + " type"));
    const auto traits = GetTypeTraits(raw_type);
    if (!traits) return DataLoss(field + ": unknown tensor type " + std::to_string(raw_type));
    info.type = traits->type;
    if (info.ne[0] % traits->block_size != 0) {
      return DataLoss(field + ": ne[0] = " + std::to_string(info.ne[0]) +
                      " is not a multiple of the " + traits->name + " block size " +
                      std::to_string(traits->block_size));
    }
    const auto row = RowBytes(info.type, info.ne[0]);
    if (!row) return DataLoss(field + ": byte size overflows");
    const int64_t rows = elements / info.ne[0];
    if (*row != 0 && rows > std::numeric_limits<int64_t>::max() / *row) {
      return DataLoss(field + ": byte size overflows");
    }
    info.nbytes = static_cast<uint64_t>(rows * *row);
    PAGODA_RETURN_IF_ERROR(Read(&info.offset, field + " offset"));
    if (info.offset % out_.alignment_ != 0) {
      return DataLoss(field + ": offset " + std::to_string(info.offset) +
                      " is not a multiple of the alignment " + std::to_string(out_.alignment_));
    }
    if (out_.tensor_index_.count(info.name)) return DataLoss(field + ": duplicate tensor name");
    out_.tensor_index_.emplace(info.name, out_.tensors_.size());
    out_.tensors_.push_back(std::move(info));
    return Status::Ok();
  }

  Status PlaceTensors() {
    const uint64_t a = out_.alignment_;
    const uint64_t data_offset = (pos_ + a - 1) / a * a;
    out_.data_offset_ = data_offset;
    if (out_.tensors_.empty()) return Status::Ok();
    if (data_offset > bytes_.size()) {
      return DataLoss("tensor data: the data section would start at offset " +
                      std::to_string(data_offset) + ", past the end of the " +
                      std::to_string(bytes_.size()) + "-byte file");
    }
    const uint64_t data_size = bytes_.size() - data_offset;
    for (GgufTensor& t : out_.tensors_) {
      if (t.offset > data_size || t.nbytes > data_size - t.offset) {
        return DataLoss("tensor '" + t.name + "': data [" + std::to_string(t.offset) + ", +" +
                        std::to_string(t.nbytes) + ") runs past the end of the data section (" +
                        std::to_string(data_size) + " bytes)");
      }
      t.data = bytes_.data() + data_offset + t.offset;
    }
    return Status::Ok();
  }

  std::span<const uint8_t> bytes_;
  GgufFile& out_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
};

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kBool:
      return true;
    default:
      return false;
  }
}

uint64_t GgufValue::array_size() const {
  if (type != GgufType::kArray) return 0;
  return arr_i.size() + arr_f.size() + arr_str.size() + arr.size();
}

std::string GgufValue::ToShortString(size_t max_items) const {
  std::ostringstream os;
  switch (type) {
    case GgufType::kString: {
      std::string s = str.size() > 80 ? str.substr(0, 77) + "..." : str;
      os << '"' << s << '"';
      break;
    }
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      os << f;
      break;
    case GgufType::kBool:
      os << (i ? "true" : "false");
      break;
    case GgufType::kUint64:
      os << static_cast<uint64_t>(i);
      break;
    case GgufType::kArray: {
      os << GgufTypeName(elem_type) << "[" << array_size() << "] [";
      const size_t n = std::min<size_t>(array_size(), max_items);
      for (size_t j = 0; j < n; ++j) {
        if (j) os << ", ";
        if (!arr_str.empty())
          os << '"' << arr_str[j] << '"';
        else if (!arr_f.empty())
          os << arr_f[j];
        else if (!arr_i.empty())
          os << arr_i[j];
        else
          os << arr[j].ToShortString(2);
      }
      if (array_size() > n) os << ", ...";
      os << "]";
      break;
    }
    default:
      os << i;
      break;
  }
  return os.str();
}

int64_t GgufTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::string GgufTensor::ShapeString() const {
  std::string s = "[";
  for (size_t d = 0; d < ne.size(); ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

Result<std::unique_ptr<GgufFile>> GgufFile::Parse(std::span<const uint8_t> bytes) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->bytes_ = bytes;
  GgufParser parser(bytes, *file);
  PAGODA_RETURN_IF_ERROR(parser.Run());
  return file;
}

Result<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path));
  auto parsed = Parse(map.bytes());
  if (!parsed.ok()) return parsed.status().WithPrefix(path);
  parsed.value()->map_ = std::move(map);
  return parsed;
}

GgufFile::~GgufFile() = default;

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufValue* GgufFile::FindArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  return v && v->type == GgufType::kArray ? v : nullptr;
}

Result<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFound("metadata '" + std::string(key) + "' is missing");
  if (!v->is_integer()) {
    return InvalidArgument("metadata '" + std::string(key) + "': expected an integer, got " +
                           GgufTypeName(v->type));
  }
  if (v->type == GgufType::kUint64 && v->i < 0) {
    return InvalidArgument("metadata '" + std::string(key) + "': value out of range");
  }
  return v->i;
}

Result<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFound("metadata '" + std::string(key) + "' is missing");
  if (v->is_float()) return v->f;
  if (v->is_integer()) return static_cast<double>(v->i);
  return InvalidArgument("metadata '" + std::string(key) + "': expected a number, got " +
                         GgufTypeName(v->type));
}

Result<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFound("metadata '" + std::string(key) + "' is missing");
  if (v->type != GgufType::kString) {
    return InvalidArgument("metadata '" + std::string(key) + "': expected a string, got " +
                           GgufTypeName(v->type));
  }
  return v->str;
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFound("metadata '" + std::string(key) + "' is missing");
  if (!v->is_integer()) {
    return InvalidArgument("metadata '" + std::string(key) + "': expected a bool, got " +
                           GgufTypeName(v->type));
  }
  return v->i != 0;
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace pagoda
