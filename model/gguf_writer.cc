#include "model/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace pagoda {
namespace {

constexpr uint64_t kAlignment = 32;

template <typename T>
void Put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

void PutString(std::vector<uint8_t>& out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void PutScalar(std::vector<uint8_t>& out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kUint8:
      Put<uint8_t>(out, static_cast<uint8_t>(v.i));
      break;
    case GgufType::kInt8:
      Put<int8_t>(out, static_cast<int8_t>(v.i));
      break;
    case GgufType::kUint16:
      Put<uint16_t>(out, static_cast<uint16_t>(v.i));
      break;
    case GgufType::kInt16:
      Put<int16_t>(out, static_cast<int16_t>(v.i));
      break;
    case GgufType::kUint32:
      Put<uint32_t>(out, static_cast<uint32_t>(v.i));
      break;
    case GgufType::kInt32:
      Put<int32_t>(out, static_cast<int32_t>(v.i));
      break;
    case GgufType::kUint64:
      Put<uint64_t>(out, static_cast<uint64_t>(v.i));
      break;
    case GgufType::kInt64:
      Put<int64_t>(out, v.i);
      break;
    case GgufType::kBool:
      Put<uint8_t>(out, v.i ? 1 : 0);
      break;
    case GgufType::kFloat32:
      Put<float>(out, static_cast<float>(v.f));
      break;
    case GgufType::kFloat64:
      Put<double>(out, v.f);
      break;
    case GgufType::kString:
      PutString(out, v.str);
      break;
    case GgufType::kArray:
      break;
  }
}

void PutValue(std::vector<uint8_t>& out, const GgufValue& v) {
  if (v.type != GgufType::kArray) return PutScalar(out, v);
  Put<uint32_t>(out, static_cast<uint32_t>(v.elem_type));
  Put<uint64_t>(out, v.array_size());
  GgufValue e;
  e.type = v.elem_type;
  for (const auto& s : v.arr_str) PutString(out, s);
  for (double f : v.arr_f) {
    e.f = f;
    PutScalar(out, e);
  }
  for (int64_t i : v.arr_i) {
    e.i = i;
    PutScalar(out, e);
  }
  for (const auto& a : v.arr) PutValue(out, a);
}

}  // namespace

void GgufWriter::AddValue(const std::string& key, const GgufValue& value) {
  PutString(header_kv_, key);
  Put<uint32_t>(header_kv_, static_cast<uint32_t>(value.type));
  PutValue(header_kv_, value);
  ++n_kv_;
}

void GgufWriter::AddString(const std::string& key, const std::string& value) {
  GgufValue v;
  v.type = GgufType::kString;
  v.str = value;
  AddValue(key, v);
}

void GgufWriter::AddUint32(const std::string& key, uint32_t value) {
  GgufValue v;
  v.type = GgufType::kUint32;
  v.i = value;
  AddValue(key, v);
}

void GgufWriter::AddInt32(const std::string& key, int32_t value) {
  GgufValue v;
  v.type = GgufType::kInt32;
  v.i = value;
  AddValue(key, v);
}

void GgufWriter::AddFloat32(const std::string& key, float value) {
  GgufValue v;
  v.type = GgufType::kFloat32;
  v.f = value;
  AddValue(key, v);
}

void GgufWriter::AddBool(const std::string& key, bool value) {
  GgufValue v;
  v.type = GgufType::kBool;
  v.i = value ? 1 : 0;
  AddValue(key, v);
}

void GgufWriter::AddStringArray(const std::string& key, const std::vector<std::string>& values) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = GgufType::kString;
  v.arr_str = values;
  AddValue(key, v);
}

void GgufWriter::AddFloat32Array(const std::string& key, const std::vector<float>& values) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = GgufType::kFloat32;
  v.arr_f.assign(values.begin(), values.end());
  AddValue(key, v);
}

void GgufWriter::AddInt32Array(const std::string& key, const std::vector<int32_t>& values) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = GgufType::kInt32;
  v.arr_i.assign(values.begin(), values.end());
  AddValue(key, v);
}

Status GgufWriter::AddTensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                             std::vector<uint8_t> data) {
  if (ne.empty() || ne.size() > 4) return InvalidArgument(name + ": expected 1..4 dims");
  const auto row = RowBytes(type, ne[0]);
  if (!row) return InvalidArgument(name + ": ne[0] is not a multiple of the block size");
  int64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  if (static_cast<int64_t>(data.size()) != rows * *row) {
    return InvalidArgument(name + ": data has " + std::to_string(data.size()) +
                           " bytes, expected " + std::to_string(rows * *row));
  }
  tensors_.push_back({name, type, std::move(ne), std::move(data)});
  return Status::Ok();
}

Status GgufWriter::Write(const std::string& path) const {
  std::vector<uint8_t> head;
  Put<uint32_t>(head, 0x46554747);
  Put<uint32_t>(head, 3);
  Put<uint64_t>(head, tensors_.size());
  Put<uint64_t>(head, n_kv_);
  head.insert(head.end(), header_kv_.begin(), header_kv_.end());
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(head, t.name);
    Put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) Put<uint64_t>(head, static_cast<uint64_t>(d));
    Put<uint32_t>(head, static_cast<uint32_t>(t.type));
    Put<uint64_t>(head, offset);
    offset += (t.data.size() + kAlignment - 1) / kAlignment * kAlignment;
  }
  head.resize((head.size() + kAlignment - 1) / kAlignment * kAlignment, 0);

  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return NotFound(tmp + ": cannot create (" + std::strerror(errno) + ")");
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  static const uint8_t kZeros[kAlignment] = {};
  for (const Tensor& t : tensors_) {
    ok = ok && std::fwrite(t.data.data(), 1, t.data.size(), f) == t.data.size();
    const size_t pad = (kAlignment - t.data.size() % kAlignment) % kAlignment;
    ok = ok && std::fwrite(kZeros, 1, pad, f) == pad;
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Internal(path + ": write failed (" + std::strerror(errno) + ")");
  }
  return Status::Ok();
}

}  // namespace pagoda
