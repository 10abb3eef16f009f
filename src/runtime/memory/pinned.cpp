// SPDX-License-Identifier: Apache-2.0
// Page-locked host buffers and the asynchronous copies that use them.
#include "fusion/pinned.hpp"

#include <fmt/format.h>

#include "fusion/array_base.hpp"
#include "fusion/error.hpp"
#include "fusion/stream.hpp"
#include "fusion/device.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/memory/array_copy.hpp"
#include "runtime/memory/storage.hpp"

namespace fusion {

PinnedMemory::PinnedMemory(std::size_t bytes) : bytes_(bytes), device_(Device::current().id()) {
  detail::ensure_context(device_);
  if (bytes_ > 0) FUSION_CU(cuMemAllocHost, &ptr_, bytes_);
}

PinnedMemory::~PinnedMemory() {
  if (!ptr_ || !detail::context_for_release(device_)) return;
  try {
    synchronize();  // a copy still in flight reads or writes this memory
  } catch (...) {
  }
  detail::driver().cuMemFreeHost(ptr_);
}

void PinnedMemory::note_use() {
  Event e({.disable_timing = true});
  e.record();
  uses_.push_back(std::move(e));
  if (uses_.size() > 64) {  // keep the list short: drop the copies that already completed
    std::erase_if(uses_, [](const Event& u) { return u.done(); });
  }
}

void PinnedMemory::synchronize() const {
  for (const Event& e : uses_) e.synchronize();
}

namespace {
void check_size(const ArrayBase& a, const PinnedMemory& host, const char* what) {
  if (a.is_placeholder())
    throw Error(fmt::format("{}: a placeholder array has no data; it exists for fz::inspect", what));
  if (host.bytes() != static_cast<std::size_t>(a.nbytes()))
    throw ShapeError(fmt::format(
        "{}: the pinned buffer holds {} bytes; the {} array of shape {} needs {} (one element per array element)", what,
        host.bytes(), dtype_name(a.dtype()), to_string(a.shape()), a.nbytes()));
}
}  // namespace

void ArrayBase::download_async(PinnedMemory& host) const {
  check_size(*this, host, "copy_to");
  if (size() == 0) return;
  if (storage_->device != detail::tls_current_device)
    return detail::on_device(storage_->device, [&] { download_async(host); });
  if (!is_contiguous()) return contiguous_copy().download_async(host);  // the copy lives until its work is done
  const auto& stream = detail::current_stream_state();
  storage_->note_use(stream);
  FUSION_CU(cuMemcpyDtoHAsync, host.data(), data_ptr(), host.bytes(), stream->handle);
  host.note_use();
}

void ArrayBase::upload_async(PinnedMemory& host) {
  check_size(*this, host, "copy_from");
  if (size() == 0) return;
  if (storage_->device != detail::tls_current_device)
    return detail::on_device(storage_->device, [&] { upload_async(host); });
  if (!is_contiguous()) {  // into a contiguous array first, then one kernel into the view
    ArrayBase staged = make_empty(dtype_, shape_);
    staged.upload_async(host);
    detail::copy_array(staged, *this, detail::AssignMode::into);
    return;
  }
  const auto& stream = detail::current_stream_state();
  storage_->note_use(stream);
  storage_->note_write();
  FUSION_CU(cuMemcpyHtoDAsync, data_ptr(), host.data(), host.bytes(), stream->handle);
  host.note_use();
}

}  // namespace fusion
