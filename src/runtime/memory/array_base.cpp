// SPDX-License-Identifier: Apache-2.0
// Allocation, transfers and views of untyped arrays.
#include <fmt/format.h>

#include <cstring>
#include <numeric>
#include <optional>

#include "fusion/array_base.hpp"
#include "fusion/device.hpp"
#include "fusion/error.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/memory/array_copy.hpp"
#include "runtime/cuda/held_work.hpp"
#include "fusion/stream.hpp"
#include "runtime/memory/storage.hpp"

namespace fusion {
namespace {

int normalize_axis(int axis, int ndim, const char* what) {
  if (axis < -ndim || axis >= ndim)
    throw ShapeError(fmt::format("{}: axis {} is out of range for an array of {} dimension(s)", what, axis, ndim));
  return axis < 0 ? axis + ndim : axis;
}

void check_shape(const Shape& s) {
  for (std::int64_t e : s)
    if (e < 0) throw ShapeError(fmt::format("shape {} has a negative extent", to_string(s)));
}

}  // namespace

ArrayBase ArrayBase::make_empty(DType d, const Shape& shape) {
  check_shape(shape);
  ArrayBase a(d);
  a.shape_ = shape;
  a.strides_ = contiguous_strides(shape);
  a.storage_ = std::make_shared<detail::Storage>(a.nbytes(), detail::current_stream_state());
  return a;
}

ArrayBase ArrayBase::make_deferred(DType d, const Shape& shape) {
  check_shape(shape);
  ArrayBase a(d);
  a.shape_ = shape;
  a.strides_ = contiguous_strides(shape);
  a.storage_ =
      std::make_shared<detail::Storage>(a.nbytes(), detail::current_stream_state(), detail::Storage::Deferred{});
  return a;
}

ArrayBase ArrayBase::make_external(DType d, const Shape& shape, const Strides& strides,
                                   std::shared_ptr<detail::Storage> storage) {
  ArrayBase a(d);
  a.shape_ = shape;
  a.strides_ = strides;
  a.storage_ = std::move(storage);
  return a;
}

ArrayBase ArrayBase::make_placeholder(DType d, const Shape& shape) {
  check_shape(shape);
  ArrayBase a(d);
  a.shape_ = shape;
  a.strides_ = contiguous_strides(shape);
  a.placeholder_ = true;
  a.placeholder_memory_ = std::make_shared<const int>(0);
  return a;
}

int ArrayBase::device() const { return storage_ ? storage_->device : -1; }

bool ArrayBase::is_contiguous() const {
  if (size() == 0) return true;
  const Strides c = contiguous_strides(shape_);
  for (int i = 0; i < ndim(); ++i)
    if (shape_[i] != 1 && strides_[i] != c[i]) return false;
  return true;
}

void ArrayBase::record_stream(const Stream& stream) const {
  if (!storage_) return;  // nothing to keep alive
  detail::region_barrier();
  if (stream.state()->device != storage_->device)
    throw Error(fmt::format("record_stream: the array lives on device {}, the stream on device {}", storage_->device,
                            stream.state()->device));
  detail::ensure_context(storage_->device);
  storage_->note_use(stream.state());
  storage_->escaped = true;  // another library's work uses it: writes fusion cannot see
}

void ArrayBase::note_escape() const {
  if (storage_) storage_->escaped = true;
}

bool ArrayBase::memory_is_private() const {
  return !storage_ || (storage_.use_count() == 1 && !storage_->external && !storage_->escaped.load());
}

std::uint64_t ArrayBase::data_ptr() const {
  // A placeholder's memory starts at (aligned) address 0 and its views keep their offsets, so
  // fz::inspect of a view shows the variant a real call gets (a misaligned view: no 16-byte vectors).
  if (!storage_) return static_cast<std::uint64_t>(offset_ * static_cast<std::int64_t>(itemsize(dtype_)));
  detail::region_barrier();  // a raw address is a result needed in memory: what a region recorded runs first
  // Every use of an array's memory comes through here, after the operation's ensure_context noticed any reset.
  detail::check_not_reset(storage_->generation, storage_->device, "this array");
  storage_->materialize();
  return storage_->ptr + static_cast<std::uint64_t>(offset_ * static_cast<std::int64_t>(itemsize(dtype_)));
}

void ArrayBase::upload(const void* host, std::size_t count) {
  if (count != static_cast<std::size_t>(size()))
    throw ShapeError(fmt::format("asarray: {} host elements cannot fill shape {} ({} elements)", count,
                                 to_string(shape_), size()));
  if (!is_contiguous()) throw Error("internal: upload into a non-contiguous array");
  if (count == 0) return;
  detail::outside_step("copying host data into an array");
  if (storage_->device != detail::tls_current_device)
    return detail::on_device(storage_->device, [&] { upload(host, count); });
  const auto& stream = detail::current_stream_state();
  const std::uint64_t dst = data_ptr();
  storage_->note_use(stream);
  storage_->note_write();
  PinnedMemoryPool& pinned = default_pinned_memory_pool();
  void* staging = pinned.acquire(nbytes());
  std::memcpy(staging, host, nbytes());
  FUSION_CU(cuMemcpyHtoDAsync, dst, staging, nbytes(), stream->handle);
  pinned.release(staging, stream->handle);  // reusable once this copy has run
}

void ArrayBase::download(void* host) const {
  if (placeholder_) throw Error("a placeholder array has no data; it exists for fz::inspect");
  if (!storage_ || size() == 0) return;
  detail::outside_step("reading an array on the host");
  if (storage_->device != detail::tls_current_device)
    return detail::on_device(storage_->device, [&] { download(host); });
  if (!is_contiguous()) return contiguous_copy().download(host);
  const auto& stream = detail::current_stream_state();
  const std::uint64_t src = data_ptr();
  storage_->note_use(stream);
  PinnedMemoryPool& pinned = default_pinned_memory_pool();
  void* staging = pinned.acquire(nbytes());
  FUSION_CU(cuMemcpyDtoHAsync, staging, src, nbytes(), stream->handle);
  FUSION_CU(cuStreamSynchronize, stream->handle);
  std::memcpy(host, staging, nbytes());
  pinned.release(staging, stream->handle);
}

ArrayBase ArrayBase::contiguous_copy() const {
  if (placeholder_) return make_placeholder(dtype_, shape_);  // a copy is other memory, also for placeholders
  if (!storage_) return *this;  // empty arrays copy as they are
  // A copy lives where the array does, whichever device is current (a std::vector of one array per device
  // copies each on its own; on two H100s the copy of device 1's array failed while device 0 was current).
  std::optional<DeviceScope> on;
  if (device() != detail::tls_current_device) on.emplace(Device(device()));
  ArrayBase out(dtype_);
  detail::copy_array(*this, out, detail::AssignMode::fresh);
  return out;
}

ArrayBase ArrayBase::reshaped(Shape shape) const {
  int infer = -1;
  std::int64_t known = 1;
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw ShapeError("reshape: only one dimension can be -1");
      infer = i;
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || size() % known != 0)
      throw ShapeError(fmt::format("reshape: cannot infer the -1 in {} for {} elements", to_string(shape), size()));
    shape[infer] = size() / known;
  }
  check_shape(shape);
  if (numel(shape) != size())
    throw ShapeError(fmt::format("reshape: cannot reshape an array of shape {} ({} elements) into {} ({} elements)",
                                 to_string(shape_), size(), to_string(shape), numel(shape)));
  if (!is_contiguous()) return contiguous_copy().reshaped(shape);
  ArrayBase v = *this;
  v.shape_ = shape;
  v.strides_ = contiguous_strides(shape);
  return v;
}

ArrayBase ArrayBase::transposed(std::vector<int> axes) const {
  const int n = ndim();
  if (axes.empty()) {
    axes.resize(static_cast<std::size_t>(n));
    std::iota(axes.rbegin(), axes.rend(), 0);
  }
  if (static_cast<int>(axes.size()) != n)
    throw ShapeError(fmt::format("transpose: {} axes given for an array of {} dimension(s)", axes.size(), n));
  std::vector<bool> seen(static_cast<std::size_t>(n), false);
  ArrayBase v = *this;
  for (int i = 0; i < n; ++i) {
    const int a = normalize_axis(axes[static_cast<std::size_t>(i)], n, "transpose");
    if (seen[static_cast<std::size_t>(a)]) throw ShapeError(fmt::format("transpose: axis {} repeated", a));
    seen[static_cast<std::size_t>(a)] = true;
    v.shape_[i] = shape_[a];
    v.strides_[i] = strides_[a];
  }
  return v;
}

ArrayBase ArrayBase::sliced(const std::vector<Slice>& per_axis) const {
  if (static_cast<int>(per_axis.size()) > ndim())
    throw ShapeError(fmt::format("slice: {} slices given for an array of {} dimension(s)", per_axis.size(), ndim()));
  ArrayBase v = *this;
  for (int i = 0; i < static_cast<int>(per_axis.size()); ++i) {
    const Slice& s = per_axis[static_cast<std::size_t>(i)];
    const std::int64_t len = shape_[i], step = s.step;
    if (step == 0) throw ShapeError(fmt::format("slice: step of axis {} is zero", i));
    auto clamp = [&](std::optional<std::int64_t> x, std::int64_t dflt, std::int64_t lo, std::int64_t hi) {
      if (!x) return dflt;
      std::int64_t y = *x < 0 ? *x + len : *x;
      return std::clamp(y, lo, hi);
    };
    const std::int64_t start = step > 0 ? clamp(s.start, 0, 0, len) : clamp(s.start, len - 1, -1, len - 1);
    const std::int64_t stop = step > 0 ? clamp(s.stop, len, 0, len) : clamp(s.stop, -1, -1, len - 1);
    const std::int64_t count = step > 0 ? std::max<std::int64_t>(0, (stop - start + step - 1) / step)
                                        : std::max<std::int64_t>(0, (start - stop + (-step) - 1) / (-step));
    if (count > 0) v.offset_ += start * strides_[i];
    v.shape_[i] = count;
    v.strides_[i] = strides_[i] * step;
  }
  return v;
}

ArrayBase ArrayBase::indexed(const std::vector<std::variant<std::int64_t, Slice>>& per_axis) const {
  if (static_cast<int>(per_axis.size()) > ndim())
    throw IndexError(fmt::format("too many indices: {} for an array of {} dimension(s)", per_axis.size(), ndim()));
  std::vector<Slice> slices;
  std::vector<int> dropped;
  for (int i = 0; i < static_cast<int>(per_axis.size()); ++i) {
    const auto& a = per_axis[static_cast<std::size_t>(i)];
    if (const Slice* s = std::get_if<Slice>(&a)) {
      slices.push_back(*s);
      continue;
    }
    const std::int64_t k = std::get<std::int64_t>(a), n = shape_[i];
    if (k < -n || k >= n)
      throw IndexError(fmt::format("index {} is out of bounds for axis {} with size {}", k, i, n));
    const std::int64_t at = k < 0 ? k + n : k;
    slices.push_back(Slice{at, at + 1, 1});
    dropped.push_back(i);
  }
  ArrayBase v = sliced(slices);
  for (auto it = dropped.rbegin(); it != dropped.rend(); ++it) v = v.squeezed(*it);
  return v;
}

ArrayBase ArrayBase::broadcast(const Shape& shape) const {
  if (broadcast_shapes(shape_, shape) != shape)
    throw ShapeError(fmt::format("broadcast_to: shape {} cannot broadcast to {}", to_string(shape_), to_string(shape)));
  ArrayBase v = *this;
  v.shape_ = shape;
  v.strides_.resize(shape.size());
  const int lead = shape.size() - ndim();
  for (int i = 0; i < shape.size(); ++i) {
    const int j = i - lead;
    v.strides_[i] = (j < 0 || shape_[j] != shape[i]) ? 0 : strides_[j];
  }
  return v;
}

ArrayBase ArrayBase::placed(const Shape& shape, const std::vector<std::int64_t>& at) const {
  if (shape.size() != ndim() || static_cast<int>(at.size()) != ndim())
    throw Error(fmt::format("internal: placing shape {} in {}", to_string(shape_), to_string(shape)));
  ArrayBase v = *this;
  v.shape_ = shape;
  v.piece_elements_ = 1;  // (the distinct elements: a broadcast axis holds one)
  for (int d = 0; d < ndim(); ++d) v.piece_elements_ *= strides_[d] == 0 ? std::min<std::int64_t>(shape_[d], 1) : shape_[d];
  for (int d = 0; d < ndim(); ++d) {
    if (shape_[d] == 1) v.strides_[d] = 0;  // (one position: read there, no shift needed)
    v.offset_ -= at[static_cast<std::size_t>(d)] * v.strides_[d];
  }
  return v;
}

ArrayBase ArrayBase::squeezed(std::optional<int> axis) const {
  ArrayBase v = *this;
  if (axis) {
    const int a = normalize_axis(*axis, ndim(), "squeeze");
    if (shape_[a] != 1)
      throw ShapeError(
          fmt::format("squeeze: axis {} of shape {} has extent {}, not 1", *axis, to_string(shape_), shape_[a]));
    v.shape_.erase(a);
    v.strides_.erase(a);
    return v;
  }
  for (int a = ndim() - 1; a >= 0; --a)
    if (shape_[a] == 1) v.shape_.erase(a), v.strides_.erase(a);
  return v;
}

ArrayBase ArrayBase::expanded(int axis) const {
  const int a = normalize_axis(axis, ndim() + 1, "expand_dims");
  ArrayBase v = *this;
  v.shape_.insert(a, 1);
  v.strides_.insert(a, 0);
  return v;
}

}  // namespace fusion
