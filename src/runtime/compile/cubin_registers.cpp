// SPDX-License-Identifier: Apache-2.0
#include "runtime/compile/cubin_registers.hpp"

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace fusion::detail {
namespace {

/// Little-endian reads within the image (nullopt past its end: a truncated or foreign file).
class Image {
 public:
  explicit Image(std::string_view bytes) : bytes_(bytes) {}
  template <class T>
  std::optional<T> at(std::uint64_t offset) const {
    if (offset > bytes_.size() || bytes_.size() - offset < sizeof(T)) return std::nullopt;
    T v;
    std::memcpy(&v, bytes_.data() + offset, sizeof(T));  // (x86 and the GPUs' hosts are little-endian, as cubins)
    return v;
  }
  /// The NUL-terminated string at `offset`, or nullopt where none ends within the image.
  std::optional<std::string_view> string(std::uint64_t offset) const {
    if (offset >= bytes_.size()) return std::nullopt;
    const std::size_t end = bytes_.find('\0', offset);
    if (end == std::string_view::npos) return std::nullopt;
    return bytes_.substr(offset, end - offset);
  }
  std::size_t size() const { return bytes_.size(); }

 private:
  std::string_view bytes_;
};

struct Section {
  std::uint32_t name = 0, info = 0;
  std::uint64_t offset = 0, size = 0;
};

constexpr std::uint8_t kSizedValue = 4;   // EIFMT_SVAL: a 16-bit size, then that many bytes
constexpr std::uint8_t kRegCount = 0x2f;  // EIATTR_REGCOUNT: the function's symbol index, its registers

}  // namespace

int registers_in_cubin(std::string_view cubin, std::string_view kernel) {
  const Image image(cubin);
  if (cubin.size() < 64 || cubin.substr(0, 4) != "\x7f" "ELF" || cubin[4] != 2 /* 64-bit */ || cubin[5] != 1 /* LE */)
    return -1;
  const auto shoff = image.at<std::uint64_t>(0x28);
  const auto shentsize = image.at<std::uint16_t>(0x3a), shnum = image.at<std::uint16_t>(0x3c),
             shstrndx = image.at<std::uint16_t>(0x3e);
  if (!shoff || !shentsize || !shnum || !shstrndx || *shentsize < 64 || *shstrndx >= *shnum) return -1;
  const auto section = [&](unsigned i) -> std::optional<Section> {
    const std::uint64_t h = *shoff + std::uint64_t{i} * *shentsize;
    const auto name = image.at<std::uint32_t>(h), info = image.at<std::uint32_t>(h + 44);
    const auto offset = image.at<std::uint64_t>(h + 24), size = image.at<std::uint64_t>(h + 32);
    if (!name || !info || !offset || !size || *offset > image.size() || image.size() - *offset < *size) return std::nullopt;
    return Section{*name, *info, *offset, *size};
  };
  const auto names = section(*shstrndx);
  if (!names) return -1;
  // The kernel's symbol: its code section ".text.<kernel>" names it in sh_info.
  std::optional<std::uint32_t> symbol;
  std::optional<Section> info;
  const std::string text = ".text." + std::string(kernel);
  for (unsigned i = 0; i < *shnum; ++i) {
    const auto s = section(i);
    if (!s) return -1;
    const auto name = image.string(names->offset + s->name);
    if (!name) return -1;
    if (*name == text) symbol = s->info;
    if (*name == ".nv.info") info = s;
  }
  if (!info) return -1;
  // Attribute records: a format byte, an attribute byte, then two bytes of value, or of size for a sized value.
  int found = -1, counts = 0;
  for (std::uint64_t p = info->offset, end = info->offset + info->size; p + 4 <= end;) {
    const std::uint8_t format = static_cast<std::uint8_t>(cubin[p]), attribute = static_cast<std::uint8_t>(cubin[p + 1]);
    if (format != kSizedValue) {
      p += 4;
      continue;
    }
    const std::uint16_t bytes = *image.at<std::uint16_t>(p + 2);
    if (p + 4 + bytes > end) return -1;
    if (attribute == kRegCount && bytes == 8) {
      const std::uint32_t of = *image.at<std::uint32_t>(p + 4), registers = *image.at<std::uint32_t>(p + 8);
      ++counts;
      if (symbol && of == *symbol) return static_cast<int>(registers);
      found = static_cast<int>(registers);
    }
    p += 4 + bytes;
  }
  return !symbol && counts == 1 ? found : -1;
}

}  // namespace fusion::detail
