// SPDX-License-Identifier: Apache-2.0
// Ordering between streams of different devices, shared by to_device and the replica cache.
#pragma once
#include "fusion/stream.hpp"

namespace fusion::detail {

/// Later work on `waiter` waits for the work enqueued on `signaller` so far (an event between them; nothing
/// when they are one stream). The streams may belong to different devices.
void order_after(const Stream& waiter, const Stream& signaller);

}  // namespace fusion::detail
