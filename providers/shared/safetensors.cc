#include "providers/shared/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "src/json_number.h"

namespace fleet {

namespace {

using Json = nlohmann::json;

Result<SafetensorsHeader> Fail(const std::string& why) {
  return Result<SafetensorsHeader>::Error(why);
}

// A JSON number that is a non-negative integer.
bool AsUnsigned(const Json& v, uint64_t* out) {
  const std::optional<uint64_t> n = NonNegativeInteger(v);
  if (n) *out = *n;
  return n.has_value();
}

std::string Quoted(const std::string& s) {
  // Names come from the file: keep the message one short line.
  std::string q = s.size() > 80 ? s.substr(0, 80) + "..." : s;
  for (char& c : q)
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  return "'" + q + "'";
}

}  // namespace

int SafetensorsDtypeBits(std::string_view dtype) {
  static const std::map<std::string, int, std::less<>> kBits = {
      {"BOOL", 8},    {"U8", 8},   {"I8", 8},   {"F8_E5M2", 8}, {"F8_E4M3", 8},
      {"F8_E8M0", 8}, {"I16", 16}, {"U16", 16}, {"F16", 16},    {"BF16", 16},
      {"I32", 32},    {"U32", 32}, {"F32", 32}, {"F64", 64},    {"I64", 64},
      {"U64", 64},    {"C64", 64}, {"F4", 4},   {"F6_E2M3", 6}, {"F6_E3M2", 6}};
  auto it = kBits.find(dtype);
  return it == kBits.end() ? 0 : it->second;
}

uint64_t SafetensorsHeaderLength(std::string_view prefix) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(prefix[i]);
  return n;
}

Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view json, uint64_t header_length,
                                                 uint64_t file_size) {
  if (file_size < 8) return Fail("file is " + std::to_string(file_size) + " bytes: no header");
  if (header_length == 0) return Fail("header length is 0");
  if (header_length > kMaxSafetensorsHeader)
    return Fail("header length " + std::to_string(header_length) +
                " exceeds 100 MB: not a safetensors file, or a corrupt one");
  if (header_length > file_size - 8)
    return Fail("header length " + std::to_string(header_length) + " runs past the end of the " +
                std::to_string(file_size) + "-byte file: truncated");
  if (json.size() != header_length)
    return Fail("got " + std::to_string(json.size()) + " header bytes, expected " +
                std::to_string(header_length));
  if (json.empty() || json.front() != '{') return Fail("header does not start with '{'");

  Json root = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return Fail("header is not a JSON object");

  SafetensorsHeader h;
  h.header_length = header_length;
  const uint64_t data_length = file_size - 8 - header_length;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const Json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return Fail("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return Fail("__metadata__ value " + Quoted(m.key()) + " is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object()) return Fail("tensor " + Quoted(name) + " is not an object");
    SafetensorsTensor t;
    t.name = name;
    auto dtype = v.find("dtype");
    auto shape = v.find("shape");
    auto offsets = v.find("data_offsets");
    if (dtype == v.end() || !dtype->is_string())
      return Fail("tensor " + Quoted(name) + " has no dtype");
    if (shape == v.end() || !shape->is_array())
      return Fail("tensor " + Quoted(name) + " has no shape");
    if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2 ||
        !AsUnsigned((*offsets)[0], &t.begin) || !AsUnsigned((*offsets)[1], &t.end))
      return Fail("tensor " + Quoted(name) + " has no data_offsets [begin, end]");
    t.dtype = dtype->get<std::string>();
    const int bits = SafetensorsDtypeBits(t.dtype);
    if (bits == 0) return Fail("tensor " + Quoted(name) + " has unknown dtype " + Quoted(t.dtype));
    uint64_t elements = 1;
    for (const Json& d : *shape) {
      uint64_t dim = 0;
      if (!AsUnsigned(d, &dim))
        return Fail("tensor " + Quoted(name) + " has a shape that is not a list of sizes");
      if (__builtin_mul_overflow(elements, dim, &elements))
        return Fail("tensor " + Quoted(name) + " shape overflows");
      t.shape.push_back(dim);
    }
    if (t.end < t.begin)
      return Fail("tensor " + Quoted(name) + " ends (" + std::to_string(t.end) +
                  ") before it begins (" + std::to_string(t.begin) + ")");
    if (t.end > data_length)
      return Fail("tensor " + Quoted(name) + " ends at byte " + std::to_string(t.end) +
                  " of the data, the file holds " + std::to_string(data_length) +
                  " bytes of data: truncated");
    uint64_t total_bits = 0;
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(bits), &total_bits) ||
        total_bits % 8 != 0)
      return Fail("tensor " + Quoted(name) + " (" + t.dtype + ") has a shape that is not a " +
                  "whole number of bytes");
    if (total_bits / 8 != t.end - t.begin)
      return Fail("tensor " + Quoted(name) + " is " + t.dtype + " with " +
                  std::to_string(elements) + " elements = " + std::to_string(total_bits / 8) +
                  " bytes, but its data_offsets span " + std::to_string(t.end - t.begin));
    h.tensors.push_back(std::move(t));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
              return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
            });
  // The offsets must tile [0, data length) with no gap and no overlap (the
  // reference implementation refuses anything else).
  uint64_t expected = 0;
  for (const SafetensorsTensor& t : h.tensors) {
    if (t.begin < expected)
      return Fail("tensor " + Quoted(t.name) + " overlaps the one before it (begins at " +
                  std::to_string(t.begin) + ", previous ends at " + std::to_string(expected) + ")");
    if (t.begin > expected)
      return Fail("gap in the data before tensor " + Quoted(t.name) + " (bytes " +
                  std::to_string(expected) + ".." + std::to_string(t.begin) + ")");
    expected = t.end;
  }
  if (expected != data_length)
    return Fail("tensors end at data byte " + std::to_string(expected) + " but the file holds " +
                std::to_string(data_length) + " bytes of data (size " + std::to_string(file_size) +
                " = 8 + " + std::to_string(header_length) + " header + data)" +
                (expected > data_length ? ": truncated" : ": extra bytes"));
  h.data_length = expected;
  return h;
}

Result<SafetensorsHeader> ParseSafetensorsPrefix(std::string_view prefix, uint64_t file_size) {
  if (prefix.size() < 8 || file_size < 8)
    return Fail("file is " + std::to_string(file_size) + " bytes: no header");
  uint64_t n = SafetensorsHeaderLength(prefix);
  if (n > kMaxSafetensorsHeader || n > file_size - 8)
    return ParseSafetensorsHeader({}, n, file_size);
  if (prefix.size() - 8 < n)
    return Fail("only " + std::to_string(prefix.size() - 8) + " of " + std::to_string(n) +
                " header bytes read");
  return ParseSafetensorsHeader(prefix.substr(8, n), n, file_size);
}

}  // namespace fleet
