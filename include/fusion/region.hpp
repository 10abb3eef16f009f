// SPDX-License-Identifier: Apache-2.0
// fz::Lazy's header under its earlier name: include fusion/lazy.hpp.
#pragma once
#include "fusion/lazy.hpp"
