// SPDX-License-Identifier: Apache-2.0
// The untyped core of every Array: storage, dtype, shape, strides and offset. Array<T> adds the type.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <variant>
#include <string>
#include <type_traits>
#include <vector>

#include "fusion/dtype.hpp"
#include "fusion/error.hpp"
#include "fusion/shape.hpp"

namespace fusion {

class Stream;

namespace detail { struct Storage; }

/// One dimension of a slice, like Python's start:stop:step (negative indices count from the end).
struct Slice {
  std::optional<std::int64_t> start, stop;
  std::int64_t step = 1;
};
/// NumPy's indexing spelled in C++ (`m(i, fz::_)` is `m[i, :]`, `m(fz::_, fz::step(2))` is `m[:, ::2]`):
/// `fz::_` a whole axis, `fz::slice(a, b, s)` a:b:s, `fz::from(a)` a:, `fz::to(b)` :b, `fz::step(s)` ::s.
inline constexpr Slice _{};
constexpr Slice slice(std::int64_t start, std::int64_t stop, std::int64_t step = 1) { return {start, stop, step}; }
constexpr Slice from(std::int64_t start, std::int64_t step = 1) { return {start, std::nullopt, step}; }
constexpr Slice to(std::int64_t stop, std::int64_t step = 1) { return {std::nullopt, stop, step}; }
constexpr Slice step(std::int64_t step) { return {std::nullopt, std::nullopt, step}; }

class PinnedMemory;

class ArrayBase {
 public:
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  /// Element (not byte) strides.
  const Strides& strides() const { return strides_; }
  std::int64_t offset() const { return offset_; }
  int ndim() const { return shape_.size(); }
  std::int64_t size() const { return numel(shape_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(size()) * itemsize(dtype_); }
  /// The bytes a kernel reading this view touches: nbytes(), but a piece's own for a view placed() in a join.
  std::size_t touched_bytes() const {
    return piece_elements_ < 0 ? nbytes() : static_cast<std::size_t>(piece_elements_) * itemsize(dtype_);
  }
  int device() const;
  bool is_contiguous() const;
  /// A placeholder has a shape and dtype but no memory: for fz::inspect without a GPU.
  bool is_placeholder() const { return placeholder_; }
  bool has_storage() const { return storage_ != nullptr; }
  /// What the array's elements live in: its storage, or a placeholder's stand-in shared by its views
  /// (so fz::inspect sees overlaps between placeholders as it would between arrays); null when empty.
  const void* memory_identity() const {
    return storage_ ? static_cast<const void*>(storage_.get()) : placeholder_memory_.get();
  }
  /// How many handles (arrays and views, this one included) share this array's memory; 0 when empty.
  long memory_references() const { return storage_ ? storage_.use_count() : placeholder_memory_.use_count(); }
  /// Whether no one else can see this array's memory: no other array or view shares it, it is fusion's own
  /// (not fz::from_device's), and its address never left fusion (data_ptr<U>(), DLPack). Replacing the
  /// memory of such an array is indistinguishable from writing into it.
  bool memory_is_private() const;
  /// Device address of the first element (the offset applied).
  std::uint64_t data_ptr() const;
  /// The same address as a typed pointer, for other libraries (cuBLAS, thrust, a raw kernel): `U` is the
  /// element type (a TypeError otherwise), a type of the same size (CUDA's __half for fz::half), or void.
  /// The memory is used on the current stream's order: see record_stream() for work on other streams.
  template <class U> U* data_ptr() const {
    if constexpr (Element<std::remove_cv_t<U>>) {
      if (dtype_of<std::remove_cv_t<U>> != dtype_)
        throw TypeError(std::string("data_ptr<") + std::string(dtype_name(dtype_of<std::remove_cv_t<U>>)) +
                        ">() of an array of " + std::string(dtype_name(dtype_)) + "; ask for the element type");
    } else if constexpr (!std::is_void_v<U>) {
      if (sizeof(U) != itemsize(dtype_))
        throw TypeError(std::string("data_ptr<U>(): U has ") + std::to_string(sizeof(U)) +
                        " bytes, the elements of this " + std::string(dtype_name(dtype_)) + " array " +
                        std::to_string(itemsize(dtype_)));
    }
    note_escape();
    return reinterpret_cast<U*>(static_cast<std::uintptr_t>(data_ptr()));
  }
  const std::shared_ptr<detail::Storage>& storage() const { return storage_; }
  /// Marks the memory as reachable by code fusion does not see (a raw pointer handed out): it may change
  /// behind fusion's back, so fusion never caches copies of it.
  void note_escape() const;
  /// Declares that work enqueued on `stream` so far (a cuBLAS call, a kernel of another library) uses
  /// this array's memory: it is not freed or reused before that work finishes, as PyTorch's
  /// record_stream. Call it after enqueuing the work. fusion's own kernels and copies need no call.
  void record_stream(const Stream& stream) const;

  // Untyped operations used by Array<T> and the runtime.
  static ArrayBase make_empty(DType d, const Shape& shape);
  static ArrayBase make_placeholder(DType d, const Shape& shape);
  /// An array whose memory is allocated when first used (a region's result that may never need any).
  static ArrayBase make_deferred(DType d, const Shape& shape);
  /// An array over `storage` (external memory: fz::from_device) with the given element strides.
  static ArrayBase make_external(DType d, const Shape& shape, const Strides& strides,
                                 std::shared_ptr<detail::Storage> storage);
  void upload(const void* host, std::size_t count);  ///< host -> this; `count` must equal size()
  void download(void* host) const;                   ///< this -> host; waits for its device's current stream
  /// this -> `host` (page-locked, exactly nbytes()), enqueued on the current stream; returns at once.
  void download_async(PinnedMemory& host) const;
  /// `host` (page-locked, exactly nbytes()) -> this (a view writes through), enqueued; returns at once.
  void upload_async(PinnedMemory& host);
  ArrayBase reshaped(Shape shape) const;             ///< a view when the layout allows, else a copy
  ArrayBase transposed(std::vector<int> axes) const; ///< reversed axes when `axes` is empty
  ArrayBase sliced(const std::vector<Slice>& per_axis) const;
  ArrayBase broadcast(const Shape& shape) const;
  ArrayBase expanded(int axis) const;                ///< a new axis of extent 1
  /// This view seen in a larger index space `shape` (as many axes) that holds it from position `at`: its element
  /// at p there is its own at p - at. Positions outside it address memory past it, which fz::concatenate's
  /// kernels never read (a piece's arrays are read only where the piece lies).
  ArrayBase placed(const Shape& shape, const std::vector<std::int64_t>& at) const;
  ArrayBase squeezed(std::optional<int> axis) const;  ///< without axis `axis` of extent 1, or every such axis
  /// NumPy's basic indexing: per leading axis an integer (that element; the axis is dropped) or a slice;
  /// the axes after them whole. An integer outside [-n, n) is an IndexError.
  ArrayBase indexed(const std::vector<std::variant<std::int64_t, Slice>>& per_axis) const;
  ArrayBase contiguous_copy() const;                 ///< a fresh C-ordered copy on the current stream

  /// An array of dtype `d` without memory (what `Array<T>()` is).
  explicit ArrayBase(DType d) : dtype_(d) {}

 protected:

  std::shared_ptr<detail::Storage> storage_;
  DType dtype_;
  Shape shape_;
  Strides strides_;
  std::int64_t offset_ = 0;
  bool placeholder_ = false;
  std::shared_ptr<const int> placeholder_memory_;  // a placeholder's identity, shared by its views
  std::int64_t piece_elements_ = -1;  // placed(): the elements of the piece (the view's shape is the join's)
};

}  // namespace fusion
