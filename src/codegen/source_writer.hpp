// SPDX-License-Identifier: Apache-2.0
// A tiny indentation-aware writer that every codegen pass uses, so generated kernels read like hand
// written ones and are byte-for-byte deterministic.
#pragma once
#include <fmt/format.h>

#include <string>
#include <string_view>

namespace fusion::codegen {

class SourceWriter {
 public:
  template <class... Args> SourceWriter& line(fmt::format_string<Args...> f, Args&&... args) {
    out_.append(static_cast<std::size_t>(2 * depth_), ' ');
    out_ += fmt::format(f, std::forward<Args>(args)...);
    out_ += '\n';
    return *this;
  }
  /// Writes text that may span several lines (user code), each line at the current indentation.
  SourceWriter& text(std::string_view t) {
    while (!t.empty()) {
      const std::size_t end = t.find('\n');
      const std::string_view l = t.substr(0, end);
      if (!l.empty()) out_.append(static_cast<std::size_t>(2 * depth_), ' ');
      out_.append(l);
      out_ += '\n';
      if (end == std::string_view::npos) break;
      t.remove_prefix(end + 1);
    }
    return *this;
  }
  SourceWriter& blank() {
    out_ += '\n';
    return *this;
  }
  /// Writes `head {`, indents until the returned guard ends, then writes `}`.
  struct Block {
    SourceWriter& w;
    ~Block() {
      --w.depth_;
      w.line("}}");
    }
  };
  template <class... Args> [[nodiscard]] Block block(fmt::format_string<Args...> f, Args&&... args) {
    out_.append(static_cast<std::size_t>(2 * depth_), ' ');
    const std::string head = fmt::format(f, std::forward<Args>(args)...);
    out_ += head.empty() ? "{\n" : head + " {\n";
    ++depth_;
    return Block{*this};
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
  int depth_ = 0;
};

}  // namespace fusion::codegen
